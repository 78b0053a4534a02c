"""Matmul epilogues (opt-in: LLGRAD_MATMUL_EPILOGUES=1): an elementwise group that reads a 2-D BLAS product element by element
runs inside the matmul kernel (`passes.fusion.merge_epilogues`,
`codegen.matmul._tile_function`): tile by tile inside llgrad's own gemm (`gemm_ex`), or on
each panel of C right after a library's gemm call. Every test compares the compiled graph
with the NumPy interpreter and checks the kernels it became."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.ir import Builder, TensorType
from llgrad.ir import dtypes as dt
from llgrad.runtime import blas
from llgrad.compiler.executable import CompiledGraph
from llgrad.schedule import elementwise as ew
from llgrad.schedule.matmul import MatmulKernel

from conftest import kernel_kinds, run_graph, train_step


@pytest.fixture(autouse=True)
def epilogues_on(monkeypatch):
    """Epilogues are opt-in (LLGRAD_MATMUL_EPILOGUES=1, see passes/fusion.py)."""
    from llgrad.passes import fusion
    monkeypatch.setattr(fusion, "MATMUL_EPILOGUES", True)


def T(shape, d=dt.float32) -> TensorType:
    return TensorType(d, tuple(shape))


def run(g, inputs, rtol=1e-4, atol=1e-4, threads=None) -> CompiledGraph:
    return run_graph(g, inputs, rtol, atol, threads)


kinds = kernel_kinds


def randn(*shape, dtype=np.float32):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def _linear_relu(n, k, m, d=dt.float32, keep_product=False):
    b = Builder("linear")
    x = b.param(T((n, k), d), "x")
    w = b.param(T((k, m), d), "w")
    bias = b.param(T((m,), d), "b")
    h = b.op("matmul", x, w)
    z = b.op("relu", b.op("add", h, bias))
    mask = b.op("gt", z, b.op("const", value=0.0, dtype=d, shape=()))
    outs = (z, mask, h) if keep_product else (z, mask)
    return b.build(*outs)


@pytest.mark.parametrize("n,k,m", [(16, 32, 24),       # one gemm call
                                   (128, 300, 256),    # panels of rows on two threads
                                   (127, 300, 256)])   # odd rows: panels of columns
@pytest.mark.parametrize("d", [dt.float32, dt.float64])
def test_bias_relu_and_mask_run_in_the_matmul_kernel(n, k, m, d):
    np_d = np.float32 if d is dt.float32 else np.float64
    cg = run(_linear_relu(n, k, m, d), [randn(n, k, dtype=np_d), randn(k, m, dtype=np_d),
                                        randn(m, dtype=np_d)], threads=2)
    assert kinds(cg) == ["matmul"] and cg.stats["launches"] == 1
    assert "with epilogue of 3 ops" in str(cg.schedule)


def test_product_read_elsewhere_is_also_written():
    cg = run(_linear_relu(64, 40, 48, keep_product=True),
             [randn(64, 40), randn(40, 48), randn(48)])
    assert kinds(cg) == ["matmul"]


def test_epilogue_reads_a_transposed_operand():
    """A read with a column stride other than 1 takes the kernel's run-time stride path."""
    b = Builder("transposed")
    x = b.param(T((96, 64)), "x")
    w = b.param(T((64, 80)), "w")
    u = b.param(T((80, 96)), "u")
    y = b.op("mul", b.op("matmul", x, w), b.op("permute", u, perm=(1, 0)))
    cg = run(b.build(y), [randn(96, 64), randn(64, 80), randn(80, 96)], threads=2)
    assert kinds(cg) == ["matmul"]


def test_no_epilogue_when_the_group_also_needs_a_reduction_of_the_product():
    """y = C - sum(C): the group reads the sum, which reads C, so folding the group into
    the matmul would make a cycle; the kernels stay apart and the values are right."""
    b = Builder("cycle")
    x = b.param(T((32, 16)), "x")
    w = b.param(T((16, 300)), "w")
    c = b.op("matmul", x, w)
    s = b.op("sum", c, axes=(1,), keepdim=True)
    cg = run(b.build(b.op("sub", c, s)), [randn(32, 16), randn(16, 300)])
    assert kinds(cg)[0] == "matmul" and len(kinds(cg)) > 1


@pytest.mark.parametrize("d", [dt.int32, dt.float16])
def test_loop_kernels_keep_their_epilogue_separate(d):
    np_d = np.int32 if d is dt.int32 else np.float16
    b = Builder("ints")
    x = b.param(T((8, 5), d), "x")
    w = b.param(T((5, 6), d), "w")
    y = b.op("add", b.op("matmul", x, w), b.op("const", value=1, dtype=d, shape=()))
    cg = run(b.build(y), [(randn(8, 5) * 3).astype(np_d), (randn(5, 6) * 3).astype(np_d)],
             rtol=1e-2, atol=1e-2)
    assert kinds(cg) == ["matmul", "elementwise"]


def test_spec_refuses_epilogues_it_cannot_run():
    e = ew.Expr((dt.float32,), (ew.ExprNode("relu", (0,), ()),), (1,))
    with pytest.raises(ValueError, match="epilogues"):
        MatmulKernel(dt.float16, 0, e)
    with pytest.raises(ValueError, match="epilogues"):
        MatmulKernel(dt.float64, 0, e)


def test_training_step_updates_weights_in_the_gradient_matmul():
    """An SGD step's `w - lr * (x^T @ dz)` is the weight-gradient matmul's epilogue, writes
    w in place and equals eager."""
    def make():
        lg.manual_seed(0)
        model = lg.nn.Sequential(lg.nn.Linear(300, 256), lg.nn.ReLU(), lg.nn.Linear(256, 10))
        return model, lg.optim.SGD(model.parameters(), lr=0.05)

    step = train_step

    x, y = lg.randn(128, 300), lg.randint(0, 10, (128,))
    (m1, o1), (m2, o2) = make(), make()
    cf = lg.compile(step)
    for _ in range(3):
        np.testing.assert_allclose(cf(m1, o1, x, y).item(), step(m2, o2, x, y).item(),
                                   rtol=1e-5)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    sched = str(cf.inspect(m1, o1, x, y).schedule)
    assert sched.count("with epilogue") >= 3


@pytest.fixture(params=["tiles", "panels"])
def epilogue_mode(request, monkeypatch):
    """Both ways an epilogue runs: per tile inside llgrad's gemm (where it is the gemm),
    and over the block after the gemm call (as with a library's gemm)."""
    if request.param == "tiles" and not blas.tile_epilogues(dt.float32):
        pytest.skip("llgrad's gemm is not the float32 gemm here")
    if request.param == "panels":
        monkeypatch.setattr(blas, "tile_epilogues", lambda d: False)
    return request.param


@pytest.mark.parametrize("n,k,m", [(10, 64, 200),      # few rows: the gemm runs transposed
                                   (200, 64, 10),      # few columns
                                   (96, 700, 80),      # three k slabs: only the last one
                                   (40, 30, 1000),     # several blocks of rows in the gemm
                                   (1, 50, 300),       # a row vector: gemv, then the block
                                   (300, 50, 1)])      # a column vector
def test_epilogue_modes_agree_with_numpy(epilogue_mode, n, k, m):
    cg = run(_linear_relu(n, k, m), [randn(n, k), randn(k, m), randn(m)], threads=1)
    assert kinds(cg) == ["matmul"]
    specs = [l.spec for l in cg.program.launches if isinstance(l.spec, MatmulKernel)]
    assert [s.tile_epilogue for s in specs] == [epilogue_mode == "tiles"]


def test_tile_epilogue_on_panels_of_two_threads(epilogue_mode):
    """Each thread's panel has its own context (pointers at its batch offsets)."""
    cg = run(_linear_relu(130, 90, 256), [randn(130, 90), randn(90, 256), randn(256)],
             threads=2)
    assert "[2||" in str(cg.schedule)
