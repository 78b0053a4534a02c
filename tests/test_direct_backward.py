"""The engine's direct path: a graph that is one compiled call over leaves runs its
backward without a graph walk (`engine._run_direct`), with the general path's results
and errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.tape import engine
from llgrad.compiler.function import CompiledBackward


def _f(x, w):
    return (lg.tanh(x * w) + x).sum()


def _leaves():
    rng = np.random.default_rng(0)
    return (lg.tensor(rng.standard_normal(8), requires_grad=True),
            lg.tensor(rng.standard_normal(8), requires_grad=True))


def _expected(x, w):
    xe, we = x.detach().requires_grad_(), w.detach().requires_grad_()
    _f(xe, we).backward()
    return xe.grad.numpy(), we.grad.numpy()


def test_the_direct_path_is_taken_and_equals_eager(monkeypatch):
    calls = []
    real = engine._run_direct

    def counting(*a):
        r = real(*a)
        if r is not None:                        # None: not a one-node graph
            calls.append(1)
        return r
    monkeypatch.setattr(engine, "_run_direct", counting)
    real_node = CompiledBackward.direct_grads

    def counting_node(*a):
        r = real_node(*a)
        if r is not None:                        # None: the engine's path decides
            calls.append(2)
        return r
    monkeypatch.setattr(CompiledBackward, "direct_grads", counting_node)
    cf = lg.compile(_f)
    x, w = _leaves()
    gx, gw = lg.autograd.grad(cf(x, w), [x, w])
    ex, ew = _expected(x, w)
    np.testing.assert_allclose(gx.numpy(), ex, rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), ew, rtol=1e-12)
    cf(x, w).backward()
    cf(x, w).backward()                          # accumulates into .grad
    np.testing.assert_allclose(x.grad.numpy(), 2 * ex, rtol=1e-12)
    assert calls == [2, 2, 2]        # the node alone (`CompiledBackward.direct_grads`)


def test_a_second_backward_without_retain_graph_raises():
    cf = lg.compile(_f)
    x, w = _leaves()
    loss = cf(x, w)
    loss.backward()
    with pytest.raises(RuntimeError, match="second time|freed"):
        loss.backward()
    loss = cf(x, w)
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * _expected(x, w)[0], rtol=1e-12)


def test_hooks_and_retain_grad_take_the_general_path():
    cf = lg.compile(_f)
    x, w = _leaves()
    seen = []
    x.register_hook(lambda g: seen.append(g) or g * 2)
    loss = cf(x, w)
    loss.retain_grad()
    loss.backward()
    assert len(seen) == 1 and loss.grad.item() == 1.0
    np.testing.assert_allclose(x.grad.numpy(), 2 * _expected(x, w)[0], rtol=1e-12)


def test_an_input_modified_in_place_before_backward_raises():
    cf = lg.compile(_f)
    x, w = _leaves()
    with lg.no_grad():
        wd = w.detach()
    loss = cf(x, wd)
    with lg.no_grad():
        wd.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_grad_of_a_tensor_the_call_did_not_use_follows_allow_unused():
    cf = lg.compile(_f)
    x, w = _leaves()
    z = lg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        lg.autograd.grad(cf(x, w), [x, z])
    gx, gz = lg.autograd.grad(cf(x, w), [x, z], allow_unused=True)
    assert gz is None and gx is not None
