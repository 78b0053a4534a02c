"""Fused derivative rules: an elementwise op's rule as one kernel.

The rule of `tanh` is `g * conj(1 - y * y)`: run as written, three kernels, three
allocations and about ten Python calls, where PyTorch runs one `tanh_backward` kernel.
When a backward (without `create_graph`) runs a node whose tensors (the incoming gradient,
the saved inputs and output) all have one shape, the rule is first evaluated once on
symbolic values: each `ctx.F` call that is an elementwise op (`mul`, `sub`, `cos`, `where`,
comparisons, ...) adds its nodes, with the promotion casts the eager op would add
(`eager.elementwise.expression`), to one scalar expression, and Python numbers become
scalar operands. If the rule gives one gradient computed that way, the expression becomes
one eager kernel (`eager.elementwise.make_plan`) and every later backward of the same key
(op, attributes, numbers, which inputs need a gradient, the tensors' dtypes, shapes and
strides) is one launch. Anything else (a call that is not such an op, a complex value, a
rule that raises, two gradients) marks the key as not fusable and the rule runs as
written; the choice is made once per key, so a key always gives the same bits.
`LLGRAD_FUSED_RULES=0` turns fusion off.

Values are the ones the unfused rule gives up to the last bit: each node rounds to its
dtype as the separate kernels did, but products and sums may contract to fused
multiply-adds in one kernel (as in every kernel llgrad compiles).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .._keys import attrs_key
from ..eager import elementwise as ew
from ..ir import dtypes as dt
from ..ir import registry
from ..schedule.elementwise import Expr, ExprNode
from ..tensor import Tensor
from .node import OpNode, RuleContext

_UNARY = frozenset(
    {
        "neg",
        "exp",
        "expm1",
        "log",
        "log1p",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tan",
        "tanh",
        "sigmoid",
        "erf",
        "erfc",
        "abs",
        "sign",
        "reciprocal",
        "square",
        "relu",
        "silu",
        "logical_not",
    }
)
_BINARY = frozenset(
    {
        "mul",
        "div",
        "add",
        "sub",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "logical_and",
        "logical_or",
        "maximum",
        "minimum",
    }
)
_NUMBERS = (bool, int, float)
LIMIT = 4096  # keys remembered (both kinds); then the table starts over
ENABLED = os.environ.get("LLGRAD_FUSED_RULES", "1") != "0"

_NOT_FUSABLE = object()
_keys: dict[tuple, Any] = {}
_unfusable: set[tuple] = set()  # keys without layouts whose rule does not fuse


def _clear() -> None:
    _keys.clear()
    _unfusable.clear()


dt.on_default_dtype_change(_clear)  # a number's dtype follows it


class _NotFusable(Exception):
    pass


class _Value:
    """A symbolic elementwise value: `ref` ("t", k) tensor operand k, ("s", k) number k,
    ("n", k) node k of the expression being built."""

    __slots__ = ("ref", "_dtype", "_shape", "_builder")

    def __init__(
        self, ref: tuple[str, int], dtype: Any, shape: tuple[int, ...], builder: "_Builder"
    ):
        self.ref, self._dtype, self._shape, self._builder = ref, dtype, shape, builder

    def to(self, dtype: Any) -> "_Value":
        """`Tensor.to(dtype)`: a cast node (none when the dtype is already that)."""
        if not isinstance(dtype, dt.DType):
            raise _NotFusable("to")
        return self if dtype is self._dtype else self._builder.cast(self, dtype)

    # what rules read of a tensor besides its values
    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: self._shape)
    ndim = property(lambda self: len(self._shape))


class _Builder:
    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.numbers: list[tuple[Any, Any]] = []  # (value, dtype it is packed as)
        self.nodes: list[tuple[str, tuple, tuple]] = []

    def call(self, op: str, operands: tuple[Any, ...]) -> _Value:
        if not any(isinstance(o, _Value) for o in operands):
            raise _NotFusable(op)
        described = []
        for o in operands:
            if isinstance(o, _Value):
                if o.dtype.is_complex:
                    raise _NotFusable("complex")
                described.append(ew.Operand(o.dtype, self.shape))
            elif o.__class__ in _NUMBERS:
                described.append(o)
            else:
                raise _NotFusable(type(o).__name__)
        if op == "sub" and any(
            isinstance(o, bool) or isinstance(o, _Value) and o.dtype is dt.bool_ for o in operands
        ):
            raise _NotFusable("bool subtraction")  # the eager op raises
        computed = ew.compute_dtype(registry.get(op), described)
        stored = tuple(o.dtype if isinstance(o, _Value) else c for o, c in zip(operands, computed))
        sub, result = ew.expression(op, stored, tuple(computed), ())
        local: list[tuple[str, int]] = []
        for o, c in zip(operands, computed):
            if isinstance(o, _Value):
                local.append(o.ref)
            else:
                self.numbers.append((o, c))
                local.append(("s", len(self.numbers) - 1))
        for node in sub.nodes:
            self.nodes.append((node.op, tuple(local[a] for a in node.args), node.attrs))
            local.append(("n", len(self.nodes) - 1))
        return _Value(local[sub.outputs[0]], result, self.shape, self)

    def cast(self, x: _Value, dtype: Any) -> _Value:
        self.nodes.append(("cast", (x.ref,), (("dtype", dtype),)))
        return _Value(("n", len(self.nodes) - 1), dtype, self.shape, self)


class _Functions:
    """`ctx.F` over symbolic values: the elementwise functions, nothing else."""

    def __init__(self, b: _Builder):
        self._b = b

    def __getattr__(self, name: str) -> Callable[..., Any]:
        b = self._b
        if name in _UNARY:
            return lambda x: b.call(name, (x,))
        if name in _BINARY:
            return lambda x, y: b.call(name, (x, y))
        if name == "rsub":
            return lambda x, y: b.call("sub", (y, x))
        if name == "where":
            return lambda c, x, y: b.call("where", (c, x, y))
        if name == "conj":
            return _conj
        raise _NotFusable(name)


def _conj(x: Any) -> Any:
    if isinstance(x, _Value) and not x.dtype.is_complex or x.__class__ in _NUMBERS:
        return x  # real: unchanged, as F.conj returns it
    raise _NotFusable("conj")


def _build(
    node: OpNode, g: Tensor, inputs: tuple[Any, ...], output: Tensor | None, tensors: list[Tensor]
) -> Any:
    """(launch, gradient slot) for the node's key, or _NOT_FUSABLE."""
    b = _Builder(g._shape)
    k = iter(range(len(tensors)))
    gv = _Value(("t", next(k)), g._dtype, g._shape, b)
    xs = tuple(
        _Value(("t", next(k)), x._dtype, x._shape, b) if isinstance(x, Tensor) else x
        for x in inputs
    )
    ov = _Value(("t", next(k)), output._dtype, g._shape, b) if output is not None else None
    ctx = RuleContext(xs, ov, node.needs_input_grad, node.input_meta, node.input_strides)
    ctx.F = _Functions(b)
    try:
        r = registry.get(node.op).vjp(ctx, gv, **node.attrs)
    except Exception:  # noqa: BLE001 - not fusable; the rule runs as written
        return _NOT_FUSABLE
    r = r if isinstance(r, tuple) else (r,)
    edges = node.next_functions
    if len(r) != len(edges):
        return _NOT_FUSABLE
    slots = [i for i, v in enumerate(r) if v is not None and edges[i][0] is not None]
    if len(slots) != 1 or not isinstance(r[slots[0]], _Value):
        return _NOT_FUSABLE
    if r[slots[0]] is gv:
        return None, slots[0], None  # the gradient passes through (add, sub of a number)
    if r[slots[0]].ref[0] != "n":
        return _NOT_FUSABLE
    n_t, n_in = len(tensors), len(tensors) + len(b.numbers)

    def index(ref: tuple[str, int]) -> int:
        kind, i = ref
        return i if kind == "t" else n_t + i if kind == "s" else n_in + i

    result = r[slots[0]]
    expr = Expr(
        tuple(t._dtype for t in tensors) + tuple(d for _, d in b.numbers),
        tuple(ExprNode(op, tuple(index(a) for a in args), attrs) for op, args, attrs in b.nodes),
        (index(result.ref),),
    )
    numbers = [v for v, _ in b.numbers]
    operands = [*tensors, *numbers]
    name = f"{node.op}_backward"
    try:
        plan = ew.make_plan(
            expr,
            g._shape,
            result.dtype,
            None,
            operands,
            [t._dtype for t in tensors] + [d for _, d in b.numbers],
        )
        direct = ew.direct_launch(name, plan, operands, bind_numbers=True)
    except Exception:  # noqa: BLE001 - e.g. a dtype the kernels lack
        return _NOT_FUSABLE

    def launch(*ts: Tensor) -> Tensor:
        return ew.launch_plan(name, plan, [*ts, *numbers])

    # (the general launch, the gradient's slot, and the direct launch, which takes the
    # tensors only (the numbers are its constants) and declines while kernels are recorded)
    return launch, slots[0], direct


def apply(node: OpNode, g: Tensor) -> tuple[Tensor | None, ...] | None:
    """The node's gradients from its fused rule, or None (the rule runs as written)."""
    if not ENABLED:
        return None
    plan = node._plan
    if plan is None:
        return _apply(node, g, node.needs_input_grad, None)
    # a direct call's node (`apply.direct_recorder`): the plan remembers what the full
    # lookup decided per (needs, gradient layout, numbers), with the saved tensors' layouts
    needs = plan.needs or node.needs_input_grad
    key = (needs, g._lkey, node._scalars)
    known = plan.fused.get(key)
    if known is None:
        return _apply(node, g, needs, (plan.fused, key))
    entry, lkeys = known
    if entry is _NOT_FUSABLE:
        return None
    tensors = [g]
    if lkeys:
        k = 0
        saved = node._saved
        for i, s in enumerate(saved):  # `node.inputs` and `node.output`: version checks
            if s is not None:
                t = s.values(node, node.name(), 0 if s.is_output else i)
                if k == len(lkeys) or t._lkey != lkeys[k]:
                    return _apply(node, g, needs, None)  # (its `.data` was set)
                tensors.append(t)
                k += 1
        if k != len(lkeys):
            return _apply(node, g, needs, None)
    return _gradients(entry, g, tensors, len(needs))


def _gradients(entry: Any, g: Tensor, tensors: list[Tensor], n: int) -> tuple[Tensor | None, ...]:
    """The node's `n` gradients from `entry` (see `_build`) on `tensors` (the incoming
    gradient, then the saved tensors)."""
    launch, slot, direct = entry
    out = direct(*tensors) if direct is not None else None
    if out is None:
        out = launch(*tensors) if launch is not None else g
    if n == 1:
        return (out,)
    grads: list[Tensor | None] = [None] * n
    grads[slot] = out
    return tuple(grads)


def _apply(
    node: OpNode, g: Tensor, needs: tuple[bool, ...], memo: tuple[dict, Any] | None
) -> tuple[Tensor | None, ...] | None:
    """`apply` by the full key; with `memo` (a plan's table and key), what it decided is
    filed there too."""
    saved = node._saved
    scalars = node._scalars
    attrs = node.attrs
    try:  # what decides whether the rule fuses (not the layouts: those pick a plan)
        shape_key = (
            node.op,
            attrs_key(attrs) if attrs else (),
            needs,
            g._lkey,
            node._meta,
            tuple(scalars) if scalars else None,
        )
        if shape_key in _unfusable:
            return _decided(memo, _NOT_FUSABLE, ())
    except TypeError:  # an unhashable attribute or number
        return None
    shape = g._shape
    tensors = [g]
    numbers: list[Any] = []
    inputs: list[Any] = []
    name = None
    for i in range(len(saved) - 1):  # `node.inputs`, with its version checks
        s = saved[i]
        if s is not None:
            if name is None:
                name = node.name()
            x = s.unpack(node, name, i)
            if x.__class__ is not Tensor or x._shape != shape:
                return _decided(memo, _NOT_FUSABLE, ())
            tensors.append(x)
        else:
            x = None if scalars is None else scalars[i]
            if x is not None and x.__class__ not in _NUMBERS:
                return None
            numbers.append(x)
        inputs.append(x)
    s = saved[-1]
    output = None
    if s is not None:
        output = s.unpack(node, node.name(), 0)
        if output._shape != shape:
            return _decided(memo, _NOT_FUSABLE, ())
        tensors.append(output)
    key = (shape_key, tuple([t._lkey for t in tensors]), output is not None)
    entry = _keys.get(key)
    if entry is None:
        if len(_keys) >= LIMIT:
            _keys.clear()
            _unfusable.clear()
        entry = _keys[key] = _build(node, g, tuple(inputs), output, tensors)
        if entry is _NOT_FUSABLE:
            _unfusable.add(shape_key)
    if _decided(memo, entry, tuple([t._lkey for t in tensors[1:]])) is None:
        return None
    return _gradients(entry, g, tensors, len(needs))


def _decided(memo: tuple[dict, Any] | None, entry: Any, lkeys: tuple) -> Any:
    """File `entry` in `memo` (when given and not full); None when it is not fusable."""
    if memo is not None and len(memo[0]) < 64:
        memo[0][memo[1]] = (entry, lkeys)
    return None if entry is _NOT_FUSABLE else entry
