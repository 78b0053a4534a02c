"""Code generation of a whole graph: one LLVM module, one entry point.

`lower(fusion)` turns each kernel group into *launches*: a kernel spec of the existing
generators (`elementwise`, `reduce`, `gather`, `matmul`) plus its argument block, in which
every size and stride is a constant (shapes are static) and every pointer is a `Ptr`: a
buffer plus a constant byte offset. Some groups take several launches (a scatter copies
its base first; a large full reduction runs per-chunk partials, then combines them; a
matmul operand that BLAS cannot read in place is copied first; cat copies each input into
its slice of the result). Every buffer a launch touches records the step, which gives the
memory planner its liveness intervals.

`emit(program)` writes the module:

* one function per distinct kernel spec, built by its generator, made `internal` (and
  `alwaysinline` by default) so LLVM specializes it on the constant block;
* one `noinline` wrapper per distinct launch, `launch<i>(ptr noalias ..., [lo, hi])`,
  which stores the block's constants and its pointer arguments into an `alloca` and calls
  the kernel (see `_Emitter.wrapper` for why the pointers arrive as noalias arguments);
* `void entry(int64_t *args)` with `args = [input pointers..., output pointers..., arena
  pointer, extra pointers...]` (extras: BLAS `sgemm`/`dgemm` addresses, passed at run time
  so the cached object holds no process address). For each launch the entry computes the
  pointers (the base pointer plus a constant offset, by GEP; no integer-to-pointer casts)
  and calls the launch's wrapper. Constants of the graph are private globals.
* When a launch is big enough to use several cores, the launches are also cut into
  *stages*: `void stage<i>(int64_t *args, int64_t lo, int64_t hi)`. A parallel stage holds
  one launch whose split loop runs over `[lo, hi)`; a serial stage runs its launches whole.
  The executor calls the stages in order and runs a parallel stage's pieces on the thread
  pool of `runtime.launch` (threads live outside LLVM). `entry` then just calls every
  stage over its whole range.

Inlining (`inline=`), measured on this machine (2 busy cores, so +-30%): kernels inlined
into their wrappers with every size and stride a constant compile fastest and run
fastest on small shapes. The B3 chain (64 elements, 30 ops, sum): "always" 0.46 s
compile / 12 us per call, "auto" (LLVM decides) 0.72 s / 14 us, "never" 0.56 s / 44 us
(run-time trip counts keep the 64-element loop from vectorizing well); softmax of
(64, 128): 0.12 s / 14 us, 0.27 s / 18 us, 0.41 s / 20 us; softmax of (2048, 1024): 5.7,
6.1, 5.0 ms (memory-bound: a wash). "always" is the default.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from llvmlite import ir

from ..ir import dtypes as dt
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.graph import Graph, Node
from ..ir.interpret import to_bfloat16_bits
from ..ir.printer import format_type
from ..passes.fusion import FusionPlan, KernelGroup, Layout, Read
from ..passes.memory import Buffer
from . import elementwise as ew
from . import gather as gx
from . import matmul as mm
from . import reduce as rd
from . import rowwise as rw
from .layout import collapse, contiguous_strides
from .loops import I64, PTR
from .target import disk_cache_get, disk_cache_put

__all__ = ["Ptr", "Launch", "Stage", "Program", "lower", "emit", "PARALLEL_MIN_WORK"]

PARALLEL_MIN_WORK = 1 << 17            # elements below which one core is faster (launch.py)
SPLIT_MIN_MACS = 1 << 21               # matmul multiply-adds below which one core wins
INT32_MAX = 2**31 - 1

_BUILDERS = {
    ew.ElementwiseKernel: ew.build,
    rd.ReduceKernel: rd.build,
    gx.IndexKernel: gx.build_index,
    gx.NonzeroKernel: gx.build_nonzero,
    mm.MatmulKernel: mm.build,
    rw.RowKernel: rw.build,
}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


@dataclass(frozen=True)
class Ptr:
    """A pointer slot of an argument block: `buffer` + `byte_offset`, or an extra address."""

    buffer: Buffer | None
    byte_offset: int = 0
    extra: str = ""


@dataclass(eq=False)
class Launch:
    """One kernel call: its spec, its argument block, and how its range may be split.

    `block[0:2]` is `[lo, hi)` of the kernel's outermost loop when `ranged`; `extent` is
    the whole range. `split`: the pieces of the range may run on different threads.
    """

    group: KernelGroup
    spec: Any
    block: list[Any]
    what: str
    extent: int = 0
    ranged: bool = True
    split: bool = False
    work: int = 0
    err: Ptr | None = None            # index kernels: their 32-byte error record
    node: Node | None = None

    def parallel(self, threads: int) -> bool:
        return (self.ranged and self.split and threads > 1 and self.work >= PARALLEL_MIN_WORK
                and self.extent >= 2)


@dataclass
class Stage:
    """Launches run by one exported function; a parallel stage holds exactly one."""

    launches: list[Launch]
    parallel: bool
    symbol: str = ""

    @property
    def extent(self) -> int:
        return self.launches[0].extent if self.parallel else 0


@dataclass
class Program:
    """A lowered graph: launches in order and every buffer they touch."""

    graph: Graph
    fusion: FusionPlan
    launches: list[Launch]
    buffers: list[Buffer]
    inputs: list[Buffer]
    outputs: list[Buffer]
    extras: list[str]
    node_buffers: dict[Node, Buffer]
    errors: list[Launch] = field(default_factory=list)
    threads: int = 1
    error_buffer: Buffer | None = None    # every index launch's error record, in order

    def stages(self) -> list[Stage]:
        out: list[Stage] = []
        for launch in self.launches:
            if launch.parallel(self.threads):
                out.append(Stage([launch], True))
            elif out and not out[-1].parallel:
                out[-1].launches.append(launch)
            else:
                out.append(Stage([launch], False))
        return out


# --------------------------------------------------------------------------------------
# Lowering: groups -> launches
# --------------------------------------------------------------------------------------

def encode(values: np.ndarray, d: DType) -> bytes:
    """Values (NumPy) as the bytes dtype `d` stores them."""
    if d is dt.bfloat16:
        return to_bfloat16_bits(values).tobytes()
    if d is dt.bool_:
        return np.asarray(values).astype(np.bool_).astype(np.uint8).tobytes()
    with np.errstate(all="ignore"):
        return np.asarray(values).astype(d.np).tobytes()


def _scalar_bytes(value: Any, d: DType) -> bytes:
    if d.kind in "iu" and isinstance(value, float):
        value = int(value)
    return encode(np.array(value), d)


class _Lowering:
    def __init__(self, fusion: FusionPlan, threads: int):
        self.fusion = fusion
        self.g = fusion.graph
        self.threads = threads
        self.names = fusion.names
        self.launches: list[Launch] = []
        self.buffers: list[Buffer] = []
        self.extras: list[str] = []
        self.errors: list[Launch] = []
        self.inputs = [self.buffer(f"in{i}", p.dtype.itemsize * _numel(p.shape), "input",
                                   node=p, slot=i) for i, p in enumerate(self.g.params)]
        self.outputs = [self.buffer(f"out{k}", o.dtype.itemsize * _numel(o.shape), "output",
                                    node=o, slot=k) for k, o in enumerate(self.g.outputs)]
        self.node_buffers: dict[Node, Buffer] = dict(zip(self.g.params, self.inputs))
        for k, o in fusion.direct_outputs.items():
            self.node_buffers[o] = self.outputs[k]
        self.scalars: dict[tuple[bytes, str], Buffer] = {}
        self.error_buffer: Buffer | None = None

    # -- buffers ------------------------------------------------------------------------
    def buffer(self, name: str, nbytes: int, kind: str, **kw: Any) -> Buffer:
        b = Buffer(name, nbytes, kind, **kw)
        self.buffers.append(b)
        return b

    def buffer_of(self, n: Node) -> Buffer:
        b = self.node_buffers.get(n)
        if b is not None:
            return b
        name = self.names.get(n, n.op).lstrip("%")
        if n.op == "const":
            value = n.attr("value")
            ref = registry.get("const").reference
            if isinstance(value, tuple):
                payload = encode(ref(value=value, dtype=n.dtype, shape=n.shape), n.dtype)
            else:
                payload = encode(ref(value=value, dtype=n.dtype, shape=()), n.dtype)
            b = self.buffer(f"c{name}", len(payload), "const", node=n, payload=payload)
        else:
            b = self.buffer(f"t{name}", n.dtype.itemsize * _numel(n.shape), "temp", node=n)
        self.node_buffers[n] = b
        return b

    def scalar(self, value: Any, d: DType) -> Buffer:
        """A module constant holding one value of dtype `d` (fills, identities)."""
        payload = _scalar_bytes(value, d)
        key = (payload, d.name)
        if key not in self.scalars:
            self.scalars[key] = self.buffer(f"k{len(self.scalars)}_{d.short}", len(payload),
                                            "const", payload=payload)
        return self.scalars[key]

    def scratch(self, name: str, nbytes: int, kind: str = "scratch") -> Buffer:
        return self.buffer(f"s{len(self.buffers)}_{name}", nbytes, kind)

    def read_ptr(self, r: Read) -> Ptr:
        return Ptr(self.buffer_of(r.base), r.layout.offset * r.base.dtype.itemsize)

    def out_buffer(self, grp: KernelGroup) -> Buffer:
        if grp.output_slot >= 0:
            return self.outputs[grp.output_slot]
        return self.buffer_of(grp.outputs[0])

    def add(self, launch: Launch) -> None:
        step = len(self.launches)
        for v in launch.block:
            if isinstance(v, Ptr) and v.buffer is not None:
                v.buffer.touch(step)
        self.launches.append(launch)

    def extra(self, name: str) -> Ptr:
        if name not in self.extras:
            self.extras.append(name)
        return Ptr(None, 0, name)

    # -- generic copy -------------------------------------------------------------------
    def copy(self, grp: KernelGroup, src: Ptr, src_dtype: DType, src_strides: tuple[int, ...],
             dst: Ptr, dst_dtype: DType, dst_strides: tuple[int, ...],
             shape: tuple[int, ...], what: str) -> None:
        """dst[i] = src[i] over `shape` (with a cast when the dtypes differ)."""
        n = _numel(shape)
        if n == 0:
            return
        nodes = () if src_dtype is dst_dtype else \
            (ew.ExprNode("cast", (0,), (("dtype", dst_dtype),)),)
        expr = ew.Expr((src_dtype,), nodes, (1 if nodes else 0,))
        self.elementwise_launch(grp, expr, shape, [(dst, dst_strides)], [(src, src_strides)],
                                what)

    def elementwise_launch(self, grp: KernelGroup, expr: ew.Expr, shape: tuple[int, ...],
                           outs: list[tuple[Ptr, tuple[int, ...]]],
                           ins: list[tuple[Ptr, tuple[int, ...]]], what: str) -> None:
        n = _numel(shape)
        if n == 0:
            return
        cshape, cstrides = collapse(tuple(shape), [st for _, st in outs + ins])
        inner = tuple(st[-1] if st[-1] in (0, 1) else None for st in cstrides)
        spec = ew.ElementwiseKernel(expr, len(cshape), inner)
        block: list[Any] = [0, cshape[0], *cshape[1:]]
        for (p, _), st in zip(outs + ins, cstrides):
            block += [p, *st]
        self.add(Launch(grp, spec, block, what, extent=cshape[0], split=True, work=n,
                        node=grp.root))

    def fill(self, grp: KernelGroup, value: Any, d: DType, dst: Ptr,
             shape: tuple[int, ...], strides: tuple[int, ...], what: str) -> None:
        src = Ptr(self.scalar(value, d))
        self.copy(grp, src, d, (0,) * len(shape), dst, d, strides, shape, what)

    # -- groups -------------------------------------------------------------------------
    def run(self) -> Program:
        for grp in self.fusion.groups:
            getattr(self, f"lower_{grp.kind.value}")(grp)
        if self.error_buffer is not None:   # zeroed before and read after every call
            self.error_buffer.touch(0)
            self.error_buffer.touch(len(self.launches))
        return Program(self.g, self.fusion, self.launches, self.buffers, self.inputs,
                       self.outputs, self.extras, self.node_buffers, self.errors,
                       self.threads, self.error_buffer)

    def lower_elementwise(self, grp: KernelGroup) -> None:
        space = grp.space
        dense = contiguous_strides(space)
        outs = [(Ptr(self.buffer_of(o)), dense) for o in grp.outputs]
        ins = [(self.read_ptr(r), r.layout.strides) for r in grp.inputs]
        self.elementwise_launch(grp, grp.expr, space, outs, ins,
                                f"{len(grp.nodes)} elementwise ops")

    def lower_row(self, grp: KernelGroup) -> None:
        """One row kernel: rows split across threads, each row's passes in L1."""
        region = grp.region
        rows, cols = region.rows, region.cols
        block: list[Any] = [0, rows, cols]
        inner: list[int | None] = []
        for o in grp.outputs:
            full = o.shape == region.space
            block += [Ptr(self.buffer_of(o)), cols if full else 1, 1 if full else 0]
            inner.append(1 if full else 0)
        for r in grp.inputs:
            sr, sc = r.layout.strides
            block += [self.read_ptr(r), sr, sc]
            inner.append(sc if sc in (0, 1) else None)
        row_inputs = tuple(r.layout.strides[1] == 0 for r in grp.inputs)
        spec = rw.RowKernel(grp.expr, row_inputs, tuple(inner), cols)
        self.add(Launch(grp, spec, block, f"row kernel of {len(grp.nodes)} ops",
                        extent=rows, split=True, work=rows * cols, node=grp.root))

    def lower_copy(self, grp: KernelGroup) -> None:
        (r,) = grp.inputs
        shape = r.layout.shape
        dst = Ptr(self.out_buffer(grp))
        self.copy(grp, self.read_ptr(r), r.base.dtype, r.layout.strides, dst, r.base.dtype,
                  contiguous_strides(shape), shape, "copy")

    def lower_flip(self, grp: KernelGroup) -> None:
        (r,) = grp.inputs
        n = grp.root
        lay = r.layout.flip(n.attr("axes"))
        src = Read(r.base, lay)
        self.copy(grp, self.read_ptr(src), n.dtype, lay.strides, Ptr(self.out_buffer(grp)),
                  n.dtype, contiguous_strides(n.shape), n.shape, "flip")

    def lower_cat(self, grp: KernelGroup) -> None:
        n = grp.root
        axis = n.attr("axis") % n.type.ndim
        dense = contiguous_strides(n.shape)
        out = self.out_buffer(grp)
        pos = 0
        for x, r in zip(n.inputs, grp.inputs):
            off = pos * dense[axis] * n.dtype.itemsize
            self.copy(grp, self.read_ptr(r), n.dtype, r.layout.strides, Ptr(out, off),
                      n.dtype, dense, x.shape, f"cat part at {pos}")
            pos += x.shape[axis]

    def lower_pad(self, grp: KernelGroup) -> None:
        n = grp.root
        (r,) = grp.inputs
        lows, highs, interior = n.attr("lows"), n.attr("highs"), n.attr("interior")
        if any(v < 0 for v in lows + highs + interior):
            raise ValueError(f"pad: compiled graphs take non-negative padding, got lows "
                             f"{list(lows)}, highs {list(highs)}, interior {list(interior)} "
                             f"({self.names.get(n)}: {format_type(n.type)})")
        dense = contiguous_strides(n.shape)
        out = self.out_buffer(grp)
        if any(lows) or any(highs) or (any(interior) and r.layout.numel > 1):
            self.fill(grp, n.attr("value"), n.dtype, Ptr(out), n.shape, dense, "pad fill")
        off = sum(lo * st for lo, st in zip(lows, dense)) * n.dtype.itemsize
        strides = tuple(st * (it + 1) for st, it in zip(dense, interior))
        self.copy(grp, self.read_ptr(r), n.dtype, r.layout.strides, Ptr(out, off), n.dtype,
                  strides, r.layout.shape, "pad interior")

    def lower_reduce(self, grp: KernelGroup) -> None:
        r = grp.root
        op = r.op
        x_shape = grp.space
        axes = r.attr("axes")
        from ..ops.reduction import ARG_REDUCTIONS, normalize_axes
        norm = normalize_axes(op, axes, x_shape)
        n_in, n_out = _numel(x_shape), _numel(r.shape)
        out = self.out_buffer(grp)
        if n_out == 0:
            return
        if n_in == 0:
            self.fill(grp, 1 if op == "prod" else 0, r.dtype, Ptr(out), r.shape,
                      contiguous_strides(r.shape), f"{op} of nothing")
            return
        reduced = tuple(d in norm for d in range(len(x_shape)))
        out_strides = contiguous_strides(tuple(1 if red else n for red, n in
                                               zip(reduced, x_shape)))
        if op in ARG_REDUCTIONS:
            index = contiguous_strides(x_shape) if not axes else tuple(1 for _ in x_shape)
        else:
            index = tuple(0 for _ in x_shape)
        reads = grp.inputs
        extra = tuple(rd_.layout.strides for rd_ in reads[1:])
        loops = rd.order_loops(x_shape, reads[0].layout.strides, out_strides, index, reduced,
                               extra)
        in_dtype = r.inputs[0].dtype
        prologue = grp.expr
        red = [i for i, flag in enumerate(loops.reduced) if flag]
        chunk = max(red, key=lambda i: loops.sizes[i])
        width = loops.column_width(self.threads, split_columns=loops.reduced[0])
        two_stage = (self.threads > 1 and n_in >= PARALLEL_MIN_WORK
                     and loops.split_extent(width) < self.threads and loops.sizes[chunk] >= 2
                     and n_out * self.threads * 4 <= n_in)
        what = f"{op}{' with prologue' if prologue is not None else ''}"
        ptrs = [self.read_ptr(x) for x in reads]
        if not two_stage:
            spec = rd.make_spec(op, in_dtype, r.dtype, loops, prologue=prologue)
            block = self.reduce_block(spec, loops, ptrs, Ptr(out), col_width=width)
            self.add(Launch(grp, spec, block, what, extent=block[1], split=True, work=n_in,
                            node=r))
            return
        n = loops.sizes[chunk]
        step = -(-n // min(self.threads, n))
        chunks = -(-n // step)
        wide = rd.wide_dtype(op, in_dtype)
        is_arg = op in ARG_REDUCTIONS
        partial = self.scratch("partial", chunks * n_out * wide.itemsize)
        index_buf = self.scratch("partial_index", chunks * n_out * 8) if is_arg else None
        spec1 = rd.make_spec(op, in_dtype, wide, loops, "partial", chunk, prologue=prologue)
        block1 = self.reduce_block(spec1, loops, ptrs, Ptr(partial), chunk_step=step,
                                   chunk_stride=n_out, hi=chunks,
                                   col_width=loops.column_width(self.threads, False))
        sl1 = rd.Slots(spec1)
        if index_buf is not None:
            block1[sl1.out_index_ptr] = Ptr(index_buf)
        self.add(Launch(grp, spec1, block1, what + " (partials)", extent=chunks, split=True,
                        work=n_in, node=r))
        loops2 = rd.order_loops((chunks, n_out), (n_out, 1), (0, 1), (0, 0), (True, False))
        spec2 = rd.make_spec(op, wide, r.dtype, loops2, "combine" if is_arg else "full")
        block2 = self.reduce_block(spec2, loops2, [Ptr(partial)], Ptr(out),
                                   col_width=loops2.column_width(self.threads, False))
        if index_buf is not None:
            block2[rd.Slots(spec2).in_index_ptr] = Ptr(index_buf)
        self.add(Launch(grp, spec2, block2, what + " (combine)", extent=block2[1],
                        split=False, work=chunks * n_out, node=r))

    @staticmethod
    def reduce_block(spec: rd.ReduceKernel, loops: rd.Loops, ins: list[Ptr], out: Ptr,
                     **kw: Any) -> list[Any]:
        block: list[Any] = rd.pack(spec, loops, 0, 0, extra_in_ptrs=(0,) * (len(ins) - 1),
                                   **kw)
        sl = rd.Slots(spec)
        block[sl.in_ptr] = ins[0]
        block[sl.out_ptr] = out
        for j, p in enumerate(ins[1:]):
            block[sl.extra_inputs + j * (1 + spec.rank)] = p
        return block

    def lower_matmul(self, grp: KernelGroup) -> None:
        n_ = grp.root
        a_read, b_read = grp.inputs
        d = n_.dtype
        out = self.out_buffer(grp)
        n, k = a_read.layout.shape[-2:]
        m = b_read.layout.shape[-1]
        use_blas = mm.uses_blas(d)
        if use_blas and max(n, m, k) > INT32_MAX:
            raise RuntimeError(f"matmul: {d.name} runs on BLAS, whose sizes are 32-bit; "
                               f"n, m, k = {n}, {m}, {k} ({self.names.get(n_)})")
        if 0 in n_.shape:
            return
        if k == 0:
            self.fill(grp, 0, d, Ptr(out), n_.shape, contiguous_strides(n_.shape),
                      "matmul with k = 0")
            return
        a_ptr, a_lay = self.matmul_operand(grp, a_read, n, k, use_blas, is_b=False)
        b_ptr, b_lay = self.matmul_operand(grp, b_read, k, m, use_blas, is_b=True)
        self.matmul_launch(grp, n_, out, a_ptr, a_lay, b_ptr, b_lay, n, m, k, use_blas)

    def matmul_operand(self, grp: KernelGroup, r: Read, rows: int, cols: int,
                       use_blas: bool, is_b: bool) -> tuple[Ptr, Layout]:
        """The operand as the kernel can read it: in place, or a dense copy."""
        lay = r.layout
        rs, cs = lay.strides[-2:]
        if use_blas:
            ok = mm.gemm_layout(rows, cols, rs, cs) is not None
        else:
            ok = not is_b or cols <= 1 or cs == 1
        if ok:
            return self.read_ptr(r), lay
        tmp = self.scratch("operand", r.base.dtype.itemsize * lay.numel)
        dense = contiguous_strides(lay.shape)
        self.copy(grp, self.read_ptr(r), r.base.dtype, lay.strides, Ptr(tmp), r.base.dtype,
                  dense, lay.shape, "matmul operand copy")
        return Ptr(tmp), Layout(lay.shape, dense, 0)

    def matmul_launch(self, grp: KernelGroup, node: Node, out: Buffer, a_ptr: Ptr,
                      a: Layout, b_ptr: Ptr, b: Layout, n: int, m: int, k: int,
                      use_blas: bool) -> None:
        """The batch loop around gemm (or the generated loops); as eager's `_plan`."""
        from ..codegen.layout import broadcast_strides
        shape = node.shape
        batch = shape[:-2]
        c_strides = contiguous_strides(shape)
        strides = {"c": c_strides[:-2],
                   "a": broadcast_strides(a.shape[:-2], a.strides[:-2], batch),
                   "b": broadcast_strides(b.shape[:-2], b.strides[:-2], batch)}
        strides = {x: tuple(0 if size == 1 else s for size, s in zip(batch, st))
                   for x, st in strides.items()}
        rows = {"c": c_strides[-2], "a": a.strides[-2], "b": b.strides[-2]}
        cols = {"c": 1, "a": a.strides[-1], "b": b.strides[-1]}
        folded = mm.fold_rows(batch, n, strides, rows)
        if folded is not None and (not use_blas or (
                folded[0] <= INT32_MAX and mm.gemm_layout(folded[0], k, folded[1], cols["a"]))):
            n, rows["a"] = folded
            batch, strides = (), {"c": (), "a": (), "b": ()}
        sizes, (cs, as_, bs) = collapse(batch, [strides["c"], strides["a"], strides["b"]])
        flags = [0, 0]
        if use_blas:
            for x, (label, r_, c_) in enumerate((("a", n, k), ("b", k, m))):
                lay = mm.gemm_layout(r_, c_, rows[label], cols[label])
                assert lay is not None, "operand layouts were fixed above"
                flags[x] = int(lay[0])
                rows[label], cols[label] = (1, lay[1]) if lay[0] else (lay[1], 1)
            rows["c"] = max(1, m)
        else:
            cols["b"] = 1
        total = _numel(sizes)
        extent = total if use_blas else total * n
        block: list[Any] = [0, extent, n, m, k, *sizes]
        for label, ptr, bstrides in (("c", Ptr(out), cs), ("a", a_ptr, as_), ("b", b_ptr, bs)):
            block += [ptr, *bstrides, rows[label], cols[label]]
        gemm = self.extra("sgemm" if node.dtype is dt.float32 else "dgemm") if use_blas else 0
        block += [*flags, gemm]
        spec = mm.MatmulKernel(node.dtype, len(sizes))
        macs = total * n * m * k
        from ..runtime import blas
        split = macs >= SPLIT_MIN_MACS and (not use_blas or blas.runs_single_threaded(n, m, k))
        self.add(Launch(grp, spec, block, "matmul" + (" (BLAS)" if use_blas else ""),
                        extent=extent, split=split,
                        work=PARALLEL_MIN_WORK if split else macs, node=node))

    def lower_gather(self, grp: KernelGroup) -> None:
        node = grp.root
        x_read, idx_read = grp.inputs
        shape = node.shape
        out = self.out_buffer(grp)
        if _numel(shape) == 0:
            return
        x_ptr = self.dense_operand(grp, x_read)
        self.index_launch(grp, node, "gather", shape, Ptr(out), contiguous_strides(shape),
                          x_ptr, _numel(node.inputs[0].shape), idx_read, split=True)

    def lower_scatter(self, grp: KernelGroup) -> None:
        node = grp.root
        base_read, idx_read, src_read = grp.inputs
        out = self.out_buffer(grp)
        dense = contiguous_strides(node.shape)
        self.copy(grp, self.read_ptr(base_read), node.dtype, base_read.layout.strides,
                  Ptr(out), node.dtype, dense, node.shape, f"{node.op} base copy")
        shape = idx_read.layout.shape
        if _numel(shape) == 0:
            return
        src = src_read.layout.broadcast_to(shape)
        mode = "scatter_add" if node.op == "scatter_add" else "put"
        self.index_launch(grp, node, mode, shape, self.read_ptr(Read(src_read.base, src)),
                          src.strides, Ptr(out), _numel(node.shape), idx_read, split=False)

    def dense_operand(self, grp: KernelGroup, r: Read) -> Ptr:
        """A pointer to `r`'s elements in row-major order (copied when the view is not)."""
        if r.layout.is_dense():
            return self.read_ptr(r)
        tmp = self.scratch("dense", r.base.dtype.itemsize * r.layout.numel)
        self.copy(grp, self.read_ptr(r), r.base.dtype, r.layout.strides, Ptr(tmp),
                  r.base.dtype, contiguous_strides(r.layout.shape), r.layout.shape,
                  "dense copy")
        return Ptr(tmp)

    def index_launch(self, grp: KernelGroup, node: Node, mode: str, shape: tuple[int, ...],
                     data: Ptr, data_strides: tuple[int, ...], x: Ptr, x_numel: int,
                     idx: Read, split: bool) -> None:
        x_strides = (0,) * len(shape)
        cshape, (cd, cx, ci) = collapse(tuple(shape), [tuple(data_strides), x_strides,
                                                       idx.layout.strides])
        baked = lambda s: s if s in (0, 1) else None  # noqa: E731
        keys = dict(rank=len(cshape), index_dtypes=(dt.int64,), hoist=ci[-1] == 0,
                    x_inner=baked(cx[-1]), data_inner=baked(cd[-1]))
        if mode == "scatter_add":
            spec = gx.IndexKernel(mode, dtype=node.dtype, src_dtype=node.dtype, **keys)
        else:
            spec = gx.IndexKernel(mode, width=node.dtype.itemsize, **keys)
        if self.error_buffer is None:
            self.error_buffer = self.scratch("errors", 0, kind="error")
        err = Ptr(self.error_buffer, self.error_buffer.nbytes)
        self.error_buffer.nbytes += 32
        block: list[Any] = [0, cshape[0], *cshape[1:], err, x, *cx, data, *cd,
                            self.read_ptr(idx), x_numel, 1, *ci]
        launch = Launch(grp, spec, block, mode, extent=cshape[0], split=split,
                        work=_numel(shape), err=err, node=node)
        self.add(launch)
        self.errors.append(launch)

    def lower_nonzero(self, grp: KernelGroup) -> None:
        node = grp.root
        (r,) = grp.inputs
        rank = len(r.layout.shape)
        spec = gx.NonzeroKernel("fill", node.inputs[0].dtype, rank)
        block: list[Any] = [*r.layout.shape, self.read_ptr(r), *r.layout.strides,
                            Ptr(self.out_buffer(grp)), node.shape[0]]
        self.add(Launch(grp, spec, block, "nonzero", ranged=False, node=node))


def lower(fusion: FusionPlan, threads: int = 1) -> Program:
    """Launches and buffers for `fusion` (see the module docstring)."""
    return _Lowering(fusion, threads).run()


# --------------------------------------------------------------------------------------
# Emission: one module
# --------------------------------------------------------------------------------------

INLINE_MODES = ("always", "auto", "never")


_PLACEHOLDER = "llgrad.kernel.placeholder"
_kernel_texts: dict[tuple[Any, str], str] = {}


def _kernel_text(spec: Any, name: str, inline: str) -> str:
    """A kernel's module text under `name` (built once per process per spec)."""
    text = _kernel_texts.get((spec, inline))
    if text is None:
        module = _BUILDERS[type(spec)](spec, _PLACEHOLDER)
        fn = module.get_global(_PLACEHOLDER)
        fn.linkage = "internal"
        if inline == "always":
            fn.attributes.add("alwaysinline")
        elif inline == "never":
            fn.attributes.add("noinline")
        text = _kernel_texts[(spec, inline)] = str(module)
    return text.replace(f'@"{_PLACEHOLDER}"', f'@"{name}"')


def stage_layout(program: Program) -> tuple[list[Stage], list[str]]:
    """The stages and exported symbols of `program`'s module (see the module docstring)."""
    stages = program.stages()
    if not any(s.parallel for s in stages):
        return ([Stage(list(program.launches), False, "entry")] if program.launches
                else []), ["entry"]
    for i, st in enumerate(stages):
        st.symbol = f"stage{i}"
    return stages, ["entry"] + [st.symbol for st in stages]


class _Emitter:
    def __init__(self, program: Program, inline: str):
        if inline not in INLINE_MODES:
            raise ValueError(f"emit: inline must be one of {INLINE_MODES}, got {inline!r}")
        self.p = program
        self.inline = inline
        self.module = ir.Module(name=program.graph.name)
        self.kernel_names: dict[Any, str] = {}
        self.kernel_fns: dict[str, ir.Function] = {}
        self.globals: dict[Buffer, ir.GlobalVariable] = {}
        self.n_in = len(program.inputs)
        self.n_out = len(program.outputs)
        self.n_wrappers = 0
        self.wrappers: dict[Any, ir.Function] = {}

    def kernel(self, spec: Any) -> ir.Function:
        name = self.kernel_names.get(spec)
        if name is None:
            name = self.kernel_names[spec] = f"k{len(self.kernel_names)}_{type(spec).__name__.lower()}"
            self.kernel_fns[name] = ir.Function(
                self.module, ir.FunctionType(ir.VoidType(), [PTR]), name=name)
        return self.kernel_fns[name]

    def global_of(self, b: Buffer) -> ir.GlobalVariable:
        gv = self.globals.get(b)
        if gv is None:
            data = bytearray(b.payload or b"\0")
            t = ir.ArrayType(ir.IntType(8), len(data))
            gv = ir.GlobalVariable(self.module, t, f"const.{len(self.globals)}")
            gv.global_constant = True
            gv.linkage = "private"
            gv.unnamed_addr = True
            gv.align = 64
            gv.initializer = ir.Constant(t, data)
            self.globals[b] = gv
        return gv

    # -- function bodies ----------------------------------------------------------------
    def body(self, fn: ir.Function, launches: list[Launch], lo: ir.Value | None,
             hi: ir.Value | None) -> None:
        """Compute every launch's pointers and call its wrapper (see `wrapper`)."""
        entry = fn.append_basic_block("entry")
        b = ir.IRBuilder(entry)
        args = fn.args[0]
        bases: dict[Any, ir.Value] = {}

        def base(slot: int) -> ir.Value:
            if slot not in bases:
                at = b.gep(args, [I64(slot)], inbounds=True, source_etype=I64)
                bases[slot] = b.load(at, typ=PTR, name=f"arg{slot}")
            return bases[slot]

        for launch in launches:
            ranged = launch.ranged and lo is not None
            ptrs = [self.pointer(b, v, base) for v in launch.block if isinstance(v, Ptr)]
            b.call(self.wrapper(launch, ranged), ptrs + ([lo, hi] if ranged else []))
        b.ret_void()

    def wrapper(self, launch: Launch, ranged: bool) -> ir.Function:
        """`void L<i>(ptr noalias p0, ..., [i64 lo, i64 hi])`: fills the launch's block
        (constants and the pointer arguments) in an alloca and calls the kernel.

        The wrapper's pointer arguments are `noalias`: the buffers one launch touches are
        distinct (the memory plan never lets a launch read bytes it writes), and saying so
        lets LLVM vectorize loops that read one arena buffer and write another without
        run-time overlap checks (both pointers derive from the arena, so it could not
        prove them disjoint on its own). The wrapper is `noinline`: inlined into the entry,
        its arguments' noalias facts were lost (measured: a softmax's exp loop stayed
        scalar, 5x slower).

        Launches that differ only in their pointers share one wrapper, so a repeated
        structure (the layers of a model) is optimized and compiled once.
        """
        key = (launch.spec, ranged, tuple(("p", v.extra) if isinstance(v, Ptr) else v
                                         for v in launch.block))
        fn = self.wrappers.get(key)
        if fn is not None:
            return fn
        slots = [j for j, v in enumerate(launch.block) if isinstance(v, Ptr)]
        params: list[ir.Type] = [PTR] * len(slots) + ([I64, I64] if ranged else [])
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), params),
                         name=f"launch{self.n_wrappers}")
        self.n_wrappers += 1
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")
        for j, a in zip(slots, fn.args):
            if not launch.block[j].extra:
                a.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        blk = b.alloca(I64, size=I64(len(launch.block)), name="blk")
        blk.type = PTR                # print `ptr`, not llvmlite's typed `i64*`
        ptr_args = dict(zip(slots, fn.args))
        for j, v in enumerate(launch.block):
            if j < 2 and ranged:
                value: ir.Value = fn.args[len(slots) + j]
            elif j in ptr_args:
                value = ptr_args[j]
            else:
                value = I64(int(v))
            slot = b.gep(blk, [I64(j)], inbounds=True, source_etype=I64)
            slot.type = PTR           # an opaque pointer: the slot holds an i64 or a ptr
            b.store(value, slot)
        b.call(self.kernel(launch.spec), [blk])
        b.ret_void()
        self.wrappers[key] = fn
        return fn

    def pointer(self, b: ir.IRBuilder, p: Ptr, base) -> ir.Value:
        if p.extra:
            return base(self.n_in + self.n_out + 1 + self.p.extras.index(p.extra))
        buf = p.buffer
        assert buf is not None
        if buf.kind == "input":
            root = base(buf.slot)
        elif buf.kind == "output":
            root = base(self.n_in + buf.slot)
        elif buf.kind == "const":
            root = self.global_of(buf)
        else:
            root = base(self.n_in + self.n_out)
        offset = p.byte_offset + (buf.offset if buf.in_arena else 0)
        if offset == 0:
            return root
        return b.gep(root, [I64(offset)], inbounds=True, source_etype=ir.IntType(8))

    def run(self) -> tuple[str, list[str], list[Stage]]:
        stages, symbols = stage_layout(self.p)
        entry_t = ir.FunctionType(ir.VoidType(), [PTR])
        entry = ir.Function(self.module, entry_t, name="entry")
        entry.args[0].add_attribute("noalias")
        entry.attributes.add("nounwind")
        if not any(s.parallel for s in stages):
            self.body(entry, self.p.launches, None, None)
        else:
            stage_t = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])
            fns = []
            for st in stages:
                fn = ir.Function(self.module, stage_t, name=st.symbol)
                fn.args[0].add_attribute("noalias")
                fn.attributes.add("nounwind")
                fn.attributes.add("noinline")
                lo, hi = fn.args[1], fn.args[2]
                self.body(fn, st.launches, lo if st.parallel else None,
                          hi if st.parallel else None)
                fns.append(fn)
            b = ir.IRBuilder(entry.append_basic_block("entry"))
            for st, fn in zip(stages, fns):
                b.call(fn, [entry.args[0], I64(0), I64(st.extent)])
            b.ret_void()
        return self.link(), symbols, stages

    def link(self) -> str:
        """The entry module's text with every kernel's definition spliced in."""
        defined = set(self.kernel_fns)
        declares: dict[str, str] = {}
        body: list[str] = []
        for line in str(self.module).splitlines():
            if line.startswith("declare"):
                name = _declared_name(line)
                if name in defined:
                    continue
                declares.setdefault(name, line)
                continue
            body.append(line)
        for spec, name in self.kernel_names.items():
            for line in _kernel_text(spec, name, self.inline).splitlines():
                if line.startswith(("; ModuleID", "target triple", "target datalayout")):
                    continue
                if line.startswith("declare"):
                    declares.setdefault(_declared_name(line), line)
                    continue
                body.append(line)
        return "\n".join(body + [""] + list(declares.values())) + "\n"


def _declared_name(line: str) -> str:
    at = line.index("@")
    end = line.index("(", at)
    return line[at + 1:end].strip('"')


def emit(program: Program, inline: str = "always", cache: bool = True
         ) -> tuple[str, list[str], list[Stage]]:
    """The module's text, its exported symbols (`entry`, stages), and the stages.

    Building the text is mostly Python (llvmlite's IR builder), so it is cached on disk
    next to the compiled objects, keyed by everything the text depends on: the program's
    description (`describe`) and the source of the code that generates IR (so an edited
    generator never reuses an old text).
    """
    key = None
    if cache:
        key = "ir-" + hashlib.sha256((_source_fingerprint() + inline + "|" +
                                      describe(program)).encode()).hexdigest()
        blob = disk_cache_get(key)
        if blob is not None:
            stages, symbols = stage_layout(program)
            return blob.decode(), symbols, stages
    text, symbols, stages = _Emitter(program, inline).run()
    if key is not None:
        disk_cache_put(key, text.encode())
    return text, symbols, stages


def describe(program: Program) -> str:
    """A deterministic description of everything the emitted module depends on."""
    parts = [program.graph.name, str(len(program.inputs)), str(len(program.outputs)),
             ",".join(program.extras), str(program.threads)]

    def value(v: Any) -> str:
        if isinstance(v, Ptr):
            if v.extra:
                return f"x:{v.extra}"
            b = v.buffer
            if b.kind == "const":
                return f"c:{b.payload.hex()}+{v.byte_offset}"
            if b.kind in ("input", "output"):
                return f"{b.kind[0]}{b.slot}+{v.byte_offset}"
            return f"a+{b.offset + v.byte_offset}"
        return str(v)

    for launch in program.launches:
        parts.append(f"{launch.spec!r}|{launch.ranged}{launch.split}{launch.work}|"
                     f"{launch.extent}|{' '.join(value(v) for v in launch.block)}")
    return "\n".join(parts)


@functools.cache
def _source_fingerprint() -> str:
    """A hash of the sources that shape generated IR (codegen, op rules, the IR)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for folder in ("codegen", "ops", "ir"):
        for path in sorted((root / folder).glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]
