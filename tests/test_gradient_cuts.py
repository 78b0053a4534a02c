"""Gradient cuts inside compiled functions: `detach()`, `.data` and `no_grad` stop the
compiled gradient exactly where they stop eager autograd's (a `stop_gradient` node in
the traced graph, removed once autodiff has run)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg


def _no_grad_scale(x):
    with lg.no_grad():
        return x * 3.0


def _no_grad_then_enable(x):
    with lg.no_grad():
        y = x.exp()
        with lg.enable_grad():
            z = x.sin()
    return (y * z * x).sum()


def _detached_view(x):
    return (x[1:].detach() * x[:-1]).sum() + (x.data ** 2).sum()


def _cut_in_a_branch(x):
    s = x.sum()
    with lg.no_grad():
        m = x.mean()
    return ((x - m) ** 2).sum() + s * m


CASES = {
    "detach": lambda x: (x.detach() * x).sum(),
    "data": lambda x: (x.data * x ** 2).sum(),
    "no_grad": lambda x: (_no_grad_scale(x) * x).sum(),
    "no_grad_then_enable_grad": _no_grad_then_enable,
    "detached_view": _detached_view,
    "cut_in_a_branch": _cut_in_a_branch,
    "detach_reduction": lambda x: (x / x.norm().detach()).sum(),
}


def _x(dtype=lg.float64):
    return lg.tensor(np.linspace(-1.0, 2.0, 6), dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_gradient_stops_where_eager_stops(name):
    f = CASES[name]
    x = _x()
    expected = lg.autograd.grad(f(x), [x])[0].numpy()
    got = lg.autograd.grad(lg.compile(f)(x), [x])[0].numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    value, grad = lg.compile(lg.value_and_grad(f))(x)
    np.testing.assert_allclose(grad.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(value.item(), f(x).item(), rtol=1e-12)
    # the gradient is differentiable where eager's is (a transform's result composes)
    assert grad.requires_grad == lg.value_and_grad(f)(x)[1].requires_grad


def test_against_torch():
    torch = pytest.importorskip("torch")
    xs = np.linspace(-1.0, 2.0, 6)
    for name, f in sorted(CASES.items()):
        if name == "no_grad_then_enable_grad":
            continue                    # uses llgrad's grad-mode context managers directly
        x = _x()
        got = lg.autograd.grad(lg.compile(f)(x), [x])[0].numpy()
        t = torch.tensor(xs, requires_grad=True)
        with_torch = {"detach": lambda x: (x.detach() * x).sum(),
                      "data": lambda x: (x.data * x ** 2).sum(),
                      "no_grad": lambda x: (_torch_no_grad(torch, x) * x).sum(),
                      "detached_view": lambda x: (x[1:].detach() * x[:-1]).sum() +
                      (x.data ** 2).sum(),
                      "cut_in_a_branch": lambda x: _torch_branch(torch, x),
                      "detach_reduction": lambda x: (x / x.norm().detach()).sum()}[name]
        want = torch.autograd.grad(with_torch(t), [t])[0].numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)


def _torch_no_grad(torch, x):
    with torch.no_grad():
        return x * 3.0


def _torch_branch(torch, x):
    s = x.sum()
    with torch.no_grad():
        m = x.mean()
    return ((x - m) ** 2).sum() + s * m


def test_second_derivative_respects_the_cut():
    f = lg.compile(lambda x: (x.detach() * x ** 3).sum())
    x = _x()
    (g,) = lg.autograd.grad(f(x), [x], create_graph=True)
    (h,) = lg.autograd.grad(g.sum(), [x])
    xs = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), 3 * xs ** 3, rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), 6 * xs ** 2, rtol=1e-12)     # d/dx 3 d x^2, d = x


def test_outputs_of_cut_values_do_not_require_grad():
    f = lambda x: (x.detach() * 2.0, x * 3.0, _no_grad_scale(x))   # noqa: E731
    x = _x()
    eager = [o.requires_grad for o in f(x)]
    compiled = [o.requires_grad for o in lg.compile(f)(x)]
    assert eager == compiled == [False, True, False]
    y = lg.compile(lambda x: x.detach() * 2.0)(x)
    assert y.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_captured_parameter_under_no_grad():
    w = lg.tensor([0.5, -1.5, 2.0], dtype=lg.float64, requires_grad=True)

    def f(x):
        with lg.no_grad():
            scale = (w * w).sum()
        return (x * w).sum() * scale

    x = lg.tensor([1.0, 2.0, 3.0], dtype=lg.float64, requires_grad=True)
    f(x).backward()
    want_w, want_x = w.grad.numpy().copy(), x.grad.numpy().copy()
    w.grad = x.grad = None
    lg.compile(f)(x).backward()
    np.testing.assert_allclose(w.grad.numpy(), want_w, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), want_x, rtol=1e-12)


def test_the_cut_is_a_node_of_the_traced_graph_only():
    report = lg.compile(lambda x: (x.detach() * x).sum()).inspect(_x())
    assert "stop_gradient" in str(report.graph)
    assert "stop_gradient" not in str(report.optimized)
    assert "stop_gradient" not in str(report.joint_graph).split("return")[-1]


def test_detach_in_place_runs_eagerly():
    def f(x):
        y = x.exp()
        y.detach_()
        return (y * x).sum()

    x = _x()
    cf = lg.compile(f)
    got = lg.autograd.grad(cf(x), [x])[0].numpy()
    np.testing.assert_allclose(got, np.exp(x.detach().numpy()), rtol=1e-12)
    assert any("detach_()" in b for b in cf.graph_breaks)


def test_no_cut_without_grad():
    # nothing requires grad: the trace has no stop_gradient node to carry
    report = lg.compile(lambda x: x.detach() * 2.0).inspect(lg.ones(3))
    assert "stop_gradient" not in str(report.graph)
