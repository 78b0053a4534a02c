"""`llgrad.nn.init`: in-place initializers with PyTorch's formulas.

Each fills its tensor in place, outside autograd (so a Parameter that requires grad can be
initialized), drawing from `lg.rand` / `lg.randn`: after `lg.manual_seed(s)` the same
model gets the same weights. Each returns the tensor it filled.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

from .. import functions as lg
from ..dispatch.grad_mode import no_grad
from ..linalg import qr
from ..tensor import Tensor

__all__ = [
    "calculate_gain",
    "constant_",
    "ones_",
    "zeros_",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "eye_",
    "dirac_",
    "orthogonal_",
    "sparse_",
    "uniform",
    "normal",
    "constant",
    "eye",
    "dirac",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "sparse",
]

_LINEAR = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "sigmoid",
)


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
        return math.sqrt(2.0 / (1 + slope**2))
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
    """Fill `tensor` with `val`."""
    _check("constant_", tensor)
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with ones."""
    return constant_(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with zeros."""
    return constant_(tensor, 0)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Values from U(a, b)."""
    _check("uniform_", tensor)
    if b < a:
        raise ValueError(f"uniform_: expects a <= b, but got a={a} and b={b}")
    _floating("uniform_", tensor)
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """Values from N(mean, std**2)."""
    _check("normal_", tensor)
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0.0, but found std {std}")
    _floating("normal_", tensor)
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the diagonal of a rectangular one)."""
    _check("eye_", tensor)
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got {tensor.ndim}")
    return _fill_from(tensor, lg.eye(tensor.shape[0], tensor.shape[1], dtype=tensor._dtype))


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than "
            f"2 dimensions (shape {list(tensor.shape)})"
        )
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
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(_check("xavier_normal_", tensor))
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al.); `a` is leaky_relu's slope."""
    _check("kaiming_uniform_", tensor)
    if 0 in tensor.shape:
        return tensor
    fan = _fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """N(0, std**2) with std = gain / sqrt(fan) (He et al.); `a` is leaky_relu's slope."""
    _check("kaiming_normal_", tensor)
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Any = None,
) -> Tensor:
    """Values from N(mean, std**2) restricted to [a, b], by exact rejection sampling:
    normal draws outside [a, b] are redrawn when the interval holds much of the mass,
    otherwise uniform proposals on [a, b] are accepted with the normal density's ratio to
    its peak on the interval. Warns (as PyTorch) when the mean is more than 2 std from
    [a, b]. The numbers differ from PyTorch's (another generator), the distribution is
    the same."""
    _check("trunc_normal_", tensor)
    _floating("trunc_normal_", tensor)
    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    if tensor.numel() == 0:
        return tensor

    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    with no_grad():
        mass = cdf((b - mean) / std) - cdf((a - mean) / std)
        if mass > 0.3:
            result = lg.empty_like(tensor).normal_(mean, std, generator=generator)
            while True:
                bad = lg.logical_or(lg.lt(result, a), lg.gt(result, b))
                if not bool(bad.any()):
                    break
                fresh = lg.empty_like(tensor).normal_(mean, std, generator=generator)
                result = lg.where(bad, fresh, result)
        else:
            peak = max(a, min(mean, b))
            log_peak = -0.5 * ((peak - mean) / std) ** 2

            def log_ratio(x: Tensor) -> Tensor:
                return lg.sub(lg.mul(lg.square(lg.div(lg.sub(x, mean), std)), -0.5), log_peak)

            result = lg.empty_like(tensor).uniform_(a, b, generator=generator)
            pending = lg.gt(
                lg.log(lg.empty_like(tensor).uniform_(generator=generator)), log_ratio(result)
            )
            while bool(pending.any()):
                proposal = lg.empty_like(tensor).uniform_(a, b, generator=generator)
                result = lg.where(pending, proposal, result)
                accept_u = lg.log(lg.empty_like(tensor).uniform_(generator=generator))
                pending = lg.logical_and(pending, lg.gt(accept_u, log_ratio(proposal)))
        tensor.copy_(result)
    return tensor


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D convolution weight with the Dirac delta (a convolution that
    copies its input channels; with `groups`, within each group)."""
    _check("dirac_", tensor)
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    centre = tuple(n // 2 for n in sizes[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, sizes[1])):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix (Saxe et al.): the Q of the QR decomposition of a
    normal matrix, signs fixed by R's diagonal, times `gain`; dimensions after the first
    are flattened."""
    _check("orthogonal_", tensor)
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = lg.empty(rows, cols, dtype=tensor.dtype).normal_(0, 1, generator=generator)
        if rows < cols:
            flat = flat.t()

        q, r = qr(flat)
        q = lg.mul(q, lg.sign(lg.diagonal(r, 0)))
        if rows < cols:
            q = q.t()
        tensor.copy_(lg.mul(q.reshape(tensor.shape), gain))
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """A sparse 2-D matrix (Martens 2010): N(0, std**2) values, then in each column
    `ceil(sparsity * rows)` randomly chosen entries set to zero."""
    _check("sparse_", tensor)
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            chosen = lg.randperm(rows, generator=generator)[:zeros]
            tensor[chosen, col] = 0
    return tensor


def _deprecated(new: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """The old name without the underscore: warns (FutureWarning, as PyTorch) and calls
    the new one."""
    old = new.__name__[:-1]

    def wrapper(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.",
            FutureWarning,
            stacklevel=2,
        )
        return new(*args, **kwargs)

    wrapper.__name__ = wrapper.__qualname__ = old
    wrapper.__module__ = new.__module__
    wrapper.__doc__ = f"Deprecated: use `{new.__name__}` (same arguments)."
    return wrapper


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
