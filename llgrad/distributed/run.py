"""`python -m llgrad.distributed.run -n N [options] script.py [args...]`: start N ranks.

A thin wrapper over the MPI library's `mpiexec`: it finds `mpiexec` (beside the Python
interpreter, where `pip install mpich` puts it, then on PATH; `--mpiexec` or
`LLGRAD_MPIEXEC` to choose), runs `mpiexec -n N python script.py args...` (or
`python -m module` with `-m`), gives each rank `--threads` compute threads (default: the
machine's cores divided among the ranks, at least 1) through LLGRAD_NUM_THREADS and
OMP_NUM_THREADS, and exits with the job's exit code. Several machines: pass the MPI
library's own host options after `--mpi-args`, e.g. `--mpi-args "-hosts a,b"`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def find_mpiexec(explicit: str | None = None) -> str:
    """The `mpiexec` to use, or a FileNotFoundError that says how to get one."""
    for candidate in (explicit, os.environ.get("LLGRAD_MPIEXEC")):
        if candidate:
            path = shutil.which(candidate)
            if path is None:
                raise FileNotFoundError(f"llgrad.distributed.run: mpiexec {candidate!r} not found")
            return path
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        raise FileNotFoundError(
            "llgrad.distributed.run: no mpiexec found; pip install "
            "'llgrad[distributed]' (MPICH), or install an MPI library "
            "and put its mpiexec on PATH"
        )
    return found


def command(
    n: int, target: list[str], module: bool = False, mpiexec: str | None = None, mpi_args: str = ""
) -> list[str]:
    """The mpiexec command line that starts `n` ranks of `target`."""
    if n < 1:
        raise ValueError(f"llgrad.distributed.run: -n must be at least 1, got {n}")
    if not target:
        raise ValueError("llgrad.distributed.run: give a script (or -m module) to run")
    py = [sys.executable, "-m"] if module else [sys.executable]
    return [find_mpiexec(mpiexec), *shlex.split(mpi_args), "-n", str(n), *py, *target]


def environment(n: int, threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // n)
    env.setdefault("LLGRAD_NUM_THREADS", str(threads))
    env.setdefault("OMP_NUM_THREADS", str(threads))
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llgrad.distributed.run", description="Run a script on N MPI ranks."
    )
    parser.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    parser.add_argument(
        "-m",
        dest="module",
        action="store_true",
        help="run the target as a module (python -m target)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="compute threads per rank (default: cores / ranks)",
    )
    parser.add_argument("--mpiexec", default=None, help="the mpiexec to use")
    parser.add_argument("--mpi-args", default="", help="extra mpiexec arguments (one string)")
    parser.add_argument("target", nargs=argparse.REMAINDER, help="script.py [args...]")
    ns = parser.parse_args(argv)
    try:
        cmd = command(ns.nproc, ns.target, ns.module, ns.mpiexec, ns.mpi_args)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    return subprocess.call(cmd, env=environment(ns.nproc, ns.threads))


if __name__ == "__main__":
    sys.exit(main())
