"""Kernels of the selection and sorting functions: short-row sorts, binary search,
masked scatter, row puts (`index_put`), `unravel_index`, the slice grouping of `unique` /
`unique_consecutive`, and one-hot rows.

Each spec is a frozen dataclass (the cache key); each builder emits one kernel with the
`void kernel(int64_t *args)` signature of `codegen.loops`. The callers (`eager.selection`)
check every argument that could send a read or write outside a buffer before a launch;
values that only the data can reveal (an index out of range, a sorter entry out of range,
a mask selecting more elements than a source holds) are checked inside the kernel, which
then skips the access and reports what it found in a result block, for the caller to
raise PyTorch's error.

Orders are those of the NumPy code the host paths run: NaN sorts above every number (two
NaNs are equal for ordering), -0.0 equals 0.0, and every sort is stable.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from .loops import I1, I64, for_range, new_kernel
from .scalar import SV, LLVMScalar, memory_type

INDEX_DTYPES = ("int32", "int64")


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _while(b: ir.IRBuilder, cond: Callable[[], ir.Value], name: str) -> Iterator[None]:
    """`while (cond()) { body }`: `cond` emits its test in the loop's header block (it may
    add blocks of its own, ending where the branch goes)."""
    fn = b.function
    header = fn.append_basic_block(f"{name}.header")
    body = fn.append_basic_block(f"{name}.body")
    exit_ = fn.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    b.cbranch(cond(), body, exit_)
    b.position_at_end(body)
    yield
    b.branch(header)
    b.position_at_end(exit_)


def _at(b: ir.IRBuilder, ptr: ir.Value, off: ir.Value, t: ir.Type) -> ir.Value:
    """The address of element `off` of type `t` at `ptr`."""
    return b.gep(ptr, [off], inbounds=True, source_etype=t)


def _load(b: ir.IRBuilder, ptr: ir.Value, off: ir.Value, t: ir.Type) -> ir.Value:
    return b.load(_at(b, ptr, off, t), typ=t)


def _get(b: ir.IRBuilder, slot: ir.Value) -> ir.Value:
    return b.load(slot, typ=I64)


def _before(s: LLVMScalar, a: SV, c: SV, descending: bool) -> ir.Value:
    """Whether `a` sorts strictly before `c` (NaN largest; NaNs tie)."""
    b = s.b
    if descending:
        a, c = c, a
    less = s.cmp("lt", a, c).value
    if a.dtype.is_floating_point:
        nan_first = b.and_(s.isnan(c).value, b.xor(s.isnan(a).value, I1(1)))
        less = b.or_(less, nan_first)
    return less


def _index_value(b: ir.IRBuilder, ptr: ir.Value, off: ir.Value, d: DType) -> ir.Value:
    """An int32/int64 index read as int64."""
    t = memory_type(d)
    v = _load(b, ptr, off, t)
    return v if t == I64 else b.sext(v, I64)


def _check_sortable(what: str, d: DType) -> None:
    if d.is_complex:
        raise TypeError(f"{what}: not generated for {d.name}")


# --------------------------------------------------------------------------------------
# sort: short rows, insertion sort into the outputs
# --------------------------------------------------------------------------------------

SORT_MAX_ROW = 32  # rows up to this length: an insertion sort is as fast as a host sort


@dataclass(frozen=True, slots=True)
class SortKernel:
    """Stable sort of each row of `x` along its middle dimension, rows of at most
    `SORT_MAX_ROW` elements: the values (raw bits) and their positions (int64), by
    insertion into the outputs.

    Args: [outer, n, inner, x_ptr, so, sn, si, values_ptr, indices_ptr]; `x` is read
    through its strides (elements), `values` and `indices` are contiguous (outer, n,
    inner). Ascending, or `descending` (ties keep their input order either way)."""

    dtype: DType
    descending: bool

    def __post_init__(self) -> None:
        _check_sortable("sort", self.dtype)

    @property
    def n_slots(self) -> int:
        return 9


def build_sort(spec: SortKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    outer, n, inner = (args.int(k, nm) for k, nm in enumerate(("outer", "n", "inner")))
    x = args.ptr(3, "x")
    so, sn, si = (args.int(4 + k, nm) for k, nm in enumerate(("so", "sn", "si")))
    values, indices = args.ptr(7, "values"), args.ptr(8, "indices")
    d = spec.dtype
    mt = memory_type(d)
    s = LLVMScalar(b)
    j_slot = b.alloca(I64, name="j")
    row_len = b.mul(n, inner)
    with for_range(b, I64(0), outer, name="o") as o:
        with for_range(b, I64(0), inner, name="i") as i:
            xrow = b.add(b.mul(o, so), b.mul(i, si))
            orow = b.add(b.mul(o, row_len), i)
            with for_range(b, I64(0), n, name="k") as k:
                src = _at(b, x, b.add(xrow, b.mul(k, sn)), mt)
                raw = b.load(src, typ=mt)
                key = s.load(src, d)
                b.store(k, j_slot)

                def shifting() -> ir.Value:
                    # j > 0 and key before out[j - 1] (the load only when j > 0)
                    j = _get(b, j_slot)
                    more = fn.append_basic_block("shift.test")
                    done = fn.append_basic_block("shift.done")
                    head = b.block
                    b.cbranch(b.icmp_signed(">", j, I64(0)), more, done)
                    b.position_at_end(more)
                    prev = s.load(
                        _at(b, values, b.add(orow, b.mul(b.sub(j, I64(1)), inner)), mt), d
                    )
                    moves = _before(s, key, prev, spec.descending)
                    tested = b.block
                    b.branch(done)
                    b.position_at_end(done)
                    phi = b.phi(I1)
                    phi.add_incoming(I1(0), head)
                    phi.add_incoming(moves, tested)
                    return phi

                with _while(b, shifting, "shift"):
                    j = _get(b, j_slot)
                    here = b.add(orow, b.mul(j, inner))
                    there = b.sub(here, inner)
                    b.store(_load(b, values, there, mt), _at(b, values, here, mt))
                    b.store(_load(b, indices, there, I64), _at(b, indices, here, I64))
                    b.store(b.sub(j, I64(1)), j_slot)
                here = b.add(orow, b.mul(_get(b, j_slot), inner))
                b.store(raw, _at(b, values, here, mt))
                b.store(k, _at(b, indices, here, I64))
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# searchsorted: a binary search per value
# --------------------------------------------------------------------------------------


SEARCH_BLOCK = 64  # values searched side by side


@dataclass(frozen=True, slots=True)
class SearchKernel:
    """For each value, the first position of its row of boundaries that does not lie
    before it (torch's binary search: a boundary lies before value v when not `a >= v`,
    not `a > v` with `right`; so NaN values go after every boundary and the search of
    an unsorted row ends where torch's does).

    Args: [rows, k, m, seq_ptr, seq_row_stride, sorter_ptr, values_ptr, out_ptr,
    err_ptr, steps]: `values` and `out` are contiguous (rows, k), `seq` rows of `m >= 1`
    contiguous boundaries `seq_row_stride` apart (0: one row for every row of values),
    `sorter` (with `sorter_dtype`) contiguous (rows or 1, m) like `seq`, `steps` the bit
    length of m (the halvings that empty any range). Every sorter entry is checked
    against [0, m) first; a bad one sets err[0] = 1 and nothing is searched."""

    dtype: DType
    right: bool
    sorter_dtype: DType | None
    out_dtype: DType

    def __post_init__(self) -> None:
        _check_sortable("searchsorted", self.dtype)
        if self.out_dtype.name not in INDEX_DTYPES:
            raise TypeError(f"searchsorted: output dtype int32 or int64, got {self.out_dtype}")
        if self.sorter_dtype is not None and self.sorter_dtype.name not in INDEX_DTYPES:
            raise TypeError(f"searchsorted: sorter dtype int32 or int64, got {self.sorter_dtype}")

    @property
    def n_slots(self) -> int:
        return 10


def build_search(spec: SearchKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    rows, k, m = args.int(0, "rows"), args.int(1, "k"), args.int(2, "m")
    seq, srs = args.ptr(3, "seq"), args.int(4, "srs")
    sorter, values, out, err = (
        args.ptr(j, nm) for j, nm in ((5, "sorter"), (6, "values"), (7, "out"), (8, "err"))
    )
    steps = args.int(9, "steps")
    last = b.sub(m, I64(1))
    d = spec.dtype
    mt = memory_type(d)
    s = LLVMScalar(b)
    lows = b.alloca(I64, size=I64(SEARCH_BLOCK), name="lows")
    highs = b.alloca(I64, size=I64(SEARCH_BLOCK), name="highs")
    if spec.sorter_dtype is not None:
        srows = b.select(b.icmp_signed("==", srs, I64(0)), I64(1), rows)
        fail = fn.append_basic_block("sorter.bad")
        with for_range(b, I64(0), b.mul(srows, m), name="c") as c:
            v = _index_value(b, sorter, c, spec.sorter_dtype)
            ok = fn.append_basic_block("sorter.ok")
            b.cbranch(b.icmp_unsigned(">=", v, m), fail, ok)
            b.position_at_end(ok)
        search = fn.append_basic_block("search")
        b.branch(search)
        b.position_at_end(fail)
        b.store(I64(1), _at(b, err, I64(0), I64))
        b.ret_void()
        b.position_at_end(search)
    ot = memory_type(spec.out_dtype)
    with for_range(b, I64(0), rows, name="r") as r:
        base = b.mul(r, srs)
        sbase = b.mul(r, b.select(b.icmp_signed("==", srs, I64(0)), I64(0), m))
        # blocks of values searched together: a fixed number of halvings (the bit length
        # of m), each inactive once a value's range is empty, so no branch depends on the
        # data and the block's searches run side by side
        with for_range(b, I64(0), k, name="blk", step=I64(SEARCH_BLOCK)) as t0:
            rest = b.sub(k, t0)
            count = b.select(b.icmp_signed("<", rest, I64(SEARCH_BLOCK)), rest, I64(SEARCH_BLOCK))
            first = b.add(b.mul(r, k), t0)
            with for_range(b, I64(0), count, name="init") as j:
                b.store(I64(0), _at(b, lows, j, I64))
                b.store(m, _at(b, highs, j, I64))
            with for_range(b, I64(0), steps, name="bs"):
                with for_range(b, I64(0), count, name="j") as j:
                    v = s.load(_at(b, values, b.add(first, j), mt), d)
                    lo = _load(b, lows, j, I64)
                    hi = _load(b, highs, j, I64)
                    active = b.icmp_signed("<", lo, hi)
                    mid = b.lshr(b.add(lo, hi), I64(1))
                    probe = b.select(b.icmp_signed("<", mid, m), mid, last)
                    if spec.sorter_dtype is not None:
                        probe = _index_value(b, sorter, b.add(sbase, probe), spec.sorter_dtype)
                    a = s.load(_at(b, seq, b.add(base, probe), mt), d)
                    after = s.cmp("gt" if spec.right else "ge", a, v).value
                    lo = b.select(b.and_(active, b.not_(after)), b.add(mid, I64(1)), lo)
                    hi = b.select(b.and_(active, after), mid, hi)
                    b.store(lo, _at(b, lows, j, I64))
                    b.store(hi, _at(b, highs, j, I64))
            with for_range(b, I64(0), count, name="w") as j:
                res = _load(b, lows, j, I64)
                b.store(res if ot == I64 else b.trunc(res, ot), _at(b, out, b.add(first, j), ot))
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# masked_scatter: one row-major walk
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MaskedScatterKernel:
    """`out[i] = mask[i] ? source[k++] : x[i]` over the row-major elements of `out`.

    Args: [size_0 .. size_{r-1}, out_ptr, out strides, x_ptr, x strides, mask_ptr, mask
    strides, source_ptr, source_count, result_ptr]: strides in elements (`source`
    contiguous), moved as raw bits of `width` bytes. A True past the source's end is
    counted but reads nothing; result[0] is the count of True elements."""

    width: int
    rank: int

    def __post_init__(self) -> None:
        if self.width not in (1, 2, 4, 8, 16):
            raise ValueError(f"masked_scatter: width must be 1, 2, 4, 8 or 16, got {self.width}")
        if self.rank < 1:
            raise ValueError(f"masked_scatter: rank must be >= 1, got {self.rank}")

    @property
    def n_slots(self) -> int:
        return 4 * self.rank + 6


def build_masked_scatter(spec: MaskedScatterKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    r = spec.rank
    sizes = [args.int(j, f"n{j}") for j in range(r)]
    ptrs, strides = [], []
    for k, nm in enumerate(("out", "x", "mask")):
        base = r + k * (r + 1)
        ptrs.append(args.ptr(base, nm))
        strides.append([args.int(base + 1 + j, f"{nm}s{j}") for j in range(r)])
    tail = 4 * r + 3
    src, count, result = (
        args.ptr(tail, "src"),
        args.int(tail + 1, "count"),
        args.ptr(tail + 2, "res"),
    )
    t = ir.IntType(8 * spec.width)
    k_slot = b.alloca(I64, name="k")
    b.store(I64(0), k_slot)

    def visit(offs: list[ir.Value]) -> None:
        m = _load(b, ptrs[2], offs[2], ir.IntType(8))
        with b.if_else(b.icmp_unsigned("!=", m, ir.IntType(8)(0))) as (taken, kept):
            with taken:
                kk = _get(b, k_slot)
                with b.if_then(b.icmp_signed("<", kk, count)):
                    b.store(_load(b, src, kk, t), _at(b, ptrs[0], offs[0], t))
                b.store(b.add(kk, I64(1)), k_slot)
            with kept:
                b.store(_load(b, ptrs[1], offs[1], t), _at(b, ptrs[0], offs[0], t))

    def nest(depth: int, offs: list[ir.Value]) -> None:
        if depth == r:
            visit(offs)
            return
        with for_range(b, I64(0), sizes[depth], name=f"i{depth}") as i:
            nest(depth + 1, [b.add(o, b.mul(i, st[depth])) for o, st in zip(offs, strides)])

    nest(0, [I64(0)] * 3)
    b.store(_get(b, k_slot), _at(b, result, I64(0), I64))
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# index_put: rows of the destination chosen by a mask or an index
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowPutKernel:
    """Writes (or adds, `accumulate`) rows of values into rows of a contiguous `out`:
    value row j goes to row `index[j]` (an int32/int64 `index_dtype`, negatives counted
    from the end), or, with a bool mask (`index_dtype` bool), value row k goes to the
    k-th row whose mask is True.

    Args: [count, R, out_ptr, rows, index_ptr, values_ptr, vj, vr, err_ptr]: `count`
    index entries (mask or index, contiguous), rows of `R` elements in `out` (`rows` of
    them), value element (j, r) at `j * vj + r * vr`. An index outside [-rows, rows)
    stops the kernel with err = [1, value]; the caller discards `out`."""

    dtype: DType
    index_dtype: DType
    accumulate: bool

    def __post_init__(self) -> None:
        if self.index_dtype.name not in INDEX_DTYPES + ("bool",):
            raise TypeError(f"index_put: index dtype int32, int64 or bool, got {self.index_dtype}")

    @property
    def n_slots(self) -> int:
        return 9


def build_row_put(spec: RowPutKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    count, R, out, rows = (
        args.int(0, "count"),
        args.int(1, "R"),
        args.ptr(2, "out"),
        args.int(3, "rows"),
    )
    index, values = args.ptr(4, "index"), args.ptr(5, "values")
    vj, vr, err = args.int(6, "vj"), args.int(7, "vr"), args.ptr(8, "err")
    d = spec.dtype
    mt = memory_type(d)
    s = LLVMScalar(b)
    k_slot = b.alloca(I64, name="k")
    b.store(I64(0), k_slot)
    mask = spec.index_dtype is dt.bool_

    def row(target: ir.Value, vrow: ir.Value) -> None:
        obase = b.mul(target, R)
        vbase = b.mul(vrow, vj)
        with for_range(b, I64(0), R, name="c") as c:
            src = _at(b, values, b.add(vbase, b.mul(c, vr)), mt)
            dst = _at(b, out, b.add(obase, c), mt)
            if spec.accumulate:
                s.store(s.add(s.load(dst, d), s.load(src, d)), dst)
            else:
                b.store(b.load(src, typ=mt), dst)

    with for_range(b, I64(0), count, name="j") as j:
        if mask:
            m = _load(b, index, j, ir.IntType(8))
            with b.if_then(b.icmp_unsigned("!=", m, ir.IntType(8)(0))):
                kk = _get(b, k_slot)
                row(j, kk)
                b.store(b.add(kk, I64(1)), k_slot)
        else:
            raw = _index_value(b, index, j, spec.index_dtype)
            wrapped = b.select(b.icmp_signed("<", raw, I64(0)), b.add(raw, rows), raw)
            bad = fn.append_basic_block("bad")
            ok = fn.append_basic_block("ok")
            b.cbranch(b.icmp_unsigned(">=", wrapped, rows), bad, ok)
            b.position_at_end(bad)
            b.store(I64(1), _at(b, err, I64(0), I64))
            b.store(raw, _at(b, err, I64(1), I64))
            b.ret_void()
            b.position_at_end(ok)
            row(wrapped, j)
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# unravel_index
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UnravelKernel:
    """The coordinates in a shape of `ndim` sizes (total `N` elements) of flat indices
    (negatives counted from the end), one int64 output per size.

    Args: [n, x_ptr, N, size_0 .. size_{ndim-1}, out_ptr_0 .. out_ptr_{ndim-1},
    minmax_ptr]: `x` contiguous of integer `dtype`, read as int64; minmax = [the least
    value, the greatest] (the caller's range check). A value outside [-N, N) writes
    zeros (the caller raises)."""

    dtype: DType
    ndim: int

    def __post_init__(self) -> None:
        if self.dtype.name not in ("uint8", "int8", "int16", "int32", "int64"):
            raise TypeError(f"unravel_index: not generated for {self.dtype.name}")

    @property
    def n_slots(self) -> int:
        return 4 + 2 * self.ndim


def build_unravel(spec: UnravelKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    n, x, total = args.int(0, "n"), args.ptr(1, "x"), args.int(2, "N")
    r = spec.ndim
    sizes = [args.int(3 + j, f"s{j}") for j in range(r)]
    outs = [args.ptr(3 + r + j, f"out{j}") for j in range(r)]
    minmax = args.ptr(3 + 2 * r, "minmax")
    mt = memory_type(spec.dtype)
    lo_slot = b.alloca(I64, name="lo")
    hi_slot = b.alloca(I64, name="hi")
    b.store(I64(2**63 - 1), lo_slot)
    b.store(I64(-(2**63)), hi_slot)
    with for_range(b, I64(0), n, name="i") as i:
        v = _load(b, x, i, mt)
        if mt != I64:
            v = b.zext(v, I64) if spec.dtype is dt.uint8 else b.sext(v, I64)
        lo, hi = _get(b, lo_slot), _get(b, hi_slot)
        b.store(b.select(b.icmp_signed("<", v, lo), v, lo), lo_slot)
        b.store(b.select(b.icmp_signed(">", v, hi), v, hi), hi_slot)
        w = b.select(b.icmp_signed("<", v, I64(0)), b.add(v, total), v)
        valid = b.icmp_unsigned("<", w, total)  # (also false for w < 0)
        with b.if_else(valid) as (good, bad):
            with good:
                rest = w
                for j in reversed(range(r)):
                    q = b.udiv(rest, sizes[j])
                    b.store(b.sub(rest, b.mul(q, sizes[j])), _at(b, outs[j], i, I64))
                    rest = q
            with bad:
                for j in range(r):
                    b.store(I64(0), _at(b, outs[j], i, I64))
    b.store(_get(b, lo_slot), _at(b, minmax, I64(0), I64))
    b.store(_get(b, hi_slot), _at(b, minmax, I64(1), I64))
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# unique / unique_consecutive along a dimension: group equal slices
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupKernel:
    """Groups the `n` slices `x[o, k, i]` (k fixed; elements in (o, i) row-major order)
    of `x` viewed as (outer, n, inner): with `sort`, in lexicographic order (a stable
    bottom-up merge sort; NaN above every number, NaNs tie), else in their order; a
    slice starts a new group when any element differs (`!=`, so a NaN always does) from
    the slice before it in that order.

    Args: [outer, n, inner, x_ptr, so, sn, si, order_ptr (2n int64: the order and the
    merge buffer), inverse_ptr (n: each slice's group), counts_ptr (n: the size of each
    group), first_ptr (n: the slice each group's values come from), result_ptr].
    result[0] is the number of groups. Needs n >= 1."""

    dtype: DType
    sort: bool

    def __post_init__(self) -> None:
        _check_sortable("unique", self.dtype)

    @property
    def n_slots(self) -> int:
        return 12


def build_group(spec: GroupKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    outer, n, inner = (args.int(k, nm) for k, nm in enumerate(("outer", "n", "inner")))
    x = args.ptr(3, "x")
    so, sn, si = (args.int(4 + k, nm) for k, nm in enumerate(("so", "sn", "si")))
    order, inverse, counts, first, result = (
        args.ptr(7 + k, nm) for k, nm in enumerate(("order", "inverse", "counts", "first", "res"))
    )
    d = spec.dtype
    mt = memory_type(d)
    s = LLVMScalar(b)
    names = ("w", "lo", "a", "c", "t", "g", "src", "e", "i", "off", "verdict")
    slots = {nm: b.alloca(I64, name=nm) for nm in names}
    size = b.mul(outer, inner)  # elements per slice
    wrap = b.sub(so, b.mul(b.sub(inner, I64(1)), si))  # the step from (o, inner-1) to (o+1, 0)

    def first_verdict(
        p: ir.Value, q: ir.Value, verdict_of: Callable[[SV, SV], ir.Value]
    ) -> ir.Value:
        """Walks slices p and q element by element ((o, i) row-major) until
        `verdict_of(x[.., p, ..], x[.., q, ..])` (i64) is not 0, and returns it (0 when
        every element gives 0)."""
        pb, qb = b.mul(p, sn), b.mul(q, sn)
        for nm in ("e", "i", "off", "verdict"):
            b.store(I64(0), slots[nm])

        def going() -> ir.Value:
            more = b.icmp_signed("<", _get(b, slots["e"]), size)
            return b.and_(more, b.icmp_signed("==", _get(b, slots["verdict"]), I64(0)))

        with _while(b, going, "walk"):
            e, i, off = _get(b, slots["e"]), _get(b, slots["i"]), _get(b, slots["off"])
            ep = s.load(_at(b, x, b.add(pb, off), mt), d)
            eq = s.load(_at(b, x, b.add(qb, off), mt), d)
            b.store(verdict_of(ep, eq), slots["verdict"])
            i1 = b.add(i, I64(1))
            wraps = b.icmp_signed("==", i1, inner)
            b.store(b.select(wraps, I64(0), i1), slots["i"])
            b.store(b.add(off, b.select(wraps, wrap, si)), slots["off"])
            b.store(b.add(e, I64(1)), slots["e"])
        return _get(b, slots["verdict"])

    def order_at(buf: ir.Value, j: ir.Value) -> ir.Value:
        return _load(b, buf, j, I64)

    def set_order(buf: ir.Value, j: ir.Value, v: ir.Value) -> None:
        b.store(v, _at(b, buf, j, I64))

    with for_range(b, I64(0), n, name="init") as j:
        set_order(order, j, j)
    if spec.sort:

        def compare(p: ir.Value, q: ir.Value) -> ir.Value:
            """Whether slice q sorts strictly before slice p (lexicographic)."""

            def verdict_of(ep: SV, eq: SV) -> ir.Value:  # 1: q first, 2: p first, 0: tie
                q_first = _before(s, eq, ep, False)
                p_first = _before(s, ep, eq, False)
                return b.select(q_first, I64(1), b.select(p_first, I64(2), I64(0)))

            return b.icmp_signed("==", first_verdict(p, q, verdict_of), I64(1))

        second = _at(b, order, n, I64)
        b.store(I64(0), slots["src"])  # 0: the order is in the first half
        b.store(I64(1), slots["w"])
        with _while(b, lambda: b.icmp_signed("<", _get(b, slots["w"]), n), "pass"):
            w = _get(b, slots["w"])
            in_first = b.icmp_signed("==", _get(b, slots["src"]), I64(0))
            src = b.select(in_first, order, second)
            dst = b.select(in_first, second, order)
            b.store(I64(0), slots["lo"])
            with _while(b, lambda: b.icmp_signed("<", _get(b, slots["lo"]), n), "run"):
                lo = _get(b, slots["lo"])
                mid = b.add(lo, w)
                mid = b.select(b.icmp_signed(">", mid, n), n, mid)
                hi = b.add(mid, w)
                hi = b.select(b.icmp_signed(">", hi, n), n, hi)
                b.store(lo, slots["a"])
                b.store(mid, slots["c"])
                b.store(lo, slots["t"])
                with _while(b, lambda: b.icmp_signed("<", _get(b, slots["t"]), hi), "merge"):
                    a, c, t = _get(b, slots["a"]), _get(b, slots["c"]), _get(b, slots["t"])
                    left_done = b.icmp_signed(">=", a, mid)
                    right_done = b.icmp_signed(">=", c, hi)
                    # take the right run's head when the left is done, or when both
                    # remain and it sorts strictly before the left's (stable)
                    pick = fn.append_basic_block("merge.pick")
                    both = fn.append_basic_block("merge.both")
                    decided = fn.append_basic_block("merge.decided")
                    b.cbranch(b.or_(left_done, right_done), pick, both)
                    b.position_at_end(both)
                    right_first = compare(order_at(src, a), order_at(src, c))
                    both_end = b.block
                    b.branch(decided)
                    b.position_at_end(pick)
                    pick_end = b.block
                    b.branch(decided)
                    b.position_at_end(decided)
                    choice = b.phi(I1)
                    choice.add_incoming(left_done, pick_end)
                    choice.add_incoming(right_first, both_end)
                    a, c = _get(b, slots["a"]), _get(b, slots["c"])
                    with b.if_else(choice) as (right, left):
                        with right:
                            set_order(dst, t, order_at(src, c))
                            b.store(b.add(c, I64(1)), slots["c"])
                        with left:
                            set_order(dst, t, order_at(src, a))
                            b.store(b.add(a, I64(1)), slots["a"])
                    b.store(b.add(t, I64(1)), slots["t"])
                b.store(hi, slots["lo"])
            b.store(b.xor(_get(b, slots["src"]), I64(1)), slots["src"])
            b.store(b.mul(w, I64(2)), slots["w"])
        with b.if_then(b.icmp_signed("!=", _get(b, slots["src"]), I64(0))):
            with for_range(b, I64(0), n, name="back") as j:
                set_order(order, j, order_at(second, j))
    # groups in that order
    b.store(I64(0), slots["g"])
    first0 = order_at(order, I64(0))
    set_order(first, I64(0), first0)
    set_order(counts, I64(0), I64(1))
    set_order(inverse, first0, I64(0))
    with for_range(b, I64(1), n, name="grp") as j:
        here = order_at(order, j)
        prev = order_at(order, b.sub(j, I64(1)))
        differs = b.icmp_signed(
            "!=",
            first_verdict(here, prev, lambda p, q: b.zext(s.cmp("ne", p, q).value, I64)),
            I64(0),
        )
        g = _get(b, slots["g"])
        with b.if_else(differs) as (new, same):
            with new:
                g1 = b.add(g, I64(1))
                b.store(g1, slots["g"])
                set_order(first, g1, here)
                set_order(counts, g1, I64(1))
            with same:
                cp = _at(b, counts, g, I64)
                b.store(b.add(b.load(cp, typ=I64), I64(1)), cp)
        set_order(inverse, here, _get(b, slots["g"]))
    b.store(b.add(_get(b, slots["g"]), I64(1)), _at(b, result, I64(0), I64))
    b.ret_void()
    return module


@dataclass(frozen=True, slots=True)
class TakeSlicesKernel:
    """`values[o, g, i] = x[o, first[g], i]` (raw bits of `width` bytes) for the `groups`
    slices of `GroupKernel`, and `counts_out[g] = counts[g]`.

    Args: [outer, groups, inner, x_ptr, so, sn, si, first_ptr, values_ptr, counts_ptr,
    counts_out_ptr]: `values` contiguous (outer, groups, inner); a null counts_out_ptr
    skips the counts."""

    width: int

    def __post_init__(self) -> None:
        if self.width not in (1, 2, 4, 8, 16):
            raise ValueError(f"unique: width must be 1, 2, 4, 8 or 16, got {self.width}")

    @property
    def n_slots(self) -> int:
        return 11


def build_take_slices(spec: TakeSlicesKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    outer, groups, inner = (args.int(k, nm) for k, nm in enumerate(("outer", "g", "inner")))
    x = args.ptr(3, "x")
    so, sn, si = (args.int(4 + k, nm) for k, nm in enumerate(("so", "sn", "si")))
    first, values, counts = args.ptr(7, "first"), args.ptr(8, "values"), args.ptr(9, "counts")
    counts_out = args.int(10, "counts_out")
    t = ir.IntType(8 * spec.width)
    with for_range(b, I64(0), outer, name="o") as o:
        with for_range(b, I64(0), groups, name="g") as g:
            src = b.add(b.mul(o, so), b.mul(_load(b, first, g, I64), sn))
            dst = b.mul(b.add(b.mul(o, groups), g), inner)
            with for_range(b, I64(0), inner, name="i") as i:
                v = _load(b, x, b.add(src, b.mul(i, si)), t)
                b.store(v, _at(b, values, b.add(dst, i), t))
    with b.if_then(b.icmp_signed("!=", counts_out, I64(0))):
        out = args.ptr(10, "counts_out_ptr")
        with for_range(b, I64(0), groups, name="c") as g:
            b.store(_load(b, counts, g, I64), _at(b, out, g, I64))
    b.ret_void()
    return module


# --------------------------------------------------------------------------------------
# one_hot: int64 rows with a one at each value
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OneHotKernel:
    """The least and greatest of `n` int64 values and, when every value lies in
    [0, classes) and an output is given, the one-hot rows: `out[i, x[i]] = 1`, zeros
    elsewhere.

    Args: [n, x_ptr, classes, out_ptr (0: only the range), minmax_ptr]: `x` contiguous,
    `out` contiguous (n, classes) int64; minmax = [least, greatest] (for n = 0: the
    int64 maximum and minimum). Nothing is written to `out` when a value is outside."""

    @property
    def n_slots(self) -> int:
        return 5


def build_one_hot(spec: OneHotKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    n, x, classes = args.int(0, "n"), args.ptr(1, "x"), args.int(2, "classes")
    out_int, minmax = args.int(3, "out_int"), args.ptr(4, "minmax")
    lo_slot = b.alloca(I64, name="lo")
    hi_slot = b.alloca(I64, name="hi")
    b.store(I64(2**63 - 1), lo_slot)
    b.store(I64(-(2**63)), hi_slot)
    with for_range(b, I64(0), n, name="i") as i:
        v = _load(b, x, i, I64)
        lo, hi = _get(b, lo_slot), _get(b, hi_slot)
        b.store(b.select(b.icmp_signed("<", v, lo), v, lo), lo_slot)
        b.store(b.select(b.icmp_signed(">", v, hi), v, hi), hi_slot)
    lo, hi = _get(b, lo_slot), _get(b, hi_slot)
    b.store(lo, _at(b, minmax, I64(0), I64))
    b.store(hi, _at(b, minmax, I64(1), I64))
    inside = b.and_(b.icmp_signed(">=", lo, I64(0)), b.icmp_signed("<", hi, classes))
    write = b.and_(b.icmp_signed("!=", out_int, I64(0)), inside)
    with b.if_then(write):
        out = args.ptr(3, "out")
        with for_range(b, I64(0), b.mul(n, classes), name="z") as k:
            b.store(I64(0), _at(b, out, k, I64))
        with for_range(b, I64(0), n, name="w") as i:
            v = _load(b, x, i, I64)
            b.store(I64(1), _at(b, out, b.add(b.mul(i, classes), v), I64))
    b.ret_void()
    return module
