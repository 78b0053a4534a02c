"""`biject_to` and `transform_to`: from a constraint to a transform that maps the
unconstrained reals onto it (as `torch.distributions.constraint_registry`).

`biject_to(c)` gives a bijection (for HMC-style use: its log-det is exact);
`transform_to(c)` gives a transform that need not be bijective (for optimization:
`SoftmaxTransform` for the simplex, `LowerCholeskyTransform` and
`PositiveDefiniteTransform`). Both dispatch on the constraint's class; register new
ones with `biject_to.register(MyConstraint, factory)` (or as a decorator).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

from . import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """A map from constraint classes to factories `constraint -> Transform`."""

    def __init__(self) -> None:
        self._registry: dict[type, Callable[[Any], transforms.Transform]] = {}
        super().__init__()

    def register(self, constraint: Any, factory: Callable[[Any], Any] | None = None) -> Any:
        """Register `factory` for `constraint` (a Constraint subclass, or an instance whose
        class is used); without `factory` returns a decorator."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(
                f"Expected constraint to be either a Constraint subclass or "
                f"instance, but got {constraint}"
            )
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint: Any) -> transforms.Transform:
        """The transform registered for `constraint`'s class; NotImplementedError (as
        torch) for a class with none."""
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(
                f"Cannot transform {type(constraint).__name__} constraints"
            ) from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _identity(constraint: Any) -> transforms.Transform:
    return transforms.identity_transform


def _positive(constraint: Any) -> transforms.Transform:
    return transforms.ExpTransform()


def _greater_than(constraint: Any) -> transforms.Transform:
    return transforms.ComposeTransform(
        [transforms.ExpTransform(), transforms.AffineTransform(constraint.lower_bound, 1)]
    )


def _less_than(constraint: Any) -> transforms.Transform:
    return transforms.ComposeTransform(
        [transforms.ExpTransform(), transforms.AffineTransform(constraint.upper_bound, -1)]
    )


def _interval(constraint: Any) -> transforms.Transform:
    lb, ub = constraint.lower_bound, constraint.upper_bound
    if isinstance(lb, numbers.Number) and lb == 0 and isinstance(ub, numbers.Number) and ub == 1:
        return transforms.SigmoidTransform()
    return transforms.ComposeTransform(
        [transforms.SigmoidTransform(), transforms.AffineTransform(lb, ub - lb)]
    )


def _corr_cholesky(constraint: Any) -> transforms.Transform:
    return transforms.CorrCholeskyTransform()


for _reg in (biject_to, transform_to):
    _reg.register(constraints.real, _identity)
    for _c in (constraints.positive, constraints.nonnegative):
        _reg.register(_c, _positive)
    for _c in (constraints.greater_than, constraints.greater_than_eq):
        _reg.register(_c, _greater_than)
    _reg.register(constraints.less_than, _less_than)
    for _c in (constraints.interval, constraints.half_open_interval):
        _reg.register(_c, _interval)
    _reg.register(constraints.corr_cholesky, _corr_cholesky)


@biject_to.register(constraints.independent)
def _biject_to_independent(constraint: Any) -> transforms.Transform:
    return transforms.IndependentTransform(
        biject_to(constraint.base_constraint), constraint.reinterpreted_batch_ndims
    )


@transform_to.register(constraints.independent)
def _transform_to_independent(constraint: Any) -> transforms.Transform:
    return transforms.IndependentTransform(
        transform_to(constraint.base_constraint), constraint.reinterpreted_batch_ndims
    )


@biject_to.register(constraints.simplex)
def _biject_to_simplex(constraint: Any) -> transforms.Transform:
    return transforms.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_to_simplex(constraint: Any) -> transforms.Transform:
    return transforms.SoftmaxTransform()


@transform_to.register(constraints.lower_cholesky)
def _transform_to_lower_cholesky(constraint: Any) -> transforms.Transform:
    return transforms.LowerCholeskyTransform()


@transform_to.register(constraints.positive_definite)
@transform_to.register(constraints.positive_semidefinite)
def _transform_to_positive_definite(constraint: Any) -> transforms.Transform:
    return transforms.PositiveDefiniteTransform()


@biject_to.register(constraints.cat)
def _biject_to_cat(constraint: Any) -> transforms.Transform:
    return transforms.CatTransform(
        [biject_to(c) for c in constraint.cseq], constraint.dim, constraint.lengths
    )


@transform_to.register(constraints.cat)
def _transform_to_cat(constraint: Any) -> transforms.Transform:
    return transforms.CatTransform(
        [transform_to(c) for c in constraint.cseq], constraint.dim, constraint.lengths
    )


@biject_to.register(constraints.stack)
def _biject_to_stack(constraint: Any) -> transforms.Transform:
    return transforms.StackTransform([biject_to(c) for c in constraint.cseq], constraint.dim)


@transform_to.register(constraints.stack)
def _transform_to_stack(constraint: Any) -> transforms.Transform:
    return transforms.StackTransform([transform_to(c) for c in constraint.cseq], constraint.dim)
