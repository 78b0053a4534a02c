"""Collective kernel specs: an `all_reduce` in a compiled graph is two launches.

`start` posts `MPI_Iallreduce(send, recv, count, datatype, op, comm, &request)` and
returns at once; `wait` calls `MPI_Wait(&request, &status)`. The lowering
(`passes.lower`) places `start` as early as its input exists and `wait` just before the
first launch that reads the result, so the kernels between them run while MPI moves the
bytes. The kernels themselves are in `codegen/collective.py`.

Argument blocks (every handle and function address arrives at run time as an extra; MPI
handles are 32-bit integers in MPICH and pointers in Open MPI, `handle_bits`):

    start: [send, recv, count, fn MPI_Iallreduce, datatype, op, comm, request, err]
    wait:  [fn MPI_Wait, request, status, err, send, recv]

`err` is the launch's 32-byte error record: a non-zero MPI return code is stored there
(flag, code) and the runtime raises it after the call; a wait whose start failed skips
MPI_Wait. `wait` lists `send` and `recv` so that the memory plan keeps both buffers alive
(and untouched by others) until the operation completes.
"""

from __future__ import annotations

from dataclasses import dataclass

REQUEST_BYTES = 8  # room for an MPI_Request of either width
PHASES = ("start", "wait")


@dataclass(frozen=True, slots=True)
class CollectiveKernel:
    phase: str
    handle_bits: int

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"CollectiveKernel: phase must be one of {PHASES}, got {self.phase!r}")
        if self.handle_bits not in (32, 64):
            raise ValueError(
                f"CollectiveKernel: MPI handles of {self.handle_bits} bits are "
                f"not supported (32 or 64)"
            )
