"""Calling kernels: pack the argument block, make one foreign call, split big loops.

Each thread packs arguments into its own reusable block, so concurrent callers never
share one. A loop whose outer range is large is split across the native thread pool
(`runtime.pool`), which runs the pieces on every core from inside one foreign call.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from typing import Sequence

from .._system import usable_cpus
from .cache import Kernel
from . import pool

_SLOTS = 1024
_tls = threading.local()
_structs: dict[int, struct.Struct] = {}


def block() -> tuple[ctypes.Array, int]:
    """This thread's reusable argument block: (buffer, address)."""
    try:
        return _tls.block
    except AttributeError:
        buf = (ctypes.c_int64 * _SLOTS)()
        _tls.block = (buf, ctypes.addressof(buf))
        return _tls.block


def packer(n: int) -> struct.Struct:
    """A cached `struct.Struct` packing n int64 values."""
    p = _structs.get(n)
    if p is None:
        p = _structs[n] = struct.Struct(f"{n}q")
    return p


def num_threads() -> int:
    env = os.environ.get("LLGRAD_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(
                f"LLGRAD_NUM_THREADS must be a whole number of threads, got {env!r}"
            ) from None
    return max(1, min(usable_cpus(), 8))


_recording: list[list[Kernel]] = []


def recording() -> bool:
    return bool(_recording)


class record_kernels:
    """`with record_kernels() as ks:` collects every kernel launched in the block, in order.

    Each is a `Kernel` with `.llvm_ir` and `.asm()`: the way to see what an eager op runs.
    """

    def __enter__(self) -> list[Kernel]:
        self.kernels: list[Kernel] = []
        _recording.append(self.kernels)
        return self.kernels

    def __exit__(self, *exc: object) -> None:
        _recording.remove(self.kernels)


_THREADS = num_threads()


def set_threads(n: int) -> None:
    """Use `n` threads for eager kernels and for graphs compiled from now on (a compiled
    function keeps the count it was built with)."""
    global _THREADS
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    _THREADS = n


def threads() -> int:
    return _THREADS


PARALLEL_MIN_WORK = 1 << 17  # elements of work below which one core is faster


def call(kernel: Kernel, args: Sequence[int]) -> None:
    """One foreign call with `args` as the argument block."""
    if len(args) > _SLOTS:
        raise ValueError(f"{kernel.name}: {len(args)} kernel arguments exceed {_SLOTS}")
    buf, addr = block()
    try:
        packer(len(args)).pack_into(buf, 0, *args)
    except struct.error:
        raise RuntimeError(
            f"{kernel.name}: an argument is not a plain integer (a traced "
            f"tensor reached eager execution: the op bypassed tracing)"
        ) from None
    kernel.fn(addr)


def call_split(kernel: Kernel, args: list[int], work: int) -> None:
    """Run `[args[0], args[1])`, the kernel's outer loop, split across the native thread
    pool (`runtime.pool`). `work` is the number of elements the whole call touches; small
    calls run inline."""
    if _recording:
        for r in _recording:
            r.append(kernel)
    lo, hi = args[0], args[1]
    parts = min(_THREADS, hi - lo)
    if parts < 2 or work < PARALLEL_MIN_WORK:
        call(kernel, args)
        return
    if len(args) > _SLOTS:
        raise ValueError(f"{kernel.name}: {len(args)} kernel arguments exceed {_SLOTS}")

    pool.run_blocks(kernel.address, args, parts)
