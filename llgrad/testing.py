"""`llgrad.testing`: `assert_close` and `make_tensor`, as `torch.testing`.

`assert_close(actual, expected)` compares tensors (or Python numbers, or sequences and
mappings of them, compared item by item) with PyTorch's default tolerances per dtype and
its checks of shape, dtype and device, and fails with an AssertionError in PyTorch's format
("Tensor-likes are not close!", the count of mismatched elements, the greatest absolute and
relative differences with their indices and the allowed ones). `make_tensor` makes random
test inputs of a dtype and shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import numpy as np

from .device import check_device
from .functions.shape import size_arg
from .ir import dtypes as dt
from .ir.dtypes import DType
from .tensor import Size, Tensor

__all__ = ["assert_close", "make_tensor"]

# PyTorch's default (rtol, atol) per dtype; every other dtype compares exactly.
_TOLERANCES: dict[DType, tuple[float, float]] = {
    dt.float16: (1e-3, 1e-5),
    dt.bfloat16: (1.6e-2, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
    dt.complex64: (1.3e-6, 1e-5),
    dt.complex128: (1e-7, 1e-7),
}


def _default_tolerances(*dtypes: DType) -> tuple[float, float]:
    rtols, atols = zip(*(_TOLERANCES.get(d, (0.0, 0.0)) for d in dtypes))
    return max(rtols), max(atols)


class _Mismatch(AssertionError):
    pass


def _fail(message: str, msg: Any, path: tuple[Any, ...]) -> None:
    if path:
        message += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise _Mismatch(message)


def _is_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex, np.number, np.bool_))


def _number_dtype(x: Any) -> DType:
    if isinstance(x, (bool, np.bool_)):
        return dt.bool_
    if isinstance(x, (int, np.integer)):
        return dt.int64
    if isinstance(x, (float, np.floating)):
        return dt.float64
    return dt.complex128


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raise AssertionError unless `actual` and `expected` are close:
    |actual - expected| <= atol + rtol * |expected| elementwise, NaN equal to NaN only with
    `equal_nan`, infinities equal only to themselves.

    Args:
        actual, expected: tensors, Python numbers, or (nested) sequences / mappings of them
            (compared item by item; lengths and keys must match). Types must pair up: a
            tensor with a tensor, a number with a number.
        rtol, atol: give both or neither; by default PyTorch's per-dtype values (float32:
            1.3e-6 and 1e-5, float64: 1e-7 and 1e-7, float16: 1e-3 and 1e-5, bfloat16:
            1.6e-2 and 1e-5; 0 and 0, exact, for integers and bool); with different dtypes
            the larger of the two.
        check_dtype, check_device, check_layout, check_stride: which metadata must match
            (shape always must).
        msg: a message replacing the generated one, or a function of the generated one.
        allow_subclasses: tensor subclasses (nn.Parameter) compare as tensors.
    """
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but "
            f"got no {'rtol' if rtol is None else 'atol'}."
        )
    try:
        _compare(
            actual,
            expected,
            (),
            dict(
                allow_subclasses=allow_subclasses,
                rtol=rtol,
                atol=atol,
                equal_nan=equal_nan,
                check_device=check_device,
                check_dtype=check_dtype,
                check_stride=check_stride,
                msg=msg,
            ),
        )
    except _Mismatch as e:
        raise AssertionError(str(e)) from None


def _compare(actual: Any, expected: Any, path: tuple[Any, ...], o: dict[str, Any]) -> None:
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        if not o["allow_subclasses"] and type(actual) is not type(expected):
            raise TypeError(
                f"assert_close: types differ ({type(actual).__name__} and "
                f"{type(expected).__name__}) and allow_subclasses=False"
            )
        _compare_tensors(actual, expected, path, o)
        return
    if _is_number(actual) and _is_number(expected):
        _compare_numbers(actual, expected, path, o)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        a_keys, e_keys = list(actual.keys()), list(expected.keys())
        if set(a_keys) != set(e_keys):
            missing = [k for k in e_keys if k not in actual]
            extra = [k for k in a_keys if k not in expected]
            _fail(
                f"The keys of the mappings do not match:\nMissing keys in the actual "
                f"mapping: {sorted(missing, key=repr)}\nAdditional keys in the actual "
                f"mapping: {sorted(extra, key=repr)}",
                o["msg"],
                path,
            )
        for k in e_keys:
            _compare(actual[k], expected[k], path + (k,), o)
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            _fail(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                o["msg"],
                path,
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, path + (i,), o)
        return
    raise TypeError(
        f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."
    )


def _is_sequence(x: Any) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes, Size))


def _tolerances(o: dict[str, Any], *dtypes: DType) -> tuple[float, float]:
    if o["rtol"] is not None:
        return float(o["rtol"]), float(o["atol"])
    return _default_tolerances(*dtypes)


def _compare_numbers(actual: Any, expected: Any, path: tuple[Any, ...], o: dict[str, Any]) -> None:
    da, de = _number_dtype(actual), _number_dtype(expected)
    if (
        o["check_dtype"]
        and type(actual) is not type(expected)
        and not (
            isinstance(actual, (int, float))
            and isinstance(expected, (int, float))
            and type(actual) is not bool
            and type(expected) is not bool
            and da is de
        )
    ):
        _fail(
            f"The values for attribute 'type' do not match: {type(actual)} != {type(expected)}.",
            o["msg"],
            path,
        )
    rtol, atol = _tolerances(o, da, de)
    a, e = complex(actual), complex(expected)
    if _close(a, e, rtol, atol, o["equal_nan"]):
        return
    exact = rtol == 0 and atol == 0
    diff = abs(a - e)
    rel = diff / abs(e) if e != 0 else math.inf
    if isinstance(actual, (bool, int, np.integer, np.bool_)) and isinstance(
        expected, (bool, int, np.integer, np.bool_)
    ):
        diff_s = f"{int(abs(int(actual) - int(expected)))}"
    else:
        diff_s = f"{diff}"
    allowed = ("", "") if exact else (f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    _fail(
        f"Scalars are not {'equal' if exact else 'close'}!\n\nExpected {expected} but got "
        f"{actual}.\nAbsolute difference: {diff_s}{allowed[0]}\nRelative difference: "
        f"{rel}{allowed[1]}",
        o["msg"],
        path,
    )


def _close(a: complex, e: complex, rtol: float, atol: float, equal_nan: bool) -> bool:
    if a == e:
        return True
    if (
        equal_nan
        and (a != a or (a.real != a.real or a.imag != a.imag))
        and (e.real != e.real or e.imag != e.imag)
    ):
        return True
    if any(math.isinf(v) for v in (a.real, a.imag, e.real, e.imag)):
        return False
    return abs(a - e) <= atol + rtol * abs(e)


def _compare_tensors(
    actual: Tensor, expected: Tensor, path: tuple[Any, ...], o: dict[str, Any]
) -> None:
    def meta(name: str, a: Any, e: Any) -> None:
        if a != e:
            _fail(f"The values for attribute '{name}' do not match: {a} != {e}.", o["msg"], path)

    meta("shape", actual.shape, expected.shape)
    if o["check_device"]:
        meta("device", actual.device, expected.device)
    if o["check_dtype"]:
        if actual._dtype is not expected._dtype:
            meta("dtype", actual._dtype, expected._dtype)
    if o["check_stride"] and actual.numel() > 1:
        meta("stride()", actual.stride(), expected.stride())
    rtol, atol = _tolerances(o, actual._dtype, expected._dtype)
    a = np.asarray(actual.detach()._values())
    e = np.asarray(expected.detach()._values())
    if a.dtype.kind == "c" or e.dtype.kind == "c":
        a, e = a.astype(np.complex128), e.astype(np.complex128)
    elif a.dtype.kind in "iub" and e.dtype.kind in "iub":
        a, e = (
            a.astype(np.int64) if a.dtype != np.uint64 else a,
            e.astype(np.int64) if e.dtype != np.uint64 else e,
        )
    else:
        a, e = a.astype(np.float64), e.astype(np.float64)
    if a.size == 0:
        return
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if a.dtype.kind in "iu":
            ok = a == e
            diff = np.abs(a - e)
        else:
            same = a == e
            diff = np.abs(a - e)
            finite = np.isfinite(a) & np.isfinite(e)
            ok = same | (finite & (diff <= atol + rtol * np.abs(e)))
            if o["equal_nan"]:
                ok |= (
                    np.isnan(a) & np.isnan(e)
                    if a.dtype.kind == "f"
                    else (np.isnan(a.real) | np.isnan(a.imag))
                    & (np.isnan(e.real) | np.isnan(e.imag))
                )
        if ok.all():
            return
        diff = np.where(ok, 0, diff).astype(np.float64)
        rel = np.where(ok, 0.0, diff / np.abs(e).astype(np.float64))
    exact = rtol == 0 and atol == 0
    bad = int((~ok).sum())
    total = ok.size

    def greatest(values: np.ndarray) -> tuple[Any, tuple[int, ...]]:
        flat = values.reshape(-1)
        nan_at = np.flatnonzero(np.isnan(flat))
        i = int(nan_at[0]) if nan_at.size else int(np.argmax(flat))
        index = tuple(int(v) for v in np.unravel_index(i, values.shape)) if values.ndim else ()
        return flat[i], index

    d_max, d_at = greatest(diff)
    r_max, r_at = greatest(rel)
    if a.dtype.kind in "iu" and math.isfinite(d_max):
        d_max = int(d_max)
    allowed = ("", "") if exact else (f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    _fail(
        f"Tensor-likes are not {'equal' if exact else 'close'}!\n\n"
        f"Mismatched elements: {bad} / {total} ({100.0 * bad / total:.1f}%)\n"
        f"Greatest absolute difference: {d_max} at index {d_at}{allowed[0]}\n"
        f"Greatest relative difference: {float(r_max)} at index {r_at}{allowed[1]}",
        o["msg"],
        path,
    )


def make_tensor(
    *shape: Any,
    dtype: DType,
    device: Any = None,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """A random tensor of `shape` and `dtype` for tests (drawn from llgrad's default
    generator, so `lg.manual_seed` makes it reproducible).

    Values are uniform in [low, high): by default [-9, 9] for floating and complex dtypes
    (each part of a complex number), [-9, 10) for signed integers and [0, 10) for uint8;
    bool is True or False with equal chance. `low`/`high` are clamped to the dtype's range.
    `noncontiguous=True` gives a tensor with the same values laid out with gaps (a view of
    a larger tensor), `exclude_zero=True` replaces zeros (by 1 for integers, by the
    dtype's tiny value for floats), `memory_format` lays the result out in that format.
    """
    import llgrad as lg  # circle: llgrad -> here

    check_device(device, "make_tensor")
    if not isinstance(dtype, DType):
        raise TypeError(f"make_tensor(): dtype must be an llgrad dtype, got {dtype!r}")
    size = size_arg(shape, "make_tensor")
    for bound in (low, high):
        if bound is not None and isinstance(bound, float) and math.isnan(bound):
            raise ValueError("make_tensor: low and high cannot be NaN")
    if dtype is dt.bool_:
        values = lg.rand(size, dtype=dt.float64) < 0.5
    elif dtype.is_integer:
        info = np.iinfo(dtype.np)
        lo = max(-9 if low is None else math.ceil(low), int(info.min))
        hi = min(10 if high is None else math.ceil(high), int(info.max) + 1)
        if dtype is dt.uint8 and low is None:
            lo = 0
        if lo >= hi:
            raise ValueError(f"make_tensor: low ({lo}) must be less than high ({hi})")
        values = lg.randint(lo, hi, size, dtype=dtype)
    else:
        part = dtype.to_real()
        limit = float(np.finfo(part.np).max) if part is not dt.bfloat16 else 3.38e38
        lo = max(-9.0 if low is None else float(low), -limit)
        hi = min(9.0 if high is None else float(high), limit)
        if lo > hi:
            raise ValueError(f"make_tensor: low ({lo}) must be less than or equal to high ({hi})")

        def draw() -> Tensor:
            return lg.rand(size, dtype=dt.float64) * (hi - lo) + lo

        values = lg.complex(draw(), draw()).to(dtype) if dtype.is_complex else draw().to(dtype)
    if exclude_zero:
        if dtype is dt.bool_:
            values = lg.ones(size, dtype=dt.bool_)
        else:
            tiny = (
                1
                if dtype.is_integer
                else float(
                    np.finfo(
                        (dt.float32 if dtype.to_real() is dt.bfloat16 else dtype.to_real()).np
                    ).tiny
                )
            )
            values = lg.where(values == 0, lg.full((), tiny, dtype=dtype), values)
    if noncontiguous and values.numel() > 1:
        wide = lg.empty(size[:-1] + (2 * size[-1],), dtype=dtype)
        wide[..., ::2] = values
        values = wide[..., ::2]
    elif memory_format is not None:
        values = values.contiguous(memory_format=memory_format)
    if requires_grad:
        values.requires_grad_(True)
    return values
