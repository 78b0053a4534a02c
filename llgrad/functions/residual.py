"""The last names of PyTorch's top-level and Tensor API that no family held.

`addcmul addcdiv` (and their in-place methods), `adjoint vander fill detach zero_`, the
torch-level spellings of in-place methods (`lg.fill_(x, v)`, `lg.as_strided_`, ...), build
facts (`has_lapack has_mkl has_openmp has_spectral`), `to_dlpack`, `FatalError`, and the
Tensor methods `fill_diagonal_ new resize resize_as share_memory_ hardshrink prelu
is_distributed`.
"""

from __future__ import annotations

import mmap
import warnings
from typing import Any, Sequence

import numpy as np

from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import is_grad_enabled
from ..ir import dtypes as dt
from ..ir.types import broadcast_shapes
from ..tensor import Tensor
from ..tracer.context import current as _trace_current, user_location
from ..tracer.tensor import GraphBreak
from . import elementwise as E, shape as _shape
from ._errors import names_op
from .creation import checked_scalar, fill_dense, ones, tensor
from .inplace import _rewrite_inplace, check_inplace, make_inplace_methods
from .layout import as_strided
from .legacy import legacy_new
from .numpy_interop import plain_number
from .shape import (
    cat,
    clone,
    contiguous,
    expand,
    flip,
    reshape,
    size_arg,
    split,
    transpose,
    unsqueeze,
)
from .sorting import cumprod

__all__: list[str] = [
    "addcmul",
    "addcdiv",
    "adjoint",
    "as_strided_",
    "conj_physical_",
    "detach",
    "detach_",
    "fill",
    "fill_",
    "zero_",
    "vander",
    "is_distributed",
    "to_dlpack",
    "FatalError",
    "has_lapack",
    "has_mkl",
    "has_openmp",
    "has_spectral",
]

# --------------------------------------------------------------------------------------
# build facts (PyTorch's `torch.has_*`)
# --------------------------------------------------------------------------------------

has_lapack: bool = True
"""LAPACK is available: llgrad's decompositions call SciPy's LAPACK."""
has_spectral: bool = True
"""FFTs are available (`lg.fft`, `stft`, `istft`)."""
has_openmp: bool = False
"""False: llgrad's kernels split loops on its own thread pool, not OpenMP."""


def _mkl_loaded() -> bool:
    try:
        from ..backends import mkl  # MKL is optional: asked for only here

        return bool(mkl.is_available())
    except Exception:  # no MKL backend module or no library
        return False


has_mkl: bool = _mkl_loaded()
"""Whether Intel MKL's gemm can be used (the `llgrad[mkl]` extra is installed)."""


class FatalError(Exception):
    """PyTorch's `torch.FatalError`: an unrecoverable internal error. llgrad raises it
    nowhere; it exists so that `except lg.FatalError` in ported code resolves."""


def _tensor(op: str, x: Any, name: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    return x


# --------------------------------------------------------------------------------------
# addcmul / addcdiv
# --------------------------------------------------------------------------------------

_ADDCDIV_INT = (
    "Integer division with addcdiv is no longer supported, and in a future "
    "release addcdiv will perform a true division of tensor1 and tensor2. The "
    "historic addcdiv behavior can be implemented as (input + value * "
    "trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input "
    "+ value * tensor1 / tensor2) for float inputs. The future addcdiv behavior "
    "is just the latter implementation: (input + value * tensor1 / tensor2), for "
    "all dtypes."
)


def _addc(
    op: str, input: Tensor, tensor1: Tensor, tensor2: Tensor, value: Any, divide: bool
) -> Tensor:
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _tensor(op, t, name)
    if divide and not any(
        t._dtype.is_floating_point or t._dtype.is_complex for t in (tensor1, tensor2)
    ):
        raise RuntimeError(_ADDCDIV_INT)
    shapes = [t._shape for t in (input, tensor1, tensor2)]
    try:
        broadcast_shapes(*shapes, op=op)
    except ValueError as e:  # PyTorch's type for operands that do not broadcast
        raise RuntimeError(
            f"{op}: the size of the operands must match at non-singleton dimensions ({str(e)})"
        ) from None
    dims = [t._dtype for t in (input, tensor1, tensor2) if t.ndim]
    zero = [t._dtype for t in (input, tensor1, tensor2) if not t.ndim]
    d = dt.result_type(dims, zero, [])
    if d is dt.bool_:
        raise NotImplementedError(f"\"{op}_cpu_out\" not implemented for 'Bool'")
    if isinstance(value, Tensor):
        value = value.item()
    value = checked_scalar(plain_number(value), d, op)
    a, b, c = (t if t._dtype is d else t.to(d) for t in (input, tensor1, tensor2))
    # PyTorch's order of evaluation: input + ((value * tensor1) op tensor2)
    scaled = E.mul(b, value)
    term = E.div(scaled, c) if divide else E.mul(scaled, c)
    return E.add(a, term)


@names_op("addcmul")
@composite_function
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """input + value * tensor1 * tensor2, elementwise with broadcasting.

    Args: input, tensor1, tensor2 (tensors; promoted together), value (a number, converted
    to the result dtype: 0.5 becomes 0 for integer tensors, as in PyTorch).
    Differs from torch: the gradient node is the composition's (`AddBackward0`), not
    `AddcmulBackward0`."""
    return _addc("addcmul", input, tensor1, tensor2, value, False)


@names_op("addcdiv")
@composite_function
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """input + value * tensor1 / tensor2, elementwise with broadcasting (true division;
    integer tensor1 and tensor2 together raise, as in PyTorch).

    Args: input, tensor1, tensor2 (tensors), value (a number).
    Differs from torch: the gradient node is the composition's (`AddBackward0`)."""
    return _addc("addcdiv", input, tensor1, tensor2, value, True)


def out_dtype_operands(op: str, out_dtype: Any, *tensors: Tensor) -> tuple[Tensor, ...]:
    """The operands of a matrix product with `out_dtype=` (PyTorch 2.13): the product's own
    dtype, or float32 for float16/bfloat16 matrices, which are then multiplied in float32
    (the accumulation is not rounded back). Anything else raises, as PyTorch."""
    mats = tensors[-2:]
    for t in tensors:
        _tensor(op, t)
    d = mats[0]._dtype
    if out_dtype is d:
        return tensors
    if out_dtype is dt.float32 and d in (dt.float16, dt.bfloat16):
        return tuple(t if t._dtype is dt.float32 else t.to(dt.float32) for t in tensors)
    raise RuntimeError(
        f"{op}: out_dtype must be the same as input dtype or fp32 for fp16/bf16 "
        f"inputs (inputs {d.name}, out_dtype {getattr(out_dtype, 'name', out_dtype)})"
    )


# --------------------------------------------------------------------------------------
# small functions and torch-level spellings of in-place methods
# --------------------------------------------------------------------------------------


@names_op("adjoint")
def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dimensions (a view for real tensors; the
    conjugate is computed at once for complex ones, where PyTorch sets a lazy bit)."""
    _tensor("adjoint", input)
    if input.ndim < 2:
        raise RuntimeError(
            f"tensor.adjoint() is only supported on matrices or batches of "
            f"matrices. Got {input.ndim}-D tensor."
        )
    t = transpose(input, -2, -1)
    return E.conj(t) if input._dtype.is_complex else t


def detach(input: Tensor) -> Tensor:
    """A new tensor over `input`'s memory with no autograd history (`input.detach()`)."""
    return _tensor("detach", input).detach()


def detach_(input: Tensor) -> Tensor:
    """Cut `input` from its autograd history in place and return it (`input.detach_()`)."""
    return _tensor("detach_", input).detach_()


def fill_(input: Tensor, value: Any) -> Tensor:
    """Write `value` (a number or a 0-d tensor) into every element of `input`, in place."""
    return _tensor("fill_", input).fill_(value)


def zero_(input: Tensor) -> Tensor:
    """Write zeros into every element of `input`, in place."""
    return _tensor("zero_", input).zero_()


@names_op("fill")
@composite_function
def _fill(input: Tensor, value: Any) -> Tensor:
    """A new tensor of `input`'s shape and dtype holding `value` (a number, or a 0-d tensor
    whose gradient is the sum of the result's). `input` gets a zero gradient."""
    _tensor("fill", input)

    return clone(input).fill_(value)


def fill(input: Tensor, value: Any) -> Tensor:
    """A new tensor of `input`'s shape and dtype holding `value` (a number, or a 0-d tensor
    whose gradient is the sum of the result's). `input` gets a zero gradient."""
    c = value.__class__
    if (
        input.__class__ is Tensor
        and (c is float or c is int or c is bool)
        and _shape._unrecorded(input)
        and _trace_current() is None
    ):
        # nothing to record: the new tensor and its write (a value that does not
        # convert takes the general path, which raises the error)
        try:
            value = checked_scalar(value, input._dtype, "fill_")
        except (RuntimeError, OverflowError, TypeError):
            return _fill(input, value)
        return fill_dense(Tensor._empty(input._shape, input._dtype), value)
    return _fill(input, value)


@names_op("as_strided_")
def as_strided_(
    input: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> Tensor:
    """Make `input` itself the view `as_strided(input, size, stride, storage_offset)` of its
    memory (its sizes, strides and offset change in place); returns `input`. A leaf that
    requires grad refuses, as in PyTorch; a non-leaf takes the view's gradient node."""
    _tensor("as_strided_", input)
    if input._requires_grad and input.grad_fn is None and is_grad_enabled():
        check_inplace(input)
    view = as_strided(input, size, stride, storage_offset)
    input._offset = view._offset
    input._shape = view._shape
    input._strides = view._strides
    input._ptr = view._ptr
    input._lkey = view._lkey
    if view.grad_fn is not None:
        input.grad_fn = view.grad_fn
        input._output_nr = view._output_nr
        input._base = view._base
    return input


def conj_physical_(input: Tensor) -> Tensor:
    """Replace a complex tensor's values by their conjugates, in place (real tensors are
    left as they are); returns `input`."""
    _tensor("conj_physical_", input)
    return _conj_physical_(input)


@names_op("vander")
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-D `x`: column j is x ** (N - 1 - j) (or x ** j when
    `increasing`); N defaults to len(x). Integer and bool inputs give int64, as PyTorch.
    Differentiable (built from a cumulative product)."""
    _tensor("vander", x, "x")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._shape[0]
    N = n if N is None else N
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        x = x.to(dt.int64)
    col = ones((n, 1), dtype=x._dtype)
    if N <= 1:
        out = col[:, :N]
    else:
        reps = expand(unsqueeze(x, 1), (n, N - 1))
        out = cumprod(cat([col, reps], 1), 1)
    return out if increasing else flip(out, (1,))


def is_distributed(input: Tensor) -> bool:
    """False: llgrad tensors live in one process (PyTorch answers False for every dense
    tensor too)."""
    _tensor("is_distributed", input)
    return False


def to_dlpack(tensor: Tensor) -> Any:
    """A DLPack capsule over `tensor`'s memory (no copy), for another library's
    `from_dlpack`."""
    return _tensor("to_dlpack", tensor, "tensor").__dlpack__()


# --------------------------------------------------------------------------------------
# Tensor methods
# --------------------------------------------------------------------------------------


def _conj_physical_(self: Tensor) -> Tensor:
    if not self._dtype.is_complex:
        check_inplace(self)
        return self
    return names_op("conj_physical_")(_rewrite_inplace("conj_physical", E.conj_physical))(self)


def _addcmul_(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """In place: self += value * tensor1 * tensor2 (the result keeps self's dtype and
    shape)."""
    return names_op("addcmul_")(
        _rewrite_inplace("addcmul", lambda x, a, b: addcmul(x, a, b, value=value))
    )(self, tensor1, tensor2)


def _addcdiv_(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """In place: self += value * tensor1 / tensor2."""
    return names_op("addcdiv_")(
        _rewrite_inplace("addcdiv", lambda x, a, b: addcdiv(x, a, b, value=value))
    )(self, tensor1, tensor2)


@names_op("fill_diagonal_")
def fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Write `fill_value` on the main diagonal (all indices equal) of a tensor of at least
    2 dimensions, in place. A tall matrix's diagonal restarts every cols+1 rows when
    `wrap`. Every dimension of a >2-D tensor must have the same length."""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = self._shape
    if self.ndim > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    value = checked_scalar(plain_number(fill_value), self._dtype, "fill_diagonal_")
    numel = int(np.prod(shape))
    step = sum(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))
    limit = numel
    if self.ndim == 2 and not wrap and shape[0] > shape[1]:
        limit = shape[1] * shape[1]
    mask = np.zeros(numel, dtype=bool)
    if numel:
        mask[np.arange(0, limit, step)] = True
    return self.masked_fill_(tensor(mask.reshape(shape)), value)


def _new(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """The legacy constructor in this tensor's dtype: `x.new()` (empty), `x.new(2, 3)` or
    `x.new(size)` (uninitialized), `x.new(data)` (a copy), `x.new(tensor)` (that tensor,
    which must have x's dtype); `device=` only."""
    return legacy_new(self._dtype, args, kwargs, "new")


def _resize(self: Tensor, *sizes: Any) -> Tensor:
    """Deprecated (it warns, as PyTorch): a tensor of `sizes` holding this tensor's values
    in row-major order; the element count must not change (autograd flows through)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    shape = size_arg(sizes, "resize")
    count = int(np.prod(shape)) if shape else 1
    if count != self.numel():
        raise RuntimeError(
            f"requested resize to {'x'.join(map(str, shape))} ({count} elements in total), "
            f"but the given tensor has a size of {'x'.join(map(str, self._shape))} "
            f"({self.numel()} elements). autograd's resize can only change the shape of a "
            f"given tensor, while preserving the number of elements. "
        )
    return reshape(contiguous(self), shape)


def _resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """Deprecated (it warns): `self.resize(tensor.shape)`."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _resize(self, tuple(_tensor("resize_as", tensor, "tensor")._shape))


def _share_memory_(self: Tensor) -> Tensor:
    """Move this tensor's memory into an anonymous shared mapping (`mmap` with MAP_SHARED),
    so that processes forked afterwards see each other's writes to it; a no-op when it is
    shared already. The storage object itself moves, so every view of it follows (as in
    PyTorch). Its cost: the values are copied once and the live tensors are searched for
    the views of this memory (`gc.get_referrers`)."""
    import gc

    if getattr(self, "_ctx", None) is not None:
        raise GraphBreak(
            "share_memory_() (it moves a tensor's memory)",
            user_location(),
            advice="this signature runs eagerly",
        )
    st = self._storage
    if isinstance(st.owner, mmap.mmap):
        return self
    nbytes = st.nbytes
    shared = mmap.mmap(-1, nbytes + 64, flags=mmap.MAP_SHARED)
    raw = np.frombuffer(shared, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    buf = raw[start : start + nbytes]
    if nbytes:
        buf[:] = st.buffer[:nbytes]
    old_ptr = st.ptr
    st._buffer = buf
    st.ptr = int(buf.ctypes.data)
    st.owner = shared  # keeps the mapping alive; marks the storage shared
    st.raw = None  # (a pooled block is no longer this storage's memory)
    if st.ptr != old_ptr:
        for ref in gc.get_referrers(st):
            if isinstance(ref, Tensor) and ref._storage is st:
                ref._ptr = st.ptr + ref._offset * ref._dtype.itemsize
    return self


def _is_shared(self: Tensor) -> bool:
    """Whether `share_memory_()` moved this tensor's memory into a shared mapping (a traced
    value has no memory: False)."""
    st = self._storage
    return st is not None and isinstance(st.owner, mmap.mmap)


def _hardshrink(self: Tensor, lambd: float = 0.5) -> Tensor:
    """`F.hardshrink(self, lambd)`: x where |x| > lambd, else 0."""
    from ..nn import functional as F  # circle: nn.functional -> functions -> here

    return F.hardshrink(self, lambd)


def _prelu(self: Tensor, weight: Tensor) -> Tensor:
    """`F.prelu(self, weight)`: max(0, x) + weight * min(0, x), weight per channel."""
    from ..nn import functional as F  # circle: nn.functional -> functions -> here

    return F.prelu(self, weight)


_PLAIN_ROUND_: list[Any] = []


def _round_(self: Tensor, *, decimals: int = 0) -> Tensor:
    """In place: round half to even (to `decimals` decimal places when given)."""
    if decimals == 0:
        if not _PLAIN_ROUND_:
            _PLAIN_ROUND_.append(make_inplace_methods()["round_"])
        return _PLAIN_ROUND_[0](self)

    return names_op("round_")(_rewrite_inplace("round", lambda x: E.round(x, decimals=decimals)))(
        self
    )


def _split(self: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """`lg.split(self, split_size, dim)`: pieces of `split_size` elements along `dim` (the
    last may be smaller), or of the listed sizes."""
    return split(self, split_size, dim)


METHODS: dict[str, Any] = {
    "round_": _round_,
    "split": _split,
    "addcmul": addcmul,
    "addcdiv": addcdiv,
    "addcmul_": _addcmul_,
    "addcdiv_": _addcdiv_,
    "adjoint": adjoint,
    "as_strided_": as_strided_,
    "conj_physical_": conj_physical_,
    "fill_diagonal_": fill_diagonal_,
    "new": _new,
    "resize": _resize,
    "resize_as": _resize_as,
    "is_distributed": is_distributed,
    "hardshrink": _hardshrink,
    "prelu": _prelu,
    "share_memory_": _share_memory_,
    "is_shared": _is_shared,
}
