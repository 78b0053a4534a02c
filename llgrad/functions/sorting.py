"""Sorting and scans: `sort`, `argsort`, `topk`, `msort`, `cumsum`, `cumprod`.

The permutation of a sort is found on the host by NumPy's stable sort (PyTorch's order:
NaN sorts above every number, ties keep their input order when `stable=True`, and this
implementation is always stable); the values are then gathered with the generated gather
kernel, so gradients flow through `gather`'s rule to the positions the values came from.
Inside `lg.compile` the permutation is computed by ops instead (each element's rank
counts the elements before it: O(n^2) comparisons per row, fused), for rows of up to
`TRACED_SORT_MAX` elements; a longer row is a graph break (the function is split there and
the sort runs eagerly). Under `vmap` the batch dimensions are sorted independently. A
plain eager `sort` (nothing to record) of rows of at most `SORT_MAX_ROW` elements runs one
kernel (`eager.selection.sort_rows`: a stable insertion sort straight into the values and
indices, in the same order).

`cumsum` is the `cumsum` op (a log-step scan that compiles to fused elementwise kernels);
`cumprod` is the same scan under multiplication built from `mul`, so its gradient,
including at zeros, is the chain rule through those products.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ..dispatch.apply import apply_composite, composite_function
from ..eager import selection as _eager_selection
from ..ir import dtypes as dt
from ..ir.types import normalize_axis
from ..ops.scan import log_step_scan
from ..tensor import Tensor
from ..tracer.context import _tls as _trace_tls, user_location
from ..tracer.tensor import GraphBreak, tracing
from . import elementwise as E
from ._errors import names_op
from ._host import host_plain, host_take_along, host_tensor, host_values, host_view
from .creation import from_numpy, iota, zeros
from .indexing import gather, scatter
from .reduction import sum as sum_
from .shape import expand, movedim, slice_dim, unsqueeze

sort_result = namedtuple("sort", ["values", "indices"])
topk_result = namedtuple("topk", ["values", "indices"])


def _check(op: str, input: Any) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if input._dtype.is_complex:
        raise RuntimeError(
            f"{op}: not implemented for {input._dtype.name} (complex numbers "
            f"have no order; shape {list(input.shape)})"
        )
    return input


TRACED_SORT_MAX = 1024


def _rank_argsort(x: Tensor, dim: int, descending: bool) -> Tensor:
    """The stable argsort as ops (what compiled code runs): each element's rank counts
    the elements that sort before it (smaller, NaN largest, or equal and earlier), and the
    permutation puts each position at its rank. O(n^2) comparisons per row, all fused
    elementwise work and one reduction."""
    row = movedim(x, dim, -1)
    n = row.shape[-1]
    mine, other = unsqueeze(row, -1), unsqueeze(row, -2)  # (..., i, 1), (..., 1, j)
    first, second = (mine, other) if descending else (other, mine)
    ahead = E.lt(first, second)  # j strictly before i
    same = E.eq(first, second)
    if x._dtype.is_floating_point:
        nan_first, nan_second = E.isnan(first), E.isnan(second)
        ahead = E.logical_or(ahead, E.logical_and(nan_second, E.logical_not(nan_first)))
        same = E.logical_or(same, E.logical_and(nan_first, nan_second))
    j = iota(n, dt.int64)
    earlier = E.lt(unsqueeze(j, 0), unsqueeze(j, 1))  # [i, j]: j < i
    before = E.logical_or(ahead, E.logical_and(same, earlier))
    rank = sum_(before.to(dt.int64), -1)  # (..., n)
    positions = expand(j, tuple(rank.shape))
    perm = scatter(zeros(tuple(rank.shape), dtype=dt.int64), -1, rank, positions)
    return movedim(perm, -1, dim)


def _host_order(arr: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The stable argsort (int64) of NumPy array `arr` along `axis` (NaN largest;
    float16 is ordered as float32, which NumPy's float16 sort would also do, faster)."""
    if arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    if descending:  # stable descending = reversed stable ascending of the reverse
        rev = np.flip(arr, axis)
        idx = arr.shape[axis] - 1 - np.flip(rev.argsort(axis=axis, kind="stable"), axis)
    else:
        idx = arr.argsort(axis=axis, kind="stable")
    return idx if idx.dtype == np.int64 else idx.astype(np.int64)


def _plain_order(x: Any) -> bool:
    """Whether `x`'s order is found straight on the host: a plain tensor (not batched by
    vmap, not a tracer) while no trace runs. (Autograd does not matter: an order is
    not differentiable.)"""
    return x.__class__ is Tensor and not _trace_tls.stack


def _argsort_along(x: Tensor, dim: int, descending: bool) -> Tensor:
    """Stable argsort along `dim` (NaN largest): by NumPy on the host, or by ops when
    traced."""
    if _plain_order(x):  # a plain tensor, eagerly
        arr = host_values(x)  # (bfloat16 widened)
        return host_tensor(_host_order(arr, dim, descending), dt.int64)
    from ..transforms.batching import (
        levels,
        lift,
        unlift,
    )  # circle: transforms.batching -> functions -> here

    if tracing():
        if x.shape[dim] <= TRACED_SORT_MAX:
            return _rank_argsort(x, dim, descending)
        raise GraphBreak(
            f"sort/argsort/topk over {x.shape[dim]} elements (compiled code "
            f"sorts at most {TRACED_SORT_MAX} per row; longer rows are "
            f"sorted on the host)",
            user_location(),
        )
    lv = levels(x)
    plain = lift(x, lv)
    axis = dim + len(lv)
    if plain._dtype is dt.bfloat16:  # NumPy has no bfloat16: order its float32 copy
        plain = plain.float()
    arr = plain.detach().contiguous().numpy()
    return unlift(from_numpy(_host_order(arr, axis, descending)), lv)


@names_op("argsort")
def argsort(
    input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False
) -> Tensor:
    x = _check("argsort", input)
    if x.ndim == 0:
        normalize_axis(dim, 0, "argsort")

        return zeros((), dtype=dt.int64)
    return _argsort_along(x, normalize_axis(dim, x.ndim, "argsort"), descending)


@names_op("sort")
def sort(
    input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False
) -> sort_result:
    x = _check("sort", input)
    shape = x._shape
    if shape and host_plain(x):
        # the plain eager case: short rows sorted by a kernel into the outputs, others on
        # the host, the values gathered there too (their bits, so bfloat16 and NaN
        # payloads come through as the gather kernel copies them)
        d = normalize_axis(dim, len(shape), "sort")
        if shape[d] <= _eager_selection.SORT_MAX_ROW:
            pair = _eager_selection.sort_rows(x, d, descending)
            if pair is not None:
                return sort_result(*pair)
        raw = host_view(x)
        if x._dtype is dt.bfloat16:
            order = _host_order(host_values(x), d, descending)
            values = host_take_along(raw, order, d)
        else:
            order = _host_order(raw, d, descending)
            if raw.size > 4096:
                values = host_take_along(raw, order, d)
            elif descending:  # (a stable sort's result is the same gather, one call)
                values = np.flip(np.sort(np.flip(raw, d), d, kind="stable"), d)
            else:
                values = np.sort(raw, d, kind="stable")
        return sort_result(host_tensor(values, x._dtype), host_tensor(order, dt.int64))

    idx = argsort(x, dim, descending)
    if x.ndim == 0:
        return sort_result(x.clone(), idx)
    return sort_result(gather(x, dim, idx, name="SortBackward0"), idx)


def msort(input: Tensor) -> Tensor:
    return sort(input, 0).values


@names_op("topk")
@composite_function
def topk(
    input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> topk_result:
    """The k largest (or smallest) elements along `dim` and their positions, in sorted
    order (`sorted=False` returns them in the same, sorted, order)."""
    x = _check("topk", input)
    if x._dtype is dt.bool_:
        raise RuntimeError(
            f"topk: does not support bool tensors (shape {list(x.shape)}); convert with .to(dtype)"
        )
    d = normalize_axis(dim, max(x.ndim, 1), "topk")
    size = x.shape[d] if x.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= size:
        raise RuntimeError(
            f"topk: selected index k out of range (k={k!r}, size {size} along "
            f"dim {dim} of shape {list(x.shape)})"
        )
    if x.ndim == 0:
        return topk_result(x.clone(), argsort(x))
    idx = slice_dim(_argsort_along(x, d, largest), d, 0, k)
    return topk_result(gather(x, d, idx, name="TopkBackward0"), idx)


def _scan_input(op: str, input: Any, dtype: dt.DType | None) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if dtype is not None:
        return input.to(dtype)
    if input._dtype.is_integer or input._dtype is dt.bool_:
        return input.to(dt.int64)  # PyTorch accumulates integers in int64
    return input


@names_op("cumsum")
def cumsum(input: Tensor, dim: int, *, dtype: dt.DType | None = None) -> Tensor:
    x = _scan_input("cumsum", input, dtype)
    axis = normalize_axis(dim, x.ndim, "cumsum")
    return apply_composite("cumsum", (x,), {"axis": axis}, "CumsumBackward0")


@composite_function
def cumprod(input: Tensor, dim: int, *, dtype: dt.DType | None = None) -> Tensor:
    from .. import functions as F  # circle: functions -> here

    x = _scan_input("cumprod", input, dtype)
    if x.ndim == 0:
        normalize_axis(dim, 0, "cumprod")
        return E.mul(x, 1)
    return log_step_scan(F, x, normalize_axis(dim, x.ndim, "cumprod"), E.mul, 1)
