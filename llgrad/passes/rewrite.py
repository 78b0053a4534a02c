"""A small pattern-rewrite engine: local rewrites as data, run bottom-up to a fixpoint.

A `Rule` is a `Pat` (what to look for) and a replacement function (what to build instead).
Patterns name an op or an op group, give sub-patterns for the inputs, predicates on the
node (attributes, types, constant values) and capture names. A name captured twice must
bind the same node, which is how `where(c, x, x)` is written.

```
Rule("mul-one", pat("mul", var("x"), const_pat(is_one)), lambda m: m.fit(m["x"]))
```

`rewrite(g, rules)` visits the nodes in topological order. Each node is first rebuilt on
its rewritten inputs (nodes are immutable, so every consumer of a replaced node is
rebuilt), then the rules are tried on it until none applies; the first rule that matches
and returns a node wins. Sweeps repeat until a whole sweep fires no rule. The result keeps
the graph's parameters (the very same nodes) and its output order, and every replacement
must have exactly the type of the node it replaces: a rule that changes a type is a bug in
the rule, reported with the rule's name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..ir import dtypes as dt
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.graph import Graph, Node, make_node
from ..ir.interpret import numpy_dtype, round_to_bfloat16, run_node
from ..ir.printer import format_type
from ..ir.registry import Group

__all__ = [
    "Pat",
    "Rule",
    "Match",
    "RewriteError",
    "pat",
    "var",
    "const_pat",
    "rewrite",
    "rewrite_counted",
    "replace_nodes",
    "const_array",
    "uniform_value",
    "is_const",
]


class RewriteError(RuntimeError):
    """A rule broke the engine's contract (changed a type) or the rules never settle."""


# --------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pat:
    """What a node must look like. Every field left as None matches anything.

    op      an op name, or a tuple of names
    group   an op group, or a frozenset of groups (`registry.ELEMENTWISE`)
    inputs  one sub-pattern per input (the arity must match), or None for any inputs
    attrs   attributes that must equal these values exactly (same type, so `1` is not `1.0`)
    where   a predicate on the node, for everything else (types, constant values)
    name    capture the node under this name; a name used twice must bind one node
    """

    op: str | tuple[str, ...] | None = None
    group: Group | frozenset[Group] | None = None
    inputs: tuple["Pat", ...] | None = None
    attrs: tuple[tuple[str, Any], ...] = ()
    where: Callable[[Node], bool] | None = None
    name: str | None = None

    def root_ops(self) -> tuple[str, ...] | None:
        """The op names this pattern can match at its root, if it restricts them."""
        if self.op is None:
            return None
        return (self.op,) if isinstance(self.op, str) else tuple(self.op)

    def root_groups(self) -> frozenset[Group] | None:
        if self.group is None:
            return None
        return frozenset({self.group}) if isinstance(self.group, Group) else self.group


def pat(
    op: str | tuple[str, ...] | Group | frozenset[Group],
    *inputs: Pat,
    name: str | None = None,
    where: Callable[[Node], bool] | None = None,
    **attrs: Any,
) -> Pat:
    """`pat("neg", pat("neg", var("x")))`; an op group in place of a name matches the group."""
    sub = tuple(inputs) if inputs else None
    if isinstance(op, (Group, frozenset)):
        return Pat(group=op, inputs=sub, attrs=tuple(attrs.items()), where=where, name=name)
    return Pat(op=op, inputs=sub, attrs=tuple(attrs.items()), where=where, name=name)


def var(name: str, where: Callable[[Node], bool] | None = None) -> Pat:
    """Any node, captured as `name`."""
    return Pat(where=where, name=name)


def const_pat(test: Callable[[np.ndarray, DType], bool], name: str | None = None) -> Pat:
    """A `const` node holding one value everywhere for which `test(value, dtype)` holds.

    `value` is a 0-d array in the interpreter's representation of the dtype (bfloat16 as
    float32), exactly what the interpreter would compute from the payload.
    """

    def where(n: Node) -> bool:
        v = uniform_value(n)
        return v is not None and bool(test(v, n.dtype))

    return Pat(op="const", where=where, name=name)


# --------------------------------------------------------------------------------------
# Matches and rules
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Match:
    """A successful match: the root node and the captured nodes, plus node builders.

    Builders keep the root's source location, so a rewritten graph still points at the
    user's line.
    """

    node: Node
    captures: dict[str, Node] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Node:
        return self.captures[name]

    def make(self, op: str, *inputs: Node, **attrs: Any) -> Node:
        """A new node (shape rule run by `make_node`) at the root's location."""
        return make_node(op, tuple(inputs), attrs, self.node.loc)

    def const(
        self, value: Any, dtype: DType | None = None, shape: tuple[int, ...] | None = None
    ) -> Node:
        """A uniform constant, by default of the root's dtype and shape."""
        d = self.node.dtype if dtype is None else dtype
        s = self.node.shape if shape is None else shape
        return make_node("const", (), {"value": value, "dtype": d, "shape": s}, self.node.loc)

    def fit(self, x: Node) -> Node | None:
        """`x` standing in for the root: itself if the types agree, else `expand`ed to the
        root's shape (an operand that the root broadcast); None if no view can do it."""
        if x.type == self.node.type:
            return x
        if x.dtype is not self.node.dtype:
            return None
        try:
            return self.make("expand", x, shape=self.node.shape)
        except (RuntimeError, ValueError, TypeError):
            return None


Replacement = Callable[[Match], "Node | None"]


@dataclass(frozen=True, slots=True)
class Rule:
    """A named local rewrite; `replace` may return None to decline a match."""

    name: str
    pattern: Pat
    replace: Replacement
    doc: str = ""


def match(p: Pat, n: Node, captures: dict[str, Node]) -> bool:
    """Match `n` against `p`, adding captures; on failure `captures` may hold partial
    bindings (the caller discards them)."""
    if p.op is not None and n.op not in p.root_ops():  # type: ignore[operator]
        return False
    if p.group is not None and registry.get(n.op).group not in p.root_groups():  # type: ignore[operator]
        return False
    if p.inputs is not None:
        if len(p.inputs) != len(n.inputs):
            return False
        for sub, x in zip(p.inputs, n.inputs):
            if not match(sub, x, captures):
                return False
    for k, v in p.attrs:
        if not _same_value(dict(n.attrs).get(k, _MISSING), v):
            return False
    if p.where is not None and not p.where(n):
        return False
    if p.name is not None:
        bound = captures.get(p.name)
        if bound is not None and bound is not n:
            return False
        captures[p.name] = n
    return True


_MISSING = object()


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


class RuleTable:
    """Rules indexed by the op at their pattern's root, in the order they were given."""

    def __init__(self, rules: Iterable[Rule]):
        self.rules = tuple(rules)
        self._by_op: dict[str, tuple[Rule, ...]] = {}

    def candidates(self, op: str) -> tuple[Rule, ...]:
        found = self._by_op.get(op)
        if found is None:
            group = registry.get(op).group
            found = tuple(r for r in self.rules if _may_match_root(r.pattern, op, group))
            self._by_op[op] = found
        return found

    def apply(self, n: Node) -> tuple[Rule, Node] | None:
        """The first rule that matches `n` and builds a replacement, with the replacement."""
        for rule in self.candidates(n.op):
            captures: dict[str, Node] = {}
            if not match(rule.pattern, n, captures):
                continue
            out = rule.replace(Match(n, captures))
            if out is None or out is n:
                continue
            _check_replacement(rule, n, out)
            return rule, out
        return None


def _may_match_root(p: Pat, op: str, group: Group) -> bool:
    ops, groups = p.root_ops(), p.root_groups()
    return (ops is None or op in ops) and (groups is None or group in groups)


def _check_replacement(rule: Rule, old: Node, new: Node) -> None:
    if not isinstance(new, Node):
        raise RewriteError(
            f"rule {rule.name!r} returned {new!r} for {old.op} "
            f"{format_type(old.type)}; a replacement must be a Node or None"
        )
    if new.type != old.type:
        raise RewriteError(
            f"rule {rule.name!r} replaced {old.op} : {format_type(old.type)}"
            f" by {new.op} : {format_type(new.type)}; rewrites must keep "
            f"every value's type" + (f" (at {old.loc})" if old.loc else "")
        )


# --------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------

MAX_SWEEPS = 50
MAX_LOCAL = 100


def rewrite(g: Graph, rules: Sequence[Rule] | RuleTable, *, max_sweeps: int = MAX_SWEEPS) -> Graph:
    """`g` with `rules` applied bottom-up until none applies anywhere."""
    return rewrite_counted(g, rules, max_sweeps=max_sweeps)[0]


def rewrite_counted(
    g: Graph, rules: Sequence[Rule] | RuleTable, *, max_sweeps: int = MAX_SWEEPS
) -> tuple[Graph, dict[str, int]]:
    """Like `rewrite`, and also how many times each rule fired (for tests and logs)."""
    table = rules if isinstance(rules, RuleTable) else RuleTable(rules)
    fired: dict[str, int] = {}
    for _ in range(max_sweeps):
        g, changed = _sweep(g, table, fired)
        if not changed:
            return g, fired
    raise RewriteError(
        f"rewrite of @{g.name}: rules still firing after {max_sweeps} "
        f"sweeps (counts so far: {fired}); two rules probably undo each other"
    )


def _sweep(g: Graph, table: RuleTable, fired: dict[str, int]) -> tuple[Graph, bool]:
    """One bottom-up pass; returns the new graph and whether any rule fired."""
    new: dict[int, Node] = {id(p): p for p in g.params}
    changed = False
    for n in g.nodes:
        if id(n) in new:
            continue  # a parameter
        cur = rebuild(n, tuple(new[id(x)] for x in n.inputs))
        for _ in range(MAX_LOCAL):
            step = table.apply(cur)
            if step is None:
                break
            rule, cur = step
            fired[rule.name] = fired.get(rule.name, 0) + 1
            changed = True
        else:
            raise RewriteError(
                f"rewrite of @{g.name}: rules keep rewriting one {n.op} node "
                f"(counts so far: {fired}); two rules probably undo each other"
            )
        new[id(n)] = cur
    outputs = tuple(new[id(o)] for o in g.outputs)
    return Graph(g.name, g.params, outputs), changed


def replace_nodes(g: Graph, replace: Callable[[Node, tuple[Node, ...]], Node | None]) -> Graph:
    """One walk in order for passes that replace a few nodes by hand: `replace(n, inputs)`
    (the inputs already replaced) returns `n`'s replacement, or None to keep `n` (rebuilt
    on its new inputs). Returns `g` itself when nothing was replaced."""
    mapping: dict[Node, Node] = {}
    changed = False
    for n in g.nodes:
        inputs = tuple(mapping.get(x, x) for x in n.inputs)
        new = replace(n, inputs)
        if new is not None:
            mapping[n] = new
            changed = True
        elif inputs != n.inputs:
            mapping[n] = rebuild(n, inputs)
    if not changed:
        return g
    return Graph(g.name, g.params, [mapping.get(o, o) for o in g.outputs])


def rebuild(n: Node, inputs: tuple[Node, ...]) -> Node:
    """`n` on new inputs of the same types; `n` itself when no input changed."""
    if all(a is b for a, b in zip(inputs, n.inputs)):
        return n
    return Node(n.op, inputs, n.attrs, n.type, n.loc)


# --------------------------------------------------------------------------------------
# Constant values, as the interpreter sees them
# --------------------------------------------------------------------------------------


def is_const(n: Node) -> bool:
    return n.op == "const"


def _scalar_array(value: Any, d: DType) -> np.ndarray:
    """A 0-d array of `value` in dtype `d`, converted the way the interpreter does."""
    with np.errstate(all="ignore"):
        a = np.array(value, dtype=numpy_dtype(d))
    return round_to_bfloat16(a).reshape(()) if d is dt.bfloat16 else a


def const_array(n: Node) -> np.ndarray:
    """The full value of a `const` node (what `interpret` computes for it)."""
    if not is_const(n):
        raise TypeError(f"const_array: expected a const node, got {n.op}")
    return run_node(n, [])


MAX_UNIFORM_CHECK = 4096  # nested payloads larger than this are not inspected


def uniform_value(n: Node) -> np.ndarray | None:
    """The one value every element of a `const` node holds (a read-only 0-d array), else
    None.

    A scalar payload is uniform by construction; a nested payload is checked element by
    element (bitwise for floats, so `0.0` and `-0.0` differ) when it is small. Empty
    constants have no value. Rules ask this of the same constant again and again, so
    answers are cached (nodes hash by identity and never change).
    """
    if not is_const(n) or n.type.numel == 0:
        return None
    return _uniform_value(n)


@functools.lru_cache(maxsize=4096)
def _uniform_value(n: Node) -> np.ndarray | None:
    value = n.attr("value")
    if not isinstance(value, tuple):
        out = _scalar_array(value, n.dtype)
    elif n.type.numel > MAX_UNIFORM_CHECK:
        return None
    else:
        a = const_array(n).reshape(-1)
        if not all_same(a):
            return None
        out = a[:1].reshape(()).copy()
    out.flags.writeable = False
    return out


def all_same(a: np.ndarray) -> bool:
    """Every element equal to the first, bit for bit (any NaN equals any NaN)."""
    flat = np.ascontiguousarray(a).reshape(-1)
    if flat.size == 0:
        return True
    if flat.dtype.kind in "fc":
        parts = (flat.real, flat.imag) if flat.dtype.kind == "c" else (flat,)
        for p in parts:
            nan = np.isnan(p)
            if nan.any():
                if not nan.all():
                    return False
                continue
            if not (np.all(p == p[0]) and np.all(np.signbit(p) == np.signbit(p[0]))):
                return False
        return True
    return bool(np.all(flat == flat[0]))
