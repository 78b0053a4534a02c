"""Row kernels (`schedule.row.RowKernel`) on the GPU: softmax, layer_norm, log_softmax,
logsumexp, cross-entropy and their backward graphs.

The GPU kernel computes what `codegen/rowwise.py` computes, from the same argument block
`[lo, hi, C, step, (ptr, row_stride, col_stride) per operand]`: for every row of
`[lo, hi)` its passes (one per level of the row program, `schedule.row.plan`), the row
values between the passes, the full outputs, the row outputs, and the column sums into
float64 partial rows (piece = first row of the piece // step).

Mapping:

- **block = rows.** A block owns whole rows and walks them one after the other in
  uniform code. With column-sum outputs the block is one *piece* of the lowering's split
  (`ceil((hi - lo) / step)` blocks; block `i` takes rows `[lo + i*step, +step)` and
  writes partial row `lo // step + i`); a launch the lowering did not split (one piece)
  then runs on ONE block (correct, slower: no other block may write that partial row).
  Without column sums the rows are spread over `min(rows, MAX_BLOCKS)` blocks,
  grid-stride.
- **threads = columns.** `T` threads (a multiple of 32: `C` rounded up for short rows,
  256 for most, up to 1024 for long rows); thread `t` owns columns `t, t + T, ...` (`cpt =
  ceil(C / T)` of them), so a warp reads and writes consecutive addresses of a row.
- **a pass** is one thread phase: each thread evaluates the pass's values at its columns,
  stores the pass's full outputs, and folds its columns into private accumulators (sums
  in float64/int64, max/min in the compute dtype, NaN wins); one `block_reduce` per pass
  gives every thread the row's reductions; the row values of the next pass are computed
  from them in uniform code.
- **values a later pass reads again** (the CPU's row buffers, and full inputs read
  again) stay in per-thread registers (privates, one per value and owned column) while
  they fit a register budget (64 32-bit words a thread, 32 in 1024-thread blocks), inputs
  first; the others are recomputed from their operands (bitwise the same values). Column
  sums accumulate in float64 privates over the block's rows when they fit, and each
  thread writes its columns of the partial row once at the end; otherwise the partial
  row is zeroed first and updated in memory row by row, each thread touching only its
  own columns (no race). A thread's columns are unrolled up to 16 of them; longer rows
  loop over them and keep nothing in registers. The PTX declares `.maxntid T`, so ptxas
  keeps a 1024-thread block within the register file.

Launches this generator refuses raise `program.UnsupportedOnGpu`: complex dtypes, sums of
bool values, and column sums whose row range does not start on a piece boundary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from llvmlite import ir

from ...ir import dtypes as dt
from ...ir.dtypes import DType
from ...schedule.program import Launch
from ...schedule.row import REDUCTIONS, RowKernel, RowPlan, plan
from ..elementwise import apply_node
from ..loops import I64, for_range
from ..reduce import extreme
from ..rowwise import _acc_dtypes, _identity
from ..scalar import FLAGS, SV, LLVMScalar, memory_type
from .common import MAX_BLOCKS, THREADS, Block, Geometry, UnsupportedOnGpu
from .kernel import MAX_THREADS, WARP, GpuKernel, Private

F64 = ir.DoubleType()
# the most threads a row block grows to for long rows (LLGRAD_GPU_ROW_THREADS lowers it:
# fewer threads per row, more rows in flight per multiprocessor, fewer values in registers)
ROW_THREADS_CAP = min(MAX_THREADS, int(os.environ.get("LLGRAD_GPU_ROW_THREADS", MAX_THREADS)))
PRIVATE_WORDS = 64  # most 32-bit registers of cached values per thread (<= 256 threads)
PRIVATE_WORDS_WIDE = 32  # ... in blocks of 1024 threads (64 registers each at most)
MAX_UNROLL = 16  # most columns per thread whose code is unrolled


def _unsupported(msg: str) -> Exception:
    return UnsupportedOnGpu(msg)


@dataclass(frozen=True)
class _Layout:
    """How a launch maps onto the grid (shared by `geometry` and `build`)."""

    threads: int
    cpt: int  # columns per thread
    blocks: int
    pieces: bool  # blocks are the lowering's pieces (column sums)
    unroll: bool  # a thread's columns are unrolled (privates are possible)
    colsum_private: bool  # column sums accumulate in registers over the rows
    cached: tuple[int, ...]  # full refs a later pass re-reads from registers
    step: int


def _words(d: DType) -> int:
    c = d.compute if d.is_floating_point else d
    return 2 if c.itemsize > 4 else 1


def _reread(spec: RowKernel, pl: RowPlan) -> tuple[int, ...]:
    """Full values (inputs included) that a pass after their own reads again: inputs
    first (a re-read is a memory access), then computed values in program order."""
    expr = spec.expr
    n_in = len(expr.in_dtypes)
    out = set()
    for j, node in enumerate(expr.nodes):
        ref = n_in + j
        if pl.is_row[ref] or pl.is_column[ref]:
            continue
        for a in node.args:
            if not pl.is_row[a] and not pl.is_column[a] and pl.level[a] < pl.level[ref]:
                out.add(a)
    return tuple(sorted(out))


def _check(spec: RowKernel, pl: RowPlan) -> None:
    for d in pl.dtypes:
        if d.is_complex:
            raise _unsupported(
                f"row kernel with {d.name} values: no GPU row kernel for complex dtypes"
            )
    for node in spec.expr.nodes:
        if node.op == "sum" and pl.dtypes[node.args[0]] is dt.bool_:
            raise _unsupported("row kernel: a sum of bool values has no GPU row kernel")


def _layout(launch: Launch) -> _Layout:
    spec: RowKernel = launch.spec
    pl = plan(spec)
    _check(spec, pl)
    lo, hi, cols, step = (int(v) for v in launch.block[:4])
    rows = max(0, hi - lo)
    columns = [o for o in spec.expr.outputs if pl.is_column[o]]
    reread = _reread(spec, pl)
    words = sum(_words(pl.dtypes[r]) for r in reread) + 2 * len(columns)
    # threads: the row rounded up to warps, at most 256, more for long rows until a
    # thread's registers could hold what it keeps (or 1024 threads)
    threads = max(WARP, min(THREADS, -(-cols // WARP) * WARP))
    while threads < ROW_THREADS_CAP and -(-cols // threads) * words > PRIVATE_WORDS:
        threads *= 2
    cpt = -(-cols // threads)
    unroll = cpt <= MAX_UNROLL
    budget = PRIVATE_WORDS if threads <= 2 * THREADS else PRIVATE_WORDS_WIDE
    colsum_private = bool(columns) and unroll and cpt * 2 * len(columns) <= budget
    if colsum_private:
        budget -= cpt * 2 * len(columns)
    cached = []
    if unroll:
        for r in reread:
            if cpt * _words(pl.dtypes[r]) <= budget:
                cached.append(r)
                budget -= cpt * _words(pl.dtypes[r])
    if columns:
        if step <= 0:
            step = max(1, rows)
        if lo % step:
            raise _unsupported(
                f"row kernel: column sums over rows [{lo}, {hi}) that do not "
                f"start on a piece boundary (step {step})"
            )
        blocks = max(1, -(-rows // step))
    else:
        blocks = max(1, min(rows, MAX_BLOCKS))
    return _Layout(threads, cpt, blocks, bool(columns), unroll, colsum_private, tuple(cached), step)


def geometry(launch: Launch) -> Geometry:
    """The grid of a row launch: one block per piece of rows (column sums) or per row
    (grid-stride), `T` threads over the columns (see the module docstring)."""
    lay = _layout(launch)
    return Geometry(lay.blocks, lay.threads)


class _RowGpu:
    """Emits one row kernel onto a `GpuKernel` (see the module docstring)."""

    def __init__(self, k: GpuKernel, launch: Launch, lay: _Layout) -> None:
        self.k, self.b, self.lay = k, k.b, lay
        self.spec: RowKernel = launch.spec
        self.plan = plan(self.spec)
        self.s = LLVMScalar(k.b)
        blk = Block(k, launch.block)
        expr = self.spec.expr
        self.n_in = len(expr.in_dtypes)
        self.n_out = len(expr.outputs)
        self.out_dtypes = [self.plan.dtypes[o] for o in expr.outputs]
        self.lo, self.hi, self.cols = blk.value(0), blk.value(1), blk.value(2)
        self.ptrs, self.rs, self.cs = [], [], []
        for j in range(self.spec.n_operands):
            slot = 4 + 3 * j
            self.ptrs.append(blk.ptr(slot))
            self.rs.append(blk.value(slot + 1))
            inner = self.spec.inner[j]
            self.cs.append(inner if inner is not None else blk.value(slot + 2))
        self.cache: dict[tuple[int, int], Private] = {}  # (ref, column slot)
        self.colacc: dict[tuple[int, int], Private] = {}  # (output k, column slot)
        self.piece: ir.Value | None = None

    # -- addresses and values ---------------------------------------------------------------
    def at(self, j: int, row: ir.Value, col: ir.Value | None, typ: ir.Type) -> ir.Value:
        b = self.b
        off = b.mul(row, I64(self.rs[j])) if self.rs[j] != 1 else row
        if col is not None and self.cs[j] != 0:
            off = b.add(off, col if self.cs[j] == 1 else b.mul(col, I64(self.cs[j])))
        return b.gep(self.ptrs[j], [off], inbounds=True, source_etype=typ)

    def row_value(self, ref: int, row: ir.Value, rows: dict[int, SV]) -> SV:
        """A row-level value, in uniform code (loads of row inputs; ops once per row)."""
        if ref in rows:
            return rows[ref]
        if ref < self.n_in:
            d = self.spec.expr.in_dtypes[ref]
            v = self.s.load(self.at(self.n_out + ref, row, None, memory_type(d)), d, name=f"r{ref}")
        else:
            node = self.spec.expr.nodes[ref - self.n_in]
            assert node.op not in REDUCTIONS, "a reduction's value comes from its pass"
            v = apply_node(self.s, node, [self.row_value(a, row, rows) for a in node.args])
        rows[ref] = v
        return v

    def ready(self, ref: int, rows: dict[int, SV]) -> bool:
        """Every reduction `ref` depends on is known."""
        if ref < self.n_in or ref in rows:
            return True
        node = self.spec.expr.nodes[ref - self.n_in]
        if node.op in REDUCTIONS:
            return False
        return all(self.ready(a, rows) for a in node.args)

    def full_value(
        self,
        ref: int,
        p: int,
        slot: int,
        row: ir.Value,
        col: ir.Value,
        rows: dict[int, SV],
        here: dict[int, SV],
    ) -> SV:
        """`ref` at column `col` (this thread's column slot `slot`) in pass `p`."""
        pl = self.plan
        if pl.is_row[ref]:
            assert ref in rows, "row values a pass reads are computed before it"
            return rows[ref]
        if ref in here:
            return here[ref]
        cached = self.cache.get((ref, slot))
        if cached is not None and pl.level[ref] < p:
            v = SV(cached.get(), pl.dtypes[ref])
        elif ref < self.n_in:
            d = self.spec.expr.in_dtypes[ref]
            v = self.s.load(self.at(self.n_out + ref, row, col, memory_type(d)), d, name=f"x{ref}")
        else:
            node = self.spec.expr.nodes[ref - self.n_in]
            v = apply_node(
                self.s, node, [self.full_value(a, p, slot, row, col, rows, here) for a in node.args]
            )
        here[ref] = v
        return v

    def partial(self, k: int, col: ir.Value) -> ir.Value:
        """This block's float64 partial sum of column `col` for column-sum output k."""
        b = self.b
        off = b.add(b.mul(self.piece, I64(self.rs[k])), b.mul(col, I64(self.cs[k])))
        return b.gep(self.ptrs[k], [off], inbounds=True, source_etype=F64)

    # -- columns of a thread ----------------------------------------------------------------
    def each_column(self, body) -> None:
        """Inside a thread phase: `body(slot, col)` for this thread's columns; unrolled
        (slot = 0..cpt-1, the last one guarded when C % T) when `cpt` is small, else a
        loop (slot = -1)."""
        b, T, cols, cpt = self.b, self.lay.threads, self.cols, self.lay.cpt
        tid = self.k.tid
        if self.lay.unroll:
            for slot in range(cpt):
                col = b.add(tid, I64(slot * T)) if slot else tid
                if (slot + 1) * T > cols:
                    with b.if_then(b.icmp_signed("<", col, I64(cols))):
                        body(slot, col)
                else:
                    body(slot, col)
            return
        with for_range(b, tid, I64(cols), "col", step=I64(T)) as col:
            body(-1, col)

    # -- the kernel ---------------------------------------------------------------------------
    def emit(self) -> None:
        k, b, lay = self.k, self.b, self.lay
        outputs = self.spec.expr.outputs
        columns = [(j, o) for j, o in enumerate(outputs) if self.plan.is_column[o]]
        if lay.pieces:
            first = b.add(I64(self.lo), b.mul(k.ctaid, I64(lay.step)))
            last = b.add(first, I64(lay.step))
            last = b.select(b.icmp_signed("<", last, I64(self.hi)), last, I64(self.hi))
            self.piece = b.add(I64(self.lo // lay.step), k.ctaid)
            if lay.colsum_private:
                for j, _ in columns:
                    for slot in range(lay.cpt):
                        self.colacc[(j, slot)] = k.private(F64, f"colsum{j}_{slot}")
            with k.threads():
                zero = ir.Constant(F64, 0.0)

                def clear(slot: int, col: ir.Value) -> None:
                    for j, _ in columns:
                        if lay.colsum_private:
                            self.colacc[(j, slot)].set(zero)
                        else:
                            b.store(zero, self.partial(j, col))

                self.each_column(clear)
            k.barrier()
            loop = for_range(b, first, last, "row")
        else:
            loop = for_range(b, b.add(I64(self.lo), k.ctaid), I64(self.hi), "row", step=k.nctaid)
        with loop as row:
            self.row_body(row)
        if lay.pieces and lay.colsum_private:
            with k.threads():

                def write(slot: int, col: ir.Value) -> None:
                    for j, _ in columns:
                        b.store(self.colacc[(j, slot)].get(), self.partial(j, col))

                self.each_column(write)

    def row_body(self, row: ir.Value) -> None:
        expr, pl, k = self.spec.expr, self.plan, self.k
        rows: dict[int, SV] = {}
        for p in range(pl.passes):
            self.one_pass(p, row, rows)
        for j, o in enumerate(expr.outputs):
            if pl.is_row[o] and not pl.is_column[o]:
                v = self.row_value(o, row, rows)
                if v.dtype is not self.out_dtypes[j]:
                    v = self.s.cast(v, self.out_dtypes[j])
                with k.single():
                    self.s.store(v, self.at(j, row, None, memory_type(self.out_dtypes[j])))

    def one_pass(self, p: int, row: ir.Value, rows: dict[int, SV]) -> None:
        expr, pl, k, b, s = self.spec.expr, self.plan, self.k, self.b, self.s
        n_in = self.n_in
        for ref in range(n_in + len(expr.nodes)):  # row values, in uniform code
            if pl.is_row[ref] and ref not in rows and self.ready(ref, rows):
                self.row_value(ref, row, rows)
        reductions = [
            n_in + j
            for j, n in enumerate(expr.nodes)
            if n.op in REDUCTIONS and pl.level[n.args[0]] == p
        ]
        stores = [
            (j, o)
            for j, o in enumerate(expr.outputs)
            if not pl.is_row[o] and not pl.is_column[o] and pl.level[o] == p
        ]
        columns = [
            (j, o) for j, o in enumerate(expr.outputs) if pl.is_column[o] and pl.level[o] == p
        ]
        caches = [r for r in self.lay.cached if pl.level[r] == p]
        ops = [expr.nodes[r - n_in].op for r in reductions]
        wide = [
            _acc_dtypes(op, pl.dtypes[expr.nodes[r - n_in].args[0]])[1]
            for op, r in zip(ops, reductions)
        ]
        narrow = [
            _acc_dtypes(op, pl.dtypes[expr.nodes[r - n_in].args[0]])[0]
            for op, r in zip(ops, reductions)
        ]
        idents = [_identity(op, w) for op, w in zip(ops, wide)]
        accs = [k.private(idents[i].type, f"acc{r}") for i, r in enumerate(reductions)]

        def column(slot: int, col: ir.Value) -> None:
            here: dict[int, SV] = {}
            for j, o in stores:
                v = self.full_value(o, p, slot, row, col, rows, here)
                if v.dtype is not self.out_dtypes[j]:
                    v = s.cast(v, self.out_dtypes[j])
                s.store(v, self.at(j, row, col, memory_type(self.out_dtypes[j])))
            for ref in caches:
                v = self.full_value(ref, p, slot, row, col, rows, here)
                priv = self.cache.get((ref, slot))
                if priv is None:
                    priv = self.cache[(ref, slot)] = k.private(v.value.type, f"c{ref}_{slot}")
                priv.set(v.value)
            for j, o in columns:
                x = self.full_value(expr.nodes[o - n_in].args[0], p, slot, row, col, rows, here)
                x64 = s.cast(x, dt.float64).value
                if self.lay.colsum_private:
                    acc = self.colacc[(j, slot)]
                    acc.set(b.fadd(acc.get(), x64, flags=FLAGS))
                else:
                    at = self.partial(j, col)
                    b.store(b.fadd(b.load(at, typ=F64), x64, flags=FLAGS), at)
            for r, op, nd, wd, acc in zip(reductions, ops, narrow, wide, accs):
                x = self.full_value(expr.nodes[r - n_in].args[0], p, slot, row, col, rows, here)
                x = s.cast(s.cast(x, nd), wd) if op == "sum" else s.cast(x, wd)
                acc.set(self.combine(op, acc.get(), x.value, wd))

        with k.threads():
            for acc, init in zip(accs, idents):
                acc.set(init)
            self.each_column(column)
        if reductions:

            def merge(a: list[ir.Value], v: list[ir.Value]) -> list[ir.Value]:
                return [self.combine(op, x, y, wd) for op, wd, x, y in zip(ops, wide, a, v)]

            totals = k.block_reduce(accs, merge, idents)
            for r, wd, t in zip(reductions, wide, totals):
                rows[r] = s.cast(SV(t, wd), pl.dtypes[r])
        else:
            k.barrier()

    def combine(self, op: str, a: ir.Value, v: ir.Value, d: DType) -> ir.Value:
        if op == "sum":
            return self.b.fadd(a, v, flags=FLAGS) if d.is_floating_point else self.b.add(a, v)
        return extreme(self.b, op == "amax", a, v, d)


def build(k: GpuKernel, launch: Launch) -> None:
    """Emit `launch`'s row kernel onto `k` (mapping: the module docstring)."""
    if not isinstance(launch.spec, RowKernel):
        raise TypeError(f"row.build: not a row kernel: {type(launch.spec).__name__}")
    lay = _layout(launch)
    _RowGpu(k, launch, lay).emit()
    if k.mode == "ptx":
        _max_threads(k, lay.threads)


def _max_threads(k: GpuKernel, threads: int) -> None:
    """Tell ptxas the block size (`.maxntid`), so that it keeps the registers of a
    1024-thread block within the multiprocessor's 64K (a launch would fail otherwise)."""
    m = k.module
    node = m.add_metadata([k.fn, ir.MetaDataString(m, "maxntidx"), ir.IntType(32)(threads)])
    m.add_named_metadata("nvvm.annotations", node)
