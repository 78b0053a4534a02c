"""`Module`: the base class of layers and models, with PyTorch's registration rules.

Assigning a `Parameter`, a `Module` or (through `register_buffer`) a buffer tensor to an
attribute records it in an ordered table; traversal (`parameters()`, `named_modules()`,
`state_dict()`) walks those tables in registration order, so names and order match
PyTorch's for the same model definition. `load_state_dict` copies values into the existing
tensors (keeping every Parameter object, which optimizers hold on to).
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator, Mapping

from ...autograd.grad_mode import no_grad
from ...autograd.node import RemovableHandle
from ...ir import dtypes as dt
from ...ir.dtypes import DType
from ...tensor import Tensor
from ..parameter import Parameter

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


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


class Module:
    """Base class for all neural network modules (subclass it and define `forward`)."""

    training: bool
    _version: int = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments "
                            f"{args!r} {kwargs!r}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_hooks"] = {}
        d["_forward_pre_hooks"] = {}

    # -- forward --------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # PyTorch raises NotImplementedError here too: a subclass that forgot `forward`.
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        if "_forward_hooks" not in d:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                 f"'_forward_hooks' (did its __init__ call "
                                 f"super().__init__()?)")
        if d["_forward_pre_hooks"]:
            for hook in list(d["_forward_pre_hooks"].values()):
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        out = self.forward(*args, **kwargs)
        if d["_forward_hooks"]:
            for hook in list(d["_forward_hooks"].values()):
                result = hook(self, args, out)
                if result is not None:
                    out = result
        return out

    def _add_hook(self, table_name: str, hook: Callable, prepend: bool) -> RemovableHandle:
        table = self.__dict__[table_name]
        handle = RemovableHandle(table)
        if prepend:
            items = list(table.items())
            table.clear()
            table[handle.id] = hook
            table.update(items)
        else:
            table[handle.id] = hook
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False
                              ) -> RemovableHandle:
        """`hook(module, args, output)` after `forward`; a non-None result replaces output."""
        return self._add_hook("_forward_hooks", hook, prepend)

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False
                                  ) -> RemovableHandle:
        """`hook(module, args)` before `forward`; a non-None result replaces the args."""
        return self._add_hook("_forward_pre_hooks", hook, prepend)

    # -- registration ---------------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (llgrad.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as "
                             f"a function of another Tensor, compute the value in the forward() "
                             f"method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True
                        ) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

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
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(llgrad.nn.Parameter or None expected)")
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
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (llgrad.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(Tensor or None expected)")
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

    def __dir__(self) -> list[str]:
        keys = set(super().__dir__())
        for table in ("_parameters", "_buffers", "_modules"):
            keys.update(self.__dict__.get(table, {}))
        return sorted(k for k in keys if not k[0].isdigit())

    def get_submodule(self, target: str) -> "Module":
        mod: Module = self
        if target == "":
            return mod
        for item in target.split("."):
            child = mod._modules.get(item)
            if child is None:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = child
        return mod

    def get_parameter(self, target: str) -> Parameter:
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        p = mod._parameters.get(name)
        if p is None:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return p

    # -- traversal ------------------------------------------------------------------------
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, table: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, module in mods:
            for name, value in module.__dict__[table].items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members("_parameters", prefix, recurse,
                                       remove_duplicate)  # type: ignore[misc]

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes ----------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        from ...autograd.api import zero_grads
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
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
        """`to(dtype)`, `to(tensor)` or `to("cpu")`: floating tensors take the dtype."""
        from ...functions.misc import parse_to_args
        dtype, _ = parse_to_args(args, kwargs)
        if dtype is None:
            return self
        if not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")
        return self._apply(lambda t: t.to(dtype) if t._dtype.is_floating_point else t)

    def float(self) -> "Module":
        return self.to(dt.float32)

    def double(self) -> "Module":
        return self.to(dt.float64)

    def half(self) -> "Module":
        return self.to(dt.float16)

    def bfloat16(self) -> "Module":
        return self.to(dt.bfloat16)

    def cpu(self) -> "Module":
        return self

    def cuda(self, device: Any = None) -> "Module":
        from ...device import check_device
        check_device("cuda" if device is None else
                     (f"cuda:{device}" if isinstance(device, int) else device), "Module.cuda()")
        return self

    def type(self, dst_type: Any) -> "Module":
        """Every parameter and buffer to `dst_type` (a dtype, a legacy type or its name)."""
        return self._apply(lambda t: t.type(dst_type))

    # -- state dicts ----------------------------------------------------------------------
    def state_dict(self, *args: Any, destination: Any = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by dotted name (detached unless keep_vars)."""
        if args:
            raise TypeError("state_dict() takes keyword arguments only (destination=, "
                            "prefix=, keep_vars=)")
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str,
                              missing: list[str], unexpected: list[str], errors: list[str],
                              assign: bool) -> None:
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
                missing.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected Tensor or '
                              f'Tensor-like object from checkpoint but received '
                              f'{type(value).__name__}')
                continue
            if value._shape != param._shape:
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{value.shape} from checkpoint, the shape in current model is "
                              f"{param.shape}.")
                continue
            try:
                with no_grad():
                    if assign:
                        self._assign(name, param, value)
                    else:
                        param.copy_(value)
            except Exception as e:       # report every failing key at once, like PyTorch
                errors.append(f'While copying the parameter named "{key}", whose dimensions '
                              f'in the model are {param.shape} and whose dimensions in the '
                              f'checkpoint are {value.shape}, an exception occurred : '
                              f'{e.args}.')
        for key in state_dict:
            if key.startswith(prefix):
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local:
                    unexpected.append(key)

    def _assign(self, name: str, old: Tensor, value: Tensor) -> None:
        if isinstance(old, Parameter):
            self._parameters[name] = value if isinstance(value, Parameter) else \
                Parameter(value.detach(), old._requires_grad)
        else:
            self._buffers[name] = value

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy `state_dict`'s tensors into this module's parameters and buffers.

        Size mismatches always raise; missing and unexpected keys raise when `strict`
        (all problems are listed in one error), else they are returned.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got "
                            f"{type(state_dict).__name__}.")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []

        def load(module: Module, prefix: str) -> None:
            module._load_from_state_dict(state_dict, prefix, missing, unexpected, errors,
                                         assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
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
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"
