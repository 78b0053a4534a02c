"""Where an eager training step spends its time, op by op: llgrad against torch.

    python -m benchmarks.profile_ops B9            # both libraries, top 12 ops each
    python -m benchmarks.profile_ops B11 --rows 20 --steps 5 --libs "llgrad eager"

Each library runs in its own process (as every benchmark here does), pinned to 2
threads, builds the workload of `benchmarks/models.py` (B9-B12), runs a few warm-up
steps, then profiles `--steps` steps: `torch.profiler.profile` on torch's side,
`llgrad.profiler.profile` on llgrad's (the same table layout, sorted by self CPU time).
Times include each profiler's own cost per event (1-3 us), so compare the shares of
ops more than the totals, and take step times from `benchmarks.peers`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBS = ("llgrad eager", "torch")


def _child(lib: str, workload: str, steps: int, rows: int) -> None:
    from benchmarks.peers import pin_threads

    pin_threads(2)  # (before either library is imported)
    from benchmarks import models

    if lib == "torch":
        import torch

        torch.set_num_threads(2)
        from torch.profiler import profile
    else:
        from llgrad.profiler import profile  # type: ignore[assignment]
    step = models.build(lib, workload, False)
    for _ in range(3):
        step()
    with profile() as prof:
        for _ in range(steps):
            step()
    print(f"### {lib}, {workload}: {steps} steps\n")
    print("```")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))
    print("```\n")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_ops",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("workload", help="B9, B10, B11, B12 or B12/foreach")
    p.add_argument("--libs", default=",".join(LIBS), help="comma list of " + ", ".join(LIBS))
    p.add_argument("--steps", type=int, default=3, help="profiled steps")
    p.add_argument("--rows", type=int, default=12, help="rows of each table")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child is not None:
        _child(a.child, a.workload, a.steps, a.rows)
        return
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for lib in (s.strip() for s in a.libs.split(",") if s.strip()):
        if lib not in LIBS:
            raise SystemExit(f"unknown library {lib!r}: choose from {', '.join(LIBS)}")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.profile_ops",
                a.workload,
                "--steps",
                str(a.steps),
                "--rows",
                str(a.rows),
                "--child",
                lib,
            ],
            env=env,
            cwd=ROOT,
            check=True,
        )


if __name__ == "__main__":
    main()
