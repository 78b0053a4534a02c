"""Activation checkpointing: same gradients as without it, less memory held for backward."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn as nn
from llgrad.utils.checkpoint import (CheckpointError, checkpoint, checkpoint_sequential,
                                     saved_bytes)


from conftest import t64, vals


RNG = np.random.default_rng(11)


def make_mlp(depth=6, width=16, p=0.25, seed=0):
    lg.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.Tanh(), nn.Dropout(p)]
    return nn.Sequential(*layers)


def run(model, x, go, mode, segments=3):
    """Forward (+ backward with `go`); returns output values and every gradient."""
    model.zero_grad()
    x.grad = None
    lg.manual_seed(123)                     # the dropout masks
    if mode == "plain":
        y = model(x)
    else:
        y = checkpoint_sequential(model, segments, x, use_reentrant=(mode == "reentrant"))
    y.backward(go)
    grads = [vals(p.grad) for p in model.parameters()] + [vals(x.grad)]
    return vals(y), grads


@pytest.mark.parametrize("mode", ["non_reentrant", "reentrant"])
def test_mlp_with_dropout_matches_plain(mode):
    model = make_mlp()
    x = t64(RNG.standard_normal((8, 16)), True).float()
    x = x.detach().requires_grad_(True)
    go = lg.tensor(RNG.standard_normal((8, 16)).astype(np.float32))
    y0, g0 = run(model, x, go, "plain")
    y1, g1 = run(model, x, go, mode)
    np.testing.assert_array_equal(y0, y1)
    assert len(g0) == len(g1) == 6 * 2 + 1
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_rng_state_is_what_makes_dropout_recompute_identically():
    w = t64(RNG.standard_normal(32), True)

    def fn(h):
        return nn.functional.dropout(h * w, 0.5, True).tanh()

    x = t64(RNG.standard_normal(32), True)
    go = t64(np.ones(32))

    def grad_of(**kw):
        lg.manual_seed(5)
        w.grad = None
        y = checkpoint(fn, x, **kw) if kw.get("preserve_rng_state") is not None else fn(x)
        y.backward(go)
        after = lg.rand(4).tolist()        # the caller's RNG stream continues unchanged
        return vals(w.grad), after

    plain, after_plain = grad_of()
    kept, after_kept = grad_of(preserve_rng_state=True)
    lost, _ = grad_of(preserve_rng_state=False)
    np.testing.assert_array_equal(plain, kept)
    assert after_plain == after_kept
    assert not np.array_equal(plain, lost)      # other masks were drawn in recomputation


def test_non_reentrant_keeps_the_real_graph():
    model = make_mlp(depth=2)
    x = lg.randn(4, 16, requires_grad=True)
    y = checkpoint(model, x)
    assert type(y.grad_fn).__name__ == "MulBackward0"          # dropout's mul, as without it
    y2 = checkpoint(model, x, use_reentrant=True)
    assert type(y2.grad_fn).__name__ == "CheckpointFunctionBackward"


def test_autograd_grad_reaches_closure_parameters():
    lin = nn.Linear(5, 5)
    x = lg.randn(3, 5)                          # the input needs no grad
    go = lg.randn(3, 5)
    y = checkpoint(lambda h: lin(h).tanh() * 2, x)
    gw, gb = lg.autograd.grad(y, (lin.weight, lin.bias), go)
    ew, eb = lg.autograd.grad(lin(x).tanh() * 2, (lin.weight, lin.bias), go)
    np.testing.assert_allclose(vals(gw), vals(ew), rtol=1e-6)
    np.testing.assert_allclose(vals(gb), vals(eb), rtol=1e-6)
    assert lin.weight.grad is None              # autograd.grad accumulates nowhere


def test_recomputes_once_per_graph():
    calls = []
    w = t64(RNG.standard_normal(6), True)

    def fn(h):
        calls.append(1)
        return (h * w).sin() * h

    x = t64(RNG.standard_normal(6), True)
    y = checkpoint(fn, x)
    assert len(calls) == 1
    y.backward(t64(np.ones(6)), retain_graph=True)
    assert len(calls) == 2
    first = vals(x.grad).copy()
    y.backward(t64(np.ones(6)))                 # values already recomputed: reused
    assert len(calls) == 2
    np.testing.assert_allclose(vals(x.grad), 2 * first)


def test_kwargs_and_non_tensor_arguments():
    def fn(a, k, *, scale=1.0, shift=None):
        return (a * k).exp() * scale + shift

    x = t64(RNG.standard_normal(5), True)
    s = t64(RNG.standard_normal(5), True)
    go = t64(RNG.standard_normal(5))
    y = checkpoint(fn, x, 3.0, scale=2.0, shift=s)
    gx, gs = lg.autograd.grad(y, (x, s), go)
    ex, es = lg.autograd.grad(fn(x, 3.0, scale=2.0, shift=s), (x, s), go)
    np.testing.assert_allclose(vals(gx), vals(ex))
    np.testing.assert_allclose(vals(gs), vals(es))
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(fn, x, 3.0, use_reentrant=True, scale=2.0)


def test_multiple_and_nested_outputs():
    def fn(a, b):
        return {"prod": a * b, "pair": (a.sin(), b.exp())}

    a, b = t64(RNG.standard_normal(4), True), t64(RNG.standard_normal(4), True)
    out = checkpoint(fn, a, b)
    loss_terms = [out["prod"], out["pair"][0], out["pair"][1]]
    lg.autograd.backward(loss_terms, [t64(np.ones(4))] * 3)
    av, bv = vals(a), vals(b)
    np.testing.assert_allclose(vals(a.grad), bv + np.cos(av))
    np.testing.assert_allclose(vals(b.grad), av + np.exp(bv))


def test_double_backward_through_checkpoint():
    w = t64(RNG.standard_normal(5), True)

    def fn(h):
        return (h * h * w).sin() * h

    x = t64(RNG.standard_normal(5), True)
    v = t64(RNG.standard_normal(5))
    results = []
    for use in (False, True):
        y = checkpoint(fn, x) if use else fn(x)
        g, = lg.autograd.grad(y, x, v, create_graph=True)
        hx, hw = lg.autograd.grad(g, (x, w), v)
        results.append((vals(g), vals(hx), vals(hw)))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_nested_checkpoints():
    w = t64(RNG.standard_normal(4), True)

    def inner(h):
        return (h * w).tanh()

    def outer(h):
        return checkpoint(inner, h * 2).exp() * h

    x = t64(RNG.standard_normal(4), True)
    go = t64(RNG.standard_normal(4))
    gx, gw = lg.autograd.grad(checkpoint(outer, x), (x, w), go)
    ex, ew = lg.autograd.grad(outer(x), (x, w), go)
    np.testing.assert_allclose(vals(gx), vals(ex), rtol=1e-12)
    np.testing.assert_allclose(vals(gw), vals(ew), rtol=1e-12)


def test_input_modified_in_place_is_detected():
    x = t64(RNG.standard_normal(4), True)
    h = x * 1
    y = checkpoint(lambda a: a.exp().sin(), h)
    with lg.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(t64(np.ones(4)))


def test_nondeterministic_recomputation_is_an_error():
    calls = []

    def fn(h):
        calls.append(1)
        if len(calls) == 1:
            return (h * h).sin()
        return (h * h).sin().sin()                    # a different graph the second time

    x = t64(RNG.standard_normal(3), True)
    y = checkpoint(fn, x)
    with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
        y.backward(t64(np.ones(3)))


def test_recomputed_metadata_is_checked():
    calls = []

    def fn(h):
        calls.append(1)
        if len(calls) > 1:
            h = h.expand(2, 3)                        # same saving ops, other shapes
        return (h * h).sin()

    x = t64(RNG.standard_normal(3), True)
    y = checkpoint(fn, x)
    with pytest.raises(CheckpointError, match="Recomputed values for the following tensors "
                                              "have different metadata"):
        y.backward(t64(np.ones(3)))
    y = checkpoint(fn, x, determinism_check="none")  # unchecked: the caller's risk
    assert y.grad_fn is not None


def test_graph_memory_is_released_after_backward():
    w = t64(RNG.standard_normal(64), True)
    x = t64(RNG.standard_normal(64), True)
    for reentrant in (False, True):
        y = checkpoint(lambda h: (h * w).sin().exp(), x, use_reentrant=reentrant)
        assert saved_bytes(y) > 0
        y.backward(t64(np.ones(64)))
        assert saved_bytes(y) == 0


def test_context_fn_wraps_forward_and_recomputation():
    import contextlib
    events = []

    @contextlib.contextmanager
    def mark(name):
        events.append((name, lg.is_grad_enabled()))
        yield

    x = t64(RNG.standard_normal(3), True)
    y = checkpoint(lambda a: a.sin() * a, x,
                   context_fn=lambda: (mark("forward"), mark("recompute")))
    assert events == [("forward", True)]
    y.backward(t64(np.ones(3)))
    assert events == [("forward", True), ("recompute", True)]
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(lambda a: a, x, use_reentrant=True,
                   context_fn=lambda: (mark("f"), mark("r")))


def test_under_no_grad_it_is_just_a_call():
    x = t64([1.0, 2.0], True)
    with lg.no_grad():
        y = checkpoint(lambda a: a.exp(), x)
    assert y.grad_fn is None
    np.testing.assert_allclose(vals(y), np.exp([1.0, 2.0]))


def test_checkpoint_sequential_segments_and_lists():
    fns = [lambda h, k=k: (h * (k + 1.0)).sin() for k in range(7)]
    x = t64(RNG.standard_normal(3), True)
    go = t64(RNG.standard_normal(3))
    ref = x
    for f in fns:
        ref = f(ref)
    want, = lg.autograd.grad(ref, x, go)
    for segments in (1, 2, 3, 7):
        y = checkpoint_sequential(fns, segments, x)
        np.testing.assert_allclose(vals(y), vals(ref))
        got, = lg.autograd.grad(y, x, go)
        np.testing.assert_allclose(vals(got), vals(want), rtol=1e-12)


# --------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------

def test_saved_bytes_counts_distinct_storages():
    x = t64(np.linspace(0.0, 1.0, 100), True)
    y = x.exp()                                   # saves its output: 800 bytes
    assert saved_bytes(y) == 800
    z = y * x                                     # saves y and x (x is a leaf)
    assert saved_bytes(z) == 1600
    assert saved_bytes(z, include_leaves=False) == 800
    assert saved_bytes(x) == 0


def _deep_chain(depth, width, batch, segments):
    lg.manual_seed(0)
    layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())]
    x = lg.randn(batch, width)
    if segments is None:
        h = x
        for layer in layers:
            h = layer(h)
    else:
        h = checkpoint_sequential(layers, segments, x)
    return h, layers


def test_checkpoint_saves_memory_in_a_deep_mlp():
    """16 x (Linear(256, 256) -> Tanh), batch 128, float32.

    Without checkpointing, each Linear keeps its input and each Tanh its output, which is
    the next Linear's input: x and the 16 layer outputs stay alive (17 activations of
    128 KiB). With k segments, only the k - 1 checkpointed segments' inputs and the last
    segment's own activations stay.
    """
    depth, width, batch = 16, 256, 128
    act = batch * width * 4                       # one float32 activation: 128 KiB
    params = depth * (width * width + width) * 4
    figures = {}
    for segments in (None, 2, 4, 8):
        y, layers = _deep_chain(depth, width, batch, segments)
        figures[segments] = (saved_bytes(y), saved_bytes(y, include_leaves=False))
        if segments == 4:
            y.backward(lg.ones(batch, width))     # and it still trains
            assert all(p.grad is not None for m in layers for p in m.parameters())
    print("\nsaved bytes (all, activations only):", figures)
    assert figures[None][1] == 17 * act
    assert figures[None][0] == 17 * act + params
    per_segment = depth // 4
    for segments in (2, 4, 8):
        layers_in_last = depth - (depth // segments) * (segments - 1)
        want = (segments - 1) + (layers_in_last + 1)
        assert figures[segments][1] == want * act, segments
        assert figures[segments][0] == want * act + params, segments
    assert per_segment == 4 and figures[4][1] == 8 * act
    assert figures[4][1] < 0.5 * figures[None][1]
