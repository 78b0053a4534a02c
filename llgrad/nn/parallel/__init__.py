"""`llgrad.nn.parallel`: data parallelism across processes (MPI)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
