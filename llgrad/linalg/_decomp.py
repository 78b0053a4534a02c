"""The LAPACK-backed ops of `lg.linalg`: factorizations, inverses, solvers, spectra.

Each runs on the host through LAPACK's routines called through their addresses
(`llgrad.runtime.lapack`, one foreign call per matrix of the batch, or one per batch
for the planned potrf, getrf, sytrf, potrs, sytrs: potrf, getrf, gesv, syevd/heevd,
gesdd, the gels family, ...) or NumPy's batched LAPACK loops (`numpy.linalg`:
det, slogdet, qr, eig), and records one node (`_host.host_op`) whose derivative rule is
written with llgrad's functions (the published rules, as PyTorch's derivatives.yaml lists
them). Plain tensors that need no gradient take a short way (`_plain_no_grad`): LAPACK
writes straight into the new outputs' memory (`_cholesky_fast`, `_eigh_fast`,
`_svd_fast`, `_solve_fast`, ...; the general path's computes call the same code, so both
give the same values), inputs with no matrices make their outputs without any work, and
`lu_solve` calls getrs instead of its triangular solves. What a short way does that
depends only on the operands' layouts (allocating the outputs, LAPACK's constant
arguments, masks and gather indices, scratch copies) is planned once per layout (see
"Call plans of the short ways" below).
"""

from __future__ import annotations

import ctypes
from collections import namedtuple
from typing import Any

import numpy as np

from .. import functions as F
from .._source import define
from ..tape import forward as forward_ad
from ..dispatch.apply import composite_function, interpreters, needs_grad
from ..dispatch.grad_mode import _state as _grad_state
from ..functions._out import store
from ..ir import dtypes as dt
from ..runtime import lapack
from ..specialize.output import maker_source, view_lines, zero_lines
from ..tensor import Tensor, _row_major_strides
from ..transforms.batching import bottom
from ._host import (
    LinAlgError,
    check_float,
    check_matrix,
    check_square,
    check_tensor,
    diag_embed,
    diagonal,
    first_bad,
    from_numpy,
    host_op,
    mH,
    mT,
    same_dtype,
    square_float,
    values,
)

inv_ex_result = namedtuple("linalg_inv_ex", ["inverse", "info"])
solve_ex_result = namedtuple("linalg_solve_ex", ["result", "info"])
cholesky_ex_result = namedtuple("linalg_cholesky_ex", ["L", "info"])
slogdet_result = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
qr_result = namedtuple("linalg_qr", ["Q", "R"])
eigh_result = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
eig_result = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])
svd_result = namedtuple("linalg_svd", ["U", "S", "Vh"])
lstsq_result = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
lu_factor_result = namedtuple("linalg_lu_factor", ["LU", "pivots"])
lu_factor_ex_result = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
lu_result = namedtuple("linalg_lu", ["P", "L", "U"])
ldl_factor_result = namedtuple("linalg_ldl_factor", ["LD", "pivots"])
ldl_factor_ex_result = namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])


_string_at = ctypes.string_at


def _check_errors(op: str, info: Any, kind: str) -> None:
    """Raise torch's LinAlgError for the first nonzero `info` (a tensor, or a NumPy array
    of a call that keeps it on the host)."""
    if info.__class__ is np.ndarray:
        if not info.any():
            return
        bad = first_bad(info)
    else:
        if info.__class__ is Tensor:  # a fresh contiguous info tensor of a host op
            n = info._dtype.itemsize
            for size in info._shape:
                n *= size
            if not n or not _string_at(info._ptr, n).strip(b"\0"):
                return  # every info is 0 (the bytes, without a view)
        bad = first_bad(values(info))
    if bad is None:
        return
    where, v = bad
    if kind == "inv":
        raise LinAlgError(
            f"{op}: {where}The diagonal element {v} is zero, the inversion "
            f"could not be completed because the input matrix is singular."
        )
    if kind == "solve":
        raise LinAlgError(f"{op}: {where}The solver failed because the input matrix is singular.")
    if kind == "cholesky":
        raise LinAlgError(
            f"{op}: {where}The factorization could not be completed because "
            f"the input is not positive-definite (the leading minor of order "
            f"{v} is not positive-definite)."
        )
    if kind == "lu":
        raise LinAlgError(
            f"{op}: {where}The factorization could not be completed because "
            f"the input is singular (U[{v}, {v}] is zero)."
        )
    if kind == "ldl":
        raise LinAlgError(f"{op}: {where}The factorization could not be completed (info = {v}).")
    raise LinAlgError(f"{op}: {where}failed to converge (info = {v}).")


_masks: dict[tuple[tuple[int, int], int, bool], np.ndarray] = {}


def _above(shape: tuple[int, int], k: int, below: bool = False) -> np.ndarray:
    """The boolean mask of the entries above diagonal k of an m x n matrix (below it
    with `below`): what `np.tril(x, k)` (`np.triu(x, k + 1)`) zeroes, cached (np.tril
    builds it on every call). Use with `np.copyto(x, 0, where=mask)`."""
    key = (tuple(shape), k, below)
    mask = _masks.get(key)
    if mask is None:
        m, n = key[0]
        tri = np.tri(m, n, k, dtype=bool)  # on and below diagonal k
        mask = tri if below else ~tri
        mask.flags.writeable = False
        if len(_masks) < 1024:
            _masks[key] = mask
    return mask


def _real_dtype(d: dt.DType) -> dt.DType:
    return d.to_real() if d.is_complex else d


def _complex_dtype(d: dt.DType) -> dt.DType:
    return d if d.is_complex else (dt.complex64 if d is dt.float32 else dt.complex128)


def _wants_derivative(A: Tensor) -> bool:
    """Whether a call must compute what its derivative reads (the vectors of svdvals and
    eigvalsh): it records a node, or carries a forward-mode tangent."""
    if A.__class__ is Tensor and not forward_ad._level[0]:
        return needs_grad((A,))

    return needs_grad([bottom(A)]) or (
        forward_ad._level[0] > 0 and forward_ad.tangent_of(A) is not None
    )


def _host(
    op: str,
    name: str | None,
    inputs: tuple[Tensor, ...],
    compute: Any,
    rule: Any,
    *,
    out_dtypes: Any,
    **kwargs: Any,
) -> tuple[Tensor, ...]:
    """`host_op`, with a short way for plain tensors that need no gradient (no interpreter,
    forward-mode level or tracing: host_op would record nothing): the compute and the
    outputs only. Only for computes that call LAPACK (NumPy's floating-point warnings
    cannot arise in them, so no `np.errstate` is needed)."""
    if _plain_no_grad(*inputs):
        raw = compute(*[x._numpy_view() for x in inputs])
        return tuple([from_numpy(a, d) for a, d in zip(raw, out_dtypes)])
    return host_op(op, name, inputs, compute, rule, out_dtypes=out_dtypes, **kwargs)


def _plain_no_grad(*xs: Any) -> bool:
    """Whether a call on `xs` can skip the recording machinery: plain tensors (no vmap,
    tracing or other wrappers), no interpreter or forward-mode level active, and no
    gradient to record."""
    if interpreters or forward_ad._level[0]:
        return False
    grad = _grad_state.enabled
    for x in xs:
        if x.__class__ is not Tensor or (grad and x._requires_grad):
            return False
    return True


_LAPACK_SET = frozenset((dt.float32, dt.float64, dt.complex64, dt.complex128))


def _lapack_plain(A: Any, square: bool) -> bool:
    """Whether A passes an op's checks (a tensor of a LAPACK dtype holding matrices,
    square ones with `square`) and is plain and needs no gradient (`_plain_no_grad`):
    the short way's test in one call. False sends the caller to its full checks (which
    raise the errors) and its general path."""
    if A.__class__ is not Tensor or interpreters or forward_ad._level[0]:
        return False
    a: Any = A  # (a Tensor: its private fields are not in the type stub)
    if a._dtype not in _LAPACK_SET or (_grad_state.enabled and a._requires_grad):
        return False
    shape = a._shape
    return len(shape) >= 2 and (not square or shape[-1] == shape[-2])


_memmove = ctypes.memmove
_memset = ctypes.memset
_addressof = ctypes.addressof


def _count(shape: tuple[int, ...]) -> int:
    """How many elements a shape holds."""
    n = 1
    for s in shape:
        n *= s
    return n


def _copy_into(out: Tensor, A: Tensor, adjoint: bool = False) -> np.ndarray | None:
    """Copy A's values (A^H's with `adjoint`) into the new contiguous `out` of the same
    shape and dtype: the bytes as they are when A is contiguous (no NumPy views), else
    through NumPy. Returns out's NumPy view when one was made."""
    if not adjoint and A._strides == out._strides and A._ptr is not None:
        _memmove(out._ptr, A._ptr, out._dtype.itemsize * _count(out._shape))
        return None
    view = out._numpy_view()
    src = A._numpy_view()
    if adjoint:
        src = np.swapaxes(src, -1, -2)
        if src.dtype.kind == "c":
            np.conjugate(src, out=view)
            return view
    np.copyto(view, src)
    return view


def _zero(t: Tensor) -> Tensor:
    """Fill the new contiguous `t` with zeros (its bytes)."""
    n = _count(t._shape)
    if n:
        _memset(t._ptr, 0, t._dtype.itemsize * n)
    return t


def _pair_fast(op: str, A: Tensor, B: Tensor, into: Any) -> Tensor:
    """X of a solve with A (..., n, n) and B (..., n, k) for plain tensors that need no
    gradient: the batches broadcast in NumPy, `into(a, b, x)` fills the new X (not called
    when X is empty)."""
    a, b = A._numpy_view(), B._numpy_view()
    ba, bb = a.shape[:-2], b.shape[:-2]
    batch = ba
    if ba != bb:
        try:
            batch = tuple(np.broadcast_shapes(ba, bb))
        except ValueError:
            raise RuntimeError(
                f"{op}: The batch dimensions of A {list(ba)} and B {list(bb)} are not broadcastable"
            ) from None
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + b.shape[-2:])
    X = Tensor._empty(batch + b.shape[-2:], B._dtype)
    if _count(X._shape):
        into(a, b, X._numpy_view())
    return X


def _empty_fast(*specs: tuple[tuple[int, ...], dt.DType, bool]) -> tuple[Tensor, ...]:
    """New tensors (shape, dtype, zeroed) for a call whose outputs hold no values to
    compute (empty matrices): only zero-filled ones (an info) get their bytes set."""
    return tuple(
        _zero(Tensor._empty(shape, d)) if zero else Tensor._empty(shape, d)
        for shape, d, zero in specs
    )


# --------------------------------------------------------------------------------------
# Call plans of the short ways
# --------------------------------------------------------------------------------------
# A short way's work that depends only on its operands' layouts (dtype, shape, strides)
# and flags is done once per such key and kept in `_plans`: the outputs' allocation as one
# generated function (`_outputs_maker`), the LAPACK loop with its constant arguments
# (`lapack.*_caller`), the masks and index arrays of its NumPy steps. The checks that
# guard LAPACK depend on dtypes and shapes only, so they run before a plan is made and a
# plan is found only for operands that passed them. A plan's scratch sets (the column-
# major copies LAPACK works in) sit in a pool: a call pops one (a new one when the pool is
# empty: no test first, another thread may take the last) and puts it back when done, so
# threads never share one.

_plans: dict[tuple, Any] = {}
_PLAN_LIMIT = 4096
_SCRATCH_KEEP = 1 << 20  # bytes of scratch up to which a plan keeps its scratch sets
_INDEX_MAX = 1 << 16  # elements up to which a plan keeps flat (gather, zeroing) indices


class _NoPool:
    """The pool of a plan whose scratch is too big to keep: always empty (each call makes
    its own scratch, freed after)."""

    def pop(self) -> Any:
        """Nothing to take: always raises IndexError."""
        raise IndexError

    def append(self, item: Any) -> None:
        """Drop `item` (nothing is kept)."""
        pass


_NO_POOL = _NoPool()


def _pool(nbytes: int) -> Any:
    """A plan's pool for scratch sets of `nbytes` bytes: a list, or `_NO_POOL` when they
    are too big to keep."""
    return [] if nbytes <= _SCRATCH_KEEP else _NO_POOL


_STAGE_MAX = 4096  # bytes up to which an operand's copy goes through a staging array


def _stage_window(A: Any) -> Any:
    """For an operand whose matrices a plan copies in transposed: the ctypes window type
    of its bytes when it is row-major and small (its scratch sets then get a staging
    array: `_stage`), else None."""
    nbytes = A._dtype.itemsize * _count(A._shape)
    if A._strides != _row_major_strides(A._shape) or not 0 < nbytes <= _STAGE_MAX:
        return None
    return ctypes.c_char * nbytes


def _stage(A: Any, window: Any) -> Any:
    """A scratch set's staging for an operand like A (None without a `window`): (the
    window type, the address of a row-major array of A's shape, that array read
    transposed)."""
    if window is None:
        return None
    a = np.empty(A._shape, A._dtype.np)
    return window, lapack.address(a), a.swapaxes(-1, -2)


def _transposed_in(f: np.ndarray, A: Any, stage: Any) -> None:
    """Copy A's matrices transposed (column-major) into `f`: through the staging array
    when there is one (A's bytes copied as they are, then one NumPy copy between arrays
    made once: no view of A), else from A's NumPy view."""
    if stage is not None:
        window, at, transposed = stage
        window.from_address(at).raw = window.from_address(A._ptr).raw
        f[...] = transposed
    else:
        f[...] = A._numpy_view().swapaxes(-1, -2)


def _keep_plan(key: tuple, plan: Any) -> Any:
    """Store `plan` under `key` (the table is emptied when full) and return it."""
    if len(_plans) >= _PLAN_LIMIT:
        _plans.clear()
    _plans[key] = plan
    return plan


def _outputs_maker(specs: list[tuple[Any, ...]]) -> Any:
    """A function of no arguments returning a tuple of new contiguous tensors, one per
    (shape, dtype, zeroed) of `specs` (zeroed ones get their bytes set to 0): what
    `Tensor._empty` (and `_zero`) would make, written out once as generated code with the
    layouts as constants (`Tensor._empty_source`). A spec ("mT", j) is instead the
    transposed view (last two dimensions swapped) of output j, as `views.view_of` makes
    it (`Tensor._make` with output j as base, its fields written out the same way)."""
    empty_source = getattr(Tensor, "_empty_source")
    lines: list[str] = []
    consts: dict[str, Any] = {"memset": _memset}
    names = []
    for i, spec in enumerate(specs):
        name = f"t{i}"
        if spec[0] == "mT":
            lines += _transposed_view_source(name, f"t{spec[1]}", specs[spec[1]], i, consts)
            names.append(name)
            continue
        shape, d, zero = spec
        body, c = empty_source(shape, d, _row_major_strides(shape), name, str(i))
        lines += body
        nbytes = d.itemsize * _count(shape)
        if zero and nbytes:
            inline = nbytes <= 4096  # a ctypes window's bytes set at once (no foreign call)
            lines += zero_lines(str(i), nbytes, inline)
            if inline:
                consts[f"ZWIN{i}"] = ctypes.c_char * nbytes
                consts[f"ZERO{i}"] = bytes(nbytes)
        consts.update(c)
        names.append(name)
    source = maker_source(lines, f"({', '.join(names)},)")
    return define(source, "<llgrad linalg outputs>", consts, "make")


def _transposed_view_source(
    name: str, base: str, spec: tuple, i: int, consts: dict[str, Any]
) -> list[str]:
    """Source lines binding `name` to the transposed view of the new contiguous tensor
    `base` (of `spec`, made by the lines before, whose storage is `st` and address
    `ptr`): `Tensor._make(st, 0, shape, strides, dtype, base=base)` written out (fresh
    fields as `_init_state(base)` sets them)."""
    shape, d, _ = spec
    strides = _row_major_strides(shape)
    vshape = shape[:-2] + (shape[-1], shape[-2])
    vstrides = strides[:-2] + (strides[-1], strides[-2])
    consts.update(
        {
            f"SHAPE{i}": vshape,
            f"STRIDES{i}": vstrides,
            f"DTYPE{i}": d,
            f"LKEY{i}": (d, vshape, vstrides),
        }
    )
    fresh: Any = object.__new__(Tensor)
    fresh._init_state(None)
    set_by_make = ("_storage", "_offset", "_shape", "_strides", "_dtype", "_ptr", "_lkey")
    state = [
        (k, getattr(fresh, k))
        for k in getattr(Tensor, "__slots__")
        if not (k.startswith("__") or k in set_by_make or not hasattr(fresh, k))
    ]
    return view_lines(name, base, str(i), state)


def _info_error(op: str, info: Any, A: Any, kind: str) -> None:
    """Raise `_check_errors`' error for the infos in the int32 buffer `info` (a ctypes
    array of the matrices of A's batch, in order) when one is nonzero."""
    _check_errors(op, np.frombuffer(info, np.int32).reshape(A._shape[:-2]), kind)


# ======================================================================================
# inv
# ======================================================================================


def _lu_info(a: np.ndarray) -> np.ndarray:
    """getrf's info for each matrix of the batch (first zero pivot, 1-based; 0: none)."""
    f = lapack.fortran_batch(a)
    piv = np.empty(a.shape[:-2] + (min(a.shape[-2:]),), np.int32)
    return lapack.getrf(f, piv)


def _inv_fast(A: Tensor) -> tuple[Tensor, Tensor]:
    """(A^{-1}, info) by gesv with B = I, written into new tensors: A's row-major buffer
    read column-major is A^T, and the solution Y of A^T Y = I stored column-major, read
    row-major, is Y^T = A^{-1}. A singular matrix's inverse is NaN (torch leaves it
    unspecified); info is getrf's (the first zero pivot)."""
    shape = A._shape
    n = shape[-1]
    X = Tensor._empty(shape, A._dtype)
    info = Tensor._empty(shape[:-2], dt.int32)
    count = _count(shape) // (n * n) if n else 0
    if not count:
        _zero(info)
        return X, info
    _inv_into(_host_copy(A), X._numpy_view(), info)
    return X, info


def _inv_into(buf: np.ndarray, view: np.ndarray, info: Tensor) -> None:
    """The inverses of the matrices of the C-contiguous `buf` (destroyed) into `view`
    (a new C-contiguous array of the same shape), getrf's info into `info` (see
    `_inv_fast`)."""
    np.copyto(view, _eye(view.shape[-1], view.shape[-1], view.dtype))
    lapack.gesv(buf, view, info_addr=info._ptr)
    if _string_at(info._ptr, 4 * _count(info._shape)).strip(b"\0"):
        view[info._numpy_view() != 0] = np.nan


def _inv_compute(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X, info = _inv_fast(from_numpy(a))
    return X._numpy_view(), info._numpy_view()


def _inv_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None]
    X = ctx.outputs[0]
    Xh = mH(X)
    return [F.neg(F.matmul(Xh, F.matmul(g, Xh)))]


def _inv_jvp(
    primals: list[Tensor], outs: list[Tensor], tangents: list[Tensor | None], attrs: dict[str, Any]
) -> list[Tensor | None]:
    X = outs[0]
    return [F.neg(F.matmul(X, F.matmul(tangents[0], X))), None]


def inv_ex(A: Tensor, *, check_errors: bool = False, out: Any = None) -> Any:
    """The inverse of each square matrix of `A` and LAPACK's `info` (0, or the 1-based
    index of the first zero pivot of the LU factorization), as torch.linalg.inv_ex."""
    op = "linalg.inv_ex"
    square_float(op, A)
    if _plain_no_grad(A):
        inv, info = _inv_fast(A)
    else:
        inv, info = _host(
            op,
            "LinalgInvExBackward0",
            (A,),
            _inv_compute,
            _inv_rule,
            out_dtypes=(A._dtype, dt.int32),
            save_inputs=False,
            save_outputs=(True, False),
            jvp=_inv_jvp,
        )
    if check_errors:
        _check_errors("linalg.inv", info, "inv")
    return _out(inv_ex_result(inv, info), out)


def inv(A: Tensor, *, out: Any = None) -> Tensor:
    """The inverse of each square matrix of `A` (float or complex); raises
    `LinAlgError` for a singular matrix, as torch.linalg.inv."""
    op = "linalg.inv"
    square_float(op, A)
    if _plain_no_grad(A):
        res, info = _inv_fast(A)
        _check_errors(op, info, "inv")
        return _out(res, out)
    res, info = _host(
        op,
        "LinalgInvExBackward0",
        (A,),
        _inv_compute,
        _inv_rule,
        out_dtypes=(A._dtype, dt.int32),
        save_inputs=False,
        save_outputs=(True, False),
        jvp=_inv_jvp,
    )
    _check_errors(op, info, "inv")
    return _out(res, out)


def _out(result: Any, out: Any, op: str = "linalg") -> Any:
    """Copy `result` into `out` (a tensor, or a tuple of tensors) when given (torch's
    `out=`: no autograd through it)."""
    if out is None:
        return result

    return store(op, result, out)


# ======================================================================================
# det, slogdet
# ======================================================================================


def _det_compute(a: np.ndarray) -> tuple[np.ndarray]:
    if a.shape[-1] == 0:
        return (np.ones(a.shape[:-2], a.dtype),)
    return (np.linalg.det(a).astype(a.dtype),)


def _adjugate_h(A: Tensor) -> Tensor:
    """adj(A)^H for every matrix (singular ones included), from the SVD:
    adj(A) = det(U) det(Vh) V diag(prod_{j != i} s_j) U^H."""
    U, S, Vh = svd(A, full_matrices=False)
    n = S._shape[-1]
    ones = F.ones(S._shape[:-1] + (1,), dtype=S._dtype)
    left = F.cumprod(F.cat([ones, S[..., : n - 1]], -1), -1)
    right = F.flip(F.cumprod(F.flip(F.cat([S[..., 1:], ones], -1), [-1]), -1), [-1])
    others = F.mul(left, right).to(A._dtype)
    phase = F.mul(det(U), det(Vh))
    adj_h = F.matmul(F.mul(U, F.unsqueeze(others, -2)), Vh)  # U diag(others) V^H
    return F.mul(
        adj_h, F.unsqueeze(F.unsqueeze(F.conj(phase) if phase._dtype.is_complex else phase, -1), -1)
    )


def _det_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None]
    (A,) = ctx.inputs
    (d,) = ctx.outputs
    if A._shape[-1] == 0:
        return [F.zeros(A._shape, dtype=A._dtype)]
    Ainv, info = inv_ex(A)
    if not np.any(values(info)):
        scale = F.mul(g, F.conj(d)) if d._dtype.is_complex else F.mul(g, d)
        return [F.mul(mH(Ainv), F.unsqueeze(F.unsqueeze(scale, -1), -1))]
    return [F.mul(_adjugate_h(A), F.unsqueeze(F.unsqueeze(g, -1), -1))]


def _det_jvp(
    primals: list[Tensor], outs: list[Tensor], tangents: list[Tensor | None], attrs: dict[str, Any]
) -> list[Tensor | None]:
    A, dA = primals[0], tangents[0]
    # d det = det * tr(A^{-1} dA)
    tr = F.sum(diagonal(solve(A, dA)), -1)
    return [F.mul(outs[0], tr)]


def det(A: Tensor, *, out: Any = None) -> Tensor:
    """The determinant of each square matrix of `A`, as torch.linalg.det (LU on the
    host; the gradient uses A^{-1}, or the SVD where A is singular)."""
    op = "linalg.det"
    square_float(op, A)
    (d,) = host_op(
        op,
        "LinalgDetBackward0",
        (A,),
        _det_compute,
        _det_rule,
        out_dtypes=(A._dtype,),
        jvp=_det_jvp,
    )
    return _out(d, out)


def _slogdet_compute(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.shape[-1] == 0:
        return np.ones(a.shape[:-2], a.dtype), np.zeros(a.shape[:-2], a.real.dtype)
    s, l = np.linalg.slogdet(a)
    return s.astype(a.dtype), l.astype(a.real.dtype)


def _slogdet_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    gs, gl = grads
    (A,) = ctx.inputs
    sign = ctx.outputs[0]
    complex_ = A._dtype.is_complex
    if gl is None and (gs is None or not complex_):
        return [None]
    if gl is None:
        gl = F.zeros(sign._shape, dtype=_real_dtype(A._dtype))
    scale: Tensor = gl
    if complex_:
        scale = gl.to(A._dtype)
        if gs is not None:
            scale = F.add(scale, F.mul(F.imag(F.mul(gs, F.conj(sign))).to(A._dtype), 1j))
    # d log|det| = Re tr(A^{-1} dA): the gradient is scale * A^{-H}
    Ainv = inv(A)
    return [F.mul(mH(Ainv), F.unsqueeze(F.unsqueeze(scale.to(A._dtype), -1), -1))]


def slogdet(A: Tensor, *, out: Any = None) -> Any:
    """(sign, log|det|) of each square matrix of `A`, as torch.linalg.slogdet (for
    complex `A` the sign is det/|det|)."""
    op = "linalg.slogdet"
    square_float(op, A)
    if _plain_no_grad(A):
        if not A._shape[-1]:  # empty matrices: det 1
            sign = Tensor._empty(A._shape[:-2], A._dtype)
            if _count(sign._shape):
                sign._numpy_view().fill(1)
            logabs = _zero(Tensor._empty(A._shape[:-2], _real_dtype(A._dtype)))
            return _out(slogdet_result(sign, logabs), out)
        with np.errstate(all="ignore"):
            s_, l_ = _slogdet_compute(A._numpy_view())
        return _out(
            slogdet_result(from_numpy(s_, A._dtype), from_numpy(l_, _real_dtype(A._dtype))), out
        )
    sign, logabs = host_op(
        op,
        "LinalgSlogdetBackward0",
        (A,),
        _slogdet_compute,
        _slogdet_rule,
        out_dtypes=(A._dtype, _real_dtype(A._dtype)),
        save_outputs=(True, False),
    )
    return _out(slogdet_result(sign, logabs), out)


def logdet_fast(A: Tensor) -> Tensor | None:
    """torch.logdet of a plain real (or empty) tensor that needs no gradient, in NumPy
    from slogdet's values (NaN for a negative determinant); None where the general way
    must run (checks included)."""
    if not (
        A.__class__ is Tensor
        and A.ndim >= 2
        and A._shape[-1] == A._shape[-2]
        and A._dtype in _LAPACK_DTYPES
        and _plain_no_grad(A)
    ):
        return None
    batch = A._shape[:-2]
    if not A._shape[-1]:
        return _zero(Tensor._empty(batch, A._dtype))  # log det of 0 x 0 matrices: 0
    if A._dtype.is_complex:
        return None
    with np.errstate(all="ignore"):
        s_, l_ = _slogdet_compute(A._numpy_view())
    return from_numpy(np.where(s_ < 0, np.nan, l_), A._dtype)


# ======================================================================================
# solve
# ======================================================================================


def _broadcast_batch(
    op: str, A: Tensor, B: Tensor, nA: int = 2, nB: int = 2
) -> tuple[Tensor, Tensor]:
    """Expand A and B to their common batch shape (A's last nA dims, B's last nB are the
    matrix part)."""
    ba, bb = A._shape[: A.ndim - nA], B._shape[: B.ndim - nB]
    if ba == bb:
        return A, B
    try:
        batch = tuple(np.broadcast_shapes(ba, bb))
    except ValueError:
        raise RuntimeError(
            f"{op}: The batch dimensions of A {list(ba)} and B {list(bb)} are not broadcastable"
        ) from None
    if ba != batch:
        A = F.expand(A, batch + A._shape[A.ndim - nA :])
    if bb != batch:
        B = F.expand(B, batch + B._shape[B.ndim - nB :])
    return A, B


def _solve_into(a: np.ndarray, b: np.ndarray, x: np.ndarray, info: np.ndarray) -> None:
    """X of A X = B by gesv into `x` and LAPACK's info into `info` (new arrays; a
    (..., n, n) and b (..., n, k) of one batch shape, n and k positive). A singular
    matrix's X is NaN (torch leaves it unspecified)."""
    fb = lapack.fortran_batch(b)
    lapack.gesv(lapack.fortran_batch(a), fb, info_addr=lapack.address(info))
    np.copyto(x, lapack.from_fortran(fb))
    if info.any():
        x[info != 0] = np.nan


def _solve_compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros(b.shape, a.dtype)
    info = np.zeros(a.shape[:-2], np.int32)
    if a.shape[-1] and info.size:
        if b.shape[-1]:
            _solve_into(a, b, x, info)
        else:  # no right-hand sides: A is still factored, for its info (as torch)
            info = _lu_info(a)
    return x, info


def _solve_fast(op: str, A: Tensor, B: Tensor, vector: bool) -> tuple[Tensor, Tensor]:
    """(X, info) of A X = B for plain tensors that need no gradient: batches broadcast
    and B's vector form handled in NumPy, X and info written into new tensors."""
    a, b = A._numpy_view(), B._numpy_view()
    if vector:
        b = b[..., None]
    ba, bb = a.shape[:-2], b.shape[:-2]
    if ba == bb:
        batch = ba
    else:
        try:
            batch = tuple(np.broadcast_shapes(ba, bb))
        except ValueError:
            raise RuntimeError(
                f"{op}: The batch dimensions of A {list(ba)} and B "
                f"{list(B._shape[: B.ndim - (1 if vector else 2)])} are not "
                f"broadcastable"
            ) from None
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + b.shape[-2:])
    n, k = b.shape[-2:]
    X = Tensor._empty(batch + ((n,) if vector else (n, k)), B._dtype)
    info = Tensor._empty(batch, dt.int32)
    if not (n and k and _count(batch)):
        _zero(X)
        if n and _count(batch):  # no right-hand sides: A is still factored, for its info
            np.copyto(info._numpy_view(), _lu_info(a))
        else:
            _zero(info)
        return X, info
    x = X._numpy_view()
    _solve_into(a, b, x[..., None] if vector else x, info._numpy_view())
    return X, info


def _solve_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None, None]
    A, _ = ctx.inputs
    X = ctx.outputs[0]
    gB = solve(mH(A), g)
    gA = F.neg(F.matmul(gB, mH(X))) if ctx.needs[0] else None
    return [gA, gB]


def _solve_jvp(
    primals: list[Tensor], outs: list[Tensor], tangents: list[Tensor | None], attrs: dict[str, Any]
) -> list[Tensor | None]:
    A = primals[0]
    X = outs[0]
    dA, dB = tangents
    rhs = dB if dB is not None else None
    if dA is not None:
        t = F.neg(F.matmul(dA, X))
        rhs = t if rhs is None else F.add(rhs, t)
    return [solve(A, rhs), None]


def _solve_prim(op: str, A: Tensor, B: Tensor) -> tuple[Tensor, Tensor]:
    """The primitive: A (..., n, n), B (..., n, k) with the same batch shape."""
    return _host(
        op,
        "LinalgSolveExBackward0",
        (A, B),
        _solve_compute,
        _solve_rule,
        out_dtypes=(A._dtype, dt.int32),
        save_inputs=(True, False),
        save_outputs=(True, False),
        jvp=_solve_jvp,
    )


def _solve_common(op: str, A: Tensor, B: Tensor, left: bool) -> tuple[Tensor, Tensor]:
    check_tensor(op, A, "A")
    check_tensor(op, B, "B")
    check_square(op, A)
    check_float(op, A)
    same_dtype(op, A, B)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B._shape == A._shape[:-1])
    if not left:
        if vector:
            raise RuntimeError(
                f"{op}: Vector broadcasting of the left hand side is not "
                f"supported for left=False. In this case linalg.solve is "
                f"equivalent to B / A.squeeze(-1)"
            )
        X, info = _solve_common(op, mT(A), mT(B), True)
        return mT(X), info
    n = A._shape[-1]
    if not vector and B.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor B must have at least 2 dimensions.")
    rows, cols = (B._shape[-1], 1) if vector else B._shape[-2:]
    if rows != n:
        raise RuntimeError(
            f"{op}: Incompatible shapes of A and B for the equation AX = B "
            f"({A._shape[-2]}x{n} and {rows}x{cols})"
        )
    if _plain_no_grad(A, B):
        return _solve_fast(op, A, B, vector)
    Bm = F.unsqueeze(B, -1) if vector else B
    A2, B2 = _broadcast_batch(op, A, Bm)
    X, info = _solve_prim(op, A2, B2)
    if vector:
        X = F.squeeze(X, -1)
    return X, info


def solve_ex(
    A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False, out: Any = None
) -> Any:
    """The solution of A X = B (X A = B with left=False) and LAPACK's info, as
    torch.linalg.solve_ex."""
    X, info = _solve_common("linalg.solve_ex", A, B, left)
    if check_errors:
        _check_errors("linalg.solve_ex", info, "solve")
    return _out(solve_ex_result(X, info), out)


def solve(A: Tensor, B: Tensor, *, left: bool = True, out: Any = None) -> Tensor:
    """The solution X of A X = B (X A = B with left=False) for square A, broadcasting
    over batch dims; B may be a (batch of) vector(s), as torch.linalg.solve."""
    X, info = _solve_common("linalg.solve", A, B, left)
    _check_errors("torch.linalg.solve", info, "solve")
    return _out(X, out)


# ======================================================================================
# cholesky
# ======================================================================================


def _cholesky_plan(A: Any, upper: bool, info_tensor: bool) -> tuple:
    """What `_cholesky_fast` does for A's layout: (outputs maker, matrix count, whether
    A's bytes are L's start as they are, the potrf loop, the triangle to zero (flat
    indices, or a mask: `_zero_positions`), bytes of the matrices, the ctypes type of a
    scratch info, the NumPy dtype)."""
    shape = A._shape
    n = shape[-1]
    count = _count(shape) // (n * n) if n else 0
    specs = [(shape, A._dtype, False)]
    if info_tensor:
        specs.append((shape[:-2], dt.int32, not count))
    make = _outputs_maker(specs)
    if not count:
        return (make, 0, False, None, None, 0, None, None)
    as_is = not upper and A._strides == _row_major_strides(shape)
    run = lapack.potrf_caller(A._dtype.np, n, count, "L" if upper else "U")
    mask = _above((n, n), -1, below=True) if upper else _above((n, n), 0)
    return (
        make,
        count,
        as_is,
        run,
        _zero_positions(mask, count, n * n),
        A._dtype.itemsize * count * n * n,
        ctypes.c_int * count,
        A._dtype.np,
    )


def _zero_positions(mask: np.ndarray, count: int, size: int) -> np.ndarray:
    """Where `mask` (one matrix's, of `size` elements) is set in each of `count`
    matrices one after another: flat indices (an assignment through them is cheaper
    than a masked copy) up to `_INDEX_MAX` elements, else the mask itself."""
    if count * size > _INDEX_MAX:
        return mask
    one = np.flatnonzero(mask)
    return (np.arange(count)[:, None] * size + one).reshape(-1)


def _cholesky_fast(A: Any, upper: bool, info_tensor: bool = True) -> tuple[Any, Any]:
    """(L, info) of a plain tensor that needs no gradient: potrf in L's memory, info
    written into its tensor (A's lower triangle is read). A's row-major buffer read
    column-major is A^T = conj(A) (A Hermitian): its upper Cholesky factor U
    (conj(A) = U^H U) is L^T, so potrf 'U' on a copy of A, read back row-major, is L; the
    same on a copy of A^H with 'L' gives U = L^H directly. The other triangle (A's
    values) is zeroed after. Without `info_tensor`, for a call that only checks it, info
    is a ctypes int32 array of the batch's matrices, or None when there are none."""
    key = ("cholesky", A._lkey, upper, info_tensor)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _cholesky_plan(A, upper, info_tensor))
    make, count, as_is, run, zero, nbytes, info_type, npd = plan
    if info_tensor:
        L, info = make()
    else:
        (L,) = make()
        info = None
    if not count:
        return L, info
    if as_is:
        _memmove(L._ptr, A._ptr, nbytes)
        view = None
    else:
        view = _copy_into(L, A, adjoint=upper)
    if info is None:
        info = info_type()
        run(L._ptr, _addressof(info))
    else:
        run(L._ptr, info._ptr)
    if zero.dtype == bool:
        np.copyto(L._numpy_view() if view is None else view, 0, where=zero)
    else:
        np.ndarray(nbytes // npd.itemsize, npd, L._storage.buffer)[zero] = 0
    return L, info


def _cholesky_compute(a: np.ndarray, upper: bool) -> tuple[np.ndarray, np.ndarray]:
    A = from_numpy(a)
    L, info = _cholesky_fast(A, upper)
    return L._numpy_view(), info._numpy_view()


def _cholesky_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None]
    upper = ctx.attrs["upper"]
    L = ctx.outputs[0]
    if upper:
        L, g = mH(L), mH(g)
    P = F.tril(F.matmul(mH(L), g))
    P = F.mul(F.add(P, mH(F.tril(P, -1))), 0.5)
    gA = solve_triangular(mH(L), P, upper=True)
    gA = solve_triangular(L, gA, upper=False, left=False)
    return [gA]


def cholesky_ex(
    A: Tensor, *, upper: bool = False, check_errors: bool = False, out: Any = None
) -> Any:
    """The Cholesky factor (lower L with A = L L^H, or upper U = L^H) of each Hermitian
    positive-definite matrix of `A` (its lower triangle is read) and LAPACK's info (the
    order of the first leading minor that is not positive-definite), as
    torch.linalg.cholesky_ex."""
    op = "linalg.cholesky_ex"
    if _lapack_plain(A, True):
        L, info = _cholesky_fast(A, upper)
        if check_errors:
            _check_errors("linalg.cholesky", info, "cholesky")
        return _out(cholesky_ex_result(L, info), out)
    square_float(op, A)
    if _plain_no_grad(A):
        L, info = _cholesky_fast(A, upper)
    else:
        L, info = _cholesky_host(op, A, upper)
    if check_errors:
        _check_errors("linalg.cholesky", info, "cholesky")
    return _out(cholesky_ex_result(L, info), out)


def _cholesky_host(op: str, A: Tensor, upper: bool) -> tuple[Tensor, Tensor]:
    """The recorded general path of the Cholesky factorization: (L, info)."""
    return host_op(
        op,
        "LinalgCholeskyExBackward0",
        (A,),
        lambda a: _cholesky_compute(a, upper),
        _cholesky_rule,
        out_dtypes=(A._dtype, dt.int32),
        save_inputs=False,
        save_outputs=(True, False),
        attrs={"upper": upper},
    )


def cholesky(A: Tensor, *, upper: bool = False, out: Any = None) -> Tensor:
    """The Cholesky factor of each Hermitian positive-definite matrix of `A`; raises
    `LinAlgError` when one is not positive-definite, as torch.linalg.cholesky."""
    op = "linalg.cholesky"
    plain = _lapack_plain(A, True)
    if not plain:
        square_float(op, A)
        plain = _plain_no_grad(A)
    if plain:
        L, info = _cholesky_fast(A, upper, False)
        if info is not None and bytes(info).strip(b"\0"):
            _info_error(op, info, A, "cholesky")
        return _out(L, out)
    L, info = _cholesky_host(op, A, upper)
    _check_errors(op, info, "cholesky")
    return _out(L, out)


# ======================================================================================
# solve_triangular
# ======================================================================================


def _trsm_into(a: np.ndarray, b: np.ndarray, x: np.ndarray, upper: bool, unit: bool) -> None:
    """X of the triangular A X = B (one batch shape) into the new array `x`."""
    fb = lapack.fortran_batch(b)
    lapack.trsm(lapack.fortran_batch(a), fb, lower=not upper, unit=unit)
    np.copyto(x, lapack.from_fortran(fb))


def _trsm_compute(a: np.ndarray, b: np.ndarray, upper: bool, unit: bool) -> tuple[np.ndarray]:
    out = np.empty(b.shape, a.dtype)
    if b.size:
        _trsm_into(a, b, out, upper, unit)
    return (out,)


def _trsm_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None, None]
    upper, unit = ctx.attrs["upper"], ctx.attrs["unit"]
    A, _ = ctx.inputs
    X = ctx.outputs[0]
    gB = solve_triangular(mH(A), g, upper=not upper, unitriangular=unit)
    gA = None
    if ctx.needs[0]:
        full = F.neg(F.matmul(gB, mH(X)))
        off = 1 if unit else 0
        gA = F.triu(full, off) if upper else F.tril(full, -off)
    return [gA, gB]


def solve_triangular(
    A: Tensor,
    B: Tensor,
    *,
    upper: bool,
    left: bool = True,
    unitriangular: bool = False,
    out: Any = None,
) -> Tensor:
    """The solution of A X = B (X A = B with left=False) for triangular A (only the
    triangle named by `upper` is read; `unitriangular`: its diagonal is taken as ones),
    broadcasting batch dims, as torch.linalg.solve_triangular."""
    op = "linalg.solve_triangular"
    check_tensor(op, A, "A")
    check_tensor(op, B, "B")
    check_matrix(op, A)
    check_matrix(op, B, "B")
    check_square(op, A)
    check_float(op, A)
    same_dtype(op, A, B)
    if not left:
        X = solve_triangular(mT(A), mT(B), upper=not upper, left=True, unitriangular=unitriangular)
        return _out(mT(X), out)
    if B._shape[-2] != A._shape[-1]:
        raise RuntimeError(
            f"{op}: Incompatible shapes of A and B for the equation AX = B "
            f"({A._shape[-2]}x{A._shape[-1]} and {B._shape[-2]}x"
            f"{B._shape[-1]})"
        )
    if _plain_no_grad(A, B):
        return _out(
            _pair_fast(op, A, B, lambda a, b, x: _trsm_into(a, b, x, upper, unitriangular)), out
        )
    A2, B2 = _broadcast_batch(op, A, B)
    (X,) = _host(
        op,
        "LinalgSolveTriangularBackward0",
        (A2, B2),
        lambda a, b: _trsm_compute(a, b, upper, unitriangular),
        _trsm_rule,
        out_dtypes=(A._dtype,),
        save_inputs=(True, False),
        attrs={"upper": upper, "unit": unitriangular},
    )
    return _out(X, out)


# ======================================================================================
# cholesky_solve (torch.cholesky_solve; its gradient treats L as a full matrix, as torch)
# ======================================================================================


def _potrs_into(c: np.ndarray, b: np.ndarray, x: np.ndarray, upper: bool) -> None:
    """X of A X = B from A's Cholesky factor `c` (one batch shape) into the new `x`."""
    fb = lapack.fortran_batch(b)
    lapack.potrs(lapack.fortran_batch(c), fb, "U" if upper else "L")
    np.copyto(x, lapack.from_fortran(fb))


def _potrs_compute(b: np.ndarray, c: np.ndarray, upper: bool) -> tuple[np.ndarray]:
    out = np.empty(b.shape, c.dtype)
    if b.size:
        _potrs_into(c, b, out, upper)
    return (out,)


def _cholesky_inverse_plan(L: Any, upper: bool) -> tuple:
    """What `_cholesky_inverse_fast` does for L's layout: (output maker, matrix count,
    the potrs loop, the identities' bytes, a pool of scratch sets, a function making
    one). A scratch set: a column-major copy of L's matrices and its address."""
    shape = L._shape
    n = shape[-1]
    d = L._dtype
    make = _outputs_maker([(shape, d, False)])
    count = _count(shape) // (n * n) if n else 0
    if not count:
        return (make, 0, None, None, None, None)
    run = lapack.potrs_caller(d.np, n, n, count, "U" if upper else "L")
    eye = None  # the identities' bytes, kept when small
    if count * n * n * d.itemsize <= 1 << 16:
        eye = np.broadcast_to(np.eye(n, dtype=d.np), (count, n, n)).tobytes()

    window = _stage_window(L)

    def scratch() -> tuple:
        """A new scratch set of this plan (see the plan's docstring)."""
        f = np.empty(shape, d.np)
        return f, lapack.address(f), _stage(L, window)

    return (make, count, run, eye, _pool(count * n * n * d.itemsize), scratch)


def _cholesky_inverse_fast(L: Any, upper: bool) -> Any:
    """cholesky_inverse of a plain tensor that needs no gradient: potrs with a column-
    major copy of the factors on the identity (what `_potrs_compute(I, L)` computes),
    written in the output's memory (the identity is its own column-major form) and
    transposed in place."""
    key = ("cholesky_inverse", L._lkey, upper)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _cholesky_inverse_plan(L, upper))
    make, count, run, eye, pool, scratch = plan
    (X,) = make()
    if not count:
        return X
    try:
        s = pool.pop()
    except IndexError:
        s = scratch()
    _transposed_in(s[0], L, s[2])
    if eye is not None:
        _memmove(X._ptr, eye, len(eye))
        run(s[1], X._ptr)
        view = X._numpy_view()
    else:
        view = X._numpy_view()
        view.fill(0)
        n = view.shape[-1]
        view.reshape(count, n * n)[:, :: n + 1] = 1
        run(s[1], X._ptr)
    view[...] = view.swapaxes(-1, -2)  # (an overlapping source is read first)
    pool.append(s)
    return X


def _potrs_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None, None]
    upper = ctx.attrs["upper"]
    _, L = ctx.inputs
    X = ctx.outputs[0]
    gB = cholesky_solve(g, L, upper)
    gL = None
    if ctx.needs[1]:
        common = F.matmul(gB, mH(X))
        common = F.add(common, mH(common))
        gL = F.neg(F.matmul(L, common) if upper else F.matmul(common, L))
    return [gB, gL]


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """The solution of A X = B given A's Cholesky factor (lower L with A = L L^H, or
    upper U with A = U^H U), as torch.cholesky_solve (LAPACK potrs); batch dims
    broadcast."""
    op = "cholesky_solve"
    check_tensor(op, B, "B")
    check_tensor(op, L, "L")
    check_matrix(op, B, "B")
    check_square(op, L, "L")
    check_float(op, L)
    same_dtype(op, B, L, "B", "L")
    if B._shape[-2] != L._shape[-1]:
        raise RuntimeError(
            f"{op}: Incompatible matrix sizes for cholesky_solve: each A "
            f"matrix is {L._shape[-1]} by {L._shape[-1]} but each b matrix is "
            f"{B._shape[-2]} by {B._shape[-1]}"
        )
    if _plain_no_grad(B, L):
        return _pair_fast(op, L, B, lambda c, b, x: _potrs_into(c, b, x, upper))
    L2, B2 = _broadcast_batch(op, L, B)
    (X,) = _host(
        op,
        "CholeskySolveBackward0",
        (B2, L2),
        lambda b, c: _potrs_compute(b, c, upper),
        _potrs_rule,
        out_dtypes=(B._dtype,),
        save_inputs=(False, True),
        attrs={"upper": upper},
    )
    return X


# ======================================================================================
# qr
# ======================================================================================


def _qr_compute(a: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
    m, n = a.shape[-2:]
    if a.size == 0:
        k = m if mode == "complete" else min(m, n)
        q = np.zeros(a.shape[:-2] + (m, k), a.dtype)
        if k and m:
            q[...] = np.eye(m, k, dtype=a.dtype)
        r = np.zeros(a.shape[:-2] + ((m if mode == "complete" else min(m, n)), n), a.dtype)
        return (q if mode != "r" else np.zeros((0,), a.dtype)), r
    if mode == "r":
        return np.zeros((0,), a.dtype), np.linalg.qr(a, mode="r").astype(a.dtype)
    q, r = np.linalg.qr(a, mode=mode)
    return q.astype(a.dtype), r.astype(a.dtype)


def _copyltu(M: Tensor) -> Tensor:
    """tril(M) copied Hermitian-wise to the upper triangle, the diagonal's real part."""
    low = F.tril(M, -1)
    d = diagonal(M)
    d = F.real(d).to(M._dtype) if M._dtype.is_complex else d
    return F.add(F.add(low, mH(low)), diag_embed(d))


def _qr_core(Q: Tensor, R: Tensor, gQ: Tensor | None, gR: Tensor | None) -> Tensor:
    """The gradient of A = QR for m >= n (Q m x n, R n x n upper)."""
    M = None
    if gR is not None:
        M = F.matmul(R, mH(gR))
    if gQ is not None:
        t = F.matmul(mH(gQ), Q)
        M = F.neg(t) if M is None else F.sub(M, t)
    b = F.matmul(Q, _copyltu(M))
    if gQ is not None:
        b = F.add(b, gQ)
    return solve_triangular(mH(R), b, upper=False, left=False)


def _qr_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    gQ, gR = grads
    if gQ is None and gR is None:
        return [None]
    mode = ctx.attrs["mode"]
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed "
            "when mode='r'. Please use linalg.qr(A, mode='reduced') if you are "
            "going to differentiate through linalg.qr."
        )
    Q, R = ctx.outputs
    m, n = Q._shape[-2], R._shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
        )
    if m >= n:
        return [_qr_core(Q, R, gQ, gR)]
    # wide: A = [X | Y] with X = Q U, Y = Q V
    U, V = R[..., :, :m], R[..., :, m:]
    gU = gR[..., :, :m] if gR is not None else None
    gV = gR[..., :, m:] if gR is not None else None
    if gV is not None:
        extra = F.matmul(F.matmul(Q, V), mH(gV))
        gQ = extra if gQ is None else F.add(gQ, extra)
    gX = _qr_core(Q, U, gQ, gU)
    gY = F.matmul(Q, gV) if gV is not None else F.zeros(V._shape[:-2] + (m, n - m), dtype=Q._dtype)
    return [F.cat([gX, gY], -1)]


def qr(A: Tensor, mode: str = "reduced", *, out: Any = None) -> Any:
    """The QR decomposition of each matrix of `A`: mode 'reduced' (Q m x k, R k x n,
    k = min(m, n)), 'complete' (Q m x m) or 'r' (R only, Q empty), as torch.linalg.qr.
    Householder QR (LAPACK geqrf); R's diagonal signs are LAPACK's."""
    op = "linalg.qr"
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of "
            f"'reduced' (default), 'r', or 'complete'"
        )
    if _plain_no_grad(A) and not _count(A._shape):
        m, n = A._shape[-2:]
        k = m if mode == "complete" else min(m, n)
        batch = A._shape[:-2]
        qshape = batch + (m, k) if mode != "r" else (0,)
        if not _count(qshape):  # (an identity Q of empty matrices: the general way)
            Q, R = _empty_fast((qshape, A._dtype, False), (batch + (k, n), A._dtype, True))
            return _out(qr_result(Q, R), out)
    Q, R = _host(
        op,
        "LinalgQrBackward0",
        (A,),
        lambda a: _qr_compute(a, mode),
        _qr_rule,
        out_dtypes=(A._dtype, A._dtype),
        save_inputs=False,
        attrs={"mode": mode},
    )
    return _out(qr_result(Q, R), out)


# ======================================================================================
# eigh, eigvalsh, eig, eigvals
# ======================================================================================


_UPLOS = ("L", "U", "l", "u")


def _uplo(op: str, UPLO: str) -> str:
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"{op}: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper()


def _host_copy(A: Tensor) -> np.ndarray:
    """A new C-contiguous NumPy copy of A's values (LAPACK overwrites it)."""
    buf = np.empty(A._shape, A._dtype.np)
    if A._strides == _row_major_strides(A._shape) and A._ptr is not None:
        _memmove(lapack.address(buf), A._ptr, buf.nbytes)
    else:
        np.copyto(buf, A._numpy_view())
    return buf


def _eigh_plan(A: Any, UPLO: str, vectors: bool) -> tuple:
    """What `_eigh_fast` does for A's layout: (outputs maker, matrix count, n, numpy
    dtype, whether A's bytes can be copied as they are, their number, the ctypes type of
    a scratch info)."""
    shape = A._shape
    n = shape[-1]
    specs = [(shape[:-2] + (n,), _real_dtype(A._dtype), False)]
    if vectors:
        specs.append((shape, A._dtype, False))
    count = _count(shape) // (n * n) if n else 0
    as_is = A._strides == _row_major_strides(shape)
    nbytes = A._dtype.itemsize * _count(shape)
    return (_outputs_maker(specs), count, n, A._dtype.np, as_is, nbytes, ctypes.c_int * count)


def _eigh_fast(A: Any, UPLO: str, vectors: bool) -> tuple[Any, Any]:
    """(eigenvalues, eigenvectors or None) by syevd / heevd on a copy of A.
    A's row-major buffer read column-major is A^T = conj(A): the triangle `UPLO` of A is
    the other one of conj(A), whose eigenvectors are the conjugates of A's, so A's
    eigenvector matrix is the conjugate transpose of the buffer read row-major. With
    `vectors` the copy is the eigenvector output's own memory (transposed in place
    afterwards)."""
    key = ("eigh", A._lkey, UPLO, vectors)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _eigh_plan(A, UPLO, vectors))
    make, count, n, npd, as_is, nbytes, info_type = plan
    if vectors:
        W, V = make()
    else:
        (W,) = make()
        V = None
    if not count:
        return W, V
    buf = None
    if V is not None:
        base = V._ptr
        if as_is:
            _memmove(base, A._ptr, nbytes)
        else:
            V._numpy_view()[...] = A._numpy_view()
    else:
        buf = _host_copy(A)
        base = lapack.address(buf)
    info = info_type()
    lapack.syevd_at(
        npd,
        n,
        count,
        base,
        W._ptr,
        vectors,
        "U" if UPLO == "L" else "L",
        _addressof(info),
    )
    if bytes(info).strip(b"\0"):
        k, v = next((k, v) for k, v in enumerate(info) if v)
        where = f"(Batch element {k}): " if A._shape[:-2] else ""
        raise LinAlgError(
            f"linalg.eigh: {where}The algorithm failed to converge because the "
            f"input matrix is ill-conditioned or has too many repeated "
            f"eigenvalues (error code: {v})."
        )
    if V is not None:
        view = V._numpy_view()
        t = view.swapaxes(-1, -2)  # (copyto reads an overlapping source first)
        if npd.kind == "c":
            np.conjugate(t, out=view)
        else:
            view[...] = t
    return W, V


def _eigh_compute(a: np.ndarray, UPLO: str, vectors: bool) -> tuple[np.ndarray, ...]:
    W, V = _eigh_fast(from_numpy(a), UPLO, vectors)
    return W._numpy_view(), (V._numpy_view() if V is not None else np.zeros((0,), a.dtype))


def _gauge_check(op: str, d: Tensor) -> None:
    vals = values(F.imag(d))
    if vals.size and not np.allclose(vals, 0.0, rtol=1e-2, atol=1e-2):
        raise RuntimeError(
            f"{op}: The eigenvectors in the complex case are specified up to "
            f"multiplication by e^{{i phi}}. The specified loss function "
            f"depends on this quantity, so it is ill-defined."
        )


def _eig_common_rule(
    L: Tensor, V: Tensor, gL: Tensor | None, gV: Tensor | None, hermitian: bool
) -> Tensor:
    """The gradient of A = V diag(L) V^{-1} (V^H for Hermitian A)."""
    n = L._shape[-1]
    Lc = F.conj(L) if L._dtype.is_complex else L
    E = F.sub(F.unsqueeze(Lc, -2), F.unsqueeze(Lc, -1))  # E_ij = L_j - L_i
    E = F.add(E, F.eye(n, dtype=E._dtype))  # diagonal: 1
    if gV is not None:
        W = F.matmul(mH(V), gV)
        dW = diagonal(W)
        if V._dtype.is_complex:
            _gauge_check("linalg_eigh_backward" if hermitian else "linalg_eig_backward", dW)
        if hermitian:
            W = F.mul(F.sub(W, mH(W)), 0.5)
        else:
            re = F.real(dW) if dW._dtype.is_complex else dW
            W = F.sub(W, F.matmul(mH(V), F.mul(V, F.unsqueeze(re.to(V._dtype), -2))))
        ret = F.div(W, E.to(W._dtype))
        ret = F.sub(ret, diag_embed(diagonal(ret)))
        if gL is not None:
            ret = F.add(ret, diag_embed(gL.to(ret._dtype)))
    else:
        ret = diag_embed(gL.to(V._dtype))
    if hermitian:
        return F.matmul(V, F.matmul(ret, mH(V)))
    return solve(mH(V), F.matmul(ret, mH(V)))


def _eigh_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    gL, gV = grads
    if gL is None and gV is None:
        return [None]
    L, V = ctx.outputs
    return [_eig_common_rule(L, V, gL, gV, True)]


def eigh(A: Tensor, UPLO: str = "L", *, out: Any = None) -> Any:
    """Eigenvalues (ascending, real) and orthonormal eigenvectors of each Hermitian matrix
    of `A` (only the triangle `UPLO` is read), as torch.linalg.eigh (LAPACK syevd/heevd;
    each eigenvector's sign or phase is LAPACK's)."""
    op = "linalg.eigh"
    if _lapack_plain(A, True) and UPLO in _UPLOS:
        return _out(eigh_result(*_eigh_fast(A, UPLO.upper(), True)), out)
    square_float(op, A)
    UPLO = _uplo(op, UPLO)
    if _plain_no_grad(A):
        return _out(eigh_result(*_eigh_fast(A, UPLO, True)), out)
    L, V = host_op(
        op,
        "LinalgEighBackward0",
        (A,),
        lambda a: _eigh_compute(a, UPLO, True),
        _eigh_rule,
        out_dtypes=(_real_dtype(A._dtype), A._dtype),
        save_inputs=False,
    )
    return _out(eigh_result(L, V), out)


def eigvalsh(A: Tensor, UPLO: str = "L", *, out: Any = None) -> Tensor:
    """The eigenvalues (ascending) of each Hermitian matrix of `A`, as
    torch.linalg.eigvalsh."""
    op = "linalg.eigvalsh"
    square_float(op, A)
    UPLO = _uplo(op, UPLO)
    if _plain_no_grad(A):
        return _out(_eigh_fast(A, UPLO, False)[0], out)
    if _wants_derivative(A):
        L, _ = _host(
            op,
            "LinalgEighBackward0",
            (A,),
            lambda a: _eigh_compute(a, UPLO, True),
            _eigh_rule,
            out_dtypes=(_real_dtype(A._dtype), A._dtype),
            save_inputs=False,
        )
    else:
        L, _ = _host(
            op,
            "LinalgEighBackward0",
            (A,),
            lambda a: _eigh_compute(a, UPLO, False),
            None,
            out_dtypes=(_real_dtype(A._dtype), A._dtype),
        )
    return _out(L, out)


def _eig_compute(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cd = np.result_type(a.dtype, np.complex64)
    if a.shape[-1] == 0:
        return np.zeros(a.shape[:-1], cd), np.zeros(a.shape, cd)
    if not np.all(np.isfinite(a)):
        raise LinAlgError("linalg.eig: the input contains infinite or NaN values")
    w, v = np.linalg.eig(a)
    return w.astype(cd), v.astype(cd)


def _eig_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    gL, gV = grads
    if gL is None and gV is None:
        return [None]
    L, V = ctx.outputs
    return [_eig_common_rule(L, V, gL, gV, False)]


def eig(A: Tensor, *, out: Any = None) -> Any:
    """Eigenvalues and eigenvectors (complex; each of norm 1, as LAPACK geev gives them)
    of each square matrix of `A`, as torch.linalg.eig."""
    op = "linalg.eig"
    square_float(op, A)
    cd = _complex_dtype(A._dtype)
    L, V = _host(
        op,
        "LinalgEigBackward0",
        (A,),
        _eig_compute,
        _eig_rule,
        out_dtypes=(cd, cd),
        save_inputs=False,
    )
    return _out(eig_result(L, V), out)


def eigvals(A: Tensor, *, out: Any = None) -> Tensor:
    """The (complex) eigenvalues of each square matrix of `A`, as torch.linalg.eigvals."""
    op = "linalg.eigvals"
    square_float(op, A)
    cd = _complex_dtype(A._dtype)
    L, _ = _host(
        op,
        "LinalgEigBackward0",
        (A,),
        _eig_compute,
        _eig_rule,
        out_dtypes=(cd, cd),
        save_inputs=False,
    )
    return _out(L, out)


# ======================================================================================
# svd, svdvals
# ======================================================================================


def _svd_plan(A: Any, full: bool, uv: bool, v: bool = False) -> tuple:
    """What `_svd_fast` does for A's layout: (outputs maker, matrix count, m, n, the
    identities' bytes that U and Vh of empty matrices hold (None: nothing to write), the
    ctypes type of a scratch info). With `v` the maker makes V = Vh^T (a view) too."""
    shape = A._shape
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    d = A._dtype
    specs: list[tuple[Any, ...]] = [(batch + (k,), _real_dtype(d), False)]
    fill: tuple[bytes, ...] | None = None
    if uv:
        mu, nv = (m, n) if full else (k, k)
        specs += [(batch + (m, mu), d, False), (batch + (nv, n), d, False)]
        if v:
            specs.append(("mT", 2))
        reps = _count(batch)
        if not (m and n) and reps:  # empty matrices: U and Vh from the identity
            if reps * (m * mu + nv * n) * d.itemsize <= 1 << 16:  # kept as bytes
                fill = (
                    np.broadcast_to(np.eye(m, mu, dtype=d.np), (reps, m, mu)).tobytes(),
                    np.broadcast_to(np.eye(nv, n, dtype=d.np), (reps, nv, n)).tobytes(),
                )
            else:
                fill = ()
    count = _count(shape) // (m * n) if m * n else 0
    return (_outputs_maker(specs), count, m, n, fill, ctypes.c_int * count)


def _svd_fast(A: Any, full: bool, uv: bool, v: bool = False) -> tuple[Any, Any, Any]:
    """(U, S, Vh) by gesdd on a copy of A (U and Vh None without `uv`). A's
    row-major buffer read column-major is A^T = (U S V^H)^T = conj(V) S U^T: gesdd of that
    n x m matrix gives left vectors conj(V), which read row-major are Vh, and right ones
    U^T, which read row-major are U; they are written straight into the outputs. With
    `v` (real dtypes, torch.svd) the third result is V = Vh^T, the transposed view
    `transpose` makes."""
    key = ("svd", A._lkey, full, uv, v)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _svd_plan(A, full, uv, v))
    make, count, m, n, fill, info_type = plan
    V = None
    if v:
        S, U, Vh, V = make()
    elif uv:
        S, U, Vh = make()
    else:
        (S,) = make()
        U = Vh = None
    if not count:
        if fill:
            if fill[0]:
                _memmove(U._ptr, fill[0], len(fill[0]))
            if fill[1]:
                _memmove(Vh._ptr, fill[1], len(fill[1]))
        elif fill is not None:
            if m:
                np.copyto(U._numpy_view(), _eye(m, U._shape[-1], A._dtype.np))
            if n:
                np.copyto(Vh._numpy_view(), _eye(Vh._shape[-2], n, A._dtype.np))
        return (U, S, Vh) if V is None else (U, S, V)
    d = A._dtype
    buf = _host_copy(A)
    info = info_type()
    job = ("A" if full else "S") if uv else "N"
    base = lapack.address(buf)
    lapack.gesdd_at(
        d.np,
        n,
        m,
        count,
        base,
        S._ptr,
        job,
        Vh._ptr if Vh is not None else base,
        U._ptr if U is not None else base,
        _addressof(info),
    )
    bad = bytes(info).strip(b"\0")
    if bad or not np.isfinite(S._numpy_view()).all():
        if not np.isfinite(A._numpy_view()).all():
            raise LinAlgError(
                "linalg.svd: The algorithm failed to converge because the "
                "input matrix contained non-finite values."
            )
        if bad:
            j, code = next((j, c) for j, c in enumerate(info) if c)
            where = f"(Batch element {j}): " if A._shape[:-2] else ""
            raise LinAlgError(
                f"linalg.svd: {where}The algorithm failed to converge because "
                f"the input matrix is ill-conditioned or has too many repeated "
                f"singular values (error code: {code})."
            )
    return (U, S, Vh) if V is None else (U, S, V)


def _svd_compute(a: np.ndarray, full: bool, uv: bool) -> tuple[np.ndarray, ...]:
    U, S, Vh = _svd_fast(from_numpy(a), full, uv)
    if U is None:
        return np.zeros((0,), a.dtype), S._numpy_view(), np.zeros((0,), a.dtype)
    return U._numpy_view(), S._numpy_view(), Vh._numpy_view()


def _svd_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    gU, gS, gVh = grads
    if gU is None and gS is None and gVh is None:
        return [None]
    U, S, Vh = ctx.outputs
    full = ctx.attrs["full"]
    m, n = U._shape[-2], Vh._shape[-1]
    k = S._shape[-1]
    if full:
        # only the first k columns of U and rows of Vh depend on A (the others are any
        # orthonormal basis of the complement): their gradients are ignored, as in torch
        U, Vh = U[..., :, :k], Vh[..., :k, :]
        gU = gU[..., :, :k] if gU is not None else None
        gVh = gVh[..., :k, :] if gVh is not None else None
    Sd = S.to(U._dtype)
    if gU is None and gVh is None:
        return [F.matmul(F.mul(U, F.unsqueeze(gS.to(U._dtype), -2)), Vh)]
    V = mH(Vh)
    gV = mH(gVh) if gVh is not None else None

    def skew(X: Tensor) -> Tensor:
        return F.sub(X, mH(X))

    UhgU = skew(F.matmul(mH(U), gU)) if gU is not None else None
    VhgV = skew(F.matmul(mH(V), gV)) if gV is not None else None
    if U._dtype.is_complex:
        total = UhgU if VhgV is None else (VhgV if UhgU is None else F.add(UhgU, VhgV))
        vals = values(F.imag(diagonal(total)))
        if vals.size and not np.allclose(vals, 0.0, rtol=1e-2, atol=1e-2):
            raise RuntimeError(
                "svd_backward: The singular vectors in the complex case are "
                "specified up to multiplication by e^{i phi}. The specified "
                "loss function depends on this phase term, making it "
                "ill-defined."
            )
    S2 = F.mul(S, S)
    E = F.add(F.sub(F.unsqueeze(S2, -2), F.unsqueeze(S2, -1)), F.eye(k, dtype=S._dtype))
    E = E.to(U._dtype)
    if UhgU is not None and VhgV is not None:
        ret = F.div(F.add(F.mul(UhgU, F.unsqueeze(Sd, -2)), F.mul(F.unsqueeze(Sd, -1), VhgV)), E)
    elif UhgU is not None:
        ret = F.mul(F.div(UhgU, E), F.unsqueeze(Sd, -2))
    else:
        ret = F.mul(F.unsqueeze(Sd, -1), F.div(VhgV, E))
    ret = F.sub(ret, diag_embed(diagonal(ret)))
    if gS is not None:
        ret = F.add(ret, diag_embed(gS.to(U._dtype)))
    if U._dtype.is_complex and UhgU is not None:
        im = F.div(F.imag(diagonal(UhgU)), F.mul(S, 2.0))
        ret = F.add(ret, diag_embed(F.mul(im.to(U._dtype), 1j)))
    gA = F.matmul(U, F.matmul(ret, Vh))
    if m > k and gU is not None:
        gUS = F.div(gU, F.unsqueeze(Sd, -2))
        gA = F.add(gA, F.matmul(F.sub(gUS, F.matmul(U, F.matmul(mH(U), gUS))), Vh))
    if n > k and gV is not None:
        gVS = F.div(gV, F.unsqueeze(Sd, -2))
        gA = F.add(gA, F.matmul(U, mH(F.sub(gVS, F.matmul(V, F.matmul(mH(V), gVS))))))
    return [gA]


def svd(
    A: Tensor, full_matrices: bool = True, *, driver: str | None = None, out: Any = None
) -> Any:
    """The singular value decomposition A = U diag(S) Vh of each matrix of `A` (S
    descending), as torch.linalg.svd (LAPACK gesdd; the singular vectors' signs or phases
    are LAPACK's). `driver` is accepted for compatibility (CUDA-only in torch)."""
    op = "linalg.svd"
    if driver is None and _lapack_plain(A, False):
        return _out(svd_result(*_svd_fast(A, full_matrices, True)), out)
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported "
            "on CUDA inputs with cuSOLVER backend."
        )
    if _plain_no_grad(A):
        return _out(svd_result(*_svd_fast(A, full_matrices, True)), out)
    rd = _real_dtype(A._dtype)
    U, S, Vh = host_op(
        op,
        "LinalgSvdBackward0",
        (A,),
        lambda a: _svd_compute(a, full_matrices, True),
        _svd_rule,
        out_dtypes=(A._dtype, rd, A._dtype),
        save_inputs=False,
        attrs={"full": full_matrices},
    )
    return _out(svd_result(U, S, Vh), out)


def svdvals(A: Tensor, *, driver: str | None = None, out: Any = None) -> Tensor:
    """The singular values (descending) of each matrix of `A`, as torch.linalg.svdvals."""
    op = "linalg.svdvals"
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if _plain_no_grad(A):
        return _out(_svd_fast(A, False, False)[1], out)
    rd = _real_dtype(A._dtype)
    uv = _wants_derivative(A)
    _, S, _ = _host(
        op,
        "LinalgSvdBackward0",
        (A,),
        lambda a: _svd_compute(a, False, uv),
        _svd_rule if uv else None,
        out_dtypes=(A._dtype, rd, A._dtype),
        save_inputs=False,
        attrs={"full": False},
    )
    return _out(S, out)


# ======================================================================================
# pinv, lstsq
# ======================================================================================

_EPS = {
    dt.float32: float(np.finfo(np.float32).eps),
    dt.float64: float(np.finfo(np.float64).eps),
    dt.float16: float(np.finfo(np.float16).eps),
    dt.bfloat16: 2.0**-7,
}


def _tolerances(op: str, A: Tensor, atol: Any, rtol: Any) -> tuple[np.ndarray, np.ndarray]:
    """atol and rtol as arrays broadcastable to the batch (torch's defaults: rtol =
    eps * max(m, n) when neither is given or atol is zero, else 0)."""

    def value(x: Any) -> np.ndarray | None:
        if x is None:
            return None
        if isinstance(x, Tensor):
            if x._dtype.is_complex:
                raise RuntimeError(f"{op}: atol and rtol tensors must not be complex")
            if x.__class__ is Tensor and not x._shape:
                return np.asarray(float(x.item()))
            return np.asarray(x.detach()._numpy_view(), np.float64)
        return np.asarray(float(x))

    a, r = value(atol), value(rtol)
    eps = _EPS[_real_dtype(A._dtype)]
    if r is None:
        if a is None or np.all(a <= 0):
            r = np.asarray(eps * max(A._shape[-2], A._shape[-1]))
        else:
            r = np.asarray(0.0)
    if a is None:
        a = np.asarray(0.0)
    return a, r


def _pinv_compute(
    x: np.ndarray, atol: np.ndarray, rtol: np.ndarray, hermitian: bool
) -> tuple[np.ndarray]:
    m, n = x.shape[-2:]
    if x.size == 0:
        return (np.zeros(x.shape[:-2] + (n, m), x.dtype),)
    X = from_numpy(x)
    if hermitian:
        Wt, Vt = _eigh_fast(X, "L", True)
        w, v = Wt._numpy_view(), Vt._numpy_view()
        mag = np.abs(w)
        smax = mag.max(-1, keepdims=True)
        thresh = np.maximum(
            atol[..., None] if atol.ndim else atol, (rtol[..., None] if rtol.ndim else rtol) * smax
        )
        winv = np.where(mag > thresh, 1.0 / np.where(w == 0, 1, w), 0.0)
        p = (v * winv[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
        return (p.astype(x.dtype),)
    Ut, St, Vht = _svd_fast(X, False, True)
    u, s, vh = Ut._numpy_view(), St._numpy_view(), Vht._numpy_view()
    smax = s[..., :1]
    thresh = np.maximum(
        atol[..., None] if atol.ndim else atol, (rtol[..., None] if rtol.ndim else rtol) * smax
    )
    sinv = np.where(s > thresh, 1.0 / np.where(s == 0, 1, s), 0.0)
    p = (np.conj(np.swapaxes(vh, -1, -2)) * sinv[..., None, :]) @ np.conj(np.swapaxes(u, -1, -2))
    return (p.astype(x.dtype),)


def _pinv_grad(A: Tensor, P: Tensor, gP: Tensor) -> Tensor:
    """The gradient of P = pinv(A) (constant rank):
    -P^H gP P^H + (I - A P) gP^H P P^H + P^H P gP^H (I - P A)."""
    Ph = mH(P)
    gPh = mH(gP)
    t1 = F.neg(F.matmul(Ph, F.matmul(gP, Ph)))
    AP = F.matmul(A, P)
    PA = F.matmul(P, A)
    Im = F.eye(A._shape[-2], dtype=A._dtype)
    In = F.eye(A._shape[-1], dtype=A._dtype)
    t2 = F.matmul(F.sub(Im, AP), F.matmul(gPh, F.matmul(P, Ph)))
    t3 = F.matmul(F.matmul(Ph, P), F.matmul(gPh, F.sub(In, PA)))
    return F.add(F.add(t1, t2), t3)


def _pinv_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None]
    (A,) = ctx.inputs
    (P,) = ctx.outputs
    return [_pinv_grad(A, P, g)]


def pinv(
    A: Tensor,
    rcond: Any = None,
    hermitian: bool = False,
    *,
    atol: Any = None,
    rtol: Any = None,
    out: Any = None,
) -> Tensor:
    """The Moore-Penrose pseudo-inverse of each matrix of `A` (singular values at or below
    max(atol, rtol * largest) are treated as zero), as torch.linalg.pinv; `rcond` (also
    PyTorch's older positional form `pinv(A, rcond, hermitian)`) is the older name of
    rtol."""
    op = "linalg.pinv"
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if rcond is not None:
        if rtol is not None:
            raise RuntimeError(f"{op}: rcond and rtol cannot both be given")
        rtol = rcond
    if hermitian:
        check_square(op, A)
    a, r = _tolerances(op, A, atol, rtol)
    if _plain_no_grad(A):
        if not _count(A._shape):
            P = Tensor._empty(A._shape[:-2] + (A._shape[-1], A._shape[-2]), A._dtype)
            _zero(P)
            return _out(P, out)
        with np.errstate(all="ignore"):
            (p,) = _pinv_compute(A._numpy_view(), a, r, hermitian)
        return _out(from_numpy(p, A._dtype), out)
    (P,) = host_op(
        op,
        "LinalgPinvBackward0",
        (A,),
        lambda x: _pinv_compute(x, a, r, hermitian),
        _pinv_rule,
        out_dtypes=(A._dtype,),
    )
    return _out(P, out)


def _lstsq_compute(
    a: np.ndarray, b: np.ndarray, rcond: float | None, driver: str
) -> tuple[np.ndarray, ...]:
    m, n = a.shape[-2:]
    k = b.shape[-1]
    batch = a.shape[:-2]
    rd = a.real.dtype
    sol = np.zeros(batch + (n, k), a.dtype)
    ranks = np.zeros(batch, np.int64)
    svals = np.zeros(batch + (min(m, n),), rd)
    count = _count(batch)
    if count and m and n and k:
        # column-major A (destroyed) and B padded to max(m, n) rows (X in the first n)
        fa = lapack.fortran_batch(a)
        fb = np.zeros(batch + (k, max(m, n)), a.dtype)
        np.copyto(fb[..., :m], np.swapaxes(b, -1, -2))
        rank32 = np.zeros(batch, np.int32)
        info = np.zeros(batch, np.int32)
        lapack.lstsq_at(
            np.dtype(a.dtype),
            driver,
            m,
            n,
            k,
            count,
            lapack.address(fa),
            lapack.address(fb),
            lapack.address(svals),
            lapack.address(rank32),
            -1.0 if rcond is None else float(rcond),
            lapack.address(info),
        )
        if driver != "gels" and info.any():
            j = int(np.flatnonzero(info.reshape(-1))[0])
            where = f"(Batch element {j}): " if batch else ""
            raise LinAlgError(
                f"linalg.lstsq: {where}The algorithm failed to converge because "
                f"the input matrix is ill-conditioned or has too many repeated "
                f"singular values (error code: {int(info.reshape(-1)[j])})."
            )
        np.copyto(sol, np.swapaxes(fb[..., :n], -1, -2))
        ranks[...] = min(m, n) if driver == "gels" else rank32
        full = bool((ranks == min(m, n)).all())
    else:
        full = not count or min(m, n) == 0
    if m > n and driver != "gelsy" and full:
        with np.errstate(all="ignore"):
            r = np.einsum("...ij,...jk->...ik", a, sol) - b
            residuals = np.sum(np.abs(r) ** 2, axis=-2).astype(rd)
    else:
        residuals = np.zeros((0,), rd)
    rank_out = ranks if driver != "gels" else np.zeros((0,), np.int64)
    sv_out = svals if driver in ("gelsd", "gelss") else np.zeros((0,), rd)
    return sol, residuals, rank_out, sv_out


def _lstsq_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None, None]
    A, B = ctx.inputs
    P = pinv(A)
    gB = F.matmul(mH(P), g) if ctx.needs[1] else None
    # X = pinv(A) B: the pinv rule applied to gP = g B^H
    gA = _pinv_grad(A, P, F.matmul(g, mH(B))) if ctx.needs[0] else None
    return [gA, gB]


def lstsq(A: Tensor, b: Tensor, rcond: float | None = None, *, driver: str | None = None) -> Any:
    """The least-squares solution of A X = b for each (batch of) matrix, with the
    residuals, rank and singular values LAPACK's driver computes, as torch.linalg.lstsq
    (drivers 'gelsy' (default), 'gelsd', 'gelss', 'gels'). The gradient flows through
    the solution, as pinv(A) @ b, and through the residuals (sum |A X - b|^2 over the
    rows), which require grad as PyTorch's do."""
    op = "linalg.lstsq"
    B = b
    check_tensor(op, A)
    check_tensor(op, B, "B")
    check_matrix(op, A)
    check_float(op, A)
    same_dtype(op, A, B)
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = B.ndim == A.ndim - 1
    Bm = F.unsqueeze(B, -1) if vector else B
    if Bm.ndim < 2 or Bm._shape[-2] != A._shape[-2]:
        raise RuntimeError(
            f"{op}: input.size(-2) should match other.size(-2) (A "
            f"{list(A._shape)}, B {list(B._shape)})"
        )
    A2, B2 = _broadcast_batch(op, A, Bm)
    if rcond is None:
        rcond = float(np.finfo(_real_dtype(A._dtype).np).eps * max(A._shape[-2], A._shape[-1]))
    rd = _real_dtype(A._dtype)
    X, res, rank, sv = _host(
        op,
        "LinalgLstsqBackward0",
        (A2, B2),
        lambda a, b: _lstsq_compute(a, b, rcond, driver),
        _lstsq_rule,
        out_dtypes=(A._dtype, rd, dt.int64, rd),
        differentiable=(True, False, False, False),
        save_outputs=False,
    )
    if X._requires_grad:
        # the residuals' gradient: LAPACK's values, the derivative of sum |A X - B|^2
        if res.numel():
            diff = F.sub(F.matmul(A2, X), B2)
            sq = F.real(F.mul(diff, F.conj(diff))) if diff._dtype.is_complex else F.mul(diff, diff)
            fit = F.sum(sq, -2)
            res = F.add(F.sub(fit, fit.detach()), res)
        else:
            res = F.add(res, F.mul(F.sum(F.real(X) if X._dtype.is_complex else X), 0))
    if vector:
        X = F.squeeze(X, -1)
    return lstsq_result(X, res, rank, sv)


# ======================================================================================
# matrix_exp
# ======================================================================================


def _expm_compute(a: np.ndarray) -> tuple[np.ndarray]:
    import scipy.linalg

    if a.size == 0:
        return (np.zeros(a.shape, a.dtype),)
    return (np.asarray(scipy.linalg.expm(a)).astype(a.dtype),)


def _expm_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None]
    (A,) = ctx.inputs
    n = A._shape[-1]
    Ah = mH(A)
    zero = F.zeros(A._shape, dtype=A._dtype)
    M = F.cat([F.cat([Ah, g], -1), F.cat([zero, Ah], -1)], -2)
    return [matrix_exp(M)[..., :n, n:]]


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of each square matrix of `A` (SciPy's scaling and squaring
    Pade approximant), as torch.linalg.matrix_exp; the gradient is the exponential of
    the block matrix [[A^H, G], [0, A^H]] (its upper right block)."""
    op = "linalg.matrix_exp"
    check_tensor(op, A)
    check_square(op, A)
    check_float(op, A)
    (E,) = host_op(
        op,
        "LinalgMatrixExpBackward0",
        (A,),
        _expm_compute,
        _expm_rule,
        out_dtypes=(A._dtype,),
        save_outputs=False,
    )
    return E


# ======================================================================================
# LU
# ======================================================================================


def _getrf_plan(A: Any, unpacked: bool) -> tuple:
    """What the short ways of getrf do for A's layout: (outputs maker, matrix count, the
    getrf loop, a pool of scratch sets, a function making one; the gather indices of L
    and U; P's byte layout). The outputs are (LU, pivots, info), or with `unpacked` (P,
    L, U) (linalg.lu). A scratch set holds the column-major copy getrf works in: with
    `unpacked` a flat array ending in a 0 and a 1 (what the gathers of L and U read
    outside the factors), the pivots and the infos in scratch too."""
    shape = A._shape
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    d = A._dtype
    count = _count(shape) // (m * n) if m * n else 0
    perm = None
    if unpacked:
        Ps, Ls, Us = _lu_shapes(shape)
        make = _outputs_maker([(Ps, d, False), (Ls, d, False), (Us, d, False)])
        perm = (
            _count(Ps) // (m * m) if m else 0,
            k,
            m,
            d.itemsize,
            np.ones(1, d.np).tobytes(),
            _count(Ps) * d.itemsize,
        )
    else:
        make = _outputs_maker(
            [(shape, d, False), (batch + (k,), dt.int32, False), (batch, dt.int32, not count)]
        )
    if not count:  # (then k = 0 or no batch: P holds identities, or nothing)
        return (make, 0, None, None, None, None, perm)
    run = lapack.getrf_caller(d.np, m, n, count)
    fshape = batch + (n, m)
    size = count * m * n

    window = _stage_window(A)

    def scratch() -> tuple:
        """(column-major factors (batch, n, m), their address, their row-major view
        (batch, m, n), the flat array, pivots, their address, infos, their address, A's
        staging)."""
        flat = np.empty(size + 2, d.np)
        flat[size:] = (0, 1)
        f = flat[:size].reshape(fshape)
        piv = (ctypes.c_int * (count * k))()
        info = (ctypes.c_int * count)()
        return (
            f,
            lapack.address(flat),
            f.swapaxes(-1, -2),
            flat,
            piv,
            _addressof(piv),
            info,
            _addressof(info),
            _stage(A, window),
        )

    gather = None
    if unpacked and size <= _INDEX_MAX:
        gather = _lu_gather(count, m, n, True, size)
    return (make, count, run, _pool(size * d.itemsize), scratch, gather, perm)


def _lu_gather(count: int, m: int, n: int, fortran: bool, size: int) -> tuple[np.ndarray, ...]:
    """Flat gather indices of L (unit lower m x k) and U (upper k x n), k = min(m, n), of
    `count` packed factors whose element (i, j) lies at b * m * n + i + j * m (column-
    major: `fortran`) or b * m * n + i * n + j (row-major): indices `size` and `size + 1`
    read a 0 and a 1 placed after the factors."""
    k = min(m, n)
    base = (np.arange(count) * (m * n))[:, None, None]
    si, sj = (1, m) if fortran else (n, 1)
    i = np.arange(m)[:, None]
    j = np.arange(k)[None, :]
    L = np.where(i > j, base + i * si + j * sj, np.where(i == j, size + 1, size))
    i = np.arange(k)[:, None]
    j = np.arange(n)[None, :]
    U = np.where(i <= j, base + i * si + j * sj, size)
    return L.astype(np.intp).reshape(-1), U.astype(np.intp).reshape(-1)


def _getrf_fast(A: Any) -> tuple[Any, Any, Any]:
    """(LU, pivots, info) of A's matrices (getrf in a column-major scratch copy; pivots
    and info written straight into the new tensors)."""
    key = ("getrf", A._lkey)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _getrf_plan(A, False))
    make, count, run, pool, scratch = plan[:5]
    LU, piv, info = make()
    if not count:
        return LU, piv, info
    try:
        s = pool.pop()
    except IndexError:
        s = scratch()
    _transposed_in(s[0], A, s[8])
    run(s[1], piv._ptr, info._ptr)
    LU._numpy_view()[...] = s[2]
    pool.append(s)
    return LU, piv, info


_lu_factor_fast = _getrf_fast


def _getrf_compute(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    LU, piv, info = _getrf_fast(from_numpy(a))
    return LU._numpy_view(), piv._numpy_view(), info._numpy_view()


def _perm_list(piv: list[int], count: int, k: int, m: int) -> list[int]:
    """Flat positions of the ones of the permutation matrices P (A = P L U) of LAPACK's
    1-based row interchanges `piv` (count x k, row by row, each in 1..m): the rows of
    the identity swapped in order, entry (perm[r], r) of each m x m matrix."""
    ones = []
    rows = range(m)
    mm = m * m
    for c in range(count):
        perm = list(rows)
        at = c * k
        for i in range(k):
            j = piv[at + i] - 1
            perm[i], perm[j] = perm[j], perm[i]
        base = c * mm
        ones += [base + perm[r] * m + r for r in rows]
    return ones


def _perm_into(P: Any, piv: Any, plan: tuple) -> None:
    """The permutation matrices of pivots `piv` (count x k, each in 1..m: a flat list,
    or an int32 array of many) into the new contiguous P: a few matrices' bytes built at
    once in Python (zeros, and the dtype's 1 at each position `_perm_list` gives), many
    by `_perm_from_pivots`. `plan`: (count, k, m, itemsize, bytes of a 1, P's bytes)."""
    count, k, m, size, one, nbytes = plan
    if count * max(k, m) > _PERM_SMALL:
        pa = np.asarray(piv, np.int32).reshape(count, k)
        _perm_from_pivots(pa, m, P._dtype.np, out=P._numpy_view().reshape(count, m, m))
        return
    out = bytearray(nbytes)
    for pos in _perm_list(piv, count, k, m):
        at = pos * size
        out[at : at + size] = one
    (ctypes.c_char * nbytes).from_address(P._ptr).raw = bytes(out)


_PERM_SMALL = 4096  # pivots (count x k) up to which P is built in Python


def _perm_from_pivots(
    piv: np.ndarray, m: int, dtype: Any = np.float64, out: np.ndarray | None = None
) -> np.ndarray:
    """The permutation matrices P (A = P L U) of LAPACK's 1-based row interchanges
    (written into `out`, a new array of the batch's (m, m) matrices, when given). The
    interchanges are applied in order to every batch element at once (a few of them: in
    Python, `_perm_list`)."""
    batch = piv.shape[:-1]
    k = piv.shape[-1]
    P = np.zeros(batch + (m, m), dtype) if out is None else out
    if out is not None:
        P.fill(0)
    count = P.size // (m * m) if m else 0
    if not count:
        return P
    if count * k <= _PERM_SMALL and P.flags.c_contiguous:
        flat = P.reshape(-1)
        flat[_perm_list(piv.reshape(-1).tolist(), count, k, m)] = 1
        return P
    swaps = piv.reshape(count, k).astype(np.intp) - 1
    rows = np.arange(count)
    perm = np.empty((count, m), np.intp)
    perm[...] = np.arange(m)
    for i in range(k):
        j = swaps[:, i]
        pi = perm[:, i].copy()
        perm[:, i] = perm[rows, j]
        perm[rows, j] = pi
    P.reshape(count, m, m)[rows[:, None], perm, np.arange(m)] = 1
    return P


def _check_lu_pivots(piv: np.ndarray | list[int], m: int) -> None:
    """torch's check of lu_unpack's pivots: each in 1..m (the rows they name)."""
    if isinstance(piv, list):
        bad = bool(piv) and (min(piv) < 1 or max(piv) > m)
    else:
        bad = bool(piv.size) and bool(piv.min() < 1 or piv.max() > m)
    if bad:
        raise RuntimeError(
            "pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive."
            "Did you properly pass the result of lu_factor?"
        )


_eyes: dict[tuple[int, int, Any], np.ndarray] = {}


def _eye(m: int, k: int, dtype: Any) -> np.ndarray:
    """np.eye(m, k, dtype=dtype), cached (read-only)."""
    key = (m, k, np.dtype(dtype))
    e = _eyes.get(key)
    if e is None:
        e = np.eye(m, k, dtype=dtype)
        e.flags.writeable = False
        if len(_eyes) < 256:
            _eyes[key] = e
    return e


def _unpack_into(lu: np.ndarray, L: np.ndarray, U: np.ndarray) -> None:
    """L (unit lower m x k) and U (upper k x n) of packed LU factors `lu` (row-major
    view), into new arrays, by masked copies (for batches too big for gather indices)."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    L[...] = lu[..., :, :k]
    np.copyto(L, 0, where=_above((m, k), -1))
    L += _eye(m, k, L.dtype)
    U[...] = lu[..., :k, :]
    np.copyto(U, 0, where=_above((k, n), -1, below=True))


def _lu_unpack_factors(LU: Tensor) -> tuple[Tensor, Tensor]:
    m, n = LU._shape[-2:]
    k = min(m, n)
    L = F.add(F.tril(LU, -1)[..., :, :k], F.eye(m, k, dtype=LU._dtype))
    U = F.triu(LU)[..., :k, :]
    return L, U


def _lu_square_grad(L: Tensor, U: Tensor, gL: Tensor | None, gU: Tensor | None) -> Tensor:
    """L^{-H} [tril(L^H gL, -1) + triu(gU U^H)] U^{-H} (without P)."""
    phi = None
    if gL is not None:
        phi = F.tril(F.matmul(mH(L), gL), -1)
    if gU is not None:
        t = F.triu(F.matmul(gU, mH(U)))
        phi = t if phi is None else F.add(phi, t)
    X = solve_triangular(mH(L), phi, upper=True, unitriangular=True)
    return solve_triangular(mH(U), X, upper=False, left=False)


def _lu_grad(P: Tensor, L: Tensor, U: Tensor, gL: Tensor | None, gU: Tensor | None) -> Tensor:
    """The gradient of A = P L U (L m x k unit lower, U k x n upper)."""
    m, k = L._shape[-2:]
    n = U._shape[-1]
    if m == n:
        core = _lu_square_grad(L, U, gL, gU)
        return F.matmul(P, core)
    if m < n:
        U1, U2 = U[..., :, :m], U[..., :, m:]
        gU1 = gU[..., :, :m] if gU is not None else None
        gU2 = gU[..., :, m:] if gU is not None else None
        gL2 = gL
        if gU2 is not None:
            extra = F.neg(
                F.matmul(solve_triangular(mH(L), gU2, upper=True, unitriangular=True), mH(U2))
            )
            gL2 = extra if gL2 is None else F.add(gL2, extra)
        gA1 = _lu_square_grad(L, U1, gL2, gU1)
        gA2 = (
            solve_triangular(mH(L), gU2, upper=True, unitriangular=True)
            if gU2 is not None
            else F.zeros(U2._shape, dtype=U._dtype)
        )
        return F.matmul(P, F.cat([gA1, gA2], -1))
    L1, L2 = L[..., :n, :], L[..., n:, :]
    gL1 = gL[..., :n, :] if gL is not None else None
    gL2 = gL[..., n:, :] if gL is not None else None
    gU2 = gU
    if gL2 is not None:
        # L2 = (P^T A)_2 U^{-1}: U gets -L2^H gL2 U^{-H}
        extra = F.neg(F.matmul(mH(L2), solve_triangular(mH(U), gL2, upper=False, left=False)))
        gU2 = extra if gU2 is None else F.add(gU2, extra)
    gA1 = _lu_square_grad(L1, U, gL1, gU2)
    gA2 = (
        solve_triangular(mH(U), gL2, upper=False, left=False)
        if gL2 is not None
        else F.zeros(L2._shape, dtype=L._dtype)
    )
    return F.matmul(P, F.cat([gA1, gA2], -2))


def _lu_factor_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    g = grads[0]
    if g is None:
        return [None]
    LU, piv = ctx.outputs[0], ctx.outputs[1]
    m, n = LU._shape[-2:]
    k = min(m, n)
    L, U = _lu_unpack_factors(LU)
    P = from_numpy(_perm_from_pivots(values(piv), m), LU._dtype)
    gL = F.tril(g, -1)[..., :, :k]
    gU = F.triu(g)[..., :k, :]
    return [_lu_grad(P, L, U, gL, gU)]


def lu_factor_ex(
    A: Tensor, *, pivot: bool = True, check_errors: bool = False, out: Any = None
) -> Any:
    """The packed LU factorization with partial pivoting of each matrix of `A` (LU,
    1-based int32 pivots, LAPACK's info: the first zero pivot), as
    torch.linalg.lu_factor_ex."""
    op = "linalg.lu_factor_ex"
    if pivot and _lapack_plain(A, False):
        LU, piv, info = _lu_factor_fast(A)
        if check_errors:
            _check_errors("linalg.lu_factor", info, "lu")
        return _out(lu_factor_ex_result(LU, piv, info), out)
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if not pivot:
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU")
    if _plain_no_grad(A):
        LU, piv, info = _lu_factor_fast(A)
        if check_errors:
            _check_errors("linalg.lu_factor", info, "lu")
        return _out(lu_factor_ex_result(LU, piv, info), out)
    LU, piv, info = _host(
        op,
        "LinalgLuFactorExBackward0",
        (A,),
        _getrf_compute,
        _lu_factor_rule,
        out_dtypes=(A._dtype, dt.int32, dt.int32),
        save_inputs=False,
        save_outputs=(True, True, False),
    )
    if check_errors:
        _check_errors("linalg.lu_factor", info, "lu")
    return _out(lu_factor_ex_result(LU, piv, info), out)


def lu_factor(A: Tensor, *, pivot: bool = True, out: Any = None) -> Any:
    """The packed LU factorization of each matrix of `A` and its 1-based pivots, as
    torch.linalg.lu_factor (raises LinAlgError for a singular matrix, as torch)."""
    if pivot and _lapack_plain(A, False):
        LU, piv, info = _lu_factor_fast(A)
    else:
        LU, piv, info = lu_factor_ex(A, pivot=pivot)
    _check_errors("torch.linalg.lu_factor", info, "lu")
    return _out(lu_factor_result(LU, piv), out)


def _lu_shapes(shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    m, n = shape[-2:]
    k = min(m, n)
    b = shape[:-2]
    return b + (m, m), b + (m, k), b + (k, n)


def _lu_compute(a: np.ndarray) -> tuple[np.ndarray, ...]:
    P, L, U = _lu_fast(from_numpy(a))
    return P._numpy_view(), L._numpy_view(), U._numpy_view()


def _lu_fast(A: Any) -> tuple[Any, Any, Any]:
    """(P, L, U) of A's matrices: getrf in a column-major scratch copy followed by a 0
    and a 1, from which one gather each makes L and U; P from the pivots in Python."""
    key = ("lu", A._lkey)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _getrf_plan(A, True))
    make, count, run, pool, scratch, gather, perm = plan
    P, L, U = make()
    if not count:
        if perm[0]:
            _perm_into(P, [], perm)
        return P, L, U
    try:
        s = pool.pop()
    except IndexError:
        s = scratch()
    _transposed_in(s[0], A, s[8])
    run(s[1], s[5], s[7])
    if gather is not None:
        take = s[3].take
        take(gather[0], out=np.ndarray(gather[0].shape, s[3].dtype, L._storage.buffer), mode="clip")
        take(gather[1], out=np.ndarray(gather[1].shape, s[3].dtype, U._storage.buffer), mode="clip")
    else:  # (too many elements to keep gather indices)
        _unpack_into(s[2], L._numpy_view(), U._numpy_view())
    piv = s[4]
    _perm_into(P, list(piv) if len(piv) <= _PERM_SMALL else np.frombuffer(piv, np.int32), perm)
    pool.append(s)
    return P, L, U


def _lu_rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
    _, gL, gU = grads
    if gL is None and gU is None:
        return [None]
    P, L, U = ctx.outputs
    if gL is not None:
        gL = F.tril(gL, -1)
    if gU is not None:
        gU = F.triu(gU)
    return [_lu_grad(P, L, U, gL, gU)]


def lu(A: Tensor, *, pivot: bool = True, out: Any = None) -> Any:
    """The LU decomposition A = P L U with partial pivoting (P a permutation matrix, L
    unit lower m x k, U upper k x n), as torch.linalg.lu."""
    op = "linalg.lu"
    if pivot and _lapack_plain(A, False):
        return _out(lu_result(*_lu_fast(A)), out)
    check_tensor(op, A)
    check_matrix(op, A)
    check_float(op, A)
    if not pivot:
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU")
    if _plain_no_grad(A):
        return _out(lu_result(*_lu_fast(A)), out)
    P, L, U = _host(
        op,
        "LinalgLuBackward0",
        (A,),
        _lu_compute,
        _lu_rule,
        out_dtypes=(A._dtype, A._dtype, A._dtype),
        differentiable=(False, True, True),
        save_inputs=False,
    )
    return _out(lu_result(P, L, U), out)


_LAPACK_DTYPES = (dt.float32, dt.float64, dt.complex64, dt.complex128)


def _lu_unpack_plan(LU: Any, piv: Any, unpack_data: bool, unpack_pivots: bool) -> tuple:
    """What `_lu_unpack_fast` does for the operands' layouts: (outputs maker, whether LU
    is row-major, the matrices' bytes, a pool of scratch sets, a function making one,
    the gather indices of L and U, P's byte layout, the number of pivots, whether they
    are row-major). A scratch set is a flat copy of the factors followed by a 0 and a 1,
    and its address."""
    Ps, Ls, Us = _lu_shapes(LU._shape)
    d = LU._dtype
    m, n = LU._shape[-2:]
    k = min(m, n)
    size = _count(LU._shape)
    specs = [(Ps, d, False) if unpack_pivots else ((0,), d, False)]
    if unpack_data:
        specs += [(Ls, d, False), (Us, d, False)]
    else:
        specs += [((0,), d, False), ((0,), d, False)]
    make = _outputs_maker(specs)
    gather = None
    if unpack_data and size and size <= _INDEX_MAX:
        gather = _lu_gather(size // (m * n), m, n, False, size)

    def scratch() -> tuple:
        """A new scratch set of this plan (see the plan's docstring)."""
        flat = np.empty(size + 2, d.np)
        flat[size:] = (0, 1)
        return flat, lapack.address(flat), flat[:size].reshape(LU._shape)

    count = _count(Ps) // (m * m) if m else 0
    perm = (count, k, m, d.itemsize, np.ones(1, d.np).tobytes(), _count(Ps) * d.itemsize)
    as_is = LU._strides == _row_major_strides(LU._shape)
    piv_as_is = piv._strides == _row_major_strides(piv._shape)
    return (
        make,
        as_is,
        size * d.itemsize,
        [],
        scratch,
        gather,
        perm,
        count * k,
        piv_as_is,
    )


def _lu_unpack_fast(LU: Any, piv: Any, unpack_data: bool, unpack_pivots: bool) -> Any:
    """lu_unpack of plain tensors that need no gradient, pivots of LU's batch and min(m,
    n) each (None for others: the general path takes them): L and U one gather each
    from a flat copy of LU followed by a 0 and a 1, P from the pivots in Python (checked
    as torch checks them)."""
    m, n = LU._shape[-2:]
    if piv._shape != LU._shape[:-2] + (min(m, n),) or LU._dtype not in _LAPACK_SET:
        return None
    key = ("lu_unpack", LU._lkey, piv._lkey, unpack_data, unpack_pivots)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _lu_unpack_plan(LU, piv, unpack_data, unpack_pivots))
    make, as_is, nbytes, pool, scratch, gather, perm, npiv, piv_as_is = plan
    if unpack_pivots:
        if npiv > _PERM_SMALL:  # many: checked and used as an array
            pl = np.array(piv._numpy_view(), np.int32).reshape(-1)
        elif piv_as_is:
            pl = list((ctypes.c_int * npiv).from_address(piv._ptr)) if npiv else []
        else:
            pl = piv._numpy_view().reshape(-1).tolist()
        if len(pl):
            _check_lu_pivots(pl, perm[2])
    P, L, U = make()
    if gather is not None:
        try:
            s = pool.pop()
        except IndexError:
            s = scratch()
        if as_is:
            _memmove(s[1], LU._ptr, nbytes)
        else:
            s[2][...] = LU._numpy_view()
        take = s[0].take
        take(gather[0], out=np.ndarray(gather[0].shape, s[0].dtype, L._storage.buffer), mode="clip")
        take(gather[1], out=np.ndarray(gather[1].shape, s[0].dtype, U._storage.buffer), mode="clip")
        pool.append(s)
    elif unpack_data and nbytes:  # (too many elements to keep gather indices)
        _unpack_into(LU._numpy_view(), L._numpy_view(), U._numpy_view())
    if unpack_pivots and perm[0]:
        _perm_into(P, pl, perm)
    return lu_result(P, L, U)


def lu_unpack(
    LU_data: Tensor,
    LU_pivots: Tensor,
    unpack_data: bool = True,
    unpack_pivots: bool = True,
    *,
    out: Any = None,
) -> Any:
    """(P, L, U) from a packed LU factorization and its pivots, as torch.lu_unpack
    (L and U are differentiable functions of LU_data)."""
    op = "lu_unpack"
    check_tensor(op, LU_data, "LU_data")
    check_matrix(op, LU_data, "LU_data")
    if LU_pivots._dtype is not dt.int32:
        raise RuntimeError(
            f"{op}: LU_pivots is expected to be a contiguous tensor of "
            f"torch.int32 dtype. Note: this function is intended to be used "
            f"with the output produced by torch.linalg.lu_factor"
        )
    m, n = LU_data._shape[-2:]
    if _plain_no_grad(LU_data, LU_pivots):
        r = _lu_unpack_fast(LU_data, LU_pivots, unpack_data, unpack_pivots)
        if r is not None:
            return _out(r, out)
    if unpack_pivots:
        pivots = values(LU_pivots)
        _check_lu_pivots(pivots, m)
    if unpack_data:
        L, U = _lu_unpack_factors(LU_data)
    else:
        L = F.zeros((0,), dtype=LU_data._dtype)
        U = F.zeros((0,), dtype=LU_data._dtype)
    if unpack_pivots:
        P = from_numpy(_perm_from_pivots(pivots, m), LU_data._dtype)
    else:
        P = F.zeros((0,), dtype=LU_data._dtype)
    return _out(lu_result(P, L, U), out)


def _lu_solve_fast(LU: Tensor, pivots: Tensor, B: Tensor, adjoint: bool) -> Tensor | None:
    """A X = B (A^H X = B) from the packed LU by LAPACK getrs, for plain tensors that need
    no gradient; None where the general path must run (pivots of another dtype or batch
    shape, or out of range: the general path reports those)."""
    n = LU._shape[-1]
    k = B._shape[-1]
    if pivots._dtype is not dt.int32 or pivots._shape != LU._shape[:-1]:
        return None
    batch = LU._shape[:-2]
    if B._shape[:-2] != batch:
        try:
            batch = tuple(np.broadcast_shapes(batch, B._shape[:-2]))
        except ValueError:
            return None
    out = Tensor._empty(batch + (n, k), B._dtype)
    if n == 0 or k == 0 or 0 in batch:
        return out  # no elements
    p = pivots._numpy_view()
    if p.min() < 1 or p.max() > n:
        return None
    lu_ = lapack.fortran_batch(np.broadcast_to(LU._numpy_view(), batch + (n, n)))
    piv = np.ascontiguousarray(np.broadcast_to(p, batch + (n,)))
    fb = lapack.fortran_batch(np.broadcast_to(B._numpy_view(), batch + (n, k)))
    trans = ("C" if LU._dtype.is_complex else "T") if adjoint else "N"
    lapack.getrs(lu_, piv, fb, trans)
    np.copyto(out._numpy_view(), lapack.from_fortran(fb))
    return out


def lu_solve(
    LU: Tensor,
    pivots: Tensor,
    B: Tensor,
    *,
    left: bool = True,
    adjoint: bool = False,
    out: Any = None,
) -> Tensor:
    """The solution of A X = B (X A = B with left=False; A^H with adjoint=True) given
    A's packed LU factorization, as torch.linalg.lu_solve; made of triangular solves, so
    it is differentiable in LU and B."""
    op = "linalg.lu_solve"
    check_tensor(op, LU, "LU")
    check_tensor(op, B, "B")
    check_square(op, LU, "LU")
    check_float(op, LU)
    same_dtype(op, LU, B, "LU", "B")
    n = LU._shape[-1]
    if (B._shape[-2] if left else B._shape[-1]) != n:
        raise RuntimeError(
            f"{op}: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
            f"{B._shape[-2]}x{B._shape[-1]})"
        )
    if left and _plain_no_grad(LU, pivots, B):
        X = _lu_solve_fast(LU, pivots, B, adjoint)
        if X is not None:
            return _out(X, out)
    P, L, U = lu_unpack(LU, pivots)
    if left and not adjoint:
        Y = F.matmul(mT(P), B)
        Y = solve_triangular(L, Y, upper=False, unitriangular=True)
        X = solve_triangular(U, Y, upper=True)
    elif left:
        Y = solve_triangular(mH(U), B, upper=False)
        Y = solve_triangular(mH(L), Y, upper=True, unitriangular=True)
        X = F.matmul(P, Y)
    elif not adjoint:
        Y = solve_triangular(U, B, upper=True, left=False)
        Y = solve_triangular(L, Y, upper=False, unitriangular=True, left=False)
        X = F.matmul(Y, mT(P))
    else:
        Y = F.matmul(B, P)
        Y = solve_triangular(mH(L), Y, upper=True, unitriangular=True, left=False)
        X = solve_triangular(mH(U), Y, upper=False, left=False)
    return _out(X, out)


# ======================================================================================
# Householder: householder_product (orgqr), ormqr, geqrf
# ======================================================================================


def _reflector(A: Tensor, i: int) -> Tensor:
    """v_i = [0, ..., 0, 1, A[i+1:, i]] of each matrix (differentiable in A)."""
    m = A._shape[-2]
    col = A[..., :, i]
    mask = np.zeros(m)
    mask[i + 1 :] = 1.0
    unit = np.zeros(m)
    unit[i] = 1.0
    return F.add(F.mul(col, from_numpy(mask, A._dtype)), from_numpy(unit, A._dtype))


@composite_function
def householder_product(A: Tensor, tau: Tensor, *, out: Any = None) -> Tensor:
    """The first n columns of the product of Householder reflectors H_1 ... H_k, H_i =
    I - tau_i v_i v_i^H (v_i below the diagonal of A's column i), as
    torch.linalg.householder_product (LAPACK orgqr); computed with llgrad's ops (so it is
    differentiable and compiles)."""
    op = "linalg.householder_product"
    check_tensor(op, A)
    check_tensor(op, tau, "tau")
    check_matrix(op, A)
    check_float(op, A)
    same_dtype(op, A, tau, "input", "tau")
    m, n = A._shape[-2:]
    k = tau._shape[-1] if tau.ndim else 0
    if m < n:
        raise RuntimeError(
            f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]"
        )
    if k > n:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.ndim != A.ndim - 1 or tau._shape[:-1] != A._shape[:-2]:
        raise RuntimeError(
            f"{op}: Expected batch dimensions of tau to be equal to "
            f"input.shape[:-2], but got {list(tau._shape[:-1])}"
        )
    Q = F.expand(F.eye(m, n, dtype=A._dtype), A._shape[:-2] + (m, n))
    for i in reversed(range(k)):
        Q = _apply_reflector(Q, _reflector(A, i), tau[..., i], left=True)
    if not k:
        # no reflector: the identity's columns, still a function of A and tau (as in torch
        # the result requires grad when they do; their gradients are zero): sums over
        # their empty slices added
        Q = F.add(Q, F.sum(A[..., :, :0], -1, keepdim=True))
        Q = F.add(Q, F.unsqueeze(F.sum(tau, -1, keepdim=True), -1))
    return _out(Q, out)


def _apply_reflector(C: Tensor, v: Tensor, t: Tensor, *, left: bool) -> Tensor:
    """H C (left) or C H with H = I - t v v^H."""
    t2 = F.unsqueeze(F.unsqueeze(t, -1), -1)
    if left:
        vH = F.conj(v) if v._dtype.is_complex else v
        w = F.matmul(F.unsqueeze(vH, -2), C)  # v^H C: (1, n)
        return F.sub(C, F.mul(t2, F.mul(F.unsqueeze(v, -1), w)))
    w = F.matmul(C, F.unsqueeze(v, -1))  # C v: (m, 1)
    vH = F.conj(v) if v._dtype.is_complex else v
    return F.sub(C, F.mul(t2, F.mul(w, F.unsqueeze(vH, -2))))


def ormqr(
    input: Tensor,
    tau: Tensor,
    other: Tensor,
    left: bool = True,
    transpose: bool = False,
    *,
    out: Any = None,
) -> Tensor:
    """Q @ other (other @ Q with left=False; Q^H with transpose=True) for the Q of a
    Householder factorization (geqrf's output), as torch.ormqr; computed with llgrad's
    ops, one reflector at a time."""
    op = "ormqr"
    check_tensor(op, input)
    check_tensor(op, other, "other")
    check_matrix(op, input)
    check_float(op, input)
    same_dtype(op, input, other, "input", "other")
    same_dtype(op, input, tau, "input", "tau")
    k = tau._shape[-1]
    size = other._shape[-2] if left else other._shape[-1]
    if input._shape[-2] != size:
        raise RuntimeError(
            f"{op}: input.shape[-2] must be equal to other.shape"
            f"[{-2 if left else -1}] ({input._shape[-2]} and {size})"
        )
    C = other
    order = list(range(k))
    # Q = H_1 ... H_k: Q C applies H_k first; Q^H C applies H_1^H first
    if left != transpose:
        order.reverse()
    for i in order:
        t = tau[..., i]
        if transpose and t._dtype.is_complex:
            t = F.conj(t)
        C = _apply_reflector(C, _reflector(input, i), t, left=left)
    return _out(C, out)


def _geqrf_compute(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m, n = a.shape[-2:]
    k = min(m, n)
    tau = np.zeros(a.shape[:-2] + (k,), a.dtype)
    if a.size == 0:
        return np.array(a, copy=True), tau
    f = lapack.fortran_batch(a)
    lapack.geqrf(f, tau)
    return lapack.from_fortran(f), tau


def _not_differentiable(op: str) -> Any:
    def rule(ctx: Any, grads: list[Tensor | None]) -> list[Tensor | None]:
        raise RuntimeError(f"the derivative for '{op}' is not implemented.")

    return rule


geqrf_result = namedtuple("geqrf", ["a", "tau"])


def geqrf(input: Tensor, *, out: Any = None) -> Any:
    """LAPACK's geqrf: R on and above the diagonal, the Householder vectors below it, and
    their scalars tau, as torch.geqrf (not differentiable, as in torch)."""
    op = "geqrf"
    check_tensor(op, input)
    check_matrix(op, input)
    check_float(op, input)
    if _plain_no_grad(input) and not _count(input._shape):
        k = min(input._shape[-2:])
        a, tau = _empty_fast(
            (input._shape, input._dtype, False), (input._shape[:-2] + (k,), input._dtype, True)
        )
        return _out(geqrf_result(a, tau), out)
    a, tau = _host(
        op,
        "GeqrfBackward0",
        (input,),
        _geqrf_compute,
        _not_differentiable(op),
        out_dtypes=(input._dtype, input._dtype),
        save_inputs=False,
        save_outputs=False,
    )
    return _out(geqrf_result(a, tau), out)


# ======================================================================================
# LDL
# ======================================================================================


def _ldl_plan(A: Any, hermitian: bool) -> tuple:
    """What `_ldl_fast` does for A's layout: (outputs maker, matrix count, the sytrf
    loop, a pool of scratch sets, a function making one, the gather indices of LD). A
    scratch set is a column-major copy of A's matrices followed by a 0 (what LD's upper
    triangle gathers), its address, and the copy as a (batch, n, n) array."""
    shape = A._shape
    n = shape[-1]
    batch = shape[:-2]
    d = A._dtype
    count = _count(shape) // (n * n) if n else 0
    make = _outputs_maker(
        [(shape, d, False), (shape[:-1], dt.int32, not count), (batch, dt.int32, not count)]
    )
    if not count:
        return (make, 0, None, None, None, None)
    run = lapack.sytrf_caller(d.np, n, count, "L", hermitian)
    size = count * n * n

    window = _stage_window(A)

    def scratch() -> tuple:
        """A new scratch set of this plan (see the plan's docstring)."""
        flat = np.empty(size + 1, d.np)
        flat[size] = 0
        f = flat[:size].reshape(batch + (n, n))
        return flat, lapack.address(flat), f, _stage(A, window)

    base = (np.arange(count) * (n * n))[:, None, None]
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    gather = None
    if size <= _INDEX_MAX:
        gather = np.where(i >= j, base + i + j * n, size).astype(np.intp).reshape(-1)
    return (make, count, run, _pool(size * d.itemsize), scratch, gather)


def _ldl_fast(A: Any, hermitian: bool) -> tuple[Any, Any, Any]:
    """(LD, pivots, info) by sytrf (hetrf) on a column-major copy of A, the pivots and
    info written straight into new tensors; LD (the lower triangle of the factors read
    row-major, zeros above) is one gather from the copy."""
    key = ("ldl", A._lkey, hermitian)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _ldl_plan(A, hermitian))
    make, count, run, pool, scratch, gather = plan
    LD, piv, info = make()
    if not count:
        return LD, piv, info
    try:
        s = pool.pop()
    except IndexError:
        s = scratch()
    _transposed_in(s[2], A, s[3])
    run(s[1], piv._ptr, info._ptr)
    if gather is not None:
        out = np.ndarray(gather.shape, s[0].dtype, LD._storage.buffer)
        s[0].take(gather, out=out, mode="clip")
    else:  # (too many elements to keep gather indices)
        view = LD._numpy_view()
        view[...] = s[2].swapaxes(-1, -2)
        np.copyto(view, 0, where=_above(view.shape[-2:], 0))
    pool.append(s)
    return LD, piv, info


def _ldl_compute(a: np.ndarray, hermitian: bool) -> tuple[np.ndarray, ...]:
    return tuple(t._numpy_view() for t in _ldl_fast(from_numpy(a), hermitian))


def ldl_factor_ex(
    A: Tensor, *, hermitian: bool = False, check_errors: bool = False, out: Any = None
) -> Any:
    """The compact LDL factorization (Bunch-Kaufman, LAPACK sytrf/hetrf, lower triangle)
    of each symmetric (Hermitian with hermitian=True) matrix, with LAPACK's pivots and
    info, as torch.linalg.ldl_factor_ex (not differentiable, as in torch)."""
    op = "linalg.ldl_factor_ex"
    plain = _lapack_plain(A, True)
    if not plain:
        square_float(op, A)
        plain = _plain_no_grad(A)
    if plain:
        LD, piv, info = _ldl_fast(A, hermitian)
    else:
        LD, piv, info = host_op(
            op,
            "LinalgLdlFactorExBackward0",
            (A,),
            lambda a: _ldl_compute(a, hermitian),
            None,
            out_dtypes=(A._dtype, dt.int32, dt.int32),
        )
    if check_errors:
        _check_errors("torch.linalg.ldl_factor_ex", info, "ldl")
    return _out(ldl_factor_ex_result(LD, piv, info), out)


def ldl_factor(A: Tensor, *, hermitian: bool = False, out: Any = None) -> Any:
    """(LD, pivots) of the LDL factorization, as torch.linalg.ldl_factor (raises
    LinAlgError when LAPACK reports an error)."""
    if _lapack_plain(A, True):
        LD, piv, info = _ldl_fast(A, hermitian)
    else:
        LD, piv, info = ldl_factor_ex(A, hermitian=hermitian)
    _check_errors("torch.linalg.ldl_factor", info, "ldl")
    return _out(ldl_factor_result(LD, piv), out)


def _ldl_solve_into(
    ld: np.ndarray, piv: np.ndarray, b: np.ndarray, x: np.ndarray, hermitian: bool
) -> None:
    """X of A X = B from sytrf's factors (one batch shape) into the new array `x` (the
    pivots checked first: `_check_ldl_pivots`)."""
    piv = np.ascontiguousarray(piv, np.int32)
    n = ld.shape[-1]
    _check_ldl_pivots(piv.reshape(-1).tolist(), n, piv.size // n if n else 0)
    fb = lapack.fortran_batch(b)
    lapack.sytrs(lapack.fortran_batch(ld), piv, fb, "L", hermitian)
    np.copyto(x, lapack.from_fortran(fb))


def _check_ldl_pivots(piv: list[int], n: int, count: int) -> None:
    """Refuse pivots (count x n, a flat list) that are not a lower Bunch-Kaufman
    factorization's (`lapack.ldl_pivots_valid`): sytrs would read and write outside the
    matrices."""
    if not piv or (min(piv) > 0 and max(piv) <= n):  # 1 x 1 blocks only: valid
        return
    for c in range(count):
        if not lapack.ldl_pivots_valid(piv[c * n : (c + 1) * n], n):
            where = f"(Batch element {c}): " if count > 1 else ""
            raise RuntimeError(
                f"linalg.ldl_solve: {where}the pivots are not those of an LDL "
                f"factorization (as linalg.ldl_factor gives them)"
            )


def _ldl_solve_plan(LD: Any, pivots: Any, B: Any, hermitian: bool) -> tuple:
    """What `_ldl_solve_fast` does for the operands' layouts (one batch shape): (output
    maker, matrix count, n, the sytrs loop, a pool of scratch sets, a function making
    one, whether the pivots are row-major). A scratch set: column-major copies of LD's
    and B's matrices and their addresses, B's copy read row-major, and pivots."""
    shape = B._shape
    n, k = shape[-2:]
    batch = shape[:-2]
    d = B._dtype
    make = _outputs_maker([(shape, d, False)])
    count = _count(batch) if n and k else 0
    if not count:
        return (make, 0, n, None, None, None, False)
    run = lapack.sytrs_caller(d.np, n, k, count, "L", hermitian)

    lwindow, bwindow = _stage_window(LD), _stage_window(B)

    def scratch() -> tuple:
        """A new scratch set of this plan (see the plan's docstring)."""
        fl = np.empty(batch + (n, n), d.np)
        fb = np.empty(batch + (k, n), d.np)
        piv = (ctypes.c_int * (count * n))()
        return (
            fl,
            lapack.address(fl),
            fb,
            lapack.address(fb),
            fb.swapaxes(-1, -2),
            piv,
            _addressof(piv),
            _stage(LD, lwindow),
            _stage(B, bwindow),
        )

    piv_as_is = pivots._strides == _row_major_strides(pivots._shape)
    return (make, count, n, run, _pool(count * n * (n + k) * d.itemsize), scratch, piv_as_is)


def _ldl_solve_fast(LD: Any, pivots: Any, B: Any, hermitian: bool) -> Any:
    """ldl_solve of plain tensors that need no gradient, one batch shape (pivots of LD's
    batch): the pivots checked, sytrs on column-major scratch copies. None for other
    batch shapes (the broadcasting path takes them)."""
    if pivots._shape != LD._shape[:-1] or B._shape[:-2] != LD._shape[:-2]:
        return None
    key = ("ldl_solve", LD._lkey, pivots._lkey, B._lkey, hermitian)
    plan = _plans.get(key)
    if plan is None:
        plan = _keep_plan(key, _ldl_solve_plan(LD, pivots, B, hermitian))
    make, count, n, run, pool, scratch, piv_as_is = plan
    if not count:
        return make()[0]
    try:
        s = pool.pop()
    except IndexError:
        s = scratch()
    if piv_as_is:
        pl = list((ctypes.c_int * (count * n)).from_address(pivots._ptr))
        pa = pivots._ptr
    else:
        pl = pivots._numpy_view().reshape(-1).tolist()
        s[5][:] = pl
        pa = s[6]
    _check_ldl_pivots(pl, n, count)
    _transposed_in(s[0], LD, s[7])
    _transposed_in(s[2], B, s[8])
    run(s[1], pa, s[3])
    (X,) = make()
    X._numpy_view()[...] = s[4]
    pool.append(s)
    return X


def _ldl_solve_compute(
    ld: np.ndarray, piv: np.ndarray, b: np.ndarray, hermitian: bool
) -> tuple[np.ndarray]:
    out = np.empty(b.shape, b.dtype)
    if b.size:
        _ldl_solve_into(ld, piv, b, out, hermitian)
    return (out,)


def ldl_solve(
    LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False, out: Any = None
) -> Tensor:
    """The solution of A X = B from A's LDL factorization (ldl_factor's output), as
    torch.linalg.ldl_solve (not differentiable, as in torch)."""
    op = "linalg.ldl_solve"
    check_tensor(op, LD, "LD")
    check_tensor(op, B, "B")
    check_square(op, LD, "LD")
    check_float(op, LD)
    same_dtype(op, LD, B, "LD", "B")
    if pivots._dtype is not dt.int32:
        raise RuntimeError(
            f"{op}: Expected LD.dtype and pivots.dtype to be int32, got {pivots._dtype.name}"
        )
    if B._shape[-2] != LD._shape[-1]:
        raise RuntimeError(
            f"{op}: Incompatible shapes of LD and B ({LD._shape[-1]} and {B._shape[-2]})"
        )
    plain = _plain_no_grad(LD, pivots, B)
    if plain:
        X = _ldl_solve_fast(LD, pivots, B, hermitian)
        if X is not None:
            return _out(X, out)
    if plain and pivots._shape == LD._shape[:-1]:
        p = pivots._numpy_view()

        def into(ld: np.ndarray, b: np.ndarray, x: np.ndarray) -> None:
            _ldl_solve_into(ld, np.broadcast_to(p, ld.shape[:-1]), b, x, hermitian)

        return _out(_pair_fast(op, LD, B, into), out)
    LD2, B2 = _broadcast_batch(op, LD, B)
    piv2 = F.expand(pivots, LD2._shape[:-1]) if pivots._shape != LD2._shape[:-1] else pivots
    (X,) = _host(
        op,
        "LinalgLdlSolveBackward0",
        (LD2, piv2, B2),
        lambda l, p, b: _ldl_solve_compute(l, p, b, hermitian),
        None,
        out_dtypes=(B._dtype,),
    )
    return _out(X, out)
