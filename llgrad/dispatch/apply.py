"""Running an op eagerly and recording it on the tape.

`apply(op, operands, attrs, forward)` calls the op's eager forward and, when grad mode is
on and an operand requires grad, attaches a node of the op's PyTorch name to the output.
Which tensors the node saves is the op's `saves` declaration (PyTorch saves the same), so
a second backward fails exactly where PyTorch's does.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

from .._source import define
from .grad_mode import _state as grad_state, is_grad_enabled
from ..ir import registry
from ..specialize.record import recorder_source, trivial_recorder_source
from ..tensor import DENSE_CLASSES, Tensor
from ..tape import forward as forward_ad
from ..tape.node import _NO_EDGE, SavedTensor, _save_plan, _save_plans, _sequence, edge, node_class
from . import ops


def needs_grad(operands: Sequence[Any]) -> bool:
    if not is_grad_enabled():
        return False
    for o in operands:
        if isinstance(o, Tensor) and o._requires_grad:
            return True
    return False


def record(
    op: str,
    operands: Sequence[Any],
    attrs: dict[str, Any],
    out: Tensor,
    name: str | None = None,
    base: type | None = None,
) -> Tensor:
    """Attach `op`'s node (of class `base`, default `OpNode`, named as PyTorch names it)."""
    if not out._dtype.differentiable:
        return out  # integer and bool results are not differentiable
    made = _node_classes.get((op, name, base)) or _node_class(op, name, base)
    out._requires_grad = True  # before the node saves `out`: its alias must carry grad
    out.grad_fn = made[0](op, tuple(operands), attrs, out, made[1])
    out._output_nr = 0
    return out


_node_classes: dict[tuple, tuple[type, str]] = {}  # (op, name, base) -> (class, saves)


def _node_class(op: str, name: str | None, base: type | None) -> tuple[type, str]:
    opdef = registry.get(op)
    made = _node_classes[(op, name, base)] = (
        node_class(
            name or opdef.backward_name or f"{op.capitalize()}Backward0",
            *(() if base is None else (base,)),
        ),
        opdef.saves,
    )
    return made


class DirectPlan:
    """What the nodes one `direct_recorder` makes share: the needs-input-grad flags when
    the operand kinds fix them (None: read from the node), and the node's fused rule per
    (incoming gradient layout, numbers), filled by `tape.fused`."""

    __slots__ = ("needs", "fused")

    def __init__(self, needs: tuple[bool, ...] | None):
        self.needs = needs
        self.fused: dict[Any, Any] = {}


def direct_recorder(op: str, operands: Sequence[Any], out: Tensor) -> Callable[..., Tensor]:
    """`rec(*operands, out)`: `record(op, operands, {}, out)` for calls whose operands have
    these kinds (tensor or number per position) and layouts and whose output has `out`'s
    dtype, written out as code (`OpNode.__init__` with the save plan, the operands' shapes
    and dtypes and the numbers' positions as constants). For `functions.fastpath`'s direct
    calls, which run it only with grad mode on, no interpreter, anomaly mode or forward
    level, on plain tensors and Python numbers. The node is the same as `record` makes."""
    n = len(operands)
    if not out._dtype.differentiable:
        return define(trivial_recorder_source(n), f"<llgrad record {op}>", {}, "rec")
    cls, saves = _node_classes.get((op, None, None)) or _node_class(op, None, None)
    plan = _save_plans.get((op, saves)) or _save_plan(op, saves)
    keeps_layout = plan[3]
    tensor = [isinstance(o, Tensor) for o in operands]
    meta: list[Any] = []
    for o in operands:
        meta += [o._shape, o._dtype] if isinstance(o, Tensor) else [None, None]
    needs = None if sum(tensor) > 1 else tuple(tensor)
    consts = {
        "new": object.__new__,
        "CLS": cls,
        "Saved": SavedTensor,
        "edge": edge,
        "NO_EDGE": _NO_EDGE,
        "sequence": _sequence,
        "OP": op,
        "META": tuple(meta),
        "LAYOUTS": tuple(o._strides if isinstance(o, Tensor) else None for o in operands)
        if keeps_layout
        else None,
        "PLAN": DirectPlan(needs),
        "ref": weakref.ref,
        "LAST": [tuple(None for _ in range(n))],
        "NOTHING_SAVED": (None,) * (n + 1),
    }
    return define(recorder_source(tensor, plan), f"<llgrad record {op}>", consts, "rec")


class Interpreter:
    """Something that takes over `apply` for operands it recognizes (a tracer, vmap).

    Interpreters form a stack; the innermost one that `handles` the operands processes the
    op, and may itself call `apply` again (which then reaches the interpreters below it).
    """

    def handles(self, operands: Sequence[Any]) -> bool:
        raise AssertionError("subclass responsibility")

    def process(
        self,
        op: str,
        operands: Sequence[Any],
        attrs: dict[str, Any] | None,
        forward: Callable[..., Tensor],
        name: str | None,
    ) -> Tensor:
        raise AssertionError("subclass responsibility")

    def process_composite(
        self, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
    ) -> Tensor:
        """Default: run the op's decomposition on the interpreter's values."""
        F = ops.F

        return registry.get(op).decompose(F, *operands, **attrs)

    def process_tangent(
        self, op: str, operands: Sequence[Any], attrs: dict[str, Any], out: Tensor
    ) -> None:
        """Forward mode when some operand's *tangent* is this interpreter's tensor.

        `apply` asks this instead of `forward_ad.propagate` (the default) so that an
        interpreter whose tensors ride as tangents (vmap's batched tangents in `jacfwd`) can
        compute Jacobian-vector products that the plain rule cannot express.
        """
        forward_ad.propagate(op, operands, attrs, out)

    def process_function(
        self, fn_name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A function outside the op registry (`getitem`, `argmax`, ...) met this
        interpreter's tensors (see `dispatch_function`). Default: run it unchanged."""
        return fn(*args, **kwargs)


interpreters: list[Interpreter] = []


def _interpreter_for(operands: Sequence[Any]) -> Interpreter | None:
    for interp in reversed(interpreters):
        if interp.handles(operands):
            return interp
    return None


def apply(
    op: str,
    operands: Sequence[Any],
    attrs: dict[str, Any] | None,
    forward: Callable[..., Tensor],
    name: str | None = None,
) -> Tensor:
    if interpreters:
        interp = _interpreter_for(operands)
        if interp is not None:
            return interp.process(op, operands, attrs, forward, name)
    out = forward(op, operands, attrs)
    if needs_grad(operands):
        record(op, operands, attrs or {}, out, name)
    if forward_ad._level[0]:
        _propagate(op, operands, attrs or {}, out)
    return out


def _propagate(op: str, operands: Sequence[Any], attrs: dict[str, Any], out: Tensor) -> None:
    """Forward-mode tangents of `out`; an interpreter owning a tangent computes them."""
    if interpreters:
        tangents = [t for t in (forward_ad.tangent_of(o) for o in operands) if t is not None]
        interp = _interpreter_for(tangents) if tangents else None
        if interp is not None:
            interp.process_tangent(op, operands, attrs, out)
            return
    forward_ad.propagate(op, operands, attrs, out)


def dispatch_function(
    fn_name: str,
    tensors: Sequence[Any],
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
) -> Any:
    """Entry point for functions that do not go through `apply` (they call eager code
    directly, e.g. indexing): when an interpreter handles one of `tensors`, it runs the
    call (`Interpreter.process_function`); otherwise `fn(*args, **kwargs)` runs as is.
    `fn` must not call `dispatch_function` again with the same tensors."""
    kwargs = kwargs or {}
    if interpreters:
        interp = _interpreter_for(tensors)
        if interp is not None:
            return interp.process_function(fn_name, fn, args, kwargs)
    return fn(*args, **kwargs)


def apply_composite(
    op: str,
    operands: Sequence[Any],
    attrs: dict[str, Any],
    name: str | None = None,
    key: tuple | None = None,
) -> Tensor:
    """Run a composite op through its decomposition, recorded as one node of its own.

    The forward runs the decomposition without recording; the node's backward is the op's
    vjp rule, so `grad_fn` shows PyTorch's single node (`MeanBackward0`, not its parts).
    Under forward mode the decomposition's ops also compute the output's tangent; those
    are recorded when grad mode is on (reverse-over-forward, e.g. `jacrev(jacfwd(f))`,
    differentiates the tangent), which records the parts' nodes too (unused by `out`).
    `key`, from `compiled_composites.forward_key(op, attrs, operands)` for operands that
    are all plain `Tensor`s, spares the compiled path building it again.
    """
    opdef = registry.get(op)
    assert opdef.decompose is not None, f"{op} is not a composite op"
    if interpreters:
        interp = _interpreter_for(operands)
        if interp is not None:
            return interp.process_composite(op, operands, attrs, name)
    level = forward_ad._level[0]
    tangents = (
        level and grad_state.enabled and any(forward_ad.tangent_of(o) is not None for o in operands)
    )
    compiled = (
        compiled_composites
        if opdef.eager_compile
        and not level
        and compiled_composites.ENABLED
        and (key is not None or all(o.__class__ in DENSE_CLASSES for o in operands))
        else None
    )
    out = compiled.forward(op, operands, attrs, key) if compiled is not None else None
    if out is None:
        F = ops.F
        if tangents:
            out = opdef.decompose(F, *operands, **attrs)
        else:  # (no_grad, without a context manager's objects)
            state = grad_state
            was = state.enabled
            state.enabled = False
            try:
                out = opdef.decompose(F, *operands, **attrs)
            finally:
                state.enabled = was
    if needs_grad(operands):
        record(
            op,
            operands,
            attrs,
            out,
            name,
            compiled.CompiledRuleNode if compiled is not None else None,
        )
    return out


def composite_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `fn`, a function written with llgrad functions that returns new tensors (no
    views of its arguments, no in-place writes, no random draws), as a composite that
    eager mode may run compiled: with plain tensors, no interpreter (vmap, tracing) and
    no forward-mode tangents, the first call of each signature traces `fn` into one graph
    and later calls run it as one native call, with autograd through the compiled
    graph's backward (see `llgrad.compiler.composites.function`): one node, with the name
    eager autograd gives `fn`'s output (PyTorch's where `fn` sets it). Anything the
    compiled path cannot serve, and every other call, runs `fn` as written."""
    import functools

    @functools.wraps(fn)
    def composite(*args: Any, **kwargs: Any) -> Any:
        cc = compiled_composites
        if cc is None or interpreters or forward_ad._level[0] or not cc.ENABLED:
            return run_function(fn, fn.__name__, args, kwargs)
        return cc.function(fn, args, kwargs)

    return composite


def run_function(fn: Callable[..., Any], name: str, args: tuple, kwargs: dict) -> Any:
    """`fn(*args, **kwargs)`; when its eager code fails on CUDA tensors, the CUDA
    runtime's rerun (`functions._errors.DEVICE_RERUN`) serves the call."""
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, TypeError) as e:
        DEVICE_RERUN = ops.F._errors.DEVICE_RERUN

        failed = DEVICE_RERUN[0]
        if failed is not None and failed(e, args, kwargs):
            return DEVICE_RERUN[1](fn, name, args, kwargs)
        raise


# `llgrad.compiler.composites` (set when the compiler is imported): eager composites run
# as compiled graphs
compiled_composites: Any = None
