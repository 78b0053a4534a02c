"""Every binary op that takes a Python number for one operand differentiates with respect
to the tensor operand: the backward runs (a rule must not treat the number as a tensor)
and its gradient equals torch's with the number given as a 0-d tensor."""

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
