"""The import structure of llgrad/ against docs/architecture.md's layers (tools/layers.py).

The ceilings are today's figures: a change may lower them (and should lower the constant with
it) but never raise them. The checker itself is tested on a small synthetic package.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import layers  # noqa: E402

CEILINGS = {
    "forbidden imports": 0,
    "largest circle": 1,
    "files in circles": 0,
    "largest knot": 175,
    "inline imports": 89,
    "inline imports without a reason": 0,
}


@pytest.fixture(scope="module")
def figures() -> dict[str, int]:
    return layers.summary(layers.scan())


@pytest.mark.parametrize("name", sorted(CEILINGS))
def test_figure_within_ceiling(figures: dict[str, int], name: str) -> None:
    assert figures[name] <= CEILINGS[name], (
        f"{name}: {figures[name]} > {CEILINGS[name]}; `python tools/layers.py "
        f"--edges --circle --inline` lists them")


def test_forbidden_pairs_name_existing_layers() -> None:
    report = layers.scan()
    present = {layers.layer_of(m) for m in report.modules}
    for a, b in layers.FORBIDDEN:
        assert a in present and b in present, (a, b)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "llgrad"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_checker_on_a_synthetic_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _package(tmp_path, {
        "__init__.py": "",
        "tensor.py": "from .runtime import pool\n",
        "runtime/__init__.py": "",
        "runtime/pool.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from llgrad.tensor import Tensor      # type-only: not an edge
            def make():
                from ..passes import simplify         # inline and forbidden
                return simplify
            """,
        "passes/__init__.py": "",
        "passes/simplify.py": "import llgrad.passes.cse\n",
        "passes/cse.py": "from . import simplify\n",
    })
    monkeypatch.setattr(layers, "ROOT", tmp_path)
    report = layers.scan(root)
    edges = {(i.source, i.target, i.inline, i.type_only) for i in report.imports}
    assert ("llgrad.tensor", "llgrad.runtime.pool", False, False) in edges
    assert ("llgrad.runtime.pool", "llgrad.tensor", False, True) in edges
    assert ("llgrad.runtime.pool", "llgrad.passes.simplify", True, False) in edges
    assert [(i.source, i.target) for i in report.forbidden()] == [
        ("llgrad.runtime.pool", "llgrad.passes.simplify")]
    assert report.circles() == [["llgrad.passes.cse", "llgrad.passes.simplify"]]
    figures = layers.summary(report)
    assert figures["inline imports"] == 1
    assert figures["largest circle"] == 2


def test_circles_count_packages_run_first_and_functions_run_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a.low imports b.x: Python runs b/__init__ first, which imports a.high, which imports
    # a.low back -- a circle no import statement shows directly. c.reg calls a function
    # at load whose import of d.y closes a second one through d/__init__.
    root = _package(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "",
        "a/low.py": "from ..b.x import thing\n",
        "a/high.py": "from . import low\n",
        "b/__init__.py": "from ..a import high\n",
        "b/x.py": "thing = 1\n",
        "c/__init__.py": "",
        "c/reg.py": """\
            def _install():
                from ..d.y import hook
                return hook
            def later():
                from ..d.y import hook                # runs on call only: no edge
                return hook
            _install()
            """,
        "d/__init__.py": "from ..c import reg\n",
        "d/y.py": "hook = 2\n",
    })
    monkeypatch.setattr(layers, "ROOT", tmp_path)
    report = layers.scan(root)
    loads = {(i.source, i.target, i.line): i.at_load for i in report.imports if i.inline}
    assert loads == {("llgrad.c.reg", "llgrad.d.y", 2): True, ("llgrad.c.reg", "llgrad.d.y", 5): False}
    circles = sorted(report.circles())
    assert circles == [
        ["llgrad.a.high", "llgrad.a.low", "llgrad.b"],
        ["llgrad.c.reg", "llgrad.d"],
    ]


def test_inline_imports_need_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the comment on an inline import's lines is its reason; lint directives are not
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": """\
            def f():
                from . import b  # circle: b -> here
                return b
            def g():
                from . import b  # noqa: F401
            def h():
                from .b import (
                    x,  # b loads on first use
                )
                return x
            def k():
                from . import b
                return b
            """,
        "b.py": "from . import a\nx = 1\n",
    })
    monkeypatch.setattr(layers, "ROOT", tmp_path)
    report = layers.scan(root)
    reasons = {i.line: i.reason for i in report.inline()}
    assert reasons == {2: "circle: b -> here", 5: "", 7: "b loads on first use", 12: ""}
    assert [i.line for i in report.unexplained()] == [5, 12]
    assert layers.summary(report)["inline imports without a reason"] == 2
