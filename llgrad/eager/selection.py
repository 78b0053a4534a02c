"""Eager launches of the selection and sorting kernels (`codegen.selection`).

Each function here serves the plain eager case of a function of `functions.selection`,
`functions.sorting` or `functions.layout` (the caller has checked `host_plain` and the
arguments PyTorch validates): it makes the outputs, launches one or two kernels and
returns them, or returns None when the layout or dtypes are not ones it serves (the
caller then takes its general path, which also raises PyTorch's error for anything
the kernel found wrong in the data). What each launch needs from a layout alone (the
kernel, the collapsed sizes and strides) is kept per layout.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from .._source import define
from ..codegen.selection import (
    SORT_MAX_ROW,
    GroupKernel,
    MaskedScatterKernel,
    OneHotKernel,
    RowPutKernel,
    SearchKernel,
    SortKernel,
    TakeSlicesKernel,
    UnravelKernel,
    build_group,
    build_masked_scatter,
    build_one_hot,
    build_row_put,
    build_search,
    build_sort,
    build_take_slices,
    build_unravel,
)
from ..ir import dtypes as dt
from ..ir.types import broadcast_shapes
from ..runtime import cache, launch
from ..schedule.layout import broadcast_strides, collapse, contiguous_strides
from ..specialize.selection import caller_source
from ..tensor import Tensor as _TensorClass
from . import views
from .indexing import _error_block

_Tensor: Any = _TensorClass  # (its private fields are not in the stub)

cache.register_builder(SortKernel, build_sort)
cache.register_builder(SearchKernel, build_search)
cache.register_builder(MaskedScatterKernel, build_masked_scatter)
cache.register_builder(RowPutKernel, build_row_put)
cache.register_builder(UnravelKernel, build_unravel)
cache.register_builder(GroupKernel, build_group)
cache.register_builder(TakeSlicesKernel, build_take_slices)
cache.register_builder(OneHotKernel, build_one_hot)

_PLAN_LIMIT = 1024
_plans: dict[tuple, Any] = {}


# a kernel whose work is this small runs without releasing the GIL: releasing and taking
# it back costs more than such a call (a longer one releases it, as `launch.call` does)
_GIL_WORK = 1 << 14
_held_calls: dict[Any, Any] = {}
_HELD = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


def _caller(kernel: cache.Kernel, template: list[int], slots: tuple[int, ...], work: int) -> Any:
    """A function making one call of `kernel` with `template`'s arguments and its
    positional arguments in the per-call `slots` (pointers, counts). For the thread that
    made it, a small call (`work` elements at most `_GIL_WORK`) writes those slots into
    an argument block of its own, the template's constants already in it, and calls the
    kernel without releasing the GIL; other threads and big calls pack a block as
    `launch.call` does."""
    block = (ctypes.c_int64 * max(len(template), 1))(*template)
    fn = _held_calls.get(kernel)
    if fn is None:
        fn = _held_calls[kernel] = _HELD(kernel.address)
    consts = {
        "ident": threading.get_ident,
        "THREAD": threading.get_ident(),
        "block": block,
        "fn": fn,
        "ADDRESS": ctypes.addressof(block),
        "template": list(template),
        "launch_call": launch.call,
        "kernel": kernel,
    }
    source = caller_source(slots, work <= _GIL_WORK)
    return define(source, f"<llgrad {kernel.name} call>", consts, "run")


def _keep(key: tuple, plan: Any) -> Any:
    if len(_plans) >= _PLAN_LIMIT:
        _plans.clear()
    _plans[key] = plan
    return plan


def _along(shape: tuple[int, ...], strides: tuple[int, ...], d: int) -> tuple | None:
    """((outer, n, inner), (so, sn, si)) of a layout along dimension `d`, or None when the
    dimensions before or after `d` do not collapse into one loop each."""
    before = collapse(shape[:d], [strides[:d]])
    after = collapse(shape[d + 1 :], [strides[d + 1 :]])
    if len(before[0]) != 1 or len(after[0]) != 1:
        return None
    (outer,), ((so,),) = before
    (inner,), ((si,),) = after
    return (outer, shape[d], inner), (so, strides[d], si)


def _makers(shape: tuple[int, ...], dtype: Any) -> tuple[Any, Any]:
    """Functions making a new contiguous tensor of `shape`: of `dtype`, and of int64."""
    strides = contiguous_strides(shape)
    return (
        _Tensor._empty_maker(shape, dtype, strides),
        _Tensor._empty_maker(shape, dt.int64, strides),
    )


def _contiguous(t: Any) -> Any:
    return t if t.is_contiguous() else views.contiguous(t)


# --------------------------------------------------------------------------------------
# sort
# --------------------------------------------------------------------------------------


def sort_rows(x: Any, d: int, descending: bool) -> tuple[Any, Any] | None:
    """(values, int64 indices) of the stable sort of `x` along `d` (NaN largest), for
    rows of at most `SORT_MAX_ROW` elements; None for other rows, complex dtypes and
    layouts without one loop on each side of `d`."""
    key = ("sort", x._lkey, d, descending)
    plan = _plans.get(key, False)
    if plan is False:
        plan = None
        if x._shape[d] <= SORT_MAX_ROW and not x._dtype.is_complex:
            geometry = _along(x._shape, x._strides, d)
            if geometry is not None:
                kernel = cache.get(SortKernel(x._dtype, descending))
                (outer, n, inner), strides = geometry
                call = _caller(
                    kernel, [outer, n, inner, 0, *strides, 0, 0], (3, 7, 8), outer * n * n * inner
                )
                plan = (call, *_makers(x._shape, x._dtype))
        _keep(key, plan)
    if plan is None:
        return None
    call, make_values, make_indices = plan
    values = make_values()
    indices = make_indices()
    if values._storage.nbytes:
        call(x._ptr, values._ptr, indices._ptr)
    return values, indices


# --------------------------------------------------------------------------------------
# searchsorted
# --------------------------------------------------------------------------------------


def search(seq: Any, values: Any, right: bool, sorter: Any, out_dtype: Any) -> Any:
    """torch's binary search of each value of `values` in its row of `seq` (checked by
    the caller: seq 1-D, or its leading dimensions those of `values`; a sorter of seq's
    shape), with seq's dtype on both sides; None when the dtypes differ or a sorter
    entry is out of range (the general path raises that error)."""
    key = (
        "search",
        seq._lkey,
        values._lkey,
        None if sorter is None else sorter._lkey,
        right,
        out_dtype,
    )
    plan = _plans.get(key)
    if plan is None:
        plan = _keep(key, _search_plan(seq, values, right, sorter, out_dtype))
    if plan.__class__ is not tuple:
        return None
    call, make, contiguous = plan
    out = make()
    if call is None:
        return out
    if not contiguous:
        seq, values = _contiguous(seq), _contiguous(values)
        sorter = None if sorter is None else _contiguous(sorter)
    if sorter is None:
        call(seq._ptr, values._ptr, out._ptr)
        return out
    buf, err = _error_block()
    buf[0] = 0
    call(seq._ptr, values._ptr, out._ptr, sorter._ptr, err)
    return None if buf[0] else out


def _search_plan(seq: Any, values: Any, right: bool, sorter: Any, out_dtype: Any) -> Any:
    """(kernel or None when there is nothing to search, argument template, the output's
    maker, whether every operand is contiguous) for `search`, or False when it does not
    serve these dtypes."""
    d = seq._dtype
    if values._dtype is not d or d.is_complex:
        return False
    if sorter is not None and sorter._dtype not in (dt.int64, dt.int32):
        return False
    shape = values._shape
    make = _Tensor._empty_maker(shape, out_dtype, contiguous_strides(shape))
    m = seq._shape[-1]
    n = values.numel()
    if n == 0 or m == 0:
        # nothing to search: every value goes to position 0 (the output's zeros)
        if n:
            return None, lambda: views.copy_into(make(), 0), True
        return None, make, True
    kernel = cache.get(SearchKernel(d, right, None if sorter is None else sorter._dtype, out_dtype))
    if seq.ndim == 1:
        rows, k, srs = 1, n, 0
    else:
        k, srs = shape[-1], m
        rows = n // k
    contiguous = all(t is None or t.is_contiguous() for t in (seq, values, sorter))
    slots = (3, 6, 7) if sorter is None else (3, 6, 7, 5, 8)
    work = n + (0 if sorter is None else sorter.numel())
    return (
        _caller(kernel, [rows, k, m, 0, srs, 0, 0, 0, 0, m.bit_length()], slots, work),
        make,
        contiguous,
    )


# --------------------------------------------------------------------------------------
# masked_scatter
# --------------------------------------------------------------------------------------


def masked_scatter(x: Any, mask: Any, source: Any) -> tuple[Any, int] | None:
    """(the new tensor, the number of True elements of the broadcast mask): `x` and
    `mask` broadcast together, with the True positions filled in row-major order from
    `source` (of x's dtype); None when the shapes do not broadcast. When the mask selects
    more elements than `source` holds the result is incomplete (the caller raises)."""
    key = ("masked_scatter", x._lkey, mask._lkey)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep(key, _masked_scatter_plan(x, mask))
    if plan.__class__ is not tuple:
        return None
    call, make = plan
    out = make()
    if call is None:
        return out, 0
    if not source.is_contiguous():
        source = views.contiguous(source)
    buf, res = _error_block()
    call(out._ptr, x._ptr, mask._ptr, source._ptr, source.numel(), res)
    return out, buf[0]


def _masked_scatter_plan(x: Any, mask: Any) -> Any:
    """(the kernel's `_caller`, or None for an empty result; the output's maker) for
    `masked_scatter` of these layouts, or False when the shapes do not broadcast."""
    try:
        shape = broadcast_shapes(x._shape, mask._shape)
    except ValueError:
        return False
    out_strides = contiguous_strides(shape)
    make = _Tensor._empty_maker(shape, x._dtype, out_strides)
    numel = 1
    for n in shape:
        numel *= n
    if numel == 0:
        return None, make
    strides = [
        out_strides,
        broadcast_strides(x._shape, x._strides, shape),
        broadcast_strides(mask._shape, mask._strides, shape),
    ]
    cshape, cstrides = collapse(shape, strides)
    kernel = cache.get(MaskedScatterKernel(x._dtype.itemsize, len(cshape)))
    template = [*cshape]
    slots = []
    for st in cstrides:
        slots.append(len(template))
        template += [0, *st]
    tail = len(template)
    template += [0, 0, 0]
    return _caller(kernel, template, (*slots, tail, tail + 1, tail + 2), numel), make


# --------------------------------------------------------------------------------------
# index_put with one index (a bool mask over leading dimensions, or an integer index of
# dimension 0)
# --------------------------------------------------------------------------------------


def row_put(x: Any, index: Any, values: Any, accumulate: bool) -> Any:
    """`x.index_put((index,), values, accumulate)` for one index tensor: a bool mask of
    at least one dimension covering `x`'s leading dimensions, or an int32/int64 index of
    dimension 0; `values` of `x`'s dtype broadcast to the indexed shape. None when that
    does not apply (other index shapes, values that do not broadcast, an index out of
    range: the general path gives PyTorch's result or error)."""
    key = ("row_put", x._lkey, index._lkey, values._lkey, accumulate)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep(key, _row_put_plan(x, index, values, accumulate))
    if plan.__class__ is not tuple:
        return None
    call, selected = plan
    if selected is not None:  # values give one row per selected row: as many as the mask
        if int(np.count_nonzero(index._numpy_view())) != selected:
            return None
    if not index.is_contiguous():
        index = views.contiguous(index)
    out: Any = views.clone(x)
    if call is None:
        return out
    buf, err = _error_block()
    buf[0] = 0
    call(out._ptr, index._ptr, values._ptr, err)
    return None if buf[0] else out


def _row_put_plan(x: Any, index: Any, values: Any, accumulate: bool) -> Any:
    """(the kernel's `_caller` or None when nothing is written; the count of True mask
    elements the values need, or None) for `row_put` of these layouts, or False when
    `row_put` does not serve them."""
    dtype = x._dtype
    if values._dtype is not dtype or dtype.is_complex or x.ndim == 0:
        return False
    if accumulate and dtype is dt.bool_:
        return False
    mask = index._dtype is dt.bool_
    if mask:
        m = index.ndim
        if m == 0 or index._shape != x._shape[:m]:
            return False
        lead: tuple[int, ...] = (-1,)  # the selected count, known only per call
    elif index._dtype in (dt.int64, dt.int32):
        m = 1
        lead = index._shape
    else:
        return False
    rest = x._shape[m:]
    target = lead + rest
    vshape, vstrides = values._shape, values._strides
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape, vstrides = vshape[1:], vstrides[1:]
    if len(vshape) > len(target):
        return False
    skip = len(target) - len(vshape)
    selected = None
    for k, n in enumerate(vshape):
        want = target[skip + k]
        if n == 1 or n == want:
            continue
        if want != -1:
            return False
        selected = n
        target = (n,) + rest
    full = broadcast_strides(vshape, vstrides, target)
    nlead = len(lead)
    lead_shape = tuple(1 if n == -1 else n for n in target[:nlead])
    lead_sizes, (lead_strides,) = collapse(lead_shape, [full[:nlead]])
    rest_sizes, (rest_strides,) = collapse(rest, [full[nlead:]])
    if len(lead_sizes) != 1 or len(rest_sizes) != 1:
        return False
    R = 1
    for n in rest:
        R *= n
    count = index.numel()
    rows = count if mask else x._shape[0]
    if not mask and count and rows == 0:
        return False  # (an index into an empty dimension: the general path's error)
    if count == 0 or (mask and R == 0):
        return None, selected
    kernel = cache.get(RowPutKernel(dtype, index._dtype, accumulate))
    template = [count, R, 0, rows, 0, 0, lead_strides[0], rest_strides[0], 0]
    return _caller(kernel, template, (2, 4, 5, 8), count * R), selected


# --------------------------------------------------------------------------------------
# unravel_index
# --------------------------------------------------------------------------------------

UNRAVEL_DTYPES = (dt.uint8, dt.int8, dt.int16, dt.int32, dt.int64)


def unravel(
    indices: Any, dims: tuple[int, ...], total: int
) -> tuple[tuple[Any, ...], int, int] | None:
    """(the int64 coordinates, one tensor per size of `dims`, each shaped like
    `indices`; the least index; the greatest), for `indices` of an integer dtype the
    kernel reads and at least one element; None for other dtypes. The coordinates of an
    index outside [-total, total) are zeros (the caller raises)."""
    key = ("unravel", indices._lkey, dims)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep(key, _unravel_plan(indices, dims, total))
    if plan is False:
        return None
    call, makers = plan
    if not indices.is_contiguous():
        indices = views.contiguous(indices)
    outs = tuple([make() for make in makers])
    buf, res = _error_block()
    call(indices._ptr, *[o._ptr for o in outs], res)
    return outs, buf[0], buf[1]


def _unravel_plan(indices: Any, dims: tuple[int, ...], total: int) -> Any:
    """(the kernel's `_caller`, the outputs' makers) for `unravel`, or False."""
    if indices._dtype not in UNRAVEL_DTYPES or total >= 1 << 62:
        return False
    r = len(dims)
    shape = indices._shape
    n = indices.numel()
    kernel = cache.get(UnravelKernel(indices._dtype, r))
    template = [n, 0, total, *dims, *([0] * r), 0]
    slots = (1, *range(3 + r, 3 + 2 * r), 3 + 2 * r)
    make = _Tensor._empty_maker(shape, dt.int64, contiguous_strides(shape))
    return _caller(kernel, template, slots, n * max(r, 1)), (make,) * r


# --------------------------------------------------------------------------------------
# unique / unique_consecutive along a dimension
# --------------------------------------------------------------------------------------


def unique_slices(x: Any, d: int, sort: bool, counts: bool) -> tuple | None:
    """(values, inverse, counts or None) of `unique` (`sort`) or `unique_consecutive`
    of `x` along `d` (x.shape[d] >= 1; values with the groups' count at `d`, inverse and
    counts int64 vectors); None for complex dtypes and layouts that do not collapse to
    (outer, n, inner)."""
    key = ("unique", x._lkey, d, sort)
    plan = _plans.get(key, False)
    if plan is False:
        plan = _keep(key, _unique_plan(x, d, sort))
    if plan is None:
        return None
    group, take, make_scratch, make_inverse = plan
    n = x._shape[d]
    scratch = make_scratch()
    inverse = make_inverse()
    base = scratch._ptr
    order, group_counts, first = base, base + 16 * n, base + 24 * n
    buf, res = _error_block()
    group(x._ptr, order, inverse._ptr, group_counts, first, res)
    groups = buf[0]
    values = _Tensor._empty(x._shape[:d] + (groups,) + x._shape[d + 1 :], x._dtype)
    counts_out = _Tensor._empty((groups,), dt.int64) if counts else None
    take(
        groups,
        x._ptr,
        first,
        values._ptr,
        group_counts,
        0 if counts_out is None else counts_out._ptr,
    )
    return values, inverse, counts_out


def _unique_plan(x: Any, d: int, sort: bool) -> Any:
    """(the group and take `_caller`s, the scratch's and the inverse's makers) for
    `unique_slices` of this layout, or None."""
    if x._dtype.is_complex:
        return None
    geometry = _along(x._shape, x._strides, d)
    if geometry is None:
        return None
    (outer, n, inner), strides = geometry
    template = [outer, n, inner, 0, *strides]
    work = x.numel() * max(n.bit_length(), 1)
    group = _caller(
        cache.get(GroupKernel(x._dtype, sort)), template + [0] * 5, (3, 7, 8, 9, 10, 11), work
    )
    take = _caller(
        cache.get(TakeSlicesKernel(x._dtype.itemsize)),
        template + [0] * 4,
        (1, 3, 7, 8, 9, 10),
        x.numel(),
    )
    return (
        group,
        take,
        _Tensor._empty_maker((4 * n,), dt.int64, (1,)),
        _Tensor._empty_maker((n,), dt.int64, (1,)),
    )


# --------------------------------------------------------------------------------------
# one_hot
# --------------------------------------------------------------------------------------


def one_hot(x: Any, num_classes: int) -> tuple[Any, int, int]:
    """`nn.functional.one_hot` of a plain int64 tensor `x` with `num_classes` classes
    (-1: the greatest value + 1, 0 for an empty `x`): (the new int64 tensor of
    `x.shape + (classes,)`, or None when a value lies outside [0, classes); the least
    value; the greatest), the caller raising PyTorch's error for None."""
    key = ("one_hot", x._lkey, num_classes)
    plan = _plans.get(key)
    if plan is None:
        n = x.numel()
        kernel = cache.get(OneHotKernel())
        call = _caller(kernel, [n, 0, num_classes, 0, 0], (1, 3, 4), n * max(num_classes, 1))
        make = None
        if num_classes >= 0:
            shape = x._shape + (num_classes,)
            make = _Tensor._empty_maker(shape, dt.int64, contiguous_strides(shape))
        plan = _keep(key, (call, make))
    call, make = plan
    if not x.is_contiguous():
        x = views.contiguous(x)
    buf, res = _error_block()
    if make is None:  # the classes from the values: their range first
        n = x.numel()
        if not n:
            return _Tensor._empty(x._shape + (0,), dt.int64), 0, 0
        call(x._ptr, 0, res)
        lo, hi = buf[0], buf[1]
        if lo < 0:
            return None, lo, hi
        out = _Tensor._empty(x._shape + (hi + 1,), dt.int64)
        launch.call(cache.get(OneHotKernel()), [n, x._ptr, hi + 1, out._ptr, res])
        return out, lo, hi
    out = make()
    call(x._ptr, out._ptr, res)
    lo, hi = buf[0], buf[1]
    if x.numel() and (lo < 0 or hi >= num_classes):
        return None, lo, hi
    return out, lo, hi


__all__ = [
    "SORT_MAX_ROW",
    "sort_rows",
    "search",
    "masked_scatter",
    "row_put",
    "unravel",
    "unique_slices",
    "one_hot",
]
