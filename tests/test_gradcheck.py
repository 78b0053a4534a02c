"""gradcheck / gradgradcheck: pass on correct derivatives, fail (raise or False) on wrong ones."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import Function, GradcheckError, gradcheck, gradgradcheck
from llgrad.autograd.gradcheck import get_analytical_jacobian, get_numerical_jacobian

from conftest import needs_torch, t64, torch, vals


RNG = np.random.default_rng(42)
X = RNG.uniform(0.5, 1.5, (2, 3))
Y = RNG.uniform(-1.0, 1.0, (3,))


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


class WrongSquare(Function):
    """Deliberately wrong: d(x^2)/dx reported as 3x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x * g


class WrongSecondInput(Function):
    """Right for input 0, wrong (sign) for input 1."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, -(g * x).sum(0)


# --------------------------------------------------------------------------------------
# passing
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fast_mode", [False, True])
def test_passes_on_builtin_ops(fast_mode):
    x, y = t64(X, True), t64(Y, True)
    assert gradcheck(lambda a, b: (a * b).exp() / (a + 2.0), (x, y), fast_mode=fast_mode)
    assert gradcheck(lambda a: a.tanh() * a.sin(), (x,), fast_mode=fast_mode)


def test_passes_on_custom_function_and_multiple_outputs():
    x, y = t64(X, True), t64(Y, True)
    assert gradcheck(Square.apply, (x,))
    assert gradcheck(lambda a, b: (Square.apply(a) * b, a - b, b.exp()), (x, y))


def test_non_tensor_and_non_differentiable_inputs():
    x = t64(X, True)
    const = t64(Y)                          # does not require grad: not checked
    assert gradcheck(lambda a, c, k: (a * c) ** k, (x, const, 3))


def test_inputs_are_restored():
    x = t64(X, True)
    before, version = vals(x).copy(), x._version
    gradcheck(lambda a: a.exp(), (x,))
    np.testing.assert_array_equal(vals(x), before)
    assert x._version == version


# --------------------------------------------------------------------------------------
# failing
# --------------------------------------------------------------------------------------

def test_wrong_backward_raises_with_pytorch_message():
    y = t64(Y, True)
    with pytest.raises(GradcheckError) as err:
        gradcheck(WrongSquare.apply, (y,))
    msg = str(err.value)
    assert isinstance(err.value, RuntimeError)
    assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,\n"
                          "numerical:tensor(")
    assert "\nanalytical:tensor(" in msg
    # the printed matrices are the (in_numel, out_numel) Jacobians: 2y and 3y on the diagonal
    num = np.diag(2 * Y)
    assert f"{num[0, 0]:.4f}" in msg and f"{3 * Y[0]:.4f}" in msg


def test_wrong_backward_returns_false_without_raising():
    y = t64(Y, True)
    assert gradcheck(WrongSquare.apply, (y,), raise_exception=False) is False
    assert gradcheck(WrongSquare.apply, (y,), raise_exception=False, fast_mode=True) is False


def test_wrong_backward_fails_in_fast_mode_with_slow_mode_details():
    y = t64(Y, True)
    with pytest.raises(GradcheckError) as err:
        gradcheck(WrongSquare.apply, (y,), fast_mode=True)
    msg = str(err.value)
    assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,")
    assert "computed \nin fast mode" in msg and "The max per-element difference (slow mode)" in msg


def test_mismatch_names_the_right_input():
    x, y = t64(X, True), t64(Y, True)
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to "
                                             "input 1,"):
        gradcheck(WrongSecondInput.apply, (x, y))
    # with input 1 not requiring grad, only input 0 is checked, and it is right
    assert gradcheck(WrongSecondInput.apply, (x, t64(Y)))


def test_tolerances_decide():
    class SlightlyOff(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2.01

    x = t64(Y, True)
    assert not gradcheck(SlightlyOff.apply, (x,), raise_exception=False)
    assert gradcheck(SlightlyOff.apply, (x,), rtol=1e-2)


def test_non_reentrant_backward_is_caught():
    class Noisy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2 * (1 + lg.rand(g.shape, dtype=g.dtype) * 1e-9)

    x = t64(Y, True)
    with pytest.raises(GradcheckError, match="Backward is not reentrant"):
        gradcheck(Noisy.apply, (x,))
    assert gradcheck(Noisy.apply, (x,), nondet_tol=1e-7)


def test_undefined_output_grads_are_checked():
    class HandlesNone(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            out = None
            if g1 is not None:
                out = g1 * 2
            if g2 is not None:
                out = g2 * 3 if out is None else out + g2 * 3
            return out

    class ChokesOnUndefined(Function):
        """Fine on every Jacobian row; raises when one grad is undefined and the other is
        all zeros, which is exactly what the undefined-grad check feeds it."""

        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if g1 is None and not bool(g2.ne(0).any()):
                raise RuntimeError("cannot handle an undefined gradient")
            return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)

    x = t64(Y, True)
    assert gradcheck(HandlesNone.apply, (x,))
    with pytest.raises(GradcheckError, match="Expected backward function to handle undefined "
                                             "output grads"):
        gradcheck(ChokesOnUndefined.apply, (x,))
    assert gradcheck(ChokesOnUndefined.apply, (x,), check_undefined_grad=False)


def test_backward_must_scale_with_grad_output():
    class IgnoresZero(Function):
        """Right on every one-hot grad_output, but not linear in it (returns 1 for 0)."""

        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g + (g == 0).all().to(g.dtype)

    x = t64(Y, True)
    with pytest.raises(GradcheckError, match="backward not multiplied by grad_output"):
        gradcheck(IgnoresZero.apply, (x,))


def test_no_input_requiring_grad_is_an_error():
    with pytest.raises(ValueError, match="gradcheck expects at least one input tensor to "
                                         "require gradient"):
        gradcheck(lambda a: a * 2, (t64(Y),))


def test_single_precision_warns():
    x = lg.tensor(Y.astype(np.float32), requires_grad=True)
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double "
                                         "precision floating point"):
        gradcheck(lambda a: a * 2, (x,), eps=1e-3, atol=1e-2, rtol=1e-2)


def test_overlapping_input_is_rejected():
    x = t64([1.0], True).expand(3)
    with pytest.raises(RuntimeError, match="has a dimension with stride 0"):
        gradcheck(lambda a: a * 2, (x,))


def test_no_differentiable_outputs_needs_zero_numerical_gradient():
    x = t64(Y, True)
    assert gradcheck(lambda a: (a > 0), (x,))                     # piecewise constant
    with pytest.raises(GradcheckError, match="Numerical gradient for function expected to "
                                             "be zero"):
        gradcheck(lambda a: a.detach() * 2, (x,))


def test_batched_grad_check():
    x, y = t64(X, True), t64(Y, True)
    assert gradcheck(lambda a, b: (a * b).sin(), (x, y), check_batched_grad=True)


# --------------------------------------------------------------------------------------
# Jacobians themselves
# --------------------------------------------------------------------------------------

def test_jacobian_layout_is_input_by_output():
    x = t64([1.0, 2.0], True)
    num = get_numerical_jacobian(lambda a: (a * a, a * 3), (x,))
    ana = get_analytical_jacobian((x,), Square.apply(x))
    assert len(num) == 1 and len(num[0]) == 2
    np.testing.assert_allclose(vals(num[0][0]), [[2.0, 0.0], [0.0, 4.0]], atol=1e-6)
    np.testing.assert_allclose(vals(num[0][1]), 3 * np.eye(2), atol=1e-6)
    np.testing.assert_allclose(vals(ana[0]), [[2.0, 0.0], [0.0, 4.0]])


def test_jacobian_for_broadcast_and_non_contiguous_inputs():
    base = t64(X.T.copy(), True)          # (3, 2)
    x = base.t()                          # (2, 3) non-contiguous view with history
    assert not x.is_contiguous()
    assert gradcheck(lambda a, b: (a * b).exp(), (x, t64(Y, True)))     # b broadcasts


# --------------------------------------------------------------------------------------
# gradgradcheck
# --------------------------------------------------------------------------------------

def test_gradgradcheck_cube_sum():
    x = t64(Y, True)
    assert gradgradcheck(lambda a: (a ** 3).sum(), (x,))


@pytest.mark.parametrize("name,fn", [
    ("mul", lambda a, b: a * b * a),
    ("div", lambda a, b: a / (b * b + 1.0)),
    ("sin", lambda a, b: (a * b).sin()),
    ("exp", lambda a, b: (a * b).exp()),
    ("tanh", lambda a, b: (a + b).tanh()),
    ("sigmoid", lambda a, b: (a * b).sigmoid()),
    ("sqrt", lambda a, b: (a * a + b * b).sqrt()),
    ("pow", lambda a, b: a ** 3 + b ** 2),
    ("log", lambda a, b: (a * a + 1.0).log() * b),
])
def test_gradgradcheck_ops(name, fn):
    x, y = t64(X, True), t64(X[::-1] - 0.3, True)
    assert gradgradcheck(fn, (x, y)), name


@pytest.mark.parametrize("name,fn", [
    ("matmul", lambda a, w: (a @ w).tanh()),
    ("matvec", lambda a, w: a @ w[:, 0]),
    ("sum_dim", lambda a, w: (a * a).sum(1)),
    ("mean", lambda a, w: a.exp().mean(0)),
    ("softmax", lambda a, w: lg.softmax(a, 1)),
    ("logsumexp", lambda a, w: lg.logsumexp(a, 1)),
    ("prod", lambda a, w: a.prod(1)),
    ("var", lambda a, w: a.var(1)),
])
def test_gradcheck_and_gradgradcheck_reductions_and_matmul(name, fn):
    a, w = t64(X, True), t64(RNG.standard_normal((3, 4)), True)
    assert gradcheck(fn, (a, w)), name
    assert gradgradcheck(fn, (a, w)), name


def test_gradgradcheck_custom_function_with_differentiable_backward():
    x = t64(Y, True)
    assert gradgradcheck(Square.apply, (x,))


def test_gradgradcheck_fails_when_backward_is_not_differentiable_correctly():
    class DetachedBackward(Function):
        """First derivative right, but it is computed from a detached x: d2 is wrong."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x.detach() * x.detach() * g

    x = t64(Y, True)
    assert gradcheck(DetachedBackward.apply, (x,))
    assert gradgradcheck(DetachedBackward.apply, (x,), raise_exception=False) is False
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to "
                                             "input 0"):
        gradgradcheck(DetachedBackward.apply, (x,))


def test_gradgradcheck_with_given_grad_outputs():
    x = t64(Y, True)
    go = t64([0.5, -1.0, 2.0], True)
    assert gradgradcheck(lambda a: a.sin() * a, (x,), (go,))


@needs_torch
def test_message_matches_torch():
    """The first line and the layout of the failure message are PyTorch's."""
    class TWrong(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x * g

    with pytest.raises(RuntimeError) as t_err:
        torch.autograd.gradcheck(TWrong.apply, (torch.tensor(Y, requires_grad=True),))
    with pytest.raises(GradcheckError) as l_err:
        gradcheck(WrongSquare.apply, (t64(Y, True),))
    t_lines = str(t_err.value).replace("torch.", "llgrad.").split("\n")
    l_lines = str(l_err.value).split("\n")
    assert t_lines[0] == l_lines[0]
    assert len(t_lines) == len(l_lines)
    assert [ln.split("tensor(")[0] for ln in t_lines] == [ln.split("tensor(")[0]
                                                          for ln in l_lines]


def test_no_stray_warnings_for_double_inputs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(lambda a: a * a, (t64(Y, True),))
