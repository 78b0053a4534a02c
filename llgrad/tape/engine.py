"""The backward engine.

One walk serves `Tensor.backward`, `autograd.backward` and `autograd.grad`:
1. discover the graph from the roots iteratively (deep graphs never recurse) and count
   each node's incoming edges;
2. keep only nodes that lead to what was asked for (`inputs=`): one walk back from them;
3. run nodes when all their gradients have arrived, newest first (PyTorch's order; a node
   that makes exactly one other ready while none wait hands it on directly), reducing
   each gradient to its input's shape and dtype here, once, for every op;
4. accumulate into leaves' `.grad` or capture for `autograd.grad`; free each node's saved
   tensors once it ran, unless the graph is retained.
"""

from __future__ import annotations

import heapq
import sys
from typing import Any, Callable, Sequence

from ..dispatch.grad_mode import no_grad, set_grad_enabled
from ..tensor import Tensor
from . import anomaly
from ..dispatch import grad_mode
from .node import AccumulateGrad, Node, OpNode, edge
from ..dispatch import ops

Edge = tuple[Node, int]


def _check_root(i: int, t: Tensor, g: Tensor | None) -> Tensor:
    F = ops.F

    if not isinstance(t, Tensor):
        raise TypeError(f"backward: expected a Tensor, got {type(t).__name__}")
    if not t._requires_grad:
        raise RuntimeError(
            f"element {i} of tensors does not require grad and does not have a grad_fn"
        )
    if g is None:
        if t.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if not t._dtype.is_floating_point:  # complex too: PyTorch's rule
            raise RuntimeError(
                f"grad can be implicitly created only for real scalar outputs but got {t._dtype}"
            )
        return F.ones_like(t)
    if not isinstance(g, Tensor):
        raise TypeError(
            f"backward: gradient for output {i} must be a Tensor or None, got {type(g).__name__}"
        )
    if g._shape != t._shape:
        raise RuntimeError(
            f"Mismatch in shape: grad_output[{i}] has a shape of "
            f"{g.shape!r} and output[{i}] has a shape of {t.shape!r}."
        )
    return g


def _discover(
    roots: list[Node],
    parents: dict[Node, list[Node]] | None = None,
    sinks: list[Node] | None = None,
) -> dict[Node, int]:
    """The count of incoming edges of every node reachable from `roots` (roots have none
    unless another root points to them); with `parents`, also who points to whom; with
    `sinks`, the nodes that send no gradient on (leaves' AccumulateGrad, mostly). (Nodes
    hash by identity.)"""
    deps: dict[Node, int] = {}
    roots_seen = set(roots)
    stack = list(roots)
    while stack:
        node = stack.pop()
        sink = True
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            sink = False
            d = deps.get(nxt)
            if d is not None:
                deps[nxt] = d + 1
            else:
                deps[nxt] = 1
                if nxt not in roots_seen:  # (a root is walked from already)
                    stack.append(nxt)
            if parents is not None:
                ps = parents.get(nxt)
                if ps is None:
                    parents[nxt] = [node]
                else:
                    ps.append(node)
        if sink and sinks is not None:
            sinks.append(node)
    return deps


def _needed(parents: dict[Node, list[Node]], targets: set[Node]) -> set[Node]:
    """The nodes that must run: those from which some target is reachable by at least
    one edge (a walk from the targets back along the edges), and the targets that are
    leaves' AccumulateGrad (they accumulate). Another target's gradient is captured
    without running its node, as PyTorch does (its hooks do not fire)."""
    needed = {t for t in targets if t.accumulates}
    stack = list(targets)
    while stack:
        for p in parents.get(stack.pop(), ()):
            if p not in needed:
                needed.add(p)
                stack.append(p)
    return needed


def _reduce_to_input(node: Node, i: int, g: Tensor) -> Tensor:
    """Sum broadcast dimensions away and cast to the input's dtype: once, for all ops."""
    if not isinstance(node, OpNode):
        return g
    shape, dtype = node._meta[2 * i], node._meta[2 * i + 1]
    if shape is None:
        return g
    F = ops.F

    if g._shape != shape:
        g = F.sum_to_size(g, shape)
    if g._dtype is not dtype:
        g = g.to(dtype)
    return g


def _add(a: Tensor | None, b: Tensor) -> Tensor:
    return b if a is None else a + b


def _has_nan(g: Tensor) -> bool:
    F = ops.F

    with no_grad():
        return bool(F.isnan(g).any().item())


# `llgrad.profiler`'s hook while a profile is active: the engine runs a node as
# `PROFILE_HOOK(node, grads)` (which times `node.apply(grads)`); None otherwise, and then
# the only cost is this check per node
PROFILE_HOOK: Callable[[Node, list[Tensor | None]], Any] | None = None

_seeds: dict[tuple, Tensor] = {}
_CUDA: list[type | None] = [None]  # eager.cuda.CudaTensor, set when it is imported
IN_BACKWARD = [0]  # backward passes running (counted with CUDA only)


def _seed(t: Tensor) -> Tensor:
    """A shared `ones_like(t)` for a one-element root (the direct path only, where no one
    but the node's backward graph reads it)."""
    key = (t._dtype, t._shape, t.__class__ is _CUDA[0])
    s = _seeds.get(key)
    if s is None:
        F = ops.F

        s = _seeds[key] = F.ones_like(t.detach())
    return s


def is_seed(g: Tensor) -> bool:
    """Whether `g` is one of `_seed`'s shared ones (so every element is exactly 1)."""
    return _seeds.get((g._dtype, g._shape, g.__class__ is _CUDA[0])) is g


def plain_leaf(node: Node) -> Tensor | None:
    """The leaf whose AccumulateGrad `node` is, when a gradient may go to it without the
    engine: neither the node nor the leaf has hooks (None otherwise, or for any other
    node)."""
    if node.__class__ is not AccumulateGrad or node._prehooks or node._hooks or node._metadata:
        return None
    v = node.variable
    if v._hooks or v.__dict__.get("_post_accumulate_hooks"):
        return None
    return v


def hand_over(leaf: Tensor, g: Tensor) -> None:
    """`g` into `leaf.grad` on a direct path, where `g` is a new buffer nobody else holds:
    a leaf without `.grad` takes it as it is, else it is added in place (`_accumulate`)."""
    if leaf._grad is None:
        leaf._grad = g
    else:
        _accumulate(leaf, g, False)


def _run_direct(
    root: Tensor,
    grad: Tensor | None,
    retain_graph: bool,
    capture: Sequence[Tensor] | None,
    accumulate: bool,
) -> list[Tensor | None] | None:
    """`execute` for a graph that is one node over leaves, or None when the graph is not
    that: one root whose grad_fn may run `direct` (a compiled call's backward), no hooks,
    retain_grad or anomaly mode, every next node a leaf's AccumulateGrad without hooks,
    and every captured tensor one of those leaves. The node's gradients go straight to
    the leaves; its outputs are new buffers nobody else holds, so a leaf without a .grad
    takes them as they are (PyTorch's AccumulateGrad steals such too)."""
    node = root.grad_fn if root.__class__ is Tensor else None
    if (
        node is None
        or not node.direct
        or node._prehooks
        or node._hooks
        or node._metadata
        or anomaly._state.enabled
    ):
        return None
    nexts = node.next_functions
    leaves = []
    for nxt, _ in nexts:
        if nxt is not None:
            v = plain_leaf(nxt)
            if v is None:
                return None
            leaves.append(v)
    if capture is not None:
        for t in capture:
            for v in leaves:
                if v is t:
                    break
            else:
                return None
    if grad is None and root._requires_grad and root._dtype.is_floating_point and root.numel() == 1:
        grad = _seed(root)  # read by the compiled backward only, never handed out
    else:
        grad = _check_root(0, root, grad)
    in_grads: list[Tensor | None] = [None] * node.num_outputs
    in_grads[root._output_nr] = grad
    mode = grad_mode._state
    enabled, mode.enabled = mode.enabled, False
    try:
        outs = node.apply(in_grads) if PROFILE_HOOK is None else PROFILE_HOOK(node, in_grads)
    finally:
        mode.enabled = enabled
    if not retain_graph:
        node.release()
    if len(nexts) == 1 and capture is not None and not accumulate:
        # one leaf, gradients only returned (`lg.autograd.grad`): nothing to add up
        g = outs[0]
        leaf = nexts[0][0].variable
        if g is not None and g._dtype is not leaf._dtype:
            g = g.to(leaf._dtype)
        return [g for _ in capture]
    by_leaf: dict[int, Tensor] = {}
    for (nxt, _), g in zip(nexts, outs):
        if nxt is None or g is None:
            continue
        leaf = nxt.variable
        if g._dtype is not leaf._dtype:
            g = g.to(leaf._dtype)
        prev = by_leaf.get(id(leaf))
        by_leaf[id(leaf)] = g if prev is None else prev + g
        if capture is None or accumulate:
            if capture is None or any(t is leaf for t in capture):
                hand_over(leaf, g)
    if capture is None:
        return []
    return [by_leaf.get(id(t)) for t in capture]


_callbacks: list[list[Callable[[], Any]]] = []  # one list per running backward


def queue_callback(fn: Callable[[], Any]) -> None:
    """Run `fn()` once the backward pass that is running now has finished (PyTorch's
    `Variable._execution_engine.queue_callback`; DDP waits for its all-reduces there)."""
    if not _callbacks:
        raise RuntimeError(
            "queue_callback: no backward pass is running (call it from a hook during backward)"
        )
    _callbacks[-1].append(fn)


def execute(
    roots: Sequence[Tensor],
    grads: Sequence[Tensor | None],
    *,
    retain_graph: bool,
    create_graph: bool,
    capture: Sequence[Tensor] | None = None,
    accumulate: bool = True,
) -> list[Tensor | None]:
    """Run backward from `roots`. With `capture`, return the gradients reaching those
    tensors (and accumulate nowhere unless `accumulate`). Callbacks queued during the
    pass run at its end, in order. While CUDA tensors exist, the pass counts itself in
    `IN_BACKWARD`: derivative rules make their helper tensors (an `arange`, a mask) on
    the host, and CUDA ops then take them to the device instead of refusing the mix."""
    if _CUDA[0] is None:
        return _execute_pass(
            roots,
            grads,
            retain_graph=retain_graph,
            create_graph=create_graph,
            capture=capture,
            accumulate=accumulate,
        )
    IN_BACKWARD[0] += 1
    try:
        captured = _execute_pass(
            roots,
            grads,
            retain_graph=retain_graph,
            create_graph=create_graph,
            capture=capture,
            accumulate=accumulate,
        )
    finally:
        IN_BACKWARD[0] -= 1
    if capture is not None:  # a rule's host-made gradient for a CUDA input: moved
        captured = [
            g.cuda()
            if g is not None and t._ptr is None and t._storage is not None and g._ptr is not None
            else g
            for t, g in zip(capture, captured)
        ]
    return captured


def _execute_pass(
    roots: Sequence[Tensor],
    grads: Sequence[Tensor | None],
    *,
    retain_graph: bool,
    create_graph: bool,
    capture: Sequence[Tensor] | None = None,
    accumulate: bool = True,
) -> list[Tensor | None]:
    if len(roots) == 1 and not create_graph:  # (runs no hooks, so queues nothing)
        direct = _run_direct(roots[0], grads[0], retain_graph, capture, accumulate)
        if direct is not None:
            return direct
    _callbacks.append([])
    try:
        captured = _execute(
            roots,
            grads,
            retain_graph=retain_graph,
            create_graph=create_graph,
            capture=capture,
            accumulate=accumulate,
        )
        queued = _callbacks[-1]
        while queued:
            queued.pop(0)()
    finally:
        _callbacks.pop()
    return captured


def _execute(
    roots: Sequence[Tensor],
    grads: Sequence[Tensor | None],
    *,
    retain_graph: bool,
    create_graph: bool,
    capture: Sequence[Tensor] | None,
    accumulate: bool,
) -> list[Tensor | None]:
    root_grads = [_check_root(i, t, g) for i, (t, g) in enumerate(zip(roots, grads))]
    root_edges = [edge(t) for t in roots]
    buffers: dict[Node, list[Tensor | None]] = {}
    for (node, nr), g in zip(root_edges, root_grads):
        buf = buffers.setdefault(node, [None] * node.num_outputs)
        buf[nr] = _add(buf[nr], g)

    starts = list({id(n): n for n, _ in root_edges}.values())
    sinks: list[Node] | None = [] if capture is not None else None
    deps = _discover(starts, None, sinks)
    capture_edges: list[Edge | None] = []
    needed: set[Node] | None = None  # None: every node
    if capture is not None:
        for t in capture:
            if not t._requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            e = edge(t)
            capture_edges.append(e if e[0] is not None else None)
        targets = {e[0] for e in capture_edges if e is not None}
        # every node leads to some sink, so when every sink is asked for, every node is
        # needed (`grad(loss, params)` over all the graph's leaves): no walk back
        if any(n not in targets for n in sinks):
            parents: dict[Node, list[Node]] = {}
            _discover(starts, parents)
            needed = _needed(parents, targets)
    capture_at: dict[tuple[Node, int], list[int]] = {}
    for k, e in enumerate(capture_edges):
        if e is not None:
            capture_at.setdefault((e[0], e[1]), []).append(k)
    capture_nodes = {key[0] for key in capture_at}
    captured: list[Tensor | None] = [None] * len(capture_edges)

    ready: list[tuple[int, int, Node]] = []
    for node in buffers:
        if deps.get(node, 0) == 0:
            heapq.heappush(ready, (-node._seq, id(node), node))
    check_nan = anomaly.is_anomaly_enabled() and anomaly.is_anomaly_check_nan_enabled()
    accumulate_leaves = capture is None or accumulate
    push, pop = heapq.heappush, heapq.heappop

    release = not retain_graph
    # the nodes a gradient is sent to: needed ones and targets (None: every node)
    receives = None if needed is None else needed | capture_nodes
    with set_grad_enabled(create_graph):
        follow = None  # the one node this one made ready, run next directly
        while ready or follow is not None:
            if follow is not None:
                node, follow = follow, None
            else:
                node = pop(ready)[2]
            in_grads = buffers.pop(node, None)
            if in_grads is None:
                in_grads = [None] * node.num_outputs
            skip = needed is not None and node not in needed
            if skip and node not in capture_nodes:
                continue
            if node._metadata is not None:
                in_grads = _tensor_prehooks(node, in_grads)
            if node.accumulates:
                g = in_grads[0]
                if g is not None and node.variable._hooks:
                    # a leaf's own hooks, before `autograd.grad` captures its gradient
                    # and before it accumulates (PyTorch: AccumulateGrad's pre-hooks)
                    in_grads[0] = g = _leaf_hooks(node.variable, g)
                if node in capture_nodes:
                    for k in capture_at.get((node, 0), ()):
                        captured[k] = g
                g = None
                if (
                    not skip
                    and in_grads[0] is not None
                    and accumulate_leaves
                    and (capture is None or (node, 0) in capture_at)
                ):
                    # hand the gradient over as its only holder (`_accumulate_owned`)
                    _accumulate_owned(node.variable, [in_grads.pop()], create_graph)
                continue
            if node in capture_nodes:
                for nr in range(len(in_grads)):
                    for k in capture_at.get((node, nr), ()):
                        captured[k] = in_grads[nr]
                if skip:  # only its gradient is asked for
                    continue
            if node._prehooks:
                for hook in list(node._prehooks.values()):
                    r = hook(tuple(in_grads))
                    if r is not None:
                        in_grads = list(r)
            nexts = node.next_functions
            if in_grads[0] is None if len(in_grads) == 1 else all(g is None for g in in_grads):
                outs: tuple[Tensor | None, ...] = (None,) * len(nexts)
            else:
                try:
                    outs = (
                        node.apply(in_grads)
                        if PROFILE_HOOK is None
                        else PROFILE_HOOK(node, in_grads)
                    )
                except Exception:
                    anomaly.warn_forward_trace(node)
                    raise
            if len(outs) != len(nexts):
                raise RuntimeError(
                    f"function {node.name()} returned an incorrect number of "
                    f"gradients (expected {len(nexts)}, got {len(outs)})"
                )
            if node._hooks:
                for hook in list(node._hooks.values()):
                    r = hook(tuple(outs), tuple(in_grads))
                    if r is not None:
                        outs = tuple(r)
            if release:
                node.release()  # as PyTorch does, once the node and its hooks ran
            meta = node._meta
            made_ready = None
            i = -1
            for (nxt, nr), g in zip(nexts, outs):
                i += 1
                if nxt is None:
                    continue
                buf = None
                if g is not None and (receives is None or nxt in receives):
                    if meta is not None:  # `_reduce_to_input`, inlined
                        shape = meta[2 * i]
                        if shape is not None and (
                            g._shape != shape or g._dtype is not meta[2 * i + 1]
                        ):
                            g = _reduce_to_input(node, i, g)
                    if check_nan and _has_nan(g):
                        anomaly.warn_forward_trace(node)
                        raise RuntimeError(
                            f"Function '{node.name()}' returned nan values in its {i}th output."
                        )
                    buf = buffers.get(nxt)
                    if buf is None:
                        buf = buffers[nxt] = [None] * nxt.num_outputs
                    prev = buf[nr]
                    buf[nr] = g if prev is None else prev + g
                left = deps[nxt] - 1
                deps[nxt] = left
                if left == 0:
                    if buf is None and nxt not in buffers:
                        buffers[nxt] = [None] * nxt.num_outputs
                    if made_ready is None:
                        made_ready = nxt
                    else:
                        push(ready, (-nxt._seq, id(nxt), nxt))
            if made_ready is not None:
                if ready:  # others wait: the newest runs first
                    push(ready, (-made_ready._seq, id(made_ready), made_ready))
                else:  # a chain: nothing to order
                    follow = made_ready
            # the gradients now live in `buffers` only (`_accumulate_owned` counts on it)
            outs = in_grads = g = prev = buf = None

    return captured


def _tensor_prehooks(node: Node, grads: list[Tensor | None]) -> list[Tensor | None]:
    """Hooks registered with `Tensor.register_hook` on non-leaf tensors, then retain_grad."""
    meta = node._metadata
    if meta is None:
        return grads
    hooks = meta.get("tensor_hooks")
    if hooks:
        for nr, table in hooks.items():
            for fn in list(table.values()):
                if grads[nr] is None:
                    continue
                r = fn(grads[nr])
                if r is not None:
                    grads[nr] = r
    retain = meta.get("retain_grad")
    if retain:
        for nr, ref in retain.items():
            t = ref()
            g = grads[nr]
            if t is None or g is None:
                continue
            if t._grad is None:
                t._grad = g.detach().clone() if not g._requires_grad else g
            else:
                t._grad = t._grad + g
    return grads


def _refs(box: list) -> int:
    """References to `box[0]`, counted the same way for the calibration below and for a
    gradient handed over in a box (`_accumulate_owned`)."""
    g = box[0]
    return sys.getrefcount(g)


_OWNED_REFS = _refs([object()])  # an object nothing but its box refers to


def _accumulate_owned(leaf: Tensor, box: list, create_graph: bool) -> None:
    """`_accumulate(leaf, box[0])`, where the engine holds the gradient only in `box`.

    A leaf without `.grad` keeps the gradient's memory itself, instead of a copy, when
    nothing else can reach it: no other reference to the tensor (another leaf's pending
    gradient, the user's `grad_output`, a hook that kept it, `autograd.grad`'s captured
    results) nor to its memory (another view, a NumPy view), stored in the leaf's own
    layout. PyTorch's AccumulateGrad steals such a buffer by the same reference count. A
    gradient that is a view (the transpose that gives a linear layer's weight its
    gradient in the weight's layout, see `ops.linalg.product_like`) qualifies when its base
    is held by nothing else; `.grad` is then a plain tensor on that memory."""
    g = box[0]
    base = g._base
    if (
        leaf._grad is None
        and not create_graph
        and not leaf._hooks
        and g.__class__ is Tensor
        and not g._requires_grad
        and g._offset == 0
        and g._dtype is leaf._dtype
        and g._shape == leaf._shape
        and g._strides == leaf._strides
        and "_post_accumulate_hooks" not in leaf.__dict__
        and (base is None or base._base is None and base.__class__ is Tensor)
    ):
        del g
        st = box[0]._storage
        holders = 1 if base is None else 2  # tensors known to hold `st`
        if (
            _refs(box) <= _OWNED_REFS
            and (base is None or sys.getrefcount(base) <= 3)
            and sys.getrefcount(st) <= holders + 2
            and (st._buffer is None or sys.getrefcount(st._buffer) <= 2)
        ):
            g = box.pop()
            leaf._grad = g if base is None else Tensor._make(st, 0, g._shape, g._strides, g._dtype)
            return
    _accumulate(leaf, box.pop(), create_graph)


def _leaf_hooks(leaf: Tensor, g: Tensor) -> Tensor:
    """`g` through the hooks registered on the leaf with `Tensor.register_hook`."""
    for fn in list(leaf._hooks.values()):
        r = fn(g)
        if r is not None:
            g = r
    return g


def _accumulate(leaf: Tensor, g: Tensor, create_graph: bool) -> None:
    """Add `g` (already through the leaf's own hooks, `_leaf_hooks`) into `leaf.grad`."""
    traced = getattr(g, "_ctx", None) is not None  # backward() inside a compiled step
    if (
        _CUDA[0] is not None
        and leaf._ptr is None
        and g._ptr is not None
        and leaf._storage is not None
        and not traced
    ):
        g = g.cuda()  # a rule's host-made gradient for a CUDA leaf
    if leaf._grad is None:
        leaf._grad = g if create_graph or traced else g.detach().clone()
    elif create_graph or traced:
        leaf._grad = leaf._grad + g
    else:
        with no_grad():
            if leaf._grad._shape != g._shape:
                raise RuntimeError(
                    f"the gradient of shape {list(g._shape)} does not match "
                    f"the existing .grad of shape {list(leaf._grad._shape)}"
                )
            leaf._grad.add_(g)
    post = leaf.__dict__.get("_post_accumulate_hooks")
    if post:
        for fn in list(post.values()):
            fn(leaf)


def as_list(x: Any, name: str) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return list(x)
    raise TypeError(f"{name}: expected a Tensor or a sequence of Tensors, got {type(x).__name__}")
