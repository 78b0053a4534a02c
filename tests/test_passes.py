"""Tests for the graph passes (simplify, fold, cse, dce), the rewrite engine and the
pass manager.

Every pass gets before/after text tests: the input is IR text, the expected output is IR
text, and the pass's result must print exactly as the parsed expectation does. Each test
also checks that the verifier accepts the result and that the interpreter computes the
same bits before and after on inputs full of NaN, infinities and signed zeros.
"""
from __future__ import annotations

import io
import re
import textwrap
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llgrad  # noqa: F401  (fills the op registry)
from llgrad import _log
from llgrad.ir import dtypes as dt
from llgrad.ir.graph import Builder, Graph, Node, make_node
from llgrad.ir.interpret import interpret, numpy_dtype, round_to_bfloat16
from llgrad.ir.parser import parse
from llgrad.ir.printer import print_graph
from llgrad.ir.registry import Group
from llgrad.ir.types import TensorType
from llgrad.ir.verify import VerificationError, verify
from llgrad.passes import (FOLD_RULES, PIPELINE, SIMPLIFY_RULES, Pass, PassError, Rule,
                           cse, dce, fold, make_pass, pat, run_pipeline, simplify, var)
from llgrad.passes.dce import dead_nodes
from llgrad.passes.fold import MAX_ELEMENTS
from llgrad.passes.manager import node_count
from llgrad.passes.rewrite import RewriteError, rewrite, rewrite_counted
from llgrad.passes.simplify import lossless_cast

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning",
                                        "ignore::numpy.exceptions.ComplexWarning")

f32, f64, f16, bf16 = dt.float32, dt.float64, dt.float16, dt.bfloat16
i8, i32, i64, u8, b1 = dt.int8, dt.int32, dt.int64, dt.uint8, dt.bool_


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------

def random_input(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    """Values of type `t` for the interpreter, with the special values mixed in."""
    d, shape = t.dtype, t.shape
    if d is b1:
        return rng.random(shape) < 0.5
    if d.is_integer:
        info = np.iinfo(d.np)
        a = rng.integers(-5, 6, size=shape).astype(d.np) if d.kind == "i" else \
            rng.integers(0, 10, size=shape).astype(d.np)
        extremes = np.array([info.min, info.max, 0], dtype=d.np)
        mask = rng.random(shape) < 0.2
        return np.where(mask, rng.choice(extremes, size=shape), a).astype(d.np)
    real = rng.normal(size=shape) * 3
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0])
    mask = rng.random(shape) < 0.3
    real = np.where(mask, rng.choice(specials, size=shape), real)
    if d.is_complex:
        real = real + 1j * rng.normal(size=shape)
    a = np.asarray(real).astype(numpy_dtype(d))
    return round_to_bfloat16(a) if d is bf16 else a


def assert_same_bits(a: np.ndarray, b: np.ndarray, what: str = "") -> None:
    """Equal dtype, shape and values; NaN equals NaN (any sign), but 0.0 and -0.0 differ."""
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    parts = [(a.real, b.real), (a.imag, b.imag)] if a.dtype.kind == "c" else [(a, b)]
    for x, y in parts:
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), (what, x, y)
        if x.dtype.kind == "f":               # the sign of a NaN carries no meaning
            numbers = ~np.isnan(x)
            assert np.array_equal(np.signbit(x)[numbers], np.signbit(y)[numbers]), \
                (what, "signed zeros", x, y)


def assert_same_semantics(before: Graph, after: Graph, seeds: int = 3) -> None:
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        inputs = [random_input(p.type, rng) for p in before.params]
        for i, (x, y) in enumerate(zip(interpret(before, inputs), interpret(after, inputs))):
            assert_same_bits(x, y, f"output {i} with seed {seed}")


def normalized(text: str) -> str:
    """The printer's text for hand-written IR text (the parser renumbers and aligns)."""
    return print_graph(parse(textwrap.dedent(text)))


def check_pass(fn: Callable[[Graph], Graph], before: str, after: str) -> Graph:
    """The before/after golden test: text in, expected text out, verified, same values."""
    g = parse(textwrap.dedent(before))
    verify(g)
    out = fn(g)
    verify(out)
    assert print_graph(out) == normalized(after)
    assert parse(print_graph(out)) == out
    assert [p is q for p, q in zip(out.params, g.params)] == [True] * len(g.params)
    assert_same_semantics(g, out)
    return out


# --------------------------------------------------------------------------------------
# simplify: one row per rule (the rule must fire, and give exactly the text shown)
# --------------------------------------------------------------------------------------

SIMPLIFY_ROWS: list[tuple[str, str, str]] = [
    ("add-zero", """
     graph @f(%x: i32[2,3]) {
       %0 = const(value=0, dtype=i32, shape=[]) : i32[]
       %1 = add(%x, %0) : i32[2,3]
       return %1
     }""", """
     graph @f(%x: i32[2,3]) {
       return %x
     }"""),
    ("add-zero", """
     graph @f(%x: f32[2,3]) {
       %0 = const(value=-0.0, dtype=f32, shape=[]) : f32[]
       %1 = add(%x, %0) : f32[2,3]
       return %1
     }""", """
     graph @f(%x: f32[2,3]) {
       return %x
     }"""),
    ("zero-add", """
     graph @f(%x: i64[3]) {
       %0 = const(value=0, dtype=i64, shape=[2,3]) : i64[2,3]
       %1 = add(%0, %x) : i64[2,3]
       return %1
     }""", """
     graph @f(%x: i64[3]) {
       %0 = expand(%x, shape=[2,3]) : i64[2,3]
       return %0
     }"""),
    ("sub-zero", """
     graph @f(%x: f32[2,3]) {
       %0 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %1 = sub(%x, %0) : f32[2,3]
       return %1
     }""", """
     graph @f(%x: f32[2,3]) {
       return %x
     }"""),
    ("add-zero-nonneg", """
     graph @f(%x: f32[2,3]) {
       %0 = relu(%x) : f32[2,3]
       %1 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %2 = add(%0, %1) : f32[2,3]
       return %2
     }""", """
     graph @f(%x: f32[2,3]) {
       %0 = relu(%x) : f32[2,3]
       return %0
     }"""),
    ("zero-add-nonneg", """
     graph @f(%x: i32[2,3]) {
       %0 = cast(%x, dtype=f64) : f64[2,3]
       %1 = const(value=0.0, dtype=f64, shape=[3]) : f64[3]
       %2 = add(%1, %0) : f64[2,3]
       return %2
     }""", """
     graph @f(%x: i32[2,3]) {
       %0 = cast(%x, dtype=f64) : f64[2,3]
       return %0
     }"""),
    ("sub-zero-nonneg", """
     graph @f(%x: f32[2,3]) {
       %0 = exp(%x) : f32[2,3]
       %1 = const(value=-0.0, dtype=f32, shape=[]) : f32[]
       %2 = sub(%0, %1) : f32[2,3]
       return %2
     }""", """
     graph @f(%x: f32[2,3]) {
       %0 = exp(%x) : f32[2,3]
       return %0
     }"""),
    ("mul-one", """
     graph @f(%x: f32[2,3]) {
       %0 = const(value=1, dtype=f32, shape=[]) : f32[]
       %1 = mul(%x, %0) : f32[2,3]
       return %1
     }""", """
     graph @f(%x: f32[2,3]) {
       return %x
     }"""),
    ("one-mul", """
     graph @f(%x: bf16[2,3]) {
       %0 = const(value=[1.0,1.0,1.0], dtype=bf16, shape=[3]) : bf16[3]
       %1 = mul(%0, %x) : bf16[2,3]
       return %1
     }""", """
     graph @f(%x: bf16[2,3]) {
       return %x
     }"""),
    ("div-one", """
     graph @f(%x: f64[3]) {
       %0 = const(value=1.0, dtype=f64, shape=[2,3]) : f64[2,3]
       %1 = div(%x, %0) : f64[2,3]
       return %1
     }""", """
     graph @f(%x: f64[3]) {
       %0 = expand(%x, shape=[2,3]) : f64[2,3]
       return %0
     }"""),
    ("mul-zero", """
     graph @f(%x: i32[2,3]) {
       %0 = const(value=0, dtype=i32, shape=[]) : i32[]
       %1 = mul(%x, %0) : i32[2,3]
       return %1
     }""", """
     graph @f(%x: i32[2,3]) {
       %0 = const(value=0, dtype=i32, shape=[2,3]) : i32[2,3]
       return %0
     }"""),
    ("zero-mul", """
     graph @f(%x: bool[2,3]) {
       %0 = const(value=false, dtype=bool, shape=[]) : bool[]
       %1 = mul(%0, %x) : bool[2,3]
       return %1
     }""", """
     graph @f(%x: bool[2,3]) {
       %0 = const(value=false, dtype=bool, shape=[2,3]) : bool[2,3]
       return %0
     }"""),
    ("sub-self", """
     graph @f(%x: i64[4]) {
       %0 = sub(%x, %x) : i64[4]
       return %0
     }""", """
     graph @f(%x: i64[4]) {
       %0 = const(value=0, dtype=i64, shape=[4]) : i64[4]
       return %0
     }"""),
    ("neg-neg", """
     graph @f(%x: i8[4]) {
       %0 = neg(%x) : i8[4]
       %1 = neg(%0) : i8[4]
       return %1
     }""", """
     graph @f(%x: i8[4]) {
       return %x
     }"""),
    ("pow-two", """
     graph @f(%x: f32[2,3]) {
       %0 = const(value=2.0, dtype=f32, shape=[]) : f32[]
       %1 = pow(%x, %0) : f32[2,3]
       return %1
     }""", """
     graph @f(%x: f32[2,3]) {
       %0 = mul(%x, %x) : f32[2,3]
       return %0
     }"""),
    ("pow-two", """
     graph @f(%x: f16[3]) {
       %0 = const(value=2, dtype=f16, shape=[2,3]) : f16[2,3]
       %1 = pow(%x, %0) : f16[2,3]
       return %1
     }""", """
     graph @f(%x: f16[3]) {
       %0 = mul(%x, %x) : f16[3]
       %1 = expand(%0, shape=[2,3]) : f16[2,3]
       return %1
     }"""),
    ("pow-one", """
     graph @f(%x: i32[3]) {
       %0 = const(value=1, dtype=i32, shape=[]) : i32[]
       %1 = pow(%x, %0) : i32[3]
       return %1
     }""", """
     graph @f(%x: i32[3]) {
       return %x
     }"""),
    ("pow-zero", """
     graph @f(%x: f32[3]) {
       %0 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %1 = pow(%x, %0) : f32[3]
       return %1
     }""", """
     graph @f(%x: f32[3]) {
       %0 = const(value=1.0, dtype=f32, shape=[3]) : f32[3]
       return %0
     }"""),
    ("abs-abs", """
     graph @f(%x: f32[3]) {
       %0 = abs(%x) : f32[3]
       %1 = abs(%0) : f32[3]
       return %1
     }""", """
     graph @f(%x: f32[3]) {
       %0 = abs(%x) : f32[3]
       return %0
     }"""),
    ("abs-neg", """
     graph @f(%x: i32[3]) {
       %0 = neg(%x) : i32[3]
       %1 = abs(%0) : i32[3]
       return %1
     }""", """
     graph @f(%x: i32[3]) {
       %0 = abs(%x) : i32[3]
       return %0
     }"""),
    ("not-not", """
     graph @f(%x: bool[3]) {
       %0 = logical_not(%x) : bool[3]
       %1 = logical_not(%0) : bool[3]
       return %1
     }""", """
     graph @f(%x: bool[3]) {
       return %x
     }"""),
    ("bitnot-bitnot", """
     graph @f(%x: u8[3]) {
       %0 = bitwise_not(%x) : u8[3]
       %1 = bitwise_not(%0) : u8[3]
       return %1
     }""", """
     graph @f(%x: u8[3]) {
       return %x
     }"""),
    ("stop-gradient", """
     graph @f(%x: f32[3]) {
       %0 = stop_gradient(%x) : f32[3]
       %1 = mul(%0, %x) : f32[3]
       return %1
     }""", """
     graph @f(%x: f32[3]) {
       %0 = mul(%x, %x) : f32[3]
       return %0
     }"""),
    ("clamp-none", """
     graph @f(%x: f32[3]) {
       %0 = clamp(%x, min=none, max=none) : f32[3]
       return %0
     }""", """
     graph @f(%x: f32[3]) {
       return %x
     }"""),
    ("where-same", """
     graph @f(%c: bool[2,3], %x: f32[3]) {
       %0 = where(%c, %x, %x) : f32[2,3]
       return %0
     }""", """
     graph @f(%c: bool[2,3], %x: f32[3]) {
       %0 = expand(%x, shape=[2,3]) : f32[2,3]
       return %0
     }"""),
    ("where-true", """
     graph @f(%x: f32[3], %y: f32[3]) {
       %0 = const(value=true, dtype=bool, shape=[]) : bool[]
       %1 = where(%0, %x, %y) : f32[3]
       return %1
     }""", """
     graph @f(%x: f32[3], %y: f32[3]) {
       return %x
     }"""),
    ("where-false", """
     graph @f(%x: f32[3], %y: f32[3]) {
       %0 = const(value=[false,false,false], dtype=bool, shape=[3]) : bool[3]
       %1 = where(%0, %x, %y) : f32[3]
       return %1
     }""", """
     graph @f(%x: f32[3], %y: f32[3]) {
       return %y
     }"""),
    ("cast-same", """
     graph @f(%x: f16[3]) {
       %0 = cast(%x, dtype=f16) : f16[3]
       return %0
     }""", """
     graph @f(%x: f16[3]) {
       return %x
     }"""),
    ("cast-cast", """
     graph @f(%x: i8[3]) {
       %0 = cast(%x, dtype=i32) : i32[3]
       %1 = cast(%0, dtype=bf16) : bf16[3]
       return %1
     }""", """
     graph @f(%x: i8[3]) {
       %0 = cast(%x, dtype=bf16) : bf16[3]
       return %0
     }"""),
    ("cast-cast", """
     graph @f(%x: f32[3]) {
       %0 = cast(%x, dtype=f64) : f64[3]
       %1 = cast(%0, dtype=f32) : f32[3]
       return %1
     }""", """
     graph @f(%x: f32[3]) {
       return %x
     }"""),
    ("reshape-same", """
     graph @f(%x: f32[2,3]) {
       %0 = reshape(%x, shape=[-1,3]) : f32[2,3]
       return %0
     }""", """
     graph @f(%x: f32[2,3]) {
       return %x
     }"""),
    ("reshape-reshape", """
     graph @f(%x: f32[2,3]) {
       %0 = reshape(%x, shape=[6]) : f32[6]
       %1 = reshape(%0, shape=[3,2]) : f32[3,2]
       return %1
     }""", """
     graph @f(%x: f32[2,3]) {
       %0 = reshape(%x, shape=[3,2]) : f32[3,2]
       return %0
     }"""),
    ("permute-identity", """
     graph @f(%x: f32[2,3,4]) {
       %0 = permute(%x, perm=[0,-2,2]) : f32[2,3,4]
       return %0
     }""", """
     graph @f(%x: f32[2,3,4]) {
       return %x
     }"""),
    ("permute-permute", """
     graph @f(%x: f32[2,3,4]) {
       %0 = permute(%x, perm=[1,2,0]) : f32[3,4,2]
       %1 = permute(%0, perm=[2,0,1]) : f32[2,3,4]
       %2 = permute(%x, perm=[2,0,1]) : f32[4,2,3]
       %3 = permute(%2, perm=[0,2,1]) : f32[4,3,2]
       return (%1, %3)
     }""", """
     graph @f(%x: f32[2,3,4]) {
       %0 = permute(%x, perm=[2,1,0]) : f32[4,3,2]
       return (%x, %0)
     }"""),
    ("expand-same", """
     graph @f(%x: f32[2,3]) {
       %0 = expand(%x, shape=[-1,3]) : f32[2,3]
       return %0
     }""", """
     graph @f(%x: f32[2,3]) {
       return %x
     }"""),
    ("expand-expand", """
     graph @f(%x: f32[1,3]) {
       %0 = expand(%x, shape=[2,3]) : f32[2,3]
       %1 = expand(%0, shape=[4,2,3]) : f32[4,2,3]
       return %1
     }""", """
     graph @f(%x: f32[1,3]) {
       %0 = expand(%x, shape=[4,2,3]) : f32[4,2,3]
       return %0
     }"""),
    ("slice-whole", """
     graph @f(%x: f32[2,1]) {
       %0 = slice(%x, starts=[0,0], stops=[2,1], steps=[1,7]) : f32[2,1]
       return %0
     }""", """
     graph @f(%x: f32[2,1]) {
       return %x
     }"""),
    ("slice-slice", """
     graph @f(%x: f32[10,4]) {
       %0 = slice(%x, starts=[1,0], stops=[10,4], steps=[2,1]) : f32[5,4]
       %1 = slice(%0, starts=[1,1], stops=[5,3], steps=[2,1]) : f32[2,2]
       return %1
     }""", """
     graph @f(%x: f32[10,4]) {
       %0 = slice(%x, starts=[3,1], stops=[8,3], steps=[4,1]) : f32[2,2]
       return %0
     }"""),
    ("flip-trivial", """
     graph @f(%x: f32[1,3]) {
       %0 = flip(%x, axes=[0]) : f32[1,3]
       return %0
     }""", """
     graph @f(%x: f32[1,3]) {
       return %x
     }"""),
    ("flip-flip", """
     graph @f(%x: f32[2,3]) {
       %0 = flip(%x, axes=[0,1]) : f32[2,3]
       %1 = flip(%0, axes=[-1]) : f32[2,3]
       return %1
     }""", """
     graph @f(%x: f32[2,3]) {
       %0 = flip(%x, axes=[0]) : f32[2,3]
       return %0
     }"""),
    ("pad-none", """
     graph @f(%x: f32[2,3]) {
       %0 = pad(%x, lows=[0,0], highs=[0,0], interior=[0,0], value=1.0) : f32[2,3]
       return %0
     }""", """
     graph @f(%x: f32[2,3]) {
       return %x
     }"""),
    ("cat-one", """
     graph @f(%x: f32[2,3]) {
       %0 = cat(%x, axis=1) : f32[2,3]
       return %0
     }""", """
     graph @f(%x: f32[2,3]) {
       return %x
     }"""),
    ("cat-cat", """
     graph @f(%x: f32[2,3], %y: f32[2,1]) {
       %0 = cat(%x, %y, axis=1) : f32[2,4]
       %1 = cat(%y, %0, axis=-1) : f32[2,5]
       return %1
     }""", """
     graph @f(%x: f32[2,3], %y: f32[2,1]) {
       %0 = cat(%y, %x, %y, axis=-1) : f32[2,5]
       return %0
     }"""),
    ("pad-add-pad", """
     graph @f(%x: f32[2,3], %y: f32[1,3]) {
       %0 = pad(%x, lows=[0,0], highs=[2,0], interior=[0,0], value=0.0) : f32[4,3]
       %1 = pad(%y, lows=[3,0], highs=[0,0], interior=[0,0], value=0.0) : f32[4,3]
       %2 = add(%1, %0) : f32[4,3]
       return %2
     }""", """
     graph @f(%x: f32[2,3], %y: f32[1,3]) {
       %0 = const(value=0.0, dtype=f32, shape=[2,3]) : f32[2,3]
       %1 = add(%x, %0) : f32[2,3]
       %2 = const(value=0.0, dtype=f32, shape=[1,3]) : f32[1,3]
       %3 = const(value=0.0, dtype=f32, shape=[1,3]) : f32[1,3]
       %4 = add(%y, %3) : f32[1,3]
       %5 = cat(%1, %2, %4, axis=0) : f32[4,3]
       return %5
     }"""),
    ("pad-add-pad", """
     graph @f(%x: f32[2,3], %y: f32[2,2]) {
       %0 = relu(%x) : f32[2,3]
       %1 = pad(%0, lows=[0,1], highs=[0,3], interior=[0,0], value=0.0) : f32[2,7]
       %2 = abs(%y) : f32[2,2]
       %3 = pad(%2, lows=[0,4], highs=[0,1], interior=[0,0], value=0.0) : f32[2,7]
       %4 = add(%1, %3) : f32[2,7]
       return %4
     }""", """
     graph @f(%x: f32[2,3], %y: f32[2,2]) {
       %0 = relu(%x) : f32[2,3]
       %1 = abs(%y) : f32[2,2]
       %2 = cat(%0, %1, axis=1) : f32[2,5]
       %3 = pad(%2, lows=[0,1], highs=[0,1], interior=[0,0], value=0.0) : f32[2,7]
       return %3
     }"""),
    ("reduce-single", """
     graph @f(%x: f32[2,1,3]) {
       %0 = amax(%x, axes=[1], keepdim=false) : f32[2,3]
       return %0
     }""", """
     graph @f(%x: f32[2,1,3]) {
       %0 = reshape(%x, shape=[2,3]) : f32[2,3]
       return %0
     }"""),
    ("reduce-single", """
     graph @f(%x: i32[1,1]) {
       %0 = sum(%x, axes=[], keepdim=false) : i64[]
       return %0
     }""", """
     graph @f(%x: i32[1,1]) {
       %0 = reshape(%x, shape=[]) : i32[]
       %1 = cast(%0, dtype=i64) : i64[]
       return %1
     }"""),
    ("reduce-single", """
     graph @f(%x: f32[1,3]) {
       %0 = prod(%x, axes=[0], keepdim=true) : f32[1,3]
       return %0
     }""", """
     graph @f(%x: f32[1,3]) {
       return %x
     }"""),
]


@pytest.mark.parametrize("rule,before,after", SIMPLIFY_ROWS,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(SIMPLIFY_ROWS)])
def test_simplify_rule(rule: str, before: str, after: str) -> None:
    fired: dict[str, int] = {}

    def run(g: Graph) -> Graph:
        out, counts = rewrite_counted(g, SIMPLIFY_RULES)
        fired.update(counts)
        return out

    check_pass(run, before, after)
    assert rule in fired, f"rule {rule} did not fire (fired: {fired})"


def test_every_simplify_rule_has_a_row() -> None:
    names = [r.name for r in SIMPLIFY_RULES]
    assert len(set(names)) == len(names), "rule names must be unique"
    assert set(names) == {row[0] for row in SIMPLIFY_ROWS}
    assert all(r.doc for r in SIMPLIFY_RULES)


# Graphs that look simplifiable but are not, bit for bit: simplify must leave them alone.
UNSAFE = [
    ("x * 0.0 (nan * 0 is nan, -1 * 0 is -0)", """
     graph @f(%x: f32[4]) {
       %0 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %1 = mul(%x, %0) : f32[4]
       return %1
     }"""),
    ("0.0 * x in bf16", """
     graph @f(%x: bf16[4]) {
       %0 = const(value=0, dtype=bf16, shape=[4]) : bf16[4]
       %1 = mul(%0, %x) : bf16[4]
       return %1
     }"""),
    ("pads of overlapping windows add elements", """
     graph @f(%x: f32[2,3], %y: f32[2,3]) {
       %0 = pad(%x, lows=[0,0], highs=[1,0], interior=[0,0], value=0.0) : f32[3,3]
       %1 = pad(%y, lows=[1,0], highs=[0,0], interior=[0,0], value=0.0) : f32[3,3]
       %2 = add(%0, %1) : f32[3,3]
       return %2
     }"""),
    ("a pad of ones adds 1 in the other window", """
     graph @f(%x: f32[2,3], %y: f32[2,3]) {
       %0 = pad(%x, lows=[0,0], highs=[2,0], interior=[0,0], value=0.0) : f32[4,3]
       %1 = pad(%y, lows=[2,0], highs=[0,0], interior=[0,0], value=1.0) : f32[4,3]
       %2 = add(%0, %1) : f32[4,3]
       return %2
     }"""),
    ("pads with -0.0 keep an input's -0.0 (x + -0.0 is x)", """
     graph @f(%x: f32[2,3], %y: f32[2,3]) {
       %0 = pad(%x, lows=[0,0], highs=[2,0], interior=[0,0], value=-0.0) : f32[4,3]
       %1 = pad(%y, lows=[2,0], highs=[0,0], interior=[0,0], value=-0.0) : f32[4,3]
       %2 = add(%0, %1) : f32[4,3]
       return %2
     }"""),
    ("x + 0.0 (-0.0 + 0.0 is +0.0)", """
     graph @f(%x: f32[4]) {
       %0 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %1 = add(%x, %0) : f32[4]
       return %1
     }"""),
    ("x - (-0.0) is x + 0.0", """
     graph @f(%x: f64[4]) {
       %0 = const(value=-0.0, dtype=f64, shape=[]) : f64[]
       %1 = sub(%x, %0) : f64[4]
       return %1
     }"""),
    ("sqrt(-0.0) is -0.0, so sqrt(x) + 0.0 stays", """
     graph @f(%x: f32[4]) {
       %0 = sqrt(%x) : f32[4]
       %1 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %2 = add(%0, %1) : f32[4]
       return %2
     }"""),
    ("x - x on floats (inf - inf is nan)", """
     graph @f(%x: f32[4]) {
       %0 = sub(%x, %x) : f32[4]
       return %0
     }"""),
    ("x * 1 on complex (inf parts make nan)", """
     graph @f(%x: c64[4]) {
       %0 = const(value=1.0+0.0j, dtype=c64, shape=[]) : c64[]
       %1 = mul(%x, %0) : c64[4]
       return %1
     }"""),
    ("float sum over a size-1 axis (-0.0 accumulates to +0.0)", """
     graph @f(%x: f32[1,3]) {
       %0 = sum(%x, axes=[0], keepdim=false) : f32[3]
       return %0
     }"""),
    ("sum with axes=[] means every axis", """
     graph @f(%x: i32[2,3]) {
       %0 = sum(%x, axes=[], keepdim=false) : i64[]
       return %0
     }"""),
    ("abs(-x) on unsigned (-x wraps)", """
     graph @f(%x: u8[4]) {
       %0 = neg(%x) : u8[4]
       %1 = abs(%0) : u8[4]
       return %1
     }"""),
    ("lossy inner cast: f32 -> i32 -> f32 truncates", """
     graph @f(%x: f32[4]) {
       %0 = cast(%x, dtype=i32) : i32[4]
       %1 = cast(%0, dtype=f32) : f32[4]
       return %1
     }"""),
    ("lossy inner cast: i32 -> f32 -> i64 rounds", """
     graph @f(%x: i32[4]) {
       %0 = cast(%x, dtype=f32) : f32[4]
       %1 = cast(%0, dtype=i64) : i64[4]
       return %1
     }"""),
    ("a non-constant condition", """
     graph @f(%c: bool[4], %x: f32[4], %y: f32[4]) {
       %0 = where(%c, %x, %y) : f32[4]
       return %0
     }"""),
    ("pow(x, 2) with a non-uniform exponent", """
     graph @f(%x: f32[2]) {
       %0 = const(value=[2.0,3.0], dtype=f32, shape=[2]) : f32[2]
       %1 = pow(%x, %0) : f32[2]
       return %1
     }"""),
]


@pytest.mark.parametrize("why,text", UNSAFE, ids=[u[0] for u in UNSAFE])
def test_simplify_leaves_inexact_identities_alone(why: str, text: str) -> None:
    check_pass(simplify, text, text)


def test_nan_safety_of_float_mul_zero_in_the_pipeline() -> None:
    """The whole pipeline keeps x * 0.0: with x = nan, inf, -1 the result is nan, nan, -0."""
    g = parse(textwrap.dedent("""
        graph @f(%x: f32[3]) {
          %0 = const(value=0.0, dtype=f32, shape=[]) : f32[]
          %1 = mul(%x, %0) : f32[3]
          return %1
        }"""))
    out = run_pipeline(g, verify=True).graph
    assert [n.op for n in out.nodes[1:]] == ["const", "mul"]
    (y,) = interpret(out, [np.array([np.nan, np.inf, -1.0], dtype=np.float32)])
    assert np.isnan(y[0]) and np.isnan(y[1]) and y[2] == 0 and np.signbit(y[2])


def test_simplify_keeps_locations_and_chains_rules() -> None:
    """neg(neg(x * 1)) goes in one call; nodes built by rules carry the root's location."""
    before = """
    graph @f(%x: f32[2,3]) {
      %0 = const(value=1.0, dtype=f32, shape=[]) : f32[]
      %1 = mul(%x, %0) : f32[2,3]   # a.py:1
      %2 = neg(%1) : f32[2,3]   # a.py:2
      %3 = neg(%2) : f32[2,3]   # a.py:3
      %4 = reshape(%3, shape=[6]) : f32[6]   # a.py:4
      %5 = reshape(%4, shape=[3,2]) : f32[3,2]   # a.py:5
      return %5
    }"""
    after = """
    graph @f(%x: f32[2,3]) {
      %0 = reshape(%x, shape=[3,2]) : f32[3,2]   # a.py:5
      return %0
    }"""
    check_pass(simplify, before, after)


def test_lossless_cast_table() -> None:
    assert lossless_cast(b1, f16) and lossless_cast(u8, bf16) and lossless_cast(i8, bf16)
    assert lossless_cast(i16 := dt.int16, f32) and not lossless_cast(i16, f16)
    assert lossless_cast(i32, f64) and not lossless_cast(i32, f32)
    assert not lossless_cast(i64, f64) and lossless_cast(i32, i64)
    assert not lossless_cast(u8, i8) and lossless_cast(u8, dt.int16)
    assert lossless_cast(f16, f32) and lossless_cast(bf16, f32) and not lossless_cast(f16, bf16)
    assert not lossless_cast(f32, f16) and not lossless_cast(f32, i64)
    assert lossless_cast(f64, dt.complex128) and not lossless_cast(f64, dt.complex64)


@pytest.mark.parametrize("src", [b1, u8, i8, dt.int16, i32, i64, f16, bf16, f32, f64])
@pytest.mark.parametrize("mid", [u8, i8, i32, i64, f16, bf16, f32, f64])
def test_cast_cast_is_exact_wherever_it_fires(src: dt.DType, mid: dt.DType) -> None:
    """Every (src, mid, dst) triple that cast-cast rewrites interprets to the same bits."""
    for dst in (b1, u8, i32, i64, f16, bf16, f32, f64):
        b = Builder("f")
        x = b.param(TensorType(src, (64,)), "x")
        g = b.build(b.op("cast", b.op("cast", x, dtype=mid), dtype=dst))
        out = simplify(g)
        verify(out)
        if lossless_cast(src, mid):
            assert len(out.nodes) < len(g.nodes)
        elif mid not in (src, dst):
            assert out == g                      # a lossy middle cast must stay
        assert_same_semantics(g, out)


# --------------------------------------------------------------------------------------
# fold
# --------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------
# fold
# --------------------------------------------------------------------------------------

FOLD_ROWS: list[tuple[str, str, str]] = [
    ("a chain of float ops, in float32", """
     graph @f() {
       %0 = const(value=2.0, dtype=f32, shape=[]) : f32[]
       %1 = const(value=3.0, dtype=f32, shape=[]) : f32[]
       %2 = mul(%0, %1) : f32[]
       %3 = neg(%2) : f32[]
       %4 = exp(%3) : f32[]
       return %4
     }""", """
     graph @f() {
       %0 = const(value=0.002478752052411437, dtype=f32, shape=[]) : f32[]
       return %0
     }"""),
    ("float16 rounds like the interpreter", """
     graph @f() {
       %0 = const(value=0.1, dtype=f16, shape=[]) : f16[]
       %1 = const(value=0.2, dtype=f16, shape=[]) : f16[]
       %2 = add(%0, %1) : f16[]
       return %2
     }""", """
     graph @f() {
       %0 = const(value=0.2998046875, dtype=f16, shape=[]) : f16[]
       return %0
     }"""),
    ("bfloat16 rounds to nearest even", """
     graph @f() {
       %0 = const(value=[1.00390625,1.01171875,3.0], dtype=f32, shape=[3]) : f32[3]
       %1 = cast(%0, dtype=bf16) : bf16[3]
       return %1
     }""", """
     graph @f() {
       %0 = const(value=[1.0,1.015625,3.0], dtype=bf16, shape=[3]) : bf16[3]
       return %0
     }"""),
    ("integers wrap", """
     graph @f() {
       %0 = const(value=100, dtype=i8, shape=[]) : i8[]
       %1 = add(%0, %0) : i8[]
       return %1
     }""", """
     graph @f() {
       %0 = const(value=-56, dtype=i8, shape=[]) : i8[]
       return %0
     }"""),
    ("division by zero gives inf and nan", """
     graph @f() {
       %0 = const(value=[1.0,0.0,-1.0], dtype=f32, shape=[3]) : f32[3]
       %1 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %2 = div(%0, %1) : f32[3]
       return %2
     }""", """
     graph @f() {
       %0 = const(value=[inf,nan,-inf], dtype=f32, shape=[3]) : f32[3]
       return %0
     }"""),
    ("a reduction and a cast, next to a parameter", """
     graph @f(%x: f32[3,2]) {
       %0 = const(value=[[1,2,3],[4,5,6]], dtype=i64, shape=[2,3]) : i64[2,3]
       %1 = sum(%0, axes=[1], keepdim=false) : i64[2]
       %2 = cast(%1, dtype=f32) : f32[2]
       %3 = add(%x, %2) : f32[3,2]
       return %3
     }""", """
     graph @f(%x: f32[3,2]) {
       %0 = const(value=[6.0,15.0], dtype=f32, shape=[2]) : f32[2]
       %1 = add(%x, %0) : f32[3,2]
       return %1
     }"""),
    ("a large uniform result is one scalar payload", """
     graph @f() {
       %0 = const(value=1.5, dtype=f32, shape=[]) : f32[]
       %1 = expand(%0, shape=[300,400]) : f32[300,400]
       %2 = const(value=2, dtype=f32, shape=[400]) : f32[400]
       %3 = mul(%1, %2) : f32[300,400]
       %4 = neg(%3) : f32[300,400]
       return %4
     }""", """
     graph @f() {
       %0 = const(value=-3.0, dtype=f32, shape=[300,400]) : f32[300,400]
       return %0
     }"""),
    ("a small uniform result is one scalar payload too", """
     graph @f() {
       %0 = const(value=[[1,1],[1,1]], dtype=i32, shape=[2,2]) : i32[2,2]
       %1 = matmul(%0, %0) : i32[2,2]
       return %1
     }""", """
     graph @f() {
       %0 = const(value=2, dtype=i32, shape=[2,2]) : i32[2,2]
       return %0
     }"""),
    ("views of a small constant", """
     graph @f() {
       %0 = const(value=[[1,2,3],[4,5,6]], dtype=i32, shape=[2,3]) : i32[2,3]
       %1 = permute(%0, perm=[1,0]) : i32[3,2]
       %2 = slice(%1, starts=[0,0], stops=[3,2], steps=[2,1]) : i32[2,2]
       %3 = flip(%2, axes=[1]) : i32[2,2]
       return %3
     }""", """
     graph @f() {
       %0 = const(value=[[4,1],[6,3]], dtype=i32, shape=[2,2]) : i32[2,2]
       return %0
     }"""),
    ("complex and bool", """
     graph @f() {
       %0 = const(value=[1.0+2.0j,-0.5-0.0j], dtype=c64, shape=[2]) : c64[2]
       %1 = mul(%0, %0) : c64[2]
       %2 = const(value=[true,false], dtype=bool, shape=[2]) : bool[2]
       %3 = logical_not(%2) : bool[2]
       return (%1, %3)
     }""", """
     graph @f() {
       %0 = const(value=[-3.0+4.0j,0.25+0.0j], dtype=c64, shape=[2]) : c64[2]
       %1 = const(value=[false,true], dtype=bool, shape=[2]) : bool[2]
       return (%0, %1)
     }"""),
]


@pytest.mark.parametrize("why,before,after", FOLD_ROWS, ids=[r[0] for r in FOLD_ROWS])
def test_fold(why: str, before: str, after: str) -> None:
    check_pass(fold, before, after)


NOT_FOLDED = [
    ("random draws stay generators", """
     graph @f() {
       %0 = const(value=7, dtype=i64, shape=[]) : i64[]
       %1 = const(value=0, dtype=i64, shape=[]) : i64[]
       %2 = uniform(%0, %1, dtype=f32, shape=[4]) : f32[4]
       return %2
     }"""),
    ("iota has no inputs to fold", """
     graph @f() {
       %0 = iota(dtype=f32, shape=[4]) : f32[4]
       return %0
     }"""),
    ("integer to a negative power raises when run", """
     graph @f() {
       %0 = const(value=2, dtype=i32, shape=[]) : i32[]
       %1 = const(value=-1, dtype=i32, shape=[]) : i32[]
       %2 = pow(%0, %1) : i32[]
       return %2
     }"""),
    ("an out-of-bounds gather raises when run", """
     graph @f() {
       %0 = const(value=[1.0,2.0], dtype=f32, shape=[2]) : f32[2]
       %1 = const(value=[5], dtype=i64, shape=[1]) : i64[1]
       %2 = gather(%0, %1) : f32[1]
       return %2
     }"""),
    ("an input that is not constant", """
     graph @f(%x: f32[2]) {
       %0 = const(value=1.0, dtype=f32, shape=[]) : f32[]
       %1 = add(%x, %0) : f32[2]
       return %1
     }"""),
]


@pytest.mark.parametrize("why,text", NOT_FOLDED, ids=[r[0] for r in NOT_FOLDED])
def test_fold_leaves_alone(why: str, text: str) -> None:
    g = parse(textwrap.dedent(text))
    out = fold(g)
    verify(out)
    assert out == g


def test_fold_size_limit() -> None:
    """A non-uniform result of more than MAX_ELEMENTS stays an op; at the limit it folds."""
    for n, folds in ((MAX_ELEMENTS, True), (MAX_ELEMENTS + 1, False)):
        b = Builder("f")
        c = b.op("const", value=tuple(range(n)), dtype=i32, shape=(n,))
        g = b.build(b.op("neg", c))
        out = fold(g)
        verify(out)
        assert (out.nodes[-1].op == "const") == folds
        assert_same_semantics(g, out, seeds=1)


@pytest.mark.parametrize("d", [f16, bf16, f32, f64, i8, u8, i32, b1, dt.complex64])
def test_fold_is_exact_for_every_dtype(d: dt.DType) -> None:
    """Folding random constants through a few ops gives the interpreter's exact bits."""
    rng = np.random.default_rng(0)
    a = random_input(TensorType(d, (3, 4)), rng)
    c = random_input(TensorType(d, (4,)), rng)
    b = Builder("f")
    x = b.op("const", value=a.tolist(), dtype=d, shape=(3, 4))
    y = b.op("const", value=c.tolist(), dtype=d, shape=(4,))
    prod = b.op("mul", x, y)
    outs = [prod, b.op("cast", prod, dtype=f32), b.op("permute", x, perm=(1, 0))]
    if d.kind in "iuf":
        outs.append(b.op("sum", b.op("sub", x, y) if d is not u8 else x, axes=(0,)))
    if d.kind == "f":
        outs += [b.op("exp", x), b.op("div", x, y), b.op("cast", x, dtype=bf16)]
    g = b.build(*outs)
    out = fold(g)
    verify(out)
    assert all(n.op == "const" for n in out.nodes)
    assert_same_semantics(g, out, seeds=1)
    assert parse(print_graph(out)) == out          # every folded payload prints and parses


# --------------------------------------------------------------------------------------
# cse
# --------------------------------------------------------------------------------------

CSE_ROWS: list[tuple[str, str, str]] = [
    ("duplicates merge, the first location stays", """
     graph @f(%x: f32[3]) {
       %0 = exp(%x) : f32[3]   # a.py:1
       %1 = exp(%x) : f32[3]   # a.py:2
       %2 = add(%0, %1) : f32[3]
       return %2
     }""", """
     graph @f(%x: f32[3]) {
       %0 = exp(%x) : f32[3]   # a.py:1
       %1 = add(%0, %0) : f32[3]
       return %1
     }"""),
    ("merges cascade to consumers", """
     graph @f(%x: f32[3]) {
       %0 = neg(%x) : f32[3]
       %1 = exp(%0) : f32[3]
       %2 = neg(%x) : f32[3]
       %3 = exp(%2) : f32[3]
       return (%1, %3)
     }""", """
     graph @f(%x: f32[3]) {
       %0 = neg(%x) : f32[3]
       %1 = exp(%0) : f32[3]
       return (%1, %1)
     }"""),
    ("commutative ops match with inputs swapped", """
     graph @f(%x: f32[3], %y: f32[3]) {
       %0 = add(%x, %y) : f32[3]
       %1 = add(%y, %x) : f32[3]
       %2 = mul(%0, %1) : f32[3]
       %3 = mul(%1, %0) : f32[3]
       return (%2, %3)
     }""", """
     graph @f(%x: f32[3], %y: f32[3]) {
       %0 = add(%x, %y) : f32[3]
       %1 = mul(%0, %0) : f32[3]
       return (%1, %1)
     }"""),
    ("equal constants merge, NaN included", """
     graph @f(%x: f32[3]) {
       %0 = const(value=nan, dtype=f32, shape=[]) : f32[]
       %1 = add(%x, %0) : f32[3]
       %2 = const(value=nan, dtype=f32, shape=[]) : f32[]
       %3 = sub(%x, %2) : f32[3]
       return (%1, %3)
     }""", """
     graph @f(%x: f32[3]) {
       %0 = const(value=nan, dtype=f32, shape=[]) : f32[]
       %1 = add(%x, %0) : f32[3]
       %2 = sub(%x, %0) : f32[3]
       return (%1, %2)
     }"""),
    ("random draws with the same seed and counter nodes are one draw", """
     graph @f(%s: i64[], %c: i64[]) {
       %0 = uniform(%s, %c, dtype=f32, shape=[4]) : f32[4]
       %1 = uniform(%s, %c, dtype=f32, shape=[4]) : f32[4]
       return (%0, %1)
     }""", """
     graph @f(%s: i64[], %c: i64[]) {
       %0 = uniform(%s, %c, dtype=f32, shape=[4]) : f32[4]
       return (%0, %0)
     }"""),
]


@pytest.mark.parametrize("why,before,after", CSE_ROWS, ids=[r[0] for r in CSE_ROWS])
def test_cse(why: str, before: str, after: str) -> None:
    check_pass(cse, before, after)


CSE_DISTINCT = [
    ("0, 0.0 and -0.0 are different constants", """
     graph @f(%x: f32[3]) {
       %0 = const(value=0, dtype=f32, shape=[]) : f32[]
       %1 = const(value=0.0, dtype=f32, shape=[]) : f32[]
       %2 = const(value=-0.0, dtype=f32, shape=[]) : f32[]
       %3 = add(%x, %1) : f32[3]
       %4 = add(%x, %2) : f32[3]
       %5 = add(%x, %0) : f32[3]
       return (%3, %4, %5)
     }"""),
    ("maximum does not commute in the sign of zero", """
     graph @f(%x: f32[3], %y: f32[3]) {
       %0 = maximum(%x, %y) : f32[3]
       %1 = maximum(%y, %x) : f32[3]
       %2 = sub(%x, %y) : f32[3]
       %3 = sub(%y, %x) : f32[3]
       return (%0, %1, %2, %3)
     }"""),
    ("different attributes or types", """
     graph @f(%x: f32[2,3], %s: i64[], %c: i64[], %d: i64[]) {
       %0 = cast(%x, dtype=f64) : f64[2,3]
       %1 = cast(%x, dtype=f16) : f16[2,3]
       %2 = sum(%x, axes=[0], keepdim=false) : f32[3]
       %3 = sum(%x, axes=[0], keepdim=true) : f32[1,3]
       %4 = uniform(%s, %c, dtype=f32, shape=[4]) : f32[4]
       %5 = uniform(%s, %d, dtype=f32, shape=[4]) : f32[4]
       %6 = normal(%s, %c, dtype=f32, shape=[4]) : f32[4]
       return (%0, %1, %2, %3, %4, %5, %6)
     }"""),
]


@pytest.mark.parametrize("why,text", CSE_DISTINCT, ids=[r[0] for r in CSE_DISTINCT])
def test_cse_keeps_distinct_computations(why: str, text: str) -> None:
    check_pass(cse, text, text)


# --------------------------------------------------------------------------------------
# dce
# --------------------------------------------------------------------------------------

def test_dce_keeps_unused_params_and_drops_dead_nodes() -> None:
    text = """
    graph @f(%x: f32[3], %unused: i32[2]) {
      %0 = exp(%x) : f32[3]
      return %0
    }"""
    g = check_pass(dce, text, text)
    assert [p.attr("name") for p in g.params] == ["x", "unused"]
    # A node list edited by hand: the dead node goes, the parameters stay.
    dead = make_node("neg", (g.params[0],), {})
    g.nodes = g.nodes + [dead]
    assert dead_nodes(g) == 1
    out = dce(g)
    assert dead_nodes(out) == 0 and dead not in out.nodes
    assert print_graph(out) == normalized(text)


# --------------------------------------------------------------------------------------
# The rewrite engine
# --------------------------------------------------------------------------------------

def _graph(text: str) -> Graph:
    g = parse(textwrap.dedent(text))
    verify(g)
    return g


def test_rewrite_keeps_params_and_output_order() -> None:
    g = _graph("""
    graph @f(%a: f32[3], %b: f32[3]) {
      %0 = neg(%b) : f32[3]
      %1 = neg(%0) : f32[3]
      %2 = exp(%a) : f32[3]
      return (%2, %1, %a, %1)
    }""")
    out = simplify(g)
    assert out.params == g.params                              # the very same nodes
    assert out.outputs[1] is g.params[1] and out.outputs[3] is g.params[1]
    assert out.outputs[2] is g.params[0] and out.outputs[0].op == "exp"
    assert [o.type for o in out.outputs] == [o.type for o in g.outputs]


def test_rewrite_unchanged_graph_keeps_nodes() -> None:
    g = _graph("""
    graph @f(%a: f32[3]) {
      %0 = exp(%a) : f32[3]
      %1 = sin(%0) : f32[3]
      return %1
    }""")
    out, fired = rewrite_counted(g, SIMPLIFY_RULES)
    assert fired == {} and out == g and out.nodes[-1] is g.nodes[-1]


def test_rewrite_group_patterns_and_repeated_captures() -> None:
    """A group pattern matches every unary op; a name captured twice binds one node."""
    g = _graph("""
    graph @f(%a: f32[3], %b: f32[3]) {
      %0 = exp(%a) : f32[3]
      %1 = sin(%0) : f32[3]
      %2 = mul(%1, %1) : f32[3]
      %3 = mul(%1, %b) : f32[3]
      return (%2, %3)
    }""")
    tag = Rule("unary-to-neg", pat(Group.UNARY, var("x"),
                                              where=lambda n: n.op not in ("neg", "square")),
               lambda m: m.make("neg", m["x"]))
    square = Rule("mul-self-to-square", pat("mul", var("x"), var("x")),
                  lambda m: m.make("square", m["x"]))
    out, fired = rewrite_counted(g, [tag, square])
    verify(out)
    assert fired == {"unary-to-neg": 2, "mul-self-to-square": 1}
    assert print_graph(out) == normalized("""
    graph @f(%a: f32[3], %b: f32[3]) {
      %0 = neg(%a) : f32[3]
      %1 = neg(%0) : f32[3]
      %2 = square(%1) : f32[3]
      %3 = mul(%1, %b) : f32[3]
      return (%2, %3)
    }""")


def test_rewrite_attribute_patterns_are_exact_and_rules_may_decline() -> None:
    g = _graph("""
    graph @f(%a: f32[2,3]) {
      %0 = sum(%a, axes=[0], keepdim=true) : f32[1,3]
      %1 = sum(%a, axes=[1], keepdim=true) : f32[2,1]
      return (%0, %1)
    }""")
    seen: list[Node] = []

    def decline(m):                      # looks at the match, builds nothing
        seen.append(m.node)
        return None

    rule = Rule("axes-0", pat("sum", var("x"), axes=(0,), keepdim=True), decline)
    assert rewrite(g, [rule]) == g
    assert [n.attr("axes") for n in seen] == [(0,)]
    assert rewrite(g, [Rule("typed", pat("sum", var("x"), keepdim=1), decline)]) == g
    assert len(seen) == 1                # keepdim=1 is an int, never the bool True


def test_rewrite_rejects_type_changes_and_cycles() -> None:
    g = _graph("""
    graph @f(%a: f32[3]) {
      %0 = exp(%a) : f32[3]
      return %0
    }""")
    widen = Rule("widen", pat("exp", var("x")), lambda m: m.make("cast", m.node, dtype=f64))
    with pytest.raises(RewriteError, match=r"rule 'widen' replaced exp : f32\[3\] by cast : "
                                           r"f64\[3\]"):
        rewrite(g, [widen])
    to_sin = Rule("exp-to-sin", pat("exp", var("x")), lambda m: m.make("sin", m["x"]))
    to_exp = Rule("sin-to-exp", pat("sin", var("x")), lambda m: m.make("exp", m["x"]))
    with pytest.raises(RewriteError, match="undo each other"):
        rewrite(g, [to_sin, to_exp])


# --------------------------------------------------------------------------------------
# The pass manager
# --------------------------------------------------------------------------------------

PIPELINE_INPUT = """
graph @f(%x: f32[2,3], %n: i32[2,3]) {
  %0 = const(value=1, dtype=i32, shape=[]) : i32[]
  %1 = cast(%0, dtype=f32) : f32[]                # folds to 1.0, then x * 1 -> x
  %2 = mul(%x, %1) : f32[2,3]
  %3 = exp(%2) : f32[2,3]
  %4 = exp(%x) : f32[2,3]                         # the same value once %2 is %x
  %5 = add(%3, %4) : f32[2,3]
  %6 = const(value=0, dtype=i32, shape=[]) : i32[]
  %7 = mul(%n, %6) : i32[2,3]
  %8 = cast(%7, dtype=f32) : f32[2,3]
  %9 = sub(%5, %8) : f32[2,3]
  return %9
}
"""

PIPELINE_OUTPUT = """
graph @f(%x: f32[2,3], %n: i32[2,3]) {
  %0 = exp(%x) : f32[2,3]
  %1 = add(%0, %0) : f32[2,3]
  return %1
}
"""


def test_pipeline_golden_and_stages() -> None:
    g = _graph(PIPELINE_INPUT)
    r = run_pipeline(g, verify=True)
    assert print_graph(r.graph) == normalized(PIPELINE_OUTPUT)
    assert [p.name for p in PIPELINE] == ["simplify", "fold", "cse", "fold_transposed_matmul",
                                          "dce"]
    names = [s.name for s in r.stages]
    stages = ("simplify", "fold", "cse", "fold_transposed_matmul", "dce")
    assert names[:5] == list(stages) and r.converged
    assert names[-5:] == [f"{n}#{r.rounds}" for n in stages]
    assert r.stages[-1].graph is r.graph
    assert all(s.nodes == node_count(s.graph) and s.seconds >= 0 for s in r.stages)
    assert r.stage("fold").nodes < node_count(g)
    assert_same_semantics(g, r.graph)


def test_pipeline_printing() -> None:
    g = _graph("""
    graph @f(%x: f32[3]) {
      %0 = neg(%x) : f32[3]
      %1 = neg(%0) : f32[3]
      %2 = const(value=2.0, dtype=f32, shape=[]) : f32[]
      %3 = const(value=3.0, dtype=f32, shape=[]) : f32[]
      %4 = add(%2, %3) : f32[]
      %5 = mul(%1, %4) : f32[3]
      return %5
    }""")
    r = run_pipeline(g, verify=True)
    expected = (
        "== input: 6 nodes ==\n" + print_graph(g)
        + "== simplify: 6 -> 4 nodes ==\n" + normalized("""
          graph @f(%x: f32[3]) {
            %0 = const(value=2.0, dtype=f32, shape=[]) : f32[]
            %1 = const(value=3.0, dtype=f32, shape=[]) : f32[]
            %2 = add(%0, %1) : f32[]
            %3 = mul(%x, %2) : f32[3]
            return %3
          }""")
        + "== fold: 4 -> 2 nodes ==\n" + normalized("""
          graph @f(%x: f32[3]) {
            %0 = const(value=5.0, dtype=f32, shape=[]) : f32[]
            %1 = mul(%x, %0) : f32[3]
            return %1
          }""")
        + "== cse: unchanged, 2 nodes ==\n"
        + "== fold_transposed_matmul: unchanged, 2 nodes ==\n== dce: unchanged, 2 nodes ==\n"
        + "== simplify#2: unchanged, 2 nodes ==\n== fold#2: unchanged, 2 nodes ==\n"
        + "== cse#2: unchanged, 2 nodes ==\n"
        + "== fold_transposed_matmul#2: unchanged, 2 nodes ==\n"
        + "== dce#2: unchanged, 2 nodes ==\n")
    assert r.format(times=False) == expected
    text = str(r)
    assert text.count(" ms) ==") == len(r.stages) and "== fold: 4 -> 2 nodes (" in text


def test_pipeline_dump_and_log(capsys: pytest.CaptureFixture[str]) -> None:
    g = _graph(PIPELINE_INPUT)
    stream = io.StringIO()
    chunks: list[str] = []
    previous = ",".join(sorted(c for c in _log.CHANNELS if _log.enabled(c)))
    _log.set_channels("passes")
    try:
        run_pipeline(g, dump=stream)
        run_pipeline(g, dump=chunks.append)
    finally:
        _log.set_channels(previous)
    err = capsys.readouterr().err
    assert err.count("[llgrad:passes] simplify: 10 -> ") == 2
    assert "[llgrad:passes] dce#2: unchanged" in err
    assert print_graph(run_pipeline(g).graph) in err
    untimed = lambda text: re.sub(r" \(\d+\.\d\d ms\)", "", text)  # noqa: E731
    assert untimed(stream.getvalue()) == untimed("".join(chunks))
    assert chunks[0].startswith("== simplify: 10 -> ") and "graph @f(" in chunks[0]


def test_pipeline_is_idempotent() -> None:
    g = _graph(PIPELINE_INPUT)
    once = run_pipeline(g, verify=True).graph
    twice = run_pipeline(once, verify=True)
    assert twice.graph == once and twice.rounds == 1
    assert all(s.graph == once for s in twice.stages)


def _bad_type(g: Graph) -> Graph:
    """Gives the output a wrong type, which only the verifier sees (not the signature)."""
    x = g.params[0]
    wrong = Node("exp", (x,), (), TensorType(f32, (3,)))
    return Graph(g.name, g.params, (Node("neg", (wrong,), (), TensorType(f32, (3,))),))


def test_pipeline_reports_the_pass_that_broke_the_graph() -> None:
    g = _graph("""
    graph @f(%x: f64[3]) {
      %0 = neg(%x) : f64[3]
      return %0
    }""")
    with pytest.raises(PassError, match=r"pass 'retype': changed the outputs' types"):
        run_pipeline(g, [Pass("retype", _bad_type)])
    g32 = _graph("""
    graph @f(%x: f64[3]) {
      %0 = cast(%x, dtype=f32) : f32[3]
      return %0
    }""")
    assert run_pipeline(g32, [make_pass(_bad_type)]).graph is not None   # no verify: passes
    with pytest.raises(PassError, match=r"pass '_bad_type': the verifier rejects") as e:
        run_pipeline(g32, [make_pass(_bad_type)], verify=True)
    assert isinstance(e.value.__cause__, VerificationError) and e.value.before is g32
    with pytest.raises(PassError, match="returned list, not a Graph"):
        run_pipeline(g32, [Pass("listy", lambda g: [g])])      # type: ignore[list-item]
    renamed = Pass("rename", lambda g: parse(print_graph(g).replace("%x", "%y")))
    with pytest.raises(PassError, match="changed the parameters"):
        run_pipeline(g32, [renamed])


def test_passes_are_named_and_documented() -> None:
    for p in PIPELINE:
        assert p.doc and p.doc == p.fn.__doc__.strip().replace("\n    ", "\n")
    assert make_pass(simplify).name == "simplify" and str(make_pass(cse)) == "cse"
    assert FOLD_RULES[0].name == "fold"
    with pytest.raises(TypeError, match="Graph -> Graph"):
        make_pass(3)                                           # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Random graphs: every pass keeps the values, verifies, and the pipeline is idempotent
# --------------------------------------------------------------------------------------

SHAPE = (2, 3)
CONST_VALUES = [0, 1, 2, -1, 0.0, -0.0, 1.0, 2.0, 0.5, float("nan"), float("inf")]


class RandomGraph:
    """Builds a graph whose values all have shape (2, 3), from draws by hypothesis."""

    def __init__(self, draw: Callable):
        self.draw = draw
        self.b = Builder("random")
        self.pool: dict[dt.DType, list[Node]] = {f32: [], i32: [], b1: []}
        for d, name in ((f32, "x"), (f32, "y"), (i32, "n"), (b1, "c")):
            self.pool[d].append(self.b.param(TensorType(d, SHAPE), name))
        self.pool[f32].append(self.const(f32, SHAPE))

    def pick(self, d: dt.DType) -> Node:
        return self.draw(st.sampled_from(self.pool[d]))

    def const(self, d: dt.DType, shape: tuple[int, ...] | None = None) -> Node:
        if shape is None:
            shape = self.draw(st.sampled_from([(), (3,), SHAPE]))
        if d is b1:
            value = self.draw(st.booleans())
        else:
            choices = [v for v in CONST_VALUES if d is f32 or isinstance(v, int)]
            value = self.draw(st.sampled_from(choices))
        if shape and self.draw(st.booleans()):              # a nested payload
            value = np.broadcast_to(np.array(value, dtype=numpy_dtype(d)), shape).tolist()
        return self.b.op("const", value=value, dtype=d, shape=shape)

    def operand(self, d: dt.DType) -> Node:
        return self.const(d) if self.draw(st.booleans()) else self.pick(d)

    def step(self) -> None:
        kind = self.draw(st.sampled_from(
            ["float_binary", "float_unary", "int_binary", "cast", "movement", "where",
             "reduce", "repeat", "pow"]))
        op = self.b.op
        if kind == "float_binary":
            name = self.draw(st.sampled_from(["add", "sub", "mul", "div", "maximum"]))
            a, c = self.operand(f32), self.operand(f32)
            if self.draw(st.booleans()):
                a, c = c, a
            node = op(name, a, c)
            if node.shape != SHAPE:
                node = op("expand", node, shape=SHAPE)
            self.pool[f32].append(node)
        elif kind == "float_unary":
            name = self.draw(st.sampled_from(["neg", "abs", "exp", "relu", "sqrt"]))
            self.pool[f32].append(op(name, self.pick(f32)))
        elif kind == "int_binary":
            name = self.draw(st.sampled_from(["add", "sub", "mul"]))
            node = op(name, self.pick(i32), self.operand(i32))
            self.pool[i32].append(node)
        elif kind == "cast":
            src = self.draw(st.sampled_from([f32, i32, b1]))
            mid = self.draw(st.sampled_from([f64, f16, i64, i32, f32, b1]))
            dst = self.draw(st.sampled_from([f32, i32]))
            self.pool[dst].append(op("cast", op("cast", self.pick(src), dtype=mid), dtype=dst))
        elif kind == "movement":
            x = self.pick(f32)
            how = self.draw(st.sampled_from(["reshape", "permute", "expand", "slice", "flip"]))
            if how == "reshape":
                y = op("reshape", op("reshape", x, shape=(6,)), shape=SHAPE)
            elif how == "permute":
                y = op("permute", op("permute", x, perm=(1, 0)), perm=(1, 0))
            elif how == "expand":
                row = op("slice", x, starts=(1, 0), stops=(2, 3), steps=(1, 1))
                y = op("expand", op("expand", row, shape=(1, 3)), shape=SHAPE)
            elif how == "slice":
                y = op("slice", x, starts=(0, 0), stops=SHAPE, steps=(1, 1))
            else:
                y = op("flip", op("flip", x, axes=(0,)), axes=(1,))
            self.pool[f32].append(y)
        elif kind == "where":
            cond = self.pick(b1) if self.draw(st.booleans()) else self.const(b1)
            a = self.pick(f32)
            other = a if self.draw(st.booleans()) else self.operand(f32)
            self.pool[f32].append(op("where", cond, a, other))
        elif kind == "reduce":
            name = self.draw(st.sampled_from(["sum", "amax", "prod"]))
            r = op(name, self.pick(f32), axes=(1,), keepdim=True)
            self.pool[f32].append(op("expand", r, shape=SHAPE))
        elif kind == "pow":
            d = self.draw(st.sampled_from([f32, i32]))
            e = op("const", value=self.draw(st.sampled_from([0, 1, 2])), dtype=d, shape=())
            self.pool[d].append(op("pow", self.pick(d), e))
        else:                                   # the same computation again: food for CSE
            d = self.draw(st.sampled_from([f32, i32]))
            x = self.pick(d)
            if x.op in ("param", "const"):
                return
            self.pool[d].append(make_node(x.op, x.inputs, x.attr_dict))

    def graph(self) -> Graph:
        """Every value made is an output, so no step is dead code."""
        for _ in range(self.draw(st.integers(3, 16))):
            self.step()
        made = [n for d in (f32, i32) for n in self.pool[d] if n.op != "param"]
        return self.b.build(*made)


@st.composite
def random_graphs(draw: Callable) -> Graph:
    return RandomGraph(draw).graph()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_random_graphs_keep_their_values(g: Graph) -> None:
    verify(g)
    for p in PIPELINE:
        out = p(g)
        verify(out)
        assert_same_semantics(g, out, seeds=2)
    r = run_pipeline(g, verify=True)
    assert_same_semantics(g, r.graph, seeds=2)
    assert node_count(r.graph) <= node_count(g)
    assert r.converged
    for p in PIPELINE:                          # the result is a fixpoint of every pass
        assert p(r.graph) == r.graph, p.name
    assert parse(print_graph(r.graph)) == r.graph


def test_transposed_matmul_is_folded_into_the_product():
    """permute(matmul(a, b)) -> matmul(b^T, a^T): the transpose is never materialized."""
    from llgrad.passes.transpose import fold_transposed_matmul
    g = parse("""
      graph @f(%a: f32[4,3], %b: f32[3,5]) {
        %0 = matmul(%a, %b) : f32[4,5]
        %1 = permute(%0, perm=[1,0]) : f32[5,4]
        return %1
      }""")
    out = fold_transposed_matmul(g)
    assert [n.op for n in out.nodes if n.op != "param"] == ["permute", "permute", "matmul"]
    a = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(interpret(out, [a, b])[0], (a @ b).T, rtol=1e-6)
    shared = parse("""
      graph @f(%a: f32[4,3], %b: f32[3,5]) {
        %0 = matmul(%a, %b) : f32[4,5]
        %1 = permute(%0, perm=[1,0]) : f32[5,4]
        return (%0, %1)
      }""")
    assert fold_transposed_matmul(shared) is shared       # the product has another user
