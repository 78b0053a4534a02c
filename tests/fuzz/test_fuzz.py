"""The fuzz suite: generated calls into every op family, eager and compiled, each batch in
a child process (tests/fuzz/worker.py), compared with torch.

A batch that dies (a crash in native code) or hangs fails with the case it was running.
The CI subset runs ~2,000 cases; `-m slow` runs ~130,000 (FUZZ_SCALE multiplies both).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from .ops import FAMILIES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCALE = float(os.environ.get("FUZZ_SCALE", "1"))
# compiled cases build native code (one compile per new signature), so they are fewer
CI_EXAMPLES = {"eager": 160, "compiled": 60}
SLOW_EXAMPLES = {"eager": 1500, "compiled": 300}
SLOW_SEEDS = 8


def run_batch(family: str, mode: str, seed: int, examples: int, tmp: Path,
              timeout: float) -> dict:
    out, current = tmp / f"{family}-{mode}-{seed}.json", tmp / f"{family}-{mode}-{seed}.cur"
    cmd = [sys.executable, "-m", "tests.fuzz.worker", "--family", family, "--mode", mode,
           "--seed", str(seed), "--examples", str(examples), "--out", str(out),
           "--current", str(current)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"fuzz batch {family}/{mode}/seed {seed} hung (> {timeout:.0f} s) in case: "
                    f"{current.read_text() if current.exists() else '?'}")
    if proc.returncode != 0:
        case = current.read_text() if current.exists() else "?"
        what = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else \
            f"exit code {proc.returncode}"
        pytest.fail(f"fuzz batch {family}/{mode}/seed {seed} {what} in case: {case}\n"
                    f"{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def check(report: dict) -> None:
    problems = report["problems"]
    assert not problems, (
        f"{len(problems)} mismatches in {report['cases']} {report['family']}/{report['mode']} "
        f"cases (seed {report['seed']}):\n" +
        "\n".join(f"- {p['case']}\n    {p['problem']}" for p in problems[:15]))


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzz_ci(family: str, mode: str, tmp_path: Path) -> None:
    examples = max(1, int(CI_EXAMPLES[mode] * SCALE))
    check(run_batch(family, mode, 1000 + sorted(FAMILIES).index(family), examples, tmp_path,
                    600))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(SLOW_SEEDS))
@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzz_full(family: str, mode: str, seed: int, tmp_path: Path) -> None:
    examples = max(1, int(SLOW_EXAMPLES[mode] * SCALE))
    report = run_batch(family, mode, seed, examples, tmp_path, 3600)
    print(f"FUZZ {family} {mode} seed={seed} cases={report['cases']} "
          f"problems={len(report['problems'])} seconds={report['seconds']:.1f}")
    check(report)
