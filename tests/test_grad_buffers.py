"""Gradient buffers in eager training: a leaf keeps the gradient the engine made (no copy)
when nothing else can reach it, matmul gradients come in their input's layout (so a
linear layer's weight gets a contiguous `.grad`), and `p.add_(g, alpha=s)` is one pass.
Every case where the buffer is shared must still get its own copy."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.runtime import launch


def _copies(kernels) -> int:
    return sum("elementwise" in k.name for k in kernels)


def test_a_fresh_gradient_is_kept_without_a_copy():
    x = lg.randn(300, 200, requires_grad=True)
    w = lg.randn(300, 200)
    loss = (x * w).sum()
    with launch.record_kernels() as kernels:
        loss.backward()
    # the sum's backward broadcasts (no kernel), the product's makes the gradient: one
    # kernel, and no copy into .grad
    assert _copies(kernels) == 1
    np.testing.assert_array_equal(x.grad.numpy(), w.numpy())
    assert x.grad._base is None and x.grad.is_contiguous()


def test_linear_weight_gradient_is_made_in_the_weight_layout():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (5, 8), (5,)))
    layer = lg.nn.Linear(8, 5)
    with lg.no_grad():
        layer.weight.copy_(lg.tensor(ws))
        layer.bias.copy_(lg.tensor(bs))
    for bias in (True, False):
        layer.weight.grad = None
        out = lg.nn.functional.linear(lg.tensor(xs), layer.weight,
                                      layer.bias if bias else None)
        out.square().sum().backward()
        g = layer.weight.grad
        assert g._strides == layer.weight._strides and g._base is None
        tw = torch.tensor(ws, requires_grad=True)
        tout = torch.nn.functional.linear(torch.tensor(xs), tw,
                                          torch.tensor(bs) if bias else None)
        tout.square().sum().backward()
        np.testing.assert_allclose(g.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    # a transposed operand's gradient keeps that operand's (column-major) layout
    a = lg.randn(6, 4, requires_grad=True)
    m = lg.randn(3, 4, requires_grad=True)
    mt = m.t()
    seen = []
    mt.register_hook(lambda g: seen.append(g._strides))
    (a @ mt).sum().backward()
    assert seen == [(1, 4)] and m.grad._strides == (4, 1)


def test_a_gradient_reaching_two_leaves_is_not_shared():
    a, b = lg.randn(1000, requires_grad=True), lg.randn(1000, requires_grad=True)
    (a + b).sum().backward()
    assert a.grad._storage is not b.grad._storage
    a.grad.add_(1.0)
    assert b.grad.tolist() == [1.0] * 1000


def test_the_users_gradient_and_hooked_or_retained_gradients_are_copied():
    a = lg.randn(500, requires_grad=True)
    go = lg.full((500,), 3.0)
    (a + 0.0).backward(go)                  # AddBackward hands `go` itself to the leaf
    assert a.grad._storage is not go._storage
    a.grad.add_(1.0)
    assert go.tolist() == [3.0] * 500
    # a hook that keeps the gradient (or a NumPy view of it) keeps its values
    kept, views = [], []
    b = lg.randn(500, requires_grad=True)
    y = b * 2.0
    y.register_hook(lambda g: kept.append(g))
    z = y + 0.0
    z.register_hook(lambda g: views.append(g.numpy()))
    (z * 1.0).sum().backward()
    b.grad.add_(100.0)
    assert kept[0].tolist() == [1.0] * 500 and views[0][0] == 1.0
    # retain_grad on an intermediate whose gradient flows on unchanged
    c = lg.randn(500, requires_grad=True)
    mid = c + 1.0
    mid.retain_grad()
    (mid * 1.0).sum().backward()
    c.grad.add_(5.0)
    assert mid.grad.tolist() == [1.0] * 500


def test_gradients_returned_by_autograd_grad_are_not_the_leaves_grad():
    x = lg.randn(400, requires_grad=True)
    loss = (x * 3.0).sum()
    (g,) = lg.autograd.grad(loss, [x])
    assert x.grad is None and g.tolist() == [3.0] * 400
    loss = (x * 3.0).sum()
    loss.backward(inputs=[x])
    x.grad.add_(1.0)
    assert g.tolist() == [3.0] * 400


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.float16])
@pytest.mark.parametrize("op", ["add_", "sub_"])
def test_in_place_add_with_alpha(dtype, op):
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal((64, 33))
    g0 = rng.standard_normal((64, 33))
    p, g = lg.tensor(p0, dtype=dtype), lg.tensor(g0, dtype=dtype)
    ref = p.clone()
    getattr(ref, op)(g * -0.25)                   # the two-step form
    out = getattr(p, op)(g, alpha=-0.25)
    assert out is p
    tol = {lg.float16: 2e-3, lg.float32: 1e-6, lg.float64: 1e-15}[dtype]
    np.testing.assert_allclose(p.numpy().astype(np.float64), ref.numpy().astype(np.float64),
                               rtol=tol, atol=tol)
    # recorded by autograd: the gradient of the scaled operand carries alpha
    w = lg.tensor(g0, dtype=dtype, requires_grad=True)
    q = lg.tensor(p0, dtype=dtype) * 1.0
    getattr(q, op)(w, alpha=0.5)
    (gw,) = lg.autograd.grad(q.sum(), [w])
    assert np.allclose(gw.numpy(), 0.5 if op == "add_" else -0.5)


def test_sgd_training_matches_torch_after_the_buffer_changes():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((32, 10)).astype(np.float32)
    y = rng.integers(0, 3, 32)
    weights = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((16, 10), (16,),
                                                                          (3, 16), (3,))]

    def train(m):
        model = m.nn.Sequential(m.nn.Linear(10, 16), m.nn.Tanh(), m.nn.Linear(16, 3))
        with m.no_grad():
            for p, w in zip(model.parameters(), weights):
                p.copy_(m.tensor(w))
        opt = m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        for _ in range(10):
            opt.zero_grad()
            m.nn.functional.cross_entropy(model(m.tensor(X)), m.tensor(y)).backward()
            opt.step()
        return [p.detach().numpy().copy() for p in model.parameters()]
    for a, b in zip(train(lg), train(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
