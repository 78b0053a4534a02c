"""Discrete distributions: Bernoulli, Binomial, Categorical, OneHotCategorical(
StraightThrough), Geometric, Poisson, NegativeBinomial, Multinomial.

log_prob, entropy and moments are written with llgrad ops (differentiable with respect to
the parameters). Samples use llgrad's samplers: `bernoulli` and `multinomial`, and on the
host `binomial` and `poisson` (graph breaks inside `lg.compile`).
"""

from __future__ import annotations

from numbers import Number
from typing import Any, Sequence

from ..tensor import Size, Tensor
from . import constraints
from ._common import expand_params, lg, nan_like
from .continuous import Gamma
from .distribution import Distribution, ExponentialFamily
from .utils import _is_all_true, broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = [
    "Bernoulli",
    "Binomial",
    "Categorical",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Geometric",
    "Poisson",
    "NegativeBinomial",
    "Multinomial",
]


def _shape(d: Distribution, sample_shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(d._extended_shape(sample_shape))


def _one_of(probs: Any, logits: Any) -> None:
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _bce_logits(logits: Tensor, target: Tensor) -> Tensor:
    return lg().nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")


def _enumerate(
    values: Tensor, batch_shape: Sequence[int], expand: bool, event: tuple[int, ...] = ()
) -> Tensor:
    n = values.shape[0]
    values = values.reshape((n,) + (1,) * len(batch_shape) + event)
    if expand:
        values = values.expand((n,) + tuple(batch_shape) + event)
    return values


class Bernoulli(ExponentialFamily):
    """The Bernoulli distribution on {0, 1}, given by `probs` (P(1)) or `logits`
    (log-odds), not both."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        _one_of(probs, logits)
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Bernoulli":
        new = expand_params(self, Bernoulli, batch_shape, ("probs", "logits"), _instance)
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    def _new(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._param.new_tensor(*args, **kwargs)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return lg().where(self.probs == 0.5, nan_like(mode), mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    @lazy_property
    def logits(self) -> Tensor:
        """log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """sigmoid(logits)."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given."""
        return self._param.size()

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        with L.no_grad():
            return L.bernoulli(self.probs.expand(_shape(self, sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_logits(logits, value)

    def entropy(self) -> Tensor:
        return _bce_logits(self.logits, self.probs)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = lg().arange(2, dtype=self._param.dtype)
        return _enumerate(values, self._batch_shape, expand)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        L = lg()
        return L.log1p(L.exp(x))


def _clamp_by_zero(x: Tensor) -> Tensor:
    # max(x, 0) with gradient 1/2 at 0 (as torch)
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    """The binomial distribution: successes in `total_count` trials of probability
    `probs` (or `logits`)."""

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(
        self,
        total_count: Any = 1,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Binomial":
        new = expand_params(
            self, Binomial, batch_shape, ("total_count", "probs", "logits"), _instance
        )
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> Any:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    @lazy_property
    def logits(self) -> Tensor:
        """log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """sigmoid(logits)."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given."""
        return self._param.size()

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        shape = _shape(self, sample_shape)
        with L.no_grad():
            return L.binomial(
                self.total_count.expand(shape).contiguous(), self.probs.expand(shape).contiguous()
            )

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = L.lgamma(self.total_count + 1)
        log_factorial_k = L.lgamma(value + 1)
        log_factorial_nmk = L.lgamma(self.total_count - value + 1)
        # log(1 + e^logits) * n, written to stay finite for large |logits|
        normalize_term = (
            self.total_count * _clamp_by_zero(self.logits)
            + self.total_count * L.log1p(L.exp(-L.abs(self.logits)))
            - log_factorial_n
        )
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def _homogeneous_count(self, what: str) -> int:
        total_count = int(self.total_count.max())
        if not total_count == self.total_count.min():
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total_count

    def entropy(self) -> Tensor:
        """-Σ_k p(k) log p(k) over the support (as torch: the total count must be the same
        everywhere)."""
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(lg().exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total_count = self._homogeneous_count("enumerate_support")
        values = lg().arange(1 + total_count, dtype=self._param.dtype)
        return _enumerate(values, self._batch_shape, expand)


class Categorical(Distribution):
    """A categorical distribution over {0, ..., K-1} along the last dim of `probs`
    (nonnegative, normalized here) or `logits` (unnormalized log probabilities)."""

    arg_constraints = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    has_enumerate_support = True

    def __init__(
        self,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Categorical":
        new = expand_params(
            self, Categorical, batch_shape, ("probs", "logits"), _instance, param_event_dims=1
        )
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        new._num_events = self._num_events
        return new

    def _new(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._param.new_tensor(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> Any:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        """Normalized log probabilities."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given (batch_shape + (K,))."""
        return self._param.size()

    @property
    def mean(self) -> Tensor:
        return lg().full(_shape(self, ()), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(dim=-1)

    @property
    def variance(self) -> Tensor:
        return lg().full(_shape(self, ()), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        sample_shape = Size(tuple(sample_shape))
        with L.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            n = sample_shape.numel()
            if n == 0 or probs_2d.shape[0] == 0:
                return L.zeros(_shape(self, sample_shape), dtype=L.int64)
            samples_2d = L.multinomial(probs_2d, n, True).T
            return samples_2d.reshape(_shape(self, sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = L.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        L = lg()
        min_real = L.finfo(self.logits.dtype).min
        logits = L.clamp(self.logits, min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = lg().arange(self._num_events, dtype=lg().int64)
        return _enumerate(values, self._batch_shape, expand)


class OneHotCategorical(Distribution):
    """A categorical distribution whose samples are one-hot vectors of length K (the
    last dim of `probs`/`logits`)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(
        self,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "OneHotCategorical":
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = Size(tuple(batch_shape))
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._categorical._new(*args, **kwargs)

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        """Normalized log probabilities."""
        return self._categorical.logits

    @property
    def mean(self) -> Tensor:
        return self._categorical.probs

    @property
    def mode(self) -> Tensor:
        probs = self._categorical.probs
        mode = probs.argmax(dim=-1)
        return lg().nn.functional.one_hot(mode, num_classes=probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self) -> Tensor:
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given."""
        return self._categorical.param_shape

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        probs = self._categorical.probs
        num_events = self._categorical._num_events
        indices = self._categorical.sample(sample_shape)
        return L.nn.functional.one_hot(indices, num_events).to(probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = self.event_shape[0]
        values = lg().eye(n, dtype=self._param.dtype)
        return _enumerate(values, self._batch_shape, expand, (n,))


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical with a straight-through gradient: `rsample` returns the one-hot
    sample whose gradient is that of the probabilities."""

    has_rsample = True

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class Geometric(Distribution):
    """The number of failures before the first success of Bernoulli(probs) trials
    (support 0, 1, 2, ...); `probs` in (0, 1] or `logits`."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        batch_shape = (
            Size() if isinstance(probs if probs is not None else logits, Number) else param.size()
        )
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            valid = value > 0
            if not _is_all_true(valid):
                invalid_value = value.detach()[~valid]
                raise ValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to be "
                    f"positive but found invalid values:\n{invalid_value}"
                )

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Geometric":
        return expand_params(self, Geometric, batch_shape, ("probs", "logits"), _instance)

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return lg().zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self) -> Tensor:
        """log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """sigmoid(logits)."""
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        shape = _shape(self, sample_shape)
        tiny = L.finfo(self.probs.dtype).tiny
        with L.no_grad():
            u = L.rand(shape, dtype=self.probs.dtype).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = L.where((probs == 1) & (value == 0), L.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        return _bce_logits(self.logits, self.probs) / self.probs


class Poisson(ExponentialFamily):
    """The Poisson distribution with `rate` >= 0."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Poisson":
        return expand_params(self, Poisson, batch_shape, ("rate",), _instance)

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        with L.no_grad():
            return L.poisson(self.rate.expand(_shape(self, sample_shape)).contiguous())

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return L.xlogy(value, rate) - rate - L.lgamma(value + 1)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (lg().log(self.rate),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return lg().exp(x)


class NegativeBinomial(Distribution):
    """The number of successes before `total_count` failures of Bernoulli(probs)
    trials; `probs` in [0, 1) or `logits`."""

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(
        self,
        total_count: Any,
        probs: Any = None,
        logits: Any = None,
        validate_args: bool | None = None,
    ) -> None:
        _one_of(probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "NegativeBinomial":
        new = expand_params(
            self, NegativeBinomial, batch_shape, ("total_count", "probs", "logits"), _instance
        )
        new._param = new.probs if "probs" in self.__dict__ else new.logits
        return new

    @property
    def mean(self) -> Tensor:
        return self.total_count * lg().exp(self.logits)

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / lg().sigmoid(-self.logits)

    @lazy_property
    def logits(self) -> Tensor:
        """log(p / (1 - p))."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """sigmoid(logits)."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given."""
        return self._param.size()

    @lazy_property
    def _gamma(self) -> Any:
        return Gamma(
            concentration=self.total_count, rate=lg().exp(-self.logits), validate_args=False
        )

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        with L.no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return L.poisson(rate)

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        F = L.nn.functional
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = self.total_count * F.logsigmoid(
            -self.logits
        ) + value * F.logsigmoid(self.logits)
        log_normalization = (
            -L.lgamma(self.total_count + value) + L.lgamma(1.0 + value) + L.lgamma(self.total_count)
        )
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0, 0.0)
        return log_unnormalized_prob - log_normalization


class Multinomial(Distribution):
    """Counts of `total_count` (an int) draws from the categories of `probs`/`logits`
    (vectors along the last dim). Sampling and log_prob allow any total; `entropy` needs
    the total (as torch)."""

    arg_constraints = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }

    def __init__(
        self,
        total_count: int = 1,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Multinomial":
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(
            total_count=self.total_count, probs=new._categorical.probs, validate_args=False
        )
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args: Any, **kwargs: Any) -> Tensor:
        return self._categorical._new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> Any:
        return constraints.multinomial(self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self) -> Tensor:
        """Normalized log probabilities."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter given."""
        return self._categorical.param_shape

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        sample_shape = Size(tuple(sample_shape))
        with L.no_grad():
            samples = self._categorical.sample(Size((self.total_count,)) + tuple(sample_shape))
            order = list(range(samples.dim()))
            order.append(order.pop(0))
            samples = samples.permute(*order)
            counts = L.zeros(_shape(self, sample_shape), dtype=samples.dtype)
            counts = counts.scatter_add(-1, samples, L.ones_like(samples))
            return counts.type_as(self.probs)

    def entropy(self) -> Tensor:
        L = lg()
        n = L.tensor(float(self.total_count), dtype=self.probs.dtype)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - L.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = L.exp(self._binomial.log_prob(support))
        weights = L.lgamma(support + 1)
        term2 = (binomial_probs * weights).sum([0, -1])
        return term1 + term2

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = L.lgamma(value.sum(-1) + 1)
        log_factorial_xs = L.lgamma(value + 1).sum(-1)
        logits = L.where((value == 0) & (logits == float("-inf")), L.zeros_like(logits), logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
