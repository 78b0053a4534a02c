"""The CUDA backend: selection (`available`, `get`, `emulating`) and the real driver backend.

`get()` makes the process's `Backend` on first call: the grid emulator (`emulator.py`, host
memory) when `LLGRAD_CUDA_EMULATE=1`, else `CudaBackend`, the driver API through NVIDIA's
`cuda-bindings` (imported here lazily, never at import time). `CudaBackend` drives device 0
through its primary context (the one the CUDA runtime, cuBLAS, CuPy and PyTorch share), made
current on each thread that calls in. Every driver call's `CUresult` is checked: a failure
raises `CudaError` naming the call and the error's name.

Kernel parameters: every kernel takes N 64-bit parameters (addresses or int64 values);
`launch` copies them into a per-function `c_int64[N]` array whose slot addresses sit in a
`void*[N]` array made once, so a launch builds no ctypes objects.
"""

from __future__ import annotations

import abc
import ctypes
import os
import threading
from typing import Any, Sequence

from .allocator import CachingAllocator, DeviceBlock, OutOfMemory

__all__ = [
    "available",
    "get",
    "emulating",
    "initialized",
    "device_count",
    "CudaError",
    "Backend",
    "Module",
    "Function",
    "Stream",
    "Event",
    "CudaBackend",
    "DeviceBlock",
    "EMULATE_ENV",
]

EMULATE_ENV = "LLGRAD_CUDA_EMULATE"

# Static + dynamic shared memory a block may use without opting in per function.
_DEFAULT_SHARED_LIMIT = 48 * 1024


class CudaError(RuntimeError):
    """A CUDA driver call failed: `.call` is the function's name, `.code` the CUresult value
    and `.error` its name (for example "CUDA_ERROR_OUT_OF_MEMORY")."""

    def __init__(self, call: str, code: int, error: str, detail: str = "") -> None:
        self.call = call
        self.code = int(code)
        self.error = error
        extra = f": {detail}" if detail else ""
        super().__init__(f"{call} failed with {error} ({self.code}){extra}")


# --------------------------------------------------------------------------------------
# the abstract interface both backends implement
# --------------------------------------------------------------------------------------


class Function(abc.ABC):
    """A kernel entry point: `.name`, and `.attributes` (registers, shared_bytes, local_bytes,
    max_threads; measured by the driver on the real backend, nominal on the emulator)."""

    name: str
    attributes: dict[str, int]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.attributes}>"


class Module(abc.ABC):
    """A loaded code object (a PTX module, or the emulator's host functions)."""

    @abc.abstractmethod
    def function(self, name: str) -> Function:
        """The kernel `name` of this module (KeyError/CudaError when it has none)."""


class Event(abc.ABC):
    """A marker in a stream's work, as `torch.cuda.Event`; `.handle` is the backend's handle."""

    handle: Any
    enable_timing: bool

    @abc.abstractmethod
    def record(self, stream: "Stream | None" = None) -> None:
        """Mark the point after all work issued so far to `stream` (default: the current one)."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait on the host until the work before the recorded point has finished."""

    @abc.abstractmethod
    def query(self) -> bool:
        """True when the work before the recorded point has finished."""

    @abc.abstractmethod
    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to `end` (both recorded, made with enable_timing)."""


class Stream(abc.ABC):
    """An in-order queue of device work; `.handle` is the backend's handle (CUstream or int)."""

    handle: Any

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait on the host until all work issued to this stream has finished."""

    @abc.abstractmethod
    def query(self) -> bool:
        """True when all work issued to this stream has finished."""

    @abc.abstractmethod
    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait for `event` (no host wait)."""

    @abc.abstractmethod
    def record_event(self, event: Event | None = None) -> Event:
        """Record `event` (a new one when None) on this stream and return it."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Stream)
            and type(other) is type(self)
            and int(other.handle) == int(self.handle)
        )

    def __hash__(self) -> int:
        return hash(int(self.handle))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} handle=0x{int(self.handle):x}>"


class Backend(abc.ABC):
    """One device's runtime: properties, caching allocator, copies, modules, launches,
    streams, events and gemm. Memory statistics and `alloc` come from the shared allocator."""

    emulated: bool
    allocator: CachingAllocator

    # ---- properties --------------------------------------------------------------------
    @abc.abstractmethod
    def device_count(self) -> int:
        """How many devices the backend sees."""

    @abc.abstractmethod
    def device_name(self, index: int = 0) -> str:
        """The device's name."""

    @abc.abstractmethod
    def capability(self, index: int = 0) -> tuple[int, int]:
        """The compute capability (major, minor)."""

    @abc.abstractmethod
    def total_memory(self, index: int = 0) -> int:
        """The device's memory in bytes."""

    @abc.abstractmethod
    def multiprocessors(self, index: int = 0) -> int:
        """The number of streaming multiprocessors."""

    # ---- memory --------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBlock:
        """A device block of `nbytes` bytes from the caching allocator (ptr 0 for 0 bytes)."""
        return self.allocator.allocate(nbytes)

    def memory_allocated(self) -> int:
        """Bytes in live blocks (each counted at its size class)."""
        return self.allocator.memory_allocated()

    def max_memory_allocated(self) -> int:
        """Peak of memory_allocated() since start or the last reset_peak_memory_stats()."""
        return self.allocator.max_memory_allocated()

    def memory_reserved(self) -> int:
        """Bytes held from the driver: live plus cached blocks."""
        return self.allocator.memory_reserved()

    def max_memory_reserved(self) -> int:
        """Peak of memory_reserved() since start or the last reset_peak_memory_stats()."""
        return self.allocator.max_memory_reserved()

    def reset_peak_memory_stats(self) -> None:
        """Set the peaks to the current values."""
        self.allocator.reset_peak_memory_stats()

    def empty_cache(self) -> None:
        """Give every cached block back to the driver."""
        self.allocator.empty_cache()

    def memory_stats(self) -> dict[str, int]:
        """The allocator's counters under torch.cuda.memory_stats() keys."""
        return self.allocator.stats()

    # ---- copies --------------------------------------------------------------------------
    @abc.abstractmethod
    def copy_htod(
        self,
        dst: int,
        src_host: int,
        nbytes: int,
        stream: Stream | None = None,
        non_blocking: bool = False,
    ) -> None:
        """Copy host bytes to the device; waits for the copy unless non_blocking."""

    @abc.abstractmethod
    def copy_dtoh(self, dst_host: int, src: int, nbytes: int, stream: Stream | None = None) -> None:
        """Copy device bytes to the host; returns once they are on the host."""

    @abc.abstractmethod
    def copy_dtod(self, dst: int, src: int, nbytes: int, stream: Stream | None = None) -> None:
        """Enqueue a device-to-device copy on the stream."""

    @abc.abstractmethod
    def memset(self, ptr: int, byte: int, nbytes: int, stream: Stream | None = None) -> None:
        """Enqueue setting `nbytes` bytes at `ptr` to `byte`."""

    # ---- modules and launches -----------------------------------------------------------
    @abc.abstractmethod
    def load_ptx(self, ptx: str, name: str = "") -> Module:
        """Load a PTX module (the driver JIT-compiles it); the emulator raises."""

    @abc.abstractmethod
    def load_host(self, addresses: dict[str, int]) -> Module:
        """Wrap host-compiled kernels `void f(int64_t *params, int64_t *dims)` (emulator only)."""

    @abc.abstractmethod
    def launch(
        self,
        fn: Function,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        params: Sequence[int],
        stream: Stream | None = None,
    ) -> None:
        """Enqueue kernel `fn` on the stream; `params` are its 64-bit parameters."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until all work on the device has finished."""

    # ---- streams and events --------------------------------------------------------------
    @abc.abstractmethod
    def default_stream(self) -> Stream:
        """The device's default stream."""

    @abc.abstractmethod
    def current_stream(self) -> Stream:
        """The stream work goes to when none is named (process-wide, not per thread)."""

    @abc.abstractmethod
    def set_current_stream(self, s: Stream) -> None:
        """Make `s` the current stream."""

    @abc.abstractmethod
    def new_stream(self) -> Stream:
        """A new stream that does not synchronize with the default stream."""

    @abc.abstractmethod
    def new_event(self, enable_timing: bool = False) -> Event:
        """A new event (timing off unless asked, as in torch)."""

    # ---- cuBLAS ---------------------------------------------------------------------------
    @abc.abstractmethod
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
        """Column-major strided-batched C = alpha*op(A)@op(B) + beta*C, as cublas<t>gemmStridedBatched."""


# --------------------------------------------------------------------------------------
# the real backend (cuda-bindings)
# --------------------------------------------------------------------------------------


def _bindings() -> Any:
    from cuda.bindings import driver as cu  # type: ignore[import-untyped]

    return cu


def _error_name(cu: Any, err: Any) -> str:
    try:
        res, name = cu.cuGetErrorName(err)
        if int(res) == 0 and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        pass
    return getattr(err, "name", f"CUresult {int(err)}")


def _check(cu: Any, call: str, res: tuple) -> Any:
    """Raise CudaError when res[0] is not CUDA_SUCCESS; else the returned value(s)."""
    err = res[0]
    if err != 0:
        raise CudaError(call, int(err), _error_name(cu, err))
    if len(res) == 1:
        return None
    return res[1] if len(res) == 2 else res[1:]


class CudaFunction(Function):
    """A kernel of a loaded PTX module; holds its reusable parameter buffers."""

    def __init__(
        self, backend: "CudaBackend", handle: Any, name: str, module: "CudaModule"
    ) -> None:
        self.backend = backend
        self.handle = handle
        self.name = name
        self.module = module  # keeps the module loaded while the function lives
        cu = backend.cu
        attr = cu.CUfunction_attribute
        get = cu.cuFuncGetAttribute
        self.attributes = {
            "registers": _check(
                cu, "cuFuncGetAttribute", get(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, handle)
            ),
            "shared_bytes": _check(
                cu, "cuFuncGetAttribute", get(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, handle)
            ),
            "local_bytes": _check(
                cu, "cuFuncGetAttribute", get(attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, handle)
            ),
            "max_threads": _check(
                cu, "cuFuncGetAttribute", get(attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, handle)
            ),
        }
        self._lock = threading.Lock()
        self._nparams = -1
        self._values: Any = None
        self._pointers: Any = None
        self._pointers_address = 0
        self._shared_ok = max(0, _DEFAULT_SHARED_LIMIT - self.attributes["shared_bytes"])

    def _buffers(self, n: int) -> None:
        self._values = (ctypes.c_int64 * n)()
        base = ctypes.addressof(self._values)
        self._pointers = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self._pointers_address = ctypes.addressof(self._pointers)
        self._nparams = n

    def _allow_shared(self, nbytes: int) -> None:
        cu = self.backend.cu
        _check(
            cu,
            "cuFuncSetAttribute",
            cu.cuFuncSetAttribute(
                self.handle,
                cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                int(nbytes),
            ),
        )
        self._shared_ok = int(nbytes)


class CudaModule(Module):
    """A PTX module loaded with cuModuleLoadData; unloaded when garbage-collected."""

    def __init__(self, backend: "CudaBackend", handle: Any, name: str) -> None:
        self.backend = backend
        self.handle = handle
        self.name = name
        self._functions: dict[str, CudaFunction] = {}

    def function(self, name: str) -> Function:
        """The entry point `name` (cuModuleGetFunction), made once per name."""
        fn = self._functions.get(name)
        if fn is None:
            cu = self.backend.cu
            self.backend._bind()
            handle = _check(
                cu,
                f"cuModuleGetFunction({name!r})",
                cu.cuModuleGetFunction(self.handle, name.encode()),
            )
            fn = self._functions[name] = CudaFunction(self.backend, handle, name, self)
        return fn

    def __del__(self) -> None:
        try:
            self.backend.cu.cuModuleUnload(self.handle)
        except Exception:
            pass


class CudaEvent(Event):
    """A driver event (cuEventCreate); destroyed when garbage-collected."""

    def __init__(self, backend: "CudaBackend", enable_timing: bool = False) -> None:
        cu = backend.cu
        self.backend = backend
        self.enable_timing = bool(enable_timing)
        flags = 0 if enable_timing else int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        backend._bind()
        self.handle = _check(cu, "cuEventCreate", cu.cuEventCreate(flags))
        self.recorded = False

    def record(self, stream: Stream | None = None) -> None:
        """cuEventRecord on `stream` (default: the backend's current stream)."""
        b = self.backend
        b._bind()
        s = stream if stream is not None else b._current
        _check(b.cu, "cuEventRecord", b.cu.cuEventRecord(self.handle, s.handle))
        self.recorded = True

    def synchronize(self) -> None:
        """cuEventSynchronize (returns at once when never recorded, as CUDA does)."""
        b = self.backend
        b._bind()
        _check(b.cu, "cuEventSynchronize", b.cu.cuEventSynchronize(self.handle))

    def query(self) -> bool:
        """cuEventQuery: True when done, False while CUDA_ERROR_NOT_READY."""
        b = self.backend
        b._bind()
        err = b.cu.cuEventQuery(self.handle)[0]
        if err == b.cu.CUresult.CUDA_ERROR_NOT_READY:
            return False
        _check(b.cu, "cuEventQuery", (err,))
        return True

    def elapsed_time(self, end: Event) -> float:
        """cuEventElapsedTime in milliseconds; both events need enable_timing=True."""
        if not (self.enable_timing and getattr(end, "enable_timing", False)):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        b = self.backend
        b._bind()
        return float(
            _check(b.cu, "cuEventElapsedTime", b.cu.cuEventElapsedTime(self.handle, end.handle))
        )

    def __del__(self) -> None:
        try:
            self.backend.cu.cuEventDestroy(self.handle)
        except Exception:
            pass


class CudaStream(Stream):
    """A driver stream; the default stream has handle 0 and is never destroyed."""

    def __init__(self, backend: "CudaBackend", handle: Any, owned: bool) -> None:
        self.backend = backend
        self.handle = handle
        self.owned = owned

    @property
    def cuda_stream(self) -> int:
        """The raw CUstream value as an int (torch's Stream.cuda_stream)."""
        return int(self.handle)

    def synchronize(self) -> None:
        """cuStreamSynchronize."""
        b = self.backend
        b._bind()
        _check(b.cu, "cuStreamSynchronize", b.cu.cuStreamSynchronize(self.handle))

    def query(self) -> bool:
        """cuStreamQuery: True when idle, False while CUDA_ERROR_NOT_READY."""
        b = self.backend
        b._bind()
        err = b.cu.cuStreamQuery(self.handle)[0]
        if err == b.cu.CUresult.CUDA_ERROR_NOT_READY:
            return False
        _check(b.cu, "cuStreamQuery", (err,))
        return True

    def wait_event(self, event: Event) -> None:
        """cuStreamWaitEvent: later work on this stream waits for `event`."""
        b = self.backend
        b._bind()
        _check(b.cu, "cuStreamWaitEvent", b.cu.cuStreamWaitEvent(self.handle, event.handle, 0))

    def record_event(self, event: Event | None = None) -> Event:
        """Record `event` (a new one without timing when None) on this stream."""
        ev = event if event is not None else CudaEvent(self.backend)
        ev.record(self)
        return ev

    def __del__(self) -> None:
        if self.owned:
            try:
                self.backend.cu.cuStreamDestroy(self.handle)
            except Exception:
                pass


class CudaBackend(Backend):
    """Device 0 through the driver API (cuda-bindings), its primary context made current."""

    emulated = False

    def __init__(self) -> None:
        cu = self.cu = _bindings()
        _check(cu, "cuInit", cu.cuInit(0))
        count = _check(cu, "cuDeviceGetCount", cu.cuDeviceGetCount())
        if count < 1:
            raise RuntimeError("CUDA driver found no device")
        self._devices = [_check(cu, "cuDeviceGet", cu.cuDeviceGet(i)) for i in range(count)]
        self.device = self._devices[0]
        self.context = _check(
            cu, "cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(self.device)
        )
        self._tls = threading.local()
        self._bind()
        self._success = cu.CUresult.CUDA_SUCCESS
        self._oom = cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY
        self._default = CudaStream(self, cu.CUstream(0), owned=False)
        self._current: CudaStream = self._default
        self._blas: Any = None
        self._blas_lock = threading.Lock()
        self.allocator = CachingAllocator(
            self._raw_alloc,
            self._raw_free,
            device_name=f"GPU 0 ({self.device_name(0)})",
            total_memory=lambda: self.total_memory(0),
        )

    def _bind(self) -> None:
        """Make the primary context current on the calling thread (once per thread)."""
        if not getattr(self._tls, "bound", False):
            _check(self.cu, "cuCtxSetCurrent", self.cu.cuCtxSetCurrent(self.context))
            self._tls.bound = True

    def _raw_alloc(self, nbytes: int) -> int:
        self._bind()
        err, ptr = self.cu.cuMemAlloc(nbytes)
        if err == self._oom:
            raise OutOfMemory(nbytes)
        _check(self.cu, "cuMemAlloc", (err,))
        return int(ptr)

    def _raw_free(self, ptr: int) -> None:
        self._bind()
        _check(self.cu, "cuMemFree", self.cu.cuMemFree(ptr))

    # ---- properties ----------------------------------------------------------------------
    def _dev(self, index: int) -> Any:
        if not 0 <= index < len(self._devices):
            raise RuntimeError("CUDA error: invalid device ordinal")
        return self._devices[index]

    def _attribute(self, index: int, name: str) -> int:
        cu = self.cu
        return int(
            _check(
                cu,
                "cuDeviceGetAttribute",
                cu.cuDeviceGetAttribute(getattr(cu.CUdevice_attribute, name), self._dev(index)),
            )
        )

    def device_count(self) -> int:
        """cuDeviceGetCount (only device 0 runs work)."""
        return len(self._devices)

    def device_name(self, index: int = 0) -> str:
        """cuDeviceGetName."""
        raw = _check(self.cu, "cuDeviceGetName", self.cu.cuDeviceGetName(256, self._dev(index)))
        return raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)

    def capability(self, index: int = 0) -> tuple[int, int]:
        """The compute capability from cuDeviceGetAttribute."""
        return (
            self._attribute(index, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            self._attribute(index, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        )

    def total_memory(self, index: int = 0) -> int:
        """cuDeviceTotalMem."""
        return int(_check(self.cu, "cuDeviceTotalMem", self.cu.cuDeviceTotalMem(self._dev(index))))

    def multiprocessors(self, index: int = 0) -> int:
        """CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT."""
        return self._attribute(index, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")

    # ---- copies --------------------------------------------------------------------------
    def _stream(self, stream: Stream | None) -> Any:
        return (stream if stream is not None else self._current).handle

    def copy_htod(
        self,
        dst: int,
        src_host: int,
        nbytes: int,
        stream: Stream | None = None,
        non_blocking: bool = False,
    ) -> None:
        """cuMemcpyHtoDAsync on the stream, then cuStreamSynchronize unless non_blocking (the
        driver stages pageable host memory itself, so the source may be reused on return)."""
        if nbytes <= 0:
            return
        self._bind()
        h = self._stream(stream)
        cu = self.cu
        _check(cu, "cuMemcpyHtoDAsync", cu.cuMemcpyHtoDAsync(dst, src_host, nbytes, h))
        if not non_blocking:
            _check(cu, "cuStreamSynchronize", cu.cuStreamSynchronize(h))

    def copy_dtoh(self, dst_host: int, src: int, nbytes: int, stream: Stream | None = None) -> None:
        """cuMemcpyDtoHAsync on the stream then cuStreamSynchronize."""
        if nbytes <= 0:
            return
        self._bind()
        h = self._stream(stream)
        cu = self.cu
        _check(cu, "cuMemcpyDtoHAsync", cu.cuMemcpyDtoHAsync(dst_host, src, nbytes, h))
        _check(cu, "cuStreamSynchronize", cu.cuStreamSynchronize(h))

    def copy_dtod(self, dst: int, src: int, nbytes: int, stream: Stream | None = None) -> None:
        """cuMemcpyDtoDAsync on the stream."""
        if nbytes <= 0:
            return
        self._bind()
        _check(
            self.cu,
            "cuMemcpyDtoDAsync",
            self.cu.cuMemcpyDtoDAsync(dst, src, nbytes, self._stream(stream)),
        )

    def memset(self, ptr: int, byte: int, nbytes: int, stream: Stream | None = None) -> None:
        """cuMemsetD8Async on the stream."""
        if nbytes <= 0:
            return
        self._bind()
        _check(
            self.cu,
            "cuMemsetD8Async",
            self.cu.cuMemsetD8Async(ptr, int(byte) & 0xFF, nbytes, self._stream(stream)),
        )

    # ---- modules and launches ------------------------------------------------------------
    def load_ptx(self, ptx: str, name: str = "") -> Module:
        """cuModuleLoadData on the NUL-terminated PTX text (the driver JIT compiles it)."""
        self._bind()
        image = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
        if not image.endswith(b"\0"):
            image += b"\0"
        label = f"cuModuleLoadData({name})" if name else "cuModuleLoadData"
        handle = _check(self.cu, label, self.cu.cuModuleLoadData(image))
        return CudaModule(self, handle, name)

    def load_host(self, addresses: dict[str, int]) -> Module:
        """Host kernels run only on the emulator: raises RuntimeError here."""
        raise RuntimeError(
            "load_host() needs the grid emulator (LLGRAD_CUDA_EMULATE=1); "
            "the CUDA driver backend loads PTX with load_ptx()"
        )

    def launch(
        self,
        fn: Function,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        params: Sequence[int],
        stream: Stream | None = None,
    ) -> None:
        """cuLaunchKernel with `params` copied into the function's c_int64 slots; dynamic shared
        memory above 48 KiB is opted into once per function (cuFuncSetAttribute)."""
        if not getattr(self._tls, "bound", False):
            self._bind()
        f: CudaFunction = fn  # type: ignore[assignment]  # this backend made it
        h = (stream if stream is not None else self._current).handle
        if shared > f._shared_ok:
            f._allow_shared(shared)
        n = len(params)
        with f._lock:
            if n:
                if n != f._nparams:
                    f._buffers(n)
                f._values[:] = params
                args = f._pointers_address
            else:
                args = 0
            err = self.cu.cuLaunchKernel(
                f.handle,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                h,
                args,
                0,
            )[0]
        if err != 0:
            raise CudaError(
                f"cuLaunchKernel({f.name})",
                int(err),
                _error_name(self.cu, err),
                f"grid={tuple(grid)} block={tuple(block)} shared={shared} params={n}",
            )

    def synchronize(self) -> None:
        """cuCtxSynchronize."""
        self._bind()
        _check(self.cu, "cuCtxSynchronize", self.cu.cuCtxSynchronize())

    # ---- streams and events ----------------------------------------------------------------
    def default_stream(self) -> Stream:
        """The legacy default stream (handle 0)."""
        return self._default

    def current_stream(self) -> Stream:
        """The current stream (process-wide)."""
        return self._current

    def set_current_stream(self, s: Stream) -> None:
        """Make `s` current for work issued without a stream."""
        if not isinstance(s, CudaStream):
            raise TypeError(f"expected a CUDA driver stream, got {type(s).__name__}")
        self._current = s

    def new_stream(self) -> Stream:
        """cuStreamCreate(CU_STREAM_NON_BLOCKING), destroyed when garbage-collected."""
        self._bind()
        cu = self.cu
        flags = int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        return CudaStream(self, _check(cu, "cuStreamCreate", cu.cuStreamCreate(flags)), owned=True)

    def new_event(self, enable_timing: bool = False) -> Event:
        """cuEventCreate (CU_EVENT_DISABLE_TIMING unless enable_timing)."""
        return CudaEvent(self, enable_timing)

    # ---- cuBLAS ------------------------------------------------------------------------------
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
        """cublasSgemmStridedBatched / cublasDgemmStridedBatched on the stream."""
        blas = self._blas
        if blas is None:
            with self._blas_lock:
                if self._blas is None:
                    from .cublas import Cublas  # loaded on first use (runtime.cuda.cublas)

                    self._bind()
                    self._blas = Cublas()
                blas = self._blas
        self._bind()
        blas.gemm_strided_batched(
            dtype,
            transa,
            transb,
            m,
            n,
            k,
            alpha,
            a,
            lda,
            stride_a,
            b,
            ldb,
            stride_b,
            beta,
            c,
            ldc,
            stride_c,
            batch,
            int(self._stream(stream)),
        )


# --------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------

_lock = threading.RLock()
_backend: Backend | None = None
_emulate: bool | None = None
_real_probe: tuple[bool, str] | None = None
_real_count = 0


def emulating() -> bool:
    """True when LLGRAD_CUDA_EMULATE=1 (read once; `_reset_for_tests()` rereads it)."""
    global _emulate
    if _emulate is None:
        _emulate = os.environ.get(EMULATE_ENV, "").strip() == "1"
    return _emulate


def _probe_real() -> tuple[bool, str]:
    """(ok, reason): cuda-bindings imports, cuInit succeeds and a device exists. Never raises."""
    global _real_probe, _real_count
    if _real_probe is None:
        try:
            cu = _bindings()
        except Exception as e:
            _real_probe = (
                False,
                f"cuda-bindings is not installed ({type(e).__name__}: {e}); "
                f"install the llgrad[cuda] extra",
            )
        else:
            try:
                _check(cu, "cuInit", cu.cuInit(0))
                count = _check(cu, "cuDeviceGetCount", cu.cuDeviceGetCount())
                _real_count = int(count)
                _real_probe = (
                    (True, "") if count > 0 else (False, "the CUDA driver found no device")
                )
            except Exception as e:
                _real_probe = (False, f"no usable CUDA driver ({type(e).__name__}: {e})")
    return _real_probe


def available() -> bool:
    """True when a backend can be made: emulation is on, or a GPU and its driver work."""
    try:
        return emulating() or _probe_real()[0]
    except Exception:
        return False


def device_count() -> int:
    """Devices a backend would drive, without making it (1 when emulating, 0 without CUDA)."""
    if emulating():
        return 1
    return _real_count if _probe_real()[0] else 0


def initialized() -> bool:
    """True once get() has made the backend."""
    return _backend is not None


def get() -> Backend:
    """The process's backend, made on the first call; RuntimeError when none can be made."""
    global _backend
    b = _backend
    if b is not None:
        return b
    with _lock:
        if _backend is None:
            if emulating():
                from .emulator import EmulatorBackend  # circle: runtime.cuda.emulator -> here

                _backend = EmulatorBackend()
            else:
                ok, why = _probe_real()
                if not ok:
                    raise RuntimeError(
                        f"CUDA is not available: {why}. Set {EMULATE_ENV}=1 to run "
                        f"CUDA code on llgrad's grid emulator (host memory)."
                    )
                _backend = CudaBackend()
        return _backend


def _reset_for_tests() -> None:
    """Forget the backend and the cached environment/driver probes (tests only)."""
    global _backend, _emulate, _real_probe, _real_count
    with _lock:
        _backend = None
        _emulate = None
        _real_probe = None
        _real_count = 0
