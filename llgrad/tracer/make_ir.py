"""`lg.make_ir(f)(*args)`: the traced IR graph of `f` for these arguments (like make_jaxpr)."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from .. import pytree
from ..dispatch.grad_mode import is_grad_enabled
from ..ir.graph import Graph
from ..ir.types import TensorType
from ..tensor import Tensor
from .context import TraceContext
from .tensor import TracerTensor


class Structure:
    """Where a call's tensors sit in its arguments or outputs: the pytree structure, and
    per pytree leaf either `_Leaf(i)` (the i-th tensor) or the non-tensor value itself
    (a number, a string: part of the structure, so part of the signature)."""

    __slots__ = ("treedef", "slots")

    def __init__(self, treedef: pytree.TreeDef, slots: tuple[Any, ...]):
        self.treedef, self.slots = treedef, slots


def _flatten(x: Any, out: list[Tensor]) -> Structure:
    """The structure of `x`; its tensors are appended to `out` in order."""
    values, treedef = pytree.flatten(x)
    slots = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
            slots.append(_Leaf(len(out) - 1))
        else:
            slots.append(v)
    return Structure(treedef, tuple(slots))


def _unflatten(s: Structure, leaves: list[Any]) -> Any:
    return pytree.unflatten(
        s.treedef, [leaves[v.index] if isinstance(v, _Leaf) else v for v in s.slots]
    )


class _Leaf:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _param_names(fn: Callable[..., Any]) -> list[str]:
    try:
        names = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        names = []
    return names


class Effect:
    """A side effect of a traced call, replayed after each compiled call.

    kind "write": copy the output into `target` (an in-place write to a captured tensor),
      or into input leaf `leaf` (target None: an argument written in place);
    kind "grad": set `.grad` of `target` (a captured tensor) or of input leaf `leaf`;
    kind "grad_none": set `target.grad = None` (no output).
    """

    __slots__ = ("kind", "target", "leaf")

    def __init__(self, kind: str, target: Tensor | None, leaf: int | None = None):
        self.kind, self.target, self.leaf = kind, target, leaf


def trace(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], name: str | None = None
) -> tuple[Graph, TraceContext, Any]:
    """Trace `fn(*args, **kwargs)`; returns (graph, context, output structure).

    Side effects on tensors outside the trace (in-place writes, `.grad` from a backward()
    inside `fn`) become extra graph outputs listed in `ctx.effects`, after the function's
    own outputs; the concrete tensors themselves are left as they were.
    """
    leaves: list[Tensor] = []
    structure = _flatten((args, kwargs), leaves)
    ctx = TraceContext(name or getattr(fn, "__name__", "fn").strip("<>") or "fn")
    ctx.argument_storages = {id(t._storage): i for i, t in enumerate(leaves)}
    arg_names = _param_names(fn)
    tracers = []
    for i, t in enumerate(leaves):
        base = arg_names[i] if i < len(arg_names) and len(leaves) == len(args) else f"a{i}"
        tr = ctx.param(TensorType(t._dtype, t._shape), base)
        tr._requires_grad = t._requires_grad and is_grad_enabled()
        tracers.append(tr)
    params = [tr._node for tr in tracers]
    try:
        with ctx:
            targs, tkwargs = _unflatten(structure, tracers)
            result = fn(*targs, **tkwargs)
        outs: list[Tensor] = []
        out_structure = _flatten(result, outs)
        nodes = [ctx.node_of(o) for o in outs]
        ctx.n_outputs = len(nodes)
        ctx.effects = []
        for target, node in ctx.mutated.values():
            ctx.effects.append(Effect("write", target))
            nodes.append(node)
        for i, tr in enumerate(tracers):
            if tr._node is not params[i]:  # an argument written in place
                ctx.effects.append(Effect("write", None, leaf=i))
                nodes.append(tr._node)
        for i, tr in enumerate(tracers):
            if tr._grad is not None:
                ctx.effects.append(Effect("grad", None, leaf=i))
                nodes.append(ctx.node_of(tr._grad))
        for target, before in ctx.grad_before.values():
            g = target._grad
            if g is before:
                continue
            if g is None:  # zero_grad(set_to_none=True)
                ctx.effects.append(Effect("grad_none", target))
            elif isinstance(g, TracerTensor):
                ctx.effects.append(Effect("grad", target))
                nodes.append(ctx.node_of(g))
            else:
                raise RuntimeError(
                    "a compiled function assigned a concrete tensor to .grad; "
                    "assign a computed value instead"
                )
        # a training step (backward() inside, parameters updated) is complete in itself;
        # other write-backs (the random generator's counter) leave autodiff as usual
        ctx.self_contained = any(
            e.kind != "write" or (e.target is not None and e.target._requires_grad)
            for e in ctx.effects
        )
    finally:
        for target, before in ctx.grad_before.values():
            target._grad = before  # tracers never leak into real tensors
    return ctx.graph(nodes), ctx, out_structure


def make_ir(fn: Callable[..., Any]) -> Callable[..., Graph]:
    """`make_ir(f)(*args)` returns the IR graph that tracing `f` on these arguments gives."""

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Graph:
        graph, _, _ = trace(fn, args, kwargs)
        return graph

    return traced
