"""Whole PyTorch programs run on llgrad with only their imports changed (issue 9).

Each program in `tests/programs/` is ordinary PyTorch code (`import torch`, `from torch
import nn`, `from torch.utils.data import ...`). The test runs it once as written, with real
torch, and once with every import line rewritten to the same names from llgrad (`import
torch` becomes `import llgrad as torch`, `from torch.func import ...` becomes `from
llgrad.func import ...`); nothing else in the program changes. The two printouts must have
the same lines, the same words, and numbers equal to a relative 1e-4 (float32 training
runs through a few optimizer steps; float64 programs agree far closer). Data and initial
weights come from NumPy, so the libraries' different random streams do not matter.
"""
from __future__ import annotations

import contextlib
import io
import pathlib
import re

import pytest

from conftest import needs_torch

PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.py"))
_NUMBER = re.compile(r"-?\d+\.\d*(?:e[-+]?\d+)?|-?\d+(?:e[-+]?\d+)?|nan|inf")


def to_llgrad(source: str) -> str:
    """The program with its torch imports pointed at llgrad, and nothing else changed."""
    out = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == "import torch":
            line = line.replace("import torch", "import llgrad as torch")
        elif stripped.startswith(("import torch", "from torch")):
            line = re.sub(r"\btorch\b", "llgrad", line)
        out.append(line)
    return "\n".join(out) + "\n"


def run(source: str, name: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(source, name, "exec"), {"__name__": "__main__"})
    return buf.getvalue()


def test_rewrite_touches_only_import_lines():
    src = "import torch\nfrom torch.utils.data import DataLoader\nx = torch.ones(2)\n"
    assert to_llgrad(src) == ("import llgrad as torch\nfrom llgrad.utils.data import "
                              "DataLoader\nx = torch.ones(2)\n")


def _compare(want: str, got: str, name: str) -> None:
    wl, gl = want.strip().splitlines(), got.strip().splitlines()
    assert len(wl) == len(gl), f"{name}: {len(gl)} lines printed, torch printed {len(wl)}"
    for w, g in zip(wl, gl):
        assert _NUMBER.sub("#", w) == _NUMBER.sub("#", g), f"{name}:\n torch:  {w}\n llgrad: {g}"
        wn = [float(x) for x in _NUMBER.findall(w)]
        gn = [float(x) for x in _NUMBER.findall(g)]
        assert wn == pytest.approx(gn, rel=1e-4, abs=1e-5), \
            f"{name}:\n torch:  {w}\n llgrad: {g}"


@needs_torch
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_program_prints_the_same_numbers_as_torch(path: pathlib.Path):
    source = path.read_text()
    want = run(source, str(path))
    got = run(to_llgrad(source), str(path))
    assert got.strip(), f"{path.stem} printed nothing"
    _compare(want, got, path.stem)
