"""`llgrad.special`: PyTorch's `torch.special` (special functions as vectorized scalar rules).

The gamma family, erfinv/ndtri, erfcx, log_ndtr and the modified Bessel functions I0/I1
are ops with inline scalar rules (`codegen.mathlib`; error bounds in docs/mathlib.md),
differentiable as in PyTorch. The orthogonal polynomials, spherical_bessel_j0 and airy_ai
are ops too (one kernel, eagerly and inside `lg.compile`; a polynomial's scalar rule loops
over its degree, which is data); the Bessel functions J0, J1, Y0, Y1, K0 and K1 are
computed on the host with SciPy (a graph break inside `lg.compile`). As in PyTorch, those
have no derivative: their results never require grad. Later calls with plain tensors of
a layout seen before take the direct launch (`functions.fastpath.elementwise`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..tape import forward as forward_ad
from ..dispatch.apply import composite_function, interpreters
from ..dispatch.grad_mode import _state as grad_state
from ..functions import elementwise as _E, fastpath as _fastpath, pointwise as _P
from ..functions.elementwise import elementwise as _elementwise
from ..ir import dtypes as _dt
from ..tensor import Tensor, recurring_maker
from ..functions._errors import serve_on_devices
from ..functions._host import host_empty
from ..functions.creation import tensor
from ..functions.misc import log_softmax as _log_softmax, softmax as _softmax
from ..functions.reduction import logsumexp as _logsumexp
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak

__all__ = [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammainc",
    "gammaincc",
    "gammaln",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "sinc",
    "softmax",
    "spherical_bessel_j0",
    "xlog1py",
    "xlogy",
    "zeta",
]

_NO_ATTRS: dict[str, Any] = {}

# ---------------------------------------------------------------------------------------
# The same functions as lg.* (PyTorch's torch.special aliases)
# ---------------------------------------------------------------------------------------
digamma = psi = _P.digamma
gammaln = _P.lgamma
erfinv = _P.erfinv
polygamma = _P.polygamma
multigammaln = _P.mvlgamma
gammainc = _P.igamma
gammaincc = _P.igammac
i0 = modified_bessel_i0 = _P.i0
i0e = _P.special_i0e
i1 = modified_bessel_i1 = _P.special_i1
i1e = _P.special_i1e
ndtri = _P.special_ndtri
log_ndtr = _P.special_log_ndtr
erfcx = _P.special_erfcx
zeta = _P.special_zeta
sinc = _P.sinc
logit = _P.logit
xlogy = _E.xlogy
erf = _E.erf
erfc = _E.erfc
exp2 = _E.exp2
expm1 = _E.expm1
log1p = _E.log1p
expit = _E.sigmoid


def _float(op: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"special.{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return _P._floating(op, x)


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, (1 + erf(x / sqrt 2)) / 2, computed as erfc(-x/sqrt 2)/2
    (integers become the default float)."""
    x = _float("ndtr", input)
    return _E.mul(_E.erfc(_E.mul(x, -1 / math.sqrt(2.0))), 0.5)


@composite_function
def entr(input: Tensor) -> Tensor:
    """The elementwise entropy -x log x: 0 at 0, -inf for x < 0 (integers become the
    default float)."""
    x = _float("entr", input)
    pos = _E.gt(x, 0)
    safe = _E.where(pos, x, 1.0)
    val = _E.where(pos, _E.neg(_E.mul(x, _E.log(safe))), _E.mul(x, 0.0))
    return _elementwise("where", _E.lt(x, 0), -math.inf, val, name="SpecialEntrBackward0")


@composite_function
def xlog1py(input: Any, other: Any) -> Tensor:
    """input * log1p(other), 0 where input is 0 (unless other is NaN).

    Args: input, other (tensors or numbers, broadcast; integers become the default float).
    """
    _E._check("xlog1py", input, other)
    d = _P._real_float("xlog1py", input, other)
    a, b = _P._as(input, d), _P._as(other, d)
    lb = (
        _E.log1p(b)
        if isinstance(b, Tensor)
        else math.log1p(b)
        if b > -1
        else -math.inf
        if b == -1
        else math.nan
    )
    prod = _E.mul(a, lb)
    zero = _E.eq(a, 0)
    if isinstance(b, Tensor):
        zero = _E.logical_and(zero, _E.logical_not(_E.isnan(b)))
    elif b != b:
        zero = _E.ne(a, a)
    return _elementwise(
        "where",
        zero,
        _E.mul(a, 0.0) if isinstance(a, Tensor) else 0.0,
        prod,
        name="SpecialXlog1pyBackward0",
    )


round = _E.round


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """softmax along `dim` (in `dtype` if given)."""
    return _softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """log_softmax along `dim` (in `dtype` if given)."""
    return _log_softmax(input if dtype is None else input.to(dtype), dim)


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """log(sum(exp(input))) over `dim` (int or tuple), stable."""
    return _logsumexp(input, dim, keepdim)


def spherical_bessel_j0(x: Tensor) -> Tensor:
    """sin(x) / x: 1 at 0, 0 at +-inf (integers become the default float); one kernel. No
    derivative (the result never requires grad, as in PyTorch)."""
    if x.__class__ is Tensor and not x._requires_grad and x._dtype.is_floating_point:
        return _fastpath.elementwise(
            "special_spherical_bessel_j0", (x,), _NO_ATTRS, None, _nondiff_general
        )
    return _nondiff_general(
        "special_spherical_bessel_j0", (_float("spherical_bessel_j0", x),), None, None
    )


def airy_ai(x: Tensor) -> Tensor:
    """Elementwise the Airy function Ai (integers become the default float); one kernel
    following PyTorch's CPU algorithm in the input's dtype: 0 above 103.892, NaN at
    +-inf. No derivative (the result never requires grad, as in PyTorch)."""
    t: Any = x  # (a Tensor's private fields; the class test below would narrow `x`)
    plain = t.__class__ is Tensor
    if plain and not t._requires_grad and t._dtype.is_floating_point:
        return _fastpath.elementwise("special_airy_ai", (x,), _NO_ATTRS, None, _nondiff_general)
    return _nondiff_general("special_airy_ai", (_float("airy_ai", x),), None, None)


# ---------------------------------------------------------------------------------------
# Bessel functions on the host (SciPy), without derivatives as in PyTorch
# ---------------------------------------------------------------------------------------

_HOST_DTYPES = (_dt.float32, _dt.float64)
# input layout key -> (the maker of the row-major result of that shape and dtype, once
# `recurring_maker` has one; the result's NumPy dtype), for `_host_output`
_host_outputs: dict[tuple, tuple] = {}


def _host_output(x: Any) -> tuple[Tensor, Any]:
    """`host_empty(x._shape, x._dtype)` (the result of a host function's direct path and
    a NumPy array to write it into), through the maker filed under x's layout once its
    shape and dtype have one."""
    got = _host_outputs.get(x._lkey)
    if got is not None:  # (filed for layouts with elements only)
        out = got[0]()
        return out, out._storage.array(x._shape, got[1])
    shape, d = x._shape, x._dtype
    make = recurring_maker(shape, d)
    if make is None or 0 in shape:
        return host_empty(shape, d)
    if len(_host_outputs) < 1024:
        _host_outputs[x._lkey] = (make, d.np)
    out = make()
    return out, out._storage.array(shape, d.np)


def _host(
    op: str,
    compute: Callable[[Any], Any],
    x_named: bool = False,
    direct: Callable[[Any, Any], Any] | None = None,
) -> Callable[[Tensor], Tensor]:
    """`op` computed by `compute` on the host; `x_named`: its argument is `x`, as in the
    ATen schemas of torch's newer special functions (airy_ai, scaled K0/K1).
    `direct(x, out)`, where given, writes the same values for a float32/float64 NumPy
    view `x` into `out`, a NumPy view of the result (x's shape and dtype; SciPy's float32
    loops compute in double and round once, as `compute` on x in float64 and the cast
    back do): a plain tensor of those dtypes takes it without the conversions."""

    def general(input: Tensor) -> Tensor:
        import numpy as np

        x = _float(op, input)
        if getattr(x, "_ctx", None) is not None:
            raise GraphBreak(f"special.{op} (computed on the host with SciPy)", user_location())
        with np.errstate(all="ignore"):
            r = compute(x.detach().numpy().astype(np.float64))

        return tensor(np.require(r, requirements="C"), dtype=x._dtype)

    if direct is None:
        fn = general
    elif x_named:

        def fn(x: Tensor) -> Tensor:
            if x.__class__ is Tensor and x._dtype in _HOST_DTYPES:
                out, values = _host_output(x)
                direct(x._numpy_view(), values)
                return out
            return general(x)
    else:

        def fn(input: Tensor) -> Tensor:
            if input.__class__ is Tensor and input._dtype in _HOST_DTYPES:
                out, values = _host_output(input)
                direct(input._numpy_view(), values)
                return out
            return general(input)

    if x_named and direct is None:

        def fn_x(x: Tensor) -> Tensor:
            return general(x)

        fn = fn_x
    fn.__name__ = fn.__qualname__ = op
    return fn


def _sc(name: str) -> Callable[[Any], Any]:
    def compute(x: Any) -> Any:
        import scipy.special as sc

        return getattr(sc, name)(x)

    return compute


def _sc_direct(name: str) -> Callable[[Any, Any], Any]:
    """SciPy's ufunc `name` from an array into `out` (of its shape and dtype)."""

    def direct(x: Any, out: Any) -> Any:
        ufunc = _ufuncs.get(name)
        if ufunc is None:
            import scipy.special as sc

            ufunc = _ufuncs[name] = getattr(sc, name)
        return ufunc(x, out)

    return direct


_ufuncs: dict[str, Any] = {}


def _k(name: str) -> Callable[[Any], Any]:
    """K0/K1 with PyTorch's values outside the domain: inf at 0, NaN below."""

    def compute(x: Any) -> Any:
        import numpy as np
        import scipy.special as sc

        r = getattr(sc, name)(x)
        return np.where(x < 0, np.nan, np.where(x == 0, np.inf, r))

    return compute


def _y(name: str) -> Callable[[Any], Any]:
    """Y0/Y1: -inf at 0, NaN below (PyTorch's values)."""

    def compute(x: Any) -> Any:
        import numpy as np
        import scipy.special as sc

        r = getattr(sc, name)(x)
        return np.where(x < 0, np.nan, np.where(x == 0, -np.inf, r))

    return compute


bessel_j0 = _host("bessel_j0", _sc("j0"), direct=_sc_direct("j0"))
bessel_j1 = _host("bessel_j1", _sc("j1"), direct=_sc_direct("j1"))
bessel_y0 = _host("bessel_y0", _y("y0"))
bessel_y1 = _host("bessel_y1", _y("y1"))
modified_bessel_k0 = _host("modified_bessel_k0", _k("k0"))
modified_bessel_k1 = _host("modified_bessel_k1", _k("k1"))
scaled_modified_bessel_k0 = _host("scaled_modified_bessel_k0", _k("k0e"), x_named=True)
scaled_modified_bessel_k1 = _host("scaled_modified_bessel_k1", _k("k1e"), x_named=True)
for _f, _what in [
    (bessel_j0, "the Bessel function J0"),
    (bessel_j1, "the Bessel function J1"),
    (bessel_y0, "the Bessel function Y0"),
    (bessel_y1, "the Bessel function Y1"),
    (modified_bessel_k0, "the modified Bessel function K0"),
    (modified_bessel_k1, "the modified Bessel function K1"),
    (scaled_modified_bessel_k0, "exp(x) K0(x)"),
    (scaled_modified_bessel_k1, "exp(x) K1(x)"),
]:
    _f.__doc__ = (
        f"Elementwise {_what} (integers become the default float). Computed on "
        f"the host with SciPy (a graph break inside lg.compile); no derivative, "
        f"as in PyTorch."
    )


# ---------------------------------------------------------------------------------------
# Orthogonal polynomials: one elementwise op each (mathlib loops over the degree), no
# derivative (as in PyTorch)
# ---------------------------------------------------------------------------------------


def _nondiff_general(op: str, operands: tuple, attrs: Any, name: Any) -> Tensor:
    """The general call of an op without derivative (`fastpath.elementwise`'s `general`):
    checks, then the op on detached operands without recording, so the result never
    requires grad and carries no tangent (PyTorch has no derivative for these)."""
    public = op[len("special_") :]
    _E._check(public, *operands)
    _P._real_float(public, *operands)
    if (
        interpreters
        or forward_ad._level[0]
        or any(isinstance(o, Tensor) and o._requires_grad for o in operands)
    ):
        state = grad_state
        was = state.enabled
        state.enabled = False
        try:
            return _elementwise(op, *(o.detach() if isinstance(o, Tensor) else o for o in operands))
        finally:
            state.enabled = was
    return _elementwise(op, *operands)


def _polynomial(name: str, what: str) -> Callable[..., Tensor]:
    op = f"special_{name}"

    def fn(x: Any, n: Any) -> Tensor:
        if (
            x.__class__ is Tensor
            and not x._requires_grad
            and (n.__class__ is not Tensor or not n._requires_grad)
        ):
            return _fastpath.elementwise(op, (x, n), _NO_ATTRS, None, _nondiff_general)
        return _nondiff_general(op, (x, n), None, None)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (
        f"The {what} at x.\n\n    Args: x, n (tensors or numbers, broadcast; "
        f"integers become the default float; n is truncated to an integer, and "
        f"n < 0, NaN or infinite gives 0). PyTorch's definition: the three-term "
        f"recurrence in the input's dtype, with PyTorch's closed forms inside "
        f"(-1, 1) above a degree and its endpoint values. One elementwise kernel "
        f"(inside lg.compile too). No derivative, as in PyTorch: the result "
        f"never requires grad."
    )
    return fn


chebyshev_polynomial_t = _polynomial(
    "chebyshev_polynomial_t", "Chebyshev polynomial of the first kind T_n"
)
chebyshev_polynomial_u = _polynomial(
    "chebyshev_polynomial_u", "Chebyshev polynomial of the second kind U_n"
)
chebyshev_polynomial_v = _polynomial(
    "chebyshev_polynomial_v", "Chebyshev polynomial of the third kind V_n"
)
chebyshev_polynomial_w = _polynomial(
    "chebyshev_polynomial_w", "Chebyshev polynomial of the fourth kind W_n"
)
shifted_chebyshev_polynomial_t = _polynomial(
    "shifted_chebyshev_polynomial_t", "shifted Chebyshev polynomial T*_n(x) = T_n(2x - 1)"
)
shifted_chebyshev_polynomial_u = _polynomial(
    "shifted_chebyshev_polynomial_u", "shifted Chebyshev polynomial U*_n(x) = U_n(2x - 1)"
)
shifted_chebyshev_polynomial_v = _polynomial(
    "shifted_chebyshev_polynomial_v", "shifted Chebyshev polynomial V*_n(x) = V_n(2x - 1)"
)
shifted_chebyshev_polynomial_w = _polynomial(
    "shifted_chebyshev_polynomial_w", "shifted Chebyshev polynomial W*_n(x) = W_n(2x - 1)"
)
hermite_polynomial_h = _polynomial(
    "hermite_polynomial_h",
    "physicists' Hermite polynomial H_n (NaN above degree 128 for "
    "float32, 512 for float64, as PyTorch)",
)
hermite_polynomial_he = _polynomial(
    "hermite_polynomial_he",
    "probabilists' Hermite polynomial He_n (NaN above degree 128 "
    "for float32, 512 for float64, as PyTorch)",
)
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", "Laguerre polynomial L_n")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", "Legendre polynomial P_n")


def _served_on_devices() -> None:
    """Every public function here also serves CUDA tensors where its eager code cannot."""
    serve_on_devices(globals())


_served_on_devices()
