"""Tensor attributes, predicates, constructors and Python protocols that complete the `Tensor` API.

Also the torch-level utilities around them: constants (`lg.pi`, `lg.newaxis`), memory formats
and layouts, `logspace empty_strided empty_permuted scalar_tensor asarray frombuffer range`,
dtype queries (`promote_types result_type can_cast`), `broadcast_shapes`, and the process-wide
switches PyTorch exposes (`use_deterministic_algorithms`, `set_float32_matmul_precision`,
`set_warn_always`, `set_anomaly_enabled`, ...).
"""

from __future__ import annotations

import builtins
import copy as _copy
import ctypes
import math
import struct
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..tape import forward as _forward_ad
from ..tape.anomaly import _state, is_anomaly_check_nan_enabled, is_anomaly_enabled as enabled
from ..dispatch.apply import interpreters as _interpreters
from ..device import CPU, check_device, check_device as _check_device
from ..dispatch.grad_mode import _state as _grad_state, no_grad
from ..eager import elementwise as _ew, elementwise as ew, views as _views
from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..runtime.launch import set_threads, threads
from ..runtime.storage import allocate, allocate as _allocate
from ..schedule.layout import contiguous_strides as _contiguous_strides, is_contiguous as _row_major
from ..tensor import DENSE_CLASSES, Size, Tensor
from ..tracer import context as _trace
from ..tracer.context import _tls as _trace_state, user_location  # (its `stack`: the traces)
from ..tracer.tensor import GraphBreak
from . import creation as _creation, elementwise as E, shape as _shape
from ._errors import _STANDARD, device_aware, names_op, relabel
from ._out import can_cast as allowed, store
from ._switches import _switches
from .creation import _finish, arange, checked_scalar, empty, from_dlpack, tensor, tensor as make
from .elementwise import eq, where
from .inplace import bump, check_inplace
from .legacy import tensor_type
from .misc import to
from .reduction import any as any_
from .shape import clone, contiguous, expand, flip, permute, size_arg, unbind

__all__: list[str] = [
    "e",
    "pi",
    "inf",
    "nan",
    "newaxis",
    "memory_format",
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
    "strided",  # (the `layout` class: llgrad/__init__.py binds it)
    "logspace",
    "empty_strided",
    "empty_permuted",
    "scalar_tensor",
    "asarray",
    "frombuffer",
    "range",
    "promote_types",
    "result_type",
    "can_cast",
    "broadcast_shapes",
    "is_nonzero",
    "is_same_size",
    "is_signed",
    "typename",
    "is_storage",
    "is_inference",
    "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled",
    "get_deterministic_debug_mode",
    "set_deterministic_debug_mode",
    "get_float32_matmul_precision",
    "set_float32_matmul_precision",
    "get_num_interop_threads",
    "set_num_interop_threads",
    "init_num_threads",
    "set_flush_denormal",
    "is_warn_always_enabled",
    "set_warn_always",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "set_anomaly_enabled",
    "compiled_with_cxx11_abi",
    "UntypedStorage",
    "TypedStorage",
    "is_neg",
    "resolve_neg",
    "get_device",
    "resize_as_",
]

# --------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------

e: float = math.e
pi: float = math.pi
inf: float = math.inf
nan: float = math.nan
newaxis: None = None


class memory_format:
    """A memory format (`lg.contiguous_format`, `lg.channels_last`, `lg.channels_last_3d`,
    `lg.preserve_format`): the order in which a tensor's dimensions are laid out in memory,
    as taken by `.contiguous(memory_format=)`, `.clone(memory_format=)`, `.to(memory_format=)`
    and `.is_contiguous(memory_format=)`."""

    def __init__(self, name: str, order: tuple[int, ...] | None = None):
        self._name = name
        self._order = order  # dims from outermost to innermost (None: row-major)

    def __repr__(self) -> str:
        return f"llgrad.{self._name}"

    def __reduce__(self) -> str:
        return self._name


class layout:
    """A tensor layout; llgrad has dense strided tensors only (`lg.strided`)."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"llgrad.{self._name}"

    def __reduce__(self) -> str:
        return self._name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last", (0, 2, 3, 1))
channels_last_3d = memory_format("channels_last_3d", (0, 2, 3, 4, 1))
preserve_format = memory_format("preserve_format")
strided = layout("strided")


def _check_layout(value: Any, op: str) -> None:
    if value is not None and value is not strided:
        raise RuntimeError(f"{op}: llgrad has only the strided layout, got {value!r}")


def _format_order(fmt: memory_format, ndim: int, op: str) -> tuple[int, ...]:
    """The dims of a `ndim`-d tensor from outermost to innermost for `fmt`."""
    order = fmt._order
    if order is None:
        return tuple(builtins.range(ndim))
    if len(order) != ndim:
        raise RuntimeError(
            f"{op}: required rank {len(order)} tensor to use {fmt._name} format (got rank {ndim})"
        )
    return order


def _strides_for(shape: tuple[int, ...], order: Sequence[int]) -> tuple[int, ...]:
    """Dense strides of `shape` with `order` (outermost first) as the memory order."""
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def _is_dense(t: Tensor) -> bool:
    """Non-overlapping and dense: the elements fill their span exactly once."""
    order = sorted(builtins.range(t.ndim), key=lambda d: t._strides[d], reverse=True)
    return t.numel() == 0 or _has_format(t, order)


def _laid_out(t: Tensor, order: Sequence[int]) -> Tensor:
    """A copy of `t` (recorded for autograd) whose memory follows `order`."""
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return permute(clone(permute(t, tuple(order))), tuple(inverse))


def _in_format(t: Tensor, fmt: Any, op: str, copy: bool) -> Tensor:
    """`t` laid out in memory format `fmt` (a copy when `copy` or when it is not already)."""
    if fmt is None or fmt is preserve_format:
        if not copy:
            return t
        if _is_dense(t) and not t.is_contiguous() and getattr(t, "_ctx", None) is None:
            return _laid_out(t, dim_order(t))
        return clone(t)
    if not isinstance(fmt, memory_format):
        raise TypeError(
            f"{op}(): memory_format must be an llgrad memory_format, got {type(fmt).__name__}"
        )
    order = _format_order(fmt, t.ndim, op)
    if fmt is contiguous_format:
        return clone(t) if copy else contiguous(t)
    if not copy and _has_format(t, order):
        return t
    return _laid_out(t, order)


def _has_format(t: Tensor, order: Sequence[int]) -> bool:
    want = _strides_for(t._shape, order)
    return all(t._shape[d] == 1 or t._strides[d] == want[d] for d in builtins.range(t.ndim))


def _contiguous(self: Tensor, memory_format: Any = None) -> Tensor:
    """`t.contiguous(memory_format=lg.contiguous_format)`: `t` itself when already laid out
    so, else a copy in that layout (`lg.channels_last`: NHWC strides for a 4-d tensor)."""
    if memory_format is None or memory_format is contiguous_format:
        return _shape.contiguous(self)
    if memory_format is preserve_format:  # PyTorch: accepted only when nothing is to do
        if _row_major(self._shape, self._strides):
            return self
        raise RuntimeError(
            "contiguous: preserve memory format is unsupported by the contiguous operator"
        )
    return _in_format(self, memory_format, "contiguous", False)


def _clone(self: Tensor, *, memory_format: Any = None) -> Tensor:
    """`t.clone(memory_format=...)`: a copy with its own memory. Without `memory_format`
    the copy is row-major (llgrad's default); `lg.preserve_format` keeps a dense tensor's
    memory order (PyTorch's default), another format lays the copy out in it."""
    if memory_format is None:
        if _shape._unrecorded(self):  # (`shape.clone`'s copy, one call less)
            return _views.clone(self)
        return _shape.clone(self)
    return _in_format(self, memory_format, "clone", True)


def _is_contiguous(self: Tensor, memory_format: Any = None) -> bool:
    """Whether `t` is laid out densely in `memory_format` (row-major by default)."""
    if memory_format is None or memory_format is contiguous_format:
        return _row_major(self._shape, self._strides)
    if not isinstance(memory_format, _MemoryFormat) or memory_format is preserve_format:
        raise RuntimeError(
            "is_contiguous: preserve_format is not a memory format a tensor can be in"
        )
    if memory_format._order is None or len(memory_format._order) != self.ndim:
        return False
    return _has_format(self, memory_format._order)


_MemoryFormat = memory_format


def _to(self: Tensor, *args: Any, memory_format: Any = None, **kwargs: Any) -> Tensor:
    """`t.to(...)` with PyTorch's `memory_format=` (the result laid out in it)."""
    if (
        not kwargs
        and len(args) == 1
        and args[0].__class__ is DType
        and memory_format is None
        and self.__class__ is Tensor
    ):
        return _cast(self, args[0])

    out = to(self, *args, **kwargs)
    if memory_format is None or memory_format is preserve_format:
        return out
    return _in_format(out, memory_format, "to", False)


# --------------------------------------------------------------------------------------
# Creation
# --------------------------------------------------------------------------------------


def _creation_kw(
    op: str, dtype: DType | None, layout_: Any, device: Any, requires_grad: bool
) -> DType:
    if device is not None and not (device.__class__ is str and device == "cpu"):
        _check_device(device, op)
    if layout_ is not None:
        _check_layout(layout_, op)
    if dtype is not None and not isinstance(dtype, DType):
        raise TypeError(f"{op}(): dtype must be an llgrad dtype, got {dtype!r}")
    d = dtype or dt._default_dtype[0]
    if requires_grad:
        _creation._check_grad_dtype(d, requires_grad)
    return d


@names_op("logspace")
def logspace(
    start: Any,
    end: Any,
    steps: int,
    base: float = 10.0,
    *,
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """`steps` values `base ** x` for x evenly spaced from `start` to `end` (inclusive).
    `pin_memory=True` raises, as PyTorch without an accelerator.

    Computed in float64 (complex128 for complex dtypes) and rounded once to `dtype`; an
    integer dtype truncates, as PyTorch."""
    if pin_memory:
        _pin_memory(None)  # type: ignore[arg-type]   (raises)
    d = _creation_kw("logspace", dtype, layout, device, requires_grad)
    if isinstance(start, Tensor):
        start = start.item()
    if isinstance(end, Tensor):
        end = end.item()
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise TypeError(f"logspace(): steps must be an int, got {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError("logspace: number of steps must be non-negative")
    if steps == 0 and not _interpreters and not _trace_state.stack:
        return _creation._create((0,), (1,), None, d, requires_grad)
    if d.kind in "iu" and not isinstance(start, complex) and not isinstance(end, complex):
        start, end = int(start), int(end)  # as PyTorch: the ends truncated first
    wide = dt.complex128 if d.is_complex else dt.float64
    base = float(base) if not isinstance(base, complex) else base
    if (
        not _interpreters
        and not _trace_state.stack
        and steps * d.itemsize <= _creation._IMAGE_BYTES
    ):
        k0, k1, k2 = _number_key(start), _number_key(end), _number_key(base)
        if k0 is not None and k1 is not None and k2 is not None:
            # the values depend on the numbers only: computed once, then copied
            out = _creation._imaged(
                ("logspace", k0, k1, k2, steps, d),
                d,
                lambda: _image_of(_logspace(start, end, steps, base, wide, d)),
            )
            if out is not None:
                return _creation._finish(out, requires_grad)
    return _creation._finish(_logspace(start, end, steps, base, wide, d), requires_grad)


_pack_double = struct.Struct("=d").pack


def _number_key(v: Any) -> Any:
    """A key fixing the Python int or float `v` exactly (a float by its bits: -0.0 is not
    0.0), or None for anything else."""
    c = v.__class__
    if c is int:
        return v
    if c is float:
        return _pack_double(v)
    return None


def _image_of(t: Tensor) -> tuple[tuple[int, ...], bytes]:
    """(shape, bytes) of the row-major tensor `t`, for `creation._imaged`."""
    return t._shape, ctypes.string_at(t._ptr, t.numel() * t._dtype.itemsize)


def _logspace(start: Any, end: Any, steps: int, base: Any, wide: DType, d: DType) -> Tensor:
    """`logspace`'s values: base ** linspace(start, end, steps) in `wide`, into `d`."""
    exponents = _creation.linspace(start, end, steps, dtype=wide)
    if (
        exponents.__class__ is Tensor
        and (d.kind == "f" and base.__class__ is float or d.kind == "c")
        and not _interpreters
        and _trace.current() is None
    ):
        # the power's kernel rounds into `dtype` as it stores (`E.pow(...).to(dtype)`'s
        # two kernels in one): nothing here is recorded, the exponents are constants
        return _ew.run("pow", [base, exponents], out=Tensor._empty(exponents._shape, d))

    out = E.pow(base, exponents)
    return out.to(d) if out._dtype is not d else out


def _extent(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements a layout reaches (0 for an empty tensor)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + builtins.sum((n - 1) * s for n, s in zip(shape, strides))


@names_op("empty_strided")
def empty_strided(
    size: Sequence[int],
    stride: Sequence[int],
    *,
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """An uninitialized tensor of `size` with the given element `stride`s (its memory spans
    exactly what the strides reach; stride 0 dims share elements)."""
    shape = size_arg((size,), "empty_strided")
    strides = tuple(int(s) for s in stride)
    d = _creation_kw("empty_strided", dtype, layout, device, requires_grad)
    if len(strides) != len(shape):
        raise RuntimeError(
            f"empty_strided: dimensionality of sizes ({len(shape)}) must match "
            f"dimensionality of strides ({len(strides)})"
        )
    if any(s < 0 for s in strides):
        raise RuntimeError(
            f"empty_strided: strides must be non-negative, got sizes="
            f"{list(shape)} and strides={list(strides)}"
        )
    storage = allocate(_extent(shape, strides) * d.itemsize)
    out = Tensor._make(storage, 0, shape, strides, d)
    _creation._fill_uninitialized(out)
    return _finish(out, requires_grad)


@names_op("empty_permuted")
def empty_permuted(
    size: Sequence[int],
    physical_layout: Sequence[int],
    *,
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """An uninitialized tensor of `size` whose memory is row-major in the dimension order
    `physical_layout` (`empty_permuted((2, 3, 4), (0, 2, 1))` has strides (12, 1, 3))."""
    shape = size_arg((size,), "empty_permuted")
    order = tuple(int(p) for p in physical_layout)
    if len(order) != len(shape):
        raise RuntimeError(
            f"empty_permuted: Number of dimensions in size does not match the "
            f"length of the physical_layout; i.e. len(size) = {len(shape)} is "
            f"not equal to len(physical_layout) = {len(order)}"
        )
    if sorted(order) != list(builtins.range(len(shape))):
        raise RuntimeError(
            f"empty_permuted: physical_layout must be a permutation of the "
            f"dimensions, got {list(order)}"
        )
    return empty_strided(
        shape,
        _strides_for(shape, order),
        dtype=dtype,
        layout=layout,
        device=device,
        requires_grad=requires_grad,
    )


def scalar_tensor(
    s: Any,
    *,
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """A 0-d tensor holding the number `s`, of `dtype` (the default float dtype when not
    given, whatever `s`'s type), with `full`'s overflow check."""
    try:
        if isinstance(s, Tensor):
            s = s.item()
        d = _creation_kw("scalar_tensor", dtype, layout, device, requires_grad)
        if not isinstance(s, _creation._NUMBER_CLASSES):
            raise TypeError(f"full: fill_value must be a number, got {type(s).__name__}")
        return _creation._create((), (), _creation.checked_scalar(s, d, "full"), d, requires_grad)
    except _STANDARD as e:  # errors name the function (as `names_op` does)
        relabel(e, "scalar_tensor")
        raise


def _shareable(arr: np.ndarray) -> bool:
    """Whether llgrad can view `arr`'s memory as a tensor without copying."""
    try:
        dt.from_numpy(arr.dtype)
    except TypeError:
        return False
    return (
        arr.flags.writeable
        and all(s >= 0 and s % arr.itemsize == 0 for s in arr.strides)
        and arr.__array_interface__["data"][0] % arr.itemsize == 0
        and arr.dtype.isnative
    )


@names_op("asarray")
def asarray(
    obj: Any,
    *,
    dtype: DType | None = None,
    device: Any = None,
    copy: bool | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """`obj` as a tensor, sharing its memory when it can (PyTorch's `asarray`).

    `obj`: a tensor, an ndarray or NumPy scalar, an object with `__dlpack__`, a number or a
    (nested) sequence of numbers. `copy=None` shares when no conversion is needed,
    `copy=True` always copies, `copy=False` never copies (ValueError when it would have to).
    Where llgrad differs: read-only NumPy memory is copied (llgrad tensors are writable);
    objects that only expose the buffer protocol go through `lg.frombuffer`."""
    check_device(device, "asarray")

    def no_copy(why: str) -> ValueError:
        return ValueError(f"asarray: copy=False, but {why} needs a copy")

    if isinstance(obj, Tensor):
        out = obj
        if dtype is not None and dtype is not obj._dtype:
            if copy is False:
                raise no_copy(f"converting {obj._dtype.name} to {dtype.name}")
            out = obj.to(dtype)
        elif copy:
            out = obj.clone()
        if requires_grad:
            out = out.detach() if out is obj else out
            out.requires_grad_(True)
        return out
    if isinstance(obj, np.generic):
        obj = np.asarray(obj)
    if isinstance(obj, np.ndarray):
        share = _shareable(obj) and (dtype is None or dtype is dt.from_numpy(obj.dtype))
        if copy is False and not share:
            raise no_copy("this NumPy array (its dtype, layout or read-only memory)")
        if share and not copy:
            return _finish(Tensor._from_numpy(obj), requires_grad)
        return tensor(obj.copy() if copy else obj, dtype=dtype, requires_grad=requires_grad)
    if hasattr(obj, "__dlpack__"):
        out = from_dlpack(obj)
        return asarray(out, dtype=dtype, copy=copy, requires_grad=requires_grad)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        out = frombuffer(obj, dtype=dtype or dt.get_default_dtype())
        return asarray(out, copy=copy, requires_grad=requires_grad)
    if copy is False:
        raise no_copy(f"a {type(obj).__name__}")
    return tensor(obj, dtype=dtype, requires_grad=requires_grad)


@names_op("frombuffer")
def frombuffer(
    buffer: Any, *, dtype: DType, count: int = -1, offset: int = 0, requires_grad: bool = False
) -> Tensor:
    """A 1-d tensor over the memory of an object with the buffer protocol (`bytearray`,
    `memoryview`, `array.array`, ...), read as `dtype` from byte `offset`, `count`
    elements (-1: all that remain). Writable buffers are shared; a read-only buffer
    (`bytes`) is copied (PyTorch shares it with a warning; llgrad tensors are writable)."""
    if not isinstance(dtype, DType):
        raise TypeError(f"frombuffer(): dtype must be an llgrad dtype, got {dtype!r}")
    view = memoryview(buffer).cast("B")
    n = view.nbytes
    item = dtype.itemsize
    if n == 0 or count == 0:
        raise ValueError(f"both buffer length ({n}) and count ({count}) must not be 0")
    if not 0 <= offset < n:
        raise ValueError(
            f"offset ({offset} bytes) must be non-negative and no greater than "
            f"buffer length ({n} bytes) minus 1"
        )
    if count < 0:
        if (n - offset) % item:
            raise ValueError(
                f"buffer length ({n - offset} bytes) after offset ({offset} "
                f"bytes) must be a multiple of element size ({item})"
            )
        count = (n - offset) // item
    elif offset + count * item > n:
        raise ValueError(
            f"requested buffer length ({count} * {item} bytes) after offset "
            f"({offset} bytes) must not be greater than actual buffer length "
            f"({n} bytes)"
        )
    arr = np.frombuffer(view, dtype=np.uint8, count=count * item, offset=offset)
    if arr.flags.writeable and arr.__array_interface__["data"][0] % item == 0:
        out = Tensor._from_numpy(arr.view(dtype.np), dtype)
    else:
        out = Tensor._empty((count,), dtype)
        out._numpy_view().view(np.uint8).reshape(-1)[...] = arr
    return _finish(out, requires_grad)


@names_op("range")
def range(
    start: Any = 0,
    end: Any = None,
    step: Any = 1,
    *,
    out: Tensor | None = None,
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Deprecated in PyTorch (it warns): values from `start` to `end` INCLUSIVE by `step`,
    `floor((end - start) / step) + 1` of them, in the default float dtype unless `dtype`."""
    warnings.warn(
        "llgrad.range is deprecated and will be removed in a future release "
        "because its behavior is inconsistent with Python's range builtin. "
        "Instead, use llgrad.arange, which produces values in [start, end).",
        UserWarning,
        stacklevel=3,
    )
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    d = _creation_kw("range", dtype, layout, device, requires_grad)
    if step == 0:
        raise RuntimeError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            f"range: upper bound and lower bound inconsistent with step sign "
            f"(start={start}, end={end}, step={step})"
        )
    if dtype is None and out is not None:
        d = out._dtype
    n = int(math.floor((end - start) / step)) + 1
    values = arange(n, dtype=dt.float64) * step + start if n else arange(0, dtype=dt.float64)
    result = _finish(values.to(d), requires_grad)
    if out is not None:
        return store("range", result, out)
    return result


# --------------------------------------------------------------------------------------
# dtype queries, shapes, predicates
# --------------------------------------------------------------------------------------

_PYTHON_TYPES = {bool: dt.bool_, int: dt.int64, float: dt.float64, complex: dt.complex128}


def _dtype_arg(d: Any, op: str, name: str) -> DType:
    """An llgrad dtype, or a Python number type standing for one (int: int64, float:
    float64, complex: complex128, bool), as PyTorch reads them."""
    if d in _PYTHON_TYPES:
        return _PYTHON_TYPES[d]
    if not isinstance(d, DType):
        raise TypeError(f"{op}(): argument '{name}' must be llgrad.dtype, not {type(d).__name__}")
    return d


def promote_types(type1: DType, type2: DType) -> DType:
    """The smallest dtype both `type1` and `type2` convert to without losing their
    category (PyTorch's promotion lattice: uint8 with int8 is int16, float16 with
    bfloat16 is float32)."""
    return dt.promote_types(
        _dtype_arg(type1, "promote_types", "type1"), _dtype_arg(type2, "promote_types", "type2")
    )


def result_type(
    tensor: Any = None,
    other: Any = None,
    *,
    scalar: Any = None,
    scalar1: Any = None,
    scalar2: Any = None,
) -> DType:
    """The dtype an arithmetic op on two operands (tensors or Python numbers) computes in:
    PyTorch's rule where dimensioned tensors outrank 0-d tensors, which outrank numbers,
    unless a lower rank holds a higher category (bool < int < float < complex).
    Positionally `result_type(a, b)`; PyTorch's keywords `tensor=`, `other=`, `scalar=`,
    `scalar1=`, `scalar2=` name the operands of its overloads."""
    given = [v for v in (scalar, scalar1, tensor, other, scalar2) if v is not None]
    if len(given) != 2:
        raise TypeError(f"result_type() takes 2 operands ({len(given)} given)")
    dims: list[DType] = []
    zero: list[DType] = []
    scalars: list[DType] = []
    for i, v in enumerate(given):
        if isinstance(v, Tensor):
            (dims if v.ndim else zero).append(v._dtype)
        elif isinstance(v, (bool, int, float, complex, np.number, np.bool_)):
            scalars.append(dt.scalar_dtype(v))
        else:
            raise TypeError(
                f"result_type(): argument {i + 1} must be a Tensor or a number, "
                f"not {type(v).__name__}"
            )
    return dt.result_type(dims, zero, scalars)


def can_cast(from_: DType, to: DType) -> bool:
    """Whether PyTorch's casting rule allows `from_` into `to` in an op's output: never to a
    lower category (complex > float > integer > bool)."""
    return allowed(_dtype_arg(from_, "can_cast", "from_"), _dtype_arg(to, "can_cast", "to"))


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape tensors of `shapes` broadcast to (an int stands for a 1-d shape), without
    making tensors. Raises RuntimeError naming the mismatching shape."""
    out: list[int] = []
    seen: list[tuple[int, ...]] = []
    for i, s in enumerate(shapes):
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            s = (int(s),)
        s = tuple(int(v) for v in s)
        if any(v < 0 for v in s):
            raise ValueError(
                "broadcast_shapes: Attempting to broadcast a dimension with negative length!"
            )
        if len(s) > len(out):
            out = [1] * (len(s) - len(out)) + out
        for k in builtins.range(1, len(s) + 1):
            a, b = out[-k], s[-k]
            if a == b or b == 1:
                continue
            if a == 1:
                out[-k] = b
                continue
            raise RuntimeError(
                f"broadcast_shapes: Attempting to broadcast a dimension of "
                f"length {b} at {-k}! Mismatching argument at index {i} had "
                f"{s}; but expected shape should be broadcastable to {out}"
            )
        seen.append(s)
    return Size(out)


def _tensor_arg(x: Any, op: str, name: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{op}(): argument '{name}' (position 1) must be Tensor, not {type(x).__name__}"
        )
    return x


def is_nonzero(input: Tensor) -> bool:
    """Whether a one-element tensor is not zero (NaN counts as non-zero); raises for any
    other number of elements, as PyTorch."""
    _tensor_arg(input, "is_nonzero")
    n = input.numel()
    if n == 0:
        raise RuntimeError("is_nonzero: Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError(
            "is_nonzero: Boolean value of Tensor with more than one value is ambiguous"
        )
    return bool(input._values().reshape(()).item() != 0)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have the same shape."""
    return (
        _tensor_arg(input, "is_same_size")._shape
        == _tensor_arg(other, "is_same_size", "other")._shape
    )


def is_signed(input: Tensor) -> bool:
    """Whether the tensor's dtype holds negative values (False for uint8 and bool)."""
    return _tensor_arg(input, "is_signed")._dtype.is_signed


def typename(obj: Any, /) -> str:
    """A tensor's legacy type name (`'llgrad.FloatTensor'`), else the object's class name
    with its module (`'int'`, `'llgrad.nn.modules.linear.Linear'`)."""
    if isinstance(obj, Tensor):
        return tensor_type(obj)
    module = type(obj).__module__
    name = type(obj).__qualname__
    if module in ("builtins", "__builtin__", None):
        return name
    return f"{module}.{name}"


def is_storage(obj: Any, /) -> bool:
    """Whether `obj` is a storage (`t.untyped_storage()`, `t.storage()`)."""
    return isinstance(obj, (UntypedStorage, TypedStorage))


def is_inference(input: Tensor) -> bool:
    """Whether `input` was made under `inference_mode`."""
    return _tensor_arg(input, "is_inference").is_inference()


# --------------------------------------------------------------------------------------
# Process-wide switches
# --------------------------------------------------------------------------------------


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms. llgrad's kernels already give the same bits run to
    run (fixed work splits, no atomics), so no op raises or warns under it; what changes
    is PyTorch's other effect: `empty`, `empty_like`, `empty_strided` fill their memory
    (NaN for floats, the largest value for integers) instead of leaving it uninitialized."""
    if not isinstance(mode, bool):
        raise TypeError(
            f"use_deterministic_algorithms(): mode must be a bool, got {type(mode).__name__}"
        )
    _switches.deterministic = mode
    _switches.warn_only = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True)` is in effect."""
    return _switches.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True, warn_only=True)` is in effect."""
    return _switches.warn_only


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def get_deterministic_debug_mode() -> int:
    """0 (off), 1 (deterministic, warn only) or 2 (deterministic)."""
    if not _switches.deterministic:
        return 0
    return 1 if _switches.warn_only else 2


def set_deterministic_debug_mode(debug_mode: int | str) -> None:
    """`use_deterministic_algorithms` by level: 0/"default", 1/"warn", 2/"error"."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, "
                f"`warn`, `error`, but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(
            f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}"
        )
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_float32_matmul_precision() -> str:
    """The precision asked of float32 matmuls: "highest" (the default), "high" or
    "medium". llgrad always computes them in full float32."""
    return _switches.matmul_precision


def set_float32_matmul_precision(precision: str) -> None:
    """Record the float32 matmul precision ("highest", "high", "medium"); another value
    warns and changes nothing, as PyTorch. llgrad's matmuls are full float32 whatever the
    setting (PyTorch's CPU matmuls are too unless oneDNN's bf16 paths apply)."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the "
            f"current set_float32_matmul_precision call has no effect.",
            UserWarning,
            stacklevel=2,
        )
        return
    _switches.matmul_precision = precision


def get_num_interop_threads() -> int:
    """The size of the inter-op thread pool. llgrad runs ops one after another and splits
    each kernel over `get_num_threads()` threads; this is the value last set, else that
    count."""
    if _switches.interop_threads is not None:
        return _switches.interop_threads

    return threads()


def set_num_interop_threads(num: int) -> None:
    """Set the inter-op thread count (llgrad records it: it has no inter-op pool). Like
    PyTorch it can be set once; a second call raises."""
    if isinstance(num, bool) or not isinstance(num, int) or num <= 0:
        raise RuntimeError(
            f"set_num_interop_threads: expected positive number of threads, got {num!r}"
        )
    if _switches.interop_threads is not None:
        raise RuntimeError(
            "Error: cannot set number of interop threads after parallel work "
            "has started or set_num_interop_threads called"
        )
    _switches.interop_threads = num


def init_num_threads() -> None:
    """Start llgrad's kernel thread pool now (it otherwise starts with the first large
    kernel)."""
    set_threads(threads())


def set_flush_denormal(mode: bool) -> bool:
    """Whether the requested denormal mode is in effect: llgrad never flushes denormals to
    zero, so `set_flush_denormal(False)` returns True and `set_flush_denormal(True)` returns
    False (PyTorch's answer on a CPU without the feature)."""
    return not bool(mode)


def is_warn_always_enabled() -> bool:
    """Whether warnings PyTorch gives once per process are given every time."""
    return _switches.warn_always


def set_warn_always(b: bool, /) -> None:
    """Give warnings normally given once every time (`is_warn_always_enabled`)."""
    _switches.warn_always = bool(b)


def is_anomaly_enabled() -> bool:
    """Whether autograd anomaly detection is on (`autograd.set_detect_anomaly`)."""
    return enabled()


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn autograd anomaly detection on or off for this thread."""
    _state.enabled = bool(enabled)
    _state.check_nan = bool(check_nan)


def compiled_with_cxx11_abi() -> bool:
    """PyTorch's question about its C++ library. llgrad ships no C++ library to link
    against (its kernels are generated at run time); it answers True, the ABI every
    current toolchain uses."""
    return True


# --------------------------------------------------------------------------------------
# Storages
# --------------------------------------------------------------------------------------


class UntypedStorage:
    """The memory under a tensor, as bytes (`t.untyped_storage()`): shared with every view
    of it. Indexing reads and writes bytes; `data_ptr()` is its first byte's address."""

    def __init__(self, storage: Any):
        self._storage = storage

    def nbytes(self) -> int:
        """Its size in bytes."""
        return self._storage.nbytes

    def size(self) -> int:
        """Its size in bytes (elements of one byte)."""
        return self._storage.nbytes

    def __len__(self) -> int:
        return self._storage.nbytes

    def element_size(self) -> int:
        """1: an untyped storage counts bytes."""
        return 1

    def data_ptr(self) -> int:
        """The address of its first byte."""
        return self._storage.ptr

    @property
    def device(self) -> Any:
        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_sparse(self) -> bool:
        return False

    def is_shared(self) -> bool:
        """False: llgrad never places storages in shared memory."""
        return False

    def is_pinned(self, device: Any = None) -> bool:
        return False

    def _bytes(self) -> np.ndarray:
        return self._storage.buffer

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return UntypedStorage._from_array(self._bytes()[index].copy())
        return int(self._bytes()[index])

    def __setitem__(self, index: Any, value: Any) -> None:
        self._bytes()[index] = value
        self._storage.version += 1

    def tolist(self) -> list[int]:
        """Its bytes as a list of ints."""
        return self._bytes().tolist()

    def fill_(self, value: int) -> "UntypedStorage":
        """Set every byte to `value`."""
        self._bytes()[...] = value
        self._storage.version += 1
        return self

    def copy_(self, source: "UntypedStorage", non_blocking: bool = False) -> "UntypedStorage":
        """Copy the bytes of a storage of the same size."""
        if source.nbytes() != self.nbytes():
            raise RuntimeError(
                f"copy_: storages of different sizes ({source.nbytes()} and {self.nbytes()} bytes)"
            )
        self._bytes()[...] = source._bytes()
        self._storage.version += 1
        return self

    def clone(self) -> "UntypedStorage":
        """A new storage holding a copy of the bytes."""
        return UntypedStorage._from_array(self._bytes().copy())

    def cpu(self) -> "UntypedStorage":
        return self

    @staticmethod
    def _from_array(arr: np.ndarray) -> "UntypedStorage":
        st = allocate(arr.nbytes)
        if arr.nbytes:
            st.buffer[...] = arr
        return UntypedStorage(st)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UntypedStorage) and other._storage is self._storage

    def __hash__(self) -> int:
        return id(self._storage)

    def __repr__(self) -> str:
        body = " " + "\n ".join(str(b) for b in self.tolist()[:20]) if len(self) else ""
        more = "\n ..." if len(self) > 20 else ""
        return f"{body}{more}\n[llgrad.storage.UntypedStorage(device=cpu) of size {len(self)}]"


class TypedStorage:
    """The memory under a tensor as elements of its dtype (`t.storage()`, deprecated in
    PyTorch, which warns). Indexing reads and writes elements."""

    def __init__(self, storage: Any, dtype: DType):
        self._storage = storage
        self.dtype = dtype

    def _elements(self) -> np.ndarray:
        n = self._storage.nbytes // self.dtype.itemsize
        return self._storage.buffer[: n * self.dtype.itemsize].view(self.dtype.np)

    def size(self) -> int:
        """The number of elements."""
        return self._storage.nbytes // self.dtype.itemsize

    def __len__(self) -> int:
        return self.size()

    def nbytes(self) -> int:
        return self._storage.nbytes

    def element_size(self) -> int:
        return self.dtype.itemsize

    def data_ptr(self) -> int:
        return self._storage.ptr

    @property
    def device(self) -> Any:
        return CPU

    def untyped(self) -> UntypedStorage:
        """The same memory as bytes."""
        return UntypedStorage(self._storage)

    def _values(self) -> np.ndarray:
        a = self._elements()
        return (a.astype(np.uint32) << 16).view(np.float32) if self.dtype is dt.bfloat16 else a

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._values()[index].tolist()
        return self._values()[index].item()

    def __setitem__(self, index: Any, value: Any) -> None:
        if self.dtype is dt.bfloat16:
            raise TypeError(
                "TypedStorage: writing bfloat16 elements needs a tensor; use the tensor's indexing"
            )
        self._elements()[index] = checked_scalar(value, self.dtype, "TypedStorage")
        self._storage.version += 1

    def tolist(self) -> list[Any]:
        return self._values().tolist()

    def is_shared(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TypedStorage)
            and other._storage is self._storage
            and other.dtype is self.dtype
        )

    def __hash__(self) -> int:
        return id(self._storage)

    def __repr__(self) -> str:
        body = " " + "\n ".join(str(v) for v in self.tolist()[:20]) if len(self) else ""
        return (
            f"{body}\n[llgrad.storage.TypedStorage(dtype={self.dtype}, device=cpu) of "
            f"size {len(self)}]"
        )


# --------------------------------------------------------------------------------------
# Tensor methods
# --------------------------------------------------------------------------------------


def _untyped_storage(self: Tensor) -> UntypedStorage:
    """The bytes under this tensor (shared with its views)."""
    return UntypedStorage(self._storage)


def _storage(self: Tensor) -> TypedStorage:
    """The memory under this tensor as elements of its dtype (PyTorch deprecates
    `Tensor.storage()` and warns; so does llgrad)."""
    warnings.warn(
        "TypedStorage is deprecated. Use tensor.untyped_storage() instead of tensor.storage()",
        UserWarning,
        stacklevel=2,
    )
    return TypedStorage(self._storage, self._dtype)


def _size_tuple(size: Any, op: str) -> tuple[int, ...]:
    return size_arg(
        size
        if isinstance(size, tuple) and size and not isinstance(size[0], int)
        else (size,)
        if not isinstance(size, tuple)
        else size,
        op,
    )


def _new_kw(self: Tensor, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A `new_*` method's creation keywords: this tensor's dtype and device unless given."""
    if not kwargs and not self.is_cuda:
        return {"dtype": self._dtype}
    kw = dict(kwargs)
    if kw.get("dtype") is None:
        kw["dtype"] = self._dtype
    if kw.get("device") is None and self.is_cuda:
        kw["device"] = "cuda"
    return kw


def new_empty(self: Tensor, *size: Any, **kwargs: Any) -> Tensor:
    """An uninitialized tensor of `size` with this tensor's dtype (unless `dtype=`)."""
    return empty(*size, **_new_kw(self, kwargs))


def new_full(self: Tensor, size: Sequence[int], fill_value: Any, **kwargs: Any) -> Tensor:
    """A tensor of `size` filled with `fill_value`, in this tensor's dtype (unless
    `dtype=`), with `full`'s overflow check."""
    if isinstance(size, (int, np.integer)):
        raise TypeError(
            f"new_full(): argument 'size' (position 1) must be tuple of ints, "
            f"not {type(size).__name__}"
        )
    return _creation.full(size, fill_value, **_new_kw(self, kwargs))


def new_empty_strided(
    self: Tensor, size: Sequence[int], stride: Sequence[int], **kwargs: Any
) -> Tensor:
    """`empty_strided(size, stride)` in this tensor's dtype (unless `dtype=`)."""
    return empty_strided(size, stride, **_new_kw(self, kwargs))


def _nbytes(self: Tensor) -> int:
    return self.numel() * self._dtype.itemsize


def _itemsize(self: Tensor) -> int:
    return self._dtype.itemsize


def ndimension(self: Tensor) -> int:
    """The number of dimensions (`dim()`)."""
    return len(self._shape)


def _is_signed(self: Tensor) -> bool:
    """Whether the dtype holds negative values (False for uint8 and bool)."""
    return self._dtype.is_signed


def _is_nonzero(self: Tensor) -> bool:
    return is_nonzero(self)


def _is_same_size(self: Tensor, other: Tensor) -> bool:
    return is_same_size(self, other)


def is_set_to(self: Tensor, tensor: Tensor) -> bool:
    """Whether both tensors view the same memory with the same offset, sizes and strides."""
    return (
        self._storage is tensor._storage
        and self._offset == tensor._offset
        and self._shape == tensor._shape
        and self._strides == tensor._strides
    )


def is_shared(self: Tensor) -> bool:
    """False: llgrad never places tensors in shared memory."""
    return False


def is_pinned(self: Tensor, device: Any = None) -> bool:
    """False: host memory is never pinned (there is no accelerator to pin it for)."""
    return False


def dim_order(self: Tensor, *, ambiguity_check: bool = False) -> tuple[int, ...]:
    """The dims from outermost to innermost in memory (PyTorch's `dim_order`): ordered by
    decreasing stride; ties keep the logical order, and stride-0 (expanded) dims do not
    move. `ambiguity_check=True` raises when the order is not unique (two dims of the same
    stride, as size-1 dims can have)."""
    n = self.ndim
    strides, shape = self._strides, self._shape
    order = list(builtins.range(n))

    def after(a: int, b: int) -> bool:
        """Whether dim `a` must come after (be more inner than) dim `b`."""
        if strides[a] == 0 or strides[b] == 0:
            return False
        if strides[a] != strides[b]:
            return strides[a] < strides[b]
        return shape[a] < shape[b]

    for i in builtins.range(1, n):  # insertion sort, stable
        j = i
        while j > 0 and after(order[j - 1], order[j]):
            order[j - 1], order[j] = order[j], order[j - 1]
            j -= 1
    if ambiguity_check:
        if len(set(strides)) != len(strides):
            raise RuntimeError(
                "The tensor does not have unique dim order, or cannot map to "
                "exact one of the given memory formats."
            )
    return tuple(order)


def apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Replace each element x by `callable(x)` (a Python function of a Python number),
    in place. Slow (one Python call per element), as in PyTorch; refuses tensors that
    require grad."""
    return _map_into(self, "apply_", callable, ())


def map_(self: Tensor, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """self[i] = callable(self[i], tensor[i]) in place, `tensor` broadcast to self's shape
    (it must have self's dtype)."""
    return _map_into(self, "map_", callable, (tensor,))


def map2_(self: Tensor, x: Tensor, y: Tensor, callable: Callable[[Any, Any, Any], Any]) -> Tensor:
    """self[i] = callable(self[i], x[i], y[i]) in place, `x` and `y` broadcast to self's
    shape (of self's dtype)."""
    return _map_into(self, "map2_", callable, (x, y))


def _map_into(self: Tensor, op: str, fn: Callable[..., Any], others: tuple) -> Tensor:
    if self._requires_grad:
        raise RuntimeError(
            f"Can't call {op}() on Variable that requires grad. Use var.detach().{op}() instead."
        )
    check_inplace(self)
    columns = [self._values().reshape(-1).tolist()]
    for o in others:
        if not isinstance(o, Tensor):
            raise TypeError(f"{op}(): expected a Tensor, got {type(o).__name__}")
        if o._dtype is not self._dtype:
            raise TypeError(
                f"{op}: expected a {self._dtype.name} tensor for the other "
                f"operands (got {o._dtype.name})"
            )
        columns.append(
            expand(o, self._shape)._values().reshape(-1).tolist()
            if o._shape != self._shape
            else o._values().reshape(-1).tolist()
        )
    values = [checked_scalar(fn(*args), self._dtype, op) for args in zip(*columns)]
    if values:
        ew.copy_into(self, make(values, dtype=self._dtype).reshape(self._shape))
    bump(self)
    return self


def resize_(self: Tensor, *sizes: Any, size: Any = None, memory_format: Any = None) -> Tensor:
    """Give the tensor `sizes` (contiguous strides) over its memory, growing the memory when
    it is too small (the old bytes are kept; new elements are uninitialized). Refuses a
    tensor that requires grad, as PyTorch."""
    if self.__class__ is not Tensor and getattr(self, "_ctx", None) is not None:
        raise GraphBreak(
            "resize_() of a traced value (it changes the memory under it)",
            user_location(),
            advice="this part runs eagerly",
        )
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if size is None and sizes:
        shape, strides = _creation._layout(sizes, "resize_")
        if strides is None:
            strides = _contiguous_strides(shape)
    else:
        shape = _shape.size_arg(_shape._keyword_shape("resize_", sizes, size, "size"), "resize_")
        strides = _contiguous_strides(shape)
    if (
        memory_format is not None
        and memory_format is not contiguous_format
        and memory_format is not preserve_format
    ):
        strides = _strides_for(shape, _format_order(memory_format, len(shape), "resize_"))
    need = (self._offset + _extent(shape, strides)) * self._dtype.itemsize
    st = self._storage
    if need > st.nbytes:
        fresh = _allocate(need)
        if st.nbytes:
            fresh.buffer[: st.nbytes] = st.buffer
        fresh.version = st.version
        st = fresh
    self._storage = st
    self._shape = shape
    self._strides = strides
    self._ptr = st.ptr + self._offset * self._dtype.itemsize
    self._lkey = (self._dtype, shape, strides)
    return self


def resize_as_(input: Tensor, the_template: Tensor, *, memory_format: Any = None) -> Tensor:
    """`input.resize_(the_template.shape)` (the method: `t.resize_as_(other)`)."""
    return resize_(input, the_template._shape, memory_format=memory_format)


def is_neg(input: Tensor) -> bool:
    """False: llgrad has no lazy negation bit (a negation is computed at once)."""
    _tensor_arg(input, "is_neg")
    return False


def resolve_neg(input: Tensor) -> Tensor:
    """`input` itself: with no lazy negation bit there is nothing to resolve."""
    return _tensor_arg(input, "resolve_neg")


def get_device(input: Tensor) -> int:
    """-1, PyTorch's device index of a CPU tensor."""
    return _tensor_arg(input, "get_device").get_device()


def _const_data_ptr(self: Tensor) -> int:
    """The address of the first element (as `data_ptr()`)."""
    return self.data_ptr()


def _pin_memory(self: Tensor, device: Any = None) -> Tensor:
    """Pinned memory is for copies to an accelerator; llgrad has none, so this raises as
    PyTorch does on a machine without one."""
    raise RuntimeError(
        "pin_memory: cannot access accelerator device when none is "
        "available (llgrad runs on the CPU only)"
    )


_casts: dict[tuple, Any] = {}  # (layout key, dtype) -> direct launch of the cast, or None


def _cast(x: Tensor, d: DType) -> Tensor:
    """`misc.to(x, d)` for a plain tensor `x`: `x` itself when of dtype `d`; else, when
    nothing is to be recorded (no grad to track, no transform or forward-mode level
    active), the cast's direct launch (`eager.elementwise.direct_launch`: allocate, pack,
    call), filed per layout after the first general call; anything else, and a launch
    that declines (kernels being recorded), takes `misc.to`."""
    if x._dtype is d:
        return x
    key = (x._lkey, d)
    go = _casts.get(key)
    if (
        go is not None
        and not _interpreters
        and not _forward_ad._level[0]
        and not (x._requires_grad and _grad_state.enabled)
    ):
        out = go(x)
        if out is not None:
            return out

    out = to(x, d)
    if key not in _casts and len(_casts) < 1024 and not _interpreters and not _forward_ad._level[0]:
        plan = _ew._plans.get(_ew._key("cast", (x,), {"dtype": d}, None))
        _casts[key] = None if plan is None else _ew.direct_launch("cast", plan, (x,))
    return out


def _cast_with_format(d: DType) -> Callable[..., Tensor]:
    def cast(self: Tensor, memory_format: Any = None) -> Tensor:
        if memory_format is None and self.__class__ is Tensor:
            return _cast(self, d)

        out = to(self, d)
        if memory_format is None or memory_format is preserve_format:
            return out
        return _in_format(out, memory_format, d.name, False)

    cast.__doc__ = f"`t.to(llgrad.{d.name})`, laid out in `memory_format` if given."
    return cast


def _where(self: Tensor, condition: Tensor, other: Any) -> Tensor:
    """`x.where(condition, other)`: `x` where `condition` holds, else `other` (the method
    takes the condition second, as PyTorch's)."""
    return where(condition, self, other)


# -- Python protocols -------------------------------------------------------------------


def _one_value(self: Tensor) -> Any:
    if self.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return self._values().reshape(()).item()


def _real_number(self: Tensor, to: type, c_name: str) -> Any:
    v = _one_value(self)
    if isinstance(v, complex):
        if v.imag != 0:
            raise RuntimeError(f"value cannot be converted to type {c_name} without overflow")
        v = v.real
    return to(v)


def __int__(self: Tensor) -> int:
    return _real_number(self, int, "int64_t")


def __float__(self: Tensor) -> float:
    return _real_number(self, float, "double")


def __complex__(self: Tensor) -> complex:
    return complex(_one_value(self))


def __bool__(self: Tensor) -> bool:
    n = self.numel()
    if n != 1:
        raise RuntimeError(
            f"Boolean value of Tensor with {'no values' if n == 0 else 'more than one value'} is ambiguous"
        )
    return bool(self._values().reshape(()).item())


def __index__(self: Tensor) -> int:
    if not (self._dtype.is_integer or self._dtype is dt.bool_) or self.numel() != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return int(self._values().reshape(()).item())


def __format__(self: Tensor, format_spec: str) -> str:
    if self.ndim == 0 and type(self) in _dense_classes():
        return format(self._values().reshape(()).item(), format_spec)
    return object.__format__(self, format_spec)


def _dense_classes() -> set:
    return DENSE_CLASSES


def __iter__(self: Tensor) -> Iterator[Tensor]:
    if not self._shape:
        raise TypeError("iteration over a 0-d tensor")

    return iter(unbind(self, 0))


def __reversed__(self: Tensor) -> Tensor:
    if not self._shape:
        return self

    return flip(self, (0,))


def __contains__(self: Tensor, element: Any) -> bool:
    if isinstance(element, (Tensor, bool, int, float, complex, np.number, np.bool_)):
        return bool(any_(eq(self, element)).item())
    raise RuntimeError(
        f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}."
    )


def __deepcopy__(self: Tensor, memo: dict[int, Any]) -> Tensor:
    """A copy with its own memory (views copied together keep sharing theirs), the same
    dtype, shape, strides, requires_grad, a deep copy of `.grad` and of Python attributes.
    Only leaves can be copied, as in PyTorch."""
    if self.grad_fn is not None:
        raise RuntimeError(
            "Only Tensors created explicitly by the user (graph leaves) "
            "support the deepcopy protocol at the moment."
        )
    if id(self) in memo:
        return memo[id(self)]
    if getattr(self, "_ctx", None) is not None or type(self) not in _dense_classes():
        raise RuntimeError(f"deepcopy: a {type(self).__name__} holds no data to copy")
    with no_grad():
        key = ("llgrad.storage", id(self._storage))
        st = memo.get(key)
        if st is None:
            st = allocate(self._storage.nbytes)
            if self._storage.nbytes:
                st.buffer[...] = self._storage.buffer
            memo[key] = st
            memo.setdefault("llgrad.keep", []).append(self._storage)  # keep ids unique
        new = Tensor._make(st, self._offset, self._shape, self._strides, self._dtype)
        if type(self) is not Tensor:
            new.__class__ = type(self)
        new._requires_grad = self._requires_grad
        memo[id(self)] = new
        if self._grad is not None:
            new._grad = _copy.deepcopy(self._grad, memo)
        for k, v in self.__dict__.items():
            if k.startswith("_") and k in ("_accumulator", "_fw_tangent", "_post_accumulate_hooks"):
                continue
            new.__dict__[k] = _copy.deepcopy(v, memo)
    return new


def __reduce_ex__(self: Tensor, protocol: int) -> Any:
    """Pickling: the values (as a compact copy), dtype, shape, requires_grad and Python
    attributes; the rebuilt tensor is a new leaf (no `.grad`, no history), as PyTorch's."""
    if type(self).__reduce__ is not Tensor.__reduce__:  # a subclass's own (Parameter)
        return type(self).__reduce__(self)
    if getattr(self, "_ctx", None) is not None or type(self) not in _dense_classes():
        raise RuntimeError(f"pickle: a {type(self).__name__} holds no data to save")
    state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
    values = self.detach()._numpy_view().copy()
    return (_rebuild_tensor, (values, self._dtype.name, self._requires_grad, type(self), state))


def _rebuild_tensor(
    values: np.ndarray,
    dtype_name: str,
    requires_grad: bool,
    cls: type = Tensor,
    state: dict | None = None,
) -> Tensor:
    d = dt.from_name(dtype_name)
    t = Tensor._empty(tuple(values.shape), d)
    if values.size:
        t._numpy_view()[...] = values
    if cls is not Tensor:
        t.__class__ = cls
    t._requires_grad = bool(requires_grad)
    if state:
        t.__dict__.update(state)
    return t


def __array_wrap__(
    self: Tensor, array: np.ndarray, context: Any = None, return_scalar: bool = False
) -> Any:
    """NumPy's hook for a result computed on this tensor's values: the result as a tensor
    sharing its memory when it can (a NumPy scalar stays one when NumPy asks for it)."""
    if return_scalar:
        return array[()]
    if _shareable(array):
        return Tensor._from_numpy(array)

    return tensor(array)


def _layout(self: Tensor) -> layout:
    return strided


def _false(self: Tensor) -> bool:
    return False


def _output_nr(self: Tensor) -> int:
    return self._output_nr


def _name(self: Tensor) -> None:
    return None


METHODS: dict[str, Callable[..., Any]] = {
    "new_empty": new_empty,
    "new_full": new_full,
    "new_empty_strided": new_empty_strided,
    "itemsize": property(_itemsize),
    "nbytes": property(_nbytes),
    "ndimension": ndimension,
    "is_signed": _is_signed,
    "is_neg": is_neg,
    "is_nonzero": _is_nonzero,
    "is_same_size": _is_same_size,
    "is_set_to": is_set_to,
    "is_shared": is_shared,
    "is_pinned": is_pinned,
    "is_sparse": property(_false),
    "is_sparse_csr": property(_false),
    "is_quantized": property(_false),
    "is_mkldnn": property(_false),
    "is_nested": property(_false),
    "output_nr": property(_output_nr),
    "name": property(_name),
    "layout": property(_layout),
    "apply_": apply_,
    "map_": map_,
    "map2_": map2_,
    "dim_order": dim_order,
    "resize_": resize_,
    "resize_as_": resize_as_,
    "untyped_storage": _untyped_storage,
    "storage": _storage,
    "contiguous": _contiguous,
    "clone": _clone,
    "is_contiguous": _is_contiguous,
    "to": _to,
    "where": _where,
    "__int__": __int__,
    "__float__": __float__,
    "__complex__": __complex__,
    "__bool__": __bool__,
    "__index__": __index__,
    "__format__": __format__,
    "__iter__": __iter__,
    "__reversed__": __reversed__,
    "__contains__": __contains__,
    "__deepcopy__": __deepcopy__,
    "__reduce_ex__": __reduce_ex__,
    "__array_wrap__": __array_wrap__,
    "__array_priority__": 1000,
    "resolve_neg": resolve_neg,
    "const_data_ptr": _const_data_ptr,
    "pin_memory": _pin_memory,
}
for _name, _d in [
    ("float", dt.float32),
    ("double", dt.float64),
    ("half", dt.float16),
    ("bfloat16", dt.bfloat16),
    ("long", dt.int64),
    ("int", dt.int32),
    ("bool", dt.bool_),
    ("short", dt.int16),
    ("char", dt.int8),
    ("byte", dt.uint8),
    ("cfloat", dt.complex64),
    ("cdouble", dt.complex128),
]:
    METHODS[_name] = _cast_with_format(_d)


def _on_devices() -> None:
    """Creation functions here accept device="cuda" (see `_errors.device_aware`)."""

    g = globals()
    for name in ("empty_strided", "scalar_tensor", "logspace"):
        g[name] = device_aware(g[name])


_on_devices()
