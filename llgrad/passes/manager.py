"""The pass manager: named Graph -> Graph passes, run in a pipeline you can print between.

`run_pipeline(g)` runs `PIPELINE` (simplify, fold, cse, dce) in rounds until a whole
round leaves the graph unchanged: folding exposes constants that simplification uses
(`x * cast(1)`), simplification and CSE expose new folds and merges (`where(c, x, x)` once
two `x` are one node). Each pass already runs to its own fixpoint, so a second round
usually only confirms the first; the result is therefore idempotent.

Every run is recorded as a `Stage` (pass name, graph after it, node count, seconds);
`print(result)` shows the IR after each pass, `dump=` streams the same text as it goes,
and `LLGRAD_LOG=passes` logs each stage to stderr. With `verify=True` (tests always ask)
the verifier runs on the input and after every pass, and an invalid graph is reported as
a `PassError` naming the pass. Whatever `verify` says, a pass may not change the graph's
signature (parameter names and types, output count and types): that is checked always.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, TextIO

from .. import _log
from ..ir.graph import Graph
from ..ir.printer import format_type, param_name, print_graph
from ..ir.verify import VerificationError, verify as verify_graph
from .cse import cse
from .dce import dce
from .fold import fold
from .simplify import simplify
from .transpose import fold_transposed_matmul

__all__ = [
    "Pass",
    "PIPELINE",
    "Stage",
    "PipelineResult",
    "PassError",
    "run_pipeline",
    "make_pass",
    "node_count",
    "MAX_ROUNDS",
]

MAX_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class Pass:
    """A named `Graph -> Graph` function; `doc` says what it does (the function's docstring
    by default). Calling the pass runs the function."""

    name: str
    fn: Callable[[Graph], Graph]
    doc: str = ""

    def __call__(self, g: Graph) -> Graph:
        return self.fn(g)

    def __str__(self) -> str:
        return self.name


def make_pass(fn: Callable[[Graph], Graph], name: str | None = None) -> Pass:
    """A `Pass` from a function, named after it unless `name` is given."""
    if isinstance(fn, Pass):
        return fn
    if not callable(fn):
        raise TypeError(f"a pass must be a callable Graph -> Graph, got {fn!r}")
    return Pass(name or getattr(fn, "__name__", "pass"), fn, inspect.getdoc(fn) or "")


PIPELINE: list[Pass] = [
    make_pass(simplify),
    make_pass(fold),
    make_pass(cse),
    make_pass(fold_transposed_matmul),
    make_pass(dce),
]


class Stage(NamedTuple):
    """One pass run: its name (`simplify`, or `simplify#2` in the second round), the graph
    after it, that graph's node count (parameters excluded), and the seconds it took."""

    name: str
    graph: Graph
    nodes: int
    seconds: float


class PassError(RuntimeError):
    """A pass returned something that is not a valid graph with the same signature."""

    def __init__(self, pass_name: str, reason: str, before: Graph, after: object):
        self.pass_name = pass_name
        self.reason = reason
        self.before = before
        self.after = after
        message = f"pass {pass_name!r}: {reason}"
        if isinstance(after, Graph):
            message += "\nthe graph after the pass:\n" + _text(after)
        super().__init__(message)


def node_count(g: Graph) -> int:
    """Nodes other than parameters: the number of `%0, %1, ...` lines in the printout."""
    return len(g.nodes) - len(g.params)


@dataclass
class PipelineResult:
    """The final graph and every stage that led to it; `str()` shows the IR after each."""

    graph: Graph
    stages: list[Stage]
    input: Graph
    rounds: int = 1
    converged: bool = True

    def format(self, times: bool = True) -> str:
        """The input's IR, then each stage's (or `unchanged`); times are left out for
        golden tests when `times=False`."""
        parts = [f"== input: {node_count(self.input)} nodes ==\n{_text(self.input)}"]
        previous = self.input
        for s in self.stages:
            took = f" ({s.seconds * 1e3:.2f} ms)" if times else ""
            if s.graph == previous:
                parts.append(f"== {s.name}: unchanged, {s.nodes} nodes{took} ==\n")
            else:
                parts.append(
                    f"== {s.name}: {node_count(previous)} -> {s.nodes} nodes{took} "
                    f"==\n{_text(s.graph)}"
                )
            previous = s.graph
        return "".join(parts)

    def __str__(self) -> str:
        return self.format(times=True)

    def stage(self, name: str) -> Stage:
        """The stage of that name (`"fold"`, `"fold#2"`)."""
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage named {name!r}; stages: {[s.name for s in self.stages]}")


def run_pipeline(
    graph: Graph,
    pipeline: Iterable[Pass | Callable[[Graph], Graph]] = PIPELINE,
    *,
    verify: bool = False,
    dump: TextIO | Callable[[str], None] | None = None,
    max_rounds: int = MAX_ROUNDS,
) -> PipelineResult:
    """Run the passes in rounds until a round changes nothing (at most `max_rounds`)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"run_pipeline expects a Graph, got {type(graph).__name__}")
    passes = [make_pass(p) for p in pipeline]
    if max_rounds < 1:
        raise ValueError(f"run_pipeline: max_rounds must be >= 1, got {max_rounds}")
    if verify:
        verify_graph(graph)  # a broken input is not a pass's fault: report it as is
    result = PipelineResult(graph, [], graph, rounds=0, converged=False)
    g = graph
    for round_ in range(1, max_rounds + 1):
        result.rounds = round_
        start = g
        for p in passes:
            g = _run_one(p, g, round_, verify, dump, result)
        if g == start:
            result.converged = True
            break
    result.graph = g
    return result


def _run_one(
    p: Pass,
    g: Graph,
    round_: int,
    verify: bool,
    dump: TextIO | Callable[[str], None] | None,
    result: PipelineResult,
) -> Graph:
    t0 = time.perf_counter()
    out = p(g)
    seconds = time.perf_counter() - t0
    if not isinstance(out, Graph):
        raise PassError(p.name, f"returned {type(out).__name__}, not a Graph", g, out)
    _check_signature(p.name, g, out)
    if verify:
        _verify(p.name, g, out)
    name = p.name if round_ == 1 else f"{p.name}#{round_}"
    stage = Stage(name, out, node_count(out), seconds)
    result.stages.append(stage)
    _report(stage, g, dump)
    return out


def _verify(name: str, before: Graph, after: Graph) -> None:
    try:
        verify_graph(after)
    except VerificationError as e:
        raise PassError(name, f"the verifier rejects the graph: {e}", before, after) from e


def _signature(g: Graph) -> tuple:
    params = tuple((param_name(p), format_type(p.type)) for p in g.params)
    return params, tuple(format_type(o.type) for o in g.outputs)


def _check_signature(name: str, before: Graph, after: Graph) -> None:
    (p0, o0), (p1, o1) = _signature(before), _signature(after)
    if p0 != p1:
        raise PassError(
            name,
            f"changed the parameters from {list(p0)} to {list(p1)}; passes must keep the signature",
            before,
            after,
        )
    if o0 != o1:
        raise PassError(
            name,
            f"changed the outputs' types from {list(o0)} to {list(o1)}; "
            f"passes must keep the signature",
            before,
            after,
        )


def _report(stage: Stage, before: Graph, dump: TextIO | Callable[[str], None] | None) -> None:
    logging = _log.enabled("passes")
    if dump is None and not logging:
        return  # printing a big graph is not free
    changed = stage.graph != before
    took = f"({stage.seconds * 1e3:.2f} ms)"
    head = (
        f"{stage.name}: {node_count(before)} -> {stage.nodes} nodes {took}"
        if changed
        else f"{stage.name}: unchanged, {stage.nodes} nodes {took}"
    )
    body = _text(stage.graph) if changed else ""
    if logging:
        _log.log("passes", head + ("\n" + body.rstrip("\n") if body else ""))
    if dump is not None:
        text = f"== {head} ==\n{body}"
        if callable(dump):
            dump(text)
        else:
            dump.write(text)


def _text(g: Graph) -> str:
    """The IR text, or a note if the graph cannot be printed (an invalid pass result)."""
    try:
        return print_graph(g)
    except (TypeError, ValueError, KeyError) as e:
        return f"<graph @{g.name} cannot be printed: {e}>\n"
