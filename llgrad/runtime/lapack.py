"""LAPACK for the eager linear-algebra ops, called through function pointers.

SciPy's Python wrappers (`scipy.linalg.lapack.dpotrf` ...) check and convert their
arguments, copy, and allocate workspaces on every call: for a 5x5 matrix that is most of
the time. This module calls the routines themselves, as `runtime.blas` does for gemm: the
address of `?potrf` etc. is taken once, from the OpenBLAS that SciPy's wheels bundle
(`scipy_dpotrf_`, 32-bit integers; opening it directly avoids importing
`scipy.linalg.cython_lapack`, 150 ms) or else from the PyCapsules that
`scipy.linalg.cython_lapack.__pyx_capi__` exports, and a `ctypes.CFUNCTYPE` prototype is
built once per routine (`PYFUNCTYPE`: the GIL is held, as SciPy's wrappers hold it).
Fortran convention: every argument by pointer, 32-bit integers,
column-major matrices; a character argument is a pointer to one byte (its hidden length
argument is not passed, as SciPy's Cython wrappers do not pass it).

The helpers below take NumPy arrays that are already column-major batches: a batch of
(m, n) matrices is stored as a C-contiguous (..., n, m) array (each matrix's transpose in
row-major order is the matrix in column-major order), so the caller makes one batched copy
(`fortran_batch`) and every matrix is reached by pointer arithmetic. Each returns LAPACK's
`info` per matrix (an int32 array of the batch shape); nothing here raises for a value-
dependent failure: the callers decide (torch's messages live in `llgrad.linalg`).
Workspace sizes are queried once per (routine, dtype, shape) and cached.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
_VOIDP = ctypes.c_void_p

# how many pointer arguments each routine takes
_NARGS = {"potrf": 5, "potrs": 8, "potri": 5, "getrf": 6, "getrs": 9, "getri": 7,
          "gesv": 8, "geqrf": 8, "sytrf": 8, "hetrf": 8, "sytrs": 9, "hetrs": 9,
          "trtrs": 10, "trsm": 11}
_BLAS = {"trsm"}

_CHARS = {c: ctypes.create_string_buffer(c.encode(), 1) for c in "LUNTCRD"}
_CHAR_ADDR = {c: ctypes.addressof(b) for c, b in _CHARS.items()}
_ONES = {np.dtype(n): np.ones(1, n) for n in _PREFIX}
_ONE_ADDR = {d: a.ctypes.data for d, a in _ONES.items()}


def _capsule_address(name: str, blas: bool) -> int:
    from . import blas as _blas
    lib = _blas._scipy_openblas()
    if lib is not None:
        try:
            found = ctypes.cast(getattr(lib, f"scipy_{name}_"), _VOIDP).value
        except AttributeError:
            found = None
        if found:
            return int(found)
    if blas:
        from scipy.linalg import cython_blas as module
    else:
        from scipy.linalg import cython_lapack as module
    return _blas._capsule_pointer(module.__pyx_capi__[name])


_routines: dict[tuple[str, str], Any] = {}


def routine(dtype: np.dtype, name: str) -> Any:
    """The ctypes function for LAPACK's (or BLAS's, `trsm`) `name` of `dtype` (every
    argument an address), made once."""
    key = (dtype.char, name)
    fn = _routines.get(key)
    if fn is None:
        full = _PREFIX[np.dtype(dtype).name] + name
        # PYFUNCTYPE holds the GIL through the call: a tiny solve takes a microsecond,
        # and releasing the GIL lets another thread take it for up to the switch
        # interval (5 ms)
        proto = ctypes.PYFUNCTYPE(None, *([_VOIDP] * _NARGS[name]))
        fn = _routines[key] = proto(_capsule_address(full, name in _BLAS))
    return fn


def address(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first element (`ctypes.c_char.from_buffer`
    takes half the time of `a.ctypes.data`; read-only arrays take the slow way)."""
    try:
        return _addressof(_from_buffer(a))       # type: ignore[arg-type]
    except (TypeError, ValueError):
        return a.ctypes.data


_addressof = ctypes.addressof
_from_buffer = ctypes.c_char.from_buffer


def available() -> bool:
    """Whether the LAPACK routines can be reached (SciPy is installed)."""
    try:
        routine(np.dtype(np.float64), "potrf")
    except Exception:           # noqa: BLE001 - no SciPy, or a build without the symbol
        return False
    return True


def fortran_batch(a: np.ndarray) -> np.ndarray:
    """A C-contiguous (..., n, m) copy of a (..., m, n) batch: each matrix in column-major
    order, as LAPACK reads it."""
    out = np.empty(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype)
    np.copyto(out, np.swapaxes(a, -1, -2))
    return out


def from_fortran(f: np.ndarray) -> np.ndarray:
    """The (..., m, n) row-major view of a column-major batch (..., n, m)."""
    return np.swapaxes(f, -1, -2)


def _ints(*values: int) -> tuple[Any, int]:
    """A ctypes int32 array holding `values` (kept alive by the caller) and its address."""
    arr = (ctypes.c_int * len(values))(*values)
    return arr, ctypes.addressof(arr)


_work_lock = threading.Lock()
_lwork: dict[tuple, int] = {}


def _query(dtype: np.dtype, name: str, key: tuple, call: Any) -> int:
    """The optimal workspace length of `name` for `key` (asked once: `call(work_address,
    lwork_address)` with lwork = -1)."""
    k = (name, dtype) + key
    n = _lwork.get(k)
    if n is None:
        work = np.zeros(1, dtype)
        arr, addr = _ints(-1)
        call(address(work), addr)
        n = max(1, int(work[0].real))
        with _work_lock:
            _lwork[k] = n
    return n


def _batch(f: np.ndarray) -> tuple[int, int]:
    """(number of matrices, bytes per matrix) of a C-contiguous batch; no matrices when
    they are empty (LAPACK has nothing to do, and would refuse a zero leading dimension)."""
    m, n = f.shape[-2:]
    return (f.size // (m * n) if m * n else 0), m * n * f.itemsize


def potrf(f: np.ndarray, uplo: str) -> np.ndarray:
    """Cholesky in place on a column-major batch of n x n matrices (`uplo` 'L' or 'U'
    names the triangle read and written); info per matrix."""
    fn = routine(f.dtype, "potrf")
    n = f.shape[-1]
    count, step = _batch(f)
    info = np.zeros(f.shape[:-2], np.int32)
    flat = info.reshape(-1)
    ints, ia = _ints(n, 0)
    base = address(f)
    u = _CHAR_ADDR[uplo]
    for i in range(count):
        fn(u, ia, base + i * step, ia, ia + 4)
        if ints[1]:
            flat[i] = ints[1]
    return info


def potrs(c: np.ndarray, b: np.ndarray, uplo: str) -> np.ndarray:
    """Solve with Cholesky factors: `c` (..., n, n) and `b` (..., k, n) column-major
    batches of the same batch shape; `b` is overwritten with the solution."""
    fn = routine(c.dtype, "potrs")
    n = c.shape[-1]
    k = b.shape[-2]
    count, cstep = _batch(c)
    bstep = n * k * b.itemsize
    if k == 0:
        count = 0
    info = np.zeros(c.shape[:-2], np.int32)
    flat = info.reshape(-1)
    ints, ia = _ints(n, k, 0)
    cb, bb = address(c), address(b)
    u = _CHAR_ADDR[uplo]
    for i in range(count):
        fn(u, ia, ia + 4, cb + i * cstep, ia, bb + i * bstep, ia, ia + 8)
        if ints[2]:
            flat[i] = ints[2]
    return info


def getrf(f: np.ndarray, piv: np.ndarray) -> np.ndarray:
    """LU with partial pivoting in place on a column-major batch (..., n, m) of m x n
    matrices; `piv` (..., min(m, n)) int32 receives the 1-based pivots. Info per matrix."""
    fn = routine(f.dtype, "getrf")
    n, m = f.shape[-2:]
    count, step = _batch(f)
    k = min(m, n)
    info = np.zeros(f.shape[:-2], np.int32)
    flat = info.reshape(-1)
    ints, ia = _ints(m, n, max(1, m), 0)
    base, pb = address(f), address(piv)
    for i in range(count):
        fn(ia, ia + 4, base + i * step, ia + 8, pb + i * k * 4, ia + 12)
        if ints[3]:
            flat[i] = ints[3]
    return info


def gesv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve A X = B by LU: `a` (..., n, n) and `b` (..., k, n) column-major batches of
    the same batch shape; `a` is overwritten with the LU factors and `b` with X (where
    info is 0). Info per matrix."""
    fn = routine(a.dtype, "gesv")
    n = a.shape[-1]
    k = b.shape[-2]
    count, astep = _batch(a)
    bstep = n * k * b.itemsize
    if k == 0:
        count = 0
    info = np.zeros(a.shape[:-2], np.int32)
    flat = info.reshape(-1)
    piv = np.empty(max(1, n), np.int32)
    ints, ia = _ints(n, k, max(1, n), 0)
    ab, bb, pb = address(a), address(b), address(piv)
    for i in range(count):
        fn(ia, ia + 4, ab + i * astep, ia + 8, pb, bb + i * bstep, ia + 8, ia + 12)
        if ints[3]:
            flat[i] = ints[3]
    return info


def geqrf(f: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Householder QR in place on a column-major batch (..., n, m) of m x n matrices;
    `tau` (..., min(m, n)) receives the scalars. Info per matrix."""
    fn = routine(f.dtype, "geqrf")
    n, m = f.shape[-2:]
    count, step = _batch(f)
    k = min(m, n)
    ints, ia = _ints(m, n, max(1, m), 0, 0)
    scratch = np.zeros(max(1, m * n), f.dtype)
    tscratch = np.zeros(max(1, k), f.dtype)
    lwork = _query(f.dtype, "geqrf", (m, n), lambda w, l: fn(
        ia, ia + 4, address(scratch), ia + 8, address(tscratch), w, l, ia + 12))
    work = np.empty(lwork, f.dtype)
    ints[4] = lwork
    info = np.zeros(f.shape[:-2], np.int32)
    flat = info.reshape(-1)
    base, tb, wb = address(f), address(tau), address(work)
    tstep = k * f.itemsize
    for i in range(count):
        fn(ia, ia + 4, base + i * step, ia + 8, tb + i * tstep, wb, ia + 16, ia + 12)
        if ints[3]:
            flat[i] = ints[3]
    return info


def sytrf(f: np.ndarray, piv: np.ndarray, uplo: str, hermitian: bool) -> np.ndarray:
    """Bunch-Kaufman LDL in place on a column-major batch of n x n symmetric (Hermitian:
    `hermitian`, complex dtypes) matrices; `piv` (..., n) int32 receives LAPACK's pivots.
    Info per matrix."""
    name = "hetrf" if hermitian and f.dtype.kind == "c" else "sytrf"
    fn = routine(f.dtype, name)
    n = f.shape[-1]
    count, step = _batch(f)
    ints, ia = _ints(n, 0, 0)
    u = _CHAR_ADDR[uplo]
    scratch = np.zeros(max(1, n * n), f.dtype)
    pscratch = np.zeros(max(1, n), np.int32)
    lwork = _query(f.dtype, name, (n,), lambda w, l: fn(
        u, ia, address(scratch), ia, address(pscratch), w, l, ia + 4))
    work = np.empty(lwork, f.dtype)
    ints[2] = lwork
    info = np.zeros(f.shape[:-2], np.int32)
    flat = info.reshape(-1)
    base, pb, wb = address(f), address(piv), address(work)
    for i in range(count):
        fn(u, ia, base + i * step, ia, pb + i * n * 4, wb, ia + 8, ia + 4)
        if ints[1]:
            flat[i] = ints[1]
    return info


def sytrs(f: np.ndarray, piv: np.ndarray, b: np.ndarray, uplo: str, hermitian: bool
          ) -> np.ndarray:
    """Solve with sytrf's (hetrf's) factors: `f` (..., n, n), `piv` (..., n), `b`
    (..., k, n), column-major batches of one batch shape; `b` is overwritten."""
    name = "hetrs" if hermitian and f.dtype.kind == "c" else "sytrs"
    fn = routine(f.dtype, name)
    n = f.shape[-1]
    k = b.shape[-2]
    count, step = _batch(f)
    bstep = n * k * b.itemsize
    if k == 0:
        count = 0
    ints, ia = _ints(n, k, 0)
    u = _CHAR_ADDR[uplo]
    info = np.zeros(f.shape[:-2], np.int32)
    flat = info.reshape(-1)
    base, pb, bb = address(f), address(piv), address(b)
    for i in range(count):
        fn(u, ia, ia + 4, base + i * step, ia, pb + i * n * 4, bb + i * bstep, ia, ia + 8)
        if ints[2]:
            flat[i] = ints[2]
    return info


def trsm(a: np.ndarray, b: np.ndarray, lower: bool, unit: bool) -> None:
    """Triangular solve A X = B (BLAS trsm, no singularity check: a zero diagonal gives
    inf/NaN): `a` (..., n, n) and `b` (..., k, n) column-major batches of one batch
    shape; `b` is overwritten with X."""
    fn = routine(a.dtype, "trsm")
    n = a.shape[-1]
    k = b.shape[-2]
    count, astep = _batch(a)
    bstep = n * k * b.itemsize
    if k == 0:
        count = 0
    ints, ia = _ints(n, k, max(1, n))
    one = _ONE_ADDR[a.dtype]
    side, uplo = _CHAR_ADDR["L"], _CHAR_ADDR["L" if lower else "U"]
    trans, diag = _CHAR_ADDR["N"], _CHAR_ADDR["U" if unit else "N"]
    ab, bb = address(a), address(b)
    for i in range(count):
        fn(side, uplo, trans, diag, ia, ia + 4, one, ab + i * astep, ia + 8,
           bb + i * bstep, ia + 8)


def getrs(lu: np.ndarray, piv: np.ndarray, b: np.ndarray, trans: str) -> None:
    """Solve with getrf's factors: `lu` (..., n, n) column-major, `piv` (..., n) int32
    1-based pivots, `b` (..., k, n) column-major, one batch shape; `trans` 'N' (A X = B),
    'T' (A^T X = B) or 'C' (A^H X = B). `b` is overwritten with X. The pivots must lie
    in 1..n (the caller checks)."""
    fn = routine(lu.dtype, "getrs")
    n = lu.shape[-1]
    k = b.shape[-2]
    count, astep = _batch(lu)
    bstep = n * k * b.itemsize
    if k == 0:
        count = 0
    ints, ia = _ints(n, k, 0)
    t = _CHAR_ADDR[trans]
    ab, pb, bb = address(lu), address(piv), address(b)
    for i in range(count):
        fn(t, ia, ia + 4, ab + i * astep, ia, pb + i * n * 4, bb + i * bstep, ia, ia + 8)
