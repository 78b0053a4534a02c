"""B2 under DistributedDataParallel on 1 and 2 ranks: step time, bytes, hidden communication.

    python -m benchmarks.ddp [--steps 60] [--out benchmarks/ddp.md]

The B2 step (MLP 784-512-512-10, ReLU, cross-entropy, SGD lr 0.01) with 64 samples per
rank, eager and compiled (`lg.compile` of the whole step: forward, backward, the
all-reduce, the update), each configuration in its own MPI job started by
`llgrad.distributed.run` with one compute thread per rank (two ranks fill this machine's
two cores; one rank with one thread does the same per-rank work, so the difference
between them is what communication costs).

Per configuration, rank 0 reports the median step time (steps timed one by one after a
barrier and warm-up), the bytes each rank all-reduces per step (every gradient once), and
the median time of one blocking all-reduce of those bytes alone (`comm`). The same job
also times the step under `no_sync()` (identical work, no communication), interleaved in
blocks with the synchronized one, so both see the same contention for the two cores and
the memory bus; the exposed communication is `step - local step` and the share of `comm`
that backward hid is `1 - exposed / comm` (clipped to [0, 1]). A check first: one step's parameters agree on all
ranks, and equal a one-process step on the concatenated batch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PER_RANK = 64


def worker(mode: str, steps: int) -> None:
    import numpy as np
    import llgrad as lg
    import llgrad.distributed as dist
    import llgrad.nn as nn
    import llgrad.nn.functional as F
    from llgrad.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    lg.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    ref = nn.Sequential(
        *[
            type(m)(m.in_features, m.out_features) if isinstance(m, nn.Linear) else nn.ReLU()
            for m in net
        ]
    )
    ref.load_state_dict(net.state_dict())
    model = DDP(net)
    opt = lg.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(1)
    X = lg.tensor(rng.standard_normal((PER_RANK * world, 784)).astype(np.float32))
    Y = lg.tensor(rng.integers(0, 10, PER_RANK * world))
    mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    x, y = X[mine].contiguous(), Y[mine].contiguous()

    def step(x: lg.Tensor, y: lg.Tensor) -> lg.Tensor:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def local_step(x: lg.Tensor, y: lg.Tensor) -> lg.Tensor:
        with model.no_sync():  # the same step without communication
            return step(x, y)

    if mode == "compiled":
        step, local_step = lg.compile(step), lg.compile(local_step)
    # correctness: one step equals one process on the whole batch
    step(x, y)
    ref_opt = lg.optim.SGD(ref.parameters(), lr=0.01)
    F.cross_entropy(ref(X), Y).backward()
    ref_opt.step()
    for p, q in zip(net.parameters(), ref.parameters()):
        if not lg.allclose(p, q, rtol=1e-4, atol=1e-6):
            raise SystemExit(f"rank {rank}: DDP step differs from the one-process step")
    for _ in range(5):
        step(x, y)
        local_step(x, y)
    times: dict = {step: [], local_step: []}
    for block in range(steps // 5):  # blocks of each kind, interleaved
        for fn in (step, local_step):
            dist.barrier()
            for _ in range(5):
                t0 = time.perf_counter()
                fn(x, y)
                times[fn].append(time.perf_counter() - t0)
    numel = sum(p.numel() for p in net.parameters())
    flat = lg.randn(numel)
    comm = []
    for _ in range(max(10, steps // 2)):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        comm.append(time.perf_counter() - t0)
    if rank == 0:
        print(
            "RESULT "
            + json.dumps(
                {
                    "mode": mode,
                    "ranks": world,
                    "step_ms": statistics.median(times[step]) * 1e3,
                    "local_ms": statistics.median(times[local_step]) * 1e3,
                    "comm_ms": statistics.median(comm) * 1e3,
                    "bytes": numel * 4,
                    "buckets": len(model._buckets),
                }
            )
        )


def run(ranks: int, mode: str, steps: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "llgrad.distributed.run",
            "-n",
            str(ranks),
            "--threads",
            "1",
            __file__,
            "--worker",
            mode,
            "--steps",
            str(steps),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=900,
    )
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"benchmark job failed ({ranks} ranks, {mode}):\n{p.stdout}\n{p.stderr}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", default=None)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", default=None)
    ns = ap.parse_args()
    if ns.worker:
        worker(ns.worker, ns.steps)
        return
    rows = []
    for mode in ("eager", "compiled"):
        one, two = run(1, mode, ns.steps), run(2, mode, ns.steps)
        exposed = max(0.0, two["step_ms"] - two["local_ms"])
        comm = two["comm_ms"]
        hidden = min(1.0, max(0.0, 1 - exposed / comm)) if comm > 0 else 1.0
        rows.append((mode, one, two, exposed, comm, hidden))
    lines = [
        "| B2 step, 64 samples per rank | 1 rank (ms) | 2 ranks (ms) | samples/s 1 → 2 "
        "ranks | all-reduced per step | all-reduce alone (ms) | 2 ranks, no_sync (ms) "
        "| exposed (ms) | hidden |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, one, two, exposed, comm, hidden in rows:
        rate1 = PER_RANK / one["step_ms"] * 1e3
        rate2 = 2 * PER_RANK / two["step_ms"] * 1e3
        lines.append(
            f"| {mode} | {one['step_ms']:.2f} | {two['step_ms']:.2f} | "
            f"{rate1:.0f} → {rate2:.0f} ({rate2 / rate1:.2f}×) | "
            f"{two['bytes'] / 1e6:.2f} MB in {two['buckets']} bucket(s) | "
            f"{comm:.2f} | {two['local_ms']:.2f} | {exposed:.2f} | {hidden:.0%} |"
        )
    text = "\n".join(lines)
    print(text)
    if ns.out:
        Path(ns.out).write_text(
            f"# B2 under DDP (`python -m benchmarks.ddp`), {time.strftime('%Y-%m-%d')}\n\n{text}\n"
        )


if __name__ == "__main__":
    main()
