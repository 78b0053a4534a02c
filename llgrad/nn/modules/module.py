"""`Module`: the base class of layers and models, with PyTorch's registration rules.

Assigning a `Parameter`, a `Module` or (through `register_buffer`) a buffer tensor to an
attribute records it in an ordered table; traversal (`parameters()`, `named_modules()`,
`state_dict()`) walks those tables in registration order, so names and order match
PyTorch's for the same model definition. `load_state_dict` copies values into the existing
tensors (keeping every Parameter object, which optimizers hold on to).

Hooks are PyTorch's: forward pre-hooks and hooks (`with_kwargs`, `prepend`,
`always_call`), full backward hooks and backward pre-hooks (identity autograd functions
around the module's tensor inputs and outputs see their gradients), state-dict and
load-state-dict hooks.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator, Mapping

from ...autograd.api import zero_grads
from ...tape.function import Function
from ...tape.node import RemovableHandle
from ...device import device_type
from ...dispatch.grad_mode import is_grad_enabled, no_grad
from ...functions.misc import parse_to
from ...ir import dtypes as dt
from ...tensor import Tensor
from ..parameter import Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """`load_state_dict`'s result: the keys the model missed and the unexpected ones."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (
            f"_IncompatibleKeys(missing_keys={self.missing_keys!r}, "
            f"unexpected_keys={self.unexpected_keys!r})"
        )

    __str__ = __repr__


_EXTRA_STATE_KEY_SUFFIX = "_extra_state"


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * spaces + line for line in lines)


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')


class _Handle(RemovableHandle):
    """A hook handle that also forgets the hook's flags (with_kwargs, always_call)."""

    def __init__(self, store: dict[int, Callable], *extra: dict[int, Any]) -> None:
        super().__init__(store)
        self._extra = extra

    def remove(self) -> None:
        super().remove()
        for table in self._extra:
            table.pop(self.id, None)


_HOOK_TABLES = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


# --------------------------------------------------------------------------------------
# Full backward hooks: identity functions around the module's tensor inputs and outputs
# --------------------------------------------------------------------------------------


def _identity_function() -> type:
    class BackwardHookFunction(Function):
        """Passes tensors through; its backward hands their gradients to `on_grads`."""

        @staticmethod
        def forward(ctx: Any, on_grads: Callable, *tensors: Tensor) -> Any:
            ctx.on_grads = on_grads
            return tuple(t.view_as(t) for t in tensors)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            return (None,) + tuple(ctx.on_grads(grads))

    return BackwardHookFunction


_BackwardHookFunction = _identity_function()


class _BackwardHook:
    """One call's wiring of a module's full backward hooks and backward pre-hooks."""

    def __init__(self, module: "Module") -> None:
        self.module = module
        self.n_inputs = 0
        self.input_grad_positions: list[int] = []
        self.grad_outputs: tuple[Any, ...] | None = None

    def _wrap(self, values: list[Any], positions: list[int], on_grads: Callable) -> None:
        outs = _BackwardHookFunction.apply(on_grads, *[values[i] for i in positions])
        if isinstance(outs, Tensor):
            outs = (outs,)
        for i, o in zip(positions, outs):
            values[i] = o

    def setup_inputs(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        tensors = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs = len(tensors)
        positions = [i for i in tensors if args[i].requires_grad]
        self.input_grad_positions = [tensors.index(i) for i in positions]
        if not positions:
            return args
        values = list(args)
        self._wrap(values, positions, self._on_input_grads)
        return tuple(values)

    def _on_input_grads(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        full: list[Any] = [None] * self.n_inputs
        for k, g in zip(self.input_grad_positions, grads):
            full[k] = g
        grad_input = tuple(full)
        for hook in list(self.module.__dict__["_backward_hooks"].values()):
            res = hook(self.module, grad_input, self.grad_outputs)
            if res is None:
                continue
            res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            if len(res) != len(grad_input):
                raise RuntimeError(
                    f"Backward hook returned an invalid number of grad_input, "
                    f"got {len(res)}, but expected {len(grad_input)}"
                )
            grad_input = res
        return tuple(grad_input[k] for k in self.input_grad_positions)

    def setup_outputs(self, result: Any) -> Any:
        single = isinstance(result, Tensor)
        values = (
            [result] if single else (list(result) if isinstance(result, (tuple, list)) else None)
        )
        if values is None:
            return result
        positions = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
        if not positions:
            return result
        n_out = sum(1 for v in values if isinstance(v, Tensor))
        tensor_index = [sum(1 for v in values[:i] if isinstance(v, Tensor)) for i in positions]

        def on_grads(grads: tuple[Any, ...]) -> tuple[Any, ...]:
            full: list[Any] = [None] * n_out
            for k, g in zip(tensor_index, grads):
                full[k] = g
            grad_output = tuple(full)
            for hook in list(self.module.__dict__["_backward_pre_hooks"].values()):
                res = hook(self.module, grad_output)
                if res is None:
                    continue
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_output):
                    raise RuntimeError(
                        f"Backward pre hook returned an invalid number of "
                        f"grad_output, got {len(res)}, but expected "
                        f"{len(grad_output)}"
                    )
                grad_output = res
            self.grad_outputs = grad_output
            if not self.input_grad_positions:  # no input needs a gradient: call now
                grad_input = (None,) * self.n_inputs
                for hook in list(self.module.__dict__["_backward_hooks"].values()):
                    res = hook(self.module, grad_input, grad_output)
                    if res is not None and not all(r is None for r in res):
                        raise RuntimeError(
                            "Backward hook for Modules where no input requires "
                            "gradient should always return None or None for "
                            "all gradients."
                        )
            return tuple(grad_output[k] for k in tensor_index)

        self._wrap(values, positions, on_grads)
        if single:
            return values[0]
        return (
            type(result)(values)
            if isinstance(result, list)
            else tuple(values)
            if type(result) is tuple
            else type(result)(*values)
        )


class Module:
    """Base class for all neural network modules (subclass it and define `forward`)."""

    training: bool
    _version: int = 1
    call_super_init: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments {args!r} {kwargs!r}"
            )
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        for table in _HOOK_TABLES:
            d[table] = OrderedDict()

    # -- forward --------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # PyTorch raises NotImplementedError here too: a subclass that forgot `forward`.
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        if "_forward_hooks" not in d:
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute "
                f"'_forward_hooks' (did its __init__ call "
                f"super().__init__()?)"
            )
        if not (
            d["_forward_pre_hooks"]
            or d["_forward_hooks"]
            or d["_backward_hooks"]
            or d["_backward_pre_hooks"]
        ):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        d = self.__dict__
        with_kwargs = d["_forward_pre_hooks_with_kwargs"]
        for hid, hook in list(d["_forward_pre_hooks"].items()):
            if hid in with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(
                            f"forward pre-hook must return None or a tuple of "
                            f"(new_args, new_kwargs), but got {res}."
                        )
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw = None
        if (d["_backward_hooks"] or d["_backward_pre_hooks"]) and is_grad_enabled():
            bw = _BackwardHook(self)
            args = bw.setup_inputs(args)
        called: set[int] = set()
        hooks_kw = d["_forward_hooks_with_kwargs"]
        try:
            result = self.forward(*args, **kwargs)
            for hid, hook in list(d["_forward_hooks"].items()):
                called.add(hid)
                res = (
                    hook(self, args, kwargs, result)
                    if hid in hooks_kw
                    else hook(self, args, result)
                )
                if res is not None:
                    result = res
        except Exception:
            for hid, hook in list(d["_forward_hooks"].items()):
                if hid in d["_forward_hooks_always_called"] and hid not in called:
                    try:
                        if hid in hooks_kw:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception as e:  # PyTorch warns and keeps the first error
                        warnings.warn(
                            f"global module forward hook with ``always_call=True`` "
                            f"raised an exception that was silenced as another "
                            f"error was raised in forward: {e}",
                            stacklevel=2,
                        )
            raise
        if bw is not None:
            result = bw.setup_outputs(result)
        return result

    def _add_hook(
        self, table_name: str, hook: Callable, prepend: bool, *flags: str
    ) -> RemovableHandle:
        table = self.__dict__[table_name]
        handle = _Handle(table, *(self.__dict__[f] for f in flags))
        if prepend:
            items = list(table.items())
            table.clear()
            table[handle.id] = hook
            table.update(items)
        else:
            table[handle.id] = hook
        return handle

    def register_forward_hook(
        self,
        hook: Callable,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:
        """`hook(module, args, output)` (or `hook(module, args, kwargs, output)` with
        `with_kwargs`) after `forward`; a non-None result replaces the output.
        `always_call` runs it even when forward raises (with output None)."""
        handle = self._add_hook(
            "_forward_hooks",
            hook,
            prepend,
            "_forward_hooks_with_kwargs",
            "_forward_hooks_always_called",
        )
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """`hook(module, args)` before `forward`, a non-None result replaces the args; with
        `with_kwargs`, `hook(module, args, kwargs)` returning None or (args, kwargs)."""
        handle = self._add_hook(
            "_forward_pre_hooks", hook, prepend, "_forward_pre_hooks_with_kwargs"
        )
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """`hook(module, grad_input, grad_output)` once the gradients of the module's tensor
        inputs are computed (one entry per positional tensor argument, None where it needs
        none); a non-None result replaces grad_input."""
        return self._add_hook("_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """`hook(module, grad_output)` once the gradients of the module's outputs are
        known; a non-None result replaces grad_output."""
        return self._add_hook("_backward_pre_hooks", hook, prepend)

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """`hook(module, prefix, keep_vars)` before this module's `state_dict` entries."""
        return self._add_hook("_state_dict_pre_hooks", hook, False)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """`hook(module, state_dict, prefix, local_metadata)` after them (may edit it in
        place; must return None)."""
        return self._add_hook("_state_dict_hooks", hook, False)

    _register_state_dict_hook = register_state_dict_post_hook

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """`hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)` before this module loads its entries."""
        return self._add_hook("_load_state_dict_pre_hooks", hook, False)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """`hook(module, incompatible_keys)` after `load_state_dict` (may edit the key
        lists in place)."""
        return self._add_hook("_load_state_dict_post_hooks", hook, False)

    # -- registration ---------------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register `param` (a Parameter or None) under `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter "
                f"'{name}' (llgrad.nn.Parameter or None required)"
            )
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                f"parameters must be created explicitly. To express '{name}' as "
                f"a function of another Tensor, compute the value in the forward() "
                f"method."
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register a tensor that is state but not a parameter; non-persistent buffers are
        left out of `state_dict`."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer "
                f"'{name}' (Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Register `module` (or None) as the child `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    def register_module(self, name: str, module: "Module | None") -> None:
        """Alias of `add_module`."""
        self.add_module(name, module)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    f"(llgrad.nn.Parameter or None expected)"
                )
            params[name] = None
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module "
                    f"'{name}' (llgrad.nn.Module or None expected)"
                )
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    f"(Tensor or None expected)"
                )
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        """Drop `name` from every table before it is registered in another one."""
        self.__dict__.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            self.__dict__[table].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in ("_parameters", "_buffers", "_modules"):
            t = self.__dict__.get(table)
            if t is not None and name in t:
                del t[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for table in _HOOK_TABLES:  # modules pickled by older versions
            self.__dict__.setdefault(table, OrderedDict())

    def __dir__(self) -> list[str]:
        keys = set(super().__dir__())
        for table in ("_parameters", "_buffers", "_modules"):
            keys.update(self.__dict__.get(table, {}))
        return sorted(k for k in keys if not k[0].isdigit())

    def get_submodule(self, target: str) -> "Module":
        """The submodule at the dotted path `target` ('' is this module)."""
        mod: Module = self
        if target == "":
            return mod
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            child = getattr(mod, item)
            if not isinstance(child, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
            mod = child
        return mod

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Replace (or, unless `strict`, add) the submodule at the dotted path `target`."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        path, _, name = target.rpartition(".")
        parent = self.get_submodule(path)
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path `target`."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return p

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path `target`."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    def get_extra_state(self) -> Any:
        """State to store in `state_dict` under `_extra_state` (override with
        `set_extra_state`; the base class has none)."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called."
        )

    def set_extra_state(self, state: Any) -> None:
        """Restore what `get_extra_state` returned."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called."
        )

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    # -- traversal ------------------------------------------------------------------------
    def named_modules(
        self, memo: set[Any] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, "Module"]]:
        """(dotted name, module) for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo or self in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """Every module of the tree, this one first."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """(name, module) for the direct children (each module once)."""
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        """The direct children."""
        for _, m in self.named_children():
            yield m

    def _named_members(
        self, table: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        mods = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for mod_prefix, module in mods:
            for name, value in module.__dict__[table].items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter); shared parameters once unless `remove_duplicate` is
        False; only this module's own with `recurse=False`."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)  # type: ignore[misc]

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of `named_parameters`."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer), persistent or not."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers of `named_buffers`."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes ----------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (or evaluation with False) here and in every descendant."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        """`train(False)`."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Set `requires_grad` of every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's `.grad` (to None, or to zeros with set_to_none=False)."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
        """Call `fn` on every descendant (children first), then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- conversions ----------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        """Convert every parameter and buffer in place: Parameters keep their identity."""
        for module in self.children():
            module._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                p.data = fn(p.data)
                if p._grad is not None:
                    p._grad = fn(p._grad.detach())
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """`to(dtype)`, `to(tensor)`, `to("cpu")` or `to("cuda")`: floating tensors take
        the dtype; every parameter and buffer moves to the device (Parameters keep their
        identity, so optimizers made before still hold them)."""
        dtype, _, where, _ = parse_to(args, kwargs, "Module.to")
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but "
                f"got desired dtype={dtype}"
            )
        if where is not None:
            self._apply(lambda t: t.to(where))
        if dtype is None:
            return self
        return self._apply(lambda t: t.to(dtype) if t._dtype.is_floating_point else t)

    def float(self) -> "Module":
        """Floating parameters and buffers to float32."""
        return self.to(dt.float32)

    def double(self) -> "Module":
        """Floating parameters and buffers to float64."""
        return self.to(dt.float64)

    def half(self) -> "Module":
        """Floating parameters and buffers to float16."""
        return self.to(dt.float16)

    def bfloat16(self) -> "Module":
        """Floating parameters and buffers to bfloat16."""
        return self.to(dt.bfloat16)

    def cpu(self) -> "Module":
        """Every parameter and buffer in host memory (Parameters keep their identity)."""
        return self._apply(lambda t: t.cpu())

    def cuda(self, device: Any = None) -> "Module":
        """Every parameter and buffer in CUDA device memory (raises when no GPU, or the
        grid emulator, is available)."""
        device_type(
            "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device),
            "Module.cuda()",
        )
        return self._apply(lambda t: t.cuda())

    def type(self, dst_type: Any) -> "Module":
        """Every parameter and buffer to `dst_type` (a dtype, a legacy type or its name)."""
        return self._apply(lambda t: t.type(dst_type))

    def share_memory(self) -> "Module":
        """Parameters and buffers in shared memory: llgrad's tensors live in process memory
        that worker processes of `utils.data` (run in-process) already share; returns self."""
        return self

    # -- state dicts ----------------------------------------------------------------------
    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state():
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(
        self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> "OrderedDict[str, Tensor]":
        """Parameters, persistent buffers (and extra state) by dotted name, detached unless
        `keep_vars`; `_metadata` holds each module's version, as PyTorch's."""
        if args:
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead. Refer to "
                "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch."
                "nn.Module.state_dict for details.",
                FutureWarning,
                stacklevel=2,
            )
            names = ("destination", "prefix", "keep_vars")
            given = dict(zip(names, args))
            destination = given.get("destination", destination)
            prefix = given.get("prefix", prefix)
            keep_vars = given.get("keep_vars", keep_vars)
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()  # type: ignore[attr-defined]
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(
                    destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars
                )
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, local_metadata)
            if res is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _load_from_state_dict(
        self,
        state_dict: Mapping[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Load this module's own entries (PyTorch's signature; override to migrate old
        checkpoints). `local_metadata['assign_to_params_buffers']` is load_state_dict's
        `assign`."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(
                self,
                state_dict,
                prefix,
                local_metadata,
                strict,
                missing_keys,
                unexpected_keys,
                error_msgs,
            )
        assign = local_metadata.get("assign_to_params_buffers", False)
        local: dict[str, Tensor] = {}
        for name, p in self._parameters.items():
            if p is not None:
                local[name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                local[name] = b
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected '
                    f"Tensor or Tensor-like object from checkpoint but received "
                    f"{type(value)}"
                )
                continue
            if getattr(param, "_lazy_uninitialized", False):
                self._materialize_from(name, param, value)
                continue
            if param.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:
                value = value[0]
            if value._shape != param._shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape "
                    f"{value.shape} from checkpoint, the shape in current model "
                    f"is {param.shape}."
                )
                continue
            try:
                with no_grad():
                    if assign:
                        self._assign(name, param, value)
                    else:
                        param.copy_(value)
            except Exception as e:  # report every failing key at once, like PyTorch
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose '
                    f"dimensions in the model are {param.shape} and whose "
                    f"dimensions in the checkpoint are {value.shape}, an "
                    f"exception occurred : {e.args}."
                )
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if self._has_extra_state():
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix) or key == extra_key:
                    continue
                parts = key[len(prefix) :].split(".", 1)
                if len(parts) > 1:
                    if parts[0] not in self._modules:
                        unexpected_keys.append(key)
                elif parts[0] not in local:
                    unexpected_keys.append(key)

    def _materialize_from(self, name: str, param: Tensor, value: Tensor) -> None:
        """A lazy module's uninitialized parameter or buffer takes `value`'s shape (in
        place: the same object) and values."""
        param.materialize(tuple(value.shape))  # type: ignore[attr-defined]
        with no_grad():
            param.copy_(value)

    def _assign(self, name: str, old: Tensor, value: Tensor) -> None:
        if isinstance(old, Parameter):
            self._parameters[name] = (
                value
                if isinstance(value, Parameter)
                else Parameter(value.detach(), old._requires_grad)
            )
        else:
            self._buffers[name] = value

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Copy `state_dict`'s tensors into this module's parameters and buffers (or, with
        `assign`, make them this module's tensors).

        Size mismatches always raise; missing and unexpected keys raise when `strict`
        (all problems are listed in one error), else they are returned as
        `_IncompatibleKeys(missing_keys, unexpected_keys)`.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata  # type: ignore[attr-defined]

        def load(module: Module, local_state: Mapping[str, Any], prefix: str) -> None:
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(
                local_state, prefix, local_metadata, True, missing, unexpected, errors
            )
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {
                        k: v for k, v in local_state.items() if k.startswith(child_prefix)
                    }
                    load(child, child_state, child_prefix)
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, keys) is not None:
                    raise RuntimeError("load_state_dict post-hook must return None")

        load(self, state_dict, "")
        if strict:
            if unexpected:
                errors.insert(
                    0,
                    "Unexpected key(s) in state_dict: {}. ".format(
                        ", ".join(f'"{k}"' for k in unexpected)
                    ),
                )
            if missing:
                errors.insert(
                    0,
                    "Missing key(s) in state_dict: {}. ".format(
                        ", ".join(f'"{k}"' for k in missing)
                    ),
                )
        if errors:
            raise RuntimeError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(
                    type(self).__name__, "\n\t".join(errors)
                )
            )
        return _IncompatibleKeys(missing, unexpected)

    # -- printing -------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr line (override it)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"
