"""MPI through mpi4py: the one place llgrad talks to the message-passing library.

`llgrad.distributed` (the user API) and compiled graphs (`all_reduce` launches) both come
here. mpi4py is imported on first use only, so llgrad imports without it; without it
`available()` is False and `comm()` raises an ImportError that says how to install it.

Two paths:

* **From Python** (eager collectives): `start_*` post a nonblocking MPI operation on NumPy
  views of the tensors' own memory (no copies) and return a `Pending` request; `wait`
  polls it against a deadline, so a rank that died or never arrived ends the wait with a
  `DistTimeoutError` instead of hanging the job forever.
* **From native code** (compiled graphs): `extra(name)` resolves the run-time values a
  compiled `all_reduce` needs: the addresses of `MPI_Iallreduce` and `MPI_Wait` in the
  MPI library mpi4py loaded (found through mpi4py's extension module, so a system Open
  MPI or Intel MPI works as MPICH does) and the handles of the communicator, datatype and
  reduction. Handles are implementation-specific values (MPICH: 32-bit integers; Open
  MPI: pointers, different in every process), so they are read at load time and passed
  in the entry's argument block, never compiled into a cached object; `handle_bits()`
  tells codegen how wide they are.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
import traceback
from typing import Any

import numpy as np

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..ops.collective import REDUCTIONS

# reductions of the IR op `all_reduce` -> mpi4py's names (avg is sum / world size,
# applied by the caller; bool tensors reduce logically, as torch's backends do)
_MPI_OP = {
    "sum": "SUM",
    "product": "PROD",
    "max": "MAX",
    "min": "MIN",
    "band": "BAND",
    "bor": "BOR",
    "bxor": "BXOR",
}
_BOOL_OP = {
    "sum": "LOR",
    "max": "LOR",
    "bor": "LOR",
    "product": "LAND",
    "min": "LAND",
    "band": "LAND",
    "bxor": "LXOR",
}
_MPI_TYPE = {
    dt.bool_: "C_BOOL",
    dt.uint8: "UINT8_T",
    dt.int8: "INT8_T",
    dt.int16: "INT16_T",
    dt.int32: "INT32_T",
    dt.int64: "INT64_T",
    dt.float32: "FLOAT",
    dt.float64: "DOUBLE",
    dt.complex64: "C_FLOAT_COMPLEX",
    dt.complex128: "C_DOUBLE_COMPLEX",
}
# float16 and bfloat16 have no MPI datatype: the callers reduce them in float32 and round
# once at the end (more accurate than rounding after every rank's addition)
WIDENED = {dt.float16: dt.float32, dt.bfloat16: dt.float32}
MAX_COUNT = 1 << 30  # elements per MPI call (MPI counts are C ints)


class DistError(RuntimeError):
    """An error reported by MPI or by the distributed layer."""


class DistTimeoutError(DistError):
    """A collective did not complete within the process group's timeout."""


_MPI: Any = None
_lib: Any = None


def available() -> bool:
    """Whether mpi4py can be imported (it initializes MPI on import)."""
    try:
        _import()
    except ImportError:
        return False
    return True


def _import() -> Any:
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise ImportError(
                "llgrad.distributed needs mpi4py and an MPI library: "
                "pip install 'llgrad[distributed]' (mpi4py and MPICH), or pip install mpi4py "
                f"against a system MPI (Open MPI, Intel MPI) ({e})"
            ) from None
        _MPI = MPI
    return _MPI


def mpi() -> Any:
    """The `mpi4py.MPI` module."""
    return _import()


def comm() -> Any:
    return _import().COMM_WORLD


def check_reduction(op: str, d: DType, where: str) -> None:
    if op not in REDUCTIONS:
        raise ValueError(f"{where}: unknown reduction {op!r}; expected one of {REDUCTIONS}")
    if d.is_complex and op in ("max", "min", "band", "bor", "bxor"):
        raise TypeError(f"{where}: {op} is not defined for complex tensors ({d.name})")
    if d.is_floating_point and op in ("band", "bor", "bxor"):
        raise TypeError(f"{where}: {op} takes integer or bool tensors, got {d.name}")
    if d not in _MPI_TYPE and d not in WIDENED:
        raise TypeError(f"{where}: no MPI datatype for {d.name}")


def mpi_op(op: str, d: DType) -> Any:
    MPI = _import()
    return getattr(MPI, (_BOOL_OP if d is dt.bool_ else _MPI_OP)[op])


def mpi_type(d: DType) -> Any:
    return getattr(_import(), _MPI_TYPE[d])


def buffer(a: np.ndarray, d: DType) -> list[Any]:
    """mpi4py's buffer spec for `a` (contiguous) holding dtype `d`."""
    return [a, a.size, mpi_type(d)]


# --------------------------------------------------------------------------------------
# Nonblocking operations from Python, waited on with a deadline
# --------------------------------------------------------------------------------------


class Pending:
    """A posted MPI request, the buffers it uses (kept alive until it completes) and what
    to run once it has (`then`: copy back, divide by the world size, ...)."""

    __slots__ = ("request", "keep", "then", "what", "done")

    def __init__(self, request: Any, keep: tuple[Any, ...], then: Any, what: str):
        self.request = request
        self.keep = keep
        self.then = then
        self.what = what
        self.done = False

    def test(self) -> bool:
        if not self.done and self.request.Test():
            self._finish()
        return self.done

    def wait(self, timeout: float) -> None:
        if self.done:
            return
        deadline = time.monotonic() + timeout
        spins = 0
        while not self.request.Test():
            spins += 1
            if spins > 2000:  # past a few microseconds: back off
                if time.monotonic() > deadline:
                    rank = comm().Get_rank()
                    raise DistTimeoutError(
                        f"{self.what}: rank {rank} waited {timeout:g} s and the collective "
                        f"did not complete; another rank failed, exited or never called "
                        f"it (the timeout is init_process_group's `timeout`)"
                    )
                time.sleep(0 if spins < 4000 else 1e-4)
        self._finish()

    def _finish(self) -> None:
        self.done = True
        then, self.then, self.keep = self.then, None, ()
        if then is not None:
            then()


def all_reduce_into(
    c: Any, send: np.ndarray, recv: np.ndarray, d: DType, reduce: str, timeout: float
) -> None:
    """recv = every rank's `send` reduced (contiguous arrays holding dtype `d`), waited for
    with a deadline."""
    if send.size:
        request = call(
            "all_reduce", c.Iallreduce, buffer(send, d), buffer(recv, d), mpi_op(reduce, d)
        )
        Pending(request, (send, recv), None, "all_reduce").wait(timeout)


def call(what: str, fn: Any, *args: Any) -> Any:
    """Run an mpi4py call; MPI's errors become DistError naming the operation."""
    MPI = _import()
    try:
        return fn(*args)
    except MPI.Exception as e:
        raise DistError(f"{what}: MPI error {e.Get_error_code()}: {e.Get_error_string()}") from None


# --------------------------------------------------------------------------------------
# Run-time values of compiled collectives
# --------------------------------------------------------------------------------------


def handle_bits() -> int:
    """Width of MPI handles (communicator, datatype, op, request) in bits."""
    MPI = _import()
    sizes = {MPI._sizeof(c) for c in (MPI.Comm, MPI.Datatype, MPI.Op, MPI.Request)}
    if len(sizes) != 1 or sizes.pop() not in (4, 8):
        raise DistError(
            f"unsupported MPI handle sizes {sorted(sizes)} "
            f"({MPI.Get_library_version().splitlines()[0]})"
        )
    return 8 * MPI._sizeof(MPI.Comm)


def _library() -> Any:
    """The MPI library mpi4py is linked against (symbols resolve through its extension)."""
    global _lib
    if _lib is None:
        MPI = _import()
        _lib = ctypes.CDLL(MPI.__file__, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    return _lib


def function_address(name: str) -> int:
    try:
        fn = getattr(_library(), name)
    except AttributeError:
        raise DistError(f"{name} is not exported by the MPI library mpi4py loaded") from None
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def extra(name: str) -> int:
    """The run-time value of an extra named `fn:MPI_X`, `comm:world`, `type:<dtype>` or
    `op:<reduction>:<dtype>` (see `codegen.collective`)."""
    MPI = _import()
    kind, _, rest = name.partition(":")
    if kind == "fn":
        return function_address(rest)
    if kind == "comm" and rest == "world":
        return MPI._handleof(MPI.COMM_WORLD)
    if kind == "type":
        return MPI._handleof(mpi_type(dt.from_name(rest)))
    if kind == "op":
        op, _, dname = rest.partition(":")
        return MPI._handleof(mpi_op(op, dt.from_name(dname)))
    raise KeyError(f"unknown MPI extra {name!r}")


def error_string(code: int) -> str:
    try:
        return _import().Get_error_string(code)
    except Exception:  # an unknown code
        return f"error code {code}"


def abort_on_uncaught_exception() -> None:
    """Make an uncaught exception on any rank end the whole job (MPI_Abort) after printing
    it, instead of leaving the other ranks waiting in a collective."""
    previous = sys.excepthook
    if getattr(previous, "_llgrad_abort", False):
        return

    def hook(kind: Any, value: Any, tb: Any) -> None:
        try:
            c = comm()
            note = (
                f"llgrad.distributed: rank {c.Get_rank()} of {c.Get_size()} failed "
                f"({kind.__name__}); aborting the job\n"
            )
            if previous is sys.__excepthook__:
                # one write, then a pause: mpiexec forwards output through a proxy and
                # drops what is still in flight when the abort kills the job
                sys.stdout.flush()
                sys.stderr.write("".join(traceback.format_exception(kind, value, tb)) + note)
            else:
                previous(kind, value, tb)
                sys.stderr.write(note)
            sys.stderr.flush()
            time.sleep(0.5)
            c.Abort(1)
        except Exception:
            os._exit(1)

    hook._llgrad_abort = True  # type: ignore[attr-defined]
    sys.excepthook = hook
