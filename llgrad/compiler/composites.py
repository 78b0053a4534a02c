"""Eager composites run compiled.

A composite op (softmax, log_softmax, layer_norm, nll_loss, ...) runs eagerly as its
decomposition: `log_softmax` on a 128x10 batch is eight kernels and ~60 us of Python, its
backward as many again, where PyTorch has one kernel each way. For ops whose registry entry
sets `eager_compile`, eager mode compiles, on the first call of each key (op, attributes,
the operands' dtype, shape and strides), the decomposition into one graph, and on the first
backward of each key the node's derivative rule into another. Nothing else changes: the
forward still records the op's own node (PyTorch's name, the tensors PyTorch saves, the
same version checks and errors), and the rule reads the same saved tensors.

A key's choice is made once and kept, so a call gives the same bits every time it runs in
a process (a compiled graph may round differently from the decomposition's kernels, so
switching after a few calls would make the third call differ from the first). Compiling
costs 20-80 ms per key and direction; to bound that for shapes that keep changing, at most
`SHAPES_PER_FAMILY` keys per (op, attributes, dtypes, ranks) and `LIMIT` keys in all
(`LLGRAD_EAGER_COMPILE_LIMIT`, default 256) are compiled, and later keys run the
decomposition. Python functions marked `dispatch.apply.composite_function` (cross,
cdist, median, interpolate, pad, pooling, ...) take the same path keyed by their
arguments (`function` below). A key whose trace or compile fails runs
eagerly (logged on the `graph_breaks` channel). A backward with `create_graph=True` runs
the rule eagerly (its result must be differentiable). `LLGRAD_EAGER_COMPILE=0` turns the
stage off; under `lg.compiler.disable_compile()` (or `LLGRAD_DISABLE_COMPILE=1`) new keys
run eagerly too (keys compiled before stay compiled: a key's choice is kept).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from .. import _log, pytree, functions as F
from .._keys import attrs_key, number_key
from ..tape import anomaly
from ..tape.node import OpNode, RuleContext, node_class
from ..dispatch.grad_mode import _state as grad_state, enable_grad, is_grad_enabled, no_grad
from ..ir import dtypes as dt, registry
from ..tensor import DENSE_CLASSES, Tensor
from ..tracer.make_ir import _Leaf, _unflatten, trace
from .api import compile_disabled
from .function import CompiledBackward, GraphFunction

SHAPES_PER_FAMILY = 8  # keys compiled per (op, attributes, dtypes, ranks)
# keys compiled in all (~100 KB of code and data each); LLGRAD_EAGER_COMPILE_LIMIT sets it
LIMIT = int(os.environ.get("LLGRAD_EAGER_COMPILE_LIMIT", "256"))
ENABLED = os.environ.get("LLGRAD_EAGER_COMPILE", "1") != "0"

_COLD = object()  # a key whose trace or compile failed: eager for good
_compiled: dict[tuple, Any] = {}
_families: dict[tuple, int] = {}


def _lookup(key: tuple, family: tuple, build: Callable[[], Any]) -> Any:
    """The compiled callable of `key` (built on its first call), or None: the key runs
    eagerly. Which it is never changes for a key: compiled keys are kept, and the counts
    that send a new key to eager (`SHAPES_PER_FAMILY`, `LIMIT`) only grow."""
    fn = _compiled.get(key)
    if fn is not None:
        return None if fn is _COLD else fn
    if (
        _families.get(family, 0) >= SHAPES_PER_FAMILY
        or len(_compiled) >= LIMIT
        or compile_disabled()
    ):
        return None
    _families[family] = _families.get(family, 0) + 1
    try:
        fn = build()
    except Exception as e:  # noqa: BLE001 - the eager path stays correct
        _log.log(
            "graph_breaks",
            f"eager {key[1]}: not compiled ({type(e).__name__}: {e}); runs its decomposition",
        )
        fn = _COLD
    _compiled[key] = fn
    return None if fn is _COLD else fn


def clear() -> None:
    _compiled.clear()
    _families.clear()
    _recent.clear()


dt.on_default_dtype_change(clear)  # a decomposition's constants follow it


def _traced(fn: Callable[..., Any], args: tuple[Any, ...], name: str) -> Callable[..., Any]:
    """`fn` traced on `args` (tensors, or None/numbers kept as they are) and compiled
    without autodiff: a callable of the tensor arguments that returns `fn`'s structure."""
    tensors = [a for a in args if isinstance(a, Tensor)]
    slots = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

    def on_tensors(*ts: Any) -> Any:
        full = list(args)
        for i, t in zip(slots, ts):
            full[i] = t
        return fn(*full)

    on_tensors.__name__ = name
    with no_grad():
        graph, ctx, structure = trace(on_tensors, tuple(tensors), {})
    if ctx.effects or ctx.guards:
        raise RuntimeError("the trace has side effects or guards")
    run = GraphFunction(graph).plain().run
    captured = tuple(ctx.captured)

    if structure.treedef.kind == "leaf" and structure.slots[0].__class__ is _Leaf:
        first = structure.slots[0].index

        def one(*ts: Tensor) -> Any:  # (the plain graph records nothing)
            return run(*ts, *captured)[first]

        return one

    def call(*ts: Tensor) -> Any:
        return _unflatten(structure, list(run(*ts, *captured)))

    return call


# --------------------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------------------


def forward_key(op: str, attrs: dict[str, Any], operands: Sequence[Any]) -> tuple:
    """The key `forward` files `op`'s compiled decomposition under, for these attributes
    and operands (plain tensors): callers that cache per call signature keep it."""
    return ("forward", op, attrs_key(attrs), tuple([o._lkey for o in operands]))


def forward(
    op: str, operands: Sequence[Any], attrs: dict[str, Any], key: tuple | None = None
) -> Tensor | None:
    """The op's output from its compiled decomposition, or None when the key runs
    eagerly (the caller runs the decomposition). Operands must all be plain tensors;
    `key` is `forward_key(op, attrs, operands)` when the caller has it."""
    if key is None:
        key = forward_key(op, attrs, operands)
    try:
        fn = _compiled.get(key)
    except TypeError:  # an unhashable attribute
        return None
    if fn is None:
        family = key[:3] + (tuple((o._dtype, len(o._shape)) for o in operands),)

        def build() -> Any:
            decompose = registry.get(op).decompose
            return _traced(lambda *xs: decompose(F, *xs, **attrs), tuple(operands), op)

        fn = _lookup(key, family, build)
    return None if fn is None or fn is _COLD else fn(*operands)


# --------------------------------------------------------------------------------------
# backward: the derivative rule
# --------------------------------------------------------------------------------------


class CompiledRuleNode(OpNode):
    """An op node whose rule runs compiled when its key is (see the module docstring);
    `node_class(name, CompiledRuleNode)` gives it PyTorch's name."""

    __slots__ = ()

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = grads[0]
        if (
            not ENABLED
            or is_grad_enabled()
            or g is None
            or g.__class__ is not Tensor
            or self._released
        ):
            return super().apply(grads)
        inputs = self.inputs  # version checks, as the eager rule's
        saved_out = self._saved[-1]
        output = saved_out.unpack(self, self.name(), 0) if saved_out is not None else None
        if not all(x is None or isinstance(x, (Tensor, int, float)) for x in inputs):
            return super().apply(grads)
        needs = self.needs_input_grad
        key = (
            "rule",
            self.op,
            attrs_key(self.attrs),
            g._lkey,
            needs,
            tuple(x._lkey if isinstance(x, Tensor) else x for x in inputs),
            None if output is None else output._lkey,
        )
        family = (
            "rule",
            self.op,
            key[2],
            (g._dtype, len(g._shape)),
            needs,
            tuple(None if m is None else (m[1], len(m[0])) for m in self.input_meta),
        )
        op, attrs, meta, strides = self.op, self.attrs, self.input_meta, self.input_strides

        def build() -> Any:
            rule = registry.get(op).vjp

            def run(g: Any, out: Any, *xs: Any) -> Any:
                r = rule(RuleContext(xs, out, needs, meta, strides), g, **attrs)
                return r if isinstance(r, tuple) else (r,)

            return _traced(run, (g, output, *inputs), f"{op}_vjp")

        try:
            fn = _lookup(key, family, build)
        except TypeError:
            fn = None
        if fn is None:
            return super().apply(grads)
        return tuple(
            fn(
                g,
                *([] if output is None else [output]),
                *[x for x in inputs if isinstance(x, Tensor)],
            )
        )


# --------------------------------------------------------------------------------------
# Python-level composites (`dispatch.apply.composite_function`)
# --------------------------------------------------------------------------------------

_SCALARS = frozenset({int, float, bool, complex, str, type(None), dt.DType})


def _signature(values: Any, tensors: list[Tensor]) -> tuple | None:
    """The key of positional `values` (tensors by dtype, shape and strides, appended to
    `tensors` in pytree order; numbers, strings, dtypes and flat lists or tuples of them
    by value), or None when a value cannot be part of a key (the call runs eagerly)."""
    sig: list[Any] = []
    for v in values:
        c = v.__class__
        if c in DENSE_CLASSES:
            tensors.append(v)
            sig.append(v._lkey)
        elif c is int:
            sig.append((c, v))  # (`number_key` of an int)
        elif c in _SCALARS:
            sig.append(number_key(v))  # (-0.0 and 0.0 apart: `_keys`)
        elif c is tuple or c is list:
            for x in v:
                if x.__class__ is not int:
                    inner = _signature(v, tensors)
                    if inner is None:
                        return None
                    break
            else:  # only ints (sizes, strides): their keys as the loop above makes them
                inner = tuple([(int, x) for x in v])
            sig.append((c, inner))
        else:
            return None
    return tuple(sig)


class _Composite:
    """A traced and compiled composite: its graph function, the tensors the trace
    captured, and where the outputs go. Calling it with the signature's tensors runs the
    graph: a call autograd does not record goes straight to the graph's generated runner
    (`GraphFunction.plain().runner`), one that it records through `GraphFunction.__call__`
    (the differentiated graph and its backward node). The caller has matched the
    signature's tensors to the key (class, dtype, shape and strides), so the runner checks
    only their strides (`matched`: how many they are); the captured tensors, after them,
    it checks in full."""

    __slots__ = ("function", "captured", "structure", "run", "single")

    def __init__(self, function: Any, captured: tuple[Tensor, ...], structure: Any, matched: int):
        self.function, self.captured, self.structure = function, captured, structure
        self.run = function.plain().runner(matched)
        # the output is the graph's only output, as it is (no tuple or list around it)
        self.single = (
            structure.treedef.kind == "leaf"
            and structure.slots[0].__class__ is _Leaf
            and structure.slots[0].index == 0
        )

    def __call__(self, tensors: list[Tensor]) -> Any:
        if grad_state.enabled:
            for t in tensors:
                if t._requires_grad:
                    outs = self.function(*tensors, *self.captured)
                    return outs[0] if self.single else _unflatten(self.structure, outs)
        outs = self.run(*tensors, *self.captured) if self.captured else self.run(*tensors)
        return outs[0] if self.single else _unflatten(self.structure, outs)


def _aliases_an_input(graph: Any) -> bool:
    """Whether an output is an input or a view of one (eagerly the function would return
    a view sharing the argument's memory; compiled it would return a copy)."""
    params = set(graph.params)
    for out in graph.outputs:
        node = out
        while node.op in registry.VIEW_OPS:
            node = node.inputs[0]
        if node in params:
            return True
    return False


def _build_function(fn: Callable[..., Any], args: tuple, kwargs: dict, n: int) -> _Composite:
    """`fn` traced on `args` and `kwargs` (whose signature holds `n` tensors) and compiled."""
    graph, ctx, structure = trace(fn, args, kwargs)
    if ctx.effects or ctx.guards:
        raise RuntimeError("the trace has side effects or guards")
    if any(t._requires_grad for t in ctx.captured):
        raise RuntimeError("the trace captured a tensor that requires grad")
    if _aliases_an_input(graph):
        raise RuntimeError("an output is an argument or a view of one")
    function = GraphFunction(graph)
    function.node_class = node_class(_eager_node_name(fn, args, kwargs), CompiledBackward)
    return _Composite(function, tuple(ctx.captured), structure, n)


def _eager_node_name(fn: Callable[..., Any], args: tuple, kwargs: dict) -> str:
    """The name of the grad_fn eager autograd gives `fn`'s first differentiable output
    (PyTorch's name where the function sets it: `take_along_dim` -> `GatherBackward0`),
    found by one eager run on detached inputs that require grad (the function is pure:
    its trace had no side effects); `FnBackward0` when no output is differentiable."""

    def fresh(v: Any) -> Any:
        if isinstance(v, Tensor) and (v._dtype.is_floating_point or v._dtype.is_complex):
            return v.detach().requires_grad_()
        return v

    global ENABLED
    was, ENABLED = ENABLED, False  # (the parts run as written: nothing compiles for them)
    try:
        with enable_grad():
            a, k = pytree.tree_map(fresh, (args, kwargs))
            out = fn(*a, **k)
    finally:
        ENABLED = was
    for leaf in pytree.leaves(out):
        node = getattr(leaf, "grad_fn", None)
        if node is not None:
            return type(node).__name__
    return "".join(part.capitalize() for part in fn.__name__.strip("_").split("_")) + "Backward0"


def function(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """`fn(*args, **kwargs)` for a function marked `composite_function`: through its
    compiled graph when this signature's key is compiled (the first call of a key
    compiles it, within `SHAPES_PER_FAMILY` and `LIMIT`), else `fn` itself. Autograd
    goes through the compiled graph's backward node (`CompiledBackward`). A compiled
    call that raises (a kernel's bounds check) runs `fn` again, which raises eager's
    error. A key whose trace breaks, has side effects (a random draw advances the generator), reads values
    (guards) or returns an argument's view runs eagerly for good. A call that repeats
    `fn`'s last compiled call (`_recent`: same layouts, the same immutable values) runs
    its entry without building the key."""
    recent = _recent.get(fn)
    if recent is not None and not anomaly._state.enabled:
        tensors = _recall(recent, args, kwargs)
        if tensors is not None:
            try:
                return recent[0](tensors)
            except Exception:  # noqa: BLE001 - as below
                return fn(*args, **kwargs)
    tensors = []
    sig = _signature(args, tensors)
    if sig is not None and kwargs:
        kw = _signature(kwargs.values(), tensors)
        sig = None if kw is None else sig + (tuple(kwargs), kw)
    if sig is None or not tensors or anomaly._state.enabled:
        return fn(*args, **kwargs)
    key = ("function", fn, sig)
    try:
        entry = _compiled.get(key)
    except TypeError:  # an unhashable value inside a number-like class
        return fn(*args, **kwargs)
    if entry is None:
        family = ("function", fn, tuple((t._dtype, len(t._shape)) for t in tensors))
        entry = _lookup(key, family, lambda: _build_function(fn, args, kwargs, len(tensors)))
    if entry is None or entry is _COLD:
        return fn(*args, **kwargs)
    _remember(fn, entry, args, kwargs)
    try:
        return entry(tensors)
    except Exception:  # noqa: BLE001 - e.g. an index out of range, which
        return fn(*args, **kwargs)  # the compiled kernel finds: eager's error names it


# fn -> its last compiled call, as (the _Composite, per value of the positional then the
# keyword arguments: the tensor's layout key, the class, length and layout keys of a list
# or tuple of tensors, or the value itself; which kind each value is (`_VALUE`, `_TENSOR`,
# `_TENSORS`); the keywords' names): a call whose tensors have those layout keys, whose
# sequences of tensors are of that class and length, and whose other values are those very
# objects (numbers, strings, dtypes and tuples of them, all immutable) has the same
# signature, so `function` runs the entry without building the key
_recent: dict[Callable[..., Any], tuple] = {}
_VALUE, _TENSOR, _TENSORS = 0, 1, 2


def _immutable_value(v: Any) -> bool:
    """Whether `v`'s signature is fixed by its identity: a number, string, dtype or None,
    or a tuple of them."""
    c = v.__class__
    if c is tuple:
        return all(x.__class__ in _SCALARS for x in v)
    return c in _SCALARS


def _remember(fn: Callable[..., Any], entry: _Composite, args: tuple, kwargs: dict) -> None:
    """File `entry` as `fn`'s last compiled call (`_recent`) when every argument is a
    top-level tensor, a non-empty list or tuple of tensors (cat-like functions), or an
    immutable value (`_immutable_value`)."""
    stored: list[Any] = []
    kinds: list[int] = []
    for v in (*args, *kwargs.values()):
        c = v.__class__
        if c in DENSE_CLASSES:
            stored.append(v._lkey)
            kinds.append(_TENSOR)
        elif (c is tuple or c is list) and v and all(x.__class__ in DENSE_CLASSES for x in v):
            stored.append((c, len(v), tuple([x._lkey for x in v])))
            kinds.append(_TENSORS)
        elif _immutable_value(v):
            stored.append(v)
            kinds.append(_VALUE)
        else:
            return
    _recent[fn] = (entry, tuple(stored), tuple(kinds), tuple(kwargs))


def _recall(recent: tuple, args: tuple, kwargs: dict) -> list[Tensor] | None:
    """The tensors of a call matching `recent` (`_recent`'s entry), in signature order,
    or None when the call differs."""
    _, stored, kinds, names = recent
    if kwargs:
        if len(args) + len(kwargs) != len(stored) or tuple(kwargs) != names:
            return None
        values: Any = (*args, *kwargs.values())
    elif len(args) != len(stored):
        return None
    else:
        values = args
    tensors: list[Tensor] = []
    i = 0
    for v in values:
        kind = kinds[i]
        s = stored[i]
        i += 1
        if kind == _TENSOR:
            if v.__class__ not in DENSE_CLASSES or v._lkey != s:
                return None
            tensors.append(v)
        elif kind == _VALUE:
            if v is not s:
                return None
        else:  # (a list may have changed since: its items are checked as they are now)
            if v.__class__ is not s[0] or len(v) != s[1]:
                return None
            keys = s[2]
            j = 0
            for x in v:
                if x.__class__ not in DENSE_CLASSES or x._lkey != keys[j]:
                    return None
                j += 1
            tensors += v
    return tensors
