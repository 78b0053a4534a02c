"""Fold a transpose into the matmul that produces it: (A B)^T = B^T A^T.

Autodiff produces weight gradients as `x^T g` and then transposes them into the weight's
layout (`permute(matmul(...))`); materializing that transpose costs a full copy kernel per
layer. Swapping the operands lets the matmul write the transposed layout itself, and the
operands' transposes are views that BLAS reads without copies. Only a matmul whose one user
is the transpose is rewritten (otherwise the product would be computed twice).
"""

from __future__ import annotations

from ..ir.graph import Graph, Node, make_node
from .rewrite import replace_nodes


def _swap_last_two(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 2)) + (rank - 1, rank - 2)


def _is_last_two_swap(n: Node) -> bool:
    perm = tuple(p % len(n.shape) for p in n.attr("perm")) if n.shape else ()
    return len(perm) >= 2 and perm == _swap_last_two(len(perm))


def fold_transposed_matmul(g: Graph) -> Graph:
    """permute(matmul(a, b)) swapping the last two axes -> matmul(b^T, a^T), when the
    product has no other user: the transpose is never materialized."""
    users = g.users()
    returned = set(g.outputs)  # a graph output is a use too

    def replace(n: Node, inputs: tuple[Node, ...]) -> Node | None:
        m = n.inputs[0] if n.op == "permute" else None
        if (
            m is None
            or m.op != "matmul"
            or not _is_last_two_swap(n)
            or len(users[m]) != 1
            or m in returned
            or any(x.type.ndim != m.type.ndim for x in m.inputs)
        ):
            return None
        a, b = inputs[0].inputs  # the product on its (possibly replaced) operands
        bt = make_node("permute", (b,), {"perm": _swap_last_two(b.type.ndim)}, n.loc)
        at = make_node("permute", (a,), {"perm": _swap_last_two(a.type.ndim)}, n.loc)
        return make_node("matmul", (bt, at), {}, m.loc)

    return replace_nodes(g, replace)
