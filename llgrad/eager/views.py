"""Eager movement ops: views share storage; only what cannot be a view copies.

Each function checks its arguments with the op's shape rule (the registry's), then builds
the view's (offset, shape, strides). `reshape` copies through an elementwise kernel when
the strides cannot express the new shape, as PyTorch does.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Sequence

from .._keys import attrs_key
from ..ir import dtypes
from ..ir.types import normalize_axis
from ..ops.shape import check_permutation, expand_shape, infer_reshape_shape
from ..runtime import launch
from ..schedule.layout import contiguous_strides
from ..tensor import Tensor
from . import elementwise
from . import elementwise as ew
from .elementwise import copy_into


def view_of(t: Tensor, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> Tensor:
    base = t._base if t._base is not None else t
    return Tensor._make(t._storage, offset, shape, strides, t._dtype, base=base)


def contiguous(t: Tensor) -> Tensor:
    if t.is_contiguous():
        return t
    out = Tensor._empty(t._shape, t._dtype)
    return copy_into(out, t)


from ctypes import memmove as _memmove  # noqa: E402  (clone's host copy)

_HOST_COPY_BYTES = 1 << 16


def clone(t: Tensor) -> Tensor:
    """A row-major copy of `t` in new memory. A small row-major `t` is copied by the host
    (one memmove; a kernel launch costs more), unless kernels are being recorded
    (`launch.record_kernels`) or a forward's copies are (`copy_replay`)."""
    out = Tensor._empty(t._shape, t._dtype)
    if (
        t._strides == out._strides
        and ew.copy_log is None
        and not launch._recording
        and t._ptr.__class__ is int
    ):  # (a traced tensor has no memory: None)
        n = out._storage.nbytes
        if n <= _HOST_COPY_BYTES:
            if n:
                _memmove(out._ptr, t._ptr, n)
            return out
    return copy_into(out, t)


def _view_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], new_shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """Strides for `new_shape` over the same memory, or None if no view can express it.

    Walks groups of old dimensions that are contiguous with each other (PyTorch's
    `computeStride`): a group may be split or merged freely.
    """
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0 or not shape:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1] if strides else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (
            shape[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


_reshapes: dict[tuple, tuple[tuple[int, ...], tuple[int, ...] | None]] = {}


def reshape(t: Tensor, shape: tuple[int, ...], *, must_view: bool = False) -> Tensor:
    key = (t._shape, t._strides, shape)
    known = _reshapes.get(key)
    if known is not None:  # (a layout seen before: sizes checked then)
        new_shape, strides = known
        if strides is not None:
            return view_of(t, t._offset, new_shape, strides)
    else:
        new_shape = infer_reshape_shape(t.numel(), tuple(shape), "view" if must_view else "reshape")
        strides = _view_strides(t._shape, t._strides, new_shape)
        if len(_reshapes) < REPLAY_LIMIT:
            try:
                _reshapes[key] = (new_shape, strides)
            except TypeError:  # (sizes of a class that does not hash)
                pass
    if strides is None:
        if must_view:
            raise RuntimeError(
                f"view size is not compatible with input tensor's size and "
                f"stride (shape {list(t._shape)}, strides {list(t._strides)}, "
                f"requested {list(new_shape)}); use .reshape(...) instead"
            )
        c = contiguous(t)
        return view_of(c, c._offset, new_shape, contiguous_strides(new_shape))
    return view_of(t, t._offset, new_shape, strides)


def permute(t: Tensor, perm: tuple[int, ...]) -> Tensor:
    p = check_permutation(tuple(perm), t.ndim)
    return view_of(t, t._offset, tuple(t._shape[i] for i in p), tuple(t._strides[i] for i in p))


def transpose_matrix(t: Tensor) -> Tensor:
    """`permute(t, (1, 0))` of a 2-D tensor."""
    (n, m), (a, b) = t._shape, t._strides
    return view_of(t, t._offset, (m, n), (b, a))


def expand(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    new_shape = expand_shape(t._shape, tuple(shape))
    lead = len(new_shape) - t.ndim
    strides = [0] * lead
    for n, s, o in zip(t._shape, t._strides, new_shape[lead:]):
        strides.append(s if n == o else 0)
    return view_of(t, t._offset, new_shape, tuple(strides))


def slice_dims(
    t: Tensor, starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]
) -> Tensor:
    """A strided window; bounds already normalized to [0, size] and steps positive."""
    offset = t._offset
    shape = []
    for n, st, a, b, s in zip(t._shape, t._strides, starts, stops, steps):
        length = max(0, (b - a + s - 1) // s)
        if length:
            offset += a * st
        shape.append(length)
    strides = tuple(st * s for st, s in zip(t._strides, steps))
    return view_of(t, offset, tuple(shape), strides)


def select(t: Tensor, dim: int, index: int) -> Tensor:
    """`t[..., index, ...]` along `dim`: drops the dimension."""
    d = normalize_axis(dim, t.ndim, "select")
    n = t._shape[d]
    if not -n <= index < n:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {n}")
    index %= n
    return view_of(
        t,
        t._offset + index * t._strides[d],
        t._shape[:d] + t._shape[d + 1 :],
        t._strides[:d] + t._strides[d + 1 :],
    )


def flip_view(t: Tensor, axes: tuple[int, ...]) -> Tensor:
    """Flips copy (llgrad, like PyTorch, has no negative strides)."""
    axes_n = {normalize_axis(a, t.ndim, "flip") for a in axes}
    out = Tensor._empty(t._shape, t._dtype)
    # write through a view of `out` that walks each flipped axis backwards
    offset = 0
    strides = list(out._strides)
    for a in axes_n:
        if t._shape[a]:
            offset += (t._shape[a] - 1) * strides[a]
        strides[a] = -strides[a]
    target = Tensor._make(out._storage, offset, out._shape, tuple(strides), out._dtype)
    elementwise.copy_into(target, t)
    return out


# --------------------------------------------------------------------------------------
# replaying copy-only forwards
# --------------------------------------------------------------------------------------

REPLAY_LIMIT = 4096  # cached replays in all (each a few small tuples)
_replays: dict[tuple, "_CopyReplay"] = {}


class _CopyReplay:
    """A forward that made one new tensor and filled it with `copy_into` calls only,
    reduced to the copies: (operand index or -1 for a number, byte offset from that
    operand's data or the address of the packed number, byte offset into the output, the
    copy's plan). For the thread that recorded it, each small copy keeps an argument
    block of its own with the plan's constants in it, so a call writes the two pointers
    and calls the kernel; other threads, big copies (split across the thread pool) and
    calls while kernels are being recorded pack a block as `launch.call_split` does."""

    __slots__ = ("shape", "dtype", "strides", "parts", "numbers", "make", "thread", "calls")

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        strides: tuple[int, ...],
        parts: tuple[tuple[int, int, int, Any], ...],
        numbers: tuple = (),
    ):
        self.shape, self.dtype, self.strides, self.parts = shape, dtype, strides, parts
        self.numbers = numbers  # the packed numbers' memory (kept alive here)
        self.make = Tensor._empty_maker(shape, dtype, strides)
        self.thread = threading.get_ident()
        calls = []
        for index, src, dst, plan in parts:
            if plan.kernel is None:
                continue
            if plan.work >= launch.PARALLEL_MIN_WORK:
                calls.append((index, src, dst, None, 0, 0, 0, plan))
                continue
            block = (ctypes.c_int64 * len(plan.template))(*plan.template)
            calls.append(
                (
                    index,
                    src,
                    dst,
                    block,
                    ctypes.addressof(block),
                    plan.ptr_slots[0],
                    plan.ptr_slots[1],
                    plan,
                )
            )
        self.calls = tuple(calls)

    def run(self, operands: Sequence[Tensor]) -> Tensor:
        if launch._recording or threading.get_ident() != self.thread:
            return self._run_packed(operands)
        out = self.make()
        base = out._ptr
        for index, src, dst, block, addr, s0, s1, plan in self.calls:
            if block is None:
                args = plan.template.copy()
                slots = plan.ptr_slots
                args[slots[0]] = base + dst
                args[slots[1]] = operands[index]._ptr + src if index >= 0 else src
                launch.call_split(plan.kernel, args, plan.work)
                continue
            block[s0] = base + dst
            block[s1] = operands[index]._ptr + src if index >= 0 else src
            plan.kernel.fn(addr)
        return out

    def _run_packed(self, operands: Sequence[Tensor]) -> Tensor:
        out = Tensor._empty(self.shape, self.dtype, self.strides)
        base = out._ptr
        for index, src, dst, plan in self.parts:
            if plan.kernel is not None:
                args = plan.template.copy()
                slots = plan.ptr_slots
                args[slots[0]] = base + dst
                args[slots[1]] = operands[index]._ptr + src if index >= 0 else src
                launch.call_split(plan.kernel, args, plan.work)
        return out


def copy_replay(forward: Callable[[str, Any, dict], Tensor]) -> Callable[[str, Any, dict], Tensor]:
    """`forward(op, operands, attrs)` (an `apply` forward whose only kernels are
    `copy_into` calls from the operands, or from numbers in `attrs`, into the one new
    tensor it returns: cat, flip, pad, ...) made cheap to call again: the first call of
    each key (op, attributes, the operands' dtype, shape and strides) runs `forward`
    and keeps its copies; later calls replay them by pointer (allocate the output, one
    launch per copy) without building views or looking plans up. Calls whose copies
    read anything but the operands (a temporary), or whose operands share memory, are
    not kept (the next call runs `forward` again)."""

    def replayed(op: str, operands: Any, attrs: dict) -> Tensor:
        try:
            key = (forward, attrs_key(attrs) if attrs else (), tuple([o._lkey for o in operands]))
            r = _replays.get(key)
        except (TypeError, AttributeError):  # unhashable attribute, not a tensor
            return forward(op, operands, attrs)
        if r is not None:
            return r.run(operands)
        out, r = record_copies(lambda: forward(op, operands, attrs), operands)
        if r is not None and len(_replays) < REPLAY_LIMIT:
            _replays[key] = r
        return out

    replayed.__wrapped__ = forward  # type: ignore[attr-defined]
    replayed.__name__ = forward.__name__
    replayed.__doc__ = forward.__doc__
    return replayed


def record_copies(
    make: Callable[[], Tensor], operands: Sequence[Tensor]
) -> tuple[Tensor, _CopyReplay | None]:
    """`make()` (which must launch only `copy_into` kernels, from `operands` or numbers
    into the one new tensor it returns), and its replay on tensors of the operands'
    layouts, or None when it cannot have one (see `copy_replay`)."""
    if ew.copy_log is not None:  # (inside another recorded call)
        return make(), None
    log: list = []
    ew.copy_log = log
    try:
        out = make()
    finally:
        ew.copy_log = None
    return out, _reduce(operands, out, log)


def replay_of(
    forward: Callable[[str, Any, dict], Tensor], operands: Sequence[Tensor], attrs: dict
) -> _CopyReplay | None:
    """The replay `copy_replay(forward)` kept for these operands' layouts and `attrs`,
    if any."""
    try:
        return _replays.get(
            (
                forward.__wrapped__,  # type: ignore[attr-defined]
                attrs_key(attrs) if attrs else (),
                tuple([o._lkey for o in operands]),
            )
        )
    except TypeError:
        return None


def _reduce(operands: Sequence[Tensor], out: Tensor, log: list) -> _CopyReplay | None:
    """The replay of a recorded forward (see `copy_replay`), or None."""
    storages = {id(o._storage) for o in operands}
    numbers: list[ctypes.Array] = []
    if (
        len(storages) != len(operands)
        or out.__class__ is not Tensor
        or out._offset
        or id(out._storage) in storages
    ):
        return None
    parts = []
    for dst, src, plan in log:
        if dst._storage is not out._storage:
            return None
        if isinstance(src, Tensor):
            for index, o in enumerate(operands):
                if src._storage is o._storage:
                    parts.append((index, src._ptr - o._ptr, dst._ptr - out._ptr, plan))
                    break
            else:
                return None
        else:  # the number, packed into memory of the replay's own
            value = (ctypes.c_int64 * 2)()
            ctypes.memmove(value, ew._pack_scalar("copy_", src, dst._dtype, 0), 16)
            numbers.append(value)
            parts.append((-1, ctypes.addressof(value), dst._ptr - out._ptr, plan))
    return _CopyReplay(out._shape, out._dtype, out._strides, tuple(parts), tuple(numbers))


def clear_replays() -> None:
    _replays.clear()


dtypes.on_default_dtype_change(clear_replays)
