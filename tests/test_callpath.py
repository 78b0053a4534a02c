"""The specialized call paths: `lg.compile`'s per-signature call (`compiler.callpath`) and
the compiled graph's generated runner (`CompiledGraph.runner`). Every check a specialized
call makes must send a changed call back to the general path, which recompiles, breaks or
raises exactly as before."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import llgrad as lg
from llgrad.compiler.callpath import MISS

from conftest import train_step

SCALE = 2.0


def _scaled(x):
    return (x * SCALE).sin()


def test_second_call_takes_the_specialized_path_with_the_same_results():
    cf = lg.compile(lambda x, y: (x * y).exp().sum())
    x, y = lg.randn(16), lg.randn(16)
    first = cf(x, y)
    assert cf._fast is not None
    assert cf._fast((x, y)) is not MISS            # the checks pass for the same signature
    np.testing.assert_allclose(cf(x, y).numpy(), first.numpy(), rtol=1e-6)
    src = cf._fast.__source__
    assert "a0._shape != (16,)" in src and "grad_state.enabled is not True" in src


@pytest.mark.parametrize("change", ["shape", "dtype", "requires_grad", "no_grad",
                                    "non_tensor", "arity"])
def test_any_changed_argument_misses_and_the_general_path_decides(change):
    calls = []

    def f(x):
        calls.append(1)
        return (x * 3.0).tanh()
    cf = lg.compile(f)
    x = lg.randn(8)
    cf(x)
    fast = cf._fast
    traced = len(calls)
    if change == "shape":
        args = (lg.randn(9),)
    elif change == "dtype":
        args = (lg.randn(8, dtype=lg.float64),)
    elif change == "requires_grad":
        args = (lg.randn(8).requires_grad_(),)
    elif change == "non_tensor":
        args = (np.ones(8, np.float32),)
    else:
        args = (x,) if change == "no_grad" else (x, x)
    if change == "no_grad":
        with lg.no_grad():
            assert fast(args) is MISS
    else:
        assert fast(args) is MISS
    if change == "arity":
        with pytest.raises(TypeError):
            cf(*args)
        return
    if change == "non_tensor":
        out = cf(lg.tensor(args[0]))
        np.testing.assert_allclose(out.numpy(), np.tanh(3.0 * args[0]), rtol=1e-6)
        return
    if change == "no_grad":
        with lg.no_grad():
            out = cf(*args)
    else:
        out = cf(*args)
    a = args[0].detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), np.tanh(3.0 * a), rtol=1e-5, atol=1e-6)
    if change in ("shape", "dtype", "requires_grad", "no_grad"):
        assert len(calls) > traced                  # recompiled for the new signature
    if change == "requires_grad":
        (g,) = lg.autograd.grad(out.sum(), args)
        np.testing.assert_allclose(g.numpy(), 3.0 / np.cosh(3.0 * a) ** 2, rtol=1e-5, atol=1e-6)


def test_changed_global_constant_misses_and_recompiles():
    global SCALE
    cf = lg.compile(_scaled)
    x = lg.randn(5)
    cf(x)
    cf(x)
    try:
        SCALE = 3.0
        assert cf._fast((x,)) is MISS
        np.testing.assert_allclose(cf(x).numpy(), np.sin(3.0 * x.numpy()), rtol=1e-6)
        SCALE = 3                                    # equal, but another class: re-checked
        np.testing.assert_allclose(cf(x).numpy(), np.sin(3.0 * x.numpy()), rtol=1e-6)
    finally:
        SCALE = 2.0
    np.testing.assert_allclose(cf(x).numpy(), np.sin(2.0 * x.numpy()), rtol=1e-6)


def test_changed_closure_value_misses():
    k = 2.0

    def f(x):
        return x * k
    cf = lg.compile(f)
    x = lg.ones(3)
    assert cf(x).tolist() == [2.0, 2.0, 2.0]
    k = 5.0
    assert cf(x).tolist() == [5.0, 5.0, 5.0]
    assert cf(x).tolist() == [5.0, 5.0, 5.0]


def test_disable_compile_and_the_environment_variable_are_seen(monkeypatch):
    calls = []

    def f(x):
        calls.append(1)
        return x + 1
    cf = lg.compile(f)
    x = lg.ones(2)
    cf(x)
    cf(x)
    n = len(calls)
    with lg.disable_compile():
        cf(x)
    assert len(calls) == n + 1
    monkeypatch.setenv("LLGRAD_DISABLE_COMPILE", "1")
    cf(x)
    assert len(calls) == n + 2
    monkeypatch.setenv("LLGRAD_DISABLE_COMPILE", "0")
    cf(x)
    assert len(calls) == n + 2


def test_inside_another_trace_the_function_is_inlined():
    inner = lg.compile(lambda x: x.exp())
    x = lg.randn(4)
    inner(x)
    inner(x)                                         # specialized now
    outer = lg.compile(lambda x: inner(x) * 2)
    report = outer.inspect(x)
    assert "exp" in str(report.graph)                # traced through, not called natively
    np.testing.assert_allclose(outer(x).numpy(), 2 * np.exp(x.numpy()), rtol=1e-6)


def test_captured_tensor_requires_grad_is_checked_each_call():
    w = lg.randn(4)

    def f(x):
        return (x * w).sum()
    cf = lg.compile(f)
    x = lg.randn(4)
    out = cf(x)
    cf(x)
    assert out.grad_fn is None
    w.requires_grad_()
    out = cf(x)                                      # must now record a backward node
    (g,) = lg.autograd.grad(out, [w])
    np.testing.assert_allclose(g.numpy(), x.numpy(), rtol=1e-6)


def test_differentiable_signature_is_specialized_and_gradients_match_eager():
    def f(x, y):
        return ((x * y).tanh() + y.sin()).sum()
    cf = lg.compile(f)
    xs = [lg.randn(32, dtype=lg.float64).requires_grad_() for _ in range(2)]
    for _ in range(3):
        out = cf(*xs)
        grads = lg.autograd.grad(out, xs)
    assert "dcall(" in cf._fast.__source__
    ref = lg.autograd.grad(f(*xs), xs)
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-12)


Pair = collections.namedtuple("Pair", "a b")


def test_output_structures_are_rebuilt_exactly():
    def f(x):
        return {"sum": x.sum(), "parts": [x * 2, (x + 1, 7)], "pair": Pair(x, "tag"),
                "none": None}
    cf = lg.compile(f)
    x = lg.arange(3, dtype=lg.float32)
    cf(x)
    out = cf(x)
    assert cf._fast is not None
    assert list(out) == ["sum", "parts", "pair", "none"]
    assert out["sum"].item() == 3.0 and out["none"] is None
    assert isinstance(out["parts"], list) and isinstance(out["parts"][1], tuple)
    assert out["parts"][1][1] == 7 and out["parts"][0].tolist() == [0.0, 2.0, 4.0]
    assert isinstance(out["pair"], Pair) and out["pair"].b == "tag"
    assert out["pair"].a.tolist() == [0.0, 1.0, 2.0]


def test_value_and_grad_call_is_specialized():
    vg = lg.compile(lg.value_and_grad(lambda x: (x.sin() * 1.5).sum()))
    x = lg.randn(64)
    vg(x)
    v, g = vg(x)
    assert vg._fast is not None and "run(a0" in vg._fast.__source__
    np.testing.assert_allclose(g.numpy(), 1.5 * np.cos(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(v.item(), 1.5 * np.sin(x.numpy()).sum(), rtol=1e-5)


def test_signatures_with_effects_are_specialized_and_aliasing_misses():
    def f(x, buf):
        buf.add_(x)
        return x * 2
    cf = lg.compile(f)
    x, buf = lg.ones(3), lg.zeros(3)
    cf(x, buf)
    version = buf._storage.version
    out = cf(x, buf)
    assert cf._fast is not None and "_storage.version += 1" in cf._fast.__source__
    assert buf.tolist() == [2.0, 2.0, 2.0] and out.tolist() == [2.0, 2.0, 2.0]
    assert buf._storage.version == version + 1
    assert cf._fast((x, buf)) is not MISS and buf.tolist() == [3.0, 3.0, 3.0]
    # the written argument is the other one too: the general path runs f eagerly
    y = lg.ones(3)
    assert cf._fast((y, y)) is MISS and y.tolist() == [1.0, 1.0, 1.0]
    assert cf(y, y).tolist() == [4.0, 4.0, 4.0] and y.tolist() == [2.0, 2.0, 2.0]
    # a written argument that is not dense: missed, then copied back by the general path
    base = lg.zeros(3, 2)
    col = base[:, 0]
    assert cf._fast((x, col)) is MISS
    cf(x, col)
    assert base.tolist() == [[1.0, 0.0]] * 3


def _tiny_model(seed):
    lg.manual_seed(seed)
    return lg.nn.Sequential(lg.nn.Linear(6, 5), lg.nn.ReLU(), lg.nn.Linear(5, 3))


def test_a_training_step_takes_the_specialized_path_and_matches_eager():
    x, y = lg.randn(8, 6), lg.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    runs = {}
    for mode in ("compiled", "eager"):
        model = _tiny_model(0)
        opt = lg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        step = lg.compile(train_step) if mode == "compiled" else train_step
        losses = [step(model, opt, x, y).item() for _ in range(6)]
        if mode == "compiled":
            src = step._fast.__source__
            assert "a0 is not K0" in src and "a1 is not K1" in src     # module, optimizer
            assert "grad_state.enabled = False" in src and "._grad = o[" in src
            out = step._fast((model, opt, x, y))             # a seventh step
            assert out is not MISS
            losses.append(out.item())
            # another model of the same shapes is another signature: missed, then compiled
            other = _tiny_model(1)
            other_opt = lg.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
            assert step._fast((other, other_opt, x, y)) is MISS
        else:
            losses.append(step(model, opt, x, y).item())
        runs[mode] = (losses, [p.detach().numpy().copy() for p in model.parameters()],
                      [p.grad.numpy().copy() for p in model.parameters()])
    (lc, pc, gc), (le, pe, ge) = runs["compiled"], runs["eager"]
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for a, b in zip(pc + gc, pe + ge):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_changing_the_learning_rate_reaches_the_specialized_step():
    x, y = lg.randn(8, 6), lg.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    model = _tiny_model(0)
    opt = lg.optim.SGD(model.parameters(), lr=0.1)
    step = lg.compile(train_step)
    step(model, opt, x, y)
    step(model, opt, x, y)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    opt.param_groups[0]["lr"] = 0.0
    step(model, opt, x, y)
    assert step._fast is not None
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b)


def test_runner_writes_in_place_only_when_no_argument_shares_memory():
    def f(x, w):
        w.sub_(x * 0.5)
        return x.sum()
    cf = lg.compile(f)
    x, w = lg.ones(4), lg.full((4,), 3.0)
    cf(x, w)
    ex = next(iter(cf._entries.values())).function.plain().executable
    run = ex.runner()
    assert "len({a0._storage, a1._storage}) != 2" in run.__source__
    outs = run(x, w)
    assert outs[1] is w and w.tolist() == [2.0] * 4       # written into w's own memory
    outs = run(w, w)                                       # shared: a new output tensor
    assert outs[1] is not w
    p = lg.nn.Parameter(lg.full((4,), 3.0))                # a Parameter passes the checks
    assert run(x, p)[1] is p and p.tolist() == [2.5] * 4


def test_runner_falls_back_for_unusual_arguments():
    cf = lg.compile(lambda x: x * 2)
    base = lg.arange(12, dtype=lg.float32).reshape(3, 4)
    cf(base)
    ex = next(iter(cf._entries.values())).function.plain().executable
    run = ex.runner()
    assert "a0._strides != (4, 1)" in run.__source__
    np.testing.assert_array_equal(run(base)[0].numpy(), 2 * base.numpy())
    # a non-contiguous view of the right shape and dtype: copied by the general path
    t = lg.arange(12, dtype=lg.float32).reshape(4, 3).t()
    np.testing.assert_array_equal(ex(t)[0].numpy(), 2 * t.numpy())
    np.testing.assert_array_equal(cf(t).numpy(), 2 * t.numpy())
    # a NumPy array of the parameter's type is accepted
    np.testing.assert_array_equal(ex(base.numpy())[0].numpy(), 2 * base.numpy())
    with pytest.raises(ValueError, match="expects shape"):
        ex(lg.ones(4, 3))
    with pytest.raises(TypeError, match="expects dtype"):
        ex(lg.ones(3, 4, dtype=lg.float64))
    with pytest.raises(TypeError, match="takes 1 inputs"):
        ex(base, base)


def test_tiny_outputs_have_numpy_views_made_on_demand():
    cf = lg.compile(lambda x: (x + 1, x.sum()))
    x = lg.arange(4, dtype=lg.float32)
    cf(x)
    a, s = cf(x)
    assert a._storage._buffer is None                # no NumPy view until asked
    view = a.numpy()
    view[0] = 42.0
    assert a.tolist() == [42.0, 2.0, 3.0, 4.0]       # the view shares the tensor's memory
    assert s.item() == 6.0


def test_eager_tensor_ops_use_a_generated_launch_and_still_record_kernels():
    from llgrad.eager import elementwise as ew
    from llgrad.runtime.launch import record_kernels
    x = lg.arange(6, dtype=lg.float32).reshape(2, 3)
    y = lg.ones(3)                                       # broadcast along rows
    first = x + y
    again = x + y
    plan = ew._plans[ew._key("add", (x, y), None, None)]
    assert callable(plan.launch)
    np.testing.assert_array_equal(again.numpy(), x.numpy() + 1)
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    with record_kernels() as ks:
        z = x + y                                        # recording: the general launch
    assert len(ks) == 1
    np.testing.assert_array_equal(z.numpy(), x.numpy() + 1)
    xt = x.t()                                           # another layout: another plan
    np.testing.assert_array_equal((xt * xt).numpy(), x.numpy().T ** 2)
    s = x * 2.0                                          # a float operand: packed inline
    s = x * 2.0
    assert callable(ew._plans[ew._key("mul", (x, 2.0), None, None)].launch)
    np.testing.assert_array_equal(s.numpy(), 2 * x.numpy())
    np.testing.assert_array_equal((1.5 - x).numpy(), 1.5 - x.numpy())
    np.testing.assert_array_equal((1.5 - x).numpy(), 1.5 - x.numpy())
    for _ in range(2):                                   # a number that does not pack as
        big = x * 1e300                                  # float32: the general path, inf
        assert np.isinf(big.numpy()[1:]).all()          # as in PyTorch
    i = lg.arange(4)
    for _ in range(2):                                   # an integer slot: no generated
        np.testing.assert_array_equal((i * 3).numpy(), np.arange(4) * 3)    # launch
    assert ew._plans[ew._key("mul", (i, 3), None, None)].launch is False
    for _ in range(2):
        z = x * (2 + 1j)                                 # complex: the general path too
    np.testing.assert_allclose(z.numpy(), x.numpy() * (2 + 1j))
