"""Matmul kernel specs and the operand-layout rules BLAS imposes (shared by eager dispatch
and the compiler's lowering). The kernels themselves are in `llgrad/codegen/matmul.py`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from .elementwise import Expr
from .layout import collapse

BLAS_DTYPES: tuple[DType, ...] = (dt.float32, dt.float64, dt.complex64, dt.complex128)


def uses_blas(dtype: DType) -> bool:
    """float32/float64 (s/dgemm) and complex64/complex128 (c/zgemm) run on BLAS; every
    other dtype on generated loops."""
    return dtype in BLAS_DTYPES


@dataclass(frozen=True, slots=True)
class MatmulKernel:
    """What identifies a compiled matmul kernel (the kernel-cache key).

    `epilogue` (float32/float64 BLAS kernels): an elementwise expression applied to each
    gemm call's block of C while it is in cache (per tile inside llgrad's gemm when
    `tile_epilogue`, else over the block after the call). Its input 0 is C's element, inputs 1..
    and its outputs are operands `(ptr, batch_stride * R, row_stride, col_stride)` after
    the fixed slots, outputs first (see `codegen/matmul.py`).
    """

    dtype: DType
    batch_rank: int  # R: batch dimensions after collapsing
    epilogue: Expr | None = None
    # per epilogue operand: its column stride when baked in (0 or 1), else None
    epilogue_inner: tuple[int | None, ...] = ()
    # the epilogue runs per tile inside the gemm (llgrad's `gemm_ex`, whose address the
    # gemm slot then holds) instead of over the whole block after the call
    tile_epilogue: bool = False

    def __post_init__(self) -> None:
        if self.epilogue is not None and (
            self.dtype not in (dt.float32, dt.float64)
            or self.epilogue.in_dtypes[0] is not self.dtype
        ):
            raise ValueError(
                f"matmul kernel: epilogues are for float32/float64 BLAS "
                f"products and read C first; got {self.dtype} and "
                f"{self.epilogue.in_dtypes}"
            )
        if self.tile_epilogue and self.epilogue is None:
            raise ValueError("matmul kernel: a tile epilogue needs an epilogue")
        if len(self.epilogue_inner) != self.n_epilogue_operands:
            raise ValueError(
                f"matmul kernel: {self.n_epilogue_operands} epilogue operands, "
                f"{len(self.epilogue_inner)} column strides"
            )

    @property
    def blas(self) -> bool:
        return uses_blas(self.dtype)

    @property
    def n_epilogue_operands(self) -> int:
        e = self.epilogue
        return 0 if e is None else len(e.outputs) + len(e.in_dtypes) - 1

    @property
    def n_slots(self) -> int:
        return (
            5
            + self.batch_rank
            + 3 * (self.batch_rank + 3)
            + 5
            + self.n_epilogue_operands * (self.batch_rank + 3)
        )


def alpha_bits(alpha: float) -> int:
    """A gemm's alpha as its argument-block slot holds it: the float64's bits."""
    return struct.unpack("<q", struct.pack("<d", float(alpha)))[0]


ALPHA_ONE = alpha_bits(1.0)


# --------------------------------------------------------------------------------------
# Operand layouts (shared by eager dispatch and whole-graph codegen)
# --------------------------------------------------------------------------------------


def gemm_layout(rows: int, cols: int, rs: int, cs: int) -> tuple[bool, int] | None:
    """How BLAS can read a `rows x cols` matrix with strides `(rs, cs)` in place.

    Returns `(transposed, ld)`: row-major (`transposed=False`, ld = row stride) or
    column-major (`True`, ld = column stride), with ld meeting BLAS's lower bound and
    fitting 32 bits; None when neither layout describes the memory (then it is copied).
    A dimension of size 1 never constrains its stride.
    """
    int32_max = 2**31 - 1
    if (cs == 1 or cols == 1) and (rows == 1 or max(1, cols) <= rs <= int32_max):
        return False, rs if rows > 1 else max(1, cols)
    if (rs == 1 or rows == 1) and (cols == 1 or max(1, rows) <= cs <= int32_max):
        return True, cs if cols > 1 else max(1, rows)
    return None


def fold_rows(
    batch: tuple[int, ...], n: int, strides: dict[str, tuple[int, ...]], rows: dict[str, int]
) -> tuple[int, int] | None:
    """When B is shared by the whole batch, `(batch, n)` rows of A and C may be one
    dimension; returns `(rows, A's row stride)` if both walk it with one stride each.

    This turns `(..., n, k) @ (k, m)` on a contiguous left operand into a single gemm.
    """
    if not batch or any(strides["b"]):
        return None
    cshape, cstrides = collapse(
        batch + (n,), [strides["c"] + (rows["c"],), strides["a"] + (rows["a"],)]
    )
    if len(cshape) != 1:
        return None
    return cshape[0], cstrides[1][0]


def panels(
    threads: int, n: int, m: int, rows: dict[str, int], cols: dict[str, int]
) -> tuple[tuple[int, ...], dict[str, tuple[int, ...]], int, int]:
    """One gemm as a batch of `threads` panels of C's rows (or columns), so that the
    pieces run on the thread pool, one single-threaded BLAS call each: on the reference
    machine two such calls beat one two-threaded OpenBLAS call by 4-30% at B2's sizes.
    Returns (batch, batch strides, n, m); no batch when neither dimension divides."""
    if n % threads == 0 and (n >= m or m % threads):
        r = n // threads
        return (threads,), {"c": (r * rows["c"],), "a": (r * rows["a"],), "b": (0,)}, r, m
    if m % threads == 0:
        r = m // threads
        return (threads,), {"c": (r * cols["c"],), "a": (0,), "b": (r * cols["b"],)}, n, r
    return (), {"c": (), "a": (), "b": ()}, n, m
