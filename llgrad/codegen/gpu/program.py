"""A lowered graph (`schedule.program.Program`) as GPU kernels and a launch list.

`emit(program, mode)` builds one LLVM module with a kernel per launch (`L0`, `L1`, ...)
for the GPU (`mode="ptx"`) or for the grid emulator (`mode="host"`), and returns the
steps a call runs in order: `KernelLaunch`es (symbol, grid, pointer parameters) and
`GemmStep`s (a matmul launch: cuBLAS on the device, then its epilogue, if any, as a
kernel of its own). Every kernel family's generator reads the same argument block the
CPU kernel would (`codegen.gpu.common`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Union

from llvmlite import ir

from ...passes import fusion as fusion_pass, lower as lower_pass, memory as memory_pass
from ...schedule.elementwise import ElementwiseKernel
from ...schedule.matmul import MatmulKernel
from ...schedule.program import Launch, Program, Ptr
from ...schedule.reduce import ReduceKernel
from ...schedule.row import RowKernel
from ...schedule.index import IndexKernel, NonzeroKernel
from . import elementwise, index, matmul, reduce, row
from .common import GemmStep, Geometry, KernelLaunch, UnsupportedOnGpu, pointer_params
from .kernel import GpuKernel


Step = Union[KernelLaunch, GemmStep]


def _families() -> dict[type, Any]:
    return {
        ElementwiseKernel: elementwise,
        ReduceKernel: reduce,
        RowKernel: row,
        IndexKernel: index,
        NonzeroKernel: index,
    }


@dataclass
class GpuModule:
    """The kernels of one program: the module's IR text and the steps a call runs."""

    ir_text: str
    steps: list[Step]
    mode: str
    symbols: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line per step: kernel, grid and block, or the gemm calls."""
        return "\n".join(str(st) for st in self.steps)


def emit(program: Program, mode: str, name: str = "graph") -> GpuModule:
    """Kernels for every launch of `program` (see the module docstring)."""
    module = ir.Module(name=f"{name}_{mode}")
    families = _families()
    steps: list[Step] = []
    symbols: list[str] = []
    for i, launch in enumerate(program.launches):
        symbol = f"{name}_L{i}"
        if isinstance(launch.spec, MatmulKernel):
            steps.append(matmul.plan(launch, module, symbol, mode))
            if steps[-1].epilogue is not None:
                symbols.append(steps[-1].epilogue.symbol)
            continue
        family = families.get(type(launch.spec))
        if family is None:
            raise UnsupportedOnGpu(
                f"{type(launch.spec).__name__} launches ({launch.what}) have no GPU kernel yet"
            )
        steps.append(kernel_launch(module, launch, family, symbol, mode))
        symbols.append(symbol)
    return GpuModule(str(module), steps, mode, symbols)


def kernel_launch(
    module: ir.Module, launch: Launch, family: Any, symbol: str, mode: str
) -> KernelLaunch:
    """Build `launch`'s kernel with `family`'s generator; its launch record."""
    geometry: Geometry = family.geometry(launch)
    params = pointer_params(launch.block)
    k = GpuKernel(module, symbol, len(params), mode)
    family.build(k, launch)
    k.finish()
    return KernelLaunch(symbol, geometry, params, launch.what)


def resolve(p: Ptr, bases: dict[str, int], buffer_base: Any) -> int:
    """A `Ptr`'s device address: its buffer's base (`buffer_base(buffer)`) + offsets."""
    if p.extra:
        return bases[p.extra]
    return buffer_base(p.buffer) + p.byte_offset


# Pieces a lowering splits a launch into where the CPU would split it across threads: the
# partial sums of a full reduction and the column partials of a row kernel, one piece per
# block (about two blocks per multiprocessor of a large GPU). LLGRAD_GPU_PIECES sets it.
PIECES = int(os.environ.get("LLGRAD_GPU_PIECES", "256"))
# elements from which a row kernel or a reduction is cut into pieces (one block each):
# below it one block does the whole launch
MIN_WORK = 1 << 14


@dataclass
class Lowered:
    """A graph through the GPU pipeline: fusion plan, schedule, memory plan, kernels."""

    fusion: Any
    program: Program
    plan: Any
    module: GpuModule


def lower_graph(graph: Any, mode: str, name: str | None = None) -> Lowered:
    """fuse -> lower (in `PIECES` pieces) -> plan the arena -> emit GPU kernels."""
    fusion = fusion_pass.fuse(graph)
    program = lower_pass.lower(
        fusion, PIECES, lambda n, m, k, d: False, None, lambda d: False, MIN_WORK
    )
    views = {}
    for v, r in fusion.views.items():
        b = program.node_buffers.get(r.base)
        if b is not None:
            views[v] = (b, r.layout)
    plan = memory_pass.plan_buffers(program.buffers, views, fusion.names)
    module = emit(program, mode, name or f"g_{graph.name}")
    return Lowered(fusion, program, plan, module)
