"""The plain eager fast paths of max/min with `dim`, cummax/cummin, mode (one generated
kernel each: values and indices in one pass), as_strided_scatter and as_strided_copy
(cached positions, host writes, copy replays with keywords), gather with an empty index
and nonzero/argwhere (kernels kept per layout), against the general paths they skip
(forced by patching `host_plain` off) and against torch: values bit for bit, dtypes,
shapes, non-contiguous, empty and 0-d inputs, negative dims, errors, and gradients (calls
autograd records take the general path)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.codegen import reduce as codegen_reduce
from llgrad.functions import indexing, layout, reduction, statistics

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")

torch = pytest.importorskip("torch")

rng = np.random.default_rng(11)
_MODULES = (indexing, layout, reduction, statistics)

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool"]


def _values(shape, dtype, special=True):
    """Small integers (ties), and for floating dtypes halves, NaNs and signed zeros."""
    a = rng.integers(-3, 4, shape).astype(np.float64)
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        a = a / 2
        if special and a.size:
            a.reshape(-1)[::7] = np.nan
            a.reshape(-1)[1::5] = -0.0
    return a


def _lg(a, dtype):
    return lg.tensor(a).to(getattr(lg, dtype))


def _torch(x):
    if x.dtype == lg.bfloat16:
        return torch.tensor(x.float().numpy()).to(torch.bfloat16)
    return torch.tensor(x.numpy())


def same(a, b):
    """Results equal bit for bit (raw memory values, dtype, shape)."""
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape)
        xa, ya = x.detach().contiguous()._numpy_view(), y.detach().contiguous()._numpy_view()
        if xa.dtype.kind == "f":
            xa, ya = xa.view(f"u{xa.itemsize}"), ya.view(f"u{ya.itemsize}")
        assert np.array_equal(xa, ya)


def like_torch(ours, theirs):
    """Values equal to torch's (NaN where torch has NaN), same shapes; indices equal."""
    ours = ours if isinstance(ours, (tuple, list)) else (ours,)
    theirs = theirs if isinstance(theirs, (tuple, list)) else (theirs,)
    for x, t in zip(ours, theirs):
        assert tuple(x.shape) == tuple(t.shape)
        xa = x.float().numpy() if x.dtype == lg.bfloat16 else x.numpy()
        ta = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
        assert np.array_equal(xa.astype(np.float64), ta.astype(np.float64), equal_nan=True)
        ok = ~np.isnan(xa.astype(np.float64))
        assert np.array_equal(np.signbit(xa[ok].astype(np.float64)),
                              np.signbit(ta[ok].astype(np.float64)))


def fast_and_general(monkeypatch, fn):
    """fn() on the fast path, then on the general path."""
    fast = fn()
    with monkeypatch.context() as m:
        for mod in _MODULES:
            m.setattr(mod, "host_plain", lambda *a: False)
        slow = fn()
    return fast, slow


def _layouts(x):
    """x itself, transposed, a strided slice and an expanded view (stride 0)."""
    yield x
    if x.ndim >= 2:
        yield x.transpose(0, 1)
        yield x[:, ::2]
    if x.ndim >= 1 and x.shape[0] >= 1:
        yield x[:1].expand((3,) + tuple(x.shape[1:]))


# -- max / min with dim ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["max", "min"])
def test_extreme_with_dim(monkeypatch, dtype, op):
    base = _lg(_values((4, 5, 6), dtype), dtype)
    for x in _layouts(base):
        for dim in range(-x.ndim, x.ndim):
            for keepdim in (False, True):
                fast, slow = fast_and_general(
                    monkeypatch, lambda: getattr(lg, op)(x, dim, keepdim=keepdim))
                same(fast, slow)
                like_torch(fast, getattr(torch, op)(_torch(x), dim, keepdim=keepdim))
                assert type(fast).__name__ == "values_indices" or hasattr(fast, "indices")


@pytest.mark.parametrize("op", ["max", "min"])
def test_extreme_with_dim_edges(monkeypatch, op):
    f = getattr(lg, op)
    x0 = lg.tensor(2.5)                                   # 0-d: dim 0 and -1
    for dim in (0, -1):
        fast, slow = fast_and_general(monkeypatch, lambda: f(x0, dim))
        same(fast, slow)
    e = lg.zeros(0, 3)                                    # empty rows, non-empty dim
    fast, slow = fast_and_general(monkeypatch, lambda: f(e, 1))
    same(fast, slow)
    assert tuple(fast.values.shape) == (0,)
    with pytest.raises(IndexError):                      # reducing an empty dimension
        f(e, 0)
    with pytest.raises(IndexError):
        f(lg.ones(2, 3), 2)
    v = lg.ones(1)                                       # one element
    same(*fast_and_general(monkeypatch, lambda: f(v, 0, keepdim=True)))
    # all NaN, and NaN after numbers: the first NaN's index
    n = lg.tensor([[1.0, float("nan"), 3.0, float("nan")], [float("nan")] * 4])
    like_torch(f(n, 1), getattr(torch, op)(_torch(n), 1))


@pytest.mark.parametrize("op", ["max", "min"])
def test_extreme_with_dim_gradients(op):
    a = _values((3, 4), "float64", special=False) + rng.random((3, 4))
    x = lg.tensor(a, requires_grad=True)
    v, i = getattr(lg, op)(x, 1)
    assert v.grad_fn is not None and type(v.grad_fn).__name__ == \
        ("MaxBackward0" if op == "max" else "MinBackward0")
    v.sum().backward()
    t = torch.tensor(a, requires_grad=True)
    getattr(torch, op)(t, 1).values.sum().backward()
    assert np.array_equal(x.grad.numpy(), t.grad.numpy())
    with lg.no_grad():                                    # not recorded: the fast path
        w, j = getattr(lg, op)(x, 1)
    assert w.grad_fn is None and not w.requires_grad
    same((w, j), (v.detach(), i))


# -- cummax / cummin ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_running_extremes(monkeypatch, dtype, op):
    base = _lg(_values((4, 5, 6), dtype), dtype)
    for x in _layouts(base):
        for dim in range(-x.ndim, x.ndim):
            fast, slow = fast_and_general(monkeypatch, lambda: getattr(lg, op)(x, dim))
            same(fast, slow)
            like_torch(fast, getattr(torch, op)(_torch(x), dim))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_running_extremes_edges_and_gradients(monkeypatch, op):
    f = getattr(lg, op)
    for x in (lg.tensor(1.5), lg.zeros(0, 3), lg.zeros(3, 0), lg.ones(1)):
        for dim in range(-max(x.ndim, 1), max(x.ndim, 1)):
            same(*fast_and_general(monkeypatch, lambda: f(x, dim)))
    with pytest.raises(IndexError):
        f(lg.ones(2, 3), 2)
    out = (lg.empty(0), lg.empty(0, dtype=lg.int64))     # out= after the kernel
    x = lg.tensor([[3.0, 1.0, 2.0]])
    f(x, 1, out=out)
    like_torch(out, getattr(torch, op)(_torch(x), 1))
    a = rng.random((3, 5))
    x = lg.tensor(a, requires_grad=True)
    v, _ = f(x, 1)
    assert type(v.grad_fn).__name__ == ("CummaxBackward0" if op == "cummax"
                                         else "CumminBackward0")
    (v * lg.arange(5.0)).sum().backward()
    t = torch.tensor(a, requires_grad=True)
    (getattr(torch, op)(t, 1).values * torch.arange(5.0)).sum().backward()
    assert np.allclose(x.grad.numpy(), t.grad.numpy())


# -- mode --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_mode(monkeypatch, dtype):
    base = _lg(_values((4, 5, 6), dtype), dtype)
    for x in _layouts(base):
        for dim in range(-x.ndim, x.ndim):
            for keepdim in (False, True):
                fast, slow = fast_and_general(monkeypatch,
                                              lambda: lg.mode(x, dim, keepdim=keepdim))
                same(fast, slow)
    nan_free = _lg(_values((4, 7), dtype, special=False), dtype)
    for dim in (0, 1):
        like_torch(lg.mode(nan_free, dim), torch.mode(_torch(nan_free), dim))


def test_mode_edges(monkeypatch):
    nan = float("nan")
    for rows in ([[nan, nan, nan]], [[nan, 1.0, nan, 1.0]], [[0.0, -0.0, 2.0, -0.0]],
                 [[2.0, 1.0, 2.0, 1.0, nan]]):
        x = lg.tensor(rows)
        same(*fast_and_general(monkeypatch, lambda: lg.mode(x, 1)))
    long_row = _lg(_values((2, codegen_reduce.MODE_MAX_ROW + 5), "float32"), "float32")
    same(*fast_and_general(monkeypatch, lambda: lg.mode(long_row, 1)))   # (the host)
    for x in (lg.tensor(3.0), lg.zeros(0, 4)):
        same(*fast_and_general(monkeypatch, lambda: lg.mode(x, -1)))
    with pytest.raises(IndexError):
        lg.mode(lg.zeros(3, 0), 1)
    a = np.array([[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 1.0, 1.0]])
    x = lg.tensor(a, requires_grad=True)
    v, i = lg.mode(x, 1)
    assert v.grad_fn is not None                          # recorded: the general path
    v.sum().backward()
    t = torch.tensor(a, requires_grad=True)
    torch.mode(t, 1).values.sum().backward()
    assert np.array_equal(x.grad.numpy(), t.grad.numpy())


# -- as_strided_scatter / as_strided_copy -------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int64", "bool"])
def test_as_strided_scatter(monkeypatch, dtype):
    cases = [((3, 3), (2, 2), (1, 2), 1), ((3, 3), (2, 2), (1, 2), None),
             ((4, 5), (3,), (6,), 0), ((10,), (2, 2), (1, 2), 0), ((3, 3), (), (), 4),
             ((3, 3), (2, 2), (0, 1), 0)]                # (overlapping writes)
    for shape, size, stride, offset in cases:
        x = _lg(_values(shape, dtype, special=False), dtype)
        src = _lg(_values(size, dtype, special=False), dtype)
        kwargs = {} if offset is None else {"storage_offset": offset}
        fast, slow = fast_and_general(
            monkeypatch, lambda: lg.as_strided_scatter(x, src, size, stride, **kwargs))
        same(fast, slow)
        if stride != (0, 1):                             # (torch leaves overlaps unordered)
            like_torch(fast, torch.as_strided_scatter(_torch(x), _torch(src), size,
                                                      stride, **kwargs))
    # a view of a bigger storage: positions outside the view's elements are skipped
    big = lg.arange(20.0)
    v = big[2:11].reshape(3, 3)
    src = (lg.arange(4.0) + 100).reshape(2, 2)
    same(*fast_and_general(monkeypatch,
                           lambda: lg.as_strided_scatter(v, src, (2, 2), (4, 5), 1)))
    t = v.t()                                            # non-contiguous input
    same(*fast_and_general(monkeypatch,
                           lambda: lg.as_strided_scatter(t, src, (2, 2), (1, 3), 2)))


def test_as_strided_scatter_general_cases():
    x = lg.zeros(3, 3)
    src = lg.ones(2, 2, dtype=lg.float64)               # another dtype: cast as general
    out = lg.as_strided_scatter(x, src, (2, 2), (1, 2), 1)
    assert out.dtype == lg.float32
    like_torch(out, torch.as_strided_scatter(_torch(x), _torch(src).float(), (2, 2),
                                             (1, 2), 1))
    with pytest.raises(RuntimeError):
        lg.as_strided_scatter(x, lg.ones(3), (2, 2), (1, 2), 1)       # size mismatch
    a = lg.rand(3, 3, requires_grad=True)
    b = lg.rand(2, 2, requires_grad=True)
    out = lg.as_strided_scatter(a, b, (2, 2), (1, 2), 1)
    assert out.grad_fn is not None
    (out * lg.arange(9.0).reshape(3, 3)).sum().backward()
    # (torch's own gradient here is marked an expected failure in its OpInfo: the
    # written positions 1..4 get nothing in `a`, their weights in `b`)
    assert np.array_equal(a.grad.numpy().reshape(-1), [0, 0, 0, 0, 0, 5, 6, 7, 8])
    assert np.array_equal(b.grad.numpy(), [[1, 3], [2, 4]])


def test_as_strided_copy_keywords():
    x = lg.arange(9.0).reshape(3, 3)
    for _ in range(3):                                   # first call, then the replay
        out = lg.as_strided_copy(x, (2, 2), (1, 2), storage_offset=1)
        like_torch(out, torch.as_strided_copy(_torch(x), (2, 2), (1, 2), storage_offset=1))
        assert out._storage is not x._storage
    # the same layout in a smaller storage: the bounds check still runs
    big = lg.arange(30.0)[:9].reshape(3, 3)
    assert big._lkey == x._lkey
    lg.as_strided_copy(big, (2, 2), (1, 12), storage_offset=1)          # fits in 30
    lg.as_strided_copy(big, (2, 2), (1, 12), storage_offset=1)
    with pytest.raises(RuntimeError):
        lg.as_strided_copy(x, (2, 2), (1, 12), storage_offset=1)       # not in 9
    # another offset of the same storage reads from there
    y = lg.arange(12.0)[3:].reshape(3, 3)
    assert y._lkey == x._lkey
    like_torch(lg.as_strided_copy(y, (2, 2), (1, 2), storage_offset=1),
               torch.tensor([[1.0, 3.0], [2.0, 4.0]]))


# -- gather with an empty index, nonzero ------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [lg.uint8, lg.int64, lg.int32, lg.float32])
def test_gather_empty_index(monkeypatch, index_dtype):
    x = lg.rand(5)
    idx = lg.zeros((2, 0), dtype=index_dtype)
    fast, slow = fast_and_general(monkeypatch, lambda: lg.gather(x, 0, idx))
    assert fast.dtype == slow.dtype == lg.float32 and tuple(fast.shape) == (2, 0)
    assert tuple(x.gather(-1, idx).shape) == (2, 0)
    with pytest.raises(IndexError):
        lg.gather(x, 1, idx)
    with pytest.raises(IndexError):
        lg.gather(x, -2, idx)
    y = lg.rand(5, requires_grad=True)                   # recorded: the general path
    g = lg.gather(y, 0, idx)
    assert g.requires_grad and tuple(g.shape) == (2, 0)
    with pytest.raises(RuntimeError):                    # a non-empty index's dtype check
        lg.gather(x, 0, lg.zeros(2, dtype=lg.uint8))


@pytest.mark.parametrize("dtype", DTYPES + ["complex64"])
def test_nonzero_and_argwhere(dtype):
    for shape in ((5, 5), (5,), (2, 3, 4), (), (0, 3)):
        a = rng.integers(0, 2, shape).astype(np.float64)
        x = lg.tensor(a).to(getattr(lg, dtype))
        for v in _layouts(x) if x.ndim else (x,):
            t = _torch(v) if dtype != "complex64" else torch.tensor(v.numpy())
            for _ in range(2):                            # first call, then the kept plan
                ours = lg.nonzero(v)
                assert ours.dtype == lg.int64
                assert np.array_equal(ours.numpy(), torch.nonzero(t).numpy())
                assert np.array_equal(lg.argwhere(v).numpy(), torch.argwhere(t).numpy())
                for o, r in zip(lg.nonzero(v, as_tuple=True), torch.nonzero(t, as_tuple=True)):
                    assert np.array_equal(o.numpy(), r.numpy())
    z = lg.zeros(4, 4)
    assert tuple(lg.nonzero(z).shape) == (0, 2)
    assert tuple(lg.nonzero(lg.tensor(0.0)).shape) == (0, 0)
    assert tuple(lg.nonzero(lg.tensor(2.0)).shape) == (1, 0)


# -- histc (one counting kernel), renorm (a compiled composite) ---------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_histc_kernel(monkeypatch, dtype):
    for shape in ((5, 5), (100,), (3, 4, 5), (0,), ()):
        a = np.asarray(rng.standard_normal(shape) * 3)
        if a.size > 1:
            a.reshape(-1)[::9] = np.nan
        x = _lg(a, dtype)
        for v in ([x, x.t()] if x.ndim == 2 else [x]):
            for kw in ({"min": 0, "max": 10}, {"bins": 7, "min": -2, "max": 2},
                       {"bins": 3, "min": 1, "max": 1}, {"bins": 4}):
                if kw.get("min", 0) == kw.get("max", 0) and np.isnan(a).any():
                    with pytest.raises(RuntimeError):                # a NaN range
                        lg.histc(v, **kw)
                    continue
                fast = lg.histc(v, **kw)
                with monkeypatch.context() as m:                   # the host's counting
                    m.setattr(statistics, "_HISTC_DTYPES", ())
                    slow = lg.histc(v, **kw)
                same(fast, slow)
                if dtype in ("float32", "float64"):
                    like_torch(fast, torch.histc(_torch(v), **kw))
    out = lg.empty(0)
    lg.histc(lg.tensor([1.0, 2.0, 2.5]), bins=3, min=0, max=3, out=out)
    assert out.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_renorm(dtype):
    a = rng.standard_normal((4, 3, 5))
    x = _lg(a, dtype) if dtype != "complex64" else lg.tensor(a + 1j * a[::-1].copy()).to(
        lg.complex64)
    t = torch.tensor(x.numpy())
    for p, dim, maxnorm in ((1, 2, 3.0), (2, 0, 1.5), (3, -1, 100.0)):
        for _ in range(2):                                 # traced first call, then compiled
            ours = lg.renorm(x, p, dim, maxnorm)
            assert ours.dtype == x.dtype
            assert np.allclose(ours.numpy(), torch.renorm(t, p, dim, maxnorm).numpy(),
                               rtol=1e-5, atol=1e-6)
    xg = lg.tensor(a, requires_grad=True)
    lg.renorm(xg, 2, 0, 1.5).sum().backward()
    tg = torch.tensor(a, requires_grad=True)
    torch.renorm(tg, 2, 0, 1.5).sum().backward()
    assert np.allclose(xg.grad.numpy(), tg.grad.numpy())
    with pytest.raises(RuntimeError):
        lg.renorm(lg.ones(3), 2, 0, 1.0)
    with pytest.raises(RuntimeError):
        lg.renorm(lg.ones(3, 3, dtype=lg.int64), 2, 0, 1.0)
