"""`Flatten`."""
from __future__ import annotations

from ... import functions as lg
from ...tensor import Tensor
from .module import Module


class Flatten(Module):
    """Merge dimensions `start_dim..end_dim` (by default all but the batch dimension)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return lg.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
