"""A first look at llgrad's CUDA backend on a real GPU, in one short process.

    python -m benchmarks.gpu_smoke [--big]

Checks, each independent (a failure prints its traceback and the next one runs): the
device, eager ops and autograd against the CPU path, compiled B1/B6/B8 value-and-grad
steps against the CPU path at small sizes, and (with --big) their time per step at the
scaled sizes against torch eager on the same GPU (CUDA events, medians). The full
benchmark (one process per library and workload, torch.compile and jax.jit too) is
benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import sys
import time
import traceback

import numpy as np


def section(name):
    def wrap(fn):
        def run(*a):
            t0 = time.perf_counter()
            try:
                fn(*a)
                print(f"[ok] {name} ({time.perf_counter() - t0:.1f} s)", flush=True)
            except Exception:
                print(f"[FAIL] {name}", flush=True)
                traceback.print_exc()

        return run

    return wrap


@section("device")
def device(lg):
    print(
        lg.cuda.is_available(),
        lg.cuda.device_count(),
        lg.cuda.get_device_name(),
        lg.cuda.get_device_capability(),
    )


@section("eager elementwise and reductions")
def eager(lg):
    a = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    x = lg.tensor(a, device="cuda")
    for name, fn in [
        ("sin*2+1", lambda t: lg.sin(t) * 2 + 1),
        ("sum", lambda t: t.sum()),
        ("sum(0)", lambda t: t.sum(0)),
        ("amax(1)", lambda t: t.amax(1)),
        ("softmax", lambda t: lg.softmax(t, -1)),
        ("matmul", lambda t: t @ t),
    ]:
        got = fn(x).cpu().numpy()
        want = fn(lg.tensor(a)).numpy()
        err = np.abs(got - want).max() / max(1e-30, np.abs(want).max())
        print(f"  {name}: rel err {err:.2e}")
        assert err < 1e-4, name


@section("eager autograd (MLP, cross-entropy)")
def autograd(lg):
    F = lg.nn.functional
    rng = np.random.default_rng(1)
    X = rng.standard_normal((64, 32)).astype(np.float32)
    W = rng.standard_normal((32, 10)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    outs = []
    for dev in ("cuda", "cpu"):
        w = lg.tensor(W, device=dev, requires_grad=True)
        loss = F.cross_entropy(lg.relu(lg.tensor(X, device=dev) @ w), lg.tensor(y, device=dev))
        loss.backward()
        outs.append((loss.item(), w.grad.cpu().numpy()))
    print("  loss", outs[0][0], outs[1][0], "grad err", np.abs(outs[0][1] - outs[1][1]).max())
    assert abs(outs[0][0] - outs[1][0]) < 1e-4


def _step(lg, workload, quick):
    from benchmarks import peers

    arrays = peers.inputs(workload, quick) if quick else _scaled(workload)
    f, wrt, const = peers.loss_fn(workload, peers._llgrad_ops(lg), quick)
    if not quick and workload == "B6":
        c = arrays["X"].shape[1]
        F = lg.nn.functional
        f = lambda X, g, b, T: (F.layer_norm(lg.softmax(X, -1) * g + b, (c,), eps=1e-5) * T).sum()
    vg = lg.compile(lg.value_and_grad(f, argnums=tuple(range(len(wrt)))))
    return vg, arrays, wrt + const


def _scaled(workload):
    rng = np.random.default_rng(0)
    f32 = np.float32
    if workload == "B1":
        n = 1 << 26
        return {"x": rng.standard_normal(n).astype(f32), "w": rng.standard_normal(n).astype(f32)}
    if workload == "B6":
        return {
            "X": rng.standard_normal((8192, 4096)).astype(f32),
            "g": rng.standard_normal(4096).astype(f32),
            "b": rng.standard_normal(4096).astype(f32),
            "T": rng.standard_normal((8192, 4096)).astype(f32),
        }
    return {k: rng.standard_normal((4096, 64)).astype(f32) for k in ("Q", "K", "V", "T")}


@section("compiled B1/B6/B8 (small) against the CPU path")
def compiled_small(lg):
    for w in ("B1", "B6", "B8"):
        vg, arrays, names = _step(lg, w, True)
        dev = [lg.tensor(arrays[k], device="cuda") for k in names]
        host = [lg.tensor(arrays[k]) for k in names]
        v, g = vg(*dev)
        v2, g2 = vg(*host)
        errs = [
            np.abs(a.cpu().numpy() - b.numpy()).max() / max(1e-30, np.abs(b.numpy()).max())
            for a, b in zip(g, g2)
        ]
        print(
            f"  {w}: value {v.item():.6g} vs {v2.item():.6g}; grad rel errs "
            f"{', '.join(f'{e:.1e}' for e in errs)}"
        )


@section("compiled B1/B6/B8 (scaled) time per step, llgrad vs torch eager")
def compiled_big(lg):
    import torch

    for w in ("B1", "B6", "B8"):
        vg, arrays, names = _step(lg, w, False)
        dev = [lg.tensor(arrays[k], device="cuda") for k in names]
        t0 = time.perf_counter()
        v, g = vg(*dev)
        lg.cuda.synchronize()
        first = time.perf_counter() - t0
        ms = _time(lambda: vg(*dev), lg.cuda.synchronize)
        # torch eager, same sizes
        from benchmarks import peers

        f, wrt, const = peers.loss_fn(w, peers._torch_ops(torch), False)
        if w == "B6":
            c = arrays["X"].shape[1]
            F = torch.nn.functional
            f = lambda X, g_, b, T: (
                F.layer_norm(torch.softmax(X, -1) * g_ + b, (c,), eps=1e-5) * T
            ).sum()
        ts = {k: torch.tensor(arrays[k], device="cuda") for k in names}

        def step():
            xs = [ts[k].detach().requires_grad_() for k in wrt]
            loss = f(*xs, *[ts[k] for k in const])
            return torch.autograd.grad(loss, xs)

        tms = _time(step, torch.cuda.synchronize)
        tv = f(*[ts[k] for k in names]).item()
        print(
            f"  {w}: llgrad {ms:.3f} ms (first call {first:.1f} s), torch eager {tms:.3f} ms; "
            f"value {v.item():.6g} vs torch {tv:.6g}"
        )


def _time(fn, sync, reps=20):
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def main() -> None:
    import llgrad as lg

    device(lg)
    eager(lg)
    autograd(lg)
    compiled_small(lg)
    if "--big" in sys.argv:
        compiled_big(lg)


if __name__ == "__main__":
    main()
