"""Elementwise math beyond the core set: inverse trigonometric and hyperbolic functions, special functions, float utilities.

Primitive functions (`asin`, `lgamma`, `erfinv`, ...) are ops of the registry with scalar
rules from `codegen.mathlib` (vectorized, error bounds in docs/mathlib.md) and their own
derivative rules; the rest are written with llgrad functions, so autograd, forward mode,
vmap and `lg.compile` follow from their parts. In-place forms (`x.asin_()`, `lg.relu_(x)`)
are the out-of-place function written back into the tensor, recorded as PyTorch's
in-place ops are.

Differences from PyTorch: complex inputs are refused by the inverse trigonometric and
hyperbolic functions and by the special functions; Python numbers are accepted wherever
a tensor operand is; functions written by composition name the node of their last op
where it is not PyTorch's (`mvlgamma` shows `AddBackward0`).
"""

from __future__ import annotations

import builtins
import ctypes
import math
from typing import Any, Callable

import numpy as _np

from ..dispatch.apply import composite_function, needs_grad
from ..tape.function import Function
from ..dispatch.grad_mode import no_grad
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak
from ..typeinfo import finfo
from . import creation as _creation, elementwise as E, fastpath as _fastpath
from ._errors import names_op
from .creation import full, rand, tensor
from .elementwise import elementwise, logical_or
from .inplace import _rewrite_inplace
from .numpy_interop import plain_number
from .reduction import all as all_, any as any_

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}

Number = bool | int | float


def _export(*names: str) -> None:
    __all__.extend(n for n in names if n not in __all__)


def _method(name: str, fn: Callable[..., Any]) -> None:
    METHODS[name] = fn


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _tensor_arg(op: str, x: Any) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{op}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}"
        )


def _real_float(op: str, *operands: Any) -> dt.DType:
    """The dtype a float function of these operands computes in (integers and bool become
    the default float); complex operands are refused."""
    d = E.ew.promote(list(operands))
    if d.is_complex:
        raise TypeError(f"{op}: not defined for complex inputs (got {d.name})")
    return d if d.is_floating_point else dt.get_default_dtype()


def _as(x: Any, d: dt.DType) -> Any:
    """A tensor operand in dtype `d` (numbers stay numbers)."""
    return x.to(d) if isinstance(x, Tensor) and x._dtype is not d else x


def _floating(op: str, x: Tensor) -> Tensor:
    """`x` as a real floating point tensor (integers: the default float)."""
    _tensor_arg(op, x)
    return _as(x, _real_float(op, x))


def _integral(op: str, *operands: Any) -> dt.DType:
    d = E.ew.promote(list(operands))
    if d.kind not in "iu":
        raise TypeError(f"{op}: only integer tensors are supported, got {d.name}")
    return d


def _named(fn: Callable[..., Any], name: str, doc: str) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _general_elementwise(
    op: str, operands: tuple, attrs: dict[str, Any], name: str | None
) -> Tensor:
    """`elementwise(op, *operands, name=name, **attrs)`: the general call behind
    `fastpath.elementwise` (which runs later calls of the same layouts directly)."""
    return elementwise(op, *operands, name=name, **attrs)


_NO_ATTRS: dict[str, Any] = {}


def _direct(
    op: str, operands: tuple, attrs: dict[str, Any] = _NO_ATTRS, name: str | None = None
) -> Tensor:
    """`elementwise(op, *operands, name=name, **attrs)` through `fastpath.elementwise`.
    Callers use it only where the function's general path would call exactly that (the
    operands are already in the op's dtype: the checks passed for them before)."""
    return _fastpath.elementwise(op, operands, attrs, name, _general_elementwise)


_memmove = ctypes.memmove
_from_buffer = ctypes.c_char.from_buffer


def host_result(a: Any, dtype: dt.DType) -> Tensor:
    """A new tensor of `dtype` holding the values of `a`, a fresh NumPy array of that
    dtype made on the host: its bytes copied in (a contiguous array), so no NumPy view of
    the new tensor is made."""
    out = Tensor._empty(a.shape, dtype)
    n = a.nbytes
    if n:
        if a.flags.c_contiguous and a.flags.writeable:
            _memmove(out._ptr, ctypes.addressof(_from_buffer(a)), n)
        else:
            _np.copyto(out._numpy_view(), a)
    return out


def _same_float(a: Any, b: Any) -> bool:
    """a is a plain float tensor and b a plain tensor of its dtype or a Python float/int."""
    if a.__class__ is not Tensor or not a._dtype.is_floating_point:
        return False
    c = b.__class__
    return c is float or c is int or c is Tensor and b._dtype is a._dtype


# --------------------------------------------------------------------------------------
# Inverse trigonometric and hyperbolic functions (ops with mathlib scalar rules)
# --------------------------------------------------------------------------------------

_TRIG_DOCS = {
    "asin": "arcsine, in [-pi/2, pi/2]; NaN outside [-1, 1]",
    "acos": "arccosine, in [0, pi]; NaN outside [-1, 1]",
    "atan": "arctangent, in (-pi/2, pi/2)",
    "sinh": "hyperbolic sine",
    "cosh": "hyperbolic cosine",
    "asinh": "inverse hyperbolic sine",
    "acosh": "inverse hyperbolic cosine; NaN below 1",
    "atanh": "inverse hyperbolic tangent; +-inf at +-1, NaN beyond",
}

for _op, _what in _TRIG_DOCS.items():
    globals()[_op] = _named(
        E._unary(_op),
        _op,  # (complex: the wrappers below)
        f"Elementwise {_what}.\n\n    Args: input (Tensor; integers become the default float).",
    )
asin: Callable[[Tensor], Tensor] = globals()["asin"]
acos: Callable[[Tensor], Tensor] = globals()["acos"]
atan: Callable[[Tensor], Tensor] = globals()["atan"]
sinh: Callable[[Tensor], Tensor] = globals()["sinh"]
cosh: Callable[[Tensor], Tensor] = globals()["cosh"]
_real_sinh, _real_cosh = sinh, cosh


def _complex_hyperbolic(input: Tensor, odd: bool) -> Tensor:
    """sinh (odd) or cosh of x + iy from real parts: sinh x cos y + i cosh x sin y, and
    cosh x cos y + i sinh x sin y (accurate near 0, unlike (e^z -+ e^-z) / 2)."""
    x, y = E.real(input), E.imag(input)
    sh, ch = _real_sinh(x), _real_cosh(x)
    re, im = (sh, ch) if odd else (ch, sh)
    return E.complex(E.mul(re, E.cos(y)), E.mul(im, E.sin(y)))


def sinh(input: Tensor) -> Tensor:
    """Elementwise hyperbolic sine (complex inputs: sinh x cos y + i cosh x sin y).

    Args: input (Tensor; integers become the default float)."""
    if isinstance(input, Tensor) and input._dtype.is_complex:
        return _complex_hyperbolic(input, True)
    return _real_sinh(input)


def cosh(input: Tensor) -> Tensor:
    """Elementwise hyperbolic cosine (complex inputs: cosh x cos y + i sinh x sin y).

    Args: input (Tensor; integers become the default float)."""
    if isinstance(input, Tensor) and input._dtype.is_complex:
        return _complex_hyperbolic(input, False)
    return _real_cosh(input)


_real_asin, _real_acos, _real_atan = asin, acos, atan
_real_asinh, _real_acosh, _real_atanh = (globals()["asinh"], globals()["acosh"], globals()["atanh"])


def _parts(z: Tensor) -> tuple[Tensor, Tensor]:
    return E.real(z), E.imag(z)


def _casin(z: Tensor) -> Tensor:
    """asin of x + iy (Kahan's formulas: no cancellation, signed zeros pick the side of a
    branch cut as C99): s1 = sqrt(1 - z), s2 = sqrt(1 + z) built part by part,
    asin z = atan2(x, Re(s1 s2)) + i asinh(Im(conj(s1) s2))."""
    x, y = _parts(z)
    a, b = _parts(E.sqrt(E.complex(E.sub(1.0, x), E.neg(y))))
    c, d = _parts(E.sqrt(E.complex(E.add(x, 1.0), y)))
    re = E.atan2(x, E.sub(E.mul(a, c), E.mul(b, d)))
    return E.complex(re, _real_asinh(E.sub(E.mul(a, d), E.mul(b, c))))


def _cacos(z: Tensor) -> Tensor:
    """acos of x + iy (Kahan): 2 atan2(Re s1, Re s2) + i asinh(Im(conj(s2) s1))."""
    x, y = _parts(z)
    a, b = _parts(E.sqrt(E.complex(E.sub(1.0, x), E.neg(y))))
    c, d = _parts(E.sqrt(E.complex(E.add(x, 1.0), y)))
    re = E.mul(E.atan2(a, c), 2.0)
    return E.complex(re, _real_asinh(E.sub(E.mul(c, b), E.mul(d, a))))


def _cacosh(z: Tensor) -> Tensor:
    """acosh of x + iy (Kahan): t1 = sqrt(z - 1), t2 = sqrt(z + 1),
    asinh(Re(conj(t1) t2)) + 2i atan2(Im t1, Re t2)."""
    x, y = _parts(z)
    a, b = _parts(E.sqrt(E.complex(E.sub(x, 1.0), y)))
    c, d = _parts(E.sqrt(E.complex(E.add(x, 1.0), y)))
    re = _real_asinh(E.add(E.mul(a, c), E.mul(b, d)))
    return E.complex(re, E.mul(E.atan2(b, c), 2.0))


def _catanh(z: Tensor) -> Tensor:
    """atanh z = (log1p(z) - log1p(-z)) / 2 (the negation keeps the sign of a zero
    imaginary part, so points on the cuts map as C99)."""
    re, im = _parts(E.sub(E.log1p(z), E.log1p(E.neg(z))))
    return E.complex(E.mul(re, 0.5), E.mul(im, 0.5))  # (halved part by part: inf * 0)


def _times_i(z: Tensor, f: Callable[[Tensor], Tensor]) -> Tensor:
    """-i f(i z) (asinh from asin, atan from atanh), part by part."""
    x, y = _parts(z)
    a, b = _parts(f(E.complex(E.neg(y), x)))
    return E.complex(b, E.neg(a))


def _complex_or_real(
    name: str, real: Callable[[Tensor], Tensor], complex_: Callable[[Tensor], Tensor], what: str
) -> Callable[..., Tensor]:
    def fn(input: Tensor) -> Tensor:
        if isinstance(input, Tensor) and input._dtype.is_complex:
            return complex_(input)
        return real(input)

    return _named(
        fn,
        name,
        f"Elementwise {what}.\n\n    Args: input (Tensor; integers "
        f"become the default float). Complex inputs: the principal "
        f"branch (C99's cuts), composed of complex sqrt/log1p and real "
        f"atan2/asinh.",
    )


asin = _complex_or_real("asin", _real_asin, _casin, _TRIG_DOCS["asin"])
acos = _complex_or_real("acos", _real_acos, _cacos, _TRIG_DOCS["acos"])
atan = _complex_or_real("atan", _real_atan, lambda z: _times_i(z, _catanh), _TRIG_DOCS["atan"])
asinh: Callable[[Tensor], Tensor] = _complex_or_real(
    "asinh", _real_asinh, lambda z: _times_i(z, _casin), _TRIG_DOCS["asinh"]
)
acosh: Callable[[Tensor], Tensor] = _complex_or_real(
    "acosh", _real_acosh, _cacosh, _TRIG_DOCS["acosh"]
)
atanh: Callable[[Tensor], Tensor] = _complex_or_real(
    "atanh", _real_atanh, _catanh, _TRIG_DOCS["atanh"]
)
arcsin, arccos, arctan = asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh
arctan2 = E.atan2
_export(
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "arcsin",
    "arccos",
    "arctan",
    "arcsinh",
    "arccosh",
    "arctanh",
    "arctan2",
)


# --------------------------------------------------------------------------------------
# Binary float utilities
# --------------------------------------------------------------------------------------


@composite_function
def hypot(input: Any, other: Any) -> Tensor:
    """sqrt(input^2 + other^2) without overflow or underflow in the squares.

    Args: input, other (float tensors or numbers, broadcast). hypot(+-inf, NaN) is inf.
    """
    d = _real_float("hypot", input, other)
    if not E.ew.promote([input, other]).is_floating_point:
        raise TypeError(
            f"hypot: not implemented for integer inputs (got {E.ew.promote([input, other]).name})"
        )
    a, b = (
        E.abs(_as(input, d) if isinstance(input, Tensor) else input),
        E.abs(_as(other, d)) if isinstance(other, Tensor) else builtins.abs(other),
    )
    if not isinstance(a, Tensor):
        a, b = b, a
    big = E.maximum(a, b) if isinstance(b, Tensor) else E.clamp(a, min=b)
    small = E.minimum(a, b) if isinstance(b, Tensor) else E.clamp(a, max=b)
    safe = E.where(E.eq(big, 0), 1.0, big)
    r = E.div(small, safe)
    out = E.mul(safe, E.sqrt(E.add(E.mul(r, r), 1)))
    out = E.where(E.eq(big, 0), E.mul(big, 0.0), out)
    # an infinite operand wins over NaN (C99); inf/inf above gave NaN
    inf = E.logical_or(E.eq(a, math.inf), E.eq(b, math.inf))
    return elementwise("where", inf, math.inf, out, name="HypotBackward0")


def copysign(input: Any, other: Any) -> Tensor:
    """|input| with the sign of other (sign bits of -0.0 and NaN included).

    Args: input, other (tensors or numbers, broadcast; integers become the default float).
    Gradient: result / input for input (0 where input is 0), none for other.
    """
    if _same_float(input, other):
        return _direct("copysign", (input, other))
    E._check("copysign", input, other)
    d = _real_float("copysign", input, other)
    return elementwise("copysign", _as(input, d), _as(other, d))


def nextafter(input: Any, other: Any) -> Tensor:
    """The next float after input in the direction of other (C99 `nextafter`).

    Args: input, other (float tensors or numbers of one dtype, broadcast).
    """
    if _same_float(input, other) and other.__class__ is Tensor:
        return _direct("nextafter", (input, other))
    E._check("nextafter", input, other)
    d = E.ew.promote([input, other])
    if not d.is_floating_point:
        raise TypeError(f"nextafter: only floating point tensors are supported, got {d.name}")
    return elementwise("nextafter", input, other)


@composite_function
def fmax(input: Any, other: Any) -> Tensor:
    """Elementwise maximum that ignores NaN (NaN only where both are NaN).

    Args: input, other (tensors or numbers, broadcast). Gradient: to input where
    input >= other or other is NaN, else to other (PyTorch's rule).
    """
    E._check("fmax", input, other)
    d = E.ew.promote([input, other])
    take = E.ge(input, other)
    if d.is_floating_point:
        take = E.logical_or(
            take,
            E.isnan(other)
            if isinstance(other, Tensor)
            else E.ge(input, -math.inf)
            if other != other
            else take,
        )
    return elementwise("where", take, input, other, name="FmaxBackward0")


@composite_function
def fmin(input: Any, other: Any) -> Tensor:
    """Elementwise minimum that ignores NaN (NaN only where both are NaN).

    Args: input, other (tensors or numbers, broadcast). Gradient: to input where
    input <= other or other is NaN, else to other.
    """
    E._check("fmin", input, other)
    d = E.ew.promote([input, other])
    take = E.le(input, other)
    if d.is_floating_point:
        take = E.logical_or(
            take,
            E.isnan(other)
            if isinstance(other, Tensor)
            else E.ge(input, -math.inf)
            if other != other
            else take,
        )
    return elementwise("where", take, input, other, name="FminBackward0")


def ldexp(input: Any, other: Any) -> Tensor:
    """input * 2**other in the float dtype of the operands (integers: the default float).

    Args: input, other (tensors or numbers, broadcast).
    """
    E._check("ldexp", input, other)
    d = E.ew.promote([input, other])
    if d.is_complex:  # a complex input (or exponent), as torch
        e = _as(other, d if isinstance(other, Tensor) and other._dtype.is_complex else d.to_real())
        scale = E.exp2(e) if isinstance(other, Tensor) else 2.0**other
        return elementwise("mul", _as(input, d), scale, name="LdexpBackward0")
    d = _real_float("ldexp", input, other)
    scale = E.exp2(_as(other, d)) if isinstance(other, Tensor) else 2.0**other
    return elementwise("mul", _as(input, d), scale, name="LdexpBackward0")


def frexp(input: Tensor) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) with input = mantissa * 2**exponent, 0.5 <= |mantissa| < 1.

    Args: input (float tensor). The exponent is int32; zero, inf and NaN give
    (input, 0). Gradient: through the mantissa, grad / 2**exponent. Two kernels.
    """
    if input.__class__ is Tensor and input._dtype.is_floating_point:
        return _FrexpResult(
            (_direct("frexp_mantissa", (input,)), _direct("frexp_exponent_int32", (input,)))
        )
    _tensor_arg("frexp", input)
    if not input._dtype.is_floating_point:
        raise TypeError(f"frexp: only supports floating-point dtypes, got {input._dtype.name}")
    return _FrexpResult(
        (elementwise("frexp_mantissa", input), elementwise("frexp_exponent_int32", input))
    )


class _FrexpResult(tuple):
    """`torch.return_types.frexp`: a pair with `.mantissa` and `.exponent`."""

    mantissa = property(lambda self: self[0])
    exponent = property(lambda self: self[1])


def heaviside(input: Tensor, values: Any) -> Tensor:
    """The Heaviside step: 0 below zero, 1 above, `values` at zero.

    Args: input (Tensor), values (tensor of the same dtype, or a number; broadcast).
    Not differentiable: backward raises, as in PyTorch.
    """
    _tensor_arg("heaviside", input)
    if isinstance(values, Tensor) and values._dtype is not input._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    if input._dtype is dt.bool_ and (isinstance(values, (bool, Tensor))):
        return logical_or(input, values)  # True above zero, `values` at zero (False)
    return elementwise("heaviside", input, values)


@composite_function
def float_power(input: Any, exponent: Any) -> Tensor:
    """input ** exponent computed in float64 (complex128 if either is complex).

    Args: input, exponent (tensors or numbers, broadcast).
    """
    E._check("float_power", input, exponent)
    cx = any(
        isinstance(o, Tensor) and o._dtype.is_complex or isinstance(o, complex)
        for o in (input, exponent)
    )
    d = dt.complex128 if cx else dt.float64
    a = _as(input, d)
    b = _as(exponent, d)
    if not isinstance(a, Tensor):
        a = complex(a) if cx else float(a)
    if not isinstance(b, Tensor):
        b = complex(b) if cx else float(b)
    return E.pow(a, b)


@composite_function
def logaddexp(input: Tensor, other: Any) -> Tensor:
    """log(exp(input) + exp(other)) without overflow: max + log1p(exp(-|input - other|)).

    Args: input, other (float or complex tensors or numbers, broadcast; integers become
    the default float). Complex: shifted by the operand of the larger real part.
    """
    return _logaddexp("logaddexp", input, other, E.exp, 1.0, "LogaddexpBackward0")


@composite_function
def logaddexp2(input: Tensor, other: Any) -> Tensor:
    """log2(2**input + 2**other): max + log1p(2**-|input - other|) / ln 2.

    Args: input, other (float tensors or numbers, broadcast).
    """
    return _logaddexp(
        "logaddexp2", input, other, E.exp2, 1.0 / math.log(2.0), "Logaddexp2Backward0"
    )


@names_op("logaddexp")
def _complex_logaddexp(input: Any, other: Any) -> Tensor:
    """log(exp(a) + exp(b)) for complex a, b: m + log1p(exp(n - m)) with m the operand of the
    larger real part; where both real parts are the same infinity, m itself (as torch)."""
    d = E.ew.promote([input, other])
    a = _as(input, d) if isinstance(input, Tensor) else tensor(input, dtype=d)
    b = _as(other, d) if isinstance(other, Tensor) else tensor(other, dtype=d)
    first = E.ge(E.real(a), E.real(b))
    m, n = E.where(first, a, b), E.where(first, b, a)
    rm = E.real(m)
    same_inf = E.logical_and(E.eq(rm, E.real(n)), E.eq(E.abs(rm), math.inf))
    tail = E.log1p(E.exp(E.sub(n, E.where(same_inf, 0.0, m))))
    return E.where(same_inf, m, E.add(m, tail))


def _logaddexp(
    op: str, input: Any, other: Any, exp: Callable[[Any], Tensor], scale: float, name: str
) -> Tensor:
    E._check(op, input, other)
    if op == "logaddexp" and E.ew.promote([input, other]).is_complex:
        return _complex_logaddexp(input, other)
    d = _real_float(op, input, other)
    a, b = _as(input, d), _as(other, d)
    m = (
        E.maximum(a, b)
        if isinstance(a, Tensor) and isinstance(b, Tensor)
        else E.clamp(a, min=b)
        if isinstance(a, Tensor)
        else E.clamp(b, min=a)
    )
    diff = E.abs(E.sub(a, b))
    # equal infinities: |a - b| is NaN, the result is that infinity
    same_inf = E.logical_and(E.eq(a, b), E.eq(E.abs(m), math.inf))
    tail = E.log1p(exp(E.neg(E.where(same_inf, 0.0, diff))))
    if scale != 1.0:
        tail = E.mul(tail, scale)
    return elementwise("where", same_inf, m, E.add(m, tail), name=name)


# --------------------------------------------------------------------------------------
# Unary float utilities
# --------------------------------------------------------------------------------------

_DEG = math.pi / 180.0
_RAD = 180.0 / math.pi


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians: input * pi / 180 (integers become the default float)."""
    if input.__class__ is Tensor and input._dtype.is_floating_point:
        return _direct("mul", (input, _DEG), name="Deg2RadBackward0")
    return _deg2rad(input)


@names_op("deg2rad")
def _deg2rad(input: Tensor) -> Tensor:
    x = _floating("deg2rad", input)
    return elementwise("mul", x, _DEG, name="Deg2RadBackward0")


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees: input * 180 / pi (integers become the default float)."""
    if input.__class__ is Tensor and input._dtype.is_floating_point:
        return _direct("mul", (input, _RAD), name="Rad2DegBackward0")
    return _rad2deg(input)


@names_op("rad2deg")
def _rad2deg(input: Tensor) -> Tensor:
    x = _floating("rad2deg", input)
    return elementwise("mul", x, _RAD, name="Rad2DegBackward0")


def frac(input: Tensor) -> Tensor:
    """The fractional part, input - trunc(input), with input's sign (floats only); one
    kernel. Gradient: the incoming gradient (FracBackward0)."""
    if input.__class__ is Tensor and input._dtype.is_floating_point:
        return _direct("frac", (input,))
    _tensor_arg("frac", input)
    if not input._dtype.is_floating_point:
        raise TypeError(f"frac: not implemented for {input._dtype.name}")
    return elementwise("frac", input)


def fix(input: Tensor) -> Tensor:
    """Rounds toward zero: the same as `trunc`."""
    return E.trunc(input)


def signbit(input: Tensor) -> Tensor:
    """True where the sign bit is set (-0.0 and negative NaN included); bool result (one
    kernel for floats)."""
    if input.__class__ is Tensor and input._dtype.is_floating_point:
        return _direct("signbit", (input,))
    _tensor_arg("signbit", input)
    d = input._dtype
    if d.is_complex:
        raise RuntimeError("signbit is not implemented for complex tensors.")
    if d.kind == "i":
        return E.lt(input, 0)
    if not d.is_floating_point:
        return E.ne(input, input)
    return elementwise("signbit", input)


def isposinf(input: Tensor) -> Tensor:
    """True where input is +inf (bool result; always False for integers)."""
    _tensor_arg("isposinf", input)
    if input._dtype.is_complex:
        raise RuntimeError("isposinf does not support complex inputs.")
    if not input._dtype.is_floating_point:
        return E.ne(input, input)
    return E.eq(input, math.inf)


def isneginf(input: Tensor) -> Tensor:
    """True where input is -inf (bool result; always False for integers)."""
    _tensor_arg("isneginf", input)
    if input._dtype.is_complex:
        raise RuntimeError("isneginf does not support complex inputs.")
    if not input._dtype.is_floating_point:
        return E.ne(input, input)
    return E.eq(input, -math.inf)


def isreal(input: Tensor) -> Tensor:
    """True where the imaginary part is zero (every element of a real tensor)."""
    _tensor_arg("isreal", input)
    if (
        input.__class__ is Tensor
        and not input._dtype.is_complex
        and _creation._trace.current() is None
    ):  # every element: no kernel reads them
        return _creation._create(input._shape, None, True, dt.bool_, False)
    if input._dtype.is_complex:
        return E.eq(E.imag(input), 0)
    return (
        E.eq(input, input)
        if not input._dtype.is_floating_point
        else E.logical_or(E.eq(input, input), E.isnan(input))
    )


def positive(input: Tensor) -> Tensor:
    """input itself (`+x`); bool tensors are refused, as in PyTorch."""
    _tensor_arg("positive", input)
    if input._dtype is dt.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def sgn(input: Tensor) -> Tensor:
    """sign(input) for real tensors; z / |z| (0 at 0) for complex ones."""
    _tensor_arg("sgn", input)
    if not input._dtype.is_complex:
        return E.sign(input)
    mag = E.abs(input)
    zero = E.eq(mag, 0)
    safe = E.where(zero, 1.0, mag)
    return elementwise(
        "where", zero, E.mul(input, 0.0), E.div(input, safe.to(input._dtype)), name="SgnBackward0"
    )


@composite_function
def nan_to_num(
    input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """NaN, +inf and -inf replaced by `nan`, `posinf` and `neginf` (the dtype's largest
    and lowest finite values by default). Integer tensors come back as a copy.

    Args: input (Tensor), nan, posinf, neginf (numbers).
    """
    _tensor_arg("nan_to_num", input)
    d = input._dtype
    if d.is_complex:
        re = nan_to_num(E.real(input), nan, posinf, neginf)
        im = nan_to_num(E.imag(input), nan, posinf, neginf)
        result = E.complex(re, im)
    elif not d.is_floating_point:
        result = input.clone()
    else:
        fi = finfo(d)
        hi = fi.max if posinf is None else posinf
        lo = fi.min if neginf is None else neginf
        y = E.where(E.isnan(input), float(nan), input)
        y = E.where(E.eq(input, math.inf), float(hi), y)
        result = elementwise(
            "where", E.eq(input, -math.inf), float(lo), y, name="NanToNumBackward0"
        )
    return result


@composite_function
def sinc(input: Tensor) -> Tensor:
    """The normalized sinc, sin(pi x) / (pi x), 1 at 0 (integers become the default float;
    complex inputs as torch)."""
    _tensor_arg("sinc", input)
    x = input if input._dtype.is_complex else _floating("sinc", input)
    zero = E.eq(x, 0)
    px = E.mul(E.where(zero, 1.0, x), math.pi)
    return elementwise("where", zero, 1.0, E.div(E.sin(px), px), name="SincBackward0")


@composite_function
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)), with p = input clamped to [eps, 1 - eps] when eps is given.

    Args: input (Tensor; integers become the default float), eps (float or None).
    Gradient: 1 / (p (1 - p)), zero outside [eps, 1 - eps] (PyTorch's rule).
    """
    x = _floating("logit", input)
    if eps is not None:
        x = E.clamp(x, min=float(eps), max=1.0 - float(eps))
    return elementwise("log", E.div(x, E.sub(1.0, x)), name="LogitBackward0")


# --------------------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------------------


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """input where input > threshold, else value."""
    _tensor_arg("threshold", input)
    return elementwise("where", E.gt(input, threshold), input, value, name="ThresholdBackward0")


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(input, alpha) with the self-normalizing constants of Klambauer et al."""
    if inplace:
        return selu_(input)
    return E.elu(_floating("selu", input), alpha=_SELU_ALPHA, scale=_SELU_SCALE)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if inplace:
        return celu_(input, alpha)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu: alpha must not be 0")
    return elementwise(
        "elu",
        _floating("celu", input),
        alpha=float(alpha),
        scale=1.0,
        input_scale=1.0 / float(alpha),
        name="CeluBackward0",
    )


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """Randomized leaky ReLU: negative inputs scaled by a slope drawn uniformly from
    [lower, upper] in training, by (lower + upper) / 2 otherwise.

    Args: input (float Tensor), lower, upper (floats), training (bool), generator.
    The random slopes come from llgrad's generator (PyTorch's stream differs).
    """
    _tensor_arg("rrelu", input)
    if not training:
        return elementwise(
            "leaky_relu", input, negative_slope=(lower + upper) / 2, name="RreluWithNoiseBackward0"
        )

    slope = E.add(
        E.mul(rand(tuple(input.shape), dtype=input._dtype, generator=generator), upper - lower),
        lower,
    )
    return elementwise(
        "where", E.ge(input, 0), input, E.mul(input, slope), name="RreluWithNoiseBackward0"
    )


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """input where |input| > lambd, else 0."""
    _tensor_arg("hardshrink", input)
    keep = E.logical_or(E.gt(input, lambd), E.lt(input, -lambd))
    return elementwise(
        "where",
        keep,
        input,
        0.0 if input._dtype.is_floating_point else 0,
        name="HardshrinkBackward0",
    )


# --------------------------------------------------------------------------------------
# Clamps, integer functions
# --------------------------------------------------------------------------------------


@composite_function
def clamp_min(input: Tensor, min: Any) -> Tensor:
    """max(input, min) with clamp's semantics (a NaN min gives NaN)."""
    _tensor_arg("clamp_min", input)
    if isinstance(min, Tensor):
        return E.clamp(input, min=min)
    return _clamp_one(input, min, None, "ClampMinBackward0")


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """min(input, max) with clamp's semantics (a NaN max gives NaN)."""
    _tensor_arg("clamp_max", input)
    if isinstance(max, Tensor):
        return E.clamp(input, max=max)
    return _clamp_one(input, None, max, "ClampMaxBackward0")


def _clamp_one(input: Tensor, lo: Any, hi: Any, name: str) -> Tensor:
    lo, hi = plain_number(lo), plain_number(hi)
    if not input._dtype.is_floating_point and isinstance(lo if hi is None else hi, float):
        input = input.to(E.ew.promote([input, lo if hi is None else hi]))
    return elementwise("clamp", input, min=lo, max=hi, name=name)


def _gcd_lcm(op: str, input: Tensor, other: Any) -> Tensor:
    """Computed on the host with NumPy (Euclid's loop has a data-dependent length); inside
    `lg.compile` this is a graph break. Plain integer tensors of one dtype, `other` of
    input's shape or 0-d, go straight to NumPy's ufunc, which writes into the result."""
    if (
        input.__class__ is Tensor
        and other.__class__ is Tensor
        and input._dtype is other._dtype
        and input._dtype.kind in "iu"
        and (other._shape == input._shape or not other._shape)
    ):
        out = Tensor._empty(input._shape, input._dtype)
        (_np.gcd if op == "gcd" else _np.lcm)(
            input._numpy_view(), other._numpy_view(), out._numpy_view()
        )
        return out
    import numpy as np

    E._check(op, input, other)
    d = _integral(op, input, other)
    for o in (input, other):
        if getattr(o, "_ctx", None) is not None:
            raise GraphBreak(f"{op} (computed on the host)", user_location())
    a, b = (
        np.asarray(o.detach().numpy() if isinstance(o, Tensor) else o).astype(d.np)
        for o in (input, other)
    )
    with np.errstate(all="ignore"):
        r = (np.gcd if op == "gcd" else np.lcm)(a, b)

    return tensor(np.require(r, requirements="C"), dtype=d)


def gcd(input: Tensor, other: Any) -> Tensor:
    """Greatest common divisor (non-negative; gcd(0, 0) = 0) of integer tensors."""
    return _gcd_lcm("gcd", input, other)


def lcm(input: Tensor, other: Any) -> Tensor:
    """Least common multiple (non-negative; 0 if either is 0) of integer tensors,
    wrapping on overflow as integer arithmetic does."""
    return _gcd_lcm("lcm", input, other)


def bitwise_left_shift(input: Any, other: Any) -> Tensor:
    """input << other for integer tensors (0 for shifts < 0 or >= the bit width).

    Args: input, other (integer tensors or numbers, broadcast).
    """
    E._check("bitwise_left_shift", input, other)
    d = _integral("bitwise_left_shift", input, other)
    a, b = _as(input, d), _as(other, d)
    bits = d.itemsize * 8
    b_ok = E.logical_and(E.ge(b, 0), E.lt(b, bits))
    shifted = E.mul(
        a,
        E.pow(
            2 if not isinstance(b, Tensor) else _two(d),
            E.clamp(b, min=0, max=bits - 1)
            if isinstance(b, Tensor)
            else builtins.min(builtins.max(b, 0), bits - 1),
        ),
    )
    return E.where(b_ok, shifted, 0)


def bitwise_right_shift(input: Any, other: Any) -> Tensor:
    """input >> other for integer tensors (arithmetic for signed types; a shift < 0 or
    >= the bit width gives -1 for negative input, 0 otherwise).

    Args: input, other (integer tensors or numbers, broadcast).
    """
    E._check("bitwise_right_shift", input, other)
    d = _integral("bitwise_right_shift", input, other)
    a, b = _as(input, d), _as(other, d)
    bits = d.itemsize * 8
    top = bits - 1 if d.kind == "i" else bits  # 2^(bits-1) overflows a signed type
    b_ok = E.logical_and(E.ge(b, 0), E.lt(b, top))
    b_safe = (
        E.clamp(b, min=0, max=top - 1)
        if isinstance(b, Tensor)
        else builtins.min(builtins.max(b, 0), top - 1)
    )
    quot = elementwise(
        "floor_divide", a, E.pow(_two(d), b_safe) if isinstance(b_safe, Tensor) else 2**b_safe
    )
    if d.kind == "i":
        rest = E.where(E.lt(a, 0), -1, 0) if isinstance(a, Tensor) else (-1 if a < 0 else 0)
    else:
        rest = 0
    return E.where(b_ok, quot, rest)


def _two(d: dt.DType) -> Tensor:
    return full((), 2, dtype=d)


_export(
    "hypot",
    "copysign",
    "nextafter",
    "fmax",
    "fmin",
    "ldexp",
    "frexp",
    "heaviside",
    "float_power",
    "logaddexp",
    "logaddexp2",
    "deg2rad",
    "rad2deg",
    "frac",
    "fix",
    "signbit",
    "isposinf",
    "isneginf",
    "isreal",
    "positive",
    "sgn",
    "nan_to_num",
    "sinc",
    "logit",
    "threshold",
    "selu",
    "celu",
    "rrelu",
    "hardshrink",
    "clamp_min",
    "clamp_max",
    "gcd",
    "lcm",
    "bitwise_left_shift",
    "bitwise_right_shift",
)


# --------------------------------------------------------------------------------------
# Special functions (ops with mathlib scalar rules)
# --------------------------------------------------------------------------------------


def _special_unary(op: str, doc: str) -> Callable[[Tensor], Tensor]:
    def fn(input: Tensor) -> Tensor:
        _floating(op, input)
        return elementwise(op, input)

    # later calls on a plain tensor of a layout seen before: the direct launch
    return _fastpath.unary(
        op,
        _named(
            fn,
            op,
            doc + "\n\n    Args: input (Tensor; integers become the default float). "
            "Evaluated in double precision for float32 (docs/mathlib.md).",
        ),
    )


erfinv = _special_unary("erfinv", "The inverse error function: +-inf at +-1, NaN beyond.")
lgamma = _special_unary("lgamma", "log|Gamma(input)|: inf at the poles 0, -1, -2, ...")
digamma = _special_unary(
    "digamma",
    "The logarithmic derivative of Gamma: -inf at +0, inf at -0, NaN at negative integers.",
)
i0 = _special_unary("i0", "The modified Bessel function of the first kind of order 0.")
special_i0e = _special_unary("special_i0e", "exp(-|input|) * I0(input).")
special_i1 = _special_unary(
    "special_i1", "The modified Bessel function of the first kind of order 1."
)
special_i1e = _special_unary("special_i1e", "exp(-|input|) * I1(input).")
special_ndtri = _special_unary(
    "special_ndtri",
    "The inverse of the standard normal CDF: -inf at 0, inf at 1, NaN outside [0, 1].",
)
special_log_ndtr = _special_unary(
    "special_log_ndtr", "The log of the standard normal CDF, accurate in both tails."
)
special_erfcx = _special_unary(
    "special_erfcx", "The scaled complementary error function exp(x^2) erfc(x)."
)


def special_zeta(input: Any, other: Any) -> Tensor:
    """The Hurwitz zeta function sum_k (other + k)^-input.

    Args: input (s), other (q): tensors or numbers, broadcast; integers become the default
    float. inf at s = 1 and at non-positive integer q, NaN for s < 1. Gradient: for q only
    (-s zeta(s + 1, q)); asking for s's raises, as in PyTorch.
    """
    E._check("zeta", input, other)
    d = _real_float("zeta", input, other)
    s, q = _as(input, d), _as(other, d)
    if not isinstance(q, Tensor) or not _has_negative_fraction(q):
        return elementwise("special_zeta", s, q)
    return _zeta_negative(s, q, lambda a, b: elementwise("special_zeta", a, b))


def _has_negative_fraction(q: Tensor) -> bool:
    """Whether q holds a negative non-integer (always assumed inside a trace)."""
    if getattr(q, "_ctx", None) is not None:
        return True

    with no_grad():
        qd = q.detach()
        return q.numel() > 0 and bool(
            any_(E.logical_and(E.lt(qd, 0), E.ne(E.floor(qd), qd))).item()
        )


def _zeta_negative(s: Any, q: Tensor, zeta: Callable[[Any, Any], Tensor]) -> Tensor:
    """zeta(s, q) where q < 0 is not an integer (s whole): with q' = q - floor(q) in (0, 1),
    zeta(s, q) = zeta(s, q') + (-1)^s (zeta(s, 1 - q') - zeta(s, 1 - q)), all at positive
    arguments. The unused lanes of each branch get safe arguments (no NaN gradients)."""
    neg = E.logical_and(E.lt(q, 0), E.ne(E.floor(q), q))
    frac_q = E.sub(q, E.floor(q))
    direct = zeta(s, E.where(neg, 1.0, q))
    main = zeta(s, E.where(neg, frac_q, 1.0))
    hi = zeta(s, E.where(neg, E.sub(1.0, frac_q), 1.0))
    lo = zeta(s, E.where(neg, E.sub(1.0, q), 1.0))
    odd = E.eq(E.fmod(s, 2.0), 1.0) if isinstance(s, Tensor) else (s % 2 == 1)
    extra = E.sub(hi, lo)
    if isinstance(odd, bool):
        extra = E.neg(extra) if odd else extra
    else:
        extra = E.where(odd, E.neg(extra), extra)
    whole = E.eq(E.floor(s), s) if isinstance(s, Tensor) else float(s).is_integer()
    comp = E.add(main, extra)
    if isinstance(whole, bool):
        comp = comp if whole else E.mul(comp, math.nan)
    else:
        comp = E.where(whole, comp, math.nan)
    return E.where(neg, comp, direct)


_POLYGAMMA_ATTRS = [{"n": k} for k in range(8)]


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, input) for n >= 1 (for
    negative input by the reflection formula), one kernel for any n.

    Args: n (int >= 0), input (Tensor; integers become the default float).
    """
    if (
        n.__class__ is int
        and 0 <= n < 8
        and input.__class__ is Tensor
        and input._dtype.is_floating_point
    ):
        return _direct("polygamma", (input,), _POLYGAMMA_ATTRS[n])
    return _polygamma(n, input)


@names_op("polygamma")
def _polygamma(n: int, input: Tensor) -> Tensor:
    if isinstance(n, Tensor):
        n = n.item()
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = _floating("polygamma", input)
    return elementwise("polygamma", x, n=n)


@names_op("mvlgamma")
def mvlgamma(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension p:
    sum_{j<p} lgamma(input - j/2) + p (p - 1)/4 log(pi), one kernel (MvlgammaBackward0).

    Args: input (Tensor; integers become the default float), p (int >= 1). Every element
    must exceed (p - 1)/2 (checked eagerly; inside `lg.compile` the check is skipped).
    """
    x = _floating("mvlgamma", input)
    if not isinstance(p, int) or p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if x.__class__ is Tensor:
        if x.numel() and not (x._values() > (p - 1) / 2).all():
            raise RuntimeError("All elements must be greater than (p-1)/2")
    elif getattr(x, "_ctx", None) is None and x.numel():
        with no_grad():
            if not bool(all_(E.gt(x.detach(), (p - 1) / 2)).item()):
                raise RuntimeError("All elements must be greater than (p-1)/2")
    if p < len(_MVLGAMMA_ATTRS):
        return _direct("mvlgamma", (x,), _MVLGAMMA_ATTRS[p])
    return elementwise("mvlgamma", x, p=p)


_MVLGAMMA_ATTRS = [{"p": k} for k in range(16)]


def igamma(input: Tensor, other: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function P(input, other).

    Args: input (a > 0), other (x >= 0): float tensors or numbers, broadcast. Computed
    on the host (SciPy); inside `lg.compile` it is a graph break. Gradient: for other
    only (x^(a-1) e^-x / Gamma(a)); asking for input's raises, as in PyTorch.
    """
    return _igamma("igamma", input, other, False)


def igammac(input: Tensor, other: Tensor) -> Tensor:
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P.

    Args as `igamma`.
    """
    return _igamma("igammac", input, other, True)


@names_op("igamma")
def _igamma(op: str, a: Any, x: Any, upper: bool) -> Tensor:
    import numpy as np
    import scipy.special as sc

    E._check(op, a, x)
    d = _real_float(op, a, x)
    a, x = _as(a, d), _as(x, d)
    for o in (a, x):
        if getattr(o, "_ctx", None) is not None:
            raise GraphBreak(f"{op} (computed on the host with SciPy)", user_location())
    va, vx = (
        o.detach().numpy() if isinstance(o, Tensor) else np.asarray(o, np.float64) for o in (a, x)
    )
    with np.errstate(all="ignore"):
        r = (sc.gammaincc if upper else sc.gammainc)(va.astype(np.float64), vx.astype(np.float64))

    value = tensor(np.require(r, requirements="C"), dtype=d)

    if not needs_grad(tuple(o for o in (a, x) if isinstance(o, Tensor))):
        return value
    return _IncompleteGamma.apply(a, x, value, upper)


def _make_incomplete_gamma() -> Any:
    class IncompleteGamma(Function):
        """Records igamma/igammac: forward hands back the host values; backward is written
        with llgrad functions (double backward works)."""

        @staticmethod
        def forward(ctx: Any, a: Any, x: Any, value: Tensor, upper: bool) -> Tensor:
            ctx.upper = upper
            ctx.save_for_backward(
                a if isinstance(a, Tensor) else None, x if isinstance(x, Tensor) else None
            )
            ctx.numbers = (a, x)
            return value.clone()

        @staticmethod
        def backward(ctx: Any, g: Tensor) -> tuple[Any, ...]:
            if ctx.needs_input_grad[0]:
                raise NotImplementedError(
                    f"the derivative for '{'igammac' if ctx.upper else 'igamma'}"
                    f": input' is not implemented."
                )
            ta, tx = ctx.saved_tensors
            a = ta if ta is not None else ctx.numbers[0]
            x = tx if tx is not None else ctx.numbers[1]
            log_a = lgamma(a) if isinstance(a, Tensor) else math.lgamma(a)
            dens = E.exp(
                E.sub(
                    E.sub(
                        E.xlogy(E.sub(a, 1), x)
                        if isinstance(a, Tensor)
                        else E.mul(E.log(x), a - 1),
                        x,
                    ),
                    log_a,
                )
            )
            gx = E.mul(g, dens)
            return None, (E.neg(gx) if ctx.upper else gx), None, None

    return IncompleteGamma


class _Lazy:
    """The Function class, made on first use (autograd imports functions)."""

    def __init__(self, make: Callable[[], Any]):
        self._make, self._cls = make, None

    def apply(self, *args: Any) -> Any:
        if self._cls is None:
            self._cls = self._make()
        return self._cls.apply(*args)


_IncompleteGamma = _Lazy(_make_incomplete_gamma)

_export("erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "igamma", "igammac")
for _name in ("erfinv", "lgamma", "digamma", "i0", "igamma", "igammac"):
    _method(_name, globals()[_name])
_method("polygamma", lambda self, n: polygamma(n, self))
_method("mvlgamma", mvlgamma)


# --------------------------------------------------------------------------------------
# In-place forms: Tensor methods `x.foo_(...)` and PyTorch's `torch.foo_(x, ...)`
# --------------------------------------------------------------------------------------


def _inplace(name: str, fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """`x.name_(*args)`: x overwritten with `fn(x, *args)`, recorded as PyTorch's in-place
    ops are; the result must keep x's shape and be castable to x's dtype."""

    def checked(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        r = fn(x, *args, **kwargs)
        if r._shape != x._shape:
            raise RuntimeError(
                f"output with shape {list(x._shape)} doesn't match the "
                f"broadcast shape {list(r._shape)}"
            )
        if not E.ew.can_cast(r._dtype, x._dtype):
            raise RuntimeError(
                f"result type {r._dtype.name} can't be cast to the desired "
                f"output type {x._dtype.name}"
            )
        return r

    method = names_op(f"{name}_")(_rewrite_inplace(name, checked))
    method.__doc__ = f"In-place `{name}`: writes `{name}(self, ...)` into self and returns self."
    return method


def _lg() -> Any:
    import llgrad  # circle: llgrad -> functions -> here

    return llgrad


def _late(name: str) -> Callable[..., Tensor]:
    """`lg.<name>` looked up when called (functions of other modules, special functions
    defined further down)."""

    def call(*args: Any, **kwargs: Any) -> Tensor:
        return getattr(_lg(), name)(*args, **kwargs)

    return call


# name of the in-place method -> the out-of-place function it writes back
_INPLACE: dict[str, Callable[..., Tensor]] = {
    "absolute": E.abs,
    "negative": E.neg,
    "sign": E.sign,
    "square": E.square,
    "rsqrt": E.rsqrt,
    "exp2": E.exp2,
    "erf": E.erf,
    "erfc": E.erfc,
    "tan": E.tan,
    "log10": E.log10,
    "log2": E.log2,
    "logical_not": E.logical_not,
    "bitwise_not": E.bitwise_not,
    "cos": E.cos,
    "asin": asin,
    "acos": acos,
    "atan": atan,
    "sinh": sinh,
    "cosh": cosh,
    "asinh": asinh,
    "acosh": acosh,
    "atanh": atanh,
    "arcsin": asin,
    "arccos": acos,
    "arctan": atan,
    "arcsinh": asinh,
    "arccosh": acosh,
    "arctanh": atanh,
    "sgn": sgn,
    "sinc": sinc,
    "frac": frac,
    "fix": fix,
    "deg2rad": deg2rad,
    "rad2deg": rad2deg,
    "nan_to_num": nan_to_num,
    "logit": logit,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
    "erfinv": erfinv,
    "lgamma": lgamma,
    "digamma": digamma,
    "i0": i0,
    "mvlgamma": mvlgamma,
    "igamma": igamma,
    "igammac": igammac,
    "polygamma": lambda x, n: polygamma(n, x),
    "atan2": E.atan2,
    "arctan2": E.atan2,
    "hypot": hypot,
    "copysign": copysign,
    "nextafter": nextafter,
    "ldexp": ldexp,
    "gcd": gcd,
    "lcm": lcm,
    "heaviside": heaviside,
    "xlogy": E.xlogy,
    "fmod": E.fmod,
    "remainder": E.remainder,
    "floor_divide": E.floor_divide,
    "true_divide": E.div,
    "divide": E.div,
    "multiply": E.mul,
    "subtract": E.sub,
    "lerp": E.lerp,
    "logical_and": E.logical_and,
    "logical_or": E.logical_or,
    "logical_xor": E.logical_xor,
    "bitwise_and": E.bitwise_and,
    "bitwise_or": E.bitwise_or,
    "bitwise_xor": E.bitwise_xor,
    "bitwise_left_shift": bitwise_left_shift,
    "bitwise_right_shift": bitwise_right_shift,
    "eq": E.eq,
    "ne": E.ne,
    "lt": E.lt,
    "le": E.le,
    "gt": E.gt,
    "ge": E.ge,
    "greater": E.gt,
    "greater_equal": E.ge,
    "less": E.lt,
    "less_equal": E.le,
    "not_equal": E.ne,
}
for _name, _fn in _INPLACE.items():
    _method(f"{_name}_", _inplace(_name, _fn))


def _float_power_(self: Tensor, exponent: Any) -> Tensor:
    """In-place `float_power`: self must already be float64 (complex128 for complex)."""
    want = (
        dt.complex128
        if self._dtype.is_complex
        or isinstance(exponent, complex)
        or isinstance(exponent, Tensor)
        and exponent._dtype.is_complex
        else dt.float64
    )
    if self._dtype is not want:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {self._dtype.name} but "
            f"the operation's result requires dtype {want.name}"
        )
    return _inplace("float_power", float_power)(self, exponent)


_method("float_power_", _float_power_)

# Methods PyTorch has that are plain calls of the functions above.
for _name in (
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "arcsin",
    "arccos",
    "arctan",
    "arcsinh",
    "arccosh",
    "arctanh",
    "arctan2",
    "hypot",
    "copysign",
    "nextafter",
    "fmax",
    "fmin",
    "ldexp",
    "frexp",
    "heaviside",
    "float_power",
    "logaddexp",
    "logaddexp2",
    "deg2rad",
    "rad2deg",
    "frac",
    "fix",
    "signbit",
    "isposinf",
    "isneginf",
    "isreal",
    "positive",
    "sgn",
    "nan_to_num",
    "sinc",
    "logit",
    "clamp_min",
    "clamp_max",
    "gcd",
    "lcm",
    "bitwise_left_shift",
    "bitwise_right_shift",
):
    _method(_name, globals()[_name])


def _torch_inplace(name: str) -> Callable[..., Tensor]:
    """`torch.<name>_(input, ...)`: the Tensor method `input.<name>_(...)`."""

    def fn(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        _tensor_arg(f"{name}_", input)
        return getattr(input, f"{name}_")(*args, **kwargs)

    return _named(
        fn,
        f"{name}_",
        f"In-place `{name}` of `input` (the method `input.{name}_(...)`); returns input.",
    )


_TORCH_INPLACE = (
    "abs",
    "acos",
    "acosh",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "ceil",
    "clamp",
    "clamp_max",
    "clamp_min",
    "clip",
    "cos",
    "cosh",
    "deg2rad",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "frac",
    "gcd",
    "i0",
    "lcm",
    "ldexp",
    "log",
    "log10",
    "log1p",
    "log2",
    "logit",
    "nan_to_num",
    "neg",
    "negative",
    "rad2deg",
    "reciprocal",
    "relu",
    "round",
    "rsqrt",
    "sigmoid",
    "sin",
    "sinc",
    "sinh",
    "sqrt",
    "square",
    "tan",
    "tanh",
    "trunc",
    "xlogy",
)
for _name in _TORCH_INPLACE:
    globals()[f"{_name}_"] = _torch_inplace(_name)
_export(*(f"{n}_" for n in _TORCH_INPLACE))


@names_op("threshold_")
def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place `threshold`: elements <= threshold become value; returns input."""
    return _inplace("threshold", globals()["threshold"])(input, threshold, value)


def selu_(input: Tensor) -> Tensor:
    """In-place `selu`; returns input."""
    return _inplace("selu", selu)(input)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place `celu`; returns input."""
    return _inplace("celu", celu)(input, alpha)


def rrelu_(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """In-place `rrelu`; returns input."""
    return _inplace("rrelu", rrelu)(input, lower, upper, training, generator)


_export("threshold_", "selu_", "celu_", "rrelu_")
