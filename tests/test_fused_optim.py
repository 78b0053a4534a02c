"""Eager optimizer updates as fused kernels (`llgrad.optim._fused`): the same values as
the written update (up to fused multiply-add contractions) and as torch's, for every
Adam/AdamW option, both float dtypes, non-contiguous gradients, a learning rate changed
between steps, and the cases that must take the written path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import llgrad as lg
from llgrad.optim import _fused

OPTIONS = [
    ("Adam", {}),
    ("Adam", {"weight_decay": 0.1}),
    ("Adam", {"weight_decay": 0.1, "maximize": True}),
    ("Adam", {"amsgrad": True}),
    ("Adam", {"decoupled_weight_decay": True, "weight_decay": 0.05}),
    ("AdamW", {}),
    ("AdamW", {"weight_decay": 0.3, "amsgrad": True, "betas": (0.8, 0.95), "eps": 1e-6}),
    ("AdamW", {"maximize": True, "lr": 0.05}),
]


def _params(lib, dtype, arrays):
    return [lib.nn.Parameter(lib.tensor(a.copy(), dtype=dtype)) for a in arrays]


def _run(lib, name, kw, dtype, arrays, grads, steps=4, transpose_grads=False):
    ps = _params(lib, dtype, arrays)
    opt = getattr(lib.optim, name)(ps, **kw)
    for s in range(steps):
        for p, g in zip(ps, grads):
            gt = lib.tensor((g * (s + 1)).copy(), dtype=dtype)
            if transpose_grads and g.ndim == 2:
                gt = lib.tensor(np.ascontiguousarray((g * (s + 1)).T), dtype=dtype).t()
            p.grad = gt
        if s == 2:
            for group in opt.param_groups:
                group["lr"] = group["lr"] * 0.5         # a scheduler's change
        opt.step()
    return [p.detach().numpy().copy() for p in ps], opt


def _data(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(7, 5), (13,), (3, 4, 2), ()]
    arrays = [rng.standard_normal(s) for s in shapes]
    grads = [rng.standard_normal(s) for s in shapes]
    return arrays, grads


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", OPTIONS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIONS)])
def test_fused_matches_written_and_torch(name, kw, dtype, transposed, monkeypatch):
    arrays, grads = _data()
    _fused._plans.clear()
    fused, opt = _run(lg, name, kw, getattr(lg, dtype), arrays, grads,
                      transpose_grads=transposed)
    assert _fused._plans, "the fused path ran"
    monkeypatch.setattr(_fused, "ENABLED", False)
    written, _ = _run(lg, name, kw, getattr(lg, dtype), arrays, grads,
                      transpose_grads=transposed)
    ref, _ = _run(torch, name, kw, getattr(torch, dtype), arrays, grads,
                  transpose_grads=transposed)
    tol = 2e-6 if dtype == "float32" else 1e-13
    for f, w, r in zip(fused, written, ref):
        np.testing.assert_allclose(f, w, rtol=tol, atol=tol)
        np.testing.assert_allclose(f, r, rtol=10 * tol, atol=10 * tol)
    # the state tensors too
    state = opt.state[opt.param_groups[0]["params"][0]]
    assert float(state["step"]) == 4.0


def test_updates_bump_versions_as_in_place_writes():
    p = lg.nn.Parameter(lg.randn(4))
    opt = lg.optim.AdamW([p])
    p.grad = lg.randn(4)
    before = p._version
    opt.step()
    assert p._version > before


@pytest.mark.parametrize("case", ["tensor-lr", "float16", "differentiable-grad"])
def test_other_cases_take_the_written_path(case):
    _fused._plans.clear()
    if case == "tensor-lr":
        p = lg.nn.Parameter(lg.randn(4))
        opt = lg.optim.Adam([p], lr=lg.tensor(0.01))
    elif case == "float16":
        p = lg.nn.Parameter(lg.randn(4).to(lg.float16))
        opt = lg.optim.Adam([p])
    else:
        p = lg.nn.Parameter(lg.randn(4))
        opt = lg.optim.Adam([p])
    p.grad = lg.randn(4, requires_grad=case == "differentiable-grad").to(p.dtype)
    opt.step()
    assert not _fused._plans
    assert lg.isfinite(p).all()
