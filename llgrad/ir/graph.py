"""SSA graphs: one node type, immutable, each node producing one value.

A `Node` is a frozen record (op, inputs, attrs, type, loc); nodes compare by identity, so
they are dictionary keys. A `Graph` has named parameters, outputs, and its nodes in
topological order. Graphs are built with a `Builder`, which runs each op's shape rule, so a
graph is well typed by construction; `verify` re-checks a graph that a pass rewrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from . import registry
from .types import TensorType
from .printer import print_graph


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    op: str
    inputs: tuple["Node", ...]
    attrs: tuple[tuple[str, Any], ...]
    type: TensorType
    loc: str | None = None

    def attr(self, name: str) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        raise KeyError(f"{self.op} has no attribute {name!r}")

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    @property
    def opdef(self) -> registry.OpDef:
        return registry.get(self.op)

    @property
    def group(self) -> registry.Group:
        return registry.get(self.op).group

    @property
    def dtype(self):
        return self.type.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    def __repr__(self) -> str:
        return f"<Node {self.op} {self.type}>"


class Graph:
    """A function in the IR: parameters in, outputs out."""

    __slots__ = ("name", "params", "outputs", "nodes")

    def __init__(self, name: str, params: Iterable[Node], outputs: Iterable[Node]):
        self.name = name
        self.params = tuple(params)
        self.outputs = tuple(outputs)
        self.nodes = topological_order(self.params, self.outputs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return self.structure() == other.structure()

    def __hash__(self) -> int:
        return hash(self.structure())

    def structure(self) -> tuple:
        """A hashable description of the graph that ignores node identity."""
        index = {n: i for i, n in enumerate(self.nodes)}
        rows = tuple(
            (n.op, tuple(index[i] for i in n.inputs), _canonical(n.attrs), n.type, n.loc)
            for n in self.nodes
        )
        return (self.name, rows, tuple(index[o] for o in self.outputs))

    def __str__(self) -> str:
        return print_graph(self)

    def __repr__(self) -> str:
        return f"<Graph @{self.name}: {len(self.nodes)} nodes>"

    def users(self) -> dict[Node, list[Node]]:
        out: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                out[i].append(n)
        return out

    def to_networkx(self):
        from .export import to_networkx  # loaded on first use (ir.export)

        return to_networkx(self)

    def to_dot(self) -> str:
        from .export import to_dot  # loaded on first use (ir.export)

        return to_dot(self)

    def render(self, path: str) -> str:
        from .export import render  # loaded on first use (ir.export)

        return render(self, path)


_NAN = object()


def _canonical(value: Any) -> Any:
    """Attribute values with every NaN replaced by one marker (NaN != NaN otherwise)."""
    if isinstance(value, float) and value != value:
        return _NAN
    if isinstance(value, complex) and value != value:
        return (
            _NAN if value.real != value.real else value.real,
            _NAN if value.imag != value.imag else value.imag,
        )
    if isinstance(value, tuple):
        return tuple(_canonical(v) for v in value)
    return value


def topological_order(params: tuple[Node, ...], outputs: tuple[Node, ...]) -> list[Node]:
    """Iterative post-order DFS from the outputs (deep graphs must not recurse)."""
    order: list[Node] = list(params)
    seen: set[int] = {id(p) for p in params}
    for root in outputs:
        if id(root) in seen:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i < len(node.inputs):
                stack.append((node, i + 1))
                child = node.inputs[i]
                if id(child) not in seen:
                    stack.append((child, 0))
                continue
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
    return order


class Builder:
    """Makes well-typed nodes: each call runs the op's attribute check and shape rule."""

    def __init__(self, name: str = "main"):
        self.name = name
        self.params: list[Node] = []

    def param(self, type_: TensorType, name: str | None = None) -> Node:
        name = name or f"a{len(self.params)}"
        node = Node("param", (), (("name", name),), type_)
        self.params.append(node)
        return node

    def op(self, name: str, *inputs: Node, loc: str | None = None, **attrs: Any) -> Node:
        return make_node(name, inputs, attrs, loc)

    def build(self, *outputs: Node) -> Graph:
        return Graph(self.name, self.params, outputs)


def make_node(
    name: str, inputs: tuple[Node, ...], attrs: dict[str, Any], loc: str | None = None
) -> Node:
    opdef = registry.get(name)
    if opdef.nin >= 0 and len(inputs) != opdef.nin:
        raise TypeError(f"{name}: expects {opdef.nin} inputs, got {len(inputs)}")
    norm = opdef.normalize_attrs(attrs)
    assert opdef.infer is not None, f"{name} has no shape rule"
    type_ = opdef.infer(tuple(i.type for i in inputs), **dict(norm))
    return Node(name, tuple(inputs), norm, type_, loc)
