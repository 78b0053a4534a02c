"""Unstructured pruning, PyTorch's mechanism: pruning `name` moves the parameter to
`<name>_orig`, adds a buffer `<name>_mask`, and a forward pre-hook sets `module.<name>` to
`<name>_orig * <name>_mask`. Pruning again applies the new amount to the entries still
unpruned and multiplies the masks. `remove` makes the pruned tensor a plain parameter.

Ties between equal magnitudes may be broken differently from PyTorch (llgrad takes the
first in row-major order)."""

from __future__ import annotations

import numbers
from typing import Any, Iterable

import numpy as np

from ... import functions as lg
from ...dispatch.grad_mode import no_grad
from ...tensor import Tensor
from ..modules.module import Module

__all__ = [
    "BasePruningMethod",
    "L1Unstructured",
    "RandomUnstructured",
    "CustomFromMask",
    "Identity",
    "l1_unstructured",
    "random_unstructured",
    "custom_from_mask",
    "identity",
    "global_unstructured",
    "remove",
    "is_pruned",
]


def _count(amount: int | float, n: int) -> int:
    """How many of n entries `amount` (a count, or a fraction in [0, 1]) prunes."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        if amount < 0:
            raise ValueError(
                f"amount={amount} should either be a float in the range [0, 1] "
                f"or a non-negative integer"
            )
        if amount > n:
            raise ValueError(
                f"amount={amount} should be smaller than the number of parameters to prune={n}"
            )
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise ValueError(
            f"amount={amount} should either be a float in the range [0, 1] or "
            f"a non-negative integer"
        )
    return int(round(amount * n))


class BasePruningMethod:
    """A pruning method: `compute_mask(t, default_mask)` and the hook that applies it."""

    PRUNING_TYPE = "unstructured"

    def __init__(self) -> None:
        self._tensor_name = ""

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The new mask for `t`, given the current one."""
        raise NotImplementedError(f"{type(self).__name__} must define compute_mask")

    def apply_mask(self, module: Module) -> Tensor:
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return lg.mul(orig, mask.to(orig.dtype))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @classmethod
    def apply(
        cls,
        module: Module,
        name: str,
        *args: Any,
        importance_scores: Tensor | None = None,
        **kwargs: Any,
    ) -> "BasePruningMethod":
        """Prune `module.<name>` with this method (combined with an earlier pruning)."""
        hooks = [
            (k, h)
            for k, h in module._forward_pre_hooks.items()
            if isinstance(h, BasePruningMethod) and h._tensor_name == name
        ]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if hooks:
            key, old = hooks[0]
            del module._forward_pre_hooks[key]
            orig = getattr(module, name + "_orig")
            default_mask = getattr(module, name + "_mask").detach().clone()
        else:
            orig = getattr(module, name)
            if not isinstance(orig, Tensor):
                raise AttributeError(
                    f"Parameter '{name}' of module {module} has to be "
                    f"modified and it does not exist"
                )
            module.register_parameter(name + "_orig", orig)
            default_mask = lg.ones_like(orig)
        scores = orig if importance_scores is None else importance_scores
        if scores.shape != orig.shape:
            raise ValueError(
                f"importance_scores should have the same shape as parameter {name} of {module}"
            )
        with no_grad():
            mask = method.compute_mask(scores.detach(), default_mask)
        if hooks:
            module._buffers[name + "_mask"] = mask
        else:
            module.register_buffer(name + "_mask", mask)
            del module._parameters[name]
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def remove(self, module: Module) -> None:
        """Make the pruned tensor the plain parameter `<name>` again."""
        with no_grad():
            weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        with no_grad():
            orig.copy_(weight)
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        module.register_parameter(self._tensor_name, orig)


def _keep_largest(scores: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """`mask` with the k smallest scores among the still-unpruned entries zeroed."""
    flat = mask.reshape(-1).copy()
    live = np.nonzero(flat)[0]
    if k:
        order = np.argsort(scores.reshape(-1)[live], kind="stable")[:k]
        flat[live[order]] = 0
    return flat.reshape(mask.shape)


class L1Unstructured(BasePruningMethod):
    """Zero the `amount` entries of smallest absolute value."""

    def __init__(self, amount: int | float) -> None:
        super().__init__()
        _count(amount, 10**18 if isinstance(amount, numbers.Integral) else 1)  # checks
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        mask = np.asarray(default_mask.numpy())
        k = _count(self.amount, int((mask != 0).sum()))
        out = _keep_largest(np.abs(np.asarray(t.numpy(), dtype=np.float64)), mask, k)
        return lg.tensor(out, dtype=default_mask.dtype)


class RandomUnstructured(BasePruningMethod):
    """Zero `amount` entries chosen at random (`lg.rand`, seeded by `lg.manual_seed`)."""

    def __init__(self, amount: int | float) -> None:
        super().__init__()
        _count(amount, 10**18 if isinstance(amount, numbers.Integral) else 1)  # checks
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        mask = np.asarray(default_mask.numpy())
        k = _count(self.amount, int((mask != 0).sum()))
        scores = np.asarray(
            lg.rand(
                t.shape, dtype=default_mask.dtype if default_mask.dtype.is_floating_point else None
            ).numpy()
        )
        return lg.tensor(_keep_largest(scores, mask, k), dtype=default_mask.dtype)


class CustomFromMask(BasePruningMethod):
    """Apply a given mask (multiplied into the current one)."""

    def __init__(self, mask: Tensor) -> None:
        super().__init__()
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return lg.mul(default_mask, self.mask.to(default_mask.dtype))


class Identity(BasePruningMethod):
    """Prune nothing (a mask of ones), to reparametrize without pruning."""

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask


def identity(module: Module, name: str) -> Module:
    """Reparametrize `module.<name>` as `<name>_orig * <name>_mask` with a mask of ones."""
    Identity.apply(module, name)
    return module


def l1_unstructured(
    module: Module, name: str, amount: int | float, importance_scores: Tensor | None = None
) -> Module:
    """Prune the `amount` (count or fraction) entries of `module.<name>` of smallest
    |importance| (the tensor itself by default)."""
    L1Unstructured.apply(module, name, amount, importance_scores=importance_scores)
    return module


def random_unstructured(module: Module, name: str, amount: int | float) -> Module:
    """Prune `amount` (count or fraction) random entries of `module.<name>`."""
    RandomUnstructured.apply(module, name, amount)
    return module


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune `module.<name>` where `mask` is 0."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(
    parameters: Iterable[tuple[Module, str]],
    pruning_method: type,
    importance_scores: dict[tuple[Module, str], Tensor] | None = None,
    **kwargs: Any,
) -> None:
    """Prune the (module, name) tensors together: `pruning_method` (L1Unstructured or
    RandomUnstructured) and its `amount` choose entries over all of them at once."""
    params = list(parameters)
    if not params:
        raise TypeError(
            "global_unstructured(): parameters must be a non-empty iterable of (module, name) pairs"
        )
    scores, masks = [], []
    for module, name in params:
        t = getattr(module, name + "_orig", None)
        if t is None:
            t = getattr(module, name)
        s = (importance_scores or {}).get((module, name), t)
        scores.append(np.asarray(s.detach().numpy(), dtype=np.float64).reshape(-1))
        m = getattr(module, name + "_mask", None)
        masks.append(
            np.ones(scores[-1].shape)
            if m is None
            else np.asarray(m.numpy(), dtype=np.float64).reshape(-1)
        )
    method = pruning_method(**kwargs)
    if getattr(method, "PRUNING_TYPE", "unstructured") != "unstructured":
        raise TypeError(
            f'Only "unstructured" PRUNING_TYPE supported for the '
            f"`pruning_method`. Found method {pruning_method} of type "
            f"{method.PRUNING_TYPE}"
        )
    all_scores = lg.tensor(np.concatenate(scores))
    all_mask = lg.tensor(np.concatenate(masks))
    final = np.asarray(method.compute_mask(all_scores, all_mask).numpy())
    start = 0
    for (module, name), s in zip(params, scores):
        n = s.shape[0]
        t = getattr(module, name + "_orig", None)
        shape = (t if t is not None else getattr(module, name)).shape
        piece = lg.tensor(final[start : start + n].reshape(tuple(shape)))
        custom_from_mask(module, name, piece)
        start += n


def remove(module: Module, name: str) -> Module:
    """Make the pruning of `module.<name>` permanent: `<name>` becomes a parameter holding
    the pruned values; `<name>_orig`, `<name>_mask` and the hook are removed."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module: Module) -> bool:
    """Whether a pruning hook is registered on `module` or any of its submodules."""
    return any(
        isinstance(h, BasePruningMethod)
        for m in module.modules()
        for h in m._forward_pre_hooks.values()
    )
