"""py.typed and the generated tensor stub: type checkers see every tensor method."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import llgrad as lg

ROOT = Path(__file__).resolve().parent.parent


def test_stub_is_current_and_covers_every_method():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_tensor_stub.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    stub = (ROOT / "llgrad" / "tensor.pyi").read_text()
    for name in ("exp", "sum", "reshape", "backward", "matmul", "add_", "masked_fill",
                 "__add__", "__rmul__", "__getitem__", "numpy", "item", "to"):
        assert f"    def {name}(" in stub, name
        assert hasattr(lg.Tensor, name)
    assert (ROOT / "llgrad" / "py.typed").is_file()


def test_mypy_checks_tensor_code_against_the_stub(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "user.py").write_text(textwrap.dedent("""
        import llgrad as lg
        from llgrad.tensor import Tensor


        def step(x: Tensor, w: Tensor) -> float:
            y = (x @ w).tanh().sum(dim=1, keepdim=True)
            z: Tensor = y.exp() * 2 + 1
            z.backward()
            n: int = z.shape[0]
            return z.mean().item() + n


        def wrong(x: Tensor) -> None:
            x.exp(3)
            x.no_such_method()
    """))
    r = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent",
                        "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
                        "user.py"], capture_output=True, text=True, cwd=tmp_path,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, r.stdout + r.stderr
    assert 'user.py:15: error: Too many arguments for "exp" of "Tensor"' in errors[0]
    assert 'user.py:16: error: "Tensor" has no attribute "no_such_method"' in errors[1]
