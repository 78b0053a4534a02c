"""Utilities: `checkpoint` (activation checkpointing), `data` (datasets and loaders)."""
from . import checkpoint, data  # noqa: F401

__all__ = ["checkpoint", "data"]
