"""The per-layout call plans of the small LAPACK-backed ops (`llgrad.linalg._decomp`:
outputs made by one generated function, LAPACK loops with their constant arguments made
once, batches in one foreign call through `eager.linalg.lapack_loop`, gathers and flat
indices instead of masked copies, P built from the pivots in Python) against what they
stand in for: the general path (inputs that require grad record a node), single LAPACK
calls per matrix, NumPy's vectorized permutation, `Tensor._empty` and `views.view_of`,
and torch. Values, shapes, dtypes, strides, info codes and errors; batched, empty,
non-contiguous, singular and non-positive-definite inputs; several threads at once."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import llgrad as lg
from llgrad.eager.views import view_of
from llgrad.ir import dtypes as dt
from llgrad.linalg import _decomp as D
from llgrad.runtime import lapack
from llgrad.tensor import Tensor

torch = pytest.importorskip("torch")

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
REAL = [np.float32, np.float64]
TOL = {np.float32: 2e-3, np.float64: 1e-9, np.complex64: 2e-3, np.complex128: 1e-9}
SHAPES = [(4, 4), (3, 4, 4), (2, 3, 5, 5), (1, 1), (2, 1, 1)]


def rand(rng, shape, dtype):
    """Standard normal values (complex ones for complex dtypes)."""
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def sym(rng, shape, dtype, hermitian):
    """A symmetric (Hermitian with `hermitian`) batch."""
    a = rand(rng, shape, dtype)
    t = np.swapaxes(a, -1, -2)
    return (a + (np.conj(t) if hermitian else t)).astype(dtype)


def spd(rng, shape, dtype):
    """A Hermitian positive-definite batch."""
    a = rand(rng, shape, dtype)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def arr(x):
    """Values of an llgrad or torch tensor (or array) as a NumPy array."""
    if isinstance(x, lg.Tensor):
        return x.detach().numpy()
    if isinstance(x, torch.Tensor):
        return x.detach().resolve_conj().numpy()
    return np.asarray(x)


def identical(fast, general):
    """Same shape, dtype and bits (NaNs included)."""
    a, b = arr(fast), arr(general)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    assert a.tobytes() == b.tobytes(), np.abs(a - b).max() if a.size else None


def near(ours, theirs, tol):
    """Same shape, values within `tol`."""
    a, b = arr(ours), arr(theirs)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def layouts(a):
    """A contiguous tensor of `a` and a non-contiguous one (a transposed view of the
    transposed copy) holding the same values."""
    plain = lg.tensor(a)
    if a.ndim < 2:
        return [plain]
    strided = lg.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).mT
    assert not strided.is_contiguous() or min(a.shape[-2:]) <= 1
    return [plain, strided]


def general(x):
    """The same values as a leaf that requires grad: the op takes its general path."""
    return lg.tensor(arr(x)).requires_grad_()


# ------------------------------------------------------------------------------------------
# the building blocks
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "specs",
    [
        [((2, 3), dt.float32, False)],
        [((3, 5, 5), dt.float64, False), ((3, 5), dt.int32, False), ((3,), dt.int32, True)],
        [((0, 4), dt.complex64, True), ((1, 1, 0, 0), dt.float32, False), ((1, 1), dt.int32, True)],
        [((40, 40), dt.float32, True), ((100, 100), dt.float64, True)],  # block / pool sizes
    ],
)
def test_outputs_maker_makes_what_empty_makes(specs):
    """The generated maker's tensors are those `Tensor._empty` makes (fields, memory,
    zeroing, inference mode)."""
    make = D._outputs_maker(specs)
    for _ in range(3):  # also when the slab runs out in between
        outs = make()
        assert len(outs) == len(specs)
        for t, (shape, d, zero) in zip(outs, specs):
            ref = Tensor._empty(shape, d)
            assert t.__class__ is Tensor and t._storage is not ref._storage
            assert (t._shape, t._strides, t._dtype, t._lkey) == (
                ref._shape, ref._strides, ref._dtype, ref._lkey
            )
            assert t._base is None and not t._requires_grad and t.grad_fn is None
            assert t._storage.nbytes == ref._storage.nbytes and t._ptr % 64 == 0
            if zero:
                assert not arr(t).any()
        ptrs = [t._ptr for t in outs if t._storage.nbytes]
        assert len(set(ptrs)) == len(ptrs)  # no two outputs share memory
    with lg.inference_mode():
        assert all(t.is_inference() for t in make())
    assert not any(t.is_inference() for t in make())


def test_outputs_maker_transposed_view_is_view_of():
    """An ("mT", j) output is the view `views.view_of` makes, over output j's memory."""
    make = D._outputs_maker([((2, 3, 4), dt.float64, False), ("mT", 0)])
    base, view = make()
    ref = view_of(base, 0, (2, 4, 3), (12, 1, 4))
    for k in Tensor.__slots__:
        if k.startswith("__") or not hasattr(ref, k) or k == "_storage":
            continue
        if k == "_base":
            assert view._base is base and ref._base is base
        else:
            assert getattr(view, k) == getattr(ref, k), k
    assert view._storage is base._storage
    base.copy_(lg.tensor(np.arange(24.0).reshape(2, 3, 4)))
    identical(view, np.swapaxes(np.arange(24.0).reshape(2, 3, 4), -1, -2))
    with lg.inference_mode():
        b, v = make()
        assert b.is_inference() and v.is_inference()


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_callers_match_one_call_per_matrix(dtype):
    """`lapack.*_caller` with count >= 2 runs the batch in one foreign call (the LapackLoop
    kernel); it must do what count separate calls do, bit for bit, infos included."""
    rng = np.random.default_rng(0)
    npd = np.dtype(dtype)
    n, count = 4, 3
    item = npd.itemsize
    # potrf: the middle matrix is not positive-definite
    s = spd(rng, (count, n, n), dtype)
    s[1] = -s[1]
    batched, single = s.copy(), s.copy()
    info_b, info_s = np.zeros(count, np.int32), np.zeros(count, np.int32)
    lapack.potrf_caller(npd, n, count, "L")(lapack.address(batched), lapack.address(info_b))
    one = lapack.potrf_caller(npd, n, 1, "L")
    for i in range(count):
        one(lapack.address(single) + i * n * n * item, lapack.address(info_s) + 4 * i)
    assert info_b.tolist() == info_s.tolist() and info_b[1] > 0 and info_b[0] == 0
    identical(batched, single)
    # getrf on m x n (3 x 5) matrices, one singular
    m, k = 3, 5
    g = rand(rng, (count, k, m), dtype)  # column-major batches
    g[2] = 0
    batched, single = g.copy(), g.copy()
    piv_b, piv_s = np.zeros((count, m), np.int32), np.zeros((count, m), np.int32)
    lapack.getrf_caller(npd, m, k, count)(
        lapack.address(batched), lapack.address(piv_b), lapack.address(info_b)
    )
    one = lapack.getrf_caller(npd, m, k, 1)
    for i in range(count):
        one(
            lapack.address(single) + i * m * k * item,
            lapack.address(piv_s) + 4 * i * m,
            lapack.address(info_s) + 4 * i,
        )
    identical(batched, single)
    identical(piv_b, piv_s)
    assert info_b.tolist() == info_s.tolist() and info_b[2] == 1
    # sytrf then sytrs (and potrs) with several right-hand sides
    for hermitian in (False, True):
        a = sym(rng, (count, n, n), dtype, hermitian)
        batched, single = a.copy(), a.copy()
        pb, ps = np.zeros((count, n), np.int32), np.zeros((count, n), np.int32)
        lapack.sytrf_caller(npd, n, count, "L", hermitian)(
            lapack.address(batched), lapack.address(pb), lapack.address(info_b)
        )
        one = lapack.sytrf_caller(npd, n, 1, "L", hermitian)
        for i in range(count):
            one(
                lapack.address(single) + i * n * n * item,
                lapack.address(ps) + 4 * i * n,
                lapack.address(info_s) + 4 * i,
            )
        identical(batched, single)
        identical(pb, ps)
        assert info_b.tolist() == info_s.tolist()
        b = rand(rng, (count, 2, n), dtype)
        xb, xs = b.copy(), b.copy()
        lapack.sytrs_caller(npd, n, 2, count, "L", hermitian)(
            lapack.address(batched), lapack.address(pb), lapack.address(xb)
        )
        one = lapack.sytrs_caller(npd, n, 2, 1, "L", hermitian)
        for i in range(count):
            one(
                lapack.address(single) + i * n * n * item,
                lapack.address(ps) + 4 * i * n,
                lapack.address(xs) + i * 2 * n * item,
            )
        identical(xb, xs)
        sol = np.swapaxes(xb, -1, -2)
        want = np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2))
        near(sol, want, TOL[dtype] * 100)
    c = np.linalg.cholesky(spd(rng, (count, n, n), dtype))
    fc = np.ascontiguousarray(np.swapaxes(c, -1, -2))
    b = rand(rng, (count, 3, n), dtype)
    xb, xs = b.copy(), b.copy()
    lapack.potrs_caller(npd, n, 3, count, "L")(lapack.address(fc), lapack.address(xb))
    one = lapack.potrs_caller(npd, n, 3, 1, "L")
    for i in range(count):
        one(lapack.address(fc) + i * n * n * item, lapack.address(xs) + i * 3 * n * item)
    identical(xb, xs)


def test_ldl_pivot_check():
    """Which pivot sequences sytrs may take."""
    ok = lapack.ldl_pivots_valid
    assert ok([1, 2, 3], 3) and ok([-2, -2, 3], 3) and ok([1, -3, -3], 3)
    assert ok([-2, -2, -4, -4], 4)
    assert not ok([4, 2, 3], 3)  # out of range
    assert not ok([0, 2, 3], 3)
    assert not ok([1, 2, -3], 3)  # a 2 x 2 block past the last row
    assert not ok([-2, 1, 3], 3)  # a block's second pivot differs
    assert not ok([-2, -2, -2], 3)
    assert not ok([-5, -5, 3], 3)


def test_perm_python_path_equals_vectorized(monkeypatch):
    """P from pivots in Python equals NumPy's vectorized interchanges."""
    rng = np.random.default_rng(1)
    for m, k, batch in [(5, 5, (3,)), (6, 4, (2, 2)), (3, 3, ()), (4, 1, (5,))]:
        piv = np.stack(
            [rng.integers(i + 1, m + 1, size=batch) for i in range(k)], axis=-1
        ).astype(np.int32)
        small = D._perm_from_pivots(piv, m, np.float32)
        monkeypatch.setattr(D, "_PERM_SMALL", -1)
        vectorized = D._perm_from_pivots(piv, m, np.float32)
        monkeypatch.undo()
        identical(small, vectorized)
        # and P L U reproduces the row interchanges
        out = np.empty(batch + (m, m), np.complex128)
        D._perm_from_pivots(piv, m, np.complex128, out=out)
        identical(out, vectorized.astype(np.complex128))


# ------------------------------------------------------------------------------------------
# the ops: short way against the general path and torch
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_family(dtype):
    """cholesky, cholesky_ex, torch.cholesky, cholesky_inverse: short way against the
    general path and torch; info codes and errors of matrices that are not
    positive-definite; the checks before LAPACK."""
    rng = np.random.default_rng(2)
    tol = TOL[dtype]
    for shape in SHAPES + [(2, 0, 0), (0, 3, 3), (1, 1, 0, 0)]:
        s = spd(rng, shape, dtype)
        for x in layouts(s):
            for upper in (False, True):
                L = lg.linalg.cholesky(x, upper=upper)
                identical(L, lg.linalg.cholesky(general(x), upper=upper))
                identical(lg.cholesky(x, upper=upper), L)
                near(L, torch.linalg.cholesky(torch.from_numpy(s), upper=upper), tol)
                Lx, info = lg.linalg.cholesky_ex(x, upper=upper)
                identical(Lx, L)
                assert info.dtype == lg.int32 and info.shape == shape[:-2]
                assert not arr(info).any()
                # cholesky_inverse of the factor
                ci = lg.cholesky_inverse(L, upper=upper)
                identical(ci, lg.cholesky_inverse(general(L), upper=upper))
                near(ci, torch.cholesky_inverse(torch.from_numpy(arr(L)), upper=upper), tol * 10)
    # not positive-definite: the same info codes as torch, and the same errors
    s = spd(rng, (3, 4, 4), dtype)
    s[1, 2, 2] = -100
    for x in layouts(s):
        L, info = lg.linalg.cholesky_ex(x)
        Lt, it = torch.linalg.cholesky_ex(torch.from_numpy(s))
        assert arr(info).tolist() == it.tolist() and arr(info)[1] == 3
        identical(L, lg.linalg.cholesky_ex(general(x)).L)
        for fn in (lg.linalg.cholesky, lg.cholesky, lambda a: lg.linalg.cholesky_ex(a, check_errors=True)):
            with pytest.raises(lg.linalg.LinAlgError, match=r"\(Batch element 1\).*order 3"):
                fn(x)
            with pytest.raises(lg.linalg.LinAlgError, match=r"\(Batch element 1\).*order 3"):
                fn(general(x))
    with pytest.raises(lg.linalg.LinAlgError, match=r"^linalg.cholesky: The factorization"):
        lg.linalg.cholesky(lg.tensor(-np.eye(2, dtype=dtype)))
    # the checks that guard LAPACK still run
    with pytest.raises(RuntimeError, match="square"):
        lg.linalg.cholesky(lg.zeros(2, 3))
    with pytest.raises(RuntimeError, match="floating point"):
        lg.linalg.cholesky(lg.zeros(2, 2, dtype=lg.int64))
    with pytest.raises(TypeError):
        lg.linalg.cholesky(np.eye(2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_family(dtype):
    """lu_factor(_ex), torch.lu, linalg.lu, lu_unpack: short way against the general path
    and torch, singular matrices' infos and errors, non-contiguous operands."""
    rng = np.random.default_rng(3)
    tol = TOL[dtype]
    for shape in [(4, 4), (3, 3, 5), (3, 5, 3), (2, 2, 4, 4), (1, 1), (2, 0, 3), (2, 3, 0), (0, 3, 3)]:
        a = rand(rng, shape, dtype)
        if min(shape) and len(shape) > 2:
            a[0] = 0  # a singular matrix in the batch
        ta = torch.from_numpy(a)
        for x in layouts(a):
            LU, piv, info = lg.linalg.lu_factor_ex(x)
            for got, want in zip((LU, piv, info), lg.linalg.lu_factor_ex(general(x))):
                identical(got, want)
            LUt, pivt, infot = torch.linalg.lu_factor_ex(ta)
            near(LU, LUt, tol)
            assert arr(piv).tolist() == pivt.tolist() and arr(info).tolist() == infot.tolist()
            r = lg.lu(x, get_infos=True)
            for got, want in zip(r, (LU, piv, info)):
                identical(got, want)
            P, L, U = lg.linalg.lu(x)
            for got, want in zip((P, L, U), lg.linalg.lu(general(x))):
                identical(got, want)
            Pt, Lt, Ut = torch.linalg.lu(ta)
            identical(P, Pt)
            near(L, Lt, tol)
            near(U, Ut, tol)
            for data in (True, False):
                for pivots in (True, False):
                    fast = lg.lu_unpack(LU, piv, data, pivots)
                    slow = lg.lu_unpack(general(LU), piv, data, pivots)
                    want = torch.lu_unpack(LUt, pivt, data, pivots)
                    for f, g, w in zip(fast, slow, want):
                        assert f.shape == g.shape == tuple(w.shape)
                        near(f, g, 0)
                        near(f, w, tol)
            # lu_unpack of a non-contiguous LU and pivots
            strided = layouts(arr(LU))[-1]
            pstrided = lg.tensor(np.ascontiguousarray(arr(piv)[..., None].repeat(2, -1)))[..., 0]
            for f, w in zip(lg.lu_unpack(strided, pstrided), lg.lu_unpack(LU, piv)):
                identical(f, w)
        if min(shape) and len(shape) > 2:
            for x in (lg.tensor(a), general(a)):
                with pytest.raises(lg.linalg.LinAlgError, match=r"\(Batch element 0\).*singular"):
                    lg.linalg.lu_factor(x)
                with pytest.raises(lg.linalg.LinAlgError, match="singular"):
                    lg.linalg.lu_factor_ex(x, check_errors=True)


def test_lu_unpack_checks_pivots_as_torch():
    """Pivots out of 1..m raise torch's error on every path (when P is wanted)."""
    LU = lg.tensor(np.random.default_rng(4).standard_normal((2, 3, 3)).astype(np.float32))
    for bad in ([[4, 2, 3], [1, 2, 3]], [[1, 2, 3], [0, 2, 3]], [[-1, 2, 3], [1, 2, 3]]):
        piv = lg.tensor(np.array(bad, np.int32))
        for data in (LU, general(LU)):
            with pytest.raises(RuntimeError, match="must be between 1 and LU.size"):
                lg.lu_unpack(data, piv)
            with pytest.raises(RuntimeError, match="must be between 1 and LU.size"):
                lg.lu_unpack(data, piv, unpack_data=False)
            # no P wanted: the pivots are not read (as torch)
            P, L, U = lg.lu_unpack(data, piv, unpack_pivots=False)
            assert P.shape == (0,) and L.shape == (2, 3, 3)
        with pytest.raises(RuntimeError, match="must be between"):
            torch.lu_unpack(torch.from_numpy(arr(LU)), torch.tensor(bad, dtype=torch.int32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ldl_family(dtype):
    """ldl_factor(_ex), ldl_solve: short way against the general path and torch (pivots,
    infos), non-contiguous and broadcast operands, singular matrices."""
    rng = np.random.default_rng(5)
    tol = TOL[dtype]
    hermitians = (False, True) if np.dtype(dtype).kind == "c" else (False,)
    for hermitian in hermitians:
        for shape in SHAPES + [(2, 0, 0), (0, 3, 3)]:
            a = sym(rng, shape, dtype, hermitian)
            ta = torch.from_numpy(a)
            b = rand(rng, shape[:-1] + (2,), dtype)
            for x in layouts(a):
                LD, piv, info = lg.linalg.ldl_factor_ex(x, hermitian=hermitian)
                for got, want in zip(
                    (LD, piv, info), lg.linalg.ldl_factor_ex(general(x), hermitian=hermitian)
                ):
                    identical(got, want)
                LDt, pivt, infot = torch.linalg.ldl_factor_ex(ta, hermitian=hermitian)
                near(LD, LDt, tol)
                assert arr(piv).tolist() == pivt.tolist()
                assert arr(info).tolist() == infot.tolist()
                r = lg.linalg.ldl_factor(x, hermitian=hermitian)
                identical(r.LD, LD)
                identical(r.pivots, piv)
                for B in layouts(b):
                    X = lg.linalg.ldl_solve(LD, piv, B, hermitian=hermitian)
                    identical(X, lg.linalg.ldl_solve(general(LD), piv, B, hermitian=hermitian))
                    Xt = torch.linalg.ldl_solve(LDt, pivt, torch.from_numpy(b), hermitian=hermitian)
                    near(X, Xt, tol * 10)
                    # non-contiguous factors and pivots
                    LDs = layouts(arr(LD))[-1]
                    ps = lg.tensor(np.ascontiguousarray(arr(piv)[..., None].repeat(2, -1)))[..., 0]
                    identical(lg.linalg.ldl_solve(LDs, ps, B, hermitian=hermitian), X)
    # a batch broadcast against the factors (the NumPy path)
    a = sym(rng, (4, 4), dtype, False)
    LD, piv = lg.linalg.ldl_factor(lg.tensor(a))
    B = rand(rng, (3, 4, 2), dtype)
    X = lg.linalg.ldl_solve(LD, piv, lg.tensor(B))
    near(X, np.linalg.solve(a, B), tol * 10)
    # a singular matrix: info as torch's (no error from the _ex form)
    z = np.zeros((2, 3, 3), dtype)
    z[1] = np.eye(3)
    info = lg.linalg.ldl_factor_ex(lg.tensor(z)).info
    assert arr(info).tolist() == torch.linalg.ldl_factor_ex(torch.from_numpy(z)).info.tolist()
    assert arr(info)[0] != 0
    with pytest.raises(lg.linalg.LinAlgError, match=r"\(Batch element 0\)"):
        lg.linalg.ldl_factor(lg.tensor(z))
    with pytest.raises(lg.linalg.LinAlgError, match=r"\(Batch element 0\)"):
        lg.linalg.ldl_factor_ex(lg.tensor(z), check_errors=True)


def test_ldl_solve_refuses_pivots_sytrs_cannot_take():
    """Pivots that are not a factorization's would make sytrs read and write outside
    the matrices: every path refuses them before LAPACK sees them."""
    rng = np.random.default_rng(6)
    a = sym(rng, (2, 3, 3), np.float64, False)
    LD, piv = lg.linalg.ldl_factor(lg.tensor(a))
    B = lg.tensor(rand(rng, (2, 3, 2), np.float64))
    for bad in ([[1, 2, 3], [1, 2, 9]], [[1, 2, -3], [1, 2, 3]], [[-2, 1, 3], [1, 2, 3]],
                [[0, 2, 3], [1, 2, 3]]):
        p = lg.tensor(np.array(bad, np.int32))
        for ld, b in ((LD, B), (general(LD), B), (LD, B[None].expand(2, 2, 3, 2))):
            with pytest.raises(RuntimeError, match="pivots are not those of an LDL"):
                lg.linalg.ldl_solve(ld, p, b)
    # a valid 2 x 2 block is taken
    p = lg.tensor(np.array([[-2, -2, 3], [1, 2, 3]], np.int32))
    assert lg.linalg.ldl_solve(LD, p, B).shape == (2, 3, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_svd(dtype):
    """eigh, eigvalsh, linalg.svd, torch.svd (V's view and strides): short way against
    the general path and torch."""
    rng = np.random.default_rng(7)
    tol = TOL[dtype]
    for shape in SHAPES + [(2, 0, 0), (0, 3, 3), (1, 1, 0, 0)]:
        a = sym(rng, shape, dtype, True)
        for x in layouts(a):
            for uplo in ("L", "U", "l"):
                w, v = lg.linalg.eigh(x, UPLO=uplo)
                gw, gv = lg.linalg.eigh(general(x), UPLO=uplo)
                identical(w, gw)
                identical(v, gv)
                near(w, torch.linalg.eigvalsh(torch.from_numpy(a), UPLO=uplo.upper()), tol)
                # eigvalsh: syevd without vectors, or with them for a derivative
                near(lg.linalg.eigvalsh(x, UPLO=uplo), w, tol)
                identical(lg.linalg.eigvalsh(general(x), UPLO=uplo), w)
        with pytest.raises(RuntimeError, match="UPLO"):
            lg.linalg.eigh(lg.tensor(a), UPLO="X")
    for shape in [(4, 4), (3, 3, 5), (3, 5, 3), (0, 5, 5), (2, 0, 3), (2, 3, 0), (1, 1)]:
        a = rand(rng, shape, dtype)
        for x in layouts(a):
            for full in (True, False):
                U, S, Vh = lg.linalg.svd(x, full_matrices=full)
                for got, want in zip((U, S, Vh), lg.linalg.svd(general(x), full_matrices=full)):
                    identical(got, want)
                near(S, torch.linalg.svdvals(torch.from_numpy(a)), tol)
                # torch.svd: V = Vh^H, for real dtypes the transposed view made with the
                # outputs; the general path's transpose gives the same tensor
                u, s, v = lg.svd(x, some=not full)
                gu, gs, gv = lg.svd(general(x), some=not full)
                assert v.stride() == gv.stride() and v.shape == gv.shape
                identical(u, gu)
                identical(s, gs)
                identical(v, gv)
                if not np.dtype(dtype).kind == "c":
                    assert v._base is not None and v._storage is v._base._storage
                u, s, v = lg.svd(x, compute_uv=False)
                assert not arr(u).any() and not arr(v).any()


def test_matrix_rank_without_singular_values():
    """Empty matrices: zero ranks of the batch shape for every kind of tolerance, as
    torch; the tolerance checks still run."""
    for shape in [(0, 0), (3, 0), (2, 0, 4), (1, 1, 0, 0)]:
        x = lg.zeros(*shape)
        for kw in [
            {},
            {"rtol": lg.tensor(1.0)},
            {"atol": 0.5},
            {"atol": 1, "rtol": 0.0},
            {"tol": lg.tensor(2.0, dtype=lg.float64)},
        ] + ([{"atol": lg.tensor(np.zeros(shape[:-2], np.float32))}] if shape[:-2] else []):
            for hermitian in (False, True):
                if hermitian and shape[-1] != shape[-2]:
                    continue
                got = lg.linalg.matrix_rank(x, hermitian=hermitian, **kw)
                tkw = {k: (torch.from_numpy(arr(v)) if isinstance(v, lg.Tensor) else v)
                       for k, v in kw.items()}
                want = torch.linalg.matrix_rank(torch.zeros(shape), hermitian=hermitian, **tkw)
                assert got.dtype == lg.int64 and tuple(got.shape) == tuple(want.shape)
                assert not arr(got).any()
    with pytest.raises(RuntimeError, match="complex"):
        lg.linalg.matrix_rank(lg.zeros(0, 0), rtol=lg.tensor(1j))
    with pytest.raises(RuntimeError, match="tol cannot be combined"):
        lg.linalg.matrix_rank(lg.zeros(0, 0), tol=1.0, atol=1.0)


def test_many_threads_share_plans():
    """Plans are shared; their scratch and argument blocks are taken per call, so calls
    from several threads at once give what one thread gives."""
    rng = np.random.default_rng(8)
    inputs = [rand(rng, (3, 5, 5), np.float64) for _ in range(8)]
    sym_inputs = [sym(rng, (3, 5, 5), np.float64, False) for _ in range(8)]
    spd_inputs = [spd(rng, (3, 5, 5), np.float64) for _ in range(8)]

    def work(i):
        """Factorizations and solves of input set i."""
        x, s, p = lg.tensor(inputs[i]), lg.tensor(sym_inputs[i]), lg.tensor(spd_inputs[i])
        LU, piv = lg.linalg.lu_factor(x)
        LD, lpiv = lg.linalg.ldl_factor(s)
        L = lg.linalg.cholesky(p)
        return (arr(LU), arr(piv), arr(LD), arr(lpiv), arr(L),
                arr(lg.linalg.ldl_solve(LD, lpiv, x)), arr(lg.cholesky_inverse(L)))

    want = [work(i) for i in range(8)]
    got: dict[int, list] = {}
    errors = []

    def run(t):
        """Thread t: every input set, many times."""
        try:
            got[t] = [work(i) for _ in range(20) for i in range(8)]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for results in got.values():
        for j, r in enumerate(results):
            for a, b in zip(r, want[j % 8]):
                identical(a, b)


def test_plans_stay_right_when_the_table_is_emptied(monkeypatch):
    """A full plan table is emptied and refilled without changing results."""
    monkeypatch.setattr(D, "_PLAN_LIMIT", 2)
    rng = np.random.default_rng(9)
    for shape in [(2, 4, 4), (3, 3), (4, 4), (2, 4, 4)]:
        a = spd(rng, shape, np.float32)
        L = lg.linalg.cholesky(lg.tensor(a))
        near(L, np.linalg.cholesky(a), 1e-4)
        LU, piv = lg.linalg.lu_factor(lg.tensor(a))
        identical(LU, lg.linalg.lu_factor(general(a)).LU)
        assert len(D._plans) <= 2


def test_big_layouts_keep_no_indices_or_scratch(monkeypatch):
    """Past `_INDEX_MAX` elements a plan keeps no gather or zeroing indices (masked copies
    instead), past `_SCRATCH_KEEP` bytes no scratch (made per call), past `_STAGE_MAX`
    no staging copy, past `_PERM_SMALL` pivots P is built by NumPy: same results."""
    rng = np.random.default_rng(10)
    cases = {}
    for dtype in (np.float32, np.complex128):
        a = rand(rng, (3, 4, 5), dtype)
        s = sym(rng, (2, 4, 4), dtype, False)
        p = spd(rng, (2, 4, 4), dtype)
        b = rand(rng, (2, 4, 3), dtype)
        cases[dtype] = (a, s, p, b)

    def results(a, s, p, b):
        """What the planned ops give on these inputs."""
        P, L, U = lg.linalg.lu(lg.tensor(a))
        LU, piv = lg.linalg.lu_factor(lg.tensor(a))
        P2, L2, U2 = lg.lu_unpack(LU, piv)
        LD, lpiv = lg.linalg.ldl_factor(lg.tensor(s))
        X = lg.linalg.ldl_solve(LD, lpiv, lg.tensor(b))
        C = lg.linalg.cholesky(lg.tensor(p), upper=True)
        return [arr(t) for t in (P, L, U, LU, piv, P2, L2, U2, LD, lpiv, X, C,
                                 lg.cholesky_inverse(C, upper=True))]

    want = {d: results(*c) for d, c in cases.items()}
    monkeypatch.setattr(D, "_INDEX_MAX", 0)
    monkeypatch.setattr(D, "_SCRATCH_KEEP", 0)
    monkeypatch.setattr(D, "_PERM_SMALL", 0)
    monkeypatch.setattr(D, "_STAGE_MAX", 0)
    monkeypatch.setattr(D, "_plans", {})
    for d, c in cases.items():
        for _ in range(2):
            for got, w in zip(results(*c), want[d]):
                assert got.shape == w.shape
                np.testing.assert_array_equal(got, w)
    assert all(
        plan[3] is D._NO_POOL for key, plan in D._plans.items() if key[0] in ("getrf", "lu", "ldl")
    )
