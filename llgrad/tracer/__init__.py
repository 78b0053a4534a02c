"""Tracing Python functions into llgrad's IR."""

from .context import TraceContext, user_location
from .tensor import GraphBreak, TracerTensor
from .make_ir import make_ir

__all__ = ["TraceContext", "TracerTensor", "GraphBreak", "make_ir", "user_location"]
