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
    if t.worker is None:
        pytest.skip("the compile worker is turned off (LLGRAD_COMPILE_WORKER=0)")
    t.worker._ready.wait(30)
    assert t.worker._ready.is_set() and not t.worker.failed
    return t, t.worker


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
        print(f(lg.ones(3)).item(), get_target().worker)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_COMPILE_WORKER="0",
                                LLGRAD_CACHE_DIR=""), timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["6.0", "None"], r.stderr


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
    w = get_target().worker
    if w is not None:
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
            before = get_target().worker.compiled
            with _no_disk_cache():
                for k in range(3):
                    f = lg.compile(lambda x, k=k: (lg.exp(x) * (k + 1.5)).sum())
                    x = lg.ones(7)
                    ok = abs(f(x).item() - 7 * np.e * (k + 1.5)) < 1e-3
                    if not ok:
                        break
                    time.sleep(0.2)                # let the new child come up
                else:
                    code = 0 if get_target().worker.compiled > before else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    t, w = _ready_worker()                         # the parent's child still works
    assert w.compile(t._widen(_module_text())) is not None
