"""Transformer layers: `TransformerEncoderLayer`, `TransformerDecoderLayer`,
`TransformerEncoder`, `TransformerDecoder` and `Transformer`, with PyTorch's submodules,
parameter names, registration order and initialization, so state dicts load across.

Each layer is post-norm (`x = norm(x + block(x))`) or, with `norm_first`, pre-norm
(`x = x + block(norm(x))`); masks follow `MultiheadAttention`'s conventions (a True
element of a boolean mask is masked out, a float mask is added to the scores).

Differences from PyTorch: there is no fast path. PyTorch's `TransformerEncoder` in
evaluation mode may run its layers on nested tensors (batch_first, a key padding mask,
`enable_nested_tensor`), which returns zeros at padded positions; llgrad computes those
positions as the training path does (the unpadded positions are equal).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

from ... import functions as lg
from ...device import check_device
from ...ir import dtypes as dt
from ...ir.dtypes import DType
from ...tensor import Tensor
from .. import functional as F
from .. import init
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(
            f"activation must be 'relu', 'gelu' or a callable, got {type(activation).__name__}"
        )
    return activation


def _check_mask(name: str, mask: Tensor | None) -> Tensor | None:
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(mask).__name__}")
    if mask._dtype is not dt.bool_ and not mask._dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def generate_square_subsequent_mask(
    sz: int, device: Any = None, dtype: DType | None = None
) -> Tensor:
    """An (sz, sz) float mask with -inf above the diagonal and 0 elsewhere (position i
    attends to positions <= i)."""
    check_device(device, "generate_square_subsequent_mask")
    return lg.triu(lg.full((sz, sz), -math.inf, dtype=dtype or dt.float32), 1)


def _detect_is_causal_mask(mask: Tensor | None, is_causal: bool | None, size: int | None) -> bool:
    """True when `is_causal` says so, or, when it is None, when `mask` equals the square
    subsequent mask of its size."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.shape[-2]
        causal = generate_square_subsequent_mask(
            sz, dtype=mask._dtype if mask._dtype.is_floating_point else None
        )
        if tuple(mask.shape) == tuple(causal.shape):
            if mask._dtype is dt.bool_:
                make_causal = bool(lg.equal(mask, lg.isinf(causal)))
            else:
                make_causal = bool(lg.equal(mask, causal.to(mask._dtype)))
    return make_causal


def _clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with dropout, a residual connection
    and layer normalization (after, or before with `norm_first`).

    Args as PyTorch's: d_model, nhead, dim_feedforward, dropout, activation ('relu',
    'gelu' or a callable; a Module is registered as the child `activation`),
    layer_norm_eps, batch_first, norm_first, bias."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation_relu_or_gelu = (
            1 if activation in ("relu", F.relu) else 2 if activation in ("gelu", F.gelu) else 0
        )
        self.activation = _activation(activation)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """src: (S, N, E), (N, S, E) with batch_first, or (S, E); masks as
        MultiheadAttention's (src_mask (S, S) or (N * nhead, S, S), src_key_padding_mask
        (N, S))."""
        src_mask = _check_mask("src_mask", src_mask)
        src_key_padding_mask = _check_mask("src_key_padding_mask", src_key_padding_mask)
        x = src
        if self.norm_first:
            x = lg.add(x, self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal))
            x = lg.add(x, self._ff_block(self.norm2(x)))
        else:
            x = self.norm1(lg.add(x, self._sa_block(x, src_mask, src_key_padding_mask, is_causal)))
            x = self.norm2(lg.add(x, self._ff_block(x)))
        return x

    def _sa_block(
        self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool
    ) -> Tensor:
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory and a feed-forward block, each
    with dropout, a residual connection and layer normalization (`norm_first`: before)."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """tgt: (T, N, E) (batch_first: (N, T, E)); memory: (S, N, E); masks as
        MultiheadAttention's."""
        tgt_mask = _check_mask("tgt_mask", tgt_mask)
        memory_mask = _check_mask("memory_mask", memory_mask)
        x = tgt
        if self.norm_first:
            x = lg.add(
                x, self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            )
            x = lg.add(
                x,
                self._mha_block(
                    self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
                ),
            )
            x = lg.add(x, self._ff_block(self.norm3(x)))
        else:
            x = self.norm1(
                lg.add(x, self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            )
            x = self.norm2(
                lg.add(
                    x,
                    self._mha_block(
                        x, memory, memory_mask, memory_key_padding_mask, memory_is_causal
                    ),
                )
            )
            x = self.norm3(lg.add(x, self._ff_block(x)))
        return x

    def _sa_block(
        self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool
    ) -> Tensor:
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout1(x)

    def _mha_block(
        self,
        x: Tensor,
        mem: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
    ) -> Tensor:
        x = self.multihead_attn(
            x,
            mem,
            mem,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerEncoder(Module):
    """`num_layers` deep copies of `encoder_layer` (`layers`), then `norm` if given.
    `enable_nested_tensor` and `mask_check` are accepted and kept (llgrad has no nested
    tensors)."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False
        self.mask_check = mask_check

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """Every layer in turn; `is_causal=None` detects a square subsequent `mask`."""
        batch_first = (
            getattr(getattr(self.layers[0], "self_attn", None), "batch_first", False)
            if len(self.layers)
            else False
        )
        seq_len = None if src.ndim != 3 else src.shape[1 if batch_first else 0]
        causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        output = src
        for mod in self.layers:
            output = mod(
                output, src_mask=mask, is_causal=causal, src_key_padding_mask=src_key_padding_mask
            )
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """`num_layers` deep copies of `decoder_layer` (`layers`), then `norm` if given."""

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None
    ) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Every layer in turn; `tgt_is_causal=None` detects a square subsequent
        `tgt_mask`."""
        batch_first = (
            getattr(getattr(self.layers[0], "self_attn", None), "batch_first", False)
            if len(self.layers)
            else False
        )
        seq_len = None if tgt.ndim != 3 else tgt.shape[1 if batch_first else 0]
        causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        output = tgt
        for mod in self.layers:
            output = mod(
                output,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=causal,
                memory_is_causal=memory_is_causal,
            )
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder-decoder transformer ("Attention Is All You Need"): `encoder` and
    `decoder` stacks with final layer norms; every parameter of more than one dimension
    is re-initialized with xavier_uniform_, as PyTorch."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        custom_encoder: Any = None,
        custom_decoder: Any = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(
                d_model,
                nhead,
                dim_feedforward,
                dropout,
                activation,
                layer_norm_eps,
                batch_first,
                norm_first,
                bias,
                **kw,
            )
            self.encoder = TransformerEncoder(
                layer, num_encoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(
                d_model,
                nhead,
                dim_feedforward,
                dropout,
                activation,
                layer_norm_eps,
                batch_first,
                norm_first,
                bias,
                **kw,
            )
            self.decoder = TransformerDecoder(
                layer, num_decoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            )
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Encode `src`, decode `tgt` against the memory; shapes (S, N, E) and (T, N, E),
        batch first with `batch_first`, or unbatched (S, E) and (T, E)."""
        batched = src.ndim == 3
        if batched and not self.batch_first and src.shape[1] != tgt.shape[1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if batched and self.batch_first and src.shape[0] != tgt.shape[0]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(
        sz: int, device: Any = None, dtype: DType | None = None
    ) -> Tensor:
        """An (sz, sz) float mask, -inf above the diagonal, 0 elsewhere."""
        return generate_square_subsequent_mask(sz, device, dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
