"""cuBLAS through ctypes (cuda-bindings does not wrap it): one handle, strided-batched gemm.

The library is found, in order, by `cuda.pathfinder` (NVIDIA's wheels, conda, the system
loader), by globbing `nvidia/cu13/lib`, `nvidia/cu12/lib` and `nvidia/cublas/lib` under every
site-packages directory, by `ctypes.util.find_library("cublas")`, and by the sonames
`libcublas.so.13`, `.12` and `libcublas.so`. The handle is created on the thread and context
that first calls gemm (the backend's primary context must be current) and uses host pointer
mode and the default math mode (no TF32: float32 gemms are true float32).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import site
import sys
import threading
from typing import Any

__all__ = ["Cublas", "CublasError", "find_library"]

_STATUS_NAMES = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}
CUBLAS_STATUS_INVALID_VALUE = 7
CUBLAS_OP_N = 0
CUBLAS_OP_T = 1


class CublasError(RuntimeError):
    """A cuBLAS call failed: `.call`, `.status` (cublasStatus_t) and `.error` (its name)."""

    def __init__(self, call: str, status: int, error: str | None = None, detail: str = "") -> None:
        self.call = call
        self.status = int(status)
        self.error = error or _STATUS_NAMES.get(self.status, f"cublasStatus {self.status}")
        extra = f": {detail}" if detail else ""
        super().__init__(f"{call} failed with {self.error} ({self.status}){extra}")


def check_gemm_args(
    call: str,
    transa: bool,
    transb: bool,
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    ldc: int,
    batch: int,
) -> None:
    """Raise CublasError(CUBLAS_STATUS_INVALID_VALUE) where cuBLAS would reject the shape."""
    bad = ""
    if min(m, n, k, batch) < 0:
        bad = f"negative size m={m} n={n} k={k} batch={batch}"
    elif lda < max(1, k if transa else m):
        bad = f"lda={lda} < {max(1, k if transa else m)}"
    elif ldb < max(1, n if transb else k):
        bad = f"ldb={ldb} < {max(1, n if transb else k)}"
    elif ldc < max(1, m):
        bad = f"ldc={ldc} < {max(1, m)}"
    if bad:
        raise CublasError(call, CUBLAS_STATUS_INVALID_VALUE, detail=bad)


def _site_dirs() -> list[str]:
    dirs: list[str] = []
    try:
        dirs += site.getsitepackages()
    except Exception:
        pass
    try:
        dirs.append(site.getusersitepackages())
    except Exception:
        pass
    dirs += [p for p in sys.path if p and os.path.isdir(p)]
    return list(dict.fromkeys(dirs))


def _load(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def find_library() -> ctypes.CDLL:
    """Load libcublas (see the module docstring for the search order); RuntimeError if absent."""
    tried: list[str] = []
    try:
        from cuda import pathfinder  # type: ignore[import-untyped]

        return _load(pathfinder.load_nvidia_dynamic_lib("cublas").abs_path)
    except Exception as e:
        tried.append(f"cuda.pathfinder: {type(e).__name__}: {e}")
    for d in _site_dirs():
        for sub in ("nvidia/cu13/lib", "nvidia/cu12/lib", "nvidia/cublas/lib"):
            libs = sorted(glob.glob(os.path.join(d, sub, "libcublas.so*")), reverse=True)
            if not libs:
                continue
            for lt in sorted(glob.glob(os.path.join(d, sub, "libcublasLt.so*")), reverse=True):
                try:
                    _load(lt)
                    break
                except OSError as e:
                    tried.append(f"{lt}: {e}")
            for lib in libs:
                try:
                    return _load(lib)
                except OSError as e:
                    tried.append(f"{lib}: {e}")
    names = [n for n in (ctypes.util.find_library("cublas"),) if n]
    for name in names + ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]:
        try:
            return _load(name)
        except OSError as e:
            tried.append(f"{name}: {e}")
    raise RuntimeError(
        "cuBLAS was not found (install the nvidia-cublas wheel: the llgrad[cuda] "
        "extra); tried: " + "; ".join(tried)
    )


class Cublas:
    """One cuBLAS handle with strided-batched S/D gemm; calls are serialized by a lock."""

    def __init__(self) -> None:
        lib = self.lib = find_library()
        vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasCreate_v2.restype = i32
        lib.cublasDestroy_v2.argtypes = [vp]
        lib.cublasDestroy_v2.restype = i32
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetStream_v2.restype = i32
        self._status_name: Any = getattr(lib, "cublasGetStatusName", None)
        if self._status_name is not None:
            self._status_name.argtypes = [i32]
            self._status_name.restype = ctypes.c_char_p
        args = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i64, vp, i32, i64, vp, vp, i32, i64, i32]
        self._gemm = {}
        for dtype, sym, scalar in (
            ("float32", "cublasSgemmStridedBatched", ctypes.c_float),
            ("float64", "cublasDgemmStridedBatched", ctypes.c_double),
        ):
            fn = getattr(lib, sym)
            fn.argtypes = args
            fn.restype = i32
            alpha, beta = scalar(), scalar()
            self._gemm[dtype] = (
                sym,
                fn,
                alpha,
                beta,
                ctypes.addressof(alpha),
                ctypes.addressof(beta),
            )
        handle = vp()
        self._check("cublasCreate_v2", lib.cublasCreate_v2(ctypes.byref(handle)))
        self.handle = handle.value
        self._stream: int | None = None
        self._lock = threading.Lock()

    def _check(self, call: str, status: int, detail: str = "") -> None:
        if status != 0:
            name = None
            if self._status_name is not None:
                try:
                    raw = self._status_name(status)
                    name = raw.decode() if raw else None
                except Exception:
                    name = None
            raise CublasError(call, status, name, detail)

    def set_stream(self, stream: int) -> None:
        """cublasSetStream_v2 when `stream` differs from the handle's stream."""
        if stream != self._stream:
            self._check(
                "cublasSetStream_v2", self.lib.cublasSetStream_v2(self.handle, stream or None)
            )
            self._stream = stream

    def gemm_strided_batched(
        self,
        dtype: str,
        transa: bool,
        transb: bool,
        m: int,
        n: int,
        k: int,
        alpha: float,
        a: int,
        lda: int,
        stride_a: int,
        b: int,
        ldb: int,
        stride_b: int,
        beta: float,
        c: int,
        ldc: int,
        stride_c: int,
        batch: int,
        stream: int = 0,
    ) -> None:
        """cublas<S|D>gemmStridedBatched on `stream` (a raw CUstream value; 0 = default)."""
        try:
            sym, fn, alpha_c, beta_c, alpha_p, beta_p = self._gemm[dtype]
        except KeyError:
            raise ValueError(f"gemm supports float32 and float64, not {dtype!r}") from None
        check_gemm_args(sym, transa, transb, m, n, k, lda, ldb, ldc, batch)
        if m == 0 or n == 0 or batch == 0:
            return
        with self._lock:
            self.set_stream(stream)
            alpha_c.value = alpha
            beta_c.value = beta
            status = fn(
                self.handle,
                CUBLAS_OP_T if transa else CUBLAS_OP_N,
                CUBLAS_OP_T if transb else CUBLAS_OP_N,
                m,
                n,
                k,
                alpha_p,
                a or None,
                lda,
                stride_a,
                b or None,
                ldb,
                stride_b,
                beta_p,
                c or None,
                ldc,
                stride_c,
                batch,
            )
        if status != 0:
            self._check(sym, status, f"m={m} n={n} k={k} batch={batch}")

    def __del__(self) -> None:
        try:
            self.lib.cublasDestroy_v2(self.handle)
        except Exception:
            pass
