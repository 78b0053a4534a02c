"""Eager movement ops: views share storage; only what cannot be a view copies.

Each function checks its arguments with the op's shape rule (the registry's), then builds
the view's (offset, shape, strides). `reshape` copies through an elementwise kernel when
the strides cannot express the new shape, as PyTorch does.
"""
from __future__ import annotations

from ..ir.types import normalize_axis
from ..ops.shape import check_permutation, expand_shape, infer_reshape_shape
from ..tensor import Tensor
from .elementwise import copy_into
from ..schedule.layout import contiguous_strides


def view_of(t: Tensor, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> Tensor:
    base = t._base if t._base is not None else t
    return Tensor._make(t._storage, offset, shape, strides, t._dtype, base=base)


def contiguous(t: Tensor) -> Tensor:
    if t.is_contiguous():
        return t
    out = Tensor._empty(t._shape, t._dtype)
    return copy_into(out, t)


def clone(t: Tensor) -> Tensor:
    return copy_into(Tensor._empty(t._shape, t._dtype), t)


def _view_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                  new_shape: tuple[int, ...]) -> tuple[int, ...] | None:
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
        if tensor_d == 0 or (shape[tensor_d - 1] != 1 and
                             strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
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


def reshape(t: Tensor, shape: tuple[int, ...], *, must_view: bool = False) -> Tensor:
    new_shape = infer_reshape_shape(t.numel(), tuple(shape), "view" if must_view else "reshape")
    strides = _view_strides(t._shape, t._strides, new_shape)
    if strides is None:
        if must_view:
            raise RuntimeError(f"view size is not compatible with input tensor's size and "
                               f"stride (shape {list(t._shape)}, strides {list(t._strides)}, "
                               f"requested {list(new_shape)}); use .reshape(...) instead")
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


def slice_dims(t: Tensor, starts: tuple[int, ...], stops: tuple[int, ...],
               steps: tuple[int, ...]) -> Tensor:
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
    return view_of(t, t._offset + index * t._strides[d], t._shape[:d] + t._shape[d + 1:],
                   t._strides[:d] + t._strides[d + 1:])


def flip_view(t: Tensor, axes: tuple[int, ...]) -> Tensor:
    """Flips copy (llgrad, like PyTorch, has no negative strides)."""
    from . import elementwise
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
