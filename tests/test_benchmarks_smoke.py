"""Smoke test of the benchmark runner (`python -m benchmarks.run --quick`).

This checks the code, not the speed: the runner must finish, print and save a Markdown table
with every expected row, fill llgrad's and NumPy's cells with numbers, agree with the
float64 reference on every throughput workload, and show "–" for torch when torch is left
out. No assertion here looks at how fast anything is.
"""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DASH = "–"
NUMBER_CELL = re.compile(r"^\d[\d.e+-]* \(\d[\d.e+-]*–\d[\d.e+-]*\)$")   # "1.23 (1.1–2.0)"
HAVE_TORCH = importlib.util.find_spec("torch") is not None

# The rows the brief asks for, spelled out here (not read from the suite) so that dropping
# one from the suite fails this test.
OVERHEAD_ROWS = ["add", "mul by Python scalar", "exp", "sum", "matmul 4x4", "reshape (view)",
                 "index x[1:]", "grad-recording x * 2"]
THROUGHPUT_ROWS = ["exp(x)", "tanh(x)", "x * y + z", "sum(x)", "sigmoid(x)", "log(x), x > 0",
                   "x.sum(0), matrix", "x.T.contiguous(), matrix"]
LIMIT_ROWS = ["memory copy, `np.copyto` (1 thread), read + written",
              "float32 GEMM, NumPy `matmul` (OpenBLAS)"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _rows(markdown: str) -> dict[str, list[str]]:
    """Table rows keyed by their first cell (later tables win on a repeated key, which the
    expected names avoid: overhead "sum" vs throughput "sum(x)")."""
    rows: dict[str, list[str]] = {}
    for line in markdown.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


@pytest.fixture(scope="module")
def full_peers(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, str]:
    out = tmp_path_factory.mktemp("bench") / "results.md"
    proc = _run("--out", str(out))
    return out.read_text(encoding="utf-8"), json.loads(out.with_suffix(".json").read_text()), \
        proc.stdout


def test_saved_table_is_what_was_printed(full_peers: tuple[str, dict, str]) -> None:
    markdown, _, stdout = full_peers
    assert markdown.strip() == stdout.strip()
    assert "QUICK MODE" in markdown


def test_every_expected_row_is_present(full_peers: tuple[str, dict, str]) -> None:
    rows = _rows(full_peers[0])
    for name in OVERHEAD_ROWS + THROUGHPUT_ROWS + LIMIT_ROWS:
        assert name in rows, f"missing row {name!r}"


def test_llgrad_and_numpy_cells_hold_numbers(full_peers: tuple[str, dict, str]) -> None:
    rows = _rows(full_peers[0])
    for name in OVERHEAD_ROWS:
        llgrad_us, numpy_us, torch_us = rows[name][1:4]
        assert NUMBER_CELL.match(llgrad_us), (name, llgrad_us)
        if name.startswith("grad-recording"):
            assert numpy_us == DASH                 # NumPy records no gradients
        else:
            assert NUMBER_CELL.match(numpy_us), (name, numpy_us)
        assert NUMBER_CELL.match(torch_us) if HAVE_TORCH else torch_us == DASH
    for name in THROUGHPUT_ROWS:
        cells = rows[name]
        assert NUMBER_CELL.match(cells[1]), (name, cells[1])     # llgrad ms
        assert NUMBER_CELL.match(cells[3]), (name, cells[3])     # NumPy ms
        assert cells[7].endswith("×"), (name, cells[7])          # llgrad/NumPy


def test_json_holds_raw_numbers_and_machine(full_peers: tuple[str, dict, str]) -> None:
    _, data, _ = full_peers
    machine = data["machine"]
    for key in ("cpu_model", "logical_cpus", "threads", "llgrad", "numpy", "llvmlite", "date"):
        assert machine[key], key
    assert data["limits"]["copy_numpy"]["gbps_median"] > 0
    assert data["limits"]["gemm_numpy"]["gflops_median"] > 0
    eager = data["suites"]["eager"]
    assert [r["op"] for r in eager["overhead"]] == OVERHEAD_ROWS
    assert [r["workload"] for r in eager["throughput"]] == THROUGHPUT_ROWS
    for row in eager["throughput"]:
        for lib in ("llgrad", "numpy") + (("torch",) if HAVE_TORCH else ()):
            cell = row["results"][lib]
            assert "error" not in cell, (row["workload"], lib, cell)
            t = cell["time"]
            assert t["min_s"] <= t["median_s"] <= t["max_s"]
            assert cell["check"]["ok"], (row["workload"], lib, cell["check"])


def test_without_torch_its_columns_show_a_dash(tmp_path: Path) -> None:
    committed = ROOT / "benchmarks" / "results.md"
    before = committed.stat().st_mtime_ns if committed.exists() else None
    proc = _run("--no-torch", "--json", str(tmp_path / "r.json"))
    rows = _rows(proc.stdout)
    for name in OVERHEAD_ROWS:
        assert rows[name][3] == DASH and rows[name][5] == DASH, rows[name]
    for name in THROUGHPUT_ROWS:
        assert rows[name][5] == DASH and rows[name][6] == DASH and rows[name][8] == DASH
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["machine"]["torch"] is None
    # a --quick run without --out must not overwrite the committed table
    after = committed.stat().st_mtime_ns if committed.exists() else None
    assert before == after


# --------------------------------------------------------------------------------------
# B9-B12 of the peer runner (benchmarks/models.py): correctness only, at --quick sizes
# --------------------------------------------------------------------------------------

MODEL_WORKLOADS = ["B9", "B10", "B11", "B12"]


@pytest.mark.parametrize("workload", MODEL_WORKLOADS)
def test_model_workloads_match_torch(workload: str) -> None:
    """llgrad eager and `lg.compile` run `models.CHECK_STEPS` training steps (B12: AdamW
    steps) of each real-model workload at the runner's --quick sizes, and agree with torch
    eager in float64 as the runner checks them: losses, parameters, BatchNorm's running
    statistics, and the parameters' changes."""
    pytest.importorskip("torch")
    from benchmarks import models, peers
    want = models.reference(workload, True, peers.to_numpy)
    for lib in ("llgrad eager", "llgrad"):
        step = models.build(lib, workload, True)
        got, _ = models.run_checked(step, peers.to_numpy)
        problem = peers.check(got, want) or models.check_updates(workload, True, got, want)
        assert problem is None, (lib, problem)
        if lib == "llgrad":
            assert not step.compiled.graph_breaks, step.compiled.graph_breaks
