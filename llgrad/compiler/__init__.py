"""`lg.compile`: tracing, symbolic autodiff, passes and whole-graph native code."""

from .api import CompileError, CompiledFunction, Report, compile, disable_compile
from .function import GraphFunction
from . import composites as _composites
from ..dispatch import apply as _apply
from ..tracer import context as _context
from ..runtime import blas
from ..tensor import Tensor

_apply.compiled_composites = _composites


def _prepare_gemm(operands: tuple) -> None:
    for x in operands:
        if isinstance(x, Tensor):
            blas.prepare(x.dtype)


_context.on_first_trace["matmul"] = _prepare_gemm

__all__ = [
    "compile",
    "disable_compile",
    "CompiledFunction",
    "CompileError",
    "Report",
    "GraphFunction",
]
