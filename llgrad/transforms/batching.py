"""Batching: the batched tensor vmap works on, and one batching rule per op family.

A `BatchedTensor` stands, inside one `vmap`, for a whole batch of tensors of its
*logical* shape: it carries a `_value` whose dimension 0 is the batch (always the front:
`vmap` moves `in_dims` there) and the `VmapInterpreter` (one per vmap call, its *level*)
that owns it. Functions see only the logical shape, so user code and llgrad's own
functions run unchanged; every op reaches `llgrad.dispatch.apply.apply`, whose
interpreter stack hands ops with batched operands to the owning interpreter, which looks
up a rule here by the op's registry group:

- elementwise (unary/binary/ternary/cast): batched operands get their batch dimension in
  front and ones padded after it to the logical result rank, so NumPy broadcasting (which
  aligns trailing dimensions) pairs logical dimensions and leaves the batch leading;
- reductions: axes shift by one; `axes=()` means every *logical* axis, never the batch;
- movement (reshape, permute, expand, slice, pad, cat, flip): attributes get the batch
  dimension prepended;
- matmul: the batch becomes a leading batch dimension of the matmul (padded like
  elementwise operands so matmul's batch broadcasting pairs logical dimensions);
- composite ops: axis-based ones (mean, var, std, logsumexp, norm, softmax) shift their
  axes and stay one op; nll_loss, conv2d, max_pool2d and embedding fold the vmap batch
  into their own batch dimension (a batched conv weight into the groups); the others
  (mse, bce, addmm, layer_norm with batched affine parameters) run their decomposition
  under these rules;
- indexing (`x[idx]`, batched x and/or batched index tensors): the batch becomes an extra
  leading index.

Each rule calls `apply` again on the values (one level down), so autograd, forward-mode
AD, lower vmap levels and the tracer all see ordinary ops. Nested vmaps nest wrappers
with the *innermost* (highest) level outermost, so a tensor's batch dimensions in its
plain value appear in level order (lowest level first).

An op with no rule, or code that reads a batched tensor's memory directly instead of
going through `apply`, raises `BatchingError` naming the function.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Sequence

import numpy as np

from .. import functions as F
from ..dispatch.apply import apply, apply_composite, dispatch_function
from ..functions.indexing import getitem as plain_getitem
from ..functions.reduction import _axes, _forward
from ..ir import dtypes as dt, registry
from ..ir.registry import Group
from ..ir.types import TensorType, broadcast_shapes, normalize_axis
from ..ops.linalg import matmul_shapes
from ..ops.reduction import normalize_axes
from ..ops.shape import check_permutation
from ..tensor import SymbolicTensor, Tensor

__all__ = [
    "BatchedTensor",
    "BatchingError",
    "levels",
    "to_value",
    "from_value",
    "lift",
    "unlift",
    "bottom",
    "getitem",
]


class BatchingError(RuntimeError):
    """vmap cannot express an operation (no rule, or memory read behind apply's back)."""


_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HERE = os.path.dirname(os.path.abspath(__file__))


def _culprit() -> str:
    """The outermost llgrad function (outside the transforms) on the current stack."""
    frame = sys._getframe(2)
    found = None
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if path.startswith(_HERE) or not path.startswith(_PKG):
            if found is not None:
                break
        else:
            found = frame
        frame = frame.f_back
    if found is None:
        return "an llgrad function"
    rel = os.path.relpath(found.f_code.co_filename, os.path.dirname(_PKG))
    return f"`{found.f_code.co_name}` ({rel})"


# --------------------------------------------------------------------------------------
# the batched tensor
# --------------------------------------------------------------------------------------


class BatchedTensor(SymbolicTensor):
    """A batch of tensors inside one vmap: `_value` has the batch at dimension 0."""

    __slots__ = ("_value", "_interpreter")

    @classmethod
    def _wrap(cls, value: Tensor, interp: Any) -> "BatchedTensor":
        if not value._shape or value._shape[0] != interp.size:
            raise AssertionError(
                f"vmap: a batched value needs the batch ({interp.size}) in "
                f"front, got shape {list(value._shape)}"
            )
        t = object.__new__(cls)
        t._value = value
        t._interpreter = interp
        t._shape = value._shape[1:]
        t._dtype = value._dtype
        t._init_state()
        return t

    # -- no memory of its own ---------------------------------------------------------
    def _memory(self, what: str) -> Any:
        if not self._interpreter.active:
            raise BatchingError(
                f"a batched tensor of a vmap that has already returned was "
                f"used ({what}): a batched value escaped its vmap (through a "
                f"closure, a global or a side output)"
            )
        raise BatchingError(
            f"vmap: {_culprit()} reads the memory of a batched tensor "
            f"directly ({what}) instead of going through "
            f"llgrad.dispatch.apply, so it has no batching rule (in-place "
            f"ops, data-dependent functions and a few indexing helpers are "
            f"not supported under vmap)"
        )

    _storage = property(lambda self: self._memory("its storage"))
    _offset = property(lambda self: self._memory("its storage offset"))
    _strides = property(lambda self: self._memory("its strides"))
    _ptr = property(lambda self: self._memory("its data pointer"))

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes never set: any other per-tensor memory field
        # (`Tensor.__slots__`) that eager code reads is a read behind apply's back too
        if name in Tensor.__slots__:
            return self._memory(f"its `{name}`")
        raise AttributeError(f"'BatchedTensor' object has no attribute {name!r}")

    def _data_dependent(self, what: str) -> Any:
        raise BatchingError(
            f"vmap: {what} of a batched tensor (logical shape "
            f"{list(self._shape)}, batch of {self._interpreter.size}) would "
            f"need one value per batch element; Python control flow on "
            f"tensor values cannot be batched (use lg.where)"
        )

    def _no_data(self, what: str) -> Any:
        return self._data_dependent(what)

    def is_contiguous(self) -> bool:
        return True  # layout is the value's business; every rule goes through ops

    # -- autograd state lives on the plain values ---------------------------------------
    def _alias(self) -> "BatchedTensor":
        return BatchedTensor._wrap(self._value._alias(), self._interpreter)

    def requires_grad_(self, requires_grad: bool = True) -> "BatchedTensor":
        if requires_grad:
            raise BatchingError(
                "vmap: requires_grad_() on a batched tensor is not supported; "
                "differentiate inside vmap with llgrad.transforms.grad, vjp "
                "or jvp, which handle batched values"
            )
        return self

    # -- indexing ---------------------------------------------------------------------
    def __getitem__(self, index: Any) -> Tensor:
        return getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise BatchingError(
            "vmap: `x[...] = v` on a batched tensor is not supported (the "
            "transforms follow JAX: values are immutable); build the result "
            "functionally, e.g. with lg.where or lg.cat"
        )

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _arg_reduce("argmax", self, dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _arg_reduce("argmin", self, dim, keepdim)

    def __repr__(self) -> str:
        return (
            f"BatchedTensor(level={self._interpreter.level}, bdim=0, "
            f"logical shape={list(self._shape)}, dtype={self._dtype.name}, value=\n"
            f"{self._value!r})"
        )

    __str__ = __repr__


def _arg_reduce(op: str, x: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    """`x.argmax(dim)` on a batched tensor, through `apply` (the function calls eager
    code directly; this method keeps `x.argmax()` working under vmap)."""
    axes = _axes(dim, x.ndim, op)
    return apply(op, (x,), {"axes": axes, "keepdim": keepdim and dim is not None}, _forward)


# --------------------------------------------------------------------------------------
# levels: moving between logical tensors and their values
# --------------------------------------------------------------------------------------


def owner(t: Any) -> Any:
    return t._interpreter if type(t) is BatchedTensor else None


def levels(t: Any) -> list[Any]:
    """The interpreters batching `t`, outermost wrapper (highest level) first."""
    out = []
    while type(t) is BatchedTensor:
        out.append(t._interpreter)
        t = t._value
    return out


def bottom(t: Any) -> Any:
    """The plain tensor under all of `t`'s wrappers."""
    while type(t) is BatchedTensor:
        t = t._value
    return t


def to_value(t: Tensor, interp: Any) -> Tensor:
    """`t` with `interp`'s batch as an explicit leading dimension.

    The result's logical shape is `(interp.size, *t.shape)`; it is `t`'s value when `t`
    is batched at that level, a broadcast (expand) when it is not, and the batch is
    moved out from under higher levels when it sits below them.
    """
    if type(t) is BatchedTensor:
        owner_ = t._interpreter
        if owner_ is interp:
            return t._value
        if owner_.level > interp.level:
            inner = to_value(t._value, interp)  # (n_interp, n_owner, *shape)
            return BatchedTensor._wrap(F.transpose(inner, 0, 1), owner_)
    return F.expand(F.unsqueeze(t, 0), (interp.size,) + tuple(t._shape))


def from_value(t: Tensor, interp: Any) -> Tensor:
    """The inverse of `to_value`: `t`'s leading dimension becomes `interp`'s batch."""
    if type(t) is BatchedTensor and t._interpreter.level > interp.level:
        owner_ = t._interpreter
        return BatchedTensor._wrap(from_value(F.transpose(t._value, 0, 1), interp), owner_)
    if type(t) is BatchedTensor and t._interpreter is interp:
        raise AssertionError("vmap: a tensor is already batched at this level")
    return BatchedTensor._wrap(t, interp)


def lift(t: Tensor, interps: Sequence[Any]) -> Tensor:
    """`t` with the batches of `interps` explicit (lowest level outermost)."""
    for interp in sorted(interps, key=lambda i: -i.level):
        t = to_value(t, interp)
    return t


def unlift(t: Tensor, interps: Sequence[Any]) -> Tensor:
    """The inverse of `lift`."""
    for interp in sorted(interps, key=lambda i: i.level):
        t = from_value(t, interp)
    return t


def union_levels(tensors: Sequence[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for t in tensors:
        for i in levels(t):
            seen[id(i)] = i
    return sorted(seen.values(), key=lambda i: i.level)


# --------------------------------------------------------------------------------------
# rules: each takes the interpreter (`I`) and the op as `apply` received it
# --------------------------------------------------------------------------------------


def _tt(t: Tensor) -> TensorType:
    return TensorType(t._dtype, tuple(t._shape))


def _set(attrs: dict[str, Any] | None, **changes: Any) -> dict[str, Any]:
    out = dict(attrs or {})
    out.update(changes)
    return out


def rule_elementwise(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    shapes = [tuple(o._shape) for o in operands if isinstance(o, Tensor)]
    rank = len(broadcast_shapes(*shapes, op=op))
    args = tuple(I.aligned(o, rank) if I.mine(o) else o for o in operands)
    return I.wrap(apply(op, args, attrs, forward, name))


def rule_reduce(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    (x,) = operands
    axes, keepdim = attrs["axes"], attrs["keepdim"]
    registry.get(op).infer((_tt(x),), axes=axes, keepdim=keepdim)  # logical checks
    v, n, r = x._value, I.size, x.ndim
    if r == 0:  # a 0-d tensor reduces nothing: one element per row
        out = apply(
            op, (F.reshape(v, (n, 1)),), _set(attrs, axes=(1,), keepdim=False), forward, name
        )
        return I.wrap(out)
    if op in ("argmax", "argmin") and not axes:  # index into the flattened logical
        flat = F.reshape(v, (n, x.numel()))
        out = apply(op, (flat,), _set(attrs, axes=(1,), keepdim=False), forward, name)
        if keepdim:
            out = F.reshape(out, (n,) + (1,) * r)
        return I.wrap(out)
    norm = normalize_axes(op, axes, tuple(x._shape))
    out = apply(op, (v,), _set(attrs, axes=tuple(a + 1 for a in norm)), forward, name)
    return I.wrap(out)


def rule_reshape(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    (x,) = operands
    shape = registry.get(op).infer((_tt(x),), shape=attrs["shape"]).shape
    return I.wrap(apply(op, (x._value,), _set(attrs, shape=(I.size,) + shape), forward, name))


def rule_permute(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    (x,) = operands
    perm = check_permutation(tuple(attrs["perm"]), x.ndim)
    return I.wrap(
        apply(op, (x._value,), _set(attrs, perm=(0,) + tuple(p + 1 for p in perm)), forward, name)
    )


def rule_expand(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    (x,) = operands
    shape = registry.get(op).infer((_tt(x),), shape=attrs["shape"]).shape
    v = I.aligned(x, len(shape))
    return I.wrap(apply(op, (v,), _set(attrs, shape=(I.size,) + shape), forward, name))


def rule_slice(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    (x,) = operands
    registry.get(op).infer(
        (_tt(x),), starts=attrs["starts"], stops=attrs["stops"], steps=attrs["steps"]
    )
    new = _set(
        attrs,
        starts=(0,) + tuple(attrs["starts"]),
        stops=(I.size,) + tuple(attrs["stops"]),
        steps=(1,) + tuple(attrs["steps"]),
    )
    return I.wrap(apply(op, (x._value,), new, forward, name))


def rule_pad(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    (x,) = operands
    for key in ("lows", "highs", "interior"):
        if len(attrs[key]) != x.ndim:
            raise RuntimeError(
                f"pad: {key} needs one entry per dimension of {_tt(x)}, got {list(attrs[key])}"
            )
    new = _set(
        attrs,
        lows=(0,) + tuple(attrs["lows"]),
        highs=(0,) + tuple(attrs["highs"]),
        interior=(0,) + tuple(attrs["interior"]),
    )
    return I.wrap(apply(op, (x._value,), new, forward, name))


def rule_flip(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    (x,) = operands
    axes = tuple(normalize_axis(a, x.ndim, "flip") + 1 for a in attrs["axes"])
    return I.wrap(apply(op, (x._value,), _set(attrs, axes=axes), forward, name))


def rule_cat(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    first = operands[0]
    d = first._dtype  # shapes only: eager promotes mixed dtypes itself
    registry.get(op).infer(
        tuple(TensorType(d, tuple(o._shape)) for o in operands), axis=attrs["axis"]
    )
    axis = normalize_axis(attrs["axis"], first.ndim, "cat") + 1
    values = tuple(I.batched(o) for o in operands)
    return I.wrap(apply(op, values, _set(attrs, axis=axis), forward, name))


def rule_matmul(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    a, b = operands
    matmul_shapes(tuple(a._shape), tuple(b._shape))  # logical shape errors
    rank = max(a.ndim, b.ndim)
    args = tuple(I.aligned(o, rank) if I.mine(o) else o for o in (a, b))
    return I.wrap(apply(op, args, attrs, forward, name))


def _batch_offsets(I: Any, index: Tensor, numel: int) -> Tensor:
    """A batched linear index into one flat buffer of all batch elements: each element's
    offsets (negative ones wrapped once, as the primitives do) shifted by its position
    times `numel`; an offset out of range stays out of range, so the kernel still raises."""
    idx = I.batched(index)  # (n, *index.shape)
    wrapped = F.where(F.lt(idx, 0), F.add(idx, numel), idx)
    bad = F.logical_or(F.lt(wrapped, 0), F.ge(wrapped, numel))
    shift = F.reshape(F.mul(F.arange(I.size), numel), (I.size,) + (1,) * index.ndim)
    return F.where(bad, I.size * numel, F.add(wrapped, shift))


def rule_linear_index(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    """gather / scatter_add / index_put over a linear index: the batch elements' buffers
    laid end to end, each element's offsets shifted into its own part."""
    registry.get(op).infer(tuple(_tt(o) for o in operands))  # logical checks
    x, index = operands[0], operands[1]
    numel = x.numel()
    flat = F.reshape(I.batched(x), (I.size * numel,))
    offsets = _batch_offsets(I, index, numel)
    if op == "gather":
        return I.wrap(apply(op, (flat, offsets), attrs, forward, name))
    src = F.expand(
        I.aligned(operands[2], index.ndim) if I.mine(operands[2]) else operands[2],
        tuple(offsets._shape),
    )
    out = apply(op, (flat, offsets, src), attrs, forward, name)
    return I.wrap(F.reshape(out, (I.size,) + tuple(x._shape)))


def rule_trailing_pair(
    I: Any,
    op: str,
    operands: Sequence[Any],
    attrs: Any,
    forward: Callable[..., Tensor],
    name: str | None,
) -> Tensor:
    """view_as_real / view_as_complex add or remove a trailing (re, im) dimension, which
    the leading batch dimension does not touch."""
    return I.wrap(apply(op, (I.batched(operands[0]),), attrs, forward, name))


GROUP_RULES: dict[Group, Callable[..., Tensor]] = {
    Group.UNARY: rule_elementwise,
    Group.BINARY: rule_elementwise,
    Group.TERNARY: rule_elementwise,
    Group.CAST: rule_elementwise,
    Group.REDUCE: rule_reduce,
    Group.LINALG: rule_matmul,
}

OP_RULES: dict[str, Callable[..., Tensor]] = {
    "reshape": rule_reshape,
    "permute": rule_permute,
    "expand": rule_expand,
    "slice": rule_slice,
    "pad": rule_pad,
    "flip": rule_flip,
    "cat": rule_cat,
    "gather": rule_linear_index,
    "scatter_add": rule_linear_index,
    "index_put": rule_linear_index,
    "view_as_real": rule_trailing_pair,
    "view_as_complex": rule_trailing_pair,
}


def rule_for(op: str) -> Callable[..., Tensor]:
    rule = OP_RULES.get(op)
    if rule is not None:
        return rule
    opdef = registry.get(op)
    rule = GROUP_RULES.get(opdef.group)
    if rule is None:
        why = {
            Group.RANDOM: "random numbers per batch element are not supported "
            "(vmap has no `randomness` option)",
            Group.INDEX: "use Python indexing (x[idx]), which has a batching rule",
        }.get(opdef.group, "")
        raise BatchingError(
            f"vmap: no batching rule for op '{op}' (group "
            f"{opdef.group.value}){'; ' + why if why else ''}"
        )
    return rule


# --------------------------------------------------------------------------------------
# composite ops
# --------------------------------------------------------------------------------------


def comp_axes(
    I: Any, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
) -> Tensor:
    """mean, var, std, logsumexp, norm: one op on the value with shifted axes."""
    (x,) = operands
    v, n, r = x._value, I.size, x.ndim
    if r == 0:
        return I.wrap(
            apply_composite(
                op, (F.reshape(v, (n, 1)),), _set(attrs, axes=(1,), keepdim=False), name
            )
        )
    norm = normalize_axes(op, tuple(attrs["axes"]), tuple(x._shape))
    return I.wrap(apply_composite(op, (v,), _set(attrs, axes=tuple(a + 1 for a in norm)), name))


def comp_dim(
    I: Any, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
) -> Tensor:
    """softmax, log_softmax."""
    (x,) = operands
    v, n = x._value, I.size
    if x.ndim == 0:
        out = apply_composite(op, (F.reshape(v, (n, 1)),), _set(attrs, dim=1), name)
        return I.wrap(F.reshape(out, (n,)))
    dim = normalize_axis(attrs["dim"], x.ndim, op) + 1
    return I.wrap(apply_composite(op, (v,), _set(attrs, dim=dim), name))


def _merge_batch(t: Tensor) -> Tensor:
    """(n, N, ...) -> (n * N, ...)."""
    return F.reshape(t, (t._shape[0] * t._shape[1],) + tuple(t._shape[2:]))


def comp_max_pool2d(
    I: Any, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
) -> Tensor:
    (x,) = operands
    registry.get(op).infer((_tt(x),), **attrs)
    v = x._value
    out = apply_composite(op, (_merge_batch(v),), attrs, name)
    return I.wrap(F.reshape(out, tuple(v._shape[:2]) + tuple(out._shape[1:])))


def comp_conv2d(
    I: Any, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
) -> Tensor:
    """The vmap batch folds into N (shared weight) or into the groups (batched weight)."""
    x, w = operands[:2]
    bias = operands[2] if attrs["has_bias"] else None
    registry.get(op).infer(tuple(_tt(o) for o in operands), **attrs)
    n = I.size
    xb = I.batched(x)  # (n, N, C, H, W)
    base = _set(attrs, has_bias=False)
    if not I.mine(w):
        out = apply_composite(op, (_merge_batch(xb), w), base, name)
        out = F.reshape(out, (n, xb._shape[1]) + tuple(out._shape[1:]))  # (n, N, O, h, w)
    else:
        big_n, c = xb._shape[1], xb._shape[2]
        xg = F.reshape(F.transpose(xb, 0, 1), (big_n, n * c) + tuple(xb._shape[3:]))
        wv = w._value  # (n, O, C/g, kh, kw)
        wg = F.reshape(wv, (n * wv._shape[1],) + tuple(wv._shape[2:]))
        out = apply_composite(op, (xg, wg), _set(base, groups=attrs["groups"] * n), name)
        out = F.reshape(out, (big_n, n, wv._shape[1]) + tuple(out._shape[2:]))
        out = F.transpose(out, 0, 1)
    if bias is not None:
        bv = I.batched(bias)  # (n, O)
        out = F.add(out, F.reshape(bv, (n, 1, bv._shape[1], 1, 1)))
    return I.wrap(out)


def comp_embedding(
    I: Any, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
) -> Tensor:
    w, idx = operands
    registry.get(op).infer((_tt(w), _tt(idx)), **attrs)
    n = I.size
    if not I.mine(w):
        return I.wrap(apply_composite(op, (w, idx._value), attrs, name))
    wv = w._value  # (n, V, D)
    vocab = wv._shape[1]
    iv = I.batched(idx).to(dt.int64)  # (n, *is)
    offsets = F.reshape(F.mul(F.arange(n, dtype=dt.int64), vocab), (n,) + (1,) * idx.ndim)
    flat_w = F.reshape(wv, (n * vocab, wv._shape[2]))
    out = apply_composite(op, (flat_w, F.add(iv, offsets)), _set(attrs, padding_idx=None), name)
    if attrs["padding_idx"] is not None:  # padding rows read values but get no gradient
        pad = F.unsqueeze(F.eq(iv, attrs["padding_idx"]), -1)
        out = F.where(pad, out.detach(), out)
    return I.wrap(out)


def comp_nll_loss(
    I: Any, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
) -> Tensor:
    """Per-item losses over (n * N) items, then the reduction per batch element."""
    x, t = operands[:2]
    weight = operands[2] if attrs["has_weight"] else None
    if weight is not None and I.mine(weight):
        return I.decompose(op, operands, attrs)
    registry.get(op).infer(tuple(_tt(o) for o in operands), **attrs)
    xv, tv = I.batched(x), I.batched(t)
    rest = (weight,) if weight is not None else ()
    if x.ndim == 1:  # (C,): one item per element
        losses = apply_composite(op, (xv, tv) + rest, _set(attrs, reduction="none"), name)
    else:
        losses = apply_composite(
            op, (_merge_batch(xv), _merge_batch(tv)) + rest, _set(attrs, reduction="none"), name
        )
        losses = F.reshape(losses, tuple(tv._shape))
    reduction = attrs["reduction"]
    if reduction == "none":
        return I.wrap(losses)
    dims = tuple(range(1, losses.ndim))
    total = F.sum(losses, dims) if dims else losses
    if reduction == "sum":
        return I.wrap(total)
    valid = F.ne(tv, attrs["ignore_index"])
    if weight is None:
        wt = valid.to(losses._dtype)
    else:
        safe = F.where(valid, tv, 0)
        wt = F.reshape(F.index_select(weight, 0, F.reshape(safe, (-1,))), tuple(tv._shape))
        wt = F.where(valid, wt, 0.0)
    denom = F.sum(wt, dims) if dims else wt
    return I.wrap(F.div(total, denom))


def comp_layer_norm(
    I: Any, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
) -> Tensor:
    x, rest = operands[0], operands[1:]
    if any(I.mine(o) for o in rest) or not I.mine(x):
        return I.decompose(op, operands, attrs)
    return I.wrap(apply_composite(op, (x._value,) + tuple(rest), attrs, name))


COMPOSITE_RULES: dict[str, Callable[..., Tensor]] = {
    "mean": comp_axes,
    "var": comp_axes,
    "std": comp_axes,
    "logsumexp": comp_axes,
    "norm": comp_axes,
    "softmax": comp_dim,
    "log_softmax": comp_dim,
    "max_pool2d": comp_max_pool2d,
    "conv2d": comp_conv2d,
    "embedding": comp_embedding,
    "nll_loss": comp_nll_loss,
    "layer_norm": comp_layer_norm,
}


# --------------------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------------------


def getitem(x: Tensor, index: Any) -> Tensor:
    """`x[index]` through the interpreter stack: batched `x` or batched index tensors."""
    items = index if isinstance(index, tuple) else (index,)
    tensors = [x] + [i for i in items if isinstance(i, Tensor)]
    return dispatch_function("getitem", tensors, plain_getitem, (x, index))


def _kind(item: Any) -> tuple[str, int]:
    """(kind, rank) of an index item, with llgrad's (PyTorch's) reading of it.

    Kinds: none, ellipsis, int, slice, adv (an integer index array of that rank), mask (a
    bool array of that rank; it consumes `rank` dimensions), bool (a bool scalar)."""
    if item is None:
        return ("none", 0)
    if item is Ellipsis:
        return ("ellipsis", 0)
    if isinstance(item, (bool, np.bool_)):
        return ("bool", 0)
    if isinstance(item, slice):
        return ("slice", 0)
    if isinstance(item, Tensor):
        if item._dtype is dt.bool_:
            return ("mask", item.ndim)
        return ("int", 0) if item.ndim == 0 else ("adv", item.ndim)
    if isinstance(item, (list, np.ndarray)):
        arr = np.asarray(item)
        if arr.dtype == np.bool_:
            return ("mask", arr.ndim)
        return ("int", 0) if arr.ndim == 0 else ("adv", arr.ndim)
    return ("int", 0)


_ADVANCED = ("adv", "mask", "bool")


def _view_dims(kinds: list[tuple[str, int]], ndim: int) -> list[int]:
    """How many dimensions of the basic view each item produces."""
    consumed = sum(
        1 if k in ("int", "slice", "adv") else (r if k == "mask" else 0) for k, r in kinds
    )
    out = []
    for k, r in kinds:
        if k == "ellipsis":
            out.append(max(ndim - consumed, 0))
        elif k in ("slice", "none", "adv", "bool"):
            out.append(1)
        elif k == "mask":
            out.append(r)
        else:
            out.append(0)
    return out


def _adjacent(kinds: list[tuple[str, int]], dims: list[int], adv: list[int]) -> bool:
    """Whether the advanced items sit next to each other in the basic view."""
    if not adv:
        return True
    for i in range(adv[0] + 1, adv[-1]):
        if i not in adv and dims[i] > 0:
            return False
    return True


def rule_getitem(I: Any, x: Tensor, index: Any) -> Tensor:
    items = list(index) if isinstance(index, tuple) else [index]
    if any(I.mine(i) for i in items):
        return _getitem_batched_index(I, x, items)
    kinds = [_kind(i) for i in items]
    dims = _view_dims(kinds, x.ndim)
    adv = [i for i, (k, _) in enumerate(kinds) if k in _ADVANCED]
    out = getitem(x._value, tuple([slice(None)] + items))
    if adv and not _adjacent(kinds, dims, adv):
        # NumPy/PyTorch put non-adjacent advanced dims first, i.e. before the batch
        k = max(1 if kinds[i][0] != "adv" else kinds[i][1] for i in adv)
        out = F.movedim(out, k, 0)
    return I.wrap(out)


def _getitem_batched_index(I: Any, x: Tensor, items: list[Any]) -> Tensor:
    """Batched index tensors: the batch becomes one more advanced index, `arange(n)`."""
    n = I.size
    conv: list[Any] = []
    for item in items:
        if isinstance(item, (list, np.ndarray)):
            arr = np.asarray(item)
            if arr.dtype != np.bool_ and arr.ndim:
                item = F.tensor(arr.astype(np.int64))
        kind = _kind(item)[0]
        if kind in ("mask", "bool"):
            raise BatchingError(
                "vmap: a boolean mask together with batched index tensors "
                "gives a data-dependent shape; use integer indices or "
                "lg.where"
            )
        conv.append(item)
    # logical reading: a batched 0-d index is an int (a select) in every batch element
    logical = [("int", 0) if (isinstance(i, Tensor) and i.ndim == 0) else _kind(i) for i in conv]
    dims = _view_dims(logical, x.ndim)
    adv = [i for i, (k, _) in enumerate(logical) if k == "adv"]
    shapes = [tuple(i._shape) for i in conv if isinstance(i, Tensor) and (i.ndim > 0 or I.mine(i))]
    block = broadcast_shapes(*shapes, op="index")
    k = len(block)
    value_index: list[Any] = [F.reshape(F.arange(n, dtype=dt.int64), (n,) + (1,) * k)]
    for item in conv:
        value_index.append(I.aligned(item, k) if I.mine(item) else item)
    out = getitem(I.batched(x), tuple(value_index))  # (n, *block, *others)
    if adv and _adjacent(logical, dims, adv):
        p = sum(dims[: adv[0]])
        if p:
            perm = (
                [0]
                + list(range(1 + k, 1 + k + p))
                + list(range(1, 1 + k))
                + list(range(1 + k + p, out.ndim))
            )
            out = F.permute(out, tuple(perm))
    return I.wrap(out)
