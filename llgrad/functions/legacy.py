"""PyTorch's legacy tensor types: `lg.Tensor(...)`, `lg.FloatTensor(...)`, `x.type()`.

Old PyTorch code builds tensors with `torch.Tensor([1, 2])` (data, default dtype) or
`torch.Tensor(2, 3)` (sizes, uninitialized), names types as `torch.LongTensor`, converts with
`x.type(torch.DoubleTensor)` and compares `x.type() == 'torch.FloatTensor'`.

`x.type()` returns PyTorch's strings ('torch.FloatTensor'): a ported program compares
against exactly those, so llgrad answers with them rather than 'llgrad.FloatTensor' (the
one place llgrad prints `torch.`); `x.type(...)` accepts either prefix.
"""

from __future__ import annotations

from typing import Any

from ..device import check_device
from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..tensor import Size, Tensor

__all__ = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "ShortTensor",
    "CharTensor",
    "ByteTensor",
    "BoolTensor",
    "legacy_new",
    "tensor_type",
    "type_name",
]

# dtype -> the middle of PyTorch's legacy type name ('torch.<Name>Tensor')
_NAMES = {
    dt.float32: "Float",
    dt.float64: "Double",
    dt.float16: "Half",
    dt.bfloat16: "BFloat16",
    dt.int64: "Long",
    dt.int32: "Int",
    dt.int16: "Short",
    dt.int8: "Char",
    dt.uint8: "Byte",
    dt.bool_: "Bool",
    dt.complex64: "ComplexFloat",
    dt.complex128: "ComplexDouble",
}
_BY_NAME = {f"{name}Tensor": d for d, name in _NAMES.items()}


def type_name(d: DType) -> str:
    """'torch.FloatTensor' for float32, ... (what `x.type()` returns)."""
    return f"torch.{_NAMES[d]}Tensor"


class _LegacyType(type):
    """The metaclass of `FloatTensor` & co.: calling one builds a tensor of its dtype, and
    `isinstance(x, lg.FloatTensor)` asks whether x is a float32 tensor (as in PyTorch)."""

    dtype: DType

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj._dtype is cls.dtype

    def __call__(cls, *args: Any, **kwargs: Any) -> Tensor:
        return legacy_new(cls.dtype, args, kwargs, cls.__name__)

    def __repr__(cls) -> str:
        return f"<class 'llgrad.{cls.__name__}'>"


def _legacy(name: str, d: DType) -> type:
    return _LegacyType(
        name, (), {"dtype": d, "__doc__": f"{d.name} tensors (legacy type)", "__module__": "llgrad"}
    )


FloatTensor = _legacy("FloatTensor", dt.float32)
DoubleTensor = _legacy("DoubleTensor", dt.float64)
HalfTensor = _legacy("HalfTensor", dt.float16)
BFloat16Tensor = _legacy("BFloat16Tensor", dt.bfloat16)
LongTensor = _legacy("LongTensor", dt.int64)
IntTensor = _legacy("IntTensor", dt.int32)
ShortTensor = _legacy("ShortTensor", dt.int16)
CharTensor = _legacy("CharTensor", dt.int8)
ByteTensor = _legacy("ByteTensor", dt.uint8)
BoolTensor = _legacy("BoolTensor", dt.bool_)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def legacy_new(
    d: DType | None, args: tuple, kwargs: dict[str, Any], name: str = "Tensor"
) -> Tensor:
    """`Tensor()` (empty), `Tensor(2, 3)` / `Tensor(Size)` (uninitialized, of that size),
    `Tensor(data)` (a copy converted to the type's dtype), `Tensor(tensor)` (the tensor
    itself, which must have that dtype). `d` None means the default dtype."""
    from .creation import empty, tensor  # circle: functions.creation -> functions.shape -> here

    kwargs = dict(kwargs)
    check_device(kwargs.pop("device", None), name)
    if kwargs:
        raise TypeError(
            f"{name}(): unexpected keyword arguments {sorted(kwargs)} (the legacy "
            f"constructor takes data or sizes and device=; use llgrad.tensor(data, "
            f"dtype=...) for more)"
        )
    d = d or dt.get_default_dtype()
    if not args:
        return empty(0, dtype=d)
    if all(_is_int(a) for a in args):
        return empty(*args, dtype=d)
    if len(args) > 1:
        raise TypeError(f"{name}(): sizes must be ints, got {args!r}")
    (data,) = args
    if isinstance(data, Size):
        return empty(tuple(data), dtype=d)
    if isinstance(data, Tensor):
        if data._dtype is not d:
            raise TypeError(
                f"{name}(): expected a {d.name} tensor (got {data._dtype.name}); "
                f"convert with .to({d.name}) first"
            )
        return data
    if isinstance(data, (bool, int, float, complex)):
        raise TypeError(f"{name}(): data must be a sequence (got {type(data).__name__})")
    return tensor(data, dtype=d)


def _dtype_of(target: Any) -> DType:
    """The dtype that `x.type(target)` converts to."""
    if isinstance(target, DType):
        return target
    if isinstance(target, _LegacyType):
        return target.dtype
    if target is Tensor:
        return dt.get_default_dtype()
    if isinstance(target, str):
        prefix, _, rest = target.rpartition(".")
        if prefix in ("torch.cuda", "llgrad.cuda"):
            check_device("cuda", f"type({target!r})")
        if prefix in ("torch", "llgrad") and rest in _BY_NAME:
            return _BY_NAME[rest]
        raise ValueError(f"invalid type: {target!r}")
    raise TypeError(f"type(): expected a dtype, a legacy tensor type or its name, got {target!r}")


def tensor_type(
    self: Tensor,
    dtype: Any = None,
    non_blocking: bool = False,
    *,
    memory_format: Any = None,
    **kwargs: Any,
) -> Any:
    """`x.type()` -> 'torch.FloatTensor'; `x.type(dtype | lg.LongTensor | 'torch.LongTensor')`
    -> x converted (x itself when it already has that type). `non_blocking` (or its old
    spelling `async`, which PyTorch still takes with a warning) and `memory_format` are
    accepted; copies on the CPU are always blocking."""
    extra = set(kwargs) - {"async"}
    if extra:
        raise TypeError(f"type() got an unexpected keyword argument '{sorted(extra)[0]}'")
    if memory_format is not None and dtype is not None:
        from .tensor_extras import _in_format  # circle: functions.tensor_extras -> here

        d = _dtype_of(dtype)
        return _in_format(self if d is self._dtype else self.to(d), memory_format, "type", False)
    if dtype is None:
        return type_name(self._dtype)
    d = _dtype_of(dtype)
    if d is self._dtype:
        return self
    from .misc import to  # circle: functions.misc -> functions.shape -> here

    return to(self, d)
