"""What the machine offers this process: the CPUs it may run on. Kept below every layer so
that code generation (its compile workers) and the runtime (its launch threads) ask one
place."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask where the platform has one
    (Linux), else every CPU (macOS, Windows)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1
