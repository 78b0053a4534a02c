"""Dead-code elimination: keep only the nodes the outputs depend on.

`Graph(...)` already collects its nodes by walking back from the outputs, so a graph built
through the constructor holds no dead node. This pass makes that step explicit (and
visible as a stage of the pipeline) instead of leaving passes to rely on a side effect of
the constructor, and it repairs a graph whose `nodes` list was edited by hand.

Parameters always stay, used or not: they are the graph's signature, which callers (the
executor, autodiff's cotangent layout) index by position.
"""

from __future__ import annotations

from ..ir.graph import Graph, topological_order

__all__ = ["dce", "dead_nodes"]


def dead_nodes(g: Graph) -> int:
    """How many of `g.nodes` no output depends on (parameters are never dead)."""
    live = {id(n) for n in topological_order(g.params, g.outputs)}
    return sum(1 for n in g.nodes if id(n) not in live)


def dce(g: Graph) -> Graph:
    """The graph with only its parameters and the nodes its outputs depend on."""
    return Graph(g.name, g.params, g.outputs)
