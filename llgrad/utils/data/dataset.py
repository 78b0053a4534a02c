"""Datasets with PyTorch's protocol: map-style (`__getitem__` + `__len__`) and iterable.

`TensorDataset` indexes several tensors along their first dimension at once; `Subset`,
`ConcatDataset` and `ChainDataset` compose datasets; `random_split` splits one into
non-overlapping random subsets (lengths or fractions, PyTorch's rounding).
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Any, Generic, Iterable, Iterator, Sequence, TypeVar

from ...tensor import Tensor
from .sampler import randperm_list

T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "Subset",
    "ConcatDataset",
    "ChainDataset",
    "random_split",
]


class Dataset(Generic[T_co]):
    """A map from keys (usually 0..len-1) to samples: subclasses define `__getitem__`
    (and `__len__`, which samplers and `len(DataLoader)` need)."""

    def __getitem__(self, index: Any) -> T_co:
        raise TypeError(
            f"{type(self).__name__} is a Dataset without __getitem__: a map-style "
            f"dataset defines __getitem__ (and __len__)"
        )

    def __add__(self, other: "Dataset[T_co]") -> "ConcatDataset[T_co]":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A stream of samples: subclasses define `__iter__`."""

    def __iter__(self) -> Iterator[T_co]:
        raise TypeError(f"{type(self).__name__} is an IterableDataset without __iter__")

    def __add__(self, other: Any) -> "ChainDataset":
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Sample i is `tuple(t[i] for t in tensors)`; all tensors share their first size."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset expects tensors, got {type(t).__name__}")
        first = tensors[0].shape[0] if tensors[0].ndim else None
        if any(t.ndim == 0 or t.shape[0] != first for t in tensors):
            raise AssertionError(
                f"Size mismatch between tensors (first dimensions "
                f"{[t.shape[0] if t.ndim else None for t in tensors]})"
            )
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T_co]):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        inner = getattr(self.dataset, "__getitems__", None)
        if inner is not None:
            return inner([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """The datasets one after another (negative indices count from the end)."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def _split_lengths(n: int, lengths: Sequence[float]) -> list[int]:
    """Fractions summing to 1 become counts: floors, then the remainder one by one from
    the first split (PyTorch's rule)."""
    total = sum(lengths)
    if not (math.isclose(total, 1) and total <= 1):
        return [int(x) for x in lengths]
    counts = []
    for i, frac in enumerate(lengths):
        if not 0 <= frac <= 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        counts.append(int(math.floor(n * frac)))
    for i in range(n - sum(counts)):
        counts[i % len(counts)] += 1
    for i, c in enumerate(counts):
        if c == 0:
            warnings.warn(
                f"Length of split at index {i} is 0. This might result in an empty dataset.",
                UserWarning,
                stacklevel=3,
            )
    return counts


def random_split(
    dataset: Dataset[T_co], lengths: Sequence[float], generator: Any = None
) -> list[Subset[T_co]]:
    """Non-overlapping random subsets of the given lengths (or fractions of the whole)."""
    counts = _split_lengths(len(dataset), lengths)
    if sum(counts) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = randperm_list(sum(counts), generator)
    out, offset = [], 0
    for c in counts:
        out.append(Subset(dataset, order[offset : offset + c]))
        offset += c
    return out


class StackDataset(Dataset):
    """Datasets of the same length side by side: item i is the tuple of their items i
    (`StackDataset(a, b)`) or a dict of them by name (`StackDataset(x=a, y=b)`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or ``dict``- (via "
                "``kwargs``) like input/output, but both types are given."
            )
        parts = list(args) if args else list(kwargs.values())
        if not parts:
            raise ValueError("At least one dataset should be passed")
        self._length = len(parts[0])
        if any(len(p) != self._length for p in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets: Any = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """Items of a batch of indices (a part's own `__getitems__` is used when it has
        one)."""

        def column(d: Any) -> list:
            many = getattr(d, "__getitems__", None)
            if callable(many):
                got = many(indices)
                if len(got) != len(indices):
                    raise ValueError(
                        f"Nested dataset's output size mismatch. Expected "
                        f"{len(indices)}, got {len(got)}"
                    )
                return list(got)
            return [d[i] for i in indices]

        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: c[j] for k, c in cols.items()} for j in range(len(indices))]
        cols_t = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols_t) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length
