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
    head = len(diskcache._MAGIC) + 32
    for p in entries:                      # every entry is whole and checks out
        blob = p.read_bytes()
        assert blob.startswith(diskcache._MAGIC)
        assert diskcache.checksum(p.name, blob[head:]) == blob[len(diskcache._MAGIC):head]
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


# --------------------------------------------------------------------------------------
# Issue 28: the cache's checksum covers the key; errors that name what is wrong; logging;
# the command line; safetensors complex64; the test session's own folders
# --------------------------------------------------------------------------------------

def test_an_entry_under_another_keys_name_or_random_bytes_are_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / "cache"))
    obj_a, obj_b = "a" * 64, "b" * 64
    diskcache.put(obj_a, b"\x7fELF object of a")
    assert diskcache.get(obj_a) == b"\x7fELF object of a"
    d = diskcache.folder()
    (d / obj_b[:2]).mkdir(mode=0o700, exist_ok=True)
    (d / obj_b[:2] / obj_b).write_bytes((d / obj_a[:2] / obj_a).read_bytes())
    (d / obj_b[:2] / obj_b).chmod(0o600)
    assert diskcache.get(obj_b) is None                  # a's entry under b's name
    text_key = "ir-" + "c" * 64
    junk = bytes(range(128, 256)) * 4                    # not UTF-8, with a valid checksum
    (d / "ir").mkdir(mode=0o700, exist_ok=True)
    path = d / "ir" / text_key
    path.write_bytes(diskcache._MAGIC + diskcache.checksum(text_key, junk) + junk)
    path.chmod(0o600)
    assert diskcache.get(text_key) is None
    old = diskcache._MAGIC + __import__("hashlib").sha256(b"x").digest() + b"x"
    (d / obj_a[:2] / obj_a).write_bytes(old)             # the old format: body-only sum
    assert diskcache.get(obj_a) is None


def test_swapped_cache_entries_are_rebuilt_not_executed(tmp_path):
    """Every object and IR text of a compiled function moved under another entry's name:
    the next process rebuilds them (it used to load them: `malloc(): invalid size`)."""
    cache = tmp_path / "cache"
    code = """
        import llgrad as lg, numpy as np
        for n in range(3):
            f = lg.compile(lambda x, n=n: (lg.tanh(x) * (n + 2)).sum(1))
            x = lg.arange(12.0).reshape(3, 4) / 7
            np.testing.assert_allclose(f(x).numpy(), (np.tanh(x.numpy()) * (n + 2)).sum(1),
                                       rtol=1e-5)
        print("ok")
    """
    assert _run(code, {"LLGRAD_CACHE_DIR": str(cache)}).stdout.strip() == "ok"
    entries = sorted(_entries(cache))
    blobs = [p.read_bytes() for p in entries]
    for p, blob in zip(entries, blobs[1:] + blobs[:1]):      # rotate: each gets another's
        p.write_bytes(blob)
    res = _run(code, {"LLGRAD_CACHE_DIR": str(cache), "LLGRAD_LOG": "cache"})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
    assert "checksum mismatch" in res.stderr


def test_basic_config_at_info_does_not_print_llgrad_logs():
    res = _run("""
        import logging
        logging.basicConfig(level=logging.INFO)
        import llgrad as lg
        f = lg.compile(lambda x: (x * 2).sum())
        f(lg.ones(3)); f(lg.ones(4))
        logging.getLogger("llgrad.recompiles").setLevel(logging.INFO)     # asked: shown
        f(lg.ones(5))
        print("done")
    """, {})
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stderr.splitlines() if "llgrad" in l]
    assert len(lines) == 1 and "recompil" in lines[0], res.stderr


def test_num_threads_variable_is_named_when_it_is_not_a_number():
    res = _run("import llgrad as lg; print(lg.get_num_threads())",
               {"LLGRAD_NUM_THREADS": "abc"})
    assert res.returncode != 0 and "LLGRAD_NUM_THREADS" in res.stderr and "'abc'" in \
        res.stderr


def test_cli_version_and_a_closed_pipe(tmp_path):
    res = subprocess.run([sys.executable, "-m", "llgrad", "--version"], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert res.returncode == 0 and res.stdout.startswith(f"llgrad {lg.__version__}")
    src = tmp_path / "model.py"
    src.write_text(textwrap.dedent("""
        import llgrad as lg
        class Model:
            def __init__(self):
                self.w = lg.randn(8, 8)
            def step(self, x):
                return (x @ self.w).tanh().sum()
        model = Model()
    """))
    cmd = (f"{sys.executable} -m llgrad inspect {src}:model.step --args 'f32[64,8]' "
           f"--stage llvm | head -1")
    res = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert res.stdout.startswith("; ModuleID"), res.stderr
    assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr


@pytest.mark.parametrize("call, error, text", [
    (lambda: lg.stack([1, 2]), TypeError, "expected Tensor as element 0"),
    (lambda: lg.randn(2, 2, generator=5), TypeError, "randn: 'generator' must be"),
    (lambda: lg.ones(2, 2).sum(dim=1.0), TypeError, "sum(): argument 'dim' must be an int"),
    (lambda: lg.arange(0, float("inf")), RuntimeError, "arange: unsupported range: 0 -> inf"),
    (lambda: lg.ones(1).expand(2 ** 40).contiguous(), MemoryError, "contiguous"),
    (lambda: lg.ones(4).narrow(0, 2, -1), RuntimeError,
     "narrow(): length must be non-negative."),
    (lambda: lg.ones(4).narrow(0, -5, 1), IndexError,
     "start out of range (expected to be in range of [-4, 4], but got -5)"),
    (lambda: lg.ones(4).narrow(0, 3, 2), RuntimeError,
     "start (3) + length (2) exceeds dimension size (4)."),
])
def test_clear_errors(call, error, text):
    with pytest.raises(error) as info:
        call()
    assert text in str(info.value)


def test_softmax_with_positive_infinity_is_nan_as_torch():
    torch = pytest.importorskip("torch")
    inf = float("inf")
    for v in ([inf, 1.0], [-inf, -inf], [-inf, 1.0], [inf, inf], [1.0, 2.0]):
        want = torch.softmax(torch.tensor(v), 0).numpy()
        np.testing.assert_array_equal(lg.softmax(lg.tensor(v), 0).numpy(), want)
        np.testing.assert_array_equal(
            lg.compile(lambda x: lg.softmax(x, 0))(lg.tensor(v)).numpy(), want)


def test_safetensors_complex64_both_ways():
    pytest.importorskip("safetensors")
    torch = pytest.importorskip("torch")
    import io
    from safetensors.torch import load, save
    from llgrad.utils import safetensors as st
    z = lg.tensor([1 + 2j, 3 - 4j, 0.5j], dtype=lg.complex64)
    f = io.BytesIO()
    st.write({"z": z, "r": lg.ones(2)}, f)
    back = load(f.getvalue())
    np.testing.assert_array_equal(back["z"].numpy(), z.numpy())
    theirs = save({"w": torch.tensor([[1 + 1j, -2j]], dtype=torch.complex64)})
    mine = st.read(io.BytesIO(theirs))
    assert mine["w"].dtype is lg.complex64
    np.testing.assert_array_equal(mine["w"].numpy(), np.array([[1 + 1j, -2j]], np.complex64))


def test_the_session_uses_its_own_cache_and_temp_folders():
    import tempfile
    assert "llgrad-test-session-" in os.environ["LLGRAD_CACHE_DIR"] or \
        os.environ.get("LLGRAD_TEST_CACHE_DIR")
    assert "llgrad-test-session-" in os.environ["TMPDIR"]
    res = _run("import tempfile; print(tempfile.mkdtemp(prefix='llgrad-peers-'))", {})
    assert os.environ["TMPDIR"] in res.stdout             # removed with the session
    assert tempfile.gettempdir() != os.environ["TMPDIR"]


def test_names_op_keeps_the_signature_for_type_checkers():
    import inspect
    from llgrad.functions import _errors
    hints = _errors.names_op.__annotations__["return"]
    assert "P" in str(hints) and "R" in str(hints)
    assert "generator" in inspect.signature(lg.randn).parameters


@pytest.mark.slow
def test_mypy_sees_the_creation_functions_signatures(tmp_path):
    pytest.importorskip("mypy")
    src = tmp_path / "use.py"
    src.write_text("import llgrad as lg\nreveal_type(lg.randn)\n")
    res = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", str(src)],
                         capture_output=True, text=True, cwd=str(ROOT), timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "generator:" in res.stdout and "(*Any, **Any)" not in res.stdout, res.stdout


# --------------------------------------------------------------------------------------
# Distributed collectives whose ranks disagree (2 ranks)
# --------------------------------------------------------------------------------------

from test_distributed import _have_mpi  # noqa: E402  (one check of mpi4py and mpiexec)


@pytest.mark.skipif(not _have_mpi(), reason="needs mpi4py and mpiexec")
def test_collectives_refuse_ranks_that_disagree_on_shape_or_dtype(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import os
        os.environ["LLGRAD_DISTRIBUTED_DEBUG"] = "DETAIL"
        import llgrad as lg, llgrad.distributed as dist
        dist.init_process_group("mpi")
        r = dist.get_rank()

        def refused(fn, *words):
            try:
                fn()
            except dist.DistError as e:
                assert all(w in str(e) for w in words), str(e)
                return
            raise AssertionError("the mismatch was not refused")
        refused(lambda: dist.all_reduce(lg.ones(4 if r == 0 else 7)),
                "rank 0: all_reduce of float32[4]", "rank 1: all_reduce of float32[7]")
        refused(lambda: dist.all_reduce(lg.ones(4, dtype=lg.float32 if r == 0 else
                                                lg.float64)), "float64[4]")
        refused(lambda: dist.broadcast(lg.ones(3), src=r), "src 0", "src 1")
        refused(lambda: dist.barrier() if r == 0 else dist.all_reduce(lg.ones(2)),
                "rank 0: barrier", "rank 1: all_reduce")
        out = lg.empty(2 * (2 if r == 0 else 3))
        refused(lambda: dist.all_gather_into_tensor(out, lg.ones(2 if r == 0 else 3)),
                "all_gather_into_tensor")
        refused(lambda: dist.reduce_scatter_tensor(lg.empty(2), lg.ones(4) if r == 0 else
                                                   lg.ones(2, 2)),
                "rank 0: reduce_scatter_tensor of float32[4]", "float32[2, 2]")
        t = lg.ones(5) * (r + 1)
        dist.all_reduce(t)                          # the group is still in step
        assert t.tolist() == [3.0] * 5
        print("RANK OK")
    """))
    env = dict(os.environ, PYTHONPATH=str(ROOT), LLGRAD_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "llgrad.distributed.run", "-n", "2",
                        "--threads", "1", str(script)], capture_output=True, text=True,
                       timeout=240, env=env, cwd=str(ROOT))
    assert p.returncode == 0 and p.stdout.count("RANK OK") == 2, p.stdout + p.stderr


def test_host_copies_never_read_a_traced_tensor():
    """`diag` of a 1-D tensor built its matrix with an eager in-place write, and inside
    `lg.compile` that write reached a host memmove with a traced tensor's missing address
    (a segmentation fault). Each case runs in a child process, so a crash fails the test
    instead of ending the run; compiled values must equal eager's."""
    script = textwrap.dedent("""
        import numpy as np
        import llgrad as lg
        cases = [lambda x: lg.diag(x), lambda x: lg.diag(x, 2), lambda x: lg.diag(x, -1),
                 lambda x: lg.diag_embed(x), lambda x: x.clone() * 2,
                 lambda x: lg.diag(lg.diag(x))]
        for fn in cases:
            for d in (lg.float32, lg.int64, lg.bool):
                x = lg.arange(4).to(d)
                np.testing.assert_array_equal(lg.compile(fn)(x).numpy(), fn(x).numpy())
        print("OK")
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0 and "OK" in p.stdout, p.stdout + p.stderr[-2000:]


@pytest.mark.parametrize("requires_grad", [False, True])
def test_copying_functions_never_return_a_view_of_their_input(requires_grad):
    """Functions torch defines to return new memory must never alias their input, even
    where nothing is repeated: `x.repeat(1, 1)` (recorded) and `repeat_interleave(x, 1)`
    returned views, so an in-place write to the result changed `x`. Each result here is
    written in place and `x` must keep its values."""
    cases = {
        "repeat": lambda x: x.repeat(1, 1), "repeat one elem": lambda x: x[:1, :1].repeat(3, 1),
        "repeat_interleave": lambda x: x.repeat_interleave(1),
        "repeat_interleave dim": lambda x: x.repeat_interleave(1, dim=0),
        "repeat_interleave one elem": lambda x: x[:1, :1].repeat_interleave(3),
        "tile": lambda x: x.tile((1, 1)), "cat": lambda x: lg.cat([x]),
        "stack": lambda x: lg.stack([x]), "hstack": lambda x: lg.hstack([x]),
        "clone": lambda x: x.clone(), "kron": lambda x: lg.kron(x, lg.ones(1, 1)),
        "t_copy": lambda x: lg.t_copy(x), "expand_copy": lambda x: lg.expand_copy(x, (2, 3)),
        "narrow_copy": lambda x: lg.narrow_copy(x, 0, 0, 2),
        "flip": lambda x: x.flip(()), "roll": lambda x: x.roll(0, 0),
    }
    for name, fn in cases.items():
        x = lg.arange(6.).reshape(2, 3).requires_grad_(requires_grad)
        before = x.detach().numpy().copy()
        y = fn(x)
        assert y._storage is not x._storage, name
        with lg.no_grad():
            y.detach().add_(100)
        np.testing.assert_array_equal(x.detach().numpy(), before, err_msg=name)


def test_integer_linspace_and_logspace_truncate_their_ends_first():
    """torch converts `start` and `end` to an integer dtype before stepping (found by the
    OpInfo sweep over every sample: linspace(4.3, -3, 50, dtype=int64) began 4, 4, 4
    where torch's begins 4, 3, 3)."""
    torch = pytest.importorskip("torch")
    for args in [(4.3, -3, 50), (4.3, 50, 50), (-2.7, 3.9, 7), (0, 1.2, 4), (1.5, 1.5, 3)]:
        for name in ("int64", "int32", "int16"):
            got = lg.linspace(*args, dtype=getattr(lg, name)).tolist()
            assert got == torch.linspace(*args, dtype=getattr(torch, name)).tolist(), args
    for args, kw in [((0, 1.2, 4), {}), ((1, 1.2, 2), {"base": 5.0}), ((-1.5, 2.5, 5), {"base": 2.0})]:
        got = lg.logspace(*args, dtype=lg.int64, **kw).tolist()
        assert got == torch.logspace(*args, dtype=torch.int64, **kw).tolist(), args


def test_quantile_differentiates_through_q():
    """torch's quantile passes a gradient to a `q` tensor that requires grad (through the
    linear interpolation's weight); llgrad detached `q`, a silently missing gradient
    (found by the OpInfo sweep over every gradient sample)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for fn in ("quantile", "nanquantile"):
        for interpolation in ("linear", "lower", "midpoint"):
            a, q, g = rng.standard_normal((4, 6)), np.array([0.1, 0.55, 0.9]), rng.standard_normal((3, 4))
            x, qq = lg.tensor(a, requires_grad=True), lg.tensor(q, requires_grad=True)
            tx, tq = torch.tensor(a, requires_grad=True), torch.tensor(q, requires_grad=True)
            getattr(lg, fn)(x, qq, dim=1, interpolation=interpolation).backward(lg.tensor(g))
            getattr(torch, fn)(tx, tq, dim=1, interpolation=interpolation).backward(torch.tensor(g))
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-12)
            if tq.grad is None:
                assert qq.grad is None or not qq.grad.numpy().any()
            else:
                np.testing.assert_allclose(qq.grad.numpy(), tq.grad.numpy(), atol=1e-12)


# A call's outcome must not depend on what ran before it: caches keyed by argument values
# see `True == 1` and `0 == 0.0` (equal, and hashed alike), so a plan cached for a valid
# call must not serve an argument the first call of that key rejects.
_KEEPDIM_OPS = ("sum", "mean", "prod", "amax", "amin", "std", "var", "nansum", "nanmean",
                "norm", "count_nonzero", "std_mean", "var_mean", "aminmax", "all", "any",
                "max", "min", "argmax", "argmin", "logsumexp", "median", "nanmedian", "mode")
_OUTCOME = """
import sys, llgrad as lg
def outcome(name, dim, keepdim):
    try:
        getattr(lg, name)(lg.ones(3, 4), dim, keepdim=keepdim)
        return "ok"
    except Exception as e:
        return type(e).__name__
"""


def test_reduction_arguments_checked_whatever_ran_before() -> None:
    cases = [(n, 0, 1) for n in _KEEPDIM_OPS] + [(n, 0.0, True) for n in _KEEPDIM_OPS]
    warm = _OUTCOME + textwrap.dedent(f"""
        for name in {_KEEPDIM_OPS!r}:
            outcome(name, 0, True)  # the valid call first: its plans are cached
        print([outcome(*c) for c in {cases!r}])
        """)
    fresh = _OUTCOME + f"print([outcome(*c) for c in {cases!r}])"
    got, want = (subprocess.run([sys.executable, "-c", s], capture_output=True, text=True,
                                check=True).stdout.strip() for s in (warm, fresh))
    assert got == want, [c for c, g, w in zip(cases, eval(got), eval(want)) if g != w]
