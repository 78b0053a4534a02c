"""Attention: `scaled_dot_product_attention` and multi-head attention, PyTorch's semantics.

Both are compositions of differentiable functions (matmul, softmax, masking), so their
gradients and compiled code come from those ops. The masks follow PyTorch's two
conventions, which are opposite for booleans: in `scaled_dot_product_attention` a True
element *takes part* in attention; in `multi_head_attention_forward` (and
`nn.MultiheadAttention`) a True element of `attn_mask` or `key_padding_mask` is *masked
out*. Float masks are added to the scores in both.
"""

from __future__ import annotations

import math
from .. import functions as lg
from ..ir import dtypes as dt
from ..tensor import Tensor
from ._base import _tensor


def _additive(op: str, mask: Tensor, dtype: dt.DType, masked_when: bool) -> Tensor:
    """A mask as scores to add: 0 where attention is allowed, -inf where it is not."""
    if mask._dtype is dt.bool_:
        blocked = mask if masked_when else lg.logical_not(mask)
        return lg.masked_fill(lg.zeros(tuple(mask.shape), dtype=dtype), blocked, -math.inf)
    if not mask._dtype.is_floating_point:
        raise TypeError(
            f"{op}: a mask must be bool or floating point, got "
            f"{mask._dtype.name} (shape {list(mask.shape)})"
        )
    return mask.to(dtype)


def _repeat_heads(t: Tensor, groups: int) -> Tensor:
    """(..., H, S, D) -> (..., H * groups, S, D), each head repeated `groups` times."""
    shape = tuple(t.shape)
    wide = lg.expand(lg.unsqueeze(t, -3), shape[:-2] + (groups,) + shape[-2:])
    return lg.reshape(wide, shape[:-3] + (shape[-3] * groups,) + shape[-2:])


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(q k^T * scale + mask) v over the last two dimensions (batch dimensions
    broadcast). A boolean `attn_mask` is True where attention is allowed; `is_causal`
    allows position i to see positions <= i (the top-left aligned lower triangle)."""
    from .functional import dropout  # circle: nn.functional -> here

    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        _tensor(op, name, t)
        if t.ndim < 2:
            raise RuntimeError(
                f"{op}: {name} must have at least 2 dimensions, got shape {list(t.shape)}"
            )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(
            f"{op}: shapes do not fit: query {list(query.shape)}, key "
            f"{list(key.shape)}, value {list(value.shape)} (need query's and "
            f"key's last dims equal, and key's and value's sequence lengths)"
        )
    if enable_gqa:
        groups = query.shape[-3] // key.shape[-3]
        key, value = _repeat_heads(key, groups), _repeat_heads(value, groups)
    l, s = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = lg.mul(lg.matmul(query, lg.transpose(key, -2, -1)), scale)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError(f"{op}: explicit attn_mask should not be set when is_causal=True")
        attn_mask = lg.tril(lg.ones((l, s), dtype=dt.bool_))
    if attn_mask is not None:
        scores = lg.add(scores, _additive(op, attn_mask, scores._dtype, masked_when=False))
    weights = lg.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return lg.matmul(weights, value)


def _mha_masks(
    op: str,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    n: int,
    heads: int,
    l: int,
    s: int,
    dtype: dt.DType,
) -> Tensor | None:
    """Both masks as one additive (N, heads, L, S)-broadcastable tensor, or None."""
    total = None
    if attn_mask is not None:
        _tensor(op, "attn_mask", attn_mask)
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (l, s):
                raise RuntimeError(
                    f"{op}: The shape of the 2D attn_mask is "
                    f"{tuple(attn_mask.shape)}, but should be {(l, s)}."
                )
            total = _additive(op, attn_mask, dtype, masked_when=True)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (n * heads, l, s):
                raise RuntimeError(
                    f"{op}: The shape of the 3D attn_mask is "
                    f"{tuple(attn_mask.shape)}, but should be "
                    f"{(n * heads, l, s)}."
                )
            total = lg.reshape(_additive(op, attn_mask, dtype, masked_when=True), (n, heads, l, s))
        else:
            raise RuntimeError(
                f"{op}: attn_mask's dimension {attn_mask.ndim} is not supported (2 or 3)"
            )
    if key_padding_mask is not None:
        _tensor(op, "key_padding_mask", key_padding_mask)
        if tuple(key_padding_mask.shape) != (n, s):
            raise RuntimeError(
                f"{op}: expected key_padding_mask of shape {(n, s)}, got "
                f"{tuple(key_padding_mask.shape)}"
            )
        pad = lg.reshape(_additive(op, key_padding_mask, dtype, masked_when=True), (n, 1, 1, s))
        total = pad if total is None else lg.add(total, pad)
    return total


def multi_head_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    num_heads: int,
    q_weight: Tensor,
    k_weight: Tensor,
    v_weight: Tensor,
    in_bias: Tensor | None,
    out_weight: Tensor,
    out_bias: Tensor | None,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    training: bool = True,
    average_attn_weights: bool = True,
    is_causal: bool = False,
    bias_k: Tensor | None = None,
    bias_v: Tensor | None = None,
    add_zero_attn: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Batched (L, N, E) multi-head attention, `nn.MultiheadAttention`'s computation.

    `bias_k`, `bias_v` ((1, 1, E), both or neither): one more key and value, appended to the
    projected keys and values of every batch element; `add_zero_attn`: then one more key
    and value of zeros per head. The masks (checked against the given sequence length S)
    get a column of "allowed" for each added key, as PyTorch's. Returns the (L, N, E)
    output and, with `need_weights`, the attention weights: (N, L, S') averaged over
    heads, or (N, heads, L, S'), S' = S plus the added keys."""
    from .functional import dropout, linear  # circle: nn.functional -> here

    op = "multi_head_attention_forward"
    l, n, e = query.shape
    s = key.shape[0]
    if is_causal and attn_mask is None:
        raise RuntimeError(
            f"{op}: Need attn_mask if specifying the is_causal hint. You may "
            f"use the Transformer module method `generate_square_subsequent_"
            f"mask` to create this mask."
        )
    if e % num_heads:
        raise ValueError(f"{op}: embed_dim {e} not divisible by num_heads {num_heads}")
    hd = e // num_heads
    bq = bk = bv = None
    if in_bias is not None:
        bq, bk, bv = lg.chunk(in_bias, 3)
    if (bias_k is None) != (bias_v is None):
        raise AssertionError(f"{op}: bias_k and bias_v must both be given or both be None")
    q = linear(query, q_weight, bq)
    k = linear(key, k_weight, bk)
    v = linear(value, v_weight, bv)
    mask = _mha_masks(op, attn_mask, key_padding_mask, n, num_heads, l, s, q._dtype)
    extra = 0
    if bias_k is not None and bias_v is not None:  # one learned key/value per batch element
        k = lg.cat([k, lg.expand(bias_k, (1, n, e))], 0)
        v = lg.cat([v, lg.expand(bias_v, (1, n, e))], 0)
        extra += 1

    def heads(t: Tensor, length: int) -> Tensor:  # (len, N, E) -> (N, h, len, d)
        return lg.permute(lg.reshape(t, (length, n, num_heads, hd)), (1, 2, 0, 3))

    q, k, v = heads(q, l), heads(k, s + extra), heads(v, s + extra)
    if add_zero_attn:  # a key and value of zeros per head
        zeros = lg.zeros((n, num_heads, 1, hd), dtype=k._dtype)
        k, v = lg.cat([k, zeros], 2), lg.cat([v, zeros], 2)
        extra += 1
    scores = lg.matmul(lg.mul(q, 1.0 / math.sqrt(hd)), lg.transpose(k, -2, -1))
    if mask is not None:
        if extra:  # the added keys are never masked
            mask = lg.cat(
                [mask, lg.zeros(tuple(mask.shape[:-1]) + (extra,), dtype=mask._dtype)], -1
            )
        scores = lg.add(scores, mask)
    weights = lg.softmax(scores, -1)  # (N, h, L, S)
    attended = dropout(weights, dropout_p, True) if dropout_p > 0.0 and training else weights
    out = lg.matmul(attended, v)  # (N, h, L, d)
    out = lg.reshape(lg.permute(out, (2, 0, 1, 3)), (l, n, e))
    out = linear(out, out_weight, out_bias)
    if not need_weights:
        return out, None
    return out, (lg.mean(weights, 1) if average_attn_weights else weights)
