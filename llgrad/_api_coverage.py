"""How much of PyTorch's public API llgrad covers, measured against an installed torch.

For each namespace (`torch`, `torch.Tensor`, `torch.linalg`, ...) the public names are those of
`dir()` that do not start with `_` and are not modules. A name is *excluded* when a rule of
`api_exclusions.txt` (beside this file) matches it; each rule gives its reason. Every other
name is *covered* when llgrad has it and, where both signatures can be read, llgrad accepts
every parameter name torch documents for it (a function that exists under torch's name but
refuses torch's keywords is counted as *differs*, not covered); otherwise it is *missing*.

torch's signatures come from `inspect.signature` where torch's object is Python, else from the
signature lines of its docstring (`add(input, other, *, alpha=1, out=None) -> Tensor`; every
overload's names are taken together). torch is only read here, never used by llgrad itself.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import json
import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

EXCLUSIONS = Path(__file__).with_name("api_exclusions.txt")

# (label, torch attribute path, llgrad attribute path)
NAMESPACES: tuple[tuple[str, str, str], ...] = (
    ("torch", "torch", "llgrad"),
    ("Tensor", "torch.Tensor", "llgrad.Tensor"),
    ("linalg", "torch.linalg", "llgrad.linalg"),
    ("fft", "torch.fft", "llgrad.fft"),
    ("special", "torch.special", "llgrad.special"),
    ("nn.functional", "torch.nn.functional", "llgrad.nn.functional"),
    ("nn", "torch.nn", "llgrad.nn"),
    ("optim", "torch.optim", "llgrad.optim"),
    ("optim.lr_scheduler", "torch.optim.lr_scheduler", "llgrad.optim.lr_scheduler"),
    ("nn.init", "torch.nn.init", "llgrad.nn.init"),
    ("autograd", "torch.autograd", "llgrad.autograd"),
    ("distributions", "torch.distributions", "llgrad.distributions"),
    ("utils.data", "torch.utils.data", "llgrad.utils.data"),
)


@dataclass(frozen=True)
class Rule:
    """One exclusion: names of `namespace` matching `pattern` are left out for `reason`."""

    namespace: str
    pattern: str
    reason: str


@dataclass
class Report:
    """The coverage of one namespace."""

    label: str
    public: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)  # name -> reason
    covered: list[str] = field(default_factory=list)
    differs: dict[str, list[str]] = field(default_factory=dict)  # name -> refused parameters
    missing: list[str] = field(default_factory=list)

    @property
    def considered(self) -> int:
        """Public names that are not excluded."""
        return len(self.public) - len(self.excluded)

    @property
    def percent(self) -> float:
        """Covered names as a percentage of the considered ones."""
        return 100.0 * len(self.covered) / self.considered if self.considered else 100.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "public": len(self.public),
            "excluded": len(self.excluded),
            "considered": self.considered,
            "covered": len(self.covered),
            "differs": len(self.differs),
            "missing": len(self.missing),
            "percent": round(self.percent, 1),
        }


def load_rules(path: Path = EXCLUSIONS) -> list[Rule]:
    """The exclusion rules of the table file (`NAMESPACE PATTERN REASON` a line)."""
    rules = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3:
            raise ValueError(f"{path.name}:{n}: expected NAMESPACE PATTERN REASON, got {line!r}")
        rules.append(Rule(*parts))
    return rules


def _resolve(path: str) -> Any:
    """The object at a dotted path (`torch.nn.functional`, `llgrad.Tensor`), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def public_names(obj: Any) -> list[str]:
    """The names of `dir(obj)` that are public and not modules."""
    out = []
    for name in dir(obj):
        if name.startswith("_"):
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # a property that raises on the class
            value = None
        if isinstance(value, types.ModuleType):
            continue
        out.append(name)
    return sorted(out)


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets."""
    items, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return items


_TYPE_WORDS = {"int", "float", "bool", "str", "Tensor", "LongTensor", "Number", "None"}


def _docstring_params(name: str, doc: str) -> list[tuple[str, str]] | None:
    """Parameter (name, kind) pairs from the signature lines of a torch docstring: its
    first line, and any line `name(...) -> ...` (one per overload)."""
    pattern = re.compile(
        rf"^\s*(?:\.\.\s+function::\s+)?(?:[\w.]*\.)?{re.escape(name)}"
        rf"\((.*?)\)\s*(->.*)?$"
    )
    found: dict[str, str] = {}
    seen = False
    lines = doc.strip().splitlines()
    for i, line in enumerate(lines):
        m = pattern.match(line)
        if not m or (i > 0 and m.group(2) is None):
            continue
        seen = True
        for item in _split_top(m.group(1)):
            item = item.strip().split("=", 1)[0].split(":", 1)[0].strip()
            if (
                not item
                or item in ("*", "/", "self")
                or item.lstrip("*") in _TYPE_WORDS
                or not item.lstrip("*").isidentifier()
            ):
                continue
            kind = "var" if item.startswith("*") else "named"
            found.setdefault(item.lstrip("*"), kind)
    return list(found.items()) if seen else None


def torch_params(
    name: str, obj: Any, method: bool, label: str = "torch"
) -> list[tuple[str, str]] | None:
    """The parameters torch accepts for `obj` (None when they cannot be read): its Python
    signature, else the schemas of the ATen operator behind a builtin (the names its
    argument parser takes), else its docstring's signature lines."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    if inspect.isclass(obj) and target is object.__init__:
        return None
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and not _only_varargs(sig):
        params = list(sig.parameters.values())
        if method or inspect.isclass(obj):
            params = params[1:] if params and params[0].name in ("self", "cls") else params
        return [
            (
                p.name,
                "var"
                if p.kind is p.VAR_POSITIONAL
                else "kw"
                if p.kind is p.VAR_KEYWORD
                else "named",
            )
            for p in params
            if p.kind is not p.VAR_KEYWORD
        ]
    if not inspect.isclass(obj):
        schema = _schema_params(name, method, label)
        if schema is not None:
            return schema
    doc = getattr(obj, "__doc__", None)
    return _docstring_params(name, doc) if isinstance(doc, str) else None


_PREFIX = {"linalg": "linalg_", "fft": "fft_", "special": "special_"}


def _schema_params(name: str, method: bool, label: str) -> list[tuple[str, str]] | None:
    """Argument names of the ATen schemas of `aten::<prefix><name>` (TorchScript-only
    overloads on plain numbers left out; `self` is `input` for functions, absent for
    methods, and methods take no `out`)."""
    try:
        import torch

        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{_PREFIX.get(label, '')}{name}")
    except Exception:
        return None
    schemas = [s for s in schemas if any("Tensor" in str(a.type) for a in s.arguments)]
    if any(a.name == "self" for s in schemas for a in s.arguments):
        # overloads whose `self` is not a tensor (lists, numbers) are TorchScript's
        schemas = [
            s
            for s in schemas
            if any(a.name == "self" and str(a.type) == "Tensor" for a in s.arguments)
        ]
    if not schemas:
        return None
    found: dict[str, str] = {}
    for s in schemas:
        for a in s.arguments:
            n = a.name
            info = a.alias_info
            if a.kwarg_only and info is not None and info.is_write:
                n = "out"  # an out overload's outputs: Python's `out=`
            if n == "self":
                if method:
                    continue
                n = "input"
            if method and n == "out":
                continue
            found.setdefault(n, "named")
    return list(found.items())


def _only_varargs(sig: inspect.Signature) -> bool:
    kinds = {p.kind for p in sig.parameters.values() if p.name != "self"}
    return kinds <= {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}


def refused(ours: Any, theirs: list[tuple[str, str]], method: bool) -> list[str] | None:
    """torch's parameter names that llgrad's `ours` does not accept (None: unreadable)."""
    target = ours.__init__ if inspect.isclass(ours) else ours
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if (
        (method or inspect.isclass(ours))
        and params
        and params[0].kind
        in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        and params[0].name in ("self", "cls", "input", "tensor", "t", "x")
    ):
        params = params[1:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return []
    named = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    first = (
        params[0]
        if params
        and params[0].kind
        in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        else None
    )
    bad = []
    for pname, kind in theirs:
        if pname in named or (kind == "var" and varargs):
            continue
        if pname in ("input", "self") and (method or first is not None or varargs):
            continue  # the first operand, passed by position in practice
        bad.append(pname)
    return bad


def measure(label: str, torch_path: str, llgrad_path: str, rules: Iterable[Rule]) -> Report:
    """The coverage of one namespace."""
    theirs_ns = _resolve(torch_path)
    ours_ns = _resolve(llgrad_path)
    report = Report(label)
    if theirs_ns is None:
        return report
    report.public = public_names(theirs_ns)
    mine = [r for r in rules if r.namespace == label]
    method = label == "Tensor"
    for name in report.public:
        rule = next((r for r in mine if fnmatch.fnmatchcase(name, r.pattern)), None)
        if rule is not None:
            report.excluded[name] = rule.reason
            continue
        ours = getattr(ours_ns, name, None) if ours_ns is not None else None
        if ours is None and not (ours_ns is not None and hasattr(ours_ns, name)):
            report.missing.append(name)
            continue
        theirs = getattr(theirs_ns, name, None)
        bad = None
        if callable(theirs) and callable(ours):
            params = torch_params(name, theirs, method, label)
            if params:
                bad = refused(ours, params, method)
        if bad:
            report.differs[name] = bad
        else:
            report.covered.append(name)
    return report


def measure_all() -> list[Report]:
    """Every namespace's coverage (torch must be importable)."""

    rules = load_rules()
    return [measure(label, t, l, rules) for label, t, l in NAMESPACES]


def table(reports: list[Report]) -> str:
    """The markdown table the README quotes."""
    lines = [
        "| namespace | public names | excluded | considered | covered | differs | "
        "missing | coverage |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in reports:
        lines.append(
            f"| `{r.label}` | {len(r.public)} | {len(r.excluded)} | {r.considered} | "
            f"{len(r.covered)} | {len(r.differs)} | {len(r.missing)} | "
            f"{r.percent:.1f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python tools/api_coverage.py [--missing NS] [--differs NS] [--excluded NS] [--json]`."""
    import argparse

    p = argparse.ArgumentParser(prog="api_coverage", description=__doc__.split("\n")[0])
    p.add_argument("--missing", metavar="NS", help="list the missing names of a namespace")
    p.add_argument("--differs", metavar="NS", help="list names whose signatures differ")
    p.add_argument("--excluded", metavar="NS", help="list excluded names with reasons")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--write-floor",
        metavar="PATH",
        help="write each namespace's covered count to PATH (the test's floor)",
    )
    ns = p.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("api_coverage: torch is not installed (pip install 'llgrad[oracle]')")
        return 2
    reports = measure_all()
    by_label = {r.label: r for r in reports}
    for flag in ("missing", "differs", "excluded"):
        label = getattr(ns, flag)
        if label is None:
            continue
        if label not in by_label:
            p.error(f"unknown namespace {label!r}; one of {', '.join(by_label)}")
        r = by_label[label]
        if flag == "missing":
            print("\n".join(r.missing))
        elif flag == "differs":
            print("\n".join(f"{k}: refuses {', '.join(v)}" for k, v in r.differs.items()))
        else:
            print("\n".join(f"{k}: {v}" for k, v in r.excluded.items()))
        return 0
    if ns.write_floor:
        Path(ns.write_floor).write_text(
            json.dumps({r.label: len(r.covered) for r in reports}, indent=1) + "\n"
        )
    if ns.json:
        print(json.dumps({r.label: r.as_dict() for r in reports}, indent=1))
    else:
        print(table(reports))
    return 0
