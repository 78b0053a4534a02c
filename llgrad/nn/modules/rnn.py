"""Recurrent layers: `RNN`, `LSTM`, `GRU` and their cells, with PyTorch's parameters.

Parameter names, shapes, registration order and initialization (U(-1/sqrt(hidden),
1/sqrt(hidden)) for every weight and bias, LSTM projections `weight_hr_l{k}` included)
are PyTorch's, so state dicts move between the two libraries. The gate layouts are PyTorch's too: LSTM rows are (input, forget, cell,
output), GRU rows (reset, update, new), with the new gate `tanh(W_in x + b_in + r * (W_hn h
+ b_hn))`.

A layer runs as a loop over time steps of differentiable functions; the input projection
of a whole sequence is one matmul before the loop, handed to the steps by one `unbind`.
In eager mode each step (`_lstm_step`, `_gru_step`, `_rnn_step`: the recurrent matmul and
the gates) is a composite function, compiled on its first call per shape into one native
call forward and one backward, so autograd records one node per step (see
`compiler.composites`). Under `lg.compile` the loop unrolls into one graph (one node group
per step), so a training step over a fixed sequence length compiles to a single native
function.
"""

from __future__ import annotations

import math
from typing import Any

from ... import functions as lg
from ...dispatch.apply import composite_function
from ...device import check_device
from ...ir.dtypes import DType
from ...tensor import Tensor
from .. import functional as F, init
from ..parameter import Parameter
from .module import Module

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


@composite_function
def _lstm_step(
    gi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None
) -> tuple[Tensor, Tensor]:
    """One LSTM step from the precomputed input projection `gi` (N, 4H)."""
    gates = lg.add(gi, F.linear(h, w_hh, b_hh))
    i, f, g, o = lg.chunk(gates, 4, -1)
    c = lg.add(lg.mul(lg.sigmoid(f), c), lg.mul(lg.sigmoid(i), lg.tanh(g)))
    return lg.mul(lg.sigmoid(o), lg.tanh(c)), c


@composite_function
def _gru_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    gh = F.linear(h, w_hh, b_hh)
    ir, iz, in_ = lg.chunk(gi, 3, -1)
    hr, hz, hn = lg.chunk(gh, 3, -1)
    r = lg.sigmoid(lg.add(ir, hr))
    z = lg.sigmoid(lg.add(iz, hz))
    n = lg.tanh(lg.add(in_, lg.mul(r, hn)))
    return lg.add(n, lg.mul(z, lg.sub(h, n)))  # (1 - z) n + z h


@composite_function
def _rnn_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, relu: bool) -> Tensor:
    pre = lg.add(gi, F.linear(h, w_hh, b_hh))
    return lg.relu(pre) if relu else lg.tanh(pre)


def _check_input(name: str, input: Any, input_size: int, batched_ndim: int) -> bool:
    """True when `input` is unbatched."""
    if not isinstance(input, Tensor):
        raise TypeError(
            f"{name}: expected a Tensor input or a PackedSequence (packed "
            f"sequences come from nn.utils.rnn.pack_sequence), got "
            f"{type(input).__name__}"
        )
    if input.ndim not in (batched_ndim - 1, batched_ndim):
        raise ValueError(
            f"{name}: Expected input to be {batched_ndim - 1}D or "
            f"{batched_ndim}D, got {input.ndim}D instead (shape "
            f"{list(input.shape)})"
        )
    if input.shape[-1] != input_size:
        raise RuntimeError(
            f"{name}: input.size(-1) must be equal to input_size. Expected "
            f"{input_size}, got {input.shape[-1]}"
        )
    return input.ndim == batched_ndim - 1


def _repack(out: Tensor, like: Any) -> Any:
    """(L, N, H) outputs in the original batch order as a PackedSequence with `like`'s
    batch sizes and indices."""
    from ..utils.rnn import (
        PackedSequence,
    )  # circle: nn.utils -> nn.utils.parametrizations -> nn.modules -> here

    if like.sorted_indices is not None:
        out = lg.index_select(out, 1, like.sorted_indices)
    sizes = [int(b) for b in like.batch_sizes.numpy()]
    data = lg.cat([lg.slice_dim(lg.select(out, 0, t), 0, 0, b) for t, b in enumerate(sizes)], 0)
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)


def _check_hidden(name: str, h: Any, shape: tuple[int, ...], what: str) -> None:
    if not isinstance(h, Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor, got {type(h).__name__}")
    if tuple(h.shape) != shape:
        raise RuntimeError(f"{name}: Expected {what} size {shape}, got {tuple(h.shape)}")


class RNNBase(Module):
    """The multi-layer, optionally bidirectional recurrence shared by RNN, LSTM and GRU."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        name = "RNN" if mode.startswith("RNN") else mode
        check_device(device, name)
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError(
                f"{name}: dropout should be a number in range [0, 1] representing "
                f"the probability of an element being zeroed, got {dropout!r}"
            )
        if not isinstance(proj_size, int) or isinstance(proj_size, bool) or proj_size < 0:
            raise ValueError(
                f"{name}: proj_size should be a positive integer or zero to "
                f"disable projections, got {proj_size!r}"
            )
        if proj_size and mode != "LSTM":
            raise ValueError(
                f"{name}: proj_size argument is only supported for LSTM, not RNN or GRU"
            )
        if proj_size >= hidden_size:
            raise ValueError(
                f"{name}: proj_size has to be smaller than hidden_size (got "
                f"proj_size={proj_size}, hidden_size={hidden_size})"
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        real_hidden = proj_size or hidden_size  # the size of h (and of the outputs)
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else real_hidden * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (gate, layer_in)), ("weight_hh", (gate, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                for pname, shape in shapes:
                    setattr(self, pname + sfx, Parameter(lg.empty(shape, dtype=dtype)))
                    self._flat_weights_names.append(pname + sfx)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def _name(self) -> str:
        return type(self).__name__

    def _weights(
        self, layer: int, d: int
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None, Tensor | None]:
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        get = lambda n: getattr(self, n + sfx) if self.bias or "weight" in n else None  # noqa
        w_hr = getattr(self, "weight_hr" + sfx) if self.proj_size else None
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), w_hr

    def _run_direction(
        self,
        xs: Tensor,
        h: Tensor,
        c: Tensor | None,
        layer: int,
        d: int,
        lengths: Tensor | None = None,
    ) -> tuple[list[Tensor], Tensor, Tensor | None]:
        """One layer in one direction over (L, N, in): the outputs per step (in time
        order) and the last state. With `lengths` (packed input), a sequence's state
        changes only at its own steps (the reverse direction starts at its last one) and
        its outputs past its end are zero."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
        # (L, N, gates): one matmul, and one node handing each step its row
        gis = lg.unbind(F.linear(xs, w_ih, b_ih), 0)
        steps = range(xs.shape[0] - 1, -1, -1) if d else range(xs.shape[0])
        outs: list[Tensor] = [None] * xs.shape[0]  # type: ignore[list-item]
        for t in steps:
            gi = gis[t]
            c_new = None
            if self.mode == "LSTM":
                h_new, c_new = _lstm_step(gi, h, c, w_hh, b_hh)  # type: ignore[arg-type]
                if w_hr is not None:  # the projection h = W_hr (o * tanh c)
                    h_new = F.linear(h_new, w_hr)
            elif self.mode == "GRU":
                h_new = _gru_step(gi, h, w_hh, b_hh)
            else:
                h_new = _rnn_step(gi, h, w_hh, b_hh, self.mode == "RNN_RELU")
            if lengths is None:
                h = h_new
                if c_new is not None:
                    c = c_new
                outs[t] = h
                continue
            live = lg.unsqueeze(lg.gt(lengths, t), 1)  # (N, 1): step t exists
            h = lg.where(live, h_new, h)
            if c_new is not None:
                c = lg.where(live, c_new, c)
            outs[t] = lg.where(live, h_new, lg.zeros_like(h_new))
        return outs, h, c

    def forward(self, input: Tensor, hx: Any = None) -> Any:
        """Run the layers over `input` ((L, N, in), batch first, unbatched (L, in), or a
        PackedSequence, which gives a PackedSequence output with the same batch sizes and
        indices and the last state of each sequence at its own length)."""
        from ..utils.rnn import (
            PackedSequence,
            pad_packed_sequence,
        )  # circle: nn.utils -> nn.utils.parametrizations -> nn.modules -> here

        name = self._name()
        packed = input if isinstance(input, PackedSequence) else None
        lengths = None
        if packed is not None:
            input, lengths = pad_packed_sequence(packed, batch_first=self.batch_first)
        unbatched = _check_input(name, input, self.input_size, 3)
        x = (
            lg.unsqueeze(input, 1)
            if unbatched
            else (lg.transpose(input, 0, 1) if self.batch_first else input)
        )  # (L, N, in)
        n = x.shape[1]
        dirs = 2 if self.bidirectional else 1
        state_shape = (self.num_layers * dirs, n, self.proj_size or self.hidden_size)
        given_shape = state_shape[:1] + state_shape[2:] if unbatched else state_shape
        cell_shape = (self.num_layers * dirs, n, self.hidden_size)
        given_cell = cell_shape[:1] + cell_shape[2:] if unbatched else cell_shape
        lstm = self.mode == "LSTM"
        if hx is None:
            h0 = lg.zeros(state_shape, dtype=x._dtype)
            c0 = lg.zeros(cell_shape, dtype=x._dtype) if lstm else None
        else:
            if lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{name}: hx must be a tuple (h_0, c_0) for an LSTM")
                h0, c0 = hx
                _check_hidden(name, h0, given_shape, "hidden[0]")
                _check_hidden(name, c0, given_cell, "hidden[1]")
            else:
                h0, c0 = hx, None
                _check_hidden(name, h0, given_shape, "hidden")
            if unbatched:
                h0 = lg.unsqueeze(h0, 1)
                c0 = lg.unsqueeze(c0, 1) if c0 is not None else None
        layer_in = x
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        for layer in range(self.num_layers):
            per_dir = []
            for d in range(dirs):
                k = layer * dirs + d
                outs, h, c = self._run_direction(
                    layer_in,
                    lg.select(h0, 0, k),
                    lg.select(c0, 0, k) if lstm else None,
                    layer,
                    d,
                    lengths,
                )
                per_dir.append(lg.stack(outs, 0))
                h_n.append(h)
                if lstm:
                    c_n.append(c)  # type: ignore[arg-type]
            layer_in = per_dir[0] if dirs == 1 else lg.cat(per_dir, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        out = layer_in
        hn = lg.stack(h_n, 0)
        cn = lg.stack(c_n, 0) if lstm else None
        if packed is not None:
            out = _repack(out, packed)
        elif unbatched:
            out = lg.squeeze(out, 1)
            hn = lg.squeeze(hn, 1)
            cn = lg.squeeze(cn, 1) if cn is not None else None
        elif self.batch_first:
            out = lg.transpose(out, 0, 1)
        return (out, (hn, cn)) if lstm else (out, hn)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN: h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        self.nonlinearity = nonlinearity
        super().__init__(
            "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device=device,
            dtype=dtype,
        )


class LSTM(RNNBase):
    """Multi-layer LSTM: gates (input, forget, cell, output) from W_ih x + b_ih + W_hh h +
    b_hh, c' = f c + i g, h' = o tanh(c'). With `proj_size` > 0, h' is projected by
    `weight_hr_l{k}` (proj_size, hidden_size): h_0 and the outputs have proj_size features
    per direction, c_0 keeps hidden_size, as PyTorch's."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )


class GRU(RNNBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(
            "GRU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device=device,
            dtype=dtype,
        )


class RNNCellBase(Module):
    """The parameters of a recurrent cell: `num_chunks` gate blocks of `hidden_size` rows
    each (1 for RNNCell, 4 for LSTMCell, 3 for GRUCell)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        gates = num_chunks
        super().__init__()
        check_device(device, type(self).__name__)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(lg.empty((gates * hidden_size, input_size), dtype=dtype))
        self.weight_hh = Parameter(lg.empty((gates * hidden_size, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(lg.empty((gates * hidden_size,), dtype=dtype))
            self.bias_hh = Parameter(lg.empty((gates * hidden_size,), dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def _prepare(self, input: Tensor, hx: Any, count: int) -> tuple[bool, Tensor, list[Tensor]]:
        name = type(self).__name__
        unbatched = _check_input(name, input, self.input_size, 2)
        x = lg.unsqueeze(input, 0) if unbatched else input
        shape = (x.shape[0], self.hidden_size)
        if hx is None:
            states = [lg.zeros(shape, dtype=x._dtype) for _ in range(count)]
        else:
            given = list(hx) if count == 2 else [hx]
            if count == 2 and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
                raise TypeError(f"{name}: hx must be a tuple (h, c)")
            want = shape[1:] if unbatched else shape
            for i, s in enumerate(given):
                _check_hidden(name, s, want, f"hidden[{i}]" if count == 2 else "hidden")
            states = [lg.unsqueeze(s, 0) if unbatched else s for s in given]
        return unbatched, x, states

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        unbatched, x, (h,) = self._prepare(input, hx, 1)
        h = _rnn_step(
            F.linear(x, self.weight_ih, self.bias_ih),
            h,
            self.weight_hh,
            self.bias_hh,
            self.nonlinearity == "relu",
        )
        return lg.squeeze(h, 0) if unbatched else h


class LSTMCell(RNNCellBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Tensor]:
        unbatched, x, (h, c) = self._prepare(input, hx, 2)
        h, c = _lstm_step(
            F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh
        )
        return (lg.squeeze(h, 0), lg.squeeze(c, 0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        unbatched, x, (h,) = self._prepare(input, hx, 1)
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return lg.squeeze(h, 0) if unbatched else h
