"""The README's first command runs examples/demo.py: it must keep running."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_demo_runs_and_agrees_with_eager():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    m = re.search(r"compiled loss (\S+) == eager loss (\S+)", out.stdout)
    assert m and abs(float(m.group(1)) - float(m.group(2))) < 1e-4, out.stdout[-2000:]
    diff = re.search(r"max \|grad difference\| vs eager: (\S+)", out.stdout)
    assert diff and float(diff.group(1)) < 1e-4, out.stdout[-2000:]
