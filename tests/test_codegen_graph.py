"""Compiled graphs: fusion, memory planning, one module per graph, the executor.

Every test builds a graph with `Builder`, compiles it with `CompiledGraph` and compares
the result with `llgrad.ir.interpret` (NumPy references), and checks the shape of the
compilation itself: how many kernel groups, what the memory plan reuses, what the
assembly looks like.
"""
from __future__ import annotations

import re
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llgrad  # noqa: F401  (fills the op registry)
from llgrad.eager import views
from llgrad.ir import Builder, TensorType, interpret
from llgrad.ir import dtypes as dt
from llgrad.ir.interpret import round_to_bfloat16, to_bfloat16_bits
from llgrad.ir.types import broadcast_shapes
from llgrad.passes import memory
from llgrad.passes.fusion import Kind, Layout, fuse, reshape_strides
from llgrad.compiler.executable import CompiledGraph
from llgrad.tensor import Tensor

from conftest import train_step


def T(shape, d=dt.float32) -> TensorType:
    return TensorType(d, tuple(shape))


def tensor(a: np.ndarray, d: dt.DType | None = None) -> Tensor:
    if d is dt.bfloat16:
        return Tensor._from_numpy(to_bfloat16_bits(a), dt.bfloat16)
    return Tensor._from_numpy(np.array(a))


def randn(*shape, dtype=np.float32) -> np.ndarray:
    return np.asarray(np.random.randn(*shape)).astype(dtype)


def check(g, inputs, dtypes=None, rtol=1e-5, atol=1e-6, **kw) -> CompiledGraph:
    """Compile `g`, run it on `inputs`, compare every output with the interpreter."""
    cg = CompiledGraph(g, **kw)
    dtypes = dtypes or [None] * len(inputs)
    outs = cg(*[tensor(x, d) for x, d in zip(inputs, dtypes)])
    ref = interpret(g, inputs)
    assert len(outs) == len(ref)
    for k, (o, r) in enumerate(zip(outs, ref)):
        assert o.dtype is g.outputs[k].dtype and tuple(o.shape) == r.shape, (k, o, r.shape)
        v = o._values()
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(v, r, err_msg=f"output {k}")
        else:
            np.testing.assert_allclose(np.asarray(v, np.float64), np.asarray(r, np.float64),
                                       rtol=rtol, atol=atol, err_msg=f"output {k}")
    return cg


def kinds(cg: CompiledGraph) -> list[str]:
    return [k.kind.value for k in cg.kernels]


def const(b: Builder, value, d=dt.float32):
    return b.op("const", value=value, dtype=d, shape=())


# --------------------------------------------------------------------------------------
# Elementwise fusion
# --------------------------------------------------------------------------------------

def test_elementwise_chain_is_one_kernel():
    b = Builder("chain")
    x = b.param(T((70, 500)), "x")
    y = b.param(T((70, 500)), "y")
    v = b.op("mul", x, y)
    for op in ("sin", "tanh", "exp", "neg", "sigmoid", "abs", "sqrt", "log1p"):
        v = b.op(op, v)
    v = b.op("add", v, const(b, 0.5))
    cg = check(b.build(v), [randn(70, 500), randn(70, 500)], rtol=2e-5)
    assert kinds(cg) == ["elementwise"]
    assert cg.stats["launches"] == 1 and cg.plan.arena_bytes == 0
    assert len(cg.kernels[0].nodes) == 10          # every op but the params and const
    assert "sigmoid" in str(cg.kernels[0]) and "%x" in str(cg.kernels[0])


def test_diamond_and_multi_output_group():
    b = Builder("diamond")          # a big space: one group (small ones get short bodies)
    x = b.param(T((4096, 16)), "x")
    y = b.param(T((16,)), "y")
    a = b.op("exp", x)
    d = b.op("add", b.op("sin", a), b.op("cos", a))
    e = b.op("mul", d, y)
    cg = check(b.build(e, a, d), [randn(4096, 16), randn(16)], atol=2e-5)
    assert kinds(cg) == ["elementwise"]
    (grp,) = cg.kernels
    assert [o.op for o in grp.outputs] == ["exp", "add", "mul"]
    assert len(grp.expr.outputs) == 3


def test_sibling_chains_merge_through_their_consumer():
    b = Builder("siblings")
    x = b.param(T((500, 100)), "x")
    y = b.param(T((500, 100)), "y")
    left = b.op("tanh", b.op("exp", x))
    right = b.op("sin", b.op("neg", y))
    cg = check(b.build(b.op("mul", left, right)), [randn(500, 100), randn(500, 100)])
    assert kinds(cg) == ["elementwise"]


def test_broadcasting_reads_and_scalars():
    b = Builder("bcast")
    x = b.param(T((4, 1, 5)), "x")
    y = b.param(T((3, 1)), "y")
    z = b.param(T(()), "z")
    v = b.op("add", b.op("mul", x, y), z)
    v = b.op("maximum", v, const(b, 0.0))
    cg = check(b.build(v), [randn(4, 1, 5), randn(3, 1), randn()])
    assert kinds(cg) == ["elementwise"]
    (grp,) = cg.kernels
    strides = {cg.fusion.names[r.base]: r.layout.strides for r in grp.inputs}
    assert strides["%x"] == (5, 0, 1) and strides["%y"] == (0, 1, 0)   # zero: broadcast
    assert strides["%z"] == (0, 0, 0)


def test_broadcast_producer_is_materialized_not_recomputed():
    b = Builder("bcast_producer")
    x = b.param(T((6,)), "x")
    y = b.param(T((4, 6)), "y")
    e = b.op("exp", x)                          # read by a (4, 6) op through a broadcast
    cg = check(b.build(b.op("mul", e, y)), [randn(6), randn(4, 6)])
    assert kinds(cg) == ["elementwise", "elementwise"]
    assert cg.plan.arena_bytes == 64                        # 6 floats, 64-byte aligned


def test_casts_and_mixed_dtypes():
    b = Builder("mixed")
    x = b.param(T((5, 6), dt.float16), "x")
    y = b.param(T((5, 6), dt.bfloat16), "y")
    i = b.param(T((5, 6), dt.int32), "i")
    s = b.op("add", b.op("mul", b.op("cast", x, dtype=dt.float32),
                         b.op("cast", y, dtype=dt.float32)), b.op("cast", i, dtype=dt.float32))
    c = b.op("gt", s, const(b, 0.0))
    w = b.op("where", c, s, b.op("neg", s))
    outs = (b.op("cast", w, dtype=dt.float16), b.op("cast", w, dtype=dt.bfloat16), c,
            b.op("cast", w, dtype=dt.int8), b.op("cast", w, dtype=dt.float64))
    inputs = [randn(5, 6, dtype=np.float16), round_to_bfloat16(randn(5, 6)),
              np.random.randint(-3, 3, (5, 6)).astype(np.int32)]
    cg = check(b.build(*outs), inputs, [dt.float16, dt.bfloat16, dt.int32], rtol=1e-2,
               atol=1e-2)
    assert kinds(cg) == ["elementwise"]


def test_integer_and_bool_ops():
    b = Builder("ints")
    x = b.param(T((9,), dt.int64), "x")
    y = b.param(T((9,), dt.int64), "y")
    q = b.op("floor_divide", x, y)
    r = b.op("remainder", x, y)
    m = b.op("logical_and", b.op("ge", x, y), b.op("ne", r, const(b, 0, dt.int64)))
    inputs = [np.random.randint(-50, 50, 9), np.array([3, -4, 5, 7, -2, 1, 9, 11, -6])]
    cg = check(b.build(q, r, m, b.op("sum", m, axes=(), keepdim=False)), inputs)
    # one kernel: the sum evaluates q, r and m and stores them as side outputs
    assert kinds(cg) == ["reduce"]


def _complex_kernels() -> bool:
    from llgrad.codegen import scalar
    try:
        scalar.llvm_type(dt.complex64)
    except KeyError:
        return False
    return True


@pytest.mark.skipif(not _complex_kernels(), reason="no complex kernels in codegen.scalar")
def test_complex_elementwise_and_sum():
    b = Builder("complex")
    x = b.param(T((4, 5), dt.complex64), "x")
    y = b.param(T((5,), dt.complex64), "y")
    e = b.op("mul", b.op("add", x, y), x)
    cg = CompiledGraph(b.build(e, b.op("sum", e, axes=(1,), keepdim=False)))
    xv = (randn(4, 5) + 1j * randn(4, 5)).astype(np.complex64)
    yv = (randn(5) + 1j * randn(5)).astype(np.complex64)
    for o, r in zip(cg(tensor(xv), tensor(yv)), interpret(cg.graph, [xv, yv])):
        np.testing.assert_allclose(o._values(), r, rtol=1e-5, atol=1e-6)
    assert kinds(cg) == ["elementwise", "reduce"] or kinds(cg) == ["reduce"]


def test_random_ops_fuse_and_match_the_reference():
    b = Builder("rng")
    seed = b.param(T((), dt.int64), "seed")
    ctr = b.param(T((), dt.int64), "ctr")
    u = b.op("uniform", seed, ctr, dtype=dt.float32, shape=(64, 1024))
    n = b.op("normal", seed, ctr, dtype=dt.float64, shape=(64, 1024))
    io = b.op("iota", dtype=dt.float32, shape=(64, 1024))
    z = b.op("add", b.op("mul", u, io), b.op("cast", n, dtype=dt.float32))
    s = b.op("sum", z, axes=(1,), keepdim=False)
    cg = check(b.build(z, u, s), [np.array(42), np.array(7)], rtol=1e-5, atol=1e-5)
    # random numbers need the element index: the sum does not take them as a prologue
    assert kinds(cg) == ["elementwise", "reduce"]
    out = cg(tensor(np.array(42)), tensor(np.array(7)))[1]
    np.testing.assert_array_equal(out._values(), interpret(cg.graph, [np.array(42),
                                                                      np.array(7)])[1])


# --------------------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------------------

def test_transpose_feeding_add_is_a_view():
    b = Builder("transpose")
    x = b.param(T((8, 16)), "x")
    y = b.param(T((16, 8)), "y")
    t = b.op("permute", x, perm=(1, 0))
    cg = check(b.build(b.op("relu", b.op("add", t, y))), [randn(8, 16), randn(16, 8)])
    assert kinds(cg) == ["elementwise"] and cg.plan.arena_bytes == 0
    (grp,) = cg.kernels
    assert grp.views == [t]
    assert {r.layout.strides for r in grp.inputs} == {(1, 16), (8, 1)}


def test_slice_expand_reshape_views():
    b = Builder("views")
    x = b.param(T((6, 10)), "x")
    s = b.op("slice", x, starts=(1, 0), stops=(5, 10), steps=(2, 3))      # (2, 4)
    e = b.op("expand", b.op("reshape", s, shape=(2, 1, 4)), shape=(2, 3, 4))
    y = b.param(T((2, 3, 4)), "y")
    cg = check(b.build(b.op("mul", e, y)), [randn(6, 10), randn(2, 3, 4)])
    assert kinds(cg) == ["elementwise"]
    read = next(r for r in cg.kernels[0].inputs if r.base.op == "param" and
                r.layout.offset)
    assert read.layout == Layout((2, 3, 4), (20, 0, 3), 10)


def test_reshape_inside_a_group_is_free():
    b = Builder("reshape_chain")
    x = b.param(T((4, 6)), "x")
    y = b.param(T((3, 8)), "y")
    a = b.op("exp", x)
    r = b.op("reshape", a, shape=(3, 8))
    cg = check(b.build(b.op("add", r, y)), [randn(4, 6), randn(3, 8)])
    assert kinds(cg) == ["elementwise"] and cg.plan.arena_bytes == 0


def test_reshape_that_no_strides_express_copies():
    b = Builder("flatten_transpose")
    x = b.param(T((3, 4)), "x")
    f = b.op("reshape", b.op("permute", x, perm=(1, 0)), shape=(12,))
    cg = check(b.build(b.op("neg", f)), [randn(3, 4)])
    assert kinds(cg) == ["copy", "elementwise"]


def test_reshape_strides_rules():
    assert reshape_strides((4, 6), (6, 1), (24,)) == (1,)
    assert reshape_strides((4, 6), (1, 4), (24,)) is None              # transposed
    assert reshape_strides((4, 6), (0, 0), (2, 12)) == (0, 0)          # broadcast
    assert reshape_strides((4, 5), (1, 0), (20,)) is None
    assert reshape_strides((2, 3, 4), (24, 8, 2), (6, 4)) == (8, 2)
    assert reshape_strides((2, 3, 4), (12, 4, 1), (2, 1, 12)) == (12, 0, 1)


# --------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,axes,keepdim", [
    ("sum", (), False), ("sum", (0,), True), ("sum", (1,), False), ("prod", (2,), False),
    ("amax", (0, 2), False), ("amin", (1,), True), ("argmax", (1,), False),
    ("argmin", (), False), ("argmax", (2,), True)])
def test_reduction_with_prologue(op, axes, keepdim):
    b = Builder(f"red_{op}")
    x = b.param(T((12, 9, 5)), "x")
    y = b.param(T((9, 5)), "y")
    z = b.op("mul", b.op("add", x, y), y)
    z = b.op("cast", b.op("tanh", z), dtype=dt.float64)
    r = b.op(op, z, axes=axes, keepdim=keepdim)
    cg = check(b.build(r), [randn(12, 9, 5), np.random.rand(9, 5).astype(np.float32) + 0.5],
               rtol=1e-5)
    assert kinds(cg) == ["reduce"]
    (grp,) = cg.kernels
    assert grp.expr is not None and [n.op for n in grp.nodes] == ["add", "mul", "tanh",
                                                                    "cast", op]


def test_reduction_through_a_view_and_epilogue():
    b = Builder("softmax")
    x = b.param(T((16, 40)), "x")
    m = b.op("amax", x, axes=(1,), keepdim=True)
    e = b.op("exp", b.op("sub", x, m))
    s = b.op("sum", e, axes=(1,), keepdim=True)
    cg = check(b.build(b.op("div", e, s)), [randn(16, 40)])
    # one row kernel: max, exp, sum and the division over each row in L1, e kept in
    # a row buffer, never written to memory
    assert kinds(cg) == ["row"]
    b = Builder("sum_of_transpose")
    x = b.param(T((16, 40)), "x")
    t = b.op("permute", b.op("sin", x), perm=(1, 0))
    cg = check(b.build(b.op("sum", t, axes=(1,), keepdim=False)), [randn(16, 40)])
    assert kinds(cg) == ["elementwise", "reduce"]        # a permuted prologue is not taken


@pytest.mark.parametrize("inline", ["auto", "never"])
def test_kernels_called_instead_of_inlined(inline):
    b = Builder("softmax_calls")
    x = b.param(T((6, 40)), "x")
    e = b.op("exp", b.op("sub", x, b.op("amax", x, axes=(1,), keepdim=True)))
    out = b.op("div", e, b.op("sum", e, axes=(1,), keepdim=True))
    cg = check(b.build(out), [randn(6, 40)], inline=inline)
    assert ("alwaysinline" in cg.llvm_ir) is False


def test_reduction_peels_the_tail_of_a_shared_group():
    b = Builder("peel")
    x = b.param(T((64, 32)), "x")
    e = b.op("mul", b.op("exp", x), const(b, 2.0))       # an output: written anyway
    s = b.op("sum", b.op("sin", e), axes=(1,), keepdim=False)
    cg = check(b.build(e, s), [randn(64, 32)])
    assert kinds(cg) == ["elementwise", "reduce"]
    assert [n.op for n in cg.kernels[1].nodes] == ["sin", "sum"]
    assert cg.plan.arena_bytes == 0                       # sin(e) is never stored


def test_empty_reductions_fill_identities():
    b = Builder("empty")
    x = b.param(T((0, 3)), "x")
    cg = check(b.build(b.op("sum", x, axes=(0,), keepdim=False),
                       b.op("prod", b.op("exp", x), axes=(0,), keepdim=True)),
               [np.zeros((0, 3), np.float32)])
    assert cg(tensor(np.zeros((0, 3), np.float32)))[1]._values().tolist() == [[1, 1, 1]]


def test_large_reductions_split_across_threads():
    n = 1 << 18
    b = Builder("big")
    x = b.param(T((n,)), "x")
    y = b.param(T((n,)), "y")
    e = b.op("mul", b.op("exp", x), y)
    s = b.op("sum", b.op("sin", e), axes=(), keepdim=False)
    a = b.op("argmax", e, axes=(), keepdim=False)
    inputs = [randn(n) * 0.1, randn(n)]
    cg = check(b.build(e, s, a), inputs, rtol=1e-4, threads=2)
    assert cg.stats["stages"] > 1
    assert any(l.what.endswith("(partials)") for l in cg.program.launches)
    one = check(b.build(e, s, a), inputs, rtol=1e-4, threads=1)
    assert one.stats["stages"] == 1


# --------------------------------------------------------------------------------------
# matmul, indexing, cat, pad, flip
# --------------------------------------------------------------------------------------

def test_matmul_with_elementwise_epilogue():
    b = Builder("linear")
    x = b.param(T((16, 32)), "x")
    w = b.param(T((64, 32)), "w")
    bias = b.param(T((64,)), "b")
    h = b.op("matmul", x, b.op("permute", w, perm=(1, 0)))        # BLAS reads w^T in place
    cg = check(b.build(b.op("tanh", b.op("add", h, bias))), [randn(16, 32), randn(64, 32),
                                                             randn(64)], rtol=1e-4,
               atol=1e-5)
    assert kinds(cg) == ["matmul", "elementwise"]     # epilogues are opt-in
    assert cg.stats["launches"] == 2


@pytest.mark.parametrize("d", [dt.float64, dt.int32, dt.float16])
def test_batched_matmul_dtypes_and_copies(d):
    b = Builder("bmm")
    a = b.param(T((3, 5, 4), d), "a")
    w = b.param(T((4, 6), d), "w")
    c = b.param(T((2, 1, 6, 4), d), "c")
    ab = b.op("matmul", a, w)                                       # (3, 5, 6)
    cc = b.op("matmul", ab, b.op("slice", c, starts=(0, 0, 0, 0), stops=(2, 1, 6, 4),
                                 steps=(1, 1, 1, 2)))               # strided: a copy
    if d is dt.int32:
        inputs = [np.random.randint(-4, 4, s).astype(np.int32) for s in [(3, 5, 4), (4, 6),
                                                                        (2, 1, 6, 4)]]
    else:
        inputs = [randn(*s).astype(d.np) for s in [(3, 5, 4), (4, 6), (2, 1, 6, 4)]]
    check(b.build(ab, cc), inputs, rtol=1e-2 if d is dt.float16 else 1e-6,
          atol=1e-2 if d is dt.float16 else 1e-8)


def test_gather_scatter_index_put():
    b = Builder("index")
    x = b.param(T((4, 5)), "x")
    idx = b.param(T((2, 3), dt.int64), "idx")
    src = b.param(T((3,)), "src")
    g1 = b.op("gather", b.op("permute", x, perm=(1, 0)), idx)      # non-contiguous source
    g2 = b.op("gather", b.op("exp", x), idx)
    sa = b.op("scatter_add", x, idx, src)
    ip = b.op("index_put", x, idx, src)
    idx_v = np.array([[0, 7, -1], [3, 7, 19]])
    cg = check(b.build(g1, g2, sa, ip), [randn(4, 5), idx_v, randn(3)])
    assert kinds(cg).count("gather") == 2 and kinds(cg).count("scatter") == 2
    with pytest.raises(IndexError, match="index 20 is out of bounds.*size 20"):
        cg(tensor(randn(4, 5)), tensor(np.array([[0, 1, 2], [3, 20, 0]])), tensor(randn(3)))
    out = cg(tensor(randn(4, 5)), tensor(idx_v), tensor(randn(3)))       # still usable
    assert out[0].shape == (2, 3)


def test_cat_pad_flip_nonzero():
    b = Builder("misc")
    x = b.param(T((4, 5)), "x")
    c = b.op("cat", x, b.op("exp", x), b.op("slice", x, starts=(0, 0), stops=(4, 5),
                                            steps=(2, 1)), axis=0)
    p = b.op("pad", x, lows=(1, 0), highs=(0, 2), interior=(1, 0), value=0.5)
    f = b.op("flip", b.op("permute", x, perm=(1, 0)), axes=(0, 1))
    nz = b.op("nonzero", b.op("gt", x, const(b, 0.0)), size=7)
    cg = check(b.build(c, p, f, nz), [randn(4, 5)])
    assert sorted(set(kinds(cg))) == ["cat", "elementwise", "flip", "nonzero", "pad"]


# --------------------------------------------------------------------------------------
# Outputs, inputs, errors
# --------------------------------------------------------------------------------------

def test_outputs_that_alias_inputs_or_each_other_are_copies():
    b = Builder("aliases")
    x = b.param(T((3, 4)), "x")
    e = b.op("exp", x)
    t = b.op("permute", x, perm=(1, 0))
    c = const(b, 2.5)
    cg = check(b.build(x, e, e, t, c, b.op("reshape", e, shape=(12,))), [randn(3, 4)])
    xt = tensor(randn(3, 4))
    outs = cg(xt)
    ptrs = {o._ptr for o in outs} | {xt._ptr}
    assert len(ptrs) == 7                                  # every output has its own buffer
    outs[1]._values()[...] = 0                             # so writing one leaves the rest
    assert outs[2]._values().min() > 0


def test_inputs_are_validated_before_native_code():
    b = Builder("sig")
    x = b.param(T((2, 3)), "x")
    i = b.param(T((3,), dt.int64), "idx")
    cg = CompiledGraph(b.build(b.op("add", x, b.op("cast", i, dtype=dt.float32))))
    with pytest.raises(TypeError, match=r"takes 2 inputs \(x: f32\[2,3\], idx: i64\[3\]\)"):
        cg(tensor(randn(2, 3)))
    with pytest.raises(TypeError, match=r"input %idx .* expects dtype int64, got int32"):
        cg(tensor(randn(2, 3)), tensor(np.arange(3, dtype=np.int32)))
    with pytest.raises(ValueError, match=r"input %x .* expects shape \[2, 3\], got \[3, 2\]"):
        cg(tensor(randn(3, 2)), tensor(np.arange(3)))
    with pytest.raises(TypeError, match=r"input %x .* a float32 array, got float64"):
        cg(np.zeros((2, 3)), np.arange(3))
    with pytest.raises(TypeError, match=r"input %x .* Tensor or a NumPy array, got list"):
        cg([[1, 2, 3]], np.arange(3))
    # NumPy arrays (even read-only or transposed) and non-contiguous tensors are accepted
    xv = randn(3, 2).T
    xv.flags.writeable = False
    out = cg(xv, np.arange(3))[0]._values()
    np.testing.assert_allclose(out, xv + np.arange(3))
    strided = views.permute(tensor(randn(3, 2)), (1, 0))
    np.testing.assert_allclose(cg(strided, np.arange(3))[0]._values(),
                               strided._values() + np.arange(3))


def test_composite_ops_are_refused_with_the_node_named():
    b = Builder("comp")
    x = b.param(T((2, 3)), "x")
    with pytest.raises(TypeError, match=r"%0 = softmax is a composite op"):
        CompiledGraph(b.build(b.op("softmax", x, dim=1)))


# --------------------------------------------------------------------------------------
# Memory planning
# --------------------------------------------------------------------------------------

def test_memory_plan_reuses_dead_buffers():
    b = Builder("ladder")
    x = b.param(T((32, 32)), "x")
    v = x
    # each step: a column reduction then a broadcast elementwise op (reductions over
    # leading axes: no row kernel takes them, so every step writes a buffer)
    for _ in range(6):
        m = b.op("amax", v, axes=(0,), keepdim=True)
        v = b.op("exp", b.op("sub", v, m))
    cg = check(b.build(b.op("sum", v, axes=(), keepdim=False)), [randn(32, 32)])
    plan = cg.plan
    assert plan.arena_bytes < plan.total_bytes
    assert plan.arena_bytes <= 2 * 4096 + 2 * 128 + 128
    arena = [buf for buf in plan.buffers if buf.in_arena]
    assert all(buf.offset % 64 == 0 for buf in arena)
    for a in arena:                      # buffers that share bytes are never live together
        for c in arena:
            if a is not c and a.offset < c.offset + c.nbytes and c.offset < a.offset + a.nbytes:
                assert a.last < c.first or c.last < a.first
    text = str(plan)
    assert "peak" in text and f"{plan.arena_bytes} B" in text
    graph_level = memory.plan_graph(fuse(cg.graph))
    assert graph_level.arena_bytes < graph_level.total_bytes


def _first_fit_by_scanning(buffers: list[memory.Buffer]) -> list[int]:
    """The planner's rule written the plain way: scan the live buffers by offset."""
    live: list[memory.Buffer] = []
    offsets = {}
    for b in sorted(buffers, key=lambda b: (b.first, -b.nbytes, b.name)):
        if b.nbytes == 0 or b.first < 0:
            offsets[b.name] = 0
            continue
        live = sorted((a for a in live if a.last >= b.first), key=lambda a: a.offset)
        start = 0
        for a in live:
            if a.offset - start >= memory.align_up(b.nbytes):
                break
            start = max(start, memory.align_up(a.offset + a.nbytes))
        b.offset = offsets[b.name] = start
        live.append(b)
    return [offsets[b.name] for b in buffers]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 30), st.integers(0, 10),
                          st.sampled_from([0, 4, 7, 64, 100, 4096]), st.integers(1, 5)),
                min_size=1, max_size=40))
def test_memory_plan_is_first_fit_over_live_buffers(specs):
    """The free-list planner (linear in the buffers on long graphs) places every buffer
    where scanning the live buffers would."""
    def make():
        return [memory.Buffer(f"b{i:02d}", size * k, "temp", first=f, last=f + span)
                for i, (f, span, size, k) in enumerate(specs)]
    bufs = make()
    plan = memory.plan_buffers(bufs)
    expected = _first_fit_by_scanning(make())
    assert [b.offset for b in bufs] == expected
    placed = [b for b in bufs if b.nbytes and b.first >= 0]
    assert plan.arena_bytes == max((b.offset + memory.align_up(b.nbytes) for b in placed),
                                   default=0)


def test_group_ranks_stay_topological(monkeypatch):
    """The ranks that bound the fusion pass's cycle walks order every read edge, also
    after merges that put an old group after a newer one (the backward of a long chain
    recomputes the forward and merges into it)."""
    import llgrad as lg
    from llgrad.passes import fusion

    checked, renumbered = [], []
    ranks = fusion._Fuser.ranks

    def verified(self):
        renumbered.append(self.rank_stale)
        rank = ranks(self)
        for grp in self.groups:
            if grp.merged_into is None:
                assert all(rank[grp] < rank[u] for u in self.users_of(grp))
        checked.append(self.rank_stale)
        return rank

    monkeypatch.setattr(fusion._Fuser, "ranks", verified)

    def f(x):
        for k in range(60):
            x = lg.sin(x) if k % 3 == 0 else (lg.tanh(x) if k % 3 == 1 else x * 1.01 + 0.1)
        return x.sum()

    x = lg.randn(256, requires_grad=True)
    (g,) = lg.autograd.grad(lg.compile(f)(x), [x])
    with lg.disable_compile():
        (want,) = lg.autograd.grad(f(x), [x])
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)

    def make():                          # merges in this step break the ranks
        lg.manual_seed(0)
        m = lg.nn.Sequential(lg.nn.Linear(6, 16), lg.nn.ReLU(), lg.nn.Linear(16, 3))
        return m, lg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, dampening=0.1)

    (model, opt), (ref, ref_opt) = make(), make()
    x, y = lg.randn(32, 6), lg.randint(0, 3, (32,))
    cstep = lg.compile(train_step)
    for _ in range(5):
        np.testing.assert_allclose(cstep(model, opt, x, y).item(),
                                   train_step(ref, ref_opt, x, y).item(), rtol=1e-5)
    assert len(checked) > 100 and not any(checked) and any(renumbered)


def test_views_alias_their_base_in_the_plan():
    b = Builder("view_plan")
    x = b.param(T((4, 8)), "x")
    e = b.op("exp", x)
    t = b.op("permute", e, perm=(1, 0))
    y = b.param(T((8, 4)), "y")
    cg = check(b.build(b.op("mul", t, y), b.op("sum", e, axes=(0,), keepdim=False)),
               [randn(4, 8), randn(8, 4)])
    base, layout = cg.plan.views[t]
    assert base.node is e and layout.strides == (1, 8)
    assert "aliases" in str(cg.plan)


# --------------------------------------------------------------------------------------
# Random graphs
# --------------------------------------------------------------------------------------

UNARY = ("sin", "tanh", "neg", "abs", "sigmoid", "relu", "square")
BINARY = ("add", "mul", "sub", "maximum")


def _factorizations(n: int) -> list[tuple[int, ...]]:
    out = [(n,)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
    return out


@st.composite
def graphs(draw):
    """Random graphs of elementwise ops, views, copies and reductions on three params."""
    b = Builder("random")
    nodes = [b.param(T((2, 3, 4)), "x"), b.param(T((3, 1)), "y"), b.param(T((4,)), "z")]
    for _ in range(draw(st.integers(2, 10))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "move", "move", "reduce",
                                     "cast", "where", "cat"]))
        a = draw(st.sampled_from(nodes))
        nd = a.type.ndim
        if kind == "unary":
            nodes.append(b.op(draw(st.sampled_from(UNARY)), a))
        elif kind == "cast":
            c = b.op("cast", a, dtype=draw(st.sampled_from([dt.float64, dt.float16])))
            nodes.append(b.op("cast", c, dtype=dt.float32))
        elif kind in ("binary", "where"):
            c = draw(st.sampled_from(nodes + [None]))
            if c is None:
                c = const(b, draw(st.sampled_from([-1.5, 0.0, 0.25, 2.0])))
            try:
                broadcast_shapes(a.shape, c.shape)
            except ValueError:
                continue
            if kind == "where":
                nodes.append(b.op("where", b.op("gt", a, c), a, c))
            else:
                nodes.append(b.op(draw(st.sampled_from(BINARY)), a, c))
        elif kind == "move" and nd:
            move = draw(st.sampled_from(["permute", "reshape", "expand", "slice", "flip",
                                         "pad"]))
            if move == "permute":
                perm = tuple(draw(st.permutations(list(range(nd)))))
                nodes.append(b.op("permute", a, perm=perm))
            elif move == "reshape":
                n = a.type.numel
                nodes.append(b.op("reshape", a, shape=draw(st.sampled_from(
                    _factorizations(n) if n > 1 else [(1,)]))))
            elif move == "expand":
                nodes.append(b.op("expand", a, shape=(2,) + tuple(3 if s == 1 else s
                                                                   for s in a.shape)))
            elif move == "slice":
                starts = tuple(draw(st.integers(0, max(s - 1, 0))) for s in a.shape)
                steps = tuple(draw(st.integers(1, 2)) for _ in a.shape)
                nodes.append(b.op("slice", a, starts=starts, stops=a.shape, steps=steps))
            elif move == "flip":
                nodes.append(b.op("flip", a, axes=(draw(st.integers(0, nd - 1)),)))
            else:
                nodes.append(b.op("pad", a, lows=(1,) + (0,) * (nd - 1), highs=(0,) * nd,
                                  interior=(0,) * (nd - 1) + (1,), value=-1.0))
        elif kind == "reduce" and nd:
            op = draw(st.sampled_from(["sum", "amax", "amin", "prod", "argmax"]))
            axes = tuple(sorted(set(draw(st.lists(st.integers(0, nd - 1), min_size=1,
                                                  max_size=nd)))))
            r = b.op(op, a, axes=axes[:1] if op == "argmax" else axes,
                     keepdim=draw(st.booleans()))
            nodes.append(b.op("cast", r, dtype=dt.float32) if op == "argmax" else r)
        elif kind == "cat" and nd:
            c = draw(st.sampled_from(nodes))
            if c.shape[1:] == a.shape[1:] and c.shape:
                nodes.append(b.op("cat", a, c, axis=0))
    extra = draw(st.lists(st.sampled_from(nodes), max_size=2))
    return b.build(nodes[-1], *extra)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.integers(0, 2**31))
def test_random_graphs_match_the_interpreter(g, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(p.shape).astype(np.float32) for p in g.params]
    check(g, inputs, rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("n", [16, 40000])
def test_long_chains_are_cut_into_bounded_kernels(n):
    """Big spaces: bodies up to MAX_GROUP_COST; small ones (intermediates in cache):
    short bodies of SMALL_GROUP_COST, which overlap their iterations better."""
    from llgrad.passes.fusion import MAX_GROUP_COST, SMALL_SPACE, max_group_cost, op_cost
    b = Builder("long")
    x = b.param(T((n,)), "x")
    v = x
    for i in range(3 * MAX_GROUP_COST // 2):
        v = b.op("neg", v) if i % 2 else b.op("add", v, x)
    v = b.op("sum", b.op("exp", v), axes=(), keepdim=False)
    cg = check(b.build(v), [np.random.rand(n).astype(np.float32) * 0.01], rtol=1e-4)
    cap = max_group_cost((n,))
    assert cap == (MAX_GROUP_COST if n > SMALL_SPACE else 12)
    assert len(cg.kernels) == -(-(3 * MAX_GROUP_COST // 2) // cap) + (cap == 12)
    assert all(sum(op_cost(n) for n in k.nodes if n.group.value != "reduce")
               <= cap for k in cg.kernels)
    assert list(fuse(cg.graph))[-1].kind is Kind.REDUCE


# --------------------------------------------------------------------------------------
# The B3 chain, the assembly
# --------------------------------------------------------------------------------------

def b3_graph(n: int = 64, length: int = 30):
    b = Builder("b3")
    x = b.param(T((n,)), "x")
    v = x
    for i in range(length):
        k = i % 8
        if k in (0, 4):
            v = b.op("sin", v)
        elif k in (3, 7):
            v = b.op("tanh", v)
        elif k in (1, 5):
            v = b.op("mul", v, const(b, 1.01))
        elif k == 2:
            v = b.op("add", v, const(b, 0.1))
        else:
            v = b.op("sub", v, const(b, 0.1))
    return b.build(b.op("sum", v, axes=(), keepdim=False))


def test_b3_chain_is_short_kernels_and_cheap_to_call():
    g = b3_graph()
    cg = check(g, [randn(64)], rtol=1e-5)
    # 64 floats: short loop bodies (one transcendental each), the sum takes the last
    assert kinds(cg)[-1] == "reduce" and set(kinds(cg)) == {"elementwise", "reduce"}
    assert cg.stats["launches"] == len(kinds(cg)) <= 16
    x = tensor(randn(64))
    for _ in range(200):
        cg(x)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(2000):
            cg(x)
        best = min(best, (time.perf_counter() - t0) / 2000)
    sec = cg.stats["seconds"]
    print(f"\nB3 compiled call: {best * 1e6:.2f} us per call; compile "
          f"{sec['total'] * 1e3:.0f} ms (fusion {sec['fusion'] * 1e3:.1f} ms, emit "
          f"{sec['emit'] * 1e3:.1f} ms, LLVM {sec['llvm'] * 1e3:.0f} ms"
          f"{', from the disk cache' if cg.stats['from_cache'] else ''})")


def _function_asm(asm: str, name: str) -> str:
    """The assembly between `name:` and the function's `.size` directive."""
    start = asm.index(f"\n{name}:")
    end = asm.index(".size", start)
    return asm[start:end]


def test_fused_kernel_assembly_is_vectorized_and_calls_nothing():
    b = Builder("asm")
    x = b.param(T((1024,)), "x")
    y = b.param(T((1024,)), "y")
    v = b.op("add", b.op("mul", b.op("exp", x), y), b.op("tanh", y))
    cg = CompiledGraph(b.build(v))
    asm = cg.asm()
    body = _function_asm(asm, "launch0")
    assert re.search(r"\b(v\w+ps)\s+%(zmm|ymm|xmm)", body), body[:2000]
    assert re.search(r"%(zmm|ymm)\d+", body)
    assert "call" not in body
    entry = _function_asm(asm, "entry")
    assert re.findall(r"call\w*\s+(\S+)", entry) in (["launch0"], ["launch0@PLT"], [])
    assert 'define void @"entry"(ptr' in cg.llvm_ir and "alwaysinline" in cg.llvm_ir
