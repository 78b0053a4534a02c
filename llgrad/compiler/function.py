"""`GraphFunction`: an IR graph compiled to native code, usable as one autograd op.

Calling it runs the compiled forward graph. When an input requires grad, the forward is
the partitioned one (outputs plus residuals) and the outputs get ONE backward node whose
`apply` runs the compiled backward graph on the residuals: compiled and eager code mix in
one tape. Under `create_graph=True` the node instead runs a graph that recomputes the
forward and applies the backward (`grad_graph`), itself through a `GraphFunction`, so
gradients of gradients work through compiled code to any order.

Gradients in the forward. When the graph's one floating-point output is a scalar (a
loss), its backward is almost always started with the cotangent 1 (`loss.backward()`,
`lg.autograd.grad(loss, ...)`). Such a call then runs one graph that computes the loss
and its gradients at once (`differentiate(..., unit_cotangents=True)`: one pass over the
inputs instead of a forward, residuals and a backward that reads them again), and the node
hands those gradients out when its cotangent is exactly 1 and no input the gradients read
was changed in place since. Any other backward (another cotangent, a second backward with
`retain_graph`, `create_graph`) recomputes through `grad_graph` from the inputs, as
`create_graph` always does: the same values eager autograd gives, or its errors. A
function whose results are mostly not differentiated that way stops computing gradients
ahead (see `_Speculation`) and runs the partitioned forward and backward instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .._source import define
from ..tape.anomaly import _state as _anomaly
from ..tape.engine import hand_over, is_seed, plain_leaf
from ..tape.node import FREED, Node, SavedTensor, _sequence, edge
from ..dispatch.grad_mode import is_grad_enabled
from ..functions import zeros
from ..ir.graph import Graph
from ..specialize.compiled import speculative_source
from ..tensor import Tensor
from .pipeline import (  # noqa: F401  (re-exported: the compiler's public entry points)
    Compiled,
    CompileFailure,
    compile_graph,
    compiling,
    failures,
    optimize,
    report_failure,
    run_stage,
)


@dataclass
class Differentiated:
    forward: Compiled  # outputs + residuals
    backward: Compiled  # (residuals, cotangents) -> grads
    grad_graph: Graph  # (primals, cotangents) -> grads: for create_graph
    n_outputs: int
    partition: Any
    output_meta: list | None = None  # (shape, dtype) of each result (`CompiledBackward`)
    backward_run: Any = None  # `backward.run`, looked up once


# Whether scalar-loss calls compute their gradients in the forward (module docstring);
# False: always the partitioned forward and backward (for comparisons and tests).
GRADIENTS_IN_FORWARD = True


class _Speculation:
    """Gradients computed in the forward for one `wrt` of a scalar-loss graph.

    `forward` returns the graph's outputs, then the gradients for cotangent 1. `needed`:
    the inputs those gradients read (a backward checks their versions, as eager's saved
    tensors are checked). The policy: a node whose gradients are not taken as they are
    (another cotangent, or the node outlived without a backward while more than
    `MAX_PENDING` were made) counts against it; after `MAX_MISSES` of those, or with more
    than `MAX_PENDING` nodes made and not yet backpropagated, `on` turns False for good
    and calls run the partitioned forward and backward."""

    MAX_MISSES = 2
    MAX_PENDING = 16

    def __init__(self, forward: Compiled, needed: tuple[int, ...]):
        self.forward = forward
        self.needed = needed
        self.on = True
        self.pending = 0  # nodes made whose backward has not run yet
        self.misses = 0

    def made(self) -> None:
        self.pending += 1
        if self.pending > self.MAX_PENDING:
            self.on = False

    def used(self, hit: bool) -> None:
        self.pending -= 1
        if not hit:
            self.misses += 1
            if self.misses >= self.MAX_MISSES:
                self.on = False


class DiffCall:
    """`function` run differentiably with respect to `wrt` (recording its one backward
    node): the speculative graph while its policy holds, else the partitioned forward.
    `verified`: as `Compiled.runner`. Made once per (wrt, verified) by `diff_call`.
    `fast`: the same call with the speculative node's construction written out for this
    graph (`_speculative_call`), which the per-signature call path calls."""

    __slots__ = ("function", "wrt", "verified", "spec", "spec_run", "d", "run", "fast")

    def __init__(self, function: "GraphFunction", wrt: tuple[int, ...], verified: int):
        self.function, self.wrt, self.verified = function, wrt, verified
        self.spec = function.speculation(wrt)
        self.spec_run = self.spec.forward.runner(verified) if self.spec is not None else None
        self.d: Differentiated | None = None
        self.run: Any = None
        self.fast: Any = self
        if self.spec is None:
            self._partitioned()
        elif not function.dynamic:
            self.fast = _speculative_call(self)

    def _partitioned(self) -> None:
        self.spec = None
        self.d = self.function.differentiated(self.wrt)
        self.run = self.d.forward.runner(self.verified)

    def __call__(self, *inputs: Tensor) -> list[Tensor]:
        spec = self.spec
        if spec is not None:
            if spec.on:
                return self.function.record_speculative(
                    spec, self.wrt, inputs, self.spec_run(*inputs)
                )
            self._partitioned()
        return self.function.record(self.d, self.wrt, inputs, self.run(*inputs))


def _speculative_call(call: DiffCall) -> Any:
    """`call(*inputs)` while its speculation is on, as generated source: the forward's
    runner, then the `CompiledBackward` that `record_speculative` makes, its fields
    written out (`CompiledBackward.__init__`'s, for a static graph: the outputs' shapes
    and dtypes are constants) and the results' autograd fields set. With the speculation
    off, or anomaly mode on (the node records its stack), it is `call` itself."""
    function, spec, wrt = call.function, call.spec, call.wrt
    n_in, n_out = len(function.graph.params), len(function.graph.outputs)
    consts: dict[str, Any] = {
        "spec": spec,
        "slow": call,
        "anomaly": _anomaly,
        "run": call.spec_run,
        "new": object.__new__,
        "Backward": CompiledBackward,
        "edge": edge,
        "sequence": _sequence,
        "function": function,
        "WRT": wrt,
        "META": [(o.shape, o.dtype) for o in function.graph.outputs],
    }
    consts["N"] = n_out
    source = speculative_source(n_in, wrt, function.carries_gradient(wrt))
    return define(source, f"<llgrad speculative call @{function.graph.name}>", consts, "call")


class GraphFunction:
    def __init__(self, graph: Graph, dynamic: bool = False, device: str = "cpu"):
        self.graph = graph
        self.dynamic = dynamic
        self.device = device  # "cpu" or "cuda": where the executables run
        self._plain: Compiled | None = None
        self._joint: dict[tuple[int, ...], Graph] = {}
        self._diff: dict[tuple[int, ...], Differentiated] = {}
        self._spec: dict[tuple[int, ...], _Speculation | None] = {}
        self._calls: dict[tuple[tuple[int, ...], int], DiffCall] = {}
        self._grad_fns: dict[tuple[int, ...], "GraphFunction"] = {}
        self._carries: dict[tuple[int, ...], tuple[bool, ...]] = {}
        # (output, input) pairs whose output may be written into the input's memory
        # when the graph runs without autodiff around it (a training step's updates)
        self.write_in_place: list[tuple[int, int]] = []
        # a graph compiled while a backward runs (`grad_function`): a compile failure runs
        # it on the eager kernels instead of raising (`compile_graph`)
        self.fallback = False
        # the class of the calls' backward nodes (an eager composite names its node
        # after its function, as PyTorch's nodes are named)
        self.node_class: type = CompiledBackward

    def plain(self) -> Compiled:
        if self._plain is None:
            self._plain = compile_graph(self.graph, self.dynamic, self.fallback, self.device)
            if self.write_in_place and hasattr(self._plain.executable, "write_in_place"):
                self._plain.executable.write_in_place(self.write_in_place)
        return self._plain

    def joint(self, wrt: tuple[int, ...]) -> Graph:
        """The joint forward+backward graph (`compiler.autodiff.differentiate`)."""
        j = self._joint.get(wrt)
        if j is None:
            j = self._joint[wrt] = run_stage(
                "autodiff", self.graph, list(wrt), label=self.graph.name
            )
        return j

    def grad_graph(self, wrt: tuple[int, ...]) -> Graph:
        """(primals, cotangents) -> gradients: what a recomputing backward runs."""
        joint = self.joint(wrt)
        return Graph(
            f"{self.graph.name}_grad", joint.params, joint.outputs[len(self.graph.outputs) :]
        )

    def differentiated(self, wrt: tuple[int, ...]) -> Differentiated:
        d = self._diff.get(wrt)
        if d is None:
            n_in, n_out = len(self.graph.params), len(self.graph.outputs)
            with compiling(self.graph, "autodiff and partition"):
                joint = self.joint(wrt)
                part = run_stage("partition", joint, n_in, n_out, label=self.graph.name)
            d = Differentiated(
                compile_graph(part.forward, self.dynamic, self.fallback, self.device),
                compile_graph(part.backward, self.dynamic, self.fallback, self.device),
                self.grad_graph(wrt),
                n_out,
                part,
            )
            self._diff[wrt] = d
        return d

    def speculation(self, wrt: tuple[int, ...]) -> _Speculation | None:
        """The gradients-in-the-forward graph for `wrt` (see the module docstring), or
        None when the graph is not a scalar loss or the policy turned it off."""
        if wrt not in self._spec:
            self._spec[wrt] = None
            floats = [
                o for o in self.graph.outputs if o.dtype.is_floating_point or o.dtype.is_complex
            ]
            if (
                GRADIENTS_IN_FORWARD
                and len(floats) == 1
                and floats[0].dtype.is_floating_point
                and _numel(floats[0].shape) == 1
            ):
                with compiling(self.graph, "autodiff"):
                    fused = run_stage(
                        "autodiff",
                        self.graph,
                        list(wrt),
                        f"{self.graph.name}_value_grad",
                        unit_cotangents=True,
                        label=self.graph.name,
                    )
                    grads = self.grad_graph(wrt)
                reads = _reads(grads)
                needed = tuple(
                    k for k, p in enumerate(grads.params[: len(self.graph.params)]) if p in reads
                )
                self._spec[wrt] = _Speculation(
                    compile_graph(fused, self.dynamic, self.fallback, self.device), needed
                )
        s = self._spec[wrt]
        return s if s is not None and s.on else None

    def diff_call(self, wrt: tuple[int, ...], verified: int = 0) -> DiffCall:
        c = self._calls.get((wrt, verified))
        if c is None:
            c = self._calls[(wrt, verified)] = DiffCall(self, wrt, verified)
        return c

    def __call__(self, *inputs: Tensor) -> list[Tensor]:
        wrt = self.wrt_of(inputs)
        if not wrt:
            return list(self.plain().executable(*inputs))
        return self.diff_call(wrt)(*inputs)

    @staticmethod
    def wrt_of(inputs: Sequence[Tensor]) -> tuple[int, ...]:
        """The inputs a call differentiates with respect to (none when grad is off)."""
        if not is_grad_enabled():
            return ()
        return tuple(
            i
            for i, x in enumerate(inputs)
            if x._requires_grad and (x._dtype.is_floating_point or x._dtype.is_complex)
        )

    def carries_gradient(self, wrt: tuple[int, ...]) -> tuple[bool, ...]:
        """Which outputs require grad when params `wrt` do: eager autograd's rule on the
        graph (a floating-point or complex value computed from one that requires grad,
        not through a `stop_gradient`), so `x.detach() * 2` does not require grad compiled
        either."""
        flags = self._carries.get(wrt)
        if flags is None:
            params = self.graph.params
            live = {params[i] for i in wrt}
            for n in self.graph.nodes:
                if (
                    n.op != "stop_gradient"
                    and n.dtype.differentiable
                    and any(i in live for i in n.inputs)
                ):
                    live.add(n)
            flags = self._carries[wrt] = tuple(o in live for o in self.graph.outputs)
        return flags

    def record(
        self, d: Differentiated, wrt: tuple[int, ...], inputs: Sequence[Tensor], outs: list[Tensor]
    ) -> list[Tensor]:
        """Give the results of a differentiable call (`outs`: results then residuals of
        `d.forward`) their one backward node; returns the results."""
        results, residuals = outs[: d.n_outputs], outs[d.n_outputs :]
        node = self.node_class(self, wrt, inputs, residuals, results, d)
        return self._attach(node, wrt, results)

    def record_speculative(
        self, spec: _Speculation, wrt: tuple[int, ...], inputs: Sequence[Tensor], outs: list[Tensor]
    ) -> list[Tensor]:
        """`record` for a call of `spec.forward` (results, then gradients)."""
        n = len(self.graph.outputs)
        results = outs[:n]
        node = self.node_class(self, wrt, inputs, [], results, spec=spec, precomputed=outs[n:])
        spec.made()
        return self._attach(node, wrt, results)

    def _attach(
        self, node: "CompiledBackward", wrt: tuple[int, ...], results: list[Tensor]
    ) -> list[Tensor]:
        """Make `node` the grad_fn of the results that carry a gradient
        (`carries_gradient`); returns the results."""
        carries = self.carries_gradient(wrt)
        for k, r in enumerate(results):
            if carries[k]:
                r._requires_grad = True
                r.grad_fn = node
                r._output_nr = k
        return results

    def grad_function(self, wrt: tuple[int, ...]) -> "GraphFunction":
        fn = self._grad_fns.get(wrt)
        if fn is None:
            with compiling(self.graph, "autodiff"):
                graph = self.grad_graph(wrt)
            fn = self._grad_fns[wrt] = GraphFunction(graph, self.dynamic, self.device)
            fn.fallback = True
        return fn


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _reads(g: Graph) -> set:
    """The params of `g` that its outputs depend on."""
    seen: set = set()
    stack = list(g.outputs)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.inputs)
    return {p for p in g.params if p in seen}


def _is_one(g: Tensor) -> bool:
    """Whether a one-element cotangent is exactly 1 (read without autograd; a device
    tensor's value is read from the device)."""
    if is_seed(g):
        return True
    if g._ptr is None and g._storage is not None:  # in device memory
        return g.detach().cpu().item() == 1
    return g._values().reshape(-1)[0] == 1


class CompiledBackward(Node):
    """The one backward node of a compiled call."""

    __slots__ = (
        "function",
        "wrt",
        "inputs",
        "versions",
        "residuals",
        "output_meta",
        "diff",
        "spec",
        "precomputed",
    )

    @property
    def direct(self) -> bool:  # static graphs return new buffers (see Node.direct)
        return not self.function.dynamic

    def __init__(
        self,
        function: GraphFunction,
        wrt: tuple[int, ...],
        inputs: Sequence[Tensor],
        residuals: list[Tensor],
        results: list[Tensor],
        diff: Differentiated | None = None,
        spec: _Speculation | None = None,
        precomputed: list[Tensor] | None = None,
    ):
        super().__init__(tuple([edge(inputs[i]) for i in wrt]))
        self.function = function
        self.wrt = wrt
        # the inputs as saved tensors (read by reference; their versions are checked when
        # backward reads them, as eager's saved tensors are)
        self.inputs = inputs
        self.versions = [x._storage.version for x in inputs]
        self.residuals = residuals
        # gradients for cotangent 1 made by the forward (`_Speculation`), handed out once
        self.spec = spec
        self.precomputed = precomputed
        if spec is not None:
            self.output_meta = [(r._shape, r._dtype) for r in results]
            self.diff = None
            return
        d = diff if diff is not None else function.differentiated(wrt)
        if function.dynamic:
            self.output_meta = [(r._shape, r._dtype) for r in results]
        else:  # a static graph's outputs always look alike
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
            saved.unpack(self, self.name(), k)  # raises PyTorch's error
        return x

    @property
    def num_outputs(self) -> int:
        return len(self.output_meta)

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        if self.residuals is None:
            raise RuntimeError(FREED)
        cts = list(grads)
        for k, (shape, dtype) in enumerate(self.output_meta):
            g = cts[k]
            if g is None:
                cts[k] = zeros(shape, dtype=dtype)
            elif g._dtype is not dtype:
                cts[k] = g.to(dtype)
        if self.spec is not None:
            pre, self.precomputed = self.precomputed, None
            if pre is not None:
                hit = not is_grad_enabled()
                if hit:  # every float cotangent is exactly 1 ...
                    for g, (_, dtype) in zip(cts, self.output_meta):
                        if dtype.is_floating_point and not _is_one(g):
                            hit = False
                            break
                if hit:  # ... and no input it read was written since
                    inputs, versions = self.inputs, self.versions
                    for k in self.spec.needed:
                        if inputs[k]._storage.version != versions[k]:
                            hit = False
                            break
                self.spec.used(hit)
                if hit:
                    return tuple(pre)
        if is_grad_enabled() or self.spec is not None:
            # create_graph, or no gradients made ahead for this cotangent: recompute
            # through a (differentiable) compiled graph from the inputs
            needed = self.spec.needed if self.spec is not None else None
            primals = [
                self.saved_input(k) if needed is None or k in needed else self.inputs[k]
                for k in range(len(self.inputs))
            ]
            return tuple(self.function.grad_function(self.wrt)(*primals, *cts))
        d = self.diff
        saved = []
        for kind, k in d.partition.residual_sources:
            if kind == "out":
                saved.append(self.residuals[k])
            else:  # an input read by reference: eager's saved-tensor check
                saved.append(self.saved_input(k))
        run = d.backward_run
        if run is None:
            run = d.backward_run = d.backward.run
        return tuple(run(*saved, *cts))

    def direct_grads(
        self, root: Tensor, inputs: Sequence[Tensor] | None, retain_graph: bool
    ) -> tuple[Tensor, ...] | None:
        """`autograd.grad(root, inputs)` with default arguments, or with `inputs` None
        `root.backward()`, answered from the gradients the forward made when that is all
        it takes: they are still here, `root` is this node's loss, neither the node nor
        the leaves' AccumulateGrad nodes nor the leaves have hooks (anomaly mode off), the
        leaves are distinct and have the gradients' dtypes, `inputs` are exactly those
        leaves in order, and no input the gradients read was written since. The node is
        then used as `apply` uses it (released unless `retain_graph`), and the gradients
        are returned, or for `backward()` accumulated (a leaf without `.grad` takes the
        new buffer, as `engine._run_direct` does) and `()` returned. None otherwise: the
        engine decides, with the same answer or its error."""
        pre = self.precomputed
        if (
            pre is None
            or self._prehooks
            or self._hooks
            or self._metadata
            or _anomaly.enabled
            or root.__class__ is not Tensor
            or not root._dtype.is_floating_point
            or self.function.dynamic
        ):
            return None
        nexts = self.next_functions
        if inputs is not None and len(inputs) != len(nexts):
            return None
        for k, ((acc, _), g) in enumerate(zip(nexts, pre)):
            t = plain_leaf(acc)
            if t is None or inputs is not None and inputs[k] is not t or g._dtype is not t._dtype:
                return None
        if len(nexts) > 1 and len({id(acc) for acc, _ in nexts}) != len(nexts):
            return None
        own, versions = self.inputs, self.versions
        for k in self.spec.needed:
            if own[k]._storage.version != versions[k]:
                return None
        self.precomputed = None
        self.spec.used(True)
        if not retain_graph:
            self.release()
        if inputs is not None:
            return tuple(pre)
        for (acc, _), g in zip(nexts, pre):
            hand_over(acc.variable, g)
        return ()

    def release(self) -> None:
        if self.precomputed is not None:  # made, never used
            self.precomputed = None
            self.spec.used(False)
        self.residuals = None
        self.inputs = ()
