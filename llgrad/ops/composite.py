"""Composite ops: defined by a decomposition into other ops, each with its own vjp.

Decompositions take `F` (the `llgrad.functions` namespace, or the tracer's) and tensors,
so the same definition runs eagerly and, later, emits IR when traced.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType, normalize_axis

AXES = (Attr("axes", AttrKind.INTS, ()), Attr("keepdim", AttrKind.BOOL, False))


def _all_axes(axes: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return tuple(axes) if axes else tuple(range(ndim))


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    ax = set(_all_axes(axes, len(shape)))
    return tuple(1 if i in ax else n for i, n in enumerate(shape) if keepdim or i not in ax)


def _infer_reduce(
    types: tuple[TensorType, ...], axes: tuple[int, ...], keepdim: bool, **_: Any
) -> TensorType:
    (t,) = types
    for a in axes:
        normalize_axis(a, t.ndim, "reduce")
    return TensorType(t.dtype, _reduced_shape(t.shape, axes, keepdim))


def _infer_reduce_real(types: tuple[TensorType, ...], **attrs: Any) -> TensorType:
    """var, std, norm: a complex input gives a real result (of |x|^2 sums), as PyTorch."""
    t = _infer_reduce(types, **attrs)
    return TensorType(t.dtype.to_real(), t.shape)


def _abs_squared(F: Any, x: Any) -> Any:
    """|x|^2 elementwise: x * x for reals (as before), Re(x conj x) for complex."""
    if x._dtype.is_complex:
        return F.real(F.mul(x, F.conj(x)))
    return F.mul(x, x)


def _sign(F: Any, x: Any) -> Any:
    """sign(x) for reals; x / |x| (0 at 0) for complex: the gradient of |x|."""
    if x._dtype.is_complex:
        return F.where(F.eq(x, 0), F.zeros_like(x), F.div(x, F.abs(x)))
    return F.sign(x)


def _real_np(dtype: np.dtype) -> np.dtype:
    return np.empty((), dtype).real.dtype


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in _all_axes(axes, len(shape)):
        n *= shape[a] if shape else 1
    return n


def unreduce(F: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> Any:
    """Broadcast a reduced gradient back over the reduced axes of `shape`."""
    if not keepdim and shape:
        g = F.reshape(g, _reduced_shape(shape, axes, True))
    return F.expand(g, shape)


# -- mean --------------------------------------------------------------------------------


def _decompose_mean(F: Any, x: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    n = _count(x._shape, axes)
    return (
        F.div(F.sum(x, axes or None, keepdim), n)
        if n
        else F.div(F.sum(x, axes or None, keepdim), 0.0)
    )


def _vjp_mean(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    shape = ctx.input_meta[0][0]
    return ctx.F.div(unreduce(ctx.F, g, shape, axes, keepdim), _count(shape, axes))


register(
    OpDef(
        "mean",
        Group.COMPOSITE,
        1,
        attrs=AXES,
        infer=_infer_reduce,
        reference=lambda x, axes, keepdim: np.mean(x, axis=axes or None, keepdims=keepdim).astype(
            x.dtype
        ),
        decompose=_decompose_mean,
        vjp=_vjp_mean,
        backward_name="MeanBackward1",
        saves="",
    )
)


# -- var / std ---------------------------------------------------------------------------

VAR_ATTRS = AXES + (Attr("correction", AttrKind.FLOAT, 1.0),)


def _centered(F: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """`x` minus its mean over `axes`, computed on `x` shifted by its first element along
    them: values that are all equal give exact zeros (a mean of equal values need not
    round to the value), so their variance is exactly 0, as PyTorch's Welford sums give,
    and std's gradient there is PyTorch's 0 rather than a quotient of rounding errors.
    The shift also keeps a large common offset from cancelling digits."""
    reduced = axes or tuple(range(len(x._shape)))
    if any(x._shape[a] == 0 for a in reduced):
        return F.sub(x, F.mean(x, axes or None, True))
    ref = x
    for a in reduced:
        ref = F.slice_dim(ref, a, 0, 1)
    d = F.sub(x, ref)
    return F.sub(d, F.mean(d, axes or None, True))


def _decompose_var(F: Any, x: Any, axes: tuple[int, ...], keepdim: bool, correction: float) -> Any:
    n = _count(x._shape, axes)
    centered = _centered(F, x, axes)
    ss = F.sum(_abs_squared(F, centered), axes or None, keepdim)
    return F.div(ss, max(n - correction, 0))


def _vjp_var(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool, correction: float) -> Any:
    F = ctx.F
    (x,) = ctx.inputs
    n = _count(x._shape, axes)
    centered = _centered(F, x, axes)
    scale = 2.0 / max(n - correction, 0) if n - correction > 0 else math.inf
    return F.mul(F.mul(unreduce(F, g, x._shape, axes, keepdim), centered), scale)


def _decompose_std(F: Any, x: Any, axes: tuple[int, ...], keepdim: bool, correction: float) -> Any:
    return F.sqrt(_decompose_var(F, x, axes, keepdim, correction))


def _vjp_std(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool, correction: float) -> Any:
    F = ctx.F
    (x,) = ctx.inputs
    out = ctx.output
    n = _count(x._shape, axes)
    centered = _centered(F, x, axes)
    # where std is 0 the gradient is 0, as PyTorch defines it (not 0/0)
    zero = F.eq(out, 0)
    scaled = F.where(zero, F.mul(g, 0.0), F.div(g, F.where(zero, F.ones_like(out), out)))
    gs = unreduce(F, scaled, x._shape, axes, keepdim)
    return F.div(F.mul(gs, centered), max(n - correction, 0))


def _ref_var(x: np.ndarray, axes: tuple[int, ...], keepdim: bool, correction: float) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.var(x, axis=axes or None, ddof=correction, keepdims=keepdim).astype(
            _real_np(x.dtype)
        )


register(
    OpDef(
        "var",
        Group.COMPOSITE,
        1,
        attrs=VAR_ATTRS,
        infer=_infer_reduce_real,
        reference=_ref_var,
        decompose=_decompose_var,
        vjp=_vjp_var,
        backward_name="VarBackward0",
        saves="i",
        eager_compile=True,
    )
)
register(
    OpDef(
        "std",
        Group.COMPOSITE,
        1,
        attrs=VAR_ATTRS,
        infer=_infer_reduce_real,
        reference=lambda x, axes, keepdim, correction: np.sqrt(
            _ref_var(x, axes, keepdim, correction)
        ),
        decompose=_decompose_std,
        vjp=_vjp_std,
        backward_name="StdBackward0",
        saves="io",
        eager_compile=True,
    )
)


# -- logsumexp ---------------------------------------------------------------------------


def _decompose_logsumexp(F: Any, x: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    m = F.amax(x, axes or None, True)
    m = F.where(F.isinf(m), F.zeros_like(m), m)  # all -inf (or inf) rows stay exact
    s = F.log(F.sum(F.exp(F.sub(x, m)), axes or None, True))
    out = F.add(s, m)
    if not keepdim:
        out = F.reshape(out, _reduced_shape(x._shape, axes, False))
    return out


def _vjp_logsumexp(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    F = ctx.F
    (x,) = ctx.inputs
    out = unreduce(F, ctx.output, x._shape, axes, keepdim)
    return F.mul(unreduce(F, g, x._shape, axes, keepdim), F.exp(F.sub(x, out)))


def _ref_logsumexp(x: np.ndarray, axes: tuple[int, ...], keepdim: bool) -> np.ndarray:
    from scipy.special import logsumexp

    return np.asarray(logsumexp(x, axis=axes or None, keepdims=keepdim)).astype(x.dtype)


register(
    OpDef(
        "logsumexp",
        Group.COMPOSITE,
        1,
        attrs=AXES,
        infer=_infer_reduce,
        reference=_ref_logsumexp,
        decompose=_decompose_logsumexp,
        vjp=_vjp_logsumexp,
        backward_name="LogsumexpBackward0",
        saves="io",
        eager_compile=True,
    )
)


# -- norm --------------------------------------------------------------------------------

NORM_ATTRS = AXES + (Attr("p", AttrKind.FLOAT, 2.0),)


def _decompose_norm(F: Any, x: Any, axes: tuple[int, ...], keepdim: bool, p: float) -> Any:
    a = F.abs(x)
    dims = axes or None
    if p == math.inf:
        return F.amax(a, dims, keepdim)
    if p == -math.inf:
        return F.amin(a, dims, keepdim)
    if p == 0:
        return F.sum(F.ne(a, 0).to(a._dtype), dims, keepdim)
    if p == 1:
        return F.sum(a, dims, keepdim)
    if p == 2:
        return F.sqrt(F.sum(_abs_squared(F, x), dims, keepdim))
    return F.pow(F.sum(F.pow(a, p), dims, keepdim), 1.0 / p)


def _vjp_norm(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool, p: float) -> Any:
    F = ctx.F
    (x,) = ctx.inputs
    out = unreduce(F, ctx.output, x._shape, axes, keepdim)
    g = unreduce(F, g, x._shape, axes, keepdim)
    if p == 0:
        return F.mul(x, 0.0)
    if p == 1:
        return F.mul(g, _sign(F, x))
    if p in (math.inf, -math.inf):
        mask = F.eq(F.abs(x), out).to(out._dtype)
        count = unreduce(F, F.sum(mask, axes or None, keepdim), x._shape, axes, keepdim)
        return F.div(F.mul(F.mul(g, _sign(F, x)), mask), count)
    if p == 2:
        safe = F.where(F.eq(out, 0), F.ones_like(out), out)
        return F.where(F.eq(out, 0), F.mul(x, 0.0), F.div(F.mul(g, x), safe))
    safe = F.where(F.eq(out, 0), F.ones_like(out), out)
    r = F.mul(F.mul(g, _sign(F, x)), F.div(F.pow(F.abs(x), p - 1), F.pow(safe, p - 1)))
    return F.where(F.eq(out, 0), F.mul(x, 0.0), r)


def _ref_norm(x: np.ndarray, axes: tuple[int, ...], keepdim: bool, p: float) -> np.ndarray:
    a = np.abs(x).astype(np.float64)
    ax = axes or None
    if p == math.inf:
        r = np.max(a, axis=ax, keepdims=keepdim)
    elif p == -math.inf:
        r = np.min(a, axis=ax, keepdims=keepdim)
    elif p == 0:
        r = np.sum(a != 0, axis=ax, keepdims=keepdim)
    else:
        r = np.sum(a**p, axis=ax, keepdims=keepdim) ** (1.0 / p)
    return np.asarray(r).astype(_real_np(x.dtype))


register(
    OpDef(
        "norm",
        Group.COMPOSITE,
        1,
        attrs=NORM_ATTRS,
        infer=_infer_reduce_real,
        reference=_ref_norm,
        decompose=_decompose_norm,
        vjp=_vjp_norm,
        backward_name="NormBackward1",
        saves="io",
        eager_compile=True,
    )
)


# -- softmax / log_softmax ----------------------------------------------------------------

DIM = (Attr("dim", AttrKind.INT, required=True),)


def _infer_same(types: tuple[TensorType, ...], dim: int) -> TensorType:
    normalize_axis(dim, types[0].ndim, "softmax")
    return types[0]


def _decompose_softmax(F: Any, x: Any, dim: int) -> Any:
    m = F.amax(x, dim, True)
    # a row of -inf: shift by 0 (0/0 = nan, as PyTorch); a row with +inf keeps inf - inf =
    # nan, which the sum spreads over the row (PyTorch: [inf, 1] -> [nan, nan])
    m = F.where(F.logical_and(F.isinf(m), F.lt(m, F.zeros_like(m))), F.zeros_like(m), m)
    e = F.exp(F.sub(x, m))
    return F.div(e, F.sum(e, dim, True))


def _vjp_softmax(ctx: Any, g: Any, dim: int) -> Any:
    F = ctx.F
    y = ctx.output
    gy = F.mul(g, y)
    return F.sub(gy, F.mul(y, F.sum(gy, dim, True)))


def _decompose_log_softmax(F: Any, x: Any, dim: int) -> Any:
    return F.sub(x, F.logsumexp(x, dim, True))


def _vjp_log_softmax(ctx: Any, g: Any, dim: int) -> Any:
    F = ctx.F
    y = ctx.output
    return F.sub(g, F.mul(F.exp(y), F.sum(g, dim, True)))


def _ref_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - np.max(x64, axis=dim, keepdims=True))
    return (e / e.sum(axis=dim, keepdims=True)).astype(x.dtype)


def _ref_log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    from scipy.special import log_softmax

    return log_softmax(x.astype(np.float64), axis=dim).astype(x.dtype)


register(
    OpDef(
        "softmax",
        Group.COMPOSITE,
        1,
        attrs=DIM,
        infer=_infer_same,
        reference=_ref_softmax,
        decompose=_decompose_softmax,
        vjp=_vjp_softmax,
        backward_name="SoftmaxBackward0",
        saves="o",
        eager_compile=True,
    )
)
register(
    OpDef(
        "log_softmax",
        Group.COMPOSITE,
        1,
        attrs=DIM,
        infer=_infer_same,
        reference=_ref_log_softmax,
        decompose=_decompose_log_softmax,
        vjp=_vjp_log_softmax,
        backward_name="LogSoftmaxBackward0",
        saves="o",
        eager_compile=True,
    )
)
