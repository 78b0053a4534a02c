"""Gradient clipping with PyTorch's formulas.

`clip_grad_norm_` scales every gradient by `min(1, max_norm / (total_norm + 1e-6))`, where
`total_norm` is the norm of the vector of all gradients (computed as the norm of the
per-gradient norms, which is the same number); it multiplies even when the factor is 1,
as PyTorch does, so results agree bit for bit. Written with tensor operations only, so it
traces into a compiled training step (except `error_if_nonfinite=True`, which has to read
the norm's value: a graph break).
"""

from __future__ import annotations

import math
from typing import Iterable

from ... import functions as lg
from ...dispatch.grad_mode import no_grad
from ...ir.promotion import promote
from ...tensor import Tensor


def _tensors(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def _norm_type(norm_type: float | str) -> float:
    if isinstance(norm_type, str):
        if norm_type not in ("inf", "-inf"):
            raise ValueError(f"norm_type must be a number or 'inf', got {norm_type!r}")
        return float(norm_type)
    return float(norm_type)


def get_total_norm(
    tensors: Tensor | Iterable[Tensor],
    norm_type: float | str = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The `norm_type` norm of all `tensors` taken together (as if concatenated)."""
    ts = [t for t in _tensors(tensors) if t is not None]
    p = _norm_type(norm_type)
    if not ts:
        return lg.tensor(0.0)
    with no_grad():
        if p == math.inf:
            norms = [lg.amax(lg.abs(t)) if t.numel() else lg.zeros((), dtype=t.dtype) for t in ts]
            total = lg.amax(lg.stack(_common_dtype(norms)))
        elif p == -math.inf:
            norms = [lg.amin(lg.abs(t)) for t in ts]
            total = lg.amin(lg.stack(_common_dtype(norms)))
        else:
            norms = [lg.norm(t, p) for t in ts]
            total = lg.norm(lg.stack(_common_dtype(norms)), p)
        if error_if_nonfinite and not bool(lg.isfinite(total).item()):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from "
                f"`parameters` is non-finite, so it cannot be clipped. To "
                f"disable this error and scale the gradients by the non-finite "
                f"norm anyway, set `error_if_nonfinite=False`"
            )
    return total


def _common_dtype(norms: list[Tensor]) -> list[Tensor]:
    """PyTorch stacks per-gradient norms of mixed dtypes in their promoted dtype."""
    d = promote(norms)
    return [n if n.dtype is d else n.to(d) for n in norms]


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float | str = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients of `parameters` in place so that their total norm is at most
    `max_norm`; returns the total norm before clipping (a 0-d tensor)."""
    params = _tensors(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if not grads:
        return total
    with no_grad():
        coef = lg.clamp(lg.div(float(max_norm), lg.add(total, 1e-6)), max=1.0)
        for g in grads:
            g.mul_(coef if coef.dtype is g.dtype else coef.to(g.dtype))
    return total


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient of `parameters` into [-clip_value, clip_value] in place."""
    v = float(clip_value)
    with no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.clamp_(-v, v)
