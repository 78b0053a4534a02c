"""Element types and PyTorch's type-promotion rules.

A `DType` is a small immutable record; the set of dtypes is closed and lives here so that
the IR, the code generator and the frontend agree on one list. Promotion follows PyTorch
(`torch.result_type`): categories bool < integer < floating < complex, and Python scalars
and zero-dimensional tensors only decide the result when they are of a higher category
than the dimensioned tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass(frozen=True, slots=True, eq=False)
class DType:
    """dtypes are singletons: they compare and hash by identity (cheap dict keys)."""

    name: str  # "float32"
    short: str  # "f32": the IR spelling
    itemsize: int  # bytes per element as stored
    kind: str  # "b" bool, "i" signed int, "u" unsigned int, "f" float, "c" complex
    storage: str  # numpy dtype string used to hold the bits ("uint16" for bfloat16)

    # derived from `kind` once (read on every op: plain attributes, not properties)
    is_floating_point: bool = field(init=False, repr=False)
    is_complex: bool = field(init=False, repr=False)
    is_signed: bool = field(init=False, repr=False)
    is_integer: bool = field(init=False, repr=False)
    differentiable: bool = field(init=False, repr=False)  # floating point or complex
    category: int = field(init=False, repr=False)  # 0 bool, 1 integer, 2 floating, 3 complex
    np: np.dtype = field(init=False, repr=False)  # the NumPy dtype storing the bits

    def __post_init__(self) -> None:
        for name, value in (
            ("is_floating_point", self.kind == "f"),
            ("is_complex", self.kind == "c"),
            ("is_signed", self.kind in "ifc"),
            ("is_integer", self.kind in "iu"),
            ("differentiable", self.kind in "fc"),
            ("category", {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}[self.kind]),
            ("np", np.dtype(self.storage)),
        ):
            object.__setattr__(self, name, value)

    @property
    def compute(self) -> "DType":
        """The dtype arithmetic runs in: float16 and bfloat16 compute in float32."""
        return float32 if self in (float16, bfloat16) else self

    def to_real(self) -> "DType":
        return {complex64: float32, complex128: float64}.get(self, self)

    def to_complex(self) -> "DType":
        return {float64: complex128, complex128: complex128}.get(self, complex64)

    def __repr__(self) -> str:
        return f"llgrad.{self.name}"

    def __str__(self) -> str:
        return f"llgrad.{self.name}"

    def __reduce__(self):
        return (from_name, (self.name,))


bool_ = DType("bool", "bool", 1, "b", "bool")
uint8 = DType("uint8", "u8", 1, "u", "uint8")
int8 = DType("int8", "i8", 1, "i", "int8")
int16 = DType("int16", "i16", 2, "i", "int16")
int32 = DType("int32", "i32", 4, "i", "int32")
int64 = DType("int64", "i64", 8, "i", "int64")
float16 = DType("float16", "f16", 2, "f", "float16")
bfloat16 = DType("bfloat16", "bf16", 2, "f", "uint16")
float32 = DType("float32", "f32", 4, "f", "float32")
float64 = DType("float64", "f64", 8, "f", "float64")
complex64 = DType("complex64", "c64", 8, "c", "complex64")
complex128 = DType("complex128", "c128", 16, "c", "complex128")

ALL: tuple[DType, ...] = (
    bool_,
    uint8,
    int8,
    int16,
    int32,
    int64,
    float16,
    bfloat16,
    float32,
    float64,
    complex64,
    complex128,
)
FLOATING: tuple[DType, ...] = (float16, bfloat16, float32, float64)
INTEGER: tuple[DType, ...] = (uint8, int8, int16, int32, int64)
_BY_NAME = {d.name: d for d in ALL} | {d.short: d for d in ALL}
_BY_NUMPY = {np.dtype(d.storage): d for d in ALL if d is not bfloat16}


def from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"unknown dtype {name!r}; known: {', '.join(d.name for d in ALL)}"
        ) from None


def from_numpy(dt: np.dtype) -> DType:
    dt = np.dtype(dt)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        raise TypeError(
            f"NumPy dtype {dt} has no llgrad equivalent; "
            f"supported: {', '.join(str(k) for k in _BY_NUMPY)}"
        ) from None


# ---------------------------------------------------------------------------------------
# Promotion
# ---------------------------------------------------------------------------------------


def _promote_pair(a: DType, b: DType) -> DType:
    if a is b:
        return a
    ca, cb = a.category, b.category
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if hi.is_complex and lo.is_floating_point and lo in (float64,):
            return complex128
        return hi
    if a.kind == "c":
        return complex128 if complex128 in (a, b) else complex64
    if a.kind == "f":
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    if a.kind == "b":
        return a
    # integers: uint8 with a signed type needs the next signed size up
    if uint8 in (a, b):
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    return a if a.itemsize >= b.itemsize else b


def promote_types(a: DType, b: DType) -> DType:
    """`torch.promote_types`: the smallest dtype both `a` and `b` convert to safely."""
    return _promote_pair(a, b)


# Python scalars are "weak": they are represented by the category they stand for.
def scalar_dtype(value: object) -> DType:
    """The default dtype of a Python scalar (`True`, `3`, `2.5`, `1j`)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return get_default_dtype()
    if isinstance(value, (complex, np.complexfloating)):
        return get_default_dtype().to_complex()
    raise TypeError(f"expected a Python number, got {type(value).__name__}")


def result_type(dims: list[DType], zero_dims: list[DType], scalars: list[DType]) -> DType:
    """PyTorch's three-tier promotion (dimensioned tensors, 0-d tensors, Python scalars).

    A lower tier only changes the result when its category is higher than the tiers above
    it; a float scalar never widens a float16 tensor, but makes an int tensor float32.
    """
    result: DType | None = None
    for tier in (dims, zero_dims, scalars):
        if not tier:
            continue
        tier_type = tier[0]
        for d in tier[1:]:
            tier_type = _promote_pair(tier_type, d)
        if result is None:
            result = tier_type
        elif tier_type.category > result.category:
            if result.is_floating_point and tier_type.is_complex:
                result = result.to_complex()
            elif tier is scalars and tier_type.is_floating_point and result.category < 2:
                result = get_default_dtype()
            elif tier is scalars and tier_type.is_complex and result.category < 2:
                result = get_default_dtype().to_complex()
            else:
                result = _promote_pair(result, tier_type)
    assert result is not None, "result_type needs at least one operand"
    return result


_default_dtype: list[DType] = [float32]


def get_default_dtype() -> DType:
    return _default_dtype[0]


_default_dtype_listeners: list[Callable[[], None]] = []


def on_default_dtype_change(fn: Callable[[], None]) -> None:
    """Call `fn()` whenever the default dtype changes (caches of plans whose result dtype
    depends on it clear themselves)."""
    _default_dtype_listeners.append(fn)


def set_default_dtype(d: DType) -> None:
    if d not in (float32, float64, float16, bfloat16):
        raise TypeError(f"set_default_dtype: only floating point dtypes are allowed, got {d}")
    if d is not _default_dtype[0]:
        _default_dtype[0] = d
        for fn in _default_dtype_listeners:
            fn()
