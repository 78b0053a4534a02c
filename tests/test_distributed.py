"""llgrad.distributed on MPI: collectives, DDP, compiled all_reduce, launcher, failures.

Multi-rank tests start real MPI jobs (`python -m llgrad.distributed.run -n N script`) in a
subprocess; each rank checks its own results against NumPy and prints a marker the test
looks for, so a wrong value fails the rank (non-zero exit) and the test. They need the
`distributed` extra (mpi4py and an MPI library); without it they are skipped.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import llgrad as lg
import llgrad.distributed as dist
from llgrad.distributed import run as launcher
from llgrad.utils.data import DistributedSampler

ROOT = Path(__file__).resolve().parent.parent


def _have_mpi() -> bool:
    if importlib.util.find_spec("mpi4py") is None:
        return False
    try:
        launcher.find_mpiexec()
    except FileNotFoundError:
        return False
    return True


needs_mpi = pytest.mark.skipif(not _have_mpi(), reason="needs mpi4py and mpiexec "
                                                      "(pip install 'llgrad[distributed]')")


def run_ranks(n: int, source: str | None, tmp_path: Path, *args: str, timeout: float = 240,
              script: Path | None = None) -> subprocess.CompletedProcess:
    if script is None:
        script = tmp_path / "job.py"
        script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "llgrad.distributed.run", "-n", str(n),
                           "--threads", "1", str(script), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(ROOT))


def _ok(p: subprocess.CompletedProcess, marker: str, ranks: int) -> None:
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(marker) == ranks, p.stdout + p.stderr


# --------------------------------------------------------------------------------------
# Collectives: every dtype, odd sizes, every reduction
# --------------------------------------------------------------------------------------

COLLECTIVES = """
import numpy as np
import llgrad as lg, llgrad.distributed as dist
from llgrad.distributed import ReduceOp
dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"

def data(rank, size, d):
    rng = np.random.default_rng(1000 * rank + size)
    if d == "bool":
        return rng.random(size) < 0.5
    if d in ("int8", "uint8", "int16", "int32", "int64"):
        return rng.integers(0, 7, size).astype(d)
    v = rng.integers(-8, 8, size) / 4           # exact in every float type
    if d.startswith("complex"):
        v = v + 1j * (rng.integers(-8, 8, size) / 4)
    return v.astype({"bfloat16": "float32"}.get(d, d))

RED = {"sum": np.sum, "product": np.prod, "max": np.max, "min": np.min,
       "band": np.bitwise_and.reduce, "bor": np.bitwise_or.reduce,
       "bxor": np.bitwise_xor.reduce}
checked = 0
for d in ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
          "int64", "bool", "complex64", "complex128"]:
    ops = ["sum", "avg", "max", "min", "product"]
    if d.startswith("int") or d == "uint8":
        ops = ["sum", "max", "min", "product", "band", "bor", "bxor"]
    if d == "bool":
        ops = ["sum", "max", "min", "product"]
    if d.startswith("complex"):
        ops = ["sum", "avg", "product"]
    for size in (0, 1, 7, 1001):
        for op in ops:
            mine = data(r, size, d)
            allv = np.stack([data(k, size, d) for k in range(n)])
            if d == "bool":
                ref = allv.any(0) if op in ("sum", "max") else allv.all(0)
            elif op == "avg":
                ref = allv.astype(np.complex128 if d.startswith("complex") else np.float64
                                  ).sum(0) / n
            else:
                ref = RED[op](allv.astype(np.float64) if d in ("float16", "bfloat16")
                              else allv, axis=0)
            t = lg.tensor(mine, dtype=getattr(lg, d))
            work = dist.all_reduce(t, op=getattr(ReduceOp, op.upper()),
                                   async_op=(size == 7))
            if work is not None:
                assert work.wait() and work.is_completed()
            got = t.to(lg.float64 if d == "bfloat16" else t.dtype).numpy()
            want = np.asarray(ref).astype(got.dtype)
            if d in ("float16", "bfloat16"):   # reduced in float32, rounded once
                want = lg.tensor(np.asarray(ref, dtype=np.float32)).to(getattr(lg, d)).to(
                    t.dtype if d == "float16" else lg.float64).numpy()
            assert got.dtype == want.dtype and got.shape == (size,), (d, op, size)
            if op == "avg":       # a division: one rounding into the dtype
                tol = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6,
                       "complex64": 1e-6}.get(d, 1e-15)
                assert np.allclose(got, want, rtol=tol, atol=0), (d, op, size, got, want)
            else:                 # sums of small multiples of 1/4, products, max, min
                assert np.array_equal(got, want), (d, op, size, got[:5], want[:5])
            checked += 1

# broadcast, gathers, reduce-scatter, barrier
for d in ["float32", "int64", "bool", "complex128", "bfloat16"]:
    t = lg.tensor(data(r, 5, d), dtype=getattr(lg, d))
    dist.broadcast(t, src=n - 1)
    assert lg.equal(t, lg.tensor(data(n - 1, 5, d), dtype=getattr(lg, d))), d
out = lg.empty(n * 3)
dist.all_gather_into_tensor(out, lg.arange(3, dtype=lg.float32) + 10 * r)
assert out.tolist() == [10.0 * k + j for k in range(n) for j in range(3)]
parts = [lg.empty(2, dtype=lg.int64) for _ in range(n)]
dist.all_gather(parts, lg.tensor([r, -r]))
assert [p.tolist() for p in parts] == [[k, -k] for k in range(n)]
o = lg.empty(3)
dist.reduce_scatter_tensor(o, lg.arange(3 * n, dtype=lg.float32) * (r + 1))
s = sum(range(1, n + 1))
assert o.tolist() == [s * (3 * r + j) for j in range(3)], o.tolist()
o2 = lg.empty(2, dtype=lg.float64)
dist.reduce_scatter(o2, [lg.full((2,), float(k + r), dtype=lg.float64) for k in range(n)], op=ReduceOp.MAX)
assert o2.tolist() == [float(r + n - 1)] * 2
assert dist.barrier(async_op=True).wait()

# errors name the collective
import pytest
with pytest.raises(ValueError, match="contiguous"):
    dist.all_reduce(lg.zeros(4, 4).t())
with pytest.raises(TypeError, match="AVG"):
    dist.all_reduce(lg.ones(3, dtype=lg.int32), op=ReduceOp.AVG)
with pytest.raises(TypeError, match="complex"):
    dist.all_reduce(lg.ones(3, dtype=lg.complex64), op=ReduceOp.MAX)
with pytest.raises(ValueError, match="one process group"):
    dist.all_reduce(lg.ones(3), group=object())
with pytest.raises(ValueError, match="src"):
    dist.broadcast(lg.ones(3), src=n)
with pytest.raises(ValueError, match="world size"):
    dist.all_gather_into_tensor(lg.empty(1), lg.ones(3))

# the functional all_reduce is differentiable, eagerly and compiled, and they agree
from llgrad.functions._collective import all_reduce
x = (lg.arange(5, dtype=lg.float64) * 0.1 + r).requires_grad_(True)
y = (all_reduce(x * (r + 1)) ** 2).sum()
y.backward()
total = sum((k + 1) * (np.arange(5) * 0.1 + k) for k in range(n))
want = 2 * total * n * (r + 1)     # every rank's cotangent 2S, summed
assert np.allclose(x.grad.numpy(), want, rtol=1e-12), (x.grad, want)

@lg.compile
def f(x):
    return (all_reduce(x.sin() * (r + 1)).exp() * x).sum()
for shape in [(6,), (3, 4)]:
    a = (lg.rand(*shape, dtype=lg.float64) + r).requires_grad_(True)
    b = a.detach().clone().requires_grad_(True)
    va = f(a); va.backward()
    with lg.disable_compile():
        vb = f(b); vb.backward()
    assert abs(va.item() - vb.item()) < 1e-12 * abs(vb.item()), (va, vb)
    assert lg.allclose(a.grad, b.grad, rtol=1e-12, atol=0)
assert f.graph_breaks == []
text = str(f.inspect(a).schedule)
assert "all_reduce sum start" in text and "all_reduce sum wait" in text
# in-place all_reduce and broadcast inside a compiled function become IR ops
@lg.compile
def g(x):
    y = x * 2
    dist.all_reduce(y, op=ReduceOp.AVG)
    z = x.clone()
    dist.broadcast(z, src=0)
    return y, z
y, z = g(lg.full((4,), float(r)))
assert y.tolist() == [float(n - 1)] * 4 and z.tolist() == [0.0] * 4
assert g.graph_breaks == []
print(f"COLLECTIVES OK {checked}")
"""


@needs_mpi
def test_collectives_every_dtype_and_size(tmp_path: Path) -> None:
    p = run_ranks(2, COLLECTIVES, tmp_path)
    _ok(p, "COLLECTIVES OK", 2)
    assert int(re.findall(r"COLLECTIVES OK (\d+)", p.stdout)[0]) > 200


@needs_mpi
def test_collectives_on_three_and_four_ranks(tmp_path: Path) -> None:
    _ok(run_ranks(3, COLLECTIVES, tmp_path), "COLLECTIVES OK", 3)
    _ok(run_ranks(4, COLLECTIVES, tmp_path), "COLLECTIVES OK", 4)


# --------------------------------------------------------------------------------------
# DDP: N ranks equal one process on the concatenated batch
# --------------------------------------------------------------------------------------

def _losses(out: str) -> list[str]:
    return re.findall(r"epoch \d+: mean loss [0-9.]+", out)


def _weights(out: str) -> list[float]:
    return [float(v) for v in re.findall(r"first weights \[(.*)\]", out)[0].split(",")]


@needs_mpi
def test_ddp_example_matches_one_process(tmp_path: Path) -> None:
    """examples/ddp_train.py on 1, 2 and 4 ranks, eager and compiled: the same losses and
    the same parameters after 2 epochs (32 steps)."""
    script = ROOT / "examples" / "ddp_train.py"
    runs = {}
    for n, extra in [(1, ()), (2, ()), (4, ()), (2, ("--compile",))]:
        p = run_ranks(n, None, tmp_path, "--epochs", "2", *extra, script=script)
        assert p.returncode == 0, p.stdout + p.stderr
        runs[(n, extra)] = p.stdout
    base = runs[(1, ())]
    assert len(_losses(base)) == 2
    for key, out in runs.items():
        assert _losses(out) == _losses(base), (key, out, base)
        assert _weights(out) == pytest.approx(_weights(base), rel=1e-5, abs=1e-7), key


DDP_DETAILS = """
import numpy as np, pytest
import llgrad as lg, llgrad.distributed as dist, llgrad.nn as nn
from llgrad.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()

# parameters broadcast from rank 0 at wrap time; tiny buckets (one per parameter)
lg.manual_seed(r)
net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
ddp = DDP(net, bucket_cap_mb=1e-5)
assert len(ddp._buckets) == 4
w0 = net[0].weight.detach().clone()
dist.broadcast(w0, src=0)
assert lg.equal(w0, net[0].weight)

lg.manual_seed(7)
X, Y = lg.randn(4 * n, 4), lg.randn(4 * n, 2)
def loss_of(model, x, y):
    return ((model(x) - y) ** 2).mean()

# no_sync: two local backward passes accumulate, the third (synchronized) averages the sum
mine = slice(4 * r, 4 * r + 4)
with ddp.no_sync():
    loss_of(ddp, X[mine], Y[mine]).backward()
    local = [p.grad.clone() for p in net.parameters()]
    loss_of(ddp, X[mine], Y[mine]).backward()
loss_of(ddp, X[mine], Y[mine]).backward()
ref = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
ref.load_state_dict(net.state_dict())
for k in range(n):
    part = slice(4 * k, 4 * k + 4)
    (3 * loss_of(ref, X[part], Y[part]) / n).backward()
for p, q in zip(net.parameters(), ref.parameters()):
    assert lg.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6), (p.grad, q.grad)

# a parameter without a gradient: torch's error, or zeros with find_unused_parameters
class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(3, 1), nn.Linear(3, 1)
    def forward(self, x):
        return self.a(x)
m = DDP(Two())
with pytest.raises(RuntimeError, match="find_unused_parameters"):
    m(lg.ones(2, 3)).sum().backward()
m2 = DDP(Two(), find_unused_parameters=True)
m2(lg.ones(2, 3) * (r + 1)).sum().backward()
assert m2.module.b.weight.grad is None
assert m2.module.a.weight.grad.tolist() == [[sum(2.0 * (k + 1) for k in range(n)) / n] * 3]
print("DDP DETAILS OK")
"""


@needs_mpi
def test_ddp_no_sync_buckets_and_unused_parameters(tmp_path: Path) -> None:
    _ok(run_ranks(2, DDP_DETAILS, tmp_path), "DDP DETAILS OK", 2)


# --------------------------------------------------------------------------------------
# Failures end the job with a clear error
# --------------------------------------------------------------------------------------

@needs_mpi
def test_a_failing_rank_ends_the_job(tmp_path: Path) -> None:
    src = """
    import llgrad as lg, llgrad.distributed as dist
    dist.init_process_group("mpi")
    if dist.get_rank() == 1:
        raise ValueError("rank one broke")
    dist.all_reduce(lg.ones(3))       # rank 0 waits here: the abort must end it
    print("UNREACHABLE")
    """
    p = run_ranks(2, src, tmp_path, timeout=120)
    assert p.returncode != 0
    assert "rank one broke" in p.stderr and "aborting the job" in p.stderr, p.stderr
    assert "UNREACHABLE" not in p.stdout


@needs_mpi
def test_a_late_rank_times_out_then_completes(tmp_path: Path) -> None:
    src = """
    import time, datetime
    import llgrad as lg, llgrad.distributed as dist
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30))
    t = lg.ones(3)
    if dist.get_rank() == 1:
        time.sleep(3)
    work = dist.all_reduce(t, async_op=True)
    if dist.get_rank() == 0:
        try:
            work.wait(timeout=0.5)
            raise SystemExit("expected a timeout")
        except dist.DistTimeoutError as e:
            assert "all_reduce" in str(e) and "0.5 s" in str(e), e
    work.wait()
    assert t.tolist() == [2.0, 2.0, 2.0]
    print("TIMEOUT OK")
    """
    _ok(run_ranks(2, src, tmp_path, timeout=120), "TIMEOUT OK", 2)


# --------------------------------------------------------------------------------------
# In one process: no MPI needed
# --------------------------------------------------------------------------------------

def test_uninitialized_group_raises() -> None:
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(lg.ones(2))
    from llgrad.functions._collective import all_reduce
    with pytest.raises(RuntimeError, match="init_process_group"):
        all_reduce(lg.ones(2))
    with pytest.raises(ValueError, match="backend"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_distributed_sampler_shares() -> None:
    data = list(range(10))
    for drop_last in (False, True):
        shares = [list(DistributedSampler(data, num_replicas=3, rank=k, shuffle=True,
                                          seed=4, drop_last=drop_last)) for k in range(3)]
        assert len({len(s) for s in shares}) == 1
        flat = [i for s in shares for i in s]
        if drop_last:
            assert len(flat) == 9 and len(set(flat)) == 9
        else:
            assert len(flat) == 12 and set(flat) == set(data)
    s = DistributedSampler(data, num_replicas=2, rank=1, shuffle=False)
    assert list(s) == [1, 3, 5, 7, 9] and len(s) == 5
    s = DistributedSampler(data, num_replicas=2, rank=0, seed=1)
    first = list(s)
    assert list(s) == first
    s.set_epoch(1)
    assert list(s) != first and sorted(list(s) + list(
        DistributedSampler(data, num_replicas=2, rank=1, seed=1))) != []
    with pytest.raises(ValueError, match="Invalid rank"):
        DistributedSampler(data, num_replicas=2, rank=2)


def test_launcher_command(tmp_path: Path) -> None:
    if not _have_mpi():
        pytest.skip("needs mpiexec")
    cmd = launcher.command(3, ["train.py", "--lr", "0.1"], mpi_args="-bind-to core")
    assert cmd[1:] == ["-bind-to", "core", "-n", "3", sys.executable, "train.py", "--lr",
                       "0.1"]
    assert launcher.command(2, ["pkg.mod"], module=True)[-3:] == [sys.executable, "-m",
                                                                  "pkg.mod"]
    with pytest.raises(ValueError, match="at least 1"):
        launcher.command(0, ["x.py"])
    with pytest.raises(ValueError, match="script"):
        launcher.command(2, [])
    env = launcher.environment(2, None)
    assert int(env["OMP_NUM_THREADS"]) >= 1
