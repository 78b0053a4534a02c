"""The layers, ops and utilities of issue 9 against PyTorch: pooling, conv1d, batch norm,
recurrent layers, attention, sorting, scans, einsum, scatter; their compiled training steps
equal eager; devices other than the CPU refuse; randperm, finfo/iinfo, threads, Timer.

Gradients of each function are also rows of `test_grad_table.py` (gradcheck,
gradgradcheck, forward mode, torch); here the modules' state, options and conventions are
compared with torch in float64.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from conftest import needs_torch, torch

RNG = np.random.default_rng(0)


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [z for y in o for z in _flat(y)]
    return [] if o is None else [o]


def _both(fn, arrays, tol=1e-12):
    """Run fn(lib, *tensors) on llgrad and torch; compare outputs and input gradients."""
    res = {}
    for lib in (lg, torch):
        xs = [lib.tensor(a, requires_grad=a.dtype == np.float64) for a in arrays]
        outs = _flat(fn(lib, *xs))
        diff = [o for o in outs if o.dtype in (lg.float64, torch.float64) and o.requires_grad]
        if diff:
            sum((o * (k + 1.5)).sum() for k, o in enumerate(diff)).backward()
        res[lib] = ([o.detach().numpy() for o in outs],
                    [x.grad.numpy() for x in xs if getattr(x, "grad", None) is not None])
    for a, b in zip(*(res[lib][0] for lib in (lg, torch))):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    for a, b in zip(*(res[lib][1] for lib in (lg, torch))):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


X4 = RNG.standard_normal((2, 3, 7, 6))
X3 = RNG.standard_normal((2, 3, 9))

POOLS = [
    ("avg_pool2d", X4, dict(kernel_size=2)),
    ("avg_pool2d", X4, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg_pool2d", X4, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                            count_include_pad=False)),
    ("avg_pool2d", X4, dict(kernel_size=(2, 3), stride=(1, 2), divisor_override=5)),
    ("avg_pool2d", X4[0], dict(kernel_size=2)),
    ("avg_pool1d", X3, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                            count_include_pad=False)),
    ("adaptive_avg_pool2d", X4, dict(output_size=(3, 2))),
    ("adaptive_avg_pool2d", X4, dict(output_size=(5, 4))),
    ("adaptive_avg_pool2d", X4, dict(output_size=(None, 3))),
    ("adaptive_avg_pool1d", X3, dict(output_size=4)),
    ("max_pool1d", X3, dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max_pool1d", X3, dict(kernel_size=2, return_indices=True)),
]


@needs_torch
@pytest.mark.parametrize("name,x,kw", POOLS, ids=lambda v: str(v)[:40])
def test_pooling_matches_torch(name, x, kw):
    _both(lambda L, a: getattr(L.nn.functional, name)(a, **kw), [x])


@needs_torch
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding="same",
                                dilation=2), dict(padding=2, dilation=2)], ids=str)
def test_conv1d_matches_torch(kw):
    w, b = RNG.standard_normal((4, 3, 3)), RNG.standard_normal(4)
    _both(lambda L, x, w, b: L.nn.functional.conv1d(x, w, b, **kw), [X3, w, b])
    _both(lambda L, x, w: L.nn.functional.conv1d(x, w, groups=3),
          [X3, RNG.standard_normal((6, 1, 2))])


@needs_torch
@pytest.mark.parametrize("cls,x", [("BatchNorm2d", X4), ("BatchNorm1d", X3),
                                   ("BatchNorm1d", X3[:, :, 0])])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_running_stats_train_and_eval(cls, x, momentum):
    ml = getattr(lg.nn, cls)(3, momentum=momentum).double()
    mt = getattr(torch.nn, cls)(3, momentum=momentum).double()
    for i in range(3):
        yl, yt = ml(lg.tensor(x * (i + 1))), mt(torch.tensor(x * (i + 1)))
        np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), atol=1e-12)
    for k, v in mt.state_dict().items():
        np.testing.assert_allclose(ml.state_dict()[k].numpy(), v.numpy(), atol=1e-12)
    ml.eval()
    mt.eval()
    np.testing.assert_allclose(ml(lg.tensor(x)).detach().numpy(),
                               mt(torch.tensor(x)).detach().numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="expected"):
        ml(lg.zeros(3))


@needs_torch
def test_batch_norm_functional_and_errors():
    rm, rv = RNG.standard_normal(3), RNG.uniform(0.5, 2, 3)
    _both(lambda L, x, w, b: L.nn.functional.batch_norm(x, L.tensor(rm), L.tensor(rv), w, b),
          [X4, RNG.standard_normal(3), RNG.standard_normal(3)], tol=1e-12)
    _both(lambda L, x: L.nn.functional.batch_norm(x, None, None, training=True), [X4])
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        lg.nn.BatchNorm1d(3)(lg.ones(1, 3))


def _copy_state(ml, mt):
    ml.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    assert list(ml.state_dict()) == list(mt.state_dict())


RNNS = [
    ("LSTM", dict(input_size=3, hidden_size=4), (5, 2, 3), None),
    ("LSTM", dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True,
                  batch_first=True), (2, 5, 3), [(4, 2, 4), (4, 2, 4)]),
    ("LSTM", dict(input_size=3, hidden_size=4, bias=False), (5, 3), None),
    ("GRU", dict(input_size=3, hidden_size=4, num_layers=2), (5, 2, 3), [(2, 2, 4)]),
    ("GRU", dict(input_size=3, hidden_size=4, bidirectional=True, batch_first=True),
     (2, 5, 3), None),
    ("RNN", dict(input_size=3, hidden_size=4, nonlinearity="relu", num_layers=2), (5, 2, 3),
     None),
    ("RNN", dict(input_size=3, hidden_size=4), (5, 3), [(1, 4)]),
    ("LSTMCell", dict(input_size=3, hidden_size=4), (2, 3), [(2, 4), (2, 4)]),
    ("GRUCell", dict(input_size=3, hidden_size=4), (2, 3), None),
    ("RNNCell", dict(input_size=3, hidden_size=4), (3,), [(4,)]),
]


@needs_torch
@pytest.mark.parametrize("name,kw,shape,hx", RNNS, ids=lambda v: str(v)[:30])
def test_recurrent_layers_match_torch(name, kw, shape, hx):
    mt = getattr(torch.nn, name)(**kw).double()
    ml = getattr(lg.nn, name)(**kw).double()
    _copy_state(ml, mt)
    arrays = [RNG.standard_normal(shape)] + [RNG.standard_normal(s) for s in hx or []]

    def run(L, x, *h):
        mod = ml if L is lg else mt
        if not h:
            return mod(x)
        return mod(x, tuple(h) if len(h) == 2 else h[0])
    _both(run, arrays)
    grads = dict(ml.named_parameters())
    mt.zero_grad()
    ml.zero_grad()
    x = RNG.standard_normal(shape)
    sum(o.sum() for o in _flat(mt(torch.tensor(x)))).backward()
    sum(o.sum() for o in _flat(ml(lg.tensor(x)))).backward()
    for k, p in mt.named_parameters():
        np.testing.assert_allclose(grads[k].grad.numpy(), p.grad.numpy(), atol=1e-12)


def test_recurrent_layer_errors():
    with pytest.raises(RuntimeError, match="input_size"):
        lg.nn.LSTM(3, 4)(lg.zeros(5, 2, 2))
    with pytest.raises(RuntimeError, match="Expected hidden"):
        lg.nn.GRU(3, 4)(lg.zeros(5, 2, 3), lg.zeros(1, 3, 4))
    with pytest.raises(ValueError, match="proj_size"):        # must be < hidden_size
        lg.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(TypeError, match="packed sequences"):
        lg.nn.LSTM(3, 4)([lg.zeros(3)])


@needs_torch
@pytest.mark.parametrize("kw,shapes,fkw,masks", [
    (dict(embed_dim=8, num_heads=2), [(5, 3, 8), (6, 3, 8), (6, 3, 8)], {}, ()),
    (dict(embed_dim=8, num_heads=4, batch_first=True), [(3, 5, 8), (3, 6, 8), (3, 6, 8)],
     dict(average_attn_weights=False), ()),
    (dict(embed_dim=8, num_heads=2, kdim=3, vdim=5), [(5, 3, 8), (6, 3, 3), (6, 3, 5)],
     dict(need_weights=False), ()),
    (dict(embed_dim=8, num_heads=2), [(5, 8), (6, 8), (6, 8)], {}, ()),
    (dict(embed_dim=8, num_heads=2), [(5, 3, 8), (6, 3, 8), (6, 3, 8)], {}, ("kpm", "causal")),
    (dict(embed_dim=8, num_heads=2, bias=False), [(5, 3, 8), (6, 3, 8), (6, 3, 8)], {},
     ("kpm_float",)),
], ids=str)
def test_multihead_attention_matches_torch(kw, shapes, fkw, masks):
    mt = torch.nn.MultiheadAttention(**kw).double()
    ml = lg.nn.MultiheadAttention(**kw).double()
    _copy_state(ml, mt)
    kpm = RNG.uniform(size=(3, 6)) > 0.6
    kpm[:, 0] = False
    made = {"kpm": kpm, "causal": np.triu(np.ones((5, 6), dtype=bool), 1),
            "kpm_float": kpm.astype(np.float64) * -2.0}
    arrays = [RNG.standard_normal(s) for s in shapes] + [made[m] for m in masks]

    def run(L, q, k, v, *m):
        names = ["key_padding_mask", "attn_mask"]
        return (ml if L is lg else mt)(q, k, v, **fkw, **dict(zip(names, m)))
    _both(run, arrays)


@needs_torch
@pytest.mark.parametrize("kw", [{}, dict(is_causal=True), dict(mask="bool"),
                                dict(mask="float", scale=0.3), dict(gqa=True)], ids=str)
def test_scaled_dot_product_attention_matches_torch(kw):
    kw = dict(kw)
    q = RNG.standard_normal((2, 4, 5, 3))
    heads = 1 if kw.pop("gqa", False) else 4
    k, v = RNG.standard_normal((2, heads, 6, 3)), RNG.standard_normal((2, heads, 6, 7))
    mask = kw.pop("mask", None)
    arrays = [q, k, v]
    if mask == "bool":
        m = RNG.uniform(size=(5, 6)) > 0.3
        m[:, 0] = True
        arrays.append(m)
    elif mask == "float":
        arrays.append(RNG.standard_normal((5, 6)))
    if heads == 1:
        kw["enable_gqa"] = True
    _both(lambda L, q, k, v, *m: L.nn.functional.scaled_dot_product_attention(
        q, k, v, *m, **kw), arrays)


@needs_torch
@pytest.mark.parametrize("name,kw", [("softplus", {}), ("softplus", dict(beta=2, threshold=5)),
                                     ("leaky_relu", dict(negative_slope=0.2)),
                                     ("elu", dict(alpha=1.3)), ("selu", {}),
                                     ("celu", dict(alpha=0.7)), ("hardtanh", {}), ("relu6", {}),
                                     ("logsigmoid", {}), ("mish", {}), ("softsign", {})], ids=str)
def test_activations_match_torch_at_their_kinks(name, kw):
    x = np.array([-25.0, -3.0, -1.0, -0.0, 0.0, 1e-3, 0.5, 1.0, 6.0, 7.0, 25.0])
    _both(lambda L, a: getattr(L.nn.functional, name)(a, **kw), [x], tol=1e-7)
    mod = {"softplus": "Softplus", "leaky_relu": "LeakyReLU", "elu": "ELU", "selu": "SELU",
           "celu": "CELU", "hardtanh": "Hardtanh", "relu6": "ReLU6", "logsigmoid": "LogSigmoid",
           "mish": "Mish", "softsign": "Softsign"}[name]
    _both(lambda L, a: getattr(L.nn, mod)(**kw)(a), [x], tol=1e-7)


X = RNG.standard_normal((4, 5))
XN = X.copy()
XN[0, 1] = XN[2, 3] = XN[2, 4] = np.nan
TIES = np.array([[1.0, 2, 1, 3, 2], [0, 0, 0, 1, 1]])
XI = RNG.integers(-5, 5, (4, 5))


@needs_torch
@pytest.mark.parametrize("x", [X, XN, TIES, XI], ids=["normal", "nan", "ties", "int"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_sort_matches_torch_stable_order(x, dim, descending, compiled):
    def run(L, a):
        f = lambda a: L.sort(a, dim=dim, descending=descending, stable=True)  # noqa: E731
        if L is lg and compiled:
            f = lg.compile(f)
        return f(a)
    if compiled or np.isnan(x.astype(float)).any():       # compare values, no gradients
        got, want = run(lg, lg.tensor(x)), run(torch, torch.tensor(x))
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    else:
        _both(run, [x])


@needs_torch
@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_topk_argsort_msort(k):
    _both(lambda L, a: L.topk(a, k), [X])
    _both(lambda L, a: L.topk(a, min(k, 4), 0, largest=False), [X])
    _both(lambda L, a: L.argsort(a, dim=1, stable=True), [XI])
    _both(lambda L, a: L.msort(a), [X])
    with pytest.raises(RuntimeError, match="k out of range"):
        lg.topk(lg.tensor(X), 6)


def test_sort_under_vmap_and_long_rows_break_the_graph():
    x = lg.randn(4, 5, dtype=lg.float64)
    np.testing.assert_array_equal(lg.vmap(lambda r: lg.sort(r).values)(x).numpy(),
                                  np.sort(x.numpy(), 1))
    f = lg.compile(lambda a: lg.sort(a).values)
    np.testing.assert_array_equal(f(lg.randn(2000)).numpy().shape, (2000,))
    assert f.graph_breaks and "2000 elements" in f.graph_breaks[0]


@needs_torch
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum_cumprod_match_torch(dim):
    xz = X.copy()
    xz[1, 2] = xz[3, 0] = 0.0
    _both(lambda L, a: L.cumsum(a, dim), [X])
    _both(lambda L, a: L.cumsum(a, dim), [XI])
    _both(lambda L, a: a.cumprod(dim), [xz])
    _both(lambda L, a: L.cumsum(a, dim, dtype=L.float64), [XI])
    _both(lambda L, a: L.cumsum(a, 0), [RNG.standard_normal((37, 3))], tol=1e-13)
    f = lg.compile(lambda a: lg.cumsum(a, dim) * 2)
    np.testing.assert_allclose(f(lg.tensor(X)).numpy(), np.cumsum(X, dim) * 2, rtol=1e-13)
    assert not f.graph_breaks


A, B, C = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5)), RNG.standard_normal(5)
EINSUMS = [("bij,bjk->bik", [A, B]), ("bij,bjk", [A, B]), ("ij->ji", [A[0]]),
           ("ii->i", [A[0, :3, :3]]), ("ii", [A[0, :3, :3]]), ("bij->", [A]),
           ("i,j->ij", [C, C]), ("bij,bjk,k->bi", [A, B, C]), ("...ij,...jk->...ik", [A, B]),
           ("...ij,jk", [A, B[0]]), ("b i j , b j k -> b k", [A, B]),
           ("ij,ij->i", [A[0], A[1]]), ("i,i->", [C, C]), ("bij->jb", [A]),
           ("iij->j", [RNG.standard_normal((3, 3, 2))]),
           ("...ij,...jk", [RNG.standard_normal((2, 1, 3, 4)), RNG.standard_normal((5, 4, 2))])]


@needs_torch
@pytest.mark.parametrize("eq,ops", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_matches_torch(eq, ops):
    _both(lambda L, *a: L.einsum(eq, *a), ops)
    f = lg.compile(lambda *a: lg.einsum(eq, *a))
    np.testing.assert_allclose(f(*[lg.tensor(o) for o in ops]).numpy(),
                               torch.einsum(eq, *[torch.tensor(o) for o in ops]).numpy(),
                               rtol=1e-12, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("dtype", ["int32", "float64"])
@pytest.mark.parametrize("eq,sa,sb", [("ij,kj->ik", (3, 3), (3, 1)), ("ij,kj->ik", (3, 1), (4, 3)),
                                      ("bij,bjk->bik", (2, 3, 1), (2, 4, 5)),
                                      ("bij,bjk->bik", (2, 3, 4), (2, 1, 5))])
def test_einsum_size_one_contraction_as_torch(eq, sa, sb, dtype):
    """A contracted label of size 1 in one operand: torch sums the other operand over it
    first, so int32 operands give int64 (its sum's dtype); llgrad gave int32. Found by
    the slow fuzz run."""
    a = (RNG.standard_normal(sa) * 3).astype(dtype)
    b = (RNG.standard_normal(sb) * 3).astype(dtype)
    want = torch.einsum(eq, torch.tensor(a), torch.tensor(b))
    got = lg.einsum(eq, lg.tensor(a), lg.tensor(b))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_einsum_errors():
    with pytest.raises(ValueError, match="subscripts"):
        lg.einsum("ij,jk", lg.ones(2, 3), lg.ones(3))
    with pytest.raises(ValueError, match="operands"):
        lg.einsum("ij", lg.ones(2, 2), lg.ones(2, 2))
    with pytest.raises(RuntimeError, match="sizes don't match"):
        lg.einsum("ii", lg.ones(2, 3))


@needs_torch
def test_scatter_matches_torch_and_checks_bounds():
    idx = np.array([[0, 1, 2, 3, 3], [1, 0, 3, 2, 0]])
    _both(lambda L, a, i, s: L.scatter(a, 0, i, s), [X, idx, RNG.standard_normal((2, 5))])
    _both(lambda L, a, i: a.scatter(1, i, 7.0), [X, idx[:, :2]])
    _both(lambda L, a, i, s: L.scatter_add(a, 0, i, s), [X, idx, RNG.standard_normal((2, 5))])
    _both(lambda L, a, i, s: a.scatter_add(1, i, s), [X, idx, RNG.standard_normal((2, 5))])
    with pytest.raises(RuntimeError, match="out of bounds"):
        lg.zeros(3).scatter(0, lg.tensor([3]), 1.0)
    with pytest.raises(RuntimeError, match="out of bounds"):
        lg.zeros(3).scatter_add(0, lg.tensor([-1]), lg.ones(1))
    f = lg.compile(lambda a, i: lg.zeros(3, 5, dtype=a.dtype).scatter_add(0, i, a[:2]))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 0"):
        f(lg.tensor(X), lg.tensor([[0, 1, 2, 0, 1], [2, 2, 1, 0, -1]]))


def test_inplace_methods_and_random_fills():
    x = lg.zeros(2, 3)
    x.masked_fill_(lg.tensor([[True, False, True], [False, False, True]]), 5.0)
    x.scatter_(1, lg.tensor([[0], [2]]), 9.0)
    x.scatter_add_(0, lg.tensor([[1, 0, 1]]), lg.ones(1, 3))
    assert x.tolist() == [[9.0, 1.0, 5.0], [1.0, 0.0, 10.0]]
    a = lg.ones(3, requires_grad=True)
    b = a * 2
    b.masked_fill_(lg.tensor([True, False, False]), 0.0)
    b.sum().backward()
    assert a.grad.tolist() == [0.0, 2.0, 2.0]
    lg.manual_seed(1)
    u = lg.empty(4000, dtype=lg.float64).uniform_(-2, 3)
    assert -2 <= u.min().item() and u.max().item() < 3 and abs(u.mean().item() - 0.5) < 0.1
    n = lg.empty(4000, dtype=lg.float64).normal_(1.0, 2.0)
    assert abs(n.mean().item() - 1.0) < 0.15 and abs(n.std().item() - 2.0) < 0.15
    with pytest.raises(RuntimeError, match="leaf Variable"):
        lg.ones(3, requires_grad=True).uniform_()


def test_randperm_is_a_seeded_permutation():
    lg.manual_seed(3)
    p = lg.randperm(50)
    lg.manual_seed(3)
    assert lg.randperm(50).tolist() == p.tolist()
    assert sorted(p.tolist()) == list(range(50)) and p.dtype is lg.int64
    assert lg.randperm(0).numel() == 0 and lg.randperm(4, dtype=lg.float32).dtype is lg.float32
    with pytest.raises(RuntimeError, match="non-negative"):
        lg.randperm(-1)


@needs_torch
def test_finfo_iinfo_match_torch():
    for dl, dtt in [(lg.float32, torch.float32), (lg.float64, torch.float64),
                    (lg.float16, torch.float16), (lg.bfloat16, torch.bfloat16)]:
        a, b = lg.finfo(dl), torch.finfo(dtt)
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-6), field
    for dl, dtt in [(lg.int8, torch.int8), (lg.int32, torch.int32), (lg.int64, torch.int64),
                    (lg.uint8, torch.uint8)]:
        a, b = lg.iinfo(dl), torch.iinfo(dtt)
        assert (a.bits, a.min, a.max) == (b.bits, b.min, b.max)
    with pytest.raises(TypeError):
        lg.finfo(lg.int32)
    with pytest.raises(TypeError):
        lg.iinfo(lg.float32)


def test_num_threads_and_benchmark_timer():
    before = lg.get_num_threads()
    try:
        lg.set_num_threads(1)
        assert lg.get_num_threads() == 1
        assert (lg.ones(300000) * 2).sum().item() == 600000
    finally:
        lg.set_num_threads(before)
    with pytest.raises(ValueError):
        lg.set_num_threads(0)
    from llgrad.utils import benchmark
    x = lg.randn(16)
    t = benchmark.Timer("x + x", globals={"x": x}, label="add", description="eager")
    m = t.blocked_autorange(min_run_time=0.05)
    assert m.number_per_run >= 1 and len(m.times) >= 1 and 0 < m.median < 0.01
    assert "Median" in repr(m) and lg.get_num_threads() == before
    one = t.timeit(100)
    assert len(one.times) == 1 and one.number_per_run == 100
    assert "add" in str(benchmark.Compare([m, one]))


@pytest.mark.parametrize("make", [
    lambda: lg.nn.Linear(2, 3, device="cuda"), lambda: lg.nn.Conv1d(1, 1, 1, device="cuda"),
    lambda: lg.nn.BatchNorm2d(3, device="mps"), lambda: lg.nn.LSTM(2, 3, device="cuda:0"),
    lambda: lg.nn.MultiheadAttention(4, 2, device="cuda"), lambda: lg.ones(2, device="cuda"),
    lambda: lg.ones(2).to("cuda")])
def test_a_device_other_than_cpu_raises_naming_it(make):
    with pytest.raises(RuntimeError, match="is not available"):
        make()


def _cnn():
    nn = lg.nn
    lg.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(4, 8, 3), nn.LeakyReLU(0.1),
                         nn.AvgPool2d(2, ceil_mode=True), nn.AdaptiveAvgPool2d((2, 2)),
                         nn.Flatten(), nn.Linear(32, 10))


class _LM(lg.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = lg.nn.Embedding(20, 8)
        self.rnn = lg.nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.gru = lg.nn.GRU(16, 16)
        self.attn = lg.nn.MultiheadAttention(16, 2, batch_first=True)
        self.out = lg.nn.Linear(16, 20)

    def forward(self, tok):
        h, _ = self.rnn(self.emb(tok))
        h, _ = self.gru(h.transpose(0, 1))
        h = h.transpose(0, 1)
        a, _ = self.attn(h, h, h)
        return self.out(lg.nn.functional.elu(h + a))


@pytest.mark.parametrize("which", ["cnn", "lstm"])
def test_training_step_compiles_to_one_graph_equal_to_eager(which):
    """The CNN step (conv, batch norm with its running statistics, pooling) and the
    language-model step (LSTM, GRU, attention, clipping, Adam) compile without a graph
    break, and several steps give eager's losses, parameters and buffers."""
    F = lg.nn.functional
    if which == "cnn":
        data = (lg.randn(8, 1, 12, 12), lg.randint(0, 10, (8,)))
    else:
        data = (lg.randint(0, 20, (4, 6)), lg.randint(0, 20, (4, 6)))
    states = {}
    for mode in ("eager", "compiled"):
        lg.manual_seed(0)
        model = _cnn() if which == "cnn" else _LM()
        opt = (lg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if which == "cnn"
               else lg.optim.Adam(model.parameters(), lr=1e-2))

        def step(x, y):
            opt.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            loss.backward()
            lg.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss
        run = lg.compile(step) if mode == "compiled" else step
        losses = [run(*data).item() for _ in range(3)]
        if mode == "compiled":
            assert run.graph_breaks == []
        states[mode] = (losses, {k: v.detach().numpy().copy()
                                 for k, v in model.state_dict().items()})
    np.testing.assert_allclose(states["compiled"][0], states["eager"][0], rtol=1e-5)
    for k, v in states["eager"][1].items():
        # the key projection's bias has an exact gradient of 0 (a shift of every key moves
        # each query's scores by one constant, which softmax ignores): what Adam makes of
        # its rounding noise differs between any two evaluation orders
        atol = 1e-4 if k == "attn.in_proj_bias" else 1e-5
        np.testing.assert_allclose(states["compiled"][1][k], v, rtol=1e-4, atol=atol,
                                   err_msg=k)


@needs_torch
@pytest.mark.parametrize("amounts", [(1, 2), (1, 1, 2, 0), (0, 0, 1, 1, 2, 2), (-1, 2),
                                     (1, -2, 0, 1)], ids=str)
def test_pad_matches_torch(amounts):
    _both(lambda L, a: L.nn.functional.pad(a, amounts, value=3.0),
          [RNG.standard_normal((2, 3, 4))])
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode"):
        lg.nn.functional.pad(lg.ones(2, 2), (1, 1), mode="mirror")


@needs_torch
def test_one_hot_matches_torch():
    i = np.array([[0, 2], [1, 3]])
    for n in (-1, 5):
        np.testing.assert_array_equal(lg.nn.functional.one_hot(lg.tensor(i), n).numpy(),
                                      torch.nn.functional.one_hot(torch.tensor(i), n).numpy())
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        lg.nn.functional.one_hot(lg.tensor([3]), 3)
    with pytest.raises(RuntimeError, match="LongTensor"):
        lg.nn.functional.one_hot(lg.tensor([1.0]))
