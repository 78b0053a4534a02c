"""Functional layers: `bilinear`, `embedding`, `embedding_bag`, `channel_shuffle`.

Compositions of differentiable functions (matmul, index_select, reductions), so their
gradients and compiled code come from those ops; re-exported by `llgrad.nn.functional`.
"""

from __future__ import annotations

import numpy as np

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import no_grad
from ..functions._host import host_tensor
from ..functions.layout import shuffle, shuffle_direct
from ..ir import dtypes as dt
from ..ops import nn as nnops
from ..tensor import Tensor
from ._base import _composite, _host_indices, _tensor


@composite_function
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o].

    Args: input1 (*, in1), input2 (*, in2) with the same leading sizes; weight (out, in1,
    in2); bias (out,)."""
    op = "bilinear"
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        _tensor(op, name, t)
    if weight.ndim != 3:
        raise RuntimeError(
            f"{op}(): weight must be 3-D (out, in1, in2), got shape {list(weight.shape)}"
        )
    out_f, in1, in2 = weight.shape
    if (
        input1.ndim == 0
        or input1.shape[-1] != in1
        or input2.ndim == 0
        or input2.shape[-1] != in2
        or input1.shape[:-1] != input2.shape[:-1]
    ):
        raise RuntimeError(
            f"{op}(): input1 {list(input1.shape)} and input2 "
            f"{list(input2.shape)} must share their leading sizes and end in "
            f"{in1} and {in2} (weight {list(weight.shape)})"
        )
    if bias is not None:
        _tensor(op, "bias", bias)
        if tuple(bias.shape) != (out_f,):
            raise RuntimeError(f"{op}(): bias must have shape [{out_f}], got {list(bias.shape)}")
    lead = tuple(input1.shape[:-1])
    x1 = lg.reshape(input1, (-1, in1))
    x2 = lg.reshape(input2, (-1, in2))
    w = lg.reshape(lg.permute(weight, (1, 0, 2)), (in1, out_f * in2))
    t = lg.reshape(lg.matmul(x1, w), (-1, out_f, in2))
    y = lg.sum(lg.mul(t, lg.unsqueeze(x2, 1)), 2)
    if bias is not None:
        y = lg.add(y, bias)
    return lg.reshape(y, lead + (out_f,))


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of `weight` (V, D) looked up by the integer tensor `input`: shape
    input.shape + (D,). `padding_idx`'s row gets no gradient; `max_norm` renormalizes the
    looked-up rows in place first; `scale_grad_by_freq` divides each row's gradient by
    its count in `input`. `sparse=True` raises (llgrad has dense tensors only)."""
    op = "embedding"
    _tensor(op, "input", input)
    _tensor(op, "weight", weight)
    if sparse:
        raise ValueError(
            "embedding: sparse=True asks for a sparse gradient; llgrad has only "
            "dense tensors (use sparse=False)"
        )
    if weight.ndim != 2:
        raise RuntimeError(f"{op}: 'weight' must be 2-D, got shape {list(weight.shape)}")
    vocab = weight.shape[0]
    if padding_idx is not None:
        if padding_idx >= vocab or padding_idx < -vocab:
            raise ValueError(
                f"{op}: padding_idx {padding_idx} must be within num_embeddings ({vocab})"
            )
        padding_idx %= vocab
    if input._dtype not in nnops.INDEX_DTYPES:
        raise TypeError(
            f"{op}: Expected tensor for argument 'indices' to have one of the "
            f"following scalar types: Long, Int; but got {input._dtype.name} "
            f"(shape {list(input.shape)})"
        )
    if max_norm is not None:
        _check_embedding_indices(input, vocab)  # (the renorm reads rows before the lookup)
        _embedding_renorm_(weight, input, max_norm, norm_type)
    attrs = {"padding_idx": padding_idx, "scale_grad_by_freq": scale_grad_by_freq}
    try:
        return _composite(op, (weight, input), attrs)
    except (IndexError, RuntimeError):
        # the lookup's kernels check every index; on failure the message names the first
        # index out of range (or the original error stands)
        _check_embedding_indices(input, vocab)
        raise


def _check_embedding_indices(input: Tensor, vocab: int) -> None:
    """Raise IndexError naming the smallest or largest index of `input` outside
    [0, vocab)."""
    v = _host_indices(input)
    if v is None:
        return
    lo, hi = int(v.min()), int(v.max())
    if lo < 0 or hi >= vocab:
        raise IndexError(
            f"embedding: index {lo if lo < 0 else hi} is out of range for "
            f"num_embeddings {vocab} (indices shape {list(input.shape)})"
        )


def _embedding_renorm_(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescale, in place and outside autograd, the looked-up rows whose norm exceeds
    `max_norm` (PyTorch's `embedding_renorm_`, same 1e-7 guard)."""
    with no_grad():
        rows = lg.reshape(indices, (-1,))
        used = lg.indexing.index_backward(
            lg.ones(rows.shape, dtype=weight._dtype), (weight.shape[0],), (rows,)
        )
        norms = lg.norm(weight, norm_type, 1, keepdim=True)
        over = lg.logical_and(lg.gt(norms, max_norm), lg.gt(lg.unsqueeze(used, 1), 0))
        scale = lg.where(over, lg.div(max_norm, lg.add(norms, 1e-7)), 1.0)
        weight.mul_(scale.to(weight._dtype))


_MODES = ("sum", "mean", "max")


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """Sum, mean or max of the embeddings of each bag, without materializing the
    (bags, length, dim) lookups by the user.

    Args: input: (B, N) fixed-length bags, or 1-D indices with `offsets` (each bag's start;
    with `include_last_offset` the last entry is the end of the last bag); weight (V, D);
    per_sample_weights (input's shape, mode 'sum' only) scale each looked-up row; entries
    equal to `padding_idx` are left out of their bag (and of a mean's count); an empty bag
    gives zeros. `sparse=True` raises (llgrad has dense tensors only)."""

    op = "embedding_bag"
    _tensor(op, "input", input)
    _tensor(op, "weight", weight)
    if sparse:
        raise ValueError(
            f"{op}: sparse=True asks for a sparse gradient; llgrad has only "
            f"dense tensors (use sparse=False)"
        )
    if mode not in _MODES:
        raise ValueError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if weight.ndim != 2:
        raise ValueError(
            f"{op}: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}"
        )
    if input._dtype not in nnops.INDEX_DTYPES:
        raise TypeError(
            f"{op}: Expected tensor for argument 'indices' to have one of the "
            f"following scalar types: Long, Int; but got {input._dtype.name}"
        )
    vocab, dim = weight.shape
    if per_sample_weights is not None:
        _tensor(op, "per_sample_weights", per_sample_weights)
        if mode != "sum":
            raise NotImplementedError(
                f"embedding_bag: per_sample_weights was not None. "
                f"per_sample_weights is only supported for mode='sum' "
                f"(got mode='{mode}'). Please open a feature request "
                f"on GitHub."
            )
        if per_sample_weights.shape != input.shape:
            raise ValueError(
                f"{op}: embedding_bag: If per_sample_weights "
                f"({list(per_sample_weights.shape)}) is not None, then it must "
                f"have the same shape as the input ({list(input.shape)})"
            )
    if padding_idx is not None:
        if not -vocab <= padding_idx < vocab:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx %= vocab
    # a plain tensor's bags summed or averaged: the graph finds each position's bag and
    # the lookup's kernels check the indices (`_bag_sums_direct`), no host copy of them
    direct = input.__class__ is Tensor and mode != "max" and max_norm is None
    idx = None if direct else np.asarray(input.detach().numpy()).astype(np.int64)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                f"{op}: if input is 2D, then offsets has to be None, as input is "
                f"treated is a mini-batch of fixed length sequences. However, "
                f"found offsets of type {type(offsets).__name__}"
            )
        bags, length = input.shape
        if direct and bags and length:
            return _bag_sums_direct(
                weight, input, None, per_sample_weights, bags, padding_idx, mode, scale_grad_by_freq
            )
        starts = np.arange(bags, dtype=np.int64) * length
        last_end = bags * length
        flat = lg.reshape(input, (-1,))
        psw = None if per_sample_weights is None else lg.reshape(per_sample_weights, (-1,))
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
        _tensor(op, "offsets", offsets)
        if offsets.ndim != 1:
            raise ValueError(f"{op}: offsets has to be a 1D Tensor")
        off = np.asarray(offsets.detach().numpy()).astype(np.int64)
        total = input.shape[0]
        if off.shape[0] and off[0] != 0:
            raise RuntimeError(
                f"{op}: offsets[0] has to be 0, i.e., the first sequence in "
                f"the mini-batch has to start from position 0. However, got "
                f"{int(off[0])}"
            )
        if off.shape[0] and off[-1] > total:
            raise RuntimeError(
                f"{op}: offsets[-1] can not be greater than input's length "
                f"({total}), but got offsets[-1] of {int(off[-1])}"
            )
        if (off[1:] < off[:-1]).any():
            raise RuntimeError(f"{op}: offsets must be non-decreasing, got {off.tolist()}")
        if direct and total and off.shape[0] and offsets.dtype in nnops.INDEX_DTYPES:
            return _bag_sums_direct(
                weight,
                input,
                offsets,
                per_sample_weights,
                off.shape[0] - 1 if include_last_offset else off.shape[0],
                padding_idx,
                mode,
                scale_grad_by_freq,
            )
        if include_last_offset:
            starts, last_end = off[:-1], int(off[-1]) if off.shape[0] else 0
        else:
            starts, last_end = off, total
        flat, psw = input, per_sample_weights
    else:
        raise ValueError(
            f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}"
        )
    if idx is None:
        idx = np.asarray(input.detach().numpy()).astype(np.int64)
    flat_idx = idx.reshape(-1)
    _check_bag_indices(flat_idx, vocab)
    if max_norm is not None:
        _embedding_renorm_(weight, flat, max_norm, norm_type)
    bags = starts.shape[0]
    if mode != "max":
        return _bag_sums(
            weight, flat, flat_idx, psw, starts, last_end, padding_idx, mode, scale_grad_by_freq
        )
    ends = np.append(starts[1:], last_end).astype(np.int64)
    keep = (
        np.ones(flat_idx.shape[0], dtype=bool) if padding_idx is None else flat_idx != padding_idx
    )
    # each bag's kept positions, padded to the longest bag with a position past the end
    members = [np.nonzero(keep[s:e])[0] + s for s, e in zip(starts, ends)]
    width = max((m.shape[0] for m in members), default=0)
    pad_pos = flat_idx.shape[0]
    table = np.full((bags, width), pad_pos, dtype=np.int64)
    for b, m in enumerate(members):
        table[b, : m.shape[0]] = m
    counts = np.array([m.shape[0] for m in members], dtype=np.int64)
    rows = embedding(flat, weight, padding_idx, None, 2.0, scale_grad_by_freq)  # (T, D)
    filler = lg.full((1, dim), -float("inf"), dtype=weight._dtype)
    ext = lg.cat([rows, filler], 0)
    picked = lg.reshape(lg.index_select(ext, 0, lg.tensor(table.reshape(-1))), (bags, width, dim))
    if width == 0:
        return (
            lg.zeros((bags, dim), dtype=weight._dtype)
            if not weight.requires_grad
            else lg.sum(lg.mul(picked, 0.0), 1)
        )
    values = lg.max(picked, 1)[0]
    empty = lg.tensor((counts == 0).reshape(bags, 1))
    return lg.where(empty, lg.zeros_like(values), values)


def _check_bag_indices(flat_idx: np.ndarray, vocab: int) -> None:
    """Raise embedding_bag's IndexError naming the first entry of `flat_idx` outside
    [0, vocab)."""
    if flat_idx.size and (flat_idx.min() < 0 or flat_idx.max() >= vocab):
        bad = flat_idx[(flat_idx < 0) | (flat_idx >= vocab)][0]
        raise IndexError(
            f"embedding_bag: index {int(bad)} is out of range for num_embeddings {vocab}"
        )


def _bag_sums_direct(
    weight: Tensor,
    input: Tensor,
    offsets: Tensor | None,
    psw: Tensor | None,
    bags: int,
    padding_idx: int | None,
    mode: str,
    scale_grad_by_freq: bool,
) -> Tensor:
    """embedding_bag's 'sum' and 'mean' of a non-empty plain `input` (2-D with `offsets`
    None, or 1-D with checked `offsets` of an index dtype) through `_bag_reduce_direct`;
    an index out of range, which the lookup's kernels find, raises embedding_bag's
    IndexError naming the first one."""
    try:
        return _bag_reduce_direct(
            weight, input, offsets, psw, bags, padding_idx, mode == "mean", scale_grad_by_freq
        )
    except (IndexError, RuntimeError):
        _check_bag_indices(input.detach().numpy().reshape(-1), weight.shape[0])
        raise


@composite_function
def _bag_reduce_direct(
    weight: Tensor,
    input: Tensor,
    offsets: Tensor | None,
    psw: Tensor | None,
    bags: int,
    padding_idx: int | None,
    mean: bool,
    scale_grad_by_freq: bool,
) -> Tensor:
    """`_bag_reduce` with each position's bag found in the graph: a 2-D `input`'s row
    (`offsets` None), or for 1-D `input` the number of `offsets` after the first (which
    is 0) at or before the position, so that with include_last_offset the positions from
    the last offset on land in bag `bags`, which is dropped; padding entries go there
    too. Compiled as one graph per signature in eager mode."""
    total = input.numel()
    flat = lg.reshape(input, (-1,))
    if offsets is None:
        seg = lg.div(lg.arange(total, dtype=dt.int64), input.shape[1], rounding_mode="floor")
        if psw is not None:
            psw = lg.reshape(psw, (-1,))
    else:
        later = lg.narrow(offsets, 0, 1, offsets.shape[0] - 1)
        seg = lg.searchsorted(later, lg.arange(total, dtype=offsets.dtype), right=True)
    if padding_idx is not None:
        seg = lg.where(lg.eq(flat, padding_idx), bags, seg)
    return _sum_bags(weight, flat, seg, psw, bags, padding_idx, mean, scale_grad_by_freq)


def _bag_sums(
    weight: Tensor,
    flat: Tensor,
    flat_idx: np.ndarray,
    psw: Tensor | None,
    starts: np.ndarray,
    last_end: int,
    padding_idx: int | None,
    mode: str,
    scale_grad_by_freq: bool,
) -> Tensor:
    """embedding_bag's 'sum' and 'mean': each position's bag found on the host (positions
    in no bag, past the last offset with `include_last_offset`, and padding entries go to
    an extra bag that is cut off), then `_bag_reduce`."""
    bags = starts.shape[0]
    positions = np.arange(flat_idx.shape[0], dtype=np.int64)
    seg = np.searchsorted(starts, positions, side="right") - 1
    seg[positions >= last_end] = bags
    if padding_idx is not None:
        seg[flat_idx == padding_idx] = bags
    return _bag_reduce(
        weight,
        flat,
        host_tensor(seg, dt.int64),
        psw,
        bags,
        padding_idx,
        mode == "mean",
        scale_grad_by_freq,
    )


@composite_function
def _bag_reduce(
    weight: Tensor,
    flat: Tensor,
    seg: Tensor,
    psw: Tensor | None,
    bags: int,
    padding_idx: int | None,
    mean: bool,
    scale_grad_by_freq: bool,
) -> Tensor:
    """The rows of `weight` looked up by `flat` (scaled by `psw`) summed per bag `seg`
    (bag `bags` is dropped) with one `index_add`; `mean` divides by each bag's count
    (an empty bag gives zeros). Compiled as one graph per signature in eager mode."""
    return _sum_bags(weight, flat, seg, psw, bags, padding_idx, mean, scale_grad_by_freq)


def _sum_bags(
    weight: Tensor,
    flat: Tensor,
    seg: Tensor,
    psw: Tensor | None,
    bags: int,
    padding_idx: int | None,
    mean: bool,
    scale_grad_by_freq: bool,
) -> Tensor:
    """The body of `_bag_reduce` and `_bag_reduce_direct`: the looked-up rows (scaled by
    `psw`) summed per bag `seg` with one `index_add`, bag `bags` dropped; `mean` divides
    by each bag's count."""
    rows = embedding(flat, weight, padding_idx, None, 2.0, scale_grad_by_freq)  # (T, D)
    if psw is not None:
        rows = lg.mul(rows, lg.unsqueeze(psw, 1))
    acc = lg.zeros((bags + 1, weight.shape[1]), dtype=rows._dtype)
    out = lg.narrow(lg.index_add(acc, 0, seg, rows), 0, 0, bags)
    if not mean:
        return out
    ones = lg.ones(seg.shape, dtype=rows._dtype)
    counts = lg.index_add(lg.zeros((bags + 1,), dtype=rows._dtype), 0, seg, ones)
    denom = lg.clamp(lg.narrow(counts, 0, 0, bags), min=1.0)
    return lg.div(out, lg.unsqueeze(denom, 1))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the channels (dim 1) into `groups` groups and interleave them: (N, g, C/g, *)
    transposed to (N, C/g, g, *). (A call seen before that records nothing and really
    moves channels takes the direct path of `functions.layout.shuffle_direct`.)"""
    key = (
        (channel_shuffle, input._lkey, groups)
        if input.__class__ is Tensor and groups.__class__ is int
        else None
    )
    out = shuffle_direct(key, input) if key is not None else None
    if out is not None:
        return out
    op = "channel_shuffle"
    _tensor(op, "input", input)
    if input.ndim < 3:
        raise RuntimeError(
            f"{op}: expected input to have at least 3 dimensions, but got "
            f"input with sizes {list(input.shape)}"
        )
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(
            f"{op}: Number of groups to divide channels in must be positive. "
            f"Value of groups:{groups}"
        )
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(
            f"{op}: Number of channels must be divisible by groups. Got {c} "
            f"channels and {groups} groups."
        )
    n, rest = input.shape[0], tuple(input.shape[2:])
    if groups > 1 and c // groups > 1:  # the transpose moves data: the result is a copy
        return shuffle(
            key,
            input,
            (n, groups, c // groups) + rest,
            (0, 2, 1) + tuple(range(3, 3 + len(rest))),
            tuple(input.shape),
        )
    x = lg.reshape(input, (n, groups, c // groups) + rest)
    return lg.reshape(lg.contiguous(lg.transpose(x, 1, 2)), tuple(input.shape))


native_channel_shuffle = channel_shuffle
