"""Spectral helpers at the `lg.*` level: window functions, stft and istft."""
from __future__ import annotations

from typing import Any, Callable

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}
