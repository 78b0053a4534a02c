"""The import structure of llgrad/: which layer imports which, circles, inline imports.

    python tools/layers.py              # summary: forbidden edges, largest circle, inline imports
    python tools/layers.py --edges      # every forbidden import with file and line
    python tools/layers.py --circle     # the files of the largest import circle
    python tools/layers.py --inline     # every import made inside a function

A *layer* is a top-level package of llgrad (`llgrad/runtime/...` is `runtime`) or a top-level
module (`llgrad/tensor.py` is `tensor`). `FORBIDDEN` lists the directions docs/architecture.md
rules out. A *circle* is a strongly connected component of the file-level graph of imports
executed when a module is imported: module-level statements (including those under `try`/`if`,
but not `if TYPE_CHECKING:` blocks, which never run), imports inside the module's functions that
run while it loads (called from module-level code, class bodies or decorators), and the packages
Python initializes before an imported module (`from llgrad.a.b import x` runs `llgrad/a/__init__`
first, unless the importer is inside `llgrad.a`). An *inline import* is an import statement
inside a function body: it runs on call, so Python's import order does not constrain it;
each carries its reason as a comment on its line (the circle it breaks, or the optional part
it loads on first use), and the figure of those without one is held at zero.
The *knot* is the largest circle when inline imports count as edges too. tests/test_layers.py
holds each count to a ceiling that may only go down.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "llgrad"

# (importing layer, imported layer) pairs the architecture forbids.
FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("runtime", "passes"),
    ("runtime", "compiler"),
    ("runtime", "tensor"),
    ("passes", "autograd"),
    ("passes", "tensor"),
    ("passes", "functions"),
    ("codegen", "runtime"),
    ("ir", "passes"),
    ("ir", "codegen"),
    ("ir", "runtime"),
    ("ir", "tensor"),
    ("ir", "autograd"),
    ("ir", "functions"),
)


@dataclass(frozen=True)
class Import:
    """One import statement's target as seen from a file of llgrad."""

    source: str  # importing module, dotted ("llgrad.runtime.launch")
    target: str  # imported llgrad module, dotted
    line: int
    inline: bool  # inside a function body
    type_only: bool  # under `if TYPE_CHECKING:`
    at_load: bool = False  # inline, in a function the module calls while it loads
    reason: str = ""  # an inline import's comment: the circle it breaks, or what it defers


@dataclass
class Report:
    """What `scan` found."""

    modules: list[str] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)

    def forbidden(self) -> list[Import]:
        """Runtime imports (module-level or inline) whose layers `FORBIDDEN` rules out."""
        bad = set(FORBIDDEN)
        return [
            i
            for i in self.imports
            if not i.type_only and (layer_of(i.source), layer_of(i.target)) in bad
        ]

    def inline(self) -> list[Import]:
        """Import statements executed inside function bodies."""
        return [i for i in self.imports if i.inline and not i.type_only]

    def unexplained(self) -> list[Import]:
        """Inline imports whose line carries no comment giving their reason."""
        return [i for i in self.inline() if not i.reason]

    def circles(self, with_inline: bool = False) -> list[list[str]]:
        """Strongly connected components (size > 1) of the module-level import graph.

        With `with_inline`, inline imports count as edges too: the knot the inline imports
        only hide from Python's import order.
        """
        graph: dict[str, set[str]] = {m: set() for m in self.modules}
        for i in self.imports:
            if (
                (with_inline or not i.inline or i.at_load)
                and not i.type_only
                and i.target in graph
                and i.target != i.source
            ):
                graph[i.source].add(i.target)
                graph[i.source].update(
                    p for p in _packages_run_first(i.target, i.source) if p in graph
                )
        return [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]


def layer_of(module: str) -> str:
    """`llgrad.runtime.launch` -> `runtime`; `llgrad.tensor` -> `tensor`; `llgrad` -> `llgrad`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _packages_run_first(target: str, source: str) -> list[str]:
    """The packages whose `__init__` Python runs before `target` when `source` imports it:
    its parents below the root, except those `source` is inside (already initializing)."""
    parts = target.split(".")
    out = []
    for k in range(2, len(parts)):
        package = ".".join(parts[:k])
        if package != source and not source.startswith(package + "."):
            out.append(package)
    return out


def _run_at_load(tree: ast.Module) -> set[str]:
    """Names of the module's functions that run while it loads: called from module-level
    code, class bodies or decorators, and the module functions those call."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def calls(node: ast.AST, top: bool) -> set[str]:
        found: set[str] = set()
        todo = [node]
        while todo:
            n = todo.pop()
            for c in ast.iter_child_nodes(n):
                if top and isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    todo.extend(c.decorator_list)
                    todo.extend(c.args.defaults)
                    todo.extend(d for d in c.args.kw_defaults if d is not None)
                    continue
                if top and isinstance(c, ast.Lambda):
                    continue
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in defs:
                    found.add(c.func.id)
                todo.append(c)
        return found

    run = calls(tree, True)
    todo = list(run)
    while todo:
        for g in calls(defs[todo.pop()], False):
            if g not in run:
                run.add(g)
                todo.append(g)
    return run


def _resolve(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = source.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def scan(package: Path = PACKAGE) -> Report:
    """Every import of an llgrad module made by a file under `package`."""
    files = sorted(package.rglob("*.py"))
    report = Report(modules=[_module_name(f) for f in files])
    known = set(report.modules)

    def target_modules(name: str, names: list[str]) -> list[str]:
        # `from llgrad.x import y` imports the submodule llgrad.x.y when there is one.
        subs = [f"{name}.{n}" for n in names if f"{name}.{n}" in known]
        if name in known and len(subs) < len(names):
            subs.append(name)
        if not subs:
            # `import llgrad.a.b.c` or a name inside a module: the longest known prefix.
            parts = name.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts:
                subs.append(".".join(parts))
        return subs

    for path in files:
        source = _module_name(path)
        is_package = path.name == "__init__.py"
        text = path.read_text()
        tree = ast.parse(text, filename=str(path))
        lines = text.splitlines()
        at_load = _run_at_load(tree)
        loading: list[bool] = [False]  # inside a function that runs while the module loads

        def visit(node: ast.AST, inline: bool, type_only: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    outer = loading[0]
                    if node is tree and not isinstance(child, ast.Lambda):
                        loading[0] = child.name in at_load
                    visit(child, True, type_only)
                    loading[0] = outer
                elif isinstance(child, ast.If) and _is_type_checking(child.test):
                    for stmt in child.body:
                        visit(ast.Module(body=[stmt], type_ignores=[]), inline, True)
                    for stmt in child.orelse:
                        visit(ast.Module(body=[stmt], type_ignores=[]), inline, type_only)
                elif isinstance(child, ast.Import):
                    why = _reason(lines, child) if inline else ""
                    for alias in child.names:
                        if alias.name.split(".")[0] == "llgrad":
                            for t in target_modules(alias.name, []):
                                report.imports.append(
                                    Import(
                                        source, t, child.lineno, inline, type_only, loading[0], why
                                    )
                                )
                elif isinstance(child, ast.ImportFrom):
                    why = _reason(lines, child) if inline else ""
                    name = _resolve(source, is_package, child)
                    if name.split(".")[0] == "llgrad":
                        for t in target_modules(name, [a.name for a in child.names]):
                            report.imports.append(
                                Import(source, t, child.lineno, inline, type_only, loading[0], why)
                            )
                else:
                    visit(child, inline, type_only)

        visit(tree, False, False)
    return report


def _reason(lines: list[str], node: ast.stmt) -> str:
    """The comment on an import statement's lines (its reason), without lint directives."""
    for k in range(node.lineno - 1, node.end_lineno or node.lineno):
        _, hash_, comment = lines[k].partition("#")
        comment = comment.strip()
        if hash_ and comment and not comment.startswith(("noqa", "type:")):
            return comment
    return ""


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    out.append(comp)
    return out


def summary(report: Report) -> dict[str, int]:
    """The figures tests/test_layers.py holds to ceilings."""
    circles = report.circles()
    return {
        "modules": len(report.modules),
        "forbidden imports": len(report.forbidden()),
        "largest circle": max((len(c) for c in circles), default=1),
        "files in circles": sum(len(c) for c in circles),
        "largest knot": max((len(c) for c in report.circles(with_inline=True)), default=1),
        "inline imports": len(report.inline()),
        "inline imports without a reason": len(report.unexplained()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--edges", action="store_true", help="list every forbidden import")
    p.add_argument("--circle", action="store_true", help="list the largest circle's files")
    p.add_argument("--inline", action="store_true", help="list every inline import")
    ns = p.parse_args(argv)
    report = scan()
    for k, v in summary(report).items():
        print(f"{k:>18}: {v}")
    if ns.edges:
        for i in report.forbidden():
            print(f"  {i.source} -> {i.target}  (line {i.line}{', inline' if i.inline else ''})")
    if ns.circle:
        circles = sorted(report.circles(), key=len, reverse=True)
        if circles:
            print("\n".join("  " + m for m in circles[0]))
    if ns.inline:
        for i in report.inline():
            print(f"  {i.source}:{i.line} -> {i.target}  # {i.reason or '(no reason given)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
