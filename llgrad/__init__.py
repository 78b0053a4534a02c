"""llgrad: PyTorch-style tensors and autograd, compiled to native code with llvmlite."""

from . import ops as _ops  # noqa: F401  (fills the op registry)
from .ir.dtypes import (
    DType,
    bfloat16,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from .ir.dtypes import bool_ as bool  # noqa: A001  (PyTorch's name)
from .tensor import Size, Tensor
from .functions import *  # noqa: F401,F403
from .functions import methods as _methods
from .functions._out import add_out as _add_out, add_out_namespaces as _add_out_namespaces
from .dispatch.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from . import autograd  # noqa: F401
from ._printing import set_printoptions, get_printoptions  # noqa: F401

_methods.bind()

from .device import device, get_default_device, set_default_device  # noqa: E402,F401
from . import accelerator, backends, cuda  # noqa: E402,F401
from . import jit  # noqa: E402,F401  (TorchScript entry points: see llgrad/jit.py)
from . import nn, optim, utils  # noqa: E402,F401
from .nn._torch_level import *  # noqa: E402,F401,F403  (torch.conv2d, torch.batch_norm, ...)
from . import fft, special  # noqa: E402,F401
from . import distributions  # noqa: E402,F401
from . import onnx  # noqa: E402,F401
import importlib as _importlib  # noqa: E402

# (`from . import linalg` would find functions.linalg, which the star import above binds)
linalg = _importlib.import_module(".linalg", __name__)
from . import ir  # noqa: E402,F401
from .compiler import compile, disable_compile  # noqa: E402,F401  (lg.compile)
from .eager import cuda as _eager_cuda  # noqa: E402,F401  (CUDA tensors: sets the device hooks)
from .tracer import make_ir  # noqa: E402,F401
from .transforms import (  # noqa: E402
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    value_and_grad,  # noqa: E402,F401
    vjp,
    vmap,
)
from .serialization import load, save  # noqa: E402,F401
from . import func  # noqa: E402,F401
from . import debug  # noqa: E402,F401
from .typeinfo import finfo, iinfo  # noqa: E402,F401
from .runtime.launch import set_threads as set_num_threads  # noqa: E402,F401
from .runtime.launch import threads as get_num_threads  # noqa: E402,F401

dtype = DType
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

from .functions.tensor_extras import layout  # noqa: E402,F401  (the class, as torch.layout)
from . import random, testing  # noqa: E402,F401
from . import profiler  # noqa: E402,F401

_add_out(globals())  # PyTorch's `out=` on the functions that take it
_add_out_namespaces()

from ._version import __version__  # noqa: E402,F401
