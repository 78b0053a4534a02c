"""Functional transforms with JAX's conventions: grad, value_and_grad, vjp, jvp, jacrev,
jacfwd, hessian and vmap, on llgrad's eager autograd and forward-mode AD.

They compose with each other (`vmap(grad(f))`, `jacfwd(jacrev(f))`, `grad(grad(f))`);
vmap works by batching rules through the interpreter stack of `llgrad.dispatch.apply`.
"""

from .batching import BatchedTensor, BatchingError
from .grad import grad, jvp, value_and_grad, vjp
from .jacobian import hessian, jacfwd, jacrev
from .vmap import vmap
from .. import pytree  # noqa: F401  (lg.transforms.pytree, as before)

__all__ = [
    "grad",
    "value_and_grad",
    "vjp",
    "jvp",
    "jacrev",
    "jacfwd",
    "hessian",
    "vmap",
    "BatchedTensor",
    "BatchingError",
    "pytree",
]
