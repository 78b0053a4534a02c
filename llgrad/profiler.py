"""`llgrad.profiler`: where eager time goes, op by op (PyTorch's `torch.profiler`).

Usage, as with torch::

    import llgrad as lg
    from llgrad.profiler import ProfilerActivity, profile, record_function

    model = lg.nn.Sequential(lg.nn.Linear(64, 256), lg.nn.ReLU(), lg.nn.Linear(256, 10))
    opt = lg.optim.SGD(model.parameters(), lr=0.1)
    x, y = lg.randn(32, 64), lg.randint(0, 10, (32,))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(5):
            with record_function("train_step"):
                loss = lg.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            prof.step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")       # chrome://tracing or ui.perfetto.dev

What is recorded (each a timed, nested event; "self" time excludes the events nested in it):

- every call of a public tensor function through the namespaces users call: the `lg.*`
  functions (and the `llgrad.functions` module the library itself calls them through),
  the `Tensor` methods and operators (`__add__`, `__matmul__`, `__getitem__`, ...),
  `lg.nn.functional`, `lg.linalg`, `lg.fft` and `lg.special`. An op is named `aten::` +
  its llgrad name (`aten::add`, `aten::matmul`, `aten::relu`, `aten::linear`; `lg.linalg`,
  `lg.fft` and `lg.special` functions get torch's `linalg_` / `fft_` / `special_` prefix).
  Where llgrad differs from torch: torch names the ATen op that runs, so some names
  differ (`x[i]` is `aten::getitem` here, torch shows `aten::select`/`aten::slice`/
  `aten::index`; `t.float()` is `aten::float`, torch's `aten::to`; an operator called
  through its alias is named by the function it is, `lg.multiply` is `aten::mul`), and
  torch's lower-level children (`aten::empty`, `aten::copy_`) do not exist. An op called
  directly inside an op of the same name (an alias or an `out=` wrapper calling the
  function) is one event.
- every `nn.Module` call, as `nn.Module: <ClassName>` (torch's `with_modules` naming);
- `tensor.backward()` / `lg.autograd.backward` as `autograd::backward` and
  `lg.autograd.grad` as `autograd::grad` (torch has no such events), and inside them
  each autograd node the engine runs, named as the node (`MulBackward0`, `AddmmBackward0`;
  torch wraps these in `autograd::engine::evaluate_function: ...`), with the ops its
  derivative rule calls nested in it. A compiled call's node that answers `backward()`
  alone is one `CompiledBackward` event. Leaves' gradient accumulation is not an event
  of its own (it counts in `autograd::backward`'s self time).
- `Optimizer.step` and `Optimizer.zero_grad`, named as torch names them
  (`Optimizer.step#SGD.step`, `Optimizer.zero_grad#SGD.zero_grad`);
- every call of an `lg.compile`d function, as `CompiledFunction: <function name>` (the
  first call of a signature includes tracing and compiling it, with the ops the trace
  ran nested in it);
- `record_function(name)` blocks and decorated functions, under the given name.

How: while a profile is active (and only then) the public callables of those namespaces,
`Module.__call__`, the optimizers' `step`/`zero_grad` and `CompiledFunction.__call__` are
replaced by timing wrappers (`functools.wraps` copies, transparent: same arguments,
results and exceptions), and the autograd engine calls `engine.PROFILE_HOOK` to run each
node. The exact originals are put back when the profile stops, also on an exception.
When no profile is active nothing is replaced: the only cost left in the library is one
`PROFILE_HOOK is None` check per autograd node. Names bound before the profile
(`from llgrad import add` in user code, `add = lg.add` at import) keep the original and
are not recorded; modules imported during a profile are given the originals back when
it stops. Times are wall-clock `time.perf_counter_ns()` intervals, reported in
microseconds like torch. Recording costs roughly 1-3 microseconds per event (more with
`record_shapes` or `with_stack`), which counts in the enclosing event's self time: with
many tiny ops the parents' self times are inflated by that much.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import sys
import time
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from threading import get_ident
from typing import Any

from . import functions as F
from .autograd import api as autograd_api
from .tape import engine
from .compiler.api import CompiledFunction
from .compiler.function import CompiledBackward
from .nn.modules.module import Module
from .optim.optimizer import Optimizer
from .tensor import Tensor

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "ProfilerActivity",
    "profile",
    "record_function",
    "supported_activities",
]

_now = time.perf_counter_ns

# The active profile (one at a time, process-wide), read by every wrapper.
_SESSION: profile | None = None

# id(original) -> (original, wrapper): one wrapper per original, made once and kept, so
# that an object bound under several names (`lg.matmul`, `Tensor.matmul`,
# `Tensor.__matmul__`) stays one object while profiling too.
_WRAPPERS: dict[int, tuple[Any, Any]] = {}
# id(wrapper) -> original (to undo wrappers that spread into modules imported meanwhile)
_ORIGINALS: dict[int, Any] = {}

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class ProfilerActivity(enum.Enum):
    """What to profile (`torch.profiler.ProfilerActivity`). llgrad records `CPU` (host)
    activity only: `CUDA` is accepted so scripts written for torch run, and adds nothing
    (device kernels are not timed; their launches show in the ops' CPU time)."""

    CPU = "CPU"
    CUDA = "CUDA"


def supported_activities() -> set[ProfilerActivity]:
    """The activities llgrad's profiler records: `{ProfilerActivity.CPU}`."""
    return {ProfilerActivity.CPU}


# --------------------------------------------------------------------------------------
# recording
# --------------------------------------------------------------------------------------
# A raw event: (name, kind, start ns, end ns, thread id, depth, input shapes or None,
# source stack or None), appended when the event ends. Kinds: "op", "module", "backward",
# "autograd", "optimizer", "compiled", "user".
RawEvent = tuple[str, str, int, int, int, int, Any, Any]


def _shape_of(a: Any) -> list[Any]:
    """torch's `input_shapes` entry of one argument: a tensor's shape, a list of shapes
    for a sequence of tensors, `[]` for anything else."""
    if isinstance(a, Tensor):
        return list(a.shape)
    if isinstance(a, (list, tuple)) and a and any(isinstance(x, Tensor) for x in a):
        return [list(x.shape) if isinstance(x, Tensor) else [] for x in a]
    return []


def _shapes(args: Sequence[Any], kwargs: dict[str, Any] | None) -> list[list[Any]]:
    """The shapes of the positional arguments (each, `[]` for a non-tensor) followed by
    those of the tensor keyword arguments."""
    out = [_shape_of(a) for a in args]
    if kwargs:
        out.extend(_shape_of(v) for v in kwargs.values() if isinstance(v, Tensor))
    return out


def _user_stack(limit: int = 5) -> tuple[str, ...]:
    """The innermost `limit` frames outside the llgrad package, as torch writes them
    (`file.py(12): function`)."""
    frames: list[str] = []
    f: Any = sys._getframe(2)
    while f is not None and len(frames) < limit:
        path = f.f_code.co_filename
        if not path.startswith(_PKG_DIR):
            frames.append(f"{path}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return tuple(frames)


def _op_wrapper(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`fn` timed as the op `name` while a profile is active (a plain call otherwise)."""

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        s = _SESSION
        if s is None:
            return fn(*args, **kwargs)
        return s._timed(name, "op", fn, args, kwargs, True, args, kwargs)

    return op


def _method_wrapper(
    fn: Callable[..., Any], naming: Callable[[Any], str], kind: str, fold: bool
) -> Callable[..., Any]:
    """A method `fn(self, ...)` timed under `naming(self)` while a profile is active."""

    @functools.wraps(fn)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        s = _SESSION
        if s is None:
            return fn(self, *args, **kwargs)
        return s._timed(naming(self), kind, fn, (self, *args), kwargs, fold, args)

    return method


def _named_wrapper(fn: Callable[..., Any], name: str, kind: str) -> Callable[..., Any]:
    """A function timed as `name` (of `kind`) while a profile is active."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        s = _SESSION
        if s is None:
            return fn(*args, **kwargs)
        return s._timed(name, kind, fn, args, kwargs, True, args)

    return call


def _run_node(node: Any, grads: list[Any]) -> Any:
    """`engine.PROFILE_HOOK` while a profile is active: `node.apply(grads)`, timed as an
    event named after the node (`MulBackward0`)."""
    s = _SESSION
    if s is None:
        return node.apply(grads)
    return s._timed(node.name(), "backward", node.apply, (grads,), None, False, grads)


def _cached(orig: Any, make: Callable[..., Any], *args: Any) -> Any:
    """The wrapper of `orig`, made by `make(orig, *args)` the first time."""
    hit = _WRAPPERS.get(id(orig))
    if hit is not None and hit[0] is orig:
        return hit[1]
    w = make(orig, *args)
    _WRAPPERS[id(orig)] = (orig, w)
    _ORIGINALS[id(w)] = orig
    return w


# --------------------------------------------------------------------------------------
# what gets replaced
# --------------------------------------------------------------------------------------
# names of functions made by factories (a closure's own name says nothing): the
# attribute's name is used instead
_GENERIC = frozenset(
    {
        "cast",
        "method",
        "call",
        "wrapper",
        "inner",
        "named",
        "fn",
        "f",
        "func",
        "function",
        "impl",
        "wrapped",
        "replayed",
        "op",
        "run",
        "forward",
    }
)
# operators -> the function they are (torch's names; torch records `aten::__and__`)
_DUNDERS = {
    "__add__": "add",
    "__radd__": "add",
    "__iadd__": "add_",
    "__sub__": "sub",
    "__rsub__": "rsub",
    "__isub__": "sub_",
    "__mul__": "mul",
    "__rmul__": "mul",
    "__imul__": "mul_",
    "__truediv__": "div",
    "__rtruediv__": "div",
    "__itruediv__": "div_",
    "__floordiv__": "floor_divide",
    "__rfloordiv__": "floor_divide",
    "__mod__": "remainder",
    "__rmod__": "remainder",
    "__pow__": "pow",
    "__rpow__": "pow",
    "__ipow__": "pow_",
    "__matmul__": "matmul",
    "__rmatmul__": "matmul",
    "__neg__": "neg",
    "__pos__": "positive",
    "__abs__": "abs",
    "__invert__": "bitwise_not",
    "__eq__": "eq",
    "__ne__": "ne",
    "__lt__": "lt",
    "__le__": "le",
    "__gt__": "gt",
    "__ge__": "ge",
    "__and__": "__and__",
    "__rand__": "__and__",
    "__or__": "__or__",
    "__ror__": "__or__",
    "__xor__": "__xor__",
    "__rxor__": "__xor__",
    "__getitem__": "getitem",
    "__setitem__": "setitem",
    "__bool__": "is_nonzero",
    "__float__": "item",
    "__int__": "item",
}
# Tensor methods that read metadata or register things (no computation): not recorded
_TENSOR_SKIP = frozenset(
    [
        "size",
        "dim",
        "numel",
        "nelement",
        "ndimension",
        "element_size",
        "stride",
        "storage_offset",
        "data_ptr",
        "const_data_ptr",
        "get_device",
        "untyped_storage",
        "storage",
        "dim_order",
        "type",
        "requires_grad_",
        "retain_grad",
        "register_hook",
        "register_post_accumulate_grad_hook",
        "backward",
        "size_arg",
        "parse_to",
        "python_index",
        "no_bool_subtraction",
        "share_memory_",
    ]
)
# `lg.*` functions that are not computations (seeds, settings, type queries)
_FUNCTION_SKIP = frozenset(
    [
        "manual_seed",
        "seed",
        "initial_seed",
        "numel",
        "promote_types",
        "result_type",
        "can_cast",
        "broadcast_shapes",
        "typename",
        "use_deterministic_algorithms",
        "init_num_threads",
        "compiled_with_cxx11_abi",
        "slice_all",
    ]
)
_FUNCTION_MODULES = (
    "llgrad.functions",
    "llgrad.nn.",
    "llgrad.linalg",
    "llgrad.fft",
    "llgrad.special",
)


def _op_name(fn: Any, attr: str, prefix: str) -> str:
    """`aten::` + the function's llgrad name (its `__name__` unless that is private or a
    factory's closure name, then the attribute's, operators mapped to their function)."""
    name = getattr(fn, "__name__", "")
    if (
        not isinstance(name, str)
        or not name.isidentifier()
        or name.startswith("_")
        or name in _GENERIC
    ):
        name = _DUNDERS.get(attr, attr.strip("_") or attr)
    if prefix and not name.startswith(prefix):
        name = prefix + name
    return "aten::" + name


def _is_computation(name: str, fn: Any) -> bool:
    """Whether the namespace function `name` is a public computation to record."""
    if name.startswith(("_", "is_", "get_", "set_", "are_")) or name in _FUNCTION_SKIP:
        return False
    module = getattr(fn, "__module__", None) or ""
    return module.startswith(_FUNCTION_MODULES)


def _namespace_plan(mod: Any, prefix: str) -> list[tuple[Any, str, Any, Any]]:
    plan = []
    for name, fn in list(vars(mod).items()):
        if type(fn) is types.FunctionType and _is_computation(name, fn):
            w = _cached(fn, _op_wrapper, _op_name(fn, name, prefix))
            plan.append((mod, name, fn, w))
    return plan


def _tensor_plan() -> list[tuple[Any, str, Any, Any]]:
    plan = []
    for name, fn in list(vars(Tensor).items()):
        if type(fn) is not types.FunctionType:  # properties, class/static methods
            continue
        if name.startswith("_"):
            if name not in _DUNDERS:
                continue
        elif name in _TENSOR_SKIP or name.startswith("is_"):
            continue
        w = _cached(fn, _op_wrapper, _op_name(fn, name, ""))
        plan.append((Tensor, name, fn, w))
    return plan


def _subclasses(cls: type) -> Iterator[type]:
    seen = set()
    todo = [cls]
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        yield c
        todo.extend(c.__subclasses__())


def _module_name(m: Any) -> str:
    return "nn.Module: " + type(m).__name__


def _compiled_name(c: Any) -> str:
    return "CompiledFunction: " + str(getattr(c, "__name__", "?"))


# torch's names of the optimizer events: `Optimizer.step#SGD.step`
_OPTIMIZER_NAMES: dict[str, Callable[[Any], str]] = {
    "step": lambda o: f"Optimizer.step#{type(o).__name__}.step",
    "zero_grad": lambda o: f"Optimizer.zero_grad#{type(o).__name__}.zero_grad",
}


def _plan() -> list[tuple[Any, str, Any, Any]]:
    """(owner, attribute, original, wrapper) for everything a profile replaces."""
    import llgrad  # circle: llgrad -> here

    # the functions module first: its attribute names are the canonical ones
    plan = _namespace_plan(F, "")
    plan += _namespace_plan(llgrad, "")
    plan += _tensor_plan()
    plan += _namespace_plan(llgrad.nn.functional, "")
    plan += _namespace_plan(llgrad.linalg, "linalg_")
    plan += _namespace_plan(llgrad.fft, "fft_")
    plan += _namespace_plan(llgrad.special, "special_")

    for owner in (autograd_api, llgrad.autograd):
        for attr in ("backward", "grad"):
            fn = vars(owner).get(attr)
            if type(fn) is types.FunctionType:
                w = _cached(fn, _named_wrapper, f"autograd::{attr}", "autograd")
                plan.append((owner, attr, fn, w))

    call = vars(Module)["__call__"]
    plan.append(
        (Module, "__call__", call, _cached(call, _method_wrapper, _module_name, "module", False))
    )
    for cls in _subclasses(Optimizer):
        for attr in ("step", "zero_grad"):
            fn = cls.__dict__.get(attr)
            if type(fn) is types.FunctionType:
                w = _cached(fn, _method_wrapper, _OPTIMIZER_NAMES[attr], "optimizer", True)
                plan.append((cls, attr, fn, w))
    call = vars(CompiledFunction)["__call__"]
    plan.append(
        (
            CompiledFunction,
            "__call__",
            call,
            _cached(call, _method_wrapper, _compiled_name, "compiled", False),
        )
    )
    direct = vars(CompiledBackward).get("direct_grads")
    if type(direct) is types.FunctionType:
        plan.append(
            (CompiledBackward, "direct_grads", direct, _cached(direct, _direct_grads_wrapper))
        )
    return plan


def _direct_grads_wrapper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`CompiledBackward.direct_grads` (a compiled call's node answering `backward()`
    alone, without the engine) timed as the node, when it answers (None: it declined,
    the engine runs the node and records it)."""

    @functools.wraps(fn)
    def direct_grads(self: Any, *args: Any) -> Any:
        s = _SESSION
        if s is None:
            return fn(self, *args)
        tid = get_ident()
        stack = s._stack(tid)
        depth = len(stack)
        name = self.name()
        stack.append(name)
        t0 = _now()
        out = None
        try:
            out = fn(self, *args)
            return out
        finally:
            t1 = _now()
            del stack[depth:]
            if out is not None:
                s._events.append((name, "backward", t0, t1, tid, depth, None, None))

    return direct_grads


# --------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------
def _format_time(time_us: float) -> str:
    """torch's time format: `12.345us`, `1.234ms`, `1.234s`."""
    if time_us >= 1_000_000.0:
        return f"{time_us / 1_000_000.0:.3f}s"
    if time_us >= 1000.0:
        return f"{time_us / 1000.0:.3f}ms"
    return f"{time_us:.3f}us"


def _format_time_unit(time_us: float, unit: str | None) -> str:
    if unit == "s":
        return f"{time_us / 1_000_000.0:.3f}s"
    if unit == "ms":
        return f"{time_us / 1000.0:.3f}ms"
    if unit == "us":
        return f"{time_us:.3f}us"
    return _format_time(time_us)


def _format_share(time_us: float, total_us: float) -> str:
    return "NaN" if total_us == 0 else f"{time_us * 100.0 / total_us:.2f}%"


class _Row:
    """What `EventList.table` reads of an event or an average (times in microseconds)."""

    key: str = ""
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    input_shapes: list[Any]
    stack: list[str]
    cpu_parent: Any = None
    # what llgrad does not measure (torch's device and memory columns): always 0
    device_time_total = self_device_time_total = device_time = 0.0
    cpu_memory_usage = self_cpu_memory_usage = 0
    device_memory_usage = self_device_memory_usage = 0
    flops = 0

    @property
    def cpu_time(self) -> float:
        """Average total time per call (microseconds)."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        """Average self time per call (microseconds)."""
        return self.self_cpu_time_total / self.count if self.count else 0.0

    @property
    def cpu_time_total_str(self) -> str:
        """`cpu_time_total` formatted as the table writes it (`1.234ms`)."""
        return _format_time(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self) -> str:
        """`self_cpu_time_total` formatted as the table writes it."""
        return _format_time(self.self_cpu_time_total)

    @property
    def cpu_time_str(self) -> str:
        """`cpu_time` (the average) formatted as the table writes it."""
        return _format_time(self.cpu_time)

    # torch's CUDA spellings of the device fields
    @property
    def cuda_time_total(self) -> float:
        """0: llgrad times no device work (torch's field, for scripts that read it)."""
        return 0.0

    @property
    def self_cuda_time_total(self) -> float:
        """0: llgrad times no device work (torch's field, for scripts that read it)."""
        return 0.0

    @property
    def cuda_time(self) -> float:
        """0: llgrad times no device work (torch's field, for scripts that read it)."""
        return 0.0


class Interval:
    """An event's time range (`start`, `end` in microseconds since the profile began)."""

    __slots__ = ("end", "start")

    def __init__(self, start: float, end: float):
        self.start = start
        self.end = end

    def elapsed_us(self) -> float:
        """The duration in microseconds."""
        return self.end - self.start

    def __repr__(self) -> str:
        return f"Interval(start={self.start:.3f}, end={self.end:.3f})"


class FunctionEvent(_Row):
    """One recorded call (torch's `FunctionEvent`): `name` (also `key`), `kind` ("op",
    "module", "backward", "autograd", "optimizer", "compiled" or "user"), `thread`,
    `start_us`/`end_us` (microseconds since the profile began; also `time_range`),
    `cpu_time_total` (its duration, us), `self_cpu_time_total` (the duration minus that
    of the events nested directly in it), `depth` (0 for an outermost event),
    `cpu_parent` (the event it is nested in, or None), `cpu_children`, `input_shapes`
    (with `record_shapes=True`, else `[]`) and `stack` (with `with_stack=True`)."""

    count = 1

    def __init__(
        self,
        id: int,
        name: str,
        kind: str,
        start_us: float,
        end_us: float,
        thread: int,
        depth: int,
        input_shapes: list[Any] | None,
        stack: Sequence[str] | None,
    ):
        self.id = id
        self.name = self.key = name
        self.kind = kind
        self.start_us = start_us
        self.end_us = end_us
        self.time_range = Interval(start_us, end_us)
        self.thread = thread
        self.depth = depth
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = list(stack) if stack else []
        self.cpu_time_total = end_us - start_us
        self.self_cpu_time_total = self.cpu_time_total
        self.cpu_parent: FunctionEvent | None = None
        self.cpu_children: list[FunctionEvent] = []

    @property
    def duration_us(self) -> float:
        """The event's duration in microseconds (`cpu_time_total`)."""
        return self.cpu_time_total

    @property
    def is_user_annotation(self) -> bool:
        """Whether it is a `record_function` block."""
        return self.kind == "user"

    def __repr__(self) -> str:
        return (
            f"<FunctionEvent id={self.id} name={self.name!r} thread={self.thread} "
            f"start_us={self.start_us:.3f} cpu_time_total={self.cpu_time_total:.3f} "
            f"self_cpu_time_total={self.self_cpu_time_total:.3f} depth={self.depth}>"
        )


class FunctionEventAvg(_Row):
    """The events of one key added up (torch's `FunctionEventAvg`): `key`, `count`,
    `cpu_time_total` and `self_cpu_time_total` (sums, microseconds), `cpu_time` and
    `self_cpu_time` (averages per call), `input_shapes` (the group's, when grouped by
    input shape, else the first event's) and `stack`. As in torch, an event nested in
    one of the same key counts in both totals."""

    def __init__(
        self, key: str, input_shapes: list[Any] | None = None, stack: Sequence[str] | None = None
    ):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.stack = list(stack) if stack else []

    def add(self, event: _Row) -> FunctionEventAvg:
        """Add `event` (a `FunctionEvent` or another average) to the sums."""
        self.count += event.count
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        return self

    def __repr__(self) -> str:
        return (
            f"<FunctionEventAvg key={self.key!r} count={self.count} "
            f"cpu_time_total={self.cpu_time_total:.3f} "
            f"self_cpu_time_total={self.self_cpu_time_total:.3f} "
            f"input_shapes={self.input_shapes}>"
        )


_SORT_KEYS = (
    "self_cpu_time_total",
    "cpu_time_total",
    "count",
    "cpu_time",
    "self_cpu_time",
    "device_time_total",
    "self_device_time_total",
    "device_time",
    "cuda_time_total",
    "self_cuda_time_total",
    "cuda_time",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "flops",
)


class EventList(list):
    """A list of `FunctionEvent`s or `FunctionEventAvg`s (torch's `EventList`), with
    `table()`, `key_averages()`, `total_average()` and `self_cpu_time_total`."""

    def table(
        self,
        sort_by: str | None = "self_cpu_time_total",
        row_limit: int = 100,
        max_src_column_width: int = 75,
        max_name_column_width: int = 55,
        max_shapes_column_width: int = 80,
        header: str | None = None,
        top_level_events_only: bool = False,
        time_unit: str | None = None,
    ) -> str:
        """The rows as torch's text table: Name, Self CPU %, Self CPU, CPU total %, CPU
        total, CPU time avg, # of Calls (plus Input Shapes when recorded, Source
        Location when grouped by stack). Percentages are of the sum of the rows' self
        times, which the last line gives.

        sort_by: "self_cpu_time_total" (the default here; torch's default None keeps
        the rows' order, as None does here), "cpu_time_total", "count", "cpu_time",
        "self_cpu_time", or torch's device/memory keys ("cuda_time_total", ...), which
        are 0 for every row in llgrad (the order then is the rows' own). Sorted largest
        first. row_limit: at most this many rows (negative: all). time_unit: "s", "ms"
        or "us" for every time, else each picks its own as torch does."""
        return _build_table(
            self,
            sort_by,
            row_limit,
            max_src_column_width,
            max_name_column_width,
            max_shapes_column_width,
            header,
            top_level_events_only,
            time_unit,
        )

    def key_averages(
        self, group_by_input_shape: bool = False, group_by_stack_n: int = 0
    ) -> EventList:
        """One `FunctionEventAvg` per event name (and per input shapes with
        `group_by_input_shape`, per first `group_by_stack_n` source frames with that),
        in the order the keys first occur."""
        groups: dict[Any, FunctionEventAvg] = {}
        for e in self:
            key: Any = e.key
            if group_by_input_shape or group_by_stack_n:
                key = (
                    e.key,
                    str(e.input_shapes) if group_by_input_shape else None,
                    tuple(e.stack[:group_by_stack_n]) if group_by_stack_n else None,
                )
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(
                    e.key,
                    list(e.input_shapes),
                    e.stack[:group_by_stack_n] if group_by_stack_n else None,
                )
            avg.add(e)
        return EventList(groups.values())

    def total_average(self) -> FunctionEventAvg:
        """All rows added up into one (key "Total")."""
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of the rows' self CPU times (microseconds)."""
        return sum(e.self_cpu_time_total for e in self)


def _build_table(
    events: Sequence[_Row],
    sort_by: str | None,
    row_limit: int,
    max_src_column_width: int | None,
    max_name_column_width: int | None,
    max_shapes_column_width: int | None,
    header: str | None,
    top_level_events_only: bool,
    time_unit: str | None,
) -> str:
    """torch's `profiler_util._build_table`, for the CPU columns llgrad has."""
    if not events:
        return ""
    rows = list(events)
    if sort_by is not None:
        if sort_by not in _SORT_KEYS:
            raise ValueError(
                f"table: unknown sort_by {sort_by!r}; use one of {', '.join(_SORT_KEYS)}"
            )
        rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
    has_shapes = any(e.input_shapes for e in rows)
    has_stack = any(e.stack for e in rows)
    name_width = max(len(e.key) for e in rows) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in rows) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    src_width = 0
    if has_stack:
        src_width = max(len(s) for e in rows for s in e.stack) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)

    headers = [
        "Name",
        "Self CPU %",
        "Self CPU",
        "CPU total %",
        "CPU total",
        "CPU time avg",
        "# of Calls",
    ]
    widths = [name_width] + [12] * 6
    align = [">"] * 7
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
        align.append(">")
    if has_stack:
        headers.append("Source Location")
        widths.append(src_width)
        align.append("<")
    row_format = "".join("{: " + a + str(w) + "}  " for a, w in zip(align, widths))
    sep = "".join("-" * w + "  " for w in widths)
    line_length = sum(w + 2 for w in widths) - 2

    def trim_path(path: str) -> str:
        if len(path) > src_width:
            path = path[len(path) - src_width :]
            if len(path) > 3:
                path = "..." + path[3:]
        return path

    total = sum(e.self_cpu_time_total for e in rows)
    out: list[str] = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_events_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [sep, row_format.format(*headers), sep]
    shown = 0
    for e in rows:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[: max_name_column_width - 3] + "..."
        values: list[Any] = [
            name,
            _format_share(e.self_cpu_time_total, total),
            _format_time_unit(e.self_cpu_time_total, time_unit),
            _format_share(e.cpu_time_total, total),
            _format_time_unit(e.cpu_time_total, time_unit),
            _format_time_unit(e.cpu_time, time_unit),
            e.count,
        ]
        if has_shapes:
            values.append(str(e.input_shapes)[:shapes_width])
        if has_stack:
            values.append(trim_path(e.stack[0]) if e.stack else "")
        out.append(row_format.format(*values))
        if has_stack:
            blank = [""] * (len(headers) - 1)
            for entry in e.stack[1:]:
                out.append(row_format.format(*(blank + [trim_path(entry)])))
    out += [sep, f"Self CPU time total: {_format_time_unit(total, time_unit)}"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------
# the profile
# --------------------------------------------------------------------------------------
class profile:
    """Record where eager time goes, op by op, between `start()` and `stop()` (or in a
    `with` block): `torch.profiler.profile` for llgrad. See the module docstring for
    what is recorded and how the events are named.

    Arguments (torch's names):
      activities: an iterable of `ProfilerActivity` (default: CPU). `CUDA` is accepted
        and adds nothing: llgrad times host calls only.
      record_shapes: record each op's input shapes (`FunctionEvent.input_shapes`; group
        by them with `key_averages(group_by_input_shape=True)`).
      with_stack: record the innermost five source frames outside llgrad for each event
        (`FunctionEvent.stack`; group with `key_averages(group_by_stack_n=n)`). Costs
        a frame walk per event.
      profile_memory: accepted for torch's scripts; llgrad does not record allocations
        (no memory columns).
      schedule: only None (record everything) is supported; a schedule callable raises
        ValueError (profile the steps you want instead).
      on_trace_ready: called with the profile once it stops (torch calls it when a
        trace is ready: without a schedule, at stop too).
      with_flops: accepted; llgrad counts no FLOPs. with_modules: accepted; module calls
        are always recorded. use_cuda, acc_events: accepted, no effect.
      experimental_config, execution_trace_observer, custom_trace_id_callback: only
        None (torch's Kineto and execution-trace features are not implemented).

    Only one profile may be active at a time (starting a second raises RuntimeError,
    as torch refuses to nest profilers). `step()` counts steps (`step_num`) so training
    loops written for torch run; without a schedule torch records nothing more either.
    """

    def __init__(
        self,
        activities: Iterable[ProfilerActivity] | None = None,
        *,
        schedule: Callable[[int], Any] | None = None,
        on_trace_ready: Callable[[profile], Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        execution_trace_observer: Any = None,
        acc_events: bool = False,
        use_cuda: bool | None = None,
        custom_trace_id_callback: Callable[[], str] | None = None,
    ):
        if activities is None:
            activities = [ProfilerActivity.CPU]
        acts = set(activities)
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(
                    f"profile: activities must be ProfilerActivity members (CPU, CUDA), got {a!r}"
                )
        if schedule is not None:
            raise ValueError(
                "profile: llgrad's profiler supports schedule=None only (it "
                "records every step between start and stop); profile the "
                "steps you want instead of passing a schedule"
            )
        for name, value in (
            ("experimental_config", experimental_config),
            ("execution_trace_observer", execution_trace_observer),
            ("custom_trace_id_callback", custom_trace_id_callback),
        ):
            if value is not None:
                raise ValueError(
                    f"profile: {name} is not supported by llgrad's profiler (pass None)"
                )
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError("profile: on_trace_ready must be callable")
        self.activities = acts
        self.record_shapes = bool(record_shapes)
        self.with_stack = bool(with_stack)
        self.profile_memory = bool(profile_memory)
        self.with_flops = bool(with_flops)
        self.with_modules = bool(with_modules)
        self.on_trace_ready = on_trace_ready
        self.schedule = None
        self.step_num = 0
        self._stacks: dict[int, list[str]] = {}
        self._events: list[RawEvent] = []
        self._patched: list[tuple[Any, str, Any, Any]] = []
        self._hook_before: Any = None
        self._modules_before: set[str] = set()
        self._base = 0
        self._active = False
        self._started = False
        self._built: tuple[int, EventList] | None = None

    # -- start / stop ---------------------------------------------------------------------
    def __enter__(self) -> profile:  # noqa: PYI034  (typing.Self is 3.11+)
        """`start()`; the profile is the `as` target."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """`stop()`, also when the block raised (the exception propagates)."""
        self.stop()

    def start(self) -> None:
        """Begin recording: replace the namespaces' callables by timing wrappers and
        install the engine hook. RuntimeError if a profile is already active."""
        global _SESSION
        if _SESSION is not None:
            raise RuntimeError(
                "llgrad.profiler.profile: another profile is already "
                "active; profilers cannot be nested (torch refuses too): "
                "stop the active one first"
            )
        if self._started:
            raise RuntimeError("llgrad.profiler.profile: this profile already ran; make a new one")

        self._started = True
        self._modules_before = set(sys.modules)
        plan = _plan()
        try:
            for owner, attr, orig, wrapper in plan:
                setattr(owner, attr, wrapper)
                self._patched.append((owner, attr, orig, wrapper))
        except BaseException:
            self._restore()
            raise
        self._hook_before = engine.PROFILE_HOOK
        engine.PROFILE_HOOK = _run_node
        self._base = _now()
        self._active = True
        _SESSION = self

    def stop(self) -> None:
        """End recording and put every original back (each only where it is still the
        wrapper the profile put there); then call `on_trace_ready(self)` if given."""
        global _SESSION
        if not self._active:
            return

        self._active = False
        if _SESSION is self:
            _SESSION = None
        try:
            if engine.PROFILE_HOOK is _run_node:
                engine.PROFILE_HOOK = self._hook_before
        finally:
            self._restore()
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _restore(self) -> None:
        for owner, attr, orig, wrapper in reversed(self._patched):
            try:
                here = (
                    owner.__dict__.get(attr)
                    if isinstance(owner, type)
                    else getattr(owner, attr, None)
                )
                if here is wrapper:
                    setattr(owner, attr, orig)
            except Exception:  # noqa: BLE001,S110  (one that refuses: restore the rest)
                pass
        self._patched = []
        # wrappers that modules imported meanwhile bound (`from llgrad import add`)
        for name in set(sys.modules) - self._modules_before:
            mod = sys.modules.get(name)
            d = getattr(mod, "__dict__", None)
            if not isinstance(d, dict):
                continue
            for k, v in list(d.items()):
                orig = _ORIGINALS.get(id(v))
                if orig is not None and _WRAPPERS.get(id(orig), (None, None))[1] is v:
                    try:
                        setattr(mod, k, orig)
                    except Exception:  # noqa: BLE001,S110  (a read-only module: left)
                        pass

    def step(self) -> None:
        """Mark the end of a training step (`torch.profiler.profile.step`): counts
        `step_num`. Without a schedule (llgrad supports none) torch does nothing more."""
        self.step_num += 1

    # -- recording ------------------------------------------------------------------------
    def _stack(self, tid: int) -> list[str]:
        stack = self._stacks.get(tid)
        if stack is None:
            stack = self._stacks[tid] = []
        return stack

    def _timed(
        self,
        name: str,
        kind: str,
        fn: Callable[..., Any],
        args: Sequence[Any],
        kwargs: dict[str, Any] | None,
        fold: bool,
        shape_of: Sequence[Any],
        shape_kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """`fn(*args, **kwargs)` recorded as an event `name` of `kind` (with `fold`, a
        call directly inside an event of the same name is not one of its own); with
        `record_shapes`, the shapes of `shape_of` and of the tensors in `shape_kwargs`."""
        tid = get_ident()
        stack = self._stack(tid)
        if fold and stack and stack[-1] == name:
            return fn(*args, **kwargs) if kwargs else fn(*args)
        shapes = _shapes(shape_of, shape_kwargs) if self.record_shapes else None
        where = _user_stack() if self.with_stack else None
        depth = len(stack)
        stack.append(name)
        t0 = _now()
        try:
            return fn(*args, **kwargs) if kwargs else fn(*args)
        finally:
            t1 = _now()
            del stack[depth:]
            self._events.append((name, kind, t0, t1, tid, depth, shapes, where))

    # -- results --------------------------------------------------------------------------
    def events(self) -> EventList:
        """Every event recorded (so far), ordered by start time, as `FunctionEvent`s with
        their nesting (`cpu_parent`, `cpu_children`, `depth`) and self times."""
        raw = self._events
        if self._built is not None and self._built[0] == len(raw):
            return self._built[1]
        n = len(raw)
        base = self._base
        evs = [
            FunctionEvent(
                i,
                r[0],
                r[1],
                (r[2] - base) / 1000.0,
                (r[3] - base) / 1000.0,
                r[4],
                r[5],
                r[6],
                r[7],
            )
            for i, r in enumerate(raw[:n])
        ]
        # raw events are in the order they ended: on each thread, an event's children
        # (depth + 1) are those that ended since the previous event of its depth ended
        pending: dict[tuple[int, int], list[int]] = {}
        for i in range(n):
            r = raw[i]
            e = evs[i]
            kids = pending.pop((r[4], r[5] + 1), None)
            if kids:
                child_ns = 0
                for k in kids:
                    evs[k].cpu_parent = e
                    child_ns += raw[k][3] - raw[k][2]
                e.cpu_children = [evs[k] for k in kids]
                e.self_cpu_time_total = max(0, (r[3] - r[2]) - child_ns) / 1000.0
            pending.setdefault((r[4], r[5]), []).append(i)
        order = sorted(range(n), key=lambda i: (raw[i][2], raw[i][5]))
        out = EventList()
        for new_id, i in enumerate(order):
            evs[i].id = new_id
            out.append(evs[i])
        self._built = (n, out)
        return out

    def key_averages(
        self, group_by_input_shape: bool = False, group_by_stack_n: int = 0
    ) -> EventList:
        """The events added up per name (torch's `key_averages`): an `EventList` of
        `FunctionEventAvg` (print it with `.table(sort_by=..., row_limit=...)`).
        group_by_input_shape: one row per name and input shapes (needs
        `record_shapes=True`); group_by_stack_n: per name and first n source frames
        (needs `with_stack=True`)."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of every event's self CPU time, in microseconds (torch's): the time
        spent inside recorded events."""
        return self.events().self_cpu_time_total

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the events as a Chrome trace (JSON, `traceEvents` of complete "X"
        events, `ts`/`dur` in microseconds since the profile began), to open in
        chrome://tracing or https://ui.perfetto.dev."""
        pid = os.getpid()
        trace: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "llgrad"}}
        ]
        for e in self.events():
            item: dict[str, Any] = {
                "ph": "X",
                "cat": _CATEGORIES.get(e.kind, e.kind),
                "name": e.name,
                "pid": pid,
                "tid": e.thread,
                "ts": round(e.start_us, 3),
                "dur": round(e.cpu_time_total, 3),
            }
            args: dict[str, Any] = {}
            if e.input_shapes:
                args["Input Dims"] = e.input_shapes
            if e.stack:
                args["Call stack"] = ";".join(e.stack)
            if args:
                item["args"] = args
            trace.append(item)
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms", "traceName": str(path)}, f)


_CATEGORIES = {
    "op": "cpu_op",
    "module": "python_function",
    "backward": "cpu_op",
    "autograd": "cpu_op",
    "optimizer": "user_annotation",
    "compiled": "python_function",
    "user": "user_annotation",
}


class record_function:
    """A named span in the profile: `with record_function("step"): ...` or
    `@record_function("step")` on a function (torch's `record_function`). The events
    inside nest in it, so its self time is what is not in them. Does nothing (beyond a
    check) when no profile is active. `args` is accepted for torch's signature and
    ignored."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._open: list[tuple[Any, int, int, int, Any]] = []

    def __enter__(self) -> record_function:  # noqa: PYI034  (typing.Self is 3.11+)
        """Open the span (when a profile is active); the instance is the `as` target."""
        s = _SESSION
        if s is not None:
            tid = get_ident()
            stack = s._stack(tid)
            where = _user_stack() if s.with_stack else None
            self._open.append((s, tid, len(stack), _now(), where))
            stack.append(self.name)
        else:
            self._open.append((None, 0, 0, 0, None))
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the innermost open span of this instance (recorded also on an
        exception, which propagates)."""
        if not self._open:
            return
        s, tid, depth, t0, where = self._open.pop()
        if s is None:
            return
        t1 = _now()
        stack = s._stacks.get(tid)
        if stack is not None:
            del stack[depth:]
        s._events.append((self.name, "user", t0, t1, tid, depth, None, where))

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Use as a decorator: each call of `fn` is a span named as this one."""
        name, args = self.name, self.args

        @functools.wraps(fn)
        def recorded(*a: Any, **k: Any) -> Any:
            with record_function(name, args):
                return fn(*a, **k)

        return recorded
