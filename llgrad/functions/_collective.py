"""The differentiable, functional `all_reduce` (the registry op `all_reduce`).

`all_reduce(x, reduce)` returns a new tensor and records its derivative (an all_reduce
of the cotangent); traced, it is one IR node. `llgrad.distributed.all_reduce` (torch's
in-place API) and DDP build on it when they run inside a trace. Eagerly it runs MPI on
the input's and output's own memory (`runtime.mpi`), waiting with the process group's
timeout.
"""

from __future__ import annotations

from typing import Any

from ..dispatch.apply import apply
from ..runtime import mpi
from ..tensor import Tensor


def _world(what: str) -> Any:
    """The default process group (`lg.distributed` raises when it is not initialized)."""
    from ..distributed import _world as world  # lg.distributed is built on this module

    return world(what)


def _forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    x = operands[0].contiguous()
    out = Tensor._empty(x._shape, x._dtype)
    group = _world("all_reduce")
    mpi.all_reduce_into(
        group.comm, x._numpy_view(), out._numpy_view(), x._dtype, attrs["reduce"], group.timeout
    )
    return out


def all_reduce(x: Tensor, reduce: str = "sum") -> Tensor:
    """Every rank's `x` reduced elementwise (`reduce`: sum, product, max, min, band, bor,
    bxor); float16 and bfloat16 reduce in float32, rounded once."""
    if not isinstance(x, Tensor):
        raise TypeError(f"all_reduce: expected a Tensor, got {type(x).__name__}")
    _world("all_reduce")
    mpi.check_reduction(reduce, x._dtype, "all_reduce")
    wide = mpi.WIDENED.get(x._dtype)
    if wide is not None:
        return all_reduce(x.to(wide), reduce).to(x._dtype)
    return apply("all_reduce", (x,), {"reduce": reduce}, _forward, "AllReduceBackward")
