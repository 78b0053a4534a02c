"""`Parameter`: a tensor that a `Module` registers as one of its learnable weights.

A Parameter is a leaf `Tensor` (same storage, shape and dtype as the data it wraps) that
requires grad by default. Assigning one to a module attribute registers it; results of
operations on it are plain tensors, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

from ..dispatch.grad_mode import no_grad
from ..functions import empty
from ..tensor import DENSE_CLASSES, Tensor


class Parameter(Tensor):
    """`Parameter(data, requires_grad=True)`: shares `data`'s memory, never its history."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        p = cls._make(data._storage, data._offset, data._shape, data._strides, data._dtype)
        p._inference = data._inference
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        """All the work is done in `__new__` (a Parameter is built around existing data)."""

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_parameter, (Tensor.detach(self), self._requires_grad))

    def __deepcopy__(self, memo: dict[int, Any]) -> "Parameter":
        if id(self) in memo:
            return memo[id(self)]

        with no_grad():
            result = Parameter(Tensor.detach(self).clone(), self._requires_grad)
            if self._grad is not None:
                result._grad = self._grad.detach().clone()
        memo[id(self)] = result
        return result


DENSE_CLASSES.add(Parameter)


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


def is_parameter(t: Any) -> bool:
    return isinstance(t, Parameter)
