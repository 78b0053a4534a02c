"""What every GPU kernel generator shares: a launch's argument block as constants and
kernel parameters, the launch geometry, and the flat-index decomposition.

A compiled graph's launches have static shapes: every size and stride in a launch's
argument block (`schedule.program.Launch.block`) is a known integer. GPU kernels bake
them in as constants (division by a constant size becomes a multiply and shift), and take
as parameters only the block's pointers (`Ptr` slots), in block order. So the same
lowering (`passes.lower`) that builds the CPU's argument blocks decides the GPU kernels'
layouts, and a GPU kernel is specialized to its launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from llvmlite import ir

from ...schedule.program import Ptr
from ..loops import I64
from .kernel import GpuKernel

I32 = ir.IntType(32)
THREADS = 256  # threads per block of elementwise and reduction kernels
MAX_BLOCKS = 1 << 16  # grid-stride kernels never launch more blocks than this


@dataclass
class Geometry:
    """A launch's grid: `blocks` blocks of `threads` threads, `shared` dynamic bytes."""

    blocks: int
    threads: int
    shared: int = 0

    def __str__(self) -> str:
        return f"grid {self.blocks} x block {self.threads}"


@dataclass
class KernelLaunch:
    """One GPU launch of a compiled graph: the kernel's symbol, its geometry and the
    pointers it takes (`Ptr`s, resolved to device addresses at call time)."""

    symbol: str
    geometry: Geometry
    params: list[Ptr]
    what: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.symbol}: {self.geometry} ({self.what})"


class Block:
    """A launch's argument block: integers as constants, pointers as kernel parameters."""

    def __init__(self, k: GpuKernel, block: Sequence[Any]):
        self.k = k
        self.values = list(block)
        self.param_of: dict[int, int] = {}
        for j, v in enumerate(self.values):
            if isinstance(v, Ptr):
                self.param_of[j] = len(self.param_of)

    def int(self, j: int) -> ir.Value:
        return I64(int(self.values[j]))

    def value(self, j: int) -> int:
        return int(self.values[j])

    def ptr(self, j: int) -> ir.Value:
        return self.k.pointer(self.param_of[j])


def pointer_params(block: Sequence[Any]) -> list[Ptr]:
    """The block's pointers in order: the kernel's parameters."""
    return [v for v in block if isinstance(v, Ptr)]


def grid_for(total: int, threads: int = THREADS) -> Geometry:
    """A grid-stride launch over `total` items: one item per thread, capped."""
    return Geometry(max(1, min(MAX_BLOCKS, -(-total // threads))), threads)


def decompose(b: ir.IRBuilder, flat: ir.Value, sizes: Sequence[int], total: int) -> list[ir.Value]:
    """`flat`'s multi-index over `sizes` (row-major), as int64s; 32-bit arithmetic when
    `total` fits (64-bit division is a long sequence on the GPU)."""
    narrow = total < (1 << 31)
    x = b.trunc(flat, I32) if narrow else flat
    typ = I32 if narrow else I64
    out: list[ir.Value] = []
    for size in reversed(sizes[1:]):
        q = b.udiv(x, typ(size))
        out.append(b.sub(x, b.mul(q, typ(size))))
        x = q
    out.append(x)
    out.reverse()
    return [b.zext(v, I64) if narrow else v for v in out]


class UnsupportedOnGpu(RuntimeError):
    """A launch whose kernel family has no GPU generator yet."""


@dataclass
class GemmStep:
    """A matmul launch: `calls` cuBLAS gemms (column-major arguments, pointers as `Ptr`s
    plus element offsets), then the epilogue kernel when the matmul has one."""

    dtype: str
    calls: list[dict[str, Any]]
    epilogue: KernelLaunch | None = None
    what: str = ""

    def __str__(self) -> str:
        shapes = ", ".join(
            f"{c['m']}x{c['n']}x{c['k']}" + (f" x{c['batch']}" if c["batch"] > 1 else "")
            for c in self.calls
        )
        tail = f"; then {self.epilogue}" if self.epilogue is not None else ""
        return f"cuBLAS {self.dtype} gemm ({shapes}) ({self.what}){tail}"
