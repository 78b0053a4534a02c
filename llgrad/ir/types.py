"""Value types: a dtype and a static shape."""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import DType


@dataclass(frozen=True, slots=True)
class TensorType:
    dtype: DType
    shape: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __str__(self) -> str:
        return f"{self.dtype.short}[{','.join(str(s) for s in self.shape)}]"


def broadcast_shapes(*shapes: tuple[int, ...], op: str = "broadcast") -> tuple[int, ...]:
    """NumPy broadcasting; the error names the op and every shape."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            j = len(s) - ndim + i
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if size != 1 and d != size:
                pretty = ", ".join(str(list(s)) for s in shapes)
                raise ValueError(
                    f"{op}: shapes {pretty} cannot be broadcast together "
                    f"(dimension {i - ndim} is {size} vs {d})"
                )
            size = d
        out.append(size)
    return tuple(out)


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    """A dimension index in [-ndim, ndim) -> [0, ndim); 0-d tensors accept 0 and -1."""
    if axis.__class__ is int and 0 <= axis < ndim:  # (the usual case, checked first)
        return axis
    n = max(ndim, 1)
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(axis).__name__}")
    if not -n <= axis < n:
        raise IndexError(
            f"{op}: dimension out of range (expected to be in range of "
            f"[{-n}, {n - 1}], but got {axis})"
        )
    return axis % n
