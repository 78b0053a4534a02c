"""GPU index kernels (`llgrad/codegen/gpu/index.py`): gather, put, scatter_add, offset,
check and nonzero. The grid emulator's results equal the CPU path's for compiled graphs
(gather, x[idx], index_select, take_along_dim, embedding and its gradient, nll/cross-entropy
and their gradients, scatter_add, index_put accumulate, scatter, nonzero_static) over many
shapes and dtypes; hand-made launches of every mode equal the CPU kernel run on the same
argument block; out-of-range indices set the error record like the CPU path; the PTX of
the index kernels assembles with ptxas for sm_80 and sm_90."""
from __future__ import annotations

import ctypes
import re
from types import SimpleNamespace

import numpy as np
import pytest
from llvmlite import ir

import llgrad as lg
import llgrad.nn.functional as F
from llgrad.codegen import gather as cpu_gather
from llgrad.codegen.gpu import index as gpu_index
from llgrad.codegen.gpu import program as gp
from llgrad.codegen.gpu import ptx
from llgrad.codegen.gpu.emulate import EmulatedGraph
from llgrad.codegen.gpu.kernel import EMULATED_DEVICE_OFFSET
from llgrad.codegen.gpu.kernel import GpuKernel
from llgrad.codegen.target import get_target
from llgrad.ir import dtypes as dt
from llgrad.passes import fusion as fusion_pass
from llgrad.passes import lower as lower_pass
from llgrad.compiler.executable import CompiledGraph
from llgrad.schedule.index import IndexKernel, NonzeroKernel, slot_layout
from llgrad.schedule.program import Ptr

RNG = np.random.default_rng(11)
F32, F64, I32, I64, B = np.float32, np.float64, np.int32, np.int64, np.bool_


def _arr(shape, dtype, lo=-5, hi=5):
    if dtype == np.bool_:
        return RNG.random(shape) < 0.4
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(lo, hi, size=shape).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _t(a, transpose=False):
    """A tensor of `a`; `transpose`: a transposed view of a tensor holding `a.T`."""
    if transpose:
        return lg.tensor(np.ascontiguousarray(a.T)).T
    return lg.tensor(a)


def _idx(shape, n, negative=False):
    lo = -n if negative else 0
    return lg.tensor(RNG.integers(lo, n, size=shape).astype(np.int64))


def _graph(f, *xs):
    cf = lg.compile(f)
    cf(*xs)
    return cf.inspect(*xs).optimized


def _inputs(g, xs):
    arrs = [np.ascontiguousarray(x.numpy()) for x in xs]
    for p in g.params[len(xs):]:                 # the seed of a gradient
        arrs.append(np.ones(p.shape, p.dtype.np))
    return arrs


def _program(g):
    return lower_pass.lower(fusion_pass.fuse(g), gp.PIECES, lambda n, m, k, d: False, None,
                            lambda d: False)


def _index_launches(program):
    return [l for l in program.launches if isinstance(l.spec, (IndexKernel, NonzeroKernel))]


def _check(f, *xs, rtol=1e-5, atol=1e-6):
    """`f`'s graph on the CPU and in the emulator: outputs agree (exactly for integers and
    bools; float sums to rounding: the GPU's atomic adds run in another order)."""
    g = _graph(f, *xs)
    arrs = _inputs(g, xs)
    cpu = [np.asarray(t.numpy()) for t in CompiledGraph(g)(*[lg.tensor(a) for a in arrs])]
    emu = EmulatedGraph(g)
    got = emu(*arrs)
    assert emu.errors == []
    assert len(cpu) == len(got)
    for c, e in zip(cpu, got):
        assert c.shape == e.shape and c.dtype == e.dtype, (c.shape, e.shape, c.dtype, e.dtype)
        if c.dtype.kind in "fc":
            np.testing.assert_allclose(e, c, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(e, c)
    return g, _index_launches(emu.lowered.program)


def _put_graph(x, i, v):
    y = x.clone()
    y.index_put_((i,), v, accumulate=True)
    return y


def _ce(x, t):
    return F.cross_entropy(x, t)


# (name, function, inputs, modes that must appear among the index launches)
GRAPHS = [
    ("gather_dim1", lambda x, i: lg.gather(x, 1, i),
     lambda: (_t(_arr((37, 53), F32)), _idx((37, 5), 53)), {"gather"}),
    ("gather_dim0_T_f64", lambda x, i: lg.gather(x, 0, i),
     lambda: (_t(_arr((41, 29), F64), True), _idx((7, 29), 41)), {"gather"}),
    ("getitem_neg", lambda x, i: x[i],
     lambda: (_t(_arr((37, 53), F32)), _idx((11,), 37, negative=True)), {"gather"}),
    ("getitem_2d_idx", lambda x, i: x[i],
     lambda: (_t(_arr((19, 33), I64)), _idx((4, 6), 19)), {"gather"}),
    ("getitem_two_indices", lambda x, i, j: x[i, j],
     lambda: (_t(_arr((19, 33), F32)), _idx((25,), 19), _idx((25,), 33, negative=True)),
     {"gather"}),
    ("index_select_i32", lambda x, i: x.index_select(0, i),
     lambda: (_t(_arr((300, 7), I32)), _idx((513,), 300)), {"gather"}),
    ("index_select_dim1_T", lambda x, i: x.index_select(1, i),
     lambda: (_t(_arr((45, 31), F32), True), _idx((9,), 31)), {"gather"}),
    ("take_along_dim", lambda x, i: lg.take_along_dim(x, i, 1),
     lambda: (_t(_arr((37, 53), F64)), _idx((37, 3), 53)), {"gather"}),
    ("gather_bool", lambda x, i: x[i],
     lambda: (_t(_arr((23, 5), B)), _idx((17,), 23)), {"gather"}),
    ("gather_f16", lambda x, i: x[i],
     lambda: (lg.tensor(_arr((23, 5), F32)).to(lg.float16), _idx((17,), 23)), {"gather"}),
    ("gather_c128", lambda x, i: x[i],
     lambda: (_t(_arr((23, 5), np.complex128)), _idx((17,), 23)), {"gather"}),
    ("gather_size1", lambda x, i: lg.gather(x, 0, i),
     lambda: (_t(_arr((1, 9), F32)), _idx((1, 9), 1)), {"gather"}),
    ("gather_large", lambda x, i: x.index_select(0, i),
     lambda: (_t(_arr((300, 257), F32)), _idx((301,), 300)), {"gather"}),
    ("embedding", lambda i, w: F.embedding(i, w),
     lambda: (_idx((4, 7), 20), _t(_arr((20, 16), F32))), {"gather"}),
    ("embedding_grad", lg.value_and_grad(lambda w, i: (F.embedding(i, w) ** 2).sum()),
     lambda: (_t(_arr((20, 16), F32)), _idx((9, 7), 20)), {"gather", "scatter_add"}),
    ("embedding_grad_f64", lg.value_and_grad(lambda w, i: (F.embedding(i, w) * 3.0).sum()),
     lambda: (_t(_arr((6, 33), F64)), _idx((50,), 6)), {"scatter_add"}),
    ("cross_entropy", _ce,
     lambda: (_t(_arr((37, 53), F32)), _idx((37,), 53)), {"gather"}),
    ("cross_entropy_grad", lg.value_and_grad(_ce),
     lambda: (_t(_arr((37, 53), F32)), _idx((37,), 53)), {"gather"}),
    ("nll_loss_grad", lg.value_and_grad(lambda x, t: F.nll_loss(x, t)),
     lambda: (_t(_arr((29, 10), F64)), _idx((29,), 10)), {"gather"}),
    ("scatter_add_f32", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((37, 53), F32)), _idx((50, 53), 37), _t(_arr((50, 53), F32))),
     {"scatter_add"}),
    ("scatter_add_dim1_T", lambda x, i, s: x.scatter_add(1, i, s),
     lambda: (_t(_arr((13, 40), F64), True), _idx((13, 70), 40),
              _t(_arr((13, 70), F64), True)), {"scatter_add"}),
    ("scatter_add_i32", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((9, 4), I32)), _idx((30, 4), 9), _t(_arr((30, 4), I32))),
     {"scatter_add"}),
    ("scatter_add_i64", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((9, 4), I64)), _idx((30, 4), 9), _t(_arr((30, 4), I64))),
     {"scatter_add"}),
    ("scatter_add_f16", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (lg.tensor(_arr((9, 5), F32)).to(lg.float16), _idx((33, 5), 9),
              lg.tensor(_arr((33, 5), F32)).to(lg.float16)), {"scatter_add"}),
    ("scatter_add_bf16",
     lambda x, i, s: x.to(lg.bfloat16).scatter_add(0, i, s.to(lg.bfloat16)).float(),
     lambda: (_t(_arr((9, 5), F32)), _idx((33, 5), 9), _t(_arr((33, 5), F32))),
     {"scatter_add"}),
    ("scatter_add_i8", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((7, 3), np.int8)), _idx((40, 3), 7), _t(_arr((40, 3), np.int8))),
     {"scatter_add"}),
    ("scatter_add_u8", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((7, 3), np.uint8, 0, 200)), _idx((40, 3), 7),
              _t(_arr((40, 3), np.uint8, 0, 200))), {"scatter_add"}),
    ("scatter_add_i16", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((7, 3), np.int16, -900, 900)), _idx((40, 3), 7),
              _t(_arr((40, 3), np.int16, -900, 900))), {"scatter_add"}),
    ("scatter_add_bool", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((7, 3), B)), _idx((10, 3), 7), _t(_arr((10, 3), B))),
     {"scatter_add"}),
    ("scatter_add_c64", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((7, 3), np.complex64)), _idx((20, 3), 7),
              _t(_arr((20, 3), np.complex64))), {"scatter_add"}),
    ("scatter_add_nan", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(np.where(_arr((5, 4), F32) > 1, np.nan, 1).astype(F32)), _idx((12, 4), 5),
              _t(_arr((12, 4), F32))), {"scatter_add"}),
    ("index_put_accumulate", _put_graph,
     lambda: (_t(_arr((37, 53), F32)), _idx((40,), 37, negative=True),
              _t(_arr((40, 53), F32))), {"scatter_add"}),
    ("scatter_put_dups", lambda x, i, s: x.scatter(1, i, s),
     lambda: (_t(_arr((37, 53), F32)), _idx((37, 9), 4), _t(_arr((37, 9), F32))), {"put"}),
    ("scatter_put_i64", lambda x, i, s: x.scatter(0, i, s),
     lambda: (_t(_arr((37, 3), I64)), _idx((80, 3), 37), _t(_arr((80, 3), I64))), {"put"}),
    ("gather_empty_index", lambda x, i: x[i],
     lambda: (_t(_arr((37, 5), F32)), lg.tensor(np.zeros((0,), np.int64))), set()),
    ("scatter_add_empty", lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (_t(_arr((4, 0), F32)), lg.tensor(np.zeros((3, 0), np.int64)),
              _t(_arr((3, 0), F32))), set()),
]


def _nonzero_input(shape, dtype, transpose=False):
    a = _arr(shape, dtype)
    if dtype == F32:
        a = np.where(RNG.random(shape) < 0.6, 0.0, a).astype(F32)
        a.flat[:: 7] = np.nan
        a.flat[3:: 11] = -0.0
    return _t(a, transpose)


NONZERO = [
    ("nonzero_1d", (3000,), B, False, 2000),
    ("nonzero_2d_f32", (37, 53), F32, False, 900),
    ("nonzero_2d_T_small_cap", (37, 53), I32, True, 17),
    ("nonzero_3d_chunks", (5, 40, 90), B, False, 20000),   # more than one 8192-item chunk
    ("nonzero_f64_size1_dim", (1, 7), F64, False, 10),
]


@pytest.mark.parametrize("name,f,make,modes", GRAPHS, ids=[c[0] for c in GRAPHS])
def test_emulator_equals_cpu(name, f, make, modes):
    xs = make()
    _, launches = _check(f, *xs)
    seen = {l.spec.mode for l in launches}
    assert modes <= seen, (modes, seen)


@pytest.mark.parametrize("name,shape,dtype,transpose,size", NONZERO,
                         ids=[c[0] for c in NONZERO])
def test_nonzero_static(name, shape, dtype, transpose, size):
    x = _nonzero_input(shape, dtype, transpose)
    _, launches = _check(lambda x: lg.nonzero_static(x, size=size, fill_value=-3), x)
    assert any(isinstance(l.spec, NonzeroKernel) for l in launches)


# -- out-of-range indices: the error record -------------------------------------------------

@pytest.mark.parametrize("bad", [37, -38, 10 ** 12])
def test_out_of_range_index_sets_the_error_record(bad):
    x = _t(_arr((37, 8), F32))
    i = _idx((300,), 37)
    g = _graph(lambda x, i: x[i], x, i)
    a = i.numpy().copy()
    a[[5, 77, 250]] = bad
    with pytest.raises(IndexError, match="out of bounds") as info:
        CompiledGraph(g)(x, lg.tensor(a))
    cpu_value = int(re.search(r"index (-?\d+) is out of bounds", str(info.value)).group(1))
    emu = EmulatedGraph(g)
    emu(x.numpy(), a)
    assert len(emu.errors) == 1
    launch, value, k = emu.errors[0]
    assert isinstance(launch.spec, IndexKernel) and launch.spec.mode == "gather"
    # the same record as the CPU's: the first bad point in order (one grid-stride lap)
    assert (value, k) == (cpu_value, 0)
    emu(x.numpy(), i.numpy())                     # a good call: no record
    assert emu.errors == []


def test_scatter_add_bad_index_skips_it():
    x = _t(_arr((6, 3), F32))
    i = _idx((10, 3), 6)
    s = _t(_arr((10, 3), F32))
    g = _graph(lambda x, i, s: x.scatter_add(0, i, s), x, i, s)
    a = i.numpy().copy()
    a[4, 1] = 6
    with pytest.raises(IndexError):
        CompiledGraph(g)(x, lg.tensor(a), s)
    emu = EmulatedGraph(g)
    (out,) = emu(x.numpy(), a, s.numpy())
    assert len(emu.errors) == 1 and emu.errors[0][0].spec.mode == "scatter_add"
    ref = x.numpy().copy()
    for r in range(10):
        for c in range(3):
            if (r, c) != (4, 1):
                ref[a[r, c], c] += s.numpy()[r, c]
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


# -- hand-made launches: every mode, against the CPU kernel on the same block -------------

_HOST = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_CPU = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _run_both(spec, block, buffers):
    """Run `spec` on `block` (ints, and names of `buffers` where pointers go) with the CPU
    kernel and with the emulated GPU kernel, each on its own copy of the buffers."""
    slots = [Ptr(None, 0, v) if isinstance(v, str) else v for v in block]
    launch = SimpleNamespace(spec=spec, block=slots, what=spec.mode)
    module = ir.Module("t_gpu")
    k = GpuKernel(module, "gpu_k", sum(isinstance(v, Ptr) for v in slots), "host")
    gpu_index.build(k, launch)
    k.finish()
    geo = gpu_index.geometry(launch)
    cpu_mod = cpu_gather.build_index(spec, "cpu_k")
    target = get_target()
    gpu_c = target.compile(str(module), ["gpu_k"], name="t_gpu")
    cpu_c = target.compile(str(cpu_mod), ["cpu_k"], name="t_cpu")
    results = []
    for which in ("cpu", "gpu"):
        bufs = {n: a.copy() for n, a in buffers.items()}
        if which == "cpu":
            vals = [bufs[v].ctypes.data if isinstance(v, str) else int(v) for v in block]
            arr = (ctypes.c_int64 * len(vals))(*vals)
            _CPU(cpu_c.addresses["cpu_k"])(ctypes.addressof(arr))
        else:
            ps = [bufs[v].ctypes.data + EMULATED_DEVICE_OFFSET for v in block
                  if isinstance(v, str)]
            params = (ctypes.c_int64 * max(1, len(ps)))(*ps)
            dims = (ctypes.c_int64 * 7)(geo.blocks, 1, 1, geo.threads, 1, 1, geo.shared)
            _HOST(gpu_c.addresses["gpu_k"])(ctypes.addressof(params), ctypes.addressof(dims))
        results.append(bufs)
    return results


def _index_block(rank, lo, hi, sizes, x, xs, data, ds, indices):
    block = [lo, hi, *sizes, "err", x, *xs, data, *ds]
    for name, size, dimstride, strides in indices:
        block += [name, size, dimstride, *strides]
    assert len(block) == 2 + (rank - 1) + 1 + 2 * (1 + rank) + len(indices) * (3 + rank)
    assert slot_layout(rank)["index"] == 2 + (rank - 1) + 1 + 2 * (1 + rank)
    return block


def _compare(spec, block, buffers, exact=True):
    cpu, gpu = _run_both(spec, block, buffers)
    for n in buffers:
        if exact or buffers[n].dtype.kind not in "fc":
            np.testing.assert_array_equal(gpu[n], cpu[n], err_msg=n)
        else:
            np.testing.assert_allclose(gpu[n], cpu[n], rtol=1e-5, atol=1e-5, err_msg=n)
    return cpu, gpu


def test_launch_gather_two_indices_rank2_int32():
    # out[i, j] = x[idx0[i, j], idx1[j] ], x is 6 x 9 (strides 9, 1); a split range [2, 5)
    idx0 = RNG.integers(-6, 6, size=(5, 7)).astype(np.int32)
    idx1 = RNG.integers(0, 9, size=(7,)).astype(np.int64)
    bufs = {"err": np.zeros(4, np.int64), "x": _arr((6, 9), F32),
            "data": np.zeros((5, 7), F32), "i0": idx0, "i1": idx1}
    spec = IndexKernel("gather", 2, (dt.int32, dt.int64), width=4, data_inner=1)
    block = _index_block(2, 2, 5, [7], "x", [0, 0], "data", [7, 1],
                         [("i0", 6, 9, [7, 1]), ("i1", 9, 1, [0, 1])])
    cpu, _ = _compare(spec, block, bufs)
    assert cpu["data"][2:5].any() and not cpu["data"][:2].any()


def test_launch_hoisted_row_gather_and_bad_row():
    idx = np.array([3, -1, 7, 0], np.int64)               # 7 is out of range for size 5
    bufs = {"err": np.zeros(4, np.int64), "x": _arr((5, 33), F64),
            "data": np.zeros((4, 33), F64), "i": idx}
    spec = IndexKernel("gather", 2, (dt.int64,), width=8, hoist=True, x_inner=1,
                       data_inner=1)
    block = _index_block(2, 0, 4, [33], "x", [0, 1], "data", [33, 1],
                         [("i", 5, 33, [1, 0])])
    cpu, gpu = _compare(spec, block, bufs)
    assert list(gpu["err"][:3]) == [1, 7, 0]
    assert not gpu["data"][2].any()


def test_launch_put_with_cast_and_dups():
    idx = np.array([0, 2, 2, 4, 0, 1], np.int64)
    bufs = {"err": np.zeros(4, np.int64), "x": np.zeros(5, F32),
            "data": _arr((6,), F64), "i": idx}
    spec = IndexKernel("put", 1, (dt.int64,), dtype=dt.float32, src_dtype=dt.float64)
    block = _index_block(1, 0, 6, [], "x", [0], "data", [1], [("i", 5, 1, [1])])
    _compare(spec, block, bufs)           # the emulator writes in point order (last wins)


def test_launch_raw_put_width16_and_width1():
    for d, w in ((np.complex128, 16), (np.int8, 1), (np.float16, 2)):
        idx = np.array([4, 0, 2], np.int64)
        bufs = {"err": np.zeros(4, np.int64), "x": np.zeros(5, d).astype(d),
                "data": _arr((3,), d) if d != np.float16 else _arr((3,), F32).astype(d),
                "i": idx}
        spec = IndexKernel("put", 1, (dt.int64,), width=w)
        block = _index_block(1, 0, 3, [], "x", [0], "data", [1], [("i", 5, 1, [1])])
        _compare(spec, block, bufs)


def test_launch_offset_and_check():
    idx = RNG.integers(-4, 4, size=(3, 4)).astype(np.int64)
    bufs = {"err": np.zeros(4, np.int64), "data": np.zeros((3, 4), np.int64), "i": idx}
    spec = IndexKernel("offset", 2, (dt.int64,))
    block = _index_block(2, 0, 3, [4], 1000, [10, 0], "data", [4, 1],
                         [("i", 4, 1, [4, 1])])
    cpu, _ = _compare(spec, block, bufs)
    assert (cpu["data"] >= 1000).all()
    bad = idx.copy()
    bad[1, 2] = 9
    bufs = {"err": np.zeros(4, np.int64), "i": bad}
    spec = IndexKernel("check", 2, (dt.int64,))
    block = _index_block(2, 0, 3, [4], 0, [0, 0], 0, [0, 0], [("i", 4, 1, [4, 1])])
    cpu, gpu = _compare(spec, block, bufs)
    assert list(gpu["err"][:3]) == [1, 9, 0]


@pytest.mark.parametrize("d,sd", [(dt.float16, dt.float16), (dt.bfloat16, dt.float32),
                                  (dt.int8, dt.int8), (dt.bool_, dt.bool_),
                                  (dt.complex128, dt.complex128), (dt.float32, dt.int32),
                                  (dt.int16, dt.int16)])
def test_launch_scatter_add_dtypes(d, sd):
    n = 600                                               # several blocks of 256 threads
    idx = RNG.integers(-7, 7, size=(n,)).astype(np.int64)
    np_d = np.uint16 if d is dt.bfloat16 else d.np
    np_sd = np.uint16 if sd is dt.bfloat16 else sd.np
    if d is dt.bfloat16:
        x = (np.arange(7, dtype=np.uint32) * 3 + 0x3F80).astype(np.uint16)
    else:
        x = _arr((7,), np_d)
    src = _arr((n,), F32).astype(np_sd) if sd.is_floating_point and not sd.is_complex \
        else _arr((n,), np_sd)
    bufs = {"err": np.zeros(4, np.int64), "x": x, "data": src, "i": idx}
    spec = IndexKernel("scatter_add", 1, (dt.int64,), dtype=d, src_dtype=sd)
    block = _index_block(1, 0, n, [], "x", [0], "data", [1], [("i", 7, 1, [1])])
    # the emulator adds in point order, like the CPU: equal bits
    _compare(spec, block, bufs)


# -- (b) the PTX of the index kernels assembles ---------------------------------------------

PTX_GRAPHS = [c for c in GRAPHS if c[3]]


def _ptx_module(graphs):
    module = ir.Module("index_ptx")
    n = 0
    for _, f, make, _ in graphs:
        xs = make()
        for launch in _index_launches(_program(_graph(f, *xs))):
            gp.kernel_launch(module, launch, gpu_index, f"ix{n}", "ptx")
            n += 1
    for _, shape, dtype, transpose, size in NONZERO[:3]:
        x = _nonzero_input(shape, dtype, transpose)
        g = _graph(lambda x: lg.nonzero_static(x, size=size), x)
        for launch in _index_launches(_program(g)):
            gp.kernel_launch(module, launch, gpu_index, f"ix{n}", "ptx")
            n += 1
    # modes and dtypes no graph reaches: hand-made launches
    extra = [
        (IndexKernel("gather", 2, (dt.int32, dt.int64), width=16, hoist=True),
         _index_block(2, 0, 5, [7], "x", [0, 0], "d", [7, 1],
                      [("a", 6, 9, [1, 0]), ("b", 9, 1, [1, 0])])),
        (IndexKernel("offset", 1, (dt.int64,)),
         _index_block(1, 0, 9, [], 77, [0], "d", [1], [("a", 9, 1, [1])])),
        (IndexKernel("check", 1, (dt.int32,)),
         _index_block(1, 0, 9, [], 0, [0], 0, [0], [("a", 9, 1, [1])])),
        (IndexKernel("put", 1, (dt.int64,), dtype=dt.bfloat16, src_dtype=dt.float64),
         _index_block(1, 0, 9, [], "x", [0], "d", [1], [("a", 9, 1, [1])])),
        (IndexKernel("scatter_add", 1, (dt.int64,), dtype=dt.bfloat16, src_dtype=dt.bfloat16),
         _index_block(1, 0, 9, [], "x", [0], "d", [1], [("a", 9, 1, [1])])),
        (NonzeroKernel("count", dt.float64, 2), [4, 5, "x", 5, 1, "out"]),
        (NonzeroKernel("fill", dt.bool_, 0), ["x", "out", 1]),
    ]
    for spec, block in extra:
        slots = [Ptr(None, 0, v) if isinstance(v, str) else v for v in block]
        launch = SimpleNamespace(spec=spec, block=slots, what="hand-made")
        gp.kernel_launch(module, launch, gpu_index, f"ix{n}", "ptx")
        n += 1
    return str(module), n


@pytest.fixture(scope="module")
def index_ptx_module():
    return _ptx_module(PTX_GRAPHS)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles(index_ptx_module, arch):
    if ptx.find_ptxas() is None:
        pytest.skip("ptxas is not installed (pip install nvidia-cuda-nvcc)")
    text, n = index_ptx_module
    report = ptx.ptxas(ptx.to_ptx(text, arch), arch)
    assert len(report) == n
    for name, r in report.items():
        assert 0 < r["registers"] <= 255, (name, r)
    source = ptx.to_ptx(text, arch)
    atoms = set(re.findall(r"\batom\.[\w.]+", source))
    # float adds, integer adds, the sub-word CAS loop and the error record's CAS
    assert {"atom.global.add.f32", "atom.global.add.f64", "atom.global.add.u32",
            "atom.global.add.u64"} <= atoms, atoms
    assert {"atom.relaxed.gpu.global.cas.b32", "atom.relaxed.gpu.global.cas.b64"} <= atoms
    assert not any(".sys." in a for a in atoms), atoms     # device scope, not system


def test_nonzero_launch_is_one_block():
    x = _nonzero_input((37, 53), F32)
    g = _graph(lambda x: lg.nonzero_static(x, size=50), x)
    (launch,) = [l for l in _program(g).launches if isinstance(l.spec, NonzeroKernel)]
    geo = gpu_index.geometry(launch)
    assert (geo.blocks, geo.threads) == (1, gpu_index.NONZERO_THREADS)


def test_unknown_spec_is_unsupported():
    module = ir.Module("u")
    k = GpuKernel(module, "u", 0, "host")
    with pytest.raises(gp.UnsupportedOnGpu):
        gpu_index.build(k, SimpleNamespace(spec=object(), block=[]))
