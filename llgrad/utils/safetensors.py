"""The safetensors format, read and written directly (no dependency).

A file is an 8-byte little-endian header length N, N bytes of JSON naming every tensor's
dtype, shape and [begin, end) byte range in the data that follows (plus an optional
`__metadata__` map of strings), then the tensors' bytes, C-ordered and contiguous, with
no gaps. The safetensors library and PyTorch (`safetensors.torch`) read and write the
same files; the tests check both directions against them.

Written here rather than through the library because the library's NumPy interface has
no bfloat16 (the dtype most checkpoints use) and because reading tensor by tensor
straight into each tensor's own memory (`readinto`) keeps the peak at one copy of the
weights; writing streams tensor by tensor.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

import numpy as np

from ..ir import dtypes as dt
from ..tensor import Tensor

__all__ = ["read", "write", "CODES"]

CODES = {
    dt.bool_: "BOOL",
    dt.uint8: "U8",
    dt.int8: "I8",
    dt.int16: "I16",
    dt.int32: "I32",
    dt.int64: "I64",
    dt.float16: "F16",
    dt.bfloat16: "BF16",
    dt.float32: "F32",
    dt.float64: "F64",
    dt.complex64: "C64",
}
_DTYPES = {code: d for d, code in CODES.items()}
_MAX_HEADER = 100 << 20  # the library's own limit on the JSON header


def write(tensors: Any, f: BinaryIO, metadata: dict[str, str] | None = None) -> None:
    """Write a dict of named tensors (a state dict) to the binary file `f`."""
    if not isinstance(tensors, dict):
        raise TypeError(
            f"save(format='safetensors'): expected a dict of named tensors "
            f"(a state dict), got {type(tensors).__name__}"
        )
    header: dict[str, Any] = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save(format='safetensors'): metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    offset = 0
    items = []
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"save(format='safetensors'): tensor names must be str, got {name!r}")
        if not isinstance(t, Tensor):
            raise TypeError(
                f"save(format='safetensors'): {name!r} is a {type(t).__name__}, not a tensor"
            )
        if t._dtype not in CODES:
            raise TypeError(
                f"save(format='safetensors'): {name!r} is {t._dtype.name}, "
                f"which safetensors has no code for (it stores "
                f"{', '.join(d.name for d in CODES)})"
            )
        nbytes = t.numel() * t._dtype.itemsize
        header[name] = {
            "dtype": CODES[t._dtype],
            "shape": list(t._shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
        items.append(t)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    f.write(len(text).to_bytes(8, "little"))
    f.write(text)
    for t in items:  # one tensor at a time
        if t.numel():
            f.write(
                memoryview(
                    np.ascontiguousarray(t.detach()._numpy_view()).reshape(-1).view(np.uint8)
                )
            )


def read(f: BinaryIO) -> dict[str, Tensor]:
    """Read a safetensors file into a dict of tensors, each read straight into its own
    memory; the header is checked before anything is allocated."""
    start = f.tell()
    n = int.from_bytes(f.read(8), "little")
    if n > _MAX_HEADER:
        raise ValueError(
            f"load: safetensors header of {n} bytes is larger than the {_MAX_HEADER} allowed"
        )
    try:
        header = json.loads(f.read(n))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"load: the safetensors header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("load: the safetensors header is not a JSON object")
    header.pop("__metadata__", None)
    f.seek(0, 2)
    data_size = f.tell() - start - 8 - n
    entries = []
    for name, info in header.items():
        try:
            d = _DTYPES[info["dtype"]]
            shape = tuple(info["shape"])
            begin, end = info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"load: safetensors entry {name!r} is malformed or has a dtype "
                f"llgrad does not read: {info!r}"
            ) from None
        if not all(isinstance(s, int) and s >= 0 for s in shape) or not (
            isinstance(begin, int) and isinstance(end, int)
        ):
            raise ValueError(
                f"load: safetensors entry {name!r} has an invalid shape or offsets: {info!r}"
            )
        count = 1
        for s in shape:
            count *= s
        if end - begin != count * d.itemsize or begin < 0 or end > data_size:
            raise ValueError(
                f"load: safetensors entry {name!r} ({info['dtype']} "
                f"{list(shape)}) does not fit bytes [{begin}, {end}) of the "
                f"{data_size} in the file"
            )
        entries.append((begin, name, d, shape))
    out: dict[str, Tensor] = {}
    for begin, name, d, shape in sorted(entries, key=lambda e: e[0]):
        t = Tensor._empty(shape, d)
        if t.numel():
            f.seek(start + 8 + n + begin)
            view = memoryview(t._numpy_view().reshape(-1).view(np.uint8))
            if f.readinto(view) != len(view):
                raise ValueError(f"load: the safetensors file ends inside {name!r}")
        out[name] = t
    return {name: out[name] for name in header}  # the file's order
