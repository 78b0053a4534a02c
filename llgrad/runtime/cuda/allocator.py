"""A caching device allocator shared by the real driver backend and the emulator.

Requests are rounded up to a size class (512-byte granules below 1 MiB, 2 MiB granules from
1 MiB up) and served from a free list of blocks of exactly that size when one holds a block;
only otherwise does the allocator ask the backend's raw `alloc`. A `DeviceBlock` that is
freed (explicitly once, or by garbage collection) goes back on its free list, not to the
driver, so steady-state training loops stop calling `cuMemAlloc`/`cuMemFree` after their
first step. `empty_cache()` hands every cached block back to the driver. An allocation that
fails for lack of memory empties the cache and retries once before raising PyTorch's
"CUDA out of memory" error.

Stream semantics: a freed block is reusable at once. That is right while all work runs on
one stream (kernels execute in issue order, so a later kernel that reuses the block runs
after every earlier kernel that used it). Code that frees a block still in use by work on
another stream must synchronize first (PyTorch's `record_stream` has no equivalent here).

Unlike PyTorch's allocator, blocks are never split or merged: a request only reuses a cached
block of its own size class.
"""

from __future__ import annotations

import threading
from typing import Callable

__all__ = ["CachingAllocator", "DeviceBlock", "OutOfMemory", "round_size"]

SMALL_GRANULE = 512
LARGE_GRANULE = 2 << 20
SMALL_LIMIT = 1 << 20


class OutOfMemory(Exception):
    """Raised by a backend's raw allocation function when the device (or host) has no room."""


def round_size(nbytes: int) -> int:
    """The size class of a request of `nbytes` bytes (0 stays 0)."""
    if nbytes <= 0:
        return 0
    granule = SMALL_GRANULE if nbytes < SMALL_LIMIT else LARGE_GRANULE
    return (nbytes + granule - 1) // granule * granule


def _format_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


class DeviceBlock:
    """A live allocation: `.ptr` (device address, 0 for an empty block), `.nbytes` (requested
    size) and `.capacity` (its size class). It returns to its allocator's cache when `.free()`
    is called (once) or when the object is garbage-collected."""

    __slots__ = ("ptr", "nbytes", "capacity", "_owner", "__weakref__")

    def __init__(
        self, ptr: int, nbytes: int, capacity: int, owner: "CachingAllocator | None"
    ) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.capacity = capacity
        self._owner = owner

    @property
    def freed(self) -> bool:
        """True once the block went back to the cache (always False for empty blocks)."""
        return self._owner is None and self.capacity > 0

    def free(self) -> None:
        """Return the block to the allocator's cache now; a second call raises RuntimeError."""
        owner = self._owner
        if owner is None:
            if self.capacity > 0:
                raise RuntimeError(f"DeviceBlock at 0x{self.ptr:x} was already freed")
            return
        self._owner = None
        owner._release(self.ptr, self.capacity)

    def __del__(self) -> None:
        owner = self._owner
        if owner is not None:
            self._owner = None
            try:
                owner._release(self.ptr, self.capacity)
            except Exception:  # interpreter shutdown: the backend may already be gone
                pass

    def __repr__(self) -> str:
        state = "freed" if self.freed else "live"
        return f"DeviceBlock(ptr=0x{self.ptr:x}, nbytes={self.nbytes}, {state})"


class CachingAllocator:
    """Size-class caching over a backend's `raw_alloc(nbytes) -> ptr` and `raw_free(ptr)`.

    `raw_alloc` must raise `OutOfMemory` when there is no room; any other exception passes
    through unchanged. All bookkeeping is guarded by one re-entrant lock (re-entrant because
    a block's `__del__` may run from a garbage collection triggered inside the allocator).
    """

    def __init__(
        self,
        raw_alloc: Callable[[int], int],
        raw_free: Callable[[int], None],
        device_name: str = "GPU 0",
        total_memory: Callable[[], int] | None = None,
    ) -> None:
        self._raw_alloc = raw_alloc
        self._raw_free = raw_free
        self._device_name = device_name
        self._total_memory = total_memory
        self._lock = threading.RLock()
        self._free: dict[int, list[int]] = {}
        self._allocated = 0  # bytes in live blocks (size classes)
        self._cached = 0  # bytes in cached (free-listed) blocks
        self._peak_allocated = 0
        self._peak_reserved = 0
        self._live_blocks = 0
        self._segments = 0  # blocks obtained from the driver and not yet given back
        self._num_allocs = 0
        self._num_frees = 0
        self._bytes_allocated_total = 0
        self._bytes_freed_total = 0
        self._num_retries = 0
        self._num_ooms = 0

    # ---- allocation -------------------------------------------------------------------
    def allocate(self, nbytes: int) -> DeviceBlock:
        """A block of at least `nbytes` bytes, from the cache when one of its size class is free."""
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        if nbytes == 0:
            return DeviceBlock(0, 0, 0, None)
        size = round_size(nbytes)
        with self._lock:
            cached = self._free.get(size)
            if cached:
                ptr = cached.pop()
                self._cached -= size
            else:
                ptr = self._fresh(size, nbytes)
                self._segments += 1
            self._allocated += size
            self._live_blocks += 1
            self._num_allocs += 1
            self._bytes_allocated_total += size
            if self._allocated > self._peak_allocated:
                self._peak_allocated = self._allocated
            reserved = self._allocated + self._cached
            if reserved > self._peak_reserved:
                self._peak_reserved = reserved
        return DeviceBlock(ptr, nbytes, size, self)

    def _fresh(self, size: int, nbytes: int) -> int:
        try:
            return self._raw_alloc(size)
        except OutOfMemory:
            pass
        self._num_retries += 1
        self._release_cached()
        try:
            return self._raw_alloc(size)
        except OutOfMemory:
            self._num_ooms += 1
        total = self._total_memory() if self._total_memory is not None else 0
        cap = f" a total capacity of {_format_bytes(total)}, of which" if total else ""
        raise RuntimeError(
            f"CUDA out of memory: tried to allocate {nbytes} bytes (a {_format_bytes(size)} block). "
            f"{self._device_name} has{cap} {_format_bytes(self._allocated)} is allocated by "
            f"llgrad and {_format_bytes(self._cached)} is reserved by llgrad but unallocated."
        ) from None

    def _release(self, ptr: int, size: int) -> None:
        with self._lock:
            self._allocated -= size
            self._live_blocks -= 1
            self._num_frees += 1
            self._bytes_freed_total += size
            self._cached += size
            lst = self._free.get(size)
            if lst is None:
                self._free[size] = [ptr]
            else:
                lst.append(ptr)

    def _release_cached(self) -> None:
        with self._lock:
            lists = self._free
            self._free = {}
            for size, ptrs in lists.items():
                for ptr in ptrs:
                    self._raw_free(ptr)
                    self._cached -= size
                    self._segments -= 1

    def empty_cache(self) -> None:
        """Give every cached (free) block back to the driver; live blocks are untouched."""
        self._release_cached()

    # ---- statistics ---------------------------------------------------------------------
    def memory_allocated(self) -> int:
        """Bytes in live blocks, each counted at its size class."""
        return self._allocated

    def max_memory_allocated(self) -> int:
        """The peak of `memory_allocated()` since the start or the last reset."""
        return self._peak_allocated

    def memory_reserved(self) -> int:
        """Bytes held from the driver: live blocks plus cached ones."""
        return self._allocated + self._cached

    def max_memory_reserved(self) -> int:
        """The peak of `memory_reserved()` since the start or the last reset."""
        return self._peak_reserved

    def reset_peak_memory_stats(self) -> None:
        """Set both peaks to the current values."""
        with self._lock:
            self._peak_allocated = self._allocated
            self._peak_reserved = self._allocated + self._cached

    def stats(self) -> dict[str, int]:
        """Counters under the keys PyTorch's `torch.cuda.memory_stats()` uses for them."""
        with self._lock:
            reserved = self._allocated + self._cached
            return {
                "allocated_bytes.all.current": self._allocated,
                "allocated_bytes.all.peak": self._peak_allocated,
                "allocated_bytes.all.allocated": self._bytes_allocated_total,
                "allocated_bytes.all.freed": self._bytes_freed_total,
                "reserved_bytes.all.current": reserved,
                "reserved_bytes.all.peak": self._peak_reserved,
                "active_bytes.all.current": self._allocated,
                "active_bytes.all.peak": self._peak_allocated,
                "inactive_split_bytes.all.current": self._cached,
                "allocation.all.current": self._live_blocks,
                "allocation.all.allocated": self._num_allocs,
                "allocation.all.freed": self._num_frees,
                "segment.all.current": self._segments,
                "num_alloc_retries": self._num_retries,
                "num_ooms": self._num_ooms,
            }
