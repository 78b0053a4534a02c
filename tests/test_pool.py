"""The native thread pool (`codegen.pool`, `runtime.pool`): pieces cut as `passes.lower`
assumes, any number of workers, contention, fork, and compiled graphs whose parallel
launches run from inside one foreign call."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from llvmlite import ir

import llgrad as lg
from llgrad.codegen.target import get_target
from llgrad.runtime import pool

I64 = ir.IntType(64)


@pytest.fixture(scope="module")
def piece() -> int:
    """A piece function `piece(int64_t *a, lo, hi)`: a[k] += k + 1 for k in [lo, hi), and
    a[-1] counts the calls (atomically)."""
    m = ir.Module("pool_test")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.PointerType(), I64, I64]), "piece")
    a, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block())
    k = b.alloca(I64)
    b.store(lo, k)
    head, body, done = (fn.append_basic_block(n) for n in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.load(k)
    b.cbranch(b.icmp_signed("<", i, hi), body, done)
    b.position_at_end(body)
    p = b.gep(a, [i], source_etype=I64)
    b.store(b.add(b.load(p, typ=I64), b.add(i, I64(1))), p)
    b.store(b.add(i, I64(1)), k)
    b.branch(head)
    b.position_at_end(done)
    counter = b.gep(a, [I64(-1)], source_etype=I64)
    b.atomic_rmw("add", counter, I64(1), "seq_cst")
    b.ret_void()
    compiled = get_target().compile(str(m), ["piece"], name="pool_test")
    piece.keep = compiled                   # the code lives as long as its Compiled
    return compiled.addresses["piece"]


def run(piece: int, lo: int, hi: int, parts: int) -> np.ndarray:
    a = np.zeros(hi + 2, dtype=np.int64)           # a[0] counts calls, data from a[1]
    pfor = pool._PFOR(pool.address(2))
    pfor(piece, a.ctypes.data + 8, lo, hi, parts)
    return a


@pytest.mark.parametrize("lo,hi,parts", [(0, 10, 2), (0, 1000, 2), (0, 7, 3), (3, 11, 4),
                                         (0, 1, 2), (0, 0, 2), (0, 100, 7), (5, 6, 1)])
def test_every_element_once_in_the_cut_lower_assumes(piece, lo, hi, parts):
    a = run(piece, lo, hi, parts)
    data = a[1:hi + 1]
    expect = np.zeros(hi, dtype=np.int64)
    expect[lo:hi] = np.arange(lo, hi) + 1
    assert (data == expect).all() and a[hi + 1] == 0
    assert a[0] == parts                    # every piece runs, an empty one too


def test_callers_on_many_threads_each_get_their_whole_range(piece):
    """A second caller while a job runs does its pieces inline; nothing is lost."""
    n, errors = 50_000, []

    def work() -> None:
        for _ in range(50):
            a = run(piece, 0, n, 2)
            if not (a[1:n + 1] == np.arange(1, n + 1)).all():
                errors.append("wrong")
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _big_graph_fn():
    return lg.compile(lambda x, y: lg.tanh(x * y + 1.0) * 2.0)


def test_a_compiled_graph_with_parallel_launches_is_one_foreign_call():
    x = lg.randn(1 << 18)
    y = lg.randn(1 << 18)
    f = _big_graph_fn()
    out = f(x, y)
    np.testing.assert_allclose(out.numpy(), np.tanh(x.numpy() * y.numpy() + 1) * 2,
                               rtol=1e-5, atol=1e-6)
    r = f.inspect(x, y)
    assert "parallel_for" in r.schedule.extras
    assert "||" in str(r.schedule)                  # the split loop, marked as parallel


def test_compiled_calls_from_many_threads_equal_serial():
    x = lg.randn(1 << 18)
    f = _big_graph_fn()
    expect = f(x, x).numpy()
    bad = []

    def work() -> None:
        for _ in range(20):
            if not np.array_equal(f(x, x).numpy(), expect):
                bad.append(1)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_a_forked_child_runs_parallel_graphs():
    script = textwrap.dedent("""
        import os, numpy as np, llgrad as lg
        f = lg.compile(lambda x: lg.exp(x) + 1.0)
        x = lg.randn(1 << 18)
        f(x)                                   # the parent's pool is running
        pid = os.fork()
        if pid == 0:
            ok = np.allclose(f(x).numpy(), np.exp(x.numpy()) + 1, rtol=1e-6)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("child 0")


@pytest.mark.parametrize("n,k,m", [(256, 64, 256), (128, 300, 512), (784, 128, 512),
                                   (255, 64, 255)])
def test_large_gemms_split_into_panels_on_the_pool(n, k, m):
    """A big gemm runs as one single-threaded BLAS call per panel of C's rows (or columns)
    on the pool (sequential MKL, or OpenBLAS held at one thread meanwhile and restored
    after)."""
    from llgrad.runtime import blas
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    f = lg.compile(lambda a, b: a @ b)
    before = blas.threads()
    out = f(lg.tensor(a), lg.tensor(b)).numpy()
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)
    assert blas.threads() == before and blas._holders == 0
    text = str(f.inspect(lg.tensor(a), lg.tensor(b)).schedule)
    threads = pool_threads()
    divisible = n % threads == 0 or m % threads == 0
    split = threads > 1 and blas.splits_gemms(n, m, k) and divisible
    assert (f"[{threads}||" in text) == split


def pool_threads() -> int:
    from llgrad.runtime import launch
    return launch._THREADS


def test_a_transposed_operand_splits_too():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 256)).astype(np.float32)
    b = rng.standard_normal((300, 512)).astype(np.float32)
    f = lg.compile(lambda a, b: a.t() @ b)                # A read column-major by BLAS
    np.testing.assert_allclose(f(lg.tensor(a), lg.tensor(b)).numpy(), a.T @ b, rtol=1e-4,
                               atol=1e-3)
