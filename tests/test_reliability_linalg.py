"""Regression tests for defects found by the full OpInfo sweep in `lg.linalg`, each against
torch: SVD's singular vectors (equal to torch's up to a phase per column, the harness's
comparison) and its gradient with full_matrices=True of non-square matrices; the empty-input
rules of matrix_norm / vector_norm / norm / torch.norm / cond; householder_product with an
empty tau requiring grad."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")


def to_lg(t, requires_grad=False):
    x = lg.tensor(t.detach().resolve_conj().numpy().copy())
    return x.requires_grad_() if requires_grad else x


def npy(x):
    if isinstance(x, lg.Tensor):
        return np.array(x.detach().numpy())
    return x.detach().resolve_conj().numpy()


def dname(x):
    return str(x.dtype).split(".")[-1].rstrip("_")


# ======================================================================================
# svd: values up to a phase, full_matrices gradients
# ======================================================================================

SVD_CASES = [((3, 3), False), ((5, 3), False), ((3, 5), False), ((2, 5, 3), False),
             ((2, 3, 5), False), ((2, 4, 4), False), ((5, 3), True), ((2, 3, 5), True)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64,
                                   torch.complex128])
@pytest.mark.parametrize("shape,transposed", SVD_CASES)
@pytest.mark.parametrize("full", [True, False])
def test_svd_matches_torch_up_to_phase(dtype, shape, transposed, full):
    g = torch.Generator().manual_seed(0)
    if transposed:                      # a non-contiguous input: a transposed matrix
        a = torch.randn(shape[:-2] + shape[:-3:-1], dtype=dtype, generator=g).mT
        x = to_lg(a.mT).mT
        assert not x.is_contiguous()
    else:
        a = torch.randn(shape, dtype=dtype, generator=g)
        x = to_lg(a)
    U, S, Vh = lg.linalg.svd(x, full_matrices=full)
    Ut, St, Vht = torch.linalg.svd(a, full_matrices=full)
    tol = 1e-4 if dtype in (torch.float32, torch.complex64) else 1e-9
    for mine, theirs in ((U, Ut), (S, St), (Vh, Vht)):
        assert tuple(mine.shape) == tuple(theirs.shape)
        assert dname(mine) == dname(theirs)
    np.testing.assert_allclose(npy(S), npy(St), rtol=tol, atol=tol)
    u, s, vh = npy(U), npy(S), npy(Vh)
    k = s.shape[-1]
    # A = U[:, :k] diag(S) Vh[:k]
    rec = (u[..., :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(rec, npy(a), rtol=tol * 10, atol=tol * 10)
    # unitary factors (full_matrices: the extra columns complete the basis)
    for m in (u, np.conj(np.swapaxes(vh, -1, -2))):
        gram = np.conj(np.swapaxes(m, -1, -2)) @ m
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(m.shape[-1]), gram.shape),
                                   atol=tol * 10)
    # the first k singular vectors equal torch's times one unit phase per pair (u_j, v_j)
    ut, vt = npy(Ut)[..., :k], np.conj(np.swapaxes(npy(Vht), -1, -2))[..., :k]
    v = np.conj(np.swapaxes(vh, -1, -2))[..., :k]
    dot = np.sum(np.conj(u[..., :k]) * ut, axis=-2, keepdims=True)
    phase = dot / np.abs(dot)
    np.testing.assert_allclose(u[..., :k] * phase, ut, atol=tol * 10)
    np.testing.assert_allclose(v * phase, vt, atol=tol * 10)


def test_torch_svd_some_false_matches_up_to_phase():
    a = torch.randn(2, 5, 3, dtype=torch.float64)
    U, S, V = lg.svd(to_lg(a), some=False)
    Ut, St, Vt = torch.svd(a, some=False)
    assert tuple(U.shape) == tuple(Ut.shape) and tuple(V.shape) == tuple(Vt.shape)
    np.testing.assert_allclose(npy(S), npy(St), atol=1e-10)
    u, v, ut, vt = npy(U)[..., :3], npy(V)[..., :3], npy(Ut)[..., :3], npy(Vt)[..., :3]
    sign = np.sign(np.sum(u * ut, axis=-2, keepdims=True))
    np.testing.assert_allclose(u * sign, ut, atol=1e-10)
    np.testing.assert_allclose(v * sign, vt, atol=1e-10)


# gauge-invariant views of (U, S, Vh), as torch's OpInfo samples use
def _views(k):
    return {
        "S": lambda U, S, Vh: (S,),
        "absU": lambda U, S, Vh: (U[..., :k].abs(),),
        "absVh": lambda U, S, Vh: (S, Vh[..., :k, :].abs()),
        "UVh": lambda U, S, Vh: (U[..., :k] @ Vh[..., :k, :], S),
    }


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 5, 3), (2, 3, 5), (4, 4), (3, 0),
                                   (0, 3)])
@pytest.mark.parametrize("view", ["S", "absU", "absVh", "UVh"])
def test_svd_full_matrices_gradient_matches_torch(shape, view):
    """full_matrices=True of a non-square matrix: the gradient of the first min(m, n)
    columns (torch ignores the rest, llgrad used to raise)."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(shape, dtype=torch.float64, generator=g, requires_grad=True)
    k = min(shape[-2:])
    fn = _views(k)[view]
    outs_t = fn(*torch.linalg.svd(a, full_matrices=True))
    x = to_lg(a, requires_grad=True)
    outs = fn(*lg.linalg.svd(x, full_matrices=True))
    assert [o.requires_grad for o in outs] == [o.requires_grad for o in outs_t]
    cots = [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outs_t]
    (want,) = torch.autograd.grad(outs_t, [a], cots, allow_unused=True)
    (got,) = lg.autograd.grad(list(outs), [x], [to_lg(c) for c in cots], allow_unused=True)
    want = np.zeros(shape) if want is None else npy(want)
    got = np.zeros(shape) if got is None else npy(got)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 3)])
def test_svd_full_matrices_gradcheck(shape):
    g = torch.Generator().manual_seed(2)
    a = torch.randn(shape, dtype=torch.float64, generator=g)
    k = min(shape[-2:])
    x = to_lg(a, requires_grad=True)

    def f(t):
        U, S, Vh = lg.linalg.svd(t, full_matrices=True)
        return U[..., :k] @ Vh[..., :k, :], S

    assert lg.autograd.gradcheck(f, (x,))


def test_svd_full_matrices_extra_columns_gradient_ignored():
    """The columns past min(m, n) are any basis of the complement: as in torch their
    gradient is dropped (a loss of them alone gives a zero gradient), not an error."""
    a = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    U, S, Vh = torch.linalg.svd(a, full_matrices=True)
    (want,) = torch.autograd.grad((U[:, 3:] @ U[:, 3:].mT).sum(), [a])
    x = to_lg(a, requires_grad=True)
    U2, S2, Vh2 = lg.linalg.svd(x, full_matrices=True)
    (got,) = lg.autograd.grad((U2[:, 3:] @ U2[:, 3:].mT).sum(), [x])
    np.testing.assert_allclose(npy(got), npy(want), atol=1e-12)


def test_harness_compares_singular_vectors_up_to_phase():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import opinfo_harness as H
    for dtype in (torch.float64, torch.complex128):
        a = torch.randn(2, 5, 3, dtype=dtype)
        want = torch.linalg.svd(a, full_matrices=True)
        U, S, Vh = (npy(t).copy() for t in lg.linalg.svd(to_lg(a), full_matrices=True))
        ph = 1j if dtype.is_complex else -1
        U[..., 1] *= ph
        Vh[..., 1, :] *= np.conj(ph)
        good = (lg.tensor(U), lg.tensor(S), lg.tensor(Vh))
        assert H.compare_svd("linalg.svd", good, want) is None
        bad = U.copy()
        bad[..., 0] *= -1                      # u_0 flipped without v_0
        assert H.compare_svd("linalg.svd", (lg.tensor(bad), good[1], good[2]), want)
        bad = U.copy()
        bad[..., 4] *= 2                       # an extra column not of unit length
        assert H.compare_svd("linalg.svd", (lg.tensor(bad), good[1], good[2]), want)
        bad = S.copy()
        bad[..., 0] += 1
        assert H.compare_svd("linalg.svd", (good[0], lg.tensor(bad), good[2]), want)


# ======================================================================================
# norms of empty tensors
# ======================================================================================

def _outcome(call):
    try:
        r = call()
    except Exception as e:  # noqa: BLE001
        return ("raise", type(e))
    return ("ok", r)


def _same(mine, theirs):
    if theirs[0] == "raise":
        assert mine[0] == "raise", f"torch raises {theirs[1].__name__}, llgrad gives a value"
        assert issubclass(mine[1], theirs[1]), (mine[1], theirs[1])
        return
    assert mine[0] == "ok", f"llgrad raises {mine[1].__name__}, torch gives a value"
    m, t = mine[1], theirs[1]
    assert tuple(m.shape) == tuple(t.shape)
    assert dname(m) == dname(t)
    np.testing.assert_allclose(npy(m), npy(t), rtol=1e-6, atol=1e-6)


EMPTY = [(0,), (0, 3), (3, 0), (0, 0), (2, 0, 3), (2, 3, 0), (0, 3, 3)]
ORDS = [1, -1, 2, -2, math.inf, -math.inf, "fro", "nuc"]


@pytest.mark.parametrize("shape", [s for s in EMPTY if len(s) >= 2])
@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize("dim", [(-2, -1), (-1, -2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_empty_follows_torch(shape, ord, dim, keepdim):
    """Positive orders give 0 over an empty dimension; negative ones raise IndexError
    where their minimum reduces an empty dimension (-2: no singular values, -1: no
    columns, -inf: no rows)."""
    a = torch.zeros(shape)
    _same(_outcome(lambda: lg.linalg.matrix_norm(to_lg(a), ord, dim, keepdim)),
          _outcome(lambda: torch.linalg.matrix_norm(a, ord, dim, keepdim)))


@pytest.mark.parametrize("shape", EMPTY)
@pytest.mark.parametrize("ord", [None] + ORDS + [0, 0.5, 3])
@pytest.mark.parametrize("dim", [None, 0, -1, (0,), (-2, -1), (0, 1)])
def test_linalg_norm_empty_follows_torch(shape, ord, dim):
    a = torch.zeros(shape)
    theirs = _outcome(lambda: torch.linalg.norm(a, ord, dim))
    if theirs[0] == "raise" and len(shape) < 2 and dim in ((-2, -1), (0, 1)):
        pytest.skip("an out-of-range dim: torch and llgrad check in another order")
    _same(_outcome(lambda: lg.linalg.norm(to_lg(a), ord, dim)), theirs)


@pytest.mark.parametrize("shape", EMPTY)
@pytest.mark.parametrize("ord", [0, 0.5, 1, 2, -1, -0.5, math.inf, -math.inf])
@pytest.mark.parametrize("dim", [None, (), 0, -1, (0,), (-1, 0)])
def test_vector_norm_empty_follows_torch(shape, ord, dim):
    """ord < 0 and inf have no identity: reducing a whole empty tensor or an empty
    dimension raises RuntimeError; reducing non-empty dimensions of it gives an empty
    result."""
    a = torch.zeros(shape)
    if dim == (-1, 0) and len(shape) == 1:
        pytest.skip("a repeated dim")
    _same(_outcome(lambda: lg.linalg.vector_norm(to_lg(a), ord, dim)),
          _outcome(lambda: torch.linalg.vector_norm(a, ord, dim)))


@pytest.mark.parametrize("shape", [s for s in EMPTY if len(s) >= 2])
@pytest.mark.parametrize("p", [-1, -2, math.inf, -math.inf, 2, "fro", "nuc"])
@pytest.mark.parametrize("dim", [None, 0, -1, (-2, -1)])
def test_torch_norm_empty_follows_torch(shape, p, dim):
    a = torch.zeros(shape)
    _same(_outcome(lambda: lg.norm(to_lg(a), p, dim)), _outcome(lambda: torch.norm(a, p, dim)))
    _same(_outcome(lambda: to_lg(a).norm(p, dim)), _outcome(lambda: a.norm(p, dim)))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (2, 0, 3), (2, 3, 0), (0, 2, 2)])
@pytest.mark.parametrize("p", [None, 1, -1, 2, -2, "fro", "nuc", math.inf, -math.inf])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128])
def test_cond_empty_follows_torch(shape, p, dtype):
    a = torch.zeros(shape, dtype=dtype)
    _same(_outcome(lambda: lg.linalg.cond(to_lg(a), p)),
          _outcome(lambda: torch.linalg.cond(a, p)))


@pytest.mark.parametrize("shape", [s for s in EMPTY if len(s) >= 2])
@pytest.mark.parametrize("ord", [1, 2, math.inf, -math.inf, -1, "fro", "nuc"])
@pytest.mark.parametrize("dim", [None, (0, 1), (1, 0)])
def test_norm_empty_gradient_follows_torch(shape, ord, dim):
    """Whether the result requires grad (torch: not where a positive order's maximum
    runs over an empty dimension) and the gradient's shape."""
    a0 = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    if _outcome(lambda: torch.linalg.norm(a0, ord, dim))[0] == "raise" or \
            (dim is None and len(shape) != 2):
        pytest.skip("torch raises")
    a = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    r = torch.linalg.norm(a, ord, dim)
    x = to_lg(a, requires_grad=True)
    o = lg.linalg.norm(x, ord, dim)
    assert o.requires_grad == r.requires_grad and tuple(o.shape) == tuple(r.shape)
    if not r.requires_grad:         # torch's zero over an empty max is a constant
        return
    c = torch.ones(r.shape, dtype=torch.float64)
    (want,) = torch.autograd.grad(r, [a], c)
    (got,) = lg.autograd.grad(o, [x], to_lg(c), allow_unused=True)
    assert got is None or tuple(got.shape) == tuple(want.shape)


@pytest.mark.parametrize("ord", [1, -1, 2, -2, math.inf, -math.inf, "nuc"])
def test_matrix_norm_nonempty_gradcheck(ord):
    a = torch.randn(2, 3, 4, dtype=torch.float64)
    x = to_lg(a, requires_grad=True)
    assert lg.autograd.gradcheck(lambda t: lg.linalg.matrix_norm(t, ord), (x,))
    r = torch.linalg.matrix_norm(a.requires_grad_(), ord)
    (want,) = torch.autograd.grad(r.sum(), [a])
    (got,) = lg.autograd.grad(lg.linalg.matrix_norm(x, ord).sum(), [x])
    np.testing.assert_allclose(npy(got), npy(want), atol=1e-10)


# ======================================================================================
# householder_product with an empty tau
# ======================================================================================

@pytest.mark.parametrize("shape,tshape", [((3, 2), (0,)), ((2, 3, 2), (2, 0)),
                                          ((0, 3, 2), (0, 0)), ((3, 0), (0,))])
@pytest.mark.parametrize("grads", [(True, True), (True, False), (False, True),
                                   (False, False)])
def test_householder_product_empty_tau_requires_grad(shape, tshape, grads):
    ra, rt = grads
    A = torch.randn(shape, dtype=torch.float64, requires_grad=ra)
    tau = torch.randn(tshape, dtype=torch.float64, requires_grad=rt)
    Q = torch.linalg.householder_product(A, tau)
    a, t = to_lg(A, ra), to_lg(tau, rt)
    q = lg.linalg.householder_product(a, t)
    assert q.requires_grad == Q.requires_grad
    assert tuple(q.shape) == tuple(Q.shape) and dname(q) == dname(Q)
    np.testing.assert_array_equal(npy(q), npy(Q))
    if q.requires_grad and q.numel():
        leaves = [v for v, r in ((a, ra), (t, rt)) if r]
        got = lg.autograd.grad(q, leaves, lg.ones(*q.shape, dtype=lg.float64),
                               allow_unused=True)
        for g, leaf in zip(got, leaves):
            assert g is None or (tuple(g.shape) == tuple(leaf.shape) and
                                 not np.any(npy(g)))


def test_householder_product_gradcheck():
    A = torch.randn(4, 3, dtype=torch.float64)
    tau = torch.randn(2, dtype=torch.float64)
    a, t = to_lg(A, True), to_lg(tau, True)
    assert lg.autograd.gradcheck(lg.linalg.householder_product, (a, t))
    At, taut = A.clone().requires_grad_(), tau.clone().requires_grad_()
    Q = torch.linalg.householder_product(At, taut)
    c = torch.randn(Q.shape, dtype=torch.float64)
    want = torch.autograd.grad(Q, [At, taut], c)
    got = lg.autograd.grad(lg.linalg.householder_product(a, t), [a, t], to_lg(c))
    for g, w in zip(got, want):
        np.testing.assert_allclose(npy(g), npy(w), atol=1e-10)
