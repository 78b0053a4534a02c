"""`lg.finfo` and `lg.iinfo`: the numerical limits of a dtype, with PyTorch's fields."""

from __future__ import annotations

from typing import Any

import numpy as np

from .ir import dtypes as dt

__all__ = ["finfo", "iinfo"]


class finfo:
    """Limits of a floating point (or complex: of its real part) dtype: `bits`, `eps`,
    `max`, `min`, `tiny` (= `smallest_normal`), `resolution`, `dtype`."""

    def __init__(self, type: dt.DType | None = None) -> None:
        d = dt.get_default_dtype() if type is None else type
        if not isinstance(d, dt.DType) or not (d.is_floating_point or d.is_complex):
            raise TypeError(
                f"finfo(): argument 'type' must be a floating point llgrad dtype, got {d!r}"
            )
        real = d.to_real() if d.is_complex else d
        if real is dt.bfloat16:  # 8 exponent bits as float32, 7 stored mantissa bits
            self.bits, self.eps = 16, 2.0**-7
            self.max = float(np.float32(3.3895313892515355e38))
            self.tiny = self.smallest_normal = float(np.finfo(np.float32).tiny)
            self.resolution = 0.01
        else:
            info = np.finfo(real.np)
            self.bits = int(info.bits)
            self.eps = float(info.eps)
            self.max = float(info.max)
            self.tiny = self.smallest_normal = float(info.smallest_normal)
            self.resolution = 10.0 ** -int(info.precision)
        self.min = -self.max
        self.dtype = real.name

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution}, min={self.min:.6g}, max={self.max:.6g}, "
            f"eps={self.eps:.6g}, smallest_normal={self.tiny:.6g}, tiny={self.tiny:.6g}, "
            f"dtype={self.dtype})"
        )


class iinfo:
    """Limits of an integer (or bool) dtype: `bits`, `max`, `min`, `dtype`."""

    def __init__(self, type: Any) -> None:
        if not isinstance(type, dt.DType) or not (type.is_integer or type is dt.bool_):
            raise TypeError(
                f"iinfo(): argument 'type' must be an integer llgrad dtype, got {type!r}"
            )
        if type is dt.bool_:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            info = np.iinfo(type.np)
            self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)
        self.dtype = type.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
