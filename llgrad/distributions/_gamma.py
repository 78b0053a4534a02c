"""Standard-gamma sampling with implicit reparameterization gradients.

`standard_gamma(alpha)` draws X ~ Gamma(alpha, 1) on the host (NumPy's gamma sampler on a
Philox generator keyed by the next positions of llgrad's stream, so `lg.manual_seed` and
generators govern it). Its gradient is the implicit reparameterization one, as torch's
`_standard_gamma` has: with F(x; a) the regularized lower incomplete gamma function (the
CDF), holding u = F(X; a) fixed gives

    dX/da = -(dF/da)(X; a) / p(X; a).

torch evaluates dF/da with approximations (series for small x, asymptotic expansions for
large a, a fitted rational function elsewhere). llgrad evaluates it exactly to float64
rounding: dF/da is carried in forward mode (value and derivative with respect to a)
through the power series of P(a, x) for x < a + 1 and through the continued fraction of
Q(a, x) = 1 - P(a, x) for x >= a + 1, both run until the terms no longer change the
sum; the ratio to the density is formed without the common factor x^a e^-x / Γ(a), so it
neither overflows nor underflows. The number of terms grows like sqrt(a) near the mode.

Second derivatives through a sample with respect to the concentration are not available
(torch's `_standard_gamma_grad` has no derivative either): a double backward that reaches
one raises.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dispatch.apply import needs_grad
from ..tape.node import Node, edge, node_class
from ..functions.sampling import _host_rng, _no_trace
from ..tensor import Tensor

__all__ = ["standard_gamma", "gamma_dx_dalpha", "sample_dirichlet"]


def _lg() -> Any:
    import llgrad  # circle: llgrad -> distributions -> distributions.continuous -> here

    return llgrad


def gamma_dx_dalpha(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """dX/da of a standard gamma sample X = F^-1(u; a) at fixed u (float64 NumPy arrays of
    one shape): -(dF/da)(x; a) / p(x; a)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    x, a = np.broadcast_arrays(x, a)
    out = np.zeros(x.shape, dtype=np.float64)
    ok = (x > 0) & (a > 0) & np.isfinite(x) & np.isfinite(a)
    series = ok & (x < a + 1)
    frac = ok & ~series
    if series.any():
        out[series] = _series(x[series], a[series])
    if frac.any():
        out[frac] = _continued_fraction(x[frac], a[frac])
    out[~ok] = np.where(x[~ok] == 0, 0.0, np.nan)
    return out


def _series(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    # P(a, x) = x^a e^-x / Γ(a+1) * S,  S = Σ_n x^n / ((a+1)...(a+n))
    # dP/da / p(x; a) = (x / a) * [(log x - ψ(a+1)) S + S']
    term = np.ones_like(x)
    dterm = np.zeros_like(x)  # d term / da
    s = term.copy()
    ds = dterm.copy()
    cum = np.zeros_like(x)  # Σ_k 1 / (a + k)
    active = np.ones(x.shape, dtype=bool)
    limit = int(60 + 40 * np.sqrt(np.max(a) + np.max(x)))
    for n in range(1, limit + 1):
        inv = 1.0 / (a + n)
        term = term * x * inv
        cum = cum + inv
        dterm = -term * cum
        s = np.where(active, s + term, s)
        ds = np.where(active, ds + dterm, ds)
        active = active & (
            (np.abs(term) > 1e-17 * np.abs(s))
            | (np.abs(dterm) > 1e-17 * np.maximum(np.abs(ds), 1e-300))
        )
        if not active.any():
            break
    from scipy.special import digamma  # SciPy's special functions load on first use

    ratio = (x / a) * ((np.log(x) - digamma(a + 1)) * s + ds)
    return -ratio


def _continued_fraction(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    # Q(a, x) = x^a e^-x / Γ(a) * h,  h = 1 / F,
    # F = b0 + a1 / (b1 + a2 / (b2 + ...)),  b_i = x + 2i + 1 - a,  a_i = -i (i - a).
    # dX/da = dQ/da / p(x; a) = x * [(log x - ψ(a)) h + h'].
    # Convergents A_n / B_n with their a-derivatives, rescaled every step.
    a_prev, da_prev = np.ones_like(x), np.zeros_like(x)  # A_{-1}
    b_prev, db_prev = np.zeros_like(x), np.zeros_like(x)  # B_{-1}
    a_cur, da_cur = x + 1 - a, -np.ones_like(x)  # A_0 = b0
    b_cur, db_cur = np.ones_like(x), np.zeros_like(x)  # B_0 = 1
    f = a_cur / b_cur
    df = da_cur.copy()
    active = np.ones(x.shape, dtype=bool)
    limit = int(60 + 40 * np.sqrt(np.max(a)))
    for i in range(1, limit + 1):
        an, dan = -i * (i - a), float(i) * np.ones_like(x)
        bn, dbn = x + 2 * i + 1 - a, -np.ones_like(x)
        a_new = bn * a_cur + an * a_prev
        da_new = dbn * a_cur + bn * da_cur + dan * a_prev + an * da_prev
        b_new = bn * b_cur + an * b_prev
        db_new = dbn * b_cur + bn * db_cur + dan * b_prev + an * db_prev
        scale = np.where(b_new != 0, 1.0 / np.abs(b_new), 1.0)
        a_prev, da_prev, b_prev, db_prev = (
            a_cur * scale,
            da_cur * scale,
            b_cur * scale,
            db_cur * scale,
        )
        a_cur, da_cur, b_cur, db_cur = a_new * scale, da_new * scale, b_new * scale, db_new * scale
        f_new = a_cur / b_cur
        df_new = (da_cur * b_cur - a_cur * db_cur) / (b_cur * b_cur)
        done = (np.abs(f_new - f) <= 1e-16 * np.abs(f_new)) & (
            np.abs(df_new - df) <= 1e-15 * np.maximum(np.abs(df_new), 1e-300)
        )
        f = np.where(active, f_new, f)
        df = np.where(active, df_new, df)
        active = active & ~done
        if not active.any():
            break
    h = 1.0 / f
    dh = -df / (f * f)
    from scipy.special import digamma

    return x * ((np.log(x) - digamma(a)) * h + dh)


class _GammaGradNode(Node):
    """Backward of a standard gamma sample: grad * dX/da (dX/da from the forward)."""

    __slots__ = ("dxda", "shape")

    def __init__(self, alpha: Tensor, dxda: Tensor):
        super().__init__((edge(alpha),))
        self.dxda = dxda
        self.shape = alpha._shape

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = grads[0]
        return (g * self.dxda,)


class _NoDerivative(Node):
    """What a double backward through dX/da reaches: torch's message."""

    __slots__ = ()

    def __init__(self, alpha: Tensor):
        super().__init__((edge(alpha),))

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        raise RuntimeError("the derivative for '_standard_gamma_grad' is not implemented.")


def standard_gamma(alpha: Tensor, generator: Any = None) -> Tensor:
    """Samples of Gamma(alpha, 1), alpha's shape and dtype, differentiable with respect to
    alpha by implicit reparameterization (grad_fn `StandardGammaBackward0`). Inside
    `lg.compile` it is a graph break (sampled on the host)."""
    lg = _lg()
    _no_trace("_standard_gamma", alpha)
    a = np.asarray(alpha.detach()._values(), dtype=np.float64).reshape(tuple(alpha.shape))
    rng = _host_rng("_standard_gamma", generator, max(a.size, 1))
    with np.errstate(invalid="ignore"):
        x = rng.standard_gamma(np.where(a > 0, a, 1.0)) if a.size else np.zeros(a.shape)
    x = np.where(a > 0, x, np.nan)
    x = np.asarray(x, dtype=np.float64).reshape(a.shape)
    tiny = np.finfo(
        np.dtype(alpha.dtype.name if alpha.dtype.name != "bfloat16" else "float32")
    ).tiny
    x = np.maximum(x, tiny)
    out = lg.tensor(x, dtype=alpha.dtype)
    if needs_grad([alpha]):
        dxda = lg.tensor(gamma_dx_dalpha(x.astype(np.float64), a), dtype=alpha.dtype)
        if needs_grad([alpha]):
            dxda._requires_grad = True
            dxda.grad_fn = node_class("StandardGammaGradBackward0", _NoDerivative)(alpha)
        out._requires_grad = True
        out.grad_fn = node_class("StandardGammaBackward0", _GammaGradNode)(alpha, dxda)
    return out


def sample_dirichlet(concentration: Tensor, generator: Any = None) -> Tensor:
    """Dirichlet samples along the last dim: independent standard gammas normalized to sum
    to 1; the gradient flows through each gamma's implicit reparameterization (a pathwise
    gradient, unbiased like torch's `_dirichlet_grad`, though not the same per sample)."""
    g = standard_gamma(concentration, generator)
    return g / g.sum(-1, keepdim=True)
