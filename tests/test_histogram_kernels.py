"""The generated histogram kernels (codegen/histogram.py) against torch and against the
NumPy host code they replace: histc, histogram, histogramdd, bincount (and mode's kernel
path).

Counts and bin edges must equal torch's exactly (torch's `linspace` edges, its bin search,
values on edges, NaN and inf skipped); weighted sums and densities, which torch adds in the
input dtype and llgrad in float64, equal the host code exactly and torch to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.functions import statistics as S

torch = pytest.importorskip("torch")

_HOST_VALUES = S._host_values
FLOATS = [(np.float32, lg.float32, torch.float32), (np.float64, lg.float64, torch.float64)]


@pytest.fixture
def kernel_only(monkeypatch):
    """Fail any call that falls back to the host code (the kernels must serve it)."""

    def host(*a, **k):
        """Stand-in for the host code's value reader: fails."""
        raise AssertionError("took the host path")

    monkeypatch.setattr(S, "_host_values", host)


def host_reference(fn, *args, **kwargs):
    """`fn` with every histogram kernel path switched off (the NumPy host code)."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(S, "_host_values", _HOST_VALUES)
        mp.setattr(S, "_plain_input", lambda x: False)
        mp.setattr(S, "_HISTC_DTYPES", ())
        mp.setattr(S, "BINCOUNT_INTS", ())
        return fn(*args, **kwargs)
    finally:
        mp.undo()


def _np(t):
    """A tensor's values as a NumPy array."""
    return t.detach().numpy() if hasattr(t, "detach") else t.numpy()


def same(a, b):
    """Exactly equal: dtype, shape and every value (NaN where NaN)."""
    a, b = _np(a), _np(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_array_equal(a, b)


def close(a, b):
    """Equal to rounding (weighted sums, densities)."""
    a, b = _np(a), _np(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


def data(shape, npd, seed=0, special=False):
    """Random values of `shape` (with NaN, inf and -inf first when `special`)."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 3).astype(npd)
    if special and a.size >= 4:
        flat = a.reshape(-1)
        flat[0] = np.nan
        flat[1] = np.inf
        flat[2] = -np.inf
    return a


def layouts(a, lt):
    """(name, llgrad tensor, the NumPy values it holds): contiguous, transposed, sliced."""
    out = [("contiguous", lg.tensor(a, dtype=lt), a)]
    if a.ndim >= 2:
        big = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        t = lg.tensor(big, dtype=lt).transpose(-1, -2)
        out.append(("transposed", t, a))
    big = (
        np.repeat(a[..., None], 2, axis=-1).reshape(a.shape[:-1] + (a.shape[-1] * 2,))
        if a.ndim
        else a
    )
    if a.ndim:
        t = lg.tensor(big, dtype=lt)[..., ::2]
        out.append(("strided", t, a))
    return out


# --------------------------------------------------------------------------------------
# histogram
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("shape", [(7,), (5, 6), (3, 4, 5), (1,), (2, 1, 3)])
@pytest.mark.parametrize("bins", [1, 3, 10, 64])
@pytest.mark.parametrize("rng_", [None, (-2.0, 3.0), (1.0, 1.0)])
def test_histogram_counts_and_edges_are_torch(kernel_only, npd, lt, tt, shape, bins, rng_):
    """histogram: int bins, with and without a range, over every layout."""
    a = data(shape, npd, seed=bins)
    for name, x, values in layouts(a, lt):
        got = lg.histogram(x, bins, range=rng_)
        want = torch.histogram(torch.tensor(values), bins, range=rng_)
        same(got.bin_edges, want.bin_edges)
        same(got.hist, want.hist)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("bins", [2, 5, 17, 100])
def test_histogram_values_on_edges(kernel_only, npd, lt, tt, bins):
    """Values exactly on torch's edges (and on the last edge) fall in torch's bins."""
    a = data((40,), npd, seed=bins)
    edges = torch.histogram(torch.tensor(a), bins).bin_edges.numpy()
    # every edge (the last one included), in the data once more: min and max stay put
    b = np.concatenate([a, edges, edges[-1:], edges[:1]]).astype(npd)
    got = lg.histogram(lg.tensor(b), bins)
    want = torch.histogram(torch.tensor(b), bins)
    same(got.bin_edges, want.bin_edges)
    same(got.hist, want.hist)
    assert got.hist.sum().item() == b.size
    same(got.hist, host_reference(lg.histogram, lg.tensor(b), bins).hist)
    # a range whose edges the data hits exactly
    r = (float(edges[1]), float(edges[-2]))
    got = lg.histogram(lg.tensor(b), bins, range=r)
    want = torch.histogram(torch.tensor(b), bins, range=r)
    same(got.bin_edges, want.bin_edges)
    same(got.hist, want.hist)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
def test_histogram_nan_and_inf_outside_a_range(kernel_only, npd, lt, tt):
    """NaN and infinities are skipped under a finite range."""
    a = data((30,), npd, special=True)
    got = lg.histogram(lg.tensor(a), 6, range=(-4.0, 4.0))
    want = torch.histogram(torch.tensor(a), 6, range=(-4.0, 4.0))
    same(got.hist, want.hist)
    same(got.bin_edges, want.bin_edges)
    assert got.hist.sum().item() == np.sum((a >= -4) & (a <= 4))


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_histogram_data_range_not_finite_raises_as_host(npd, lt, tt, value):
    """A data range with NaN or inf raises the host code's error."""
    a = data((9,), npd)
    a[4] = value
    with pytest.raises(RuntimeError) as got:
        lg.histogram(lg.tensor(a), 4)
    with pytest.raises(RuntimeError) as want:
        host_reference(lg.histogram, lg.tensor(a), 4)
    assert str(got.value) == str(want.value)
    assert "is not finite" in str(got.value)
    with pytest.raises(RuntimeError):
        torch.histogram(torch.tensor(a), 4)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize(
    "edges",
    [
        [-1.0, 0.0, 0.5, 2.0],
        [-3.0, -3.0, 0.0, 0.0, 4.0],  # repeated edges
        [2.0, -1.0, 0.5, 3.0, 0.0],  # not sorted: torch's search decides
        [1.0, 0.0],  # decreasing
    ],
)
def test_histogram_tensor_edges(kernel_only, npd, lt, tt, edges):
    """Tensor edges: sorted, repeated, unsorted, decreasing; strided edges."""
    a = np.concatenate([data((25,), npd), np.array(edges, npd)]).astype(npd)
    e = np.array(edges, npd)
    for name, x, values in layouts(a, lt):
        got = lg.histogram(x, lg.tensor(e, dtype=lt))
        want = torch.histogram(torch.tensor(values), torch.tensor(e))
        same(got.hist, want.hist)
        same(got.bin_edges, want.bin_edges)
    # edges that are a strided view
    e2 = np.repeat(e, 2)
    got = lg.histogram(lg.tensor(a), lg.tensor(e2, dtype=lt)[::2])
    same(got.hist, torch.histogram(torch.tensor(a), torch.tensor(e)).hist)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
def test_histogram_one_edge_has_no_bins(kernel_only, npd, lt, tt):
    """One edge: an empty histogram, as the host code gives."""
    # (torch rejects one edge; llgrad's host code gives an empty histogram: kept)
    a = data((9,), npd)
    e = lg.tensor(np.array([0.25], npd))
    got = lg.histogram(lg.tensor(a), e)
    ref = host_reference(lg.histogram, lg.tensor(a), e)
    same(got.hist, ref.hist)
    same(got.bin_edges, ref.bin_edges)
    assert tuple(got.hist.shape) == (0,)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize("bins", [4, "edges"])
def test_histogram_weight_and_density(kernel_only, npd, lt, tt, density, bins):
    """Weights and density: the host code's values exactly, torch's to rounding."""
    a = data((6, 5), npd, seed=3)
    w = np.abs(data((6, 5), npd, seed=4))
    b = lg.tensor(np.array([-3.0, -1.0, 0.0, 2.5, 4.0], npd)) if bins == "edges" else bins
    tb = torch.tensor(_np(b)) if bins == "edges" else bins
    for weighted in (False, True):
        for name, x, values in layouts(a, lt):
            wt = [t for n, t, v in layouts(w, lt) if n == name][0] if weighted else None
            got = lg.histogram(x, b, weight=wt, density=density)
            ref = host_reference(
                lg.histogram,
                lg.tensor(values),
                b,
                weight=lg.tensor(w) if weighted else None,
                density=density,
            )
            same(got.hist, ref.hist)  # the host code: bit for bit
            same(got.bin_edges, ref.bin_edges)
            want = torch.histogram(
                torch.tensor(values),
                tb,
                weight=torch.tensor(w) if weighted else None,
                density=density,
            )
            if weighted or density:
                close(got.hist, want.hist)
            else:
                same(got.hist, want.hist)
            same(got.bin_edges, want.bin_edges)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)])
@pytest.mark.parametrize("density", [False, True])
def test_histogram_empty(kernel_only, npd, lt, tt, shape, density):
    """Empty inputs: zero counts and torch's [0, 1] edges."""
    a = np.zeros(shape, npd)
    for bins in (5, lg.tensor(np.array([0.0, 1.0, 3.0], npd))):
        tb = bins if isinstance(bins, int) else torch.tensor(_np(bins))
        got = lg.histogram(lg.tensor(a), bins, density=density)
        want = torch.histogram(torch.tensor(a), tb, density=density)
        np.testing.assert_array_equal(_np(got.hist), _np(want.hist))
        same(got.bin_edges, want.bin_edges)
    got = lg.histogram(lg.tensor(a), 4, range=(2.0, 3.0))
    same(got.bin_edges, torch.histogram(torch.tensor(a), 4, range=(2.0, 3.0)).bin_edges)


def test_histogram_out_and_method():
    """`out=` and the Tensor method."""
    a = data((20,), np.float32)
    h, e = lg.empty(0), lg.empty(0)
    got = lg.histogram(lg.tensor(a), 5, out=(h, e))
    want = torch.histogram(torch.tensor(a), 5)
    same(h, want.hist)
    same(e, want.bin_edges)
    assert got.hist is h
    same(lg.tensor(a).histogram(5).hist, want.hist)


# --------------------------------------------------------------------------------------
# histogramdd
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("D", [1, 2, 3])
@pytest.mark.parametrize("bins", ["int", "list", "edges", "unsorted"])
@pytest.mark.parametrize("with_range", [False, True])
def test_histogramdd_counts_and_edges_are_torch(kernel_only, npd, lt, tt, D, bins, with_range):
    """histogramdd for D = 1..3: int, list and tensor bins, with and without a range."""
    a = data((4, 5, D), npd, seed=D)
    if bins == "int":
        b, tb = 3, 3
    elif bins == "list":
        b = tb = [2, 5, 3][:D]
    else:
        es = [np.array([-2.0, -0.5, 0.0, 1.5, 3.0][: 3 + k], npd) for k in range(D)]
        if bins == "unsorted":
            es = [e[::-1].copy() if k % 2 else np.roll(e, 1) for k, e in enumerate(es)]
        b = [lg.tensor(e) for e in es]
        tb = [torch.tensor(e) for e in es]
    rng_ = [-1.0, 2.0, -3.0, 0.5, 0.0, 0.0][: 2 * D] if with_range else None
    for name, x, values in layouts(a, lt):
        got = lg.histogramdd(x, b, range=rng_)
        want = torch.histogramdd(torch.tensor(values), tb, range=rng_)
        same(got.hist, want.hist)
        assert len(got.bin_edges) == D
        for g, w in zip(got.bin_edges, want.bin_edges):
            same(g, w)
        ref = host_reference(lg.histogramdd, lg.tensor(values), b, range=rng_)
        same(got.hist, ref.hist)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("D", [1, 2, 3])
@pytest.mark.parametrize("density", [False, True])
def test_histogramdd_weight_and_density(kernel_only, npd, lt, tt, D, density):
    """histogramdd with (strided) weights and density."""
    a = data((7, 3, D), npd, seed=10 + D)
    w = np.abs(data((7, 3), npd, seed=20))
    for weighted in (False, True):
        for name, x, values in layouts(a, lt):
            wt = lg.tensor(w).transpose(0, 1).contiguous().transpose(0, 1) if weighted else None
            got = lg.histogramdd(x, [3, 2, 4][:D], weight=wt, density=density)
            ref = host_reference(
                lg.histogramdd,
                lg.tensor(values),
                [3, 2, 4][:D],
                weight=lg.tensor(w) if weighted else None,
                density=density,
            )
            same(got.hist, ref.hist)
            want = torch.histogramdd(
                torch.tensor(values),
                [3, 2, 4][:D],
                weight=torch.tensor(w) if weighted else None,
                density=density,
            )
            if weighted or density:
                close(got.hist, want.hist)
            else:
                same(got.hist, want.hist)
            for g, e in zip(got.bin_edges, want.bin_edges):
                same(g, e)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
def test_histogramdd_values_on_edges_and_special(kernel_only, npd, lt, tt):
    """Rows on edges in every dimension; NaN and inf rows skipped."""
    a = data((30, 2), npd, seed=5)
    edges = torch.histogramdd(torch.tensor(a), [4, 6]).bin_edges
    extra = np.stack(
        [edges[0].numpy()[[0, 1, 2, 3, 4, 4, 2]], edges[1].numpy()[[6, 5, 0, 3, 1, 6, 2]]], axis=1
    )
    b = np.concatenate([a, extra]).astype(npd)
    got = lg.histogramdd(lg.tensor(b), [4, 6])
    want = torch.histogramdd(torch.tensor(b), [4, 6])
    same(got.hist, want.hist)
    assert got.hist.sum().item() == len(b)
    # NaN and inf skip their row when a range is given
    c = b.copy()
    c[0, 0], c[1, 1], c[2, 0] = np.nan, np.inf, -np.inf
    r = [-2.0, 2.0, -3.0, 3.0]
    same(
        lg.histogramdd(lg.tensor(c), [4, 6], range=r).hist,
        torch.histogramdd(torch.tensor(c), [4, 6], range=r).hist,
    )


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
def test_histogramdd_empty_and_errors(npd, lt, tt):
    """Empty inputs and the host code's errors."""
    for shape in ((0, 2), (3, 0, 2)):
        a = np.zeros(shape, npd)
        got = lg.histogramdd(lg.tensor(a), [3, 2])
        want = torch.histogramdd(torch.tensor(a), [3, 2])
        same(got.hist, want.hist)
        for g, w in zip(got.bin_edges, want.bin_edges):
            same(g, w)
    a = data((5, 2), npd)
    a[2, 1] = np.nan
    with pytest.raises(RuntimeError) as got:
        lg.histogramdd(lg.tensor(a), 3)
    with pytest.raises(RuntimeError) as want:
        host_reference(lg.histogramdd, lg.tensor(a), 3)
    assert str(got.value) == str(want.value)
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        lg.histogramdd(lg.tensor(data((5, 2), npd)), 3, range=[0.0, 1.0, 2.0, 1.0])
    with pytest.raises(RuntimeError, match="expected 4 values for range"):
        lg.histogramdd(lg.tensor(data((5, 2), npd)), 3, range=[0.0, 1.0])
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        lg.histogramdd(lg.tensor(data((5, 2), npd)), [3, 0])


# --------------------------------------------------------------------------------------
# histc
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
@pytest.mark.parametrize("shape", [(7,), (5, 6), (3, 4, 5), (0,), ()])
@pytest.mark.parametrize("bins,lo,hi", [(10, 0, 0), (4, -1.0, 2.0), (1, 0, 10), (7, 0.5, 0.5)])
def test_histc(kernel_only, npd, lt, tt, shape, bins, lo, hi):
    """histc over layouts, given or data ranges, equal min and max."""
    a = data(shape, npd, seed=bins)
    for name, x, values in layouts(a, lt):
        got = lg.histc(x, bins, lo, hi)
        same(got, torch.histc(torch.tensor(values), bins, lo, hi))


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
def test_histc_edges_special_and_errors(npd, lt, tt):
    """histc on edges, with NaN and inf, and its errors."""
    a = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.0, -0.0, np.nan, np.inf, -np.inf, 2.0], npd)
    same(lg.histc(lg.tensor(a), 4, 0, 1), torch.histc(torch.tensor(a), 4, 0, 1))
    same(
        lg.histc(lg.tensor(np.full(3, 2.0, npd)), 4),
        torch.histc(torch.tensor(np.full(3, 2.0, npd)), 4),
    )
    for bad in (np.nan, np.inf):
        b = data((6,), npd)
        b[3] = bad
        with pytest.raises(RuntimeError) as got:
            lg.histc(lg.tensor(b), 4)
        with pytest.raises(RuntimeError) as want:
            host_reference(lg.histc, lg.tensor(b), 4)
        assert str(got.value) == str(want.value)
    with pytest.raises(RuntimeError, match="max must be larger"):
        lg.histc(lg.tensor(a), 4, 2, 1)


def test_histc_bfloat16_matches_host():
    """bfloat16 histc (kernel) equals the host code."""
    a = data((5, 6), np.float32)
    x = lg.tensor(a).to(lg.bfloat16)
    same(lg.histc(x, 7).float(), host_reference(lg.histc, x, 7).float())
    same(lg.histc(x.t(), 7, -1, 1).float(), host_reference(lg.histc, x.t(), 7, -1, 1).float())


# --------------------------------------------------------------------------------------
# bincount
# --------------------------------------------------------------------------------------

INTS = [
    (np.uint8, lg.uint8, torch.uint8),
    (np.int8, lg.int8, torch.int8),
    (np.int16, lg.int16, torch.int16),
    (np.int32, lg.int32, torch.int32),
    (np.int64, lg.int64, torch.int64),
]


@pytest.mark.parametrize("npi,li,ti", INTS)
@pytest.mark.parametrize("minlength", [0, 3, 20])
@pytest.mark.parametrize("n", [0, 1, 10, 100])
def test_bincount(kernel_only, npi, li, ti, minlength, n):
    """bincount: every integer dtype, minlength, strided input, weights."""
    a = np.random.default_rng(n).integers(0, 12, n).astype(npi)
    x = lg.tensor(a, dtype=li)
    same(lg.bincount(x, minlength=minlength), torch.bincount(torch.tensor(a), minlength=minlength))
    if n:
        s = lg.tensor(np.repeat(a, 2), dtype=li)[::2]  # a strided view
        same(
            lg.bincount(s, minlength=minlength),
            torch.bincount(torch.tensor(a), minlength=minlength),
        )
    for wnp, wl in ((np.float32, lg.float32), (np.float64, lg.float64), (np.int32, lg.int32)):
        w = (np.random.default_rng(1).standard_normal(n) * 4).astype(wnp)
        got = lg.bincount(x, lg.tensor(w, dtype=wl), minlength=minlength)
        ref = host_reference(lg.bincount, x, lg.tensor(w, dtype=wl), minlength=minlength)
        same(got, ref)
        want = torch.bincount(torch.tensor(a), torch.tensor(w), minlength=minlength)
        assert _np(got).dtype == _np(want).dtype
        if wnp is np.float32:
            close(got, want)
        else:
            same(got, want)


def test_bincount_errors():
    """bincount's errors."""
    with pytest.raises(RuntimeError, match="non-negative"):
        lg.bincount(lg.tensor(np.array([1, -1, 3], np.int64)))
    with pytest.raises(RuntimeError, match="non-negative"):
        lg.bincount(lg.tensor(np.array([-5], np.int8)), lg.tensor([1.0]))
    with pytest.raises(RuntimeError, match="integral"):
        lg.bincount(lg.tensor([1.0]))
    with pytest.raises(RuntimeError, match="minlength"):
        lg.bincount(lg.tensor([1]), minlength=-1)


# --------------------------------------------------------------------------------------
# mode (its kernel path)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,dim", [((5, 5, 5), -1), ((5, 5, 5), 0), ((4, 7), 1), ((9,), 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mode(shape, dim, keepdim):
    """mode's kernel path against torch."""
    a = np.random.default_rng(0).integers(0, 4, shape).astype(np.float32)
    got = lg.mode(lg.tensor(a), dim, keepdim)
    want = torch.mode(torch.tensor(a), dim, keepdim)
    same(got.values, want.values)
    same(got.indices, want.indices)
    got = lg.tensor(a).mode(dim, keepdim=keepdim)
    same(got.values, want.values)
    with pytest.raises(IndexError):
        lg.mode(lg.tensor(a), 5)


@pytest.mark.parametrize("npd,lt,tt", FLOATS)
def test_host_path_edges_are_torch_too(npd, lt, tt):
    """The host code's equal-width edges are torch's too."""
    # a Parameter takes the host code; its equal-width edges come from the same kernel code
    a = data((50,), npd, seed=7)
    edges = torch.histogram(torch.tensor(a), 13).bin_edges.numpy()
    b = np.concatenate([a, edges]).astype(npd)
    p = lg.nn.Parameter(lg.tensor(b))
    got = lg.histogram(p, 13)
    want = torch.histogram(torch.tensor(b), 13)
    same(got.bin_edges, want.bin_edges)
    same(got.hist, want.hist)
    got = lg.histogramdd(lg.nn.Parameter(lg.tensor(b.reshape(-1, 2))), [5, 7])
    want = torch.histogramdd(torch.tensor(b.reshape(-1, 2)), [5, 7])
    same(got.hist, want.hist)
    for g, w in zip(got.bin_edges, want.bin_edges):
        same(g, w)


def test_many_bins_and_large_values():
    """Accumulators larger than the kept scratch."""
    # accumulators above the kept per-thread scratch size
    a = data((3000,), np.float32, seed=9)
    same(lg.histc(lg.tensor(a), 70000), torch.histc(torch.tensor(a), 70000))
    got = lg.histogram(lg.tensor(a), 70000)
    want = torch.histogram(torch.tensor(a), 70000)
    same(got.hist, want.hist)
    same(got.bin_edges, want.bin_edges)
    same(lg.histc(lg.tensor(a), 5), torch.histc(torch.tensor(a), 5))  # (small again)
    i = np.array([3, 99999, 7, 3], np.int64)
    w = np.array([0.5, 1.25, -2.0, 4.0], np.float32)
    same(lg.bincount(lg.tensor(i)), torch.bincount(torch.tensor(i)))
    same(
        lg.bincount(lg.tensor(i[:1]), minlength=100000),
        torch.bincount(torch.tensor(i[:1]), minlength=100000),
    )
    got = lg.bincount(lg.tensor(i), lg.tensor(w))
    same(got, host_reference(lg.bincount, lg.tensor(i), lg.tensor(w)))
    close(got, torch.bincount(torch.tensor(i), torch.tensor(w)))
