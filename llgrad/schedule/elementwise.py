"""Scalar DAGs and elementwise kernel specs.

An `Expr` is the body of an elementwise (or fused) kernel: a DAG of scalar ops over its
inputs, named by registry op. `ElementwiseKernel` is what identifies one elementwise kernel:
its DAG, its loop rank after collapsing, and the innermost strides baked into its code.
Codegen (`codegen.elementwise`) turns a spec into LLVM IR; eager dispatch and the
compiler's lowering build specs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._keys import attrs_key
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.types import TensorType

# Ops that cost several times a simple one: a call into (or an inlined) polynomial of the
# math library. `op_cost` weighs them for fusion's code-size cap and for the work that
# decides whether a launch is worth splitting across threads.
EXPENSIVE = frozenset(
    {
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sin",
        "cos",
        "tan",
        "tanh",
        "erf",
        "erfc",
        "sigmoid",
        "silu",
        "gelu",
        "softplus",
        "pow",
        "atan2",
        "normal",
    }
)


def op_cost(op: str) -> int:
    """An op's cost in simple-op units (a transcendental counts 8)."""
    return 8 if op in EXPENSIVE else 1


@dataclass(frozen=True, slots=True, eq=False)
class ExprNode:
    """One op of a scalar DAG; `args` index inputs first (0..n_in-1), then earlier nodes.

    Nodes compare and hash by their attributes' `number_key`s, so a node holding -0.0
    never equals (nor shares a compiled kernel with) one holding 0.0."""

    op: str
    args: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    def _key(self) -> tuple:
        return (self.op, self.args, attrs_key(self.attrs) if self.attrs else ())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not ExprNode:
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, slots=True)
class Expr:
    in_dtypes: tuple[DType, ...]
    nodes: tuple[ExprNode, ...]
    outputs: tuple[int, ...]  # refs (input or node)

    def cost(self) -> int:
        """Work per element, in simple-op units (at least 1: a copy)."""
        return max(1, sum(op_cost(n.op) for n in self.nodes))

    def text(self) -> str:
        """A compact, deterministic spelling (kernel names, logs, cache keys)."""
        parts = [f"in{i}:{d.short}" for i, d in enumerate(self.in_dtypes)]
        for j, n in enumerate(self.nodes):
            a = ",".join(f"{k}={v}" for k, v in n.attrs)
            parts.append(
                f"v{len(self.in_dtypes) + j}={n.op}({','.join(map(str, n.args))}"
                f"{';' + a if a else ''})"
            )
        return " ".join(parts) + " -> " + ",".join(map(str, self.outputs))


def out_dtypes(expr: Expr) -> tuple[DType, ...]:
    """The dtype each output has (evaluated symbolically through the shape rules)."""
    types: list[TensorType] = [TensorType(d, ()) for d in expr.in_dtypes]
    for node in expr.nodes:
        op = registry.get(node.op)
        types.append(op.infer(tuple(types[a] for a in node.args), **dict(node.attrs)))
    return tuple(types[o].dtype for o in expr.outputs)


@dataclass(frozen=True, slots=True)
class ElementwiseKernel:
    """What identifies a compiled elementwise kernel (the kernel-cache key)."""

    expr: Expr
    rank: int
    inner: tuple[int | None, ...]  # per operand (outputs first): 1, 0, or None (run time)
    # inputs that are output 0 itself (an in-place write, `p.add_(g)`): read through the
    # output's pointer and offsets, so LLVM sees one address per element and vectorizes
    # without the run-time overlap check that an exact alias fails (it then runs scalar)
    in_place: tuple[int, ...] = ()

    @property
    def n_operands(self) -> int:
        return len(self.expr.outputs) + len(self.expr.in_dtypes)

    @property
    def n_slots(self) -> int:
        return 2 + (self.rank - 1) + self.n_operands * (1 + self.rank)
