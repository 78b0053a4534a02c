"""Generated Python: the specialized call paths (`compiler.callpath`, `CompiledGraph.runner`,
eager launches) write their code as text with constants bound by name."""

from __future__ import annotations

from typing import Any, Callable


def define(source: str, filename: str, consts: dict[str, Any], name: str) -> Callable:
    """Run `source` with `consts` as its globals and return the function `name` it
    defines; the function keeps its text as `__source__` (printable, for inspection)."""
    exec(compile(source, filename, "exec"), consts)
    fn = consts[name]
    fn.__source__ = source
    return fn
