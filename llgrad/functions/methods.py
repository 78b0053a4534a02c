"""Tensor methods and operators, bound from the functions (one definition each)."""

from __future__ import annotations

import functools
from typing import Any

from ..tape import forward as forward_ad
from ..dispatch.apply import apply, interpreters
from ..dispatch.grad_mode import _state as grad_state
from ..eager import elementwise as ew
from ..ir import dtypes as dt
from ..schedule.layout import contiguous_strides
from ..tensor import Tensor
from ..tracer.context import current as trace_context
from . import (
    FAMILIES,
    creation,
    fastpath,
    indexing,
    inplace,
    linalg,
    misc,
    numpy_interop,
    reduction,
    shape,
    sorting,
    elementwise as E,
)
from ._errors import names_op
from .legacy import tensor_type
from .shape import shape_arg


def _reflect(fn: Any) -> Any:
    return lambda self, other: fn(other, self)


def _iop(name: str) -> Any:
    def method(self: Tensor, other: Any) -> Tensor:
        return getattr(self, name)(other)

    return method


def _size_method(fn: Any) -> Any:
    @functools.wraps(fn)
    def method(self: Tensor, *sizes: Any, **kwargs: Any) -> Tensor:
        return fn(self, *sizes, **kwargs)

    return method


def _cast_method(d: dt.DType) -> Any:
    return lambda self: misc.to(self, d)


def bind() -> None:
    T = Tensor
    ops = {
        "__add__": fastpath.binary("add", E.add),
        "__radd__": _reflect(E.add),
        "__sub__": fastpath.binary("sub", E.sub),
        "__rsub__": _reflect(E.sub),
        "__mul__": E._mul_operator,
        "__rmul__": _reflect(E.mul),
        "__truediv__": E._div_operator,
        "__rtruediv__": _rdiv,
        "__floordiv__": E.floor_divide,
        "__rfloordiv__": _reflect(E.floor_divide),
        "__mod__": E.remainder,
        "__rmod__": _reflect(E.remainder),
        "__pow__": E.pow,
        "__rpow__": _reflect(E.pow),
        "__matmul__": linalg.matmul,
        "__rmatmul__": _reflect(linalg.matmul),
        "__neg__": E.neg,
        "__pos__": lambda s: s,
        "__abs__": E.abs,
        "__invert__": lambda s: E.logical_not(s) if s._dtype is dt.bool_ else E.bitwise_not(s),
        "__eq__": E.eq,
        "__ne__": E.ne,
        "__lt__": E.lt,
        "__le__": E.le,
        "__gt__": E.gt,
        "__ge__": E.ge,
        "__and__": lambda a, b: (
            E.logical_and(a, b) if a._dtype is dt.bool_ else E.bitwise_and(a, b)
        ),
        "__or__": lambda a, b: E.logical_or(a, b) if a._dtype is dt.bool_ else E.bitwise_or(a, b),
        "__xor__": lambda a, b: (
            E.logical_xor(a, b) if a._dtype is dt.bool_ else E.bitwise_xor(a, b)
        ),
        "__getitem__": indexing.getitem,
        "__setitem__": names_op("setitem")(inplace.setitem),
        "__iadd__": _iop("add_"),
        "__isub__": _iop("sub_"),
        "__imul__": _iop("mul_"),
        "__itruediv__": _iop("div_"),
        "__ipow__": _iop("pow_"),
    }
    for name, fn in ops.items():
        setattr(T, name, fn)
    T.__rand__ = T.__and__
    T.__ror__ = T.__or__
    T.__rxor__ = T.__xor__
    T.__hash__ = lambda self: id(self)
    T.__array_ufunc__ = numpy_interop.array_ufunc
    T.__array_function__ = numpy_interop.array_function

    plain = {}
    for mod in (E, reduction, shape, linalg, indexing, misc, sorting):
        for name in getattr(mod, "__all__", None) or dir(mod):
            fn = getattr(mod, name)
            if (
                callable(fn)
                and not name.startswith("_")
                and getattr(fn, "__module__", "") == mod.__name__
            ):
                plain[name] = fn
    skip = {
        "elementwise",
        "shape_arg",
        "iota",
        "slice_dim",
        "pad_dims",
        "is_tensor",
        "broadcast_tensors",
        "cat",
        "concat",
        "concatenate",
        "stack",
        "getitem",
        "values_indices",
        "index_backward",
        "IndexNode",
        "IndexScatterNode",
        "numel",
        "slice_all",
        "parse_to_args",
        "complex",
        "polar",
        "reinterpret",
        "view_as_real",
        "view_as_complex",
    }
    for name, fn in plain.items():
        if name in skip or hasattr(T, name) and name in ("shape", "dtype", "ndim"):
            continue
        if name in ("reshape", "view", "permute", "expand", "flip"):
            setattr(T, name, _size_method(fn))
        else:
            setattr(T, name, fn)
    T.size = Tensor.size
    T.numel = Tensor.numel
    T.is_floating_point = Tensor.is_floating_point
    T.is_complex = Tensor.is_complex
    T.view_as = lambda self, other: shape.view(self, other._shape)
    T.reshape_as = lambda self, other: shape.reshape(self, other._shape)
    T.repeat = _repeat
    T.T = property(lambda self: shape.permute(self, tuple(reversed(range(self.ndim)))))
    T.mT = property(lambda self: shape.transpose(self, -2, -1))
    T.H = property(lambda self: E.conj(shape.transpose(self, -2, -1)))
    T.mH = property(lambda self: E.conj(shape.transpose(self, -2, -1)))
    T.real = property(E.real, _set_part("real"))
    T.imag = property(E.imag, _set_part("imag"))
    for name, d in [
        ("float", dt.float32),
        ("double", dt.float64),
        ("half", dt.float16),
        ("bfloat16", dt.bfloat16),
        ("long", dt.int64),
        ("int", dt.int32),
        ("bool", dt.bool_),
        ("short", dt.int16),
        ("char", dt.int8),
        ("byte", dt.uint8),
        ("cfloat", dt.complex64),
        ("cdouble", dt.complex128),
    ]:
        setattr(T, name, _cast_method(d))
    T.new_zeros = _new_sized(creation.zeros, "zeros")
    T.new_ones = _new_sized(creation.ones, "ones")
    T.new_tensor = lambda self, data, **kw: __import__("llgrad").tensor(
        data, **({"dtype": self._dtype} | ({"device": "cuda"} if self.is_cuda else {}) | kw)
    )

    T.type = tensor_type
    for name, fn in inplace.make_inplace_methods().items():
        setattr(T, name, fn)

    for family in FAMILIES:
        for name, fn in family.METHODS.items():
            setattr(T, name, fn)


def _new_sized(make: Any, name: str) -> Any:
    """`t.new_zeros(*size, **kw)` / `t.new_ones`: `make(*size, dtype=t.dtype, **kw)` (`out=`
    goes through `lg.<name>`, which takes it)."""

    def method(self: Tensor, *size: Any, **kw: Any) -> Tensor:
        if "out" in kw:
            return getattr(__import__("llgrad"), name)(*size, **({"dtype": self._dtype} | kw))
        kw.setdefault("dtype", self._dtype)
        if self.is_cuda:
            kw.setdefault("device", "cuda")
        return make(*size, **kw)

    method.__name__ = method.__qualname__ = f"new_{name}"
    method.__doc__ = (
        f"A tensor of `size` filled with {name[:-1]}s, of this tensor's dtype "
        f"unless `dtype=` is given."
    )
    return method


def _rdiv(self: Tensor, other: Any) -> Tensor:
    """`2 / x`, computed as PyTorch does: `x.reciprocal() * 2` (its backward keeps the
    reciprocal, not x, so a later in-place write to x is legal)."""
    return E.mul(E.reciprocal(self), other)


def _set_part(which: str) -> Any:
    """`x.real = v` / `x.imag = v`: copy into the part's view, as PyTorch does."""

    def setter(self: Tensor, value: Any) -> None:
        getattr(E, which)(self).copy_(value) if isinstance(value, Tensor) else getattr(E, which)(
            self
        ).fill_(value)

    return setter


def _repeat_copy(x: Tensor, reps: tuple[int, ...]) -> Tensor:
    """`x.repeat(*reps)` when nothing is recorded: one copy kernel from a view of `x`
    with a stride-0 axis before each dimension (the repeats) into new row-major memory."""
    lead = len(reps) - len(x._shape)
    shape = (1,) * lead + x._shape
    strides = (0,) * lead + x._strides
    tiled: list[int] = []
    src_strides: list[int] = []
    for r, n, s in zip(reps, shape, strides):
        tiled += [r, n]
        src_strides += [0, s]
    out = Tensor._empty(tuple(r * n for r, n in zip(reps, shape)), x._dtype)
    if out.numel():
        tiled_shape = tuple(tiled)
        src = Tensor._make(x._storage, x._offset, tiled_shape, tuple(src_strides), x._dtype)
        dst = Tensor._make(out._storage, 0, tiled_shape, contiguous_strides(tiled_shape), x._dtype)
        ew.copy_into(dst, src)
    return out


@names_op("repeat")
def _repeat(self: Tensor, *sizes: Any, repeats: Any = None) -> Tensor:
    """The tensor tiled `repeats` times along each dimension (ints or a tuple; leading new
    dimensions when there are more repeats than dimensions)."""
    if repeats is not None:
        if sizes:
            raise TypeError("repeat() got multiple values for argument 'repeats'")
        sizes = (repeats,)
    if not sizes:
        raise TypeError("repeat() missing 1 required positional argument: 'repeats'")
    reps = shape_arg(sizes, "repeat")
    if any(r < 0 for r in reps):
        raise RuntimeError(f"repeat: repeats can not be negative, got {list(reps)}")
    if len(reps) < self.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number "
            "of dimensions of tensor"
        )
    if (
        self.__class__ is Tensor
        and not interpreters
        and not forward_ad._level[0]
        and not (self._requires_grad and grad_state.enabled)
        and trace_context() is None
    ):
        return _repeat_copy(self, reps)
    x = self.reshape((1,) * (len(reps) - self.ndim) + self._shape)
    # interleave a new axis before each one, expand it, then merge
    expanded_shape = []
    view_shape = []
    for r, n in zip(reps, x._shape):
        view_shape += [1, n]
        expanded_shape += [r, n]
    y = x.reshape(view_shape).expand(expanded_shape)
    y = shape.reshape(y, tuple(r * n for r, n in zip(reps, x._shape)))
    # a copy always, as torch's: the reshape is a view of `self` when nothing repeats (or
    # an overlapping one when only size-1 dimensions do); the copy is the recorded node
    return apply("cast", (y,), {"dtype": y._dtype}, shape._clone_forward, "RepeatBackward0")
