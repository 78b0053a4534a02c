"""Adagrad with PyTorch's update (learning-rate decay, weight decay, initial accumulator)."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tracer.tensor import state_not_ready, tracing
from .optimizer import Optimizer, check_fused, check_lr, hyper


class Adagrad(Optimizer):
    """Per parameter with a gradient, at step t (PyTorch's single-tensor Adagrad):

        g = -grad if maximize else grad;  g += weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        sum += g * g;  p -= clr * g / (sqrt(sum) + eps)

    The state (`step`, `sum` = initial_accumulator_value) is made in the constructor, as
    PyTorch does, so a compiled training step compiles from its first call.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        check_lr(lr)
        check_fused("Adagrad", fused, foreach, differentiable)
        for name, value in (
            ("lr_decay value", lr_decay),
            ("weight_decay value", weight_decay),
            ("initial_accumulator_value value", initial_accumulator_value),
            ("epsilon value", eps),
        ):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                eps=eps,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
                fused=fused,
            ),
        )
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        if hasattr(self, "state"):
            group = self.param_groups[-1]
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> None:
        state = self.state[p]
        if not state:
            state["step"] = lg.tensor(0.0, dtype=dt.float32)
            state["sum"] = lg.full_like(p, group["initial_accumulator_value"])

    def _update(self, p: Tensor, group: Any) -> None:
        if p.is_complex():
            raise TypeError(
                f"Adagrad: complex parameters are not supported (parameter of "
                f"shape {list(p.shape)}, dtype {p.dtype.name})"
            )
        state = self.state[p]
        if not state:
            if tracing():
                state_not_ready("Adagrad's state does not exist yet")
            self._init_state(p, group)
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        step_t = state["step"]
        step_t.add_(1)
        if group["weight_decay"] != 0:
            g = lg.add(g, p, alpha=group["weight_decay"])
        lr, lr_decay = hyper(group, "lr"), group["lr_decay"]

        if tracing() or isinstance(lr, Tensor):
            # the step count (and maybe lr) are tensors of the graph, not Python numbers
            steps = lg.sub(step_t.to(dt.float64), 1.0)
            clr = lg.div(lr, lg.add(lg.mul(steps, lr_decay), 1.0))
        else:
            clr = lr / (1 + (step_t.item() - 1) * lr_decay)
        state_sum = state["sum"]
        state_sum.add_(lg.mul(g, g))
        std = lg.add(lg.sqrt(state_sum), group["eps"])
        p.add_(lg.div(lg.mul(g, -clr), std))
