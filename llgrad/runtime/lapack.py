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
The `*_at` forms (`potrf_at`, `getrf_at`, `sytrf_at`, `syevd_at`, `gesdd_at`,
`lstsq_at`) take addresses instead of arrays, so a caller can have LAPACK write into a
new tensor's memory (its info too) with no NumPy view in between. Workspace sizes are
queried once per (routine, dtype, shape) and cached; the integer arguments and the
workspaces themselves are per-thread scratch reused from call to call.
The `*_caller` forms (`potrf_caller`, `getrf_caller`, `sytrf_caller`, `potrs_caller`,
`sytrs_caller`) do that work once per (dtype, sizes, batch count) and return a function
of the varying addresses only, for the call plans of `llgrad.linalg`: one matrix is one
direct call; a batch runs in one foreign call (`_batched`, through the LapackLoop kernel
of `eager.linalg`) instead of a ctypes call per matrix.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from ..codegen.lapack_loop import LapackLoop, build_lapack_loop
from . import blas as _blas
from . import cache as _cache

_PREFIX = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
_VOIDP = ctypes.c_void_p

# how many pointer arguments each routine takes
_NARGS = {
    "potrf": 5,
    "potrs": 8,
    "potri": 5,
    "getrf": 6,
    "getrs": 9,
    "getri": 7,
    "gesv": 8,
    "geqrf": 8,
    "sytrf": 8,
    "hetrf": 8,
    "sytrs": 9,
    "hetrs": 9,
    "trtrs": 10,
    "trsm": 11,
    "syevd": 11,
    "heevd": 13,
    "gesdd": 14,
    "cgesdd": 15,
    "zgesdd": 15,
    "gels": 11,
    "gelss": 13,
    "cgelss": 14,
    "zgelss": 14,
    "gelsd": 14,
    "cgelsd": 15,
    "zgelsd": 15,
    "gelsy": 13,
    "cgelsy": 14,
    "zgelsy": 14,
}
_BLAS = {"trsm"}

_CHARS = {c: ctypes.create_string_buffer(c.encode(), 1) for c in "LUNTCRDVSA"}
_CHAR_ADDR = {c: ctypes.addressof(b) for c, b in _CHARS.items()}
_ONES = {np.dtype(n): np.ones(1, n) for n in _PREFIX}
_ONE_ADDR = {d: a.ctypes.data for d, a in _ONES.items()}


def _capsule_address(name: str, blas: bool) -> int:
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
        nargs = _NARGS.get(full) or _NARGS[name]
        # PYFUNCTYPE holds the GIL through the call: a tiny solve takes a microsecond,
        # and releasing the GIL lets another thread take it for up to the switch
        # interval (5 ms)
        proto = ctypes.PYFUNCTYPE(None, *([_VOIDP] * nargs))
        fn = _routines[key] = proto(_capsule_address(full, name in _BLAS))
    return fn


_addresses: dict[tuple[str, str], int] = {}


def routine_address(dtype: np.dtype, name: str) -> int:
    """The address of LAPACK's (BLAS's) `name` of `dtype` (found once)."""
    key = (dtype.char, name)
    a = _addresses.get(key)
    if a is None:
        a = _addresses[key] = _capsule_address(_PREFIX[np.dtype(dtype).name] + name, name in _BLAS)
    return a


FIXED, PER, OWN = 0, 1, 2  # kinds of a batched call's pointer arguments (`_batched`)


class _NoBlocks:
    """The block pool of a batched caller whose blocks own too much scratch to keep:
    always empty."""

    def pop(self) -> Any:
        """Nothing to take: always raises IndexError."""
        raise IndexError

    def append(self, item: Any) -> None:
        """Drop `item` (nothing is kept)."""
        pass


_cache.register_builder(LapackLoop, build_lapack_loop)

# held GIL, as `runtime.lapack` calls the routines (a tiny factorization takes less time
# than a GIL hand-over)
_LOOP_CALL = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
_loops: dict[int, Any] = {}


def lapack_loop(nargs: int) -> Any:
    """The `LapackLoop` kernel for routines of `nargs` pointer arguments, as a function
    of the argument block's address (compiled once per process; the disk cache keeps the
    object)."""
    fn = _loops.get(nargs)
    if fn is None:
        kernel = _cache.get(LapackLoop(nargs))
        fn = _loops[nargs] = _LOOP_CALL(kernel.address)
        fn.kernel = kernel  # type: ignore[attr-defined]
    return fn


def _batched(dtype: np.dtype, name: str, count: int, args: list[tuple[int, int]]) -> Any:
    """A function running routine `name` of `dtype` on `count` matrices in one foreign call
    (`eager.linalg.lapack_loop`). `args` gives each pointer argument as (FIXED, address):
    the same address for every matrix (a size, a character); (PER, step): an address
    passed to the function (in order) and advanced by `step` bytes per matrix; (OWN,
    nbytes): scratch of the argument block's own (a workspace, an info nobody reads).
    The argument blocks are reused (a pool: a call takes one for itself, so threads never
    share a block or its scratch)."""
    call = lapack_loop(len(args))
    head = [count, routine_address(dtype, name)]
    slots = [2 + 2 * j for j, (kind, _) in enumerate(args) if kind == PER]
    kind_t = ctypes.c_int64 * (2 + 2 * len(args))
    pool: Any = []
    if sum(v for kind, v in args if kind == OWN) > 1 << 20:
        pool = _NoBlocks()  # big scratch: a block per call, freed after

    def block() -> tuple[Any, int]:
        """A new argument block (and its address) holding its own scratch."""
        values = list(head)
        owned = []
        for kind, v in args:
            if kind == OWN:
                scratch = np.zeros(max(1, (v + 15) // 16), np.complex128)  # aligned
                owned.append(scratch)
                values += [address(scratch), 0]
            else:
                values += [v, 0] if kind == FIXED else [0, v]
        b = kind_t(*values)
        b.owned = owned  # type: ignore[attr-defined]
        return b, ctypes.addressof(b)

    if len(slots) == 2:
        s0, s1 = slots

        def run(a0: int, a1: int) -> None:
            """Run the routine on the matrices at the given addresses."""
            try:
                b, at = pool.pop()
            except IndexError:
                b, at = block()
            b[s0] = a0
            b[s1] = a1
            call(at)
            pool.append((b, at))

    elif len(slots) == 3:
        s0, s1, s2 = slots

        def run(a0: int, a1: int, a2: int) -> None:  # type: ignore[misc]
            """Run the routine on the matrices at the given addresses."""
            try:
                b, at = pool.pop()
            except IndexError:
                b, at = block()
            b[s0] = a0
            b[s1] = a1
            b[s2] = a2
            call(at)
            pool.append((b, at))

    else:

        def run(*bases: int) -> None:  # type: ignore[misc]
            """Run the routine on the matrices at the given addresses."""
            try:
                b, at = pool.pop()
            except IndexError:
                b, at = block()
            for k, v in zip(slots, bases):
                b[k] = v
            call(at)
            pool.append((b, at))

    return run


def address(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first element (`ctypes.c_char.from_buffer`
    takes half the time of `a.ctypes.data`; read-only arrays take the slow way)."""
    try:
        return _addressof(_from_buffer(a))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return a.ctypes.data


_addressof = ctypes.addressof
_from_buffer = ctypes.c_char.from_buffer


def available() -> bool:
    """Whether the LAPACK routines can be reached (SciPy is installed)."""
    try:
        routine(np.dtype(np.float64), "potrf")
    except Exception:  # noqa: BLE001 - no SciPy, or a build without the symbol
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


class _Scratch(threading.local):
    """Per-thread scratch: integer arguments and workspaces reused from call to call (a
    ctypes array or a NumPy workspace made per call costs more than a tiny routine)."""

    def __init__(self) -> None:
        self.ints = (ctypes.c_int * 16)()
        self.addr = ctypes.addressof(self.ints)
        self.reals = (ctypes.c_double * 2)()
        self.reals_addr = ctypes.addressof(self.reals)
        self.work: dict[tuple, tuple[np.ndarray, int]] = {}


_tls = _Scratch()
_INFO_SLOT = 56  # byte offset of the scratch int a call's unread info goes to


def _scratch() -> tuple[Any, int]:
    """This thread's int32 argument array (16 slots) and its address."""
    t = _tls
    return t.ints, t.addr


def _workspace(dtype: Any, length: int) -> int:
    """The address of this thread's workspace of at least `length` elements of `dtype`
    (grown when a call needs more; kept for the next call)."""
    work = _tls.work
    key = np.dtype(dtype).char
    got = work.get(key)
    if got is None or got[0].size < length:
        arr = np.zeros(max(length, 64), dtype)
        got = work[key] = (arr, address(arr))
    return got[1]


def _info(
    shape: tuple[int, ...], count: int, info_addr: int | None
) -> tuple[np.ndarray | None, int]:
    """(info array or None, address LAPACK writes matrix i's info to at + 4 i): a new
    int32 array of the batch shape, or the caller's buffer at `info_addr`, zeroed when no
    routine runs to write it (empty matrices)."""
    if info_addr is None:
        info = np.zeros(shape, np.int32)
        return info, (address(info) if info.size else 0)
    if count == 0:
        size = 1
        for s in shape:
            size *= s
        if size:
            ctypes.memset(info_addr, 0, 4 * size)
    return None, info_addr


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


def potrf(f: np.ndarray, uplo: str, *, info_addr: int | None = None) -> np.ndarray | None:
    """Cholesky in place on a column-major batch of n x n matrices (`uplo` 'L' or 'U'
    names the triangle read and written); info per matrix (written at `info_addr`
    instead, when given: None is returned)."""
    n = f.shape[-1]
    count, step = _batch(f)
    info, ib = _info(f.shape[:-2], count, info_addr)
    if count:
        potrf_at(f.dtype, n, count, address(f), uplo, ib)
    return info


def potrf_at(dtype: np.dtype, n: int, count: int, base: int, uplo: str, info_addr: int) -> None:
    """`potrf` on `count` n x n matrices stored one after another at address `base`;
    matrix i's info goes to `info_addr + 4 i`."""
    fn = routine(dtype, "potrf")
    ints, ia = _scratch()
    ints[0] = n
    u = _CHAR_ADDR[uplo]
    step = n * n * dtype.itemsize
    for i in range(count):
        fn(u, ia, base + i * step, ia, info_addr + 4 * i)


def potrf_caller(dtype: np.dtype, n: int, count: int, uplo: str) -> Any:
    """`potrf_at` for one (dtype, n, count, uplo), its constant arguments made once: a
    function `run(base, info_addr)` (count >= 1 matrices, n >= 1). The integer arguments
    are its own (LAPACK only reads them), so threads may share it."""
    fn = routine(dtype, "potrf")
    keep, na = _ints(n)
    u = _CHAR_ADDR[uplo]
    step = n * n * dtype.itemsize
    if count == 1:

        def run(base: int, info_addr: int) -> None:
            """Run the routine on the matrices at the given addresses."""
            fn(u, na, base, na, info_addr)

    else:
        run = _batched(
            dtype,
            "potrf",
            count,
            [(FIXED, u), (FIXED, na), (PER, step), (FIXED, na), (PER, 4)],
        )
    run.keep = keep  # type: ignore[attr-defined]
    return run


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
    info, ib = _info(c.shape[:-2], count, None)
    ints, ia = _scratch()
    ints[0], ints[1] = n, k
    cb, bb = address(c), address(b)
    u = _CHAR_ADDR[uplo]
    for i in range(count):
        fn(u, ia, ia + 4, cb + i * cstep, ia, bb + i * bstep, ia, ib + 4 * i)
    return info


def potrs_caller(dtype: np.dtype, n: int, k: int, count: int, uplo: str) -> Any:
    """`potrs` for one (dtype, n, k, count, uplo), its constant arguments made once: a
    function `run(c_base, b_base)` solving with count column-major n x n factors at
    `c_base` and n x k right-hand sides at `b_base` (overwritten), one after another
    (count, n, k >= 1). potrs's info only flags illegal arguments: it goes to scratch."""
    fn = routine(dtype, "potrs")
    keep, ia = _ints(n, k)
    u = _CHAR_ADDR[uplo]
    cstep = n * n * dtype.itemsize
    bstep = n * k * dtype.itemsize
    if count == 1:
        tls = _tls

        def run(c_base: int, b_base: int) -> None:
            """Run the routine on the matrices at the given addresses."""
            fn(u, ia, ia + 4, c_base, ia, b_base, ia, tls.addr + _INFO_SLOT)

    else:
        run = _batched(
            dtype,
            "potrs",
            count,
            [
                (FIXED, u),
                (FIXED, ia),
                (FIXED, ia + 4),
                (PER, cstep),
                (FIXED, ia),
                (PER, bstep),
                (FIXED, ia),
                (OWN, 4),
            ],
        )
    run.keep = keep  # type: ignore[attr-defined]
    return run


def getrf(f: np.ndarray, piv: np.ndarray, *, info_addr: int | None = None) -> np.ndarray | None:
    """LU with partial pivoting in place on a column-major batch (..., n, m) of m x n
    matrices; `piv` (..., min(m, n)) int32 receives the 1-based pivots. Info per matrix
    (written at `info_addr` instead, when given: None is returned)."""
    n, m = f.shape[-2:]
    count, step = _batch(f)
    info, ib = _info(f.shape[:-2], count, info_addr)
    if count:
        getrf_at(f.dtype, m, n, count, address(f), address(piv), ib)
    return info


def getrf_at(
    dtype: np.dtype, m: int, n: int, count: int, base: int, piv_addr: int, info_addr: int
) -> None:
    """`getrf` on `count` column-major m x n matrices one after another at `base`, pivots
    (min(m, n) int32 each) at `piv_addr`, infos at `info_addr`."""
    fn = routine(dtype, "getrf")
    ints, ia = _scratch()
    ints[0], ints[1], ints[2] = m, n, max(1, m)
    step = m * n * dtype.itemsize
    pstep = min(m, n) * 4
    for i in range(count):
        fn(ia, ia + 4, base + i * step, ia + 8, piv_addr + i * pstep, info_addr + 4 * i)


def getrf_caller(dtype: np.dtype, m: int, n: int, count: int) -> Any:
    """`getrf_at` for one (dtype, m, n, count), its constant arguments made once: a
    function `run(base, piv_addr, info_addr)` (count >= 1 matrices, m, n >= 1)."""
    fn = routine(dtype, "getrf")
    keep, ia = _ints(m, n, max(1, m))
    step = m * n * dtype.itemsize
    pstep = min(m, n) * 4
    if count == 1:

        def run(base: int, piv_addr: int, info_addr: int) -> None:
            """Run the routine on the matrices at the given addresses."""
            fn(ia, ia + 4, base, ia + 8, piv_addr, info_addr)

    else:
        run = _batched(
            dtype,
            "getrf",
            count,
            [(FIXED, ia), (FIXED, ia + 4), (PER, step), (FIXED, ia + 8), (PER, pstep), (PER, 4)],
        )
    run.keep = keep  # type: ignore[attr-defined]
    return run


def gesv(a: np.ndarray, b: np.ndarray, *, info_addr: int | None = None) -> np.ndarray | None:
    """Solve A X = B by LU: `a` (..., n, n) and `b` (..., k, n) column-major batches of
    the same batch shape; `a` is overwritten with the LU factors and `b` with X (where
    info is 0). Info per matrix (written at `info_addr` instead, when given: None is
    returned)."""
    fn = routine(a.dtype, "gesv")
    n = a.shape[-1]
    k = b.shape[-2]
    count, astep = _batch(a)
    bstep = n * k * b.itemsize
    if k == 0:
        count = 0
    info, ib = _info(a.shape[:-2], count, info_addr)
    piv = np.empty(max(1, n), np.int32)
    ints, ia = _scratch()
    ints[0], ints[1], ints[2] = n, k, max(1, n)
    ab, bb, pb = address(a), address(b), address(piv)
    for i in range(count):
        fn(ia, ia + 4, ab + i * astep, ia + 8, pb, bb + i * bstep, ia + 8, ib + 4 * i)
    return info


def geqrf(f: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Householder QR in place on a column-major batch (..., n, m) of m x n matrices;
    `tau` (..., min(m, n)) receives the scalars. Info per matrix."""
    fn = routine(f.dtype, "geqrf")
    n, m = f.shape[-2:]
    count, step = _batch(f)
    k = min(m, n)
    info, ib = _info(f.shape[:-2], count, None)
    if not count:
        return info
    ints, ia = _scratch()
    ints[0], ints[1], ints[2] = m, n, max(1, m)
    key = ("geqrf", f.dtype, m, n)
    lwork = _lwork.get(key)
    if lwork is None:
        scratch = np.zeros(max(1, m * n), f.dtype)
        tscratch = np.zeros(max(1, k), f.dtype)
        lwork = _query(
            f.dtype,
            "geqrf",
            (m, n),
            lambda w, l: fn(ia, ia + 4, address(scratch), ia + 8, address(tscratch), w, l, ia + 12),
        )
        ints[0], ints[1], ints[2] = m, n, max(1, m)
    ints[4] = lwork
    wb = _workspace(f.dtype, lwork)
    base, tb = address(f), address(tau)
    tstep = k * f.itemsize
    for i in range(count):
        fn(ia, ia + 4, base + i * step, ia + 8, tb + i * tstep, wb, ia + 16, ib + 4 * i)
    return info


def sytrf(
    f: np.ndarray, piv: np.ndarray, uplo: str, hermitian: bool, *, info_addr: int | None = None
) -> np.ndarray | None:
    """Bunch-Kaufman LDL in place on a column-major batch of n x n symmetric (Hermitian:
    `hermitian`, complex dtypes) matrices; `piv` (..., n) int32 receives LAPACK's pivots.
    Info per matrix (written at `info_addr` instead, when given: None is returned)."""
    n = f.shape[-1]
    count, step = _batch(f)
    info, ib = _info(f.shape[:-2], count, info_addr)
    if count:
        sytrf_at(f.dtype, n, count, address(f), address(piv), uplo, hermitian, ib)
    return info


def sytrf_at(
    dtype: np.dtype,
    n: int,
    count: int,
    base: int,
    piv_addr: int,
    uplo: str,
    hermitian: bool,
    info_addr: int,
) -> None:
    """`sytrf` (`hetrf`) on `count` n x n matrices one after another at `base`."""
    name = "hetrf" if hermitian and dtype.kind == "c" else "sytrf"
    fn = routine(dtype, name)
    lwork = _sytrf_lwork(dtype, name, n, uplo)
    ints, ia = _scratch()
    u = _CHAR_ADDR[uplo]
    ints[0] = n
    ints[2] = lwork
    wb = _workspace(dtype, lwork)
    step = n * n * dtype.itemsize
    for i in range(count):
        fn(u, ia, base + i * step, ia, piv_addr + i * n * 4, wb, ia + 8, info_addr + 4 * i)


def _sytrf_lwork(dtype: np.dtype, name: str, n: int, uplo: str) -> int:
    """sytrf's (hetrf's, `name`) workspace length for n x n matrices (asked once)."""
    lwork = _lwork.get((name, dtype, n))
    if lwork is None:
        fn = routine(dtype, name)
        u = _CHAR_ADDR[uplo]
        keep, ia = _ints(n, 0)
        scratch = np.zeros(max(1, n * n), dtype)
        pscratch = np.zeros(max(1, n), np.int32)
        lwork = _query(
            dtype,
            name,
            (n,),
            lambda w, l: fn(u, ia, address(scratch), ia, address(pscratch), w, l, ia + 4),
        )
    return lwork


def sytrf_caller(dtype: np.dtype, n: int, count: int, uplo: str, hermitian: bool) -> Any:
    """`sytrf_at` for one (dtype, n, count, uplo, hermitian), its constant arguments and
    workspace length found once: a function `run(base, piv_addr, info_addr)` (count >= 1
    matrices, n >= 1). The workspace is the calling thread's (one matrix) or the
    argument block's own (a batch)."""
    name = "hetrf" if hermitian and dtype.kind == "c" else "sytrf"
    fn = routine(dtype, name)
    lwork = _sytrf_lwork(dtype, name, n, uplo)
    keep, ia = _ints(n, lwork)
    u = _CHAR_ADDR[uplo]
    step = n * n * dtype.itemsize
    pstep = n * 4
    if count == 1:
        tls = _tls
        key: Any = np.dtype(dtype).char

        def run(base: int, piv_addr: int, info_addr: int) -> None:
            """Run the routine on the matrices at the given addresses."""
            got = tls.work.get(key)
            wb = got[1] if got is not None and got[0].size >= lwork else _workspace(dtype, lwork)
            fn(u, ia, base, ia, piv_addr, wb, ia + 4, info_addr)

    else:
        run = _batched(
            dtype,
            name,
            count,
            [
                (FIXED, u),
                (FIXED, ia),
                (PER, step),
                (FIXED, ia),
                (PER, pstep),
                (OWN, lwork * dtype.itemsize),
                (FIXED, ia + 4),
                (PER, 4),
            ],
        )
    run.keep = keep  # type: ignore[attr-defined]
    return run


def sytrs(f: np.ndarray, piv: np.ndarray, b: np.ndarray, uplo: str, hermitian: bool) -> np.ndarray:
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
    info, ib = _info(f.shape[:-2], count, None)
    ints, ia = _scratch()
    ints[0], ints[1] = n, k
    u = _CHAR_ADDR[uplo]
    base, pb, bb = address(f), address(piv), address(b)
    for i in range(count):
        fn(u, ia, ia + 4, base + i * step, ia, pb + i * n * 4, bb + i * bstep, ia, ib + 4 * i)
    return info


def sytrs_caller(dtype: np.dtype, n: int, k: int, count: int, uplo: str, hermitian: bool) -> Any:
    """`sytrs` (`hetrs`) for one (dtype, n, k, count, uplo, hermitian), its constant
    arguments made once: a function `run(f_base, piv_base, b_base)` solving with count
    column-major n x n factors, their n pivots each and n x k right-hand sides
    (overwritten), one after another (count, n, k >= 1). The pivots must be a valid
    factorization's (`ldl_pivots_valid`); the info (illegal arguments only) goes to
    scratch."""
    name = "hetrs" if hermitian and dtype.kind == "c" else "sytrs"
    fn = routine(dtype, name)
    keep, ia = _ints(n, k)
    u = _CHAR_ADDR[uplo]
    step = n * n * dtype.itemsize
    bstep = n * k * dtype.itemsize
    pstep = n * 4
    if count == 1:
        tls = _tls

        def run(f_base: int, piv_base: int, b_base: int) -> None:
            """Run the routine on the matrices at the given addresses."""
            fn(u, ia, ia + 4, f_base, ia, piv_base, b_base, ia, tls.addr + _INFO_SLOT)

    else:
        run = _batched(
            dtype,
            name,
            count,
            [
                (FIXED, u),
                (FIXED, ia),
                (FIXED, ia + 4),
                (PER, step),
                (FIXED, ia),
                (PER, pstep),
                (PER, bstep),
                (FIXED, ia),
                (OWN, 4),
            ],
        )
    run.keep = keep  # type: ignore[attr-defined]
    return run


def ldl_pivots_valid(piv: list[int], n: int) -> bool:
    """Whether `piv` (one matrix's n pivots, 1-based, as a list) is a valid lower ('L')
    Bunch-Kaufman pivot sequence as sytrf gives it, so that sytrs reads and writes only
    inside the matrix: every |pivot| in 1..n, and the negative ones in equal pairs
    (a 2 x 2 block at rows k, k + 1 has pivot -p at both)."""
    k = 0
    while k < n:
        p = piv[k]
        if p > 0:
            if p > n:
                return False
            k += 1
        else:
            if p == 0 or -p > n or k + 1 >= n or piv[k + 1] != p:
                return False
            k += 2
    return True


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
    ints, ia = _scratch()
    ints[0], ints[1], ints[2] = n, k, max(1, n)
    one = _ONE_ADDR[a.dtype]
    side, uplo = _CHAR_ADDR["L"], _CHAR_ADDR["L" if lower else "U"]
    trans, diag = _CHAR_ADDR["N"], _CHAR_ADDR["U" if unit else "N"]
    ab, bb = address(a), address(b)
    for i in range(count):
        fn(side, uplo, trans, diag, ia, ia + 4, one, ab + i * astep, ia + 8, bb + i * bstep, ia + 8)


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
    ints, ia = _scratch()
    ints[0], ints[1] = n, k
    t = _CHAR_ADDR[trans]
    ab, pb, bb = address(lu), address(piv), address(b)
    for i in range(count):
        fn(t, ia, ia + 4, ab + i * astep, ia, pb + i * n * 4, bb + i * bstep, ia, ia + 8)


_REAL = {
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
    np.dtype(np.complex64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.float64),
}
_sizes: dict[tuple, tuple[int, int, int]] = {}


def _ask(dtype: np.dtype, call: Any) -> tuple[int, int, int]:
    """(lwork, liwork, lrwork) from a workspace query: `call(work, rwork, iwork, lengths)`
    with every length -1 (the lengths at `lengths`, `+4`, `+8`)."""
    work = np.zeros(2, dtype)
    rwork = np.zeros(2, _REAL[dtype])
    iwork = np.zeros(2, np.int32)
    arr, addr = _ints(-1, -1, -1)
    call(address(work), address(rwork), address(iwork), addr)
    return (max(1, int(work[0].real)), max(1, int(iwork[0])), max(1, int(rwork[0])))


def syevd_at(
    dtype: np.dtype,
    n: int,
    count: int,
    base: int,
    w_addr: int,
    vectors: bool,
    uplo: str,
    info_addr: int,
) -> None:
    """Eigenvalues (ascending, into `w_addr`, n reals per matrix) and, with `vectors`,
    eigenvectors (overwriting each matrix, column-major) of `count` n x n symmetric
    (Hermitian) column-major matrices one after another at `base` (syevd / heevd: the
    triangle `uplo` is read). n must be positive."""
    cplx = dtype.kind == "c"
    name = "heevd" if cplx else "syevd"
    fn = routine(dtype, name)
    ints, ia = _scratch()
    jobz, u = _CHAR_ADDR["V" if vectors else "N"], _CHAR_ADDR[uplo]
    ints[0] = n
    key = (name, dtype, n, vectors)
    sizes = _sizes.get(key)
    if sizes is None:
        scratch = np.zeros(n * n, dtype)
        ws = np.zeros(n, _REAL[dtype])
        if cplx:
            sizes = _ask(
                dtype,
                lambda w, r, i, ln: fn(
                    jobz,
                    u,
                    ia,
                    address(scratch),
                    ia,
                    address(ws),
                    w,
                    ln,
                    r,
                    ln + 8,
                    i,
                    ln + 4,
                    ia + 16,
                ),
            )
        else:
            sizes = _ask(
                dtype,
                lambda w, r, i, ln: fn(
                    jobz, u, ia, address(scratch), ia, address(ws), w, ln, i, ln + 4, ia + 16
                ),
            )
        _sizes[key] = sizes
    lwork, liwork, lrwork = sizes
    ints[1], ints[2], ints[3] = lwork, liwork, lrwork
    wb = _workspace(dtype, lwork)
    iwb = _workspace(np.int32, liwork)
    step = n * n * dtype.itemsize
    wstep = n * _REAL[dtype].itemsize
    if cplx:
        rwb = _workspace(_REAL[dtype], lrwork)
        for i in range(count):
            fn(
                jobz,
                u,
                ia,
                base + i * step,
                ia,
                w_addr + i * wstep,
                wb,
                ia + 4,
                rwb,
                ia + 12,
                iwb,
                ia + 8,
                info_addr + 4 * i,
            )
    else:
        for i in range(count):
            fn(
                jobz,
                u,
                ia,
                base + i * step,
                ia,
                w_addr + i * wstep,
                wb,
                ia + 4,
                iwb,
                ia + 8,
                info_addr + 4 * i,
            )


def gesdd_at(
    dtype: np.dtype,
    m: int,
    n: int,
    count: int,
    base: int,
    s_addr: int,
    job: str,
    u_addr: int,
    vt_addr: int,
    info_addr: int,
) -> None:
    """The SVD (gesdd) of `count` column-major m x n matrices one after another at `base`
    (destroyed): singular values (descending, min(m, n) reals each) at `s_addr`; `job`
    'N' (values only), 'S' (U m x k and VT k x n, k = min(m, n)) or 'A' (U m x m, VT
    n x n), each column-major and packed one after another at `u_addr` / `vt_addr`.
    m and n must be positive."""
    cplx = dtype.kind == "c"
    fn = routine(dtype, "gesdd")
    k = min(m, n)
    ints, ia = _scratch()
    jobz = _CHAR_ADDR[job]
    ucols, vtrows = (m, n) if job == "A" else (k, k)
    if job == "N":
        ucols = vtrows = 0
    ldvt = max(1, vtrows)
    ints[0], ints[1], ints[2], ints[3], ints[4] = m, n, m, m, ldvt
    key = ("gesdd", dtype, m, n, job)
    sizes = _sizes.get(key)
    if sizes is None:
        scratch = np.zeros(m * n, dtype)
        ss = np.zeros(k, _REAL[dtype])
        us = np.zeros(max(1, m * ucols), dtype)
        vs = np.zeros(max(1, vtrows * n), dtype)
        if cplx:
            got = _ask(
                dtype,
                lambda w, r, i, ln: fn(
                    jobz,
                    ia,
                    ia + 4,
                    address(scratch),
                    ia + 8,
                    address(ss),
                    address(us),
                    ia + 12,
                    address(vs),
                    ia + 16,
                    w,
                    ln,
                    r,
                    i,
                    ia + 40,
                ),
            )
        else:
            got = _ask(
                dtype,
                lambda w, r, i, ln: fn(
                    jobz,
                    ia,
                    ia + 4,
                    address(scratch),
                    ia + 8,
                    address(ss),
                    address(us),
                    ia + 12,
                    address(vs),
                    ia + 16,
                    w,
                    ln,
                    i,
                    ia + 40,
                ),
            )
        mx = max(m, n)
        if job == "N":
            lrwork = 7 * k
        else:
            lrwork = max(5 * k * k + 5 * k, 2 * mx * k + 2 * k * k + k)
        sizes = _sizes[key] = (got[0], 8 * k, max(1, lrwork))
    lwork, liwork, lrwork = sizes
    ints[5] = lwork
    wb = _workspace(dtype, lwork)
    iwb = _workspace(np.int32, liwork)
    step = m * n * dtype.itemsize
    sstep = k * _REAL[dtype].itemsize
    ustep = m * ucols * dtype.itemsize
    vstep = vtrows * n * dtype.itemsize
    if cplx:
        rwb = _workspace(_REAL[dtype], lrwork)
        for i in range(count):
            fn(
                jobz,
                ia,
                ia + 4,
                base + i * step,
                ia + 8,
                s_addr + i * sstep,
                u_addr + i * ustep,
                ia + 12,
                vt_addr + i * vstep,
                ia + 16,
                wb,
                ia + 20,
                rwb,
                iwb,
                info_addr + 4 * i,
            )
    else:
        for i in range(count):
            fn(
                jobz,
                ia,
                ia + 4,
                base + i * step,
                ia + 8,
                s_addr + i * sstep,
                u_addr + i * ustep,
                ia + 12,
                vt_addr + i * vstep,
                ia + 16,
                wb,
                ia + 20,
                iwb,
                info_addr + 4 * i,
            )


def lstsq_at(
    dtype: np.dtype,
    driver: str,
    m: int,
    n: int,
    nrhs: int,
    count: int,
    a_base: int,
    b_base: int,
    s_addr: int,
    rank_addr: int,
    rcond: float,
    info_addr: int,
) -> None:
    """Least squares min |A X - B| by `driver` (gels, gelss, gelsd, gelsy) for `count`
    column-major m x n matrices A one after another at `a_base` (destroyed) and
    max(m, n) x nrhs right-hand sides at `b_base` (X in their first n rows). gelss and
    gelsd write min(m, n) singular values per matrix at `s_addr`; every driver but gels
    writes the effective rank (int32) at `rank_addr`. m, n and nrhs must be positive."""
    cplx = dtype.kind == "c"
    real = _REAL[dtype]
    fn = routine(dtype, driver)
    k = min(m, n)
    ldb = max(m, n)
    ints, ia = _scratch()
    # ints: m, n, nrhs, lda, ldb, lwork, (info of a query at 15)
    ints[0], ints[1], ints[2], ints[3], ints[4] = m, n, nrhs, m, ldb
    # rcond as the routine's real type, in this thread's scratch
    reals = _tls.reals
    if real.itemsize == 8:
        reals[0] = rcond
    else:
        ctypes.c_float.from_address(_tls.reals_addr).value = rcond
    rca = _tls.reals_addr
    key = (driver, dtype, m, n, nrhs)
    sizes = _sizes.get(key)
    if sizes is None:
        a0 = np.zeros(m * n, dtype)
        b0 = np.zeros(ldb * nrhs, dtype)
        s0 = np.zeros(max(1, k), real)
        j0 = np.zeros(max(1, n), np.int32)
        r0 = np.zeros(2, np.int32)
        A, B, S, J, R = (address(x) for x in (a0, b0, s0, j0, r0))
        q = ia + 60
        if driver == "gels":
            got = _ask(
                dtype,
                lambda w, r, i, ln: fn(
                    _CHAR_ADDR["N"], ia, ia + 4, ia + 8, A, ia + 12, B, ia + 16, w, ln, q
                ),
            )
        elif driver == "gelss":
            got = _ask(
                dtype,
                (
                    lambda w, r, i, ln: fn(
                        ia, ia + 4, ia + 8, A, ia + 12, B, ia + 16, S, rca, R, w, ln, r, q
                    )
                )
                if cplx
                else (
                    lambda w, r, i, ln: fn(
                        ia, ia + 4, ia + 8, A, ia + 12, B, ia + 16, S, rca, R, w, ln, q
                    )
                ),
            )
        elif driver == "gelsd":
            got = _ask(
                dtype,
                (
                    lambda w, r, i, ln: fn(
                        ia, ia + 4, ia + 8, A, ia + 12, B, ia + 16, S, rca, R, w, ln, r, i, q
                    )
                )
                if cplx
                else (
                    lambda w, r, i, ln: fn(
                        ia, ia + 4, ia + 8, A, ia + 12, B, ia + 16, S, rca, R, w, ln, i, q
                    )
                ),
            )
        else:
            got = _ask(
                dtype,
                (
                    lambda w, r, i, ln: fn(
                        ia, ia + 4, ia + 8, A, ia + 12, B, ia + 16, J, rca, R, w, ln, r, q
                    )
                )
                if cplx
                else (
                    lambda w, r, i, ln: fn(
                        ia, ia + 4, ia + 8, A, ia + 12, B, ia + 16, J, rca, R, w, ln, q
                    )
                ),
            )
        lwork, liwork, lrwork = got
        if driver == "gelss":
            lrwork = 5 * k
        elif driver == "gelsy":
            lrwork = 2 * n
        sizes = _sizes[key] = (lwork, max(1, liwork), max(1, lrwork))
    lwork, liwork, lrwork = sizes
    ints[5] = lwork
    wb = _workspace(dtype, lwork)
    rwb = _workspace(real, lrwork) if cplx else 0
    astep = m * n * dtype.itemsize
    bstep = ldb * nrhs * dtype.itemsize
    sstep = k * real.itemsize
    if driver == "gels":
        t = _CHAR_ADDR["N"]
        for i in range(count):
            fn(
                t,
                ia,
                ia + 4,
                ia + 8,
                a_base + i * astep,
                ia + 12,
                b_base + i * bstep,
                ia + 16,
                wb,
                ia + 20,
                info_addr + 4 * i,
            )
    elif driver == "gelsy":
        jpvt = np.zeros(max(1, n), np.int32)
        jb = address(jpvt)
        for i in range(count):
            jpvt[:] = 0  # zero: every column is free to move
            args = (
                ia,
                ia + 4,
                ia + 8,
                a_base + i * astep,
                ia + 12,
                b_base + i * bstep,
                ia + 16,
                jb,
                rca,
                rank_addr + 4 * i,
                wb,
                ia + 20,
            )
            if cplx:
                fn(*args, rwb, info_addr + 4 * i)
            else:
                fn(*args, info_addr + 4 * i)
    else:
        iwb = _workspace(np.int32, liwork) if driver == "gelsd" else 0
        for i in range(count):
            args = (
                ia,
                ia + 4,
                ia + 8,
                a_base + i * astep,
                ia + 12,
                b_base + i * bstep,
                ia + 16,
                s_addr + i * sstep,
                rca,
                rank_addr + 4 * i,
                wb,
                ia + 20,
            )
            if driver == "gelss":
                if cplx:
                    fn(*args, rwb, info_addr + 4 * i)
                else:
                    fn(*args, info_addr + 4 * i)
            elif cplx:
                fn(*args, rwb, iwb, info_addr + 4 * i)
            else:
                fn(*args, iwb, info_addr + 4 * i)
