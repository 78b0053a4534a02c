"""Regression tests for samples of torch's OpInfo database that llgrad once failed: empty
inputs of unique / unique_consecutive (with `dim`), searchsorted / bucketize (empty boundaries
or values), histogram / histogramdd (the bin edges of an empty input, zero dimensions) and
bincount (an empty input). Each case is checked against torch: values, dtypes and shapes,
or that both raise."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")

SHAPES = [(), (0,), (3,), (0, 0), (0, 3), (3, 0), (2, 3), (0, 2, 3), (2, 0, 3), (2, 3, 0),
          (0, 0, 0), (5, 0, 5), (2, 2, 2)]


def _leaves(x):
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in _leaves(item)]
    return [x]


def _same(got, want):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape), (g.shape, w.shape)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], (g.dtype, w.dtype)
        np.testing.assert_allclose(np.asarray(g.numpy(), np.float64),
                                   w.numpy().astype(np.float64), rtol=1e-6, atol=1e-6,
                                   equal_nan=True)


def _check(torch_fn, lg_fn):
    """Both give the same result, or both raise."""
    try:
        want = torch_fn()
    except Exception:                   # noqa: BLE001
        with pytest.raises(Exception):
            lg_fn()
        return
    _same(lg_fn(), want)


def _data(shape, seed=0, dtype=np.float32):
    r = np.random.default_rng(seed)
    return r.integers(0, 3, shape).astype(dtype)


def _both(a):
    return lg.tensor(a), torch.tensor(a)


# --------------------------------------------------------------------------------------
# unique / unique_consecutive
# --------------------------------------------------------------------------------------

def _dims(shape):
    return [None] + list(range(-len(shape), len(shape)))


@pytest.mark.parametrize("name", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unique_every_dim(name, shape):
    lt, tt = _both(_data(shape))
    for dim, ri, rc in itertools.product(_dims(shape), (False, True), (False, True)):
        _check(lambda: getattr(torch, name)(tt, return_inverse=ri, return_counts=rc, dim=dim),
               lambda: getattr(lg, name)(lt, return_inverse=ri, return_counts=rc, dim=dim))


@pytest.mark.parametrize("name", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.bool_])
def test_unique_empty_selected_dim(name, dtype):
    # the OpInfo sample: (5, 0, 5) with dim=1 gives the input back, empty inverse and counts
    lt, tt = _both(np.zeros((5, 0, 5), dtype))
    got = getattr(lg, name)(lt, return_inverse=True, return_counts=True, dim=1)
    want = getattr(torch, name)(tt, return_inverse=True, return_counts=True, dim=1)
    _same(got, want)
    assert tuple(got[0].shape) == (5, 0, 5)
    assert got[1].dtype == lg.int64 and tuple(got[1].shape) == (0,)
    assert got[2].dtype == lg.int64 and tuple(got[2].shape) == (0,)
    _same(getattr(lg, name)(lt, dim=1), getattr(torch, name)(tt, dim=1))


@pytest.mark.parametrize("name", ["unique", "unique_consecutive"])
@pytest.mark.parametrize("shape,dim", [((5, 0, 5), 0), ((5, 0, 5), 2), ((3, 0), 0),
                                       ((0, 0), 1)])
def test_unique_unselected_empty_dim_raises(name, shape, dim):
    lt, tt = _both(np.zeros(shape, np.float32))
    with pytest.raises(RuntimeError):
        getattr(torch, name)(tt, dim=dim)
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        getattr(lg, name)(lt, dim=dim)


# --------------------------------------------------------------------------------------
# searchsorted / bucketize
# --------------------------------------------------------------------------------------

def _sorted(shape, seed=1):
    return np.sort(_data(shape, seed), axis=-1) if shape else _data(shape, seed)


SEARCH_CASES = [((0,), (3,)), ((0,), (0,)), ((3,), (0,)), ((3,), (2, 0)), ((0,), ()),
                ((0,), (0, 4)), ((2, 0), (2, 3)), ((0, 5), (0, 3)), ((0, 0), (0, 0)),
                ((0, 0), (0, 3)), ((2, 3), (2, 0)), ((2, 0, 3), (2, 0, 1)),
                ((2, 3, 0), (2, 3, 4)), ((2, 3), (2, 4)), ((4,), (2, 3))]


@pytest.mark.parametrize("seq_shape,val_shape", SEARCH_CASES, ids=str)
def test_searchsorted_empty(seq_shape, val_shape):
    s = _sorted(seq_shape)
    v = _data(val_shape, 2)
    (ls, ts), (lv, tv) = _both(s), _both(v)
    order = np.argsort(s, axis=-1, kind="stable")
    (lo, to) = _both(order.astype(np.int64))
    for right, out_int32 in itertools.product((False, True), (False, True)):
        _check(lambda: torch.searchsorted(ts, tv, right=right, out_int32=out_int32),
               lambda: lg.searchsorted(ls, lv, right=right, out_int32=out_int32))
        side = "right" if right else "left"
        _check(lambda: torch.searchsorted(ts, tv, side=side, sorter=to),
               lambda: lg.searchsorted(ls, lv, side=side, sorter=lo))


@pytest.mark.parametrize("seq_shape,val_shape", [c for c in SEARCH_CASES if len(c[0]) == 1],
                         ids=str)
def test_bucketize_empty(seq_shape, val_shape):
    (ls, ts), (lv, tv) = _both(_sorted(seq_shape)), _both(_data(val_shape, 2))
    for right, out_int32 in itertools.product((False, True), (False, True)):
        _check(lambda: torch.bucketize(tv, ts, right=right, out_int32=out_int32),
               lambda: lg.bucketize(lv, ls, right=right, out_int32=out_int32))


def test_searchsorted_scalar_empty_boundaries():
    ls, ts = _both(np.zeros(0, np.float32))
    _same(lg.searchsorted(ls, 1.0), torch.searchsorted(ts, 1.0))
    _same(lg.bucketize(1.0, ls), torch.bucketize(1.0, ts))


def test_searchsorted_empty_compiled():
    for seq_shape, val_shape in SEARCH_CASES[:12]:
        f = lg.compile(lambda s, v: lg.searchsorted(s, v, right=True))
        (ls, ts), (lv, tv) = _both(_sorted(seq_shape)), _both(_data(val_shape, 2))
        _same(f(ls, lv), torch.searchsorted(ts, tv, right=True))


# --------------------------------------------------------------------------------------
# histogram / histogramdd / histc / bincount
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_edges(shape, dtype):
    lt, tt = _both(_data(shape, dtype=dtype))
    lw, tw = _both(np.ones(shape, dtype))
    for bins, rng, density, weighted in itertools.product(
            (1, 3, 4), (None, (0.0, 2.0), (1.0, 1.0)), (False, True), (False, True)):
        _check(lambda: torch.histogram(tt, bins, range=rng, density=density,
                                       weight=tw if weighted else None),
               lambda: lg.histogram(lt, bins, range=rng, density=density,
                                    weight=lw if weighted else None))
    lb, tb = _both(np.array([0.0, 1.0, 2.5], dtype))
    _check(lambda: torch.histogram(tt, tb), lambda: lg.histogram(lt, lb))


def test_histogram_empty_edges_span_0_to_1():
    # torch bins an empty input without a range over [0, 1]
    h, e = lg.histogram(lg.zeros((5, 0, 5)), 4)
    np.testing.assert_allclose(e.numpy(), np.linspace(0, 1, 5, dtype=np.float32))
    np.testing.assert_array_equal(h.numpy(), np.zeros(4, np.float32))


@pytest.mark.parametrize("shape", [s for s in SHAPES if len(s) >= 1], ids=str)
def test_histogramdd_edges(shape):
    lt, tt = _both(_data(shape))
    D = shape[-1]
    for bins, rng, density in itertools.product(
            (2, [2] * D, [3, 2] * (D // 2) + [3] * (D % 2)),
            (None, [0.0, 2.0] * D, [1.0, 1.0] * D), (False, True)):
        _check(lambda: torch.histogramdd(tt, bins, range=rng, density=density),
               lambda: lg.histogramdd(lt, bins, range=rng, density=density))
        if len(shape) >= 2:
            (lw, tw) = _both(np.ones(shape[:-1], np.float32))
            _check(lambda: torch.histogramdd(tt, bins, range=rng, density=density, weight=tw),
                   lambda: lg.histogramdd(lt, bins, range=rng, density=density, weight=lw))


def test_histogramdd_one_dim_input_raises():
    lt, tt = _both(np.zeros(3, np.float32))
    with pytest.raises(RuntimeError):
        torch.histogramdd(tt, 3)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        lg.histogramdd(lt, 3)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_histc_empty_and_degenerate(shape):
    lt, tt = _both(_data(shape))
    for lo, hi in ((0, 0), (1, 1), (0, 2), (-1, 5)):
        _check(lambda: torch.histc(tt, 4, lo, hi), lambda: lg.histc(lt, 4, lo, hi))


@pytest.mark.parametrize("shape", [(0,), (4,), (7,)], ids=str)
@pytest.mark.parametrize("weights", [None, np.float32, np.float64])
def test_bincount_empty(shape, weights):
    li, ti = _both(_data(shape).astype(np.int64))
    for minlength in (0, 4):
        if weights is None:
            _check(lambda: torch.bincount(ti, minlength=minlength),
                   lambda: lg.bincount(li, minlength=minlength))
        else:
            lw, tw = _both(np.ones(shape, weights))
            _check(lambda: torch.bincount(ti, tw, minlength=minlength),
                   lambda: lg.bincount(li, lw, minlength=minlength))
