"""Shared test helpers: NumPy <-> llgrad conversion and layouts that make views.

The session compiles into its own cache (`LLGRAD_CACHE_DIR` under a session temp folder,
or `LLGRAD_TEST_CACHE_DIR` where set, to keep a warm cache between runs), never into the
user's, and subprocesses get a session `TMPDIR`: both are removed when the session ends,
so nothing (`llgrad-peers-*` folders of the benchmark runner, caches) is left behind.
With pytest-xdist (`-n 2`, as the README's test command runs), the workers share the
controlling process's cache (the cache is safe for concurrent compiles), so a kernel one
worker compiled is loaded by the other.
"""
from __future__ import annotations

import os
import shutil
import tempfile

_real_tmp = tempfile.gettempdir()        # this process keeps it (pytest's tmp_path)
_SESSION = tempfile.mkdtemp(prefix="llgrad-test-session-")
# (an xdist worker inherits the controller's `_LLGRAD_TEST_SESSION_CACHE`)
_cache = os.environ.get("LLGRAD_TEST_CACHE_DIR") or \
    os.environ.get("_LLGRAD_TEST_SESSION_CACHE")
if not _cache:
    _cache = os.environ["_LLGRAD_TEST_SESSION_CACHE"] = os.path.join(_SESSION, "cache")
os.environ["LLGRAD_CACHE_DIR"] = _cache
os.makedirs(os.path.join(_SESSION, "tmp"), mode=0o700)
os.environ["TMPDIR"] = os.path.join(_SESSION, "tmp")          # for subprocesses


def pytest_unconfigure(config) -> None:
    shutil.rmtree(_SESSION, ignore_errors=True)


import numpy as np  # noqa: E402
import pytest  # noqa: E402

import llgrad as lg  # noqa: E402
from llgrad.eager import views  # noqa: E402
from llgrad.ir import dtypes as dt  # noqa: E402


def to_lg(a: np.ndarray, dtype: dt.DType | None = None) -> lg.Tensor:
    """A fresh llgrad tensor with `a`'s values (converted to `dtype`)."""
    if dtype is None:
        return lg.tensor(a)
    return lg.tensor(np.asarray(a, dtype=np.float32) if dtype is dt.bfloat16 else a, dtype=dtype)


def values(t: lg.Tensor) -> np.ndarray:
    return np.array(t._values())


def bf16_round(a: np.ndarray) -> np.ndarray:
    f = np.asarray(a, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    r = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    out = r.view(np.float32)
    return np.where(np.isnan(f), np.float32(np.nan), out)


def in_layout(t: lg.Tensor, layout: str) -> lg.Tensor:
    """The same values as `t`, held in a non-contiguous view of another buffer."""
    if layout == "contiguous" or t.ndim == 0:
        return t
    if layout == "transposed":
        perm = tuple(reversed(range(t.ndim)))
        holder = t.permute(perm).contiguous()
        return views.permute(holder, perm)
    if layout == "strided":
        big = lg.zeros(*(t.shape[:-1] + (2 * t.shape[-1],)), dtype=t.dtype)
        v = views.slice_dims(big, (0,) * t.ndim, big.shape, (1,) * (t.ndim - 1) + (2,))
        from llgrad.eager.elementwise import copy_into
        copy_into(v, t)
        return v
    raise ValueError(layout)


LAYOUTS = ("contiguous", "transposed", "strided")


try:
    import torch
except ImportError:      # torch is only an oracle
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch (oracle) not installed")


def t64(values, requires_grad=False):
    return lg.tensor(np.asarray(values, dtype=np.float64), dtype=lg.float64,
                     requires_grad=requires_grad)


def vals(t):
    return np.array(t.detach()._values())


@pytest.fixture(autouse=True)
def _seed():
    lg.manual_seed(0)
    np.random.seed(0)


def run_graph(g, inputs, rtol=1e-5, atol=1e-6, threads=None):
    """Compile IR graph `g`, run it on NumPy `inputs` and compare every output (dtype,
    shape, values) with the NumPy interpreter; returns the `CompiledGraph`."""
    from llgrad.ir import interpret
    from llgrad.compiler.executable import CompiledGraph
    from llgrad.tensor import Tensor
    cg = CompiledGraph(g) if threads is None else CompiledGraph(g, threads=threads)
    outs = cg(*[Tensor._from_numpy(np.array(x)) for x in inputs])
    for k, (o, r) in enumerate(zip(outs, interpret(g, inputs))):
        assert o.dtype is g.outputs[k].dtype and tuple(o.shape) == r.shape
        np.testing.assert_allclose(np.asarray(o._values(), np.float64),
                                   np.asarray(r, np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"output {k}")
    return cg


def kernel_kinds(cg) -> list[str]:
    """The kinds of a CompiledGraph's kernel groups, in execution order."""
    return [k.kind.value for k in cg.kernels]


def train_step(model, opt, x, y):
    """One classification training step (the function the compiled-step tests compile)."""
    opt.zero_grad()
    loss = lg.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss



@pytest.fixture(scope="module")
def cuda_emulator():
    """CUDA tensors on the grid emulator (`LLGRAD_CUDA_EMULATE=1`) for one test module;
    the backend, compiled kernels and the CUDA interpreter are reset before and after, so
    other modules are unaffected."""
    from llgrad.eager import cuda as lg_cuda
    from llgrad.runtime.cuda import driver
    mp = pytest.MonkeyPatch()
    mp.setenv("LLGRAD_CUDA_EMULATE", "1")
    driver._reset_for_tests()
    lg_cuda.reset()
    yield
    lg_cuda.reset()
    mp.undo()
    driver._reset_for_tests()


@pytest.fixture
def fresh_direct_tables():
    """Empty direct-call tables (`functions.fastpath`): they learn a process's first keys
    only (4096 elementwise keys, 256 per one-operand op), so a test that checks a second
    call is direct must not depend on how many keys the tests before it (another order,
    another xdist worker) left there."""
    from llgrad.functions import fastpath
    fastpath.clear()
    yield

