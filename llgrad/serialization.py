"""`save` and `load`: pickle files holding tensors, state dicts and nested containers, and
safetensors files (`utils/safetensors.py`). Both stream: a file is written as it is made
and tensors are read into their own memory, so neither direction holds the file twice.

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

import os
import pickle
from typing import Any, BinaryIO

import numpy as np

from .ir import dtypes as dt
from .nn.parameter import Parameter
from .tensor import Tensor
from .utils import safetensors

__all__ = ["save", "load"]

_FORMAT = 1
DEFAULT_PROTOCOL = 5


def _tensor_payload(t: Tensor, protocol: int) -> tuple[Any, ...]:
    values = np.ascontiguousarray(t.detach()._numpy_view())
    if protocol >= 5:  # in-band buffer: written from the tensor's memory, read back
        data: Any = pickle.PickleBuffer(values if values.flags.writeable else values.copy())
    else:  # as a bytearray the new tensor then owns (no second copy)
        data = values.tobytes()
    return (
        _FORMAT,
        t._dtype.name,
        tuple(t._shape),
        data,
        bool(t._requires_grad),
        isinstance(t, Parameter),
    )


def _restore_tensor(
    fmt: int,
    dtype_name: str,
    shape: tuple[int, ...],
    data: Any,
    requires_grad: bool,
    is_parameter: bool,
) -> Tensor:
    """Rebuild a saved tensor from its bytes (validated before any memory is touched)."""
    if fmt != _FORMAT:
        raise pickle.UnpicklingError(
            f"llgrad.load: tensor record of format {fmt} is not "
            f"supported (this llgrad reads format {_FORMAT})"
        )
    d = dt.from_name(dtype_name)
    if not isinstance(shape, tuple) or any(not isinstance(s, int) or s < 0 for s in shape):
        raise pickle.UnpicklingError(f"llgrad.load: invalid tensor shape {shape!r}")
    if not isinstance(data, (bytes, bytearray)):
        raise pickle.UnpicklingError(
            f"llgrad.load: tensor data must be bytes, got {type(data).__name__}"
        )
    n = 1
    for s in shape:
        n *= s
    if len(data) != n * d.itemsize:
        raise pickle.UnpicklingError(
            f"llgrad.load: a {d.name} tensor of shape {list(shape)} "
            f"needs {n * d.itemsize} bytes, the file holds "
            f"{len(data)}"
        )
    if isinstance(data, bytearray) and n:  # protocol 5: the tensor takes the buffer
        out = Tensor._from_numpy(np.frombuffer(data, dtype=d.np).reshape(shape), d)
    else:
        out = Tensor._empty(shape, d)
        if n:
            out._numpy_view()[...] = np.frombuffer(data, dtype=d.np).reshape(shape)
    if is_parameter:
        return Parameter(out, requires_grad)
    if requires_grad:
        out.requires_grad_(True)
    return out


class _Pickler(pickle.Pickler):
    def __init__(self, file: Any, protocol: int):
        super().__init__(file, protocol=protocol)
        self.protocol_number = protocol

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return (_restore_tensor, _tensor_payload(obj, self.protocol_number))
        return NotImplemented


_SAFE_GLOBALS = {
    ("llgrad.serialization", "_restore_tensor"),
    ("llgrad.ir.dtypes", "from_name"),
    ("collections", "OrderedDict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "complex"),
    ("builtins", "slice"),
    ("_codecs", "encode"),  # how protocols 0-2 spell bytes (latin-1 text to bytes)
}


class _WeightsOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"llgrad.load: weights_only load refused the global {module}.{name}: only tensors, "
            f"dtypes and plain containers are rebuilt by default. If you trust the file, "
            f"call llgrad.load(..., weights_only=False)."
        )


def _open(f: Any, mode: str) -> tuple[BinaryIO, bool]:
    if isinstance(f, (str, bytes, os.PathLike)):
        return open(f, mode), True
    if "w" in mode and not hasattr(f, "write"):
        raise TypeError(f"save: expected a path or a binary file object, got {type(f).__name__}")
    if "r" in mode and not hasattr(f, "read"):
        raise TypeError(f"load: expected a path or a binary file object, got {type(f).__name__}")
    return f, False


def save(
    obj: Any,
    f: Any,
    pickle_protocol: int = DEFAULT_PROTOCOL,
    *,
    format: str | None = None,
    metadata: dict[str, str] | None = None,
) -> None:
    """Write `obj` to `f`, a path or a writable binary file, as it is written (no copy of
    the whole file in memory).

    `format="pickle"` (the default) holds tensors, state dicts and nested containers;
    `format="safetensors"` (the default for a path ending in `.safetensors`) holds a flat
    dict of named tensors, readable by the safetensors library and by PyTorch, with
    optional string `metadata`."""
    fmt = _format_for(f, format)
    handle, close = _open(f, "wb")
    try:
        if fmt == "safetensors":
            safetensors.write(obj, handle, metadata)
        else:
            if metadata is not None:
                raise ValueError("save: metadata is written by format='safetensors' only")
            _Pickler(handle, pickle_protocol).dump(obj)
    finally:
        if close:
            handle.close()


def _format_for(f: Any, format: str | None) -> str:
    if format is None:
        name = os.fspath(f) if isinstance(f, (str, bytes, os.PathLike)) else ""
        name = name.decode() if isinstance(name, bytes) else name
        return "safetensors" if name.endswith(".safetensors") else "pickle"
    if format not in ("pickle", "safetensors"):
        raise ValueError(f"save: format must be 'pickle' or 'safetensors', got {format!r}")
    return format


def _sniff(head: bytes) -> str:
    """Which format a file starting with `head` is in."""
    if head[:1] == b"\x80":
        return "pickle"
    if head[:4] == b"PK\x03\x04":
        return "zip"
    if len(head) >= 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < (1 << 30):
        return "safetensors"
    return "unknown"


def load(f: Any, map_location: Any = None, weights_only: bool = True) -> Any:
    """Read an object written by `save` (pickle), or a safetensors file (a dict of
    tensors, whoever wrote it); the format is read from the file's first bytes. Tensors
    are read straight into their own memory. `map_location` is accepted for PyTorch
    compatibility (everything lives on the CPU)."""
    if (
        map_location not in (None, "cpu")
        and not callable(map_location)
        and not isinstance(map_location, dict)
    ):
        raise ValueError(
            f"load: map_location must be None or 'cpu' (llgrad has only the "
            f"CPU), got {map_location!r}"
        )
    handle, close = _open(f, "rb")
    try:
        if not handle.seekable():  # a pipe or socket: read it whole
            import io

            handle = io.BytesIO(handle.read())
        start = handle.tell()
        head = handle.read(9)
        kind = _sniff(head)
        if kind == "zip":
            raise pickle.UnpicklingError(
                "llgrad.load: this is a PyTorch file (torch.save's zip format), which "
                "llgrad does not read: in PyTorch, save the state dict with "
                "safetensors.torch.save_file(model.state_dict(), 'model.safetensors') and "
                "load that file here"
            )
        if not head:
            raise pickle.UnpicklingError("llgrad.load: the file is empty or truncated")
        if kind == "unknown":
            raise pickle.UnpicklingError(
                f"llgrad.load: neither an llgrad file (pickle) nor a safetensors file: it "
                f"starts with {head[:8]!r}"
            )
        handle.seek(start)
        if kind == "safetensors":
            return safetensors.read(handle)
        unpickler = _WeightsOnlyUnpickler if weights_only else pickle.Unpickler
        try:
            return unpickler(handle).load()
        except EOFError:
            raise pickle.UnpicklingError("llgrad.load: the file is empty or truncated") from None
    finally:
        if close:
            handle.close()
