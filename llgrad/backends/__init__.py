"""`lg.backends`: the backend flags PyTorch programs read or set (mps, cudnn, cuda).

None of these backends exists in llgrad; `is_available()` answers False, and the cuDNN
and TF32 switches are plain attributes a program may set (they change nothing, since no
cuDNN or CUDA code runs).
"""
from __future__ import annotations

from types import SimpleNamespace

__all__ = ["mps", "cudnn", "cuda"]


def _false() -> bool:
    return False


mps = SimpleNamespace(is_available=_false, is_built=_false)
cudnn = SimpleNamespace(is_available=_false, enabled=True, benchmark=False,
                        deterministic=False, allow_tf32=True, version=lambda: None)
cuda = SimpleNamespace(is_built=_false,
                       matmul=SimpleNamespace(allow_tf32=False,
                                              allow_fp16_reduced_precision_reduction=True))
