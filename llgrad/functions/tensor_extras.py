"""Tensor attributes, predicates, constructors and Python protocols that complete the `Tensor` API."""
from __future__ import annotations

from typing import Any, Callable

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}
