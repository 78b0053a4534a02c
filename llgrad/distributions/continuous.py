"""Univariate continuous distributions (and Dirichlet/Beta, which share the gamma sampler):
Normal, Uniform, Laplace, Cauchy, Exponential, Gamma, Chi2, Beta, Dirichlet, StudentT,
FisherSnedecor, VonMises, GeneralizedPareto, ContinuousBernoulli.

Everything is written with llgrad ops, so log_prob/cdf/entropy/moments are differentiable
(and compile inside `lg.compile`). Location-scale families reparameterize `rsample` as
loc + scale * noise; Gamma, Chi2, Beta, Dirichlet, StudentT and FisherSnedecor
reparameterize through the implicit gamma gradient of `_gamma.standard_gamma`.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any, Sequence

import numpy as np

from ..functions.sampling import _host_rng, _no_trace
from ..tensor import Size, Tensor
from . import constraints
from ._common import all_numbers, expand_params, inf_like, lg, nan_like
from ._gamma import sample_dirichlet, standard_gamma
from .distribution import Distribution, ExponentialFamily
from .utils import (
    _standard_normal,
    broadcast_all,
    clamp_probs,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)

__all__ = [
    "Normal",
    "Uniform",
    "Laplace",
    "Cauchy",
    "Exponential",
    "Gamma",
    "Chi2",
    "Beta",
    "Dirichlet",
    "StudentT",
    "FisherSnedecor",
    "VonMises",
    "GeneralizedPareto",
    "ContinuousBernoulli",
]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _shape(d: Distribution, sample_shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(d._extended_shape(sample_shape))


def _uniform(shape: Sequence[int], like: Tensor) -> Tensor:
    return lg().rand(tuple(shape), dtype=like.dtype)


class Normal(ExponentialFamily):
    """The normal distribution N(loc, scale²).

    Args:
        loc: mean (tensor or number).
        scale: standard deviation (> 0).
        validate_args: see `Distribution`."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = Size() if all_numbers(loc, scale) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Normal":
        return expand_params(self, Normal, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.square()

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        with lg().no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        shape = _shape(self, sample_shape)
        eps = _standard_normal(shape, self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale.square()
        log_scale = self.scale.log()
        return -((value - self.loc).square()) / (2 * var) - log_scale - _HALF_LOG_2PI

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + lg().erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * lg().erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + _HALF_LOG_2PI + lg().log(self.scale)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.loc / self.scale.square(), -0.5 * self.scale.square().reciprocal())

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return -0.25 * x.square() / y + 0.5 * lg().log(-math.pi / y)


class Uniform(Distribution):
    """The continuous uniform distribution on [low, high).

    Args:
        low: lower bound (inclusive).
        high: upper bound (exclusive); validation requires low < high (torch 2.13's
            message: low must satisfy LessThan(high))."""

    has_rsample = True

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:  # type: ignore[override]
        """low < high (each checked against the other)."""
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        batch_shape = Size() if all_numbers(low, high) else self.low.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Uniform":
        return expand_params(self, Uniform, batch_shape, ("low", "high"), _instance)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return nan_like(self.high)

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).square() / 12

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> Any:
        return constraints.interval(self.low, self.high)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        rand = _uniform(_shape(self, sample_shape), self.low)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return lg().log(lb * ub) - lg().log(self.high - self.low)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value: Tensor) -> Tensor:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return lg().log(self.high - self.low)


class Laplace(Distribution):
    """The Laplace distribution (location `loc`, scale `scale` > 0)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = Size() if all_numbers(loc, scale) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Laplace":
        return expand_params(self, Laplace, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.square()

    @property
    def stddev(self) -> Tensor:
        return (2**0.5) * self.scale

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        eps = lg().finfo(self.loc.dtype).eps
        u = _uniform(_shape(self, sample_shape), self.loc) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * lg().log1p(-u.abs())

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -lg().log(2 * self.scale) - lg().abs(value - self.loc) / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * lg().expm1(
            -(value - self.loc).abs() / self.scale
        )

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * lg().log1p(-2 * term.abs())

    def entropy(self) -> Tensor:
        return 1 + lg().log(2 * self.scale)


class Cauchy(Distribution):
    """The Cauchy (Lorentz) distribution: median `loc`, half width `scale` > 0."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = Size() if all_numbers(loc, scale) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Cauchy":
        return expand_params(self, Cauchy, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self) -> Tensor:
        return nan_like(self.loc)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return inf_like(self.loc)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        u = _uniform(_shape(self, sample_shape), self.loc)
        eps = lg().tan(math.pi * (u - 0.5))
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (
            -math.log(math.pi)
            - self.scale.log()
            - ((value - self.loc) / self.scale).square().log1p()
        )

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return lg().atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return lg().tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class Exponential(ExponentialFamily):
    """The exponential distribution with rate `rate` > 0."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Exponential":
        return expand_params(self, Exponential, batch_shape, ("rate",), _instance)

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return lg().zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.square().reciprocal()

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        u = _uniform(_shape(self, sample_shape), self.rate)
        return -lg().log1p(-u) / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - lg().exp(-self.rate * value)

    def icdf(self, value: Tensor) -> Tensor:
        return -lg().log1p(-value) / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - lg().log(self.rate)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (-self.rate,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return -lg().log(-x)


class Gamma(ExponentialFamily):
    """The gamma distribution with shape `concentration` > 0 and `rate` > 0 (density
    rate^c x^(c-1) e^(-rate x) / Γ(c)). `rsample` is differentiable in both parameters
    (implicit reparameterization, see `llgrad.distributions._gamma`)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch_shape = Size() if all_numbers(concentration, rate) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Gamma":
        return expand_params(self, Gamma, batch_shape, ("concentration", "rate"), _instance)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.square()

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        shape = _shape(self, sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        tiny = lg().finfo(value.dtype).tiny
        with lg().no_grad():
            value.detach().clamp_(min=tiny)
        return value

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        value = L.as_tensor(value, dtype=self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        return (
            L.xlogy(self.concentration, self.rate)
            + L.xlogy(self.concentration - 1, value)
            - self.rate * value
            - L.lgamma(self.concentration)
        )

    def entropy(self) -> Tensor:
        L = lg()
        return (
            self.concentration
            - L.log(self.rate)
            + L.lgamma(self.concentration)
            + (1.0 - self.concentration) * L.digamma(self.concentration)
        )

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        L = lg()
        return L.lgamma(x + 1) + (x + 1) * L.log(-y.reciprocal())

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return lg().special.gammainc(self.concentration, self.rate * value)


class Chi2(Gamma):
    """The chi-squared distribution with `df` degrees of freedom: Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Any, validate_args: bool | None = None) -> None:
        super().__init__(
            0.5 * df if isinstance(df, Tensor) else 0.5 * df, 0.5, validate_args=validate_args
        )

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Chi2":
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self) -> Tensor:
        """The degrees of freedom (twice the concentration)."""
        return self.concentration * 2


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution on the simplex with `concentration` (..., K) > 0.
    `rsample` normalizes reparameterized gamma draws (gradient: each gamma's implicit
    one; torch uses the Dirichlet's own implicit gradient — both are unbiased pathwise
    gradients, per-sample values differ)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Dirichlet":
        return expand_params(
            self, Dirichlet, batch_shape, ("concentration",), _instance, param_event_dims=1
        )

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        shape = _shape(self, sample_shape)
        concentration = self.concentration.expand(shape)
        return sample_dirichlet(concentration)

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        return (
            L.xlogy(self.concentration - 1.0, value).sum(-1)
            + L.lgamma(self.concentration.sum(-1))
            - L.lgamma(self.concentration).sum(-1)
        )

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        L = lg()
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        mask = (self.concentration < 1).all(dim=-1, keepdim=True)
        k = concentrationm1.shape[-1]
        onehot = L.nn.functional.one_hot(mode.argmax(-1), k).to(mode.dtype)
        return L.where(mask, onehot, mode)

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.square() * (con0 + 1))

    def entropy(self) -> Tensor:
        L = lg()
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (
            L.lgamma(self.concentration).sum(-1)
            - L.lgamma(a0)
            - (k - a0) * L.digamma(a0)
            - ((self.concentration - 1.0) * L.digamma(self.concentration)).sum(-1)
        )

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.concentration,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        L = lg()
        return L.lgamma(x).sum(-1) - L.lgamma(x.sum(-1))


class Beta(ExponentialFamily):
    """The beta distribution on [0, 1] with `concentration1` (alpha) and
    `concentration0` (beta), both > 0 (a two-component Dirichlet underneath)."""

    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(
        self, concentration1: Any, concentration0: Any, validate_args: bool | None = None
    ) -> None:
        L = lg()
        if all_numbers(concentration1, concentration0):
            concentration1_concentration0 = L.tensor([float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            concentration1_concentration0 = L.stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(concentration1_concentration0, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Beta":
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = Size(tuple(batch_shape))
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.square() * (total + 1))

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = lg().stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    @property
    def concentration1(self) -> Tensor:
        """alpha."""
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        """beta."""
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        L = lg()
        return L.lgamma(x) + L.lgamma(y) - L.lgamma(x + y)

    def cdf(self, value: Tensor) -> Tensor:
        """The regularized incomplete beta function I_value(alpha, beta), computed on the
        host with SciPy (no gradient: torch has no Beta.cdf at all)."""
        from scipy import special as sp

        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        a, b, v = L.broadcast_tensors(
            self.concentration1.detach(),
            self.concentration0.detach(),
            L.as_tensor(value, dtype=self.concentration1.dtype).detach(),
        )
        out = sp.betainc(
            np.asarray(a.numpy(), dtype=np.float64),
            np.asarray(b.numpy(), dtype=np.float64),
            np.clip(np.asarray(v.numpy(), dtype=np.float64), 0, 1),
        )
        return L.tensor(out, dtype=a.dtype)


class StudentT(Distribution):
    """Student's t distribution with `df` > 0 degrees of freedom, location `loc`, scale
    `scale` > 0. rsample = loc + scale * Z / sqrt(V / df), Z normal and V ~ Chi2(df)
    (reparameterized in all three parameters)."""

    arg_constraints = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(
        self, df: Any, loc: Any = 0.0, scale: Any = 1.0, validate_args: bool | None = None
    ) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        batch_shape = self.df.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "StudentT":
        new = expand_params(self, StudentT, batch_shape, ("df", "loc", "scale"), _instance)
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        L = lg()
        return L.where(self.df > 1, self.loc, nan_like(self.loc))

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        L = lg()
        safe_df = L.where(self.df > 2, self.df, L.full_like(self.df, 3.0))
        finite = self.scale.square() * safe_df / (safe_df - 2)
        return L.where(
            self.df > 2, finite, L.where(self.df > 1, inf_like(self.df), nan_like(self.df))
        )

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        shape = _shape(self, sample_shape)
        x = _standard_normal(shape, self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        y = x * L.rsqrt(z / self.df)
        return self.loc + self.scale * y

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + L.lgamma(0.5 * self.df)
            - L.lgamma(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * L.log1p(y.square() / self.df) - z

    def entropy(self) -> Tensor:
        L = lg()
        lbeta = L.lgamma(0.5 * self.df) + math.lgamma(0.5) - L.lgamma(0.5 * (self.df + 1))
        return (
            self.scale.log()
            + 0.5 * (self.df + 1) * (L.digamma(0.5 * (self.df + 1)) - L.digamma(0.5 * self.df))
            + 0.5 * self.df.log()
            + lbeta
        )


class FisherSnedecor(Distribution):
    """The F distribution with `df1` and `df2` > 0 degrees of freedom (a ratio of scaled
    chi-squared variables; rsample reparameterized)."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Any, df2: Any, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        batch_shape = Size() if all_numbers(df1, df2) else self.df1.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "FisherSnedecor":
        new = expand_params(self, FisherSnedecor, batch_shape, ("df1", "df2"), _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        L = lg()
        ok = self.df2 > 2
        df2 = L.where(ok, self.df2, L.full_like(self.df2, 3.0))
        return L.where(ok, df2 / (df2 - 2), nan_like(df2))

    @property
    def mode(self) -> Tensor:
        L = lg()
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return L.where(self.df1 > 2, mode, nan_like(mode))

    @property
    def variance(self) -> Tensor:
        L = lg()
        ok = self.df2 > 4
        df2 = L.where(ok, self.df2, L.full_like(self.df2, 5.0))
        var = 2 * df2.square() * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).square() * (df2 - 4))
        return L.where(ok, var, nan_like(var))

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        shape = _shape(self, sample_shape)
        # X1 ~ Gamma(df1 / 2, rate df1) = Chi2(df1) / (2 df1), likewise X2: Y = X1 / X2
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = self._gamma2.rsample(sample_shape).reshape(shape)
        tiny = L.finfo(x2.dtype).tiny
        x2 = x2.clamp(min=tiny)
        y = x1 / x2
        return y.clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * L.log(value)
        t3 = (ct1 + ct2) * L.log1p(ct3 * value)
        return t1 + t2 - t3


def _log_bessel_i(x: Tensor, order: int) -> Tensor:
    """log I_order(x) for x > 0 (order 0 or 1), from the exponentially scaled functions."""
    L = lg()
    scaled = L.special.i0e(x) if order == 0 else L.special.i1e(x)
    return scaled.log() + x


class VonMises(Distribution):
    """The von Mises distribution on the circle: mean direction `loc` (radians, any real)
    and `concentration` > 0. Sampling draws on the host (NumPy's von Mises sampler on a
    generator keyed by llgrad's stream; a graph break inside `lg.compile`); there is no
    rsample (as torch)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc: Any, concentration: Any, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, Size(), validate_args)

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * L.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - _log_bessel_i(self.concentration, 0)

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        _no_trace("VonMises.sample", self.loc, self.concentration)
        shape = _shape(self, sample_shape)
        mu = np.broadcast_to(np.asarray(self.loc.detach().numpy(), dtype=np.float64), shape)
        kappa = np.broadcast_to(
            np.asarray(self.concentration.detach().numpy(), dtype=np.float64), shape
        )
        n = int(np.prod(shape)) if shape else 1
        rng = _host_rng("VonMises.sample", None, n)
        x = rng.vonmises(0.0, kappa) if n else np.zeros(shape)
        x = np.mod(np.asarray(x) + math.pi + mu, 2 * math.pi) - math.pi
        return L.tensor(np.asarray(x, dtype=np.float64).reshape(shape), dtype=self.loc.dtype)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "VonMises":
        return expand_params(self, VonMises, batch_shape, ("loc", "concentration"), _instance)

    @property
    def mean(self) -> Tensor:
        """The circular mean (loc)."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:  # type: ignore[override]
        """The circular variance 1 - I1(k)/I0(k)."""
        return (
            1 - (_log_bessel_i(self.concentration, 1) - _log_bessel_i(self.concentration, 0)).exp()
        )


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution (`loc`, `scale` > 0, `concentration` real);
    concentration 0 is the exponential limit. rsample = icdf(uniform)."""

    arg_constraints = {
        "loc": constraints.real,
        "scale": constraints.positive,
        "concentration": constraints.real,
    }
    has_rsample = True

    def __init__(
        self, loc: Any, scale: Any, concentration: Any, validate_args: bool | None = None
    ) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        batch_shape = Size() if all_numbers(loc, scale, concentration) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "GeneralizedPareto":
        return expand_params(
            self, GeneralizedPareto, batch_shape, ("loc", "scale", "concentration"), _instance
        )

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        u = _uniform(_shape(self, sample_shape), self.loc)
        return self.icdf(u)

    def _safe(self) -> tuple[Tensor, Tensor]:
        L = lg()
        eq_zero = L.isclose(self.concentration, L.zeros_like(self.concentration))
        safe = L.where(eq_zero, L.ones_like(self.concentration), self.concentration)
        return eq_zero, safe

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe = self._safe()
        y = 1 / safe + L.ones_like(z)
        where_nonzero = L.where(y == 0, y, y * L.log1p(safe * z))
        return -self.scale.log() - L.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value: Tensor) -> Tensor:
        """log(1 - cdf(value))."""
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe = self._safe()
        return L.where(eq_zero, -z, -L.log1p(safe * z) / safe)

    def log_cdf(self, value: Tensor) -> Tensor:
        """log(cdf(value))."""
        L = lg()
        return L.log1p(-L.exp(self.log_survival_function(value)))

    def cdf(self, value: Tensor) -> Tensor:
        return lg().exp(self.log_cdf(value))

    def icdf(self, value: Tensor) -> Tensor:
        L = lg()
        eq_zero, safe = self._safe()
        logu = L.log1p(-value)
        where_nonzero = self.loc + self.scale / safe * L.expm1(-safe * logu)
        where_zero = self.loc - self.scale * logu
        return L.where(eq_zero, where_zero, where_nonzero)

    @property
    def mean(self) -> Tensor:
        L = lg()
        valid = self.concentration < 1
        safe = L.where(valid, self.concentration, L.full_like(self.concentration, 0.5))
        return L.where(valid, self.loc + self.scale / (1 - safe), nan_like(self.loc))

    @property
    def variance(self) -> Tensor:
        L = lg()
        valid = self.concentration < 0.5
        safe = L.where(valid, self.concentration, L.full_like(self.concentration, 0.25))
        result = self.scale.square() / ((1 - safe).square() * (1 - 2 * safe))
        return L.where(valid, result, nan_like(result))

    def entropy(self) -> Tensor:
        L = lg()
        ans = L.log(self.scale) + self.concentration + 1
        return ans.expand(tuple(self._batch_shape))

    @property
    def mode(self) -> Tensor:
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> Any:
        L = lg()
        lower = self.loc
        upper = L.where(
            self.concentration < 0, lower - self.scale / self.concentration, inf_like(lower)
        )
        return constraints.interval(lower, upper)


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem & Cunningham), given
    by `probs` or `logits`; near probs = 0.5 (inside `lims`) Taylor expansions are used,
    as torch. rsample = icdf(uniform)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(
        self,
        probs: Any = None,
        logits: Any = None,
        lims: tuple[float, float] = (0.499, 0.501),
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            if validate_args is not None:
                if not self.arg_constraints["probs"].check(self.probs).all():
                    raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "ContinuousBernoulli":
        new = expand_params(
            self, ContinuousBernoulli, batch_shape, ("probs", "logits"), _instance, extra=("_lims",)
        )
        new._lims = self._lims
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    def _outside_unstable_region(self) -> Tensor:
        return lg().le(self.probs, self._lims[0]) | lg().gt(self.probs, self._lims[1])

    def _cut_probs(self) -> Tensor:
        L = lg()
        return L.where(
            self._outside_unstable_region(), self.probs, self._lims[0] * L.ones_like(self.probs)
        )

    def _cont_bern_log_norm(self) -> Tensor:
        L = lg()
        cut = self._cut_probs()
        below = L.where(L.le(cut, 0.5), cut, L.zeros_like(cut))
        above = L.where(L.ge(cut, 0.5), cut, L.ones_like(cut))
        log_norm = L.log(L.abs(L.log1p(-cut) - L.log(cut))) - L.where(
            L.le(cut, 0.5), L.log1p(-2.0 * below), L.log(2.0 * above - 1.0)
        )
        x = (self.probs - 0.5).square()
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return L.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        L = lg()
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (L.log1p(-cut) - L.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * (x).square()) * x
        return L.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self) -> Tensor:
        return lg().sqrt(self.variance)

    @property
    def variance(self) -> Tensor:
        L = lg()
        cut = self._cut_probs()
        vs = (
            cut * (cut - 1.0) / (1.0 - 2.0 * cut).square()
            + 1.0 / (L.log1p(-cut) - L.log(cut)).square()
        )
        x = (self.probs - 0.5).square()
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return L.where(self._outside_unstable_region(), vs, taylor)

    @lazy_property
    def logits(self) -> Tensor:
        """log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """sigmoid(logits), clamped into [eps, 1 - eps]."""
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given."""
        return self._param.size()

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        u = _uniform(_shape(self, sample_shape), self.probs)
        with lg().no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        u = _uniform(_shape(self, sample_shape), self.probs)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return (
            -L.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")
            + self._cont_bern_log_norm()
        )

    def cdf(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (L.pow(cut, value) * L.pow(1.0 - cut, 1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = L.where(self._outside_unstable_region(), cdfs, value)
        return L.where(
            L.le(value, 0.0),
            L.zeros_like(value),
            L.where(L.ge(value, 1.0), L.ones_like(value), unbounded),
        )

    def icdf(self, value: Tensor) -> Tensor:
        L = lg()
        cut = self._cut_probs()
        return L.where(
            self._outside_unstable_region(),
            (L.log1p(-cut + value * (2.0 * cut - 1.0)) - L.log1p(-cut))
            / (L.log(cut) - L.log1p(-cut)),
            value,
        )

    def entropy(self) -> Tensor:
        L = lg()
        log_probs0 = L.log1p(-self.probs)
        log_probs1 = L.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        L = lg()
        out = L.le(x, self._lims[0] - 0.5) | L.gt(x, self._lims[1] - 0.5)
        cut = L.where(out, x, (self._lims[0] - 0.5) * L.ones_like(x))
        log_norm = L.log(L.abs(L.expm1(cut))) - L.log(L.abs(cut))
        taylor = 0.5 * x + (x).square() / 24.0 - x.square().square() / 2880.0
        return L.where(out, log_norm, taylor)
