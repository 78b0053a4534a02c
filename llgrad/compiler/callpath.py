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
anything itself. Arguments that are not tensors (a module, an optimizer, a number) are
checked by identity (numbers and strings by class and value). Side effects (in-place
writes, `.grad` updates: a whole training step) are written out as statements after the
call, as `api._apply_effects` would replay them.
"""

from __future__ import annotations

from typing import Any, Callable

from .._keys import number_key
from .._source import define
from ..dispatch.grad_mode import _state as grad_state
from ..eager.elementwise import copy_into
from ..ir import dtypes as dt
from ..schedule.layout import contiguous_strides
from ..tensor import DENSE_CLASSES
from ..tracer.context import current
from ..tracer.make_ir import _Leaf

MISS = object()  # returned by a specialized call whose checks failed


_SIMPLE = (bool, int, float, complex, str, type(None))  # guarded values (see api._guards)
_SIGNED = (float, complex)  # compared by `number_key`: signed zeros, NaN
_MISSING = object()


def specialize(
    entry: Any,
    key: tuple,
    args: tuple,
    sources: list[tuple[str, Any, str]],
    disabled: Callable[[], bool],
) -> Callable[[tuple], Any] | None:
    """The specialized call for `entry` (an `api.Entry`) under signature `key`, made from
    the positional `args` that produced the key, or None when the signature needs the
    general path. `sources` are where the guarded Python constants live
    (`CompiledFunction._guard_sources`; the key holds the values they had); `disabled` is
    `api.compile_disabled`."""
    (structure, _), sig, grad_on = key
    n_args = len(args)
    if entry.graph_break is not None or not _flat(structure, args):
        return None
    function = entry.function
    n_leaves = len(sig)
    names = [f"a{i}" for i in range(n_args)]
    tensors = [names[i] for i in range(n_args) if args[i].__class__ in DENSE_CLASSES]
    inputs = tensors + [f"c{j}" for j in range(len(entry.captured))]
    consts: dict[str, Any] = {
        "MISS": MISS,
        "DENSE": DENSE_CLASSES,
        "grad_state": grad_state,
        "current": current,
        "disabled": disabled,
    }
    checks = []
    params = entry.graph.params  # the arguments', then the captured tensors
    for i, (a, (shape, _, requires_grad)) in enumerate(zip(tensors, sig)):
        consts[f"D{i}"] = params[i].dtype
        checks.append(
            f"{a}.__class__ not in DENSE or {a}._shape != {shape!r} or "
            f"{a}._dtype is not D{i} or {a}._requires_grad is not {requires_grad}"
        )
    for i, a in enumerate(args):
        if a.__class__ in DENSE_CLASSES:
            continue
        consts[f"K{i}"] = a
        if a.__class__ in _SIGNED:  # -0.0 is not 0.0 here (`_keys.number_key`)
            consts.update({"KEY": number_key, f"KK{i}": number_key(a)})
            checks.append(f"a{i}.__class__ is not K{i}.__class__ or KEY(a{i}) != KK{i}")
        else:
            checks.append(
                f"a{i}.__class__ is not K{i}.__class__ or a{i} != K{i}"
                if a.__class__ in _SIMPLE
                else f"a{i} is not K{i}"
            )
    for j, c in enumerate(entry.captured):
        consts[f"c{j}"] = c
        checks.append(f"c{j}._requires_grad is not {c._requires_grad}")
    consts.update(default_dtype=dt._default_dtype, DEFAULT=dt.get_default_dtype())
    checks.append("default_dtype[0] is not DEFAULT")
    checks.append(f"grad_state.enabled is not {bool(grad_on)}")
    checks.append("current() is not None or disabled()")
    lines = ["def call(args):", f"    if len(args) != {n_args}:", "        return MISS"]
    if n_args:
        lines.append(f"    {', '.join(names)}, = args")
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
    if entry.written:
        written = _written_checks(entry, args, inputs, consts)
        if written is None:
            return None
        lines += written
    for k, refresh in enumerate(entry.before_call):
        consts[f"before{k}"] = refresh
        lines.append(f"    before{k}()")
    # the same captured tensors' requires_grad and grad mode as when the key was made
    wrt = (
        function.wrt_of(
            [_Placeholder(rg, p.dtype) for (_, _, rg), p in zip(sig, params)] + entry.captured
        )
        if grad_on and not entry.self_contained
        else ()
    )
    call = ", ".join(inputs)
    if not wrt:
        consts["run"] = function.plain().runner(n_leaves)
        run = f"run({call})"
    else:
        consts["dcall"] = function.diff_call(wrt, n_leaves).fast
        run = f"dcall({call})"
    if entry.self_contained and grad_on:
        # a training step (backward() and updates inside): no autodiff around it
        lines += [
            "    grad_state.enabled = False",
            "    try:",
            f"        o = {run}",
            "    finally:",
            "        grad_state.enabled = True",
        ]
    else:
        lines.append(f"    o = {run}")
    effects = _effect_lines(entry, tensors, consts)
    if effects is None:
        return None
    lines += effects
    result = _expression(entry.out_structure, consts)
    if result is None:
        return None
    lines.append(f"    return {result}")
    return define("\n".join(lines) + "\n", f"<llgrad call {entry.graph.name}>", consts, "call")


def _flat(structure: Any, args: tuple) -> bool:
    """Whether the key's argument structure is `args` itself, each argument one pytree
    leaf: a tensor, or a constant the specialized call can check by identity or (numbers,
    strings) by class and value."""
    if structure == ("fast", len(args)):
        return True
    if structure[0] == "fast":
        return False
    slots = structure[1]
    if len(slots) != len(args):
        return False
    n = 0
    for a, slot in zip(args, slots):
        if a.__class__ in DENSE_CLASSES:
            if slot != ("T", n):
                return False
            n += 1
        elif slot[0] != "C" or slot[2] is not a:
            return False
    return True


def _written_checks(
    entry: Any, args: tuple, inputs: list[str], consts: dict[str, Any]
) -> list[str] | None:
    """Lines that return MISS when a tensor the graph writes in place overlaps itself or
    shares memory with another input (the general path then runs the function eagerly,
    see `api._aliases_a_written_input`); None when that is already so."""
    values = [a for a in args if a.__class__ in DENSE_CLASSES] + list(entry.captured)
    if len({id(x._storage) for x in values}) != len(values):
        return None
    lines = []
    for w in entry.written:
        x = values[w]
        strides = contiguous_strides(x._shape)
        if x._strides != strides:
            return None
        lines.append(f"    if {inputs[w]}._strides != {strides!r}:")
        lines.append("        return MISS")
    if len(values) > 1:
        lines.append(
            f"    if len({{{', '.join(f'{v}._storage' for v in inputs)}}}) != {len(values)}:"
        )
        lines.append("        return MISS")
    return lines


def _effect_lines(entry: Any, tensors: list[str], consts: dict[str, Any]) -> list[str] | None:
    """The entry's side effects written out (what `api._apply_effects` does for them):
    in-place writes (nothing to copy when the graph wrote the target's own memory) and
    `.grad` assignments, from the outputs after the function's own."""
    lines, k = [], entry.n_outputs
    for n, e in enumerate(entry.effects):
        if e.target is not None:
            consts[f"E{n}"] = e.target
            target = f"E{n}"
        elif e.kind != "grad_none" and e.leaf < len(tensors):
            target = tensors[e.leaf]
        else:
            return None
        if e.kind == "write":
            consts["copy_into"] = copy_into
            lines += [
                f"    v = o[{k}]",
                f"    if v._storage is not {target}._storage or v._offset != {target}._offset:",
                f"        copy_into({target}, v.detach())",
                f"    {target}._storage.version += 1",
            ]
            k += 1
        elif e.kind == "grad":
            # a self-contained step's outputs are fresh tensors outside autograd
            lines.append(
                f"    {target}._grad = o[{k}]"
                if entry.self_contained
                else f"    {target}._grad = o[{k}].detach()"
            )
            k += 1
        else:
            lines.append(f"    {target}._grad = None")
    return lines


def _guard_checks(sources: list[tuple[str, Any, str]], consts: dict[str, Any]) -> list[str] | None:
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
            except ValueError:  # an empty cell: leave it to the key
                return None
        if value.__class__ in _SIGNED:
            consts.update({"KEY": number_key, f"V{k}": value, f"VK{k}": number_key(value)})
            lines += [
                f"        v = {read}",
                f"        if v.__class__ is not V{k}.__class__ or KEY(v) != VK{k}:",
                "            return MISS",
            ]
        elif value.__class__ in _SIMPLE:
            consts[f"V{k}"] = value
            lines += [
                f"        v = {read}",
                f"        if v.__class__ is not V{k}.__class__ or v != V{k}:",
                "            return MISS",
            ]
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
