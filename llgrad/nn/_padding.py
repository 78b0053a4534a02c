"""`pad` with PyTorch's four modes: constant, reflect, replicate and circular.

The non-constant modes read the input through one `index_select` per padded dimension with
the positions each mode maps an output element to (mirror about the edge elements, the edge
element itself, or the position modulo the size), so the gradient (an index-add) and the
compiled code come from that op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dispatch.apply import composite_function
from .. import functions as lg
from ..tensor import Tensor
from ._layers import pad as _pad_constant
from ._base import _tensor

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def _source_positions(mode: str, size: int, lo: int, hi: int) -> np.ndarray:
    """The input position each output position of one dimension reads."""
    j = np.arange(-lo, size + hi)
    if mode == "reflect":
        j = np.abs(j)
        return np.where(j >= size, 2 * (size - 1) - j, j)
    if mode == "replicate":
        return np.clip(j, 0, size - 1)
    start, kept = max(0, -lo), size - max(0, -lo) - max(0, -hi)  # crop, then wrap
    j = np.arange(-max(0, lo), kept + max(0, hi))
    return start + np.mod(j, kept)


@composite_function
def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last len(pad) // 2 dimensions; `pad` lists (before, after) pairs starting from
    the last dimension, as PyTorch; negative amounts crop. `mode`: 'constant' (with `value`,
    default 0), 'reflect' (mirror without repeating the edge), 'replicate' (repeat the edge)
    or 'circular' (wrap around). The non-constant modes pad the last 1, 2 or 3 dimensions of
    a (batched or unbatched) input, as PyTorch."""
    op = "pad"
    _tensor(op, "input", input)
    if mode not in _MODES:
        raise NotImplementedError(f"{op}: Unrecognised padding mode {mode}")
    if mode == "constant":
        return _pad_constant(input, pad, mode, value)
    if value is not None and value != 0:
        raise RuntimeError(f'{op}: Padding mode "{mode}" doesn\'t take in value argument')
    amounts = tuple(pad)
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in amounts) or len(amounts) % 2:
        raise ValueError(f"{op}: padding must be an even number of ints, got {list(amounts)}")
    if len(amounts) > 2 * input.ndim:
        raise RuntimeError(
            f"{op}: Padding length should be less than or equal to two times the "
            f"input dimension but got padding length {len(amounts)} and input "
            f"of dimension {input.ndim}"
        )
    dims = len(amounts) // 2
    if dims not in (1, 2, 3) or input.ndim not in (dims + 1, dims + 2):
        raise NotImplementedError(
            f"{op}: Padding size {len(amounts)} is not supported for {input.ndim}D input "
            f"tensor. Supported combinations for non-constant padding: 2D or 3D input with "
            f"padding size 2, 3D or 4D input with padding size 4, 4D or 5D input with "
            f"padding size 6"
        )
    x = input
    for k in range(dims):
        dim = input.ndim - 1 - k
        lo, hi = amounts[2 * k], amounts[2 * k + 1]
        size = input.shape[dim]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(
                f"{op}: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({lo}, {hi}) at dimension {dim} "
                f"of input {list(input.shape)}"
            )
        if mode == "circular" and (lo > size or hi > size):
            raise RuntimeError(
                f"{op}: Padding value causes wrapping around more than once "
                f"(padding ({lo}, {hi}) at dimension {dim} of input "
                f"{list(input.shape)})"
            )
        if size + lo + hi < 0 or (size == 0 and lo + hi > 0):
            raise RuntimeError(
                f"{op}: padding ({lo}, {hi}) at dimension {dim} of input "
                f"{list(input.shape)} gives an invalid size"
            )
        if lo == 0 and hi == 0:
            continue
        idx = _source_positions(mode, size, lo, hi)
        x = lg.index_select(x, dim, lg.tensor(idx.astype(np.int64)))
    return x if x is not input else lg.clone(input)
