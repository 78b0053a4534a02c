"""`llgrad.func`: torch.func's namespace, with torch.func's argument conventions.

`lg.grad`, `lg.vmap`, ... follow JAX; the functions here follow `torch.func`, so code
written against it ports by changing the import. They are thin: the transforms themselves
are llgrad's (`llgrad.transforms`). Where the two conventions differ:

- `grad_and_value` returns `(grad, value)` (JAX's `value_and_grad` returns `(value,
  grad)`), and `(grad, (value, aux))` with `has_aux`;
- `vmap` does not map keyword arguments (they reach the function as they are), and its
  `randomness` defaults to "error": a random draw inside raises, unless "same" (one draw
  for the whole batch) or "different" (one per batch element) is asked for;
- `chunk_size` (vmap, jacrev) only bounds memory in PyTorch; here the whole batch always
  runs at once, with the same result.

Dict inputs keep their insertion order everywhere, so `zip(grads.values(),
params.values())` pairs each gradient with its parameter.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from . import functions as F
from . import transforms as _t
from .nn.utils.stateless import functional_call
from .transforms.vmap import RANDOMNESS

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "vmap",
    "vjp",
    "jvp",
    "jacrev",
    "jacfwd",
    "hessian",
    "stack_module_state",
]


def _check_chunk_size(chunk_size: int | None) -> None:
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")


def _check_randomness(randomness: str) -> None:
    if randomness not in RANDOMNESS:
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or "
            f"'same'. Got {randomness}"
        )


def grad(func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar-valued `func` with respect to the arguments at `argnums`;
    with `has_aux`, `func` returns `(value, aux)` and the result is `(grad, aux)`."""
    return _t.grad(func, argnums, has_aux)


def grad_and_value(
    func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """`(grad, value)`, or `(grad, (value, aux))` with `has_aux` (torch.func's order)."""
    vg = _t.value_and_grad(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        value, g = vg(*args, **kwargs)
        return g, value

    return wrapper


def vmap(
    func: Callable[..., Any],
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """Vectorize `func` over the `in_dims` axes of its positional arguments; keyword
    arguments are passed through unmapped (torch.func's rule)."""
    _check_chunk_size(chunk_size)
    _check_randomness(randomness)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not kwargs:
            return _t.vmap(func, in_dims, out_dims, randomness)(*args)

        def positional_only(*a: Any) -> Any:
            return func(*a, **kwargs)

        return _t.vmap(positional_only, in_dims, out_dims, randomness)(*args)

    return wrapper


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """`(output, vjp_fn)` (or `(output, vjp_fn, aux)`); `vjp_fn(cotangents)` returns a
    tuple with one entry per primal."""
    return _t.vjp(func, *primals, has_aux=has_aux)


def jvp(
    func: Callable[..., Any],
    primals: Any,
    tangents: Any,
    *,
    strict: bool = False,
    has_aux: bool = False,
) -> Any:
    """`(output, jvp_out)` (or with `aux`): `func(*primals)` and its Jacobian applied to
    `tangents`."""
    return _t.jvp(func, primals, tangents, has_aux=has_aux)


def jacrev(
    func: Callable[..., Any],
    argnums: Any = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | None = None,
    _preallocate_and_copy: bool = False,
) -> Callable[..., Any]:
    """The Jacobian of `func` by reverse mode (one vjp per output element, vmapped)."""
    _check_chunk_size(chunk_size)
    return _t.jacrev(func, argnums, has_aux=has_aux)


def jacfwd(
    func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False, *, randomness: str = "error"
) -> Callable[..., Any]:
    """The Jacobian of `func` by forward mode (one jvp per input element, vmapped)."""
    _check_randomness(randomness)
    return _t.jacfwd(func, argnums, has_aux=has_aux)


def hessian(func: Callable[..., Any], argnums: Any = 0) -> Callable[..., Any]:
    """The Hessian of a scalar-valued `func` (forward-over-reverse in PyTorch; reverse over
    reverse here: the same matrix)."""
    return _t.hessian(func, argnums)


def stack_module_state(models: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """`(params, buffers)`: each parameter and buffer of the `models` (all of one class)
    stacked along a new leading dimension, for `vmap` over an ensemble with
    `functional_call`. Stacked parameters are new leaves that require grad when the
    originals do; they share no memory with the models."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    first = models[0]
    if not all(m.training == first.training for m in models):
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    if not all(type(m) is type(first) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named: list[dict[str, Any]], what: str) -> dict[str, Any]:
        out = {}
        for name in named[0]:
            ts = [n[name] for n in named]
            needs = [t.requires_grad for t in ts]
            if any(needs) and not all(needs):
                raise RuntimeError(
                    f"Expected {name} from each model to have the same .requires_grad"
                )
            value = F.stack([t.detach() for t in ts])
            out[name] = value.requires_grad_() if all(needs) else value
        return out

    params = stacked([dict(m.named_parameters()) for m in models], "parameters")
    buffers = stacked([dict(m.named_buffers()) for m in models], "buffers")
    return params, buffers
