"""The `lg.linalg` functions built from llgrad's differentiable ops: norms, powers and
products of matrices, cross products, Vandermonde matrices, tensor inverses and solves.

They record the nodes of the ops they are made of and compile into a graph under
`lg.compile`, except where they call a LAPACK-backed op (matrix 2-norms and nuclear
norms need singular values; `cond`, `matrix_rank`, `tensorinv`, `tensorsolve` and a
negative `matrix_power` need a factorization): those parts are graph breaks.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import functions as F
from ..tape import forward as forward_ad
from ..dispatch.apply import composite_function, interpreters
from ..dispatch.grad_mode import is_grad_enabled as grad_enabled, no_grad
from ..functions import reduction as _reduction
from ..functions._out import store
from ..ir import dtypes as dt
from ..ir.types import normalize_axis
from ..tensor import Tensor
from . import _decomp as D
from ._host import _torch_name, check_float, check_matrix, check_square, check_tensor, from_numpy


def _out(result: Any, out: Any, op: str) -> Any:
    if out is None:
        return result

    return store(op, result, out)


# ======================================================================================
# norms
# ======================================================================================


def _norm_dtype(op: str, x: Tensor, dtype: dt.DType | None) -> Tensor:
    if dtype is not None:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(
                f"{op}: dtype should be floating point or complex. Got {_torch_name(dtype)}"
            )
        if x._dtype.is_complex and not dtype.is_complex:
            raise RuntimeError(
                f"{op}: dtype should be complex for a complex input. Got {_torch_name(dtype)}"
            )
        return x.to(dtype)
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        raise RuntimeError(
            f"{op}: Expected a floating point or complex tensor as input. "
            f"Got {_torch_name(x._dtype)}"
        )
    return x


def vector_norm(
    x: Tensor,
    ord: float = 2,
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: dt.DType | None = None,
    out: Any = None,
) -> Tensor:
    """The vector `ord`-norm of `x` over `dim` (all elements when None), as
    torch.linalg.vector_norm (ord: any real number, inf, -inf; 0 counts nonzeros)."""
    op = "linalg.vector_norm"
    check_tensor(op, x, "x")
    if isinstance(ord, str):
        raise RuntimeError(f"{op}: Expected a number as ord, got '{ord}'")
    x = _norm_dtype(op, x, dtype)
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        dim = None
    if (ord < 0 or ord == math.inf) and x.numel() == 0:
        # no identity for these orders: torch refuses reducing all of an empty tensor or
        # any empty dimension (a reduction over non-empty dims of it gives an empty result)
        if dim is None:
            raise RuntimeError(
                f"{op} cannot compute the {ord} norm on an empty tensor "
                f"because the operation does not have an identity (expected "
                f"a non-empty tensor)"
            )
        for d in (dim,) if isinstance(dim, int) else tuple(dim):
            if x._shape[normalize_axis(d, x.ndim, op)] == 0:
                raise RuntimeError(
                    f"{op} cannot compute the {ord} norm on the dimension "
                    f"{d} because this dimension is empty and the operation "
                    f"does not have an identity"
                )
    return _out(_reduction.norm(x, float(ord), dim, keepdim), out, op)


def _two_dims(op: str, A: Tensor, dim: Any) -> tuple[int, int]:
    if isinstance(dim, int) or len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple. Got {dim}")
    d0, d1 = (normalize_axis(d, A.ndim, op) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{op}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def _restore(r: Tensor, d0: int, d1: int, keepdim: bool) -> Tensor:
    """A reduction over both matrix dims with keepdim put back at (d0, d1)."""
    if not keepdim:
        return r
    for d in sorted((d0, d1)):
        r = F.unsqueeze(r, d)
    return r


@composite_function
def matrix_norm(
    A: Tensor,
    ord: Any = "fro",
    dim: Any = (-2, -1),
    keepdim: bool = False,
    *,
    dtype: dt.DType | None = None,
    out: Any = None,
) -> Tensor:
    """The matrix norm `ord` ('fro', 'nuc', inf, -inf, 1, -1, 2, -2) of the matrices over
    `dim`, as torch.linalg.matrix_norm ('nuc' and +-2 use the singular values)."""
    op = "linalg.matrix_norm"
    check_tensor(op, A)
    check_matrix(op, A)
    if ord not in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(f"{op}: Order {ord} not supported.")
    A = _norm_dtype(op, A, dtype)
    d0, d1 = _two_dims(op, A, dim)
    if isinstance(ord, str):
        if ord == "fro":
            return _out(vector_norm(A, 2, (d0, d1), keepdim), out, op)
        S = D.svdvals(F.movedim(A, (d0, d1), (-2, -1)))
        return _out(_restore(F.sum(S, -1), d0, d1, keepdim), out, op)

    def extreme(v: Tensor, d: int, keep: bool) -> Tensor:
        # the max (min) of non-negative values over `d`; over an empty `d` the max is 0
        # (a constant, as in torch: it does not require grad), the min has no value:
        # IndexError, as torch's amin
        if v._shape[d] == 0:
            if ord > 0:
                return F.sum(v.detach(), d, keepdim=keep)
            raise IndexError(f"amin(): Expected reduction dim {d} to have non-zero size.")
        return F.amax(v, d, keepdim=keep) if ord > 0 else F.amin(v, d, keepdim=keep)

    if ord in (2, -2):
        S = D.svdvals(F.movedim(A, (d0, d1), (-2, -1)))
        return _out(_restore(extreme(S, S.ndim - 1, False), d0, d1, keepdim), out, op)
    absA = F.abs(A)
    if ord in (1, -1):  # column sums, then the max (min) over columns
        r = extreme(F.sum(absA, d0, keepdim=True), d1, True)
    else:  # row sums
        r = extreme(F.sum(absA, d1, keepdim=True), d0, True)
    if not keepdim:
        r = F.squeeze(F.squeeze(r, max(d0, d1)), min(d0, d1))
    return _out(r, out, op)


def norm(
    A: Tensor,
    ord: Any = None,
    dim: Any = None,
    keepdim: bool = False,
    *,
    out: Any = None,
    dtype: dt.DType | None = None,
) -> Tensor:
    """A vector or matrix norm, as torch.linalg.norm: with `dim` an int (or 1-tuple) a
    vector norm, a 2-tuple a matrix norm; with `dim` None the 2-norm of all elements when
    `ord` is None, else the vector (1-D) or matrix (2-D) norm of `ord`."""
    op = "linalg.norm"
    check_tensor(op, A)
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) == 2:
            if ord is None:  # the 2-norm of the elements, as torch
                return vector_norm(A, 2, dims, keepdim, dtype=dtype, out=out)
            return matrix_norm(A, ord, dims, keepdim, dtype=dtype, out=out)
        raise RuntimeError(
            f"{op}: If dim is specified, it must be of length 1 or 2. Got {list(dims)}"
        )
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
    if A.ndim == 1:
        if isinstance(ord, str):
            raise RuntimeError(f"{op}: Expected a number as ord for a vector norm, got '{ord}'")
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    raise RuntimeError(
        f"{op}: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D."
    )


def cond(A: Tensor, p: Any = None, *, out: Any = None) -> Tensor:
    """The condition number of each matrix in the norm `p` (None: the 2-norm, the ratio
    of the extreme singular values), as torch.linalg.cond; other norms need square
    matrices and give inf for singular ones."""
    op = "linalg.cond"
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if p is not None and p not in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(f"{op} got an invalid norm type: {p}")
    if not min(A._shape[-2:]):
        # empty matrices: 0 (as torch; 'fro' and 'nuc' still need square ones), a constant
        if p in ("fro", "nuc"):
            check_square(op, A)
        rd = D._real_dtype(A._dtype)
        return _out(F.zeros(A._shape[:-2], dtype=rd), out, op)
    if p is None or p in (2, -2):
        S = D.svdvals(A)
        hi, lo = F.amax(S, -1), F.amin(S, -1)
        r = F.div(hi, lo) if p in (None, 2) else F.div(lo, hi)
        return _out(r, out, op)
    if p not in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"{op} got an invalid norm type: {p}")
    check_square(op, A)
    Ainv, info = D.inv_ex(A)
    r = F.mul(matrix_norm(A, p), matrix_norm(Ainv, p))
    bad = F.ne(info, 0)
    r = F.where(bad, F.full((), math.inf, dtype=r._dtype), r)
    return _out(r, out, op)


def _scalar_tolerance(x: Any) -> bool:
    """Whether an atol / rtol is one number that `D._tolerances` takes without error:
    None, a Python int or float, or a 0-d real plain tensor."""
    c = x.__class__
    return (
        x is None
        or c is float
        or c is int
        or (c is Tensor and not x._shape and not x._dtype.is_complex)
    )


_rank_makers: dict[tuple[int, ...], Any] = {}


def _zero_ranks(A: Any, atol: Any, rtol: Any) -> Any:
    """The ranks of A's matrices when they have no singular values (an empty dimension)
    and the tolerances are scalars: a new int64 tensor of zeros of the batch shape (made
    by a maker kept per shape); else None."""
    shape = A._shape
    if min(shape[-2:]) or not _scalar_tolerance(atol) or not _scalar_tolerance(rtol):
        return None
    batch = shape[:-2]
    make = _rank_makers.get(batch)
    if make is None:
        if len(_rank_makers) >= 1024:
            _rank_makers.clear()
        make = _rank_makers[batch] = D._outputs_maker([(batch, dt.int64, True)])
    return make()[0]


def matrix_rank(
    A: Tensor,
    tol: Any = None,
    hermitian: bool = False,
    *,
    atol: Any = None,
    rtol: Any = None,
    out: Any = None,
) -> Tensor:
    """The number of singular values (|eigenvalues| with hermitian=True) above
    max(atol, rtol * the largest), as torch.linalg.matrix_rank (`tol` is the older name
    of atol, with rtol 0)."""
    op = "linalg.matrix_rank"
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if tol is not None:
        if atol is not None or rtol is not None:
            raise RuntimeError(f"{op}: tol cannot be combined with atol or rtol")
        atol, rtol = tol, 0.0
    if not interpreters and A.__class__ is Tensor:
        # a plain tensor: the values as eigvalsh / svdvals compute them, kept in NumPy
        # (the rank is an integer: nothing is recorded)
        if hermitian:
            check_square(op, A)
        zeros = _zero_ranks(A, atol, rtol)
        if zeros is not None:
            return _out(zeros, out, op)
        a, r = D._tolerances(op, A, atol, rtol)
        if not a.ndim and not r.ndim and not min(A._shape[-2:]):
            # no singular values: every rank is 0
            return _out(D._zero(Tensor._empty(A._shape[:-2], dt.int64)), out, op)
        with np.errstate(all="ignore"):
            if hermitian:
                Sv = np.abs(D._eigh_fast(A, "L", False)[0]._numpy_view())
            else:
                Sv = D._svd_fast(A, False, False)[1]._numpy_view()
        smax = Sv.max(-1) if Sv.shape[-1] else np.zeros(Sv.shape[:-1])
        thresh = np.maximum(a, r * smax)
        rank = np.sum(Sv > np.asarray(thresh)[..., None], axis=-1).astype(np.int64)
        return _out(from_numpy(rank, dt.int64), out, op)
    with no_grad():
        S = F.abs(D.eigvalsh(A)) if hermitian else D.svdvals(A)
        a, r = D._tolerances(op, A, atol, rtol)
        Sv = S._numpy_view()
        smax = Sv.max(-1) if Sv.shape[-1] else np.zeros(Sv.shape[:-1])
        thresh = np.maximum(a, r * smax)
        rank = np.sum(Sv > np.asarray(thresh)[..., None], axis=-1).astype(np.int64)
    return _out(from_numpy(rank, dt.int64), out, op)


# ======================================================================================
# products
# ======================================================================================


def matrix_power(A: Tensor, n: int, *, out: Any = None) -> Tensor:
    """A to the integer power n (n = 0: the identity; n < 0: the inverse's power), by
    repeated squaring with matmul, as torch.linalg.matrix_power."""
    op = "linalg.matrix_power"
    check_tensor(op, A)
    check_square(op, A)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"{op}: n must be an int, got {type(n).__name__}")
    n = int(n)
    if n == 0:
        eye = F.eye(A._shape[-1], dtype=A._dtype)
        eye = F.expand(eye, A._shape) if A.ndim > 2 else eye
        if A._requires_grad:
            # the identity, recorded with a zero gradient for A (PyTorch's result of n=0
            # requires grad too); `where` keeps NaN/inf entries of A out of the gradient
            eye = F.where(F.ones_like(A, dtype=dt.bool_), eye, A)
        return _out(eye, out, op)
    if n < 0:
        A = D.inv(A)
        n = -n
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else F.matmul(result, base)
        n >>= 1
        if n:
            base = F.matmul(base, base)
    if result is A:
        result = F.clone(A)
    return _out(result, out, op)


def _chain_order(dims: Sequence[int]) -> list[list[int]]:
    """The matrix-chain split points minimizing scalar multiplications."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            best = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if best is None or c < best:
                    best, split[i][j] = c, k
            cost[i][j] = best
    return split


@composite_function
def multi_dot(tensors: Sequence[Tensor], *, out: Any = None) -> Tensor:
    """The product of a chain of matrices in the cheapest order (the first may be a row
    vector, the last a column vector when 1-D), as torch.linalg.multi_dot."""
    op = "linalg.multi_dot"
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        check_tensor(op, t, f"tensors[{i}]")
    first_vec = ts[0].ndim == 1
    last_vec = ts[-1].ndim == 1
    if ts[0].ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {ts[0].ndim}D")
    if ts[-1].ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {ts[-1].ndim}D")
    for i, t in enumerate(ts[1:-1], 1):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    for t in ts[1:]:
        if t._dtype is not ts[0]._dtype:
            raise RuntimeError(
                f"multi_dot(): all tensors must have be the same dtype but "
                f"tensor 0 is {_torch_name(ts[0]._dtype)} and tensor "
                f"{ts.index(t)} {_torch_name(t._dtype)}"
            )
    if first_vec:
        ts[0] = F.unsqueeze(ts[0], 0)
    if last_vec:
        ts[-1] = F.unsqueeze(ts[-1], -1)
    for i in range(len(ts) - 1):
        if ts[i]._shape[1] != ts[i + 1]._shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes "
                f"{list(ts[i]._shape)} and {list(ts[i + 1]._shape)} cannot be "
                f"multiplied"
            )
    dims = [ts[0]._shape[0]] + [t._shape[1] for t in ts]
    split = _chain_order(dims)

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return ts[i]
        k = split[i][j]
        return F.matmul(product(i, k), product(k + 1, j))

    r = product(0, len(ts) - 1)
    if first_vec:
        r = F.squeeze(r, 0)
    if last_vec:
        r = F.squeeze(r, -1)
    return _out(r, out, op)


@composite_function
def cross(input: Tensor, other: Tensor, *, dim: int = -1, out: Any = None) -> Tensor:
    """The cross product of 3-vectors along `dim` (inputs broadcast), as
    torch.linalg.cross."""
    op = "linalg.cross"
    check_tensor(op, input, "input")
    check_tensor(op, other, "other")
    if input.ndim != other.ndim:
        raise RuntimeError(f"{op}: inputs must have the same number of dimensions.")
    if input._dtype is not other._dtype:
        raise RuntimeError(
            f"{op}: Expected input and other to have the same dtype, but got "
            f"{_torch_name(input._dtype)} and {_torch_name(other._dtype)}"
        )
    d = normalize_axis(dim, input.ndim, op)
    if input._shape[d] != 3 or other._shape[d] != 3:
        raise RuntimeError(
            f"{op}: inputs dimension {dim} must have length 3. Got "
            f"{input._shape[d]} and {other._shape[d]}"
        )
    a, b = F.broadcast_tensors(input, other)

    def part(x: Tensor, i: int) -> Tensor:
        return F.narrow(x, d, i, 1)

    a0, a1, a2 = part(a, 0), part(a, 1), part(a, 2)
    b0, b1, b2 = part(b, 0), part(b, 1), part(b, 2)
    c = F.cat(
        [
            F.sub(F.mul(a1, b2), F.mul(a2, b1)),
            F.sub(F.mul(a2, b0), F.mul(a0, b2)),
            F.sub(F.mul(a0, b1), F.mul(a1, b0)),
        ],
        d,
    )
    return _out(c, out, op)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out: Any = None) -> Tensor:
    """sum(conj(x) * y) along `dim` (inputs broadcast), as torch.linalg.vecdot."""
    op = "linalg.vecdot"
    check_tensor(op, x, "x")
    check_tensor(op, y, "y")
    if x._dtype is not y._dtype:
        raise RuntimeError(
            f"{op}: Expected x and y to have the same dtype, but found x of "
            f"type {_torch_name(x._dtype)} and y of type "
            f"{_torch_name(y._dtype)} instead"
        )
    xc = F.conj(x) if x._dtype.is_complex else x
    return _out(F.sum(F.mul(xc, y), dim), out, op)


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """The Vandermonde matrices of `x` (..., n): columns x^0, x^1, ..., x^(N-1) (N
    defaults to n and must be at least 2), as torch.linalg.vander; a 0-d x counts as one
    element (a (1, N) result)."""
    op = "linalg.vander"
    check_tensor(op, x, "x")
    if x.ndim == 0:
        x = F.reshape(x, (1,))
    n = x._shape[-1]
    N = n if N is None else N
    if N <= 1:
        raise RuntimeError(f"{op}: N must be greater than 1 (got N={N})")
    x = x.to(dt.int64) if x._dtype is dt.bool_ else x
    if (
        x.__class__ is Tensor
        and x._dtype not in (dt.float16, dt.bfloat16)
        and not interpreters
        and not (x._requires_grad and grad_enabled())
        and not forward_ad._level[0]
    ):
        # a plain tensor that needs no gradient: the powers by NumPy's running product
        # (the same products, in the same order, as cumprod's)
        V = Tensor._empty(x._shape + (N,), x._dtype)
        if n:
            v = V._numpy_view()
            v[..., 0] = 1
            v[..., 1:] = x._numpy_view()[..., None]
            np.cumprod(v, axis=-1, out=v)
        return V
    ones = F.ones(x._shape + (1,), dtype=x._dtype)
    reps = F.expand(F.unsqueeze(x, -1), x._shape + (N - 1,))
    return F.cumprod(F.cat([ones, reps], -1), -1)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonal `offset` of the matrices over (dim1, dim2), in a new last dimension:
    `lg.diagonal` with the matrix dimensions last by default; a view, as torch's."""
    op = "linalg.diagonal"
    check_tensor(op, A)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    d1, d2 = normalize_axis(dim1, A.ndim, op), normalize_axis(dim2, A.ndim, op)
    if d1 == d2:
        raise RuntimeError(f"{op}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    return F.diagonal(A, offset, d1, d2)


def tensorinv(A: Tensor, ind: int = 2, *, out: Any = None) -> Tensor:
    """The tensor inverse of A over its first `ind` dims (prod(shape[:ind]) must equal
    prod(shape[ind:])): the result has shape shape[ind:] + shape[:ind], as
    torch.linalg.tensorinv."""
    op = "linalg.tensorinv"
    check_tensor(op, A)
    if ind <= 0:
        raise RuntimeError(f"{op}: Expected a strictly positive integer for 'ind', but got {ind}")
    lead, rest = A._shape[:ind], A._shape[ind:]
    p1, p2 = math.prod(lead), math.prod(rest)
    if p1 != p2:
        raise RuntimeError(
            f"{op}: Expected self to satisfy the requirement "
            f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got "
            f"{p2} != {p1}"
        )
    if p1 and A._dtype in D._LAPACK_DTYPES and D._plain_no_grad(A):
        # a plain tensor that needs no gradient: the inverse straight into the result
        X = Tensor._empty(rest + lead, A._dtype)
        info = Tensor._empty((), dt.int32)
        buf = np.array(A._numpy_view().reshape(p1, p2), order="C")
        D._inv_into(buf, X._numpy_view().reshape(p1, p1), info)
        D._check_errors("linalg.inv", info, "inv")
        return _out(X, out, op)
    M = D.inv(F.reshape(A, (p1, p2)))
    return _out(F.reshape(M, rest + lead), out, op)


def tensorsolve(A: Tensor, other: Tensor, dims: Any = None, *, out: Any = None) -> Tensor:
    """The X with tensordot(A, X, X.ndim) = other (A's dims `dims` moved to the end
    first), as torch.linalg.tensorsolve (`other` is the B of PyTorch's documentation)."""
    op = "linalg.tensorsolve"
    B = other
    check_tensor(op, A)
    check_tensor(op, B, "B")
    if dims is not None:
        ds = [normalize_axis(d, A.ndim, op) for d in dims]
        A = F.movedim(A, ds, list(range(A.ndim - len(ds), A.ndim)))
    rest = A._shape[B.ndim :]
    nb = math.prod(B._shape)
    nr = math.prod(rest)
    if math.prod(A._shape) != nb * nr or nb != nr:
        raise RuntimeError(
            f"{op}: Expected self to satisfy the requirement "
            f"prod(result_shape) == prod(other.shape), but got {nr} != {nb}"
        )
    if nb and A._dtype in D._LAPACK_DTYPES and A._dtype is B._dtype and D._plain_no_grad(A, B):
        # plain tensors that need no gradient: the solve straight into the result
        X = Tensor._empty(rest, A._dtype)
        info = np.zeros((), np.int32)
        D._solve_into(
            A._numpy_view().reshape(nb, nr),
            B._numpy_view().reshape(nb, 1),
            X._numpy_view().reshape(nr, 1),
            info,
        )
        if info:
            raise D.LinAlgError(
                "torch.linalg.solve: The solver failed because the input matrix is singular."
            )
        return _out(X, out, op)
    X = D.solve(F.reshape(A, (nb, nr)), F.reshape(B, (nb,)))
    return _out(F.reshape(X, rest), out, op)
