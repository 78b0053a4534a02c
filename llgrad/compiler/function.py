"""`GraphFunction`: an IR graph compiled to native code, usable as one autograd op.

Calling it runs the compiled forward graph. When an input requires grad, the forward is
the partitioned one (outputs plus residuals) and the outputs get ONE backward node whose
`apply` runs the compiled backward graph on the residuals: compiled and eager code mix in
one tape. Under `create_graph=True` the node instead runs a graph that recomputes the
forward and applies the backward (`grad_graph`), itself through a `GraphFunction`, so
gradients of gradients work through compiled code to any order.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from .. import _log
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.node import Node, SavedTensor, edge
from ..ir.graph import Graph
from ..tensor import Tensor


def optimize(graph: Graph) -> tuple[Graph, list[tuple[str, Graph]], float]:
    """The pass pipeline (simplify, cse, fold, dce); returns (graph, stages, seconds)."""
    t0 = time.perf_counter()
    from ..passes.manager import run_pipeline
    result = run_pipeline(graph)
    stages = [(s[0], s[1]) for s in result.stages]
    return result.graph, stages, time.perf_counter() - t0


@dataclass
class Compiled:
    """A graph after the passes, and its executable."""

    graph: Graph
    optimized: Graph
    executable: Any
    stages: list[tuple[str, Graph]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def run(self) -> Any:
        """The executable's call for arguments of the graph's own signature: a static
        graph's generated runner (`CompiledGraph.runner`), else the executable."""
        return self.runner(0)

    def runner(self, verified: int) -> Any:
        """`run`, for a caller that has checked its first `verified` arguments' class,
        dtype and shape (see `CompiledGraph.runner`)."""
        runner = getattr(self.executable, "runner", None)
        return runner(verified) if runner is not None else self.executable


def compile_graph(graph: Graph, dynamic: bool = False) -> Compiled:
    """Decompose, optimize and make executable: one native module for the whole graph, or
    (`dynamic`) a runner over the shape-generic eager kernels."""
    from ..passes.decompose import decompose
    from ..runtime.executor import CompiledGraph
    t0 = time.perf_counter()
    lowered = decompose(graph)
    t_dec = time.perf_counter() - t0
    optimized, stages, t_opt = optimize(lowered)
    stages = [("decompose", lowered)] + stages
    t0 = time.perf_counter()
    if dynamic:
        from ..eager.graph import GraphRunner
        executable: Any = GraphRunner(optimized)
    else:
        executable = CompiledGraph(optimized)
    seconds = {"decompose": t_dec, "passes": t_opt, "codegen": time.perf_counter() - t0}
    _log.log("graph", f"compiled @{graph.name}: {len(graph.nodes)} nodes -> "
                      f"{len(optimized.nodes)} after passes")
    return Compiled(graph, optimized, executable, stages, seconds)


@dataclass
class Differentiated:
    forward: Compiled          # outputs + residuals
    backward: Compiled         # (residuals, cotangents) -> grads
    grad_graph: Graph          # (primals, cotangents) -> grads: for create_graph
    n_outputs: int
    partition: Any
    output_meta: list | None = None     # (shape, dtype) of each result (`CompiledBackward`)
    backward_run: Any = None            # `backward.run`, looked up once


class GraphFunction:
    def __init__(self, graph: Graph, dynamic: bool = False):
        self.graph = graph
        self.dynamic = dynamic
        self._plain: Compiled | None = None
        self._diff: dict[tuple[int, ...], Differentiated] = {}
        self._grad_fns: dict[tuple[int, ...], "GraphFunction"] = {}
        # (output, input) pairs whose output may be written into the input's memory
        # when the graph runs without autodiff around it (a training step's updates)
        self.write_in_place: list[tuple[int, int]] = []

    def plain(self) -> Compiled:
        if self._plain is None:
            self._plain = compile_graph(self.graph, self.dynamic)
            if self.write_in_place and hasattr(self._plain.executable, "write_in_place"):
                self._plain.executable.write_in_place(self.write_in_place)
        return self._plain

    def differentiated(self, wrt: tuple[int, ...]) -> Differentiated:
        d = self._diff.get(wrt)
        if d is None:
            from ..passes.autodiff import differentiate
            from ..passes.partition import partition
            n_in, n_out = len(self.graph.params), len(self.graph.outputs)
            joint = differentiate(self.graph, list(wrt))
            part = partition(joint, n_in, n_out)
            grad_graph = Graph(f"{self.graph.name}_grad", joint.params, joint.outputs[n_out:])
            d = Differentiated(compile_graph(part.forward, self.dynamic),
                               compile_graph(part.backward, self.dynamic), grad_graph, n_out,
                               part)
            self._diff[wrt] = d
        return d

    def __call__(self, *inputs: Tensor) -> list[Tensor]:
        wrt = self.wrt_of(inputs)
        if not wrt:
            return list(self.plain().executable(*inputs))
        d = self.differentiated(wrt)
        return self.record(d, wrt, inputs, d.forward.executable(*inputs))

    @staticmethod
    def wrt_of(inputs: Sequence[Tensor]) -> tuple[int, ...]:
        """The inputs a call differentiates with respect to (none when grad is off)."""
        if not is_grad_enabled():
            return ()
        return tuple(i for i, x in enumerate(inputs)
                     if x._requires_grad and (x._dtype.is_floating_point or
                                              x._dtype.is_complex))

    def record(self, d: Differentiated, wrt: tuple[int, ...], inputs: Sequence[Tensor],
               outs: list[Tensor]) -> list[Tensor]:
        """Give the results of a differentiable call (`outs`: results then residuals of
        `d.forward`) their one backward node; returns the results."""
        results, residuals = outs[:d.n_outputs], outs[d.n_outputs:]
        node = CompiledBackward(self, wrt, inputs, residuals, results, d)
        for k, r in enumerate(results):
            if r._dtype.is_floating_point or r._dtype.is_complex:
                r._requires_grad = True
                r.grad_fn = node
                r._output_nr = k
        return results

    def grad_function(self, wrt: tuple[int, ...]) -> "GraphFunction":
        fn = self._grad_fns.get(wrt)
        if fn is None:
            fn = self._grad_fns[wrt] = GraphFunction(self.differentiated(wrt).grad_graph,
                                                     self.dynamic)
        return fn


class CompiledBackward(Node):
    """The one backward node of a compiled call."""

    __slots__ = ("function", "wrt", "inputs", "versions", "residuals", "output_meta", "diff")

    @property
    def direct(self) -> bool:          # static graphs return new buffers (see Node.direct)
        return not self.function.dynamic

    def __init__(self, function: GraphFunction, wrt: tuple[int, ...], inputs: Sequence[Tensor],
                 residuals: list[Tensor], results: list[Tensor],
                 diff: Differentiated | None = None):
        super().__init__(tuple([edge(inputs[i]) for i in wrt]))
        d = diff if diff is not None else function.differentiated(wrt)
        self.function = function
        self.wrt = wrt
        # the inputs as saved tensors (read by reference; their versions are checked when
        # backward reads them, as eager's saved tensors are)
        self.inputs = inputs
        self.versions = [x._storage.version for x in inputs]
        self.residuals = residuals
        if function.dynamic:
            self.output_meta = [(r._shape, r._dtype) for r in results]
        else:                             # a static graph's outputs always look alike
            if d.output_meta is None:
                d.output_meta = [(r._shape, r._dtype) for r in results]
            self.output_meta = d.output_meta
        self.diff = d

    def saved_input(self, k: int) -> Tensor:
        """Input `k`, after eager's check that no in-place write changed it since."""
        x = self.inputs[k]
        if x._storage.version != self.versions[k]:
            saved = SavedTensor(x)
            saved.version = self.versions[k]
            saved.unpack(self, self.name(), k)          # raises PyTorch's error
        return x

    @property
    def num_outputs(self) -> int:
        return len(self.output_meta)

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        if self.residuals is None:
            from ..autograd.node import FREED
            raise RuntimeError(FREED)
        cts = list(grads)
        for k, (shape, dtype) in enumerate(self.output_meta):
            g = cts[k]
            if g is None:
                from ..functions import zeros
                cts[k] = zeros(shape, dtype=dtype)
            elif g._dtype is not dtype:
                cts[k] = g.to(dtype)
        if is_grad_enabled():
            # create_graph: recompute through a differentiable compiled graph
            primals = [self.saved_input(k) for k in range(len(self.inputs))]
            return tuple(self.function.grad_function(self.wrt)(*primals, *cts))
        d = self.diff
        saved = []
        for kind, k in d.partition.residual_sources:
            if kind == "out":
                saved.append(self.residuals[k])
            else:            # an input read by reference: eager's saved-tensor check
                saved.append(self.saved_input(k))
        run = d.backward_run
        if run is None:
            run = d.backward_run = d.backward.run
        return tuple(run(*saved, *cts))

    def release(self) -> None:
        self.residuals = None
        self.inputs = ()
