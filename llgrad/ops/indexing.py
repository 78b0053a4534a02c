"""Indexing primitives: gather, scatter-add and index-put over a linear index; nonzero.

Every advanced-indexing expression (`x[idx]`, `x[mask]`, `x[a, :, b]`) reduces to these
three ops over a *linear* index: an int64 tensor whose elements are offsets into the
row-major (C-order) element sequence of `x`, i.e. positions in `x.reshape(-1)`. The
frontend (`llgrad.eager.indexing.linear_index`) turns a multi-dimensional index into that
form, wrapping negative indices per dimension first; in the IR the primitives see only the
linear form, so the compiler needs one gather and one scatter lowering. A negative linear
index wraps once by `x.numel()`, like NumPy's `x.reshape(-1)[i]`.

Eager execution makes `x` contiguous before addressing it linearly (a no-op when it already
is); the generated kernels check every index and raise `IndexError` instead of touching
memory outside the buffer.

Derivative rules are attached by autograd (`vjp` stays empty here): the gradient of
`gather` is `scatter_add` into zeros, the gradient of `scatter_add` w.r.t. `src` is
`gather`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import dtypes as dt
from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType, broadcast_shapes

INDEX_DTYPES = (dt.int64,)


def _check_index(op: str, index: TensorType, x: TensorType) -> None:
    if index.dtype not in INDEX_DTYPES:
        raise TypeError(f"{op}: the linear index must be int64, got {index} (indexing {x})")


def _infer_gather(types: tuple[TensorType, ...]) -> TensorType:
    """`out[j...] = x.reshape(-1)[index[j...]]`: the output has the index's shape."""
    x, index = types
    _check_index("gather", index, x)
    return TensorType(x.dtype, index.shape)


def _infer_scatter(op: str):
    def infer(types: tuple[TensorType, ...]) -> TensorType:
        """`src` broadcasts to the index's shape; the result has `base`'s type."""
        base, index, src = types
        _check_index(op, index, base)
        if src.dtype is not base.dtype:
            raise TypeError(
                f"{op}: src and base must share one dtype in the IR, got base {base}, src {src}"
            )
        try:
            shape = broadcast_shapes(src.shape, index.shape, op=op)
        except ValueError:
            shape = None
        if shape != index.shape:
            raise ValueError(
                f"{op}: src of shape {list(src.shape)} cannot be broadcast to "
                f"the index shape {list(index.shape)}"
            )
        return base

    return infer


def _flat_index(op: str, index: np.ndarray, numel: int) -> np.ndarray:
    """Bounds-check and wrap a linear index the way the kernels do."""
    index = np.asarray(index, dtype=np.int64)
    bad = (index < -numel) | (index >= numel)
    if bad.any():
        first = int(index[bad].reshape(-1)[0])
        raise IndexError(f"{op}: index {first} is out of bounds for dimension 0 with size {numel}")
    return np.where(index < 0, index + numel, index)


def _ref_gather(x: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).reshape(-1)[_flat_index("gather", index, x.size)]


def _ref_scatter_add(base: np.ndarray, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = np.array(base, copy=True, order="C")  # so reshape(-1) is a view, not a copy
    flat = out.reshape(-1)
    idx = _flat_index("scatter_add", index, out.size)
    np.add.at(flat, idx, np.broadcast_to(src, idx.shape).astype(out.dtype))
    return out


def _ref_index_put(base: np.ndarray, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = np.array(base, copy=True, order="C")  # so reshape(-1) is a view, not a copy
    flat = out.reshape(-1)
    idx = _flat_index("index_put", index, out.size)
    flat[idx.reshape(-1)] = np.broadcast_to(src, idx.shape).astype(out.dtype).reshape(-1)
    return out


def _infer_nonzero(types: tuple[TensorType, ...], size: int | None) -> TensorType:
    """The row count is data-dependent; only `size=` gives the op a static type."""
    (x,) = types
    if x.dtype.is_complex:
        raise TypeError(f"nonzero: not implemented for {x.dtype.name} (input {x})")
    if size is None:
        raise ValueError(
            f"nonzero: the number of rows depends on the values of {x}, so the "
            f"op has no static type; pass size=N for a fixed-size result "
            f"(padded with zeros or truncated), or run it eagerly"
        )
    if size < 0:
        raise ValueError(f"nonzero: size must be non-negative, got {size}")
    return TensorType(dt.int64, (size, x.ndim))


def _ref_nonzero(x: np.ndarray, size: int | None) -> np.ndarray:
    coords = np.argwhere(x).astype(np.int64).reshape(-1, x.ndim)
    if size is None:
        return coords
    out = np.zeros((size, x.ndim), dtype=np.int64)
    n = min(size, coords.shape[0])
    out[:n] = coords[:n]
    return out


register(
    OpDef(
        "gather",
        Group.INDEX,
        2,
        infer=_infer_gather,
        reference=_ref_gather,
        backward_name="IndexBackward0",
        doc="out[j...] = x.reshape(-1)[index[j...]]; index int64 linear offsets",
    )
)
register(
    OpDef(
        "scatter_add",
        Group.INDEX,
        3,
        infer=_infer_scatter("scatter_add"),
        reference=_ref_scatter_add,
        backward_name="IndexPutBackward0",
        doc="out = base.copy(); out.reshape(-1)[index[j]] += src[j], duplicates add up",
    )
)
register(
    OpDef(
        "index_put",
        Group.INDEX,
        3,
        infer=_infer_scatter("index_put"),
        reference=_ref_index_put,
        backward_name="IndexPutBackward0",
        doc="out = base.copy(); out.reshape(-1)[index[j]] = src[j]; for duplicate "
        "indices one of the writes wins (the kernels keep the last)",
    )
)
register(
    OpDef(
        "nonzero",
        Group.INDEX,
        1,
        attrs=(Attr("size", AttrKind.OPT_INT),),
        infer=_infer_nonzero,
        reference=_ref_nonzero,
        backward_name=None,
        promotion="none",
        doc="int64 (n, ndim) coordinates of the non-zero elements in row-major order",
        extra={"data_dependent_shape": True},
    )
)


# --------------------------------------------------------------------------------------
# Derivative rules (conventions in ops/elementwise.py): gather and scatter_add are each
# other's adjoints.
# --------------------------------------------------------------------------------------

from ..ir.registry import OPS  # noqa: E402


def _vjp_gather(ctx: Any, g: Any) -> tuple:
    F = ctx.F
    shape, dtype = ctx.input_meta[0]
    index = ctx.inputs[1]
    base = F.zeros(shape, dtype=g._dtype)
    return (F.scatter_add_linear(base, index, g), None)


def _vjp_scatter_add(ctx: Any, g: Any) -> tuple:
    F = ctx.F
    index = ctx.inputs[1]
    gs = F.gather_linear(g, index) if ctx.needs_input_grad[2] else None
    return (g, None, gs)


def _vjp_index_put(ctx: Any, g: Any) -> tuple:
    F = ctx.F
    index = ctx.inputs[1]
    gb = (
        F.index_put_linear(g, index, F.zeros(index._shape, dtype=g._dtype))
        if ctx.needs_input_grad[0]
        else None
    )
    gs = F.gather_linear(g, index) if ctx.needs_input_grad[2] else None
    return (gb, None, gs)


for _name, _rule in (
    ("gather", _vjp_gather),
    ("scatter_add", _vjp_scatter_add),
    ("index_put", _vjp_index_put),
):
    OPS[_name].vjp = _rule
    OPS[_name].saves = "i"
