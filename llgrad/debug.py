"""`lg.debug.bisect(fn, *args)`: find the first IR node where compiled code and a
reference part ways.

The function is traced (and decomposed into primitive ops, as the compiler sees it), every
node's reference value is computed by the NumPy interpreter: in the graph's own dtypes
(`reference="numpy"`, what eager mode is tested against) or with every floating value
widened to float64 (`reference="float64"`, which exposes precision lost in float32/16).
Then the compiled graph is run:

1. the whole graph, compiled as `lg.compile` would: if no output differs beyond the
   tolerance, there is nothing to find;
2. a bisection over the nodes the first differing output depends on, in order: each probe
   compiles the prefix of the graph up to one node, with that node as its only output, so
   the node is computed with the fusion it would have inside a larger kernel;
3. from the node the bisection lands on, a walk back while one of its inputs differs too,
   so the node reported differs while every input it reads agrees: the op where the
   values part, with its source line.

A value differs when `|compiled - reference| > atol + rtol * |reference|` anywhere (NaN in
one and not the other counts; integers and booleans must be equal). The defaults scale
with the dtype (float16/bfloat16 1e-2, float32 1e-4, float64 1e-9; atol is rtol times the
largest reference magnitude, at least rtol).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .compiler.pipeline import compile_graph
from .ir import registry
from .ir.graph import Graph, Node
from .ir.interpret import from_bfloat16_bits, interpret, run_node
from .ir.printer import format_type
from .compiler.decompose import decompose
from .tracer.make_ir import _flatten, trace

__all__ = ["bisect", "BisectReport"]

_RTOL = {
    "float16": 1e-2,
    "bfloat16": 1e-2,
    "float32": 1e-4,
    "float64": 1e-9,
    "complex64": 1e-4,
    "complex128": 1e-9,
}


@dataclass
class BisectReport:
    """What `bisect` found (`node` is None when compiled and reference agree)."""

    reference: str
    node: Node | None
    index: int | None  # position in the decomposed graph
    error: float  # max |compiled - reference| at that node
    tolerance: str
    compiled: np.ndarray | None = None
    expected: np.ndarray | None = None
    compiles: int = 0
    outputs: list[float] = field(default_factory=list)  # error per graph output

    @property
    def loc(self) -> str | None:
        return None if self.node is None else self.node.loc

    def __str__(self) -> str:
        if self.node is None:
            return (
                f"bisect ({self.reference} reference): every output agrees within "
                f"{self.tolerance} (max errors {self.outputs}); {self.compiles} "
                f"compile(s)"
            )
        n = self.node
        ins = ", ".join(format_type(i.type) for i in n.inputs)
        where = f" at {n.loc}" if n.loc else ""
        return (
            f"bisect ({self.reference} reference): first divergence at node "
            f"{self.index}: {n.op}({ins}) -> {format_type(n.type)}{where}\n"
            f"  max |compiled - reference| = {self.error:.6g} (tolerance "
            f"{self.tolerance}) while its inputs agree; {self.compiles} compile(s)"
        )


def _wide(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a


def _references(g: Graph, inputs: list[np.ndarray], wide: bool) -> dict[Node, np.ndarray]:
    if not wide:
        every = Graph(g.name, g.params, [n for n in g.nodes if n not in set(g.params)])
        return dict(zip(every.outputs, interpret(every, inputs)))

    values: dict[Node, np.ndarray] = {}
    for p, x in zip(g.params, inputs):
        values[p] = _wide(from_bfloat16_bits(x) if p.dtype.name == "bfloat16" else x)
    for n in g.nodes:
        if n in values:
            continue
        args = [values[i] for i in n.inputs]
        if n.dtype.kind not in "fc":  # integer results: the node's own dtype
            values[n] = run_node(
                n,
                [
                    a.astype(i.dtype.np) if i.dtype.kind in "biu" else a
                    for a, i in zip(args, n.inputs)
                ],
            )
            continue
        ref = registry.get(n.op).reference
        values[n] = _wide(np.asarray(ref(*args, **dict(n.attrs))))
    return values


def _error(
    got: np.ndarray, want: np.ndarray, dtype: Any, rtol: float | None, atol: float | None
) -> tuple[float, bool, str]:
    """(max abs error, whether it is beyond tolerance, the tolerance as text)."""
    if dtype.kind in "biu":
        bad = bool(np.any(got != want))
        return (
            (
                float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
                if got.size
                else 0.0
            ),
            bad,
            "exact",
        )
    got = np.asarray(got, dtype=np.complex128 if dtype.is_complex else np.float64)
    want = np.asarray(want, dtype=got.dtype)
    r = _RTOL.get(dtype.name, 1e-4) if rtol is None else rtol
    finite = np.isfinite(want)
    scale = float(np.max(np.abs(want[finite]))) if finite.any() else 1.0
    a = r * max(scale, 1.0) if atol is None else atol
    nan_mismatch = bool(np.any(np.isnan(got) != np.isnan(want)))
    both = np.isfinite(got) & finite
    inf_mismatch = bool(
        np.any((~np.isfinite(got) | ~finite) & ~np.isnan(got) & ~np.isnan(want) & (got != want))
    )
    diff = np.abs(got[both] - want[both])
    err = float(diff.max()) if diff.size else 0.0
    beyond = bool(np.any(diff > a + r * np.abs(want[both]))) or nan_mismatch or inf_mismatch
    if nan_mismatch or inf_mismatch:
        err = float("inf")
    return err, beyond, f"rtol {r:g}, atol {a:g}"


def bisect(
    fn: Callable[..., Any],
    *args: Any,
    reference: str = "numpy",
    rtol: float | None = None,
    atol: float | None = None,
    **kwargs: Any,
) -> BisectReport:
    """Run `fn(*args, **kwargs)` compiled and by the reference, node by node, and report
    the first IR node whose compiled values differ beyond the tolerance (see the module
    docstring); `print(report)` says which op, where in the source, by how much."""
    if reference not in ("numpy", "float64"):
        raise ValueError(f"bisect: reference must be 'numpy' or 'float64', got {reference!r}")

    fn = getattr(fn, "fn", fn)  # a CompiledFunction: its Python function
    leaves: list[Any] = []
    _flatten((args, kwargs), leaves)
    graph, ctx, _ = trace(fn, args, kwargs)
    g = decompose(graph)
    tensors = [t.detach() for t in list(leaves) + list(ctx.captured)]
    inputs = [t._numpy_view().copy() for t in tensors]
    refs = _references(g, inputs, reference == "float64")
    compiles = [0]
    position = {n: k for k, n in enumerate(g.nodes)}

    def run(outputs: list[Node]) -> list[np.ndarray]:
        compiles[0] += 1
        sub = compile_graph(Graph(f"{g.name}_probe{compiles[0]}", g.params, outputs))
        return [o._values().copy() for o in sub.executable(*tensors)]

    def check(n: Node, got: np.ndarray) -> tuple[float, bool, str]:
        want = refs[n]
        if n.dtype.name == "bfloat16" and reference == "numpy":
            want = from_bfloat16_bits(want)
        return _error(got, want, n.dtype, rtol, atol)

    params = set(g.params)
    outs = [o for o in g.outputs if o not in params]
    errors = [check(o, v) for o, v in zip(outs, run(outs))] if outs else []
    bad = [o for o, e in zip(outs, errors) if e[1]]
    tol = errors[0][2] if errors else "-"
    if not bad:
        return BisectReport(
            reference, None, None, 0.0, tol, compiles=compiles[0], outputs=[e[0] for e in errors]
        )
    # the nodes the first differing output depends on, in order
    target = bad[0]
    needed: set[Node] = set()
    stack = [target]
    while stack:
        x = stack.pop()
        if x in needed or x in params:
            continue
        needed.add(x)
        stack.extend(x.inputs)
    order = sorted(needed, key=position.__getitem__)
    probed: dict[Node, tuple[tuple[float, bool, str], np.ndarray]] = {}

    def probe(n: Node) -> tuple[float, bool, str]:
        if n not in probed:
            (v,) = run([n])
            probed[n] = (check(n, v), v)
        return probed[n][0]

    lo, hi = 0, len(order) - 1  # order[hi] differs (it is the output)
    while lo < hi:
        mid = (lo + hi) // 2
        if probe(order[mid])[1]:
            hi = mid
        else:
            lo = mid + 1
    node = order[lo]
    probe(node)
    while True:  # walk back while an input differs too
        differing = [i for i in node.inputs if i not in params and probe(i)[1]]
        if not differing:
            break
        node = differing[0]
    (err, _, tol), value = probed[node]
    return BisectReport(
        reference,
        node,
        position[node],
        err,
        tol,
        value,
        refs[node],
        compiles[0],
        [e[0] for e in errors],
    )
