"""Index launches on the GPU: gather, put, scatter_add, offset and check
(`schedule.index.IndexKernel`), and nonzero (`schedule.index.NonzeroKernel`).

The kernels compute what `codegen/gather.py` computes from the same argument blocks
(`schedule.index.slot_layout`): at every point `i` of the iteration space
`[lo, hi) x size_1 x ... x size_{r-1}` the offset

    off = sum_d i_d * xstride_d  +  sum_k wrap_k(index_k[i]) * dimstride_k

into `x`, then the mode's action at `off` with `data` walked like the output.

Mapping of an `IndexKernel` launch (every mode):

- **one point per thread, grid-stride.** The iteration space is flattened (row-major);
  thread `t` of block `c` takes points `c * ntid + t`, then every `nctaid * ntid`-th one
  (`grid_for`: 256 threads, up to 65536 blocks). It decomposes the flat point into the
  multi-index (32-bit division by constant sizes when the space fits), reads, wraps and
  checks every index, and acts. Consecutive threads take consecutive innermost points,
  so the index tensors and `data` are read/written in coalesced runs; `x` is addressed
  through the indices. A `hoist` launch (no index moves along the innermost dimension)
  runs the same way: neighbouring threads read the same index word (one transaction);
  `x_inner` / `data_inner` baked into the spec override the block's innermost strides,
  as on the CPU.
- **error record** (`err`, 32 bytes in the arena's "error" buffer, zero before the
  call): a point whose index is out of range acts on nothing; its thread first reads
  `err[0]` and, when it is still 0, claims the record with an atomic compare-and-swap of
  `err[0]` from 0 to 1; only the thread whose swap succeeds then stores `err[1] = the raw
  index` and `err[2] = k` (which index tensor). So the record always holds one bad index
  and its own `k` (never a mix of two threads' values), and the host reads it after the
  kernel completes. Which bad point wins is the first to swap: on the GPU any bad point,
  in the grid emulator the first in thread order (the CPU's first in iteration order
  whenever the launch fits one grid-stride lap, i.e. under 2^24 points). The host check
  only needs the flag; the message's value is any bad index.
- **put** (`x[off] = data[i]`, raw bits or cast): the points run in parallel, so with
  duplicate indices which write lands last is unspecified on the GPU (as in PyTorch's
  CUDA `index_put_` / `scatter`); the emulator writes in point order like the CPU.
- **scatter_add** (`x[off] += data[i]`): an atomic add per point: `atomicrmw fadd` for
  float32/float64, `atomicrmw add` for int32/int64, two component `fadd`s for complex,
  and for the 1- and 2-byte dtypes (bool, int8, uint8, int16, float16, bfloat16) a
  compare-and-swap loop on the aligned 32-bit word holding the element that applies the
  CPU's scalar add (float16/bfloat16 round per step; bool adds as `or`). The other bytes
  of that word are written back unchanged in the same swap (at most 3 bytes past a
  buffer's end, inside the allocation's alignment granule). Float sums differ from the
  CPU's only in the order of the adds.
- **width-16 raw moves** (complex128) are two 8-byte moves (buffers are 8-aligned).

A `NonzeroKernel` launch runs on ONE block of 1024 threads (the row-major order of the
coordinates is a global prefix sum):

- **count**: each thread counts the non-zero elements at flat positions `t, t + 1024,
  ...` into shared memory; after a barrier thread 0 adds the 1024 counts (in thread
  order) and stores the total.
- **fill**: the input is walked in chunks of `1024 * 8` elements in row-major order;
  thread `t` takes the 8 consecutive elements `[chunk + 8t, chunk + 8t + 8)`, counts its
  non-zero ones, a Hillis-Steele scan over the 1024 counts in shared memory (10 phases
  separated by barriers) gives each thread its first output row, and the thread writes
  the coordinates of its non-zero elements at the rows below `capacity`; the chunk's
  total moves the running base (uniform). Then rows `[total, capacity)` are zeroed.
  NaN counts as non-zero and -0.0 as zero, as on the CPU (`gather._truthy`).

Atomics are relaxed (monotonic) at device scope (`atom.relaxed.gpu` in the PTX).
`build` raises `program.UnsupportedOnGpu` for a spec of another family or an index mode
it does not know; every mode, index dtype, rank and element dtype of the CPU generator
has a GPU kernel.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ir import dtypes as dt
from ...schedule.index import IndexKernel, NonzeroKernel, slot_layout
from ...schedule.program import Launch
from ..gather import INDEX_TYPES, _store_row, _truthy
from ..loops import I1, I64, for_range
from ..scalar import LLVMScalar, memory_type
from .common import Block, Geometry, decompose, grid_for, UnsupportedOnGpu
from .kernel import GpuKernel, grid_stride

I8, I16, I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
NONZERO_THREADS = 1024  # one block: the prefix sum over the whole input
NONZERO_ITEMS = 8  # consecutive elements a thread takes per chunk


def _unsupported(msg: str) -> Exception:
    return UnsupportedOnGpu(msg)


def geometry(launch: Launch) -> Geometry:
    """An index launch: one point per thread, grid-stride (`grid_for`); nonzero: one block
    of `NONZERO_THREADS` threads."""
    spec = launch.spec
    if isinstance(spec, NonzeroKernel):
        return Geometry(1, NONZERO_THREADS)
    return grid_for(_total(launch.block, spec.rank))


def build(k: GpuKernel, launch: Launch) -> None:
    """Emit `launch`'s kernel into `k` (see the module docstring for the mapping)."""
    spec = launch.spec
    if isinstance(spec, NonzeroKernel):
        _build_nonzero(k, spec, launch.block)
    elif isinstance(spec, IndexKernel):
        _build_index(k, spec, launch.block)
    else:
        raise _unsupported(f"index family: no GPU kernel for {type(spec).__name__}")


# --------------------------------------------------------------------------------------
# gather / put / scatter_add / offset / check
# --------------------------------------------------------------------------------------


def _total(block: list, rank: int) -> int:
    n = max(0, int(block[1]) - int(block[0]))
    for d in range(1, rank):
        n *= int(block[1 + d])
    return n


def _build_index(k: GpuKernel, spec: IndexKernel, block: list[Any]) -> None:
    if spec.mode not in ("gather", "put", "scatter_add", "offset", "check"):
        raise _unsupported(f"index kernel: mode {spec.mode!r} has no GPU kernel")
    blk = Block(k, block)
    rank = spec.rank
    lay = slot_layout(rank)
    lo = blk.value(0)
    total = _total(block, rank)
    sizes = [max(0, blk.value(1) - lo)] + [blk.value(1 + d) for d in range(1, rank)]
    xs = [blk.value(lay["x"] + 1 + d) for d in range(rank)]
    ds = [blk.value(lay["data"] + 1 + d) for d in range(rank)]
    if spec.x_inner is not None:
        xs[-1] = spec.x_inner
    if spec.data_inner is not None:
        ds[-1] = spec.data_inner
    b = k.b
    err = blk.ptr(lay["err"])
    mode = spec.mode
    if mode == "offset":
        x: ir.Value = blk.int(lay["x"])  # the base linear index, an integer
    elif mode == "check":
        x = None
    else:
        x = blk.ptr(lay["x"])
    data = blk.ptr(lay["data"]) if mode not in ("check",) else None
    indices = []
    for j, d in enumerate(spec.index_dtypes):
        s = lay["index"] + j * lay["index_size"]
        indices.append(
            (
                blk.ptr(s),
                blk.value(s + 1),
                blk.value(s + 2),
                [blk.value(s + 3 + q) for q in range(rank)],
                INDEX_TYPES[d.name],
            )
        )
    scalar = LLVMScalar(b)
    word = None
    if mode == "scatter_add":  # a scratch slot for the CAS loop's element bits
        word = k._entry_alloca(I64, 2, "bits")
        word.type = ir.PointerType()  # (untyped: it holds i8, i16 or half values)

    def dot(index: list[ir.Value], strides: list[int]) -> ir.Value:
        off = I64(0)
        for i, st in zip(index, strides):
            if st:
                off = b.add(off, b.mul(i, I64(st)))
        return off

    def point(flat: ir.Value) -> None:
        index = decompose(b, flat, sizes, total)
        if lo:
            index[0] = b.add(index[0], I64(lo))
        off = dot(index, xs)
        doff = dot(index, ds)
        any_bad = I1(0)
        first_k, first_raw = I64(-1), I64(0)
        for j, (ptr, size, dimstride, istrides, etype) in enumerate(indices):
            raw = b.load(
                b.gep(ptr, [dot(index, istrides)], inbounds=True, source_etype=etype),
                typ=etype,
                name=f"raw{j}",
            )
            if etype != I64:
                raw = b.sext(raw, I64)
            wrapped = b.select(b.icmp_signed("<", raw, I64(0)), b.add(raw, I64(size)), raw)
            bad = b.icmp_unsigned(">=", wrapped, I64(size))  # catches < 0 too
            is_first = b.and_(bad, b.not_(any_bad))
            first_k = b.select(is_first, I64(j), first_k)
            first_raw = b.select(is_first, raw, first_raw)
            any_bad = b.or_(any_bad, bad)
            if dimstride:
                off = b.add(off, b.mul(wrapped, I64(dimstride)))
        with b.if_else(any_bad) as (bad_branch, ok_branch):
            with bad_branch:
                _record_error(k, err, first_raw, first_k)
            with ok_branch:
                _act(k, spec, scalar, x, data, off, doff, word)

    if total == 0:
        return  # (no point: nothing to read, write or check)
    with k.threads():
        grid_stride(k, I64(total), point)


def _relaxed(k: GpuKernel) -> str:
    """The ordering of the kernels' atomics: relaxed (monotonic), at device scope on the
    GPU (`atom.relaxed.gpu`: the other threads are all on this device; LLVM's default
    scope is the whole system), plain monotonic on the host."""
    return 'syncscope("device") monotonic' if k.mode == "ptx" else "monotonic"


def _record_error(k: GpuKernel, err: ir.Value, raw: ir.Value, which: ir.Value) -> None:
    """Claim the error record (CAS err[0]: 0 -> 1) and, if this thread won, store the raw
    index and which index tensor it came from."""
    b = k.b
    flag = b.gep(err, [I64(0)], inbounds=True, source_etype=I64)
    with b.if_then(b.icmp_signed("==", b.load(flag, typ=I64), I64(0))):
        pair = b.cmpxchg(flag, I64(0), I64(1), _relaxed(k), "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            b.store(raw, b.gep(err, [I64(1)], inbounds=True, source_etype=I64))
            b.store(which, b.gep(err, [I64(2)], inbounds=True, source_etype=I64))


def _act(
    k: GpuKernel,
    spec: IndexKernel,
    s: LLVMScalar,
    x: ir.Value,
    data: ir.Value,
    off: ir.Value,
    doff: ir.Value,
    word: ir.Value | None,
) -> None:
    b = k.b
    mode = spec.mode
    if mode == "check":
        return
    if mode == "offset":
        b.store(b.add(x, off), b.gep(data, [doff], inbounds=True, source_etype=I64))
        return
    if spec.dtype is None:  # raw moves: gather, put without a cast
        src, dst = ((x, off), (data, doff)) if mode == "gather" else ((data, doff), (x, off))
        if spec.width == 16:  # two 8-byte halves (8-aligned buffers)
            for half in (0, 1):
                at_s = b.add(b.mul(src[1], I64(2)), I64(half))
                at_d = b.add(b.mul(dst[1], I64(2)), I64(half))
                v = b.load(b.gep(src[0], [at_s], inbounds=True, source_etype=I64), typ=I64)
                b.store(v, b.gep(dst[0], [at_d], inbounds=True, source_etype=I64))
            return
        t = ir.IntType(8 * spec.width)
        v = b.load(b.gep(src[0], [src[1]], inbounds=True, source_etype=t), typ=t)
        b.store(v, b.gep(dst[0], [dst[1]], inbounds=True, source_etype=t))
        return
    d, sd = spec.dtype, spec.src_dtype
    value = s.cast(
        s.load(b.gep(data, [doff], inbounds=True, source_etype=memory_type(sd)), sd, name="v"), d
    )
    target = b.gep(x, [off], inbounds=True, source_etype=memory_type(d))
    if mode == "put":
        s.store(value, target)
        return
    _atomic_add(k, s, target, value, word)


def _atomic_add(k: GpuKernel, s: LLVMScalar, target: ir.Value, value: Any, word: ir.Value) -> None:
    """`*target += value` atomically (see the module docstring for each dtype)."""
    b = k.b
    d = value.dtype
    if d in (dt.float32, dt.float64):
        b.atomic_rmw("fadd", target, value.value, _relaxed(k))
        return
    if d in (dt.int32, dt.int64):
        b.atomic_rmw("add", target, value.value, _relaxed(k))
        return
    if d.is_complex:
        pair = memory_type(d)
        for half, v in enumerate(value.value):
            at = b.gep(target, [I64(0), I32(half)], inbounds=True, source_etype=pair)
            b.atomic_rmw("fadd", at, v, _relaxed(k))
        return
    # 1- and 2-byte dtypes: CAS on the aligned 32-bit word that holds the element
    mtype = memory_type(d)
    width = mtype.width if isinstance(mtype, ir.IntType) else 16
    elem = ir.IntType(width)
    addr = b.ptrtoint(target, I64)
    word_ptr = b.inttoptr(b.and_(addr, I64(~3)), target.type)
    shift = b.trunc(b.shl(b.and_(addr, I64(3)), I64(3)), I32)
    keep = b.xor(b.shl(I32((1 << width) - 1), shift), I32(-1))
    first = b.load(word_ptr, typ=I32, name="word0")
    fn = b.function
    pre = b.block
    loop = fn.append_basic_block("cas.loop")
    done = fn.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(I32, name="word")
    old.add_incoming(first, pre)
    b.store(b.trunc(b.lshr(old, shift), elem), word)
    current = s.load(word, d, name="cur")
    s.store(s.add(current, value), word)
    bits = b.load(word, typ=elem)
    new = b.or_(b.and_(old, keep), b.shl(b.zext(bits, I32), shift))
    pair = b.cmpxchg(word_ptr, old, new, _relaxed(k), "monotonic")
    old.add_incoming(b.extract_value(pair, 0), b.block)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)


# --------------------------------------------------------------------------------------
# nonzero
# --------------------------------------------------------------------------------------


def _build_nonzero(k: GpuKernel, spec: NonzeroKernel, block: list[Any]) -> None:
    blk = Block(k, block)
    r = spec.rank
    sizes = [blk.value(d) for d in range(r)]
    xs = [blk.value(r + 1 + d) for d in range(r)]
    x = blk.ptr(r)
    out = blk.ptr(2 * r + 1)
    n = 1
    for size in sizes:
        n *= size
    b = k.b
    s = LLVMScalar(b)
    mtype = memory_type(spec.dtype)

    def element(flat: ir.Value) -> tuple[ir.Value, list[ir.Value]]:
        """(x != 0 at row-major position `flat`, its coordinates)."""
        coords = decompose(b, flat, sizes, n) if r else []
        off = I64(0)
        for c, st in zip(coords, xs):
            if st:
                off = b.add(off, b.mul(c, I64(st)))
        return _truthy(s, b.gep(x, [off], inbounds=True, source_etype=mtype), spec.dtype), coords

    T = NONZERO_THREADS
    if spec.phase == "count":
        count = k.private(I64, "count")
        counts = k.shared(I64, T, "counts")
        with k.threads():
            count.set(I64(0))
            _strided(k, n, T, lambda p: count.set(b.add(count.get(), b.zext(element(p)[0], I64))))
            b.store(count.get(), b.gep(counts, [k.tid], inbounds=True, source_etype=I64))
        k.barrier()
        with k.single():  # thread 0 adds the 1024 counts (in thread order)
            total = k._entry_alloca(I64, 1, "total")
            b.store(I64(0), total)
            with for_range(b, I64(0), I64(T), name="sum") as t:
                c = b.load(b.gep(counts, [t], inbounds=True, source_etype=I64), typ=I64)
                b.store(b.add(b.load(total, typ=I64), c), total)
            b.store(b.load(total, typ=I64), b.gep(out, [I64(0)], inbounds=True, source_etype=I64))
        return

    cap = blk.value(2 * r + 2)
    items = NONZERO_ITEMS
    chunk = T * items
    counts = k.private(I64, "mine")
    scan = [k.shared(I64, T, "scan"), k.shared(I64, T, "scan")]
    base = k._entry_alloca(I64, 1, "base")
    b.store(I64(0), base)

    def run(lo: ir.Value, body) -> None:
        """body(truthy, coords) for each of this thread's items of the chunk at `lo`."""
        first = b.add(lo, b.mul(k.tid, I64(items)))
        stop = b.select(
            b.icmp_signed("<", b.add(first, I64(items)), I64(n)), b.add(first, I64(items)), I64(n)
        )
        with for_range(b, first, stop, name="item") as p:
            hit, coords = element(p)
            body(hit, coords)

    steps = []
    step = 1
    while step < T:
        steps.append(step)
        step *= 2
    with for_range(b, I64(0), I64(-(-n // chunk)), name="chunk") as c:
        lo = b.mul(c, I64(chunk))
        with k.threads():
            counts.set(I64(0))
            run(lo, lambda hit, coords: counts.set(b.add(counts.get(), b.zext(hit, I64))))
            b.store(counts.get(), b.gep(scan[0], [k.tid], inbounds=True, source_etype=I64))
        k.barrier()
        src = 0
        for st in steps:  # inclusive Hillis-Steele scan, ping-pong buffers
            with k.threads():
                here = b.load(b.gep(scan[src], [k.tid], inbounds=True, source_etype=I64), typ=I64)
                has = b.icmp_unsigned(">=", k.tid, I64(st))
                at = b.select(has, b.sub(k.tid, I64(st)), I64(0))
                left = b.load(b.gep(scan[src], [at], inbounds=True, source_etype=I64), typ=I64)
                b.store(
                    b.add(here, b.select(has, left, I64(0))),
                    b.gep(scan[1 - src], [k.tid], inbounds=True, source_etype=I64),
                )
            k.barrier()
            src = 1 - src
        start = b.load(base, typ=I64)
        with k.threads():
            incl = b.load(b.gep(scan[src], [k.tid], inbounds=True, source_etype=I64), typ=I64)
            row = k._entry_alloca(I64, 1, "row")
            b.store(b.add(start, b.sub(incl, counts.get())), row)

            def write(hit: ir.Value, coords: list[ir.Value]) -> None:
                with b.if_then(hit):
                    at = b.load(row, typ=I64)
                    with b.if_then(b.icmp_signed("<", at, I64(cap))):
                        _store_row(b, out, at, coords, r)
                    b.store(b.add(at, I64(1)), row)

            run(lo, write)
        last = b.load(b.gep(scan[src], [I64(T - 1)], inbounds=True, source_etype=I64), typ=I64)
        b.store(b.add(start, last), base)
        k.barrier()  # everyone has read the scan before the next chunk
    total = b.load(base, typ=I64)
    with k.threads():
        _strided(k, cap, T, lambda q: _pad(b, out, q, total, r))


def _pad(b: ir.IRBuilder, out: ir.Value, q: ir.Value, total: ir.Value, r: int) -> None:
    with b.if_then(b.icmp_signed(">=", q, total)):
        _store_row(b, out, q, [I64(0)] * r, r)


def _strided(k: GpuKernel, n: int, step: int, body) -> None:
    """Inside a thread phase of a one-block launch: body(i) for i = tid, tid + step, ... < n."""
    b = k.b
    fn = b.function
    pre = b.block
    header = fn.append_basic_block("st.header")
    inner = fn.append_basic_block("st.body")
    done = fn.append_basic_block("st.exit")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name="st")
    i.add_incoming(k.tid, pre)
    b.cbranch(b.icmp_signed("<", i, I64(n)), inner, done)
    b.position_at_end(inner)
    body(i)
    i.add_incoming(b.add(i, I64(step), flags=("nsw",)), b.block)
    b.branch(header)
    b.position_at_end(done)
