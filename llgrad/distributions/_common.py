"""Small helpers the distribution classes share."""

from __future__ import annotations

from numbers import Number
from typing import Any, Sequence

from ..tensor import Size, Tensor
from .distribution import Distribution


def lg() -> Any:
    import llgrad  # circle: llgrad -> distributions -> distributions.continuous -> here

    return llgrad


def expand_params(
    self: Any,
    cls: type,
    batch_shape: Sequence[int],
    names: Sequence[str],
    _instance: Any = None,
    event_shape: Sequence[int] | None = None,
    param_event_dims: int = 0,
    extra: Sequence[str] = (),
) -> Any:
    """The common `expand`: a new instance of `cls` whose parameters `names` (present in
    self.__dict__) are expanded to batch_shape (+ their trailing `param_event_dims` dims);
    attributes `extra` are copied as they are."""
    new = self._get_checked_instance(cls, _instance)
    batch_shape = Size(tuple(batch_shape))
    for name in names:
        if name in self.__dict__:
            v = getattr(self, name)
            tail = tuple(v.shape[v.dim() - param_event_dims :]) if param_event_dims else ()
            setattr(new, name, v.expand(tuple(batch_shape) + tail))
    for name in extra:
        if name in self.__dict__:
            setattr(new, name, getattr(self, name))

    Distribution.__init__(
        new,
        batch_shape,
        self.event_shape if event_shape is None else event_shape,
        validate_args=False,
    )
    new._validate_args = self._validate_args
    return new


def all_numbers(*values: Any) -> bool:
    return all(isinstance(v, Number) and not isinstance(v, Tensor) for v in values)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    return lg().where(cond, a, b)


def nan_like(t: Tensor) -> Tensor:
    return lg().full_like(t, float("nan"))


def inf_like(t: Tensor) -> Tensor:
    return lg().full_like(t, float("inf"))
