"""The host fast paths of the index, sorting and statistics families (the plain eager case:
plain tensors, no autograd to record, no vmap, forward mode or trace) against the general
paths they skip (forced by patching `host_plain` off) and against torch: values bit for
bit, dtypes, shapes, errors; and the cases that must take the general path (requires_grad
with its grad_fn names, vmap, lg.compile, out=)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.functions import _host as fhost
from llgrad.functions import selection, sorting, statistics
from llgrad.nn import _layers, _pooling

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")

torch = pytest.importorskip("torch")

rng = np.random.default_rng(7)
_MODULES = (selection, sorting, statistics, _layers, _pooling)


@pytest.fixture
def general(monkeypatch):
    """Run the general paths: every host fast path's guard answers no."""
    for m in _MODULES:
        monkeypatch.setattr(m, "host_plain", lambda *a: False)
    monkeypatch.setattr(sorting, "_plain_order", lambda x: False)


def _results(out):
    return out if isinstance(out, (tuple, list)) else (out,)


def same(a, b):
    """Results equal bit for bit (raw memory values, dtype, shape)."""
    a, b = _results(a), _results(b)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape)
        xa, ya = x.detach()._numpy_view(), y.detach()._numpy_view()
        if xa.dtype.kind == "f":
            xa, ya = xa.view(f"u{xa.itemsize}"), ya.view(f"u{ya.itemsize}")
        elif xa.dtype.kind == "c":
            xa, ya = xa.view(f"u{xa.itemsize // 2}"), ya.view(f"u{ya.itemsize // 2}")
        assert np.array_equal(xa, ya)


def fast_and_general(monkeypatch, fn):
    """fn() on the fast path, then on the general path."""
    fast = fn()
    with monkeypatch.context() as m:
        for mod in _MODULES:
            m.setattr(mod, "host_plain", lambda *a: False)
        m.setattr(sorting, "_plain_order", lambda x: False)
        slow = fn()
    return fast, slow


def _data(shape, dtype, nan=False, ties=False):
    if dtype in (lg.float32, lg.float64, lg.float16, lg.bfloat16):
        a = rng.standard_normal(shape)
        if ties:
            a = np.round(a)
        if nan and a.size > 2:
            a.reshape(-1)[[1, a.size - 1]] = np.nan
        if a.size > 3:
            a.reshape(-1)[2] = -0.0
            a.reshape(-1)[0] = 0.0
        return lg.tensor(a, dtype=lg.float64).to(dtype)
    if dtype is lg.bool:
        return lg.tensor(rng.integers(0, 2, shape).astype(bool))
    return lg.tensor(rng.integers(-3, 4, shape), dtype=dtype)


DTYPES = [lg.float32, lg.float64, lg.float16, lg.bfloat16, lg.int64, lg.int32, lg.uint8,
          lg.bool]
SHAPES = [(5,), (4, 6), (3, 1, 5), (2, 3, 4), (0, 3), (6, 0)]


# -- sort / argsort / cummax / cummin / mode -----------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_sort_family_fast_equals_general(monkeypatch, dtype, shape):
    x = _data(shape, dtype, nan=True, ties=True)
    variants = [x, x.transpose(0, -1) if x.ndim > 1 else x]
    for t in variants:
        for d in range(-t.ndim, t.ndim):
            for desc in (False, True):
                same(*fast_and_general(monkeypatch, lambda: lg.sort(t, d, descending=desc)))
                same(*fast_and_general(monkeypatch,
                                       lambda: lg.argsort(t, d, descending=desc)))
            if 0 not in t.shape:
                same(*fast_and_general(monkeypatch, lambda: lg.cummax(t, d)))
                same(*fast_and_general(monkeypatch, lambda: lg.cummin(t, d)))
                for keep in (False, True):
                    same(*fast_and_general(monkeypatch, lambda: lg.mode(t, d, keep)))


@pytest.mark.parametrize("name", ["sort", "cummax", "cummin", "mode"])
def test_sort_family_against_torch(name):
    a = np.round(rng.standard_normal((4, 7)) * 2).astype(np.float32)
    if name != "mode":            # (torch's mode with a NaN in a row is not its own rule)
        a[1, 3] = np.nan
    args = {"sort": (1,), "cummax": (1,), "cummin": (0,), "mode": (1,)}[name]
    got = getattr(lg, name)(lg.tensor(a), *args)
    want = getattr(torch, name)(torch.tensor(a), *args)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    if name != "sort":            # (torch's sort is not stable by default)
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


@pytest.mark.parametrize("name,args,node", [
    ("sort", (1,), "SortBackward0"), ("cummax", (1,), "CummaxBackward0"),
    ("cummin", (0,), "CumminBackward0"), ("mode", (1, True), "ModeBackward0")])
def test_sort_family_grad_takes_the_general_path(name, args, node):
    a = np.round(rng.standard_normal((3, 5)))
    x = lg.tensor(a, requires_grad=True)
    out = getattr(lg, name)(x, *args)
    assert type(out[0].grad_fn).__name__ == node
    out[0].sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    tout = getattr(torch, name)(tx, *args)
    assert type(tout[0].grad_fn).__name__ == node
    np.testing.assert_array_equal(out[0].detach().numpy(), tout[0].detach().numpy())
    with lg.no_grad():              # no recording: the plain path, no node
        assert getattr(lg, name)(x, *args)[0].grad_fn is None


def test_sort_under_vmap_and_compile():
    x = lg.tensor(rng.standard_normal((3, 6)).astype(np.float32))
    batched = lg.vmap(lambda r: lg.sort(r, descending=True).values)(x)
    same(batched, lg.sort(x, 1, descending=True).values)
    with pytest.raises(Exception, match="vmap"):      # (host cummax has no batching rule)
        lg.vmap(lambda r: lg.cummax(r, 0).indices)(x)
    f = lg.compile(lambda t: lg.sort(t, 1).values * 2)
    same(f(x), lg.sort(x, 1).values * 2)


def test_sort_out_and_errors():
    x = lg.tensor(rng.standard_normal((3, 4)))
    v, i = lg.empty(0, dtype=lg.float64), lg.empty(0, dtype=lg.int64)
    lg.sort(x, 1, out=(v, i))
    same((v, i), lg.sort(x, 1))
    with pytest.raises(IndexError):
        lg.sort(x, 2)
    with pytest.raises(RuntimeError, match="complex"):
        lg.sort(lg.tensor([1 + 1j]))


def test_host_take_along_matches_numpy():
    for shape in [(5, 5, 5), (3, 1, 4), (7,), (2, 0, 3), (1, 1)]:
        for ax in range(len(shape)):
            a = rng.standard_normal(shape)
            i = rng.integers(0, max(shape[ax], 1), size=shape)
            got = fhost.host_take_along(a, i, ax)
            np.testing.assert_array_equal(got, np.take_along_axis(a, i, ax))
    a = rng.standard_normal((4, 5)).T                       # not C-contiguous
    i = rng.integers(0, 4, size=(5, 4))
    np.testing.assert_array_equal(fhost.host_take_along(a, i, 1),
                                  np.take_along_axis(a, i, 1))


# -- masks and index_put ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.float16, lg.bfloat16, lg.int64,
                                   lg.bool, lg.complex64])
def test_masked_select_scatter_fast_equals_general(monkeypatch, dtype):
    for xs, ms in [((4, 5), (4, 5)), ((5,), (4, 5)), ((4, 1), (1, 5)), ((), (3,)), ((3,), ())]:
        x = _data(xs, dtype) if dtype is not lg.complex64 else \
            lg.tensor(rng.standard_normal(xs) + 1j, dtype=lg.complex64)
        m = lg.tensor(rng.integers(0, 2, ms).astype(bool))
        src = x.reshape(-1)[:1].expand(30).contiguous() if x.numel() else None
        same(*fast_and_general(monkeypatch, lambda: lg.masked_select(x, m)))
        if src is not None:
            same(*fast_and_general(monkeypatch, lambda: lg.masked_scatter(x, m, src)))


def test_masked_errors_and_grad():
    x = lg.tensor(rng.standard_normal((3, 4)))
    m = lg.ones(3, 4, dtype=lg.bool)
    with pytest.raises(RuntimeError, match="Number of elements of source"):
        lg.masked_scatter(x, m, lg.zeros(5, dtype=lg.float64))
    with pytest.raises(ValueError, match="cannot be broadcast"):     # (the general path's)
        lg.masked_select(x, lg.ones(5, dtype=lg.bool))
    with pytest.raises(RuntimeError, match="BoolTensor"):
        lg.masked_select(x, lg.ones(3, 4))
    xr = x.detach().requires_grad_()
    out = lg.masked_select(xr, m)
    assert type(out.grad_fn).__name__ == "MaskedSelectBackward0"
    out = lg.masked_scatter(xr, m, xr.reshape(-1))
    assert out.grad_fn is not None


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.int64, lg.float16, lg.bfloat16,
                                   lg.bool])
def test_index_put_fast_equals_general(monkeypatch, dtype, accumulate):
    x = _data((5, 4), dtype)
    cases = [
        ((lg.tensor([True, False, True, False, True]),), _data((4,), dtype)),
        ((lg.tensor([0, 2, 2, -1]),), _data((4, 4), dtype)),
        ((lg.tensor([0, 4]), lg.tensor([3, -4])), _data((2,), dtype)),
        ((lg.tensor([[0], [1]]), lg.tensor([1, 2, 3])), _data((1, 3), dtype)),
        ((lg.tensor([1, 2], dtype=lg.int32),), _data((), dtype)),
        ((lg.ones(5, 4, dtype=lg.bool),), _data((20,), dtype)),
        ((lg.tensor(3),), _data((4,), dtype)),
    ]
    for idx, v in cases:
        same(*fast_and_general(monkeypatch, lambda: lg.index_put(x, idx, v, accumulate)))


def test_index_put_errors_fall_back():
    x = lg.zeros(5, 4)
    for idx in [(lg.tensor([5]),), (lg.tensor([0, 1]), lg.tensor([4]))]:
        with pytest.raises(IndexError) as fast:
            lg.index_put(x, idx, lg.tensor(1.0))
        tx = torch.zeros(5, 4)
        with pytest.raises(IndexError):
            tx.index_put(tuple(torch.tensor(i.numpy()) for i in idx), torch.tensor(1.0))
        assert "out of" in str(fast.value) or "index" in str(fast.value)
    with pytest.raises(RuntimeError):
        lg.index_put(x, (lg.tensor([0, 1]),), lg.ones(3, 4))
    xr = lg.zeros(5, 4, requires_grad=True)
    out = lg.index_put(xr, (lg.tensor([0, 1]),), lg.tensor(2.0))
    assert out.grad_fn is not None


# -- unique, histograms, bincount --------------------------------------------------------------

@pytest.mark.parametrize("dtype", [lg.float32, lg.int64, lg.bool, lg.bfloat16])
def test_unique_against_torch(dtype):
    x = _data((4, 3, 5), dtype, ties=True)
    tx = torch.tensor(x.float().numpy() if dtype is lg.bfloat16 else x.numpy())
    for dim in (None, 0, 1, 2, -1):
        for fn in ("unique", "unique_consecutive"):
            kw = {"return_inverse": True, "return_counts": True, "dim": dim}
            got = getattr(lg, fn)(x, **kw)
            want = getattr(torch, fn)(tx, **kw)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.float().numpy() if g.dtype is lg.bfloat16
                                              else g.numpy(), w.numpy())
    e = lg.zeros(0, 3)
    assert lg.unique_consecutive(e, return_counts=True)[1].shape == (0,)


def test_histograms_against_torch():
    a = rng.standard_normal((6, 5)).astype(np.float32)
    a[0, 0] = np.nan
    x, tx = lg.tensor(a), torch.tensor(a)
    for bins in (1, 4, 7):
        for rng_ in (None, (-1.0, 1.0)):
            h, e = lg.histogram(x[1:], bins, range=rng_)
            th, te = torch.histogram(tx[1:], bins, range=rng_)
            np.testing.assert_array_equal(h.numpy(), th.numpy())
            np.testing.assert_allclose(e.numpy(), te.numpy(), rtol=1e-6)   # (linspace's)
        np.testing.assert_array_equal(lg.histc(x[1:], bins, -1, 1).numpy(),
                                      torch.histc(tx[1:], bins, -1, 1).numpy())
    edges = [-1.0, 0.5, 0.0, 2.0]                 # not sorted: torch's binary search
    h, _ = lg.histogram(x[1:], lg.tensor(edges))
    th, _ = torch.histogram(tx[1:], torch.tensor(edges))
    np.testing.assert_array_equal(h.numpy(), th.numpy())
    w = rng.random((5, 5)).astype(np.float32)
    h, _ = lg.histogram(x[1:], 3, weight=lg.tensor(w), density=True)
    th, _ = torch.histogram(tx[1:], 3, weight=torch.tensor(w), density=True)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-6)
    h = lg.histogram(lg.tensor(a[1:], dtype=lg.float32).to(lg.bfloat16), 3)[0]
    assert h.dtype is lg.bfloat16


def test_bin_index_search_equals_torchs_binary_search():
    for edges in ([0.0, 1.0, 2.0], [0.0, 0.0, 1.0, 1.0, 3.0], [-1.0, 2.0], [1.0],
                  [0.0, 0.5, 0.5, 0.5, 4.0, 4.0]):
        e = np.array(edges, dtype=np.float32)
        a = np.concatenate([rng.uniform(-2, 5, 50), e, [np.nan, np.inf, -np.inf, -0.0]])
        a = a.astype(np.float32)
        first = np.searchsorted(e, a, side="right")
        np.testing.assert_array_equal(first, statistics._upper_bound(a, e))
        n = e.size
        pos = statistics._bin_index(a, e)
        ref = statistics._upper_bound(a, e) - 1
        ref[ref == n - 1] = n - 2
        with np.errstate(invalid="ignore"):
            ref[~((a >= e[0]) & (a <= e[-1])) | (n < 2)] = -1
        np.testing.assert_array_equal(pos, ref)


def test_bincount_against_torch():
    for dtype, tdtype in ((lg.int16, torch.int16), (lg.int64, torch.int64),
                          (lg.uint8, torch.uint8)):
        a = rng.integers(0, 6, 10)
        got, want = lg.bincount(lg.tensor(a, dtype=dtype), minlength=8), \
            torch.bincount(torch.tensor(a, dtype=tdtype), minlength=8)
        assert got.dtype is lg.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        for wd, twd in ((lg.float32, torch.float32), (lg.float64, torch.float64)):
            w = rng.random(10)
            got = lg.bincount(lg.tensor(a, dtype=dtype), lg.tensor(w, dtype=wd))
            want = torch.bincount(torch.tensor(a, dtype=tdtype), torch.tensor(w, dtype=twd))
            assert got.dtype.name == str(want.dtype).split(".")[1]
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="non-negative"):
        lg.bincount(lg.tensor([1, -1]))


# -- quantile as a compiled composite --------------------------------------------------------

def test_quantile_number_equals_written(monkeypatch):
    x = lg.tensor(rng.standard_normal((4, 6)))
    x[1, 2] = float("nan")
    for interp in ("linear", "lower", "higher", "midpoint", "nearest"):
        for dim, keep in ((None, False), (0, True), (-1, False)):
            for fn, ign in ((lg.quantile, False), (lg.nanquantile, True)):
                xr = x.detach().requires_grad_()
                got = fn(xr, 0.3, dim=dim, keepdim=keep, interpolation=interp)
                want = statistics._quantile(fn.__name__, xr, 0.3, dim, keep, interp, None,
                                            ign)
                # (compiled, the lerp of linear/midpoint may round differently: ~1 ulp)
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(),
                                           rtol=4e-16, atol=4e-16)
                if interp in ("lower", "higher", "nearest"):
                    same(got, want)
                assert type(got.grad_fn).__name__ == type(want.grad_fn).__name__
                g1, = lg.autograd.grad(got.sum(), xr)
                g2, = lg.autograd.grad(want.sum(), xr)
                np.testing.assert_array_equal(g1.numpy(), g2.numpy())
    for q in (1.5, -0.25):
        with pytest.raises(ValueError, match=r"q values must be in the range \[0, 1\]"):
            lg.quantile(x, q)
    with pytest.raises(RuntimeError, match="float or double"):
        lg.quantile(x.to(lg.int32), 0.5)
    out = lg.empty(0, dtype=lg.float64)
    lg.quantile(x, 0.5, out=out)
    same(out, lg.quantile(x, 0.5))


# -- one_hot, max_unpool -----------------------------------------------------------------------

def test_one_hot_fast_equals_general(monkeypatch):
    F = lg.nn.functional
    for a in ([1, 2, 0, 4], [[0, 3], [2, 2]], [], 3):
        x = lg.tensor(a, dtype=lg.int64)
        for n in (-1, 5, 7):
            if n == -1 and x.numel() == 0:  # no classes to infer: torch's error
                with pytest.raises(RuntimeError, match="Can not infer total number"):
                    F.one_hot(x, n)
                continue
            same(*fast_and_general(monkeypatch, lambda: F.one_hot(x, n)))
    for bad, n in (([1, -1], 3), ([1, 5], 3)):
        with pytest.raises(RuntimeError) as fast:
            F.one_hot(lg.tensor(bad), n)
        with monkeypatch.context() as m:
            m.setattr(_layers, "host_plain", lambda *a: False)
            with pytest.raises(RuntimeError) as slow:
                F.one_hot(lg.tensor(bad), n)
        assert str(fast.value) == str(slow.value)
    np.testing.assert_array_equal(
        F.one_hot(lg.tensor([0, 2]), 3).numpy(),
        torch.nn.functional.one_hot(torch.tensor([0, 2]), 3).numpy())


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_fast_equals_general(monkeypatch, n):
    F = lg.nn.functional
    pool = getattr(lg.nn.functional, f"max_pool{n}d")
    unpool = getattr(F, f"max_unpool{n}d")
    for batched in (True, False):
        shape = ((2,) if batched else ()) + (3,) + (6,) * n
        for dtype in (lg.float32, lg.float64, lg.bfloat16):
            x = _data(shape, dtype)
            v, i = pool(x, 2, return_indices=True)
            same(*fast_and_general(monkeypatch, lambda: unpool(v, i, 2)))
    x = lg.tensor(rng.standard_normal((1, 2) + (4,) * n).astype(np.float32))
    v, i = pool(x, 2, return_indices=True)
    tv, ti = getattr(torch.nn.functional, f"max_pool{n}d")(torch.tensor(x.numpy()), 2,
                                                           return_indices=True)
    np.testing.assert_array_equal(
        unpool(v, i, 2).numpy(),
        getattr(torch.nn.functional, f"max_unpool{n}d")(tv, ti, 2).numpy())
    bad = i.clone()
    bad.reshape(-1)[0] = 10 ** 6
    with pytest.raises(RuntimeError, match="invalid max index"):
        unpool(v, bad, 2)
    vr = v.detach().requires_grad_()
    assert unpool(vr, i, 2).grad_fn is not None


def test_host_plain_guard():
    x = lg.ones(3)
    assert fhost.host_plain(x, None)
    xr = lg.ones(3, requires_grad=True)
    assert not fhost.host_plain(x, xr)
    with lg.no_grad():
        assert fhost.host_plain(xr)
    assert not fhost.host_plain(lg.nn.Parameter(lg.ones(2)))
    seen = []
    lg.vmap(lambda r: seen.append(fhost.host_plain(r)) or r)(lg.ones(2, 3))
    assert seen == [False]


def test_fast_paths_leave_inputs_alone_and_make_new_tensors(monkeypatch):
    x = lg.tensor(rng.standard_normal((4, 3)))
    before = x.numpy().copy()
    version = x._storage.version
    m = lg.tensor(rng.integers(0, 2, (4, 3)).astype(bool))
    outs = [lg.index_put(x, (lg.tensor([0, 1]),), lg.tensor(5.0, dtype=lg.float64)),
            lg.index_put(x, (lg.tensor([0, 0]),), lg.tensor(5.0, dtype=lg.float64), True),
            lg.masked_scatter(x, m, lg.zeros(12, dtype=lg.float64)),
            lg.masked_select(x, m), lg.sort(x, 0).values, lg.cummax(x, 1).values,
            lg.mode(x, 0).values]
    np.testing.assert_array_equal(x.numpy(), before)
    assert x._storage.version == version
    for o in outs:
        assert o._storage is not x._storage and o.grad_fn is None
    s = lg.tensor(2.0)                   # 0-d input and mask
    same(*fast_and_general(monkeypatch,
                           lambda: lg.masked_scatter(s, lg.tensor(True), lg.tensor([7.0]))))
    same(*fast_and_general(monkeypatch, lambda: lg.masked_select(s, lg.tensor(False))))
    with lg.inference_mode():
        assert lg.sort(x, 1).values.is_inference()
