"""Losses and distances of `llgrad.nn.functional` beyond cross entropy, NLL, MSE, L1 and
the binary cross entropies: huber, smooth L1, KL divergence, the margin and embedding
losses, Poisson and Gaussian NLL, CTC; `cosine_similarity`, `pairwise_distance`, `pdist`.

Every loss but CTC is a composition of differentiable functions, written so that values
and gradients equal PyTorch's (also at the kinks: a hinge passes no gradient at exactly 0
where PyTorch's kernel tests `> 0`, and does where PyTorch calls `clamp_min`). CTC runs
its alpha/beta recursions in one native kernel (`codegen.ctc`, float64) and assembles
its gradient on the host (NumPy) inside one autograd node, `CtcLossBackward0`, whose
gradient is PyTorch's (see `ctc_loss`); inside `lg.compile` it is a graph break. They are re-exported by `llgrad.nn.functional`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from .. import functions as lg
from ..tape import forward as forward_ad
from ..dispatch.apply import composite_function, interpreters
from ..tape.function import Function, once_differentiable
from ..dispatch.grad_mode import is_grad_enabled, no_grad
from ..ir import dtypes as dt
from ..ops import nn as nnops
from ..runtime import cache, launch, pool
from ..tensor import Tensor
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak, tracing
from ._base import _check_targets, _reduction, _tensor


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    return nnops.reduce_loss(lg, losses, reduction)


def _size_warning(input: Tensor, target: Tensor) -> None:
    if input.shape != target.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input "
            f"size ({input.shape}). This will likely lead to incorrect results due "
            f"to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=3,
        )


def _check_str_reduction(op: str, reduction: str) -> str:
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    return reduction


def _stop(t: Tensor) -> Tensor:
    """`t` with its value but no gradient of its own (for clamps PyTorch makes under
    no_grad: the value changes, the gradient passes as if it had not)."""
    return t.detach()


# --------------------------------------------------------------------------------------
# Regression losses
# --------------------------------------------------------------------------------------


@composite_function
def huber_loss(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Tensor | None = None,
) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - delta / 2), d = input - target;
    `weight` (the input's shape) scales each element's loss before the reduction."""
    op = "huber_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    _check_str_reduction(op, reduction)
    if delta <= 0:
        raise RuntimeError(f"{op} does not support non-positive values for delta, got {delta}")
    _size_warning(input, target)
    d = lg.sub(input, target)
    z = lg.abs(d)
    losses = lg.where(
        lg.lt(z, delta), lg.mul(lg.mul(d, d), 0.5), lg.mul(lg.sub(z, 0.5 * delta), delta)
    )
    if weight is not None:
        _tensor(op, "weight", weight)
        if weight.shape != input.shape:
            raise ValueError("Weights and input must have the same size.")
        losses = lg.mul(losses, weight)
    return _reduce(losses, reduction)


@composite_function
def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (the L1 loss when beta = 0)."""
    op = "smooth_l1_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    r = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError(f"{op} does not support negative values for beta, got {beta}")
    _size_warning(input, target)
    d = lg.sub(input, target)
    z = lg.abs(d)
    if beta == 0.0:
        return _reduce(z, r)
    losses = lg.where(
        lg.lt(z, beta), lg.div(lg.mul(lg.mul(d, d), 0.5), beta), lg.sub(z, 0.5 * beta)
    )
    return _reduce(losses, r)


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """target (log target - input) elementwise (0 where target is 0), or exp(target)
    (target - input) with `log_target`; 'batchmean' divides the sum by the batch size."""
    op = "kl_div"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    if size_average is not None or reduce is not None:
        r = _reduction(size_average, reduce, "mean")
    else:
        if reduction == "mean":
            warnings.warn(
                "reduction: 'mean' divides the total loss by both the batch size "
                "and the support size.'batchmean' divides only by the batch size, "
                "and aligns with the KL div math definition.'mean' will be changed "
                "to behave the same as 'batchmean' in the next major release.",
                UserWarning,
                stacklevel=2,
            )
        if reduction not in ("none", "mean", "sum", "batchmean"):
            raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
        r = reduction
    if log_target:
        losses = lg.mul(lg.exp(target), lg.sub(target, input))
    else:
        losses = lg.sub(lg.xlogy(target, target), lg.mul(target, input))
    if r == "batchmean":
        total = lg.sum(losses)
        return lg.div(total, input.shape[0]) if input.ndim else total
    return _reduce(losses, r)


@composite_function
def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: bool | None = None,
    eps: float = 1e-8,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """exp(input) - target input (log_input), or input - target log(input + eps); `full`
    adds Stirling's approximation of log(target!) where target > 1."""
    op = "poisson_nll_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    r = _reduction(size_average, reduce, reduction)
    if log_input:
        losses = lg.sub(lg.exp(input), lg.mul(target, input))
    else:
        losses = lg.sub(input, lg.mul(target, lg.log(lg.add(input, eps))))
    if full:
        stirling = lg.add(
            lg.sub(lg.mul(target, lg.log(target)), target),
            lg.mul(lg.log(lg.mul(target, 2 * math.pi)), 0.5),
        )
        losses = lg.add(losses, lg.where(lg.gt(target, 1), stirling, lg.zeros_like(stirling)))
    return _reduce(losses, r)


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Tensor | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """0.5 (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) when `full`); `var` is
    clamped to at least `eps` for the value only (its gradient passes unclamped, as in
    PyTorch). `var` has the input's shape, lacks its last dimension, or differs from it in
    one size-1 dimension; a float means the same variance everywhere.

    The negative-variance check reads a plain `var`'s values with NumPy (no kernels)."""
    op = "gaussian_nll_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        return _gaussian_nll(input, target, var, full, eps, reduction)
    _tensor(op, "var", var)
    if var.__class__ is Tensor and not interpreters and not var._dtype.is_complex:
        if 0 not in var._shape and (var._values() < 0).any():  # (one NumPy pass)
            raise ValueError("var has negative entry/entries")
    else:
        with no_grad():
            if var.numel() and bool(lg.any(lg.lt(var, 0)).item()):
                raise ValueError("var has negative entry/entries")
    return _gaussian_nll(input, target, var, full, eps, reduction)


def _gaussian_nll(
    input: Tensor, target: Tensor, var: Tensor | float, full: bool, eps: float, reduction: str
) -> Tensor:
    """`gaussian_nll_loss` after its value check."""
    if not isinstance(var, Tensor):
        var = lg.mul(lg.ones_like(input), float(var))
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = lg.unsqueeze(var, -1)
        elif (
            input.ndim == var.ndim and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1
        ):
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = lg.add(var, _stop(lg.sub(lg.clamp(var, min=eps), var)))
    d = lg.sub(input, target)
    losses = lg.mul(lg.add(lg.log(var), lg.div(lg.mul(d, d), var)), 0.5)
    if full:
        losses = lg.add(losses, 0.5 * math.log(2 * math.pi))
    return _reduce(losses, reduction)


# --------------------------------------------------------------------------------------
# Margin and embedding losses
# --------------------------------------------------------------------------------------


@composite_function
def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, -target (input1 - input2) + margin)."""
    op = "margin_ranking_loss"
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        _tensor(op, name, t)
    r = _reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(
            f"{op} : All input tensors should have same dimension but got "
            f"sizes: input1: {input1.shape}, input2: {input2.shape}, target: "
            f"{target.shape} "
        )
    z = lg.add(lg.mul(lg.neg(target), lg.sub(input1, input2)), margin)
    return _reduce(lg.clamp(z, min=0), r)


@composite_function
def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """input where target is 1, max(0, margin - input) where target is -1 (PyTorch sums
    both parts, so another target value gives input + max(0, margin - input))."""
    op = "hinge_embedding_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    r = _reduction(size_average, reduce, reduction)
    zero = lg.zeros_like(input)
    margin_part = lg.where(lg.ne(target, 1), lg.clamp(lg.rsub(input, margin), min=0), zero)
    self_part = lg.where(lg.ne(target, -1), input, zero)
    return _reduce(lg.add(margin_part, self_part), r)


def soft_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """log(1 + exp(-target input)) (computed as PyTorch does, log1p(exp(.)))."""
    op = "soft_margin_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    r = _reduction(size_average, reduce, reduction)
    if target.requires_grad and is_grad_enabled():  # PyTorch's kernel has no such rule
        raise RuntimeError(
            f"The function '{op}' is not differentiable with respect to "
            f"argument 'target'. This input cannot have requires_grad True."
        )
    _size_warning(input, target)
    return _soft_margin(input, target, r)


@composite_function
def _soft_margin(input: Tensor, target: Tensor, reduction: str) -> Tensor:
    """`soft_margin_loss` of checked arguments (one compiled graph per signature in
    eager mode)."""
    return _reduce(lg.log1p(lg.exp(lg.mul(lg.neg(input), target))), reduction)


@composite_function
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1;
    cos over the last dimension with PyTorch's 1e-12 added to each squared norm."""
    op = "cosine_embedding_loss"
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        _tensor(op, name, t)
    r = _reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim not in (1, 2) or target.ndim != input1.ndim - 1:
        raise RuntimeError(
            f"{op}: 1D target tensor expects 2D input tensors (or a 0D target "
            f"1D inputs), but found inputs with sizes {list(input1.shape)} and "
            f"{list(input2.shape)} and target with size {list(target.shape)}"
        )
    d = input1.ndim - 1
    eps = 1e-12
    prod = lg.sum(lg.mul(input1, input2), d)
    m1 = lg.add(lg.sum(lg.mul(input1, input1), d), eps)
    m2 = lg.add(lg.sum(lg.mul(input2, input2), d), eps)
    cos = lg.div(prod, lg.sqrt(lg.mul(m1, m2)))
    zero = lg.zeros_like(cos)
    pos = lg.where(lg.eq(target, 1), lg.rsub(cos, 1), zero)
    neg = lg.where(lg.eq(target, -1), lg.clamp(lg.sub(cos, margin), min=0), zero)
    return _reduce(lg.add(pos, neg), r)


@composite_function
def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """sum over classes i != y of max(0, margin - x[y] + x[i])^p (times weight[y]) / C,
    for (N, C) or (C,) inputs and class-index targets."""
    op = "multi_margin_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    r = _reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported")
    if (
        input.ndim > 2
        or (input.ndim == 2 and (target.ndim != 1 or target.shape[0] != input.shape[0]))
        or (input.ndim < 2 and target.numel() != 1)
    ):
        raise RuntimeError(
            f"{op}: inconsistent target size: {list(target.shape)} for input "
            f"of size: {list(input.shape)}"
        )
    x = input if input.ndim == 2 else lg.reshape(input, (1, -1))
    t = lg.reshape(target, (-1,))
    c = x.shape[1]

    _check_targets(op, t, c, -(10**18))
    xy = lg.gather(x, 1, lg.unsqueeze(t, 1))
    z = lg.relu(lg.add(lg.sub(x, xy), margin))
    if p == 2:
        z = lg.mul(z, z)
    if weight is not None:
        _tensor(op, "weight", weight)
        if weight.ndim != 1 or weight.shape[0] != c:
            raise RuntimeError(
                f"{op}: weight must be 1-D with {c} elements, got shape {list(weight.shape)}"
            )
        z = lg.mul(z, lg.unsqueeze(lg.index_select(weight, 0, t), 1))
    own = lg.eq(lg.unsqueeze(t, 1), lg.arange(c))
    losses = lg.div(lg.sum(lg.where(own, lg.zeros_like(z), z), 1), c)
    if input.ndim < 2 and r == "none":
        losses = lg.reshape(losses, tuple(target.shape) if input.ndim else ())
    return _reduce(losses, r)


@composite_function
def multilabel_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])) / C;
    each row of `target` lists class indices up to its first -1."""
    op = "multilabel_margin_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    r = _reduction(size_average, reduce, reduction)
    if input.ndim > 2 or target.shape != input.shape:
        raise RuntimeError(
            f"{op}: inconsistent target size: {list(target.shape)} for input "
            f"of size: {list(input.shape)}"
        )
    if target._dtype not in nnops.INDEX_DTYPES:
        raise RuntimeError(f"{op}: expected an int64 target, got {target._dtype.name}")
    x = input if input.ndim == 2 else lg.reshape(input, (1, -1))
    t = target if target.ndim == 2 else lg.reshape(target, (1, -1))
    c = x.shape[1]
    with no_grad():
        valid = lg.cumprod(lg.ne(t, -1).to(dt.int64), 1)  # up to the first -1

        _check_targets(op, lg.where(lg.gt(valid, 0), t, lg.zeros_like(t)), c, -(10**18))
        hits = lg.logical_and(
            lg.eq(lg.unsqueeze(t, 2), lg.arange(c)), lg.gt(lg.unsqueeze(valid, 2), 0)
        )  # (N, K, C)
        count = lg.sum(hits.to(x._dtype), 1)  # times class c is listed
        other = lg.eq(count, 0).to(x._dtype)  # not a target class
    # z[n, j, i] = 1 - x[n, j] + x[n, i]
    z = lg.relu(lg.add(lg.rsub(lg.unsqueeze(x, 2), 1.0), lg.unsqueeze(x, 1)))
    pair = lg.mul(lg.unsqueeze(count, 2), lg.unsqueeze(other, 1))
    losses = lg.div(lg.sum(lg.mul(z, pair), (1, 2)), c)
    if input.ndim < 2:
        losses = lg.reshape(losses, ())
    return _reduce(losses, r)


@composite_function
def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """-(y logsigmoid(x) + (1 - y) logsigmoid(-x)), weighted, averaged over the classes
    (the last dimension)."""
    from .functional import logsigmoid  # circle: nn.functional -> here

    op = "multilabel_soft_margin_loss"
    _tensor(op, "input", input)
    _tensor(op, "target", target)
    if size_average is not None or reduce is not None:
        reduction = _reduction(size_average, reduce, reduction)
    loss = lg.neg(
        lg.add(
            lg.mul(target, logsigmoid(input)), lg.mul(lg.rsub(target, 1), logsigmoid(lg.neg(input)))
        )
    )
    if weight is not None:
        loss = lg.mul(loss, _tensor(op, "weight", weight))
    cd = input.ndim - 1
    loss = lg.div(lg.sum(loss, cd), input.shape[cd])
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, reduction)


@composite_function
def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, margin + d(a, p) - d(a, n)), d the `pairwise_distance` with `p` and `eps`;
    `swap` uses min(d(a, n), d(p, n))."""
    op = "triplet_margin_loss"
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _tensor(op, name, t)
    r = _reduction(size_average, reduce, reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            f"{op}: The anchor, positive, and negative tensors are expected to "
            f"have the same number of dimensions, but got: anchor "
            f"{anchor.ndim}D, positive {positive.ndim}D, and negative "
            f"{negative.ndim}D inputs"
        )
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = lg.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(lg.clamp(lg.sub(lg.add(d_pos, margin), d_neg), min=0), r)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """`triplet_margin_loss` with any distance (default `pairwise_distance`)."""
    op = "triplet_margin_with_distance_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _tensor(op, name, t)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have "
            f"the same number of dimensions, but got: anchor {anchor.ndim}D, "
            f"positive {positive.ndim}D, and negative {negative.ndim}D inputs"
        )
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = lg.minimum(d_neg, dist(positive, negative))
    return _reduce(lg.clamp(lg.sub(lg.add(d_pos, margin), d_neg), min=0), reduction)


# --------------------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------------------


@composite_function
def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """The p-norm of x1 - x2 + eps over the last dimension (inputs broadcast)."""
    op = "pairwise_distance"
    _tensor(op, "x1", x1)
    _tensor(op, "x2", x2)
    nd = max(x1.ndim, x2.ndim)
    diff = lg.add(lg.sub(x1, x2), eps)
    if nd == 0:
        return lg.abs(diff) if not keepdim else lg.abs(diff)
    return lg.norm(diff, p, nd - 1, keepdim)


@composite_function
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps)) along `dim` (inputs broadcast); the
    norms are clamped for the value only, as PyTorch."""
    op = "cosine_similarity"
    _tensor(op, "x1", x1)
    _tensor(op, "x2", x2)
    x1, x2 = lg.broadcast_tensors(x1, x2)
    if x1.ndim == 0:  # 0-d: one element along dim 0 (or -1), as torch
        if dim not in (-1, 0):
            raise IndexError(
                f"{op}: Dimension out of range (expected to be in range of [-1, 0], but got {dim})"
            )
        x1, x2, dim = lg.reshape(x1, (1,)), lg.reshape(x2, (1,)), 0

    def unit(x: Tensor) -> Tensor:
        n = lg.norm(x, 2, dim, True)
        n = lg.add(n, _stop(lg.sub(lg.clamp(n, min=eps), n)))
        return lg.div(x, n)

    return lg.sum(lg.mul(unit(x1), unit(x2)), dim)


@composite_function
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distance between every pair of rows i < j of an (N, M) input, in the
    order of the upper triangle (N (N - 1) / 2 values)."""
    op = "pdist"
    _tensor(op, "input", input)
    if input.ndim != 2:
        raise RuntimeError(f"{op} only supports 2D tensors, got: {input.ndim}D")
    if not input._dtype.is_floating_point:
        raise RuntimeError(f"{op} only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError(f"{op} only supports non-negative p values")
    n = input.shape[0]
    rows, cols = np.triu_indices(n, 1)
    a = lg.index_select(input, 0, lg.tensor(rows.astype(np.int64)))
    b = lg.index_select(input, 0, lg.tensor(cols.astype(np.int64)))
    if a.shape[0] == 0:
        return (
            lg.zeros((0,), dtype=input._dtype)
            if not input.requires_grad
            else lg.sum(lg.mul(a, 0.0), 1)
        )
    return lg.norm(lg.sub(a, b), p, 1)


# --------------------------------------------------------------------------------------
# CTC
# --------------------------------------------------------------------------------------


def _lengths(op: str, name: str, v: Any, n: int) -> np.ndarray:
    if isinstance(v, Tensor):
        if v._dtype.is_floating_point:
            raise RuntimeError(f"{op}: {name} must be integral, got {v._dtype.name}")
        arr = v.detach().numpy().reshape(-1).astype(np.int64)
    else:
        arr = np.asarray(list(v) if not isinstance(v, int) else [v], dtype=np.int64).reshape(-1)
    if arr.shape[0] != n:
        raise RuntimeError(
            f"{op}: Expected {name} to have {n} elements (one per batch "
            f"element), got {arr.shape[0]}"
        )
    return arr


def _logsumexp_np(*arrays: np.ndarray) -> np.ndarray:
    """log(sum(exp(a))) over the given same-shape arrays, elementwise (a max taken out;
    -inf where every term is -inf). Summed in argument order."""
    m = arrays[0]
    for a in arrays[1:]:
        m = np.maximum(m, a)
    safe = np.where(np.isfinite(m), m, 0.0)
    total = np.exp(arrays[0] - safe)
    for a in arrays[1:]:
        total += np.exp(a - safe)
    with np.errstate(divide="ignore"):
        return np.log(total) + safe


def _ctc_check(
    t_max: int,
    c: int,
    blank: int,
    targets: np.ndarray,
    in_lens: np.ndarray,
    tgt_lens: np.ndarray,
) -> None:
    """Raise the first error of CTC's inputs, in a fixed order: input lengths, target
    lengths, the targets' layout and size, blank, the target values. The fast path runs
    only the checks it needs for memory safety and, when one fails (or the kernel flags a
    sequence), calls this for the error to report."""
    op = "ctc_loss"
    if (in_lens > t_max).any():
        raise RuntimeError(
            f"{op}: Expected input_lengths to have value at most {t_max}, but "
            f"got value {int(in_lens.max())}"
        )
    for name, lens in (("input_lengths", in_lens), ("target_lengths", tgt_lens)):
        if (lens < 0).any():
            raise RuntimeError(
                f"{op}: Expected {name} to have value at least 0, but got value {int(lens.min())}"
            )
    n = in_lens.shape[0]
    if targets.ndim == 2:
        if targets.shape[0] != n:
            raise RuntimeError(
                f"{op}: Expected targets to have {n} rows (one per batch element), got "
                f"shape {list(targets.shape)}"
            )
        if (tgt_lens > targets.shape[1]).any():
            raise RuntimeError(
                f"{op}: Expected tensor to have size at least "
                f"{int(tgt_lens.max())} at dimension 1, but got size "
                f"{targets.shape[1]} for targets of shape {list(targets.shape)}"
            )
    elif targets.ndim == 1:
        if tgt_lens.sum() > targets.shape[0]:
            raise RuntimeError(
                f"{op}: the concatenated targets hold {targets.shape[0]} labels, "
                f"fewer than the target lengths' sum {int(tgt_lens.sum())}"
            )
    else:
        raise RuntimeError(
            f"{op}: targets must be 1-D (concatenated) or 2-D (N, S), got shape "
            f"{list(targets.shape)}"
        )
    if not 0 <= blank < c:
        raise RuntimeError(f"{op}: blank must be in label range (0 <= blank < {c}), got {blank}")
    flat = targets.reshape(-1)
    start = 0
    for i in range(n):
        size = int(tgt_lens[i])
        labels = flat[start : start + size] if targets.ndim == 1 else targets[i, :size]
        outside = labels[(labels < 0) | (labels >= c)]
        if outside.size:
            raise IndexError(
                f"{op}: target {int(outside[0])} of sequence {i} is out of range for "
                f"{c} classes (0 <= target < {c})"
            )
        start += size


def _ctc_forward(
    lp: np.ndarray,
    targets: np.ndarray,
    in_lens: np.ndarray,
    tgt_lens: np.ndarray,
    blank: int,
    zero_infinity: bool,
    with_grad: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-sample losses (N,) and (`with_grad`; else None) PyTorch's gradient of each
    with respect to log_probs (T, N, C), both float64: the alpha/beta recursions over the
    blank-extended labels (`codegen.ctc`, every sequence as if alone), from log_probs of
    any float dtype and layout, and targets (N, S) padded or 1-D concatenated. Invalid
    lengths, targets or blank raise the error `_ctc_check` reports."""
    t_max, n, c = lp.shape
    targets = np.ascontiguousarray(targets, dtype=np.int64)
    in_lens = np.ascontiguousarray(in_lens, dtype=np.int64)
    tgt_lens = np.ascontiguousarray(tgt_lens, dtype=np.int64)
    s_max = int(tgt_lens.max()) if n else 0
    if (
        targets.ndim not in (1, 2)
        or (targets.ndim == 2 and targets.shape[0] != n)
        or s_max > targets.shape[-1]
        or not 0 <= blank < c
    ):
        _ctc_check(t_max, c, blank, targets, in_lens, tgt_lens)
    if n == 0:
        return np.zeros(n), (np.zeros(lp.shape) if with_grad else None)
    L = 2 * max(s_max, 0) + 1
    out, empty, invalid, ext, alpha_pad, beta_pad = _ctc_run(
        lp, targets, in_lens, tgt_lens, blank, L, with_grad
    )
    if invalid:
        _ctc_check(t_max, c, blank, targets, in_lens, tgt_lens)
    # -log(exp(a) + exp(b)) of the last label's and last blank's alphas, with the larger
    # (`safe`; 0 when not finite) taken out by the kernel: `_logsumexp_np`'s operations
    with np.errstate(divide="ignore"):  # log(0) = -inf: no alignment
        terms = np.exp(out[:2])
        nll = -(np.log(terms[0] + terms[1]) + out[2])
    # no input steps: only an empty target has an alignment (0, else inf)
    nll = np.where(empty, out[3], nll)
    if zero_infinity:
        keep = ~np.isinf(nll)
        losses = np.where(keep, nll, 0.0)
    else:
        keep, losses = np.ones(n, dtype=bool), nll
    if not with_grad:
        return losses, None
    assert alpha_pad is not None and beta_pad is not None  # with_grad: both computed
    with np.errstate(divide="ignore"):
        grad = _ctc_gradient(
            np.asarray(lp, dtype=np.float64),
            alpha_pad,
            beta_pad,
            ext,
            2 * tgt_lens + 1,
            in_lens,
            nll,
            keep,
        )
    return losses, grad


def _ctc_kernel(dtype: str, grad: bool) -> Any:
    """The CTC kernel (`codegen.ctc`) for log_probs of `dtype`, looked up once per process
    (the generator is imported on first use: it pulls in the math library's)."""
    kernel = _CTC_KERNELS.get((dtype, grad))
    if kernel is None:
        from ..codegen import ctc  # loaded on first use (codegen.ctc)

        cache.register_builder(ctc.CtcKernel, ctc.build_ctc)
        kernel = _CTC_KERNELS[dtype, grad] = cache.get(ctc.CtcKernel(dtype, grad))
    return kernel


_CTC_KERNELS: dict[tuple[str, bool], Any] = {}


def _ctc_run(
    lp: np.ndarray,
    targets: np.ndarray,
    in_lens: np.ndarray,
    tgt_lens: np.ndarray,
    blank: int,
    L: int,
    grad: bool,
) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The native recursions (`codegen.ctc`) over every sequence, split across threads
    when there is enough work: `(out, empty, invalid, ext, alpha, beta)`: the kernel's
    `out` rows, the mask of the sequences without input steps, whether it flagged an
    input error, the extended labels, and with `grad` alpha and beta (T, N, L + 2), else
    None. `targets` is C-contiguous int64."""
    t_max, n, c = lp.shape
    code = lp.dtype.char
    if code != "f" and code != "d":
        lp, code = lp.astype(np.float64), "d"
    item = lp.itemsize
    st, sn, sc = lp.strides
    if st % item or sn % item or sc % item:
        lp = np.ascontiguousarray(lp)
        st, sn, sc = lp.strides
    kernel = _ctc_kernel("float32" if code == "f" else "float64", grad)
    # one buffer of N-word rows for every per-sequence array (one pointer to take): out
    # (rows 0-3), status (4), the input and target lengths (5, 6), the targets' starts
    # (7), ext (L rows from 8), the five float64 work rows and the skip bytes (`width`
    # each; the bytes in whole words)
    width = L // 2 + kernel.spec.SPARE + 4
    work = 8 + L
    skip = work + 5 * width
    buf = np.empty(n * (skip + (width + 7) // 8))
    words = buf[: 8 * n].view(np.int64).reshape(8, n)
    out = buf[: 4 * n].reshape(4, n)
    status = words[4]
    words[5] = in_lens
    words[6] = tgt_lens
    if targets.ndim == 2:
        row_cap = targets.shape[1]
    else:
        row_cap = -1
        words[7, 0] = 0
        np.cumsum(tgt_lens[:-1], out=words[7, 1:])
    ext = buf[8 * n : work * n].view(np.int64).reshape(n, L)
    base = buf.ctypes.data

    def row(k: int) -> int:
        return base + 8 * n * k

    alpha = beta = None
    if grad:
        alpha = np.full((t_max, n, L + 2), -np.inf)
        beta = np.full((t_max, n, L + 2), -np.inf)
    args = [
        0,
        n,
        n,
        t_max,
        c,
        L,
        lp.ctypes.data,
        st // item,
        sn // item,
        sc // item,
        targets.ctypes.data,
        row(7),
        row_cap,
        targets.shape[0],
        row(5),
        row(6),
        blank,
        row(8),
        row(skip),
        row(work),
        row(0),
        row(4),
        0 if alpha is None else alpha.ctypes.data,
        0 if beta is None else beta.ctypes.data,
    ]
    threads = min(launch.threads(), n)
    if threads > 1 and t_max * n * L >= _CTC_PARALLEL_MIN:
        pool.run_blocks(kernel.address, args, threads)
    else:
        launch.call(kernel, args)
    spec = kernel.spec
    return out, status == spec.NO_STEPS, status.max() >= spec.INVALID, ext, alpha, beta


# cells (steps x sequences x extended labels) of one call below which one thread is
# faster than several
_CTC_PARALLEL_MIN = 4096


def _ctc_gradient(
    lp: np.ndarray,
    alpha_pad: np.ndarray,
    beta_pad: np.ndarray,
    ext: np.ndarray,
    ext_lens: np.ndarray,
    in_lens: np.ndarray,
    nll: np.ndarray,
    keep: np.ndarray,
) -> np.ndarray:
    """PyTorch's gradient of the per-sequence losses with respect to log_probs (`lp`,
    float64 (T, N, C)) from the padded alpha and beta rows of `_ctc_run`."""
    t_max, n, c = lp.shape
    L = ext.shape[1]
    ninf = -np.inf
    valid = np.arange(L)[None, :] < ext_lens[:, None]  # (N, L)
    # log of sum alpha * beta over the extended positions of each class, accumulated in
    # position order: the k-th position of a class in its sequence (its rank) joins in
    # round k (the first is the sum itself: log-sum-exp with -inf gives it exactly)
    ab = alpha_pad[:, :, 2:] + beta_pad[:, :, :L]  # (T, N, L)
    lcab = np.full((t_max, n, c), ninf)
    key = np.where(valid, ext, c)
    order = np.argsort(key, axis=1, kind="stable")
    ranked = np.take_along_axis(key, order, 1)
    at = np.arange(L)[None, :].repeat(n, 0)
    first = np.ones((n, L), dtype=bool)
    first[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    rank = np.empty((n, L), dtype=np.int64)
    np.put_along_axis(rank, order, at - np.maximum.accumulate(np.where(first, at, 0), 1), 1)
    rank = np.where(valid, rank, -1)
    for k in range(int(rank.max()) + 1):
        bs, ss = np.nonzero(rank == k)
        cls = ext[bs, ss]
        if k == 0:
            lcab[:, bs, cls] = ab[:, bs, ss]
        else:
            lcab[:, bs, cls] = _logsumexp_np(lcab[:, bs, cls], ab[:, bs, ss])
    grad = np.zeros_like(lp)
    with np.errstate(invalid="ignore", over="ignore"):
        g = np.exp(lp) - np.exp(lcab + nll[None, :, None] - lp)
    steps = (np.arange(t_max)[:, None] < in_lens[None, :]) & keep[None, :]  # (T, N)
    grad[steps] = g[steps]
    return grad


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The Connectionist Temporal Classification loss: -log of the total probability of
    every alignment of each target sequence (forward/backward recursions over the
    blank-extended labels).

    Args: log_probs (T, N, C) or (T, C) log-probabilities (log_softmax output); targets
    (N, S) padded or 1-D concatenated class indices (never `blank`); input_lengths and
    target_lengths one value per sequence (tensors or sequences of ints); `reduction`
    'mean' divides each loss by its target length, then averages; `zero_infinity` turns
    impossible alignments' infinite losses (and their gradients) into zeros.

    The gradient with respect to log_probs is PyTorch's: exp(log_probs) minus the
    alignment posteriors, which is the true derivative plus a term log_softmax's backward
    cancels (so gradients of the logits are exact, those of a leaf log_probs are PyTorch's,
    not the mathematical ones). Once differentiable; a graph break inside `lg.compile`."""
    op = "ctc_loss"
    _tensor(op, "log_probs", log_probs)
    _tensor(op, "targets", targets)
    r = _check_str_reduction(op, reduction)

    if tracing():
        raise GraphBreak("ctc_loss runs its recursions on the host", user_location())
    if not log_probs._dtype.is_floating_point:
        raise RuntimeError(f"{op}: log_probs must be floating point, got {log_probs._dtype.name}")
    unbatched = log_probs.ndim == 2
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(
            f"{op}: log_probs must be 2-D (T, C) or 3-D (T, N, C), got shape "
            f"{list(log_probs.shape)}"
        )
    lp = lg.unsqueeze(log_probs, 1) if unbatched else log_probs
    tg = lg.unsqueeze(targets, 0) if unbatched and targets.ndim == 1 else targets
    t_max, n, c = lp.shape
    in_lens = _lengths(op, "input_lengths", input_lengths, n)
    tgt_lens = _lengths(op, "target_lengths", target_lengths, n)
    if targets._dtype.is_floating_point:
        raise RuntimeError(f"{op}: targets must be integral, got {targets._dtype.name}")
    tnp = np.ascontiguousarray(tg.detach().numpy(), dtype=np.int64)
    dtype = lp._dtype
    # lengths, targets and blank are checked by `_ctc_forward` (see `_ctc_check`)
    if (lp._requires_grad and is_grad_enabled()) or interpreters or forward_ad._level[0]:
        losses = _CtcLoss.apply(lp, tnp, in_lens, tgt_lens, blank, zero_infinity)
        if r == "mean":
            div = lg.tensor(np.maximum(tgt_lens, 1).astype(np.float64), dtype=dtype)
            return lg.mean(lg.div(losses, div))
    else:  # nothing records it: the losses alone (no beta, no gradient)
        nll = _ctc_forward(
            lp.detach().numpy(), tnp, in_lens, tgt_lens, blank, zero_infinity, with_grad=False
        )[0]
        if r == "mean":  # each loss over its target length, in the losses' dtype
            div = np.maximum(tgt_lens, 1).astype(np.float64).astype(dtype.np)
            with np.errstate(over="ignore"):  # a loss beyond the dtype becomes inf
                each = nll.astype(dtype.np) / div
            return lg.mean(lg.tensor(each, dtype=dtype))
        losses = lg.tensor(nll, dtype=dtype)
    if r == "sum":
        return lg.sum(losses)
    return lg.reshape(losses, ()) if unbatched else losses


def _make_ctc_function() -> type:
    class CtcLoss(Function):
        """The per-sequence CTC losses as one node; its backward multiplies the host-made
        gradient by the incoming one."""

        @staticmethod
        def forward(
            ctx: Any,
            lp: Tensor,
            tnp: np.ndarray,
            in_lens: np.ndarray,
            tgt_lens: np.ndarray,
            blank: int,
            zero_infinity: bool,
        ) -> Tensor:
            values = lp.detach().numpy()
            losses, grad = _ctc_forward(values, tnp, in_lens, tgt_lens, blank, zero_infinity)
            ctx.grad = lg.tensor(grad, dtype=lp._dtype)
            return lg.tensor(losses, dtype=lp._dtype)

        @staticmethod
        @once_differentiable
        def backward(ctx: Any, g: Tensor) -> tuple[Any, ...]:
            return (lg.mul(ctx.grad, lg.reshape(g, (1, -1, 1))), None, None, None, None, None)

    node = CtcLoss._backward_cls  # grad_fn named as PyTorch names it
    node.__name__ = node.__qualname__ = "CtcLossBackward0"
    return CtcLoss


_CtcLoss = _make_ctc_function()


# --------------------------------------------------------------------------------------
# torch-level forms (`lg.kl_div(...)`, ...): PyTorch's positional order, reduction as
# its enum (0 none, 1 mean, 2 sum) or a string.
# --------------------------------------------------------------------------------------

_ENUM = {0: "none", 1: "mean", 2: "sum"}


def _enum(reduction: int | str) -> str:
    return _ENUM[reduction] if isinstance(reduction, int) else reduction


def torch_binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    pos_weight: Tensor | None = None,
    reduction: int | str = 1,
) -> Tensor:
    """`torch.binary_cross_entropy_with_logits`: F's with pos_weight before reduction."""
    from .functional import binary_cross_entropy_with_logits  # circle: nn.functional -> here

    return binary_cross_entropy_with_logits(
        input, target, weight, reduction=_enum(reduction), pos_weight=pos_weight
    )


def torch_cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int | str = 1
) -> Tensor:
    """`torch.cosine_embedding_loss`."""
    return cosine_embedding_loss(input1, input2, target, margin, reduction=_enum(reduction))


def torch_hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: int | str = 1
) -> Tensor:
    """`torch.hinge_embedding_loss`."""
    return hinge_embedding_loss(input, target, margin, reduction=_enum(reduction))


def torch_kl_div(
    input: Tensor, target: Tensor, reduction: int | str = 1, log_target: bool = False
) -> Tensor:
    """`torch.kl_div` (no 'batchmean', no warning for 'mean', as torch's own)."""
    r = _enum(reduction)
    losses = (
        lg.mul(lg.exp(target), lg.sub(target, input))
        if log_target
        else lg.sub(lg.xlogy(target, target), lg.mul(target, input))
    )
    return _reduce(losses, _check_str_reduction("kl_div", r))


def torch_margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int | str = 1
) -> Tensor:
    """`torch.margin_ranking_loss`."""
    return margin_ranking_loss(input1, input2, target, margin, reduction=_enum(reduction))


def torch_poisson_nll_loss(
    input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float, reduction: int | str
) -> Tensor:
    """`torch.poisson_nll_loss` (every argument positional, as torch's)."""
    return poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_enum(reduction))


def torch_triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: int | str = 1,
) -> Tensor:
    """`torch.triplet_margin_loss`."""
    return triplet_margin_loss(
        anchor, positive, negative, margin, p, eps, swap, reduction=_enum(reduction)
    )


def torch_ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: int | str = 1,
    zero_infinity: bool = False,
) -> Tensor:
    """`torch.ctc_loss`."""
    return ctc_loss(
        log_probs, targets, input_lengths, target_lengths, blank, _enum(reduction), zero_infinity
    )


TORCH_LEVEL: dict[str, Callable[..., Tensor]] = {
    "binary_cross_entropy_with_logits": torch_binary_cross_entropy_with_logits,
    "cosine_embedding_loss": torch_cosine_embedding_loss,
    "hinge_embedding_loss": torch_hinge_embedding_loss,
    "kl_div": torch_kl_div,
    "margin_ranking_loss": torch_margin_ranking_loss,
    "poisson_nll_loss": torch_poisson_nll_loss,
    "triplet_margin_loss": torch_triplet_margin_loss,
    "ctc_loss": torch_ctc_loss,
    "cosine_similarity": cosine_similarity,
    "pairwise_distance": pairwise_distance,
    "pdist": pdist,
}
"""Functions bound at `lg.*` level (torch's signatures)."""
