"""Eager indexing: `t[index]`, `t[index] = value`, and the scatter-back of a gradient.

An index expression is parsed once into two parts:

* a *basic* part (ints, slices, `None`, `...`), applied as a chain of views
  (`views.select`, `views.slice_dims`, `views.reshape` for new axes): no data moves;
* an *advanced* part: index tensors (int32/int64, Python lists, NumPy arrays) and bool masks
  (turned into index tensors by `nonzero`), each attached to one dimension of that view.

With no advanced part, `getitem` returns the view and `setitem` copies into it. Otherwise
one index kernel (`codegen.gather`) walks the result's index space, reads the index
tensors through their strides (broadcast = stride 0, so they are never materialized), and
gathers, puts or scatter-adds; the view is addressed through its own strides, so a
non-contiguous source is never copied first. Indices are wrapped and bounds-checked
inside the kernel; a bad one raises `IndexError` with PyTorch's wording, naming the
dimension of the *original* tensor.

Semantics follow PyTorch where it differs from NumPy: an integer is always a basic
`select` (NumPy treats it as an advanced index when other advanced indices are present,
so `x[0, :, [0, 1]]` is (3, 2) here and in PyTorch but (2, 3) in NumPy), and so is a
0-d integer tensor or array (a view, as in PyTorch); a Python list is an index array
(PyTorch's deprecated "list as tuple" reading is not supported); a bool scalar adds a
dimension of size 1 (`True`) or 0 (`False`). Advanced dimensions go where NumPy puts
them: in place of the indexed dimensions when those are adjacent, else at the front.

`setitem` bumps the storage's version once. For duplicate indices the last write wins;
`getitem_backward` (the gradient) scatter-adds, so duplicates accumulate. A value or an
index tensor that shares memory with the destination is copied first.

The linear primitives of the registry (`gather`, `scatter_add`, `index_put`, over int64
offsets into the row-major element order) are here too; `linear_index` turns any index
expression into that form.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..codegen.gather import build_index, build_nonzero
from ..ir import dtypes as dt
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.types import TensorType, broadcast_shapes
from ..runtime import cache, launch
from ..runtime.storage import allocate
from ..tensor import Tensor
from . import views
from .elementwise import copy_into, is_scalar
from ..schedule.index import IndexKernel, NonzeroKernel
from ..schedule.layout import broadcast_strides, collapse, contiguous_strides

cache.register_builder(IndexKernel, build_index)
cache.register_builder(NonzeroKernel, build_nonzero)

INDEX_DTYPES = (dt.int32, dt.int64)


# --------------------------------------------------------------------------------------
# parsing an index expression
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Advanced:
    """One index tensor, addressing dimension `dim` of the basic view.

    `source_dim` is the dimension of the original tensor it indexes (error messages);
    -1 for the new dimension a bool scalar adds.
    """

    dim: int
    index: Tensor
    source_dim: int


@dataclass(frozen=True, slots=True)
class Parsed:
    view: Tensor  # the basic part applied; advanced dims kept whole
    advanced: tuple[Advanced, ...]


# An index item, normalized: (kind, value) with kind one of
# none, ellipsis, bool, int, slice, tensor (int32/int64), mask (bool tensor).
_Token = tuple[str, Any]


def _describe(index: Any) -> str:
    if isinstance(index, Tensor):
        return f"a {index.dtype.name} tensor of shape {list(index.shape)}"
    text = repr(index)
    return f"{type(index).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def _bad_type(op: str, item: Any, t: Tensor) -> IndexError:
    return IndexError(
        f"{op}: only integers, slices (`:`), ellipsis (`...`), None, bools and "
        f"integer or bool tensors are valid indices (got {_describe(item)}, "
        f"indexing a tensor of shape {list(t.shape)})"
    )


def _array_token(op: str, item: Any, arr: np.ndarray, t: Tensor) -> _Token:
    """A list or NumPy array index -> an int64 index tensor or a bool mask (copied)."""
    if arr.dtype == np.bool_:
        return ("mask", Tensor._from_numpy(np.array(arr, dtype=np.bool_)))
    if arr.size == 0 and arr.dtype.kind in "fO":
        arr = arr.astype(np.int64)  # `x[[]]` is an empty integer index
    if arr.dtype.kind not in "iu":
        raise _bad_type(op, item, t)
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise IndexError(f"{op}: index {arr.max()} does not fit in int64")
    return ("tensor", Tensor._from_numpy(np.array(arr, dtype=np.int64)))


def _token(op: str, item: Any, t: Tensor) -> _Token:
    if item is None:
        return ("none", None)
    if item is Ellipsis:
        return ("ellipsis", None)
    if isinstance(item, (bool, np.bool_)):
        return ("bool", bool(item))
    if isinstance(item, slice):
        return ("slice", item)
    if isinstance(item, Tensor):
        if item.dtype is dt.bool_:
            return ("mask", item)
        if item.dtype in INDEX_DTYPES:
            if item.ndim == 0:  # PyTorch: a 0-d index tensor is an int
                return ("int", int(item.item()))
            return ("tensor", item)
        raise IndexError(
            f"{op}: tensors used as indices must be long, int or bool tensors "
            f"(got {_describe(item)}, indexing a tensor of shape "
            f"{list(t.shape)})"
        )
    if isinstance(item, (int, np.integer)):
        return ("int", int(item))
    if isinstance(item, np.ndarray):
        if item.ndim == 0 and item.dtype.kind in "iu":
            return ("int", int(item))
        return _array_token(op, item, item, t)
    if isinstance(item, list):
        try:
            arr = np.asarray(item)
        except (ValueError, TypeError):
            raise IndexError(
                f"{op}: a list index must be a rectangular nested list of ints "
                f"or bools (got {_describe(item)}, indexing a tensor of shape "
                f"{list(t.shape)})"
            ) from None
        return _array_token(op, item, arr, t)
    if hasattr(item, "__index__") and not isinstance(item, (float, complex, str)):
        return ("int", operator.index(item))
    raise _bad_type(op, item, t)


def _consumed(tok: _Token) -> int:
    """How many dimensions of the tensor an index item uses up."""
    if tok[0] in ("int", "slice", "tensor"):
        return 1
    if tok[0] == "mask":
        return tok[1].ndim
    return 0


def _tokens(op: str, t: Tensor, index: Any) -> list[_Token]:
    """Normalize to one token per item, with `...` expanded into full slices."""
    items = index if isinstance(index, tuple) else (index,)
    toks = [_token(op, item, t) for item in items]
    ellipses = [i for i, k in enumerate(toks) if k[0] == "ellipsis"]
    if len(ellipses) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    used = sum(_consumed(k) for k in toks)
    if used > t.ndim:
        raise IndexError(
            f"too many indices for tensor of dimension {t.ndim} "
            f"({op} of a tensor of shape {list(t.shape)} with {used} indices)"
        )
    if not ellipses:
        return toks  # trailing dimensions are left as they are
    e = ellipses[0]
    return toks[:e] + [("slice", slice(None))] * (t.ndim - used) + toks[e + 1 :]


def _unsqueeze(t: Tensor, d: int) -> Tensor:
    return views.reshape(t, t._shape[:d] + (1,) + t._shape[d:])


def _slice(op: str, cur: Tensor, d: int, s: slice) -> Tensor:
    step = 1 if s.step is None else operator.index(s.step)
    if step == 0:
        raise ValueError(f"{op}: slice step cannot be zero")
    if step < 0:
        raise ValueError(f"{op}: step must be greater than zero")
    n = cur._shape[d]
    start = None if s.start is None else operator.index(s.start)
    stop = None if s.stop is None else operator.index(s.stop)
    a, b, _ = slice(start, stop, step).indices(n)
    if (a, b, step) == (0, n, 1):
        return cur
    starts = [0] * cur.ndim
    stops = list(cur._shape)
    steps = [1] * cur.ndim
    starts[d], stops[d], steps[d] = a, max(a, b), step
    return views.slice_dims(cur, tuple(starts), tuple(stops), tuple(steps))


def _bool_index(value: bool) -> Tensor:
    """A bool scalar indexes a new size-1 axis with [0] (True) or [] (False)."""
    return Tensor._from_numpy(np.zeros(1 if value else 0, dtype=np.int64))


def _mask_columns(op: str, mask: Tensor, cur: Tensor, d: int, src: int, t: Tensor) -> list[Tensor]:
    m = mask.ndim
    if mask._shape != cur._shape[d : d + m]:
        raise IndexError(
            f"{op}: the shape of the mask {list(mask.shape)} at index {src} does "
            f"not match the shape of the indexed tensor {list(t.shape)} at "
            f"index {src} (mask covers {list(cur._shape[d : d + m])})"
        )
    coords = nonzero(mask)
    return [views.select(coords, 1, j) for j in range(m)]


def parse(t: Tensor, index: Any, op: str = "getitem") -> Parsed:
    """Apply the basic part of `index` as views; collect the advanced part."""
    cur, d, src = t, 0, 0
    advanced: list[Advanced] = []
    for kind, value in _tokens(op, t, index):
        if kind == "none":
            cur, d = _unsqueeze(cur, d), d + 1
        elif kind == "bool":
            cur = _unsqueeze(cur, d)
            advanced.append(Advanced(d, _bool_index(value), -1))
            d += 1
        elif kind == "int":
            n = cur._shape[d]
            if not -n <= value < n:
                raise IndexError(
                    f"{op}: index {value} is out of bounds for dimension {src} with size {n}"
                )
            cur, src = views.select(cur, d, value), src + 1
        elif kind == "slice":
            cur, d, src = _slice(op, cur, d, value), d + 1, src + 1
        elif kind == "tensor":
            if cur._shape[d] == 0 and value.numel():  # nothing to index: every index is out
                first = int(value._values().reshape(-1)[0])
                raise IndexError(
                    f"{op}: index {first} is out of bounds for dimension {src} with size 0"
                )
            advanced.append(Advanced(d, value, src))
            d, src = d + 1, src + 1
        elif value.ndim == 0:  # 0-d mask: like a bool scalar
            cur = _unsqueeze(cur, d)
            advanced.append(Advanced(d, _bool_index(bool(value.item())), -1))
            d += 1
        else:
            for j, col in enumerate(_mask_columns(op, value, cur, d, src, t)):
                advanced.append(Advanced(d + j, col, src + j))
            d, src = d + value.ndim, src + value.ndim
    return Parsed(cur, tuple(advanced))


# --------------------------------------------------------------------------------------
# the index space of an advanced expression
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """The result's shape, and how the view and each index tensor walk it."""

    shape: tuple[int, ...]
    x_strides: tuple[int, ...]
    index_strides: tuple[tuple[int, ...], ...]
    broadcast: tuple[int, ...]  # the shape the index tensors broadcast to


def layout(parsed: Parsed, op: str) -> Layout:
    v, adv = parsed.view, parsed.advanced
    shapes = [a.index._shape for a in adv]
    try:
        bshape = broadcast_shapes(*shapes, op=op)
    except ValueError:
        pretty = ", ".join(str(list(s)) for s in shapes)
        raise IndexError(
            f"{op}: shape mismatch: indexing tensors could not be broadcast "
            f"together with shapes {pretty}"
        ) from None
    dims = [a.dim for a in adv]
    rest = [d for d in range(v.ndim) if d not in dims]
    if dims == list(range(dims[0], dims[0] + len(dims))):
        before = [d for d in rest if d < dims[0]]
        after = [d for d in rest if d > dims[-1]]
    else:  # separated advanced indices go to the front
        before, after = [], rest
    shape = tuple(v._shape[d] for d in before) + bshape + tuple(v._shape[d] for d in after)
    x_strides = (
        tuple(v._strides[d] for d in before)
        + (0,) * len(bshape)
        + tuple(v._strides[d] for d in after)
    )
    index_strides = tuple(
        (0,) * len(before)
        + broadcast_strides(a.index._shape, a.index._strides, bshape)
        + (0,) * len(after)
        for a in adv
    )
    return Layout(shape, x_strides, index_strides, bshape)


# --------------------------------------------------------------------------------------
# launching an index kernel
# --------------------------------------------------------------------------------------

_tls = threading.local()


def _error_block() -> tuple[ctypes.Array, int]:
    try:
        return _tls.err
    except AttributeError:
        buf = (ctypes.c_int64 * 4)()
        _tls.err = (buf, ctypes.addressof(buf))
        return _tls.err


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _raise_recorded(op: str, parsed: Parsed, buf: ctypes.Array) -> None:
    if not buf[0]:
        return
    a = parsed.advanced[buf[2]]
    size = parsed.view._shape[a.dim]
    raise IndexError(
        f"{op}: index {buf[1]} is out of bounds for dimension "
        f"{max(a.source_dim, 0)} with size {size}"
    )


def _baked(stride: int) -> int | None:
    return stride if stride in (0, 1) else None


_kernels: dict[tuple, cache.Kernel] = {}


def _kernel_for(
    mode: str, cstrides: list[tuple[int, ...]], parsed: Parsed, data: Tensor | None
) -> cache.Kernel:
    """The compiled kernel for a collapsed call (memoized on the few facts that pick it)."""
    key = (
        mode,
        len(cstrides[0]),
        tuple(a.index._dtype for a in parsed.advanced),
        all(st[-1] == 0 for st in cstrides[2:]),
        _baked(cstrides[1][-1]),
        _baked(cstrides[0][-1]),
        parsed.view._dtype,
        None if data is None else data._dtype,
    )
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _kernels[key] = cache.get(_spec_for(mode, cstrides, parsed, data))
    return kernel


def _spec_for(
    mode: str, cstrides: list[tuple[int, ...]], parsed: Parsed, data: Tensor | None
) -> IndexKernel:
    """The kernel for a collapsed call: `cstrides` is [data, x, *indices]."""
    index_dtypes = tuple(a.index._dtype for a in parsed.advanced)
    x = parsed.view
    layout_keys = dict(
        rank=len(cstrides[0]),
        index_dtypes=index_dtypes,
        hoist=all(st[-1] == 0 for st in cstrides[2:]),
        x_inner=_baked(cstrides[1][-1]),
        data_inner=_baked(cstrides[0][-1]),
    )
    if mode == "scatter_add" or (mode == "put" and data._dtype is not x._dtype):
        if data._dtype.is_complex and not x._dtype.is_complex:
            raise TypeError(
                f"{mode}: {data._dtype.name} values cannot be written into a "
                f"{x._dtype.name} tensor (complex to real)"
            )
        return IndexKernel(mode, dtype=x._dtype, src_dtype=data._dtype, **layout_keys)
    if mode in ("gather", "put"):
        return IndexKernel(mode, width=x._dtype.itemsize, **layout_keys)
    return IndexKernel(mode, **layout_keys)


def _call(
    mode: str,
    parsed: Parsed,
    shape: tuple[int, ...],
    strides: list[tuple[int, ...]],
    x_slot: int,
    data: Tensor | None,
    op: str,
) -> None:
    """Collapse the index space, pick the kernel, make one call, raise a recorded error.

    `strides` are [data, x, *indices] over `shape`.
    """
    cshape, cstrides = collapse(shape, strides)
    kernel = _kernel_for(mode, cstrides, parsed, data)
    buf, err = _error_block()
    x = parsed.view
    args = [
        0,
        cshape[0],
        *cshape[1:],
        err,
        x_slot,
        *cstrides[1],
        0 if data is None else data._ptr,
        *cstrides[0],
    ]
    for a, st in zip(parsed.advanced, cstrides[2:]):
        args += [a.index._ptr, x._shape[a.dim], x._strides[a.dim], *st]
    buf[0] = buf[1] = buf[2] = 0
    if mode in ("gather", "offset", "check"):
        launch.call_split(kernel, args, _numel(shape))
    else:
        launch.call(kernel, args)  # duplicates must apply in order, on one thread
    _raise_recorded(op, parsed, buf)


def run_index(mode: str, parsed: Parsed, lay: Layout, data: Tensor, op: str) -> None:
    """One kernel call over `lay`'s index space (see `codegen.gather` for the modes).

    `data` is the output (gather, offset; already shaped like `lay.shape`) or the values
    (put, scatter_add; broadcastable to `lay.shape`).
    """
    x = parsed.view
    if _numel(lay.shape) == 0:
        _check_empty(parsed, lay, op)
        return
    data_strides = broadcast_strides(data._shape, data._strides, lay.shape)
    x_slot = x._offset if mode == "offset" else x._ptr  # offset mode: the base offset
    _call(
        mode, parsed, lay.shape, [data_strides, lay.x_strides, *lay.index_strides], x_slot, data, op
    )


def _check_empty(parsed: Parsed, lay: Layout, op: str) -> None:
    """An empty result still validates its indices (as NumPy does)."""
    bshape = lay.broadcast
    if not parsed.advanced or _numel(bshape) == 0:
        return
    zeros = (0,) * len(bshape)
    istrides = [
        broadcast_strides(a.index._shape, a.index._strides, bshape) for a in parsed.advanced
    ]
    _call("check", parsed, bshape, [zeros, zeros, *istrides], 0, None, op)


# --------------------------------------------------------------------------------------
# getitem / setitem
# --------------------------------------------------------------------------------------


def getitem(t: Tensor, index: Any) -> Tensor:
    """`t[index]`: a view for basic indexing, a gathered copy for advanced indexing."""
    parsed = parse(t, index, "getitem")
    if not parsed.advanced:
        v = parsed.view
        return views.view_of(t, v._offset, v._shape, v._strides)
    lay = layout(parsed, "getitem")
    out = Tensor._empty(lay.shape, t._dtype)
    run_index("gather", parsed, lay, out, "getitem")
    return out


def _value_tensor(op: str, value: Any, t: Tensor) -> Tensor:
    """A Tensor value as is; a Python number as a 0-d tensor of `t`'s dtype."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.generic) and not isinstance(value, np.complexfloating):
        value = value.item()
    if not is_scalar(value):
        raise TypeError(
            f"{op}: can only assign a Tensor or a Python number (bool, int, "
            f"float) into a tensor of shape {list(t.shape)} and dtype "
            f"{t.dtype.name}, got {type(value).__name__}"
        )
    out = Tensor._empty((), t._dtype)
    return copy_into(out, value)


def _fit_value(op: str, value: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Drop leading size-1 dims beyond the target's rank, then check broadcasting."""
    extra = value.ndim - len(shape)
    if extra > 0 and all(s == 1 for s in value._shape[:extra]):
        value = views.reshape(value, value._shape[extra:])
    try:
        ok = broadcast_shapes(value._shape, shape, op=op) == shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(
            f"{op}: shape mismatch: value tensor of shape "
            f"{list(value.shape)} cannot be broadcast to indexing result of "
            f"shape {list(shape)}"
        )
    return value


def setitem(t: Tensor, index: Any, value: Tensor | bool | int | float) -> None:
    """`t[index] = value`: broadcasts and casts `value`; bumps `t`'s version once."""
    parsed = parse(t, index, "setitem")
    if not parsed.advanced and is_scalar(value):
        copy_into(parsed.view, value)  # the scalar travels by value
        t._storage.version += 1
        return
    v = _value_tensor("setitem", value, t)
    if v._storage is t._storage:  # reading what we write: take a copy first
        v = views.clone(v)
    if any(a.index._storage is t._storage for a in parsed.advanced):
        parsed = Parsed(
            parsed.view,
            tuple(
                Advanced(a.dim, views.clone(a.index), a.source_dim)
                if a.index._storage is t._storage
                else a
                for a in parsed.advanced
            ),
        )
    lay = layout(parsed, "setitem") if parsed.advanced else None
    v = _fit_value("setitem", v, lay.shape if lay else parsed.view._shape)
    try:
        if lay is None:
            copy_into(parsed.view, v)
        else:
            run_index("put", parsed, lay, v, "setitem")
    finally:  # a failed put may have written some elements
        t._storage.version += 1


# --------------------------------------------------------------------------------------
# gradients: scatter back what getitem gathered
# --------------------------------------------------------------------------------------


def zeros(shape: tuple[int, ...], dtype: DType) -> Tensor:
    return copy_into(Tensor._empty(tuple(shape), dtype), 0)


def getitem_backward(shape: tuple[int, ...], dtype: DType, index: Any, grad: Tensor) -> Tensor:
    """The gradient of `getitem(x, index)` w.r.t. `x` (shape, dtype), given `grad`.

    Zeros of `x`'s shape with `grad` written where getitem read: a copy into the view for
    basic indexing, a scatter-add for advanced indexing (duplicate indices accumulate).
    """
    out = zeros(shape, dtype)
    parsed = parse(out, index, "getitem_backward")
    target = parsed.view._shape
    if parsed.advanced:
        lay = layout(parsed, "getitem_backward")
        target = lay.shape
    if grad._shape != target:
        raise RuntimeError(
            f"getitem_backward: grad of shape {list(grad.shape)} does not "
            f"match the indexing result's shape {list(target)}"
        )
    if not parsed.advanced:
        copy_into(parsed.view, grad)
    else:
        run_index("scatter_add", parsed, lay, grad, "getitem_backward")
    return out


def linear_index(shape: tuple[int, ...], index: Any) -> Tensor:
    """The int64 tensor of row-major offsets that `t[index]` reads, for `t` of `shape`.

    `getitem(t, index)` equals `gather(t, linear_index(t.shape, index))`: this is how an
    indexing expression becomes the registry's linear `gather` primitive.
    """
    meta = Tensor._make(allocate(0), 0, tuple(shape), contiguous_strides(tuple(shape)), dt.int64)
    parsed = parse(meta, index, "linear_index")
    v = parsed.view
    if parsed.advanced:
        lay = layout(parsed, "linear_index")
    else:
        lay = Layout(v._shape, v._strides, (), ())
    out = Tensor._empty(lay.shape, dt.int64)
    run_index("offset", parsed, lay, out, "linear_index")
    return out


# --------------------------------------------------------------------------------------
# the linear primitives of the registry
# --------------------------------------------------------------------------------------


def _flat(op: str, x: Tensor, index: Tensor) -> Parsed:
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}: index must be an int64 Tensor, got {type(index).__name__}")
    flat = views.reshape(views.contiguous(x), (x.numel(),))
    return Parsed(flat, (Advanced(0, index, 0),))


def _infer(op: str, *tensors: Tensor) -> TensorType:
    return registry.get(op).infer(tuple(TensorType(t._dtype, t._shape) for t in tensors))


def gather(x: Tensor, index: Tensor) -> Tensor:
    """`x.reshape(-1)[index]` for an int64 linear index (the `gather` primitive)."""
    if not isinstance(index, Tensor):
        raise TypeError(f"gather: index must be an int64 Tensor, got {type(index).__name__}")
    _infer("gather", x, index)
    parsed = _flat("gather", x, index)
    lay = layout(parsed, "gather")
    out = Tensor._empty(lay.shape, x._dtype)
    run_index("gather", parsed, lay, out, "gather")
    return out


def _scatter(op: str, mode: str, base: Tensor, index: Tensor, src: Tensor) -> Tensor:
    for name, v in (("index", index), ("src", src)):
        if not isinstance(v, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(v).__name__}")
    _infer(op, base, index, src)
    out = views.clone(base)
    parsed = _flat(op, out, index)
    run_index(mode, parsed, layout(parsed, op), src, op)
    return out


def scatter_add(base: Tensor, index: Tensor, src: Tensor) -> Tensor:
    """`out = base.copy(); out.reshape(-1)[index[j]] += src[j]`; duplicates accumulate."""
    return _scatter("scatter_add", "scatter_add", base, index, src)


def index_put(base: Tensor, index: Tensor, src: Tensor) -> Tensor:
    """`out = base.copy(); out.reshape(-1)[index[j]] = src[j]`; the last duplicate wins."""
    return _scatter("index_put", "put", base, index, src)


def index_add_linear(shape: tuple[int, ...], dtype: DType, linear: Tensor, src: Tensor) -> Tensor:
    """Zeros of `shape` with `src` scatter-added at the row-major offsets `linear`.

    With `linear = linear_index(shape, index)` this is `getitem_backward`; autograd can
    save the linear index at forward time instead of the index expression.
    """
    if src._dtype is not dtype:
        src = copy_into(Tensor._empty(src._shape, dtype), src)
    return scatter_add(zeros(shape, dtype), linear, src)


# --------------------------------------------------------------------------------------
# nonzero
# --------------------------------------------------------------------------------------

# a layout key (dtype, shape, strides) -> (count kernel, the count's argument block
# before the input's address, the fill kernel, the fill's sizes, its strides): what a
# nonzero call computes from its input's layout alone
_NONZERO_PLANS: dict[tuple, tuple] = {}


def _nonzero_plan(x: Tensor) -> tuple:
    plan = _NONZERO_PLANS.get(x._lkey)
    if plan is None:
        if x._dtype.is_complex:
            raise TypeError(f"nonzero: not implemented for {x._dtype.name}")
        cshape, (cstrides,) = collapse(x._shape, [x._strides])
        plan = (
            cache.get(NonzeroKernel("count", x._dtype, len(cshape))),
            list(cshape),
            list(cstrides),
            cache.get(NonzeroKernel("fill", x._dtype, x.ndim)),
            list(x._shape),
            list(x._strides),
        )
        if len(_NONZERO_PLANS) >= 1024:
            _NONZERO_PLANS.clear()
        _NONZERO_PLANS[x._lkey] = plan
    return plan


def _count_nonzero(x: Tensor) -> int:
    if x.numel() == 0:
        return 0
    count, cshape, cstrides = _nonzero_plan(x)[:3]
    buf, addr = _error_block()
    buf[0] = 0
    launch.call(count, [*cshape, x._ptr, *cstrides, addr])
    return int(buf[0])


def nonzero(x: Tensor, size: int | None = None) -> Tensor:
    """int64 (n, ndim) coordinates of the non-zero elements, in row-major order.

    Two kernel calls: count, then fill. With `size`, one call: exactly `size` rows,
    truncated or zero-padded (the registry's static-shape form).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"nonzero: expected a Tensor, got {type(x).__name__}")
    if size is None:
        if 0 in x._shape:
            rows = 0
            if x._dtype.is_complex:
                raise TypeError(f"nonzero: not implemented for {x._dtype.name}")
        else:
            # (the kernels and collapsed layout kept per input layout: rows is the count)
            count, cshape, cstrides, fill, shape, strides = _nonzero_plan(x)
            buf, addr = _error_block()
            buf[0] = 0
            launch.call(count, [*cshape, x._ptr, *cstrides, addr])
            rows = int(buf[0])
            out = Tensor._empty((rows, len(shape)), dt.int64)
            if rows and shape:
                launch.call(fill, [*shape, x._ptr, *strides, out._ptr, rows])
            return out
    else:
        rows = size
        registry.get("nonzero").infer((TensorType(x._dtype, x._shape),), size=rows)
    out = Tensor._empty((rows, x.ndim), dt.int64)
    if rows * x.ndim == 0:
        return out
    kernel = cache.get(NonzeroKernel("fill", x._dtype, x.ndim))
    launch.call(kernel, [*x._shape, x._ptr, *x._strides, out._ptr, rows])
    return out
