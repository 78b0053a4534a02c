"""Forward-mode AD: every op's Jacobian-vector product against central differences."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
import llgrad.autograd.forward_ad as fwAD

from conftest import values


def _jvp(fn, inputs, tangents):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, t) for x, t in zip(inputs, tangents)]
        out = fn(*duals)
        primal, tangent = fwAD.unpack_dual(out)
    return primal, tangent


def _numeric(fn, inputs, tangents, eps=1e-6):
    plus = fn(*[x + eps * t for x, t in zip(inputs, tangents)])
    minus = fn(*[x - eps * t for x, t in zip(inputs, tangents)])
    return (values(plus) - values(minus)) / (2 * eps)


CASES = {
    "exp*sin": (lambda x: lg.exp(x) * lg.sin(x), [(3, 4)]),
    "tanh-sigmoid": (lambda x: lg.tanh(x) - lg.sigmoid(x * 2), [(5,)]),
    "div-pow": (lambda x, y: x / (y * y + 1) + x ** 3, [(3, 4), (4,)]),
    "maximum": (lambda x, y: lg.maximum(x, y), [(6,), (6,)]),
    "where": (lambda x: lg.where(x > 0, x * x, -x), [(7,)]),
    "gelu": (lambda x: lg.gelu(x), [(5,)]),
    "reshape-permute": (lambda x: x.reshape(4, 3).t().flip(0)[1:], [(3, 4)]),
    "cat-expand": (lambda x, y: lg.cat([x.expand(2, 3), y]), [(3,), (1, 3)]),
    "sum-mean": (lambda x: x.sum(0) + x.mean(1).sum(), [(3, 4)]),
    "amax": (lambda x: x.amax(1), [(3, 4)]),
    "softmax": (lambda x: lg.softmax(x, -1), [(2, 5)]),
    "log_softmax": (lambda x: lg.log_softmax(x, 0), [(4, 3)]),
    "matmul": (lambda a, b: a @ b, [(3, 4), (4, 2)]),
    "index": (lambda x: x[lg.tensor([0, 2, 2])] * 2, [(4, 3)]),
    "var-norm": (lambda x: x.var(0) + x.norm(), [(5, 2)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_matches_finite_differences(name):
    fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    inputs = [lg.tensor(rng.standard_normal(s)) for s in shapes]
    inputs = [x.double() for x in inputs]
    tangents = [lg.tensor(rng.standard_normal(s)).double() for s in shapes]
    primal, tangent = _jvp(fn, inputs, tangents)
    np.testing.assert_allclose(values(primal), values(fn(*inputs)), rtol=1e-12)
    np.testing.assert_allclose(values(tangent), _numeric(fn, inputs, tangents), rtol=1e-6,
                               atol=1e-7)


def test_tangents_are_dropped_after_the_level():
    x = lg.tensor([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, lg.ones(2))
        y = d * 3
        assert fwAD.unpack_dual(y).tangent is not None
    assert fwAD.unpack_dual(y).tangent is None


def test_make_dual_checks_shapes():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="same shape"):
            fwAD.make_dual(lg.ones(2), lg.ones(3))


def test_forward_and_reverse_mode_compose():
    """A forward-mode tangent through a graph that also records for backward."""
    x = lg.tensor([0.3, -1.2, 2.0], dtype=lg.float64, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, lg.ones(3, dtype=lg.float64))
        y = (d.sin() * d).sum()
        _, t = fwAD.unpack_dual(y)
    y.backward()
    xn = values(x)
    np.testing.assert_allclose(values(x.grad), np.cos(xn) * xn + np.sin(xn))
    np.testing.assert_allclose(values(t), (np.cos(xn) * xn + np.sin(xn)).sum())
