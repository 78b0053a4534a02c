"""The short call paths of the linear-algebra ops: `llgrad.runtime.lapack` (LAPACK through
function pointers) against SciPy's wrappers and NumPy, and every fast path (plain tensors
that need no gradient; plain 2-D/3-D products) against the general path it stands in for
(values, dtypes, grad_fn names, errors) and against torch; the cases that must take the
general path (requires_grad, non-contiguous operands, out=, vmap, forward mode) too."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.linalg import _decomp as D
from llgrad.runtime import lapack

torch = pytest.importorskip("torch")
sl = pytest.importorskip("scipy.linalg")

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-4, np.float64: 1e-10, np.complex64: 2e-4, np.complex128: 1e-10}


def rand(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def spd(rng, shape, dtype):
    a = rand(rng, shape, dtype)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def close(a, b, tol):
    a = np.asarray(a.detach().numpy() if isinstance(a, lg.Tensor) else a)
    b = np.asarray(b.detach().numpy() if isinstance(b, lg.Tensor) else b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ------------------------------------------------------------------------------------------
# runtime.lapack
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_lapack_routines_match_scipy(dtype):
    rng = np.random.default_rng(0)
    tol = TOL[dtype]
    a = rand(rng, (3, 4, 4), dtype)
    b = rand(rng, (3, 4, 2), dtype)
    # getrf: factors and (1-based) pivots as SciPy's wrapper gives them
    f = lapack.fortran_batch(a)
    piv = np.zeros((3, 4), np.int32)
    assert not lapack.getrf(f, piv).any()
    getrf = sl.get_lapack_funcs("getrf", (a[0],))
    for i in range(3):
        lu, p, _ = getrf(a[i])
        close(lapack.from_fortran(f)[i], lu, tol)
        assert (piv[i] - 1 == p).all()
    # getrs, each transpose
    for trans, m in (("N", a), ("T", np.swapaxes(a, -1, -2)),
                     ("C", np.conj(np.swapaxes(a, -1, -2)))):
        fb = lapack.fortran_batch(b)
        lapack.getrs(f, piv, fb, trans)
        close(lapack.from_fortran(fb), np.linalg.solve(m, b), tol * 10)
    # gesv
    fa, fb = lapack.fortran_batch(a), lapack.fortran_batch(b)
    assert not lapack.gesv(fa, fb).any()
    close(lapack.from_fortran(fb), np.linalg.solve(a, b), tol * 10)
    # potrf / potrs
    s = spd(rng, (3, 4, 4), dtype)
    c = np.array(s)
    assert not lapack.potrf(c, "U").any()
    close(np.tril(c), np.linalg.cholesky(s), tol * 10)
    fb = lapack.fortran_batch(b)
    lapack.potrs(lapack.fortran_batch(np.linalg.cholesky(s)), fb, "L")
    close(lapack.from_fortran(fb), np.linalg.solve(s, b), tol * 10)
    # geqrf
    f = lapack.fortran_batch(a[:, :, :3])
    tau = np.zeros((3, 3), dtype)
    lapack.geqrf(f, tau)
    q0, t0, _, _ = sl.get_lapack_funcs("geqrf", (a[0],))(a[0, :, :3])
    close(lapack.from_fortran(f)[0], q0, tol)
    close(tau[0], t0[:3], tol)
    # trsm
    tri = np.triu(a) + 4 * np.eye(4, dtype=dtype)
    fb = lapack.fortran_batch(b)
    lapack.trsm(lapack.fortran_batch(tri), fb, lower=False, unit=False)
    close(lapack.from_fortran(fb), np.linalg.solve(tri, b), tol * 10)
    # sytrf / sytrs (and hetrf / hetrs for complex Hermitian matrices)
    for hermitian in (False, True):
        sym = a + (np.conj(np.swapaxes(a, -1, -2)) if hermitian else np.swapaxes(a, -1, -2))
        f = lapack.fortran_batch(sym)
        piv = np.zeros((3, 4), np.int32)
        assert not lapack.sytrf(f, piv, "L", hermitian).any()
        name = "hetrf" if hermitian and np.dtype(dtype).kind == "c" else "sytrf"
        l0, p0, _ = sl.get_lapack_funcs(name, (sym[0],))(sym[0], lower=1)
        close(np.tril(lapack.from_fortran(f)[0]), np.tril(l0), tol)
        assert (piv[0] == p0).all()
        fb = lapack.fortran_batch(b)
        lapack.sytrs(f, piv, fb, "L", hermitian)
        close(lapack.from_fortran(fb), np.linalg.solve(sym, b), tol * 100)


def test_lapack_info_and_empty():
    a = np.zeros((2, 3, 3))
    a[0] = np.eye(3)
    assert lapack.getrf(lapack.fortran_batch(a), np.zeros((2, 3), np.int32)).tolist() == [0, 1]
    m = np.array([np.eye(3), -np.eye(3)])
    assert lapack.potrf(m, "U").tolist() == [0, 1]
    # no matrices, or empty ones: nothing is called, info is zeros of the batch shape
    assert lapack.potrf(np.zeros((2, 0, 0)), "U").tolist() == [0, 0]
    assert lapack.getrf(np.zeros((0, 3, 3)), np.zeros((0, 3), np.int32)).shape == (0,)
    assert lapack.gesv(np.eye(2)[None].copy(), np.zeros((1, 0, 2))).tolist() == [0]


# ------------------------------------------------------------------------------------------
# the fast paths against the general path (requires_grad takes it) and torch
# ------------------------------------------------------------------------------------------

def _cases(rng):
    A = rand(rng, (2, 4, 4), np.float64)
    S = spd(rng, (2, 4, 4), np.float64)
    B = rand(rng, (2, 4, 3), np.float64)
    T = np.triu(A) + 4 * np.eye(4)
    W = rand(rng, (2, 5, 3), np.float64)
    L = np.linalg.cholesky(S)
    return [
        ("linalg.cholesky", lambda x: lg.linalg.cholesky(x), [S], "LinalgCholeskyExBackward0"),
        ("linalg.cholesky", lambda x: lg.linalg.cholesky(x, upper=True), [S],
         "LinalgCholeskyExBackward0"),
        ("linalg.cholesky_ex", lambda x: lg.linalg.cholesky_ex(x).L, [S],
         "LinalgCholeskyExBackward0"),
        ("linalg.inv", lambda x: lg.linalg.inv(x), [A], "LinalgInvExBackward0"),
        ("linalg.inv_ex", lambda x: lg.linalg.inv_ex(x).inverse, [A], "LinalgInvExBackward0"),
        ("linalg.solve", lambda x, y: lg.linalg.solve(x, y), [A, B],
         "LinalgSolveExBackward0"),
        ("linalg.solve_triangular",
         lambda x, y: lg.linalg.solve_triangular(x, y, upper=True), [T, B],
         "LinalgSolveTriangularBackward0"),
        ("cholesky_solve", lambda x, y: lg.cholesky_solve(x, y), [B, L],
         "CholeskySolveBackward0"),
        ("cholesky_inverse", lambda x: lg.cholesky_inverse(x), [L], "CholeskySolveBackward0"),
        ("linalg.qr", lambda x: lg.linalg.qr(x).R, [W], "LinalgQrBackward0"),
        ("linalg.eigvalsh", lambda x: lg.linalg.eigvalsh(x), [S], "LinalgEighBackward0"),
        ("linalg.eigh", lambda x: lg.linalg.eigh(x).eigenvalues, [S], "LinalgEighBackward0"),
        ("linalg.svdvals", lambda x: lg.linalg.svdvals(x), [W], "LinalgSvdBackward0"),
        ("linalg.svd", lambda x: lg.linalg.svd(x, full_matrices=False).S, [W],
         "LinalgSvdBackward0"),
        ("linalg.lu_factor_ex", lambda x: lg.linalg.lu_factor_ex(x).LU, [W],
         "LinalgLuFactorExBackward0"),
        ("linalg.lu", lambda x: lg.linalg.lu(x).U, [W], "LinalgLuBackward0"),
        ("mm", lambda x, y: lg.mm(x, y), [A[0], B[0]], "MmBackward0"),
        ("matmul", lambda x, y: lg.matmul(x, y), [A[0], B[0]], "MmBackward0"),
        ("bmm", lambda x, y: lg.bmm(x, y), [A, B], "BmmBackward0"),
    ]


def test_fast_paths_match_general_path():
    rng = np.random.default_rng(1)
    for name, fn, arrays, node in _cases(rng):
        plain = fn(*[lg.tensor(a) for a in arrays])
        leaves = [lg.tensor(a).requires_grad_() for a in arrays]
        general = fn(*leaves)
        assert plain.grad_fn is None and not plain.requires_grad, name
        assert type(general.grad_fn).__name__ in (node, "UnsafeViewBackward0",
                                                  "SelectBackward0"), name
        assert plain.dtype == general.dtype, name
        close(plain, general, 1e-12)
        # and no_grad with leaves that require grad takes the short path, unrecorded
        with lg.no_grad():
            ng = fn(*leaves)
        assert ng.grad_fn is None
        close(ng, plain, 0)


def test_fast_paths_against_torch():
    rng = np.random.default_rng(2)
    S = spd(rng, (3, 4, 4), np.float32)
    A = rand(rng, (3, 4, 4), np.float32)
    B = rand(rng, (3, 4, 2), np.float32)
    t = torch.from_numpy
    close(lg.linalg.cholesky(lg.tensor(S)), torch.linalg.cholesky(t(S)), 1e-4)
    close(lg.linalg.cholesky(lg.tensor(S), upper=True),
          torch.linalg.cholesky(t(S), upper=True), 1e-4)
    close(lg.linalg.inv(lg.tensor(A)), torch.linalg.inv(t(A)), 1e-3)
    close(lg.linalg.solve(lg.tensor(A), lg.tensor(B)), torch.linalg.solve(t(A), t(B)), 1e-3)
    LU, piv = torch.linalg.lu_factor(t(A))
    for adjoint in (False, True):
        ours = lg.linalg.lu_solve(lg.tensor(LU.numpy()), lg.tensor(piv.numpy()), lg.tensor(B),
                                  adjoint=adjoint)
        close(ours, torch.linalg.lu_solve(LU, piv, t(B), adjoint=adjoint), 1e-3)
    close(lg.lu_solve(lg.tensor(B), lg.tensor(LU.numpy()), lg.tensor(piv.numpy())),
          torch.linalg.lu_solve(LU, piv, t(B)), 1e-3)
    ld, p, info = lg.linalg.ldl_factor_ex(lg.tensor(S))
    ld_t, p_t, info_t = torch.linalg.ldl_factor_ex(t(S))
    close(ld, ld_t, 1e-4)
    assert (p.numpy() == p_t.numpy()).all() and (info.numpy() == info_t.numpy()).all()
    close(lg.linalg.ldl_solve(ld, p, lg.tensor(B)), torch.linalg.ldl_solve(ld_t, p_t, t(B)),
          1e-3)
    a, tau = lg.geqrf(lg.tensor(A))
    a_t, tau_t = torch.geqrf(t(A))
    close(a, a_t, 1e-4)
    close(tau, tau_t, 1e-4)
    L = torch.linalg.cholesky(t(S))
    close(lg.cholesky_inverse(lg.tensor(L.numpy())), torch.cholesky_inverse(L), 1e-3)
    for herm in (False, True):
        M = S if herm else A
        assert lg.linalg.matrix_rank(lg.tensor(M), hermitian=herm).tolist() == \
            torch.linalg.matrix_rank(t(M), hermitian=herm).tolist()
    x, y = rand(rng, (3, 5), np.float32), rand(rng, (5, 2), np.float32)
    close(lg.mm(lg.tensor(x), lg.tensor(y)), torch.mm(t(x), t(y)), 1e-5)
    close(lg.bmm(lg.tensor(A), lg.tensor(B)), torch.bmm(t(A), t(B)), 1e-5)


def test_lu_solve_fast_path_equals_triangular_solves():
    rng = np.random.default_rng(3)
    A = lg.tensor(rand(rng, (2, 5, 5), np.complex128))
    B = lg.tensor(rand(rng, (3, 2, 5, 2), np.complex128))           # broadcast batch
    LU, piv = lg.linalg.lu_factor(A)
    for adjoint in (False, True):
        fast = lg.linalg.lu_solve(LU, piv, B, adjoint=adjoint)
        general = lg.linalg.lu_solve(LU.clone().requires_grad_(), piv, B, adjoint=adjoint)
        assert fast.shape == general.shape == (3, 2, 5, 2)
        close(fast, general, 1e-12)
    # empty operands
    out = lg.linalg.lu_solve(lg.zeros(2, 0, 0), lg.zeros(2, 0, dtype=lg.int32),
                             lg.zeros(2, 0, 1))
    assert out.shape == (2, 0, 1) and out.dtype == lg.float32
    # pivots out of range, or of another dtype, take the general path (LAPACK never sees
    # them)
    assert D._lu_solve_fast(LU, lg.zeros(2, 5, dtype=lg.int32), B[0], False) is None
    assert D._lu_solve_fast(LU, lg.full((2, 5), 6, dtype=lg.int32), B[0], False) is None
    assert D._lu_solve_fast(LU, piv.to(lg.int64), B[0], False) is None
    with pytest.raises(RuntimeError, match="int32"):
        lg.linalg.lu_solve(LU, piv.to(lg.int64), B[0])


def test_errors_are_unchanged():
    S = np.array([[1.0, 0.0], [0.0, -1.0]])
    with pytest.raises(lg.linalg.LinAlgError, match="leading minor of order 2"):
        lg.linalg.cholesky(lg.tensor(S))
    with pytest.raises(lg.linalg.LinAlgError, match=r"\(Batch element 1\): The factorization"):
        lg.linalg.cholesky(lg.tensor(np.stack([np.eye(2), S])))
    L, info = lg.linalg.cholesky_ex(lg.tensor(S))
    assert info.tolist() == 2 and info.dtype == lg.int32
    singular = lg.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(lg.linalg.LinAlgError, match="The diagonal element 2 is zero"):
        lg.linalg.inv(singular)
    inv, info = lg.linalg.inv_ex(singular)
    assert info.tolist() == 2
    with pytest.raises(lg.linalg.LinAlgError, match="singular"):
        lg.linalg.solve(singular, lg.ones(2, 1, dtype=lg.float64))
    LU, piv, info = lg.linalg.lu_factor_ex(singular)
    assert info.tolist() == 2
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        lg.linalg.cholesky(lg.ones(2, 3))
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        lg.mm(lg.ones(2, 3), lg.ones(2, 3))
    with pytest.raises(RuntimeError, match="same dtype"):
        lg.mm(lg.ones(2, 3), lg.ones(3, 2, dtype=lg.float64))
    with pytest.raises(RuntimeError, match="batch"):
        lg.bmm(lg.ones(2, 2, 3), lg.ones(3, 3, 2))


def test_fallbacks_keep_their_behaviour():
    rng = np.random.default_rng(4)
    S = lg.tensor(spd(rng, (2, 4, 4), np.float64))
    A = lg.tensor(rand(rng, (4, 6), np.float64))
    # non-contiguous operands
    At = A.mT[:4]
    close(lg.mm(At, A), torch.mm(torch.from_numpy(At.numpy().copy()),
                                 torch.from_numpy(A.numpy())), 1e-12)
    close(lg.linalg.cholesky(S.mT), np.linalg.cholesky(S.numpy()), 1e-12)
    # out=
    out = lg.empty(2, 4, 4, dtype=lg.float64)
    r = lg.linalg.cholesky(S, out=out)
    close(out, np.linalg.cholesky(S.numpy()), 1e-12)
    assert r is out
    # vmap runs the batch through the general path
    close(lg.vmap(lg.linalg.cholesky)(S), np.linalg.cholesky(S.numpy()), 1e-12)
    close(lg.vmap(lg.mm)(S, S), S.numpy() @ S.numpy(), 1e-12)
    # forward mode
    fa = lg.autograd.forward_ad
    with fa.dual_level():
        d = fa.make_dual(S[0], lg.eye(4, dtype=lg.float64))
        tan = fa.unpack_dual(lg.mm(d, d)).tangent
        assert tan is not None
        close(tan, 2 * S[0].numpy(), 1e-12)
        tan = fa.unpack_dual(lg.linalg.inv(d)).tangent
        Si = np.linalg.inv(S[0].numpy())
        close(tan, -Si @ Si, 1e-10)
    # gradients through the general path still flow
    x = S[0].clone().requires_grad_()
    lg.linalg.cholesky(x).sum().backward()
    xt = torch.from_numpy(S[0].numpy()).requires_grad_()
    torch.linalg.cholesky(xt).sum().backward()
    close(x.grad, xt.grad, 1e-10)
    y = lg.tensor(rand(rng, (3, 4), np.float32)).requires_grad_()
    z = lg.mm(y, lg.ones(4, 2))
    assert type(z.grad_fn).__name__ == "MmBackward0"
    z.sum().backward()
    close(y.grad, np.full((3, 4), 2.0, np.float32), 0)


def test_compile_still_breaks_or_traces():
    @lg.compile
    def f(a, b):
        return lg.mm(a, b) + 1

    a, b = lg.randn(3, 4), lg.randn(4, 2)
    close(f(a, b), a.numpy() @ b.numpy() + 1, 1e-5)

    @lg.compile
    def g(a):
        return lg.linalg.cholesky(a) * 2

    S = lg.tensor(spd(np.random.default_rng(5), (3, 3), np.float32))
    close(g(S), 2 * np.linalg.cholesky(S.numpy()), 1e-4)


def test_plain_no_grad_helper():
    x = lg.ones(2, 2)
    assert D._plain_no_grad(x)
    assert not D._plain_no_grad(x.clone().requires_grad_())
    with lg.no_grad():
        assert D._plain_no_grad(x.clone().requires_grad_())


def test_empty_inputs_fast_equals_general():
    """The median OpInfo samples of many of these ops are empty: shapes and dtypes of
    every output must be those of the general path."""
    cases = [
        (lambda x: lg.linalg.cholesky(x, upper=True), [(1, 1, 0, 0)]),
        (lambda x: lg.linalg.cholesky_ex(x, upper=True), [(1, 1, 0, 0)]),
        (lambda x: lg.linalg.inv_ex(x), [(1, 1, 0, 0)]),
        (lambda x, y: lg.linalg.solve_ex(x, y), [(2, 2, 0, 0), (2, 2, 0)]),
        (lambda x, y: lg.linalg.solve_triangular(x, y, upper=True, unitriangular=True),
         [(0, 0, 0), (0, 0, 3)]),
        (lambda x: lg.linalg.svdvals(x), [(2, 0, 0)]),
        (lambda x: lg.linalg.svd(x, full_matrices=False), [(0, 5, 5)]),
        (lambda x: lg.svd(x, some=False), [(0, 5, 5)]),
        (lambda x: lg.linalg.eigvalsh(x, UPLO="U"), [(1, 1, 0, 0)]),
        (lambda x: lg.linalg.qr(x), [(2, 0, 0)]),
        (lambda x: lg.geqrf(x), [(2, 0, 0)]),
        (lambda x: lg.linalg.lu_factor_ex(x), [(3, 0, 5)]),
        (lambda x: lg.linalg.ldl_factor_ex(x), [(2, 0, 0)]),
        (lambda x: lg.cholesky_inverse(x), [(0, 3, 3)]),
        (lambda x: lg.cholesky_inverse(x), [(2, 0, 0)]),
        (lambda x: lg.linalg.matrix_rank(x, hermitian=True), [(1, 1, 0, 0)]),
        (lambda x: lg.linalg.matrix_rank(x, atol=None, rtol=lg.tensor(0.5)), [(0, 0)]),
        (lambda x, y: lg.mm(x, y), [(0, 5), (5, 10)]),
        (lambda x, y: lg.bmm(x, y), [(0, 5, 2), (0, 2, 3)]),
    ]
    for fn, shapes in cases:
        plain = fn(*[lg.zeros(*s) for s in shapes])
        general = fn(*[lg.zeros(*s).requires_grad_() for s in shapes])
        ps = plain if isinstance(plain, tuple) else (plain,)
        gs = general if isinstance(general, tuple) else (general,)
        assert len(ps) == len(gs)
        for p, g in zip(ps, gs):
            assert p.shape == g.shape and p.dtype == g.dtype, (shapes, p.shape, g.shape)
            close(p, g, 0)
