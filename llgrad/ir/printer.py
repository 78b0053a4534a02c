"""The IR's text form: dense, one node per line, every binder typed, parseable back.

```
graph @loss(%x: f32[128,784], %w: f32[784,512]) {
  %0 = matmul(%x, %w)                   : f32[128,512]   # model.py:14
  %1 = sum(%0, axes=[0,1], keepdim=false) : f32[]        # model.py:16
  return %1
}
```

Parameters print under their names, other values as `%0, %1, ...` in graph order, so the
text of a graph depends only on its structure: `parse(print_graph(g))` prints the same text
and compares equal to `g`. Attribute values are spelled by their Python type (after the
registry normalized them), which makes every spelling unambiguous: `2` is an int, `2.0` a
float, `[0,1]` a tuple of ints, `f32` a dtype, `"tanh"` a string, `none` a missing value.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import DType

if TYPE_CHECKING:
    from .graph import Graph, Node
from .types import TensorType

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Lines whose left part is longer than this do not push the type column further right.
_MAX_ALIGN = 56


def print_graph(g: Graph) -> str:
    """The text of `g`; raises ValueError/TypeError if `g` holds something text cannot spell."""
    names = value_names(g)
    lines = _header(g, names)
    rows = [_node_row(n, names) for n in _body_nodes(g)]
    lines.extend(_align(rows))
    lines.append("  return " + _format_outputs(g, names))
    lines.append("}")
    return "\n".join(lines) + "\n"


def value_names(g: Graph) -> dict[Node, str]:
    """`%name` for parameters, `%0, %1, ...` for the other nodes in graph order."""
    names: dict[Node, str] = {}
    seen: set[str] = set()
    for p in g.params:
        name = param_name(p)
        if not IDENTIFIER.match(name):
            raise ValueError(
                f"graph @{g.name}: parameter name {name!r} is not a valid "
                f"identifier ([A-Za-z_][A-Za-z0-9_]*)"
            )
        if name in seen:
            raise ValueError(f"graph @{g.name}: two parameters are named {name!r}")
        seen.add(name)
        names[p] = "%" + name
    for i, n in enumerate(_body_nodes(g)):
        names[n] = f"%{i}"
    return names


def node_lines(g: Graph) -> dict[Node, int]:
    """The 1-based line on which `print_graph(g)` shows each node (for error messages).

    Computed from the layout alone, so it works on graphs too broken to print.
    """
    lines: dict[Node, int] = {}
    multiline = any(p.loc is not None for p in g.params)
    for i, p in enumerate(g.params):
        lines[p] = 2 + i if multiline else 1
    first = len(g.params) + 3 if multiline else 2
    for i, n in enumerate(_body_nodes(g)):
        lines[n] = first + i
    return lines


def param_name(p: Node) -> str:
    for k, v in p.attrs:
        if k == "name" and isinstance(v, str):
            return v
    raise ValueError(f"parameter node {p!r} has no string attribute 'name'")


def format_type(t: TensorType) -> str:
    return f"{t.dtype.short}[{','.join(str(s) for s in t.shape)}]"


def format_value(v: Any) -> str:
    """An attribute value, spelled by its Python type (see the module docstring)."""
    if v is None:
        return "none"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return format_float(float(v))
    if isinstance(v, (complex, np.complexfloating)):
        return format_complex(complex(v))
    if isinstance(v, DType):
        return v.short
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, (tuple, list)):
        return "[" + ",".join(format_value(x) for x in v) + "]"
    raise TypeError(
        f"the IR text cannot spell an attribute value of type {type(v).__name__}: {v!r}"
    )


def format_float(x: float) -> str:
    """`repr` round-trips every float; it already spells `inf`, `-inf` and `nan`."""
    return repr(x)


def format_complex(z: complex) -> str:
    """`1.0-2.0j`: both parts as floats, so the parser tells it from a real number."""
    sign = "-" if math.copysign(1.0, z.imag) < 0 and not math.isnan(z.imag) else "+"
    return f"{format_float(z.real)}{sign}{format_float(abs(z.imag))}j"


def quote(s: str) -> str:
    """A double-quoted string with JSON escapes (the parser decodes it with json).

    Non-printable characters (line separators, control codes) are escaped too, so a quoted
    string never breaks a line, whatever tool splits the text into lines.
    """
    body = json.dumps(s, ensure_ascii=False)[1:-1]
    return '"' + "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in body) + '"'


def format_loc(loc: str) -> str:
    """A source location as written, or quoted when it would not survive a comment."""
    plain = loc != "" and loc == loc.strip() and loc.isprintable() and not loc.startswith('"')
    return loc if plain else quote(loc)


def format_graph_name(name: str) -> str:
    return "@" + (name if IDENTIFIER.match(name) else quote(name))


# --------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------


def _body_nodes(g: Graph) -> list[Node]:
    params = {id(p) for p in g.params}
    return [n for n in g.nodes if id(n) not in params]


def _header(g: Graph, names: dict[Node, str]) -> list[str]:
    head = f"graph {format_graph_name(g.name)}("
    binders = [f"{names[p]}: {format_type(p.type)}" for p in g.params]
    if all(p.loc is None for p in g.params):
        return [head + ", ".join(binders) + ") {"]
    # Some parameter carries a source location: one parameter per line, each with its comment.
    rows = []
    for i, (p, b) in enumerate(zip(g.params, binders)):
        comma = "," if i + 1 < len(binders) else ""
        rows.append(("  " + b + comma, p.loc))
    width = max(len(text) for text, _ in rows)
    lines = [head]
    for text, loc in rows:
        lines.append(text if loc is None else f"{text.ljust(width)}   # {format_loc(loc)}")
    lines.append(") {")
    return lines


def _node_row(n: Node, names: dict[Node, str]) -> tuple[str, str, str | None]:
    args = [_input_name(i, names) for i in n.inputs]
    for k, v in n.attrs:
        try:
            args.append(f"{k}={format_value(v)}")
        except TypeError as e:
            raise TypeError(f"{names[n]} = {n.op}: attribute {k!r}: {e}") from None
    lhs = f"{names[n]} = {n.op}({', '.join(args)})"
    return lhs, format_type(n.type), n.loc


def _input_name(i: Node, names: dict[Node, str]) -> str:
    # An input outside the graph only occurs in broken graphs; name it so that the text
    # still shows the problem (and does not parse).
    return names.get(i, f"%<foreign {i.op}>")


def _align(rows: list[tuple[str, str, str | None]]) -> list[str]:
    """Line up the type column, then the comment column, for reading a graph as a table."""
    width = max((len(lhs) for lhs, _, _ in rows if len(lhs) <= _MAX_ALIGN), default=0)
    bodies = [f"  {lhs.ljust(width)} : {ty}" for lhs, ty, _ in rows]
    located = [
        len(b)
        for b, (_, _, loc) in zip(bodies, rows)
        if loc is not None and len(b) <= _MAX_ALIGN + 24
    ]
    comment_col = max(located, default=0)
    out = []
    for body, (_, _, loc) in zip(bodies, rows):
        if loc is None:
            out.append(body)
        else:
            out.append(f"{body.ljust(comment_col)}   # {format_loc(loc)}")
    return out


def _format_outputs(g: Graph, names: dict[Node, str]) -> str:
    outs = [_input_name(o, names) for o in g.outputs]
    if len(outs) == 1:
        return outs[0]
    return "(" + ", ".join(outs) + ")"
