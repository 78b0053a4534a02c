"""`CudaGraph`: a graph with static shapes compiled into GPU kernels and run on a stream.

Building one runs the GPU pipeline (`codegen.gpu.program.lower_graph`: fusion, lowering
in `PIECES` pieces, the arena plan, one kernel per launch), then turns the module into
PTX for the device's architecture and loads it (`cuModuleLoadData`); under the grid
emulator (`LLGRAD_CUDA_EMULATE=1`) the same kernels are compiled for the host instead.
Module constants are copied to the device once; the arena is one device block per graph,
reused by every call (calls are ordered on one stream).

A call takes device buffers (`DeviceArg`s: an address, dtype and shape, dense), allocates
the outputs through `alloc` (a callback of the frontend, which wraps them in tensors) and
enqueues every step: kernel launches and cuBLAS gemms. Nothing waits for the device.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from ...codegen.gpu import program as gp
from ...codegen.gpu.common import KernelLaunch
from ...codegen.gpu.ptx import to_ptx
from ...codegen.target import get_target
from ...schedule.program import Buffer, Ptr
from . import driver


def arch_of(backend: Any) -> str:
    """The PTX target of the device (sm_80 for the emulator's reports)."""
    major, minor = backend.capability(0)
    return f"sm_{major}{minor}"


def load_kernels(
    be: Any, ir_text: str, symbols: Sequence[str], name: str
) -> tuple[dict[str, Any], str, Any]:
    """Load a module's kernels on the backend: PTX through the driver's JIT, or under the
    emulator the host build of the same kernels. Returns (functions by symbol, the PTX
    ("" under the emulator), what must be kept alive)."""
    if not be.emulated:
        ptx = to_ptx(ir_text, arch_of(be))
        loaded = be.load_ptx(ptx, name)
        return {s: loaded.function(s) for s in symbols}, ptx, loaded

    compiled = get_target().compile(ir_text, list(symbols), name=f"gpu_emulated_{name}")
    loaded = be.load_host({s: compiled.addresses[s] for s in symbols})
    return {s: loaded.function(s) for s in symbols}, "", (compiled, loaded)


class CudaGraph:
    """A graph's GPU executable; `run(addresses, alloc)` enqueues one call."""

    def __init__(self, graph: Any, name: str = "g"):
        self.graph = graph
        be = driver.get()
        self.backend = be
        self.mode = "host" if be.emulated else "ptx"
        t0 = time.perf_counter()
        self.lowered = gp.lower_graph(graph, self.mode, name)
        t1 = time.perf_counter()
        module = self.lowered.module
        self.functions, self.ptx, self._keep = load_kernels(
            be, module.ir_text, module.symbols, name
        )
        t2 = time.perf_counter()
        self.seconds = {"lower": t1 - t0, "codegen": t2 - t1}
        program = self.lowered.program
        self._consts: dict[int, Any] = {}
        for b in program.buffers:
            if b.kind == "const":
                data = b.payload or b"\0"
                block = be.alloc(len(data))
                import ctypes

                host = ctypes.create_string_buffer(data, len(data))
                be.copy_htod(block.ptr, ctypes.addressof(host), len(data))
                self._consts[id(b)] = block
        self._arena = be.alloc(max(self.lowered.plan.arena_bytes, 256))
        self._steps = [self._prepare(st) for st in module.steps]

    # -- a step's parameters as (kind, slot-or-address, offset) ---------------------------
    def _source(self, p: Ptr) -> tuple[int, int]:
        """(where, offset): where is -1-slot for an input, -1000-slot for an output, else an
        absolute base address (arena, constants)."""
        if p.extra:
            raise gp.UnsupportedOnGpu(f"a launch needs the host address {p.extra!r}")
        b: Buffer = p.buffer
        if b.kind == "input":
            return -1 - b.slot, p.byte_offset
        if b.kind == "output":
            return -1000 - b.slot, p.byte_offset
        if b.kind == "const":
            return self._consts[id(b)].ptr, p.byte_offset
        return self._arena.ptr + b.offset, p.byte_offset

    def _prepare(self, step: Any) -> tuple:
        if isinstance(step, KernelLaunch):
            g = step.geometry
            return (
                "kernel",
                self.functions[step.symbol],
                (g.blocks, 1, 1),
                (g.threads, 1, 1),
                g.shared,
                [self._source(p) for p in step.params],
            )
        calls = []
        for c in step.calls:
            calls.append((c, self._source(c["a"]), self._source(c["b"]), self._source(c["c"])))
        epilogue = self._prepare(step.epilogue) if step.epilogue is not None else None
        return ("gemm", step.dtype, calls, epilogue)

    # -- calling -----------------------------------------------------------------------------
    def run(self, inputs: Sequence[int], outputs: Sequence[int], stream: Any = None) -> None:
        """Enqueue one call: `inputs`/`outputs` are the device addresses of the graph's
        parameters and outputs (dense, of the graph's types)."""
        be = self.backend

        def addr(src: tuple[int, int]) -> int:
            where, off = src
            if where <= -1000:
                return outputs[-1000 - where] + off
            if where < 0:
                return inputs[-1 - where] + off
            return where + off

        for st in self._steps:
            if st[0] == "kernel":
                be.launch(st[1], st[2], st[3], st[4], [addr(s) for s in st[5]], stream)
                continue
            _, dtype, calls, epilogue = st
            for c, sa, sb, sc in calls:
                be.gemm(
                    dtype,
                    c["transa"],
                    c["transb"],
                    c["m"],
                    c["n"],
                    c["k"],
                    c["alpha"],
                    addr(sa) + c["a_off"],
                    c["lda"],
                    c["stride_a"],
                    addr(sb) + c["b_off"],
                    c["ldb"],
                    c["stride_b"],
                    c["beta"],
                    addr(sc) + c["c_off"],
                    c["ldc"],
                    c["stride_c"],
                    c["batch"],
                    stream,
                )
            if epilogue is not None:
                be.launch(
                    epilogue[1],
                    epilogue[2],
                    epilogue[3],
                    epilogue[4],
                    [addr(s) for s in epilogue[5]],
                    stream,
                )

    def describe(self) -> str:
        """The launches: kernel, grid and block; gemms."""
        return self.lowered.module.describe()

    def resources(self) -> dict[str, dict[str, Any]]:
        """Per kernel: registers, shared and local bytes, as the driver reports them."""
        return {s: dict(getattr(f, "attributes", {}) or {}) for s, f in self.functions.items()}


def alloc_outputs(graph: Any, alloc: Callable[[tuple, Any], Any]) -> list[Any]:
    """One new device tensor per graph output (through the frontend's `alloc`)."""
    return [alloc(o.shape, o.dtype) for o in graph.outputs]
