"""Parametrizations built on `parametrize.register_parametrization`: `weight_norm`
(magnitude `original0` and direction `original1`) and `spectral_norm` (the weight
divided by its largest singular value, estimated by power iteration with the `_u`, `_v`
buffers) and `orthogonal` (an orthogonal or unitary matrix from the matrix exponential, the
Cayley map or Householder reflectors, with the `base` buffer of the dynamic
trivialization), with PyTorch's state-dict keys."""

from __future__ import annotations

import enum
import types

from ... import functions as lg
from ... import linalg
from ...dispatch.grad_mode import no_grad
from ...ir import dtypes as dt
from ...tensor import Tensor
from ...typeinfo import finfo
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


def _norm_except_dim(v: Tensor, dim: int | None) -> Tensor:
    """The 2-norm of `v` over every dimension but `dim` (all when None), keeping
    dimensions (PyTorch's norm_except_dim)."""
    if dim is None or dim == -1 and v.ndim == 0:
        return lg.norm(v)
    d = dim % v.ndim if v.ndim else 0
    axes = tuple(i for i in range(v.ndim) if i != d)
    if not axes:
        return lg.abs(v)
    return lg.sqrt(lg.sum(lg.mul(v, v), axes, keepdim=True))


def _weight_norm(v: Tensor, g: Tensor, dim: int | None) -> Tensor:
    return lg.mul(v, lg.div(g, _norm_except_dim(v, dim)))


def _normalize(x: Tensor, eps: float) -> Tensor:
    return lg.div(x, lg.clamp(lg.norm(x), min=eps))


class _WeightNorm(Module):
    """weight = g * v / |v| (the norm over every dimension but `dim`)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, None if self.dim == -1 else self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, None if self.dim == -1 else self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize `module.<name>` as g * v / |v|: `parametrizations.<name>.original0`
    holds g (the norms), `original1` holds v."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma the largest singular value of the weight viewed as a matrix
    (dimension `dim` first), estimated with `n_power_iterations` power-iteration steps per
    training forward; 1-D weights are normalized."""

    def __init__(
        self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of "
                f"[-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._matrix(weight)
            h, w = mat.shape
            self.register_buffer("_u", _normalize(lg.randn(h, dtype=weight.dtype), eps))
            self.register_buffer("_v", _normalize(lg.randn(w, dtype=weight.dtype), eps))
            self._power_method(mat, 15)

    def _matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = lg.movedim(weight, self.dim, 0)
        return lg.reshape(weight, (weight.shape[0], -1))

    def _power_method(self, mat: Tensor, iterations: int) -> None:
        with no_grad():
            for _ in range(iterations):
                self._u.copy_(_normalize(lg.mv(mat, self._v), self.eps))
                self._v.copy_(_normalize(lg.mv(lg.t(mat), self._u), self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return _normalize(weight, self.eps)
        mat = self._matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = lg.dot(u, lg.mv(mat, v))
        return lg.div(weight, sigma)

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Reparametrize `module.<name>` as weight / sigma (see `_SpectralNorm`); `dim`
    defaults to 1 for transposed convolutions, else 0. The power iteration starts from
    random vectors (llgrad's stream, not PyTorch's); load `_u`/`_v` to reproduce."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module


# --------------------------------------------------------------------------------------
# orthogonal
# --------------------------------------------------------------------------------------


def _linalg() -> types.ModuleType:
    """llgrad.linalg, imported when first used (it is not set yet when nn loads)."""
    return linalg


class _OrthMaps(enum.Enum):
    matrix_exp = enum.auto()
    cayley = enum.auto()
    householder = enum.auto()


def _eps(dtype: dt.DType) -> float:
    real = {dt.complex64: dt.float32, dt.complex128: dt.float64}.get(dtype, dtype)
    return finfo(real).eps


def _is_orthogonal(q: Tensor) -> bool:
    """Whether the tall (..., n, k) `q` has orthonormal columns, to 10 n eps."""
    n, k = q.shape[-2], q.shape[-1]
    eye = lg.eye(k, dtype=q.dtype)
    return bool(lg.allclose(lg.matmul(q.mH, q), eye, atol=10.0 * n * _eps(q.dtype)))


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of a = QR for a tall (..., n, k) `a`, with the signs that make diag(R) real and
    non-negative (so an orthogonal `a` comes back as itself)."""
    x, tau = lg.geqrf(a)
    q = _linalg().householder_product(x, tau)
    return lg.mul(q, lg.unsqueeze(lg.sgn(lg.diagonal(x, 0, -2, -1)), -2))


class _Orthogonal(Module):
    """The parametrization of `orthogonal`: the original X (..., n, k) maps to a matrix
    with orthonormal columns (rows when n < k, where X is transposed first).

    matrix_exp / cayley: the lower triangle of X (padded to n x n) gives the
    skew-symmetric (skew-Hermitian) A = X - X^H, and Q = exp(A) or the Cayley transform
    (I - A/2)^{-1} (I + A/2), first k columns. householder: the strictly lower part of X
    holds the reflectors (tau = 2 / (1 + |v|^2)), and the integer part of X's diagonal
    (+-1, no gradient) signs the columns. With the dynamic trivialization
    (`use_trivialization`, the default), Q is multiplied on the left by the buffer `base`
    (n x n), which `right_inverse` sets."""

    def __init__(
        self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True
    ) -> None:
        super().__init__()
        if weight.dtype.is_complex and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        """The orthogonal (unitary) matrix that `X` parametrizes."""
        n, k = X.shape[-2], X.shape[-1]
        wide = n < k
        if wide:
            X = X.mT
            n, k = k, n
        batch = tuple(X.shape[:-2])
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            low = lg.tril(X)
            if n != k:  # zero columns up to n x n
                low = lg.cat([low, lg.zeros(batch + (n, n - k), dtype=X.dtype)], -1)
            a = lg.sub(low, low.mH)  # skew-symmetric / skew-Hermitian
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                q = _linalg().matrix_exp(a)
            else:
                eye = lg.eye(n, dtype=a.dtype)
                half = lg.mul(a, 0.5)
                q = _linalg().solve(lg.sub(eye, half), lg.add(eye, half))
            if n != k:
                q = q[..., :k]
        else:
            v = lg.tril(X, -1)
            tau = lg.div(2.0, lg.add(lg.sum(lg.mul(v, v), -2), 1.0))
            q = _linalg().householder_product(v, tau)
            with no_grad():  # +-1 from X's diagonal, truncated
                signs = lg.trunc(lg.diagonal(X, 0, -2, -1)).to(dt.int32)
            q = lg.mul(q, lg.unsqueeze(signs, -2))
        if "base" in self._buffers:
            q = lg.matmul(self.base, q)
        return q.mT if wide else q

    def right_inverse(self, Q: Tensor) -> Tensor:
        """An original that gives `Q`: with the trivialization, `base` becomes `Q`
        (orthogonalized by QR when it is not orthogonal; completed to n x n with random
        columns when rectangular) and the original is -I, which every map sends to I.
        Without it, only householder inverts: the reflectors of Q's QR factorization."""
        with no_grad():
            if tuple(Q.shape) != tuple(self.shape):
                raise ValueError(
                    f"Expected a matrix or batch of matrices of shape "
                    f"{self.shape}. Got a tensor of shape {Q.shape}."
                )
            given = Q
            n, k = Q.shape[-2], Q.shape[-1]
            wide = n < k
            if wide:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map != _OrthMaps.householder:
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the "
                        "Cayley parametrizations when use_trivialization=False."
                    )
                a, tau = lg.geqrf(Q)
                diag = lg.sign(lg.diagonal(a, 0, -2, -1))
                # a reflector LAPACK skipped (tau == 0) keeps its column's sign
                diag = lg.where(lg.eq(tau, 0.0), lg.neg(diag), diag)
                a = lg.diagonal_scatter(a, diag, 0, -2, -1)
                return a.mT if wide else a
            if n == k:
                base = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                extra = lg.randn(tuple(Q.shape[:-2]) + (n, n - k), dtype=Q.dtype)
                base = _make_orthogonal(lg.cat([Q, extra], -1))
            self.base = base
            neg_eye = lg.zeros_like(given)
            minus_ones = lg.full(
                tuple(lg.diagonal(neg_eye, 0, -2, -1).shape), -1.0, dtype=given.dtype
            )
            return lg.diagonal_scatter(neg_eye, minus_ones, 0, -2, -1)


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Reparametrize `module.<name>` (a matrix or a batch of matrices (..., m, n)) as an
    orthogonal (unitary, for complex) matrix: orthonormal columns when m >= n, rows
    otherwise.

    Args:
        module: the module holding the tensor.
        name: the tensor's name (default "weight").
        orthogonal_map: "matrix_exp", "cayley" or "householder"; by default "matrix_exp"
            for square or complex matrices, else "householder" (PyTorch's choice).
        use_trivialization: keep the `base` buffer (`parametrizations.<name>.0.base`) of
            the dynamic trivialization (default True); the initial value is then the
            tensor itself if it is orthogonal, else its QR orthogonalization.

    The random columns that complete a rectangular base come from llgrad's stream, so
    `base` differs from PyTorch's there; the parametrized matrix does not (load torch's
    `base` to reproduce its gradients too)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        orthogonal_map = (
            "matrix_exp"
            if weight.shape[-2] == weight.shape[-1] or weight.dtype.is_complex
            else "householder"
        )
    kind = getattr(_OrthMaps, orthogonal_map, None) if isinstance(orthogonal_map, str) else None
    if kind is None:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", '
            f'"householder". Got: {orthogonal_map}'
        )
    parametrize.register_parametrization(
        module, name, _Orthogonal(weight, kind, use_trivialization=use_trivialization), unsafe=True
    )
    return module
