"""`lg.jit`: PyTorch's TorchScript entry points, for scripts that call them.

llgrad has no TorchScript. `script`, `trace` and `trace_module` return the function or
module they are given, unchanged (a one-time UserWarning says so): it runs as eager
Python, with the same results (and the same autograd) as the scripted or traced version.
They do not return `lg.compile(...)`: a compiled function specializes on shapes and guards
Python values, which a TorchScript program does not, and a traced program would record
one path of data-dependent control flow where llgrad keeps every path; wrap the result in
`lg.compile` yourself where that is what you want. `trace` does not run the function on
its example inputs.

`save`/`load` write and read the object itself with `lg.save`/`lg.load` (pickle: a module
with its code by reference), not a TorchScript archive, so a file is read back by llgrad
only. `ignore`, `unused`, `export`, `annotate`, `Final`, `freeze`,
`optimize_for_inference`, `fork`/`wait` are the identity (or run eagerly), as TorchScript
has nothing to change in eager code. `is_scripting()` is False; `is_tracing()` is True while
`lg.compile` traces (code that avoids Python-side effects under tracing keeps doing so).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Final, TypeVar

from .serialization import load as lg_load
from .serialization import save as lg_save
from .tracer.tensor import tracing

__all__ = [
    "script",
    "trace",
    "trace_module",
    "ignore",
    "unused",
    "export",
    "is_scripting",
    "is_tracing",
    "annotate",
    "Final",
    "save",
    "load",
    "freeze",
    "optimize_for_inference",
    "fork",
    "wait",
    "Future",
]

T = TypeVar("T")

_noticed: set[str] = set()


def _notice(name: str) -> None:
    if name not in _noticed:
        _noticed.add(name)
        warnings.warn(
            f"llgrad.jit.{name}: llgrad has no TorchScript; the function or module "
            f"is returned unchanged and runs eagerly (same results). Wrap it in "
            f"lg.compile to compile it.",
            UserWarning,
            stacklevel=3,
        )


def script(
    obj: T, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None, example_inputs: Any = None
) -> T:
    """Return `obj` (a function, module or class) unchanged (notice once)."""
    _notice("script")
    return obj


def trace(
    func: T,
    example_inputs: Any = None,
    optimize: Any = None,
    check_trace: bool = True,
    check_inputs: Any = None,
    check_tolerance: float = 1e-5,
    strict: bool = True,
    _force_outplace: bool = False,
    _module_class: Any = None,
    _compilation_unit: Any = None,
    example_kwarg_inputs: Any = None,
    _store_inputs: bool = True,
) -> T:
    """Return `func` (a function or module) unchanged (notice once); the example inputs
    are not run."""
    _notice("trace")
    return func


def trace_module(
    mod: T,
    inputs: Any,
    optimize: Any = None,
    check_trace: bool = True,
    check_inputs: Any = None,
    check_tolerance: float = 1e-5,
    strict: bool = True,
    _force_outplace: bool = False,
    _module_class: Any = None,
    _compilation_unit: Any = None,
    example_inputs_is_kwarg: bool = False,
    _store_inputs: bool = True,
) -> T:
    """Return `mod` unchanged (notice once)."""
    _notice("trace_module")
    return mod


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """`@ignore` or `@ignore(drop=...)`: the function is left as it is."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The decorator that keeps a method out of TorchScript: the identity here."""
    return fn


def export(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The decorator that compiles an extra method in TorchScript: the identity here."""
    return fn


def is_scripting() -> bool:
    """False: code never runs under TorchScript in llgrad."""
    return False


def is_tracing() -> bool:
    """Whether `lg.compile` is tracing the calling code."""
    return tracing()


def annotate(the_type: Any, the_value: T) -> T:
    """A type hint for TorchScript: returns `the_value`."""
    return the_value


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    """Write `m` (a module or function) to `f` with `lg.save` (pickle, not a TorchScript
    archive); `_extra_files` (name -> bytes) are written beside it in the same file."""
    payload = {"llgrad.jit": m, "extra_files": dict(_extra_files or {})}
    lg_save(payload, f)


def load(
    f: Any, map_location: Any = None, _extra_files: Any = None, _restore_shapes: bool = False
) -> Any:
    """Read what `save` wrote; a dict passed as `_extra_files` is filled with the saved
    extra files it names."""
    payload = lg_load(f, map_location=map_location, weights_only=False)
    if not isinstance(payload, dict) or "llgrad.jit" not in payload:
        raise RuntimeError(
            "llgrad.jit.load: the file was not written by llgrad.jit.save "
            "(TorchScript archives cannot be read by llgrad)"
        )
    if _extra_files is not None:
        saved = payload.get("extra_files", {})
        for name in list(_extra_files):
            if name in saved:
                _extra_files[name] = saved[name]
    return payload["llgrad.jit"]


def freeze(mod: T, preserved_attrs: list[str] | None = None, optimize_numerics: bool = True) -> T:
    """Return `mod` unchanged (there is no TorchScript graph to freeze)."""
    return mod


def optimize_for_inference(mod: T, other_methods: list[str] | None = None) -> T:
    """Return `mod` unchanged."""
    return mod


class Future:
    """The result of `fork`: already computed (the call ran eagerly)."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def wait(self) -> Any:
        """The call's result."""
        return self._value

    def done(self) -> bool:
        """True: the call ran when forked."""
        return True


def fork(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
    """Run `func(*args, **kwargs)` now; `wait` returns its result."""
    return Future(func(*args, **kwargs))


def wait(future: Future) -> Any:
    """The result of a `fork`."""
    return future.wait()
