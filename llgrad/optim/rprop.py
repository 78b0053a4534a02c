"""Rprop (resilient backpropagation) with PyTorch's update."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..tensor import Tensor
from .optimizer import Optimizer, check_lr, lazy_state, new_step, no_complex, scalar


class Rprop(Optimizer):
    """Per parameter with a gradient (PyTorch's single-tensor Rprop):

        g = -grad if maximize else grad
        s = sign(g * prev) mapped  + -> etaplus,  - -> etaminus,  0 -> 1
        step_size = clamp(step_size * s, *step_sizes)
        g = 0 where the sign flipped;  p -= sign(g) * step_size;  prev = g

    State: `step` (float32 0-d), `prev`, `step_size` (starts at lr). `foreach`,
    `capturable`, `differentiable` are accepted and give the same values.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(
            params,
            dict(
                lr=lr,
                etas=etas,
                step_sizes=step_sizes,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
                capturable=capturable,
            ),
        )

    def _update(self, p: Tensor, group: Any) -> None:
        no_complex(self, p)
        state = lazy_state(self, p)
        if not state:
            state["step"] = new_step()
            state["prev"] = lg.zeros_like(p)
            state["step_size"] = lg.full_like(p._grad, float(scalar(group["lr"])))
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        state["step"].add_(1)
        prev, step_size = state["prev"], state["step_size"]
        s = lg.sign(lg.mul(g, prev))
        flipped = lg.lt(s, 0)
        factor = lg.where(
            lg.gt(s, 0), etaplus, lg.where(flipped, etaminus, lg.where(lg.eq(s, 0), 1.0, s))
        )
        step_size.copy_(lg.clamp(lg.mul(step_size, factor.to(step_size.dtype)), lo, hi))
        g = lg.where(flipped, lg.zeros_like(g), g)
        p.sub_(lg.mul(lg.sign(g), step_size))
        prev.copy_(g)
