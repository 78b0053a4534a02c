"""Decompose: composite ops -> primitives, the last step before fusion and codegen.

Tracing keeps a composite (softmax, layer_norm, cross_entropy, ...) as one node so that
autodiff applies the composite's own derivative rule; code generation only knows
primitives, so this pass replaces every composite node by its decomposition, written once
in the op registry with llgrad's functions and run here on tracer values.
"""

from __future__ import annotations

from .. import functions as F
from ..dispatch.grad_mode import no_grad
from ..ir.graph import Graph, Node, make_node
from ..ir.registry import Group
from ..tracer.context import TraceContext
from ..tracer.tensor import TracerTensor


def decompose(g: Graph) -> Graph:
    if not any(n.group is Group.COMPOSITE for n in g.nodes):
        return g

    ctx = TraceContext(g.name, constant_creations=True)
    ctx.expand_composites = True
    values: dict[Node, TracerTensor] = {}
    for p in g.params:
        values[p] = ctx.param(p.type, p.attr("name"))
    with ctx, no_grad():
        for node in g.nodes:
            if node in values:
                continue
            operands = [values[i] for i in node.inputs]
            if node.group is Group.COMPOSITE:
                out = node.opdef.decompose(F, *operands, **node.attr_dict)
                if out._dtype is not node.type.dtype:
                    out = out.to(node.type.dtype)
            else:
                out = TracerTensor.of(
                    make_node(node.op, tuple(o._node for o in operands), node.attr_dict, node.loc),
                    ctx,
                )
            if out._shape != node.type.shape:
                raise AssertionError(
                    f"decompose: {node.op} decomposed to {out._shape}, expected {node.type.shape}"
                )
            values[node] = out
    if ctx.captured:
        raise AssertionError(
            f"decompose: a decomposition captured concrete tensors "
            f"({len(ctx.captured)}); decompositions must be traceable"
        )
    return ctx.graph([ctx.node_of(values[o]) for o in g.outputs])
