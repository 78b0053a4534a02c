"""Running an IR graph on the eager kernels, which are generic over sizes.

`lg.compile(fn, dynamic=True)` uses this instead of whole-graph code generation: every
kernel it launches takes its sizes and strides at run time and is compiled once per op,
dtypes, rank and stride pattern, so calls with new sizes compile no new native code (the
Python function is traced again for the new shapes, which takes milliseconds). The price is
that nodes are not fused.

Nodes dispatch by group to the same eager functions plain tensor code runs on (without
autograd: the compiled function's autodiff already produced the backward graph).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..functions.creation import from_values
from ..functions.shape import _cat_forward, _pad_forward
from ..ir.graph import Graph, Node
from ..ir.registry import ELEMENTWISE, Group
from ..runtime.launch import record_kernels
from ..tensor import Tensor
from . import elementwise as ew
from . import indexing, linalg, reduce, views


def _const(node: Node, inputs: list[Tensor]) -> Tensor:
    value, dtype, shape = node.attr("value"), node.attr("dtype"), node.attr("shape")
    arr = (
        np.broadcast_to(np.asarray(value), shape)
        if not isinstance(value, tuple)
        else np.asarray(value).reshape(shape)
    )
    return from_values(np.asarray(arr), dtype)


def _generated(node: Node, inputs: list[Tensor]) -> Tensor:
    """iota and random draws: elementwise kernels that fill a new tensor."""
    out = Tensor._empty(node.type.shape, node.type.dtype)
    return ew.run(node.op, inputs, node.attr_dict, out=out)


def _movement(node: Node, inputs: list[Tensor]) -> Tensor:
    x, a = inputs[0], node.attr_dict
    if node.op == "reshape":
        return views.reshape(x, a["shape"])
    if node.op == "permute":
        return views.permute(x, a["perm"])
    if node.op == "expand":
        return views.expand(x, a["shape"])
    if node.op == "slice":
        return views.slice_dims(x, a["starts"], a["stops"], a["steps"])
    if node.op == "flip":
        return views.flip_view(x, a["axes"])
    if node.op == "pad":
        return _pad_forward(node.op, (x,), a)
    if node.op == "cat":
        return _cat_forward(node.op, tuple(inputs), a)
    raise TypeError(f"graph runner: no eager lowering for movement op {node.op!r}")


def _index(node: Node, inputs: list[Tensor]) -> Tensor:
    fn = {
        "gather": indexing.gather,
        "scatter_add": indexing.scatter_add,
        "index_put": indexing.index_put,
    }.get(node.op)
    if fn is None:
        raise TypeError(f"graph runner: no eager lowering for {node.op!r}")
    return fn(*inputs)


def _linalg(node: Node, inputs: list[Tensor]) -> Tensor:
    return linalg.matmul(*inputs)


def _lower(node: Node) -> Callable[[Node, list[Tensor]], Tensor]:
    group = node.group
    if group in ELEMENTWISE:
        return lambda n, xs: ew.run(n.op, xs, n.attr_dict)
    if group is Group.CONST:
        return _const
    if group is Group.RANDOM:
        return _generated
    if group is Group.REDUCE:
        return lambda n, xs: reduce.run(n.op, xs[0], n.attr("axes"), n.attr("keepdim"))
    if group is Group.MOVEMENT:
        return _movement
    if group is Group.INDEX:
        return _index
    if group is Group.LINALG:
        return _linalg
    raise TypeError(f"graph runner: {node.op} ({group.value}) must be decomposed first")


class GraphRunner:
    """Callable like `compiler.executable.CompiledGraph`: `runner(*tensors) -> list[Tensor]`."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.program = [(n, _lower(n)) for n in graph.nodes if n.group is not Group.PARAM]
        self._last_kernels: list[Any] = []

    @property
    def kernels(self) -> list[str]:
        return [f"{n.op} {n.type} (shape-generic eager kernel)" for n, _ in self.program]

    @property
    def llvm_ir(self) -> str:
        return "\n".join(k.llvm_ir for k in self._last_kernels)

    def asm(self) -> str:
        return "\n".join(k.asm() for k in self._last_kernels)

    @property
    def stats(self) -> dict[str, Any]:
        return {
            "nodes": len(self.program),
            "kernels launched by the last call": len(self._last_kernels),
            "shape-generic": True,
        }

    def __call__(self, *args: Tensor) -> list[Tensor]:
        g = self.graph
        if len(args) != len(g.params):
            raise TypeError(f"graph @{g.name} takes {len(g.params)} inputs, got {len(args)}")
        values: dict[Node, Tensor] = {}
        for p, x in zip(g.params, args):
            if (
                not isinstance(x, Tensor)
                or x._dtype is not p.type.dtype
                or x.ndim != len(p.type.shape)
            ):
                raise TypeError(
                    f"graph @{g.name}: input %{p.attr('name')} must be a "
                    f"{p.type.dtype.name} tensor of rank {len(p.type.shape)}"
                )
            values[p] = x
        with record_kernels() as launched:
            for node, run in self.program:
                values[node] = run(node, [values[i] for i in node.inputs])
            outs = []
            for o in g.outputs:
                v = values[o]
                # outputs never alias inputs or each other (as compiled graphs guarantee)
                if o.group in (Group.PARAM, Group.MOVEMENT) or any(v is w for w in outs):
                    v = views.clone(v)
                outs.append(v)
        self._last_kernels = list(launched)
        return outs


def run_graph(graph: Graph, inputs: Sequence[Tensor]) -> list[Tensor]:
    return GraphRunner(graph)(*inputs)
