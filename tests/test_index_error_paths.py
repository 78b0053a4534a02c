"""Class and embedding indices out of range raise IndexError naming the index, on every
path a call can take: the compiled eager composite, the decomposition run op by op
(compiled composites off), with and without autograd, and under vmap. The lookups' own
kernels check every index; the exact message is produced only when they fail, so these
tests pin that no path wraps a negative index or reads past a table."""

from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
import llgrad.compiler.composites as composites

F = lg.nn.functional


@pytest.fixture(params=["compiled", "decomposed"])
def path(request, monkeypatch):
    if request.param == "decomposed":
        monkeypatch.setattr(composites, "ENABLED", False)
    return request.param


def _logp(rows: int, classes: int, grad: bool) -> lg.Tensor:
    x = lg.tensor(np.random.default_rng(0).standard_normal((rows, classes)))
    return lg.log_softmax(x, 1).detach().requires_grad_(grad)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("bad", [3, 7, -1, -3])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss_bad_target(path, grad, bad, reduction):
    x = _logp(2, 3, grad)
    for _ in range(3):  # the first calls and the cached signature
        with pytest.raises(IndexError, match=rf"nll_loss: Target {bad} is out of bounds"):
            F.nll_loss(x, lg.tensor([0, bad]), reduction=reduction)


@pytest.mark.parametrize("grad", [False, True])
def test_nll_loss_ignored_and_good_targets_run(path, grad):
    x = _logp(3, 3, grad)
    out = F.nll_loss(x, lg.tensor([0, -100, 2]), reduction="none")
    want = -np.array([x.detach().numpy()[0, 0], 0.0, x.detach().numpy()[2, 2]])
    np.testing.assert_allclose(out.detach().numpy(), want)
    # an ignore_index outside [0, C) is skipped, not checked
    out = F.nll_loss(x, lg.tensor([0, 5, 2]), ignore_index=5, reduction="none")
    np.testing.assert_allclose(out.detach().numpy(), want)


def test_cross_entropy_bad_target(path):
    x = lg.randn(2, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, lg.tensor([1, 4]))


def test_nll_loss_shape_error_comes_first(path):
    x = _logp(2, 3, False)
    with pytest.raises(ValueError, match="expected target of shape"):
        F.nll_loss(x, lg.tensor([0, 1, 9]))


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("bad", [5, 9, -1, -5])
def test_embedding_bad_index(path, grad, bad):
    w = lg.randn(5, 3).requires_grad_(grad)
    for idx in ([0, bad], [[1, 2], [bad, 0]]):
        for _ in range(3):
            with pytest.raises(IndexError, match=rf"index {bad} is out of range"):
                F.embedding(lg.tensor(idx), w)


def test_embedding_under_vmap_checks_every_row(path):
    w = lg.randn(5, 3)
    good = lg.func.vmap(lambda i: F.embedding(i, w))(lg.tensor([[0, 1], [2, 4]]))
    np.testing.assert_array_equal(good.numpy()[1, 1], w.numpy()[4])
    with pytest.raises(IndexError, match="index 6 is out of range"):
        lg.func.vmap(lambda i: F.embedding(i, w))(lg.tensor([[0, 1], [2, 6]]))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("bad", [5, -1])
def test_embedding_bag_bad_index(path, mode, bad):
    w = lg.randn(5, 3)
    with pytest.raises(IndexError, match=rf"index {bad} is out of range"):
        F.embedding_bag(lg.tensor([0, 1, bad]), w, lg.tensor([0, 2]), mode=mode)
