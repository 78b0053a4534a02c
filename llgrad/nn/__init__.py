"""`llgrad.nn`: modules, parameters, functional layers and initializers (PyTorch's API)."""

from . import functional, init, parallel, utils
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parameter import Parameter

__all__ = ["functional", "init", "parallel", "utils", "Parameter"] + list(_modules_all)
