"""Utilities: `llgrad.utils.checkpoint` (activation checkpointing)."""
from . import checkpoint  # noqa: F401

__all__ = ["checkpoint"]
