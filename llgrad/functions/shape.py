"""Shape functions. Views in eager mode; each records the registry op it is made of."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from ..tape import forward as forward_ad
from ..dispatch.apply import apply, dispatch_function, interpreters
from ..tape.node import Node, edge, node_class
from ..dispatch.grad_mode import _state as _grad_state
from ..eager import elementwise as ew, views
from ..ir.dtypes import DType
from ..ir.types import TensorType, broadcast_shapes, normalize_axis
from ..ops.shape import _infer_cat, _infer_pad
from ..tensor import DENSE_CLASSES, Tensor
from ._errors import names_op, relabel
from .legacy import _NAMES

_VALUE_CLASSES = frozenset({int, bool, float, str, type(None)})


def _hashable(values: Any) -> tuple | None:
    """`values` (positional arguments after the tensor) as a key: numbers and strings
    with their class (`True` is not `1`), lists and tuples of them tagged with theirs;
    None when one cannot be part of a key (a tensor, whose values may matter)."""
    out: list[Any] = []
    for v in values:
        c = v.__class__
        if c in _VALUE_CLASSES:
            out.append((c, v))
        elif c is tuple or c is list:
            inner = _hashable(v)
            if inner is None:
                return None
            out.append((c, inner))
        else:
            return None
    return tuple(out)


VIEW_LIMIT = 8192  # cached view geometries in all
_view_geometries: dict[tuple, Any] = {}


def _view_function(fn: Callable[..., Any], absolute: bool = False) -> Callable[..., Any]:
    """`fn(input, *args, **kwargs)`, a function whose result is a view of `input` (or a
    tuple of views, or `input` itself) placed by `input`'s layout and the other
    arguments alone, made cheap to call again when nothing is recorded (`_unrecorded`):
    the first call of each (function, input layout, arguments) runs `fn` (which checks
    the arguments and raises its errors) and keeps where the views lie (offset, shape,
    strides); later calls make those views directly. A result that is not a plain view
    of `input` (a copy, a tensor with extra attributes) is not kept. With `absolute`
    (`as_strided`, whose `storage_offset` counts from the storage's start) the key holds
    `input`'s offset too, and its storage's size (what the view may reach ends there)."""

    def fast(input: Any, *args: Any, **kwargs: Any) -> Any:
        if (
            input.__class__ not in DENSE_CLASSES
            or interpreters
            or forward_ad._level[0]
            or (_grad_state.enabled and input._requires_grad)
        ):
            return fn(input, *args, **kwargs)
        values = _hashable(args)
        if values is None:
            return fn(input, *args, **kwargs)
        if kwargs:
            kw = _hashable(kwargs.values())
            if kw is None:
                return fn(input, *args, **kwargs)
            values += (tuple(kwargs), kw)
        key = (
            fast,
            input._dtype,
            input._shape,
            input._strides,
            values,
            (input._offset, input._storage.nbytes) if absolute else 0,
        )
        geometry = _view_geometries.get(key)
        if geometry is not None:
            if geometry.__class__ is tuple:
                return _make_view(input, geometry)
            if geometry == "input":
                return input
            return tuple(_make_view(input, g) for g in geometry)
        out = fn(input, *args, **kwargs)
        if len(_view_geometries) < VIEW_LIMIT:
            geometry = _geometry_of(input, out)
            if geometry is not None:
                _view_geometries[key] = geometry
        return out

    functools.update_wrapper(fast, fn)
    return fast


_many_geometries: dict[tuple, Any] = {}


def _views_of_many(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn(*args, **kwargs)`, a function of several tensors (given as arguments, or as
    lists or tuples of them) that returns a tuple of views, each of one of them
    (`broadcast_tensors`, `meshgrid`), placed by the tensors' layouts and the other
    arguments alone: as `_view_function`, the first unrecorded call of each (layouts,
    arguments) runs `fn` and keeps where each view lies (which tensor, offset, shape,
    strides), and later calls make those views directly. Nothing is kept when two of the
    tensors share memory (which one a view is of would be ambiguous) or a result is not
    a plain view."""

    def fast(*args: Any, **kwargs: Any) -> Any:
        if interpreters or forward_ad._level[0]:
            return fn(*args, **kwargs)
        grad = _grad_state.enabled
        tensors: list[Tensor] = []
        key: list[Any] = [fast]
        for a in args:
            c = a.__class__
            if c is Tensor:
                if grad and a._requires_grad:
                    return fn(*args, **kwargs)
                tensors.append(a)
                key.append(a._lkey)
            elif c is list or c is tuple:
                inner = []
                for t in a:
                    if t.__class__ is not Tensor or grad and t._requires_grad:
                        return fn(*args, **kwargs)
                    tensors.append(t)
                    inner.append(t._lkey)
                key.append((c, tuple(inner)))
            elif c in _VALUE_CLASSES:
                key.append((c, a))
            else:
                return fn(*args, **kwargs)
        if kwargs:
            kw = _hashable(kwargs.values())
            if kw is None:
                return fn(*args, **kwargs)
            key += (tuple(kwargs), kw)
        k = tuple(key)
        geometries = _many_geometries.get(k)
        if geometries is not None:
            out = []
            for i, offset, shape, strides in geometries:
                t = tensors[i]
                out.append(
                    t if offset is None else views.view_of(t, t._offset + offset, shape, strides)
                )
            return tuple(out)
        out = fn(*args, **kwargs)
        if len(_many_geometries) < VIEW_LIMIT and out.__class__ is tuple:
            geometries = _many_geometry(tensors, out)
            if geometries is not None:
                _many_geometries[k] = geometries
        return out

    functools.update_wrapper(fast, fn)
    return fast


def _many_geometry(tensors: list[Tensor], out: tuple) -> list | None:
    """Where each of `out` lies relative to the tensor of `tensors` it views, as
    (index, offset, shape, strides) (offset None: the tensor itself), or None."""
    by_storage: dict[int, int] = {}
    for i, t in enumerate(tensors):
        if id(t._storage) in by_storage:
            return None
        by_storage[id(t._storage)] = i
    geometries = []
    for o in out:
        i = by_storage.get(id(o._storage)) if o.__class__ is Tensor else None
        if i is None:
            return None
        t = tensors[i]
        if o is t:
            geometries.append((i, None, None, None))
            continue
        base = t._base if t._base is not None else t
        if (
            o._base is not base
            or o._dtype is not t._dtype
            or o.__dict__
            or o._requires_grad
            or o._inference != t._inference
        ):
            return None
        geometries.append((i, o._offset - t._offset, o._shape, o._strides))
    return geometries


def _make_view(input: Tensor, geometry: tuple) -> Tensor:
    offset, shape, strides = geometry
    return views.view_of(input, input._offset + offset, shape, strides)


def _geometry_of(input: Tensor, out: Any) -> Any:
    """Where `out` lies relative to `input` (see `_view_function`), or None."""
    if out is input:
        return "input"
    if out.__class__ is tuple:
        parts = [_geometry_of(input, o) for o in out]
        return (
            None
            if not parts or any(p is None or p.__class__ is not tuple for p in parts)
            else [*parts]
        )
    base = input._base if input._base is not None else input
    if (
        out.__class__ is not Tensor
        or out._storage is not input._storage
        or out._base is not base
        or out._dtype is not input._dtype
        or out.__dict__
        or out._requires_grad
        or out._inference != input._inference
    ):
        return None
    return (out._offset - input._offset, out._shape, out._strides)


def shape_arg(args: tuple[Any, ...], op: str) -> tuple[int, ...]:
    """Sizes given as varargs (`x.view(2, 3)`) or as one sequence (`x.view((2, 3))`)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    for a in args:
        if a.__class__ is not int:
            break
    else:
        return args
    out = []
    for a in args:
        if isinstance(a, Tensor):
            a = int(a)
        if isinstance(a, bool) or not hasattr(a, "__index__"):
            raise TypeError(f"{op}: sizes must be integers, got {a!r} ({type(a).__name__})")
        out.append(a.__index__())
    return tuple(out)


def size_arg(args: tuple[Any, ...], op: str) -> tuple[int, ...]:
    """The size of a tensor to create: `shape_arg`, every dimension at least 0 (the one
    check every creation function shares; `reshape`'s -1 is not a size)."""
    if not args:
        raise TypeError(f"{op}() missing 1 required positional argument: 'size'")
    shape = shape_arg(args, op)
    if any(s < 0 for s in shape):
        raise RuntimeError(
            f"{op}: negative dimension in size {list(shape)}; sizes must be non-negative"
        )
    numel = 1
    for s in shape:
        numel *= s
    if numel >= 1 << 60:
        raise MemoryError(
            f"{op}: size {list(shape)} has {numel} elements, at least {numel} "
            f"bytes: more than any memory can hold"
        )
    return shape


def _check_tensor(op: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def _reshape_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return views.reshape(operands[0], attrs["shape"])


def _view_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return views.reshape(operands[0], attrs["shape"], must_view=True)


@_view_function
def reshape(input: Tensor, *sizes: Any, shape: Any = None, name: str = "ViewBackward0") -> Tensor:
    """`input`'s values in `shape` (sizes, or a tuple; `shape=` by keyword as PyTorch): a
    view when the strides allow, else a copy."""
    _check_tensor("reshape", input)
    sizes = _keyword_shape("reshape", sizes, shape, "shape")
    s = shape_arg(sizes, "reshape")
    if _unrecorded(input):
        return views.reshape(input, s)
    return apply("reshape", (input,), {"shape": s}, _reshape_forward, name)


@_view_function
def view(input: Tensor, *shape: Any, size: Any = None, dtype: Any = None) -> Tensor:
    """A view of `input` with sizes `shape` (or `size=`), sharing its memory; or, given a
    dtype (`view(lg.int32)`, `dtype=`), its bytes reinterpreted as that dtype (PyTorch's
    rules for element sizes that differ: the last dimension is contiguous and scales)."""
    _check_tensor("view", input)
    if dtype is not None:
        if shape or size is not None:
            raise TypeError("view() takes either sizes or a dtype, not both")
        return view_dtype(input, dtype)
    if (
        len(shape) == 1
        and not isinstance(shape[0], (tuple, list, int))
        and hasattr(shape[0], "itemsize")
    ):
        return view_dtype(input, shape[0])
    shape = _keyword_shape("view", shape, size, "size")
    s = shape_arg(shape, "view")
    return apply("reshape", (input,), {"shape": s}, _view_forward, "ViewBackward0")


@_view_function
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    a = normalize_axis(start_dim, input.ndim, "flatten")
    b = normalize_axis(end_dim, input.ndim, "flatten")
    if input.ndim == 0:
        return reshape(input, (1,))
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if a == b:  # nothing to merge: the input itself, as torch returns it
        return input
    n = 1
    for s in input._shape[a : b + 1]:
        n *= s
    return reshape(input, input._shape[:a] + (n,) + input._shape[b + 1 :])


@_view_function
def squeeze(input: Tensor, dim: Any = None) -> Tensor:
    if dim is None:
        new = tuple(s for s in input._shape if s != 1)
        return reshape(input, new, name="SqueezeBackward0")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    norm = {normalize_axis(d, input.ndim, "squeeze") for d in dims}
    new = tuple(s for i, s in enumerate(input._shape) if not (i in norm and s == 1))
    return reshape(input, new, name="SqueezeBackward1")


@_view_function
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    d = normalize_axis(dim, input.ndim + 1, "unsqueeze")
    new = input._shape[:d] + (1,) + input._shape[d:]
    if _unrecorded(input):
        return views.reshape(input, new)
    return reshape(input, new, name="UnsqueezeBackward0")


def _permute_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return views.permute(operands[0], attrs["perm"])


@_view_function
def permute(input: Tensor, *order: Any, dims: Any = None) -> Tensor:
    """A view of `input` with its dimensions in the order `dims` (ints or a tuple)."""
    _check_tensor("permute", input)
    order = _keyword_shape("permute", order, dims, "dims")
    p = shape_arg(order, "permute")
    if _unrecorded(input):
        return views.permute(input, p)
    return apply("permute", (input,), {"perm": p}, _permute_forward, "PermuteBackward0")


def _unrecorded(input: Any) -> bool:
    """Whether a view of `input` is all there is to do: a plain tensor that autograd does
    not record, no transform and no forward mode (what `apply` would find; derivative
    rules transpose a lot)."""
    return (
        input.__class__ in DENSE_CLASSES
        and not interpreters
        and not forward_ad._level[0]
        and not (_grad_state.enabled and input._requires_grad)
    )


def _recorded_plainly(input: Any) -> bool:
    """Whether autograd records a view of `input` with nothing else involved: a plain
    tensor that requires grad, grad mode on, no transform and no forward mode."""
    return (
        input.__class__ in DENSE_CLASSES
        and not interpreters
        and not forward_ad._level[0]
        and _grad_state.enabled
        and input._requires_grad
    )


class _PiecesBackward(Node):
    """The one node of the views `split`, `chunk` and `unbind` return (PyTorch's
    SplitBackward0, SplitWithSizesBackward0 and UnbindBackward0: every piece has the same
    grad_fn, its `output_nr` the piece's position). Its backward is one `cat` (`stack`
    for unbind) of the pieces' gradients, zeros for pieces that got none: a node per
    piece would pad each gradient to the input's size and add them up."""

    __slots__ = ("dim", "sizes", "shape", "dtype", "stacked", "num_outputs")

    def __init__(self, input: Tensor, dim: int, sizes: list[int], stacked: bool):
        super().__init__((edge(input),))
        self.dim, self.sizes, self.stacked = dim, sizes, stacked
        self.shape, self.dtype = input._shape, input._dtype
        self.num_outputs = len(sizes)

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        from .creation import zeros  # circle: functions.creation -> here

        d, shape = self.dim, self.shape
        parts = []
        for g, size in zip(grads, self.sizes):
            if g is None:
                piece = shape[:d] + (() if self.stacked else (size,)) + shape[d + 1 :]
                g = zeros(piece, dtype=self.dtype)
            parts.append(g)
        return (stack(parts, d) if self.stacked else cat(parts, d),)


def _pieces(
    input: Tensor, d: int, sizes: list[int], name: str, stacked: bool
) -> tuple[Tensor, ...]:
    """`input`'s consecutive pieces of `sizes` along `d` (each piece a select when
    `stacked`) as views sharing one `_PiecesBackward` node called `name`."""
    node = node_class(name, _PiecesBackward)(input, d, sizes, stacked)
    out = []
    start = 0
    full = input._shape
    for nr, size in enumerate(sizes):
        if stacked:
            v = views.select(input, d, start)
        else:
            starts = [0] * len(full)
            stops = list(full)
            starts[d], stops[d] = start, start + size
            v = views.slice_dims(input, tuple(starts), tuple(stops), (1,) * len(full))
        v._requires_grad = True
        v.grad_fn = node
        v._output_nr = nr
        out.append(v)
        start += size
    return tuple(out)


@_view_function
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    n = input.ndim
    if n == 2 and dim0 in (0, -2) and dim1 in (1, -1) and _unrecorded(input):
        return views.transpose_matrix(input)  # (derivative rules' usual call)
    a = normalize_axis(dim0, n, "transpose")
    b = normalize_axis(dim1, n, "transpose")
    perm = list(range(n))
    if n:  # (a 0-d tensor: dims 0 and -1, nothing to swap)
        perm[a], perm[b] = perm[b], perm[a]
    if _unrecorded(input):
        return views.permute(input, tuple(perm))
    return apply("permute", (input,), {"perm": tuple(perm)}, _permute_forward, "TransposeBackward0")


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """`transpose(input, axis0, axis1)` under NumPy's argument names (a view)."""
    return transpose(input, axis0, axis1)


@_view_function
def t(input: Tensor) -> Tensor:
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    perm = tuple(reversed(range(input.ndim)))
    if _unrecorded(input):
        return views.permute(input, perm)
    return apply("permute", (input,), {"perm": perm}, _permute_forward, "TBackward0")


@_view_function
@names_op("movedim")
def movedim(input: Tensor, source: int, destination: int) -> Tensor:
    n = input.ndim
    s = normalize_axis(source, n, "movedim")
    d = normalize_axis(destination, n, "movedim")
    order = [i for i in range(n) if i != s]
    if n:
        order.insert(d, s)
    return permute(input, order)


def _expand_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return views.expand(operands[0], attrs["shape"])


@_view_function
def expand(input: Tensor, *sizes: Any, size: Any = None, implicit: bool = False) -> Tensor:
    """A view of `input` with size-1 dimensions repeated to `size` (-1 keeps a size); no
    memory is copied. `implicit` is accepted and ignored, as PyTorch's Python callers do."""
    _check_tensor("expand", input)
    sizes = _keyword_shape("expand", sizes, size, "size")
    s = shape_arg(sizes, "expand")
    return apply("expand", (input,), {"shape": s}, _expand_forward, "ExpandBackward0")


def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:
    """`input` expanded to `size` by broadcasting (a view)."""
    return expand(input, tuple(size))


def _keyword_shape(op: str, given: tuple, keyword: Any, name: str) -> tuple:
    """The size arguments of a sizes-taking op: the positional ones, or its keyword."""
    if keyword is not None:
        if given:
            raise TypeError(f"{op}() got multiple values for argument '{name}'")
        return (keyword,)
    if not given:
        raise TypeError(f"{op}() missing 1 required positional argument: '{name}'")
    return given


def view_dtype(input: Tensor, dtype: Any) -> Tensor:
    """`input`'s bytes read as `dtype` (`t.view(dtype)`): same shape for the same element
    size; otherwise the last dimension (stride 1) is scaled by the ratio of the sizes.
    Not differentiable: the result has no autograd history (as in PyTorch, where only a
    view to the same dtype is)."""
    if not isinstance(dtype, DType):
        raise TypeError(
            f"view(): argument 'dtype' must be llgrad.dtype, not {type(dtype).__name__}"
        )
    if dtype is input._dtype:
        return view(input, input._shape)
    old, new = input._dtype.itemsize, dtype.itemsize
    src, dst = _torch_type_word(input._dtype), _torch_type_word(dtype)
    shape, strides, offset = list(input._shape), list(input._strides), input._offset
    if old != new:
        why = f"to view {src} as {dst} (different element sizes)"
        if input.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 {why}")
        if strides[-1] != 1 and shape[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {why}, but got {strides[-1]}")
        if old > new:
            k = old // new
            shape[-1] *= k
            strides = [st * k for st in strides[:-1]] + [1]
            offset *= k
        else:
            k = new // old
            if shape[-1] % k:
                raise RuntimeError(
                    f"self.size(-1) must be divisible by {k} {why}, but got {shape[-1]}"
                )
            if offset % k:
                raise RuntimeError(
                    f"self.storage_offset() must be divisible by {k} {why}, but got {offset}"
                )
            for i, st in enumerate(strides[:-1]):
                if st % k:
                    raise RuntimeError(
                        f"self.stride({i}) must be divisible by {k} {why}, but got {st}"
                    )
            shape[-1] //= k
            strides = [st // k for st in strides[:-1]] + [1]
            offset //= k
    return Tensor._make(input._storage, offset, tuple(shape), tuple(strides), dtype, base=input)


def _torch_type_word(d: Any) -> str:
    """PyTorch's scalar type name of a dtype (Float, Half, Byte, ...)."""
    return {"Bool": "Bool"}.get(_NAMES.get(d, d.name), _NAMES.get(d, d.name))


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return expand(input, other._shape)


@_views_of_many
def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    shape = broadcast_shapes(*(t._shape for t in tensors), op="broadcast_tensors")
    return tuple(expand(t, shape) for t in tensors)


def _slice_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return views.slice_dims(operands[0], attrs["starts"], attrs["stops"], attrs["steps"])


def slice_dim(
    input: Tensor, dim: int, start: int, stop: int, step: int = 1, name: str = "SliceBackward0"
) -> Tensor:
    """`input` restricted to `start:stop:step` along `dim` (already within bounds)."""
    d = normalize_axis(dim, input.ndim, "slice")
    starts = [0] * input.ndim
    stops = list(input._shape)
    steps = [1] * input.ndim
    starts[d], stops[d], steps[d] = start, stop, step
    if _unrecorded(input):
        return views.slice_dims(input, tuple(starts), tuple(stops), tuple(steps))
    return apply(
        "slice",
        (input,),
        {"starts": tuple(starts), "stops": tuple(stops), "steps": tuple(steps)},
        _slice_forward,
        name,
    )


def _needs_a_dimension(input: Tensor, op: str) -> None:
    if input.ndim == 0:
        raise RuntimeError(f"{op}() cannot be applied to a 0-dim tensor (shape [])")


def narrow(input: Tensor, dim: int, start: int | Tensor, length: int) -> Tensor:
    """`length` elements of `input` along `dim` from `start` (an int, or a 0-d integer
    tensor whose value is read, as torch's narrow.Tensor)."""
    if isinstance(start, Tensor):
        if start.ndim != 0 or start._dtype.kind not in "iu":
            raise RuntimeError("narrow(): start must be an 0-dim integral Tensor.")
        start = int(start.item())
    return _narrow(input, dim, start, length)


@_view_function
def _narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """`narrow` with an int `start`."""
    _needs_a_dimension(input, "narrow")
    d = normalize_axis(dim, input.ndim, "narrow")
    n = input._shape[d]
    if not -n <= start <= n:
        raise IndexError(
            f"narrow(): start out of range (expected to be in range of "
            f"[{-n}, {n}], but got {start})"
        )
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start < 0:
        start += n
    if start + length > n:
        raise RuntimeError(
            f"narrow(): start ({start}) + length ({length}) exceeds dimension size ({n})."
        )
    return slice_dim(input, d, start, start + length)


@_view_function
def select(input: Tensor, dim: int, index: int, *, name: str = "SelectBackward0") -> Tensor:
    _needs_a_dimension(input, "select")
    d = normalize_axis(dim, input.ndim, "select")
    n = input._shape[d]
    if not -n <= index < n:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size "
            f"{list(input._shape)} at dimension {d}"
        )
    index %= n
    if _unrecorded(input):
        return views.select(input, d, index)
    part = slice_dim(input, d, index, index + 1)
    return reshape(part, input._shape[:d] + input._shape[d + 1 :], name=name)


@views.copy_replay
def _pad_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    x = operands[0]
    out_t = _infer_pad((TensorType(x._dtype, x._shape),), **attrs)
    out = Tensor._empty(out_t.shape, x._dtype)
    ew.copy_into(out, attrs["value"])
    starts = attrs["lows"]
    stops = tuple(
        lo + (n - 1) * (it + 1) + 1 if n else lo
        for n, lo, it in zip(x._shape, attrs["lows"], attrs["interior"])
    )
    steps = tuple(it + 1 for it in attrs["interior"])
    ew.copy_into(views.slice_dims(out, starts, stops, steps), x)
    return out


def pad_dims(
    input: Tensor,
    lows: Sequence[int],
    highs: Sequence[int],
    interior: Sequence[int] | None = None,
    value: Any = 0,
) -> Tensor:
    """Pad every dimension (low, high, and `interior` gaps between elements)."""
    interior = tuple(interior) if interior is not None else (0,) * input.ndim
    return apply(
        "pad",
        (input,),
        {"lows": tuple(lows), "highs": tuple(highs), "interior": interior, "value": value},
        _pad_forward,
        "ConstantPadNdBackward0",
    )


@views.copy_replay
def _cat_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    axis = attrs["axis"]
    d = ew.promote(list(operands))
    types = tuple(TensorType(d, t._shape) for t in operands)
    out = Tensor._empty(_infer_cat(types, axis).shape, d)
    ax = normalize_axis(axis, out.ndim, "cat")
    offset = 0
    for t in operands:
        n = t._shape[ax]
        starts = [0] * out.ndim
        stops = list(out._shape)
        starts[ax], stops[ax] = offset, offset + n
        ew.copy_into(views.slice_dims(out, tuple(starts), tuple(stops), (1,) * out.ndim), t)
        offset += n
    return out


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat: expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"cat: expected a sequence of Tensors, but element {i} is {type(t).__name__}"
            )
    # PyTorch skips legacy 1-d empty tensors in cat
    kept = [t for t in tensors if not (t.ndim == 1 and t._shape[0] == 0)] or tensors[:1]
    return apply("cat", tuple(kept), {"axis": dim}, _cat_forward, "CatBackward0")


concat = cat
concatenate = cat


_stack_replays: dict[tuple, Any] = {}


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """`tensors` (of one shape) joined along a new dimension `dim`: `cat` of their
    unsqueezed views, recorded as one `StackBackward0`. Unrecorded calls replay the copies
    of the first call of each (layouts, dim) directly on `tensors` (an unsqueezed view
    starts where its tensor does)."""
    if (
        tensors.__class__ in (list, tuple)
        and dim.__class__ is int
        and not interpreters
        and not forward_ad._level[0]
    ):
        try:
            key = (dim, tuple([t._lkey for t in tensors]))
            replay = _stack_replays.get(key)
        except AttributeError:  # (not all tensors: the errors below)
            replay = None
        if replay is not None and not (
            _grad_state.enabled and any(t._requires_grad for t in tensors)
        ):
            return replay.run(tensors)
    if isinstance(tensors, Tensor):
        raise TypeError(
            "stack(): argument 'tensors' must be a tuple or list of Tensors, not Tensor"
        )
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"stack(): expected Tensor as element {i} in argument 0, but got {type(t).__name__}"
            )
    shape = tensors[0]._shape
    for i, t in enumerate(tensors):
        if t._shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got "
                f"{list(shape)} at entry 0 and {list(t._shape)} at entry {i}"
            )
    d = normalize_axis(dim, len(shape) + 1, "stack")
    new = shape[:d] + (1,) + shape[d:]
    plain = all(_unrecorded(t) for t in tensors)
    parts = tuple(
        views.reshape(t, new)
        if plain or _unrecorded(t)
        else reshape(t, new, name="UnsqueezeBackward0")
        for t in tensors
    )
    out = apply("cat", parts, {"axis": d}, _cat_forward, "StackBackward0")
    if plain and dim.__class__ is int and len(_stack_replays) < views.REPLAY_LIMIT:
        replay = views.replay_of(_cat_forward, parts, {"axis": d})
        if replay is not None:
            _stack_replays[(dim, tuple([t._lkey for t in tensors]))] = replay
    return out


@_view_function
@names_op("split")
def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    d = normalize_axis(dim, tensor.ndim, "split")
    n = tensor._shape[d]
    name = "SplitBackward0"
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0:
            raise RuntimeError(f"split: split_size must be positive, got {size}")
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        if n == 0:
            sizes = [0]
    else:
        name = "SplitWithSizesBackward0"
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} "
                f"(input tensor's size at dimension {d}), but got "
                f"split_sizes={sizes}"
            )
    if _recorded_plainly(tensor):
        return _pieces(tensor, d, sizes, name, stacked=False)
    out = []
    start = 0
    for s in sizes:
        out.append(slice_dim(tensor, d, start, start + s, name=name))
        start += s
    return tuple(out)


@_view_function
@names_op("chunk")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    _needs_a_dimension(input, "chunk")
    d = normalize_axis(dim, input.ndim, "chunk")
    n = input._shape[d]
    if n == 0:  # every chunk is empty, as many as asked for
        return tuple(slice_dim(input, d, 0, 0, name="SplitBackward0") for _ in range(chunks))
    size = max(1, -(-n // chunks))
    return split(input, size, d)


@_view_function
@names_op("unbind")
def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    _needs_a_dimension(input, "unbind")
    d = normalize_axis(dim, input.ndim, "unbind")
    if _recorded_plainly(input):
        return _pieces(input, d, [1] * input._shape[d], "UnbindBackward0", stacked=True)
    return tuple(select(input, d, i, name="UnbindBackward0") for i in range(input._shape[d]))


@views.copy_replay
def _flip_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return views.flip_view(operands[0], attrs["axes"])


def flip(input: Tensor, dims: Sequence[int]) -> Tensor:
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    nd = input.ndim
    dims = tuple([normalize_axis(d, nd, "flip") for d in dims])
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"flip: dim {list(dims)} appears multiple times in the list of dims")
    if input.ndim == 0:  # dims 0 and -1 of a scalar flip nothing
        dims = ()
    return apply("flip", (input,), {"axes": dims}, _flip_forward, "FlipBackward0")


def contiguous(input: Tensor) -> Tensor:
    if input.is_contiguous():
        return input
    try:
        return clone(input)
    except MemoryError as e:  # name the op (an expanded view can be huge)
        relabel(e, f"contiguous (of a {input._dtype.name} tensor of shape {list(input._shape)})")
        raise


def _clone_forward(op: str, operands: Any, attrs: Any) -> Tensor:
    return views.clone(operands[0])


def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy of `input` with its own memory (recorded: the gradient passes through);
    `memory_format` lays it out as `lg.channels_last` & co. (`lg.preserve_format` keeps a
    dense tensor's memory order; without it the copy is row-major, llgrad's default)."""
    if memory_format is not None:
        from .tensor_extras import _clone  # circle: functions.tensor_extras -> here

        return _clone(input, memory_format=memory_format)
    if _unrecorded(input):  # what `apply` would do: the copy alone
        return views.clone(input)
    return apply("cast", (input,), {"dtype": input._dtype}, _clone_forward, "CloneBackward0")


# --------------------------------------------------------------------------------------
# Complex <-> real views
# --------------------------------------------------------------------------------------


def reinterpret(
    x: Tensor, dtype: Any, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]
) -> Tensor:
    """A view of `x`'s memory as another dtype (offset and strides in that dtype's units)."""
    base = x._base if x._base is not None else x
    return Tensor._make(x._storage, offset, shape, strides, dtype, base=base)


def _as_real_forward(op: str, operands: Any, attrs: Any) -> Tensor:
    x = operands[0]
    return reinterpret(
        x,
        x._dtype.to_real(),
        2 * x._offset,
        x._shape + (2,),
        tuple(2 * s for s in x._strides) + (1,),
    )


def _as_complex_forward(op: str, operands: Any, attrs: Any) -> Tensor:
    x = operands[0]
    return reinterpret(
        x,
        x._dtype.to_complex(),
        x._offset // 2,
        x._shape[:-1],
        tuple(s // 2 for s in x._strides[:-1]),
    )


# (op, input layout) -> (dtype, shape, strides) of the view `view_as_real`,
# `view_as_complex`, `real` or `imag` made of it, and the offset (in the view's units) as
# (times, plus) of the input's: what an unrecorded call (`_unrecorded`) makes directly
# once a general call of that layout succeeded (an odd offset is refused by
# `view_as_complex`: its calls take the general path)
_reinterpreted: dict[tuple, tuple] = {}


def reinterpreted_view(op: str, input: Any) -> Tensor | None:
    """The view `op` makes of `input` through `_reinterpreted`, or None (not unrecorded,
    not seen, or an odd offset for `view_as_complex`)."""
    if (
        input.__class__ not in DENSE_CLASSES
        or interpreters
        or forward_ad._level[0]
        or (_grad_state.enabled and input._requires_grad)
    ):
        return None
    g = _reinterpreted.get((op, input._lkey))
    if g is None:
        return None
    offset = input._offset
    if g[3] == 0:  # view_as_complex: half the offset, which is even
        if offset % 2:
            return None
        offset //= 2
    else:
        offset = offset * 2 + g[4]
    base = input._base if input._base is not None else input
    return Tensor._make(input._storage, offset, g[1], g[2], g[0], base=base)


def learn_reinterpreted(op: str, input: Tensor, out: Tensor) -> Tensor:
    """Keep where `out`, the view `op` just made of `input` (a general call), lies."""
    if input.__class__ in DENSE_CLASSES and len(_reinterpreted) < VIEW_LIMIT:
        o = input._offset
        times, plus = (0, 0) if op == "view_as_complex" else (2, out._offset - 2 * o)
        _reinterpreted[(op, input._lkey)] = (out._dtype, out._shape, out._strides, times, plus)
    return out


def view_as_real(input: Tensor) -> Tensor:
    """A real view `(..., 2)` of a complex tensor: real and imaginary parts, shared memory."""
    out = reinterpreted_view("view_as_real", input)
    if out is not None:
        return out
    _check_tensor("view_as_real", input)
    if not input._dtype.is_complex:
        raise RuntimeError(
            f"view_as_real is only supported for complex tensors, got {input._dtype.name}"
        )
    out = apply("view_as_real", (input,), None, _as_real_forward, "ViewAsRealBackward0")
    return learn_reinterpreted("view_as_real", input, out) if _unrecorded(input) else out


def view_as_complex(input: Tensor) -> Tensor:
    """A complex view of a float32/float64 tensor `(..., 2)`; PyTorch's layout rules."""
    out = reinterpreted_view("view_as_complex", input)
    if out is not None:
        return out
    _check_tensor("view_as_complex", input)

    out = dispatch_function("view_as_complex", [input], _view_as_complex, (input,))
    return learn_reinterpreted("view_as_complex", input, out) if _unrecorded(input) else out


def _view_as_complex(input: Tensor) -> Tensor:
    d = input._dtype
    if d.name not in ("float32", "float64"):
        raise RuntimeError(
            f"view_as_complex is only supported for float32 and float64 "
            f"tensors, but got a tensor of dtype {d.name}"
        )
    shape, strides = input._shape, input._strides
    if not shape or shape[-1] != 2:
        raise RuntimeError(f"Tensor must have a last dimension of size 2 (shape {list(shape)})")
    if strides[-1] != 1:
        raise RuntimeError(
            f"Tensor must have a last dimension with stride 1 (strides {list(strides)})"
        )
    if any(s % 2 for s in strides[:-1]):
        raise RuntimeError(
            f"Tensor must have a stride divisible by 2 for all but last "
            f"dimension (strides {list(strides)})"
        )
    if input._offset % 2:
        raise RuntimeError(
            f"Tensor must have a storage_offset divisible by 2 (offset {input._offset})"
        )
    return apply("view_as_complex", (input,), None, _as_complex_forward, "ViewAsComplexBackward0")
