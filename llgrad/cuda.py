"""`lg.cuda`: PyTorch's CUDA namespace on a machine without CUDA (llgrad runs on the CPU).

Availability questions answer "no"; seeding is accepted and does nothing (PyTorch, too,
only queues it until CUDA starts); anything that needs a GPU raises a RuntimeError.
"""
from __future__ import annotations

from typing import Any

__all__ = ["is_available", "device_count", "is_initialized", "manual_seed", "manual_seed_all",
           "seed", "seed_all", "empty_cache", "synchronize", "current_device", "set_device",
           "get_device_name", "memory_allocated", "max_memory_allocated",
           "is_bf16_supported"]


def _unavailable(what: str) -> RuntimeError:
    return RuntimeError(f"llgrad.cuda.{what}: CUDA is not available (llgrad runs on the CPU "
                        f"only); check llgrad.cuda.is_available() first")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as PyTorch does when CUDA is absent."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored, as PyTorch does when CUDA is absent."""


def seed() -> None:
    """Accepted and ignored (no CUDA generator exists)."""


def seed_all() -> None:
    """Accepted and ignored (no CUDA generator exists)."""


def empty_cache() -> None:
    """Nothing is cached on a GPU: a no-op, as in PyTorch without CUDA."""


def memory_allocated(device: Any = None) -> int:
    return 0


def max_memory_allocated(device: Any = None) -> int:
    return 0


def synchronize(device: Any = None) -> None:
    raise _unavailable("synchronize()")


def current_device() -> int:
    raise _unavailable("current_device()")


def set_device(device: Any) -> None:
    raise _unavailable("set_device()")


def get_device_name(device: Any = None) -> str:
    raise _unavailable("get_device_name()")
