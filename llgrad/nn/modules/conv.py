"""Convolutions (`Conv1d`, `Conv2d`) and pooling layers (max, average, adaptive average)."""
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


def _ints(cls: str, name: str, v: Any, n: int) -> tuple[int, ...]:
    """An int (repeated) or a tuple of `n` ints."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    vals = tuple(v)
    if len(vals) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
        raise ValueError(f"{cls}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return vals


class _ConvNd(Module):
    """What Conv1d and Conv2d share: argument checks, parameters of PyTorch's shapes,
    PyTorch's initialization (kaiming_uniform_(a=sqrt(5)) weights, U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) bias) and repr."""

    _dims = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None,
                 dtype: DType | None = None) -> None:
        super().__init__()
        cls, n = type(self).__name__, self._dims
        check_device(device, cls)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise ValueError(f"{cls}: padding_mode={padding_mode!r} is not available; llgrad "
                             f"pads with zeros only (padding_mode='zeros')")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ints(cls, "kernel_size", kernel_size, n)
        self.stride = _ints(cls, "stride", stride, n)
        self.dilation = _ints(cls, "dilation", dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and self.stride != (1,) * n:
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding: Any = padding
        else:
            self.padding = _ints(cls, "padding", padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(lg.empty((out_channels, in_channels // groups)
                                         + self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(lg.empty((out_channels,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = (self.in_channels // self.groups) * math.prod(self.kernel_size)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) \
                else f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv2d(_ConvNd):
    """2-D convolution (cross-correlation) over (N, C, H, W) inputs."""

    _dims = 2

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) inputs."""

    _dims = 1

    def forward(self, input: Tensor) -> Tensor:
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return F.conv1d(input, self.weight, self.bias, self.stride[0], padding,
                        self.dilation[0], self.groups)


class MaxPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Any:
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(MaxPool2d):
    def forward(self, input: Tensor) -> Any:
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(AvgPool2d):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(input, self.output_size)
