"""Row regions: the nodes one row-wise (persistent) kernel computes.

A region has an index space `S` whose trailing axes `S[k:]` are reduced (a row of
`C = prod(S[k:])` elements; `R = prod(S[:k])` rows). Its members are

* reductions `sum`/`amax`/`amin` over exactly the axes `k..` of an `S`-shaped float value;
* sums over exactly the leading axes `..k` of an `S`-shaped float member (a *column sum*:
  the gradient of a bias or a layer_norm weight); nothing in the region reads one;
* elementwise ops (no random draws, no complex values) whose result has shape `S`
  (*full*: one value per element) or `S` with the reduced axes set to 1 (*row*: one
  value per row, as a keepdim reduction gives), reading members legally: a full node reads
  full or row members (a row value broadcasts along the row), a row node reads row
  members only.

`find_regions` flood-fills from every eligible reduction over such nodes, then removes the
members that would make the kernel graph cyclic (a member reading, directly or through
other kernels, a value computed from the region's own outputs). A region is kept when
it is worth a kernel of its own: some full member reads a reduction of the region (the
softmax pattern), or it holds several reductions. Everything else is left to the
ordinary elementwise and reduction fusion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.graph import Graph, Node
from ..ir.registry import ELEMENTWISE, Group, VIEW_OPS
from ..ir.types import TensorType
from ..schedule.layout import Layout
from ..schedule.elementwise import op_cost as schedule_op_cost
from .rewrite import replace_nodes

ROW_REDUCTIONS = frozenset({"sum", "amax", "amin"})
MAX_ROW = 1 << 16  # longest row a row kernel takes (its row buffers live in L1/L2)
MAX_REGION_COST = 512  # code-size cap, as for elementwise groups (see fusion.op_cost)


@dataclass(eq=False)
class Region:
    space: tuple[int, ...]
    k: int  # axes k.. are reduced
    members: set[Node] = field(default_factory=set)

    @property
    def rows(self) -> int:
        return _numel(self.space[: self.k])

    @property
    def cols(self) -> int:
        return _numel(self.space[self.k :])

    @property
    def row_shape(self) -> tuple[int, ...]:
        return self.space[: self.k] + (1,) * (len(self.space) - self.k)

    def is_row(self, n: Node) -> bool:
        return n.shape == self.row_shape and n.shape != self.space and not self.is_column(n)

    def is_column(self, n: Node) -> bool:
        return n.op == "sum" and n.group is Group.REDUCE and _leading_axes(n) == self.k


def _numel(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def _suffix_axes(n: Node) -> int | None:
    """k when `n` reduces exactly the axes k.. of its input (k >= 1), else None."""
    (x,) = n.inputs
    rank = len(x.shape)
    if rank == 0:
        return None
    axes = n.attr("axes")
    axes = (
        tuple(range(rank)) if axes is None or axes == () else tuple(sorted(a % rank for a in axes))
    )
    if not axes or axes != tuple(range(axes[0], rank)) or axes[0] < 1:
        return None
    return axes[0]


def _leading_axes(n: Node) -> int | None:
    """k when `n` reduces exactly the axes ..k-1 of its input (0 < k < rank)."""
    (x,) = n.inputs
    rank = len(x.shape)
    axes = n.attr("axes")
    if axes is None or tuple(axes) == () or rank == 0:
        return None
    axes = tuple(sorted(a % rank for a in axes))
    if axes != tuple(range(len(axes))) or not 0 < len(axes) < rank:
        return None
    return len(axes)


def _eligible_reduction(n: Node) -> bool:
    if n.op not in ROW_REDUCTIONS or n.group is not Group.REDUCE:
        return False
    x = n.inputs[0]
    return x.dtype.is_floating_point and _suffix_axes(n) is not None


def _elementwise(n: Node) -> bool:
    return (
        n.group in ELEMENTWISE
        and not n.dtype.is_complex
        and not any(x.dtype.is_complex for x in n.inputs)
    )


def _cost(n: Node) -> int:
    return schedule_op_cost(n.op)


def find_regions(g: Graph, uses: dict[Node, list[tuple[Node | None, Node]]]) -> list[Region]:
    """The row regions of `g` (see the module docstring); `uses` maps each node to its
    (consumer, input read) pairs through views, as the fuser computes them."""
    taken: set[Node] = set()
    regions: list[Region] = []
    order = {n: i for i, n in enumerate(g.nodes)}
    for seed in g.nodes:
        if seed in taken or not _eligible_reduction(seed):
            continue
        k = _suffix_axes(seed)
        space = seed.inputs[0].shape
        region = Region(space, k)
        if not 2 <= region.cols <= MAX_ROW or region.rows < 2:
            continue
        _flood(region, seed, uses, taken)
        _break_cycles(region, uses, order)
        if _absorb_column_sums(region, g, uses, taken):
            _break_cycles(region, uses, order)
        if _worth_it(region) and sum(_cost(m) for m in region.members) <= MAX_REGION_COST:
            regions.append(region)
            taken |= region.members
    return regions


def _fits(region: Region, n: Node) -> bool:
    """`n` can be a member (on its own; edges are checked by `_edge`)."""
    if region.is_column(n):
        return n.inputs[0].shape == region.space and n.inputs[0].dtype.is_floating_point
    if _eligible_reduction(n):
        return (
            _suffix_axes(n) == region.k
            and n.inputs[0].shape == region.space
            and (n.shape == region.row_shape or n.shape == region.space[: region.k])
        )
    if not _elementwise(n):
        return False
    return n.shape == region.space or region.is_row(n)


def _edge(region: Region, consumer: Node, producer: Node) -> bool:
    """`consumer` may read member `producer` directly."""
    if region.is_column(producer):
        return False  # complete only after the last row
    if consumer.op in ROW_REDUCTIONS:
        return producer.shape == region.space
    if producer.shape == region.space:
        return consumer.shape == region.space
    # a row value: keepdim rows broadcast along a full consumer; dropped-dim rows
    # (reductions without keepdim) are read by nothing inside the region
    return producer.shape == region.row_shape


def _flood(region: Region, seed: Node, uses, taken: set[Node]) -> None:
    members = region.members
    members.add(seed)
    stack = [seed]
    while stack:
        n = stack.pop()
        # producers: direct inputs (no views between)
        for x in n.inputs:
            if x not in members and x not in taken and _fits(region, x) and _edge(region, n, x):
                members.add(x)
                stack.append(x)
        for consumer, via in uses.get(n, ()):
            if consumer is None or consumer in members or consumer in taken:
                continue
            if (
                _fits(region, consumer)
                and _edge(region, consumer, n)
                and member_read(region, consumer, via) is n
            ):
                members.add(consumer)
                stack.append(consumer)
    # a member must read every member input directly and legally
    changed = True
    while changed:
        changed = False
        for m in list(members):
            for x in m.inputs:
                if x in members and not _edge(region, m, x):
                    members.discard(m)
                    changed = True
                    break


def _absorb_column_sums(region: Region, g: Graph, uses, taken: set[Node]) -> bool:
    """Column sums of values the region can compute from what it reads anyway join it
    (a bias gradient `sum(ct, 0)`, a weight gradient `sum(ct * xhat, 0)`): the kernel
    adds them up in the same pass instead of a second kernel reading the inputs again."""
    read = {_base(x) for m in region.members for x in m.inputs if _base(x) not in region.members}
    added = False
    for n in g.nodes:
        if n in region.members or n in taken or not region.is_column(n) or not _fits(region, n):
            continue
        (x,) = n.inputs
        if x in region.members or _base(x) in read:
            region.members.add(n)
            added = True
            continue
        # one elementwise producer that only this sum reads, of values the region has
        if (
            _elementwise(x)
            and x.shape == region.space
            and x not in taken
            and len(uses.get(x, ())) == 1
            and all(y in region.members or _base(y) in read for y in x.inputs)
        ):
            region.members |= {x, n}
            added = True
    return added


def _break_cycles(region: Region, uses, order: dict[Node, int]) -> None:
    """Drop members that read (through any outside node) a value computed from the
    region: the region's kernel would have to run both before and after that node."""
    while True:
        members = region.members
        outside_desc: set[Node] = set()  # outside nodes downstream of a member
        stack = [
            c for m in members for c, _ in uses.get(m, ()) if c is not None and c not in members
        ]
        while stack:
            c = stack.pop()
            if c in outside_desc:
                continue
            outside_desc.add(c)
            stack.extend(u for u, _ in uses.get(c, ()) if u is not None and u not in members)
        bad = [
            m
            for m in members
            if any(_base(x) in outside_desc for x in m.inputs)
            or not _reads_fit(region, m)
            or _reduces_a_row_value(region, m)
            or _stores_a_row_value(region, m, uses)
        ]
        if not bad:
            return
        first = min(bad, key=order.__getitem__)
        _drop_downstream(region, first, uses)


def _row_valued(region: Region, x: Node, memo: dict[Node, bool], reader: Node) -> bool:
    """Whether the row kernel would hold `x`, as member `reader` reads it, as one value
    per row (as `schedule.row.plan` decides): a row member, an outside value read with
    column stride 0 (a broadcast), or an elementwise member computed from such values
    only. Errs towards True."""
    if x not in region.members:
        via = member_read(region, reader, x)
        if via is not None:
            return _row_valued(region, via, memo, reader)
        if _base(x) in region.members:
            return True
        lay = external_layout(region, reader, x)
        return lay is None or lay.strides[1] == 0
    hit = memo.get(x)
    if hit is not None:
        return hit
    memo[x] = True  # (no cycles among members)
    if region.is_row(x) or (x.op in ROW_REDUCTIONS and not region.is_column(x)):
        out = True
    elif region.is_column(x):
        out = False
    else:
        out = bool(x.inputs) and all(_row_valued(region, i, memo, x) for i in x.inputs)
    memo[x] = out
    return out


def _reduces_a_row_value(region: Region, m: Node) -> bool:
    """A reduction (over the row, or a column sum) of a value the kernel holds per row:
    the row kernel cannot compute it (`plan` refuses), so `m` leaves the region."""
    if m.op not in ROW_REDUCTIONS or m.group is not Group.REDUCE:
        return False
    return _row_valued(region, m.inputs[0], {}, m)


def _stores_a_row_value(region: Region, m: Node, uses) -> bool:
    """A full-shaped member the kernel would hold per row (computed from broadcast
    values only) that something outside reads: the kernel stores outputs of the
    region's shape element by element, which a per-row value does not have."""
    if m.shape != region.space or m.op in ROW_REDUCTIONS:
        return False
    if all(c is not None and c in region.members for c, _ in uses.get(m, ())):
        return False
    return all(_row_valued(region, x, {}, m) for x in m.inputs) if m.inputs else False


def read_layout(x: Node):
    """The layout a kernel reads value `x` through (views folded), as the fuser does;
    None when a reshape cannot be expressed with strides."""
    chain = []
    while x.op in VIEW_OPS:
        chain.append(x)
        x = x.inputs[0]
    if x.op == "const" and not isinstance(x.attr("value"), tuple):
        lay = Layout(x.shape, (0,) * len(x.shape), 0)
    else:
        lay = Layout.dense(x.shape)
    for v in reversed(chain):
        src_rank = max(len(v.inputs[0].shape), 1)
        if v.op == "reshape":
            lay = lay.reshape(v.shape)
        elif v.op == "permute":
            lay = lay.permute(tuple(p % src_rank for p in v.attr("perm")))
        elif v.op == "expand":
            lay = lay.broadcast_to(v.shape)
        else:
            lay = lay.slice(v.attr("starts"), v.attr("stops"), v.attr("steps"), v.shape)
        if lay is None:
            return None
    return lay


def external_layout(region: Region, member: Node, x: Node):
    """How `member` reads the outside value `x`, over the region's rows: a layout of
    shape (R, C) (column stride 0: one value per row), or None."""
    lay = read_layout(x)
    if lay is None:
        return None
    full = member.shape == region.space or member.group is Group.REDUCE
    lay = lay.broadcast_to(region.space if full else member.shape)
    if full:
        return lay.reshape((region.rows, region.cols))
    flat = lay.reshape((region.rows,))
    if flat is None:
        return None

    return Layout((region.rows, region.cols), (flat.strides[0], 0), flat.offset)


def member_read(region: Region, m: Node, x: Node) -> Node | None:
    """The member that `m` reads through input `x` (directly, or through views that walk
    it as a direct read would: an expand of a row value, a reshape of a full one)."""
    if x in region.members:
        # a member read directly, if the read is legal (a column sum never is, and a
        # full value broadcast into a row member is not either)
        return x if _edge(region, m, x) else None
    base = _base(x)
    if base is x or base not in region.members or not _edge(region, m, base):
        return None
    lay = read_layout(x)
    if lay is None or lay.offset != 0:
        return None
    full = m.shape == region.space or m.group is Group.REDUCE
    lay = lay.broadcast_to(region.space if full else m.shape)
    flat = lay.reshape((region.rows, region.cols) if full else (region.rows,))
    if flat is None:
        return None
    want = (1, 0) if base.shape != region.space else (region.cols, 1)
    got = flat.strides if full else (flat.strides[0], 0)
    return base if got == want else None


def _reads_fit(region: Region, m: Node) -> bool:
    for x in m.inputs:
        if member_read(region, m, x) is not None:
            continue
        if _base(x) in region.members or external_layout(region, m, x) is None:
            return False
    return True


def _base(x: Node) -> Node:
    while x.op in VIEW_OPS:
        x = x.inputs[0]
    return x


def _drop_downstream(region: Region, start: Node, uses) -> None:
    stack = [start]
    while stack:
        n = stack.pop()
        if n not in region.members:
            continue
        region.members.discard(n)
        stack.extend(c for c, _ in uses.get(n, ()) if c is not None)


def _worth_it(region: Region) -> bool:
    members = region.members
    reductions = [
        m
        for m in members
        if m.op in ROW_REDUCTIONS and m.group is Group.REDUCE and not region.is_column(m)
    ]
    if not reductions:
        return False
    if len(reductions) >= 2:
        return True
    reduced = set(reductions)
    row_values = {m for m in members if region.is_row(m) or m in reduced}

    def from_reduction(m: Node, seen: set[Node]) -> bool:
        if m in reduced:
            return True
        if m in seen or m not in members:
            return False
        seen.add(m)
        return any(from_reduction(x, seen) for x in m.inputs)

    return any(
        m.shape == region.space
        and m.op not in ROW_REDUCTIONS
        and any(x in row_values and from_reduction(x, set()) for x in m.inputs)
        for m in members
    )


def split_total_reductions(g: Graph) -> Graph:
    """`op(x)` over every axis, where rows of `x`'s shape are reduced elsewhere in the
    graph, becomes `op(op(x, axes=k.., keepdim=True))`: the inner per-row partials join
    the row kernel that computes `x` (so `x` is never written to memory), the outer
    reduction adds R numbers. (A loss `sum(layer_norm(...) * t)` is the typical case.)"""
    suffix: dict[tuple[int, ...], int] = {}
    for n in g.nodes:
        if _eligible_reduction(n):
            suffix.setdefault(n.inputs[0].shape, _suffix_axes(n))
    if not suffix:
        return g

    def replace(n: Node, inputs: tuple[Node, ...]) -> Node | None:
        if not (
            n.op in ROW_REDUCTIONS
            and n.group is Group.REDUCE
            and n.inputs[0].dtype.is_floating_point
            and len(n.inputs[0].shape) >= 2
            and n.inputs[0].shape in suffix
            and _total(n)
        ):
            return None
        (x,) = inputs
        k = suffix[x.shape]
        rank = len(x.shape)
        row_shape = x.shape[:k] + (1,) * (rank - k)
        inner = Node(
            n.op,
            (x,),
            (("axes", tuple(range(k, rank))), ("keepdim", True)),
            TensorType(n.dtype, row_shape),
            n.loc,
        )
        return Node(n.op, (inner,), n.attrs, n.type, n.loc)

    return replace_nodes(g, replace)


def _total(n: Node) -> bool:
    rank = len(n.inputs[0].shape)
    axes = n.attr("axes")
    return (
        axes is None
        or tuple(axes) == ()
        or tuple(sorted(a % rank for a in axes)) == tuple(range(rank))
    )
