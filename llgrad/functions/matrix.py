"""Matrix functions at the `lg.*` level: products (addmm, baddbmm, ...), decompositions and solvers (the `lg.linalg` forms and their legacy names)."""
from __future__ import annotations

from typing import Any, Callable

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}
