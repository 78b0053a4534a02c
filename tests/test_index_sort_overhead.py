"""The kernel fast paths of the index, sort and shape-copy functions (`eager.selection`,
`codegen.selection`, and the replayed copies of `functions.layout`): sort, searchsorted,
bucketize, masked_scatter, index_put, unravel_index, unique, unique_consecutive,
repeat_interleave and the split copies, against the general paths they skip (forced by
patching `host_plain` off) bit for bit, and against torch; with non-contiguous and empty
inputs, ties, NaN, duplicates, and the errors a bad index must still raise."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.eager import selection as eager_selection
from llgrad.functions import selection, sorting

torch = pytest.importorskip("torch")

rng = np.random.default_rng(11)
_MODULES = (selection, sorting)

FLOATS = [lg.float32, lg.float64, lg.float16, lg.bfloat16]
DTYPES = FLOATS + [lg.int64, lg.int32, lg.int16, lg.int8, lg.uint8, lg.bool]


def _general(monkeypatch):
    for m in _MODULES:
        monkeypatch.setattr(m, "host_plain", lambda *a: False)
    monkeypatch.setattr(sorting, "_plain_order", lambda x: False)


def _results(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def same(a, b):
    """Results equal bit for bit (raw memory, dtype, shape)."""
    a, b = _results(a), _results(b)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape)
        xa, ya = x.detach()._numpy_view(), y.detach()._numpy_view()
        if xa.dtype.kind in "fc":
            xa, ya = xa.view(f"u{xa.itemsize}"), ya.view(f"u{ya.itemsize}")
        assert np.array_equal(xa, ya), (xa, ya)


def fast_and_general(monkeypatch, fn):
    """fn() on the fast path, then on the general path."""
    fast = fn()
    with monkeypatch.context() as m:
        _general(m)
        slow = fn()
    return fast, slow


def errors_alike(monkeypatch, fn):
    """fn() raises the same error type and message on both paths."""
    with pytest.raises(Exception) as fast:
        fn()
    with monkeypatch.context() as m:
        _general(m)
        with pytest.raises(Exception) as slow:
            fn()
    assert type(fast.value) is type(slow.value)
    assert str(fast.value) == str(slow.value)
    return fast.value


def data(shape, dtype, nan=False, ties=True):
    if dtype.is_floating_point:
        a = rng.standard_normal(shape)
        if ties:
            a = np.round(a * 2) / 2
        if nan and a.size > 2:
            a.reshape(-1)[[1, a.size - 1]] = np.nan
        if a.size > 3:
            a.reshape(-1)[2] = -0.0
            a.reshape(-1)[0] = 0.0
        return lg.tensor(a, dtype=lg.float64).to(dtype)
    if dtype is lg.bool:
        return lg.tensor(rng.integers(0, 2, shape).astype(bool))
    lo = 0 if dtype is lg.uint8 else -3
    return lg.tensor(rng.integers(lo, 4, shape), dtype=lg.int64).to(dtype)


def counted(monkeypatch, name):
    """Count the calls of `eager_selection.<name>` (the kernel path is taken)."""
    calls = []
    real = getattr(eager_selection, name)

    def spy(*a, **k):
        out = real(*a, **k)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(eager_selection, name, spy)
    return calls


# -- sort ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (4, 9), (3, 1, 5), (2, 3, 4), (0, 3), (5, 0), (3, 32), (2, 33), (2, 70)])
def test_sort_kernel_equals_general(monkeypatch, dtype, shape):
    x = data(shape, dtype, nan=True)
    for t in (x, x.transpose(0, -1) if x.ndim > 1 else x.flip(0)):
        for d in range(-t.ndim, t.ndim):
            for desc in (False, True):
                same(*fast_and_general(monkeypatch, lambda: lg.sort(t, d, descending=desc)))


def test_sort_kernel_is_used_and_matches_torch_stable(monkeypatch):
    calls = counted(monkeypatch, "sort_rows")
    a = np.round(rng.standard_normal((6, 31)) * 2).astype(np.float32)
    a[2, [0, 5, 9]] = np.nan
    for desc in (False, True):
        got = lg.sort(lg.tensor(a), dim=1, descending=desc, stable=True)
        want = torch.sort(torch.tensor(a), dim=1, descending=desc, stable=True)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    assert calls == [True, True]
    # a layout whose other dimensions do not collapse takes the host path
    x = lg.tensor(rng.standard_normal((4, 5, 6)).astype(np.float32)).permute(2, 1, 0)
    same(lg.sort(x, -1), torch_sort_as_lg(x, -1))
    assert calls[-1] is False
    # and so does a row longer than the kernel sorts
    x = lg.tensor(rng.standard_normal((3, eager_selection.SORT_MAX_ROW + 1)).astype(np.float32))
    same(lg.sort(x, 1), torch_sort_as_lg(x, 1))
    assert len(calls) == 3


def torch_sort_as_lg(x, d):
    want = torch.sort(torch.tensor(x.numpy()), dim=d, stable=True)
    return lg.tensor(want.values.numpy()), lg.tensor(want.indices.numpy())


# -- searchsorted / bucketize ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.float16, lg.bfloat16, lg.int64,
                                   lg.int32, lg.uint8])
def test_searchsorted_kernel_equals_general(monkeypatch, dtype):
    seq1 = lg.sort(data((9,), dtype, ties=True)).values
    seq2 = lg.sort(data((3, 6), dtype, ties=True), 1).values
    vals = data((3, 5), dtype, nan=True)
    for seq, v in ((seq1, vals), (seq1, vals.t()), (seq2, vals), (seq2, vals[:, ::2]),
                   (seq1, vals[0, 0]), (seq1, vals[:0]), (seq1[:0], vals), (seq2[:, :0], vals)):
        for right in (False, True):
            for out_int32 in (False, True):
                same(*fast_and_general(monkeypatch, lambda: lg.searchsorted(
                    seq, v, right=right, out_int32=out_int32)))
        if seq.ndim == 1:
            same(*fast_and_general(monkeypatch, lambda: lg.bucketize(v, seq, right=True)))
            same(*fast_and_general(monkeypatch, lambda: lg.bucketize(v, seq)))


def test_searchsorted_sorter_and_nan(monkeypatch):
    calls = counted(monkeypatch, "search")
    a = rng.standard_normal(10).astype(np.float32)
    a[[3, 7]] = np.nan
    v = np.concatenate([rng.standard_normal(6), [np.nan, np.inf, -np.inf]]).astype(np.float32)
    sorter = np.argsort(a, kind="stable")
    for side in ("left", "right"):
        got = lg.searchsorted(lg.tensor(a), lg.tensor(v), side=side, sorter=lg.tensor(sorter))
        want = torch.searchsorted(torch.tensor(a), torch.tensor(v), side=side,
                                  sorter=torch.tensor(sorter))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        s32 = lg.tensor(sorter.astype(np.int32))
        same(*fast_and_general(monkeypatch, lambda: lg.searchsorted(
            lg.tensor(a), lg.tensor(v), side=side, sorter=s32)))
    assert calls[:2] == [True, True]
    # an unsorted row: the search ends where torch's does
    u = lg.tensor(rng.standard_normal(8).astype(np.float32))
    q = lg.tensor(rng.standard_normal(20).astype(np.float32))
    np.testing.assert_array_equal(
        lg.searchsorted(u, q).numpy(), torch.searchsorted(torch.tensor(u.numpy()),
                                                          torch.tensor(q.numpy())).numpy())


def test_searchsorted_bad_sorter_and_arguments(monkeypatch):
    seq = lg.tensor([1.0, 2.0, 3.0])
    v = lg.tensor([2.5])
    for bad in ([0, 1, 3], [-4, 0, 1], [0, 1, 2 ** 40]):
        errors_alike(monkeypatch, lambda: lg.searchsorted(seq, v, sorter=lg.tensor(bad)))
    # (a negative sorter entry counts from the end, as the general path's gather reads it)
    same(*fast_and_general(monkeypatch, lambda: lg.searchsorted(
        seq, v, sorter=lg.tensor([-3, 1, 2]))))
    errors_alike(monkeypatch, lambda: lg.searchsorted(seq, v, side="middle"))
    errors_alike(monkeypatch, lambda: lg.searchsorted(lg.ones(2, 3), lg.ones(3, 3)))
    errors_alike(monkeypatch, lambda: lg.bucketize(v, lg.ones(2, 2)))
    # mixed dtypes take the host search (the kernel declines them)
    same(*fast_and_general(monkeypatch, lambda: lg.searchsorted(
        seq, lg.tensor([1, 2, 4]), right=True)))


# -- masked_scatter ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + [lg.complex64])
def test_masked_scatter_kernel_equals_general(monkeypatch, dtype):
    calls = counted(monkeypatch, "masked_scatter")
    for xs, ms in (((4, 5), (4, 5)), ((5,), (4, 5)), ((4, 1), (1, 5)), ((4, 5), (5,)),
                   ((0, 3), (3,)), ((2, 3, 4), (3, 1))):
        x = data(xs, lg.float32).to(dtype)
        m = lg.tensor(rng.integers(0, 2, ms).astype(bool))
        src = data((30,), lg.float32).to(dtype)
        same(*fast_and_general(monkeypatch, lambda: lg.masked_scatter(x, m, src)))
        src2 = data((6, 5), lg.float32).to(dtype).t()  # (non-contiguous source)
        same(*fast_and_general(monkeypatch, lambda: lg.masked_scatter(x, m, src2)))
        if x.ndim == 2 and x.shape[1] > 1:
            xt = data(xs[::-1], lg.float32).to(dtype).t()
            same(*fast_and_general(monkeypatch, lambda: lg.masked_scatter(xt, m, src)))
    assert calls and all(calls)


def test_masked_scatter_against_torch_and_errors(monkeypatch):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    m = rng.integers(0, 2, (3, 4)).astype(bool)
    src = rng.standard_normal(12).astype(np.float32)
    got = lg.masked_scatter(lg.tensor(x), lg.tensor(m), lg.tensor(src))
    want = torch.tensor(x).masked_scatter(torch.tensor(m), torch.tensor(src))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    full = lg.ones(3, 4, dtype=lg.bool)
    e = errors_alike(monkeypatch, lambda: lg.masked_scatter(lg.tensor(x), full, lg.ones(11)))
    assert "11 < 12" in str(e)
    errors_alike(monkeypatch, lambda: lg.masked_scatter(lg.tensor(x), lg.ones(5, dtype=lg.bool),
                                                        lg.ones(20)))
    errors_alike(monkeypatch, lambda: lg.masked_scatter(lg.tensor(x), full, lg.ones(12).double()))
    # in place: the result lands in the tensor
    y = lg.tensor(x)
    y.masked_scatter_(lg.tensor(m), lg.tensor(src))
    np.testing.assert_array_equal(y.numpy(), want.numpy())


# -- index_put -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.float16, lg.bfloat16, lg.int64,
                                   lg.int32, lg.uint8, lg.bool])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_kernel_equals_general(monkeypatch, dtype, accumulate):
    calls = counted(monkeypatch, "row_put")
    x = data((5, 4), dtype)
    mask1 = lg.tensor(np.array([True, False, True, True, False]))
    mask2 = lg.tensor(rng.integers(0, 2, (5, 4)).astype(bool))
    idx = lg.tensor([4, -1, 0, 2, 4, 0])  # (duplicates, negatives)
    cases = [
        ((mask1,), data((4,), dtype)),
        ((mask1,), data((3, 4), dtype)),
        ((mask1,), data((3, 1), dtype)),
        ((mask1,), data((1, 1, 4), dtype)),
        ((mask1,), data((4, 3), dtype).t()),
        ((mask2,), data((1,), dtype)),
        ((mask2,), data((int(mask2.sum()),), dtype)),
        ((idx,), data((4,), dtype)),
        ((idx,), data((6, 4), dtype)),
        ((idx.to(lg.int32),), data((6, 1), dtype)),
        ((idx[::2],), data((4, 3), dtype).t()),
        ((idx.reshape(2, 3),), data((2, 3, 4), dtype)),
        ((lg.tensor(3),), data((4,), dtype)),
        ((idx[:0],), data((4,), dtype)),
    ]
    for index, values in cases:
        for target in (x, x.t().contiguous().t()):
            same(*fast_and_general(monkeypatch, lambda: lg.index_put(
                target, index, values, accumulate=accumulate)))
    if not (accumulate and dtype is lg.bool):
        assert sum(calls) >= len(cases)


def test_index_put_against_torch_and_errors(monkeypatch):
    x = rng.standard_normal((6, 3)).astype(np.float32)
    i = np.array([0, 5, -1, 2, 0])
    v = rng.standard_normal((5, 3)).astype(np.float32)
    got = lg.index_put(lg.tensor(x), (lg.tensor(i),), lg.tensor(v), accumulate=True)
    want = torch.tensor(x).index_put((torch.tensor(i),), torch.tensor(v), accumulate=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    m = np.array([True, False, True, False, False, True])
    got = lg.index_put(lg.tensor(x), (lg.tensor(m),), lg.tensor(v[:3]))
    want = torch.tensor(x).index_put((torch.tensor(m),), torch.tensor(v[:3]))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    for bad in ([0, 6], [-7], [2 ** 40]):
        for acc in (False, True):
            e = errors_alike(monkeypatch, lambda: lg.index_put(
                lg.tensor(x), (lg.tensor(bad),), lg.tensor(v[:1]), accumulate=acc))
            assert isinstance(e, IndexError)
    # values that do not fit the selection: the general path's error
    errors_alike(monkeypatch, lambda: lg.index_put(lg.tensor(x), (lg.tensor(m),),
                                                   lg.tensor(v[:2])))
    errors_alike(monkeypatch, lambda: lg.index_put(lg.tensor(x), (lg.tensor(i),),
                                                   lg.tensor(v[:, :2])))
    errors_alike(monkeypatch, lambda: lg.index_put(lg.zeros(0, 3), (lg.tensor([0]),),
                                                   lg.ones(3)))
    # in place, and the input left alone out of place
    y = lg.tensor(x)
    out = lg.index_put(y, (lg.tensor(i),), lg.tensor(v), accumulate=True)
    np.testing.assert_array_equal(y.numpy(), x)
    y.index_put_((lg.tensor(i),), lg.tensor(v), accumulate=True)
    same(y, out)


# -- unravel_index --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [lg.int64, lg.int32, lg.int16, lg.int8, lg.uint8])
def test_unravel_index_kernel_equals_general(monkeypatch, dtype):
    calls = counted(monkeypatch, "unravel")
    for shape in ((2, 4), (3, 1, 5), (7,), (2, 3, 4, 5)):
        n = int(np.prod(shape))
        lo = 0 if dtype is lg.uint8 else -min(n, 100)
        idx = lg.tensor(rng.integers(lo, min(n, 100), (3, 4)), dtype=lg.int64).to(dtype)
        for t in (idx, idx.t(), idx[0, 0]):
            same(*fast_and_general(monkeypatch, lambda: lg.unravel_index(t, shape)))
            want = torch.unravel_index(torch.tensor(t.numpy()), shape)
            for g, w in zip(lg.unravel_index(t, shape), want):
                np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert calls and all(calls)
    same(*fast_and_general(monkeypatch, lambda: lg.unravel_index(lg.tensor([0, -1]), ())))


def test_unravel_index_errors(monkeypatch):
    for idx, shape in (([0, 8], (2, 4)), ([-9, 0], (2, 4)), ([1], (2, 0)), ([3], ())):
        e = errors_alike(monkeypatch, lambda: lg.unravel_index(lg.tensor(idx), shape))
        assert isinstance(e, ValueError)
    same(*fast_and_general(monkeypatch, lambda: lg.unravel_index(
        lg.tensor(np.zeros(0, np.int64)), (2, 3))))


# -- unique / unique_consecutive --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("consecutive", [False, True])
def test_unique_kernel_equals_general(monkeypatch, dtype, consecutive):
    calls = counted(monkeypatch, "unique_slices")
    fn = lg.unique_consecutive if consecutive else lg.unique
    base = data((4, 6, 3), dtype, nan=True)
    x = lg.cat([base, base[:, :2], base[:, 1:3]], 1)  # (repeated slices)
    for t in (x, x.transpose(0, 2), x[:, ::2]):
        dims = list(range(-t.ndim, t.ndim)) + ([None] if consecutive else [])
        for dim in dims:
            for inv in (False, True):
                for cnt in (False, True):
                    same(*fast_and_general(monkeypatch, lambda: fn(
                        t, return_inverse=inv, return_counts=cnt, dim=dim)))
    flat = data((30,), dtype)
    same(*fast_and_general(monkeypatch, lambda: fn(flat, return_inverse=True,
                                                   return_counts=True, dim=0)))
    if consecutive:
        same(*fast_and_general(monkeypatch, lambda: fn(flat.reshape(5, 6).t(),
                                                       return_inverse=True, return_counts=True)))
    assert any(calls)


def test_unique_against_torch_and_edges(monkeypatch):
    a = rng.integers(0, 3, (6, 4)).astype(np.float32)
    a[[1, 4]] = a[0]
    for dim in (0, 1):
        got = lg.unique(lg.tensor(a), return_inverse=True, return_counts=True, dim=dim)
        want = torch.unique(torch.tensor(a), return_inverse=True, return_counts=True, dim=dim)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
        got = lg.unique_consecutive(lg.tensor(a), return_inverse=True, return_counts=True,
                                    dim=dim)
        want = torch.unique_consecutive(torch.tensor(a), return_inverse=True,
                                        return_counts=True, dim=dim)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    # a long row: the merge sort's several passes
    big = lg.tensor(rng.integers(0, 40, (3, 300)).astype(np.int64))
    same(*fast_and_general(monkeypatch, lambda: lg.unique(big, return_inverse=True,
                                                          return_counts=True, dim=1)))
    # empty inputs and bad dims take the general path and its errors
    same(*fast_and_general(monkeypatch, lambda: lg.unique(lg.zeros(2, 0), dim=1,
                                                          return_counts=True)))
    errors_alike(monkeypatch, lambda: lg.unique(lg.zeros(0, 2), dim=1))
    errors_alike(monkeypatch, lambda: lg.unique(lg.zeros(3, 2), dim=2))
    errors_alike(monkeypatch, lambda: lg.unique_consecutive(lg.tensor(1.0), dim=0))


# -- repeat_interleave and the split copies (replayed copies) -----------------------------------


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.bfloat16, lg.int64, lg.bool])
def test_repeat_interleave_int(dtype):
    x = data((2, 3, 4), dtype)
    for t in (x, x.transpose(0, 2), x[:, ::2], x[0, 0, 0], x[:, :0]):
        for dim in [None] + list(range(-max(t.ndim, 1), max(t.ndim, 1))):
            for r in (0, 1, 2, 3):
                for _ in range(2):  # (the second call replays the first one's copy)
                    got = lg.repeat_interleave(t, r, dim)
                    ref = torch.tensor(t.float().numpy())
                    if t.ndim == 0 and dim is not None:  # (llgrad reads a 0-d input as 1-d)
                        ref = ref.reshape(1)
                    want = torch.repeat_interleave(ref, r, dim)
                    assert tuple(got.shape) == tuple(want.shape)
                    np.testing.assert_array_equal(got.float().numpy(), want.numpy())
                    assert got.dtype == t.dtype and (got.is_contiguous() or not got.numel())
                    assert got._storage is not t._storage
    with pytest.raises(RuntimeError, match="negative"):
        lg.repeat_interleave(x, -1)
    with pytest.raises(IndexError):
        lg.repeat_interleave(x, 2, 3)
    # autograd records: the general path, with its node
    g = lg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    out = lg.repeat_interleave(g, 2, 1)
    assert out.grad_fn is not None
    out.sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), np.full((2, 3), 2.0))


def test_split_copies_replayed():
    x = lg.tensor(rng.standard_normal((5, 5, 5)).astype(np.float32))
    for t in (x, x.transpose(0, 2)):
        for _ in range(2):
            got = lg.split_with_sizes_copy(t, (1, 3, 1), 2)
            want = torch.split(torch.tensor(t.numpy()), (1, 3, 1), 2)
            assert isinstance(got, tuple) and len(got) == 3
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g.numpy(), w.numpy())
                assert g.is_contiguous() and g._storage is not t._storage
            for g, w in zip(lg.unbind_copy(t, 1), torch.unbind(torch.tensor(t.numpy()), 1)):
                np.testing.assert_array_equal(g.numpy(), w.numpy())
    with pytest.raises(RuntimeError):
        lg.split_with_sizes_copy(x, (1, 3), 2)


# -- one_hot (the kernel `nn.functional.one_hot`'s plain case can call) ---------------------------


def test_one_hot_kernel():
    for shape in ((5,), (3, 4), (2, 0), (0,)):
        a = rng.integers(0, 6, shape)
        x = lg.tensor(a, dtype=lg.int64)
        for t in (x, x.t() if x.ndim == 2 else x):
            for classes in (-1, 6, 9):
                out, lo, hi = eager_selection.one_hot(t, classes)
                if not t.numel() and classes == -1:  # (torch refuses to infer from no values)
                    with pytest.raises(RuntimeError, match="Can not infer"):
                        lg.nn.functional.one_hot(t, classes)
                    continue
                same(out, lg.nn.functional.one_hot(t, classes))
                ref = torch.nn.functional.one_hot(torch.tensor(t.numpy()), classes)
                np.testing.assert_array_equal(out.numpy(), ref.numpy())
                if t.numel():
                    assert (lo, hi) == (int(t.numpy().min()), int(t.numpy().max()))
    # values outside [0, classes): no result, the range for the caller's error
    x = lg.tensor([[3, -2], [7, 1]])
    assert eager_selection.one_hot(x, 8)[0] is None
    assert eager_selection.one_hot(x, 8)[1:] == (-2, 7)
    assert eager_selection.one_hot(x, 7)[0] is None
    assert eager_selection.one_hot(x, -1)[0] is None
    assert eager_selection.one_hot(lg.tensor([2, 6]), 6)[0] is None
    same(eager_selection.one_hot(lg.tensor([2, 5]), 6)[0], lg.nn.functional.one_hot(
        lg.tensor([2, 5]), 6))
