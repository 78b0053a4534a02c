"""llgrad's own gemm (`codegen/gemm.py`), called directly with BLAS's Fortran convention
and checked against NumPy in float64: every transpose combination, edge tiles, k slabs,
leading dimensions beyond the minimum, alpha/beta as BLAS defines them, the transposed
orientation for few rows, and the fallback when its buffers cannot be allocated."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from llgrad.codegen import gemm
from llgrad.codegen.worker import HAND_VECTORIZED
from llgrad.ir import dtypes as dt
from llgrad.runtime import blas

pytestmark = pytest.mark.skipif(blas._own_vector_bits() is None,
                                reason="llgrad's gemm needs AVX2+FMA or AVX-512")

_GEMM = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)
DTYPES = {"s": (np.float32, ctypes.c_float, dt.float32),
          "d": (np.float64, ctypes.c_double, dt.float64)}


_modules: dict[tuple[int, str], object] = {}


def _fn(prefix: str, bits: int | None = None) -> ctypes._CFuncPtr:
    """The runtime's gemm, or (`bits`) the module for that register width built here."""
    if bits is None:
        return _GEMM(blas._own_address(prefix))
    from llgrad.codegen.target import get_target
    if (bits, prefix) not in _modules:
        _modules[bits, prefix] = get_target().compile(
            gemm.build(bits, prefix), [f"llgrad_{prefix}gemm"], name=f"test_{prefix}{bits}")
    return _GEMM(_modules[bits, prefix].addresses[f"llgrad_{prefix}gemm"])


def call(prefix: str, ta: str, tb: str, m: int, n: int, k: int, alpha: float, a: np.ndarray,
         lda: int, b: np.ndarray, ldb: int, beta: float, c: np.ndarray, ldc: int,
         bits: int | None = None) -> None:
    """The Fortran call on column-major (order='F') arrays."""
    _, scalar, _ = DTYPES[prefix]
    chars = [ctypes.c_char(ta.encode()), ctypes.c_char(tb.encode())]
    ints = [ctypes.c_int(v) for v in (m, n, k, lda, ldb, ldc)]
    al, be = scalar(alpha), scalar(beta)
    p = ctypes.addressof
    _fn(prefix, bits)(p(chars[0]), p(chars[1]), p(ints[0]), p(ints[1]), p(ints[2]), p(al),
                a.ctypes.data, p(ints[3]), b.ctypes.data, p(ints[4]), p(be), c.ctypes.data,
                p(ints[5]))


def _operand(rng: np.random.Generator, rows: int, cols: int, trans: str, pad: int,
             dtype: type) -> tuple[np.ndarray, np.ndarray, int]:
    """(storage, op(X) as float64, leading dimension): op(X) is rows x cols; the storage
    is column-major with `pad` extra rows (a leading dimension beyond the minimum)."""
    shape = (cols, rows) if trans in "Tt" else (rows, cols)
    store = np.asfortranarray(rng.standard_normal((shape[0] + pad, max(1, shape[1])))
                              .astype(dtype))
    x = store[:shape[0], :shape[1]].astype(np.float64)
    return store, (x.T if trans in "Tt" else x), store.shape[0]


SIZES = [(1, 1, 1), (5, 3, 7), (33, 13, 300), (32, 12, 16), (64, 24, 256), (100, 50, 600),
         (257, 129, 513), (31, 200, 17), (10, 128, 512), (3, 97, 40), (130, 11, 1),
         (600, 40, 70), (16, 30, 136), (40, 66, 9)]


@pytest.mark.parametrize("prefix", ["s", "d"])
@pytest.mark.parametrize("m,n,k", SIZES)
def test_against_numpy(prefix: str, m: int, n: int, k: int) -> None:
    _check_against_numpy(prefix, m, n, k, None)


@pytest.mark.parametrize("prefix", ["s", "d"])
@pytest.mark.parametrize("m,n,k", [(33, 13, 300), (10, 128, 512), (130, 11, 1),
                                   (257, 129, 513)])
def test_256_bit_module(prefix: str, m: int, n: int, k: int) -> None:
    """The AVX2 blocking (2 x 6 vectors of 256 bits), built and run here whatever the
    runtime's own choice is (this CPU runs 256-bit code if it runs the gemm at all)."""
    _check_against_numpy(prefix, m, n, k, 256)


def _check_against_numpy(prefix: str, m: int, n: int, k: int, bits: int | None) -> None:
    dtype, _, _ = DTYPES[prefix]
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    tol = 2e-5 if prefix == "s" else 1e-12
    for ta in "NT":
        for tb in "nt":                     # lower case is BLAS's too
            pad = (m + n + k) % 3
            a, opa, lda = _operand(rng, m, k, ta, pad, dtype)
            b, opb, ldb = _operand(rng, k, n, tb, 2 - pad, dtype)
            c0 = np.asfortranarray(rng.standard_normal((m + 1, n)).astype(dtype))
            for alpha, beta in ((1.0, 0.0), (1.5, 0.5), (-0.25, 1.0)):
                c = c0.copy(order="F")
                call(prefix, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, m + 1, bits)
                want = alpha * (opa @ opb) + beta * c0[:m].astype(np.float64)
                scale = max(1.0, float(np.abs(want).max()))
                np.testing.assert_allclose(c[:m], want, rtol=0, atol=tol * scale * max(1, k),
                                           err_msg=f"{ta}{tb} alpha={alpha} beta={beta}")
                # the padding row of C is never written
                np.testing.assert_array_equal(c[m], c0[m])


@pytest.mark.parametrize("prefix", ["s", "d"])
def test_beta_zero_does_not_read_c(prefix: str) -> None:
    """As BLAS: with beta 0, C's old values (NaN here) are overwritten, not scaled."""
    dtype, _, _ = DTYPES[prefix]
    rng = np.random.default_rng(1)
    for m, n in ((40, 30), (8, 70)):         # also the transposed orientation
        a = np.asfortranarray(rng.standard_normal((m, 20)).astype(dtype))
        b = np.asfortranarray(rng.standard_normal((20, n)).astype(dtype))
        c = np.full((m, n), np.nan, dtype=dtype, order="F")
        call(prefix, "N", "N", m, n, 20, 1.0, a, m, b, 20, 0.0, c, m)
        assert np.isfinite(c).all()
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("prefix", ["s", "d"])
def test_no_product(prefix: str) -> None:
    """k == 0 or alpha == 0: C := beta * C (zeros when beta is 0, even over NaN); an
    empty C is left alone."""
    dtype, _, _ = DTYPES[prefix]
    a = np.ones((4, 3), dtype=dtype, order="F")
    b = np.ones((3, 5), dtype=dtype, order="F")
    c = np.full((4, 5), 2.0, dtype=dtype, order="F")
    call(prefix, "N", "N", 4, 5, 0, 1.0, a, 4, b, 3, 0.5, c, 4)
    np.testing.assert_array_equal(c, 1.0)
    call(prefix, "N", "N", 4, 5, 3, 0.0, a, 4, b, 3, 3.0, c, 4)
    np.testing.assert_array_equal(c, 3.0)
    c[:] = np.nan
    call(prefix, "N", "N", 4, 5, 3, 0.0, a, 4, b, 3, 0.0, c, 4)
    np.testing.assert_array_equal(c, 0.0)
    call(prefix, "N", "N", 0, 5, 3, 1.0, a, 4, b, 3, 0.0, c, 4)
    np.testing.assert_array_equal(c, 0.0)


def test_fallback_without_memory() -> None:
    """When malloc fails (address space capped in a child), the same loops run over
    packing buffers on the stack and give the same product."""
    code = textwrap.dedent("""
        import resource, numpy as np
        from tests.test_gemm import call
        from llgrad.runtime import blas
        blas._own_address("s")
        rng = np.random.default_rng(0)
        m, n, k = 300, 700, 700   # packing buffers of ~750 KB
        a = np.asfortranarray(rng.standard_normal((k, m)).astype(np.float32))
        b = np.asfortranarray(rng.standard_normal((k, n)).astype(np.float32))
        c = np.zeros((m, n), np.float32, order="F")
        want = a.T.astype(np.float64) @ b
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (1 << 24), resource.RLIM_INFINITY))
        hog = []
        try:                        # take every byte the cap leaves ...
            while True:
                hog.append(bytearray(1 << 16))
        except MemoryError:
            pass
        del hog[-4:]                # ... but 256 KB for the call itself
        try:
            bytearray(1 << 19)
            print("unlimited")
        except MemoryError:
            call("s", "T", "N", m, n, k, 1.0, a, k, b, k, 0.0, c, m)
            hog.clear()
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)
            print(float(np.abs(c - want).max()))
    """)
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc to size the address-space cap")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYTHONPATH=root))
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    if last == "unlimited":
        pytest.skip("the address-space cap did not take effect here")
    assert float(last) < 1e-3


def test_module_is_hand_vectorized() -> None:
    """The module takes the light pipeline and its micro-kernel is vector FMAs."""
    from llgrad.codegen.target import get_target
    bits = blas._own_vector_bits()
    text = gemm.build(bits, "s")
    assert text.startswith(HAND_VECTORIZED)
    asm = get_target().assembly(text)
    assert "vfmadd" in asm
    register = "zmm" if bits == 512 else "ymm"
    assert register in asm


def test_backend_choice() -> None:
    """Default: llgrad's gemm for float32/float64 (unless MKL on an Intel CPU), the
    library for complex; LLGRAD_BLAS picks; a wrong value is refused."""
    if blas._mkl() is None:
        assert blas.backend(dt.float32) == "llgrad" and blas.backend(dt.float64) == "llgrad"
    assert blas.backend(dt.complex64) in ("openblas", "mkl")
    assert blas.runs_single_threaded(4096, 4096, 4096, dt.float32) or \
        blas.backend(dt.float32) != "llgrad"
    code = ("from llgrad.runtime import blas; from llgrad.ir import dtypes as dt; "
            "print(blas.backend(dt.float32))")
    for choice, want in (("openblas", "openblas"), ("llgrad", "llgrad")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=dict(os.environ, LLGRAD_BLAS=choice), timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == want, out.stderr
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, LLGRAD_BLAS="fastest"), timeout=120)
    assert out.returncode != 0 and "LLGRAD_BLAS must be" in out.stderr


def test_blocking_fits_registers() -> None:
    """The micro-tile's accumulators plus its loads fit the register file."""
    for bits, registers in ((512, 32), (256, 16)):
        for blk in gemm.blockings(bits).values():
            assert blk.mr % blk.lanes == 0
            assert blk.mr_vectors * blk.nr + blk.mr_vectors + 1 <= registers
            assert blk.mc % blk.mr == 0 and blk.nc % blk.nr == 0


_TILE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                         ctypes.c_int64, ctypes.c_int64)
_GEMM_EX = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 15)


@pytest.mark.parametrize("m,n,k", [(100, 50, 600), (10, 128, 40), (1000, 30, 20),
                                   (33, 7, 300)])
def test_tile_callback_sees_each_finished_tile_once(m: int, n: int, k: int) -> None:
    """`gemm_ex` hands every element of C to the tile function exactly once, after its
    last k slab (the values are final when it is called), in BLAS's indices, also when the
    product runs transposed (10 x 128) or in several blocks of rows (1000)."""
    rng = np.random.default_rng(m + n + k)
    a = np.asfortranarray(rng.standard_normal((m, k)).astype(np.float32))
    b = np.asfortranarray(rng.standard_normal((k, n)).astype(np.float32))
    c = np.zeros((m, n), np.float32, order="F")
    want = a.astype(np.float64) @ b
    seen = np.zeros((m, n), np.int64)
    errors: list[str] = []

    def tile(ctx: int, m0: int, n0: int, rows: int, cols: int) -> None:
        block = c[m0:m0 + rows, n0:n0 + cols]
        if block.shape != (rows, cols):
            errors.append(f"block ({m0}, {n0}, {rows}, {cols}) outside C")
            return
        seen[m0:m0 + rows, n0:n0 + cols] += 1
        if np.abs(block - want[m0:m0 + rows, n0:n0 + cols]).max() > 1e-3 * np.sqrt(k):
            errors.append(f"block ({m0}, {n0}) not final")

    callback = _TILE(tile)
    chars = [ctypes.c_char(b"N"), ctypes.c_char(b"N")]
    ints = [ctypes.c_int(v) for v in (m, n, k, m, k, m)]
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    p = ctypes.addressof
    _GEMM_EX(blas._own_address("s", ex=True))(
        p(chars[0]), p(chars[1]), p(ints[0]), p(ints[1]), p(ints[2]), p(alpha), a.ctypes.data,
        p(ints[3]), b.ctypes.data, p(ints[4]), p(beta), c.ctypes.data, p(ints[5]),
        ctypes.cast(callback, ctypes.c_void_p), None)
    assert not errors, errors[:3]
    np.testing.assert_array_equal(seen, 1)


def test_fork_during_a_background_build() -> None:
    """A child forked while the parent builds the gemm in the background builds its own
    (the parent's thread does not exist in the child, so waiting for it would hang)."""
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    code = textwrap.dedent("""
        import os, threading, numpy as np
        from llgrad.runtime import blas
        future = blas._Future()                 # a build the parent never finishes
        blas._own_futures["d"] = future
        pid = os.fork()
        if pid == 0:
            try:
                import llgrad as lg
                a = lg.tensor(np.eye(3)); b = lg.tensor(np.arange(9.0).reshape(3, 3))
                ok = np.array_equal((a @ b).numpy(), np.arange(9.0).reshape(3, 3))
                os._exit(0 if ok else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the forked child waited for the parent's build")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0"
