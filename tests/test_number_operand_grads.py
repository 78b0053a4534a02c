"""Binary ops' gradients at the inputs their rules special-case, against torch's: a Python
number for one operand (the backward runs -- a rule must not treat the number as a
tensor -- and equals torch's with the number as a 0-d tensor), and operands that tie
(equal values, signed zeros: where max/min-like and nextafter-like rules split)."""

import numpy as np
import pytest

import llgrad as lg
from llgrad.ir import registry

torch = pytest.importorskip("torch")

BINARY = sorted(n for n, d in registry.OPS.items() if d.group is registry.Group.BINARY)
# ops with no derivative in torch either (torch raises on their backward too)
NO_DERIVATIVE = {"heaviside"}


def _cases():
    for name in BINARY:
        if name in NO_DERIVATIVE or not callable(getattr(lg, name, None)):
            continue
        if getattr(torch, name, None) is None:
            continue
        for position in (0, 1):
            for number in (0.5, 2, -1.25):
                yield name, position, number


@pytest.mark.parametrize("name,position,number", list(_cases()))
def test_gradient_with_a_number_operand(name, position, number):
    values = [0.3, -0.7, 1.5, 2.0]
    x = lg.tensor(values, dtype=lg.float64, requires_grad=True)
    args = (x, number) if position == 0 else (number, x)
    try:
        y = getattr(lg, name)(*args)
    except (TypeError, RuntimeError):
        return  # the op refuses a number in this position (as torch does)
    if not y.requires_grad:
        return  # integer or boolean result: nothing to differentiate
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    tn = torch.tensor(number, dtype=torch.float64)
    targs = (tx, tn) if position == 0 else (tn, tx)
    try:
        getattr(torch, name)(*targs).sum().backward()
    except NotImplementedError:
        # no derivative for this operand in torch: llgrad says the same
        with pytest.raises(NotImplementedError):
            y.sum().backward()
        return
    except (TypeError, RuntimeError):
        y.sum().backward()  # torch has no reference here; llgrad's backward runs
        return
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


TIED_A = [0.3, 2.0, -1.5, 0.0, 0.0, -0.0]
TIED_B = [1.0, 2.0, -1.5, 0.0, -0.0, 0.0]


@pytest.mark.parametrize("name", [n for n in BINARY if callable(getattr(lg, n, None))])
def test_gradients_where_operands_tie(name):
    tf = getattr(torch, name, None)
    if tf is None:
        pytest.skip(f"torch has no {name}")
    ta = torch.tensor(TIED_A, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(TIED_B, dtype=torch.float64, requires_grad=True)
    try:
        tout = tf(ta, tb)
        if not tout.requires_grad:
            return  # integer or boolean result: nothing to differentiate
        tout.sum().backward()
    except (TypeError, RuntimeError, NotImplementedError):
        return  # no float64 gradient in torch to compare with
    a = lg.tensor(TIED_A, dtype=lg.float64, requires_grad=True)
    b = lg.tensor(TIED_B, dtype=lg.float64, requires_grad=True)
    getattr(lg, name)(a, b).sum().backward()
    for got, want in ((a.grad, ta.grad), (b.grad, tb.grad)):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
