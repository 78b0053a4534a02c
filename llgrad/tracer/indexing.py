"""`x[index]` on a tracer: basic indices as view ops, advanced ones as one `gather`.

The `gather` primitive reads a row-major tensor at linear element offsets, so advanced
indexing becomes arithmetic on index tensors: each output element's offset is the sum of
its coordinate in every dimension times that dimension's stride, where advanced dims take
their coordinate from the (broadcast, wrapped) index tensors and the other dims from iota.
NumPy's placement rule holds: adjacent advanced indices stay in place, separated ones move
their dims to the front. Boolean masks depend on data and are a graph break.
"""

from __future__ import annotations

from typing import Any

from .. import functions as F
from ..dispatch.apply import apply
from ..ir import dtypes as dt
from ..ir.types import broadcast_shapes
from ..schedule.layout import contiguous_strides
from ..tensor import Tensor
from .tensor import GraphBreak, TracerTensor


def _expand_index(x: Tensor, index: Any) -> list[Any]:
    items = list(index) if isinstance(index, tuple) else [index]
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > x.ndim:
        raise IndexError(f"getitem: too many indices for tensor of dimension {x.ndim}")
    ellipsis = [k for k, i in enumerate(items) if i is Ellipsis]
    if ellipsis:
        k = ellipsis[0]
        items[k : k + 1] = [slice(None)] * (x.ndim - used)
    else:
        items += [slice(None)] * (x.ndim - used)
    return items


def getitem(x: TracerTensor, index: Any) -> Tensor:
    items = _expand_index(x, index)
    # 1. basic part: ints select, slices narrow, None inserts; advanced kept for step 2
    out = x
    dim = 0
    advanced: list[tuple[int, Tensor]] = []
    for it in items:
        if it is None:
            out = F.unsqueeze(out, dim)
            dim += 1
        elif isinstance(it, bool):
            raise GraphBreak("indexing with a Python bool", None)
        elif isinstance(it, int):
            out = F.select(out, dim, it)
        elif isinstance(it, slice):
            n = out._shape[dim]
            if it.step is not None and it.step <= 0:
                raise ValueError(
                    "getitem: slice step cannot be zero"
                    if it.step == 0
                    else "getitem: step must be greater than zero"
                )
            start, stop, step = it.indices(n)
            if (start, stop, step) != (0, n, 1):
                stop = max(stop, start)
                out = F.slice_dim(
                    out,
                    dim,
                    start,
                    start + ((stop - start + step - 1) // step - 1) * step + 1
                    if stop > start
                    else start,
                    step,
                )
            dim += 1
        else:
            t = it if isinstance(it, Tensor) else F.tensor(it)
            if t._dtype is dt.bool_:
                raise GraphBreak("boolean mask indexing (its result size depends on data)", None)
            if t._dtype.kind not in "iu":
                raise IndexError(
                    f"getitem: tensors used as indices must be long, int, byte "
                    f"or bool tensors, got {t._dtype.name}"
                )
            if out._shape[dim] == 0 and t.numel():  # no kernel would check them
                raise IndexError(f"getitem: index is out of bounds for dimension {dim} with size 0")
            advanced.append((dim, t))
            dim += 1
    if not advanced:
        return out
    return _gather(out, advanced)


def _gather(x: Tensor, advanced: list[tuple[int, Tensor]]) -> Tensor:
    ctx = next(o._ctx for o in [x] + [t for _, t in advanced] if isinstance(o, TracerTensor))
    dims = [d for d, _ in advanced]
    index_shape = broadcast_shapes(*(t._shape for _, t in advanced), op="index")
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    rest = [d for d in range(x.ndim) if d not in dims]
    if adjacent:
        before = [d for d in rest if d < dims[0]]
        after = [d for d in rest if d > dims[-1]]
    else:
        before, after = [], rest
    out_shape = tuple(x._shape[d] for d in before) + index_shape + tuple(x._shape[d] for d in after)
    rank = len(out_shape)
    strides = contiguous_strides(x._shape)
    lead = len(before)
    linear = None

    def place(t: Tensor, at: int, width: int) -> Tensor:
        shape = [1] * rank
        shape[at : at + width] = t._shape if t.ndim else []
        return F.reshape(t, tuple(shape)) if t.ndim else t

    for pos, d in enumerate(before + after):
        at = pos if pos < lead else pos + len(index_shape)
        term = F.mul(place(ctx.iota(x._shape[d]), at, 1), strides[d])
        linear = term if linear is None else F.add(linear, term)
    numel = 1
    for size in x._shape:
        numel *= size
    for d, t in advanced:
        n = x._shape[d]
        t = t.to(dt.int64)
        wrapped = F.where(F.lt(t, 0), F.add(t, n), t)
        # an index outside [-n, n) must fail, not land on another element of the
        # flattened tensor: it becomes `numel` times the largest stride, which the gather's
        # bounds check rejects whatever the other dimensions add
        bad = F.logical_or(F.lt(wrapped, 0), F.ge(wrapped, n))
        wrapped = F.where(bad, ctx.constant(numel * max(1, max(strides)), dt.int64, ()), wrapped)
        aligned = F.expand(wrapped, index_shape) if t._shape != index_shape else wrapped
        term = F.mul(place(aligned, lead, len(index_shape)), strides[d])
        linear = term if linear is None else F.add(linear, term)
    linear = F.expand(linear, out_shape) if linear._shape != out_shape else linear

    return apply("gather", (x, linear), {}, _no_eager, "IndexBackward0")


def _no_eager(op: str, operands: Any, attrs: Any) -> Tensor:
    raise AssertionError("traced gather reached eager execution")
