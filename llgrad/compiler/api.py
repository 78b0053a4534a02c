"""`lg.compile`: trace once per input signature, differentiate, optimize, run native code.

A call flattens its arguments (tuples, lists, dicts, namedtuples; tensors are leaves, other
values are part of the signature), looks the signature up, traces and compiles on a miss
(`LLGRAD_LOG=recompiles` says which part changed), and runs one `GraphFunction`. Tensors
the function captured (globals, closures, module parameters) are extra inputs read at every
call, so updating a parameter in place is seen by the next call.

Data-dependent Python on a traced value is a graph break: by default that signature runs
eagerly (the Python function itself), and the break is reported with its file and line
(`LLGRAD_LOG=graph_breaks`, `inspect()`); with `fullgraph=True` it raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .. import _log
from .._keys import number_key
from .._warnings import warn_at_user
from ..dispatch.grad_mode import is_grad_enabled, no_grad
from ..eager.elementwise import copy_into
from ..functions._errors import DEVICE_CLASSES as _CUDA_CLASSES
from ..functions.inplace import overlaps_itself
from ..ir.dtypes import get_default_dtype
from ..ir.graph import Graph
from ..nn.modules.module import Module
from ..tensor import Tensor
from ..tracer.context import current
from ..tracer.make_ir import Structure, _flatten, _Leaf, _unflatten, trace
from ..tracer.tensor import GraphBreak
from .callpath import MISS, specialize
from .function import CompileFailure, GraphFunction, report_failure
from .pipeline import STAGE_NAMES, artifact_text


class _State(threading.local):
    disabled = 0  # depth of `disable_compile()` blocks in this thread


_state = _State()
_MISSING = object()
# LLGRAD_DISABLE_COMPILE is read on every call (setting it at run time takes effect), from
# os.environ's own encoded mapping where there is one: `os.environ.get` re-encodes the
# key each time, which would cost more than the rest of a small compiled call's checks.
_ENV_NAME = "LLGRAD_DISABLE_COMPILE"
try:
    _environ: Any = os.environ._data  # type: ignore[attr-defined]
    _env_key: Any = os.environ.encodekey(_ENV_NAME)  # type: ignore[attr-defined]
except AttributeError:
    _environ, _env_key = os.environ, _ENV_NAME
_ENV_OFF = (None, "", "0", b"", b"0")


def compile_disabled() -> bool:
    return bool(_state.disabled) or _environ.get(_env_key) not in _ENV_OFF


@contextlib.contextmanager
def disable_compile() -> Iterator[None]:
    """Run compiled functions as plain Python (op by op, eagerly) inside the block."""
    _state.disabled += 1
    try:
        yield
    finally:
        _state.disabled -= 1


class CompileError(RuntimeError):
    """A function cannot be compiled as one graph (raised with `fullgraph=True`)."""


def _structure_key(s: Structure) -> Any:
    """A hashable description of the argument structure (tensors by position)."""
    slots = []
    for v in s.slots:
        if isinstance(v, _Leaf):
            slots.append(("T", v.index))
            continue
        try:
            hash(v)
            # a float or complex also by `number_key`: -0.0 is not 0.0 here
            slots.append(
                ("C", type(v).__name__, v, number_key(v))
                if v.__class__ in (float, complex)
                else ("C", type(v).__name__, v)
            )
        except TypeError:
            slots.append(("C", type(v).__name__, repr(v)))
    try:
        hash(s.treedef)
        tree: Any = s.treedef
    except TypeError:  # a registered node with an unhashable context
        tree = repr(s.treedef)
    return (tree, tuple(slots))


def _describe_change(old: tuple, new: tuple) -> str:
    ((s0, c0), t0, g0), ((s1, c1), t1, g1) = old, new
    if c0 != c1:
        changed = [f"{a[0]} {a[1]!r} -> {b[1]!r}" for a, b in zip(c0, c1) if a != b]
        return "a Python constant the function reads changed: " + ", ".join(changed)
    if s0 != s1:
        return "the argument structure or a Python constant argument changed"
    if g0 != g1:
        return f"grad mode changed ({g0} -> {g1})"
    for i, (a, b) in enumerate(zip(t0, t1)):
        if a != b:
            what = ["shape", "dtype", "requires_grad"]
            diffs = [f"{w} {x} -> {y}" for w, x, y in zip(what, a, b) if x != y]
            return f"tensor argument {i}: " + ", ".join(diffs)
    return "the number of tensor arguments changed"


@dataclass
class Entry:
    """One compiled signature."""

    graph: Graph | None
    function: GraphFunction | None
    captured: list[Tensor]
    out_structure: Any
    graph_break: GraphBreak | None = None
    trace_seconds: float = 0.0
    n_outputs: int = 0
    effects: list = field(default_factory=list)
    self_contained: bool = False
    guards: dict = field(default_factory=dict)
    before_call: list = field(default_factory=list)
    written: list[int] = field(default_factory=list)  # inputs written in place
    fast: Any = None  # the specialized call (`callpath.specialize`), False: none

    def stale(self) -> str | None:
        """Which value read while tracing has changed since (None: the graph still holds)."""
        for what, (read, value) in self.guards.items():
            try:
                now = read()
            except (LookupError, AttributeError):
                return f"{what} no longer exists"
            if now is not value and (now != value or number_key(now) != number_key(value)):
                return f"{what} changed: {value!r} -> {now!r}"
        return None


@dataclass
class Report:
    """What `cf.inspect(*args)` returns: every stage of the compiled function, printable."""

    graph: Graph
    backward_graph: Graph | None
    joint_graph: Graph | None
    optimized: Graph
    passes: list[tuple[str, Graph]]
    kernels: Any
    schedule: Any
    llvm_ir: str
    asm: str
    stats: dict[str, Any]
    graph_breaks: list[str] = field(default_factory=list)
    target: str = "cpu"
    ptx: str = ""  # target="cuda": the PTX a CUDA call of this graph runs
    # `inspect(..., stages=True)`: (stage, printed artifact) in `pipeline.STAGES` order
    stages: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        if self.stages:
            parts = [f"== {name} ==\n{text}" for name, text in self.stages]
            parts.append("== stats ==\n" + "\n".join(f"{k}: {v}" for k, v in self.stats.items()))
            return "\n\n".join(parts)
        parts = [f"== traced graph ==\n{self.graph}"]
        if self.joint_graph is not None:
            parts.append(f"== joint forward+backward graph ==\n{self.joint_graph}")
        if self.backward_graph is not None:
            parts.append(f"== backward graph ==\n{self.backward_graph}")
        parts.append(f"== optimized forward ==\n{self.optimized}")
        title = "GPU launches" if self.target == "cuda" else "kernels"
        parts.append(f"== {title} ==\n" + "\n".join(str(k) for k in self.kernels))
        if self.schedule is not None:
            parts.append(f"== schedule ==\n{self.schedule}")
        parts.append("== stats ==\n" + "\n".join(f"{k}: {v}" for k, v in self.stats.items()))
        if self.graph_breaks:
            parts.append("== graph breaks ==\n" + "\n".join(self.graph_breaks))
        return "\n\n".join(parts)


RECOMPILE_WARNING = 8  # compiled signatures of one function before a warning


@dataclass
class Explanation:
    """What `cf.explain(*args)` returns: what these arguments compile to and why."""

    name: str
    signature: str
    compiled_before: bool  # a compiled entry for this signature already existed
    compiles: bool  # runs as one compiled graph (False: a graph break)
    nodes: int  # traced nodes (0 on a graph break)
    graph_breaks: list[str]  # every break this function met, with file:line
    recompiles: list[str]  # why each signature after the first was compiled
    signatures: int  # signatures compiled so far

    def __str__(self) -> str:
        state = ("seen before" if self.compiled_before else "traced now") + (
            f", one graph of {self.nodes} nodes"
            if self.compiles
            else ", runs eagerly (graph break)"
        )
        lines = [
            f"{self.name}: {self.signature}",
            f"  {state}",
            f"  {self.signatures} signature(s) compiled so far",
        ]
        lines += [f"  recompiled: {r}" for r in self.recompiles]
        lines += [f"  graph break: {b}" for b in self.graph_breaks]
        return "\n".join(lines)


class CompiledFunction:
    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        backend: str = "llvm",
        dynamic: bool = False,
        fullgraph: bool = False,
        cache: bool = True,
    ):
        if backend not in ("llvm", "eager"):
            raise ValueError(f"compile: unknown backend {backend!r} (use 'llvm' or 'eager')")
        self.dynamic = dynamic
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        self.use_cache = cache
        self._entries: dict[tuple, Entry] = {}
        self._fast: Callable[[tuple], Any] | None = None  # see `_call`
        self._last_key: tuple | None = None
        self._sources: list[tuple[str, Any, str]] | None = None
        self.graph_breaks: list[str] = []  # each break once, with file:line
        self.recompiles: list[str] = []  # why each signature after the first came
        self._warned = False
        functools.update_wrapper(self, fn)

    # -- calling --------------------------------------------------------------------------
    def _key(self, args: tuple, kwargs: dict) -> tuple[tuple, list[Tensor]]:
        if not kwargs and all(type(a) is Tensor or type(a) in _CUDA_CLASSES for a in args):
            # the common case, without flattening: positional tensors only
            leaves = list(args)
            structure = ("fast", len(args))
        else:
            leaves = []
            structure = _structure_key(_flatten((args, kwargs), leaves))
        sig = tuple(
            (t._shape, t._dtype.name, t._requires_grad)
            if t.__class__ not in _CUDA_CLASSES
            else (t._shape, t._dtype.name, t._requires_grad, "cuda")
            for t in leaves
        )
        return ((structure, self._guards()), sig, is_grad_enabled()), leaves

    def _guard_sources(self) -> list[tuple[str, Any, str]]:
        """Where the guarded names live: (name, globals dict or closure cell, kind)."""
        fn = getattr(self.fn, "__func__", self.fn)
        code = getattr(fn, "__code__", None)
        if code is None:
            return []
        sources: list[tuple[str, Any, str]] = []
        g = getattr(fn, "__globals__", {})
        for name in code.co_names:
            if name in g and not callable(g[name]) and not hasattr(g[name], "__dict__"):
                sources.append((name, g, "global"))
        for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            sources.append((name, cell, "cell"))
        return sources

    def _guard_sources_cached(self) -> list[tuple[str, Any, str]]:
        if self._sources is None:
            self._sources = self._guard_sources()
        return self._sources

    def _guards(self) -> tuple:
        """Python constants the function reads from its globals and closure.

        Tracing bakes them into the graph, so they are part of the signature: changing
        `SCALE = 2.0` to `3.0` recompiles instead of silently using the old value.
        (Constants read inside other functions the body calls are not seen.) The default
        dtype is one of them too (it decides a Python number's dtype).
        """
        values = [("default dtype", get_default_dtype().name)]
        for name, where, kind in self._guard_sources_cached():
            if kind == "global":
                v = where.get(name, _MISSING)
            else:
                try:
                    v = where.cell_contents
                except ValueError:
                    continue
            if isinstance(v, (bool, int, float, complex, str)) or v is None:
                values.append((name, number_key(v)))
        return tuple(values)

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        """`@lg.compile` on a method: `model.step` is a compiled function of the bound
        method, made once per instance (kept in the instance's `__dict__` under the
        method's name, or by reference where the instance has no `__dict__`)."""
        if obj is None:
            return self
        import weakref

        bound_by = self.__dict__.setdefault("_bound", {})
        hit = bound_by.get(id(obj))
        if hit is not None and hit[0]() is obj:
            return hit[1]
        bound = CompiledFunction(
            self.fn.__get__(obj, objtype),
            backend=self.backend,
            dynamic=self.dynamic,
            fullgraph=self.fullgraph,
            cache=self.use_cache,
        )
        name = getattr(self, "_attribute", None)
        try:
            if name is not None and getattr(type(obj), name, None) is self:
                vars(obj)[name] = bound
                return bound
        except TypeError:  # no __dict__ (slots)
            pass
        try:
            key = id(obj)
            bound_by[key] = (weakref.ref(obj, lambda _: bound_by.pop(key, None)), bound)
        except TypeError:  # not weakly referable: compiled per lookup
            pass
        return bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast is not None and not kwargs:
            try:
                out = fast(args)
            except CompileFailure:  # a lazily compiled part (see `_call`)
                self._fast = None
                return self._call(args, kwargs)
            except IndexError as e:
                if not getattr(e, "compiled_index", False):
                    raise
                return self._eager_index_error(args, kwargs, e)
            if out is not MISS:
                return out
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """`_call_compiled`, except that a signature whose graph cannot be compiled (an
        internal error after tracing: `function.CompileFailure`) runs eagerly from then on,
        with the reason logged (`LLGRAD_LOG=graph_breaks`) and one warning per process.
        Nothing has run when compiling fails, so running the Python function instead is
        exactly the eager call."""
        try:
            return self._call_compiled(args, kwargs)
        except IndexError as e:
            if not getattr(e, "compiled_index", False):
                raise
            return self._eager_index_error(args, kwargs, e)
        except CompileFailure as failure:
            if self.fullgraph:
                raise CompileError(
                    f"{self.__name__} cannot be compiled (fullgraph=True): {failure}"
                ) from failure
            report_failure(failure, self.__name__, "this signature runs eagerly")
            key, _ = self._key(args, kwargs)
            entry = self._entries.get(key)
            reason = GraphBreak(
                f"compiling failed ({failure})",
                None,
                advice="an llgrad bug; this signature runs eagerly",
            )
            if entry is not None:
                entry.graph_break, entry.fast = reason, False
            self._fast = None
            msg = f"{self.__name__}: {reason.what}"
            if msg not in self.graph_breaks:
                self.graph_breaks.append(msg)
            return self.fn(*args, **kwargs)

    def _eager_index_error(self, args: tuple, kwargs: dict, error: IndexError) -> Any:
        """A compiled graph met an out-of-range index (and read nothing out of bounds).
        The graph checks a flattened position, so its message cannot name the index as
        written; the call runs eagerly for eager's error (the op, the index, the dimension
        and its size). Should the eager call not fail, the compiled error stands."""
        try:
            self.fn(*args, **kwargs)
        except IndexError as eager:
            raise eager from None
        except RuntimeError as eager:  # eager gather/scatter raise RuntimeError
            if "index" not in str(eager):
                raise
            raise eager from None
        raise error

    def _call_compiled(self, args: tuple, kwargs: dict) -> Any:
        """The general call (see the module docstring); it leaves the signature it ran
        specialized in `_fast` (`callpath.specialize`) for the next call to try first."""
        if self.backend == "eager" or compile_disabled() or current() is not None:
            return self.fn(*args, **kwargs)  # (inside another trace: inline it)
        key, leaves = self._key(args, kwargs)
        entry = self._entries.get(key) if self.use_cache else None
        if entry is None:
            entry = self._compile(key, args, kwargs)
        if entry.guards:
            why = entry.stale()
            if why is not None:
                _log.log("recompiles", f"{self.__name__}: retracing because {why}")
                self._last_key = None
                entry = self._compile(key, args, kwargs)
        if entry.graph_break is not None:
            return self.fn(*args, **kwargs)
        for refresh in entry.before_call:
            refresh()
        if not entry.effects:
            outs = entry.function(*leaves, *entry.captured)
            self._specialize(entry, key, args, kwargs)
            return _unflatten(entry.out_structure, outs)
        if entry.written and _aliases_a_written_input(entry.written, leaves, entry.captured):
            _log.log(
                "graph_breaks",
                f"{self.__name__}: an argument shares memory with a "
                f"tensor the function writes in place; runs eagerly",
            )
            return self.fn(*args, **kwargs)
        if entry.self_contained:
            # a training step (backward() and updates inside): no autodiff around it
            with no_grad():
                outs = entry.function(*leaves, *entry.captured)
        else:
            outs = entry.function(*leaves, *entry.captured)
        _apply_effects(entry.effects, [o.detach() for o in outs[entry.n_outputs :]], leaves)
        self._specialize(entry, key, args, kwargs)
        return _unflatten(entry.out_structure, outs[: entry.n_outputs])

    def _specialize(self, entry: Entry, key: tuple, args: tuple, kwargs: dict) -> None:
        """Leave this signature's specialized call (made once) for the next call to try."""
        if (
            entry.fast is None
            and self.use_cache
            and entry.function is not None
            and entry.function.device != "cpu"
        ):
            entry.fast = False  # (the specialized call handles host tensors only)
        if entry.fast is None and self.use_cache:
            entry.fast = (
                not kwargs
                and specialize(entry, key, args, self._guard_sources_cached(), compile_disabled)
                or False
            )
        self._fast = entry.fast or None

    def _compile(self, key: tuple, args: tuple, kwargs: dict) -> Entry:
        if self._last_key is not None:
            what = (
                "retracing (dynamic: shape-generic kernels, no new native code)"
                if self.dynamic and self._same_ranks(self._last_key, key)
                else "recompiling"
            )
            why = _describe_change(self._last_key, key)
            self.recompiles.append(why)
            _log.log("recompiles", f"{self.__name__}: {what} because {why}")
            if len(self._entries) + 1 >= RECOMPILE_WARNING and not self._warned:
                self._warned = True
                self._warn_recompiles(why)
        self._last_key = key
        t0 = time.perf_counter()
        try:
            graph, ctx, out_structure = trace(self.fn, args, kwargs)
        except GraphBreak as e:
            msg = f"{self.__name__}: graph break at {e.loc or '?'}: {e.what}"
            if self.fullgraph:
                raise CompileError(
                    f"{self.__name__} cannot be compiled as one graph (fullgraph=True): {e}"
                ) from None
            entry = Entry(None, None, [], None, graph_break=e)
            if e.retry:  # e.g. optimizer state created on the first step
                _log.log("graph_breaks", msg + " (runs eagerly now; compiles next call)")
                self._last_key = None
                return entry
            _log.log("graph_breaks", msg + " (this signature runs eagerly)")
            if msg not in self.graph_breaks:
                self.graph_breaks.append(msg)
            self._entries[key] = entry
            return entry
        _log.log("graph", f"traced {self.__name__}:\n{graph}")
        entry = Entry(
            graph,
            GraphFunction(graph, self.dynamic, _device_of(self.__name__, args, kwargs, ctx)),
            list(ctx.captured),
            out_structure,
            trace_seconds=time.perf_counter() - t0,
            n_outputs=ctx.n_outputs,
            effects=ctx.effects,
            self_contained=ctx.self_contained,
            guards=dict(ctx.guards),
            before_call=list(ctx.before_call.values()),
        )
        entry.function.write_in_place = _in_place_writes(graph, ctx)
        entry.written = sorted({i for _, i in entry.function.write_in_place})
        self._entries[key] = entry
        return entry

    def _warn_recompiles(self, why: str) -> None:
        hint = (
            "The shapes change between calls: lg.compile(f, dynamic=True) compiles "
            "shape-generic kernels once."
            if why.startswith("tensor argument") and "shape" in why and not self.dynamic
            else "See cf.explain(*args) and cf.recompiles for what changed."
        )
        message = (
            f"{self.__name__} has been compiled for {RECOMPILE_WARNING} different "
            f"signatures (the last because {why}); every new one traces and "
            f"compiles again. {hint}"
        )
        _log.log("recompiles", message)
        warn_at_user(message)

    def explain(self, *args: Any, **kwargs: Any) -> Explanation:
        """What these arguments compile to (compiling them if needed, not running them):
        their signature, whether the result is one graph, every graph break met so far
        with its file:line, and why each recompile happened."""
        key, _ = self._key(args, kwargs)
        before = key in self._entries
        entry = self._entries.get(key) or self._compile(key, args, kwargs)
        (_, consts), sig, grad = key
        tensors = ", ".join(f"{dt}{list(shape)}{'!' if rg else ''}" for shape, dt, rg in sig)
        signature = f"tensors ({tensors}), grad mode {'on' if grad else 'off'}" + (
            f", constants {dict(consts)}" if consts else ""
        )
        ok = entry.graph_break is None
        breaks = list(self.graph_breaks)
        if not ok and not any(str(entry.graph_break.what) in b for b in breaks):
            breaks.append(
                f"{self.__name__}: graph break at {entry.graph_break.loc or '?'}: "
                f"{entry.graph_break.what}"
            )
        return Explanation(
            self.__name__,
            signature,
            before,
            ok,
            len(entry.graph.nodes) if ok and entry.graph is not None else 0,
            breaks,
            list(self.recompiles),
            sum(1 for e in self._entries.values() if e.graph is not None),
        )

    @staticmethod
    def _same_ranks(old: tuple, new: tuple) -> bool:
        (s0, t0, g0), (s1, t1, g1) = old, new
        return (
            s0 == s1
            and g0 == g1
            and len(t0) == len(t1)
            and all(len(a[0]) == len(b[0]) and a[1:] == b[1:] for a, b in zip(t0, t1))
        )

    # -- inspection -----------------------------------------------------------------------
    def inspect(
        self,
        *args: Any,
        target: str = "cpu",
        arch: str = "sm_80",
        stages: bool = False,
        **kwargs: Any,
    ) -> Report:
        """Every stage for these arguments: traced, differentiated, optimized, kernels,
        LLVM IR, assembly and timings (compiles them if needed). Raises `CompileError`
        when they do not compile as one graph.

        `target="cuda"`: the kernels a CUDA call of the same graph runs, from any
        arguments on any machine (no GPU needed): `kernels` are the GPU launches (kernel,
        grid, block; cuBLAS gemms), `llvm_ir` the NVPTX module, `asm` and `ptx` its PTX
        for `arch` (registers and shared bytes per kernel in `stats` when `ptxas` is
        installed).

        `stages=True`: the report prints the artifact of every compiler stage that ran, in
        the pipeline's order (`compiler.pipeline.STAGES`: traced, autodiff, partition,
        decompose, passes, fusion, lower, memory, emit, compile) instead of the summary."""
        if target not in ("cpu", "cuda"):
            raise ValueError(f"inspect: target must be 'cpu' or 'cuda', got {target!r}")
        try:
            report = self._inspect(args, kwargs, stages)
            return _for_cuda(report, arch) if target == "cuda" else report
        except CompileFailure as failure:
            raise CompileError(
                f"{self.__name__} does not compile for these arguments: {failure}"
            ) from failure

    def _inspect(self, args: tuple, kwargs: dict, stages: bool = False) -> Report:
        key, leaves = self._key(args, kwargs)
        entry = self._entries.get(key) or self._compile(key, args, kwargs)
        if entry.graph_break is not None:
            raise CompileError(
                f"{self.__name__} does not compile as one graph for these "
                f"arguments: {entry.graph_break}"
            )
        fn = entry.function
        inputs = list(leaves) + entry.captured
        wrt = (
            tuple(i for i, x in enumerate(inputs) if x._requires_grad)
            if is_grad_enabled() and not entry.self_contained
            else ()
        )  # as __call__ runs it
        stats: dict[str, Any] = {
            "traced nodes": len(entry.graph.nodes),
            "trace seconds": round(entry.trace_seconds, 4),
        }
        spec = fn.speculation(wrt) if wrt else None
        if spec is not None:
            # a scalar loss: one graph computes it and its gradients (function.py)
            fwd, backward_graph, joint_graph = spec.forward, None, spec.forward.graph
            stats["gradients"] = (
                "computed by the forward for cotangent 1; another "
                "cotangent recomputes them from the inputs"
            )
        elif wrt:
            d = fn.differentiated(wrt)
            fwd, bwd, joint = d.forward, d.backward, d.partition
            stats.update(
                {
                    "joint nodes": len(d.grad_graph.nodes),
                    "residuals": joint.n_residuals,
                    "residual bytes": joint.residual_bytes,
                    "bytes recomputed instead of saved": joint.recomputed_bytes,
                    "backward nodes": len(bwd.graph.nodes),
                    "backward nodes after passes": len(bwd.optimized.nodes),
                }
            )
            backward_graph, joint_graph = bwd.graph, d.grad_graph
        else:
            fwd, backward_graph, joint_graph = fn.plain(), None, None
        ex = fwd.executable
        stats.update(
            {"forward nodes after passes": len(fwd.optimized.nodes), "kernels": len(ex.kernels)}
        )
        stats.update({f"{k} seconds": round(v, 4) for k, v in fwd.seconds.items()})
        stats.update({f"codegen {k}": v for k, v in getattr(ex, "stats", {}).items()})
        if wrt and spec is None:
            bex = bwd.executable
            for k in ("bytes moved", "minimum bytes"):
                if k in getattr(bex, "stats", {}):
                    stats[f"backward {k}"] = bex.stats[k]
        texts: list[tuple[str, str]] = []
        if stages:
            texts = _stage_texts(
                entry.graph,
                joint_graph if spec is None else spec.forward.graph,
                joint if wrt and spec is None else None,
                fwd,
                ex,
            )
        return Report(
            entry.graph,
            backward_graph,
            joint_graph,
            fwd.optimized,
            fwd.stages,
            ex.kernels,
            getattr(ex, "schedule", None),
            ex.llvm_ir,
            ex.asm(),
            stats,
            list(self.graph_breaks),
            stages=texts,
        )


def _stage_texts(
    traced: Graph, joint: Graph | None, part: Any, fwd: Any, ex: Any
) -> list[tuple[str, str]]:
    """Each stage's printed artifact for `inspect(stages=True)`, in `STAGES` order: the
    forward graph's path through the native stages (what the first call runs)."""
    made: dict[str, str] = {}
    if joint is not None:
        made["autodiff"] = str(joint)
    if part is not None:
        made["partition"] = artifact_text("partition", part)
    passes = []
    for name, graph in fwd.stages:
        if name == "decompose":
            made["decompose"] = str(graph)
        else:
            passes.append(f"-- {name} --\n{graph}")
    if passes:
        made["passes"] = "\n".join(passes)
    native = {
        "fusion": getattr(ex, "fusion", None),
        "lower": getattr(ex, "program", None),
        "memory": getattr(ex, "plan", None),
    }
    made.update({k: str(v) for k, v in native.items() if v is not None})
    if getattr(ex, "llvm_ir", None):
        made["emit"] = ex.llvm_ir
        compiled = getattr(ex, "compiled", None)
        made["compile"] = (
            artifact_text("compile", compiled) + "\n" + ex.asm()
            if compiled is not None
            else ex.asm()
        )
    return [("traced", str(traced))] + [(n, made[n]) for n in STAGE_NAMES if n in made]


def _for_cuda(report: Report, arch: str) -> Report:
    """`report` with the GPU lowering of its forward graph (see `inspect`)."""
    from ..codegen.gpu import program as gp  # loaded on first use (codegen.gpu.program)
    from ..codegen.gpu import ptx as ptx_target  # loaded on first use (codegen.gpu.ptx)

    lowered = gp.lower_graph(report.optimized, "ptx", f"g_{report.optimized.name}")
    text = ptx_target.to_ptx(lowered.module.ir_text, arch)
    stats = dict(report.stats)
    stats["gpu launches"] = len(lowered.module.steps)
    stats["gpu arena bytes"] = lowered.plan.arena_bytes
    if ptx_target.find_ptxas() is not None:
        for name, res in ptx_target.ptxas(text, arch).items():
            stats[f"ptxas {name}"] = res
    return dataclasses.replace(
        report,
        kernels=list(lowered.module.steps),
        schedule=lowered.program,
        llvm_ir=lowered.module.ir_text,
        asm=text,
        ptx=text,
        stats=stats,
        target="cuda",
    )


def _in_place_writes(graph: Graph, ctx: Any) -> list[tuple[int, int]]:
    """(output, input) pairs where an effect writes a captured tensor that the graph also
    reads as an input: the compiled graph may write the new value in place (see
    `CompiledGraph.write_in_place`) and `_apply_effects` then has nothing to copy."""
    n_captured = len(ctx.captured)
    first = len(graph.params) - n_captured
    pairs, k = [], ctx.n_outputs
    for e in ctx.effects:
        if e.kind == "write" and e.target is None:
            pairs.append((k, e.leaf))  # an argument written in place
        elif e.kind == "write":
            for c, t in enumerate(ctx.captured):
                if t is e.target:
                    pairs.append((k, first + c))
        if e.kind in ("write", "grad"):
            k += 1
    return pairs


def _aliases_a_written_input(
    written: list[int], leaves: list[Tensor], captured: list[Tensor]
) -> bool:
    """Whether a tensor the graph writes shares memory with another of its inputs (the
    trace took them for independent values, so the compiled graph would be wrong)."""
    inputs = list(leaves) + list(captured)
    for w in written:
        if overlaps_itself(inputs[w]._shape, inputs[w]._strides):
            return True  # eagerly, the write raises PyTorch's error
        st = inputs[w]._storage
        if any(j != w and x._storage is st for j, x in enumerate(inputs)):
            return True
    return False


def _apply_effects(effects: list, values: list[Tensor], leaves: list[Tensor]) -> None:
    """Replay a traced call's side effects: in-place writes and `.grad` assignments."""
    k = 0
    for e in effects:
        if e.kind == "write":
            v = values[k]
            target = e.target if e.target is not None else leaves[e.leaf]
            if v._storage is not target._storage or v._offset != target._offset:
                copy_into(target, v)  # else the graph wrote it in place
            target._storage.version += 1
            k += 1
        elif e.kind == "grad":
            target = e.target if e.target is not None else leaves[e.leaf]
            target._grad = values[k]
            k += 1
        else:
            e.target._grad = None


def compile(
    fn: Callable[..., Any] | None = None,
    *,
    backend: str = "llvm",
    dynamic: bool = False,
    fullgraph: bool = False,
    cache: bool = True,
) -> Any:
    """`@lg.compile` / `lg.compile(fn, ...)`; a Module compiles its `forward`."""

    def wrap(f: Callable[..., Any]) -> Any:
        if not callable(f):
            raise TypeError(
                f"compile: expected a function or an nn.Module to compile, got {type(f).__name__}"
            )
        if isinstance(f, Module):
            compiled = CompiledFunction(
                f.forward, backend=backend, dynamic=dynamic, fullgraph=fullgraph, cache=cache
            )
            f.forward = compiled
            return f
        return CompiledFunction(
            f, backend=backend, dynamic=dynamic, fullgraph=fullgraph, cache=cache
        )

    return wrap if fn is None else wrap(fn)


def _device_of(name: str, args: tuple, kwargs: dict, ctx: Any) -> str:
    """Where a traced call runs: "cuda" when its tensor arguments (or, with none, its
    captured tensors) are CUDA tensors, "cpu" when none is; arguments on both is
    PyTorch's device error. Host tensors the function captures (its constants) are
    copied to the device by the CUDA executable."""
    leaves: list[Tensor] = []
    _flatten((args, kwargs), leaves)
    cuda = [t.__class__ in _CUDA_CLASSES for t in leaves if t.dim() or t.__class__ in _CUDA_CLASSES]
    if any(cuda) and not all(cuda):
        raise RuntimeError(
            f"{name}: Expected all tensors to be on the same device, but "
            f"found at least two devices, cuda:0 and cpu!"
        )
    if any(cuda) or any(t.__class__ in _CUDA_CLASSES for t in ctx.captured):
        return "cuda"  # (captured host tensors: the function's constants, copied)
    return "cpu"
