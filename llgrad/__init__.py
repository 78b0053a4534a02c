"""llgrad: PyTorch-style tensors and autograd, compiled to native code with llvmlite."""
from . import ops as _ops  # noqa: F401  (fills the op registry)
from .ir.dtypes import DType
from .tensor import Size, Tensor

__version__ = "0.1.0"
