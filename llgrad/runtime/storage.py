"""Buffers: 64-byte aligned, addressed once, shared by every view of them.

A `Storage` owns (or borrows) a block of memory. Its address is computed once, when it is
made, so launching a kernel never asks NumPy for a pointer. Views of one storage share its
version counter, which autograd uses to detect in-place changes to saved tensors.
"""
from __future__ import annotations

import ctypes

import numpy as np

ALIGNMENT = 64


class Storage:
    __slots__ = ("buffer", "ptr", "nbytes", "version", "owner", "__weakref__")

    def __init__(self, buffer: np.ndarray, ptr: int, owner: object = None):
        self.buffer = buffer            # 1-d uint8 array over exactly this memory
        self.ptr = ptr
        self.nbytes = buffer.nbytes
        self.version = 0
        self.owner = owner              # keeps borrowed memory alive

    def __repr__(self) -> str:
        return f"<Storage {self.nbytes} bytes at {self.ptr:#x}>"


def _address(arr: np.ndarray) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(arr))


def allocate(nbytes: int) -> Storage:
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    addr = _address(raw)
    pad = (-addr) % ALIGNMENT
    return Storage(raw[pad:pad + nbytes], addr + pad)


def borrow(arr: np.ndarray) -> tuple[Storage, int]:
    """Wrap a NumPy array's memory without copying; returns (storage, byte offset).

    The storage spans the bytes the array can reach; the array is kept alive.
    """
    if any(s < 0 for s in arr.strides):
        raise ValueError("from_numpy: arrays with negative strides are not supported "
                         "(make a copy with numpy.ascontiguousarray first)")
    if not arr.flags.writeable:
        raise ValueError("from_numpy: the array is read-only; llgrad tensors are writable "
                         "(pass a copy, e.g. numpy.array(a))")
    first = arr.__array_interface__["data"][0]
    extent = arr.itemsize
    for n, s in zip(arr.shape, arr.strides):
        if n == 0:
            extent = 0
            break
        extent += (n - 1) * s
    if extent == 0:
        return allocate(0), 0
    buf = np.ctypeslib.as_array((ctypes.c_uint8 * extent).from_address(first))
    return Storage(buf, first, owner=arr), 0
