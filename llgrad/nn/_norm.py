"""Normalization layers as compositions: group, instance, RMS and local response
normalization, the legacy cross-map LRN, and `normalize` (divide by a p-norm).

Statistics use the biased variance, as PyTorch's kernels do; running statistics (instance
norm with `use_input_stats`) are updated in place outside autograd with the unbiased
variance, averaged over the batch as PyTorch does. Gradients, forward mode and compiled
code come from the ops these are made of, so `grad_fn` names the last op (PyTorch shows
one fused node such as `NativeGroupNormBackward0`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import no_grad
from ..tensor import Tensor
from ..typeinfo import finfo
from ._base import _tensor

__all__ = [
    "group_norm",
    "instance_norm",
    "rms_norm",
    "local_response_norm",
    "normalize",
    "cross_map_lrn2d",
]


def _check_float(op: str, x: Tensor) -> None:
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        raise RuntimeError(
            f'{op}: "{op}" not implemented for {x._dtype.name} (input shape {list(x.shape)})'
        )


def _channel_view(t: Tensor, ndim: int) -> Tensor:
    return lg.reshape(t, (1, -1) + (1,) * (ndim - 2))


def _affine(
    op: str, out: Tensor, weight: Tensor | None, bias: Tensor | None, channels: int
) -> Tensor:
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (_tensor(op, name, t).ndim != 1 or t.shape[0] != channels):
            raise RuntimeError(
                f"{op}: Expected {name} to be a vector of size equal to the "
                f"number of channels in input ({channels}), but got {name} "
                f"of shape {list(t.shape)}"
            )
    if weight is not None:
        out = lg.mul(out, _channel_view(weight, out.ndim))
    if bias is not None:
        out = lg.add(out, _channel_view(bias, out.ndim))
    return out


@composite_function
def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each of `num_groups` channel groups of an (N, C, *) input over its channels
    and spatial positions (biased variance), then scale and shift per channel."""
    op = "group_norm"
    _tensor(op, "input", input)
    _check_float(op, input)
    if input.ndim < 2:
        raise RuntimeError(
            f"{op}: Expected at least 2 dimensions for input tensor but received {input.ndim}"
        )
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(
            f"{op}: Expected number of channels in input to be divisible by "
            f"num_groups, but got input of shape {list(input.shape)} and "
            f"num_groups={num_groups}"
        )
    x = lg.reshape(input, (n, num_groups, (c // num_groups) * math.prod(input.shape[2:])))
    mean = lg.mean(x, -1, keepdim=True)
    var = lg.var(x, -1, keepdim=True, correction=0)
    out = lg.reshape(lg.mul(lg.sub(x, mean), lg.rsqrt(lg.add(var, eps))), input.shape)
    return _affine(op, out, weight, bias, c)


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each (sample, channel) plane of an (N, C, *) input over its spatial
    positions. With `use_input_stats` the plane's own statistics are used and the running
    ones (when given) move towards their batch averages by `momentum`; otherwise the
    running statistics normalize."""
    op = "instance_norm"
    _tensor(op, "input", input)
    _check_float(op, input)
    if input.ndim < 3:
        raise ValueError(
            f"{op}: expected an input of at least 3 dimensions (N, C, *), got "
            f"shape {list(input.shape)}"
        )
    n, c = input.shape[:2]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and (_tensor(op, name, t).ndim != 1 or t.shape[0] != c):
            raise RuntimeError(f"{op}: {name} should contain {c} elements, not {list(t.shape)}")
    axes = tuple(range(2, input.ndim))
    count = math.prod(input.shape[2:])
    if use_input_stats:
        if count <= 1:
            raise ValueError(
                f"Expected more than 1 spatial element when training, got input "
                f"size {list(input.shape)}"
            )
        mean = lg.mean(input, axes, keepdim=True)
        var = lg.var(input, axes, keepdim=True, correction=0)
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    batch_mean = lg.mean(lg.reshape(mean, (n, c)), 0)
                    running_mean.mul_(1 - momentum).add_(
                        lg.mul(batch_mean, momentum).to(running_mean._dtype)
                    )
                if running_var is not None:
                    unbiased = lg.mul(lg.reshape(var, (n, c)), count / (count - 1))
                    running_var.mul_(1 - momentum).add_(
                        lg.mul(lg.mean(unbiased, 0), momentum).to(running_var._dtype)
                    )
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError(
                f"{op}: Expected running_mean and running_var to be defined "
                f"when use_input_stats is false"
            )
        mean = _channel_view(running_mean, input.ndim)
        var = _channel_view(running_var, input.ndim)
    out = lg.mul(lg.sub(input, mean), lg.rsqrt(lg.add(var, eps)))
    return _affine(op, out, weight, bias, c)


@composite_function
def rms_norm(
    input: Tensor,
    normalized_shape: Sequence[int] | int,
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """x / sqrt(mean(x^2 over the trailing `normalized_shape`) + eps) * weight; `eps`
    defaults to the machine epsilon of the input's dtype, as PyTorch."""
    op = "rms_norm"
    _tensor(op, "input", input)
    _check_float(op, input)
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or tuple(input.shape[input.ndim - k :]) != ns or input.ndim < k:
        raise RuntimeError(
            f"{op}: Given normalized_shape={list(ns)}, expected input with "
            f"shape [*, {', '.join(map(str, ns))}], but got input of size "
            f"{list(input.shape)}"
        )
    if weight is not None and tuple(_tensor(op, "weight", weight).shape) != ns:
        raise RuntimeError(
            f"{op}: Expected weight to be of same shape as normalized_shape, "
            f"but got weight of shape {list(weight.shape)} and "
            f"normalized_shape = {list(ns)}"
        )
    if eps is None:
        eps = float(finfo(input._dtype).eps)
    axes = tuple(range(input.ndim - k, input.ndim))
    ms = lg.mean(lg.mul(input, input), axes, keepdim=True)
    out = lg.mul(input, lg.rsqrt(lg.add(ms, eps)))
    if weight is not None:
        out = lg.mul(out, weight)
    return out


@composite_function
def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta; the channel
    window is zero-padded (size // 2 before, (size - 1) // 2 after) and always divides by
    `size`, as PyTorch."""
    op = "local_response_norm"
    _tensor(op, "input", input)
    if input.ndim < 3:
        raise ValueError(
            f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)"
        )
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = lg.mul(input, input)
    lows = [0] * input.ndim
    highs = [0] * input.ndim
    lows[1], highs[1] = size // 2, (size - 1) // 2
    padded = lg.pad_dims(sq, tuple(lows), tuple(highs))
    total = None
    for t in range(size):
        piece = lg.slice_dim(padded, 1, t, t + c)
        total = piece if total is None else lg.add(total, piece)
    assert total is not None
    div = lg.pow(lg.add(lg.mul(lg.div(total, float(size)), alpha), k), beta)
    return lg.div(input, div)


def cross_map_lrn2d(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """PyTorch's legacy `CrossMapLRN2d` on an (N, C, H, W) input: x * (k + alpha / size *
    S)^-beta, with S the sum of squares over PyTorch's running channel window (which keeps
    channel 0 in every sum beyond the window, as PyTorch's recurrence does)."""
    op = "CrossMapLRN2d"
    _tensor(op, "input", input)
    if input.ndim != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
    c = input.shape[1]
    pre = int((size - 1) / 2 + 1)
    m = np.zeros((c, c))
    for ch in range(c):
        m[ch, 0] = 1.0
        m[ch, max(1, ch - pre + 1) : min(ch + pre - 1, c - 1) + 1] = 1.0
    sq = lg.mul(input, input)
    s = lg.movedim(
        lg.matmul(lg.movedim(sq, 1, -1), lg.tensor(m.T.copy(), dtype=input._dtype)), -1, 1
    )
    scale = lg.add(lg.mul(s, alpha / size), k)
    return lg.mul(input, lg.pow(scale, -beta))


@composite_function
def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None
) -> Tensor:
    """input / max(||input||_p over `dim`, eps)."""
    op = "normalize"
    _tensor(op, "input", input)
    denom = lg.clamp(lg.norm(input, p, dim, keepdim=True), min=eps)
    res = lg.div(input, lg.expand_as(denom, input))
    if out is not None:
        _tensor(op, "out", out)
        out.copy_(res)
        return out
    return res
