"""Eager optimizer updates as fused elementwise kernels.

Written op by op, one Adam step of one parameter is about a dozen kernels and as many
temporaries (`lerp`, `mul_`, `add_`, `sqrt`, `div`, ...), each a pass over the
parameter's memory. Here each state tensor's new value is one in-place kernel: one
expression over the parameter, its gradient and state, with the hyperparameters as
scalar operands (packed at each launch, so a changed learning rate needs no new kernel).
The kernels depend on dtype and layout only (a contiguous tensor of any size collapses
to one dimension), so a model's parameters share them.

Each expression node is the op the written path runs, in the same order, so values are
the written path's but for contractions of a product and a sum into fused multiply-adds
(as in every kernel llgrad compiles). An optimizer takes this path for a parameter when
its update runs eagerly on plain CPU tensors of float32 or float64 whose gradient and
state tensors have the parameter's dtype and shape, and its hyperparameters are Python
numbers (`eligible`); anything else (tracing, a tensor learning rate, another dtype or
device) runs the written update. `LLGRAD_FUSED_OPTIM=0` turns the path off.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from ..dispatch.apply import interpreters
from ..eager import elementwise as ew
from ..ir import dtypes as dt
from ..schedule.elementwise import Expr, ExprNode
from ..tensor import Tensor

_FLOATS = (dt.float32, dt.float64)
# `LLGRAD_FUSED_OPTIM=0` runs every update as written
ENABLED = os.environ.get("LLGRAD_FUSED_OPTIM", "1") != "0"
_NUMBERS = (int, float)


def eligible(p: Tensor, grad: Tensor | None, *state: Tensor | None) -> bool:
    """Whether `p`'s update may run fused: plain CPU tensors (`p`, its gradient, which
    records nothing, and the state tensors given; None entries are skipped) of one
    float dtype and shape, with no transform active."""
    # (CUDA and traced tensors have no host address: `_ptr` is None)
    if (
        not ENABLED
        or interpreters
        or p._dtype not in _FLOATS
        or p._ptr.__class__ is not int
        or grad is None
        or grad._requires_grad
    ):
        return False
    for t in (grad, *state):
        if t is not None and (
            not isinstance(t, Tensor)
            or t._dtype is not p._dtype
            or t._shape != p._shape
            or t._ptr.__class__ is not int
        ):
            return False
    return True


class _Expression:
    """A scalar DAG under construction: operands are refs 0..n-1, nodes follow."""

    def __init__(self, n_operands: int, dtype: dt.DType):
        self.n, self.dtype = n_operands, dtype
        self.nodes: list[ExprNode] = []

    def __call__(self, op: str, *args: int) -> int:
        self.nodes.append(ExprNode(op, args))
        return self.n + len(self.nodes) - 1

    def done(self, out: int) -> Expr:
        return Expr((self.dtype,) * self.n, tuple(self.nodes), (out,))


_plans: dict[tuple, Any] = {}
_PLAN_LIMIT = 4096


def _launch(name: str, build: Any, key: tuple, target: Tensor, operands: Sequence[Any]) -> None:
    """Write `build()`'s expression (cached under `key` and the operands' layouts) of
    `operands` into `target` (one of them) and bump its version."""
    full = (name, key, tuple(o._lkey if isinstance(o, Tensor) else None for o in operands))
    plan = _plans.get(full)
    if plan is None:
        if len(_plans) >= _PLAN_LIMIT:
            _plans.clear()
        in_place = tuple(i for i, o in enumerate(operands) if o is target)
        plan = _plans[full] = ew.make_plan(
            build(),
            target._shape,
            target._dtype,
            target._strides,
            operands,
            [target._dtype] * len(operands),
            in_place,
        )
    ew.launch_plan(name, plan, operands, target)
    target._storage.version += 1


def _gradient(e: _Expression, g: int, p: int | None, wd: int | None, maximize: bool) -> int:
    """The gradient an update uses: negated when maximizing, plus `wd * p` (L2 decay)."""
    if maximize:
        g = e("neg", g)
    if p is not None and wd is not None:
        g = e("add", g, e("mul", p, wd))
    return g


def adam(
    p: Tensor,
    g: Tensor,
    m: Tensor,
    v: Tensor,
    v_max: Tensor | None,
    *,
    beta1: float,
    beta2: float,
    lr: float,
    eps: float,
    wd: float,
    decoupled: bool,
    maximize: bool,
    step_size: float,
    bias_correction2_sqrt: float,
) -> None:
    """One Adam/AdamW step of `p` in place (see `optim.Adam`): the first moment `m`, the
    second `v` (and its running maximum `v_max` with AMSGrad), then `p`."""
    l2 = wd != 0 and not decoupled
    d = p._dtype
    flags = (maximize, l2)

    def first() -> Expr:  # m + (1 - beta1) * (g - m)   (lerp)
        e = _Expression(5, d)  # m, g, p, 1 - beta1, wd
        grad = _gradient(e, 1, 2 if l2 else None, 4 if l2 else None, maximize)
        return e.done(e("add", 0, e("mul", 3, e("sub", grad, 0))))

    _launch("adam exp_avg", first, flags, m, (m, g, p, 1 - beta1, wd))

    def second() -> Expr:  # v * beta2 + (g * (1 - beta2)) * g
        e = _Expression(6, d)  # v, g, p, beta2, 1 - beta2, wd
        grad = _gradient(e, 1, 2 if l2 else None, 5 if l2 else None, maximize)
        return e.done(e("add", e("mul", 0, 3), e("mul", e("mul", grad, 4), grad)))

    _launch("adam exp_avg_sq", second, flags, v, (v, g, p, beta2, 1 - beta2, wd))

    if v_max is not None:

        def running_max() -> Expr:  # max(v_max, v)
            e = _Expression(2, d)
            return e.done(e("maximum", 0, 1))

        _launch("adam max_exp_avg_sq", running_max, (), v_max, (v_max, v))
        v = v_max

    decay = wd != 0 and decoupled

    def update() -> Expr:  # p * (1 - lr wd) + (m * -step) / (sqrt(v) / bc2 + eps)
        e = _Expression(7, d)  # p, m, v, 1 - lr * wd, -step_size, bias_correction2_sqrt, eps
        base = e("mul", 0, 3) if decay else 0
        denom = e("add", e("div", e("sqrt", 2), 5), 6)
        return e.done(e("add", base, e("div", e("mul", 1, 4), denom)))

    _launch(
        "adam update",
        update,
        (decay,),
        p,
        (p, m, v, 1 - lr * wd, -step_size, bias_correction2_sqrt, eps),
    )


def numbers(*values: Any) -> bool:
    """Whether every value is a Python int or float (not a tensor, not a bool)."""
    return all(v.__class__ in _NUMBERS for v in values)
