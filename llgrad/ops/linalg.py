"""Linear algebra: the `matmul` primitive.

`matmul(a, b)` takes operands of rank >= 2, `(..., n, k) @ (..., k, m) -> (..., n, m)`,
whose batch dimensions broadcast (NumPy rules, as `torch.matmul` does for N-d inputs).
Both operands share one dtype: the frontend promotes first, and it reshapes 1-D operands
into matrices around this primitive, so the IR has one matmul with one shape rule.
The code generator calls BLAS for float32/float64/complex64/complex128 and generates loops
for the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.registry import Group, OpDef, get, register
from ..ir.types import TensorType, broadcast_shapes

MATMUL_KINDS = "biufc"  # bool, integers, floats and complex (c/zgemm)


def _pretty(t: TensorType) -> str:
    return f"{t.dtype.name}{list(t.shape)}"


def matmul_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The result shape of `(..., n, k) @ (..., k, m)`; errors name both shapes.

    The message follows PyTorch's ("mat1 and mat2 shapes cannot be multiplied (2x3 and
    4x5)") and adds the full shapes when there are batch dimensions.
    """
    if len(a) < 2 or len(b) < 2:
        raise RuntimeError(
            f"matmul: the primitive takes operands of rank >= 2, got shapes "
            f"{list(a)} and {list(b)} (the frontend reshapes 1-D operands)"
        )
    n, k = a[-2:]
    k2, m = b[-2:]
    full = "" if len(a) == len(b) == 2 else f" (shapes {list(a)} and {list(b)})"
    if k != k2:
        raise RuntimeError(
            f"matmul: mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {k2}x{m}){full}"
        )
    try:
        batch = broadcast_shapes(a[:-2], b[:-2], op="matmul")
    except ValueError:
        raise RuntimeError(
            f"matmul: batch dimensions {list(a[:-2])} and {list(b[:-2])} "
            f"cannot be broadcast together{full}"
        ) from None
    return batch + (n, m)


def _infer_matmul(types: tuple[TensorType, ...], **attrs: Any) -> TensorType:
    a, b = types
    if a.dtype is not b.dtype:
        raise TypeError(
            f"matmul: operands must share one dtype in the IR, got {_pretty(a)} and {_pretty(b)}"
        )
    if a.dtype.kind not in MATMUL_KINDS:
        raise TypeError(
            f"matmul: not implemented for {a.dtype.name} (inputs {_pretty(a)} and {_pretty(b)})"
        )
    return TensorType(a.dtype, matmul_shapes(a.shape, b.shape))


def _ref_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NumPy's matmul; float16 accumulates in float32 as the kernels do."""
    if a.dtype == np.float16:
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    return np.matmul(a, b)


register(
    OpDef(
        "matmul",
        Group.LINALG,
        2,
        infer=_infer_matmul,
        reference=_ref_matmul,
        backward_name="MmBackward0",
        promotion="same",
        doc="(..., n, k) @ (..., k, m) -> (broadcast(...), n, m); operands of rank "
        ">= 2 and one dtype",
    )
)


# --------------------------------------------------------------------------------------
# Derivative rules (conventions in ops/elementwise.py); the engine sums broadcast batch
# dimensions away.
# --------------------------------------------------------------------------------------


def column_major(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> bool:
    """Whether a matrix is stored column-major (a transposed view, as `weight.t()` in a
    linear layer): its gradient is then made in the same layout (`product_like`)."""
    return len(shape) == 2 and shape[0] > 1 and shape[1] > 1 and strides == (1, shape[0])


def product_like(F, ctx, k: int, left, right):
    """`left @ right`, the gradient of the node's matrix input `k`, in that input's memory
    layout: a column-major input gets `(right^T @ left^T)^T` (PyTorch's rule: the transpose
    back to a parameter is then the parameter's own contiguous layout, which `.grad` keeps
    without a copy)."""
    layouts = getattr(ctx, "input_strides", None)
    meta = ctx.input_meta[k] if layouts is not None else None
    if meta is not None and column_major(meta[0], layouts[k]):
        return F.transpose(F.matmul(F.transpose(right, 0, 1), F.transpose(left, 0, 1)), 0, 1)
    return F.matmul(left, right)


def _vjp_matmul(ctx, g):
    a, b = ctx.inputs
    F = ctx.F
    need = ctx.needs_input_grad
    if g.ndim == 2 and all(m is None or len(m[0]) == 2 for m in ctx.input_meta):
        ga = product_like(F, ctx, 0, g, F.transpose(F.conj(b), 0, 1)) if need[0] else None
        gb = product_like(F, ctx, 1, F.transpose(F.conj(a), 0, 1), g) if need[1] else None
        return (ga, gb)
    # conjugate transposes (PyTorch's convention for complex; conj is a no-op on reals)
    ga = F.matmul(g, F.transpose(F.conj(b), -2, -1)) if need[0] else None
    gb = F.matmul(F.transpose(F.conj(a), -2, -1), g) if need[1] else None
    return (ga, gb)


def _jvp_matmul(ctx, tangents):
    """Bilinear: d(a @ b) = da @ b + a @ db."""
    a, b = ctx.inputs
    ta, tb = tangents
    F = ctx.F
    out = None
    if ta is not None:
        out = F.matmul(ta, b)
    if tb is not None:
        part = F.matmul(a, tb)
        out = part if out is None else F.add(out, part)
    return out


_MATMUL = get("matmul")
_MATMUL.vjp = _vjp_matmul
_MATMUL.jvp = _jvp_matmul
_MATMUL.saves = "i"
_MATMUL.save_for = {0: (1,), 1: (0,)}  # each factor only for the other's gradient
_MATMUL.keeps_layout = True
