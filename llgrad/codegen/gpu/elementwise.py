"""Elementwise (and fused elementwise) launches on the GPU.

The launch's index space `[hi - lo, size_1, ..., size_{r-1}]` is flattened; each thread
takes items `ctaid * ntid + tid`, then every `nctaid * ntid`-th one (a grid-stride loop),
decomposes the flat index into the multi-index, and evaluates the same scalar DAG as the
CPU kernel (`codegen.elementwise.evaluate`). Consecutive threads take consecutive
innermost indices, so contiguous operands are read and written in coalesced runs.
"""

from __future__ import annotations

from ...schedule.elementwise import ElementwiseKernel, out_dtypes
from ...schedule.program import Launch
from ..elementwise import load_evaluate_store
from ..loops import I64
from ..scalar import LLVMScalar
from .common import Block, Geometry, decompose, grid_for
from .kernel import GpuKernel, grid_stride


def geometry(launch: Launch) -> Geometry:
    spec: ElementwiseKernel = launch.spec
    return grid_for(_total(launch.block, spec.rank))


def _total(block: list, rank: int) -> int:
    n = int(block[1]) - int(block[0])
    for d in range(1, rank):
        n *= int(block[1 + d])
    return n


def build(k: GpuKernel, launch: Launch) -> None:
    spec: ElementwiseKernel = launch.spec
    expr, rank = spec.expr, spec.rank
    blk = Block(k, launch.block)
    outs = out_dtypes(expr)
    dtypes = list(outs) + list(expr.in_dtypes)
    n_out = len(outs)
    lo = blk.value(0)
    sizes = [blk.value(1) - lo] + [blk.value(1 + d) for d in range(1, rank)]
    total = _total(launch.block, rank)
    base = 2 + (rank - 1)
    ptrs, strides = [], []
    for j in range(len(dtypes)):
        slot = base + j * (1 + rank)
        ptrs.append(blk.ptr(slot))
        strides.append([blk.value(slot + 1 + d) for d in range(rank)])
    b = k.b
    s = LLVMScalar(b)

    def item(flat) -> None:
        index = decompose(b, flat, sizes, total)
        index[0] = b.add(index[0], I64(lo))
        offsets = []
        for st in strides:
            off = I64(0)
            for i, stride in zip(index, st):
                if stride:
                    off = b.add(off, b.mul(i, I64(stride)))
            offsets.append(off)
        s._index = offsets[0]
        operands = list(zip(ptrs, offsets))
        load_evaluate_store(s, expr, operands[n_out:], operands[:n_out])

    with k.threads():
        grid_stride(k, I64(total), item)
