"""The index family: take, put, index_add/copy/fill/reduce, masked_select/scatter, scatter_reduce, unique, searchsorted.

Most functions here are compositions of the indexing primitives (`gather`, `scatter_add`,
`index_put` on row-major offsets) and `where`, so they get autograd, forward mode and
`lg.compile` tracing from those. The exceptions:

- results whose size depends on the data (`masked_select`, `masked_scatter`, `unique`,
  `unique_consecutive`, a tensor of repeats) are graph breaks inside `lg.compile`;
- `scatter_reduce`/`index_reduce` with `prod`, `amax`, `amin` run eagerly on the host
  (NumPy's `ufunc.at`) with a backward node written with llgrad functions; in a trace
  they are composed densely (a comparison of every index with every position along the
  dimension), or break the graph when that would exceed 2**24 elements;
- `searchsorted`, `bucketize`, `isin` run eagerly as a binary-search kernel or on the
  host (sorting) and compose from comparisons and sums when traced.

The plain eager case (plain tensors, nothing to record: `host_plain`) of `index_put` with
one index, `masked_scatter`, `searchsorted`/`bucketize`, `unravel_index`, and `unique` /
`unique_consecutive` along a dimension runs generated kernels (`eager.selection`) that
write straight into the new tensors; what they decline (layouts, dtypes, an index out of
range) takes the general path, which gives PyTorch's result or error.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..tape import forward as forward_ad
from ..dispatch.apply import apply, composite_function, interpreters, needs_grad
from ..tape.node import Node, SavedTensor, edge, node_class
from ..device import check_device as _check_device
from ..dispatch.grad_mode import no_grad
from ..eager import indexing, views, indexing as eager_indexing, selection as _eager_selection
from ..ir import dtypes as dt
from ..ir.types import broadcast_shapes, normalize_axis
from ..tensor import Tensor
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak, tracing
from . import creation as _creation, elementwise as E
from ._errors import names_op
from ._host import host_broadcast, host_empty, host_plain, host_tensor, host_values, host_view
from .creation import full, full_like, iota, ones, ones_like, tensor, zeros, zeros_like
from .indexing import (
    _check_index_range,
    _check_index_shape,
    _no_negative,
    _scatter_offsets,
    _scatter_source,
    _wrap_negative,
    gather_linear,
    getitem,
    index_put_linear,
    scatter,
    scatter_add,
    scatter_add_linear,
    take_along_dim,
)
from .inplace import _rewrite_inplace, index_put as _inplace_index_put
from .misc import slice_all
from .reduction import amax, amin, prod, any as any_, sum as sum_
from .shape import broadcast_tensors, cat, expand, pad_dims, shape_arg, unsqueeze

__all__: list[str] = [
    "take",
    "put",
    "index_add",
    "index_copy",
    "index_fill",
    "index_put",
    "index_put_",
    "index_reduce",
    "masked_select",
    "masked_scatter",
    "scatter_reduce",
    "unique",
    "unique_consecutive",
    "searchsorted",
    "bucketize",
    "isin",
    "nonzero_static",
    "tril_indices",
    "triu_indices",
    "unravel_index",
]

_DENSE_LIMIT = 1 << 24  # traced prod/amax/amin: the largest comparison tensor


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _traced(*ts: Any) -> bool:
    return any(getattr(t, "_ctx", None) is not None for t in ts)


def _graph_break(what: str) -> None:
    raise GraphBreak(
        what, user_location(), advice="its result depends on tensor values; this part runs eagerly"
    )


def _host(t: Tensor) -> np.ndarray:
    """The values of a concrete tensor as a NumPy array (bfloat16 as float32)."""
    if t.__class__ is Tensor:
        return host_values(t)

    with no_grad():
        if t._dtype is dt.bfloat16:
            t = t.to(dt.float32)
        return np.asarray(t.detach()._values())


def _from_host(a: np.ndarray, dtype: dt.DType) -> Tensor:
    if a.dtype == dtype.np and dtype is not dt.bfloat16:
        return host_tensor(a, dtype)

    return tensor(np.array(a, order="C"), dtype=dtype)


def _host_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast of shapes `a` and `b`, or None when they do not broadcast (the
    general path raises PyTorch's error)."""
    try:
        return broadcast_shapes(a, b)
    except ValueError:
        return None


def _index_tensor(op: str, index: Any, names: str = "int64") -> Tensor:
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}(): index must be a Tensor, got {type(index).__name__}")
    if index._dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{op}(): Expected dtype {names} for index, got {index._dtype.name}")
    return index.to(dt.int64) if index._dtype is dt.int32 else index


def _vector_index(op: str, index: Any) -> Tensor:
    index = _index_tensor(op, index, "int32 or int64")
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, got shape {list(index.shape)}")
    return index.reshape(-1)


def _check_range(op: str, index: Tensor, d: int, size: int, error: type, negative: bool) -> Tensor:
    """`index` checked against [0, size) (or [-size, size) with `negative`, which then
    wraps); raises `error` naming the value, dim and size when values are known."""
    if negative:
        index = _wrap_negative(index, size)
    _check_index_range(op, index, d, size, error)
    return index


def _along(index: Tensor, d: int, shape: tuple[int, ...]) -> Tensor:
    """A vector index placed along dimension `d` and broadcast to `shape` (a view)."""
    view = [1] * len(shape)
    view[d] = index._shape[0]
    return expand(index.reshape(view), shape)


def _dim(op: str, dim: int, ndim: int) -> int:
    return normalize_axis(dim, max(ndim, 1), op)


def _same_dtype(op: str, input: Tensor, source: Tensor, what: str = "source") -> None:
    if not isinstance(source, Tensor):
        raise TypeError(f"{op}(): {what} must be a Tensor, got {type(source).__name__}")
    if source._dtype is not input._dtype:
        raise RuntimeError(
            f"{op}(): self ({input._dtype.name}) and {what} "
            f"({source._dtype.name}) must have the same scalar type"
        )


def _check_source(op: str, input: Tensor, d: int, index: Tensor, source: Tensor) -> Tensor:
    """index_add/copy/reduce: `source` is `input`'s shape with `len(index)` at `d`."""
    _same_dtype(op, input, source)
    if input.ndim == 0:
        if source.numel() != 1 or index.numel() != 1:
            raise RuntimeError(
                f"{op}(): a 0-d self takes one index and one source value "
                f"(index {list(index.shape)}, source {list(source.shape)})"
            )
        return source.reshape(1)
    if source.ndim == 0 and input.ndim == 1:
        source = source.reshape(1)
    if source.ndim != input.ndim:
        raise IndexError(
            f"{op}(): source {list(source.shape)} and self "
            f"{list(input.shape)} must have the same number of dimensions"
        )
    if source._shape[d] != index.numel():
        raise RuntimeError(
            f"{op}(): Number of indices ({index.numel()}) should be equal to "
            f"source.size(dim): ({source._shape[d]}), for dim: {d}"
        )
    for k in range(input.ndim):
        if k != d and source._shape[k] != input._shape[k]:
            raise RuntimeError(
                f"{op}(): source {list(source.shape)} must match self "
                f"{list(input.shape)} in every dimension but {d}"
            )
    return source


# --------------------------------------------------------------------------------------
# take / put
# --------------------------------------------------------------------------------------


def _flat_positions(op: str, input: Tensor, index: Tensor) -> Tensor:
    """`index` into the row-major elements of `input`, negatives counted from the end,
    checked (IndexError naming the value) where values are known."""
    index = _index_tensor(op, index)
    n = input.numel()
    index = _wrap_negative(index, n)
    from ..transforms.batching import bottom  # circle: transforms.batching -> functions -> here

    values = bottom(index)
    if values.numel() and not tracing() and not _traced(values):
        with no_grad():
            lo, hi = int(amin(values).item()), int(amax(values).item())
        if lo < 0 or hi >= n:
            raise IndexError(
                f"{op}(): out of range: tried to access index "
                f"{lo - n if lo < 0 else hi} on a tensor of {n} elements"
            )
    return index


@names_op("take")
@composite_function
def take(input: Tensor, index: Tensor) -> Tensor:
    """`input` read as 1-D at `index` (result shaped like `index`; negatives count from
    the end)."""
    pos = _flat_positions("take", input, index)

    return getitem(input.reshape(-1), (_no_negative(pos, input.numel()),), "TakeBackward0")


@names_op("put")
@composite_function
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of `input` with `source`'s values written (or added, `accumulate`) at the
    row-major positions `index` (negatives count from the end)."""
    _same_dtype("put", input, source)
    pos = _flat_positions("put", input, index)
    if source.numel() != pos.numel():
        raise IndexError(
            f"put(): Expected source and index to have the same number of "
            f"elements, but got source.numel() = {source.numel()}, "
            f"index.numel() = {pos.numel()}"
        )
    flat = input.reshape(-1)
    pos, src = pos.reshape(-1), source.reshape(-1)
    out = scatter_add_linear(flat, pos, src) if accumulate else index_put_linear(flat, pos, src)
    return out.reshape(input._shape)


# --------------------------------------------------------------------------------------
# index_add / index_copy / index_fill / index_put
# --------------------------------------------------------------------------------------


@names_op("index_add")
@composite_function
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
    """A copy of `input` with `alpha * source` added at `index` along `dim`
    (`out[..., index[i], ...] += alpha * source[..., i, ...]`, duplicates accumulate)."""
    op = "index_add"
    d = _dim(op, dim, input.ndim)
    index = _vector_index(op, index)
    source = _check_source(op, input, d, index, source)
    size = input._shape[d] if input.ndim else 1
    index = _check_range(op, index, d, size, RuntimeError, False)
    if alpha != 1:
        source = E.mul(source, alpha)
        if source._dtype is not input._dtype:
            source = source.to(input._dtype)
    if input.ndim == 0:
        return scatter_add(input.reshape(1), 0, index, source).reshape(())
    return scatter_add(input, d, _along(index, d, source._shape), source)


@names_op("index_copy")
@composite_function
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of `input` with `source[..., i, ...]` written at `index[i]` along `dim`
    (with duplicate indices one write wins, as in torch)."""
    op = "index_copy"
    d = _dim(op, dim, input.ndim)
    index = _vector_index(op, index)
    source = _check_source(op, input, d, index, source)
    size = input._shape[d] if input.ndim else 1
    index = _check_range(op, index, d, size, IndexError, False)
    if input.ndim == 0:
        return scatter(input.reshape(1), 0, index, source).reshape(())
    return scatter(input, d, _along(index, d, source._shape), source)


def _positions_mask(size: int, index: Tensor) -> Tensor:
    """A bool vector of `size`, True at `index` (already within [0, size))."""
    return index_put_linear(zeros(size, dtype=dt.bool_), index, ones(index._shape, dtype=dt.bool_))


@names_op("index_fill")
@composite_function
def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """A copy of `input` with every element at `index` along `dim` set to `value` (a
    number or a 0-d tensor, differentiable); negative indices count from the end."""
    op = "index_fill"
    d = _dim(op, dim, input.ndim)
    index = _vector_index(op, index)
    size = input._shape[d] if input.ndim else 1
    index = _check_range(op, index, d, size, IndexError, True)
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                f"index_fill(): only supports a 0-dimensional value tensor, "
                f"but got tensor with {value.ndim} dimension(s)."
            )
        value = value.to(input._dtype) if value._dtype is not input._dtype else value
    else:
        value = full((), value, dtype=input._dtype)
    mask = _positions_mask(size, index)
    if input.ndim:
        shape = [1] * input.ndim
        shape[d] = size
        mask = mask.reshape(shape)
    else:
        mask = mask.reshape(())
    return E.elementwise("where", mask, value, input, name="IndexFillBackward0")


def _normalize_indices(op: str, input: Tensor, indices: Any) -> tuple[Any, ...]:
    if isinstance(indices, Tensor):
        indices = (indices,)
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}(): indices must be a tuple of tensors, got {type(indices).__name__}")
    if len(indices) > max(input.ndim, 1):
        raise IndexError(
            f"{op}(): too many indices for tensor of dimension {input.ndim} (got {len(indices)})"
        )
    out = []
    for i in indices:
        if i is None:
            out.append(slice(None))
        elif isinstance(i, Tensor):
            if i._dtype not in (dt.int64, dt.int32, dt.bool_, dt.uint8):
                raise IndexError(
                    f"{op}(): tensors used as indices must be long, int, byte "
                    f"or bool tensors, got {i._dtype.name}"
                )
            out.append(i.to(dt.bool_) if i._dtype is dt.uint8 else i)
        else:
            raise TypeError(f"{op}(): indices must be tensors or None, got {type(i).__name__}")
    return tuple(out)


def _index_put_host(
    input: Tensor, index: tuple[Any, ...], values: Tensor, accumulate: bool
) -> Tensor | None:
    """index_put's plain eager case on the host: every index a tensor (int64/int32, or a
    bool mask of at least one dimension), where NumPy's advanced indexing means what
    PyTorch's does; None when it does not apply or NumPy refuses the index or the values
    (the general path then gives PyTorch's result or error)."""
    dtype = input._dtype
    if accumulate and (dtype is dt.bfloat16 or dtype is dt.bool_):
        return None
    ix = []
    for i in index:
        if i.__class__ is not Tensor or (i._dtype is dt.bool_ and not i._shape):
            return None
        ix.append(host_view(i))
    res, out = host_empty(input._shape, dtype)
    out[...] = host_view(input)
    try:
        if accumulate:
            np.add.at(out, tuple(ix), host_view(values))
        else:
            out[tuple(ix)] = host_view(values)
    except (IndexError, ValueError):
        return None
    return res


@names_op("index_put")
def index_put(
    input: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False
) -> Tensor:
    """A copy of `input` with `input[indices] = values` (or `+= values`, duplicates adding
    up, with `accumulate`); `values` broadcasts to the indexed shape. Compiles (the
    positions are an index of `input`'s row-major offsets)."""
    op = "index_put"
    index = _normalize_indices(op, input, indices)
    if isinstance(values, Tensor):
        if values._dtype is not input._dtype:
            raise RuntimeError(
                f"index_put(): Index put requires the source and destination "
                f"dtypes match, got {input._dtype.name} for the destination "
                f"and {values._dtype.name} for the source."
            )
    else:
        values = full((), values, dtype=input._dtype)
    if host_plain(input, values, *index):
        if len(index) == 1 and index[0].__class__ is Tensor:
            # one mask or integer index: a kernel writes the rows (None: not a case it
            # serves, or an index out of range, which the general path reports)
            out = _eager_selection.row_put(input, index[0], values, accumulate)
            if out is not None:
                return out
        out = _index_put_host(input, index, values, accumulate)
        if out is not None:
            return out

    positions = getitem(iota(max(input.numel(), 0), dt.int64).reshape(input._shape), index)
    if values._shape != positions._shape:
        while values.ndim > positions.ndim and values._shape[0] == 1:
            values = values.reshape(values._shape[1:])
        values = expand(values, positions._shape)
    flat = input.reshape(-1)
    out = (
        scatter_add_linear(flat, positions, values)
        if accumulate
        else index_put_linear(flat, positions, values)
    )
    return out.reshape(input._shape)


# --------------------------------------------------------------------------------------
# scatter_reduce / index_reduce
# --------------------------------------------------------------------------------------

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce: str, dtype: dt.DType) -> Any:
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype is dt.bool_:
        return reduce == "amin"
    if dtype.is_floating_point:
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype.np)
    return info.min if reduce == "amax" else info.max


class _ScatterReduceNode(Node):
    """Backward of scatter_reduce with prod/amax/amin (written with llgrad functions)."""

    __slots__ = ("saved", "reduce", "include_self", "offsets", "shape", "wants")

    def __init__(
        self,
        input: Tensor,
        src: Tensor,
        out: Tensor,
        offsets: Tensor,
        reduce: str,
        include_self: bool,
    ):
        super().__init__((edge(input), edge(src)))
        self.saved = (SavedTensor(input), SavedTensor(src), SavedTensor(out, True))
        self.reduce = reduce
        self.include_self = include_self
        self.offsets = offsets
        self.shape = input._shape

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        x, s, r = (sv.unpack(self, type(self).__name__, i) for i, sv in enumerate(self.saved))
        return _reduce_backward(
            grads[0], x, s, r.detach(), self.offsets, self.reduce, self.include_self
        )


def _reduce_backward(
    g: Tensor, x: Tensor, s: Tensor, r: Tensor, o: Tensor, reduce: str, include_self: bool
) -> tuple[Tensor, Tensor]:
    """Gradients of `r = scatter_reduce(x, offsets o, s)` for prod/amax/amin (flat)."""
    shape = x._shape
    xf, gf, rf = x.reshape(-1), g.reshape(-1), r.reshape(-1)

    ones_s = ones_like(s)
    hits = scatter_add_linear(zeros(xf._shape, dtype=s._dtype), o, ones_s)
    untouched = E.eq(hits, 0)
    self_in = untouched if not include_self else E.logical_or(untouched, E.eq(hits, hits))
    if reduce in ("amax", "amin"):
        r_at = gather_linear(rf, o)
        src_eq = E.eq(s, r_at)
        self_eq = E.logical_and(self_in, E.logical_or(untouched, E.eq(xf, rf)))
        count = E.add(
            scatter_add_linear(zeros(xf._shape, dtype=s._dtype), o, src_eq.to(s._dtype)),
            self_eq.to(s._dtype),
        )
        share = E.div(gf, E.where(E.eq(count, 0), 1, count))
        gx = E.where(self_eq, share, 0.0)
        gs = E.where(src_eq, gather_linear(share, o), 0.0)
        return gx.reshape(shape), gs
    # prod: each factor's gradient is the product of the others
    zero_s = E.eq(s, 0)
    zero_x = E.logical_and(E.logical_and(self_in, E.logical_not(untouched)), E.eq(xf, 0))
    zeros_at = E.add(
        scatter_add_linear(zeros(xf._shape, dtype=s._dtype), o, zero_s.to(s._dtype)),
        zero_x.to(s._dtype),
    )
    s1 = E.where(zero_s, 1, s)
    x1 = E.where(zero_x, 1, xf)
    nz = _host_reduce(x1 if include_self else E.where(untouched, xf, 1), o, s1, "prod", True)
    z_at = gather_linear(zeros_at, o)
    r_at = gather_linear(rf, o)
    nz_at = gather_linear(nz, o)
    g_at = gather_linear(gf, o)
    others_s = E.where(
        E.eq(z_at, 0), E.div(r_at, s1), E.where(E.logical_and(E.eq(z_at, 1), zero_s), nz_at, 0.0)
    )
    gs = E.mul(g_at, others_s)
    others_x = E.where(
        E.eq(zeros_at, 0), E.div(rf, x1), E.where(E.logical_and(E.eq(zeros_at, 1), zero_x), nz, 0.0)
    )
    gx = E.where(untouched, gf, E.where(self_in, E.mul(gf, others_x), 0.0))
    return gx.reshape(shape), gs


def _host_reduce(xf: Tensor, o: Tensor, s: Tensor, reduce: str, include_self: bool) -> Tensor:
    """The flat reduction on the host (NumPy `ufunc.at`), without autograd."""
    ufunc = {"prod": np.multiply, "amax": np.fmax, "amin": np.fmin}[reduce]
    out = _host(xf).copy()
    pos = _host(o).reshape(-1)
    vals = _host(s).reshape(-1)
    if reduce in ("amax", "amin"):
        ufunc = np.maximum if reduce == "amax" else np.minimum  # NaN propagates
    if not include_self and pos.size:
        out[pos] = _identity(reduce, xf._dtype)
    if pos.size:
        ufunc.at(out, pos, vals.astype(out.dtype))
    return _from_host(out, xf._dtype)


def _reduce_eager(
    input: Tensor, offsets: Tensor, src: Tensor, reduce: str, include_self: bool
) -> Tensor:
    with no_grad():
        out = _host_reduce(
            input.detach().reshape(-1), offsets, src.detach(), reduce, include_self
        ).reshape(input._shape)
    if needs_grad((input, src)) and (input._dtype.is_floating_point or input._dtype.is_complex):
        out._requires_grad = True
        name = "ScatterReduceBackward0"
        out.grad_fn = node_class(name, _ScatterReduceNode)(
            input, src, out, offsets, reduce, include_self
        )
    if forward_ad._level[0]:
        tx, ts = forward_ad.tangent_of(input), forward_ad.tangent_of(src)
        if tx is not None or ts is not None:
            # the derivative is linear in the tangents: d out = dx * w_x + scatter(ds * w_s)
            wx, ws = _reduce_backward(
                ones_like(out),
                input.detach(),
                src.detach(),
                out.detach(),
                offsets,
                reduce,
                include_self,
            )

            t = zeros_like(out)
            if tx is not None:
                t = E.add(t, E.mul(tx, wx))
            if ts is not None:
                t = scatter_add_linear(t.reshape(-1), offsets, E.mul(ts, ws)).reshape(out._shape)
            forward_ad.set_tangent(out, t)
    return out


def _reduce_dense(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool
) -> Tensor:
    """prod/amax/amin by composition (in a trace): every index compared with every
    position along `dim`; the contributions reduce over a new axis."""
    d = dim
    n = input._shape[d]
    extent = list(index._shape)
    extent[d] = n
    region = slice_all(input, (0,) * input.ndim, tuple(extent), (1,) * input.ndim)
    ar_shape = [1] * (input.ndim + 1)
    ar_shape[d] = n
    hit = E.eq(unsqueeze(index, d), iota(n, dt.int64).reshape(ar_shape))  # I[:d]+(n,K)+I[d+1:]
    ident = full((), _identity(reduce, input._dtype), dtype=input._dtype)
    contrib = E.where(hit, unsqueeze(src, d), ident)
    if include_self:
        contrib = cat([unsqueeze(region, d + 1), contrib], d + 1)
    fn = {"prod": prod, "amax": amax, "amin": amin}[reduce]
    reduced = fn(contrib, d + 1)
    if reduced._dtype is not input._dtype:  # (a bool or int prod gives int64)
        reduced = reduced.to(input._dtype)

    touched = any_(hit, d + 1)
    merged = E.where(touched, reduced, region)
    if tuple(extent) == input._shape:
        return merged
    lows = (0,) * input.ndim
    highs = tuple(a - b for a, b in zip(input._shape, extent))
    inside = pad_dims(full(tuple(extent), True, dtype=dt.bool_), lows, highs, value=False)
    return E.where(inside, pad_dims(merged, lows, highs, value=0), input)


@names_op("scatter_reduce")
@composite_function
def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """A copy of `input` with `src[i][j]` reduced into `[index[i][j]][j]` (for dim 0) by
    `reduce` in sum, prod, mean, amax, amin; `include_self=False` leaves `input`'s own
    values out of the positions that are written. Integer `mean` rounds down, as torch.
    Gradients as torch's (amax/amin split evenly among ties)."""
    op = "scatter_reduce"
    if reduce not in _REDUCES:
        raise RuntimeError(
            f"scatter_reduce(): reduce argument must be either sum, prod, "
            f"mean, amax or amin, got {reduce}"
        )
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): src must be a Tensor, got {type(src).__name__}")
    index = _index_tensor(op, index)
    offsets = _scatter_offsets(op, input, dim, index)
    src = _scatter_source(op, input, index, src)
    flat = input.reshape(-1)
    offsets, srcf = offsets.reshape(-1), src.reshape(-1)
    if reduce in ("sum", "mean"):
        base = (
            flat
            if include_self
            else index_put_linear(flat, offsets, zeros(srcf._shape, dtype=src._dtype))
        )
        total = scatter_add_linear(base, offsets, srcf)
        if reduce == "sum":
            return total.reshape(input._shape)
        cdtype = (
            input._dtype if input._dtype.is_floating_point or input._dtype.is_complex else dt.int64
        )
        count = scatter_add_linear(
            zeros(flat._shape, dtype=cdtype), offsets, ones_like(srcf, dtype=cdtype)
        )
        if include_self:
            count = E.add(count, 1)
        count = E.where(E.eq(count, 0), 1, count)
        if input._dtype.is_floating_point or input._dtype.is_complex:
            mean = E.div(total, count)
        else:
            mean = E.floor_divide(total, count).to(input._dtype)
        return mean.reshape(input._shape)
    if input._dtype.is_complex:
        raise RuntimeError(
            f"scatter_reduce(): reduce={reduce!r} is not defined for complex "
            f"tensors ({input._dtype.name})"
        )
    if _traced(input, index, src):
        d = _dim(op, dim, input.ndim)
        if input.ndim == 0:
            return _reduce_dense(
                input.reshape(1), 0, index.reshape(1), src.reshape(1), reduce, include_self
            ).reshape(())
        _check_index_shape(op, input, index, d)
        if index.numel() * max(input._shape[d], 1) > _DENSE_LIMIT:
            _graph_break(
                f"scatter_reduce(reduce={reduce!r}) of {index.numel()} indices "
                f"into a dimension of {input._shape[d]}"
            )
        return _reduce_dense(input, d, index, src, reduce, include_self)

    if interpreters:
        raise RuntimeError(
            f"scatter_reduce(): reduce={reduce!r} has no batching rule (vmap); sum and mean do"
        )
    return _reduce_eager(input, offsets, srcf, reduce, include_self)


@names_op("index_reduce")
@composite_function
def index_reduce(
    input: Tensor,
    dim: int,
    index: Tensor,
    source: Tensor,
    reduce: str,
    *,
    include_self: bool = True,
) -> Tensor:
    """A copy of `input` with `source[..., i, ...]` reduced into `index[i]` along `dim` by
    `reduce` in prod, mean, amax, amin (`include_self` as in scatter_reduce)."""
    op = "index_reduce"
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(
            f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
            f"amin but got {reduce}."
        )
    d = _dim(op, dim, input.ndim)
    index = _vector_index(op, index)
    source = _check_source(op, input, d, index, source)
    size = input._shape[d] if input.ndim else 1
    index = _check_range(op, index, d, size, IndexError, False)
    if input.ndim == 0:
        return scatter_reduce(
            input.reshape(1), 0, index, source, reduce, include_self=include_self
        ).reshape(())
    return scatter_reduce(
        input, d, _along(index, d, source._shape), source, reduce, include_self=include_self
    )


# --------------------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------------------


def _bool_mask(op: str, mask: Any) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}(): mask must be a Tensor, got {type(mask).__name__}")
    if mask._dtype is not dt.bool_:
        raise RuntimeError(f"{op}: expected BoolTensor for mask, got {mask._dtype.name}")
    return mask


@names_op("masked_select")
def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The 1-D tensor of `input`'s elements where `mask` is True (both broadcast). Its
    size depends on the mask: a graph break inside `lg.compile`."""
    mask = _bool_mask("masked_select", mask)
    if host_plain(input, mask):
        x, m = host_view(input), host_view(mask)
        if x.shape != m.shape:
            shape = _host_broadcast(x.shape, m.shape)
            if shape is not None:
                if x.shape != shape:
                    x = host_broadcast(x, shape)
                if m.shape != shape:
                    m = host_broadcast(m, shape)
        if x.shape == m.shape:
            return host_tensor(x[m], input._dtype)
    if _traced(input, mask):
        _graph_break("masked_select() (its result size depends on the mask)")
    x, m = broadcast_tensors(input, mask)
    return getitem(x, m, "MaskedSelectBackward0")


@names_op("masked_scatter")
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of `input` (broadcast with `mask`) with the positions where `mask` is True
    filled, in row-major order, from the first elements of `source`. A graph break inside
    `lg.compile` (how many elements it takes depends on the mask)."""
    op = "masked_scatter"
    mask = _bool_mask(op, mask)
    _same_dtype(op, input, source)
    if host_plain(input, mask, source):
        # the plain eager case: one kernel walks the broadcast shape (None: the shapes
        # do not broadcast, the general path raises)
        done = _eager_selection.masked_scatter(input, mask, source)
        if done is not None:
            out, count = done
            if count > source.numel():
                raise RuntimeError(
                    f"masked_scatter(): Number of elements of source < number of ones "
                    f"in mask ({source.numel()} < {count})"
                )
            return out
    if _traced(input, mask, source):
        _graph_break("masked_scatter() (how much of source it reads depends on the mask)")
    x, m = broadcast_tensors(input, mask)
    count = eager_indexing._count_nonzero(m)
    if source.numel() < count:
        raise RuntimeError(
            f"masked_scatter(): Number of elements of source < number of ones "
            f"in mask ({source.numel()} < {count})"
        )
    values = source.reshape(-1)[:count]
    return _inplace_index_put(x, (m,), values)


# --------------------------------------------------------------------------------------
# unique / unique_consecutive
# --------------------------------------------------------------------------------------


def _run_lengths(keep: np.ndarray) -> np.ndarray:
    """The lengths of the runs that start where `keep` (bool, keep[0] True) is True."""
    starts = keep.nonzero()[0]
    counts = np.empty(starts.shape[0], np.int64)
    counts[:-1] = starts[1:] - starts[:-1]
    counts[-1:] = keep.shape[0] - starts[-1:]
    return counts


def _unique_host(
    op: str,
    input: Tensor,
    consecutive: bool,
    return_inverse: bool,
    return_counts: bool,
    dim: int | None,
) -> Any:
    if _traced(input):
        _graph_break(f"{op}() (its result size depends on data)")
    if input._dtype.is_complex and not consecutive:
        raise RuntimeError(f"{op}(): not implemented for {input._dtype.name}")
    if (dim is not None or consecutive) and input.ndim and host_plain(input):
        fast = _unique_slices(op, input, consecutive, return_inverse, return_counts, dim)
        if fast is not None:
            return fast
    a = _host(input)
    if dim is None:
        flat = a.reshape(-1)
        if consecutive:
            keep = np.empty(flat.shape[0], dtype=bool)
            keep[:1] = True
            np.not_equal(flat[1:], flat[:-1], out=keep[1:])
            values = flat[keep]
            group = keep.cumsum()
            group -= 1
            counts = _run_lengths(keep)
        else:
            values, group, counts = np.unique(flat, return_inverse=True, return_counts=True)
            if flat.dtype.kind == "f" and np.isnan(values).any():
                # torch keeps each NaN apart (NaN != NaN)
                nan = np.isnan(values)
                n_nan = int(np.isnan(flat).sum())
                values = np.concatenate([values[~nan], np.full(n_nan, np.nan, flat.dtype)])
                counts = np.concatenate([counts[~nan], np.ones(n_nan, np.int64)])
                group = group.copy()
                positions = np.flatnonzero(np.isnan(flat))
                group[positions] = int((~nan).sum()) + np.arange(n_nan)
        inverse = np.asarray(group, np.int64).reshape(a.shape)
    else:
        if input.ndim == 0:
            raise IndexError(f"{op}(): dim {dim} out of range for a 0-d tensor")
        d = normalize_axis(dim, input.ndim, op)
        if a.size == 0:
            if any(n == 0 for k, n in enumerate(a.shape) if k != d):
                raise RuntimeError(
                    "There are 0 sized dimensions, and they aren't selected, "
                    "so unique cannot be applied"
                )
            # (only `dim` is empty: no slices, the input comes back as it is)
            out = _from_host(np.array(a), input._dtype)
            empty = [
                _from_host(np.zeros(0, np.int64), dt.int64)
                for f in (return_inverse, return_counts)
                if f
            ]
            return out if not empty else (out, *empty)
        order_axes = (d,) + tuple(k for k in range(a.ndim) if k != d)  # `d` first
        moved = a.transpose(order_axes)
        rows = moved.reshape(moved.shape[0], -1)
        n = rows.shape[0]
        if n == 0:
            values_rows = rows
            group = np.zeros(0, np.int64)
            counts = np.zeros(0, np.int64)
        elif consecutive:
            keep = np.empty(n, dtype=bool)
            keep[0] = True
            (rows[1:] != rows[:-1]).any(axis=1, out=keep[1:])
            values_rows = rows[keep]
            group = keep.cumsum()
            group -= 1
            counts = _run_lengths(keep)
        else:
            order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(n)
            srt = rows[order]
            keep = np.empty(n, dtype=bool)
            keep[0] = True
            if rows.shape[1]:
                (srt[1:] != srt[:-1]).any(axis=1, out=keep[1:])
            else:
                keep[1:] = False
            values_rows = srt[keep]
            ids = keep.cumsum()
            ids -= 1
            group = np.empty(n, np.int64)
            group[order] = ids
            counts = _run_lengths(keep)
        back = tuple(range(1, d + 1)) + (0,) + tuple(range(d + 1, a.ndim))
        values = values_rows.reshape((-1,) + moved.shape[1:]).transpose(back)
        inverse = np.asarray(group, np.int64)
    out = _from_host(np.asarray(values), input._dtype)
    result: list[Tensor] = [out]
    if return_inverse:
        result.append(_from_host(np.asarray(inverse, np.int64), dt.int64))
    if return_counts:
        result.append(_from_host(np.asarray(counts, np.int64), dt.int64))
    return result[0] if len(result) == 1 else tuple(result)


def _unique_slices(
    op: str,
    input: Tensor,
    consecutive: bool,
    return_inverse: bool,
    return_counts: bool,
    dim: int | None,
) -> Any:
    """`_unique_host`'s plain eager case by kernels: slices along `dim` (or the elements,
    for `unique_consecutive` without one) grouped, sorted first for `unique`; None when
    the kernels do not serve it (an empty input, complex values, a layout that does not
    collapse)."""

    if dim is None:
        x, d = views.reshape(input, (input.numel(),)), 0
    else:
        d = normalize_axis(dim, input.ndim, op)
        x = input
    if not x.numel():
        return None
    got = _eager_selection.unique_slices(x, d, not consecutive, return_counts)
    if got is None:
        return None
    values, inverse, counts = got
    if not (return_inverse or return_counts):
        return values
    result = [values]
    if return_inverse:
        result.append(inverse if dim is not None else views.reshape(inverse, input._shape))
    if return_counts:
        result.append(counts)
    return tuple(result)


@names_op("unique")
def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    """The distinct values of `input` (or distinct slices along `dim`), sorted; with
    `return_inverse` each element's position in them, with `return_counts` how often each
    occurs. `sorted=False` also sorts (torch's CPU result). Not differentiable; a graph
    break inside `lg.compile`."""
    return _unique_host("unique", input, False, return_inverse, return_counts, dim)


@names_op("unique_consecutive")
def unique_consecutive(
    input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> Any:
    """`input` with each run of equal consecutive values (or slices along `dim`) kept
    once; `return_inverse`/`return_counts` as in `unique`. A graph break inside
    `lg.compile`."""
    return _unique_host("unique_consecutive", input, True, return_inverse, return_counts, dim)


# --------------------------------------------------------------------------------------
# searchsorted / bucketize / isin
# --------------------------------------------------------------------------------------


def _as_tensor(x: Any, like: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x

    return tensor(x)


def _before(a: Tensor, v: Tensor, right: bool) -> Tensor:
    """torch's binary-search predicate: boundary `a` lies before value `v` when not `a >=
    v` (not `a > v` with `right`); a NaN value lies after every boundary."""
    return E.logical_not(E.gt(a, v) if right else E.ge(a, v))


def _binary_search(s: np.ndarray, v: np.ndarray, right: bool) -> np.ndarray:
    """The search torch runs, vectorized over values: the first position whose boundary
    fails `_before` (so NaN boundaries, sorted last, and NaN values place as in torch)."""
    # (the row counts spelled out: a reshape to -1 is ambiguous when a size is 0)
    lead = int(np.prod(s.shape[:-1], dtype=np.int64)) if s.ndim > 1 else 1
    rows_s = s.reshape(lead, s.shape[-1])
    rows_v = v.reshape(lead, v.shape[-1] if s.ndim > 1 else v.size)
    m = rows_s.shape[1]
    lo = np.zeros(rows_v.shape, np.int64)
    hi = np.full(rows_v.shape, m, np.int64)
    with np.errstate(invalid="ignore"):
        while m and (lo < hi).any():
            active = lo < hi
            mid = (lo + hi) // 2
            val = np.take_along_axis(rows_s, np.minimum(mid, m - 1), 1)
            before = ~(val > rows_v) if right else ~(val >= rows_v)
            lo = np.where(active & before, mid + 1, lo)
            hi = np.where(active & ~before, mid, hi)
    return lo.reshape(v.shape)


def _traced_search(seq: Tensor, values: Tensor, right: bool) -> Tensor:
    """`_binary_search` written with llgrad functions (for a trace): the same steps, a
    fixed number of them (the bit length of the row size), so a NaN boundary or value,
    or an unsorted row, lands where torch's search puts it (counting the boundaries
    before a value would not)."""
    m = seq._shape[-1]
    lo = zeros_like(values, dtype=dt.int64)
    hi = full_like(values, m, dtype=dt.int64)
    for _ in range(m.bit_length()):
        active = E.lt(lo, hi)
        mid = E.floor_divide(E.add(lo, hi), 2)
        at = E.minimum(mid, m - 1)
        val = take(seq, at) if seq.ndim == 1 else take_along_dim(seq, at, -1)
        before = _before(val, values, right)
        lo = E.where(E.logical_and(active, before), E.add(mid, 1), lo)
        hi = E.where(E.logical_and(active, E.logical_not(before)), mid, hi)
    return lo


def _search_args(
    sorted_sequence: Any, input: Any, right: bool, side: str | None, sorter: Any
) -> tuple[Tensor, Tensor, bool, bool]:
    """searchsorted's checks (PyTorch's errors): (the boundaries, the values as a tensor,
    `right` after `side`, whether the values were a number)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "searchsorted(): side and right can't be set to opposites, got "
                "side of left while right was True"
            )
        right = side == "right"
    if not isinstance(sorted_sequence, Tensor):
        raise TypeError(
            f"searchsorted(): sorted_sequence must be a Tensor, got "
            f"{type(sorted_sequence).__name__}"
        )
    scalar = not isinstance(input, Tensor)
    values = _as_tensor(input)
    if sorted_sequence.ndim == 0:
        raise RuntimeError(
            "searchsorted(): boundaries tensor should have at least 1 dimension, got 0"
        )
    if sorted_sequence.ndim > 1 and (
        values.ndim != sorted_sequence.ndim or values._shape[:-1] != sorted_sequence._shape[:-1]
    ):
        raise RuntimeError(
            f"searchsorted(): boundaries tensor should be 1 dimension or the "
            f"first N-1 dimensions of boundaries tensor and input value tensor "
            f"must match, but we got boundaries tensor "
            f"{list(sorted_sequence.shape)} and input value tensor "
            f"{list(values.shape)}"
        )
    if sorted_sequence._dtype.is_complex or values._dtype.is_complex:
        raise RuntimeError("searchsorted(): not implemented for complex tensors")
    if sorter is not None:
        if not isinstance(sorter, Tensor) or sorter._dtype not in (dt.int64, dt.int32):
            raise RuntimeError("searchsorted(): sorter must be an int64 tensor")
        if sorter._shape != sorted_sequence._shape:
            raise RuntimeError(
                f"searchsorted(): boundary and sorter must have the same size, "
                f"but got boundary tensor {list(sorted_sequence.shape)} and got sorter "
                f"tensor {list(sorter.shape)}"
            )
    return sorted_sequence, values, right, scalar


@names_op("searchsorted")
def searchsorted(
    sorted_sequence: Tensor,
    input: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """For each value of `input`, the index in `sorted_sequence` (sorted along its last
    dimension) where it would be inserted to keep the order: before equal values, or after
    them with `right=True` / `side='right'`. `sorter` gives the order of an unsorted
    sequence. int64 (int32 with `out_int32`). Eagerly torch's binary search (a kernel
    when the boundaries and values share a dtype, else on the host); traced, a count of
    the boundaries before each value (O(boundaries) per value; the two agree unless the
    boundaries hold NaN)."""
    out = _search_fast(sorted_sequence, input, out_int32, right, side, sorter)
    if out is not None:
        return out
    return _searchsorted(
        sorted_sequence, input, out_int32=out_int32, right=right, side=side, sorter=sorter
    )


def _search_fast(
    sorted_sequence: Any, input: Any, out_int32: bool, right: bool, side: Any, sorter: Any
) -> Tensor | None:
    """searchsorted's plain eager case by its kernel (arguments checked first), or None
    for the general path."""
    if sorted_sequence.__class__ is not Tensor or not host_plain(
        sorted_sequence, input if input.__class__ is Tensor else None, sorter
    ):
        return None
    seq, values, right, scalar = _search_args(sorted_sequence, input, right, side, sorter)
    if values.__class__ is not Tensor:
        return None
    out = _eager_selection.search(seq, values, right, sorter, dt.int32 if out_int32 else dt.int64)
    if out is not None and scalar:
        return out.reshape(())
    return out


@composite_function
def _searchsorted(
    sorted_sequence: Tensor,
    input: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """searchsorted's general path: on the host eagerly, composed when traced."""
    seq, values, right, scalar = _search_args(sorted_sequence, input, right, side, sorter)
    out_dtype = dt.int32 if out_int32 else dt.int64
    if sorter is not None:
        seq = take_along_dim(seq, sorter.to(dt.int64), -1)
    if _traced(seq, values):
        return _traced_search(seq, values, right).to(out_dtype)
    s = _host(seq)
    v = _host(values)
    if s.dtype != v.dtype:
        common = np.result_type(s, v)
        s, v = s.astype(common), v.astype(common)
    res = _binary_search(s, v, right)
    out = _from_host(np.asarray(res, out_dtype.np), out_dtype)
    return out.reshape(()) if scalar else out


@names_op("bucketize")
def bucketize(
    input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False
) -> Tensor:
    """The bucket of each value of `input` for the 1-D sorted `boundaries`: with
    `right=False` `boundaries[i-1] < x <= boundaries[i]`, with `right=True`
    `boundaries[i-1] <= x < boundaries[i]` (torch's convention)."""
    if (
        input.__class__ is Tensor
        and boundaries.__class__ is Tensor
        and boundaries.ndim == 1
        and host_plain(input, boundaries)
    ):
        # the plain eager case (searchsorted's checks all hold for 1-D boundaries and
        # tensor values; the kernel declines complex values and mixed dtypes)
        out = _eager_selection.search(
            boundaries, input, right, None, dt.int32 if out_int32 else dt.int64
        )
        if out is not None:
            return out
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        raise RuntimeError(
            f"bucketize(): boundaries tensor must be 1 dimension, but got "
            f"dim({getattr(boundaries, 'ndim', '?')})"
        )
    out = _search_fast(boundaries, input, out_int32, right, None, None)
    if out is not None:
        return out
    return _searchsorted(boundaries, input, out_int32=out_int32, right=right)


_NO_ARG: Any = object()


@names_op("isin")
@composite_function
def isin(
    elements: Any = _NO_ARG,
    test_elements: Any = _NO_ARG,
    *,
    assume_unique: bool = False,
    invert: bool = False,
    element: Any = _NO_ARG,
    test_element: Any = _NO_ARG,
) -> Tensor:
    """Whether each element of `elements` occurs in `test_elements` (either may be a
    number); `invert` negates. Eagerly a sort-based host test; traced, a comparison of
    every pair. PyTorch's keywords for a number operand, `element=` and `test_element=`,
    are taken too."""
    for name, plain, alias in (
        ("elements", elements, element),
        ("test_elements", test_elements, test_element),
    ):
        if plain is not _NO_ARG and alias is not _NO_ARG:
            raise TypeError(f"isin() got multiple values for argument '{name}'")
    elements = element if elements is _NO_ARG else elements
    test_elements = test_element if test_elements is _NO_ARG else test_elements
    if elements is _NO_ARG or test_elements is _NO_ARG:
        raise TypeError("isin() missing a required argument: 'elements' and 'test_elements'")

    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): at least one of elements and test_elements must be a Tensor")
    e = _as_tensor(elements)
    t = _as_tensor(test_elements)
    if e._dtype.is_complex or t._dtype.is_complex:
        raise RuntimeError("isin(): not implemented for complex tensors")
    if _traced(e, t):
        hit = (
            any_(E.eq(unsqueeze(e, -1), t.reshape(-1)), -1)
            if t.numel()
            else zeros(e._shape, dtype=dt.bool_)
        )
        return E.logical_not(hit) if invert else hit
    out = np.isin(_host(e), _host(t), assume_unique=assume_unique, invert=invert)
    return _from_host(np.asarray(out, np.bool_), dt.bool_)


# --------------------------------------------------------------------------------------
# nonzero_static, tril/triu_indices, unravel_index
# --------------------------------------------------------------------------------------


@names_op("nonzero_static")
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """int64 `(size, ndim)` coordinates of the first `size` non-zero elements (row-major),
    the rows past their count set to `fill_value`. Fixed-size, so it compiles."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise RuntimeError(f"nonzero_static(): 'size' must be a non-negative integer, got {size!r}")
    if not isinstance(input, Tensor):
        raise TypeError(f"nonzero_static(): expected a Tensor, got {type(input).__name__}")

    def forward(op: str, operands: Any, attrs: Any) -> Tensor:
        return indexing.nonzero(operands[0], attrs["size"])

    coords = apply("nonzero", (input,), {"size": size}, forward, None)
    if size == 0 or input.ndim == 0 and coords.numel() == 0:
        return coords
    count = sum_(E.ne(input, 0), dtype=dt.int64)
    keep = E.lt(iota(size, dt.int64).reshape(size, 1), count)
    return E.where(keep, coords, fill_value).to(dt.int64)


def _tri_indices(op: str, row: int, col: int, offset: int, dtype: Any, upper: bool) -> Tensor:
    if row.__class__ is not int or col.__class__ is not int or row < 0 or col < 0:
        for name, v in (("row", row), ("col", col)):
            if not isinstance(v, int) or v < 0:
                raise RuntimeError(f"{op}(): {name} must be a non-negative integer, got {v!r}")
    dtype = dt.int64 if dtype is None else dtype
    if dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{op}(): dtype must be int32 or int64, got {dtype.name}")
    if row * col <= 1 << 12 and offset.__class__ is int:
        # the values depend on the integers only: made once, then copied (creation's
        # `_imaged`)
        def image() -> tuple[tuple[int, ...], bytes]:
            out = _tri_coordinates(row, col, offset, upper).astype(dtype.np)
            return out.shape, out.tobytes()

        made = _creation._imaged((op, row, col, offset, dtype), dtype, image)
        if made is not None:
            return made
    return _from_host(_tri_coordinates(row, col, offset, upper).astype(dtype.np), dtype)


def _tri_coordinates(row: int, col: int, offset: int, upper: bool) -> np.ndarray:
    """The (2, N) rows and columns of the triangle's elements (int64, row-major order)."""
    r, c = np.indices((row, col)) if row and col else (np.zeros((0,), np.int64),) * 2
    keep = (c - r >= offset) if upper else (c - r <= offset)
    return np.stack([r[keep], c[keep]]) if row and col else np.zeros((2, 0), np.int64)


def tril_indices(
    row: int,
    col: int,
    offset: int = 0,
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Any = None,
) -> Tensor:
    """The (2, N) row and column coordinates of the lower triangle of a row x col matrix
    (diagonal `offset`), row by row."""
    if device is not None and not (device.__class__ is str and device == "cpu"):
        _check_device(device, "tril_indices")
    return _tri_indices("tril_indices", row, col, offset, dtype, False)


def triu_indices(
    row: int,
    col: int,
    offset: int = 0,
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Any = None,
) -> Tensor:
    """The (2, N) row and column coordinates of the upper triangle of a row x col matrix
    (diagonal `offset`), row by row."""
    if device is not None and not (device.__class__ is str and device == "cpu"):
        _check_device(device, "triu_indices")
    return _tri_indices("triu_indices", row, col, offset, dtype, True)


def unravel_index(indices: Tensor, shape: Any) -> tuple[Tensor, ...]:
    """The coordinates in a tensor of `shape` of the row-major flat `indices` (a tuple of
    int64 tensors shaped like `indices`); negative indices count from the end. Composes,
    so it compiles."""
    if not isinstance(indices, Tensor):
        indices = tensor(indices)
    if indices._dtype.is_floating_point or indices._dtype.is_complex or indices._dtype is dt.bool_:
        raise TypeError(
            f"unravel_index(): expected 'indices' to be integer dtype, but got "
            f"{indices._dtype.name}"
        )
    dims = shape_arg((shape,) if isinstance(shape, (tuple, list)) else (shape,), "unravel_index")
    if any(s < 0 for s in dims):
        raise ValueError(
            f"unravel_index(): 'shape' cannot have negative values, but got {tuple(dims)}"
        )
    n = 1
    for s in dims:
        n *= s
    if host_plain(indices) and indices.numel():
        # the plain eager case: one kernel finds every coordinate and the range
        done = _eager_selection.unravel(indices, dims, n)
        if done is not None:
            coords, lo, hi = done
            if lo < -n or hi >= n:
                raise ValueError(
                    f"unravel_index(): index {lo if lo < -n else hi} is out of bounds "
                    f"for shape {tuple(dims)} ({n} elements)"
                )
            return coords
    if not _traced(indices) and indices.numel():
        with no_grad():
            lo, hi = int(amin(indices).item()), int(amax(indices).item())
        if lo < -n or hi >= n:
            raise ValueError(
                f"unravel_index(): index {lo if lo < -n else hi} is out of bounds "
                f"for shape {tuple(dims)} ({n} elements)"
            )
    idx = indices.to(dt.int64)
    idx = E.where(E.lt(idx, 0), E.add(idx, n), idx)
    out = []
    for s in reversed(dims):
        out.append(E.remainder(idx, s) if s else idx)
        idx = E.floor_divide(idx, s) if s else idx
    return tuple(reversed(out))


# --------------------------------------------------------------------------------------
# in-place methods
# --------------------------------------------------------------------------------------


def _inplace(name: str, fn: Callable[..., Tensor]) -> Callable[..., Any]:
    return names_op(f"{name}_")(_rewrite_inplace(name, fn))


def _index_put_method(
    self: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False
) -> Tensor:
    return _inplace("index_put", index_put)(self, indices, values, accumulate)


def index_put_(
    input: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False
) -> Tensor:
    """In-place `index_put`: `input[indices] = values` (or `+=` with `accumulate`)."""
    return _index_put_method(
        input, tuple(indices) if isinstance(indices, list) else indices, values, accumulate
    )


def _put_method(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    return _inplace("put", put)(self, index, source, accumulate)


def _masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """In place: `mask` must broadcast to `self`'s shape (not the other way)."""
    mask = _bool_mask("masked_scatter_", mask)
    if broadcast_shapes(self._shape, mask._shape, op="masked_scatter_") != self._shape:
        raise RuntimeError(
            f"masked_scatter_(): mask {list(mask.shape)} must be "
            f"broadcastable to self {list(self.shape)}"
        )
    return _inplace("masked_scatter", masked_scatter)(self, mask, source)


METHODS: dict[str, Callable[..., Any]] = {
    "take": take,
    "put": put,
    "put_": _put_method,
    "index_add": index_add,
    "index_add_": _inplace("index_add", index_add),
    "index_copy": index_copy,
    "index_copy_": _inplace("index_copy", index_copy),
    "index_fill": index_fill,
    "index_fill_": _inplace("index_fill", index_fill),
    "index_put": index_put,
    "index_put_": _index_put_method,
    "index_reduce": index_reduce,
    "index_reduce_": _inplace("index_reduce", index_reduce),
    "masked_select": masked_select,
    "masked_scatter": masked_scatter,
    "masked_scatter_": _masked_scatter_,
    "scatter_reduce": scatter_reduce,
    "scatter_reduce_": _inplace("scatter_reduce", scatter_reduce),
    "unique": unique,
    "unique_consecutive": unique_consecutive,
    "nonzero_static": nonzero_static,
}
