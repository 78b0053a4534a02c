"""`DataLoader`: batches of samples from a dataset, with PyTorch's options and collation.

Loading runs in the calling process. `num_workers > 0` is accepted and runs as one
in-process worker: `worker_init_fn(0)` is called at the start of each pass and
`get_worker_info()` reports worker 0 of 1 while it runs, so datasets that shard
themselves by worker yield every sample exactly once (PyTorch's worker processes would
split the work; an IterableDataset that does not shard itself would yield duplicates
there, never here). `pin_memory` is accepted and does nothing (memory is host memory).
"""

from __future__ import annotations

import collections.abc
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ... import functions as F
from ...functions.creation import randint, tensor
from ...ir import dtypes as dt
from ...tensor import Tensor
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info", "WorkerInfo"]


# --------------------------------------------------------------------------------------
# collation
# --------------------------------------------------------------------------------------

_COLLATE_ERROR = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _numpy_tensor(arr: np.ndarray) -> Tensor:
    if arr.dtype.kind in "OSUV":
        raise TypeError(_COLLATE_ERROR.format(arr.dtype))
    return tensor(arr)


def default_collate(batch: list[Any]) -> Any:
    """Stack a list of samples into a batch, recursively: tensors and NumPy arrays are
    stacked along a new first dimension, Python floats become a float64 tensor and ints an
    int64 one, strings stay a list, dicts collate per key, namedtuples per field, other
    sequences per position (as a list; every sample must have the same length)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return F.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return default_collate([_numpy_tensor(b) for b in batch])
    if isinstance(elem, np.generic):
        return _numpy_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return F.tensor(batch, dtype=dt.float64)
    if isinstance(elem, (bool, int)):
        return F.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)
        except TypeError:
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def default_convert(data: Any) -> Any:
    """What a loader without batching (`batch_size=None`) returns: NumPy arrays and
    scalars become tensors, recursively through dicts and sequences."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if data.dtype.kind in "OSUV" else _numpy_tensor(data)
    if isinstance(data, np.generic):
        return _numpy_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        converted = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


# --------------------------------------------------------------------------------------
# workers (in-process)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker: list[WorkerInfo] = []


def get_worker_info() -> WorkerInfo | None:
    """The worker running this code: None in the main process, worker 0 of 1 while a
    loader with `num_workers > 0` iterates (in-process)."""
    return _worker[-1] if _worker else None


# --------------------------------------------------------------------------------------
# the loader
# --------------------------------------------------------------------------------------


class _InfiniteNone:
    """The sampler of an IterableDataset: the dataset decides how many samples exist."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class DataLoader:
    """Iterate over `dataset` in batches: `for x, y in DataLoader(ds, batch_size=32,
    shuffle=True): ...` (PyTorch's constructor; see the module docstring on workers)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 "
                "to disable multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in "
                "multiprocessing. let num_workers > 0 to enable multiprocessing, "
                "otherwise set prefetch_factor to None."
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified "
                    f"shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified "
                    f"sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified "
                    f"batch_sampler option, but got batch_sampler="
                    f"{batch_sampler}"
                )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually "
                "exclusive with drop_last"
            )
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteNone()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 0:
            yield from self._batches()
            return

        seed = int(randint(0, 2**62, (1,), generator=self.generator).item())
        _worker.append(WorkerInfo(0, 1, seed, self.dataset))
        try:
            if self.worker_init_fn is not None:
                self.worker_init_fn(0)
            yield from self._batches()
        finally:
            _worker.pop()

    def _batches(self) -> Iterator[Any]:
        if self._iterable:
            yield from self._iterable_batches()
            return
        fetch = getattr(self.dataset, "__getitems__", None)
        if not self._auto_collation:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        for indices in self.batch_sampler:
            samples = fetch(indices) if fetch is not None else [self.dataset[i] for i in indices]
            yield self.collate_fn(samples)

    def _iterable_batches(self) -> Iterator[Any]:
        stream = iter(self.dataset)
        if self.batch_size is None:
            for sample in stream:
                yield self.collate_fn(sample)
            return
        batch: list[Any] = []
        for sample in stream:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)
