"""The grid emulator backend (`LLGRAD_CUDA_EMULATE=1`): CUDA's runtime surface on host memory.

"Device" memory is host memory owned by NumPy buffers (64-byte aligned). A block's `.ptr`
is its host address plus `EMULATED_DEVICE_OFFSET` (2^47, outside user space): host code
that mistakes a device pointer for host memory faults, as it would with a GPU, and the
copies, the gemm and the host builds of the kernels take the offset off.
Kernels are the host builds of each GPU kernel, `void f(int64_t *params, int64_t *dims)`
with `dims = [gx, gy, gz, bx, by, bz, shared]`, which loop over every block and thread
themselves; `launch` validates the launch shape as the driver would and makes one ctypes
call. Streams and events are synchronous (all work is done when a call returns); events
record `time.perf_counter()`. `gemm` runs NumPy on strided views of the operands with
cuBLAS's column-major semantics (beta == 0 does not read C; batch strides may be 0).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...codegen.gpu.kernel import EMULATED_DEVICE_OFFSET as OFFSET
from .allocator import CachingAllocator, OutOfMemory
from .cublas import check_gemm_args
from .driver import Backend, CudaError, Event, Function, Module, Stream

__all__ = [
    "EmulatorBackend",
    "HostFunction",
    "HostModule",
    "HostStream",
    "HostEvent",
    "DEVICE_NAME",
]

DEVICE_NAME = "llgrad grid emulator (host)"
ALIGNMENT = 64
# sm_90's limits, which the emulator enforces so that bad launch shapes fail here too.
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = ((1 << 31) - 1, 65535, 65535)
MAX_SHARED_PER_BLOCK = 227 * 1024

_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_INVALID_VALUE = 1


def _invalid(call: str, detail: str) -> CudaError:
    return CudaError(call, _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", detail)


def _host_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 16 << 30


class HostFunction(Function):
    """A host-compiled kernel at `address`, called as `void f(int64_t*, int64_t*)`."""

    def __init__(self, name: str, address: int) -> None:
        self.name = name
        self.address = int(address)
        self.cfunc = _KERNEL(self.address)
        self.attributes = {
            "registers": 0,
            "shared_bytes": 0,
            "local_bytes": 0,
            "max_threads": MAX_THREADS_PER_BLOCK,
        }


class HostModule(Module):
    """The host kernels given to `load_host`, by name."""

    def __init__(self, addresses: dict[str, int]) -> None:
        self.functions = {name: HostFunction(name, addr) for name, addr in addresses.items()}

    def function(self, name: str) -> Function:
        """The host kernel `name`; CudaError (CUDA_ERROR_NOT_FOUND) when the module lacks it."""
        try:
            return self.functions[name]
        except KeyError:
            raise CudaError(f"cuModuleGetFunction({name!r})", 500, "CUDA_ERROR_NOT_FOUND") from None


class HostEvent(Event):
    """A synchronous event: `record` notes `time.perf_counter()`."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.enable_timing = bool(enable_timing)
        self.time: float | None = None
        self.handle = id(self)

    def record(self, stream: Stream | None = None) -> None:
        """Note the time (all earlier work has already run)."""
        self.time = time.perf_counter()

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def query(self) -> bool:
        """Always True: emulated work is finished when its call returns."""
        return True

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds between the two records; both need enable_timing and a record."""
        if not (self.enable_timing and getattr(end, "enable_timing", False)):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        t1 = getattr(end, "time", None)
        if self.time is None or t1 is None:
            raise CudaError(
                "cuEventElapsedTime",
                400,
                "CUDA_ERROR_INVALID_HANDLE",
                "both events must be recorded first",
            )
        return (t1 - self.time) * 1000.0


class HostStream(Stream):
    """A synchronous stream: work issued to it has run when the call returns."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    @property
    def cuda_stream(self) -> int:
        """The stream's handle as an int (0 for the default stream)."""
        return self.handle

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def query(self) -> bool:
        """Always True."""
        return True

    def wait_event(self, event: Event) -> None:
        """Nothing to wait for (the event's work has run)."""

    def record_event(self, event: Event | None = None) -> Event:
        """Record `event` (a new one when None) and return it."""
        ev = event if event is not None else HostEvent()
        ev.record(self)
        return ev


class EmulatorBackend(Backend):
    """One emulated device over host memory (see the module docstring)."""

    emulated = True

    def __init__(self, memory_limit: int | None = None) -> None:
        """`memory_limit`: bytes the emulated device may hold (default: the host's RAM)."""
        self._limit = int(memory_limit) if memory_limit is not None else _host_memory()
        self._buffers: dict[int, np.ndarray] = {}
        self._held = 0
        self._buf_lock = threading.Lock()
        self._default = HostStream(0)
        self._current: HostStream = self._default
        self._next_stream = 1
        self.allocator = CachingAllocator(
            self._raw_alloc,
            self._raw_free,
            device_name="GPU 0 (emulated)",
            total_memory=lambda: self._limit,
        )

    def _raw_alloc(self, nbytes: int) -> int:
        with self._buf_lock:
            if self._held + nbytes > self._limit:
                raise OutOfMemory(nbytes)
            try:
                buf = np.empty(nbytes + ALIGNMENT, np.uint8)
            except MemoryError:
                raise OutOfMemory(nbytes) from None
            base = buf.ctypes.data
            ptr = (base + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT + OFFSET
            self._buffers[ptr] = buf
            self._held += nbytes
            return ptr

    def _raw_free(self, ptr: int) -> None:
        with self._buf_lock:
            buf = self._buffers.pop(ptr)
            self._held -= buf.nbytes - ALIGNMENT

    # ---- properties ------------------------------------------------------------------------
    def _check_index(self, index: int) -> None:
        if index != 0:
            raise RuntimeError("CUDA error: invalid device ordinal")

    def device_count(self) -> int:
        """One emulated device."""
        return 1

    def device_name(self, index: int = 0) -> str:
        """'llgrad grid emulator (host)'."""
        self._check_index(index)
        return DEVICE_NAME

    def capability(self, index: int = 0) -> tuple[int, int]:
        """(9, 0): the emulator follows sm_90's limits."""
        self._check_index(index)
        return (9, 0)

    def total_memory(self, index: int = 0) -> int:
        """The memory limit (default: the host's physical memory)."""
        self._check_index(index)
        return self._limit

    def multiprocessors(self, index: int = 0) -> int:
        """os.cpu_count()."""
        self._check_index(index)
        return os.cpu_count() or 1

    # ---- copies -------------------------------------------------------------------------------
    def copy_htod(
        self,
        dst: int,
        src_host: int,
        nbytes: int,
        stream: Stream | None = None,
        non_blocking: bool = False,
    ) -> None:
        """memmove (always complete on return)."""
        if nbytes > 0:
            ctypes.memmove(dst - OFFSET, src_host, nbytes)

    def copy_dtoh(self, dst_host: int, src: int, nbytes: int, stream: Stream | None = None) -> None:
        """memmove."""
        if nbytes > 0:
            ctypes.memmove(dst_host, src - OFFSET, nbytes)

    def copy_dtod(self, dst: int, src: int, nbytes: int, stream: Stream | None = None) -> None:
        """memmove."""
        if nbytes > 0:
            ctypes.memmove(dst - OFFSET, src - OFFSET, nbytes)

    def memset(self, ptr: int, byte: int, nbytes: int, stream: Stream | None = None) -> None:
        """ctypes.memset with the low 8 bits of `byte`."""
        if nbytes > 0:
            ctypes.memset(ptr - OFFSET, int(byte) & 0xFF, nbytes)

    # ---- modules and launches -----------------------------------------------------------------
    def load_ptx(self, ptx: str, name: str = "") -> Module:
        """The emulator cannot run PTX: raises RuntimeError (use load_host with host builds)."""
        raise RuntimeError(
            "the grid emulator runs host builds of kernels (load_host), not PTX; "
            f"cannot load PTX module {name!r}"
            if name
            else "the grid emulator runs host builds of kernels (load_host), not PTX"
        )

    def load_host(self, addresses: dict[str, int]) -> Module:
        """Wrap host kernels `void f(int64_t *params, int64_t *dims)` by name."""
        return HostModule(addresses)

    def launch(
        self,
        fn: Function,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        params: Sequence[int],
        stream: Stream | None = None,
    ) -> None:
        """Check the shape against sm_90's limits, then call fn(params, dims) once."""
        gx, gy, gz = grid
        bx, by, bz = block
        call = f"cuLaunchKernel({fn.name})"
        if (
            min(gx, gy, gz, bx, by, bz) < 1
            or gx > MAX_GRID_DIMS[0]
            or gy > MAX_GRID_DIMS[1]
            or gz > MAX_GRID_DIMS[2]
        ):
            raise _invalid(call, f"grid={tuple(grid)} block={tuple(block)}")
        if (
            bx > MAX_BLOCK_DIMS[0]
            or by > MAX_BLOCK_DIMS[1]
            or bz > MAX_BLOCK_DIMS[2]
            or bx * by * bz > MAX_THREADS_PER_BLOCK
        ):
            raise _invalid(call, f"block={tuple(block)} exceeds {MAX_THREADS_PER_BLOCK} threads")
        if shared < 0 or shared > MAX_SHARED_PER_BLOCK:
            raise _invalid(call, f"shared={shared} exceeds {MAX_SHARED_PER_BLOCK} bytes")
        n = len(params)
        values = (ctypes.c_int64 * max(n, 1))(*params)
        dims = (ctypes.c_int64 * 7)(gx, gy, gz, bx, by, bz, shared)
        f: HostFunction = fn  # type: ignore[assignment]  # this backend made it
        f.cfunc(values, dims)

    def synchronize(self) -> None:
        """Nothing to wait for."""

    # ---- streams and events ---------------------------------------------------------------------
    def default_stream(self) -> Stream:
        """The default stream (handle 0)."""
        return self._default

    def current_stream(self) -> Stream:
        """The current stream (process-wide)."""
        return self._current

    def set_current_stream(self, s: Stream) -> None:
        """Make `s` current."""
        if not isinstance(s, HostStream):
            raise TypeError(f"expected an emulator stream, got {type(s).__name__}")
        self._current = s

    def new_stream(self) -> Stream:
        """A new (synchronous) stream with a fresh handle."""
        with self._buf_lock:
            handle = self._next_stream
            self._next_stream += 1
        return HostStream(handle)

    def new_event(self, enable_timing: bool = False) -> Event:
        """A new host event."""
        return HostEvent(enable_timing)

    # ---- gemm -------------------------------------------------------------------------------------
    def gemm(
        self,
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
        stream: Stream | None = None,
    ) -> None:
        """NumPy over strided views with cublas<t>gemmStridedBatched's column-major semantics."""
        dt: np.dtype
        if dtype == "float32":
            dt, call = np.dtype(np.float32), "cublasSgemmStridedBatched"
        elif dtype == "float64":
            dt, call = np.dtype(np.float64), "cublasDgemmStridedBatched"
        else:
            raise ValueError(f"gemm supports float32 and float64, not {dtype!r}")
        check_gemm_args(call, transa, transb, m, n, k, lda, ldb, ldc, batch)
        if m == 0 or n == 0 or batch == 0:
            return
        # op(A) is m x k: element (i, l) sits at i + l*lda, or at l + i*lda when transposed.
        a, b, c = a - OFFSET, b - OFFSET, c - OFFSET
        c_view = _view(c, dt, (batch, m, n), (stride_c, 1, ldc))
        if k == 0 or alpha == 0:
            prod = np.zeros((batch, m, n), dt)
        else:
            a_view = _view(
                a, dt, (batch, m, k), (stride_a, lda, 1) if transa else (stride_a, 1, lda)
            )
            b_view = _view(
                b, dt, (batch, k, n), (stride_b, ldb, 1) if transb else (stride_b, 1, ldb)
            )
            prod = np.matmul(a_view, b_view)
            if alpha != 1:
                prod *= dt.type(alpha)
        if beta != 0:
            prod += dt.type(beta) * c_view
        c_view[...] = prod


def _view(ptr: int, dt: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """A writable NumPy view of host memory at `ptr` with element strides `strides`."""
    extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    raw = (ctypes.c_char * (extent * dt.itemsize)).from_address(ptr)
    base = np.frombuffer(raw, dt)  # type: ignore[call-overload]
    return as_strided(base, shape, tuple(s * dt.itemsize for s in strides))
