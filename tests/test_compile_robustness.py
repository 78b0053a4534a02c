"""Every program that runs eagerly compiles and runs, or falls back to eager with a logged
reason; none raises an internal error (issue 28, item 6).

The programs are the random-program generator's (tests/test_random_programs.py), which
mixes reductions along different axes of one value and returns outputs of several ranks:
the shapes that made the row-kernel scheduler refuse groups. A compile that fails anyway
must run the function eagerly (`CompiledFunction`), log why on `llgrad.graph_breaks` and
warn once; `llgrad.compiler.function.failures` counts such fallbacks, and these tests
require zero of them (each would be an llgrad bug hidden behind a correct result).
`-m slow` runs COMPILE_PROGRAMS (2,000) programs.
"""
from __future__ import annotations

import logging
import os
import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad.compiler import function, pipeline

from test_random_programs import EDGE, OVERLAP, draw, program


def _compile_and_compare(steps: list[str], n: int, dtype: str, seed: int) -> bool:
    """Eager first; if it runs, the compiled call must run too, agree, and not fall back.
    Returns whether the eager call ran."""
    rng = np.random.default_rng(seed)
    a, b, c = (rng.standard_normal((n, n)) for _ in range(3))
    kv = rng.choice(EDGE, size=(n, n))
    f = program(steps, n)
    ld = getattr(lg, dtype)

    def inputs():
        return (lg.tensor(a, dtype=ld, requires_grad=True), lg.tensor(b, dtype=ld),
                lg.tensor(c, dtype=ld, requires_grad=True), lg.tensor(kv))
    try:
        want = f(lg, *inputs())
    except RuntimeError as e:
        assert OVERLAP in str(e), e
        return False
    before = len(function.failures)
    got = lg.compile(lambda *v: f(lg, *v))(*inputs())
    got[0].backward()
    assert len(function.failures) == before, function.failures[before:]
    for g, w in zip(got, want):
        tol = 1e-9 if dtype == "float64" else 3e-3
        np.testing.assert_allclose(np.asarray(g.detach().numpy(), np.float64),
                                   np.asarray(w.detach().numpy(), np.float64),
                                   rtol=tol, atol=tol, err_msg=f"{steps} n={n} {dtype}")
    return True


@pytest.mark.parametrize("index", range(12))
def test_random_programs_compile_without_internal_errors(index: int) -> None:
    _compile_and_compare(*draw(np.random.default_rng(77_000 + index)))


@pytest.mark.slow
def test_compile_robustness_at_scale() -> None:
    total = int(os.environ.get("COMPILE_PROGRAMS", "2000"))
    ran = 0
    for index in range(total):
        ran += _compile_and_compare(*draw(np.random.default_rng(5_000_000 + index)))
    print(f"COMPILE ROBUSTNESS: {total} programs, {ran} ran eagerly and compiled, "
          f"{len(function.failures)} compile failures")
    assert not function.failures


# --------------------------------------------------------------------------------------
# The reported programs
# --------------------------------------------------------------------------------------

def _mixed_axes(x):
    return x.sum(0) * x.mean(1, keepdim=True) + x.amax(dim=1, keepdim=True) - \
        x.logsumexp(dim=0)


def _scalar_and_layer_norm(x):
    y = x.sum()
    return y, y + lg.nn.functional.layer_norm(x, (x.shape[-1],)).mean()


@pytest.mark.parametrize("requires_grad", [False, True])
def test_reductions_along_both_axes_of_one_value_compile(requires_grad):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((3, 4))
    x = lg.tensor(a, requires_grad=requires_grad)
    before = len(function.failures)
    got = lg.compile(_mixed_axes)(x)
    tx = torch.tensor(a, requires_grad=requires_grad)
    want = tx.sum(0) * tx.mean(1, keepdim=True) + tx.amax(dim=1, keepdim=True) - \
        tx.logsumexp(dim=0)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    if requires_grad:
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert len(function.failures) == before


def test_a_zero_d_output_beside_layer_norm_of_it_compiles_with_gradients():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((2, 2))
    x = lg.tensor(a, requires_grad=True)
    before = len(function.failures)
    y, z = lg.compile(_scalar_and_layer_norm)(x)
    (y * 0.5 + z).backward()
    tx = torch.tensor(a, requires_grad=True)
    ty = tx.sum()
    tz = ty + torch.nn.functional.layer_norm(tx, (2,)).mean()
    (ty * 0.5 + tz).backward()
    np.testing.assert_allclose(z.item(), tz.item(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert len(function.failures) == before


def test_a_compile_failure_falls_back_to_eager_with_a_logged_reason(monkeypatch, caplog):
    """Any failure after tracing (here: the scheduler, forced to fail) runs the function
    eagerly, logs the reason on llgrad.graph_breaks and warns once; fullgraph=True
    raises CompileError instead."""
    from llgrad.passes import lower

    def broken(*args, **kwargs):
        raise ValueError("a scheduler bug")
    monkeypatch.setattr(lower._Lowering, "run", broken)
    monkeypatch.setattr(pipeline, "_warned_failure", [False])
    caplog.set_level(logging.INFO, logger="llgrad.graph_breaks")
    before = len(function.failures)
    f = lg.compile(lambda x: (x.sin() * 3).sum(0))
    x = lg.arange(6.0).reshape(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(f(x).numpy(), (np.sin(x.numpy()) * 3).sum(0), rtol=1e-6)
        f(x + 1)
    assert len([w for w in caught if "could not compile" in str(w.message)]) == 1
    assert any("a scheduler bug" in r.getMessage() for r in caplog.records)
    assert len(function.failures) > before and f.graph_breaks
    del function.failures[before:]
    g = lg.compile(lambda x: x.cos().sum(0), fullgraph=True)
    with pytest.raises(lg.compiler.CompileError, match="a scheduler bug"):
        g(x)
    del function.failures[before:]


def test_compile_refuses_what_is_not_callable_at_once():
    with pytest.raises(TypeError, match="compile: expected a function"):
        lg.compile(5)


def test_compile_on_a_method_binds_it():
    class Model:
        def __init__(self, scale: float) -> None:
            self.w = lg.ones(3) * scale

        @lg.compile
        def step(self, x):
            return (x * self.w).sum()
    a, b = Model(2.0), Model(3.0)
    assert a.step(lg.ones(3)).item() == 6.0 and b.step(lg.ones(3)).item() == 9.0
    assert a.step is a.step                      # compiled once per instance


@pytest.mark.parametrize("index", [-9, 7, 100])
def test_compiled_index_errors_name_the_index_as_written(index):
    torch = pytest.importorskip("torch")
    a = lg.randn(5, 3)
    f = lg.compile(lambda a, i: a[i])
    with pytest.raises(IndexError, match=f"index {index} is out of bounds for dimension 0 "
                                         f"with size 5"):
        f(a, lg.tensor([index]))
    with pytest.raises(IndexError, match=f"index {index} is out of bounds for dimension 0 "
                                         f"with size 5"):
        torch.randn(5, 3)[torch.tensor([index])]


def test_compiled_gather_and_embedding_errors_are_eager_errors():
    a = lg.randn(4, 20)
    f = lg.compile(lambda a, i: a.gather(1, i))
    with pytest.raises(RuntimeError, match="gather.*index 100 is out of bounds for "
                                           "dimension 1 with size 20"):
        f(a, lg.tensor([[100]]))
    w = lg.randn(5, 3)
    g = lg.compile(lambda w, i: lg.nn.functional.embedding(i, w))
    with pytest.raises(IndexError, match="embedding: index 7 is out of range"):
        g(w, lg.tensor([[0, 7]]))
    np.testing.assert_allclose(g(w, lg.tensor([[0, 4]])).numpy()[0],
                               w.numpy()[[0, 4]])


def test_joint_graph_nodes_carry_the_ops_line():
    def f(x):
        y = x.sin()                                  # line A
        return (y * x.exp()).sum()                   # line B
    import inspect
    first = inspect.getsourcelines(f)[1]
    line_a, line_b = f"test_compile_robustness.py:{first + 1}", \
        f"test_compile_robustness.py:{first + 2}"
    x = lg.randn(3, requires_grad=True)
    joint = lg.compile(f).inspect(x).joint_graph
    locs = {n.op: n.loc for n in joint.nodes}
    assert locs["cos"] == line_a                     # sin's derivative, at sin's line
    assert locs["sin"] == line_a and locs["exp"] == line_b
