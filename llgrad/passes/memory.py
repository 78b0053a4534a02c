"""Memory planning: every intermediate buffer of a compiled graph gets an offset in one arena.

A compiled graph runs its kernels in a fixed order, so each buffer is live from the first
kernel that touches it (its writer) to the last one that touches it (its last reader).
Buffers whose live intervals do not overlap may share bytes. The planner is a greedy
first-fit over the buffers in the order they come alive: it frees the buffers whose last
use is strictly before the new buffer's first, then places the new one at the lowest
64-byte-aligned offset where it fits between the buffers still live. A kernel's inputs and
outputs are live at the same step, so no kernel ever reads bytes it also writes.

Only intermediates live in the arena. Graph inputs are the caller's tensors, graph outputs
are allocated per call by the executor (they outlive the call), constants are read-only
data in the compiled module, and views own nothing: they alias their base buffer with an
offset and strides (`FusionPlan.views`).

`plan_buffers(buffers)` plans any list of buffers (the code generator calls it with the
buffers of the kernel launches, including scratch space such as the partial sums of a
two-stage reduction); `plan_graph(fusion)` plans a fusion result at kernel-group
granularity, which is what the pass reports on its own.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Any

from ..ir.graph import Node
from ..schedule.program import KINDS, Buffer
from ..ir.printer import format_type

__all__ = ["ALIGNMENT", "Buffer", "MemoryPlan", "plan_buffers", "plan_graph", "align_up"]

ALIGNMENT = 64


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


@dataclass
class MemoryPlan:
    """Offsets of the arena buffers, the arena's size, and what reuse saved."""

    buffers: list[Buffer]
    arena_bytes: int  # peak: the arena's size
    total_bytes: int  # every arena buffer side by side (no reuse)
    views: dict[Node, tuple[Buffer, Any]] = field(default_factory=dict)
    names: dict[Node, str] = field(default_factory=dict)

    @property
    def peak_bytes(self) -> int:
        return self.arena_bytes

    @property
    def saved_bytes(self) -> int:
        return self.total_bytes - self.arena_bytes

    def describe_buffer(self, b: Buffer) -> str:
        what = ""
        if b.node is not None:
            what = f" {self.names.get(b.node, b.node.op)}: {format_type(b.node.type)}"
        where = {
            "input": f"input {b.slot}",
            "output": f"output {b.slot}",
            "const": "module constant",
        }.get(b.kind, f"arena +{b.offset}")
        live = f" live [{b.first}, {b.last}]" if b.first >= 0 else " unused"
        return f"{b.name} ({b.kind}{what}) {b.nbytes} B at {where}{live}"

    def __str__(self) -> str:
        lines = [
            f"memory plan: arena {self.arena_bytes} B peak vs {self.total_bytes} B for "
            f"all intermediates ({self.saved_bytes} B saved by reuse)"
        ]
        order = sorted(self.buffers, key=lambda b: (KINDS.index(b.kind), b.offset, b.first))
        lines += ["  " + self.describe_buffer(b) for b in order]
        for v, (base, layout) in self.views.items():
            lines.append(
                f"  view {self.names.get(v, v.op)} = {v.op}: aliases {base.name} with {layout}"
            )
        return "\n".join(lines)


def plan_buffers(
    buffers: list[Buffer],
    views: dict[Node, tuple[Buffer, Any]] | None = None,
    names: dict[Node, str] | None = None,
) -> MemoryPlan:
    """Give every arena buffer an offset (greedy first-fit over liveness intervals)."""
    arena = [b for b in buffers if b.in_arena]
    total = sum(align_up(b.nbytes) for b in arena)
    free: list[list[int]] = [[0, _END]]  # the free [start, end) ranges, by start, merged
    expiring: list[tuple[int, int, Buffer]] = []  # heap of (last use, order, placed)
    peak = 0
    for k, b in enumerate(sorted(arena, key=lambda b: (b.first, -b.nbytes, b.name))):
        if b.nbytes == 0 or b.first < 0:
            b.offset = 0  # nothing is ever read or written there
            continue
        while expiring and expiring[0][0] < b.first:
            a = heapq.heappop(expiring)[2]
            _release(free, a.offset, a.offset + align_up(a.nbytes))
        b.offset = _first_fit(free, align_up(b.nbytes))
        heapq.heappush(expiring, (b.last, k, b))
        peak = max(peak, b.offset + align_up(b.nbytes))
    return MemoryPlan(list(buffers), peak, total, dict(views or {}), dict(names or {}))


_END = 1 << 62  # the free range after every placed buffer


def _first_fit(free: list[list[int]], size: int) -> int:
    """Take `size` bytes from the lowest free range that holds them; their offset."""
    for k, (start, end) in enumerate(free):
        if end - start >= size:
            if end - start == size:
                del free[k]
            else:
                free[k][0] = start + size
            return start
    raise AssertionError("the last free range is unbounded")


def _release(free: list[list[int]], start: int, end: int) -> None:
    """Return [start, end) to the free ranges, merging it with free neighbours."""
    k = bisect.bisect_left(free, start, key=lambda r: r[0])
    if k < len(free) and free[k][0] == end:
        end = free.pop(k)[1]
    if k > 0 and free[k - 1][1] == start:
        free[k - 1][1] = end
    else:
        free.insert(k, [start, end])


def plan_graph(fusion: Any) -> MemoryPlan:
    """Plan a `FusionPlan` at group granularity: each group is one step.

    Materialized values that are not graph outputs become arena buffers live from their
    group to their last reading group. (Compiled graphs plan the finer launch-level
    buffers of `codegen.graph`, which adds kernel scratch space.)
    """
    outputs = set(fusion.direct_outputs.values())
    buffers: dict[Node, Buffer] = {}
    for grp in fusion.groups:
        for o in grp.outputs:
            if o in outputs or o in buffers:
                continue
            nbytes = o.dtype.itemsize * _numel(o.shape)
            buffers[o] = Buffer(fusion.names.get(o, o.op), nbytes, "temp", node=o)
            buffers[o].touch(grp.index)
    for grp in fusion.groups:
        for r in grp.inputs:
            b = buffers.get(r.base)
            if b is not None:
                b.touch(grp.index)
    views = {v: (buffers[r.base], r.layout) for v, r in fusion.views.items() if r.base in buffers}
    return plan_buffers(list(buffers.values()), views, fusion.names)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
