"""Compiled workloads from BENCHMARKS.md: B1, B2, B3, B4, B5, side by side with peers.

Each workload computes the loss and its gradients (B5: the Hessian), timed as one
steady-state call after warm-up, materializing every result. Peers that are installed are
measured in the same run: PyTorch eager, `torch.compile` (inductor) and `jax.jit`.
B4 (cold start) runs in fresh processes so that nothing is cached in memory: the first
call of the compiled B2 step minus one steady step, with an empty and with a warm on-disk
cache, plus `import llgrad` time.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Callable

import numpy as np

from .common import Stats, time_calls

CYCLE = ("sin", "mul", "add", "tanh", "sin", "mul", "sub", "tanh")


def _chain(lib: Any, x: Any, n: int) -> Any:
    """The B3/B7 cycle applied n times (lib provides sin and tanh)."""
    y = x
    for i in range(n):
        k = CYCLE[i % 8]
        if k == "sin":
            y = lib.sin(y)
        elif k == "mul":
            y = y * 1.01
        elif k == "add":
            y = y + 0.1
        elif k == "sub":
            y = y - 0.1
        else:
            y = lib.tanh(y)
    return y.sum()


def _b1(lib: Any, x: Any, w: Any) -> Any:
    return (lib.tanh(x * w + 0.5) * lib.sigmoid(x) + lib.exp(-x * x)).sum()


def _rosenbrock(x: Any) -> Any:
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


# --------------------------------------------------------------------------------------
# per-library implementations: each returns a zero-argument callable doing one iteration
# --------------------------------------------------------------------------------------

def _llgrad_grad_fns(fn: Callable[..., Any], arrays: list[np.ndarray]) -> dict[str, Callable]:
    import llgrad as lg
    leaves = [lg.tensor(a) for a in arrays]

    def eager() -> Any:
        xs = [t.detach().requires_grad_() for t in leaves]
        loss = fn(lg, *xs)
        grads = lg.autograd.grad(loss, xs)
        return loss.item(), grads

    compiled_fn = lg.compile(lambda *xs: fn(lg, *xs))

    def compiled() -> Any:
        xs = [t.detach().requires_grad_() for t in leaves]
        loss = compiled_fn(*xs)
        grads = lg.autograd.grad(loss, xs)
        return loss.item(), grads
    return {"llgrad eager": eager, "llgrad compiled": compiled}


def _torch_grad_fns(torch: Any, fn: Callable[..., Any], arrays: list[np.ndarray]
                    ) -> dict[str, Callable]:
    leaves = [torch.from_numpy(a.copy()) for a in arrays]

    def make(f: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> Any:
            xs = [t.detach().requires_grad_() for t in leaves]
            loss = f(*xs)
            grads = torch.autograd.grad(loss, xs)
            return loss.item(), grads
        return run
    out = {"torch eager": make(lambda *xs: fn(torch, *xs))}
    try:
        out["torch.compile"] = make(torch.compile(lambda *xs: fn(torch, *xs)))
    except Exception as exc:  # noqa: BLE001
        out["torch.compile"] = _failing(exc)
    return out


def _jax_grad_fns(fn: Callable[..., Any], arrays: list[np.ndarray]) -> dict[str, Callable]:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    import types
    jax.config.update("jax_enable_x64", True)
    lib = types.SimpleNamespace(sin=jnp.sin, tanh=jnp.tanh, exp=jnp.exp,
                                sigmoid=jax.nn.sigmoid)
    args = [jnp.asarray(a) for a in arrays]
    vg = jax.jit(jax.value_and_grad(lambda *xs: fn(lib, *xs), argnums=tuple(range(len(args)))))

    def run() -> Any:
        loss, grads = vg(*args)
        jax.block_until_ready(grads)
        return float(loss), grads
    return {"jax.jit": run}


def _failing(exc: BaseException) -> Callable[[], Any]:
    def run() -> Any:
        raise exc
    return run


def _time(fns: dict[str, Callable], budget: float) -> dict[str, Any]:
    results = time_calls(fns, warmup=3, min_repeats=7, max_repeats=2000, budget_s=budget)
    out = {}
    for name, r in results.items():
        out[name] = {"error": f"{type(r).__name__}: {r}"} if isinstance(r, BaseException) \
            else r.to_json()
    return out


def workload_grad(name: str, fn: Callable[..., Any], arrays: list[np.ndarray], torch: Any,
                  budget: float) -> dict[str, Any]:
    fns = _llgrad_grad_fns(fn, arrays)
    if torch is not None:
        fns.update(_torch_grad_fns(torch, fn, arrays))
    fns.update(_jax_grad_fns(fn, arrays))
    return {"name": name, "times": _time(fns, budget)}


def _libs(torch: Any) -> dict[str, Any]:
    """Per-library spellings of the few ops B6/B8 need (softmax, layer_norm, matmul)."""
    import types

    import llgrad as lg
    out = {"llgrad": types.SimpleNamespace(
        softmax=lambda x: lg.softmax(x, -1),
        layer_norm=lambda x: lg.nn.functional.layer_norm(x, (x.shape[-1],), eps=1e-5),
        t=lambda x: x.transpose(-2, -1))}
    if torch is not None:
        out["torch"] = types.SimpleNamespace(
            softmax=lambda x: torch.softmax(x, -1),
            layer_norm=lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],), eps=1e-5),
            t=lambda x: x.transpose(-2, -1))
    try:
        import jax
        import jax.numpy as jnp

        def ln(x: Any) -> Any:
            m = x.mean(-1, keepdims=True)
            v = ((x - m) ** 2).mean(-1, keepdims=True)
            return (x - m) / jnp.sqrt(v + 1e-5)
        out["jax"] = types.SimpleNamespace(softmax=lambda x: jax.nn.softmax(x, -1),
                                           layer_norm=ln, t=lambda x: jnp.swapaxes(x, -2, -1))
    except ImportError:
        pass
    return out


def _grad_workload(name: str, make: Callable[[Any, Any], Callable[..., Any]],
                   arrays: list[np.ndarray], const: np.ndarray, torch: Any,
                   budget: float) -> dict[str, Any]:
    """`make(lib_ops, T)` gives the loss function of the differentiable arrays."""
    libs = _libs(torch)
    import llgrad as lg
    fns: dict[str, Callable] = {}
    t_lg = lg.tensor(const)
    f_lg = make(libs["llgrad"], t_lg)
    fns.update(_llgrad_grad_fns(lambda lib, *xs: f_lg(*xs), arrays))
    if torch is not None:
        t_t = torch.from_numpy(const.copy())
        f_t = make(libs["torch"], t_t)
        fns.update(_torch_grad_fns(torch, lambda lib, *xs: f_t(*xs), arrays))
    if "jax" in libs:
        import jax
        import jax.numpy as jnp
        f_j = make(libs["jax"], jnp.asarray(const))
        args = [jnp.asarray(a) for a in arrays]
        vg = jax.jit(jax.value_and_grad(f_j, argnums=tuple(range(len(args)))))

        def run() -> Any:
            loss, grads = vg(*args)
            jax.block_until_ready(grads)
            return float(loss), grads
        fns["jax.jit"] = run
    return {"name": name, "times": _time(fns, budget)}


def b6(torch: Any, budget: float, quick: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    n, d = (256, 128) if quick else (2048, 1024)
    x = rng.standard_normal((n, d)).astype(np.float32)
    g = rng.standard_normal(d).astype(np.float32)
    b = rng.standard_normal(d).astype(np.float32)
    t = rng.standard_normal((n, d)).astype(np.float32)

    def make(ops: Any, T: Any) -> Callable[..., Any]:
        return lambda X, G, B: (ops.layer_norm(ops.softmax(X) * G + B) * T).sum()
    return _grad_workload(f"B6 sum(layer_norm(softmax(X)*g+b)*T), X {n}x{d}, grads X, g, b",
                          make, [x, g, b], t, torch, budget)


def b8(torch: Any, budget: float, quick: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    s, d = (64, 32) if quick else (256, 64)
    q, k, v = (rng.standard_normal((s, d)).astype(np.float32) for _ in range(3))
    t = rng.standard_normal((s, d)).astype(np.float32)

    def make(ops: Any, T: Any) -> Callable[..., Any]:
        return lambda Q, K, V: ((ops.softmax((Q @ ops.t(K)) / 8.0) @ V) * T).sum()
    return _grad_workload(f"B8 attention softmax(QK^T/8)V, seq {s}, d {d}, grads Q, K, V",
                          make, [q, k, v], t, torch, budget)


def b7(torch: Any, quick: bool) -> dict[str, Any]:
    """Compile time and steady time of an n-op chain on (1024,) as n grows."""
    import llgrad as lg
    sizes = (50, 100) if quick else (250, 500, 1000, 2000)
    x = lg.tensor(np.random.default_rng(0).standard_normal(1024).astype(np.float32))
    rows = []
    for n in sizes:
        f = lg.compile(lambda x, n=n: _chain(lg, x, n))
        with tempfile.TemporaryDirectory() as cache:      # a cold compile: empty disk cache
            previous = os.environ.get("LLGRAD_CACHE_DIR")
            os.environ["LLGRAD_CACHE_DIR"] = cache
            try:
                t0 = time.perf_counter()
                f(x)
                compile_s = time.perf_counter() - t0
            finally:
                if previous is None:
                    del os.environ["LLGRAD_CACHE_DIR"]
                else:
                    os.environ["LLGRAD_CACHE_DIR"] = previous
        steady = time_calls({"f": lambda: f(x).item()}, warmup=2, min_repeats=5,
                            max_repeats=50, budget_s=0.3)["f"]
        rows.append({"ops": n, "compile_s": compile_s,
                     "steady": steady.to_json() if isinstance(steady, Stats) else None})
    return {"name": "B7 chain of n elementwise ops on 1024 floats (llgrad compiled; compile "
                    "time with an empty disk cache)",
            "rows": rows}


def b5(torch: Any, budget: float) -> dict[str, Any]:
    import llgrad as lg
    x0 = np.random.default_rng(0).standard_normal(64)
    xl = lg.tensor(x0)
    compiled_h = lg.compile(lg.hessian(_rosenbrock))
    fns: dict[str, Callable] = {
        "llgrad eager": lambda: lg.autograd.functional.hessian(_rosenbrock, xl).numpy(),
        "llgrad compiled": lambda: compiled_h(xl).numpy()}
    if torch is not None:
        xt = torch.from_numpy(x0.copy())
        fns["torch eager"] = lambda: torch.autograd.functional.hessian(_rosenbrock, xt).numpy()
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        h = jax.jit(jax.hessian(_rosenbrock))
        xj = jnp.asarray(x0)
        fns["jax.jit"] = lambda: np.asarray(h(xj))
    except ImportError:
        pass
    return {"name": "B5 Rosenbrock Hessian, 64 float64", "times": _time(fns, budget)}


# --------------------------------------------------------------------------------------
# B2 / B4: the MLP training step, in fresh processes
# --------------------------------------------------------------------------------------

_B2_SCRIPT = textwrap.dedent('''
    import json, sys, time
    t0 = time.perf_counter()
    import llgrad as lg
    import_s = time.perf_counter() - t0
    lg.manual_seed(0)
    model = lg.nn.Sequential(lg.nn.Linear(784, 512), lg.nn.ReLU(), lg.nn.Linear(512, 512),
                             lg.nn.ReLU(), lg.nn.Linear(512, 10))
    opt = lg.optim.SGD(model.parameters(), lr=0.01)
    x = lg.randn(128, 784)
    y = lg.randint(0, 10, (128,))

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = lg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    mode = sys.argv[1]
    fn = lg.compile(step) if mode == "compiled" else step
    t = time.perf_counter()
    fn(model, opt, x, y).item()
    first = time.perf_counter() - t
    steady = []
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        fn(model, opt, x, y).item()
        steady.append(time.perf_counter() - t)
    steady.sort()
    print(json.dumps({"import_s": import_s, "first_s": first, "steady": steady}))
''')


def _run_b2(mode: str, repeats: int, cache_dir: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if cache_dir is not None:
        env["LLGRAD_CACHE_DIR"] = cache_dir
    proc = subprocess.run([sys.executable, "-c", _B2_SCRIPT, mode, str(repeats)], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def b2_b4(torch: Any, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cache:
        out["llgrad eager"] = _run_b2("eager", repeats, cache)
        out["llgrad compiled (cold cache)"] = _run_b2("compiled", repeats, cache)
        out["llgrad compiled (warm cache)"] = _run_b2("compiled", repeats, cache)
    if torch is not None:
        out.update(_torch_b2(torch, repeats))
    return out


def _torch_b2(torch: Any, repeats: int) -> dict[str, Any]:
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))

    def step(model: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    res = {}
    for name, fn in (("torch eager", step), ("torch.compile", torch.compile(step))):
        try:
            t = time.perf_counter()
            fn(model, opt, x, y).item()
            first = time.perf_counter() - t
            steady = []
            for _ in range(repeats):
                t = time.perf_counter()
                fn(model, opt, x, y).item()
                steady.append(time.perf_counter() - t)
            res[name] = {"first_s": first, "steady": sorted(steady)}
        except Exception as exc:  # noqa: BLE001
            res[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return res


# --------------------------------------------------------------------------------------

def run(quick: bool, torch: Any) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    budget = 0.3 if quick else 2.0
    n1 = 1 << 12 if quick else 4_000_000
    results: dict[str, Any] = {"workloads": []}
    x64 = rng.standard_normal(64).astype(np.float32)
    results["workloads"].append(workload_grad(
        "B3 30 chained elementwise ops on 64 floats, loss + grad",
        lambda lib, x: _chain(lib, x, 30), [x64], torch, budget))
    results["workloads"].append(workload_grad(
        f"B1 sum(tanh(x*w+0.5)*sigmoid(x)+exp(-x*x)), {n1:,} floats, loss + grads",
        _b1, [rng.standard_normal(n1).astype(np.float32),
              rng.standard_normal(n1).astype(np.float32)], torch, budget))
    results["workloads"].append(b5(torch, budget))
    results["workloads"].append(b6(torch, budget, quick))
    results["workloads"].append(b8(torch, budget, quick))
    results["b7"] = b7(torch, quick)
    results["b2_b4"] = b2_b4(torch, 3 if quick else 20)
    return results


def _ms(s: float) -> str:
    v = s * 1e3
    return f"{v:.3g}" if v >= 0.01 else f"{v:.2g}"


def render(results: dict[str, Any]) -> str:
    lines = ["## Compiled workloads (median ms per iteration, min–max; ratio = llgrad "
             "compiled / peer)", ""]
    for w in results["workloads"]:
        lines += [f"### {w['name']}", "", "| library | median ms | min–max ms | llgrad compiled ÷ |",
                  "|---|---|---|---|"]
        times = w["times"]
        ours = times.get("llgrad compiled") or times.get("llgrad eager")
        for lib, t in times.items():
            if "error" in t:
                lines.append(f"| {lib} | fails: {t['error'][:80]} | | |")
                continue
            ratio = ours["median_s"] / t["median_s"] if ours and "median_s" in ours else None
            lines.append(f"| {lib} | {_ms(t['median_s'])} | {_ms(t['min_s'])}–{_ms(t['max_s'])}"
                         f" | {ratio:.2f}× |" if ratio else f"| {lib} | {_ms(t['median_s'])} | | |")
        lines.append("")
    if "b7" in results:
        lines += [f"### {results['b7']['name']}", "",
                  "| ops | compile s | steady median ms |", "|---|---|---|"]
        for r in results["b7"]["rows"]:
            st = r["steady"]
            lines.append(f"| {r['ops']} | {r['compile_s']:.2f} | "
                         f"{_ms(st['median_s']) if st else '–'} |")
        lines.append("")
    lines += ["### B2 (MLP 784-512-512-10 training step, batch 128, SGD) and B4 (cold start)",
              "", "| run | import s | first call s | steady median ms | first − steady (compile) s |",
              "|---|---|---|---|---|"]
    for name, r in results["b2_b4"].items():
        if "error" in r:
            lines.append(f"| {name} | fails: {r['error'][:80]} | | | |")
            continue
        med = r["steady"][len(r["steady"]) // 2]
        imp = f"{r['import_s']:.3f}" if "import_s" in r else "–"
        lines.append(f"| {name} | {imp} | {r['first_s']:.3f} | {_ms(med)} | "
                     f"{r['first_s'] - med:.3f} |")
    return "\n".join(lines) + "\n"
