"""The compiler pipeline as one list (`llgrad.compiler.pipeline.STAGES`): its order, the
stage dump of `cf.inspect(..., stages=True)` and the `stages` log channel."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import llgrad as lg
from llgrad.compiler import function as function_mod
from llgrad.compiler import pipeline
from llgrad.compiler.executable import CompiledGraph
from llgrad.ir.graph import Graph

ORDER = ["autodiff", "partition", "decompose", "passes", "fusion", "lower", "memory",
         "emit", "compile"]


def headers(report: object) -> list[str]:
    return [line[3:-3] for line in str(report).splitlines()
            if line.startswith("== ") and line.endswith(" ==")]


def test_stages_are_one_ordered_list() -> None:
    assert list(pipeline.STAGE_NAMES) == ORDER
    for stage in pipeline.STAGES:
        assert callable(stage.run) and stage.takes and stage.gives
        assert str(stage).startswith(stage.name + ":")


def test_inspect_stages_scalar_loss_in_order() -> None:
    @lg.compile
    def loss(x, w):
        return lg.tanh(x @ w).sum()

    x, w = lg.randn(8, 4), lg.randn(4, 3, requires_grad=True)
    names = headers(loss.inspect(x, w, stages=True))
    assert names[0] == "traced" and names[-1] == "stats"
    body = names[1:-1]
    assert body == [n for n in ORDER if n in body]            # pipeline order
    assert {"autodiff", "decompose", "passes", "fusion", "lower", "memory", "emit",
            "compile"} <= set(body)


def test_inspect_stages_partitioned_and_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(function_mod, "GRADIENTS_IN_FORWARD", False)

    @lg.compile
    def f(x, w):
        return lg.sigmoid(x @ w) * 2.0

    x, w = lg.randn(5, 4), lg.randn(4, 3, requires_grad=True)
    report = f.inspect(x, w, stages=True)
    names = headers(report)
    assert "autodiff" in names and "partition" in names
    text = str(report)
    assert "-- forward --" in text and "-- backward --" in text
    plain = headers(f.inspect(x, w.detach(), stages=True))
    assert "autodiff" not in plain and "partition" not in plain
    assert plain[1:-1] == ["decompose", "passes", "fusion", "lower", "memory", "emit",
                           "compile"]
    # the default report is unchanged
    assert str(f.inspect(x, w)).startswith("== traced graph ==")


def test_stages_log_channel(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="llgrad.stages")

    @lg.compile
    def g(x):
        return lg.exp(x) + 1.0

    x = lg.randn(3, 7)
    np.testing.assert_allclose(g(x).numpy(), np.exp(x.numpy()) + 1.0, rtol=1e-6)
    logged = [r.getMessage().split("\n", 1)[0] for r in caplog.records
              if r.name == "llgrad.stages"]
    names = [m[3:].split(" ", 1)[0] for m in logged]
    assert names == ["decompose", "passes", "fusion", "lower", "memory", "emit", "compile"]
    assert all("@g" in m for m in logged)


def test_run_stage_times_and_returns() -> None:
    @lg.compile
    def h(x):
        return x * 3.0

    graph = lg.make_ir(h)(lg.ones(4))
    assert isinstance(graph, Graph)
    seconds: dict[str, float] = {}
    out = pipeline.run_stage("decompose", graph, seconds=seconds)
    assert isinstance(out, Graph) and seconds["decompose"] >= 0.0


def test_build_native_and_executable() -> None:
    @lg.compile
    def k(x, y):
        return (x * y).sum(1)

    a, b = lg.randn(6, 5), lg.randn(6, 5)
    graph = lg.make_ir(k)(a, b)
    build = pipeline.build_native(pipeline.decompose(graph))
    assert build.module.addresses["entry"] and build.llvm_ir
    assert {"fusion", "lower", "memory", "emit", "llvm", "total"} <= set(build.seconds)
    cg = CompiledGraph(pipeline.decompose(graph))
    np.testing.assert_allclose(cg(a, b)[0].numpy(), (a.numpy() * b.numpy()).sum(1),
                               rtol=1e-5)
