"""Statistics, scans and order statistics: nan-reductions, median, quantile, mode, cummax, histograms, cov."""

from __future__ import annotations

import ctypes
import math
import struct
import warnings
from collections import namedtuple
from typing import Any, Callable

import numpy as np

from ..dispatch.apply import composite_function
from ..codegen.histogram import (
    B_MAX,
    B_MIN,
    BINCOUNT_INTS,
    DIM_SLOTS,
    EDGES_DATA,
    EDGES_GIVEN,
    EDGES_RANGE,
    H_D,
    H_DIMS,
    H_STATUS,
    HISTC_STATUS,
)
from ..dispatch.grad_mode import no_grad
from ..eager.reduce import (
    bincount_kernel,
    extreme_plan,
    histc_kernel,
    histogram_kernel,
    histogram_scratch,
    mode_plan,
)
from ..ir import dtypes as dt
from ..ir.types import normalize_axis
from ..ops.scan import log_step_scan
from ..runtime import launch
from ..schedule.layout import collapse
from ..tensor import Tensor
from ..tracer.context import _tls as _trace_tls, user_location
from ..tracer.tensor import GraphBreak
from . import elementwise as E
from ._errors import names_op, serve_on_devices
from ._host import (
    host_empty,
    host_plain,
    host_take_along,
    host_tensor,
    host_values,
    host_view,
    positions_along as _positions_along,
)
from ._out import store
from .creation import full, tensor, zeros
from .indexing import gather
from .inplace import _rewrite_inplace
from .linalg import mm
from .misc import diag
from .reduction import amax, amin, mean, any as any_, norm as norm_, sum as sum_
from .shape import cat, movedim, reshape, select, slice_dim, squeeze
from .sorting import _argsort_along, cumprod, cumsum, sort

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}


def write_out(op: str, out: Any, result: Tensor) -> Tensor:
    """Copy `result` into `out` with PyTorch's `out=` rules (functions/_out.py's `store`:
    resized with torch's warning, castable dtype, no grad recorded)."""
    return store(op, result, out)


# --------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------


def _tensor(op: str, x: Any, name: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be a Tensor, not {type(x).__name__}")
    return x


def _no_complex(op: str, x: Tensor) -> Tensor:
    if x._dtype.is_complex:
        raise RuntimeError(
            f"{op}(): not implemented for {x._dtype.name} (complex numbers "
            f"have no order; shape {list(x.shape)})"
        )
    return x


def _host_values(op: str, *tensors: Any) -> list[Any]:
    """NumPy values of `tensors` for a host computation; inside `lg.compile` a graph break
    (the function is split there and this part runs eagerly)."""
    if _trace_tls.stack or any(getattr(t, "_ctx", None) is not None for t in tensors):
        raise GraphBreak(
            f"{op}() computes on the host (its result depends on the data)", user_location()
        )
    return [
        None if t is None else host_values(t) if t.__class__ is Tensor else t.detach()._values()
        for t in tensors
    ]


def _keep(x: Tensor, d: int, keepdim: bool) -> Tensor:
    """`x` (reduced with keepdim) with dim `d` dropped unless `keepdim`."""
    return x if keepdim else squeeze(x, d)


def _results(kind: Any, out: Any, op: str, *values: Tensor) -> Any:
    """A namedtuple result, written into `out` (a tuple of tensors) when given."""
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != len(values):
            raise TypeError(f"{op}(): argument 'out' must be a tuple of {len(values)} Tensors")
        values = tuple(write_out(op, o, v) for o, v in zip(out, values))
    return kind(*values)


def _reduced_dim(op: str, x: Tensor, dim: int) -> int:
    """`dim` normalized; a dimension of size zero raises as PyTorch's reductions without
    identity do."""
    d = normalize_axis(dim, x.ndim, op)
    if x.ndim and x._shape[d] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    return d


def _int64_of(arr: Any) -> Tensor:
    return host_tensor(arr, dt.int64)


def _host_result(arr: Any, dtype: dt.DType) -> Tensor:
    """A new tensor of `dtype` holding host values `arr` (rounded to `dtype` as `.to`
    rounds: bfloat16 through an llgrad cast, the others by NumPy's assignment)."""
    if dtype is dt.bfloat16:
        return host_tensor(arr, dt.float32).to(dtype)
    return host_tensor(arr, dtype)


# --------------------------------------------------------------------------------------
# cummax, cummin, logcumsumexp, in-place scans
# --------------------------------------------------------------------------------------

cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])


def _cum_extreme(op: str, input: Tensor, dim: int, largest: bool, out: Any) -> Any:
    x = _no_complex(op, _tensor(op, input))
    kind = cummax_result if largest else cummin_result
    name = "CummaxBackward0" if largest else "CumminBackward0"
    d = normalize_axis(dim, len(x._shape), op)
    if not x._shape or 0 in x._shape:
        idx = zeros(x._shape, dtype=dt.int64)
        values = x.clone() if x.ndim == 0 else gather(x, d, idx, name=name)
        return _results(kind, out, op, values, idx)
    plain = host_plain(x)
    if plain:
        plan = extreme_plan(x, d, largest, True)
        if plan is not None:  # one kernel: values and indices in one pass
            kernel, sizes, strides = plan
            values = Tensor._empty(x._shape, x._dtype)
            idx = Tensor._empty(x._shape, dt.int64)
            launch.call(kernel, [*sizes, x._ptr, *strides, values._ptr, idx._ptr])
            return _results(kind, out, op, values, idx)
    a = host_values(x) if plain else _host_values(op, x)[0]
    if x._dtype is dt.bool_:
        a = a.view(np.uint8)
    run = (np.maximum if largest else np.minimum).accumulate(a, axis=d)
    mark = np.equal(a, run)  # ties: the latest position (as PyTorch)
    floating = a.dtype.kind == "f"
    if floating:
        mark |= np.isnan(a)  # a NaN holds from where it appears
    if plain:  # no gradient to record: the values are read on the host too
        idx, pos = host_empty(x._shape, dt.int64)
        # each position's index along `d` where marked, 0 elsewhere, carried forward
        np.multiply(mark, _positions_along(a.shape, d), out=pos)
        np.maximum.accumulate(pos, axis=d, out=pos)
        if floating or x._dtype is dt.bfloat16:
            # the elements at the indices (a running extreme equals them, but a signed
            # zero or a NaN's payload may come from another position)
            values = host_take_along(host_view(x), pos, d)
        else:
            values = run  # (integers and bools: the same bits)
        return _results(kind, out, op, host_tensor(values, x._dtype), idx)
    mark = mark * _positions_along(a.shape, d)
    pos = np.maximum.accumulate(mark, axis=d)
    idx = _int64_of(pos)
    return _results(kind, out, op, gather(x, d, idx, name=name), idx)


def cummax(input: Tensor, dim: int, *, out: Any = None) -> Any:
    """Running maximum along `dim` and the position of each: `(values, indices)`.

    A NaN propagates from where it appears; ties take the latest position (PyTorch's
    choices). Gradients flow to the positions in `indices`. Computed on the host: a graph
    break inside `lg.compile`.
    """
    return _cum_extreme("cummax", input, dim, True, out)


def cummin(input: Tensor, dim: int, *, out: Any = None) -> Any:
    """Running minimum along `dim` and its positions; as `cummax`."""
    return _cum_extreme("cummin", input, dim, False, out)


def _logaddexp(a: Tensor, b: Tensor) -> Tensor:
    """log(exp(a) + exp(b)) without overflow; -inf with -inf gives -inf."""
    m = E.maximum(a, b)
    delta = E.where(E.eq(a, b), 0.0, E.sub(a, b))
    return E.add(m, E.log1p(E.exp(E.neg(E.abs(delta)))))


def logcumsumexp(input: Tensor, dim: int, *, out: Any = None) -> Tensor:
    """log(cumsum(exp(input), dim)) computed stably: a log-step scan of a two-term
    log-sum-exp (so it compiles and differentiates by composition); complex inputs scan
    sequentially, as torch (their imaginary parts depend on the order of the steps).

    Args: `dim` the scanned dimension; `out` receives the result. Integer inputs raise as
    in PyTorch.
    """
    res = _logcumsumexp(input, dim)
    return write_out("logcumsumexp", out, res) if out is not None else res


@composite_function
def _logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """`logcumsumexp` without `out` (a compiled composite: one call per signature)."""
    from .. import functions as F  # circle: functions -> here

    x = _tensor("logcumsumexp", input)
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        raise RuntimeError(
            f"logcumsumexp(): not implemented for {x._dtype.name}; use a floating point input"
        )
    d = normalize_axis(dim, x.ndim, "logcumsumexp")
    if x.ndim == 0:
        res = x.clone()
    elif x._dtype.is_complex and x._shape[d]:
        # complex: a sequential scan of lg.logaddexp (each step shifted by the operand of
        # the larger real part), as torch: the imaginary parts are not reduced mod 2 pi,
        # so the order of the steps shows in the result
        acc = F.select(x, d, 0)
        parts = [acc]
        for i in range(1, x._shape[d]):
            acc = F.logaddexp(acc, F.select(x, d, i))
            parts.append(acc)
        res = F.stack(parts, d)
    else:
        res = log_step_scan(F, x, d, _logaddexp, float("-inf"))
        if res is x:
            res = x.clone()
    return res


def _cumsum_(self: Tensor, dim: int, *, dtype: dt.DType | None = None) -> Tensor:
    return cumsum(self, dim, dtype=dtype)


def _cumprod_(self: Tensor, dim: int, *, dtype: dt.DType | None = None) -> Tensor:
    return cumprod(self, dim, dtype=dtype)


# --------------------------------------------------------------------------------------
# Order statistics: kthvalue, median, nanmedian, mode, quantile, nanquantile
# --------------------------------------------------------------------------------------

kthvalue_result = namedtuple("kthvalue", ["values", "indices"])
median_result = namedtuple("median", ["values", "indices"])
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])
mode_result = namedtuple("mode", ["values", "indices"])


def _pick(x: Tensor, d: int, k: Tensor, keepdim: bool, name: str) -> tuple[Tensor, Tensor]:
    """The element of sorted rank `k` (int64, keepdim shape) along `d`: (value, index)."""
    order = _argsort_along(x, d, False)  # NaN last, stable
    idx = gather(order, d, k)
    values = gather(x, d, idx, name=name)
    return _keep(values, d, keepdim), _keep(idx, d, keepdim)


def _rank_shape(x: Tensor, d: int) -> tuple[int, ...]:
    return tuple(1 if i == d else n for i, n in enumerate(x._shape))


@composite_function
def kthvalue(
    input: Tensor, k: int, dim: int = -1, keepdim: bool = False, *, out: Any = None
) -> Any:
    """The k-th smallest element along `dim` and its position: `(values, indices)`.

    NaN counts as larger than every number. Among equal values the index is the first
    in input order (PyTorch leaves which one unspecified).
    """
    x = _no_complex("kthvalue", _tensor("kthvalue", input))

    d = normalize_axis(dim, x.ndim, "kthvalue")
    n = x._shape[d] if x.ndim else 1
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n:
        raise RuntimeError(
            f"kthvalue(): selected number k out of range for dimension {d} (k={k!r}, size {n})"
        )
    if x.ndim == 0:
        return _results(kthvalue_result, out, "kthvalue", x.clone(), zeros((), dtype=dt.int64))
    v, i = _pick(x, d, full(_rank_shape(x, d), k - 1, dtype=dt.int64), keepdim, "KthvalueBackward0")
    return _results(kthvalue_result, out, "kthvalue", v, i)


def _median(
    op: str,
    input: Tensor,
    dim: Any,
    keepdim: bool,
    out: Any,
    ignore_nan: bool,
    kind: Any,
    names: tuple[str, str],
) -> Any:
    x = _no_complex(op, _tensor(op, input))
    if dim is None:
        if x.numel() == 0:
            if not x._dtype.is_floating_point:
                raise RuntimeError(
                    f"{op}(): cannot compute the median of an empty {x._dtype.name} tensor"
                )
            res = full((), float("nan"), dtype=x._dtype)
            return write_out(op, out, res) if out is not None else res
        v, _ = _median_rank(x.reshape(-1), 0, True, ignore_nan, names[0])
        v = v.reshape(())
        return write_out(op, out, v) if out is not None else v
    d = _reduced_dim(op, x, dim)
    if x.ndim == 0:
        return _results(kind, out, op, x.clone(), zeros((), dtype=dt.int64))
    v, i = _median_rank(x, d, keepdim, ignore_nan, names[1])
    return _results(kind, out, op, v, i)


def _median_rank(
    x: Tensor, d: int, keepdim: bool, ignore_nan: bool, name: str
) -> tuple[Tensor, Tensor]:
    """The lower median along `d`; with NaN present, median takes the first NaN and
    nanmedian the lower median of the other values."""
    n = x._shape[d]
    if not x._dtype.is_floating_point:
        return _pick(x, d, full(_rank_shape(x, d), (n - 1) // 2, dtype=dt.int64), keepdim, name)
    count = sum_(E.logical_not(E.isnan(x)).to(dt.int64), d, keepdim=True)
    if ignore_nan:
        k = E.clamp(E.floor_divide(E.sub(count, 1), 2), min=0)
    else:
        k = E.where(E.lt(count, n), count, (n - 1) // 2)
    return _pick(x, d, k, keepdim, name)


@composite_function
def median(input: Tensor, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """The lower median (of all elements, or along `dim` with its index:
    `(values, indices)`); any NaN makes the result NaN (the index of the first NaN).

    Among equal values the index is the first in input order (PyTorch leaves it
    unspecified). Sorted by ops, so it compiles (rows up to 1024 elements).
    """
    return _median(
        "median",
        input,
        dim,
        keepdim,
        out,
        False,
        median_result,
        ("MedianBackward0", "MedianBackward1"),
    )


@composite_function
def nanmedian(input: Tensor, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:
    """`median` ignoring NaN values (NaN only where a row holds nothing else)."""
    return _median(
        "nanmedian",
        input,
        dim,
        keepdim,
        out,
        True,
        nanmedian_result,
        ("NanmedianBackward0", "NanmedianBackward1"),
    )


def mode(input: Tensor, dim: int = -1, keepdim: bool = False, *, out: Any = None) -> Any:
    """The most frequent value along `dim` and an index of it: `(values, indices)`.

    Ties between counts go to the smallest value; the index is the last position of that
    value; NaNs never equal each other (PyTorch's rules). Computed on the host: a graph
    break inside `lg.compile`.
    """
    x: Any = input
    if x.__class__ is Tensor and type(dim) is int and not x._dtype.is_complex:
        shape = x._shape
        nd = len(shape)
        d = dim + nd if dim < 0 else dim
        if 0 <= d < nd and shape[d] and host_plain(x):
            got = _mode_kernel(x, d, keepdim)
            if got is not None:
                return (
                    mode_result(*got) if out is None else _results(mode_result, out, "mode", *got)
                )
    x = _no_complex("mode", _tensor("mode", input))
    d = _reduced_dim("mode", x, dim)
    if x.ndim == 0:
        return _results(mode_result, out, "mode", x.clone(), zeros((), dtype=dt.int64))
    plain = host_plain(x)
    if plain:
        got = _mode_kernel(x, d, keepdim)
        if got is not None:
            return _results(mode_result, out, "mode", *got)
    a = host_values(x) if plain else _host_values("mode", x)[0]
    last_axis = d == a.ndim - 1
    axes = None if last_axis else tuple(k for k in range(a.ndim) if k != d) + (d,)
    n = a.shape[d]
    rows = (a if last_axis else a.transpose(axes)).reshape(-1, n)
    r = rows.shape[0]
    perm = rows.argsort(axis=1, kind="stable")
    ar = np.arange(r)
    s = np.sort(rows, axis=1)  # (the sorted values: only their equalities are read)
    # in each sorted row, runs of equal values (NaN never equals): the run that ends at
    # each end position has length end - start + 1; the longest run, the first (smallest
    # value) among equally long ones, gives the value and its last input position
    starts = np.empty(s.shape, dtype=bool)
    starts[:, 0] = True
    np.not_equal(s[:, 1:], s[:, :-1], out=starts[:, 1:])
    j = np.arange(n)
    begin = np.maximum.accumulate(starts * j, axis=1)
    length = j - begin
    length += 1
    length[:, :-1] *= starts[:, 1:]  # (only at each run's end)
    pos = perm[ar, length.argmax(axis=1)]
    lead = tuple(a.shape[k] for k in range(a.ndim) if k != d)
    if plain:  # no gradient to record: the values are read on the host too
        raw = host_view(x)
        raw_rows = (raw if last_axis else raw.transpose(axes)).reshape(-1, n)
        shape = lead if not keepdim else tuple(1 if k == d else m for k, m in enumerate(a.shape))
        # (a size-1 dim inserted anywhere keeps the row-major order of the others)
        return _results(
            mode_result,
            out,
            "mode",
            host_tensor(raw_rows[ar, pos].reshape(shape), x._dtype),
            host_tensor(pos.reshape(shape), dt.int64),
        )

    pos = pos.reshape(lead + (1,))
    idx = movedim(_int64_of(pos), -1, d)
    values = gather(x, d, idx, name="ModeBackward0")
    return _results(mode_result, out, "mode", _keep(values, d, keepdim), _keep(idx, d, keepdim))


_new_tensor: Any = getattr(Tensor, "_empty")  # (a new contiguous tensor: shape, dtype)


def _mode_kernel(x: Any, d: int, keepdim: bool) -> Any:
    """`mode` of short rows along `d` by one `ModeKernel` call: (values, indices), or
    None where the layout or row length has no kernel plan (`mode_plan`)."""
    plan = mode_plan(x, d)
    if plan is None:
        return None
    kernel, sizes, strides = plan
    shape = x._shape
    shape = shape[:d] + (1,) + shape[d + 1 :] if keepdim else shape[:d] + shape[d + 1 :]
    values = _new_tensor(shape, x._dtype)
    idx = _new_tensor(shape, dt.int64)
    launch.call(kernel, [*sizes, x._ptr, *strides, values._ptr, idx._ptr])
    return values, idx


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(
    op: str,
    input: Tensor,
    q: Any,
    dim: Any,
    keepdim: bool,
    interpolation: str,
    out: Any,
    ignore_nan: bool,
) -> Tensor:
    x = _tensor(op, input)
    if x._dtype not in (dt.float32, dt.float64):
        raise RuntimeError(
            f"{op}() input tensor must be either float or double dtype (got {x._dtype.name})"
        )
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(
            f"{op}() interpolation must be one of linear, lower, higher, "
            f"midpoint or nearest. Got {interpolation}"
        )
    if x.numel() == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not isinstance(q, (int, float)) or isinstance(q, bool):
            raise TypeError(f"{op}(): q must be a float or a Tensor, not {type(q).__name__}")
        qs = tensor([float(q)], dtype=x._dtype)
    else:
        if q.ndim > 1:
            raise RuntimeError(
                f"{op}() q must be a scalar or 1D tensor (got shape {list(q.shape)})"
            )
        if q._dtype is not x._dtype:
            raise RuntimeError(
                f"{op}() q tensor must be same dtype as the input tensor "
                f"(q {q._dtype.name}, input {x._dtype.name})"
            )
        scalar_q = q.ndim == 0
        qs = q.reshape(-1)  # (differentiable: the interpolation weight depends on q)
    if getattr(qs, "_ctx", None) is None:
        (qv,) = _host_values(op, qs) if not scalar_q or isinstance(q, Tensor) else (qs._values(),)
        if qv.size and not ((qv >= 0) & (qv <= 1)).all():
            raise ValueError(f"{op}() q values must be in the range [0, 1]")
    if dim is None:
        xs = x.reshape(-1)
        d = 0
    else:
        d = normalize_axis(dim, x.ndim, op)
        xs = movedim(x, d, -1) if x.ndim else x.reshape(1)
    srt = sort(xs, -1).values
    n = srt._shape[-1]
    if ignore_nan:
        count = sum_(E.logical_not(E.isnan(srt)), -1, keepdim=True).to(x._dtype)
        ranks = E.mul(qs, E.sub(count, 1))
        ranks = E.where(E.lt(ranks, 0), 0.0, ranks)
    else:
        ranks = E.mul(qs, float(n - 1))
        ranks = E.where(any_(E.isnan(srt), -1, keepdim=True), float(n - 1), ranks)
    if interpolation == "lower":
        ranks = E.floor(ranks)
    elif interpolation == "higher":
        ranks = E.ceil(ranks)
    elif interpolation == "nearest":
        ranks = E.round(ranks)
    below = ranks.to(dt.int64)
    values = gather(srt, -1, below)
    if interpolation in ("linear", "midpoint"):
        weights = E.sub(ranks, below.to(x._dtype)) if interpolation == "linear" else 0.5
        above = gather(srt, -1, E.ceil(ranks).to(dt.int64))
        values = E.lerp(values, above, weights)
    res = movedim(values, -1, 0)  # (nq, *reduced)
    if keepdim:
        if dim is None:
            res = reshape(res, (res._shape[0],) + (1,) * x.ndim)
        elif x.ndim:
            res = res.unsqueeze(d + 1)
    if scalar_q:
        res = res.squeeze(0)
    return write_out(op, out, res) if out is not None else res


def quantile(
    input: Tensor,
    q: Any,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
    out: Tensor | None = None,
) -> Tensor:
    """The q-th quantiles of `input` (flattened, or along `dim`).

    Args: `q` a float or a 0-d/1-D tensor of values in [0, 1] (a 1-D q adds a leading
    dimension); `interpolation` between the two nearest ranks: linear, lower, higher,
    midpoint or nearest (round half to even); a NaN in a row makes its quantiles NaN.
    """
    if out is None and q.__class__ in (float, int):
        return _quantile_of_number(input, q, dim, keepdim, interpolation, False)
    return _quantile("quantile", input, q, dim, keepdim, interpolation, out, False)


def nanquantile(
    input: Tensor,
    q: Any,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
    out: Tensor | None = None,
) -> Tensor:
    """`quantile` ignoring NaN values (NaN only for a row of NaNs)."""
    if out is None and q.__class__ in (float, int):
        return _quantile_of_number(input, q, dim, keepdim, interpolation, True)
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, out, True)


@composite_function
def _quantile_of_number(
    input: Tensor, q: float, dim: int | None, keepdim: bool, interpolation: str, ignore_nan: bool
) -> Tensor:
    """quantile/nanquantile of a Python number `q`: a compiled composite (`q` is part of
    its key by value, so its range check runs on each key's first call; a tensor `q`,
    whose values a compiled call could not check, takes `_quantile` as written)."""
    return _quantile(
        "nanquantile" if ignore_nan else "quantile",
        input,
        q,
        dim,
        keepdim,
        interpolation,
        None,
        ignore_nan,
    )


# --------------------------------------------------------------------------------------
# NaN-ignoring reductions and aminmax
# --------------------------------------------------------------------------------------


@composite_function
def nansum(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: dt.DType | None = None
) -> Tensor:
    """Sum treating NaN as zero (their gradient is zero). Args as `sum`."""
    x = _tensor("nansum", input)
    if x._dtype.is_complex:
        raise RuntimeError("nansum does not support complex inputs")
    if x._dtype.is_floating_point:
        x = E.where(E.isnan(x), 0.0, x)
    return sum_(x, dim, keepdim, dtype=dtype)


@composite_function
def nanmean(
    input: Tensor,
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: dt.DType | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """Mean of the non-NaN elements (NaN where there are none). Args as `mean`."""
    x = _tensor("nanmean", input)
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        raise RuntimeError(
            f"nanmean(): expected input to have floating point or complex "
            f"dtype but got {x._dtype.name}"
        )
    if dtype is not None:
        x = x.to(dtype)
    count = sum_(E.logical_not(E.isnan(x)), dim, keepdim)
    res = E.div(nansum(x, dim, keepdim), count)
    return write_out("nanmean", out, res) if out is not None else res


aminmax_result = namedtuple("aminmax", ["min", "max"])


@composite_function
def aminmax(
    input: Tensor, *, dim: int | None = None, keepdim: bool = False, out: Any = None
) -> Any:
    """`(amin, amax)` over all elements or along `dim`, as a namedtuple (min, max)."""
    x = _no_complex("aminmax", _tensor("aminmax", input))
    if dim is not None:
        d = normalize_axis(dim, x.ndim, "aminmax")
        empty = x.ndim > 0 and x._shape[d] == 0
    else:
        d = None
        empty = x.numel() == 0
    if empty:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the "
            "operation has no identity."
        )
    if d is None:
        lo, hi = amin(x, (), keepdim), amax(x, (), keepdim)
    else:
        lo, hi = amin(x, d, keepdim), amax(x, d, keepdim)
    return _results(aminmax_result, out, "aminmax", lo, hi)


# --------------------------------------------------------------------------------------
# Histograms and bincount (host computations: graph breaks inside lg.compile)
# --------------------------------------------------------------------------------------

histogram_result = namedtuple("histogram", ["hist", "bin_edges"])
histogramdd_result = namedtuple("histogramdd", ["hist", "bin_edges"])


def _float_only(op: str, x: Tensor) -> Tensor:
    if x._dtype not in (dt.float32, dt.float64, dt.float16, dt.bfloat16):
        raise RuntimeError(
            f"{op}(): not implemented for {x._dtype.name} (expected a floating point input)"
        )
    return x


def histc(
    input: Tensor, bins: int = 100, min: Any = 0, max: Any = 0, *, out: Tensor | None = None
) -> Tensor:
    """A histogram of `bins` equal-width bins between `min` and `max` (both 0: the data's
    min and max, widened by 1 each way when they are equal); elements outside are ignored,
    the last bin includes `max`. The result has the input's dtype; no gradient (as
    PyTorch)."""
    x: Any = _float_only("histc", _tensor("histc", input))
    if not isinstance(bins, int) or isinstance(bins, bool) or bins <= 0:
        raise RuntimeError(f"histc(): bins must be > 0, but got {bins} for dimension 0")
    if (
        x.__class__ is Tensor
        and x._dtype in _HISTC_DTYPES
        and x._ptr is not None
        and not _trace_tls.stack
    ):
        res = _histc_kernel(x, bins, min, max)
        if res is not None:
            return write_out("histc", out, res) if out is not None else res
    (a,) = _host_values("histc", x)
    a = a.reshape(-1)
    kind = a.dtype.type
    lo, hi = kind(min), kind(max)
    if lo == hi and a.size:
        lo, hi = a.min(), a.max()
    if lo == hi:
        lo, hi = kind(lo - 1), kind(hi + 1)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"histc(): range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError(f"histc(): max must be larger than min (min {min}, max {max})")
    keep = (a >= lo) & (a <= hi)
    v = a[keep]
    pos = ((v - lo) * kind(bins) / (hi - lo)).astype(np.int64)
    pos[pos == bins] = bins - 1
    hist = np.bincount(pos, minlength=bins).astype(a.dtype)
    res = _host_result(hist, x._dtype)
    return write_out("histc", out, res) if out is not None else res


# (float16 stays on the host: NumPy rounds each step of the bin arithmetic to float16)
_HISTC_DTYPES = (dt.float32, dt.float64, dt.bfloat16)

_memmove = ctypes.memmove
_F32 = struct.Struct("f")
_F64 = struct.Struct("d")
_I64 = struct.Struct("q")


def _to_f32(v: float) -> float:
    """`v` rounded to float32 (as NumPy's `float32(v)`); OverflowError where that is
    infinite but `v` is not."""
    return _F32.unpack(_F32.pack(v))[0]


def _row_loops(shape: tuple[int, ...], strides: list[tuple[int, ...]]) -> Any:
    """`shape`'s elements (row-major) as at most two loops: ((n_outer, n_inner), [per
    operand (stride_outer, stride_inner)]), or None when they do not collapse to two.
    Kept per layout."""
    key = (shape, *strides)
    loops = _LOOPS.get(key, False)
    if loops is not False:
        return loops
    sizes, merged = collapse(shape, strides)
    if 0 in sizes:  # (no elements: one empty loop)
        loops = (1, 0), [(0, 0) for _ in strides]
    elif len(sizes) == 1:
        loops = (1, sizes[0]), [(0, st[0]) for st in merged]
    elif len(sizes) == 2:
        loops = sizes, merged
    else:
        loops = None
    if len(_LOOPS) >= 1024:
        _LOOPS.clear()
    _LOOPS[key] = loops
    return loops


_LOOPS: dict[tuple, Any] = {}


def _histc_kernel(x: Any, bins: int, min: Any, max: Any) -> Any:
    """`histc` of a plain CPU tensor by one `HistcKernel` call, or None where the host
    code must run (arguments it has to reject, unusual `min`/`max` types)."""
    if type(min) not in (int, float) or type(max) not in (int, float):
        return None
    d = x._dtype
    rnd = float if d is dt.float64 else _to_f32
    try:
        lo, hi = rnd(min), rnd(max)
        auto = 0
        if lo == hi:
            if x.numel():
                auto = 1  # (the kernel finds the data's range)
            else:
                lo, hi = rnd(lo - 1), rnd(hi + 1)
    except OverflowError:
        return None
    if not auto and not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        return None  # (the host code raises)
    loops = _row_loops(x._shape, [x._strides])
    if loops is None:
        x = x.contiguous()
        loops = _row_loops(x._shape, [x._strides])
    (n_outer, n_inner), ((so, si),) = loops
    res = _new_tensor((bins,), d)
    counts, address = histogram_scratch(bins)  # (`counts` held through the call)
    launch.call(
        histc_kernel(d),
        [
            n_outer,
            n_inner,
            x._ptr,
            so,
            si,
            _float_bits(lo),
            _float_bits(hi),
            bins,
            address,
            res._ptr,
            auto,
            0,
        ],
    )
    if auto and launch.block()[0][HISTC_STATUS]:
        return None  # (a range that is not finite: the host code raises)
    return res


def _float_bits(v: Any) -> int:
    """The float64 bits of `v` as a signed int64 (a kernel argument slot)."""
    return _I64.unpack(_F64.pack(v))[0]


def _edges(
    op: str,
    a: Any,
    bins: Any,
    rng: Any,
    np_dtype: Any,
    k: int | None = None,
    dtype: dt.DType | None = None,
) -> Any:
    """Bin edges of one dimension: a tensor of edges, or `bins` equal bins over `rng` (or
    the data's min and max, widened by 0.5 when equal; [0, 1] for no data). Equal bins
    of a float32 or float64 `dtype` are torch's `linspace` (`_torch_linspace`), the
    others NumPy's."""
    if isinstance(bins, Tensor):
        e = bins.detach()._values().astype(np_dtype).reshape(-1)
        if bins.ndim != 1 or e.size < 1:
            raise RuntimeError(
                f"{op}(): bins tensor should have one dimension and at least 1 element"
            )
        return e  # (unsorted edges are taken as torch takes them)
    if not isinstance(bins, int) or isinstance(bins, bool) or bins <= 0:
        raise RuntimeError(f"{op}(): bins must be > 0, but got {bins} for dimension {k or 0}")
    if rng is not None:
        lo, hi = np_dtype.type(rng[0]), np_dtype.type(rng[1])
        if lo > hi:
            raise RuntimeError(
                f"{op}(): min should not exceed max, but got min {rng[0]} max "
                f"{rng[1]} for dimension {k or 0}"
            )
    elif a.size:
        lo, hi = a.min(), a.max()
    else:  # no data and no range: torch bins over [0, 1]
        lo, hi = np_dtype.type(0), np_dtype.type(1)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"{op}(): range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = np_dtype.type(lo - 0.5), np_dtype.type(hi + 0.5)
    if dtype in _HIST_DTYPES:
        return _torch_linspace(float(lo), float(hi), bins + 1, dtype)
    return np.linspace(lo, hi, bins + 1, dtype=np_dtype)


_HIST_DTYPES = (dt.float32, dt.float64)  # (torch has no half-precision histogramdd)


def _torch_linspace(lo: float, hi: float, n: int, d: dt.DType) -> Any:
    """torch's `linspace(lo, hi, n)` in float32/float64 `d` (n >= 2) as a NumPy array,
    computed by the histogram kernel's edge code (fused multiply-adds, as torch's)."""
    e = _new_tensor((n,), d)
    args = [0] * (H_DIMS + DIM_SLOTS)
    args[H_STATUS] = -1
    args[H_D] = 1  # (one dimension, no rows)
    args[H_DIMS:] = [EDGES_RANGE, n, e._ptr, _float_bits(lo), _float_bits(hi)]
    launch.call(histogram_kernel(d, False), args)
    return host_view(e).copy()  # (a copy: it outlives `e`)


def _bin_index(a: Any, e: Any) -> Any:
    """Each value's bin among edges `e` (the last bin closed); -1 outside [e[0], e[-1]].
    The bin is found by the binary search torch runs (an upper bound, halving the count),
    so edges that are not sorted give torch's bins too."""
    import numpy as np

    n = e.size
    nb = n - 1
    if n < 2 or not (e[1:] >= e[:-1]).all():
        first = _upper_bound(a, e)
    else:  # sorted edges: NumPy's binary search finds the same upper bound
        first = np.searchsorted(e, a, side="right")
    pos = first - 1
    pos[pos == nb] = nb - 1  # the last bin includes its right edge
    with np.errstate(invalid="ignore"):
        bad = ~((a >= e[0]) & (a <= e[-1])) | (nb < 1)
    pos[bad] = -1
    return pos


def _upper_bound(a: Any, e: Any) -> Any:
    """torch's binary search of each value of `a` among edges `e` (sorted or not): the
    first position whose edge is above the value, halving the count."""
    import numpy as np

    n = e.size
    first = np.zeros(a.shape, dtype=np.int64)
    count = np.full(a.shape, n, dtype=np.int64)
    while (count > 0).any():
        step = count // 2
        it = first + step
        live = count > 0
        right = live & ~(a < e[np.minimum(it, n - 1)])  # e[it] <= a: go right
        first = np.where(right, it + 1, first)
        count = np.where(right, count - step - 1, np.where(live, step, 0))
    return first


def _histogram_kernel(
    x: Any,
    rows_of_last: bool,
    bins_list: Any,
    flat: list[float] | None,
    weight: Any,
    density: bool,
) -> Any:
    """`histogramdd` of a plain float32/float64 CPU tensor by one `HistogramKernel` call.

    The rows are x's leading dimensions with `len(bins_list)` values each along the last
    (`rows_of_last`), or every element a row of one value (`histogram`); `weight` (x's
    dtype, one per row) or None; `flat` the range as floats or None. Returns (hist,
    [edges]), or None where the host code must run (arguments it has to reject, edges of
    another dtype, a data range that is not finite)."""
    d = x._dtype
    D = len(bins_list)
    if not D or H_DIMS + DIM_SLOTS * D > _ARG_SLOTS:
        return None
    if weight is not None and (weight.__class__ is not Tensor or weight._ptr is None):
        return None
    for _ in (0, 1):
        if rows_of_last:
            shape, strides, col = x._shape[:-1], x._strides[:-1], x._strides[-1]
        else:
            shape, strides, col = x._shape, x._strides, 0
        loops = _row_loops(shape, [strides] if weight is None else [strides, weight._strides])
        if loops is not None:
            break
        # (rows in three or more loops: walk contiguous copies)
        x = x.contiguous()
        weight = None if weight is None else weight.contiguous()
    if loops is None:
        return None
    (n_outer, n_inner), walks = loops
    rows = n_outer * n_inner
    f32 = d is dt.float32
    args = [
        n_outer,
        n_inner,
        x._ptr,
        walks[0][0],
        walks[0][1],
        col,
        0,
        0,
        0,
        0,
        0,
        0,
        -1,
        D,
    ]
    if weight is not None:
        args[6:9] = [weight._ptr, walks[1][0], walks[1][1]]
    edges: list[Any] = []
    hist_shape: list[int] = []
    total = 1
    data = False
    for k, b in enumerate(bins_list):
        if b.__class__ is Tensor:
            if b._dtype is not d or len(b._shape) != 1 or not b._shape[0] or b._ptr is None:
                return None
            n = b._shape[0]
            e = _new_tensor((n,), d)
            args += [EDGES_GIVEN, n, e._ptr, b._ptr, b._strides[0]]
        elif type(b) is int and b > 0:
            n = b + 1
            e = _new_tensor((n,), d)
            if flat is not None:
                try:
                    lo, hi = flat[2 * k], flat[2 * k + 1]
                    if f32:
                        lo, hi = _to_f32(lo), _to_f32(hi)
                    if lo > hi or not (math.isfinite(lo) and math.isfinite(hi)):
                        return None  # (the host code raises)
                    if lo == hi:
                        lo, hi = lo - 0.5, hi + 0.5
                        if f32:
                            lo, hi = _to_f32(lo), _to_f32(hi)
                except OverflowError:
                    return None
                args += [EDGES_RANGE, n, e._ptr, _float_bits(lo), _float_bits(hi)]
            elif rows:
                data = True
                args += [EDGES_DATA, n, e._ptr, 0, 0]
            else:  # no data and no range: torch bins over [0, 1]
                args += [EDGES_RANGE, n, e._ptr, _ZERO_BITS, _ONE_BITS]
        else:
            return None
        edges.append(e)
        hist_shape.append(n - 1)
        total *= n - 1
    acc, address = histogram_scratch(total)
    shape_t = tuple(hist_shape)
    hist = None if density else _new_tensor(shape_t, d)
    args[9] = address
    args[10] = total
    if hist is not None:
        args[11] = hist._ptr
    launch.call(histogram_kernel(d, weight is not None), args)
    if data and launch.block()[0][H_STATUS] != -1:
        return None  # (a data range that is not finite: the host code raises)
    if density:
        h = acc[:total] if weight is None else acc[:total].view(np.float64)
        h = h.reshape(shape_t)
        s = h.sum()
        widths = np.ones(shape_t)
        for k, e in enumerate(edges):
            view = [1] * D
            view[k] = shape_t[k]
            widths = widths * np.diff(host_view(e).astype(np.float64)).reshape(view)
        with np.errstate(divide="ignore", invalid="ignore"):  # an empty histogram: NaN
            h = h / (s * widths)
        hist = host_tensor(h.astype(d.np), d)
    return hist, edges


_ARG_SLOTS = 1024  # (launch's argument block)
_ZERO_BITS, _ONE_BITS = _float_bits(0.0), _float_bits(1.0)


def _plain_input(x: Any) -> bool:
    """Whether the histogram kernels may read `x`: a plain CPU tensor of float32 or
    float64, outside any trace."""
    return (
        x.__class__ is Tensor
        and x._dtype in _HIST_DTYPES
        and x._ptr is not None
        and not _trace_tls.stack
    )


def histogramdd(
    input: Tensor, bins: Any = 10, *, range: Any = None, weight: Any = None, density: bool = False
) -> Any:
    """A D-dimensional histogram of the rows of `input` (shape (..., D)).

    Args: `bins` an int, a list of D ints, or a list of D tensors of edges; `range` a flat
    list of D (min, max) pairs; `weight` one weight per row; `density` normalizes to a
    density. Returns `(hist, bin_edges)` (a list of D edge tensors)."""
    x: Any = _float_only("histogramdd", _tensor("histogramdd", input))
    if x.ndim < 2:
        raise RuntimeError("histogramdd(): input tensor should have at least 2 dimensions")
    D = x._shape[-1]
    if weight is not None:
        _tensor("histogramdd", weight, "weight")
        if weight._dtype is not x._dtype:
            raise RuntimeError(
                f"histogramdd(): expected weight to have the same dtype as "
                f"input ({x._dtype.name}), got {weight._dtype.name}"
            )
        if tuple(weight._shape) != tuple(x._shape[:-1]):
            raise RuntimeError(
                f"histogramdd(): weight should have the same shape as input "
                f"excluding its innermost dimension ({list(x._shape[:-1])}), "
                f"got {list(weight._shape)}"
            )
    if _plain_input(x):
        bins_list = [bins] * D if isinstance(bins, (int, Tensor)) else bins
        flat = _flat_range(range, D)
        if type(bins_list) in (list, tuple) and len(bins_list) == D and flat is not False:
            got = _histogram_kernel(x, True, bins_list, flat, weight, bool(density))
            if got is not None:
                return histogramdd_result(*got)
    a, w = _host_values("histogramdd", x, weight)
    dtype = a.dtype
    pts = a.reshape(int(np.prod(x._shape[:-1], dtype=np.int64)), D)  # (not -1: D may be 0)
    if isinstance(bins, (int, Tensor)):
        bins_list = [bins] * D
    else:
        bins_list = list(bins)
        if len(bins_list) != D:
            raise RuntimeError(
                f"histogramdd(): expected {D} sequences of bin edges for each "
                f"of the {D} dimensions of input, got {len(bins_list)}"
            )
    if range is not None:
        flat = [float(r) for r in range]
        if len(flat) != 2 * D:
            raise RuntimeError(f"histogramdd(): expected {2 * D} values for range, got {len(flat)}")
    edges = [
        _edges(
            "histogramdd",
            pts[:, k],
            b,
            None
            if range is None
            else flat[2 * k : 2 * k + 2]
            if not isinstance(b, Tensor)
            else None,
            dtype,
            k,
            x._dtype,
        )
        for k, b in enumerate(bins_list)
    ]
    shape = tuple(e.size - 1 for e in edges)
    pos = [_bin_index(pts[:, k], e) for k, e in enumerate(edges)]
    if D == 1:  # (one dimension: its bins are the flat index)
        ok = pos[0] >= 0
        flat_index = pos[0]
    else:
        ok = np.full(pts.shape[0], D > 0)  # (no dimensions: torch counts nothing)
        for p in pos:
            ok &= p >= 0
        flat_index = np.zeros(pts.shape[0], dtype=np.int64)
        for p, n in zip(pos, shape):
            flat_index = flat_index * n + np.where(ok, p, 0)
    wv = None if w is None else w.reshape(-1)[ok].astype(np.float64)
    total = int(np.prod(shape)) if shape else 1
    hist = np.bincount(flat_index[ok], weights=wv, minlength=total)[:total].reshape(shape)
    if density:
        s = hist.sum()
        widths = np.ones(shape)
        for k, e in enumerate(edges):
            view = [1] * D
            view[k] = shape[k]
            widths = widths * np.diff(e.astype(np.float64)).reshape(view)
        with np.errstate(divide="ignore", invalid="ignore"):  # an empty histogram: NaN
            hist = hist / (s * widths)
    hist_t = _host_result(hist.astype(dtype), x._dtype)
    edge_ts = [_host_result(e, x._dtype) for e in edges]
    return histogramdd_result(hist_t, edge_ts)


def _flat_range(range: Any, D: int) -> Any:
    """`range` as a list of 2 * D floats for the kernel path, None for no range, or False
    where the host code must take it (other types or lengths: it converts or rejects)."""
    if range is None:
        return None
    if type(range) not in (list, tuple) or len(range) != 2 * D:
        return False
    for r in range:
        if type(r) is not float and type(r) is not int:
            return False
    try:
        return [float(r) for r in range]
    except OverflowError:
        return False


def histogram(
    input: Tensor,
    bins: Any = 100,
    *,
    range: Any = None,
    weight: Any = None,
    density: bool = False,
    out: Any = None,
) -> Any:
    """A histogram of all of `input`'s values: `(hist, bin_edges)`.

    Args: `bins` an int (equal bins over `range`, default the data's min and max) or a
    1-D tensor of edges (non-decreasing; others are binned as torch bins them, by its
    binary search); `weight` a tensor like `input`; `density`
    normalizes so the histogram integrates to 1. The last bin includes its right edge.
    """
    x: Any = _float_only("histogram", _tensor("histogram", input))
    if isinstance(bins, Tensor) and bins._dtype is not x._dtype:
        raise RuntimeError(
            f"histogram(): input tensor and bins tensors should have the same "
            f"dtype, but got input {x._dtype.name} and bins {bins._dtype.name}"
        )
    if weight is not None and tuple(_tensor("histogram", weight, "weight")._shape) != tuple(
        x._shape
    ):
        raise RuntimeError(
            f"histogram(): weight should have the same shape as input "
            f"({list(x._shape)}), got {list(weight._shape)}"
        )
    if _plain_input(x) and (weight is None or weight._dtype is x._dtype):
        flat = _flat_range(range, 1)
        if flat is not False:
            got = _histogram_kernel(x, False, [bins], flat, weight, bool(density))
            if got is not None:
                return _results(histogram_result, out, "histogram", got[0], got[1][0])
    h, edges = histogramdd(
        x.reshape(-1, 1),
        [bins],
        range=range,
        weight=None if weight is None else weight.reshape(-1),
        density=density,
    )
    return _results(histogram_result, out, "histogram", h, edges[0])


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max occurs in a 1-D non-negative integer tensor (at least
    `minlength` bins); with `weights`, their sums per value (float32 weights give
    float32, other weights float64, as PyTorch; an empty input gives int64 zeros)."""
    x: Any = input
    if (  # (the common case first: counts of a plain CPU tensor)
        weights is None
        and x.__class__ is Tensor
        and x._dtype in BINCOUNT_INTS
        and len(x._shape) == 1
        and type(minlength) is int
        and minlength >= 0
        and x._ptr is not None
        and not _trace_tls.stack
    ):
        return _bincount_kernel(x, None, minlength)
    x = _tensor("bincount", input)
    if x._dtype.is_floating_point or x._dtype.is_complex or x._dtype is dt.bool_:
        raise RuntimeError(f"bincount(): only integral input is supported, got {x._dtype.name}")
    if x.ndim != 1:
        raise RuntimeError(f"bincount(): input should be 1-d, got shape {list(x.shape)}")
    if minlength < 0:
        raise RuntimeError(f"bincount(): minlength should be >= 0, got {minlength}")
    if weights is not None and (
        _tensor("bincount", weights, "weights").ndim != 1 or weights._shape != x._shape
    ):
        raise RuntimeError(
            f"bincount(): weights should be 1-d and have the same length as "
            f"input (input {list(x.shape)}, weights {list(weights.shape)})"
        )
    if (
        x.__class__ is Tensor
        and x._dtype in BINCOUNT_INTS
        and x._ptr is not None
        and type(minlength) is int
        and not _trace_tls.stack
        and (
            weights is None
            or (
                weights.__class__ is Tensor
                and weights._ptr is not None
                and not weights._dtype.is_complex
            )
        )
    ):
        return _bincount_kernel(x, weights, minlength)
    a, w = _host_values("bincount", x, weights)
    if a.size and a.min() < 0:
        raise RuntimeError("bincount(): input should contain only non-negative values")
    if w is None or not a.size:  # (torch: an empty input counts in int64, weights or not)
        return host_tensor(np.bincount(a, minlength=minlength), dt.int64)
    res = np.bincount(a, weights=w, minlength=minlength)
    kind = dt.float32 if weights._dtype is dt.float32 else dt.float64
    return _host_result(res, kind)


def _bincount_kernel(x: Any, weights: Any, minlength: int) -> Any:
    """`bincount` of a plain CPU integer tensor by a `BincountKernel`: one call finds the
    value range and, when the result fits this thread's scratch, counts there (copied
    into the output); otherwise a second call counts into the output it sizes."""
    n = x._shape[0]
    if not n:  # (torch: an empty input counts in int64, weights or not)
        out = _new_tensor((minlength,), dt.int64)
        launch.call(
            bincount_kernel(x._dtype, None), [1, 0, 0, 0, 0, 0, out._ptr, minlength, 0, 0, 0, 0]
        )
        return out
    wd = None if weights is None else weights._dtype
    kind = dt.int64 if wd is None else dt.float32 if wd is dt.float32 else dt.float64
    kernel = bincount_kernel(x._dtype, wd)
    scratch, address = histogram_scratch(0)
    cap = scratch.size
    args = [2, n, x._ptr, x._strides[0], 0, 0, address, cap, 0, 0, 0, minlength]
    if weights is not None:
        args[4] = weights._ptr
        args[5] = weights._strides[0]
    launch.call(kernel, args)
    buf = launch.block()[0]
    if buf[B_MIN] < 0:
        raise RuntimeError("bincount(): input should contain only non-negative values")
    size = buf[B_MAX] + 1
    if size < minlength:
        size = minlength
    out = _new_tensor((size,), kind)
    if size <= cap:  # (counted in the scratch)
        _memmove(out._ptr, address, size * kind.itemsize)
        return out
    args[0] = 1
    args[6] = out._ptr
    args[7] = size
    if wd is dt.float32:
        scratch, args[8] = histogram_scratch(size)  # (`scratch` held through the call)
    launch.call(kernel, args)
    return out


# --------------------------------------------------------------------------------------
# Integration and differences (compositions: they compile and differentiate)
# --------------------------------------------------------------------------------------


def _spacing_along(x: Tensor, d: int, y: Tensor) -> Tensor:
    """x's differences along `d`, shaped to broadcast against y's slices (x 1-D or like y)."""
    if x.ndim == 1:
        n = x._shape[0]
        if n != y._shape[d]:
            raise RuntimeError(
                f"trapezoid: There must be one `x` value for each sample point "
                f"(x has {n}, y has {y._shape[d]} along dim {d})"
            )
        dx = E.sub(x[1:], x[:-1])
        shape = [1] * y.ndim
        shape[d] = n - 1
        return dx.reshape(shape)

    dd = normalize_axis(d - y.ndim, x.ndim, "trapezoid")
    return E.sub(slice_dim(x, dd, 1, x._shape[dd]), slice_dim(x, dd, 0, x._shape[dd] - 1))


@composite_function
def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along `dim`: with sample points `x` (1-D, or broadcastable to
    `y`) or a constant spacing `dx` (default 1)."""
    y = _tensor("trapezoid", y, "y")
    if x is not None and dx is not None:
        raise TypeError("trapezoid(): received both x and dx; pass only one")
    d = normalize_axis(dim, y.ndim, "trapezoid")
    if y.ndim == 0:
        raise IndexError("trapezoid: Dimension out of range (y has no dimensions)")
    n = y._shape[d]
    if isinstance(x, Tensor):
        if n == 0:
            return sum_(E.mul(y, 0), d)
        spacing = _spacing_along(x, d, y)
        pair = E.add(slice_dim(y, d, 1, n), slice_dim(y, d, 0, n - 1))
        return E.div(sum_(E.mul(spacing, pair), d), 2)
    step = 1 if dx is None and x is None else (dx if dx is not None else x)
    if n == 0:
        return sum_(E.mul(y, 0), d)
    ends = E.add(select(y, d, 0), select(y, d, n - 1))
    return E.mul(E.sub(sum_(y, d), E.mul(ends, 0.5)), step)


@composite_function
def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """Alias of `trapezoid` (`trapz(y, x, dim=)` or `trapz(y, dx=, dim=)`)."""
    return trapezoid(y, x, dx=dx, dim=dim)


@composite_function
def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along `dim` (one element shorter than `y`)."""
    y = _tensor("cumulative_trapezoid", y, "y")
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid(): received both x and dx; pass only one")
    if y.ndim == 0:
        raise IndexError("cumulative_trapezoid: Dimension out of range (y has no dimensions)")
    d = normalize_axis(dim, y.ndim, "cumulative_trapezoid")
    n = y._shape[d]
    if n == 0:
        return E.mul(y, 0)
    pair = E.add(slice_dim(y, d, 1, n), slice_dim(y, d, 0, n - 1))
    if isinstance(x, Tensor):
        return cumsum(E.div(E.mul(_spacing_along(x, d, y), pair), 2), d)
    step = 1 if dx is None and x is None else (dx if dx is not None else x)
    return cumsum(E.mul(pair, step / 2), d)


@composite_function
def diff(
    input: Tensor,
    n: int = 1,
    dim: int = -1,
    prepend: Tensor | None = None,
    append: Tensor | None = None,
) -> Tensor:
    """The n-th forward difference along `dim` (`out[i] = x[i+1] - x[i]`; bool: xor),
    after concatenating `prepend` and `append` along `dim`; `n=0` returns a copy of the
    input, without `prepend`/`append` (which are still checked), as torch."""
    x = _tensor("diff", input)
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if not isinstance(n, int) or n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = normalize_axis(dim, x.ndim, "diff")
    parts = []
    for extra, which in ((prepend, "prepend"), (x, None), (append, "append")):
        if extra is None:
            continue
        if which is not None:
            _tensor("diff", extra, which)
            if extra.ndim == 0:
                shape = list(x._shape)
                shape[d] = 1
                extra = extra.expand(tuple(shape))
            if extra.ndim != x.ndim:
                raise RuntimeError(
                    f"diff expects prepend or append to be the same dimension "
                    f"as input (input {x.ndim}-d, {which} {extra.ndim}-d)"
                )
        parts.append(extra)
    if n == 0:  # torch: the input itself (checked, not extended)
        return x.clone()
    if len(parts) > 1:
        x = cat(parts, d)
    for _ in range(n):
        m = x._shape[d]
        if m == 0:
            break
        hi, lo = slice_dim(x, d, 1, m), slice_dim(x, d, 0, m - 1)
        x = E.logical_xor(hi, lo) if x._dtype is dt.bool_ else E.sub(hi, lo)
    return x


def gradient(
    input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1
) -> tuple[Tensor, ...]:
    """Estimated derivatives of `input` along each of `dim` (default all) by central
    differences inside and one-sided differences of order `edge_order` (1 or 2) at the
    ends.

    Args: `spacing` a number, a list of numbers (one per dim), or a list of 1-D
    coordinate tensors (one per dim, non-uniform spacing). Returns one tensor per dim.
    """
    x = _tensor("gradient", input)
    if edge_order not in (1, 2):
        raise RuntimeError(
            f"torch.gradient only supports edge_order=1 and edge_order=2 (got {edge_order})"
        )
    if dim is None:
        dims = list(range(x.ndim))
    else:
        raw = [dim] if isinstance(dim, int) else list(dim)
        dims = [normalize_axis(d, x.ndim, "gradient") for d in raw]
    if spacing is None:  # PyTorch's "unspecified": unit spacing
        spacing = 1
    if isinstance(spacing, (list, tuple)):
        sp = list(spacing)
        if len(sp) != len(dims):
            raise RuntimeError(
                f"torch.gradient expected spacing to be unspecified, a scalar "
                f"or it's spacing and dim arguments to have the same length, "
                f"but got a spacing argument of length {len(sp)} and a dim "
                f"argument of length {len(dims)}."
            )
    elif isinstance(spacing, Tensor) and spacing.ndim > 0:
        sp = [spacing] if len(dims) == 1 else None
        if sp is None:
            raise RuntimeError(
                "torch.gradient expected spacing to be a list with one entry per dimension"
            )
    else:
        sp = [spacing.item() if isinstance(spacing, Tensor) else spacing] * len(dims)
    if not x._dtype.is_floating_point and not x._dtype.is_complex:
        x = x.to(dt.get_default_dtype())
    for d in dims:
        if x._shape[d] < edge_order + 1:
            raise RuntimeError(
                "torch.gradient expected each dimension size to be at least edge_order+1"
            )
    out = []
    for d, h in zip(dims, sp):
        n = x._shape[d]

        def s(a: int, b: int) -> Tensor:
            return slice_dim(x, d, a, b)

        if isinstance(h, Tensor) and h.ndim > 0:
            if h.ndim != 1 or h._shape[0] != n:
                raise RuntimeError(
                    f"torch.gradient expected each tensor to be on the same "
                    f"size as the dimension it describes (size {n} along "
                    f"dim {d}, spacing {list(h.shape)})"
                )
            shape = [1] * x.ndim
            shape[d] = n - 1
            dxs = E.sub(h[1:], h[:-1]).reshape(shape).to(x._dtype)
            a = slice_dim(dxs, d, 0, n - 2)  # x[i] - x[i-1]
            b = slice_dim(dxs, d, 1, n - 1)  # x[i+1] - x[i]
            interior = E.div(
                E.add(
                    E.sub(E.mul(E.mul(a, a), s(2, n)), E.mul(E.mul(b, b), s(0, n - 2))),
                    E.mul(E.sub(E.mul(b, b), E.mul(a, a)), s(1, n - 1)),
                ),
                E.mul(E.mul(a, b), E.add(a, b)),
            )
            if edge_order == 1:
                first = E.div(E.sub(s(1, 2), s(0, 1)), slice_dim(dxs, d, 0, 1))
                last = E.div(E.sub(s(n - 1, n), s(n - 2, n - 1)), slice_dim(dxs, d, n - 2, n - 1))
            else:
                a0, b0 = slice_dim(dxs, d, 0, 1), slice_dim(dxs, d, 1, 2)
                c0 = E.add(a0, b0)
                first = E.add(
                    E.add(
                        E.mul(s(0, 1), E.neg(E.div(E.add(E.mul(a0, 2), b0), E.mul(a0, c0)))),
                        E.mul(s(1, 2), E.div(c0, E.mul(a0, b0))),
                    ),
                    E.mul(s(2, 3), E.neg(E.div(a0, E.mul(b0, c0)))),
                )
                a1, b1 = slice_dim(dxs, d, n - 3, n - 2), slice_dim(dxs, d, n - 2, n - 1)
                c1 = E.add(a1, b1)
                last = E.add(
                    E.add(
                        E.mul(s(n - 3, n - 2), E.div(b1, E.mul(a1, c1))),
                        E.mul(s(n - 2, n - 1), E.neg(E.div(c1, E.mul(a1, b1)))),
                    ),
                    E.mul(s(n - 1, n), E.div(E.add(E.mul(b1, 2), a1), E.mul(b1, c1))),
                )
        else:
            hv = float(h) if not isinstance(h, Tensor) else h.item()
            interior = E.div(E.sub(s(2, n), s(0, n - 2)), 2 * hv)
            if edge_order == 1:
                first = E.div(E.sub(s(1, 2), s(0, 1)), hv)
                last = E.div(E.sub(s(n - 1, n), s(n - 2, n - 1)), hv)
            else:
                first = E.div(
                    E.add(E.add(E.mul(s(0, 1), -1.5), E.mul(s(1, 2), 2.0)), E.mul(s(2, 3), -0.5)),
                    hv,
                )
                last = E.div(
                    E.add(
                        E.add(E.mul(s(n - 3, n - 2), 0.5), E.mul(s(n - 2, n - 1), -2.0)),
                        E.mul(s(n - 1, n), 1.5),
                    ),
                    hv,
                )
        out.append(cat([first, interior, last], d))
    return tuple(out)


# --------------------------------------------------------------------------------------
# cov, corrcoef, renorm
# --------------------------------------------------------------------------------------


def cov(
    input: Tensor,
    *,
    correction: int = 1,
    fweights: Tensor | None = None,
    aweights: Tensor | None = None,
) -> Tensor:
    """The covariance matrix of the variables in the rows of `input` (a 1-D input is one
    variable), observations in its columns.

    Args: `correction` subtracted from the (weighted) number of observations; `fweights`
    integer frequency weights and `aweights` observation weights (1-D, one per column).
    """
    x = _tensor("cov", input)
    if x.ndim > 2:
        raise RuntimeError(
            f"cov(): expected input to have two or fewer dimensions but got "
            f"an input with {x.ndim} dimensions"
        )
    if x._dtype is dt.bool_:
        raise RuntimeError("cov(): bool input is not supported")
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        x = x.to(dt.get_default_dtype())
    if x.ndim < 2:
        x = x.reshape(1, -1)
    nobs = x._shape[1]
    w = None
    for wt, name in ((fweights, "fweights"), (aweights, "aweights")):
        if wt is None:
            continue
        _tensor("cov", wt, name)
        if wt.ndim > 1:
            raise RuntimeError(
                f"cov(): expected {name} to have one or fewer dimensions but "
                f"got {name} with {wt.ndim} dimensions"
            )
        if wt.numel() != nobs:
            raise RuntimeError(
                f"cov(): expected {name} to have the same numel as there are "
                f"observations in the input but got {wt.numel()} != {nobs}"
            )
        if name == "fweights" and (wt._dtype.is_floating_point or wt._dtype.is_complex):
            raise RuntimeError(
                f"cov(): expected fweights to have integral dtype but got "
                f"fweights with {wt._dtype.name} dtype"
            )
        if name == "aweights" and not wt._dtype.is_floating_point:
            raise RuntimeError(
                f"cov(): expected aweights to have floating point dtype but "
                f"got aweights with {wt._dtype.name} dtype"
            )
        if getattr(wt, "_ctx", None) is None and wt.numel():
            with no_grad():
                if float(wt.detach().min().item()) < 0:
                    raise RuntimeError(f"cov(): {name} cannot be negative")
        w = wt.reshape(-1) if w is None else E.mul(w, wt.reshape(-1))
    if w is None:
        avg = mean(x, 1)
        w_sum: Any = nobs
        norm: Any = nobs - correction
    else:
        w_sum = sum_(w)
        avg = E.div(sum_(E.mul(x, w), 1), w_sum)
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = E.sub(w_sum, correction)
        else:
            norm = E.sub(
                w_sum, E.div(E.mul(sum_(E.mul(w, aweights.reshape(-1))), correction), w_sum)
            )
    if isinstance(norm, Tensor):
        norm = E.clamp(norm, min=0)
    elif norm <= 0:
        warnings.warn(
            "cov(): degrees of freedom is <= 0. Correction should be strictly less "
            "than the number of observations.",
            UserWarning,
            stacklevel=2,
        )
        norm = 0
    xm = E.sub(x, avg.unsqueeze(1))
    xw = xm if w is None else E.mul(xm, w)
    c = mm(xm, E.conj(xw.t()))
    res = E.div(c, norm)
    return res.squeeze() if res._shape == (1, 1) else res


@composite_function
def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of `input` (values clipped to
    [-1, 1]; the real and imaginary parts separately for complex inputs)."""
    x = _tensor("corrcoef", input)
    c = cov(x)
    if c.ndim == 0:
        return E.div(c, c)
    d = diag(c)
    if d._dtype.is_complex:
        d = E.real(d)
    sd = E.sqrt(d)
    c = E.div(E.div(c, sd.unsqueeze(1)), sd.unsqueeze(0))
    if c._dtype.is_complex:
        return E.complex(E.clamp(E.real(c), -1, 1), E.clamp(E.imag(c), -1, 1))
    return E.clamp(c, -1, 1)


@composite_function
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice of `input` along `dim` whose p-norm exceeds `maxnorm` scaled down to
    norm `maxnorm` (PyTorch's factor `maxnorm / (norm + 1e-7)`); complex inputs by the
    norm of their magnitudes. Eagerly a composite: compiled per signature, so the norm
    and the scaling run as one graph."""
    x = _tensor("renorm", input)
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        raise RuntimeError(f"renorm(): expected a floating point input, got {x._dtype.name}")
    if p <= 0:
        raise RuntimeError(f"renorm(): non-positive-norm not supported (p={p})")
    if maxnorm < 0:
        raise RuntimeError(f"renorm(): expected maxnorm to be >= 0 but got {maxnorm}")
    if x.ndim <= 1:
        raise RuntimeError(f"renorm(): input needs at least 2 dimensions, got {x.ndim} dimensions")
    d = normalize_axis(dim, x.ndim, "renorm")
    others = tuple(i for i in range(x.ndim) if i != d)
    nrm = norm_(x, p, others, keepdim=True)
    factor = E.where(E.gt(nrm, maxnorm), E.div(maxnorm, E.add(nrm, 1e-7)), 1.0)
    return E.mul(x, factor.to(x._dtype.to_real()))  # (complex: a real factor)


def _inplace_methods() -> dict[str, Callable[..., Any]]:
    return {
        name + "_": names_op(name + "_")(_rewrite_inplace(name, fn))
        for name, fn in (("renorm", renorm), ("cumsum", _cumsum_), ("cumprod", _cumprod_))
    }


__all__ += [
    "cummax",
    "cummin",
    "logcumsumexp",
    "kthvalue",
    "median",
    "nanmedian",
    "mode",
    "quantile",
    "nanquantile",
    "nansum",
    "nanmean",
    "aminmax",
    "histc",
    "histogram",
    "histogramdd",
    "bincount",
    "trapezoid",
    "trapz",
    "cumulative_trapezoid",
    "diff",
    "gradient",
    "cov",
    "corrcoef",
    "renorm",
]

METHODS.update(
    {
        name: globals()[name]
        for name in (
            "cummax",
            "cummin",
            "logcumsumexp",
            "kthvalue",
            "median",
            "nanmedian",
            "mode",
            "quantile",
            "nanquantile",
            "nansum",
            "nanmean",
            "aminmax",
            "histc",
            "histogram",
            "bincount",
            "diff",
            "cov",
            "corrcoef",
            "renorm",
        )
    }
)
METHODS.update(_inplace_methods())


def _served_on_devices() -> None:
    serve_on_devices(globals())


_served_on_devices()
