"""The in-memory kernel cache: one compiled kernel per kernel spec.

A spec is a frozen dataclass from `llgrad.codegen` (what the kernel computes, its rank,
its stride pattern, its dtypes); it is the key. Building goes through the target, whose
disk cache makes a second process start warm.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from typing import Any, Callable

from .. import _log
from ..codegen.target import Compiled, get_target

KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Kernel:
    """A callable native kernel: `kernel.fn(address_of_arg_block)`."""

    __slots__ = ("spec", "name", "fn", "address", "compiled", "n_slots")

    def __init__(self, spec: Any, name: str, compiled: Compiled, n_slots: int):
        self.spec = spec
        self.name = name
        self.compiled = compiled
        self.fn = KERNEL_TYPE(compiled.addresses[name])
        self.address = compiled.addresses[name]
        self.n_slots = n_slots

    @property
    def llvm_ir(self) -> str:
        return self.compiled.source_ir

    def asm(self) -> str:
        """The optimized machine code of this kernel, as assembly text."""
        return self.compiled.asm()

    def __repr__(self) -> str:
        return f"<Kernel {self.name}>"


_kernels: dict[Any, Kernel] = {}
_lock = threading.Lock()
_builders: dict[type, Callable[[Any, str], Any]] = {}


def register_builder(spec_type: type, build: Callable[[Any, str], Any]) -> None:
    """`build(spec, name) -> llvmlite ir.Module` for one kind of spec."""
    _builders[spec_type] = build


def get(spec: Any) -> Kernel:
    kernel = _kernels.get(spec)
    if kernel is not None:
        return kernel
    with _lock:
        kernel = _kernels.get(spec)
        if kernel is None:
            kernel = _compile(spec)
            _kernels[spec] = kernel
    return kernel


def _compile(spec: Any) -> Kernel:
    digest = hashlib.sha1(repr(spec).encode()).hexdigest()[:10]
    name = f"{type(spec).__name__.lower()}_{digest}"
    module = _builders[type(spec)](spec, name)
    text = str(module)
    _log.log("kernels", f"new kernel {name}: {spec}")
    compiled = get_target().compile(text, [name], name=name)
    return Kernel(spec, name, compiled, spec.n_slots)


def stats() -> dict[str, int]:
    return {"kernels": len(_kernels)}
