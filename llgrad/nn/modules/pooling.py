"""Pooling layers: max (1-3 d), max unpooling, average, adaptive average and max, LP
(power-average) and fractional max pooling, with PyTorch's arguments and reprs."""

from __future__ import annotations

from typing import Any, Sequence

from ...tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = [
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
]


def _ntuple(v: Any, n: int) -> tuple[Any, ...]:
    if isinstance(v, (tuple, list)):
        return tuple(v)
    return (v,) * n


class _MaxPoolNd(Module):
    """Max pooling: kernel_size, stride (default: kernel_size), padding, dilation,
    return_indices, ceil_mode."""

    _dims = 0

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Any:
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[self._dims - 1]
        return fn(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    """Max pooling over (N, C, L) or (C, L) inputs."""

    _dims = 1


class MaxPool2d(_MaxPoolNd):
    """Max pooling over (N, C, H, W) or (C, H, W) inputs."""

    _dims = 2


class MaxPool3d(_MaxPoolNd):
    """Max pooling over (N, C, D, H, W) or (C, D, H, W) inputs."""

    _dims = 3


class _MaxUnpoolNd(Module):
    """The partial inverse of max pooling: `forward(input, indices, output_size=None)`."""

    _dims = 0

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        n = self._dims
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride if stride is not None else kernel_size, n)
        self.padding = _ntuple(padding, n)

    def forward(
        self, input: Tensor, indices: Tensor, output_size: Sequence[int] | None = None
    ) -> Tensor:
        fn = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[self._dims - 1]
        return fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Inverse of MaxPool1d."""

    _dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Inverse of MaxPool2d."""

    _dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """Inverse of MaxPool3d."""

    _dims = 3


class AvgPool1d(Module):
    """Average pooling over (N, C, L) or (C, L) inputs."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """Average pooling over (N, C, H, W) or (C, H, W) inputs."""

    _dims = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        fn = F.avg_pool2d if self._dims == 2 else F.avg_pool3d
        return fn(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(AvgPool2d):
    """Average pooling over (N, C, D, H, W) or (C, D, H, W) inputs."""

    _dims = 3


class _AdaptiveAvgPoolNd(Module):
    _dims = 0

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        fn = (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d)[self._dims - 1]
        return fn(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed output length."""

    _dims = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed (H, W) (None keeps a size)."""

    _dims = 2


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed (D, H, W)."""

    _dims = 3


class _AdaptiveMaxPoolNd(Module):
    _dims = 0

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Any:
        fn = (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d)[self._dims - 1]
        return fn(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed output length."""

    _dims = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed (H, W)."""

    _dims = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed (D, H, W)."""

    _dims = 3


class _LPPoolNd(Module):
    _dims = 0

    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
    ) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        fn = (F.lp_pool1d, F.lp_pool2d, F.lp_pool3d)[self._dims - 1]
        return fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """Power-average pooling over (N, C, L) inputs."""

    _dims = 1


class LPPool2d(_LPPoolNd):
    """Power-average pooling over (N, C, H, W) inputs."""

    _dims = 2


class LPPool3d(_LPPoolNd):
    """Power-average pooling over (N, C, D, H, W) inputs."""

    _dims = 3


class _FractionalMaxPoolNd(Module):
    _dims = 0

    def __init__(
        self,
        kernel_size: Any,
        output_size: Any = None,
        output_ratio: Any = None,
        return_indices: bool = False,
        _random_samples: Tensor | None = None,
    ) -> None:
        super().__init__()
        n = self._dims
        self.kernel_size = _ntuple(kernel_size, n)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _ntuple(output_size, n) if output_size is not None else None
        self.output_ratio = _ntuple(output_ratio, n) if output_ratio is not None else None
        name = type(self).__name__
        if output_size is None and output_ratio is None:
            raise ValueError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor) -> Any:
        fn = F.fractional_max_pool2d if self._dims == 2 else F.fractional_max_pool3d
        return fn(
            input,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            _random_samples=self._random_samples,
        )


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling over (N, C, H, W) inputs (windows drawn with `lg.rand`)."""

    _dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling over (N, C, D, H, W) inputs."""

    _dims = 3
