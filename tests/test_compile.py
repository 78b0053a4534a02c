"""lg.compile: compiled equals eager (values and gradients), guards, graph breaks, debugging."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.compiler import CompileError

from test_tracer import FUNCTIONS, sample
from conftest import train_step


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("dtype", [lg.float32, lg.float64], ids=["f32", "f64"])
def test_compiled_values_and_gradients_match_eager(name, dtype):
    fn, shapes = FUNCTIONS[name]
    args = sample(*shapes, dtype=dtype)
    compiled = lg.compile(fn)
    rtol = 1e-5 if dtype is lg.float32 else 1e-11
    np.testing.assert_allclose(compiled(*args).numpy(), fn(*args).numpy(), rtol=rtol,
                               atol=rtol)
    a = [x.clone().requires_grad_() for x in args]
    b = [x.clone().requires_grad_() for x in args]
    weights = lg.tensor(np.random.default_rng(1).standard_normal(fn(*args).shape), dtype=dtype)
    (compiled(*a) * weights).sum().backward()
    (fn(*b) * weights).sum().backward()
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=rtol * 10, atol=rtol)


def test_compiled_output_has_one_grad_fn_that_mixes_with_eager():
    f = lg.compile(lambda x: lg.exp(x) * 2)
    x = lg.randn(3, requires_grad=True)
    y = f(x)
    assert type(y.grad_fn).__name__ == "CompiledBackward"
    (y.sum() * 3).backward()                 # eager ops after the compiled call
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.exp(x.detach().numpy()), rtol=1e-6)


def test_new_signature_retraces_and_says_why(capfd):
    calls = []

    def f(x):
        calls.append(1)
        return x * 2
    cf = lg.compile(f)
    from llgrad import _log
    _log.set_channels("recompiles")
    try:
        cf(lg.ones(3))
        cf(lg.ones(3))
        assert len(calls) == 1                       # traced once for this signature
        cf(lg.ones(4))
        cf(lg.ones(4, dtype=lg.float64))
    finally:
        _log.set_channels("")
    assert len(calls) == 3
    err = capfd.readouterr().err
    assert "shape (3,) -> (4,)" in err and "dtype float32 -> float64" in err


def test_graph_break_runs_eagerly_and_is_reported():
    def f(x):
        if x.sum() > 0:            # data-dependent Python
            return x * 2
        return x * 3
    cf = lg.compile(f)
    np.testing.assert_allclose(cf(lg.ones(2)).numpy(), [2, 2])
    np.testing.assert_allclose(cf(-lg.ones(2)).numpy(), [-3, -3])
    assert any("test_compile.py" in b and "bool()" in b for b in cf.graph_breaks)
    strict = lg.compile(f, fullgraph=True)
    with pytest.raises(CompileError, match=r"test_compile.py:\d+"):
        strict(lg.ones(2))


def test_eager_backend_and_disable_compile_run_the_python_body(monkeypatch):
    calls = []

    def f(x):
        calls.append(1)
        return x + 1
    eager = lg.compile(f, backend="eager")
    eager(lg.ones(2))
    eager(lg.ones(2))
    assert len(calls) == 2
    cf = lg.compile(f)
    cf(lg.ones(2))
    cf(lg.ones(2))
    assert len(calls) == 3
    with lg.disable_compile():
        cf(lg.ones(2))
    assert len(calls) == 4
    monkeypatch.setenv("LLGRAD_DISABLE_COMPILE", "1")
    cf(lg.ones(2))
    assert len(calls) == 5


def test_double_backward_through_compiled_code():
    f = lg.compile(lambda x: (x ** 3).sum())
    x = lg.tensor([1.0, 2.0, 3.0], dtype=lg.float64, requires_grad=True)
    (g,) = lg.autograd.grad(f(x), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [3, 12, 27])
    (gg,) = lg.autograd.grad(g.sum(), x, create_graph=True)
    np.testing.assert_allclose(gg.detach().numpy(), [6, 12, 18])
    (ggg,) = lg.autograd.grad(gg.sum(), x)
    np.testing.assert_allclose(ggg.numpy(), [6, 6, 6])


def test_module_parameters_are_captured_and_updated():
    lg.manual_seed(0)
    model = lg.nn.Sequential(lg.nn.Linear(4, 8), lg.nn.ReLU(), lg.nn.Linear(8, 3))
    ref = lg.nn.Sequential(lg.nn.Linear(4, 8), lg.nn.ReLU(), lg.nn.Linear(8, 3))
    ref.load_state_dict(model.state_dict())
    forward = lg.compile(model)
    opt = lg.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = lg.optim.SGD(ref.parameters(), lr=0.1)
    x = lg.randn(16, 4)
    target = lg.randint(0, 3, (16,))
    for _ in range(4):
        for m, o in ((forward, opt), (ref, ref_opt)):
            o.zero_grad()
            loss = lg.nn.functional.cross_entropy(m(x), target)
            loss.backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_inspect_shows_every_stage():
    f = lg.compile(lambda x, w: lg.relu(x @ w) * 2.0)
    x = lg.randn(4, 3, requires_grad=True)
    w = lg.randn(3, 2, requires_grad=True)
    report = f.inspect(x, w)
    text = str(report)
    for section in ("traced graph", "backward graph", "optimized forward", "kernels", "stats"):
        assert section in text
    assert "matmul" in str(report.graph)
    assert "define" in report.llvm_ir
    assert report.asm.strip()
    assert report.stats["residuals"] >= 1
    # a scalar loss computes its gradients in the forward: no backward graph to show
    report = lg.compile(lambda x, w: lg.relu(x @ w).sum()).inspect(x, w)
    assert report.backward_graph is None and "gradients" in report.stats
    assert "joint forward+backward graph" in str(report)


SCALE = 2.0


def test_python_globals_are_guarded_not_frozen():
    global SCALE

    def f(x):
        return x * SCALE
    cf = lg.compile(f)
    np.testing.assert_allclose(cf(lg.ones(2)).numpy(), [2, 2])
    SCALE = 3.0
    try:
        np.testing.assert_allclose(cf(lg.ones(2)).numpy(), [3, 3])
    finally:
        SCALE = 2.0


def test_closure_constants_are_guarded():
    def make(k):
        return lg.compile(lambda x: x + k)
    assert make(1)(lg.zeros(1)).item() == 1 and make(5)(lg.zeros(1)).item() == 5


@pytest.mark.parametrize("opt_name,kw", [("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1)),
                                         ("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01)),
                                         ("RMSprop", dict(lr=0.01, momentum=0.9,
                                                          centered=True)),
                                         ("Adagrad", dict(lr=0.1, lr_decay=0.01))])
def test_whole_training_step_compiles_into_one_graph(opt_name, kw):
    """zero_grad, forward, backward() and the optimizer update inside one compiled call."""
    def make():
        lg.manual_seed(0)
        m = lg.nn.Sequential(lg.nn.Linear(6, 16), lg.nn.ReLU(), lg.nn.Linear(16, 3))
        return m, getattr(lg.optim, opt_name)(m.parameters(), **kw)

    step = train_step
    model, opt = make()
    ref, ref_opt = make()
    x, y = lg.randn(32, 6), lg.randint(0, 3, (32,))
    cstep = lg.compile(step)
    for _ in range(5):
        got, want = cstep(model, opt, x, y), step(ref, ref_opt, x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    (entry,) = cstep._entries.values()
    assert entry.graph_break is None and entry.effects      # compiled, with write-backs
    assert any(n.op == "matmul" for n in entry.graph.nodes)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        assert p.grad is not None and not isinstance(p.grad, lg.tracer.TracerTensor)


# --------------------------------------------------------------------------------------
# Random programs: compiled, eager and the NumPy interpreter agree
# --------------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

UNARY_STEPS = ["tanh", "sigmoid", "exp_neg_sq", "relu", "sin", "abs", "square"]
BINARY_STEPS = ["add", "mul", "sub", "maximum"]
SHAPE_STEPS = ["transpose", "flip", "sum_keep", "softmax", "mean_keep"]


def _program(steps: list[tuple[str, str]]):
    def f(x, y):
        for kind, op in steps:
            if kind == "u":
                x = {"tanh": lg.tanh, "sigmoid": lg.sigmoid, "relu": lg.relu, "sin": lg.sin,
                     "abs": lg.abs, "square": lg.square,
                     "exp_neg_sq": lambda v: lg.exp(-v * v)}[op](x)
            elif kind == "b":
                x = getattr(lg, op)(x, y)
            elif op == "transpose":
                x, y = x.t(), y.t()
            elif op == "flip":
                x = x.flip(0)
            elif op == "sum_keep":
                x = x + x.sum(1, keepdim=True) * 0.1
            elif op == "mean_keep":
                x = x - x.mean(0, keepdim=True)
            else:
                x = lg.softmax(x, 1) * 2
        return (x * y).sum(), x
    return f


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.one_of(
    st.tuples(st.just("u"), st.sampled_from(UNARY_STEPS)),
    st.tuples(st.just("b"), st.sampled_from(BINARY_STEPS)),
    st.tuples(st.just("s"), st.sampled_from(SHAPE_STEPS))), min_size=1, max_size=6),
    n=st.integers(2, 5), seed=st.integers(0, 10_000))
def test_random_programs_agree_compiled_eager_interpreted(steps, n, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    f = _program(steps)
    x, y = lg.tensor(a, requires_grad=True), lg.tensor(b)
    xe = lg.tensor(a, requires_grad=True)
    compiled = lg.compile(f)
    loss_c, out_c = compiled(x, y)
    loss_e, out_e = f(xe, y)
    graph = lg.make_ir(f)(lg.tensor(a), y)
    loss_i, out_i = lg.ir.interpret(graph, [a, b])
    np.testing.assert_allclose(loss_c.item(), loss_e.item(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(loss_i, loss_e.item(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out_c.detach().numpy(), out_e.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    loss_c.backward()
    loss_e.backward()
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_double_backward_of_transpose_then_softmax_fuses_without_a_cycle():
    """A row group whose later members read a value that an earlier elementwise group
    (itself reading the row group) would have absorbed: fusion must not merge it."""
    f = _program([("u", "tanh"), ("s", "transpose"), ("s", "softmax")])
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    y = lg.tensor(b)
    x, xe = lg.tensor(a, requires_grad=True), lg.tensor(a, requires_grad=True)
    loss, _ = lg.compile(f)(x, y)
    (g,) = lg.autograd.grad(loss, [x], create_graph=True)
    le, _ = f(xe, y)
    (ge,) = lg.autograd.grad(le, [xe], create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), ge.detach().numpy(), rtol=1e-10)
    (gg,) = lg.autograd.grad(g.sum(), [x])
    (gge,) = lg.autograd.grad(ge.sum(), [xe])
    np.testing.assert_allclose(gg.numpy(), gge.numpy(), rtol=1e-9, atol=1e-12)


def test_dynamic_shapes_compile_no_new_native_code():
    """dynamic=True: kernels take sizes at run time; a new size compiles nothing new."""
    from llgrad.runtime import cache

    def f(x, w):
        return (lg.softmax(lg.tanh(x @ w), -1) * lg.sigmoid(x).sum(1, keepdim=True)).sum()
    cf = lg.compile(f, dynamic=True)
    results = []
    for i, n in enumerate((4, 9, 17)):
        x = lg.randn(n, 3, dtype=lg.float64, requires_grad=True)
        w = lg.randn(3, 5, dtype=lg.float64, requires_grad=True)
        before = cache.stats()["kernels"]
        loss = cf(x, w)
        loss.backward()
        new_kernels = cache.stats()["kernels"] - before
        if i > 0:
            assert new_kernels == 0, f"size {n} compiled {new_kernels} new kernels"
        results.append((x, w, loss))
    for x, w, loss in results:
        x2, w2 = (t.detach().clone().requires_grad_() for t in (x, w))
        want = f(x2, w2)
        want.backward()
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-10)
        # the exact gradient of w is 0 (each softmax row sums to 1): rounding noise only
        np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_dynamic_training_step_over_batch_sizes():
    def make():
        lg.manual_seed(0)
        m = lg.nn.Sequential(lg.nn.Linear(6, 8), lg.nn.ReLU(), lg.nn.Linear(8, 3))
        return m, lg.optim.SGD(m.parameters(), lr=0.1)

    step = train_step
    model, opt = make()
    ref, ref_opt = make()
    cstep = lg.compile(step, dynamic=True)
    for n in (8, 5, 12, 8):
        x, y = lg.randn(n, 6), lg.randint(0, 3, (n,))
        np.testing.assert_allclose(cstep(model, opt, x, y).item(),
                                   step(ref, ref_opt, x, y).item(), rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_random_draws_in_compiled_code_advance_like_eager():
    """A traced draw reads the generator's state at call time and advances it: each call
    draws new numbers, and the stream equals eager's (dropout trains the same)."""
    f = lg.compile(lambda x: x * lg.rand(3))
    x = lg.ones(3)
    assert f(x).tolist() != f(x).tolist()
    assert f.graph_breaks == []                  # the draw is in the graph, not eager
    lg.manual_seed(5)
    got = [f(x).tolist() for _ in range(3)]
    lg.manual_seed(5)
    want = [(x * lg.rand(3)).tolist() for _ in range(3)]
    np.testing.assert_allclose(got, want)

    lg.manual_seed(0)
    model = lg.nn.Sequential(lg.nn.Linear(4, 8), lg.nn.Dropout(0.5), lg.nn.Linear(8, 1))
    ref = lg.nn.Sequential(lg.nn.Linear(4, 8), lg.nn.Dropout(0.5), lg.nn.Linear(8, 1))
    ref.load_state_dict(model.state_dict())
    compiled = lg.compile(model)
    xs = lg.randn(16, 4)
    for seed in (1, 2):
        lg.manual_seed(seed)
        compiled(xs).sum().backward()
        lg.manual_seed(seed)
        ref(xs).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    step = lg.compile(lambda x: ref(x).sum())
    step(xs)
    assert step.graph_breaks == []               # dropout's draw is in the graph
    u = lg.compile(lambda x: lg.empty(3).uniform_(-1, 1) + x)
    assert -1 <= float(u(lg.zeros(3)).min()) and u.graph_breaks == []


def test_inputs_needed_by_backward_are_referenced_not_copied():
    """A residual that is an input is passed to the backward by reference: the forward
    writes no copy of it, and an in-place change before backward raises eager's error."""
    rng = np.random.default_rng(0)
    x = lg.tensor(rng.standard_normal((32, 16)), requires_grad=True)
    y = lg.tensor(rng.standard_normal((32, 16)))
    cf = lg.compile(lambda x, y: (lg.exp(x) * y).sum())
    cf(x, y).backward()
    d = cf._entries[next(iter(cf._entries))].function.differentiated((0,))
    assert len(d.forward.graph.outputs) == 1            # the loss only: no residual copies
    assert d.partition.residual_sources == (("in", 0), ("in", 1))
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()) * y.numpy(), rtol=1e-12)
    loss = cf(x, y)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    # untouched inputs: the same call runs, and a view of an input works too
    x.grad = None
    cf2 = lg.compile(lambda x, y: (lg.exp(x.t()) * y.t()).sum())
    cf2(x, y).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.detach().numpy()) * y.numpy(), rtol=1e-12)
