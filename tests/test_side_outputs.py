"""Reductions with side outputs: a reduction kernel that evaluates an elementwise group as
its prologue and also stores the group's values the rest of the graph needs
(`passes.fusion.merge_reductions`, `schedule.reduce`), e.g. a loss and its gradients from
one pass. Every test compares the compiled graph with the NumPy interpreter and checks the
kernels it became."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.ir import Builder, TensorType
from llgrad.ir import dtypes as dt
from llgrad.compiler.executable import CompiledGraph
from llgrad.schedule import elementwise as ew
from llgrad.schedule.reduce import ReduceKernel

from conftest import kernel_kinds, run_graph


def T(shape, d=dt.float32) -> TensorType:
    return TensorType(d, tuple(shape))


def run(g, inputs, rtol=1e-5, atol=1e-6) -> CompiledGraph:
    return run_graph(g, inputs, rtol, atol)


kinds = kernel_kinds


def launches(cg: CompiledGraph) -> list[str]:
    return [launch.what for launch in cg.schedule.launches]


JOINT = """\
schedule of @joint: 1 launches, 4 buffers; moves 49.2 KB (minimum 49.2 KB)
L0 reduce [4096+] sum with prologue and 1 side output: reads 32.8 KB, writes 16.4 KB
    load   in0        f32[4096] strides (1)  16.4 KB
    load   in1        f32[4096] strides (1)  16.4 KB
    store  out1        f32[4096] strides (1)  16.4 KB
    store  out0        f32[4096] strides (0)  4 B
    body: acc = sum(in0:f32 in1:f32 v2=mul(0,1) v3=tanh(2) v4=sub(0,3) -> 3,4)"""


def _joint(n: int = 4096, d=dt.float32):
    """A loss and a value computed from the same tanh: one kernel."""
    b = Builder("joint")
    x = b.param(T((n,), d), "x")
    w = b.param(T((n,), d), "w")
    t = b.op("tanh", b.op("mul", x, w))
    return b.build(b.op("sum", t, axes=(), keepdim=False), b.op("sub", x, t))


def test_joint_loss_and_value_is_one_kernel_golden_text():
    rng = np.random.default_rng(0)
    cg = run(_joint(), [rng.standard_normal(4096, np.float32) for _ in range(2)], atol=1e-4)
    assert kinds(cg) == ["reduce"]
    assert str(cg.schedule) == JOINT


@pytest.mark.parametrize("n", [1, 17, 300_001])
@pytest.mark.parametrize("d", [dt.float32, dt.float64])
def test_whole_reduction_with_side_outputs_small_and_split(n, d):
    """300,001 elements take the two-stage (partial, combine) kernels: each chunk stores
    its own share of the side output."""
    rng = np.random.default_rng(n)
    np_d = np.float32 if d is dt.float32 else np.float64
    cg = run(_joint(n, d), [rng.standard_normal(n).astype(np_d) for _ in range(2)],
             rtol=1e-5 if d is dt.float32 else 1e-12,
             atol=1e-6 * max(n, 1) ** 0.5 if d is dt.float32 else 1e-9)
    assert kinds(cg) == ["reduce"]
    if n == 300_001:
        assert launches(cg)[0].endswith("(partials)") and "1 side output" in launches(cg)[0]


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin"])
def test_row_reduction_with_side_outputs_over_a_transposed_input(op):
    """Rows of 300 (a row kernel) of a transposed parameter: the side outputs are dense
    in the reduction's input shape while the input is read through strides."""
    b = Builder("rows")
    xt = b.param(T((300, 48)), "xt")
    x = b.op("permute", xt, perm=(1, 0))
    e = b.op("mul", b.op("exp", b.op("mul", x, b.op("const", value=0.01, dtype=dt.float32,
                                                           shape=()))), x)
    r = b.op(op, b.op("add", e, b.op("const", value=1.0, dtype=dt.float32, shape=())),
             axes=(1,), keepdim=False)
    cg = run(b.build(r, e), [np.random.default_rng(1).standard_normal((300, 48))
                             .astype(np.float32)], rtol=2e-5 if op == "prod" else 1e-5)
    assert kinds(cg) == ["reduce"]


def test_half_precision_side_outputs():
    b = Builder("half")
    x = b.param(T((2048,), dt.float16), "x")
    y = b.op("sigmoid", b.op("mul", x, x))
    cg = run(b.build(b.op("sum", y, axes=(), keepdim=False), y),
             [np.random.default_rng(2).standard_normal(2048).astype(np.float16)],
             rtol=2e-3, atol=1e-3)
    assert kinds(cg) == ["reduce"]


def test_column_and_short_reductions_keep_their_own_kernel():
    """A column sum (axis 0) or a reduction over a short last axis would lose the
    elementwise loop's parallel split: the elementwise kernel stays separate."""
    for shape, axes in (((64, 512), (0,)), ((4096, 8), (1,))):
        b = Builder("col")
        x = b.param(T(shape), "x")
        y = b.op("tanh", x)
        cg = run(b.build(b.op("sum", y, axes=axes, keepdim=False), b.op("mul", y, y)),
                 [np.random.default_rng(3).standard_normal(shape).astype(np.float32)])
        assert kinds(cg) == ["elementwise", "reduce"], shape


def test_no_merge_when_another_kernel_sits_between():
    """The group feeds a matmul whose result the reduction also reads: merging would make
    a cycle (group+reduction -> matmul -> group+reduction), so the kernels stay apart."""
    b = Builder("between")
    x = b.param(T((256, 256)), "x")
    y = b.op("tanh", x)
    z = b.op("matmul", y, y)
    s = b.op("sum", b.op("add", y, z), axes=(), keepdim=False)
    cg = run(b.build(s, y), [np.random.default_rng(4).standard_normal((256, 256))
                             .astype(np.float32) * 0.1], rtol=1e-4, atol=1e-4)
    assert "matmul" in kinds(cg) and kinds(cg).index("matmul") < kinds(cg).index("reduce")


def test_arg_reductions_take_no_side_outputs():
    prologue = ew.Expr((dt.float32,), (ew.ExprNode("exp", (0,), ()),), (1, 1))
    with pytest.raises(ValueError, match="arg reductions"):
        ReduceKernel("argmax", dt.float32, dt.int64, (True,), prologue=prologue)


def test_value_and_grad_of_b1_is_one_pass():
    """BENCHMARKS.md's B1 under lg.compile(lg.value_and_grad(f)): the loss and both
    gradients come from one kernel (plus the combine of the split sum), reading x and w
    once and writing the gradients once, and equal eager."""
    rng = np.random.default_rng(5)
    x, w = (lg.tensor(rng.standard_normal(100_003).astype(np.float32)) for _ in range(2))

    def f(x, w):
        return (lg.tanh(x * w + 0.5) * lg.sigmoid(x) + lg.exp(-x * x)).sum()

    vg = lg.value_and_grad(f, argnums=(0, 1))
    cf = lg.compile(vg)
    (loss, (gx, gw)), (loss_e, (gx_e, gw_e)) = cf(x, w), vg(x, w)
    np.testing.assert_allclose(loss.item(), loss_e.item(), rtol=1e-5)
    np.testing.assert_allclose(gx.numpy(), gx_e.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.numpy(), gw_e.numpy(), rtol=1e-5, atol=1e-6)
    stats = cf.inspect(x, w).stats
    assert stats["codegen bytes moved"] <= 1.01 * stats["codegen minimum bytes"]
