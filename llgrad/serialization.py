"""`save` and `load`: pickle files holding tensors, state dicts and nested containers.

A tensor is pickled as its raw element bytes (contiguous, C order), its shape, its dtype's
name and its autograd flags, never as a NumPy object: bfloat16 keeps its 16-bit patterns,
so every dtype round-trips bit for bit (NaN payloads and signed zeros included). A tensor
that appears several times in one object is stored once and comes back as one object;
distinct views of one storage come back as separate tensors.

`load` is restricted by default (`weights_only=True`, as in PyTorch): it rebuilds only
tensors, Parameters, dtypes and plain containers (dict, OrderedDict, list, tuple, set,
numbers, strings), and refuses any other class a file names, since unpickling arbitrary
classes runs arbitrary code. `weights_only=False` loads anything pickle can (whole modules,
optimizers), for files you trust.
"""
from __future__ import annotations

import io
import os
import pickle
from typing import Any, BinaryIO

import numpy as np

from .ir import dtypes as dt
from .tensor import Tensor

__all__ = ["save", "load"]

_FORMAT = 1
DEFAULT_PROTOCOL = 4


def _tensor_payload(t: Tensor) -> tuple[Any, ...]:
    from .nn.parameter import Parameter
    values = np.ascontiguousarray(t.detach()._numpy_view())
    return (_FORMAT, t._dtype.name, tuple(t._shape), values.tobytes(), bool(t._requires_grad),
            isinstance(t, Parameter))


def _restore_tensor(fmt: int, dtype_name: str, shape: tuple[int, ...], data: bytes,
                    requires_grad: bool, is_parameter: bool) -> Tensor:
    """Rebuild a saved tensor from its bytes (validated before any memory is touched)."""
    if fmt != _FORMAT:
        raise pickle.UnpicklingError(f"llgrad.load: tensor record of format {fmt} is not "
                                     f"supported (this llgrad reads format {_FORMAT})")
    d = dt.from_name(dtype_name)
    if not isinstance(shape, tuple) or any(not isinstance(s, int) or s < 0 for s in shape):
        raise pickle.UnpicklingError(f"llgrad.load: invalid tensor shape {shape!r}")
    n = 1
    for s in shape:
        n *= s
    if len(data) != n * d.itemsize:
        raise pickle.UnpicklingError(f"llgrad.load: a {d.name} tensor of shape {list(shape)} "
                                     f"needs {n * d.itemsize} bytes, the file holds "
                                     f"{len(data)}")
    out = Tensor._empty(shape, d)
    if n:
        out._numpy_view()[...] = np.frombuffer(data, dtype=d.np).reshape(shape)
    if is_parameter:
        from .nn.parameter import Parameter
        return Parameter(out, requires_grad)
    if requires_grad:
        out.requires_grad_(True)
    return out


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return (_restore_tensor, _tensor_payload(obj))
        return NotImplemented


_SAFE_GLOBALS = {
    ("llgrad.serialization", "_restore_tensor"),
    ("llgrad.ir.dtypes", "from_name"),
    ("collections", "OrderedDict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("builtins", "slice"),
}


class _WeightsOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"llgrad.load: weights_only load refused the global {module}.{name}: only tensors, "
            f"dtypes and plain containers are rebuilt by default. If you trust the file, "
            f"call llgrad.load(..., weights_only=False).")


def _open(f: Any, mode: str) -> tuple[BinaryIO, bool]:
    if isinstance(f, (str, bytes, os.PathLike)):
        return open(f, mode), True
    if "w" in mode and not hasattr(f, "write"):
        raise TypeError(f"save: expected a path or a binary file object, got "
                        f"{type(f).__name__}")
    if "r" in mode and not hasattr(f, "read"):
        raise TypeError(f"load: expected a path or a binary file object, got "
                        f"{type(f).__name__}")
    return f, False


def save(obj: Any, f: Any, pickle_protocol: int = DEFAULT_PROTOCOL) -> None:
    """Write `obj` (tensors, state dicts, nested dicts/lists/tuples of them, ...) to `f`,
    a path or a writable binary file."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle_protocol).dump(obj)
    handle, close = _open(f, "wb")
    try:
        handle.write(buf.getvalue())
    finally:
        if close:
            handle.close()


def load(f: Any, map_location: Any = None, weights_only: bool = True) -> Any:
    """Read an object written by `save`. `map_location` is accepted for PyTorch
    compatibility (everything lives on the CPU)."""
    if map_location not in (None, "cpu") and not callable(map_location) \
            and not isinstance(map_location, dict):
        raise ValueError(f"load: map_location must be None or 'cpu' (llgrad has only the "
                         f"CPU), got {map_location!r}")
    handle, close = _open(f, "rb")
    try:
        data = handle.read()
    finally:
        if close:
            handle.close()
    unpickler = _WeightsOnlyUnpickler if weights_only else pickle.Unpickler
    try:
        return unpickler(io.BytesIO(data)).load()
    except EOFError:
        raise pickle.UnpicklingError("llgrad.load: the file is empty or truncated") from None

