"""`llgrad.nn.init`: in-place initializers with PyTorch's formulas.

Each fills its tensor in place, outside autograd (so a Parameter that requires grad can be
initialized), drawing from `lg.rand` / `lg.randn`: after `lg.manual_seed(s)` the same
model gets the same weights. Each returns the tensor it filled.
"""
from __future__ import annotations

import math
from typing import Any

from .. import functions as lg
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor

__all__ = ["calculate_gain", "constant_", "ones_", "zeros_", "uniform_", "normal_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "eye_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _check(op: str, tensor: Any) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(tensor).__name__}")
    return tensor


def _fill_from(tensor: Tensor, values: Tensor) -> Tensor:
    with no_grad():
        tensor.copy_(values)
    return tensor


def _floating(op: str, tensor: Tensor) -> None:
    if not tensor._dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point tensor, got {tensor._dtype.name}")


def constant_(tensor: Tensor, val: float) -> Tensor:
    _check("constant_", tensor)
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Values from U(a, b)."""
    _check("uniform_", tensor)
    if b < a:
        raise ValueError(f"uniform_: expects a <= b, but got a={a} and b={b}")
    _floating("uniform_", tensor)
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None
            ) -> Tensor:
    """Values from N(mean, std**2)."""
    _check("normal_", tensor)
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0.0, but found std {std}")
    _floating("normal_", tensor)
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def eye_(tensor: Tensor) -> Tensor:
    _check("eye_", tensor)
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got "
                         f"{tensor.ndim}")
    return _fill_from(tensor, lg.eye(tensor.shape[0], tensor.shape[1], dtype=tensor._dtype))


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         f"2 dimensions (shape {list(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check("xavier_uniform_", tensor))
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check("xavier_normal_", tensor))
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al.); `a` is leaky_relu's slope."""
    _check("kaiming_uniform_", tensor)
    if 0 in tensor.shape:
        return tensor
    fan = _fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    _check("kaiming_normal_", tensor)
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)
