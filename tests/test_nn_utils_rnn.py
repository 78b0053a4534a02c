"""nn.utils.rnn (packing, padding), RNN/LSTM/GRU on PackedSequence, and the
parametrization utilities (weight_norm, spectral_norm, parametrize, parametrizations,
prune) against torch."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.nn.utils import rnn as lrnn

torch = pytest.importorskip("torch")
pytest.importorskip("torch.nn.utils.prune")      # (makes torch.nn.utils.prune an attribute)
from torch.nn.utils import rnn as trnn  # noqa: E402

RNG = np.random.default_rng(5)
SEQS = [RNG.standard_normal((n, 3)) for n in (4, 6, 2, 6)]


def _seqs(lib):
    return [lib.tensor(s, requires_grad=True) for s in SEQS]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_matches_torch(batch_first, side):
    res = {}
    for lib, mod in ((lg, lrnn), (torch, trnn)):
        xs = _seqs(lib)
        out = mod.pad_sequence(xs, batch_first=batch_first, padding_value=-1.5,
                               padding_side=side)
        (out * lib.tensor(np.arange(out.numel()).reshape(tuple(out.shape)))).sum().backward()
        res[lib] = [out.detach().numpy()] + [x.grad.numpy() for x in xs]
    for a, b in zip(res[lg], res[torch]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("enforce_sorted", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_pad_roundtrip_matches_torch(enforce_sorted, batch_first):
    order = [1, 3, 0, 2] if enforce_sorted else [0, 1, 2, 3]
    res = {}
    for lib, mod in ((lg, lrnn), (torch, trnn)):
        xs = [_seqs(lib)[i] for i in order]
        lens = [x.shape[0] for x in xs]
        padded = mod.pad_sequence(xs, batch_first=batch_first)
        leaf = padded.detach().requires_grad_(True)
        packed = mod.pack_padded_sequence(leaf, lib.tensor(lens), batch_first=batch_first,
                                          enforce_sorted=enforce_sorted)
        back, out_lens = mod.pad_packed_sequence(packed, batch_first=batch_first,
                                                 total_length=7)
        (back * back).sum().backward()
        res[lib] = [packed.data.detach().numpy(), packed.batch_sizes.numpy(),
                    back.detach().numpy(), out_lens.numpy(), leaf.grad.numpy()]
        if packed.sorted_indices is not None:
            res[lib] += [packed.sorted_indices.numpy(), packed.unsorted_indices.numpy()]
        seqs = mod.unpack_sequence(packed)
        res[lib] += [s.detach().numpy() for s in seqs]
        res[lib] += [s.detach().numpy() for s in mod.unpad_sequence(padded, lib.tensor(lens),
                                                                     batch_first=batch_first)]
    assert len(res[lg]) == len(res[torch])
    for a, b in zip(res[lg], res[torch]):
        np.testing.assert_array_equal(a, b)


def test_pack_sequence_errors():
    xs = _seqs(lg)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        lrnn.pack_sequence(xs)
    with pytest.raises(RuntimeError, match="greater than 0"):
        lrnn.pack_padded_sequence(lg.zeros(3, 2), [3, 0])
    packed = lrnn.pack_sequence(xs, enforce_sorted=False)
    with pytest.raises(ValueError, match="total_length"):
        lrnn.pad_packed_sequence(packed, total_length=3)
    assert packed.double().data.dtype is lg.float64


@pytest.mark.parametrize("cls,kw", [("RNN", dict()), ("LSTM", dict(num_layers=2)),
                                    ("GRU", dict(bidirectional=True)),
                                    ("LSTM", dict(bidirectional=True, batch_first=True)),
                                    ("RNN", dict(nonlinearity="relu", num_layers=2,
                                                 bidirectional=True))], ids=str)
@pytest.mark.parametrize("with_hx", [False, True])
def test_recurrent_layers_on_packed_sequences(cls, kw, with_hx):
    torch.manual_seed(0)
    mt = getattr(torch.nn, cls)(3, 4, **kw).double()
    ml = getattr(lg.nn, cls)(3, 4, **kw).double()
    ml.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    dirs = 2 if kw.get("bidirectional") else 1
    hx = RNG.standard_normal((kw.get("num_layers", 1) * dirs, 4, 4))
    res = {}
    for lib, m, mod in ((lg, ml, lrnn), (torch, mt, trnn)):
        xs = _seqs(lib)
        packed = mod.pack_sequence(xs, enforce_sorted=False)
        h0 = None
        if with_hx:
            h0 = lib.tensor(hx, requires_grad=True)
            h0 = (h0, h0 * 0.5) if cls == "LSTM" else h0
        out, state = m(packed, h0)
        assert isinstance(out, mod.PackedSequence)
        hn = state[0] if cls == "LSTM" else state
        loss = (out.data * out.data).sum() + (hn * lib.tensor(np.arange(hn.numel()).reshape(
            tuple(hn.shape)))).sum()
        if cls == "LSTM":
            loss = loss + state[1].sum()
        loss.backward()
        res[lib] = [out.data.detach().numpy(), out.batch_sizes.numpy(), hn.detach().numpy()] + \
            [x.grad.numpy() for x in xs] + [p.grad.numpy() for p in m.parameters()]
        if cls == "LSTM":
            res[lib].append(state[1].detach().numpy())
    for a, b in zip(res[lg], res[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------------------
# weight_norm, spectral_norm, parametrize, prune
# --------------------------------------------------------------------------------------

def _pair(make_t, make_l, transform_t, transform_l):
    torch.manual_seed(0)
    mt = transform_t(make_t().double())
    ml = transform_l(make_l().double())
    assert list(ml.state_dict()) == list(mt.state_dict())
    ml.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    return ml, mt


def _step(ml, mt, x, check_params=True):
    res = {}
    for lib, m in ((lg, ml), (torch, mt)):
        xi = lib.tensor(x, requires_grad=True)
        out = m(xi)
        (out * out).sum().backward()
        res[lib] = [out.detach().numpy(), xi.grad.numpy()] + \
            ([p.grad.numpy() for p in m.parameters()] if check_params else [])
    for a, b in zip(res[lg], res[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_old_weight_norm_matches_torch(dim):
    ml, mt = _pair(lambda: torch.nn.Linear(3, 4), lambda: lg.nn.Linear(3, 4),
                   lambda m: torch.nn.utils.weight_norm(m, dim=dim),
                   lambda m: lg.nn.utils.weight_norm(m, dim=dim))
    _step(ml, mt, RNG.standard_normal((5, 3)))
    lg.nn.utils.remove_weight_norm(ml)
    torch.nn.utils.remove_weight_norm(mt)
    assert list(ml.state_dict()) == list(mt.state_dict())
    np.testing.assert_allclose(ml.weight.detach().numpy(), mt.weight.detach().numpy(),
                               rtol=1e-12)


@pytest.mark.parametrize("dim", [0, 1])
def test_parametrized_weight_norm_matches_torch(dim):
    P = torch.nn.utils.parametrizations
    ml, mt = _pair(lambda: torch.nn.Conv1d(2, 3, 2), lambda: lg.nn.Conv1d(2, 3, 2),
                   lambda m: P.weight_norm(m, dim=dim),
                   lambda m: lg.nn.utils.parametrizations.weight_norm(m, dim=dim))
    assert type(ml).__name__ == type(mt).__name__ == "ParametrizedConv1d"
    _step(ml, mt, RNG.standard_normal((2, 2, 5)))
    lg.nn.utils.parametrize.remove_parametrizations(ml, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(mt, "weight")
    assert type(ml) is lg.nn.Conv1d and list(ml.state_dict()) == list(mt.state_dict())
    np.testing.assert_allclose(ml.weight.detach().numpy(), mt.weight.detach().numpy(),
                               rtol=1e-12)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_spectral_norms_match_torch(mode):
    ml, mt = _pair(lambda: torch.nn.Linear(4, 5), lambda: lg.nn.Linear(4, 5),
                   torch.nn.utils.spectral_norm, lg.nn.utils.spectral_norm)
    getattr(ml, mode)()
    getattr(mt, mode)()
    for _ in range(2):
        _step(ml, mt, RNG.standard_normal((3, 4)))
    np.testing.assert_allclose(ml.weight_u.numpy(), mt.weight_u.numpy(), rtol=1e-10)
    P = torch.nn.utils.parametrizations
    ml, mt = _pair(lambda: torch.nn.Linear(4, 5), lambda: lg.nn.Linear(4, 5),
                   P.spectral_norm, lg.nn.utils.parametrizations.spectral_norm)
    getattr(ml, mode)()
    getattr(mt, mode)()
    for _ in range(2):
        _step(ml, mt, RNG.standard_normal((3, 4)))


class _Symmetric(lg.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)

    def right_inverse(self, a):
        return a.triu()


def test_register_parametrization_cached_and_assignment():
    P = lg.nn.utils.parametrize
    m = lg.nn.Linear(3, 3)
    P.register_parametrization(m, "weight", _Symmetric())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias")
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    w = m.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    with P.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    sym = lg.tensor(np.array([[1.0, 2, 3], [2, 4, 5], [3, 5, 6]]), dtype=lg.float32)
    m.weight = sym
    np.testing.assert_array_equal(m.weight.detach().numpy(), sym.numpy())
    m(lg.randn(2, 3)).sum().backward()
    g = m.parametrizations.weight.original.grad
    assert g is not None and np.allclose(np.tril(g.numpy(), -1), 0)
    assert P.type_before_parametrizations(m) is lg.nn.Linear
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    assert type(m) is lg.nn.Linear and list(m.state_dict()) == ["bias", "weight"]   # torch's
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.triu(sym.numpy()))
    with pytest.raises(ValueError, match="does not have a parameter"):
        P.register_parametrization(m, "nope", _Symmetric())


def test_pruning_matches_torch_masks():
    P = torch.nn.utils.prune
    for amount in (0.3, 4):
        torch.manual_seed(0)
        mt = torch.nn.Linear(4, 5).double()
        ml = lg.nn.Linear(4, 5).double()
        ml.load_state_dict({k: lg.tensor(v.numpy()) for k, v in mt.state_dict().items()})
        P.l1_unstructured(mt, "weight", amount)
        lg.nn.utils.prune.l1_unstructured(ml, "weight", amount)
        P.l1_unstructured(mt, "weight", 0.5)                   # iterative: on the rest
        lg.nn.utils.prune.l1_unstructured(ml, "weight", 0.5)
        assert list(ml.state_dict()) == list(mt.state_dict())
        np.testing.assert_array_equal(ml.weight_mask.numpy(), mt.weight_mask.numpy())
        assert lg.nn.utils.prune.is_pruned(ml)
        _step(ml, mt, RNG.standard_normal((3, 4)))
        P.remove(mt, "weight")
        lg.nn.utils.prune.remove(ml, "weight")
        assert not lg.nn.utils.prune.is_pruned(ml)
        assert list(ml.state_dict()) == list(mt.state_dict())
        np.testing.assert_array_equal(ml.weight.detach().numpy(), mt.weight.detach().numpy())


def test_global_and_random_pruning():
    torch.manual_seed(1)
    a_t, b_t = torch.nn.Linear(4, 3).double(), torch.nn.Linear(3, 2).double()
    a_l, b_l = lg.nn.Linear(4, 3).double(), lg.nn.Linear(3, 2).double()
    for ml, mt in ((a_l, a_t), (b_l, b_t)):
        ml.load_state_dict({k: lg.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    torch.nn.utils.prune.global_unstructured(
        [(a_t, "weight"), (b_t, "weight")], torch.nn.utils.prune.L1Unstructured, amount=7)
    lg.nn.utils.prune.global_unstructured(
        [(a_l, "weight"), (b_l, "weight")], lg.nn.utils.prune.L1Unstructured, amount=7)
    np.testing.assert_array_equal(a_l.weight_mask.numpy(), a_t.weight_mask.numpy())
    np.testing.assert_array_equal(b_l.weight_mask.numpy(), b_t.weight_mask.numpy())
    lg.manual_seed(0)
    m = lg.nn.Linear(10, 10)
    lg.nn.utils.prune.random_unstructured(m, "weight", 0.25)
    assert int((m.weight_mask.numpy() == 0).sum()) == 25
    assert int((m.weight.detach().numpy() == 0).sum()) >= 25
    with pytest.raises(ValueError, match="amount"):
        lg.nn.utils.prune.l1_unstructured(lg.nn.Linear(2, 2), "weight", 1.5)
