"""The shape family: roll, tile, repeat_interleave, tensor_split, stacking, flips, diagonals, combinations."""
from __future__ import annotations

from typing import Any, Callable

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}
