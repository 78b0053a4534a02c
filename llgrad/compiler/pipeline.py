"""The compiler's pipeline: every stage from a traced graph to a loaded native module, in order.

`STAGES` is the one list. Each stage is a function from one printable artifact to the next:

    traced Graph
      autodiff    Graph -> joint Graph          (compiler.autodiff: the eager engine's rules)
      partition   joint Graph -> Partition      (forward: outputs + residuals; backward)
      decompose   Graph -> Graph                (composite ops into primitives)
      passes      Graph -> Graph                (simplify, fold, cse, dce in rounds)
      fusion      Graph -> FusionPlan           (kernel groups)
      lower       FusionPlan -> Program         (the schedule IR: launches, loop nests)
      memory      Program -> MemoryPlan         (one arena for the intermediates)
      emit        Program -> LLVM IR            (one module, one entry)
      compile     LLVM IR -> loaded module      (optimization, machine code, disk cache)

A graph compiled without gradients starts at `decompose`; one whose inputs require grad
runs `autodiff` and `partition` first and each part from `decompose` on. Dynamic-shape
graphs stop after `passes` and run on the eager kernels (`eager.graph.GraphRunner`), and
CUDA graphs hand the optimized graph to the GPU lowering (`eager.cuda`).

`run_stage` runs every stage: it times it and, when the `stages` log channel is on
(`LLGRAD_LOG=stages`), prints the artifact it made. `cf.inspect(*args, stages=True)`
prints the artifacts of one compiled function in the same order.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .. import _log
from .._warnings import warn_at_user
from ..codegen import graph as codegen_graph
from ..codegen.target import get_target
from ..eager.graph import GraphRunner
from ..ir.graph import Graph
from ..ir.verify import verify
from .autodiff import differentiate
from .decompose import decompose as lower_composites
from ..passes.fusion import fuse
from ..passes.lower import lower
from ..passes.manager import run_pipeline
from ..passes.memory import plan_buffers
from ..passes.partition import partition as split
from ..runtime import blas, mpi

__all__ = [
    "Stage",
    "STAGES",
    "STAGE_NAMES",
    "run_stage",
    "Compiled",
    "CompileFailure",
    "compiling",
    "report_failure",
    "compile_graph",
    "optimize",
    "NativeBuild",
    "build_native",
    "autodiff",
    "partition",
    "decompose",
]


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline: its name, what it takes and gives, and its function."""

    name: str
    takes: str
    gives: str
    run: Callable[..., Any]

    def __str__(self) -> str:
        return f"{self.name}: {self.takes} -> {self.gives}"


# -- the stages -----------------------------------------------------------------------------


def autodiff(
    graph: Graph, wrt: list[int], name: str | None = None, *, unit_cotangents: bool = False
) -> Graph:
    """The joint forward+backward graph of `graph` for the inputs `wrt`."""
    return differentiate(graph, wrt, name, unit_cotangents=unit_cotangents)


def partition(joint: Graph, n_primals: int, n_outputs: int) -> Any:
    """A joint graph split into a forward (outputs + residuals) and a backward graph."""
    return split(joint, n_primals, n_outputs)


def decompose(graph: Graph) -> Graph:
    """Composite ops (softmax, layer_norm, ...) rewritten into primitive ops."""
    return lower_composites(graph)


def _passes(graph: Graph) -> Any:
    return run_pipeline(graph)


def _fusion(graph: Graph) -> Any:
    return fuse(graph)


def _lower(fusion: Any, threads: int) -> Any:
    return lower(fusion, threads, blas.splits_gemms, mpi.handle_bits, blas.tile_epilogues)


def _memory(fusion: Any, program: Any) -> Any:
    views = {}
    for v, r in fusion.views.items():
        b = program.node_buffers.get(r.base)
        if b is not None:
            views[v] = (b, r.layout)
    return plan_buffers(program.buffers, views, fusion.names)


def _emit(program: Any, inline: str) -> Any:
    return codegen_graph.emit(program, inline)


def _compile(llvm_ir: str, symbols: Any, name: str) -> Any:
    return get_target().compile(llvm_ir, symbols, name=name)


STAGES: tuple[Stage, ...] = (
    Stage("autodiff", "Graph", "joint Graph", autodiff),
    Stage("partition", "joint Graph", "Partition", partition),
    Stage("decompose", "Graph", "Graph", decompose),
    Stage("passes", "Graph", "Graph", _passes),
    Stage("fusion", "Graph", "FusionPlan", _fusion),
    Stage("lower", "FusionPlan", "Program", _lower),
    Stage("memory", "Program", "MemoryPlan", _memory),
    Stage("emit", "Program", "LLVM IR", _emit),
    Stage("compile", "LLVM IR", "loaded module", _compile),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
_BY_NAME = {s.name: s for s in STAGES}


def run_stage(
    name: str, *args: Any, seconds: dict[str, float] | None = None, label: str = "", **kwargs: Any
) -> Any:
    """Run the stage `name` on `args`; add its time to `seconds[name]` and, when the
    `stages` log channel is on, log the artifact it made (`label` names the graph)."""
    stage = _BY_NAME[name]
    t0 = time.perf_counter()
    out = stage.run(*args, **kwargs)
    if seconds is not None:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
    if _log.enabled("stages"):
        _log.log(
            "stages", f"== {name}{f' @{label}' if label else ''} ==\n{artifact_text(name, out)}"
        )
    return out


def artifact_text(name: str, artifact: Any) -> str:
    """The printable form of what stage `name` made."""
    if name == "passes":
        return str(artifact.graph)
    if name == "partition":
        return f"-- forward --\n{artifact.forward}\n-- backward --\n{artifact.backward}"
    if name == "emit":
        return artifact[0]
    if name == "compile":
        return (
            f"module {artifact.name}: {len(artifact.addresses)} symbols"
            f"{' (from the disk cache)' if artifact.from_cache else ''}"
        )
    return str(artifact)


# -- driving the stages -----------------------------------------------------------------------


@dataclass
class Compiled:
    """A graph after the passes, and its executable."""

    graph: Graph
    optimized: Graph
    executable: Any
    stages: list[tuple[str, Graph]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def run(self) -> Any:
        """The executable's call for arguments of the graph's own signature: a static
        graph's generated runner (`CompiledGraph.runner`), else the executable."""
        return self.runner(0)

    def runner(self, verified: int) -> Any:
        """`run`, for a caller that has checked its first `verified` arguments' class,
        dtype and shape (see `CompiledGraph.runner`)."""
        runner = getattr(self.executable, "runner", None)
        return runner(verified) if runner is not None else self.executable


class CompileFailure(Exception):
    """A stage after tracing (autodiff, partition, decompose, passes, schedule, codegen)
    failed on a graph that traced: an internal error, never the user's. `lg.compile` runs
    that signature eagerly instead (`CompiledFunction`), with the reason logged on the
    `graph_breaks` channel and one warning per process."""

    def __init__(self, graph: str, stage: str, error: BaseException):
        self.graph, self.stage, self.error = graph, stage, error
        super().__init__(f"@{graph}: {stage} failed: {type(error).__name__}: {error}")


_warned_failure = [False]
failures: list[str] = []  # every compile failure of this process (tests read it)


def report_failure(failure: CompileFailure, where: str, fallback: str) -> None:
    """Log a compile failure (every one, `LLGRAD_LOG=graph_breaks`) and warn once."""
    message = f"{where}: compiling {failure} ({fallback})"
    if len(failures) < 1000:
        failures.append(message)
    _log.log("graph_breaks", message)
    if not _warned_failure[0]:
        _warned_failure[0] = True
        warn_at_user(
            f"lg.compile could not compile a graph and runs it eagerly instead: "
            f"{message}. This is an llgrad bug worth reporting; later failures "
            f"are logged on LLGRAD_LOG=graph_breaks only."
        )


@contextlib.contextmanager
def compiling(graph: Graph, stage: str) -> Iterator[None]:
    """A context in which any exception becomes `CompileFailure(graph, stage, error)`."""
    try:
        yield
    except CompileFailure:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        raise CompileFailure(graph.name, stage, e) from e


def optimize(graph: Graph) -> tuple[Graph, list[tuple[str, Graph]], float]:
    """The `passes` stage (simplify, fold, cse, dce); returns (graph, stages, seconds)."""
    t0 = time.perf_counter()
    result = run_stage("passes", graph, label=graph.name)
    stages = [(s[0], s[1]) for s in result.stages]
    return result.graph, stages, time.perf_counter() - t0


def compile_graph(
    graph: Graph, dynamic: bool = False, fallback: bool = False, device: str = "cpu"
) -> Compiled:
    """Stages `decompose` to `compile` for one graph: one native module for the whole
    graph, or (`dynamic`) a runner over the shape-generic eager kernels. A failure in any
    stage raises `CompileFailure`; with `fallback` (graphs compiled while a backward runs,
    when running the Python function instead is no longer possible) the graph runs on the
    eager kernels (`eager.graph.GraphRunner`) instead, and the failure is reported."""
    try:
        with compiling(graph, "compile"):
            return _compile_graph(graph, dynamic, device)
    except CompileFailure as failure:
        if not fallback:
            raise
        with compiling(graph, "the eager fallback"):
            lowered = run_stage("decompose", graph, label=graph.name)
            compiled = Compiled(graph, lowered, GraphRunner(lowered), [("decompose", lowered)])
        report_failure(failure, "backward", "runs on the eager kernels")
        return compiled


def _compile_graph(graph: Graph, dynamic: bool = False, device: str = "cpu") -> Compiled:
    from .executable import CompiledGraph  # (executable imports build_native from here)

    t0 = time.perf_counter()
    lowered = run_stage("decompose", graph, label=graph.name)
    t_dec = time.perf_counter() - t0
    optimized, stages, t_opt = optimize(lowered)
    stages = [("decompose", lowered)] + stages
    t0 = time.perf_counter()
    if device == "cuda":
        from ..eager.cuda import CudaExecutable  # (the CUDA runtime loads on first use)

        executable: Any = CudaExecutable(optimized)
    elif dynamic:
        executable = GraphRunner(optimized)
    else:
        executable = CompiledGraph(optimized)
    seconds = {"decompose": t_dec, "passes": t_opt, "codegen": time.perf_counter() - t0}
    _log.log(
        "graph",
        f"compiled @{graph.name}: {len(graph.nodes)} nodes -> {len(optimized.nodes)} after passes",
    )
    return Compiled(graph, optimized, executable, stages, seconds)


@dataclass
class NativeBuild:
    """What stages `fusion` to `compile` made for one optimized graph."""

    fusion: Any  # passes.fusion.FusionPlan
    program: Any  # schedule.program.Program
    plan: Any  # passes.memory.MemoryPlan
    llvm_ir: str
    symbols: Any
    emitted: list  # codegen.graph.emit's stage list (launch wrappers)
    module: Any  # codegen.target's loaded module: `addresses["entry"]`
    threads: int
    seconds: dict[str, float]


def build_native(
    graph: Graph, *, inline: str = "always", threads: int = 1, check: bool = True
) -> NativeBuild:
    """Stages `fusion`, `lower`, `memory`, `emit` and `compile` for an optimized graph
    (verified first when `check`), with each stage's seconds (`llvm.*`: LLVM's own)."""
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    if check:
        verify(graph)
    seconds["verify"] = time.perf_counter() - t0
    fusion = run_stage("fusion", graph, seconds=seconds, label=graph.name)
    program = run_stage("lower", fusion, threads, seconds=seconds, label=graph.name)
    plan = run_stage("memory", fusion, program, seconds=seconds, label=graph.name)
    llvm_ir, symbols, emitted = run_stage(
        "emit", program, inline, seconds=seconds, label=graph.name
    )
    module = run_stage(
        "compile", llvm_ir, symbols, f"graph_{graph.name}", seconds=seconds, label=graph.name
    )
    seconds["llvm"] = seconds.pop("compile")
    for k, v in module.seconds.items():
        seconds[f"llvm.{k}"] = v
    seconds["total"] = time.perf_counter() - t0
    return NativeBuild(fusion, program, plan, llvm_ir, symbols, emitted, module, threads, seconds)
