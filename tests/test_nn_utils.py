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
    ps = []
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


# --- parametrizations.orthogonal -------------------------------------------------------

class _TorchHolder(torch.nn.Module if torch is not None else object):  # type: ignore[misc]
    def __init__(self, w):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(w))


class _LgHolder(lg.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.weight = lg.nn.Parameter(lg.tensor(w))


ORTH_SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 4), (2, 3, 5)]
ORTH_MAPS = [None, "matrix_exp", "cayley", "householder"]


def _orth_pair(shape, cplx, omap, triv, seed=0):
    r = np.random.default_rng(seed)
    w = r.standard_normal(shape) + (1j * r.standard_normal(shape) if cplx else 0)
    mt, ml = _TorchHolder(w), _LgHolder(w)
    P_t, P_l = torch.nn.utils.parametrizations, lg.nn.utils.parametrizations
    P_t.orthogonal(mt, orthogonal_map=omap, use_trivialization=triv)
    P_l.orthogonal(ml, orthogonal_map=omap, use_trivialization=triv)
    return mt, ml, r


@needs_torch
@pytest.mark.parametrize("triv", [True, False])
@pytest.mark.parametrize("omap", ORTH_MAPS)
@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("shape", ORTH_SHAPES, ids=str)
def test_orthogonal_matches_torch(shape, cplx, omap, triv):
    if cplx and omap == "householder":
        with pytest.raises(ValueError, match="householder"):
            lg.nn.utils.parametrizations.orthogonal(
                _LgHolder(np.ones(shape, dtype=complex)), orthogonal_map=omap)
        return
    mt, ml, r = _orth_pair(shape, cplx, omap, triv)
    assert list(ml.state_dict()) == list(mt.state_dict())
    # the initial weight is torch's (the random completion of a rectangular base only
    # changes base's extra columns)
    np.testing.assert_allclose(ml.weight.detach().numpy(), mt.weight.detach().numpy(),
                               atol=1e-10)
    ml.load_state_dict({k: lg.tensor(v.detach().resolve_conj().numpy())
                        for k, v in mt.state_dict().items()})
    step = r.standard_normal(shape) * 0.3 + (1j * r.standard_normal(shape) * 0.3 if cplx else 0)
    with torch.no_grad():
        mt.parametrizations.weight.original.add_(torch.tensor(step))
    with lg.no_grad():
        ml.parametrizations.weight.original.add_(lg.tensor(step))
    wt, wl = mt.weight, ml.weight
    np.testing.assert_allclose(wl.detach().numpy(), wt.detach().numpy(), atol=1e-10)
    m, n = shape[-2:]
    q = wl.detach().numpy()
    if omap != "householder" and not (omap is None and m != n and not cplx):
        qh = np.swapaxes(q.conj(), -1, -2)
        prod = qh @ q if m >= n else q @ qh
        np.testing.assert_allclose(prod, np.broadcast_to(np.eye(min(m, n)), prod.shape),
                                   atol=1e-10)
    cot = r.standard_normal(shape) + (1j * r.standard_normal(shape) if cplx else 0)
    gt, = torch.autograd.grad(wt, mt.parametrizations.weight.original, torch.tensor(cot))
    gl, = lg.autograd.grad(wl, ml.parametrizations.weight.original, lg.tensor(cot))
    np.testing.assert_allclose(gl.numpy(), gt.numpy(), atol=1e-9)


@needs_torch
@pytest.mark.parametrize("omap", ORTH_MAPS)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)], ids=str)
def test_orthogonal_assignment_matches_torch(shape, omap):
    for triv in (True, False):
        mt, ml, r = _orth_pair(shape, False, omap, triv, seed=1)
        m, n = shape
        q = np.linalg.qr(r.standard_normal((max(m, n), min(m, n))))[0]
        q = q if m >= n else q.T
        kinds = []
        for mod, lib in ((mt, torch), (ml, lg)):
            try:
                with lib.no_grad():
                    mod.weight = lib.tensor(q)
                kinds.append(None)
            except NotImplementedError:
                kinds.append(NotImplementedError)
        assert kinds[0] is kinds[1]
        if kinds[0] is None:
            np.testing.assert_allclose(ml.weight.detach().numpy(), q, atol=1e-10)
            np.testing.assert_allclose(ml.weight.detach().numpy(), mt.weight.detach().numpy(),
                                       atol=1e-10)


def test_orthogonal_base_defaults_and_errors():
    P = lg.nn.utils.parametrizations
    lin = P.orthogonal(lg.nn.Linear(3, 5).to(lg.float64))
    orth = lin.parametrizations.weight[0]
    assert orth.orthogonal_map.name == "householder"              # tall: torch's default
    assert tuple(orth.base.shape) == (5, 5)
    assert "parametrizations.weight.0.base" in lin.state_dict()
    w = lin.weight.detach().numpy()
    np.testing.assert_allclose(w.T @ w, np.eye(3), atol=1e-12)
    sq = P.orthogonal(lg.nn.Linear(4, 4))
    assert sq.parametrizations.weight[0].orthogonal_map.name == "matrix_exp"
    plain = P.orthogonal(lg.nn.Linear(4, 4), use_trivialization=False)
    assert "base" not in dict(plain.parametrizations.weight[0].named_buffers())
    with pytest.raises(ValueError, match="matrix or batch of matrices"):
        P.orthogonal(_LgHolder(np.ones(3)))
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        P.orthogonal(lg.nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match="shape"):
        lin.weight = lg.zeros(3, 5, dtype=lg.float64)


def test_orthogonal_gradcheck_and_training_keeps_orthogonality():
    P = lg.nn.utils.parametrizations
    r = np.random.default_rng(4)
    for omap in ("matrix_exp", "cayley", "householder"):
        orth = P._Orthogonal(lg.zeros(4, 3, dtype=lg.float64), P._OrthMaps[omap],
                             use_trivialization=False)
        x = lg.tensor(r.standard_normal((4, 3)) * 0.5 - np.eye(4, 3), requires_grad=True)
        assert lg.autograd.gradcheck(orth, (x,))
    lin = P.orthogonal(lg.nn.Linear(4, 4).to(lg.float64), orthogonal_map="cayley")
    opt = lg.optim.SGD(lin.parameters(), lr=0.1)
    x = lg.tensor(r.standard_normal((8, 4)))
    for _ in range(3):
        opt.zero_grad()
        (lin(x) ** 3).sum().backward()
        opt.step()
    w = lin.weight.detach().numpy()
    np.testing.assert_allclose(w.T @ w, np.eye(4), atol=1e-10)
