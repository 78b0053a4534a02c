"""Row-wise (persistent) kernels: reductions over a row and the work that consumes them.

What a row kernel computes, its levels, passes and cached row values are described in
`schedule/row.py` (the spec this module generates code for).

Sums of float32 (and half) values add runs of `SUM_BLOCK` elements in float32 (vectorized)
and the run totals in float64, as reduction kernels do; max/min propagate NaN.

Sums over the rows (`colsum`: the gradients of a bias or a layer_norm weight) accumulate
in float64 into a partial row per piece of the row range, zeroed when the piece starts,
while the rows stream by; the pieces are added by a small kernel afterwards.

Argument block: `[lo, hi, C, step, (ptr, row_stride, col_stride) per operand]`, outputs
first (full outputs dense: strides `(C, 1)`; row outputs: `(1, 0)`; column sums: the
partial buffer, `(C, 1)` per piece), then inputs. The row loop runs over `[lo, hi)` so the
runtime can split rows across threads; `step` is the rows per piece (piece = lo // step).
Strides in elements.
"""

from __future__ import annotations

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..schedule.row import REDUCTIONS, RowKernel, plan
from .elementwise import apply_node
from .loops import I64, accumulate, for_range, new_kernel
from .reduce import SUM_BLOCK, extreme
from .scalar import FLAGS, SV, LLVMScalar, llvm_type, memory_type


def _acc_dtypes(op: str, d: DType) -> tuple[DType, DType]:
    """(in-loop, across-runs) accumulator dtypes of a reduction of `d` values."""
    c = d.compute if d.is_floating_point else d
    if op == "sum":
        return c, (dt.float64 if d.is_floating_point else dt.int64)
    return c, c


def _identity(op: str, d: DType) -> ir.Constant:
    t = llvm_type(d)
    if op == "sum":
        return ir.Constant(t, 0.0 if d.is_floating_point else 0)
    return ir.Constant(t, float("-inf") if op == "amax" else float("inf"))


class _Emitter:
    def __init__(self, spec: RowKernel, b: ir.IRBuilder, args) -> None:
        self.spec = spec
        self.b = b
        self.s = LLVMScalar(b)
        self.plan = plan(spec)
        expr = spec.expr
        self.n_in = len(expr.in_dtypes)
        self.out_dtypes = [self.plan.dtypes[o] for o in expr.outputs]
        self.lo, self.hi = args.int(0, "lo"), args.int(1, "hi")
        self.cols = I64(spec.cols)
        self.piece = b.sdiv(self.lo, args.int(3, "step"), name="piece")
        self.ptrs, self.rs, self.cs = [], [], []
        for k in range(spec.n_operands):
            slot = 4 + 3 * k
            self.ptrs.append(args.ptr(slot, f"p{k}"))
            self.rs.append(args.int(slot + 1, f"rs{k}"))
            cs = args.int(slot + 2, f"cs{k}")
            self.cs.append(I64(spec.inner[k]) if spec.inner[k] is not None else cs)
        self.buffers: dict[int, ir.Value] = {}
        for ref in self.plan.cached:  # row buffers: static allocas at entry
            t = llvm_type(
                self.plan.dtypes[ref].compute
                if self.plan.dtypes[ref].is_floating_point
                else self.plan.dtypes[ref]
            )
            self.buffers[ref] = b.alloca(t, size=I64(spec.cols), name=f"row{ref}")

    # -- values ---------------------------------------------------------------------------
    def operand_ptr(self, k: int, row: ir.Value, col: ir.Value | None, d: DType) -> ir.Value:
        off = self.b.mul(row, self.rs[k])
        if col is not None:
            off = self.b.add(off, self.b.mul(col, self.cs[k]))
        return self.b.gep(self.ptrs[k], [off], inbounds=True, source_etype=memory_type(d))

    def row_value(self, ref: int, row: ir.Value, values: dict[int, SV]) -> SV:
        """A row-level value (inputs loaded, elementwise ops computed once per row)."""
        if ref in values:
            return values[ref]
        if ref < self.n_in:
            d = self.spec.expr.in_dtypes[ref]
            k = len(self.spec.expr.outputs) + ref
            v = self.s.load(self.operand_ptr(k, row, None, d), d, name=f"r{ref}")
        else:
            node = self.spec.expr.nodes[ref - self.n_in]
            assert node.op not in REDUCTIONS, "a reduction's value comes from its pass"
            v = apply_node(self.s, node, [self.row_value(a, row, values) for a in node.args])
        values[ref] = v
        return v

    def full_value(
        self,
        ref: int,
        p: int,
        row: ir.Value,
        col: ir.Value,
        rows: dict[int, SV],
        here: dict[int, SV],
    ) -> SV:
        """A value at column `col` in pass `p`: loaded, re-read from its row buffer, or
        computed from its arguments."""
        if self.plan.is_row[ref]:
            assert ref in rows, "row values a pass reads are computed before its loop"
            return rows[ref]
        if ref in here:
            return here[ref]
        if ref < self.n_in:
            d = self.spec.expr.in_dtypes[ref]
            k = len(self.spec.expr.outputs) + ref
            v = self.s.load(self.operand_ptr(k, row, col, d), d, name=f"x{ref}")
        elif ref in self.buffers and self.plan.level[ref] < p:
            d = self.plan.dtypes[ref]
            raw = self.b.load(
                self.b.gep(
                    self.buffers[ref],
                    [col],
                    inbounds=True,
                    source_etype=self.buffers[ref].allocated_type,
                ),
                typ=self.buffers[ref].allocated_type,
                name=f"c{ref}",
            )
            v = SV(raw, d)
        else:
            node = self.spec.expr.nodes[ref - self.n_in]
            v = apply_node(
                self.s, node, [self.full_value(a, p, row, col, rows, here) for a in node.args]
            )
        here[ref] = v
        return v

    # -- passes ---------------------------------------------------------------------------
    def row_body(self, row: ir.Value) -> None:
        expr, pl = self.spec.expr, self.plan
        rows: dict[int, SV] = {}
        for p in range(pl.passes):
            reductions = [
                self.n_in + j
                for j, n in enumerate(expr.nodes)
                if n.op in REDUCTIONS and pl.level[n.args[0]] == p
            ]
            stores = [
                (k, o)
                for k, o in enumerate(expr.outputs)
                if not pl.is_row[o] and not pl.is_column[o] and pl.level[o] == p
            ]
            columns = [
                (k, o) for k, o in enumerate(expr.outputs) if pl.is_column[o] and pl.level[o] == p
            ]
            caches = [c for c in pl.cached if pl.level[c] == p]
            # row values this pass reads are computed before its loop (they dominate it)
            self.pass_loop(p, row, rows, reductions, stores, caches, columns)
        for k, o in enumerate(expr.outputs):
            if pl.is_row[o] and not pl.is_column[o]:
                v = self.row_value(o, row, rows)
                if v.dtype is not self.out_dtypes[k]:
                    v = self.s.cast(v, self.out_dtypes[k])
                self.s.store(v, self.operand_ptr(k, row, None, self.out_dtypes[k]))

    def pass_loop(
        self,
        p: int,
        row: ir.Value,
        rows: dict[int, SV],
        reductions: list[int],
        stores: list[tuple[int, int]],
        caches: list[int],
        columns: list[tuple[int, int]],
    ) -> None:
        b, s, expr = self.b, self.s, self.spec.expr
        # row values used in this pass, hoisted before the loop
        for ref in range(self.n_in + len(expr.nodes)):
            if (
                self.plan.is_row[ref]
                and ref not in rows
                and self.plan.level[ref] <= p
                and not (ref >= self.n_in and expr.nodes[ref - self.n_in].op in REDUCTIONS)
            ):
                if self._row_ready(ref, rows):
                    self.row_value(ref, row, rows)
        ops = [expr.nodes[r - self.n_in].op for r in reductions]
        accs = [
            _acc_dtypes(op, self.plan.dtypes[expr.nodes[r - self.n_in].args[0]])
            for op, r in zip(ops, reductions)
        ]
        wide_init = [_identity(op, w) for op, (_, w) in zip(ops, accs)]
        n_runs = -(-self.spec.cols // SUM_BLOCK)
        with accumulate(b, I64(0), I64(n_runs), wide_init, name=f"pass{p}") as (j, wcur, wupd):
            start = b.mul(j, I64(SUM_BLOCK))
            stop = b.select(
                b.icmp_signed("<", b.add(start, I64(SUM_BLOCK)), self.cols),
                b.add(start, I64(SUM_BLOCK)),
                self.cols,
            )
            narrow_init = [_identity(op, n) for op, (n, _) in zip(ops, accs)]
            with accumulate(b, start, stop, narrow_init, name=f"col{p}") as (c, ncur, nupd):
                here: dict[int, SV] = {}
                for k, o in stores:
                    v = self.full_value(o, p, row, c, rows, here)
                    if v.dtype is not self.out_dtypes[k]:
                        v = s.cast(v, self.out_dtypes[k])
                    s.store(v, self.operand_ptr(k, row, c, self.out_dtypes[k]))
                for ref in caches:
                    v = self.full_value(ref, p, row, c, rows, here)
                    buf = self.buffers[ref]
                    b.store(
                        v.value, b.gep(buf, [c], inbounds=True, source_etype=buf.allocated_type)
                    )
                for k, o in columns:
                    x = self.full_value(expr.nodes[o - self.n_in].args[0], p, row, c, rows, here)
                    at = self.partial(k, c)
                    old = b.load(at, typ=ir.DoubleType())
                    b.store(b.fadd(old, s.cast(x, dt.float64).value, flags=FLAGS), at)
                for r, op, (narrow, _), acc in zip(reductions, ops, accs, ncur):
                    x = self.full_value(expr.nodes[r - self.n_in].args[0], p, row, c, rows, here)
                    nupd.append(self._combine(op, acc, s.cast(x, narrow).value, narrow))
            for op, (narrow, wide), w, n in zip(ops, accs, wcur, nupd):
                nv = s.cast(SV(n, narrow), wide).value if narrow is not wide else n
                wupd.append(self._combine(op, w, nv, wide))
        for r, (_, wide), w in zip(reductions, accs, wupd):
            rows[r] = s.cast(SV(w, wide), self.plan.dtypes[r])

    def _row_ready(self, ref: int, rows: dict[int, SV]) -> bool:
        """Every reduction `ref` depends on has been computed."""
        if ref < self.n_in or ref in rows:
            return True
        node = self.spec.expr.nodes[ref - self.n_in]
        if node.op in REDUCTIONS:
            return False
        return all(self._row_ready(a, rows) for a in node.args)

    def _combine(self, op: str, a: ir.Value, v: ir.Value, d: DType) -> ir.Value:
        if op == "sum":
            return self.b.fadd(a, v, flags=FLAGS) if d.is_floating_point else self.b.add(a, v)
        return extreme(self.b, op == "amax", a, v, d)

    def partial(self, k: int, col: ir.Value) -> ir.Value:
        """This piece's float64 partial sum of column `col` for column-sum output k."""
        off = self.b.add(self.b.mul(self.piece, self.rs[k]), self.b.mul(col, self.cs[k]))
        return self.b.gep(self.ptrs[k], [off], inbounds=True, source_etype=ir.DoubleType())

    def emit(self) -> None:
        outputs = self.spec.expr.outputs
        for k, o in enumerate(outputs):
            if self.plan.is_column[o]:
                with for_range(self.b, I64(0), self.cols, name=f"zero{k}") as c:
                    self.b.store(ir.Constant(ir.DoubleType(), 0.0), self.partial(k, c))
        with for_range(self.b, self.lo, self.hi, name="row") as row:
            self.row_body(row)


def build(spec: RowKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    _, b, args = new_kernel(module, name)
    _Emitter(spec, b, args).emit()
    b.ret_void()
    return module
