"""Variable-length sequences: `PackedSequence`, packing, padding and their inverses, with
PyTorch's layouts (time-major packed data, `batch_sizes` per step, `sorted_indices` /
`unsorted_indices` for batches not sorted by length).

Every function is built from differentiable functions (slices, cat, stack, index_select),
so gradients flow from packed data back to the padded inputs and the other way.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from ... import functions as lg
from ...ir import dtypes as dt
from ...tensor import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]


class _PackedSequenceBase(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedSequenceBase):
    """Sequences of different lengths packed time step by time step.

    `data` holds, for each time step t, the t-th element of every sequence that long
    (longest sequences first); `batch_sizes[t]` counts them; `sorted_indices` maps the
    packed order to the original batch positions (None when the batch was sorted) and
    `unsorted_indices` is its inverse."""

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Tensor | None = None,
        sorted_indices: Tensor | None = None,
        unsorted_indices: Tensor | None = None,
    ) -> "PackedSequence":
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise TypeError(
                "PackedSequence: batch_sizes must be given (build packed "
                "sequences with pack_padded_sequence or pack_sequence)"
            )
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        """`data` converted as `Tensor.to` converts it (the indices stay int64)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def double(self) -> "PackedSequence":
        """`data` as float64."""
        return self.to(dt.float64)

    def float(self) -> "PackedSequence":
        """`data` as float32."""
        return self.to(dt.float32)

    def half(self) -> "PackedSequence":
        """`data` as float16."""
        return self.to(dt.float16)

    def cpu(self) -> "PackedSequence":
        """Already on the CPU."""
        return self

    @property
    def is_cuda(self) -> bool:
        """Always False (llgrad runs on the CPU)."""
        return False

    def is_pinned(self) -> bool:
        """Always False."""
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of 0..n-1 (None stays None)."""
    if permutation is None:
        return None
    p = np.asarray(permutation.numpy()).astype(np.int64)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.shape[0], dtype=np.int64)
    return lg.tensor(inv)


def _lengths_array(lengths: Any) -> np.ndarray:
    if isinstance(lengths, Tensor):
        return np.asarray(lengths.detach().numpy()).astype(np.int64).reshape(-1)
    return np.asarray(list(lengths), dtype=np.int64).reshape(-1)


def pack_padded_sequence(
    input: Tensor,
    lengths: Tensor | Sequence[int],
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PackedSequence:
    """Pack a padded (T, B, *) batch (B, T, * with batch_first) of sequences of the given
    lengths. With `enforce_sorted` the lengths must be decreasing; otherwise the batch is
    sorted (stably) and the permutation kept in `sorted_indices`."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence: input must be a Tensor, got {type(input).__name__}")
    lens = _lengths_array(lengths)
    x = lg.transpose(input, 0, 1) if batch_first else input
    if x.ndim < 2 or lens.shape[0] != x.shape[1]:
        raise RuntimeError(
            f"pack_padded_sequence: expected {x.shape[1] if x.ndim > 1 else 0} "
            f"lengths (one per batch element), got {lens.shape[0]}"
        )
    if lens.shape[0] and lens.min() <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an "
            "element in 'lengths' that is <= 0"
        )
    if lens.shape[0] and lens.max() > x.shape[0]:
        raise RuntimeError(
            f"pack_padded_sequence: a length ({int(lens.max())}) exceeds the "
            f"padded sequence length {x.shape[0]}"
        )
    if enforce_sorted:
        if (np.diff(lens) > 0).any():
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when "
                "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                "to pack_padded_sequence and/or pack_sequence to sidestep this "
                "requirement if you do not need ONNX exportability."
            )
        sorted_indices = None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = lg.tensor(order.astype(np.int64))
        lens = lens[order]
        x = lg.index_select(x, 1, sorted_indices)
    steps = int(lens[0]) if lens.shape[0] else 0
    batch_sizes = np.array([(lens > t).sum() for t in range(steps)], dtype=np.int64)
    parts = [
        lg.slice_dim(lg.select(x, 0, t), 0, 0, int(b))
        if int(b) < x.shape[1]
        else lg.select(x, 0, t)
        for t, b in enumerate(batch_sizes)
    ]
    data = lg.cat(parts, 0) if parts else lg.reshape(x, (0,) + tuple(x.shape[2:]))
    return PackedSequence(data, lg.tensor(batch_sizes), sorted_indices, None)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Undo `pack_padded_sequence`: the padded (T, B, *) (or B, T, *) tensor in the
    original batch order and the int64 lengths. `total_length` pads to that many steps."""
    data, bs = sequence.data, np.asarray(sequence.batch_sizes.numpy()).astype(np.int64)
    steps = bs.shape[0]
    batch = int(bs[0]) if steps else 0
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                f"Expected total_length to be at least the length of the longest "
                f"sequence in input, but got total_length={total_length} and max "
                f"sequence length being {steps}"
            )
    rows = []
    start = 0
    feat = tuple(data.shape[1:])
    for b in bs:
        chunk = lg.slice_dim(data, 0, start, start + int(b))
        if int(b) < batch:
            filler = lg.full((batch - int(b),) + feat, padding_value, dtype=data._dtype)
            chunk = lg.cat([chunk, filler], 0)
        rows.append(chunk)
        start += int(b)
    length = steps if total_length is None else total_length
    for _ in range(length - steps):
        rows.append(lg.full((batch,) + feat, padding_value, dtype=data._dtype))
    padded = lg.stack(rows, 0) if rows else lg.zeros((0, 0) + feat, dtype=data._dtype)
    lens = np.array([(bs > i).sum() for i in range(batch)], dtype=np.int64)
    if sequence.unsorted_indices is not None:
        padded = lg.index_select(padded, 1, sequence.unsorted_indices)
        lens = lens[np.asarray(sequence.unsorted_indices.numpy()).astype(np.int64)]
    if batch_first:
        padded = lg.transpose(padded, 0, 1)
    return padded, lg.tensor(lens)


def pad_sequence(
    sequences: Tensor | Iterable[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack tensors of shapes (L_i, *) into (max L, B, *) (or B, max L, *), padding each
    with `padding_value` on the right (or the left with padding_side='left')."""
    if padding_side not in ("left", "right"):
        raise ValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    seqs = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in seqs)
    feat = tuple(seqs[0].shape[1:])
    out = []
    for s in seqs:
        if tuple(s.shape[1:]) != feat:
            raise RuntimeError(
                f"pad_sequence: every sequence must have trailing sizes "
                f"{list(feat)}, got {list(s.shape)}"
            )
        missing = longest - s.shape[0]
        if missing:
            fill = lg.full((missing,) + feat, padding_value, dtype=s._dtype)
            s = lg.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        out.append(s)
    return lg.stack(out, 0 if batch_first else 1)


def unpad_sequence(
    padded_sequences: Tensor, lengths: Tensor | Sequence[int], batch_first: bool = False
) -> list[Tensor]:
    """The list of unpadded sequences: sequence i is its first lengths[i] steps."""
    x = padded_sequences if batch_first else lg.transpose(padded_sequences, 0, 1)
    return [
        lg.slice_dim(lg.select(x, 0, i), 0, 0, int(n))
        for i, n in enumerate(_lengths_array(lengths))
    ]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of (L_i, *) tensors (decreasing lengths unless enforce_sorted=False)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a PackedSequence holds, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
