"""Custom differentiable functions under PyTorch's path `torch.autograd.function`.

The implementation is `llgrad.tape.function`, below the functions (some of which are
`Function`s themselves); this module is its public face under PyTorch's name.
"""

from __future__ import annotations

from ..tape.function import (
    BackwardCFunction,
    Function,
    FunctionCtx,
    InplaceFunction,
    once_differentiable,
)

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "InplaceFunction", "once_differentiable"]
