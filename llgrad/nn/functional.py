"""`llgrad.nn.functional`: PyTorch's functional layers, activations and losses.

Losses and layers that PyTorch records as one autograd node run as composite ops of
`llgrad.ops.nn` (one node with PyTorch's name, e.g. `NllLossBackward0`); the others are
built from differentiable functions exactly as PyTorch builds them (`cross_entropy` is
`nll_loss(log_softmax(x))`, `l1_loss` is `mean(abs(x - y))`, `dropout` multiplies by a
scaled mask). Every argument is checked here, before any kernel runs, and a bad one raises
an error naming the function, the shapes and the dtypes.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

from .. import functions as lg
from ..tape import anomaly, forward as forward_ad
from ..dispatch.apply import composite_function, interpreters, needs_grad, record
from ..dispatch.grad_mode import _state as grad_state
from ..dispatch.grad_mode import no_grad
from ..eager import elementwise as ew
from ..eager import views
from ..eager.linalg import run_matmul
from ..functions import fastpath
from ..ir import dtypes as dt, registry
from ..ir.types import TensorType
from ..ops import nn as nnops
from ..tensor import DENSE_CLASSES, Tensor

__all__ = [
    "linear",
    "relu",
    "relu_",
    "gelu",
    "sigmoid",
    "tanh",
    "silu",
    "softplus",
    "leaky_relu",
    "leaky_relu_",
    "elu",
    "elu_",
    "selu",
    "celu",
    "hardtanh",
    "hardtanh_",
    "relu6",
    "logsigmoid",
    "mish",
    "softsign",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "nll_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "mse_loss",
    "l1_loss",
    "layer_norm",
    "dropout",
    "embedding",
    "max_pool2d",
    "conv2d",
    "conv1d",
    "max_pool1d",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "batch_norm",
    "scaled_dot_product_attention",
    "pad",
    "one_hot",
]


# --------------------------------------------------------------------------------------
# Plumbing (shared with the submodules: `_base`)
# --------------------------------------------------------------------------------------

from ..functions._errors import serve_on_devices
from ..tracer.tensor import tracing
from ..transforms.batching import bottom
from ._base import (  # noqa: E402
    _act,
    _check_targets,
    _composite,
    _reduction,
    _softmax_dim,
    _tensor,
)

# --------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    _tensor("relu", "input", input)
    return input.relu_() if inplace else lg.relu(input)


def relu_(input: Tensor) -> Tensor:
    return relu(input, inplace=True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    _tensor("gelu", "input", input)
    return lg.gelu(input, approximate=approximate)


def sigmoid(input: Tensor) -> Tensor:
    return lg.sigmoid(_tensor("sigmoid", "input", input))


def tanh(input: Tensor) -> Tensor:
    return lg.tanh(_tensor("tanh", "input", input))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (complex inputs too, as PyTorch, computed as that product)."""
    _tensor("silu", "input", input)
    if input._dtype.is_complex:
        return _act("silu", _complex_silu, input, inplace)
    return _act("silu", lg.silu, input, inplace)


@composite_function
def _complex_silu(x: Tensor) -> Tensor:
    """x * sigmoid(x) for a complex `x` (one compiled graph per signature in eager mode)."""
    return lg.mul(x, lg.sigmoid(x))


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch)."""
    _tensor("softplus", "input", input)
    return lg.softplus(input, beta=float(beta), threshold=float(threshold))


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    _tensor("leaky_relu", "input", input)
    return _act("leaky_relu", lg.leaky_relu, input, inplace, negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    _tensor("elu", "input", input)
    return _act("elu", lg.elu, input, inplace, alpha)


def elu_(input: Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Tensor:
    """In-place `elu`: scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1)) (the
    `scale` and `input_scale` of PyTorch's `elu_`, with which selu and celu are made)."""
    _tensor("elu_", "input", input)
    return _act("elu", lg.elu, input, True, alpha, scale, input_scale)


@composite_function
def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """x clamped to [min_val, max_val]; the gradient is zero at the bounds themselves
    (PyTorch's hardtanh, unlike clamp, which passes it there)."""
    _tensor("hardtanh", "input", input)
    if min_val > max_val:
        raise ValueError(
            f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})"
        )

    def clip(x: Tensor) -> Tensor:
        # at a bound the value is x itself (a -0.0 input stays -0.0 against a 0.0 bound,
        # as in torch) and the gradient is zero: the bound's branch is detached
        low = lg.where(lg.lt(x, min_val), lg.full_like(x, min_val), x).detach()
        high = lg.where(lg.gt(x, max_val), lg.full_like(x, max_val), x).detach()
        return lg.where(lg.le(x, min_val), low, lg.where(lg.ge(x, max_val), high, x))

    return _act("hardtanh", clip, input, inplace)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


@composite_function
def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


@composite_function
def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), without overflow for large |x|."""
    _tensor("logsigmoid", "input", input)
    return lg.neg(lg.softplus(lg.neg(input)))


@composite_function
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    _tensor("mish", "input", input)
    return _act("mish", lambda x: lg.mul(x, lg.tanh(lg.softplus(x))), input, inplace)


def softsign(input: Tensor) -> Tensor:
    _tensor("softsign", "input", input)
    return lg.div(input, lg.add(lg.abs(input), 1))


def softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: dt.DType | None = None
) -> Tensor:
    _tensor("softmax", "input", input)
    return lg.softmax(input, _softmax_dim("softmax", input.ndim, dim), dtype=dtype)


def log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: dt.DType | None = None
) -> Tensor:
    _tensor("log_softmax", "input", input)
    return lg.log_softmax(input, _softmax_dim("log_softmax", input.ndim, dim), dtype=dtype)


# --------------------------------------------------------------------------------------
# Linear
# --------------------------------------------------------------------------------------


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`input @ weight.T + bias`, recorded as PyTorch records it: `AddmmBackward0` over a
    2-D view of the input (with a bias), `MmBackward0` without one. Integer and complex
    inputs run as matmul then add (a complex result's grad_fn is `AddBackward0`). A
    call of layouts seen before that autograd does not record runs directly
    (`_linear_direct`)."""
    out = _linear_direct(input, weight, bias)
    if out is not None:
        return out
    _tensor("linear", "input", input)
    _tensor("linear", "weight", weight)
    xs, ws = input._shape, weight._shape
    if len(ws) != 2:
        raise RuntimeError(
            f"linear(): weight must be 2-D (out_features, in_features), got shape {list(ws)}"
        )
    if not xs or xs[-1] != ws[1]:
        raise RuntimeError(
            f"linear(): mat1 and mat2 shapes cannot be multiplied (input "
            f"{list(xs)} and weight.T {[ws[1], ws[0]]})"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t._dtype is not input._dtype:
            raise RuntimeError(
                f"linear(): expected {name} of dtype {input._dtype.name} like "
                f"the input, got {t._dtype.name}"
            )
    if bias is not None:
        _tensor("linear", "bias", bias)
        bs = bias._shape
        if len(bs) > 1 or (len(bs) == 1 and bs[0] not in (1, ws[0])):
            raise RuntimeError(
                f"linear(): bias of shape {list(bs)} does not match out_features {ws[0]}"
            )
    x2 = input if len(xs) == 2 else lg.reshape(input, (-1, xs[-1]))
    wt = lg.t(weight)
    direct = False  # the product and the bias ran as `_linear_direct` runs them
    if bias is not None and not input._dtype.is_floating_point:
        out = lg.add(lg.matmul(x2, wt), bias)  # integer and complex: matmul, add
    elif bias is not None:
        out = _addmm_direct(bias, x2, wt)
        direct = out is not None
        if out is None:
            out = _composite("addmm", (bias, x2, wt), {})
    else:
        out = lg.matmul(x2, wt)
        direct = input._dtype.is_floating_point
    if len(xs) == 2:
        if direct:
            _learn_linear(input, weight, bias, wt, out)
        return out
    name = "ViewBackward0" if bias is not None else "UnsafeViewBackward0"
    return lg.reshape(out, tuple(xs[:-1]) + (ws[0],), name=name)


_ADDMM_ATTRS = {"beta": 1.0, "alpha": 1.0}

# (input, weight, bias layout keys; None without a bias) -> (the shape and strides of the
# weight's transposed view, the eager plan of the bias added in place into the product or
# None) of a `linear` call on a 2-D float input that passed its checks and ran the
# product (`eager.linalg.run_matmul`) and the add as `_addmm_direct` does: what decides
# the checks, the kernels and the result is in the key (cleared with the eager plans,
# `functions.fastpath`)
_LINEAR_DIRECT = fastpath._table("linear")


def _linear_direct(input: Any, weight: Any, bias: Any) -> Tensor | None:
    """`linear` of plain tensors whose layouts `_LINEAR_DIRECT` holds, when autograd does
    not record it and no transform, forward-mode level or anomaly mode is active: the
    product's and the add's kernels, without the checks (a call of those layouts passed
    them); None otherwise (the general path runs)."""
    if (
        input.__class__ not in DENSE_CLASSES
        or weight.__class__ not in DENSE_CLASSES
        or interpreters
        or forward_ad._level[0]
        or anomaly._state.enabled
    ):
        return None
    recorded = input._requires_grad or weight._requires_grad
    if bias is None:
        bkey = None
    elif bias.__class__ in DENSE_CLASSES:
        bkey = bias._lkey
        recorded = recorded or bias._requires_grad
    else:
        return None
    if recorded and grad_state.enabled:
        return None
    entry = _LINEAR_DIRECT.get((input._lkey, weight._lkey, bkey))
    if entry is None:
        return None
    shape, strides, add = entry
    out = run_matmul(input, views.view_of(weight, weight._offset, shape, strides))
    if add is not None:
        ew.launch_plan("add", add, (out, bias), out)
    return out


def _learn_linear(input: Any, weight: Any, bias: Any, wt: Any, out: Any) -> None:
    """File the call that just returned `out` in `_LINEAR_DIRECT` (see there)."""
    if (
        input.__class__ not in DENSE_CLASSES
        or weight.__class__ not in DENSE_CLASSES
        or (bias is not None and bias.__class__ not in DENSE_CLASSES)
        or interpreters
        or forward_ad._level[0]
        or len(_LINEAR_DIRECT) >= 256
    ):
        return
    add = None
    if bias is not None:
        add = ew._plans.get(ew._key("add", (out, bias), None, out))
        if add is None:
            return
    key = (input._lkey, weight._lkey, None if bias is None else bias._lkey)
    _LINEAR_DIRECT[key] = (wt._shape, wt._strides, add)


def _addmm_direct(bias: Tensor, x: Tensor, wt: Tensor) -> Tensor | None:
    """`linear`'s `bias + x @ wt` for plain float tensors (checked by `linear`): the
    product, the bias added into it in place, and the one `AddmmBackward0` node the
    composite records; None (the composite runs) under a transform, forward mode or
    anomaly mode."""
    if (
        interpreters
        or forward_ad._level[0]
        or anomaly._state.enabled
        or not x._dtype.is_floating_point
        or bias.__class__ not in DENSE_CLASSES
        or x.__class__ not in DENSE_CLASSES
        or wt.__class__ not in DENSE_CLASSES
    ):
        return None
    out = run_matmul(x, wt)  # (eager kernels: nothing is recorded below autograd)
    ew.run("add", (out, bias), None, out)
    if needs_grad((bias, x, wt)):
        record("addmm", (bias, x, wt), _ADDMM_ATTRS, out, "AddmmBackward0")
    return out


# --------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------


def _weighted_loss(
    op: str, errors: Tensor, input: Tensor, weight: Tensor, reduction: str
) -> Tensor:
    """`errors * weight` reduced as PyTorch's weighted l1/mse losses: 'mean' divides the
    weighted sum by the sum of the weights; `weight` must have `input`'s shape."""
    _tensor(op, "weight", weight)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    weighted = lg.mul(errors, weight)
    if reduction == "none":
        return weighted
    if reduction == "sum":
        return lg.sum(weighted)
    if reduction == "mean":
        return lg.div(lg.sum(weighted), lg.sum(weight))
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """mean((input - target)^2) (or 'sum'/'none'); with `weight` (input's shape) each
    squared error is weighted and 'mean' divides by the sum of the weights (PyTorch)."""
    _tensor("mse_loss", "input", input)
    _tensor("mse_loss", "target", target)
    if input.shape != target.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input "
            f"size ({input.shape}). This will likely lead to incorrect results due "
            f"to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=2,
        )
    if weight is not None:
        a, b = lg.broadcast_tensors(input, target)
        d = lg.sub(a, b)
        return _weighted_loss(
            "mse_loss", lg.mul(d, d), input, weight, _reduction(size_average, reduce, reduction)
        )
    return _composite(
        "mse_loss", (input, target), {"reduction": _reduction(size_average, reduce, reduction)}
    )


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """`mean(|input - target|)`; PyTorch records it as its parts (MeanBackward0, ...).
    With `weight` (input's shape) each error is weighted and 'mean' divides by the sum of
    the weights."""
    _tensor("l1_loss", "input", input)
    _tensor("l1_loss", "target", target)
    r = _reduction(size_average, reduce, reduction)
    if input.shape != target.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input "
            f"size ({input.shape}). This will likely lead to incorrect results due "
            f"to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=2,
        )
    if weight is not None:
        a, b = lg.broadcast_tensors(input, target)
        return _weighted_loss("l1_loss", lg.abs(lg.sub(a, b)), input, weight, r)
    losses = lg.abs(lg.sub(input, target))
    return nnops.reduce_loss(lg, losses, r)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    op = "binary_cross_entropy_with_logits"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    operands = [input, target]
    if weight is not None:
        operands.append(_tensor(op, "weight", weight))
    if pos_weight is not None:
        operands.append(_tensor(op, "pos_weight", pos_weight))
    return _composite(
        op,
        operands,
        {
            "reduction": _reduction(size_average, reduce, reduction),
            "has_weight": weight is not None,
            "has_pos_weight": pos_weight is not None,
        },
    )


def _bce_range_error(op: str, input: Tensor) -> None:
    raise RuntimeError(
        f"{op}: all elements of input should be between 0 and 1 (input shape {list(input.shape)})"
    )


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    op = "binary_cross_entropy"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    if input.shape != target.shape:
        raise ValueError(
            f"{op}: Using a target size ({list(target.shape)}) that is different "
            f"to the input size ({list(input.shape)}) is deprecated. Please "
            f"ensure they have the same size."
        )
    if input.__class__ is Tensor and not interpreters:
        # a plain tensor: one NumPy pass over its values (NaN fails both comparisons)
        if input._dtype.is_floating_point and 0 not in input._shape:
            v = input._values()
            if not (v.min() >= 0 and v.max() <= 1):
                _bce_range_error(op, input)
    else:
        values = bottom(input)  # under vmap: every batch element's values
        if values.numel() and input._dtype.is_floating_point and not tracing():
            with no_grad():
                inside = lg.logical_and(lg.ge(values, 0), lg.le(values, 1))
                if not bool(lg.all(inside).item()):
                    _bce_range_error(op, input)
    operands = [input, target]
    if weight is not None:
        operands.append(_tensor(op, "weight", weight))
    return _composite(
        op,
        operands,
        {
            "reduction": _reduction(size_average, reduce, reduction),
            "has_weight": weight is not None,
        },
    )


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """The negative log-likelihood of class indices `target` under log-probabilities
    `input` ((C,), (N, C) or (N, C, d1, ...)), optionally weighted per class, with
    targets equal to `ignore_index` left out. A target outside [0, C) raises IndexError
    naming it: the op's gather kernels check every index, and on failure the targets are
    read on the host for the message."""
    op = "nll_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    operands = [input, target]
    if weight is not None:
        operands.append(_tensor(op, "weight", weight))
    attrs = {
        "reduction": _reduction(size_average, reduce, reduction),
        "ignore_index": ignore_index,
        "has_weight": weight is not None,
    }
    try:
        return _composite(op, operands, attrs)
    except (IndexError, RuntimeError):
        # a shape error is reported as it is; an index error names the first bad target
        opdef = registry.get(op)
        opdef.infer(
            tuple(TensorType(t._dtype, t._shape) for t in operands),
            **dict(opdef.normalize_attrs(attrs)),
        )
        _check_targets(op, target, input.shape[nnops.class_dim(input.ndim)], ignore_index)
        raise


def _class_weight_view(weight: Tensor, ndim: int, cd: int) -> Tensor:
    shape = [1] * ndim
    shape[cd] = weight.shape[0]
    return lg.reshape(weight, tuple(shape))


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """`nll_loss(log_softmax(input))` for class indices, `-(log_softmax * p).sum` for class
    probabilities; label smoothing mixes in the uniform distribution, as PyTorch does."""
    op = "cross_entropy"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    r = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(
            f"{op}: label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"
        )
    if input.ndim == 0:
        raise ValueError(
            f"{op}: input must have at least 1 dimension (C) or (N, C, ...), got a 0-d tensor"
        )
    if not input._dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {input._dtype.name}")
    cd = nnops.class_dim(input.ndim)
    classes = input.shape[cd]
    if weight is not None:
        _tensor(op, "weight", weight)
        if weight.shape != (classes,):
            raise RuntimeError(
                f"{op}: weight tensor should be defined either for all "
                f"{classes} classes or no classes but got weight tensor of "
                f"shape: {list(weight.shape)}"
            )
    if target._dtype.is_floating_point:
        return _cross_entropy_probs(input, target, weight, r, label_smoothing, cd)
    if target._dtype not in nnops.INDEX_DTYPES:
        raise TypeError(
            f"{op}: expected class indices (int64) or class probabilities "
            f"(floating point) as target, got {target._dtype.name}"
        )
    logp = lg.log_softmax(input, cd)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=r)
    if label_smoothing == 0.0:
        return nll
    valid = lg.ne(target, ignore_index)
    if weight is not None:
        smooth = lg.neg(lg.sum(lg.mul(logp, _class_weight_view(weight, input.ndim, cd)), cd))
    else:
        smooth = lg.neg(lg.sum(logp, cd))
    smooth = lg.where(valid, smooth, 0.0)
    if r == "mean":
        if weight is not None:
            safe = lg.where(valid, target, 0)
            picked = lg.reshape(lg.index_select(weight, 0, lg.reshape(safe, (-1,))), target.shape)
            denom = lg.sum(lg.where(valid, picked, 0.0))
        else:
            denom = lg.sum(valid)
        smooth = lg.div(lg.sum(smooth), denom)
    elif r == "sum":
        smooth = lg.sum(smooth)
    return lg.add(lg.mul(nll, 1.0 - label_smoothing), lg.mul(smooth, label_smoothing / classes))


def _cross_entropy_probs(
    input: Tensor, target: Tensor, weight: Tensor | None, r: str, label_smoothing: float, cd: int
) -> Tensor:
    op = "cross_entropy"
    if target.shape != input.shape:
        raise RuntimeError(
            f"{op}: with class probabilities the target must have the input's "
            f"shape {list(input.shape)}, got {list(target.shape)}"
        )
    classes = input.shape[cd]
    logp = lg.log_softmax(input, cd)
    if label_smoothing > 0.0:
        target = lg.add(lg.mul(target, 1.0 - label_smoothing), label_smoothing / classes)
    prod = lg.mul(logp, target)
    if weight is not None:
        prod = lg.mul(prod, _class_weight_view(weight, input.ndim, cd))
    if r == "none":
        return lg.neg(lg.sum(prod, cd))
    total = lg.neg(lg.sum(prod))
    if r == "sum":
        return total
    return lg.div(total, input.numel() / classes if input.numel() else math.nan)


# --------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int] | int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    op = "layer_norm"
    _tensor(op, "input", input)
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    operands = [input]
    if weight is not None:
        operands.append(_tensor(op, "weight", weight))
    if bias is not None:
        operands.append(_tensor(op, "bias", bias))
    return _composite(
        op,
        operands,
        {
            "normalized_shape": ns,
            "eps": eps,
            "has_weight": weight is not None,
            "has_bias": bias is not None,
        },
    )


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability `p` (drawn with `lg.rand`, so `lg.manual_seed`
    makes it reproducible) and scale the rest by 1/(1-p); identity when not training."""
    _tensor("dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if not input._dtype.is_floating_point:
        raise TypeError(f"dropout: expected a floating point input, got {input._dtype.name}")
    if p == 1.0:
        mask = lg.zeros((), dtype=input._dtype)
    else:
        keep = lg.lt(lg.rand(input.shape, dtype=input._dtype), 1.0 - p)
        mask = lg.div(keep.to(input._dtype), 1.0 - p)
    return input.mul_(mask) if inplace else lg.mul(input, mask)


from ._attention import scaled_dot_product_attention  # noqa: E402

# Convolution, pooling, normalization, padding, resampling and channel dropout live in
# their own modules; conv2d, max_pool2d, pad and the pools above are defined there.
from ._conv import (  # noqa: E402
    conv1d,
    conv2d,
    conv3d,
    conv_tbc,  # noqa: F401
    conv_transpose1d,  # noqa: E402,F401
    conv_transpose2d,
    conv_transpose3d,
)
from ._dropout import (  # noqa: E402
    alpha_dropout,
    dropout1d,
    dropout2d,
    dropout3d,  # noqa: E402
    feature_alpha_dropout,
)
from ._layers import batch_norm, one_hot  # noqa: E402
from ._norm import (  # noqa: E402
    group_norm,
    instance_norm,
    local_response_norm,
    normalize,  # noqa: E402
    rms_norm,
)
from ._padding import pad  # noqa: E402
from ._pooling import (  # noqa: E402
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,  # noqa: E402
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool2d_with_indices,
    max_pool3d,
    max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)
from ._resample import (  # noqa: E402
    affine_grid,
    fold,
    grid_sample,
    interpolate,  # noqa: E402
    pixel_shuffle,
    pixel_unshuffle,
    unfold,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)

__all__ += [
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "alpha_dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "feature_alpha_dropout",
    "group_norm",
    "instance_norm",
    "local_response_norm",
    "normalize",
    "rms_norm",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d",
    "adaptive_max_pool3d_with_indices",
    "avg_pool3d",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d",
    "max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "affine_grid",
    "fold",
    "grid_sample",
    "interpolate",
    "pixel_shuffle",
    "pixel_unshuffle",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]

# Activations, losses, distances and misc layers, from their own modules.
from ._activations import (  # noqa: E402
    celu,
    celu_,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,  # noqa: E402
    prelu,
    rrelu,
    rrelu_,
    selu,
    selu_,
    softmin,
    softshrink,
    tanhshrink,
    threshold,
    threshold_,
)
from ._extra_layers import (  # noqa: E402
    bilinear,
    channel_shuffle,
    embedding,
    embedding_bag,  # noqa: E402
    native_channel_shuffle,
)
from ._losses import (  # noqa: E402
    cosine_embedding_loss,
    cosine_similarity,
    ctc_loss,  # noqa: E402
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    pairwise_distance,
    pdist,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)

__all__ += [
    "celu_",
    "glu",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "prelu",
    "rrelu",
    "rrelu_",
    "selu_",
    "softmin",
    "softshrink",
    "tanhshrink",
    "threshold",
    "threshold_",
    "bilinear",
    "channel_shuffle",
    "embedding_bag",
    "native_channel_shuffle",
    "cosine_embedding_loss",
    "cosine_similarity",
    "ctc_loss",
    "gaussian_nll_loss",
    "hinge_embedding_loss",
    "huber_loss",
    "kl_div",
    "margin_ranking_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "pairwise_distance",
    "pdist",
    "poisson_nll_loss",
    "smooth_l1_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]

# The last functional names (llgrad/nn/_residual.py).
from ._residual import gumbel_softmax, linear_cross_entropy  # noqa: E402

__all__ += ["gumbel_softmax", "linear_cross_entropy"]


def _served_on_devices() -> None:
    """Every public function here also serves CUDA tensors where its eager code cannot."""
    serve_on_devices(globals())


_served_on_devices()
