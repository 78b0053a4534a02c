"""`spectral_norm` / `remove_spectral_norm`: the hook-based spectral normalization of
`torch.nn.utils` (parameter `<name>_orig`, buffers `<name>_u` and `<name>_v`, the weight
divided by its power-iteration estimate of the largest singular value before every
forward; the iteration runs in training mode only)."""

from __future__ import annotations

from typing import Any

from ... import functions as lg
from ...dispatch.grad_mode import no_grad
from ...tensor import Tensor
from ..modules.module import Module
from ..parameter import Parameter
from .parametrizations import _normalize

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that sets `module.<name>` to weight_orig / sigma."""

    def __init__(
        self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """The weight as a matrix with dimension `dim` as its rows."""
        if self.dim != 0:
            weight = lg.movedim(weight, self.dim, 0)
        return lg.reshape(weight, (weight.shape[0], -1))

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(lg.mv(lg.t(mat), u), self.eps))
                    u.copy_(_normalize(lg.mv(mat, v), self.eps))
                u = u.clone()
                v = v.clone()
        sigma = lg.dot(u, lg.mv(mat, v))
        return lg.div(weight, sigma)

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    @staticmethod
    def apply(
        module: Module, name: str, n_power_iterations: int, dim: int, eps: float
    ) -> "SpectralNorm":
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two spectral_norm hooks on the same parameter {name}"
                )
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            mat = fn.reshape_weight_to_matrix(weight)
            h, w = mat.shape
            u = _normalize(lg.randn(h, dtype=weight.dtype), eps)
            v = _normalize(lg.randn(w, dtype=weight.dtype), eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divide `module.<name>` by its spectral norm before each forward (`dim` defaults to
    1 for transposed convolutions, else 0). u and v start random (llgrad's stream)."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Fold the spectral normalization back into one parameter `<name>`."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
