"""The legacy `Variable` wrapper and the multithreading switch of PyTorch's autograd.

Since PyTorch 0.4 a Variable is a Tensor: `Variable(t, requires_grad=...)` returns a new
leaf tensor over `t`'s memory (detached from `t`'s history), and `isinstance(x, Variable)`
holds for every tensor. llgrad keeps both rules so old scripts run unchanged.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..tensor import Tensor
from ..functions.creation import empty


class _VariableMeta(type):
    def __instancecheck__(cls, other: Any) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """`Variable(data, requires_grad=False, volatile=False)`: a new leaf tensor sharing
    `data`'s memory, with `requires_grad` set; `Variable()` is an empty float tensor.
    `volatile` has no effect (it warns, as PyTorch does: use `no_grad`)."""

    def __new__(
        cls, data: Tensor | None = None, requires_grad: bool = False, volatile: bool = False
    ) -> Tensor:  # type: ignore[misc]
        if volatile:
            warnings.warn(
                "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                UserWarning,
                stacklevel=2,
            )
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out


_multithreading = True


def is_multithreading_enabled() -> bool:
    """Whether autograd may run backward on several threads (the flag only: llgrad's
    engine runs each backward on the calling thread; its kernels use the thread pool)."""
    return _multithreading


class set_multithreading_enabled:
    """Set the multithreading flag (a function call or a context manager restoring the
    previous value on exit, as PyTorch's)."""

    def __init__(self, mode: bool) -> None:
        global _multithreading
        self.prev = _multithreading
        self.mode = bool(mode)
        _multithreading = self.mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        global _multithreading
        _multithreading = self.prev

    def clone(self) -> "set_multithreading_enabled":
        """A new switch to the same mode."""
        return type(self)(self.mode)
