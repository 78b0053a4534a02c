"""Elementwise ops: math, arithmetic, comparisons, logic, where, clamp and casts.

Each entry gives a scalar rule (written in the scalar language of `llgrad.ir.scalar`), a
NumPy reference and PyTorch's backward node name. Inputs of one op share one dtype: the
frontend inserts `cast` nodes for promotion, so these rules never mix types.
"""

from __future__ import annotations

import cmath
import math
from typing import Any, Callable

import numpy as np

from ..ir import dtypes as dt
from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType, broadcast_shapes

# --------------------------------------------------------------------------------------
# Shape and dtype rules
# --------------------------------------------------------------------------------------


def _same_dtype(op: str, types: tuple[TensorType, ...]) -> dt.DType:
    d = types[0].dtype
    for t in types[1:]:
        if t.dtype is not d:
            pretty = ", ".join(str(t) for t in types)
            raise TypeError(f"{op}: operands must share one dtype in the IR, got {pretty}")
    return d


def _infer_unary(op: str, kinds: str) -> Callable[..., TensorType]:
    def infer(types: tuple[TensorType, ...], **attrs: Any) -> TensorType:
        (t,) = types
        if t.dtype.kind not in kinds:
            raise TypeError(f"{op}: not defined for {t.dtype.name} (input {t})")
        return t

    return infer


def _infer_nary(
    op: str, kinds: str, result: dt.DType | None = None, first_is_condition: bool = False
) -> Callable[..., TensorType]:
    def infer(types: tuple[TensorType, ...], **attrs: Any) -> TensorType:
        shape = broadcast_shapes(*(t.shape for t in types), op=op)
        operands = types[1:] if first_is_condition else types
        if first_is_condition and types[0].dtype is not dt.bool_:
            raise TypeError(f"{op}: condition must be bool, got {types[0]}")
        d = _same_dtype(op, operands)
        if d.kind not in kinds:
            raise TypeError(
                f"{op}: not defined for {d.name} (inputs {', '.join(str(t) for t in types)})"
            )
        return TensorType(result or d, shape)

    return infer


FLOAT = "f"  # float ops (integers are promoted to float by the frontend)
NUMERIC = "iuf"
ANY = "biufc"
INTLIKE = "biu"


def _default_promotion(kinds: str, result: dt.DType | None) -> str:
    if result is dt.bool_:
        return "bool" if kinds == "b" else "compare"
    return "float" if kinds in (FLOAT, "fc") else "same"


def unary(
    name: str,
    scalar: Callable[..., Any],
    reference: Callable[..., Any],
    backward: str | None,
    kinds: str = FLOAT,
    attrs: tuple[Attr, ...] = (),
    infer: Callable[..., TensorType] | None = None,
) -> OpDef:
    return register(
        OpDef(
            name,
            Group.UNARY,
            1,
            attrs=attrs,
            infer=infer or _infer_unary(name, kinds),
            reference=reference,
            scalar=scalar,
            backward_name=backward,
            promotion=_default_promotion(kinds, None),
        )
    )


def _infer_to_real(op: str, kinds: str) -> Callable[..., TensorType]:
    """Ops whose complex results are real (abs, angle, real, imag): complex64 -> float32."""
    check = _infer_unary(op, kinds)

    def infer(types: tuple[TensorType, ...], **attrs: Any) -> TensorType:
        t = check(types, **attrs)
        return TensorType(t.dtype.to_real(), t.shape)

    return infer


def binary(
    name: str,
    scalar: Callable[..., Any],
    reference: Callable[..., Any],
    backward: str | None,
    kinds: str = NUMERIC,
    result: dt.DType | None = None,
) -> OpDef:
    return register(
        OpDef(
            name,
            Group.BINARY,
            2,
            infer=_infer_nary(name, kinds, result),
            reference=reference,
            scalar=scalar,
            backward_name=backward,
            promotion=_default_promotion(kinds, result),
        )
    )


def _zero(s: Any, x: Any) -> Any:
    return s.const(0, s.dtype_of(x))


def _one(s: Any, x: Any) -> Any:
    return s.const(1, s.dtype_of(x))


# --------------------------------------------------------------------------------------
# Unary math
# --------------------------------------------------------------------------------------


def _math(fn: str) -> Callable[..., Any]:
    return lambda s, x: s.math(fn, x)


for _name, _np, _bw in [
    ("exp", np.exp, "ExpBackward0"),
    ("exp2", np.exp2, "Exp2Backward0"),
    ("expm1", np.expm1, "Expm1Backward0"),
    ("log", np.log, "LogBackward0"),
    ("log2", np.log2, "Log2Backward0"),
    ("log10", np.log10, "Log10Backward0"),
    ("log1p", np.log1p, "Log1PBackward0"),
    ("sqrt", np.sqrt, "SqrtBackward0"),
    ("sin", np.sin, "SinBackward0"),
    ("cos", np.cos, "CosBackward0"),
    ("tan", np.tan, "TanBackward0"),
    ("tanh", np.tanh, "TanhBackward0"),
]:
    unary(_name, _math(_name), _np, _bw, kinds="fc")


def _ref_erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x).astype(x.dtype)


def _ref_erfc(x: np.ndarray) -> np.ndarray:
    from scipy.special import erfc

    return erfc(x).astype(x.dtype)


def _wide(x: np.ndarray) -> np.ndarray:
    """x in float64 (complex128 for complex): references compute in double."""
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _ref_sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return (1.0 / (1.0 + np.exp(-_wide(x)))).astype(x.dtype)


unary("erf", _math("erf"), _ref_erf, "ErfBackward0")
unary("erfc", _math("erfc"), _ref_erfc, "ErfcBackward0")
unary(
    "rsqrt",
    _math("rsqrt"),
    lambda x: (1 / np.sqrt(_wide(x))).astype(x.dtype),
    "RsqrtBackward0",
    kinds="fc",
)
unary("sigmoid", _math("sigmoid"), _ref_sigmoid, "SigmoidBackward0", kinds="fc")

# Inverse trigonometric and hyperbolic functions (real only: complex arguments are refused).
for _name, _np, _bw in [
    ("asin", np.arcsin, "AsinBackward0"),
    ("acos", np.arccos, "AcosBackward0"),
    ("atan", np.arctan, "AtanBackward0"),
    ("sinh", np.sinh, "SinhBackward0"),
    ("cosh", np.cosh, "CoshBackward0"),
    ("asinh", np.arcsinh, "AsinhBackward0"),
    ("acosh", np.arccosh, "AcoshBackward0"),
    ("atanh", np.arctanh, "AtanhBackward0"),
]:
    unary(_name, _math(_name), (lambda f: lambda x: _quiet(f, x))(_np), _bw)


def _quiet(f: Callable[..., Any], *xs: np.ndarray) -> np.ndarray:
    """A NumPy/SciPy reference without floating point warnings, in the input's dtype."""
    with np.errstate(all="ignore"):
        return np.asarray(f(*xs)).astype(xs[0].dtype)


def _scalar_abs(s: Any, x: Any) -> Any:
    if s.dtype_of(x).is_floating_point or s.dtype_of(x).is_complex:
        return s.math("abs", x)
    if s.dtype_of(x) is dt.bool_ or s.dtype_of(x).kind == "u":
        return x
    return s.select(s.cmp("lt", x, _zero(s, x)), s.neg(x), x)


def _scalar_sign(s: Any, x: Any) -> Any:
    if s.dtype_of(x) is dt.bool_:
        return x
    zero, one = _zero(s, x), _one(s, x)
    pos = s.select(s.cmp("gt", x, zero), one, zero)
    neg = s.select(s.cmp("lt", x, zero), s.neg(one), pos)
    if s.dtype_of(x).is_floating_point:
        return s.select(s.isnan(x), x, neg)
    return neg


unary("neg", lambda s, x: s.neg(x), np.negative, "NegBackward0", kinds="iufc")
unary(
    "abs", _scalar_abs, np.abs, "AbsBackward0", kinds="biufc", infer=_infer_to_real("abs", "biufc")
)
unary("sign", _scalar_sign, np.sign, "SignBackward0", kinds="biuf")
unary(
    "reciprocal",
    lambda s, x: s.div(_one(s, x), x),
    np.reciprocal,
    "ReciprocalBackward0",
    kinds="fc",
)
unary("square", lambda s, x: s.mul(x, x), np.square, "PowBackward0", kinds="iufc")
for _name, _np in [
    ("floor", np.floor),
    ("ceil", np.ceil),
    ("round", np.round),
    ("trunc", np.trunc),
]:
    unary(_name, _math(_name), _np, f"{_name.capitalize()}Backward0")
unary("frac", lambda s, x: s.sub(x, s.math("trunc", x)), lambda x: x - np.trunc(x), "FracBackward0")


def _scalar_round_decimals(s: Any, x: Any, decimals: int) -> Any:
    """PyTorch's round(x, decimals): rint(x * 10^d) / 10^d, or rint(x / 10^-d) * 10^-d."""
    c = s.const(10.0 ** abs(decimals), s.dtype_of(x))
    if decimals >= 0:
        return s.div(s.math("round", s.mul(x, c)), c)
    return s.mul(s.math("round", s.div(x, c)), c)


def _ref_round_decimals(x: np.ndarray, decimals: int) -> np.ndarray:
    c = x.dtype.type(10.0 ** abs(decimals))
    return np.round(x * c) / c if decimals >= 0 else np.round(x / c) * c


unary(
    "round_decimals",
    _scalar_round_decimals,
    _ref_round_decimals,
    "RoundBackward1",
    attrs=(Attr("decimals", AttrKind.INT, 0),),
)


def _scalar_relu(s: Any, x: Any) -> Any:
    zero = _zero(s, x)
    return s.select(s.cmp("le", x, zero), zero, x)  # relu(nan) = nan


def _scalar_silu(s: Any, x: Any) -> Any:
    return s.mul(x, s.math("sigmoid", x))


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _scalar_gelu(s: Any, x: Any, approximate: str) -> Any:
    d = s.dtype_of(x)
    half = s.const(0.5, d)
    if approximate == "tanh":
        inner = s.mul(
            s.const(_SQRT_2_OVER_PI, d),
            s.add(x, s.mul(s.const(0.044715, d), s.mul(x, s.mul(x, x)))),
        )
        return s.mul(s.mul(half, x), s.add(_one(s, x), s.math("tanh", inner)))
    return s.mul(s.mul(half, x), s.add(_one(s, x), s.math("erf", s.mul(x, s.const(_SQRT1_2, d)))))


def _ref_gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        r = 0.5 * x64 * (1 + np.tanh(_SQRT_2_OVER_PI * (x64 + 0.044715 * x64**3)))
    else:
        r = 0.5 * x64 * (1 + _ref_erf(x64 * _SQRT1_2))
    return r.astype(x.dtype)


def _scalar_softplus(s: Any, x: Any, beta: float, threshold: float) -> Any:
    d = s.dtype_of(x)
    bx = s.mul(x, s.const(beta, d))
    soft = s.div(s.math("log1p", s.math("exp", bx)), s.const(beta, d))
    return s.select(s.cmp("gt", bx, s.const(threshold, d)), x, soft)


def _ref_softplus(x: np.ndarray, beta: float, threshold: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        r = np.where(x64 * beta > threshold, x64, np.log1p(np.exp(beta * x64)) / beta)
    return r.astype(x.dtype)


unary(
    "relu",
    _scalar_relu,
    lambda x: np.where(x <= 0, np.zeros_like(x), x),
    "ReluBackward0",
    kinds=NUMERIC,
)
unary("silu", _scalar_silu, lambda x: (x * _ref_sigmoid(x)).astype(x.dtype), "SiluBackward0")
unary(
    "gelu",
    _scalar_gelu,
    _ref_gelu,
    "GeluBackward0",
    attrs=(Attr("approximate", AttrKind.STR, "none"),),
)
unary(
    "softplus",
    _scalar_softplus,
    _ref_softplus,
    "SoftplusBackward0",
    attrs=(Attr("beta", AttrKind.FLOAT, 1.0), Attr("threshold", AttrKind.FLOAT, 20.0)),
)


def _scalar_leaky_relu(s: Any, x: Any, negative_slope: float) -> Any:
    return s.select(
        s.cmp("gt", x, _zero(s, x)), x, s.mul(x, s.const(negative_slope, s.dtype_of(x)))
    )


def _ref_leaky_relu(x: np.ndarray, negative_slope: float) -> np.ndarray:
    return np.where(x > 0, x, x * np.asarray(negative_slope, x.dtype)).astype(x.dtype)


def _scalar_elu(s: Any, x: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """scale * x for x > 0, scale * alpha * expm1(input_scale * x) otherwise (elu, selu
    and celu are this op with different constants, as in PyTorch)."""
    d = s.dtype_of(x)
    neg = s.mul(s.const(scale * alpha, d), s.math("expm1", s.mul(x, s.const(input_scale, d))))
    return s.select(s.cmp("gt", x, _zero(s, x)), s.mul(x, s.const(scale, d)), neg)


def _ref_elu(x: np.ndarray, alpha: float, scale: float, input_scale: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        r = np.where(x64 > 0, scale * x64, scale * alpha * np.expm1(input_scale * x64))
    return r.astype(x.dtype)


unary(
    "leaky_relu",
    _scalar_leaky_relu,
    _ref_leaky_relu,
    "LeakyReluBackward0",
    attrs=(Attr("negative_slope", AttrKind.FLOAT, 0.01),),
)
unary(
    "elu",
    _scalar_elu,
    _ref_elu,
    "EluBackward0",
    attrs=(
        Attr("alpha", AttrKind.FLOAT, 1.0),
        Attr("scale", AttrKind.FLOAT, 1.0),
        Attr("input_scale", AttrKind.FLOAT, 1.0),
    ),
)
register(
    OpDef(
        "isnan",
        Group.UNARY,
        1,
        reference=np.isnan,
        scalar=lambda s, x: s.isnan(x),
        infer=lambda types: TensorType(dt.bool_, types[0].shape),
        promotion="none",
    )
)
register(
    OpDef(
        "logical_not",
        Group.UNARY,
        1,
        infer=_infer_unary("logical_not", "b"),
        reference=np.logical_not,
        scalar=lambda s, x: s.logical("not", x),
        promotion="bool",
    )
)
unary("bitwise_not", lambda s, x: s.bitwise("not", x), np.invert, None, kinds=INTLIKE)


# --------------------------------------------------------------------------------------
# Binary arithmetic
# --------------------------------------------------------------------------------------


def _ref_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b).astype(a.dtype)


def _ref_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if a.dtype.kind in "iu":
            if np.any(b < 0):
                raise ValueError("pow: integers to negative integer powers are not allowed")
        return np.power(a, b)


def _scalar_pow(s: Any, a: Any, b: Any) -> Any:
    return s.math("pow", a, b)  # the code generator handles float and integer powers


def _ref_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.floor_divide(a, b)


def _ref_truncdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.trunc(np.true_divide(a, b)).astype(np.result_type(a, b))


def _ref_rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.remainder(a, b)


def _ref_fmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if a.dtype.kind in "iub":
            return np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))).astype(a.dtype)
        return np.fmod(a, b)


binary("add", lambda s, a, b: s.add(a, b), np.add, "AddBackward0", kinds="iufc")
binary("sub", lambda s, a, b: s.sub(a, b), np.subtract, "SubBackward0", kinds="iufc")
binary("mul", lambda s, a, b: s.mul(a, b), np.multiply, "MulBackward0", kinds="biufc")
binary("div", lambda s, a, b: s.div(a, b), _ref_div, "DivBackward0", kinds="fc")
binary("pow", _scalar_pow, _ref_pow, "PowBackward1", kinds="iufc")
binary("maximum", lambda s, a, b: s.max(a, b), np.maximum, "MaximumBackward0", kinds="biuf")
binary("minimum", lambda s, a, b: s.min(a, b), np.minimum, "MinimumBackward0", kinds="biuf")
binary("floor_divide", lambda s, a, b: s.floordiv(a, b), _ref_floordiv, None, kinds=NUMERIC)
# float division rounded toward zero (div's rounding_mode="trunc"), infinities included
binary(
    "trunc_divide", lambda s, a, b: s.math("trunc", s.div(a, b)), _ref_truncdiv, None, kinds=FLOAT
)
binary("remainder", lambda s, a, b: s.rem(a, b), _ref_rem, "RemainderBackward0", kinds=NUMERIC)
binary("fmod", lambda s, a, b: s.fmod(a, b), _ref_fmod, "FmodBackward1", kinds=NUMERIC)
binary("atan2", lambda s, a, b: s.math("atan2", a, b), np.arctan2, "Atan2Backward0", kinds=FLOAT)
binary(
    "copysign",
    lambda s, a, b: s.math("copysign", a, b),
    np.copysign,
    "CopysignBackward0",
    kinds=FLOAT,
)
binary(
    "nextafter",
    lambda s, a, b: s.math("nextafter", a, b),
    np.nextafter,
    "NextafterBackward0",
    kinds=FLOAT,
)


def _scalar_heaviside(s: Any, x: Any, v: Any) -> Any:
    zero = _zero(s, x)
    step = s.select(s.cmp("gt", x, zero), _one(s, x), zero)  # NaN: 0, as PyTorch
    return s.select(s.cmp("eq", x, zero), v, step)


def _ref_heaviside(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(x == 0, v, (x > 0).astype(x.dtype)).astype(np.result_type(x, v))


# no derivative rule: backward raises (PyTorch has none either)
binary("heaviside", _scalar_heaviside, _ref_heaviside, "HeavisideBackward0", kinds=NUMERIC)


# Special functions (scalar rules in codegen.mathlib, evaluated in double; see
# docs/mathlib.md for their error bounds). References are SciPy's.


def _sp(name: str) -> Callable[..., np.ndarray]:
    def ref(*xs: np.ndarray) -> np.ndarray:
        import scipy.special as sc

        return _quiet(getattr(sc, name), *xs)

    return ref


for _name, _sc, _bw in [
    ("lgamma", "gammaln", "LgammaBackward0"),
    ("digamma", "psi", "DigammaBackward0"),
    ("erfinv", "erfinv", "ErfinvBackward0"),
    ("i0", "i0", "I0Backward0"),
    ("special_i0e", "i0e", "SpecialI0EBackward0"),
    ("special_i1", "i1", "SpecialI1Backward0"),
    ("special_i1e", "i1e", "SpecialI1EBackward0"),
    ("special_ndtri", "ndtri", "SpecialNdtriBackward0"),
    ("special_log_ndtr", "log_ndtr", "SpecialLogNdtrBackward0"),
    ("special_erfcx", "erfcx", "SpecialErfcxBackward0"),
]:
    _fn = _name.replace("special_", "")
    unary(_name, _math(_fn), _sp(_sc), _bw)


def _scalar_polygamma(s: Any, x: Any, n: int) -> Any:
    """digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x), negative x by reflection
    (mathlib's polygamma of a fixed order)."""
    if n == 0:
        return s.math("digamma", x)
    return s.math("polygamma", x, order=n)


def _ref_polygamma(x: np.ndarray, n: int) -> np.ndarray:
    import scipy.special as sc

    return _quiet(lambda v: sc.polygamma(n, v), x)


unary(
    "polygamma",
    _scalar_polygamma,
    _ref_polygamma,
    "PolygammaBackward0",
    attrs=(Attr("n", AttrKind.INT, 0),),
)
binary(
    "special_zeta",
    lambda s, a, b: s.math("zeta", a, b),
    _sp("zeta"),
    "SpecialZetaBackward0",
    kinds=FLOAT,
)


def _scalar_mvlgamma(s: Any, x: Any, p: int) -> Any:
    """sum_{j<p} lgamma(x - j/2) + p (p - 1)/4 log(pi), each step in x's dtype."""
    d = s.dtype_of(x)
    total = s.math("lgamma", x)
    for j in range(1, p):
        total = s.add(total, s.math("lgamma", s.sub(x, s.const(j / 2, d))))
    return s.add(total, s.const(p * (p - 1) / 4 * math.log(math.pi), d))


def _ref_mvlgamma(x: np.ndarray, p: int) -> np.ndarray:
    import scipy.special as sc

    return _quiet(
        lambda v: (
            sum(sc.gammaln(v - j / 2) for j in range(p)) + p * (p - 1) / 4 * math.log(math.pi)
        ),
        x,
    )


unary(
    "mvlgamma",
    _scalar_mvlgamma,
    _ref_mvlgamma,
    "MvlgammaBackward0",
    attrs=(Attr("p", AttrKind.INT, 1),),
)


def _scalar_spherical_bessel_j0(s: Any, x: Any) -> Any:
    """sin(x) / x: 1 at 0, 0 at +-inf (PyTorch's values)."""
    d = s.dtype_of(x)
    r = s.div(s.math("sin", x), x)
    r = s.select(s.cmp("eq", x, s.const(0.0, d)), s.const(1.0, d), r)
    return s.select(s.cmp("eq", s.math("abs", x), s.const(math.inf, d)), s.const(0.0, d), r)


def _ref_spherical_bessel_j0(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(np.isinf(x), 0.0, np.where(x == 0, 1.0, np.sin(x) / x)).astype(x.dtype)


# no derivative, as in PyTorch (the function detaches)
unary("special_spherical_bessel_j0", _scalar_spherical_bessel_j0, _ref_spherical_bessel_j0, None)


def _ref_airy_ai(x: np.ndarray) -> np.ndarray:
    """SciPy's Ai, with PyTorch's values at +-inf (NaN) and above 103.892 (0)."""
    import scipy.special as sc

    with np.errstate(all="ignore"):
        r = sc.airy(x.astype(np.float64))[0]
        r = np.where(np.isinf(x), np.nan, np.where(x > 103.892, 0.0, r))
    return r.astype(x.dtype)


# mathlib's Ai (PyTorch's CPU algorithm); no derivative, as in PyTorch
unary("special_airy_ai", lambda s, x: s.math("airy_ai", x), _ref_airy_ai, None)


def _ref_polynomial(name: str) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, n: np.ndarray) -> np.ndarray:
        return _numpy_polynomial(name, x, n)

    return ref


# kind -> the degree above which PyTorch uses the closed form (unshifted, shifted)
_CLOSED_ABOVE = {"t": (6, 6), "u": (8, 6), "v": (8, 6), "w": (8, 4)}


def _numpy_polynomial(name: str, x: Any, n: Any) -> Any:
    """The NumPy reference of the polynomial ops (`name` as in torch.special): element by
    element in the operands' dtype, PyTorch's definition (the registry's `reference`)."""
    x, n = np.broadcast_arrays(np.asarray(x), np.asarray(n))
    t = np.result_type(x.dtype, n.dtype).type
    out = np.empty(x.shape, t)
    for i in np.ndindex(x.shape):
        out[i] = _polynomial_value(name, t(x[i]), float(n[i]), t)
    return out


def _polynomial_value(name: str, x: Any, nv: float, t: Any) -> Any:
    k = int(nv) if abs(nv) < 2.0**63 else -1
    one, nan_exit = t(1.0), True
    if k < 0:
        return t(0.0)
    if "chebyshev" in name:
        kind, shifted = name[-1], name.startswith("shifted")
        sgn = 1 if k % 2 == 0 else -1
        u = x + x - one if shifted else x
        if x == 1:
            return t({"t": 1, "u": k + 1, "v": 1, "w": 2 * k + 1}[kind])
        if x == (0 if shifted else -1):
            return t(sgn * {"t": 1, "u": k + 1, "v": 2 * k + 1, "w": 1}[kind])
        if k > _CLOSED_ABOVE[kind][shifted] and abs(u) < 1:
            th = np.arccos(u)
            if kind == "t":
                return np.cos(t(k) * th)
            if kind == "u":
                st = np.sin(th)
                return (
                    np.sin(t(k + 1) * th) / st if st != 0 else t(k + 1) * np.cos(t(k + 1) * th) / u
                )
            arg, half = (t(k) + t(0.5)) * th, th / t(2.0)
            if kind == "v":
                return np.cos(arg) / np.cos(half) if np.sin(half) != 1 else t(sgn * (2 * k + 1))
            if np.cos(half) != 1:
                return np.sin(arg) / np.sin(half)
            return t(2 * k + 1) if x > 0 and not shifted else t(sgn)
        p1 = {"t": u, "u": u + u, "v": u + u - one, "w": u + u + one}[kind]

        def step(m: int, q: Any, p: Any) -> Any:
            return (u + u) * q - p
    elif "hermite" in name:
        he, nan_exit = name.endswith("he"), False
        if k > (512 if t is np.float64 else 128):
            return t(np.nan)
        p1 = x if he else x + x

        def step(m: int, q: Any, p: Any) -> Any:
            return (x if he else x + x) * q - t((m - 1) * (1 if he else 2)) * p
    elif "laguerre" in name:
        if x == 0:
            return one
        p1 = one - x

        def step(m: int, q: Any, p: Any) -> Any:
            return ((t(2 * (m - 1)) + (one - x)) * q - t(m - 1) * p) / t(m)
    else:
        if abs(x) == 1:
            return one if x > 0 or k % 2 == 0 else -one
        p1 = x

        def step(m: int, q: Any, p: Any) -> Any:
            return (t(2 * m - 1) * x * q - t(m - 1) * p) / t(m)

    if k == 0:
        return one
    p, q = one, p1
    for m in range(2, k + 1):
        if nan_exit and q != q:
            break
        p, q = q, step(m, q, p)
    return q


# torch.special's orthogonal polynomials P(x, n): no derivative (results never require
# grad: the functions detach), loops over the degree in mathlib
for _name in (
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
    "legendre_polynomial_p",
):
    binary(
        f"special_{_name}",
        (lambda f: lambda s, x, n: s.math(f, x, n))(_name),
        _ref_polynomial(_name),
        None,
        kinds=FLOAT,
    )
# frexp's two results, each an op (the exponent as a float: the function casts it to int32)
unary("frexp_mantissa", _math("frexp_mantissa"), lambda x: np.frexp(x)[0], "FrexpBackward0")
unary("frexp_exponent", _math("frexp_exponent"), lambda x: np.frexp(x)[1].astype(x.dtype), None)
# the exponent as frexp returns it (int32), in one kernel
register(
    OpDef(
        "frexp_exponent_int32",
        Group.UNARY,
        1,
        reference=lambda x: np.frexp(x)[1].astype(np.int32),
        scalar=lambda s, x: s.cast(s.math("frexp_exponent", x), dt.int32),
        infer=lambda types: TensorType(dt.int32, types[0].shape),
        promotion="none",
    )
)
# the sign bit of a float (-0.0 and negative NaN included): copysign(1, x) < 0
register(
    OpDef(
        "signbit",
        Group.UNARY,
        1,
        reference=np.signbit,
        scalar=lambda s, x: s.cmp("lt", s.math("copysign", _one(s, x), x), _zero(s, x)),
        infer=lambda types: TensorType(dt.bool_, types[0].shape),
        promotion="none",
    )
)

for _name, _np in [
    ("eq", np.equal),
    ("ne", np.not_equal),
    ("lt", np.less),
    ("le", np.less_equal),
    ("gt", np.greater),
    ("ge", np.greater_equal),
]:
    binary(
        _name,
        (lambda p: lambda s, a, b: s.cmp(p, a, b))(_name),
        _np,
        None,
        kinds=ANY if _name in ("eq", "ne") else "biuf",
        result=dt.bool_,
    )  # no complex <

for _name, _np in [("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)]:
    binary(
        f"logical_{_name}",
        (lambda p: lambda s, a, b: s.logical(p, a, b))(_name),
        _np,
        None,
        kinds="b",
        result=dt.bool_,
    )
for _name, _np in [("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor)]:
    binary(
        f"bitwise_{_name}",
        (lambda p: lambda s, a, b: s.bitwise(p, a, b))(_name),
        _np,
        None,
        kinds=INTLIKE,
    )


# --------------------------------------------------------------------------------------
# Ternary: where and clamp
# --------------------------------------------------------------------------------------

register(
    OpDef(
        "where",
        Group.TERNARY,
        3,
        infer=_infer_nary("where", ANY, first_is_condition=True),
        reference=lambda c, a, b: np.where(c, a, b),
        scalar=lambda s, c, a, b: s.select(c, a, b),
        backward_name="WhereBackward0",
        promotion="where",
    )
)


def _scalar_clamp(s: Any, x: Any, min: Any, max: Any) -> Any:
    d = s.dtype_of(x)
    y = x
    if min is not None:
        lo = s.const(min, d)
        y = s.select(s.cmp("lt", y, lo), lo, y)  # NaN stays NaN, as in PyTorch
    if max is not None:
        hi = s.const(max, d)
        y = s.select(s.cmp("gt", y, hi), hi, y)
    return y


def _ref_clamp(x: np.ndarray, min: Any, max: Any) -> np.ndarray:
    y = x
    if min is not None:
        y = np.where(y < min, np.asarray(min, dtype=x.dtype), y)
    if max is not None:
        y = np.where(y > max, np.asarray(max, dtype=x.dtype), y)
    return y.astype(x.dtype)


register(
    OpDef(
        "clamp",
        Group.UNARY,
        1,
        attrs=(Attr("min", AttrKind.SCALAR), Attr("max", AttrKind.SCALAR)),
        infer=_infer_unary("clamp", NUMERIC),
        reference=_ref_clamp,
        scalar=_scalar_clamp,
        backward_name="ClampBackward1",
    )
)


# --------------------------------------------------------------------------------------
# Casts
# --------------------------------------------------------------------------------------


def _ref_cast(x: np.ndarray, dtype: dt.DType) -> np.ndarray:
    target = dt.float32.np if dtype is dt.bfloat16 else dtype.np
    with np.errstate(all="ignore"):
        if x.dtype.kind == "c" and dtype.kind != "c":
            x = x.real if dtype is not dt.bool_ else (x != 0)  # PyTorch keeps the real part
        if dtype.kind in "iu" and x.dtype.kind == "f":
            x = np.trunc(x)
        return x.astype(target)


register(
    OpDef(
        "cast",
        Group.CAST,
        1,
        attrs=(Attr("dtype", AttrKind.DTYPE, required=True),),
        infer=lambda types, dtype: TensorType(dtype, types[0].shape),
        reference=_ref_cast,
        scalar=lambda s, x, dtype: s.cast(x, dtype),
        backward_name="ToCopyBackward0",
        promotion="none",
    )
)


# --------------------------------------------------------------------------------------
# Complex numbers: parts, conjugate, argument, construction
# --------------------------------------------------------------------------------------


def _scalar_angle(s: Any, x: Any) -> Any:
    """arg z for complex; for real x, PyTorch's 0 / pi (NaN stays NaN; -0.0 gives 0)."""
    d = s.dtype_of(x)
    if d.is_complex:
        return s.math("atan2", s.imag(x), s.real(x))
    zero = _zero(s, x)
    r = s.select(s.cmp("lt", x, zero), s.const(math.pi, d), zero)
    return s.select(s.isnan(x), x, r)


def _ref_angle(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "c":
        return np.angle(x)
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0.0)).astype(x.dtype)


def _infer_make_complex(op: str) -> Callable[..., TensorType]:
    """complex(re, im) / polar(abs, angle): two float32 or two float64 tensors."""

    def infer(types: tuple[TensorType, ...], **attrs: Any) -> TensorType:
        a, b = types
        if a.dtype is not b.dtype or a.dtype not in (dt.float32, dt.float64):
            raise TypeError(
                f"{op}: expected both inputs to be float32 or float64 of one "
                f"dtype (llgrad has no complex32), got {a} and {b}"
            )
        return TensorType(a.dtype.to_complex(), broadcast_shapes(a.shape, b.shape, op=op))

    return infer


def _ref_make_complex(re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """Built part by part: `re + 1j * im` would turn an infinite im into a NaN re."""
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, dtype=np.result_type(re.dtype, np.complex64))
    out.real, out.imag = re, im
    return out


def _ref_polar(r: np.ndarray, theta: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return _ref_make_complex(r * np.cos(theta), r * np.sin(theta))


def _scalar_polar(s: Any, r: Any, theta: Any) -> Any:
    return s.complex(s.mul(r, s.math("cos", theta)), s.mul(r, s.math("sin", theta)))


# The identity through which no gradient flows: what `x.detach()`, `x.data` and an op run
# under `no_grad` on a value that requires grad become inside a traced function, so the
# autodiff pass (which replays it without recording) differentiates what eager autograd
# does. It has no derivative rule; `passes.simplify` removes it after autodiff, so it
# never reaches a kernel of a compiled function. Eager `detach()` stays an alias.
unary("stop_gradient", lambda s, x: x, lambda x: x.copy(), None, kinds="biufc")
unary("conj", lambda s, x: s.conj(x), np.conj, "ConjBackward0", kinds="c")
unary(
    "real",
    lambda s, x: s.real(x),
    lambda x: np.real(x).copy(),
    "SelectBackward0",
    kinds="c",
    infer=_infer_to_real("real", "c"),
)
unary(
    "imag",
    lambda s, x: s.imag(x),
    lambda x: np.imag(x).copy(),
    "SelectBackward0",
    kinds="c",
    infer=_infer_to_real("imag", "c"),
)
unary(
    "angle",
    _scalar_angle,
    _ref_angle,
    "AngleBackward0",
    kinds="fc",
    infer=_infer_to_real("angle", "fc"),
)
for _name, _rule, _ref, _bw in [
    ("complex", lambda s, a, b: s.complex(a, b), _ref_make_complex, "ComplexBackward0"),
    ("polar", _scalar_polar, _ref_polar, "PolarBackward0"),
]:
    register(
        OpDef(
            _name,
            Group.BINARY,
            2,
            infer=_infer_make_complex(_name),
            reference=_ref,
            scalar=_rule,
            backward_name=_bw,
            promotion="none",
        )
    )


# --------------------------------------------------------------------------------------
# Derivative rules: `vjp(ctx, g, **attrs)` returns one gradient per operand (None where
# there is none). `ctx.inputs` / `ctx.output` are the saved tensors (Python scalars stay
# scalars), `ctx.F` the functions they are written with; reduction of broadcast gradients
# and dtype casts happen in the engine, once for all ops.
# --------------------------------------------------------------------------------------

from ..ir.registry import OPS  # noqa: E402


def defvjp(name: str, rule: Callable[..., Any], saves: str) -> None:
    OPS[name].vjp = rule
    OPS[name].saves = saves


def _t(x: Any) -> bool:
    return not isinstance(x, (int, float, bool, complex))


def _vjp_add(ctx: Any, g: Any) -> tuple:
    return (g, g)


def _vjp_sub(ctx: Any, g: Any) -> tuple:
    return (g, ctx.F.neg(g) if ctx.needs_input_grad[1] else None)


def _vjp_mul(ctx: Any, g: Any) -> tuple:
    a, b = ctx.inputs
    F = ctx.F
    ga = F.mul(g, F.conj(b)) if ctx.needs_input_grad[0] else None
    gb = F.mul(g, F.conj(a)) if ctx.needs_input_grad[1] else None
    return (ga, gb)


def _vjp_div(ctx: Any, g: Any) -> tuple:
    a, b = ctx.inputs
    F = ctx.F
    ga = F.div(g, F.conj(b)) if ctx.needs_input_grad[0] else None
    gb = F.neg(F.div(F.mul(g, F.conj(a)), F.conj(F.mul(b, b)))) if ctx.needs_input_grad[1] else None
    return (ga, gb)


def _vjp_pow(ctx: Any, g: Any) -> tuple:
    a, b = ctx.inputs
    F = ctx.F
    ga = gb = None
    if ctx.needs_input_grad[0]:
        if _t(b):
            ga = F.where(
                F.eq(b, 0), F.mul(g, 0.0), F.mul(F.mul(g, F.conj(b)), F.conj(F.pow(a, F.sub(b, 1))))
            )
        elif b == 0:
            ga = F.mul(g, 0.0)
        else:
            ga = F.mul(F.mul(g, F.conj(b)), F.conj(F.pow(a, b - 1)))
    if ctx.needs_input_grad[1]:
        out = ctx.output
        cx = out._dtype.is_complex  # complex result: the complex log of the base
        if _t(a):
            mask = F.logical_and(F.eq(a, 0), F.ge(F.real(b), 0))
            # in the result's dtype, as PyTorch: an int32 or float32 base of a float64
            # power takes its log in float64 (float32 lost 1e-8 of the gradient)
            log_a = F.log(a.to(out._dtype) if a._dtype is not out._dtype else a)
            gb = F.where(mask, F.mul(g, 0.0), F.mul(F.mul(g, F.conj(out)), F.conj(log_a)))
        elif cx:
            gb = F.mul(F.mul(g, F.conj(out)), cmath.log(a).conjugate()) if a != 0 else F.mul(g, 0.0)
        elif a == 0:  # 0 ** b: no gradient where b >= 0, PyTorch's -inf elsewhere
            gb = F.where(F.ge(b, 0), F.mul(g, 0.0), F.mul(F.mul(g, out), -math.inf))
        else:  # log of a negative base is NaN, as in PyTorch
            gb = F.mul(F.mul(g, out), math.log(a) if a > 0 else math.nan)
    return (ga, gb)


# Holomorphic functions: with PyTorch's convention the gradient is g * conj(f'(z)); `conj`
# returns real tensors as they are, so real gradients are computed exactly as before.


def _vjp_exp(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.conj(ctx.output))


def _vjp_exp2(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.conj(ctx.F.mul(ctx.output, math.log(2.0))))


def _vjp_expm1(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.conj(ctx.F.add(ctx.output, 1)))


def _vjp_log(ctx: Any, g: Any) -> Any:
    return ctx.F.div(g, ctx.F.conj(ctx.inputs[0]))


def _vjp_log2(ctx: Any, g: Any) -> Any:
    return ctx.F.div(g, ctx.F.conj(ctx.F.mul(ctx.inputs[0], math.log(2.0))))


def _vjp_log10(ctx: Any, g: Any) -> Any:
    return ctx.F.div(g, ctx.F.conj(ctx.F.mul(ctx.inputs[0], math.log(10.0))))


def _vjp_log1p(ctx: Any, g: Any) -> Any:
    return ctx.F.div(g, ctx.F.conj(ctx.F.add(ctx.inputs[0], 1)))


def _vjp_sqrt(ctx: Any, g: Any) -> Any:
    return ctx.F.div(g, ctx.F.conj(ctx.F.mul(ctx.output, 2)))


def _vjp_rsqrt(ctx: Any, g: Any) -> Any:
    F = ctx.F
    y = ctx.output
    return F.mul(F.mul(g, F.conj(F.mul(F.mul(y, y), y))), -0.5)


def _vjp_sin(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.conj(ctx.F.cos(ctx.inputs[0])))


def _vjp_cos(ctx: Any, g: Any) -> Any:
    return ctx.F.neg(ctx.F.mul(g, ctx.F.conj(ctx.F.sin(ctx.inputs[0]))))


def _vjp_tan(ctx: Any, g: Any) -> Any:
    y = ctx.output
    return ctx.F.mul(g, ctx.F.conj(ctx.F.add(ctx.F.mul(y, y), 1)))


def _vjp_tanh(ctx: Any, g: Any) -> Any:
    y = ctx.output
    return ctx.F.mul(g, ctx.F.conj(ctx.F.rsub(ctx.F.mul(y, y), 1)))


def _vjp_sigmoid(ctx: Any, g: Any) -> Any:
    y = ctx.output
    return ctx.F.mul(g, ctx.F.conj(ctx.F.mul(y, ctx.F.rsub(y, 1))))


def _vjp_erf(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    F = ctx.F
    return F.mul(g, F.mul(F.exp(F.neg(F.mul(x, x))), 2.0 / math.sqrt(math.pi)))


def _vjp_erfc(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    F = ctx.F
    return F.mul(g, F.mul(F.exp(F.neg(F.mul(x, x))), -2.0 / math.sqrt(math.pi)))


def _vjp_neg(ctx: Any, g: Any) -> Any:
    return ctx.F.neg(g)


def _vjp_abs(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    F = ctx.F
    if x._dtype.is_complex:  # real g times sgn(z) = z / |z| (0 at 0), as PyTorch
        return F.mul(g, F.where(F.eq(x, 0), F.zeros_like(x), F.div(x, F.abs(x))))
    return F.mul(g, F.sign(x))


def _vjp_zero(ctx: Any, g: Any, **_: Any) -> Any:
    return ctx.F.mul(g, 0.0)


def _vjp_floor_divide(ctx: Any, g: Any) -> tuple:
    """Piecewise constant in both operands (PyTorch's div with rounding_mode)."""
    zero = ctx.F.mul(g, 0.0)
    return (zero, zero)


def _vjp_reciprocal(ctx: Any, g: Any) -> Any:
    y = ctx.output
    return ctx.F.neg(ctx.F.mul(g, ctx.F.conj(ctx.F.mul(y, y))))


def _vjp_square(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.conj(ctx.F.mul(ctx.inputs[0], 2)))


def _vjp_relu(ctx: Any, g: Any) -> Any:
    F = ctx.F
    y = ctx.output
    return F.where(F.gt(y, 0), g, F.mul(g, 0.0))


def _vjp_silu(ctx: Any, g: Any) -> Any:
    F = ctx.F
    x = ctx.inputs[0]
    s = F.sigmoid(x)
    return F.mul(g, F.mul(s, F.add(F.mul(x, F.rsub(s, 1)), 1)))


def _vjp_gelu(ctx: Any, g: Any, approximate: str) -> Any:
    F = ctx.F
    x = ctx.inputs[0]
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        inner = F.mul(F.add(x, F.mul(F.mul(F.mul(x, x), x), 0.044715)), k)
        t = F.tanh(inner)
        dinner = F.mul(F.add(F.mul(F.mul(x, x), 3 * 0.044715), 1), k)
        left = F.mul(F.add(t, 1), 0.5)
        right = F.mul(F.mul(F.mul(x, 0.5), F.rsub(F.mul(t, t), 1)), dinner)
        return F.mul(g, F.add(left, right))
    cdf = F.mul(F.add(F.erf(F.mul(x, 1 / math.sqrt(2.0))), 1), 0.5)
    pdf = F.mul(F.exp(F.mul(F.mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return F.mul(g, F.add(cdf, F.mul(x, pdf)))


def _vjp_softplus(ctx: Any, g: Any, beta: float, threshold: float) -> Any:
    F = ctx.F
    x = ctx.inputs[0]
    bx = F.mul(x, beta)
    return F.where(F.gt(bx, threshold), g, F.mul(g, F.sigmoid(bx)))


def _vjp_leaky_relu(ctx: Any, g: Any, negative_slope: float) -> Any:
    F = ctx.F
    x = ctx.inputs[0]
    return F.where(F.gt(x, 0), g, F.mul(g, negative_slope))


def _vjp_elu(ctx: Any, g: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """PyTorch's slope: the negative branch's at x = 0 (alpha * scale * input_scale)."""
    F = ctx.F
    x = ctx.inputs[0]
    slope = F.mul(F.exp(F.mul(x, input_scale)), alpha * scale * input_scale)
    return F.where(F.gt(x, 0), F.mul(g, scale), F.mul(g, slope))


def _vjp_maximum(ctx: Any, g: Any) -> tuple:
    return _minmax_vjp(ctx, g, "gt")


def _vjp_minimum(ctx: Any, g: Any) -> tuple:
    return _minmax_vjp(ctx, g, "lt")


def _minmax_vjp(ctx: Any, g: Any, pred: str) -> tuple:
    """Ties split the gradient in half (PyTorch's rule)."""
    F = ctx.F
    a, b = ctx.inputs
    wins = getattr(F, pred)(a, b).to(g._dtype)
    ties = F.eq(a, b).to(g._dtype)
    share_a = F.add(wins, F.mul(ties, 0.5))
    ga = F.mul(g, share_a)
    need = ctx.needs_input_grad
    return (ga if need[0] else None, F.sub(g, ga) if need[1] else None)


def _vjp_where(ctx: Any, g: Any) -> tuple:
    F = ctx.F
    c = ctx.inputs[0]
    zero = F.mul(g, 0.0)
    return (None, F.where(c, g, zero), F.where(c, zero, g))


def _vjp_clamp(ctx: Any, g: Any, min: Any, max: Any) -> Any:
    F = ctx.F
    x = ctx.inputs[0]
    keep = F.ones_like(x, dtype=dt.bool_)
    if min is not None:
        keep = F.logical_and(keep, F.ge(x, min))
    if max is not None:
        keep = F.logical_and(keep, F.le(x, max))
    return F.where(keep, g, F.mul(g, 0.0))


def _vjp_remainder(ctx: Any, g: Any) -> tuple:
    F = ctx.F
    a, b = ctx.inputs
    gb = F.neg(F.mul(g, F.floor_divide(a, b))) if ctx.needs_input_grad[1] else None
    return (g, gb)


def _vjp_fmod(ctx: Any, g: Any) -> tuple:
    """d/da = 1 (everywhere, as PyTorch), d/db = -trunc(a / b)."""
    F = ctx.F
    a, b = ctx.inputs
    gb = F.neg(F.mul(g, F.trunc(F.div(a, b)))) if ctx.needs_input_grad[1] else None
    return (g, gb)


def _vjp_atan2(ctx: Any, g: Any) -> tuple:
    F = ctx.F
    a, b = ctx.inputs
    # (either operand may be a Python number; its square is one too)
    denom = F.add(*[F.mul(v, v) if _t(v) else v * v for v in (a, b)])
    # at the origin both partials are 0, as PyTorch gives (not 0/0)
    origin = F.eq(denom, 0)
    safe = F.where(origin, F.ones_like(denom), denom)
    return (
        F.where(origin, F.mul(g, 0.0), F.div(F.mul(g, b), safe)),
        F.where(origin, F.mul(g, 0.0), F.div(F.neg(F.mul(g, a)), safe)),
    )


def _vjp_cast(ctx: Any, g: Any, dtype: Any) -> Any:
    return g.to(ctx.input_meta[0][1])


for _name, _rule, _saves in [
    ("add", _vjp_add, ""),
    ("sub", _vjp_sub, ""),
    ("mul", _vjp_mul, "i"),
    ("div", _vjp_div, "i"),
    ("pow", _vjp_pow, "io"),
    ("exp", _vjp_exp, "o"),
    ("exp2", _vjp_exp2, "o"),
    ("expm1", _vjp_expm1, "o"),
    ("log", _vjp_log, "i"),
    ("log2", _vjp_log2, "i"),
    ("log10", _vjp_log10, "i"),
    ("log1p", _vjp_log1p, "i"),
    ("sqrt", _vjp_sqrt, "o"),
    ("rsqrt", _vjp_rsqrt, "o"),
    ("sin", _vjp_sin, "i"),
    ("cos", _vjp_cos, "i"),
    ("tan", _vjp_tan, "o"),
    ("tanh", _vjp_tanh, "o"),
    ("sigmoid", _vjp_sigmoid, "o"),
    ("erf", _vjp_erf, "i"),
    ("erfc", _vjp_erfc, "i"),
    ("neg", _vjp_neg, ""),
    ("abs", _vjp_abs, "i"),
    ("sign", _vjp_zero, ""),
    ("floor", _vjp_zero, ""),
    ("ceil", _vjp_zero, ""),
    ("round", _vjp_zero, ""),
    ("trunc", _vjp_zero, ""),
    ("reciprocal", _vjp_reciprocal, "o"),
    ("square", _vjp_square, "i"),
    ("relu", _vjp_relu, "o"),
    ("silu", _vjp_silu, "i"),
    ("gelu", _vjp_gelu, "i"),
    ("softplus", _vjp_softplus, "i"),
    ("leaky_relu", _vjp_leaky_relu, "i"),
    ("elu", _vjp_elu, "i"),
    ("maximum", _vjp_maximum, "i"),
    ("minimum", _vjp_minimum, "i"),
    ("where", _vjp_where, "0"),
    ("clamp", _vjp_clamp, "i"),
    ("remainder", _vjp_remainder, "i"),
    ("fmod", _vjp_fmod, "i"),
    ("floor_divide", _vjp_floor_divide, ""),
    ("trunc_divide", _vjp_floor_divide, ""),
    ("atan2", _vjp_atan2, "i"),
    ("cast", _vjp_cast, ""),
]:
    defvjp(_name, _rule, _saves)


# Inverse trigonometric and hyperbolic functions (PyTorch's formulas).


def _vjp_asin(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    return ctx.F.mul(g, ctx.F.rsqrt(ctx.F.rsub(ctx.F.mul(x, x), 1)))


def _vjp_acos(ctx: Any, g: Any) -> Any:
    return ctx.F.neg(_vjp_asin(ctx, g))


def _vjp_atan(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    return ctx.F.div(g, ctx.F.add(ctx.F.mul(x, x), 1))


def _vjp_sinh(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.cosh(ctx.inputs[0]))


def _vjp_cosh(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.sinh(ctx.inputs[0]))


def _vjp_asinh(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    return ctx.F.mul(g, ctx.F.rsqrt(ctx.F.add(ctx.F.mul(x, x), 1)))


def _vjp_acosh(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    return ctx.F.mul(g, ctx.F.rsqrt(ctx.F.sub(ctx.F.mul(x, x), 1)))


def _vjp_atanh(ctx: Any, g: Any) -> Any:
    x = ctx.inputs[0]
    return ctx.F.div(g, ctx.F.rsub(ctx.F.mul(x, x), 1))


def _vjp_copysign(ctx: Any, g: Any) -> tuple:
    """d/da = result / a (0 at a = 0, as PyTorch); b only gives the sign: no gradient."""
    F = ctx.F
    a = ctx.inputs[0]
    out = ctx.output
    ga = None
    if ctx.needs_input_grad[0]:
        zero = F.eq(a, 0)
        ga = F.where(zero, F.mul(g, 0.0), F.div(F.mul(g, out), F.where(zero, 1.0, a)))
    gb = F.mul(g, 0.0) if ctx.needs_input_grad[1] else None
    return (ga, gb)


def _vjp_nextafter(ctx: Any, g: Any) -> tuple:
    """PyTorch passes the gradient to the first operand where it differs from the second
    (nextafter(a, a) is a, a constant in b) and none to the second."""
    F = ctx.F
    a, b = ctx.inputs
    zero = F.mul(g, 0.0)
    ga = F.where(F.ne(a, b), g, zero) if ctx.needs_input_grad[0] else None
    return (ga, zero if ctx.needs_input_grad[1] else None)


def _vjp_frexp_mantissa(ctx: Any, g: Any) -> Any:
    """m = x / 2^e with e piecewise constant: g / 2^e."""
    F = ctx.F
    x = ctx.inputs[0]
    return F.div(g, F.exp2(F.frexp(x)[1].to(x.dtype)))


defvjp("copysign", _vjp_copysign, "io")
OPS["copysign"].save_for = {0: (0,), 1: ()}
defvjp("nextafter", _vjp_nextafter, "i")
defvjp("frexp_mantissa", _vjp_frexp_mantissa, "i")

# Special functions (PyTorch's formulas).


def _vjp_lgamma(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.digamma(ctx.inputs[0]))


def _vjp_digamma(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.polygamma(1, ctx.inputs[0]))


def _vjp_polygamma(ctx: Any, g: Any, n: int) -> Any:
    return ctx.F.mul(g, ctx.F.polygamma(n + 1, ctx.inputs[0]))


def _vjp_erfinv(ctx: Any, g: Any) -> Any:
    y = ctx.output
    return ctx.F.mul(g, ctx.F.mul(ctx.F.exp(ctx.F.mul(y, y)), math.sqrt(math.pi) / 2))


def _vjp_i0(ctx: Any, g: Any) -> Any:
    return ctx.F.mul(g, ctx.F.pointwise.special_i1(ctx.inputs[0]))


def _vjp_i0e(ctx: Any, g: Any) -> Any:
    F = ctx.F
    x = ctx.inputs[0]
    return F.mul(g, F.sub(F.pointwise.special_i1e(x), F.mul(F.sign(x), ctx.output)))


def _vjp_i1(ctx: Any, g: Any) -> Any:
    """I0(x) - I1(x)/x, 1/2 at x = 0."""
    F = ctx.F
    x = ctx.inputs[0]
    zero = F.eq(x, 0)
    d = F.sub(F.i0(x), F.div(ctx.output, F.where(zero, 1.0, x)))
    return F.mul(g, F.where(zero, 0.5, d))


def _vjp_i1e(ctx: Any, g: Any) -> Any:
    """i0e(x) - i1e(x) (sign(x) + 1/x), 1/2 at x = 0."""
    F = ctx.F
    x = ctx.inputs[0]
    zero = F.eq(x, 0)
    d = F.sub(
        F.pointwise.special_i0e(x),
        F.mul(ctx.output, F.add(F.sign(x), F.reciprocal(F.where(zero, 1.0, x)))),
    )
    return F.mul(g, F.where(zero, 0.5, d))


def _vjp_ndtri(ctx: Any, g: Any) -> Any:
    y = ctx.output
    F = ctx.F
    return F.mul(g, F.mul(F.exp(F.mul(F.mul(y, y), 0.5)), math.sqrt(2 * math.pi)))


def _vjp_log_ndtr(ctx: Any, g: Any) -> Any:
    """exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi)."""
    F = ctx.F
    x = ctx.inputs[0]
    e = F.exp(F.sub(F.mul(F.mul(x, x), -0.5), ctx.output))
    return F.mul(g, F.mul(e, 1 / math.sqrt(2 * math.pi)))


def _vjp_erfcx(ctx: Any, g: Any) -> Any:
    F = ctx.F
    x = ctx.inputs[0]
    return F.mul(g, F.sub(F.mul(F.mul(x, ctx.output), 2.0), 2 / math.sqrt(math.pi)))


def _vjp_zeta(ctx: Any, g: Any) -> tuple:
    """d/dq zeta(s, q) = -s zeta(s + 1, q); none for s (PyTorch raises too)."""
    F = ctx.F
    s, q = ctx.inputs
    if ctx.needs_input_grad[0]:
        raise NotImplementedError("the derivative for 'zeta' is not implemented.")
    s1 = s + 1 if isinstance(s, (int, float)) else F.add(s, 1)  # s may be a number
    return (None, F.mul(g, F.neg(F.mul(F.pointwise.special_zeta(s1, q), s))))


for _name, _rule, _saves in [
    ("lgamma", _vjp_lgamma, "i"),
    ("digamma", _vjp_digamma, "i"),
    ("polygamma", _vjp_polygamma, "i"),
    ("erfinv", _vjp_erfinv, "o"),
    ("i0", _vjp_i0, "i"),
    ("special_i0e", _vjp_i0e, "io"),
    ("special_i1", _vjp_i1, "io"),
    ("special_i1e", _vjp_i1e, "io"),
    ("special_ndtri", _vjp_ndtri, "o"),
    ("special_log_ndtr", _vjp_log_ndtr, "io"),
    ("special_erfcx", _vjp_erfcx, "io"),
    ("special_zeta", _vjp_zeta, "i"),
]:
    defvjp(_name, _rule, _saves)


def _vjp_mvlgamma(ctx: Any, g: Any, p: int) -> Any:
    x = ctx.inputs[0]
    F = ctx.F
    total = F.digamma(x)
    for j in range(1, p):
        total = F.add(total, F.digamma(F.sub(x, j / 2)))
    return F.mul(g, total)


defvjp("frac", lambda ctx, g: g, "")
defvjp("round_decimals", _vjp_zero, "")
defvjp("mvlgamma", _vjp_mvlgamma, "i")

for _name, _rule in [
    ("asin", _vjp_asin),
    ("acos", _vjp_acos),
    ("atan", _vjp_atan),
    ("sinh", _vjp_sinh),
    ("cosh", _vjp_cosh),
    ("asinh", _vjp_asinh),
    ("acosh", _vjp_acosh),
    ("atanh", _vjp_atanh),
]:
    defvjp(_name, _rule, "i")

# inputs saved only for the gradients that read them (PyTorch's conditional saving)
OPS["mul"].save_for = {0: (1,), 1: (0,)}
OPS["div"].save_for = {0: (1,)}
OPS["remainder"].save_for = {0: (1,), 1: (1,)}
OPS["fmod"].save_for = {0: (1,), 1: (1,)}


# Complex parts. A real-valued function of z receives a real g; its gradient is complex
# (dL/dRe z + i dL/dIm z), and a real input of a complex op keeps the real part (the
# engine's cast to the input's dtype does that).


def _vjp_conj(ctx: Any, g: Any) -> Any:
    return ctx.F.conj(g)


def _vjp_real(ctx: Any, g: Any) -> Any:
    return g.to(ctx.input_meta[0][1])  # g + 0i


def _vjp_imag(ctx: Any, g: Any) -> Any:
    return ctx.F.complex(ctx.F.zeros_like(g), g)  # 0 + g i


def _vjp_angle(ctx: Any, g: Any) -> Any:
    """d arg z: g * i z / |z|^2, zero at z = 0 (PyTorch); zero for real inputs."""
    F = ctx.F
    x = ctx.inputs[0]
    if not x._dtype.is_complex:
        return F.mul(g, 0.0)
    i_z = F.complex(F.neg(F.imag(x)), F.real(x))  # i z, without a complex constant
    step = F.div(F.mul(g, i_z), F.square(F.abs(x)))
    return F.where(F.eq(x, 0), F.zeros_like(x), step)


def _vjp_complex(ctx: Any, g: Any) -> tuple:
    return (ctx.F.real(g), ctx.F.imag(g))


def _vjp_polar(ctx: Any, g: Any) -> tuple:
    """out = r e^(i t): dL/dr = Re(g e^(-i t)), dL/dt = r Im(g e^(-i t))."""
    F = ctx.F
    r, t = ctx.inputs
    c, s = F.cos(t), F.sin(t)
    gr, gi = F.real(g), F.imag(g)
    ga = F.add(F.mul(gr, c), F.mul(gi, s)) if ctx.needs_input_grad[0] else None
    gt = F.mul(r, F.sub(F.mul(gi, c), F.mul(gr, s))) if ctx.needs_input_grad[1] else None
    return (ga, gt)


for _name, _rule, _saves in [
    ("conj", _vjp_conj, ""),
    ("real", _vjp_real, ""),
    ("imag", _vjp_imag, ""),
    ("angle", _vjp_angle, "i"),
    ("complex", _vjp_complex, ""),
    ("polar", _vjp_polar, "i"),
]:
    defvjp(_name, _rule, _saves)
