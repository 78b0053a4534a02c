"""Matrix functions at the `lg.*` level: products (addmm, baddbmm, ...), decompositions and solvers (the `lg.linalg` forms and their legacy names).

The products (`addmm addmv addr addbmm baddbmm chain_matmul ger inner vdot kron tensordot`)
and distances (`cdist pdist dist`) are made of llgrad's differentiable ops, so they compile
into graphs. The decompositions and solvers call `lg.linalg`'s LAPACK-backed ops (a graph
break inside `lg.compile`); the legacy forms (`torch.svd` returning V, `torch.qr(some=)`,
`torch.lu`, `triangular_solve`, `cholesky_solve`, ...) are written on them.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any, Callable, Sequence

import numpy as np

from ..dispatch.apply import composite_function
from ..ir import dtypes as dt
from ..ir.types import normalize_axis
from ..tensor import Tensor
from ._errors import names_op
from ._out import store
from .creation import tensor as mk
from .inplace import _rewrite_inplace
from .residual import out_dtype_operands

__all__: list[str] = [
    "addbmm",
    "addmm",
    "addmv",
    "addr",
    "baddbmm",
    "cdist",
    "chain_matmul",
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "det",
    "dist",
    "frobenius_norm",
    "geqrf",
    "ger",
    "inner",
    "inverse",
    "kron",
    "logdet",
    "lu",
    "lu_solve",
    "lu_unpack",
    "matrix_exp",
    "matrix_power",
    "nuclear_norm",
    "orgqr",
    "ormqr",
    "pdist",
    "pinverse",
    "qr",
    "slogdet",
    "svd",
    "tensordot",
    "triangular_solve",
    "vdot",
    "addmm_",
    "addmv_",
    "addr_",
    "addbmm_",
    "baddbmm_",
    "cross",
    "svd_lowrank",
    "pca_lowrank",
]


_modules: dict[str, Any] = {}  # llgrad.functions, llgrad.linalg and its parts, once


def _F() -> Any:
    m = _modules.get("F")
    if m is None:
        from .. import functions as m  # circle: functions -> here

        _modules["F"] = m
    return m


def _L() -> Any:
    m = _modules.get("L")
    if m is None:
        from .. import linalg as m  # circle: linalg -> functions -> here

        _modules["L"] = m
    return m


def _D() -> Any:
    """llgrad.linalg._decomp (the LAPACK-backed ops)."""
    m = _modules.get("D")
    if m is None:
        from ..linalg import _decomp as m  # circle: linalg._decomp -> functions -> here

        _modules["D"] = m
    return m


def _H() -> Any:
    """llgrad.linalg._host (checks and helpers shared by the LAPACK-backed ops)."""
    m = _modules.get("H")
    if m is None:
        from ..linalg import _host as m  # circle: linalg._host -> functions -> here

        _modules["H"] = m
    return m


def _T(x: Any, op: str, what: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{what}' must be Tensor, not {type(x).__name__}")
    return x


def _scaled(x: Tensor, s: Any) -> Tensor:
    F = _F()
    if isinstance(s, bool) or s != 1:
        return F.mul(x, s)
    return x


def _beta_alpha(op: str, input: Tensor, product: Tensor, beta: Any, alpha: Any) -> Tensor:
    """beta * input + alpha * product; with beta == 0 `input` is ignored (NaN and inf in it
    do not propagate), as torch. On integer tensors float beta/alpha are truncated toward
    zero (addmm, addmv, addbmm, baddbmm: torch converts them to the tensor's type); addr
    refuses them, as torch."""
    F = _F()
    if not (input._dtype.is_floating_point or input._dtype.is_complex):
        if isinstance(beta, float) or isinstance(alpha, float):
            if op == "addr" or input._dtype is dt.bool_:
                raise RuntimeError(
                    f"{op}: For integral input tensors, argument beta/alpha "
                    f"must not be a floating point number."
                )
            beta = int(beta) if isinstance(beta, float) else beta
            alpha = int(alpha) if isinstance(alpha, float) else alpha
        if input._dtype is dt.bool_ and product._dtype is dt.bool_:
            beta, alpha = bool(beta), bool(alpha)  # bool stays bool: and/or, as torch
    p = _scaled(product, alpha)
    try:
        shape = tuple(np.broadcast_shapes(tuple(input._shape), tuple(p._shape)))
    except ValueError:
        shape = None
    if shape != tuple(p._shape):
        raise RuntimeError(
            f"{op}: the input of shape {list(input._shape)} cannot be "
            f"broadcast to the product's shape {list(p._shape)}"
        )
    if beta == 0:
        # input's values are ignored (NaN and inf do not propagate); its gradient is 0
        keep = F.ones(p._shape, dtype=dt.bool_)
        return F.where(keep, p, input)
    return F.add(_scaled(input, beta), p)


def _same_dtype(op: str, *ts: Tensor) -> None:
    for t in ts[1:]:
        if t._dtype is not ts[0]._dtype:
            raise RuntimeError(
                f"{op}: expected m1 and m2 to have the same dtype, but got: "
                f"{ts[0]._dtype.name} != {t._dtype.name}"
            )


@names_op("addmm")
@composite_function
def addmm(
    input: Tensor,
    mat1: Tensor,
    mat2: Tensor,
    *,
    beta: Any = 1,
    alpha: Any = 1,
    out_dtype: Any = None,
) -> Tensor:
    """beta * input + alpha * (mat1 @ mat2) for 2-D mat1, mat2 (input broadcasts), as
    torch.addmm; made of mm, mul and add. `out_dtype=lg.float32` on float16/bfloat16
    operands computes and returns float32."""
    F = _F()
    if out_dtype is not None:
        input, mat1, mat2 = out_dtype_operands("addmm", out_dtype, input, mat1, mat2)
    _T(input, "addmm"), _T(mat1, "addmm", "mat1"), _T(mat2, "addmm", "mat2")
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(
            f"addmm: mat1 must be a matrix, got {mat1.ndim}-D tensor"
            if mat1.ndim != 2
            else f"addmm: mat2 must be a matrix, got {mat2.ndim}-D tensor"
        )
    if mat1._shape[1] != mat2._shape[0]:
        raise RuntimeError(
            f"addmm: mat1 and mat2 shapes cannot be multiplied "
            f"({mat1._shape[0]}x{mat1._shape[1]} and {mat2._shape[0]}x"
            f"{mat2._shape[1]})"
        )
    return _beta_alpha("addmm", input, F.mm(mat1, mat2), beta, alpha)


@names_op("addmv")
@composite_function
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta * input + alpha * (mat @ vec) for 2-D mat and 1-D vec, as torch.addmv."""
    F = _F()
    _T(input, "addmv"), _T(mat, "addmv", "mat"), _T(vec, "addmv", "vec")
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(
            f"addmv: vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}"
        )
    if mat._shape[1] != vec._shape[0]:
        raise RuntimeError(
            f"addmv: size mismatch, got input ({input._shape[0] if input.ndim else 1}), "
            f"mat ({mat._shape[0]}x{mat._shape[1]}), vec ({vec._shape[0]})"
        )
    return _beta_alpha("addmv", input, F.mv(mat, vec), beta, alpha)


@names_op("addr")
@composite_function
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2), as torch.addr."""
    F = _F()
    _T(input, "addr"), _T(vec1, "addr", "vec1"), _T(vec2, "addr", "vec2")
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(
            f"addr: expected 1-D argument vec1 and vec2, but got {vec1.ndim}-D and {vec2.ndim}-D"
        )
    return _beta_alpha("addr", input, F.outer(vec1, vec2), beta, alpha)


@names_op("addbmm")
@composite_function
def addbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
) -> Tensor:
    """beta * input + alpha * sum_i batch1[i] @ batch2[i], as torch.addbmm."""
    F = _F()
    _T(input, "addbmm"), _T(batch1, "addbmm", "batch1"), _T(batch2, "addbmm", "batch2")
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(
            f"addbmm: batch1 must be a 3D tensor, got {batch1.ndim}D"
            if batch1.ndim != 3
            else f"addbmm: batch2 must be a 3D tensor, got {batch2.ndim}D"
        )
    return _beta_alpha("addbmm", input, F.sum(F.bmm(batch1, batch2), 0), beta, alpha)


@names_op("baddbmm")
@composite_function
def baddbmm(
    input: Tensor,
    batch1: Tensor,
    batch2: Tensor,
    *,
    beta: Any = 1,
    alpha: Any = 1,
    out_dtype: Any = None,
) -> Tensor:
    """beta * input + alpha * bmm(batch1, batch2), as torch.baddbmm; `out_dtype` as for
    `addmm`."""
    F = _F()
    if out_dtype is not None:
        input, batch1, batch2 = out_dtype_operands("baddbmm", out_dtype, input, batch1, batch2)
    _T(input, "baddbmm"), _T(batch1, "baddbmm", "batch1"), _T(batch2, "baddbmm", "batch2")
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError(
            f"baddbmm: batch1 must be a 3D tensor, got {batch1.ndim}D"
            if batch1.ndim != 3
            else f"baddbmm: batch2 must be a 3D tensor, got {batch2.ndim}D"
        )
    return _beta_alpha("baddbmm", input, F.bmm(batch1, batch2), beta, alpha)


def _inplace(name: str, fn: Callable[..., Tensor]) -> Callable[..., Any]:
    """`x.name_(...)`: x overwritten with `fn(x, ...)`, recorded as torch's in-place ops."""

    def checked(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        r = fn(x, *args, **kwargs)
        if r._shape != x._shape:
            raise RuntimeError(
                f"{name}_: output with shape {list(x._shape)} doesn't match "
                f"the broadcast shape {list(r._shape)}"
            )
        return r

    method = names_op(f"{name}_")(_rewrite_inplace(name, checked))
    method.__doc__ = f"In-place `{name}`: writes `{name}(self, ...)` into self, returns self."
    return method


addmm_ = _inplace("addmm", addmm)
addmv_ = _inplace("addmv", addmv)
addr_ = _inplace("addr", addr)
addbmm_ = _inplace("addbmm", addbmm)
baddbmm_ = _inplace("baddbmm", baddbmm)


@names_op("chain_matmul")
def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of 2-D matrices in the cheapest order, as torch.chain_matmul (one
    matrix: itself)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if _T(m, "chain_matmul", f"matrices[{i}]").ndim != 2:
            raise RuntimeError(f"chain_matmul(): Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return _F().clone(matrices[0])
    return _L().multi_dot(list(matrices))


@names_op("ger")
def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors (torch.ger, an alias of outer)."""
    return _F().outer(input, vec2)


@names_op("inner")
def inner(input: Tensor, other: Tensor) -> Tensor:
    """The sum of products over the last dimension of both (a scalar operand
    multiplies), result shape input.shape[:-1] + other.shape[:-1], as torch.inner."""
    F = _F()
    _T(input, "inner"), _T(other, "inner", "other")
    if input.ndim == 0 or other.ndim == 0:
        return F.mul(input, other)
    if input._shape[-1] != other._shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors "
            f"but got shapes {list(input._shape)} and {list(other._shape)}"
        )
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]))


@names_op("vdot")
@composite_function
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """sum(conj(input) * other) of two 1-D tensors, as torch.vdot."""
    F = _F()
    _T(input, "vdot"), _T(other, "vdot", "other")
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input._dtype is not other._dtype:
        raise RuntimeError(
            f"vdot: expected both vectors to have same dtype, but found "
            f"{input._dtype.name} and {other._dtype.name}"
        )
    if input._shape[0] != other._shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{input._shape[0]}] "
            f"and src [{other._shape[0]}] to have the same number of elements,"
            f" but got {input._shape[0]} and {other._shape[0]} elements "
            f"respectively"
        )
    x = F.conj(input) if input._dtype.is_complex else input
    return F.dot(x, other)


@names_op("kron")
@composite_function
def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product (blocks input[i] * other), as torch.kron."""
    F = _F()
    _T(input, "kron"), _T(other, "kron", "other")
    n = max(input.ndim, other.ndim)
    a = F.reshape(input, (1,) * (n - input.ndim) + tuple(input._shape))
    b = F.reshape(other, (1,) * (n - other.ndim) + tuple(other._shape))
    sa, sb = a._shape, b._shape
    a2 = F.reshape(a, tuple(x for s in sa for x in (s, 1)))
    b2 = F.reshape(b, tuple(x for s in sb for x in (1, s)))
    prod = F.mul(a2, b2)
    return F.reshape(prod, tuple(x * y for x, y in zip(sa, sb)))


@names_op("tensordot")
def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Any = None) -> Tensor:
    """Contraction of a's dims `dims[0]` with b's `dims[1]` (an int n: a's last n with
    b's first n), as torch.tensordot; one matmul between permuted reshapes. A contracted
    dimension of size 1 broadcasts against the other side's (which is summed), as torch."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    r = _tensordot(a, b, dims)
    if out is not None:
        return store("tensordot", r, out)
    return r


@composite_function
def _tensordot(a: Tensor, b: Tensor, dims: Any) -> Tensor:
    """`tensordot` without `out` (a composite: one compiled call per signature)."""
    F = _F()
    _T(a, "tensordot", "a"), _T(b, "tensordot", "b")
    if isinstance(dims, (int, np.integer)):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da = list(range(a.ndim - dims, a.ndim))
        db = list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise RuntimeError(
            f"both dimension lists should have same length (got {len(da)} and {len(db)})"
        )

    da = [normalize_axis(d, a.ndim, "tensordot") for d in da]
    db = [normalize_axis(d, b.ndim, "tensordot") for d in db]
    for x, y in zip(da, db):
        # a size-1 contracted dimension broadcasts: the other side is summed there first
        if b._shape[y] == 1 and a._shape[x] != 1:
            a = F.sum(a, x, keepdim=True)
        elif a._shape[x] == 1 and b._shape[y] != 1:
            b = F.sum(b, y, keepdim=True)
        elif a._shape[x] != b._shape[y]:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size "
                f"{a._shape[x]} in dim {x} and second has size {b._shape[y]} "
                f"in dim {y}"
            )
    if a._dtype is not b._dtype:
        raise RuntimeError(
            f"tensordot: expected both tensors to have the same dtype, but "
            f"got {a._dtype.name} and {b._dtype.name}"
        )
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a._shape[d] for d in da)
    ma = math.prod(a._shape[d] for d in free_a)
    nb = math.prod(b._shape[d] for d in free_b)
    pa = F.reshape(F.permute(a, free_a + da), (ma, k))
    pb = F.reshape(F.permute(b, db + free_b), (k, nb))
    r = F.mm(pa, pb)
    return F.reshape(r, tuple(a._shape[d] for d in free_a) + tuple(b._shape[d] for d in free_b))


@names_op("cross")
@composite_function
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product along `dim` (None: the first dimension of size 3, as torch's
    deprecated default), as torch.cross."""
    _T(input, "cross"), _T(other, "cross", "other")
    if dim is None:
        import warnings

        F = _F()
        shape = tuple(np.broadcast_shapes(tuple(input._shape), tuple(other._shape)))
        sizes = [i for i, s in enumerate(shape) if s == 3]
        if not sizes:
            raise RuntimeError(f"no dimension of size 3 in input (shape {list(shape)})")
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated. "
            "Please either pass the dim explicitly or simply use torch.linalg.cross."
            "",
            UserWarning,
            stacklevel=3,
        )
        dim = sizes[0]
        input, other = F.broadcast_tensors(input, other)
    return _L().cross(input, other, dim=dim)


# --------------------------------------------------------------------------------------
# distances and norms
# --------------------------------------------------------------------------------------


@names_op("cdist")
@composite_function
def cdist(
    x1: Tensor,
    x2: Tensor,
    p: float = 2.0,
    compute_mode: str = "use_mm_for_euclid_dist_if_necessary",
) -> Tensor:
    """The p-norm distances between the rows of x1 (..., P, M) and of x2 (..., R, M):
    (..., P, R), as torch.cdist (computed from the differences: `compute_mode` changes
    nothing; the gradient at a zero distance is 0, as torch's)."""
    F = _F()
    _T(x1, "cdist", "x1"), _T(x2, "cdist", "x2")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1._shape[-1] != x2._shape[-1]:
        raise RuntimeError(
            f"X1 and X2 must have the same number of columns. X1: "
            f"{x1._shape[-1]} X2: {x2._shape[-1]}"
        )
    if not (x1._dtype.is_floating_point):
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {x1._dtype.name}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    if compute_mode not in (
        "use_mm_for_euclid_dist_if_necessary",
        "use_mm_for_euclid_dist",
        "donot_use_mm_for_euclid_dist",
    ):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    diff = F.sub(F.unsqueeze(x1, -2), F.unsqueeze(x2, -3))
    return _L().vector_norm(diff, p, -1)


@names_op("pdist")
def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The p-norm distances between the rows i < j of a 2-D input, in row-major order of
    the pairs, as torch.pdist."""
    F = _F()
    _T(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    n = input._shape[0]
    rows, cols = np.triu_indices(n, 1)

    ri, ci = mk(rows.astype(np.int64)), mk(cols.astype(np.int64))
    diff = F.sub(input[ri], input[ci])
    return _L().vector_norm(diff, p, -1)


@names_op("dist")
@composite_function
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of input - other (broadcast), as torch.dist."""
    F = _F()
    return _L().vector_norm(F.sub(input, other), p)


@names_op("frobenius_norm")
def frobenius_norm(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """The Frobenius norm over `dim`, as torch.frobenius_norm (its deprecated form of
    linalg.vector_norm(input, 2, dim, keepdim))."""
    return _L().vector_norm(input, 2, dim, keepdim)


@names_op("nuclear_norm")
def nuclear_norm(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The nuclear norm (sum of singular values) of the matrices over `dim` (default the
    last two), as torch.nuclear_norm; `nuclear_norm(x, keepdim)` with a bool as the
    second argument is torch's other overload."""
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(
                f"nuclear_norm: Expected a tensor with 2 dimensions, but got "
                f"a tensor with {input.ndim} dimensions instead."
            )
        dim = (-2, -1)
    return _L().matrix_norm(input, "nuc", dim, keepdim)


# --------------------------------------------------------------------------------------
# decompositions, legacy names
# --------------------------------------------------------------------------------------


@names_op("det")
def det(input: Tensor) -> Tensor:
    """The determinant of each square matrix (torch.det: linalg.det)."""
    return _L().det(input)


@names_op("slogdet")
def slogdet(input: Tensor) -> Any:
    """(sign, log|det|) of each square matrix (torch.slogdet: linalg.slogdet)."""
    return _L().slogdet(input)


@names_op("logdet")
def logdet(input: Tensor) -> Tensor:
    """log(det(input)): NaN for a negative determinant of a real matrix, -inf for zero,
    the complex logarithm for complex input, as torch.logdet."""
    fast = _D().logdet_fast(input) if isinstance(input, Tensor) else None
    if fast is not None:
        return fast
    F = _F()
    sign, logabs = _L().slogdet(input)
    if input._dtype.is_complex:
        return F.add(logabs.to(input._dtype), F.mul(F.angle(sign).to(input._dtype), 1j))
    nan = F.full((), math.nan, dtype=logabs._dtype)
    return F.where(F.lt(sign, 0), nan, logabs)


@names_op("inverse")
def inverse(input: Tensor) -> Tensor:
    """The inverse of each square matrix (torch.inverse: linalg.inv)."""
    return _L().inv(input)


@names_op("cholesky")
def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """The Cholesky factor (torch.cholesky: linalg.cholesky with `upper`)."""
    D = _D()
    if D._lapack_plain(input, True):  # linalg.cholesky's short way, called directly
        L, info = D._cholesky_fast(input, upper, False)
        if info is not None and bytes(info).strip(b"\0"):
            D._info_error("linalg.cholesky", info, input, "cholesky")
        return L
    return _L().cholesky(input, upper=upper)


@names_op("cholesky_solve")
def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """The solution X of A X = B given A's Cholesky factor, as torch.cholesky_solve (LAPACK
    potrs; L's gradient is torch's, that of a full matrix).

    Args (PyTorch's names): input (B, the right-hand sides), input2 (the factor: lower L,
    or upper U with upper=True)."""
    return _D().cholesky_solve(input, input2, upper)


@names_op("cholesky_inverse")
def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """The inverse of A = L L^H (U^H U with upper=True) from its Cholesky factor, as
    torch.cholesky_inverse."""
    F = _F()
    H = _H()
    check_square, check_float = H.check_square, H.check_float
    check_square("cholesky_inverse", L, "input")
    check_float("cholesky_inverse", L)
    D = _D()
    if D._plain_no_grad(L):
        # what cholesky_solve(I, L) computes (potrs on the identity), without making
        # and expanding the identity tensor
        return D._cholesky_inverse_fast(L, upper)
    eye = F.eye(L._shape[-1], dtype=L._dtype)
    if L.ndim > 2:
        eye = F.expand(eye, L._shape)
    return cholesky_solve(eye, L, upper)


qr_result = namedtuple("qr", ["Q", "R"])
svd_result = namedtuple("svd", ["U", "S", "V"])
triangular_solve_result = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


@names_op("qr")
def qr(input: Tensor, some: bool = True) -> Any:
    """(Q, R) of each matrix (torch.qr: linalg.qr with mode 'reduced', or 'complete'
    when some=False)."""
    Q, R = _L().qr(input, "reduced" if some else "complete")
    return qr_result(Q, R)


@names_op("svd")
def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> Any:
    """(U, S, V) with A = U diag(S) V^H, as torch.svd (V, not Vh; some=False gives the
    full U and V; compute_uv=False gives zero-filled U and V)."""
    if compute_uv:
        D = _D()
        if D._lapack_plain(input, False):  # linalg.svd's short way, called directly
            if not input._dtype.is_complex:  # V = Vh^T made with the outputs (a view)
                return svd_result(*D._svd_fast(input, not some, True, True))
            U, S, Vh = D._svd_fast(input, not some, True)
        else:
            U, S, Vh = _L().svd(input, full_matrices=not some)
        return svd_result(U, S, _H().mH(Vh))
    F = _F()
    m, n = input._shape[-2:]
    S = _L().svdvals(input)
    U = F.zeros(input._shape[:-2] + (m, m), dtype=input._dtype)
    V = F.zeros(input._shape[:-2] + (n, n), dtype=input._dtype)
    return svd_result(U, S, V)


@names_op("lu")
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> Any:
    """(LU, pivots) (and infos with get_infos=True) of each matrix, as torch.lu (a
    singular matrix does not raise)."""
    D = _D()
    if pivot and D._lapack_plain(A, False):  # linalg.lu_factor_ex's short way, directly
        LU, piv, info = D._lu_factor_fast(A)
    else:
        LU, piv, info = _L().lu_factor_ex(A, pivot=pivot)
    return (LU, piv, info) if get_infos else (LU, piv)


@names_op("lu_solve")
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """The solution of A X = b from A's packed LU (torch.lu_solve's argument order)."""
    return _L().lu_solve(LU_data, LU_pivots, b)


@names_op("lu_unpack")
def lu_unpack(
    LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True
) -> Any:
    """(P, L, U) from a packed LU and its pivots, as torch.lu_unpack."""
    return _D().lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)


@names_op("triangular_solve")
def triangular_solve(
    b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False, unitriangular: bool = False
) -> Any:
    """(X, a copy of A) with A X = b (A^T X = b with transpose=True) for triangular A, as
    torch.triangular_solve."""
    F = _F()
    M = _H().mT(A) if transpose else A
    X = _L().solve_triangular(M, b, upper=(upper != transpose), unitriangular=unitriangular)
    return triangular_solve_result(X, F.clone(A))


@names_op("geqrf")
def geqrf(input: Tensor) -> Any:
    """LAPACK's geqrf (torch.geqrf): (a, tau)."""
    return _D().geqrf(input)


@names_op("orgqr")
def orgqr(input: Tensor, input2: Tensor) -> Tensor:
    """The Q of a Householder factorization (torch.orgqr: linalg.householder_product).

    Args (PyTorch's names): input (the reflectors, as geqrf gives them), input2 (tau)."""
    return _L().householder_product(input, input2)


@names_op("ormqr")
def ormqr(
    input: Tensor, input2: Tensor, input3: Tensor, left: bool = True, transpose: bool = False
) -> Tensor:
    """Q @ C (or C @ Q with left=False; Q^H with transpose=True) for the Q of geqrf's
    output, as torch.ormqr.

    Args (PyTorch's names): input (the reflectors), input2 (tau), input3 (C)."""
    return _D().ormqr(input, input2, input3, left, transpose)


@names_op("pinverse")
def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """The pseudo-inverse with relative tolerance rcond (torch.pinverse)."""
    return _L().pinv(input, rtol=rcond)


@names_op("matrix_exp")
def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential (torch.matrix_exp: linalg.matrix_exp)."""
    return _L().matrix_exp(A)


@names_op("matrix_power")
def matrix_power(input: Tensor, n: int) -> Tensor:
    """input to the integer power n (torch.matrix_power: linalg.matrix_power)."""
    return _L().matrix_power(input, n)


# --------------------------------------------------------------------------------------
# randomized low-rank methods
# --------------------------------------------------------------------------------------


def _orthonormal_range(A: Tensor, q: int, niter: int, M: Tensor | None) -> Tensor:
    """An orthonormal basis (..., m, q) of A's approximate range (Halko et al.'s
    randomized range finder with `niter` subspace iterations)."""
    F = _F()
    lin = _L()
    mH = _H().mH
    n = A._shape[-1]
    R = F.randn(A._shape[:-2] + (n, q), dtype=A._dtype)

    def apply(X: Tensor) -> Tensor:
        Y = F.matmul(A, X)
        return Y if M is None else F.sub(Y, F.matmul(M, X))

    def apply_h(X: Tensor) -> Tensor:
        Y = F.matmul(mH(A), X)
        return Y if M is None else F.sub(Y, F.matmul(mH(M), X))

    Q = lin.qr(apply(R)).Q
    for _ in range(niter):
        Q = lin.qr(apply_h(Q)).Q
        Q = lin.qr(apply(Q)).Q
    return Q


@names_op("svd_lowrank")
def svd_lowrank(A: Tensor, q: int | None = 6, niter: int = 2, M: Tensor | None = None) -> Any:
    """An approximate rank-q SVD (U, S, V) of A - M by a randomized range finder (Halko,
    Martinsson and Tropp), as torch.svd_lowrank (the random draws are llgrad's)."""
    F = _F()
    lin = _L()
    mH = _H().mH
    q = 6 if q is None else q
    m, n = A._shape[-2:]
    if M is not None:
        M = F.expand(M, A._shape) if M._shape != A._shape else M
    if m < n:
        U, S, V = svd_lowrank(mH(A), q, niter, None if M is None else mH(M))
        return svd_result(V, S, U)
    Q = _orthonormal_range(A, q, niter, M)
    B = F.matmul(mH(Q), A if M is None else F.sub(A, M))
    Ub, S, Vh = lin.svd(B, full_matrices=False)
    return svd_result(F.matmul(Q, Ub), S, mH(Vh))


@names_op("pca_lowrank")
def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2) -> Any:
    """(U, S, V) of an approximate PCA of the rows of A (centered with center=True), by
    svd_lowrank, as torch.pca_lowrank (q defaults to min(6, m, n))."""
    F = _F()
    m, n = A._shape[-2:]
    q = min(6, m, n) if q is None else q
    if not 0 <= q <= min(m, n):
        raise ValueError(
            f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}"
        )
    if center:
        mean = F.mean(A, -2, keepdim=True)
        return svd_lowrank(A, q, niter, F.expand(mean, A._shape))
    return svd_lowrank(A, q, niter, None)


# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {
    "det": det,
    "logdet": logdet,
    "slogdet": slogdet,
    "inverse": inverse,
    "cholesky": cholesky,
    "cholesky_inverse": cholesky_inverse,
    "cholesky_solve": cholesky_solve,
    "qr": qr,
    "svd": svd,
    "lu": lu,
    "lu_solve": lu_solve,
    "triangular_solve": triangular_solve,
    "geqrf": geqrf,
    "orgqr": orgqr,
    "ormqr": ormqr,
    "pinverse": pinverse,
    "matrix_exp": matrix_exp,
    "matrix_power": matrix_power,
    "addmm": addmm,
    "addmm_": addmm_,
    "addmv": addmv,
    "addmv_": addmv_,
    "addr": addr,
    "addr_": addr_,
    "addbmm": addbmm,
    "addbmm_": addbmm_,
    "baddbmm": baddbmm,
    "baddbmm_": baddbmm_,
    "ger": ger,
    "inner": inner,
    "vdot": vdot,
    "kron": kron,
    "cross": cross,
    "dist": dist,
}
_unused: Sequence[Any] = (dt,)
