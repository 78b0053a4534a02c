"""Tensor creation: `tensor`, `zeros`, `ones`, `full`, `arange`, `rand`, ... and the RNG."""

from __future__ import annotations

import ctypes
import math
import struct
from array import array
from typing import Any, Sequence

import numpy as np

from ..dispatch.apply import interpreters
from ..device import CPU, check_device, device_type as _device_type
from ..dispatch.grad_mode import _state as _grad_state
from ..eager import elementwise as ew
from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..runtime import launch as _launch
from ..runtime.storage import _slabs
from ..schedule.layout import contiguous_strides
from ..tensor import Size, Tensor, _row_major_strides, recurring_maker
from ..tracer import context as _trace
from ..tracer.context import _tls as _trace_state, current  # (its `stack`: the traces)
from . import elementwise as E
from ._errors import _STANDARD, device_aware, names_op, relabel
from ._switches import _switches
from .elementwise import add, mul, complex as make_complex
from .shape import select, size_arg
from ..runtime.dlpack import import_array


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    if _grad_state.inference:
        t._inference = True
    return t


def _infer_dtype(arr: np.ndarray, data: Any) -> DType:
    kind = arr.dtype.kind
    if kind == "b":
        return dt.bool_
    if kind in "iu":
        if isinstance(data, np.ndarray):
            return dt.from_numpy(arr.dtype)
        return dt.int64
    if kind == "f":
        if isinstance(data, np.ndarray) or isinstance(data, np.floating):
            return dt.from_numpy(arr.dtype)
        return dt.get_default_dtype()
    if kind == "c":
        if isinstance(data, (np.ndarray, np.complexfloating)):
            return dt.from_numpy(arr.dtype)
        return dt.get_default_dtype().to_complex()
    raise TypeError(
        f"tensor: could not infer dtype of {type(data).__name__} (NumPy says {arr.dtype})"
    )


_INT64_MIN, _UINT64_END = -(1 << 63), 1 << 64


def _float_max(d: DType) -> float:
    """The largest finite value of a real floating dtype (of a complex one's parts)."""
    return _FLOAT_MAX[d.to_real()]


_FLOAT_MAX = {
    d: 3.3895313892515355e38 if d is dt.bfloat16 else float(np.finfo(d.np).max)
    for d in (dt.float16, dt.bfloat16, dt.float32, dt.float64)
}
# an integer dtype's (min, max) as Python ints
_INT_RANGE = {
    d: (int(np.iinfo(d.np).min), int(np.iinfo(d.np).max))
    for d in (dt.uint8, dt.int8, dt.int16, dt.int32, dt.int64)
}


def checked_scalar(value: Any, d: DType, op: str) -> Any:
    """A Python number converted for storing into `d`, with PyTorch's overflow check (its
    `checked_convert`, used by `full`, `fill_`, `masked_fill`, `scalar_tensor`, ...).

    Raises RuntimeError "value cannot be converted to type ... without overflow" for an
    integer out of `d`'s range (an unsigned type also takes -max..-1, which wraps as in
    two's complement: -1 -> 255 for uint8), a float out of an integer type's range (NaN and
    inf included) or a finite float beyond a float type's largest value, and a complex
    number with an imaginary part for a real type. bool takes any number (non-zero ->
    True). A Python int outside [-2**63, 2**64) raises OverflowError, as PyTorch."""
    c = value.__class__
    if d.kind == "f" and (c is float or c is int and _INT64_MIN <= value < _UINT64_END):
        # the common case, decided at once (the checks below, for a real float dtype)
        if (c is int or value - value == 0.0) and abs(float(value)) > _FLOAT_MAX[d]:
            raise RuntimeError(
                f"{op}: value cannot be converted to type {d.name} without "
                f"overflow (value {value!r})"
            )
        return value
    if c is bool:  # any dtype takes a bool (as 0 or 1 unless bool)
        return value if d is dt.bool_ else int(value)
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, Tensor):
        value = value.item()
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not _INT64_MIN <= value < _UINT64_END
    ):
        raise OverflowError(f"{op}: int too big to convert ({value})")
    if d is dt.bool_:
        return bool(value)
    if isinstance(value, bool):
        value = int(value)

    def overflow() -> RuntimeError:
        return RuntimeError(
            f"{op}: value cannot be converted to type {d.name} without overflow (value {value!r})"
        )

    if isinstance(value, complex):
        if not d.is_complex and value.imag != 0:
            raise overflow()
        parts = (value.real, value.imag)
    else:
        parts = (value,)
    for part in parts:
        if d.is_integer:
            low, high = _INT_RANGE[d]
            if isinstance(part, float):
                if not math.isfinite(part) or part < low or part > high:
                    raise overflow()
            elif d.kind == "u":
                if part > high or (part < 0 and -part > high):
                    raise overflow()
            elif not low <= part <= high:
                raise overflow()
        elif isinstance(part, float) and math.isfinite(part) or isinstance(part, int):
            if abs(float(part)) > _float_max(d):
                raise overflow()
    if d.is_integer:
        whole = int(value.real) if isinstance(value, complex) else int(value)
        return whole % (1 << (8 * d.itemsize)) if d.kind == "u" and whole < 0 else whole
    if not d.is_complex and isinstance(value, complex):
        return value.real
    return value


def _python_numbers(data: Any) -> list[Any]:
    """The numbers of nested sequences of Python/NumPy scalars, in order (used only when
    NumPy could not hold them in a fixed-size type: ints beyond 64 bits)."""
    out: list[Any] = []
    stack = [data]
    while stack:
        d = stack.pop()
        if isinstance(d, (list, tuple)):
            stack.extend(reversed(d))
        elif isinstance(d, Tensor):
            out.extend(d._values().reshape(-1).tolist())
        elif isinstance(d, np.ndarray):
            out.extend(d.reshape(-1).tolist())
        else:
            out.append(d.item() if isinstance(d, np.generic) else d)
    return out


def _check_data(data: Any, arr: np.ndarray, dtype: DType | None) -> np.ndarray:
    """Python data (not an ndarray) made into `arr` by NumPy: PyTorch's checks and dtype.

    Python ints must fit int64 where the result is an integer type (ValueError, as
    PyTorch's "Overflow when unpacking long long"); for an explicit integer dtype each
    value must fit it (RuntimeError, PyTorch's `checked_convert`). NumPy holds ints past
    int64 as uint64, float64 or objects: those are found here, never wrapped."""

    def unpack_error() -> ValueError:
        return ValueError(
            "Overflow when unpacking long long (an int outside "
            "[-2**63, 2**63) for an integer tensor)"
        )

    kind = arr.dtype.kind
    if (
        kind == "O"
        or kind == "u"
        or (kind == "f" and arr.size and float(np.max(np.abs(arr))) >= 2.0**63)
    ):
        numbers = _python_numbers(data)
        if not all(isinstance(v, (bool, int, float, complex)) for v in numbers):
            return arr  # not numbers: the caller names the problem
        has = {type(v) for v in numbers}
        inferred = (
            dt.get_default_dtype().to_complex()
            if complex in has
            else dt.get_default_dtype()
            if float in has
            else dt.int64
            if int in has
            else dt.bool_
        )
        d = dtype or inferred
        big = any(type(v) is int and not _INT64_MIN <= v < -_INT64_MIN for v in numbers)
        if big and (d.is_integer or (dtype is None and d is dt.int64)):
            raise unpack_error()
        if kind in "Ou":
            arr = np.asarray(
                _nested_values(data),
                dtype=np.complex128
                if complex in has
                else np.float64
                if (d.is_floating_point or d.is_complex or big)
                else np.int64,
            )
        return arr
    d = dtype or _infer_dtype(arr, data)
    if d.is_integer and kind in "iu" and arr.size:
        low, high = int(arr.min()), int(arr.max())
        checked_scalar(low, d, "tensor")
        checked_scalar(high, d, "tensor")
    return arr


def _nested_values(data: Any) -> Any:
    """Replace llgrad tensors inside nested sequences by their values."""
    if isinstance(data, Tensor):
        return data._values()
    if isinstance(data, (list, tuple)):
        return [_nested_values(d) for d in data]
    return data


def from_values(arr: np.ndarray, dtype: DType) -> Tensor:
    """A new tensor holding a copy of `arr`'s values converted to `dtype`."""
    out = Tensor._empty(tuple(arr.shape), dtype)
    if arr.dtype.kind == "c" and not dtype.is_complex:
        # complex -> real keeps the real part, as the cast does (bool: either part non-zero)
        arr = (arr != 0) if dtype is dt.bool_ else arr.real
    if dtype is dt.bfloat16:
        f = np.asarray(arr, dtype=np.float32)
        bits = f.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        rounded = np.where(np.isnan(f), np.uint16(0x7FC0), rounded)
        out._numpy_view()[...] = rounded
    else:
        if dtype.kind in "iub" and arr.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                arr = np.trunc(arr)
        with np.errstate(over="ignore"):  # a float beyond the dtype becomes inf
            out._numpy_view()[...] = arr
    return out


def _fill_uninitialized(t: Tensor) -> None:
    """Under `use_deterministic_algorithms(True)`: NaN (floats) or the largest value
    (integers; True for bool) into freshly allocated memory, as PyTorch fills it."""
    if not _switches.deterministic or t.numel() == 0:
        return
    d = t._dtype
    value: Any = (
        True
        if d is dt.bool_
        else complex(math.nan, math.nan)
        if d.is_complex
        else math.nan
        if d.is_floating_point
        else int(np.iinfo(d.np).max)
    )
    ew.copy_into(t, value)


@names_op("tensor")
def tensor(
    data: Any,
    dtype: DType | None = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    if isinstance(data, Tensor):
        arr = data._values()
        d = dtype or data._dtype
    else:
        try:
            arr = np.asarray(_nested_values(data))
        except ValueError as e:
            raise ValueError(
                f"tensor: could not make a tensor from {type(data).__name__}: {e}"
            ) from None
        if not isinstance(data, np.ndarray):
            arr = _check_data(data, arr, dtype)
        if arr.dtype == object or arr.dtype.kind in "USV":
            raise TypeError(
                f"tensor: could not infer dtype of {type(data).__name__} "
                f"(nested sequences must be rectangular and numeric)"
            )
        d = dtype or _infer_dtype(arr, data)
        if d.kind in "iu" and arr.dtype.kind == "f" and arr.size:
            info = np.iinfo(d.np)
            if not np.all(np.isfinite(arr)) or arr.max() > info.max or arr.min() < info.min:
                raise RuntimeError(
                    f"tensor: value cannot be converted to type {d.name} without overflow"
                )
            arr = np.trunc(arr).astype(d.np)  # float data truncates, as in PyTorch
    if requires_grad and not (d.is_floating_point or d.is_complex):
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    if device is not None and _device_type(device, "tensor") == "cuda":
        from ..eager.cuda import upload  # circle: eager.cuda -> here

        out = upload(from_values(arr, d))
        return out.requires_grad_(True) if requires_grad else out

    ctx = current()
    if ctx is not None and not isinstance(data, Tensor) and arr.size <= 4096:
        return ctx.literal(arr, d)  # inside a trace: literal data is a constant
    return _finish(from_values(arr, d), requires_grad)


@names_op("as_tensor")
def as_tensor(data: Any, dtype: DType | None = None, device: Any = None) -> Tensor:
    """`data` as a tensor, sharing memory where it can (PyTorch's `as_tensor`): a tensor of
    the requested dtype is returned as is (else converted); an ndarray whose dtype matches
    (or no dtype is given) is viewed without a copy, so writes through either show in the
    other; anything else is copied as `tensor(data, dtype)` copies. Where llgrad differs:
    read-only, misaligned or byte-swapped arrays, and arrays of dtypes llgrad lacks, are
    copied (PyTorch shares read-only memory with a warning)."""
    if device is not None and _device_type(device, "as_tensor") == "cuda":
        from ..eager.cuda import is_cuda_tensor, upload  # circle: eager.cuda -> here

        if is_cuda_tensor(data):
            return data if dtype is None or dtype is data._dtype else data.to(dtype)
        host = as_tensor(data, dtype)
        return (
            upload(host.detach())
            if host.__class__ is Tensor or not host._requires_grad
            else upload(host)
        )
    if isinstance(data, Tensor):
        return data if dtype is None or dtype is data._dtype else data.to(dtype)

    if isinstance(data, np.ndarray) and current() is None:
        from .tensor_extras import _shareable  # circle: functions.tensor_extras -> here

        if _shareable(data) and (dtype is None or dtype is dt.from_numpy(data.dtype)):
            return Tensor._from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor viewing `arr`'s memory (no copy: writes through either show in the other),
    of the matching dtype. Negative strides and read-only arrays raise (llgrad tensors
    are writable; PyTorch shares read-only memory with a warning)."""
    arr = ndarray
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(arr).__name__})")
    return Tensor._from_numpy(arr)


def from_dlpack(obj: Any) -> Tensor:
    """Import a DLPack-capable object (NumPy, PyTorch, ...) without copying (bfloat16
    included); memory its owner marks read-only is copied, so writes never reach it."""
    if isinstance(obj, Tensor):
        return obj

    arr, bf16 = import_array(obj)  # read-only memory comes back copied
    return Tensor._from_numpy(arr, dt.bfloat16) if bf16 else Tensor._from_numpy(arr)


# --------------------------------------------------------------------------------------
# The creation path every creation function shares
# --------------------------------------------------------------------------------------
# sizes -> (shape, strides) once (`_layout`, remembered per size), keywords -> (dtype,
# requires_grad) (`_kw`), allocate (`Tensor._empty`), fill (`_put`: a memset or a repeated
# element for a small tensor, `_put_values` for a few values computed on the host, a
# kernel for big ones), `_finish`. Inside a trace (`lg.compile`) each function takes its
# general code, which makes the graph's constants.

_HOST_BYTES = 1 << 16  # up to here the host fills memory (a kernel launch costs more)
_HOST_VALUES = 256  # values computed on the host (arange, linspace) up to here

_layouts: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = {}
_SIZE_SEQUENCES = (tuple, list)


def _layout(size: tuple[Any, ...], op: str) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """`size_arg(size, op)` and, for sizes of plain ints, the row-major strides (else
    None): remembered per size, so a repeated size costs one lookup."""
    key = size
    if not size:
        return size_arg(size, op), None  # (raises: no size)
    if len(size) == 1 and (size[0].__class__ in _SIZE_SEQUENCES or size[0].__class__ is Size):
        key = tuple(size[0])
    for s in key:
        if s.__class__ is not int or s < 0:
            return size_arg(size, op), None
    got = _layouts.get(key)
    if got is None:
        shape = size_arg(size, op)
        got = (shape, contiguous_strides(shape))
        if len(_layouts) < 1024:
            _layouts[key] = got
    return got


_ELEMENT: dict[DType, Any] = {
    dt.float32: struct.Struct("=f").pack,
    dt.float64: struct.Struct("=d").pack,
    dt.float16: struct.Struct("=e").pack,
    dt.int8: struct.Struct("=b").pack,
    dt.uint8: struct.Struct("=B").pack,
    dt.int16: struct.Struct("=h").pack,
    dt.int32: struct.Struct("=i").pack,
    dt.int64: struct.Struct("=q").pack,
    dt.bool_: struct.Struct("=?").pack,
}
_PAIR = {dt.complex64: struct.Struct("=ff").pack, dt.complex128: struct.Struct("=dd").pack}
_F32 = struct.Struct("=f")
_U32 = struct.Struct("=I")
_U16 = struct.Struct("=H")


def _element(value: Any, d: DType) -> bytes:
    """The bytes of one element of `d` holding the number `value`, converted as a kernel's
    scalar operand is (`eager.elementwise._pack_scalar`): bfloat16 rounds the float32
    bits to nearest even. Raises struct.error/OverflowError/TypeError where the number
    does not pack (the caller then takes the kernel, which names the problem)."""
    pack = _ELEMENT.get(d)
    if pack is not None:
        if d.is_integer and value.__class__ is not int and value.__class__ is not bool:
            raise TypeError("not an int")
        return pack(value)
    if d.is_complex:
        z = complex(value)
        return _PAIR[d](z.real, z.imag)
    bits = _U32.unpack(_F32.pack(float(value)))[0]
    return _U16.pack(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF)


def _host_fill(ptr: int, n: int, value: Any, d: DType) -> bool:
    """Write the number `value` (already checked for `d`) into each element of `d` in the
    `n` bytes at `ptr`, on the host (a memset, or one element's bytes repeated) when `n`
    is small; False, having written nothing, when the copy kernel is to do it: a big
    fill (threads), a number that does not pack, or a forward's copies being recorded for
    replay (`eager.views.copy_replay`: the kernel's copy is what it replays). Recording
    kernels (`launch.record_kernels`) does not change the path: it shows what runs."""
    if n > _HOST_BYTES or ew.copy_log is not None:
        return False
    try:
        one = _element(value, d)
    except (struct.error, OverflowError, TypeError, ValueError):
        return False
    if n:
        if one.count(0) == len(one):
            ctypes.memset(ptr, 0, n)
        else:
            ctypes.memmove(ptr, one * (n // len(one)), n)
    return True


# the last slab written, as one (array, memoryview, address) tuple (read once per call:
# threads each write their own slab)
_slab_view: list = [(None, None, 0)]


def _write(out: Tensor, data: bytes) -> None:
    """Copy `data` to `out`'s memory from its first element (`out`: a row-major tensor,
    such as one `Tensor._empty` just made). A tiny tensor cut from this thread's current
    slab (`runtime.storage.allocate_small`) or a small one in a block of its own (a
    ctypes array, `runtime.storage.allocate`) is written through a memoryview of that
    memory (cheaper than a foreign call), any other by a memmove."""
    owner = out._storage.owner
    ptr = out._ptr
    if owner is _slabs.state[0] and owner is not None:
        view = _slab_view[0]
        if view[0] is not owner:
            view = (owner, memoryview(owner), owner.__array_interface__["data"][0])
            _slab_view[0] = view
        start = ptr - view[2]
        view[1][start : start + len(data)] = data
    elif isinstance(owner, ctypes.Array):
        start = ptr - ctypes.addressof(owner)
        memoryview(owner).cast("B")[start : start + len(data)] = data
    elif data:
        ctypes.memmove(ptr, data, len(data))


_SMALL_INTS: dict[tuple[DType, int], bytes] = {}  # (dtype, 0 or 1) -> its element


def _put(out: Tensor, value: Any) -> Tensor:
    """Fill `out`, a tensor `Tensor._empty` just made (contiguous, its own memory), with
    the number `value` (already checked for `out`'s dtype): on the host when small
    (`_host_fill`'s rules; a tiny tensor through its slab's memoryview, as `_write`),
    else by the copy kernel."""
    st = out._storage
    n = st.nbytes
    if n > _HOST_BYTES or ew.copy_log is not None:
        return ew.copy_into(out, value)
    d = out._dtype
    one = _SMALL_INTS.get((d, value)) if value.__class__ is int else None
    if one is None:
        try:
            one = _element(value, d)
        except (struct.error, OverflowError, TypeError, ValueError):
            return ew.copy_into(out, value)
        if value.__class__ is int and (value == 0 or value == 1):
            _SMALL_INTS[(d, value)] = one
    owner = st.owner
    if not (owner is _slabs.state[0] and owner is not None) and one.count(0) == len(one):
        ctypes.memset(out._ptr, 0, n)
    else:
        _write(out, one * (n // len(one)))
    return out


def fill_dense(t: Tensor, value: Any) -> Tensor:
    """Write the number `value` (already checked for `t`'s dtype) into every element of
    `t` (no autograd): by the host when `t` is row-major (`_host_fill`), else by the copy
    kernel. `fill_`/`zero_`'s write."""
    d = t._dtype
    c = value.__class__
    if (
        t._strides == _row_major_strides(t._shape)
        and ew.copy_log is None
        and (c is not float or value != 0)
    ):  # (-0.0 and 0.0 are one key: not kept)
        one = _FILL_ELEMENTS.get((d, c, value))
        if one is not None:  # (the common fills: `_host_fill`'s write, its checks
            n = d.itemsize  # made when the element was kept)
            for s in t._shape:
                n *= s
            if n <= _HOST_BYTES:
                if one is not _ZERO:
                    if n:
                        _write(t, one * (n // len(one)))
                elif n <= _ZEROS_WRITTEN:
                    _write(t, bytes(n))
                else:
                    ctypes.memset(t._ptr, 0, n)
                return t
        elif (c is int or c is bool or c is float and value == value) and len(_FILL_ELEMENTS) < 256:
            try:
                one = _element(value, d)
            except (struct.error, OverflowError, TypeError, ValueError):
                pass
            else:
                _FILL_ELEMENTS[(d, c, value)] = _ZERO if one.count(0) == len(one) else one
    if t._strides != _row_major_strides(t._shape) or not _host_fill(
        t._ptr, t.numel() * t._dtype.itemsize, value, t._dtype
    ):
        ew.copy_into(t, value)
    return t


# zero fills up to here are written as zero bytes by `_write` (through a memoryview for
# the small blocks llgrad allocates), larger ones by a memset
_ZEROS_WRITTEN = 1 << 12
# (dtype, class, number) -> the bytes of one element of that dtype holding the number
# (`_element`), or `_ZERO` when they are all zero: `fill_dense`'s usual values (not NaN,
# which is no key, nor a float zero, whose sign the key cannot tell)
_FILL_ELEMENTS: dict[tuple, Any] = {}
_ZERO: Any = object()


_ARRAY_CODES = {
    dt.float32: "f",
    dt.float64: "d",
    dt.int64: "q",
    dt.int32: "i",
    dt.int16: "h",
    dt.int8: "b",
    dt.uint8: "B",
}


def _put_values(out: Tensor, values: Any) -> bool:
    """Write the Python numbers `values` (one per element, row-major) into `out`, a fresh
    contiguous float32/float64 (floats) or integer (ints, each in range) tensor, as the
    cast kernel would convert them (float64 -> float32 rounds to nearest). False, having
    written nothing, for another dtype or while kernels or copies are recorded."""
    code = _ARRAY_CODES.get(out._dtype)
    if code is None or ew.copy_log is not None or _launch._recording:
        return False
    _write(out, array(code, values).tobytes())
    return True


# key -> [shape, bytes of the row-major values, `recurring_maker`'s maker of that layout
# once it has one]
_images: dict[tuple, list] = {}
_IMAGE_BYTES = 1 << 14


def _imaged(key: tuple, d: DType, make: Any) -> Tensor | None:
    """A new tensor of dtype `d` made from `make()`'s (shape, bytes of the row-major
    values), remembered under `key` (which must fix them: ints and dtypes only) when up
    to _IMAGE_BYTES: for functions whose values depend only on their integer arguments
    (eye, tril/triu_indices), a repeated call is an allocation (`recurring_maker`'s, for
    a layout that recurs) and a copy. None (the caller takes its general code) while
    tracing or while kernels or copies are recorded."""
    if ew.copy_log is not None or _trace_state.stack or _launch._recording:
        return None
    got = _images.get(key)
    if got is None:
        got = [*make(), None]
        if len(got[1]) <= _IMAGE_BYTES:
            if len(_images) >= 256:
                _images.clear()
            _images[key] = got
    maker = got[2]
    if maker is None:
        maker = got[2] = recurring_maker(got[0], d)
    out = maker() if maker is not None else Tensor._empty(got[0], d)
    _write(out, got[1])
    return out


def _fill(shape: tuple[int, ...], value: Any, dtype: DType | None) -> Tensor:
    if dtype is None:
        dtype = dt.scalar_dtype(value) if not isinstance(value, bool) else dt.bool_
    ctx = _trace.current()
    if ctx is not None and ctx.constant_creations:  # inside the autodiff pass
        return ctx.constant(value, dtype, shape)
    return _put(Tensor._empty(shape, dtype), value)


def _create(
    shape: tuple[int, ...], strides: tuple[int, ...] | None, value: Any, d: DType, rg: bool
) -> Tensor:
    """A new tensor of `shape` (`strides`: its row-major strides when known) and dtype
    `d` holding the number `value` (checked for `d`; None: uninitialized, as `empty`
    leaves it), requiring grad when `rg`."""
    if _trace_state.stack:
        out = (
            _fill(shape, value, d) if value is not None else _uninitialized(Tensor._empty(shape, d))
        )
        return _finish(out, rg)
    out = Tensor._empty(shape, d, strides)
    if value is not None:
        _put(out, value)
    elif _switches.deterministic:
        _fill_uninitialized(out)
    if rg:
        out.requires_grad_(True)
    if _grad_state.inference:
        out._inference = True
    return out


_CREATION_KEYWORDS = frozenset(
    ("dtype", "requires_grad", "device", "layout", "pin_memory", "memory_format")
)  # (new tensors are row-major)


def _kw(kwargs: dict[str, Any], op: str) -> tuple[DType | None, bool]:
    """A creation function's keywords: (dtype or None, requires_grad), checked (the CPU
    device, the strided layout, no other keyword, an llgrad dtype)."""
    if not kwargs:
        return None, False
    if len(kwargs) == 1:  # (`dtype=` alone, the common case: nothing else to check)
        dtype = kwargs.get("dtype")
        if dtype.__class__ is DType:
            return dtype, False
    get = kwargs.get
    dtype = get("dtype")
    device = get("device")
    if device is not None and not (device.__class__ is str and device == "cpu"):
        check_device(device, op)
    layout = get("layout")
    if layout is not None and repr(layout) != "llgrad.strided":
        raise RuntimeError(f"{op}: llgrad has only the strided layout, got {layout!r}")
    if not _CREATION_KEYWORDS.issuperset(kwargs):
        raise TypeError(
            f"{op}() got unexpected keyword arguments {sorted(set(kwargs) - _CREATION_KEYWORDS)}"
        )
    if dtype is not None and not isinstance(dtype, DType):
        raise TypeError(f"{op}(): dtype must be an llgrad dtype, got {dtype!r}")
    return dtype, get("requires_grad", False)


def _check_grad_dtype(d: DType, rg: bool) -> None:
    if rg and not (d.is_floating_point or d.is_complex):
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")


_default_dtype = dt._default_dtype  # [the default dtype] (read on every call)


def _sized(op: str, value: Any, size: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
    shape, strides = _layout(size, op)
    dtype, rg = _kw(kwargs, op)
    d = dtype or _default_dtype[0]
    if rg:
        _check_grad_dtype(d, rg)
    return _create(shape, strides, value, d, rg)


def zeros(*size: Any, **kwargs: Any) -> Tensor:
    """A tensor of `size` (ints or one sequence) filled with 0, of `dtype` (the default
    dtype when not given); `requires_grad`, `device` (the CPU), `layout` (strided),
    `pin_memory`, `out` as PyTorch."""
    try:
        return _sized("zeros", 0, size, kwargs)
    except _STANDARD as e:  # errors name the function (as `names_op` does)
        relabel(e, "zeros")
        raise


def ones(*size: Any, **kwargs: Any) -> Tensor:
    """A tensor of `size` filled with 1 (keywords as `zeros`)."""
    try:
        return _sized("ones", 1, size, kwargs)
    except _STANDARD as e:  # errors name the function (as `names_op` does)
        relabel(e, "ones")
        raise


def empty(*size: Any, **kwargs: Any) -> Tensor:
    """An uninitialized tensor of `size` (filled with NaN or the largest integer under
    `use_deterministic_algorithms(True)`, as PyTorch; keywords as `zeros`)."""
    try:
        return _sized("empty", None, size, kwargs)
    except _STANDARD as e:  # errors name the function (as `names_op` does)
        relabel(e, "empty")
        raise


def _uninitialized(t: Tensor) -> Tensor:
    """`t` as `empty` leaves it (filled under `use_deterministic_algorithms(True)`)."""
    _fill_uninitialized(t)
    return t


_NUMBER_CLASSES = (bool, int, float, complex)


def full(size: Sequence[int], fill_value: Any, **kwargs: Any) -> Tensor:
    """A tensor of `size` filled with `fill_value` (a number or a 1-element tensor), of
    `dtype` or the number's default dtype, with PyTorch's overflow check."""
    try:
        return _full(size, fill_value, kwargs)
    except _STANDARD as e:
        relabel(e, "full")
        raise


def _full(size: Sequence[int], fill_value: Any, kwargs: dict[str, Any]) -> Tensor:
    shape, strides = _layout((size,), "full")
    dtype, rg = _kw(kwargs, "full")
    c = fill_value.__class__
    if c is float:
        d = dtype or _default_dtype[0]
    else:
        if isinstance(fill_value, Tensor):
            fill_value = fill_value.item()
        if not isinstance(fill_value, _NUMBER_CLASSES):
            raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
        d = dtype or (dt.bool_ if isinstance(fill_value, bool) else dt.scalar_dtype(fill_value))
    if rg:
        _check_grad_dtype(d, rg)
    return _create(shape, strides, checked_scalar(fill_value, d, "full"), d, rg)


def _like(op: str, input: Tensor, value: Any, kwargs: dict[str, Any]) -> Tensor:
    dtype, rg = _kw(kwargs, op)
    d = dtype or input._dtype
    if rg:
        _check_grad_dtype(d, rg)
    if input.__class__ is not Tensor:
        ctx = getattr(input, "_ctx", None)
        if ctx is not None:  # a tracer: the constant becomes part of the graph
            return ctx.constant(0 if value is None else value, d, input._shape)
    if value is not None and not (
        value.__class__ is int and (value == 0 or value == 1) and d is not dt.bool_
    ):  # (0 and 1 pass `checked_scalar` unchanged for every dtype but bool)
        value = checked_scalar(value, d, op)
    return _create(input._shape, None, value, d, rg)


def zeros_like(input: Tensor, **kwargs: Any) -> Tensor:
    """`zeros` of `input`'s shape and (unless `dtype=`) dtype."""
    try:
        return _like("zeros_like", input, 0, kwargs)
    except _STANDARD as e:
        relabel(e, "zeros_like")
        raise


def ones_like(input: Tensor, **kwargs: Any) -> Tensor:
    """`ones` of `input`'s shape and (unless `dtype=`) dtype."""
    try:
        return _like("ones_like", input, 1, kwargs)
    except _STANDARD as e:
        relabel(e, "ones_like")
        raise


def empty_like(input: Tensor, **kwargs: Any) -> Tensor:
    """`empty` of `input`'s shape and (unless `dtype=`) dtype."""
    try:
        return _like("empty_like", input, None, kwargs)
    except _STANDARD as e:
        relabel(e, "empty_like")
        raise


def full_like(input: Tensor, fill_value: Any, **kwargs: Any) -> Tensor:
    """`full` of `input`'s shape and (unless `dtype=`) dtype."""
    try:
        return _like("full_like", input, fill_value, kwargs)
    except _STANDARD as e:
        relabel(e, "full_like")
        raise


def eye(n: int, m: int | None = None, **kwargs: Any) -> Tensor:
    """The n x m (n x n) identity matrix: ones on the diagonal, zeros elsewhere."""
    try:
        return _eye(n, m, kwargs)
    except _STANDARD as e:
        relabel(e, "eye")
        raise


def _eye(n: int, m: int | None, kwargs: dict[str, Any]) -> Tensor:
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    dtype, rg = _kw(kwargs, "eye")
    d = dtype or _default_dtype[0]
    k = min(n, m)
    if n.__class__ is int and m.__class__ is int and n * m * d.itemsize <= _HOST_BYTES:
        out = _imaged(("eye", n, m, d), d, lambda: ((n, m), _eye_image(n, m, d)))
        if out is not None:
            return _finish(out, rg)
    out = _fill((n, m), 0, d)
    if k:
        diag = Tensor._make(out._storage, 0, (k,), (m + 1,), d)
        ew.copy_into(diag, 1)
    return _finish(out, rg)


def _eye_image(n: int, m: int, d: DType) -> bytes:
    """The bytes of `eye(n, m, dtype=d)`: zeros, and ones on the diagonal."""
    size = d.itemsize
    image = bytearray(n * m * size)
    one, step = _element(1, d), (m + 1) * size
    for i in range(0, min(n, m) * step, step):
        image[i : i + size] = one
    return bytes(image)


def iota(n: int, dtype: DType) -> Tensor:
    """0, 1, ..., n-1 computed from the element index (no data read)."""
    ctx = _trace.current()
    if ctx is not None:  # a pure constant: a node of the graph
        return ctx.iota(n).to(dtype)
    return ew.run("iota", [], {"dtype": dtype, "shape": (n,)}, out=Tensor._empty((n,), dtype))


_PLAIN_NUMBERS = (int, float)


@names_op("arange")
def arange(start: Any, end: Any = None, step: Any = 1, **kwargs: Any) -> Tensor:
    """start, start + step, ... up to `end` (excluded); `arange(end)` counts from 0. int64
    when every bound is an int, else the default dtype (or `dtype`)."""
    if end is None:
        start, end = 0, start
    vals = (start, end, step)
    for v in vals:
        if isinstance(v, Tensor):
            vals = tuple(v.item() if isinstance(v, Tensor) else v for v in vals)
            start, end, step = vals
            break
    dtype, rg = _kw(kwargs, "arange")
    if dtype is not None and dtype.kind in "iu":  # an integer range counts in integers
        start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    for v in (start, end, step):
        if isinstance(v, float) and not math.isfinite(v):
            raise RuntimeError(
                f"arange: unsupported range: {start} -> {end} (step {step}): "
                f"the bounds and the step must be finite"
            )
    if (end - start) * step < 0:
        raise RuntimeError(
            f"arange: upper bound and lower bound inconsistent with step sign "
            f"(start={start}, end={end}, step={step})"
        )
    n = max(0, math.ceil((end - start) / step))
    if dtype is None:
        dtype = (
            dt.int64
            if isinstance(vals[0], int) and isinstance(vals[1], int) and isinstance(vals[2], int)
            else dt.get_default_dtype()
        )
    compute = (
        dt.int64
        if dtype.kind in "iu" and isinstance(step, int) and isinstance(start, int)
        else dt.float64
    )
    ctx = _trace.current() if _trace_state.stack else None
    if ctx is not None and n:  # a pure constant: start + step * iota, traced
        return (ctx.iota(n).to(compute) * step + start).to(dtype)
    out = Tensor._empty((n,), dtype)
    if n:
        values = (
            _range_values(start, step, n, compute, dtype)
            if n <= _HOST_VALUES
            and start.__class__ in _PLAIN_NUMBERS
            and step.__class__ in _PLAIN_NUMBERS
            else None
        )
        if values is None or not _put_values(out, values):
            ew.run("add", [ew.run("mul", [iota(n, compute), step]), start], out=out)
    return _finish(out, rg)


def _range_values(start: Any, step: Any, n: int, compute: DType, d: DType) -> Any:
    """`arange`'s n values as its kernels compute them (start + step * i, in int64 or
    float64), for `_put_values` into `d`; None (the kernels run) where a number would not
    pack as the kernels' operand or a value would wrap in `d`, or `d` converts float64
    values otherwise than `_put_values` does."""
    if compute is dt.int64:
        if d.kind not in "iu":
            return None
        low, high = _INT_RANGE[d]
        last = start + step * (n - 1)
        if not (low <= start <= high and low <= last <= high and _INT64_MIN <= step < -_INT64_MIN):
            return None
        return range(start, last + (1 if step > 0 else -1), step)
    if d.kind != "f":
        return None
    try:
        fstart, fstep = float(start), float(step)
    except OverflowError:
        return None
    return [i * fstep + fstart for i in range(n)]


@names_op("linspace")
def linspace(start: float, end: float, steps: int, **kwargs: Any) -> Tensor:
    """`steps` evenly spaced values from `start` to `end` (both included), computed in
    float64 as PyTorch does (the first half from `start`, the second from `end`)."""
    if steps < 0:
        raise RuntimeError("linspace: number of steps must be non-negative")
    dtype, rg = _kw(kwargs, "linspace")
    d = dtype or dt.get_default_dtype()
    if steps == 0:
        return _finish(Tensor._empty((0,), d), rg)
    if d.kind in "iu" and start.__class__ is not complex and end.__class__ is not complex:
        # PyTorch converts the ends to the integer dtype first (truncating), then steps
        # in float64 and truncates each value
        start, end = int(start), int(end)
    if steps == 1:
        return _finish(_fill((1,), start, d), rg)
    step = (end - start) / (steps - 1)
    half = steps // 2
    if (
        steps.__class__ is int
        and steps <= _HOST_VALUES
        and start.__class__ in _PLAIN_NUMBERS
        and end.__class__ in _PLAIN_NUMBERS
        and d.kind == "f"
        and _trace.current() is None
    ):
        # the kernels' formula below, on the host (the same float64 operations)
        fstart, fend, last = float(start), float(end), steps - 1.0
        out = Tensor._empty((steps,), d)
        if _put_values(
            out, [i * step + fstart if i < half else fend - (last - i) * step for i in range(steps)]
        ):
            return _finish(out, rg)
    idx = iota(steps, dt.float64)
    if _trace.current() is not None:  # traced: the same formula as graph ops
        fwd = E.add(E.mul(idx, step), float(start))
        bwd = E.sub(float(end), E.mul(E.sub(steps - 1.0, idx), step))
        return _finish(E.where(E.lt(idx, half), fwd, bwd).to(d), rg)
    # PyTorch fills the first half from start and the second half from end (symmetric)
    fwd = ew.run("add", [ew.run("mul", [idx, step]), float(start)])
    bwd = ew.run("sub", [float(end), ew.run("mul", [ew.run("sub", [steps - 1.0, idx]), step])])
    mask = ew.run("lt", [idx, half])
    out = ew.run("where", [mask, fwd, bwd])
    if out._dtype is not d:  # integer results truncate, as in PyTorch
        out = ew.run("cast", [out], {"dtype": d})
    return _finish(out, rg)


# --------------------------------------------------------------------------------------
# Random numbers
# --------------------------------------------------------------------------------------


class Generator:
    """A random number generator: a key (from the seed) and a counter of the draws made
    so far; element i of a draw is a hash of (key, counter + i), so streams are
    reproducible from the seed, and differ from PyTorch's (its CPU generator is an MT19937).

    Key and counter live in a 2-element int64 tensor, so that compiled code can read the
    state as an input and write the advanced counter back after each call (a traced draw
    is never frozen into the graph).
    """

    def __init__(self, device: Any = "cpu", seed: int | None = None):
        """`Generator()` / `Generator(device="cpu")` as in PyTorch (then `manual_seed`);
        `Generator(7)` seeds at once (an int first argument is the seed; PyTorch reads it
        as a device index)."""
        if isinstance(device, int) and not isinstance(device, bool):
            device, seed = "cpu", device
        check_device(device, "Generator")
        self._state: Tensor | None = None
        self.manual_seed(67280421310721 if seed is None else seed)

    @property
    def device(self) -> Any:
        """`device(type='cpu')`."""
        return CPU

    @property
    def state_tensor(self) -> Tensor:
        if self._state is None:
            self._state = Tensor._empty((2,), dt.int64)
        return self._state

    def _read(self) -> tuple[int, int]:
        view = self.state_tensor._numpy_view()
        return int(view[0]), int(view[1])

    def _write(self, key: int, counter: int) -> None:
        view = self.state_tensor._numpy_view()
        view[0], view[1] = key, _signed(counter & ((1 << 64) - 1))

    def manual_seed(self, seed: int) -> "Generator":
        """Seed the generator (any int in [-2**63, 2**64); negative seeds count modulo
        2**64, as PyTorch) and restart its stream; returns the generator."""
        if isinstance(seed, Tensor):
            seed = seed.item()
        if isinstance(seed, np.integer):
            seed = int(seed)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        if not -(1 << 63) <= seed < (1 << 64):
            raise ValueError(f"manual_seed: Overflow when unpacking long long ({seed})")
        self._seed = seed & ((1 << 64) - 1)
        self._write(_signed(_mix(self._seed)), 0)
        return self

    def seed(self) -> int:
        """Seed from a non-deterministic source (the OS's entropy) and return that seed."""
        import random

        s = random.SystemRandom().getrandbits(63)
        self.manual_seed(s)
        return s

    @property
    def key(self) -> int:
        return self._read()[0]

    @property
    def counter(self) -> int:
        return self._read()[1]

    def initial_seed(self) -> int:
        """The seed the stream started from."""
        return self._seed

    def take(self, n: int) -> tuple[int, int]:
        key, c = self._read()
        self._write(key, c + n)
        return key, c

    def get_offset(self) -> int:
        """How many numbers have been drawn since seeding (the counter). PyTorch's CPU
        generator has no offset and raises; llgrad's counter-based one has."""
        return self.counter & ((1 << 64) - 1)

    def set_offset(self, offset: int) -> "Generator":
        """Move the stream to `offset` draws after the seed."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise RuntimeError(f"set_offset: expected a non-negative int, got {offset!r}")
        self._write(self.key, offset)
        return self

    STATE_BYTES = 16

    def get_state(self) -> Tensor:
        """The generator's state as a uint8 tensor (16 bytes: the seed and the counter,
        little-endian uint64s; PyTorch's MT19937 state is 5056 bytes), for `set_state`."""
        raw = np.array([self._seed, self.counter & ((1 << 64) - 1)], dtype="<u8")
        return Tensor._from_numpy(raw.view(np.uint8).copy())

    def set_state(self, new_state: Tensor) -> "Generator":
        """Restore a state made by `get_state` (of this or any llgrad generator)."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a llgrad.ByteTensor, but got {type(new_state).__name__}")
        if new_state._dtype is not dt.uint8:
            raise TypeError("RNG state must be a llgrad.ByteTensor")
        if new_state.numel() != self.STATE_BYTES:
            raise RuntimeError(
                f"Expected an llgrad Generator state of size "
                f"{self.STATE_BYTES} but found the input RNG state size to "
                f"be {new_state.numel()}"
            )
        seed, counter = (
            int(v) for v in np.ascontiguousarray(new_state._values().reshape(-1)).view("<u8")
        )
        self.manual_seed(seed)
        self._write(self.key, counter)
        return self

    def clone_state(self) -> "Generator":
        """A new generator in this one's state (each then draws on its own)."""
        g = Generator(seed=self._seed)
        g._write(g.key, self.counter)
        return g

    def __getstate__(self) -> dict[str, int]:
        return {"seed": self._seed, "counter": self.counter}

    def __setstate__(self, state: dict[str, int]) -> None:
        self._state = None
        self.manual_seed(state["seed"])
        self._write(self.key, state["counter"])

    def __repr__(self) -> str:
        return f"<llgrad.Generator seed={self._seed} offset={self.get_offset()}>"


def _mix(seed: int) -> int:
    m = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (`lg.default_generator`); returns it."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from a non-deterministic source; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator started from."""
    return default_generator.initial_seed()


def _random(op: str, shape: tuple[int, ...], d: DType, generator: Generator | None) -> Tensor:
    if not (d.is_floating_point or d.is_complex):
        raise TypeError(
            f"{'rand' if op == 'uniform' else 'randn'}: expected a floating point "
            f"dtype, got {d.name}"
        )

    if interpreters:
        per_element = _vmap_randomness(interpreters)
        if per_element:  # randomness="different": one draw per element
            from ..transforms.batching import (
                unlift,
            )  # circle: transforms.batching -> functions -> here

            ordered = sorted(per_element, key=lambda i: i.level)
            full = tuple(i.size for i in ordered) + tuple(shape)
            return unlift(_draw(op, full, d, generator), ordered)
    return _draw(op, shape, d, generator)


def _vmap_randomness(interpreters: list) -> list:
    """The active vmaps whose randomness is "different"; raises under "error"."""
    out = []
    for interp in interpreters:
        mode = getattr(interp, "randomness", None)
        if mode == "error":
            raise RuntimeError(
                "vmap: called random operation while in randomness error mode. "
                "Please either use the 'same' or 'different' randomness flags "
                "on vmap or perform the randomness operation out of vmap"
            )
        if mode == "different":
            out.append(interp)
    return out


def _draw(op: str, shape: tuple[int, ...], d: DType, generator: Generator | None) -> Tensor:
    if d.is_complex:
        # PyTorch's complex draws: real and imaginary parts drawn apart, each uniform in
        # [0, 1) (rand) or normal with variance 1/2 (randn); llgrad functions, so that a
        # trace records them too
        part = d.to_real()
        re, im = _draw(op, shape, part, generator), _draw(op, shape, part, generator)
        if op == "normal":
            re, im = mul(re, 0.5**0.5), mul(im, 0.5**0.5)
        return make_complex(re, im)
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(
            f"{op}: 'generator' must be an llgrad Generator "
            f"(lg.Generator()), not {type(generator).__name__}"
        )
    gen = generator or default_generator

    ctx = current()
    if ctx is not None:
        return _traced_random(ctx, op, shape, d, gen)
    out = Tensor._empty(shape, d)
    n = out.numel()
    key, counter = gen.take(n)
    return ew.run(op, [key, counter], {"dtype": d, "shape": shape}, out=out)


def _traced_random(ctx: Any, op: str, shape: tuple[int, ...], d: DType, gen: Generator) -> Tensor:
    """A draw inside a compiled function: the generator's state is a graph input, and the
    advanced counter is written back after every call, so each call draws new numbers."""
    n = 1
    for s in shape:
        n *= s
    state = gen.state_tensor
    key, counter = select(state, 0, 0), select(state, 0, 1)
    out = ctx.emit(op, [key, counter], {"dtype": d, "shape": tuple(shape)})
    del key, counter  # views of the state: the write below needs it unshared
    ctx.write(state, add(state, ctx.literal([0, n], dt.int64)))
    return out


@names_op("rand")
def rand(*size: Any, generator: Generator | None = None, **kwargs: Any) -> Tensor:
    shape = size_arg(size, "rand")
    dtype, rg = _kw(kwargs, "rand")
    return _finish(_random("uniform", shape, dtype or dt.get_default_dtype(), generator), rg)


@names_op("randn")
def randn(*size: Any, generator: Generator | None = None, **kwargs: Any) -> Tensor:
    shape = size_arg(size, "randn")
    dtype, rg = _kw(kwargs, "randn")
    return _finish(_random("normal", shape, dtype or dt.get_default_dtype(), generator), rg)


def rand_like(input: Tensor, **kwargs: Any) -> Tensor:
    dtype, rg = _kw(kwargs, "rand_like")
    return _finish(_random("uniform", input._shape, dtype or input._dtype, None), rg)


def randn_like(input: Tensor, **kwargs: Any) -> Tensor:
    dtype, rg = _kw(kwargs, "randn_like")
    return _finish(_random("normal", input._shape, dtype or input._dtype, None), rg)


def randperm(n: int, *, generator: Generator | None = None, **kwargs: Any) -> Tensor:
    """A random permutation of 0..n-1: the stable order of n uniform float64 draws (so it
    is a permutation whatever the draws, and `manual_seed` reproduces it)."""
    dtype, rg = _kw(kwargs, "randperm")
    if isinstance(n, bool) or not _is_int_like(n) or int(n) < 0:
        raise RuntimeError(f"randperm: n must be a non-negative integer, got {n!r}")
    n = int(n)
    order = np.zeros(0, dtype=np.int64)
    if n:
        keys = rand(n, dtype=dt.float64, generator=generator).numpy()
        order = np.argsort(keys, kind="stable").astype(np.int64)
    return _finish(from_numpy(order).to(dtype or dt.int64), rg)


@names_op("randint")
def randint(
    *args: Any, size: Any = None, generator: Generator | None = None, **kwargs: Any
) -> Tensor:
    """`randint(high, size)`, `randint(low, high, size)` (PyTorch's signatures; `low`,
    `high` and `size` also by keyword): integers drawn uniformly from [low, high)."""
    args = list(args)
    if args and not _is_int_like(args[-1]):
        if size is not None:
            raise TypeError("randint() got the size twice (positionally and as size=)")
        size = args.pop()
    low = kwargs.pop("low", None)
    high = kwargs.pop("high", None)
    ints = [low, high] if low is not None or high is not None else []
    if ints and args:
        raise TypeError("randint() got low/high both positionally and by keyword")
    if not ints:
        ints = args
    if len(ints) == 1 or (len(ints) == 2 and ints[0] is None):
        low, high = 0, ints[-1]
    elif len(ints) == 2:
        low, high = ints
    else:
        raise TypeError(
            f"randint() expects (high, size) or (low, high, size), got "
            f"{len(args)} positional numbers"
        )
    if size is None:
        raise TypeError("randint() missing required argument 'size' (a tuple of ints)")
    low, high = _as_int("low", low), _as_int("high", high)
    if high <= low:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    shape = size_arg((size,), "randint")
    dtype, rg = _kw(kwargs, "randint")

    u = _random("uniform", shape, dt.float64, generator)
    scaled = E.floor(E.add(E.mul(u, float(high - low)), float(low)))
    return _finish(scaled.to(dtype or dt.int64), rg)


def _is_int_like(x: Any) -> bool:
    return isinstance(x, int) or (isinstance(x, Tensor) and x.ndim == 0)


def _as_int(what: str, v: Any) -> int:
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"randint(): {what} must be an int, got {v!r}")
    return v


def _on_devices() -> None:
    """Creation functions accept device="cuda" (see `_errors.device_aware`)."""

    g = globals()
    for name in (
        "zeros",
        "ones",
        "empty",
        "full",
        "eye",
        "arange",
        "linspace",
        "rand",
        "randn",
        "randperm",
        "randint",
    ):
        g[name] = device_aware(g[name])
    for name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"):
        g[name] = device_aware(g[name], like=True)


_on_devices()
