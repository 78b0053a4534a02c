"""Faults and resources: the compiled-code cache's ownership checks and concurrency, what
llgrad writes on disk, thread safety, memory that is not there, and RSS over many calls."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import llgrad as lg
from llgrad.codegen import diskcache
from llgrad.runtime import storage

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------------------
# The on-disk cache
# --------------------------------------------------------------------------------------

COMPILE_ONE = """
    import llgrad as lg, numpy as np, warnings
    warnings.simplefilter("error", RuntimeWarning) if {strict} else None
    f = lg.compile(lambda x: (lg.tanh(x) * 3.25 + x.exp()).sum({axis}))
    x = lg.arange(12.0).reshape(3, 4) / 7
    got = f(x).numpy()
    want = (np.tanh(x.numpy()) * 3.25 + np.exp(x.numpy())).sum({axis})
    np.testing.assert_allclose(got, want, rtol=1e-5)
    from llgrad.codegen import diskcache
    print("refused:", sorted(diskcache._refused.values()))
"""


def _entries(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file()]


def test_cache_entries_are_private_and_reused(tmp_path):
    cache = tmp_path / "cache"
    first = _run(COMPILE_ONE.format(strict=True, axis=1), {"LLGRAD_CACHE_DIR": str(cache)})
    assert first.returncode == 0, first.stderr
    entries = _entries(cache)
    assert entries and all(p.stat().st_mode & 0o077 == 0 for p in entries)
    assert cache.stat().st_mode & 0o077 == 0
    second = _run(COMPILE_ONE.format(strict=True, axis=1) + """
    from llgrad.runtime import cache
    print("from disk:", all(k.compiled.from_cache for k in cache._kernels.values()))
    """, {"LLGRAD_CACHE_DIR": str(cache)})
    assert second.returncode == 0, second.stderr
    assert "from disk: True" in second.stdout


@pytest.mark.parametrize("fault", ["group-writable entry", "world-writable folder",
                                   "symlinked entry", "foreign owner"])
def test_cache_refuses_entries_others_could_have_written(tmp_path, fault):
    cache = tmp_path / "cache"
    assert _run(COMPILE_ONE.format(strict=True, axis=0),
                {"LLGRAD_CACHE_DIR": str(cache)}).returncode == 0
    entries = _entries(cache)
    victim = entries[0]
    if fault == "group-writable entry":
        victim.chmod(0o664)
        expect = "writable by its group"
    elif fault == "world-writable folder":
        cache.chmod(0o777)
        expect = "writable by others"
    elif fault == "symlinked entry":
        elsewhere = tmp_path / "elsewhere.o"
        victim.rename(elsewhere)
        victim.symlink_to(elsewhere)
        expect = "symbolic link"
    else:
        if os.geteuid() != 0:
            pytest.skip("changing a file's owner needs root")
        os.chown(victim, 12345, -1)
        expect = "owned by uid 12345"
    for p in entries:                      # every entry is this user's own except the victim
        assert p == victim or diskcache.untrusted(p, directory=False) is None or \
            fault == "world-writable folder"
    res = _run(COMPILE_ONE.format(strict=False, axis=0), {"LLGRAD_CACHE_DIR": str(cache)})
    assert res.returncode == 0, res.stderr
    assert expect in res.stdout            # the reason is recorded ...
    assert "not using the compiled-code cache" in res.stderr   # ... and the user is warned
    assert "RuntimeWarning" in res.stderr


def test_two_processes_compiling_into_one_cache_at_once(tmp_path):
    cache = tmp_path / "cache"
    code = """
        import sys, time, llgrad as lg, numpy as np
        start = float(sys.argv[1])
        while time.time() < start:
            pass
        for n in range(6):          # several functions, so the two writers interleave
            f = lg.compile(lambda x, n=n: (lg.sin(x) * (n + 1) + x * x).sum(0))
            x = lg.linspace(-1, 1, 20).reshape(4, 5)
            want = (np.sin(x.numpy()) * (n + 1) + x.numpy() ** 2).sum(0)
            np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-5)
        print("ok")
    """
    import time
    start = f"{time.time() + 4:.3f}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), start], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "ok", err
    entries = _entries(cache)
    assert not [p for p in entries if p.name.endswith(".tmp")]
    import hashlib
    head = len(diskcache._MAGIC) + 32
    for p in entries:                      # every entry is whole and checks out
        blob = p.read_bytes()
        assert blob.startswith(diskcache._MAGIC)
        assert hashlib.sha256(blob[head:]).digest() == blob[len(diskcache._MAGIC):head]
    third = _run("""
        import llgrad as lg
        from llgrad.runtime import cache
        f = lg.compile(lambda x: (lg.sin(x) * 1 + x * x).sum(0))
        f(lg.linspace(-1, 1, 20).reshape(4, 5))
        print(all(k.compiled.from_cache for k in cache._kernels.values()))
    """, {"LLGRAD_CACHE_DIR": str(cache)})
    assert third.stdout.strip() == "True", third.stderr


def test_nothing_is_written_outside_the_cache_directory(tmp_path):
    home, tmp, cache = tmp_path / "home", tmp_path / "tmp", tmp_path / "cache"
    home.mkdir()
    tmp.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(tmp), "LLGRAD_CACHE_DIR": str(cache),
           "XDG_CACHE_HOME": str(home / ".cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    res = _run("""
        import llgrad as lg
        f = lg.compile(lambda x: (x.relu() * 2).sum())
        x = lg.randn(8, requires_grad=True)
        f(x).backward()
        lg.tanh(x).sum().backward()
        print(float(x.grad.sum()) != 0.0)
    """, env)
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr
    assert list(home.rglob("*")) == [] and list(tmp.rglob("*")) == []
    assert _entries(cache)


def test_the_cache_can_be_turned_off(tmp_path):
    res = _run(COMPILE_ONE.format(strict=True, axis=1) + """
    from llgrad.runtime import cache
    print("from disk:", any(k.compiled.from_cache for k in cache._kernels.values()))
    """, {"LLGRAD_CACHE_DIR": "", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert "from disk: False" in res.stdout and list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------------------

def _step(f, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    w = lg.tensor(rng.standard_normal((16, 8)), requires_grad=True)
    x = lg.tensor(rng.standard_normal((32, 16)))
    loss = f(x, w)
    loss.backward()
    eager = lg.tensor(rng.standard_normal((5, 7)), requires_grad=True)
    e = (lg.softmax(eager @ eager.t(), 1) * eager.sum(1, keepdim=True).tanh()).sum()
    (g,) = lg.autograd.grad(e, [eager])
    return loss.detach().numpy(), w.grad.numpy(), e.detach().numpy(), g.numpy()


def test_eight_threads_give_the_serial_results():
    def model(x, w):
        h = lg.tanh(x @ w)
        return (lg.log_softmax(h, 1) * h.sigmoid()).mean()
    f = lg.compile(model)
    seeds = list(range(8 * 25))
    serial = [_step(f, s) for s in seeds]
    results: dict[int, tuple] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for s in seeds[k::8]:
                results[s] = _step(f, s)
        except BaseException as e:          # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == len(seeds)
    for s in seeds:
        for got, want in zip(results[s], serial[s]):
            np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------

def test_an_allocation_beyond_available_memory_raises_memory_error(monkeypatch):
    with pytest.raises(MemoryError, match=r"372\.5 GiB \(400000004096 bytes\)"):
        lg.empty(10 ** 11)
    monkeypatch.setattr(storage, "available_bytes", lambda: 200 << 20)
    with pytest.raises(MemoryError, match=r"1\.0 GiB .* 200\.0 MiB available"):
        lg.empty(1 << 28)
    with pytest.raises(MemoryError, match="bytes"):
        lg.ones(1 << 27, dtype=lg.float64) * 2.0
    assert lg.empty(1 << 20).shape == (1 << 20,)      # small buffers are not checked


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_rss_stays_flat_over_100k_compiled_calls():
    f = lg.compile(lambda x, w: (lg.tanh(x @ w) * 0.5).sum())
    x = lg.randn(16, 16)
    w = lg.randn(16, 16, requires_grad=True)
    for _ in range(2000):                   # warm up: caches, pools, slabs
        f(x, w).backward()
    w.grad = None
    before = _rss_kib()
    for i in range(100_000):
        f(x, w).backward()
        w.grad = None
    grown = _rss_kib() - before
    print(f"RSS over 100,000 compiled calls with backward: {before} KiB -> "
          f"{before + grown} KiB ({grown:+d} KiB)")
    assert grown < 4096, f"RSS grew by {grown} KiB over 100,000 calls"
