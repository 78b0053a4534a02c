"""Small functions built from the others: conversions, tests, softmax entry points."""

from __future__ import annotations

import math
from typing import Any

from ..dispatch import apply as _apply
from ..tape import forward as forward_ad
from ..dispatch.apply import apply, apply_composite, composite_function, interpreters
from ..device import check_device, device, device_type
from ..dispatch.grad_mode import _state as _grad_state
from ..eager import elementwise as ew
from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..ir.types import normalize_axis
from ..tensor import Tensor
from . import elementwise as E, fastpath
from .creation import full, iota
from .elementwise import imag, real
from .reduction import _reduce, all
from .shape import _slice_forward


def _cast_forward(op: str, operands: Any, attrs: dict[str, Any]) -> Tensor:
    return ew.run("cast", operands, attrs)


def parse_to(
    args: tuple, kwargs: dict[str, Any], op: str = "to"
) -> tuple[DType | None, bool, str | None, bool]:
    """The arguments of `x.to(...)`: a dtype, a tensor (its dtype and device) or a device
    (a string or `lg.device`: the CPU, or CUDA when it is available); returns (dtype or
    None, copy, "cpu"/"cuda" or None when no device was named, non_blocking)."""
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    dev = kwargs.pop("device", None)
    where = None if dev is None else device_type(dev, op)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"{op}() got unexpected keyword arguments {sorted(kwargs)}")
    flags = []  # PyTorch's positional (non_blocking, copy)
    for a in args:
        if isinstance(a, bool):
            flags.append(a)
        elif isinstance(a, DType):
            dtype = a
        elif isinstance(a, Tensor):
            dtype = a._dtype
            where = "cuda" if a.is_cuda else "cpu"
        elif isinstance(a, (str, device)):
            where = device_type(a, op)
        else:
            raise TypeError(f"{op}() received an invalid combination of arguments: {a!r}")
    if len(flags) > 2:
        raise TypeError(f"{op}() received too many positional flags: {args!r}")
    if flags:
        non_blocking = flags[0]
    if len(flags) == 2:
        copy = flags[1]
    if dtype is not None and not isinstance(dtype, DType):
        raise TypeError(f"{op}(): dtype must be an llgrad dtype, got {dtype!r}")
    return dtype, copy, where, non_blocking


def parse_to_args(args: tuple, kwargs: dict[str, Any], op: str = "to") -> tuple[DType | None, bool]:
    """`parse_to` for callers that keep tensors on the CPU (a CUDA device raises)."""
    dtype, copy, where, _ = parse_to(args, kwargs, op)
    if where == "cuda":
        check_device("cuda", op)
    return dtype, copy


def to(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """`x.to(dtype)`, `x.to(other)`, `x.to("cpu")`, `x.to("cuda")`; copies only when the
    dtype or the device changes (or `copy=True`)."""
    dtype, copy, where, non_blocking = parse_to(args, kwargs)
    here = "cuda" if input.is_cuda else "cpu"
    if where is not None and where != here:
        from ..eager import cuda  # circle: eager.cuda -> functions -> here

        moved = cuda.upload(input, non_blocking) if where == "cuda" else cuda.to_host(input)
        return moved if dtype is None or dtype is moved._dtype else to(moved, dtype)
    if dtype is None or dtype is input._dtype:
        return input.clone() if copy else input
    return apply("cast", (input,), {"dtype": dtype}, _cast_forward, "ToCopyBackward0")


def type_as(input: Tensor, other: Tensor) -> Tensor:
    return to(input, other._dtype)


def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """`other - alpha * input` (the reflected subtraction; derivative rules use it)."""
    if alpha == 1 and not isinstance(alpha, float):
        return E.sub(other, input)
    return E.sub(other, input, alpha=alpha)


def isinf(input: Tensor) -> Tensor:
    if input._dtype.is_complex:  # either part infinite
        return E.logical_or(isinf(real(input)), isinf(imag(input)))
    if not input._dtype.is_floating_point:
        return E.ne(input, input)
    return E.eq(E.abs(input), math.inf)


def isfinite(input: Tensor) -> Tensor:
    if input._dtype.is_complex:  # both parts finite
        return E.logical_and(isfinite(real(input)), isfinite(imag(input)))
    if not input._dtype.is_floating_point:
        return E.eq(input, input)
    return E.logical_not(E.logical_or(isinf(input), E.isnan(input)))


def isclose(
    input: Tensor, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> Tensor:
    """|input - other| <= atol + rtol * |other| elementwise (equal values, infinities
    included, are close; NaNs only with `equal_nan`). Bool tensors are close where equal."""
    if (
        isinstance(input, Tensor)
        and isinstance(other, Tensor)
        and input._dtype is dt.bool_
        and other._dtype is dt.bool_
    ):
        return E.eq(input, other)
    diff = E.abs(E.sub(input, other))
    tol = E.add(E.mul(E.abs(other), rtol), atol)
    close = E.logical_or(E.eq(input, other), E.le(diff, tol))
    if equal_nan:
        close = E.logical_or(close, E.logical_and(E.isnan(input), E.isnan(other)))
    return close


def allclose(
    input: Tensor, other: Tensor, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> bool:
    return bool(all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input: Tensor, other: Tensor) -> bool:
    if input._shape != other._shape:
        return False
    return bool(all(E.eq(input, other)).item())


def numel(input: Tensor) -> int:
    return input.numel()


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    return input._dtype.is_floating_point


def is_complex(input: Tensor) -> bool:
    return input._dtype.is_complex


def slice_all(
    input: Tensor, starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]
) -> Tensor:
    """A window in every dimension at once (the inverse of `pad_dims`)."""
    return apply(
        "slice",
        (input,),
        {"starts": tuple(starts), "stops": tuple(stops), "steps": tuple(steps)},
        _slice_forward,
        "SliceBackward0",
    )


_plain_casts: list[Any] = []


def _plain_cast() -> Any:
    """`tensor_extras._cast` (`misc.to(x, d)` for a plain tensor, with a direct launch),
    imported on first use (tensor_extras imports this module)."""
    if not _plain_casts:
        from .tensor_extras import _cast  # circle: functions.tensor_extras -> here

        _plain_casts.append(_cast)
    return _plain_casts[0]


def _softmax_input(x: Tensor, dtype: DType | None) -> Tensor:
    """softmax's input in the dtype it computes in: `dtype` when given (a complex input
    cast to a real `dtype` keeps its real part, as torch); complex results are refused."""
    if (dtype if dtype is not None else x._dtype).is_complex:
        raise TypeError(
            f"softmax: not implemented for {x._dtype.name} (complex numbers are "
            f"not ordered; PyTorch refuses them too)"
        )
    if dtype is not None:
        if dtype.__class__ is DType and x.__class__ is Tensor:
            return _plain_cast()(x, dtype)  # `x.to(dtype)`'s own direct path
        return to(x, dtype)
    if not x._dtype.is_floating_point:
        return to(x, dt.get_default_dtype())
    return x


# (input layout key, dim) -> the compiled forward (`compiler.composites.forward`'s entry)
# that a call of softmax / log_softmax on a plain floating tensor without `dtype` ran
_SOFTMAX_DIRECT = fastpath._table("compiled softmax")
_LOG_SOFTMAX_DIRECT = fastpath._table("compiled log_softmax")


def _softmax_direct(table: dict, input: Any, dim: Any, dtype: Any) -> Tensor | None:
    """The output of the compiled forward that `table` holds for this call (a plain tensor,
    an int `dim`, no `dtype`) when autograd does not record it and no transform or
    forward-mode level is active (`apply_composite` would run that forward and record
    nothing), else None."""
    c = input.__class__
    if dtype is not None or c is not Tensor or dim.__class__ is not int:
        return None
    fn = table.get((input._lkey, dim))
    if (
        fn is None
        or interpreters
        or forward_ad._level[0]
        or (_grad_state.enabled and input._requires_grad)
        or not _apply.compiled_composites.ENABLED
    ):
        return None
    return fn(input)


def _softmax_learn(table: dict, op: str, input: Any, dim: Any, attrs: dict[str, Any]) -> None:
    """File the compiled forward the call `op(input, dim)` (a plain floating tensor, no
    `dtype`) just ran under `apply_composite` in `table`, for `_softmax_direct`."""
    cc = _apply.compiled_composites
    c = input.__class__
    if (
        c is not Tensor
        or dim.__class__ is not int
        or cc is None
        or interpreters
        or forward_ad._level[0]
        or len(table) >= 256
    ):
        return
    fn = cc._compiled.get(cc.forward_key(op, attrs, (input,)))
    if fn is not None and fn is not cc._COLD:
        table[(input._lkey, dim)] = fn


def softmax(input: Tensor, dim: int, dtype: DType | None = None) -> Tensor:
    out = _softmax_direct(_SOFTMAX_DIRECT, input, dim, dtype)
    if out is not None:
        return out
    x = _softmax_input(input, dtype)
    if x.numel() == 0:  # nothing to normalize
        normalize_axis(dim, x.ndim, "softmax")
        return x.clone()
    attrs = {"dim": normalize_axis(dim, x.ndim, "softmax")}
    out = apply_composite("softmax", (x,), attrs, "SoftmaxBackward0")
    if dtype is None and x is input:
        _softmax_learn(_SOFTMAX_DIRECT, "softmax", x, dim, attrs)
    return out


def log_softmax(input: Tensor, dim: int, dtype: DType | None = None) -> Tensor:
    out = _softmax_direct(_LOG_SOFTMAX_DIRECT, input, dim, dtype)
    if out is not None:
        return out
    x = _softmax_input(input, dtype)
    if x.numel() == 0:
        normalize_axis(dim, x.ndim, "log_softmax")
        return x.clone()
    attrs = {"dim": normalize_axis(dim, x.ndim, "log_softmax")}
    out = apply_composite("log_softmax", (x,), attrs, "LogSoftmaxBackward0")
    if dtype is None and x is input:
        _softmax_learn(_LOG_SOFTMAX_DIRECT, "log_softmax", x, dim, attrs)
    return out


def _tri(input: Tensor, diagonal: int, upper: bool) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError(
            f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions"
        )
    n, m = input._shape[-2], input._shape[-1]
    rows = iota(n, dt.int64).reshape(n, 1)
    cols = iota(m, dt.int64).reshape(1, m)
    keep = E.ge(E.sub(cols, rows), diagonal) if upper else E.le(E.sub(cols, rows), diagonal)

    zero = full((), 0, dtype=input._dtype)  # not input * 0: NaN and inf must not leak
    return E.elementwise(
        "where", keep, input, zero, name="TriuBackward0" if upper else "TrilBackward0"
    )


@composite_function
def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    return _tri(input, diagonal, True)


@composite_function
def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    return _tri(input, diagonal, False)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    from .layout import diag_embed, diagonal_copy  # circle: functions.layout -> here

    if input.ndim == 1:  # (both trace: the matrix is a graph value)
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return diagonal_copy(input, diagonal)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


@composite_function
def trace(input: Tensor) -> Tensor:
    return _reduce("sum", diag(input), None, False, "TraceBackward0")
