"""The nn operations torch exports at top level (llgrad/nn/_torch_level.py), against torch."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)


def _pair(*shape: int, positive: bool = False) -> tuple:
    a = rng.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.1
    return torch.tensor(a, requires_grad=True), lg.tensor(a, requires_grad=True)


def _check(t_out, l_out, leaves) -> None:
    t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
    l_outs = l_out if isinstance(l_out, tuple) else (l_out,)
    for a, b in zip(t_outs, l_outs):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6,
                                   atol=1e-8)
    t_first, l_first = t_outs[0], l_outs[0]
    if t_first.requires_grad:
        t_first.sum().backward()
        l_first.sum().backward()
        for t, l in leaves:
            np.testing.assert_allclose(l.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-8)


def test_convolutions_and_pools() -> None:
    (xt, xl), (wt, wl), (bt, bl) = _pair(2, 3, 9, 9), _pair(4, 3, 3, 3), _pair(4)
    _check(torch.conv2d(xt, wt, bt, 2, 1), lg.conv2d(xl, wl, bl, 2, 1),
           [(xt, xl), (wt, wl), (bt, bl)])
    (xt, xl), (wt, wl) = _pair(2, 4, 7), _pair(4, 3, 2)
    _check(torch.conv_transpose1d(xt, wt, None, 2, 1, 1), lg.conv_transpose1d(xl, wl, None,
                                                                              2, 1, 1),
           [(xt, xl), (wt, wl)])
    (xt, xl), = [_pair(2, 3, 10)]
    _check(torch.max_pool1d(xt, 3), lg.max_pool1d(xl, 3), [(xt, xl)])
    v_t, i_t = torch.max_pool1d_with_indices(xt.detach(), 3, 2)
    v_l, i_l = lg.max_pool1d_with_indices(xl.detach(), 3, 2)
    assert i_l.tolist() == i_t.tolist()
    v_t, i_t = torch.adaptive_max_pool1d(xt.detach(), 4)
    v_l, i_l = lg.adaptive_max_pool1d(xl.detach(), 4)
    assert i_l.tolist() == i_t.tolist()
    np.testing.assert_allclose(lg.avg_pool1d(xl, 3, 2).detach().numpy(),
                               torch.avg_pool1d(xt, 3, 2).detach().numpy(), rtol=1e-12)


def test_normalizations_in_aten_order() -> None:
    (xt, xl), (wt, wl), (bt, bl) = _pair(4, 3, 5), _pair(3), _pair(3)
    rm_t, rv_t = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    rm_l, rv_l = lg.zeros(3, dtype=lg.float64), lg.ones(3, dtype=lg.float64)
    _check(torch.batch_norm(xt, wt, bt, rm_t, rv_t, True, 0.1, 1e-5, False),
           lg.batch_norm(xl, wl, bl, rm_l, rv_l, True, 0.1, 1e-5, False),
           [(xt, xl), (wt, wl), (bt, bl)])
    np.testing.assert_allclose(rm_l.numpy(), rm_t.numpy(), rtol=1e-12)
    (xt, xl), = [_pair(2, 6, 4)]
    np.testing.assert_allclose(lg.group_norm(xl, 3).detach().numpy(),
                               torch.group_norm(xt, 3).detach().numpy(), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(lg.layer_norm(xl, [4]).detach().numpy(),
                               torch.layer_norm(xt, [4]).detach().numpy(), rtol=1e-6,
                               atol=1e-9)
    np.testing.assert_allclose(lg.rms_norm(xl, [4]).detach().numpy(),
                               torch.rms_norm(xt, [4]).detach().numpy(), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(
        lg.instance_norm(xl, None, None, None, None, True, 0.1, 1e-5, False).detach().numpy(),
        torch.instance_norm(xt, None, None, None, None, True, 0.1, 1e-5, False)
        .detach().numpy(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_losses_take_aten_integer_reductions(reduction: int) -> None:
    (at, al), (bt, bl) = _pair(4, 5), _pair(4, 5)
    y = rng.integers(0, 2, (4, 5)).astype(np.float64)
    _check(torch.binary_cross_entropy_with_logits(at, torch.tensor(y), reduction=reduction),
           lg.binary_cross_entropy_with_logits(al, lg.tensor(y), reduction=reduction),
           [(at, al)])
    sign = np.where(rng.standard_normal(4) > 0, 1.0, -1.0)
    np.testing.assert_allclose(
        lg.cosine_embedding_loss(al, bl, lg.tensor(sign), 0.1, reduction).detach().numpy(),
        torch.cosine_embedding_loss(at, bt, torch.tensor(sign), 0.1, reduction)
        .detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        lg.kl_div(al, bl.exp(), reduction).detach().numpy(),
        torch.kl_div(at, bt.exp(), reduction).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        lg.hinge_embedding_loss(al, lg.tensor(np.sign(y - 0.5)), 1.0, reduction)
        .detach().numpy(),
        torch.hinge_embedding_loss(at, torch.tensor(np.sign(y - 0.5)), 1.0, reduction)
        .detach().numpy(), rtol=1e-6)


def test_embedding_takes_the_weight_first() -> None:
    (wt, wl), = [_pair(10, 3)]
    idx = rng.integers(0, 10, (2, 4))
    _check(torch.embedding(wt, torch.tensor(idx)), lg.embedding(wl, lg.tensor(idx)),
           [(wt, wl)])


def test_dropout_positional_train_flag() -> None:
    x = lg.ones(1000)
    assert lg.dropout(x, 0.5, False).tolist() == x.tolist()
    kept = lg.dropout(x, 0.5, True)
    assert set(kept.unique().tolist()) <= {0.0, 2.0}
    y = lg.ones(4, 8, 3)
    out = lg.feature_dropout(y, 0.5, True)
    per_channel = out.sum(-1)
    assert set(per_channel.unique().tolist()) <= {0.0, 6.0}
    with pytest.raises(ValueError, match="reduction"):
        lg.kl_div(lg.ones(2), lg.ones(2), 5)
