"""NumPy's protocols on tensors: scalars as numbers, ufuncs and array functions.

- NumPy scalars (`np.float32(2)`, `np.int64(3)`, `np.bool_(True)`) are Python numbers
  wherever an op takes a number: `t * np.float32(2)` is `t * 2.0` and keeps `t`'s dtype,
  as in PyTorch (`plain_number`).
- A NumPy ufunc called on a tensor (`np.exp(t)`, `np.add(a, t)`, `np.float64(2) * t`,
  `array * t`) runs the llgrad op instead: the result is a tensor and gradients flow. An
  ndarray operand becomes a constant tensor. `out=`, `where=` and ufunc methods other
  than `__call__` and `reduce` have no llgrad meaning: on tensors that require grad they
  raise a TypeError naming the ufunc; otherwise NumPy computes them on the tensors' values
  and returns ndarrays, as it would for any array-like.
- NumPy functions (`np.sum(t)`, `np.concatenate([a, b])`, `np.where(...)`, ...) dispatch
  the same way through `__array_function__`; the ones listed in `FUNCTIONS` run llgrad's
  function, the others follow the same rule as unlisted ufuncs.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from .. import pytree
from ..tensor import Tensor

__all__ = ["plain_number", "plain_numbers", "array_ufunc", "array_function", "UFUNCS", "FUNCTIONS"]


def plain_number(x: Any) -> Any:
    """A NumPy scalar number as the Python number it holds; anything else unchanged."""
    return x.item() if isinstance(x, (np.number, np.bool_)) else x


def plain_numbers(operands: tuple) -> tuple:
    return tuple(plain_number(o) for o in operands)


def _lg() -> Any:
    import llgrad  # circle: llgrad -> functions.methods -> here

    return llgrad


def _ufuncs() -> dict[Any, Callable[..., Any]]:
    lg = _lg()
    table = {
        np.add: lg.add,
        np.subtract: lg.sub,
        np.multiply: lg.mul,
        np.divide: lg.div,
        np.true_divide: lg.div,
        np.floor_divide: lg.floor_divide,
        np.power: lg.pow,
        np.float_power: lambda a, b: lg.pow(_as_tensor(a).double(), b),
        np.remainder: lg.remainder,
        np.fmod: lg.fmod,
        np.negative: lg.neg,
        np.positive: lambda a: a,
        np.absolute: lg.abs,
        np.fabs: lg.abs,
        np.sign: lg.sign,
        np.exp: lg.exp,
        np.exp2: lg.exp2,
        np.expm1: lg.expm1,
        np.log: lg.log,
        np.log2: lg.log2,
        np.log10: lg.log10,
        np.log1p: lg.log1p,
        np.sqrt: lg.sqrt,
        np.square: lg.square,
        np.reciprocal: lg.reciprocal,
        np.sin: lg.sin,
        np.cos: lg.cos,
        np.tan: lg.tan,
        np.tanh: lg.tanh,
        np.floor: lg.floor,
        np.ceil: lg.ceil,
        np.trunc: lg.trunc,
        np.rint: lg.round,
        np.maximum: lg.maximum,
        np.minimum: lg.minimum,
        np.equal: lg.eq,
        np.not_equal: lg.ne,
        np.less: lg.lt,
        np.less_equal: lg.le,
        np.greater: lg.gt,
        np.greater_equal: lg.ge,
        np.logical_and: lg.logical_and,
        np.logical_or: lg.logical_or,
        np.logical_xor: lg.logical_xor,
        np.logical_not: lg.logical_not,
        np.isnan: lg.isnan,
        np.isinf: lg.isinf,
        np.isfinite: lg.isfinite,
        np.matmul: lg.matmul,
        np.conjugate: lg.conj,
        np.arctan2: lg.atan2,
        np.bitwise_and: lg.bitwise_and,
        np.bitwise_or: lg.bitwise_or,
        np.bitwise_xor: lg.bitwise_xor,
        np.invert: lambda a: ~a,
    }
    for name, fn in (
        ("arcsin", "asin"),
        ("arccos", "acos"),
        ("arctan", "atan"),
        ("sinh", "sinh"),
        ("cosh", "cosh"),
        ("arcsinh", "asinh"),
        ("arccosh", "acosh"),
        ("arctanh", "atanh"),
        ("signbit", "signbit"),
        ("copysign", "copysign"),
        ("hypot", "hypot"),
        ("heaviside", "heaviside"),
        ("logaddexp", "logaddexp"),
        ("fmax", "fmax"),
        ("fmin", "fmin"),
    ):
        if hasattr(lg, fn):
            table[getattr(np, name)] = getattr(lg, fn)
    return table


_REDUCE = {
    np.add: "sum",
    np.multiply: "prod",
    np.maximum: "amax",
    np.minimum: "amin",
    np.logical_and: "all",
    np.logical_or: "any",
}
UFUNCS: dict[Any, Callable[..., Any]] = {}


def _as_tensor(x: Any) -> Any:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return _lg().tensor(x)
    return plain_number(x)


def _tensors_need_grad(values: Any) -> bool:
    return any(isinstance(v, Tensor) and v.requires_grad for v in pytree.leaves(values))


def _to_numpy(values: Any) -> Any:
    return pytree.tree_map(lambda v: v.numpy() if isinstance(v, Tensor) else v, values)


def _refuse(what: str, why: str) -> TypeError:
    return TypeError(
        f"{what}: {why}; it would drop the gradient of a tensor that "
        f"requires grad. Use the llgrad function, or .detach().numpy() to "
        f"leave autograd on purpose"
    )


def array_ufunc(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """`Tensor.__array_ufunc__` (see the module docstring)."""
    if not UFUNCS:
        UFUNCS.update(_ufuncs())
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    fn = UFUNCS.get(ufunc)
    plain = not kwargs or set(kwargs) <= {"dtype"} and kwargs.get("dtype") is None
    if method == "__call__" and fn is not None and plain:
        return fn(*[_as_tensor(x) for x in inputs])
    if method == "reduce" and ufunc in _REDUCE and set(kwargs) <= {"axis", "keepdims"}:
        (x,) = inputs
        return _reduction(_REDUCE[ufunc])(
            x, kwargs.get("axis", 0), bool(kwargs.get("keepdims", False))
        )
    if _tensors_need_grad((inputs, kwargs)):
        why = (
            "llgrad has no equivalent of this call"
            if fn is None and method == "__call__"
            else f"llgrad does not run {'out=/where= arguments' if method == '__call__' else 'this ufunc method'}"
        )
        raise _refuse(name, why)
    return getattr(ufunc, method)(*_to_numpy(inputs), **_to_numpy(kwargs))


def _reduction(name: str) -> Callable[..., Any]:
    """NumPy's `f(a, axis=None, keepdims=False)` on llgrad's reduction `name` (prod, which
    takes one axis, reduces a tuple of axes one at a time)."""

    def run(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        t = _as_tensor(a)
        fn = getattr(_lg(), name)
        if axis is None:
            r = fn(t)
            return r.reshape([1] * t.ndim) if keepdims else r
        if name != "prod":
            return fn(t, axis, keepdim=keepdims)
        for ax in sorted(
            (ax % t.ndim for ax in (axis if isinstance(axis, tuple) else (axis,))), reverse=True
        ):
            t = fn(t, ax, keepdim=keepdims)
        return t

    return run


def _functions() -> dict[Any, Callable[..., Any]]:
    lg = _lg()

    def seq(fn: Callable[..., Any]) -> Callable[..., Any]:
        return lambda arrays, axis=0: fn([_as_tensor(a) for a in arrays], axis)

    # only the arguments each entry names are taken: any other (out=, dtype=, order=, ...)
    # makes `array_function` fall back instead of being ignored
    return {
        np.sum: _reduction("sum"),
        np.mean: _reduction("mean"),
        np.prod: _reduction("prod"),
        np.max: _reduction("amax"),
        np.amax: _reduction("amax"),
        np.min: _reduction("amin"),
        np.amin: _reduction("amin"),
        np.all: _reduction("all"),
        np.any: _reduction("any"),
        np.concatenate: seq(lg.cat),
        np.stack: seq(lg.stack),
        np.where: lambda c, x=None, y=None: (
            lg.where(_as_tensor(c), _as_tensor(x), _as_tensor(y))
            if x is not None
            else NotImplemented
        ),
        np.transpose: lambda a, axes=None: _as_tensor(a).permute(
            *(axes if axes is not None else reversed(range(_as_tensor(a).ndim)))
        ),
        np.reshape: lambda a, shape: _as_tensor(a).reshape(shape),
        np.squeeze: lambda a, axis=None: (
            lg.squeeze(_as_tensor(a)) if axis is None else lg.squeeze(_as_tensor(a), axis)
        ),
        np.expand_dims: lambda a, axis: lg.unsqueeze(_as_tensor(a), axis),
        np.dot: lambda a, b: lg.matmul(_as_tensor(a), _as_tensor(b)),
        np.clip: lambda a, a_min=None, a_max=None: lg.clamp(
            _as_tensor(a), plain_number(a_min), plain_number(a_max)
        ),
        np.cumsum: lambda a, axis=None: (
            lg.cumsum(_as_tensor(a).reshape(-1), 0)
            if axis is None
            else lg.cumsum(_as_tensor(a), axis)
        ),
        np.argmax: lambda a, axis=None: lg.argmax(_as_tensor(a), axis),
        np.argmin: lambda a, axis=None: lg.argmin(_as_tensor(a), axis),
        np.einsum: lambda eq, *ops: lg.einsum(eq, *[_as_tensor(o) for o in ops]),
        np.shape: lambda a: tuple(_as_tensor(a).shape),
        np.ndim: lambda a: _as_tensor(a).ndim,
        np.size: lambda a, axis=None: (
            _as_tensor(a).numel() if axis is None else _as_tensor(a).shape[axis]
        ),
        np.var: lambda a, axis=None, ddof=0, keepdims=False: lg.var(
            _as_tensor(a), axis, correction=ddof, keepdim=keepdims
        ),
        np.std: lambda a, axis=None, ddof=0, keepdims=False: lg.std(
            _as_tensor(a), axis, correction=ddof, keepdim=keepdims
        ),
    }


FUNCTIONS: dict[Any, Callable[..., Any]] = {}
_SIGNATURES: dict[Any, inspect.Signature] = {}


def _takes(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bool:
    """Whether `fn` takes these arguments (an argument it does not name: fall back)."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    try:
        sig.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def array_function(self: Tensor, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """`Tensor.__array_function__` (see the module docstring)."""
    if not FUNCTIONS:
        FUNCTIONS.update(_functions())
    fn = FUNCTIONS.get(func)
    if fn is not None and _takes(fn, args, kwargs):
        got = fn(*args, **kwargs)
        if got is not NotImplemented:
            return got
    if _tensors_need_grad((args, kwargs)):
        raise _refuse(
            f"np.{func.__name__}",
            "llgrad has no equivalent of this call"
            if fn is None
            else "llgrad does not take these arguments",
        )
    return func(*_to_numpy(args), **_to_numpy(kwargs))
