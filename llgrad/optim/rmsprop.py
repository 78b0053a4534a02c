"""RMSprop with PyTorch's update (optional momentum, centered variant, weight decay)."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tracer.tensor import state_not_ready, tracing
from .optimizer import Optimizer, add_scaled, check_lr, hyper, is_set


class RMSprop(Optimizer):
    """Per parameter with a gradient (PyTorch's single-tensor RMSprop):

    g = -grad if maximize else grad;  g += weight_decay * p
    v = alpha * v + (1 - alpha) * g * g
    centered:  m = lerp(m, g, 1 - alpha);  avg = sqrt(v - m * m) + eps
    else:      avg = sqrt(v) + eps
    momentum:  buf = momentum * buf + g / avg;  p -= lr * buf
    else:      p -= lr * g / avg
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        for name, value in (
            ("epsilon value", eps),
            ("momentum value", momentum),
            ("weight_decay value", weight_decay),
            ("alpha value", alpha),
        ):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                alpha=alpha,
                eps=eps,
                centered=centered,
                weight_decay=weight_decay,
                capturable=capturable,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
            ),
        )

    def _state(self, p: Tensor, group: Any) -> dict[str, Any]:
        state = self.state[p]
        if not state:
            if tracing():
                state_not_ready("RMSprop's state does not exist yet")
            state["step"] = lg.tensor(0.0, dtype=dt.float32)
            state["square_avg"] = lg.zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = lg.zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = lg.zeros_like(p)
        return state

    def _update(self, p: Tensor, group: Any) -> None:
        if p.is_complex():
            raise TypeError(
                f"RMSprop: complex parameters are not supported (parameter of "
                f"shape {list(p.shape)}, dtype {p.dtype.name})"
            )
        state = self._state(p, group)
        alpha, eps, lr = group["alpha"], group["eps"], hyper(group, "lr")
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            g = lg.add(g, p, alpha=group["weight_decay"])
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).add_(lg.mul(lg.mul(g, 1 - alpha), g))
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.copy_(lg.lerp(grad_avg, g, 1 - alpha))
            avg = lg.sqrt(lg.add(square_avg, lg.mul(lg.mul(grad_avg, -1.0), grad_avg)))
        else:
            avg = lg.sqrt(square_avg)
        avg = lg.add(avg, eps)
        if is_set(group, "momentum"):
            buf = state["momentum_buffer"]
            buf.mul_(hyper(group, "momentum")).add_(lg.div(g, avg))
            add_scaled(p, buf, -lr)
        else:
            p.add_(lg.div(lg.mul(g, -lr), avg))
