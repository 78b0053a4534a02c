"""`Distribution` and `ExponentialFamily`: the base classes of every distribution (as
`torch.distributions.Distribution`)."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from ..tensor import Size, Tensor
from . import constraints
from .utils import _is_all_true, lazy_property

__all__ = ["Distribution", "ExponentialFamily"]


def _lg() -> Any:
    import llgrad  # circle: llgrad -> distributions -> here

    return llgrad


def _size(shape: Any) -> Size:
    if isinstance(shape, Size):
        return shape
    if isinstance(shape, int):
        return Size((shape,))
    return Size(tuple(int(s) for s in shape))


class Distribution:
    """The base class of probability distributions.

    Args:
        batch_shape: the shape over which parameters are batched.
        event_shape: the shape of one sample (without batching).
        validate_args: check the parameters (here) and the values given to `log_prob`,
            `cdf`, `icdf` against the constraints; None takes the class default
            (`Distribution.set_default_validate_args`, on unless Python runs with -O).
            Inside `lg.compile` the values are not known while tracing, so value checks
            are skipped there (llgrad's difference; torch checks in eager code only too).
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for every distribution made afterwards (and
        existing ones that did not set `validate_args`). `value` must be a bool."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(
        self,
        batch_shape: Sequence[int] = Size(),
        event_shape: Sequence[int] = Size(),
        validate_args: bool | None = None,
    ) -> None:
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(
                    f"{self.__class__} does not define `arg_constraints`. Please set "
                    f"`arg_constraints = {{}}` or initialize the distribution with "
                    f"`validate_args=False` to turn off validation.",
                    stacklevel=2,
                )
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(
                    getattr(type(self), param, None), lazy_property
                ):
                    continue
                value = getattr(self, param)
                valid = constraint.check(value)
                if not _is_all_true(valid):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}"
                    )
        super().__init__()

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Distribution":
        """A new distribution with its batch dimensions expanded to `batch_shape` (the
        parameters are expanded views; arguments are not validated again)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement expand()")

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of one sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """Argument name -> the Constraint it must satisfy."""
        raise NotImplementedError(f"{type(self).__name__} does not define arg_constraints")

    @property
    def support(self) -> Any:
        """The Constraint describing the support of the distribution."""
        raise NotImplementedError(f"{type(self).__name__} does not define support")

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation (the square root of the variance)."""
        return self.variance.sqrt()

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """A sample of shape `sample_shape + batch_shape + event_shape` (no gradient)."""
        with _lg().no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        """A reparameterized sample (gradients flow to the parameters) of shape
        `sample_shape + batch_shape + event_shape`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample()")

    def sample_n(self, n: int) -> Tensor:
        """`sample((n,))` (deprecated, as in torch: warns FutureWarning)."""
        warnings.warn(
            "`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability density/mass function at `value`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob()")

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at `value`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf()")

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at `value`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf()")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete support along dim 0: shape `(cardinality,) +
        batch_shape + event_shape` (with `expand=False`, size-1 batch dims)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support()")

    def entropy(self) -> Tensor:
        """The entropy, of shape batch_shape."""
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy()")

    def perplexity(self) -> Tensor:
        """exp(entropy)."""
        return _lg().exp(self.entropy())

    def _extended_shape(self, sample_shape: Sequence[int] = Size()) -> Size:
        """sample_shape + batch_shape + event_shape."""
        return Size(
            tuple(_size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape)
        )

    def _validate_sample(self, value: Tensor) -> None:
        """Check `value` for log_prob/cdf/icdf: a tensor whose rightmost dims are the
        event shape, broadcastable with batch_shape + event_shape, inside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: "
                f"{value.size()} vs {self._event_shape}."
            )
        actual_shape = value.size()
        expected_shape = Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: "
                    f"{actual_shape} vs {expected_shape}."
                )
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable sample "
                f"validation. Please initialize the distribution with "
                f"`validate_args=False` to turn off validation.",
                stacklevel=2,
            )
            return
        if support is None:
            raise AssertionError("support is unexpectedly None")
        valid = support.check(value)
        if not _is_all_true(valid):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}"
            )

    def _get_checked_instance(self, cls: type, _instance: Any = None) -> Any:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                f"__init__ method must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names
        )
        return self.__class__.__name__ + "(" + args + ")"


class ExponentialFamily(Distribution):
    """Base class of exponential-family distributions, p(x; θ) = exp(<t(x), θ> - F(θ) +
    k(x)). Subclasses give `_natural_params`, `_log_normalizer` and
    `_mean_carrier_measure`; `entropy()` is then computed from the log normalizer's
    gradient (a Bregman divergence), and KL between two members of one family likewise."""

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        raise NotImplementedError(f"{type(self).__name__} does not define _natural_params")

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not define _log_normalizer")

    @property
    def _mean_carrier_measure(self) -> float:
        raise NotImplementedError(f"{type(self).__name__} does not define _mean_carrier_measure")

    def entropy(self) -> Tensor:
        """The entropy from the log normalizer: F(θ) - <θ, ∇F(θ)> - E[k(x)]."""
        lg = _lg()
        result: Any = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with lg.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = lg.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for npar, g in zip(nparams, gradients):
            result = result - (npar * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
