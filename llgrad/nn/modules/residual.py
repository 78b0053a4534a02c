"""The last modules of `torch.nn` no family held: `NLLLoss2d` (PyTorch's deprecated alias of
`NLLLoss`), `LinearCrossEntropyLoss`, `AdaptiveLogSoftmaxWithLoss`, and the lazy
normalization layers `LazyBatchNorm1d/2d/3d` and `LazyInstanceNorm1d/2d/3d`."""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any, Sequence

from ... import functions as lg
from ...ir import dtypes as dt
from ...ir.dtypes import DType
from ...tensor import Tensor
from .. import functional as F
from .._residual import LinearCrossEntropyOptions, linear_cross_entropy
from .container import ModuleList, Sequential
from .lazy import LazyModuleMixin, UninitializedBuffer, UninitializedParameter
from .linear import Linear
from .loss import NLLLoss, _WeightedLoss
from .module import Module
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)

__all__ = [
    "NLLLoss2d",
    "LinearCrossEntropyLoss",
    "AdaptiveLogSoftmaxWithLoss",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


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
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
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
        output = lg.add(output, lg.gather(head_logprob, 1, lg.unsqueeze(head_index, 1)).reshape(-1))
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


def lazy_norm(base: type) -> type:
    """The lazy form of normalization class `base` (num_features from the first input)."""

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


LazyBatchNorm1d = lazy_norm(BatchNorm1d)
LazyBatchNorm2d = lazy_norm(BatchNorm2d)
LazyBatchNorm3d = lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = lazy_norm(InstanceNorm3d)

for _name in __all__:
    globals()[_name].__module__ = "llgrad.nn.modules"  # the public path, as the other modules
