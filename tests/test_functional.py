"""autograd.functional: the docs' examples, structures and values against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import functional as AF

from conftest import needs_torch, t64, torch, vals

TF = torch.autograd.functional if torch is not None else None


def assert_same(got, want, path="result"):
    """`got` (llgrad) has `want`'s nesting, shapes and values (want: torch or numpy).

    torch's forward-mode jacobian nests lists where reverse mode nests tuples; llgrad
    returns tuples for both, so a list in `want` stands for a tuple."""
    if isinstance(want, list):
        want = tuple(want)
    if isinstance(want, tuple):
        assert isinstance(got, tuple), f"{path}: expected a tuple, got {type(got).__name__}"
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]")
        return
    assert isinstance(got, lg.Tensor), f"{path}: expected a Tensor, got {type(got).__name__}"
    w = want.detach().numpy() if torch is not None and isinstance(want, torch.Tensor) else \
        np.asarray(want)
    assert tuple(got.shape) == w.shape, f"{path}: shape {tuple(got.shape)} != {w.shape}"
    np.testing.assert_allclose(vals(got), w, rtol=1e-9, atol=1e-12, err_msg=path)


RNG = np.random.default_rng(3)


# --------------------------------------------------------------------------------------
# the docs' examples
# --------------------------------------------------------------------------------------

def test_jacobian_of_square():
    jac = AF.jacobian(lambda x: x ** 2, t64([1.0, 2.0, 3.0]))
    assert_same(jac, np.diag([2.0, 4.0, 6.0]))
    assert jac.grad_fn is None and not jac.requires_grad


def test_hessian_of_square_sum():
    hess = AF.hessian(lambda x: (x ** 2).sum(), t64([1.0, 2.0, 3.0]))
    assert_same(hess, np.diag([2.0, 2.0, 2.0]))


def test_jacobian_exp_reducer():
    xv = RNG.random((2, 2))
    jac = AF.jacobian(lambda x: x.exp().sum(dim=1), t64(xv))
    want = np.zeros((2, 2, 2))
    for i in range(2):
        want[i, i, :] = np.exp(xv[i])
    assert_same(jac, want)
    jac_g = AF.jacobian(lambda x: x.exp().sum(dim=1), t64(xv), create_graph=True)
    assert jac_g.grad_fn is not None


def test_jacobian_exp_adder_two_inputs():
    xv, yv = RNG.random(2), RNG.random(2)
    jac = AF.jacobian(lambda x, y: 2 * x.exp() + 3 * y, (t64(xv), t64(yv)))
    assert_same(jac, (np.diag(2 * np.exp(xv)), 3 * np.eye(2)))


def test_hessian_pow_reducer_shape():
    xv = RNG.random((2, 2))
    hess = AF.hessian(lambda x: x.pow(3).sum(), t64(xv))
    want = np.zeros((2, 2, 2, 2))
    for i in range(2):
        for j in range(2):
            want[i, j, i, j] = 6 * xv[i, j]
    assert_same(hess, want)


def test_hessian_pow_adder_reducer_two_inputs():
    xv, yv = RNG.random(2), RNG.random(2)
    hess = AF.hessian(lambda x, y: (2 * x.pow(2) + 3 * y.pow(2)).sum(), (t64(xv), t64(yv)))
    z = np.zeros((2, 2))
    assert_same(hess, ((4 * np.eye(2), z), (z, 6 * np.eye(2))))


def test_vjp_examples():
    xv = RNG.random((4, 4))
    out, v = AF.vjp(lambda x: x.exp().sum(dim=1), t64(xv), t64(np.ones(4)))
    assert_same(out, np.exp(xv).sum(1))
    assert_same(v, np.exp(xv))
    a, b = RNG.random(2), RNG.random(2)
    out, (ga, gb) = AF.vjp(lambda x, y: 2 * x + 3 * y, (t64(a), t64(b)), t64(np.ones(2)))
    assert_same(out, 2 * a + 3 * b)
    assert_same((ga, gb), (np.full(2, 2.0), np.full(2, 3.0)))


def test_jvp_examples():
    xv = RNG.random((4, 4))
    out, jv = AF.jvp(lambda x: x.exp().sum(dim=1), t64(xv), t64(np.ones((4, 4))))
    assert_same(out, np.exp(xv).sum(1))
    assert_same(jv, np.exp(xv).sum(1))
    a, b = RNG.random(2), RNG.random(2)
    out, jv = AF.jvp(lambda x, y: 2 * x + 3 * y, (t64(a), t64(b)),
                     (t64(np.ones(2)), t64(np.ones(2))))
    assert_same(jv, np.full(2, 5.0))


def test_vhp_and_hvp_examples():
    xv = RNG.random((2, 2))
    out, r = AF.vhp(lambda x: x.pow(3).sum(), t64(xv), t64(np.ones((2, 2))))
    assert_same(out, (xv ** 3).sum())
    assert_same(r, 6 * xv)
    out, r = AF.hvp(lambda x: x.pow(3).sum(), t64(xv), t64(np.ones((2, 2))))
    assert_same(r, 6 * xv)
    a, b = RNG.random(2), RNG.random(2)
    f = lambda x, y: (2 * x.pow(2) + 3 * y.pow(2)).sum()     # noqa: E731
    for fn in (AF.vhp, AF.hvp):
        _, r = fn(f, (t64(a), t64(b)), (t64(np.zeros(2)), t64(np.ones(2))))
        assert_same(r, (np.zeros(2), np.full(2, 6.0)))


def test_v_may_be_omitted_only_for_single_elements():
    out, g = AF.vjp(lambda x: (x * x).sum(), t64([1.0, 2.0]))
    assert_same(g, np.array([2.0, 4.0]))
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided "
                                           "function returns a single Tensor with a single "
                                           "element."):
        AF.vjp(lambda x: x * x, t64([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the "
                                           "user-provided function is a single Tensor with a "
                                           "single element."):
        AF.jvp(lambda x: x * x, t64([1.0, 2.0]))
    _, jv = AF.jvp(lambda x: x * x, t64([3.0]))
    assert_same(jv, np.array([6.0]))


def test_v_validation():
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be llgrad.Size\(\[2\]\) "
                                           r"but got llgrad.Size\(\[3\]\)."):
        AF.vjp(lambda x: x * x, t64([1.0, 2.0]), t64([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but "
                                           "got 1."):
        AF.jvp(lambda x, y: x * y, (t64([1.0]), t64([2.0])), (t64([1.0]),))
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor "
                                        "or a tuple of Tensors but the value at index 1 has "
                                        "type"):
        AF.jacobian(lambda x, y: x, (t64([1.0]), 3.0))


def test_hessian_needs_a_scalar():
    with pytest.raises(RuntimeError, match="The Tensor returned by the function given to "
                                           "hessian should contain a single element"):
        AF.hessian(lambda x: x * x, t64([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="The function given to hessian should return a "
                                           "single Tensor"):
        AF.hessian(lambda x: (x.sum(), x.sum()), t64([1.0, 2.0]))


# --------------------------------------------------------------------------------------
# strict mode and create_graph
# --------------------------------------------------------------------------------------

def test_strict_reports_independent_inputs():
    x, y = t64([1.0, 2.0]), t64([3.0, 4.0])
    assert_same(AF.jacobian(lambda a, b: a * 2, (x, y)), (2 * np.eye(2), np.zeros((2, 2))))
    with pytest.raises(RuntimeError, match="^Output 0 of the user-provided function is "
                                           "independent of input 1. This is not allowed in "
                                           "strict mode.$"):
        AF.jacobian(lambda a, b: a * 2, (x, y), strict=True)
    with pytest.raises(RuntimeError, match="does not require gradients"):
        AF.jacobian(lambda a: t64([1.0, 2.0]), x, strict=True)
    with pytest.raises(RuntimeError, match="The output of the user-provided function is "
                                           "independent of input 1"):
        AF.vjp(lambda a, b: a * 2, (x, y), t64([1.0, 1.0]), strict=True)
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorize=True` are not "
                                           "supported together"):
        AF.jacobian(lambda a: a, x, strict=True, vectorize=True)


def test_strict_hessian_of_linear_function():
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with "
                                           "respect to input 0 is independent of the input"):
        AF.hessian(lambda a: (a * 3).sum(), t64([1.0, 2.0]), strict=True)


def test_create_graph_results_are_differentiable():
    x = t64([0.5, 1.5], requires_grad=True)
    jac = AF.jacobian(lambda a: a ** 3, x, create_graph=True)
    assert jac.requires_grad
    g, = lg.autograd.grad(jac, x, t64(np.eye(2)))
    assert_same(g, 6 * np.array([0.5, 1.5]))
    out, v = AF.vjp(lambda a: a ** 3, x, t64([1.0, 1.0]))
    assert not out.requires_grad and not v.requires_grad


# --------------------------------------------------------------------------------------
# against torch.autograd.functional
# --------------------------------------------------------------------------------------

A = RNG.standard_normal((2, 3))
B = RNG.standard_normal(3)
V_OUT = (RNG.standard_normal((2, 3)), RNG.standard_normal(3))


def _pair(mod, lib):
    def f(a, b):
        return (a * b * a).sin(), (b ** 2) * 3.0
    return f


def _single_out(mod, lib):
    return lambda a, b: (a * b).exp() * a


def _single_in_multi_out(mod, lib):
    return lambda a: (a * a, a.sin())


def _scalar(mod, lib):
    return lambda a, b: ((a * b).sin() * a).sum() + (b ** 3).sum()


def _inputs(lib, single=False):
    if lib == "torch":
        ins = (torch.tensor(A), torch.tensor(B))
    else:
        ins = (t64(A), t64(B))
    return ins[0] if single else ins


def _cases():
    return [("pair", _pair, False), ("single_out", _single_out, False),
            ("single_in_multi_out", _single_in_multi_out, True)]


@needs_torch
@pytest.mark.parametrize("kwargs", [{}, {"vectorize": True}, {"create_graph": True},
                                    {"vectorize": True, "strategy": "forward-mode"}],
                         ids=["reverse", "vectorized", "create_graph", "forward"])
@pytest.mark.parametrize("case", _cases(), ids=[c[0] for c in _cases()])
def test_jacobian_matches_torch(case, kwargs):
    _, make, single = case
    want = TF.jacobian(make(torch, "torch"), _inputs("torch", single), **kwargs)
    got = AF.jacobian(make(lg, "lg"), _inputs("lg", single), **kwargs)
    assert_same(got, want)


@needs_torch
@pytest.mark.parametrize("kwargs", [{}, {"vectorize": True},
                                    {"vectorize": True, "outer_jacobian_strategy":
                                     "forward-mode"}],
                         ids=["reverse", "vectorized", "forward"])
def test_hessian_matches_torch(kwargs):
    want = TF.hessian(_scalar(torch, "torch"), _inputs("torch"), **kwargs)
    got = AF.hessian(_scalar(lg, "lg"), _inputs("lg"), **kwargs)
    assert_same(got, want)


@needs_torch
def test_vjp_jvp_hvp_vhp_match_torch():
    tv = tuple(torch.tensor(v) for v in V_OUT)
    lv = tuple(t64(v) for v in V_OUT)
    assert_same(AF.vjp(_pair(lg, "lg"), _inputs("lg"), lv),
                TF.vjp(_pair(torch, "torch"), _inputs("torch"), tv))
    tin = (torch.tensor(A[::-1].copy()), torch.tensor(B[::-1].copy()))
    lin = (t64(A[::-1].copy()), t64(B[::-1].copy()))
    assert_same(AF.jvp(_pair(lg, "lg"), _inputs("lg"), lin),
                TF.jvp(_pair(torch, "torch"), _inputs("torch"), tin))
    assert_same(AF.hvp(_scalar(lg, "lg"), _inputs("lg"), lin),
                TF.hvp(_scalar(torch, "torch"), _inputs("torch"), tin))
    assert_same(AF.vhp(_scalar(lg, "lg"), _inputs("lg"), lin),
                TF.vhp(_scalar(torch, "torch"), _inputs("torch"), tin))


@needs_torch
def test_strict_messages_match_torch():
    def messages(mod, fn, *args, **kw):
        try:
            fn(*args, **kw)
        except RuntimeError as e:
            return str(e)
        return None

    cases = [
        ("jacobian", lambda m: (lambda a, b: a * 2), {"strict": True}),
        ("hessian", lambda m: (lambda a, b: (a * 3).sum() + (b * 2).sum()), {"strict": True}),
    ]
    for name, make, kw in cases:
        t = messages(torch, getattr(TF, name), make(torch), _inputs("torch"), **kw)
        ll = messages(lg, getattr(AF, name), make(lg), _inputs("lg"), **kw)
        assert t is not None and t == ll, (name, t, ll)
