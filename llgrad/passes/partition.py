"""Partition a joint graph into a forward graph and a backward graph.

The forward graph computes the outputs and the residuals the backward needs; the backward
graph takes the residuals and the cotangents and computes the gradients. A residual that
is a cheap elementwise function of other residuals or primals is recomputed in the
backward instead of stored when that saves bytes (AOTAutograd's min-cut idea in its
simplest greedy form); the report says how many bytes that saved.

Primals are never copied into residuals. A primal the backward needs (or a view of one,
or an elementwise function of primals that the backward can recompute) is passed to the
backward graph by reference: `residual_sources` says, for each backward residual
parameter, whether it is forward output `("out", j)` (j counted among the residual
outputs) or primal `("in", i)`. The caller keeps those inputs as saved tensors, so an
in-place change of one before backward raises the same error eager autograd raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..ir.graph import Graph, Node
from ..ir.registry import ELEMENTWISE, Group


@dataclass
class Partition:
    forward: Graph  # params: primals; outputs: (*outputs, *residuals)
    backward: Graph  # params: (*residuals, *cotangents); outputs: grads
    n_outputs: int
    n_residuals: int
    residual_bytes: int
    recomputed_bytes: int  # bytes of residuals the backward recomputes instead of storing
    # per backward residual param: ("out", j) = forward residual output j, or ("in", i) =
    # primal i passed by reference (never copied)
    residual_sources: tuple[tuple[str, int], ...] = ()

    @property
    def input_residuals(self) -> tuple[int, ...]:
        """The primals the backward reads by reference."""
        return tuple(i for kind, i in self.residual_sources if kind == "in")

    def backward_residuals(
        self, primals: Sequence[Any], residual_outputs: Sequence[Any]
    ) -> list[Any]:
        """The backward graph's residual arguments, from the forward's inputs and its
        residual outputs (the forward outputs after the first `n_outputs`)."""
        return [
            residual_outputs[k] if kind == "out" else primals[k]
            for kind, k in self.residual_sources
        ]

    def __str__(self) -> str:
        return (
            f"partition: {self.n_residuals} residuals, {self.residual_bytes} bytes saved "
            f"for backward, {self.recomputed_bytes} bytes recomputed instead\n"
            f"{self.forward}\n{self.backward}"
        )


def _nbytes(n: Node) -> int:
    return n.type.numel * n.type.dtype.itemsize


def _recomputable(g: Group) -> bool:
    return g in ELEMENTWISE or g in (Group.CONST, Group.MOVEMENT)


FRONTIER_NODES = 64  # elementwise nodes one residual's recompute may span


def _frontier(
    n: Node, stored: set[Node], kind: dict[Node, Group], exact: set[Node] = frozenset()
) -> set[Node] | None:
    """What `n` is recomputed from: walking up its elementwise (and movement) ancestors,
    the first nodes that are primals, constants, already stored, or not elementwise (a
    reduction's small result, say). None if the walk meets a random op (recomputing would
    draw new numbers). A walk longer than FRONTIER_NODES nodes stops there and returns the
    cut it reached (what it found plus the nodes it had not yet expanded), so the caller's
    loop collapses a long chain FRONTIER_NODES nodes per step. Walking the whole pointwise
    cone, not one step, lets `s * (1 - s)` with `s = sigmoid(x)` collapse onto `x`, and a
    layer_norm's output onto its input and the row statistics."""
    frontier: set[Node] = set()
    seen: set[Node] = set()
    stack = list(n.inputs)
    walked = 0
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        g = kind[i]
        if g is Group.RANDOM:
            return None
        if (
            g is Group.CONST
            or g is Group.PARAM
            or i in stored
            or not _recomputable(g)
            or not i.inputs
            or i in exact
        ):
            frontier.add(i)
            continue
        walked += 1
        if walked > FRONTIER_NODES:  # a long chain: stop at the cut reached so far
            return frontier | {j for j in i.inputs + tuple(stack) if j not in seen}
        stack.extend(i.inputs)
    return frontier


def _compared_exactly(
    nodes: Sequence[Node], backward_side: set[Node], kind: dict[Node, Group]
) -> set[Node]:
    """Forward values compared for equality (amax's gradient tests `x == amax(x)`): they
    are stored, never recomputed, since a recomputation fused differently (an FMA
    contracted in one kernel and not in the other) can differ in the last bit from the
    value the forward reduced, and the comparison would then select nothing."""
    exact: set[Node] = set()
    for n in nodes:
        if n.op in ("eq", "ne"):
            stack = list(n.inputs)
            while stack:
                i = stack.pop()
                if i in exact or i in backward_side or kind[i] is Group.CONST:
                    continue
                exact.add(i)
                if kind[i] is Group.MOVEMENT:
                    stack.extend(i.inputs)
    return exact


def partition(joint: Graph, n_primals: int, n_outputs: int) -> Partition:
    primals = joint.params[:n_primals]
    cotangents = set(joint.params[n_primals:])
    # which nodes depend on a cotangent: those belong to the backward
    backward_side: set[Node] = set(cotangents)
    for n in joint.nodes:
        if any(i in backward_side for i in n.inputs):
            backward_side.add(n)
    outputs = joint.outputs[:n_outputs]
    grads = joint.outputs[n_outputs:]
    # boundary: forward values that backward nodes read, and grads computed in forward
    boundary: list[Node] = []
    seen: set[Node] = set()

    def need(n: Node) -> None:
        if n.group is Group.CONST:  # rebuilt in the backward graph, never stored
            return
        if n not in seen and n not in backward_side:
            seen.add(n)
            boundary.append(n)

    for n in joint.nodes:
        if n in backward_side:
            for i in n.inputs:
                need(i)
    for gr in grads:
        need(gr)
    # recompute elementwise residuals from what they are computed from when that stores
    # fewer bytes (see `_frontier`)
    recomputed = 0
    changed = True
    stored = set(boundary)
    kind = {m: m.group for m in joint.nodes}  # (a registry lookup per access otherwise)
    exact = _compared_exactly(joint.nodes, backward_side, kind)
    position = {m: k for k, m in enumerate(joint.nodes)}
    while changed:
        changed = False
        # largest first; among equal sizes the latest first, so a chain collapses from its
        # end in one sweep (each walk stops at the stored value just above it) instead of
        # one step per sweep from an arbitrary place
        for n in sorted(stored, key=lambda m: (-_nbytes(m), -position[m])):
            if (
                n not in stored
                or kind[n] is Group.PARAM
                or not _recomputable(kind[n])
                or not n.inputs
                or n in exact
            ):
                continue
            frontier = _frontier(n, stored, kind, exact)
            if frontier is None:
                continue
            # constants are rebuilt in the backward for free and primals are passed by
            # reference: neither costs a stored byte. `<=`: an elementwise chain collapses
            # onto its input (AOTAutograd's min-cut finds the same cut for pointwise
            # chains); the backward fuses the recompute
            cost_in = sum(
                _nbytes(i)
                for i in frontier
                if i not in stored and kind[i] not in (Group.CONST, Group.PARAM)
            )
            if cost_in <= _nbytes(n):
                stored.remove(n)
                stored.update(i for i in frontier if kind[i] is not Group.CONST)
                recomputed += _nbytes(n)
                changed = True
    primal_index = {p: i for i, p in enumerate(primals)}
    residuals = [p for p in primals if p in stored] + [
        n for n in joint.nodes if n in stored and n not in primal_index
    ]
    stored_outputs = [r for r in residuals if r not in primal_index]
    out_index = {r: j for j, r in enumerate(stored_outputs)}
    sources = tuple(
        ("in", primal_index[r]) if r in primal_index else ("out", out_index[r]) for r in residuals
    )
    fwd = Graph(f"{joint.name}_forward", primals, list(outputs) + stored_outputs)
    # backward graph: residuals become params; everything needed from them is rebuilt
    mapping: dict[Node, Node] = {}
    bparams = []
    for k, r in enumerate(residuals):
        p = Node("param", (), (("name", f"r{k}"),), r.type)
        mapping[r] = p
        bparams.append(p)
    for k, c in enumerate(joint.params[n_primals:]):
        p = Node("param", (), (("name", c.attr("name")),), c.type)
        mapping[c] = p
        bparams.append(p)

    def rebuild(n: Node) -> Node:
        stack = [n]
        while stack:
            top = stack[-1]
            if top in mapping:
                stack.pop()
                continue
            missing = [i for i in top.inputs if i not in mapping]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            mapping[top] = Node(
                top.op, tuple(mapping[i] for i in top.inputs), top.attrs, top.type, top.loc
            )
        return mapping[n]

    bwd = Graph(f"{joint.name}_backward", bparams, [rebuild(gr) for gr in grads])
    return Partition(
        fwd,
        bwd,
        n_outputs,
        len(stored_outputs),
        sum(_nbytes(r) for r in stored_outputs),
        recomputed,
        sources,
    )
