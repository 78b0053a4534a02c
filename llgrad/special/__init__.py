"""`llgrad.special`: PyTorch's `torch.special` (special functions as vectorized scalar rules).

The gamma family, erfinv/ndtri, erfcx, log_ndtr and the modified Bessel functions I0/I1
are ops with inline scalar rules (`codegen.mathlib`; error bounds in docs/mathlib.md),
differentiable as in PyTorch. The orthogonal polynomials run their three-term recurrence
with llgrad ops up to the largest degree asked for (eagerly; inside `lg.compile` a graph
break, since that degree is data); the Bessel functions J0, J1, Y0, Y1, K0, K1 and Airy Ai
are computed on the host with SciPy (a graph break inside `lg.compile`). As in PyTorch,
those have no derivative: their results never require grad.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ..autograd.apply import composite_function
from ..functions import elementwise as _E
from ..functions import pointwise as _P
from ..functions.elementwise import elementwise as _elementwise
from ..ir import dtypes as _dt
from ..tensor import Tensor

__all__ = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2",
    "expit", "expm1", "gammainc", "gammaincc", "gammaln", "hermite_polynomial_h",
    "hermite_polynomial_he", "i0", "i0e", "i1", "i1e", "laguerre_polynomial_l",
    "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
    "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "sinc", "softmax",
    "spherical_bessel_j0", "xlog1py", "xlogy", "zeta",
]

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
        raise TypeError(f"special.{op}(): argument 'input' must be Tensor, not "
                        f"{type(x).__name__}")
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
    lb = _E.log1p(b) if isinstance(b, Tensor) else math.log1p(b) if b > -1 else \
        -math.inf if b == -1 else math.nan
    prod = _E.mul(a, lb)
    zero = _E.eq(a, 0)
    if isinstance(b, Tensor):
        zero = _E.logical_and(zero, _E.logical_not(_E.isnan(b)))
    elif b != b:
        zero = _E.ne(a, a)
    return _elementwise("where", zero, _E.mul(a, 0.0) if isinstance(a, Tensor) else 0.0, prod,
                        name="SpecialXlog1pyBackward0")


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round half to even; with `decimals`, at that many digits after the point
    (round(x * 10^d) / 10^d, as PyTorch)."""
    if decimals == 0:
        return _E.round(input)
    scale = 10.0 ** decimals
    return _E.div(_E.round(_E.mul(input, scale)), scale)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """softmax along `dim` (in `dtype` if given)."""
    from ..functions.misc import softmax as _softmax
    return _softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """log_softmax along `dim` (in `dtype` if given)."""
    from ..functions.misc import log_softmax as _log_softmax
    return _log_softmax(input if dtype is None else input.to(dtype), dim)


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """log(sum(exp(input))) over `dim` (int or tuple), stable."""
    from ..functions.reduction import logsumexp as _logsumexp
    return _logsumexp(input, dim, keepdim)


@composite_function
def spherical_bessel_j0(x: Tensor) -> Tensor:
    """sin(x) / x, 1 at 0. No derivative (the result never requires grad, as in PyTorch)."""
    from ..autograd.grad_mode import no_grad
    x = _float("spherical_bessel_j0", x)
    with no_grad():
        x = x.detach()
        zero = _E.eq(x, 0)
        safe = _E.where(zero, 1.0, x)
        return _E.where(zero, 1.0, _E.div(_E.sin(safe), safe))


# ---------------------------------------------------------------------------------------
# Bessel and Airy functions on the host (SciPy), without derivatives as in PyTorch
# ---------------------------------------------------------------------------------------

def _host(op: str, compute: Callable[[Any], Any], x_named: bool = False
          ) -> Callable[[Tensor], Tensor]:
    """`op` computed by `compute` on the host; `x_named`: its argument is `x`, as in the
    ATen schemas of torch's newer special functions (airy_ai, scaled K0/K1)."""
    def fn(input: Tensor) -> Tensor:
        import numpy as np
        x = _float(op, input)
        if getattr(x, "_ctx", None) is not None:
            from ..tracer.context import user_location
            from ..tracer.tensor import GraphBreak
            raise GraphBreak(f"special.{op} (computed on the host with SciPy)",
                             user_location())
        with np.errstate(all="ignore"):
            r = compute(x.detach().numpy().astype(np.float64))
        from ..functions.creation import tensor
        return tensor(np.require(r, requirements="C"), dtype=x._dtype)
    fn.__name__ = fn.__qualname__ = op
    if x_named:
        def fn_x(x: Tensor) -> Tensor:
            return fn(x)
        fn_x.__name__ = fn_x.__qualname__ = op
        return fn_x
    return fn


def _sc(name: str) -> Callable[[Any], Any]:
    def compute(x: Any) -> Any:
        import scipy.special as sc
        return getattr(sc, name)(x)
    return compute


def _airy_ai(x: Any) -> Any:
    import scipy.special as sc
    return sc.airy(x)[0]


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


airy_ai = _host("airy_ai", _airy_ai, x_named=True)
bessel_j0 = _host("bessel_j0", _sc("j0"))
bessel_j1 = _host("bessel_j1", _sc("j1"))
bessel_y0 = _host("bessel_y0", _y("y0"))
bessel_y1 = _host("bessel_y1", _y("y1"))
modified_bessel_k0 = _host("modified_bessel_k0", _k("k0"))
modified_bessel_k1 = _host("modified_bessel_k1", _k("k1"))
scaled_modified_bessel_k0 = _host("scaled_modified_bessel_k0", _k("k0e"), x_named=True)
scaled_modified_bessel_k1 = _host("scaled_modified_bessel_k1", _k("k1e"), x_named=True)
for _f, _what in [(airy_ai, "the Airy function Ai"), (bessel_j0, "the Bessel function J0"),
                  (bessel_j1, "the Bessel function J1"), (bessel_y0, "the Bessel function Y0"),
                  (bessel_y1, "the Bessel function Y1"),
                  (modified_bessel_k0, "the modified Bessel function K0"),
                  (modified_bessel_k1, "the modified Bessel function K1"),
                  (scaled_modified_bessel_k0, "exp(x) K0(x)"),
                  (scaled_modified_bessel_k1, "exp(x) K1(x)")]:
    _f.__doc__ = (f"Elementwise {_what} (integers become the default float). Computed on "
                  f"the host with SciPy (a graph break inside lg.compile); no derivative, "
                  f"as in PyTorch.")


# ---------------------------------------------------------------------------------------
# Orthogonal polynomials: three-term recurrences, no derivative (as in PyTorch)
# ---------------------------------------------------------------------------------------

def _polynomial(op: str, first: Callable[[Tensor], Tensor],
                step: Callable[[Tensor, Tensor, Tensor, int], Tensor],
                shifted: bool = False) -> Callable[..., Tensor]:
    """P_n(x) from P_0 = 1, P_1 = first(x), P_{k+1} = step(x, P_k, P_{k-1}, k); n < 0
    gives 0. The degree is the truncated value of n (a tensor or a number, broadcast)."""
    def fn(x: Any, n: Any) -> Tensor:
        from ..autograd.grad_mode import no_grad
        from ..functions.creation import full
        _E._check(op, x, n)
        d = _P._real_float(op, x, n)
        with no_grad():
            x = _P._as(x, d)
            x = x.detach() if isinstance(x, Tensor) else full((), x, dtype=d)
            nn = n.detach() if isinstance(n, Tensor) else full((), n, dtype=_dt.float64
                                                                if isinstance(n, float)
                                                                else _dt.int64)
            if getattr(x, "_ctx", None) is not None or getattr(nn, "_ctx", None) is not None:
                from ..tracer.context import user_location
                from ..tracer.tensor import GraphBreak
                raise GraphBreak(f"special.{op} (its recurrence runs to the largest degree "
                                 f"in n, a value)", user_location())
            if shifted:
                x = _E.sub(_E.mul(x, 2.0), 1.0)
            deg = _E.trunc(nn.to(d)) if nn._dtype.is_floating_point else nn.to(d)
            shape = _E.add(_E.mul(x, 0.0), _E.mul(deg, 0.0))._shape
            from ..functions.shape import expand
            x = expand(x, shape)
            deg = expand(deg, shape)
            top = int(_max_degree(deg))
            p0 = _E.add(_E.mul(x, 0.0), 1.0)
            out = _E.where(_E.eq(deg, 0), p0, _E.mul(x, 0.0))
            if top >= 1:
                p1 = first(x)
                out = _E.where(_E.eq(deg, 1), p1, out)
                for k in range(1, top):
                    p0, p1 = p1, step(x, p1, p0, k)
                    out = _E.where(_E.eq(deg, k + 1), p1, out)
            return out.contiguous()
    fn.__name__ = fn.__qualname__ = op
    return fn


def _max_degree(deg: Tensor) -> float:
    from ..functions.reduction import amax
    if deg.numel() == 0:
        return 0
    m = amax(deg).item()
    return m if m == m else 0


chebyshev_polynomial_t = _polynomial(
    "chebyshev_polynomial_t", lambda x: x,
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q))
chebyshev_polynomial_u = _polynomial(
    "chebyshev_polynomial_u", lambda x: _E.mul(x, 2.0),
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q))
chebyshev_polynomial_v = _polynomial(
    "chebyshev_polynomial_v", lambda x: _E.sub(_E.mul(x, 2.0), 1.0),
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q))
chebyshev_polynomial_w = _polynomial(
    "chebyshev_polynomial_w", lambda x: _E.add(_E.mul(x, 2.0), 1.0),
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q))
shifted_chebyshev_polynomial_t = _polynomial(
    "shifted_chebyshev_polynomial_t", lambda x: x,
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q), shifted=True)
shifted_chebyshev_polynomial_u = _polynomial(
    "shifted_chebyshev_polynomial_u", lambda x: _E.mul(x, 2.0),
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q), shifted=True)
shifted_chebyshev_polynomial_v = _polynomial(
    "shifted_chebyshev_polynomial_v", lambda x: _E.sub(_E.mul(x, 2.0), 1.0),
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q), shifted=True)
shifted_chebyshev_polynomial_w = _polynomial(
    "shifted_chebyshev_polynomial_w", lambda x: _E.add(_E.mul(x, 2.0), 1.0),
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), q), shifted=True)
hermite_polynomial_h = _polynomial(
    "hermite_polynomial_h", lambda x: _E.mul(x, 2.0),
    lambda x, p, q, k: _E.sub(_E.mul(_E.mul(x, 2.0), p), _E.mul(q, 2.0 * k)))
hermite_polynomial_he = _polynomial(
    "hermite_polynomial_he", lambda x: x,
    lambda x, p, q, k: _E.sub(_E.mul(x, p), _E.mul(q, float(k))))
laguerre_polynomial_l = _polynomial(
    "laguerre_polynomial_l", lambda x: _E.sub(1.0, x),
    lambda x, p, q, k: _E.div(_E.sub(_E.mul(_E.sub(2.0 * k + 1.0, x), p), _E.mul(q, float(k))),
                              float(k + 1)))
legendre_polynomial_p = _polynomial(
    "legendre_polynomial_p", lambda x: x,
    lambda x, p, q, k: _E.div(_E.sub(_E.mul(_E.mul(x, 2.0 * k + 1.0), p), _E.mul(q, float(k))),
                              float(k + 1)))
for _f, _what in [
    (chebyshev_polynomial_t, "Chebyshev polynomial of the first kind T_n"),
    (chebyshev_polynomial_u, "Chebyshev polynomial of the second kind U_n"),
    (chebyshev_polynomial_v, "Chebyshev polynomial of the third kind V_n"),
    (chebyshev_polynomial_w, "Chebyshev polynomial of the fourth kind W_n"),
    (shifted_chebyshev_polynomial_t, "shifted Chebyshev polynomial T*_n(x) = T_n(2x - 1)"),
    (shifted_chebyshev_polynomial_u, "shifted Chebyshev polynomial U*_n(x) = U_n(2x - 1)"),
    (shifted_chebyshev_polynomial_v, "shifted Chebyshev polynomial V*_n(x) = V_n(2x - 1)"),
    (shifted_chebyshev_polynomial_w, "shifted Chebyshev polynomial W*_n(x) = W_n(2x - 1)"),
    (hermite_polynomial_h, "physicists' Hermite polynomial H_n"),
    (hermite_polynomial_he, "probabilists' Hermite polynomial He_n"),
    (laguerre_polynomial_l, "Laguerre polynomial L_n"),
    (legendre_polynomial_p, "Legendre polynomial P_n"),
]:
    _f.__doc__ = (f"The {_what} at input, by its three-term recurrence.\n\n    Args: input, "
                  f"n (tensors or numbers, broadcast; n is truncated to an integer, n < 0 "
                  f"gives 0). No derivative, as in PyTorch. llgrad evaluates the recurrence "
                  f"for every degree (PyTorch switches to closed forms for large n, so values "
                  f"can differ in the last bits); inside lg.compile a graph break.")
