"""Row-wise (persistent) kernels: reductions over a row and the work that consumes them.

A row kernel runs over an `[R, C]` index space one row at a time. Its program is a scalar
DAG (`ExprNode`s, inputs first) in which some nodes are reductions over the row (`sum`,
`amax`, `amin`); every value is either *full* (one per element of the row) or *row*-level
(one per row: a reduction's result, an input read with column stride 0, or an
elementwise op of row-level values only). Softmax, layer_norm, log_softmax, logsumexp,
cross-entropy and their backward graphs are such programs.

A value's *level* is how many reductions lie between it and the inputs: a reduction of a
level-`p` value is a row value of level `p + 1`. The kernel makes one pass over the row per
level: pass `p` accumulates every reduction of level-`p` values (several reductions share
the pass), stores the full outputs of level `p`, and keeps in a stack row buffer the full
values a later pass needs again (`cache`), so they are computed once (an `exp` is not
evaluated twice) and re-read from L1. Row values are computed between passes, in
registers. The row, a few KiB, stays in L1/L2 across its passes, so memory sees each
input read once and each output written once.

Sums of float32 (and half) values add runs of `SUM_BLOCK` elements in float32 (vectorized)
and the run totals in float64, as reduction kernels do; max/min propagate NaN.

The kernel's argument block and code are `codegen/rowwise.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import registry
from ..ir.dtypes import DType
from ..ir.types import TensorType
from .elementwise import Expr

REDUCTIONS = ("sum", "amax", "amin")
COLUMN_SUM = "colsum"  # a sum over the rows (one value per column), not a registry op
CACHE_BYTES = 1 << 16  # most bytes of row buffers one kernel keeps on its stack


@dataclass(frozen=True, slots=True)
class RowKernel:
    """What identifies a row kernel (the kernel-cache key).

    `expr`: the program; reduction nodes have op in `REDUCTIONS` and reduce one full
    value over the row; `colsum` nodes sum one full value over the rows: each is an output
    whose operand is a float64 partial-sum buffer of one row of C per piece of the row
    range (`(ptr, C, 1)`; piece = lo // step, so the threads splitting the rows never
    share a partial row; a small reduction adds the pieces afterwards).
    `row_inputs[j]`: input j is one value per row (column stride 0).
    `inner[k]` per operand (outputs first): the column stride baked in (1 or 0), or None.
    `cols`: C, the row length (compiled graphs have static shapes; row buffers live on
    the stack).
    """

    expr: Expr
    row_inputs: tuple[bool, ...]
    inner: tuple[int | None, ...]
    cols: int

    @property
    def n_operands(self) -> int:
        return len(self.expr.outputs) + len(self.expr.in_dtypes)

    @property
    def n_slots(self) -> int:
        return 4 + 3 * self.n_operands


@dataclass(frozen=True)
class RowPlan:
    """The analysis of a row program: which values are row-level, their levels, and
    what each pass computes, stores and caches."""

    is_row: tuple[bool, ...]  # per ref (inputs, then nodes)
    is_column: tuple[bool, ...]  # per ref: a sum over the rows (`colsum`)
    level: tuple[int, ...]
    dtypes: tuple[DType, ...]
    passes: int
    cached: tuple[int, ...]  # full node refs kept in row buffers

    def __str__(self) -> str:
        return f"{self.passes} passes; cached refs {list(self.cached)}; levels {list(self.level)}"


def plan(spec: RowKernel) -> RowPlan:
    """Row-ness, level and dtype of every value; the passes; the cached values."""
    expr = spec.expr
    n_in = len(expr.in_dtypes)
    is_row = list(spec.row_inputs)
    is_column = [False] * n_in
    level = [0] * n_in
    types = [TensorType(d, ()) for d in expr.in_dtypes]
    for node in expr.nodes:
        if node.op in REDUCTIONS or node.op == COLUMN_SUM:
            (a,) = node.args
            if is_row[a] or is_column[a]:
                raise ValueError(f"row kernel: {node.op} of a row-level or column value")
            column = node.op == COLUMN_SUM
            is_row.append(not column)
            is_column.append(column)
            level.append(level[a] + (0 if column else 1))
            types.append(types[a])
        else:
            if any(is_column[a] for a in node.args):
                raise ValueError(
                    "row kernel: a column sum is complete only after every "
                    "row; nothing in the kernel can read it"
                )
            is_column.append(False)
            is_row.append(all(is_row[a] for a in node.args))
            level.append(max((level[a] for a in node.args), default=0))
            types.append(
                registry.get(node.op).infer(tuple(types[a] for a in node.args), **dict(node.attrs))
            )
    # a full value is computed in the pass of its level; where a later pass reads it
    # again, it is cached (unless the buffers would not fit CACHE_BYTES)
    passes = 0
    needed_in: dict[int, set[int]] = {}
    for j, node in enumerate(expr.nodes):
        if node.op in REDUCTIONS:
            passes = max(passes, level[node.args[0]] + 1)
    for o in expr.outputs:
        if not is_row[o]:
            passes = max(passes, level[o] + 1)
    for j, node in enumerate(expr.nodes):
        ref = n_in + j
        if is_row[ref]:
            continue
        for a in node.args:
            if a >= n_in and not is_row[a] and level[a] < level[ref]:
                needed_in.setdefault(a, set()).add(level[ref])
    cached = sorted(a for a in needed_in)
    nbytes = sum(spec.cols * buffer_bytes(types[a].dtype) for a in cached)
    if nbytes > CACHE_BYTES:
        cached = []
    return RowPlan(
        tuple(is_row),
        tuple(is_column),
        tuple(level),
        tuple(t.dtype for t in types),
        passes,
        tuple(cached),
    )


def buffer_bytes(d: DType) -> int:
    """Bytes one value of `d` takes in a row buffer (computed values: compute dtype)."""
    return d.compute.itemsize if d.is_floating_point else max(d.itemsize, 1)
