"""A tensor passed to a compiled function that the function also reaches through another
name (an optimizer's parameter list, a module attribute) must not diverge from its traced
argument: such a signature runs eagerly, with eager's values."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg


def _param() -> lg.nn.Parameter:
    return lg.nn.Parameter(lg.tensor(np.random.default_rng(0).standard_normal((4, 3)),
                                     dtype=lg.float32))


@pytest.mark.parametrize("opt_cls", [lg.optim.SGD, lg.optim.Adam, lg.optim.RMSprop])
def test_parameter_passed_as_argument_and_updated_by_optimizer(opt_cls) -> None:
    x = lg.tensor(np.random.default_rng(1).standard_normal((5, 4)), dtype=lg.float32)

    def step(w, x, opt):
        opt.zero_grad()
        loss = ((x @ w).tanh() ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    we, wc = _param(), _param()
    oe, oc = opt_cls([we], lr=0.05), opt_cls([wc], lr=0.05)
    cstep = lg.compile(step)
    for _ in range(4):
        le, lc = step(we, x, oe), cstep(wc, x, oc)
        assert lc.item() == pytest.approx(le.item(), rel=1e-5)
    np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert any("shares memory with tensor argument 0" in str(b) for b in cstep.graph_breaks)


def test_module_parameter_passed_as_argument() -> None:
    lin = lg.nn.Linear(3, 2)
    x = lg.randn(4, 3)

    def f(w, x):
        return lin(x).sum() + (w * 2).sum()

    want = f(lin.weight, x)
    got = lg.compile(f)(lin.weight, x)
    assert got.item() == pytest.approx(want.item(), rel=1e-6)


def test_captured_parameter_alone_still_compiles() -> None:
    w = _param()
    opt = lg.optim.SGD([w], lr=0.1)
    x = lg.ones(5, 4)

    def step(x):
        opt.zero_grad()
        loss = (x @ w).sum()
        loss.backward()
        opt.step()
        return loss

    cstep = lg.compile(step)
    for _ in range(3):
        cstep(x)
    assert not cstep.graph_breaks
