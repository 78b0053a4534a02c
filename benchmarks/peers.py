"""llgrad against its peers, each (library, workload) in its own fresh process.

    python -m benchmarks.peers [--quick] [--only B1,B3] [--libs llgrad,jax] [--repeats N]
                               [--out benchmarks/peers.md]

Why one process per cell: PyTorch's OpenMP workers keep spinning after each call and take
the two cores from whatever runs next in the same process, so timing libraries interleaved
in one process inflates everyone measured after torch (jax.jit's B3 read 341 us that way;
alone it takes 10 us). Here every cell is `python -m benchmarks.peers --worker LIB WORKLOAD`:
threads are fixed to the same count for every library before it is imported
(OMP/MKL/OpenBLAS/LLGRAD variables, `torch.set_num_threads`, XLA's Eigen pool follows the
affinity), the workload is built, its outputs are checked against a float64 reference
computed by torch in another process (float32 within 1e-3 of the largest value), then it
is warmed up and timed: median, min and max of many calls that materialize every result.
A cell whose check fails shows "wrong" instead of a time.

Workloads are BENCHMARKS.md's: B1 (fused elementwise, 4M; llgrad also through
`lg.compile(lg.value_and_grad(f))`, as jax.jit runs it, and against its bandwidth floor: 16
bytes per element over the copy bandwidth measured in the same run), B2 (MLP training step),
B3 (30-op chain on 64 floats: per-call latency; llgrad also through value_and_grad),
B4 (cold compile of the B2 step in a fresh process with an empty cache, a warm start with
the cache full, and import time), B6 (softmax + layer_norm), B7 (2000-op chain: steady time,
and compile time at 250/500/1000/2000 ops), B8 (attention), and eager per-op latency on
tiny tensors. Ratios compare llgrad compiled with the fastest peer of the same run.
The real-model workloads B9 (CNN), B10 (transformer LM), B11 (LSTM) and B12 (AdamW over
resnet18's parameters) are defined in `benchmarks/models.py`, which says how they are
written and checked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks import models

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
THREADS = 2
LIBS = ("llgrad", "llgrad eager", "torch", "torch.compile", "jax.jit")
PEERS = ("torch", "torch.compile", "jax.jit")
CYCLE = ("sin", "mul", "add", "tanh", "sin", "mul", "sub", "tanh")


# --------------------------------------------------------------------------------------
# the workloads, written once over a small namespace of each library's functions
# --------------------------------------------------------------------------------------


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"B1": 1 << 14, "B6": (64, 128), "B7": 64, "B8": (32, 16), "B2": 16}
    return {"B1": 4_000_000, "B6": (2048, 1024), "B7": 2000, "B8": (256, 64), "B2": 128}


def inputs(workload: str, quick: bool) -> dict[str, Any]:
    """The workload's float32 inputs, the same in every process (seeded)."""
    import numpy as np

    rng = np.random.default_rng(0)
    s = sizes(quick)
    f32 = np.float32
    if workload == "B1":
        n = s["B1"]
        return {"x": rng.standard_normal(n).astype(f32), "w": rng.standard_normal(n).astype(f32)}
    if workload in ("B3", "B7"):
        n = 64 if workload == "B3" else 1024
        return {"x": rng.standard_normal(n).astype(f32)}
    if workload == "B6":
        r, c = s["B6"]
        return {
            "X": rng.standard_normal((r, c)).astype(f32),
            "g": rng.standard_normal(c).astype(f32),
            "b": rng.standard_normal(c).astype(f32),
            "T": rng.standard_normal((r, c)).astype(f32),
        }
    if workload == "B8":
        q, d = s["B8"]
        return {k: rng.standard_normal((q, d)).astype(f32) for k in ("Q", "K", "V", "T")}
    if workload == "B2":
        batch = s["B2"]
        dims = [(784, 512), (512, 512), (512, 10)]
        out = {
            "x": rng.standard_normal((batch, 784)).astype(f32),
            "y": rng.integers(0, 10, batch).astype(np.int64),
        }
        for i, (a, b) in enumerate(dims):
            bound = 1 / np.sqrt(a)
            out[f"w{i}"] = rng.uniform(-bound, bound, (b, a)).astype(f32)  # torch's layout
            out[f"b{i}"] = rng.uniform(-bound, bound, b).astype(f32)
        return out
    raise KeyError(workload)


def chain(ops: Any, x: Any, n: int) -> Any:
    y = x
    for i in range(n):
        k = CYCLE[i % 8]
        if k == "sin":
            y = ops.sin(y)
        elif k == "mul":
            y = y * 1.01
        elif k == "add":
            y = y + 0.1
        elif k == "sub":
            y = y - 0.1
        else:
            y = ops.tanh(y)
    return y.sum()


def loss_fn(
    workload: str, ops: Any, quick: bool
) -> tuple[Callable[..., Any], list[str], list[str]]:
    """(f, differentiated input names, constant input names) of a gradient workload."""
    if workload == "B1":
        return (
            lambda x, w: (ops.tanh(x * w + 0.5) * ops.sigmoid(x) + ops.exp(-x * x)).sum(),
            ["x", "w"],
            [],
        )
    if workload == "B3":
        return (lambda x: chain(ops, x, 30)), ["x"], []
    if workload == "B7":
        n = sizes(quick)["B7"]
        return (lambda x: chain(ops, x, n)), ["x"], []
    if workload == "B6":
        c = sizes(quick)["B6"][1]
        return (
            lambda X, g, b, T: (ops.layer_norm(ops.softmax(X) * g + b, c) * T).sum(),
            ["X", "g", "b"],
            ["T"],
        )
    if workload == "B8":
        return (
            lambda Q, K, V, T: ((ops.softmax((Q @ ops.t(K)) / 8.0) @ V) * T).sum(),
            ["Q", "K", "V"],
            ["T"],
        )
    raise KeyError(workload)


class _Ops:
    """sin, tanh, sigmoid, exp, softmax (last axis), layer_norm (last axis, eps 1e-5), t."""

    def __init__(self, **fns: Callable[..., Any]):
        self.__dict__.update(fns)


def _llgrad_ops(lg: Any) -> _Ops:
    F = lg.nn.functional
    return _Ops(
        sin=lg.sin,
        tanh=lg.tanh,
        sigmoid=lg.sigmoid,
        exp=lg.exp,
        softmax=lambda x: lg.softmax(x, -1),
        t=lambda x: x.t(),
        layer_norm=lambda x, c: F.layer_norm(x, (c,), eps=1e-5),
    )


def _torch_ops(torch: Any) -> _Ops:
    F = torch.nn.functional
    return _Ops(
        sin=torch.sin,
        tanh=torch.tanh,
        sigmoid=torch.sigmoid,
        exp=torch.exp,
        softmax=lambda x: torch.softmax(x, -1),
        t=lambda x: x.t(),
        layer_norm=lambda x, c: F.layer_norm(x, (c,), eps=1e-5),
    )


def _jax_ops(jax: Any, jnp: Any) -> _Ops:
    def layer_norm(x: Any, c: int) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5)

    return _Ops(
        sin=jnp.sin,
        tanh=jnp.tanh,
        sigmoid=jax.nn.sigmoid,
        exp=jnp.exp,
        softmax=lambda x: jax.nn.softmax(x, -1),
        t=lambda x: x.T,
        layer_norm=layer_norm,
    )


# --------------------------------------------------------------------------------------
# per library: build a zero-argument step returning its outputs (loss, grads...)
# --------------------------------------------------------------------------------------


def _build_grad(
    lib: str, workload: str, arrays: dict[str, Any], quick: bool, mode: str = ""
) -> Callable[[], list[Any]]:
    if lib.startswith("llgrad"):
        import llgrad as lg

        f, wrt, const = loss_fn(workload, _llgrad_ops(lg), quick)
        names = wrt + const
        base = {k: lg.tensor(arrays[k]) for k in names}
        if mode == "value_and_grad":
            vg = lg.compile(lg.value_and_grad(f, argnums=tuple(range(len(wrt)))))

            def step() -> list[Any]:
                value, grads = vg(*[base[k] for k in names])
                return [value, *grads]

            return step
        cf = f if lib == "llgrad eager" else lg.compile(f)

        def step() -> list[Any]:
            xs = [base[k].detach().requires_grad_() for k in wrt]
            loss = cf(*xs, *[base[k] for k in const])
            return [loss, *lg.autograd.grad(loss, xs)]

        return step
    if lib in ("torch", "torch.compile"):
        import torch

        f, wrt, const = loss_fn(workload, _torch_ops(torch), quick)
        cf = torch.compile(f) if lib == "torch.compile" else f
        base = {k: torch.from_numpy(arrays[k].copy()) for k in wrt + const}

        def step() -> list[Any]:
            xs = [base[k].detach().requires_grad_() for k in wrt]
            loss = cf(*xs, *[base[k] for k in const])
            return [loss, *torch.autograd.grad(loss, xs)]

        return step
    if lib == "jax.jit":
        import jax
        import jax.numpy as jnp

        f, wrt, const = loss_fn(workload, _jax_ops(jax, jnp), quick)
        vg = jax.jit(jax.value_and_grad(f, argnums=tuple(range(len(wrt)))))
        args = [jnp.asarray(arrays[k]) for k in wrt + const]

        def step() -> list[Any]:
            value, grads = vg(*args)
            jax.block_until_ready(grads)
            return [value, *grads]

        return step
    raise KeyError(lib)


def _build_b2(lib: str, arrays: dict[str, Any]) -> Callable[[], list[Any]]:
    """One SGD step (lr 0.01) of the MLP; returns the loss and the updated parameters."""
    names = ["w0", "b0", "w1", "b1", "w2", "b2"]
    if lib.startswith("llgrad") or lib.startswith("torch"):
        if lib.startswith("llgrad"):
            import llgrad as t

            tensor = t.tensor
        else:
            import torch as t

            tensor = lambda a: t.from_numpy(a.copy())  # noqa: E731
        nn = t.nn
        model = nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )
        with t.no_grad():
            for p, k in zip(model.parameters(), names):
                p.copy_(tensor(arrays[k]))
        opt = t.optim.SGD(model.parameters(), lr=0.01)
        x, y = tensor(arrays["x"]), tensor(arrays["y"])

        def raw(model: Any, opt: Any, x: Any, y: Any) -> Any:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        fn = raw
        if lib == "llgrad":
            fn = t.compile(raw)
        elif lib == "torch.compile":
            fn = t.compile(raw)

        def step() -> list[Any]:
            loss = fn(model, opt, x, y)
            return [loss.item(), *model.parameters()]  # .item(): the step has finished

        return step
    if lib == "jax.jit":
        import jax
        import jax.numpy as jnp

        params = [jnp.asarray(arrays[k]) for k in names]
        x, y = jnp.asarray(arrays["x"]), jnp.asarray(arrays["y"])

        def loss(params: list[Any], x: Any, y: Any) -> Any:
            h = x
            for i in range(3):
                h = h @ params[2 * i].T + params[2 * i + 1]
                if i < 2:
                    h = jax.nn.relu(h)
            logp = jax.nn.log_softmax(h)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1))

        @jax.jit
        def train(params: list[Any], x: Any, y: Any) -> Any:
            value, grads = jax.value_and_grad(loss)(params, x, y)
            return value, [p - 0.01 * g for p, g in zip(params, grads)]

        state = {"params": params}

        def step() -> list[Any]:
            value, state["params"] = train(state["params"], x, y)
            jax.block_until_ready(state["params"])
            return [value, *state["params"]]

        return step
    raise KeyError(lib)


def build(lib: str, workload: str, quick: bool) -> Callable[[], list[Any]]:
    """The zero-argument step of one cell: it runs the workload once and returns its
    outputs."""
    if workload in models.WORKLOADS:
        return models.build(lib, workload, quick)
    arrays = inputs("B2" if workload == "B2" else workload.split("/")[0], quick)
    if workload == "B2":
        return _build_b2(lib, arrays)
    base, _, mode = workload.partition("/")
    return _build_grad(lib, base, arrays, quick, mode)


def reference(workload: str, quick: bool) -> list[Any]:
    """torch eager in float64: loss and gradients (B2: loss and parameters after a step;
    B9-B12: `models.reference`)."""
    if workload in models.WORKLOADS:
        return models.reference(workload, quick, to_numpy)
    import numpy as np
    import torch

    torch.set_default_dtype(torch.float64)
    arrays = {
        k: (v.astype(np.float64) if v.dtype == np.float32 else v)
        for k, v in inputs(workload.split("/")[0], quick).items()
    }
    if workload == "B2":
        return to_numpy(_build_b2("torch", arrays)())
    base = workload.split("/")[0]
    f, wrt, const = loss_fn(base, _torch_ops(torch), quick)
    xs = [torch.from_numpy(arrays[k]).requires_grad_() for k in wrt]
    loss = f(*xs, *[torch.from_numpy(arrays[k]) for k in const])
    return [loss.detach().numpy()] + [g.numpy() for g in torch.autograd.grad(loss, xs)]


def to_numpy(outputs: list[Any]) -> list[Any]:
    """Any library's outputs as NumPy arrays (outside the timed calls)."""
    import numpy as np

    out = []
    for o in outputs:
        if hasattr(o, "detach"):
            o = o.detach()
        out.append(np.array(o.numpy() if hasattr(o, "numpy") else o, dtype=np.float64))
    return out


def check(got: list[Any], want: list[Any]) -> str | None:
    """None if every output agrees (float32: within 1e-3 of the largest magnitude)."""
    import numpy as np

    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, expected {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        err = float(np.max(np.abs(g - w))) if w.size else 0.0
        if not np.isfinite(err) or err > 1e-3 * scale:
            return f"output {i}: max error {err:.3g} (scale {scale:.3g})"
    return None


# --------------------------------------------------------------------------------------
# worker: one (library, workload) in this process
# --------------------------------------------------------------------------------------


def pin_threads(threads: int) -> None:
    """Before any library is imported: every pool at `threads`."""
    for var in (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "LLGRAD_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    ):
        os.environ[var] = str(threads)
    try:
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    except (AttributeError, OSError):
        pass


def time_calls(
    step: Callable[[], Any], budget: float, min_calls: int = 5, max_calls: int = 2000
) -> dict[str, Any]:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_calls or (
        time.perf_counter() - start < budget and len(times) < max_calls
    ):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"median": times[len(times) // 2], "min": times[0], "max": times[-1], "n": len(times)}


def worker(lib: str, workload: str, quick: bool, budget: float, ref_path: str | None) -> dict:
    if lib.startswith("torch"):
        import torch

        torch.set_num_threads(THREADS)
    elif lib == "jax.jit":
        import jax  # noqa: F401  (imported outside the first call's time)
    else:
        import llgrad  # noqa: F401
    t0 = time.perf_counter()
    step = build(lib, workload, quick)
    model = workload in models.WORKLOADS
    if model:
        # B9-B12: checked over models.CHECK_STEPS steps, since a compiled step may compile
        # on its second call (llgrad runs the call that creates the optimizer's state
        # eagerly); the compile time is then the first CHECK_STEPS calls minus as many
        # steady ones, for every library alike
        build_s = time.perf_counter() - t0
        got, call_s = models.run_checked(step, to_numpy)
        first = sum(call_s)
    else:
        out = step()  # the first call: traces and compiles
        first = time.perf_counter() - t0
    result: dict[str, Any] = {"first_s": first}
    if model:
        result["calls_s"] = call_s
        result["build_s"] = build_s
        breaks = getattr(getattr(step, "compiled", None), "graph_breaks", None)
        if lib == "llgrad" and breaks is not None:
            result["graph_breaks"] = [str(b) for b in breaks][:5]
    if ref_path:
        import numpy as np

        with np.load(ref_path) as ref:
            want = [ref[f"a{i}"] for i in range(len(ref.files))]
        problem = (
            check(got, want) or models.check_updates(workload, quick, got, want)
            if model
            else check(to_numpy(out), want)
        )
        if problem:
            result["wrong"] = problem
            return result
    for _ in range(3):
        step()
    result.update(time_calls(step, budget))
    calls = models.CHECK_STEPS if model else 1
    result["compile_s"] = max(0.0, first - calls * result["median"])
    return result


def eager_op_worker(lib: str, op: str, budget: float) -> dict:
    """Per-op latency of an eager op on a tiny tensor (4 floats)."""
    if lib == "torch":
        import torch as t

        t.set_num_threads(THREADS)
    else:
        import llgrad as t
    x, y = t.ones(4), t.ones(4)
    fns = {
        "x + y": lambda: x + y,
        "x * 2.0": lambda: x * 2.0,
        "exp(x)": lambda: t.exp(x),
        "x.sum()": lambda: x.sum(),
    }
    fn = fns[op]
    for _ in range(1000):
        fn()
    n = 20000 if budget > 0.2 else 2000
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best.append((time.perf_counter() - t0) / n)
    best.sort()
    return {"median": best[2], "min": best[0], "max": best[-1], "n": 5 * n}


def cold_start_worker(mode: str, quick: bool) -> dict:
    """B4: import time, first call of the compiled B2 step minus a steady step."""
    t0 = time.perf_counter()
    import llgrad  # noqa: F401

    import_s = time.perf_counter() - t0
    step = build("llgrad", "B2", quick)
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    steady = time_calls(step, 0.5)["median"]
    return {
        "import_s": import_s,
        "first_s": first,
        "compile_s": max(0.0, first - steady),
        "median": first - steady,
        "min": first - steady,
        "max": first - steady,
        "n": 1,
    }


def jax_cold_worker(quick: bool) -> dict:
    step = build("jax.jit", "B2", quick)
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    steady = time_calls(step, 0.5)["median"]
    return {
        "median": first - steady,
        "min": first - steady,
        "max": first - steady,
        "n": 1,
        "compile_s": first - steady,
    }


# --------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------


def _spawn(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 900
) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.peers", "--worker", *args]
    env = dict(os.environ if env is None else env)
    # as on a user's machine: imports read cached bytecode (pip writes it at install;
    # some sandboxes set PYTHONDONTWRITEBYTECODE, which makes every import compile)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": tail[:200]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def bandwidth_worker(quick: bool) -> dict[str, Any]:
    """Memory copy bandwidth (bytes read + written per second) of a 160 MB copy into a
    preallocated buffer: torch's `copy_` on the pinned threads where torch is installed
    (NumPy's copy runs on one core), else NumPy's."""
    import numpy as np

    n = (1 << 20) if quick else 40_000_000
    if _installed("torch"):
        import torch

        a, b = torch.ones(n), torch.empty(n)
        how = f"torch copy_ of {4 * n / 1e6:.0f} MB, {THREADS} threads"

        def copy() -> None:
            b.copy_(a)
    else:
        a, b = np.ones(n, np.float32), np.empty(n, np.float32)
        how = f"NumPy copyto of {4 * n / 1e6:.0f} MB, one thread"

        def copy() -> None:
            np.copyto(b, a)

    t = time_calls(copy, 0.5 if quick else 2.0)
    return {"gb_s": 8 * n / t["median"] / 1e9, "how": how, **t}


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


GRAD_WORKLOADS = ("B1", "B2", "B3", "B6", "B7", "B8", *models.WORKLOADS)
EAGER_ONLY = {"B12/foreach"}  # foreach=True is an eager option


def plan(only: set[str] | None, libs: set[str]) -> list[tuple[str, str]]:
    cells = []
    for w in GRAD_WORKLOADS:
        if only and w not in only and w.split("/")[0] not in only:
            continue
        for lib in LIBS:
            if lib in libs and (w not in EAGER_ONLY or lib in ("llgrad eager", "torch")):
                cells.append((lib, w))
        if w in ("B1", "B3") and "llgrad" in libs:
            cells.append(("llgrad", f"{w}/value_and_grad"))
    return cells


def _llgrad_gemm() -> str:
    """Whose float32 gemm llgrad calls here ("llgrad", "mkl" or "openblas"), asked in a
    child process (this one runs no library)."""
    code = "from llgrad.runtime import blas; print(blas.backend())"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run(quick: bool, only: set[str] | None, libs: set[str], budget: float) -> dict[str, Any]:
    have_torch = _installed("torch")
    libs = {
        l
        for l in libs
        if not (
            (l.startswith("torch") and not have_torch) or (l == "jax.jit" and not _installed("jax"))
        )
    }
    out: dict[str, Any] = {
        "cells": {},
        "libs": sorted(libs),
        "quick": quick,
        "threads": THREADS,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "llgrad_gemm": _llgrad_gemm(),
    }
    cells = plan(only, libs)
    refs: dict[str, str] = {}
    tmp = tempfile.mkdtemp(prefix="llgrad-peers-")
    for k, (lib, w) in enumerate(cells):
        base = w.split("/")[0]
        if have_torch and base not in refs:
            path = os.path.join(tmp, f"{base}.npz")
            r = _spawn(["reference", base, path] + (["--quick"] if quick else []))
            refs[base] = path if "error" not in r else ""
        print(f"[{k + 1}/{len(cells)}] {w} {lib} ...", end=" ", flush=True, file=sys.stderr)
        env = dict(os.environ)
        cache = tempfile.mkdtemp(prefix="llgrad-cache-", dir=tmp)
        env["LLGRAD_CACHE_DIR"] = cache  # compile times with an empty cache
        args = [lib, w, str(budget)] + (["--ref", refs[base]] if refs.get(base) else [])
        res = _spawn(args + (["--quick"] if quick else []), env)
        out["cells"][f"{w}|{lib}"] = res
        print(_cell(res), file=sys.stderr)
    if not only or "B1" in only:
        out["bandwidth"] = _spawn(["bandwidth", "x"] + (["--quick"] if quick else []))
        print(f"copy bandwidth {out['bandwidth'].get('gb_s')} GB/s", file=sys.stderr)
    if not only or "B4" in only:
        out["B4"] = _b4(quick, libs, tmp)
    if not only or "B7c" in only:
        out["B7 compile"] = _b7_compile(quick, tmp) if "llgrad" in libs else {}
    if not only or "eager" in only:
        out["eager"] = _eager(libs, budget)
    return out


def _b4(quick: bool, libs: set[str], tmp: str) -> dict[str, Any]:
    cache = tempfile.mkdtemp(prefix="llgrad-b4-", dir=tmp)
    env = dict(os.environ, LLGRAD_CACHE_DIR=cache)
    q = ["--quick"] if quick else []
    res = {
        "llgrad cold": _spawn(["cold", "cold"] + q, env),
        "llgrad warm": _spawn(["cold", "warm"] + q, env),
    }
    if "jax.jit" in libs:
        res["jax.jit cold"] = _spawn(["jaxcold", "x"] + q)
    print(f"B4 {json.dumps({k: v.get('compile_s') for k, v in res.items()})}", file=sys.stderr)
    return res


def _b7_compile(quick: bool, tmp: str) -> dict[str, Any]:
    res = {}
    for n in (50, 100) if quick else (250, 500, 1000, 2000):
        env = dict(os.environ, LLGRAD_CACHE_DIR=tempfile.mkdtemp(dir=tmp))
        res[str(n)] = _spawn(["b7compile", str(n)] + (["--quick"] if quick else []), env)
        print(f"B7 compile {n} ops: {res[str(n)].get('compile_s')}", file=sys.stderr)
    return res


def _eager(libs: set[str], budget: float) -> dict[str, Any]:
    res = {}
    for op in ("x + y", "x * 2.0", "exp(x)", "x.sum()"):
        for lib in ("llgrad", "torch"):
            if lib == "torch" and "torch" not in libs:
                continue
            res[f"{op}|{lib}"] = _spawn(["eager", lib, op, str(budget)])
    return res


def _cell(r: dict[str, Any], unit: float = 1e3) -> str:
    if "error" in r:
        return "error"
    if "wrong" in r:
        return "wrong"
    return f"{r['median'] * unit:.3g}"


def _order(workload: str) -> tuple[int, str]:
    """Workloads in numeric order (B2 before B10), variants after their base."""
    digits = "".join(ch for ch in workload.split("/")[0] if ch.isdigit())
    return (int(digits) if digits else 0, workload)


def render(res: dict[str, Any]) -> str:
    libs = [l for l in LIBS if l in res["libs"]]
    lines = [
        "# llgrad against its peers (one process per library and workload)",
        "",
        f"{res['date']}, {res['threads']} threads for every library"
        + (" (QUICK MODE: tiny sizes, numbers mean nothing)" if res["quick"] else "")
        + ". Median ms of one iteration (loss and gradients; B2, B9-B11: one training"
        " step; B12: one AdamW step over resnet18's parameters, gradients given;"
        " benchmarks/models.py);"
        " 'ratio' is llgrad compiled over the fastest peer."
        + (f" llgrad's float32 gemm: {res['llgrad_gemm']}." if res.get("llgrad_gemm") else "")
        + (
            f" OPENBLAS_CORETYPE={res['openblas_coretype']} is set in the environment"
            " (it selects SciPy's OpenBLAS kernels, which llgrad calls for complex"
            " products and gemv, and for float gemms when its gemm is 'openblas');"
            " torch and jax bring their own gemm."
            if res.get("openblas_coretype")
            else ""
        ),
        "",
        "| workload | " + " | ".join(libs) + " | ratio |",
        "|---|" + "---|" * (len(libs) + 1),
    ]
    workloads = sorted({k.split("|")[0] for k in res["cells"]}, key=_order)
    for w in workloads:
        row, peers = [], []
        for lib in libs:
            r = res["cells"].get(f"{w}|{lib}")
            row.append("–" if r is None else _cell(r))
            if r and lib in PEERS and "median" in r and "wrong" not in r:
                peers.append(r["median"])
        mine = res["cells"].get(f"{w}|llgrad", {})
        ratio = (
            f"{mine['median'] / min(peers):.2f}"
            if peers and "median" in mine and "wrong" not in mine
            else "–"
        )
        lines.append(f"| {w} | " + " | ".join(row) + f" | {ratio} |")
    notes = []
    for w in workloads:
        for lib in libs:
            r = res["cells"].get(f"{w}|{lib}") or {}
            why = r.get("error") or r.get("wrong")
            if why:
                notes.append(f"- {w} {lib}: {'error' if 'error' in r else 'wrong'}: {why}")
            if r.get("graph_breaks"):
                notes.append(f"- {w} {lib}: graph breaks: {'; '.join(r['graph_breaks'])}")
    if notes:
        lines += ["", "Failures and graph breaks:", ""] + notes
    compiled = [w for w in workloads if f"{w}|llgrad" in res["cells"] and w != "B1/value_and_grad"]
    if compiled:
        lines += [
            "",
            "First call minus a steady call (trace and compile), s"
            + (
                "; B9-B12: the first two calls minus two steady calls (llgrad compiles"
                " the step on its second call)"
                if any(w in models.WORKLOADS for w in compiled)
                else ""
            )
            + ":",
            "",
            "| workload | " + " | ".join(libs) + " | ratio |",
            "|---|" + "---|" * (len(libs) + 1),
        ]
        for w in compiled:
            got = {lib: res["cells"].get(f"{w}|{lib}", {}).get("compile_s") for lib in libs}
            peers = [v for lib, v in got.items() if lib in ("torch.compile", "jax.jit") and v]
            ratio = f"{got['llgrad'] / min(peers):.2f}" if peers and got.get("llgrad") else "–"
            lines.append(
                f"| {w} | "
                + " | ".join("–" if v is None else f"{v:.3g}" for v in got.values())
                + f" | {ratio} |"
            )
    bw = res.get("bandwidth", {})
    if "gb_s" in bw:
        n = 1 << 14 if res["quick"] else 4_000_000
        floor = 16 * n / (bw["gb_s"] * 1e9)
        lines += [
            "",
            f"Copy bandwidth {bw['gb_s']:.1f} GB/s ({bw['how']}); B1's floor (16 "
            f"bytes per element) {floor * 1e3:.2f} ms:",
        ]
        for w in ("B1", "B1/value_and_grad"):
            r = res["cells"].get(f"{w}|llgrad", {})
            if "median" in r:
                lines.append(f"- llgrad {w}: {r['median'] / floor:.2f}x the floor")
    if res.get("B4"):
        lines += ["", "B4 (compiled B2 step, fresh process): first call minus a steady step, s", ""]
        for k, v in res["B4"].items():
            extra = f", import {v['import_s']:.3f} s" if "import_s" in v else ""
            lines.append(f"- {k}: {v.get('compile_s', v.get('error'))}{extra}")
    if res.get("B7 compile"):
        lines += [
            "",
            "B7 compile time (empty cache), s: "
            + ", ".join(
                f"{n} ops {v.get('compile_s', v.get('error'))}"
                for n, v in res["B7 compile"].items()
            ),
        ]
    if res.get("eager"):
        lines += ["", "Eager per-op latency on 4 floats, us (llgrad / torch):", ""]
        for op in ("x + y", "x * 2.0", "exp(x)", "x.sum()"):
            a, b = res["eager"].get(f"{op}|llgrad"), res["eager"].get(f"{op}|torch")
            lines.append(f"- `{op}`: {_cell(a, 1e6) if a else '–'} / {_cell(b, 1e6) if b else '–'}")
    return "\n".join(lines) + "\n"


def chart(res: dict[str, Any], path: Path) -> None:
    """A bar chart of one run: per workload, each library's median over the fastest
    library's (1.0 is the fastest; lower is better), saved as PNG."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("--chart needs matplotlib (pip install -e '.[examples]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    libs = [l for l in LIBS if l in res["libs"]]
    workloads = sorted({k.split("|")[0] for k in res["cells"]}, key=_order)
    rows = []
    for w in workloads:
        med = {l: res["cells"].get(f"{w}|{l}", {}).get("median") for l in libs}
        med = {
            l: v for l, v in med.items() if v and "wrong" not in res["cells"].get(f"{w}|{l}", {})
        }
        if med:
            best = min(med.values())
            rows.append((w, {l: v / best for l, v in med.items()}))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(rows)), 4))
    width = 0.8 / max(1, len(libs))
    for k, lib in enumerate(libs):
        xs = [i + k * width for i, (_, r) in enumerate(rows) if lib in r]
        ys = [r[lib] for _, r in rows if lib in r]
        ax.bar(xs, ys, width, label=lib)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
    ax.set_xticklabels([w for w, _ in rows])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("median / fastest (lower is better)")
    ax.set_title(f"llgrad and its peers, {res['date']}, {res['threads']} threads")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _worker_main(argv: list[str]) -> int:
    pin_threads(THREADS)
    quick = "--quick" in argv
    argv = [a for a in argv if a != "--quick"]
    kind = argv[0]
    if kind == "reference":
        import numpy as np

        outs = reference(argv[1], quick)
        np.savez(argv[2], **{f"a{i}": np.asarray(o) for i, o in enumerate(outs)})
        res: dict[str, Any] = {"ok": True}
    elif kind == "cold":
        res = cold_start_worker(argv[1], quick)
    elif kind == "jaxcold":
        res = jax_cold_worker(quick)
    elif kind == "b7compile":
        import llgrad as lg

        x = lg.tensor(inputs("B7", quick)["x"], requires_grad=True)
        f = lg.compile(lambda x: chain(lg, x, int(argv[1])))
        t0 = time.perf_counter()
        lg.autograd.grad(f(x), [x])
        first = time.perf_counter() - t0
        steady = time_calls(lambda: lg.autograd.grad(f(x), [x]), 0.3)["median"]
        res = {"compile_s": first - steady, "median": steady, "min": steady, "max": steady, "n": 1}
    elif kind == "eager":
        res = eager_op_worker(argv[1], argv[2], float(argv[3]))
    elif kind == "bandwidth":
        res = bandwidth_worker(quick)
    else:
        lib, workload, budget = argv[0], argv[1], float(argv[2])
        ref = argv[argv.index("--ref") + 1] if "--ref" in argv else None
        try:
            res = worker(lib, workload, quick, budget, ref)
        except Exception as e:  # the cell shows "error"; the JSON says why
            import traceback

            res = {
                "error": f"{type(e).__name__}: {e}"[:1000],
                "where": traceback.format_exc()[-3000:],
            }
    print(json.dumps(res))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--worker":
        return _worker_main(argv[1:])
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.peers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes, short timing budgets")
    p.add_argument(
        "--only", default="", help="comma list of B1,B2,B3,B4,B6,B7,B7c,B8,B9,B10,B11,B12,eager"
    )
    p.add_argument("--libs", default=",".join(LIBS), help="comma list of " + ", ".join(LIBS))
    p.add_argument("--budget", type=float, default=None, help="seconds of timing per cell")
    p.add_argument("--out", type=Path, default=None, help="Markdown file (also .json)")
    p.add_argument("--chart", type=Path, default=None, help="bar chart of the run (PNG)")
    p.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="render (and chart) a saved run instead of measuring",
    )
    args = p.parse_args(argv)
    if args.from_json:
        res = json.loads(args.from_json.read_text())
        print(render(res))
        if args.chart:
            chart(res, args.chart)
        return 0
    only = set(args.only.split(",")) - {""} or None
    libs = set(args.libs.split(",")) - {""}
    budget = args.budget if args.budget is not None else (0.2 if args.quick else 2.0)
    res = run(args.quick, only, libs, budget)
    text = render(res)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    if args.chart:
        chart(res, args.chart)
        print(f"chart: {args.chart}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
