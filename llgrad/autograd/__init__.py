"""Tape-based reverse-mode autograd with PyTorch's semantics."""

from . import forward_ad  # noqa: F401
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .api import backward, grad
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .node import Node

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
]
from .function import Function, FunctionCtx, once_differentiable  # noqa: E402
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402
from . import functional  # noqa: E402,F401
from .variable import (
    Variable,
    is_multithreading_enabled,  # noqa: E402
    set_multithreading_enabled,
)

__all__ += [
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
