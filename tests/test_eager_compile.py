"""Eager composites run compiled (`llgrad.compiler.composites`): same values, gradients, nodes and
errors as their decompositions, the same bits on every call of a key."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.compiler import composites

F = lg.nn.functional


@pytest.fixture
def fresh(monkeypatch):
    """Empty compiled-key tables, so each test decides its keys itself."""
    monkeypatch.setattr(composites, "_compiled", {})
    monkeypatch.setattr(composites, "_families", {})
    return composites


def _x(*shape, seed=0):
    return lg.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=lg.float64)


_target = lg.tensor(np.array([0, 3, 1, 4, 2, -100, 3]))
_probs = lg.tensor(np.random.default_rng(1).uniform(0.1, 0.9, (7, 5)))
CASES = {
    "softmax": (lambda x: F.softmax(x, 1), "SoftmaxBackward0"),
    "log_softmax": (lambda x: F.log_softmax(x, 0), "LogSoftmaxBackward0"),
    "logsumexp": (lambda x: lg.logsumexp(x, 1), "LogsumexpBackward0"),
    "var": (lambda x: lg.var(x, 0), "VarBackward0"),
    "std": (lambda x: lg.std(x, 1, keepdim=True), "StdBackward0"),
    "norm": (lambda x: lg.norm(x, 3.0, dim=1), "LinalgVectorNormBackward0"),
    "layer_norm": (lambda x: F.layer_norm(x, (5,), _x(5, seed=2), _x(5, seed=3)),
                   "NativeLayerNormBackward0"),
    "nll_loss": (lambda x: F.nll_loss(x, _target, weight=_x(5, seed=4).abs()),
                 "NllLossBackward0"),
    "cross_entropy": (lambda x: F.cross_entropy(x, _target), "NllLossBackward0"),
    "mse_loss": (lambda x: F.mse_loss(x, _probs, reduction="sum"), "MseLossBackward0"),
    "bce": (lambda x: F.binary_cross_entropy(lg.sigmoid(x), _probs),
            "BinaryCrossEntropyBackward0"),
    "bce_with_logits": (lambda x: F.binary_cross_entropy_with_logits(x, _probs),
                        "BinaryCrossEntropyWithLogitsBackward0"),
}


def _run(fn, x):
    x = x.detach().clone().requires_grad_()
    out = fn(x)
    g = lg.tensor(np.random.default_rng(5).standard_normal(out.shape), dtype=out.dtype)
    (gx,) = lg.autograd.grad(out, [x], g)
    return out, gx


@pytest.mark.parametrize("case", list(CASES))
def test_compiled_composites_match_their_decompositions(case, fresh, monkeypatch):
    """Forward and backward compiled (their keys are in the table) give the values and
    gradients the decomposition and its rule give eagerly, the same node name, and the
    node's edges (None for an operand that needs no gradient)."""
    fn, name = CASES[case]
    x = _x(7, 5)
    out, gx = _run(fn, x)
    compiled = [k for k, v in fresh._compiled.items() if v is not composites._COLD]
    assert any(k[0] == "forward" for k in compiled), compiled
    assert any(k[0] == "rule" for k in compiled), compiled
    node = fn(x.detach().clone().requires_grad_()).grad_fn
    if name is not None:
        assert type(node).__name__ == name
    assert isinstance(node, composites.CompiledRuleNode)
    monkeypatch.setattr(composites, "ENABLED", False)
    want, want_gx = _run(fn, x)
    assert not isinstance(fn(x.detach().clone().requires_grad_()).grad_fn,
                          composites.CompiledRuleNode)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(gx.numpy(), want_gx.numpy(), rtol=1e-10, atol=1e-12)


def test_every_call_of_a_key_gives_the_same_bits(fresh):
    """A key is compiled on its first call and stays so: the first call and the fifth
    give identical values and gradients (gradcheck's reentrancy check needs this)."""
    x = lg.randn(64, 33)
    results = [_run(lambda t: F.log_softmax(t, 1), x) for _ in range(5)]
    for out, gx in results[1:]:
        np.testing.assert_array_equal(out.detach().numpy(), results[0][0].detach().numpy())
        np.testing.assert_array_equal(gx.numpy(), results[0][1].numpy())
    assert lg.autograd.gradcheck(lambda t: F.softmax(t, 1), (_x(4, 6).requires_grad_(),))


def test_the_saved_tensor_rules_are_pytorchs(fresh):
    """softmax saves its output: writing to it in place before backward raises PyTorch's
    error. log_softmax does not save its input: writing to the input is legal, and the
    gradient is the one PyTorch gives."""
    import torch
    x = _x(4, 6).requires_grad_()
    for _ in range(2):                           # the second call is surely compiled
        y = F.softmax(x, 1)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    base = _x(4, 6)
    a = base.clone().requires_grad_()
    h = a * 1.0
    out = F.log_softmax(h, 1)
    with lg.no_grad():
        h.add_(100.0)
    (out * _x(4, 6, seed=7)).sum().backward()
    t = torch.tensor(base.numpy(), requires_grad=True)
    th = t * 1.0
    tout = torch.log_softmax(th, 1)
    with torch.no_grad():
        th.add_(100.0)
    (tout * torch.tensor(_x(4, 6, seed=7).numpy())).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_double_backward_and_freed_graphs(fresh):
    """create_graph=True runs the rule eagerly (differentiable); a second backward
    without retain_graph raises PyTorch's error."""
    assert lg.autograd.gradgradcheck(lambda t: F.log_softmax(t, 1), (_x(3, 5).requires_grad_(),))
    x = _x(3, 5).requires_grad_()
    loss = F.layer_norm(x, (5,)).pow(3).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_changing_shapes_stop_compiling_after_a_family_limit(fresh, monkeypatch):
    """Past `SHAPES_PER_FAMILY` shapes of one (op, attributes, dtypes, ranks), new shapes
    run the decomposition (still correct); shapes compiled before stay compiled."""
    monkeypatch.setattr(composites, "SHAPES_PER_FAMILY", 2)
    for n in (3, 4, 5, 3):
        x = _x(n, 4)
        np.testing.assert_allclose(lg.softmax(x, 1).numpy(),
                                   np.exp(x.numpy()) / np.exp(x.numpy()).sum(1, keepdims=True),
                                   rtol=1e-12)
    shapes = sorted(k[3][0][1] for k in fresh._compiled if k[:2] == ("forward", "softmax"))
    assert shapes == [(3, 4), (4, 4)]


def test_switched_off(fresh, monkeypatch):
    monkeypatch.setattr(composites, "ENABLED", False)
    x = _x(5, 5).requires_grad_()
    F.log_softmax(x, 1).sum().backward()
    assert fresh._compiled == {}
    node = F.log_softmax(x, 1).grad_fn
    assert type(node).__name__ == "LogSoftmaxBackward0"
    assert not isinstance(node, composites.CompiledRuleNode)


def test_rule_shapes_count_against_the_family_limit_too(fresh, monkeypatch):
    """The rule's compiled keys are bounded per (op, attributes, dtypes, ranks) as the
    forward's are: new shapes past the limit run the rule as written, still right."""
    monkeypatch.setattr(composites, "SHAPES_PER_FAMILY", 2)
    for n in (3, 4, 5, 6):
        x = _x(n, 4).requires_grad_()
        y = F.log_softmax(x, 1)
        (y * _x(n, 4, seed=9)).sum().backward()
        t = _x(n, 4, seed=9).numpy()
        p = np.exp(y.detach().numpy())
        np.testing.assert_allclose(x.grad.numpy(), t - p * t.sum(1, keepdims=True),
                                   rtol=1e-12, atol=1e-12)
    rules = [k for k in fresh._compiled if k[:2] == ("rule", "log_softmax")]
    assert len(rules) == 2, rules


def test_disable_compile_keeps_new_keys_eager(fresh):
    """Under `disable_compile` (bisecting numerics against eager), a new key runs its
    decomposition and compiles nothing."""
    with lg.compiler.disable_compile():
        x = _x(3, 9).requires_grad_()
        F.softmax(x, 1).sum().backward()
    assert fresh._compiled == {}


# --------------------------------------------------------------------------------------
# Python-level composites (`dispatch.apply.composite_function`)
# --------------------------------------------------------------------------------------

def _compiled_functions(table):
    return {k[1].__name__: v for k, v in table.items() if k[0] == "function"}


FUNCTION_CASES = {
    "cross": lambda m, x: m.cross(x, x.flip(0) * 2, dim=1),
    "cdist": lambda m, x: m.cdist(x, x * 0.5 + 1),
    "diag_embed": lambda m, x: m.diag_embed(x, 1),
    "trace": lambda m, x: m.trace(x),
    "index_select": lambda m, x: m.index_select(x, 0, m.tensor([2, 0, 2])),
    "take_along_dim": lambda m, x: m.take_along_dim(x, m.tensor([[2, 0]]), 1),
    "pad_reflect": lambda m, x: m.nn.functional.pad(x[None], [1, 2], mode="reflect"),
    "hardswish": lambda m, x: m.nn.functional.hardswish(x),
    "max_pool2d": lambda m, x: m.nn.functional.max_pool2d(x[None], 2, ceil_mode=True),
    "interpolate": lambda m, x: m.nn.functional.interpolate(
        x[None, None], scale_factor=2, mode="bilinear", align_corners=False),
}


@pytest.mark.parametrize("case", list(FUNCTION_CASES))
def test_composite_functions_compile_and_match_torch(case, fresh, monkeypatch):
    """A function marked `composite_function` compiles on its first call (one graph, one
    backward node with the name eager autograd gives its output), and its values,
    gradients and double backward equal torch's; a second call gives the same bits."""
    torch = pytest.importorskip("torch")
    fn = FUNCTION_CASES[case]
    a = np.random.default_rng(0).standard_normal((4, 3))
    x = lg.tensor(a, requires_grad=True)
    out = fn(lg, x)
    assert isinstance(out.grad_fn, lg.compiler.function.CompiledBackward)
    with monkeypatch.context() as m:
        m.setattr(composites, "ENABLED", False)
        eager = fn(lg, x)
    assert not isinstance(eager.grad_fn, lg.compiler.function.CompiledBackward)
    assert type(out.grad_fn).__name__ == type(eager.grad_fn).__name__
    entry = _compiled_functions(fresh._compiled)
    assert entry and all(v is not composites._COLD for v in entry.values()), entry
    g = np.random.default_rng(1).standard_normal(tuple(out.shape))
    (gx,) = lg.autograd.grad(out, [x], lg.tensor(g))
    tx = torch.tensor(a, requires_grad=True)
    tout = fn(torch, tx)
    (tgx,) = torch.autograd.grad(tout, [tx], torch.tensor(g))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-10, atol=1e-12)
    again = fn(lg, x)
    np.testing.assert_array_equal(again.detach().numpy(), out.detach().numpy())
    assert lg.autograd.gradgradcheck(lambda t: fn(lg, t), (x,))


def test_composite_functions_that_cannot_compile_run_eagerly(fresh):
    """A key whose trace breaks (a host op), draws random numbers (a side effect) or
    returns a view of its argument is marked eager for good, and every call of it gives
    eager's result, view and generator state."""
    from llgrad.dispatch.apply import composite_function

    @composite_function
    def host(x):
        return lg.unique(x) * 2                  # a data-dependent size: a graph break

    @composite_function
    def noisy(x):
        return x + lg.rand(x.shape)

    @composite_function
    def viewing(x):
        return x.t()[0]

    x = lg.tensor([[3.0, 1.0], [3.0, 2.0]])
    assert host(x).tolist() == [2.0, 4.0, 6.0]
    lg.manual_seed(5)
    first = noisy(x)
    lg.manual_seed(5)
    assert np.array_equal(noisy(x).numpy(), first.numpy())
    assert not np.array_equal(noisy(x).numpy(), first.numpy())
    v = viewing(x)
    v.mul_(10)
    assert x.tolist() == [[30.0, 1.0], [30.0, 2.0]]  # the view wrote through
    table = _compiled_functions(fresh._compiled)
    assert set(table) == {"host", "noisy", "viewing"}
    assert all(v is composites._COLD for v in table.values())


def test_composite_function_errors_are_eagers(fresh):
    """An index out of range is found by the compiled kernel; the call then runs eagerly
    and raises eager's error, naming the op and the index as the user wrote it."""
    x = lg.arange(12.0).reshape(3, 4)
    assert lg.index_select(x, 1, lg.tensor([3, 0])).tolist() == [[3.0, 0.0], [7.0, 4.0],
                                                                  [11.0, 8.0]]
    with pytest.raises(IndexError, match="index_select.*out of range|index 9"):
        lg.index_select(x, 1, lg.tensor([9, 0]))
    with pytest.raises(RuntimeError, match="take_along_dim: index 7 is out of bounds"):
        lg.take_along_dim(x, lg.tensor([[1, 7]]), 1)


def test_composite_functions_pass_through_interpreters(fresh):
    """Under vmap, forward-mode AD and inside `lg.compile`, a composite function runs as
    written (the interpreter sees its parts); nothing is compiled for those calls."""
    x = lg.tensor(np.random.default_rng(2).standard_normal((5, 3, 3)))
    batched = lg.vmap(lg.trace)(x)
    np.testing.assert_allclose(batched.numpy(), np.trace(x.numpy(), axis1=1, axis2=2))
    with lg.autograd.forward_ad.dual_level():
        dual = lg.autograd.forward_ad.make_dual(x[0], lg.ones(3, 3))
        t = lg.autograd.forward_ad.unpack_dual(lg.trace(dual)).tangent
    assert float(t) == 3.0
    assert float(lg.compile(lambda m: lg.trace(m) * 2)(x[0])) == pytest.approx(
        2 * np.trace(x[0].numpy()))
    assert _compiled_functions(fresh._compiled) == {}


def test_composite_functions_keyed_by_arguments(fresh):
    """Numbers, strings, dtypes and lists of them are part of a key; a value that cannot
    be (a dict, an object) runs eagerly without compiling."""
    x = lg.tensor(np.random.default_rng(3).standard_normal((2, 3, 4, 4)))
    F = lg.nn.functional
    a = F.pad(x, [1, 1, 2, 0], mode="replicate")
    b = F.pad(x, [1, 1, 2, 0], mode="circular")
    c = F.pad(x, (1, 1, 2, 0), mode="replicate")
    assert a.shape == b.shape == c.shape == (2, 3, 6, 6)
    np.testing.assert_array_equal(a.numpy(), c.numpy())
    assert not np.array_equal(a.numpy(), b.numpy())
    keys = [k for k in fresh._compiled if k[0] == "function"]
    assert len(keys) == 3


def test_a_repeated_call_with_a_list_of_tensors_runs_its_entry(fresh, monkeypatch):
    """A call repeating a composite function's last compiled call, with a list or tuple
    of tensors of the same layouts, runs that entry without building the key (`_recent`);
    a sequence whose class, length or tensors' layouts changed since (a list mutated in
    place too) is keyed again, and every call gives eager's values, shape and node."""
    monkeypatch.setattr(composites, "_recent", {})
    rng = np.random.default_rng(4)
    a, b, c = (lg.tensor(rng.standard_normal((2, 3))) for _ in range(3))
    wide = lg.tensor(rng.standard_normal((2, 5)))
    lg.hstack([a, b])
    built = []
    real = composites._signature
    monkeypatch.setattr(composites, "_signature",
                        lambda *args: built.append(1) or real(*args))
    parts = [a, b]
    calls = [([c, a], False), ((a, b), True), ((b, c), False), ([a, b, c], True),
             ([a, wide], True), ([a, wide.t().contiguous().t()], True)]
    for seq, keyed in calls:
        del built[:]
        out = lg.hstack(seq)
        assert bool(built) == keyed, (seq, built)
        np.testing.assert_array_equal(out.numpy(),
                                      np.hstack([t.numpy() for t in seq]))
    del built[:]
    out = lg.hstack(parts)
    assert built  # (the last call's sequence had other layouts)
    parts[1] = wide  # the same list object, now of other layouts
    out = lg.hstack(parts)
    assert out.shape == (2, 8) and built
    np.testing.assert_array_equal(out.numpy(), np.hstack([a.numpy(), wide.numpy()]))
    x = a.detach().requires_grad_()
    lg.hstack([x, b])
    out = lg.hstack([x, b])
    assert type(out.grad_fn).__name__ == "CatBackward0"
    (g,) = lg.autograd.grad(out.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), np.ones((2, 3)))
