"""DLPack exchange: NumPy moves the memory; this module adds what NumPy cannot carry.

NumPy has no bfloat16, so a bfloat16 tensor travels as its uint16 bits with the capsule's
dtype field rewritten: on export from `uint` (code 1) to `bfloat` (code 4), on import the
other way, after which llgrad reinterprets the bits. Both capsule layouts are handled:
the versioned one (DLPack 1.x, name "dltensor_versioned", whose `DLTensor` follows a
version, the manager context, the deleter and the flags) and the legacy one
("dltensor", `DLTensor` first).

Read-only memory (DLPack 1.x flags it; NumPy then hands out a read-only array) is copied
on import: a tensor is writable, and in-place ops must never write into memory its owner
declared read-only.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["export_bfloat16", "import_array"]

_DL_UINT, _DL_BFLOAT = 1, 4
_DTYPE_CODE = 20  # offset of DLDataType.code inside DLTensor
_VERSIONED_TENSOR = 32  # offset of DLTensor inside DLManagedTensorVersioned

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dtype_field(capsule: Any) -> ctypes.c_uint8:
    name = _api.PyCapsule_GetName(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise BufferError(f"from_dlpack: not an unused DLPack capsule (name {name!r})")
    base = _api.PyCapsule_GetPointer(capsule, name)
    offset = _DTYPE_CODE + (_VERSIONED_TENSOR if name == b"dltensor_versioned" else 0)
    return ctypes.c_uint8.from_address(base + offset)


def _swap_code(capsule: Any, old: int, new: int, what: str) -> Any:
    code = _dtype_field(capsule)
    if code.value != old:
        raise BufferError(f"{what}: expected DLPack dtype code {old}, found {code.value}")
    code.value = new
    return capsule


def export_bfloat16(bits: np.ndarray, *args: Any, **kwargs: Any) -> Any:
    """A capsule for a bfloat16 tensor whose bits `bits` (uint16) views."""
    return _swap_code(
        bits.__dlpack__(*args, **kwargs), _DL_UINT, _DL_BFLOAT, "__dlpack__ (bfloat16)"
    )


class _Bits:
    """Forwards `obj`'s DLPack export with a bfloat16 dtype presented as uint16."""

    def __init__(self, obj: Any):
        self.obj = obj

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            capsule = self.obj.__dlpack__(*args, **kwargs)
        except TypeError:  # a producer without max_version and friends
            capsule = self.obj.__dlpack__()
        return _swap_code(capsule, _DL_BFLOAT, _DL_UINT, "from_dlpack (bfloat16)")

    def __dlpack_device__(self) -> Any:
        return self.obj.__dlpack_device__()


def _is_bfloat16(obj: Any) -> bool:
    return "bfloat16" in str(getattr(obj, "dtype", ""))


def import_array(obj: Any) -> tuple[np.ndarray, bool]:
    """(a NumPy array over `obj`'s memory, or a copy if that memory is read-only; whether
    the elements are bfloat16 bits)."""
    bf16 = _is_bfloat16(obj)
    arr = np.from_dlpack(_Bits(obj) if bf16 else obj)
    if not arr.flags.writeable:
        arr = arr.copy()
    return arr, bf16
