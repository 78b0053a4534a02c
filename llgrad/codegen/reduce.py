"""Reduction kernels: LLVM IR for a `schedule.reduce.ReduceKernel` (sum, prod, amax, amin,
argmax, argmin over any set of axes; row and column kernel shapes, partial and combine
modes, prologues). The spec, its argument block and the loop ordering are described in
`llgrad/schedule/reduce.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..schedule.elementwise import out_dtypes
from ..schedule.reduce import (
    COLUMN_CAP,
    COLUMN_ROWS,
    SUM_BLOCK,
    ReduceKernel,
    Slots,
    narrow_dtype,
    wide_dtype,
)
from .elementwise import evaluate
from .loops import I1, I64, accumulate, for_range, new_kernel
from .scalar import FLAGS, SV, LLVMScalar, component_type, intrinsic, llvm_type, memory_type

# --------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------


def _identity(op: str, d: DType) -> ir.Constant:
    """The value an accumulator of dtype `d` starts from."""
    t = llvm_type(d)
    if op == "sum":
        return ir.Constant(t, 0.0 if d.is_floating_point else 0)
    if op == "prod":
        return ir.Constant(t, 1.0 if d.is_floating_point else 1)
    low = op in ("amax", "argmax")
    if d.is_floating_point:
        return ir.Constant(t, float("-inf") if low else float("inf"))
    if d is dt.bool_:
        return ir.Constant(t, 0 if low else 1)
    bits = t.width
    if d.kind == "u":
        return ir.Constant(t, 0 if low else (1 << bits) - 1)
    return ir.Constant(t, -(1 << (bits - 1)) if low else (1 << (bits - 1)) - 1)


def extreme(b: ir.IRBuilder, is_max: bool, a: ir.Value, v: ir.Value, d: DType) -> ir.Value:
    """max/min of an accumulator and a value; a NaN wins (NumPy's and PyTorch's rule)."""
    if d.is_floating_point:
        name = "llvm.maximum" if is_max else "llvm.minimum"
        t = a.type
        fn = intrinsic(b.module, f"{name}.{'f32' if t == ir.FloatType() else 'f64'}", t, [t, t])
        return b.call(fn, [a, v])
    if d is dt.bool_:
        return b.or_(a, v) if is_max else b.and_(a, v)
    cmp = b.icmp_signed if d.kind == "i" else b.icmp_unsigned
    return b.select(cmp(">" if is_max else "<", v, a), v, a)


def arg_update(
    b: ir.IRBuilder,
    is_max: bool,
    best: ir.Value,
    best_i: ir.Value,
    v: ir.Value,
    i: ir.Value,
    d: DType,
) -> list[ir.Value]:
    """The (value, index) an arg reduction keeps: the better value; NaN beats everything;
    among equal extremes (or two NaNs) the smaller flat index.

    The rule is independent of visiting order, so loops may be reordered and chunks (or
    a GPU's threads) combined in any order and still return PyTorch's (first) index.
    """
    earlier = b.icmp_signed("<", i, best_i)
    if d.is_floating_point:
        better = b.fcmp_ordered(">" if is_max else "<", v, best)
        equal = b.fcmp_ordered("==", v, best)
        v_nan = b.fcmp_unordered("uno", v, v)
        best_nan = b.fcmp_unordered("uno", best, best)
        tie = b.or_(equal, b.and_(v_nan, best_nan))
        take = b.or_(b.or_(better, b.and_(tie, earlier)), b.and_(v_nan, b.xor(best_nan, I1(1))))
    else:
        cmp = b.icmp_signed if d.kind == "i" else b.icmp_unsigned
        better = cmp(">" if is_max else "<", v, best)
        take = b.or_(better, b.and_(b.icmp_signed("==", v, best), earlier))
    return [b.select(take, v, best, name="best"), b.select(take, i, best_i, name="best_i")]


class _Emitter:
    """Builds one reduction kernel; methods emit the pieces of the loop nest."""

    def __init__(self, spec: ReduceKernel, b: ir.IRBuilder, args) -> None:
        self.spec = spec
        self.b = b
        self.s = LLVMScalar(b)
        sl = Slots(spec)
        r = spec.rank
        self.lo, self.hi = args.int(0, "lo"), args.int(1, "hi")
        self.sizes = [args.int(sl.sizes + d, f"n{d}") for d in range(r)]
        self.in_ptr = args.ptr(sl.in_ptr, "x")
        self.in_st = [args.int(sl.in_strides + d, f"xs{d}") for d in range(r)]
        if spec.inner is not None:
            self.in_st[-1] = I64(spec.inner)
        # With a prologue every input offset travels together: `in_off` values and
        # `in_st[d]` are tuples (one entry per input) and `madd` works on them elementwise.
        self.zero_in: ir.Value | tuple[ir.Value, ...] = I64(0)
        if spec.prologue is not None:
            self.in_ptrs = [self.in_ptr]
            strides = [self.in_st]
            # side outputs ride along as more entries of the offset tuples
            for j in range(1, 1 + spec.n_extra):
                slot = sl.extra_inputs + (j - 1) * (1 + r)
                self.in_ptrs.append(args.ptr(slot, f"x{j}"))
                strides.append([args.int(slot + 1 + d, f"xs{j}_{d}") for d in range(r)])
            self.in_st = [tuple(st[d] for st in strides) for d in range(r)]
            self.zero_in = tuple(I64(0) for _ in range(1 + spec.n_extra))
            self.side_dtypes = out_dtypes(spec.prologue)[1:]
        self.out_ptr = args.ptr(sl.out_ptr, "out")
        self.out_st = [args.int(sl.out_strides + d, f"os{d}") for d in range(r)]
        self.idx_st = (
            [args.int(sl.index_strides + d, f"is{d}") for d in range(r)]
            if sl.index_strides >= 0
            else None
        )
        self.out_index_ptr = (
            args.ptr(sl.out_index_ptr, "out_index") if sl.out_index_ptr >= 0 else None
        )
        self.in_index_ptr = args.ptr(sl.in_index_ptr, "x_index") if sl.in_index_ptr >= 0 else None
        self.chunk_step = args.int(sl.chunk_step, "chunk_step") if sl.chunk_step >= 0 else None
        self.chunk_stride = (
            args.int(sl.chunk_stride, "chunk_stride") if sl.chunk_stride >= 0 else None
        )
        self.chunk_id: ir.Value | None = None
        self.wide = wide_dtype(spec.op, spec.in_dtype)
        self.narrow = narrow_dtype(spec.op, spec.in_dtype)
        self.kept_outer = [
            d for d in range(r) if not spec.reduced[d] and not (spec.is_column and d == r - 1)
        ]
        self.red = [d for d in range(r) if spec.reduced[d]]
        if spec.is_column:
            t = llvm_type(self.wide)
            self.col_width = args.int(sl.col_width, "col_width")
            self.col_acc = (
                b.alloca(t, size=I64(COLUMN_CAP), name="acc")
                if not self.wide.is_complex
                else b.alloca(component_type(self.wide), size=I64(2 * COLUMN_CAP), name="acc")
            )
            self.col_idx = (
                b.alloca(I64, size=I64(COLUMN_CAP), name="acc_index") if spec.is_arg else None
            )

    # -- small helpers ---------------------------------------------------------------------
    def min(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.select(self.b.icmp_signed("<", a, c), a, c)

    def madd(self, base, i: ir.Value, stride):
        """base + i * stride; on tuples (prologue input offsets), entry by entry."""
        if isinstance(base, tuple):
            return tuple(self.b.add(o, self.b.mul(i, st)) for o, st in zip(base, stride))
        return self.b.add(base, self.b.mul(i, stride))

    def load_x(self, off) -> SV:
        """The value being reduced at `off`: a load, or the prologue on its inputs' loads."""
        prologue = self.spec.prologue
        if prologue is None:
            d = self.spec.in_dtype
            p = self.b.gep(self.in_ptr, [off], inbounds=True, source_etype=memory_type(d))
            return self.s.load(p, d, name="xv")
        loaded = [
            self.s.load(
                self.b.gep(ptr, [o], inbounds=True, source_etype=memory_type(d)), d, name=f"x{j}v"
            )
            for j, (ptr, o, d) in enumerate(zip(self.in_ptrs, off, prologue.in_dtypes))
        ]
        value, *side = evaluate(self.s, prologue, loaded)
        n_in = len(prologue.in_dtypes)
        for k, (v, d) in enumerate(zip(side, self.side_dtypes)):  # stored where computed
            if v.dtype is not d:
                v = self.s.cast(v, d)
            p = self.b.gep(
                self.in_ptrs[n_in + k],
                [off[n_in + k]],
                inbounds=True,
                source_etype=memory_type(v.dtype),
            )
            self.s.store(v, p)
        if value.dtype is not self.spec.in_dtype:
            value = self.s.cast(value, self.spec.in_dtype)
        return value

    def load_index(self, off: ir.Value) -> ir.Value:
        p = self.b.gep(self.in_index_ptr, [off], inbounds=True, source_etype=I64)
        return self.b.load(p, typ=I64, name="xi")

    def identity(self) -> list[ir.Value]:
        if self.wide.is_complex:  # complex sum/prod: (re, im) accumulators
            return list(self.s.const(1 if self.spec.op == "prod" else 0, self.wide).value)
        init = [_identity(self.spec.op, self.wide)]
        if self.spec.is_arg:
            init.append(I64((1 << 63) - 1))
        return init

    def loop_range(self, d: int) -> tuple[ir.Value, ir.Value]:
        """Loop `d`'s bounds; a partial kernel's chunked loop covers one chunk."""
        n = self.sizes[d]
        if d != self.spec.chunk:
            return I64(0), n
        start = self.min(self.b.mul(self.chunk_id, self.chunk_step), n)
        return start, self.min(self.b.add(start, self.chunk_step), n)

    # -- combining one element into an accumulator -----------------------------------------
    def combine(
        self, acc: list[ir.Value], x: SV, index: ir.Value | None, to: DType | None = None
    ) -> list[ir.Value]:
        """`acc op x` in dtype `to` (default: the wide dtype); arg ops also carry `index`."""
        to = to or self.wide
        b, op = self.b, self.spec.op
        if to.is_complex:
            return self.complex_combine(acc, x, to)
        v = self.s.cast(x, to).value
        a = acc[0]
        fp = to.is_floating_point
        if op == "sum":
            return [b.fadd(a, v, flags=FLAGS) if fp else b.add(a, v)]
        if op == "prod":
            return [b.fmul(a, v, flags=FLAGS) if fp else b.mul(a, v)]
        if op in ("amax", "amin"):
            return [self.extreme(op == "amax", a, v, to)]
        return self.arg_update(op == "argmax", a, acc[1], v, index, to)

    def complex_combine(self, acc: list[ir.Value], x: SV, to: DType) -> list[ir.Value]:
        """Complex sum (two reassociable adds, so rows vectorize) or product."""
        v = self.s.cast(x, to)
        if self.spec.op == "prod":
            return list(self.s.mul(SV((acc[0], acc[1]), to), v).value)
        return [self.b.fadd(a, p, flags=FLAGS) for a, p in zip(acc, v.value)]

    def extreme(self, is_max: bool, a: ir.Value, v: ir.Value, d: DType) -> ir.Value:
        return extreme(self.b, is_max, a, v, d)

    def arg_update(
        self, is_max: bool, best: ir.Value, best_i: ir.Value, v: ir.Value, i: ir.Value, d: DType
    ) -> list[ir.Value]:
        return arg_update(self.b, is_max, best, best_i, v, i, d)

    def element_index(self, off: ir.Value, index: ir.Value | None) -> ir.Value | None:
        if not self.spec.is_arg:
            return None
        return self.load_index(off) if self.spec.mode == "combine" else index

    # -- storing results -------------------------------------------------------------------
    def store(self, acc: list[ir.Value], out_off: ir.Value) -> None:
        spec, s, b = self.spec, self.s, self.b
        if spec.is_arg and spec.mode != "partial":
            p = b.gep(self.out_ptr, [out_off], inbounds=True, source_etype=I64)
            b.store(acc[1], p)
            return
        acc_value = (acc[0], acc[1]) if self.wide.is_complex else acc[0]
        value = s.cast(SV(acc_value, self.wide), spec.out_dtype)
        s.store(
            value,
            b.gep(self.out_ptr, [out_off], inbounds=True, source_etype=memory_type(spec.out_dtype)),
        )
        if spec.is_arg:
            b.store(acc[1], b.gep(self.out_index_ptr, [out_off], inbounds=True, source_etype=I64))

    # -- the loop nest ---------------------------------------------------------------------
    def emit(self) -> None:
        if self.spec.mode == "partial":
            with for_range(self.b, self.lo, self.hi, name="chunk") as c:
                self.chunk_id = c
                self.outer(0, self.zero_in, self.b.mul(c, self.chunk_stride), split=False)
        else:
            self.outer(0, self.zero_in, I64(0), split=True)

    def outer(self, level: int, in_off: ir.Value, out_off: ir.Value, split: bool) -> None:
        """Kept loops outside the reduction; the first takes `[lo, hi)` when splitting."""
        if level == len(self.kept_outer):
            if self.spec.is_column:
                self.column(in_off, out_off, split and level == 0)
            else:
                self.row(in_off, out_off)
            return
        d = self.kept_outer[level]
        lo, hi = (self.lo, self.hi) if split and level == 0 else (I64(0), self.sizes[d])
        with for_range(self.b, lo, hi, name=f"k{d}") as i:
            self.outer(
                level + 1,
                self.madd(in_off, i, self.in_st[d]),
                self.madd(out_off, i, self.out_st[d]),
                split,
            )

    # row kernels: accumulators in registers
    def row(self, in_off: ir.Value, out_off: ir.Value) -> None:
        if self.spec.is_arg and self.spec.mode != "combine":
            self.store(self.arg_row(in_off), out_off)
            return
        acc = self.row_loops(0, in_off, I64(0), self.identity(), self.combine_at)
        self.store(acc, out_off)

    def combine_at(self, acc: list[ir.Value], off: ir.Value, index: ir.Value) -> list[ir.Value]:
        return self.combine(acc, self.load_x(off), self.element_index(off, index))

    def arg_row(self, in_off: ir.Value) -> list[ir.Value]:
        """argmax as two vectorizable passes: the extreme value, then its smallest index.

        A single pass carrying (value, index) cannot be vectorized by LLVM; two passes
        read the row twice but run an order of magnitude faster.
        """
        b = self.b
        is_max = self.spec.op == "argmax"
        d = self.wide

        def extreme(acc: list[ir.Value], off: ir.Value, index: ir.Value) -> list[ir.Value]:
            v = self.s.cast(self.load_x(off), d).value
            return [self.extreme(is_max, acc[0], v, d)]

        best = self.row_loops(
            0, in_off, I64(0), [_identity("amax" if is_max else "amin", d)], extreme
        )[0]
        best_nan = b.fcmp_unordered("uno", best, best) if d.is_floating_point else None

        def first(acc: list[ir.Value], off: ir.Value, index: ir.Value) -> list[ir.Value]:
            v = self.s.cast(self.load_x(off), d).value
            if d.is_floating_point:
                match = b.or_(
                    b.fcmp_ordered("==", v, best), b.and_(b.fcmp_unordered("uno", v, v), best_nan)
                )
            else:
                match = b.icmp_signed("==", v, best)
            candidate = b.select(match, index, I64((1 << 63) - 1))
            return [self.min(candidate, acc[0])]

        index = self.row_loops(0, in_off, I64(0), [I64((1 << 63) - 1)], first)[0]
        return [best, index]

    def row_loops(
        self, level: int, in_off: ir.Value, index: ir.Value, acc: list[ir.Value], step
    ) -> list[ir.Value]:
        """The reduced loops around `step(acc, offset, flat_index) -> acc`."""
        d = self.red[level]
        last = level == len(self.red) - 1
        lo, hi = self.loop_range(d)
        if last and self.narrow is not None and step == self.combine_at:
            return self.blocked_sum(d, lo, hi, in_off, acc)
        with accumulate(self.b, lo, hi, acc, name=f"r{d}") as (i, cur, upd):
            off = self.madd(in_off, i, self.in_st[d])
            ix = self.madd(index, i, self.idx_st[d]) if self.idx_st is not None else index
            if last:
                upd.extend(step(cur, off, ix))
            else:
                upd.extend(self.row_loops(level + 1, off, ix, cur, step))
        return upd

    def blocked_sum(
        self, d: int, lo: ir.Value, hi: ir.Value, in_off: ir.Value, acc: list[ir.Value]
    ) -> list[ir.Value]:
        """Sum runs of SUM_BLOCK in float32 (vectorized), add each run's total in float64."""
        b = self.b
        blocks = b.sdiv(b.add(b.sub(hi, lo), I64(SUM_BLOCK - 1)), I64(SUM_BLOCK))
        with accumulate(b, I64(0), blocks, acc, name="blk") as (j, cur, upd):
            start = b.add(lo, b.mul(j, I64(SUM_BLOCK)))
            stop = self.min(b.add(start, I64(SUM_BLOCK)), hi)
            zero = [_identity("sum", self.narrow)]
            with accumulate(b, start, stop, zero, name=f"r{d}") as (i, ncur, nupd):
                x = self.load_x(self.madd(in_off, i, self.in_st[d]))
                nupd.extend(self.combine(ncur, x, None, to=self.narrow))
            total = self.s.cast(SV(nupd[0], self.narrow), self.wide).value
            upd.append(b.fadd(cur[0], total, flags=FLAGS))
        return upd

    # column kernels: a block of outputs accumulated in a stack array
    def column(self, in_off: ir.Value, out_off: ir.Value, split: bool) -> None:
        b = self.b
        d = self.spec.rank - 1
        m = self.sizes[d]
        cw = self.col_width
        blocks = b.sdiv(b.add(m, b.sub(cw, I64(1))), cw)
        lo, hi = (self.lo, self.hi) if split else (I64(0), blocks)
        with for_range(b, lo, hi, name="cblk") as j:
            k0 = b.mul(j, cw)
            width = self.min(cw, b.sub(m, k0))
            init = self.identity()
            with for_range(b, I64(0), width, name="init") as k:
                self.col_put(k, init)
            self.column_loops(0, self.madd(in_off, k0, self.in_st[d]), I64(0), width)
            base = self.madd(out_off, k0, self.out_st[d])
            with for_range(b, I64(0), width, name="fin") as k:
                self.store(self.col_get(k), self.madd(base, k, self.out_st[d]))

    def col_halves(self, k: ir.Value) -> list[ir.Value]:
        """Complex accumulators: (re, im) of output k live at 2k and 2k + 1."""
        t = component_type(self.wide)
        at = self.b.mul(k, I64(2))
        return [
            self.b.gep(self.col_acc, [self.b.add(at, I64(j))], inbounds=True, source_etype=t)
            for j in (0, 1)
        ]

    def col_get(self, k: ir.Value) -> list[ir.Value]:
        b = self.b
        t = llvm_type(self.wide)
        if self.wide.is_complex:
            return [b.load(p, typ=component_type(self.wide)) for p in self.col_halves(k)]
        vals = [b.load(b.gep(self.col_acc, [k], inbounds=True, source_etype=t), typ=t)]
        if self.col_idx is not None:
            vals.append(b.load(b.gep(self.col_idx, [k], inbounds=True, source_etype=I64), typ=I64))
        return vals

    def col_put(self, k: ir.Value, vals: list[ir.Value]) -> None:
        b = self.b
        t = llvm_type(self.wide)
        if self.wide.is_complex:
            for v, p in zip(vals, self.col_halves(k)):
                b.store(v, p)
            return
        b.store(vals[0], b.gep(self.col_acc, [k], inbounds=True, source_etype=t))
        if self.col_idx is not None:
            b.store(vals[1], b.gep(self.col_idx, [k], inbounds=True, source_etype=I64))

    def column_loops(self, level: int, in_off: ir.Value, index: ir.Value, width: ir.Value) -> None:
        """The reduced loops around the block; the innermost one takes ROWS rows per pass.

        Folding several rows into the stack accumulators per pass divides their load and
        store traffic and keeps several input streams in flight.
        """
        b = self.b
        d = self.red[level]
        lo, hi = self.loop_range(d)
        if level < len(self.red) - 1:
            with for_range(b, lo, hi, name=f"r{d}") as i:
                ix = self.madd(index, i, self.idx_st[d]) if self.idx_st is not None else index
                self.column_loops(level + 1, self.madd(in_off, i, self.in_st[d]), ix, width)
            return
        groups = b.sdiv(b.sub(hi, lo), I64(COLUMN_ROWS))
        with for_range(b, I64(0), groups, name=f"r{d}x{COLUMN_ROWS}") as g:
            first = b.add(lo, b.mul(g, I64(COLUMN_ROWS)))
            rows = [b.add(first, I64(u)) for u in range(COLUMN_ROWS)]
            self.column_rows(rows, d, in_off, index, width)
        with for_range(b, b.add(lo, b.mul(groups, I64(COLUMN_ROWS))), hi, name=f"r{d}") as i:
            self.column_rows([i], d, in_off, index, width)

    def column_rows(
        self, rows: list[ir.Value], d: int, in_off: ir.Value, index: ir.Value, width: ir.Value
    ) -> None:
        """acc[k] = acc[k] op x[row][k] for each row in turn (vectorized over k)."""
        inner = self.spec.rank - 1
        offs = [self.madd(in_off, i, self.in_st[d]) for i in rows]
        idxs = [
            self.madd(index, i, self.idx_st[d]) if self.idx_st is not None else index for i in rows
        ]
        with for_range(self.b, I64(0), width, name="col") as k:
            acc = self.col_get(k)
            for off, ix in zip(offs, idxs):
                at = self.madd(off, k, self.in_st[inner])
                acc = self.combine(acc, self.load_x(at), self.element_index(at, ix))
            self.col_put(k, acc)


def build(spec: ReduceKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    _, b, args = new_kernel(module, name)
    _Emitter(spec, b, args).emit()
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# Extremes with their positions along one dimension: max/min with dim, cummax/cummin
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtremeKernel:
    """The maximum (`largest`) or minimum of `x` along its middle dimension and the
    position it was taken from: for each position (`running`, cummax/cummin) or once
    for the whole dimension (max/min with `dim`).

    Args: [outer, n, inner, x_ptr, xstride_outer, xstride_n, xstride_inner, values_ptr,
    indices_ptr]; `values` (x's dtype, the chosen element's bits copied) and `indices`
    (int64) are contiguous, (outer, n, inner) when `running`, else (outer, inner); n >= 1.
    Running, position k takes x[k] when it is at least (at most) the running extreme or
    is NaN: ties go to the latest position and a NaN holds from where it appears.
    Otherwise x[k] replaces the extreme when it is strictly greater (smaller), or is NaN
    while the extreme is not: ties and NaNs go to the first position (PyTorch's rules
    for both).
    """

    dtype: DType
    largest: bool
    running: bool

    def __post_init__(self) -> None:
        if self.dtype.is_complex:
            raise TypeError(f"max/min/cummax/cummin: not generated for {self.dtype.name}")

    @property
    def n_slots(self) -> int:
        return 9


def build_extreme(spec: ExtremeKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    outer, n, inner = (args.int(k, nm) for k, nm in enumerate(("outer", "n", "inner")))
    x = args.ptr(3, "x")
    so, sn, si = (args.int(4 + k, nm) for k, nm in enumerate(("so", "sn", "si")))
    values = args.ptr(7, "values")
    indices = args.ptr(8, "indices")
    d = spec.dtype
    mt = memory_type(d)
    s = LLVMScalar(b)
    floating = d.is_floating_point
    with for_range(b, I64(0), outer, name="o") as o:
        xo = b.mul(o, so)
        oo = b.mul(o, b.mul(n, inner) if spec.running else inner)
        with for_range(b, I64(0), inner, name="i") as i:  # position 0: itself
            xp = b.gep(x, [b.add(xo, b.mul(i, si))], inbounds=True, source_etype=mt)
            out = b.add(oo, i)
            b.store(b.load(xp, typ=mt), b.gep(values, [out], inbounds=True, source_etype=mt))
            b.store(I64(0), b.gep(indices, [out], inbounds=True, source_etype=I64))
        with for_range(b, I64(1), n, name="k") as k:
            xk = b.add(xo, b.mul(k, sn))
            ok = b.add(oo, b.mul(k, inner)) if spec.running else oo
            with for_range(b, I64(0), inner, name="j") as j:
                xp = b.gep(x, [b.add(xk, b.mul(j, si))], inbounds=True, source_etype=mt)
                out = b.add(ok, j)
                prev = b.sub(out, inner) if spec.running else out
                pv = b.gep(values, [prev], inbounds=True, source_etype=mt)
                v = s.load(xp, d)
                best = s.load(pv, d)
                if spec.running:
                    take = s.cmp("ge" if spec.largest else "le", v, best).value
                    if floating:
                        take = b.or_(take, s.isnan(v).value)
                else:
                    take = s.cmp("gt" if spec.largest else "lt", v, best).value
                    if floating:
                        first_nan = b.and_(s.isnan(v).value, b.xor(s.isnan(best).value, I1(1)))
                        take = b.or_(take, first_nan)
                raw = b.select(take, b.load(xp, typ=mt), b.load(pv, typ=mt))
                b.store(raw, b.gep(values, [out], inbounds=True, source_etype=mt))
                at = b.select(
                    take,
                    k,
                    b.load(b.gep(indices, [prev], inbounds=True, source_etype=I64), typ=I64),
                )
                b.store(at, b.gep(indices, [out], inbounds=True, source_etype=I64))
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# mode along one dimension of short rows
# --------------------------------------------------------------------------------------

MODE_MAX_ROW = 32  # rows up to this length: pairwise counting beats sorting


@dataclass(frozen=True, slots=True)
class ModeKernel:
    """The most frequent value of each row of `x` along its middle dimension and the
    last position holding it, by counting every element's equals (n^2 compares per row,
    for rows of at most `MODE_MAX_ROW`).

    Args as `ExtremeKernel`'s; `values` and `indices` are contiguous (outer, inner).
    Rules (those of the sort-based host code, PyTorch's): NaN equals nothing (a NaN's
    count is 1); a longer count wins, equal counts go to the smaller value (NaN above
    every number, an earlier NaN before a later one); -0.0 and 0.0 are one value. The
    index is the value's last position and the value's bits are read there.
    """

    dtype: DType

    def __post_init__(self) -> None:
        if self.dtype.is_complex:
            raise TypeError(f"mode: not generated for {self.dtype.name}")

    @property
    def n_slots(self) -> int:
        return 9


def build_mode(spec: ModeKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    outer, n, inner = (args.int(k, nm) for k, nm in enumerate(("outer", "n", "inner")))
    x = args.ptr(3, "x")
    so, sn, si = (args.int(4 + k, nm) for k, nm in enumerate(("so", "sn", "si")))
    values = args.ptr(7, "values")
    indices = args.ptr(8, "indices")
    d = spec.dtype
    mt = memory_type(d)
    s = LLVMScalar(b)
    floating = d.is_floating_point
    best_count = b.alloca(I64, name="best_count")
    best_at = b.alloca(I64, name="best_at")
    count = b.alloca(I64, name="count")
    last = b.alloca(I64, name="last")

    def element(base: ir.Value, k: ir.Value) -> Any:
        return s.load(b.gep(x, [b.add(base, b.mul(k, sn))], inbounds=True, source_etype=mt), d)

    with for_range(b, I64(0), outer, name="o") as o:
        with for_range(b, I64(0), inner, name="i") as i:
            row = b.add(b.mul(o, so), b.mul(i, si))
            b.store(I64(0), best_count)
            b.store(I64(0), best_at)
            with for_range(b, I64(0), n, name="k") as k:
                a = element(row, k)
                b.store(I64(0), count)
                b.store(k, last)
                with for_range(b, I64(0), n, name="j") as j:
                    same = s.cmp("eq", element(row, j), a).value
                    with b.if_then(same):
                        b.store(b.add(b.load(count, typ=I64), I64(1)), count)
                        b.store(j, last)
                c = b.load(count, typ=I64)
                if floating:  # a NaN equals nothing, itself included
                    c = b.select(s.isnan(a).value, I64(1), c)
                bc = b.load(best_count, typ=I64)
                bv = element(row, b.load(best_at, typ=I64))
                smaller = s.cmp("lt", a, bv).value
                if floating:
                    smaller = b.or_(
                        smaller, b.and_(b.xor(s.isnan(a).value, I1(1)), s.isnan(bv).value)
                    )
                take = b.or_(b.icmp_signed(">", c, bc), b.and_(b.icmp_signed("==", c, bc), smaller))
                with b.if_then(take):
                    b.store(c, best_count)
                    b.store(b.load(last, typ=I64), best_at)
            at = b.load(best_at, typ=I64)
            src = b.gep(x, [b.add(row, b.mul(at, sn))], inbounds=True, source_etype=mt)
            out = b.add(b.mul(o, inner), i)
            b.store(b.load(src, typ=mt), b.gep(values, [out], inbounds=True, source_etype=mt))
            b.store(at, b.gep(indices, [out], inbounds=True, source_etype=I64))
    b.ret_void()
    return module
