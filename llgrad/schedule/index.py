"""Index kernel specs: gather, scatter-add, put, offset, check, and nonzero.

What each mode does and the argument block are described in `llgrad/codegen/gather.py`,
which generates the code.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.dtypes import DType

MODES = ("gather", "put", "scatter_add", "offset", "check")
INDEX_DTYPES = ("int32", "int64")


@dataclass(frozen=True, slots=True)
class IndexKernel:
    """The cache key of one index kernel (see the module docstring for the modes).

    `hoist`: every index tensor has stride 0 along the innermost dimension (a row gather
    such as `x[idx]` or `x[idx, :]`), so the indices are read and checked once per row
    and the innermost loop is a plain strided copy. `x_inner` / `data_inner` bake an
    innermost stride of 0 or 1 into the code (None: read at run time), which lets LLVM
    vectorize that copy.
    """

    mode: str
    rank: int  # iteration-space rank after collapsing (>= 1)
    index_dtypes: tuple[DType, ...]  # int32 / int64, one per index tensor
    width: int = 0  # bytes moved per element by raw gather / put
    dtype: DType | None = None  # arithmetic modes: the destination dtype
    src_dtype: DType | None = None  # arithmetic modes: the dtype of `data`
    hoist: bool = False
    x_inner: int | None = None
    data_inner: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"IndexKernel: unknown mode {self.mode!r}; expected {MODES}")
        if self.rank < 1:
            raise ValueError(f"IndexKernel: rank must be >= 1, got {self.rank}")
        for d in self.index_dtypes:
            if d.name not in INDEX_DTYPES:
                raise TypeError(f"IndexKernel: index dtype must be int32 or int64, got {d}")
        arithmetic = self.dtype is not None
        if self.mode == "scatter_add" and not arithmetic:
            raise ValueError("IndexKernel: scatter_add needs dtype and src_dtype")
        if arithmetic and self.mode not in ("put", "scatter_add"):
            raise ValueError(f"IndexKernel: mode {self.mode} moves raw bits; give width")
        if arithmetic and (
            self.src_dtype is None or (self.src_dtype.is_complex and not self.dtype.is_complex)
        ):
            raise TypeError(
                f"IndexKernel: {self.mode} arithmetic is not generated for "
                f"{self.src_dtype} -> {self.dtype}"
            )
        if self.mode in ("gather", "put") and not arithmetic and self.width not in (1, 2, 4, 8, 16):
            raise ValueError(f"IndexKernel: width must be 1, 2, 4, 8 or 16, got {self.width}")
        for inner in (self.x_inner, self.data_inner):
            if inner not in (None, 0, 1):
                raise ValueError(f"IndexKernel: a baked inner stride is 0 or 1, got {inner}")

    @property
    def n_slots(self) -> int:
        r = self.rank
        return 2 + (r - 1) + 1 + 2 * (1 + r) + len(self.index_dtypes) * (3 + r)


def slot_layout(rank: int) -> dict[str, int]:
    """Where each group of arguments starts in the block (shared with the caller)."""
    err = 2 + (rank - 1)
    x = err + 1
    data = x + 1 + rank
    first_index = data + 1 + rank
    return {"err": err, "x": x, "data": data, "index": first_index, "index_size": 3 + rank}


@dataclass(frozen=True, slots=True)
class NonzeroKernel:
    """`count`: args [sizes(r), x_ptr, xstrides(r), out_ptr] -> out[0] = count.

    `fill`: args [sizes(r), x_ptr, xstrides(r), out_ptr, capacity] -> the coordinates of
    the first `capacity` non-zero elements, row-major, as int64 rows of length r; rows
    past the count are zero. A 0-d input is a rank-0 loop of one element.
    """

    phase: str
    dtype: DType
    rank: int

    def __post_init__(self) -> None:
        if self.phase not in ("count", "fill"):
            raise ValueError(f"NonzeroKernel: phase must be count or fill, got {self.phase}")
        if self.dtype.is_complex:
            raise TypeError(f"nonzero: not generated for {self.dtype.name}")

    @property
    def n_slots(self) -> int:
        return 2 * self.rank + 2 + (self.phase == "fill")
