"""The reference interpreter: run a graph on NumPy arrays with each op's `reference`.

This is the oracle that code generation is tested against, so it stays simple: nodes run
in graph order (no recursion), each op's NumPy reference computes a value, and the value
is cast to the node's dtype and checked against the node's shape, so a misbehaving
reference is caught here rather than blamed on the compiler.

Values are held in NumPy's dtype for each llgrad dtype, except bfloat16, which NumPy
lacks: bfloat16 values are float32 arrays whose values are exactly representable in
bfloat16 (rounded to nearest even, like PyTorch's conversion).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import registry
from .dtypes import DType, bfloat16, float32
from .graph import Graph, Node
from .printer import format_type

__all__ = [
    "interpret",
    "to_bfloat16_bits",
    "from_bfloat16_bits",
    "round_to_bfloat16",
    "numpy_dtype",
]


def to_bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) nearest to `x`, ties to even; NaN stays NaN.

    `x` is converted to float32 first, as PyTorch does when it converts to bfloat16.
    """
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    bits = f.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
    out = np.where(np.isnan(f), quiet_nan, rounded)
    return out.astype(np.uint16)


def from_bfloat16_bits(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (exact: bfloat16 is float32's top half)."""
    b = np.asarray(bits)
    if b.dtype != np.uint16:
        raise TypeError(f"from_bfloat16_bits expects uint16 bit patterns, got {b.dtype}")
    return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """`x` as float32 holding the nearest bfloat16 values."""
    return from_bfloat16_bits(to_bfloat16_bits(x))


def numpy_dtype(d: DType) -> np.dtype:
    """The NumPy dtype the interpreter holds values of dtype `d` in."""
    return float32.np if d is bfloat16 else d.np


def interpret(g: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run `g` on `inputs` (one array per parameter, of its dtype and shape).

    Returns one new array per output. Intermediate values are freed after their last use,
    so long graphs do not hold every value at once.
    """
    env: dict[int, np.ndarray] = {}
    for p, x in zip(g.params, _check_inputs(g, inputs)):
        env[id(p)] = x
    remaining = _use_counts(g)
    params = {id(p) for p in g.params}
    for node in g.nodes:
        if id(node) in params:
            continue
        args = [_lookup(env, x, node) for x in node.inputs]
        env[id(node)] = run_node(node, args)
        for x in node.inputs:
            remaining[id(x)] -= 1
            if remaining[id(x)] == 0:
                env.pop(id(x), None)
    return [np.array(_lookup(env, o, None), copy=True) for o in g.outputs]


def run_node(node: Node, args: list[np.ndarray]) -> np.ndarray:
    """One node: its reference on `args`, cast to the node's dtype, shape checked."""
    opdef = registry.get(node.op)
    if opdef.reference is None:
        raise TypeError(
            f"interpret: op {node.op!r} has no NumPy reference to run "
            f"(node {node!r}, loc {node.loc})"
        )
    args = [_as_value(a, x.dtype) for a, x in zip(args, node.inputs)]
    try:
        result = opdef.reference(*args, **dict(node.attrs))
    except Exception as e:
        e.add_note(
            f"while interpreting {node.op} on "
            f"({', '.join(format_type(x.type) for x in node.inputs)}) -> "
            f"{format_type(node.type)}" + (f" at {node.loc}" if node.loc else "")
        )
        raise
    return _to_node_type(node, np.asarray(result))


def _check_inputs(g: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    if len(inputs) != len(g.params):
        expected = ", ".join(f"%{_pname(p)}: {format_type(p.type)}" for p in g.params)
        raise TypeError(
            f"interpret: graph @{g.name} takes {len(g.params)} inputs "
            f"({expected}), got {len(inputs)}"
        )
    out = []
    for p, x in zip(g.params, inputs):
        a = np.asarray(x)
        want = numpy_dtype(p.dtype)
        if a.dtype != want:
            raise TypeError(
                f"interpret: input %{_pname(p)} of graph @{g.name} must be a "
                f"{want} array (for {format_type(p.type)}), got {a.dtype}"
            )
        if a.shape != p.shape:
            raise ValueError(
                f"interpret: input %{_pname(p)} of graph @{g.name} must have "
                f"shape {list(p.shape)} (for {format_type(p.type)}), got "
                f"{list(a.shape)}"
            )
        out.append(round_to_bfloat16(a) if p.dtype is bfloat16 else a)
    return out


def _use_counts(g: Graph) -> dict[int, int]:
    """How many times each value is read: by nodes, plus once per output (never freed)."""
    counts: dict[int, int] = {id(n): 0 for n in g.nodes}
    for n in g.nodes:
        for x in n.inputs:
            counts[id(x)] = counts.get(id(x), 0) + 1
    for o in g.outputs:
        counts[id(o)] = counts.get(id(o), 0) + len(g.nodes) + 1  # outputs stay alive
    return counts


def _lookup(env: dict[int, np.ndarray], x: Node, user: Node | None) -> np.ndarray:
    try:
        return env[id(x)]
    except KeyError:
        who = f"{user.op}" if user is not None else "the graph's outputs"
        raise ValueError(
            f"interpret: {who} reads {x!r}, which is not computed before it "
            f"(is the graph verified?)"
        ) from None


def _as_value(a: np.ndarray, d: DType) -> np.ndarray:
    """An input in the dtype its op computes on (bfloat16 as float32)."""
    want = numpy_dtype(d)
    return a if a.dtype == want else a.astype(want)


def _to_node_type(node: Node, result: np.ndarray) -> np.ndarray:
    d = node.dtype
    if result.dtype.kind == "c" and not d.is_complex:
        raise TypeError(
            f"interpret: the reference of {node.op} returned complex values "
            f"({result.dtype}) for a {d.name} node {format_type(node.type)}"
        )
    if result.dtype.kind == "f" and d.kind in "biu":
        raise TypeError(
            f"interpret: the reference of {node.op} returned floating values "
            f"({result.dtype}) for a {d.name} node {format_type(node.type)}"
        )
    if result.dtype.kind not in "biufc":
        raise TypeError(
            f"interpret: the reference of {node.op} returned a {result.dtype} "
            f"array for {format_type(node.type)}"
        )
    if result.shape != node.shape:
        raise ValueError(
            f"interpret: the reference of {node.op} returned shape "
            f"{list(result.shape)}, but the node's type is "
            f"{format_type(node.type)} (inputs "
            f"{', '.join(format_type(x.type) for x in node.inputs)})"
        )
    with np.errstate(all="ignore"):
        if d is bfloat16:
            return round_to_bfloat16(result.astype(np.float32))
        return result.astype(d.np, copy=False)


def _pname(p: Node) -> str:
    for k, v in p.attrs:
        if k == "name":
            return str(v)
    return "?"
