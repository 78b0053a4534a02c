"""Indexing: `x[idx]`, `x[idx] = v`, gather, index_select, masked_fill, nonzero.

`x[idx]` records one node whose backward scatters the gradient back to `x`'s shape
(accumulating repeated indices); that scatter is itself recorded, with `x[idx]` as its
backward, so indexing is differentiable to any order.
"""

from __future__ import annotations

from typing import Any

from ..tape import forward as forward_ad
from ..dispatch.apply import apply, composite_function, dispatch_function, needs_grad
from ..tape.node import Node, edge, node_class
from ..dispatch.grad_mode import no_grad
from ..eager import indexing, views
from ..eager.indexing import nonzero as run
from ..ir import dtypes as dt
from ..ir.types import broadcast_shapes, normalize_axis
from ..tensor import Tensor
from ..tracer.context import current, user_location
from ..tracer.tensor import GraphBreak, tracing
from ._errors import DEVICE_CLASSES, names_op, serve_on_devices
from ._host import host_plain
from .shape import expand
from .creation import checked_scalar, full, iota, zeros
from . import elementwise as E
from .elementwise import ne


class IndexNode(Node):
    """Backward of `x[index]`: scatter the gradient into zeros shaped like `x`."""

    __slots__ = ("index", "shape", "dtype")

    def __init__(self, x: Tensor, index: Any):
        super().__init__((edge(x),))
        self.index = index
        self.shape = x._shape
        self.dtype = x._dtype

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (index_backward(grads[0], self.shape, self.index),)


class IndexScatterNode(Node):
    """Backward of the scatter: gather the gradient at the same positions."""

    __slots__ = ("index",)

    def __init__(self, g: Tensor, index: Any):
        super().__init__((edge(g),))
        self.index = index

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (getitem(grads[0], self.index),)


def _index_name(index: Any) -> str:
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, (Tensor, list)) for i in items):
        return "IndexBackward0"
    last = [i for i in items if i is not None and i is not Ellipsis]
    if last and isinstance(last[-1], int) and not isinstance(last[-1], bool):
        return "SelectBackward0"
    if not last:
        return "UnsqueezeBackward0" if any(i is None for i in items) else "AliasBackward0"
    return "SliceBackward0"


def python_index(index: Any) -> Any:
    """PyTorch's reading of Python index objects: a `range` is the list of its values, and
    a list holding a sequence, slice, tensor, None or Ellipsis (fewer than 32 items) is a
    tuple of indices (`x[[0, [1]]]` is `x[0, [1]]`, NumPy's old rule)."""
    kind = type(index)
    if kind is range:
        return list(index)
    if kind is list:
        if len(index) < 32 and any(
            v is None or v is Ellipsis or isinstance(v, (list, tuple, range, slice, Tensor))
            for v in index
        ):
            return tuple(list(v) if type(v) is range else v for v in index)
        return index
    if kind is tuple and any(type(v) is range for v in index):
        return tuple(list(v) if type(v) is range else v for v in index)
    return index


def _getitem_of(x: Tensor, index: Any) -> Tensor:
    return getitem(x, index)


def getitem(x: Tensor, index: Any, name: str | None = None) -> Tensor:
    kind = type(index)
    if kind is list or kind is range or kind is tuple:
        index = python_index(index)
    if getattr(x, "_ctx", None) is not None or _traced_index(index):
        from ..tracer import indexing as traced  # circle: tracer.indexing -> functions -> here

        return traced.getitem(x, index)
    if x.__class__ in DEVICE_CLASSES:
        # a CUDA tensor: a basic index is a view of its memory (only the layout is
        # computed); one that needs a kernel runs as one compiled GPU graph
        try:
            out = _first_dim_view(x, index)
            if out is None:
                out = indexing.getitem(x, index)
        except (TypeError, RuntimeError):
            from ..eager.cuda import rerun, upload  # circle: eager.cuda -> functions -> here

            # index tensors on the host are taken to the device, as PyTorch allows them
            items = [
                upload(i.detach())
                if isinstance(i, Tensor) and i.__class__ not in DEVICE_CLASSES
                else i
                for i in (index if isinstance(index, tuple) else (index,))
            ]
            index = tuple(items) if isinstance(index, tuple) else items[0]
            return rerun(_getitem_of, "getitem", (x, index), {})
    else:
        out = _first_dim_view(x, index)
        if out is None:
            out = indexing.getitem(x, index)
    tangent = forward_ad.tangent_of(x) if forward_ad._level[0] else None
    if tangent is not None or (
        needs_grad([x]) and (out._dtype.is_floating_point or out._dtype.is_complex)
    ):
        # a new tensor object: a basic index's view must not share autograd state
        out = Tensor._make(
            out._storage, out._offset, out._shape, out._strides, out._dtype, base=out._base
        )
    if needs_grad([x]) and (out._dtype.is_floating_point or out._dtype.is_complex):
        out._requires_grad = True
        out.grad_fn = node_class(name or _index_name(index), IndexNode)(x, index)
    if tangent is not None:
        forward_ad.set_tangent(out, getitem(tangent, index))
    return out


def _first_dim_view(x: Tensor, index: Any) -> Tensor | None:
    """`x[a:b:c]` and `x[i]` on the first dimension without the general index parser
    (the common case; everything else returns None and takes the general path)."""
    if not x._shape:
        return None
    n = x._shape[0]
    if type(index) is slice:
        if index.step is not None and index.step <= 0:
            return None  # the general path raises PyTorch's error
        start, stop, step = index.indices(n)
        length = max(0, (stop - start + step - 1) // step)
        offset = x._offset + (start * x._strides[0] if length else 0)
        return views.view_of(
            x, offset, (length,) + x._shape[1:], (x._strides[0] * step,) + x._strides[1:]
        )
    if type(index) is int:
        if not -n <= index < n:
            return None  # the general path raises IndexError
        return views.select(x, 0, index)
    return None


def _traced_index(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(getattr(i, "_ctx", None) is not None for i in items)


def index_backward(g: Tensor, shape: tuple[int, ...], index: Any) -> Tensor:
    ctx = current()
    if ctx is not None:
        # traced: scatter-add g at the positions `x[index]` reads (an iota indexed alike)
        n = 1
        for s in shape:
            n *= s
        positions = getitem(ctx.iota(n).reshape(shape), index)
        zeros = ctx.constant(0, g._dtype, shape)
        return scatter_add_linear(zeros, positions, g)
    if g.__class__ in DEVICE_CLASSES:  # a CUDA gradient: traced, on the GPU
        from ..eager.cuda import rerun  # circle: eager.cuda -> functions -> here

        return rerun(index_backward, "index_backward", (g, shape, index), {})

    out = indexing.getitem_backward(shape, g._dtype, index, g)
    if needs_grad([g]):
        out._requires_grad = True
        out.grad_fn = node_class("IndexBackwardBackward0", IndexScatterNode)(g, index)
    tangent = forward_ad.tangent_of(g) if forward_ad._level[0] else None
    if tangent is not None:  # linear in g: the tangent scatters the same way
        forward_ad.set_tangent(out, index_backward(tangent, shape, index))
    return out


def gather(
    input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False, name: str | None = None
) -> Tensor:
    """`out[i][j][k] = input[index[i][j][k]][j][k]` (for dim 0), as torch.gather.
    `sparse_grad` is accepted; llgrad's gradient is always dense (PyTorch makes a sparse
    one when it is True)."""
    if (
        index.__class__ is Tensor
        and 0 in index._shape
        and input.__class__ is Tensor
        and dim.__class__ is int
        and -max(input.ndim, 1) <= dim < max(input.ndim, 1)
        and host_plain(input)
    ):
        # an empty index with nothing to record: an empty result of index's shape (what
        # the general path makes, without converting the index or building views)
        return Tensor._empty(index._shape, input._dtype)
    return _gather(input, dim, index, sparse_grad=sparse_grad, name=name)


@names_op("gather")
@composite_function
def _gather(
    input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False, name: str | None = None
) -> Tensor:
    """`gather` (its general path: every call but an empty index's plain one)."""

    d = normalize_axis(dim, input.ndim, "gather")
    if not isinstance(index, Tensor):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if index._dtype not in (dt.int64, dt.int32):
        if 0 not in index._shape:  # an empty index of any dtype is accepted, as torch
            raise RuntimeError("gather(): Expected dtype int32/int64 for index")
        index = index.to(dt.int64)
    if 0 in index._shape:  # empty: index's shape, no rank or size checks
        return input.reshape(-1)[:0].reshape(index._shape)
    if not (input.ndim == 0 and index.ndim == 1):  # a 0-d input counts as 1-d, as torch
        _check_index_shape("gather", input, index, d)
    size = input._shape[d] if input.ndim else 1
    _check_index_range("gather", index, d, size)
    if input.ndim == 0:
        return getitem(
            input.reshape(1), _no_negative(index.reshape(-1), 1), name or "GatherBackward0"
        ).reshape(index._shape)
    index = _no_negative(index, size)
    parts = []
    for k in range(input.ndim):
        if k == d:
            parts.append(index)
        else:
            shape = [1] * input.ndim
            shape[k] = index._shape[k]
            parts.append(iota(index._shape[k], dt.int64).reshape(shape))
    # through the interpreter stack, so that vmap batches `input` and `index` (its
    # indexing rule); plain tensors take `getitem` directly

    return dispatch_function(
        "getitem", [input, index], _named_getitem(name or "GatherBackward0"), (input, tuple(parts))
    )


def _named_getitem(name: str) -> Any:
    def run(x: Tensor, index: Any) -> Tensor:
        return getitem(x, index, name)

    return run


@names_op("take_along_dim")
@composite_function
def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """`input`'s values at `indices` along `dim`, as torch.take_along_dim and
    np.take_along_axis: `input` and `indices` broadcast against each other in every
    dimension but `dim`; `dim=None` takes from the flattened input (result 1-D).
    Negative indices count from the end (as torch); an index outside [-size, size)
    raises (torch does not check it)."""
    if not isinstance(indices, Tensor) or indices._dtype is not dt.int64:
        raise RuntimeError(
            f"take_along_dim(): dtype of indices should be int64 but got "
            f"{getattr(indices, 'dtype', type(indices).__name__)}"
        )
    if dim is None:
        flat = input.reshape(-1)
        return gather(flat, 0, _wrap_negative(indices.reshape(-1), flat._shape[0]))
    if input.ndim != indices.ndim:
        raise RuntimeError(
            f"take_along_dim(): input and indices should have the same number "
            f"of dimensions, but got {input.ndim} dimensions for input, and "
            f"{indices.ndim} dimensions for indices"
        )
    d = normalize_axis(dim, input.ndim, "take_along_dim")
    if input.ndim == 0:
        return gather(input, d, _wrap_negative(indices, 1))
    size = input._shape[d]
    rest = list(input._shape)
    rest[d] = indices._shape[d]
    try:
        shape = broadcast_shapes(tuple(rest), indices._shape, op="take_along_dim")
    except ValueError as e:  # torch reports it as a RuntimeError
        raise RuntimeError(str(e)) from None
    index_shape = tuple(shape)
    input_shape = shape[:d] + (size,) + shape[d + 1 :]
    if indices._shape != index_shape:
        indices = expand(indices, index_shape)
    if input._shape != input_shape:
        input = expand(input, input_shape)
    return gather(input, d, _wrap_negative(indices, size))


def _wrap_negative(index: Tensor, size: int) -> Tensor:
    """`index` with values in [-size, 0) counted from the end (others left for the range
    check of the op that takes them)."""

    return E.where(E.logical_and(E.lt(index, 0), E.ge(index, -size)), E.add(index, size), index)


@names_op("index_select")
@composite_function
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    d = normalize_axis(dim, input.ndim, "index_select")
    if not isinstance(index, Tensor) or index._dtype not in (dt.int64, dt.int32):
        raise TypeError(
            f"index_select(): Expected dtype int32 or int64 for index, got "
            f"{getattr(index, 'dtype', type(index).__name__)}"
        )
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    size = input._shape[d] if input.ndim else 1
    if size == 0 and index.numel():
        raise IndexError(
            f"index_select(): cannot select {index.numel()} entries along "
            f"dimension {d} of size 0 (shape {list(input._shape)})"
        )
    _check_index_range("index_select", index, d, size, IndexError)
    if input.numel() == 0 and index.numel() and getattr(index, "_ctx", None) is not None:
        raise GraphBreak(
            "index_select from an empty tensor (no kernel would check the indices)", user_location()
        )
    index = _no_negative(index, size)
    if input.ndim == 0:
        if index.numel() != 1:
            raise RuntimeError(
                f"index_select(): Index to scalar can have only 1 value, got "
                f"{index.numel()} value(s)"
            )
        out = index_select(input.reshape(1), 0, index)
        return out.reshape(()) if index.ndim == 0 or index.numel() == 1 else out

    return dispatch_function(
        "getitem",
        [input, index],
        _named_getitem("IndexSelectBackward0"),
        (input, (slice(None),) * d + (index.reshape(-1),)),
    )


@names_op("masked_fill")
@composite_function
def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    if mask._dtype is not dt.bool_:
        raise RuntimeError(
            f"masked_fill only supports boolean masks, but got mask with dtype {mask._dtype.name}"
        )
    name = "MaskedFillBackward1" if isinstance(value, Tensor) else "MaskedFillBackward0"
    if isinstance(value, Tensor):
        if value.__class__ is Tensor and value.ndim == 0 and not value._requires_grad:
            # PyTorch checks a 0-d value's range
            checked_scalar(value.item(), input._dtype, "masked_fill")
        value = value.to(input._dtype)
    else:
        value = full((), value, dtype=input._dtype)
    return E.elementwise("where", mask, value, input, name=name)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    if input.__class__ is Tensor and not as_tuple and not input._dtype.is_complex:
        return _eager_nonzero(input)  # (a plain tensor: no tracer, no conversion)

    if getattr(input, "_ctx", None) is not None:
        raise GraphBreak("nonzero() (its result size depends on data)", user_location())
    if input._dtype.is_complex:  # nonzero where either part is
        input = ne(input, 0)
    out = indexing.nonzero(input)
    if as_tuple:
        if input.ndim == 0:  # a nonzero scalar has one position, 0
            return (zeros(int(bool(input.item())), dtype=dt.int64),)
        return tuple(out[:, k] for k in range(input.ndim))
    return out


def argwhere(input: Tensor) -> Tensor:
    return nonzero(input)


def _eager_nonzero(x: Tensor) -> Tensor:
    """`eager.indexing.nonzero(x)` (imported on the first call: that module imports this
    one's package)."""
    global _eager_nonzero

    _eager_nonzero = run
    return run(x)


# --------------------------------------------------------------------------------------
# The linear-index primitives (what traced indexing and its gradients are made of)
# --------------------------------------------------------------------------------------


def _linear_forward(op: str, operands: Any, attrs: Any) -> Tensor:
    return {
        "gather": indexing.gather,
        "scatter_add": indexing.scatter_add,
        "index_put": indexing.index_put,
    }[op](*operands)


def gather_linear(x: Tensor, index: Tensor) -> Tensor:
    """`x.reshape(-1)[index]` for int64 row-major offsets (the `gather` primitive)."""
    return apply("gather", (x, index), None, _linear_forward, "IndexBackward0")


def scatter_add_linear(base: Tensor, index: Tensor, src: Tensor) -> Tensor:
    """`base` with `src` added at row-major offsets `index` (duplicates accumulate)."""
    return apply("scatter_add", (base, index, src), None, _linear_forward, "IndexPutBackward0")


def index_put_linear(base: Tensor, index: Tensor, src: Tensor) -> Tensor:
    """`base` with `src` written at row-major offsets `index`."""
    return apply("index_put", (base, index, src), None, _linear_forward, "IndexPutBackward0")


# --------------------------------------------------------------------------------------
# torch.scatter / scatter_add: writes along one dimension, on the linear primitives
# --------------------------------------------------------------------------------------


def _check_index_shape(op: str, input: Tensor, index: Tensor, d: int) -> None:
    """gather/scatter: index has input's rank and is no larger outside dimension `d`."""
    if index.ndim != input.ndim:
        raise RuntimeError(
            f"{op}(): Index tensor must have the same number of dimensions as "
            f"self tensor (index {list(index.shape)}, self "
            f"{list(input.shape)})"
        )
    for k in range(index.ndim):
        if k != d and index.shape[k] > input.shape[k]:
            raise RuntimeError(
                f"{op}(): Expected index {list(index.shape)} to be smaller "
                f"than self {list(input.shape)} apart from dimension {d}"
            )


def _check_index_range(
    op: str, index: Tensor, d: int, size: int, error: type = RuntimeError
) -> None:
    """gather, scatter and index_select take indices in [0, size): unlike `x[i]`, a
    negative index is an error, not counted from the end. Checked here when the values
    are known; in a traced function the callers map a bad index where the indexing
    kernel rejects it."""
    from ..transforms.batching import bottom  # circle: transforms.batching -> here

    values = bottom(index)  # under vmap: every batch element's indices
    if values.numel() and not tracing() and getattr(values, "_ctx", None) is None:
        from .reduction import amax, amin  # circle: functions.reduction -> here

        with no_grad():
            lo, hi = int(amin(values).item()), int(amax(values).item())
        if lo < 0 or hi >= size:
            raise error(
                f"{op}(): index {lo if lo < 0 else hi} is out of bounds for "
                f"dimension {d} with size {size}"
            )


def _no_negative(index: Tensor, size: int) -> Tensor:
    """`index` with negative values moved to `size`, past the end, where the indexing
    kernel's bounds check rejects them (instead of counting them from the end)."""

    return E.where(E.lt(index, 0), size, index)


def _scatter_offsets(op: str, input: Tensor, dim: int, index: Tensor) -> Tensor:
    """Row-major offsets into `input` of `index`'s positions with dim `dim` replaced by
    its values. An index outside [0, size) maps to `numel`, which the scatter kernels
    reject with IndexError (eagerly it is reported here, naming the value)."""

    d = normalize_axis(dim, max(input.ndim, 1), op)
    if not isinstance(index, Tensor):
        raise RuntimeError(
            f"{op}(): Expected an int64 Tensor for index, got {type(index).__name__}"
        )
    if index._dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, got {index._dtype.name}")
    if index._dtype is dt.int32:
        index = index.to(dt.int64)
    _check_index_shape(op, input, index, d)
    size = input.shape[d] if input.ndim else 1
    _check_index_range(op, index, d, size)
    offset = None
    stride = 1
    for k in reversed(range(input.ndim)):
        if k == d:
            coord = index
        else:
            shape = [1] * input.ndim
            shape[k] = index.shape[k]
            coord = iota(index.shape[k], dt.int64).reshape(shape)
        term = E.mul(coord, stride) if stride != 1 else coord
        offset = term if offset is None else E.add(offset, term)
        stride *= input.shape[k]
    if offset is None:  # 0-d input and index
        offset = index
    bad = E.logical_or(E.lt(index, 0), E.ge(index, size))
    return E.where(bad, input.numel(), offset)


def _scatter_source(op: str, input: Tensor, index: Tensor, src: Any) -> Tensor:
    from .misc import slice_all  # circle: functions.misc -> functions.reduction -> here

    if not isinstance(src, Tensor):
        return full(tuple(index.shape), src, dtype=input._dtype)
    if src._dtype is not input._dtype:
        raise RuntimeError(
            f"{op}(): Expected self.dtype to be equal to src.dtype (self "
            f"{input._dtype.name}, src {src._dtype.name})"
        )
    if src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape)):
        raise RuntimeError(
            f"{op}(): Expected index {list(index.shape)} to be smaller than "
            f"src {list(src.shape)} in every dimension"
        )
    if tuple(src.shape) != tuple(index.shape):
        src = slice_all(src, (0,) * src.ndim, tuple(index.shape), (1,) * src.ndim)
    return src


@names_op("scatter")
@composite_function
def scatter(
    input: Tensor,
    dim: int,
    index: Tensor,
    src: Any = None,
    *,
    value: Any = None,
    reduce: str | None = None,
) -> Tensor:
    """A copy of `input` with `src[i][j]` written at `[index[i][j]][j]` (for dim 0); `src`
    may be a number. With duplicate positions one of the writes wins, as in PyTorch."""
    op = "scatter"
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter(): expected a src tensor or a value")
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError(
                f"scatter(): reduce argument must be either add or multiply, got {reduce!r}"
            )
        if reduce == "multiply":
            from .selection import scatter_reduce  # circle: functions.selection -> here

            return scatter_reduce(input, dim, index, _scatter_source(op, input, index, src), "prod")
        return scatter_add(input, dim, index, _scatter_source(op, input, index, src))
    offsets = _scatter_offsets(op, input, dim, index)
    return index_put_linear(input, offsets, _scatter_source(op, input, index, src))


@names_op("scatter_add")
@composite_function
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of `input` with `src[i][j]` added at `[index[i][j]][j]` (for dim 0);
    duplicate positions accumulate."""
    op = "scatter_add"
    offsets = _scatter_offsets(op, input, dim, index)
    return scatter_add_linear(input, offsets, _scatter_source(op, input, index, src))


def _served_on_devices() -> None:
    serve_on_devices(globals(), ["argwhere"])


_served_on_devices()
