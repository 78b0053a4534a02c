"""Fused derivative rules (`llgrad.tape.fused`): an elementwise op's rule runs as one
kernel, with the gradients the rule gives as written, PyTorch's, and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.tape import fused

torch = pytest.importorskip("torch")

OPS = {
    "tanh": (lambda x, y: lg.tanh(x), lambda x, y: torch.tanh(x)),
    "sin": (lambda x, y: lg.sin(x), lambda x, y: torch.sin(x)),
    "sigmoid": (lambda x, y: lg.sigmoid(x), lambda x, y: torch.sigmoid(x)),
    "exp": (lambda x, y: lg.exp(x), lambda x, y: torch.exp(x)),
    "mul": (lambda x, y: x * y, lambda x, y: x * y),
    "div": (lambda x, y: x / y, lambda x, y: x / y),
    "sub_scalar": (lambda x, y: x - 0.5, lambda x, y: x - 0.5),
    "maximum": (lambda x, y: lg.maximum(x, y), lambda x, y: torch.maximum(x, y)),
    "erf": (lambda x, y: lg.erf(x), lambda x, y: torch.erf(x)),
    "abs": (lambda x, y: lg.abs(x), lambda x, y: torch.abs(x)),
}


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(fused, "_keys", {})
    monkeypatch.setattr(fused, "_unfusable", set())
    return fused


def _grads(f, lib, x, y):
    """The gradient for x (y is a constant: the rule gives one gradient)."""
    xs = [lib.tensor(x, requires_grad=True), lib.tensor(y)]
    out = f(*xs)
    g = lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(x.dtype))
    return lib.autograd.grad(out, [xs[0]], g)[0].detach().numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", list(OPS))
def test_fused_rules_match_the_rule_as_written_and_torch(op, dtype, fresh, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2, (6, 7)).astype(dtype)
    y = rng.uniform(0.5, 2, (6, 7)).astype(dtype)
    ours, theirs = OPS[op]
    got = _grads(ours, lg, x, y)
    fusable = [k for k, v in fresh._keys.items() if v is not fused._NOT_FUSABLE]
    if op != "sub_scalar":                  # sub's gradient is g itself: nothing to fuse
        assert fusable, fresh._keys
    monkeypatch.setattr(fused, "ENABLED", False)
    plain = _grads(ours, lg, x, y)
    want = _grads(theirs, torch, x, y)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, plain, rtol=tol, atol=tol)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_a_fused_rule_is_one_kernel(fresh):
    """tanh's rule `g * (1 - y * y)` is one expression over (g, y) and the number 1."""
    x = lg.randn(300, requires_grad=True)
    y = lg.tanh(x)
    y.backward(lg.ones(300))
    (entry,) = [v for v in fresh._keys.values() if v is not fused._NOT_FUSABLE]
    launch, slot, direct = entry
    assert launch is not None and direct is not None     # one kernel, the number 1 bound
    assert slot == 0
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh(x.detach().numpy()) ** 2,
                               rtol=1e-5, atol=1e-6)


def test_unfusable_rules_run_as_written(fresh):
    """A broadcast product (its gradients differ in shape), a complex tanh and a rule that
    gives two gradients are not fused, and are right."""
    a = lg.randn(3, 1, requires_grad=True)
    b = lg.randn(3, 4, requires_grad=True)
    (a * b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.detach().numpy().sum(1, keepdims=True),
                               rtol=1e-5)
    z = lg.tensor(np.array([1 + 2j, 0.5 - 1j]), requires_grad=True)
    lg.tanh(z).abs().sum().backward()
    zt = torch.tensor(np.array([1 + 2j, 0.5 - 1j]), requires_grad=True)
    torch.tanh(zt).abs().sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), zt.grad.numpy(), rtol=1e-12)
    assert [v for k, v in fresh._keys.items() if k[0][0] == "tanh"] == [fused._NOT_FUSABLE]
    x, y = lg.randn(5, requires_grad=True), lg.randn(5, requires_grad=True)
    (x * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())
    np.testing.assert_allclose(y.grad.numpy(), x.detach().numpy())
    mul_keys = [v for k, v in fresh._keys.items() if k[0][0] == "mul"]
    assert mul_keys and all(v is fused._NOT_FUSABLE for v in mul_keys)


def test_saved_tensor_checks_and_double_backward(fresh):
    """A saved input written in place raises PyTorch's error through the fused path;
    create_graph=True runs the rule as written (differentiable)."""
    x = lg.randn(4, requires_grad=True)
    h = x * 1.0
    y = lg.sin(h)
    y.sum().backward(retain_graph=True)          # fuses sin's rule
    with lg.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x = lg.randn(4, dtype=lg.float64, requires_grad=True)
    for _ in range(2):
        (g,) = lg.autograd.grad(lg.tanh(x).sum(), [x], create_graph=True)
    (gg,) = lg.autograd.grad(g.sum(), [x])
    t = np.tanh(x.detach().numpy())
    np.testing.assert_allclose(gg.numpy(), -2 * t * (1 - t * t), rtol=1e-12)


def test_every_backward_of_a_key_gives_the_same_bits(fresh):
    x = lg.randn(1000)
    grads = []
    for _ in range(4):
        xr = x.detach().requires_grad_()
        lg.sigmoid(lg.tanh(xr) * 3.0).sum().backward()
        grads.append(xr.grad.numpy())
    for g in grads[1:]:
        np.testing.assert_array_equal(g, grads[0])


@pytest.mark.parametrize("base", [-2, 0, 0.0, 2, -1.5])
def test_pow_of_a_number_gives_pytorchs_exponent_gradient(base):
    """`pow(number, t)`'s gradient for the exponent is `out * log(base)`: NaN for a
    negative base, and for a zero base 0 where t >= 0 and -inf elsewhere (PyTorch's rule;
    it was 0 for every base <= 0). Found by the slow fuzz run."""
    e = np.array([-1.0, 0.0, 0.5, 2.0])
    t = lg.tensor(e, requires_grad=True)
    (g,) = lg.autograd.grad(lg.pow(base, t).sum(), [t])
    tt = torch.tensor(e, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.pow(base, tt).sum(), [tt])
    np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("base_dtype", ["int32", "int64", "float32", "float16"])
@pytest.mark.parametrize("compiled", [False, True])
def test_pow_exponent_gradient_takes_the_log_in_the_results_dtype(base_dtype, compiled):
    """A float64 exponent over an int32/float32 base: PyTorch takes log(base) in float64;
    llgrad took it in float32 (a relative error of 1e-8 in a float64 gradient). Found by
    the slow fuzz run (`pow(T(int32, []), T(float64, [], requires_grad=True))`)."""
    base = np.array([4, 3, 1, 2], dtype=base_dtype) if "int" in base_dtype else \
        np.array([4.0, 3.3, 1.0, 0.7], dtype=base_dtype)
    e = np.array([0.0012301533574825742, 0.7, 2.0, -1.5])
    t = lg.tensor(e, requires_grad=True)

    def f(b, x):
        return lg.pow(b, x).sum()
    run = lg.compile(f) if compiled else f
    (g,) = lg.autograd.grad(run(lg.tensor(base), t), [t])
    tt = torch.tensor(e, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.pow(torch.tensor(base), tt).sum(), [tt])
    np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-14)
