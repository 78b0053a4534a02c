"""`DistributedSampler`: each rank reads its own share of the dataset.

torch's semantics: the (optionally shuffled, seeded by `seed + epoch`) index list is
padded by repeating its head to a multiple of the number of replicas (or cut to one, with
`drop_last`), and rank r takes every `num_replicas`-th index starting at r, so the ranks'
shares are disjoint, equally long, and together cover the dataset. Call `set_epoch(e)` at
the start of each epoch for a new order (every rank draws the same permutation).
"""

from __future__ import annotations

import math
from typing import Iterator, Sized

from ... import distributed as dist
from ...functions.creation import Generator
from .sampler import Sampler, randperm_list

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                raise RuntimeError(
                    "DistributedSampler: pass num_replicas and rank, or call "
                    "llgrad.distributed.init_process_group() first"
                )
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(
                f"DistributedSampler: num_replicas must be a positive integer, got {num_replicas!r}"
            )
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = randperm_list(n, Generator().manual_seed(self.seed + self.epoch))
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad > 0 and indices:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
