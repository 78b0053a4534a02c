"""`llgrad.nn`: modules, parameters, functional layers and initializers (PyTorch's API)."""
from . import functional, init, utils
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parameter import Parameter

__all__ = ["functional", "init", "utils", "Parameter"] + list(_modules_all)
