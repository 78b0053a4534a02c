"""The native thread pool (`codegen.pool`): built on first use, one per process.

`address()` is `llgrad_parallel_for`'s address, which compiled graphs receive in their
argument block (an "extra", like BLAS's addresses) so that the whole graph, parallel
launches included, is one foreign call. `run_blocks(kernel, args, work)` splits an eager
kernel's range the same way. The workers are Python threads parked in native code (ctypes
releases the GIL for the call), `threads() - 1` of them: the calling thread runs pieces
too. After `os.fork` the child starts without workers (the caller then runs every piece)
and starts new ones on its next parallel call.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading

from ..codegen import pool as pool_code
from ..codegen.target import get_target

__all__ = ["address", "run_blocks", "SPIN_CYCLES"]

# Cycles an idle worker spins before it sleeps (tens of microseconds at usual clock
# rates): long enough for back-to-back launches of one call, short enough not to hold a
# core that another program (or library) wants.
SPIN_CYCLES = 200_000

_PIECE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_PFOR = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64
)
_WORKER = ctypes.CFUNCTYPE(None, ctypes.c_int64)
_VOID = ctypes.CFUNCTYPE(None)


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.addresses: dict[str, int] | None = None
        self.workers: list[threading.Thread] = []
        self.pid = os.getpid()
        self.parallel_for: _PFOR | None = None


_state = _State()


def _build() -> dict[str, int]:
    target = get_target()
    text = pool_code.build(target.triple, SPIN_CYCLES)
    compiled = target.compile(text, pool_code.SYMBOLS, name="pool")
    _state.keep = compiled  # the JIT dylib lives with the process
    return compiled.addresses


def _start(want: int) -> None:
    """Have `want` worker threads (never fewer than already run; call with the lock)."""
    worker = _WORKER(_state.addresses["llgrad_pool_worker"])
    while len(_state.workers) < want:
        t = threading.Thread(
            target=worker,
            args=(len(_state.workers) + 1,),
            name=f"llgrad-pool-{len(_state.workers) + 1}",
            daemon=True,
        )
        t.start()
        _state.workers.append(t)


def address(threads: int) -> int:
    """`llgrad_parallel_for`'s address, with at least `threads - 1` workers running."""
    addresses = _state.addresses
    if addresses is None or len(_state.workers) < threads - 1 or _state.pid != os.getpid():
        with _state.lock:
            if _state.addresses is None:
                _state.addresses = _build()
                _state.parallel_for = _PFOR(_state.addresses["llgrad_parallel_for"])
            if _state.pid != os.getpid():  # a forked child: no workers here
                _VOID(_state.addresses["llgrad_pool_reset"])()
                _state.workers = []
                _state.pid = os.getpid()
            _start(threads - 1)
        addresses = _state.addresses
    return addresses["llgrad_parallel_for"]


def run_blocks(kernel_address: int, args: list[int], threads: int) -> None:
    """Run an eager kernel whose block is `args` (`[lo, hi, ...]`) over `threads` pieces
    of its range, through `llgrad_block_piece`."""
    address(threads)
    n = len(args)
    if n > pool_code.MAX_BLOCK:
        raise ValueError(f"a kernel block of {n} words exceeds {pool_code.MAX_BLOCK}")
    ctx = (ctypes.c_int64 * (n + 2))(kernel_address, n, *args)  # raises on a non-integer
    _state.parallel_for(
        _state.addresses["llgrad_block_piece"], ctypes.addressof(ctx), args[0], args[1], threads
    )


def _stop() -> None:
    if _state.addresses is not None and _state.workers and _state.pid == os.getpid():
        _VOID(_state.addresses["llgrad_pool_stop"])()
        for t in _state.workers:
            t.join(timeout=1.0)


atexit.register(_stop)
