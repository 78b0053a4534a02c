"""llgrad's own float32/float64 gemm, generated for the host's vector width.

`llgrad_sgemm` and `llgrad_dgemm` have BLAS's Fortran signature and meaning (every argument
by pointer, 32-bit integers, column-major matrices):

    C := alpha * op(A) @ op(B) + beta * C,  op(A): m x k, op(B): k x n, C: m x n

so a matmul kernel calls them exactly as it calls a library's `sgemm` (the address arrives
in its argument block). They are single-threaded: llgrad splits a large product into
panels on its own thread pool.

`llgrad_sgemm_ex` / `llgrad_dgemm_ex` take two more arguments, by value: a function
`tile(ctx, m0, n0, rows, cols)` and its `ctx`. Each column of tiles of C (up to MC x NR),
right after its last k slab is stored (while it is in L1), is handed to `tile` in BLAS's
indices: that is how a matmul kernel runs its elementwise epilogue (bias, activation, an
optimizer's update) tile by tile instead of in a second pass over C. A null `tile` is the
plain gemm.

The loop nest is the one every fast gemm uses (Goto's; BLIS names the loops):

    for jc in n, step NC:                 B's block of NC columns
      for pc in k, step kc:               one slab of the k dimension (kc <= KC, balanced)
        pack op(B)[pc:, jc:] into NR-column panels, k-major      (kc x NC, in L2/L3)
        for ic in m, step MC:
          pack op(A)[ic:, pc:] into MR-row panels, k-major       (MC x kc, in L2)
          for jr in NC, step NR:          B's micro-panel (kc x NR) stays in L1 ...
            for ir in MC, step MR:        ... while A's micro-panels stream past it
              micro-kernel: the MR x NR tile of C over kc

The micro-kernel keeps its MR x NR tile in registers: MR is a multiple of the vector
width (C's columns are contiguous in column-major memory), and every step of k loads
MR / V vectors of A's panel, broadcasts NR values of B's panel and issues
(MR / V) * NR fused multiply-adds. On AVX-512 (32 registers) the tile is 2 x 12 vectors:
24 accumulators, 2 loads and 12 broadcasts (folded into the FMAs) per step. The first
k slab writes `alpha * acc + beta * C` (C is not read when beta is 0, as BLAS does), later
ones add `alpha * acc`. Edge tiles store through a lane mask and skip missing columns;
packing pads panels with zeros, so the micro-kernel never branches inside its loop.

The packing buffers come from `malloc`, sized to the call; if it fails, the same loops run
over one micro-panel of each operand on the stack.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .loops import I1, I64, PTR, Callee, accumulate, for_range
from .worker import HAND_VECTORIZED

I8, I32 = ir.IntType(8), ir.IntType(32)
VOID = ir.VoidType()
# void gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc): all by pointer
FORTRAN_GEMM = ir.FunctionType(VOID, [PTR] * 13)
# gemm_ex: the same thirteen, then `tile` and `ctx` (see `TILE`), by value
GEMM_EX = ir.FunctionType(VOID, [PTR] * 15)
# void tile(ctx, m0, n0, rows, cols): C[m0:m0+rows, n0:n0+cols] (column-major, BLAS's
# indices) is final; called once per column of tiles right after it is stored
TILE = ir.FunctionType(VOID, [PTR, I64, I64, I64, I64])
SMALL_KC = 64  # k slab of the fallback (packing buffers on the stack)


@dataclass(frozen=True)
class Blocking:
    """Register tile and cache blocks of one dtype at one vector width."""

    element: ir.Type  # float or double
    size: int  # bytes per element
    lanes: int  # V: elements per vector register
    mr_vectors: int  # MR = mr_vectors * V
    nr: int
    kc: int  # k slab (L1: kc * NR elements of B's micro-panel)
    mc: int  # rows of A's packed block (L2)
    nc: int  # columns of B's packed block (L2/L3)

    @property
    def mr(self) -> int:
        return self.mr_vectors * self.lanes


def blockings(vector_bits: int) -> dict[str, Blocking]:
    """The blocking of `llgrad_sgemm` and `llgrad_dgemm` for `vector_bits`-bit registers.

    512 bits (32 registers): a 2 x 12 tile of vectors (24 accumulators). 256 bits (16
    registers): 2 x 6 (12 accumulators), as AVX2 gemms use.
    """
    nr = 12 if vector_bits >= 512 else 6
    out = {}
    for name, element, size in (("s", ir.FloatType(), 4), ("d", ir.DoubleType(), 8)):
        lanes = vector_bits // (8 * size)
        mr = 2 * lanes
        kc = 256
        out[name] = Blocking(
            element,
            size,
            lanes,
            2,
            nr,
            kc,
            mc=max(mr, (384 * 1024 // (kc * size)) // mr * mr),
            nc=max(nr, (1024 * 1024 // (kc * size)) // nr * nr),
        )
    return out


def _ceil_div(b: ir.IRBuilder, x: ir.Value, d: int | ir.Value) -> ir.Value:
    d = I64(d) if isinstance(d, int) else d
    return b.sdiv(b.add(x, b.sub(d, I64(1))), d)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


class _Gemm:
    """Builds one dtype's gemm and its helpers into a module."""

    def __init__(self, module: ir.Module, prefix: str, blk: Blocking):
        self.m, self.p, self.k = module, prefix, blk
        self.vec = ir.VectorType(blk.element, blk.lanes)
        self.fma = self._declare(f"llvm.fma.v{blk.lanes}{self._suffix()}", self.vec, [self.vec] * 3)
        mask = ir.VectorType(I1, blk.lanes)
        self.masked_store = self._declare(
            f"llvm.masked.store.v{blk.lanes}{self._suffix()}.p0", VOID, [self.vec, PTR, I32, mask]
        )
        self.masked_load = self._declare(
            f"llvm.masked.load.v{blk.lanes}{self._suffix()}.p0",
            self.vec,
            [PTR, I32, mask, self.vec],
        )
        self.malloc = self._declare("malloc", PTR, [I64])
        self.free = self._declare("free", VOID, [PTR])

    def _suffix(self) -> str:
        return "f32" if self.k.size == 4 else "f64"

    def _declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.m.globals.get(name)
        if fn is None:
            fn = ir.Function(self.m, ir.FunctionType(ret, args), name)
        return fn

    def _zero(self) -> ir.Constant:
        return ir.Constant(self.k.element, 0.0)

    def _at(self, b: ir.IRBuilder, base: ir.Value, index: ir.Value) -> ir.Value:
        return b.gep(base, [index], inbounds=True, source_etype=self.k.element)

    def _splat(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """`x` in every lane of a V-lane vector of its type."""
        t = ir.VectorType(x.type, self.k.lanes)
        one = b.insert_element(ir.Constant(t, ir.Undefined), x, I32(0))
        return b.shuffle_vector(
            one, ir.Constant(t, ir.Undefined), ir.Constant(ir.VectorType(I32, self.k.lanes), None)
        )

    def _internal(self, name: str, args: list[ir.Type]) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.m, ir.FunctionType(VOID, args), f"{self.p}_{name}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    # -- micro-kernel -------------------------------------------------------------------
    def micro_kernel(self) -> ir.Function:
        """`micro(kc, ap, bp, c, rs, ldc, rows, cols, alpha, beta, first)`: the MR x NR
        tile of C at `c` (`rows` x `cols` of it valid; element (r, j) at `c[r * rs + j *
        ldc]`) gets `ap` (MR x kc) @ `bp` (kc x NR). `rs` is 1 but for a product computed
        transposed (see `entry`); then the tile is stored one element at a time."""
        blk, vec = self.k, self.vec
        fn, b = self._internal(
            "micro", [I64, PTR, PTR, PTR, I64, I64, I64, I64, blk.element, blk.element, I1]
        )
        kc, ap, bp, c, rs, ldc, rows, cols, alpha, beta, first = fn.args
        for arg in (ap, bp, c):
            arg.add_attribute("noalias")
        zero = ir.Constant(vec, [0.0] * blk.lanes)
        n_acc = blk.mr_vectors * blk.nr
        with accumulate(b, I64(0), kc, [zero] * n_acc, name="k") as (p, acc, out):
            a_row = b.mul(p, I64(blk.mr))
            a = [
                b.load(self._at(b, ap, b.add(a_row, I64(v * blk.lanes))), typ=vec)
                for v in range(blk.mr_vectors)
            ]
            for v in a:
                v.align = blk.size * blk.lanes
            b_row = b.mul(p, I64(blk.nr))
            new = [None] * n_acc
            for j in range(blk.nr):
                x = self._splat(b, b.load(self._at(b, bp, b.add(b_row, I64(j))), typ=blk.element))
                for v in range(blk.mr_vectors):
                    q = j * blk.mr_vectors + v
                    new[q] = b.call(self.fma, [a[v], x, acc[q]])
            out.extend(new)
        # the tile leaves registers through a stack copy, so one loop over its columns
        # (not NR unrolled copies) updates C
        tile = b.alloca(vec, size=I64(n_acc), name="tile")
        tile.align = blk.size * blk.lanes
        for q, value in enumerate(out):
            b.store(value, b.gep(tile, [I64(q)], inbounds=True, source_etype=vec)).align = (
                blk.size * blk.lanes
            )
        masks = [
            self._lanes_below(b, b.sub(rows, I64(v * blk.lanes))) for v in range(blk.mr_vectors)
        ]
        # beta is 0 on the first slab of a plain product: C is then written, never read;
        # later slabs add to it
        read_c = b.or_(b.not_(first), b.fcmp_ordered("!=", beta, self._zero()))
        beta = b.select(first, beta, ir.Constant(blk.element, 1.0))
        with b.if_else(b.icmp_signed("==", rs, I64(1))) as (columns, elements):
            with columns:
                va, vb = self._splat(b, alpha), self._splat(b, beta)
                with b.if_else(b.icmp_signed("==", rows, I64(blk.mr))) as (whole, part):
                    with whole:
                        self._store_columns(b, tile, c, ldc, cols, None, va, vb, read_c)
                    with part:
                        self._store_columns(b, tile, c, ldc, cols, masks, va, vb, read_c)
            with elements:
                self._store_elements(b, tile, c, rs, ldc, rows, cols, alpha, beta, read_c)
        b.ret_void()
        return fn

    def _store_columns(
        self,
        b: ir.IRBuilder,
        tile: ir.Value,
        c: ir.Value,
        ldc: ir.Value,
        cols: ir.Value,
        masks: list[ir.Value] | None,
        va: ir.Value,
        vb: ir.Value,
        read_c: ir.Value,
    ) -> None:
        """The tile into C's columns, a masked vector at a time (`masks` None: every row
        of the tile is real, and plain vector loads and stores serve: masked ones are
        slow on some CPUs)."""
        blk, vec = self.k, self.vec
        zero = ir.Constant(vec, [0.0] * blk.lanes)
        with b.if_else(read_c) as (then, otherwise):
            for update in (True, False):
                with then if update else otherwise:
                    with for_range(b, I64(0), cols, name="update" if update else "store") as j:
                        col = self._at(b, c, b.mul(j, ldc))
                        for v in range(blk.mr_vectors):
                            slot = b.gep(
                                tile,
                                [b.add(b.mul(j, I64(blk.mr_vectors)), I64(v))],
                                inbounds=True,
                                source_etype=vec,
                            )
                            value = b.fmul(b.load(slot, typ=vec), va)
                            ptr = self._at(b, col, I64(v * blk.lanes))
                            if update:
                                if masks is None:
                                    old = b.load(ptr, typ=vec)
                                    old.align = blk.size
                                else:
                                    old = b.call(
                                        self.masked_load, [ptr, I32(blk.size), masks[v], zero]
                                    )
                                value = b.call(self.fma, [old, vb, value])
                            if masks is None:
                                b.store(value, ptr).align = blk.size
                            else:
                                b.call(self.masked_store, [value, ptr, I32(blk.size), masks[v]])

    def _store_elements(
        self,
        b: ir.IRBuilder,
        tile: ir.Value,
        c: ir.Value,
        rs: ir.Value,
        ldc: ir.Value,
        rows: ir.Value,
        cols: ir.Value,
        alpha: ir.Value,
        beta: ir.Value,
        read_c: ir.Value,
    ) -> None:
        """The tile into C one element at a time (C's rows are not contiguous)."""
        blk = self.k
        with for_range(b, I64(0), cols, name="sj") as j:
            with for_range(b, I64(0), rows, name="sr") as r:
                slot = self._at(b, tile, b.add(b.mul(j, I64(blk.mr)), r))
                value = b.fmul(b.load(slot, typ=blk.element), alpha)
                ptr = self._at(b, c, b.add(b.mul(r, rs), b.mul(j, ldc)))
                with b.if_then(read_c):
                    old = b.load(ptr, typ=blk.element)
                    b.store(b.fadd(value, b.fmul(old, beta)), ptr)
                with b.if_then(b.not_(read_c)):
                    b.store(value, ptr)

    # -- packing ------------------------------------------------------------------------
    def _lanes_below(self, b: ir.IRBuilder, count: ir.Value) -> ir.Value:
        """The mask of lanes `< count`."""
        lane = ir.Constant(ir.VectorType(I64, self.k.lanes), list(range(self.k.lanes)))
        return b.icmp_signed("<", lane, self._splat(b, count))

    def _transpose(self, b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
        """The V x V transpose of `rows` (V vectors): log2(V) stages of two-source
        shuffles, each swapping the off-diagonal h x h blocks of every 2h x 2h block."""
        lanes = self.k.lanes
        rows = list(rows)
        h = lanes // 2
        while h >= 1:
            first = [
                x
                for c in range(0, lanes, 2 * h)
                for x in [c + t for t in range(h)] + [lanes + c + t for t in range(h)]
            ]
            second = [
                x
                for c in range(0, lanes, 2 * h)
                for x in [c + h + t for t in range(h)] + [lanes + c + h + t for t in range(h)]
            ]
            for i in range(lanes):
                if i & h:
                    continue
                j = i + h
                x, y = rows[i], rows[j]
                rows[i] = b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, lanes), first))
                rows[j] = b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, lanes), second))
            h //= 2
        return rows

    def transpose_block(self) -> ir.Function:
        """`transpose_block(src, ld, dst, panel, part, width)`: V rows of V elements
        (row i at `src + i * ld`, the first `part` real, the rest zeros) transposed into
        V rows of a panel (`dst + t * panel`), `width` lanes of each stored."""
        lanes, size = self.k.lanes, self.k.size
        fn, b = self._internal("transpose_block", [PTR, I64, PTR, I64, I64, I64])
        src, ld, dst, panel, part, width = fn.args
        zero = ir.Constant(self.vec, [0.0] * lanes)
        rows = []
        for i in range(lanes):
            real = b.icmp_signed("<", I64(i), part)
            # a padding row reads row 0 (valid memory) and is replaced by zeros
            ptr = self._at(b, src, b.mul(b.select(real, I64(i), I64(0)), ld))
            v = b.load(ptr, typ=self.vec)
            v.align = size
            rows.append(b.select(real, v, zero))
        mask = self._lanes_below(b, width)
        cols = self._transpose(b, rows)
        # Masked stores are slow on some CPUs (microcoded on AMD's), so a row is stored
        # whole where that cannot clobber: always when `width` is V; when it is the whole
        # panel (an NR panel narrower than V), a row's extra lanes fall on the next row's
        # first elements, which the next store then writes (the last row stays masked).
        full = b.icmp_signed("==", width, I64(lanes))
        spill = b.and_(
            b.icmp_signed("==", width, panel), b.icmp_signed(">=", b.mul(panel, I64(2)), I64(lanes))
        )
        with b.if_else(b.or_(full, spill)) as (plain, masked):
            with plain:
                for t, v in enumerate(cols):
                    ptr = self._at(b, dst, b.mul(I64(t), panel))
                    if t == lanes - 1:
                        with b.if_else(full) as (whole, part_):
                            with whole:
                                b.store(v, ptr).align = size
                            with part_:
                                b.call(self.masked_store, [v, ptr, I32(size), mask])
                    else:
                        b.store(v, ptr).align = size
            with masked:
                for t, v in enumerate(cols):
                    b.call(
                        self.masked_store,
                        [v, self._at(b, dst, b.mul(I64(t), panel)), I32(size), mask],
                    )
        b.ret_void()
        return fn

    def pack(self) -> ir.Function:
        """`pack(src, contiguous, ld, rows, kc, dst, panel)`: `rows` x `kc` of a matrix
        into panels of `panel` rows, k-major (`dst[q][p][r]`), zero-padded to whole
        panels.

        Element (r, p) is `src[r + p * ld]` when `contiguous` (rows are the unit-stride
        dimension: a panel's step of k is a masked vector copy per V rows), else
        `src[p + r * ld]`: a transpose, V x V blocks at a time in registers
        (`transpose_block`), the last `kc % V` steps one element at a time.
        """
        blk = self.k
        lanes, size = blk.lanes, blk.size
        transpose = self.transpose_block()
        fn, b = self._internal("pack", [PTR, I1, I64, I64, I64, PTR, I64])
        src, contiguous, ld, rows, kc, dst, panel = fn.args
        src.add_attribute("noalias")
        dst.add_attribute("noalias")
        zero = self._zero()
        zeros = ir.Constant(self.vec, [0.0] * lanes)
        n_chunks = _ceil_div(b, panel, lanes)
        with for_range(b, I64(0), _ceil_div(b, rows, panel), name="q") as q:
            r0 = b.mul(q, panel)
            out = self._at(b, dst, b.mul(r0, kc))
            valid = _min(b, b.sub(rows, r0), panel)
            with for_range(b, I64(0), n_chunks, name="chunk") as chunk:
                c0 = b.mul(chunk, I64(lanes))
                # rows c0.. of the panel: `part` real ones, `width` stored
                left = b.sub(valid, c0)
                part = b.select(b.icmp_signed("<", left, I64(0)), I64(0), _min(b, left, I64(lanes)))
                width = _min(b, b.sub(panel, c0), I64(lanes))
                with b.if_else(contiguous) as (along_r, along_p):
                    with along_r:
                        load_mask = self._lanes_below(b, part)
                        store_mask = self._lanes_below(b, width)
                        whole = b.and_(
                            b.icmp_signed("==", part, I64(lanes)),
                            b.icmp_signed("==", width, I64(lanes)),
                        )
                        with b.if_else(whole) as (plain, masked):
                            for is_plain, arm in ((True, plain), (False, masked)):
                                with arm:
                                    with for_range(b, I64(0), kc, name="p") as p:
                                        s = self._at(b, src, b.add(b.add(r0, c0), b.mul(p, ld)))
                                        d = self._at(b, out, b.add(b.mul(p, panel), c0))
                                        if is_plain:
                                            v = b.load(s, typ=self.vec)
                                            v.align = size
                                            b.store(v, d).align = size
                                        else:
                                            v = b.call(
                                                self.masked_load, [s, I32(size), load_mask, zeros]
                                            )
                                            b.call(self.masked_store, [v, d, I32(size), store_mask])
                    with along_p:
                        first_row = self._at(b, src, b.mul(b.add(r0, c0), ld))
                        blocks = b.sdiv(kc, I64(lanes))
                        with for_range(b, I64(0), blocks, name="pv") as pb:
                            p0 = b.mul(pb, I64(lanes))
                            b.call(
                                transpose,
                                [
                                    self._at(b, first_row, p0),
                                    ld,
                                    self._at(b, out, b.add(b.mul(p0, panel), c0)),
                                    panel,
                                    part,
                                    width,
                                ],
                            )
                        with for_range(b, b.mul(blocks, I64(lanes)), kc, name="pt") as p:
                            with for_range(b, I64(0), width, name="rt") as r:
                                d = self._at(b, out, b.add(b.mul(p, panel), b.add(c0, r)))
                                with b.if_else(b.icmp_signed("<", r, part)) as (yes, no):
                                    with yes:
                                        x = self._at(b, first_row, b.add(b.mul(r, ld), p))
                                        b.store(b.load(x, typ=blk.element), d)
                                    with no:
                                        b.store(zero, d)
        b.ret_void()
        return fn

    def scale(self) -> ir.Function:
        """`scale(m, n, beta, c, ldc)`: C := beta * C (C := 0 when beta is 0, as BLAS
        does for a product with k == 0 or alpha == 0)."""
        blk = self.k
        fn, b = self._internal("scale", [I64, I64, blk.element, PTR, I64])
        m, n, beta, c, ldc = fn.args
        beta_zero = b.fcmp_ordered("==", beta, self._zero())
        with for_range(b, I64(0), n, name="j") as j:
            with for_range(b, I64(0), m, name="i") as i:
                slot = self._at(b, c, b.add(i, b.mul(j, ldc)))
                scaled = b.fmul(beta, b.load(slot, typ=blk.element))
                b.store(b.select(beta_zero, self._zero(), scaled), slot)
        b.ret_void()
        return fn

    # -- the blocked product -------------------------------------------------------------
    def blocked(self) -> ir.Function:
        """`blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, rs, ldc, tile, ctx,
        swapped, a_pack, b_pack, mc_block, nc_block, kc_block)`: the loop nest over the
        given packing buffers, which hold `mc_block * kc_block` and `nc_block * kc_block`
        elements; C's element (i, j) is `c[i * rs + j * ldc]`. A non-null `tile` gets each
        finished column of tiles (mc x NR), in the caller's indices (`swapped`: this product is the caller's
        transposed)."""
        blk = self.k
        micro, pack = self.micro_kernel(), self.pack()
        fn, b = self._internal(
            "blocked",
            [
                I1,
                I1,
                I64,
                I64,
                I64,
                blk.element,
                PTR,
                I64,
                PTR,
                I64,
                blk.element,
                PTR,
                I64,
                I64,
                PTR,
                PTR,
                I1,
                PTR,
                PTR,
                I64,
                I64,
                I64,
            ],
        )
        (
            ta,
            tb,
            m,
            n,
            k,
            alpha,
            a,
            lda,
            bm,
            ldb,
            beta,
            c,
            rs,
            ldc,
            tile,
            ctx,
            swapped,
            a_pack,
            b_pack,
            mc_block,
            nc_block,
            kc_block,
        ) = fn.args
        has_tile = b.icmp_unsigned("!=", b.ptrtoint(tile, I64), I64(0))
        # k slabs of balanced size (784 = 4 x 196, not 3 x 256 + 16); blocks of rows too,
        # in whole micro-panels (392 = 224 + 168, not 384 + 8)
        slabs = _ceil_div(b, k, kc_block)
        blocks_m = _ceil_div(b, m, mc_block)
        mc_even = _min(
            b, b.mul(_ceil_div(b, _ceil_div(b, m, blocks_m), blk.mr), I64(blk.mr)), mc_block
        )
        kc_max = _ceil_div(b, k, slabs)
        with for_range(b, I64(0), _ceil_div(b, n, nc_block), name="jc") as jq:
            jc = b.mul(jq, nc_block)
            nc = _min(b, b.sub(n, jc), nc_block)
            with for_range(b, I64(0), slabs, name="pc") as pq:
                pc = b.mul(pq, kc_max)
                kc = _min(b, b.sub(k, pc), kc_max)
                first = b.icmp_signed("==", pq, I64(0))
                last = b.icmp_signed("==", b.add(pq, I64(1)), slabs)
                # op(B)[pc + p, jc + j]: b[p + j * ldb] ('N'), b[j + p * ldb] ('T')
                b_src = self._at(
                    b, bm, b.select(tb, b.add(jc, b.mul(pc, ldb)), b.add(pc, b.mul(jc, ldb)))
                )
                b.call(pack, [b_src, tb, ldb, nc, kc, b_pack, I64(blk.nr)])
                with for_range(b, I64(0), blocks_m, name="ic") as iq:
                    ic = b.mul(iq, mc_even)
                    mc = _min(b, b.sub(m, ic), mc_even)
                    # op(A)[ic + i, pc + p]: a[i + p * lda] ('N'), a[p + i * lda] ('T')
                    a_src = self._at(
                        b, a, b.select(ta, b.add(pc, b.mul(ic, lda)), b.add(ic, b.mul(pc, lda)))
                    )
                    b.call(pack, [a_src, b.not_(ta), lda, mc, kc, a_pack, I64(blk.mr)])
                    with for_range(b, I64(0), _ceil_div(b, nc, blk.nr), name="jr") as jr:
                        j0 = b.mul(jr, I64(blk.nr))
                        cols = _min(b, b.sub(nc, j0), I64(blk.nr))
                        bp = self._at(b, b_pack, b.mul(j0, kc))
                        with for_range(b, I64(0), _ceil_div(b, mc, blk.mr), name="ir") as ir_:
                            i0 = b.mul(ir_, I64(blk.mr))
                            rows = _min(b, b.sub(mc, i0), I64(blk.mr))
                            ap = self._at(b, a_pack, b.mul(i0, kc))
                            ct = self._at(
                                b, c, b.add(b.mul(b.add(ic, i0), rs), b.mul(b.add(jc, j0), ldc))
                            )
                            b.call(micro, [kc, ap, bp, ct, rs, ldc, rows, cols, alpha, beta, first])
                        # the column of tiles just finished (mc x NR, in L1): one call
                        with b.if_then(b.and_(last, has_tile)):
                            c0 = b.add(jc, j0)
                            b.call(
                                Callee(tile, TILE),
                                [
                                    ctx,
                                    b.select(swapped, c0, ic),
                                    b.select(swapped, ic, c0),
                                    b.select(swapped, cols, mc),
                                    b.select(swapped, mc, cols),
                                ],
                            )
        b.ret_void()
        return fn

    def _padded(self, b: ir.IRBuilder, rows: ir.Value, cols: ir.Value) -> ir.Value:
        """Elements of C's tiles when `rows` run along MR and `cols` along NR."""
        blk = self.k
        return b.mul(
            b.mul(_ceil_div(b, rows, blk.mr), I64(blk.mr)),
            b.mul(_ceil_div(b, cols, blk.nr), I64(blk.nr)),
        )

    # -- the entry ----------------------------------------------------------------------
    def entry(self) -> ir.Function:
        """`llgrad_?gemm_ex`, and `llgrad_?gemm` calling it without a tile function."""
        ex = self.entry_ex()
        fn = ir.Function(self.m, FORTRAN_GEMM, f"llgrad_{self.p}gemm")
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        null = ir.Constant(PTR, None)
        b.call(ex, list(fn.args) + [null, null])
        b.ret_void()
        return fn

    def entry_ex(self) -> ir.Function:
        blk = self.k
        blocked, scale = self.blocked(), self.scale()
        fn = ir.Function(self.m, GEMM_EX, f"llgrad_{self.p}gemm_ex")
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        (p_ta, p_tb, p_m, p_n, p_k, p_alpha, a, p_lda, bm, p_ldb, p_beta, c, p_ldc, tile, ctx) = (
            fn.args
        )

        def integer(ptr: ir.Value) -> ir.Value:
            return b.sext(b.load(ptr, typ=I32), I64)

        def transposed(ptr: ir.Value) -> ir.Value:
            ch = b.load(ptr, typ=I8)
            upper = b.and_(ch, I8(0xDF))  # 'n'/'t'/'c' as 'N'/'T'/'C'
            return b.icmp_unsigned("!=", upper, I8(ord("N")))

        ta, tb = transposed(p_ta), transposed(p_tb)
        m, n, k = integer(p_m), integer(p_n), integer(p_k)
        lda, ldb, ldc = integer(p_lda), integer(p_ldb), integer(p_ldc)
        alpha = b.load(p_alpha, typ=blk.element)
        beta = b.load(p_beta, typ=blk.element)
        # the fallback's buffers, on this stack: one micro-panel each, k in slabs of 64
        small_a = b.alloca(blk.element, size=I64(blk.mr * SMALL_KC), name="small_a")
        small_b = b.alloca(blk.element, size=I64(blk.nr * SMALL_KC), name="small_b")
        for x in (small_a, small_b):
            x.align = 64
        empty = b.or_(b.icmp_signed("<=", m, I64(0)), b.icmp_signed("<=", n, I64(0)))
        with b.if_then(empty):
            b.ret_void()
        no_product = b.or_(
            b.icmp_signed("<=", k, I64(0)), b.fcmp_ordered("==", alpha, self._zero())
        )
        with b.if_then(no_product):
            b.call(scale, [m, n, beta, c, ldc])
            with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(tile, I64), I64(0))):
                b.call(Callee(tile, TILE), [ctx, I64(0), I64(0), m, n])
            b.ret_void()
        kc_max = _ceil_div(b, k, _ceil_div(b, k, I64(blk.kc)))
        # (either orientation's rows fit: the blocks are sized for the larger side)
        longest = b.select(b.icmp_signed("<", m, n), n, m)
        mc_max = _min(b, b.mul(_ceil_div(b, longest, blk.mr), I64(blk.mr)), I64(blk.mc))
        nc_max = _min(b, b.mul(_ceil_div(b, longest, blk.nr), I64(blk.nr)), I64(blk.nc))
        a_elems = b.mul(mc_max, kc_max)
        b_elems = b.mul(nc_max, kc_max)
        # both buffers 64-byte aligned (a_elems * size is a multiple of 64: MR is)
        raw = b.call(self.malloc, [b.add(b.mul(b.add(a_elems, b_elems), I64(blk.size)), I64(64))])
        # A product with few rows of C and many columns runs transposed (C^T = op(B)^T
        # op(A)^T, C's tile stored element by element) when that wastes fewer lanes:
        # 128x512 @ 512x10 as 10 rows of C would fill 10 of 32 lanes.
        swap = b.icmp_signed(
            "<", b.mul(I64(4), self._padded(b, n, m)), b.mul(I64(3), self._padded(b, m, n))
        )
        ta_, tb_ = b.select(swap, b.not_(tb), ta), b.select(swap, b.not_(ta), tb)
        m_, n_ = b.select(swap, n, m), b.select(swap, m, n)
        a_, b_ = b.select(swap, bm, a), b.select(swap, a, bm)
        lda_, ldb_ = b.select(swap, ldb, lda), b.select(swap, lda, ldb)
        rs, cs = b.select(swap, ldc, I64(1)), b.select(swap, I64(1), ldc)
        common = [ta_, tb_, m_, n_, k, alpha, a_, lda_, b_, ldb_, beta, c, rs, cs, tile, ctx, swap]
        with b.if_else(b.icmp_unsigned("==", b.ptrtoint(raw, I64), I64(0))) as (no, yes):
            with no:
                b.call(
                    blocked, common + [small_a, small_b, I64(blk.mr), I64(blk.nr), I64(SMALL_KC)]
                )
            with yes:
                a_pack = b.inttoptr(b.and_(b.add(b.ptrtoint(raw, I64), I64(63)), I64(-64)), PTR)
                b_pack = self._at(b, a_pack, a_elems)
                b.call(blocked, common + [a_pack, b_pack, mc_max, nc_max, I64(blk.kc)])
                b.call(self.free, [raw])
        b.ret_void()
        return fn


def build(vector_bits: int, prefix: str) -> str:
    """The module text of `llgrad_sgemm` (prefix "s") or `llgrad_dgemm` ("d") for
    `vector_bits`-bit registers."""
    module = ir.Module(name=f"llgrad_{prefix}gemm")
    _Gemm(module, prefix, blockings(vector_bits)[prefix]).entry()
    return HAND_VECTORIZED + str(module)
