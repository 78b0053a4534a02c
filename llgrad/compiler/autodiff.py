"""Symbolic autodiff: a forward graph -> the joint forward + backward graph.

The pass replays the graph on tracer tensors with the tape on, then runs the eager
autograd engine on them. The engine applies the registry's vjp rules, which are written
with llgrad's functions; on tracers those functions emit IR. So the backward graph comes
from the same rules that eager backward uses: there is no second set of derivatives.
"""

from __future__ import annotations

from typing import Sequence

from ..dispatch.apply import apply
from ..tape.engine import execute
from ..dispatch.grad_mode import enable_grad, no_grad
from ..ir.graph import Graph, Node, make_node
from ..tensor import Tensor
from ..tracer.context import TraceContext, _tls
from ..tracer.tensor import TracerTensor


def replay(
    g: Graph,
    ctx: TraceContext,
    params: Sequence[TracerTensor],
    grad_locs: dict[int, tuple[object, str | None]] | None = None,
) -> list[TracerTensor]:
    """Run `g`'s nodes again through `apply` (so a tape records them); returns outputs.
    Every node made keeps the replayed node's location (its op's line, not the line that
    called the compiled function); `grad_locs` collects, per backward node recorded, that
    location for the nodes its rule emits (`differentiate`)."""
    values: dict[Node, Tensor] = dict(zip(g.params, params))
    outer = _tls.location
    try:
        for node in g.nodes:
            if node in values:
                continue
            if not node.inputs:  # const, iota: no operands to dispatch on
                values[node] = TracerTensor.of(
                    make_node(node.op, (), node.attr_dict, node.loc), ctx
                )
                continue
            operands = [values[i] for i in node.inputs]
            _tls.location = node.loc or outer
            if node.op == "stop_gradient":  # a gradient cut: not on the tape
                with no_grad():
                    values[node] = apply(node.op, operands, node.attr_dict, _no_eager, None)
                continue
            values[node] = apply(node.op, operands, node.attr_dict, _no_eager, None)
            fn = getattr(values[node], "grad_fn", None)
            if grad_locs is not None and fn is not None and node.loc is not None:
                grad_locs.setdefault(id(fn), (fn, node.loc))
    finally:
        _tls.location = outer
    return [values[o] for o in g.outputs]


def _locate_backward(grad_locs: dict[int, tuple[object, str | None]]) -> list:
    """Hooks that give the nodes each backward rule emits its forward op's location."""
    handles = []
    for fn, loc in grad_locs.values():

        def before(grads: object, loc: str | None = loc) -> None:
            _tls.location = loc

        def after(grad_inputs: object, grad_outputs: object) -> None:
            _tls.location = None

        try:
            handles.append(fn.register_prehook(before))
            handles.append(fn.register_hook(after))
        except (AttributeError, RuntimeError):
            continue
    return handles


def _no_eager(op: str, operands: object, attrs: object) -> Tensor:
    raise AssertionError(f"replay: '{op}' reached eager execution (no tracer operand)")


def _fresh(name: str, taken: set[str]) -> str:
    """`name`, or `name_2`, `name_3`, ... whichever is not taken yet (then taken)."""
    candidate, k = name, 1
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    taken.add(candidate)
    return candidate


def differentiate(
    g: Graph, wrt: Sequence[int], name: str | None = None, *, unit_cotangents: bool = False
) -> Graph:
    """The joint graph of `g` with respect to params `wrt`.

    Params: `(*g.params, *cotangents)`, one cotangent per output. Outputs:
    `(*g.outputs, *grads)`, one gradient per param in `wrt` (zeros when unused). Outputs
    that are not floating point get a cotangent param too (unused), to keep positions simple.
    With `unit_cotangents`, every cotangent is the constant 1 instead of a param (params:
    `g.params` only): a scalar loss's value and gradients in one graph.
    """
    ctx = TraceContext(name or f"{g.name}_joint", constant_creations=True)
    params = [ctx.param(p.type, p.attr("name")) for p in g.params]
    for i in wrt:
        params[i]._requires_grad = True
    grad_locs: dict[int, tuple[object, str | None]] = {}
    with ctx, enable_grad():
        outs = replay(g, ctx, params, grad_locs)
        hooks = _locate_backward(grad_locs)
        taken = {p.attr("name") for p in g.params}
        cts = [
            ctx.constant(1, o.dtype, o.shape)
            if unit_cotangents
            else ctx.param(o.type, _fresh(f"ct{k}", taken))
            for k, o in enumerate(g.outputs)
        ]
        roots, grads = [], []
        for o, ct in zip(outs, cts):
            if o._requires_grad:
                roots.append(o)
                grads.append(ct)
        wanted = [params[i] for i in wrt]
        try:
            captured = (
                execute(
                    roots,
                    grads,
                    retain_graph=False,
                    create_graph=False,
                    capture=wanted,
                    accumulate=False,
                )
                if roots
                else [None] * len(wanted)
            )
        finally:
            _tls.location = None
            for h in hooks:
                h.remove()
        results = []
        for p, gr in zip(wanted, captured):
            results.append(gr if gr is not None else ctx.constant(0, p._dtype, p._shape))
    nodes = [ctx.node_of(o) for o in outs] + [ctx.node_of(r) for r in results]
    return ctx.graph(nodes)
