"""The eager `Tensor`: a strided view of a `Storage`, plus autograd state.

Memory is owned by a `Storage` (aligned, addressed once); a tensor is (storage, element
offset, shape, element strides, dtype). Views share the storage and its version counter.
All arithmetic runs on generated kernels; NumPy only allocates and converts.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Iterator

import numpy as np

from ._printing import format_tensor
from ._source import define
from .device import CPU, device_type
from .dispatch.grad_mode import _state as _grad_state
from .ir import dtypes as dt
from .ir.dtypes import DType
from .ir.promotion import register_tensor_class
from .ir.types import normalize_axis
from .runtime.storage import (
    BLOCK_MAX,
    SLAB_MAX,
    Storage,
    allocate,
    allocate_block_source,
    allocate_small,
    allocate_small_source,
    borrow,
)
from .schedule.layout import contiguous_strides, is_contiguous
from ._hooks import RemovableHandle
from .dispatch import ops
from .specialize.output import empty_lines, maker_source
from .runtime.dlpack import export_bfloat16


class Size(tuple):
    """`tensor.shape`: a tuple that prints like `llgrad.Size([2, 3])`."""

    def __repr__(self) -> str:
        return f"llgrad.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


_new = object.__new__
# `Tensor.item`'s read of one element by address: a ctypes scalar where one has the
# dtype's layout (its `value` is the Python number), else the bytes unpacked (`_ITEM`;
# the other dtypes go through NumPy)
_ITEM_SCALARS: dict[Any, Any] = {
    dt.float32: ctypes.c_float,
    dt.float64: ctypes.c_double,
    dt.int64: ctypes.c_int64,
    dt.int32: ctypes.c_int32,
    dt.int16: ctypes.c_int16,
    dt.int8: ctypes.c_int8,
    dt.uint8: ctypes.c_uint8,
}
_ITEM = {
    d: struct.Struct("=" + code).unpack
    for d, code in (
        (dt.float16, "e"),
        (dt.bool_, "?"),
    )
}
_string_at = ctypes.string_at
_row_major: dict[tuple, tuple] = {}


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """`contiguous_strides(shape)`, remembered per shape (a program makes few shapes)."""
    try:
        strides = _row_major.get(shape)
    except TypeError:  # a list: not a key
        return contiguous_strides(shape)
    if strides is None:
        strides = contiguous_strides(shape)
        if len(_row_major) < 4096 and all(s.__class__ is int for s in strides):
            _row_major[shape] = strides
    return strides


# (shape, dtype) -> how often `recurring_maker` was asked for that row-major layout, or
# its maker (`Tensor._empty_maker`) from the `_MAKER_AFTER`-th request on
_recurring: dict[tuple, Any] = {}
_MAKER_AFTER = 4


def recurring_maker(shape: tuple[int, ...], dtype: dt.DType) -> Any:
    """The generated function making a new row-major tensor of `shape` and `dtype`
    (`Tensor._empty_maker`: cheaper to call than `Tensor._empty`) once that layout has
    been asked for `_MAKER_AFTER` times, else None (the caller uses `Tensor._empty`):
    generating one costs as much as hundreds of allocations, so only layouts that recur
    get one. Up to 256 layouts are tracked at a time."""
    key = (shape, dtype)
    got = _recurring.get(key, 0)
    if got.__class__ is int:
        if got < _MAKER_AFTER:
            if not got and len(_recurring) >= 256:
                _recurring.clear()
            _recurring[key] = got + 1
            return None
        got = _recurring[key] = Tensor._empty_maker(shape, dtype, _row_major_strides(shape))
    return got


# layout key (`Tensor._lkey`) -> (NumPy dtype, byte strides or None when row-major, item
# size or 0 for no elements), what `Tensor._numpy_view` needs besides the memory
_numpy_layouts: dict[tuple, tuple] = {}


def _numpy_layout(key: tuple) -> tuple:
    dtype, shape, strides = key
    item = dtype.itemsize
    byte_strides = (
        None if strides == contiguous_strides(shape) else tuple(s * item for s in strides)
    )
    layout = (dtype.np, byte_strides, 0 if 0 in shape else item)
    if len(_numpy_layouts) < 4096:
        _numpy_layouts[key] = layout
    return layout


# (CudaStorage, {host class: its CUDA class}) once `eager.cuda` is imported: `_make` over
# device memory makes a CUDA tensor (a Tensor a CudaTensor, a Parameter a CudaParameter)
_DEVICE_STORAGE: list[Any] = [(), {}]


class Tensor:
    __slots__ = (
        "_storage",
        "_offset",
        "_shape",
        "_strides",
        "_dtype",
        "_ptr",
        "_lkey",
        "_requires_grad",
        "_grad",
        "grad_fn",
        "_retains_grad",
        "_hooks",
        "_base",
        "_output_nr",
        "_inference",
        "__weakref__",
        "__dict__",
    )

    def __new__(cls, *args: Any, **kwargs: Any) -> "Tensor":
        """PyTorch's legacy constructor: `Tensor([1, 2])` (data in the default dtype),
        `Tensor(2, 3)` (uninitialized, of that size), `Tensor()` (empty). Internally
        tensors are made with `_make`, which never comes here."""
        return ops.F.legacy.legacy_new(None, args, kwargs)

    # -- construction (internal) ----------------------------------------------------------
    @classmethod
    def _make(
        cls,
        storage: Storage,
        offset: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: DType,
        base: "Tensor | None" = None,
    ) -> "Tensor":
        device = storage.__class__ is _DEVICE_STORAGE[0]
        if device:  # device memory: a CUDA tensor
            cls = _DEVICE_STORAGE[1].get(cls, cls)
        t = _new(cls)
        t._storage = storage
        t._offset = offset
        t._shape = shape
        t._strides = strides
        t._dtype = dtype
        # (device memory has no host address: None, so that no CPU kernel can take it)
        t._ptr = None if device else storage.ptr + offset * dtype.itemsize
        t._lkey = (dtype, shape, strides)  # what selects a cached launch plan
        t._init_state(base)
        if storage.inference:  # memory made under inference_mode: every view of it
            t._inference = True  # is an inference tensor, as in PyTorch
        return t

    def _init_state(self, base: "Tensor | None" = None) -> None:
        """The autograd and bookkeeping fields every tensor starts with."""
        self._requires_grad = False
        self._grad = None
        self.grad_fn = None
        self._retains_grad = False
        self._hooks = None
        self._base = base
        self._output_nr = 0
        self._inference = False

    @classmethod
    def _empty(
        cls, shape: tuple[int, ...], dtype: DType, strides: tuple[int, ...] | None = None
    ) -> "Tensor":
        """A new contiguous tensor (pass `strides` when they are already known)."""
        n = dtype.itemsize
        for s in shape:
            n *= s
        storage = allocate_small(n) if n <= SLAB_MAX else allocate(n)
        if strides is None:
            strides = _row_major_strides(shape)
        if cls is not Tensor or _grad_state.inference:
            if _grad_state.inference:
                storage.inference = True
            return cls._make(storage, 0, shape, strides, dtype)
        t = _new(Tensor)  # `_make` and `_init_state` written out (every new tensor)
        t._storage = storage
        t._offset = 0
        t._shape = shape
        t._strides = strides
        t._dtype = dtype
        t._ptr = storage.ptr
        t._lkey = (dtype, shape, strides)
        t._requires_grad = False
        t._grad = None
        t.grad_fn = None
        t._retains_grad = False
        t._hooks = None
        t._base = None
        t._output_nr = 0
        t._inference = False
        return t

    @classmethod
    def _empty_maker(cls, shape: tuple[int, ...], dtype: DType, strides: tuple[int, ...]) -> Any:
        """A function of no arguments doing `Tensor._empty(shape, dtype, strides)`, for
        generated code that makes outputs of one layout over and over (eager direct
        launches): `_empty_source`'s lines as a function."""
        if cls is not Tensor:
            return lambda: cls._empty(shape, dtype, strides)
        lines, consts = Tensor._empty_source(shape, dtype, strides, "t")
        source = maker_source(lines, "t")
        return define(source, f"<llgrad output {dtype.name}{list(shape)}>", consts, "make")

    @staticmethod
    def _empty_source(
        shape: tuple[int, ...], dtype: DType, strides: tuple[int, ...], name: str, tag: str = ""
    ) -> tuple[list[str], dict[str, Any]]:
        """Source lines binding `name` to `Tensor._empty(shape, dtype, strides)`, and the
        constants they read: the allocation (a tiny output's slab cut, a small one's block,
        inline) and the tensor's fields written out with the layout as constants (fresh
        fields as `_init_state` sets them). They also bind `st`, `ptr`, `state`, `raw` and
        `address`. `tag` ends the names of the layout's constants, so one function can
        make several outputs (each with its own tag)."""
        n = dtype.itemsize
        for s in shape:
            n *= s
        if n <= SLAB_MAX:
            lines, consts = allocate_small_source(n)
        elif n <= BLOCK_MAX:
            lines, consts = allocate_block_source(n, tag=tag)
        else:
            lines = [f"st = allocate(N{tag})", "ptr = st.ptr"]
            consts = {"allocate": allocate, f"N{tag}": n}
        fresh = _new(Tensor)
        fresh._init_state(None)
        state = [
            (k, getattr(fresh, k))
            for k in Tensor.__slots__
            if hasattr(fresh, k) and not k.startswith("__")
        ]
        consts.update(
            {
                "new": _new,
                "Tensor": Tensor,
                "grad_state": _grad_state,
                f"SHAPE{tag}": shape,
                f"STRIDES{tag}": strides,
                f"DTYPE{tag}": dtype,
                f"LKEY{tag}": (dtype, shape, strides),
            }
        )
        return lines + empty_lines(name, tag, state), consts

    @classmethod
    def _from_numpy(cls, arr: np.ndarray, dtype: DType | None = None) -> "Tensor":
        """Share `arr`'s memory (no copy)."""
        d = dtype or dt.from_numpy(arr.dtype)
        storage, _ = borrow(arr)
        strides = tuple(s // arr.itemsize for s in arr.strides)
        return cls._make(storage, 0, tuple(arr.shape), strides, d)

    # -- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return Size(self._shape)

        return self._shape[normalize_axis(dim, len(self._shape), "size")]

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        n = 1
        for s in self._shape:
            n *= s
        return n

    def nelement(self) -> int:
        return self.numel()

    def element_size(self) -> int:
        return self._dtype.itemsize

    def stride(self, dim: int | None = None) -> Any:
        if dim is None:
            return self._strides

        return self._strides[normalize_axis(dim, len(self._shape), "stride")]

    def storage_offset(self) -> int:
        return self._offset

    def is_contiguous(self) -> bool:
        return is_contiguous(self._shape, self._strides)

    @property
    def is_floating_point_(self) -> bool:
        return self._dtype.is_floating_point

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    def is_inference(self) -> bool:
        """Whether this tensor was made under `inference_mode` (PyTorch's method)."""
        return self._inference

    @property
    def device(self) -> Any:
        """Always `device(type='cpu')`: llgrad's tensors live in host memory."""
        return CPU

    @property
    def is_cpu(self) -> bool:
        return True

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_meta(self) -> bool:
        return False

    def get_device(self) -> int:
        """-1, PyTorch's answer for a CPU tensor."""
        return -1

    def cpu(self, memory_format: Any = None) -> "Tensor":
        return self

    def cuda(self, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> "Tensor":
        """A copy in CUDA device memory (`device` None, 0, "cuda" or "cuda:0"); raises
        when no GPU (and no grid emulator, `LLGRAD_CUDA_EMULATE=1`) is available."""
        device_type(
            "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device),
            "cuda()",
        )
        from .eager.cuda import upload  # circle: eager.cuda -> here

        return upload(self, non_blocking)

    @property
    def _version(self) -> int:
        return self._storage.version

    def data_ptr(self) -> int:
        return self._ptr

    # -- autograd state -------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. "
                    "If you want to use a computed variable in a subgraph that "
                    "doesn't require differentiation use var_no_grad = "
                    "var.detach()."
                )
            return self
        if requires_grad and not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients"
            )
        if requires_grad and self._inference and not _grad_state.inference:
            raise RuntimeError(
                "Setting requires_grad=True on inference tensor outside "
                "InferenceMode is not allowed."
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> "Tensor | None":
        if self.grad_fn is not None and not self._retains_grad and self._grad is None:
            import warnings

            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being "
                "accessed. Its .grad attribute won't be populated during "
                "autograd.backward(). If you indeed want the .grad field to be "
                "populated for a non-leaf Tensor, use .retain_grad() on the non-leaf "
                "Tensor.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got "
                    f"grad of type {type(value).__name__}"
                )
            if value._shape != self._shape:
                raise RuntimeError(
                    f"assigned grad has data of a different size: "
                    f"{list(value._shape)} vs the tensor's {list(self._shape)}"
                )
            if value._dtype is not self._dtype:
                raise RuntimeError(
                    f"assigned grad has data of a different type: "
                    f"{value._dtype.name} vs {self._dtype.name}"
                )
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def retain_grad(self) -> None:
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        import weakref

        self.grad_fn.metadata.setdefault("retain_grad", {})[self._output_nr] = weakref.ref(self)
        self._retains_grad = True

    def register_hook(self, hook: Any) -> Any:
        """Call `hook(grad)` when this tensor's gradient is computed; it may return a new one."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            table = self.grad_fn.metadata.setdefault("tensor_hooks", {})
            store = table.setdefault(self._output_nr, {})
        else:
            if self._hooks is None:
                self._hooks = {}
            store = self._hooks
        handle = RemovableHandle(store)
        store[handle.id] = hook
        return handle

    def register_post_accumulate_grad_hook(self, hook: Any) -> Any:
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        store = self.__dict__.setdefault("_post_accumulate_hooks", {})
        handle = RemovableHandle(store)
        store[handle.id] = hook
        return handle

    def backward(
        self,
        gradient: "Tensor | None" = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        from .autograd.api import backward  # circle: autograd.api -> here

        backward(
            self,
            gradient if gradient is None else [gradient],
            retain_graph=retain_graph,
            create_graph=create_graph,
            inputs=inputs,
        )

    def _alias(self) -> "Tensor":
        """Another tensor object over the same values, with no autograd history."""
        return Tensor._make(
            self._storage, self._offset, self._shape, self._strides, self._dtype, base=self._base
        )

    def detach(self) -> "Tensor":
        return self._alias()

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self) -> "Tensor":
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        here, there = self._storage.__class__, value._storage.__class__
        if here is not there and _DEVICE_STORAGE[0] in (here, there):
            # memory moving to or from the device: the object changes class with it
            # (a Parameter stays the same object, as `module.cuda()` needs)
            from .eager.cuda import moved_class  # circle: eager.cuda -> here

            self.__class__ = moved_class(self.__class__, there is _DEVICE_STORAGE[0])
        self._storage, self._offset = value._storage, value._offset
        self._shape, self._strides, self._dtype = value._shape, value._strides, value._dtype
        self._ptr = value._ptr
        self._lkey = value._lkey

    # -- conversions ----------------------------------------------------------------------
    def _numpy_view(self) -> np.ndarray:
        """A NumPy array over this tensor's memory (bfloat16 shows as uint16 bits)."""
        layout = _numpy_layouts.get(self._lkey)
        if layout is None:
            layout = _numpy_layout(self._lkey)
        np_dtype, byte_strides, item = layout
        if item == 0:  # no elements: the offset may lie past the buffer
            return np.ndarray(self._shape, np_dtype, self._storage.buffer[:0])
        # (positional arguments, and no strides for a row-major layout: NumPy parses
        # these several times faster than keywords, on every host op's operands)
        if byte_strides is None:
            return np.ndarray(self._shape, np_dtype, self._storage.buffer, self._offset * item)
        return np.ndarray(
            self._shape, np_dtype, self._storage.buffer, self._offset * item, byte_strides
        )

    def _values(self) -> np.ndarray:
        """Values as a NumPy array (bfloat16 widened to float32); may share memory."""
        a = self._numpy_view()
        if self._dtype is dt.bfloat16:
            return (a.astype(np.uint32) << 16).view(np.float32)
        return a

    def numpy(self, *, force: bool = False) -> np.ndarray:
        if self._requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. "
                "Use tensor.detach().numpy() instead."
            )
        if self._dtype is dt.bfloat16:
            raise TypeError(
                "Got unsupported ScalarType BFloat16 (NumPy has no bfloat16; "
                "convert first, e.g. t.float().numpy())"
            )
        return self._numpy_view()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """NumPy 2's protocol: `copy=True` always copies, `copy=False` never does (and
        raises when a conversion needs one), `copy=None` shares memory when it can.
        A tensor that requires grad raises, as `numpy()` and PyTorch do (a shared array
        would let writes bypass autograd); use `t.detach()`."""
        if self._requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. "
                "Use tensor.detach().numpy() instead."
            )
        a = self._values()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError(
                    f"Unable to avoid copy while creating an array as requested "
                    f"(dtype {self._dtype.name} to {np.dtype(dtype)})"
                )
            return a.astype(dtype)
        if copy:
            return np.array(a, copy=True)
        if copy is False and not np.may_share_memory(a, self._storage.buffer):
            raise ValueError(
                f"Unable to avoid copy while creating an array as requested "
                f"(a {self._dtype.name} tensor has no NumPy view)"
            )
        return a

    def item(self) -> Any:
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to Scalar"
            )
        if self._ptr.__class__ is int:  # read by address
            scalar = _ITEM_SCALARS.get(self._dtype)
            if scalar is not None:
                return scalar.from_address(self._ptr).value
            unpack = _ITEM.get(self._dtype)
            if unpack is not None:
                return unpack(_string_at(self._ptr, self._dtype.itemsize))[0]
        return self._values().reshape(()).item()

    def tolist(self) -> Any:
        return self._values().tolist()

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        if self._dtype is dt.bfloat16:
            return export_bfloat16(self._numpy_view(), *args, **kwargs)
        return self._numpy_view().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self) -> Iterator["Tensor"]:
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._shape[0]):
            yield self[i]

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with more than one value is "
                f"ambiguous (shape {list(self._shape)})"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        grad_fn = None if self.grad_fn is None else type(self.grad_fn).__name__
        return format_tensor(
            self._values(),
            dtype_name=self._dtype.name,
            requires_grad=self._requires_grad,
            grad_fn_name=grad_fn,
        )

    __str__ = __repr__

    def __reduce__(self):
        return (_rebuild, (self.detach()._values().copy(), self._dtype.name, self._requires_grad))


# Classes whose instances are plain tensors with data (Tensor, nn.Parameter): generated
# call code (a compiled graph's runner, a compiled function's specialized call) accepts an
# argument by checking that its class is one of these, instead of an isinstance walk.
# A subclass joins by adding itself; one that overrides metadata or holds no data must not.
DENSE_CLASSES: set[type] = {Tensor}
register_tensor_class(Tensor)  # tensors promote as tensors, numbers as numbers


class SymbolicTensor(Tensor):
    """A tensor without values of its own (a tracer, a vmap batch): every way of reading
    values goes through `_no_data`, which subclasses turn into their own error."""

    __slots__ = ()

    def _no_data(self, what: str) -> Any:
        raise AssertionError("subclass responsibility")

    def item(self) -> Any:
        return self._no_data("item()")

    def tolist(self) -> Any:
        return self._no_data("tolist()")

    def numpy(self, *, force: bool = False) -> Any:
        return self._no_data("numpy()")

    def _values(self) -> Any:
        return self._no_data("reading values")

    def _numpy_view(self) -> Any:
        return self._no_data("reading values")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self._no_data("conversion to a NumPy array")

    def __bool__(self) -> bool:
        return self._no_data("bool()")

    def __float__(self) -> float:
        return self._no_data("float()")

    def __int__(self) -> int:
        return self._no_data("int()")

    def __index__(self) -> int:
        return self._no_data("use as an index")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._no_data("__dlpack__")

    def data_ptr(self) -> int:
        return self._no_data("data_ptr()")


def _rebuild(values: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    return ops.F.tensor(values, dtype=dt.from_name(dtype_name), requires_grad=requires_grad)
