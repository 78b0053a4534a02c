"""`lg.accelerator`: PyTorch's device-agnostic accelerator queries; llgrad has none."""

from __future__ import annotations

from typing import Any

__all__ = ["is_available", "current_accelerator", "device_count", "synchronize"]


def is_available() -> bool:
    return False


def current_accelerator(check_available: bool = False) -> None:
    """None: no accelerator (PyTorch returns a device object when there is one)."""
    return None


def device_count() -> int:
    return 0


def synchronize(device: Any = None) -> None:
    raise RuntimeError(
        "llgrad.accelerator.synchronize(): no accelerator is available "
        "(llgrad runs on the CPU only)"
    )
