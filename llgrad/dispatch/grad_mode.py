"""Grad mode: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`.

Each works as a context manager and as a decorator, as in PyTorch. The state is
per thread.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _State(threading.local):
    """Per-thread modes; the class attributes are every thread's starting values (read
    as plain attributes: a `getattr` default on a missing thread-local attribute costs
    ten times as much, and this is read on every op)."""

    enabled = True
    inference = False


_state = _State()


def is_grad_enabled() -> bool:
    return _state.enabled


def _set(mode: bool) -> None:
    _state.enabled = bool(mode)


def is_inference_mode_enabled() -> bool:
    return _state.inference


class _Mode:
    """Base: subclasses say what mode to enter; entering saves the previous one."""

    def _enter(self) -> None:
        raise AssertionError("subclass responsibility")

    def __enter__(self) -> None:
        self._prev = (is_grad_enabled(), is_inference_mode_enabled())
        self._enter()

    def __exit__(self, *exc: object) -> None:
        _state.enabled, _state.inference = self._prev

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def clone(self) -> "_Mode":
        return type(self)()


class no_grad(_Mode):
    def _enter(self) -> None:
        _set(False)


class enable_grad(_Mode):
    def _enter(self) -> None:
        _set(True)


class set_grad_enabled(_Mode):
    """Sets the mode at once (like PyTorch); as a context manager, restores it on exit."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev = (is_grad_enabled(), is_inference_mode_enabled())
        _set(self.mode)

    def __enter__(self) -> None:
        pass

    def _enter(self) -> None:
        _set(self.mode)

    def __call__(self, fn: F) -> F:
        _set(self._prev[0])  # used as a decorator: undo the immediate effect
        return super().__call__(fn)

    def clone(self) -> "set_grad_enabled":
        return type(self)(self.mode)


class inference_mode(_Mode):
    """Like no_grad; tensors made inside are inference tensors (never require grad)."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def _enter(self) -> None:
        if self.mode:
            _set(False)
            _state.inference = True

    def clone(self) -> "inference_mode":
        return type(self)(self.mode)
