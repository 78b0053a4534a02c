"""Custom autograd Functions: PyTorch's documented examples and its error behaviour."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import Function, once_differentiable
from llgrad.autograd.function import BackwardCFunction, FunctionCtx

from conftest import needs_torch, t64, torch, vals


# --------------------------------------------------------------------------------------
# the documented examples
# --------------------------------------------------------------------------------------

class MySquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return 2 * x * grad_output


class Exp(Function):
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


def test_mysquare_grad_and_node():
    x = t64([1.0, -2.0, 3.0], requires_grad=True)
    y = MySquare.apply(x)
    assert type(y.grad_fn).__name__ == "MySquareBackward"
    assert y.grad_fn.name() == "MySquareBackward"
    assert isinstance(y.grad_fn, BackwardCFunction) and isinstance(y.grad_fn, FunctionCtx)
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    np.testing.assert_allclose(vals(y), [1.0, 4.0, 9.0])
    y.backward(t64([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(vals(x.grad), [2.0, -4.0, 6.0])


def test_mysquare_node_class_is_per_function():
    assert MySquare._backward_cls.__name__ == "MySquareBackward"
    assert MySquare._backward_cls is not Exp._backward_cls
    assert MySquare._backward_cls._forward_cls is MySquare


def test_exp_saves_its_result_and_supports_double_backward():
    x = t64([0.5, -1.0, 2.0], requires_grad=True)
    y = Exp.apply(x)
    ones = t64([1.0, 1.0, 1.0])
    g, = lg.autograd.grad(y, x, ones, create_graph=True)
    np.testing.assert_allclose(vals(g), np.exp([0.5, -1.0, 2.0]))
    # d/dx (exp(x)) again goes through the saved output, which unpacks with grad_fn=ExpBackward
    g2, = lg.autograd.grad(g, x, ones)
    np.testing.assert_allclose(vals(g2), np.exp([0.5, -1.0, 2.0]))


def test_double_backward_through_mysquare():
    x = t64([1.0, 2.0, 3.0], requires_grad=True)
    y = MySquare.apply(x)
    g, = lg.autograd.grad(y, x, t64([1.0, 1.0, 1.0]), create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    g2, = lg.autograd.grad(g, x, t64([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(vals(g2), [2.0, 2.0, 2.0])


class MulConstant(Function):
    """PyTorch's setup_context example: forward without ctx, arbitrary ctx attributes."""

    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        tensor, constant = inputs
        ctx.constant = constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


def test_setup_context_style_and_ctx_attributes():
    x = t64([1.0, 2.0], requires_grad=True)
    y = MulConstant.apply(x, 3.0)
    assert type(y.grad_fn).__name__ == "MulConstantBackward"
    assert y.grad_fn.constant == 3.0
    y.backward(t64([1.0, 1.0]))
    np.testing.assert_allclose(vals(x.grad), [3.0, 3.0])


def test_setup_context_sees_defaults_and_keywords_under_no_grad():
    seen = {}

    class Scale(Function):
        @staticmethod
        def forward(x, k=2.0):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen["inputs"] = inputs
            seen["grad_mode"] = lg.is_grad_enabled()
            seen["needs"] = ctx.needs_input_grad
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x = t64([1.0, 2.0], requires_grad=True)
    Scale.apply(x)
    assert seen["inputs"][1] == 2.0 and seen["grad_mode"] is False
    assert seen["needs"] == (True, False)
    y = Scale.apply(x, k=5.0)
    assert seen["inputs"][1] == 5.0
    y.backward(t64([1.0, 1.0]))
    np.testing.assert_allclose(vals(x.grad), [5.0, 5.0])


class LinearFunction(Function):
    """PyTorch's needs_input_grad example."""

    calls: list = []

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output = output + bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        LinearFunction.calls.append(ctx.needs_input_grad)
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


def test_needs_input_grad_linear_function():
    rng = np.random.default_rng(0)
    xv, wv, bv = rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), rng.standard_normal(2)
    x = t64(xv)                                    # no grad wanted for the input
    w = t64(wv, requires_grad=True)
    b = t64(bv, requires_grad=True)
    LinearFunction.calls.clear()
    y = LinearFunction.apply(x, w, b)
    np.testing.assert_allclose(vals(y), xv @ wv.T + bv)
    assert y.grad_fn.needs_input_grad == (False, True, True)
    go = rng.standard_normal((4, 2))
    y.backward(t64(go))
    assert LinearFunction.calls == [(False, True, True)]
    np.testing.assert_allclose(vals(w.grad), go.T @ xv)
    np.testing.assert_allclose(vals(b.grad), go.sum(0))
    assert x.grad is None


class TwoOutputs(Function):
    """Two tensor outputs with a non-tensor between them (it occupies output slot 1)."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 2, "tag", x * 3

    @staticmethod
    def backward(ctx, g_a, g_tag, g_b):
        TwoOutputs.seen.append((g_a, g_tag, g_b))
        return g_a * 2 + g_b * 3


def test_two_outputs_one_node_and_materialized_zeros():
    x = t64([1.0, 2.0], requires_grad=True)
    a, tag, b = TwoOutputs.apply(x)
    assert tag == "tag"
    assert a.grad_fn is b.grad_fn
    assert (a._output_nr, b._output_nr) == (0, 2)
    TwoOutputs.seen.clear()
    a.backward(t64([1.0, 1.0]))
    g_a, g_tag, g_b = TwoOutputs.seen[0]
    assert g_tag is None                                  # non-tensor output: None
    np.testing.assert_allclose(vals(g_b), [0.0, 0.0])     # unused output: zeros
    np.testing.assert_allclose(vals(x.grad), [2.0, 2.0])
    x.grad = None
    a2, _, b2 = TwoOutputs.apply(x)
    lg.autograd.backward([a2, b2], [t64([1.0, 1.0]), t64([1.0, 10.0])])
    np.testing.assert_allclose(vals(x.grad), [5.0, 32.0])


class SortFn(Function):
    """PyTorch's mark_non_differentiable example (sort: values and indices)."""

    @staticmethod
    def forward(ctx, x):
        idx = lg.tensor(np.argsort(np.array(x._values()), kind="stable"))
        values = x[idx]
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return values, idx

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):
        x, idx = ctx.saved_tensors
        assert g2 is not None and g2.dtype == lg.int64     # still receives a (zero) gradient
        grad_input = lg.zeros_like(x)
        grad_input[idx] = g1                              # idx is a permutation
        return grad_input


def test_mark_non_differentiable_sort():
    x = t64([3.0, 1.0, 2.0], requires_grad=True)
    values, idx = SortFn.apply(x)
    np.testing.assert_allclose(vals(values), [1.0, 2.0, 3.0])
    assert idx.tolist() == [1, 2, 0]
    assert values.requires_grad and not idx.requires_grad and idx.grad_fn is None
    values.backward(t64([10.0, 20.0, 30.0]))
    np.testing.assert_allclose(vals(x.grad), [30.0, 10.0, 20.0])


class SimpleFunc(Function):
    """PyTorch's set_materialize_grads(False) example."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x.clone(), x.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):
        SimpleFunc.seen.append((g1, g2))
        x, = ctx.saved_tensors
        grad_input = lg.zeros_like(x)
        if g1 is not None:
            grad_input += g1
        if g2 is not None:
            grad_input += g2
        return grad_input


def test_set_materialize_grads_false_passes_none():
    a = t64(1.0, requires_grad=True)
    b, _ = SimpleFunc.apply(a)        # the second output's gradient stays undefined
    SimpleFunc.seen.clear()
    b.backward()
    g1, g2 = SimpleFunc.seen[0]
    assert g2 is None and float(g1.item()) == 1.0
    assert float(a.grad.item()) == 1.0


class Inplace(Function):
    """PyTorch's mark_dirty example: forward modifies its input in place."""

    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        return grad_output


def test_mark_dirty_on_leaf_requiring_grad_raises():
    a = t64(1.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used "
                                           "in an in-place operation"):
        Inplace.apply(a)


def test_mark_dirty_bumps_version_and_rebases_history():
    a = t64(1.0, requires_grad=True)
    b = a.clone()
    v0 = b._version
    c = b * b                         # saves b
    r = Inplace.apply(b)
    assert r is b                     # the same tensor, now with the Function's history
    assert b._version - v0 == 2       # the add_ and mark_dirty's own bump (as in PyTorch)
    assert type(b.grad_fn).__name__ == "InplaceBackward"
    assert float(b.item()) == 2.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.backward()
    # the gradient of the rebased tensor flows to the old history (clone -> a)
    d = a.clone()
    e = Inplace.apply(d)
    (e * 3).backward()
    assert float(a.grad.item()) == 3.0


def test_mark_dirty_must_return_the_tensor():
    class Forgets(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    x = t64([1.0], requires_grad=True).clone()
    with pytest.raises(RuntimeError, match="marked as dirty during the forward method were "
                                           "not returned as output"):
        Forgets.apply(x)


# --------------------------------------------------------------------------------------
# saved tensors
# --------------------------------------------------------------------------------------

def test_saved_tensors_freed_after_backward_unless_retained():
    x = t64([1.0, 2.0], requires_grad=True)
    y = MySquare.apply(x)
    y.backward(t64([1.0, 1.0]), retain_graph=True)
    assert len(y.grad_fn.saved_tensors) == 1
    y.backward(t64([1.0, 1.0]))
    np.testing.assert_allclose(vals(x.grad), [4.0, 8.0])
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second "
                                           "time"):
        y.grad_fn.saved_tensors
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second "
                                           "time"):
        y.backward(t64([1.0, 1.0]))


def test_saved_tensor_version_check():
    x = t64([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = MySquare.apply(h)
    with lg.no_grad():
        h.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*MySquareBackward"
                                           ".*is at version 1; expected version 0"):
        y.backward(t64([1.0, 1.0]))


def test_save_for_backward_rejects_non_tensors():
    class SavesInt(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match="save_for_backward can only save variables, but "
                                        "argument 1 is of type int"):
        SavesInt.apply(t64([1.0], requires_grad=True))


def test_saved_none_and_intermediate():
    class Tanhish(Function):
        @staticmethod
        def forward(ctx, x):
            inner = x * 2
            ctx.save_for_backward(None, inner)
            return inner.tanh()

        @staticmethod
        def backward(ctx, g):
            nothing, inner = ctx.saved_tensors
            assert nothing is None
            return g * 2 * (1 - inner.tanh() ** 2)

    x = t64([0.3, -0.4], requires_grad=True)
    Tanhish.apply(x).backward(t64([1.0, 1.0]))
    np.testing.assert_allclose(vals(x.grad), 2 * (1 - np.tanh(2 * np.array([0.3, -0.4])) ** 2))


# --------------------------------------------------------------------------------------
# what backward may return
# --------------------------------------------------------------------------------------

def _fn(backward_result, forward=lambda ctx, x, *rest: x * 2, name="Custom"):
    return type(name, (Function,), {"forward": staticmethod(forward),
                                     "backward": staticmethod(backward_result)})


def test_non_tensor_inputs_get_none():
    Scale = _fn(lambda ctx, g: (g * 3, None), lambda ctx, x, k: x * k, "Scale")
    x = t64([1.0, 2.0], requires_grad=True)
    Scale.apply(x, 3.0).backward(t64([1.0, 1.0]))
    np.testing.assert_allclose(vals(x.grad), [3.0, 3.0])


def test_too_few_gradients():
    Bad = _fn(lambda ctx, g: g, lambda ctx, x, y: x * y, "Bad")
    with pytest.raises(RuntimeError, match=r"^function BadBackward returned an incorrect "
                                           r"number of gradients \(expected 2, got 1\)$"):
        Bad.apply(t64([1.0], requires_grad=True), 3.0).backward(t64([1.0]))


def test_too_many_gradients():
    Bad = _fn(lambda ctx, g: (g, g), name="TooMany")
    with pytest.raises(RuntimeError, match=r"function TooManyBackward returned an incorrect "
                                           r"number of gradients \(expected 1, got 2\)"):
        Bad.apply(t64([1.0], requires_grad=True)).backward(t64([1.0]))


def test_extra_trailing_nones_are_allowed():
    Ok = _fn(lambda ctx, g: (g * 2, None, None), name="Ok")
    x = t64([1.0], requires_grad=True)
    Ok.apply(x).backward(t64([1.0]))
    assert float(x.grad.item()) == 2.0


def test_gradient_for_non_tensor_input_raises():
    Bad = _fn(lambda ctx, g: (g, g), lambda ctx, x, y: x * y, "Bad2")
    with pytest.raises(RuntimeError, match="function Bad2Backward returned a gradient different "
                                           "than None at position 2, but the corresponding "
                                           "forward input was not a Variable"):
        Bad.apply(t64([1.0], requires_grad=True), 3.0).backward(t64([1.0]))


def test_wrong_shaped_gradient_raises():
    Bad = _fn(lambda ctx, g: g[:2], name="Bad3")
    with pytest.raises(RuntimeError, match=r"Function Bad3Backward returned an invalid gradient "
                                           r"at index 0 - got \[2\] but expected shape "
                                           r"compatible with \[3\]"):
        Bad.apply(t64([1.0, 2.0, 3.0], requires_grad=True)).backward(t64([1.0, 1.0, 1.0]))


def test_broadcastable_gradient_is_summed_and_cast():
    Wide = _fn(lambda ctx, g: g.expand(2, 3).to(lg.float32), lambda ctx, x: x * 2, "Wide")
    x = t64([1.0, 2.0, 3.0], requires_grad=True)
    Wide.apply(x).backward(t64([1.0, 2.0, 3.0]))
    assert x.grad.dtype == lg.float64
    np.testing.assert_allclose(vals(x.grad), [2.0, 4.0, 6.0])


def test_non_tensor_gradient_raises():
    Bad = _fn(lambda ctx, g: 3, name="Bad5")
    with pytest.raises(TypeError, match=r"expected Variable or None \(got int\)"):
        Bad.apply(t64([1.0], requires_grad=True)).backward(t64([1.0]))


@needs_torch
def test_error_texts_match_torch():
    """The count and shape errors are PyTorch's texts (names differ only by the class)."""
    class TBad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError) as t_err:
        TBad.apply(torch.ones(1, requires_grad=True), 3.0).backward(torch.ones(1))
    Bad = _fn(lambda ctx, g: g, lambda ctx, x, y: x * y, "TBad")
    with pytest.raises(RuntimeError) as l_err:
        Bad.apply(t64([1.0], requires_grad=True), 3.0).backward(t64([1.0]))
    assert str(l_err.value) == str(t_err.value)


# --------------------------------------------------------------------------------------
# when outputs get a node
# --------------------------------------------------------------------------------------

def test_no_node_without_grad():
    x = t64([1.0, 2.0], requires_grad=True)
    with lg.no_grad():
        y = MySquare.apply(x)
    assert y.grad_fn is None and not y.requires_grad
    z = MySquare.apply(x.detach())
    assert z.grad_fn is None and not z.requires_grad


def test_forward_runs_without_recording():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, x):
            seen["mode"] = lg.is_grad_enabled()
            inner = x * 2
            seen["inner_grad_fn"] = inner.grad_fn
            return inner

        @staticmethod
        def backward(ctx, g):
            return g * 2

    Probe.apply(t64([1.0], requires_grad=True))
    assert seen == {"mode": False, "inner_grad_fn": None}


def test_input_returned_as_is_gets_its_own_tensor():
    Identity = _fn(lambda ctx, g: g, lambda ctx, x: x, "Identity")
    x = t64([1.0, 2.0], requires_grad=True)
    y = Identity.apply(x)
    assert y is not x
    assert x.grad_fn is None and x.is_leaf
    assert type(y.grad_fn).__name__ == "IdentityBackward"
    (y * 3).backward(t64([1.0, 1.0]))
    np.testing.assert_allclose(vals(x.grad), [3.0, 3.0])


def test_integer_outputs_are_not_differentiable():
    class ArgMax(Function):
        @staticmethod
        def forward(ctx, x):
            return x.argmax(), x * 1

        @staticmethod
        def backward(ctx, g_idx, g):
            return g

    x = t64([1.0, 5.0, 2.0], requires_grad=True)
    idx, y = ArgMax.apply(x)
    assert not idx.requires_grad and idx.grad_fn is None
    assert y.requires_grad


def test_once_differentiable_refuses_double_backward():
    class OD(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    x = t64([1.0, 2.0], requires_grad=True)
    go = t64([1.0, 1.0], requires_grad=True)
    g, = lg.autograd.grad(OD.apply(x), x, go, create_graph=True)
    np.testing.assert_allclose(vals(g), [2.0, 4.0])
    assert type(g.grad_fn).__name__ == "Error"
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was "
                                           "marked with @once_differentiable"):
        g.backward(t64([1.0, 1.0]))


def test_vjp_alias_for_backward():
    class ViaVjp(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 4

        @staticmethod
        def vjp(ctx, g):
            return g * 4

    x = t64([1.0], requires_grad=True)
    ViaVjp.apply(x).backward(t64([1.0]))
    assert float(x.grad.item()) == 4.0


def test_legacy_instance_call_raises():
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward "
                                           "method is deprecated"):
        MySquare()(t64([1.0], requires_grad=True))


def test_node_hooks_on_custom_function():
    x = t64([1.0, 2.0], requires_grad=True)
    y = MySquare.apply(x)
    seen = []
    y.grad_fn.register_hook(lambda gin, gout: seen.append((vals(gin[0]), vals(gout[0]))))
    y.backward(t64([1.0, 1.0]))
    np.testing.assert_allclose(seen[0][0], [2.0, 4.0])
    np.testing.assert_allclose(seen[0][1], [1.0, 1.0])


def test_chain_of_custom_and_builtin_ops():
    x = t64([0.5, 1.5], requires_grad=True)
    y = Exp.apply(MySquare.apply(x.sin()))
    y.backward(t64([1.0, 1.0]))
    xv = np.array([0.5, 1.5])
    np.testing.assert_allclose(vals(x.grad), np.exp(np.sin(xv) ** 2) * 2 * np.sin(xv)
                               * np.cos(xv))


@needs_torch
def test_against_torch_custom_function():
    class TSquareExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return (x * w).exp(), x * x

        @staticmethod
        def backward(ctx, ga, gb):
            x, w = ctx.saved_tensors
            e = (x * w).exp()
            return ga * e * w + 2 * x * gb, (ga * e * x).sum(0)

    class LSquareExp(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return (x * w).exp(), x * x

        @staticmethod
        def backward(ctx, ga, gb):
            x, w = ctx.saved_tensors
            e = (x * w).exp()
            return ga * e * w + 2 * x * gb, (ga * e * x).sum(0)

    rng = np.random.default_rng(1)
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal(4)
    ga, gb = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    tx, tw = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
    ta, tb = TSquareExp.apply(tx, tw)
    torch.autograd.backward([ta, tb], [torch.tensor(ga), torch.tensor(gb)])
    lx, lw = t64(xv, requires_grad=True), t64(wv, requires_grad=True)
    la, lb = LSquareExp.apply(lx, lw)
    lg.autograd.backward([la, lb], [t64(ga), t64(gb)])
    np.testing.assert_allclose(vals(la), ta.detach().numpy())
    np.testing.assert_allclose(vals(lx.grad), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(vals(lw.grad), tw.grad.numpy(), rtol=1e-12)
