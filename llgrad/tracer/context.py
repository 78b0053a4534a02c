"""The trace context: turns op applications on tracers into IR nodes.

`emit(op, operands, attrs)` applies the same promotion rules as eager execution (it asks
`llgrad.ir.promotion.compute_dtype`), so a traced graph computes what eager code
computes: Python scalars become `const` nodes of the promoted dtype, promotion casts become
`cast` nodes, and concrete tensors the function captured (globals, closures, module
parameters) become extra graph parameters that are read again at every call.
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

from ..dispatch.apply import Interpreter, interpreters, needs_grad, record
from ..ir import dtypes as dt, registry
from ..ir.graph import Graph, Node, make_node
from ..ir.promotion import compute_dtype, promote
from ..ir.registry import ELEMENTWISE, VIEW_OPS, Group
from ..ir.types import TensorType
from ..tensor import Tensor
from .state import _tls, current, user_location
from .tensor import GraphBreak, TracerTensor
from ..dispatch import ops

# op name -> a callback run with the operands the first time the op is traced in this
# process (the compiler registers one for matmul that starts building the runtime's gemm
# while the trace and the passes go on)
on_first_trace: dict[str, Any] = {}


class TraceContext:
    """Collects the nodes of one graph while a Python function runs on tracers."""

    def __init__(self, name: str, *, constant_creations: bool = False):
        self.name = name
        self.params: list[Node] = []
        self.captured: list[Tensor] = []  # concrete tensors lifted to params
        self._captured_ids: dict[int, Node] = {}
        self._names: dict[int, str] = {}
        # creation functions (`lg.zeros(3)`) inside the trace: graph constants, or concrete
        # tensors (captured when used). User traces keep them concrete, so state an
        # optimizer creates inside a compiled step outlives the trace; internal traces
        # (the autodiff pass) make them constants.
        self.constant_creations = constant_creations
        # user traces turn `detach()` and ops under `no_grad` on values that require grad
        # into `stop_gradient` nodes; internal traces replay graphs that have them already
        self.cuts_gradients = not constant_creations
        self.mutated: dict[int, tuple[Tensor, Node]] = {}  # in-place writes to captured
        self.expand_composites = False  # True in the decompose pass
        self.grad_before: dict[int, tuple[Tensor, Any]] = {}  # `.grad` of captured tensors
        # Python values the trace read from live objects (an optimizer's hyperparameters):
        # (read it again, the value traced, what it is); a call whose reads differ retraces
        self.guards: dict[str, tuple[Any, Any]] = {}
        # run before every call of the compiled graph: refresh captured tensors that mirror
        # Python values (an optimizer's learning rate as a graph input)
        self.before_call: dict[str, Any] = {}
        # tensors that share memory (a view and its base, x.detach() and x), as groups of
        # weak references: an in-place write to one of them while another is alive cannot
        # be a rebinding of one tracer, so it breaks the graph (`check_unshared`) instead of
        # silently losing the write for the other. Captured tensors' groups live here, by id
        # (they stay alive in `captured`); tracers carry theirs in `_group`.
        self._groups: dict[int, list] = {}
        # storages of the concrete arguments (set by `trace`): a concrete tensor captured
        # in the function (a parameter read through a module or an optimizer) that lives
        # in one of them is the argument under another name, and the two would diverge
        self.argument_storages: dict[int, int] = {}

    # -- entering ---------------------------------------------------------------------
    def __enter__(self) -> "TraceContext":
        _tls.stack.append(self)
        interpreters.append(_INTERPRETER)
        return self

    def __exit__(self, *exc: object) -> None:
        _tls.stack.remove(self)
        interpreters.remove(_INTERPRETER)

    # -- values -------------------------------------------------------------------------
    def param(self, type_: TensorType, name: str) -> TracerTensor:
        node = Node("param", (), (("name", name),), type_)
        self.params.append(node)
        return TracerTensor.of(node, self)

    def node_of(self, x: Any, dtype: dt.DType | None = None) -> Node:
        """The IR node for an operand: a tracer's node, a lifted tensor, or a constant."""
        if isinstance(x, TracerTensor):
            if x._ctx is not self:
                raise RuntimeError(
                    "a traced value from another trace was used here (a tracer "
                    "leaked out of the function that created it)"
                )
            return x._node
        if isinstance(x, Tensor):
            written = self.mutated.get(id(x))
            if written is not None:
                return written[1]
            node = self._captured_ids.get(id(x))
            if node is None:
                self.check_not_argument(x)
                taken = {p.attr("name") for p in self.params}
                k = len(self.captured)
                while f"c{k}" in taken:
                    k += 1
                node = Node("param", (), (("name", f"c{k}"),), TensorType(x._dtype, x._shape))
                self.params.append(node)
                self.captured.append(x)
                self._captured_ids[id(x)] = node
                self.grad_before.setdefault(id(x), (x, x._grad))
            return node
        if isinstance(x, (bool, int, float, complex)):
            d = dtype or dt.scalar_dtype(x)
            value = x
            if d.is_complex:
                value = complex(x)
            elif d.is_floating_point:
                value = float(x.real if isinstance(x, complex) else x)
            elif d is dt.bool_:
                value = bool(x)
            else:
                value = int(x)
            return make_node(
                "const", (), {"value": value, "dtype": d, "shape": ()}, user_location()
            )
        raise TypeError(f"cannot trace an operand of type {type(x).__name__}")

    def check_not_argument(self, x: Tensor) -> None:
        """A concrete tensor the function reaches through another name (a module's
        parameter, an optimizer's list) that lives in an argument's memory is that
        argument under a second name: the traced argument and it would diverge (a backward
        gives the tracer its gradient, an optimizer updates the concrete tensor), so the
        signature runs eagerly."""
        k = self.argument_storages.get(id(x._storage))
        if k is not None:
            raise GraphBreak(
                f"a tensor the function reaches through another name (a "
                f"module's or an optimizer's parameter) shares memory with "
                f"tensor argument {k}",
                user_location(),
                advice="this signature runs eagerly (pass such a tensor one "
                "way only: as an argument, or captured)",
            )

    def write(self, target: Tensor, value: TracerTensor) -> None:
        """An in-place write to a captured concrete tensor: later reads see `value`; after
        each call the compiled function copies the final value into `target`."""
        self.node_of(target)  # its value before the write is an input
        self.check_unshared(target, "an in-place write")
        if value._shape != target._shape:
            raise RuntimeError(
                f"in-place write of shape {list(value._shape)} into a tensor "
                f"of shape {list(target._shape)}"
            )
        if value._dtype is not target._dtype:
            value = value.to(target._dtype)
        self.mutated[id(target)] = (target, value._node)

    def guard(self, what: str, read: Any, value: Any) -> None:
        """The graph assumed `read() == value` (a Python value baked into it); the compiled
        function checks it before each call and retraces when it no longer holds."""
        self.guards.setdefault(what, (read, value))

    def constant(self, value: Any, dtype: dt.DType, shape: tuple[int, ...]) -> TracerTensor:
        """A `const` node filled with one value (what `zeros_like(tracer)` traces to)."""
        v = (
            complex(value)
            if dtype.is_complex
            else float(value)
            if dtype.is_floating_point
            else (bool(value) if dtype is dt.bool_ else int(value))
        )
        node = make_node(
            "const", (), {"value": v, "dtype": dtype, "shape": tuple(shape)}, user_location()
        )
        return TracerTensor.of(node, self)

    def literal(self, values: Any, dtype: dt.DType) -> TracerTensor:
        """A `const` node holding the values of a (small) array, e.g. `lg.tensor([1, 2])`."""
        import numpy as np

        arr = np.asarray(values)
        payload = arr.tolist()
        node = make_node(
            "const",
            (),
            {"value": payload, "dtype": dtype, "shape": tuple(arr.shape)},
            user_location(),
        )
        return TracerTensor.of(node, self)

    def iota(self, n: int) -> TracerTensor:
        """0, 1, ..., n-1 (int64) as a node of the graph."""
        node = make_node("iota", (), {"dtype": dt.int64, "shape": (n,)}, user_location())
        return TracerTensor.of(node, self)

    def name_of(self, node: Node) -> str:
        for p in self.params:
            if p is node:
                return p.attr("name")
        return str(id(node) % 10000)

    # -- ops ----------------------------------------------------------------------------
    def emit(self, op: str, operands: Sequence[Any], attrs: dict[str, Any] | None) -> TracerTensor:
        if op in on_first_trace:
            hook = on_first_trace.pop(op, None)  # (None: another thread ran it)
            if hook is not None:
                hook(operands)
        opdef = registry.get(op)
        attrs = dict(attrs or {})
        loc = user_location()
        try:
            if opdef.group in ELEMENTWISE or opdef.group is Group.RANDOM:
                inputs = self._promoted(opdef, operands, loc)
            elif op == "cat":
                d = promote(list(operands))
                inputs = [self._cast(self.node_of(o), d, loc) for o in operands]
            else:
                inputs = [self.node_of(o) for o in operands]
        except TypeError as e:  # an operand of a type no op takes
            raise TypeError(f"{op}: {e}") from None
        node = make_node(op, tuple(inputs), attrs, loc)
        out = TracerTensor.of(node, self)
        if op in VIEW_OPS:
            self.share(operands[0], out)
        return out

    def stop_gradient(self, t: TracerTensor) -> TracerTensor:
        """`t`'s values through which the autodiff pass sends no gradient (an alias of
        `t`: it shares its memory, as `detach()` does)."""
        node = make_node("stop_gradient", (t._node,), {}, user_location())
        out = TracerTensor.of(node, self)
        self.share(t, out)
        return out

    # -- memory shared between traced values --------------------------------------------
    def _group_of(self, x: Tensor) -> list | None:
        if isinstance(x, TracerTensor):
            return x._group
        return self._groups.get(id(x))

    def share(self, base: Any, view: TracerTensor) -> None:
        """`view` shares `base`'s memory (a view of it, or an alias)."""
        if not isinstance(base, Tensor):
            return
        group = self._group_of(base)
        if group is None:
            group = [weakref.ref(base)]
            if isinstance(base, TracerTensor):
                base._group = group
            else:
                self._groups[id(base)] = group
        group.append(weakref.ref(view))
        view._group = group

    def check_unshared(self, t: Tensor, what: str) -> None:
        """Raise GraphBreak if another live tensor shares `t`'s memory (see `_groups`)."""
        group = self._group_of(t)
        if group is None:
            return
        if any(r() is not None and r() is not t for r in group):
            raise GraphBreak(
                f"{what} of a tensor that shares memory with another (a view, "
                f"its base or an alias)",
                user_location(),
                advice="a compiled graph does not write through views of "
                "values; this signature runs eagerly",
            )

    def _promoted(
        self, opdef: registry.OpDef, operands: Sequence[Any], loc: str | None
    ) -> list[Node]:
        computed = compute_dtype(opdef, operands)
        return [self._cast(self.node_of(o, c), c, loc) for o, c in zip(operands, computed)]

    def _cast(self, node: Node, d: dt.DType, loc: str | None) -> Node:
        if node.type.dtype is d:
            return node
        return make_node("cast", (node,), {"dtype": d}, loc)

    def graph(self, outputs: Sequence[Node]) -> Graph:
        return Graph(self.name, self.params, outputs)


def any_tracer(operands: Sequence[Any]) -> TracerTensor | None:
    for o in operands:
        if isinstance(o, TracerTensor):
            return o
    return None


class TraceInterpreter(Interpreter):
    """The tracer's entry in `llgrad.dispatch.apply.interpreters` (only while tracing)."""

    def handles(self, operands: Sequence[Any]) -> bool:
        # inside a trace every op is traced, also ops on captured concrete tensors
        # (`weight.t()`): they become graph params at first use, so gradients reach them
        return any(isinstance(o, Tensor) for o in operands)

    def process(
        self,
        op: str,
        operands: Sequence[Any],
        attrs: dict[str, Any] | None,
        forward: Any,
        name: str | None,
    ) -> TracerTensor:
        tracer = any_tracer(operands)
        ctx = tracer._ctx if tracer is not None else current()
        out = ctx.emit(op, operands, attrs)
        if needs_grad(operands):  # the autodiff pass traces with a tape
            record(op, operands, attrs or {}, out, name)
        elif ctx.cuts_gradients and any(
            isinstance(o, Tensor) and o._requires_grad for o in operands
        ):
            out = ctx.stop_gradient(out)  # grad mode is off: no gradient flows through
        return out

    def process_composite(
        self, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
    ) -> TracerTensor:
        """A composite op stays ONE node until the decompose pass, so autodiff uses its own
        derivative rule (e.g. embedding's padding row), not its decomposition's."""
        tracer = any_tracer(operands)
        ctx = tracer._ctx if tracer is not None else current()
        if ctx.expand_composites:
            F = ops.F

            return registry.get(op).decompose(F, *operands, **attrs)
        return self.process(op, operands, attrs, None, name)


_INTERPRETER = TraceInterpreter()
