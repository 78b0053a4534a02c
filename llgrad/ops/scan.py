"""Scans: `cumsum` as a composite op.

The decomposition is a log-step (Hillis-Steele) scan: ceil(log2 n) rounds, each adding
the running sums shifted by 1, 2, 4, ... positions along the axis (the shift is a pad of
a slice), so it is made only of elementwise and movement ops and fuses like any other
elementwise work in compiled code. It does O(n log n) additions where a sequential scan
does n, and rounds differently (by a tree, not left to right). The vjp is the reversed
cumulative sum of the cotangent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType, normalize_axis


def _infer_cumsum(types: tuple[TensorType, ...], axis: int) -> TensorType:
    (t,) = types
    normalize_axis(axis, max(t.ndim, 1), "cumsum")
    return t


def shifted(F: Any, x: Any, axis: int, shift: int, fill: Any) -> Any:
    """`x` moved `shift` places forward along `axis`, `fill` entering at the front."""
    n = x._shape[axis]
    lows = [0] * x.ndim
    lows[axis] = shift
    kept = F.slice_dim(x, axis, 0, n - shift)
    return F.pad_dims(kept, tuple(lows), (0,) * x.ndim, None, fill)


def log_step_scan(F: Any, x: Any, axis: int, combine: Any, identity: Any) -> Any:
    """The inclusive scan of `x` along `axis` under `combine` (associative)."""
    if x.ndim == 0:
        return x
    axis = normalize_axis(axis, x.ndim, "scan")
    shift = 1
    while shift < x._shape[axis]:
        x = combine(x, shifted(F, x, axis, shift, identity))
        shift *= 2
    return x


def _decompose_cumsum(F: Any, x: Any, axis: int) -> Any:
    return log_step_scan(F, x, axis, F.add, 0)


def _vjp_cumsum(ctx: Any, g: Any, axis: int) -> Any:
    F = ctx.F
    if g.ndim == 0:
        return g
    return F.flip(F.cumsum(F.flip(g, (axis,)), axis), (axis,))


def _ref_cumsum(x: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:
        return x.copy()
    return np.cumsum(x, axis=axis, dtype=x.dtype)


register(
    OpDef(
        "cumsum",
        Group.COMPOSITE,
        1,
        attrs=(Attr("axis", AttrKind.INT, 0),),
        infer=_infer_cumsum,
        reference=_ref_cumsum,
        decompose=_decompose_cumsum,
        vjp=_vjp_cumsum,
        backward_name="CumsumBackward0",
        saves="",
        eager_compile=True,
    )
)
