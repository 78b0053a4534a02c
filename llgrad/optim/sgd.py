"""Stochastic gradient descent with momentum, dampening, Nesterov, weight decay."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..tensor import Tensor
from ..tracer.tensor import state_not_ready, tracing
from .optimizer import Optimizer, add_scaled, check_fused, check_lr, hyper, is_set, plus_scaled


class SGD(Optimizer):
    """PyTorch's update, per parameter with a gradient:

        g = -grad if maximize else grad;  g += weight_decay * p
        buf = g (first step) | momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf  (when momentum != 0)
        p -= lr * g

    `foreach`, `fused` and `differentiable` are accepted and give the same values (llgrad
    has one update path; a compiled training step fuses it); `differentiable=True` does
    not record the update for autograd.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float | Tensor = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_lr(lr)
        check_fused("SGD", fused, foreach, differentiable)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
                foreach=foreach,
                differentiable=differentiable,
                fused=fused,
            ),
        )

    def _update(self, p: Tensor, group: Any) -> None:
        g = p._grad
        if group["maximize"]:
            g = lg.neg(g)
        if group["weight_decay"] != 0:
            g = lg.add(g, p, alpha=group["weight_decay"])
        if is_set(group, "momentum"):
            momentum = hyper(group, "momentum")
            state = self.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                if tracing():
                    state_not_ready("SGD's momentum buffer does not exist yet")
                buf = g.detach().clone()
                state["momentum_buffer"] = buf
            else:
                buf.mul_(momentum).add_(g, alpha=1 - group["dampening"])
            g = plus_scaled(g, buf, momentum) if group["nesterov"] else buf
        add_scaled(p, g, -hyper(group, "lr"))
