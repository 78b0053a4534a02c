"""GPU reduction kernels (`llgrad/codegen/gpu/reduce.py`): the grid emulator's results equal
the CPU path's for row and column kernels, partial/combine modes, arg ops, prologues with
side outputs, many shapes and dtypes; the PTX assembles with ptxas."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn.functional as F
from llgrad.codegen.gpu import program as gp
from llgrad.codegen.gpu import ptx
from llgrad.codegen.gpu.emulate import EmulatedGraph
from llgrad.compiler.executable import CompiledGraph
from llgrad.schedule.reduce import ReduceKernel

RNG = np.random.default_rng(7)


def _data(shape, dtype, transpose=False):
    if transpose:
        shape = tuple(reversed(shape))
    if dtype == np.bool_:
        a = RNG.random(shape) < 0.3
    elif np.issubdtype(dtype, np.integer):
        a = RNG.integers(-50, 50, size=shape).astype(dtype)
    else:
        a = RNG.standard_normal(shape).astype(dtype)
    t = lg.tensor(a)
    return t.T if transpose else t


def _graph(f, *xs):
    cf = lg.compile(f)
    cf(*xs)
    return cf.inspect(*xs).optimized


def _host(t):
    """A tensor as the array the emulator takes (bfloat16 as its uint16 bits)."""
    if t.dtype is lg.bfloat16:
        return np.ascontiguousarray(t.view(lg.int16).numpy().view(np.uint16))
    return np.ascontiguousarray(t.numpy())


def _float(t_or_bits, dtype):
    """Outputs as comparable arrays: bfloat16 (a tensor, or uint16 bits) as float32."""
    if dtype is lg.bfloat16:
        if isinstance(t_or_bits, np.ndarray):
            return (t_or_bits.astype(np.uint32) << 16).view(np.float32)
        return t_or_bits.float().numpy()
    return np.asarray(t_or_bits if isinstance(t_or_bits, np.ndarray) else t_or_bits.numpy())


def _specs(emu):
    return [l.spec for l in emu.lowered.program.launches if isinstance(l.spec, ReduceKernel)]


def _check(f, *xs, rtol=1e-5, atol=1e-6):
    """Run `f`'s graph on the CPU and in the emulator; outputs must agree (exactly for
    integers, bools and arg ops; floats to `rtol` of each output's largest magnitude, as
    the CPU adds runs of float32 sums in float32). Extra graph parameters (a gradient's
    seed) get ones. Returns the graph and its reduction specs."""
    g = _graph(f, *xs)
    ins = list(xs) + [lg.tensor(np.ones(p.shape, p.dtype.np)) for p in g.params[len(xs):]]
    cpu_t = CompiledGraph(g)(*ins)
    emu = EmulatedGraph(g)
    got = emu(*[_host(t) for t in ins])
    assert len(cpu_t) == len(got)
    for t, e, o in zip(cpu_t, got, g.outputs):
        c, e = _float(t, o.dtype), _float(e, o.dtype)
        assert c.shape == e.shape and c.dtype == e.dtype, (c.shape, e.shape, c.dtype, e.dtype)
        if c.dtype.kind in "fc":
            finite = np.abs(np.where(np.isfinite(c), c, 0))
            scale = float(finite.max()) if c.size else 0.0
            np.testing.assert_allclose(e, c, rtol=rtol, atol=max(atol, rtol * scale),
                                       equal_nan=True)
        else:
            np.testing.assert_array_equal(e, c)
    return g, _specs(emu)


# -- (a) the emulator equals the CPU path -------------------------------------------------

F32, F64, I32, I64, B = np.float32, np.float64, np.int32, np.int64, np.bool_

CASES = [
    # (name, function, shape, dtype, transpose)
    ("sum_all", lambda x: x.sum(), (37, 53), F32, False),
    ("sum0", lambda x: x.sum(0), (37, 53), F32, False),
    ("sum1", lambda x: x.sum(-1), (37, 53), F32, False),
    ("sum0_T", lambda x: x.sum(0), (37, 53), F32, True),
    ("sum1_T", lambda x: x.sum(1), (37, 53), F64, True),
    ("sum_short_rows", lambda x: x.sum(-1), (1000, 3), F32, False),
    ("sum_row_33", lambda x: x.sum(-1), (70, 33), F64, False),
    ("sum_middle", lambda x: x.sum(1), (5, 7, 300), F32, False),
    ("sum_outer_inner", lambda x: x.sum((0, 2)), (6, 9, 41), F32, False),
    ("sum_size1", lambda x: x.sum(1), (40, 1), F32, False),
    ("sum_1row", lambda x: x.sum(0), (1, 300), F32, False),
    ("sum_int32", lambda x: x.sum(1), (33, 257), I32, False),
    ("sum_int64_all", lambda x: x.sum(), (513,), I64, False),
    ("sum_int_col", lambda x: x.sum(0), (129, 31), I32, False),
    ("prod", lambda x: (x * 0.1 + 1).prod(1), (20, 45), F32, False),
    ("prod_int", lambda x: (x % 3 + 1).prod(0), (9, 70), I64, False),
    ("amax1", lambda x: x.amax(1), (37, 53), F32, False),
    ("amax0", lambda x: x.amax(0), (37, 53), F64, False),
    ("amin_T", lambda x: x.amin(1), (37, 53), F32, True),
    ("amax_int", lambda x: x.amax(0), (300, 17), I32, False),
    ("amin_int_all", lambda x: x.amin(), (1000,), I64, False),
    ("argmax_all", lambda x: x.argmax(), (37, 53), F32, False),
    ("argmax1", lambda x: x.argmax(1), (37, 53), F32, False),
    ("argmin0", lambda x: x.argmin(0), (37, 53), F64, False),
    ("argmax0_T", lambda x: x.argmax(0), (37, 53), F32, True),
    ("argmax_int_ties", lambda x: (x % 4).argmax(1), (30, 100), I32, False),
    ("argmin_int_short", lambda x: x.argmin(-1), (300, 5), I64, False),
    ("mean", lambda x: x.mean(1), (37, 300), F32, False),
    ("var", lambda x: x.var(0), (300, 37), F32, False),
    ("any", lambda x: x.any(1), (40, 77), B, False),
    ("all", lambda x: x.all(0), (40, 77), B, False),
    ("bool_sum", lambda x: x.sum(1), (40, 77), B, False),
    ("expr_sum", lambda x: (lg.exp(x) * 2 + 1).sum(0), (65, 40), F32, False),
]


@pytest.mark.parametrize("name,f,shape,dtype,transpose", CASES, ids=[c[0] for c in CASES])
def test_matches_cpu(name, f, shape, dtype, transpose):
    rtol = 1e-4 if name.startswith("prod") else 1e-5
    _, specs = _check(f, _data(shape, dtype, transpose), rtol=rtol)
    assert specs, f"{name}: no reduction launch"


BIG = [
    # partial mode (chunks of one reduced loop), then a full-mode sum or a combine
    ("sum_all_big", lambda x: x.sum(), (300, 700), F32),
    ("sum_rows_big", lambda x: x.sum(-1), (4, 40000), F32),
    ("sum_cols_big", lambda x: x.sum(0), (40000, 4), F64),
    ("sum_two_loops_big", lambda x: x.sum((0, 2)), (8, 50, 400), F32),
    ("argmax_big", lambda x: x.argmax(), (200000,), F32),
    ("argmin_cols_big", lambda x: x.argmin(0), (40000, 5), F32),
    ("amax_int_big", lambda x: x.amax(), (150001,), I32),
    ("sum_int_big", lambda x: x.sum(), (150001,), I64),
]


@pytest.mark.parametrize("name,f,shape,dtype", BIG, ids=[c[0] for c in BIG])
def test_partial_modes(name, f, shape, dtype):
    _, specs = _check(f, _data(shape, dtype))
    modes = {s.mode for s in specs}
    assert "partial" in modes, modes
    if name.startswith("arg"):
        assert "combine" in modes


def test_float16_and_bfloat16():
    for d in (lg.float16, lg.bfloat16):
        x = lg.tensor(RNG.standard_normal((33, 70)).astype(np.float32)).to(d)
        _check(lambda x: x.sum(1), x, rtol=1e-2, atol=1e-2)
        _check(lambda x: x.argmin(0), x)


def test_complex():
    a = (RNG.standard_normal((37, 53)) + 1j * RNG.standard_normal((37, 53))).astype(np.complex64)
    x = lg.tensor(a)
    _check(lambda x: x.sum(1), x)
    _check(lambda x: x.sum(0), x)
    _check(lambda x: (x * 0.1 + 1).prod(1), x, rtol=1e-4)


def test_nan_propagation():
    a = RNG.standard_normal((20, 70)).astype(np.float32)
    a[3, 10] = np.nan
    a[7, 0] = np.nan
    a[7, 69] = np.nan
    a[11, :] = np.nan
    a[15, 5] = np.inf
    x = lg.tensor(a)
    for f in (lambda x: x.amax(1), lambda x: x.amin(0), lambda x: x.argmax(1),
              lambda x: x.argmin(0), lambda x: x.sum(1), lambda x: x.argmax()):
        _check(f, x)
    big = RNG.standard_normal(200000).astype(np.float32)
    big[123457] = np.nan
    big[150000] = np.nan
    _check(lambda x: x.argmax(), lg.tensor(big))
    _check(lambda x: x.amin(), lg.tensor(big))


def test_all_equal_extremes_take_first_index():
    x = lg.tensor(np.full((9, 300), -np.inf, np.float32))
    _check(lambda x: x.argmax(1), x)
    _check(lambda x: x.argmax(0), x)
    y = lg.tensor(np.full((200000,), 3, np.int32))
    _check(lambda x: x.argmin(), y)


def test_empty():
    _check(lambda x: x.sum(1), _data((0, 5), F32))
    _check(lambda x: x.sum(0), _data((0, 5), F32))
    _check(lambda x: x.prod(1), _data((5, 0), F32))
    _check(lambda x: x.amax(1), _data((7, 1), F32))
    _check(lambda x: x.argmax(0), _data((1, 9), F32))


def test_b1_prologue_side_outputs():
    """A full sum of an elementwise expression and its gradient: a partial-mode reduction
    with a prologue that also stores the gradient (side outputs), then the combine."""
    def loss(x, w):
        return (lg.tanh(x * w + 0.5) * lg.sigmoid(x) + lg.exp(-x * x)).sum()
    x, w = _data((300, 500), F32), _data((300, 500), F32)
    _, specs = _check(loss, x, w, rtol=1e-5)
    _, specs = _check(lg.value_and_grad(loss, argnums=(0, 1)), x, w, rtol=1e-5, atol=1e-5)
    partial = [s for s in specs if s.mode == "partial"]
    assert partial and partial[0].prologue is not None and partial[0].n_side >= 1


def test_layer_norm_grad_column_sums():
    C = 96

    def f(X, g, b, T):
        y = F.layer_norm(lg.softmax(X, -1) * g + b, (C,), eps=1e-5)
        return (y * T).sum()
    X, T = _data((77, C), F32), _data((77, C), F32)
    g, b = _data((C,), F32), _data((C,), F32)
    _, specs = _check(lg.value_and_grad(f, argnums=(0, 1, 2)), X, g, b, T,
                      rtol=1e-4, atol=1e-5)
    assert any(s.is_column for s in specs)


def test_geometry_mapping():
    """Rows longer than 32: a block per output; short rows and columns: a thread per
    output, with slices of the reduced space when outputs are few."""
    x = _data((37, 300), F32)
    row = EmulatedGraph(_graph(lambda x: x.sum(1), x))
    (st,) = row.lowered.module.steps
    assert (st.geometry.blocks, st.geometry.threads) == (37, 96)   # 300 / 4, in warps
    col = EmulatedGraph(_graph(lambda x: x.sum(0), x))
    (st,) = col.lowered.module.steps
    assert st.geometry.threads == 256 and st.geometry.blocks == -(-300 // 32)
    short = EmulatedGraph(_graph(lambda x: x.sum(1), _data((100000, 3), F32)))
    (st,) = short.lowered.module.steps
    assert st.geometry.threads == 256 and st.geometry.blocks == -(-100000 // 256)


# -- (b) the PTX assembles ----------------------------------------------------------------

PTX_GRAPHS = [
    ("row_sum", lambda x: x.sum(-1), (37, 300), F32),
    ("col_sum", lambda x: x.sum(0), (37, 300), F64),
    ("short", lambda x: x.amin(-1), (1000, 3), F32),
    ("argmax_partial", lambda x: x.argmax(), (200000,), F32),
    ("argmin_cols_partial", lambda x: x.argmin(0), (40000, 5), F64),
    ("two_loops_partial", lambda x: x.sum((0, 2)), (8, 50, 400), F32),
    ("int_prod", lambda x: x.prod(1), (20, 45), I32),
    ("bool_any", lambda x: x.any(0), (40, 77), B),
    ("amax_f64", lambda x: x.amax(1), (40, 77), F64),
    ("b1_grad", lg.value_and_grad(
        lambda x, w: (lg.tanh(x * w + 0.5) * lg.sigmoid(x) + lg.exp(-x * x)).sum(),
        argnums=(0, 1)), (300, 500), F32),
]


def test_ptx_assembles():
    if ptx.find_ptxas() is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc)")
    for name, f, shape, dtype in PTX_GRAPHS:
        xs = [_data(shape, dtype)] * (2 if name == "b1_grad" else 1)
        ir_text = gp.lower_graph(_graph(f, *xs), "ptx").module.ir_text
        for arch in ("sm_80", "sm_90"):
            text = ptx.to_ptx(ir_text, arch)
            report = ptx.ptxas(text, arch)
            assert report and all(r["registers"] > 0 for r in report.values()), (name, arch)
            if name != "short":         # block reductions and slices go through shared memory
                assert ".shared" in text, name
