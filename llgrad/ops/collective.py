"""Collectives: `all_reduce` across the processes of the MPI world.

`all_reduce(x, reduce="sum")` is every rank's `x` reduced elementwise (sum, product, max,
min, band, bor, bxor; bool tensors reduce logically), the same on every rank. It is an op
of the registry like any other, so a traced training step that averages its gradients
stays one graph: the compiled code calls the MPI library itself (`codegen.collective`).
The frontend (`llgrad.distributed`) applies `avg` as a sum divided by the world size, and
reduces float16/bfloat16 in float32.

Its derivative is itself: every rank's output depends on every rank's input, so the
cotangent of rank r's input is the sum over ranks of their output cotangents, an
all_reduce of the cotangent (defined for `sum`; the others have no derivative here).

The NumPy reference needs a transport, which the process group installs
(`extra["transport"]`, set by `llgrad.distributed.init_process_group`): the interpreter
then runs a graph holding an all_reduce as the compiled code does, over MPI.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.registry import Attr, AttrKind, Group, OpDef, get, register
from ..ir.types import TensorType

REDUCTIONS = ("sum", "product", "max", "min", "band", "bor", "bxor")


def _infer_all_reduce(types: tuple[TensorType, ...], reduce: str) -> TensorType:
    (x,) = types
    if reduce not in REDUCTIONS:
        raise ValueError(f"all_reduce: unknown reduction {reduce!r}; expected one of {REDUCTIONS}")
    return x


def _ref_all_reduce(x: np.ndarray, reduce: str) -> np.ndarray:
    transport = get("all_reduce").extra.get("transport")
    if transport is None:
        raise RuntimeError(
            "all_reduce: no process group; call llgrad.distributed.init_process_group() first"
        )
    return transport(np.ascontiguousarray(x), reduce)


register(
    OpDef(
        "all_reduce",
        Group.COLLECTIVE,
        1,
        attrs=(Attr("reduce", AttrKind.STR, "sum"),),
        infer=_infer_all_reduce,
        reference=_ref_all_reduce,
        backward_name="AllReduceBackward",
        promotion="none",
        saves="",
        doc="every rank's input reduced elementwise across the MPI world",
    )
)


def _vjp_all_reduce(ctx: Any, g: Any, reduce: str) -> Any:
    if reduce != "sum":
        raise RuntimeError(
            f"all_reduce: the derivative is defined for sum (and avg, a sum "
            f"divided by the world size), not {reduce}"
        )
    return (ctx.F._collective.all_reduce(g, "sum"),)


def _jvp_all_reduce(ctx: Any, tangents: tuple, reduce: str) -> Any:
    if reduce != "sum":
        raise RuntimeError(
            f"all_reduce: forward-mode derivative is defined for sum only, not {reduce}"
        )
    return ctx.F._collective.all_reduce(tangents[0], "sum")


_OP = get("all_reduce")
_OP.vjp = _vjp_all_reduce
_OP.jvp = _jvp_all_reduce
