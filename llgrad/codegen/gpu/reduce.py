"""Reduction launches (`schedule.reduce.ReduceKernel`) on the GPU.

A launch computes a set of *outputs* (accumulators), each the reduction of the same
*reduced space* at a different base offset. The generator reads the CPU kernel's argument
block (`schedule.reduce.Slots`) and flattens both:

- outputs: the kept loops outside the reduction (the first over `[lo, hi)` in "full" and
  "combine" modes), then, for column kernels, the innermost kept loop (its column blocks
  `[lo, hi)` of `col_width` when it is the split loop); in "partial" mode the chunks
  `[lo, hi)` come first (each adds `chunk * chunk_step` to the chunked loop and
  `chunk * chunk_stride` to the output offset), then every kept loop in full;
- reduced space: the reduced loops, outermost first; in "partial" mode the chunked loop
  has `chunk_step` iterations, cut short at the loop's end in the last chunks.

Two mappings onto blocks and threads:

- **block per output** (row kernels, innermost loop reduced, rows longer than
  `SHORT_ROW`): the block takes outputs `ctaid, ctaid + nctaid, ...`; its threads stride
  the flattened reduced space (`tid, tid + ntid, ...`, so consecutive threads read
  consecutive elements of a contiguous row), accumulate in registers, combine with
  `block_reduce`, and thread 0 stores. A block has a warp per `UNROLL * 32` elements of
  the row, at most 256 threads (1024 when the outputs are too few to fill the GPU with
  blocks, e.g. the 256 partials of a full sum).
- **thread per output** (column kernels, innermost loop kept, and rows of at most
  `SHORT_ROW`): a block takes tiles of `W` consecutive outputs (consecutive threads take
  consecutive outputs, so a contiguous innermost kept loop is read in coalesced runs), and
  splits the reduced space into `S = 256 / W` slices (thread `tid` takes output
  `tid % W` of the tile and slice `tid / W`); the slices' accumulators meet in shared
  memory and the first `W` threads combine them in slice order and store. `W` is the
  widest of 256, 128, 64, 32 that still gives enough tiles to fill the GPU, so few
  outputs over a long reduced space still spread over the machine.

Accumulators have the CPU kernel's dtypes (`wide_dtype`: float sums in float64, integer
sums and products in int64); max/min propagate NaN (`llvm.maximum`), and argmax/argmin
carry (value, flat index) pairs with the CPU's order-independent rule (the smaller index
among equal values, NaN first), so partial results may meet in any order. A prologue is
evaluated where the element is loaded and its side outputs are stored there: every element
of the reduced input is visited exactly once in every mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...ir import dtypes as dt
from ...ir.dtypes import DType
from ...schedule.elementwise import out_dtypes
from ...schedule.program import Launch
from ...schedule.reduce import ReduceKernel, Slots, wide_dtype
from ..elementwise import evaluate
from ..loops import I64, accumulate, for_range
from ..reduce import arg_update, extreme
from ..scalar import FLAGS, SV, LLVMScalar, component_type, llvm_type, memory_type
from .common import MAX_BLOCKS, THREADS, Block, Geometry, decompose, UnsupportedOnGpu
from .kernel import MAX_THREADS, WARP, GpuKernel, grid_stride

SHORT_ROW = 32  # rows this short get a thread per output, not a block
FILL_BLOCKS = 264  # about two blocks per multiprocessor of an H100/H200
BIG_INDEX = (1 << 63) - 1
UNROLL = 4  # elements a thread loads before combining them


@dataclass
class _Dim:
    """One flattened loop: `count` iterations from `start`; per pointer (input 0, inputs
    1.., side outputs) the element stride; the output stride; the flat-index stride."""

    start: int
    count: int
    in_strides: tuple[int, ...]
    out_stride: int
    index_stride: int
    is_chunk: bool = False


@dataclass
class _Plan:
    """How a launch maps onto the grid (see the module docstring)."""

    spec: ReduceKernel
    outs: list[_Dim]
    red: list[_Dim]
    n_outputs: int
    n_reduced: int  # the reduced space (the chunked loop counted at chunk_step)
    chunk_size: int  # the chunked loop's full size (partial mode), else 0
    chunk_step: int
    per_thread: bool  # thread per output (else block per output)
    width: int  # W: outputs per tile (thread per output)
    slices: int  # S: slices of the reduced space (thread per output)
    threads: int
    blocks: int


def _unsupported(what: str) -> Exception:
    return UnsupportedOnGpu(f"reduce kernel: {what}")


def _plan(launch: Launch) -> _Plan:
    spec: ReduceKernel = launch.spec
    v = launch.block
    sl = Slots(spec)
    r = spec.rank
    if spec.in_dtype.is_complex and spec.is_arg:
        raise _unsupported(f"{spec.op} of {spec.in_dtype.name}")
    sizes = [int(v[sl.sizes + d]) for d in range(r)]
    st = [[int(v[sl.in_strides + d]) for d in range(r)]]
    for j in range(spec.n_extra):
        slot = sl.extra_inputs + j * (1 + r)
        st.append([int(v[slot + 1 + d]) for d in range(r)])
    if spec.inner is not None:
        st[0][-1] = spec.inner
    ost = [int(v[sl.out_strides + d]) for d in range(r)]
    ist = [int(v[sl.index_strides + d]) for d in range(r)] if sl.index_strides >= 0 else [0] * r
    lo, hi = int(v[0]), int(v[1])

    def dim(d: int, start: int = 0, count: int | None = None) -> _Dim:
        return _Dim(
            start, sizes[d] if count is None else count, tuple(s[d] for s in st), ost[d], ist[d]
        )

    kept_outer = [
        d for d in range(r) if not spec.reduced[d] and not (spec.is_column and d == r - 1)
    ]
    red_loops = [d for d in range(r) if spec.reduced[d]]
    outs: list[_Dim] = []
    chunk_size = chunk_step = 0
    if spec.mode == "partial":
        chunk_step = int(v[sl.chunk_step])
        chunk_size = sizes[spec.chunk]
        if chunk_step <= 0:
            raise _unsupported(f"chunk step {chunk_step}")
        c = spec.chunk
        outs.append(
            _Dim(
                lo,
                max(0, hi - lo),
                tuple(chunk_step * s[c] for s in st),
                int(v[sl.chunk_stride]),
                chunk_step * ist[c],
                is_chunk=True,
            )
        )
        outs += [dim(d) for d in kept_outer]
        if spec.is_column:
            outs.append(dim(r - 1))
    else:
        for level, d in enumerate(kept_outer):
            outs.append(dim(d, lo, max(0, hi - lo)) if level == 0 else dim(d))
        if spec.is_column:
            m = sizes[r - 1]
            if kept_outer:
                outs.append(dim(r - 1))
            else:  # the split loop is over column blocks of col_width
                cw = int(v[sl.col_width])
                first, last = min(lo * cw, m), min(hi * cw, m)
                outs.append(dim(r - 1, first, max(0, last - first)))
    red = []
    for d in red_loops:
        if d == spec.chunk:
            red.append(dim(d, 0, min(chunk_step, sizes[d])))
            red[-1].is_chunk = True
        else:
            red.append(dim(d))
    n_out = 1
    for o in outs:
        n_out *= o.count
    n_red = 1
    for x in red:
        n_red *= x.count
    per_thread = spec.is_column or n_red <= SHORT_ROW
    if per_thread:
        width = 32
        for w in (256, 128, 64):
            if -(-n_out // w) >= FILL_BLOCKS:
                width = w
                break
        slices = max(1, min(THREADS // width, n_red))
        threads = width * slices
        blocks = max(1, min(MAX_BLOCKS, -(-n_out // width)))
    else:
        width, slices = 1, 1
        # about UNROLL elements per thread; up to 1024 threads when the outputs are too
        # few to fill the GPU with blocks (a full sum's partials)
        cap = THREADS if n_out >= 4 * FILL_BLOCKS else MAX_THREADS
        threads = max(WARP, min(cap, -(-n_red // (UNROLL * WARP)) * WARP))
        blocks = max(1, min(MAX_BLOCKS, n_out))
    return _Plan(
        spec,
        outs,
        red,
        n_out,
        n_red,
        chunk_size,
        chunk_step,
        per_thread,
        width,
        slices,
        threads,
        blocks,
    )


def geometry(launch: Launch) -> Geometry:
    """The grid of a reduction launch: a block per output (row kernels), or tiles of
    consecutive outputs with a thread per output and slice (column kernels, short rows)."""
    p = _plan(launch)
    return Geometry(p.blocks, p.threads)


# --------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------


def _identity(op: str, d: DType) -> list[ir.Value]:
    """The accumulator's starting value (a pair for complex dtypes)."""
    if d.is_complex:
        t = component_type(d)
        return [t(1.0 if op == "prod" else 0.0), t(0.0)]
    t = llvm_type(d)
    if op == "sum":
        return [t(0.0 if d.is_floating_point else 0)]
    if op == "prod":
        return [t(1.0 if d.is_floating_point else 1)]
    low = op in ("amax", "argmax")
    if d.is_floating_point:
        return [t(float("-inf") if low else float("inf"))]
    if d is dt.bool_:
        return [t(0 if low else 1)]
    bits = t.width
    if d.kind == "u":
        return [t(0 if low else (1 << bits) - 1)]
    return [t(-(1 << (bits - 1)) if low else (1 << (bits - 1)) - 1)]


class _Emitter:
    """The pieces of one reduction kernel over a `_Plan` (see the module docstring)."""

    def __init__(self, k: GpuKernel, launch: Launch):
        self.k, self.b = k, k.b
        self.plan = p = _plan(launch)
        self.spec = spec = p.spec
        self.s = LLVMScalar(k.b)
        blk = Block(k, launch.block)
        sl = Slots(spec)
        r = spec.rank
        self.ptrs = [blk.ptr(sl.in_ptr)] + [
            blk.ptr(sl.extra_inputs + j * (1 + r)) for j in range(spec.n_extra)
        ]
        self.out_ptr = blk.ptr(sl.out_ptr)
        self.out_index_ptr = blk.ptr(sl.out_index_ptr) if sl.out_index_ptr >= 0 else None
        self.in_index_ptr = blk.ptr(sl.in_index_ptr) if sl.in_index_ptr >= 0 else None
        self.wide = wide_dtype(spec.op, spec.in_dtype)
        self.side_dtypes = out_dtypes(spec.prologue)[1:] if spec.prologue is not None else []
        self.n_in = len(spec.prologue.in_dtypes) if spec.prologue is not None else 1
        if self.wide.is_complex:
            self.acc_types = [component_type(self.wide)] * 2
        else:
            self.acc_types = [llvm_type(self.wide)] + ([I64] if spec.is_arg else [])

    # -- accumulators ----------------------------------------------------------------------
    def identity(self) -> list[ir.Value]:
        init = _identity(self.spec.op, self.wide)
        if self.spec.is_arg:
            init.append(I64(BIG_INDEX))
        return init

    def merge(self, a: list[ir.Value], x: list[ir.Value]) -> list[ir.Value]:
        """Two accumulators (or an accumulator and one element) combined: associative and,
        for max/min/arg ops, independent of order."""
        b, op, d = self.b, self.spec.op, self.wide
        if d.is_complex:
            if op == "prod":
                return list(self.s.mul(SV(tuple(a), d), SV(tuple(x), d)).value)
            return [b.fadd(p, q, flags=FLAGS) for p, q in zip(a, x)]
        fp = d.is_floating_point
        if op == "sum":
            return [b.fadd(a[0], x[0], flags=FLAGS) if fp else b.add(a[0], x[0])]
        if op == "prod":
            return [b.fmul(a[0], x[0], flags=FLAGS) if fp else b.mul(a[0], x[0])]
        if op in ("amax", "amin"):
            return [extreme(b, op == "amax", a[0], x[0], d)]
        return self.arg_merge(op == "argmax", a, x)

    def arg_merge(self, is_max: bool, a: list[ir.Value], x: list[ir.Value]) -> list[ir.Value]:
        """(value, index) pairs merged by the CPU kernels' rule (`codegen.reduce.arg_update`):
        the better value wins, NaN beats every number, and among equal values (or two
        NaNs) the smaller index wins."""
        return arg_update(self.b, is_max, a[0], a[1], x[0], x[1], self.wide)

    # -- elements --------------------------------------------------------------------------
    def load(self, offs: list[ir.Value], index: ir.Value) -> tuple[list[SV], ir.Value]:
        """The loads of one element: its inputs (input 0, or the prologue's inputs) and,
        in combine mode, its partial's index."""
        spec, s, b = self.spec, self.s, self.b
        dtypes = spec.prologue.in_dtypes if spec.prologue is not None else [spec.in_dtype]
        loaded = [
            s.load(b.gep(self.ptrs[j], [offs[j]], inbounds=True, source_etype=memory_type(d)), d)
            for j, d in enumerate(dtypes)
        ]
        if spec.is_arg and spec.mode == "combine":
            index = b.load(
                b.gep(self.in_index_ptr, [offs[0]], inbounds=True, source_etype=I64), typ=I64
            )
        return loaded, index

    def value(self, loaded: list[SV], index: ir.Value, offs: list[ir.Value]) -> list[ir.Value]:
        """One loaded element as an accumulator-shaped list (the value in the wide dtype,
        the flat index for arg ops); a prologue is evaluated here and its side outputs
        are stored at `offs`."""
        spec, s, b = self.spec, self.s, self.b
        if spec.prologue is None:
            x = loaded[0]
        else:
            x, *side = evaluate(s, spec.prologue, loaded)
            for j, (y, d) in enumerate(zip(side, self.side_dtypes)):
                if y.dtype is not d:
                    y = s.cast(y, d)
                at = self.n_in + j
                s.store(
                    y, b.gep(self.ptrs[at], [offs[at]], inbounds=True, source_etype=memory_type(d))
                )
            if x.dtype is not spec.in_dtype:
                x = s.cast(x, spec.in_dtype)
        x = s.cast(x, self.wide)
        vals = list(x.value) if self.wide.is_complex else [x.value]
        if spec.is_arg:
            vals.append(index)
        return vals

    # -- outputs ---------------------------------------------------------------------------
    def output_base(
        self, o: ir.Value
    ) -> tuple[list[ir.Value], ir.Value, ir.Value, ir.Value | None]:
        """Output `o`'s input offsets (per pointer), output offset, flat-index base and, in
        partial mode, how many iterations its chunk has left in the chunked loop."""
        b, p = self.b, self.plan
        n = len(self.ptrs)
        offs = [I64(0)] * n
        out_off, index = I64(0), I64(0)
        left = None
        idx = (
            decompose(b, o, [x.count for x in p.outs], max(p.n_outputs, 1))
            if len(p.outs) > 1
            else [o]
        )
        for x, i in zip(p.outs, idx):
            if x.start:
                i = b.add(i, I64(x.start))
            offs = [b.add(a, b.mul(i, I64(s))) if s else a for a, s in zip(offs, x.in_strides)]
            if x.out_stride:
                out_off = b.add(out_off, b.mul(i, I64(x.out_stride)))
            if x.index_stride:
                index = b.add(index, b.mul(i, I64(x.index_stride)))
            if x.is_chunk:
                left = b.sub(I64(p.chunk_size), b.mul(i, I64(p.chunk_step)))
        return offs, out_off, index, left

    def store(self, acc: list[ir.Value], out_off: ir.Value) -> None:
        """The finished (or, in partial mode, un-finalized) accumulator at `out_off`."""
        spec, s, b = self.spec, self.s, self.b
        if spec.is_arg and spec.mode != "partial":
            b.store(acc[1], b.gep(self.out_ptr, [out_off], inbounds=True, source_etype=I64))
            return
        v = SV(tuple(acc[:2]) if self.wide.is_complex else acc[0], self.wide)
        s.store(
            s.cast(v, spec.out_dtype),
            b.gep(self.out_ptr, [out_off], inbounds=True, source_etype=memory_type(spec.out_dtype)),
        )
        if spec.is_arg:
            b.store(acc[1], b.gep(self.out_index_ptr, [out_off], inbounds=True, source_etype=I64))

    # -- the reduced space -----------------------------------------------------------------
    def reduce_range(
        self,
        first: ir.Value,
        step: int,
        offs: list[ir.Value],
        index: ir.Value,
        left: ir.Value | None,
    ) -> list[ir.Value]:
        """This thread's accumulator over flat reduced indices `first, first + step, ...`."""
        b, p = self.b, self.plan
        red = p.red
        inner = 1
        for x in red[1:]:
            inner *= x.count
        bound: ir.Value = I64(p.n_reduced)
        guard_dim = -1
        if left is not None:
            c = next(j for j, x in enumerate(red) if x.is_chunk)
            if c == 0:  # the chunk cuts the flat space short: a smaller bound
                n0 = b.select(b.icmp_signed("<", left, I64(red[0].count)), left, I64(red[0].count))
                n0 = b.select(b.icmp_signed("<", n0, I64(0)), I64(0), n0)
                bound = b.mul(n0, I64(inner))
            else:
                guard_dim = c

        def locate(j: ir.Value) -> tuple[list[ir.Value], list[ir.Value], ir.Value]:
            idx = (
                decompose(b, j, [x.count for x in red], max(p.n_reduced, 1))
                if len(red) > 1
                else [j]
            )
            eoffs, eindex = list(offs), index
            for x, i in zip(red, idx):
                eoffs = [
                    b.add(a, b.mul(i, I64(s))) if s else a for a, s in zip(eoffs, x.in_strides)
                ]
                if x.index_stride:
                    eindex = b.add(eindex, b.mul(i, I64(x.index_stride)))
            return idx, eoffs, eindex

        acc = self.identity()
        start = first
        if guard_dim < 0 and p.n_reduced >= UNROLL * step:
            # UNROLL elements per pass, loaded before any is combined (loads in flight)
            last = b.sub(bound, I64((UNROLL - 1) * step))
            with accumulate(b, first, last, acc, "j", I64(UNROLL * step)) as (j, cur, upd):
                got = []
                for u in range(UNROLL):
                    _, eoffs, eindex = locate(b.add(j, I64(u * step)) if u else j)
                    got.append((self.load(eoffs, eindex), eoffs))
                for (loaded, eindex), eoffs in got:
                    cur = self.merge(cur, self.value(loaded, eindex, eoffs))
                upd.extend(cur)
            acc = upd
            start = j  # the header's index at the exit: the first pass not taken
        with accumulate(b, start, bound, acc, "j", I64(step)) as (j, cur, upd):
            idx, eoffs, eindex = locate(j)
            if guard_dim < 0:
                loaded, eindex = self.load(eoffs, eindex)
                upd.extend(self.merge(cur, self.value(loaded, eindex, eoffs)))
            else:
                ok = b.icmp_signed("<", idx[guard_dim], left)
                before = b.block
                with b.if_then(ok):
                    loaded, eindex = self.load(eoffs, eindex)
                    got = self.merge(cur, self.value(loaded, eindex, eoffs))
                    inside = b.block
                for c_, g in zip(cur, got):
                    phi = b.phi(c_.type)
                    phi.add_incoming(c_, before)
                    phi.add_incoming(g, inside)
                    upd.append(phi)
        return upd

    # -- the two mappings ------------------------------------------------------------------
    def emit(self) -> None:
        if self.plan.per_thread:
            self.thread_per_output()
        else:
            self.block_per_output()

    def block_per_output(self) -> None:
        """Block `ctaid` takes outputs ctaid, ctaid + nctaid, ...; threads stride the row."""
        k, b, p = self.k, self.b, self.plan
        privs = [k.private(t, f"acc{j}") for j, t in enumerate(self.acc_types)]
        with for_range(b, k.ctaid, I64(p.n_outputs), "o", k.nctaid) as o:
            offs, out_off, index, left = self.output_base(o)
            with k.threads() as tid:
                acc = self.reduce_range(tid, p.threads, offs, index, left)
                for pv, a in zip(privs, acc):
                    pv.set(a)
            total = k.block_reduce(privs, self.merge, self.identity())
            with k.single():
                self.store(total, out_off)

    def thread_per_output(self) -> None:
        """Tiles of W consecutive outputs; S slices of the reduced space per output."""
        k, b, p = self.k, self.b, self.plan
        w, n_slices = p.width, p.slices
        if n_slices == 1:

            def one(o: ir.Value) -> None:
                offs, out_off, index, left = self.output_base(o)
                self.store(self.reduce_range(I64(0), 1, offs, index, left), out_off)

            with k.threads():
                grid_stride(k, I64(p.n_outputs), one)
            return
        shared = [k.shared(t, p.threads, f"slice{j}") for j, t in enumerate(self.acc_types)]
        tiles = -(-p.n_outputs // w)
        with for_range(b, k.ctaid, I64(tiles), "t", k.nctaid) as t:
            first = b.mul(t, I64(w))
            with k.threads() as tid:
                o = b.add(first, b.and_(tid, I64(w - 1)))
                sl = b.lshr(tid, I64(w.bit_length() - 1))
                acc = self.identity()
                pre = b.block
                with b.if_then(b.icmp_signed("<", o, I64(p.n_outputs))):
                    offs, _, index, left = self.output_base(o)
                    got = self.reduce_range(sl, n_slices, offs, index, left)
                    inside = b.block
                merged = []
                for a, g in zip(acc, got):
                    phi = b.phi(a.type)
                    phi.add_incoming(a, pre)
                    phi.add_incoming(g, inside)
                    merged.append(phi)
                for sh, v in zip(shared, merged):
                    b.store(v, b.gep(sh, [tid], inbounds=True, source_etype=v.type))
            k.barrier()
            with k.threads() as tid:
                o = b.add(first, tid)
                mine = b.and_(
                    b.icmp_unsigned("<", tid, I64(w)), b.icmp_signed("<", o, I64(p.n_outputs))
                )
                with b.if_then(mine):
                    total = None
                    for s_ in range(n_slices):
                        at = b.add(tid, I64(s_ * w))
                        vals = [
                            b.load(b.gep(sh, [at], inbounds=True, source_etype=ty), typ=ty)
                            for sh, ty in zip(shared, self.acc_types)
                        ]
                        total = vals if total is None else self.merge(total, vals)
                    _, out_off, _, _ = self.output_base(o)
                    self.store(total, out_off)
            k.barrier()


def build(k: GpuKernel, launch: Launch) -> None:
    """Emit the kernel of a reduction launch: a block per output for row kernels, a thread
    per output (and slice of the reduced space) for column kernels and short rows; raises
    `UnsupportedOnGpu` for complex arg reductions."""
    _Emitter(k, launch).emit()
