"""Elementwise kernels: a loop nest over the output's index space around a scalar DAG.

One generator serves eager mode (a DAG of one op plus the casts promotion needs) and fused
compiled kernels (a DAG of many ops). Sizes and strides are run-time values read from the
argument block, so one kernel serves every shape of its rank; the innermost stride of each
operand may be baked in as 1 (contiguous) or 0 (broadcast), which lets LLVM vectorize
without run-time stride checks.

Argument block: `[lo, hi, size_1 .. size_{r-1}, (ptr, stride_0 .. stride_{r-1}) per operand]`
with outputs first; the outermost loop runs over `[lo, hi)` so the runtime can split it
across threads. Strides are in elements.
"""

from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir import registry
from ..schedule.elementwise import ElementwiseKernel, Expr, ExprNode, out_dtypes
from .loops import I64, for_range, new_kernel
from .scalar import SV, LLVMScalar, memory_type
from .worker import INVARIANT_BODY


_HALF = (dt.float16, dt.bfloat16)

# ops whose scalar code is one long chain of dependent double-precision steps (log,
# polynomials, exp, divisions, a Newton step): a loop of them runs at the chain's latency
# with one vector in flight, since LLVM's cost model does not interleave a body this
# long. Their innermost loop asks for INTERLEAVE independent vectors per iteration (the
# same per-element instructions: only the schedule changes).
INTERLEAVED_OPS = frozenset({"erfinv"})
INTERLEAVE = 4


def evaluate(s: LLVMScalar, expr: Expr, inputs: Sequence[SV]) -> list[SV]:
    """Emit the DAG's scalar code; returns the output values.

    An op on float16/bfloat16 computes internally in float32 and rounds once, at its
    result (as PyTorch's kernels do), so e.g. softplus does not overflow in exp().
    """
    values: list[SV] = list(inputs)
    for node in expr.nodes:
        values.append(apply_node(s, node, [values[a] for a in node.args]))
    return [values[o] for o in expr.outputs]


def apply_node(s: LLVMScalar, node: ExprNode, args: Sequence[SV]) -> SV:
    """One op's scalar code (float16/bfloat16 computed in float32, rounded once)."""
    rule = registry.get(node.op).scalar
    assert rule is not None, f"{node.op} has no scalar rule"
    half = [a.dtype for a in args if a.dtype in _HALF]
    if half and node.op != "cast":
        args = [SV(a.value, dt.float32) if a.dtype in _HALF else a for a in args]
        result = rule(s, *args, **dict(node.attrs))
        if result.dtype is dt.float32:
            result = s.cast(result, half[0])
        return result
    return rule(s, *args, **dict(node.attrs))


def load_evaluate_store(
    s: LLVMScalar,
    expr: Expr,
    ins: Sequence[tuple[ir.Value, ir.Value]],
    outs: Sequence[tuple[ir.Value, ir.Value]],
) -> None:
    """One element of an elementwise kernel: load each input at its (pointer, element
    offset), evaluate the DAG, and store each output (cast to its dtype) at its own."""
    b = s.b
    loaded = [
        s.load(b.gep(p, [off], inbounds=True, source_etype=memory_type(d)), d, name=f"x{j}")
        for j, ((p, off), d) in enumerate(zip(ins, expr.in_dtypes))
    ]
    for (p, off), v, d in zip(outs, evaluate(s, expr, loaded), out_dtypes(expr)):
        if v.dtype is not d:
            v = s.cast(v, d)
        s.store(v, b.gep(p, [off], inbounds=True, source_etype=memory_type(d)))


def build(spec: ElementwiseKernel, name: str) -> ir.Module:
    expr, rank = spec.expr, spec.rank
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    outs = out_dtypes(expr)
    dtypes = list(outs) + list(expr.in_dtypes)
    n_out = len(outs)
    lo, hi = args.int(0, "lo"), args.int(1, "hi")
    sizes = [None] + [args.int(1 + d, f"size{d}") for d in range(1, rank)]
    base = 2 + (rank - 1)
    ptrs, strides = [], []
    for k in range(len(dtypes)):
        slot = base + k * (1 + rank)
        ptrs.append(args.ptr(slot, f"p{k}"))
        st = [args.int(slot + 1 + d, f"s{k}_{d}") for d in range(rank)]
        if spec.inner[k] is not None:
            st[-1] = I64(spec.inner[k])
        strides.append(st)
    s = LLVMScalar(b)
    innermost: list[ir.PhiInstr] = []

    def nest(depth: int, offsets: list[ir.Value]) -> None:
        start = lo if depth == 0 else I64(0)
        stop = hi if depth == 0 else sizes[depth]
        with for_range(b, start, stop, name=f"i{depth}") as i:
            here = [b.add(off, b.mul(i, st[depth])) for off, st in zip(offsets, strides)]
            if depth + 1 < rank:
                nest(depth + 1, here)
                return
            innermost.append(i)
            s._index = here[0]  # the output's element offset: its linear index
            own = [0 if j in spec.in_place else n_out + j for j in range(len(expr.in_dtypes))]
            load_evaluate_store(
                s,
                expr,
                [(ptrs[o], here[o]) for o in own],
                [(ptrs[k], here[k]) for k in range(n_out)],
            )

    nest(0, [I64(0)] * len(dtypes))
    b.ret_void()
    if any(node.op in INTERLEAVED_OPS for node in expr.nodes):
        _interleave(module, innermost[0])
    return module


def _interleave(module: ir.Module, index: ir.PhiInstr) -> None:
    """Ask LLVM's loop vectorizer to interleave `INTERLEAVE` vectors in the loop whose
    induction variable is `index` (loop metadata on its latch, the block that feeds the
    phi its next value)."""
    count = module.add_metadata(
        [ir.MetaDataString(module, "llvm.loop.interleave.count"), ir.IntType(32)(INTERLEAVE)]
    )
    loop = module.add_metadata([count])
    loop.operands = (loop, count)  # (a loop ID refers to itself)
    latch = index.incomings[-1][1]
    latch.terminator.set_metadata("llvm.loop", loop)


def build_text(spec: ElementwiseKernel, name: str) -> str:
    """`build`'s module as text for the kernel cache, marked INVARIANT_BODY when every input
    is broadcast along the innermost loop (stride 0), so the light pipeline compiles it."""
    text = str(build(spec, name))
    n_out = len(out_dtypes(spec.expr))
    inputs = spec.inner[n_out:]
    if inputs and all(s == 0 for s in inputs):
        return INVARIANT_BODY + text
    return text
