"""Statistics, scans and order statistics: nan-reductions, median, quantile, mode, cummax, histograms, cov."""
from __future__ import annotations

from typing import Any, Callable

__all__: list[str] = []

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}
