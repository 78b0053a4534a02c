"""Matmul kernels: a batch loop around BLAS gemm, or generated loops for other dtypes.

`C[b] = A[b] @ B[b]` over a (broadcast) batch, with `A: n x k`, `B: k x m` and `C: n x m`
row-major and contiguous. One kernel call does the whole batch; per batch element it adds
each operand's batch strides to its pointer. Batch strides may be zero (broadcasting), so
an operand shared by every batch element is never copied.

float32, float64, complex64 and complex128 call SciPy's `sgemm`/`dgemm`/`cgemm`/`zgemm`
(complex alpha and beta are (re, im) pairs in memory), whose address arrives in the argument
block (found by `llgrad.runtime.blas`): the module names no process address, so its cached
object stays valid in every process. BLAS is column-major: the row-major product
`C = A @ B` is the column-major product `C^T = B^T A^T`, so the kernel passes (B, A) in
that order. An operand stored row-major is passed with 'N' and its row stride as leading
dimension; one stored column-major (a transposed view, strides `(1, ld)`) with 'T' and its
column stride. Fortran takes every argument by pointer, so the characters, sizes and
scalars live in allocas.

Other dtypes run generated loops in i-k-j order: for each row of C and each block of
`BLOCK` columns, an accumulator row (in the compute type: float32 for float16/bfloat16) is
updated with `A[i, kk] * B[kk, j0:j0+BLOCK]` for every kk; the inner loop walks B's row
contiguously, so it vectorizes. A single output column (matrix @ vector) is a dot product
per row instead, reduced in registers over k. The outer range is the rows of the whole
batch, so one large product splits across threads too.

A product with one row or one column (`n == 1` or `m == 1`: vector @ matrix, matrix @
vector) calls `gemv` instead, with the matrix operand's transpose flag and leading
dimension and the vector's stride as increment. `alpha` scales the product (a scalar
factor of an operand folded into the call: `(x * s) @ w` reads x once).

Argument block (strides in elements):
    [lo, hi, n, m, k, batch_size * R,
     (ptr, batch_stride * R, row_stride, col_stride) for C, A, B,
     a_transposed, b_transposed, gemm, gemv, alpha (float64 bits),
     (ptr, batch_stride * R, row_stride, col_stride) per epilogue operand, outputs first]
`[lo, hi)` ranges over batch elements (BLAS) or over `batch * n` rows (loops).
`x_transposed` is 1 when operand x is passed to BLAS column-major (its leading dimension
is then its column stride); the loops ignore the flags and read A through both strides,
and B's column stride is taken to be 1 (the caller copies B otherwise); `gemm` is the
address of the BLAS function (unused, 0, by the loops): of llgrad's `gemm_ex` for a
kernel whose epilogue runs per tile (`_tile_function`).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..schedule.elementwise import out_dtypes
from ..schedule.matmul import MatmulKernel
from .elementwise import evaluate
from .gemm import FORTRAN_GEMM, GEMM_EX, TILE
from .loops import I64, PTR, ArgBlock, Callee, accumulate, for_range, new_kernel
from .scalar import FLAGS, SV, LLVMScalar, llvm_type, memory_type

I8, I32 = ir.IntType(8), ir.IntType(32)
BLOCK = 256  # accumulator columns of the loop kernel (one row's slice)
# void gemv(trans, m, n, alpha, a, lda, x, incx, beta, y, incy)
GEMV_TYPE = ir.FunctionType(ir.VoidType(), [PTR] * 11)


@dataclass
class _Operand:
    ptr: ir.Value
    batch_strides: list[ir.Value]
    row: ir.Value
    col: ir.Value


class _Args:
    """The argument block of `MatmulKernel`, read into named values."""

    def __init__(self, args: ArgBlock, rank: int):
        self.lo, self.hi = args.int(0, "lo"), args.int(1, "hi")
        self.n, self.m, self.k = args.int(2, "n"), args.int(3, "m"), args.int(4, "k")
        self.sizes = [args.int(5 + d, f"size{d}") for d in range(rank)]
        base = 5 + rank
        self.operands = [
            operand(args, base + x * (rank + 3), rank, label) for x, label in enumerate("cab")
        ]
        flags = base + 3 * (rank + 3)
        self.a_transposed = args.int(flags, "a_t")
        self.b_transposed = args.int(flags + 1, "b_t")
        self.gemm_slot = flags + 2
        self.gemv_slot = flags + 3
        self.alpha_slot = flags + 4
        self.epilogue_slot = flags + 5  # epilogue operands, outputs first


def operand(args: ArgBlock, slot: int, rank: int, label: str, col: int | None = None) -> _Operand:
    """The operand `(ptr, batch_stride * rank, row_stride, col_stride)` at `slot`; a
    known column stride (`col`) is baked in instead of read."""
    return _Operand(
        args.ptr(slot, f"p{label}"),
        [args.int(slot + 1 + d, f"{label}_bs{d}") for d in range(rank)],
        args.int(slot + 1 + rank, f"{label}_rs"),
        args.int(slot + 2 + rank, f"{label}_cs") if col is None else I64(col),
    )


def _batch_offsets(
    b: ir.IRBuilder, index: ir.Value, sizes: list[ir.Value], operands: list[_Operand]
) -> list[ir.Value]:
    """Element offsets of batch element `index` (row-major over `sizes`) per operand."""
    offsets = [I64(0)] * len(operands)
    rest = index
    for d in range(len(sizes) - 1, -1, -1):
        if d == 0:
            i = rest
        else:
            i = b.urem(rest, sizes[d])
            rest = b.udiv(rest, sizes[d])
        offsets = [b.add(off, b.mul(i, op.batch_strides[d])) for off, op in zip(offsets, operands)]
    return offsets


# --------------------------------------------------------------------------------------
# BLAS
# --------------------------------------------------------------------------------------


def _alloca_store(b: ir.IRBuilder, typ: ir.Type, value: ir.Value, name: str) -> ir.Value:
    slot = b.alloca(typ, name=name)
    b.store(value, slot)
    return slot


def _scalar_constant(dtype: DType, value: float) -> ir.Constant:
    """A gemm scalar (alpha, beta) as stored: complex ones as a (re, im) pair."""
    t = memory_type(dtype)
    if dtype.is_complex:
        return ir.Constant(t, [value, 0.0])
    return ir.Constant(t, value)


def _build_blas(spec: MatmulKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    tile = _tile_function(module, spec, f"{name}_tile") if spec.epilogue is not None else None
    fn, b, block = new_kernel(module, name)
    a = _Args(block, spec.batch_rank)
    gemm_ptr = block.ptr(a.gemm_slot, "gemm")
    gemm = Callee(gemm_ptr, FORTRAN_GEMM)
    ctx = (
        b.alloca(I64, size=I64(2 + 3 * spec.n_epilogue_operands), name="ctx")
        if tile is not None
        else None
    )
    c_op, a_op, b_op = a.operands
    real = memory_type(spec.dtype)  # complex: [2 x float], so alpha = {1, 0} in memory
    # Fortran reads every argument through a pointer: park them in the frame.
    trans_a = b.select(b.icmp_signed("!=", a.a_transposed, I64(0)), I8(ord("T")), I8(ord("N")))
    trans_b = b.select(b.icmp_signed("!=", a.b_transposed, I64(0)), I8(ord("T")), I8(ord("N")))
    p_trans_a = _alloca_store(b, I8, trans_a, "trans_a")
    p_trans_b = _alloca_store(b, I8, trans_b, "trans_b")
    lda = b.select(b.icmp_signed("!=", a.a_transposed, I64(0)), a_op.col, a_op.row)
    ldb = b.select(b.icmp_signed("!=", a.b_transposed, I64(0)), b_op.col, b_op.row)
    ints = {}
    for label, v in (
        ("m", a.m),
        ("n", a.n),
        ("k", a.k),
        ("lda", lda),
        ("ldb", ldb),
        ("ldc", c_op.row),
    ):
        ints[label] = _alloca_store(b, I32, b.trunc(v, I32), label)
    alpha = _alloca_store(b, real, _alpha(b, spec.dtype, a, block), "alpha")
    beta = _alloca_store(b, real, _scalar_constant(spec.dtype, 0.0), "beta")
    vector = _gemv_arguments(b, a, block, ints)
    with for_range(b, a.lo, a.hi, name="batch") as t:
        off_c, off_a, off_b = _batch_offsets(b, t, a.sizes, a.operands)
        pc = b.gep(c_op.ptr, [off_c], inbounds=True, source_etype=real)
        pa = b.gep(a_op.ptr, [off_a], inbounds=True, source_etype=real)
        pb = b.gep(b_op.ptr, [off_b], inbounds=True, source_etype=real)
        if tile is not None:
            _fill_context(b, ctx, spec, a, block, t, pc)
        use_gemv, row_vector, gemv, args = vector
        with b.if_else(use_gemv) as (then, otherwise):
            with then:
                # C (1 x m) = a (1 x k) @ B: y = op(B) x; C (n x 1) = A @ b: y = op(A)^T x
                with b.if_else(row_vector) as (row, column):
                    with row:
                        b.call(
                            gemv,
                            [
                                args["b_trans"],
                                args["b_rows"],
                                args["b_cols"],
                                alpha,
                                pb,
                                ints["ldb"],
                                pa,
                                args["a_inc"],
                                beta,
                                pc,
                                args["one"],
                            ],
                        )
                    with column:
                        b.call(
                            gemv,
                            [
                                args["a_trans"],
                                args["a_rows"],
                                args["a_cols"],
                                alpha,
                                pa,
                                ints["lda"],
                                pb,
                                args["b_inc"],
                                beta,
                                pc,
                                ints["ldc"],
                            ],
                        )
            with otherwise:
                # column-major C^T (m x n) = op(B) (m x k) @ op(A) (k x n)
                args = [
                    p_trans_b,
                    p_trans_a,
                    ints["m"],
                    ints["n"],
                    ints["k"],
                    alpha,
                    pb,
                    ints["ldb"],
                    pa,
                    ints["lda"],
                    beta,
                    pc,
                    ints["ldc"],
                ]
                if spec.tile_epilogue:
                    b.call(Callee(gemm_ptr, GEMM_EX), args + [tile, ctx])
                else:
                    b.call(gemm, args)
        if tile is not None:
            # after a library's gemm (or a gemv): the epilogue over the whole block
            after = use_gemv if spec.tile_epilogue else ir.Constant(ir.IntType(1), 1)
            with b.if_then(after):
                b.call(tile, [ctx, I64(0), I64(0), a.m, a.n])
    b.ret_void()
    return module


def _alpha(b: ir.IRBuilder, dtype: DType, a: _Args, block: ArgBlock) -> ir.Value:
    """The alpha slot (float64 bits) as the gemm scalar of `dtype`."""
    value = b.bitcast(block.int(a.alpha_slot, "alpha_bits"), ir.DoubleType())
    real: ir.Type = ir.DoubleType()
    if dtype in (dt.float32, dt.complex64):
        real = ir.FloatType()
        value = b.fptrunc(value, real)
    if dtype.is_complex:
        pair = ir.Constant(memory_type(dtype), ir.Undefined)
        pair = b.insert_value(pair, value, 0)
        return b.insert_value(pair, ir.Constant(real, 0.0), 1)
    return value


def _gemv_arguments(
    b: ir.IRBuilder, a: _Args, block: ArgBlock, ints: dict[str, ir.Value]
) -> tuple[ir.Value, ir.Value, Callee, dict]:
    """Whether this call is a matrix-vector product (and a gemv address was given),
    whether the vector is A's row (n == 1) rather than B's column (m == 1), the gemv
    callee and its by-pointer arguments for both cases."""
    gemv_ptr = block.ptr(a.gemv_slot, "gemv")
    given = b.icmp_unsigned("!=", b.ptrtoint(gemv_ptr, I64), I64(0))
    row_vector = b.icmp_signed("==", a.n, I64(1))
    use = b.and_(given, b.or_(row_vector, b.icmp_signed("==", a.m, I64(1))))
    a_t = b.icmp_signed("!=", a.a_transposed, I64(0))
    b_t = b.icmp_signed("!=", a.b_transposed, I64(0))
    _, a_op, b_op = a.operands
    args = {
        # B as stored column-major: m x k ('N') or, transposed, k x m ('T')
        "b_trans": _alloca_store(b, I8, b.select(b_t, I8(ord("T")), I8(ord("N"))), "v_bt"),
        "b_rows": _alloca_store(b, I32, b.trunc(b.select(b_t, a.k, a.m), I32), "v_brows"),
        "b_cols": _alloca_store(b, I32, b.trunc(b.select(b_t, a.m, a.k), I32), "v_bcols"),
        # A as stored column-major: k x n ('T' gives A @ x) or, transposed, n x k ('N')
        "a_trans": _alloca_store(b, I8, b.select(a_t, I8(ord("N")), I8(ord("T"))), "v_at"),
        "a_rows": _alloca_store(b, I32, b.trunc(b.select(a_t, a.n, a.k), I32), "v_arows"),
        "a_cols": _alloca_store(b, I32, b.trunc(b.select(a_t, a.k, a.n), I32), "v_acols"),
        "a_inc": _alloca_store(b, I32, b.trunc(a_op.col, I32), "v_ainc"),
        "b_inc": _alloca_store(b, I32, b.trunc(b_op.row, I32), "v_binc"),
        "one": _alloca_store(b, I32, I32(1), "v_one"),
    }
    return use, row_vector, Callee(gemv_ptr, GEMV_TYPE), args


def _tile_function(module: ir.Module, spec: MatmulKernel, name: str) -> ir.Function:
    """`tile(ctx, m0, n0, cols, rows)`: the epilogue over C's block of `rows` rows from
    `n0` and `cols` columns from `m0` (row-major indices; the arguments come in BLAS's
    column-major order, as `codegen.gemm.TILE`), rows outside, a vectorizable loop over
    columns inside. `ctx` holds int64s: C's pointer and row stride, then per epilogue
    operand (outputs first) its pointer, row stride and column stride, all at this batch
    element. llgrad's gemm calls it per column of tiles while they are in L1
    (`tile_epilogue`); after a library's gemm (or a gemv) the kernel calls it once over
    the whole block."""
    expr = spec.epilogue
    assert expr is not None
    fn = ir.Function(module, TILE, name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx, m0, n0, cols, rows = fn.args
    ctx.add_attribute("noalias")
    block = ArgBlock(b, ctx)
    n_ops = spec.n_epilogue_operands
    # the loop is a function of its own whose pointers are `noalias` arguments, inlined
    # here: LLVM then vectorizes it without run-time overlap checks, which an optimizer
    # update written in place (W - lr * dW into W, an exact alias the schedule allows:
    # each element is read before the same iteration writes it) would fail into the
    # scalar loop
    body = _tile_body(module, spec, f"{name}_body")
    args = [block.ptr(0, "c"), block.int(1, "c_rs")]
    for q, inner in enumerate(spec.epilogue_inner):
        args += [
            block.ptr(2 + 3 * q, f"e{q}"),
            block.int(3 + 3 * q, f"e{q}_rs"),
            block.int(4 + 3 * q, f"e{q}_cs") if inner is None else I64(inner),
        ]
    assert len(args) == 2 + 3 * n_ops
    b.call(body, args + [m0, n0, cols, rows])
    b.ret_void()
    return fn


def _tile_body(module: ir.Module, spec: MatmulKernel, name: str) -> ir.Function:
    """The tile function's loop over (c, c_rs, (ptr, rs, cs) per operand, m0, n0, cols,
    rows), every pointer `noalias`."""
    expr = spec.epilogue
    assert expr is not None
    n_ops = spec.n_epilogue_operands
    fn = ir.Function(
        module,
        ir.FunctionType(ir.VoidType(), [PTR, I64] + [PTR, I64, I64] * n_ops + [I64] * 4),
        name=name,
    )
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c_ptr, c_row = fn.args[0], fn.args[1]
    ops = [
        _Operand(fn.args[2 + 3 * q], [], fn.args[3 + 3 * q], fn.args[4 + 3 * q])
        for q in range(n_ops)
    ]
    m0, n0, cols, rows = fn.args[2 + 3 * n_ops :]
    for arg in [c_ptr] + [op.ptr for op in ops]:
        arg.add_attribute("noalias")
    n_out = len(expr.outputs)
    dtypes = out_dtypes(expr)
    s = LLVMScalar(b)
    mem = _epilogue_memory_types(spec)
    c_mem = memory_type(spec.dtype)
    with for_range(b, n0, b.add(n0, rows), name="ei") as i:
        row_c = b.mul(i, c_row)
        at_row = [b.mul(i, op.row) for op in ops]
        with for_range(b, m0, b.add(m0, cols), name="ej") as j:
            at = [b.add(r, b.mul(j, op.col)) for r, op in zip(at_row, ops)]
            loaded = [
                s.load(
                    b.gep(c_ptr, [b.add(row_c, j)], inbounds=True, source_etype=c_mem),
                    spec.dtype,
                    name="c",
                )
            ]
            loaded += [
                s.load(b.gep(op.ptr, [o], inbounds=True, source_etype=mt), d, name="e")
                for op, o, mt, d in zip(ops[n_out:], at[n_out:], mem[n_out:], expr.in_dtypes[1:])
            ]
            for k, v in enumerate(evaluate(s, expr, loaded)):
                if v.dtype is not dtypes[k]:
                    v = s.cast(v, dtypes[k])
                s.store(v, b.gep(ops[k].ptr, [at[k]], inbounds=True, source_etype=mem[k]))
    b.ret_void()
    return fn


def _fill_context(
    b: ir.IRBuilder,
    ctx: ir.Value,
    spec: MatmulKernel,
    a: _Args,
    block: ArgBlock,
    t: ir.Value,
    pc: ir.Value,
) -> None:
    """The tile function's context for batch element `t` (C at `pc`)."""
    rank = spec.batch_rank
    ops = [
        operand(block, a.epilogue_slot + q * (rank + 3), rank, f"e{q}")
        for q in range(spec.n_epilogue_operands)
    ]
    offs = _batch_offsets(b, t, a.sizes, ops)
    values = [b.ptrtoint(pc, I64), a.operands[0].row]
    for op, off, d in zip(ops, offs, _epilogue_memory_types(spec)):
        values += [
            b.ptrtoint(b.gep(op.ptr, [off], inbounds=True, source_etype=d), I64),
            op.row,
            op.col,
        ]
    for k, v in enumerate(values):
        b.store(v, b.gep(ctx, [I64(k)], inbounds=True, source_etype=I64))


def _epilogue_memory_types(spec: MatmulKernel) -> list[ir.Type]:
    expr = spec.epilogue
    assert expr is not None
    return [memory_type(d) for d in out_dtypes(expr)] + [memory_type(d) for d in expr.in_dtypes[1:]]


# --------------------------------------------------------------------------------------
# Generated loops (float16, bfloat16, integers, bool)
# --------------------------------------------------------------------------------------


def _multiply_add(
    b: ir.IRBuilder, dtype: DType, acc: ir.Value, x: ir.Value, y: ir.Value
) -> ir.Value:
    """acc + x * y in the compute type: wrapping for integers, or-of-ands for bool."""
    if dtype.is_floating_point:
        return b.fadd(acc, b.fmul(x, y, flags=FLAGS), flags=FLAGS)
    if dtype is dt.bool_:
        return b.or_(acc, b.and_(x, y))
    return b.add(acc, b.mul(x, y))


def _zero(dtype: DType) -> ir.Constant:
    t = llvm_type(dtype)
    return ir.Constant(t, 0.0 if dtype.is_floating_point else 0)


def _row_start(b: ir.IRBuilder, a: _Args, t: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Row `t` of the whole batch: element offsets of C's row, A's row and B's matrix."""
    c_op, a_op, _ = a.operands
    batch = b.udiv(t, a.n)
    i = b.urem(t, a.n)
    off_c, off_a, off_b = _batch_offsets(b, batch, a.sizes, a.operands)
    return b.add(off_c, b.mul(i, c_op.row)), b.add(off_a, b.mul(i, a_op.row)), off_b


def _rows_times_vector(b: ir.IRBuilder, s: LLVMScalar, a: _Args, d: DType) -> None:
    """m == 1: each C[i, 0] is a dot product over k, reduced in registers.

    The i-k-j order would run a one-iteration j loop per multiply-add; this loop
    vectorizes over k instead (LLVM versions it for unit strides).
    """
    c_op, a_op, b_op = a.operands
    mem_t = memory_type(d)
    with for_range(b, a.lo, a.hi, name="vrow") as t:
        row_c, row_a, off_b = _row_start(b, a, t)
        with accumulate(b, I64(0), a.k, [_zero(d)], name="dot") as (kk, current, updated):
            pa = b.gep(
                a_op.ptr, [b.add(row_a, b.mul(kk, a_op.col))], inbounds=True, source_etype=mem_t
            )
            pb = b.gep(
                b_op.ptr, [b.add(off_b, b.mul(kk, b_op.row))], inbounds=True, source_etype=mem_t
            )
            x, y = s.load(pa, d, name="a").value, s.load(pb, d, name="b").value
            updated.append(_multiply_add(b, d, current[0], x, y))
        s.store(SV(updated[0], d), b.gep(c_op.ptr, [row_c], inbounds=True, source_etype=mem_t))


def _rows_times_matrix(b: ir.IRBuilder, s: LLVMScalar, a: _Args, d: DType) -> None:
    """i-k-j: per row of C and block of BLOCK columns, accumulate A[i, kk] * B[kk, block]."""
    c_op, a_op, b_op = a.operands
    acc_t = llvm_type(d)
    mem_t = memory_type(d)
    acc = b.alloca(acc_t, size=I64(BLOCK), name="acc")
    n_blocks = b.udiv(b.add(a.m, I64(BLOCK - 1)), I64(BLOCK))

    def acc_slot(j: ir.Value) -> ir.Value:
        return b.gep(acc, [j], inbounds=True, source_etype=acc_t)

    with for_range(b, a.lo, a.hi, name="row") as t:
        row_c, row_a, off_b = _row_start(b, a, t)
        with for_range(b, I64(0), n_blocks, name="jb") as jb:
            j0 = b.mul(jb, I64(BLOCK))
            left = b.sub(a.m, j0)
            jn = b.select(b.icmp_signed("<", left, I64(BLOCK)), left, I64(BLOCK))
            with for_range(b, I64(0), jn, name="zero") as j:
                b.store(_zero(d), acc_slot(j))
            with for_range(b, I64(0), a.k, name="kk") as kk:
                pa = b.gep(
                    a_op.ptr, [b.add(row_a, b.mul(kk, a_op.col))], inbounds=True, source_etype=mem_t
                )
                x = s.load(pa, d, name="a").value
                row_b = b.add(b.add(off_b, b.mul(kk, b_op.row)), j0)
                brow = b.gep(b_op.ptr, [row_b], inbounds=True, source_etype=mem_t)
                with for_range(b, I64(0), jn, name="j") as j:
                    y = s.load(
                        b.gep(brow, [j], inbounds=True, source_etype=mem_t), d, name="b"
                    ).value
                    slot = acc_slot(j)
                    b.store(_multiply_add(b, d, b.load(slot, typ=acc_t), x, y), slot)
            crow = b.gep(c_op.ptr, [b.add(row_c, j0)], inbounds=True, source_etype=mem_t)
            with for_range(b, I64(0), jn, name="out") as j:
                value = b.load(acc_slot(j), typ=acc_t)
                s.store(SV(value, d), b.gep(crow, [j], inbounds=True, source_etype=mem_t))


def _build_loops(spec: MatmulKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, block = new_kernel(module, name)
    a = _Args(block, spec.batch_rank)
    s = LLVMScalar(b)
    with b.if_else(b.icmp_signed("==", a.m, I64(1))) as (vector, matrix):
        with vector:
            _rows_times_vector(b, s, a, spec.dtype)
        with matrix:
            _rows_times_matrix(b, s, a, spec.dtype)
    b.ret_void()
    return module


def build(spec: MatmulKernel, name: str) -> ir.Module:
    """The kernel for `spec`: a BLAS batch loop for float32/float64/complex, loops otherwise."""
    return _build_blas(spec, name) if spec.blas else _build_loops(spec, name)
