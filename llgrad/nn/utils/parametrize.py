"""Parametrizations: a module's tensor computed from an `original` by modules.

`register_parametrization(module, "weight", P)` moves `module.weight` to
`module.parametrizations.weight.original` (or `original0`, `original1`, ... when P's
`right_inverse` returns several tensors) and makes `module.weight` a property that returns
`P(original)`; assigning to it stores `P.right_inverse(value)`. The module's class is
swapped for a subclass named `Parametrized<Class>`, and state-dict keys are PyTorch's
(`parametrizations.weight.original`), so checkpoints load across.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ...dispatch.grad_mode import no_grad
from ...tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = [
    "register_parametrization",
    "remove_parametrizations",
    "is_parametrized",
    "cached",
    "type_before_parametrizations",
    "ParametrizationList",
    "transfer_parametrizations_and_params",
]

_cache_enabled = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Within this context each parametrized tensor is computed once (on first access)
    and reused."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _as_parameter(t: Tensor, like: Tensor | None) -> Tensor:
    if isinstance(t, Parameter):
        return t
    requires = like.requires_grad if like is not None else t.requires_grad
    if isinstance(like, Parameter) or like is None:
        return Parameter(t.detach(), requires)
    return t


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the `original`
    tensor(s) they start from."""

    def __init__(self, modules: list[Module], original: Tensor, unsafe: bool = False) -> None:
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:  # as PyTorch: the identity, here
                        pass
        if isinstance(new, Tensor):
            self.is_tensor = True
            self.ntensors = 1
            if not unsafe and (new.shape != original.shape or new.dtype != original.dtype):
                raise ValueError(
                    f"When `right_inverse` outputs one tensor, it may not change "
                    f"the shape or dtype.\noriginal.shape: {original.shape}\n"
                    f"right_inverse(original).shape: {new.shape}"
                )
            with no_grad():
                value = original
                if new is not original:
                    value = (
                        _as_parameter(new.detach().clone(), original)
                        if isinstance(original, Parameter)
                        else new.detach().clone()
                    )
            if isinstance(value, Parameter):
                self.register_parameter("original", value)
            else:
                self.register_buffer("original", value)
        else:
            self.is_tensor = False
            self.ntensors = len(new)
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError(
                        f"'right_inverse' must return a Tensor or a Sequence of "
                        f"tensors (list, tuple...). Got element {i} of type "
                        f"{type(t).__name__}"
                    )
                p = (
                    Parameter(t.detach().clone(), original.requires_grad)
                    if isinstance(original, Parameter)
                    else t.detach().clone()
                )
                if isinstance(p, Parameter):
                    self.register_parameter(f"original{i}", p)
                else:
                    self.register_buffer(f"original{i}", p)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != original.dtype or z.shape != original.shape:
                raise ValueError(
                    f"Registering a parametrization may not change the shape or "
                    f"dtype of the tensor, unless `unsafe` flag is enabled.\n"
                    f"unparametrized shape: {original.shape}\nparametrized "
                    f"shape: {z.shape}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Store in the original(s) what makes the parametrizations return `value`."""
        with no_grad():
            for m in reversed(self):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(
                        f"parametrization {type(m).__name__} does not implement right_inverse."
                    )
                value = m.right_inverse(value)
            if self.is_tensor:
                self.original.copy_(value)
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self) -> Tensor:  # type: ignore[override]
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in list(self)[1:]:
            x = m(x)
        return x

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward()

    def __repr__(self) -> str:
        return Module.__repr__(self)


def _make_parametrized_class(module: Module) -> None:
    cls = type(module)
    new = type(f"Parametrized{cls.__name__}", (cls,), {"__module__": cls.__module__})
    new._original_class = cls  # type: ignore[attr-defined]
    module.__class__ = new


def _inject_property(module: Module, name: str) -> None:
    def getter(self: Module) -> Tensor:
        plist = self.parametrizations[name]
        if _cache_enabled:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()

    def setter(self: Module, value: Tensor) -> None:
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(getter, setter))


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether `module` (or its tensor `tensor_name`) has a parametrization."""
    plist = module.__dict__.get("_modules", {}).get("parametrizations")
    if plist is None or not isinstance(plist, ModuleDict):
        return False
    return len(plist) > 0 if tensor_name is None else tensor_name in plist


def type_before_parametrizations(module: Module) -> type:
    """The module's class before any parametrization was registered."""
    return (
        getattr(type(module), "_original_class", type(module))
        if is_parametrized(module)
        else type(module)
    )


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make `module.<tensor_name>` the output of `parametrization` (chained after any
    earlier ones). Returns the module."""
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the shape or "
                    "dtype of the tensor, unless `unsafe` flag is enabled."
                )
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name in module._parameters or tensor_name in module._buffers:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _make_parametrized_class(module)
            module.parametrizations = ModuleDict()
        module.parametrizations[tensor_name] = plist
        _inject_property(module, tensor_name)
        return module
    raise ValueError(
        f"Module '{module}' does not have a parameter, a buffer, or a "
        f"parametrized element with name '{tensor_name}'"
    )


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Undo the parametrizations of `tensor_name`: it becomes a plain parameter (or
    buffer) holding the parametrized value (`leave_parametrized`) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            with no_grad():
                if t.shape == original.shape and t.dtype == original.dtype:
                    original.copy_(t)
                    value = original
                else:
                    value = (
                        Parameter(t.detach(), original.requires_grad)
                        if isinstance(original, Parameter)
                        else t.detach()
                    )
        else:
            value = original
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a "
                "tensor that is parametrized in terms of a sequence of tensors."
            )
        with no_grad():
            t = getattr(module, tensor_name)
        value = Parameter(t.detach(), plist.original0.requires_grad)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(value, Parameter):
        module.register_parameter(tensor_name, value)
    else:
        module.register_buffer(tensor_name, value)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module)._original_class  # type: ignore[attr-defined]
    return module


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Register on `to_module` the parametrizations of `from_module` (all, or those of
    `tensor_name`), with copies of their originals."""
    if not is_parametrized(from_module):
        return to_module
    names = [tensor_name] if tensor_name is not None else list(from_module.parametrizations)
    for name in names:
        src = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach().clone()))
        for p in src:
            register_parametrization(to_module, name, p)
        dst = to_module.parametrizations[name]
        with no_grad():
            if src.is_tensor:
                dst.original.copy_(src.original)
            else:
                for i in range(src.ntensors):
                    getattr(dst, f"original{i}").copy_(getattr(src, f"original{i}"))
    return to_module
