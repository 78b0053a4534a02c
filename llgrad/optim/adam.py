"""Adam and AdamW with PyTorch's update formulas (bias correction, optional AMSGrad)."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tracer.tensor import state_not_ready, tracing
from . import _fused
from .optimizer import Optimizer, check_fused, check_lr, hyper


class Adam(Optimizer):
    """Per parameter with a gradient, at step t (PyTorch's single-tensor Adam):

        g = -grad if maximize else grad
        p *= 1 - lr * wd              (decoupled, AdamW)   |   g += wd * p   (Adam)
        m = lerp(m, g, 1 - beta1);    v = beta2 * v + (1 - beta2) * g * g
        v_hat = max(v_hat, v)         (amsgrad; then v_hat replaces v below)
        denom = sqrt(v) / sqrt(1 - beta2**t) + eps
        p -= (lr / (1 - beta1**t)) * m / denom

    `foreach`, `fused`, `capturable` and `differentiable` are accepted and give the same
    values (one update path; a compiled training step fuses it); `differentiable=True`
    does not record the update for autograd.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        check_lr(lr)
        check_fused(type(self).__name__, fused, foreach, differentiable)
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
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                foreach=foreach,
                capturable=capturable,
                differentiable=differentiable,
                fused=fused,
                decoupled_weight_decay=decoupled_weight_decay,
            ),
        )

    def _init_state(self, p: Tensor, amsgrad: bool) -> dict[str, Any]:
        state = self.state[p]
        if not state or (amsgrad and "max_exp_avg_sq" not in state):
            if tracing():
                state_not_ready(f"{type(self).__name__}'s state does not exist yet")
        if not state:
            state["step"] = lg.tensor(0.0, dtype=dt.float32)
            state["exp_avg"] = lg.zeros_like(p)
            state["exp_avg_sq"] = lg.zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = lg.zeros_like(p)
        elif amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = lg.zeros_like(p)
        return state

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        if p._grad.is_complex() or p.is_complex():
            raise TypeError(
                f"{type(self).__name__}: complex parameters are not supported "
                f"(parameter of shape {list(p.shape)}, dtype {p.dtype.name})"
            )
        lr, (beta1, beta2), eps = hyper(group, "lr"), hyper(group, "betas"), group["eps"]
        wd, amsgrad = group["weight_decay"], group["amsgrad"]
        state = self._init_state(p, amsgrad)
        step_t = state["step"]
        if (
            group.__class__ is dict
            and _fused.numbers(lr, beta1, beta2, eps, wd)
            and _fused.eligible(
                p, p._grad, state["exp_avg"], state["exp_avg_sq"], state.get("max_exp_avg_sq")
            )
        ):
            # eager: one kernel per state tensor (`optim._fused`)
            step_t.add_(1)
            step = step_t.item()
            _fused.adam(
                p,
                p._grad,
                state["exp_avg"],
                state["exp_avg_sq"],
                state["max_exp_avg_sq"] if amsgrad else None,
                beta1=beta1,
                beta2=beta2,
                lr=lr,
                eps=eps,
                wd=wd,
                decoupled=group["decoupled_weight_decay"],
                maximize=group["maximize"],
                step_size=lr / (1 - beta1**step),
                bias_correction2_sqrt=(1 - beta2**step) ** 0.5,
            )
            return
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        step_t.add_(1)
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                g = lg.add(g, p, alpha=wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(lg.lerp(exp_avg, g, 1 - beta1))
        exp_avg_sq.mul_(beta2).add_(lg.mul(lg.mul(g, 1 - beta2), g))

        if tracing():
            # compiled step: the step count is a tensor of the graph, not a Python number
            step64 = step_t.to(dt.float64)
            bias_correction1 = lg.rsub(lg.pow(beta1, step64), 1)
            bias_correction2_sqrt = lg.sqrt(lg.rsub(lg.pow(beta2, step64), 1))
            step_size = lg.div(lr, bias_correction1)
        else:
            step = step_t.item()
            bias_correction1 = 1 - beta1**step
            bias_correction2_sqrt = (1 - beta2**step) ** 0.5
            step_size = lr / bias_correction1
        if amsgrad:
            best = state["max_exp_avg_sq"]
            best.copy_(lg.maximum(best, exp_avg_sq))
            second = best
        else:
            second = exp_avg_sq
        denom = lg.add(lg.div(lg.sqrt(second), bias_correction2_sqrt), eps)
        neg_step = -step_size if isinstance(step_size, float) else lg.neg(step_size)
        p.add_(lg.div(lg.mul(exp_avg, neg_step), denom))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): `p *= 1 - lr * wd` before the
    Adam step, instead of adding `wd * p` to the gradient. Default weight_decay 1e-2."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
