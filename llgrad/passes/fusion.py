"""Fusion: partition a graph's nodes into kernel groups (one kernel, or a few, per group).

`fuse(g)` walks the nodes once, in topological order, and decides greedily:

* **Views cost nothing.** `reshape`, `permute`, `expand` and `slice` are folded into the
  strides with which their consumers read the underlying buffer (a `Read`: a base node
  that owns a buffer plus a `Layout` of element offset and strides over it). Every buffer
  a kernel writes is dense (row-major) in its node's shape, so layouts are static. A
  reshape that no strides can express (e.g. flattening a transposed view) becomes a copy
  group.
* **Elementwise nodes** (groups UNARY, BINARY, TERNARY, CAST and RANDOM) join the group of
  a producer when that is an open elementwise group and the consumer reads the producer
  *index-preservingly*: directly or through reshapes only, with the same number of
  elements (no broadcasting of the producer). A group is one loop over one index space
  (`space`, the shape of its first node); every member computes the element with the same
  row-major linear index, so reshapes inside a group are free. When a node reads several
  such groups it merges all of them (a diamond or a sum of two chains becomes one kernel),
  as long as the merge keeps the group graph acyclic (no path from a merged group through
  another group back into the merge), no merged group reads another one's buffer (that
  read would race with the writes of the same loop), every read of the merged groups can
  be expressed over the kept index space, and the group stays under `max_group_cost`
  (LLVM's time grows faster than linearly with one loop body). Nodes are never
  duplicated, so nothing is recomputed: a member that is used outside its group (or is a
  graph output) is simply one more output of the kernel (an elementwise kernel may have
  several). A producer read through a broadcast or a permutation is materialized.
* **Siblings**: at the end, elementwise groups over the same space that read a common
  (non-constant) buffer and do not depend on each other merge (horizontal fusion).
* **Reductions** absorb their producer's elementwise group as a prologue when every value
  of that group is used only inside it or by the reduction (and it draws no random
  numbers, which need an element index that reduction loops do not have); the reduction
  kernel then evaluates the group's expression where it would load its input
  (`codegen.reduce.ReduceKernel.prologue`). When only the group's tail feeds the
  reduction, the tail is split off and absorbed if that adds no buffer (whatever the tail
  reads from the rest is written anyway). Otherwise the reduction reads a buffer.
* **matmul, gather, scatter_add, index_put, cat, pad, flip, nonzero, all_reduce** are
  groups of their own; their operands are reads (views folded in), their results dense buffers.
* **Graph outputs** that are not written directly by a kernel (a parameter, a constant, a
  view, or a value listed twice) get a copy group, so every output has its own buffer.

The result lists groups in an execution order (a topological order of the group graph);
each group names the IR nodes it computes and the view nodes folded into its reads.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.printer import format_type, value_names
from ..ir.registry import ELEMENTWISE, VIEW_OPS, Group
from ..ops.reduction import normalize_axes
from ..schedule.elementwise import Expr, ExprNode, op_cost as schedule_op_cost
from ..schedule.layout import Layout, Read, reshape_strides  # noqa: F401
from ..schedule.matmul import uses_blas
from .rewrite import uniform_value
from .rows import find_regions, external_layout, member_read, split_total_reductions

__all__ = [
    "Layout",
    "Read",
    "Kind",
    "KernelGroup",
    "FusionPlan",
    "fuse",
    "VIEW_OPS",
    "reshape_strides",
]

FUSIBLE = ELEMENTWISE | {Group.RANDOM}
# Fused kernels are one loop body: LLVM's time grows faster than linearly with its size,
# so a group stops growing at this many cost units, a transcendental (a polynomial of ~40 instructions)
# counting 8 and any other op 1. A longer chain becomes several kernels that pass an
# intermediate through memory.
MAX_GROUP_COST = 512
# Small index spaces (intermediates that stay in L1/L2) get short loop bodies instead:
# a long body of dependent ops is latency-bound (one vector in flight, the next iteration
# waits for the reorder buffer), while several short loops over the same few KiB overlap
# their iterations; LLVM also compiles many small kernels much faster than one huge one
# (on B7's 2000-op chain over 1024 floats, the small cap runs and compiles 2-3x faster).
SMALL_SPACE = 1 << 15
# Matmul epilogues (`merge_epilogues`) are off unless LLGRAD_MATMUL_EPILOGUES=1: applied
# to each thread's whole panel of C after a library's gemm they are slower than a kernel
# of their own (the panel's rows are short strided runs that the prefetchers follow worse
# than one stream), and run tile by tile inside llgrad's own gemm they are level on B2's
# products and slower on the whole step, whose intermediates stay in cache between
# passes (docs/compiler.md, "Matmul").
MATMUL_EPILOGUES = os.environ.get("LLGRAD_MATMUL_EPILOGUES", "0") == "1"
# Reductions that may store their prologue's other values (see `merge_reductions`), and
# the shortest reduced last axis for which a row kernel is a good home for the loop.
_SIDE_REDUCTIONS = ("sum", "prod", "amax", "amin")
SIDE_MIN_ROW = 256
SMALL_GROUP_COST = 12


def max_group_cost(space: tuple[int, ...]) -> int:
    """The cost cap of an elementwise group over `space` (see SMALL_SPACE)."""
    return SMALL_GROUP_COST if _numel(space) <= SMALL_SPACE else MAX_GROUP_COST


def op_cost(n: Node) -> int:
    """A node's share of a fused kernel's code size (see `max_group_cost`)."""
    return schedule_op_cost(n.op)


_OWN_GROUP = {
    "matmul": "matmul",
    "gather": "gather",
    "scatter_add": "scatter",
    "index_put": "scatter",
    "cat": "cat",
    "pad": "pad",
    "flip": "flip",
    "nonzero": "nonzero",
    "all_reduce": "collective",
}


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# --------------------------------------------------------------------------------------
# Groups
# --------------------------------------------------------------------------------------


class Kind(enum.Enum):
    ELEMENTWISE = "elementwise"
    REDUCE = "reduce"
    MATMUL = "matmul"
    GATHER = "gather"
    SCATTER = "scatter"
    CAT = "cat"
    PAD = "pad"
    FLIP = "flip"
    NONZERO = "nonzero"
    COLLECTIVE = "collective"
    COPY = "copy"
    ROW = "row"


@dataclass(eq=False)
class KernelGroup:
    """One kernel group: the IR nodes it computes and the buffers it reads and writes.

    * `nodes`: the IR nodes computed here, in graph order (for a reduction, its prologue
      and then the reduction; a copy group computes its `root` movement node, or none when
      it only copies a graph output).
    * `inputs`: the buffers read. Elementwise groups read them over `space` (the loop's
      index space); a reduction's prologue reads over the reduction's input shape; other
      groups read each operand over its own shape, in operand order.
    * `outputs`: the nodes whose values are written to buffers (dense in their shapes).
    * `expr`: the scalar DAG of an elementwise group (inputs in `inputs` order, outputs in
      `outputs` order), or a reduction's prologue (one output: the reduced values).
    * `views`: movement nodes folded into this group's reads (no kernel of their own).
    * `output_slot`: for a copy group that fills graph output k (a param, view, const or
      repeated value), k; else -1.
    """

    kind: Kind
    nodes: list[Node]
    space: tuple[int, ...]
    inputs: list[Read] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    expr: Expr | None = None
    root: Node | None = None
    views: list[Node] = field(default_factory=list)
    output_slot: int = -1
    index: int = -1
    names: dict[Node, str] = field(default_factory=dict, repr=False)
    # construction state (elementwise groups): per member, its operands: ("node", member)
    # or ("read", Read over `space`)
    operands: dict[Node, list[tuple[str, Any]]] = field(default_factory=dict, repr=False)
    deps: set["KernelGroup"] = field(default_factory=set, repr=False)
    open: bool = True
    has_random: bool = False
    cost: int = 0  # code size estimate (see `op_cost`)
    merged_into: "KernelGroup | None" = field(default=None, repr=False)
    alpha: float = 1.0  # matmul: scale folded into gemm's alpha
    region: Any = field(default=None, repr=False)  # row groups: the `rows.Region`

    def _name(self, n: Node) -> str:
        return self.names.get(n, f"<{n.op}>")

    def describe(self) -> str:
        """One line per group: kind, the nodes it computes, what it reads and writes."""
        nodes = ", ".join(f"{self._name(n)}={n.op}" for n in self.nodes) or "-"
        reads = ", ".join(
            f"{self._name(r.base)}{'' if r.layout.is_dense() and r.layout.offset == 0 else ' ' + str(r.layout)}"
            for r in self.inputs
        )
        if self.output_slot >= 0:
            writes = f"output {self.output_slot}"
        else:
            writes = ", ".join(f"{self._name(o)}: {format_type(o.type)}" for o in self.outputs)
        views = f" views [{', '.join(self._name(v) for v in self.views)}]" if self.views else ""
        prologue = " (prologue)" if self.kind is Kind.REDUCE and self.expr is not None else ""
        return (
            f"#{self.index} {self.kind.value}{prologue} over [{','.join(map(str, self.space))}]: "
            f"{nodes} | reads {reads or '-'} | writes {writes}{views}"
        )

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"<KernelGroup #{self.index} {self.kind.value}: {len(self.nodes)} nodes>"


@dataclass
class FusionPlan:
    """`fuse`'s result: groups in execution order, plus the folded views."""

    graph: Graph
    groups: list[KernelGroup]
    views: dict[Node, Read]  # movement nodes that alias a base buffer
    materialized: list[Node]  # every node written to a buffer
    direct_outputs: dict[int, Node]  # graph output k written by its own kernel
    names: dict[Node, str]

    @property
    def n_kernels(self) -> int:
        return len(self.groups)

    # the plan reads as the list of its groups
    def __iter__(self):
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, i: int) -> KernelGroup:
        return self.groups[i]

    def __str__(self) -> str:
        lines = [
            f"fusion of @{self.graph.name}: {len(self.graph.nodes)} nodes -> "
            f"{len(self.groups)} kernel groups"
        ]
        lines += ["  " + g.describe() for g in self.groups]
        if self.views:
            lines.append(
                "  views: "
                + ", ".join(
                    f"{self.names.get(v, v.op)}={v.op} of {self.names.get(r.base, r.base.op)}"
                    for v, r in self.views.items()
                )
            )
        return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------


class _Fuser:
    def __init__(self, g: Graph):
        self.g = g
        self.names = value_names(g)
        self.group_of: dict[Node, KernelGroup] = {}
        self.view_read: dict[Node, Read] = {}
        self.view_chain: dict[Node, tuple[Node, bool]] = {}  # view -> (base, reshapes only)
        self.groups: list[KernelGroup] = []
        self.users: dict[KernelGroup, set[KernelGroup]] = {}  # group -> groups reading it
        # a topological numbering of the groups (a reader's rank exceeds its sources'),
        # which bounds the walks of `can_merge`/`reaches`; renumbered on demand when an
        # edge added since breaks it (see `_edge`)
        self.rank: dict[KernelGroup, int] = {}
        self.rank_stale = False
        self._ranked = 0  # the highest rank given so far
        self.order = {n: i for i, n in enumerate(g.nodes)}
        self.uses = self._uses()

        self.region_of = {m: r for r in find_regions(g, self.uses) for m in r.members}
        self.region_groups: dict[int, KernelGroup] = {}
        # scaled operands of products folded into alpha: node -> (read of y, factor), or
        # () when the node cannot be folded (`fold_scale`)
        self.folded: dict[Node, Any] = {}
        self.feeds = self._feeds()

    # -- bookkeeping --------------------------------------------------------------------
    def _feeds(self) -> dict[Node, frozenset[int]]:
        """Per node outside every row region: the regions (by id) some member of which
        reads it, directly or through other nodes outside the region.

        A row group exists from its first member on, but its later members' reads are
        recorded only as they come; merging a node that will feed a region into a group
        that already reads that region would close a cycle no check could see yet
        (`can_merge` asks this map)."""
        feeds: dict[Node, frozenset[int]] = {}
        users: dict[Node, list[Node]] = {n: [] for n in self.g.nodes}
        for n in self.g.nodes:
            for x in n.inputs:
                users[x].append(n)
        for n in reversed(self.g.nodes):
            out: set[int] = set()
            for u in users[n]:
                r = self.region_of.get(u)
                if r is not None and self.region_of.get(n) is not r:
                    out.add(id(r))
                if r is None:
                    out |= feeds.get(u, frozenset())
            if out:
                feeds[n] = frozenset(out)
        return feeds

    def _uses(self) -> dict[Node, list[tuple[Node | None, Node]]]:
        """Per base node: (consumer, the input it reads) through any chain of views."""
        uses: dict[Node, list[tuple[Node | None, Node]]] = {n: [] for n in self.g.nodes}
        for n in self.g.nodes:
            if n.op in VIEW_OPS:
                continue
            for x in n.inputs:
                uses[self._base_of(x)].append((n, x))
        for o in self.g.outputs:
            uses[self._base_of(o)].append((None, o))
        return uses

    @staticmethod
    def _base_of(x: Node) -> Node:
        while x.op in VIEW_OPS:
            x = x.inputs[0]
        return x

    def find(self, grp: KernelGroup) -> KernelGroup:
        while grp.merged_into is not None:
            grp = grp.merged_into
        return grp

    def group(self, n: Node) -> KernelGroup | None:
        grp = self.group_of.get(n)
        return None if grp is None else self.find(grp)

    def new_group(
        self, kind: Kind, nodes: list[Node], space: tuple[int, ...], root: Node | None = None
    ) -> KernelGroup:
        grp = KernelGroup(kind, list(nodes), tuple(space), root=root, names=self.names)
        self.groups.append(grp)
        self._ranked += 1
        self.rank[grp] = self._ranked  # after every group it can read so far
        for n in nodes:
            self.group_of[n] = grp
        return grp

    def users_of(self, grp: KernelGroup) -> set[KernelGroup]:
        """The live groups that read a buffer `grp` writes."""
        return {self.find(u) for u in self.users.get(grp, ())} - {grp}

    def _edge(self, src: KernelGroup, dst: KernelGroup) -> None:
        """Record that `dst` reads a buffer `src` writes."""
        self.users.setdefault(src, set()).add(dst)
        if self.rank[src] >= self.rank[dst]:
            if self.users_of(dst):
                self.rank_stale = True
            else:  # nothing reads `dst` yet: it may go last
                self._ranked += 1
                self.rank[dst] = self._ranked

    def ranks(self) -> dict[KernelGroup, int]:
        """`rank`, renumbered (Kahn's order over the live groups) if an edge broke it."""
        if self.rank_stale:
            live = [g for g in self.groups if g.merged_into is None]
            users = {g: self.users_of(g) for g in live}
            waiting = {g: 0 for g in live}
            for us in users.values():
                for u in us:
                    waiting[u] += 1
            ready = [g for g in live if not waiting[g]]
            k = 0
            while ready:
                g = ready.pop()
                k += 1
                self.rank[g] = k
                self._ranked = max(self._ranked, k)
                for u in users[g]:
                    waiting[u] -= 1
                    if not waiting[u]:
                        ready.append(u)
            assert k == len(live), "the group graph has a cycle"
            self.rank_stale = False
        return self.rank

    def reaches(self, sources: Iterable[KernelGroup], stop: set[KernelGroup]) -> bool:
        """Whether a path of reads leads from `sources` (exclusive) to a group in `stop`. Walks forward over users only, so checking a new
        node against the latest groups touches what lies after them, not the whole graph
        (a chain of n groups fuses in O(n), not O(n^2)); groups ranked after every group
        in `stop` are not entered (nothing they lead to can be in `stop`)."""
        rank = self.ranks()
        limit = max((rank[g] for g in stop), default=0)
        stack = [u for g in sources for u in self.users_of(g)]
        seen: set[KernelGroup] = set()
        while stack:
            x = stack.pop()
            if x in stop:
                return True
            if x in seen or rank[x] > limit:
                continue
            seen.add(x)
            stack.extend(self.users_of(x))
        return False

    # -- reads --------------------------------------------------------------------------
    def read_of(self, x: Node) -> Read:
        """How a consumer reads value `x` from memory (views folded in)."""
        if x in self.view_read:
            return self.view_read[x]
        if x.op == "const" and not isinstance(x.attr("value"), tuple):
            return Read(x, Layout(x.shape, (0,) * len(x.shape), 0))  # one stored scalar
        return Read(x, Layout.dense(x.shape))

    def chain(self, x: Node) -> tuple[Node, bool]:
        """(base node, whether only reshapes lie between it and `x`)."""
        return self.view_chain.get(x, (x, True))

    def note_dep(self, grp: KernelGroup, read: Read) -> None:
        src = self.group(read.base)
        assert src is not grp, "a kernel never reads a buffer it writes itself"
        if src is not None:
            grp.deps.add(src)
            self._edge(src, grp)

    # -- node handlers --------------------------------------------------------------------
    def run(self) -> FusionPlan:
        for n in self.g.nodes:
            grp = n.group
            if grp in (Group.PARAM, Group.CONST):
                continue
            if n in self.region_of:
                self.row_node(n)
            elif n.op in VIEW_OPS:
                self.view(n)
            elif grp in FUSIBLE:
                self.elementwise(n)
            elif grp is Group.REDUCE:
                self.reduce(n)
            elif n.op in _OWN_GROUP:
                self.single(n, Kind(_OWN_GROUP[n.op]))
            elif grp is Group.COMPOSITE:
                raise TypeError(
                    f"fusion: {self.names[n]} = {n.op} is a composite op; "
                    f"decompose the graph into primitives before compiling it"
                    f"{_at(n)}"
                )
            else:
                raise TypeError(
                    f"fusion: no kernel lowering for op {n.op!r} (group {grp.value}){_at(n)}"
                )
        return self.finish()

    def row_node(self, n: Node) -> None:
        """A member of a row region joins its region's (one) row group."""

        region = self.region_of[n]
        grp = self.region_groups.get(id(region))
        if grp is None:
            grp = self.new_group(Kind.ROW, [], region.space, root=n)
            grp.region = region
            grp.open = False
            self.region_groups[id(region)] = grp
        grp.nodes.append(n)
        self.group_of[n] = grp
        grp.cost += op_cost(n)
        ops: list[tuple[str, Any]] = []
        for x in n.inputs:
            member = member_read(region, n, x)
            if member is not None:
                ops.append(("node", member))
                if x is not member:
                    grp.views.append(x)
                continue
            lay = external_layout(region, n, x)
            assert lay is not None, "rows.find_regions checked every read"
            r = Read(self.read_of(x).base, lay)
            ops.append(("read", r))
            self.note_dep(grp, r)
            if x in self.view_read:
                grp.views.append(x)
        grp.operands[n] = ops

    def view(self, n: Node) -> None:
        (x,) = n.inputs
        src = self.read_of(x)
        lay = src.layout
        if n.op == "reshape":
            new = lay.reshape(n.shape)
        elif n.op == "permute":
            new = lay.permute(tuple(p % max(len(x.shape), 1) for p in n.attr("perm")))
        elif n.op == "expand":
            new = lay.broadcast_to(n.shape)
        else:
            new = lay.slice(n.attr("starts"), n.attr("stops"), n.attr("steps"), n.shape)
        if new is None:
            # no strides express this reshape: copy the input densely (a kernel of its own)
            grp = self.new_group(Kind.COPY, [n], n.shape, root=n)
            grp.inputs = [src]
            self.note_dep(grp, src)
            grp.open = False
            return
        self.view_read[n] = Read(src.base, new)
        base, only_reshapes = self.chain(x)
        self.view_chain[n] = (base, only_reshapes and n.op == "reshape")

    def preserving(self, n: Node, x: Node) -> Node | None:
        """The base node `n` reads index-preservingly through input `x`, if any."""
        base, only_reshapes = self.chain(x)
        if only_reshapes and _numel(x.shape) == _numel(n.shape):
            return base
        return None

    def elementwise(self, n: Node) -> None:
        # candidate producer groups: open elementwise groups read index-preservingly only
        candidates: list[KernelGroup] = []
        rejected: set[KernelGroup] = set()
        for x in n.inputs:
            base, _ = self.chain(x)
            grp = self.group(base)
            if grp is None or grp.kind is not Kind.ELEMENTWISE or not grp.open:
                continue
            if self.preserving(n, x) is None:
                rejected.add(grp)  # read through a broadcast or permutation
            elif grp not in candidates:
                candidates.append(grp)
        candidates = [c for c in candidates if c not in rejected]
        input_groups = {self.group(self.chain(x)[0]) for x in n.inputs} - {None}
        chosen: list[KernelGroup] = []
        for c in candidates:
            trial = chosen + [c]
            if sum(g.cost for g in trial) + op_cost(n) > max_group_cost(n.shape):
                continue
            if self.can_merge(trial, input_groups, n) and self.spaces_fit(trial, n):
                chosen = trial
        if not chosen:
            grp = self.new_group(Kind.ELEMENTWISE, [n], n.shape)
        else:
            grp = chosen[0]
            for other in chosen[1:]:
                self.absorb(grp, other)
            grp.nodes.append(n)
            self.group_of[n] = grp
        grp.has_random = grp.has_random or n.group is Group.RANDOM
        grp.cost += op_cost(n)
        ops: list[tuple[str, Any]] = []
        for x in n.inputs:
            base = self.preserving(n, x)
            if base is not None and self.group(base) is grp:
                ops.append(("node", base))
                if x is not base:
                    grp.views.append(x)
                continue
            read = self.read_of(x)
            lay = read.layout.broadcast_to(n.shape).reshape(grp.space)
            assert lay is not None, "spaces_fit checked this read"
            r = Read(read.base, lay)
            ops.append(("read", r))
            self.note_dep(grp, r)
            if x in self.view_read:
                grp.views.append(x)
        grp.operands[n] = ops

    def can_merge(
        self, chosen: list[KernelGroup], input_groups: set[KernelGroup], n: Node | None = None
    ) -> bool:
        """Merging `chosen` and the new node keeps the group graph acyclic.

        A cycle would run from a chosen group through some group X outside the merge back
        into the merge (or into the new node): X depends on a chosen group, and the merge
        (or the node) depends on X.
        """
        merge = set(chosen)
        for grp in chosen:
            # a member reading another merged group's buffer (through a broadcast or a
            # permutation) would read values the same loop is still writing
            if {self.find(d) for d in grp.deps} & merge:
                return False
        # a row group that will read the merge later (see `_feeds`) must not reach it
        # now, nor reach a group the new node reads (the merged group would then read
        # the row group and feed it, though neither the node nor the rest does alone)
        outside_inputs = {self.find(g) for g in input_groups} - merge
        regions = set(self.feeds.get(n, ())) if n is not None else set()
        for grp in chosen:
            for m in grp.nodes:
                regions |= self.feeds.get(m, frozenset())
        depends = merge | outside_inputs
        for rid in regions:
            row = self.region_groups.get(rid)
            if row is not None and (self.find(row) in depends or self.reaches([row], depends)):
                return False
        # a path from the merge through an outside group back into the merge, or into
        # a group the new node reads (no group ranked after all of those is on one)
        rank = self.ranks()
        limit = max(rank[g] for g in merge | outside_inputs)
        stack = [u for g in chosen for u in self.users_of(g) if u not in merge]
        seen: set[KernelGroup] = set()
        while stack:
            x = stack.pop()
            if x in seen or rank[x] > limit:
                continue
            seen.add(x)
            if x in outside_inputs:
                return False
            for u in self.users_of(x):
                if u in merge:
                    return False
                stack.append(u)
        return True

    def spaces_fit(self, chosen: list[KernelGroup], n: Node) -> bool:
        """Every read of the merged groups and of `n` can be expressed over one space."""
        space = chosen[0].space
        if _numel(space) != _numel(n.shape):
            return False
        for other in chosen[1:]:
            if other.space != space:
                for ops in other.operands.values():
                    for kind, r in ops:
                        if kind == "read" and r.layout.reshape(space) is None:
                            return False
        for x in n.inputs:
            base = self.preserving(n, x)
            if base is not None and self.group(base) in chosen:
                continue
            lay = self.read_of(x).layout.broadcast_to(n.shape)
            if lay.reshape(space) is None:
                return False
        return True

    def absorb(self, grp: KernelGroup, other: KernelGroup) -> None:
        """Move `other`'s members into `grp` (re-expressing its reads over grp's space)."""
        for m in other.nodes:
            self.group_of[m] = grp
        grp.nodes.extend(other.nodes)
        grp.nodes.sort(key=self.order.__getitem__)
        for m, ops in other.operands.items():
            new_ops = []
            for kind, r in ops:
                if kind == "read" and other.space != grp.space:
                    r = Read(r.base, r.layout.reshape(grp.space))
                new_ops.append((kind, r))
            grp.operands[m] = new_ops
        grp.views.extend(other.views)
        grp.deps |= other.deps
        for u in self.users.pop(other, ()):
            if self.find(u) is not grp:
                self._edge(grp, self.find(u))
        for d in other.deps:
            if self.find(d) is not grp:
                self._edge(self.find(d), grp)
        grp.has_random = grp.has_random or other.has_random
        grp.cost += other.cost
        other.merged_into = grp
        other.nodes = []
        grp.deps = {self.find(d) for d in grp.deps} - {grp}

    def reduce(self, n: Node) -> None:
        (x,) = n.inputs
        base = self.preserving_chain(x)
        producer = self.group(base) if base is not None else None
        if (
            producer is not None
            and producer.kind is Kind.ELEMENTWISE
            and producer.open
            and not self.only_feeds(producer, n)
        ):
            producer = self.peel(producer, n, base, x.shape)
        if (
            producer is not None
            and producer.kind is Kind.ELEMENTWISE
            and producer.open
            and not producer.has_random
            and self.only_feeds(producer, n)
        ):
            reads = self.prologue_reads(producer, x.shape)
            if reads is not None:
                self.make_prologue(n, producer, base, x, reads)
                return
        grp = self.new_group(Kind.REDUCE, [n], x.shape, root=n)
        read = self.read_of(x)
        grp.inputs = [read]
        self.note_dep(grp, read)
        if x in self.view_read:
            grp.views.append(x)
        grp.open = False

    def peel(
        self, grp: KernelGroup, r: Node, base: Node, shape: tuple[int, ...]
    ) -> KernelGroup | None:
        """Split off the members of `grp` that only feed the reduction `r` (its tail).

        Done only when it adds no buffer: every remaining member the tail reads must be
        written anyway (used outside the group or a graph output), so the reduction can
        take the tail as its prologue while the rest stays an elementwise kernel. Returns
        the tail's new group, or None.
        """
        members = set(grp.nodes)
        tail: set[Node] = set()
        for m in reversed(grp.nodes):
            if all(c is not None and (c in tail or c is r) for c, _ in self.uses[m]):
                tail.add(m)
        rest = [m for m in grp.nodes if m not in tail]
        if base not in tail or not rest or any(m.group is Group.RANDOM for m in tail):
            return None
        space = grp.space
        for m in tail:
            for kind, v in grp.operands[m]:
                if (
                    kind == "node"
                    and v not in tail
                    and not any(c is None or c not in members for c, _ in self.uses[v])
                ):
                    return None
                if kind == "read" and v.layout.reshape(shape) is None:
                    return None
        new = self.new_group(Kind.ELEMENTWISE, [m for m in grp.nodes if m in tail], space)
        for m in new.nodes:
            ops = []
            for kind, v in grp.operands.pop(m):
                if kind == "node" and v not in tail:
                    kind, v = "read", Read(v, Layout.dense(space))
                ops.append((kind, v))
            new.operands[m] = ops
        new.deps = set(grp.deps) | {grp}
        for d in new.deps:
            self._edge(self.find(d), new)
        new.cost = sum(op_cost(m) for m in new.nodes)
        grp.cost -= new.cost
        grp.nodes = rest
        return new

    def preserving_chain(self, x: Node) -> Node | None:
        base, only_reshapes = self.chain(x)
        return base if only_reshapes else None

    def only_feeds(self, grp: KernelGroup, r: Node) -> bool:
        """Every use of every member is inside `grp` or is the reduction `r`."""
        members = set(grp.nodes)
        for m in grp.nodes:
            for consumer, _ in self.uses[m]:
                if consumer is None or (consumer not in members and consumer is not r):
                    return False
        return True

    def prologue_reads(
        self, grp: KernelGroup, shape: tuple[int, ...]
    ) -> dict[Node, list[tuple[str, Any]]] | None:
        out: dict[Node, list[tuple[str, Any]]] = {}
        for m, ops in grp.operands.items():
            new_ops = []
            for kind, r in ops:
                if kind == "read":
                    lay = r.layout.reshape(shape)
                    if lay is None:
                        return None
                    r = Read(r.base, lay)
                new_ops.append((kind, r))
            out[m] = new_ops
        return out

    def make_prologue(
        self,
        n: Node,
        producer: KernelGroup,
        base: Node,
        x: Node,
        operands: dict[Node, list[tuple[str, Any]]],
    ) -> None:
        producer.kind = Kind.REDUCE
        producer.space = x.shape
        producer.operands = operands
        producer.root = n
        producer.open = False
        producer.nodes.append(n)
        self.group_of[n] = producer
        if x is not base:
            producer.views.append(x)
        producer.outputs = [base]  # the prologue's single result (see finish)

    def single(self, n: Node, kind: Kind) -> None:
        grp = self.new_group(kind, [n], n.shape, root=n)
        for x in n.inputs:
            read = self.read_of(x)
            if kind is Kind.MATMUL:
                folded = self.fold_scale(read)
                if folded is not None:
                    read, factor = folded
                    grp.alpha *= factor
            grp.inputs.append(read)
            self.note_dep(grp, read)
            if x in self.view_read:
                grp.views.append(x)
        grp.open = False

    def fold_scale(self, read: Read) -> tuple[Read, float] | None:
        """A BLAS product's operand `y * c` (or `y / c`, c a power of two) of a scalar
        constant: the product reads `y` instead and multiplies by `c` through gemm's
        alpha, so the scaled copy of `y` is never written. Taken when the scaled value is
        a kernel of its own (its group computes nothing else) that only products read,
        and `y` is dense in the same shape; every such product then folds it."""
        base = read.base
        known = self.folded.get(base)
        if known is None:
            known = self.folded[base] = self._scale_of(base)
            if known:
                self.drop(self.group(base))
        if not known:
            return None
        y_read, factor = known
        return Read(y_read.base, read.layout), factor

    def _scale_of(self, base: Node) -> tuple[Read, float] | tuple[()]:
        grp = self.group(base)
        if (
            base.op not in ("mul", "div")
            or grp is None
            or grp.kind is not Kind.ELEMENTWISE
            or grp.nodes != [base]
            or not uses_blas(base.dtype)
            or base.dtype.is_complex
            or any(c is None or c.op != "matmul" for c, _ in self.uses[base])
        ):
            return ()
        for k, other in ((1, 0), (0, 1)) if base.op == "mul" else ((1, 0),):
            c = uniform_value(self._base_of(base.inputs[k]))
            y = base.inputs[other]
            if c is None or y.shape != base.shape or y.dtype is not base.dtype:
                continue
            factor = float(c)
            if base.op == "div":
                if (
                    factor == 0 or not np.isfinite(factor) or np.frexp(abs(factor))[0] != 0.5
                ):  # 1/c exact: a power of two
                    return ()
                factor = 1.0 / factor
            y_read = self.read_of(y)
            if y_read.layout != Layout.dense(base.shape) or not np.isfinite(factor):
                return ()
            return y_read, factor
        return ()

    def drop(self, grp: KernelGroup) -> None:
        """Remove a group whose values no one reads any more (see `fold_scale`)."""
        self.groups.remove(grp)
        for m in grp.nodes:
            self.group_of.pop(m, None)
        for d in grp.deps:
            self.users.get(d, set()).discard(grp)
        self.users.pop(grp, None)
        self.rank.pop(grp, None)

    # -- finishing ----------------------------------------------------------------------
    def materialized(self, m: Node, grp: KernelGroup) -> bool:
        for consumer, _ in self.uses[m]:
            if consumer is None:
                return True
            if self.group(consumer) is not grp:
                return True
        return False

    def merge_siblings(self) -> None:
        """Horizontal fusion: elementwise groups over the same index space that read a
        common buffer (not a constant) and do not depend on each other become one kernel,
        which reads the shared input once."""
        readers: dict[Node, list[KernelGroup]] = {}
        for grp in self.groups:
            if grp.merged_into is not None or grp.kind is not Kind.ELEMENTWISE:
                continue
            for ops in grp.operands.values():
                for kind, r in ops:
                    if kind == "read" and r.base.op != "const":
                        readers.setdefault(r.base, [])
                        if grp not in readers[r.base]:
                            readers[r.base].append(grp)
        for groups in readers.values():
            for i, a in enumerate(groups):
                a = self.find(a)
                for c in groups[i + 1 :]:
                    c = self.find(c)
                    if a is c or a.space != c.space or a.cost + c.cost > max_group_cost(a.space):
                        continue
                    if self.reaches([a], {c}) or self.reaches([c], {a}):
                        continue
                    self.absorb(a, c)

    def merge_reductions(self) -> None:
        """A reduction joins the elementwise group it reads when that group's values are
        also needed elsewhere: the reduction kernel evaluates the whole group as its
        prologue and stores those values as side outputs (`schedule.reduce`), so a loss
        and its gradients come from one pass over the inputs and one evaluation of the
        shared transcendentals, and the values the reduction reads never reach memory.

        Taken for whole reductions and reductions over a long last axis (kernels that
        split across threads as well as the elementwise loop did), when the reduction
        reads the group's values index-preservingly, every read of the group can be
        expressed over the reduction's input shape, no other path leads from the group
        to the reduction, and the merged body stays under the cost cap.
        """
        for red in list(self.groups):
            if (
                red.merged_into is not None
                or red.kind is not Kind.REDUCE
                or red.root.op not in _SIDE_REDUCTIONS
                or not self.splits_like_a_loop(red)
            ):
                continue
            reads = (
                [r for ops in red.operands.values() for kind, r in ops if kind == "read"]
                if red.operands
                else list(red.inputs)
            )
            producers = {self.group(r.base) for r in reads} - {None}
            for grp in producers:
                if (
                    grp.kind is not Kind.ELEMENTWISE
                    or grp.has_random
                    or _numel(grp.space) != _numel(red.space)
                    or grp.cost + red.cost + 1 > max_group_cost(grp.space)
                ):
                    continue
                if any(
                    self.group(r.base) is grp and not (r.layout.offset == 0 and r.layout.is_dense())
                    for r in reads
                ):
                    continue
                ops = self.prologue_reads(grp, red.space)
                if ops is None or self.reaches(
                    [u for u in self.users_of(grp) if u is not red], {red}
                ):
                    continue
                self.join_reduction(red, grp, ops)
                break

    def splits_like_a_loop(self, red: KernelGroup) -> bool:
        """Whether a reduction kernel over `red.space` splits across threads as well as an
        elementwise loop: every axis of more than one element reduced (partial kernels
        split the reduction itself), or a last axis of at least `SIDE_MIN_ROW` elements
        reduced (a row kernel splits over the rows)."""
        shape = red.space
        axes = set(normalize_axes(red.root.op, red.root.attr("axes"), shape))
        if all(d in axes for d, n in enumerate(shape) if n != 1):
            return True
        return bool(shape) and (len(shape) - 1) in axes and shape[-1] >= SIDE_MIN_ROW

    def join_reduction(
        self, red: KernelGroup, grp: KernelGroup, ops: dict[Node, list[tuple[str, Any]]]
    ) -> None:
        members = set(grp.nodes)
        if not red.operands:  # a plain reduction of one of grp's values
            (read,) = red.inputs
            red.outputs = [read.base]  # the prologue's result (see finish_prologue)
            red.inputs = []
        else:
            red.operands = {
                m: [
                    ("node", r.base) if kind == "read" and r.base in members else (kind, r)
                    for kind, r in o
                ]
                for m, o in red.operands.items()
            }
        grp.operands = ops
        grp.space = red.space
        self.absorb(red, grp)
        red.operands = {m: red.operands[m] for m in red.nodes if m is not red.root}

    def merge_epilogues(self) -> None:
        """An elementwise group that reads a 2-D BLAS matmul's result element by element
        becomes the matmul's epilogue: the matmul kernel applies it to each panel of C
        right after the gemm call that wrote the panel, while the panel is in cache (bias,
        activation, the ReLU mask, an optimizer's update of the weight the gemm's gradient
        feeds). C reaches memory only when something else reads it.

        Taken when the group's index space is C's shape, it reads C densely, every read
        can be expressed over C's shape, no other path leads from the matmul to the group,
        and the product is not empty.
        """
        if not MATMUL_EPILOGUES:
            return
        for mm_grp in list(self.groups):
            root = mm_grp.root
            if (
                mm_grp.merged_into is not None
                or mm_grp.kind is not Kind.MATMUL
                or len(root.shape) != 2
                or not uses_blas(root.dtype)
                or root.dtype.is_complex
                or 0 in root.shape
                or root.inputs[0].shape[-1] == 0
            ):
                continue
            for grp in sorted(
                self.users_of(mm_grp), key=lambda g: self.order[g.nodes[0]] if g.nodes else 0
            ):
                if grp.kind is not Kind.ELEMENTWISE or grp.has_random or grp.space != root.shape:
                    continue
                reads = [
                    r
                    for ops in grp.operands.values()
                    for kind, r in ops
                    if kind == "read" and r.base is root
                ]
                if not reads or any(r.layout.offset or not r.layout.is_dense() for r in reads):
                    continue
                if self.reaches([u for u in self.users_of(mm_grp) if u is not grp], {grp}):
                    continue
                self.absorb(mm_grp, grp)
                break

    def finish(self) -> FusionPlan:
        self.merge_siblings()
        self.merge_reductions()
        self.merge_epilogues()
        live = [grp for grp in self.groups if grp.merged_into is None]
        direct: dict[int, Node] = {}
        claimed: set[Node] = set()
        outputs = set(self.g.outputs)
        for k, o in enumerate(self.g.outputs):
            if o in self.group_of and o not in claimed:
                direct[k] = o
                claimed.add(o)
                continue
            # a reshape of a kernel's result that walks it densely is the same bytes: the
            # kernel writes the output buffer itself (no copy)
            r = self.view_read.get(o)
            if (
                r is not None
                and r.base in self.group_of
                and r.base not in claimed
                and r.base not in outputs
                and r.layout.offset == 0
                and r.layout.numel == _numel(r.base.shape)
                and r.layout.is_dense()
            ):
                direct[k] = r.base
                claimed.add(r.base)
                continue
            grp = self.new_group(Kind.COPY, [], o.shape, root=o)
            grp.output_slot = k
            read = self.read_of(o)
            grp.inputs = [read]
            self.note_dep(grp, read)
            if o in self.view_read:
                grp.views.append(o)
            grp.open = False
            live.append(grp)
        for grp in live:
            if grp.kind in (Kind.ELEMENTWISE, Kind.ROW):
                self.finish_elementwise(grp)
            elif grp.kind is Kind.REDUCE and grp.operands:
                self.finish_prologue(grp)
            elif grp.kind is Kind.MATMUL and grp.operands:
                self.finish_epilogue(grp)
            elif grp.output_slot < 0:
                grp.outputs = [grp.root]
            grp.views = list(dict.fromkeys(grp.views))
        ordered = self.schedule(live)
        materialized = [o for grp in ordered for o in grp.outputs]
        return FusionPlan(self.g, ordered, dict(self.view_read), materialized, direct, self.names)

    def finish_elementwise(self, grp: KernelGroup) -> None:
        inputs: dict[Read, int] = {}
        ref: dict[Node, int] = {}
        pending: list[tuple[Node, list[tuple[str, Any]]]] = []
        for m in grp.nodes:
            for kind, r in grp.operands[m]:
                if kind == "read" and r not in inputs:
                    inputs[r] = len(inputs)
            pending.append((m, grp.operands[m]))
        n_in = len(inputs)
        nodes: list[ExprNode] = []
        for m, ops in pending:
            args = tuple(ref[r] if kind == "node" else inputs[r] for kind, r in ops)
            ref[m] = n_in + len(nodes)
            # a row group's reductions reduce over the row: their axes are the region's
            op, attrs = m.op, m.attrs
            if grp.kind is Kind.ROW and m.group is Group.REDUCE:
                op, attrs = ("colsum" if grp.region.is_column(m) else m.op), ()
            nodes.append(ExprNode(op, args, attrs))
        grp.outputs = [m for m in grp.nodes if self.materialized(m, grp)]
        grp.inputs = list(inputs)
        grp.expr = Expr(
            tuple(r.base.dtype for r in grp.inputs),
            tuple(nodes),
            tuple(ref[m] for m in grp.outputs),
        )

    def finish_prologue(self, grp: KernelGroup) -> None:
        """The reduction's prologue DAG; input 0 (which orders the loops) is the read that
        steps through the most elements (fewest broadcast dimensions)."""
        result = grp.outputs[0]
        members = [m for m in grp.nodes if m is not grp.root]
        reads: list[Read] = []
        for m in members:
            for kind, r in grp.operands[m]:
                if kind == "read" and r not in reads:
                    reads.append(r)
        if reads:
            driver = max(
                range(len(reads)),
                key=lambda i: (
                    sum(
                        1
                        for n, s in zip(reads[i].layout.shape, reads[i].layout.strides)
                        if s != 0 and n != 1
                    ),
                    -i,
                ),
            )
            reads.insert(0, reads.pop(driver))
        index = {r: i for i, r in enumerate(reads)}
        nodes, ref = self.member_nodes(grp, members, index.__getitem__, len(reads))
        side = [m for m in members if self.materialized(m, grp)]  # see merge_reductions
        grp.inputs = reads
        grp.expr = Expr(
            tuple(r.base.dtype for r in reads),
            tuple(nodes),
            (ref[result],) + tuple(ref[m] for m in side),
        )
        grp.outputs = [grp.root] + side

    @staticmethod
    def member_nodes(
        grp: KernelGroup, members: list[Node], input_of, n_inputs: int
    ) -> tuple[list[ExprNode], dict[Node, int]]:
        """The expression nodes of `members` (in order) after `n_inputs` inputs: a
        member's operand is an earlier member's value or `input_of(read)`; also returns
        each member's value index."""
        ref: dict[Node, int] = {}
        nodes: list[ExprNode] = []
        for m in members:
            args = tuple(ref[r] if kind == "node" else input_of(r) for kind, r in grp.operands[m])
            ref[m] = n_inputs + len(nodes)
            nodes.append(ExprNode(m.op, args, m.attrs))
        return nodes, ref

    def finish_epilogue(self, grp: KernelGroup) -> None:
        """A matmul's epilogue DAG: input 0 is the product (C), inputs 1.. the other
        reads, which follow the operands A and B in `grp.inputs`; outputs are the
        members something outside reads, then C itself when it is read elsewhere."""
        root = grp.root
        members = [m for m in grp.nodes if m is not root]
        reads: list[Read] = []
        for m in members:
            for kind, r in grp.operands[m]:
                if kind == "read" and r.base is not root and r not in reads:
                    reads.append(r)
        index = {r: i + 1 for i, r in enumerate(reads)}
        nodes, ref = self.member_nodes(
            grp, members, lambda r: 0 if r.base is root else index[r], 1 + len(reads)
        )
        outs = [m for m in members if self.materialized(m, grp)]
        grp.inputs = grp.inputs[:2] + reads
        grp.expr = Expr(
            (root.dtype,) + tuple(r.base.dtype for r in reads),
            tuple(nodes),
            tuple(ref[m] for m in outs),
        )
        grp.outputs = outs + ([root] if self.materialized(root, grp) else [])

    def schedule(self, groups: list[KernelGroup]) -> list[KernelGroup]:
        """A topological order of the groups (Kahn), earliest graph position first; a
        collective goes as soon as its input exists, so that the kernels after it overlap
        its communication (`passes.lower` waits for it where its result is read)."""
        deps: dict[KernelGroup, set[KernelGroup]] = {}
        for grp in groups:
            found = set()
            for r in grp.inputs:
                src = self.group(r.base)
                if src is not None and src is not grp:
                    found.add(src)
            deps[grp] = found
        users: dict[KernelGroup, list[KernelGroup]] = {grp: [] for grp in groups}
        for grp, ds in deps.items():
            for d in ds:
                users[d].append(grp)

        def first(grp: KernelGroup) -> tuple[int, int]:
            if grp.kind is Kind.COLLECTIVE:
                return (-1, 0)
            pos = [self.order[n] for n in grp.nodes] or [len(self.order) + grp.output_slot]
            return (min(pos), grp.output_slot)

        import heapq

        waiting = {grp: len(ds) for grp, ds in deps.items()}
        heap = [(first(grp), i, grp) for i, grp in enumerate(groups) if waiting[grp] == 0]
        heapq.heapify(heap)
        ids = {grp: i for i, grp in enumerate(groups)}
        out: list[KernelGroup] = []
        while heap:
            _, _, grp = heapq.heappop(heap)
            grp.index = len(out)
            out.append(grp)
            for u in users[grp]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    heapq.heappush(heap, (first(u), ids[u], u))
        if len(out) != len(groups):
            raise AssertionError("fusion: the group graph has a cycle (a fusion bug)")
        return out


def _at(n: Node) -> str:
    return f" at {n.loc}" if n.loc else ""


def fuse(g: Graph) -> FusionPlan:
    """Partition `g` into kernel groups (see the module docstring for the rules)."""

    return _Fuser(split_total_reductions(g)).run()
