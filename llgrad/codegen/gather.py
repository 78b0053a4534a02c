"""Index kernels: gather, scatter-add, put and nonzero, generic over sizes and strides.

One loop nest serves every indexing mode. It walks an *iteration space* (the result of the
indexing expression, collapsed by the caller) and, at each point, computes an element
offset into the indexed tensor `x`:

    off = sum_d i_d * xstride_d  +  sum_k wrap_k(index_k[i]) * dimstride_k

`xstride` walks the dimensions of `x` that basic indexing kept (zero on the dimensions the
index tensors span); each index tensor `k` is read through its own strides over the
iteration space (zero where it is broadcast) and addresses one dimension of `x` of size
`size_k` with stride `dimstride_k`. This is the multi-index form of a gather: the linear
primitive `gather(x, index)` of the registry is the case of one index over a flat `x`.

Every index is wrapped (`i < 0 -> i + size`) and checked against its dimension *inside*
the kernel. A bad index is never dereferenced: the kernel records the first one it meets
(`err = [1, value, k]`) and skips that element; the caller turns the record into an
`IndexError`. So no index value, however wrong, can read or write outside a buffer.

Modes (what happens at `off`, with `data` walked like the output):
  gather       data[i] = x[off]              raw bits of `width` bytes (any dtype)
  put          x[off] = data[i]              raw bits, or cast from `src_dtype` to `dtype`
  scatter_add  x[off] += data[i]             `dtype` arithmetic (float16 rounds per step)
  offset       data[i] = base + off          int64 (the linear index of an expression)
  check        nothing                       only validates the indices

Argument block (int64 slots):
  [lo, hi, size_1 .. size_{r-1}, err_ptr,
   x_ptr (offset mode: base as an integer), xstride_0 .. xstride_{r-1},
   data_ptr, datastride_0 .. datastride_{r-1},
   per index k: (index_ptr, size_k, dimstride_k, istride_0 .. istride_{r-1})]
The outer loop runs over [lo, hi), so `gather`/`offset`/`check` can be split across
threads; scatter modes run on one thread so duplicate indices apply in order.

When no index tensor moves along the innermost dimension (row gathers like `x[idx]`),
the kernel reads and checks the indices once per row and copies the row in a plain loop
(`hoist`); innermost strides of 0 or 1 can be baked in so that loop vectorizes.

Nonzero is two kernels over a strided input (`count`, then `fill`, which writes the
coordinates of at most `capacity` non-zero elements and zero-pads the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..schedule.index import IndexKernel, NonzeroKernel, slot_layout
from .loops import I1, I64, for_range, new_kernel
from .scalar import LLVMScalar, memory_type

INDEX_TYPES = {"int32": ir.IntType(32), "int64": I64}


@dataclass(slots=True)
class _Index:
    ptr: ir.Value
    size: ir.Value
    dimstride: ir.Value
    strides: list[ir.Value]
    etype: ir.Type


@dataclass(slots=True)
class _Frame:
    """What the loop body needs: the kernel's pointers and its error record."""

    spec: IndexKernel
    b: ir.IRBuilder
    err: ir.Value
    x: ir.Value
    data: ir.Value
    indices: list[_Index]


def build_index(spec: IndexKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    rank = spec.rank
    lay = slot_layout(rank)
    lo, hi = args.int(0, "lo"), args.int(1, "hi")
    sizes = [None] + [args.int(1 + d, f"size{d}") for d in range(1, rank)]
    err = args.ptr(lay["err"], "err")
    offset_mode = spec.mode == "offset"
    x_ptr = args.int(lay["x"], "base") if offset_mode else args.ptr(lay["x"], "x")
    xs = [args.int(lay["x"] + 1 + d, f"xs{d}") for d in range(rank)]
    data_ptr = args.ptr(lay["data"], "data")
    ds = [args.int(lay["data"] + 1 + d, f"ds{d}") for d in range(rank)]
    if spec.x_inner is not None:
        xs[-1] = I64(spec.x_inner)
    if spec.data_inner is not None:
        ds[-1] = I64(spec.data_inner)
    indices = []
    for k, d in enumerate(spec.index_dtypes):
        s = lay["index"] + k * lay["index_size"]
        indices.append(
            _Index(
                args.ptr(s, f"idx{k}"),
                args.int(s + 1, f"n{k}"),
                args.int(s + 2, f"st{k}"),
                [args.int(s + 3 + j, f"is{k}_{j}") for j in range(rank)],
                INDEX_TYPES[d.name],
            )
        )
    strides = [xs, ds] + [ix.strides for ix in indices]
    frame = _Frame(spec, b, err, x_ptr, data_ptr, indices)

    def nest(depth: int, offsets: list[ir.Value]) -> None:
        start = lo if depth == 0 else I64(0)
        stop = hi if depth == 0 else sizes[depth]
        if depth + 1 == rank and spec.hoist:
            _hoisted_row(frame, offsets, start, stop, xs[depth], ds[depth])
            return
        with for_range(b, start, stop, name=f"i{depth}") as i:
            here = [b.add(o, b.mul(i, st[depth])) for o, st in zip(offsets, strides)]
            if depth + 1 < rank:
                nest(depth + 1, here)
            else:
                _element(frame, here)

    nest(0, [I64(0)] * len(strides))
    b.ret_void()
    return module


def _wrap_indices(
    f: _Frame, x_off: ir.Value, index_offs: list[ir.Value]
) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """Read, wrap and check every index: (offset into x, any bad, first bad k, its value)."""
    b = f.b
    off = x_off
    any_bad = I1(0)
    first_k, first_raw = I64(-1), I64(0)
    for k, (ix, at) in enumerate(zip(f.indices, index_offs)):
        raw = b.load(
            b.gep(ix.ptr, [at], inbounds=True, source_etype=ix.etype), typ=ix.etype, name=f"raw{k}"
        )
        if ix.etype != I64:
            raw = b.sext(raw, I64)
        wrapped = b.select(b.icmp_signed("<", raw, I64(0)), b.add(raw, ix.size), raw, name=f"w{k}")
        bad = b.icmp_unsigned(">=", wrapped, ix.size, name=f"bad{k}")  # catches < 0 too
        is_first = b.and_(bad, b.not_(any_bad))
        first_k = b.select(is_first, I64(k), first_k)
        first_raw = b.select(is_first, raw, first_raw)
        any_bad = b.or_(any_bad, bad)
        off = b.add(off, b.mul(wrapped, ix.dimstride), name=f"off{k}")
    return off, any_bad, first_k, first_raw


def _guarded(f: _Frame, x_off: ir.Value, index_offs: list[ir.Value], body) -> None:
    """Check the indices; on a bad one record it and skip `body(offset)`."""
    b = f.b
    off, any_bad, first_k, first_raw = _wrap_indices(f, x_off, index_offs)
    fn = b.function
    bad_block = fn.append_basic_block("bad")
    ok_block = fn.append_basic_block("ok")
    cont = fn.append_basic_block("cont")
    b.cbranch(any_bad, bad_block, ok_block)
    b.position_at_end(bad_block)
    _record_error(b, f.err, first_raw, first_k, cont)
    b.position_at_end(ok_block)
    body(off)
    b.branch(cont)
    b.position_at_end(cont)


def _element(f: _Frame, here: list[ir.Value]) -> None:
    """One point of the iteration space: wrap and check the indices, then act."""
    _guarded(f, here[0], here[2:], lambda off: _act(f.spec, f.b, f.x, f.data, off, here[1]))


def _hoisted_row(
    f: _Frame, offsets: list[ir.Value], start: ir.Value, stop: ir.Value, xs: ir.Value, ds: ir.Value
) -> None:
    """The innermost loop when no index moves along it: check once, then copy a row."""
    b = f.b

    def row(off: ir.Value) -> None:
        with for_range(b, start, stop, name="inner") as i:
            _act(f.spec, b, f.x, f.data, b.add(off, b.mul(i, xs)), b.add(offsets[1], b.mul(i, ds)))

    _guarded(f, offsets[0], offsets[2:], row)


def _record_error(
    b: ir.IRBuilder, err: ir.Value, raw: ir.Value, k: ir.Value, cont: ir.Block
) -> None:
    """`if (!err[0]) { err[0] = 1; err[1] = raw; err[2] = k; }` then go on."""
    flag = b.load(b.gep(err, [I64(0)], inbounds=True, source_etype=I64), typ=I64)
    with b.if_then(b.icmp_signed("==", flag, I64(0))):
        for j, v in enumerate((I64(1), raw, k)):
            b.store(v, b.gep(err, [I64(j)], inbounds=True, source_etype=I64))
    b.branch(cont)


def _act(
    spec: IndexKernel,
    b: ir.IRBuilder,
    x_ptr: ir.Value,
    data_ptr: ir.Value,
    off: ir.Value,
    doff: ir.Value,
) -> None:
    mode = spec.mode
    if mode == "check":
        return
    if mode == "offset":
        b.store(b.add(x_ptr, off), b.gep(data_ptr, [doff], inbounds=True, source_etype=I64))
        return
    if spec.dtype is None:  # raw moves: gather, put without a cast
        t = ir.IntType(8 * spec.width)
        src, dst = (
            ((x_ptr, off), (data_ptr, doff))
            if mode == "gather"
            else ((data_ptr, doff), (x_ptr, off))
        )
        v = b.load(b.gep(src[0], [src[1]], inbounds=True, source_etype=t), typ=t)
        b.store(v, b.gep(dst[0], [dst[1]], inbounds=True, source_etype=t))
        return
    s = LLVMScalar(b)
    d, sd = spec.dtype, spec.src_dtype
    value = s.cast(
        s.load(b.gep(data_ptr, [doff], inbounds=True, source_etype=memory_type(sd)), sd, name="v"),
        d,
    )
    target = b.gep(x_ptr, [off], inbounds=True, source_etype=memory_type(d))
    if mode == "scatter_add":
        value = s.add(s.load(target, d, name="cur"), value)
    s.store(value, target)


# --------------------------------------------------------------------------------------
# nonzero
# --------------------------------------------------------------------------------------


def _truthy(s: LLVMScalar, ptr: ir.Value, d: DType) -> ir.Value:
    """x != 0 as i1; NaN counts as non-zero and -0.0 as zero, as in NumPy."""
    x = s.load(s.b.gep(ptr, [I64(0)], inbounds=True, source_etype=memory_type(d)), d)
    if d is dt.bool_:
        return x.value
    return s.cmp("ne", x, s.const(0, d)).value


def build_nonzero(spec: NonzeroKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    r = spec.rank
    sizes = [args.int(d, f"size{d}") for d in range(r)]
    x = args.ptr(r, "x")
    xs = [args.int(r + 1 + d, f"xs{d}") for d in range(r)]
    out = args.ptr(2 * r + 1, "out")
    fill = spec.phase == "fill"
    cap = args.int(2 * r + 2, "capacity") if fill else None
    count = b.alloca(I64, name="count")
    b.store(I64(0), count)
    s = LLVMScalar(b)

    def visit(coords: list[ir.Value], off: ir.Value) -> None:
        p = b.gep(x, [off], inbounds=True, source_etype=memory_type(spec.dtype))
        with b.if_then(_truthy(s, p, spec.dtype)):
            k = b.load(count, typ=I64, name="k")
            if fill:
                with b.if_then(b.icmp_signed("<", k, cap)):
                    _store_row(b, out, k, coords, r)
            b.store(b.add(k, I64(1)), count)

    def nest(depth: int, coords: list[ir.Value], off: ir.Value) -> None:
        if depth == r:
            visit(coords, off)
            return
        with for_range(b, I64(0), sizes[depth], name=f"i{depth}") as i:
            nest(depth + 1, coords + [i], b.add(off, b.mul(i, xs[depth])))

    nest(0, [], I64(0))
    total = b.load(count, typ=I64, name="total")
    if fill:
        # zero-pad rows [total, capacity): a fixed-size nonzero(size=...) result
        with for_range(b, total, cap, name="pad") as k:
            _store_row(b, out, k, [I64(0)] * r, r)
    else:
        b.store(total, b.gep(out, [I64(0)], inbounds=True, source_etype=I64))
    b.ret_void()
    return module


def _store_row(b: ir.IRBuilder, out: ir.Value, k: ir.Value, values: list[ir.Value], r: int) -> None:
    row = b.mul(k, I64(r))
    for d, v in enumerate(values):
        b.store(v, b.gep(out, [b.add(row, I64(d))], inbounds=True, source_etype=I64))
