"""`Linear`, `Bilinear` and `Identity`."""

from __future__ import annotations

import math
from typing import Any

from ... import functions as lg
from ...ir.dtypes import DType
from ...device import check_device
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments (as PyTorch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """`y = x @ weight.T + bias`, weight (out_features, in_features).

    Initialized like PyTorch: weight from kaiming_uniform_(a=sqrt(5)), i.e.
    U(-1/sqrt(in), 1/sqrt(in)), and bias from the same bound.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        check_device(device, "Linear")
        if in_features < 0 or out_features < 0:
            raise ValueError(
                f"Linear: in_features and out_features must be non-negative, got "
                f"{in_features} and {out_features}"
            )
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(lg.empty((out_features, in_features), dtype=dtype))
        if bias:
            self.bias = Parameter(lg.empty((out_features,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Bilinear(Module):
    """`y = x1^T A x2 + b`: weight (out_features, in1_features, in2_features), bias
    (out_features,), both initialized from U(-1/sqrt(in1), 1/sqrt(in1)) as PyTorch."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        check_device(device, "Bilinear")
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(lg.empty((out_features, in1_features, in2_features), dtype=dtype))
        if bias:
            self.bias = Parameter(lg.empty((out_features,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
