"""nn.LSTM with projections (`proj_size` > 0) against torch: parameter names, shapes and
order, outputs and states, gradients of inputs, initial states and every parameter, for
uni- and bidirectional, multi-layer, batch-first, unbatched and packed inputs."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.nn.utils import rnn as lrnn

torch = pytest.importorskip("torch")
from torch.nn.utils import rnn as trnn  # noqa: E402

RNG = np.random.default_rng(11)

CONFIGS = [
    dict(num_layers=1),
    dict(num_layers=2),
    dict(num_layers=1, bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(num_layers=2, bias=False),
    dict(num_layers=3, bidirectional=True, bias=False, batch_first=True),
]


def _pair(kw: dict, input_size: int = 3, hidden: int = 5, proj: int = 2):
    mt = torch.nn.LSTM(input_size, hidden, proj_size=proj, **kw).double()
    ml = lg.nn.LSTM(input_size, hidden, proj_size=proj, **kw).to(lg.float64)
    ml.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    return mt, ml


def _grads_close(outs_t, outs_l, leaves_t, leaves_l):
    for a, b in zip(outs_l, outs_t):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    cots = [RNG.standard_normal(tuple(o.shape)) for o in outs_t]
    gt = torch.autograd.grad(outs_t, leaves_t, [torch.tensor(c) for c in cots])
    gl = lg.autograd.grad(outs_l, leaves_l, [lg.tensor(c) for c in cots])
    for a, b in zip(gl, gt):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("kw", CONFIGS, ids=str)
def test_parameters_match_torch(kw):
    mt, ml = _pair(kw)
    assert list(ml.state_dict()) == list(mt.state_dict())
    assert [n for n, _ in ml.named_parameters()] == [n for n, _ in mt.named_parameters()]
    for (n, p), (_, q) in zip(ml.named_parameters(), mt.named_parameters()):
        assert tuple(p.shape) == tuple(q.shape), n
    assert ml._flat_weights_names == mt._flat_weights_names
    assert repr(ml) == repr(mt)
    # PyTorch's init: U(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter, weight_hr too
    fresh = lg.nn.LSTM(3, 16, proj_size=4)
    w = fresh.weight_hr_l0.detach().numpy()
    assert w.shape == (4, 16) and np.abs(w).max() <= 0.25 and w.std() > 0.05


@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("kw", CONFIGS, ids=str)
def test_forward_and_gradients_match_torch(kw, with_hx):
    mt, ml = _pair(kw)
    dirs = 2 if kw.get("bidirectional") else 1
    L, N = 4, 3
    x = RNG.standard_normal((N, L, 3) if kw.get("batch_first") else (L, N, 3))
    xt, xl = torch.tensor(x, requires_grad=True), lg.tensor(x, requires_grad=True)
    leaves_t, leaves_l = [xt], [xl]
    if with_hx:
        h0 = RNG.standard_normal((kw["num_layers"] * dirs, N, 2))
        c0 = RNG.standard_normal((kw["num_layers"] * dirs, N, 5))
        hx_t = (torch.tensor(h0, requires_grad=True), torch.tensor(c0, requires_grad=True))
        hx_l = (lg.tensor(h0, requires_grad=True), lg.tensor(c0, requires_grad=True))
        leaves_t += list(hx_t)
        leaves_l += list(hx_l)
        out_t, (hn_t, cn_t) = mt(xt, hx_t)
        out_l, (hn_l, cn_l) = ml(xl, hx_l)
    else:
        out_t, (hn_t, cn_t) = mt(xt)
        out_l, (hn_l, cn_l) = ml(xl)
    assert tuple(out_l.shape) == tuple(out_t.shape)
    assert out_l.shape[-1] == dirs * 2
    assert tuple(hn_l.shape) == (kw["num_layers"] * dirs, N, 2)
    assert tuple(cn_l.shape) == (kw["num_layers"] * dirs, N, 5)
    leaves_t += [p for _, p in mt.named_parameters()]
    leaves_l += [p for _, p in ml.named_parameters()]
    _grads_close([out_t, hn_t, cn_t], [out_l, hn_l, cn_l], leaves_t, leaves_l)


def test_unbatched_input_matches_torch():
    mt, ml = _pair(dict(num_layers=2, bidirectional=True))
    x = RNG.standard_normal((5, 3))
    h0, c0 = RNG.standard_normal((4, 2)), RNG.standard_normal((4, 5))
    xt, xl = torch.tensor(x, requires_grad=True), lg.tensor(x, requires_grad=True)
    out_t, (hn_t, cn_t) = mt(xt, (torch.tensor(h0), torch.tensor(c0)))
    out_l, (hn_l, cn_l) = ml(xl, (lg.tensor(h0), lg.tensor(c0)))
    assert tuple(out_l.shape) == (5, 4) and tuple(hn_l.shape) == (4, 2)
    _grads_close([out_t, hn_t, cn_t], [out_l, hn_l, cn_l],
                 [xt] + list(mt.parameters()), [xl] + list(ml.parameters()))


@pytest.mark.parametrize("enforce_sorted", [False, True])
@pytest.mark.parametrize("kw", [dict(num_layers=2, bidirectional=True),
                                dict(num_layers=1, batch_first=True)], ids=str)
def test_packed_sequences_match_torch(kw, enforce_sorted):
    mt, ml = _pair(kw)
    lens = [5, 4, 2] if enforce_sorted else [2, 5, 4]
    seqs = [RNG.standard_normal((n, 3)) for n in lens]
    st = [torch.tensor(s, requires_grad=True) for s in seqs]
    sl = [lg.tensor(s, requires_grad=True) for s in seqs]
    pt = trnn.pack_sequence(st, enforce_sorted=enforce_sorted)
    pl = lrnn.pack_sequence(sl, enforce_sorted=enforce_sorted)
    out_t, (hn_t, cn_t) = mt(pt)
    out_l, (hn_l, cn_l) = ml(pl)
    np.testing.assert_array_equal(out_l.batch_sizes.numpy(), out_t.batch_sizes.numpy())
    _grads_close([out_t.data, hn_t, cn_t], [out_l.data, hn_l, cn_l],
                 st + list(mt.parameters()), sl + list(ml.parameters()))


def test_gradcheck_float64():
    ml = lg.nn.LSTM(2, 3, proj_size=2, num_layers=2, bidirectional=True).to(lg.float64)
    x = lg.tensor(RNG.standard_normal((3, 2, 2)), requires_grad=True)
    h0 = lg.tensor(RNG.standard_normal((4, 2, 2)), requires_grad=True)
    w_hr = ml.weight_hr_l1_reverse

    def f(x, h0, w):
        out, (h, c) = lg.func.functional_call(ml, {"weight_hr_l1_reverse": w},
                                              (x, (h0, lg.zeros(4, 2, 3, dtype=lg.float64))))
        return out.sum() + h.sum() * 0.5 + c.sum() * 0.25

    assert lg.autograd.gradcheck(f, (x, h0, w_hr.detach().requires_grad_(True)))


@pytest.mark.parametrize("kwargs,match", [
    (dict(proj_size=5), "smaller than hidden_size"),
    (dict(proj_size=-1), "positive integer or zero"),
])
def test_bad_proj_size(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lg.nn.LSTM(3, 5, **kwargs)
    with pytest.raises(ValueError):
        torch.nn.LSTM(3, 5, **kwargs)


def test_proj_size_only_for_lstm_and_state_shapes_checked():
    with pytest.raises(ValueError, match="only supported for LSTM"):
        lg.nn.modules.rnn.RNNBase("GRU", 3, 5, proj_size=2)
    ml = lg.nn.LSTM(3, 5, proj_size=2)
    x = lg.randn(4, 2, 3)
    with pytest.raises(RuntimeError, match="hidden\\[0\\]"):
        ml(x, (lg.zeros(1, 2, 5), lg.zeros(1, 2, 5)))
    with pytest.raises(RuntimeError, match="hidden\\[1\\]"):
        ml(x, (lg.zeros(1, 2, 2), lg.zeros(1, 2, 2)))


def test_compiled_matches_eager():
    ml = lg.nn.LSTM(3, 4, proj_size=2, num_layers=2)
    x = lg.randn(5, 2, 3)

    def step(x):
        out, (h, c) = ml(x)
        return out.sum() + h.sum() + c.sum()

    eager = step(x).item()
    compiled = lg.compile(step)(x).item()
    assert abs(eager - compiled) < 1e-4
