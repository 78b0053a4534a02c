"""`lg.utils.data` against `torch.utils.data`: collation, batching, lengths, samplers,
random_split's lengths, errors; shuffling is checked for being a reproducible permutation
(the random streams differ from torch's by design)."""
from __future__ import annotations

import collections
import math

import numpy as np
import pytest

import llgrad as lg
from llgrad.utils import data as D
from conftest import needs_torch, torch


def _plain(x):
    """Nested tensors -> nested lists/values tagged with their dtype, comparable across."""
    if hasattr(x, "numpy") and hasattr(x, "dtype"):
        return ("T", str(x.dtype).split(".")[-1], np.asarray(x.detach().numpy()).tolist())
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__,) + tuple(_plain(v) for v in x)
    if isinstance(x, (list, tuple)):
        return [type(x).__name__] + [_plain(v) for v in x]
    return x


Pt = collections.namedtuple("Pt", "x y")


def _batches(lib):
    return [
        [(lib.ones(2), 1), (lib.zeros(2), 2)],
        [{"a": 1.5, "b": np.array([1, 2])}, {"a": 2.5, "b": np.array([3, 4])}],
        [[1, 2], [3, 4]], [True, False], ["x", "y"],
        [np.float32(1.5), np.float32(2.0)], [np.int64(3), np.int64(4)],
        [Pt(1, 2.0), Pt(3, 4.0)], [lib.tensor(1), lib.tensor(2)],
        [np.array([[1.0]], dtype=np.float32), np.array([[2.0]], dtype=np.float32)],
    ]


@needs_torch
@pytest.mark.parametrize("k", range(10))
def test_default_collate_matches_torch(k):
    got = D.default_collate(_batches(lg)[k])
    want = torch.utils.data.default_collate(_batches(torch)[k])
    assert _plain(got) == _plain(want)


@needs_torch
@pytest.mark.parametrize("value", [np.array([1, 2]), (np.array([1.0]), 3), 1.5,
                                   {"k": np.float64(2.0)}, [np.int32(1)], "text"])
def test_default_convert_matches_torch(value):
    assert _plain(D.default_convert(value)) == _plain(torch.utils.data.default_convert(value))


def test_collate_errors():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        D.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found <class 'NoneType'>"):
        D.default_collate([None])


def _loader_outputs(lib, **kw):
    ds = lib.utils.data.TensorDataset(lib.arange(14.0).reshape(7, 2), lib.arange(7))
    loader = lib.utils.data.DataLoader(ds, **kw)
    return len(loader), [_plain(b) for b in loader]


@needs_torch
@pytest.mark.parametrize("kw", [dict(), dict(batch_size=3), dict(batch_size=3, drop_last=True),
                                dict(batch_size=None), dict(batch_size=7),
                                dict(batch_size=2, num_workers=2),
                                dict(batch_size=4, collate_fn=lambda b: len(b))])
def test_sequential_loaders_match_torch(kw):
    assert _loader_outputs(lg, **kw) == _loader_outputs(torch, **kw)


@needs_torch
def test_batch_sampler_and_sampler_options_match_torch():
    for kw in (dict(batch_sampler=[[0, 5], [6, 1, 2]]),
               dict(sampler=[6, 5, 4], batch_size=2),
               dict(batch_sampler=lambda lib: lib.utils.data.BatchSampler(
                   lib.utils.data.SequentialSampler(range(7)), 3, False))):
        resolved = {lib: {k: (v(lib) if callable(v) else v) for k, v in kw.items()}
                    for lib in (lg, torch)}
        assert _loader_outputs(lg, **resolved[lg]) == _loader_outputs(torch, **resolved[torch])


class Squares(D.Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": float(i), "y": i * i}


class Stream(D.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = D.get_worker_info()
        k, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(k, self.n, step))

    def __len__(self):
        return self.n


def test_map_and_iterable_datasets():
    batches = list(D.DataLoader(Squares(), batch_size=2))
    assert [b["y"].tolist() for b in batches] == [[0, 1], [4, 9], [16]]
    assert batches[0]["x"].dtype is lg.float64
    assert [b.tolist() for b in D.DataLoader(Stream(5), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert len(D.DataLoader(Stream(5), batch_size=2)) == 3
    assert len(D.DataLoader(Stream(5), batch_size=2, drop_last=True)) == 2
    # num_workers > 0 runs in-process as worker 0 of 1: every sample exactly once
    seen = []
    loader = D.DataLoader(Stream(6), batch_size=4, num_workers=3,
                          worker_init_fn=lambda i: seen.append((i, D.get_worker_info().id)))
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5]]
    assert seen == [(0, 0)] and D.get_worker_info() is None
    chained = D.DataLoader(Stream(2) + Stream(3), batch_size=None)
    assert [int(x) for x in chained] == [0, 1, 0, 1, 2]


def test_subset_concat_and_random_split():
    ds = D.TensorDataset(lg.arange(10))
    sub = D.Subset(ds, [9, 3, 5])
    assert [int(sub[i][0]) for i in range(3)] == [9, 3, 5] and len(sub) == 3
    cat = ds + D.TensorDataset(lg.arange(100, 103))
    assert len(cat) == 13 and int(cat[11][0]) == 101 and int(cat[-1][0]) == 102
    assert cat.cumulative_sizes == [10, 13]
    parts = D.random_split(ds, [0.5, 0.3, 0.2], generator=lg.Generator().manual_seed(3))
    assert [len(p) for p in parts] == [5, 3, 2]
    assert sorted(i for p in parts for i in p.indices) == list(range(10))
    again = D.random_split(ds, [5, 3, 2], generator=lg.Generator().manual_seed(3))
    assert [p.indices for p in again] == [p.indices for p in parts]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        D.random_split(ds, [3, 3])
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        D.TensorDataset(lg.ones(3), lg.ones(4))


@needs_torch
@pytest.mark.parametrize("n,fracs", [(10, [0.5, 0.3, 0.2]), (7, [0.3, 0.3, 0.4]),
                                     (11, [0.25, 0.25, 0.25, 0.25]), (3, [0.1, 0.9])])
def test_random_split_lengths_match_torch(n, fracs):
    ours = [len(s) for s in D.random_split(range(n), fracs)]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = [len(s) for s in torch.utils.data.random_split(range(n), fracs)]
    assert ours == theirs


def test_shuffling_is_a_reproducible_permutation():
    ds = D.TensorDataset(lg.arange(50))

    def order(**kw):
        return [int(v) for (b,) in D.DataLoader(ds, batch_size=8, shuffle=True, **kw)
                for v in b]
    a = order(generator=lg.Generator().manual_seed(5))
    b = order(generator=lg.Generator().manual_seed(5))
    c = order(generator=lg.Generator().manual_seed(6))
    assert a == b and a != c and sorted(a) == list(range(50)) and a != list(range(50))
    lg.manual_seed(1)
    d = order()
    e = order()                                   # a new order every epoch
    lg.manual_seed(1)
    assert order() == d and d != e


def test_samplers():
    rs = D.RandomSampler(range(10), replacement=True, num_samples=70,
                         generator=lg.Generator().manual_seed(0))
    draws = list(rs)
    assert len(draws) == len(rs) == 70 and set(draws) <= set(range(10))
    assert len(set(draws)) > 5
    more = list(D.RandomSampler(range(4), num_samples=10))
    assert len(more) == 10 and sorted(more[:4]) == [0, 1, 2, 3]
    srs = D.SubsetRandomSampler([3, 7, 9])
    assert sorted(srs) == [3, 7, 9] and len(srs) == 3
    bs = D.BatchSampler(range(7), 3, drop_last=True)
    assert list(bs) == [[0, 1, 2], [3, 4, 5]] and len(bs) == 2
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        D.RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        D.BatchSampler(range(3), 0, False)


def test_loader_argument_errors():
    ds = D.TensorDataset(lg.arange(4))
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        D.DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        D.DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        D.DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        D.DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        D.DataLoader(ds, num_workers=-1)


def test_loader_feeds_a_training_loop():
    lg.manual_seed(0)
    x = lg.linspace(-1, 1, 64).reshape(64, 1)
    ds = D.TensorDataset(x, 3 * x + 0.5)
    model = lg.nn.Linear(1, 1)
    opt = lg.optim.SGD(model.parameters(), lr=0.2)
    for _ in range(30):
        for xb, yb in D.DataLoader(ds, batch_size=16, shuffle=True):
            opt.zero_grad()
            lg.nn.functional.mse_loss(model(xb), yb).backward()
            opt.step()
    assert math.isclose(model.weight.item(), 3.0, rel_tol=1e-2)
    assert math.isclose(model.bias.item(), 0.5, rel_tol=1e-2)
