"""Utilities: `checkpoint` (activation checkpointing), `data` (datasets and loaders),
`benchmark` (timers)."""

from . import benchmark, checkpoint, data  # noqa: F401

__all__ = ["benchmark", "checkpoint", "data"]
