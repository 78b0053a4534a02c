"""`lg.linalg` and the matrix functions of `lg.*` against torch: values (through
invariants where a decomposition is unique only up to signs or phases), batched and
non-contiguous inputs, dtypes, gradients against torch's autograd, gradcheck and
gradgradcheck in float64, forward mode and vmap, errors, and `lg.compile` (composed ops
compile; LAPACK-backed ops are graph breaks)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")

TD = {"float32": torch.float32, "float64": torch.float64, "complex64": torch.complex64,
      "complex128": torch.complex128}
TOL = {"float32": 2e-4, "float64": 1e-9, "complex64": 2e-4, "complex128": 1e-9}


def to_lg(t: "torch.Tensor", requires_grad: bool = False) -> lg.Tensor:
    x = lg.tensor(t.detach().resolve_conj().numpy().copy())
    return x.requires_grad_() if requires_grad else x


def to_np(x):
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, lg.Tensor):
        return np.array(x.detach().numpy())
    return x.detach().resolve_conj().numpy()


def close(a, b, tol):
    a, b = to_np(a), to_np(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    a, b = np.nan_to_num(a), np.nan_to_num(b)
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert err <= tol * scale, f"max error {err} (scale {scale})"


_rng = np.random.default_rng(1234)


def rand(shape, dtype="float64"):
    x = _rng.standard_normal(shape)
    if "complex" in dtype:
        x = x + 1j * _rng.standard_normal(shape)
    return torch.tensor(x, dtype=TD[dtype])


def well(shape, dtype="float64"):
    """A well-conditioned square matrix (batch)."""
    n = shape[-1]
    return rand(shape, dtype) + 3 * n ** 0.5 * torch.eye(n, dtype=TD[dtype])


def spd(shape, dtype="float64"):
    a = rand(shape, dtype)
    return a @ a.mH + shape[-1] * torch.eye(shape[-1], dtype=TD[dtype])


def noncontig(t):
    """An llgrad tensor of t's values in a non-contiguous layout (transposed storage for
    matrices, every other element for vectors)."""
    if t.ndim >= 2:
        x = to_lg(t.mT.contiguous()).mT
    else:
        x = to_lg(torch.stack([t, t], -1))[..., 0]
    assert not x.is_contiguous()
    return x


def phase_free(v):
    """|v|^2 elementwise: invariant to each column's sign (phase)."""
    return (v * v.conj()).real if hasattr(v, "conj") else v


# ======================================================================================
# values
# ======================================================================================

def _lgv(v):
    return lg.real(v * lg.conj(v)) if v.dtype.is_complex else v * v


VALUE_CASES = {
    # name: (input builder(shape, dtype) -> list of torch tensors, torch fn, llgrad fn)
    "det": (lambda s, d: [well(s, d)], torch.linalg.det, lg.linalg.det),
    "slogdet": (lambda s, d: [rand(s, d)], torch.linalg.slogdet, lg.linalg.slogdet),
    "inv": (lambda s, d: [well(s, d)], torch.linalg.inv, lg.linalg.inv),
    "inv_ex": (lambda s, d: [well(s, d)], torch.linalg.inv_ex, lg.linalg.inv_ex),
    "solve": (lambda s, d: [well(s, d), rand(s[:-1] + (2,), d)], torch.linalg.solve,
              lg.linalg.solve),
    "solve_vec": (lambda s, d: [well(s, d), rand(s[:-1], d)], torch.linalg.solve,
                  lg.linalg.solve),
    "solve_ex": (lambda s, d: [well(s, d), rand(s[:-1] + (2,), d)], torch.linalg.solve_ex,
                 lg.linalg.solve_ex),
    "cholesky": (lambda s, d: [spd(s, d)], torch.linalg.cholesky, lg.linalg.cholesky),
    "cholesky_upper": (lambda s, d: [spd(s, d)], lambda a: torch.linalg.cholesky(a, upper=True),
                       lambda a: lg.linalg.cholesky(a, upper=True)),
    "cholesky_ex": (lambda s, d: [spd(s, d)], torch.linalg.cholesky_ex, lg.linalg.cholesky_ex),
    "solve_triangular": (lambda s, d: [well(s, d), rand(s[:-1] + (3,), d)],
                         lambda a, b: torch.linalg.solve_triangular(a, b, upper=False),
                         lambda a, b: lg.linalg.solve_triangular(a, b, upper=False)),
    "qr": (lambda s, d: [rand(s, d)], torch.linalg.qr, lg.linalg.qr),
    "qr_complete": (lambda s, d: [rand(s, d)], lambda a: torch.linalg.qr(a, "complete"),
                    lambda a: lg.linalg.qr(a, "complete")),
    "eigvalsh": (lambda s, d: [spd(s, d)], torch.linalg.eigvalsh, lg.linalg.eigvalsh),
    "eigh": (lambda s, d: [spd(s, d)],
             lambda a: (lambda r: (r[0], phase_free(r[1])))(torch.linalg.eigh(a)),
             lambda a: (lambda r: (r[0], _lgv(r[1])))(lg.linalg.eigh(a))),
    "eigvals": (lambda s, d: [rand(s, d)], torch.linalg.eigvals, lg.linalg.eigvals),
    "svdvals": (lambda s, d: [rand(s, d)], torch.linalg.svdvals, lg.linalg.svdvals),
    "svd_recon": (lambda s, d: [rand(s, d)],
                  lambda a: (lambda r: (r.U @ torch.diag_embed(r.S).to(a.dtype) @ r.Vh, r.S))(
                      torch.linalg.svd(a, full_matrices=False)),
                  lambda a: (lambda r: (r.U @ (r.S.to(a.dtype).unsqueeze(-1) * r.Vh), r.S))(
                      lg.linalg.svd(a, full_matrices=False))),
    "pinv": (lambda s, d: [rand(s, d)], torch.linalg.pinv, lg.linalg.pinv),
    "matrix_exp": (lambda s, d: [rand(s, d) * 0.3], torch.linalg.matrix_exp,
                   lg.linalg.matrix_exp),
    "lu_factor": (lambda s, d: [rand(s, d)], torch.linalg.lu_factor, lg.linalg.lu_factor),
    "lu": (lambda s, d: [rand(s, d)], torch.linalg.lu, lg.linalg.lu),
    "matrix_norm_fro": (lambda s, d: [rand(s, d)], torch.linalg.matrix_norm,
                        lg.linalg.matrix_norm),
    "matrix_norm_nuc": (lambda s, d: [rand(s, d)], lambda a: torch.linalg.matrix_norm(a, "nuc"),
                        lambda a: lg.linalg.matrix_norm(a, "nuc")),
    "matrix_norm_2": (lambda s, d: [rand(s, d)], lambda a: torch.linalg.matrix_norm(a, -2),
                      lambda a: lg.linalg.matrix_norm(a, -2)),
    "matrix_norm_inf": (lambda s, d: [rand(s, d)],
                        lambda a: torch.linalg.matrix_norm(a, math.inf, keepdim=True),
                        lambda a: lg.linalg.matrix_norm(a, math.inf, keepdim=True)),
    "matrix_norm_1": (lambda s, d: [rand(s, d)], lambda a: torch.linalg.matrix_norm(a, 1),
                      lambda a: lg.linalg.matrix_norm(a, 1)),
    "norm": (lambda s, d: [rand(s, d)], torch.linalg.norm, lg.linalg.norm),
    "vector_norm_3": (lambda s, d: [rand(s, d)], lambda a: torch.linalg.vector_norm(a, 3, -1),
                      lambda a: lg.linalg.vector_norm(a, 3, -1)),
    "cond": (lambda s, d: [well(s, d)], torch.linalg.cond, lg.linalg.cond),
    "cond_fro": (lambda s, d: [well(s, d)], lambda a: torch.linalg.cond(a, "fro"),
                 lambda a: lg.linalg.cond(a, "fro")),
    "matrix_rank": (lambda s, d: [rand(s, d)], torch.linalg.matrix_rank,
                    lg.linalg.matrix_rank),
    "matrix_power_5": (lambda s, d: [rand(s, d) * 0.5],
                       lambda a: torch.linalg.matrix_power(a, 5),
                       lambda a: lg.linalg.matrix_power(a, 5)),
    "matrix_power_-2": (lambda s, d: [well(s, d)], lambda a: torch.linalg.matrix_power(a, -2),
                        lambda a: lg.linalg.matrix_power(a, -2)),
    "matrix_power_0": (lambda s, d: [rand(s, d)], lambda a: torch.linalg.matrix_power(a, 0),
                       lambda a: lg.linalg.matrix_power(a, 0)),
    "diagonal": (lambda s, d: [rand(s, d)], lambda a: torch.linalg.diagonal(a, offset=-1),
                 lambda a: lg.linalg.diagonal(a, offset=-1)),
    "householder_product": (lambda s, d: [rand(s, d), rand(s[:-2] + (s[-1] - 1,), d)],
                            torch.linalg.householder_product, lg.linalg.householder_product),
    "lstsq_gelsd": (lambda s, d: [rand(s[:-2] + (s[-1] + 2, s[-1]), d),
                                  rand(s[:-2] + (s[-1] + 2, 2), d)],
                    lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"),
                    lambda a, b: lg.linalg.lstsq(a, b, driver="gelsd")),
}

SHAPES = [(4, 4), (2, 3, 3, 3)]


@pytest.mark.parametrize("name", sorted(VALUE_CASES))
@pytest.mark.parametrize("dtype", ["float64", "complex128",
                                   pytest.param("float32", marks=pytest.mark.slow)])
def test_values(name, dtype):
    build, tfn, lfn = VALUE_CASES[name]
    if name in ("matrix_rank",) and dtype == "float32":
        pytest.skip("covered in float64")
    for shape in SHAPES:
        tins = build(shape, dtype)
        tout = tfn(*tins)
        for layout in (lambda t: t, noncontig):
            lins = [to_lg(layout(t)) for t in tins]
            lout = lfn(*lins)
            touts = tout if isinstance(tout, tuple) else (tout,)
            louts = lout if isinstance(lout, tuple) else (lout,)
            assert len(touts) == len(louts)
            for a, b in zip(louts, touts):
                assert a.dtype.name == str(b.dtype)[6:], (a.dtype, b.dtype)
                close(a, b, TOL[dtype] * 10)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_decompositions_reconstruct(dtype):
    tol = TOL[dtype] * 10
    A = rand((2, 5, 3), dtype)
    a = to_lg(A)
    U, S, Vh = lg.linalg.svd(a)
    assert tuple(U.shape) == (2, 5, 5) and tuple(Vh.shape) == (2, 3, 3)
    close(U[..., :3] @ (S.to(a.dtype).unsqueeze(-1) * Vh), A, tol)
    close(U.mH @ U, torch.eye(5, dtype=TD[dtype]).expand(2, 5, 5), tol)
    H = spd((3, 4, 4), dtype)
    L, V = lg.linalg.eigh(to_lg(H))
    close(V @ (L.to(V.dtype).unsqueeze(-1) * V.mH), H, tol)
    G = well((4, 4), dtype)
    W, X = lg.linalg.eig(to_lg(G))
    cd = TD["complex64" if dtype in ("float32", "complex64") else "complex128"]
    close(lg.matmul(X, W.unsqueeze(-1) * lg.linalg.inv(X)), G.to(cd), tol * 10)
    P, Lf, Uf = lg.linalg.lu(a)
    close(P @ Lf @ Uf, A, tol)
    Q, R = lg.linalg.qr(a.mT)
    close(Q @ R, A.mT, tol)


# ======================================================================================
# gradients against torch
# ======================================================================================

GRAD_CASES = {
    "det": ([("sq", "well")], torch.linalg.det, lg.linalg.det),
    "slogdet": ([("sq", "well")], torch.linalg.slogdet, lg.linalg.slogdet),
    "inv": ([("sq", "well")], torch.linalg.inv, lg.linalg.inv),
    "solve": ([("sq", "well"), ("rhs", "rand")], torch.linalg.solve, lg.linalg.solve),
    "solve_left_false": ([("sq", "well"), ("lhs", "rand")],
                         lambda a, b: torch.linalg.solve(a, b, left=False),
                         lambda a, b: lg.linalg.solve(a, b, left=False)),
    "cholesky": ([("sq", "spd")], torch.linalg.cholesky, lg.linalg.cholesky),
    "cholesky_upper": ([("sq", "spd")], lambda a: torch.linalg.cholesky(a, upper=True),
                       lambda a: lg.linalg.cholesky(a, upper=True)),
    "solve_triangular": ([("sq", "well"), ("rhs", "rand")],
                         lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
                         lambda a, b: lg.linalg.solve_triangular(a, b, upper=True)),
    "solve_triangular_unit_right": (
        [("sq", "well"), ("lhs", "rand")],
        lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False,
                                                   unitriangular=True),
        lambda a, b: lg.linalg.solve_triangular(a, b, upper=False, left=False,
                                                unitriangular=True)),
    "qr_tall": ([("tall", "rand")], torch.linalg.qr, lg.linalg.qr),
    "qr_wide": ([("wide", "rand")], torch.linalg.qr, lg.linalg.qr),
    "eigh": ([("sq", "spd")], lambda a: (lambda r: (r[0], phase_free(r[1])))(
        torch.linalg.eigh(a)), lambda a: (lambda r: (r[0], _lgv(r[1])))(lg.linalg.eigh(a))),
    "eigvalsh": ([("sq", "spd")], torch.linalg.eigvalsh, lg.linalg.eigvalsh),
    "eig": ([("sq", "rand")], lambda a: (lambda r: (r[0], phase_free(r[1])))(
        torch.linalg.eig(a)), lambda a: (lambda r: (r[0], _lgv(r[1])))(lg.linalg.eig(a))),
    "eigvals": ([("sq", "rand")], torch.linalg.eigvals, lg.linalg.eigvals),
    "svd_tall": ([("tall", "rand")],
                 lambda a: (lambda r: (r.U @ r.Vh, r.S))(torch.linalg.svd(a, False)),
                 lambda a: (lambda r: (r.U @ r.Vh, r.S))(lg.linalg.svd(a, False))),
    "svd_wide": ([("wide", "rand")],
                 lambda a: (lambda r: (r.U @ r.Vh, r.S))(torch.linalg.svd(a, False)),
                 lambda a: (lambda r: (r.U @ r.Vh, r.S))(lg.linalg.svd(a, False))),
    "svdvals": ([("tall", "rand")], torch.linalg.svdvals, lg.linalg.svdvals),
    "pinv": ([("wide", "rand")], torch.linalg.pinv, lg.linalg.pinv),
    "lstsq": ([("tall", "rand"), ("rhs_tall", "rand")],
              lambda a, b: torch.linalg.lstsq(a, b).solution,
              lambda a, b: lg.linalg.lstsq(a, b).solution),
    "matrix_exp": ([("sq", "small")], torch.linalg.matrix_exp, lg.linalg.matrix_exp),
    "lu_factor_sq": ([("sq", "rand")], lambda a: torch.linalg.lu_factor(a).LU,
                     lambda a: lg.linalg.lu_factor(a).LU),
    "lu_tall": ([("tall", "rand")], lambda a: torch.linalg.lu(a)[1:],
                lambda a: lg.linalg.lu(a)[1:]),
    "lu_wide": ([("wide", "rand")], lambda a: torch.linalg.lu(a)[1:],
                lambda a: lg.linalg.lu(a)[1:]),
    "lu_solve_adjoint": ([("sq", "well"), ("rhs", "rand")],
                         lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b,
                                                            adjoint=True),
                         lambda a, b: lg.linalg.lu_solve(*lg.linalg.lu_factor(a), b,
                                                         adjoint=True)),
    "householder_product": ([("tall", "rand"), ("tau", "rand")],
                            torch.linalg.householder_product, lg.linalg.householder_product),
    "matrix_norm_nuc": ([("tall", "rand")], lambda a: torch.linalg.matrix_norm(a, "nuc"),
                        lambda a: lg.linalg.matrix_norm(a, "nuc")),
    "matrix_norm_2": ([("sq", "rand")], lambda a: torch.linalg.matrix_norm(a, 2),
                      lambda a: lg.linalg.matrix_norm(a, 2)),
    "matrix_norm_inf": ([("sq", "rand")], lambda a: torch.linalg.matrix_norm(a, -math.inf),
                        lambda a: lg.linalg.matrix_norm(a, -math.inf)),
    "multi_dot": ([("vec4", "rand"), ("sq", "rand"), ("k43", "rand")],
                  lambda a, b, c: torch.linalg.multi_dot([a[0], b[0], c[0]]),
                  lambda a, b, c: lg.linalg.multi_dot([a[0], b[0], c[0]])),
    "matrix_power": ([("sq", "rand")], lambda a: torch.linalg.matrix_power(a, 3),
                     lambda a: lg.linalg.matrix_power(a, 3)),
    "cross": ([("vec3", "rand"), ("vec3", "rand")], torch.linalg.cross, lg.linalg.cross),
    "vander": ([("vec4", "rand")], torch.linalg.vander, lg.linalg.vander),
    "vecdot": ([("vec4", "rand"), ("vec4", "rand")], torch.linalg.vecdot, lg.linalg.vecdot),
    "tensorinv": ([("sq", "well")], lambda a: torch.linalg.tensorinv(a[0].reshape(2, 2, 2, 2)),
                  lambda a: lg.linalg.tensorinv(a[0].reshape(2, 2, 2, 2))),
}
_SHAPES = {"sq": (2, 4, 4), "rhs": (2, 4, 2), "lhs": (2, 2, 4), "tall": (2, 5, 3),
           "wide": (2, 3, 5), "rhs_tall": (2, 5, 2), "tau": (2, 3), "vec4": (2, 4),
           "vec3": (2, 3), "k43": (2, 4, 3)}


def _make(kind, fill, dtype):
    shape = _SHAPES[kind]
    if fill == "well":
        return well(shape, dtype)
    if fill == "spd":
        return spd(shape, dtype)
    if fill == "small":
        return rand(shape, dtype) * 0.3
    return rand(shape, dtype)


def _weighted_sum_t(outs):
    total = 0
    for o in outs:
        if not (o.dtype.is_floating_point or o.dtype.is_complex) or o.numel() == 0:
            continue
        w = torch.tensor(np.cos(np.arange(o.numel()) * 0.7 + 0.3).reshape(o.shape),
                         dtype=o.dtype)
        total = total + ((o * w).real.sum() if o.is_complex() else (o * w).sum())
    return total


def _weighted_sum_l(outs):
    total = 0
    for o in outs:
        if not (o.dtype.is_floating_point or o.dtype.is_complex) or o.numel() == 0:
            continue
        w = lg.tensor(np.cos(np.arange(o.numel()) * 0.7 + 0.3).reshape(tuple(o.shape)),
                      dtype=o.dtype)
        total = total + (lg.real(o * w).sum() if o.dtype.is_complex else (o * w).sum())
    return total


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_grad_against_torch(name, dtype):
    specs, tfn, lfn = GRAD_CASES[name]
    tins = [_make(k, f, dtype) for k, f in specs]
    ti = [t.clone().requires_grad_() for t in tins]
    li = [to_lg(t, True) for t in tins]
    to = tfn(*ti)
    lo = lfn(*li)
    to = to if isinstance(to, tuple) else (to,)
    lo = lo if isinstance(lo, tuple) else (lo,)
    for a, b in zip(lo, to):
        close(a, b, 1e-9)
    tg = torch.autograd.grad(_weighted_sum_t(to), ti)
    lgs = lg.autograd.grad(_weighted_sum_l(lo), li)
    for a, b, x in zip(lgs, tg, li):
        assert a.dtype == x.dtype and tuple(a.shape) == tuple(x.shape)
        close(a, b, 1e-8)


GRADCHECK = {
    "det": (lambda a: lg.linalg.det(a), "well"),
    "slogdet": (lambda a: lg.linalg.slogdet(a).logabsdet, "well"),
    "inv": (lg.linalg.inv, "well"),
    "solve": (lambda a: lg.linalg.solve(a, a[..., :2] * 2 + 1), "well"),
    "cholesky": (lambda a: lg.linalg.cholesky(a @ a.mT + lg.eye(4, dtype=a.dtype)), "rand"),
    "solve_triangular": (lambda a: lg.linalg.solve_triangular(a, a.mT, upper=True), "well"),
    "qr": (lambda a: lg.linalg.qr(a), "rand"),
    "eigh": (lambda a: (lambda r: (r[0], r[1] * r[1]))(lg.linalg.eigh(a + a.mT)), "rand"),
    "svd": (lambda a: (lambda r: (r.S, r.U @ r.Vh))(lg.linalg.svd(a, False)), "rand"),
    "pinv": (lambda a: lg.linalg.pinv(a[..., :3]), "rand"),
    "matrix_exp": (lambda a: lg.linalg.matrix_exp(a * 0.3), "rand"),
    "lu_factor": (lambda a: lg.linalg.lu_factor(a).LU, "well"),
    "eig": (lambda a: lg.linalg.eigvals(a), "rand"),
    "lstsq": (lambda a: lg.linalg.lstsq(a[..., :3], a[..., 3:]).solution, "rand"),
}


@pytest.mark.parametrize("name", sorted(GRADCHECK))
def test_gradcheck(name):
    fn, fill = GRADCHECK[name]
    a = to_lg(well((4, 4)) if fill == "well" else rand((4, 4)), True)
    assert lg.autograd.gradcheck(fn, (a,))
    if name in ("det", "inv", "solve", "svd", "solve_triangular"):
        assert lg.autograd.gradgradcheck(fn, (a,))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cholesky", "eigh", "matrix_exp", "qr", "pinv", "slogdet",
                                  "lu_factor"])
def test_gradgradcheck_slow(name):
    fn, fill = GRADCHECK[name]
    a = to_lg(well((4, 4)) if fill == "well" else rand((4, 4)), True)
    assert lg.autograd.gradgradcheck(fn, (a,))


def test_det_gradient_of_singular_matrix():
    """The gradient of det at a singular matrix is the cofactor matrix (llgrad computes
    it from the SVD; torch 2.13 returns zeros for this matrix)."""
    A = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, 1.0, 0.0]])
    a = lg.tensor(A).requires_grad_()
    lg.linalg.det(a).backward()
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(A, i, 0), j, 1))
                     for j in range(3)] for i in range(3)])
    close(a.grad, cof, 1e-12)


def test_grad_fn_names():
    a = to_lg(well((3, 3)), True)
    assert lg.linalg.det(a).grad_fn.name() == "LinalgDetBackward0"
    assert lg.linalg.inv(a).grad_fn.name() == "LinalgInvExBackward0"
    assert lg.linalg.svdvals(a).grad_fn.name() == "LinalgSvdBackward0"
    assert lg.linalg.eigh(a).eigenvalues.grad_fn.name() == "LinalgEighBackward0"
    assert lg.linalg.cholesky(a @ a.mT).grad_fn.name() == "LinalgCholeskyExBackward0"
    assert not lg.linalg.inv_ex(a).info.requires_grad


def test_complex_gauge_errors():
    A = rand((3, 3), "complex128")
    a = to_lg(A, True)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        lg.real(lg.linalg.svd(a).U).sum().backward()
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        lg.real(lg.linalg.eigh(a).eigenvectors).sum().backward()


def test_qr_backward_errors():
    a = to_lg(rand((5, 3)), True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        lg.linalg.qr(a, "r").R.sum().backward()
    with pytest.raises(RuntimeError, match="complete"):
        lg.linalg.qr(a, "complete").Q.sum().backward()


def test_forward_mode_and_vmap():
    A = to_lg(well((4, 4)))
    T = to_lg(rand((4, 4)))
    At, Tt = torch.tensor(to_np(A)), torch.tensor(to_np(T))
    import torch.autograd.forward_ad as tfa
    for name in ("det", "inv", "svdvals", "eigvalsh", "cholesky", "matrix_exp"):
        prep = (lambda x: x @ x.mT) if name == "cholesky" else (lambda x: x)
        with lg.autograd.forward_ad.dual_level():
            d = lg.autograd.forward_ad.make_dual(A, T)
            out = getattr(lg.linalg, name)(prep(d))
            tan = lg.autograd.forward_ad.unpack_dual(out).tangent
        with tfa.dual_level():
            d = tfa.make_dual(At, Tt)
            ref = tfa.unpack_dual(getattr(torch.linalg, name)(prep(d))).tangent
        close(tan, ref, 1e-8)
    B = to_lg(well((3, 4, 4)))
    close(lg.vmap(lg.linalg.det)(B), torch.linalg.det(torch.tensor(to_np(B))), 1e-12)
    J = lg.func.jacfwd(lg.linalg.svdvals)(A)
    Jr = lg.func.jacrev(lg.linalg.svdvals)(A)
    close(J, Jr, 1e-9)


# ======================================================================================
# errors
# ======================================================================================

ERRORS = [
    (lambda: lg.linalg.inv(lg.zeros(2, 2)), lg.linalg.LinAlgError, "singular"),
    (lambda: lg.linalg.inv(lg.zeros(3, 2, 2)), lg.linalg.LinAlgError, "Batch element 0"),
    (lambda: lg.linalg.inv(lg.zeros(2, 3)), RuntimeError, "square"),
    (lambda: lg.linalg.inv(lg.zeros(2, 2, dtype=lg.int64)), RuntimeError, "floating point"),
    (lambda: lg.linalg.det(lg.zeros(3)), RuntimeError, "at least 2 dimensions"),
    (lambda: lg.linalg.svd(lg.zeros(2, 3, dtype=lg.int32)), RuntimeError, "floating point"),
    (lambda: lg.linalg.solve(lg.zeros(2, 2), lg.ones(2)), lg.linalg.LinAlgError, "singular"),
    (lambda: lg.linalg.solve(lg.eye(2), lg.ones(3)), RuntimeError, "Incompatible shapes"),
    (lambda: lg.linalg.cholesky(-lg.eye(2)), lg.linalg.LinAlgError, "positive-definite"),
    (lambda: lg.linalg.cholesky(lg.stack([lg.eye(2), -lg.eye(2)])), lg.linalg.LinAlgError,
     "Batch element 1"),
    (lambda: lg.linalg.eigh(lg.zeros(2, 3)), RuntimeError, "square"),
    (lambda: lg.linalg.inv(lg.zeros(2, 2, dtype=lg.float16)), RuntimeError, "Low precision"),
    (lambda: lg.linalg.qr(lg.zeros(2, 2), "bad"), RuntimeError, "mode"),
    (lambda: lg.linalg.cross(lg.zeros(2), lg.zeros(2)), RuntimeError, "length 3"),
    (lambda: lg.linalg.multi_dot([lg.zeros(2, 2)]), RuntimeError, "at least 2"),
    (lambda: lg.linalg.matrix_norm(lg.zeros(3)), RuntimeError, "at least 2 dimensions"),
    (lambda: lg.linalg.norm(lg.zeros(2, 2, 2), 2), RuntimeError, "1D or 2D"),
    (lambda: lg.linalg.tensorinv(lg.zeros(2, 3)), RuntimeError, "prod"),
    (lambda: lg.addmm(lg.zeros(2, 2), lg.zeros(2, 3), lg.zeros(2, 3)), RuntimeError,
     "cannot be multiplied"),
    (lambda: lg.linalg.householder_product(lg.zeros(2, 3), lg.zeros(1)), RuntimeError,
     "greater than or equal"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case):
    fn, exc, msg = ERRORS[case]
    with pytest.raises(exc, match=msg):
        fn()


def test_linalg_error_class_and_ex_info():
    assert issubclass(lg.linalg.LinAlgError, RuntimeError)
    A = torch.stack([torch.eye(2), torch.zeros(2, 2), -torch.eye(2)]).double()
    r = lg.linalg.inv_ex(to_lg(A))
    tr = torch.linalg.inv_ex(A)
    assert r.info.dtype == lg.int32 and r.info.tolist() == tr.info.tolist()
    c = lg.linalg.cholesky_ex(to_lg(A))
    assert c.info.tolist() == torch.linalg.cholesky_ex(A).info.tolist()
    s = lg.linalg.solve_ex(to_lg(A), to_lg(A))
    assert s.info.tolist() == torch.linalg.solve_ex(A, A).info.tolist()
    f = lg.linalg.lu_factor_ex(to_lg(A))
    assert f.info.tolist() == torch.linalg.lu_factor_ex(A).info.tolist()
    with pytest.raises(lg.linalg.LinAlgError):
        lg.linalg.inv_ex(to_lg(A), check_errors=True)


# ======================================================================================
# lg.* level functions and Tensor methods
# ======================================================================================

TOP_CASES = {
    "addmm": (lambda: [rand((3,)), rand((3, 4)), rand((4, 3))],
              lambda i, a, b, m: m.addmm(i, a, b, beta=0.5, alpha=2)),
    "addmv": (lambda: [rand((3,)), rand((3, 4)), rand((4,))],
              lambda i, a, b, m: m.addmv(i, a, b, alpha=3)),
    "addr": (lambda: [rand((3, 4)), rand((3,)), rand((4,))],
             lambda i, a, b, m: m.addr(i, a, b, beta=2)),
    "addbmm": (lambda: [rand((3, 3)), rand((2, 3, 4)), rand((2, 4, 3))],
               lambda i, a, b, m: m.addbmm(i, a, b)),
    "baddbmm": (lambda: [rand((2, 3, 3)), rand((2, 3, 4)), rand((2, 4, 3))],
                lambda i, a, b, m: m.baddbmm(i, a, b, beta=0.0)),
    "chain_matmul": (lambda: [rand((3, 4)), rand((4, 2)), rand((2, 5))],
                     lambda a, b, c, m: m.chain_matmul(a, b, c)),
    "kron": (lambda: [rand((2, 3)), rand((3, 2))], lambda a, b, m: m.kron(a, b)),
    "kron_rank": (lambda: [rand((2, 3, 2)), rand((3, 2))], lambda a, b, m: m.kron(a, b)),
    "tensordot": (lambda: [rand((2, 3, 4)), rand((4, 3, 5))],
                  lambda a, b, m: m.tensordot(a, b, ([1, 2], [1, 0]))),
    "tensordot_int": (lambda: [rand((2, 3, 4)), rand((3, 4, 5))],
                      lambda a, b, m: m.tensordot(a, b, 2)),
    "inner": (lambda: [rand((2, 4)), rand((3, 4))], lambda a, b, m: m.inner(a, b)),
    "vdot": (lambda: [rand((4,), "complex128"), rand((4,), "complex128")],
             lambda a, b, m: m.vdot(a, b)),
    "ger": (lambda: [rand((3,)), rand((4,))], lambda a, b, m: m.ger(a, b)),
    "cross": (lambda: [rand((4, 3)), rand((4, 3))], lambda a, b, m: m.cross(a, b, dim=1)),
    "cdist": (lambda: [rand((2, 4, 3)), rand((2, 5, 3))], lambda a, b, m: m.cdist(a, b)),
    "cdist_p1": (lambda: [rand((4, 3)), rand((5, 3))], lambda a, b, m: m.cdist(a, b, p=1)),
    "pdist": (lambda: [rand((5, 3))], lambda a, m: m.pdist(a)),
    "dist": (lambda: [rand((4, 3)), rand((3,))], lambda a, b, m: m.dist(a, b, 3)),
    "nuclear_norm": (lambda: [rand((4, 3))], lambda a, m: m.nuclear_norm(a)),
    "frobenius_norm": (lambda: [rand((4, 3))], lambda a, m: m.frobenius_norm(a, (0, 1))),
    "logdet": (lambda: [spd((3, 3))], lambda a, m: m.logdet(a)),
    "logdet_neg": (lambda: [-spd((3, 3))], lambda a, m: m.logdet(a)),
    "inverse": (lambda: [well((3, 3))], lambda a, m: m.inverse(a)),
    "cholesky_solve": (lambda: [rand((3, 2)), torch.linalg.cholesky(spd((3, 3)))],
                       lambda b, l, m: m.cholesky_solve(b, l)),
    "cholesky_solve_upper": (lambda: [rand((3, 2)), torch.linalg.cholesky(spd((3, 3))).mT],
                             lambda b, l, m: m.cholesky_solve(b, l, True)),
    "cholesky_inverse": (lambda: [torch.linalg.cholesky(spd((3, 3)))],
                         lambda l, m: m.cholesky_inverse(l)),
    "triangular_solve": (lambda: [rand((3, 2)), well((3, 3))],
                         lambda b, a, m: m.triangular_solve(b, a, transpose=True)),
    "svd_legacy": (lambda: [rand((4, 3))],
                   lambda a, m: (lambda r: (r.U @ (r.S.unsqueeze(-1) * r.V.mT), r.S))(
                       m.svd(a))),
    "svd_no_uv": (lambda: [rand((4, 3))], lambda a, m: m.svd(a, compute_uv=False)),
    "qr_legacy": (lambda: [rand((3, 4))], lambda a, m: m.qr(a, some=False)),
    "lu_legacy": (lambda: [rand((3, 3))], lambda a, m: m.lu(a, get_infos=True)),
    "lu_solve_legacy": (lambda: [rand((3, 2)), well((3, 3))],
                        lambda b, a, m: m.lu_solve(b, *m.linalg.lu_factor(a))),
    "lu_unpack": (lambda: [rand((4, 3))], lambda a, m: m.lu_unpack(*m.linalg.lu_factor(a))),
    "geqrf": (lambda: [rand((4, 3))], lambda a, m: m.geqrf(a)),
    "orgqr": (lambda: [rand((4, 3)), rand((2,))], lambda a, t, m: m.orgqr(a, t)),
    "ormqr": (lambda: [rand((4, 3)), rand((3,)), rand((4, 2))],
              lambda a, t, c, m: m.ormqr(a, t, c, transpose=True)),
    "pinverse": (lambda: [rand((4, 3))], lambda a, m: m.pinverse(a)),
    "matrix_exp": (lambda: [rand((3, 3))], lambda a, m: m.matrix_exp(a)),
    "matrix_power": (lambda: [rand((3, 3))], lambda a, m: m.matrix_power(a, 4)),
    "ldl": (lambda: [spd((2, 4, 4)), rand((2, 4, 2))],
            lambda a, b, m: m.linalg.ldl_solve(*m.linalg.ldl_factor(a), b)),
    "ldl_factor": (lambda: [spd((4, 4))], lambda a, m: m.linalg.ldl_factor(a)),
    "tensorsolve": (lambda: [well((6, 6)), rand((6,))],
                    lambda a, b, m: m.linalg.tensorsolve(a.reshape(2, 3, 6),
                                                         b.reshape(2, 3))),
}


@pytest.mark.parametrize("name", sorted(TOP_CASES))
def test_top_level(name):
    build, fn = TOP_CASES[name]
    tins = build()
    tout = fn(*tins, torch)
    lout = fn(*[to_lg(t) for t in tins], lg)
    touts = tout if isinstance(tout, tuple) else (tout,)
    louts = lout if isinstance(lout, tuple) else (lout,)
    for a, b in zip(louts, touts):
        assert a.dtype.name == str(b.dtype)[6:]
        close(a, b, 1e-9)
    # gradients for the differentiable float inputs
    if name in ("geqrf", "lu_legacy", "lu_unpack", "svd_no_uv", "ldl", "ldl_factor"):
        return
    ti = [t.clone().requires_grad_() for t in tins]
    li = [to_lg(t, True) for t in tins]
    to = fn(*ti, torch)
    lo = fn(*li, lg)
    to = to if isinstance(to, tuple) else (to,)
    lo = lo if isinstance(lo, tuple) else (lo,)
    tg = torch.autograd.grad(_weighted_sum_t(to), ti, allow_unused=True)
    lgs = lg.autograd.grad(_weighted_sum_l(lo), li, allow_unused=True)
    for a, b in zip(lgs, tg):
        if b is None:
            assert a is None or float(np.max(np.abs(to_np(a)))) == 0.0
            continue
        close(a, b, 1e-8)


def test_methods_and_inplace():
    names = ["det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_inverse",
             "cholesky_solve", "qr", "svd", "lu", "lu_solve", "triangular_solve", "geqrf",
             "orgqr", "ormqr", "pinverse", "matrix_exp", "matrix_power", "addmm", "addmm_",
             "addmv", "addmv_", "addr", "addr_", "addbmm", "addbmm_", "baddbmm", "baddbmm_",
             "ger", "inner", "vdot", "kron", "cross", "dist"]
    for n in names:
        assert hasattr(lg.Tensor, n), n
    A, B, C = rand((3, 3)), rand((3, 4)), rand((4, 3))
    a = to_lg(A)
    r = a.addmm_(to_lg(B), to_lg(C), beta=2, alpha=0.5)
    assert r is a
    close(a, A.clone().addmm_(B, C, beta=2, alpha=0.5), 1e-12)
    x = to_lg(rand((2, 3, 3)))
    x0 = to_np(x).copy()
    x.baddbmm_(x, x)
    close(x, torch.tensor(x0).baddbmm(torch.tensor(x0), torch.tensor(x0)), 1e-12)
    # in-place on a leaf that requires grad is refused, as torch
    leaf = to_lg(A, True)
    with pytest.raises(RuntimeError):
        leaf.addr_(to_lg(rand((3,))), to_lg(rand((3,))))


def test_out_argument():
    A = well((3, 3))
    out = lg.empty(3, 3, dtype=lg.float64)
    r = lg.linalg.inv(to_lg(A), out=out)
    assert r is out
    close(out, torch.linalg.inv(A), 1e-12)
    o2 = lg.empty(3, 3, dtype=lg.float64)
    lg.inverse(to_lg(A), out=o2)
    close(o2, torch.linalg.inv(A), 1e-12)


def test_empty_and_zero_size():
    for n in (0,):
        e = lg.zeros(2, n, n)
        assert tuple(lg.linalg.det(e).shape) == (2,) and lg.linalg.det(e).tolist() == [1, 1]
        assert tuple(lg.linalg.inv(e).shape) == (2, 0, 0)
        assert tuple(lg.linalg.svdvals(lg.zeros(2, 3, 0)).shape) == (2, 0)
        assert tuple(lg.linalg.eigvalsh(e).shape) == (2, 0)


def test_broadcast_solve():
    A, B = well((2, 1, 3, 3)), rand((4, 3, 2))
    Ai, Bi = to_lg(A, True), to_lg(B, True)
    X = lg.linalg.solve(Ai, Bi)
    Xt = torch.linalg.solve(A.requires_grad_(), B.requires_grad_())
    close(X, Xt, 1e-10)
    X.sum().backward()
    Xt.sum().backward()
    close(Ai.grad, A.grad, 1e-9)
    close(Bi.grad, B.grad, 1e-9)


# ======================================================================================
# lg.compile
# ======================================================================================

COMPILED = {
    "matrix_norm_fro": lambda a, b: lg.linalg.matrix_norm(a),
    "matrix_norm_1": lambda a, b: lg.linalg.matrix_norm(a, 1),
    "vector_norm": lambda a, b: lg.linalg.vector_norm(a, 3, -1),
    "cross": lambda a, b: lg.linalg.cross(a, b),
    "multi_dot": lambda a, b: lg.linalg.multi_dot([a, b, a]),
    "matrix_power": lambda a, b: lg.linalg.matrix_power(a, 3),
    "addmm": lambda a, b: lg.addmm(a, a, b, beta=0.5, alpha=2),
    "kron": lambda a, b: lg.kron(a, b),
    "tensordot": lambda a, b: lg.tensordot(a, b, 1),
    "cdist": lambda a, b: lg.cdist(a, b),
    "vander_vecdot": lambda a, b: lg.linalg.vander(a[0]) + lg.linalg.vecdot(a, b),
    "householder": lambda a, b: lg.linalg.householder_product(a, b[0]),
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_composed(name):
    fn = COMPILED[name]
    a = to_lg(rand((3, 3)), True)
    b = to_lg(rand((3, 3)), True)
    cf = lg.compile(fn)
    out = cf(a, b)
    ref = fn(a, b)
    close(out, ref, 1e-12)
    assert cf.graph_breaks == []
    (ga,) = lg.autograd.grad(out.sum(), [a])
    (ra,) = lg.autograd.grad(ref.sum(), [a])
    close(ga, ra, 1e-10)


def test_compiled_lapack_is_graph_break():
    a = to_lg(well((3, 3)))
    cf = lg.compile(lambda x: lg.linalg.det(x) * 2 + lg.linalg.inv(x).sum())
    out = cf(a)
    close(out, torch.linalg.det(torch.tensor(to_np(a))) * 2 +
          torch.linalg.inv(torch.tensor(to_np(a))).sum(), 1e-12)
    assert cf.graph_breaks and "LAPACK" in cf.graph_breaks[0]


def test_norm_nuc_at_top_level():
    X = rand((3, 4))
    close(lg.norm(to_lg(X), "nuc"), torch.norm(X, "nuc"), 1e-12)


# integer and bool products (OpInfo samples): float beta/alpha truncate on integers for
# addmv/addbmm/baddbmm/addmm, addr refuses them; bool addr is and/or
_I = np.arange(-6, 6).reshape(3, 4)
INT_PRODUCT_CASES = [
    ("addmv", lambda M, d: M.addmv(M.tensor([1, 2, 3], dtype=d), M.tensor(_I, dtype=d),
                                   M.tensor([1, -1, 2, 0], dtype=d), beta=2.7, alpha=-1.6)),
    ("addmm", lambda M, d: M.addmm(M.tensor(_I, dtype=d), M.tensor(_I[:, :3], dtype=d),
                                   M.tensor(_I[:3], dtype=d), beta=0.2, alpha=1.9)),
    ("addbmm", lambda M, d: M.addbmm(M.tensor(_I[:1, :1], dtype=d),
                                     M.tensor(_I.reshape(2, 3, 2), dtype=d),
                                     M.tensor(_I.reshape(2, 2, 3), dtype=d), beta=0.6,
                                     alpha=3.2)),
    ("baddbmm", lambda M, d: M.baddbmm(M.tensor(1, dtype=d),
                                       M.tensor(_I.reshape(2, 3, 2), dtype=d),
                                       M.tensor(_I.reshape(2, 2, 3), dtype=d), beta=-2.2,
                                       alpha=1)),
    ("addr bool", lambda M, d: M.addr(M.tensor(_I[:2, :3] > 0), M.tensor([True, False]),
                                      M.tensor([False, True, True]), beta=3, alpha=2)),
    ("addr bool beta 0", lambda M, d: M.addr(M.tensor(_I[:2, :3] > 0),
                                             M.tensor([True, False]),
                                             M.tensor([False, True, True]), beta=0)),
]


@pytest.mark.parametrize("name,fn", INT_PRODUCT_CASES, ids=[c[0] for c in INT_PRODUCT_CASES])
def test_integer_products_like_torch(name, fn):
    got, want = fn(lg, lg.int64), fn(torch, torch.int64)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_integer_addr_refuses_float_scalars():
    with pytest.raises(RuntimeError, match="floating point"):
        lg.addr(lg.ones(2, 3, dtype=lg.int64), lg.ones(2, dtype=lg.int64),
                lg.ones(3, dtype=lg.int64), beta=0.5)


def test_tensordot_size_one_contraction_broadcasts():
    a, b = rand((2, 2, 1)), rand((2, 1, 2))
    for x, y in ((a, b), (rand((1, 1, 1)), b), (rand((2, 1, 3)), rand((3, 2, 2)))):
        dims = ([0, 1], [2, 0]) if x.shape[2] != 3 else ([1, 2], [1, 0])
        close(lg.tensordot(to_lg(x), to_lg(y), dims), torch.tensordot(x, y, dims), 1e-12)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        lg.tensordot(to_lg(rand((3, 1, 1))), to_lg(b), ([0, 1], [2, 0]))


def test_vander_zero_dim_and_small_N():
    x = torch.tensor(3.0, dtype=torch.float64)
    close(lg.linalg.vander(to_lg(x), N=3), torch.linalg.vander(x, N=3), 1e-12)
    for N in (None, 0, 1):
        with pytest.raises(RuntimeError, match="N must be greater than 1"):
            lg.linalg.vander(to_lg(x), N=N)
