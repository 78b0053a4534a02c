"""Adafactor (Shazeer & Stern 2018) as PyTorch 2.13 implements it."""

from __future__ import annotations

from typing import Any, Iterable

from .. import functions as lg
from ..dispatch.grad_mode import no_grad
from ..linalg import vector_norm
from ..tensor import Tensor
from ..typeinfo import finfo
from .optimizer import Optimizer, hyper, lazy_state, maximum, minimum, new_step, scalar, step_count


class Adafactor(Optimizer):
    """Per parameter with a gradient, at step t (PyTorch's single-tensor Adafactor):

        g = -grad if maximize else grad
        beta2_t = 1 - t**beta2_decay;  rho = min(lr, 1 / sqrt(t))
        alpha = max(eps2, rms(p)) * rho;  p *= 1 - lr * weight_decay
        matrices (ndim > 1): row_var, col_var = lerp towards the mean of g*g over the last
            and second-to-last dims; v = row_var @ col_var / max(mean(row_var), eps1)
        vectors: variance = lerp(variance, g*g, 1 - beta2_t);  v = variance
        u = g / sqrt(max(v, eps1**2));  p -= alpha / max(1, rms(u) / d) * u

    `eps = (eps1, eps2)`; eps1 None means the parameter dtype's machine epsilon (taken,
    as PyTorch does, from the group's first parameter with a gradient). State: `step`
    (float32 0-d) and `row_var`/`col_var` (matrices) or `variance` (vectors). `foreach`
    is accepted (same values).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= float(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(
            params,
            dict(
                lr=lr,
                beta2_decay=beta2_decay,
                eps=eps,
                d=d,
                weight_decay=weight_decay,
                foreach=foreach,
                maximize=maximize,
            ),
        )

    def step(self, closure: Any = None) -> Any:
        """One update of every parameter with a gradient (closure: re-evaluates the loss)."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                eps1 = group["eps"][0]
                for p in group["params"]:
                    if p._grad is None:
                        continue
                    if eps1 is None:
                        eps1 = finfo(p.dtype).eps
                    self._one(p, group, eps1)
        return loss

    def _one(self, p: Tensor, group: dict[str, Any], eps1: float) -> None:
        if p.is_complex():
            raise RuntimeError("Adafactor does not support complex parameters")
        grad = p._grad
        state = lazy_state(self, p)
        if not state:
            state["step"] = new_step()
            if grad.ndim > 1:
                row = list(grad.shape)
                row[-1] = 1
                col = list(grad.shape)
                col[-2] = 1
                state["row_var"] = lg.zeros(*row, dtype=grad.dtype)
                state["col_var"] = lg.zeros(*col, dtype=grad.dtype)
            else:
                state["variance"] = lg.zeros_like(grad)
        g = lg.neg(grad) if group["maximize"] else grad
        lr, eps2, d = scalar(hyper(group, "lr")), group["eps"][1], group["d"]
        wd = group["weight_decay"]
        state["step"].add_(1)
        step = step_count(state["step"])
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = minimum(lr, 1 / (step**0.5))
        numel = p.numel()
        norm_p = vector_norm(p) if isinstance(step, Tensor) else vector_norm(p).item()
        alpha = maximum(eps2, norm_p / (numel**0.5)) * rho
        if wd != 0:
            p.mul_(1 - lr * wd)
        if g.ndim > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_mean = lg.div(lg.square(vector_norm(g, dim=-1, keepdim=True)), g.shape[-1])
            row_var.copy_(lg.lerp(row_var, row_mean, _weight(one_minus_beta2, row_var)))
            col_mean = lg.div(lg.square(vector_norm(g, dim=-2, keepdim=True)), g.shape[-2])
            col_var.copy_(lg.lerp(col_var, col_mean, _weight(one_minus_beta2, col_var)))
            var_estimate = lg.div(
                lg.matmul(row_var, col_var),
                lg.clamp(lg.mean(row_var, dim=-2, keepdim=True), min=eps1),
            )
        else:
            variance = state["variance"]
            variance.copy_(lg.lerp(variance, lg.mul(g, g), _weight(one_minus_beta2, variance)))
            var_estimate = variance
        update = lg.mul(lg.rsqrt(lg.clamp(var_estimate, min=eps1 * eps1)), g)
        norm_u = vector_norm(update)
        if not isinstance(step, Tensor):
            norm_u = norm_u.item()
        denom = maximum(1.0, norm_u / ((update.numel() ** 0.5) * d))
        p.add_(lg.mul(update, -alpha / denom))


def _weight(w: Any, like: Tensor) -> Any:
    """A lerp weight: a number, or a traced 0-d tensor cast to the state's dtype."""
    return w.to(like.dtype) if isinstance(w, Tensor) else w
