"""IR graph -> ONNX model. Imported only by `llgrad.onnx.export` (it imports `onnx`).

Steps: trace the model (`tracer.make_ir.trace`), expand the composite ops that have no
direct ONNX counterpart into their registry decompositions (keeping the user's source
line on every node), work out which shape attributes follow the dynamic axes (a second
trace at larger sizes), fold subgraphs that read only constants, then translate node by
node with `onnx.helper`, drop what the outputs do not read, and check the model.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import functions as F
from .. import pytree
from ..dispatch.grad_mode import no_grad
from ..ir import dtypes as dt
from ..ir.graph import Graph, Node, make_node
from ..ir.interpret import run_node, to_bfloat16_bits
from ..ir.registry import Group
from ..nn import Module
from ..tensor import Tensor
from ..tracer import context as tctx
from ..tracer.make_ir import trace
from ..tracer.tensor import GraphBreak, TracerTensor
from . import (
    OnnxExporterError,
    TrainingMode,
    UnsupportedOperatorError,
    producer_name,
    producer_version,
)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
FOLD_LIMIT = 1 << 16  # a folded constant larger than this (and than its inputs) stays an op

_ONNX_TYPES = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "int8": TensorProto.INT8,
    "int16": TensorProto.INT16,
    "int32": TensorProto.INT32,
    "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
    "complex64": TensorProto.COMPLEX64,
    "complex128": TensorProto.COMPLEX128,
}


def onnx_type(d: dt.DType) -> int:
    return _ONNX_TYPES[d.name]


# ----------------------------------------------------------------------------------------
# tracing
# ----------------------------------------------------------------------------------------


class Traced:
    """A traced call: the graph (composites expanded), its inputs, weights and outputs."""

    def __init__(
        self,
        graph: Graph,
        n_inputs: int,
        captured: list[Tensor],
        n_outputs: int,
        out_structure: Any,
    ):
        self.graph = graph
        self.n_inputs = n_inputs
        self.captured = captured  # concrete tensors, for params n_inputs...
        self.n_outputs = n_outputs
        self.out_structure = out_structure


def _trace(model: Any, args: tuple, kwargs: dict, opset: int) -> Traced:
    leaves: list[Tensor] = []
    for v in pytree.flatten((args, kwargs))[0]:
        if isinstance(v, Tensor):
            leaves.append(v)
    name = type(model).__name__ if _is_module(model) else getattr(model, "__name__", "fn")
    try:
        graph, ctx, out_structure = trace(model, args, kwargs, name=name.strip("<>") or "fn")
    except GraphBreak as e:
        raise OnnxExporterError(f"the model cannot be exported as one graph: {e}") from None
    outputs = graph.outputs[: ctx.n_outputs]
    graph = Graph(graph.name, graph.params, outputs)
    graph = _expand_composites(graph, opset)
    return Traced(graph, len(leaves), list(ctx.captured), ctx.n_outputs, out_structure)


def _is_module(model: Any) -> bool:
    return isinstance(model, Module)


def _direct_composite(node: Node, opset: int) -> bool:
    """Composite ops translated as one ONNX op (the rest use their decomposition)."""
    op = node.op
    if op == "layer_norm":
        return opset >= 17
    if op == "norm":
        return node.attr("p") in (1.0, 2.0)
    if op == "addmm":
        return len(node.inputs[1].shape) == 2 and len(node.inputs[2].shape) == 2
    return op in _DIRECT_COMPOSITES


_DIRECT_COMPOSITES = frozenset(
    {"conv2d", "max_pool2d", "softmax", "log_softmax", "mean", "embedding", "cumsum", "logsumexp"}
)


def _expand_composites(g: Graph, opset: int) -> Graph:
    """`g` with every composite that has no direct translation replaced by its
    decomposition (the registry's, run on tracers); nodes keep the user's line."""
    if not any(n.group is Group.COMPOSITE and not _direct_composite(n, opset) for n in g.nodes):
        return g

    ctx = tctx.TraceContext(g.name, constant_creations=True)
    values: dict[Node, TracerTensor] = {}
    for p in g.params:
        values[p] = ctx.param(p.type, p.attr("name"))
    saved = tctx._tls.location
    try:
        with ctx, no_grad():
            for node in g.nodes:
                if node in values:
                    continue
                operands = [values[i] for i in node.inputs]
                if node.group is Group.COMPOSITE and not _direct_composite(node, opset):
                    tctx._tls.location = node.loc
                    ctx.expand_composites = True
                    try:
                        out = node.opdef.decompose(F, *operands, **node.attr_dict)
                        if out._dtype is not node.type.dtype:
                            out = out.to(node.type.dtype)
                    finally:
                        ctx.expand_composites = False
                        tctx._tls.location = saved
                    if ctx.captured:
                        raise UnsupportedOperatorError(
                            node.op, node.loc, "its decomposition is not traceable"
                        )
                else:
                    out = TracerTensor.of(
                        make_node(
                            node.op, tuple(o._node for o in operands), node.attr_dict, node.loc
                        ),
                        ctx,
                    )
                values[node] = out
    finally:
        tctx._tls.location = saved
    return ctx.graph([ctx.node_of(values[o]) for o in g.outputs])


# ----------------------------------------------------------------------------------------
# dynamic axes: what differs between two traces
# ----------------------------------------------------------------------------------------


def _grow(x: Tensor, axes: list[int]) -> Tensor:
    """`x` one element longer along each of `axes` (its first slice repeated)."""
    for a in axes:
        x = F.cat([x, F.narrow(x, a, 0, 1)], a)
    return x


def _dynamic_overrides(
    a: Traced, b: Traced, where: Callable[[Node], str]
) -> tuple[dict[Node, dict[str, tuple]], set[Node]]:
    """Compare two traces of one model at different sizes. Returns the attribute values
    to export instead of the traced ones (per node of `a`) and the nodes whose types
    differ (their values depend on the dynamic sizes: never folded)."""
    ga, gb = a.graph, b.graph
    if len(ga.nodes) != len(gb.nodes) or any(x.op != y.op for x, y in zip(ga.nodes, gb.nodes)):
        raise OnnxExporterError(
            "the traced graph changes with the sizes of the dynamic axes "
            "(Python control flow on a size); export with static shapes"
        )
    index_a = {n: i for i, n in enumerate(ga.nodes)}
    index_b = {n: i for i, n in enumerate(gb.nodes)}
    overrides: dict[Node, dict[str, tuple]] = {}
    dynamic: set[Node] = set()
    for x, y in zip(ga.nodes, gb.nodes):
        if [index_a[i] for i in x.inputs] != [index_b[i] for i in y.inputs]:
            raise OnnxExporterError(
                "the traced graph changes with the sizes of the dynamic "
                "axes; export with static shapes"
            )
        if x.shape != y.shape:
            dynamic.add(x)
        if x.op == "param":
            if x.shape != y.shape and ga.params.index(x) >= a.n_inputs:
                raise OnnxExporterError(
                    f"a tensor captured by the traced function ({where(x)}) has a size that "
                    f"depends on a dynamic axis; it would be exported at its traced size"
                )
            continue
        if x.attrs == y.attrs:
            continue
        fixed = _follow(x, y)
        if fixed is None:
            raise OnnxExporterError(
                f"'{x.op}' at {x.loc or '?'} bakes a size that depends on a dynamic axis "
                f"into the graph ({dict(x.attrs)} vs {dict(y.attrs)} at a larger size); "
                f"the exported model would only run at the traced size"
            )
        overrides[x] = fixed
    return overrides, dynamic


def _follow(x: Node, y: Node) -> dict[str, tuple] | None:
    """Attribute values for node `x` that are right at both traced sizes, or None."""
    ax = dict(x.attrs)
    ay = dict(y.attrs)
    if x.op == "reshape":
        sin_a, sin_b = x.inputs[0].shape, y.inputs[0].shape
        out = list(ax["shape"])
        free = []
        for i, (p, q) in enumerate(zip(ax["shape"], ay["shape"])):
            if p == q:
                continue
            if i < len(sin_a) and sin_a[i] == p and sin_b[i] == q:
                out[i] = 0  # copy the input's size (ONNX Reshape's 0)
            else:
                free.append(i)
        if any(v == 0 for v in ax["shape"]):  # a real 0 would read as "copy"
            return None
        if len(free) > 1 or (free and -1 in out):
            return None
        for i in free:
            out[i] = -1
        return {"shape": tuple(out)}
    if x.op == "expand":
        sa, sb = x.inputs[0].shape, y.inputs[0].shape
        off = len(ax["shape"]) - len(sa)
        out = list(ax["shape"])
        for i, (p, q) in enumerate(zip(ax["shape"], ay["shape"])):
            if p == q:
                continue
            j = i - off
            if j >= 0 and sa[j] == p and sb[j] == q:
                out[i] = 1  # the input carries the size
            else:
                return None
        return {"shape": tuple(out)}
    if x.op == "slice":
        na, nb = x.inputs[0].shape, y.inputs[0].shape
        starts, stops = list(ax["starts"]), list(ax["stops"])
        if ax["steps"] != ay["steps"]:
            return None
        for i in range(len(starts)):
            for vals, key in ((starts, "starts"), (stops, "stops")):
                p, q = ax[key][i], ay[key][i]
                if p == q:
                    continue
                if p - na[i] == q - nb[i]:  # counted from the end
                    c = p - na[i]
                    vals[i] = INT64_MAX if c == 0 else c
                else:
                    return None
        return {"starts": tuple(starts), "stops": tuple(stops), "steps": ax["steps"]}
    return None


# ----------------------------------------------------------------------------------------
# emission
# ----------------------------------------------------------------------------------------


class Emitter:
    """Collects ONNX nodes, initializers and unique names for one graph."""

    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.used: set[str] = set()
        self.counter = 0
        self.loc: str | None = None
        self._consts: dict[Any, str] = {}

    def fresh(self, base: str) -> str:
        while True:
            self.counter += 1
            name = f"/{base}_{self.counter}"
            if name not in self.used:
                self.used.add(name)
                return name

    def reserve(self, name: str) -> str:
        if name in self.used:
            raise ValueError(f"onnx export: the name {name!r} is used twice")
        self.used.add(name)
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        outs = [self.fresh(op_type) for _ in range(n_out)]
        node = helper.make_node(
            op_type,
            inputs,
            outs,
            name=outs[0].lstrip("/") + "_node",
            doc_string=self.loc or "",
            **attrs,
        )
        self.nodes.append(node)
        return outs[0] if n_out == 1 else outs

    def tensor(self, arr: np.ndarray, d: dt.DType, name: str) -> onnx.TensorProto:
        if d is dt.bfloat16:
            bits = to_bfloat16_bits(np.asarray(arr, dtype=np.float32))
            return helper.make_tensor(
                name, TensorProto.BFLOAT16, list(bits.shape), bits.tobytes(), raw=True
            )
        return numpy_helper.from_array(np.array(arr, dtype=d.np, order="C"), name)

    def const(self, arr: Any, d: dt.DType) -> str:
        """A constant of dtype `d`: a Constant node when small, else an initializer."""
        a = np.asarray(arr, dtype=dt.float32.np if d is dt.bfloat16 else d.np)
        key = (d.name, a.shape, a.tobytes()) if a.size <= 64 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        if a.size > 64:
            name = self.fresh("Constant")
            self.initializers.append(self.tensor(a, d, name))
        else:
            name = self.fresh("Constant")
            self.nodes.append(
                helper.make_node(
                    "Constant",
                    [],
                    [name],
                    name=name.lstrip("/"),
                    value=self.tensor(a, d, name + "_value"),
                )
            )
        if key is not None:
            self._consts[key] = name
        return name

    def i64(self, values: Any) -> str:
        return self.const(np.asarray(values, dtype=np.int64).reshape(-1), dt.int64)

    def scalar(self, value: Any, d: dt.DType) -> str:
        return self.const(np.asarray(value), d)

    def reduce(self, op_type: str, x: str, axes: tuple[int, ...] | None, keepdim: bool) -> str:
        """`op_type` over `axes` (None or (): all); axes as an input from the opset
        where the op takes them so (13 for ReduceSum, 18 for the others)."""
        kw: dict[str, Any] = {"keepdims": int(keepdim)}
        inputs = [x]
        if axes:
            if op_type == "ReduceSum" or self.opset >= 18:
                inputs.append(self.i64(list(axes)))
            else:
                kw["axes"] = list(axes)
        return self.op(op_type, inputs, **kw)


Translator = Callable[[Emitter, Node, list[str], "Context"], str]
TRANSLATIONS: dict[str, Translator] = {}


def supported_ops() -> frozenset[str]:
    """IR ops with a translation (composites not listed export by decomposition)."""
    return frozenset(TRANSLATIONS) | {"param", "const", "stop_gradient"}


def translates(*names: str) -> Callable[[Translator], Translator]:
    def deco(fn: Translator) -> Translator:
        for n in names:
            TRANSLATIONS[n] = fn
        return fn

    return deco


class Context:
    """What translators may consult besides their node: attribute overrides for dynamic
    axes and the producers of values (for peepholes such as Gemm's transB)."""

    def __init__(self, overrides: dict[Node, dict[str, tuple]], names: dict[Node, str]):
        self.overrides = overrides
        self.names = names

    def attr(self, node: Node, name: str) -> Any:
        o = self.overrides.get(node)
        if o is not None and name in o:
            return o[name]
        return node.attr(name)


# -- elementwise ---------------------------------------------------------------------------

_UNARY = {
    "abs": "Abs",
    "acos": "Acos",
    "asin": "Asin",
    "atan": "Atan",
    "acosh": "Acosh",
    "asinh": "Asinh",
    "atanh": "Atanh",
    "ceil": "Ceil",
    "cos": "Cos",
    "cosh": "Cosh",
    "erf": "Erf",
    "exp": "Exp",
    "floor": "Floor",
    "log": "Log",
    "neg": "Neg",
    "reciprocal": "Reciprocal",
    "relu": "Relu",
    "round": "Round",
    "sigmoid": "Sigmoid",
    "sign": "Sign",
    "sin": "Sin",
    "sinh": "Sinh",
    "sqrt": "Sqrt",
    "tan": "Tan",
    "tanh": "Tanh",
    "isnan": "IsNaN",
    "logical_not": "Not",
}
_BINARY = {
    "add": "Add",
    "sub": "Sub",
    "mul": "Mul",
    "div": "Div",
    "pow": "Pow",
    "maximum": "Max",
    "minimum": "Min",
    "eq": "Equal",
    "lt": "Less",
    "le": "LessOrEqual",
    "gt": "Greater",
    "ge": "GreaterOrEqual",
    "logical_and": "And",
    "logical_or": "Or",
    "logical_xor": "Xor",
}


def _unary(onnx_op: str) -> Translator:
    return lambda em, n, xs, cx: em.op(onnx_op, xs)


def _binary(onnx_op: str) -> Translator:
    def tr(em: Emitter, n: Node, xs: list[str], cx: Context) -> str:
        if n.inputs[0].dtype is dt.bool_ and onnx_op in ("Add", "Mul", "Max", "Min"):
            return em.op({"Add": "Or", "Max": "Or", "Mul": "And", "Min": "And"}[onnx_op], xs)
        return em.op(onnx_op, xs)

    return tr


for _k, _v in _UNARY.items():
    TRANSLATIONS[_k] = _unary(_v)
for _k, _v in _BINARY.items():
    TRANSLATIONS[_k] = _binary(_v)


def _dtype_in(n: Node) -> dt.DType:
    return n.inputs[0].dtype


@translates("ne")
def _ne(em, n, xs, cx):
    return em.op("Not", [em.op("Equal", xs)])


@translates("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
def _bitwise(em, n, xs, cx):
    kind = n.op.split("_")[1]
    if _dtype_in(n) is dt.bool_:
        return em.op({"and": "And", "or": "Or", "xor": "Xor", "not": "Not"}[kind], xs)
    if em.opset < 18:
        raise UnsupportedOperatorError(n.op, n.loc, "integer bitwise ops need opset >= 18")
    return em.op("Bitwise" + kind.capitalize(), xs)


def _trunc(em: Emitter, x: str, d: dt.DType) -> str:
    neg = em.op("Less", [x, em.scalar(0, d)])
    return em.op("Where", [neg, em.op("Ceil", [x]), em.op("Floor", [x])])


@translates("trunc")
def _trunc_tr(em, n, xs, cx):
    return _trunc(em, xs[0], n.dtype) if n.dtype.is_floating_point else em.op("Identity", xs)


@translates("floor_divide")
def _floor_divide(em, n, xs, cx):
    a, b = xs
    if n.dtype.is_floating_point:
        return em.op("Floor", [em.op("Div", xs)])
    return em.op("Div", [em.op("Sub", [a, em.op("Mod", [a, b], fmod=0)]), b])


@translates("trunc_divide")
def _trunc_divide(em, n, xs, cx):
    q = em.op("Div", xs)
    return _trunc(em, q, n.dtype) if n.dtype.is_floating_point else q


@translates("remainder")
def _remainder(em, n, xs, cx):
    a, b = xs
    if not n.dtype.is_floating_point:
        return em.op("Mod", xs, fmod=0)
    q = em.op("Floor", [em.op("Div", xs)])
    return em.op("Sub", [a, em.op("Mul", [q, b])])


@translates("fmod")
def _fmod(em, n, xs, cx):
    return em.op("Mod", xs, fmod=1)


@translates("rsqrt")
def _rsqrt(em, n, xs, cx):
    return em.op("Reciprocal", [em.op("Sqrt", xs)])


@translates("square")
def _square(em, n, xs, cx):
    return em.op("Mul", [xs[0], xs[0]])


@translates("expm1")
def _expm1(em, n, xs, cx):
    return em.op("Sub", [em.op("Exp", xs), em.scalar(1, n.dtype)])


@translates("log1p")
def _log1p(em, n, xs, cx):
    return em.op("Log", [em.op("Add", [xs[0], em.scalar(1, n.dtype)])])


@translates("log2", "log10")
def _log_base(em, n, xs, cx):
    base = 2.0 if n.op == "log2" else 10.0
    return em.op("Div", [em.op("Log", xs), em.scalar(math.log(base), n.dtype)])


@translates("exp2")
def _exp2(em, n, xs, cx):
    return em.op("Pow", [em.scalar(2, n.dtype), xs[0]])


@translates("erfc")
def _erfc(em, n, xs, cx):
    return em.op("Sub", [em.scalar(1, n.dtype), em.op("Erf", xs)])


@translates("heaviside")
def _heaviside(em, n, xs, cx):
    x, v = xs
    d = n.dtype
    pos = em.op("Where", [em.op("Greater", [x, em.scalar(0, d)]), em.scalar(1, d), em.scalar(0, d)])
    return em.op("Where", [em.op("Equal", [x, em.scalar(0, d)]), v, pos])


@translates("copysign")
def _copysign(em, n, xs, cx):
    a, b = xs
    d = n.dtype
    zero = em.scalar(0, d)
    negzero = em.op(
        "And", [em.op("Equal", [b, zero]), em.op("Less", [em.op("Reciprocal", [b]), zero])]
    )
    neg = em.op("Or", [em.op("Less", [b, zero]), negzero])
    mag = em.op("Abs", [a])
    return em.op("Where", [neg, em.op("Neg", [mag]), mag])


@translates("atan2")
def _atan2(em, n, xs, cx):
    y, x = xs
    d = n.dtype
    zero = em.scalar(0, d)
    pi = em.scalar(math.pi, d)
    base = em.op("Atan", [em.op("Div", [y, x])])
    ynonneg = em.op("GreaterOrEqual", [y, zero])
    shift = em.op("Where", [ynonneg, pi, em.op("Neg", [pi])])
    left = em.op("Add", [base, shift])
    at_zero = em.op("Mul", [em.op("Sign", [y]), em.scalar(math.pi / 2, d)])
    out = em.op("Where", [em.op("Less", [x, zero]), left, base])
    return em.op("Where", [em.op("Equal", [x, zero]), at_zero, out])


@translates("clamp")
def _clamp(em, n, xs, cx):
    lo, hi = n.attr("min"), n.attr("max")
    d = n.dtype
    if d is dt.bool_:
        raise UnsupportedOperatorError("clamp", n.loc, "on bool tensors")
    ins = [
        xs[0],
        em.scalar(lo, d) if lo is not None else "",
        em.scalar(hi, d) if hi is not None else "",
    ]
    while ins and ins[-1] == "":
        ins.pop()
    return em.op("Clip", ins)


@translates("gelu")
def _gelu(em, n, xs, cx):
    x = xs[0]
    d = n.dtype
    approx = n.attr("approximate")
    if em.opset >= 20:
        return em.op("Gelu", [x], approximate=approx)
    if approx == "tanh":
        cube = em.op("Mul", [em.op("Mul", [x, x]), x])
        inner = em.op("Add", [x, em.op("Mul", [cube, em.scalar(0.044715, d)])])
        t = em.op("Tanh", [em.op("Mul", [inner, em.scalar(math.sqrt(2 / math.pi), d)])])
    else:
        t = em.op("Erf", [em.op("Mul", [x, em.scalar(1 / math.sqrt(2), d)])])
    half_x = em.op("Mul", [x, em.scalar(0.5, d)])
    return em.op("Mul", [half_x, em.op("Add", [t, em.scalar(1, d)])])


@translates("silu")
def _silu(em, n, xs, cx):
    return em.op("Mul", [xs[0], em.op("Sigmoid", xs)])


@translates("softplus")
def _softplus(em, n, xs, cx):
    x = xs[0]
    d = n.dtype
    beta, threshold = n.attr("beta"), n.attr("threshold")
    bx = em.op("Mul", [x, em.scalar(beta, d)]) if beta != 1.0 else x
    soft = em.op("Softplus", [bx])
    if beta != 1.0:
        soft = em.op("Div", [soft, em.scalar(beta, d)])
    return em.op("Where", [em.op("Greater", [bx, em.scalar(threshold, d)]), x, soft])


@translates("elu")
def _elu(em, n, xs, cx):
    x = xs[0]
    d = n.dtype
    alpha, scale, input_scale = n.attr("alpha"), n.attr("scale"), n.attr("input_scale")
    if input_scale == 1.0:
        if scale == 1.0:
            return em.op("Elu", [x], alpha=alpha)
        return em.op("Selu", [x], alpha=alpha, gamma=scale)
    neg = em.op(
        "Mul",
        [
            em.op(
                "Sub",
                [em.op("Exp", [em.op("Mul", [x, em.scalar(input_scale, d)])]), em.scalar(1, d)],
            ),
            em.scalar(scale * alpha, d),
        ],
    )
    pos = em.op("Mul", [x, em.scalar(scale, d)])
    return em.op("Where", [em.op("Greater", [x, em.scalar(0, d)]), pos, neg])


@translates("leaky_relu")
def _leaky_relu(em, n, xs, cx):
    return em.op("LeakyRelu", xs, alpha=n.attr("negative_slope"))


@translates("cast")
def _cast(em, n, xs, cx):
    return em.op("Cast", xs, to=onnx_type(n.dtype))


@translates("where")
def _where(em, n, xs, cx):
    return em.op("Where", xs)


# -- reductions ------------------------------------------------------------------------------


def _axes(n: Node) -> tuple[int, ...]:
    nd = len(n.inputs[0].shape)
    return tuple(sorted(a % nd for a in n.attr("axes"))) if nd else ()


def _reduction(onnx_op: str) -> Translator:
    def tr(em: Emitter, n: Node, xs: list[str], cx: Context) -> str:
        if not n.inputs[0].shape:
            return em.op("Identity", xs)
        x = xs[0]
        if onnx_op in ("ReduceMax", "ReduceMin") and n.inputs[0].dtype is dt.bool_:
            x = em.op("Cast", [x], to=TensorProto.INT32)
            out = em.reduce(onnx_op, x, _axes(n), n.attr("keepdim"))
            return em.op("Cast", [out], to=TensorProto.BOOL)
        return em.reduce(onnx_op, x, _axes(n), n.attr("keepdim"))

    return tr


for _k, _v in {
    "sum": "ReduceSum",
    "prod": "ReduceProd",
    "amax": "ReduceMax",
    "amin": "ReduceMin",
    "mean": "ReduceMean",
    "logsumexp": "ReduceLogSumExp",
}.items():
    TRANSLATIONS[_k] = _reduction(_v)


@translates("argmax", "argmin")
def _argreduce(em, n, xs, cx):
    onnx_op = "ArgMax" if n.op == "argmax" else "ArgMin"
    shape = n.inputs[0].shape
    axes = _axes(n)
    keep = n.attr("keepdim")
    if not shape:
        return em.const(np.zeros((), np.int64), dt.int64)
    if not axes or len(shape) == 1:
        flat = em.op("Reshape", [xs[0], em.i64([-1])]) if len(shape) != 1 else xs[0]
        out = em.op(onnx_op, [flat], axis=0, keepdims=0, select_last_index=0)
        if keep:
            out = em.op("Reshape", [out, em.i64([1] * len(shape))])
        return out
    return em.op(onnx_op, xs, axis=axes[0], keepdims=int(keep), select_last_index=0)


@translates("norm")
def _norm(em, n, xs, cx):
    if not n.inputs[0].shape:
        return em.op("Abs", xs)
    onnx_op = "ReduceL2" if n.attr("p") == 2.0 else "ReduceL1"
    return em.reduce(onnx_op, xs[0], _axes(n), n.attr("keepdim"))


@translates("cumsum")
def _cumsum(em, n, xs, cx):
    if not n.inputs[0].shape:
        return em.op("Identity", xs)
    return em.op("CumSum", [xs[0], em.const(np.asarray(n.attr("axis"), np.int64), dt.int64)])


# -- movement ------------------------------------------------------------------------------


@translates("reshape")
def _reshape(em, n, xs, cx):
    shape = cx.attr(n, "shape")
    if n not in cx.overrides and tuple(shape) == n.inputs[0].shape:
        return xs[0]
    return em.op("Reshape", [xs[0], em.i64(list(shape))])


@translates("permute")
def _permute(em, n, xs, cx):
    perm = [p % max(len(n.shape), 1) for p in n.attr("perm")]
    if perm == sorted(perm):
        return xs[0]
    return em.op("Transpose", xs, perm=perm)


@translates("expand")
def _expand(em, n, xs, cx):
    if n not in cx.overrides and n.shape == n.inputs[0].shape:
        return xs[0]
    return em.op("Expand", [xs[0], em.i64(list(cx.attr(n, "shape")))])


@translates("slice")
def _slice(em, n, xs, cx):
    shape = n.inputs[0].shape
    starts, stops, steps = cx.attr(n, "starts"), cx.attr(n, "stops"), cx.attr(n, "steps")
    axes, s0, s1, st = [], [], [], []
    for i, (a, b, s) in enumerate(zip(starts, stops, steps)):
        if a == 0 and b in (shape[i], INT64_MAX) and s == 1:
            continue
        axes.append(i)
        s0.append(a)
        s1.append(b)
        st.append(s)
    if not axes:
        return xs[0]
    return em.op("Slice", [xs[0], em.i64(s0), em.i64(s1), em.i64(axes), em.i64(st)])


def _pad_value(em: Emitter, value: Any, d: dt.DType) -> str:
    return em.scalar(value, d)


@translates("pad")
def _pad(em, n, xs, cx):
    x = xs[0]
    d = n.dtype
    lows, highs, interior = n.attr("lows"), n.attr("highs"), n.attr("interior")
    value = n.attr("value")
    shape = list(n.inputs[0].shape)
    for axis, it in enumerate(interior):
        if it == 0 or shape[axis] <= 1:
            continue
        # interior padding: a new axis of size it + 1 after `axis`, filled, merged, cut
        size = shape[axis]
        unsq = em.op("Reshape", [x, em.i64(shape[: axis + 1] + [1] + shape[axis + 1 :])])
        pads = [0] * (len(shape) + 1) * 2
        pads[len(shape) + 1 + axis + 1] = it
        padded = em.op("Pad", [unsq, em.i64(pads), _pad_value(em, value, d)])
        merged = shape[:axis] + [size * (it + 1)] + shape[axis + 1 :]
        x = em.op("Reshape", [padded, em.i64(merged)])
        keep = size + (size - 1) * it
        x = em.op("Slice", [x, em.i64([0]), em.i64([keep]), em.i64([axis]), em.i64([1])])
        shape[axis] = keep
    if any(lows) or any(highs):
        x = em.op("Pad", [x, em.i64(list(lows) + list(highs)), _pad_value(em, value, d)])
    return x


@translates("cat")
def _cat(em, n, xs, cx):
    if len(xs) == 1:
        return xs[0]
    return em.op("Concat", xs, axis=n.attr("axis") % len(n.shape))


@translates("flip")
def _flip(em, n, xs, cx):
    axes = sorted({a % len(n.shape) for a in n.attr("axes")})
    if not axes:
        return xs[0]
    k = len(axes)
    return em.op(
        "Slice", [xs[0], em.i64([-1] * k), em.i64([INT64_MIN] * k), em.i64(axes), em.i64([-1] * k)]
    )


# -- indexing ------------------------------------------------------------------------------


@translates("gather")
def _gather(em, n, xs, cx):
    flat = em.op("Reshape", [xs[0], em.i64([-1])])
    return em.op("Gather", [flat, xs[1]], axis=0)


@translates("scatter_add", "index_put")
def _scatter(em, n, xs, cx):
    if em.opset < 16 and n.op == "scatter_add":
        raise UnsupportedOperatorError(
            n.op, n.loc, "ScatterElements with reduction needs opset >= 16"
        )
    base, index, src = xs
    ishape = n.inputs[1].shape
    flat = em.op("Reshape", [base, em.i64([-1])])
    idx = em.op("Reshape", [index, em.i64([-1])])
    if n.inputs[2].shape != ishape:
        src = em.op("Expand", [src, em.i64(list(ishape))])
    src = em.op("Reshape", [src, em.i64([-1])])
    kw = {"reduction": "add"} if n.op == "scatter_add" else {}
    out = em.op("ScatterElements", [flat, idx, src], axis=0, **kw)
    return em.op("Reshape", [out, em.i64(list(n.shape))])


# -- linear algebra and nn -----------------------------------------------------------------


@translates("matmul")
def _matmul(em, n, xs, cx):
    return em.op("MatMul", xs)


@translates("addmm")
def _addmm(em, n, xs, cx):
    b, m1, m2 = xs
    kw: dict[str, Any] = {}
    src = n.inputs[2]
    if src.op == "permute" and src.attr("perm") == (1, 0):
        m2 = cx.names[src.inputs[0]]  # Gemm reads the weight transposed
        kw["transB"] = 1
    if n.attr("alpha") != 1.0:
        kw["alpha"] = n.attr("alpha")
    if n.attr("beta") != 1.0:
        kw["beta"] = n.attr("beta")
    return em.op("Gemm", [m1, m2, b], **kw)


@translates("conv2d")
def _conv2d(em, n, xs, cx):
    w = n.inputs[1].shape
    ph, pw = n.attr("padding")
    return em.op(
        "Conv",
        xs,
        kernel_shape=list(w[2:]),
        strides=list(n.attr("stride")),
        pads=[ph, pw, ph, pw],
        dilations=list(n.attr("dilation")),
        group=n.attr("groups"),
    )


@translates("max_pool2d")
def _max_pool2d(em, n, xs, cx):
    k = list(n.attr("kernel_size"))
    s = list(n.attr("stride") or k)
    p = list(n.attr("padding"))
    dil = list(n.attr("dilation"))
    size_in = n.inputs[0].shape[2:]
    size_out = n.shape[2:]
    # ceil mode as explicit extra padding at the end, so that floor mode gives the size
    # the IR computed (torch's rule: the last window starts inside the input or padding)
    extra = [
        max(0, (o - 1) * st + d * (kk - 1) + 1 - (i + 2 * pp))
        for o, st, d, kk, i, pp in zip(size_out, s, dil, k, size_in, p)
    ]
    return em.op(
        "MaxPool",
        xs,
        kernel_shape=k,
        strides=s,
        pads=[p[0], p[1], p[0] + extra[0], p[1] + extra[1]],
        dilations=dil,
        ceil_mode=0,
    )


@translates("layer_norm")
def _layer_norm(em, n, xs, cx):
    shape = n.attr("normalized_shape")
    has_w, has_b = n.attr("has_weight"), n.attr("has_bias")
    x = xs[0]
    rest = xs[1:]
    w = rest.pop(0) if has_w else em.const(np.ones(shape), n.dtype)
    ins = [x, w] + ([rest.pop(0)] if has_b else [])
    return em.op("LayerNormalization", ins, axis=-len(shape), epsilon=n.attr("eps"))


@translates("softmax", "log_softmax")
def _softmax(em, n, xs, cx):
    if not n.shape:
        if n.op == "softmax":
            return em.op("Div", [xs[0], xs[0]])
        return em.op("Sub", [xs[0], xs[0]])
    dim = n.attr("dim")
    dim = -1 if dim is None else dim % len(n.shape)
    return em.op("Softmax" if n.op == "softmax" else "LogSoftmax", xs, axis=dim)


@translates("embedding")
def _embedding(em, n, xs, cx):
    return em.op("Gather", xs, axis=0)


@translates("iota")
def _iota(em, n, xs, cx):
    (size,) = n.attr("shape")
    r = em.op("Range", [em.scalar(0, dt.int64), em.scalar(size, dt.int64), em.scalar(1, dt.int64)])
    return r if n.dtype is dt.int64 else em.op("Cast", [r], to=onnx_type(n.dtype))


# ----------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------


def _value_info(
    name: str, d: dt.DType, shape: tuple[int, ...], sym: dict[int, str]
) -> onnx.ValueInfoProto:
    dims: list[Any] = [sym.get(i, s) for i, s in enumerate(shape)]
    return helper.make_tensor_value_info(name, onnx_type(d), dims)


def _dynamic_spec(spec: Any, name: str) -> dict[int, str]:
    if isinstance(spec, dict):
        return {int(k): str(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return {int(a): f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(spec)}
    raise TypeError(
        f"dynamic_axes[{name!r}] must be a dict of axis -> name or a list of "
        f"axes, got {type(spec).__name__}"
    )


def _state_names(model: Any) -> dict[int, str]:
    names: dict[int, str] = {}
    if _is_module(model):
        for k, v in model.state_dict(keep_vars=True).items():
            if isinstance(v, Tensor):
                names.setdefault(id(v), k)
        for k, v in model.named_parameters(remove_duplicate=False):
            names.setdefault(id(v), k)
    return names


def _default_input_names(model: Any, n: int, args: tuple, kwargs: dict) -> list[str]:
    import inspect

    fn = model.forward if _is_module(model) else model
    try:
        params = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    if (
        n == len(args) + len(kwargs)
        and all(isinstance(a, Tensor) for a in args)
        and all(isinstance(v, Tensor) for v in kwargs.values())
    ):
        names = (
            params[: len(args)]
            + [f"input_{i}" for i in range(len(params), len(args))]
            + list(kwargs)
        )
        if len(set(names)) == len(names):
            return names
    return [f"input_{i}" for i in range(n)]


def _set_modes(model: Any, training: TrainingMode) -> list[tuple[Any, bool]]:
    if not _is_module(model) or training is TrainingMode.PRESERVE:
        return []
    saved = [(m, m.training) for m in model.modules()]
    model.train(training is TrainingMode.TRAINING)
    return saved


def build_model(
    model: Any,
    args: Any,
    *,
    kwargs: dict,
    input_names: list[str],
    output_names: list[str],
    opset: int,
    dynamic_axes: dict[str, Any],
    export_params: bool,
    keep_initializers_as_inputs: bool,
    training: TrainingMode,
    constant_folding: bool,
) -> onnx.ModelProto:
    """Trace `model(*args, **kwargs)` and translate it; see `llgrad.onnx.export`."""
    newest = onnx.defs.onnx_opset_version()
    if not 13 <= opset <= newest:
        raise ValueError(
            f"onnx export: opset_version must be in [13, {newest}] (the "
            f"installed onnx's newest), got {opset}"
        )
    if isinstance(args, Tensor):
        args = (args,)
    elif not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    saved = _set_modes(model, training)
    try:
        traced = _trace(model, args, kwargs, opset)
        names_in = _default_input_names(model, traced.n_inputs, args, kwargs)
        for i, nm in enumerate(input_names[: traced.n_inputs]):
            names_in[i] = nm
        n_out = traced.n_outputs
        if n_out == 0:
            raise OnnxExporterError("the traced function returns no tensors")
        names_out = ["output"] if n_out == 1 else [f"output_{i}" for i in range(n_out)]
        for i, nm in enumerate(output_names[:n_out]):
            names_out[i] = nm
        if len(input_names) > traced.n_inputs or len(output_names) > n_out:
            raise ValueError(
                f"onnx export: {len(input_names)} input names and "
                f"{len(output_names)} output names given for a graph of "
                f"{traced.n_inputs} inputs and {n_out} outputs"
            )
        unknown = set(dynamic_axes) - set(names_in) - set(names_out)
        if unknown:
            raise ValueError(
                f"onnx export: dynamic_axes names {sorted(unknown)} are neither "
                f"input names {names_in} nor output names {names_out}"
            )
        dyn_in = {
            names_in.index(k): _dynamic_spec(v, k) for k, v in dynamic_axes.items() if k in names_in
        }
        dyn_out = {
            names_out.index(k): _dynamic_spec(v, k)
            for k, v in dynamic_axes.items()
            if k in names_out
        }
        overrides: dict[Node, dict[str, tuple]] = {}
        dynamic: set[Node] = set()
        out_dims_differ: dict[int, set[int]] = {}
        if dyn_in:
            leaves, treedef = pytree.flatten((args, kwargs))
            grown, k = [], 0
            for v in leaves:
                if isinstance(v, Tensor):
                    axes = [a % max(v.ndim, 1) for a in dyn_in.get(k, {})]
                    v = _grow(v.detach(), axes) if axes else v
                    k += 1
                grown.append(v)
            args2, kwargs2 = pytree.unflatten(treedef, grown)
            traced2 = _trace(model, args2, kwargs2, opset)
            state = _state_names(model)
            cap = {
                p: traced.captured[i - traced.n_inputs]
                for i, p in enumerate(traced.graph.params)
                if i >= traced.n_inputs
            }

            users = traced.graph.users()

            def where(p: Node) -> str:
                t = cap.get(p)
                name = state.get(id(t), p.attr("name")) if t is not None else "?"
                locs = [u.loc for u in users.get(p, ()) if u.loc]
                return f"{name}, read at {locs[0]}" if locs else name

            overrides, dynamic = _dynamic_overrides(traced, traced2, where)
            for i, (o1, o2) in enumerate(zip(traced.graph.outputs, traced2.graph.outputs)):
                out_dims_differ[i] = {
                    d for d, (a, b) in enumerate(zip(o1.shape, o2.shape)) if a != b
                }
        proto = _translate(
            model,
            traced,
            names_in,
            names_out,
            opset,
            dyn_in,
            dyn_out,
            out_dims_differ,
            overrides,
            dynamic,
            export_params,
            keep_initializers_as_inputs,
            constant_folding,
        )
    finally:
        for m, mode in saved:
            m.training = mode
    return proto


def _translate(
    model: Any,
    traced: Traced,
    names_in: list[str],
    names_out: list[str],
    opset: int,
    dyn_in: dict[int, dict[int, str]],
    dyn_out: dict[int, dict[int, str]],
    out_dims_differ: dict[int, set[int]],
    overrides: dict[Node, dict[str, tuple]],
    dynamic: set[Node],
    export_params: bool,
    keep_initializers_as_inputs: bool,
    constant_folding: bool,
) -> onnx.ModelProto:
    g = traced.graph
    em = Emitter(opset)
    state = _state_names(model)
    names: dict[Node, str] = {}
    inputs: list[onnx.ValueInfoProto] = []
    weight_inputs: list[onnx.ValueInfoProto] = []
    for nm in names_in + names_out:
        em.reserve(nm)
    # graph inputs, weights, constants captured by the function
    constant_values: dict[Node, np.ndarray] = {}
    weights: list[tuple[Node, Tensor, str]] = []
    for i, p in enumerate(g.params):
        if i < traced.n_inputs:
            names[p] = names_in[i]
            inputs.append(_value_info(names_in[i], p.dtype, p.shape, dyn_in.get(i, {})))
            continue
        t = traced.captured[i - traced.n_inputs]
        key = state.get(id(t))
        if key is None and not t.requires_grad and constant_folding:
            constant_values[p] = _array_of(t)  # a constant the function made
            continue
        name = key if key is not None else p.attr("name")
        if name in em.used:
            name = em.fresh(name)
        else:
            em.reserve(name)
        names[p] = name
        weights.append((p, t, name))
    for p, t, name in weights:
        if export_params:
            em.initializers.append(em.tensor(_array_of(t), p.dtype, name))
            if keep_initializers_as_inputs:
                weight_inputs.append(_value_info(name, p.dtype, p.shape, {}))
        else:
            weight_inputs.append(_value_info(name, p.dtype, p.shape, {}))
    # constant folding: values of nodes that read only constants
    if constant_folding:
        for node in g.nodes:
            if node.op in ("param", "normal", "uniform") or node in dynamic:
                continue
            if node.op == "const" and not any(node.shape):
                continue  # scalars stay Constant nodes
            if (
                node.inputs
                and all(i in constant_values or i.op == "const" for i in node.inputs)
                or node.op in ("const", "iota")
            ):
                ins = [
                    constant_values[i] if i in constant_values else run_node(i, [])
                    for i in node.inputs
                ]
                size_in = sum(a.size for a in ins)
                if int(np.prod(node.shape)) > max(FOLD_LIMIT, size_in):
                    continue
                try:
                    constant_values[node] = run_node(node, ins)
                except Exception:  # evaluate at run time instead
                    continue
    cx = Context(overrides, names)

    def name_of(node: Node) -> str:
        got = names.get(node)
        if got is None:
            if node in constant_values:
                got = em.const(constant_values[node], node.dtype)
            else:
                raise AssertionError(f"onnx export: {node.op} read before it was translated")
            names[node] = got
        return got

    for node in g.nodes:
        if node.op == "param" or node in constant_values:
            continue
        em.loc = node.loc
        if node.op == "stop_gradient":
            names[node] = name_of(node.inputs[0])
            continue
        if node.op == "const":
            names[node] = em.const(run_node(node, []), node.dtype)
            continue
        tr = TRANSLATIONS.get(node.op)
        if tr is None:
            raise UnsupportedOperatorError(node.op, node.loc, _why_unsupported(node))
        xs = [name_of(i) for i in node.inputs]
        names[node] = tr(em, node, xs, cx)
    em.loc = None
    # outputs: rename the producing node's output where possible, else an Identity
    outputs = []
    for i, o in enumerate(g.outputs):
        src = name_of(o)
        want = names_out[i]
        produced = [nd for nd in em.nodes if src in nd.output]
        renamed = False
        once = sum(src == name_of(q) for q in g.outputs) == 1
        if produced and produced[0].op_type != "Constant" and src.startswith("/") and once:
            for nd in em.nodes:
                for j, inp in enumerate(nd.input):
                    if inp == src:
                        nd.input[j] = want
            for j, out_name in enumerate(produced[0].output):
                if out_name == src:
                    produced[0].output[j] = want
            for node, nm in list(names.items()):
                if nm == src:
                    names[node] = want
            renamed = True
        if not renamed:
            em.nodes.append(helper.make_node("Identity", [src], [want], name=f"Identity_{want}"))
        sym = dict(dyn_out.get(i, {}))
        for d in out_dims_differ.get(i, ()):
            sym.setdefault(d, f"{want}_dim_{d}")
        outputs.append(_value_info(want, o.dtype, o.shape, sym))
    nodes, inits = _prune(em.nodes, em.initializers, [v.name for v in outputs])
    graph = helper.make_graph(nodes, g.name, inputs + weight_inputs, outputs, initializer=inits)
    proto = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name=producer_name,
        producer_version=str(producer_version),
    )
    proto.ir_version = min(proto.ir_version, _max_ir_version(opset))
    onnx.checker.check_model(proto)
    return proto


def _max_ir_version(opset: int) -> int:
    for ir_version, op in ((7, 13), (8, 17), (9, 19), (10, 21)):
        if opset <= op:
            return ir_version
    return onnx.IR_VERSION


def _prune(
    nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], outputs: list[str]
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Drop the nodes and initializers the outputs do not read."""
    needed = set(outputs)
    keep = []
    for nd in reversed(nodes):
        if any(o in needed for o in nd.output):
            keep.append(nd)
            needed.update(i for i in nd.input if i)
    keep.reverse()
    return keep, [t for t in inits if t.name in needed]


def _array_of(t: Tensor) -> np.ndarray:
    with no_grad():
        src = t.detach()
        if src.dtype is dt.bfloat16:
            src = src.float()
        return np.array(src.numpy(), order="C")


def _why_unsupported(node: Node) -> str:
    if node.group is Group.RANDOM:
        return (
            "random number generation has no ONNX equivalent with llgrad's streams "
            "(export in eval mode so that dropout is the identity)"
        )
    if node.dtype.is_complex or any(i.dtype.is_complex for i in node.inputs):
        return "complex tensors have no ONNX operators"
    if node.op == "nonzero":
        return "its result size depends on the data"
    return "no ONNX translation for this op"
