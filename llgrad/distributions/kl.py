"""`kl_divergence(p, q)` and `register_kl`: closed-form KL divergences between
distribution pairs, dispatched on the most specific registered pair of classes (as
`torch.distributions.kl`), with torch's registered pairs.

Every formula is written with llgrad ops, so the divergences are differentiable in both
distributions' parameters. Where torch writes `inf` into masked positions, llgrad selects
with `where` (same values; zero gradient there, as torch's masked write gives).
"""

from __future__ import annotations

import math
import warnings
from functools import total_ordering
from typing import Any, Callable

from ..tensor import Tensor
from ._common import lg
from .continuous import (
    Beta,
    Cauchy,
    ContinuousBernoulli,
    Dirichlet,
    Exponential,
    Gamma,
    Laplace,
    Normal,
    Uniform,
)
from .discrete import Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson
from .distribution import Distribution, ExponentialFamily
from .multivariate import (
    LowRankMultivariateNormal,
    MultivariateNormal,
    _batch_lowrank_logdet,
    _batch_lowrank_mahalanobis,
    _batch_mahalanobis,
)
from .transformed import Gumbel, HalfNormal, Independent, Pareto, TransformedDistribution
from .utils import _sum_rightmost, euler_constant as _euler_gamma

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY: dict[tuple[type, type], Callable[..., Any]] = {}
_KL_MEMOIZE: dict[tuple[type, type], Any] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering `fun(p, q)` as KL(p || q) for instances of `type_p` and
    `type_q` (subclasses included; the most specific registered pair wins, and an
    ambiguous pair warns as torch)."""
    for t in (type_p, type_q):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(
                f"Expected type_{'p' if t is type_p else 'q'} to be a "
                f"Distribution subclass but got {t}"
            )

    def decorator(fun: Callable[..., Any]) -> Callable[..., Any]:
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun

    return decorator


@total_ordering
class _Match:
    """Orders (type_p, type_q) pairs lexicographically by subclass relation."""

    __slots__ = ["types"]

    def __init__(self, *types: type) -> None:
        self.types = types

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Match) and self.types == other.types

    def __le__(self, other: "_Match") -> bool:
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p: type, type_q: type) -> Any:
    matches = [
        (sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)
    ]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(
            f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
            f"Please register_kl({left_p.__name__}, {right_q.__name__})",
            RuntimeWarning,
            stacklevel=2,
        )
    return left_fun


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the batch shape. Raises
    NotImplementedError (torch's message) for a pair with no registered formula."""
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type "
            f"{p.__class__.__name__} and q type {q.__class__.__name__}"
        )
    return fun(p, q)


def _inf_like(t: Tensor) -> Tensor:
    return lg().full_like(t, math.inf)


def _set_inf(result: Tensor, mask: Any) -> Tensor:
    return lg().where(mask, _inf_like(result), result)


def _x_log_x(t: Tensor) -> Tensor:
    return lg().xlogy(t, t)


def _batch_trace_XXT(bmat: Tensor) -> Tensor:
    """trace(X X^T) over batch dims: the sum of squares of each matrix."""
    return bmat.square().sum((-2, -1))


# ---- same-family pairs -------------------------------------------------------------


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Any, q: Any) -> Tensor:
    L = lg()
    F = L.nn.functional
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = L.where(p.probs == 0, L.zeros_like(t1), _set_inf(t1, q.probs == 0))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = L.where(p.probs == 1, L.zeros_like(t2), _set_inf(t2, q.probs == 1))
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Any, q: Any) -> Tensor:
    L = lg()
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * L.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * L.digamma(p.concentration0)
    t5 = (sum_q - sum_p) * L.digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Any, q: Any) -> Tensor:
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented"
        )
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _set_inf(kl, p.total_count > q.total_count)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Any, q: Any) -> Tensor:
    L = lg()
    t = p.probs * (p.logits - q.logits)
    t = _set_inf(t, (q.probs == 0).expand_as(t))
    t = L.where((p.probs == 0).expand_as(t), L.zeros_like(t), t)
    return t.sum(-1)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p: Any, q: Any) -> Tensor:
    L = lg()
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + L.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - L.log1p(-q.probs)
    return t1 + t2 + t3


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Any, q: Any) -> Tensor:
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Any, q: Any) -> Tensor:
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: Any, q: Any) -> Tensor:
    """The Bregman divergence of the log normalizer (same family only)."""
    L = lg()
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential "
            "families cannot be computed using Bregman divergences"
        )
    p_nparams = [n.detach().requires_grad_() for n in p._natural_params]
    q_nparams = q._natural_params
    with L.enable_grad():
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = L.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        result = result - _sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Any, q: Any) -> Tensor:
    L = lg()
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = L.lgamma(q.concentration) - L.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * L.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Any, q: Any) -> Tensor:
    L = lg()
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _euler_gamma
    t3 = L.exp(ct2 + (1 + ct1).lgamma() - ct3)
    return t1 + t2 + t3 - (1 + _euler_gamma)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Any, q: Any) -> Tensor:
    return -p.entropy() - lg().log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: Any, q: Any) -> Tensor:
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Any, q: Any) -> Tensor:
    L = lg()
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return (
        -scale_ratio.log()
        + loc_abs_diff / q.scale
        + scale_ratio * L.exp(-loc_abs_diff / p.scale)
        - 1
    )


def _same_event(p: Any, q: Any, what: str) -> None:
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError(
            f"KL-divergence between two {what} with different event shapes cannot be computed"
        )


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p: Any, q: Any) -> Tensor:
    L = lg()
    _same_event(p, q, "Low Rank Multivariate Normals")
    term1 = _batch_lowrank_logdet(
        q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q._capacitance_tril
    ) - _batch_lowrank_logdet(
        p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, p._capacitance_tril
    )
    term3 = _batch_lowrank_mahalanobis(
        q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q.loc - p.loc, q._capacitance_tril
    )
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    A = L.linalg.solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)
    term21 = (p._unbroadcasted_cov_diag / q._unbroadcasted_cov_diag).sum(-1)
    term22 = _batch_trace_XXT(
        p._unbroadcasted_cov_factor * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1)
    )
    term23 = _batch_trace_XXT(A * p._unbroadcasted_cov_diag.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(A.matmul(p._unbroadcasted_cov_factor))
    term2 = term21 + term22 - term23 - term24
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p: Any, q: Any) -> Tensor:
    L = lg()
    _same_event(p, q, "(Low Rank) Multivariate Normals")
    term1 = _batch_lowrank_logdet(
        q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q._capacitance_tril
    ) - 2 * p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    term3 = _batch_lowrank_mahalanobis(
        q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q.loc - p.loc, q._capacitance_tril
    )
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    A = L.linalg.solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)
    term21 = _batch_trace_XXT(
        p._unbroadcasted_scale_tril * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1)
    )
    term22 = _batch_trace_XXT(A.matmul(p._unbroadcasted_scale_tril))
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p: Any, q: Any) -> Tensor:
    L = lg()
    _same_event(p, q, "(Low Rank) Multivariate Normals")
    term1 = 2 * q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(
        -1
    ) - _batch_lowrank_logdet(
        p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, p._capacitance_tril
    )
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    batch = tuple(
        L.broadcast_shapes(
            tuple(q._unbroadcasted_scale_tril.shape[:-2]),
            tuple(p._unbroadcasted_cov_factor.shape[:-2]),
        )
    )
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_cov_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_cov_diag = L.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term21 = _batch_trace_XXT(L.linalg.solve_triangular(q_scale_tril, p_cov_factor, upper=False))
    term22 = _batch_trace_XXT(L.linalg.solve_triangular(q_scale_tril, p_cov_diag, upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: Any, q: Any) -> Tensor:
    L = lg()
    _same_event(p, q, "Multivariate Normals")
    half_term1 = q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(
        -1
    ) - p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    batch = tuple(
        L.broadcast_shapes(
            tuple(q._unbroadcasted_scale_tril.shape[:-2]),
            tuple(p._unbroadcasted_scale_tril.shape[:-2]),
        )
    )
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_scale_tril = p._unbroadcasted_scale_tril.expand(batch + (n, n))
    term2 = _batch_trace_XXT(L.linalg.solve_triangular(q_scale_tril, p_scale_tril, upper=False))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Any, q: Any) -> Tensor:
    var_ratio = (p.scale / q.scale).square()
    t1 = ((p.loc - q.loc) / q.scale).square()
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p: Any, q: Any) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Any, q: Any) -> Tensor:
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _set_inf(result, p.support.lower_bound < q.support.lower_bound)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Any, q: Any) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: Any, q: Any) -> Tensor:
    """KL of the base distributions, when both push through equal transforms."""
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions needs equal transforms")
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise NotImplementedError("KL between TransformedDistributions needs equal event shapes")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Any, q: Any) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _set_inf(result, (q.low > p.low) | (q.high < p.high))


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Any, q: Any) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "KL between Independent distributions needs equal reinterpreted_batch_ndims"
        )
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Any, q: Any) -> Tensor:
    t1 = ((p.scale + q.scale).square() + (p.loc - q.loc).square()).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


# ---- cross-family pairs ------------------------------------------------------------


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Any, q: Any) -> Tensor:
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_cb(p: Any, q: Any) -> Tensor:
    return -p.entropy() - p.mean * q.logits - lg().log1p(-q.probs) - q._cont_bern_log_norm()


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p: Any, q: Any) -> Tensor:
    return (
        -p.entropy()
        - q.rate.log()
        + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))
    )


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p: Any, q: Any) -> Tensor:
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (
        p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    )
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p: Any, q: Any) -> Tensor:
    E_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.square()
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E_beta * (1 - E_beta) / (p.concentration1 + p.concentration0 + 1) + E_beta.square()) * 0.5
    t4 = q.loc * E_beta
    t5 = q.loc.square() * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p: Any, q: Any) -> Tensor:
    result = -p.entropy() + (q.high - q.low).log()
    return _set_inf(result, (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound))


@register_kl(ContinuousBernoulli, Exponential)
def _kl_cb_exponential(p: Any, q: Any) -> Tensor:
    return -p.entropy() - lg().log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_cb_normal(p: Any, q: Any) -> Tensor:
    L = lg()
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + L.square(q.loc / q.scale)) + L.log(q.scale)
    t3 = (p.variance + L.square(p.mean) - 2.0 * q.loc * p.mean) / (2.0 * L.square(q.scale))
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_cb_uniform(p: Any, q: Any) -> Tensor:
    L = lg()
    result = -p.entropy() + (q.high - q.low).log()
    return _set_inf(
        result, L.ge(q.low, p.support.lower_bound) | L.le(q.high, p.support.upper_bound)
    )


def _kl_infinity(attr: str) -> Callable[[Any, Any], Tensor]:
    def fun(p: Any, q: Any) -> Tensor:
        return _inf_like(getattr(p, attr))

    fun.__doc__ = "KL is infinite: q's support does not cover p's."
    return fun


for _p, _qs, _attr in (
    (Beta, (Pareto,), "concentration1"),
    (ContinuousBernoulli, (Pareto,), "probs"),
    (Exponential, (Beta, ContinuousBernoulli, Pareto, Uniform), "rate"),
    (Gamma, (Beta, ContinuousBernoulli, Pareto, Uniform), "concentration"),
    (Gumbel, (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform), "loc"),
    (Laplace, (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform), "loc"),
    (Normal, (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform), "loc"),
    (Pareto, (Beta, ContinuousBernoulli, Uniform), "scale"),
    (Poisson, (Bernoulli, Binomial), "rate"),
):
    for _q in _qs:
        register_kl(_p, _q)(_kl_infinity(_attr))


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Any, q: Any) -> Tensor:
    L = lg()
    ratio = q.rate / p.rate
    t1 = -q.concentration * L.log(ratio)
    return (
        t1 + ratio + q.concentration.lgamma() + q.concentration * _euler_gamma - (1 + _euler_gamma)
    )


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p: Any, q: Any) -> Tensor:
    L = lg()
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = L.exp(loc_scale_ratio) * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p: Any, q: Any) -> Tensor:
    L = lg()
    var_normal = q.scale.square()
    rate_sqr = p.rate.square()
    t1 = 0.5 * L.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.square() * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Any, q: Any) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p: Any, q: Any) -> Tensor:
    L = lg()
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (
        (p.concentration - 1) * p.concentration.digamma()
        - p.concentration.lgamma()
        - p.concentration
    )
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = (
        L.exp(loc_scale_ratio) * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration)
        - loc_scale_ratio
    )
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p: Any, q: Any) -> Tensor:
    L = lg()
    var_normal = q.scale.square()
    beta_sqr = p.rate.square()
    t1 = (
        0.5 * L.log(beta_sqr * var_normal * 2 * math.pi)
        - p.concentration
        - p.concentration.lgamma()
    )
    t2 = 0.5 * (p.concentration.square() + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.square()
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + t4) / var_normal


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p: Any, q: Any) -> Tensor:
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).square() / 3
    t3 = ((p.loc + p.scale * _euler_gamma - q.loc) / q.scale).square() * 0.5
    return -t1 + t2 + t3 - (_euler_gamma + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p: Any, q: Any) -> Tensor:
    L = lg()
    var_normal = q.scale.square()
    scale_sqr_var_ratio = p.scale.square() / var_normal
    t1 = 0.5 * L.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.square()
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.square()
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p: Any, q: Any) -> Tensor:
    L = lg()
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).square()
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = L.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Any, q: Any) -> Tensor:
    L = lg()
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = L.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * L.exp(-0.5 * loc_diff_scale_ratio.square())
    t3 = loc_diff * L.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p: Any, q: Any) -> Tensor:
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    return _set_inf(t1 - t2 + t3 - 1, p.alpha <= 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p: Any, q: Any) -> Tensor:
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _set_inf(t1 + t2 + t3 + t4 - 1, p.alpha <= 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p: Any, q: Any) -> Tensor:
    var_normal = 2 * q.scale.square()
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.square() / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).square()
    return _set_inf(t1 - t2 + (t3 + t4) / var_normal - 1, p.alpha <= 2)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Any, q: Any) -> Tensor:
    L = lg()
    common_term = p.high - p.low
    t1 = L.log(common_term)
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t3 = (
        (q.concentration0 - 1)
        * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term)
        / common_term
    )
    t4 = (
        q.concentration1.lgamma()
        + q.concentration0.lgamma()
        - (q.concentration1 + q.concentration0).lgamma()
    )
    result = t3 + t4 - t1 - t2
    return _set_inf(result, (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound))


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p: Any, q: Any) -> Tensor:
    L = lg()
    result = -p.entropy() - p.mean * q.logits - L.log1p(-q.probs) - q._cont_bern_log_norm()
    return _set_inf(
        result, L.ge(p.high, q.support.upper_bound) | L.le(p.low, q.support.lower_bound)
    )


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p: Any, q: Any) -> Tensor:
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _set_inf(result, p.low < q.support.lower_bound)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p: Any, q: Any) -> Tensor:
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t4 = q.rate * (p.high + p.low) / 2
    return _set_inf(-t1 + t2 + t3 + t4, p.low < q.support.lower_bound)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p: Any, q: Any) -> Tensor:
    L = lg()
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (L.exp(-high_loc_diff) - L.exp(-low_loc_diff))
    return t1 - t2


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Any, q: Any) -> Tensor:
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.square() / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).square()
    return t1 + 0.5 * (t2 + t3) / q.scale.square()


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Any, q: Any) -> Tensor:
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * support_uniform).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - support_uniform) / support_uniform
    return _set_inf(t2 * (q.alpha + 1) - t1, p.low < q.support.lower_bound)
