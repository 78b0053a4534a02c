"""`Flatten` and `Unflatten`."""

from __future__ import annotations

from typing import Sequence

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


class Unflatten(Module):
    """Split dimension `dim` into `unflattened_size` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        if isinstance(dim, str):
            raise TypeError(
                "Unflatten: named dimensions are not available in llgrad (dim must be an int)"
            )
        if not isinstance(dim, int):
            raise TypeError(f"invalid argument type for dim parameter, got {type(dim)}")
        if not isinstance(unflattened_size, (tuple, list)) or not all(
            isinstance(v, int) for v in unflattened_size
        ):
            raise TypeError(
                f"unflattened_size must be tuple of ints, but found type "
                f"{type(unflattened_size).__name__}"
            )
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        d = self.dim % input.ndim if input.ndim else 0
        sizes = list(self.unflattened_size)
        n = input.shape[d]
        if sizes.count(-1) > 1:
            raise RuntimeError("unflatten: only one dimension can be inferred")
        known = 1
        for v in sizes:
            if v != -1:
                known *= v
        if -1 in sizes:
            if known == 0 or n % known:
                raise RuntimeError(
                    f"unflatten: Provided sizes {sizes} don't multiply up to "
                    f"the size of dim {self.dim} ({n}) in the input tensor"
                )
            sizes[sizes.index(-1)] = n // known
        elif known != n:
            raise RuntimeError(
                f"unflatten: Provided sizes {sizes} don't multiply up to the "
                f"size of dim {self.dim} ({n}) in the input tensor"
            )
        shape = tuple(input.shape[:d]) + tuple(sizes) + tuple(input.shape[d + 1 :])
        return lg.reshape(input, shape)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
