"""Helpers shared by the distributions (as `torch.distributions.utils`)."""

from __future__ import annotations

import math
from functools import update_wrapper
from numbers import Number
from typing import Any, Callable, Generic, TypeVar, overload

from ..tensor import Tensor

__all__ = [
    "broadcast_all",
    "logits_to_probs",
    "probs_to_logits",
    "clamp_probs",
    "lazy_property",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
    "euler_constant",
]

euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant


def _lg() -> Any:
    import llgrad  # circle: llgrad -> distributions -> distributions.continuous -> here

    return llgrad


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """Broadcast tensors and Python numbers together: numbers become tensors of the
    tensors' dtype, or of the default dtype when all are numbers. Raises ValueError for
    anything else (as torch). Where llgrad differs: broadcast results are made contiguous
    copies (torch returns expanded views); values and gradients are the same."""
    lg = _lg()
    if not all(
        isinstance(v, (Tensor, Number)) and not isinstance(v, bool) or isinstance(v, Tensor)
        for v in values
    ):
        raise ValueError(
            "Input arguments must all be instances of numbers.Number, "
            "torch.Tensor or objects implementing __torch_function__."
        )
    if not all(isinstance(v, Tensor) for v in values):
        dtype = lg.get_default_dtype()
        for v in values:
            if isinstance(v, Tensor):
                dtype = v.dtype
                break
        values = tuple(v if isinstance(v, Tensor) else lg.tensor(v, dtype=dtype) for v in values)
    # dense results: llgrad's math kernels compile far slower for stride-0 (expanded)
    # inputs, and the parameters feed many of them
    return tuple(v if v.is_contiguous() else v.contiguous() for v in lg.broadcast_tensors(*values))


def _standard_normal(shape: Any, dtype: Any, generator: Any = None) -> Tensor:
    """Standard normal draws of `shape` and `dtype`."""
    return _lg().randn(tuple(shape), dtype=dtype, generator=generator)


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum out the rightmost `dim` dimensions of `value`."""
    if dim == 0:
        return value
    required_shape = tuple(value.shape[: value.dim() - dim]) + (-1,)
    return value.reshape(required_shape).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from logits: sigmoid for binary (Bernoulli) logits, softmax over the
    last dimension otherwise."""
    lg = _lg()
    if is_binary:
        return lg.sigmoid(logits)
    return lg.softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Clamp probabilities into [eps, 1 - eps] (eps of their dtype), so that logs stay
    finite."""
    lg = _lg()
    eps = lg.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits from probabilities: log(p) - log1p(-p) for binary, log(p) otherwise (the
    probabilities are clamped first)."""
    lg = _lg()
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return lg.log(ps_clamped) - lg.log1p(-ps_clamped)
    return lg.log(ps_clamped)


T = TypeVar("T")
R = TypeVar("R")


class lazy_property(Generic[T, R]):
    """A property computed once on first access and then stored on the instance (as an
    attribute of the same name). Under `lg.no_grad`-free contexts it records the graph as
    the computation does; on the class it returns a placeholder (so `Distribution`'s
    validation can tell lazy arguments apart)."""

    def __init__(self, wrapped: Callable[[T], R]) -> None:
        self.wrapped = wrapped
        update_wrapper(self, wrapped)  # type: ignore[arg-type]

    @overload
    def __get__(
        self, instance: None, obj_type: Any = None
    ) -> "_lazy_property_and_property[T, R]": ...

    @overload
    def __get__(self, instance: T, obj_type: Any = None) -> R: ...

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property[T, R], property):
    """What `lazy_property` returns on the class: both a lazy_property and a property."""

    def __init__(self, wrapped: Callable[[T], R]) -> None:
        property.__init__(self, wrapped)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower triangle (below diagonal `diag`) of the last two dims, row by row, as a
    vector."""
    lg = _lg()
    n = mat.shape[-1]
    if not -n <= diag < n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    arange = lg.arange(n)
    tril_mask = arange < arange.view(-1, 1) + (diag + 1)
    vec = mat[..., tril_mask]
    return vec


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of `tril_matrix_to_vec`: a vector of n(n+1)/2 + ... entries placed
    row by row into the lower triangle of a square matrix (zeros elsewhere)."""
    lg = _lg()
    # vec.shape[-1] = n*(n+1)/2 + diag*n (for diag <= 0 it counts the cut-off entries)
    n = (
        -(1 + 2 * diag)
        + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5
    ) / 2
    eps = lg.finfo(vec.dtype).eps
    if not round(n) - n < eps:
        raise ValueError(
            f"The size of last dimension is {vec.shape[-1]} which cannot be "
            f"expressed as the lower triangular part of a square D x D matrix."
        )
    n = round(n.item()) if isinstance(n, Tensor) else round(n)
    arange = lg.arange(n)
    tril_mask = arange < arange.view(-1, 1) + (diag + 1)
    rows, cols = (int(v) for v in (n, n))
    idx = lg.nonzero(tril_mask.reshape(-1)).reshape(-1)
    flat = lg.zeros(tuple(vec.shape[:-1]) + (rows * cols,), dtype=vec.dtype)
    index = idx.expand(tuple(vec.shape[:-1]) + (idx.shape[0],))
    flat = flat.scatter(-1, index, vec)
    return flat.reshape(tuple(vec.shape[:-1]) + (rows, cols))


def _is_traced(*values: Any) -> bool:
    return any(getattr(v, "_ctx", None) is not None for v in values)


def _is_all_true(valid: Any) -> bool:
    """Whether every element of a constraint check holds; a traced check (inside
    `lg.compile`, values unknown) counts as holding."""
    if not isinstance(valid, Tensor):
        return bool(valid)
    if _is_traced(valid):
        return True
    return bool(valid.all())


def _finfo(t: Tensor) -> Any:
    return _lg().finfo(t.dtype)


LOG_2PI = math.log(2 * math.pi)
