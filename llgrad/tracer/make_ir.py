"""`lg.make_ir(f)(*args)`: the traced IR graph of `f` for these arguments (like make_jaxpr)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ..autograd.grad_mode import no_grad
from ..ir.graph import Graph
from ..ir.types import TensorType
from ..tensor import Tensor
from .context import TraceContext
from .tensor import TracerTensor


def _flatten(x: Any, out: list[Tensor]) -> Any:
    """Replace tensors in nested tuples/lists/dicts by their index in `out`."""
    if isinstance(x, Tensor):
        out.append(x)
        return _Leaf(len(out) - 1)
    if isinstance(x, (list, tuple)):
        items = [_flatten(v, out) for v in x]
        return type(x)(items) if not hasattr(x, "_fields") else type(x)(*items)
    if isinstance(x, dict):
        return {k: _flatten(v, out) for k, v in x.items()}
    return x


def _unflatten(x: Any, leaves: list[Any]) -> Any:
    if isinstance(x, _Leaf):
        return leaves[x.index]
    if isinstance(x, (list, tuple)):
        items = [_unflatten(v, leaves) for v in x]
        return type(x)(items) if not hasattr(x, "_fields") else type(x)(*items)
    if isinstance(x, dict):
        return {k: _unflatten(v, leaves) for k, v in x.items()}
    return x


class _Leaf:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _param_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return names


def trace(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
          name: str | None = None) -> tuple[Graph, TraceContext, Any]:
    """Trace `fn(*args, **kwargs)`; returns (graph, context, output structure)."""
    leaves: list[Tensor] = []
    structure = _flatten((args, kwargs), leaves)
    ctx = TraceContext(name or getattr(fn, "__name__", "fn").strip("<>") or "fn")
    arg_names = _param_names(fn, len(args))
    tracers = []
    for i, t in enumerate(leaves):
        base = arg_names[i] if i < len(arg_names) and len(leaves) == len(args) else f"a{i}"
        tracers.append(ctx.param(TensorType(t._dtype, t._shape), base))
    with ctx, no_grad():
        targs, tkwargs = _unflatten(structure, tracers)
        result = fn(*targs, **tkwargs)
    outs: list[Tensor] = []
    out_structure = _flatten(result, outs)
    nodes = [ctx.node_of(o) for o in outs]
    return ctx.graph(nodes), ctx, out_structure


def make_ir(fn: Callable[..., Any]) -> Callable[..., Graph]:
    """`make_ir(f)(*args)` returns the IR graph that tracing `f` on these arguments gives."""
    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Graph:
        graph, _, _ = trace(fn, args, kwargs)
        return graph
    return traced
