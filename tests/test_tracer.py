"""Tracing into IR, symbolic autodiff and partition, checked through the NumPy interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.ir import interpret, parse, verify
from llgrad.compiler.autodiff import differentiate
from llgrad.passes.partition import partition
from llgrad.tracer import GraphBreak, make_ir
from llgrad.tracer.make_ir import trace


def mlp(x, w1, b1, w2):
    h = lg.relu(x @ w1 + b1)
    return lg.log_softmax(h @ w2, -1)


def sample(*shapes, dtype=lg.float64):
    rng = np.random.default_rng(0)
    return [lg.tensor(rng.standard_normal(s), dtype=dtype) for s in shapes]


FUNCTIONS = {
    "mlp": (mlp, [(4, 3), (3, 5), (5,), (5, 2)]),
    "elementwise": (lambda x, y: lg.tanh(x * y + 0.5) * lg.sigmoid(x) + lg.exp(-x * x),
                    [(6,), (6,)]),
    "reductions": (lambda x: x.sum(0) * x.mean(1).amax() + x.var(1).sum(), [(3, 4)]),
    "movement": (lambda x: x.t().reshape(2, 6).flip(1)[:, 1:4].unsqueeze(0) * 2,
                 [(3, 4)]),
    "promotion": (lambda x: (x * 2 + 1).to(lg.float32) / 3, [(5,)]),
    "layer_norm": (lambda x, g, b: lg.nn.functional.layer_norm(x, (4,), g, b) * 1.5,
                   [(3, 4), (4,), (4,)]),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_traced_graph_computes_what_eager_computes(name):
    fn, shapes = FUNCTIONS[name]
    args = sample(*shapes)
    g = make_ir(fn)(*args)
    verify(g)
    got = interpret(g, [a.numpy() for a in args])
    want = fn(*args)
    np.testing.assert_allclose(got[0], want.numpy(), rtol=1e-12, atol=1e-12)


def test_graph_text_round_trips_and_names_params():
    g = make_ir(mlp)(*sample((4, 3), (3, 5), (5,), (5, 2), dtype=lg.float32))
    text = str(g)
    assert text.startswith("graph @mlp(%x: f32[4,3], %w1: f32[3,5], %b1: f32[5], %w2: f32[5,2])")
    assert "matmul(%x, %w1)" in text and "test_tracer.py" in text     # user source lines
    assert parse(text) == g


def test_scalars_become_consts_with_promoted_dtype():
    g = make_ir(lambda x: x * 2 + 0.5)(lg.ones(3, dtype=lg.int32))
    ops = [(n.op, n.type.dtype.name) for n in g.nodes if n.op != "param"]
    assert ("const", "int32") in ops           # 2 takes the int tensor's dtype
    assert ("cast", "float32") in ops          # + 0.5 promotes to float32


def test_captured_tensors_become_params():
    w = lg.randn(3)
    g = make_ir(lambda x: x * w)(lg.randn(3))
    assert len(g.params) == 2 and g.params[1].attr("name") == "c0"


def test_data_dependent_python_is_a_graph_break():
    def f(x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(GraphBreak, match=r"bool\(\) on a traced tensor at test_tracer.py:\d+"):
        make_ir(f)(lg.ones(3))


def test_inplace_in_a_trace_is_functional():
    def f(x):
        y = x * 1.0
        y.add_(1)
        y.mul_(2)
        return y
    g = make_ir(f)(lg.ones(3))
    np.testing.assert_allclose(interpret(g, [np.ones(3, np.float32)])[0], [4, 4, 4])


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_autodiff_and_partition_match_eager_backward(name):
    fn, shapes = FUNCTIONS[name]
    args = sample(*shapes)
    g, _, _ = trace(lambda *a: fn(*a).sum(), tuple(args), {})
    joint = differentiate(g, list(range(len(args))))
    verify(joint)
    part = partition(joint, len(args), 1)
    verify(part.forward)
    verify(part.backward)
    inputs = [a.numpy() for a in args]
    fwd = interpret(part.forward, inputs)
    ct = np.ones((), dtype=part.backward.params[-1].type.dtype.np)
    grads = interpret(part.backward, part.backward_residuals(inputs, fwd[1:]) + [ct])
    leaves = [a.clone().requires_grad_() for a in args]
    fn(*leaves).sum().backward()
    for got, leaf in zip(grads, leaves):
        np.testing.assert_allclose(got, leaf.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_partition_reports_residuals_and_recomputation():
    args = sample((64, 64), (64, 64))
    g, _, _ = trace(lambda x, y: (lg.softmax(x, -1) * y).sum(), tuple(args), {})
    part = partition(differentiate(g, [0, 1]), 2, 1)
    assert part.residual_bytes > 0           # softmax's output is stored (a reduction)
    assert "residuals" in str(part)


def test_partition_passes_inputs_by_reference():
    """Inputs the backward needs are never copied into residual outputs; elementwise
    values of inputs are recomputed in the backward from the inputs themselves."""
    args = sample((64, 64), (64, 64))
    g, _, _ = trace(lambda x, y: (lg.exp(x) * y).sum(), tuple(args), {})
    part = partition(differentiate(g, [0, 1]), 2, 1)
    assert part.residual_bytes == 0 and part.n_residuals == 0
    assert part.residual_sources == (("in", 0), ("in", 1))
    assert len(part.forward.outputs) == 1


def test_partition_recomputes_a_whole_elementwise_cone():
    """sigmoid'(x) = s * (1 - s) reads two intermediates; both come from x, so nothing is
    stored."""
    args = sample((64, 64), (64, 64))
    g, _, _ = trace(lambda x, w: (lg.tanh(x * w + 0.5) * lg.sigmoid(x)).sum(), tuple(args), {})
    part = partition(differentiate(g, [0, 1]), 2, 1)
    assert part.residual_bytes == 0


def test_partition_collapses_a_long_chain_in_few_sweeps(monkeypatch):
    """A chain far longer than one recompute walk collapses onto its input, with a number
    of walks linear in its length (a walk that stops returns the cut it reached, so the
    chain shortens by a whole walk per step, not by one node)."""
    import llgrad.passes.partition as P
    (x,) = sample((64,))

    def chain(x):
        for i in range(1200):
            x = lg.sin(x) if i % 3 == 0 else (lg.tanh(x) if i % 3 == 1 else x * 1.01)
        return x.sum()
    g, _, _ = trace(chain, (x,), {})
    joint = differentiate(g, [0])
    walks = []
    frontier = P._frontier
    monkeypatch.setattr(P, "_frontier", lambda *a: walks.append(1) or frontier(*a))
    part = partition(joint, 1, 1)
    assert part.n_residuals == 0
    assert len(walks) < 3 * 800              # 800 stored values before the collapse
    fwd = interpret(part.forward, [x.numpy()])
    (gx,) = interpret(part.backward, part.backward_residuals([x.numpy()], fwd[1:]) +
                      [np.ones(())])
    leaf = x.clone().requires_grad_()
    chain(leaf).backward()
    np.testing.assert_allclose(gx, leaf.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_indexing_traces_to_gather_and_differentiates():
    def f(x, t):
        return -lg.log_softmax(x, -1)[lg.arange(4), t].mean()
    x0 = sample((4, 5))[0]
    t0 = lg.tensor([1, 0, 4, 2])
    g, ctx, _ = trace(f, (x0, t0), {})
    assert any(n.op == "gather" for n in g.nodes)
    captured = [c.numpy() for c in ctx.captured]          # lg.arange(4), made concrete
    part = partition(differentiate(g, [0]), 2 + len(captured), 1)
    fwd = interpret(part.forward, [x0.numpy(), t0.numpy()] + captured)
    primals = [x0.numpy(), t0.numpy()] + captured
    (gx,) = interpret(part.backward, part.backward_residuals(primals, fwd[1:]) + [np.ones(())])
    x = x0.clone().requires_grad_()
    f(x, t0).backward()
    np.testing.assert_allclose(fwd[0], f(x0, t0).numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("index", [(Ellipsis, slice(1, 3), None), (0, slice(None, None, 2)),
                                   (slice(None), [2, 0]), ([1, 0], slice(None), [3, 1])])
def test_traced_indexing_matches_eager(index):
    a = np.arange(40.0).reshape(2, 4, 5)
    x = lg.tensor(a)

    def f(x):
        return x[index]
    g = make_ir(f)(x)
    np.testing.assert_array_equal(interpret(g, [a])[0], f(x).numpy())


def _golden_loss(x, w):
    h = lg.relu(x @ w)
    return (h * 2.0).sum()


def test_golden_traced_ir_text():
    import inspect
    first = inspect.getsourcelines(_golden_loss)[1]
    text = str(make_ir(_golden_loss)(lg.ones(4, 3), lg.ones(3, 2)))
    a, b = f"test_tracer.py:{first + 1}", f"test_tracer.py:{first + 2}"
    assert text == f"""graph @_golden_loss(%x: f32[4,3], %w: f32[3,2]) {{
  %0 = matmul(%x, %w)                        : f32[4,2]   # {a}
  %1 = relu(%0)                              : f32[4,2]   # {a}
  %2 = const(value=2.0, dtype=f32, shape=[]) : f32[]      # {b}
  %3 = mul(%1, %2)                           : f32[4,2]   # {b}
  %4 = sum(%3, axes=[], keepdim=false)       : f32[]      # {b}
  return %4
}}
"""


def _without_locations(text: str) -> str:
    return "\n".join(line.split("   #")[0].rstrip() for line in text.splitlines())


def test_golden_backward_ir_text():
    """The backward graph: x and relu's mask are the only residuals (constants and the
    elementwise rest are rebuilt), and the rules are the eager ones (relu's `where`)."""
    g, _, _ = trace(_golden_loss, (lg.ones(4, 3), lg.ones(3, 2)), {})
    part = partition(differentiate(g, [1]), 2, 1)
    assert _without_locations(str(part.backward)) == """\
graph @_golden_loss_joint_backward(%r0: f32[4,3], %r1: bool[4,2], %ct0: f32[]) {
  %0 = permute(%r0, perm=[1,0])              : f32[3,4]
  %1 = reshape(%ct0, shape=[1,1])            : f32[1,1]
  %2 = expand(%1, shape=[4,2])               : f32[4,2]
  %3 = const(value=2.0, dtype=f32, shape=[]) : f32[]
  %4 = mul(%2, %3)                           : f32[4,2]
  %5 = const(value=0.0, dtype=f32, shape=[]) : f32[]
  %6 = mul(%4, %5)                           : f32[4,2]
  %7 = where(%r1, %4, %6)                    : f32[4,2]
  %8 = matmul(%0, %7)                        : f32[3,2]
  return %8
}"""
