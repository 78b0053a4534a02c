"""Timing helpers shared by the benchmark suites, and the machine's physical limits.

Every suite times the same way so its numbers can sit side by side:

* big calls (`time_calls`): warm up first (the first llgrad call compiles or loads a
  kernel), then time each call on its own with `time.perf_counter`, keeping the result
  alive until the clock stops (so the time includes making and filling the result, and
  not freeing it); report the median, min and max of many calls;
* tiny calls (`time_per_op`): one `perf_counter` pair costs about as much as the op, so time
  blocks of `number` ops with `timeit` (the statement is compiled into the loop, no lambda
  call in between) and divide; report median, min and max over the blocks.

The libraries compared on one workload are timed interleaved (a call or block of each in
turn), so background load on a shared machine lands on all of them alike. The garbage
collector is paused while timing: a collection landing in one sample would make that sample
an outlier unrelated to the op.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import gc
import importlib
import os
import platform
import statistics
import time
import timeit
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Iterator

import numpy as np


@dataclass(frozen=True)
class Stats:
    """Median, min and max of `n` samples, in seconds."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> "Stats":
        if not samples:
            raise ValueError("Stats.of: no samples")
        return cls(statistics.median(samples), min(samples), max(samples), len(samples))

    def to_json(self) -> dict[str, float | int]:
        return {"median_s": self.median, "min_s": self.min, "max_s": self.max, "n": self.n}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect once, then keep the collector off for the block (restored afterwards)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _warm(
    fns: dict[str, Callable[[], Any]], warmup: int
) -> tuple[dict[str, Callable[[], Any]], dict[str, BaseException]]:
    """Run each callable `warmup` times; the ones that raise are set aside with their error."""
    ok: dict[str, Callable[[], Any]] = {}
    failed: dict[str, BaseException] = {}
    for name, fn in fns.items():
        try:
            for _ in range(warmup):
                fn()
        except Exception as exc:  # noqa: BLE001  (a failing peer is a result to report)
            failed[name] = exc
        else:
            ok[name] = fn
    return ok, failed


def time_calls(
    fns: dict[str, Callable[[], Any]],
    *,
    warmup: int = 2,
    min_repeats: int = 5,
    max_repeats: int = 100,
    budget_s: float = 1.0,
) -> dict[str, Stats | BaseException]:
    """Time single calls of each callable, interleaved: one call of each per round.

    Interleaving makes a burst of background load (a shared machine) hit every library
    alike instead of whichever happened to be running. Rounds continue until at least
    `min_repeats` and then until `budget_s` per callable has passed or `max_repeats`.
    A result is dropped only after the clock stops. A callable that raises gets its
    exception instead of a Stats.
    """
    ok, failed = _warm(fns, warmup)
    samples: dict[str, list[float]] = {name: [] for name in ok}
    budget = budget_s * max(1, len(ok))
    with gc_paused():
        start = time.perf_counter()
        for done in range(1, max_repeats + 1):
            for name, fn in list(ok.items()):
                try:
                    t0 = time.perf_counter()
                    result = fn()
                    t1 = time.perf_counter()
                except Exception as exc:  # noqa: BLE001
                    failed[name] = exc
                    del ok[name]
                    continue
                del result
                samples[name].append(t1 - t0)
            if done >= min_repeats and time.perf_counter() - start >= budget:
                break
    out: dict[str, Stats | BaseException] = dict(failed)
    out.update({name: Stats.of(samples[name]) for name in ok})
    return out


def time_per_op(
    stmts: dict[str, tuple[str, dict[str, Any]]], *, number: int, repeats: int, warmup: int = 200
) -> dict[str, Stats | BaseException]:
    """Seconds per execution of each `(stmt, namespace)`, from `repeats` blocks of `number`
    executions, the blocks of different entries interleaved.

    `timeit` compiles `stmt` into its loop, so the only overhead added to each op is one
    iteration of a `for` loop (~10 ns), negligible beside a microsecond-scale op.
    """
    timers = {name: timeit.Timer(stmt, globals=ns) for name, (stmt, ns) in stmts.items()}
    ok, failed = _warm(
        {name: functools.partial(t.timeit, number=warmup) for name, t in timers.items()}, 1
    )
    blocks: dict[str, list[float]] = {name: [] for name in ok}
    with gc_paused():
        for _ in range(repeats):
            for name in ok:
                blocks[name].append(timers[name].timeit(number=number) / number)
    out: dict[str, Stats | BaseException] = dict(failed)
    out.update({name: Stats.of(blocks[name]) for name in ok})
    return out


def time_one(fn: Callable[[], Any], *, warmup: int, repeats: int) -> Stats:
    """`repeats` single calls of one callable (for the limits); errors propagate."""
    result = time_calls(
        {"fn": fn}, warmup=warmup, min_repeats=repeats, max_repeats=repeats, budget_s=0.0
    )["fn"]
    if isinstance(result, BaseException):
        raise result
    return result


# -- peers --------------------------------------------------------------------------------


def load_torch(enabled: bool, threads: int) -> ModuleType | None:
    """PyTorch with `threads` intra-op threads, or None when disabled or not installed."""
    if not enabled:
        return None
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


# -- machine description -----------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _read_first_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip()
    except OSError:
        return None


def _version(module: str) -> str | None:
    try:
        return str(importlib.import_module(module).__version__)
    except ImportError:
        return None


def machine_info(threads: int, torch: ModuleType | None) -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, thread counts, library versions."""
    import llvmlite.binding as llvm

    return {
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "mem_total_gib": _mem_total_gib(),
        "threads": threads,
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "openblas_num_threads_env": os.environ.get("OPENBLAS_NUM_THREADS"),
        # PyTorch asks for transparent huge pages for big CPU buffers only when this is 1;
        # NumPy (and so llgrad, which allocates through NumPy) asks by default
        "torch_thp_mem_alloc_env": os.environ.get("THP_MEM_ALLOC_ENABLE"),
        "transparent_hugepage": _read_first_line("/sys/kernel/mm/transparent_hugepage/enabled"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "llgrad": _version("llgrad"),
        "numpy": np.__version__,
        "torch": torch.__version__ if torch is not None else None,
        "llvmlite": _version("llvmlite"),
        "llvm": ".".join(map(str, llvm.llvm_version_info)),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


# -- physical limits ----------------------------------------------------------------------


@dataclass(frozen=True)
class LimitSizes:
    """Problem sizes of the limit measurements (smaller in --quick mode)."""

    copy_elements: int
    copy_repeats: int
    gemm_n: int
    gemm_repeats: int


def _bandwidth(stats: Stats, nbytes: int) -> dict[str, Any]:
    return {
        "bytes": nbytes,
        "time": stats.to_json(),
        "gbps_best": nbytes / stats.min / 1e9,
        "gbps_median": nbytes / stats.median / 1e9,
    }


def measure_limits(sizes: LimitSizes, torch: ModuleType | None) -> dict[str, Any]:
    """Copy bandwidth and float32 GEMM throughput, measured now, on this machine.

    Copy bandwidth counts bytes read plus bytes written (a copy of B bytes moves 2B), the
    same convention as the suites' effective GB/s, so their ratio is a fraction of the
    limit. `np.copyto` runs on one thread; torch's `copy_` (when installed) uses all the
    benchmark's threads and shows what the memory system gives to more than one core.
    """
    rng = np.random.default_rng(0)
    src = rng.standard_normal(sizes.copy_elements, dtype=np.float32)
    dst = np.empty_like(src)
    moved = 2 * src.nbytes
    out: dict[str, Any] = {}
    out["copy_numpy"] = _bandwidth(
        time_one(lambda: np.copyto(dst, src), warmup=2, repeats=sizes.copy_repeats), moved
    )
    if torch is not None:
        tsrc, tdst = torch.from_numpy(src), torch.from_numpy(dst)
        out["copy_torch"] = _bandwidth(
            time_one(lambda: tdst.copy_(tsrc), warmup=2, repeats=sizes.copy_repeats), moved
        )
    n = sizes.gemm_n
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    stats = time_one(lambda: np.matmul(a, b, out=c), warmup=1, repeats=sizes.gemm_repeats)
    flops = 2 * n**3
    out["gemm_numpy"] = {
        "n": n,
        "flops": flops,
        "time": stats.to_json(),
        "gflops_best": flops / stats.min / 1e9,
        "gflops_median": flops / stats.median / 1e9,
    }
    return out
