"""Graph export for looking at graphs: networkx (for analysis) and Graphviz (for pictures).

Nodes are keyed by the names the printer gives them (`%x`, `%0`, ...), so the picture, the
networkx graph and the IR text all talk about the same values.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import networkx as nx

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import Graph, Node
from .printer import format_type, value_names

__all__ = ["to_networkx", "to_dot", "render"]

_FORMATS = {".svg": "svg", ".png": "png"}


def node_label(n: Node, name: str, is_param: bool) -> str:
    """`%3 = add : f32[2,3]` for nodes, `%x : f32[2,3]` for parameters."""
    ty = format_type(n.type)
    return f"{name} : {ty}" if is_param else f"{name} = {n.op} : {ty}"


def to_networkx(g: Graph) -> nx.DiGraph:
    """One networkx node per IR node, one edge input -> user.

    Node attributes: `op`, `type` (TensorType), `attrs` (dict), `loc`, `label`, `param`
    (bool) and `outputs` (the output positions it fills, empty if none). Edge attributes:
    `position` (the first input slot the value fills) and `positions` (all of them: a node
    may read one value twice, as in `mul(%0, %0)`). `G.graph` has the graph's `name` and
    its `outputs` as a list of node keys.
    """
    names = value_names(g)
    params = {id(p) for p in g.params}
    out_positions: dict[int, list[int]] = {}
    for i, o in enumerate(g.outputs):
        out_positions.setdefault(id(o), []).append(i)
    G = nx.DiGraph(name=g.name, outputs=[names[o] for o in g.outputs])
    for n in g.nodes:
        is_param = id(n) in params
        G.add_node(
            names[n],
            op=n.op,
            type=n.type,
            attrs=dict(n.attrs),
            loc=n.loc,
            label=node_label(n, names[n], is_param),
            param=is_param,
            outputs=tuple(out_positions.get(id(n), ())),
        )
    for n in g.nodes:
        for pos, x in enumerate(n.inputs):
            key = (names[x], names[n])
            if G.has_edge(*key):
                G.edges[key]["positions"] += (pos,)
            else:
                G.add_edge(*key, position=pos, positions=(pos,))
    return G


def to_dot(g: Graph) -> str:
    """Graphviz DOT text: parameters as ellipses, ops as boxes, outputs doubled and wired
    to a `return` node; each op's source location is its tooltip."""
    names = value_names(g)
    params = {id(p) for p in g.params}
    outputs = {id(o) for o in g.outputs}
    lines = [
        f"digraph {_q(g.name)} {{",
        "  rankdir=TB;",
        '  node [shape=box, fontname="monospace", fontsize=10];',
        '  edge [fontname="monospace", fontsize=8];',
    ]
    for n in g.nodes:
        attrs = [f"label={_q(node_label(n, names[n], id(n) in params))}"]
        if id(n) in params:
            attrs.append("shape=ellipse")
        if id(n) in outputs:
            attrs.append("peripheries=2")
        if n.loc is not None:
            attrs.append(f"tooltip={_q(n.loc)}")
        lines.append(f"  {_q(names[n])} [{', '.join(attrs)}];")
    for n in g.nodes:
        for pos, x in enumerate(n.inputs):
            label = f" [label={_q(str(pos))}]" if len(n.inputs) > 1 else ""
            lines.append(f"  {_q(names[x])} -> {_q(names[n])}{label};")
    lines.append('  "return" [shape=plaintext, label="return"];')
    for i, o in enumerate(g.outputs):
        label = f" [label={_q(str(i))}]" if len(g.outputs) > 1 else ""
        lines.append(f'  {_q(names[o])} -> "return"{label};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(g: Graph, path: str | os.PathLike[str]) -> str:
    """Draw `g` with Graphviz's `dot` into `path` (SVG or PNG, by suffix); returns the path."""
    target = Path(path)
    fmt = _FORMATS.get(target.suffix.lower())
    if fmt is None:
        raise ValueError(
            f"render: cannot tell the image format from {str(path)!r}; use a "
            f"path ending in {' or '.join(_FORMATS)}"
        )
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError(
            "render: Graphviz's `dot` is not installed (not found on PATH); "
            "install Graphviz (for example `apt-get install graphviz`), or "
            "use to_dot() for the DOT text"
        )
    proc = subprocess.run(
        [dot, f"-T{fmt}", "-o", str(target)],
        input=to_dot(g).encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"render: `dot -T{fmt}` failed with exit code {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return str(target)


def _q(s: str) -> str:
    """A DOT double-quoted string."""
    escaped = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
