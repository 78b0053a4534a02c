"""Per-signature call code for `lg.compile`d functions.

A compiled function's general call (`CompiledFunction._call`) flattens its arguments,
builds the signature key, looks it up, reads the guarded globals, decides what to
differentiate and rebuilds the output structure: about ten microseconds of Python around
a native call that may take one. Once a signature has run through it, `specialize` writes
that signature's call as Python source with every decision made: each argument is checked
with a few identity and tuple comparisons against the signature's constants (class,
shape, dtype, requires_grad; captured tensors' requires_grad; grad mode; no trace or
`disable_compile` active), then the graph's own generated runner
(`CompiledGraph.runner`) is called and the result is built by one expression.

Any check that fails returns `MISS` and the caller takes the general path, which is what
decides everything (recompiles, graph breaks, logs); the specialized call never decides
anything itself. Signatures with side effects (in-place writes, `.grad` updates,
training steps) keep the general path.
"""
from __future__ import annotations

from typing import Any, Callable

from .._source import define
from ..autograd.grad_mode import _state as grad_state
from ..tensor import Tensor
from ..tracer.context import current
from ..tracer.make_ir import _Leaf

MISS = object()        # returned by a specialized call whose checks failed


_SIMPLE = (bool, int, float, complex, str, type(None))     # guarded values (see api._guards)
_MISSING = object()


def specialize(entry: Any, key: tuple, n_args: int, sources: list[tuple[str, Any, str]],
               disabled: Callable[[], bool]) -> Callable[[tuple], Any] | None:
    """The specialized call for `entry` (an `api.Entry`) under signature `key`, or None
    when the signature needs the general path. `sources` are where the guarded Python
    constants live (`CompiledFunction._guard_sources`; the key holds the values they had);
    `disabled` is `api.compile_disabled`."""
    (structure, _), sig, grad_on = key
    if entry.graph_break is not None or entry.effects or entry.self_contained or \
            structure != ("fast", n_args):
        return None
    function = entry.function
    inputs = [f"a{i}" for i in range(n_args)] + [f"c{j}" for j in range(len(entry.captured))]
    consts: dict[str, Any] = {"MISS": MISS, "Tensor": Tensor, "grad_state": grad_state,
                              "current": current, "disabled": disabled}
    checks = []
    params = entry.graph.params                 # the arguments', then the captured tensors
    for i, (shape, _, requires_grad) in enumerate(sig):
        consts[f"D{i}"] = params[i].dtype
        checks.append(f"a{i}.__class__ is not Tensor or a{i}._shape != {shape!r} or "
                      f"a{i}._dtype is not D{i} or a{i}._requires_grad is not {requires_grad}")
    for j, c in enumerate(entry.captured):
        consts[f"c{j}"] = c
        checks.append(f"c{j}._requires_grad is not {c._requires_grad}")
    checks.append(f"grad_state.enabled is not {bool(grad_on)}")
    checks.append("current() is not None or disabled()")
    lines = ["def call(args):",
             f"    if len(args) != {n_args}:",
             "        return MISS"]
    if n_args:
        lines.append(f"    {', '.join(inputs[:n_args])}, = args")
    lines.append("    if (" + " or\n            ".join(checks) + "):")
    lines.append("        return MISS")
    guard_lines = _guard_checks(sources, consts)
    if guard_lines is None:
        return None
    if guard_lines:
        lines += ["    try:", *guard_lines, "    except ValueError:", "        return MISS"]
    if entry.guards:
        consts["stale"] = entry.stale
        lines += ["    if stale() is not None:", "        return MISS"]
    for k, refresh in enumerate(entry.before_call):
        consts[f"before{k}"] = refresh
        lines.append(f"    before{k}()")
    # the same captured tensors' requires_grad and grad mode as when the key was made
    wrt = function.wrt_of([_Placeholder(rg, p.dtype) for (_, _, rg), p in zip(sig, params)]
                          + entry.captured) if grad_on else ()
    args = ", ".join(inputs)
    if not wrt:
        consts["run"] = function.plain().runner(n_args)
        lines.append(f"    o = run({args})")
    else:
        d = function.differentiated(wrt)
        consts.update(run=d.forward.runner(n_args), record=function.record, d=d)
        lines.append(f"    o = record(d, {wrt!r}, ({args}{',' if len(inputs) == 1 else ''}), "
                     f"run({args}))")
    result = _expression(entry.out_structure, consts)
    if result is None:
        return None
    lines.append(f"    return {result}")
    return define("\n".join(lines) + "\n", f"<llgrad call {entry.graph.name}>", consts,
                  "call")


def _guard_checks(sources: list[tuple[str, Any, str]], consts: dict[str, Any]
                  ) -> list[str] | None:
    """Lines that return MISS unless each guarded global or closure value is what it is
    now: an equal value of the same class for a constant the key holds, any value that
    is not such a constant otherwise (stricter than the key's comparison, never looser)."""
    consts.update(SIMPLE=_SIMPLE, MISSING=_MISSING)
    lines = []
    for k, (name, where, kind) in enumerate(sources):
        consts[f"W{k}"] = where
        if kind == "global":
            read, value = f"W{k}.get({name!r}, MISSING)", where.get(name, _MISSING)
        else:
            try:
                read, value = f"W{k}.cell_contents", where.cell_contents
            except ValueError:                  # an empty cell: leave it to the key
                return None
        if value.__class__ in _SIMPLE:
            consts[f"V{k}"] = value
            lines += [f"        v = {read}",
                      f"        if v.__class__ is not V{k}.__class__ or v != V{k}:",
                      "            return MISS"]
        else:
            lines += [f"        if {read}.__class__ in SIMPLE:", "            return MISS"]
    return lines


class _Placeholder:
    """Stands for an argument in `wrt_of`: only requires_grad and dtype are read."""

    __slots__ = ("_requires_grad", "_dtype")

    def __init__(self, requires_grad: bool, dtype: Any):
        self._requires_grad, self._dtype = requires_grad, dtype


def _expression(s: Any, consts: dict[str, Any]) -> str | None:
    """Python source rebuilding the output structure `s` (a `make_ir.Structure`) from the
    list `o` of outputs, as `tracer.make_ir._unflatten` does (None for a structure it
    does not write: dataclasses and registered nodes take the general path)."""
    slots = iter(s.slots)

    def const(value: Any) -> str:
        name = f"K{len(consts)}"
        consts[name] = value
        return name

    def walk(d: Any) -> str | None:
        if d.kind == "leaf":
            v = next(slots)
            return f"o[{v.index}]" if isinstance(v, _Leaf) else const(v)
        if d.kind == "none":
            return "None"
        items = [walk(c) for c in d.children]
        if any(i is None for i in items):
            return None
        if d.kind == "tuple":
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        if d.kind == "list":
            return f"[{', '.join(items)}]"
        if d.kind == "namedtuple":
            return f"{const(d.meta)}({', '.join(items)})"
        if d.kind == "dict" and d.meta[0] is dict:
            return "{" + ", ".join(f"{const(k)}: {e}" for k, e in zip(d.meta[1], items)) + "}"
        return None

    return walk(s.treedef)
