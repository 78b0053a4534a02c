"""Tape-based reverse-mode autograd with PyTorch's semantics: `torch.autograd`'s namespace.

The tape itself (nodes, the engine, forward-mode tangents, custom `Function`s) is
`llgrad.tape`, below the functions; this package is the public API above them.
"""

from . import forward_ad, functional  # noqa: F401
from ..tape.anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from ..tape.node import Node
from .api import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .variable import Variable, is_multithreading_enabled, set_multithreading_enabled

__all__ = [
    "backward",
    "grad",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "Node",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "functional",
    "Variable",
    "is_multithreading_enabled",
    "set_multithreading_enabled",
]
