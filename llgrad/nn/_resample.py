"""Resampling: `interpolate` (and the deprecated `upsample*`), `grid_sample`, `affine_grid`,
`pixel_shuffle`/`pixel_unshuffle` and `fold`/`unfold`.

`interpolate` is separable: along each spatial dimension every output position reads a few
input positions (`index_select`) and weighs them (nearest: one with weight 1, linear: two,
cubic: four with PyTorch's A = -0.75 convolution), with PyTorch's source-index rules
(align_corners, the scale from `scale_factor` unless recomputed, clamping). `grid_sample`
gathers the taps around each grid point from the flattened planes and weighs them with
weights computed from the grid, so gradients flow to the input and to the grid. All are
compositions: autograd, forward mode and `lg.compile` come from the ops they use.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import no_grad
from ..functions.layout import shuffle, shuffle_direct
from ..ir import dtypes as dt
from ..ops import nn as nnops
from ..tensor import Tensor
from ._base import _tensor
from ._layers import _ints
from ._pooling import _adaptive_avg_poolnd

__all__ = [
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "grid_sample",
    "affine_grid",
    "pixel_shuffle",
    "pixel_unshuffle",
    "fold",
    "unfold",
]

_CUBIC_A = -0.75
_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")


# --------------------------------------------------------------------------------------
# pixel_shuffle / pixel_unshuffle
# --------------------------------------------------------------------------------------


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) -> (*, C, H r, W r): each group of r^2 channels becomes an r x r
    block of pixels. (A call seen before that records nothing takes the direct path of
    `functions.layout.shuffle_direct`.)"""
    key = (
        (pixel_shuffle, input._lkey, upscale_factor)
        if input.__class__ is Tensor and upscale_factor.__class__ is int
        else None
    )
    out = shuffle_direct(key, input) if key is not None else None
    if out is not None:
        return out
    op = "pixel_shuffle"
    _tensor(op, "input", input)
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            f"{op} expects input to have at least 3 dimensions, but got input "
            f"with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"{op} expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(
            f"{op} expects its input's 'channel' dimension to be divisible by "
            f"the square of upscale_factor, but input.size(-3)={c} is not "
            f"divisible by {r * r}"
        )
    k = len(lead)
    return shuffle(
        key,
        input,
        tuple(lead) + (c // (r * r), r, r, h, w),
        tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2),
        tuple(lead) + (c // (r * r), h * r, w * r),
    )


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) -> (*, C r^2, H, W): the inverse of `pixel_shuffle` (with its
    direct path)."""
    key = (
        (pixel_unshuffle, input._lkey, downscale_factor)
        if input.__class__ is Tensor and downscale_factor.__class__ is int
        else None
    )
    out = shuffle_direct(key, input) if key is not None else None
    if out is not None:
        return out
    op = "pixel_unshuffle"
    _tensor(op, "input", input)
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            f"{op} expects input to have at least 3 dimensions, but got input "
            f"with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"{op} expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(
            f"{op} expects height and width to be divisible by "
            f"downscale_factor, but input.size(-2)={h} and input.size(-1)={w} "
            f"are not divisible by {r}"
        )
    k = len(lead)
    return shuffle(
        key,
        input,
        tuple(lead) + (c, h // r, r, w // r, r),
        tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3),
        tuple(lead) + (c * r * r, h // r, w // r),
    )


# --------------------------------------------------------------------------------------
# interpolate
# --------------------------------------------------------------------------------------


def _source(
    mode: str, size: int, out: int, scale: float | None, align_corners: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(out, taps) input positions and weights of one dimension."""
    dst = np.arange(out, dtype=np.float64)
    if mode in ("nearest", "nearest-exact"):
        # PyTorch computes these positions in float32
        s = (
            np.float32(1.0 / scale)
            if scale is not None and scale > 0
            else np.float32(size) / np.float32(out)
        )
        d32 = dst.astype(np.float32) + (np.float32(0.5) if mode == "nearest-exact" else 0)
        src = np.minimum(np.floor(d32 * s).astype(np.int64), size - 1)
        return src[:, None], np.ones((out, 1))
    if align_corners:
        s = (size - 1) / (out - 1) if out > 1 else 0.0
        real = s * dst
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else size / out
        real = s * (dst + 0.5) - 0.5
    if mode == "bicubic":
        base = np.floor(real)
        t = real - base
        a = _CUBIC_A

        def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
            return ((a + 2) * x - (a + 3)) * x * x + 1

        def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
            return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

        weights = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1)
        pos = base.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
        return np.clip(pos, 0, size - 1), weights
    real = np.maximum(real, 0.0)
    i0 = real.astype(np.int64)
    i1 = np.where(i0 < size - 1, i0 + 1, i0)
    lam = real - i0
    return np.stack([i0, i1], 1), np.stack([1 - lam, lam], 1)


def _resample_dim(x: Tensor, dim: int, pos: np.ndarray, weights: np.ndarray) -> Tensor:
    """x along `dim` replaced by sum_t weights[:, t] * x[pos[:, t]]."""
    out, taps = pos.shape
    g = lg.index_select(x, dim, lg.tensor(pos.reshape(-1)))
    if taps == 1:
        return g
    shape = tuple(g.shape[:dim]) + (out, taps) + tuple(g.shape[dim + 1 :])
    g = lg.reshape(g, shape)
    wshape = [1] * len(shape)
    wshape[dim], wshape[dim + 1] = out, taps
    w = lg.tensor(weights.reshape(wshape), dtype=x._dtype)
    return lg.sum(lg.mul(g, w), dim + 1)


def _numbers(op: str, name: str, v: Any, n: int, kind: type) -> tuple[Any, ...]:
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(
                f"{op}: Input and {name} must have the same number of spatial "
                f"dimensions, but got input with spatial dimensions of "
                f"{n} and {name} of {list(v)}. Please provide input tensor in "
                f"(N, C, d1, d2, ...,dK) format and {name} in (o1, o2, ...,oK) "
                f"format."
            )
        return tuple(kind(a) for a in v)
    return (kind(v),) * n


@composite_function
def interpolate(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dimensions of an (N, C, *spatial) input to `size` (or
    floor(input size * scale_factor)). Modes: 'nearest', 'nearest-exact', 'linear' (3-D),
    'bilinear'/'bicubic' (4-D), 'trilinear' (5-D), 'area' (adaptive average pooling).
    llgrad differs from PyTorch: `antialias=True` raises (not implemented)."""
    op = "interpolate"
    _tensor(op, "input", input)
    if mode not in _MODES:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported "
            f"(got {input.ndim}D) for the modes: nearest | linear | "
            f"bilinear | bicubic | trilinear | area | nearest-exact "
            f"(got {mode})"
        )
    n = input.ndim - 2
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating "
                "modes: linear | bilinear | bicubic | trilinear"
            )
        align_corners = False
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise ValueError(
            f"{op}: antialias=True is not implemented in llgrad (mode {mode!r});"
            f" use antialias=False"
        )
    if n < 1:
        raise ValueError(
            f"{op}: Input Error: Only 3D, 4D and 5D input Tensors supported (got "
            f"{input.ndim}D) for the modes: nearest | linear | bilinear | bicubic"
            f" | trilinear | area | nearest-exact (got {mode})"
        )
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    sizes = tuple(input.shape[2:])
    scales: tuple[float | None, ...]
    if size is not None:
        out_size = _numbers(op, "output_size", size, n, int)
        scales = (None,) * n
    elif scale_factor is not None:
        sf = _numbers(op, "scale_factor", scale_factor, n, float)
        out_size = tuple(int(math.floor(float(s) * f)) for s, f in zip(sizes, sf))
        scales = (None,) * n if recompute_scale_factor else sf
    else:
        raise ValueError("either size or scale_factor should be defined")
    want = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(mode)
    if want is not None and n != want:
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs {want + 2}D input"
        )
    if n > 3:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported "
            f"(got {input.ndim}D) for the modes: nearest | linear | "
            f"bilinear | bicubic | trilinear | area | nearest-exact "
            f"(got {mode})"
        )
    if any(o <= 0 for o in out_size):
        raise RuntimeError(
            f"{op}: Input and output sizes should be greater than 0, but got "
            f"input ({', '.join(map(str, sizes))}) output "
            f"({', '.join(map(str, out_size))})"
        )
    if mode == "area":
        return _adaptive_avg_poolnd(f"adaptive_avg_pool{n}d", n, input, out_size)
    if not (input._dtype.is_floating_point or mode.startswith("nearest")):
        raise RuntimeError(f'{op}: "upsample_{mode}" not implemented for {input._dtype.name}')
    x = input
    for i in range(n):
        pos, weights = _source(mode, sizes[i], out_size[i], scales[i], align_corners)
        x = _resample_dim(x, 2 + i, pos, weights)
    return x if x is not input else lg.clone(input)


def upsample(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """Deprecated alias of `interpolate` (warns as PyTorch)."""
    warnings.warn(
        "`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode, align_corners)


@composite_function
def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: `interpolate(..., mode='nearest')`."""
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode="nearest")


@composite_function
def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: `interpolate(..., mode='bilinear', align_corners=True)`."""
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# --------------------------------------------------------------------------------------
# grid_sample / affine_grid
# --------------------------------------------------------------------------------------

_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to "
    "align_corners=False since 1.3.0. Please specify align_corners=True if the "
    "old behavior is desired. See the documentation of grid_sample for details."
)


def _clip(c: Tensor, size: int) -> Tensor:
    """c clamped to [0, size - 1], with a zero gradient at and beyond the bounds (PyTorch's
    clip_coordinates_set_grad)."""
    return lg.where(lg.le(c, 0), 0.0, lg.where(lg.ge(c, size - 1), float(size - 1), c))


def _reflect(c: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """c reflected into [twice_low / 2, twice_high / 2] (PyTorch's reflect_coordinates)."""
    if twice_low == twice_high:
        return lg.mul(c, 0.0)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    d = lg.abs(lg.sub(c, lo))
    extra = lg.fmod(d, span)
    with no_grad():
        even = lg.eq(lg.remainder(lg.floor(lg.div(d, span)), 2), 0)
    return lg.where(even, lg.add(extra, lo), lg.add(lg.neg(extra), span + lo))


def _coordinates(c: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    if padding_mode == "border":
        return _clip(c, size)
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return _clip(c, size)
    return c


def _unnormalize(g: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return lg.mul(lg.add(g, 1.0), (size - 1) / 2)
    return lg.div(lg.sub(lg.mul(lg.add(g, 1.0), size), 1.0), 2)


@composite_function
def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """Sample an (N, C, H, W) input at the (N, Ho, Wo, 2) grid's (x, y) points in [-1, 1]
    (or a 5-D input at an (N, Do, Ho, Wo, 3) grid's (x, y, z)), with mode 'bilinear'
    ('trilinear' in 5-D), 'nearest' (ties to even) or 'bicubic' (4-D), and padding_mode
    'zeros', 'border' or 'reflection'. Differentiable in the input and the grid."""
    op = "grid_sample"
    _tensor(op, "input", input)
    _tensor(op, "grid", grid)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
            f"'nearest' or 'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
            f"'border', or 'reflection', but got: '{padding_mode}'"
        )
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=2)
        align_corners = False
    n = input.ndim - 2
    if (
        input.ndim not in (4, 5)
        or grid.ndim != input.ndim
        or grid.shape[-1] != n
        or grid.shape[0] != input.shape[0]
    ):
        raise RuntimeError(
            f"{op}: expected a 4-D input with an (N, H, W, 2) grid or a 5-D "
            f"input with an (N, D, H, W, 3) grid of the same batch size, got "
            f"input {list(input.shape)} and grid {list(grid.shape)}"
        )
    if mode == "bicubic" and n != 2:
        raise RuntimeError(f"{op}: bicubic interpolation only supports 4D input")
    if grid._dtype is not input._dtype or not input._dtype.is_floating_point:
        raise RuntimeError(
            f"{op}: expected input and grid to have the same floating point "
            f"dtype, but input has {input._dtype.name} and grid has "
            f"{grid._dtype.name}"
        )
    nb, c = input.shape[:2]
    sizes = tuple(input.shape[2:])  # (H, W) or (D, H, W)
    out_sp = tuple(grid.shape[1:-1])
    points = math.prod(out_sp)
    flat_in = lg.reshape(input, (nb, c, math.prod(sizes)))
    # coordinate k of the grid indexes spatial dimension n - 1 - k (x -> W, y -> H, z -> D)
    coords = [
        _unnormalize(
            lg.reshape(lg.select(grid, -1, n - 1 - i), (nb, points)), sizes[i], align_corners
        )
        for i in range(n)
    ]

    def tap(pos: list[Tensor], weight: Tensor | None) -> Tensor:
        """weight * input at integer positions `pos` (N, P) per dim; zero outside."""
        with no_grad():
            inside = None
            flat = None
            for i in range(n):
                ok = lg.logical_and(lg.ge(pos[i], 0), lg.le(pos[i], sizes[i] - 1))
                inside = ok if inside is None else lg.logical_and(inside, ok)
                p = lg.clamp(pos[i], 0, sizes[i] - 1)
                flat = p if flat is None else lg.add(lg.mul(flat, sizes[i]), p)
            assert flat is not None and inside is not None
            index = lg.expand(lg.unsqueeze(flat, 1), (nb, c, points))
        vals = lg.gather(flat_in, 2, index)
        w = inside.to(input._dtype) if weight is None else lg.where(inside, weight, 0.0)
        return lg.mul(vals, lg.unsqueeze(w, 1))

    total = None
    if mode == "bicubic":
        with no_grad():
            base = [lg.floor(ci) for ci in coords]
            base_i = [b.to(dt.int64) for b in base]
        ts = [lg.sub(ci, bi) for ci, bi in zip(coords, base)]
        coef = [_cubic_weights(t) for t in ts]
        for a in range(4):
            for b in range(4):
                pos = []
                for i, off in enumerate((a, b)):
                    with no_grad():
                        q = lg.add(base_i[i], off - 1).to(input._dtype)
                        q = _coordinates(q, sizes[i], padding_mode, align_corners)
                        pos.append(q.to(dt.int64))
                piece = tap(pos, lg.mul(coef[0][a], coef[1][b]))
                total = piece if total is None else lg.add(total, piece)
    else:
        coords = [
            _coordinates(ci, sizes[i], padding_mode, align_corners) for i, ci in enumerate(coords)
        ]
        if mode == "nearest":
            with no_grad():
                pos = [lg.round(ci).to(dt.int64) for ci in coords]
            # a zero gradient for the grid, as PyTorch gives (values: exactly 1)
            zero = lg.mul(lg.sub(coords[0], coords[0].detach()), 0.0)
            total = tap(pos, lg.add(zero, 1.0) if coords[0].requires_grad else None)
        else:
            with no_grad():
                lows = [lg.floor(ci) for ci in coords]
                lows_i = [lo.to(dt.int64) for lo in lows]
            fr = [lg.sub(ci, lo) for ci, lo in zip(coords, lows)]
            for corner in np.ndindex(*(2,) * n):
                weight = None
                pos = []
                for i, hi in enumerate(corner):
                    w = fr[i] if hi else lg.rsub(fr[i], 1.0)
                    weight = w if weight is None else lg.mul(weight, w)
                    with no_grad():
                        pos.append(lg.add(lows_i[i], 1) if hi else lows_i[i])
                piece = tap(pos, weight)
                total = piece if total is None else lg.add(total, piece)
    assert total is not None
    return lg.reshape(total, (nb, c) + out_sp)


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """PyTorch's cubic convolution coefficients (A = -0.75) for offsets -1, 0, 1, 2."""
    a = _CUBIC_A

    def near(x: Tensor) -> Tensor:
        return lg.add(lg.mul(lg.mul(lg.sub(lg.mul(x, a + 2), a + 3), x), x), 1.0)

    def far(x: Tensor) -> Tensor:
        inner = lg.add(lg.mul(lg.sub(lg.mul(x, a), 5 * a), x), 8 * a)
        return lg.sub(lg.mul(inner, x), 4 * a)

    return [far(lg.add(t, 1.0)), near(t), near(lg.rsub(t, 1.0)), far(lg.rsub(t, 2.0))]


def _base_coords(steps: int, align_corners: bool) -> np.ndarray:
    if steps <= 1:
        return np.zeros(max(steps, 0))
    v = np.linspace(-1.0, 1.0, steps)
    return v if align_corners else v * (steps - 1) / steps


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """The sampling grid of an affine transform: theta (N, 2, 3) and size (N, C, H, W) give
    (N, H, W, 2) points theta @ (x, y, 1); theta (N, 3, 4) and a 5-D size give
    (N, D, H, W, 3)."""
    op = "affine_grid"
    _tensor(op, "theta", theta)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=2)
        align_corners = False
    size = tuple(int(s) for s in size)
    if not theta._dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta._dtype.name}")
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ValueError(
                f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                f"{list(size)}. Got {list(theta.shape)}."
            )
        spatial = size[2:]
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ValueError(
                f"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                f"{list(size)}. Got {list(theta.shape)}."
            )
        spatial = size[2:]
    else:
        raise NotImplementedError(
            f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
            f"affine transforms, respectively. Got size {list(size)}."
        )
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {list(size)}")
    if theta.shape[0] != size[0]:
        raise ValueError(
            f"{op}: theta has {theta.shape[0]} matrices but size asks for a batch of {size[0]}"
        )
    n = len(spatial)
    axes = [_base_coords(s, align_corners) for s in spatial]  # (D,) H, W
    mesh = np.meshgrid(*axes, indexing="ij")
    # the last coordinate column is x (width), then y, then z; then a column of ones
    cols = [mesh[n - 1 - k] for k in range(n)] + [np.ones(spatial)]
    base = lg.tensor(np.stack(cols, -1).reshape(1, -1, n + 1), dtype=theta._dtype)
    grid = lg.matmul(base, lg.transpose(theta, 1, 2))  # (N, prod, n)
    return lg.reshape(grid, (size[0],) + tuple(spatial) + (n,))


# --------------------------------------------------------------------------------------
# fold / unfold
# --------------------------------------------------------------------------------------


def _block_args(
    op: str, kernel_size: Any, dilation: Any, padding: Any, stride: Any
) -> tuple[tuple[int, ...], ...]:
    k = _ints(op, "kernel_size", kernel_size, 2)
    d = _ints(op, "dilation", dilation, 2)
    p = _ints(op, "padding", padding, 2)
    s = _ints(op, "stride", stride, 2)
    if any(v <= 0 for v in k + d + s) or any(v < 0 for v in p):
        raise RuntimeError(
            f"{op}: kernel_size, dilation and stride must be positive and "
            f"padding non-negative, got kernel_size={list(k)}, "
            f"dilation={list(d)}, padding={list(p)}, stride={list(s)}"
        )
    return k, d, p, s


@composite_function
def unfold(
    input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """im2col: the sliding blocks of an (N, C, H, W) or (C, H, W) input as
    (N, C * kH * kW, L) columns (channel-major, as PyTorch)."""
    op = "unfold"
    _tensor(op, "input", input)
    if input.ndim not in (3, 4):
        raise NotImplementedError(
            f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)"
        )
    k, d, p, s = _block_args(op, kernel_size, dilation, padding, stride)
    unbatched = input.ndim == 3
    x = lg.unsqueeze(input, 0) if unbatched else input
    nb, c, h, w = x.shape
    out = tuple(
        nnops.window_geometry(size, kk, ss, pp, dd)
        for size, kk, ss, pp, dd in zip((h, w), k, s, p, d)
    )
    if any(o <= 0 for o in out):
        raise RuntimeError(
            f"{op}: Given input with spatial size ({h}, {w}), kernel_size="
            f"{list(k)}, dilation={list(d)}, padding={list(p)}, calculated "
            f"shape of the array of sliding blocks as ({out[0]}, {out[1]}), "
            f"but its components must be at least one."
        )
    xp = lg.pad_dims(x, (0, 0) + p, (0, 0) + p) if any(p) else x
    cols = nnops.im2col(lg, xp, k, s, d, out)  # (N, C, K, OH, OW)
    cols = lg.reshape(cols, (nb, c * k[0] * k[1], out[0] * out[1]))
    return lg.squeeze(cols, 0) if unbatched else cols


def fold(
    input: Tensor,
    output_size: Any,
    kernel_size: Any,
    dilation: Any = 1,
    padding: Any = 0,
    stride: Any = 1,
) -> Tensor:
    """col2im: sum (N, C * kH * kW, L) or (C * kH * kW, L) columns of sliding blocks into an
    (N, C, *output_size) tensor (overlapping values add), the adjoint of `unfold`."""
    op = "fold"
    _tensor(op, "input", input)
    if input.ndim not in (2, 3):
        raise NotImplementedError(
            f"Input Error: Only unbatched (2D) or batched (3D) input "
            f"Tensors are supported (got {input.ndim}D)"
        )
    size = _ints(op, "output_size", output_size, 2)
    k, d, p, s = _block_args(op, kernel_size, dilation, padding, stride)
    unbatched = input.ndim == 2
    x = lg.unsqueeze(input, 0) if unbatched else input
    nb, ck, length = x.shape
    kk = k[0] * k[1]
    if ck % kk:
        raise RuntimeError(
            f"{op}: Expected size of input's dimension 1 to be divisible by the "
            f"product of kernel_size, but got input.size(1)={ck} and "
            f"kernel_size={list(k)}"
        )
    out = tuple(
        nnops.window_geometry(sz, kq, sq, pq, dq) for sz, kq, sq, pq, dq in zip(size, k, s, p, d)
    )
    if out[0] * out[1] != length or any(o <= 0 for o in out):
        raise RuntimeError(
            f"{op}: Given output_size={list(size)}, kernel_size={list(k)}, "
            f"dilation={list(d)}, padding={list(p)}, stride={list(s)}, expected "
            f"size of input's dimension 2 to match the calculated number of "
            f"sliding blocks {out[0]} * {out[1]} = {out[0] * out[1]}, but got "
            f"input.size(2)={length}."
        )
    c = ck // kk
    cols = lg.reshape(x, (nb, c, kk) + out)
    padded = (size[0] + 2 * p[0], size[1] + 2 * p[1])
    full = nnops.col2im(lg, cols, padded, k, s, d)
    res = (
        lg.slice_all(
            full, (0, 0, p[0], p[1]), (nb, c, p[0] + size[0], p[1] + size[1]), (1, 1, 1, 1)
        )
        if any(p)
        else full
    )
    return lg.squeeze(res, 0) if unbatched else res
