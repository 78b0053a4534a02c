"""Matmul launches on the GPU: cuBLAS gemms, and the epilogue as a kernel.

The launch's argument block is `codegen.matmul`'s (`[lo, hi, n, m, k, sizes * R,
(ptr, batch_strides * R, row, col) for C, A, B, a_t, b_t, gemm, gemv, alpha, epilogue
operands...]`). The row-major product `C = A @ B` is cuBLAS's column-major
`C^T = op(B) op(A)`, as on the CPU. A batch whose elements are one stride apart in every
operand is one strided-batched call; other batches are one call per element. An epilogue
(bias, activation: an elementwise expression whose input 0 is C's element) runs after the
gemms as one elementwise kernel over `[batch, n, m]`.
"""

from __future__ import annotations

import struct
from typing import Any

from llvmlite import ir

from ...schedule.elementwise import out_dtypes
from ...schedule.matmul import MatmulKernel
from ...schedule.program import Launch
from .common import GemmStep, UnsupportedOnGpu, KernelLaunch, decompose, grid_for
from ..elementwise import load_evaluate_store
from ..loops import I64
from ..scalar import LLVMScalar
from .kernel import GpuKernel, grid_stride


class _Layout:
    """The block's fields by name."""

    def __init__(self, launch: Launch):
        spec: MatmulKernel = launch.spec
        v = launch.block
        r = spec.batch_rank
        self.rank = r
        self.lo, self.hi = int(v[0]), int(v[1])
        self.n, self.m, self.k = int(v[2]), int(v[3]), int(v[4])
        self.sizes = [int(v[5 + d]) for d in range(r)]
        base = 5 + r
        self.slots = {x: base + j * (r + 3) for j, x in enumerate("cab")}
        flags = base + 3 * (r + 3)
        self.a_t, self.b_t = int(v[flags]), int(v[flags + 1])
        self.alpha = struct.unpack("<d", struct.pack("<q", int(v[flags + 4])))[0]
        self.epilogue_slot = flags + 5
        self.block = v

    def operand(self, x: str) -> tuple[Any, list[int], int, int]:
        s = self.slots[x] if x in self.slots else x
        v = self.block
        return (
            v[s],
            [int(v[s + 1 + d]) for d in range(self.rank)],
            int(v[s + 1 + self.rank]),
            int(v[s + 2 + self.rank]),
        )

    def batch_offsets(self, t: int, strides: list[int]) -> int:
        off = 0
        for d in range(self.rank - 1, -1, -1):
            size = self.sizes[d]
            i = t % size if d else t
            t //= size if d else 1
            off += i * strides[d]
        return off


def _uniform(lay: _Layout, strides: list[list[int]]) -> list[int] | None:
    """Per operand, the one stride between consecutive batch elements, or None."""
    count = lay.hi - lay.lo
    if count <= 1:
        return [0 for _ in strides]
    out = []
    for st in strides:
        first = lay.batch_offsets(lay.lo, st)
        step = lay.batch_offsets(lay.lo + 1, st) - first
        for t in range(lay.lo, lay.hi):
            if lay.batch_offsets(t, st) - first != (t - lay.lo) * step:
                return None
        out.append(step)
    return out


def plan(launch: Launch, module: ir.Module, symbol: str, mode: str):
    """The gemm calls of a matmul launch, and its epilogue kernel (in `module`)."""
    spec: MatmulKernel = launch.spec
    if spec.dtype.name not in ("float32", "float64"):
        raise UnsupportedOnGpu(
            f"matmul of {spec.dtype} has no GPU kernel yet (float32 and float64 run on cuBLAS)"
        )
    lay = _Layout(launch)
    size = spec.dtype.itemsize
    (pc, bc, c_row, _), (pa, ba, a_row, a_col), (pb, bb, b_row, b_col) = (
        lay.operand("c"),
        lay.operand("a"),
        lay.operand("b"),
    )
    lda = a_col if lay.a_t else a_row
    ldb = b_col if lay.b_t else b_row
    # cuBLAS checks leading dimensions even where a dimension of size 1 never uses them
    rows_b = lay.k if lay.b_t else lay.m  # op(B)'s column-major storage rows
    rows_a = lay.n if lay.a_t else lay.k
    ldb = max(ldb, rows_b, 1) if (lay.m if lay.b_t else lay.k) == 1 or ldb < rows_b else ldb
    lda = max(lda, rows_a, 1) if (lay.k if lay.a_t else lay.n) == 1 or lda < rows_a else lda
    ldc = max(c_row, lay.m, 1)
    common = {
        "transa": bool(lay.b_t),
        "transb": bool(lay.a_t),
        "m": lay.m,
        "n": lay.n,
        "k": lay.k,
        "alpha": lay.alpha,
        "beta": 0.0,
        "a": pb,
        "lda": ldb,
        "b": pa,
        "ldb": lda,
        "c": pc,
        "ldc": ldc,
    }
    steps = _uniform(lay, [bb, ba, bc])
    calls = []
    if steps is not None:
        first = [lay.batch_offsets(lay.lo, st) for st in (bb, ba, bc)]
        calls.append(
            dict(
                common,
                a_off=first[0] * size,
                b_off=first[1] * size,
                c_off=first[2] * size,
                stride_a=steps[0],
                stride_b=steps[1],
                stride_c=steps[2],
                batch=lay.hi - lay.lo,
            )
        )
    else:
        for t in range(lay.lo, lay.hi):
            offs = [lay.batch_offsets(t, st) for st in (bb, ba, bc)]
            calls.append(
                dict(
                    common,
                    a_off=offs[0] * size,
                    b_off=offs[1] * size,
                    c_off=offs[2] * size,
                    stride_a=0,
                    stride_b=0,
                    stride_c=0,
                    batch=1,
                )
            )
    epilogue = None
    if spec.epilogue is not None:
        epilogue = _epilogue(module, launch, lay, f"{symbol}_epilogue", mode)
    return GemmStep(spec.dtype.name, calls, epilogue, launch.what)


def _epilogue(
    module: ir.Module, launch: Launch, lay: _Layout, symbol: str, mode: str
) -> KernelLaunch:
    spec: MatmulKernel = launch.spec
    expr = spec.epilogue
    outs = out_dtypes(expr)
    n_out = len(outs)
    operands = [lay.operand("c")] + [
        lay.operand(lay.epilogue_slot + q * (lay.rank + 3)) for q in range(spec.n_epilogue_operands)
    ]
    # kernel parameter order: C, then the epilogue operands (outputs first)
    params = [op[0] for op in operands]
    sizes = [lay.hi - lay.lo, lay.n, lay.m]
    total = sizes[0] * lay.n * lay.m
    k = GpuKernel(module, symbol, len(params), mode)
    b = k.b
    s = LLVMScalar(b)
    ptrs = [k.pointer(q) for q in range(len(params))]

    def item(flat: ir.Value) -> None:
        t, i, j = decompose(b, flat, sizes, total)
        offsets = []
        for _, bstrides, row, col in operands:
            off = _batch_offset_ir(b, lay, b.add(t, I64(lay.lo)), bstrides)
            off = b.add(off, b.add(b.mul(i, I64(row)), b.mul(j, I64(col))))
            offsets.append(off)
        s._index = flat
        at = list(zip(ptrs, offsets))  # C, the outputs, inputs 1..
        load_evaluate_store(s, expr, at[:1] + at[1 + n_out :], at[1 : 1 + n_out])

    with k.threads():
        grid_stride(k, I64(total), item)
    k.finish()
    return KernelLaunch(symbol, grid_for(total), params, f"epilogue of {launch.what}")


def _batch_offset_ir(b: ir.IRBuilder, lay: _Layout, t: ir.Value, strides: list[int]) -> ir.Value:
    off: ir.Value = I64(0)
    rest = t
    for d in range(lay.rank - 1, -1, -1):
        if d == 0:
            i = rest
        else:
            i = b.urem(rest, I64(lay.sizes[d]))
            rest = b.udiv(rest, I64(lay.sizes[d]))
        if strides[d]:
            off = b.add(off, b.mul(i, I64(strides[d])))
    return off
