"""A compiled scalar loss computes its gradients in the forward (`compiler/function.py`):
the node hands them out for cotangent 1 and recomputes for anything else, with eager
autograd's values and errors in every case, and stops doing so when it does not pay."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.tape.node import FREED
from llgrad.compiler import function


def _loss(x, w):
    return (lg.tanh(x * w + 0.5) * lg.sigmoid(x) + lg.exp(-x * x)).sum()


def _inputs(seed=0, n=300):
    rng = np.random.default_rng(seed)
    return [lg.tensor(rng.standard_normal(n), requires_grad=True) for _ in range(2)]


def _eager_grads(f, xs, scale=1.0):
    ex = [x.detach().requires_grad_() for x in xs]
    return [g.numpy() * scale for g in lg.autograd.grad(f(*ex), ex)]


def _speculation(cf):
    (entry,) = cf._entries.values()
    (spec,) = [s for s in entry.function._spec.values() if s is not None]
    return spec


def test_backward_and_grad_take_the_gradients_made_by_the_forward():
    x, w = _inputs()
    cf = lg.compile(_loss)
    want = _eager_grads(_loss, [x, w])
    for _ in range(3):
        loss = cf(x, w)
        node = loss.grad_fn
        assert node.precomputed is not None and node.diff is None
        got = lg.autograd.grad(loss, [x, w])
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-12, atol=1e-14)
    x.grad = w.grad = None
    cf(x, w).backward()
    np.testing.assert_allclose(x.grad.numpy(), want[0], rtol=1e-12, atol=1e-14)
    spec = _speculation(cf)
    assert spec.on and spec.misses == 0 and spec.pending == 0


@pytest.mark.parametrize("how", ["scaled", "hook", "retain", "create_graph"])
def test_other_cotangents_recompute_with_eager_values(how):
    x, w = _inputs(1)
    cf = lg.compile(_loss)
    if how == "scaled":
        got = lg.autograd.grad(cf(x, w) * 3.0, [x, w])
        want = _eager_grads(_loss, [x, w], 3.0)
    elif how == "hook":
        loss = cf(x, w)
        loss.register_hook(lambda g: g * 0.5)
        got = lg.autograd.grad(loss, [x, w])
        want = _eager_grads(_loss, [x, w], 0.5)
    elif how == "retain":
        loss = cf(x, w)
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)        # the second backward recomputes
        got = [x.grad.clone(), w.grad.clone()]
        want = _eager_grads(_loss, [x, w], 2.0)
        loss.backward()
        with pytest.raises(RuntimeError, match="second time"):
            loss.backward()
    else:
        (gx,) = lg.autograd.grad(cf(x, w), [x], create_graph=True)
        got = lg.autograd.grad(gx.sum(), [x, w])
        ex = [t.detach().requires_grad_() for t in (x, w)]
        (egx,) = lg.autograd.grad(_loss(*ex), [ex[0]], create_graph=True)
        want = [g.numpy() for g in lg.autograd.grad(egx.sum(), ex)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-10, atol=1e-12)


def test_second_backward_without_retain_raises_freed():
    x, w = _inputs(2)
    loss = lg.compile(_loss)(x, w)
    loss.backward()
    with pytest.raises(RuntimeError) as e:
        loss.backward()
    assert str(e.value) == FREED


def test_an_input_changed_in_place_raises_only_when_the_gradients_read_it():
    x, w = _inputs(3)
    cf = lg.compile(_loss)
    loss = cf(x, w)
    with lg.no_grad():
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    # a loss whose gradients read no input: a later in-place change is harmless
    lin = lg.compile(lambda a, b: (a * 2.0 + b * 3.0).sum())
    a, b = _inputs(4)
    loss = lin(a, b)
    with lg.no_grad():
        a.mul_(5.0)
    ga, gb = lg.autograd.grad(loss, [a, b])
    assert ga.tolist() == [2.0] * 300 and gb.tolist() == [3.0] * 300


def test_losses_never_backpropagated_turn_it_off():
    x, w = _inputs(5)
    cf = lg.compile(_loss)
    with lg.enable_grad():
        for _ in range(function._Speculation.MAX_PENDING + 2):
            cf(x, w)
    spec = _speculation(cf)
    assert not spec.on
    loss = cf(x, w)
    assert loss.grad_fn.precomputed is None and loss.grad_fn.diff is not None
    got = lg.autograd.grad(loss, [x, w])
    for a, b in zip(got, _eager_grads(_loss, [x, w])):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-12, atol=1e-14)


def test_repeated_other_cotangents_turn_it_off():
    x, w = _inputs(6)
    cf = lg.compile(_loss)
    for _ in range(function._Speculation.MAX_MISSES):
        assert cf(x, w).grad_fn.precomputed is not None
        lg.autograd.grad(cf(x, w) * 2.0, [x])
    assert cf(x, w).grad_fn.precomputed is None
    assert not _speculation(cf).on


@pytest.mark.parametrize("outputs", ["vector", "two_losses"])
def test_not_a_single_scalar_loss_keeps_the_partitioned_graphs(outputs):
    x, w = _inputs(7)
    if outputs == "vector":
        cf = lg.compile(lambda x, w: (x * w).exp())
    else:
        cf = lg.compile(lambda x, w: ((x * w).sum(), (x - w).sum()))
    out = cf(x, w)
    node = (out if outputs == "vector" else out[0]).grad_fn
    assert node.precomputed is None and node.diff is not None


def test_a_scalar_loss_beside_integer_outputs_still_computes_gradients_ahead():
    x, w = _inputs(8)
    cf = lg.compile(lambda x, w: (_loss(x, w), (x > 0).sum()))
    loss, count = cf(x, w)
    assert loss.grad_fn.precomputed is not None and count.item() == int((x > 0).sum())
    got = lg.autograd.grad(loss, [x, w])
    for a, b in zip(got, _eager_grads(_loss, [x, w])):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-12, atol=1e-14)


def test_float32_training_loop_matches_eager_and_the_partitioned_graphs(monkeypatch):
    """Twenty SGD steps on a compiled float32 loss: the same weights as eager, and as
    the partitioned forward and backward."""
    rng = np.random.default_rng(9)
    X = rng.standard_normal((64, 8)).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)

    def loss_fn(w, X, y):
        return ((lg.tanh(X @ w) - y) ** 2).mean()

    def train(step):
        w = lg.tensor(np.linspace(-0.5, 0.5, 8, dtype=np.float32), requires_grad=True)
        for _ in range(20):
            loss = step(w, lg.tensor(X), lg.tensor(y))
            loss.backward()
            with lg.no_grad():
                w -= 0.1 * w.grad
            w.grad = None
        return w.detach().numpy()
    eager = train(loss_fn)
    ahead = train(lg.compile(loss_fn))
    monkeypatch.setattr(function, "GRADIENTS_IN_FORWARD", False)
    partitioned = train(lg.compile(loss_fn))
    np.testing.assert_allclose(ahead, eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ahead, partitioned, rtol=1e-5, atol=1e-6)


def test_the_generated_call_makes_the_node_record_speculative_makes():
    x, w = _inputs(8)
    cf = lg.compile(_loss)
    cf(x, w)                                   # the general path, then the generated one
    fast = cf(x, w)
    (entry,) = cf._entries.values()
    fn = entry.function
    call = fn.diff_call((0, 1), 2)
    assert call.fast is not call and "speculative call" in call.fast.__code__.co_filename
    made = fn.record_speculative(call.spec, (0, 1), (x, w), call.spec_run(x, w))[0]
    a, b = fast.grad_fn, made.grad_fn
    for field in function.CompiledBackward.__slots__:
        va, vb = getattr(a, field), getattr(b, field)
        if field == "precomputed":
            assert [t.tolist() for t in va] == [t.tolist() for t in vb]
        else:
            assert va == vb, field
    for field in ("_hooks", "_prehooks", "_metadata", "_trace"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.next_functions == b.next_functions and a._seq < b._seq
    assert (fast._requires_grad, fast._output_nr, fast.tolist()) == \
        (made._requires_grad, made._output_nr, made.tolist())


def _declines(loss, inputs):
    return loss.grad_fn.direct_grads(loss, inputs, False) is None


@pytest.mark.parametrize("case", ["reordered", "repeated", "subset", "leaf_hook",
                                  "post_accumulate_hook", "accumulator_hook", "anomaly"])
def test_the_node_answers_grad_alone_only_when_nothing_else_is_asked(case):
    """`CompiledBackward.direct_grads` declines every case the engine must decide, and
    `lg.autograd.grad` then gives eager's answer."""
    x, w = _inputs(9)
    cf = lg.compile(_loss)
    want = dict(zip("xw", _eager_grads(_loss, [x, w])))
    seen = []
    if case == "leaf_hook":
        x.register_hook(lambda g: seen.append(1))
    elif case == "post_accumulate_hook":
        x.register_post_accumulate_grad_hook(lambda t: seen.append(1))
    loss = cf(x, w)
    if case == "accumulator_hook":
        loss.grad_fn.next_functions[0][0].register_hook(lambda *a: seen.append(1))
    inputs, names = {"reordered": ([w, x], "wx"), "repeated": ([x, x], "xx"),
                     "subset": ([w], "w")}.get(case, ([x, w], "xw"))
    with lg.autograd.set_detect_anomaly(case == "anomaly"):
        assert _declines(loss, inputs)
        got = lg.autograd.grad(loss, inputs)
    for g, n in zip(got, names):
        np.testing.assert_allclose(g.numpy(), want[n], rtol=1e-12, atol=1e-14)
    if case == "leaf_hook":
        assert seen == [1]


def test_the_node_answer_with_retain_graph_keeps_the_graph():
    x, w = _inputs(10)
    cf = lg.compile(_loss)
    want = _eager_grads(_loss, [x, w])
    loss = cf(x, w)
    first = lg.autograd.grad(loss, [x, w], retain_graph=True)
    assert loss.grad_fn.precomputed is None and loss.grad_fn.inputs == (x, w)
    second = lg.autograd.grad(loss, [x, w])         # recomputed from the inputs
    for a, b, c in zip(first, second, want):
        np.testing.assert_allclose(a.numpy(), c, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b.numpy(), c, rtol=1e-12, atol=1e-14)
    with pytest.raises(RuntimeError) as e:
        lg.autograd.grad(loss, [x, w])
    assert str(e.value) == FREED


def test_the_node_declines_after_an_input_changed_and_grad_raises_eagers_error():
    x, w = _inputs(11)
    loss = lg.compile(_loss)(x, w)
    with lg.no_grad():
        w.mul_(2.0)
    assert _declines(loss, [x, w])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        lg.autograd.grad(loss, [x, w])


@pytest.mark.parametrize("case", ["plain", "existing_grad", "leaf_hook", "post_accumulate_hook",
                                  "gradient", "inputs"])
def test_backward_through_the_node_accumulates_as_the_engine_does(case):
    """`loss.backward()` of a compiled loss: the node accumulates its gradients alone
    when nothing else is asked (`direct_grads` with inputs None), else the engine runs;
    `.grad` and every hook end as eager autograd leaves them."""
    def run(f):
        x, w = _inputs(12)
        seen = []
        if case == "existing_grad":
            x.grad = lg.ones(300, dtype=lg.float64)
        elif case == "leaf_hook":
            x.register_hook(lambda g: g * 2.0)
        elif case == "post_accumulate_hook":
            w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.sum().item()))
        loss = f(x, w)
        if case == "gradient":
            loss.backward(lg.tensor(0.5, dtype=lg.float64))
        elif case == "inputs":
            loss.backward(inputs=[w])
        else:
            loss.backward()
        return [None if t.grad is None else t.grad.numpy().copy() for t in (x, w)], seen
    got, got_seen = run(lg.compile(_loss))
    want, want_seen = run(_loss)
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_seen, want_seen, rtol=1e-12)
    assert len(got_seen) == (1 if case == "post_accumulate_hook" else 0)


def test_backward_through_the_node_takes_the_new_buffer_then_adds_in_place():
    x, w = _inputs(13)
    cf = lg.compile(_loss)
    loss = cf(x, w)
    made = loss.grad_fn.precomputed[0]
    loss.backward()
    assert x.grad is made                        # a new buffer nobody else holds
    grad = x.grad
    cf(x, w).backward()
    assert x.grad is grad                        # accumulated in place
    np.testing.assert_allclose(x.grad.numpy(), 2 * _eager_grads(_loss, [x, w])[0],
                               rtol=1e-12, atol=1e-14)
