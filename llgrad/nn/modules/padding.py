"""Padding layers: reflection, replication, zero, constant and circular padding of the last
1, 2 or 3 dimensions (`F.pad` with the matching mode)."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = [
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
]


def _amounts(cls: str, padding: Any, n: int) -> tuple[int, ...]:
    """An int (every side) or a tuple of 2 n ints (left, right, top, bottom, front, back)."""
    if isinstance(padding, int) and not isinstance(padding, bool):
        return (padding,) * (2 * n)
    vals = tuple(padding)
    if len(vals) != 2 * n or not all(isinstance(v, int) for v in vals):
        raise ValueError(
            f"{cls}: padding must be an int or a tuple of {2 * n} ints, got {padding!r}"
        )
    return vals


class _PadNd(Module):
    _dims = 0
    _mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _amounts(type(self).__name__, padding, self._dims)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ReflectionPad1d(_PadNd):
    """Mirror padding (without repeating the edge) of the last dimension."""

    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Mirror padding of the last 2 dimensions: (left, right, top, bottom)."""

    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Mirror padding of the last 3 dimensions."""

    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Edge-repeating padding of the last dimension."""

    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Edge-repeating padding of the last 2 dimensions."""

    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Edge-repeating padding of the last 3 dimensions."""

    _dims, _mode = 3, "replicate"


class CircularPad1d(_PadNd):
    """Wrap-around padding of the last dimension."""

    _dims, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Wrap-around padding of the last 2 dimensions."""

    _dims, _mode = 2, "circular"


class CircularPad3d(_PadNd):
    """Wrap-around padding of the last 3 dimensions."""

    _dims, _mode = 3, "circular"


class ConstantPad1d(_ConstantPadNd):
    """Padding of the last dimension with `value`."""

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Padding of the last 2 dimensions with `value`."""

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Padding of the last 3 dimensions with `value`."""

    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Zero padding of the last dimension."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Zero padding of the last 2 dimensions."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Zero padding of the last 3 dimensions."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"
