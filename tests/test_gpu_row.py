"""GPU row kernels (`codegen/gpu/row.py`): the grid emulator equals the CPU path, and the
PTX of every row launch assembles with ptxas for sm_80 and sm_90.

Every case is a compiled graph with at least one row kernel (softmax, log_softmax,
layer_norm, logsumexp, cross-entropy and their gradients, with column sums), over shapes
that are not multiples of 32/256, size-1 rows and columns, long rows (the kernel's
streaming mode: no values kept in registers, column sums updated in memory), transposed
inputs, NaN and inf, float64/float16 and integer reductions.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn.functional as F
from llgrad.codegen.gpu import program as gp
from llgrad.codegen.gpu import ptx
from llgrad.codegen.gpu import row as gpu_row
from llgrad.codegen.gpu.emulate import EmulatedGraph
from llgrad.compiler.executable import CompiledGraph
from llgrad.schedule.row import RowKernel

RNG = np.random.default_rng(0)


def _f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _b6(X, g, b, T):
    C = X.shape[1]
    return (F.layer_norm(lg.softmax(X, -1) * g + b, (C,), eps=1e-5) * T).sum()


def _ln_loss(X, w, b, T):
    return (F.layer_norm(X, (X.shape[1],), w, b) * T).sum()


def _sm_loss(X, T):
    return (lg.softmax(X, -1) * T).sum()


def _ce(logits, labels):
    return F.cross_entropy(logits, labels)


def _nan_rows(shape):
    x = _f32(*shape)
    x[0, shape[1] // 2] = np.nan
    if shape[0] > 1:
        x[1, :] = -np.inf
    if shape[0] > 2:
        x[2, 0] = np.inf
    return x


def _labels(n, c):
    return RNG.integers(0, c, size=n).astype(np.int64)


# name, function, inputs (NumPy), value_and_grad argnums (None: the function itself)
CASES = [
    ("softmax_64x128", lambda x: lg.softmax(x, -1), lambda: [_f32(64, 128)], None),
    ("softmax_3x5", lambda x: lg.softmax(x, -1), lambda: [_f32(3, 5)], None),
    ("softmax_2048x1024", lambda x: lg.softmax(x, -1), lambda: [_f32(2048, 1024)], None),
    ("softmax_long_rows", lambda x: lg.softmax(x, -1), lambda: [_f32(3, 20000)], None),
    ("softmax_transposed", lambda x: lg.softmax(x.t(), -1), lambda: [_f32(45, 70)], None),
    ("softmax_nan_inf", lambda x: lg.softmax(x, -1), lambda: [_nan_rows((9, 33))], None),
    ("softmax_f64", lambda x: lg.softmax(x, -1),
     lambda: [_f32(33, 97).astype(np.float64)], None),
    ("softmax_f16", lambda x: lg.softmax(x, -1),
     lambda: [_f32(17, 40).astype(np.float16)], None),
    ("softmax_2x2", lambda x: lg.softmax(x, -1), lambda: [_f32(2, 2)], None),
    ("masked_softmax_bool", lambda x, m: lg.softmax(lg.where(m, x, -1e9), -1),
     lambda: [_f32(19, 70), RNG.random((19, 70)) < 0.7], None),
    ("log_softmax_37x53", lambda x: lg.log_softmax(x, -1), lambda: [_f32(37, 53)], None),
    ("log_softmax_nan", lambda x: lg.log_softmax(x, -1), lambda: [_nan_rows((5, 300))],
     None),
    ("logsumexp_100x257", lambda x: lg.logsumexp(x, -1), lambda: [_f32(100, 257)], None),
    ("amax_shift_nan", lambda x: x - x.amax(-1, keepdim=True),
     lambda: [_nan_rows((6, 70))], None),
    ("amin_shift", lambda x: x - x.amin(-1, keepdim=True), lambda: [_f32(6, 70)], None),
    ("int32_input", lambda x: lg.softmax(x.float() * 0.01, -1),
     lambda: [RNG.integers(-1000, 1000, (13, 45)).astype(np.int32)], None),
    ("int64_input_f64", lambda x: lg.log_softmax(x.double() * 0.1, -1),
     lambda: [RNG.integers(-50, 50, (11, 77)).astype(np.int64)], None),
    ("layer_norm_64x128",
     lambda x, w, b: F.layer_norm(x, (128,), w, b),
     lambda: [_f32(64, 128), _f32(128), _f32(128)], None),
    ("layer_norm_plain_7x300", lambda x: F.layer_norm(x, (300,)),
     lambda: [_f32(7, 300, scale=3.0)], None),
    ("cross_entropy", _ce, lambda: [_f32(50, 37), _labels(50, 37)], None),
    ("grad_softmax_3x5", _sm_loss, lambda: [_f32(3, 5), _f32(3, 5)], (0,)),
    ("grad_log_softmax",
     lambda x, t: (lg.log_softmax(x, -1) * t).sum(),
     lambda: [_f32(31, 66), _f32(31, 66)], (0,)),
    ("grad_layer_norm_64x128", _ln_loss,
     lambda: [_f32(64, 128), _f32(128), _f32(128), _f32(64, 128)], (0, 1, 2)),
    ("grad_layer_norm_2x2", _ln_loss,
     lambda: [_f32(2, 2), _f32(2), _f32(2), _f32(2, 2)], (0, 1, 2)),
    ("grad_layer_norm_pieces", _ln_loss,      # split into pieces, column sums in registers
     lambda: [_f32(600, 300), _f32(300), _f32(300), _f32(600, 300)], (0, 1, 2)),
    ("grad_layer_norm_streaming", _ln_loss,   # long rows: column sums updated in memory
     lambda: [_f32(40, 9000), _f32(9000), _f32(9000), _f32(40, 9000)], (0, 1, 2)),
    ("grad_cross_entropy", _ce, lambda: [_f32(40, 29), _labels(40, 29)], (0,)),
    ("b6_64x128", _b6, lambda: [_f32(64, 128), _f32(128), _f32(128), _f32(64, 128)],
     (0, 1, 2)),
    ("b6_3x5", _b6, lambda: [_f32(3, 5), _f32(5), _f32(5), _f32(3, 5)], (0, 1, 2)),
    ("b6_2048x1024", _b6,
     lambda: [_f32(2048, 1024), _f32(1024), _f32(1024), _f32(2048, 1024)], (0, 1, 2)),
]


_GRAPHS: dict[str, tuple] = {}


def _graph(case):
    name, f, make, argnums = case
    if name not in _GRAPHS:
        arrays = make()
        xs = [lg.tensor(a) for a in arrays]
        fn = f if argnums is None else lg.value_and_grad(f, argnums=argnums)
        cf = lg.compile(fn)
        cf(*xs)
        graph = cf.inspect(*xs).optimized
        (entry,) = cf._entries.values()
        # the graph's parameters: the arguments, then the tensors the function captured
        # (value_and_grad's seed gradient)
        captured = list(entry.captured)
        _GRAPHS[name] = (graph, arrays + [c.numpy() for c in captured], xs + captured)
    return _GRAPHS[name]


def _row_launches(g):
    from llgrad.passes import fusion as fusion_pass
    from llgrad.passes import lower as lower_pass
    program = lower_pass.lower(fusion_pass.fuse(g), gp.PIECES, lambda n, m, k, d: False,
                               None, lambda d: False)
    return [L for L in program.launches if isinstance(L.spec, RowKernel)]


def _tolerance(d):
    if d == np.float16:
        return dict(rtol=2e-3, atol=2e-3)
    if d == np.float64:
        return dict(rtol=1e-11, atol=1e-12)
    if d.kind == "f":
        return dict(rtol=1e-5, atol=2e-6)
    return dict(rtol=0, atol=0)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_emulator_equals_cpu(case):
    g, arrays, xs = _graph(case)
    assert _row_launches(g), f"{case[0]}: no row kernel in the program"
    cpu = [np.asarray(t.numpy()) for t in CompiledGraph(g)(*xs)]
    try:
        emu = EmulatedGraph(g)
    except gp.UnsupportedOnGpu as e:
        if "RowKernel" in str(e):
            raise
        pytest.skip(f"another family has no GPU kernel yet ({e}); "
                    f"test_row_launch_equals_cpu_kernel covers this graph's row kernel")
    got = emu(*arrays)
    assert len(cpu) == len(got)
    for a, b in zip(cpu, got):
        a = np.asarray(a)
        b = np.asarray(b).reshape(a.shape)
        assert a.dtype == b.dtype
        np.testing.assert_allclose(b, a, equal_nan=True, **_tolerance(a.dtype))
        # NaN and inf land in the same places
        if a.dtype.kind == "f":
            assert np.array_equal(np.isnan(a), np.isnan(b))
            assert np.array_equal(np.isinf(a), np.isinf(b))


def test_b6_is_one_row_kernel_with_seven_passes_and_two_column_sums():
    g, _, _ = _graph(next(c for c in CASES if c[0] == "b6_2048x1024"))
    rows = _row_launches(g)
    assert len(rows) == 1
    (L,) = rows
    from llgrad.schedule.row import plan
    pl = plan(L.spec)
    assert pl.passes == 7
    assert sum(pl.is_column[o] for o in L.spec.expr.outputs) == 2
    geo = gpu_row.geometry(L)
    step = L.block[3]
    assert geo.blocks == -(-2048 // step) > 1 and geo.threads == 256


def test_geometry_of_modes():
    # softmax without column sums: one block per row, grid-stride beyond MAX_BLOCKS
    g, _, _ = _graph(CASES[2])
    (L,) = _row_launches(g)
    assert gpu_row.geometry(L).blocks == 2048
    # short rows: one warp per block
    g, _, _ = _graph(CASES[1])
    (L,) = _row_launches(g)
    assert gpu_row.geometry(L).threads == 32
    # a launch the lowering did not split, with column sums: one block for all rows
    g, _, _ = _graph(next(c for c in CASES if c[0] == "grad_layer_norm_64x128"))
    (L,) = [L for L in _row_launches(g)]
    assert gpu_row.geometry(L).blocks == 1
    # long rows: more threads per block, values recomputed instead of kept in registers
    g, _, _ = _graph(next(c for c in CASES if c[0] == "grad_layer_norm_streaming"))
    (L,) = _row_launches(g)
    lay = gpu_row._layout(L)
    assert lay.threads == 1024 and lay.unroll and not lay.colsum_private
    # longer rows still: a loop over a thread's columns, everything recomputed
    g, _, _ = _graph(next(c for c in CASES if c[0] == "softmax_long_rows"))
    (L,) = _row_launches(g)
    lay = gpu_row._layout(L)
    assert not lay.unroll and not lay.cached
    # B6: column sums and re-read values in registers
    g, _, _ = _graph(next(c for c in CASES if c[0] == "b6_2048x1024"))
    (L,) = _row_launches(g)
    lay = gpu_row._layout(L)
    assert lay.colsum_private and lay.cpt == 4 and len(lay.cached) >= 8


def test_column_sums_off_a_piece_boundary_are_refused():
    g, _, _ = _graph(next(c for c in CASES if c[0] == "grad_layer_norm_pieces"))
    (L,) = _row_launches(g)
    import copy
    bad = copy.copy(L)
    bad.block = list(L.block)
    bad.block[0] = 1
    with pytest.raises(gp.UnsupportedOnGpu, match="piece boundary"):
        gpu_row.geometry(bad)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(arch):
    if ptx.find_ptxas() is None:
        pytest.skip("no ptxas (pip install nvidia-cuda-nvcc, or a CUDA toolkit on PATH)")
    from llvmlite import ir
    module = ir.Module(name="rows")
    symbols = []
    for case in CASES:
        g, _, _ = _graph(case)
        for i, L in enumerate(_row_launches(g)):
            sym = f"{case[0]}_L{i}"
            gp.kernel_launch(module, L, gpu_row, sym, "ptx")
            symbols.append(sym)
    text = ptx.to_ptx(str(module), arch)
    assert text.count(".maxntid") == len(symbols)   # 1024-thread blocks fit the registers
    report = ptx.ptxas(text, arch)
    assert set(symbols) <= set(report)
    for sym in symbols:
        assert report[sym]["registers"] <= 255


# -- the row launches alone: the GPU kernel (host mode) against the CPU kernel ---------------

def _fill(buf, accesses):
    """Bytes for one buffer: its payload (constants), random values (loaded), NaN
    bytes (written: what the kernel leaves unwritten stays NaN)."""
    raw = np.zeros(buf.nbytes + 64, np.uint8)
    if buf.payload is not None:
        raw[:len(buf.payload)] = np.frombuffer(buf.payload, np.uint8)
        return raw
    written = [a for a in accesses if a.ptr.buffer is buf and a.mode != "load"]
    if written:
        raw[:] = 0xFF
        return raw
    loads = [a for a in accesses if a.ptr.buffer is buf]
    d = np.dtype(loads[0].dtype.np) if loads else np.dtype(np.float32)
    n = buf.nbytes // d.itemsize
    if d.kind == "f":
        vals = RNG.standard_normal(n).astype(d)
    elif d.kind == "b":
        vals = RNG.random(n) < 0.5
    else:
        vals = RNG.integers(0, 3, n).astype(d)
    raw[:n * d.itemsize] = vals.view(np.uint8)
    return raw


def _run_cpu(L, mem):
    import ctypes
    from llgrad.codegen import rowwise
    from llgrad.codegen.target import get_target
    from llgrad.schedule.program import Ptr
    module = rowwise.build(L.spec, "row_cpu")
    compiled = get_target().compile(str(module), ["row_cpu"], name="row_cpu")
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(compiled.addresses["row_cpu"])
    lo, hi, _, step = (int(v) for v in L.block[:4])
    for start in range(lo, hi, max(step, 1)):          # as the executor cuts the range
        block = [mem[id(v.buffer)].ctypes.data + v.byte_offset if isinstance(v, Ptr)
                 else int(v) for v in L.block]
        block[0], block[1] = start, min(hi, start + step)
        args = (ctypes.c_int64 * len(block))(*block)
        fn(ctypes.addressof(args))
    return compiled


def _run_gpu_host(L, mem):
    import ctypes
    from llvmlite import ir
    from llgrad.codegen.target import get_target
    module = ir.Module(name="row_gpu")
    launch = gp.kernel_launch(module, L, gpu_row, "row_gpu", "host")
    compiled = get_target().compile(str(module), ["row_gpu"], name="row_gpu")
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
        compiled.addresses["row_gpu"])
    from llgrad.codegen.gpu.kernel import EMULATED_DEVICE_OFFSET
    params = [mem[id(p.buffer)].ctypes.data + p.byte_offset + EMULATED_DEVICE_OFFSET
              for p in launch.params]
    p = (ctypes.c_int64 * max(1, len(params)))(*params)
    g = launch.geometry
    dims = (ctypes.c_int64 * 7)(g.blocks, 1, 1, g.threads, 1, 1, g.shared)
    fn(ctypes.addressof(p), ctypes.addressof(dims))
    return compiled


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_row_launch_equals_cpu_kernel(case):
    """Every buffer a row launch writes (full and row outputs, and each piece's float64
    column partials) equals what the CPU kernel writes from the same argument block."""
    from llgrad.schedule.program import Ptr
    g, _, _ = _graph(case)
    for L in _row_launches(g):
        buffers = {id(v.buffer): v.buffer for v in L.block if isinstance(v, Ptr)}
        init = {k: _fill(b, L.accesses) for k, b in buffers.items()}
        cpu_mem = {k: v.copy() for k, v in init.items()}
        gpu_mem = {k: v.copy() for k, v in init.items()}
        _run_cpu(L, cpu_mem)
        _run_gpu_host(L, gpu_mem)
        written = [a for a in L.accesses if a.mode != "load"]
        assert written
        for a in written:
            k = id(a.ptr.buffer)
            d = np.dtype(a.dtype.np)
            n = a.ptr.buffer.nbytes // d.itemsize
            want = cpu_mem[k][:n * d.itemsize].view(d)
            got = gpu_mem[k][:n * d.itemsize].view(d)
            tol = _tolerance(d)
            if d.kind == "f":
                # random operands make sums that cancel: rounding differences (float32
                # runs on the CPU, float64 per thread on the GPU) scale with the terms
                finite = np.abs(want[np.isfinite(want)])
                scale = float(finite.max()) if finite.size else 0.0
                tol["atol"] = max(tol["atol"], 1e-5 * scale)
            np.testing.assert_allclose(got, want, equal_nan=True, **tol)
            if d.kind == "f":
                assert np.array_equal(np.isnan(got), np.isnan(want))
