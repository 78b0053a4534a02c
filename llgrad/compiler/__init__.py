"""`lg.compile`: tracing, symbolic autodiff, passes and whole-graph native code."""
from .api import CompileError, CompiledFunction, Report, compile, disable_compile
from .function import GraphFunction

__all__ = ["compile", "disable_compile", "CompiledFunction", "CompileError", "Report",
           "GraphFunction"]
