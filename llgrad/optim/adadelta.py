"""Adadelta (Zeiler 2012) with PyTorch's update formulas."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..tensor import Tensor
from .optimizer import (
    Optimizer,
    add_scaled,
    check_lr,
    hyper,
    lazy_state,
    new_step,
    no_complex,
    scalar,
)


class Adadelta(Optimizer):
    """Per parameter with a gradient (PyTorch's single-tensor Adadelta):

        g = -grad if maximize else grad;  g += weight_decay * p
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p -= lr * delta

    State: `step` (float32 0-d), `square_avg` (v), `acc_delta` (u). `foreach`,
    `capturable`, `differentiable` are accepted and give the same values.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(
            params,
            dict(
                lr=lr,
                rho=rho,
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                capturable=capturable,
                foreach=foreach,
                differentiable=differentiable,
            ),
        )

    def _update(self, p: Tensor, group: Any) -> None:
        no_complex(self, p)
        state = lazy_state(self, p)
        if not state:
            state["step"] = new_step()
            state["square_avg"] = lg.zeros_like(p)
            state["acc_delta"] = lg.zeros_like(p)
        rho, eps, wd = group["rho"], group["eps"], group["weight_decay"]
        lr = scalar(hyper(group, "lr"))
        state["step"].add_(1)
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        if wd != 0:
            g = lg.add(g, p, alpha=wd)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).add_(lg.mul(lg.mul(g, g), 1 - rho))
        std = lg.sqrt(lg.add(square_avg, eps))
        delta = lg.mul(lg.div(lg.sqrt(lg.add(acc_delta, eps)), std), g)
        acc_delta.mul_(rho).add_(lg.mul(lg.mul(delta, delta), 1 - rho))
        add_scaled(p, delta, -lr)
