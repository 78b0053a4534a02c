"""The two leaf ops every graph is made of: `param` (a graph input) and `const` (a literal).

`param` has no shape rule: a parameter's type is given, not inferred, so graphs get their
params from `Builder.param` (and the parser, from the graph header). `const` holds its
payload as an attribute (a scalar, or nested tuples of scalars), which keeps small literals
visible in the IR text and lets passes fold them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import dtypes as dt
from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType

_SCALAR_TYPES = (bool, int, float, complex)


def _infer_param(types: tuple[TensorType, ...], name: str) -> TensorType:
    """Params carry a given type; reaching this means someone built one with `make_node`."""
    raise TypeError(
        f"param: the type of parameter {name!r} cannot be inferred; graph inputs "
        f"are created with Builder.param(type, name) (or in a graph's header "
        f"in the IR text), not as ops"
    )


def _scalar_fits(op: str, v: Any, dtype: dt.DType) -> None:
    """Refuse payload scalars that the dtype cannot hold exactly in kind (or range)."""
    if type(v) not in _SCALAR_TYPES:
        raise TypeError(
            f"{op}: payload elements must be Python bool, int, float or complex, "
            f"got {v!r} ({type(v).__name__}); convert NumPy data with .tolist()"
        )
    if isinstance(v, complex) and not dtype.is_complex:
        raise TypeError(f"{op}: complex payload {v!r} cannot be stored as {dtype.name}")
    if isinstance(v, float) and dtype.kind in "biu":
        raise TypeError(f"{op}: float payload {v!r} cannot be stored as {dtype.name}")
    if type(v) is int:
        if dtype is dt.bool_ and v not in (0, 1):
            raise TypeError(f"{op}: int payload {v} cannot be stored as bool")
        if dtype.is_integer:
            info = np.iinfo(dtype.np)
            if not info.min <= v <= info.max:
                raise OverflowError(
                    f"{op}: payload {v} is out of range for {dtype.name} [{info.min}, {info.max}]"
                )


def _check_payload(value: Any, shape: tuple[int, ...], dtype: dt.DType, where: str) -> None:
    """A nested payload must be rectangular with exactly `shape`; walks level by level."""
    level: list[Any] = [value]
    for depth, size in enumerate(shape):
        nxt: list[Any] = []
        for item in level:
            if not isinstance(item, tuple):
                raise ValueError(
                    f"const: payload has too few levels of nesting for shape "
                    f"{list(shape)} (a scalar at depth {depth}){where}"
                )
            if len(item) != size:
                raise ValueError(
                    f"const: payload has {len(item)} elements at depth {depth} "
                    f"but shape {list(shape)} needs {size}{where}"
                )
            nxt.extend(item)
        level = nxt
    for item in level:
        if isinstance(item, tuple):
            raise ValueError(f"const: payload is nested deeper than shape {list(shape)}{where}")
        _scalar_fits("const", item, dtype)


def _infer_const(
    types: tuple[TensorType, ...], value: Any, dtype: dt.DType, shape: tuple[int, ...]
) -> TensorType:
    if any(s < 0 for s in shape):
        raise ValueError(f"const: shape {list(shape)} has a negative dimension")
    if isinstance(value, tuple):
        _check_payload(value, shape, dtype, f" (dtype {dtype.name})")
    else:
        _scalar_fits("const", value, dtype)  # a scalar payload fills any shape
    return TensorType(dtype, tuple(shape))


def _ref_const(*, value: Any, dtype: dt.DType, shape: tuple[int, ...]) -> np.ndarray:
    """The payload as an array; bfloat16 is held as float32 (the interpreter rounds it)."""
    np_dtype = dt.float32.np if dtype is dt.bfloat16 else dtype.np
    arr = np.array(value, dtype=np_dtype)
    if arr.ndim == 0:
        return np.broadcast_to(arr, shape).copy()
    return arr.reshape(shape)  # only changes empty payloads: () for shape (0, 3)


register(
    OpDef(
        "param",
        Group.PARAM,
        0,
        attrs=(Attr("name", AttrKind.STR, required=True),),
        infer=_infer_param,
        promotion="none",
        doc="A graph input; its type is given by Builder.param.",
    )
)
register(
    OpDef(
        "const",
        Group.CONST,
        0,
        attrs=(
            Attr("value", AttrKind.VALUE, required=True),
            Attr("dtype", AttrKind.DTYPE, required=True),
            Attr("shape", AttrKind.INTS, ()),
        ),
        infer=_infer_const,
        reference=_ref_const,
        promotion="none",
        doc="A literal tensor: a scalar payload broadcast to `shape`, or a nested "
        "payload of exactly `shape`.",
    )
)
