"""Reductions: sum, mean, max/min (with and without dim), prod, var, std, norm, ..."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from ..tape import forward as forward_ad
from ..dispatch import ops
from ..dispatch.apply import apply, apply_composite, composite_function, interpreters
from ..dispatch.grad_mode import _state as grad_state
from ..eager import reduce
from ..eager.reduce import extreme_plan
from ..ir import dtypes as dt, registry
from ..ir.types import normalize_axis
from ..runtime import launch
from ..tensor import Tensor
from . import fastpath
from ._errors import names_op
from ._host import host_plain
from .creation import full
from .elementwise import abs as abs_, add, eq, exp, log, maximum, minimum, real, sub, where
from .indexing import gather
from .shape import _keyword_shape, reshape, shape_arg

values_indices = namedtuple("values_indices", ["values", "indices"])


_axes_memo: dict[tuple, tuple[int, ...]] = {}


def _axes(dim: Any, ndim: int, op: str) -> tuple[int, ...]:
    """`dim` as a tuple of normalized axes; None (or an empty list) means all."""
    if dim is None:
        return ()
    c = dim.__class__
    if c is int or c is tuple and fastpath._ints(dim):  # (bools are not memoized)
        key = (dim, ndim, op)
        hit = _axes_memo.get(key)
        if hit is None:
            hit = _checked_axes(dim, ndim, op)
            if len(_axes_memo) < 4096:
                _axes_memo[key] = hit
        return hit
    return _checked_axes(dim, ndim, op)


def _checked_axes(dim: Any, ndim: int, op: str) -> tuple[int, ...]:
    dims = (
        (dim,) if isinstance(dim, int) else tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    )
    for d in dims:
        if not isinstance(d, int) and not hasattr(d, "__index__") or isinstance(d, bool):
            raise TypeError(
                f"{op}(): argument 'dim' must be an int or a tuple of ints, "
                f"not {type(dim).__name__}"
                + (f" (element {type(d).__name__})" if d is not dim else "")
            )
    dims = tuple(d.__index__() for d in dims)
    norm = tuple(normalize_axis(d, ndim, op) for d in dims)
    if len(set(norm)) != len(norm):
        raise RuntimeError(f"{op}: dim {list(dims)} appears multiple times in the list of dims")
    return norm


def _forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return reduce.run(op, operands[0], attrs["axes"], attrs["keepdim"])


def _reduce(op: str, x: Tensor, dim: Any, keepdim: bool, name: str | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    axes = _axes(dim, x.ndim, op)
    return apply(op, (x,), {"axes": axes, "keepdim": keepdim}, _forward, name)


def sum(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: dt.DType | None = None
) -> Tensor:
    if dtype is not None:
        input = input.to(dtype)
    name = "SumBackward0" if dim is None else "SumBackward1"
    out = _reduce("sum", input, dim, keepdim, name)
    # an integer or bool sum accumulates in int64; a `dtype` asks for that dtype (int64
    # sums wrap as narrower ones do, so the cast gives the narrow accumulation's bits)
    return out if dtype is None or out._dtype is dtype else out.to(dtype)


@names_op("prod")
def prod(
    input: Tensor, dim: int | None = None, keepdim: bool = False, *, dtype: dt.DType | None = None
) -> Tensor:
    if dtype is not None:
        input = input.to(dtype)
    name = "ProdBackward0" if dim is None else "ProdBackward1"
    out = _reduce("prod", input, dim, keepdim, name)
    return out if dtype is None or out._dtype is dtype else out.to(dtype)  # (as sum's)


def amax(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    return _reduce("amax", input, dim if dim != () else None, keepdim, "AmaxBackward0")


def amin(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    return _reduce("amin", input, dim if dim != () else None, keepdim, "AminBackward0")


def _reduce_attrs(op: str) -> Any:
    """The (axes, keepdim) `_reduce` runs `op` with for `dim`, `keepdim` (for the direct
    calls of fastpath.py)."""

    def attrs(dim: Any, keepdim: bool, ndim: int) -> tuple[tuple[int, ...], bool]:
        return _axes(None if dim == () else dim, ndim, op), keepdim

    return attrs


# `x.sum()`, `x.sum(1)` and friends on a small tensor: a direct launch (fastpath.py)
sum = fastpath.reduction("sum", sum, _reduce_attrs("sum"))
prod = fastpath.reduction("prod", prod, _reduce_attrs("prod"))
amax = fastpath.reduction("amax", amax, _reduce_attrs("amax"))
amin = fastpath.reduction("amin", amin, _reduce_attrs("amin"))


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    axes = _axes(dim, input.ndim, "argmax")
    return apply(
        "argmax", (input,), {"axes": axes, "keepdim": keepdim and dim is not None}, _forward
    )


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    axes = _axes(dim, input.ndim, "argmin")
    return apply(
        "argmin", (input,), {"axes": axes, "keepdim": keepdim and dim is not None}, _forward
    )


def _arg_attrs(op: str) -> Any:
    def attrs(dim: Any, keepdim: bool, ndim: int) -> tuple[tuple[int, ...], bool]:
        return _axes(dim, ndim, op), keepdim and dim is not None

    return attrs


argmax = fastpath.reduction("argmax", argmax, _arg_attrs("argmax"))
argmin = fastpath.reduction("argmin", argmin, _arg_attrs("argmin"))


def _extreme(op: str, input: Tensor, dim: Any, keepdim: bool, other: Any) -> Any:
    if isinstance(dim, Tensor):  # torch.max(a, b): elementwise
        return (maximum if op == "max" else minimum)(input, dim)
    if other is not None:
        return (maximum if op == "max" else minimum)(input, other)
    if dim is None:
        name = "MaxBackward1" if op == "max" else "MinBackward1"
        return _reduce("amax" if op == "max" else "amin", input, None, False, name)
    d = normalize_axis(dim, input.ndim, op)
    if (
        input.__class__ is Tensor
        and input._shape
        and input._shape[d]
        and input.numel() <= _EXTREME_KERNEL_MAX
        and host_plain(input)
    ):
        out = _host_extreme(op, input, d, keepdim)
        if out is not None:
            return out
    # bool: indices from its 0/1 values (argmax/argmin themselves refuse bool, as torch)
    ranked = input.to(dt.uint8) if input._dtype is dt.bool_ else input
    idx = (argmax if op == "max" else argmin)(ranked, d, keepdim=True)

    name = "MaxBackward0" if op == "max" else "MinBackward0"
    values = gather(input, d, idx, name=name)
    if not keepdim and input.ndim:
        values = reshape(values, input._shape[:d] + input._shape[d + 1 :], name=name)
        idx = idx.squeeze(d)
    return values_indices(values, idx)


# up to here one scalar kernel pass beats argmax's vectorized kernel and a gather
_EXTREME_KERNEL_MAX = 4096


def _host_extreme(op: str, x: Tensor, d: int, keepdim: bool) -> Any:
    """`max`/`min` along `d` of a plain tensor with nothing to record (at least one
    element along `d`): one kernel makes the values and indices, or None when `x`'s
    layout has no such kernel (the general path serves it)."""
    plan = extreme_plan(x, d, op == "max", False)
    if plan is None:
        return None
    kernel, sizes, strides = plan
    shape = x._shape
    out_shape = shape[:d] + (1,) + shape[d + 1 :] if keepdim else shape[:d] + shape[d + 1 :]
    values = Tensor._empty(out_shape, x._dtype)
    idx = Tensor._empty(out_shape, dt.int64)
    launch.call(kernel, [*sizes, x._ptr, *strides, values._ptr, idx._ptr])
    return values_indices(values, idx)


# `lg.max(x)`: amax's direct launch when autograd does not record it (fastpath.py)
_max_all = fastpath.whole_reduction("amax", lambda x: _extreme("max", x, None, False, None))
_min_all = fastpath.whole_reduction("amin", lambda x: _extreme("min", x, None, False, None))


def max(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
    if dim is None and other is None and input.__class__ is Tensor:
        return _max_all(input)
    if dim.__class__ is Tensor and other is None:
        return maximum(input, dim)
    return _extreme("max", input, dim, keepdim, other)


def min(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
    if dim is None and other is None and input.__class__ is Tensor:
        return _min_all(input)
    if dim.__class__ is Tensor and other is None:
        return minimum(input, dim)
    return _extreme("min", input, dim, keepdim, other)


def _float_input(op: str, x: Tensor, dtype: dt.DType | None) -> Tensor:
    if dtype is not None:
        return x.to(dtype)
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        raise RuntimeError(
            f"{op}(): could not infer output dtype. Input dtype must be either a "
            f"floating point or complex dtype. Got: {x._dtype.name}"
        )
    return x


def mean(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: dt.DType | None = None
) -> Tensor:
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(
            f"mean(): could not infer output dtype. Optional dtype must be "
            f"either a floating point or complex dtype. Got: {dtype.name}"
        )
    x = _float_input("mean", input, dtype)
    if (
        x.__class__ is Tensor
        and not _MEAN.eager_compile
        and not interpreters
        and not forward_ad._level[0]
        and not (grad_state.enabled and x._requires_grad)
    ):
        # what `apply_composite` runs for a call it does not record: the decomposition
        # (its sum and division take their direct paths)
        return _MEAN.decompose(ops.F, x, _axes(dim, x.ndim, "mean"), keepdim)
    name = "MeanBackward0" if dim is None else "MeanBackward1"
    return apply_composite(
        "mean", (x,), {"axes": _axes(dim, x.ndim, "mean"), "keepdim": keepdim}, name
    )


_MEAN = registry.get("mean")


def _correction(unbiased: Any, correction: Any) -> float:
    if correction is not None:
        return float(correction)
    if unbiased is None:
        return 1.0
    return 1.0 if unbiased else 0.0


@names_op("var")
def var(
    input: Tensor,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    if isinstance(dim, bool):  # var(x, False): the unbiased flag
        dim, unbiased = None, dim
    x = _float_input("var", input, None)
    return apply_composite(
        "var",
        (x,),
        {
            "axes": _axes(dim, x.ndim, "var"),
            "keepdim": keepdim,
            "correction": _correction(unbiased, correction),
        },
        "VarBackward0",
    )


@names_op("std")
def std(
    input: Tensor,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    x = _float_input("std", input, None)
    return apply_composite(
        "std",
        (x,),
        {
            "axes": _axes(dim, x.ndim, "std"),
            "keepdim": keepdim,
            "correction": _correction(unbiased, correction),
        },
        "StdBackward0",
    )


def _spread_mean(
    op: str, input: Tensor, dim: Any, unbiased: Any, keepdim: bool, correction: Any, name: str
) -> tuple[Tensor, Tensor]:
    """(var or std, mean): two nodes, both under PyTorch's one name (`VarMeanBackward0`)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    x = _float_input(f"{op}_mean", input, None)
    axes = _axes(dim, x.ndim, f"{op}_mean")
    spread = apply_composite(
        op,
        (x,),
        {"axes": axes, "keepdim": keepdim, "correction": _correction(unbiased, correction)},
        name,
    )
    return spread, apply_composite("mean", (x,), {"axes": axes, "keepdim": keepdim}, name)


@composite_function
def var_mean(
    input: Tensor,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:
    return _spread_mean("var", input, dim, unbiased, keepdim, correction, "VarMeanBackward0")


@composite_function
def std_mean(
    input: Tensor,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:
    return _spread_mean("std", input, dim, unbiased, keepdim, correction, "StdMeanBackward0")


@names_op("logsumexp")
def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """log(sum(exp(input), dim)) computed stably (shifted by the maximum; a complex input
    by the maximum of its real parts, as torch)."""
    if input._dtype.is_complex:
        return _complex_logsumexp(input, dim, keepdim)
    x = _float_input(
        "logsumexp",
        input.to(dt.get_default_dtype()) if not input._dtype.is_floating_point else input,
        None,
    )
    axes = _axes(dim, x.ndim, "logsumexp")
    if x.ndim and 0 in [x.shape[a] for a in axes]:  # log of an empty sum: -inf
        return add(sum(x, axes, keepdim), float("-inf"))
    return apply_composite(
        "logsumexp", (x,), {"axes": axes, "keepdim": keepdim}, "LogsumexpBackward0"
    )


def _complex_logsumexp(x: Tensor, dim: Any, keepdim: bool) -> Tensor:
    """logsumexp of complex values: m + log(sum(exp(x - m))), m the largest real part
    (0 where it is infinite), by composition."""
    axes = _axes(dim, x.ndim, "logsumexp")
    if x.ndim and 0 in [x.shape[a] for a in axes]:  # log of an empty sum: -inf
        return add(sum(x, axes, keepdim), float("-inf"))
    m = amax(real(x), axes, keepdim=True).detach()
    m = where(eq(abs_(m), float("inf")), 0.0, m)
    out = add(log(sum(exp(sub(x, m)), axes, keepdim=True)), m)
    if not keepdim:
        out = reshape(out, tuple(n for i, n in enumerate(x._shape) if i not in axes))
    return out


@names_op("norm")
def norm(
    input: Tensor,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    dtype: dt.DType | None = None,
) -> Tensor:
    x = _float_input("norm", input, dtype)
    if p in ("fro", None):
        p = 2.0
    if p == "nuc":  # the sum of singular values (lg.linalg)
        from ..linalg import matrix_norm  # circle: linalg -> functions -> here

        return matrix_norm(x, "nuc", tuple(range(x.ndim)) if dim is None else dim, keepdim)
    axes = _axes(dim, x.ndim, "norm")
    if x.numel() == 0 and not isinstance(p, str) and (p < 0 or p == float("inf")):
        # these orders have no identity: as torch's vector_norm, no reduction of a whole
        # empty tensor or over an empty dimension
        if not axes:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {p} norm on an empty "
                f"tensor because the operation does not have an identity"
            )
        for a in axes:
            if x._shape[a] == 0:
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {p} norm on the "
                    f"dimension {a} because this dimension is empty and the "
                    f"operation does not have an identity"
                )
    # PyTorch's norm (any p, any dims) runs linalg.vector_norm, and names its node so
    return apply_composite(
        "norm", (x,), {"axes": axes, "keepdim": keepdim, "p": float(p)}, "LinalgVectorNormBackward0"
    )


def sum_to_size(input: Tensor, *sizes: Any, size: Any = None) -> Tensor:
    """Sum broadcast dimensions away so the result has shape `size` (ints, a tuple, or
    `size=`; autograd uses it). An empty `size` sums everything (a bool or integer input
    gives int64 then, even when it is 0-d), as in PyTorch."""
    shape = shape_arg(_keyword_shape("sum_to_size", sizes, size, "size"), "sum_to_size")
    if not shape:
        return sum(input)
    if input._shape == shape:
        return input
    lead = input.ndim - len(shape)
    if lead < 0:
        raise RuntimeError(
            f"sum_to_size: size {list(shape)} is not expandable to {list(input._shape)}"
        )
    axes = list(range(lead))
    for i, n in enumerate(shape):
        if n == 1 and input._shape[lead + i] != 1:
            axes.append(lead + i)
        elif n != input._shape[lead + i] and input._shape[lead + i] != 1:
            raise RuntimeError(
                f"sum_to_size: size {list(shape)} is not expandable to {list(input._shape)}"
            )
    if not axes:
        return reshape(input, shape) if input._shape != shape else input
    if axes[-1] < lead:  # only leading dimensions go: no reshape after
        return sum(input, tuple(axes))
    out = sum(input, tuple(axes), keepdim=True)
    return reshape(out, shape) if out._shape != shape else out


@names_op("all")
@composite_function
def all(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    b = input if input._dtype is dt.bool_ else input.ne(0)
    return (
        eq(amin(b.to(dt.uint8), dim if dim is not None else (), keepdim), 1)
        if b.numel()
        else _const_bool(True, b, dim, keepdim)
    )


@names_op("any")
@composite_function
def any(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    b = input if input._dtype is dt.bool_ else input.ne(0)
    return (
        eq(amax(b.to(dt.uint8), dim if dim is not None else (), keepdim), 1)
        if b.numel()
        else _const_bool(False, b, dim, keepdim)
    )


def _const_bool(value: bool, b: Tensor, dim: Any, keepdim: bool) -> Tensor:
    axes = set(_axes(dim, b.ndim, "all")) or set(range(b.ndim))
    shape = tuple(1 if i in axes else n for i, n in enumerate(b._shape) if keepdim or i not in axes)
    return full(shape, value, dtype=dt.bool_)


@names_op("count_nonzero")
@composite_function
def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    return sum(input.ne(0), dim)
