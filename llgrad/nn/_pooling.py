"""Pooling over 1, 2 and 3 spatial dimensions: max (with indices), max unpooling, average,
adaptive average, adaptive max, power-average (LP) and fractional max pooling.

1-D and 2-D max pooling run the registered `max_pool2d` composite op (one
`MaxPool2DWithIndicesBackward0` node); the other layers are compositions: every kernel tap
is a strided slice of the padded input, a max picks the first maximum of each window with
`argmax` and reads it with `take_along_dim` (so the gradient goes to that element only, as
PyTorch), averages sum the taps and divide by PyTorch's per-window divisors, adaptive
windows are read with `index_select`. Gradients, forward mode and compiled code come from
those ops. Output sizes, ceil_mode, padding, dilation and `indices` (the flat position in
each input plane) are PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import no_grad
from ..functions._host import host_empty, host_plain, host_view
from ..ir import dtypes as dt
from ..ops import nn as nnops
from ..tensor import Tensor
from ..tracer.tensor import tracing
from ._base import _composite, _tensor
from ._conv import _PLAN_LIMIT, _plan_key
from ._layers import _adaptive_matrix, _divisors, _ints, _output_size

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "fractional_max_pool2d",
    "fractional_max_pool3d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d_with_indices",
]

_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def _batched(op: str, x: Any, n: int) -> tuple[Tensor, bool]:
    """The input as (N, C, *spatial) and whether it came unbatched (C, *spatial)."""
    _tensor(op, "input", x)
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"{op}: Expected {n + 1}D or {n + 2}D input (C, {_SPATIAL[n]}) or "
            f"(N, C, {_SPATIAL[n]}), but got input of size {list(x.shape)}"
        )
    if x.ndim == n + 1:
        return lg.unsqueeze(x, 0), True
    return x, False


def _unbatch(t: Tensor, unbatched: bool) -> Tensor:
    return lg.squeeze(t, 0) if unbatched else t


def _stride(op: str, stride: Any, k: tuple[int, ...], n: int) -> tuple[int, ...]:
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        return k
    return _ints(op, "stride", stride, n)


def _geometry(
    op: str,
    x: Tensor,
    k: Sequence[int],
    s: Sequence[int],
    p: Sequence[int],
    d: Sequence[int],
    ceil_mode: bool,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(output sizes, extra padding after that ceil_mode's last windows reach into)."""
    n = len(k)
    if any(v <= 0 for v in tuple(k) + tuple(s)):
        raise ValueError(
            f"{op}: kernel_size and stride must be positive, got kernel_size="
            f"{list(k)}, stride={list(s)}"
        )
    if any(v <= 0 for v in d):
        raise ValueError(f"{op}: dilation must be positive, got {list(d)}")
    for i in range(n):
        if p[i] < 0 or 2 * p[i] > d[i] * (k[i] - 1) + 1:
            raise RuntimeError(
                f"{op}: pad should be at most half of effective kernel size, "
                f"but got pad={list(p)}, kernel_size={list(k)} and "
                f"dilation={list(d)}"
            )
    sizes = tuple(x.shape[2:])
    out, extra = [], []
    for i in range(n):
        o = nnops.window_geometry(sizes[i], k[i], s[i], p[i], d[i], ceil_mode)
        need = (o - 1) * s[i] + d[i] * (k[i] - 1) + 1
        out.append(o)
        extra.append(max(0, need - (sizes[i] + 2 * p[i])))
    if any(o <= 0 for o in out):
        raise RuntimeError(
            f"{op}: Given input size: ({'x'.join(map(str, x.shape[1:]))}). "
            f"Calculated output size: ({'x'.join(map(str, [x.shape[1]] + out))})"
            f". Output size is too small"
        )
    return tuple(out), tuple(extra)


def _taps(
    xp: Tensor, k: Sequence[int], s: Sequence[int], d: Sequence[int], out: Sequence[int]
) -> list[Tensor]:
    """Every kernel tap of the padded (N, C, *spatial) input as an (N, C, *out) slice, in
    row-major kernel order."""
    nb, c = xp.shape[:2]
    pieces = []
    for tap in np.ndindex(*k):
        starts = tuple(t * dd for t, dd in zip(tap, d))
        stops = tuple(a + st * (o - 1) + 1 for a, st, o in zip(starts, s, out))
        pieces.append(lg.slice_all(xp, (0, 0) + starts, (nb, c) + stops, (1, 1) + tuple(s)))
    return pieces


def _flat_indices(
    tap: Tensor,
    k: Sequence[int],
    s: Sequence[int],
    p: Sequence[int],
    d: Sequence[int],
    sizes: Sequence[int],
) -> Tensor:
    """Each window's chosen tap (N, C, *out) as a flat position in its input plane."""
    n = len(k)
    out = tap.shape[2:]
    flat = None
    rest = tap
    coords: list[Tensor] = [None] * n  # type: ignore[list-item]
    for i in reversed(range(n)):
        t = lg.remainder(rest, k[i])
        rest = lg.floor_divide(rest, k[i])
        shape = [1] * n
        shape[i] = out[i]
        origin = lg.reshape(lg.sub(lg.mul(lg.arange(out[i]), s[i]), p[i]), tuple(shape))
        coords[i] = lg.add(lg.mul(t, d[i]), origin)
    for i in range(n):
        flat = coords[i] if flat is None else lg.add(lg.mul(flat, sizes[i]), coords[i])
    assert flat is not None
    return flat


def _max_poolnd(
    op: str,
    n: int,
    input: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    return_indices: bool,
) -> Any:
    x, unbatched = _batched(op, input, n)
    k = _ints(op, "kernel_size", kernel_size, n)
    s = _stride(op, stride, k, n)
    p = _ints(op, "padding", padding, n)
    d = _ints(op, "dilation", dilation, n)
    if x._dtype.is_complex or x._dtype is dt.bool_:
        raise RuntimeError(
            f'{op}: "max_pool" not implemented for {x._dtype.name} '
            f"(input shape {list(input.shape)})"
        )
    out_size, extra = _geometry(op, x, k, s, p, d, ceil_mode)
    if n <= 2 and not return_indices:
        if n == 1:
            x2, k2, s2, p2, d2 = lg.unsqueeze(x, 2), (1,) + k, (1,) + s, (0,) + p, (1,) + d
        else:
            x2, k2, s2, p2, d2 = x, k, s, p, d
        out = _composite(
            "max_pool2d",
            (x2,),
            {
                "kernel_size": k2,
                "stride": s2,
                "padding": p2,
                "dilation": d2,
                "ceil_mode": ceil_mode,
            },
        )
        return _unbatch(lg.squeeze(out, 2) if n == 1 else out, unbatched)
    low = nnops._lowest(x._dtype)
    xp = (
        lg.pad_dims(x, (0, 0) + p, (0, 0) + tuple(a + b for a, b in zip(p, extra)), None, low)
        if any(p) or any(extra)
        else x
    )
    windows = lg.stack(_taps(xp, k, s, d, out_size), 2)  # (N, C, K, *out)
    with no_grad():
        tap = lg.argmax(windows, 2, keepdim=True)
    out = lg.squeeze(lg.take_along_dim(windows, tap, 2), 2)
    if not return_indices:
        return _unbatch(out, unbatched)
    with no_grad():
        idx = _flat_indices(lg.squeeze(tap, 2), k, s, p, d, x.shape[2:])
    return _unbatch(out, unbatched), _unbatch(idx, unbatched)


@composite_function
def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """The maximum of each window of an (N, C, L) or (C, L) input (NaN propagates); with
    `return_indices`, also each maximum's position in L."""
    return _max_poolnd(
        "max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


@composite_function
def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """The maximum of each window of an (N, C, H, W) or (C, H, W) input; with
    `return_indices`, also each maximum's flat position in its (H, W) plane."""
    return _max_poolnd(
        "max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


@composite_function
def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """The maximum of each window of an (N, C, D, H, W) or (C, D, H, W) input; with
    `return_indices`, also each maximum's flat position in its (D, H, W) volume."""
    return _max_poolnd(
        "max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """`max_pool1d(..., return_indices=True)`: (values, indices)."""
    return _max_poolnd(
        "max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, True
    )


def max_pool2d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """`max_pool2d(..., return_indices=True)`: (values, indices)."""
    return _max_poolnd(
        "max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, True
    )


def max_pool3d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> tuple[Tensor, Tensor]:
    """`max_pool3d(..., return_indices=True)`: (values, indices)."""
    return _max_poolnd(
        "max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode, True
    )


# --------------------------------------------------------------------------------------
# Max unpooling
# --------------------------------------------------------------------------------------


def _unpool_size(
    op: str, x: Tensor, k: Sequence[int], s: Sequence[int], p: Sequence[int], output_size: Any
) -> tuple[int, ...]:
    n = len(k)
    default = tuple((x.shape[-n + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(n))
    if output_size is None:
        return default
    size = tuple(int(v) for v in output_size)
    if len(size) == n + 2 or (len(size) == n + 1 and x.ndim == n + 1):
        size = size[-n:]
    if len(size) != n:
        raise ValueError(
            f"{op}: output_size should be a sequence containing {n} or {n + 2} "
            f"elements, but it has a length of '{len(size)}'"
        )
    for i in range(n):
        lo, hi = default[i] - s[i], default[i] + s[i]
        if not lo < size[i] < hi:
            raise ValueError(
                f"{op}: invalid output_size {list(size)} (dim {i} must be between {lo} and {hi})"
            )
    return size


# checked unpooling calls: plan key -> (unbatched, output size, plane size, rows, each
# row's first flat output position as a NumPy column)
_unpool_plans: dict[tuple, tuple] = {}


def _unpool_plan(
    op: str,
    n: int,
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    output_size: Any,
) -> tuple:
    """Check an unpooling call's operands and arguments (PyTorch's errors, all but the
    index range, which depends on values) and compute its geometry."""
    x, unbatched = _batched(op, input, n)
    _tensor(op, "indices", indices)
    if indices._dtype is not dt.int64:
        raise RuntimeError(
            f"{op}: elements in indices should be type int64 but got: {indices._dtype.name}"
        )
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(
            f"{op}: Expected shape of indices to be same as that of the input "
            f"tensor ({list(input.shape)}) but got indices tensor with shape: "
            f"{list(indices.shape)}"
        )
    k = _ints(op, "kernel_size", kernel_size, n)
    s = _stride(op, stride, k, n)
    p = _ints(op, "padding", padding, n)
    size = _unpool_size(op, x, k, s, p, output_size)
    plane = math.prod(size)
    rows = x.shape[0] * x.shape[1]
    return unbatched, size, plane, rows, np.arange(rows, dtype=np.int64)[:, None] * plane


def _index_error(op: str, lo: int, hi: int, plane: int, size: Sequence[int]) -> RuntimeError:
    return RuntimeError(
        f"{op}: Found an invalid max index: {lo if lo < 0 else hi} (output "
        f"volumes are of size {'x'.join(map(str, size))})"
    )


def _max_unpoolnd(
    op: str,
    n: int,
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    output_size: Any,
) -> Tensor:
    key = _plan_key(op, (input, indices), (kernel_size, stride, padding, output_size))
    plan = _unpool_plans.get(key) if key is not None else None
    if plan is None:
        plan = _unpool_plan(op, n, input, indices, kernel_size, stride, padding, output_size)
        if key is not None and len(_unpool_plans) < _PLAN_LIMIT:
            _unpool_plans[key] = plan
    unbatched, size, plane, rows, starts = plan
    if host_plain(input, indices):
        # the plain eager case on the host (the index check reads the values anyway)
        res, out = host_empty(tuple(input.shape[:-n]) + size, input._dtype)
        out.fill(0)
        if 0 not in input._shape:
            iv = host_view(indices).reshape(rows, -1)
            # one pass finds negative indices too: they are huge as unsigned numbers
            if int(np.maximum.reduce(iv.view(np.uint64), None)) >= plane:
                raise _index_error(op, int(iv.min()), int(iv.max()), plane, size)
            np.put(out, iv + starts, host_view(input).reshape(rows, -1))
        return res
    x = lg.unsqueeze(input, 0) if unbatched else input
    idx = lg.unsqueeze(indices, 0) if unbatched else indices

    if idx.numel() and not tracing() and getattr(idx, "_ctx", None) is None:
        with no_grad():
            lo, hi = int(lg.amin(idx).item()), int(lg.amax(idx).item())
        if lo < 0 or hi >= plane:
            raise _index_error(op, lo, hi, plane, size)
    nb, c = x.shape[:2]
    flat = lg.reshape(x, (nb, c, math.prod(x.shape[2:])))
    base = lg.zeros((nb, c, plane), dtype=x._dtype)
    out = lg.scatter(base, 2, lg.reshape(idx, (nb, c, flat.shape[2])), flat)
    return _unbatch(lg.reshape(out, (nb, c) + size), unbatched)


def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of max_pool1d: each value written at its index, zeros elsewhere.
    Duplicate indices keep one of the writes."""
    return _max_unpoolnd(
        "max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size
    )


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of max_pool2d (indices are flat positions in each plane)."""
    return _max_unpoolnd(
        "max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size
    )


def max_unpool3d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of max_pool3d (indices are flat positions in each volume)."""
    return _max_unpoolnd(
        "max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size
    )


# --------------------------------------------------------------------------------------
# Average pooling
# --------------------------------------------------------------------------------------


def _avg_poolnd(
    op: str,
    n: int,
    input: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Tensor:
    x, unbatched = _batched(op, input, n)
    integer = x._dtype.kind in "iu"  # sums divided rounding toward zero, as torch
    if not (x._dtype.is_floating_point or x._dtype.is_complex or integer):
        raise TypeError(
            f"{op}: expected a floating point or integer input, got "
            f"{x._dtype.name} (shape {list(input.shape)})"
        )
    k = _ints(op, "kernel_size", kernel_size, n)
    s = _stride(op, stride, k, n)
    p = _ints(op, "padding", padding, n)
    if any(v <= 0 for v in k + s):
        raise ValueError(
            f"{op}: kernel_size and stride must be positive, got kernel_size="
            f"{list(k)}, stride={list(s)}"
        )
    if any(2 * p[i] > k[i] or p[i] < 0 for i in range(n)):
        raise RuntimeError(
            f"{op}: pad should be at most half of kernel size, but got "
            f"pad={list(p)} and kernel_size={list(k)}"
        )
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f"{op}: divisor must be not zero")
    out_size, extra = _geometry(op, x, k, s, p, (1,) * n, ceil_mode)
    xp = (
        lg.pad_dims(x, (0, 0) + p, (0, 0) + tuple(a + b for a, b in zip(p, extra)))
        if any(p) or any(extra)
        else x
    )
    # a window's sum is separable: sum the k taps of one dimension at a time (sum(k) adds
    # of shrinking slices, not prod(k) of full ones)
    total = xp
    for i in range(n):
        part = None
        for t in range(k[i]):
            piece = lg.slice_dim(total, 2 + i, t, t + s[i] * (out_size[i] - 1) + 1, s[i])
            part = piece if part is None else lg.add(part, piece)
        total = part
    mode = "trunc" if integer else None
    if divisor_override is not None:
        out = lg.div(
            total, divisor_override if integer else float(divisor_override), rounding_mode=mode
        )
    else:
        div = np.ones(())
        for i in range(n):
            div = np.multiply.outer(
                div, _divisors(x.shape[2 + i], out_size[i], k[i], s[i], p[i], count_include_pad)
            )
        out = lg.div(total, lg.tensor(div, dtype=total._dtype), rounding_mode=mode)
    return _unbatch(out, unbatched)


@composite_function
def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """The mean of each window of an (N, C, L) or (C, L) input; with count_include_pad the
    zero padding counts in the divisor."""
    return _avg_poolnd(
        "avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None
    )


@composite_function
def avg_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window of an (N, C, H, W) or (C, H, W) input (or the sum divided by
    `divisor_override`)."""
    return _avg_poolnd(
        "avg_pool2d",
        2,
        input,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


@composite_function
def avg_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window of an (N, C, D, H, W) or (C, D, H, W) input."""
    return _avg_poolnd(
        "avg_pool3d",
        3,
        input,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


# --------------------------------------------------------------------------------------
# Adaptive pooling
# --------------------------------------------------------------------------------------


def _float_input(op: str, x: Tensor) -> None:
    if not x._dtype.is_floating_point:
        raise TypeError(
            f"{op}: expected a floating point input, got {x._dtype.name} (shape {list(x.shape)})"
        )


def _adaptive_avg_poolnd(op: str, n: int, input: Tensor, output_size: Any) -> Tensor:
    """Averages over PyTorch's adaptive windows (start floor(i L / o), end ceil((i+1) L / o))
    as one small averaging matmul per spatial dimension."""
    x, unbatched = _batched(op, input, n)
    _float_input(op, x)
    sizes = tuple(x.shape[2:])
    out_size = _output_size(op, output_size, n, sizes)
    if out_size == sizes:
        return _unbatch(lg.mul(x, 1), unbatched)
    for i in range(n):
        if out_size[i] == sizes[i]:
            continue
        m = _adaptive_matrix(sizes[i], out_size[i], x._dtype)  # (out, size)
        x = lg.movedim(lg.matmul(lg.movedim(x, 2 + i, -1), lg.transpose(m, 0, 1)), -1, 2 + i)
    return _unbatch(x, unbatched)


@composite_function
def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of an (N, C, L) or (C, L) input to `output_size` windows."""
    return _adaptive_avg_poolnd("adaptive_avg_pool1d", 1, input, output_size)


@composite_function
def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of an (N, C, H, W) or (C, H, W) input to `output_size` (an int, a
    pair, None keeps a size)."""
    return _adaptive_avg_poolnd("adaptive_avg_pool2d", 2, input, output_size)


@composite_function
def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of an (N, C, D, H, W) or (C, D, H, W) input to `output_size`."""
    return _adaptive_avg_poolnd("adaptive_avg_pool3d", 3, input, output_size)


def _adaptive_positions(size: int, out: int) -> tuple[np.ndarray, int]:
    """(out, longest window) input positions of each adaptive window, the last position
    repeated to pad a shorter window (harmless to a max and to its first argmax)."""
    starts = [(i * size) // out for i in range(out)]
    ends = [-((-(i + 1) * size) // out) for i in range(out)]
    width = max(e - s for s, e in zip(starts, ends))
    pos = np.array(
        [[min(s + j, e - 1) for j in range(width)] for s, e in zip(starts, ends)], dtype=np.int64
    )
    return pos, width


def _adaptive_max_poolnd(
    op: str, n: int, input: Tensor, output_size: Any, return_indices: bool
) -> Any:
    x, unbatched = _batched(op, input, n)
    if x._dtype.is_complex or x._dtype is dt.bool_:
        raise RuntimeError(f"{op}: not implemented for {x._dtype.name}")
    sizes = tuple(x.shape[2:])
    out_size = _output_size(op, output_size, n, sizes)
    if any(v == 0 for v in sizes) and x.numel() == 0 and x.shape[0] * x.shape[1]:
        raise RuntimeError(
            f"{op}: Expected input to have non-zero size for non-batch "
            f"dimensions, but input has sizes {list(input.shape)}"
        )
    nb, c = x.shape[:2]
    gathered = x
    positions = []
    widths = []
    for i in range(n):
        pos, width = _adaptive_positions(sizes[i], out_size[i])
        positions.append(pos)
        widths.append(width)
        g = lg.index_select(gathered, 2 + 2 * i, lg.tensor(pos.reshape(-1)))
        shape = tuple(g.shape[: 2 + 2 * i]) + (out_size[i], width) + tuple(g.shape[3 + 2 * i :])
        gathered = lg.reshape(g, shape)
    # (N, C, o1, w1, o2, w2, ...) -> (N, C, o1, o2, ..., w1 * w2 * ...)
    perm = (0, 1) + tuple(2 + 2 * i for i in range(n)) + tuple(3 + 2 * i for i in range(n))
    windows = lg.reshape(lg.permute(gathered, perm), (nb, c) + out_size + (math.prod(widths),))
    with no_grad():
        tap = lg.argmax(windows, -1, keepdim=True)
    out = lg.squeeze(lg.take_along_dim(windows, tap, -1), -1)
    if not return_indices:
        return _unbatch(out, unbatched)
    # each window's flat position table, (o1, ..., on, w1 * ... * wn), then the chosen tap
    table = np.zeros(out_size + tuple(widths), dtype=np.int64)
    for i in range(n):
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = out_size[i], widths[i]
        table = table * sizes[i] + positions[i].reshape(shape)
    table = table.reshape(out_size + (-1,))
    with no_grad():
        full = lg.expand(lg.tensor(table), (nb, c) + table.shape)
        idx = lg.squeeze(lg.take_along_dim(full, tap, -1), -1)
    return _unbatch(out, unbatched), _unbatch(idx, unbatched)


@composite_function
def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of an (N, C, L) or (C, L) input over `output_size` adaptive windows."""
    return _adaptive_max_poolnd("adaptive_max_pool1d", 1, input, output_size, return_indices)


@composite_function
def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of an (N, C, H, W) or (C, H, W) input over adaptive windows."""
    return _adaptive_max_poolnd("adaptive_max_pool2d", 2, input, output_size, return_indices)


@composite_function
def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of an (N, C, D, H, W) or (C, D, H, W) input over adaptive windows."""
    return _adaptive_max_poolnd("adaptive_max_pool3d", 3, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """`adaptive_max_pool1d(..., return_indices=True)`."""
    return _adaptive_max_poolnd("adaptive_max_pool1d", 1, input, output_size, True)


def adaptive_max_pool2d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """`adaptive_max_pool2d(..., return_indices=True)`."""
    return _adaptive_max_poolnd("adaptive_max_pool2d", 2, input, output_size, True)


def adaptive_max_pool3d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = False
) -> tuple[Tensor, Tensor]:
    """`adaptive_max_pool3d(..., return_indices=True)`."""
    return _adaptive_max_poolnd("adaptive_max_pool3d", 3, input, output_size, True)


# --------------------------------------------------------------------------------------
# Power-average pooling
# --------------------------------------------------------------------------------------


def _lp_poolnd(
    op: str, n: int, input: Tensor, norm_type: float, kernel_size: Any, stride: Any, ceil_mode: bool
) -> Tensor:
    _tensor(op, "input", input)
    k = _ints(op, "kernel_size", kernel_size, n)
    avg = _avg_poolnd(op, n, lg.pow(input, norm_type), k, stride, 0, ceil_mode, True, None)
    # PyTorch's formula: the window mean times the kernel's size, then the 1/p-th power
    out = lg.mul(lg.sign(avg), lg.relu(lg.abs(avg)))
    return lg.pow(lg.mul(out, math.prod(k)), 1.0 / norm_type)


def lp_pool1d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """(sum over each window of x^p)^(1/p) over an (N, C, L) or (C, L) input."""
    return _lp_poolnd("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """(sum over each window of x^p)^(1/p) over an (N, C, H, W) or (C, H, W) input."""
    return _lp_poolnd("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """(sum over each window of x^p)^(1/p) over an (N, C, D, H, W) or (C, D, H, W) input."""
    return _lp_poolnd("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


# --------------------------------------------------------------------------------------
# Fractional max pooling
# --------------------------------------------------------------------------------------


def _fractional_max_poolnd(
    op: str,
    n: int,
    input: Tensor,
    kernel_size: Any,
    output_size: Any,
    output_ratio: Any,
    return_indices: bool,
    _random_samples: Tensor | None,
) -> Any:
    x, unbatched = _batched(op, input, n)
    _float_input(op, x)
    k = _ints(op, "kernel_size", kernel_size, n)
    sizes = tuple(x.shape[2:])
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = (
            (output_ratio,) * n if isinstance(output_ratio, (int, float)) else tuple(output_ratio)
        )
        if len(ratio) != n or not all(0 < r < 1 for r in ratio):
            raise ValueError(
                f"{op}: output_ratio must be {n} numbers in (0, 1), got {output_ratio!r}"
            )
        out_size = tuple(int(sizes[i] * ratio[i]) for i in range(n))
    else:
        out_size = _ints(op, "output_size", output_size, n)
    for i in range(n):
        if out_size[i] + k[i] - 1 > sizes[i]:
            raise RuntimeError(
                f"{op}: out_size[{i}] + pool_size[{i}] - 1 "
                f"({out_size[i] + k[i] - 1}) is too large for the input size "
                f"{sizes[i]} (input {list(input.shape)})"
            )
    nb, c = x.shape[:2]
    if _random_samples is None:
        u = lg.rand((nb, c, n), dtype=x._dtype)
    else:
        # PyTorch's checks, in its order: (at least N, C, n); rows past the batch unused
        u = _tensor(op, "_random_samples", _random_samples)
        if u.ndim != 3:
            raise RuntimeError(f"{op}: Expect _random_samples to have 3 dimensions, got {u.ndim}")
        if u.shape[0] < nb:
            raise RuntimeError(
                f"{op}: Expect _random_samples.size(0) no less then input "
                f"batch size ({u.shape[0]} < {nb})."
            )
        if u.shape[1] != c:
            raise RuntimeError(
                f"{op}: Expect _random_samples.size(1) equals to input channel "
                f"size ({u.shape[1]} != {c})."
            )
        if u.shape[2] != n:
            raise RuntimeError(
                f"{op}: Expect _random_samples.size(2) equals to {n}; got {u.shape[2]}."
            )
        if u.shape[0] > nb:
            u = lg.narrow(u, 0, 0, nb)
    with no_grad():
        flat = None
        for i in range(n):
            # PyTorch's sample order: (W, H) in 2-D, (D, H, W) in 3-D
            ui = lg.unsqueeze(lg.select(u, 2, n - 1 - i if n == 2 else i), -1)  # (N, C, 1)
            o = out_size[i]
            if o > 1:
                alpha = (sizes[i] - k[i]) / (o - 1)
                steps = lg.arange(o, dtype=u._dtype)
                starts = lg.sub(
                    lg.trunc(lg.mul(lg.add(steps, ui), alpha)), lg.trunc(lg.mul(ui, alpha))
                ).to(dt.int64)
                last = lg.eq(lg.arange(o), o - 1)
                starts = lg.where(last, sizes[i] - k[i], starts)
            else:
                starts = lg.full((nb, c, 1), sizes[i] - k[i], dtype=dt.int64)
            pos = lg.add(lg.unsqueeze(starts, -1), lg.arange(k[i]))  # (N, C, o, k)
            shape = (
                (nb, c)
                + tuple(out_size[j] if j == i else 1 for j in range(n))
                + tuple(k[j] if j == i else 1 for j in range(n))
            )
            pos = lg.reshape(pos, shape)
            flat = pos if flat is None else lg.add(lg.mul(flat, sizes[i]), pos)
        assert flat is not None
        flat = lg.reshape(lg.expand(flat, (nb, c) + out_size + k), (nb, c, math.prod(out_size + k)))
    windows = lg.gather(lg.reshape(x, (nb, c, math.prod(sizes))), 2, flat)
    windows = lg.reshape(windows, (nb, c) + out_size + (math.prod(k),))
    with no_grad():
        tap = lg.argmax(windows, -1, keepdim=True)
    out = lg.squeeze(lg.take_along_dim(windows, tap, -1), -1)
    if not return_indices:
        return _unbatch(out, unbatched)
    with no_grad():
        idx = lg.squeeze(
            lg.take_along_dim(lg.reshape(flat, (nb, c) + out_size + (math.prod(k),)), tap, -1), -1
        )
    return _unbatch(out, unbatched), _unbatch(idx, unbatched)


def fractional_max_pool2d(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """Max pooling over pseudo-random windows (Graham, 2014) of an (N, C, H, W) or (C, H, W)
    input: `_random_samples` (N, C, 2) in [0, 1) place the windows (drawn with `lg.rand`
    when not given, so the windows differ from PyTorch's for the same seed)."""
    return _fractional_max_poolnd(
        "fractional_max_pool2d",
        2,
        input,
        kernel_size,
        output_size,
        output_ratio,
        return_indices,
        _random_samples,
    )


def fractional_max_pool3d(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """Fractional max pooling of an (N, C, D, H, W) or (C, D, H, W) input;
    `_random_samples` is (N, C, 3)."""
    return _fractional_max_poolnd(
        "fractional_max_pool3d",
        3,
        input,
        kernel_size,
        output_size,
        output_ratio,
        return_indices,
        _random_samples,
    )


def fractional_max_pool2d_with_indices(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """`fractional_max_pool2d(..., return_indices=True)`."""
    return _fractional_max_poolnd(
        "fractional_max_pool2d",
        2,
        input,
        kernel_size,
        output_size,
        output_ratio,
        True,
        _random_samples,
    )


def fractional_max_pool3d_with_indices(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """`fractional_max_pool3d(..., return_indices=True)`."""
    return _fractional_max_poolnd(
        "fractional_max_pool3d",
        3,
        input,
        kernel_size,
        output_size,
        output_ratio,
        True,
        _random_samples,
    )
