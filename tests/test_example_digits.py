"""The digits example runs end to end (a few steps): data, both models, eager and compiled,
progress bars, accuracy, timings and the PNG of the curves."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_digits_example_smoke(tmp_path):
    for extra in ("sklearn", "matplotlib", "tqdm"):
        pytest.importorskip(extra)
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "digits.py"), "--epochs", "2",
                        "--steps", "8", "--out", str(tmp_path)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "digits: 1437 training and 360 test images" in out
    lines = [" ".join(line.split()) for line in out.splitlines()]
    for model in ("mlp", "cnn"):
        for mode in ("eager", "compiled"):
            assert any(line.startswith(f"{model} {mode}: test accuracy") for line in lines)
    # eager and compiled training end at the same weights
    for line in out.splitlines():
        if "largest weight difference" in line:
            assert float(line.rsplit(" ", 1)[1]) < 1e-4, line
    assert "it/s" in r.stderr or "s/it" in r.stderr               # tqdm's bars
    png = tmp_path / "digits_curves.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
