"""lg.debug.bisect finds planted and real divergences between compiled code and the
reference, with the source line."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.ir import registry


def model(x, w):
    h = x @ w
    a = lg.tanh(h) * 2.0
    s = lg.sin(a)                      # line of the planted divergence
    t = s * s + a
    return lg.softmax(t, -1).sum(0)


def _line(fn, text):
    import inspect
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(src) if text in l)


def test_agreeing_function_reports_nothing():
    x, w = lg.randn(16, 8), lg.randn(8, 5)
    r = lg.debug.bisect(model, x, w)
    assert r.node is None and "every output agrees" in str(r) and r.compiles == 1


def test_finds_a_planted_divergence_with_its_line(monkeypatch):
    sin = registry.get("sin")
    # the reference now disagrees with the compiled sin where its input exceeds 1
    monkeypatch.setattr(sin, "reference", lambda x: np.sin(x) + (x > 1.0) * 0.25)
    x, w = lg.randn(16, 8), lg.randn(8, 5)
    r = lg.debug.bisect(model, x, w)
    assert r.node is not None and r.node.op == "sin"
    assert r.loc == f"test_debug_bisect.py:{_line(model, 's = lg.sin(a)')}"
    assert r.error == pytest.approx(0.25, rel=1e-3) and "while its inputs agree" in str(r)
    assert r.compiles < len(lg.make_ir(model)(x, w).nodes)        # bisected, not scanned
    assert "first divergence" in str(r) and "sin(" in str(r)


def test_walks_back_to_the_node_whose_inputs_agree(monkeypatch):
    tanh = registry.get("tanh")
    monkeypatch.setattr(tanh, "reference", lambda x: np.tanh(x) * 1.01)
    x, w = lg.randn(16, 8), lg.randn(8, 5)
    r = lg.debug.bisect(model, x, w)
    assert r.node.op == "tanh" and r.loc.endswith(f":{_line(model, 'a = lg.tanh(h)')}")


def test_float64_reference_exposes_cancellation():
    def f(x):
        m = x.mean()
        v = (x * x).mean() - m * m          # E[x^2] - E[x]^2: cancels in float32
        return lg.sqrt(lg.relu(v) + 1e-3)
    x = lg.randn(1000) + 3000.0
    r = lg.debug.bisect(f, x, reference="float64")
    assert r.node.op == "sub" and r.loc.endswith(f":{_line(f, 'v = (x * x)')}")
    assert r.error > 1e-3


def test_finds_where_reassociation_changes_float32_results():
    """Compiled code may reassociate (`reassoc`, see the README): (e + 1e8) - 1e8 keeps
    all of e when fused, where op-by-op float32 keeps multiples of 8."""
    def g(x):
        big = lg.exp(x) + 1e8
        small = big - 1e8
        return (small * 3).sum()
    r = lg.debug.bisect(g, lg.randn(64))
    lines = {_line(g, "small = big"), _line(g, "return (small")}
    assert r.node.op in ("sub", "mul") and int(r.loc.rsplit(":", 1)[1]) in lines


def test_compiled_functions_integers_and_bad_arguments():
    cf = lg.compile(lambda x, k: (x * k).sum() + (x > 0).sum())
    r = lg.debug.bisect(cf, lg.randn(5), 3)
    assert r.node is None
    with pytest.raises(ValueError, match="reference must be"):
        lg.debug.bisect(model, lg.randn(2, 2), lg.randn(2, 2), reference="torch")
