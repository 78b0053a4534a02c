"""Losses and distances of `llgrad.nn.functional` beyond cross entropy, NLL, MSE, L1 and
the binary cross entropies: huber, smooth L1, KL divergence, the margin and embedding
losses, Poisson and Gaussian NLL, CTC; `cosine_similarity`, `pairwise_distance`, `pdist`.

Every loss but CTC is a composition of differentiable functions, written so that values
and gradients equal PyTorch's (also at the kinks: a hinge passes no gradient at exactly 0
where PyTorch's kernel tests `> 0`, and does where PyTorch calls `clamp_min`). CTC runs
its alpha/beta recursions on the host (NumPy, float64) inside one autograd node,
`CtcLossBackward0`, whose gradient is PyTorch's (see `ctc_loss`); inside `lg.compile` it
is a graph break. They are re-exported by `llgrad.nn.functional`.
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
from ..runtime import cache, launch
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
        arr = np.asarray(v.detach().numpy()).reshape(-1).astype(np.int64)
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


def _ctc_labels(targets: np.ndarray, tgt_lens: np.ndarray, blank: int) -> np.ndarray:
    """The (N, S) labels of every sequence, padded with `blank` to the longest target,
    from padded (N, S') or concatenated 1-D targets."""
    n = tgt_lens.shape[0]
    s_max = int(tgt_lens.max()) if n else 0
    labels = np.full((n, s_max), blank, dtype=np.int64)
    mask = np.arange(s_max)[None, :] < tgt_lens[:, None]
    if targets.ndim == 2:
        labels[mask] = targets[:, :s_max][mask]
    else:
        starts = np.concatenate(([0], np.cumsum(tgt_lens)[:-1]))
        labels[mask] = targets[(starts[:, None] + np.arange(s_max)[None, :])[mask]]
    return labels


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
    with respect to log_probs (T, N, C): the alpha/beta recursions over the blank-extended
    labels, one time step for the whole batch at a time (sequences padded to the longest
    extended label and the longest input; every value a sequence reads is computed as
    for that sequence alone, so the batch changes no bit of it)."""
    t_max, n, c = lp.shape
    if n == 0:
        return np.zeros(n), (np.zeros_like(lp) if with_grad else None)
    with np.errstate(divide="ignore"):  # log(0) = -inf: no alignment
        return _ctc_batch(lp, targets, in_lens, tgt_lens, blank, zero_infinity, with_grad)


def _ctc_run(
    reverse: bool,
    t_lo: int,
    t_hi: int,
    lpe: np.ndarray,
    out: np.ndarray,
    skip: np.ndarray,
    ext_lens: np.ndarray,
    last: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> None:
    """Rows [t_lo, t_hi) of the alpha (beta with `reverse`) recursion into the padded
    `out` (see `codegen.ctc`), the sequences split across threads when there is enough
    work; every array C-contiguous (`lpe`, `out` float64, masks uint8)."""
    if t_hi <= t_lo:
        return
    from ..codegen.ctc import CtcKernel, build_ctc  # loaded on first use (codegen.ctc)

    if CtcKernel not in _CTC_REGISTERED:
        cache.register_builder(CtcKernel, build_ctc)
        _CTC_REGISTERED.add(CtcKernel)
    n, L = skip.shape
    kernel = cache.get(CtcKernel(reverse))
    keep = [
        np.ascontiguousarray(ext_lens, dtype=np.int64),
        None if last is None else np.ascontiguousarray(last, dtype=np.int64),
    ]
    args = [
        0,
        n,
        n,
        L,
        t_lo,
        t_hi,
        lpe.ctypes.data,
        out.ctypes.data,
        skip.ctypes.data,
        keep[0].ctypes.data,
        0 if keep[1] is None else keep[1].ctypes.data,
        0 if start is None else start.ctypes.data,
    ]
    scratch = np.empty((n, L))
    args.append(scratch.ctypes.data)
    threads = min(launch.threads(), n)
    if threads > 1 and (t_hi - t_lo) * n * L >= _CTC_PARALLEL_MIN:
        from ..runtime import pool  # the native thread pool, for long inputs only

        pool.run_blocks(kernel.address, args, threads)
    else:
        launch.call(kernel, args)


# log-sum-exps of one call below which one thread is faster than several
_CTC_PARALLEL_MIN = 4096
_CTC_REGISTERED: set[type] = set()


def _ctc_batch(
    lp: np.ndarray,
    targets: np.ndarray,
    in_lens: np.ndarray,
    tgt_lens: np.ndarray,
    blank: int,
    zero_infinity: bool,
    with_grad: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """`_ctc_forward` of a non-empty batch."""
    t_max, n, c = lp.shape
    ninf = -np.inf
    ext_lens = 2 * tgt_lens + 1
    L = int(ext_lens.max())
    ext = np.full((n, L), blank, dtype=np.int64)
    ext[:, 1::2] = _ctc_labels(targets, tgt_lens, blank)
    valid = np.arange(L)[None, :] < ext_lens[:, None]  # (N, L)
    skip = np.zeros((n, L), dtype=bool)  # from s - 2 to s
    if L > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2]) & valid[:, 2:]
    rows = np.arange(n)
    lpe = lp[:, rows[:, None], ext]  # (T, N, L)
    last = in_lens - 1  # each sequence's last step
    pen = np.where(ext_lens > 1, ext_lens - 2, 0)
    # rows of L + 2: two -inf columns before the labels (alpha) or after them (beta), so
    # the kernel's moves from s - 1, s - 2 (s + 1, s + 2) stay inside the row
    lpe = np.ascontiguousarray(lpe, dtype=np.float64)
    skip_u8 = np.ascontiguousarray(skip, dtype=np.uint8)
    alpha_pad = np.full((t_max, n, L + 2), ninf)
    alpha = alpha_pad[:, :, 2:]
    if t_max:
        alpha[0, :, 0] = lpe[0, :, 0]
        if L > 1:
            alpha[0, :, 1] = np.where(ext_lens > 1, lpe[0, :, 1], ninf)
        _ctc_run(False, 1, t_max, lpe, alpha_pad, skip_u8, ext_lens)
        fin = alpha[np.clip(last, 0, None), rows]  # (N, L)
        nll = -_logsumexp_np(fin[rows, ext_lens - 1], np.where(ext_lens > 1, fin[rows, pen], ninf))
    else:
        nll = np.zeros(n)
    # no input steps: only an empty target has an alignment
    nll = np.where(in_lens == 0, np.where(ext_lens == 1, 0.0, np.inf), nll)
    keep = ~(zero_infinity & np.isinf(nll))
    losses = np.where(keep, nll, 0.0)
    if not with_grad:
        return losses, None
    beta_pad = np.full((t_max, n, L + 2), ninf)
    beta = beta_pad[:, :, :L]
    if t_max:
        # beta starts at each sequence's last step: its last blank and last label
        start = np.zeros((n, L), dtype=bool)
        start[rows, ext_lens - 1] = True
        start[rows, pen] |= ext_lens > 1
        skip_next = np.zeros((n, L), dtype=np.uint8)  # from s + 2 to s
        skip_next[:, :-2] = skip[:, 2:]
        beta[t_max - 1] = np.where(start & (last == t_max - 1)[:, None], lpe[t_max - 1], ninf)
        _ctc_run(
            True, 0, t_max - 1, lpe, beta_pad, skip_next, ext_lens, last, start.astype(np.uint8)
        )
    # log of sum alpha * beta over the extended positions of each class, accumulated in
    # position order: the k-th position of a class in its sequence (its rank) joins in
    # round k (the first is the sum itself: log-sum-exp with -inf gives it exactly)
    ab = alpha + beta  # (T, N, L)
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
    return losses, grad


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
    tnp = np.asarray(tg.detach().numpy()).astype(np.int64)
    if (in_lens > t_max).any() or (in_lens < 0).any():
        raise RuntimeError(
            f"{op}: Expected input_lengths to have value at most {t_max}, but "
            f"got value {int(in_lens.max())}"
        )
    if tnp.ndim == 2:
        if (tgt_lens > tnp.shape[1]).any():
            raise RuntimeError(
                f"{op}: Expected tensor to have size at least "
                f"{int(tgt_lens.max())} at dimension 1, but got size "
                f"{tnp.shape[1]} for targets of shape {list(tg.shape)}"
            )
    elif tnp.ndim == 1:
        if tgt_lens.sum() > tnp.shape[0]:
            raise RuntimeError(
                f"{op}: the concatenated targets hold {tnp.shape[0]} labels, "
                f"fewer than the target lengths' sum {int(tgt_lens.sum())}"
            )
    else:
        raise RuntimeError(
            f"{op}: targets must be 1-D (concatenated) or 2-D (N, S), got shape {list(tg.shape)}"
        )
    if not 0 <= blank < c:
        raise RuntimeError(f"{op}: blank must be in label range (0 <= blank < {c}), got {blank}")
    if (lp._requires_grad and is_grad_enabled()) or interpreters or forward_ad._level[0]:
        losses = _CtcLoss.apply(lp, tnp, in_lens, tgt_lens, blank, zero_infinity)
    else:  # nothing records it: the losses alone (no beta, no gradient)
        values = np.asarray(lp.detach().numpy(), dtype=np.float64)
        losses = lg.tensor(
            _ctc_forward(values, tnp, in_lens, tgt_lens, blank, zero_infinity, with_grad=False)[0],
            dtype=lp._dtype,
        )
    if r == "mean":
        div = lg.tensor(np.maximum(tgt_lens, 1).astype(np.float64), dtype=losses._dtype)
        return lg.mean(lg.div(losses, div))
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
            values = np.asarray(lp.detach().numpy(), dtype=np.float64)
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
