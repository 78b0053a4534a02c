"""NAdam (Adam with Nesterov momentum, Dozat 2016) and RAdam (rectified Adam, Liu et al.
2019) with PyTorch's update formulas."""

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
    new_step,
    no_complex,
    scalar,
    step_count,
)


def _check_adam_like(eps: float, betas: tuple[float, float], weight_decay: float) -> None:
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class NAdam(Optimizer):
    """Per parameter with a gradient, at step t (PyTorch's single-tensor NAdam):

        g = -grad if maximize else grad
        p *= 1 - lr * wd  (decoupled_weight_decay)  |  g += wd * p
        mu_t = beta1 * (1 - 0.96**(t * momentum_decay) / 2);  mu_{t+1} likewise
        mu_product *= mu_t
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p -= lr * (1 - mu_t) / (1 - mu_product) * g / denom
        p -= lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom

    State: `step` and `mu_product` (float32 0-d, as PyTorch keeps them), `exp_avg`,
    `exp_avg_sq`. `foreach`, `capturable`, `differentiable` are accepted, same values.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        _check_adam_like(eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                momentum_decay=momentum_decay,
                decoupled_weight_decay=decoupled_weight_decay,
                maximize=maximize,
                foreach=foreach,
                capturable=capturable,
                differentiable=differentiable,
            ),
        )

    def _update(self, p: Tensor, group: Any) -> None:
        no_complex(self, p)
        state = lazy_state(self, p)
        if not state:
            state["step"] = new_step()
            state["mu_product"] = lg.tensor(1.0, dtype=dt.float32)
            state["exp_avg"] = lg.zeros_like(p)
            state["exp_avg_sq"] = lg.zeros_like(p)
        beta1, beta2 = group["betas"]
        lr, eps, wd = scalar(hyper(group, "lr")), group["eps"], group["weight_decay"]
        decay = group["momentum_decay"]
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        state["step"].add_(1)
        step = step_count(state["step"])
        bias_correction2 = 1 - beta2**step
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                g = lg.add(g, p, alpha=wd)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * decay)))
        mu_product = state["mu_product"]
        mu_product.mul_(mu)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(lg.lerp(exp_avg, g, 1 - beta1))
        exp_avg_sq.mul_(beta2).add_(lg.mul(lg.mul(g, g), 1 - beta2))
        denom = lg.add(lg.sqrt(lg.div(exp_avg_sq, bias_correction2)), eps)
        prod = step_count(mu_product)
        prod_next = prod * mu_next
        p.add_(lg.mul(lg.div(g, denom), -lr * (1.0 - mu) / (1.0 - prod)))
        p.add_(lg.mul(lg.div(exp_avg, denom), (-lr * mu_next) / (1.0 - prod_next)))


class RAdam(Optimizer):
    """Per parameter with a gradient, at step t (PyTorch's single-tensor RAdam):

        g = -grad if maximize else grad
        p *= 1 - lr * wd  (decoupled_weight_decay)  |  g += wd * p
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        rho_t > 5:  p -= lr * m / (1 - beta1**t) * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r_t
                    with r_t = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t))
        otherwise:  p -= lr * m / (1 - beta1**t)

    State: `step` (float32 0-d), `exp_avg`, `exp_avg_sq`. `foreach`, `capturable`,
    `differentiable` are accepted, same values.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_lr(lr)
        _check_adam_like(eps, betas, weight_decay)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                foreach=foreach,
                capturable=capturable,
                decoupled_weight_decay=decoupled_weight_decay,
                differentiable=differentiable,
            ),
        )

    def _update(self, p: Tensor, group: Any) -> None:
        no_complex(self, p)
        state = lazy_state(self, p)
        if not state:
            state["step"] = new_step()
            state["exp_avg"] = lg.zeros_like(p)
            state["exp_avg_sq"] = lg.zeros_like(p)
        beta1, beta2 = group["betas"]
        lr, eps, wd = scalar(hyper(group, "lr")), group["eps"], group["weight_decay"]
        g = lg.neg(p._grad) if group["maximize"] else p._grad
        state["step"].add_(1)
        step = step_count(state["step"])
        if wd != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                g = lg.add(g, p, alpha=wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(lg.lerp(exp_avg, g, 1 - beta1))
        exp_avg_sq.mul_(beta2).add_(lg.mul(lg.mul(g, g), 1 - beta2))
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        corrected = lg.div(exp_avg, bias_correction1)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2

        def rect() -> Any:
            return (
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            ) ** 0.5

        def adaptive() -> Tensor:
            return lg.div(bias_correction2**0.5, lg.add(lg.sqrt(exp_avg_sq), eps))

        if isinstance(rho_t, Tensor):  # a traced step: both branches, selected
            rectified = lg.mul(
                lg.mul(lg.mul(corrected, lr), adaptive()), lg.where(rho_t > 5.0, rect(), 0.0)
            )
            plain = lg.mul(corrected, lr)
            p.sub_(lg.where(rho_t > 5.0, rectified, plain))
        elif rho_t > 5.0:
            p.sub_(lg.mul(lg.mul(lg.mul(corrected, lr), adaptive()), rect()))
        else:
            p.sub_(lg.mul(corrected, lr))
