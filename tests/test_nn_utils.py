"""`lg.nn.utils` against torch.nn.utils: gradient clipping (every norm type, the returned
norm, non-finite norms), parameters as one vector, and clipping inside a compiled step."""
from __future__ import annotations

import math

import numpy as np
import pytest

import llgrad as lg
from conftest import needs_torch, torch


def _params(lib, dtype="float32"):
    """Three parameters with gradients (one parameter without), same values in both."""
    r = np.random.default_rng(3)
    shapes = [(3, 4), (4,), (2, 2, 2)]
    ps, grads = [], []
    for k, s in enumerate(shapes):
        p = lib.nn.Parameter(lib.tensor(r.standard_normal(s).astype(dtype)))
        p.grad = lib.tensor((r.standard_normal(s) * (k + 1)).astype(dtype))
        ps.append(p)
    ps.append(lib.nn.Parameter(lib.ones(2)))          # no gradient: skipped
    return ps


@needs_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, 0.5, math.inf, "inf", -math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_matches_torch(norm_type, max_norm, dtype):
    ours, theirs = _params(lg, dtype), _params(torch, dtype)
    got = lg.nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    want = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert got.dtype.name == dtype and got.ndim == 0
    rtol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.item(), want.item(), rtol=rtol)
    for p, q in zip(ours, theirs):
        if q.grad is None:
            assert p.grad is None
            continue
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol)


@needs_torch
def test_clip_grad_value_and_single_tensor():
    ours, theirs = _params(lg), _params(torch)
    assert lg.nn.utils.clip_grad_value_(ours, 0.7) is None
    torch.nn.utils.clip_grad_value_(theirs, 0.7)
    for p, q in zip(ours[:3], theirs[:3]):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
    p = lg.nn.Parameter(lg.tensor([3.0, 4.0]))
    p.grad = lg.tensor([3.0, 4.0])
    assert lg.nn.utils.clip_grad_norm_(p, 1.0).item() == 5.0
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-6)


def test_clip_grad_norm_without_grads_and_nonfinite():
    assert lg.nn.utils.clip_grad_norm_([lg.nn.Parameter(lg.ones(2))], 1.0).item() == 0.0
    p = lg.nn.Parameter(lg.ones(2))
    p.grad = lg.tensor([1.0, math.inf])
    with pytest.raises(RuntimeError, match="non-finite"):
        lg.nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    total = lg.nn.utils.clip_grad_norm_(p, 1.0)          # default: scales anyway
    assert math.isinf(total.item())
    with pytest.raises(ValueError, match="norm_type"):
        lg.nn.utils.clip_grad_norm_(p, 1.0, norm_type="fro")


@needs_torch
def test_parameters_to_vector_and_back():
    ours, theirs = _params(lg), _params(torch)
    v = lg.nn.utils.parameters_to_vector(ours)
    w = torch.nn.utils.parameters_to_vector(theirs)
    np.testing.assert_array_equal(v.detach().numpy(), w.detach().numpy())
    assert v.requires_grad and v.grad_fn is not None           # differentiable, as torch
    v.sum().backward()
    assert all(np.all(p.grad.numpy() != 0) for p in ours)
    new = lg.arange(v.numel(), dtype=lg.float32)
    lg.nn.utils.vector_to_parameters(new, ours)
    torch.nn.utils.vector_to_parameters(torch.arange(w.numel(), dtype=torch.float32), theirs)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        assert p.is_leaf and p.requires_grad
    with pytest.raises(TypeError, match="expected llgrad.Tensor"):
        lg.nn.utils.vector_to_parameters([1.0], ours)
    with pytest.raises(RuntimeError, match="parameters hold"):
        lg.nn.utils.vector_to_parameters(lg.zeros(3), ours)


def test_clipping_inside_a_compiled_training_step():
    def make():
        lg.manual_seed(0)
        m = lg.nn.Sequential(lg.nn.Linear(4, 8), lg.nn.Tanh(), lg.nn.Linear(8, 2))
        return m, lg.optim.SGD(m.parameters(), lr=0.5)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = lg.nn.functional.mse_loss(model(x), y)
        loss.backward()
        norm = lg.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        lg.nn.utils.clip_grad_value_(model.parameters(), 0.02)
        opt.step()
        return loss, norm
    model, opt = make()
    ref, ref_opt = make()
    x, y = lg.randn(16, 4), lg.randn(16, 2) * 10
    cstep = lg.compile(step)
    for _ in range(4):
        (loss, norm), (rloss, rnorm) = cstep(model, opt, x, y), step(ref, ref_opt, x, y)
        np.testing.assert_allclose([loss.item(), norm.item()], [rloss.item(), rnorm.item()],
                                   rtol=1e-5)
    (entry,) = cstep._entries.values()
    assert entry.graph_break is None
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)
