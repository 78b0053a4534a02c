"""PyTorch's type promotion over an op's operands: tensors with dimensions, 0-d tensors and
Python numbers each take part by their category (`dtypes.result_type`), and each op's
promotion rule (`OpDef.promotion`) turns the promoted dtype into the dtypes its scalar rule
reads. Eager dispatch, the tracer and the fused derivative rules all ask here."""

from __future__ import annotations

from typing import Any, Sequence

from . import dtypes as dt
from . import registry
from .dtypes import DType


def promote(operands: Sequence[Any]) -> DType:
    """The dtype PyTorch computes `operands` (tensors and numbers) in."""
    dims: list[DType] = []
    zero: list[DType] = []
    scalars: list[DType] = []
    for o in operands:
        if isinstance(o, _TENSORS):
            (dims if o._shape else zero).append(o._dtype)
        else:
            scalars.append(dt.scalar_dtype(o))
    return dt.result_type(dims, zero, scalars)


class Operand:
    """What promotion reads of a tensor operand: its dtype, and whether it has dimensions
    (a 0-d tensor promotes like a number of its kind). `compute_dtype` takes these in
    place of tensors for values that exist only symbolically (`tape.fused`)."""

    __slots__ = ("_dtype", "_shape")

    def __init__(self, dtype: DType, shape: tuple[int, ...]):
        self._dtype, self._shape = dtype, shape


# the classes that promote as tensors: `Operand`, and the tensor class, which registers
# itself (`register_tensor_class`) from the layer above
_TENSORS: tuple[type[Any], ...] = (Operand,)


def register_tensor_class(cls: type) -> None:
    """Make instances of `cls` (and its subclasses) promote as tensors."""
    global _TENSORS
    if cls not in _TENSORS:
        _TENSORS = _TENSORS + (cls,)


def compute_dtype(opdef: registry.OpDef, operands: Sequence[Any]) -> list[DType]:
    """The dtype each operand (a tensor, an `Operand` or a number) is converted to before
    the op's scalar rule runs."""
    rule = opdef.promotion
    if rule == "none":
        return [o._dtype if isinstance(o, _TENSORS) else dt.scalar_dtype(o) for o in operands]
    if rule == "bool":
        return [dt.bool_] * len(operands)
    if rule == "where":
        c = operands[0]
        if not isinstance(c, _TENSORS) or c._dtype is not dt.bool_:
            got = c._dtype.name if isinstance(c, _TENSORS) else type(c).__name__
            raise TypeError(f"where: expected condition to be a bool tensor, got {got}")
        d = promote(operands[1:])
        return [dt.bool_] + [d] * (len(operands) - 1)
    d = promote(operands)
    if rule == "float" and d.category < 2:
        d = dt.get_default_dtype()
    return [d] * len(operands)


def can_cast(src: DType, dst: DType) -> bool:
    """PyTorch's rule for writing a result into an existing tensor (in-place ops)."""
    return src.category <= dst.category
