"""The index family: take, put, index_add/copy/fill/reduce, masked_select/scatter, scatter_reduce, unique, searchsorted."""
from __future__ import annotations

from typing import Any, Callable

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}
