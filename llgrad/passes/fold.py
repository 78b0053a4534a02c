"""Constant folding: a node whose inputs are all `const` becomes a `const`.

The value is computed by the interpreter's own `run_node` (the op's NumPy reference, then
the cast to the node's dtype, with bfloat16 rounded to nearest even), so a folded graph
interprets to exactly the bits the unfolded one did. Two cases fold:

- the result is small (`MAX_ELEMENTS` elements or fewer) and so are the inputs: the
  payload lists every element, or one scalar if they are all the same;
- the result is uniform whatever its size: an elementwise op on uniform constants (run
  once, on 0-d values) or a view (`reshape`, `permute`, `expand`, `slice`, `flip`) of a
  uniform constant. Its payload is one scalar, so large fills cost nothing to keep.

Never folded: `param`/`const` themselves, ops without inputs and the RANDOM group (a
generator is cheaper to run than its output is to store, and its IR text is the readable
form), and any node whose reference raises (integer `0 ** -1`, an index out of bounds):
the error then surfaces when the graph runs, where the user can see it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import registry
from ..ir.graph import Graph, Node
from ..ir.interpret import run_node
from ..ir.registry import ELEMENTWISE, Group
from ..ir.types import TensorType
from .rewrite import Match, Pat, Rule, all_same, const_array, rewrite, uniform_value

__all__ = ["fold", "FOLD_RULES", "MAX_ELEMENTS", "payload_of"]

MAX_ELEMENTS = 1024  # largest non-uniform result that becomes a literal
MAX_INPUT_ELEMENTS = 1 << 16  # do not materialize huge inputs to fold a small result
_NEVER = frozenset({Group.PARAM, Group.CONST, Group.RANDOM, Group.COLLECTIVE})
_UNIFORM_VIEWS = frozenset({"reshape", "permute", "expand", "slice", "flip"})
_ERRORS = (ArithmeticError, ValueError, IndexError, TypeError, RuntimeError, KeyError)


def foldable(n: Node) -> bool:
    """Inputs all constant, at least one of them, and an op with a NumPy reference."""
    opdef = registry.get(n.op)
    return (
        bool(n.inputs)
        and opdef.group not in _NEVER
        and opdef.reference is not None
        and all(x.op == "const" for x in n.inputs)
    )


def payload_of(a: np.ndarray) -> Any:
    """A `const` payload for the values `a`: one Python scalar if all elements agree bit
    for bit, else nested lists of Python scalars (the registry freezes them to tuples)."""
    if a.size and all_same(a):
        return a.reshape(-1)[0].item()
    return a.tolist()


def _uniform_result(n: Node) -> np.ndarray | None:
    """The single value of a node that maps uniform constants to a uniform result."""
    if n.op in _UNIFORM_VIEWS:
        return uniform_value(n.inputs[0])
    if registry.get(n.op).group not in ELEMENTWISE:
        return None
    values = [uniform_value(x) for x in n.inputs]
    if any(v is None for v in values):
        return None
    stand_ins = tuple(Node("const", (), (), TensorType(x.dtype, ())) for x in n.inputs)
    scalar = Node(n.op, stand_ins, n.attrs, TensorType(n.dtype, ()), n.loc)
    return run_node(scalar, values)  # type: ignore[arg-type]


def _small_result(n: Node) -> np.ndarray | None:
    if n.type.numel > MAX_ELEMENTS or any(x.type.numel > MAX_INPUT_ELEMENTS for x in n.inputs):
        return None
    return run_node(n, [const_array(x) for x in n.inputs])


def fold_node(m: Match) -> Node | None:
    n = m.node
    try:
        value = _uniform_result(n)
        if value is not None and n.type.numel:
            return m.const(value.item())
        value = _small_result(n)
    except _ERRORS:
        return None
    if value is None:
        return None
    return m.const(payload_of(value))


FOLD_RULES: tuple[Rule, ...] = (
    Rule(
        "fold",
        Pat(where=foldable),
        fold_node,
        "an op on constants -> the constant it computes (small or uniform results)",
    ),
)


def fold(g: Graph) -> Graph:
    """Constant folding with the interpreter's references: exact to the bit (bfloat16
    and float16 included), limited to small or uniform results."""
    return rewrite(g, FOLD_RULES)
