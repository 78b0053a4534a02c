"""`llgrad.utils.data`: PyTorch's datasets, samplers and `DataLoader`."""

from .dataloader import DataLoader, WorkerInfo, default_collate, default_convert, get_worker_info
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "DataLoader",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "Subset",
    "TensorDataset",
    "random_split",
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "DistributedSampler",
    "StackDataset",
    "WeightedRandomSampler",
]
