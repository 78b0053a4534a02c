"""The per-process benchmark runner (`benchmarks/peers.py`): it runs, its table parses,
and its correctness check catches a wrong result. Never asserts on speed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import peers  # noqa: E402


def test_the_check_catches_a_wrong_output_and_passes_a_right_one():
    want = [np.array(2.0), np.arange(6.0).reshape(2, 3)]
    assert peers.check([np.array(2.0), np.arange(6.0).reshape(2, 3) + 1e-6], want) is None
    assert "output 1" in peers.check([np.array(2.0), np.arange(6.0).reshape(2, 3) * 1.1],
                                     want)
    assert "shape" in peers.check([np.array(2.0), np.arange(6.0)], want)
    assert peers.check([np.array(np.nan), want[1]], want) is not None


def test_a_quick_run_prints_a_table_with_llgrad_cells(tmp_path):
    out = tmp_path / "p.md"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.peers", "--quick", "--only",
                           "B3", "--libs", "llgrad", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.read_text().splitlines() if line.startswith("| B")}
    assert set(rows) == {"B3", "B3/value_and_grad"}
    assert float(rows["B3"][0]) > 0 and float(rows["B3/value_and_grad"][0]) > 0
    assert "[1/2] B3 llgrad" in proc.stderr            # progress
    assert out.with_suffix(".json").exists()


def test_b1_reports_value_and_grad_and_the_bandwidth_floor(tmp_path):
    out = tmp_path / "p.md"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.peers", "--quick", "--only",
                           "B1", "--libs", "llgrad", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    rows = {line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| B")}
    assert rows == {"B1", "B1/value_and_grad"}
    assert "Copy bandwidth" in text and "llgrad B1/value_and_grad:" in text
    assert float(text.split("llgrad B1/value_and_grad: ")[1].split("x")[0]) > 0
