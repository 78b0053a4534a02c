"""Muon (momentum orthogonalized by Newton-Schulz), as PyTorch 2.13's `torch.optim.Muon`."""

from __future__ import annotations

import math
from typing import Any, Iterable

from .. import functions as lg
from ..ir import dtypes as dt
from ..linalg import vector_norm
from ..tensor import Tensor
from .optimizer import Optimizer, hyper, lazy_state, scalar

_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def _orthogonalize(
    g: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
) -> Tensor:
    """The quintic Newton-Schulz iteration in bfloat16, as PyTorch runs it: X = G / max(|G|,
    eps) (wide orientation), then `steps` times A = X X^T, B = b A + c A A, X = a X + B X."""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if g.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    x = g.to(dt.bfloat16)
    tall = g.shape[0] > g.shape[1]
    if tall:
        x = x.T
    f32, bf16 = dt.float32, dt.bfloat16
    # the norm is accumulated and rooted in float32 and rounded once, as PyTorch does
    # (llgrad's bfloat16 vector_norm rounds an intermediate: 1 ulp apart in ~12% of cases)
    norm = vector_norm(x.to(f32)).to(bf16)
    x = lg.div(x, lg.clamp(norm, min=eps))
    for _ in range(steps):
        # each product computes in float32 and rounds once to bfloat16, as PyTorch's CPU
        # bfloat16 addmm does (rounding the matrix product first differs by an ulp)
        x32 = x.to(f32)
        gram = lg.matmul(x32, x32.T).to(bf16).to(f32)
        poly = lg.addmm(gram, gram, gram, beta=b, alpha=c).to(bf16).to(f32)
        x = lg.addmm(x32, poly, x32, beta=a).to(bf16)
    return x.T if tall else x


def _adjusted_lr(lr: Any, how: str | None, shape: Any) -> Any:
    rows, cols = shape[:2]
    if how is None or how == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif how == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """For each 2-D parameter with a gradient (PyTorch's Muon):

        buf = lerp(buf, g, 1 - momentum)
        u = lerp(g, buf, momentum) if nesterov else buf
        O = NewtonSchulz(u)  (bfloat16, `ns_steps` iterations of `ns_coefficients`)
        p *= 1 - lr * weight_decay;  p -= adjust(lr, shape) * O

    `adjust_lr_fn`: None/"original" scales lr by sqrt(max(1, rows/cols)), "match_rms_adamw"
    by 0.2 * sqrt(max(rows, cols)). Only 2-D parameters are accepted, as in PyTorch.
    State: `momentum_buffer`.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = _NS_COEFFICIENTS,
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= float(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(
            params,
            dict(
                lr=lr,
                weight_decay=weight_decay,
                momentum=momentum,
                nesterov=nesterov,
                ns_coefficients=ns_coefficients,
                eps=eps,
                ns_steps=ns_steps,
                adjust_lr_fn=adjust_lr_fn,
            ),
        )
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a "
                        f"parameter with size: {p.shape}"
                    )

    def _update(self, p: Tensor, group: Any) -> None:
        if p.is_complex():
            raise RuntimeError("Muon does not support complex parameters")
        grad = p._grad
        if grad.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        state = lazy_state(self, p)
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = lg.zeros_like(grad)
        lr, wd, momentum = scalar(hyper(group, "lr")), group["weight_decay"], group["momentum"]
        buf = state["momentum_buffer"]
        buf.copy_(lg.lerp(buf, grad, 1 - momentum))
        update = lg.lerp(grad, buf, momentum) if group["nesterov"] else buf
        update = _orthogonalize(
            update, tuple(group["ns_coefficients"]), group["ns_steps"], group["eps"]
        )
        adjusted = _adjusted_lr(lr, group["adjust_lr_fn"], p.shape)
        p.mul_(1 - lr * wd)
        p.add_(lg.mul(update.to(p.dtype), -adjusted))
