"""Convolutions: `Conv1d/2d/3d` and `ConvTranspose1d/2d/3d` (the pooling layers live in
`pooling.py` and are re-exported here for older imports)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ... import functions as lg
from ...ir.dtypes import DType
from ...device import check_device
from ...tensor import Tensor
from .. import functional as F
from .. import init
from .._conv import same_padding, transposed_output_size
from ..parameter import Parameter
from .module import Module
from .pooling import (
    AdaptiveAvgPool1d,  # noqa: F401
    AdaptiveAvgPool2d,  # noqa: F401
    AvgPool1d,  # noqa: F401
    AvgPool2d,  # noqa: F401
    MaxPool1d,  # noqa: F401
    MaxPool2d,  # noqa: F401
)

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ints(cls: str, name: str, v: Any, n: int) -> tuple[int, ...]:
    """An int (repeated) or a tuple of `n` ints."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    vals = tuple(v)
    if len(vals) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
        raise ValueError(f"{cls}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return vals


class _ConvNd(Module):
    """What the convolutions share: argument checks, parameters of PyTorch's shapes,
    PyTorch's initialization (kaiming_uniform_(a=sqrt(5)) weights, U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) bias with fan_in from the weight's dims 1 and up), padding modes and
    repr."""

    _dims = 0
    _transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: DType | None = None,
        output_padding: Any = 0,
    ) -> None:
        super().__init__()
        cls, n = type(self).__name__, self._dims
        check_device(device, cls)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {_PADDING_MODES}, but got "
                f"padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ints(cls, "kernel_size", kernel_size, n)
        self.stride = _ints(cls, "stride", stride, n)
        self.dilation = _ints(cls, "dilation", dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}"
                )
            if padding == "same" and self.stride != (1,) * n:
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding: Any = padding
        else:
            self.padding = _ints(cls, "padding", padding, n)
        self.output_padding = _ints(cls, "output_padding", output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's (before, after) amounts, last dimension first, for the non-zero modes
        if self.padding == "valid":
            lo = hi = (0,) * n
        elif self.padding == "same":
            lo, hi = same_padding(self.kernel_size, self.dilation)
        else:
            lo = hi = self.padding
        self._reversed_padding_repeated_twice = [
            v for i in reversed(range(n)) for v in (lo[i], hi[i])
        ]
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(lg.empty(shape, dtype=dtype))
        if bias:
            self.bias = Parameter(lg.empty((out_channels,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        n = self._dims
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._dims - 1]
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_ConvNd):
    """1-D convolution (cross-correlation) over (N, C, L) or (C, L) inputs; weight
    (out_channels, in_channels / groups, k)."""

    _dims = 1


class Conv2d(_ConvNd):
    """2-D convolution (cross-correlation) over (N, C, H, W) or (C, H, W) inputs; weight
    (out_channels, in_channels / groups, kH, kW)."""

    _dims = 2


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W) inputs; weight
    (out_channels, in_channels / groups, kD, kH, kW)."""

    _dims = 3


class _ConvTransposeNd(_ConvNd):
    """Transposed convolution: weight (in_channels, out_channels / groups, *kernel);
    `forward(input, output_size=None)` picks output_padding from a requested size."""

    _transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(
                f"{type(self).__name__}: padding must be an int or a tuple of ints, got {padding!r}"
            )
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
            output_padding,
        )

    def _output_padding(self, input: Tensor, output_size: Sequence[int] | None) -> tuple[int, ...]:
        n = self._dims
        if output_size is None:
            return self.output_padding
        lead = 2 if input.ndim == n + 2 else 1
        size = [int(v) for v in output_size]
        if len(size) == lead + n:
            size = size[lead:]
        if len(size) != n:
            raise ValueError(
                f"ConvTranspose{n}D: for {input.ndim}D input, output_size must "
                f"have {n} or {lead + n} elements (got {len(size)})"
            )
        mins = transposed_output_size(
            input.shape[lead:], self.kernel_size, self.stride, self.padding, self.dilation, (0,) * n
        )
        maxs = tuple(m + s - 1 for m, s in zip(mins, self.stride))
        for v, lo, hi in zip(size, mins, maxs):
            if not lo <= v <= hi:
                raise ValueError(
                    f"requested an output size of {size}, but valid sizes range "
                    f"from {list(mins)} to {list(maxs)} (for an input of "
                    f"{list(input.shape[lead:])})"
                )
        return tuple(v - m for v, m in zip(size, mins))

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._dims - 1]
        return fn(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over (N, C_in, L) or (C_in, L) inputs."""

    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C_in, H, W) or (C_in, H, W) inputs."""

    _dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over (N, C_in, D, H, W) or (C_in, D, H, W) inputs."""

    _dims = 3
