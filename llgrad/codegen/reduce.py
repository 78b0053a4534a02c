"""Reduction kernels: sum, prod, amax, amin, argmax, argmin over any set of axes.

A reduction is described by its loops (sizes, input strides, output strides, which loops
are reduced), ordered by `order_loops` so that the innermost loop walks the input with the
smallest stride. Two kernel shapes follow from what that innermost loop is:

* **row** (innermost loop reduced): every kept loop is outside, the reduced loops inside
  carry the accumulator in registers; LLVM vectorizes the innermost one (reassoc flags).
  float32/float16/bfloat16 sums add blocks of `SUM_BLOCK` elements in float32 and the block
  totals in float64, which keeps a 10M-element sum as accurate as NumPy's pairwise sum.
* **column** (innermost loop kept): the reduced loops run around a vectorized loop over a
  block of up to `COLUMN_CAP` outputs whose accumulators live in a stack array (in the
  wide type, in L1/L2), so e.g. a sum over axis 0 of a row-major matrix reads long
  contiguous runs of each row, as NumPy's `out += row` does, without a float32 accumulator.
  The block width is a run-time argument (`column_width`). Many short rows (a reduced
  innermost loop of at most `SHORT_ROW`, e.g. a sum over the last axis of an (N, 3)
  tensor) also get a column kernel, vectorized across rows instead of within them.

Sizes and strides are read at run time from the argument block (one kernel per pattern,
any shape). The outermost loop runs over `[lo, hi)` so `launch.call_split` can split it
across threads. When nothing outside the reductions is big enough to split, the
`"partial"` mode cuts one reduced loop into chunks (the outer loop runs over chunks) and
writes un-finalized per-chunk accumulators; a second, small kernel reduces them
(`"combine"` mode for argmax/argmin, which carries the winning indices along).

Argument block (slot order, see `Slots`): `lo, hi, size * r, in_ptr, in_stride * r,
out_ptr, out_stride * r` then for arg ops `index_stride * r` (the flat index a reduced loop
step adds), the partial index output pointer, the combine index input pointer, and for
partial kernels `chunk_step, chunk_out_stride`, and for column kernels the block width.
Strides are in elements.

Prologue (compiled graphs): a kernel may reduce an elementwise expression of several
inputs instead of one tensor (`ReduceKernel.prologue`, a `codegen.elementwise.Expr` with
one output whose dtype is `in_dtype`). Input 0 uses the `in_ptr`/`in_stride` slots and
drives the loop order; inputs 1.. follow at the end of the block as `(ptr, stride * r)`
each (`Slots.extra_inputs`), walked by the same loops (`Loops.extra_in_strides`). The
expression is evaluated where the plain kernel loads its input, so the prologue's values
never reach memory.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from .elementwise import Expr, evaluate, out_dtypes
from .layout import collapse
from .loops import I1, I64, accumulate, for_range, new_kernel
from .scalar import (FLAGS, SV, LLVMScalar, component_type, intrinsic, llvm_type,
                     memory_type)

OPS = ("sum", "prod", "amax", "amin", "argmax", "argmin")
ARG_OPS = ("argmax", "argmin")
MODES = ("full", "partial", "combine")
SUM_BLOCK = 2048        # float32-accumulated run of a row sum before it is added in float64
COLUMN_CAP = 8192       # most outputs a column kernel accumulates at once (64 KiB float64)
COLUMN_MIN_RUN = 1024   # shortest run of a row worth giving its own thread
SHORT_ROW = 16          # a reduced innermost loop this short makes a column kernel
COLUMN_ROWS = 4         # rows a column kernel folds into its accumulators per pass


# --------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------

def wide_dtype(op: str, d: DType) -> DType:
    """The accumulator dtype of a whole reduction (and of the partials of a split one).

    Float sums accumulate in float64 (cheap: the float32 work happens in blocks), integer
    and bool sums and products in int64; max/min and arg ops keep the compute dtype.
    """
    if op == "sum":
        if d.is_complex:
            return dt.complex128
        return dt.float64 if d.is_floating_point else dt.int64
    if op == "prod":
        return d.compute if d.is_floating_point or d.is_complex else dt.int64
    return d.compute


def narrow_dtype(op: str, d: DType) -> DType | None:
    """The in-register dtype of a blocked row sum, or None when rows are not blocked."""
    if op == "sum" and d.is_floating_point and d.compute is dt.float32:
        return dt.float32
    return None


# --------------------------------------------------------------------------------------
# The spec and its argument block
# --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ReduceKernel:
    """What identifies a compiled reduction kernel (the kernel-cache key).

    `reduced` is per loop, outermost first, of the form kept* reduced+ [kept]: a final kept
    loop makes a column kernel. `inner` is the innermost loop's input stride when it is
    baked in (1), else None. `chunk` is the loop a partial kernel splits into chunks.
    """

    op: str
    in_dtype: DType
    out_dtype: DType
    reduced: tuple[bool, ...]
    inner: int | None = None
    mode: str = "full"
    chunk: int = -1
    prologue: Expr | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS or self.mode not in MODES:
            raise ValueError(f"reduce kernel: bad op/mode {self.op!r}/{self.mode!r}")
        if self.prologue is not None:
            if len(self.prologue.outputs) != 1 or self.mode == "combine":
                raise ValueError("reduce kernel: a prologue has one output and is not "
                                 "allowed in combine mode")
            if out_dtypes(self.prologue)[0] is not self.in_dtype:
                raise ValueError(f"reduce kernel: the prologue computes "
                                 f"{out_dtypes(self.prologue)[0]}, the reduction reads "
                                 f"{self.in_dtype}")
        r = self.reduced
        first = r.index(True) if True in r else -1
        tail = r[first:-1] if (r and not r[-1]) else r[first:]
        if first < 0 or not all(tail):
            raise ValueError(f"reduce kernel: loops must be kept* reduced+ [kept], got {r}")
        if self.mode == "combine" and self.op not in ARG_OPS:
            raise ValueError("reduce kernel: combine mode is for argmax/argmin")
        if (self.mode == "partial") != (self.chunk >= 0) or \
                (self.chunk >= 0 and not (self.chunk < len(r) and r[self.chunk])):
            raise ValueError(f"reduce kernel: chunk {self.chunk} must name a reduced loop "
                             f"exactly in partial mode")

    @property
    def rank(self) -> int:
        return len(self.reduced)

    @property
    def is_column(self) -> bool:
        return not self.reduced[-1]

    @property
    def is_arg(self) -> bool:
        return self.op in ARG_OPS

    @property
    def n_inputs(self) -> int:
        return 1 if self.prologue is None else len(self.prologue.in_dtypes)

    @property
    def n_slots(self) -> int:
        return Slots(self).total


class Slots:
    """Positions in the argument block; the generator and the packer both use this."""

    def __init__(self, spec: ReduceKernel):
        r = spec.rank
        self.sizes = 2
        self.in_ptr = self.sizes + r
        self.in_strides = self.in_ptr + 1
        self.out_ptr = self.in_strides + r
        self.out_strides = self.out_ptr + 1
        k = self.out_strides + r
        self.index_strides = self.out_index_ptr = self.in_index_ptr = -1
        self.chunk_step = self.chunk_stride = -1
        if spec.is_arg and spec.mode != "combine":
            self.index_strides, k = k, k + r
        if spec.is_arg and spec.mode == "partial":
            self.out_index_ptr, k = k, k + 1
        if spec.mode == "combine":
            self.in_index_ptr, k = k, k + 1
        if spec.mode == "partial":
            self.chunk_step, self.chunk_stride, k = k, k + 1, k + 2
        self.col_width = -1
        if spec.is_column:
            self.col_width, k = k, k + 1
        self.extra_inputs = -1          # prologue inputs 1..: (ptr, stride * r) each
        if spec.n_inputs > 1:
            self.extra_inputs, k = k, k + (spec.n_inputs - 1) * (1 + r)
        self.total = k


# --------------------------------------------------------------------------------------
# Loop ordering (pure: used by eager dispatch and by compiled code alike)
# --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Loops:
    """A reduction's loops in kernel order (outermost first)."""

    sizes: tuple[int, ...]
    in_strides: tuple[int, ...]
    out_strides: tuple[int, ...]
    index_strides: tuple[int, ...]
    reduced: tuple[bool, ...]
    extra_in_strides: tuple[tuple[int, ...], ...] = ()   # prologue inputs 1..

    @property
    def is_column(self) -> bool:
        return not self.reduced[-1]

    def split_extent(self, width: int = 0) -> int:
        """How many iterations the outermost (splittable) loop has (column block `width`)."""
        if not self.reduced[0]:
            return self.sizes[0]
        if self.is_column and self.reduced.count(False) == 1:
            return -(-self.sizes[-1] // width)
        return 1

    def column_width(self, threads: int, split_columns: bool) -> int:
        """The column block width: at most COLUMN_CAP, balanced; when the column blocks
        are what threads split, at least `threads` blocks if rows are long enough."""
        if not self.is_column:
            return 0
        m = self.sizes[-1]
        blocks = -(-m // COLUMN_CAP)
        if split_columns:
            blocks = max(blocks, min(threads, m // COLUMN_MIN_RUN))
        width = -(-m // max(blocks, 1))
        if width < m:
            width = min(m, -(-width // 16) * 16)     # whole vectors per run
        return width


def _merge_adjacent(sizes: list[int], strides: list[list[int]]
                    ) -> tuple[list[int], list[list[int]]]:
    """Merge neighbouring loops that every stride set walks contiguously.

    Unlike `layout.collapse` this keeps loops of size one (the placeholder reduced loop).
    A reduced loop (output stride 0) never merges with a kept one (non-zero stride).
    """
    out_sizes = [sizes[0]]
    out_strides = [[s[0]] for s in strides]
    for i in range(1, len(sizes)):
        n = sizes[i]
        if n != 1 and out_sizes[-1] != 1 and all(
                o[-1] == s[i] * n for o, s in zip(out_strides, strides)):
            out_sizes[-1] *= n
            for o, s in zip(out_strides, strides):
                o[-1] = s[i]
        else:
            out_sizes.append(n)
            for o, s in zip(out_strides, strides):
                o.append(s[i])
    return out_sizes, out_strides


def _numel(sizes: list[int], which: list[int]) -> int:
    n = 1
    for i in which:
        n *= sizes[i]
    return n


def order_loops(shape: tuple[int, ...], in_strides: tuple[int, ...],
                out_strides: tuple[int, ...], index_strides: tuple[int, ...],
                reduced: tuple[bool, ...], extra: tuple[tuple[int, ...], ...] = ()) -> Loops:
    """Order and collapse the loops of a non-empty reduction.

    Loops go by decreasing input stride (zero strides, i.e. broadcast dimensions, first)
    and adjacent loops that walk input, output and flat index contiguously merge
    (`layout.collapse`). The loop with the smallest stride becomes innermost: kept loops go
    outside the reduced ones, except that a kept innermost loop stays innermost (a column
    kernel). Reduced loops have output stride 0 and kept loops a non-zero one, so merging
    never mixes the two. `extra` are the strides of a prologue's other inputs: they follow
    the same order and only merge loops they walk contiguously too.
    """
    dims = [d for d, n in enumerate(shape) if n != 1]
    dims.sort(key=lambda d: (in_strides[d] != 0, -abs(in_strides[d])))
    sizes: list[int] = []
    strides: list[list[int]] = [[] for _ in range(3 + len(extra))]
    if dims:
        shp, merged = collapse(tuple(shape[d] for d in dims),
                               [tuple(in_strides[d] for d in dims),
                                tuple(0 if reduced[d] else out_strides[d] for d in dims),
                                tuple(index_strides[d] if reduced[d] else 0 for d in dims)]
                               + [tuple(e[d] for d in dims) for e in extra])
        sizes, strides = list(shp), [list(s) for s in merged]
    is_red = [o == 0 for o in strides[1]]
    kept = [i for i in range(len(sizes)) if not is_red[i]]
    red = [i for i in range(len(sizes)) if is_red[i]]
    if not red:
        # nothing to reduce (size-1 axes): a loop of one before the innermost kept loop
        order = kept[:-1] + [-1] + kept[-1:]
    elif is_red[-1] and kept and sizes[-1] <= SHORT_ROW and _numel(sizes, kept) >= 4 * SHORT_ROW:
        # short rows, many of them: a column kernel vectorizes across the rows instead
        inner = min(kept, key=lambda i: (abs(strides[0][i]) or 1 << 62))
        order = [i for i in kept if i != inner] + red + [inner]
    elif is_red[-1]:
        order = kept + red
    else:
        order = kept[:-1] + red + kept[-1:]
    sizes = [1 if i < 0 else sizes[i] for i in order]
    strides = [[0 if i < 0 else s[i] for i in order] for s in strides]
    sizes, strides = _merge_adjacent(sizes, strides)
    return Loops(tuple(sizes), tuple(strides[0]), tuple(strides[1]), tuple(strides[2]),
                 tuple(s == 0 for s in strides[1]), tuple(tuple(s) for s in strides[3:]))


def make_spec(op: str, in_dtype: DType, out_dtype: DType, loops: Loops,
              mode: str = "full", chunk: int = -1,
              prologue: Expr | None = None) -> ReduceKernel:
    inner = 1 if loops.in_strides[-1] == 1 else None
    return ReduceKernel(op, in_dtype, out_dtype, loops.reduced, inner, mode, chunk, prologue)


def pack(spec: ReduceKernel, loops: Loops, in_ptr: int, out_ptr: int, *,
         out_index_ptr: int = 0, in_index_ptr: int = 0, chunk_step: int = 0,
         chunk_stride: int = 0, col_width: int = 0, lo: int = 0, hi: int | None = None,
         extra_in_ptrs: tuple[int, ...] = ()) -> list[int]:
    """The argument block of one call; `[lo, hi)` defaults to the whole split loop."""
    sl = Slots(spec)
    if sl.col_width >= 0 and not 0 < col_width <= COLUMN_CAP:
        raise ValueError(f"reduce kernel: column width {col_width} outside (0, {COLUMN_CAP}]")
    args = [0] * sl.total
    args[0] = lo
    args[1] = loops.split_extent(col_width) if hi is None else hi
    r = spec.rank
    args[sl.sizes:sl.sizes + r] = loops.sizes
    args[sl.in_ptr] = in_ptr
    args[sl.in_strides:sl.in_strides + r] = loops.in_strides
    args[sl.out_ptr] = out_ptr
    args[sl.out_strides:sl.out_strides + r] = loops.out_strides
    if sl.index_strides >= 0:
        args[sl.index_strides:sl.index_strides + r] = loops.index_strides
    if sl.out_index_ptr >= 0:
        args[sl.out_index_ptr] = out_index_ptr
    if sl.in_index_ptr >= 0:
        args[sl.in_index_ptr] = in_index_ptr
    if sl.chunk_step >= 0:
        args[sl.chunk_step] = chunk_step
        args[sl.chunk_stride] = chunk_stride
    if sl.col_width >= 0:
        args[sl.col_width] = col_width
    if sl.extra_inputs >= 0:
        if len(extra_in_ptrs) != spec.n_inputs - 1 or \
                len(loops.extra_in_strides) != spec.n_inputs - 1:
            raise ValueError(f"reduce kernel: the prologue reads {spec.n_inputs} inputs; "
                             f"got {len(extra_in_ptrs)} extra pointers and "
                             f"{len(loops.extra_in_strides)} extra stride sets")
        k = sl.extra_inputs
        for ptr, st in zip(extra_in_ptrs, loops.extra_in_strides):
            args[k] = ptr
            args[k + 1:k + 1 + r] = st
            k += 1 + r
    return args


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
        fn = intrinsic(b.module, f"{name}.{'f32' if t == ir.FloatType() else 'f64'}",
                       t, [t, t])
        return b.call(fn, [a, v])
    if d is dt.bool_:
        return b.or_(a, v) if is_max else b.and_(a, v)
    cmp = b.icmp_signed if d.kind == "i" else b.icmp_unsigned
    return b.select(cmp(">" if is_max else "<", v, a), v, a)


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
            for j in range(1, spec.n_inputs):
                slot = sl.extra_inputs + (j - 1) * (1 + r)
                self.in_ptrs.append(args.ptr(slot, f"x{j}"))
                strides.append([args.int(slot + 1 + d, f"xs{j}_{d}") for d in range(r)])
            self.in_st = [tuple(st[d] for st in strides) for d in range(r)]
            self.zero_in = tuple(I64(0) for _ in range(spec.n_inputs))
        self.out_ptr = args.ptr(sl.out_ptr, "out")
        self.out_st = [args.int(sl.out_strides + d, f"os{d}") for d in range(r)]
        self.idx_st = [args.int(sl.index_strides + d, f"is{d}") for d in range(r)] \
            if sl.index_strides >= 0 else None
        self.out_index_ptr = args.ptr(sl.out_index_ptr, "out_index") \
            if sl.out_index_ptr >= 0 else None
        self.in_index_ptr = args.ptr(sl.in_index_ptr, "x_index") \
            if sl.in_index_ptr >= 0 else None
        self.chunk_step = args.int(sl.chunk_step, "chunk_step") if sl.chunk_step >= 0 else None
        self.chunk_stride = args.int(sl.chunk_stride, "chunk_stride") \
            if sl.chunk_stride >= 0 else None
        self.chunk_id: ir.Value | None = None
        self.wide = wide_dtype(spec.op, spec.in_dtype)
        self.narrow = narrow_dtype(spec.op, spec.in_dtype)
        self.kept_outer = [d for d in range(r) if not spec.reduced[d]
                           and not (spec.is_column and d == r - 1)]
        self.red = [d for d in range(r) if spec.reduced[d]]
        if spec.is_column:
            t = llvm_type(self.wide)
            self.col_width = args.int(sl.col_width, "col_width")
            self.col_acc = b.alloca(t, size=I64(COLUMN_CAP), name="acc") \
                if not self.wide.is_complex else \
                b.alloca(component_type(self.wide), size=I64(2 * COLUMN_CAP), name="acc")
            self.col_idx = b.alloca(I64, size=I64(COLUMN_CAP), name="acc_index") \
                if spec.is_arg else None

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
        loaded = [self.s.load(self.b.gep(ptr, [o], inbounds=True, source_etype=memory_type(d)),
                              d, name=f"x{j}v")
                  for j, (ptr, o, d) in enumerate(zip(self.in_ptrs, off, prologue.in_dtypes))]
        (value,) = evaluate(self.s, prologue, loaded)
        if value.dtype is not self.spec.in_dtype:
            value = self.s.cast(value, self.spec.in_dtype)
        return value

    def load_index(self, off: ir.Value) -> ir.Value:
        p = self.b.gep(self.in_index_ptr, [off], inbounds=True, source_etype=I64)
        return self.b.load(p, typ=I64, name="xi")

    def identity(self) -> list[ir.Value]:
        if self.wide.is_complex:          # complex sum/prod: (re, im) accumulators
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
    def combine(self, acc: list[ir.Value], x: SV, index: ir.Value | None,
                to: DType | None = None) -> list[ir.Value]:
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

    def arg_update(self, is_max: bool, best: ir.Value, best_i: ir.Value, v: ir.Value,
                   i: ir.Value, d: DType) -> list[ir.Value]:
        """Keep the smaller flat index among equal extremes; NaN beats everything.

        The rule is independent of visiting order, so loops may be reordered and chunks
        combined in any order and still return PyTorch's (first) index.
        """
        b = self.b
        earlier = b.icmp_signed("<", i, best_i)
        if d.is_floating_point:
            better = b.fcmp_ordered(">" if is_max else "<", v, best)
            equal = b.fcmp_ordered("==", v, best)
            v_nan = b.fcmp_unordered("uno", v, v)
            best_nan = b.fcmp_unordered("uno", best, best)
            tie = b.or_(equal, b.and_(v_nan, best_nan))
            take = b.or_(b.or_(better, b.and_(tie, earlier)),
                         b.and_(v_nan, b.xor(best_nan, I1(1))))
        else:
            cmp = b.icmp_signed if d.kind == "i" else b.icmp_unsigned
            better = cmp(">" if is_max else "<", v, best)
            take = b.or_(better, b.and_(b.icmp_signed("==", v, best), earlier))
        return [b.select(take, v, best, name="best"), b.select(take, i, best_i, name="best_i")]

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
        s.store(value, b.gep(self.out_ptr, [out_off], inbounds=True,
                             source_etype=memory_type(spec.out_dtype)))
        if spec.is_arg:
            b.store(acc[1], b.gep(self.out_index_ptr, [out_off], inbounds=True,
                                  source_etype=I64))

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
            self.outer(level + 1, self.madd(in_off, i, self.in_st[d]),
                       self.madd(out_off, i, self.out_st[d]), split)

    # row kernels: accumulators in registers
    def row(self, in_off: ir.Value, out_off: ir.Value) -> None:
        if self.spec.is_arg and self.spec.mode != "combine":
            self.store(self.arg_row(in_off), out_off)
            return
        acc = self.row_loops(0, in_off, I64(0), self.identity(), self.combine_at)
        self.store(acc, out_off)

    def combine_at(self, acc: list[ir.Value], off: ir.Value, index: ir.Value
                   ) -> list[ir.Value]:
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

        best = self.row_loops(0, in_off, I64(0), [_identity("amax" if is_max else "amin", d)],
                              extreme)[0]
        best_nan = b.fcmp_unordered("uno", best, best) if d.is_floating_point else None

        def first(acc: list[ir.Value], off: ir.Value, index: ir.Value) -> list[ir.Value]:
            v = self.s.cast(self.load_x(off), d).value
            if d.is_floating_point:
                match = b.or_(b.fcmp_ordered("==", v, best),
                              b.and_(b.fcmp_unordered("uno", v, v), best_nan))
            else:
                match = b.icmp_signed("==", v, best)
            candidate = b.select(match, index, I64((1 << 63) - 1))
            return [self.min(candidate, acc[0])]

        index = self.row_loops(0, in_off, I64(0), [I64((1 << 63) - 1)], first)[0]
        return [best, index]

    def row_loops(self, level: int, in_off: ir.Value, index: ir.Value,
                  acc: list[ir.Value], step) -> list[ir.Value]:
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

    def blocked_sum(self, d: int, lo: ir.Value, hi: ir.Value, in_off: ir.Value,
                    acc: list[ir.Value]) -> list[ir.Value]:
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
        return [self.b.gep(self.col_acc, [self.b.add(at, I64(j))], inbounds=True,
                           source_etype=t) for j in (0, 1)]

    def col_get(self, k: ir.Value) -> list[ir.Value]:
        b = self.b
        t = llvm_type(self.wide)
        if self.wide.is_complex:
            return [b.load(p, typ=component_type(self.wide)) for p in self.col_halves(k)]
        vals = [b.load(b.gep(self.col_acc, [k], inbounds=True, source_etype=t), typ=t)]
        if self.col_idx is not None:
            vals.append(b.load(b.gep(self.col_idx, [k], inbounds=True, source_etype=I64),
                               typ=I64))
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

    def column_loops(self, level: int, in_off: ir.Value, index: ir.Value,
                     width: ir.Value) -> None:
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

    def column_rows(self, rows: list[ir.Value], d: int, in_off: ir.Value, index: ir.Value,
                    width: ir.Value) -> None:
        """acc[k] = acc[k] op x[row][k] for each row in turn (vectorized over k)."""
        inner = self.spec.rank - 1
        offs = [self.madd(in_off, i, self.in_st[d]) for i in rows]
        idxs = [self.madd(index, i, self.idx_st[d]) if self.idx_st is not None else index
                for i in rows]
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
