"""Eager reductions: validate, plan once per (op, dtype, shape, strides, axes), launch.

A call checks its arguments with the op's shape rule (so eager and IR fail alike, before
any native code runs), then runs a plan: one kernel call split across threads over the
kept outputs, or, when the outputs are too few to split (a full reduction to a scalar, a
sum over axis 0 of a tall narrow matrix), two calls: per-chunk partial accumulators
computed on every core, then one small call that reduces the partials.
"""

from __future__ import annotations

import struct
import threading
from typing import Any, Sequence

import numpy as np

from .._source import define
from ..codegen.histogram import (
    BincountKernel,
    HistcKernel,
    HistogramKernel,
    build_bincount,
    build_histc,
    build_histogram,
)
from ..codegen.reduce import (
    MODE_MAX_ROW,
    ExtremeKernel,
    ModeKernel,
    build,
    build_extreme,
    build_mode,
)
from ..ir import dtypes as dt
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.registry import Group
from ..ir.types import TensorType, broadcast_shapes
from ..ops.reduction import ARG_REDUCTIONS, normalize_axes
from ..runtime import cache, launch
from ..tensor import Tensor
from .elementwise import copy_into
from ..schedule.layout import collapse, contiguous_strides
from ..schedule.reduce import Loops, ReduceKernel, Slots, make_spec, order_loops, pack, wide_dtype
from .views import reshape
from ..specialize.reduce import direct_source

cache.register_builder(ReduceKernel, build)
cache.register_builder(ExtremeKernel, build_extreme)
cache.register_builder(ModeKernel, build_mode)
cache.register_builder(HistcKernel, build_histc)
cache.register_builder(HistogramKernel, build_histogram)
cache.register_builder(BincountKernel, build_bincount)


class _Stage:
    """One kernel call: an argument template and where the pointers go."""

    __slots__ = ("kernel", "template", "in_slot", "out_slot", "split", "work")

    def __init__(
        self,
        kernel: cache.Kernel,
        template: list[int],
        in_slot: int,
        out_slot: int,
        split: bool,
        work: int,
    ):
        self.kernel = kernel
        self.template = template
        self.in_slot = in_slot
        self.out_slot = out_slot
        self.split = split
        self.work = work


class Plan:
    """Everything about a reduction call that depends only on dtypes, shapes and strides.

    `kind` is "empty" (no outputs), "fill" (an empty reduction: the identity), "one"
    (one kernel call) or "two" (partials, then their reduction).
    """

    __slots__ = (
        "kind",
        "out_shape",
        "out_dtype",
        "fill",
        "stages",
        "partial_shape",
        "partial_dtype",
        "partial_index",
        "index_slots",
    )

    def __init__(self, kind: str, out_shape: tuple[int, ...], out_dtype: DType):
        self.kind = kind
        self.out_shape = out_shape
        self.out_dtype = out_dtype
        self.fill: int = 0
        self.stages: list[_Stage] = []
        self.partial_shape: tuple[int, ...] = ()
        self.partial_dtype: DType = out_dtype
        self.partial_index = False
        self.index_slots: tuple[int, int] = (-1, -1)  # stage 1 output, stage 2 input

    def execute(self, x: Tensor) -> Tensor:
        out = Tensor._empty(self.out_shape, self.out_dtype)
        if self.kind == "empty":
            return out
        if self.kind == "fill":
            return copy_into(out, self.fill)
        if self.kind == "one":
            self._launch(self.stages[0], x._ptr, out._ptr)
            return out
        partial = Tensor._empty(self.partial_shape, self.partial_dtype)
        first, second = self.stages
        a1, a2 = first.template.copy(), second.template.copy()
        a1[first.in_slot], a1[first.out_slot] = x._ptr, partial._ptr
        a2[second.in_slot], a2[second.out_slot] = partial._ptr, out._ptr
        index = None
        if self.partial_index:
            index = Tensor._empty(self.partial_shape, dt.int64)
            a1[self.index_slots[0]] = a2[self.index_slots[1]] = index._ptr
        launch.call_split(first.kernel, a1, first.work)
        launch.call(second.kernel, a2)  # `partial` and `index` are alive until here
        return out

    @staticmethod
    def _launch(stage: _Stage, in_ptr: int, out_ptr: int) -> None:
        args = stage.template.copy()
        args[stage.in_slot] = in_ptr
        args[stage.out_slot] = out_ptr
        if stage.split:
            launch.call_split(stage.kernel, args, stage.work)
        else:
            launch.call(stage.kernel, args)


_plans: dict[tuple, Plan] = {}
# a number's dtype, and so a plan, can follow the default dtype
dt.on_default_dtype_change(_plans.clear)
_PLAN_LIMIT = 4096


def _plan_key(op: str, x: Tensor, axes: Sequence[int], keepdim: bool) -> tuple | None:
    """The plan cache's key, or None for arguments of other types than the plan checks
    (`1 == True` and `0 == 0.0` hash alike: a cached plan must not accept `keepdim=1` or a
    float axis that a first call would reject)."""
    axes = tuple(axes)
    if keepdim.__class__ is not bool:
        return None
    for a in axes:
        if a.__class__ is not int:
            return None
    return (op, x._dtype, x._shape, x._strides, axes, keepdim)


def run(op: str, x: Tensor, axes: Sequence[int] = (), keepdim: bool = False) -> Tensor:
    """Reduce `x` with `op` over `axes` (negative allowed; `()` means every axis)."""
    try:
        key = _plan_key(op, x, axes, keepdim)
        plan = _plans.get(key) if key is not None else None
    except (TypeError, AttributeError):
        key, plan = None, None
    if plan is None:
        plan = _plan(op, x, axes, keepdim)
        if key is not None:
            if len(_plans) >= _PLAN_LIMIT:
                _plans.clear()
            _plans[key] = plan
    return plan.execute(x)


def direct_launch(op: str, x: Tensor, axes: Sequence[int], keepdim: bool) -> Any:
    """The call `run(op, x, axes, keepdim)` made before, as generated code: `direct(x)`
    allocates the output, packs the plan's one-thread kernel call and makes it, or
    returns None having done nothing (kernels being recorded, a pointer that does not
    pack). None when there is no such plan (not run yet, or a plan of two stages, a fill,
    a call split across threads). For `functions.fastpath`."""
    key = _plan_key(op, x, axes, keepdim)
    plan = _plans.get(key) if key is not None else None
    if (
        plan is None
        or plan.kind != "one"
        or plan.stages[0].split
        and plan.stages[0].work >= launch.PARALLEL_MIN_WORK
    ):
        return None
    stage = plan.stages[0]
    consts = {
        "make_output": Tensor._empty_maker(
            plan.out_shape, plan.out_dtype, contiguous_strides(plan.out_shape)
        ),
        "block": launch.block,
        "pack": launch.packer(len(stage.template)).pack_into,
        "fn": stage.kernel.fn,
        "struct": struct,
        "recording": launch._recording,
    }
    source = direct_source(stage.template, stage.in_slot, stage.out_slot)
    return define(source, f"<llgrad eager direct {op}>", consts, "direct")


def _plan(op: str, x: Tensor, axes: Sequence[int], keepdim: bool) -> Plan:
    opdef = registry.get(op)
    if opdef.group is not Group.REDUCE:
        raise ValueError(f"reduce.run: {op!r} is not a reduction (group {opdef.group.value})")
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if isinstance(axes, int):
        axes = (axes,)
    for a in axes:
        if isinstance(a, bool) or not hasattr(a, "__index__"):
            raise TypeError(
                f"{op}: attribute 'axes' expects ints, got {list(axes)!r} "
                f"(input shape {list(x._shape)})"
            )
    attrs = dict(opdef.normalize_attrs({"axes": axes, "keepdim": keepdim}))
    out_t = opdef.infer((TensorType(x._dtype, x._shape),), **attrs)
    norm = normalize_axes(op, attrs["axes"], x._shape)
    n_in, n_out = _numel(x._shape), _numel(out_t.shape)
    if n_out == 0:
        return Plan("empty", out_t.shape, out_t.dtype)
    if n_in == 0:
        plan = Plan("fill", out_t.shape, out_t.dtype)
        plan.fill = 1 if op == "prod" else 0
        return plan
    loops = _loops(op, x, norm, not attrs["axes"])
    return _kernel_plan(op, x._dtype, out_t, loops, n_in, n_out)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _loops(op: str, x: Tensor, axes: tuple[int, ...], all_axes: bool) -> Loops:
    """The reduction's loops; output strides are those of the contiguous result."""
    shape = x._shape
    reduced = tuple(d in axes for d in range(len(shape)))
    out_strides = contiguous_strides(tuple(1 if r else n for r, n in zip(reduced, shape)))
    if op in ARG_REDUCTIONS:
        # the index an arg op returns: flat (row-major) over all axes, else along its axis
        index = contiguous_strides(shape) if all_axes else tuple(1 for _ in shape)
    else:
        index = tuple(0 for _ in shape)
    return order_loops(shape, x._strides, out_strides, index, reduced)


def _kernel_plan(
    op: str, in_dtype: DType, out_t: TensorType, loops: Loops, n_in: int, n_out: int
) -> Plan:
    threads = launch.num_threads()
    red = [i for i, r in enumerate(loops.reduced) if r]
    chunk = max(red, key=lambda i: loops.sizes[i])
    width = loops.column_width(threads, split_columns=loops.reduced[0])
    two_stage = (
        threads > 1
        and n_in >= launch.PARALLEL_MIN_WORK
        and loops.split_extent(width) < threads
        and loops.sizes[chunk] >= 2
        and n_out * threads * 4 <= n_in
    )
    if not two_stage:
        plan = Plan("one", out_t.shape, out_t.dtype)
        spec = make_spec(op, in_dtype, out_t.dtype, loops)
        args = pack(spec, loops, 0, 0, col_width=width)
        plan.stages.append(_stage(spec, loops, args, True, n_in))
        return plan
    return _two_stage_plan(op, in_dtype, out_t, loops, chunk, threads, n_in, n_out)


def _two_stage_plan(
    op: str,
    in_dtype: DType,
    out_t: TensorType,
    loops: Loops,
    chunk: int,
    threads: int,
    n_in: int,
    n_out: int,
) -> Plan:
    """Chunk the largest reduced loop: per-chunk partials (split), then their reduction."""
    n = loops.sizes[chunk]
    step = -(-n // min(threads, n))
    chunks = -(-n // step)
    wide = wide_dtype(op, in_dtype)
    is_arg = op in ARG_REDUCTIONS
    plan = Plan("two", out_t.shape, out_t.dtype)
    plan.partial_shape = (chunks, n_out)
    plan.partial_dtype = wide
    plan.partial_index = is_arg

    spec1 = make_spec(op, in_dtype, wide, loops, "partial", chunk)
    args1 = pack(
        spec1,
        loops,
        0,
        0,
        chunk_step=step,
        chunk_stride=n_out,
        col_width=loops.column_width(threads, split_columns=False),
        lo=0,
        hi=chunks,
    )
    plan.stages.append(_stage(spec1, loops, args1, True, n_in))

    loops2 = order_loops((chunks, n_out), (n_out, 1), (0, 1), (0, 0), (True, False))
    spec2 = make_spec(op, wide, out_t.dtype, loops2, "combine" if is_arg else "full")
    args2 = pack(spec2, loops2, 0, 0, col_width=loops2.column_width(threads, split_columns=False))
    plan.stages.append(_stage(spec2, loops2, args2, False, chunks * n_out))
    if is_arg:
        plan.index_slots = (Slots(spec1).out_index_ptr, Slots(spec2).in_index_ptr)
    return plan


def _stage(spec: ReduceKernel, loops: Loops, template: list[int], split: bool, work: int) -> _Stage:
    slots = Slots(spec)
    return _Stage(cache.get(spec), template, slots.in_ptr, slots.out_ptr, split, work)


# --------------------------------------------------------------------------------------
# Gradients of broadcasts
# --------------------------------------------------------------------------------------


def sum_to_shape(x: Tensor, shape: Sequence[int]) -> Tensor:
    """Sum a broadcast result (e.g. a gradient) back to `shape`, which broadcasts to x.

    Leading extra dimensions are summed away and dimensions where `shape` has 1 are summed
    with keepdim, so the result has exactly `shape`. Returns `x` itself when nothing is
    reduced (autograd's engine passes gradients through unchanged in that case).
    """
    shape = tuple(int(s) for s in shape)
    xs = x._shape
    lead = len(xs) - len(shape)
    try:
        ok = lead >= 0 and broadcast_shapes(shape, xs, op="sum_to_shape") == xs
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(
            f"sum_to_shape: shape {list(shape)} is not expandable to the "
            f"tensor's shape {list(xs)} ({x._dtype.name})"
        )
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and xs[lead + i] != 1
    )
    if not axes:
        return x
    return reshape(run("sum", x, axes, keepdim=True), shape)


# -- values-and-indices and mode kernels (codegen.reduce): plans per layout ---------------


def extreme_plan(x: Any, d: int, largest: bool, running: bool) -> Any:
    """(the `ExtremeKernel` for `x`'s dtype, (outer, n, inner), (xstride_outer,
    xstride_n, xstride_inner)) for `x` (a tensor with at least one dimension and
    x.shape[d] >= 1) along `d`, or None when the dimensions before or after `d` do not
    collapse into one loop each; kept per layout."""
    key = (x._lkey, d, largest, running)
    plan = _EXTREME_PLANS.get(key, False)
    if plan is not False:
        return plan
    plan = None
    shape, strides = x._shape, x._strides
    parts = [collapse(shape[:d], [strides[:d]]), collapse(shape[d + 1 :], [strides[d + 1 :]])]
    if all(len(c[0]) == 1 for c in parts) and not x._dtype.is_complex:
        (outer,), ((so,),) = parts[0]
        (inner,), ((si,),) = parts[1]
        kernel = cache.get(ExtremeKernel(x._dtype, largest, running))
        plan = (kernel, (outer, shape[d], inner), (so, strides[d], si))
    if len(_EXTREME_PLANS) >= 1024:
        _EXTREME_PLANS.clear()
    _EXTREME_PLANS[key] = plan
    return plan


_EXTREME_PLANS: dict[tuple, Any] = {}


def mode_plan(x: Any, d: int) -> Any:
    """(the `ModeKernel` of `x`'s dtype, sizes, strides) as `extreme_plan`'s, or None
    (rows longer than `MODE_MAX_ROW`, or a layout without one loop on each side)."""
    if x._shape[d] > MODE_MAX_ROW:
        return None
    key = ("mode", x._lkey, d)
    plan = _EXTREME_PLANS.get(key, False)
    if plan is not False:
        return plan
    plan = None
    shape, strides = x._shape, x._strides
    parts = [collapse(shape[:d], [strides[:d]]), collapse(shape[d + 1 :], [strides[d + 1 :]])]
    if all(len(c[0]) == 1 for c in parts) and not x._dtype.is_complex:
        (outer,), ((so,),) = parts[0]
        (inner,), ((si,),) = parts[1]
        plan = (cache.get(ModeKernel(x._dtype)), (outer, shape[d], inner), (so, strides[d], si))
    if len(_EXTREME_PLANS) >= 1024:
        _EXTREME_PLANS.clear()
    _EXTREME_PLANS[key] = plan
    return plan


# kernels by their spec's class and fields (a dict lookup instead of making and hashing a
# spec on every call)
_HISTOGRAM_KERNELS: dict[tuple, Any] = {}


def _histogram_family(spec: type, *fields: Any) -> Any:
    """The kernel of `spec(*fields)` (compiled on first use)."""
    key = (spec, *fields)
    kernel = _HISTOGRAM_KERNELS.get(key)
    if kernel is None:
        kernel = _HISTOGRAM_KERNELS[key] = cache.get(spec(*fields))
    return kernel


def histc_kernel(d: DType) -> Any:
    """The `HistcKernel` of dtype `d`."""
    return _histogram_family(HistcKernel, d)


def histogram_kernel(d: DType, weighted: bool) -> Any:
    """The `HistogramKernel` of dtype `d`, weighted or not."""
    return _histogram_family(HistogramKernel, d, weighted)


def bincount_kernel(d: DType, weight: DType | None) -> Any:
    """The `BincountKernel` of integer dtype `d` and weight dtype `weight` (None: counts)."""
    return _histogram_family(BincountKernel, d, weight)


_SCRATCH = threading.local()


_SCRATCH_KEPT = 1 << 16  # (elements: larger scratches are made per call, not kept)


def histogram_scratch(n: int) -> tuple[Any, int]:
    """Scratch for the histogram kernels' accumulators: (a NumPy int64 array of at least
    `n` elements, its address). Up to `_SCRATCH_KEPT` elements it is this thread's, kept
    and reused by the thread's next call: read it before then. A larger one is new and
    lives only while the caller holds the array: hold it while a kernel writes there."""
    held = getattr(_SCRATCH, "held", None)
    if held is None or held[0].size < n:
        arr = np.empty(max(n, 1024), np.int64)
        if n > _SCRATCH_KEPT:
            return arr, arr.ctypes.data
        held = _SCRATCH.held = (arr, arr.ctypes.data)
    return held
