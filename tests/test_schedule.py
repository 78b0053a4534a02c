"""The schedule IR (`llgrad/schedule/`): golden text of small programs, traffic figures,
and the one-way imports it exists for (passes -> schedule <- codegen)."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import llgrad as lg
from llgrad.compiler import function
from llgrad.ir import Builder, TensorType
from llgrad.ir import dtypes as dt
from llgrad.compiler.executable import CompiledGraph
from llgrad.schedule.program import traffic

ROOT = Path(lg.__file__).resolve().parent

SOFTMAX = """\
schedule of @softmax: 1 launches, 2 buffers; moves 5.1 KB (minimum 5.1 KB)
L0 row [16 40+] row kernel of 5 ops, 3 passes per row: reads 2.6 KB, writes 2.6 KB
    store  out0        f32[16,40] strides (40,1)  2.6 KB
    load   in0        f32[16,40] strides (40,1)  2.6 KB
    body: in0:f32 v1=amax(0) v2=sub(0,1) v3=exp(2) v4=sum(3) v5=div(3,4) -> 5"""

CHAIN = """\
schedule of @chain: 2 launches, 4 buffers; moves 6.2 KB (minimum 4.2 KB)
L0 elementwise [64 8] 2 elementwise ops: reads 2.1 KB, writes 2.0 KB
    store  out0        f32[64,8] strides (8,1)  2.0 KB
    load   in0        f32[64,8] strides (8,1)  2.0 KB
    load   in1        f32[64,8] strides (0,1)  32 B
    body: in0:f32 in1:f32 v2=mul(0,1) v3=tanh(2) -> 3
L1 reduce [64+ 8] sum: reads 2.0 KB, writes 32 B
    load   out0        f32[64,8] strides (8,1)  2.0 KB
    store  out1        f32[64,8] strides (0,1)  32 B
    body: acc = sum(x)"""


def _softmax() -> CompiledGraph:
    b = Builder("softmax")
    x = b.param(TensorType(dt.float32, (16, 40)), "x")
    m = b.op("amax", x, axes=(1,), keepdim=True)
    e = b.op("exp", b.op("sub", x, m))
    s = b.op("sum", e, axes=(1,), keepdim=True)
    return CompiledGraph(b.build(b.op("div", e, s)))


def test_softmax_schedule_golden_text():
    cg = _softmax()
    assert str(cg.schedule) == SOFTMAX
    x = np.random.default_rng(0).standard_normal((16, 40)).astype(np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(cg(x)[0].numpy(), e / e.sum(1, keepdims=True), rtol=1e-5)


def test_elementwise_and_column_reduction_golden_text():
    b = Builder("chain")
    x = b.param(TensorType(dt.float32, (64, 8)), "x")
    w = b.param(TensorType(dt.float32, (8,)), "w")
    y = b.op("tanh", b.op("mul", x, w))
    cg = CompiledGraph(b.build(y, b.op("sum", y, axes=(0,), keepdim=False)))
    assert str(cg.schedule) == CHAIN


def test_traffic_counts_each_access_once():
    t = traffic(_softmax().schedule)
    assert t["bytes read"] == t["bytes written"] == 16 * 40 * 4
    assert t["minimum bytes"] == 2 * 16 * 40 * 4 and t["traffic ratio"] == 1.0
    assert t["per launch"] == [("row kernel of 5 ops, 3 passes per row", 2560, 2560)]


def test_inspect_prints_the_schedule_and_traffic(monkeypatch):
    rng = np.random.default_rng(1)
    x = lg.tensor(rng.standard_normal((32, 16)), requires_grad=True)
    cf = lg.compile(lambda x: (lg.softmax(x, -1) * x).sum())
    r = cf.inspect(x)
    assert "== schedule ==" in str(r) and "row kernel" in str(r.schedule)
    assert r.stats["codegen bytes moved"] >= r.stats["codegen minimum bytes"] > 0
    # a scalar loss: one graph computes the value and the gradients
    assert "computed by the forward" in r.stats["gradients"] and r.backward_graph is None
    assert len(r.optimized.outputs) == 2
    monkeypatch.setattr(function, "GRADIENTS_IN_FORWARD", False)
    cf = lg.compile(lambda x: (lg.softmax(x, -1) * x).sum())
    r = cf.inspect(x)
    assert r.stats["backward bytes moved"] > 0 and r.backward_graph is not None


def _b1_stats() -> dict:
    rng = np.random.default_rng(0)
    x, w = (lg.tensor(rng.standard_normal(4_000_000).astype(np.float32), requires_grad=True)
            for _ in range(2))
    f = lg.compile(lambda x, w: (lg.tanh(x * w + 0.5) * lg.sigmoid(x) + lg.exp(-x * x)).sum())
    return f.inspect(x, w).stats


def _b6_stats() -> dict:
    import llgrad.nn.functional as F
    rng = np.random.default_rng(0)
    X = lg.tensor(rng.standard_normal((2048, 1024)).astype(np.float32), requires_grad=True)
    g, b = (lg.tensor(rng.standard_normal(1024).astype(np.float32), requires_grad=True)
            for _ in range(2))
    T = lg.tensor(rng.standard_normal((2048, 1024)).astype(np.float32))
    f = lg.compile(lambda X, g, b, T:
                   (F.layer_norm(lg.softmax(X, -1) * g + b, (1024,), eps=1e-5) * T).sum())
    return f.inspect(X, g, b, T).stats


@pytest.mark.parametrize("in_forward", [True, False])
def test_b1_and_b6_move_at_most_one_and_a_half_times_their_minimum(monkeypatch, in_forward):
    """BENCHMARKS.md's B1 and B6 at their real sizes: the graph computing the loss and its
    gradients at once, or (partitioned) the forward and backward graphs each, move at
    most 1.5x the bytes they must (inputs read once, outputs written once)."""
    monkeypatch.setattr(function, "GRADIENTS_IN_FORWARD", in_forward)
    for stats in (_b1_stats(), _b6_stats()):
        assert stats["codegen bytes moved"] <= 1.5 * stats["codegen minimum bytes"]
        if in_forward:
            assert "backward bytes moved" not in stats
        else:
            assert stats["backward bytes moved"] <= 1.5 * stats["backward minimum bytes"]


def _imports(path: Path) -> set[str]:
    """The llgrad packages a module imports (relative imports resolved to top level)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 2 and node.module is None:
            out.update(a.name for a in node.names)
    return out


def test_imports_point_one_way():
    """codegen lowers the schedule and never imports a pass; passes build the schedule
    and never import codegen; the schedule imports neither."""
    for path in (ROOT / "codegen").glob("*.py"):
        assert "passes" not in _imports(path), path.name
    for path in (ROOT / "passes").glob("*.py"):
        assert "codegen" not in _imports(path), path.name
    for path in (ROOT / "schedule").glob("*.py"):
        assert not _imports(path) & {"passes", "codegen", "runtime"}, path.name
