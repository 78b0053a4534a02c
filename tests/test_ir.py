"""Tests for the IR's text form (printer, parser), verifier, interpreter and export.

Graphs are built with `Builder` from the ops registered in `llgrad.ops`; broken graphs for
the verifier are assembled from `Node`s directly. NumPy (and PyTorch, where installed) is
the oracle for the interpreter.
"""
from __future__ import annotations

import math
import shutil
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llgrad  # noqa: F401  (fills the op registry)
import llgrad.ops.shape  # noqa: F401  (movement ops)
from llgrad import ir
from llgrad.ir import dtypes as dt
from llgrad.ir.export import render, to_dot, to_networkx
from llgrad.ir.graph import Builder, Graph, Node, make_node
from llgrad.ir.interpret import (from_bfloat16_bits, interpret, round_to_bfloat16,
                                 to_bfloat16_bits)
from llgrad.ir.parser import ParseError, parse
from llgrad.ir.printer import node_lines, print_graph, value_names
from llgrad.ir.types import TensorType
from llgrad.ir.verify import VerificationError, verify

f32, f64, f16, bf16, i32, i64 = (dt.float32, dt.float64, dt.float16, dt.bfloat16,
                                 dt.int32, dt.int64)


def T(d: dt.DType, *shape: int) -> TensorType:
    return TensorType(d, tuple(shape))


def roundtrip(g: Graph) -> Graph:
    """Print, parse, and check the parsed graph equals `g`, prints the same and verifies."""
    text = print_graph(g)
    g2 = parse(text)
    assert g2 == g
    assert print_graph(g2) == text
    assert str(g2) == text
    verify(g)
    verify(g2)
    return g2


# --------------------------------------------------------------------------------------
# Golden graphs
# --------------------------------------------------------------------------------------

def g_mlp() -> Graph:
    b = Builder("loss")
    x = b.param(T(f32, 128, 784), "x")
    w = b.param(T(f32, 784), "w")
    a = b.op("add", x, w, loc="model.py:14")
    r = b.op("relu", a, loc="model.py:15")
    return b.build(b.op("mul", r, r))


MLP = """\
graph @loss(%x: f32[128,784], %w: f32[784]) {
  %0 = add(%x, %w) : f32[128,784]   # model.py:14
  %1 = relu(%0)    : f32[128,784]   # model.py:15
  %2 = mul(%1, %1) : f32[128,784]
  return %2
}
"""


def g_shapes() -> Graph:
    b = Builder("shapes")
    x = b.param(T(f32, 2, 3), "x")
    y = b.param(T(f32, 4, 3), "y")
    r = b.op("reshape", x, shape=[3, -1])
    p = b.op("permute", r, perm=[1, 0])
    c = b.op("cat", p, y, x, axis=0)
    s = b.op("slice", c, starts=[1, 0], stops=[8, 3], steps=[2, 1])
    f = b.op("flip", s, axes=[0, -1])
    e = b.op("expand", f, shape=[5, 4, 3])
    pd = b.op("pad", x, lows=[1, 0], highs=[0, 2], interior=[1, 0], value=-1.5)
    return b.build(e, pd)


SHAPES = """\
graph @shapes(%x: f32[2,3], %y: f32[4,3]) {
  %0 = reshape(%x, shape=[3,-1])                         : f32[3,2]
  %1 = permute(%0, perm=[1,0])                           : f32[2,3]
  %2 = cat(%1, %y, %x, axis=0)                           : f32[8,3]
  %3 = slice(%2, starts=[1,0], stops=[8,3], steps=[2,1]) : f32[4,3]
  %4 = flip(%3, axes=[0,-1])                             : f32[4,3]
  %5 = expand(%4, shape=[5,4,3])                         : f32[5,4,3]
  %6 = pad(%x, lows=[1,0], highs=[0,2], interior=[1,0], value=-1.5) : f32[4,5]
  return (%5, %6)
}
"""


def g_attrs() -> Graph:
    b = Builder("attrs")
    x = b.param(T(f16, 3), "x")
    i = b.param(T(i32, 3), "i")
    c1 = b.op("clamp", x, min=0.5)
    c2 = b.op("clamp", c1, max=2)
    c3 = b.op("clamp", i, min=-3, max=True)
    g = b.op("gelu", c2, approximate="tanh")
    sp = b.op("softplus", g, beta=2, threshold=math.inf)
    return b.build(b.op("cast", sp, dtype=bf16), b.op("cast", c3, dtype=dt.complex64))


# Graph order is the order outputs need values in, not the order the builder made them.
ATTRS = """\
graph @attrs(%x: f16[3], %i: i32[3]) {
  %0 = clamp(%x, min=0.5, max=none)          : f16[3]
  %1 = clamp(%0, min=none, max=2)            : f16[3]
  %2 = gelu(%1, approximate="tanh")          : f16[3]
  %3 = softplus(%2, beta=2.0, threshold=inf) : f16[3]
  %4 = cast(%3, dtype=bf16)                  : bf16[3]
  %5 = clamp(%i, min=-3, max=true)           : i32[3]
  %6 = cast(%5, dtype=c64)                   : c64[3]
  return (%4, %6)
}
"""


def g_consts() -> Graph:
    b = Builder("consts")
    return b.build(
        b.op("const", value=1.5, dtype=f32, shape=[2, 2]),
        b.op("const", value=[[1, 2], [3, 4]], dtype=i64, shape=[2, 2]),
        b.op("const", value=[True, False], dtype=dt.bool_, shape=[2]),
        b.op("const", value=[1 + 2j, -0.5j], dtype=dt.complex128, shape=[2]),
        b.op("const", value=2, dtype=f64),
        b.op("const", value=[], dtype=f32, shape=[0, 3]))


CONSTS = """\
graph @consts() {
  %0 = const(value=1.5, dtype=f32, shape=[2,2])           : f32[2,2]
  %1 = const(value=[[1,2],[3,4]], dtype=i64, shape=[2,2]) : i64[2,2]
  %2 = const(value=[true,false], dtype=bool, shape=[2])   : bool[2]
  %3 = const(value=[1.0+2.0j,-0.0-0.5j], dtype=c128, shape=[2]) : c128[2]
  %4 = const(value=2, dtype=f64, shape=[])                : f64[]
  %5 = const(value=[], dtype=f32, shape=[0,3])            : f32[0,3]
  return (%0, %1, %2, %3, %4, %5)
}
"""


def g_empty() -> Graph:
    return Builder("nothing").build()


EMPTY = """\
graph @nothing() {
  return ()
}
"""


def g_identity() -> Graph:
    b = Builder("ident")
    x = b.param(T(f32, 2), "x")
    y = b.param(T(i64), "y")
    return b.build(y, x, y)


IDENTITY = """\
graph @ident(%x: f32[2], %y: i64[]) {
  return (%y, %x, %y)
}
"""


def g_param_locs() -> Graph:
    b = Builder("located")
    x = Node("param", (), (("name", "x"),), T(f32, 2), loc="train.py:3")
    b.params.append(x)
    y = b.param(T(f32, 2), "y")
    return b.build(b.op("sub", x, y, loc="train.py:9"))


PARAM_LOCS = """\
graph @located(
  %x: f32[2],   # train.py:3
  %y: f32[2]
) {
  %0 = sub(%x, %y) : f32[2]   # train.py:9
  return %0
}
"""


def g_odd_names() -> Graph:
    b = Builder("my graph")
    x = b.param(T(f32, 1), "x")
    n = b.op("neg", x, loc='  spaced "quoted"\n')
    return b.build(b.op("exp", n, loc=""))


ODD_NAMES = """\
graph @"my graph"(%x: f32[1]) {
  %0 = neg(%x) : f32[1]   # "  spaced \\"quoted\\"\\n"
  %1 = exp(%0) : f32[1]   # ""
  return %1
}
"""

GOLDEN = [(g_mlp, MLP), (g_shapes, SHAPES), (g_attrs, ATTRS), (g_consts, CONSTS),
          (g_empty, EMPTY), (g_identity, IDENTITY), (g_param_locs, PARAM_LOCS),
          (g_odd_names, ODD_NAMES)]


@pytest.mark.parametrize("make, text", GOLDEN, ids=[m.__name__ for m, _ in GOLDEN])
def test_golden_text(make: Callable[[], Graph], text: str) -> None:
    g = make()
    assert print_graph(g) == text
    assert str(g) == text
    g2 = roundtrip(g)
    for a, b in zip(g.nodes, g2.nodes):
        assert a.loc == b.loc and a.attrs == b.attrs and a.type == b.type


@pytest.mark.parametrize("make", [m for m, _ in GOLDEN], ids=[m.__name__ for m, _ in GOLDEN])
def test_node_lines_point_at_the_printed_lines(make: Callable[[], Graph]) -> None:
    g = make()
    lines = print_graph(g).splitlines()
    names, where = value_names(g), node_lines(g)
    for n in g.nodes:
        text = lines[where[n] - 1]
        assert f"{names[n]}: " in text if n.op == "param" else text.startswith(f"  {names[n]} = ")


def test_parse_keeps_attribute_python_types() -> None:
    g = parse(ATTRS)
    clamp_int = next(n for n in g.nodes if n.op == "clamp" and n.dtype is i32)
    assert clamp_int.attrs == (("min", -3), ("max", True))
    assert type(clamp_int.attr("min")) is int and clamp_int.attr("max") is True
    clamp_max = [n for n in g.nodes if n.op == "clamp"][1]
    assert type(clamp_max.attr("max")) is int and clamp_max.attr("min") is None
    soft = next(n for n in g.nodes if n.op == "softplus")
    assert soft.attrs == (("beta", 2.0), ("threshold", math.inf))
    assert next(n for n in g.nodes if n.op == "cast").attr("dtype") is bf16
    consts = parse(CONSTS).nodes
    assert consts[1].attr("value") == ((1, 2), (3, 4))
    assert consts[3].attr("value") == (1 + 2j, complex(-0.0, -0.5))
    assert math.copysign(1, consts[3].attr("value")[1].real) == -1
    assert type(consts[4].attr("value")) is int


def test_nan_attribute_roundtrips() -> None:
    b = Builder("n")
    x = b.param(T(f64, 2), "x")
    g = b.build(b.op("clamp", x, min=math.nan, max=-math.inf))
    text = print_graph(g)
    assert "min=nan, max=-inf" in text
    roundtrip(g)


def test_deep_graph_prints_parses_verifies_and_runs() -> None:
    """Thousands of chained nodes: nothing may recurse per node."""
    b = Builder("deep")
    v = b.param(T(f32, 3), "x")
    for _ in range(3000):
        v = b.op("neg", v)
    g = b.build(v)
    g2 = roundtrip(g)
    (out,) = interpret(g2, [np.array([1, -2, 3], np.float32)])
    np.testing.assert_array_equal(out, [1, -2, 3])


def test_hand_written_text_is_whitespace_insensitive_and_renumbered() -> None:
    text = """
    # a comment before the graph
    graph   @f( %a :f32[2] ,%b: f32[2] ) {   # trailing comment on the header

      %s = sin(%a) : f32[2]   # s.py:1
      # a comment on its own line is not a loc
      %e = exp( %b ) :f32 [ 2 ]
      %sum=add(%e,%s):f32[2]
      return %sum
    }
    """
    g = parse(text)
    # graph order follows the output's inputs: exp comes before sin
    assert print_graph(g) == """\
graph @f(%a: f32[2], %b: f32[2]) {
  %0 = exp(%b)     : f32[2]
  %1 = sin(%a)     : f32[2]   # s.py:1
  %2 = add(%0, %1) : f32[2]
  return %2
}
"""
    assert [n.op for n in g.nodes] == ["param", "param", "exp", "sin", "add"]
    assert g.nodes[3].loc == "s.py:1" and g.nodes[2].loc is None


def test_printer_rejects_unprintable_graphs() -> None:
    b = Builder()
    x = b.param(T(f32, 2), "not an identifier")
    with pytest.raises(ValueError, match="not a valid identifier"):
        print_graph(b.build(x))
    b = Builder()
    x, y = b.param(T(f32, 2), "x"), b.param(T(f32, 2), "x")
    with pytest.raises(ValueError, match="two parameters are named 'x'"):
        print_graph(b.build(x, y))
    b = Builder()
    x = b.param(T(f32, 2), "x")
    bad = Node("clamp", (x,), (("min", np.arange(2)), ("max", None)), x.type)
    with pytest.raises(TypeError, match="cannot spell an attribute value of type ndarray"):
        print_graph(b.build(bad))


# --------------------------------------------------------------------------------------
# Random graphs round-trip
# --------------------------------------------------------------------------------------

IDENTS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True)
LOCS = st.none() | st.text(max_size=10)
# The parser reads every NaN as math.nan; a graph compares equal only with that object.
FLOATS = st.floats().map(lambda x: math.nan if math.isnan(x) else x)
SCALARS = st.none() | st.integers(-9, 9) | FLOATS | st.booleans()
SHAPES_ST = st.lists(st.integers(0, 3), max_size=3).map(tuple)
DTYPES = [f32, f64, f16, bf16, i32, i64]


def _random_step(draw: Any, b: Builder, values: list[Node], d: dt.DType) -> Node:
    """One random node on existing values; raises if the op's rules reject the draw."""
    x = draw(st.sampled_from(values[-2:]) | st.sampled_from(values))   # favour chains
    loc = draw(LOCS)
    kind = draw(st.sampled_from(["unary", "clamp", "gelu", "softplus", "binary", "reshape",
                                 "permute", "expand", "slice", "flip", "cat", "pad", "cast",
                                 "const"]))
    if kind == "unary":
        return b.op(draw(st.sampled_from(["neg", "abs", "relu", "exp", "square"])), x, loc=loc)
    if kind == "clamp":
        bounds = {k: v for k, v in (("min", draw(SCALARS)), ("max", draw(SCALARS)))
                  if v is not None}
        return b.op("clamp", x, loc=loc, **bounds)
    if kind == "gelu":
        return b.op("gelu", x, approximate=draw(st.text(max_size=5)), loc=loc)
    if kind == "softplus":
        return b.op("softplus", x, beta=draw(FLOATS), threshold=draw(FLOATS), loc=loc)
    if kind == "binary":
        op = draw(st.sampled_from(["add", "mul", "maximum", "lt"]))
        return b.op(op, x, draw(st.sampled_from(values)), loc=loc)
    if kind == "reshape":
        shape = draw(st.sampled_from([x.shape[::-1], (x.type.numel,), (-1,), (1, -1)]))
        return b.op("reshape", x, shape=list(shape), loc=loc)
    if kind == "permute":
        return b.op("permute", x, perm=draw(st.permutations(range(x.type.ndim))), loc=loc)
    if kind == "expand":
        return b.op("expand", x, shape=[2, *x.shape], loc=loc)
    if kind == "slice":
        starts = [draw(st.integers(0, n)) for n in x.shape]
        stops = [draw(st.integers(a, n)) for a, n in zip(starts, x.shape)]
        steps = [draw(st.integers(1, 2)) for _ in x.shape]
        return b.op("slice", x, starts=starts, stops=stops, steps=steps, loc=loc)
    if kind == "flip":
        axes = draw(st.lists(st.integers(0, max(x.type.ndim - 1, 0)), max_size=2, unique=True))
        return b.op("flip", x, axes=axes, loc=loc)
    if kind == "cat":
        return b.op("cat", *[x] * draw(st.integers(1, 3)),
                    axis=draw(st.integers(-1, max(x.type.ndim - 1, 0))), loc=loc)
    if kind == "pad":
        n = x.type.ndim
        ints = st.lists(st.integers(0, 2), min_size=n, max_size=n)
        value = draw(SCALARS.filter(lambda v: v is not None))
        return b.op("pad", x, lows=draw(ints), highs=draw(ints), interior=draw(ints),
                    value=value, loc=loc)
    if kind == "cast":
        return b.op("cast", x, dtype=draw(st.sampled_from(DTYPES)), loc=loc)
    payload: Any = (draw(FLOATS) if d.is_floating_point else draw(st.integers(-100, 100)))
    return b.op("const", value=payload, dtype=d, shape=list(draw(SHAPES_ST)), loc=loc)


@st.composite
def random_graphs(draw: Any) -> Graph:
    d = draw(st.sampled_from(DTYPES))
    b = Builder(draw(st.text(max_size=6)))
    for name in draw(st.lists(IDENTS, max_size=3, unique=True)):
        b.param(TensorType(d, draw(SHAPES_ST)), name)
    values: list[Node] = list(b.params) or [b.op("const", value=1, dtype=d, shape=[2])]
    for _ in range(draw(st.integers(1, 12))):
        try:
            values.append(_random_step(draw, b, values, d))
        except (TypeError, ValueError, RuntimeError, IndexError):
            pass                      # the op's rules refused this draw; try another
    # The last value is an output, so most drawn nodes stay in the graph.
    return b.build(values[-1], *draw(st.lists(st.sampled_from(values), max_size=2)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graphs_roundtrip(g: Graph) -> None:
    roundtrip(g)


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=8), loc=st.text(max_size=12), s=st.text(max_size=12),
       beta=FLOATS, scalar=st.integers() | FLOATS | st.booleans(),
       z=st.complex_numbers(allow_nan=False))
def test_attribute_spellings_roundtrip(name: str, loc: str, s: str, beta: float,
                                       scalar: Any, z: complex) -> None:
    b = Builder(name)
    x = b.param(T(dt.complex128, 2), "x")
    r = b.param(T(f64, 2), "r")
    k = b.op("const", value=[z, scalar if not isinstance(scalar, bool) else 1j], dtype=x.dtype,
             shape=[2], loc=loc)
    y = b.op("add", x, k, loc=s)
    c = b.op("clamp", r, min=scalar, loc=loc)
    g2 = roundtrip(b.build(y, b.op("gelu", b.op("softplus", c, beta=beta), approximate=s)))
    assert g2.name == name
    assert [n.loc for n in g2.nodes[2:4]] == [loc, s]


# --------------------------------------------------------------------------------------
# Parser errors
# --------------------------------------------------------------------------------------

HEAD = "graph @f(%x: f32[2], %y: f32[3]) {\n"

PARSE_ERRORS = [
    # (text, line, column, message fragment)
    ("", 1, 1, "expected 'graph'"),
    ("grph @f() {\n", 1, 1, "expected 'graph'"),
    ("graph f() {\n", 1, 7, "expected a graph name '@name'"),
    (HEAD + "  %0 = ad(%x, %x) : f32[2]\n  return %0\n}\n", 2, 8,
     "unknown op 'ad' (did you mean"),
    (HEAD + "  %0 = add(%x, %7) : f32[2]\n  return %0\n}\n", 2, 16, "unknown value %7"),
    (HEAD + "  %0 = add(%x, %x) : f32[3]\n  return %0\n}\n", 2, 22,
     "printed type f32[3] does not match the type f32[2]"),
    (HEAD + "  %0 = add(%x, %y) : f32[2]\n  return %0\n}\n", 2, 8,
     "add: shapes [2], [3] cannot be broadcast together"),
    (HEAD + "  %0 = neg(%x) : f32[2]\n  %0 = neg(%0) : f32[2]\n  return %0\n}\n", 3, 3,
     "%0 is defined twice (first on line 2)"),
    ("graph @f(%x: f32[2], %x: f32[2]) {\n  return %x\n}\n", 1, 22,
     "%x is defined twice"),
    ("graph @f(%0: f32[2]) {\n  return %0\n}\n", 1, 10, "needs a name that is an identifier"),
    (HEAD + "  %0 = neg(%x) : f32[2]\n}\n", 3, 1, "no 'return' statement"),
    (HEAD + "  return %x\n  %0 = neg(%x) : f32[2]\n}\n", 3, 3, "after the return statement"),
    (HEAD + '  %0 = gelu(%x, approximate="tanh) : f32[2]\n  return %0\n}\n', 2, 29,
     "unterminated string"),
    (HEAD + "  %0 = neg(%x) ; f32[2]\n  return %0\n}\n", 2, 16, "unexpected character ';'"),
    (HEAD + "  %0 = cat(%x, %x, axis=1.5) : f32[4]\n  return %0\n}\n", 2, 25,
     "attribute 'axis' of cat expects an int, got 1.5"),
    (HEAD + "  %0 = cat(%x, %x, dim=0) : f32[4]\n  return %0\n}\n", 2, 20,
     "cat has no attribute 'dim' (its attributes: axis)"),
    (HEAD + "  %0 = cat(%x, axis=0, axis=0) : f32[2]\n  return %0\n}\n", 2, 24,
     "attribute 'axis' is given twice"),
    (HEAD + "  %0 = cat(axis=0, %x) : f32[2]\n  return %0\n}\n", 2, 20,
     "inputs must come before attributes"),
    (HEAD + "  %0 = reshape(%x) : f32[2]\n  return %0\n}\n", 2, 8,
     "reshape: missing attribute 'shape'"),
    (HEAD + "  %0 = cast(%x, dtype=f33) : f32[2]\n  return %0\n}\n", 2, 23,
     "unknown name 'f33'"),
    (HEAD + "  %0 = neg(%x) : f33[2]\n  return %0\n}\n", 2, 18, "unknown dtype 'f33'"),
    (HEAD + "  %0 = neg(%x) : f32[-2]\n  return %0\n}\n", 2, 22,
     "a dimension size must be a non-negative int"),
    (HEAD + "  %0 = clamp(%x, min=none, max=[1]) : f32[2]\n  return %0\n}\n", 2, 32,
     "attribute 'max' of clamp expects a number or true/false, got [1]"),
    (HEAD + "  %0 = pad(%x, lows=[0], highs=[0], interior=[0], value=none) : f32[2]\n"
            "  return %0\n}\n", 2, 57, "attribute 'value' of pad expects a number"),
    (HEAD + "  %0 = neg(%x) : f32[2]\n  %1 = exp(%x) : f32[2]\n  return %1\n}\n", 2, 3,
     "%0 is not used by any output"),
    (HEAD + "  %0 = param(name=\"z\") : f32[2]\n  return %0\n}\n", 2, 8,
     "param: the type of parameter 'z' cannot be inferred"),
    (HEAD + "  %0 = const(value=300, dtype=u8, shape=[]) : u8[]\n  return %0\n}\n", 2, 8,
     "const: payload 300 is out of range for uint8"),
    (HEAD + "  return %x\n}\n}\n", 4, 1, "after the graph's closing '}'"),
    (HEAD + "  return %x }\n", 2, 13, "expected the end of the line, found '}'"),
    (HEAD + "  return %x\n", 3, 1, "expected '}' after the return statement, found the end"),
    ("graph @f(%x: f32[2] %y: f32[2]) {\n  return %x\n}\n", 1, 21, "expected ',' or ')'"),
    (HEAD + "  %0 = neg(%x) : f32[2]   \n  return (%0 %x)\n}\n", 3, 14, "expected ',' or ')'"),
]


@pytest.mark.parametrize("text, line, column, fragment", PARSE_ERRORS,
                         ids=[f"{i}-{e[3][:30]}" for i, e in enumerate(PARSE_ERRORS)])
def test_parse_errors(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text)
    e = info.value
    assert fragment in str(e)
    assert (e.line, e.column) == (line, column), str(e)
    assert str(e).startswith(f"line {line}, column {column}: ")
    assert isinstance(e, ValueError)


def test_parse_error_quotes_the_line_with_a_caret() -> None:
    with pytest.raises(ParseError) as info:
        parse(HEAD + "  %0 = ad(%x, %x) : f32[2]\n  return %0\n}\n")
    assert str(info.value).splitlines()[1:] == ["      %0 = ad(%x, %x) : f32[2]",
                                                "           ^"]


# --------------------------------------------------------------------------------------
# Verifier
# --------------------------------------------------------------------------------------

X = Node("param", (), (("name", "x"),), T(f32, 2, 3))
Y = Node("param", (), (("name", "y"),), T(f32, 3))
Z = Node("param", (), (("name", "z"),), T(f32, 4))


def graph_with(node: Node, *extra_params: Node) -> Graph:
    """A graph whose output is `node` (built directly, so nothing checks it)."""
    return Graph("broken", (X, Y, *extra_params), (node,))


def add_xy(**kw: Any) -> Node:
    fields = dict(op="add", inputs=(X, Y), attrs=(), type=T(f32, 2, 3), loc="m.py:7")
    fields.update(kw)
    return Node(**fields)


def test_verify_accepts_built_graphs() -> None:
    for make, _ in GOLDEN:
        verify(make())
    verify(graph_with(add_xy()))


def _broken_order() -> Graph:
    a = add_xy()
    g = graph_with(Node("relu", (a,), (), a.type))
    g.nodes = [X, Y, g.nodes[3], g.nodes[2]]          # a pass that misordered its nodes
    return g


def _foreign_input() -> Graph:
    a = add_xy()
    g = graph_with(Node("relu", (a,), (), a.type))
    g.nodes = [X, Y, g.nodes[3]]                       # `a` was dropped but is still used
    return g


def _dangling_output() -> Graph:
    g = graph_with(add_xy())
    g.outputs = (Node("neg", (Y,), (), Y.type),)
    return g


def _duplicate_node() -> Graph:
    g = graph_with(add_xy())
    g.nodes = [X, Y, g.nodes[2], g.nodes[2]]
    return g


def _softplus(attrs: tuple) -> Graph:
    return graph_with(Node("softplus", (X,), attrs, X.type))


BROKEN: list[tuple[str, Callable[[], Graph], str, str | None]] = [
    # (id, graph, message fragment, node name in the message)
    ("type", lambda: graph_with(add_xy(type=T(f32, 2, 4))),
     "type f32[2,4] does not match f32[2,3], which the op's shape rule infers", "%0 = add"),
    ("dtype", lambda: graph_with(add_xy(type=T(f64, 2, 3))),
     "type f64[2,3] does not match f32[2,3]", "%0 = add"),
    ("rule rejects", lambda: graph_with(add_xy(inputs=(X, Z)), Z),
     "the op's shape rule rejects the inputs (f32[2,3], f32[4]): add: shapes [2, 3], [4] "
     "cannot be broadcast", "%0 = add"),
    ("arity", lambda: graph_with(add_xy(inputs=(X, Y, Y))), "add takes 2 inputs, found 3",
     "%0 = add"),
    ("unknown op", lambda: graph_with(add_xy(op="plus")), "op 'plus' is not in the registry",
     "%0 = plus"),
    ("unknown attr", lambda: graph_with(add_xy(attrs=(("alpha", 1),))),
     "unknown attribute(s) ['alpha']", "%0 = add"),
    ("attr kind", lambda: _softplus((("beta", "one"), ("threshold", 20.0))),
     "attribute 'beta' expects float", "%0 = softplus"),
    ("attr not normal", lambda: _softplus((("beta", 1), ("threshold", 20.0))),
     "not in normal form", "%0 = softplus"),
    ("attr order", lambda: _softplus((("threshold", 20.0), ("beta", 1.0))),
     "not in normal form", "%0 = softplus"),
    ("attr missing", lambda: _softplus((("beta", 1.0),)), "not in normal form",
     "%0 = softplus"),
    ("attr twice", lambda: _softplus((("beta", 1.0), ("beta", 1.0), ("threshold", 2.0))),
     "an attribute is given twice", "%0 = softplus"),
    ("attr list", lambda: graph_with(Node("reshape", (X,), (("shape", [6]),), T(f32, 6))),
     "not in normal form", "%0 = reshape"),
    ("attr required", lambda: graph_with(Node("reshape", (X,), (), T(f32, 6))),
     "missing attribute 'shape'", "%0 = reshape"),
    ("order", _broken_order, "input 0 (%1) is used before it is defined", "%0 = relu"),
    ("foreign input", _foreign_input, "input 0 (<node outside the graph", "%0 = relu"),
    ("duplicate node", _duplicate_node, "appears twice", "%1 = add"),
    ("output", _dangling_output, "output 0 is not a node of this graph", None),
    ("param names", lambda: Graph("broken", (X, Node("param", (), (("name", "x"),), Y.type)),
                                  (X,)), "two parameters are named 'x'", "%x = param"),
    ("param identifier", lambda: Graph("broken", (Node("param", (), (("name", "a-b"),),
                                                       Y.type),), ()),
     "'a-b' is not a valid identifier", "%a-b = param"),
    ("param attrs", lambda: Graph("broken", (Node("param", (), (), Y.type),), ()),
     "exactly (('name', str),)", "%? = param"),
    ("param op", lambda: Graph("broken", (add_xy(),), ()),
     "a graph parameter must be a 'param' node", "%? = add"),
    ("stray param", lambda: graph_with(add_xy(inputs=(X, Node("param", (), (("name", "w"),),
                                                              Y.type)))),
     "a 'param' node that is not among the graph's parameters", "%0 = param"),
    ("bad type", lambda: graph_with(add_xy(type=TensorType(f32, (2, -3)))),
     "is not a TensorType of a dtype and a tuple of non-negative ints", "%0 = add"),
]


@pytest.mark.parametrize("make, fragment, where", [b[1:] for b in BROKEN],
                         ids=[b[0] for b in BROKEN])
def test_verify_catches(make: Callable[[], Graph], fragment: str, where: str | None) -> None:
    g = make()
    with pytest.raises(VerificationError) as info:
        verify(g)
    msg = str(info.value)
    assert fragment in msg
    assert msg.startswith("verify @broken")
    if where is not None:
        assert where in msg


def test_verification_error_names_node_op_line_and_loc() -> None:
    g = graph_with(Node("relu", (add_xy(type=T(f32, 9)),), (), T(f32, 9), loc="m.py:8"))
    with pytest.raises(VerificationError) as info:
        verify(g)
    e = info.value
    assert str(e).startswith("verify @broken: %0 = add (line 2, m.py:7): type f32[9] ")
    assert e.op == "add" and e.line == 2 and e.node is g.nodes[2]
    assert print_graph(g).splitlines()[e.line - 1].startswith("  %0 = add(%x, %y)")
    assert isinstance(e, ValueError)


# --------------------------------------------------------------------------------------
# Interpreter
# --------------------------------------------------------------------------------------

RNG = np.random.default_rng(0)


def test_interpret_elementwise_matches_numpy() -> None:
    b = Builder("mlp")
    x = b.param(T(f32, 4, 5), "x")
    w = b.param(T(f32, 5), "w")
    r = b.op("relu", b.op("add", x, w))
    g = b.build(b.op("mul", r, r), b.op("lt", x, w), w)
    xv = RNG.standard_normal((4, 5)).astype(np.float32)
    wv = RNG.standard_normal(5).astype(np.float32)
    sq, less, w_out = interpret(g, [xv, wv])
    np.testing.assert_array_equal(sq, np.maximum(xv + wv, 0) ** 2)
    assert sq.dtype == np.float32
    np.testing.assert_array_equal(less, xv < wv)
    assert less.dtype == np.bool_
    np.testing.assert_array_equal(w_out, wv)
    assert w_out is not wv and not np.shares_memory(w_out, wv)   # outputs are new arrays


def test_interpret_shape_ops_match_numpy() -> None:
    g = g_shapes()
    xv = RNG.standard_normal((2, 3)).astype(np.float32)
    yv = RNG.standard_normal((4, 3)).astype(np.float32)
    e, pd = interpret(g, [xv, yv])
    cat = np.concatenate([xv.reshape(3, 2).T, yv, xv], axis=0)
    np.testing.assert_array_equal(e, np.broadcast_to(cat[1:8:2, :][::-1, ::-1], (5, 4, 3)))
    want = np.full((4, 5), -1.5, np.float32)
    want[1::2, 0:3] = xv
    np.testing.assert_array_equal(pd, want)
    assert e.flags.writeable and e.shape == (5, 4, 3)


def test_interpret_consts() -> None:
    full, ints, bools, cplx, scalar, empty = interpret(g_consts(), [])
    np.testing.assert_array_equal(full, np.full((2, 2), 1.5, np.float32))
    assert full.dtype == np.float32
    np.testing.assert_array_equal(ints, np.array([[1, 2], [3, 4]], np.int64))
    np.testing.assert_array_equal(bools, [True, False])
    np.testing.assert_array_equal(cplx, np.array([1 + 2j, -0.5j], np.complex128))
    assert scalar.shape == () and scalar.dtype == np.float64 and scalar == 2.0
    assert empty.shape == (0, 3) and empty.dtype == np.float32


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def test_interpret_float16_int_and_bfloat16_paths() -> None:
    xv = np.array([-1.0, 0.7, 3.5], np.float16)
    iv = np.array([-7, 0, 5], np.int32)
    half, cplx = interpret(g_attrs(), [xv, iv])
    # float16 values stay float16 between nodes: each step rounds to float16
    c = np.minimum(np.maximum(xv, np.float16(0.5)), np.float16(2))
    g = _gelu_tanh(c.astype(np.float64)).astype(np.float16).astype(np.float64)
    sp = np.log1p(np.exp(2 * g)) / 2
    want = round_to_bfloat16(sp.astype(np.float16).astype(np.float32))
    assert half.dtype == np.float32                 # bfloat16 values are held as float32
    np.testing.assert_array_equal(half, want)
    np.testing.assert_array_equal(to_bfloat16_bits(half), to_bfloat16_bits(want))
    np.testing.assert_array_equal(cplx, np.array([-3, 0, 1], np.complex64))
    assert cplx.dtype == np.complex64


def test_interpret_matches_torch_on_bfloat16_arithmetic() -> None:
    torch = pytest.importorskip("torch")
    b = Builder("bf")
    x = b.param(T(bf16, 64), "x")
    y = b.param(T(f32, 64), "y")
    g = b.build(b.op("mul", b.op("add", x, b.op("cast", y, dtype=bf16)), x))
    xv = round_to_bfloat16(RNG.standard_normal(64).astype(np.float32) * 100)
    yv = RNG.standard_normal(64).astype(np.float32)
    (out,) = interpret(g, [xv, yv])
    tx = torch.from_numpy(xv).to(torch.bfloat16)
    want = ((tx + torch.from_numpy(yv).to(torch.bfloat16)) * tx).float().numpy()
    np.testing.assert_array_equal(out, want)


def test_bfloat16_bits_known_values() -> None:
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.0, 0.0, -0.0, np.inf, -np.inf,
                  3.3895314e38, 3.4028235e38, 1e-40], np.float32)
    bits = to_bfloat16_bits(x)
    assert bits.dtype == np.uint16
    assert [hex(int(v)) for v in bits] == [
        "0x3f80", "0x3f80", "0x3f82", "0xc000", "0x0", "0x8000", "0x7f80", "0xff80",
        "0x7f7f",          # the largest bfloat16
        "0x7f80",          # float32's largest rounds past it to inf, as PyTorch does
        "0x1"]             # subnormals round like any other value
    nan = to_bfloat16_bits(np.array([np.nan, -np.nan], np.float32))
    assert np.isnan(from_bfloat16_bits(nan)).all()
    back = from_bfloat16_bits(np.array([0x3F80, 0xC000, 0x7F80], np.uint16))
    np.testing.assert_array_equal(back, np.array([1.0, -2.0, np.inf], np.float32))
    assert back.dtype == np.float32
    with pytest.raises(TypeError, match="uint16"):
        from_bfloat16_bits(np.zeros(2, np.int32))


def test_bfloat16_bits_match_torch() -> None:
    torch = pytest.importorskip("torch")
    raw = RNG.integers(0, 2 ** 32, size=20000, dtype=np.uint64).astype(np.uint32)
    x = raw.view(np.float32)
    x = np.concatenate([x, np.float32([0.0, -0.0, np.inf, -np.inf, 1e-45, 65504.0])])
    ours = from_bfloat16_bits(to_bfloat16_bits(x))
    theirs = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(ours[finite].view(np.uint32), theirs[finite].view(np.uint32))
    assert np.isnan(ours[~finite]).all()


def test_interpret_rounds_bfloat16_inputs() -> None:
    b = Builder("id")
    x = b.param(T(bf16, 2), "x")
    (out,) = interpret(b.build(b.op("neg", x)), [np.array([1 + 2 ** -9, 3.0], np.float32)])
    np.testing.assert_array_equal(out, [-1.0, -3.0])


def test_interpret_checks_inputs() -> None:
    g = g_mlp()
    xv, wv = np.zeros((128, 784), np.float32), np.zeros(784, np.float32)
    with pytest.raises(TypeError, match=r"graph @loss takes 2 inputs \(%x: f32\[128,784\]"):
        interpret(g, [xv])
    with pytest.raises(TypeError, match="input %w of graph @loss must be a float32 array"):
        interpret(g, [xv, wv.astype(np.float64)])
    with pytest.raises(ValueError, match=r"input %x of graph @loss must have shape \[128, 784\]"):
        interpret(g, [xv.T, wv])


def test_interpret_catches_misbehaving_references() -> None:
    x = Node("param", (), (("name", "x"),), T(f32, 2, 3))
    wrong_shape = Graph("g", (x,), (Node("relu", (x,), (), T(f32, 6)),))
    with pytest.raises(ValueError, match=r"reference of relu returned shape \[2, 3\], but the "
                                         r"node's type is f32\[6\]"):
        interpret(wrong_shape, [np.zeros((2, 3), np.float32)])
    float_for_int = Graph("g", (x,), (Node("cast", (x,), (("dtype", f32),), T(i32, 2, 3)),))
    with pytest.raises(TypeError, match="reference of cast returned floating values"):
        interpret(float_for_int, [np.zeros((2, 3), np.float32)])


def test_interpret_reference_errors_name_the_node() -> None:
    b = Builder("p")
    x = b.param(T(i64, 2), "x")
    g = b.build(b.op("pow", x, x, loc="p.py:3"))
    with pytest.raises(ValueError, match="negative integer powers") as info:
        interpret(g, [np.array([2, -1], np.int64)])
    assert "while interpreting pow on (i64[2], i64[2]) -> i64[2] at p.py:3" in \
        info.value.__notes__


# --------------------------------------------------------------------------------------
# param and const
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, error, fragment", [
    (dict(value=[[1.0, 2.0], [3.0]], dtype=f32, shape=[2, 2]), ValueError,
     "payload has 1 elements at depth 1 but shape [2, 2] needs 2"),
    (dict(value=[1.0, 2.0], dtype=f32, shape=[3]), ValueError,
     "payload has 2 elements at depth 0 but shape [3] needs 3"),
    (dict(value=[1.0, 2.0], dtype=f32, shape=[2, 1]), ValueError, "too few levels"),
    (dict(value=[[1.0], [2.0]], dtype=f32, shape=[2]), ValueError, "nested deeper"),
    (dict(value=[1.0], dtype=f32, shape=[]), ValueError, "nested deeper"),
    (dict(value=1j, dtype=f64), TypeError, "complex payload 1j cannot be stored as float64"),
    (dict(value=[0.5], dtype=i32, shape=[1]), TypeError, "float payload 0.5 cannot be stored"),
    (dict(value=2, dtype=dt.bool_), TypeError, "int payload 2 cannot be stored as bool"),
    (dict(value=-1, dtype=dt.uint8), OverflowError, "payload -1 is out of range for uint8"),
    (dict(value=np.float32(1), dtype=f32), TypeError, "convert NumPy data with .tolist()"),
    (dict(value="1", dtype=f32), TypeError, "got '1' (str)"),
    (dict(value=1.0, dtype=f32, shape=[-1]), ValueError, "negative dimension"),
])
def test_const_rejects_bad_payloads(attrs: dict, error: type, fragment: str) -> None:
    with pytest.raises(error) as info:
        make_node("const", (), attrs)
    assert fragment in str(info.value)
    assert str(info.value).startswith("const")


def test_const_reference_and_type() -> None:
    n = make_node("const", (), dict(value=True, dtype=i32, shape=[2, 2]))
    assert n.type == T(i32, 2, 2) and n.attr("value") is True
    (v,) = interpret(Graph("c", (), (n,)), [])
    np.testing.assert_array_equal(v, np.ones((2, 2), np.int32))
    assert v.dtype == np.int32 and v.flags.writeable
    n = make_node("const", (), dict(value=[0.1, 1e30], dtype=bf16, shape=[2]))
    (v,) = interpret(Graph("c", (), (n,)), [])
    np.testing.assert_array_equal(v, round_to_bfloat16(np.float32([0.1, 1e30])))
    assert n.group is ir.Group.CONST


def test_param_cannot_be_made_as_an_op() -> None:
    with pytest.raises(TypeError, match="parameter 'x' cannot be inferred.*Builder.param"):
        make_node("param", (), dict(name="x"))
    assert ir.registry.get("param").group is ir.Group.PARAM
    assert ir.registry.get("param").nin == 0


def test_ir_package_exports() -> None:
    assert ir.parse is parse and ir.verify is verify and ir.interpret is interpret
    assert ir.print_graph is print_graph
    assert {"parse", "verify", "interpret", "print_graph"} <= set(ir.__all__)


# --------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------

def test_to_networkx_structure() -> None:
    G = to_networkx(g_shapes())
    assert list(G.nodes) == ["%x", "%y", "%0", "%1", "%2", "%3", "%4", "%5", "%6"]
    assert G.graph == {"name": "shapes", "outputs": ["%5", "%6"]}
    cat = G.nodes["%2"]
    assert cat["op"] == "cat" and cat["type"] == T(f32, 8, 3) and cat["attrs"] == {"axis": 0}
    assert cat["label"] == "%2 = cat : f32[8,3]" and cat["loc"] is None and not cat["param"]
    assert G.nodes["%x"]["label"] == "%x : f32[2,3]" and G.nodes["%x"]["param"]
    assert G.nodes["%5"]["outputs"] == (0,) and G.nodes["%6"]["outputs"] == (1,)
    assert G.nodes["%4"]["outputs"] == ()
    assert {u: G.edges[u, "%2"]["position"] for u in G.predecessors("%2")} == \
        {"%1": 0, "%y": 1, "%x": 2}
    assert G.number_of_edges() == 9
    assert set(G.successors("%x")) == {"%0", "%2", "%6"}
    import networkx as nx
    assert nx.is_directed_acyclic_graph(G)
    assert list(nx.topological_sort(G))[-1] in ("%5", "%6")


def test_to_networkx_repeated_input_keeps_every_position() -> None:
    G = g_mlp().to_networkx()
    assert G.edges["%1", "%2"]["positions"] == (0, 1)
    assert G.edges["%1", "%2"]["position"] == 0
    assert G.nodes["%0"]["loc"] == "model.py:14"


def test_to_dot_text() -> None:
    dot = g_mlp().to_dot()
    assert dot.startswith('digraph "loss" {\n')
    assert dot.endswith("}\n")
    lines = [line.strip() for line in dot.splitlines()]
    assert '"%x" [label="%x : f32[128,784]", shape=ellipse];' in lines
    assert '"%0" [label="%0 = add : f32[128,784]", tooltip="model.py:14"];' in lines
    assert '"%2" [label="%2 = mul : f32[128,784]", peripheries=2];' in lines
    assert '"%x" -> "%0" [label="0"];' in lines and '"%w" -> "%0" [label="1"];' in lines
    assert '"%0" -> "%1";' in lines                       # one input: no position label
    assert '"%2" -> "return";' in lines
    assert to_dot(g_empty()).count("->") == 0


def test_to_dot_escapes_quotes() -> None:
    dot = to_dot(g_odd_names())
    assert dot.startswith('digraph "my graph" {')
    assert 'tooltip="  spaced \\"quoted\\"\\n"' in dot


def test_render_without_graphviz(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))            # a PATH with no `dot` on it
    with pytest.raises(RuntimeError, match="Graphviz's `dot` is not installed"):
        g_mlp().render(str(tmp_path / "g.svg"))
    assert not (tmp_path / "g.svg").exists()
    with pytest.raises(ValueError, match="use a path ending in .svg or .png"):
        render(g_mlp(), tmp_path / "g.jpeg")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_with_graphviz(tmp_path: Any) -> None:
    g = g_shapes()
    svg = tmp_path / "g.svg"
    assert render(g, svg) == str(svg)
    text = svg.read_text()
    assert "<svg" in text and "%2 = cat : f32[8,3]" in text
    png = tmp_path / "g.PNG"
    assert g.render(str(png)) == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    weird = tmp_path / "odd.svg"
    render(g_odd_names(), weird)
    assert "my graph" in weird.read_text()


# --------------------------------------------------------------------------------------
# The design document's example, and every attribute kind
# --------------------------------------------------------------------------------------

DESIGN = """\
graph @loss(%x: f32[128,784], %w: f32[784,512], %b: f32[512]) {
  %0 = matmul(%x, %w)                     : f32[128,512]   # model.py:14
  %1 = add(%0, %b)                        : f32[128,512]   # model.py:14
  %2 = relu(%1)                           : f32[128,512]   # model.py:15
  %3 = sum(%2, axes=[0,1], keepdim=false) : f32[]          # model.py:16
  return %3
}
"""


def test_design_example_text_and_interpretation() -> None:
    g = parse(DESIGN)
    assert print_graph(g) == DESIGN
    b = Builder("loss")
    x = b.param(T(f32, 128, 784), "x")
    w = b.param(T(f32, 784, 512), "w")
    bias = b.param(T(f32, 512), "b")
    h = b.op("add", b.op("matmul", x, w, loc="model.py:14"), bias, loc="model.py:14")
    built = b.build(b.op("sum", b.op("relu", h, loc="model.py:15"), axes=[0, 1],
                         loc="model.py:16"))
    assert built == g
    small = parse(DESIGN.replace("128", "4").replace("784", "6").replace("512", "5"))
    xv, wv, bv = (RNG.standard_normal(s).astype(np.float32) for s in [(4, 6), (6, 5), (5,)])
    (loss,) = interpret(small, [xv, wv, bv])
    assert loss.shape == () and loss.dtype == np.float32
    np.testing.assert_allclose(loss, np.maximum(xv @ wv + bv, 0).sum(), rtol=1e-5)


ALL_KINDS = ir.OpDef(
    "_test_all_kinds", ir.Group.UNARY, 1,
    attrs=tuple(ir.registry.Attr(f"a_{k.value}", k) for k in ir.registry.AttrKind),
    infer=lambda types, **attrs: types[0])


@pytest.mark.parametrize("values", [
    dict(a_int=-3, a_ints=[], a_float=0.5, a_bool=True, a_dtype=dt.complex128,
         a_str="é\t\"x\"", a_scalar=2, a_value=[[1, 2.5], [True, 1j]], a_opt_int=None,
         a_opt_ints=None),
    dict(a_int=0, a_ints=[1, -2], a_float=-1e-300, a_bool=False, a_dtype=dt.bool_,
         a_str="", a_scalar=2.0, a_value=-0.0, a_opt_int=7, a_opt_ints=[]),
    dict(a_scalar=-1.5 + 0.25j, a_opt_ints=[0, 5], a_value=[]),
    dict(),
])
def test_every_attribute_kind_roundtrips(values: dict, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setitem(ir.registry.OPS, ALL_KINDS.name, ALL_KINDS)
    b = Builder("kinds")
    x = b.param(T(f32, 2), "x")
    g = b.build(b.op(ALL_KINDS.name, x, **values))
    g2 = roundtrip(g)
    node = g2.nodes[1]
    for k, v in node.attrs:
        assert type(v) is type(g.nodes[1].attr(k))
    if "a_scalar" in values:
        assert type(node.attr("a_scalar")) is type(values["a_scalar"])
