"""Forward-mode AD under PyTorch's path `torch.autograd.forward_ad`: dual tensors and levels.

The implementation is `llgrad.tape.forward`, below the functions that propagate tangents
through it; this module is its public face under PyTorch's name.
"""

from __future__ import annotations

from ..tape.forward import (
    UnpackedDualTensor,
    dual_level,
    enter_dual_level,
    exit_dual_level,
    make_dual,
    unpack_dual,
)

__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]
