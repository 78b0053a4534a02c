"""`lg.compile`: tracing, symbolic autodiff, passes and whole-graph native code."""
from .api import CompileError, CompiledFunction, Report, compile, disable_compile
from .function import GraphFunction
from . import composites as _composites
from ..autograd import apply as _apply

_apply.compiled_composites = _composites

__all__ = ["compile", "disable_compile", "CompiledFunction", "CompileError", "Report",
           "GraphFunction"]
