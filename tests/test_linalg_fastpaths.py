"""The short paths of the LAPACK-backed linear-algebra ops (plain tensors that need no
gradient: LAPACK writes into the outputs' memory; empty inputs make their outputs without
any computation) against the general path (inputs that require grad record a node) and
against torch: values, dtypes, shapes, batches, non-contiguous and empty inputs, complex
dtypes, and the errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import llgrad as lg
from llgrad.runtime import lapack

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 1e-3, np.float64: 1e-9, np.complex64: 1e-3, np.complex128: 1e-9}


def rand(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def herm(a):
    return (a + np.conj(np.swapaxes(a, -1, -2))) / 2


def spd(rng, shape, dtype):
    a = rand(rng, shape, dtype)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def arr(x):
    if isinstance(x, lg.Tensor):
        return x.detach().numpy()
    if isinstance(x, torch.Tensor):
        return x.detach().resolve_conj().numpy()
    return np.asarray(x)


def same(fast, general, tol=0.0):
    """The short path's result is the general path's: shape, dtype and values."""
    a, b = arr(fast), arr(general)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def near(ours, theirs, tol):
    a, b = arr(ours), arr(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert str(a.dtype) == str(b.dtype), (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def both(fn, *arrays, noncontig=False):
    """fn on plain tensors (the short path) and on leaves that require grad (the general
    path); `noncontig`: the matrices as transposed views of column-major copies."""
    def make(a, grad):
        if noncontig and a.ndim >= 2:
            t = lg.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).mT
            assert not t.is_contiguous()
        else:
            t = lg.tensor(a)
        if grad and a.dtype.kind in "fc":
            t = t.detach().requires_grad_()
        return t
    fast = fn(*[make(a, False) for a in arrays])
    general = fn(*[make(a, True) for a in arrays])
    return fast, general


def flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def check_paths(fn, *arrays, tol=0.0):
    for noncontig in (False, True):
        fast, general = both(fn, *arrays, noncontig=noncontig)
        for f, g in zip(flat(fast), flat(general)):
            assert f.grad_fn is None
            same(f, g, tol)


# ------------------------------------------------------------------------------------------
# the new LAPACK routines against NumPy
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_syevd_gesdd_against_numpy(dtype):
    rng = np.random.default_rng(0)
    dtype = np.dtype(dtype)
    real = np.float32 if dtype in (np.float32, np.complex64) else np.float64
    tol = TOL[dtype.type] * 10
    for m, n in ((4, 4), (3, 5), (5, 2), (1, 1)):
        a = rand(rng, (2, m, n), dtype)
        k = min(m, n)
        for job in "NSA":
            f = np.array(np.swapaxes(a, -1, -2), order="C")        # column-major
            s = np.zeros((2, k), real)
            uc, vr = (m, n) if job == "A" else (k, k)
            u, vt = np.zeros((2, uc, m), dtype), np.zeros((2, n, vr), dtype)
            info = np.ones(2, np.int32)
            base = lapack.address(f)
            lapack.gesdd_at(dtype, m, n, 2, base, lapack.address(s), job,
                            lapack.address(u) if job != "N" else base,
                            lapack.address(vt) if job != "N" else base, lapack.address(info))
            assert not info.any()
            np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=tol,
                                       atol=tol)
            if job != "N":
                U, VT = np.swapaxes(u, -1, -2)[..., :k], np.swapaxes(vt, -1, -2)[..., :k, :]
                np.testing.assert_allclose((U * s[:, None, :]) @ VT, a, rtol=tol, atol=tol)
        if m == n:
            h = herm(a)
            for vectors in (False, True):
                f = np.array(np.swapaxes(h, -1, -2), order="C")
                w = np.zeros((2, n), real)
                info = np.ones(2, np.int32)
                lapack.syevd_at(dtype, n, 2, lapack.address(f), lapack.address(w), vectors,
                                "L", lapack.address(info))
                assert not info.any()
                np.testing.assert_allclose(w, np.linalg.eigvalsh(h), rtol=tol, atol=tol)
                if vectors:
                    V = np.swapaxes(f, -1, -2)
                    np.testing.assert_allclose(
                        (V * w[:, None, :]) @ np.conj(np.swapaxes(V, -1, -2)), h, rtol=tol,
                        atol=tol)


# ------------------------------------------------------------------------------------------
# short path == general path, and == torch
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky(dtype):
    rng = np.random.default_rng(1)
    S = spd(rng, (2, 3, 4, 4), dtype)
    for upper in (False, True):
        check_paths(lambda x: lg.linalg.cholesky(x, upper=upper), S)
        check_paths(lambda x: tuple(lg.linalg.cholesky_ex(x, upper=upper)), S)
        check_paths(lambda x: lg.cholesky(x, upper=upper), S)
        near(lg.linalg.cholesky(lg.tensor(S), upper=upper),
             torch.linalg.cholesky(torch.tensor(S), upper=upper), TOL[dtype])
    for shape in ((0, 0), (2, 0, 0), (0, 3, 3), (1, 1, 0, 0)):
        L, info = lg.linalg.cholesky_ex(lg.zeros(shape, dtype=lg.float32), upper=True)
        Lt, infot = torch.linalg.cholesky_ex(torch.zeros(shape), upper=True)
        near(L, Lt, 0)
        near(info, infot, 0)


def test_cholesky_errors():
    A = np.stack([np.eye(3), -np.eye(3)])
    L, info = lg.linalg.cholesky_ex(lg.tensor(A))
    assert info.tolist() == torch.linalg.cholesky_ex(torch.tensor(A)).info.tolist() == [0, 1]
    with pytest.raises(lg.linalg.LinAlgError, match=r"Batch element 1.*order 1"):
        lg.linalg.cholesky(lg.tensor(A))
    with pytest.raises(RuntimeError, match="square"):
        lg.linalg.cholesky(lg.zeros(2, 3))
    with pytest.raises(RuntimeError, match="floating point"):
        lg.linalg.cholesky(lg.zeros(2, 2, dtype=lg.int64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_eigvalsh(dtype):
    rng = np.random.default_rng(2)
    tol = TOL[dtype]
    H = herm(rand(rng, (3, 5, 5), dtype))
    for uplo in ("L", "U"):
        # the other triangle holds garbage: only the named one may be read
        G = H.copy()
        mask = np.triu(np.ones((5, 5), bool), 1) if uplo == "L" else \
            np.tril(np.ones((5, 5), bool), -1)
        G[..., mask] = 99
        # (the general path computes the vectors too, which its derivative reads: LAPACK
        # takes another algorithm, so the values agree to rounding only)
        check_paths(lambda x: lg.linalg.eigvalsh(x, UPLO=uplo), G, tol=tol)
        check_paths(lambda x: tuple(lg.linalg.eigh(x, UPLO=uplo)), G)
        w, v = lg.linalg.eigh(lg.tensor(G), UPLO=uplo)
        wt = torch.linalg.eigvalsh(torch.tensor(G), UPLO=uplo)
        near(w, wt, tol)
        near(lg.linalg.eigvalsh(lg.tensor(G), UPLO=uplo), wt, tol)
        V = arr(v)
        rec = (V * arr(w)[..., None, :]) @ np.conj(np.swapaxes(V, -1, -2))
        np.testing.assert_allclose(rec, H, rtol=tol * 10, atol=tol * 10)
    for shape in ((0, 0), (1, 1, 0, 0), (0, 4, 4)):
        w, v = lg.linalg.eigh(lg.zeros(shape), UPLO="U")
        wt, vt = torch.linalg.eigh(torch.zeros(shape), UPLO="U")
        near(w, wt, 0)
        near(v, vt, 0)
        near(lg.linalg.eigvalsh(lg.zeros(shape)), torch.linalg.eigvalsh(torch.zeros(shape)), 0)


def test_eigh_svd_errors():
    nan = lg.full((2, 3, 3), math.nan)
    with pytest.raises(lg.linalg.LinAlgError, match="failed to converge"):
        lg.linalg.eigh(nan)
    with pytest.raises(lg.linalg.LinAlgError, match="failed to converge"):
        lg.linalg.eigvalsh(nan)
    with pytest.raises(lg.linalg.LinAlgError, match="non-finite"):
        lg.linalg.svd(nan)
    with pytest.raises(lg.linalg.LinAlgError, match="non-finite"):
        lg.linalg.svdvals(nan)
    with pytest.raises(RuntimeError, match="UPLO"):
        lg.linalg.eigh(lg.eye(2), UPLO="X")


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_svdvals(dtype):
    rng = np.random.default_rng(3)
    tol = TOL[dtype]
    for shape in ((2, 4, 4), (3, 5), (2, 2, 3, 6), (6, 2)):
        A = rand(rng, shape, dtype)
        m, n = shape[-2:]
        check_paths(lambda x: lg.linalg.svdvals(x), A, tol=tol)
        for full in (False, True):
            check_paths(lambda x: tuple(lg.linalg.svd(x, full_matrices=full)), A)
            U, S, Vh = lg.linalg.svd(lg.tensor(A), full_matrices=full)
            Ut, St, Vht = torch.linalg.svd(torch.tensor(A), full_matrices=full)
            assert U.shape == Ut.shape and Vh.shape == Vht.shape and U.dtype == lg.tensor(A).dtype
            near(S, St, tol)
            k = min(m, n)
            Ua, Va = arr(U)[..., :k], arr(Vh)[..., :k, :]
            rec = (Ua * arr(S)[..., None, :]) @ Va
            np.testing.assert_allclose(rec, A, rtol=tol * 10, atol=tol * 10)
        near(lg.linalg.svdvals(lg.tensor(A)), torch.linalg.svdvals(torch.tensor(A)), tol)
        Ut, St, Vt = torch.svd(torch.tensor(A), some=False)
        U, S, V = lg.svd(lg.tensor(A), some=False)
        assert U.shape == Ut.shape and V.shape == Vt.shape
        near(S, St, tol)
    for shape, full in (((0, 5, 5), False), ((2, 0, 3), True), ((2, 3, 0), False),
                        ((2, 0, 0), True)):
        for got, want in zip(lg.linalg.svd(lg.zeros(shape), full_matrices=full),
                             torch.linalg.svd(torch.zeros(shape), full_matrices=full)):
            near(got, want, 0)
        near(lg.linalg.svdvals(lg.zeros(shape)), torch.linalg.svdvals(torch.zeros(shape)), 0)


def test_matrix_rank_pinv_cond():
    rng = np.random.default_rng(4)
    A = rand(rng, (3, 5, 4), np.float64)
    A[1, :, -1] = A[1, :, 0]                       # rank 3
    H = herm(rand(rng, (2, 4, 4), np.complex128))
    t = torch.tensor
    for M, herm_ in ((A, False), (H, True)):
        for kw in ({}, {"atol": 0.5}, {"rtol": 0.3}, {"rtol": lg.tensor(0.2)}):
            tkw = {k: (t(v.item()) if isinstance(v, lg.Tensor) else v) for k, v in kw.items()}
            got = lg.linalg.matrix_rank(lg.tensor(M), hermitian=herm_, **kw)
            want = torch.linalg.matrix_rank(t(M), hermitian=herm_, **tkw)
            assert got.dtype == lg.int64 and got.tolist() == want.tolist()
        check_paths(lambda x: lg.linalg.pinv(x, hermitian=herm_), M)
        near(lg.linalg.pinv(lg.tensor(M), hermitian=herm_),
             torch.linalg.pinv(t(M), hermitian=herm_), 1e-8)
    C = A[::2, :4]                                 # (not the singular one)
    near(lg.linalg.cond(lg.tensor(C)), torch.linalg.cond(t(C)), 1e-6)
    check_paths(lambda x: lg.linalg.cond(x), C, tol=1e-8)
    # empty matrices: every rank is 0, the pseudo-inverse is empty or zeros
    for shape in ((0, 0), (2, 3, 0), (1, 1, 0, 0)):
        got = lg.linalg.matrix_rank(lg.zeros(shape), rtol=lg.tensor(0.1))
        want = torch.linalg.matrix_rank(torch.zeros(shape), rtol=torch.tensor(0.1))
        near(got, want, 0)
        near(lg.linalg.pinv(lg.zeros(shape)), torch.linalg.pinv(torch.zeros(shape)), 0)
    near(lg.linalg.matrix_rank(lg.zeros(1, 1, 0, 0), hermitian=True),
         torch.linalg.matrix_rank(torch.zeros(1, 1, 0, 0), hermitian=True), 0)
    with pytest.raises(RuntimeError, match="square"):
        lg.linalg.matrix_rank(lg.zeros(2, 3), hermitian=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_drivers(dtype):
    rng = np.random.default_rng(5)
    tol = TOL[dtype] * 10
    for m, n, k in ((5, 3, 2), (3, 5, 2), (4, 4, 1)):
        A = rand(rng, (2, m, n), dtype)
        B = rand(rng, (2, m, k), dtype)
        A[1, :, -1] = A[1, :, 0]                   # rank-deficient
        for driver in ("gelsy", "gelsd", "gelss", "gels"):
            a, b = (A[:1], B[:1]) if driver == "gels" else (A, B)
            if driver == "gels" and m < n:
                continue
            got = lg.linalg.lstsq(lg.tensor(a), lg.tensor(b), driver=driver)
            want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
            for g, w in zip(got, want):
                near(g, w, tol)
            fast, general = both(lambda x, y: lg.linalg.lstsq(x, y, driver=driver), a, b)
            for f, g in zip(fast, general):
                same(f, g)
    # a vector right-hand side, and empty operands
    x = lg.linalg.lstsq(lg.tensor(A[0]), lg.tensor(B[0, :, 0])).solution
    near(x, torch.linalg.lstsq(torch.tensor(A[0]), torch.tensor(B[0, :, 0])).solution, tol)
    got = lg.linalg.lstsq(lg.zeros(2, 0, 3), lg.zeros(2, 0, 2), driver="gelsd")
    want = torch.linalg.lstsq(torch.zeros(2, 0, 3), torch.zeros(2, 0, 2), driver="gelsd")
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_inv(dtype):
    rng = np.random.default_rng(6)
    tol = TOL[dtype] * 10
    A = rand(rng, (2, 4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
    B = rand(rng, (3, 2, 4, 2), dtype)               # broadcast batch
    v = rand(rng, (2, 4), dtype)                      # a batch of vectors
    t = torch.tensor
    check_paths(lambda a, b: tuple(lg.linalg.solve_ex(a, b)), A, B)
    check_paths(lambda a, b: lg.linalg.solve(a, b), A, v)
    check_paths(lambda a, b: lg.linalg.solve(a, b, left=False), A, np.swapaxes(B, -1, -2))
    near(lg.linalg.solve(lg.tensor(A), lg.tensor(B)), torch.linalg.solve(t(A), t(B)), tol)
    near(lg.linalg.solve(lg.tensor(A), lg.tensor(v)), torch.linalg.solve(t(A), t(v)), tol)
    near(lg.linalg.solve(lg.tensor(A), lg.tensor(v[0])), torch.linalg.solve(t(A), t(v[0])),
         tol)
    check_paths(lambda a: tuple(lg.linalg.inv_ex(a)), A)
    check_paths(lambda a: lg.linalg.inv(a), A)
    near(lg.linalg.inv(lg.tensor(A)), torch.linalg.inv(t(A)), tol)
    check_paths(lambda a: lg.linalg.tensorinv(a, ind=1), A[0])
    T = rand(rng, (2, 3, 6), dtype) + np.eye(6, dtype=dtype).reshape(2, 3, 6) * 4
    near(lg.linalg.tensorinv(lg.tensor(T), ind=2), torch.linalg.tensorinv(t(T), ind=2), tol)
    Bt = rand(rng, (2, 3), dtype)
    near(lg.linalg.tensorsolve(lg.tensor(T), lg.tensor(Bt)),
         torch.linalg.tensorsolve(t(T), t(Bt)), tol)
    check_paths(lambda a, b: lg.linalg.tensorsolve(a, b), T, Bt)
    # empty operands
    for shA, shB in (((2, 2, 0, 0), (2, 2, 0)), ((0, 3, 3), (0, 3, 2)), ((2, 3, 3), (2, 3, 0))):
        for got, want in zip(lg.linalg.solve_ex(lg.zeros(shA), lg.zeros(shB)),
                             torch.linalg.solve_ex(torch.zeros(shA), torch.zeros(shB))):
            near(got, want, 0)
    for got, want in zip(lg.linalg.inv_ex(lg.zeros(1, 1, 0, 0)),
                         torch.linalg.inv_ex(torch.zeros(1, 1, 0, 0))):
        near(got, want, 0)


def test_solve_inv_errors():
    S = np.stack([np.eye(3), np.zeros((3, 3))])
    inv, info = lg.linalg.inv_ex(lg.tensor(S))
    assert info.tolist() == torch.linalg.inv_ex(torch.tensor(S)).info.tolist()
    near(inv[0], np.eye(3), 0)
    with pytest.raises(lg.linalg.LinAlgError, match="Batch element 1"):
        lg.linalg.inv(lg.tensor(S))
    with pytest.raises(lg.linalg.LinAlgError, match="singular"):
        lg.linalg.solve(lg.tensor(S), lg.ones(2, 3, 1, dtype=lg.float64))
    _, info = lg.linalg.solve_ex(lg.tensor(S), lg.ones(2, 3, 1, dtype=lg.float64))
    assert info.tolist() == [0, 1]
    with pytest.raises(RuntimeError, match="broadcastable"):
        lg.linalg.solve(lg.zeros(2, 3, 3), lg.zeros(4, 3, 1))
    with pytest.raises(RuntimeError, match="Incompatible"):
        lg.linalg.solve(lg.eye(3), lg.zeros(4, 1))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        lg.linalg.solve(lg.eye(3), lg.tensor(1.0))
    with pytest.raises(lg.linalg.LinAlgError, match="singular"):
        lg.linalg.tensorsolve(lg.zeros(2, 2), lg.ones(2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_and_factor_solves(dtype):
    rng = np.random.default_rng(7)
    tol = TOL[dtype] * 10
    t = torch.tensor
    T = np.triu(rand(rng, (2, 4, 4), dtype)) + 4 * np.eye(4, dtype=dtype)
    B = rand(rng, (3, 2, 4, 2), dtype)
    for upper, unit in ((True, False), (True, True)):
        check_paths(lambda a, b: lg.linalg.solve_triangular(a, b, upper=upper,
                                                            unitriangular=unit), T, B)
        near(lg.linalg.solve_triangular(lg.tensor(T), lg.tensor(B), upper=upper,
                                        unitriangular=unit),
             torch.linalg.solve_triangular(t(T), t(B), upper=upper, unitriangular=unit), tol)
    S = spd(rng, (2, 4, 4), dtype)
    L = np.linalg.cholesky(S)
    check_paths(lambda b, c: lg.cholesky_solve(b, c), B, L)
    near(lg.cholesky_solve(lg.tensor(B), lg.tensor(L)), torch.cholesky_solve(t(B), t(L)), tol)
    U = np.conj(np.swapaxes(L, -1, -2)).copy()
    near(lg.cholesky_solve(lg.tensor(B), lg.tensor(U), True),
         torch.cholesky_solve(t(B), t(U), True), tol)
    # LDL
    Sym = rand(rng, (2, 4, 4), dtype)
    Sym = Sym + np.swapaxes(Sym, -1, -2)
    for hermitian in (False, True):
        M = herm(Sym) if hermitian else Sym
        check_paths(lambda a: tuple(lg.linalg.ldl_factor_ex(a, hermitian=hermitian)), M)
        ld, piv, info = lg.linalg.ldl_factor_ex(lg.tensor(M), hermitian=hermitian)
        ldt, pivt, infot = torch.linalg.ldl_factor_ex(t(M), hermitian=hermitian)
        near(ld, ldt, tol)
        near(piv, pivt, 0)
        near(info, infot, 0)
        x = lg.linalg.ldl_solve(ld, piv, lg.tensor(B[0]), hermitian=hermitian)
        near(x, torch.linalg.ldl_solve(ldt, pivt, t(B[0]), hermitian=hermitian), tol)
        fast = lg.linalg.ldl_solve(ld, piv, lg.tensor(B), hermitian=hermitian)
        general = lg.linalg.ldl_solve(ld.requires_grad_(), piv, lg.tensor(B),
                                      hermitian=hermitian)
        same(fast, general)
    for got, want in zip(lg.linalg.ldl_factor_ex(lg.zeros(2, 0, 0)),
                         torch.linalg.ldl_factor_ex(torch.zeros(2, 0, 0))):
        near(got, want, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_family(dtype):
    rng = np.random.default_rng(8)
    tol = TOL[dtype] * 10
    t = torch.tensor
    for shape in ((3, 3, 5), (2, 5, 3), (4, 4)):
        A = rand(rng, shape, dtype)
        check_paths(lambda a: tuple(lg.linalg.lu_factor_ex(a)), A)
        check_paths(lambda a: tuple(lg.linalg.lu(a)), A)
        LU, piv, info = lg.linalg.lu_factor_ex(lg.tensor(A))
        LUt, pivt, infot = torch.linalg.lu_factor_ex(t(A))
        near(LU, LUt, tol)
        near(piv, pivt, 0)
        near(info, infot, 0)
        for got, want in zip(lg.linalg.lu(lg.tensor(A)), torch.linalg.lu(t(A))):
            near(got, want, tol)
        for data, pivots in ((True, True), (True, False), (False, True)):
            got = lg.lu_unpack(LU, piv, data, pivots)
            want = torch.lu_unpack(LUt, pivt, data, pivots)
            for g, w in zip(got, want):
                near(g, w, tol)
            general = lg.lu_unpack(LU.detach().requires_grad_(), piv, data, pivots)
            for g, w in zip(got, general):
                same(g, w)
        for got, want in zip(lg.lu(lg.tensor(A)), torch.linalg.lu_factor(t(A))):
            near(got, want, tol)
    # singular matrices and empty ones
    Z = np.zeros((2, 3, 3), dtype)
    Z[0] = np.eye(3)
    assert lg.linalg.lu_factor_ex(lg.tensor(Z)).info.tolist() == \
        torch.linalg.lu_factor_ex(t(Z)).info.tolist()
    with pytest.raises(lg.linalg.LinAlgError, match="Batch element 1"):
        lg.linalg.lu_factor(lg.tensor(Z))
    for shape in ((2, 0, 0), (0, 3, 3), (2, 3, 0), (2, 0, 3)):
        for got, want in zip(lg.linalg.lu_factor_ex(lg.zeros(shape)),
                             torch.linalg.lu_factor_ex(torch.zeros(shape))):
            near(got, want, 0)
        for got, want in zip(lg.linalg.lu(lg.zeros(shape)), torch.linalg.lu(torch.zeros(shape))):
            near(got, want, 0)


def test_slogdet_logdet_qr_geqrf():
    rng = np.random.default_rng(9)
    t = torch.tensor
    for dtype in DTYPES:
        A = rand(rng, (3, 4, 4), dtype)
        tol = TOL[dtype] * 10
        check_paths(lambda a: tuple(lg.linalg.slogdet(a)), A)
        check_paths(lambda a: lg.logdet(a), A)
        near(lg.logdet(lg.tensor(A)), torch.logdet(t(A)), tol)
        for got, want in zip(lg.linalg.slogdet(lg.tensor(A)), torch.linalg.slogdet(t(A))):
            near(got, want, tol)
    near(lg.logdet(lg.tensor(np.zeros((2, 2)))), torch.logdet(torch.zeros(2, 2,
                                                                         dtype=torch.float64)), 0)
    for shape in ((3, 0, 0), (0, 2, 2)):
        near(lg.logdet(lg.zeros(shape)), torch.logdet(torch.zeros(shape)), 0)
        for got, want in zip(lg.linalg.slogdet(lg.zeros(shape)),
                             torch.linalg.slogdet(torch.zeros(shape))):
            near(got, want, 0)
    for shape in ((2, 0, 0), (0, 3, 2), (2, 3, 0), (2, 0, 3)):
        for mode in ("reduced", "complete", "r"):
            for got, want in zip(lg.linalg.qr(lg.zeros(shape), mode=mode),
                                 torch.linalg.qr(torch.zeros(shape), mode=mode)):
                near(got, want, 0)
        for got, want in zip(lg.geqrf(lg.zeros(shape)), torch.geqrf(torch.zeros(shape))):
            near(got, want, 0)


def test_composed_short_paths():
    rng = np.random.default_rng(10)
    t = torch.tensor
    for dtype in (np.float32, np.float64, np.complex64, np.int64):
        x = (rng.standard_normal((3, 5)) * 2).astype(dtype)
        for N in (None, 2, 6):
            got = lg.linalg.vander(lg.tensor(x), N=N)
            near(got, torch.linalg.vander(t(x), N=N), 1e-5)
            if dtype != np.int64:
                same(got, lg.linalg.vander(lg.tensor(x).requires_grad_(), N=N), 1e-6)
    near(lg.linalg.vander(lg.tensor(2.0), N=3), torch.linalg.vander(torch.tensor(2.0), N=3), 0)
    near(lg.linalg.vander(lg.zeros(0, 3)), torch.linalg.vander(torch.zeros(0, 3)), 0)
    x = rng.standard_normal((3, 2, 1, 2)).astype(np.float32)
    for ord_ in (2, 6, math.inf, -1, 0):
        near(lg.linalg.vector_norm(lg.tensor(x), ord=ord_, dim=-1),
             torch.linalg.vector_norm(t(x), ord=ord_, dim=-1), 1e-5)
    with pytest.raises(RuntimeError, match="non-empty"):
        lg.linalg.vector_norm(lg.zeros(0), ord=math.inf)
