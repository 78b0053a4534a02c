"""Errors name the function the user called.

A function built from other ops (`index_select` from indexing, `any` from `amax`, an
in-place method from its out-of-place form) would otherwise report the inner op's name.
`names_op(op)` rewrites the message of a standard error raised inside to start with the
user's function: `any: dimension out of range ...`, not `amax: ...`.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_STANDARD = (RuntimeError, ValueError, TypeError, IndexError, MemoryError)
_INNER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(\(\))?: ")


def relabel(error: BaseException, op: str) -> None:
    """Make `error`'s message start with `op` (replacing an inner op's `name: ` prefix)."""
    if type(error) not in _STANDARD or not error.args or not isinstance(error.args[0], str):
        return
    message = error.args[0]
    if message.startswith((f"{op}:", f"{op}()", f"{op} ")):
        return
    error.args = (f"{op}: {_INNER_NAME.sub('', message, count=1)}",) + error.args[1:]


# (is_device_failure(error, args, kwargs), rerun(fn, op, args, kwargs)), set by
# `eager.cuda` when it is imported: a function whose eager code cannot take CUDA tensors
# (a host computation, a helper tensor made on the CPU) runs again compiled for the GPU
DEVICE_RERUN: list[Any] = [None, None]
# outputs(result, args, kwargs): a function's results where its CUDA arguments are (an edge
# case of its eager code, such as an empty input, may make a result on the host); set by
# `eager.cuda` once a CUDA tensor exists
DEVICE_OUTPUTS: list[Any] = [None]
# make(fn, like, args, kwargs): a creation call that names a device or copies a CUDA
# tensor's placement, and the CUDA tensor classes; set by `eager.cuda` when it is imported
DEVICE_CREATE: list[Any] = [None]
DEVICE_CLASSES: set[type] = set()


def names_op(op: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function so that a standard error raised inside names `op` (`relabel`).
    Typed with a ParamSpec: type checkers see the decorated function's own signature.
    A call on CUDA tensors that fails because its eager code reads host memory runs
    again through `DEVICE_RERUN` (see `eager.cuda.rerun`)."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def named(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except _STANDARD as e:
                failed = DEVICE_RERUN[0]
                if failed is not None and failed(e, args, kwargs):
                    return DEVICE_RERUN[1](fn, op, args, kwargs)
                relabel(e, op)
                raise

        return named

    return wrap


def device_rerun(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, served again by `DEVICE_RERUN` when its eager code fails on CUDA tensors (the
    rerun half of `names_op`, for functions whose own messages already name them)."""

    @functools.wraps(fn)
    def served(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            result = fn(*args, **kwargs)
            if DEVICE_OUTPUTS[0] is not None:  # (set while CUDA tensors exist)
                return DEVICE_OUTPUTS[0](result, args, kwargs)
            return result
        except _STANDARD as e:
            failed = DEVICE_RERUN[0]
            if failed is not None and failed(e, args, kwargs):
                return DEVICE_RERUN[1](fn, fn.__name__, args, kwargs)
            raise

    return served


def serve_on_devices(namespace: dict[str, Any], names: Any = None) -> None:
    """Wrap a module's public functions (`names`, default its `__all__`) with
    `device_rerun`, in its globals and in its `METHODS` table (the Tensor methods bound
    from it), so that they serve CUDA tensors where their eager code cannot."""
    import inspect

    wrapped: dict[int, Any] = {}
    for name in list(names if names is not None else namespace.get("__all__", [])):
        fn = namespace.get(name)
        if inspect.isfunction(fn):
            wrapped[id(fn)] = namespace[name] = device_rerun(fn)
    methods = namespace.get("METHODS")
    if isinstance(methods, dict):
        for key, fn in list(methods.items()):
            if id(fn) in wrapped:
                methods[key] = wrapped[id(fn)]


def device_aware(fn: Callable[P, R], like: bool = False) -> Callable[P, R]:
    """`fn` (a creation function) that also makes its tensor on `device="cuda"`; a
    `*_like` function (`like`) follows its input's device by default. Host calls run `fn`
    directly; the others go to `DEVICE_CREATE` (`eager.cuda.make_on_device`)."""

    @functools.wraps(fn)
    def made(*args: P.args, **kwargs: P.kwargs) -> R:
        dev = kwargs.get("device")
        if dev is None:
            if not like or not DEVICE_CLASSES:
                return fn(*args, **kwargs)
            source = args[0] if args else kwargs.get("input")
            if source.__class__ not in DEVICE_CLASSES:
                return fn(*args, **kwargs)
        elif dev.__class__ is str and dev == "cpu":
            return fn(*args, **kwargs)
        return DEVICE_CREATE[0](fn, like, args, kwargs)

    return made
