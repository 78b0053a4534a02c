"""The verifier: re-check a graph's invariants after a pass rewrote it.

A `Builder` makes well-typed graphs, but passes assemble nodes by hand. `verify` checks
what every later stage relies on: nodes in topological order and inside the graph, arity,
attributes exactly as the op's spec normalizes them, every type equal to what the op's
shape rule infers, parameters uniquely named, outputs inside the graph. Errors name the
value as the printer would (`%3`), its op, its line in `print_graph(g)` and its source loc.
"""

from __future__ import annotations

from typing import Any

from . import registry
from .dtypes import DType
from .graph import Graph, Node
from .printer import IDENTIFIER, node_lines
from .types import TensorType

__all__ = ["verify", "VerificationError"]


class VerificationError(ValueError):
    """A broken invariant; `node`, `op` and `line` (in the printed graph) say where."""

    def __init__(
        self,
        reason: str,
        node: Any = None,
        name: str | None = None,
        line: int | None = None,
        graph: str = "",
    ):
        self.reason = reason
        self.node = node
        self.op = getattr(node, "op", None)
        self.line = line
        where = f"verify @{graph}"
        if node is not None:
            where += f": {name} = {self.op}" if name else f": {self.op}"
            if line is not None:
                where += f" (line {line}"
                loc = getattr(node, "loc", None)
                where += f", {loc})" if loc else ")"
        super().__init__(f"{where}: {reason}")


def verify(g: Graph) -> None:
    """Raise `VerificationError` at the first broken invariant; return None if all hold."""
    if not isinstance(g, Graph):
        raise TypeError(f"verify expects a Graph, got {type(g).__name__}")
    for n in list(g.params) + list(g.nodes) + list(g.outputs):
        if not isinstance(n, Node):
            raise VerificationError(
                f"expected a Node, found {type(n).__name__}: {n!r}", graph=g.name
            )
    _Verifier(g).run()


class _Verifier:
    def __init__(self, g: Graph):
        self.g = g
        self.lines = node_lines(g)
        self.names = _names(g)

    def fail(self, node: Any, reason: str) -> VerificationError:
        return VerificationError(
            reason, node, self.names.get(node, _foreign(node)), self.lines.get(node), self.g.name
        )

    def run(self) -> None:
        self.check_params()
        self.check_nodes()
        self.check_outputs()

    def check_params(self) -> None:
        in_graph = {id(n) for n in self.g.nodes}
        seen: dict[str, Node] = {}
        for p in self.g.params:
            if p.op != "param":
                raise self.fail(p, "a graph parameter must be a 'param' node")
            if p.inputs:
                raise self.fail(p, f"a parameter has no inputs, found {len(p.inputs)}")
            name = p.attrs[0][1] if len(p.attrs) == 1 and p.attrs[0][0] == "name" else None
            if not isinstance(name, str):
                raise self.fail(
                    p,
                    f"a parameter's attributes must be exactly (('name', str),), found {p.attrs!r}",
                )
            if not IDENTIFIER.match(name):
                raise self.fail(p, f"parameter name {name!r} is not a valid identifier")
            if name in seen:
                raise self.fail(p, f"two parameters are named {name!r}")
            seen[name] = p
            self.check_type(p)
            if id(p) not in in_graph:
                raise self.fail(p, "a parameter is missing from the graph's node list")

    def check_nodes(self) -> None:
        defined: set[int] = {id(p) for p in self.g.params}
        in_graph = {id(n) for n in self.g.nodes}
        params = set(defined)
        visited: set[int] = set()
        for n in self.g.nodes:
            if id(n) in visited:
                raise self.fail(n, "the node appears twice in the graph's node list")
            visited.add(id(n))
            if id(n) in params:
                continue
            self.check_node(n, defined, in_graph)
            defined.add(id(n))

    def check_node(self, n: Node, defined: set[int], in_graph: set[int]) -> None:
        if n.op not in registry.OPS:
            raise self.fail(n, f"op {n.op!r} is not in the registry")
        opdef = registry.OPS[n.op]
        if n.op == "param":
            raise self.fail(n, "a 'param' node that is not among the graph's parameters")
        for i, x in enumerate(n.inputs):
            if not isinstance(x, Node):
                raise self.fail(n, f"input {i} is not a Node: {x!r}")
            if id(x) not in defined:
                what = (
                    "is used before it is defined"
                    if id(x) in in_graph
                    else "is not a node of this graph"
                )
                raise self.fail(n, f"input {i} ({self.names.get(x, _foreign(x))}) {what}")
        if opdef.nin >= 0 and len(n.inputs) != opdef.nin:
            raise self.fail(n, f"{n.op} takes {opdef.nin} inputs, found {len(n.inputs)}")
        self.check_attrs(n, opdef)
        self.check_type(n)
        self.check_inferred(n, opdef)

    def check_attrs(self, n: Node, opdef: registry.OpDef) -> None:
        attrs = n.attrs
        if not isinstance(attrs, tuple) or not all(
            isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) for a in attrs
        ):
            raise self.fail(
                n, f"attributes must be a tuple of (name, value) pairs, found {attrs!r}"
            )
        given = dict(attrs)
        if len(given) != len(attrs):
            raise self.fail(n, f"an attribute is given twice: {[k for k, _ in attrs]}")
        defaults = {a.name: a.default for a in opdef.attrs}
        # normalize_attrs fills a missing optional attribute with its None default but
        # refuses an explicit None for non-OPT kinds, so leave those out before asking it.
        given = {
            k: v
            for k, v in given.items()
            if not (v is None and k in defaults and defaults[k] is None)
        }
        try:
            norm = opdef.normalize_attrs(given)
        except TypeError as e:
            raise self.fail(n, f"attributes do not match the op's spec: {e}") from None
        if not _same_attrs(norm, attrs):
            raise self.fail(
                n, f"attributes {attrs!r} are not in normal form; the op's spec gives {norm!r}"
            )

    def check_type(self, n: Node) -> None:
        t = n.type
        ok = (
            isinstance(t, TensorType)
            and isinstance(t.dtype, DType)
            and isinstance(t.shape, tuple)
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in t.shape)
        )
        if not ok:
            raise self.fail(
                n, f"type {t!r} is not a TensorType of a dtype and a tuple of non-negative ints"
            )

    def check_inferred(self, n: Node, opdef: registry.OpDef) -> None:
        if opdef.infer is None:
            raise self.fail(n, f"op {n.op!r} has no shape rule to check the type against")
        try:
            inferred = opdef.infer(tuple(x.type for x in n.inputs), **dict(n.attrs))
        except (TypeError, ValueError, RuntimeError, IndexError, KeyError, OverflowError) as e:
            raise self.fail(
                n,
                f"the op's shape rule rejects the inputs "
                f"({', '.join(str(x.type) for x in n.inputs)}): {e}",
            ) from None
        if inferred != n.type:
            raise self.fail(
                n,
                f"type {n.type} does not match {inferred}, which the op's "
                f"shape rule infers from the inputs "
                f"({', '.join(str(x.type) for x in n.inputs)})",
            )

    def check_outputs(self) -> None:
        in_graph = {id(n) for n in self.g.nodes}
        for i, o in enumerate(self.g.outputs):
            if id(o) not in in_graph:
                raise self.fail(o, f"output {i} is not a node of this graph")


def _same_attrs(a: tuple, b: tuple) -> bool:
    """Equal, and equal in type (so `2` and `2.0`, `True` and `1` count as different)."""
    if len(a) != len(b):
        return False
    return all(ka == kb and _same_value(va, vb) for (ka, va), (kb, vb) in zip(a, b))


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a is b or a == b or (a != a and b != b)  # NaN equals NaN here


def _names(g: Graph) -> dict[Node, str]:
    """The printer's value names, tolerating the broken parameters the verifier reports."""
    names: dict[Node, str] = {}
    params = {id(p) for p in g.params}
    for p in g.params:
        try:
            name = dict(p.attrs).get("name", "?")
        except (TypeError, ValueError):
            name = "?"
        names[p] = f"%{name}"
    body = [n for n in g.nodes if id(n) not in params]
    for i, n in enumerate(body):
        names[n] = f"%{i}"
    return names


def _foreign(n: Any) -> str:
    return f"<node outside the graph: {n!r}>"
