"""One (library, workload) cell of llgrad's GPU benchmark, measured in this process.

    python -m benchmarks.gpu_bench --lib {llgrad,torch,torch.compile,jax.jit,copy}
                                   --workload {B1,B2,B6,B8} [--size scaled|quick]
                                   [--json PATH] [--device cuda|cpu] [--budget S]
                                   [--cache DIR] [--tf32]
    python -m benchmarks.gpu_bench --prepare --workload {B1,B2,B6,B8,all} [--size ...]

Run one process per cell (as `benchmarks/peers.py` does on the CPU, and as
`benchmarks/gpu_check.sh` does): libraries never share a process, a GPU context or an
allocator. The record is printed as one JSON line on stdout; with `--json PATH` it is
appended to PATH instead and stdout gets a one-line summary. `benchmarks/gpu_report.py`
renders those lines as a Markdown table.

**Workloads** are `benchmarks.peers`' own: the inputs come from `peers.inputs` (seeded
NumPy, float32) and the functions from `peers.loss_fn` with `peers._llgrad_ops`,
`_torch_ops`, `_jax_ops`; B1, B6 and B8 are value-and-gradient steps (loss and gradients
with respect to every differentiated input), B2 is one SGD step (lr 0.01) of the MLP
784-512-512-10 with cross-entropy, returning the loss and the updated parameters, as
`peers._build_b2` writes it. The sizes are set by substituting `peers.sizes` while the
inputs and the functions are made (B6's layer_norm width comes from it too):

- `scaled` (issue 31): B1 2^26 elements, B2 batch 4096, B6 8192x4096, B8 sequence 4096 x d 64;
- `quick`: tiny sizes for the grid emulator (`LLGRAD_CUDA_EMULATE=1`) and smoke tests.

The seeded NumPy arrays are copied to the device once, before anything is timed. How each
library runs the step:

- `llgrad`: `lg.compile(lg.value_and_grad(f, argnums=...))` on `device="cuda"` tensors (B2:
  `lg.compile` of the training step, the model moved with `.to("cuda")`). Each llgrad
  process compiles into a fresh, empty `LLGRAD_CACHE_DIR`, so `compile_s` is a cold compile;
- `torch`: eager forward and `torch.autograd.grad` on CUDA tensors;
- `torch.compile`: `torch.compile(f)` (default mode), gradients by `torch.autograd.grad`;
- `jax.jit`: `jax.jit(jax.value_and_grad(f, argnums=...))` (B2: the jitted step), completed
  with `jax.block_until_ready`. JAX must see a GPU: a CPU-only jaxlib is an error, not a
  silently slower cell.

float32 matmuls are true float32 everywhere unless `--tf32` is given: torch's
`allow_tf32` stays off and JAX's default matmul precision is set to "highest" (JAX uses
TF32 on such GPUs by default); llgrad's cuBLAS calls use the default math mode (no TF32).

**Timing**: the first call (trace + compile) is timed on its own (`first_call_s`), then the
step is warmed up (at least 3 calls, until two consecutive calls agree within 10%, at most
25 calls or 10 s), then each call is timed alone with the host clock: `perf_counter`, call,
synchronize the device (`lg.cuda.synchronize`, `torch.cuda.synchronize`,
`jax.block_until_ready` of the outputs), `perf_counter`; `median_ms` (with min and max) is
the median of as many calls as fill `--budget` seconds (default 1.5; at least 10 calls).
That is the latency of a step that ends with a synchronization, the same rule for all
three libraries (JAX has no CUDA events). Two further figures: `pipelined_ms`, steps issued
back to back with one synchronization per group (3 groups, the median of their per-step
means), and `events_ms`, the same groups timed with CUDA events (`lg.cuda.Event` /
`torch.cuda.Event`; absent for JAX). `compile_s` is the time the first call and the warm-up
calls took beyond as many steady calls.

**Correctness**: every output (loss and gradients; B2: loss and updated parameters) is
compared with a float64 reference computed on the CPU by torch eager (`peers.reference`,
float64 inputs made from the same float32 arrays), in a separate process (`--prepare`) that
also saves the float32 inputs: both go to `--cache DIR` (default
`$LLGRAD_GPU_BENCH_CACHE` or `<tmp>/llgrad-gpu-bench-cache`), where later processes of the
same workload and size load them instead of drawing 2^27 random numbers again. The error of
an output is max |got - want| / max |want| (relative to that output's largest magnitude);
`rel_errs` lists them, `max_rel_err` is the largest, and `ok` says whether it is within
`--tol` (1e-3, as `peers.check`). Outputs are checked after the first call and (except B2,
whose parameters change every step) again after the timed calls, which catches a replayed
graph that goes wrong; `rel_errs` holds the worse of the two.

**`--lib copy`**: the card's device-to-device copy bandwidth with torch, `dst.copy_(src)` of
a 2 GiB float32 tensor (64 MiB at `--size quick`), bytes read + written over the time, timed
as the workloads are (`gb_s`) and with CUDA events over back-to-back copies (`gb_s_events`).
gpu_report.py sets B1 (which reads x and w and writes both gradients, 16 bytes per element at
least) against it.

**`--device cpu`**: a smoke test without a GPU: torch and JAX run on the CPU, llgrad on its
grid emulator (`LLGRAD_CUDA_EMULATE=1` is set for this process). The numbers mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "llgrad-gpu-bench/1"
LIBS = ("llgrad", "torch", "torch.compile", "jax.jit")
WORKLOADS = ("B1", "B2", "B6", "B8")
TOLERANCE = 1e-3

# The sizes peers.sizes() answers while this module substitutes it.
SIZES: dict[str, dict[str, Any]] = {
    "scaled": {"B1": 1 << 26, "B2": 4096, "B6": (8192, 4096), "B8": (4096, 64)},
    "quick": {"B1": 8192, "B2": 16, "B6": (32, 64), "B8": (32, 16)},
}
COPY_BYTES = {"scaled": 2 << 30, "quick": 64 << 20}
DEFAULT_BUDGET = {"scaled": 1.5, "quick": 0.3}


# --------------------------------------------------------------------------------------
# sizes, inputs and the float64 reference (through benchmarks.peers)
# --------------------------------------------------------------------------------------


def workload_sizes(workload: str, size: str) -> dict[str, Any]:
    """The record's description of a workload's sizes."""
    s = SIZES[size][workload]
    if workload == "B1":
        return {"n": s}
    if workload == "B2":
        return {"batch": s, "layers": [784, 512, 512, 10]}
    if workload == "B6":
        return {"rows": s[0], "cols": s[1]}
    if workload == "B8":
        return {"seq": s[0], "d": s[1]}
    raise KeyError(workload)


def b1_bytes(size: str) -> int:
    """The least traffic of one B1 step: read x and w, write both gradients (float32)."""
    return 4 * 4 * SIZES[size]["B1"]


@contextlib.contextmanager
def peers_sizes(size: str) -> Iterator[Any]:
    """`benchmarks.peers` with its `sizes()` answering this module's `size` table (for both
    `quick` values), so that its input generators and loss functions build that size."""
    from benchmarks import peers

    original = peers.sizes

    def sizes(quick: bool) -> dict[str, Any]:
        return {**original(False), **SIZES[size]}

    peers.sizes = sizes
    try:
        yield peers
    finally:
        peers.sizes = original


def make_inputs(workload: str, size: str) -> dict[str, Any]:
    """The workload's seeded float32 (B2's labels: int64) NumPy inputs at `size`."""
    with peers_sizes(size) as peers:
        return peers.inputs(workload, False)


def make_reference(workload: str, size: str) -> list[Any]:
    """Loss and gradients (B2: loss and updated parameters) in float64, by torch on the CPU."""
    with peers_sizes(size) as peers:
        return [
            __import__("numpy").asarray(o, dtype="float64")
            for o in peers.reference(workload, False)
        ]


def cache_dir(arg: str | None) -> Path:
    """Where prepared inputs and references live (created)."""
    d = Path(
        arg
        or os.environ.get("LLGRAD_GPU_BENCH_CACHE")
        or os.path.join(tempfile.gettempdir(), "llgrad-gpu-bench-cache")
    )
    d.mkdir(parents=True, exist_ok=True)
    return d


def _cache_paths(cache: Path, workload: str, size: str) -> tuple[Path, Path]:
    tag = hashlib.sha1(repr((workload, SIZES[size][workload])).encode()).hexdigest()[:8]
    stem = f"{workload}-{size}-{tag}"
    return cache / f"{stem}-inputs.npz", cache / f"{stem}-ref.npz"


def _save_npz(path: Path, arrays: dict[str, Any]) -> None:
    """np.savez to a temporary name, then an atomic rename (readers never see half a file)."""
    import numpy as np

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)


def prepare(workload: str, size: str, cache: Path) -> dict[str, Any]:
    """Write the workload's inputs and its float64 reference into `cache` (the reference
    needs torch; without it only the inputs are written). Returns what was done."""
    inp, ref = _cache_paths(cache, workload, size)
    out: dict[str, Any] = {"workload": workload, "size": size}
    t0 = time.perf_counter()
    if not inp.exists():
        _save_npz(inp, make_inputs(workload, size))
    out["inputs_s"] = round(time.perf_counter() - t0, 2)
    if not ref.exists():
        t0 = time.perf_counter()
        try:
            import torch

            torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
            outs = make_reference(workload, size)
            _save_npz(ref, {f"a{i}": o for i, o in enumerate(outs)})
            out["reference_s"] = round(time.perf_counter() - t0, 2)
        except Exception as e:  # noqa: BLE001  (reported, the inputs still serve)
            out["reference_error"] = f"{type(e).__name__}: {e}"[:300]
    return out


def load_prepared(
    workload: str, size: str, cache: Path, timeout: float = 300
) -> tuple[dict[str, Any], list[Any] | None, str]:
    """(inputs, reference or None, how the reference was had). Prepares what `cache` lacks in
    a child process (torch's CPU threads never live in the measuring process)."""
    import numpy as np

    inp, ref = _cache_paths(cache, workload, size)
    note = "torch float64 on the CPU (cached)"
    if not (inp.exists() and ref.exists()):
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.gpu_bench",
            "--prepare",
            "--workload",
            workload,
            "--size",
            size,
            "--cache",
            str(cache),
        ]
        try:
            p = subprocess.run(
                cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
            )
            last = (p.stdout.strip().splitlines() or ["{}"])[-1]
            info = json.loads(last) if last.startswith("{") else {}
            note = (
                "torch float64 on the CPU"
                if p.returncode == 0 and "reference_error" not in info
                else f"no reference: {info.get('reference_error') or p.stderr.strip()[-300:]}"
            )
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            note = f"no reference: preparing failed: {type(e).__name__}: {e}"[:300]
    if inp.exists():
        with np.load(inp) as z:
            arrays = {k: z[k] for k in z.files}
    else:
        arrays = make_inputs(workload, size)
    reference = None
    if ref.exists():
        with np.load(ref) as z:
            reference = [z[f"a{i}"] for i in range(len(z.files))]
    elif not note.startswith("no reference"):
        note = "no reference (the prepare step wrote none)"
    return arrays, reference, note


def rel_errors(got: Sequence[Any], want: Sequence[Any]) -> list[float]:
    """max |got - want| / max |want| per output (inf on a shape or count mismatch)."""
    import numpy as np

    if len(got) != len(want):
        return [math.inf]
    errs = []
    for g, w in zip(got, want):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            errs.append(math.inf)
            continue
        if not w.size:
            errs.append(0.0)
            continue
        scale = float(np.max(np.abs(w))) or 1e-300
        err = float(np.max(np.abs(g - w))) / scale
        errs.append(err if math.isfinite(err) else math.inf)
    return errs


# --------------------------------------------------------------------------------------
# per library: the step on the device
# --------------------------------------------------------------------------------------


@dataclass
class Cell:
    """One library's workload on its device.

    `step()` issues one step and returns its outputs (device objects, possibly unfinished);
    `sync(outputs)` waits until they are done; `host(outputs)` copies them to NumPy;
    `events()` returns a fresh (start, end) pair of timing events, or None where the library
    has none."""

    step: Callable[[], list[Any]]
    sync: Callable[[Any], None]
    host: Callable[[list[Any]], list[Any]]
    device_name: str
    version: str
    events: Callable[[], tuple[Any, Any]] | None = None
    peak_memory: Callable[[], int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _b2_module_step(
    t: Any, tensor: Callable[[Any], Any], arrays: dict[str, Any], device: str, compiled: bool
) -> Callable[[], list[Any]]:
    """peers._build_b2's SGD step for llgrad or torch (namespace `t`) on `device`: the
    parameters set from the arrays on the CPU, then the model moved with `.to(device)`."""
    nn = t.nn
    model = nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    with t.no_grad():
        for p, k in zip(model.parameters(), ["w0", "b0", "w1", "b1", "w2", "b2"]):
            p.copy_(tensor(arrays[k]))
    model = model.to(device)
    opt = t.optim.SGD(model.parameters(), lr=0.01)
    x, y = tensor(arrays["x"]).to(device), tensor(arrays["y"]).to(device)

    def raw(model: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = t.compile(raw) if compiled else raw

    def step() -> list[Any]:
        return [fn(model, opt, x, y), *model.parameters()]

    return step


def build_llgrad(workload: str, arrays: dict[str, Any], size: str) -> Cell:
    """llgrad on `device="cuda"` (the real GPU, or the grid emulator when
    LLGRAD_CUDA_EMULATE=1): the compiled value-and-gradient step."""
    import numpy as np

    import llgrad as lg

    if not lg.cuda.is_available():
        raise RuntimeError("llgrad.cuda.is_available() is False")
    if workload == "B2":
        step = _b2_module_step(lg, lg.tensor, arrays, "cuda", compiled=True)
    else:
        with peers_sizes(size) as peers:
            f, wrt, const = peers.loss_fn(workload, peers._llgrad_ops(lg), False)
        vg = lg.compile(lg.value_and_grad(f, argnums=tuple(range(len(wrt)))))
        args = [lg.tensor(arrays[k], device="cuda") for k in wrt + const]

        def step() -> list[Any]:
            value, grads = vg(*args)
            return [value, *grads]

    def host(outs: list[Any]) -> list[Any]:
        return [np.array(o.detach().cpu().numpy(), copy=True) for o in outs]

    def events() -> tuple[Any, Any]:
        return lg.cuda.Event(enable_timing=True), lg.cuda.Event(enable_timing=True)

    emulated = os.environ.get("LLGRAD_CUDA_EMULATE") == "1"
    return Cell(
        step,
        lambda outs: lg.cuda.synchronize(),
        host,
        lg.cuda.get_device_name(),
        getattr(lg, "__version__", "?"),
        events,
        lg.cuda.max_memory_allocated,
        {"emulated": emulated},
    )


def build_torch(
    workload: str, arrays: dict[str, Any], size: str, device: str, compiled: bool, tf32: bool
) -> Cell:
    """torch eager (or torch.compile of the loss) and torch.autograd.grad on `device`."""
    import numpy as np
    import torch

    cuda = device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32

    def tensor(a: Any) -> Any:
        return torch.from_numpy(a.copy())

    if workload == "B2":
        step = _b2_module_step(torch, tensor, arrays, device, compiled)
    else:
        with peers_sizes(size) as peers:
            f, wrt, const = peers.loss_fn(workload, peers._torch_ops(torch), False)
        cf = torch.compile(f) if compiled else f
        base = {k: tensor(arrays[k]).to(device) for k in wrt + const}

        def step() -> list[Any]:
            xs = [base[k].detach().requires_grad_() for k in wrt]
            loss = cf(*xs, *[base[k] for k in const])
            return [loss, *torch.autograd.grad(loss, xs)]

    def sync(outs: Any) -> None:
        if cuda:
            torch.cuda.synchronize()

    def host(outs: list[Any]) -> list[Any]:
        return [np.array(o.detach().cpu().numpy(), copy=True) for o in outs]

    def events() -> tuple[Any, Any]:
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    return Cell(
        step,
        sync,
        host,
        torch.cuda.get_device_name(0) if cuda else _cpu_name(),
        torch.__version__,
        events if cuda else None,
        torch.cuda.max_memory_allocated if cuda else None,
        {"torch_compile_mode": "default"} if compiled else {},
    )


def build_jax(workload: str, arrays: dict[str, Any], size: str, device: str, tf32: bool) -> Cell:
    """jax.jit(jax.value_and_grad(f)) (B2: the jitted SGD step of peers._build_b2)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "highest")
    dev = jax.devices()[0]
    if device == "cuda" and dev.platform != "gpu":
        raise RuntimeError(
            f"JAX sees no GPU (its first device is {dev.platform}: a CPU-only "
            f"jaxlib, or its CUDA plugin failed to load)"
        )
    if workload == "B2":
        with peers_sizes(size) as peers:  # (the CPU runner's jax step, on the GPU)
            step = peers._build_b2("jax.jit", arrays)
    else:
        with peers_sizes(size) as peers:
            f, wrt, const = peers.loss_fn(workload, peers._jax_ops(jax, jnp), False)
        vg = jax.jit(jax.value_and_grad(f, argnums=tuple(range(len(wrt)))))
        args = [jnp.asarray(arrays[k]) for k in wrt + const]

        def step() -> list[Any]:
            value, grads = vg(*args)
            return [value, *grads]

    def host(outs: list[Any]) -> list[Any]:
        return [np.array(o, copy=True) for o in outs]

    return Cell(
        step,
        jax.block_until_ready,
        host,
        f"{dev.device_kind} ({dev.platform})",
        jax.__version__,
        None,
        None,
        {"matmul_precision": "tensorfloat32" if tf32 else "highest"},
    )


# --------------------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------------------


def _timed(cell: Cell) -> tuple[float, list[Any]]:
    t0 = time.perf_counter()
    outs = cell.step()
    cell.sync(outs)
    return time.perf_counter() - t0, outs


def measure(
    cell: Cell, budget: float, min_calls: int = 10, max_calls: int = 20000
) -> dict[str, Any]:
    """Warm-up, per-call median, and back-to-back groups (host clock and, where the library
    has them, CUDA events). The first call has been made by the caller."""
    warm: list[float] = []
    t_start = time.perf_counter()
    while True:
        dt, _ = _timed(cell)
        warm.append(dt)
        settled = len(warm) >= 3 and abs(warm[-1] - warm[-2]) <= 0.1 * max(warm[-1], warm[-2])
        if settled or len(warm) >= 25 or time.perf_counter() - t_start > 10.0:
            break
    times: list[float] = []
    t_start = time.perf_counter()
    while len(times) < min_calls or (
        time.perf_counter() - t_start < budget and len(times) < max_calls
    ):
        times.append(_timed(cell)[0])
    med = statistics.median(times)
    res: dict[str, Any] = {
        "median_ms": med * 1e3,
        "min_ms": min(times) * 1e3,
        "max_ms": max(times) * 1e3,
        "calls": len(times),
        "warmup_s": [round(w, 6) for w in warm],
    }
    # back to back: groups of k steps taking ~budget/6 each, one sync per group
    k = int(min(1000, max(5, budget / 6 / max(med, 1e-6))))
    per_step = []
    for _ in range(3):
        t0 = time.perf_counter()
        outs = None
        for _ in range(k):
            outs = cell.step()
        cell.sync(outs)
        per_step.append((time.perf_counter() - t0) / k)
    res["pipelined_ms"] = statistics.median(per_step) * 1e3
    res["pipelined_group"] = k
    if cell.events is not None:
        try:
            ev_ms = []
            for _ in range(3):
                start, end = cell.events()
                start.record()
                for _ in range(k):
                    outs = cell.step()
                end.record()
                end.synchronize()
                ev_ms.append(start.elapsed_time(end) / k)
            res["events_ms"] = statistics.median(ev_ms)
        except Exception as e:  # noqa: BLE001  (a missing event API is a note)
            res["events_error"] = f"{type(e).__name__}: {e}"[:300]
    return res


def _devices(outs: list[Any]) -> list[str]:
    """Where the outputs live (a compiled step that fell back to the host shows here)."""
    found = set()
    for o in outs:
        dev = getattr(o, "device", None)
        if callable(dev):  # jax.Array.device() in some versions
            try:
                dev = dev()
            except Exception:  # noqa: BLE001
                dev = None
        if dev is None and hasattr(o, "devices"):
            dev = ",".join(sorted(str(d) for d in o.devices()))
        found.add(str(dev) if dev is not None else type(o).__name__)
    return sorted(found)


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def bench(
    lib: str,
    workload: str,
    size: str,
    device: str,
    budget: float,
    cache: Path,
    tol: float,
    tf32: bool,
) -> dict[str, Any]:
    """Build, check and time one cell; the record (without the common header fields)."""
    arrays, reference, ref_note = load_prepared(workload, size, cache)
    if lib == "llgrad":
        import llgrad  # noqa: F401  (imported before the first call's clock)
    elif lib.startswith("torch"):
        import torch  # noqa: F401
    else:
        import jax  # noqa: F401
    t0 = time.perf_counter()
    if lib == "llgrad":
        cell = build_llgrad(workload, arrays, size)
    elif lib in ("torch", "torch.compile"):
        cell = build_torch(workload, arrays, size, device, lib == "torch.compile", tf32)
    elif lib == "jax.jit":
        cell = build_jax(workload, arrays, size, device, tf32)
    else:
        raise KeyError(lib)
    build_s = time.perf_counter() - t0
    rec: dict[str, Any] = {
        "device_name": cell.device_name,
        "version": cell.version,
        "reference": ref_note,
        **cell.extra,
    }
    first, outs = _timed(cell)
    rec["build_s"] = round(build_s, 4)
    rec["first_call_s"] = round(first, 4)
    rec["output_devices"] = _devices(outs)
    got_first = cell.host(outs)  # before B2's next step changes the parameters
    del outs
    rec.update(measure(cell, budget))
    steady = rec["median_ms"] / 1e3
    rec["compile_s"] = round(
        max(0.0, first + sum(rec["warmup_s"]) - (1 + len(rec["warmup_s"])) * steady), 4
    )
    if cell.peak_memory is not None:
        try:
            rec["peak_memory_bytes"] = int(cell.peak_memory())
        except Exception as e:  # noqa: BLE001  (a note, not a failure)
            rec["peak_memory_error"] = f"{type(e).__name__}: {e}"[:200]
    if workload == "B1":
        rec["bytes_moved"] = b1_bytes(size)
        rec["gb_s"] = rec["bytes_moved"] / steady / 1e9
    if reference is not None:
        errs = rel_errors(got_first, reference)
        if workload != "B2":
            _, outs = _timed(cell)
            errs = [max(a, b) for a, b in zip(errs, rel_errors(cell.host(outs), reference))]
        rec["rel_errs"] = [_finite(e) for e in errs]
        worst = max(errs) if errs else 0.0
        rec["max_rel_err"] = _finite(worst)
        rec["ok"] = worst <= tol
        rec["tolerance"] = tol
    else:
        rec["ok"] = None
    return rec


def copy_bench(size: str, device: str, budget: float) -> dict[str, Any]:
    """Device-to-device copy bandwidth with torch: dst.copy_(src), bytes read + written."""
    import torch

    cuda = device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    n = COPY_BYTES[size] // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)

    def sync(outs: Any) -> None:
        if cuda:
            torch.cuda.synchronize()

    def step() -> list[Any]:
        dst.copy_(src)
        return [dst]

    def events() -> tuple[Any, Any]:
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    cell = Cell(
        step,
        sync,
        lambda outs: [],
        torch.cuda.get_device_name(0) if cuda else _cpu_name(),
        torch.__version__,
        events if cuda else None,
    )
    first, _ = _timed(cell)
    rec: dict[str, Any] = {
        "device_name": cell.device_name,
        "version": cell.version,
        "first_call_s": round(first, 4),
        "bytes_per_copy": 8 * n,
        "how": f"torch dst.copy_(src) of {4 * n / 2**30:.3g} GiB, read + written",
    }
    rec.update(measure(cell, budget))
    rec["gb_s"] = 8 * n / (rec["median_ms"] / 1e3) / 1e9
    if "events_ms" in rec:
        rec["gb_s_events"] = 8 * n / (rec["events_ms"] / 1e3) / 1e9
    rec["ok"] = bool(torch.equal(dst[:1024], src[:1024]))
    return rec


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------


def _header(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "library": args.lib,
        "workload": "copy" if args.lib == "copy" else args.workload,
        "size": args.size,
        "device": args.device,
        "sizes": (
            {"bytes": COPY_BYTES[args.size]}
            if args.lib == "copy"
            else workload_sizes(args.workload, args.size)
        ),
        "tf32": args.tf32,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "llgrad_env": {k: v for k, v in os.environ.items() if k.startswith("LLGRAD_GPU")},
        "host": platform.node(),
        "python": platform.python_version(),
    }


def summary(rec: dict[str, Any]) -> str:
    """One line for a log: the cell, its times, its check (or its error)."""
    head = f"{rec.get('workload')} {rec.get('library')}"
    if "error" in rec:
        return f"{head}: error: {rec['error']}"
    parts = [f"{rec['median_ms']:.4g} ms" if "median_ms" in rec else "no time"]
    if "pipelined_ms" in rec:
        parts.append(f"back to back {rec['pipelined_ms']:.4g} ms")
    if "gb_s" in rec:
        parts.append(f"{rec['gb_s']:.4g} GB/s")
    if "first_call_s" in rec:
        parts.append(f"first call {rec['first_call_s']:.3g} s")
    if "max_rel_err" in rec:
        parts.append(
            f"max rel err {rec['max_rel_err']:.2g}"
            if isinstance(rec["max_rel_err"], float)
            else f"max rel err {rec['max_rel_err']}"
        )
    check = {True: "ok", False: "WRONG", None: "unchecked"}[rec.get("ok")]
    return f"{head}: {', '.join(parts)}; {check} [{rec.get('device_name', '?')}]"


def _emit(rec: dict[str, Any], json_path: Path | None) -> None:
    """The record as one JSON line on stdout; with a path, appended there instead and a
    summary line printed."""
    line = json.dumps(rec)
    if json_path is None:
        print(line, flush=True)
        return
    json_path.parent.mkdir(parents=True, exist_ok=True)
    with open(json_path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    print(summary(rec), flush=True)


def _setup_env(args: argparse.Namespace) -> str | None:
    """Environment every library reads at import; returns a fresh llgrad cache to remove."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
        if args.lib == "llgrad":
            os.environ["LLGRAD_CUDA_EMULATE"] = "1"
    if args.lib == "llgrad" and not args.warm_cache:
        fresh = tempfile.mkdtemp(prefix="llgrad-gpu-bench-cache-")
        os.environ["LLGRAD_CACHE_DIR"] = fresh
        return fresh
    return None


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, measure one cell (or prepare), emit the JSON record."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--lib", choices=(*LIBS, "copy"), help="the library (or copy bandwidth)")
    p.add_argument("--workload", choices=(*WORKLOADS, "all"), default=None)
    p.add_argument("--size", choices=tuple(SIZES), default="scaled")
    p.add_argument("--json", type=Path, default=None, help="append the record to this file")
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: torch/JAX on the CPU, llgrad on its grid emulator (smoke test)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of per-call timing (default 1.5; quick: 0.3)",
    )
    p.add_argument("--cache", default=None, help="folder of prepared inputs and references")
    p.add_argument("--tol", type=float, default=TOLERANCE, help="max relative error allowed")
    p.add_argument("--tf32", action="store_true", help="let torch and JAX use TF32 matmuls")
    p.add_argument(
        "--warm-cache",
        action="store_true",
        help="llgrad: keep the user's compile cache (default: a fresh one)",
    )
    p.add_argument(
        "--prepare",
        action="store_true",
        help="only write the inputs and float64 reference into the cache",
    )
    args = p.parse_args(argv)
    faulthandler.enable()  # a crash in a library still leaves a traceback
    cache = cache_dir(args.cache)
    if args.prepare:
        if args.workload is None:
            p.error("--prepare needs --workload")
        for w in WORKLOADS if args.workload == "all" else (args.workload,):
            print(json.dumps(prepare(w, args.size, cache)), flush=True)
        return 0
    if args.lib is None or (args.lib != "copy" and args.workload in (None, "all")):
        p.error("--lib and one --workload are required (copy needs no workload)")
    budget = args.budget if args.budget is not None else DEFAULT_BUDGET[args.size]
    fresh = _setup_env(args)
    rec = _header(args)
    code = 0
    try:
        if args.lib == "copy":
            rec.update(copy_bench(args.size, args.device, budget))
        else:
            rec.update(
                bench(
                    args.lib,
                    args.workload,
                    args.size,
                    args.device,
                    budget,
                    cache,
                    args.tol,
                    args.tf32,
                )
            )
    except BaseException as e:  # noqa: BLE001  (the record says why; Ctrl-C too)
        tb = traceback.format_exc()
        print(tb, file=sys.stderr)
        rec["error"] = (
            f"{type(e).__name__}: {e}".splitlines()[0][:300] if str(e) else type(e).__name__
        )
        rec["traceback"] = tb[-3000:]
        code = 1
    finally:
        if fresh:
            shutil.rmtree(fresh, ignore_errors=True)
    _emit(rec, args.json)
    return code


if __name__ == "__main__":
    sys.exit(main())
