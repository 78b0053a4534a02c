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
inputs instead of one tensor (`ReduceKernel.prologue`, a `codegen.elementwise.Expr` whose
first output, of dtype `in_dtype`, is the value reduced). Input 0 uses the
`in_ptr`/`in_stride` slots and drives the loop order; inputs 1.. follow at the end of the
block as `(ptr, stride * r)` each (`Slots.extra_inputs`), walked by the same loops
(`Loops.extra_in_strides`). The expression is evaluated where the plain kernel loads its
input, so the prologue's values never reach memory.

Side outputs: the prologue's further outputs (1..) are values of the same elementwise
expression that the rest of the graph needs (a loss and its gradients computed from one
set of transcendentals). The kernel stores them where it evaluates the prologue, so each
is written once, in the same pass that reduces: their `(ptr, stride * r)` pairs follow the
extra inputs in the block and their strides follow the extra inputs' in
`Loops.extra_in_strides`. Every element of the reduction's input is visited exactly once by
row, column and partial kernels, so each side value is stored once; arg reductions (two
passes over a row) take no side outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from .elementwise import Expr, out_dtypes
from .layout import collapse, merge_runs

OPS = ("sum", "prod", "amax", "amin", "argmax", "argmin")
ARG_OPS = ("argmax", "argmin")
MODES = ("full", "partial", "combine")
SUM_BLOCK = 2048  # float32-accumulated run of a row sum before it is added in float64
COLUMN_CAP = 8192  # most outputs a column kernel accumulates at once (64 KiB float64)
COLUMN_MIN_RUN = 1024  # shortest run of a row worth giving its own thread
SHORT_ROW = 16  # a reduced innermost loop this short makes a column kernel
COLUMN_ROWS = 4  # rows a column kernel folds into its accumulators per pass


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
            if self.mode == "combine":
                raise ValueError("reduce kernel: a prologue is not allowed in combine mode")
            if len(self.prologue.outputs) > 1 and self.op in ARG_OPS:
                raise ValueError(
                    "reduce kernel: arg reductions read their rows twice and take no side outputs"
                )
            if out_dtypes(self.prologue)[0] is not self.in_dtype:
                raise ValueError(
                    f"reduce kernel: the prologue computes "
                    f"{out_dtypes(self.prologue)[0]}, the reduction reads "
                    f"{self.in_dtype}"
                )
        r = self.reduced
        first = r.index(True) if True in r else -1
        tail = r[first:-1] if (r and not r[-1]) else r[first:]
        if first < 0 or not all(tail):
            raise ValueError(f"reduce kernel: loops must be kept* reduced+ [kept], got {r}")
        if self.mode == "combine" and self.op not in ARG_OPS:
            raise ValueError("reduce kernel: combine mode is for argmax/argmin")
        if (self.mode == "partial") != (self.chunk >= 0) or (
            self.chunk >= 0 and not (self.chunk < len(r) and r[self.chunk])
        ):
            raise ValueError(
                f"reduce kernel: chunk {self.chunk} must name a reduced loop "
                f"exactly in partial mode"
            )

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
    def n_side(self) -> int:
        """How many side outputs the prologue stores (its outputs after the first)."""
        return 0 if self.prologue is None else len(self.prologue.outputs) - 1

    @property
    def n_extra(self) -> int:
        """The `(ptr, stride * r)` pairs after the fixed slots: inputs 1.., side outputs."""
        return self.n_inputs - 1 + self.n_side

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
        self.extra_inputs = -1  # prologue inputs 1.., side outputs: (ptr, stride * r)
        if spec.n_extra:
            self.extra_inputs, k = k, k + spec.n_extra * (1 + r)
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
    extra_in_strides: tuple[tuple[int, ...], ...] = ()  # prologue inputs 1.., side outputs

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
            width = min(m, -(-width // 16) * 16)  # whole vectors per run
        return width


def _numel(sizes: list[int], which: list[int]) -> int:
    n = 1
    for i in which:
        n *= sizes[i]
    return n


def order_loops(
    shape: tuple[int, ...],
    in_strides: tuple[int, ...],
    out_strides: tuple[int, ...],
    index_strides: tuple[int, ...],
    reduced: tuple[bool, ...],
    extra: tuple[tuple[int, ...], ...] = (),
) -> Loops:
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
        shp, merged = collapse(
            tuple(shape[d] for d in dims),
            [
                tuple(in_strides[d] for d in dims),
                tuple(0 if reduced[d] else out_strides[d] for d in dims),
                tuple(index_strides[d] if reduced[d] else 0 for d in dims),
            ]
            + [tuple(e[d] for d in dims) for e in extra],
        )
        sizes, strides = list(shp), [list(s) for s in merged]
    is_red = [o == 0 for o in strides[1]]
    kept = [i for i in range(len(sizes)) if not is_red[i]]
    red = [i for i in range(len(sizes)) if is_red[i]]
    if not red:
        # nothing to reduce (size-1 axes): a loop of one before the innermost kept loop
        order = kept[:-1] + [-1] + kept[-1:]
    elif is_red[-1] and kept and sizes[-1] <= SHORT_ROW and _numel(sizes, kept) >= 4 * SHORT_ROW:
        # short rows, many of them: a column kernel vectorizes across the rows instead
        inner = min(kept, key=lambda i: abs(strides[0][i]) or 1 << 62)
        order = [i for i in kept if i != inner] + red + [inner]
    elif is_red[-1]:
        order = kept + red
    else:
        order = kept[:-1] + red + kept[-1:]
    sizes = [1 if i < 0 else sizes[i] for i in order]
    strides = [[0 if i < 0 else s[i] for i in order] for s in strides]
    sizes, strides = merge_runs(sizes, strides)
    return Loops(
        tuple(sizes),
        tuple(strides[0]),
        tuple(strides[1]),
        tuple(strides[2]),
        tuple(s == 0 for s in strides[1]),
        tuple(tuple(s) for s in strides[3:]),
    )


def make_spec(
    op: str,
    in_dtype: DType,
    out_dtype: DType,
    loops: Loops,
    mode: str = "full",
    chunk: int = -1,
    prologue: Expr | None = None,
) -> ReduceKernel:
    inner = 1 if loops.in_strides[-1] == 1 else None
    return ReduceKernel(op, in_dtype, out_dtype, loops.reduced, inner, mode, chunk, prologue)


def pack(
    spec: ReduceKernel,
    loops: Loops,
    in_ptr: int,
    out_ptr: int,
    *,
    out_index_ptr: int = 0,
    in_index_ptr: int = 0,
    chunk_step: int = 0,
    chunk_stride: int = 0,
    col_width: int = 0,
    lo: int = 0,
    hi: int | None = None,
    extra_in_ptrs: tuple[int, ...] = (),
) -> list[int]:
    """The argument block of one call; `[lo, hi)` defaults to the whole split loop."""
    sl = Slots(spec)
    if sl.col_width >= 0 and not 0 < col_width <= COLUMN_CAP:
        raise ValueError(f"reduce kernel: column width {col_width} outside (0, {COLUMN_CAP}]")
    args = [0] * sl.total
    args[0] = lo
    args[1] = loops.split_extent(col_width) if hi is None else hi
    r = spec.rank
    args[sl.sizes : sl.sizes + r] = loops.sizes
    args[sl.in_ptr] = in_ptr
    args[sl.in_strides : sl.in_strides + r] = loops.in_strides
    args[sl.out_ptr] = out_ptr
    args[sl.out_strides : sl.out_strides + r] = loops.out_strides
    if sl.index_strides >= 0:
        args[sl.index_strides : sl.index_strides + r] = loops.index_strides
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
        if len(extra_in_ptrs) != spec.n_extra or len(loops.extra_in_strides) != spec.n_extra:
            raise ValueError(
                f"reduce kernel: the prologue reads {spec.n_inputs} inputs and "
                f"stores {spec.n_side} side outputs; got {len(extra_in_ptrs)} "
                f"extra pointers and {len(loops.extra_in_strides)} extra "
                f"stride sets"
            )
        k = sl.extra_inputs
        for ptr, st in zip(extra_in_ptrs, loops.extra_in_strides):
            args[k] = ptr
            args[k + 1 : k + 1 + r] = st
            k += 1 + r
    return args
