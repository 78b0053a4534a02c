"""Every example of the seed documents runs on llgrad and prints what the seeds show.

Each script in examples/seed_*.py is a seed's code with `import llgrad as lg`; these tests
run it and check its output. Values that depend on random numbers are checked by the
relations the seeds state (e.g. both w.grad rows equal b.grad) instead of by digits.
"""
from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

import llgrad as lg

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, capsys) -> str:
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


def test_legacy_tutorial_outputs(capsys):
    out = run_example("seed_autograd_tutorial_legacy.py", capsys)
    assert "tensor([[1., 1.],\n        [1., 1.]], requires_grad=True)" in out
    assert "\nNone\n" in out
    assert "tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)" in out
    assert re.search(r"<AddBackward0 object at 0x[0-9a-f]+>", out)
    assert ("tensor([[27., 27.],\n        [27., 27.]], grad_fn=<MulBackward0>) "
            "tensor(27., grad_fn=<MeanBackward0>)") in out
    assert "False\nTrue\n<SumBackward0 object at 0x" in out
    assert "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]])" in out
    assert "True\nTrue\nFalse\n" in out


def test_legacy_doubling_loop_gradient():
    lg.manual_seed(3)
    x = lg.randn(3, requires_grad=True)
    y = x * 2
    k = 1
    while y.data.norm() < 1000:
        y = y * 2
        k += 1
    gradients = lg.tensor([0.1, 1.0, 0.0001], dtype=lg.float)
    y.backward(gradients)
    np.testing.assert_allclose(x.grad.numpy(), np.array([0.1, 1.0, 0.0001]) * 2 ** k,
                               rtol=1e-6)


def test_retain_graph_then_second_backward():
    x = lg.ones(2, 2, requires_grad=True)
    y = x + 2
    y.backward(lg.ones(2, 2), retain_graph=True)
    z = y * y
    gradient = lg.tensor([[1.0, -2.0], [0.5, 3.0]])
    z.backward(gradient)
    expected = 1 + 2 * 3 * np.array([[1.0, -2.0], [0.5, 3.0]])
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_tutorial_outputs(capsys):
    out = run_example("seed_autograd_tutorial.py", capsys)
    assert re.search(r"Gradient function for z = <AddBackward0 object at 0x[0-9a-f]+>", out)
    assert re.search(r"Gradient function for loss = <BinaryCrossEntropyWithLogitsBackward0 "
                     r"object at 0x[0-9a-f]+>", out)
    assert "True\nFalse\nFalse\n" in out
    first = ("First call\ntensor([[4., 2., 2., 2., 2.],\n        [2., 4., 2., 2., 2.],\n"
             "        [2., 2., 4., 2., 2.],\n        [2., 2., 2., 4., 2.],\n"
             "        [2., 2., 2., 2., 4.]])")
    second = ("Second call\ntensor([[8., 4., 4., 4., 4.],\n        [4., 8., 4., 4., 4.],\n"
              "        [4., 4., 8., 4., 4.],\n        [4., 4., 4., 8., 4.],\n"
              "        [4., 4., 4., 4., 8.]])")
    third = first.replace("First call", "Call after zeroing gradients")
    assert first in out and second in out and third in out


def test_tutorial_gradients_have_the_shown_structure():
    """x is all ones, so every row of w.grad equals b.grad (the seed's printout)."""
    lg.manual_seed(1)
    x, y = lg.ones(5), lg.zeros(3)
    w = lg.randn(5, 3, requires_grad=True)
    b = lg.randn(3, requires_grad=True)
    loss = lg.nn.functional.binary_cross_entropy_with_logits(lg.matmul(x, w) + b, y)
    loss.backward()
    for row in w.grad.numpy():
        np.testing.assert_allclose(row, b.grad.numpy(), rtol=1e-6)
    z = (x.numpy() @ w.detach().numpy() + b.detach().numpy()).astype(np.float64)
    np.testing.assert_allclose(b.grad.numpy(), 1 / (1 + np.exp(-z)) / 3, rtol=1e-5)


def test_reference_outputs(capsys):
    out = run_example("seed_autograd_reference.py", capsys)
    lines = out.splitlines()
    assert lines[0] == "tensor([1., 1., 1.])"
    assert lines[1] == "tensor([2., 4., 6.])"
    assert lines[2:7] == ["False", "False", "True", "False", "False"]
    assert "Gradcheck passed: True" in out
    assert "Gradgradcheck passed: True" in out
    assert "tensor([2., 4., 6.])\ntensor([1., 1., 1.])\ntensor([2., 2., 2.])" in out
    assert "tensor([ 3., 12., 27.], grad_fn=" in out
    assert "tensor([ 6., 12., 18.])" in out
    assert "tensor([[2., 0., 0.],\n        [0., 4., 0.],\n        [0., 0., 6.]])" in out
    assert "tensor([[2., 0., 0.],\n        [0., 2., 0.],\n        [0., 0., 2.]])" in out
    assert lines[-1] == "ndarray"


def test_variable_hook_output(capsys):
    out = run_example("seed_variable_hooks.py", capsys)
    assert out.strip() == "tensor([2., 2., 2.])"


def test_second_backward_without_retain_graph_raises():
    x = lg.ones(2, 2, requires_grad=True)
    y = x * x
    z = y.sum()
    z.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        z.backward()


def test_second_backward_through_add_only_does_not_raise():
    """AddBackward0 saves nothing, so PyTorch allows a second backward through it."""
    x = lg.ones(2, 2, requires_grad=True)
    y = (x + 2).sum()
    y.backward()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones((2, 2)))


def test_nonscalar_backward_needs_gradient():
    x = lg.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        (x * 2).backward()


def test_inplace_on_saved_tensor_raises_at_backward():
    x = lg.tensor([1., 2., 3.], requires_grad=True)
    y = x.sigmoid()          # saves its output
    y += 1
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*version 1; "
                                           r"expected version 0"):
        y.sum().backward()


def test_inplace_on_leaf_raises_at_once():
    x = lg.tensor([1., 2., 3.], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x += 1


def test_integer_tensor_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point and complex dtype"):
        lg.tensor([1, 2, 3], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point and complex dtype"):
        lg.tensor([1, 2, 3]).requires_grad_()
