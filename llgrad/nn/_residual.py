"""The last names of `torch.nn.functional` no family held: `gumbel_softmax`,
`linear_cross_entropy` (PyTorch 2.13) and its `LinearCrossEntropyOptions`. The modules
built on them are in `nn/modules/residual.py`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

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
    from . import functional as F  # circle: nn.functional -> here

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
    from . import functional as F  # circle: nn.functional -> here

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
    from . import functional as F  # circle: nn.functional -> here

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
