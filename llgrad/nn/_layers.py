"""Functional layers built from other differentiable functions: 1-D convolution and max
pooling (the 2-D ops on a height-1 plane), average and adaptive average pooling, and
batch normalization.

Each is a composition, so its gradient, forward-mode rule, batching rule and compiled code
come from the ops it is made of; the semantics (output sizes, pooling divisors, running
statistics) are PyTorch's. They are re-exported by `llgrad.nn.functional`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import no_grad
from ..eager import selection as eager_selection
from ..functions._host import host_plain
from ..ir import dtypes as dt
from ..ops import nn as nnops
from ..tensor import Tensor
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak, tracing
from ._base import _tensor


def _ints(op: str, name: str, v: Any, n: int) -> tuple[int, ...]:
    """An int or a sequence of `n` ints (one value repeats)."""
    if isinstance(v, bool) or not isinstance(v, (int, tuple, list)):
        raise TypeError(f"{op}(): {name} must be an int or a tuple of {n} ints, got {v!r}")
    vals = (v,) * n if isinstance(v, int) else tuple(v)
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
        raise ValueError(f"{op}(): {name} must be an int or a tuple of {n} ints, got {v!r}")
    return vals


def _rank(op: str, x: Tensor, dims: int) -> bool:
    """Check an (N, C, *spatial) or unbatched (C, *spatial) input; True when unbatched."""
    if x.ndim not in (dims + 1, dims + 2):
        names = "L" if dims == 1 else "H, W"
        raise RuntimeError(
            f"{op}: expected a {dims + 1}-D (C, {names}) or {dims + 2}-D "
            f"(N, C, {names}) input, got shape {list(x.shape)}"
        )
    return x.ndim == dims + 1


# --------------------------------------------------------------------------------------
# 1-D convolution and max pooling: the 2-D ops over a (1, L) plane
# --------------------------------------------------------------------------------------


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    from .functional import conv2d  # circle: nn.functional -> here

    op = "conv1d"
    _tensor(op, "input", input)
    _tensor(op, "weight", weight)
    if weight.ndim != 3:
        raise RuntimeError(
            f"{op}: expected a 3-D weight (out_channels, in_channels/groups, "
            f"kernel), got shape {list(weight.shape)}"
        )
    unbatched = _rank(op, input, 1)
    x = lg.unsqueeze(input, 0) if unbatched else input
    (s,) = _ints(op, "stride", stride, 1)
    (d,) = _ints(op, "dilation", dilation, 1)
    p: Any = padding if isinstance(padding, str) else (0, _ints(op, "padding", padding, 1)[0])
    out = conv2d(lg.unsqueeze(x, 2), lg.unsqueeze(weight, 2), bias, (1, s), p, (1, d), groups)
    out = lg.squeeze(out, 2)
    return lg.squeeze(out, 0) if unbatched else out


def _pool1d_args(
    op: str, input: Any, kernel_size: Any, stride: Any, padding: Any
) -> tuple[int, int, int]:
    """A 1-d pool's checked input and its kernel, stride (default: the kernel), padding."""
    _tensor(op, "input", input)
    _rank(op, input, 1)
    (k,) = _ints(op, "kernel_size", kernel_size, 1)
    (s,) = (k,) if stride is None or stride == () else _ints(op, "stride", stride, 1)
    (p,) = _ints(op, "padding", padding, 1)
    return k, s, p


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    from .functional import max_pool2d  # circle: nn.functional -> here

    op = "max_pool1d"
    k, s, p = _pool1d_args(op, input, kernel_size, stride, padding)
    (d,) = _ints(op, "dilation", dilation, 1)
    res = max_pool2d(
        lg.unsqueeze(input, -2), (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices
    )
    if return_indices:
        return lg.squeeze(res[0], -2), lg.squeeze(res[1], -2)
    return lg.squeeze(res, -2)


# --------------------------------------------------------------------------------------
# Average pooling
# --------------------------------------------------------------------------------------


def _divisors(size: int, out: int, k: int, s: int, p: int, count_include_pad: bool) -> np.ndarray:
    """PyTorch's per-window divisor along one dimension: the window clipped to the padded
    input, or to the input itself without count_include_pad."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    if count_include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def avg_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    op = "avg_pool2d"
    _tensor(op, "input", input)
    unbatched = _rank(op, input, 2)
    x = lg.unsqueeze(input, 0) if unbatched else input
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        raise TypeError(
            f"{op}: expected a floating point input, got {x._dtype.name} "
            f"(shape {list(input.shape)})"
        )
    k = _ints(op, "kernel_size", kernel_size, 2)
    s = k if stride is None or stride == () else _ints(op, "stride", stride, 2)
    p = _ints(op, "padding", padding, 2)
    if any(v <= 0 for v in k + s):
        raise ValueError(
            f"{op}: kernel_size and stride must be positive, got kernel_size="
            f"{list(k)}, stride={list(s)}"
        )
    if any(2 * p[i] > k[i] for i in range(2)):
        raise RuntimeError(
            f"{op}: pad should be at most half of kernel size, but got "
            f"pad={list(p)} and kernel_size={list(k)}"
        )
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f"{op}: divisor must be not zero")
    (oh, ow), extra = nnops.pool_geometry(x._shape, k, s, p, (1, 1), ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(
            f"{op}: Given input size: ({'x'.join(map(str, x.shape[1:]))}). "
            f"Calculated output size: ({x.shape[1]}x{oh}x{ow}). Output size is "
            f"too small"
        )
    xp = lg.pad_dims(x, (0, 0, p[0], p[1]), (0, 0, p[0] + extra[0], p[1] + extra[1]))
    sums = lg.sum(nnops.im2col(lg, xp, k, s, (1, 1), (oh, ow)), 2)
    if divisor_override is not None:
        out = lg.div(sums, float(divisor_override))
    else:
        h, w = x.shape[2:]
        div = np.outer(
            _divisors(h, oh, k[0], s[0], p[0], count_include_pad),
            _divisors(w, ow, k[1], s[1], p[1], count_include_pad),
        )
        out = lg.div(sums, lg.tensor(div, dtype=sums._dtype))
    return lg.squeeze(out, 0) if unbatched else out


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    k, s, p = _pool1d_args("avg_pool1d", input, kernel_size, stride, padding)
    out = avg_pool2d(lg.unsqueeze(input, -2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad)
    return lg.squeeze(out, -2)


def _adaptive_matrix(size: int, out: int, dtype: Any) -> Tensor:
    """(out, size): row i averages input[floor(i size / out) : ceil((i + 1) size / out)]."""
    m = np.zeros((out, size))
    for i in range(out):
        lo, hi = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return lg.tensor(m, dtype=dtype)


def _output_size(op: str, v: Any, n: int, spatial: tuple[int, ...]) -> tuple[int, ...]:
    vals = (v,) * n if isinstance(v, int) else tuple(v)
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise ValueError(f"{op}: output_size must have {n} values, got {v!r}")
    out = tuple(spatial[i] if vals[i] is None else vals[i] for i in range(n))
    if any(not isinstance(o, int) or o < 0 for o in out):
        raise ValueError(f"{op}: output_size must be non-negative ints (or None), got {v!r}")
    return out


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Averages over PyTorch's adaptive windows, as two small averaging matmuls (exact
    window semantics for any input and output size)."""
    op = "adaptive_avg_pool2d"
    _tensor(op, "input", input)
    _rank(op, input, 2)
    if not input._dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {input._dtype.name}")
    h, w = input.shape[-2:]
    oh, ow = _output_size(op, output_size, 2, (h, w))
    if (oh, ow) == (h, w):
        return lg.mul(input, 1)
    rows = _adaptive_matrix(h, oh, input._dtype)
    cols = _adaptive_matrix(w, ow, input._dtype)
    return lg.matmul(lg.matmul(rows, input), lg.transpose(cols, 0, 1))


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    op = "adaptive_avg_pool1d"
    _tensor(op, "input", input)
    _rank(op, input, 1)
    if not input._dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating point input, got {input._dtype.name}")
    (ol,) = _output_size(op, output_size, 1, (input.shape[-1],))
    cols = _adaptive_matrix(input.shape[-1], ol, input._dtype)
    return lg.matmul(input, lg.transpose(cols, 0, 1))


# --------------------------------------------------------------------------------------
# Batch normalization
# --------------------------------------------------------------------------------------


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over every dimension but the channels (dim 1). Training uses the batch's
    statistics (biased variance) and updates the running ones in place, with the unbiased
    variance, as PyTorch; evaluation uses the running statistics."""
    op = "batch_norm"
    _tensor(op, "input", input)
    if input._shape == (0,):  # torch: an empty 1-D input has no channels
        return lg.reshape(
            batch_norm(
                lg.reshape(input, (0, 0)),
                running_mean,
                running_var,
                weight,
                bias,
                training,
                momentum,
                eps,
            ),
            (0,),
        )
    if input.ndim < 2:
        raise ValueError(
            f"{op}: expected an input of at least 2 dimensions (N, C, ...), got "
            f"shape {list(input.shape)}"
        )
    c = input.shape[1]
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and (_tensor(op, name, t).ndim != 1 or t.shape[0] != c):
            raise RuntimeError(
                f"{op}: {name} should contain {c} elements (the channels of an "
                f"input of shape {list(input.shape)}), not {list(t.shape)}"
            )
    axes = (0,) + tuple(range(2, input.ndim))
    view = (1, c) + (1,) * (input.ndim - 2)
    if training:
        count = math.prod(input.shape[i] for i in axes)
        if count == 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got "
                f"input size {list(input.shape)}"
            )
        out, mean, var = _batch_norm_train(input, weight, bias, axes, view, eps)
        if running_mean is not None and running_var is not None and count > 0:
            with no_grad():  # (an empty batch leaves them as they are, as PyTorch)
                running_mean.mul_(1 - momentum).add_(
                    lg.mul(lg.reshape(mean, (c,)), momentum).to(running_mean._dtype)
                )
                unbiased = lg.mul(lg.reshape(var, (c,)), count / (count - 1))
                running_var.mul_(1 - momentum).add_(
                    lg.mul(unbiased, momentum).to(running_var._dtype)
                )
        return out
    if running_mean is None or running_var is None:
        raise RuntimeError(
            f"{op}: running_mean and running_var must be given when not "
            f"training (or use training=True for batch statistics)"
        )
    return _batch_norm_apply(
        input,
        lg.reshape(running_mean, view),
        lg.reshape(running_var, view),
        weight,
        bias,
        view,
        eps,
    )


# The arithmetic of batch norm as composite functions: in eager mode each runs as one
# compiled graph per shape (and its backward as one), where written out it is a dozen
# kernels each way (`compiler.composites`); the running statistics are updated outside.


@composite_function
def _batch_norm_apply(
    input: Tensor,
    mean: Tensor,
    var: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    view: tuple[int, ...],
    eps: float,
) -> Tensor:
    """(input - mean) / sqrt(var + eps) * weight + bias (weight and bias per channel)."""
    out = lg.mul(lg.sub(input, mean), lg.rsqrt(lg.add(var, eps)))
    if weight is not None:
        out = lg.mul(out, lg.reshape(weight, view))
    if bias is not None:
        out = lg.add(out, lg.reshape(bias, view))
    return out


@composite_function
def _batch_norm_train(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    axes: tuple[int, ...],
    view: tuple[int, ...],
    eps: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """Batch norm with the batch's statistics: (output, mean, biased variance), the
    statistics with the input's rank (kept dimensions)."""
    mean = lg.mean(input, axes, keepdim=True)
    var = lg.var(input, axes, keepdim=True, correction=0)
    return _batch_norm_apply(input, mean, var, weight, bias, view, eps), mean, var


# --------------------------------------------------------------------------------------
# pad, one_hot
# --------------------------------------------------------------------------------------


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last len(pad) // 2 dimensions: `pad` lists (before, after) pairs starting
    from the last dimension, as PyTorch; negative amounts crop. Constant mode only."""
    op = "pad"
    _tensor(op, "input", input)
    if mode != "constant":
        raise ValueError(f"{op}: mode={mode!r} is not available in llgrad (only 'constant')")
    amounts = tuple(pad)
    if (
        len(amounts) % 2
        or len(amounts) // 2 > input.ndim
        or not all(isinstance(a, int) and not isinstance(a, bool) for a in amounts)
    ):
        raise ValueError(
            f"{op}: padding length must be an even number of ints, at most twice "
            f"the input's {input.ndim} dimensions; got {list(amounts)}"
        )
    lows, highs = [0] * input.ndim, [0] * input.ndim
    for k in range(len(amounts) // 2):
        lows[input.ndim - 1 - k], highs[input.ndim - 1 - k] = amounts[2 * k], amounts[2 * k + 1]
    x = input
    if any(v < 0 for v in lows + highs):  # crop first
        starts = [max(0, -v) for v in lows]
        stops = [n - max(0, -v) for n, v in zip(input.shape, highs)]
        if any(b < a for a, b in zip(starts, stops)):
            raise RuntimeError(
                f"{op}: cropping {list(amounts)} leaves a negative size for "
                f"shape {list(input.shape)}"
            )
        x = lg.slice_all(x, tuple(starts), tuple(stops), (1,) * x.ndim)
    return lg.pad_dims(
        x,
        tuple(max(0, v) for v in lows),
        tuple(max(0, v) for v in highs),
        None,
        0 if value is None else value,
    )


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding along a new last dimension (classes from the max when -1)."""
    op = "one_hot"
    _tensor(op, "tensor", tensor)
    if tensor._dtype is not dt.int64:
        raise RuntimeError(
            f"{op} is only applicable to index tensor of type LongTensor, got {tensor._dtype.name}"
        )
    if num_classes == -1 and tensor.numel() == 0:
        raise RuntimeError(f"{op}: Can not infer total number of classes from empty tensor.")
    if num_classes.__class__ is int and num_classes >= -1 and host_plain(tensor):
        # the plain eager case: one kernel checks the classes and writes the encoding
        out, lo, hi = eager_selection.one_hot(tensor, num_classes)
        if out is not None:
            return out
        if lo < 0:
            raise RuntimeError(f"{op}: Class values must be non-negative (got {lo})")
        raise RuntimeError(
            f"{op}: Class values must be smaller than num_classes ({num_classes}); got {hi}"
        )

    if num_classes == -1:
        if tracing():
            raise GraphBreak(
                f"{op}() without num_classes (the number of classes depends on "
                f"the data; pass num_classes to keep it in the graph)",
                user_location(),
                advice="this part runs eagerly",
            )
        num_classes = int(lg.amax(tensor).item()) + 1 if tensor.numel() else 0
    if tensor.numel() and not tracing() and getattr(tensor, "_ctx", None) is None:
        lo, hi = int(lg.amin(tensor).item()), int(lg.amax(tensor).item())
        if lo < 0:
            raise RuntimeError(f"{op}: Class values must be non-negative (got {lo})")
        if hi >= num_classes:
            raise RuntimeError(
                f"{op}: Class values must be smaller than num_classes ({num_classes}); got {hi}"
            )
    classes = lg.iota(num_classes, dt.int64)
    return lg.eq(lg.unsqueeze(tensor, -1), classes).to(dt.int64)
