"""Eager matmul: `matmul`, `mm`, `bmm` on the `matmul` primitive.

`matmul` implements every rank case of `torch.matmul` by reshaping views around the
primitive (which takes rank >= 2 operands with broadcasting batches): a 1-D left operand
becomes a row `(1, k)`, a 1-D right operand a column `(k, 1)`, and the added dimension is
dropped from the result. Operands of different dtypes are promoted with PyTorch's rule
(`torch.matmul` itself refuses mixed dtypes; llgrad promotes, as its elementwise ops do).

`run_matmul` is the primitive's dispatch: it validates through the registry's shape rule,
chooses a layout per operand so BLAS reads transposed views in place, copies only what no
layout can express, folds a batch into the rows when the right operand is shared, and
makes one kernel call (split across threads when that cannot oversubscribe BLAS).
"""

from __future__ import annotations

from typing import Any

from ..codegen.matmul import build
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.promotion import promote
from ..ir.types import TensorType
from ..runtime import blas, cache, launch
from ..schedule.layout import broadcast_strides, collapse, contiguous_strides
from ..schedule.matmul import ALPHA_ONE, MatmulKernel, fold_rows, gemm_layout, panels, uses_blas
from ..tensor import Tensor
from .elementwise import copy_into
from .views import expand, reshape, slice_dims

cache.register_builder(MatmulKernel, build)

INT32_MAX = blas.INT32_MAX
SPLIT_MIN_MACS = 1 << 21  # multiply-adds below which one core finishes sooner


# --------------------------------------------------------------------------------------
# Operand layouts
# --------------------------------------------------------------------------------------


def _compact_shape(shape: tuple[int, ...], strides: tuple[int, ...], keep: int) -> tuple[int, ...]:
    """`shape` with every broadcast (stride 0) dimension but the last `keep` cut to 1."""
    lead = len(shape) - keep
    return tuple(1 if d < lead and st == 0 else n for d, (n, st) in enumerate(zip(shape, strides)))


def compact_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], keep: int = 0
) -> tuple[int, ...]:
    """The strides `compact_copy(t, keep=keep)` gives a tensor of these shape/strides."""
    small = _compact_shape(shape, strides, keep)
    dense = contiguous_strides(small)
    return tuple(s if n == o else 0 for n, o, s in zip(small, shape, dense))


def compact_copy(t: Tensor, dtype: DType | None = None, keep: int = 0) -> Tensor:
    """A contiguous copy (optionally converted) that keeps broadcast dimensions broadcast.

    Dimensions with stride 0, except the last `keep`, are copied once and expanded back,
    so copying an expanded batch never materializes the repeats.
    """
    shape = _compact_shape(t._shape, t._strides, keep)
    src = slice_dims(t, (0,) * t.ndim, shape, (1,) * t.ndim)
    dst = Tensor._empty(shape, dtype or t._dtype)
    copy_into(dst, src)
    return dst if shape == t._shape else expand(dst, t._shape)


# --------------------------------------------------------------------------------------
# The primitive
# --------------------------------------------------------------------------------------


class _Plan:
    """Everything about a matmul call that depends only on dtypes, shapes and strides.

    `copy_a`/`copy_b`: the operand is first copied with `compact_copy(keep=2)` (its
    matrices have no layout the kernel can read). `fill`: the result is all zeros (k = 0).
    `kernel` is None when there is nothing to compute.
    """

    __slots__ = (
        "out_shape",
        "dtype",
        "kernel",
        "template",
        "slots",
        "work",
        "copy_a",
        "copy_b",
        "fill",
        "make_output",
    )

    def __init__(self, out_shape: tuple[int, ...], dtype: DType) -> None:
        self.out_shape = out_shape
        self.dtype = dtype
        self.kernel: cache.Kernel | None = None
        self.template: list[int] = []
        self.slots: tuple[int, int, int] = (0, 0, 0)
        self.work = 0
        self.copy_a = self.copy_b = self.fill = False
        self.make_output = Tensor._empty_maker(out_shape, dtype, contiguous_strides(out_shape))


_plans: dict[tuple, _Plan] = {}
_PLAN_LIMIT = 4096


def _check_blas_sizes(a: Tensor, b: Tensor, n: int, m: int, k: int) -> None:
    for label, v in (("n", n), ("m", m), ("k", k)):
        if v > INT32_MAX:
            raise RuntimeError(
                f"matmul: {a._dtype.name} runs on BLAS, whose sizes are 32-bit; {label}={v} "
                f"exceeds {INT32_MAX} (shapes {list(a._shape)} and {list(b._shape)})"
            )


def _plan(a: Tensor, b: Tensor) -> _Plan:
    """Validate, choose layouts, copies and the kernel, and fill the argument template.

    OpenBLAS's thread count is read here, so a plan keeps the split decision made when
    its shapes were first seen.
    """
    out_type = registry.get("matmul").infer(
        (TensorType(a._dtype, a._shape), TensorType(b._dtype, b._shape))
    )
    d = out_type.dtype
    plan = _Plan(out_type.shape, d)
    n, k = a._shape[-2:]
    m = b._shape[-1]
    use_blas = uses_blas(d)
    if use_blas:
        _check_blas_sizes(a, b, n, m, k)
    if 0 in out_type.shape:
        return plan
    if k == 0:
        plan.fill = True
        return plan
    a_strides, b_strides = a._strides, b._strides
    if use_blas:
        plan.copy_a = gemm_layout(n, k, *a_strides[-2:]) is None
        plan.copy_b = gemm_layout(k, m, *b_strides[-2:]) is None
    else:
        plan.copy_b = m > 1 and b_strides[-1] != 1
    if plan.copy_a:
        a_strides = compact_strides(a._shape, a_strides, keep=2)
    if plan.copy_b:
        b_strides = compact_strides(b._shape, b_strides, keep=2)
    batch = out_type.shape[:-2]
    c_strides = contiguous_strides(out_type.shape)
    strides = {
        "c": c_strides[:-2],
        "a": broadcast_strides(a._shape[:-2], a_strides[:-2], batch),
        "b": broadcast_strides(b._shape[:-2], b_strides[:-2], batch),
    }
    strides = {
        x: tuple(0 if size == 1 else s for size, s in zip(batch, st)) for x, st in strides.items()
    }  # size-1 dimensions never move
    rows = {"c": c_strides[-2], "a": a_strides[-2], "b": b_strides[-2]}
    cols = {"c": 1, "a": a_strides[-1], "b": b_strides[-1]}
    folded = fold_rows(batch, n, strides, rows)
    if folded is not None and (
        not use_blas
        or (  # BLAS: the folded rows stay 32-bit
            folded[0] <= INT32_MAX and gemm_layout(folded[0], k, folded[1], cols["a"])
        )
    ):
        n, rows["a"] = folded
        batch, strides = (), {"c": (), "a": (), "b": ()}
    threads = launch._THREADS
    if (
        use_blas
        and not batch
        and threads > 1
        and n * m * k >= SPLIT_MIN_MACS
        and blas.runs_single_threaded(n, m, k, d)
    ):
        batch, strides, n, m = panels(threads, n, m, rows, cols)  # one panel per thread
    sizes, (cs, as_, bs) = collapse(batch, [strides["c"], strides["a"], strides["b"]])
    flags = [0, 0]
    if use_blas:
        for x, (label, r, c) in enumerate((("a", n, k), ("b", k, m))):
            layout = gemm_layout(r, c, rows[label], cols[label])
            assert layout is not None, "operand layouts were fixed above"
            flags[x] = int(layout[0])
            rows[label], cols[label] = (1, layout[1]) if layout[0] else (layout[1], 1)
        rows["c"] = max(1, rows["c"])
    else:
        cols["b"] = 1
    total = 1
    for size in sizes:
        total *= size
    template = [0, total if use_blas else total * n, n, m, k, *sizes]
    slots = []
    for label, bstrides in (("c", cs), ("a", as_), ("b", bs)):
        slots.append(len(template))
        template += [0, *bstrides, rows[label], cols[label]]
    template += [
        *flags,
        blas.gemm_address(d) if use_blas else 0,
        blas.gemv_address(d) if use_blas and 1 in (n, m) else 0,
        ALPHA_ONE,
    ]
    plan.kernel = cache.get(MatmulKernel(d, len(sizes)))
    plan.template = template
    plan.slots = (slots[0], slots[1], slots[2])
    # Split the outer loop across threads only when every piece runs on one core: the
    # loops always do; BLAS does when OpenBLAS would not thread this size itself.
    macs = total * n * m * k
    if macs >= SPLIT_MIN_MACS and (not use_blas or blas.runs_single_threaded(n, m, k, d)):
        plan.work = launch.PARALLEL_MIN_WORK
    return plan


def run_matmul(a: Tensor, b: Tensor) -> Tensor:
    """The `matmul` primitive: `(..., n, k) @ (..., k, m)`, one dtype, rank >= 2.

    Plans are cached by (dtypes, shapes, strides), so a repeated call costs a dictionary
    lookup, an allocation and one foreign call.
    """
    key = (a._dtype, a._shape, a._strides, b._dtype, b._shape, b._strides)
    plan = _plans.get(key)
    if plan is None:
        plan = _plan(a, b)
        if len(_plans) >= _PLAN_LIMIT:
            _plans.clear()
        _plans[key] = plan
    out = plan.make_output()
    if plan.kernel is None:
        if plan.fill:
            copy_into(out, False if plan.dtype.kind == "b" else 0)
        return out
    if plan.copy_a:
        a = compact_copy(a, keep=2)
    if plan.copy_b:
        b = compact_copy(b, keep=2)
    args = plan.template.copy()
    sc, sa, sb = plan.slots
    args[sc], args[sa], args[sb] = out._ptr, a._ptr, b._ptr
    if plan.work or launch._recording:
        launch.call_split(plan.kernel, args, plan.work)
    else:  # one thread: what call_split would come to
        launch.call(plan.kernel, args)
    return out


# --------------------------------------------------------------------------------------
# matmul, mm, bmm
# --------------------------------------------------------------------------------------


def _check_tensors(op: str, a: Any, b: Any) -> None:
    for x in (a, b):
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{op}: expected Tensor operands, got {type(a).__name__} and {type(b).__name__}"
            )


def _promoted(op: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Both operands in PyTorch's promoted dtype (a converting copy only if needed)."""
    if a._dtype is b._dtype:
        return a, b  # the primitive's shape rule names unsupported dtypes
    d = promote([a, b])
    convert = [x if x._dtype is d else compact_copy(x, d) for x in (a, b)]
    return convert[0], convert[1]


def _mismatch(op: str, a: Tensor, b: Tensor) -> RuntimeError:
    n = a._shape[-2] if a.ndim > 1 else 1
    m = b._shape[-1] if b.ndim > 1 else 1
    ka, kb = a._shape[-1], b._shape[-2] if b.ndim > 1 else b._shape[0]
    return RuntimeError(
        f"{op}: mat1 and mat2 shapes cannot be multiplied ({n}x{ka} and "
        f"{kb}x{m}) (shapes {list(a._shape)} and {list(b._shape)})"
    )


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """`torch.matmul`: dot, matrix-vector, vector-matrix, and batched with broadcasting."""
    _check_tensors("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(
            f"matmul: both arguments to matmul need to be at least 1D, but "
            f"they are {a.ndim}D and {b.ndim}D (shapes {list(a._shape)} and "
            f"{list(b._shape)})"
        )
    ka = a._shape[-1]
    kb = b._shape[0] if b.ndim == 1 else b._shape[-2]
    if ka != kb:
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError(
                f"matmul: inconsistent sizes for a dot product: 1-D tensors "
                f"of {ka} and {kb} elements"
            )
        raise _mismatch("matmul", a, b)
    a, b = _promoted("matmul", a, b)
    if a.ndim == 1 and b.ndim == 1:
        r = run_matmul(reshape(a, (1, ka)), reshape(b, (kb, 1)))
        return reshape(r, ())
    if a.ndim == 1:
        r = run_matmul(reshape(a, (1, ka)), b)
        return reshape(r, r._shape[:-2] + r._shape[-1:])
    if b.ndim == 1:
        r = run_matmul(a, reshape(b, (kb, 1)))
        return reshape(r, r._shape[:-1])
    return run_matmul(a, b)


def mm(a: Tensor, b: Tensor) -> Tensor:
    """`torch.mm`: both operands exactly 2-D, no broadcasting."""
    _check_tensors("mm", a, b)
    for label, x in (("self", a), ("mat2", b)):
        if x.ndim != 2:
            raise RuntimeError(
                f"mm: {label} must be a matrix, got a {x.ndim}-D tensor of shape {list(x._shape)}"
            )
    if a._shape[1] != b._shape[0]:
        raise _mismatch("mm", a, b)
    return run_matmul(*_promoted("mm", a, b))


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """`torch.bmm`: both operands exactly 3-D with the same batch size, no broadcasting."""
    _check_tensors("bmm", a, b)
    for label, x in (("batch1", a), ("batch2", b)):
        if x.ndim != 3:
            raise RuntimeError(
                f"bmm: {label} must be a 3D tensor, got a {x.ndim}-D tensor "
                f"of shape {list(x._shape)}"
            )
    if a._shape[0] != b._shape[0]:
        raise RuntimeError(
            f"bmm: batch1 and batch2 must have the same batch size, got "
            f"shapes {list(a._shape)} and {list(b._shape)}"
        )
    if a._shape[2] != b._shape[1]:
        raise _mismatch("bmm", a, b)
    return run_matmul(*_promoted("bmm", a, b))
