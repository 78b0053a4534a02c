"""`lg.cuda`: PyTorch's `torch.cuda` namespace over llgrad's CUDA runtime.

The backend (`llgrad.runtime.cuda.driver`) is the CUDA driver on a machine with an NVIDIA GPU
and the `cuda-bindings` package (the `llgrad[cuda]` extra), or the host-memory grid emulator
when `LLGRAD_CUDA_EMULATE=1`. Without either, availability questions answer "no" (as
PyTorch's do on a machine without CUDA), memory counters are 0, seeding is stored for later,
and anything that needs a GPU raises a RuntimeError naming the function.

Differences from PyTorch: only device 0 runs work (set_device to another index raises); the
current stream is process-wide rather than per thread; the caching allocator never splits
blocks (see `llgrad.runtime.cuda.allocator`).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from .device import device as _dev_cls
from .runtime.cuda import driver as _driver

__all__ = [
    "is_available",
    "device_count",
    "is_initialized",
    "init",
    "current_device",
    "set_device",
    "device",
    "get_device_name",
    "get_device_capability",
    "get_device_properties",
    "synchronize",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "empty_cache",
    "memory_stats",
    "Stream",
    "Event",
    "current_stream",
    "default_stream",
    "stream",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
    "is_bf16_supported",
    "CudaError",
]

CudaError = _driver.CudaError

# The CUDA generator's state, read by llgrad's random kernels (Philox: key = seed,
# counter offset advanced by every kernel that draws numbers).
_DEFAULT_SEED = 67280421310721  # PyTorch's default generator seed
_seed: int = _DEFAULT_SEED
_offset: int = 0
_seed_lock = threading.Lock()
_current_device: int = 0


def _unavailable(what: str) -> RuntimeError:
    why = _driver._probe_real()[1] or "no NVIDIA GPU with a working driver"
    return RuntimeError(
        f"llgrad.cuda.{what}: CUDA is not available ({why}); check "
        f"llgrad.cuda.is_available() first, or set {_driver.EMULATE_ENV}=1 to run "
        f"on llgrad's grid emulator"
    )


def _backend(what: str) -> _driver.Backend:
    """The backend, made on first use; RuntimeError naming `what` when none can be made."""
    if not _driver.available():
        raise _unavailable(what)
    return _driver.get()


def _device_index(dev: Any, what: str, optional: bool = True) -> int:
    """The index named by None (current), an int, 'cuda[:i]' or a cuda device."""
    if dev is None:
        if optional:
            return _current_device
        raise ValueError(f"{what}: a device is required")
    if isinstance(dev, bool):
        raise TypeError(f"{what}: invalid device {dev!r}")
    if isinstance(dev, int):
        return _current_device if dev < 0 else dev

    d = dev if isinstance(dev, _dev_cls) else _dev_cls(dev) if isinstance(dev, str) else None
    if d is None:
        raise TypeError(
            f"{what}: expected a device, an index or a string, got {type(dev).__name__}"
        )
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return _current_device if d.index is None else d.index


def _checked_index(dev: Any, what: str) -> tuple[_driver.Backend, int]:
    b = _backend(what)
    i = _device_index(dev, what)
    if not 0 <= i < b.device_count():
        raise RuntimeError("CUDA error: invalid device ordinal")
    return b, i


# --------------------------------------------------------------------------------------
# availability and devices
# --------------------------------------------------------------------------------------


def is_available() -> bool:
    """True when a GPU and its driver work, or LLGRAD_CUDA_EMULATE=1; never raises."""
    return _driver.available()


def device_count() -> int:
    """The number of CUDA devices (1 on the emulator, 0 without a backend); like torch, this
    does not initialize CUDA."""
    try:
        return _driver.device_count()
    except Exception:
        return 0


def is_initialized() -> bool:
    """True once the backend (driver context or emulator) has been made."""
    return _driver.initialized()


def init() -> None:
    """Make the backend now (PyTorch: initialize CUDA); RuntimeError without one."""
    _backend("init()")


def current_device() -> int:
    """The index of the current device (always 0: llgrad runs work on device 0)."""
    _backend("current_device()")
    return _current_device


def set_device(device: Any) -> None:
    """Select the current device; a negative index does nothing (as torch). Differs from torch:
    only device 0 runs work, so another valid index raises RuntimeError."""
    global _current_device
    i = _device_index(device, "set_device()")
    b = _backend("set_device()")
    if not 0 <= i < b.device_count():
        raise RuntimeError("CUDA error: invalid device ordinal")
    if i != 0:
        raise RuntimeError(
            f"llgrad.cuda.set_device({i}): llgrad's CUDA runtime drives device 0 only"
        )
    _current_device = i


class device:
    """Context manager that makes `device` current inside the block (None or -1: no change)."""

    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else _device_index(device, "device()")
        self.prev_idx = -1

    def __enter__(self) -> "device":
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.idx != self.prev_idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)


class _CudaDeviceProperties:
    """What get_device_properties returns: name, total_memory, multi_processor_count, major, minor."""

    def __init__(
        self, name: str, total_memory: int, multi_processor_count: int, major: int, minor: int
    ) -> None:
        self.name = name
        self.total_memory = total_memory
        self.multi_processor_count = multi_processor_count
        self.major = major
        self.minor = minor

    def __repr__(self) -> str:
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1 << 20)}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def get_device_name(device: Any = None) -> str:
    """The device's name ('llgrad grid emulator (host)' on the emulator)."""
    b, i = _checked_index(device, "get_device_name()")
    return b.device_name(i)


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """The compute capability (major, minor); (9, 0) on the emulator."""
    b, i = _checked_index(device, "get_device_capability()")
    return b.capability(i)


def get_device_properties(device: Any = None) -> _CudaDeviceProperties:
    """Name, total memory, multiprocessor count and capability of the device."""
    b, i = _checked_index(device, "get_device_properties()")
    major, minor = b.capability(i)
    return _CudaDeviceProperties(
        b.device_name(i), b.total_memory(i), b.multiprocessors(i), major, minor
    )


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """True on devices of compute capability 8.0 or newer; False without CUDA."""
    if not _driver.available():
        return False
    try:
        return _driver.get().capability(0)[0] >= 8
    except Exception:
        return False


def synchronize(device: Any = None) -> None:
    """Wait until all work on the device has finished."""
    _checked_index(device, "synchronize()")[0].synchronize()


# --------------------------------------------------------------------------------------
# memory (0 and no-ops until the backend exists, as torch before CUDA initializes)
# --------------------------------------------------------------------------------------


def _made() -> _driver.Backend | None:
    return _driver.get() if _driver.initialized() else None


def memory_allocated(device: Any = None) -> int:
    """Bytes in live blocks of the caching allocator (size classes, not requested sizes)."""
    b = _made()
    return b.memory_allocated() if b is not None else 0


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated() since start or the last reset_peak_memory_stats()."""
    b = _made()
    return b.max_memory_allocated() if b is not None else 0


def memory_reserved(device: Any = None) -> int:
    """Bytes the allocator holds from the driver (live plus cached blocks)."""
    b = _made()
    return b.memory_reserved() if b is not None else 0


def max_memory_reserved(device: Any = None) -> int:
    """Peak of memory_reserved() since start or the last reset_peak_memory_stats()."""
    b = _made()
    return b.max_memory_reserved() if b is not None else 0


def reset_peak_memory_stats(device: Any = None) -> None:
    """Set the allocated and reserved peaks to their current values."""
    b = _made()
    if b is not None:
        b.reset_peak_memory_stats()


def empty_cache() -> None:
    """Give the allocator's cached (unused) blocks back to the driver."""
    b = _made()
    if b is not None:
        b.empty_cache()


def memory_stats(device: Any = None) -> dict[str, int]:
    """The allocator's counters under torch's keys ("allocated_bytes.all.current", ...);
    empty before the backend exists, as torch before CUDA initializes."""
    b = _made()
    return dict(sorted(b.memory_stats().items())) if b is not None else {}


# --------------------------------------------------------------------------------------
# streams and events
# --------------------------------------------------------------------------------------


class Event:
    """A CUDA event, as torch.cuda.Event (blocking/interprocess are accepted and ignored)."""

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.enable_timing = enable_timing
        self._event = _backend("Event()").new_event(enable_timing)

    @classmethod
    def _wrap(cls, ev: _driver.Event) -> "Event":
        obj = cls.__new__(cls)
        obj.enable_timing = getattr(ev, "enable_timing", False)
        obj._event = ev
        return obj

    def record(self, stream: "Stream | None" = None) -> None:
        """Record the event on `stream` (default: the current stream)."""
        self._event.record(stream._stream if stream is not None else None)

    def wait(self, stream: "Stream | None" = None) -> None:
        """Make `stream` (default: the current one) wait for this event."""
        (stream if stream is not None else current_stream()).wait_event(self)

    def synchronize(self) -> None:
        """Wait on the host for the work before the recorded point."""
        self._event.synchronize()

    def query(self) -> bool:
        """True when the work before the recorded point has finished."""
        return self._event.query()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to `end_event` (both with enable_timing=True)."""
        return self._event.elapsed_time(end_event._event)

    def __repr__(self) -> str:
        return f"<llgrad.cuda.Event enable_timing={self.enable_timing}>"


class Stream:
    """A CUDA stream, as torch.cuda.Stream (priority is accepted and ignored). Use it with
    `with lg.cuda.stream(s):` (or `with s:`) to make it current."""

    def __init__(self, device: Any = None, priority: int = 0) -> None:
        b, _ = _checked_index(device, "Stream()")
        self._stream = b.new_stream()
        self._prev: list[Stream] = []

    @classmethod
    def _wrap(cls, s: _driver.Stream) -> "Stream":
        obj = cls.__new__(cls)
        obj._stream = s
        obj._prev = []
        return obj

    @property
    def cuda_stream(self) -> int:
        """The raw stream handle as an int (0 for the default stream)."""
        return int(self._stream.handle)

    @property
    def device(self) -> Any:
        """The stream's device (cuda:0)."""
        return _dev_cls("cuda", 0)

    def synchronize(self) -> None:
        """Wait on the host until all work on this stream has finished."""
        self._stream.synchronize()

    def query(self) -> bool:
        """True when all work on this stream has finished."""
        return self._stream.query()

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait for `event`."""
        self._stream.wait_event(event._event)

    def wait_stream(self, stream: "Stream") -> None:
        """Make later work on this stream wait for the work issued to `stream` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Record `event` (a new one when None) on this stream and return it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __enter__(self) -> "Stream":
        b = _backend("Stream.__enter__")
        self._prev.append(Stream._wrap(b.current_stream()))
        b.set_current_stream(self._stream)
        return self

    def __exit__(self, *exc: object) -> None:
        _driver.get().set_current_stream(self._prev.pop()._stream)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and self._stream == other._stream

    def __hash__(self) -> int:
        return hash(self._stream)

    def __repr__(self) -> str:
        return f"<llgrad.cuda.Stream device=cuda:0 cuda_stream=0x{self.cuda_stream:x}>"


def current_stream(device: Any = None) -> Stream:
    """The stream work goes to when none is named (process-wide in llgrad)."""
    b, _ = _checked_index(device, "current_stream()")
    return Stream._wrap(b.current_stream())


def default_stream(device: Any = None) -> Stream:
    """The device's default stream."""
    b, _ = _checked_index(device, "default_stream()")
    return Stream._wrap(b.default_stream())


class stream:
    """Context manager making `stream` current inside the block (None: no change)."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream

    def __enter__(self) -> Stream | None:
        if self.stream is not None:
            self.stream.__enter__()
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is not None:
            self.stream.__exit__(*exc)


# --------------------------------------------------------------------------------------
# seeding (stored here; the random kernels read `_generator_seed()`)
# --------------------------------------------------------------------------------------


def manual_seed(seed: int) -> None:
    """Seed the CUDA generator (stored even without CUDA, as torch queues it) and reset its offset."""
    global _seed, _offset
    with _seed_lock:
        _seed = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
        _offset = 0


def manual_seed_all(seed: int) -> None:
    """Seed every device's generator (there is one: device 0)."""
    manual_seed(seed)


def seed() -> None:
    """Seed the CUDA generator with a non-deterministic random number."""
    manual_seed(int.from_bytes(os.urandom(8), "little"))


def seed_all() -> None:
    """seed() for every device (there is one)."""
    seed()


def initial_seed() -> int:
    """The CUDA generator's current seed."""
    return _seed


def _generator_seed() -> tuple[int, int]:
    """(seed, offset) of the CUDA generator, for the random kernels."""
    with _seed_lock:
        return _seed, _offset


def _advance_offset(n: int) -> int:
    """Advance the generator's counter offset by `n`; returns the offset before advancing."""
    global _offset
    with _seed_lock:
        old = _offset
        _offset += int(n)
        return old
