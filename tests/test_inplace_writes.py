"""A compiled training step writes updated tensors in place (`CompiledGraph.
write_in_place`, `schedule.program.can_write_in_place`) instead of copying them back."""
from __future__ import annotations

import numpy as np

import llgrad as lg
from conftest import train_step


def _executable(cf):
    (entry,) = cf._entries.values()
    return entry.function.plain().executable


def _mlp_step():
    lg.manual_seed(0)
    model = lg.nn.Sequential(lg.nn.Linear(20, 16), lg.nn.ReLU(), lg.nn.Linear(16, 3))
    opt = lg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = lg.randn(8, 20), lg.randint(0, 3, (8,))

    step = train_step
    return model, opt, x, y, step


def test_sgd_step_updates_parameters_in_place_and_equals_eager():
    model, opt, x, y, step = _mlp_step()
    ref_model, ref_opt, _, _, _ = _mlp_step()
    cf = lg.compile(step)
    storages = [p._storage for p in model.parameters()]
    versions = [p._version for p in model.parameters()]
    for _ in range(3):
        got = cf(model, opt, x, y).item()
        want = step(ref_model, ref_opt, x, y).item()
        np.testing.assert_allclose(got, want, rtol=1e-5)
    for p, q in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    assert [p._storage for p in model.parameters()] == storages
    assert all(p._version > v for p, v in zip(model.parameters(), versions))
    ex = _executable(cf)
    assert len(ex._in_place) == 8      # the four parameters and their momentum buffers


def test_read_of_the_old_value_after_the_write_keeps_a_separate_output():
    w = lg.arange(6.0)

    @lg.compile
    def f():
        old = w * 3.0
        w.add_(1.0)
        return old + w.sum()       # old is read after w is updated: old w * 3 + new sum

    out = f()
    np.testing.assert_allclose(out.numpy(), np.arange(6.0) * 3 + (np.arange(6.0) + 1).sum())
    np.testing.assert_allclose(w.numpy(), np.arange(6.0) + 1)
    out = f()
    np.testing.assert_allclose(out.numpy(), (np.arange(6.0) + 1) * 3 +
                               (np.arange(6.0) + 2).sum())


def test_an_argument_sharing_memory_with_the_written_tensor_runs_as_eager_does():
    w = lg.arange(4.0)

    def f(v):
        w.mul_(2.0)
        return v + 0.0              # v views w: eager reads the doubled values

    cf = lg.compile(f)
    out = cf(w[:])
    np.testing.assert_allclose(out.numpy(), np.arange(4.0) * 2)
    np.testing.assert_allclose(w.numpy(), np.arange(4.0) * 2)
    out = cf(lg.arange(4.0))        # independent memory: the compiled graph runs
    np.testing.assert_allclose(out.numpy(), np.arange(4.0))
    np.testing.assert_allclose(w.numpy(), np.arange(4.0) * 4)


def test_an_argument_written_in_place_is_written_back_into_that_call_s_argument():
    @lg.compile
    def f(x):
        x.add_(1.0)
        return x * 2

    a, b = lg.zeros(3), lg.full((3,), 5.0)
    np.testing.assert_allclose(f(a).numpy(), [2, 2, 2])
    np.testing.assert_allclose(f(b).numpy(), [12, 12, 12])
    np.testing.assert_allclose(a.numpy(), [1, 1, 1])        # each call's own argument
    np.testing.assert_allclose(b.numpy(), [6, 6, 6])
    (entry,) = f._entries.values()
    assert entry.function.plain().executable._in_place == [(1, 0)]


def test_an_in_place_write_through_a_view_of_a_traced_value_runs_eagerly():
    def f(x):
        y = x * 1.0
        y[0].add_(2.0)               # writes y through a view
        return y.sum()

    cf = lg.compile(f)
    assert cf(lg.zeros(3)).item() == f(lg.zeros(3)).item() == 2.0
    assert any("view" in b for b in cf.graph_breaks)


def test_an_argument_that_requires_grad_written_in_place_runs_eagerly():
    def f(x):
        y = x * 1.0
        return y

    def g(y):
        y.mul_(3.0)
        return y.sum()

    x = lg.ones(3, requires_grad=True)
    y = f(x)
    loss = lg.compile(g)(y)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [3, 3, 3])


def test_a_captured_tensor_written_while_a_view_of_it_is_alive_runs_eagerly():
    w = lg.arange(3.0)

    def f(x):
        wt = w.view(3)
        w.add_(1.0)
        return wt * x               # the view sees the write

    cf = lg.compile(f)
    np.testing.assert_allclose(cf(lg.ones(3)).numpy(), [1, 2, 3])
    np.testing.assert_allclose(w.numpy(), [1, 2, 3])
    assert cf.graph_breaks


def test_a_dead_temporary_view_does_not_break_the_graph():
    def f(x):
        g = (x * 2.0).reshape(2, 2)     # the base is a temporary, gone by the write
        g.mul_(3.0)
        return g.sum()

    cf = lg.compile(f)
    assert cf(lg.ones(4)).item() == 24.0
    (entry,) = cf._entries.values()
    assert entry.graph_break is None

