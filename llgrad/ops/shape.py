"""Movement ops: reshape, permute, expand, slice, pad, cat, flip.

In eager mode most are views (no data moves); in compiled graphs they are index
arithmetic that fusion folds into the consumers' loads. Composite shape functions
(squeeze, unsqueeze, flatten, transpose, stack, split, chunk) are defined in the frontend
in terms of these.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType, broadcast_shapes, normalize_axis


def infer_reshape_shape(numel: int, shape: tuple[int, ...], op: str = "reshape") -> tuple[int, ...]:
    """Resolve one -1 and check the element count; errors name both shapes."""
    shape = tuple(shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred, got {list(shape)}")
    if any(s < -1 for s in shape):
        raise RuntimeError(f"{op}: invalid shape dimension in {list(shape)}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"{op}: shape {list(shape)} is invalid for input of size {numel}")
        shape = shape[: unknown[0]] + (numel // known,) + shape[unknown[0] + 1 :]
    elif known != numel:
        raise RuntimeError(f"{op}: shape {list(shape)} is invalid for input of size {numel}")
    return shape


def _infer_reshape(types: tuple[TensorType, ...], shape: tuple[int, ...]) -> TensorType:
    (t,) = types
    return TensorType(t.dtype, infer_reshape_shape(t.numel, shape))


_permutations: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}


def check_permutation(perm: tuple[int, ...], ndim: int, op: str = "permute") -> tuple[int, ...]:
    """`perm` with negative dims made positive; raises if it is no permutation of ndim
    dims. (Valid ones are remembered: transposes run in every linear layer's backward.)"""
    try:
        return _permutations[(perm, ndim)]
    except (KeyError, TypeError):
        pass
    norm = _check_permutation(perm, ndim, op)
    if len(_permutations) < 4096 and all(p.__class__ is int for p in perm):
        _permutations[(perm, ndim)] = norm
    return norm


def _check_permutation(perm: tuple[int, ...], ndim: int, op: str) -> tuple[int, ...]:
    if len(perm) != ndim:
        raise RuntimeError(
            f"{op}: number of dims don't match in permute: input has {ndim} "
            f"dims but {len(perm)} were given ({list(perm)})"
        )
    norm = tuple(normalize_axis(p, ndim, op) for p in perm)
    if sorted(norm) != list(range(ndim)):
        raise RuntimeError(f"{op}: repeated dim in permutation {list(perm)}")
    return norm


def _infer_permute(types: tuple[TensorType, ...], perm: tuple[int, ...]) -> TensorType:
    (t,) = types
    p = check_permutation(perm, t.ndim)
    return TensorType(t.dtype, tuple(t.shape[i] for i in p))


def expand_shape(
    shape: tuple[int, ...], target: tuple[int, ...], op: str = "expand"
) -> tuple[int, ...]:
    if len(target) < len(shape):
        raise RuntimeError(
            f"{op}: the number of sizes provided ({len(target)}) must be "
            f"greater or equal to the number of dimensions in the tensor "
            f"({len(shape)})"
        )
    lead = len(target) - len(shape)
    out = list(target[:lead])
    if any(s < 0 for s in out):
        raise RuntimeError(f"{op}: -1 is not allowed in a leading, non-existing dimension")
    for s, t in zip(shape, target[lead:]):
        if t == -1:
            out.append(s)
        elif s == 1 or s == t:
            out.append(t)
        else:
            raise RuntimeError(
                f"{op}: the expanded size of the tensor ({t}) must match the "
                f"existing size ({s}) at non-singleton dimension "
                f"(shape {list(shape)} to {list(target)})"
            )
    return tuple(out)


def _infer_expand(types: tuple[TensorType, ...], shape: tuple[int, ...]) -> TensorType:
    (t,) = types
    return TensorType(t.dtype, expand_shape(t.shape, shape))


def slice_length(size: int, start: int, stop: int, step: int) -> int:
    return max(0, (stop - start + step - 1) // step)


def _infer_slice(
    types: tuple[TensorType, ...],
    starts: tuple[int, ...],
    stops: tuple[int, ...],
    steps: tuple[int, ...],
) -> TensorType:
    (t,) = types
    if not len(starts) == len(stops) == len(steps) == t.ndim:
        raise RuntimeError(f"slice: needs one start/stop/step per dimension of {t}")
    shape = []
    for n, a, b, s in zip(t.shape, starts, stops, steps):
        if s <= 0:
            raise ValueError(f"slice: step must be positive, got {s}")
        if not (0 <= a <= n and 0 <= b <= n):
            raise IndexError(f"slice: bounds [{a}:{b}] outside a dimension of size {n}")
        shape.append(slice_length(n, a, b, s))
    return TensorType(t.dtype, tuple(shape))


def _ref_slice(
    x: np.ndarray, starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]
) -> np.ndarray:
    return x[tuple(slice(a, b, s) for a, b, s in zip(starts, stops, steps))]


def _infer_pad(
    types: tuple[TensorType, ...],
    lows: tuple[int, ...],
    highs: tuple[int, ...],
    interior: tuple[int, ...],
    value: Any,
) -> TensorType:
    """Inverse of a strided slice: `interior` zeros between elements, then edges."""
    (t,) = types
    shape = []
    for n, lo, hi, it in zip(t.shape, lows, highs, interior):
        base = n + max(n - 1, 0) * it if n else 0
        shape.append(lo + base + hi)
    return TensorType(t.dtype, tuple(shape))


def _ref_pad(
    x: np.ndarray,
    lows: tuple[int, ...],
    highs: tuple[int, ...],
    interior: tuple[int, ...],
    value: Any,
) -> np.ndarray:
    t = _infer_pad((TensorType(None, x.shape),), lows, highs, interior, value)  # type: ignore
    out = np.full(t.shape, value, dtype=x.dtype)
    index = tuple(
        slice(lo, lo + (n - 1) * (it + 1) + 1 if n else lo, it + 1)
        for n, lo, it in zip(x.shape, lows, interior)
    )
    out[index] = x
    return out


def _infer_cat(types: tuple[TensorType, ...], axis: int) -> TensorType:
    if not types:
        raise RuntimeError("cat: expected a non-empty list of Tensors")
    first = types[0]
    if first.ndim == 0:
        raise RuntimeError("cat: zero-dimensional tensor cannot be concatenated")
    ax = normalize_axis(axis, first.ndim, "cat")
    total = 0
    for i, t in enumerate(types):
        if t.dtype is not first.dtype:
            raise TypeError(
                f"cat: all inputs must share one dtype in the IR, got "
                f"{', '.join(str(t) for t in types)}"
            )
        if t.ndim != first.ndim or any(
            a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != ax
        ):
            raise RuntimeError(
                f"cat: sizes of tensors must match except in dimension {ax}: "
                f"expected {list(first.shape)} but got {list(t.shape)} for "
                f"tensor number {i} in the list"
            )
        total += t.shape[ax]
    shape = list(first.shape)
    shape[ax] = total
    return TensorType(first.dtype, tuple(shape))


def _infer_flip(types: tuple[TensorType, ...], axes: tuple[int, ...]) -> TensorType:
    for a in axes:
        normalize_axis(a, types[0].ndim, "flip")
    return types[0]


def _infer_broadcast(types: tuple[TensorType, ...], shape: tuple[int, ...]) -> TensorType:
    broadcast_shapes(types[0].shape, shape, op="broadcast_to")
    return _infer_expand(types, shape)


register(
    OpDef(
        "reshape",
        Group.MOVEMENT,
        1,
        attrs=(Attr("shape", AttrKind.INTS, required=True),),
        infer=_infer_reshape,
        reference=lambda x, shape: x.reshape(shape),
        backward_name="ViewBackward0",
    )
)
register(
    OpDef(
        "permute",
        Group.MOVEMENT,
        1,
        attrs=(Attr("perm", AttrKind.INTS, required=True),),
        infer=_infer_permute,
        reference=lambda x, perm: np.transpose(x, perm),
        backward_name="PermuteBackward0",
    )
)
register(
    OpDef(
        "expand",
        Group.MOVEMENT,
        1,
        attrs=(Attr("shape", AttrKind.INTS, required=True),),
        infer=_infer_expand,
        reference=lambda x, shape: np.broadcast_to(x, expand_shape(x.shape, shape)),
        backward_name="ExpandBackward0",
    )
)
register(
    OpDef(
        "slice",
        Group.MOVEMENT,
        1,
        attrs=(
            Attr("starts", AttrKind.INTS, required=True),
            Attr("stops", AttrKind.INTS, required=True),
            Attr("steps", AttrKind.INTS, required=True),
        ),
        infer=_infer_slice,
        reference=_ref_slice,
        backward_name="SliceBackward0",
    )
)
register(
    OpDef(
        "pad",
        Group.MOVEMENT,
        1,
        attrs=(
            Attr("lows", AttrKind.INTS, required=True),
            Attr("highs", AttrKind.INTS, required=True),
            Attr("interior", AttrKind.INTS, required=True),
            Attr("value", AttrKind.SCALAR, 0),
        ),
        infer=_infer_pad,
        reference=_ref_pad,
        backward_name="ConstantPadNdBackward0",
    )
)
register(
    OpDef(
        "cat",
        Group.MOVEMENT,
        -1,
        attrs=(Attr("axis", AttrKind.INT, 0),),
        infer=_infer_cat,
        reference=lambda *xs, axis: np.concatenate(xs, axis=axis),
        backward_name="CatBackward0",
    )
)
register(
    OpDef(
        "flip",
        Group.MOVEMENT,
        1,
        attrs=(Attr("axes", AttrKind.INTS, required=True),),
        infer=_infer_flip,
        reference=lambda x, axes: np.flip(x, axes),
        backward_name="FlipBackward0",
    )
)


# --------------------------------------------------------------------------------------
# Derivative rules (see ops/elementwise.py for the conventions)
# --------------------------------------------------------------------------------------

from ..ir.registry import OPS  # noqa: E402


def _vjp_reshape(ctx: Any, g: Any, shape: tuple[int, ...]) -> Any:
    return ctx.F.reshape(g, ctx.input_meta[0][0])


def _vjp_permute(ctx: Any, g: Any, perm: tuple[int, ...]) -> Any:
    n = len(perm)
    inverse = [0] * n
    for i, p in enumerate(perm):
        inverse[p % n] = i
    return ctx.F.permute(g, tuple(inverse))


def _vjp_expand(ctx: Any, g: Any, shape: tuple[int, ...]) -> Any:
    return ctx.F.sum_to_size(g, ctx.input_meta[0][0])


def _vjp_slice(
    ctx: Any, g: Any, starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]
) -> Any:
    shape = ctx.input_meta[0][0]
    lows, highs, interior = [], [], []
    for n, a, s, m in zip(shape, starts, steps, g._shape):
        if m == 0:
            lows.append(n)
            highs.append(0)
            interior.append(0)
            continue
        last = a + (m - 1) * s
        lows.append(a)
        highs.append(n - last - 1)
        interior.append(s - 1)
    if any(m == 0 for m in g._shape):
        return ctx.F.zeros(shape, dtype=g._dtype)
    return ctx.F.pad_dims(g, lows, highs, interior, 0)


def _vjp_pad(
    ctx: Any,
    g: Any,
    lows: tuple[int, ...],
    highs: tuple[int, ...],
    interior: tuple[int, ...],
    value: Any,
) -> Any:
    shape = ctx.input_meta[0][0]
    starts = tuple(lows)
    stops = tuple(
        lo + (n - 1) * (it + 1) + 1 if n else lo for n, lo, it in zip(shape, lows, interior)
    )
    steps = tuple(it + 1 for it in interior)
    return ctx.F.slice_all(g, starts, stops, steps)


def _vjp_cat(ctx: Any, g: Any, axis: int) -> tuple:
    F = ctx.F
    ax = normalize_axis(axis, g.ndim, "cat")
    sizes = [meta[0][ax] for meta in ctx.input_meta]
    return tuple(F.split(g, sizes, ax))


def _vjp_flip(ctx: Any, g: Any, axes: tuple[int, ...]) -> Any:
    return ctx.F.flip(g, axes)


for _name, _rule in [
    ("reshape", _vjp_reshape),
    ("permute", _vjp_permute),
    ("expand", _vjp_expand),
    ("slice", _vjp_slice),
    ("pad", _vjp_pad),
    ("cat", _vjp_cat),
    ("flip", _vjp_flip),
]:
    OPS[_name].vjp = _rule
    OPS[_name].saves = ""


# Forward mode: these ops are linear, so a tangent goes through the op itself.


def _tangent(ctx: Any, tangents: tuple, i: int = 0) -> Any:
    t = tangents[i]
    if t is None:
        shape, dtype = ctx.input_meta[i]
        return ctx.F.zeros(shape, dtype=dtype)
    return t


OPS["reshape"].jvp = lambda ctx, ts, shape: ctx.F.reshape(_tangent(ctx, ts), shape)
OPS["permute"].jvp = lambda ctx, ts, perm: ctx.F.permute(_tangent(ctx, ts), perm)
OPS["expand"].jvp = lambda ctx, ts, shape: ctx.F.expand(_tangent(ctx, ts), shape)
OPS["slice"].jvp = lambda ctx, ts, starts, stops, steps: ctx.F.slice_all(
    _tangent(ctx, ts), starts, stops, steps
)
OPS["pad"].jvp = lambda ctx, ts, lows, highs, interior, value: ctx.F.pad_dims(
    _tangent(ctx, ts), lows, highs, interior, 0
)
OPS["cat"].jvp = lambda ctx, ts, axis: ctx.F.cat(
    [_tangent(ctx, ts, i) for i in range(len(ts))], axis
)
OPS["flip"].jvp = lambda ctx, ts, axes: ctx.F.flip(_tangent(ctx, ts), axes)


# --------------------------------------------------------------------------------------
# Complex <-> real reinterpretation: (..., ) complex is (..., 2) real in memory
# --------------------------------------------------------------------------------------


def _infer_view_as_real(types: tuple[TensorType, ...]) -> TensorType:
    (t,) = types
    if not t.dtype.is_complex:
        raise TypeError(f"view_as_real is only supported for complex tensors (input {t})")
    return TensorType(t.dtype.to_real(), t.shape + (2,))


def _infer_view_as_complex(types: tuple[TensorType, ...]) -> TensorType:
    (t,) = types
    if t.dtype.name not in ("float32", "float64"):
        raise TypeError(
            f"view_as_complex is only supported for float32 and float64 tensors (input {t})"
        )
    if not t.shape or t.shape[-1] != 2:
        raise RuntimeError(
            f"view_as_complex: Tensor must have a last dimension of size 2 (input {t})"
        )
    return TensorType(t.dtype.to_complex(), t.shape[:-1])


def _ref_view_as_complex(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape[:-1], dtype=np.result_type(x.dtype, np.complex64))
    out.real, out.imag = x[..., 0], x[..., 1]
    return out


def _decompose_view_as_real(F: Any, x: Any) -> Any:
    return F.stack([F.real(x), F.imag(x)], -1)


def _decompose_view_as_complex(F: Any, x: Any) -> Any:
    return F.complex(F.select(x, -1, 0), F.select(x, -1, 1))


# Eager mode runs these as views of the same memory (functions/shape.py); a compiled graph,
# whose buffers have one dtype each, gets the decompositions (parts, stack / complex).
register(
    OpDef(
        "view_as_real",
        Group.COMPOSITE,
        1,
        infer=_infer_view_as_real,
        reference=lambda x: np.stack([x.real, x.imag], axis=-1),
        decompose=_decompose_view_as_real,
        backward_name="ViewAsRealBackward0",
        saves="",
    )
)
register(
    OpDef(
        "view_as_complex",
        Group.COMPOSITE,
        1,
        infer=_infer_view_as_complex,
        reference=_ref_view_as_complex,
        decompose=_decompose_view_as_complex,
        backward_name="ViewAsComplexBackward0",
        saves="",
    )
)


def _vjp_view_as_real(ctx: Any, g: Any) -> Any:
    return ctx.F.view_as_complex(ctx.F.contiguous(g))


def _vjp_view_as_complex(ctx: Any, g: Any) -> Any:
    return ctx.F.view_as_real(g)


OPS["view_as_real"].vjp = _vjp_view_as_real
OPS["view_as_complex"].vjp = _vjp_view_as_complex
OPS["view_as_real"].jvp = lambda ctx, ts: ctx.F.view_as_real(_tangent(ctx, ts))
OPS["view_as_complex"].jvp = lambda ctx, ts: ctx.F.view_as_complex(
    ctx.F.contiguous(_tangent(ctx, ts))
)
