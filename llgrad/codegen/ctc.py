"""The CTC recursions as one native kernel (`nn.functional.ctc_loss`).

The kernel reads log_probs (T, N, C) in their own dtype and strides, and the int64
targets, so the host prepares nothing per element. Sequences are independent: the outer
loop runs over the sequences `[lo, hi)` (split across threads). Each is first checked
(`0 <= input_len <= T`, `0 <= target_len`, its labels inside the targets, every label in
[0, C)); its blank-extended labels `ext` are written (a row of width L padded with
`blank`; `ext_len = 2 * target_len + 1`), and the recursions run over its own `ext_len`
positions and its time steps `0..last` (`last = input_len - 1`; later steps reach no
output):

  alpha:  a[0, s] = lpe[0, s] for s < 2, -inf after
          a[t, s] = lse(a[t-1, s], a[t-1, s-1], skip[s] ? a[t-1, s-2] : -inf) + lpe[t, s]
  beta:   b[last, s] = lpe[last, s] for the last blank and last label (s >= ext_len - 2),
                       -inf before them
          b[t, s] = lse(b[t+1, s], b[t+1, s+1], skip[s+2] ? b[t+1, s+2] : -inf) + lpe[t, s]

with `lpe[t, s] = log_probs[t, n, ext[s]]` (widened to float64; every value is computed
in float64) and `skip[s]` true where `ext[s]` is a label that differs from `ext[s-2]`.
`lse(x, y, z)` is `m + log(1 + exp(p - m) + exp(q - m))` with `m` the largest term and
`p, q` the two others (the largest term's own exponential is exactly 1); `m` itself when
it is not finite (all terms -inf: -inf; +inf; NaN when a term is NaN).

The kernel keeps a row's blanks (even s) and labels (odd s) apart, each contiguous. A
blank never takes the skip, so its third term is -inf: `exp(-inf - m)` is 0 and the sum
is `1 + exp(p - m)` exactly, which the blanks compute with one exp fewer (`_lse2`).
Cells that no alignment reaches from the start (alpha, `s > 2t + 1`) or that reach no
alignment's end (beta, `s < ext_len - 2 - 2 (last - t)`) read only cells of their own
kind, which hold -inf or NaN; there `lse` is `m` (the largest of the terms,
NaN-propagating), so those cells are computed as exactly that `m` plus `lpe`, with no
exp or log. Both give the same values, NaN included, at a fraction of the cost.

Without `grad`, the kernel computes the losses' inputs only: two alternating rows of
alpha per sequence, and of each row only the cells from which the last two positions
can still be reached (`s >= ext_len - 2 - 2 (last - t)`; no other cell reads them, so the
two final values are those of the full recursion, bit for bit). With `grad` it computes
every cell of every row up to `last` and stores the alpha and beta rows for the host's
gradient.

Argument block (int64 slots):
`[lo, hi, N, T, C, L, lp, st, sn, sc, targets, starts, row_cap, total, in_len, tgt_len,
blank, ext, skip, work, out, status, alpha, beta]`

- `lp`: log_probs, element strides `st, sn, sc`; `in_len`, `tgt_len`: int64 (N,);
  `targets`: int64, sequence n's labels from `n * row_cap` (padded (N, row_cap)
  targets), or, with `row_cap` -1, from `starts[n]` (int64 (N,); concatenated targets of
  `total` labels); `blank`: the blank class; `L`: `2 M + 1` for the longest target M.
- `ext`: int64 (N, L), written; `skip`: uint8 (N, W) scratch (the labels' skip flags);
  `work`: float64 (N, 5W) scratch: the blanks' and the labels' rows of two steps (a
  label row keeps one -inf cell before its labels, so that moves from the label before
  the first read -inf) and the labels' `lpe` of the current step, with `W = M + 4 +
  SPARE` (the cells past a row's end hold -inf, or for alpha anything nothing reads).
- `out`: float64 (4, N), written: with `a, b` the last step's alphas of the last blank
  and of the last label (-inf without a label), `safe` = `max(a, b)` where finite, else
  0: the rows `a - safe`, `b - safe`, `safe`, and the loss of a sequence without input
  steps (0 for an empty target, else inf).
- `status`: int64 (N,), written: 0, or `NO_STEPS` (input length 0: `out` holds only its
  loss), `BAD_TARGET` (a label outside [0, C)), `BAD_LENGTH` (a length out of range); a
  flagged sequence's recursions are not run.
- `alpha`, `beta` (`grad` only): float64 (T, N, L + 2), rows up to `last` written
  (alpha's cells at columns 2.., beta's at 0..); the caller fills them with -inf first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

from llvmlite import ir

from ..ir import dtypes as dt
from . import mathlib
from .loops import I1, I64, accumulate, for_range, new_kernel
from .reduce import extreme
from .scalar import intrinsic

F64 = ir.DoubleType()
I8 = ir.IntType(8)
NINF = F64(float("-inf"))

# a sequence's status (see the module docstring)
NO_STEPS, BAD_TARGET, BAD_LENGTH = 1, 2, 3

# cells a log-sum-exp loop may run past its range, so that the loop's vector form (4
# float64 lanes) covers it whole: a remainder would run the scalar form, whose every cell
# costs about as much as a vector of 4
SPARE = 3


@dataclass(frozen=True, slots=True)
class CtcKernel:
    """CTC's recursions over log_probs of `dtype` ('float32' or 'float64'): the losses'
    final alphas alone, or with `grad` also every alpha and beta row. The class keeps
    the constants its caller needs (statuses, spare cells) without importing this module."""

    dtype: str
    grad: bool
    SPARE: ClassVar[int] = SPARE
    NO_STEPS: ClassVar[int] = NO_STEPS
    INVALID: ClassVar[int] = BAD_TARGET  # this status and above: an input error

    @property
    def n_slots(self) -> int:
        return 24


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The larger of two float64 values; NaN when one is NaN."""
    return extreme(b, True, x, y, dt.float64)


def _finite(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fabs = intrinsic(b.module, "llvm.fabs.f64", F64, [F64])
    return b.fcmp_ordered("<", b.call(fabs, [x]), F64(float("inf")))


def _lse3(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    m = _max(b, _max(b, x, y), z)
    # the two terms that are not the largest (ties: either copy of it)
    x_top = b.and_(b.fcmp_ordered(">=", x, y), b.fcmp_ordered(">=", x, z))
    y_top = b.fcmp_ordered(">=", y, z)
    p = b.select(x_top, y, x)
    q = b.select(x_top, z, b.select(y_top, z, y))
    total = b.fadd(F64(1.0), mathlib.emit(b, "exp", [b.fsub(p, m)]))
    total = b.fadd(total, mathlib.emit(b, "exp", [b.fsub(q, m)]))
    return b.select(_finite(b, m), b.fadd(m, mathlib.emit(b, "log", [total])), m)


def _lse2(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """`_lse3(x, y, -inf)`, bit for bit: the same largest term and other term, and
    `exp(-inf - m)`, which is 0, left out of the sum."""
    m = _max(b, x, y)
    p = b.select(b.fcmp_ordered(">=", x, y), y, x)
    total = b.fadd(F64(1.0), mathlib.emit(b, "exp", [b.fsub(p, m)]))
    return b.select(_finite(b, m), b.fadd(m, mathlib.emit(b, "log", [total])), m)


def _whole_vectors(b: ir.IRBuilder, count: ir.Value) -> ir.Value:
    """`count` rounded up to a multiple of 4."""
    return b.and_(b.add(count, I64(SPARE)), I64(~SPARE))


def _imax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _imin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _clamp(b: ir.IRBuilder, x: ir.Value, hi: ir.Value) -> ir.Value:
    return _imin(b, _imax(b, x, I64(0)), hi)


@dataclass
class _Sequence:
    """The code of one sequence's recursions (see the module docstring), from the IR
    values `build_ctc` makes for it."""

    b: ir.IRBuilder
    spec: CtcKernel
    i: ir.Value  # the sequence
    n: ir.Value
    size: ir.Value  # its target length
    last: ir.Value  # its last step
    blank: ir.Value
    st: ir.Value  # log_probs' strides along T and C
    sc: ir.Value
    lp_seq: ir.Value  # its log_probs, at t = 0 and class 0
    erow: ir.Value  # its extended labels
    srow: ir.Value  # its labels' skip flags
    rows: tuple[ir.Value, ir.Value, ir.Value, ir.Value]  # blanks, labels of two steps
    lrow: ir.Value  # its labels' log-probabilities of the current step
    width: ir.Value  # of the work rows
    out_width: ir.Value  # of the alpha and beta rows
    alpha_out: ir.Value
    beta_out: ir.Value
    put: Callable[[int, ir.Value], None]  # a value into its column of `out`

    @property
    def lp_ty(self) -> ir.Type:
        return F64 if self.spec.dtype == "float64" else ir.FloatType()

    # -- memory ---------------------------------------------------------------------------
    def at(self, ptr: ir.Value, index: ir.Value, ty: ir.Type) -> ir.Value:
        return self.b.gep(ptr, [index], inbounds=True, source_etype=ty)

    def load(self, ptr: ir.Value, index: ir.Value, ty: ir.Type = F64) -> ir.Value:
        return self.b.load(self.at(ptr, index, ty), typ=ty)

    def store(self, value: ir.Value, ptr: ir.Value, index: ir.Value) -> None:
        self.b.store(value, self.at(ptr, index, value.type))

    def fill(self, ptr: ir.Value, start: ir.Value, stop: ir.Value, value: ir.Value) -> None:
        with for_range(self.b, start, stop, name="fill") as s:
            self.store(value, ptr, s)

    def log_prob(self, t: ir.Value, cls: ir.Value) -> ir.Value:
        """log_probs[t, n, cls] as float64."""
        b = self.b
        v = self.load(self.lp_seq, b.add(b.mul(t, self.st), b.mul(cls, self.sc)), self.lp_ty)
        return v if self.lp_ty is F64 else b.fpext(v, F64)

    def gather(self, t: ir.Value, start: ir.Value) -> None:
        """The labels' log-probabilities of step t, from label `start` on."""
        b = self.b
        with for_range(b, start, self.size, name="g") as j:
            label = self.load(self.erow, b.add(b.mul(j, I64(2)), I64(1)), I64)
            self.store(self.log_prob(t, label), self.lrow, j)

    def pick(self, t: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """(blanks, labels) rows of step t, then those of the other step (they alternate)."""
        b = self.b
        odd = b.trunc(t, I1)
        r = self.rows
        return (
            b.select(odd, r[2], r[0]),
            b.select(odd, r[3], r[1]),
            b.select(odd, r[0], r[2]),
            b.select(odd, r[1], r[3]),
        )

    # -- one row --------------------------------------------------------------------------
    def blanks(
        self,
        cur: ir.Value,
        near: tuple[ir.Value, ir.Value],
        lb: ir.Value,
        start: ir.Value,
        stop: ir.Value,
        full: bool,
        rev: bool,
    ) -> None:
        """Blanks [start, stop) of a row from the row `near` (blanks, labels) before it
        (alpha) or after it (beta): stay, and the label before (alpha) or after (beta);
        `full` with the log-sum-exp, else with its non-finite form `m`."""
        b = self.b
        with for_range(b, start, stop, name="blank" if full else "blank_edge") as j:
            x = self.load(near[0], j)
            y = self.load(near[1], b.add(j, I64(1)) if rev else j)
            value = _lse2(b, x, y) if full else _max(b, x, y)
            # the cells past the last blank keep -inf (beta reads one of them)
            past = b.icmp_signed(">", j, self.size)
            self.store(b.fadd(value, b.select(past, F64(0.0), lb)), cur, j)

    def labels(
        self,
        cur: ir.Value,
        near: tuple[ir.Value, ir.Value],
        start: ir.Value,
        stop: ir.Value,
        full: bool,
        rev: bool,
    ) -> None:
        """Labels [start, stop) of a row (see `blanks`): stay, the blank before (alpha) or
        after (beta), and the label two positions away where the move is allowed."""
        b = self.b
        with for_range(b, start, stop, name="label" if full else "label_edge") as j:
            k = b.add(j, I64(1))  # label j's cell in a label row
            x = self.load(near[1], k)
            if rev:
                y = self.load(near[0], k)
                z = self.load(near[1], b.add(k, I64(1)))
                jump = self.load(self.srow, k, I8)
            else:
                y = self.load(near[0], j)
                z = self.load(near[1], j)
                jump = self.load(self.srow, j, I8)
            z = b.select(b.icmp_unsigned("!=", jump, I8(0)), z, NINF)
            value = _lse3(b, x, y, z) if full else _max(b, _max(b, x, y), z)
            self.store(b.fadd(value, self.load(self.lrow, j)), cur, k)

    def store_row(
        self, dest: ir.Value, t: ir.Value, blanks: ir.Value, labels: ir.Value, first: int
    ) -> None:
        """Row t of `dest` (alpha or beta, cells from column `first`), interleaved."""
        b = self.b
        row = b.mul(b.add(b.mul(t, self.n), self.i), self.out_width)
        base = self.at(dest, b.add(row, I64(first)), F64)
        with for_range(b, I64(0), b.add(self.size, I64(1)), name="copy") as j:
            self.store(self.load(blanks, j), base, b.mul(j, I64(2)))
        with for_range(b, I64(0), self.size, name="copy") as j:
            k = b.add(j, I64(1))
            self.store(self.load(labels, k), base, b.add(b.mul(j, I64(2)), I64(1)))

    def reach(self, t: ir.Value) -> ir.Value:
        """k with cells `s >= 2k - 1` the ones that can still reach the last two at step
        t: blanks from k, labels from k - 1 (either may be negative)."""
        b = self.b
        return b.add(b.sub(self.size, self.last), t)

    # -- the recursions -------------------------------------------------------------------
    def run(self) -> None:
        """The skip flags, the alpha rows, the losses' terms, and with `grad` beta."""
        b, size, last = self.b, self.size, self.last
        erow, srow, lrow = self.erow, self.srow, self.lrow
        # moves from the label before: onto a label that differs from it
        with for_range(b, I64(0), size, name="skip") as j:
            here = self.load(erow, b.add(b.mul(j, I64(2)), I64(1)), I64)
            before = self.load(erow, _imax(b, b.sub(b.mul(j, I64(2)), I64(1)), I64(0)), I64)
            moved = b.and_(
                b.icmp_signed(">=", j, I64(1)),
                b.and_(b.icmp_signed("!=", here, self.blank), b.icmp_signed("!=", here, before)),
            )
            self.store(b.zext(moved, I8), srow, j)
        # the cells a loop runs past its range read no move and no log-probability
        self.fill(srow, size, self.width, I8(0))
        self.fill(lrow, size, self.width, F64(0.0))

        # alpha: its first row, then each row from the one before
        for row in self.rows:
            self.fill(row, I64(0), self.width, NINF)
        self.gather(I64(0), I64(0))
        self.store(self.log_prob(I64(0), self.blank), self.rows[0], I64(0))
        with b.if_then(b.icmp_signed(">", size, I64(0))):
            self.store(self.load(lrow, I64(0)), self.rows[1], I64(1))
        if self.spec.grad:
            self.store_row(self.alpha_out, I64(0), self.rows[0], self.rows[1], 2)
        with for_range(b, I64(1), b.add(last, I64(1)), name="t") as t:
            cur_b, cur_l, prev_b, prev_l = self.pick(t)
            if self.spec.grad:
                b_start = l_start = I64(0)
            else:
                k = self.reach(t)
                b_start, l_start = _imax(b, k, I64(0)), _imax(b, b.sub(k, I64(1)), I64(0))
            lb = self.log_prob(t, self.blank)
            self.gather(t, l_start)
            # cells past step t's reach (s > 2t + 1): blanks and labels from t + 1 on
            reached = b.add(t, I64(1))
            for start, count, is_blank in (
                (b_start, b.add(size, I64(1)), True),
                (l_start, size, False),
            ):
                mid = _imax(b, start, _imin(b, count, reached))
                end = b.add(start, _whole_vectors(b, b.sub(mid, start)))
                for lo, hi, full in ((start, end, True), (end, count, False)):
                    if is_blank:
                        self.blanks(cur_b, (prev_b, prev_l), lb, lo, hi, full, False)
                    else:
                        self.labels(cur_l, (prev_b, prev_l), lo, hi, full, False)
            if self.spec.grad:
                self.store_row(self.alpha_out, t, cur_b, cur_l, 2)

        # the losses' terms: the last blank's and last label's alphas, the larger taken out
        final_b, final_l = self.pick(last)[:2]
        a = self.load(final_b, size)
        z = b.select(b.icmp_signed(">", size, I64(0)), self.load(final_l, size), NINF)
        m = _max(b, a, z)
        safe = b.select(_finite(b, m), m, F64(0.0))
        self.put(0, b.fsub(a, safe))
        self.put(1, b.fsub(z, safe))
        self.put(2, safe)
        if self.spec.grad:
            self.beta()

    def beta(self) -> None:
        """The beta rows: the last step's, then each row from the one after it."""
        b, size, last = self.b, self.size, self.last
        for row in self.rows:
            self.fill(row, I64(0), self.width, NINF)
        cur_b, cur_l = self.pick(last)[:2]
        self.gather(last, I64(0))
        self.store(self.log_prob(last, self.blank), cur_b, size)
        with b.if_then(b.icmp_signed(">", size, I64(0))):
            self.store(self.load(self.lrow, b.sub(size, I64(1))), cur_l, size)
        self.store_row(self.beta_out, last, cur_b, cur_l, 0)
        with for_range(b, I64(0), last, name="k") as k:
            t = b.sub(b.sub(last, I64(1)), k)
            cur_b, cur_l, next_b, next_l = self.pick(t)
            lb = self.log_prob(t, self.blank)
            self.gather(t, I64(0))
            # cells short of the reach: blanks before k, labels before k - 1
            reach = self.reach(t)
            for start, count, is_blank in (
                (reach, b.add(size, I64(1)), True),
                (b.sub(reach, I64(1)), size, False),
            ):
                mid = _clamp(b, start, count)
                end = b.add(mid, _whole_vectors(b, b.sub(count, mid)))
                for lo, hi, full in ((I64(0), mid, False), (mid, end, True)):
                    if is_blank:
                        self.blanks(cur_b, (next_b, next_l), lb, lo, hi, full, True)
                    else:
                        self.labels(cur_l, (next_b, next_l), lo, hi, full, True)
            self.store_row(self.beta_out, t, cur_b, cur_l, 0)


def build_ctc(spec: CtcKernel, name: str) -> ir.Module:
    """The kernel of `spec` (see the module docstring for its arguments)."""
    module = ir.Module(name=name)
    _, b, args = new_kernel(module, name)
    lo, hi = args.int(0, "lo"), args.int(1, "hi")
    n, t_max, c, L = args.int(2, "n"), args.int(3, "t_max"), args.int(4, "c"), args.int(5, "L")
    lp = args.ptr(6, "lp")
    st, sn, sc = args.int(7, "st"), args.int(8, "sn"), args.int(9, "sc")
    targets, starts = args.ptr(10, "targets"), args.ptr(11, "starts")
    row_cap, total = args.int(12, "row_cap"), args.int(13, "total")
    in_len, tgt_len = args.ptr(14, "in_len"), args.ptr(15, "tgt_len")
    blank = args.int(16, "blank")
    ext, skip, work = args.ptr(17, "ext"), args.ptr(18, "skip"), args.ptr(19, "work")
    out, status = args.ptr(20, "out"), args.ptr(21, "status")
    alpha_out, beta_out = args.ptr(22, "alpha"), args.ptr(23, "beta")
    out_width = b.add(L, I64(2), name="out_width")  # of the alpha and beta rows
    longest = b.ashr(L, I64(1), name="longest")
    width = b.add(longest, I64(SPARE + 4), name="width")  # of the work and skip rows
    padded = b.icmp_signed(">=", row_cap, I64(0))
    lp_ty = F64 if spec.dtype == "float64" else ir.FloatType()

    def at(ptr: ir.Value, index: ir.Value, ty: ir.Type) -> ir.Value:
        return b.gep(ptr, [index], inbounds=True, source_etype=ty)

    with for_range(b, lo, hi, name="n") as i:
        size = b.load(at(tgt_len, i, I64), typ=I64, name="size")
        e = b.add(b.mul(size, I64(2)), I64(1), name="ext_len")
        last = b.sub(b.load(at(in_len, i, I64), typ=I64), I64(1), name="last")
        erow = at(ext, b.mul(i, L), I64)
        wrow = at(work, b.mul(i, b.mul(width, I64(5))), F64)

        def put(row: int, value: ir.Value, i: ir.Value = i) -> None:
            b.store(value, at(out, b.add(b.mul(n, I64(row)), i), F64))

        put(0, NINF)
        put(1, NINF)
        put(2, F64(0.0))
        put(3, b.select(b.icmp_signed("==", e, I64(1)), F64(0.0), F64(float("inf"))))
        with for_range(b, I64(0), L, name="fill") as s:
            b.store(blank, at(erow, s, I64))

        # the lengths: its steps within T, its labels within the targets
        with b.if_else(padded) as (then, otherwise):
            with then:
                block_p = b.block
                off_p = b.mul(i, row_cap)
            with otherwise:
                block_c = b.block
                off_c = b.load(at(starts, i, I64), typ=I64)
        off = b.phi(I64, name="off")
        off.add_incoming(off_p, block_p)
        off.add_incoming(off_c, block_c)
        cap = b.select(padded, row_cap, b.sub(total, off))
        in_range = b.and_(
            b.and_(b.icmp_signed(">=", last, I64(-1)), b.icmp_signed("<", last, t_max)),
            b.and_(
                b.and_(b.icmp_signed(">=", size, I64(0)), b.icmp_signed("<=", size, cap)),
                b.icmp_signed(">=", off, I64(0)),
            ),
        )
        b.store(I64(BAD_LENGTH), at(status, i, I64))
        with b.if_then(in_range):
            # the extended labels; a target outside [0, C) stops the sequence here
            flags: list[ir.Value]
            with accumulate(b, I64(0), size, [I1(0)], "j") as (j, (bad,), flags):
                label = b.load(at(targets, b.add(off, j), I64), typ=I64)
                b.store(label, at(erow, b.add(b.mul(j, I64(2)), I64(1)), I64))
                flags.append(b.or_(bad, b.icmp_unsigned(">=", label, c)))  # negatives too
            is_bad = flags[0]
            no_steps = b.icmp_signed("<", last, I64(0))
            code = b.select(is_bad, I64(BAD_TARGET), b.select(no_steps, I64(NO_STEPS), I64(0)))
            b.store(code, at(status, i, I64))
            with b.if_then(b.icmp_signed("==", code, I64(0))):
                wrows = [at(wrow, b.mul(width, I64(k)), F64) for k in range(5)]
                _Sequence(
                    b,
                    spec,
                    i=i,
                    n=n,
                    size=size,
                    last=last,
                    blank=blank,
                    st=st,
                    sc=sc,
                    lp_seq=at(lp, b.mul(i, sn), lp_ty),
                    erow=erow,
                    srow=at(skip, b.mul(i, width), I8),
                    rows=(wrows[0], wrows[1], wrows[2], wrows[3]),
                    lrow=wrows[4],
                    width=width,
                    out_width=out_width,
                    alpha_out=alpha_out,
                    beta_out=beta_out,
                    put=put,
                ).run()
    b.ret_void()
    return module
