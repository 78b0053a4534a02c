"""The grid emulator's program runner: a lowered graph's GPU kernels, compiled for the
host (`mode="host"`), run over NumPy buffers.

`EmulatedGraph(graph)(*arrays)` runs every step of `program.lower_graph(graph, "host")`
in order -- each kernel through its host function (every block and thread of its grid),
each gemm through NumPy with cuBLAS's column-major arguments -- and returns the outputs
as arrays. Tests compare it with the CPU path (`CompiledGraph`) to check the GPU kernels'
indexing, reduction trees and phases without a GPU; `LLGRAD_CUDA_EMULATE=1` runs whole
programs on the same host functions through the CUDA runtime's emulated device.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from ...ir.dtypes import bfloat16
from ...schedule.program import Buffer, Ptr
from ..target import get_target
from .common import KernelLaunch
from .kernel import EMULATED_DEVICE_OFFSET
from .program import GemmStep, Lowered, lower_graph

_HOST_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def np_dtype(d: Any) -> Any:
    """The NumPy dtype that holds a dtype's bytes (bfloat16 as uint16)."""
    return np.uint16 if d is bfloat16 else d.np


def host_gemm(
    dtype: str,
    transa: bool,
    transb: bool,
    m: int,
    n: int,
    k: int,
    alpha: float,
    a: int,
    lda: int,
    stride_a: int,
    b: int,
    ldb: int,
    stride_b: int,
    beta: float,
    c: int,
    ldc: int,
    stride_c: int,
    batch: int,
) -> None:
    """cuBLAS's `gemmStridedBatched` on host addresses (column-major), with NumPy."""
    t = np.dtype(dtype)
    size = t.itemsize

    def matrix(ptr: int, rows: int, cols: int, ld: int, stride: int, i: int) -> np.ndarray:
        if rows == 0 or cols == 0:
            return np.zeros((rows, cols), t)
        span = (ld * (cols - 1) + rows) * size
        raw = (ctypes.c_char * span).from_address(ptr + i * stride * size)
        flat = np.frombuffer(raw, dtype=t)
        return np.lib.stride_tricks.as_strided(flat, (rows, cols), (size, ld * size))

    for i in range(batch):
        op_a = matrix(a, k if transa else m, m if transa else k, lda, stride_a, i)
        op_b = matrix(b, n if transb else k, k if transb else n, ldb, stride_b, i)
        if transa:
            op_a = op_a.T
        if transb:
            op_b = op_b.T
        out = matrix(c, m, n, ldc, stride_c, i)
        product = alpha * (op_a.astype(np.float64) @ op_b.astype(np.float64))
        if beta != 0.0:
            product += beta * out
        out[...] = product.astype(t)


class EmulatedGraph:
    """A graph's GPU kernels run on the host (see the module docstring)."""

    def __init__(self, graph: Any):
        self.graph = graph
        self.lowered: Lowered = lower_graph(graph, "host", "emu")
        module = self.lowered.module
        compiled = get_target().compile(module.ir_text, module.symbols, name="gpu_emulated")
        self._compiled = compiled  # keeps the code alive
        self._functions = {s: _HOST_KERNEL(compiled.addresses[s]) for s in module.symbols}
        self.errors: list[tuple[Any, int, int]] = []  # set by each call (`_read_errors`)

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        program, plan = self.lowered.program, self.lowered.plan
        keep: list[np.ndarray] = []
        inputs = []
        for buf, x in zip(program.inputs, arrays):
            a = np.ascontiguousarray(x)
            keep.append(a)
            inputs.append(a)
        outputs = [np.empty(o.shape, np_dtype(o.dtype)) for o in self.graph.outputs]
        arena = np.zeros(max(plan.arena_bytes, 64) + 64, np.uint8)
        arena_base = (arena.ctypes.data + 63) // 64 * 64
        consts: dict[int, np.ndarray] = {}

        def base_of(buf: Buffer) -> int:
            if buf.kind == "input":
                return inputs[buf.slot].ctypes.data
            if buf.kind == "output":
                return outputs[buf.slot].ctypes.data
            if buf.kind == "const":
                c = consts.get(id(buf))
                if c is None:
                    c = consts[id(buf)] = np.frombuffer(bytearray(buf.payload or b"\0"), np.uint8)
                return c.ctypes.data
            return arena_base + buf.offset

        def address(p: Ptr) -> int:
            if p.extra:
                raise RuntimeError(f"the emulator has no address for {p.extra!r}")
            return base_of(p.buffer) + p.byte_offset

        for step in self.lowered.module.steps:
            if isinstance(step, KernelLaunch):
                self._launch(step, address)
            else:
                self._gemm(step, address)
        self.errors = self._read_errors(base_of)
        return outputs

    def _read_errors(self, base_of: Callable[[Buffer], int]) -> list[tuple[Any, int, int]]:
        """The error records the last call's kernels set: `(launch, value, k)` for every
        launch (`program.errors`) whose 32-byte record has its flag set (an index kernel's
        out-of-range index `value` of index tensor `k`; the CPU path raises IndexError)."""
        program = self.lowered.program
        if program.error_buffer is None:
            return []
        base = base_of(program.error_buffer)
        found = []
        for launch in program.errors:
            at = base + launch.err.byte_offset
            flag, value, k = (ctypes.c_int64 * 3).from_address(at)
            if flag:
                found.append((launch, int(value), int(k)))
        return found

    def _launch(self, step: KernelLaunch, address: Callable[[Ptr], int]) -> None:
        params = (ctypes.c_int64 * max(1, len(step.params)))(
            *[address(p) + EMULATED_DEVICE_OFFSET for p in step.params]
        )
        g = step.geometry
        dims = (ctypes.c_int64 * 7)(g.blocks, 1, 1, g.threads, 1, 1, g.shared)
        self._functions[step.symbol](ctypes.addressof(params), ctypes.addressof(dims))

    def _gemm(self, step: GemmStep, address: Callable[[Ptr], int]) -> None:
        for call in step.calls:
            host_gemm(
                step.dtype,
                call["transa"],
                call["transb"],
                call["m"],
                call["n"],
                call["k"],
                call["alpha"],
                address(call["a"]) + call["a_off"],
                call["lda"],
                call["stride_a"],
                address(call["b"]) + call["b_off"],
                call["ldb"],
                call["stride_b"],
                call["beta"],
                address(call["c"]) + call["c_off"],
                call["ldc"],
                call["stride_c"],
                call["batch"],
            )
        if step.epilogue is not None:
            self._launch(step.epilogue, address)
