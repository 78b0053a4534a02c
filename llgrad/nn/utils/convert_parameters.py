"""All parameters as one flat vector, and back (PyTorch's order: the iteration order)."""

from __future__ import annotations

from typing import Iterable

from ... import functions as lg
from ...tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated (differentiable, like PyTorch's)."""
    params = list(parameters)
    if not params:
        raise RuntimeError("parameters_to_vector: expected a non-empty list of tensors")
    return lg.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of `vec` into each parameter's data (no autograd)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected llgrad.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise RuntimeError(
            f"vector_to_parameters: the vector has shape {list(vec.shape)} but "
            f"the parameters hold {total} elements"
        )
    pointer = 0
    for p in params:
        n = p.numel()
        p.data = vec[pointer : pointer + n].reshape(p.shape).detach()
        pointer += n
