"""`llgrad.utils.benchmark`: `Timer`, `Measurement` and `Compare`, PyTorch's benchmark API.

`Timer(stmt, setup, globals=...)` compiles `stmt` once and times it with
`timeit.default_timer`. `timeit(number)` runs it `number` times in one block;
`blocked_autorange(min_run_time)` first finds a block size that takes at least 10 ms,
then times blocks until `min_run_time` has passed; `adaptive_autorange` keeps timing
until the interquartile range is within `threshold` of the median. Like PyTorch, a Timer
runs its statement with `num_threads` threads (default 1) and restores the previous count
afterwards. A `Measurement` reports per-run times (`times`, `mean`, `median`, `iqr`).
"""

from __future__ import annotations

import statistics
import timeit as _timeit
from typing import Any, Callable, Sequence

import numpy as np
from ...runtime import launch

__all__ = ["Timer", "Measurement", "Compare"]


class Measurement:
    """The times of one Timer: `raw_times` per block of `number_per_run` runs."""

    def __init__(
        self,
        number_per_run: int,
        raw_times: Sequence[float],
        stmt: str,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        num_threads: int = 1,
    ) -> None:
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.stmt = stmt
        self.label = label
        self.sub_label = sub_label
        self.description = description
        self.num_threads = num_threads

    @property
    def times(self) -> list[float]:
        """Seconds per run, one value per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def iqr(self) -> float:
        q1, q3 = np.percentile(self.times, [25, 75])
        return float(q3 - q1)

    @property
    def has_warnings(self) -> bool:
        return len(self.times) < 4 or self.iqr > 0.1 * self.median

    def __repr__(self) -> str:
        title = self.label or self.stmt
        lines = [f"<llgrad.utils.benchmark.Measurement object at {hex(id(self))}>", title]
        if self.sub_label or self.description:
            lines.append(f"  {' '.join(x for x in (self.sub_label, self.description) if x)}")
        lines.append(f"  Median: {_fmt(self.median)}")
        if len(self.times) >= 4:
            lines.append(
                f"  IQR:    {_fmt(self.iqr)} ({len(self.times)} measurements, "
                f"{self.number_per_run} runs per measurement, {self.num_threads} "
                f"thread{'s' if self.num_threads != 1 else ''})"
            )
        else:
            lines.append(
                f"  {len(self.times)} measurement{'s' if len(self.times) != 1 else ''}"
                f", {self.number_per_run} runs per measurement, {self.num_threads} "
                f"thread{'s' if self.num_threads != 1 else ''}"
            )
        return "\n".join(lines)


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.2f} {unit}"
    return f"{seconds / 1e-9:.2f} ns"


class Timer:
    def __init__(
        self,
        stmt: str | Callable[[], Any] = "pass",
        setup: str | Callable[[], Any] = "pass",
        global_setup: str = "",
        timer: Callable[[], float] = _timeit.default_timer,
        globals: dict[str, Any] | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
        language: str = "python",
    ) -> None:
        if language not in ("python", "py"):
            raise ValueError(
                f"Timer: only Python statements can be timed, got language={language!r}"
            )
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"Timer: num_threads must be a positive int, got {num_threads!r}")
        self._stmt = stmt if isinstance(stmt, str) else getattr(stmt, "__name__", "stmt")
        namespace = dict(globals or {})
        if global_setup:
            exec(global_setup, namespace)
        self._timer = _timeit.Timer(stmt, setup, timer, namespace)
        self._label, self._sub_label, self._description = label, sub_label, description
        self._num_threads = num_threads

    def _time(self, number: int) -> float:
        before = launch.threads()
        launch.set_threads(self._num_threads)
        try:
            return self._timer.timeit(number)
        finally:
            launch.set_threads(before)

    def _measurement(self, number: int, times: list[float]) -> Measurement:
        return Measurement(
            number,
            times,
            self._stmt,
            self._label,
            self._sub_label,
            self._description,
            self._num_threads,
        )

    def timeit(self, number: int = 1000000) -> Measurement:
        """Run the statement `number` times (after one warm-up run) as one block."""
        self._time(1)
        return self._measurement(number, [self._time(number)])

    def _block_size(self) -> int:
        number = 1
        while True:
            if self._time(number) >= 0.01 or number >= 1 << 30:
                return number
            number *= 10

    def blocked_autorange(
        self, callback: Callable[[int, float], Any] | None = None, min_run_time: float = 0.2
    ) -> Measurement:
        number = self._block_size()
        times: list[float] = []
        total = 0.0
        while total < min_run_time or len(times) < 1:
            t = self._time(number)
            if callback is not None:
                callback(number, t)
            times.append(t)
            total += t
        return self._measurement(number, times)

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback: Callable[[int, float], Any] | None = None,
    ) -> Measurement:
        number = self._block_size()
        times: list[float] = []
        total = 0.0
        while total < max_run_time:
            t = self._time(number)
            if callback is not None:
                callback(number, t)
            times.append(t)
            total += t
            if total >= min_run_time and len(times) >= 4:
                m = self._measurement(number, times)
                if m.iqr <= threshold * m.median:
                    break
        return self._measurement(number, times)


class Compare:
    """A table of Measurements: one per label, rows by sub_label (or statement), columns
    by description, cells the median time."""

    def __init__(self, results: Sequence[Measurement]) -> None:
        self._results = list(results)

    def __str__(self) -> str:
        out = []
        by_label: dict[Any, list[Measurement]] = {}
        for m in self._results:
            by_label.setdefault(m.label, []).append(m)
        for label, ms in by_label.items():
            cols = list(dict.fromkeys(m.description or "" for m in ms))
            rows = list(dict.fromkeys(m.sub_label or m.stmt for m in ms))
            cell = {(m.sub_label or m.stmt, m.description or ""): m.median for m in ms}
            unit, scale = _unit(min(cell.values()))
            width = max([len(r) for r in rows] + [4])
            out.append(f"[{'-' * 10} {label or ''} {'-' * 10}]")
            out.append(" " * (width + 2) + " | ".join(f"{c:>12}" for c in cols))
            for r in rows:
                vals = [
                    f"{cell[(r, c)] / scale:12.1f}" if (r, c) in cell else " " * 12 for c in cols
                ]
                out.append(f"  {r:<{width}}" + " | ".join(vals))
            out.append(f"Times are in {unit}.")
        return "\n".join(out)

    def print(self) -> None:
        print(str(self))


def _unit(seconds: float) -> tuple[str, float]:
    for unit, scale in (
        ("seconds (s)", 1.0),
        ("milliseconds (ms)", 1e-3),
        ("microseconds (us)", 1e-6),
    ):
        if seconds >= scale:
            return unit, scale
    return "nanoseconds (ns)", 1e-9
