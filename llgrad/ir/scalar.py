"""The scalar language that elementwise ops are written in.

An elementwise op's `scalar` rule is a function `(s, *xs, **attrs) -> value` that builds one
output element from input elements through `s`, an object with the methods below. The
code generator passes an LLVM implementation (`llgrad.codegen.scalar`); nothing in `ops`
knows about LLVM. Values carry their dtype; operands of a binary method share one dtype.
"""

from __future__ import annotations

from typing import Any, Protocol

from .dtypes import DType

# Names accepted by `ScalarBuilder.math`: the code generator emits each as inline,
# vectorizable code (see docs/mathlib.md for error bounds).
MATH_FUNCTIONS = frozenset(
    {
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tan",
        "tanh",
        "sigmoid",
        "erf",
        "erfc",
        "pow",
        "atan2",
        "floor",
        "ceil",
        "round",
        "trunc",
        "abs",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "copysign",
        "nextafter",
        "frexp_mantissa",
        "frexp_exponent",
        "lgamma",
        "digamma",
        "zeta",
        "erfinv",
        "ndtri",
        "erfcx",
        "log_ndtr",
        "i0",
        "i0e",
        "i1",
        "i1e",
        "airy_ai",
        "polygamma",  # one argument and an int parameter: s.math("polygamma", x, order=n)
        "chebyshev_polynomial_t",
        "chebyshev_polynomial_u",
        "chebyshev_polynomial_v",
        "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t",
        "shifted_chebyshev_polynomial_u",
        "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w",
        "hermite_polynomial_h",
        "hermite_polynomial_he",
        "laguerre_polynomial_l",
        "legendre_polynomial_p",  # (x, n): n truncated to int
    }
)

COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


class ScalarBuilder(Protocol):
    def const(self, value: Any, dtype: DType) -> Any: ...
    def dtype_of(self, v: Any) -> DType: ...
    def add(self, a: Any, b: Any) -> Any: ...
    def sub(self, a: Any, b: Any) -> Any: ...
    def mul(self, a: Any, b: Any) -> Any: ...
    def div(self, a: Any, b: Any) -> Any: ...
    def neg(self, a: Any) -> Any: ...
    def floordiv(self, a: Any, b: Any) -> Any: ...
    def rem(self, a: Any, b: Any) -> Any: ...
    def min(self, a: Any, b: Any) -> Any: ...  # NaN-propagating
    def max(self, a: Any, b: Any) -> Any: ...  # NaN-propagating
    def cmp(self, pred: str, a: Any, b: Any) -> Any: ...
    def select(self, cond: Any, a: Any, b: Any) -> Any: ...
    def logical(self, op: str, a: Any, b: Any | None = None) -> Any: ...  # and/or/xor/not
    def bitwise(self, op: str, a: Any, b: Any | None = None) -> Any: ...  # and/or/xor/not
    def cast(self, a: Any, dtype: DType) -> Any: ...
    def math(self, name: str, *args: Any) -> Any: ...
    def isnan(self, a: Any) -> Any: ...
    def shr(self, a: Any, bits: int) -> Any: ...  # logical shift
    def index(self) -> Any: ...  # linear index of the element (random numbers)
