"""Lint, format and type checks of the source tree, run with the test suite (so CI runs them).

- `ruff check` and `ruff format --check` with the configuration in pyproject.toml;
- mypy over `llgrad/` against `tests/mypy_baseline.json`: the errors each file had when the
  baseline was written. A file may have fewer (lower its count, or rewrite the baseline with
  `python tests/test_static_checks.py --write-baseline`), never more, and a new file none.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy_baseline.json"
LINTED = ["llgrad", "tests", "tools", "benchmarks", "examples"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("ruff", reason="ruff is not installed (extra `test`)")
    return subprocess.run([sys.executable, "-m", "ruff", *args, *LINTED], cwd=ROOT,
                          capture_output=True, text=True)


def test_ruff_lint() -> None:
    r = _ruff("check", "--no-cache")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ruff_format() -> None:
    r = _ruff("format", "--check", "--no-cache")
    assert r.returncode == 0, ("files ruff would reformat (run `ruff format`):\n"
                               + r.stdout[-4000:] + r.stderr[-2000:])


def mypy_errors() -> Counter[str]:
    """Errors per file of `mypy llgrad` (configuration in pyproject.toml)."""
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "llgrad"],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode not in (0, 1) or "error:" not in r.stdout and r.returncode:
        raise RuntimeError(f"mypy did not run: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    counts: Counter[str] = Counter()
    for line in r.stdout.splitlines():
        m = re.match(r"^([^:]+\.pyi?):\d+: error:", line)
        if m:
            counts[m.group(1)] += 1
    return counts


def test_mypy_within_baseline() -> None:
    pytest.importorskip("mypy")
    baseline: dict[str, int] = json.loads(BASELINE.read_text())
    now = mypy_errors()
    worse = {f: (n, baseline.get(f, 0)) for f, n in now.items() if n > baseline.get(f, 0)}
    assert not worse, ("mypy errors above the baseline (file: now, baseline): "
                       + ", ".join(f"{f}: {a} > {b}" for f, (a, b) in sorted(worse.items()))
                       + "; `python -m mypy llgrad` lists them")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-baseline"]:
        counts = mypy_errors()
        BASELINE.write_text(json.dumps(dict(sorted(counts.items())), indent=0) + "\n")
        print(f"{sum(counts.values())} errors in {len(counts)} files -> {BASELINE}")
