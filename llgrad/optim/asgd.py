"""Averaged SGD (Polyak & Juditsky) with PyTorch's update and state."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..ir import dtypes as dt
from ..tensor import Tensor
from .optimizer import (
    Optimizer,
    check_lr,
    hyper,
    lazy_state,
    maximum,
    new_step,
    no_complex,
    scalar,
    step_count,
)


class ASGD(Optimizer):
    """Per parameter with a gradient, at step t (PyTorch's single-tensor ASGD):

        g = -grad if maximize else grad;  g += weight_decay * p
        p *= 1 - lambd * eta;  p -= eta * g
        ax += (p - ax) * mu   (ax = p while mu == 1)
        eta = lr / (1 + lambd * lr * t)**alpha;  mu = 1 / max(1, t - t0)

    State: `step`, `eta`, `mu` (float32 0-d tensors, as PyTorch keeps them: `eta` and `mu`
    are read back rounded to float32), `ax` (the average). `foreach`, `capturable`,
    `differentiable` are accepted and give the same values.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(
            params,
            dict(
                lr=lr,
                lambd=lambd,
                alpha=alpha,
                t0=t0,
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
            state["eta"] = lg.tensor(float(scalar(group["lr"])), dtype=dt.float32)
            state["mu"] = lg.tensor(1.0, dtype=dt.float32)
            state["ax"] = lg.zeros_like(p)
        lambd, alpha, t0, wd = group["lambd"], group["alpha"], group["t0"], group["weight_decay"]
        lr = scalar(hyper(group, "lr"))
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        step_t, eta_t, mu_t, ax = state["step"], state["eta"], state["mu"], state["ax"]
        step_t.add_(1)
        if wd != 0:
            g = lg.add(g, p, alpha=wd)
        eta = step_count(eta_t)
        mu = step_count(mu_t)
        if isinstance(eta, Tensor):  # a traced step
            p.copy_(lg.sub(lg.mul(p, 1 - lambd * eta), lg.mul(g, eta)))
            ax.copy_(lg.where(mu != 1, lg.add(ax, lg.mul(lg.sub(p, ax), mu)), p))
        else:
            p.mul_(1 - lambd * eta)
            p.add_(g, alpha=-eta)
            if mu != 1:
                ax.add_(lg.mul(lg.sub(p, ax), mu))
            else:
                ax.copy_(p)
        step = step_count(step_t)
        for target, value in (
            (eta_t, lr / ((1 + lambd * lr * step) ** alpha)),
            (mu_t, 1 / maximum(1, step - t0)),
        ):
            if isinstance(value, Tensor):
                target.copy_(value)
            else:
                target.fill_(value)
