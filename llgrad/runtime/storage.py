"""Buffers: 64-byte aligned, addressed once, shared by every view of them.

A `Storage` owns (or borrows) a block of memory. Its address is computed once, when it is
made, so launching a kernel never asks NumPy for a pointer. Views of one storage share its
version counter, which autograd uses to detect in-place changes to saved tensors.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

import numpy as np

from .._units import human_bytes

ALIGNMENT = 64

# Large buffers are recycled: a fresh 40 MB block costs ~10k page faults on first touch,
# which is a large part of an elementwise op on it. Freed blocks wait in a pool keyed by
# size; a block is only recycled when nothing else (a NumPy view) still refers to it.
# From 64 KB up: glibc serves blocks above its (moving) mmap threshold, 128 KB to 32 MB,
# with fresh pages, so whether B8's 64-256 KB buffers page-faulted on every call depended
# on what else the process held (B8 0.32 ms or 0.56 ms from one run to the next).
POOL_MIN_BYTES = 1 << 16
POOL_MAX_BYTES = 1 << 30
# size -> [(block, its 64-byte-aligned address), ...]: the address is read once per block
_pool: dict[int, list[tuple[np.ndarray, int]]] = {}
_pool_bytes = [0]
_pool_lock = threading.Lock()


def _bucket(nbytes: int) -> int:
    return (nbytes + ALIGNMENT + 4095) & ~4095


class Storage:
    __slots__ = ("_buffer", "ptr", "nbytes", "version", "owner", "raw", "inference", "__weakref__")

    def __init__(
        self, buffer: np.ndarray, ptr: int, owner: object = None, raw: np.ndarray | None = None
    ):
        self._buffer = buffer  # 1-d uint8 array over exactly this memory
        self.ptr = ptr
        self.nbytes = buffer.nbytes
        self.version = 0
        self.owner = owner  # keeps borrowed memory alive
        self.raw = raw  # the pooled block this storage was cut from
        self.inference = False  # allocated under inference_mode (see tensor.py)

    @property
    def buffer(self) -> np.ndarray:
        """A 1-d uint8 NumPy array over exactly this memory (made on first use for
        buffers cut from a block llgrad allocated, their `owner`: a slab, or a block of
        their own)."""
        b = self._buffer
        if b is None:
            slab = self.owner
            if slab.__class__ is not np.ndarray:  # a ctypes block (`allocate`)
                start = self.ptr - ctypes.addressof(slab)
                slab = np.frombuffer(slab, dtype=np.uint8)
            else:
                last = _last_slab[0]  # (slab, its address), read once: threads
                if last[0] is not slab:  # each cut from their own slab
                    last = _last_slab[0] = (slab, _address(slab))
                start = self.ptr - last[1]
            b = self._buffer = slab[start : start + self.nbytes]
        return b

    def array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A row-major NumPy array of `shape` and `dtype` over this storage's memory from
        its start, for a host computation to write a new tensor's values into during one
        call. Before the 1-d view (`buffer`) exists it is made on the block the memory
        was cut from, without making that view: such an array is not seen as a view of
        the storage (`buffer`'s references are what tells), so it must not be kept."""
        owner = self.owner
        if self._buffer is None and owner is not None:
            if owner.__class__ is np.ndarray:  # a slab (`allocate_small`)
                last = _last_slab[0]
                if last[0] is not owner:
                    last = _last_slab[0] = (owner, _address(owner))
                return np.ndarray(shape, dtype, owner, self.ptr - last[1])
            # a ctypes block (`allocate`)
            return np.ndarray(shape, dtype, owner, self.ptr - ctypes.addressof(owner))
        return self.buffer.view(dtype).reshape(shape)

    def __repr__(self) -> str:
        return f"<Storage {self.nbytes} bytes at {self.ptr:#x}>"


class PooledStorage(Storage):
    """A storage cut from a block of the pool (`raw`, at the block's aligned address):
    the block goes back to the pool when the storage dies. Its NumPy view is made only
    when asked for (`buffer`). (Only these have a finalizer; tiny and borrowed storages
    are freed without running Python code.)"""

    __slots__ = ()

    @property
    def buffer(self) -> np.ndarray:
        b = self._buffer
        if b is None:
            raw = self.raw
            if raw is None:  # (memory handed elsewhere keeps a buffer)
                return Storage.buffer.fget(self)  # type: ignore[attr-defined]
            start = self.ptr - _address(raw)
            b = self._buffer = raw[start : start + self.nbytes]
        return b

    def __del__(self) -> None:
        raw = self.raw
        if raw is None:
            return
        # Anything referring to the memory beyond this storage means a view of it is still
        # alive outside llgrad. Expected references to the buffer view, when one was made:
        # this local, self._buffer and the getrefcount argument; to raw: this local,
        # self.raw, the argument, and the view's base.
        b = self._buffer
        if b is not None and sys.getrefcount(b) > 3:
            return
        if sys.getrefcount(raw) > (3 if b is None else 4):
            return
        with _pool_lock:
            if _pool_bytes[0] + raw.nbytes > POOL_MAX_BYTES:
                return
            _pool.setdefault(raw.nbytes, []).append((raw, self.ptr))
            _pool_bytes[0] += raw.nbytes


# the slab array whose address `Storage.buffer` found last, with that address (tiny
# tensors viewed by NumPy one after another mostly come from one slab)
_last_slab: list[tuple[Any, int]] = [(None, 0)]


def _address(arr: np.ndarray) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(arr))


# Tiny buffers are cut from a per-thread slab: a NumPy allocation and asking it for its
# address cost more than a tiny op's kernel. Each buffer gets its own 64-byte-aligned
# region and its own Storage (so version counters stay per tensor); the slab is freed when
# the last buffer cut from it dies, so a kept tiny tensor pins at most one slab (16 KiB).
# Such a storage's NumPy view is made only when something asks for it (`Storage.buffer`):
# a compiled call's tiny outputs are usually read through llgrad, never through NumPy.
SLAB_BYTES = 1 << 14
SLAB_MAX = 256


class _Slab(threading.local):
    def __init__(self) -> None:
        # [slab array (64-byte aligned), address of its first free byte, address past
        # its end]: one thread-local read per allocation, then list items
        self.state: list = [None, 0, 0]


_slabs = _Slab()
_new = object.__new__


def allocate_small(nbytes: int) -> Storage:
    state = _slabs.state
    ptr = state[1]
    if ptr + SLAB_MAX > state[2]:
        raw = np.empty(SLAB_BYTES + ALIGNMENT, dtype=np.uint8)
        address = _address(raw)
        pad = (-address) % ALIGNMENT
        state[0] = raw[pad : pad + SLAB_BYTES]
        ptr = address + pad
        state[2] = ptr + SLAB_BYTES
    state[1] = ptr + ((nbytes + 63) & ~63 or 64)
    return _cut(state[0], ptr, nbytes)  # the slab stays alive while a buffer cut from it does


def _cut(owner: np.ndarray, ptr: int, nbytes: int) -> Storage:
    """A storage of `nbytes` at `ptr` inside `owner` (a block llgrad allocated), whose
    NumPy view is made only when asked for (`Storage.buffer`)."""
    st = _new(Storage)
    st._buffer = None
    st.ptr = ptr
    st.nbytes = nbytes
    st.version = 0
    st.owner = owner
    st.raw = None
    st.inference = False
    return st


def allocate_small_source(
    nbytes: int, st: str = "st", ptr: str = "ptr"
) -> tuple[list[str], dict[str, Any]]:
    """`allocate_small(nbytes)` written out for generated code (`Tensor._empty_maker`):
    source lines binding `st` to the storage and `ptr` to its address, and the names they
    use. It must make the same storage as `allocate_small` (a test compares them)."""
    lines = [
        "state = slabs.state",
        f"{ptr} = state[1]",
        f"if {ptr} + {SLAB_MAX} > state[2]:",
        f"    {st} = allocate_small({nbytes})",
        f"    {ptr} = {st}.ptr",
        "else:",
        f"    state[1] = {ptr} + {(nbytes + 63) & ~63 or 64}",
        f"    {st} = new_storage(Storage)",
        f"    {st}._buffer = None",
        f"    {st}.ptr = {ptr}",
        f"    {st}.nbytes = {nbytes}",
        f"    {st}.version = 0",
        f"    {st}.owner = state[0]",
        f"    {st}.raw = None",
        f"    {st}.inference = False",
    ]
    return lines, {
        "slabs": _slabs,
        "allocate_small": allocate_small,
        "new_storage": _new,
        "Storage": Storage,
    }


def allocate(nbytes: int) -> Storage:
    if nbytes >= POOL_MIN_BYTES:
        return _allocate_pooled(nbytes)
    if nbytes <= SLAB_MAX:
        return allocate_small(nbytes)
    # below the pool: a block of its own, aligned inside; its NumPy view is made only
    # when asked for (`Storage.buffer`), as a slab buffer's is (1.0 -> 0.5 us for 4 KB).
    # Up to BLOCK_MAX the block is a ctypes array: making one and reading its address
    # cost 0.1 us for 4 KB, a NumPy array and its address 0.38 us.
    if nbytes <= BLOCK_MAX:
        raw = _block_type(nbytes)()
        addr = ctypes.addressof(raw)
    else:
        raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
        addr = _address(raw)
    return _cut(raw, addr + (-addr) % ALIGNMENT, nbytes)


# (ctypes zero-fills its arrays: from 32 KB on, NumPy's uninitialized block is cheaper)
BLOCK_MAX = 1 << 15
_blocks: dict[int, type] = {}  # block size -> its ctypes array type


def _block_type(nbytes: int) -> type:
    """The ctypes array type of the block holding `nbytes` aligned (sizes rounded up to
    64 bytes, so there are at most BLOCK_MAX / 64 such types)."""
    size = (nbytes + 2 * ALIGNMENT - 1) & ~(ALIGNMENT - 1)
    kind = _blocks.get(size)
    if kind is None:
        kind = _blocks[size] = ctypes.c_char * size
    return kind


def allocate_block_source(
    nbytes: int, st: str = "st", ptr: str = "ptr", tag: str = ""
) -> tuple[list[str], dict[str, Any]]:
    """`allocate(nbytes)` for SLAB_MAX < nbytes <= BLOCK_MAX written out for generated
    code, as `allocate_small_source` is (a test compares the storages they make). `tag`
    ends the name of the block type's constant (several allocations in one function)."""
    lines = [
        f"raw = Block{tag}()",
        "address = addressof(raw)",
        f"{ptr} = address + (-address) % {ALIGNMENT}",
        f"{st} = new_storage(Storage)",
        f"{st}._buffer = None",
        f"{st}.ptr = {ptr}",
        f"{st}.nbytes = {nbytes}",
        f"{st}.version = 0",
        f"{st}.owner = raw",
        f"{st}.raw = None",
        f"{st}.inference = False",
    ]
    return lines, {
        f"Block{tag}": _block_type(nbytes),
        "addressof": ctypes.addressof,
        "new_storage": _new,
        "Storage": Storage,
    }


def _allocate_pooled(nbytes: int) -> Storage:
    size = _bucket(nbytes)
    entry = None
    with _pool_lock:
        blocks = _pool.get(size)
        if blocks:
            entry = blocks.pop()
            _pool_bytes[0] -= size
    if entry is None:
        if size >= CHECK_BYTES:
            _check_available(size)
        try:
            raw = np.empty(size, dtype=np.uint8)
        except MemoryError:
            raise MemoryError(
                f"cannot allocate a buffer of {human_bytes(size)} ({size} bytes)"
            ) from None
        addr = _address(raw)
        entry = (raw, addr + (-addr) % ALIGNMENT)
    st = _new(PooledStorage)
    st._buffer = None
    st.raw, st.ptr = entry
    st.nbytes = nbytes
    st.version = 0
    st.owner = None
    st.inference = False
    return st


# Linux grants a request larger than free memory (overcommit) and kills the process when
# the pages are touched, so a buffer this large is checked against what the system can
# still give before it is made.
CHECK_BYTES = 1 << 28


def available_bytes() -> int | None:
    """Memory the system can still give this process (RAM + swap), where it can say."""
    try:
        with open("/proc/meminfo", "rb") as f:
            fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        kib = int(fields[b"MemAvailable"].split()[0]) + int(fields[b"SwapFree"].split()[0])
        return kib * 1024
    except (OSError, KeyError, ValueError):
        return None


def _check_available(size: int) -> None:
    free = available_bytes()
    if free is None or size <= free:
        return
    empty_pool()  # blocks kept for reuse are memory this can give back
    free = available_bytes() or 0
    if size > free:
        raise MemoryError(
            f"cannot allocate a buffer of {human_bytes(size)} ({size} bytes): "
            f"the system has {human_bytes(free)} available"
        )


def empty_pool() -> None:
    """Release every cached block to the system."""
    with _pool_lock:
        _pool.clear()
        _pool_bytes[0] = 0


def borrow(arr: np.ndarray) -> tuple[Storage, int]:
    """Wrap a NumPy array's memory without copying; returns (storage, byte offset).

    The storage spans the bytes the array can reach; the array is kept alive.
    """
    if any(s < 0 for s in arr.strides):
        raise ValueError(
            "from_numpy: arrays with negative strides are not supported "
            "(make a copy with numpy.ascontiguousarray first)"
        )
    if not arr.flags.writeable:
        raise ValueError(
            "from_numpy: the array is read-only; llgrad tensors are writable "
            "(pass a copy, e.g. numpy.array(a))"
        )
    first = arr.__array_interface__["data"][0]
    extent = arr.itemsize
    for n, s in zip(arr.shape, arr.strides):
        if n == 0:
            extent = 0
            break
        extent += (n - 1) * s
    if extent == 0:
        return allocate(0), 0
    window = (ctypes.c_uint8 * extent).from_address(first)
    window._owner = arr  # every NumPy view of `buf` keeps the original array alive
    buf = np.ctypeslib.as_array(window)
    return Storage(buf, first, owner=arr), 0
