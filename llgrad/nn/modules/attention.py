"""`MultiheadAttention`, with PyTorch's parameters, initialization and call conventions."""

from __future__ import annotations

from typing import Any

from ... import functions as lg
from ...device import check_device
from ...ir.dtypes import DType
from ...tensor import Tensor
from .. import init
from .._attention import multi_head_attention
from ..parameter import Parameter
from .linear import Linear
from .module import Module


class MultiheadAttention(Module):
    """Attention over `num_heads` heads of `embed_dim // num_heads` features each.

    Parameters as PyTorch's: `in_proj_weight` (3E, E) holding the query, key and value
    projections (or `q_proj_weight`, `k_proj_weight`, `v_proj_weight` when `kdim`/`vdim`
    differ from `embed_dim`), `in_proj_bias` (3E), and `out_proj` (a Linear), so state dicts
    load from torch. Inputs are (L, N, E), (N, L, E) with `batch_first`, or unbatched (L, E).
    `add_bias_kv` adds the parameters `bias_k`, `bias_v` (1, 1, E) (xavier-normal
    initialized): a learned key and value appended to every sequence of keys and values;
    `add_zero_attn` appends a key and value of zeros; the masks get an unmasked column for
    each (the attention weights have S + 1 or S + 2 columns), as PyTorch's."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        check_device(device, "MultiheadAttention")
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got "
                f"embed_dim={embed_dim} and num_heads={num_heads} instead"
            )
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(lg.empty((3 * embed_dim, embed_dim), dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(lg.empty((embed_dim, embed_dim), dtype=dtype))
            self.k_proj_weight = Parameter(lg.empty((embed_dim, self.kdim), dtype=dtype))
            self.v_proj_weight = Parameter(lg.empty((embed_dim, self.vdim), dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(lg.empty((3 * embed_dim,), dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(lg.empty((1, 1, embed_dim), dtype=dtype))
            self.bias_v = Parameter(lg.empty((1, 1, embed_dim), dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"MultiheadAttention: {name} must be a Tensor, got {type(t).__name__}"
                )
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise AssertionError(
                f"MultiheadAttention: query, key and value must all be 2-D "
                f"(unbatched) or 3-D, got shapes {list(query.shape)}, "
                f"{list(key.shape)}, {list(value.shape)}"
            )
        if (
            query.shape[-1] != self.embed_dim
            or key.shape[-1] != self.kdim
            or value.shape[-1] != self.vdim
        ):
            raise AssertionError(
                f"MultiheadAttention: expected feature sizes query "
                f"{self.embed_dim}, key {self.kdim}, value {self.vdim}; got "
                f"{query.shape[-1]}, {key.shape[-1]}, {value.shape[-1]}"
            )
        if not batched:
            query, key, value = (lg.unsqueeze(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = lg.unsqueeze(key_padding_mask, 0)
        elif self.batch_first:
            query, key, value = (lg.transpose(t, 0, 1) for t in (query, key, value))
        if self._qkv_same_embed_dim:
            wq, wk, wv = lg.chunk(self.in_proj_weight, 3)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        out, weights = multi_head_attention(
            query,
            key,
            value,
            self.num_heads,
            wq,
            wk,
            wv,
            self.in_proj_bias,
            self.out_proj.weight,
            self.out_proj.bias,
            key_padding_mask,
            need_weights,
            attn_mask,
            self.dropout,
            self.training,
            average_attn_weights,
            is_causal,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
        )
        if not batched:
            out = lg.squeeze(out, 1)
            if weights is not None:
                weights = lg.squeeze(weights, 0)
        elif self.batch_first:
            out = lg.transpose(out, 0, 1)
        return out, weights
