"""The CTC recursions as one native kernel per direction (`nn.functional.ctc_loss`).

The caller (`nn._losses`) prepares every array on the host in float64: the log
probabilities of each sequence's blank-extended labels `lpe` (T, N, L), the masks of the
moves between labels, and the output `out` (T, N, L + 2), filled with -inf, whose rows
carry two columns of padding (before the labels for alpha, after them for beta) so that
the moves to a label from one and two positions away read no index outside its row.
Sequences are independent: the kernel's outer loop runs over the sequences `[lo, hi)`
(split across threads), and for each fills the rows `[t_lo, t_hi)` one time step after
the other from the row next to each, over the sequence's own `ext_len` positions (the
others stay -inf; nothing reads them):

  alpha (forward):  a[t, s] = lse(a[t-1, s], a[t-1, s-1], skip[s] ? a[t-1, s-2] : -inf)
                              + lpe[t, s]
  beta (`reverse`): r       = lse(b[t+1, s], b[t+1, s+1], skip[s] ? b[t+1, s+2] : -inf)
                              + lpe[t, s]
                    b[t, s] = -inf                          where t > last[n]
                              start[s] ? lpe[t, s] : -inf   where t == last[n]
                              r                             else

`lse(x, y, z)` is `m + log(1 + exp(p - m) + exp(q - m))` with `m` the largest term and
`p, q` the two others (the largest term's own exponential is exactly 1); `m` itself when
it is not finite (all terms -inf: -inf; +inf; NaN when a term is NaN).

Argument block (int64 slots):
`[lo, hi, N, L, t_lo, t_hi, lpe, out, skip, ext_len, last, start, tmp]`
(`skip`, `start`: uint8 (N, L); `ext_len`, `last`: int64 (N,); alpha reads neither
`last` nor `start`; `tmp`: float64 (N, L) scratch). Each step computes its row into the
sequence's `tmp` row, then copies it into `out`: a loop that stored into the array it
reads the previous row from would keep LLVM's vectorized form from running (its overlap
checks, hoisted out of the time loop, span every row).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..ir import dtypes as dt
from . import mathlib
from .loops import I64, for_range, new_kernel
from .reduce import extreme
from .scalar import intrinsic

F64 = ir.DoubleType()
I8 = ir.IntType(8)
NINF = F64(float("-inf"))


@dataclass(frozen=True, slots=True)
class CtcKernel:
    """The alpha (forward) or, with `reverse`, beta recursion of CTC over float64."""

    reverse: bool

    @property
    def n_slots(self) -> int:
        return 13


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return extreme(b, True, x, y, dt.float64)


def _lse3(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    m = _max(b, _max(b, x, y), z)
    # the two terms that are not the largest (ties: either copy of it)
    x_top = b.and_(b.fcmp_ordered(">=", x, y), b.fcmp_ordered(">=", x, z))
    y_top = b.fcmp_ordered(">=", y, z)
    p = b.select(x_top, y, x)
    q = b.select(x_top, z, b.select(y_top, z, y))
    total = b.fadd(F64(1.0), mathlib.emit(b, "exp", [b.fsub(p, m)]))
    total = b.fadd(total, mathlib.emit(b, "exp", [b.fsub(q, m)]))
    fabs = intrinsic(b.module, "llvm.fabs.f64", F64, [F64])
    finite = b.fcmp_ordered("<", b.call(fabs, [m]), F64(float("inf")))
    return b.select(finite, b.fadd(m, mathlib.emit(b, "log", [total])), m)


def build_ctc(spec: CtcKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    _, b, args = new_kernel(module, name)
    lo, hi = args.int(0, "lo"), args.int(1, "hi")
    n, L = args.int(2, "n"), args.int(3, "L")
    t_lo, t_hi = args.int(4, "t_lo"), args.int(5, "t_hi")
    lpe, out, skip = args.ptr(6, "lpe"), args.ptr(7, "out"), args.ptr(8, "skip")
    ext_len, last, start = args.ptr(9, "ext_len"), args.ptr(10, "last"), args.ptr(11, "start")
    tmp = args.ptr(12, "tmp")
    width = b.add(L, I64(2), name="width")

    def at(ptr: ir.Value, index: ir.Value, ty: ir.Type) -> ir.Value:
        return b.gep(ptr, [index], inbounds=True, source_etype=ty)

    with for_range(b, lo, hi, name="n") as i:
        mrow = b.mul(i, L)
        size = b.load(at(ext_len, i, I64), typ=I64)
        if spec.reverse:
            last_i = b.load(at(last, i, I64), typ=I64)
        with for_range(b, I64(0), b.sub(t_hi, t_lo), name="k") as k:
            # alpha walks t upward from t_lo, beta downward from t_hi - 1
            t = b.sub(b.sub(t_hi, I64(1)), k) if spec.reverse else b.add(t_lo, k)
            prev_t = b.add(t, I64(1)) if spec.reverse else b.sub(t, I64(1))
            orow = b.mul(b.add(b.mul(t, n), i), width)
            prow = b.mul(b.add(b.mul(prev_t, n), i), width)
            lrow = b.mul(b.add(b.mul(t, n), i), L)
            if spec.reverse:
                after = b.icmp_signed(">", t, last_i)
                at_last = b.icmp_signed("==", t, last_i)
            with for_range(b, I64(0), size, name="s") as s:
                p = b.add(prow, s)
                lp = b.load(at(lpe, b.add(lrow, s), F64), typ=F64)
                moved = b.icmp_unsigned("!=", b.load(at(skip, b.add(mrow, s), I8), typ=I8), I8(0))
                if spec.reverse:  # stay, step back, skip back (padding after)
                    x = b.load(at(out, p, F64), typ=F64)
                    y = b.load(at(out, b.add(p, I64(1)), F64), typ=F64)
                    z = b.load(at(out, b.add(p, I64(2)), F64), typ=F64)
                else:  # stay, advance, skip (padding before)
                    x = b.load(at(out, b.add(p, I64(2)), F64), typ=F64)
                    y = b.load(at(out, b.add(p, I64(1)), F64), typ=F64)
                    z = b.load(at(out, p, F64), typ=F64)
                value = b.fadd(_lse3(b, x, y, b.select(moved, z, NINF)), lp)
                if spec.reverse:
                    first = b.icmp_unsigned(
                        "!=", b.load(at(start, b.add(mrow, s), I8), typ=I8), I8(0)
                    )
                    value = b.select(at_last, b.select(first, lp, NINF), value)
                    value = b.select(after, NINF, value)
                b.store(value, at(tmp, b.add(mrow, s), F64))
            first_col = orow if spec.reverse else b.add(orow, I64(2))
            with for_range(b, I64(0), size, name="c") as s:
                v = b.load(at(tmp, b.add(mrow, s), F64), typ=F64)
                b.store(v, at(out, b.add(first_col, s), F64))
    b.ret_void()
    return module
