"""The last names of `torch.nn` and `torch.nn.functional` no family held.

Functional: `gumbel_softmax`, `linear_cross_entropy` (PyTorch 2.13) and its
`LinearCrossEntropyOptions`. Modules: `LinearCrossEntropyLoss`, `NLLLoss2d` (PyTorch's
deprecated alias), `AdaptiveLogSoftmaxWithLoss`, and the lazy normalization layers
`LazyBatchNorm1d/2d/3d` and `LazyInstanceNorm1d/2d/3d`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import namedtuple
from typing import Any, Sequence

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import no_grad
from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..tensor import Tensor

# --------------------------------------------------------------------------------------
# gumbel_softmax
# --------------------------------------------------------------------------------------


def gumbel_softmax(
    logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """A sample of the Gumbel-softmax distribution: softmax((logits + g) / tau) along `dim`
    with g ~ Gumbel(0, 1) drawn as -log(Exponential(1)) (from llgrad's generator, so other
    draws than PyTorch's). `hard=True` returns the one-hot of the argmax whose gradient is
    the soft sample's (straight-through). `eps` is deprecated and ignored (it warns when
    given), as in PyTorch."""
    from . import functional as F

    if not isinstance(logits, Tensor):
        raise TypeError(
            f"gumbel_softmax(): argument 'logits' must be Tensor, not {type(logits).__name__}"
        )
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    with no_grad():
        gumbels = lg.neg(lg.log(lg.empty_like(logits).exponential_()))
    y_soft = F.softmax(lg.div(lg.add(logits, gumbels), tau), dim)
    if not hard:
        return y_soft
    index = lg.argmax(y_soft, dim, keepdim=True)
    y_hard = lg.scatter(lg.zeros_like(logits), dim, index, 1.0)
    return lg.add(lg.sub(y_hard, y_soft.detach()), y_soft)


# --------------------------------------------------------------------------------------
# linear_cross_entropy
# --------------------------------------------------------------------------------------

_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """How `linear_cross_entropy` splits its batch (PyTorch 2.13's options class; passing
    one selects the chunked path, `None` the reference one).

    Fields: `batch_chunk_size` (rows per chunk; None: from `chunking_method`),
    `chunking_method` ("auto", "aspect_ratio" or "aspect_ratio:N": chunks whose logits take
    about the memory of the input, N times less with ":N"; None: `batch_chunk_size` or
    one chunk), `acc_policy` ("auto", "accurate", "balanced", "compact") and `acc_dtype`
    (float16/bfloat16/float32/float64 or None), `allow_retain_graph`.
    Where llgrad differs: each chunk's loss is computed with llgrad's autograd, so
    `acc_policy`/`acc_dtype` are validated but the arithmetic is the input dtype's, and a
    second backward with retain_graph always works."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: DType | None = None

    def __post_init__(self) -> None:
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method not in (None, "auto"):
            name, sep, factor = str(self.chunking_method).partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        size = self.batch_chunk_size
        if not (
            size is None or (isinstance(size, int) and not isinstance(size, bool) and size > 0)
        ):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in (
            dt.float16,
            dt.bfloat16,
            dt.float32,
            dt.float64,
        ):
            raise ValueError(
                f"acc_dtype must be one of {{None, float16, bfloat16, float32, "
                f"float64}}, got {self.acc_dtype!r}"
            )

    def chunk_size(self, num_batches: int, in_features: int, num_classes: int) -> int:
        """The rows per chunk for a batch of `num_batches` rows."""
        if self.batch_chunk_size is not None:
            return min(self.batch_chunk_size, max(num_batches, 1))
        method = self.chunking_method
        if method is None:
            return max(num_batches, 1)
        if method == "auto":
            method = "aspect_ratio:2"
        _, sep, factor = method.partition(":")
        k = int(factor) if sep else 1
        grow = -(-num_classes // max(in_features, 1))
        want = max(-(-num_batches // grow), 1)
        size = 1 << (want - 1).bit_length()
        return max(min(size // k, num_batches), 1)


@composite_function
def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Tensor | None = None,
    weight: Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options: LinearCrossEntropyOptions | None = None,
) -> Tensor:
    """`cross_entropy(linear(input, linear_weight, linear_bias), target, ...)`, as PyTorch
    2.13's fused op.

    Args: input (in_features) or (N, in_features); linear_weight (C, in_features) or
    (C, d1, ..., in_features) for a K-dimensional loss (then input must be batched);
    target class indices or probabilities (of the logits' shape); linear_bias (C, d1, ...);
    weight (C) per class; reduction, ignore_index (None: -100; refused with
    probabilities), label_smoothing as `cross_entropy`; options: a
    `LinearCrossEntropyOptions` computes the loss chunk by chunk over the batch (class
    indices, no K dims, no label smoothing; else the reference path).
    Where llgrad differs: a chunk's logits are kept for its backward, so chunking saves
    less memory than PyTorch's fused kernel."""
    from . import functional as F

    for name, t in (("input", input), ("linear_weight", linear_weight), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"linear_cross_entropy(): argument '{name}' must be Tensor, not {type(t).__name__}"
            )
    if input.ndim not in (1, 2):
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise RuntimeError(
            f"expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}"
        )
    batch = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            f"expected equal input and linear_weight last dimensions "
            f"(in_features), got {in_features} and {linear_weight.shape[-1]}, "
            f"respectively"
        )
    num_classes = linear_weight.shape[0]
    extra = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes,) + extra:
        raise RuntimeError(
            f"expected linear_bias shape {(num_classes,) + extra}, got {tuple(linear_bias.shape)}"
        )
    if extra and not batch:
        raise RuntimeError(
            f"K-dimensional loss defined by linear_weight shape "
            f"{tuple(linear_weight.shape)} requires batched input, (N, "
            f"{in_features}), got unbatched input with shape "
            f"{tuple(input.shape)}"
        )
    logits_shape = batch + (num_classes,) + extra
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains probabilities")
    ignore = -100 if ignore_index is None else ignore_index
    if (
        options is not None
        and not extra
        and label_smoothing == 0.0
        and reduction in ("mean", "sum", "none")
        and target._dtype is dt.int64
        and not probabilities
    ):
        return _chunked(
            input, linear_weight, target, linear_bias, weight, reduction, ignore, options
        )
    w2 = (
        linear_weight.reshape(math.prod(extra) * num_classes, in_features)
        if extra
        else linear_weight
    )
    b2 = linear_bias.reshape(-1) if (linear_bias is not None and extra) else linear_bias
    logits = F.linear(input, w2, b2).reshape(logits_shape)
    return F.cross_entropy(
        logits,
        target,
        weight=weight,
        reduction=reduction,
        ignore_index=ignore,
        label_smoothing=label_smoothing,
    )


def _chunked(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    linear_bias: Tensor | None,
    weight: Tensor | None,
    reduction: str,
    ignore: int,
    options: LinearCrossEntropyOptions,
) -> Tensor:
    """The loss of class-index targets computed over chunks of the batch rows; 'mean'
    divides by the summed class weights of the rows not ignored (cross_entropy's rule)."""
    from . import functional as F

    single = input.ndim == 1
    x = lg.unsqueeze(input, 0) if single else input
    t = lg.unsqueeze(target, 0) if single else target
    rows = x.shape[0]
    size = options.chunk_size(rows, x.shape[1], linear_weight.shape[0])
    pieces = []
    for start in range(0, rows, size):
        logits = F.linear(x[start : start + size], linear_weight, linear_bias)
        pieces.append(
            F.cross_entropy(
                logits,
                t[start : start + size],
                weight=weight,
                reduction="none",
                ignore_index=ignore,
            )
        )
    losses = lg.cat(pieces) if pieces else lg.zeros((0,), dtype=x._dtype)
    if reduction == "none":
        return losses[0] if single else losses
    total = lg.sum(losses)
    if reduction == "sum":
        return total
    keep = lg.ne(t, ignore)
    if weight is not None:
        safe = lg.where(keep, t, lg.zeros_like(t))
        denom = lg.sum(
            lg.where(
                keep,
                lg.index_select(weight, 0, safe.reshape(-1)).reshape(t.shape),
                lg.zeros((), dtype=weight._dtype),
            )
        )
    else:
        denom = lg.sum(keep.to(x._dtype))
    return lg.div(total, denom)


# --------------------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------------------


def _make_modules() -> dict[str, type]:
    """The module classes (made once the modules package is importable)."""
    from . import functional as F
    from .modules.container import ModuleList, Sequential
    from .modules.lazy import LazyModuleMixin, UninitializedBuffer, UninitializedParameter
    from .modules.linear import Linear
    from .modules.loss import NLLLoss, _WeightedLoss
    from .modules.module import Module
    from .modules.normalization import (
        BatchNorm1d,
        BatchNorm2d,
        BatchNorm3d,
        InstanceNorm1d,
        InstanceNorm2d,
        InstanceNorm3d,
    )

    class NLLLoss2d(NLLLoss):
        """PyTorch's deprecated name of `NLLLoss` for (N, C, H, W) inputs: the same loss."""

    class LinearCrossEntropyLoss(_WeightedLoss):
        """`linear_cross_entropy` with its own linear layer (`self.linear`, of
        `num_classes * prod(out_features)` outputs, stored 2-D and reshaped in forward, as
        PyTorch 2.13 does)."""

        def __init__(
            self,
            in_features: int,
            num_classes: int,
            *,
            out_features: tuple[int, ...] = (),
            bias: bool = False,
            device: Any = None,
            dtype: DType | None = None,
            reduction: str = "mean",
            weight: Tensor | None = None,
            ignore_index: int | None = None,
            label_smoothing: float = 0.0,
            options: LinearCrossEntropyOptions | None = None,
        ) -> None:
            if weight is not None and tuple(weight.shape) != (num_classes,):
                raise RuntimeError(
                    f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}"
                )
            if not 0.0 <= label_smoothing <= 1.0:
                raise RuntimeError(
                    f"expected label_smoothing to be in range [0, 1], got {label_smoothing}"
                )
            super().__init__(weight, None, None, reduction)
            self.num_classes = num_classes
            self.out_features = tuple(out_features)
            self.ignore_index = ignore_index
            self.label_smoothing = label_smoothing
            self.linear = Linear(
                in_features,
                math.prod(self.out_features) * num_classes,
                bias=bias,
                device=device,
                dtype=dtype,
            )
            self.options = options

        def forward(self, input: Tensor, target: Tensor) -> Tensor:
            w = self.linear.weight.reshape(
                (self.num_classes,) + self.out_features + (self.linear.in_features,)
            )
            b = (
                self.linear.bias.reshape((self.num_classes,) + self.out_features)
                if self.linear.bias is not None
                else None
            )
            return linear_cross_entropy(
                input,
                w,
                target,
                linear_bias=b,
                weight=self.weight,
                reduction=self.reduction,
                ignore_index=self.ignore_index,
                label_smoothing=self.label_smoothing,
                options=self.options,
            )

        def extra_repr(self) -> str:
            return (
                f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None},"
                f" reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}"
            )

    class AdaptiveLogSoftmaxWithLoss(Module):
        """Grave et al.'s adaptive softmax: the `cutoffs[0]` most frequent classes and one
        entry per tail cluster in a head softmax; each cluster's classes in a smaller
        softmax after a projection to in_features / div_value**(i+1) features. forward
        returns (output: each target's log-probability, loss: the mean of -output)."""

        def __init__(
            self,
            in_features: int,
            n_classes: int,
            cutoffs: Sequence[int],
            div_value: float = 4.0,
            head_bias: bool = False,
            device: Any = None,
            dtype: DType | None = None,
        ) -> None:
            super().__init__()
            cuts = list(cutoffs)
            if not cuts:
                raise ValueError("cutoffs should be a sequence of length larger than 0")
            if (
                cuts != sorted(cuts)
                or min(cuts) <= 0
                or max(cuts) > n_classes - 1
                or len(set(cuts)) != len(cuts)
                or any(int(c) != c for c in cuts)
            ):
                raise ValueError(
                    "cutoffs should be a sequence of unique, positive integers "
                    "sorted in an increasing order, where each value is "
                    "between 1 and n_classes-1"
                )
            self.in_features = in_features
            self.n_classes = n_classes
            self.cutoffs = cuts + [n_classes]
            self.div_value = div_value
            self.head_bias = head_bias
            self.shortlist_size = self.cutoffs[0]
            self.n_clusters = len(self.cutoffs) - 1
            self.head_size = self.shortlist_size + self.n_clusters
            self.head = Linear(
                in_features, self.head_size, bias=head_bias, device=device, dtype=dtype
            )
            self.tail = ModuleList()
            for i in range(self.n_clusters):
                hidden = int(in_features // (div_value ** (i + 1)))
                width = self.cutoffs[i + 1] - self.cutoffs[i]
                self.tail.append(
                    Sequential(
                        Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                        Linear(hidden, width, bias=False, device=device, dtype=dtype),
                    )
                )

        def reset_parameters(self) -> None:
            """Re-draw every linear layer's parameters."""
            self.head.reset_parameters()
            for proj in self.tail:
                for layer in proj:
                    layer.reset_parameters()

        def forward(self, input_: Tensor, target_: Tensor) -> Any:
            """(output, loss) for `input_` (N, in_features) and class indices `target_`
            (N) (or one unbatched example)."""
            if target_.ndim == 1:
                if input_.shape[0] != target_.shape[0]:
                    raise RuntimeError(
                        "Input and target should have the same size in the batch dimension."
                    )
                if input_.ndim != 2:
                    raise RuntimeError(
                        f"1D target tensor expects 2D input tensors, but "
                        f"found inputs with size {list(input_.shape)}"
                    )
            elif target_.ndim == 0:
                if input_.ndim != 1:
                    raise RuntimeError(
                        f"0D target tensor expects 1D input tensors, but "
                        f"found inputs with size {list(input_.shape)}"
                    )
            else:
                raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
            batched = target_.ndim > 0
            x = input_ if batched else lg.unsqueeze(input_, 0)
            t = target_ if batched else lg.unsqueeze(target_, 0)
            n = t.shape[0]
            if n and (int(lg.amin(t).item()) < 0 or int(lg.amax(t).item()) > self.n_classes - 1):
                raise RuntimeError(
                    f"Target values should be in [0, {self.n_classes - 1}], "
                    f"but values in range [{int(lg.amin(t).item())}, "
                    f"{int(lg.amax(t).item())}] were found. "
                )
            head_index = lg.clamp(t, max=self.shortlist_size - 1)
            output = lg.zeros((n,), dtype=x._dtype)
            for i in range(1, len(self.cutoffs)):
                low, high = self.cutoffs[i - 1], self.cutoffs[i]
                rows = lg.nonzero(lg.logical_and(lg.ge(t, low), lg.lt(t, high))).reshape(-1)
                if rows.numel() == 0:
                    continue
                head_index = lg.index_fill(head_index, 0, rows, self.shortlist_size + i - 1)
                local = F.log_softmax(self.tail[i - 1](lg.index_select(x, 0, rows)), dim=1)
                rel = lg.sub(lg.index_select(t, 0, rows), low)
                picked = lg.gather(local, 1, lg.unsqueeze(rel, 1)).reshape(-1)
                output = lg.index_add(output, 0, rows, picked)
            head_logprob = F.log_softmax(self.head(x), dim=1)
            output = lg.add(
                output, lg.gather(head_logprob, 1, lg.unsqueeze(head_index, 1)).reshape(-1)
            )
            loss = lg.mean(lg.neg(output))
            if not batched:
                output = output.reshape(())
            return _ASMoutput(output, loss)

        def _full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
            head_logprob = F.log_softmax(head_output, dim=1)
            parts = [head_logprob[:, : self.shortlist_size]]
            for i in range(self.n_clusters):
                cluster = F.log_softmax(self.tail[i](input), dim=1)
                parts.append(
                    lg.add(
                        cluster,
                        head_logprob[:, self.shortlist_size + i : self.shortlist_size + i + 1],
                    )
                )
            return lg.cat(parts, 1)

        def log_prob(self, input: Tensor) -> Tensor:
            """Log-probabilities of all n_classes classes for each row of `input`."""
            return self._full_log_prob(input, self.head(input))

        def predict(self, input: Tensor) -> Tensor:
            """The most probable class of each row (`log_prob(input).argmax(1)`)."""
            return lg.argmax(self.log_prob(input), dim=1)

    classes: dict[str, type] = {
        "NLLLoss2d": NLLLoss2d,
        "LinearCrossEntropyLoss": LinearCrossEntropyLoss,
        "AdaptiveLogSoftmaxWithLoss": AdaptiveLogSoftmaxWithLoss,
    }

    def lazy_norm(base: type) -> type:
        def __init__(
            self: Any,
            eps: float = 1e-5,
            momentum: float | None = 0.1,
            affine: bool = True,
            track_running_stats: bool = True,
            device: Any = None,
            dtype: DType | None = None,
            *,
            bias: bool = True,
        ) -> None:
            base.__init__(self, 0, eps, momentum, False, False, device, dtype)
            self.affine = affine
            self.track_running_stats = track_running_stats
            if affine:
                self.weight = UninitializedParameter(dtype=dtype)
                if bias:
                    self.bias = UninitializedParameter(dtype=dtype)
            if track_running_stats:
                self.running_mean = UninitializedBuffer(dtype=dtype)
                self.running_var = UninitializedBuffer(dtype=dtype)
                self.num_batches_tracked = lg.tensor(0, dtype=dt.int64)
            self._initialize_hook = self.register_forward_pre_hook(
                LazyModuleMixin._infer_parameters, with_kwargs=True
            )

        def reset_parameters(self: Any) -> None:
            if not self.has_uninitialized_params() and self.num_features != 0:
                base.reset_parameters(self)

        def initialize_parameters(self: Any, input: Tensor, *args: Any, **kwargs: Any) -> None:
            """num_features from the input's dimension 1 (as PyTorch, also for an unbatched
            instance-norm input, which then fails the size check as PyTorch's does);
            PyTorch's initialization."""
            if self.num_features != 0 and not self.has_uninitialized_params():
                return
            self.num_features = input.shape[1]
            if self.affine:
                self.weight.materialize((self.num_features,))
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()

        name = "Lazy" + base.__name__
        __init__.__doc__ = (
            f"A `{base.__name__}` whose num_features comes from the first "
            f"input (affine and tracked statistics by default, as PyTorch's "
            f"lazy norms, instance norms too)."
        )
        return type(
            name,
            (LazyModuleMixin, base),
            {
                "__init__": __init__,
                "reset_parameters": reset_parameters,
                "initialize_parameters": initialize_parameters,
                "cls_to_become": base,
                "__module__": "llgrad.nn.modules",
                "__doc__": f"A `{base.__name__}` whose num_features is inferred from the first "
                f"input's channel dimension; it becomes a `{base.__name__}` then.",
            },
        )

    for base in (BatchNorm1d, BatchNorm2d, BatchNorm3d):
        classes["Lazy" + base.__name__] = lazy_norm(base)
    for base in (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d):
        classes["Lazy" + base.__name__] = lazy_norm(base)
    for name, cls in classes.items():
        cls.__name__ = cls.__qualname__ = name
        cls.__module__ = "llgrad.nn.modules"
    return classes


_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])

MODULES = (
    "NLLLoss2d",
    "LinearCrossEntropyLoss",
    "AdaptiveLogSoftmaxWithLoss",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
)
