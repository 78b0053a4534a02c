"""matmul, mm, bmm, dot: rank handling with differentiable reshapes around one primitive."""

from __future__ import annotations

from typing import Any

from ..tape import forward as forward_ad
from ..dispatch.apply import apply, composite_function, interpreters, record
from ..dispatch.grad_mode import _state as _grad_state
from ..eager import linalg
from ..tensor import DENSE_CLASSES, Tensor
from ._errors import names_op
from .residual import out_dtype_operands
from .shape import reshape

_eager: Any = None  # llgrad.eager.linalg (imported on first use: import order)


def _run(a: Tensor, b: Tensor) -> Any:
    global _eager
    if _eager is None:
        _eager = linalg
    return _eager.run_matmul(a, b)


def _direct(a: Any, b: Any, rank: int, name: str) -> Tensor | None:
    """The product of two plain tensors of rank `rank` (2: mm, 3: bmm) with one dtype and
    agreeing sizes, straight to the primitive's kernel (`eager.linalg.run_matmul`) and,
    where a gradient is needed, the node `apply` would record; None where the general
    path must run (an interpreter or forward-mode level is active, other classes, ranks,
    dtypes or sizes: that path also raises the errors)."""
    if (
        interpreters
        or forward_ad._level[0]
        or a.__class__ not in DENSE_CLASSES
        or b.__class__ not in DENSE_CLASSES
    ):
        return None
    sa, sb = a._shape, b._shape
    if (
        len(sa) != rank
        or len(sb) != rank
        or sa[-1] != sb[-2]
        or a._dtype is not b._dtype
        or a._dtype.name == "bool"
        or (rank == 3 and sa[0] != sb[0])
    ):
        return None
    out = _run(a, b)
    if _grad_state.enabled and (a._requires_grad or b._requires_grad):
        record("matmul", (a, b), {}, out, name)
    return out


def _forward(op: str, operands: Any, attrs: Any) -> Tensor:
    global _eager
    if _eager is None:
        _eager = linalg
    return _eager.matmul(operands[0], operands[1])


def _check(op: str, a: Any, b: Any) -> None:
    for x in (a, b):
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(x).__name__}")
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(
            f"{op}: both arguments to matmul need to be at least 1D, but they "
            f"are {a.ndim}D and {b.ndim}D"
        )
    if a._dtype is not b._dtype:
        # PyTorch raises rather than promote (a float64 operand is usually a mistake)
        raise RuntimeError(
            f"{op}: expected m1 and m2 to have the same dtype, but got: "
            f"{a._dtype.name} != {b._dtype.name} (shapes {list(a._shape)} and "
            f"{list(b._shape)}; convert one with .to(dtype))"
        )
    if a._dtype.name == "bool":
        raise RuntimeError(
            f"{op}: not implemented for bool tensors (shapes {list(a._shape)} "
            f"and {list(b._shape)}; convert with .to(dtype))"
        )


def matmul(input: Tensor, other: Tensor) -> Tensor:
    out = _direct(input, other, 2, "MmBackward0")
    if out is not None:
        return out
    _check("matmul", input, other)
    a, b = input, other
    if a.ndim == 1 and b.ndim == 1:
        if a._shape != b._shape:
            raise RuntimeError(
                f"matmul: inconsistent tensor size, expected tensor [{a._shape[0]}] and "
                f"src [{b._shape[0]}] to have the same number of elements, but "
                f"got {a._shape[0]} and {b._shape[0]} elements respectively"
            )
        return dot(a, b)
    return _matmul(a, b, _matmul_name(a.ndim, b.ndim))


def _matmul_name(na: int, nb: int) -> str:
    """PyTorch's node for `matmul` of ranks na, nb: mm and mv are single ops; N-d products
    end in `_unsafe_view`, a 1-D @ 2-D product in a squeeze."""
    if na > 2 or nb > 2:
        return "UnsafeViewBackward0"
    return {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4"}[(na, nb)]


def _matmul(a: Tensor, b: Tensor, name: str) -> Tensor:
    """The primitive on operands of rank >= 2; 1-D operands become matrices around it. The
    last node carries `name`."""
    squeeze_a = a.ndim == 1
    squeeze_b = b.ndim == 1
    if squeeze_a:
        a = a.unsqueeze(0)
    if squeeze_b:
        b = b.unsqueeze(-1)
    if not (squeeze_a or squeeze_b):
        return apply("matmul", (a, b), None, _forward, name)
    out = apply("matmul", (a, b), None, _forward, "MmBackward0")
    shape = out._shape[:-2] + out._shape[-2:][int(squeeze_a) : 2 - int(squeeze_b)]
    return reshape(out, shape, name=name)


@names_op("mm")
def mm(input: Tensor, mat2: Tensor, *, out_dtype: Any = None) -> Tensor:
    """The matrix product of two 2-D tensors. `out_dtype=lg.float32` on float16/bfloat16
    matrices gives the float32 accumulation itself (not rounded to the inputs' dtype)."""
    if out_dtype is None:
        out = _direct(input, mat2, 2, "MmBackward0")
        if out is not None:
            return out
    else:
        input, mat2 = out_dtype_operands("mm", out_dtype, input, mat2)
    _check("mm", input, mat2)
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


@names_op("bmm")
def bmm(input: Tensor, mat2: Tensor, *, out_dtype: Any = None) -> Tensor:
    """Batched matrix product of two 3-D tensors; `out_dtype` as for `mm`."""
    if out_dtype is None:
        out = _direct(input, mat2, 3, "BmmBackward0")
        if out is not None:
            return out
    else:
        input, mat2 = out_dtype_operands("bmm", out_dtype, input, mat2)
    _check("bmm", input, mat2)
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: expected 3D tensors, got {input.ndim}D and {mat2.ndim}D")
    if input._shape[0] != mat2._shape[0]:
        raise RuntimeError(
            f"bmm: batch sizes must match, got {input._shape[0]} and {mat2._shape[0]}"
        )
    return _matmul(input, mat2, "BmmBackward0")


@names_op("dot")
@composite_function
def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """The inner product of two 1-D tensors of the same length and dtype (no conjugate:
    see `vdot`)."""
    other = tensor
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")

    _check("dot", input, other)
    out = _matmul(input.unsqueeze(0), other.unsqueeze(-1), "MmBackward0")
    return reshape(out, (), name="DotBackward0")


@names_op("mv")
@composite_function
def mv(input: Tensor, vec: Tensor) -> Tensor:
    _check("mv", input, vec)
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(
            f"mv: expected a 2-D matrix and a 1-D vector, got {input.ndim}-D "
            f"and {vec.ndim}-D (shapes {list(input._shape)} and "
            f"{list(vec._shape)})"
        )
    return matmul(input, vec)


@names_op("outer")
@composite_function
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    for x, what in ((input, "self"), (vec2, "vec2")):
        if not isinstance(x, Tensor) or x.ndim != 1:
            raise RuntimeError(
                f"outer: expected 1-D argument {what}, but got "
                f"{getattr(x, 'ndim', type(x).__name__)}-D"
            )
    return input.unsqueeze(-1) * vec2.unsqueeze(0)
