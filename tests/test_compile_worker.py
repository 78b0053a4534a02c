"""Optimization and code generation in a helper process (`codegen.worker`): the same
objects, fallbacks when the child is missing or dies, recycling, and memory given back."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import llgrad as lg
from llgrad.codegen import worker as worker_mod
from llgrad.codegen.target import get_target

ROOT = Path(__file__).resolve().parent.parent


def _ready_worker():
    t = get_target()
    if not t.workers:
        pytest.skip("the compile worker is turned off (LLGRAD_COMPILE_WORKER=0)")
    for w in t.workers:
        w.start_once()
        w._ready.wait(30)
        assert w._ready.is_set() and not w.failed
    return t, t.workers[0]


def _module_text() -> str:
    f = lg.compile(lambda x: (lg.tanh(x) * 3 + lg.exp(-x)).sum(1))
    f(lg.randn(8, 8))
    (entry,) = f._entries.values()
    return entry.function.plain().executable.llvm_ir


def test_child_objects_equal_in_process_objects():
    t, w = _ready_worker()
    text = _module_text()
    via_child = w.compile(t._widen(text))
    mod = t.parse(text)
    t.optimize(mod)
    assert via_child is not None and via_child == t.machine.emit_object(mod)


def test_compiles_go_to_the_child_and_stay_correct():
    t, w = _ready_worker()
    before = w.compiled
    with _no_disk_cache():
        f = lg.compile(lambda x: (lg.sin(x) * 3.5 + x * x).sum())
        x = lg.randn(50)
        np.testing.assert_allclose(f(x).item(), (np.sin(x.numpy()) * 3.5 +
                                                 x.numpy() ** 2).sum(), rtol=1e-5)
    assert w.compiled > before


class _no_disk_cache:
    def __enter__(self):
        self.old = os.environ.get("LLGRAD_CACHE_DIR")
        os.environ["LLGRAD_CACHE_DIR"] = ""

    def __exit__(self, *exc):
        if self.old is None:
            del os.environ["LLGRAD_CACHE_DIR"]
        else:
            os.environ["LLGRAD_CACHE_DIR"] = self.old


def test_a_dead_child_is_replaced_and_the_compile_done_here():
    t, w = _ready_worker()
    w._proc.kill()
    w._proc.wait()
    text = _module_text()
    assert w.compile(t._widen(text)) is None        # this one falls back ...
    w._ready.wait(30)
    assert w.compile(t._widen(text)) is not None    # ... and a fresh child takes the next
    with _no_disk_cache():
        f = lg.compile(lambda x: lg.cos(x).sum() * 7.25)
        x = lg.randn(33)
        np.testing.assert_allclose(f(x).item(), np.cos(x.numpy()).sum() * 7.25, rtol=1e-5)


def test_the_child_is_recycled(monkeypatch):
    t, w = _ready_worker()
    monkeypatch.setattr(worker_mod, "RECYCLE", 2)
    text = t._widen(_module_text())
    w._count = 0
    first = w._proc.pid
    assert w.compile(text) is not None
    assert w.compile(text) is not None               # the second one recycles
    assert w._proc.pid != first
    w._ready.wait(30)
    assert w.compile(text) is not None


def test_bad_ir_raises_the_in_process_error():
    t, w = _ready_worker()
    assert w.compile("define void @f() {\n  ret i32 0\n}\n") is None
    with pytest.raises(RuntimeError):
        t.compile("define void @f() {\n  ret i32 0\n}\n", ["f"], name="bad")


def test_switched_off_by_the_environment():
    code = textwrap.dedent("""
        import llgrad as lg
        from llgrad.codegen.target import get_target
        f = lg.compile(lambda x: (x * 2).sum())
        print(f(lg.ones(3)).item(), get_target().workers)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_COMPILE_WORKER="0",
                                LLGRAD_CACHE_DIR=""), timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["6.0", "[]"], r.stderr


RSS = """
    import gc, sys, time, llgrad as lg
    from llgrad.codegen.target import get_target
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    x = lg.ones(64)
    def make(k):
        return lg.compile(lambda x: (lg.tanh(x * (k + 0.5)) + k).sum())
    for w in get_target().workers:
        w.start_once()
        w._ready.wait(30)
    for k in range(30):
        make(k)(x)
    gc.collect()
    r0 = rss()
    n = int(sys.argv[1])
    for k in range(30, 30 + n):
        make(k)(x)
    gc.collect()
    print((rss() - r0) / 1024)
"""


def _rss_growth(n: int, env: dict[str, str]) -> float:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(RSS), str(n)],
                       capture_output=True, text=True, timeout=1200,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_CACHE_DIR="", **env))
    assert r.returncode == 0, r.stderr
    return float(r.stdout.strip())


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_dead_compiles_give_their_memory_back():
    """150 throwaway compiles: in-process each leaves ~110 KB (llvmlite's pass builder);
    through the child, what stays is a fraction of that."""
    grown = _rss_growth(150, {})
    assert grown < 150 * 0.05, grown            # MB: under 50 KB per compile


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_a_thousand_dead_compiles_stay_under_20_mb():
    assert _rss_growth(1000, {}) <= 20.0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_process_uses_its_own_child():
    _ready_worker()
    pid = os.fork()
    if pid == 0:                                   # the forked process
        code = 1
        try:
            before = sum(w.compiled for w in get_target().workers)
            with _no_disk_cache():
                for k in range(3):
                    f = lg.compile(lambda x, k=k: (lg.exp(x) * (k + 1.5)).sum())
                    x = lg.ones(7)
                    ok = abs(f(x).item() - 7 * np.e * (k + 1.5)) < 1e-3
                    if not ok:
                        break
                    time.sleep(0.2)                # let the new child come up
                else:
                    code = 0 if sum(w.compiled for w in get_target().workers) > before \
                        else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    t, w = _ready_worker()                         # the parent's child still works
    assert w.compile(t._widen(_module_text())) is not None


def _big_step():
    """A graph whose kernels' text is large enough to be emitted as two modules."""
    lg.manual_seed(0)
    model = lg.nn.Sequential(lg.nn.Linear(32, 64), lg.nn.Tanh(), lg.nn.Linear(64, 64),
                             lg.nn.GELU(), lg.nn.Linear(64, 10))
    x, y = lg.randn(16, 32), lg.randint(0, 10, (16,))

    def loss(x, y):
        h = model(x)
        return lg.nn.functional.cross_entropy(h, y) + lg.logsumexp(h, 1).mean() * 0.1
    return loss, x, y, model


@pytest.mark.parametrize("workers", ["1", "0"])
def test_big_graphs_build_as_two_modules_with_the_same_results(workers):
    from llgrad.codegen.target import PART_MARKER
    code = textwrap.dedent("""
        import sys, numpy as np, llgrad as lg
        sys.path.insert(0, sys.argv[1])
        from test_compile_worker import _big_step
        from llgrad.codegen.target import get_target
        loss, x, y, model = _big_step()
        cf = lg.compile(loss)
        params = list(model.parameters())
        got = lg.autograd.grad(cf(x, y), params)
        with lg.disable_compile():
            want = lg.autograd.grad(loss(x, y), params)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-6)
        (entry,) = cf._entries.values()
        texts = [entry.function.differentiated(tuple(range(2, 2 + len(params)))).forward
                 .executable.llvm_ir]
        print(sum(t.count(sys.argv[2]) for t in texts),
              sum(w.compiled for w in get_target().workers))
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_CACHE_DIR="",
               LLGRAD_COMPILE_WORKER=workers)
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "tests"), PART_MARKER.strip()],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    splits, from_children = map(int, r.stdout.split())
    assert splits >= 1                                   # the forward came as two modules
    assert (from_children > 0) == (workers == "1")
