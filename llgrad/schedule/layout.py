"""Index spaces: strides, broadcasting, collapsing, and the layouts kernels read through.

Eager kernels are generic over sizes; what selects one is the rank after collapsing and
each operand's innermost stride. Collapsing merges adjacent dimensions that every operand
walks contiguously, so a contiguous tensor of any shape runs as one flat loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..ir.graph import Node


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def broadcast_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], out_shape: tuple[int, ...]
) -> tuple[int, ...]:
    """Strides that walk `shape` over `out_shape`: zeros where it is broadcast."""
    lead = len(out_shape) - len(shape)
    result = [0] * lead
    for n, s, o in zip(shape, strides, out_shape[lead:]):
        result.append(0 if n == 1 and o != 1 else s)
    return tuple(result)


def collapse(
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Drop size-1 dimensions and merge dimensions every operand walks contiguously.

    Always returns at least one dimension (a 0-d loop is a loop of one).
    """
    dims = [d for d, n in enumerate(shape) if n != 1]
    if not dims:
        return (1,), [(0,) for _ in strides]
    sizes, merged = merge_runs([shape[d] for d in dims], [[st[d] for d in dims] for st in strides])
    return tuple(sizes), [tuple(ns) for ns in merged]


def merge_runs(sizes: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Merge neighbouring loops that every stride set walks contiguously; loops of size
    one stay (and merge with nothing), so a caller may keep placeholder loops."""
    out_sizes = [sizes[0]]
    out_strides = [[s[0]] for s in strides]
    for i in range(1, len(sizes)):
        n = sizes[i]
        if (
            n != 1
            and out_sizes[-1] != 1
            and all(o[-1] == s[i] * n for o, s in zip(out_strides, strides))
        ):
            out_sizes[-1] *= n
            for o, s in zip(out_strides, strides):
                o[-1] = s[i]
        else:
            out_sizes.append(n)
            for o, s in zip(out_strides, strides):
                o.append(s[i])
    return out_sizes, out_strides


def is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


# --------------------------------------------------------------------------------------
# Layouts: how a kernel walks a dense buffer (views folded into strides)
# --------------------------------------------------------------------------------------


def reshape_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], new_shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """Strides that walk `new_shape` over the same elements in row-major order, or None.

    The old dimensions are cut into chunks that are contiguous with each other (dimension
    i and i+1 with `stride_i == stride_{i+1} * size_{i+1}`, which includes broadcast
    chunks of stride 0); new dimensions, innermost first, must tile each chunk exactly.
    Size-1 dimensions get stride 0 (they are never stepped).
    """
    if _numel(shape) == 0:
        return contiguous_strides(new_shape)
    chunks: list[list[int]] = []  # [elements, innermost stride], outermost first
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        if chunks and chunks[-1][1] == n * s:
            chunks[-1][0] *= n
            chunks[-1][1] = s
        else:
            chunks.append([n, s])
    out = [0] * len(new_shape)
    ci = len(chunks) - 1
    acc = 1
    for d in range(len(new_shape) - 1, -1, -1):
        n = new_shape[d]
        if n == 1:
            continue
        if ci < 0:
            return None
        size, inner = chunks[ci]
        out[d] = inner * acc
        acc *= n
        if acc == size:
            ci -= 1
            acc = 1
        elif size % acc:
            return None
    return tuple(out) if ci < 0 and acc == 1 else None


@dataclass(frozen=True, slots=True)
class Layout:
    """`shape` walked with element `strides` from element `offset` of a dense buffer."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def dense(cls, shape: tuple[int, ...]) -> "Layout":
        return cls(tuple(shape), contiguous_strides(tuple(shape)), 0)

    @property
    def numel(self) -> int:
        return _numel(self.shape)

    def is_dense(self) -> bool:
        """Row-major and gap-free (size-1 strides ignored), from any offset."""
        if self.numel == 0:
            return True
        expected = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def permute(self, perm: tuple[int, ...]) -> "Layout":
        return Layout(
            tuple(self.shape[p] for p in perm), tuple(self.strides[p] for p in perm), self.offset
        )

    def broadcast_to(self, shape: tuple[int, ...]) -> "Layout":
        """Expand (NumPy broadcasting): new leading dimensions and size-1 ones get stride 0."""
        lead = len(shape) - len(self.shape)
        strides = (0,) * lead + tuple(
            0 if n != t else s for n, s, t in zip(self.shape, self.strides, shape[lead:])
        )
        return Layout(tuple(shape), strides, self.offset)

    def slice(
        self,
        starts: tuple[int, ...],
        stops: tuple[int, ...],
        steps: tuple[int, ...],
        shape: tuple[int, ...],
    ) -> "Layout":
        if _numel(shape) == 0:
            return Layout(shape, contiguous_strides(shape), self.offset)
        offset = self.offset + sum(a * s for a, s in zip(starts, self.strides))
        return Layout(shape, tuple(s * k for s, k in zip(self.strides, steps)), offset)

    def reshape(self, shape: tuple[int, ...]) -> "Layout | None":
        strides = reshape_strides(self.shape, self.strides, shape)
        return None if strides is None else Layout(tuple(shape), strides, self.offset)

    def flip(self, axes: Iterable[int]) -> "Layout":
        """Reverse `axes`: start at their last element and step backwards."""
        strides = list(self.strides)
        offset = self.offset
        for a in {a % max(len(self.shape), 1) for a in axes}:
            if self.shape[a] > 0:
                offset += (self.shape[a] - 1) * strides[a]
                strides[a] = -strides[a]
        return Layout(self.shape, tuple(strides), offset)

    def __str__(self) -> str:
        return (
            f"[{','.join(map(str, self.shape))}] strides "
            f"({','.join(map(str, self.strides))}) +{self.offset}"
        )


@dataclass(frozen=True, slots=True)
class Read:
    """A kernel operand: the buffer of `base` (a param, const or kernel output) via `layout`."""

    base: Node
    layout: Layout
