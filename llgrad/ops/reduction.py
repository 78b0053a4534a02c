"""Reduction primitives: sum, prod, amax, amin, argmax, argmin.

Every entry takes `axes` (an empty tuple means every axis) and `keepdim`. Output dtypes
follow PyTorch: integer and bool inputs sum (and multiply) to int64, floats keep their
dtype (a requested `dtype=` is a cast the frontend inserts, not an attribute here);
argmax/argmin return int64. The shape rules are shared by the IR and eager dispatch, so
every bad call (axis out of range, repeated axis, empty max) fails the same way in both.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir import dtypes as dt
from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType, normalize_axis

REDUCTIONS = ("sum", "prod", "amax", "amin", "argmax", "argmin")
ARG_REDUCTIONS = ("argmax", "argmin")

_ATTRS = (Attr("axes", AttrKind.INTS, ()), Attr("keepdim", AttrKind.BOOL, False))


# --------------------------------------------------------------------------------------
# Axis handling (shared with eager dispatch)
# --------------------------------------------------------------------------------------


def normalize_axes(op: str, axes: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """Axes in [0, ndim), sorted; `()` means all axes. Duplicates are an error, as in PyTorch.

    A 0-d tensor accepts axis 0 / -1 and reduces nothing (its result is 0-d).
    """
    ndim = len(shape)
    if not axes:
        return tuple(range(ndim))
    seen: set[int] = set()
    for a in axes:
        n = normalize_axis(a, ndim, op)
        if n in seen:
            raise RuntimeError(
                f"{op}: dim {n} appears multiple times in the list of dims "
                f"{list(axes)} (input shape {list(shape)})"
            )
        seen.add(n)
    return tuple(sorted(a for a in seen if a < ndim))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    """The result shape for normalized `axes`."""
    if keepdim:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def accumulate_dtype(op: str, d: dt.DType) -> dt.DType:
    """The result dtype of a reduction of a `d` tensor (PyTorch's rule)."""
    if op in ARG_REDUCTIONS:
        return dt.int64
    if op in ("sum", "prod") and d.category < 2:
        return dt.int64
    return d


def backward_name(op: str, axes: tuple[int, ...]) -> str | None:
    """PyTorch's grad_fn class: sum and prod have one class for all axes and one for dims."""
    opdef = _OPDEFS[op]
    if not axes and "backward_name_all" in opdef.extra:
        return opdef.extra["backward_name_all"]
    return opdef.backward_name


# --------------------------------------------------------------------------------------
# Shape rules
# --------------------------------------------------------------------------------------


def _check_dtype(op: str, t: TensorType) -> None:
    if t.dtype.is_complex and op not in ("sum", "prod"):  # complex numbers are not ordered
        raise TypeError(f"{op}: not implemented for {t.dtype.name} (input {t})")
    if op in ARG_REDUCTIONS and t.dtype is dt.bool_:
        raise TypeError(f"{op}(): does not support bool input (input {t})")


def _check_nonempty(op: str, shape: tuple[int, ...], axes: tuple[int, ...], all_axes: bool) -> None:
    """max-like reductions have no identity: an empty reduction is an error (PyTorch)."""
    if all_axes:
        if any(n == 0 for n in shape):
            raise RuntimeError(
                f"{op}(): Expected reduction dim to be specified for "
                f"input.numel() == 0 (input shape {list(shape)}); specify "
                f"the reduction dim with the 'dim' argument"
            )
        return
    for a in axes:
        if shape[a] == 0:
            raise IndexError(
                f"{op}(): Expected reduction dim {a} to have non-zero size "
                f"(input shape {list(shape)})"
            )


def _infer(op: str) -> Callable[..., TensorType]:
    def infer(types: tuple[TensorType, ...], axes: tuple[int, ...], keepdim: bool) -> TensorType:
        (t,) = types
        _check_dtype(op, t)
        if op in ARG_REDUCTIONS and len(axes) > 1:
            raise RuntimeError(f"{op}: expected at most one dim, got {list(axes)} (input {t})")
        norm = normalize_axes(op, axes, t.shape)
        if op not in ("sum", "prod"):
            _check_nonempty(op, t.shape, norm, all_axes=not axes)
        if op in ARG_REDUCTIONS and not axes:
            # the flattened input: keepdim gives all ones, as torch.argmax(x, keepdim=True)
            shape = tuple(1 for _ in t.shape) if keepdim else ()
        else:
            shape = reduced_shape(t.shape, norm, keepdim)
        return TensorType(accumulate_dtype(op, t.dtype), shape)

    return infer


# --------------------------------------------------------------------------------------
# NumPy references (float16 accumulates in float32, as the kernels do)
# --------------------------------------------------------------------------------------


def _np_axes(x: np.ndarray, axes: tuple[int, ...]) -> tuple[int, ...] | None:
    if x.ndim == 0:
        return None
    return normalize_axes("reference", axes, x.shape)


def _ref_sum_prod(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, axes: tuple[int, ...] = (), keepdim: bool = False) -> np.ndarray:
        ax = _np_axes(x, axes)
        if x.dtype.kind in "biu":
            return np.asarray(fn(x, axis=ax, keepdims=keepdim, dtype=np.int64))
        wide = np.float32 if x.dtype == np.float16 else x.dtype
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(fn(x, axis=ax, keepdims=keepdim, dtype=wide)).astype(x.dtype)

    return ref


def _ref_extreme(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, axes: tuple[int, ...] = (), keepdim: bool = False) -> np.ndarray:
        return np.asarray(fn(x, axis=_np_axes(x, axes), keepdims=keepdim))

    return ref


def _ref_arg(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """NumPy's argmax/argmin also return the first NaN, like PyTorch."""

    def ref(x: np.ndarray, axes: tuple[int, ...] = (), keepdim: bool = False) -> np.ndarray:
        if x.ndim == 0:
            return np.zeros((), dtype=np.int64)
        if not axes:
            r = fn(x.reshape(-1))
            return np.full((1,) * x.ndim if keepdim else (), r, dtype=np.int64)
        (a,) = normalize_axes("reference", axes, x.shape)
        return np.asarray(fn(x, axis=a, keepdims=keepdim)).astype(np.int64)

    return ref


# --------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------

_DOCS = {
    "sum": "Sum over `axes`; ints and bool sum to int64.",
    "prod": "Product over `axes`; ints and bool multiply in int64.",
    "amax": "Maximum over `axes`; NaN propagates.",
    "amin": "Minimum over `axes`; NaN propagates.",
    "argmax": "Index of the first maximum over one axis or the flattened input; NaN counts "
    "as the maximum.",
    "argmin": "Index of the first minimum over one axis or the flattened input; NaN counts "
    "as the minimum.",
}


def _reduction(
    name: str, reference: Callable[..., Any], backward: str | None, backward_all: str | None = None
) -> OpDef:
    extra = {} if backward_all is None else {"backward_name_all": backward_all}
    return register(
        OpDef(
            name,
            Group.REDUCE,
            1,
            attrs=_ATTRS,
            infer=_infer(name),
            reference=reference,
            backward_name=backward,
            promotion="none",
            doc=_DOCS[name],
            extra=extra,
        )
    )


_OPDEFS: dict[str, OpDef] = {
    "sum": _reduction("sum", _ref_sum_prod(np.sum), "SumBackward1", "SumBackward0"),
    "prod": _reduction("prod", _ref_sum_prod(np.prod), "ProdBackward1", "ProdBackward0"),
    "amax": _reduction("amax", _ref_extreme(np.max), "AmaxBackward0"),
    "amin": _reduction("amin", _ref_extreme(np.min), "AminBackward0"),
    "argmax": _reduction("argmax", _ref_arg(np.argmax), None),
    "argmin": _reduction("argmin", _ref_arg(np.argmin), None),
}


# --------------------------------------------------------------------------------------
# Derivative rules (conventions in ops/elementwise.py)
# --------------------------------------------------------------------------------------

from ..ir.registry import OPS  # noqa: E402
from .composite import unreduce  # noqa: E402


def _vjp_sum(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    return unreduce(ctx.F, g, ctx.input_meta[0][0], axes, keepdim)


def _jvp_sum(ctx: Any, tangents: tuple, axes: tuple[int, ...], keepdim: bool) -> Any:
    return ctx.F.sum(tangents[0], axes or None, keepdim)


def _vjp_prod(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    """d prod / d x_i = product of the others; exact with zeros, also its derivative.

    A non-zero x_i gets g * out / x_i: with zeros in the slice it is 0, and its derivative
    (through `out`) is still the product of the others. A zero x_i gets g times the product
    of the non-zeros (`others`) times the other zero when there are two (`zsum - x_i`, 0
    but with derivative 1 in that zero), and 0 when there are more.
    """
    F = ctx.F
    (x,) = ctx.inputs
    dims = axes or None
    shape = x._shape
    out = unreduce(F, ctx.output, shape, axes, keepdim)
    g = unreduce(F, g, shape, axes, keepdim)
    is_zero = F.eq(x, 0)
    safe = F.where(is_zero, F.ones_like(x), x)
    zeros = unreduce(F, F.sum(is_zero, dims, keepdim), shape, axes, keepdim)
    others = unreduce(F, F.prod(safe, dims, keepdim), shape, axes, keepdim)
    zsum = unreduce(F, F.sum(F.where(is_zero, x, 0.0), dims, keepdim), shape, axes, keepdim)
    g_others = F.mul(g, F.conj(others))  # conj: complex inputs (PyTorch's convention)
    at_zero = F.where(
        F.eq(zeros, 1),
        g_others,
        F.where(F.eq(zeros, 2), F.mul(g_others, F.conj(F.sub(zsum, x))), F.mul(g, 0.0)),
    )
    return F.where(is_zero, at_zero, F.div(F.mul(g, F.conj(out)), F.conj(safe)))


def _vjp_extreme(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    """amax/amin: the gradient is shared evenly among the elements that tie for it."""
    F = ctx.F
    (x,) = ctx.inputs
    shape = x._shape
    out = unreduce(F, ctx.output, shape, axes, keepdim)
    mask = F.eq(x, out).to(g._dtype)
    count = unreduce(F, F.sum(mask, axes or None, keepdim), shape, axes, keepdim)
    return F.div(F.mul(unreduce(F, g, shape, axes, keepdim), mask), count)


OPS["sum"].vjp, OPS["sum"].jvp, OPS["sum"].saves = _vjp_sum, _jvp_sum, ""
OPS["prod"].vjp, OPS["prod"].saves = _vjp_prod, "io"
for _name in ("amax", "amin"):
    OPS[_name].vjp, OPS[_name].saves = _vjp_extreme, "io"
