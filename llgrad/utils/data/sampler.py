"""Samplers: which dataset indices a `DataLoader` reads, in which order, in which batches.

Random orders come from llgrad's counter-based generator (a given `lg.Generator`, or a
seed drawn from the default one at each pass, so `lg.manual_seed` makes shuffling
reproducible). The permutations differ from PyTorch's streams, as all random numbers do.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence, Sized

from ...functions.creation import Generator, randint, randperm, tensor
from ...functions.sampling import multinomial
from ...ir.dtypes import float64
from ...tensor import Tensor

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "BatchSampler",
    "randperm_list",
]


def _generator(generator: Any) -> Any:
    """`generator`, or a fresh one seeded from the default generator (one draw)."""
    if generator is not None:
        return generator
    seed = int(randint(0, 2**62, (1,)).item())
    return Generator().manual_seed(seed)


def randperm_list(n: int, generator: Any = None) -> list[int]:
    """A random permutation of 0..n-1 as a list (`lg.randperm`)."""
    return randperm(n, generator=generator).tolist()


class Sampler:
    """Iterates over dataset indices (subclasses define `__iter__`, usually `__len__`)."""

    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise TypeError(f"{type(self).__name__} is a Sampler without __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per pass (or `num_samples` draws with replacement)."""

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Any = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        gen = _generator(self.generator)
        if self.replacement:
            for start in range(0, self.num_samples, 32):
                size = min(32, self.num_samples - start)
                yield from randint(n, (size,), generator=gen).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm_list(n, gen)
        yield from randperm_list(n, gen)[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (a new one per pass)."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm_list(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler` (the last one shorter unless
    `drop_last`)."""

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights` (with
    replacement by default), by `lg.multinomial` on `generator` (llgrad's random streams,
    not PyTorch's)."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Any = None,
    ) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        w = (
            weights.to(dt_float64())
            if isinstance(weights, Tensor)
            else tensor(list(weights), dtype=dt_float64())
        )
        if w.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}"
            )
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        drawn = multinomial(
            self.weights, self.num_samples, self.replacement, generator=self.generator
        )
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


def dt_float64() -> Any:
    """llgrad's float64 (the dtype of a sampler's weights, as PyTorch's)."""
    return float64
