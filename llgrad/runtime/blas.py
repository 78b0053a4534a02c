"""BLAS for generated code: the addresses of `s/d/c/zgemm` (llgrad's own float32/float64
gemm, MKL's or SciPy's OpenBLAS), and OpenBLAS's threads.

`scipy.linalg.cython_blas` exports its wrappers as PyCapsules in `__pyx_capi__`; the
capsule's pointer is a C function with the Fortran convention (every argument by pointer,
32-bit integers, column-major matrices):

    void gemm(char *transa, char *transb, int *m, int *n, int *k, T *alpha, T *a, int *lda,
              T *b, int *ldb, T *beta, T *c, int *ldc)

This is the route Numba takes too: it needs no path to a shared library and no link step,
and it is the BLAS SciPy itself uses (NumPy's bundled OpenBLAS exports only renamed, 64-bit
integer symbols). Kernels receive the address in their argument block and call through it,
so no process address is baked into a (disk-cached) object. (Binding a name with
`Target.add_symbol` does not reach the ORC JIT: `llvm.add_symbol` is not searched by its
current-process generator; `JITLibraryBuilder.import_symbol` would be.)

Threads: SciPy's OpenBLAS is built with pthreads and keeps its own pool of
`OPENBLAS_NUM_THREADS` threads (default: one per CPU; 2 on the reference machine). A gemm
runs on `min(pool, m*n*k // OPENBLAS_MNK_PER_THREAD)` threads, at least one
(`SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD = 65536 * 4` in its `interface/gemm.c`;
measured here: 80x80x80 stays on one thread, 64x128x64 = 524288 uses two). `threads()` asks
the library itself, so a thread count changed at run time (threadpoolctl) is seen.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading

from ..codegen import gemm, loops, worker
from ..codegen.target import get_target
from ..ir import dtypes as dt
from ..ir.dtypes import DType

INT32_MAX = 2**31 - 1
OPENBLAS_MNK_PER_THREAD = 65536 * 4
_CAPSULES = {"float32": "sgemm", "float64": "dgemm", "complex64": "cgemm", "complex128": "zgemm"}


def _capsule_pointer(capsule: object) -> int:
    """The pointer a PyCapsule holds (its name must be passed back to open it)."""
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    address = api.PyCapsule_GetPointer(capsule, name)
    if not address:
        raise RuntimeError("llgrad: a SciPy BLAS capsule holds a null pointer")
    return int(address)


# --------------------------------------------------------------------------------------
# The backend: Intel MKL on an Intel CPU when its runtime library is installed (`pip
# install mkl`, the `llgrad[mkl]` extra), else SciPy's OpenBLAS. MKL runs sequential (one
# thread per call: llgrad splits large products into panels on its own thread pool);
# measured on a Xeon, one core of MKL does 160-190 GFLOP/s on B2's and B8's shapes where
# one core of OpenBLAS does 150-156; on an AMD EPYC, MKL was level on the large shapes and
# 2x slower on the skinny ones (`_intel_cpu`). `LLGRAD_BLAS=openblas|mkl` chooses; "mkl"
# when MKL is missing raises.
# --------------------------------------------------------------------------------------

_MKL_SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL for MKL_Set_Threading_Layer


def _find_mkl() -> str | None:
    """The environment's own libmkl_rt (where `pip install mkl` puts it), else the
    system's. (In that order: `ctypes.util.find_library` runs ldconfig and a compiler in
    subprocesses, 13 ms of the first compiled call's warm start here.)"""
    import ctypes.util
    import sys

    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        for version in ("3", "2", "1"):
            path = os.path.join(prefix, "lib", f"libmkl_rt.so.{version}")
            if os.path.exists(path):
                return path
    return ctypes.util.find_library("mkl_rt")


def _intel_cpu() -> bool:
    """Whether the CPU is Intel's (MKL's default on others: on an AMD EPYC here MKL's
    sgemm took 45 us for 128x512 @ 512x10 where OpenBLAS took 21, and the B2 step ran 6%
    slower)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return "intel" in platform.processor().lower()


@functools.cache
def _choice() -> str:
    """`LLGRAD_BLAS`, checked: "", "llgrad", "mkl" or "openblas"."""
    choice = os.environ.get("LLGRAD_BLAS", "").lower()
    if choice not in ("", "llgrad", "mkl", "openblas"):
        raise ValueError(f"LLGRAD_BLAS must be 'llgrad', 'mkl' or 'openblas', got {choice!r}")
    return choice


@functools.cache
def _mkl() -> ctypes.CDLL | None:
    """MKL's runtime library, set to sequential, or None (not installed or not chosen)."""
    choice = _choice()
    if choice in ("llgrad", "openblas") or (choice == "" and not _intel_cpu()):
        return None
    path = _find_mkl()
    lib = None
    if path is not None:
        try:
            lib = ctypes.CDLL(path)
            lib.MKL_Set_Threading_Layer.argtypes = [ctypes.c_int]
            lib.MKL_Set_Threading_Layer.restype = ctypes.c_int
            lib.MKL_Set_Threading_Layer(_MKL_SEQUENTIAL)
        except (OSError, AttributeError):
            lib = None
    if lib is None and choice == "mkl":
        raise RuntimeError(
            "LLGRAD_BLAS=mkl but MKL's runtime library (libmkl_rt) was not "
            "found; install it with `pip install mkl` (llgrad[mkl])"
        )
    if lib is not None:
        _initialize_in_background(lib)
    return lib


def _initialize_in_background(lib: ctypes.CDLL) -> threading.Thread:
    """MKL's first gemm call initializes the library (CPU dispatch, kernel selection):
    ~10 ms here. MKL is loaded when a graph with a matmul is being compiled or an eager
    matmul is planned, so a 2x2 sgemm on a helper thread (ctypes releases the GIL) does
    that work while the compile goes on, instead of inside the first real call."""

    def run() -> None:
        two, one, zero = ctypes.c_int(2), ctypes.c_float(1.0), ctypes.c_float(0.0)
        a, b, c = (
            (ctypes.c_float * 4)(1, 2, 3, 4),
            (ctypes.c_float * 4)(1, 0, 0, 1),
            (ctypes.c_float * 4)(),
        )
        n = ctypes.c_char_p(b"N")
        try:
            lib.sgemm_(
                n,
                n,
                ctypes.byref(two),
                ctypes.byref(two),
                ctypes.byref(two),
                ctypes.byref(one),
                a,
                ctypes.byref(two),
                b,
                ctypes.byref(two),
                ctypes.byref(zero),
                c,
                ctypes.byref(two),
            )
        except (OSError, AttributeError):
            pass

    thread = threading.Thread(target=run, daemon=True, name="llgrad-mkl-init")
    thread.start()
    return thread


# --------------------------------------------------------------------------------------
# llgrad's own gemm (`codegen/gemm.py`) for float32 and float64, where the CPU has 256- or
# 512-bit vectors with FMA. Measured on an AMD EPYC (Zen 5, AVX-512), one core, float32:
# 200-230 GFLOP/s on B2's and B8's shapes, where SciPy's OpenBLAS ran 220-245 with its own
# kernel choice and 125 with the AVX2 kernels `OPENBLAS_CORETYPE=Haswell` selects. It is
# the default there unless MKL is chosen (on an Intel CPU with MKL installed, as before);
# `LLGRAD_BLAS=openblas|mkl` chooses a library, `LLGRAD_BLAS=llgrad` insists on it.
# Complex products and matrix-vector products (gemv) always call the library.
# --------------------------------------------------------------------------------------

_OWN_DTYPES = ("float32", "float64")


@functools.cache
def _own_vector_bits() -> int | None:
    """The register width llgrad's gemm is generated for, or None (no such CPU)."""
    features = get_target().features.split(",")
    if "+avx512f" in features:
        return 512
    if "+avx2" in features and "+fma" in features:
        return 256
    return None


@functools.cache
def _own(dtype: DType) -> bool:
    """Whether `dtype`'s gemm is llgrad's own (decided once per process, as the choice of
    library is)."""
    if dtype.name not in _OWN_DTYPES:
        return False
    choice = _choice()
    if choice in ("openblas", "mkl"):
        return False
    if choice == "" and _mkl() is not None:
        return False
    bits = _own_vector_bits()
    if bits is None and choice == "llgrad":
        raise RuntimeError(
            "LLGRAD_BLAS=llgrad needs a CPU with AVX2 and FMA or AVX-512; use 'openblas' or 'mkl'"
        )
    return bits is not None


_own_modules: list[object] = []  # the linked gemm objects live with the process
_own_lock = threading.Lock()
_own_futures: dict[str, "_Future"] = {}


class _Future:
    """One gemm module's compile, run by whichever thread asks first."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.addresses: dict[str, int] = {}
        self.error: BaseException | None = None


def _source_key(bits: int, prefix: str) -> str:
    """What the generated gemm module depends on: its generator's source, the helpers it
    uses and the settings (the target's fingerprint adds the versions and the CPU)."""
    import hashlib

    digest = hashlib.sha256(f"{bits}|{prefix}".encode())
    for module in (gemm, loops, worker):
        with open(os.path.abspath(module.__file__), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def _build_own(prefix: str, future: _Future) -> None:
    try:
        bits = _own_vector_bits()
        assert bits is not None
        symbols = [f"llgrad_{prefix}gemm", f"llgrad_{prefix}gemm_ex"]
        compiled = get_target().compile_generated(
            _source_key(bits, prefix), lambda: gemm.build(bits, prefix), symbols, symbols[0]
        )
        _own_modules.append(compiled)
        future.addresses = dict(compiled.addresses)
    except BaseException as e:  # re-raised in every thread that waits for it
        future.error = e
    finally:
        future.done.set()


def _forget_unfinished() -> None:
    """In a forked child: a build that was running in the parent has no thread here, so
    its future would never finish; the child builds (or loads) the module itself."""
    global _own_lock
    _own_lock = threading.Lock()
    for prefix, future in list(_own_futures.items()):
        if not future.done.is_set():
            del _own_futures[prefix]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_unfinished)


def _own_future(prefix: str, background: bool) -> _Future:
    with _own_lock:
        future = _own_futures.get(prefix)
        start = future is None
        if start:
            future = _own_futures[prefix] = _Future()
    assert future is not None
    if start:
        if background:
            threading.Thread(
                target=_build_own, args=(prefix, future), daemon=True, name=f"llgrad-{prefix}gemm"
            ).start()
        else:
            _build_own(prefix, future)
    return future


def prepare(dtype: DType) -> None:
    """Start building `dtype`'s gemm in the background if it will be llgrad's own (a graph
    with a matmul calls this before its own compile, so the two overlap). Only with
    compile workers: in-process, LLVM would run in two threads on one target machine."""
    if _own(dtype) and get_target().workers:
        _own_future(_CAPSULES[dtype.name][0], background=True)


def _own_address(prefix: str, ex: bool = False) -> int:
    """The address of `llgrad_?gemm` (or, `ex`, of `llgrad_?gemm_ex`)."""
    future = _own_future(prefix, background=False)
    future.done.wait()
    if future.error is not None:
        raise future.error
    return future.addresses[f"llgrad_{prefix}gemm" + ("_ex" if ex else "")]


def tile_epilogues(dtype: DType) -> bool:
    """Whether a matmul of `dtype` runs its epilogue tile by tile inside the gemm (llgrad's
    own gemm: `gemm_ex_address`); otherwise an epilogue runs over each panel after it."""
    return _own(dtype)


def gemm_ex_address(dtype: DType) -> int:
    """`llgrad_sgemm_ex` / `llgrad_dgemm_ex` (only where `tile_epilogues(dtype)`)."""
    if not _own(dtype):
        raise RuntimeError(
            f"llgrad BLAS: no tile-epilogue gemm for {dtype.name} with the {backend(dtype)} backend"
        )
    return _own_address(_CAPSULES[dtype.name][0], ex=True)


def backend(dtype: DType | None = None) -> str:
    """ "llgrad", "mkl" or "openblas": whose gemm compiled and eager matmuls of `dtype`
    call (float32 when no dtype is given)."""
    if _own(dtype or dt.float32):
        return "llgrad"
    return "mkl" if _mkl() is not None else "openblas"


@functools.cache
def gemm_address(dtype: DType) -> int:
    """The address of the `sgemm`/`dgemm`/`cgemm`/`zgemm` (Fortran convention) for
    `dtype`: llgrad's own, MKL's or SciPy's."""
    if _own(dtype):
        return _own_address(_CAPSULES[dtype.name][0])
    return _routine_address(dtype, "gemm")


@functools.cache
def gemv_address(dtype: DType) -> int:
    """The address of the `sgemv`/`dgemv`/`cgemv`/`zgemv` for `dtype` (matrix-vector
    products; same source as `gemm_address`)."""
    return _routine_address(dtype, "gemv")


def _routine_address(dtype: DType, routine: str) -> int:
    if dtype.name not in _CAPSULES:
        raise TypeError(
            f"llgrad BLAS: no {routine} for {dtype.name}; BLAS covers float32, "
            f"float64, complex64 and complex128"
        )
    name = _CAPSULES[dtype.name][0] + routine  # "s" + "gemv"
    mkl = _mkl()
    if mkl is not None:
        return ctypes.cast(getattr(mkl, name + "_"), ctypes.c_void_p).value
    bundled = _scipy_openblas()
    if bundled is not None:
        try:
            return ctypes.cast(getattr(bundled, f"scipy_{name}_"), ctypes.c_void_p).value
        except AttributeError:
            pass
    try:
        from scipy.linalg import cython_blas
    except ImportError as e:  # scipy is a declared dependency
        raise RuntimeError(f"llgrad matmul needs SciPy's BLAS: {e}") from e
    return _capsule_pointer(cython_blas.__pyx_capi__[name])


# --------------------------------------------------------------------------------------
# OpenBLAS's own thread pool
# --------------------------------------------------------------------------------------

_GET_THREADS_NAMES = (
    "scipy_openblas_get_num_threads",
    "openblas_get_num_threads",
    "openblas_get_num_threads_",
)
_SET_THREADS_NAMES = (
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads",
    "openblas_set_num_threads_",
)


@functools.cache
def _scipy_openblas() -> ctypes.CDLL | None:
    """The OpenBLAS that SciPy's wheels bundle (`scipy.libs/libscipy_openblas*`, 32-bit
    integers, routines named `scipy_sgemm_`), opened directly: importing
    `scipy.linalg.cython_blas` costs 150 ms here (SciPy's array-API layer), most of a warm
    start's first compiled call. None when SciPy links another BLAS (then `cython_blas`'s
    capsules are used)."""
    import glob
    import importlib.util

    spec = importlib.util.find_spec("scipy")  # (finds, does not import)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = os.path.dirname(list(spec.submodule_search_locations)[0])
    for folder in ("scipy.libs", os.path.join("scipy", ".dylibs")):
        for path in sorted(glob.glob(os.path.join(root, folder, "libscipy_openblas*"))):
            if "64_" in os.path.basename(path):  # a 64-bit-integer build: other ABI
                continue
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None


@functools.cache
def _blas_library() -> ctypes.CDLL | None:
    bundled = _scipy_openblas()
    if bundled is not None:
        return bundled
    try:
        from scipy.linalg import cython_blas

        return ctypes.CDLL(cython_blas.__file__)
    except (ImportError, OSError):
        return None


def _function(names: tuple[str, ...], restype: object, argtypes: list) -> object:
    lib = _blas_library()
    if lib is None:
        return None
    for name in names:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        fn.restype = restype
        fn.argtypes = argtypes
        return fn
    return None


@functools.cache
def _set_threads_function() -> ctypes._CFuncPtr | None:
    return _function(_SET_THREADS_NAMES, None, [ctypes.c_int])


@functools.cache
def _threads_function() -> ctypes._CFuncPtr | None:
    """OpenBLAS's `get_num_threads`, found through cython_blas's own dependencies.

    `dlsym` on the handle of `cython_blas`'s shared object searches that object and the
    libraries it needs, so this finds the BLAS SciPy really calls (not NumPy's copy).
    None when SciPy is linked to a BLAS without that function (MKL, reference BLAS).
    """
    return _function(_GET_THREADS_NAMES, ctypes.c_int, [])


def threads() -> int | None:
    """How many threads SciPy's OpenBLAS runs a large gemm on; None if unknown."""
    fn = _threads_function()
    if fn is None:
        return None
    return max(1, int(fn()))


def runs_single_threaded(n: int, m: int, k: int, dtype: DType | None = None) -> bool:
    """True when one gemm of this size and dtype occupies one core only (so callers may
    split). Unknown BLAS libraries are assumed to thread every call, which never
    oversubscribes.
    """
    if dtype is not None and _own(dtype):
        return True  # llgrad's gemm is single-threaded
    if _mkl() is not None:
        return True  # sequential MKL
    t = threads()
    if t is None:
        return False
    return t == 1 or n * m * k < 2 * OPENBLAS_MNK_PER_THREAD


# --------------------------------------------------------------------------------------
# Compiled graphs split large gemms into panels on llgrad's own thread pool, one
# single-threaded BLAS call per panel (two such calls beat one two-threaded OpenBLAS call
# by 4-30% at B2's and B8's sizes on the reference machine, and OpenBLAS's own workers stop
# spinning against ours). While such a graph runs, OpenBLAS is held at one thread; the
# previous count is restored when the last such call returns. Eager matmuls and other
# SciPy users keep OpenBLAS's threads outside those calls.
# --------------------------------------------------------------------------------------

_hold_lock = threading.Lock()
_holders = 0
_saved_threads: int | None = None


def can_hold_single_threaded() -> bool:
    """Whether the backend is OpenBLAS and its thread count can be set."""
    return (
        _mkl() is None and _set_threads_function() is not None and _threads_function() is not None
    )


def hold_single_threaded() -> None:
    global _holders, _saved_threads
    with _hold_lock:
        if _holders == 0:
            _saved_threads = threads()
            if _saved_threads is not None and _saved_threads != 1:
                _set_threads_function()(1)
        _holders += 1


def release_single_threaded() -> None:
    global _holders
    with _hold_lock:
        _holders -= 1
        if _holders == 0 and _saved_threads is not None and _saved_threads != 1:
            _set_threads_function()(_saved_threads)


def splits_gemms(n: int, m: int, k: int, dtype: DType | None = None) -> bool:
    """The policy `passes.lower` gets: a gemm may be split across llgrad's threads when
    the runtime can hold BLAS at one thread meanwhile, or when it runs on one anyway."""
    return (
        (dtype is not None and _own(dtype))
        or can_hold_single_threaded()
        or runs_single_threaded(n, m, k)
    )


def holds_library(dtype: DType) -> bool:
    """Whether a split gemm of `dtype` needs the library held at one thread (not for
    llgrad's own gemm, which never threads)."""
    return not _own(dtype) and can_hold_single_threaded()
