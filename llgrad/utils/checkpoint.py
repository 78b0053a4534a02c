"""Activation checkpointing: trade compute for memory by recomputing a forward in backward.

Non-reentrant (the default), as PyTorch's: `fn` runs with grad enabled, so the graph is the
real one (`out.grad_fn` is the last op's node, closure parameters get gradients,
`autograd.grad` and double backward work), but right after `fn` returns, every tensor that
the new nodes saved for backward is swapped for a placeholder that remembers only how to
reconnect the value to the graph (its grad_fn edge, or the node itself for outputs). Only the
inputs are kept. The first placeholder unpacked in backward reruns `fn` (same inputs, same RNG
state, grad enabled), matches the recomputed nodes to the originals in creation order, and
fills every placeholder; the recomputed graph itself is dropped. Tensors that cost nothing to
keep (parameters, the inputs, the outputs' own storage) are not dropped.

Peak memory while `fn` runs is that of `fn` without checkpointing (the saved tensors are
released when it returns, not as they are created); what checkpointing saves is the
memory held between forward and backward.

Reentrant (`use_reentrant=True`) is PyTorch's older scheme: `fn` runs under no_grad, one
`CheckpointFunctionBackward` node keeps the inputs, and its backward recomputes on detached
inputs and runs a nested `backward` (so it accumulates into closure parameters' `.grad` and,
as in PyTorch, is not meant for `autograd.grad` or double backward).
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator

from ..tape import node as _node
from ..autograd.api import backward
from ..tape.function import Function
from ..tape.node import Node, SavedTensor
from ..dispatch.grad_mode import enable_grad, is_grad_enabled
from ..functions.creation import default_generator
from ..tensor import Tensor

__all__ = [
    "checkpoint",
    "checkpoint_sequential",
    "CheckpointError",
    "CheckpointFunction",
    "saved_bytes",
    "detach_variable",
    "noop_context_fn",
]


class CheckpointError(RuntimeError):
    """The recomputation did not reproduce the original forward's saved tensors."""


ContextPair = tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]


def noop_context_fn() -> ContextPair:
    """The default `context_fn`: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Detached copies of the tensors (same requires_grad); other values pass through."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(
            f"Only tuple of tensors is supported. Got Unsupported input type: "
            f"{type(inputs).__name__}"
        )
    out = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            x = inp.detach()
            x._requires_grad = inp._requires_grad
            out.append(x)
        else:
            out.append(inp)
    return tuple(out)


def _generator() -> Any:
    return default_generator


@contextlib.contextmanager
def _rng_at(state: Any) -> Iterator[None]:
    """Run with the default generator at `state`; restore the caller's state after."""
    if state is None:
        yield
        return
    gen = _generator()
    current = gen.get_state()
    gen.set_state(state)
    try:
        yield
    finally:
        gen.set_state(current)


def _tensors_in(obj: Any) -> Iterator[Tensor]:
    """Tensors inside nested tuples, lists and dicts (the output structures fn may return)."""
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors_in(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_in(o)


def _next_seq() -> int:
    """A node sequence number: nodes made after this call have larger ones."""
    return next(_node._sequence)


def _saving_nodes(outputs: Any, start: int, end: int) -> list[Node]:
    """Nodes created in (start, end) that are reachable from `outputs` and save tensors,
    in creation order (the order a deterministic recomputation creates them again)."""
    stack = [t.grad_fn for t in _tensors_in(outputs) if t.grad_fn is not None]
    seen: set[int] = set()
    found: list[Node] = []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if not start < n._seq < end:
            continue
        if any(s is not None for s in (getattr(n, "_saved", None) or ())):
            found.append(n)
        for nxt, _ in n.next_functions:
            if nxt is not None:
                stack.append(nxt)
    found.sort(key=lambda n: n._seq)
    return found


# ------------------------------------------------------------------------------------------
# non-reentrant
# ------------------------------------------------------------------------------------------


class _Frame:
    """One checkpointed call: its inputs, RNG state, and the placeholders to fill."""

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        rng_state: Any,
        recompute_ctx: contextlib.AbstractContextManager,
        determinism_check: str,
    ):
        self.fn = fn
        self.args = tuple(SavedTensor(a) if isinstance(a, Tensor) else a for a in args)
        self.kwargs = {k: SavedTensor(v) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        self.rng_state = rng_state
        self.recompute_ctx = recompute_ctx
        self.determinism_check = determinism_check
        # (node index, slot index, placeholder); weak so a freed graph frees its values
        self.slots: list[tuple[int, int, weakref.ref]] = []
        self.layout: list[tuple[str, int]] = []  # (node class name, len(_saved)) per node
        self.done = False

    def input_tensors(self) -> Iterator[Tensor]:
        for a in itertools.chain(self.args, self.kwargs.values()):
            if isinstance(a, SavedTensor):
                yield a.data

    def _inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The inputs as fresh tensors (version-checked): values only, same requires_grad."""

        def restore(v: Any, index: int) -> Any:
            if not isinstance(v, SavedTensor):
                return v
            t = v.unpack(None, "checkpoint", index)  # raises if modified in place since
            x = Tensor._make(t._storage, t._offset, t._shape, t._strides, t._dtype)
            x._requires_grad = t._requires_grad
            return x

        args = tuple(restore(a, i) for i, a in enumerate(self.args))
        kwargs = {k: restore(v, len(self.args) + i) for i, (k, v) in enumerate(self.kwargs.items())}
        return args, kwargs

    def recompute(self) -> None:
        """Rerun fn and move the saved tensors of its graph into the placeholders."""
        if self.done:
            return
        args, kwargs = self._inputs()
        with _rng_at(self.rng_state), enable_grad(), self.recompute_ctx:
            start = _next_seq()
            out = self.fn(*args, **kwargs)
            end = _next_seq()
        nodes = _saving_nodes(out, start, end)
        layout = [(type(n).__name__, len(n._saved)) for n in nodes]
        if layout != self.layout:
            raise CheckpointError(
                "llgrad.utils.checkpoint: A different number of tensors was saved during the "
                "original forward and recomputation.\n"
                f"Number of tensors saved during forward: "
                f"{sum(k for _, k in self.layout)} in {len(self.layout)} nodes\n"
                f"Number of tensors saved during recomputation: "
                f"{sum(k for _, k in layout)} in {len(layout)} nodes"
            )
        mismatches = []
        for ni, si, ref in self.slots:
            ph = ref()
            if ph is None:
                continue
            src = nodes[ni]._saved[si]
            ph.fill(src)
            if self.determinism_check == "default" and ph.value_meta() != ph.meta:
                mismatches.append((ni, si, ph.meta, ph.value_meta()))
        self.done = True
        if mismatches:
            lines = "".join(
                f"tensor {si} of node {ni}:\nsaved metadata: {m}\nrecomputed metadata: {r}\n"
                for ni, si, m, r in mismatches
            )
            raise CheckpointError(
                "llgrad.utils.checkpoint: Recomputed values for the following "
                "tensors have different metadata than during the forward "
                "pass.\n" + lines
            )


class _Recomputed:
    """A saved-tensor slot whose value is dropped after forward and recomputed on demand.

    It answers `unpack(node, op_name, index)` like `SavedTensor`, reattaching the value to
    the ORIGINAL graph: an output slot gets the unpacking node as grad_fn, an input slot the
    edge the tensor had when it was saved, so double backward flows through the real graph.
    """

    __slots__ = (
        "frame",
        "is_output",
        "requires_grad",
        "grad_fn",
        "output_nr",
        "meta",
        "_value",
        "version",
        "__weakref__",
    )

    def __init__(self, frame: _Frame, saved: SavedTensor):
        t = saved.data
        self.frame = frame
        self.is_output = saved.is_output
        self.requires_grad = saved.requires_grad
        self.grad_fn = None if saved.is_output else t.grad_fn
        self.output_nr = getattr(saved, "output_nr", 0) if saved.is_output else t._output_nr
        self.meta = (tuple(t._shape), t._dtype.name)
        self._value: Any = None
        self.version = 0

    @property
    def data(self) -> Tensor | None:
        """The recomputed value (None until recomputed); what memory accounting sees."""
        v = self._value
        if isinstance(v, _Recomputed):
            return v.data
        return v

    def fill(self, src: Any) -> None:
        if isinstance(src, _Recomputed):  # nested checkpoint: stays lazy
            self._value = src
            return
        t = src.data
        self._value = Tensor._make(t._storage, t._offset, t._shape, t._strides, t._dtype)
        self.version = src.version

    def value_meta(self) -> tuple[tuple[int, ...], str] | None:
        v = self._value
        if isinstance(v, _Recomputed):
            return v.meta
        return None if v is None else (tuple(v._shape), v._dtype.name)

    def _tensor(self) -> Tensor:
        v = self._value
        if isinstance(v, _Recomputed):
            v.frame.recompute()
            return v._tensor()
        if v._storage.version != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been "
                "modified by an inplace operation: a tensor recomputed by "
                "checkpoint is at version "
                f"{v._storage.version}; expected version {self.version} instead."
            )
        return v

    def values(self, node: Node, op_name: str, index: int) -> Tensor:
        """`SavedTensor.values`: the recomputed values, without history."""
        self.frame.recompute()
        return self._tensor()

    def unpack(self, node: Node, op_name: str, index: int) -> Tensor:
        self.frame.recompute()
        t = self._tensor()
        alias = Tensor._make(t._storage, t._offset, t._shape, t._strides, t._dtype)
        if self.is_output:
            # a node exists only for differentiable outputs: the value is that output again
            alias._requires_grad = True
            alias.grad_fn = node
            alias._output_nr = self.output_nr
        elif self.requires_grad:
            alias._requires_grad = True
            alias.grad_fn = self.grad_fn
            alias._output_nr = self.output_nr
        return alias


def _is_parameter_memory(t: Tensor) -> bool:
    """Whether `t` is a leaf that requires grad, or a view of one (e.g. `weight.t()`):
    memory that lives as long as the model does, whatever the graph keeps."""
    root = t._base if t._base is not None else t
    return root.grad_fn is None and root._requires_grad


def _keep(saved: SavedTensor, cheap: set[int]) -> bool:
    """Slots not worth dropping: parameters (and views of them) and tensors sharing the
    inputs'/outputs' memory."""
    t = saved.data
    if id(t._storage) in cheap:
        return True
    return (not saved.is_output) and _is_parameter_memory(t)


def _attach_placeholders(frame: _Frame, nodes: list[Node], outputs: Any) -> None:
    cheap = {id(t._storage) for t in itertools.chain(frame.input_tensors(), _tensors_in(outputs))}
    frame.layout = [(type(n).__name__, len(n._saved)) for n in nodes]
    for ni, n in enumerate(nodes):
        saved = n._saved
        for si, s in enumerate(saved):
            if s is None or isinstance(s, _Recomputed) or _keep(s, cheap):
                continue
            ph = _Recomputed(frame, s)
            saved[si] = ph
            frame.slots.append((ni, si, weakref.ref(ph)))


def _checkpoint_without_reentrant(
    fn: Callable[..., Any],
    preserve_rng_state: bool,
    context_fn: Callable[[], ContextPair],
    determinism_check: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"determinism_check should be one of ['default', 'none'], but got {determinism_check!r}"
        )
    forward_ctx, recompute_ctx = context_fn()
    if not is_grad_enabled():
        with forward_ctx:
            return fn(*args, **kwargs)
    rng_state = _generator().get_state() if preserve_rng_state else None
    frame = _Frame(fn, args, kwargs, rng_state, recompute_ctx, determinism_check)
    with forward_ctx:
        start = _next_seq()
        out = fn(*args, **kwargs)
        end = _next_seq()
    _attach_placeholders(frame, _saving_nodes(out, start, end), out)
    return out


# ------------------------------------------------------------------------------------------
# reentrant
# ------------------------------------------------------------------------------------------


class CheckpointFunction(Function):
    """PyTorch's reentrant checkpoint: one node that keeps the inputs and reruns fn."""

    @staticmethod
    def forward(
        ctx: Any, run_function: Callable[..., Any], preserve_rng_state: bool, *args: Any
    ) -> Any:
        ctx.run_function = run_function
        ctx.rng_state = _generator().get_state() if preserve_rng_state else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return run_function(*args)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        detached = detach_variable(tuple(inputs))
        with _rng_at(ctx.rng_state), enable_grad():
            outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        outs_with_grad, grads_with = [], []
        for o, g in zip(outputs, grads):
            if isinstance(o, Tensor) and o._requires_grad:
                outs_with_grad.append(o)
                grads_with.append(g)
        if not outs_with_grad:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary"
            )
        backward(outs_with_grad, grads_with)
        return (None, None) + tuple(d._grad if isinstance(d, Tensor) else None for d in detached)


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool = False,
    context_fn: Callable[[], ContextPair] = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """`function(*args, **kwargs)`, keeping only the inputs for backward and recomputing
    the rest there (see the module docstring for the two schemes)."""
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError(
                "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
            )
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if is_grad_enabled() and not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None",
                UserWarning,
                stacklevel=2,
            )
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    return _checkpoint_without_reentrant(
        function, preserve_rng_state, context_fn, determinism_check, args, kwargs
    )


def checkpoint_sequential(
    functions: Any, segments: int, input: Any, use_reentrant: bool = False, **kwargs: Any
) -> Any:
    """Run `functions` (a list or a Sequential) in `segments` chunks, checkpointing all but
    the last chunk (PyTorch's split: len // segments per chunk, the rest in the last)."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be >= 1, got {segments}")

    def run_function(start: int, end: int) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    segment_size = len(functions) // segments
    end = -1
    if segment_size > 0:
        for start in range(0, segment_size * (segments - 1), segment_size):
            end = start + segment_size - 1
            input = checkpoint(
                run_function(start, end),
                input,
                use_reentrant=use_reentrant,
                preserve_rng_state=preserve,
            )
    return run_function(end + 1, len(functions) - 1)(input)


# ------------------------------------------------------------------------------------------
# memory accounting
# ------------------------------------------------------------------------------------------


def _saved_entries(node: Node) -> Iterable[Any]:
    return getattr(node, "_saved", None) or ()


def saved_bytes(tensor: Any, include_leaves: bool = True) -> int:
    """Bytes of distinct storages that the graph behind `tensor` keeps alive for backward.

    Walks every node reachable from the tensor's grad_fn and counts what their saved-tensor
    slots hold: plain SavedTensors, checkpoint placeholders (their recomputed value, if any,
    plus the inputs their checkpoint keeps). With `include_leaves=False`, tensors that are
    leaves requiring grad (parameters, inputs) and views of them are left out: those live
    anyway.
    """
    roots = [t.grad_fn for t in _tensors_in(tensor) if t.grad_fn is not None]
    seen_nodes: set[int] = set()
    seen_frames: set[int] = set()
    storages: dict[int, int] = {}

    def count(t: Tensor | None) -> None:
        if t is None:
            return
        if not include_leaves and _is_parameter_memory(t):
            return
        storages[id(t._storage)] = t._storage.nbytes

    stack = list(roots)
    while stack:
        n = stack.pop()
        if id(n) in seen_nodes:
            continue
        seen_nodes.add(id(n))
        for s in _saved_entries(n):
            if s is None:
                continue
            if isinstance(s, _Recomputed):
                count(s.data)
                if id(s.frame) not in seen_frames:
                    seen_frames.add(id(s.frame))
                    for t in s.frame.input_tensors():
                        count(t)
            else:
                count(s.data)
        for nxt, _ in n.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return sum(storages.values())
