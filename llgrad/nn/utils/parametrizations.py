"""Parametrizations built on `parametrize.register_parametrization`: `weight_norm`
(magnitude `original0` and direction `original1`) and `spectral_norm` (the weight
divided by its largest singular value, estimated by power iteration with the `_u`, `_v`
buffers), with PyTorch's state-dict keys. (`orthogonal` is not provided yet.)"""
from __future__ import annotations

from ... import functions as lg
from ...autograd.grad_mode import no_grad
from ...tensor import Tensor
from ..modules.module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm"]


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

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
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


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Reparametrize `module.<name>` as weight / sigma (see `_SpectralNorm`); `dim`
    defaults to 1 for transposed convolutions, else 0. The power iteration starts from
    random vectors (llgrad's stream, not PyTorch's); load `_u`/`_v` to reproduce."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module

