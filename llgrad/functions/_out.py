"""`out=` for the `lg.*` functions that take it in PyTorch, in one place.

`with_out(fn, name)` gives `fn` a keyword-only `out` argument with PyTorch's semantics:
- the result is computed as without `out`, then written into `out` (a tensor, or a tuple of
  tensors for functions returning several) and `out` is returned;
- autograd does not record through `out=`: when grad mode is on and the result requires grad
  the call raises, as PyTorch does;
- the result's dtype must be castable to `out`'s by PyTorch's category rule (no float into an
  integer tensor, no complex into a real one, nothing but bool into bool);
- an `out` of another shape is resized (with PyTorch's warning when it held elements);
- creation functions (`zeros`, `arange`, ...) make their values in `out`'s dtype unless
  `dtype=` is given.
Where llgrad differs: the values are computed into a fresh tensor and copied, so `out=` saves
no allocation; the write is checked for overlap with the inputs as every in-place write is.
Methods (`x.add(y)`) are not wrapped: PyTorch's have no `out` either.
"""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable

from ..ir import dtypes as dt
from ..tensor import Tensor

# The `lg.*` functions whose PyTorch counterpart documents `out=`.
OUT_FUNCTIONS = frozenset("""
abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax angle
any arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh asin asinh atan atan2 atanh
baddbmm bernoulli bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift
bitwise_xor bmm bucketize cat ceil cholesky cholesky_inverse cholesky_solve clamp clip
column_stack complex concat concatenate conj_physical copysign cos cosh cross cummax cummin
cumprod cumsum deg2rad diag digamma div divide dot dstack empty eq erf erfc erfinv exp exp2
expm1 eye fix float_power floor floor_divide fmax fmin fmod frac frexp full gather gcd ge
geqrf ger greater greater_equal gt heaviside histc histogram hstack hypot i0 igamma igammac
index_add index_copy index_reduce index_select inner inverse isneginf isposinf kron kthvalue
lcm ldexp le less less_equal lgamma linspace log log10 log1p log2 logaddexp logaddexp2
logcumsumexp logical_and logical_not logical_or logical_xor logit logspace lt lu_solve
lu_unpack masked_select matmul matrix_power max maximum min minimum mm mode msort mul
multinomial mv mvlgamma nan_to_num nanmean nanquantile narrow_copy ne neg negative nextafter
nonzero normal not_equal ones ormqr outer polar polygamma pow qr quantile rad2deg rand randint
randn randperm reciprocal remainder renorm round row_stack rsqrt searchsorted sgn sigmoid
sign signbit sin sinc sinh sort sqrt square stack std std_mean sub subtract svd
take_along_dim tan tanh topk triangular_solve tril triu true_divide trunc var var_mean vdot
vstack where xlogy zeros
""".split())

# Creation functions: without `dtype=`, their values are made in `out`'s dtype.
CREATION = frozenset("arange empty eye full linspace logspace ones rand randint randn randperm "
                     "zeros normal".split())


def can_cast(src: dt.DType, dst: dt.DType) -> bool:
    """PyTorch's `can_cast`: no cast to a lower category (complex > float > int > bool)."""
    def category(d: dt.DType) -> int:
        return 3 if d.is_complex else 2 if d.is_floating_point else 0 if d is dt.bool_ else 1
    return category(src) <= category(dst)


def _resize(t: Tensor, shape: tuple[int, ...], op: str) -> None:
    """Point `t` at fresh contiguous memory of `shape` (PyTorch resizes `out` so)."""
    if t.numel() != 0:
        warnings.warn(f"{op}: an output with one or more elements was resized since it had "
                      f"shape {list(t._shape)}, which does not match the required output "
                      f"shape {list(shape)}. This behavior is deprecated (as in PyTorch); "
                      f"reuse an out tensor only when it has the right shape or no elements.",
                      UserWarning, stacklevel=4)
    fresh = Tensor._empty(tuple(shape), t._dtype)
    t._storage = fresh._storage
    t._offset = 0
    t._shape = fresh._shape
    t._strides = fresh._strides
    t._ptr = fresh._ptr
    t._lkey = fresh._lkey


def store(op: str, result: Any, out: Any) -> Any:
    """Write `result` (a tensor or a tuple of them) into `out`; return `out`."""
    from ..autograd.grad_mode import is_grad_enabled
    results = (result,) if isinstance(result, Tensor) else tuple(result)
    outs = (out,) if isinstance(out, Tensor) else out
    if not isinstance(outs, (tuple, list)) or len(outs) != len(results) or \
            not all(isinstance(o, Tensor) for o in outs):
        want = "a Tensor" if len(results) == 1 else f"a tuple of {len(results)} Tensors"
        raise TypeError(f"{op}(): argument 'out' must be {want}, not {type(out).__name__}")
    if is_grad_enabled() and any(r._requires_grad for r in results):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad.")
    for r, o in zip(results, outs):
        if not can_cast(r._dtype, o._dtype):
            raise RuntimeError(f"{op}: result type {r._dtype.name} can't be cast to the "
                               f"desired output type {o._dtype.name}")
        if o._shape != r._shape:
            _resize(o, r._shape, op)
        o.copy_(r)
    if isinstance(out, Tensor):
        return out
    return type(result)(*outs) if hasattr(result, "_fields") else tuple(outs)


def with_out(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`fn` with PyTorch's keyword-only `out=` (see the module docstring)."""
    creation = name in CREATION

    @functools.wraps(fn)
    def wrapper(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            return fn(*args, **kwargs)
        if creation and "dtype" not in kwargs and isinstance(out, Tensor):
            kwargs["dtype"] = out._dtype
        return store(name, fn(*args, **kwargs), out)

    try:
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        extra = [p for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD]
        params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation="Tensor | None"))
        wrapper.__signature__ = sig.replace(parameters=params + extra)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass
    return wrapper


def accepts_out(fn: Callable[..., Any]) -> bool:
    """Whether `fn` already takes `out` itself."""
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True


def add_out(namespace: dict[str, Any]) -> None:
    """Give every function of `namespace` named in OUT_FUNCTIONS its `out=` argument."""
    for name in OUT_FUNCTIONS:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and not accepts_out(fn):
            namespace[name] = with_out(fn, name)
