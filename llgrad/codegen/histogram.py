"""Histogram kernels: `histc`, `histogram`/`histogramdd` and `bincount` in one native call
each (bincount: two, the first finding the value range that sizes the output).

The rules are PyTorch's CPU kernels' (aten/src/ATen/native/cpu/HistogramKernel.cpp):

- equal-width edges are torch's `linspace`: with step = (hi - lo) / (n - 1) computed in
  the input dtype, edge i is fma(step, i, lo) for i < n / 2 and fma(-step, n - 1 - i, hi)
  for the others (torch's compiled kernel contracts `lo + step * i` into one fused
  multiply-add), so the edges are torch's bit for bit;
- a value v outside [e[0], e[n-1]] (NaN included) is skipped; otherwise its bin is
  upper_bound(e, v) - 1, with v == e[n-1] put in the last bin. Equal-width edges find it
  as torch does: an estimate (v - e[0]) * (n - 1) / (e[n-1] - e[0]), then the upper bound
  within one bin either side; given edges search the whole sequence (torch's halving
  search, which also defines the bins of edges that are not sorted).

histc and histogram count in int64 and sum weights in float64 in a scratch buffer the
caller owns, then write the result in the input dtype; bincount counts (or sums weights in
float64) straight into its output, through the scratch for float32 weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from .loops import I64, PTR, for_range, new_kernel
from .scalar import SV, LLVMScalar, intrinsic, memory_type

F32, F64 = ir.FloatType(), ir.DoubleType()

# `HistogramKernel`'s argument block: fixed slots, then `DIM_SLOTS` per dimension.
H_N_OUTER, H_N_INNER = 0, 1
H_X, H_XS_OUTER, H_XS_INNER, H_XS_COL = 2, 3, 4, 5
H_W, H_WS_OUTER, H_WS_INNER = 6, 7, 8
H_ACC, H_TOTAL, H_OUT, H_STATUS, H_D = 9, 10, 11, 12, 13
H_DIMS = 14
DIM_SLOTS = 5  # per dimension: mode, n_edges, edges_out, src or lo bits, stride or hi bits

EDGES_GIVEN, EDGES_RANGE, EDGES_DATA = 0, 1, 2  # the per-dimension modes


def _compute_type(d: DType) -> ir.Type:
    """The float type the kernels compute `d` in (float32 for float32 and bfloat16)."""
    return F64 if d is dt.float64 else F32


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """x * y + z rounded once (`llvm.fma`)."""
    t = x.type
    fn = intrinsic(b.module, f"llvm.fma.{'f64' if t == F64 else 'f32'}", t, [t, t, t])
    return b.call(fn, [x, y, z])


def _nan_extreme(b: ir.IRBuilder, is_max: bool, a: ir.Value, v: ir.Value) -> ir.Value:
    """max/min of `a` and `v`, NaN winning (NumPy's `min`/`max` of an array)."""
    t = a.type
    name = "llvm.maximum" if is_max else "llvm.minimum"
    fn = intrinsic(b.module, f"{name}.{'f64' if t == F64 else 'f32'}", t, [t, t])
    return b.call(fn, [a, v])


def _finite(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """v is neither infinite nor NaN: |v| < inf (an ordered compare)."""
    t = v.type
    fn = intrinsic(b.module, f"llvm.fabs.{'f64' if t == F64 else 'f32'}", t, [t])
    return b.fcmp_ordered("<", b.call(fn, [v]), ir.Constant(t, float("inf")))


def _to_compute(b: ir.IRBuilder, bits: ir.Value, t: ir.Type) -> ir.Value:
    """A float64 passed as its int64 bits, in compute type `t` (rounded to float32)."""
    v = b.bitcast(bits, F64)
    return v if t == F64 else b.fptrunc(v, t)


def _saturating_int(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """int64(v) truncating toward zero, saturating (NaN -> 0; never poison)."""
    t = v.type
    fn = intrinsic(b.module, f"llvm.fptosi.sat.i64.{'f64' if t == F64 else 'f32'}", I64, [t])
    return b.call(fn, [v])


def _smax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The larger of two int64 values."""
    return b.select(b.icmp_signed(">", x, y), x, y)


def _smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The smaller of two int64 values."""
    return b.select(b.icmp_signed("<", x, y), x, y)


def _upper_bound(
    b: ir.IRBuilder, e: ir.Value, mt: ir.Type, first: ir.Value, count: ir.Value, v: ir.Value
) -> ir.Value:
    """The first position p in [first, first + count) with v < e[p] (first + count when
    none), by the halving search of `std::upper_bound` (as torch runs it: on edges that
    are not sorted it still returns that search's answer)."""
    fn = b.function
    pre = b.block
    header = fn.append_basic_block("ub.header")
    body = fn.append_basic_block("ub.body")
    done = fn.append_basic_block("ub.exit")
    b.branch(header)
    b.position_at_end(header)
    lo = b.phi(I64, name="ub.first")
    n = b.phi(I64, name="ub.count")
    lo.add_incoming(first, pre)
    n.add_incoming(count, pre)
    b.cbranch(b.icmp_signed(">", n, I64(0)), body, done)
    b.position_at_end(body)
    half = b.lshr(n, I64(1))
    mid = b.add(lo, half)
    edge = b.load(b.gep(e, [mid], inbounds=True, source_etype=mt), typ=mt)
    right = b.fcmp_unordered(">=", v, edge)  # !(v < edge)
    lo.add_incoming(b.select(right, b.add(mid, I64(1)), lo), body)
    n.add_incoming(b.select(right, b.sub(b.sub(n, half), I64(1)), half), body)
    b.branch(header)
    b.position_at_end(done)
    return lo


def _linspace(b: ir.IRBuilder, e: ir.Value, n: ir.Value, lo: ir.Value, hi: ir.Value) -> None:
    """torch's `linspace(lo, hi, n)` (n >= 2) into `e`, in lo's float type."""
    t = lo.type
    step = b.fdiv(b.fsub(hi, lo), b.sitofp(b.sub(n, I64(1)), t))
    neg = b.fneg(step)
    half = b.sdiv(n, I64(2))
    last = b.sub(n, I64(1))
    with for_range(b, I64(0), n, name="lin") as i:
        front = _fma(b, step, b.sitofp(i, t), lo)
        back = _fma(b, neg, b.sitofp(b.sub(last, i), t), hi)
        v = b.select(b.icmp_signed("<", i, half), front, back)
        b.store(v, b.gep(e, [i], inbounds=True, source_etype=t))


def _column_extremes(
    b: ir.IRBuilder,
    load: Any,
    n_outer: ir.Value,
    n_inner: ir.Value,
    t: ir.Type,
    lo_slot: ir.Value,
    hi_slot: ir.Value,
) -> tuple[ir.Value, ir.Value]:
    """(min, max) of `load(o, i)` over the rows, NaN winning; (inf, -inf) for no rows.
    `lo_slot` and `hi_slot` are stack slots of type `t` (made in the entry block)."""
    b.store(ir.Constant(t, float("inf")), lo_slot)
    b.store(ir.Constant(t, float("-inf")), hi_slot)
    with for_range(b, I64(0), n_outer, name="mo") as o:
        with for_range(b, I64(0), n_inner, name="mi") as i:
            v = load(o, i)
            b.store(_nan_extreme(b, False, b.load(lo_slot, typ=t), v), lo_slot)
            b.store(_nan_extreme(b, True, b.load(hi_slot, typ=t), v), hi_slot)
    return b.load(lo_slot, typ=t), b.load(hi_slot, typ=t)


# --------------------------------------------------------------------------------------
# histc: equal-width bins in one pass
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistcKernel:
    """`histc`'s counts: each element v of `x` with lo <= v <= hi goes to bin
    int((v - lo) * bins / (hi - lo)) (the last bin includes hi), computed in `dtype`'s
    arithmetic (float32 for bfloat16; no float16: NumPy rounds each step to float16),
    counted in int64 `counts` and written to `out` in `dtype`.

    Args: [n_outer, n_inner, x_ptr, xstride_outer, xstride_inner, lo, hi (the float64
    bits of each), bins, counts_ptr, out_ptr, auto, status]. With `auto` nonzero, lo and
    hi are the data's min and max (NaN winning), widened by 1 each way when equal; when
    they are not finite the kernel writes 1 to the `status` slot and counts nothing.
    """

    dtype: DType

    def __post_init__(self) -> None:
        """Reject dtypes this kernel is not generated for."""
        if self.dtype not in (dt.float32, dt.float64, dt.bfloat16):
            raise TypeError(f"histc: not generated for {self.dtype.name}")

    @property
    def n_slots(self) -> int:
        """The argument slots a call fills (before any per-dimension records)."""
        return 12


HISTC_STATUS = 11


def build_histc(spec: HistcKernel, name: str) -> ir.Module:
    """The LLVM module of a `HistcKernel`."""
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    n_outer, n_inner = args.int(0, "n_outer"), args.int(1, "n_inner")
    x, so, si = args.ptr(2, "x"), args.int(3, "so"), args.int(4, "si")
    d = spec.dtype
    mt = memory_type(d)
    ft = _compute_type(d)
    s = LLVMScalar(b)

    def load(o: ir.Value, i: ir.Value) -> ir.Value:
        """Element (o, i) of x, in the compute type."""
        at = b.add(b.mul(o, so), b.mul(i, si))
        return s.load(b.gep(x, [at], inbounds=True, source_etype=mt), d).value

    given_lo, given_hi = _to_compute(b, args.int(5), ft), _to_compute(b, args.int(6), ft)
    bins = args.int(7, "bins")
    counts, out = args.ptr(8, "counts"), args.ptr(9, "out")
    auto = b.icmp_signed("!=", args.int(10, "auto"), I64(0))
    lo_slot, hi_slot = b.alloca(ft, name="lo"), b.alloca(ft, name="hi")
    cmin, cmax = b.alloca(ft, name="cmin"), b.alloca(ft, name="cmax")
    b.store(given_lo, lo_slot)
    b.store(given_hi, hi_slot)
    with b.if_then(auto):
        lo, hi = _column_extremes(b, load, n_outer, n_inner, ft, cmin, cmax)
        same = b.fcmp_ordered("==", lo, hi)
        one = ir.Constant(ft, 1.0)
        b.store(b.select(same, b.fsub(lo, one), lo), lo_slot)
        b.store(b.select(same, b.fadd(hi, one), hi), hi_slot)
    lo, hi = b.load(lo_slot, typ=ft), b.load(hi_slot, typ=ft)
    bad = b.not_(b.and_(_finite(b, lo), _finite(b, hi)))
    with b.if_then(bad):
        b.store(I64(1), b.gep(args.pointer, [I64(HISTC_STATUS)], source_etype=I64))
        b.ret_void()
    with for_range(b, I64(0), bins, name="z") as k:
        b.store(I64(0), b.gep(counts, [k], inbounds=True, source_etype=I64))
    width = b.fsub(hi, lo)
    nbins = b.sitofp(bins, ft)
    last = b.sub(bins, I64(1))
    with for_range(b, I64(0), n_outer, name="o") as o:
        with for_range(b, I64(0), n_inner, name="i") as i:
            v = load(o, i)
            inside = b.and_(b.fcmp_ordered(">=", v, lo), b.fcmp_ordered("<=", v, hi))
            with b.if_then(inside):
                at = b.fptosi(b.fdiv(b.fmul(b.fsub(v, lo), nbins), width), I64)
                at = b.select(b.icmp_signed(">=", at, bins), last, at)
                p = b.gep(counts, [at], inbounds=True, source_etype=I64)
                b.store(b.add(b.load(p, typ=I64), I64(1)), p)
    with for_range(b, I64(0), bins, name="w") as k:
        c = b.load(b.gep(counts, [k], inbounds=True, source_etype=I64), typ=I64)
        s.store(SV(b.sitofp(c, ft), d), b.gep(out, [k], inbounds=True, source_etype=mt))
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# histogramdd (histogram is its D = 1 case)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistogramKernel:
    """The D-dimensional histogram of the rows of `x`, each row D values of `dtype`
    (float32 or float64), optionally weighted (one weight of `dtype` per row).

    Args (slot numbers are the H_* constants): the rows as two loops (n_outer, n_inner)
    with x's strides (xs_outer, xs_inner) and the stride between a row's values
    (xs_col); the weight pointer and strides (unweighted: unused); `acc`, a scratch of
    `total` int64 counts (float64 sums when weighted); `out`, the histogram of `total`
    values of `dtype` (0: leave the result in `acc`); `status` (written on failure);
    D; then per dimension k at H_DIMS + DIM_SLOTS * k: mode, n_edges, edges_out (n_edges
    values of `dtype`, written), and
      EDGES_GIVEN: a source of edges (dtype) and its stride, copied to edges_out;
      EDGES_RANGE: lo and hi (float64 bits; rounded to dtype), `linspace`d;
      EDGES_DATA: unused; lo and hi are the min and max of x's column k (NaN winning),
        widened by 0.5 each way when equal, then `linspace`d. When they are not finite
        the kernel writes k to `status` and stops (nothing is counted).
    Every edge sequence is written before any row is counted; `total` 0 counts nothing.
    """

    dtype: DType
    weighted: bool

    def __post_init__(self) -> None:
        """Reject dtypes this kernel is not generated for."""
        if self.dtype not in (dt.float32, dt.float64):
            raise TypeError(f"histogram: not generated for {self.dtype.name}")

    @property
    def n_slots(self) -> int:
        """The argument slots a call fills (before any per-dimension records)."""
        return H_DIMS  # (and DIM_SLOTS more per dimension)


def build_histogram(spec: HistogramKernel, name: str) -> ir.Module:
    """The LLVM module of a `HistogramKernel`."""
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    d = spec.dtype
    t = _compute_type(d)
    n_outer, n_inner = args.int(H_N_OUTER, "n_outer"), args.int(H_N_INNER, "n_inner")
    x = args.ptr(H_X, "x")
    xso, xsi, xsc = (args.int(k) for k in (H_XS_OUTER, H_XS_INNER, H_XS_COL))
    acc, total, out = args.ptr(H_ACC, "acc"), args.int(H_TOTAL, "total"), args.ptr(H_OUT)
    out_addr = args.int(H_OUT, "out_addr")
    ndim = args.int(H_D, "D")
    block = args.pointer
    lo_slot, hi_slot = b.alloca(t, name="lo"), b.alloca(t, name="hi")
    cmin, cmax = b.alloca(t, name="cmin"), b.alloca(t, name="cmax")

    def slot(k: ir.Value, field: int) -> ir.Value:
        """The address of `field` of dimension k's record in the argument block."""
        at = b.add(b.mul(k, I64(DIM_SLOTS)), I64(H_DIMS + field))
        return b.gep(block, [at], inbounds=True, source_etype=I64)

    def value(row: ir.Value, k: ir.Value) -> ir.Value:
        """Value k of the row starting at element offset `row`."""
        at = b.add(row, b.mul(k, xsc))
        return b.load(b.gep(x, [at], inbounds=True, source_etype=t), typ=t)

    # -- the edges of every dimension --------------------------------------------------
    with for_range(b, I64(0), ndim, name="k") as k:
        mode = b.load(slot(k, 0), typ=I64)
        n = b.load(slot(k, 1), typ=I64)
        e = b.load(slot(k, 2), typ=PTR)
        with b.if_else(b.icmp_signed("==", mode, I64(EDGES_GIVEN))) as (given, spaced):
            with given:
                src = b.load(slot(k, 3), typ=PTR)
                stride = b.load(slot(k, 4), typ=I64)
                with for_range(b, I64(0), n, name="cp") as i:
                    v = b.load(b.gep(src, [b.mul(i, stride)], inbounds=True, source_etype=t), typ=t)
                    b.store(v, b.gep(e, [i], inbounds=True, source_etype=t))
            with spaced:
                b.store(_to_compute(b, b.load(slot(k, 3), typ=I64), t), lo_slot)
                b.store(_to_compute(b, b.load(slot(k, 4), typ=I64), t), hi_slot)
                with b.if_then(b.icmp_signed("==", mode, I64(EDGES_DATA))):
                    lo, hi = _column_extremes(
                        b,
                        lambda o, i: value(b.add(b.mul(o, xso), b.mul(i, xsi)), k),
                        n_outer,
                        n_inner,
                        t,
                        cmin,
                        cmax,
                    )
                    bad = b.not_(b.and_(_finite(b, lo), _finite(b, hi)))
                    with b.if_then(bad):
                        b.store(k, b.gep(block, [I64(H_STATUS)], source_etype=I64))
                        b.ret_void()
                    same = b.fcmp_ordered("==", lo, hi)
                    if t == F64:
                        wlo, whi = b.fsub(lo, F64(0.5)), b.fadd(hi, F64(0.5))
                    else:  # (torch widens in double, then rounds: the same float here)
                        wlo = b.fptrunc(b.fsub(b.fpext(lo, F64), F64(0.5)), t)
                        whi = b.fptrunc(b.fadd(b.fpext(hi, F64), F64(0.5)), t)
                    b.store(b.select(same, wlo, lo), lo_slot)
                    b.store(b.select(same, whi, hi), hi_slot)
                _linspace(b, e, n, b.load(lo_slot, typ=t), b.load(hi_slot, typ=t))

    # -- the counts ----------------------------------------------------------------------
    at_t = F64 if spec.weighted else I64
    with for_range(b, I64(0), total, name="z") as j:
        b.store(at_t(0), b.gep(acc, [j], inbounds=True, source_etype=at_t))
    counting = b.icmp_signed(">", total, I64(0))
    with b.if_then(counting):
        w = args.ptr(H_W, "w")
        wso, wsi = args.int(H_WS_OUTER), args.int(H_WS_INNER)
        with for_range(b, I64(0), n_outer, name="o") as o:
            with for_range(b, I64(0), n_inner, name="i") as i:
                row = b.add(b.mul(o, xso), b.mul(i, xsi))
                _count_row(b, row, ndim, slot, value, t, acc, at_t, w, o, i, wso, wsi, spec)
    # -- the result in dtype ---------------------------------------------------------------
    with b.if_then(b.icmp_signed("!=", out_addr, I64(0))):
        with for_range(b, I64(0), total, name="wr") as j:
            a = b.load(b.gep(acc, [j], inbounds=True, source_etype=at_t), typ=at_t)
            if spec.weighted:
                v = a if t == F64 else b.fptrunc(a, t)
            else:
                v = b.sitofp(a, t)
            b.store(v, b.gep(out, [j], inbounds=True, source_etype=t))
    b.ret_void()
    return module


def _count_row(
    b: ir.IRBuilder,
    row: ir.Value,
    ndim: ir.Value,
    slot: Any,
    value: Any,
    t: ir.Type,
    acc: ir.Value,
    at_t: ir.Type,
    w: ir.Value,
    o: ir.Value,
    i: ir.Value,
    wso: ir.Value,
    wsi: ir.Value,
    spec: HistogramKernel,
) -> None:
    """One row: its flat bin over the D dimensions (row-major over the bins), counted
    unless some value lies outside its dimension's edges."""
    fn = b.function
    pre = b.block
    header = fn.append_basic_block("dim.header")
    body = fn.append_basic_block("dim.body")
    search = fn.append_basic_block("dim.search")
    hit = fn.append_basic_block("dim.hit")
    skip = fn.append_basic_block("dim.skip")
    b.branch(header)
    b.position_at_end(header)
    k = b.phi(I64, name="dim")
    flat = b.phi(I64, name="flat")
    k.add_incoming(I64(0), pre)
    flat.add_incoming(I64(0), pre)
    b.cbranch(b.icmp_signed("<", k, ndim), body, hit)

    b.position_at_end(body)
    mode = b.load(slot(k, 0), typ=I64)
    n = b.load(slot(k, 1), typ=I64)
    e = b.load(slot(k, 2), typ=PTR)
    last = b.sub(n, I64(1))
    first_edge = b.load(e, typ=t)
    last_edge = b.load(b.gep(e, [last], inbounds=True, source_etype=t), typ=t)
    v = value(row, k)
    inside = b.and_(b.fcmp_ordered(">=", v, first_edge), b.fcmp_ordered("<=", v, last_edge))
    b.cbranch(inside, search, skip)

    b.position_at_end(search)
    # equal-width edges: the estimated bin, then one bin either side (torch's local search)
    est = b.fdiv(b.fmul(b.fsub(v, first_edge), b.sitofp(last, t)), b.fsub(last_edge, first_edge))
    p = _smin(b, _smax(b, _saturating_int(b, est), I64(0)), last)
    near_lo = _smax(b, b.sub(p, I64(1)), I64(0))
    near_hi = _smin(b, b.add(p, I64(2)), n)
    given = b.icmp_signed("==", mode, I64(EDGES_GIVEN))
    start = b.select(given, I64(0), near_lo)
    count = b.select(given, n, b.sub(near_hi, near_lo))
    pos = b.sub(_upper_bound(b, e, t, start, count, v), I64(1))
    pos = b.select(b.icmp_signed("==", pos, last), b.sub(last, I64(1)), pos)
    k.add_incoming(b.add(k, I64(1)), b.block)
    flat.add_incoming(b.add(b.mul(flat, last), pos), b.block)
    b.branch(header)

    b.position_at_end(hit)
    p = b.gep(acc, [flat], inbounds=True, source_etype=at_t)
    if spec.weighted:
        wv = b.load(
            b.gep(w, [b.add(b.mul(o, wso), b.mul(i, wsi))], inbounds=True, source_etype=t), typ=t
        )
        if t != F64:
            wv = b.fpext(wv, F64)
        b.store(b.fadd(b.load(p, typ=F64), wv), p)
    else:
        b.store(b.add(b.load(p, typ=I64), I64(1)), p)
    b.branch(skip)
    b.position_at_end(skip)


# --------------------------------------------------------------------------------------
# bincount
# --------------------------------------------------------------------------------------

BINCOUNT_INTS = (dt.uint8, dt.int8, dt.int16, dt.int32, dt.int64)
B_SIZE, B_MIN, B_MAX, B_MINLENGTH = 7, 9, 10, 11  # slots: size, the range found, minlength


@dataclass(frozen=True, slots=True)
class BincountKernel:
    """`bincount` of a 1-D tensor of integer `dtype`, optionally weighted by a 1-D tensor
    of real `weight` dtype (None: counts).

    Args: [phase, n, x_ptr, xstride, w_ptr, wstride, out_ptr, size, acc_ptr, min, max,
    minlength]. Counting (every value in [0, size)) zeroes `size` results and adds int64
    counts, or weights summed in float64 (as NumPy's `bincount`); a float32 `weight`
    sums in float64 and rounds the sums to float32 at the end.

    - Phase 0 writes the smallest and largest value (as int64; n >= 1) to the `min` and
      `max` slots.
    - Phase 1 counts into `out` (float32 results: summed in `acc`, size float64 values).
    - Phase 2 does phase 0, then, when the values are >= 0 and max(minlength, max + 1)
      results fit in `size`, counts that many into `out` (a scratch of `size` 8-byte
      values; float32 sums are rounded in place, packed at its start); otherwise it
      stops after phase 0.
    """

    dtype: DType
    weight: DType | None

    def __post_init__(self) -> None:
        """Reject dtypes this kernel is not generated for."""
        if self.dtype not in BINCOUNT_INTS:
            raise TypeError(f"bincount: not generated for {self.dtype.name}")
        if self.weight is not None and self.weight.is_complex:
            raise TypeError(f"bincount: weights of {self.weight.name} not generated")

    @property
    def n_slots(self) -> int:
        """The argument slots a call fills."""
        return 12


def build_bincount(spec: BincountKernel, name: str) -> ir.Module:
    """The LLVM module of a `BincountKernel`."""
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    d = spec.dtype
    s = LLVMScalar(b)
    phase, n = args.int(0, "phase"), args.int(1, "n")
    x, xs = args.ptr(2, "x"), args.int(3, "xs")
    out = args.ptr(6, "out")
    block = args.pointer
    mt = memory_type(d)

    def element(i: ir.Value) -> ir.Value:
        """Element i of x as int64."""
        v = s.load(b.gep(x, [b.mul(i, xs)], inbounds=True, source_etype=mt), d)
        return s.cast(v, dt.int64).value

    lo_slot, hi_slot = b.alloca(I64, name="lo"), b.alloca(I64, name="hi")
    size_slot = b.alloca(I64, name="size")
    b.store(args.int(B_SIZE, "size"), size_slot)
    with b.if_then(b.icmp_signed("!=", phase, I64(1))):
        first = element(I64(0))
        b.store(first, lo_slot)
        b.store(first, hi_slot)
        with for_range(b, I64(1), n, name="m") as i:
            v = element(i)
            b.store(_smin(b, b.load(lo_slot, typ=I64), v), lo_slot)
            b.store(_smax(b, b.load(hi_slot, typ=I64), v), hi_slot)
        lo, hi = b.load(lo_slot, typ=I64), b.load(hi_slot, typ=I64)
        b.store(lo, b.gep(block, [I64(B_MIN)], source_etype=I64))
        b.store(hi, b.gep(block, [I64(B_MAX)], source_etype=I64))
        with b.if_then(b.icmp_signed("==", phase, I64(0))):
            b.ret_void()
        need = _smax(b, args.int(B_MINLENGTH, "minlength"), b.add(hi, I64(1)))
        fits = b.and_(
            b.icmp_signed(">=", lo, I64(0)), b.icmp_signed("<=", need, b.load(size_slot, typ=I64))
        )
        with b.if_then(b.not_(fits)):
            b.ret_void()
        b.store(need, size_slot)
    size = b.load(size_slot, typ=I64)
    wd = spec.weight
    at = I64 if wd is None else F64
    target = out
    if wd is dt.float32:  # (phase 1: sums in `acc`; phase 2: in the scratch `out`)
        target = b.select(b.icmp_signed("==", phase, I64(1)), args.ptr(8, "acc"), out)
    with for_range(b, I64(0), size, name="z") as j:
        b.store(at(0), b.gep(target, [j], inbounds=True, source_etype=at))
    if wd is not None:
        w, ws = args.ptr(4, "w"), args.int(5, "ws")
        wmt = memory_type(wd)
    with for_range(b, I64(0), n, name="c") as i:
        p = b.gep(target, [element(i)], inbounds=True, source_etype=at)
        if wd is None:
            b.store(b.add(b.load(p, typ=I64), I64(1)), p)
        else:
            wv = s.load(b.gep(w, [b.mul(i, ws)], inbounds=True, source_etype=wmt), wd)
            b.store(b.fadd(b.load(p, typ=F64), s.cast(wv, dt.float64).value), p)
    if wd is dt.float32:  # (ascending: in place, each float32 lands on a read sum)
        with for_range(b, I64(0), size, name="r") as j:
            a = b.load(b.gep(target, [j], inbounds=True, source_etype=F64), typ=F64)
            b.store(b.fptrunc(a, F32), b.gep(out, [j], inbounds=True, source_etype=F32))
    b.ret_void()
    return module


__all__ = [
    "BINCOUNT_INTS",
    "B_MAX",
    "B_MIN",
    "B_MINLENGTH",
    "B_SIZE",
    "DIM_SLOTS",
    "EDGES_DATA",
    "EDGES_GIVEN",
    "EDGES_RANGE",
    "HISTC_STATUS",
    "H_D",
    "H_DIMS",
    "H_STATUS",
    "BincountKernel",
    "HistcKernel",
    "HistogramKernel",
    "build_bincount",
    "build_histc",
    "build_histogram",
]
