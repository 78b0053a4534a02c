"""Statistics, scans and order statistics against torch: values, dtypes, NaN handling,
gradients (torch's autograd and gradcheck in float64), errors, lg.compile."""
import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import gradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
NAN = float("nan")


def _np(t):
    return t.detach().numpy()


def _close(a, b, tol=1e-6):
    if isinstance(b, (tuple, list)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _close(u, v, tol)
        return
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol, equal_nan=True)


def _distinct(shape, dtype=np.float64, nan=False):
    """Values without ties (so indices are unique), optionally with NaNs."""
    a = RNG.permutation(int(np.prod(shape))).reshape(shape).astype(dtype) / 3 - 2
    if nan and a.size > 4:
        flat = a.reshape(-1)
        flat[[1, a.size // 2, a.size - 2]] = np.nan
    return a


A = _distinct((4, 7), nan=True)
B = _distinct((5, 6))
I = RNG.integers(0, 4, (3, 11))

CASES = [  # name, array, args, kwargs
    ("cummax", A, (1,), {}), ("cummin", A, (0,), {}), ("cummax", I, (1,), {}),
    ("cummin", I, (0,), {}), ("cummax", np.float64(3.0), (0,), {}),
    ("logcumsumexp", B, (1,), {}), ("logcumsumexp", B.astype(np.float32), (0,), {}),
    ("kthvalue", B, (3,), {}), ("kthvalue", A, (2, 0, True), {}),
    ("median", A, (), {}), ("median", B, (), {}), ("median", A, (1,), {}),
    ("median", B, (0, True), {}), ("median", I, (), {}),
    ("nanmedian", A, (), {}), ("nanmedian", A, (1,), {}), ("nanmedian", B, (0,), {}),
    ("mode", I, (), {}), ("mode", I, (0, True), {}),
    ("quantile", B, (0.3,), {}), ("quantile", A, (0.3, 1), {}), ("nanquantile", A, (0.3, 1), {}),
    ("nanquantile", A, (0.7,), {}), ("quantile", B, (0.25, 0, True), {}),
    ("nansum", A, (), {}), ("nansum", A, (1,), {}), ("nansum", I, (0,), {}),
    ("nanmean", A, (1, True), {}), ("nanmean", B, (), {}),
    ("aminmax", A, (), {"dim": 1}), ("aminmax", I, (), {}), ("aminmax", B, (), {"dim": 0, "keepdim": True}),
    ("diff", B, (), {}), ("diff", B, (2, 0), {}), ("diff", I > 1, (), {}),
    ("cov", B, (), {}), ("cov", B[0], (), {}), ("corrcoef", B, (), {}),
    ("renorm", B, (2, 0, 3.0), {}), ("renorm", B, (1, 1, 2.0), {}),
    ("trapezoid", B, (), {}), ("trapezoid", B, (), {"dx": 0.5, "dim": 0}),
    ("trapz", B, (), {"dx": 2.0}), ("cumulative_trapezoid", B, (), {"dx": 0.5}),
    ("cumulative_trapezoid", B, (), {"dim": 0}),
    ("gradient", B, (), {}), ("gradient", B, (), {"spacing": 2.0, "edge_order": 2, "dim": 1}),
    ("gradient", B, (), {"spacing": [0.5, 3.0], "dim": [0, 1]}),
]


@pytest.mark.parametrize("name,a,args,kw", CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                       enumerate(CASES)])
def test_values_match_torch(name, a, args, kw):
    x, t = lg.tensor(a), torch.tensor(a)
    _close(getattr(lg, name)(x, *args, **kw), getattr(torch, name)(t, *args, **kw))


def test_non_contiguous():
    x, t = lg.tensor(B).t(), torch.tensor(B).t()
    for name, args in [("cummax", (1,)), ("median", (1,)), ("quantile", (0.4, 0)),
                       ("mode", (1,)), ("diff", ()), ("nansum", (0,)), ("kthvalue", (2,))]:
        _close(getattr(lg, name)(x[::2], *args), getattr(torch, name)(t[::2], *args))


def test_named_results_and_methods():
    x = lg.tensor(B)
    r = x.median(1)
    assert r.values.shape == (5,) and r.indices.dtype == lg.int64
    v, i = lg.cummax(x, 0)
    _close(v, torch.cummax(torch.tensor(B), 0).values)
    assert lg.aminmax(x).min.item() == B.min()
    assert lg.aminmax(x).max.item() == B.max()
    _close(x.nanmean(), torch.tensor(B).nanmean())
    _close(x.quantile(0.5, 1), torch.tensor(B).quantile(0.5, 1))
    y = lg.tensor(B.copy())
    ty = torch.tensor(B.copy())
    y.renorm_(2, 0, 3.0)
    ty.renorm_(2, 0, 3.0)
    _close(y, ty)
    y.cumsum_(1)
    ty.cumsum_(1)
    _close(y, ty, 1e-10)
    y.cumprod_(0)
    ty.cumprod_(0)
    _close(y, ty, 1e-9)


def test_quantile_interpolations():
    q = [0.0, 0.25, 0.5, 0.9, 1.0]
    for interp in ["linear", "lower", "higher", "midpoint", "nearest"]:
        for dim in [None, 1]:
            _close(lg.quantile(lg.tensor(B), lg.tensor(q, dtype=lg.float64), dim, True,
                               interpolation=interp),
                   torch.quantile(torch.tensor(B), torch.tensor(q, dtype=torch.float64), dim,
                                  True, interpolation=interp))
            _close(lg.nanquantile(lg.tensor(A), lg.tensor(q, dtype=lg.float64), dim,
                                  interpolation=interp),
                   torch.nanquantile(torch.tensor(A), torch.tensor(q, dtype=torch.float64), dim,
                                     interpolation=interp))


def test_nan_rules():
    row = np.array([[1.0, NAN, 3.0, NAN], [4.0, 2.0, NAN, 0.5]])
    for name in ["median", "nanmedian"]:
        _close(getattr(lg, name)(lg.tensor(row), 1), getattr(torch, name)(torch.tensor(row), 1))
    # a row of NaNs: NaN (which NaN's index PyTorch reports depends on its selection)
    assert np.isnan(lg.nanmedian(lg.tensor([[NAN] * 4]), 1).values.item())
    assert np.isnan(lg.nanmedian(lg.tensor([NAN] * 3)).item())
    _close(lg.cummax(lg.tensor([1.0, 3.0, NAN, 2.0, NAN, 5.0]), 0),
           torch.cummax(torch.tensor([1.0, 3.0, NAN, 2.0, NAN, 5.0]), 0))
    _close(lg.mode(lg.tensor([NAN, NAN])), torch.mode(torch.tensor([NAN, NAN])))
    _close(lg.median(lg.tensor([])), torch.median(torch.tensor([])))
    _close(lg.nansum(lg.tensor([])), torch.nansum(torch.tensor([])))


def test_histograms_and_bincount():
    f = RNG.standard_normal(60).astype(np.float32)
    x, t = lg.tensor(f), torch.tensor(f)
    _close(lg.histc(x, 7), torch.histc(t, 7))
    _close(lg.histc(x, 5, -1, 1), torch.histc(t, 5, -1, 1))
    _close(x.histc(3, 0, 0), t.histc(3, 0, 0))
    _close(lg.histc(lg.tensor([1.0, 1.0]), 4), torch.histc(torch.tensor([1.0, 1.0]), 4))
    _close(lg.histogram(x, 6), torch.histogram(t, 6))
    w = RNG.random(60).astype(np.float32)
    _close(lg.histogram(x, 6, range=(-1.0, 2.0), weight=lg.tensor(w), density=True),
           torch.histogram(t, 6, range=(-1.0, 2.0), weight=torch.tensor(w), density=True))
    e = np.array([-2.0, -0.5, 0.0, 0.3, 2.0], dtype=np.float32)
    _close(lg.histogram(x, lg.tensor(e)), torch.histogram(t, torch.tensor(e)))
    p = RNG.standard_normal((40, 2))
    h, edges = lg.histogramdd(lg.tensor(p), [3, 4])
    th, tedges = torch.histogramdd(torch.tensor(p), [3, 4])
    _close(h, th)
    _close(edges, tedges)
    pw = RNG.random(40)
    _close(lg.histogramdd(lg.tensor(p), 3, weight=lg.tensor(pw), density=True).hist,
           torch.histogramdd(torch.tensor(p), 3, weight=torch.tensor(pw), density=True).hist)
    ints = RNG.integers(0, 6, 20)
    _close(lg.bincount(lg.tensor(ints)), torch.bincount(torch.tensor(ints)))
    _close(lg.bincount(lg.tensor(ints), minlength=9), torch.bincount(torch.tensor(ints),
                                                                      minlength=9))
    wt = RNG.random(20).astype(np.float32)
    _close(lg.bincount(lg.tensor(ints), lg.tensor(wt)), torch.bincount(torch.tensor(ints),
                                                                        torch.tensor(wt)))
    _close(lg.bincount(lg.tensor(ints), lg.tensor(ints)), torch.bincount(torch.tensor(ints),
                                                                          torch.tensor(ints)))


def test_trapezoid_with_x_diff_prepend_gradient_coordinates():
    y = RNG.standard_normal((3, 5))
    xs = np.sort(RNG.random(5))
    _close(lg.trapezoid(lg.tensor(y), lg.tensor(xs)),
           torch.trapezoid(torch.tensor(y), torch.tensor(xs)))
    _close(lg.cumulative_trapezoid(lg.tensor(y), lg.tensor(xs)),
           torch.cumulative_trapezoid(torch.tensor(y), torch.tensor(xs)))
    _close(lg.trapezoid(lg.zeros(3, 0)), torch.trapezoid(torch.zeros(3, 0)))
    pre, app = RNG.standard_normal((3, 2)), RNG.standard_normal((3, 1))
    _close(lg.diff(lg.tensor(y), 2, prepend=lg.tensor(pre), append=lg.tensor(app)),
           torch.diff(torch.tensor(y), 2, prepend=torch.tensor(pre), append=torch.tensor(app)))
    for order in (1, 2):
        _close(lg.gradient(lg.tensor(y), spacing=(lg.tensor(xs),), dim=1, edge_order=order),
               torch.gradient(torch.tensor(y), spacing=(torch.tensor(xs),), dim=1,
                              edge_order=order))
    fw = np.array([1, 2, 1, 3, 1, 2])
    aw = RNG.random(6)
    _close(lg.cov(lg.tensor(B), correction=0, fweights=lg.tensor(fw), aweights=lg.tensor(aw)),
           torch.cov(torch.tensor(B), correction=0, fweights=torch.tensor(fw),
                     aweights=torch.tensor(aw)))
    _close(lg.cov(lg.tensor(B), aweights=lg.tensor(aw)),
           torch.cov(torch.tensor(B), aweights=torch.tensor(aw)))


GRAD_CASES = [  # name, array, args, kwargs, gradcheck
    ("cummax", B, (1,), {}, True), ("cummin", B, (0,), {}, True),
    ("logcumsumexp", B, (1,), {}, True), ("kthvalue", B, (2, 1), {}, True),
    ("median", B, (), {}, True), ("median", B, (1,), {}, True), ("nanmedian", A, (1,), {}, False),
    ("mode", np.round(B), (1,), {}, False), ("quantile", B, (0.3, 1), {}, True),
    ("nanquantile", A, (0.6,), {}, False), ("nansum", A, (1,), {}, False),
    ("nanmean", A, (0,), {}, False), ("diff", B, (2,), {}, True), ("cov", B, (), {}, True),
    ("corrcoef", B, (), {}, True), ("renorm", B, (2, 0, 3.0), {}, True),
    ("trapezoid", B, (), {"dx": 0.3}, True), ("cumulative_trapezoid", B, (), {}, True),
    ("gradient", B, (), {"edge_order": 2}, True),
]


def _first(r):
    return r[0] if isinstance(r, tuple) else r


@pytest.mark.parametrize("name,a,args,kw,check", GRAD_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GRAD_CASES)])
def test_gradients(name, a, args, kw, check):
    x = lg.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    y, ty = _first(getattr(lg, name)(x, *args, **kw)), _first(getattr(torch, name)(t, *args,
                                                                                       **kw))
    g = RNG.standard_normal(tuple(ty.shape))
    gx, = lg.autograd.grad(y, x, lg.tensor(g))
    gt, = torch.autograd.grad(ty, t, torch.tensor(g))
    _close(gx, gt, 1e-8)
    if check:
        assert gradcheck(lambda z: _first(getattr(lg, name)(z, *args, **kw)), (x,))


@pytest.mark.parametrize("name,args,kw", [
    ("median", (1,), {}), ("quantile", (0.3, 1), {"interpolation": "midpoint"}),
    ("nanmedian", (0,), {}), ("kthvalue", (2,), {}), ("diff", (), {}), ("cov", (), {}),
    ("trapezoid", (), {}), ("logcumsumexp", (1,), {}), ("nansum", (1,), {}),
    ("gradient", (), {}), ("renorm", (2, 0, 3.0), {}),
])
def test_compiled_matches_eager(name, args, kw):
    x = lg.tensor(A if name.startswith("nan") else B).float()

    def f(v):
        r = getattr(lg, name)(v, *args, **kw)
        return r[0] if isinstance(r, tuple) else r
    cf = lg.compile(f)
    _close(cf(x), f(x), 1e-5)
    assert not cf.graph_breaks


def test_host_ops_are_graph_breaks():
    x = lg.tensor(B).float()
    for fn in (lambda v: lg.cummax(v, 1).values * 2, lambda v: lg.mode(v.round()).values + 1,
               lambda v: lg.histc(v, 4) + 1):
        cf = lg.compile(fn)
        _close(cf(x), fn(x))
        assert cf.graph_breaks


@pytest.mark.parametrize("call,error,match", [
    (lambda: lg.median(lg.zeros(0, 3), 0), IndexError, "non-zero size"),
    (lambda: lg.mode(lg.zeros(0)), IndexError, "non-zero size"),
    (lambda: lg.kthvalue(lg.zeros(3), 4), RuntimeError, "out of range"),
    (lambda: lg.aminmax(lg.zeros(0)), RuntimeError, "empty"),
    (lambda: lg.quantile(lg.tensor([]), 0.5), RuntimeError, "non-empty"),
    (lambda: lg.quantile(lg.ones(3), 1.5), ValueError, "range"),
    (lambda: lg.quantile(lg.ones(3, dtype=lg.int64), 0.5), RuntimeError, "float or double"),
    (lambda: lg.quantile(lg.ones(3), 0.5, interpolation="cubic"), ValueError, "interpolation"),
    (lambda: lg.quantile(lg.ones(3), lg.tensor([0.5], dtype=lg.float64)), RuntimeError,
     "same dtype"),
    (lambda: lg.logcumsumexp(lg.tensor([1, 2]), 0), RuntimeError, "not implemented"),
    (lambda: lg.histc(lg.tensor([1, 2]), 4), RuntimeError, "not implemented"),
    (lambda: lg.histc(lg.ones(3), 4, 2, 1), RuntimeError, "max must be larger"),
    (lambda: lg.bincount(lg.tensor([1.0])), RuntimeError, "integral"),
    (lambda: lg.bincount(lg.tensor([-1])), RuntimeError, "non-negative"),
    (lambda: lg.diff(lg.tensor(1.0)), RuntimeError, "one-dimensional"),
    (lambda: lg.gradient(lg.ones(2), edge_order=2), RuntimeError, "edge_order"),
    (lambda: lg.cov(lg.ones(2, 2, 2)), RuntimeError, "two or fewer"),
    (lambda: lg.renorm(lg.ones(3), 2, 0, 1.0), RuntimeError, "at least 2"),
    (lambda: lg.cummax(lg.ones(3), 1), IndexError, "out of range"),
    (lambda: lg.nanmean(lg.ones(3, dtype=lg.int64)), RuntimeError, "floating point"),
    (lambda: lg.median(lg.ones(3, requires_grad=True), 0, out=(lg.empty(0), lg.empty(0, dtype=lg.int64))),
     RuntimeError, "automatic differentiation"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_out_tuples():
    vals, idx = lg.empty(0), lg.empty(0, dtype=lg.int64)
    r = lg.median(lg.tensor(B).float(), 1, out=(vals, idx))
    assert r.values is vals and r.indices is idx
    _close(vals, torch.median(torch.tensor(B).float(), 1).values)
    out = lg.empty(0)
    assert lg.quantile(lg.tensor(B).float(), 0.5, out=out) is out


@pytest.mark.parametrize("edges", [[3.0, 1.0], [-3.0, 2.0, -1.0, 4.0], [-3.0, 2.0, 1.0, 0.0, 4.0],
                                   [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -1.0]])
@pytest.mark.parametrize("density", [False, True])
def test_histogram_unsorted_edges_bin_as_torch(edges, density):
    x = np.array([0., 1., 2., 3., -1., -2.5, 1.5, np.nan, 4., -3., 2.])
    b = np.array(edges)
    _close(lg.histogram(lg.tensor(x), lg.tensor(b), density=density),
           torch.histogram(torch.tensor(x), torch.tensor(b), density=density))
    _close(lg.histogramdd(lg.tensor(x[:, None]), [lg.tensor(b)], density=density)[0],
           torch.histogramdd(torch.tensor(x[:, None]), [torch.tensor(b)], density=density)[0])
