"""Common-subexpression elimination: one node per distinct computation.

Two nodes are the same computation when they have the same op, the same (already merged)
input nodes, the same attributes and the same type. The first node in graph order is kept
(with its source location); later ones are replaced by it and their consumers rebuilt.

Details that keep the merge exact:

- attributes compare by type and bits: the constants `0`, `0.0`, `False` and `-0.0` stay
  distinct, while two NaN payloads are the same constant (the IR has one NaN);
- commutative ops (`add`, `mul`, `eq`, `ne`, logical and bitwise and/or/xor) also match
  with their two inputs swapped, since IEEE addition and multiplication commute bit for
  bit; `maximum`/`minimum` do not (`max(-0.0, +0.0)` returns one of its operands as is);
- RANDOM ops are merged like any other. In this IR a draw is a pure function of its
  operands (`uniform(seed, counter)`): two draws with the same seed and counter nodes
  hold the same numbers with or without CSE, so merging them changes nothing. A frontend
  that wants independent draws gives them different counters, and then they differ here.
- parameters are never merged: each is a distinct input of the signature.
"""

from __future__ import annotations

import math
from typing import Any, Hashable

from ..ir.dtypes import DType
from ..ir.graph import Graph, Node
from .rewrite import rebuild

__all__ = ["cse", "COMMUTATIVE", "node_key"]

COMMUTATIVE = frozenset(
    {
        "add",
        "mul",
        "eq",
        "ne",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
    }
)


def value_key(v: Any) -> Hashable:
    """A hashable key for an attribute value that tells apart what Python's `==` confuses
    (`0 == 0.0 == False`, `0.0 == -0.0`) and equates what it separates (NaN)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, float):
        return ("f", "nan" if math.isnan(v) else v.hex())
    if isinstance(v, complex):
        return ("c", value_key(v.real), value_key(v.imag))
    if isinstance(v, tuple):
        return ("t",) + tuple(value_key(x) for x in v)
    if isinstance(v, (str, DType)) or v is None:
        return ("o", type(v).__name__, v)
    raise TypeError(f"cse: no key for attribute value {v!r} ({type(v).__name__})")


def node_key(n: Node) -> Hashable:
    """What makes two nodes one computation; inputs by identity (they are merged first)."""
    inputs = tuple(id(x) for x in n.inputs)
    if n.op in COMMUTATIVE and len(inputs) == 2:
        inputs = tuple(sorted(inputs))
    attrs = tuple((k, value_key(v)) for k, v in n.attrs)
    return (n.op, inputs, attrs, n.type)


def cse(g: Graph) -> Graph:
    """Merge structurally identical nodes (see the module docstring for what counts);
    one pass in topological order reaches the fixpoint, since inputs merge first."""
    new: dict[int, Node] = {id(p): p for p in g.params}
    seen: dict[Hashable, Node] = {}
    for n in g.nodes:
        if id(n) in new:
            continue  # a parameter
        cur = rebuild(n, tuple(new[id(x)] for x in n.inputs))
        new[id(n)] = seen.setdefault(node_key(cur), cur)
    return Graph(g.name, g.params, tuple(new[id(o)] for o in g.outputs))
