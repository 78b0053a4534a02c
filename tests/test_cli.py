"""The `llgrad` command (through subprocess) and the disk cache's layout, cap and pruning."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llgrad.codegen import diskcache

ROOT = Path(__file__).resolve().parent.parent


def llgrad(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
           ) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "llgrad", *args], capture_output=True,
                          text=True, env=full, cwd=cwd, timeout=300)


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    f = tmp_path / "model.py"
    f.write_text(textwrap.dedent("""
        import llgrad as lg

        def loss(x, w, y):
            return lg.nn.functional.cross_entropy(lg.tanh(x @ w), y)

        class Net:
            @staticmethod
            def scaled(x, k):
                return (x * k).sum()
    """))
    return f


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    c = tmp_path / "cache"
    c.mkdir(mode=0o700)
    return c


# -- inspect ----------------------------------------------------------------------------

def test_inspect_prints_every_stage(model_file, cache):
    r = llgrad("inspect", f"{model_file}:loss", "--args", "f32[8,5] f32[5,3]! i64[8]",
               env={"LLGRAD_CACHE_DIR": str(cache)})
    assert r.returncode == 0, r.stderr
    for head in ("== traced graph ==", "== joint forward+backward graph ==",
                 "== optimized forward ==", "== kernels ==", "== stats =="):
        assert head in r.stdout
    # a scalar loss: one graph computes it and its gradients, there is no backward graph
    assert "matmul" in r.stdout and "gradients: computed by the forward" in r.stdout
    assert "== backward graph ==" not in r.stdout
    r = llgrad("inspect", f"{model_file}:loss", "--args", "f32[8,5] f32[5,3]! i64[8]",
               "--stage", "backward", env={"LLGRAD_CACHE_DIR": str(cache)})
    assert r.returncode == 0 and "no backward stage: the gradients are computed" in r.stdout


def test_inspect_one_stage_dot_and_numbers(model_file, cache):
    env = {"LLGRAD_CACHE_DIR": str(cache)}
    r = llgrad("inspect", f"{model_file}:loss", "--args", "f32[8,5] f32[5,3]! i64[8]",
               "--stage", "llvm", env=env)
    assert r.returncode == 0, r.stderr
    assert "define" in r.stdout and "== traced graph ==" not in r.stdout
    r = llgrad("inspect", f"{model_file}:Net.scaled", "--args", "f64[4,4] 2.5", "--dot",
               env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.lstrip().startswith("digraph") and "mul" in r.stdout
    r = llgrad("inspect", f"{model_file}:Net.scaled", "--args", "f64[4,4] 2.5",
               "--stage", "backward", env=env)
    assert r.returncode == 0 and "nothing requires gradients" in r.stdout


@pytest.mark.parametrize("args,message", [
    (["{f}:nope", "--args", "f32[2]"], "has no 'nope'"),
    (["{f}", "--args", "f32[2]"], "expected FILE:FUNCTION"),
    (["/no/such/file.py:f"], "no such file"),
    (["{f}:loss", "--args", "q32[2]"], "unknown dtype 'q32'"),
    (["{f}:loss", "--args", "f32(2)"], "cannot read argument type 'f32(2)'"),
    (["{f}:loss", "--args", "i64[2]!"], "only floating point and complex"),
])
def test_inspect_bad_input_is_one_clear_line(model_file, args, message):
    r = llgrad("inspect", *[a.format(f=model_file) for a in args])
    assert r.returncode != 0 and message in r.stderr
    assert "Traceback" not in r.stderr


def test_arg_spec_parsing():
    from llgrad.cli import parse_arg_spec
    import llgrad as lg
    t = parse_arg_spec("bf16[2,3]!")
    assert t.dtype is lg.bfloat16 and t.shape == (2, 3) and t.requires_grad
    assert parse_arg_spec("i32[]").shape == () and parse_arg_spec("b8[4]").dtype is lg.bool
    assert parse_arg_spec("3") == 3 and parse_arg_spec("-0.5") == -0.5


# -- env and bench ----------------------------------------------------------------------

def test_env_reports_cpu_threads_blas_versions():
    r = llgrad("env")
    assert r.returncode == 0, r.stderr
    for key in ("llgrad ", "cpu ", "cpu features", "llgrad threads", "blas ", "llvmlite",
                "llvm ", "numpy", "cache "):
        assert key in r.stdout


def test_bench_forwards_to_the_runner():
    r = llgrad("bench", "--help")
    assert r.returncode == 0 and "one process per" in r.stdout.lower()


# -- cache --------------------------------------------------------------------------------

def _fill(cache: Path, n_functions: int, env: dict[str, str] | None = None) -> None:
    code = textwrap.dedent(f"""
        import llgrad as lg
        for k in range({n_functions}):
            f = lg.compile(lambda x, k=k: (lg.sin(x) * (k + 2)).sum(0))
            f(lg.ones(3, 4))
    """)
    full = dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_CACHE_DIR=str(cache), **(env or {}))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=full, timeout=300)
    assert r.returncode == 0, r.stderr


def test_cache_info_clear_and_versions(cache):
    env = {"LLGRAD_CACHE_DIR": str(cache)}
    _fill(cache, 2)
    tag = diskcache_tag()
    assert (cache / tag).is_dir()
    old = cache / "0.0.1-llvm14.0.6" / "ab"
    old.mkdir(parents=True, mode=0o700)
    (old / ("ab" + "0" * 62)).write_bytes(b"x" * 1000)
    keep = cache / "notes.txt"                  # not the cache's: never touched
    keep.write_text("mine")
    r = llgrad("cache", "info", env=env)
    assert r.returncode == 0, r.stderr
    assert f"{tag}: " in r.stdout and "(this version)" in r.stdout
    assert "0.0.1-llvm14.0.6: 1 entries" in r.stdout and "(other version)" in r.stdout
    r = llgrad("cache", "prune", env=env)      # other versions go first
    assert r.returncode == 0 and "removed 1 entries" in r.stdout
    assert not (cache / "0.0.1-llvm14.0.6").exists() and (cache / tag).is_dir()
    r = llgrad("cache", "clear", env=env)
    assert r.returncode == 0 and "removed" in r.stdout
    assert not (cache / tag).exists() and keep.read_text() == "mine"
    r = llgrad("cache", "info", env={"LLGRAD_CACHE_DIR": ""})
    assert "off" in r.stdout


def diskcache_tag() -> str:
    return diskcache.version_tag()


def test_prune_drops_least_recently_used_first(cache, monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(cache))
    tag = cache / diskcache.version_tag()
    paths = []
    for k in range(6):
        key = f"{k:02x}" + "f" * 62
        diskcache.put(key, b"y" * 10_000)
        p = tag / key[:2] / key
        os.utime(p, (time.time() - 100 + k, time.time() - 100 + k))
        paths.append(p)
    assert diskcache.get("00" + "f" * 62) == b"y" * 10_000   # a hit: now the newest
    n, freed = diskcache.prune(limit=3 * 10_100)
    assert n == 3 and freed >= 30_000
    assert [p.exists() for p in paths] == [True, False, False, False, True, True]


def test_writes_over_the_cap_prune_automatically(cache):
    _fill(cache, 8, env={"LLGRAD_CACHE_SIZE": "60K"})
    total = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert 0 < total <= 60 * 1024


def test_cache_size_is_checked(monkeypatch, cache):
    monkeypatch.setenv("LLGRAD_CACHE_SIZE", "2G")
    assert diskcache.size_limit() == 2 << 30
    monkeypatch.setenv("LLGRAD_CACHE_SIZE", "12345")
    assert diskcache.size_limit() == 12345
    monkeypatch.setenv("LLGRAD_CACHE_SIZE", "lots")
    with pytest.raises(ValueError, match="LLGRAD_CACHE_SIZE"):
        diskcache.size_limit()
    r = llgrad("cache", "prune", "--size", "lots", env={"LLGRAD_CACHE_DIR": str(cache)})
    assert r.returncode != 0 and "LLGRAD_CACHE_SIZE must be" in r.stderr


# -- platforms ----------------------------------------------------------------------------

@pytest.mark.parametrize("plat,env,want", [
    ("linux", {"XDG_CACHE_HOME": "/xdg"}, "/xdg/llgrad"),
    ("linux", {"XDG_CACHE_HOME": "relative"}, "{home}/.cache/llgrad"),
    ("darwin", {}, "{home}/Library/Caches/llgrad"),
    ("win32", {"LOCALAPPDATA": "/appdata"}, "/appdata/llgrad/Cache"),
])
def test_cache_root_follows_the_platform(monkeypatch, tmp_path, plat, env, want):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("LLGRAD_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys, "platform", plat)
    assert diskcache.root() == Path(want.format(home=tmp_path))


def test_threads_without_sched_getaffinity(monkeypatch):
    from llgrad.runtime import launch
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.delenv("LLGRAD_NUM_THREADS", raising=False)
    assert launch.usable_cpus() == (os.cpu_count() or 1)
    assert 1 <= launch.num_threads() <= 8


def test_import_without_sched_getaffinity():
    code = "import os; del os.sched_getaffinity; import llgrad as lg; print((lg.ones(3) * 2).sum().item())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "6.0", r.stderr


def test_bench_renders_and_charts_a_saved_run(tmp_path):
    pytest.importorskip("matplotlib")
    import json
    run = {"date": "2026-01-01 00:00", "threads": 2, "quick": True,
           "libs": ["llgrad", "torch", "jax.jit"],
           "cells": {"B1|llgrad": {"median": 0.002, "compile_s": 0.1},
                     "B1|torch": {"median": 0.004},
                     "B1|jax.jit": {"median": 0.003, "compile_s": 0.2},
                     "B3|llgrad": {"median": 1e-5}, "B3|torch": {"wrong": "bad values"}}}
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(run))
    png = tmp_path / "chart.png"
    r = llgrad("bench", "--from-json", str(saved), "--chart", str(png))
    assert r.returncode == 0, r.stderr
    assert "| B1 | 2 | 4 | 3 | 0.67 |" in r.stdout and "| B3 | 0.01 | wrong | – | – |" in r.stdout
    assert "| B1 | 0.1 | – | 0.2 | 0.50 |" in r.stdout        # compile times, same run
    assert png.read_bytes()[:4] == b"\x89PNG"
