"""`LayerNorm`."""
from __future__ import annotations

from typing import Any, Sequence

from ... import functions as lg
from ...ir.dtypes import DType
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape`; learnable scale (ones) and shift
    (zeros) when `elementwise_affine`."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: DType | None = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(lg.empty(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(lg.empty(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")
