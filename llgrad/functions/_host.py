"""Host fast paths: the plain eager case of the host-computed functions (sorting,
`unique`, histograms, index writes, ...). With plain tensors and nothing to record they
work on NumPy views of the tensors' memory and write into new tensors, skipping the
general eager machinery; `host_plain` says when that is allowed. (A module of its own:
the public modules' functions become Tensor methods, these must not.)"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tape import forward as forward_ad
from ..dispatch.apply import interpreters as _interpreters
from ..dispatch.grad_mode import _state as _grad_state
from ..ir import dtypes as dt
from ..tensor import Tensor, recurring_maker
from ..tracer.context import _tls as _trace_tls


def host_plain(*tensors: Any) -> bool:
    """Whether a host-computed function may take its plain path on `tensors` (None
    entries are skipped): every one a plain `Tensor` (no tracer, no subclass), no
    interpreter (vmap, functional transforms) or forward-mode level active, no trace
    running, and no gradient to record (grad mode off, or nothing requires grad). The
    plain path computes the result on the host from the NumPy values and makes new
    tensors; anything else takes the function's general path."""
    if _interpreters or forward_ad._level[0] or _trace_tls.stack:
        return False
    record = _grad_state.enabled
    for t in tensors:
        if t is None:
            continue
        if t.__class__ is not Tensor or (record and t._requires_grad):
            return False
    return True


def host_view(t: Tensor) -> Any:
    """A NumPy array over `t`'s memory, as `t._numpy_view()` makes it (bfloat16 as uint16
    bits), in fewer steps."""
    shape = t._shape
    if 0 in shape:
        return t._numpy_view()
    item = t._dtype.itemsize
    return np.ndarray(
        shape,
        t._dtype.np,
        t._storage.buffer,
        t._offset * item,
        tuple([s * item for s in t._strides]),
    )


def host_values(t: Tensor) -> Any:
    """`t`'s values as NumPy holds them (`t._values()`: bfloat16 widened to float32)."""
    a = host_view(t)
    if t._dtype is dt.bfloat16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a


def host_broadcast(a: Any, shape: tuple[int, ...]) -> Any:
    """NumPy array `a` broadcast to `shape`, as a new C-contiguous array (a copy is
    cheaper than NumPy's `broadcast_to` on small arrays)."""
    out = np.empty(shape, a.dtype)
    out[...] = a
    return out


def host_empty(shape: tuple[int, ...], dtype: dt.DType) -> tuple[Tensor, Any]:
    """A new contiguous tensor of `shape` and `dtype` (uninitialized) and a NumPy array
    over its memory (bfloat16 as uint16 bits), for a host computation to write its
    result straight into during the call (`Storage.array`: the array must not be kept)."""
    make = recurring_maker(shape, dtype)
    out = make() if make is not None else Tensor._empty(shape, dtype)
    st = out._storage
    if st.nbytes:
        return out, st.array(shape, dtype.np)
    return out, np.empty(shape, dtype.np)


def host_tensor(a: Any, dtype: dt.DType) -> Tensor:
    """A new contiguous tensor of `dtype` holding NumPy array `a` (cast to `dtype`'s NumPy
    type as NumPy's assignment casts; bfloat16 takes its bits, `a` of uint16)."""
    shape = a.shape
    out = Tensor._empty(shape, dtype)
    if a.size:
        out._storage.buffer.view(dtype.np).reshape(shape)[...] = a
    return out


_ALONG_BASES: dict[tuple[tuple[int, ...], int], Any] = {}


def host_take_along(a: Any, idx: Any, axis: int) -> Any:
    """`numpy.take_along_axis(a, idx, axis)` for `idx` of `a`'s shape (int64): for a
    C-contiguous `a` one flat take at `base + idx * stride`, the base offsets (each
    element's with its `axis` coordinate zeroed) cached per shape and axis; other layouts
    go to NumPy's function."""
    shape = a.shape
    if idx.shape != shape or not a.flags.c_contiguous:
        return np.take_along_axis(a, idx, axis)
    step = 1
    for n in shape[axis + 1 :]:
        step *= n
    key = (shape, axis)
    base = _ALONG_BASES.get(key)
    if base is None:
        if len(_ALONG_BASES) > 256:
            _ALONG_BASES.clear()
        base = _ALONG_BASES[key] = (
            np.arange(a.size, dtype=np.int64).reshape(shape) - positions_along(shape, axis) * step
        )
    return a.reshape(-1).take(base + idx * step if step != 1 else base + idx)


_POSITIONS: dict[tuple[int, int, int], Any] = {}


def positions_along(shape: tuple[int, ...], d: int) -> Any:
    """0..n-1 (int64) along dimension `d` of an array of `shape`, size 1 elsewhere (read
    only; cached per size, rank and dimension)."""
    key = (shape[d], len(shape), d)
    pos = _POSITIONS.get(key)
    if pos is None:
        if len(_POSITIONS) > 256:
            _POSITIONS.clear()
        pos = np.arange(shape[d], dtype=np.int64).reshape(
            [n if k == d else 1 for k, n in enumerate(shape)]
        )
        pos.flags.writeable = False
        _POSITIONS[key] = pos
    return pos
