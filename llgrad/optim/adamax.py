"""Adamax (Adam with the infinity norm) with PyTorch's update formulas."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..tensor import Tensor
from .optimizer import (
    Optimizer,
    check_lr,
    hyper,
    lazy_state,
    new_step,
    no_complex,
    scalar,
    step_count,
)


class Adamax(Optimizer):
    """Per parameter with a gradient, at step t (PyTorch's single-tensor Adamax):

        g = -grad if maximize else grad;  g += weight_decay * p
        m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps)
        p -= lr / (1 - beta1**t) * m / u

    State: `step` (float32 0-d), `exp_avg`, `exp_inf`. `foreach`, `capturable` and
    `differentiable` are accepted and give the same values (one update path, which a
    compiled training step fuses); `differentiable=True` does not record the update.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
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
            state["exp_avg"] = lg.zeros_like(p)
            state["exp_inf"] = lg.zeros_like(p)
        beta1, beta2 = group["betas"]
        lr, eps, wd = scalar(hyper(group, "lr")), group["eps"], group["weight_decay"]
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        state["step"].add_(1)
        if wd != 0:
            g = lg.add(g, p, alpha=wd)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.copy_(lg.lerp(exp_avg, g, 1 - beta1))
        exp_inf.copy_(lg.maximum(lg.mul(exp_inf, beta2), lg.add(lg.abs(g), eps)))
        step = step_count(state["step"])
        clr = lr / (1 - beta1**step)
        p.add_(lg.mul(lg.div(exp_avg, exp_inf), -clr))
