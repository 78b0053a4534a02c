"""Backward nodes (`grad_fn` objects) and saved tensors.

An op's node is an instance of a class named as PyTorch names it (`MulBackward0`), made
once per name. It holds the op, its attributes, the tensors its derivative rule needs
(saved with their version, so in-place changes are caught) and `next_functions`. The rule
itself lives in the op registry; a node only supplies the context the rule reads.
"""

from __future__ import annotations

import itertools
import traceback
import weakref
from typing import Any, Callable

from ..dispatch.grad_mode import _state as _grad_state
from ..ir import registry
from ..ir.registry import OPS as _OPS
from ..specialize.record import saved_tensor_lines
from ..tensor import Tensor
from .anomaly import _state as _anomaly
from .forward import _level as _forward_level
from .._hooks import RemovableHandle
from ..dispatch import ops

_sequence = itertools.count()

FREED = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the graph "
    "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
    "you need to backward through the graph a second time or if you need to access saved "
    "tensors after calling backward."
)


def _type_name(t: Tensor) -> str:
    kind = {
        "float32": "Float",
        "float64": "Double",
        "float16": "Half",
        "bfloat16": "BFloat16",
        "int64": "Long",
        "int32": "Int",
        "bool": "Bool",
    }.get(t._dtype.name, t._dtype.name)
    return f"llgrad.{kind}Tensor [{', '.join(map(str, t._shape))}]"


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    A node's own output is saved without a reference to the node (no cycle): only its
    storage and layout are kept (`data`, an alias without history, is made when asked
    for); unpacking makes a fresh alias whose grad_fn is the node, so higher-order
    gradients flow.
    """

    __slots__ = ("_data", "version", "is_output", "requires_grad", "source", "_layout")

    def __init__(self, t: Tensor, is_output: bool = False):
        self.is_output = is_output
        self.requires_grad = t._requires_grad
        st = t._storage
        self.version = st.version if st is not None else 0
        self._layout = None
        if not is_output:
            self._data: Tensor | None = t
            self.source = None
            return
        if t.__class__ is Tensor and st is not None:
            self._data = None
            self._layout = (st, t._offset, t._shape, t._strides, t._dtype, t._base)
        else:
            self._data = t._alias()
        # the output object itself, weakly: forward-mode tangents attach to it later
        self.source = weakref.ref(t)

    # `SavedTensor(t, is_output)` written out for generated code: `var = ...` where `t` is
    # a plain `Tensor` with a storage (the text lives with the recorder's, in `specialize`)
    source_lines = staticmethod(saved_tensor_lines)

    def _alias(self) -> Tensor:
        """A new tensor over the saved values, without history."""
        layout = self._layout
        if layout is None:
            return self._data._alias()
        st, offset, shape, strides, dtype, base = layout
        return Tensor._make(st, offset, shape, strides, dtype, base=base)

    @property
    def data(self) -> Tensor:
        t = self._data
        if t is None:
            t = self._data = self._alias()
        return t

    def values(self, node: "Node", op_name: str, index: int) -> Tensor:
        """`unpack` for a reader of the values only (a fused rule's kernel): the same
        version check, but a saved output comes back without the alias that carries
        grad (and its forward-mode tangent)."""
        layout = self._layout
        st = layout[0] if layout is not None else self._data._storage
        if st is not None and st.version != self.version:
            return self.unpack(node, op_name, index)  # (raises)
        return self.data

    def unpack(self, node: "Node", op_name: str, index: int) -> Tensor:
        layout = self._layout
        st = layout[0] if layout is not None else self._data._storage
        if st is not None and st.version != self.version:
            t = self.data
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{_type_name(t)}], which is {'output' if self.is_output else 'input'} "
                f"{index} of {op_name}, is at version {t._storage.version}; expected version "
                f"{self.version} instead. Hint: the backtrace further above can point at the "
                f"operation that failed to compute its gradient; enable anomaly detection with "
                f"llgrad.autograd.set_detect_anomaly(True) to find it."
            )
        if self.is_output and self.requires_grad:
            alias = self._alias()
            # the tangent is attached to the output after the node is recorded (a tangent
            # rule may read the output's history), so it is looked up there
            source = self.source()
            tangent = (source if source is not None else alias).__dict__.get("_fw_tangent")
            if tangent is not None:
                alias.__dict__["_fw_tangent"] = tangent
            alias._requires_grad = True
            alias.grad_fn = node
            return alias
        return self.data


class Node:
    """Base of every grad_fn."""

    # True for a node the engine may run without a graph walk when it is the whole graph
    # over leaves (`engine._run_direct`): its gradients are new tensors nobody else holds
    direct = False
    # what the engine reads of every node as plain class attributes (no property call):
    # a leaf's AccumulateGrad; the (shape, dtype) of each input (OpNode's slot); how many
    # gradients the node receives (a property where it varies)
    accumulates = False
    _meta: Any = None
    num_outputs = 1
    # `direct_grads(root, inputs, retain_graph)`: a node that can answer
    # `autograd.grad(root, inputs)` (inputs None: `root.backward()`) alone, or None when
    # it cannot (`autograd.api.grad` and `backward`)
    direct_grads: Any = None

    __slots__ = (
        "next_functions",
        "_hooks",
        "_prehooks",
        "_seq",
        "_trace",
        "_metadata",
        "__weakref__",
    )

    def __init__(self, next_functions: tuple[tuple["Node | None", int], ...]):
        self.next_functions = next_functions
        self._hooks: dict[int, Callable] | None = None
        self._prehooks: dict[int, Callable] | None = None
        self._seq = next(_sequence)
        self._metadata: dict[str, Any] | None = None
        self._trace = traceback.format_stack()[:-3] if _anomaly.enabled else None

    @property
    def metadata(self) -> dict[str, Any]:
        """Free-form per-node storage (also where tensor hooks and retain_grad live)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        raise AssertionError(f"{self.name()} does not define apply")

    def __call__(self, *grads: Tensor | None) -> tuple[Tensor | None, ...]:
        return self.apply(list(grads))

    def register_hook(self, fn: Callable) -> RemovableHandle:
        """`fn(grad_inputs, grad_outputs)` after the node runs; may return new grad_inputs."""
        if self._hooks is None:
            self._hooks = {}
        h = RemovableHandle(self._hooks)
        self._hooks[h.id] = fn
        return h

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """`fn(grad_outputs)` before the node runs; may return new grad_outputs."""
        if self._prehooks is None:
            self._prehooks = {}
        h = RemovableHandle(self._prehooks)
        self._prehooks[h.id] = fn
        return h

    def release(self) -> None:
        """Free saved tensors (after a backward without retain_graph)."""


class AccumulateGrad(Node):
    """The node of a leaf: adds the incoming gradient into `variable.grad`."""

    __slots__ = ("variable",)
    accumulates = True

    def __init__(self, variable: Tensor):
        super().__init__(())
        self.variable = variable


class OpNode(Node):
    """A node for one registry op; `ctx` for its vjp rule."""

    __slots__ = ("op", "attrs", "_saved", "_released", "_meta", "_scalars", "_layouts", "_plan")

    def __init__(
        self, op: str, operands: tuple[Any, ...], attrs: dict[str, Any], output: Tensor, saves: str
    ):
        # (every operand on the tape's hot path: Node.__init__ and `edge` inlined)
        plan = _save_plans.get((op, saves))
        if plan is None:
            plan = _save_plan(op, saves)
        save_all, save_digits, save_for, keeps_layout, save_out = plan
        scalars = None
        o = operands[0] if len(operands) == 1 else None
        if o.__class__ is Tensor:  # one tensor operand: a unary op
            fn = o.grad_fn
            self.next_functions = (
                (fn, o._output_nr) if fn is not None else edge(o) if o._requires_grad else _NO_EDGE,
            )
            meta: Any = (o._shape, o._dtype)
            saved: list[SavedTensor | None] = [
                SavedTensor(o) if save_all or 0 in save_digits else None
            ]
        else:
            edges = []
            meta = []
            saved = []
            for i, o in enumerate(operands):
                if isinstance(o, Tensor):
                    fn = o.grad_fn
                    edges.append(
                        (fn, o._output_nr)
                        if fn is not None
                        else edge(o)
                        if o._requires_grad
                        else _NO_EDGE
                    )
                    meta.append(o._shape)
                    meta.append(o._dtype)
                    saved.append(SavedTensor(o) if save_all or i in save_digits else None)
                else:
                    edges.append(_NO_EDGE)
                    meta.append(None)
                    meta.append(None)
                    saved.append(None)
                    if scalars is None:
                        scalars = [None] * len(operands)
                    scalars[i] = o
            self.next_functions = tuple(edges)
            meta = tuple(meta)
        self._hooks = self._prehooks = self._metadata = None
        self._seq = next(_sequence)
        self._trace = traceback.format_stack()[:-2] if _anomaly.enabled else None
        self.op = op
        self.attrs = attrs
        self._meta = meta  # (shape, dtype) of each operand, flattened
        self._scalars = scalars
        self._layouts = (
            tuple(o._strides if isinstance(o, Tensor) else None for o in operands)
            if keeps_layout
            else None
        )
        if save_for:
            edges = self.next_functions
            for k, readers in save_for.items():
                if saved[k] is not None and all(edges[r][0] is None for r in readers):
                    saved[k] = None
        saved.append(SavedTensor(output, is_output=True) if save_out else None)
        self._saved = saved
        self._released = False
        self._plan = None

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        return tuple(n is not None for n, _ in self.next_functions)

    @property
    def input_meta(self) -> tuple[tuple[tuple[int, ...], Any] | None, ...]:
        m = self._meta
        return tuple(
            None if m[2 * i] is None else (m[2 * i], m[2 * i + 1]) for i in range(len(m) // 2)
        )

    @property
    def input_strides(self) -> tuple[tuple[int, ...] | None, ...] | None:
        """Each operand's strides when the call was recorded (ops with `keeps_layout`;
        None for others): metadata only, so reading it never holds an input alive."""
        return self._layouts

    # -- the context a vjp rule reads ------------------------------------------------------
    @property
    def inputs(self) -> tuple[Any, ...]:
        if self._released:
            raise RuntimeError(FREED)
        out = []
        scalars = self._scalars
        for i, s in enumerate(self._saved[:-1]):
            if s is not None:
                out.append(s.unpack(self, self.name(), i))
            else:
                out.append(None if scalars is None else scalars[i])
        return tuple(out)

    @property
    def output(self) -> Tensor:
        if self._released:
            raise RuntimeError(FREED)
        s = self._saved[-1]
        assert s is not None, f"{self.op}: its rule reads the output but the op does not save it"
        return s.unpack(self, self.name(), 0)

    @property
    def F(self):
        return ops.F

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        # a released node still runs if its rule reads no saved tensor (PyTorch's
        # behaviour: AddBackward0 can be run twice); reading one raises FREED
        g = grads[0]
        opdef = _OPS[self.op]
        # an elementwise rule as one kernel (`tape.fused`; a direct call's node, with a
        # `_plan`, is elementwise and finds it there first). A fused kernel carries no
        # forward-mode tangents: with a level open the rule runs as written
        if (
            g.__class__ is Tensor
            and not self._released
            and not _grad_state.enabled
            and not _forward_level[0]
            and (self._plan is not None or opdef.group in _ELEMENTWISE)
        ):
            fused = _fused_apply(self, g)
            if fused is not None:
                return fused
        rule = opdef.vjp
        if rule is None:
            raise RuntimeError(f"the derivative for '{self.op}' is not implemented")
        out = rule(self, g, **self.attrs)
        return out if isinstance(out, tuple) else (out,)

    def release(self) -> None:
        self._released = True
        self._saved = []

    @property
    def saved_tensors(self) -> tuple[Tensor, ...]:
        ts = [s for s in self._saved if s is not None]
        if self._released:
            raise RuntimeError(FREED)
        return tuple(s.unpack(self, self.name(), i) for i, s in enumerate(ts))


class RuleContext:
    """What a derivative rule reads from its node (`OpNode`'s context), over other
    values: traced tensors (`compiler.composites`) or symbolic ones (`tape.fused`)."""

    def __init__(
        self, inputs: tuple[Any, ...], output: Any, needs: tuple[bool, ...], meta: Any, strides: Any
    ):
        self.inputs, self._output, self.needs_input_grad = inputs, output, needs
        self.input_meta, self.input_strides, self.F = meta, strides, ops.F

    @property
    def output(self) -> Any:
        if self._output is None:
            raise RuntimeError("the rule reads an output that is not saved")
        return self._output


_NO_EDGE: tuple[None, int] = (None, 0)
_ELEMENTWISE = frozenset({registry.Group.UNARY, registry.Group.BINARY, registry.Group.TERNARY})


def _fused_apply(node: OpNode, g: Tensor) -> tuple[Tensor | None, ...] | None:
    """`tape.fused.apply` (imported on first use: it needs the eager kernels), which
    then takes this name's place."""
    global _fused_apply
    from .fused import apply  # circle: tape.fused -> here

    _fused_apply = apply
    return apply(node, g)


_save_plans: dict[tuple[str, str], tuple] = {}


def _save_plan(op: str, saves: str) -> tuple:
    """(save every input, the inputs saved by number, `save_for`, `keeps_layout`, save
    the output) of `op` with `saves` ("i": every input; digits name single inputs, "0"
    for where's condition; "o": the output), made once per (op, saves)."""
    opdef = registry.get(op)
    plan = (
        "i" in saves,
        frozenset(int(c) for c in saves if c.isdigit()),
        dict(opdef.save_for),
        opdef.keeps_layout,
        "o" in saves,
    )
    _save_plans[(op, saves)] = plan
    return plan


_classes: dict[tuple[str, type], type] = {}


def node_class(name: str, base: type = OpNode) -> type:
    """The class of a grad_fn called `name` (PyTorch's name) on `base`, made once."""
    cls = _classes.get((name, base))
    if cls is None:
        cls = _classes[(name, base)] = type(name, (base,), {"__slots__": ()})
    return cls


def edge(t: Tensor) -> tuple[Node | None, int]:
    """Where a gradient for `t` goes: its grad_fn, or its leaf's AccumulateGrad."""
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    if t._requires_grad:
        acc = t.__dict__.get("_accumulator")
        node = acc() if acc is not None else None
        if node is None:
            node = AccumulateGrad(t)
            t.__dict__["_accumulator"] = weakref.ref(node)
        return (node, 0)
    return (None, 0)
