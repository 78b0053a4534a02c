"""The op registry: the single place where an op is defined.

Every op is one `OpDef`: its group, arity and typed attributes, its shape/dtype rule, its
NumPy reference, and either a scalar rule (elementwise primitives, which the code
generator lowers) or a decomposition into other ops (composites). Derivative rules (`vjp`,
`jvp`) are attached to the same entry. Passes ask an op's `group`; they never compare names.

`ir` imports nothing else of llgrad: the op families in `llgrad.ops` fill this table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

from .dtypes import DType
from .types import TensorType


class Group(enum.Enum):
    PARAM = "param"  # a graph input
    CONST = "const"  # a literal tensor (scalar or small array)
    UNARY = "unary"  # elementwise, one input
    BINARY = "binary"  # elementwise, two inputs (broadcast)
    TERNARY = "ternary"  # elementwise, three inputs (where, clamp)
    CAST = "cast"  # elementwise dtype conversion
    REDUCE = "reduce"  # sum/prod/max/min/argmax/argmin over axes
    MOVEMENT = "movement"  # reshape, permute, expand, slice, pad, cat, flip
    INDEX = "index"  # gather / scatter-add over a linear index
    LINALG = "linalg"  # matmul
    RANDOM = "random"  # random number generation
    COLLECTIVE = "collective"  # communication across processes (all_reduce)
    COMPOSITE = "composite"  # defined by a decomposition into other ops


# ops whose result is a view of their first input (shares its memory in eager code)
VIEW_OPS = frozenset({"reshape", "permute", "expand", "slice"})

ELEMENTWISE = frozenset({Group.UNARY, Group.BINARY, Group.TERNARY, Group.CAST})


# How the frontend picks an elementwise op's compute dtype from its operands:
#   same     promote all operands (PyTorch's result_type)            add, mul, maximum
#   float    promote, then integers and bool become the default float  exp, div, sigmoid
#   compare  promote operands, result is bool                        eq, lt
#   bool     operands become bool                                    logical_and
#   where    first operand is a bool condition, the rest promote     where
#   none     no promotion (the op names its dtype)                   cast
PROMOTIONS = ("same", "float", "compare", "bool", "where", "none")


class AttrKind(enum.Enum):
    INT = "int"
    INTS = "ints"
    FLOAT = "float"
    BOOL = "bool"
    DTYPE = "dtype"
    STR = "str"
    SCALAR = "scalar"  # int, float, bool or complex literal
    VALUE = "value"  # a nested list of scalars (const payloads)
    OPT_INT = "opt_int"  # int or None
    OPT_INTS = "opt_ints"  # list of ints or None


@dataclass(frozen=True, slots=True)
class Attr:
    name: str
    kind: AttrKind
    default: Any = None
    required: bool = False


@dataclass(slots=True)
class OpDef:
    """One op. Rules take NumPy arrays (reference), `TensorType`s (infer) or tensors."""

    name: str
    group: Group
    nin: int  # number of tensor inputs; -1 = variadic
    attrs: tuple[Attr, ...] = ()
    infer: Callable[..., TensorType] | None = None
    reference: Callable[..., Any] | None = None
    scalar: Callable[..., Any] | None = None  # elementwise: (s, *values, **attrs) -> value
    decompose: Callable[..., Any] | None = None
    vjp: Callable[..., Any] | None = None
    jvp: Callable[..., Any] | None = None
    backward_name: str | None = None  # PyTorch's grad_fn class name
    promotion: str = "same"  # frontend dtype rule (see PROMOTIONS)
    saves: str = "io"  # what backward keeps: i(nputs), o(utput), or digits naming inputs
    # input k -> the inputs whose gradients read it: k is saved only when one of them needs
    # a gradient (PyTorch saves `x` of `x * y` only when y requires grad, so `x * 4` and
    # `x / 4` keep nothing of x and a later in-place write to x is legal)
    save_for: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # the backward reads its inputs' strides (`ctx.input_strides`): matmul makes a
    # gradient in its input's memory layout, as PyTorch does
    keeps_layout: bool = False
    # composite: eager mode runs its decomposition and its rule as compiled graphs, one
    # per call signature (`compiler.composites`)
    eager_compile: bool = False
    doc: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def normalize_attrs(self, given: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        """Check attribute names and kinds; fill defaults; return them in spec order."""
        known = {a.name for a in self.attrs}
        unknown = set(given) - known
        if unknown:
            raise TypeError(
                f"{self.name}: unknown attribute(s) {sorted(unknown)}; expected {sorted(known)}"
            )
        out = []
        for a in self.attrs:
            if a.name in given:
                out.append((a.name, _coerce(self.name, a, given[a.name])))
            elif a.required:
                raise TypeError(f"{self.name}: missing attribute {a.name!r}")
            else:
                out.append((a.name, a.default))
        return tuple(out)


def _coerce(op: str, a: Attr, v: Any) -> Any:
    k = a.kind
    try:
        if k is AttrKind.INT:
            return _int(v)
        if k is AttrKind.OPT_INT:
            return None if v is None else _int(v)
        if k is AttrKind.INTS:
            return tuple(_int(x) for x in v)
        if k is AttrKind.OPT_INTS:
            return None if v is None else tuple(_int(x) for x in v)
        if k is AttrKind.FLOAT:
            return float(v)
        if k is AttrKind.BOOL:
            if not isinstance(v, bool):
                raise TypeError
            return v
        if k is AttrKind.DTYPE:
            if not isinstance(v, DType):
                raise TypeError
            return v
        if k is AttrKind.STR:
            if not isinstance(v, str):
                raise TypeError
            return v
        if k is AttrKind.SCALAR:
            if v is None and a.default is None:
                return None
            if isinstance(v, bool):
                return v
            if isinstance(v, int):
                return int(v)
            if isinstance(v, float):
                return float(v)
            if isinstance(v, complex):
                return v
            raise TypeError
        if k is AttrKind.VALUE:
            return _freeze(v)
    except (TypeError, ValueError, AttributeError):
        raise TypeError(
            f"{op}: attribute {a.name!r} expects {k.value}, got {v!r} ({type(v).__name__})"
        ) from None
    raise AssertionError(k)


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise TypeError
    return int(v.__index__())


def _freeze(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def get(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} in the registry") from None
