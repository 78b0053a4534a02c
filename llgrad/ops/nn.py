"""Neural-network composites: losses and layers that PyTorch records as one autograd node.

Each entry is a decomposition into other ops (written with `F`, eager functions or the
tracer's), a `vjp` rule written with the same functions (so double backward works), the
name of PyTorch's backward node, a NumPy reference for the interpreter and a shape rule.

Optional tensor inputs (a loss's `weight`, a layer's `bias`) are not passed as `None`: an
IR node has only tensor inputs, so the op is variadic and boolean attributes say which
optional inputs are present (`has_weight`, `has_bias`, ...). Their order is fixed by the
op's signature, e.g. `conv2d(x, w[, b])`.

Numerics follow PyTorch's own kernels where they choose a formulation:
`binary_cross_entropy_with_logits` is `(1 - y) * x - L * log_sigmoid(x)` with
`log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))` (never overflows), `binary_cross_entropy`
clamps its logarithms at -100, `layer_norm` uses the biased variance, and the gradients use
the same expressions as PyTorch's backward formulas.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir import dtypes as dt
from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType, broadcast_shapes
from .linalg import product_like

REDUCTIONS = ("none", "mean", "sum")
REDUCTION = Attr("reduction", AttrKind.STR, "mean")


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _pretty(t: TensorType) -> str:
    return f"{t.dtype.name}{list(t.shape)}"


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"{op}: {reduction!r} is not a valid value for reduction "
            f"(expected one of {', '.join(REDUCTIONS)})"
        )


def _check_float(op: str, *types: TensorType) -> None:
    for t in types:
        if not t.dtype.is_floating_point:
            raise TypeError(
                f"{op}: expected floating point tensors, got {', '.join(_pretty(u) for u in types)}"
            )


def _check_count(
    op: str, types: tuple[TensorType, ...], required: int, flags: dict[str, bool]
) -> None:
    want = required + sum(flags.values())
    if len(types) != want:
        present = ", ".join(k for k, v in flags.items() if v) or "no optional inputs"
        raise TypeError(f"{op}: expected {want} tensor inputs ({present}), got {len(types)}")


def _loss_type(op: str, dtype: dt.DType, shape: tuple[int, ...], reduction: str) -> TensorType:
    _check_reduction(op, reduction)
    return TensorType(dtype, shape if reduction == "none" else ())


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def reduce_loss(F: Any, losses: Any, reduction: str) -> Any:
    """PyTorch's `apply_loss_reduction`."""
    if reduction == "none":
        return losses
    if reduction == "sum":
        return F.sum(losses)
    return F.mean(losses)


def expand_loss_grad(F: Any, g: Any, shape: tuple[int, ...], reduction: str) -> Any:
    """The gradient of the reduced loss, spread back over the per-element losses."""
    if reduction == "none":
        return g
    if reduction == "mean":
        g = F.div(g, _numel(shape))
    return F.expand(g, shape)


def _np_reduce(losses: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        return losses
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(losses.sum() if reduction == "sum" else losses.mean())


def _log_sigmoid(F: Any, x: Any) -> Any:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)); finite for every finite x."""
    return F.sub(F.minimum(x, 0.0), F.log1p(F.exp(F.neg(F.abs(x)))))


def _np_log_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


# --------------------------------------------------------------------------------------
# mse_loss
# --------------------------------------------------------------------------------------


def _infer_mse(types: tuple[TensorType, ...], reduction: str) -> TensorType:
    x, y = types
    d = dt.promote_types(x.dtype, y.dtype)  # an integer target promotes, as in PyTorch
    if not d.is_floating_point:
        raise TypeError(
            f"mse_loss: expected floating point tensors (or a floating input with "
            f"an integer target), got {_pretty(x)}, {_pretty(y)}"
        )
    shape = broadcast_shapes(x.shape, y.shape, op="mse_loss")
    return _loss_type("mse_loss", d, shape, reduction)


def _decompose_mse(F: Any, x: Any, y: Any, reduction: str) -> Any:
    d = F.sub(x, y)
    return reduce_loss(F, F.mul(d, d), reduction)


def _vjp_mse(ctx: Any, g: Any, reduction: str) -> tuple:
    F = ctx.F
    x, y = ctx.inputs
    d = F.sub(x, y)
    if reduction == "none":
        gx = F.mul(d, F.mul(g, 2.0))
    else:
        norm = 2.0 / _numel(d._shape) if reduction == "mean" else 2.0
        gx = F.mul(d, F.mul(g, norm))
    return (gx if ctx.needs_input_grad[0] else None, F.neg(gx) if ctx.needs_input_grad[1] else None)


def _ref_mse(x: np.ndarray, y: np.ndarray, reduction: str) -> np.ndarray:
    return _np_reduce((x - y) ** 2, reduction)


register(
    OpDef(
        "mse_loss",
        Group.COMPOSITE,
        2,
        attrs=(REDUCTION,),
        infer=_infer_mse,
        reference=_ref_mse,
        decompose=_decompose_mse,
        vjp=_vjp_mse,
        backward_name="MseLossBackward0",
        saves="i",
        doc="mean/sum/none of (input - target)**2; input and target broadcast",
        eager_compile=True,
    )
)


# --------------------------------------------------------------------------------------
# binary_cross_entropy_with_logits(x, y[, weight][, pos_weight])
# --------------------------------------------------------------------------------------

BCE_LOGITS_ATTRS = (
    REDUCTION,
    Attr("has_weight", AttrKind.BOOL, False),
    Attr("has_pos_weight", AttrKind.BOOL, False),
)


def _split_optional(rest: tuple[Any, ...], *flags: bool) -> list[Any]:
    """The optional inputs in signature order, `None` where absent."""
    out, i = [], 0
    for present in flags:
        out.append(rest[i] if present else None)
        i += int(present)
    return out


def _check_fits(op: str, what: str, t: TensorType, shape: tuple[int, ...]) -> None:
    """`t` must broadcast to `shape` without growing it (it scales elementwise losses)."""
    try:
        ok = broadcast_shapes(t.shape, shape, op=op) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{op}: {what} of shape {list(t.shape)} cannot be broadcast to the "
            f"input shape {list(shape)}"
        )


def _infer_bce_logits(
    types: tuple[TensorType, ...], reduction: str, has_weight: bool, has_pos_weight: bool
) -> TensorType:
    op = "binary_cross_entropy_with_logits"
    _check_count(op, types, 2, {"weight": has_weight, "pos_weight": has_pos_weight})
    x, y = types[:2]
    _check_float(op, *types)
    if x.shape != y.shape:
        raise ValueError(
            f"{op}: Target size ({list(y.shape)}) must be the same as input size ({list(x.shape)})"
        )
    w, pw = _split_optional(types[2:], has_weight, has_pos_weight)
    if w is not None:
        _check_fits(op, "weight", w, x.shape)
    if pw is not None:
        _check_fits(op, "pos_weight", pw, x.shape)
    d = x.dtype
    for t in types[1:]:
        d = dt.promote_types(d, t.dtype)
    return _loss_type(op, d, x.shape, reduction)


def _bce_logits_elementwise(F: Any, x: Any, y: Any, pw: Any) -> Any:
    """Unweighted, unreduced loss: (1 - y) * x - L * log_sigmoid(x), L = 1 + (pw - 1) * y."""
    ls = _log_sigmoid(F, x)
    if pw is not None:
        ls = F.mul(ls, F.add(F.mul(F.sub(pw, 1.0), y), 1.0))
    return F.sub(F.mul(F.rsub(y, 1.0), x), ls)


def _decompose_bce_logits(
    F: Any, x: Any, y: Any, *rest: Any, reduction: str, has_weight: bool, has_pos_weight: bool
) -> Any:
    w, pw = _split_optional(rest, has_weight, has_pos_weight)
    loss = _bce_logits_elementwise(F, x, y, pw)
    if w is not None:
        loss = F.mul(loss, w)
    return reduce_loss(F, loss, reduction)


def _vjp_bce_logits(
    ctx: Any, g: Any, reduction: str, has_weight: bool, has_pos_weight: bool
) -> tuple:
    F = ctx.F
    x, y, *rest = ctx.inputs
    w, pw = _split_optional(tuple(rest), has_weight, has_pos_weight)
    need = ctx.needs_input_grad
    gl = expand_loss_grad(F, g, x._shape, "sum" if reduction == "mean" else reduction)
    scale = 1.0 / _numel(x._shape) if reduction == "mean" else None

    def finish(t: Any) -> Any:  # PyTorch's order: * grad, * weight, / numel
        t = F.mul(t, gl)
        if w is not None:
            t = F.mul(t, w)
        return F.mul(t, scale) if scale is not None else t

    gx = gy = gw = gpw = None
    if need[0]:
        if pw is None:
            gx = finish(F.sub(F.sigmoid(x), y))
        else:
            t = F.mul(pw, y)
            gx = finish(F.sub(F.mul(F.sub(F.add(t, 1.0), y), F.sigmoid(x)), t))
    if need[1]:
        if pw is None:
            gy = finish(F.neg(x))
        else:
            gy = finish(F.sub(_log_sigmoid(F, F.neg(x)), F.mul(_log_sigmoid(F, x), pw)))
    if w is not None and need[2]:
        base = F.mul(_bce_logits_elementwise(F, x, y, pw), gl)
        gw = F.mul(base, scale) if scale is not None else base
    if pw is not None and need[-1]:
        t = F.mul(F.neg(F.mul(y, _log_sigmoid(F, x))), gl)
        if w is not None:
            t = F.mul(t, w)
        gpw = F.mul(t, scale) if scale is not None else t
    grads: list[Any] = [gx, gy]
    if has_weight:
        grads.append(gw)
    if has_pos_weight:
        grads.append(gpw)
    return tuple(grads)


def _ref_bce_logits(
    x: np.ndarray,
    y: np.ndarray,
    *rest: np.ndarray,
    reduction: str,
    has_weight: bool,
    has_pos_weight: bool,
) -> np.ndarray:
    w, pw = _split_optional(rest, has_weight, has_pos_weight)
    L = 1.0 if pw is None else (pw - 1.0) * y + 1.0
    loss = (1.0 - y) * x - L * _np_log_sigmoid(x)
    if w is not None:
        loss = loss * w
    return _np_reduce(loss, reduction)


register(
    OpDef(
        "binary_cross_entropy_with_logits",
        Group.COMPOSITE,
        -1,
        attrs=BCE_LOGITS_ATTRS,
        infer=_infer_bce_logits,
        reference=_ref_bce_logits,
        decompose=_decompose_bce_logits,
        vjp=_vjp_bce_logits,
        backward_name="BinaryCrossEntropyWithLogitsBackward0",
        saves="i",
        doc="(x, y[, weight][, pos_weight]): sigmoid + binary cross entropy, stable",
        eager_compile=True,
    )
)


# --------------------------------------------------------------------------------------
# binary_cross_entropy(p, y[, weight])
# --------------------------------------------------------------------------------------

BCE_ATTRS = (REDUCTION, Attr("has_weight", AttrKind.BOOL, False))
_BCE_EPS = 1e-12  # PyTorch's EPSILON in binary_cross_entropy_backward


def _infer_bce(types: tuple[TensorType, ...], reduction: str, has_weight: bool) -> TensorType:
    op = "binary_cross_entropy"
    _check_count(op, types, 2, {"weight": has_weight})
    x, y = types[:2]
    _check_float(op, *types)
    if x.shape != y.shape:
        raise ValueError(
            f"{op}: Using a target size ({list(y.shape)}) that is different to "
            f"the input size ({list(x.shape)}) is not supported"
        )
    if has_weight:
        _check_fits(op, "weight", types[2], x.shape)
    d = x.dtype
    for t in types[1:]:
        d = dt.promote_types(d, t.dtype)
    return _loss_type(op, d, x.shape, reduction)


def _decompose_bce(F: Any, x: Any, y: Any, *rest: Any, reduction: str, has_weight: bool) -> Any:
    log_x = F.maximum(F.log(x), -100.0)
    log_1mx = F.maximum(F.log1p(F.neg(x)), -100.0)
    loss = F.sub(F.mul(F.sub(y, 1.0), log_1mx), F.mul(y, log_x))
    if has_weight:
        loss = F.mul(loss, rest[0])
    return reduce_loss(F, loss, reduction)


def _vjp_bce(ctx: Any, g: Any, reduction: str, has_weight: bool) -> tuple:
    F = ctx.F
    x, y, *rest = ctx.inputs
    w = rest[0] if has_weight else None
    need = ctx.needs_input_grad
    gl = expand_loss_grad(F, g, x._shape, reduction)
    gx = gy = gw = None
    if need[0]:
        denom = F.maximum(F.mul(F.rsub(x, 1.0), x), _BCE_EPS)
        gx = F.mul(F.div(F.sub(x, y), denom), gl)
        if w is not None:
            gx = F.mul(gx, w)
    if need[1]:
        gy = F.mul(F.sub(F.log1p(F.neg(x)), F.log(x)), gl)
        if w is not None:
            gy = F.mul(gy, w)
    if w is not None and need[2]:
        log_x = F.maximum(F.log(x), -100.0)
        log_1mx = F.maximum(F.log1p(F.neg(x)), -100.0)
        gw = F.mul(F.sub(F.mul(F.sub(y, 1.0), log_1mx), F.mul(y, log_x)), gl)
    return (gx, gy, gw) if has_weight else (gx, gy)


def _ref_bce(
    x: np.ndarray, y: np.ndarray, *rest: np.ndarray, reduction: str, has_weight: bool
) -> np.ndarray:
    with np.errstate(divide="ignore"):
        loss = (y - 1) * np.maximum(np.log1p(-x), -100) - y * np.maximum(np.log(x), -100)
    if has_weight:
        loss = loss * rest[0]
    return _np_reduce(loss, reduction)


register(
    OpDef(
        "binary_cross_entropy",
        Group.COMPOSITE,
        -1,
        attrs=BCE_ATTRS,
        infer=_infer_bce,
        reference=_ref_bce,
        decompose=_decompose_bce,
        vjp=_vjp_bce,
        backward_name="BinaryCrossEntropyBackward0",
        saves="i",
        doc="(p, y[, weight]): -w (y log p + (1 - y) log(1 - p)), logs clamped at -100",
        eager_compile=True,
    )
)


# --------------------------------------------------------------------------------------
# nll_loss(logp, target[, weight])
# --------------------------------------------------------------------------------------

NLL_ATTRS = (
    REDUCTION,
    Attr("ignore_index", AttrKind.INT, -100),
    Attr("has_weight", AttrKind.BOOL, False),
)
INDEX_DTYPES = (dt.int64, dt.int32)


def class_dim(ndim: int) -> int:
    """The class dimension: 0 for an unbatched (C,) input, else 1 (N, C, d1, ...)."""
    return 0 if ndim == 1 else 1


def _infer_nll(
    types: tuple[TensorType, ...], reduction: str, ignore_index: int, has_weight: bool
) -> TensorType:
    op = "nll_loss"
    _check_count(op, types, 2, {"weight": has_weight})
    x, t = types[:2]
    _check_float(op, x)
    if t.dtype not in INDEX_DTYPES:
        raise TypeError(
            f"{op}: expected an int64 target of class indices, got {_pretty(t)} "
            f"(input {_pretty(x)})"
        )
    if x.ndim < 1:
        raise ValueError(
            f"{op}: input must have at least 1 dimension (C) or (N, C, ...), got {_pretty(x)}"
        )
    cd = class_dim(x.ndim)
    expected = x.shape[:cd] + x.shape[cd + 1 :]
    if t.shape != expected:
        raise ValueError(
            f"{op}: expected target of shape {list(expected)} for input of shape "
            f"{list(x.shape)}, got {list(t.shape)}"
        )
    if has_weight:
        w = types[2]
        _check_float(op, w)
        if w.shape != (x.shape[cd],):
            raise RuntimeError(
                f"{op}: weight tensor should be defined either for all "
                f"{x.shape[cd]} classes or no classes but got weight tensor of "
                f"shape: {list(w.shape)}"
            )
    return _loss_type(op, x.dtype, t.shape, reduction)


def _nll_parts(F: Any, x: Any, t: Any, w: Any, ignore_index: int) -> tuple[Any, Any, Any]:
    """(valid mask, target with ignored entries at class 0, per-item weight, 0 if ignored)."""
    valid = F.ne(t, ignore_index)
    safe = F.where(valid, t, 0)
    if w is None:
        wt = valid.to(x._dtype)
    else:
        wt = F.reshape(F.index_select(w, 0, F.reshape(safe, (-1,))), t._shape)
        wt = F.where(valid, wt, 0.0)
    return valid, safe, wt


def _decompose_nll(
    F: Any, x: Any, t: Any, *rest: Any, reduction: str, ignore_index: int, has_weight: bool
) -> Any:
    cd = class_dim(x.ndim)
    valid, safe, wt = _nll_parts(F, x, t, rest[0] if has_weight else None, ignore_index)
    picked = F.squeeze(F.gather(x, cd, F.unsqueeze(safe, cd)), cd)
    losses = F.where(valid, F.neg(F.mul(picked, wt)), 0.0)
    if reduction == "none":
        return losses
    total = F.sum(losses)
    return total if reduction == "sum" else F.div(total, F.sum(wt))


def _vjp_nll(ctx: Any, g: Any, reduction: str, ignore_index: int, has_weight: bool) -> tuple:
    F = ctx.F
    x, t, *rest = ctx.inputs
    if has_weight and ctx.needs_input_grad[2]:
        raise RuntimeError("the derivative for 'weight' is not implemented (nll_loss)")
    if not ctx.needs_input_grad[0]:
        return (None, None, None) if has_weight else (None, None)
    cd = class_dim(x.ndim)
    valid, safe, wt = _nll_parts(F, x, t, rest[0] if has_weight else None, ignore_index)
    if reduction == "mean":
        g = F.div(g, F.sum(wt))
    gl = g if reduction == "none" else F.expand(g, t._shape)
    coef = F.where(valid, F.neg(F.mul(wt, gl)), 0.0)
    shape = [1] * x.ndim
    shape[cd] = x._shape[cd]
    onehot = F.eq(F.reshape(F.arange(x._shape[cd]), tuple(shape)), F.unsqueeze(safe, cd))
    gx = F.where(onehot, F.unsqueeze(coef, cd), 0.0)
    return (gx, None, None) if has_weight else (gx, None)


def _ref_nll(
    x: np.ndarray,
    t: np.ndarray,
    *rest: np.ndarray,
    reduction: str,
    ignore_index: int,
    has_weight: bool,
) -> np.ndarray:
    cd = class_dim(x.ndim)
    valid = t != ignore_index
    safe = np.where(valid, t, 0).astype(np.int64)
    picked = np.squeeze(np.take_along_axis(x, np.expand_dims(safe, cd), cd), cd)
    wt = rest[0][safe] if has_weight else np.ones_like(picked)
    wt = np.where(valid, wt, 0).astype(x.dtype)
    losses = np.where(valid, -picked * wt, 0).astype(x.dtype)
    if reduction == "none":
        return losses
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(losses.sum() if reduction == "sum" else losses.sum() / wt.sum())


register(
    OpDef(
        "nll_loss",
        Group.COMPOSITE,
        -1,
        attrs=NLL_ATTRS,
        infer=_infer_nll,
        reference=_ref_nll,
        decompose=_decompose_nll,
        vjp=_vjp_nll,
        backward_name="NllLossBackward0",
        saves="i",
        doc="(logp, target[, weight]): -w[t] * logp[t] per item; mean divides by the "
        "total weight of the items not equal to ignore_index",
        eager_compile=True,
    )
)


# --------------------------------------------------------------------------------------
# layer_norm(x[, weight][, bias])
# --------------------------------------------------------------------------------------

LN_ATTRS = (
    Attr("normalized_shape", AttrKind.INTS, required=True),
    Attr("eps", AttrKind.FLOAT, 1e-5),
    Attr("has_weight", AttrKind.BOOL, False),
    Attr("has_bias", AttrKind.BOOL, False),
)


def _infer_layer_norm(
    types: tuple[TensorType, ...],
    normalized_shape: tuple[int, ...],
    eps: float,
    has_weight: bool,
    has_bias: bool,
) -> TensorType:
    op = "layer_norm"
    _check_count(op, types, 1, {"weight": has_weight, "bias": has_bias})
    x = types[0]
    _check_float(op, *types)
    ns = tuple(normalized_shape)
    if not ns or len(ns) > x.ndim or x.shape[x.ndim - len(ns) :] != ns:
        raise RuntimeError(
            f"{op}: Given normalized_shape={list(ns)}, expected input with "
            f"shape [*, {', '.join(map(str, ns))}], but got input of size "
            f"{list(x.shape)}"
        )
    for name, t in zip(("weight", "bias"), _split_optional(types[1:], has_weight, has_bias)):
        if t is not None and t.shape != ns:
            raise RuntimeError(f"{op}: expected {name} of shape {list(ns)}, got {list(t.shape)}")
    return x


def _ln_stats(F: Any, x: Any, n: int, eps: float) -> tuple[Any, Any, Any]:
    """(axes, x - mean, 1 / sqrt(biased var + eps)) over the last `n` dimensions."""
    axes = tuple(range(x.ndim - n, x.ndim))
    centered = F.sub(x, F.mean(x, axes, True))
    var = F.mean(F.mul(centered, centered), axes, True)
    return axes, centered, F.rsqrt(F.add(var, eps))


def _decompose_layer_norm(
    F: Any,
    x: Any,
    *rest: Any,
    normalized_shape: tuple[int, ...],
    eps: float,
    has_weight: bool,
    has_bias: bool,
) -> Any:
    w, b = _split_optional(rest, has_weight, has_bias)
    _, centered, rstd = _ln_stats(F, x, len(normalized_shape), eps)
    y = F.mul(centered, rstd)
    if w is not None:
        y = F.mul(y, w)
    if b is not None:
        y = F.add(y, b)
    return y


def _vjp_layer_norm(
    ctx: Any,
    g: Any,
    normalized_shape: tuple[int, ...],
    eps: float,
    has_weight: bool,
    has_bias: bool,
) -> tuple:
    F = ctx.F
    x, *rest = ctx.inputs
    w, b = _split_optional(tuple(rest), has_weight, has_bias)
    need = ctx.needs_input_grad
    axes, centered, rstd = _ln_stats(F, x, len(normalized_shape), eps)
    xhat = F.mul(centered, rstd)
    grads: list[Any] = [None]
    if need[0]:
        gxhat = F.mul(g, w) if w is not None else g
        m1 = F.mean(gxhat, axes, True)
        m2 = F.mean(F.mul(gxhat, xhat), axes, True)
        grads[0] = F.mul(F.sub(F.sub(gxhat, m1), F.mul(xhat, m2)), rstd)
    if has_weight:
        grads.append(F.sum_to_size(F.mul(g, xhat), w._shape) if need[1] else None)
    if has_bias:
        grads.append(F.sum_to_size(g, b._shape) if need[-1] else None)
    return tuple(grads)


def _ref_layer_norm(
    x: np.ndarray,
    *rest: np.ndarray,
    normalized_shape: tuple[int, ...],
    eps: float,
    has_weight: bool,
    has_bias: bool,
) -> np.ndarray:
    w, b = _split_optional(rest, has_weight, has_bias)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(x.dtype)


register(
    OpDef(
        "layer_norm",
        Group.COMPOSITE,
        -1,
        attrs=LN_ATTRS,
        infer=_infer_layer_norm,
        reference=_ref_layer_norm,
        decompose=_decompose_layer_norm,
        vjp=_vjp_layer_norm,
        backward_name="NativeLayerNormBackward0",
        saves="i",
        doc="(x[, weight][, bias]): normalize over the trailing normalized_shape "
        "(biased variance), then scale and shift",
        eager_compile=True,
    )
)


# --------------------------------------------------------------------------------------
# embedding(weight, indices)
# --------------------------------------------------------------------------------------

EMB_ATTRS = (
    Attr("padding_idx", AttrKind.OPT_INT, None),
    Attr("scale_grad_by_freq", AttrKind.BOOL, False),
)


def _infer_embedding(
    types: tuple[TensorType, ...], padding_idx: int | None, scale_grad_by_freq: bool
) -> TensorType:
    w, idx = types
    if w.ndim != 2:
        raise RuntimeError(f"embedding: 'weight' must be 2-D, got {_pretty(w)}")
    if idx.dtype not in INDEX_DTYPES:
        raise TypeError(
            f"embedding: Expected tensor for argument 'indices' to have one of the "
            f"following scalar types: Long, Int; but got {_pretty(idx)} instead"
        )
    if padding_idx is not None and not 0 <= padding_idx < w.shape[0]:
        raise ValueError(
            f"embedding: padding_idx {padding_idx} must be within the "
            f"num_embeddings {w.shape[0]} (after wrapping negative values)"
        )
    return TensorType(w.dtype, idx.shape + (w.shape[1],))


def _decompose_embedding(
    F: Any, w: Any, idx: Any, padding_idx: int | None, scale_grad_by_freq: bool
) -> Any:
    rows = F.index_select(w, 0, F.reshape(idx, (-1,)))
    return F.reshape(rows, idx._shape + (w._shape[1],))


def _scatter_rows(F: Any, values: Any, rows: Any, shape: tuple[int, ...]) -> Any:
    """zeros(shape) with `values[i]` added at row `rows[i]` (repeated rows accumulate)."""
    return F.indexing.index_backward(values, shape, (rows,))


def _vjp_embedding(ctx: Any, g: Any, padding_idx: int | None, scale_grad_by_freq: bool) -> tuple:
    F = ctx.F
    if not ctx.needs_input_grad[0]:
        return (None, None)
    (vocab, dim), _ = ctx.input_meta[0]
    _, idx = ctx.inputs
    flat = F.reshape(idx, (-1,))
    gflat = F.reshape(g, (-1, dim))
    if padding_idx is not None:
        gflat = F.where(F.unsqueeze(F.ne(flat, padding_idx), 1), gflat, 0.0)
    if scale_grad_by_freq:
        ones = F.ones(flat._shape, dtype=g._dtype)
        counts = F.index_select(_scatter_rows(F, ones, flat, (vocab,)), 0, flat)
        gflat = F.div(gflat, F.unsqueeze(counts, 1))
    return (_scatter_rows(F, gflat, flat, (vocab, dim)), None)


def _ref_embedding(
    w: np.ndarray, idx: np.ndarray, padding_idx: int | None, scale_grad_by_freq: bool
) -> np.ndarray:
    return w[idx.astype(np.int64)]


register(
    OpDef(
        "embedding",
        Group.COMPOSITE,
        2,
        attrs=EMB_ATTRS,
        infer=_infer_embedding,
        reference=_ref_embedding,
        decompose=_decompose_embedding,
        vjp=_vjp_embedding,
        backward_name="EmbeddingBackward0",
        saves="i",
        doc="(weight, indices): weight rows at indices; the gradient of padding_idx's row is zero",
    )
)


# --------------------------------------------------------------------------------------
# addmm(bias, mat1, mat2): the 2-D linear layer, as PyTorch records it
# --------------------------------------------------------------------------------------

ADDMM_ATTRS = (Attr("beta", AttrKind.FLOAT, 1.0), Attr("alpha", AttrKind.FLOAT, 1.0))


def _infer_addmm(types: tuple[TensorType, ...], beta: float, alpha: float) -> TensorType:
    b, m1, m2 = types
    _check_float("addmm", *types)
    if m1.ndim != 2 or m2.ndim != 2:
        raise RuntimeError(
            f"addmm: mat1 and mat2 must be matrices, got {_pretty(m1)} and {_pretty(m2)}"
        )
    if m1.shape[1] != m2.shape[0]:
        raise RuntimeError(
            f"addmm: mat1 and mat2 shapes cannot be multiplied "
            f"({m1.shape[0]}x{m1.shape[1]} and {m2.shape[0]}x{m2.shape[1]})"
        )
    out = (m1.shape[0], m2.shape[1])
    _check_fits("addmm", "self (the bias)", b, out)
    if not (b.dtype is m1.dtype is m2.dtype):
        raise TypeError(
            f"addmm: expected one dtype, got bias {_pretty(b)}, mat1 "
            f"{_pretty(m1)} and mat2 {_pretty(m2)}"
        )
    return TensorType(m1.dtype, out)


def _decompose_addmm(F: Any, b: Any, m1: Any, m2: Any, beta: float, alpha: float) -> Any:
    prod = F.matmul(m1, m2)
    if alpha != 1.0:
        prod = F.mul(prod, alpha)
    return F.add(F.mul(b, beta) if beta != 1.0 else b, prod)


def _vjp_addmm(ctx: Any, g: Any, beta: float, alpha: float) -> tuple:
    F = ctx.F
    _, m1, m2 = ctx.inputs
    need = ctx.needs_input_grad
    ga = F.mul(g, alpha) if alpha != 1.0 else g
    gb = (F.mul(g, beta) if beta != 1.0 else g) if need[0] else None
    g1 = product_like(F, ctx, 1, ga, F.transpose(m2, 0, 1)) if need[1] else None
    g2 = product_like(F, ctx, 2, F.transpose(m1, 0, 1), ga) if need[2] else None
    return (gb, g1, g2)


register(
    OpDef(
        "addmm",
        Group.COMPOSITE,
        3,
        attrs=ADDMM_ATTRS,
        infer=_infer_addmm,
        reference=lambda b, m1, m2, beta, alpha: beta * b + alpha * (m1 @ m2),
        decompose=_decompose_addmm,
        vjp=_vjp_addmm,
        backward_name="AddmmBackward0",
        saves="i",
        keeps_layout=True,
        doc="beta * bias + alpha * (mat1 @ mat2): the 2-D linear layer",
    )
)


# --------------------------------------------------------------------------------------
# Sliding windows: shared by conv2d and max_pool2d
# --------------------------------------------------------------------------------------


def window_geometry(
    size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool = False
) -> int:
    """The number of windows along one dimension (PyTorch's pooling/conv output size)."""
    span = dilation * (kernel - 1) + 1
    room = size + 2 * pad - span
    if room < 0:
        return 0
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1  # the last window must start inside the input
    return out


def im2col(
    F: Any,
    xp: Any,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    out: tuple[int, int],
) -> Any:
    """(N, C, Hp, Wp) -> (N, C, KH*KW, OH, OW): every window tap as a strided slice."""
    n, c = xp._shape[:2]
    pieces = []
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            h0, w0 = kh * dilation[0], kw * dilation[1]
            pieces.append(
                F.slice_all(
                    xp,
                    (0, 0, h0, w0),
                    (n, c, h0 + stride[0] * (out[0] - 1) + 1, w0 + stride[1] * (out[1] - 1) + 1),
                    (1, 1, stride[0], stride[1]),
                )
            )
    return F.stack(pieces, 2)


def col2im(
    F: Any,
    cols: Any,
    padded: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
) -> Any:
    """The adjoint of `im2col`: add every tap's values back where they were read."""
    n, c, _, oh, ow = cols._shape
    total = None
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            h0, w0 = kh * dilation[0], kw * dilation[1]
            piece = F.select(cols, 2, kh * kernel[1] + kw)
            hi_h = padded[0] - (h0 + stride[0] * (oh - 1) + 1)
            hi_w = padded[1] - (w0 + stride[1] * (ow - 1) + 1)
            placed = F.pad_dims(
                piece, (0, 0, h0, w0), (0, 0, hi_h, hi_w), (0, 0, stride[0] - 1, stride[1] - 1), 0
            )
            total = placed if total is None else F.add(total, placed)
    return total


def _pair(op: str, name: str, v: tuple[int, ...], minimum: int) -> tuple[int, int]:
    if len(v) != 2:
        raise ValueError(f"{op}: {name} must have 2 values, got {list(v)}")
    if any(x < minimum for x in v):
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {list(v)}")
    return (v[0], v[1])


# --------------------------------------------------------------------------------------
# conv2d(x, weight[, bias])
# --------------------------------------------------------------------------------------

CONV_ATTRS = (
    Attr("stride", AttrKind.INTS, (1, 1)),
    Attr("padding", AttrKind.INTS, (0, 0)),
    Attr("dilation", AttrKind.INTS, (1, 1)),
    Attr("groups", AttrKind.INT, 1),
    Attr("has_bias", AttrKind.BOOL, False),
)


def _conv_out(
    x: tuple[int, ...],
    w: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
) -> tuple[int, int]:
    return (
        window_geometry(x[2], w[2], stride[0], padding[0], dilation[0]),
        window_geometry(x[3], w[3], stride[1], padding[1], dilation[1]),
    )


def _infer_conv2d(
    types: tuple[TensorType, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
    has_bias: bool,
) -> TensorType:
    op = "conv2d"
    _check_count(op, types, 2, {"bias": has_bias})
    x, w = types[:2]
    _check_float(op, *types)
    _pair(op, "stride", stride, 1)
    _pair(op, "padding", padding, 0)
    _pair(op, "dilation", dilation, 1)
    if x.ndim != 4 or w.ndim != 4:
        raise RuntimeError(
            f"{op}: expected a 4-D input (N, C, H, W) and a 4-D weight "
            f"(out, in/groups, kH, kW), got input {_pretty(x)} and weight "
            f"{_pretty(w)}"
        )
    if groups < 1 or w.shape[0] % groups:
        raise RuntimeError(
            f"{op}: out_channels ({w.shape[0]}) must be divisible by groups ({groups})"
        )
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(
            f"{op}: Given groups={groups}, weight of size {list(w.shape)}, "
            f"expected input{list(x.shape)} to have {w.shape[1] * groups} "
            f"channels, but got {x.shape[1]} channels instead"
        )
    if has_bias and types[2].shape != (w.shape[0],):
        raise RuntimeError(
            f"{op}: expected bias of shape [{w.shape[0]}], got {list(types[2].shape)}"
        )
    if not all(t.dtype is x.dtype for t in types):
        raise TypeError(
            f"{op}: Input type ({x.dtype.name}) and weight type "
            f"({w.dtype.name}) should be the same (bias "
            f"{types[2].dtype.name if has_bias else 'none'})"
        )
    oh, ow = _conv_out(x.shape, w.shape, stride, padding, dilation)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(
            f"{op}: Calculated output size: ({w.shape[0]}x{oh}x{ow}). Output "
            f"size is too small (input {list(x.shape)}, kernel "
            f"{list(w.shape[2:])}, padding {list(padding)}, dilation "
            f"{list(dilation)})"
        )
    return TensorType(x.dtype, (x.shape[0], w.shape[0], oh, ow))


def _pad2d(
    F: Any, x: Any, padding: tuple[int, ...], value: float = 0.0, extra: tuple[int, int] = (0, 0)
) -> Any:
    if not any(padding) and not any(extra):
        return x
    return F.pad_dims(
        x,
        (0, 0, padding[0], padding[1]),
        (0, 0, padding[0] + extra[0], padding[1] + extra[1]),
        None,
        value,
    )


def _conv_cols(
    F: Any,
    x: Any,
    w_shape: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
) -> Any:
    """The input's windows as (N, groups, C/groups * kH * kW, OH * OW)."""
    n, c = x._shape[:2]
    oh, ow = _conv_out(x._shape, w_shape, stride, padding, dilation)
    cols = im2col(F, _pad2d(F, x, padding), w_shape[2:], stride, dilation, (oh, ow))
    return F.reshape(cols, (n, groups, (c // groups) * w_shape[2] * w_shape[3], oh * ow))


def _decompose_conv2d(
    F: Any,
    x: Any,
    w: Any,
    *rest: Any,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
    has_bias: bool,
) -> Any:
    n = x._shape[0]
    oc = w._shape[0]
    oh, ow = _conv_out(x._shape, w._shape, stride, padding, dilation)
    cols = _conv_cols(F, x, w._shape, stride, padding, dilation, groups)
    wm = F.reshape(w, (groups, oc // groups, -1))
    out = F.reshape(F.matmul(wm, cols), (n, oc, oh, ow))
    if has_bias:
        out = F.add(out, F.reshape(rest[0], (1, oc, 1, 1)))
    return out


def _vjp_conv2d(
    ctx: Any,
    g: Any,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
    has_bias: bool,
) -> tuple:
    F = ctx.F
    x, w, *_ = ctx.inputs
    need = ctx.needs_input_grad
    n, c, h, wd = x._shape
    oc, _, kh, kw = w._shape
    oh, ow = g._shape[2:]
    g2 = F.reshape(g, (n, groups, oc // groups, oh * ow))
    gx = gw = gb = None
    if need[0]:
        wm = F.reshape(w, (groups, oc // groups, -1))
        gcols = F.matmul(F.transpose(wm, 1, 2), g2)  # (N, G, Cg*K, L)
        gcols = F.reshape(gcols, (n, c, kh * kw, oh, ow))
        padded = (h + 2 * padding[0], wd + 2 * padding[1])
        gxp = col2im(F, gcols, padded, (kh, kw), stride, dilation)
        gx = F.slice_all(
            gxp,
            (0, 0, padding[0], padding[1]),
            (n, c, padding[0] + h, padding[1] + wd),
            (1, 1, 1, 1),
        )
    if need[1]:
        cols = _conv_cols(F, x, w._shape, stride, padding, dilation, groups)
        gw = F.reshape(F.sum(F.matmul(g2, F.transpose(cols, 2, 3)), 0), w._shape)
    if has_bias and need[2]:
        gb = F.sum(g, (0, 2, 3))
    return (gx, gw, gb) if has_bias else (gx, gw)


def _ref_conv2d(
    x: np.ndarray,
    w: np.ndarray,
    *rest: np.ndarray,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
    has_bias: bool,
) -> np.ndarray:
    n, c, _, _ = x.shape
    oc, cg, kh, kw = w.shape
    oh, ow = _conv_out(x.shape, w.shape, stride, padding, dilation)
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    out = np.zeros((n, oc, oh, ow), dtype=np.float64)
    ocg = oc // groups
    for i in range(kh):
        for j in range(kw):
            hs, ws = i * dilation[0], j * dilation[1]
            patch = xp[
                :,
                :,
                hs : hs + stride[0] * (oh - 1) + 1 : stride[0],
                ws : ws + stride[1] * (ow - 1) + 1 : stride[1],
            ]
            for gi in range(groups):
                out[:, gi * ocg : (gi + 1) * ocg] += np.einsum(
                    "nchw,oc->nohw",
                    patch[:, gi * cg : (gi + 1) * cg],
                    w[gi * ocg : (gi + 1) * ocg, :, i, j],
                )
    if has_bias:
        out += rest[0].reshape(1, oc, 1, 1)
    return out.astype(x.dtype)


register(
    OpDef(
        "conv2d",
        Group.COMPOSITE,
        -1,
        attrs=CONV_ATTRS,
        infer=_infer_conv2d,
        reference=_ref_conv2d,
        decompose=_decompose_conv2d,
        vjp=_vjp_conv2d,
        backward_name="ConvolutionBackward0",
        saves="i",
        doc="(x, weight[, bias]): 2-D cross-correlation with stride, zero padding, "
        "dilation and groups, as windows (im2col) times the weight matrix",
        eager_compile=True,
    )
)


# --------------------------------------------------------------------------------------
# max_pool2d(x)
# --------------------------------------------------------------------------------------

POOL_ATTRS = (
    Attr("kernel_size", AttrKind.INTS, required=True),
    Attr("stride", AttrKind.INTS, required=True),
    Attr("padding", AttrKind.INTS, (0, 0)),
    Attr("dilation", AttrKind.INTS, (1, 1)),
    Attr("ceil_mode", AttrKind.BOOL, False),
)


def pool_geometry(
    shape: tuple[int, ...],
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((OH, OW), extra bottom/right padding that ceil_mode's last windows reach into)."""
    out, extra = [], []
    for i in range(2):
        o = window_geometry(
            shape[2 + i], kernel_size[i], stride[i], padding[i], dilation[i], ceil_mode
        )
        need = (o - 1) * stride[i] + dilation[i] * (kernel_size[i] - 1) + 1
        out.append(o)
        extra.append(max(0, need - (shape[2 + i] + 2 * padding[i])))
    return (out[0], out[1]), (extra[0], extra[1])


def _infer_max_pool2d(
    types: tuple[TensorType, ...],
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> TensorType:
    op = "max_pool2d"
    (x,) = types
    k = _pair(op, "kernel_size", kernel_size, 1)
    _pair(op, "stride", stride, 1)
    p = _pair(op, "padding", padding, 0)
    d = _pair(op, "dilation", dilation, 1)
    if x.ndim != 4:
        raise RuntimeError(f"{op}: expected a 4-D input (N, C, H, W), got {_pretty(x)}")
    if x.dtype.is_complex or x.dtype is dt.bool_:
        raise TypeError(f"{op}: not implemented for {_pretty(x)}")
    for i in range(2):
        if p[i] * 2 > d[i] * (k[i] - 1) + 1:
            raise RuntimeError(
                f"{op}: pad should be at most half of effective kernel size, "
                f"but got pad={list(p)}, kernel_size={list(k)} and "
                f"dilation={list(d)}"
            )
    (oh, ow), _ = pool_geometry(x.shape, k, stride, p, d, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(
            f"{op}: Given input size: ({'x'.join(map(str, x.shape[1:]))}). "
            f"Calculated output size: ({x.shape[1]}x{oh}x{ow}). Output size is "
            f"too small"
        )
    return TensorType(x.dtype, (x.shape[0], x.shape[1], oh, ow))


def _lowest(d: dt.DType) -> float | int:
    if d.is_floating_point:
        return -math.inf
    return int(np.iinfo(d.np).min)


def pool_windows(
    F: Any,
    x: Any,
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> Any:
    """(N, C, kH*kW, OH, OW): the windows, padding reading as the lowest value."""
    out, extra = pool_geometry(x._shape, kernel_size, stride, padding, dilation, ceil_mode)
    xp = _pad2d(F, x, padding, _lowest(x._dtype), extra)
    return im2col(F, xp, tuple(kernel_size), tuple(stride), tuple(dilation), out)


def _decompose_max_pool2d(
    F: Any,
    x: Any,
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> Any:
    return F.amax(pool_windows(F, x, kernel_size, stride, padding, dilation, ceil_mode), 2)


def _vjp_max_pool2d(
    ctx: Any,
    g: Any,
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> Any:
    F = ctx.F
    (x,) = ctx.inputs
    n, c, h, w = x._shape
    windows = pool_windows(F, x, kernel_size, stride, padding, dilation, ceil_mode)
    k = kernel_size[0] * kernel_size[1]
    first = F.argmax(windows, 2, keepdim=True)  # PyTorch keeps the first max
    onehot = F.eq(F.reshape(F.arange(k), (1, 1, k, 1, 1)), first)
    gcols = F.where(onehot, F.unsqueeze(g, 2), 0.0)
    _, extra = pool_geometry(x._shape, kernel_size, stride, padding, dilation, ceil_mode)
    padded = (h + 2 * padding[0] + extra[0], w + 2 * padding[1] + extra[1])
    gxp = col2im(F, gcols, padded, tuple(kernel_size), tuple(stride), tuple(dilation))
    return F.slice_all(
        gxp, (0, 0, padding[0], padding[1]), (n, c, padding[0] + h, padding[1] + w), (1, 1, 1, 1)
    )


def _ref_max_pool2d(
    x: np.ndarray,
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> np.ndarray:
    (oh, ow), extra = pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = np.pad(
        x,
        ((0, 0), (0, 0), (padding[0], padding[0] + extra[0]), (padding[1], padding[1] + extra[1])),
        constant_values=low,
    )
    out = np.full(x.shape[:2] + (oh, ow), low, dtype=x.dtype)
    for i in range(kernel_size[0]):
        for j in range(kernel_size[1]):
            hs, ws = i * dilation[0], j * dilation[1]
            out = np.maximum(
                out,
                xp[
                    :,
                    :,
                    hs : hs + stride[0] * (oh - 1) + 1 : stride[0],
                    ws : ws + stride[1] * (ow - 1) + 1 : stride[1],
                ],
            )
    return out


register(
    OpDef(
        "max_pool2d",
        Group.COMPOSITE,
        1,
        attrs=POOL_ATTRS,
        infer=_infer_max_pool2d,
        reference=_ref_max_pool2d,
        decompose=_decompose_max_pool2d,
        vjp=_vjp_max_pool2d,
        backward_name="MaxPool2DWithIndicesBackward0",
        saves="i",
        doc="(x): the maximum of each window (NaN propagates); the gradient goes to "
        "the first maximum of each window",
    )
)
