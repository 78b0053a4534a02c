"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`,
with PyTorch's naming, numbering and operators."""

from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from ...tensor import Tensor
from ..parameter import Parameter
from .module import Module, _addindent


def _index(idx: Any, n: int, what: str) -> int:
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(f"index {idx} is out of range")
    return i % n


def _renumber(module: Module, items: Iterable[Module]) -> None:
    table = module.__dict__["_modules"]
    table.clear()
    for i, m in enumerate(items):
        table[str(i)] = m


class Sequential(Module):
    """Calls its modules in order, each on the previous one's output.

    `Sequential(m0, m1, ...)` names them "0", "1", ...; `Sequential(OrderedDict(...))`
    keeps the given names. Indexing, slicing (a new Sequential), `append`, `insert`,
    `extend`, `pop`, `del`, `+`, `+=`, `*` and `*=` behave as PyTorch's (deleting renumbers
    the remaining modules "0", "1", ...)."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input: Any) -> Any:
        for module in self._modules.values():
            input = module(input)
        return input

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __dir__(self) -> list[str]:
        return [k for k in super().__dir__() if not k.isdigit()]

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_index(idx, len(keys), "Sequential")]]

    def __setitem__(self, idx: int, module: Module) -> None:
        keys = list(self._modules)
        setattr(self, keys[_index(idx, len(keys), "Sequential")], module)

    def __delitem__(self, idx: Any) -> None:
        keys = list(self._modules)
        chosen = (
            keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(keys), "Sequential")]]
        )
        for k in chosen:
            del self._modules[k]
        _renumber(self, list(self._modules.values()))

    def pop(self, key: int | slice) -> Module:
        """Remove and return the module at `key`."""
        v = self[key]
        del self[key]
        return v

    def append(self, module: Module) -> "Sequential":
        """Add `module` at the end (named by its position)."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, sequential: Iterable[Module]) -> "Sequential":
        """Append every module of `sequential`."""
        for m in sequential:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        """Insert `module` before position `index` (negative counts from the end)."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)
        return self

    def __add__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(
                f"add operator supports only objects of Sequential class, but "
                f"{type(other)} is given."
            )
        out = Sequential()
        for m in list(self) + list(other):
            out.append(m)
        return out

    def __iadd__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(
                f"add operator supports only objects of Sequential class, but "
                f"{type(other)} is given."
            )
        offset = len(self)
        for i, m in enumerate(list(other)):
            self.add_module(str(i + offset), m)
        return self

    def _repeat_check(self, other: Any) -> None:
        if not isinstance(other, int) or isinstance(other, bool):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")

    def __mul__(self, other: int) -> "Sequential":
        self._repeat_check(other)
        out = Sequential()
        for m in list(self) * other:
            out.append(m)
        return out

    __rmul__ = __mul__

    def __imul__(self, other: int) -> "Sequential":
        self._repeat_check(other)
        items = list(self)
        for m in items * (other - 1):
            self.append(m)
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered (named "0", "1", ...); its repr
    folds runs of equal modules ("(0-2): 3 x Linear(...)") as PyTorch's."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __dir__(self) -> list[str]:
        return [k for k in super().__dir__() if not k.isdigit()]

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx: Any) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(items), "ModuleList")]
        _renumber(self, items)

    def pop(self, key: int | slice) -> Module:
        """Remove and return the module at `key`."""
        v = self[key]
        del self[key]
        return v

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList(list(self) + list(other))

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def append(self, module: Module) -> "ModuleList":
        """Add `module` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Append every module of the iterable `modules`."""
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(
                f"ModuleList.extend should be called with an iterable, but got "
                f"{type(modules).__name__}"
            )
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert `module` before position `index`."""
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __repr__(self) -> str:
        texts = [repr(m) for m in self]
        if not texts:
            return self._get_name() + "()"
        runs: list[list[Any]] = []  # [first index, last index, text]
        for i, text in enumerate(texts):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = []
        for first, last, text in runs:
            head = f"({first}): " if first == last else f"({first}-{last}): {last - first + 1} x "
            lines.append(_addindent(head + text, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{type(self).__name__} is a container and has no forward(); call its modules"
        )


class ModuleDict(Module):
    """A dict of modules whose parameters are registered under their keys."""

    def __init__(
        self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None
    ) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove `key` and return its module."""
        v = self[key]
        del self[key]
        return v

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Module]]:
        """(key, module) pairs."""
        return self._modules.items()

    def values(self) -> Iterable[Module]:
        """The modules."""
        return self._modules.values()

    def update(self, modules: Any) -> None:
        """Add or replace modules from a mapping or an iterable of (key, module) pairs."""
        if not isinstance(modules, Iterable):
            raise TypeError(
                f"ModuleDict.update should be called with an iterable of "
                f"key/value pairs, but got {type(modules).__name__}"
            )
        if isinstance(modules, (OrderedDict, ModuleDict, Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        for i, pair in enumerate(modules):
            if not isinstance(pair, Iterable):
                raise TypeError(
                    f"ModuleDict update sequence element #{i} should be "
                    f"Iterable; is {type(pair).__name__}"
                )
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element #{i} has length {len(pair)}; 2 is required"
                )
            self[pair[0]] = pair[1]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{type(self).__name__} is a container and has no forward(); call its modules"
        )


def _value_line(key: Any, p: Any, type_name: bool = False) -> str:
    if isinstance(p, Tensor):
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        size = "x".join(str(s) for s in p.shape)
        what = p.type() if type_name else p.dtype  # PyTorch's two formats
        return f"  ({key}): {kind} containing: [{what} of size {size}]"
    return f"  ({key}): Object of type: {type(p).__name__}"


class ParameterList(Module):
    """A list of parameters registered as "0", "1", ...; plain tensors become Parameters,
    other objects are stored as they are."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self.__dict__["_size"] = 0
        if values is not None:
            self += values

    def _abs(self, idx: Any) -> str:
        return str(_index(idx, len(self), "ParameterList"))

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._abs(idx))

    def __setitem__(self, idx: int, param: Any) -> None:
        key = self._abs(idx)
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, key, param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable[Any]) -> "ParameterList":
        return self.extend(parameters)

    def __dir__(self) -> list[str]:
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value: Any) -> "ParameterList":
        """Add `value` at the end."""
        n = len(self)
        self.__dict__["_size"] = n + 1
        self[n] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        """Append every value of the iterable `values`."""
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError(
                f"ParameterList.extend should be called with an iterable, but "
                f"got {type(values).__name__}"
            )
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_value_line(k, p) for k, p in enumerate(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters registered under their (string) keys; plain tensors become
    Parameters, other objects are stored as they are."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self.__dict__["_keys"] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"Expected key to be a str, got {type(key).__name__}")
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def copy(self) -> "ParameterDict":
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default: Any = None) -> Any:
        """`self[key]`, set to `default` first when missing."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for k in list(self._keys):
            del self[k]

    def pop(self, key: str) -> Any:
        """Remove `key` and return its value."""
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> tuple[str, Any]:
        """Remove and return the last inserted (key, value) pair."""
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        k = list(self._keys)[-1]
        return k, self.pop(k)

    def get(self, key: str, default: Any = None) -> Any:
        """`self[key]` or `default`."""
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> "ParameterDict":
        """A new ParameterDict with `keys`, each holding `default`."""
        return ParameterDict((k, default) for k in keys)

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self) -> Iterable[tuple[str, Any]]:
        """(key, value) pairs."""
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterable[Any]:
        """The values."""
        return (self[k] for k in self._keys)

    def update(self, parameters: Any) -> None:
        """Add or replace entries from a mapping or an iterable of (key, value) pairs."""
        if not isinstance(parameters, Iterable):
            raise TypeError(
                f"ParametersDict.update should be called with an iterable of "
                f"key/value pairs, but got {type(parameters).__name__}"
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            for k, v in parameters.items():
                self[k] = v
        elif isinstance(parameters, Mapping):
            for k, v in sorted(parameters.items()):
                self[k] = v
        else:
            for i, pair in enumerate(parameters):
                if not isinstance(pair, Iterable):
                    raise TypeError(
                        f"ParameterDict update sequence element #{i} should be "
                        f"Iterable; is {type(pair).__name__}"
                    )
                pair = tuple(pair)
                if len(pair) != 2:
                    raise ValueError(
                        f"ParameterDict update sequence element #{i} has length "
                        f"{len(pair)}; 2 is required"
                    )
                self[pair[0]] = pair[1]

    def __or__(self, other: "ParameterDict") -> "ParameterDict":
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: "ParameterDict") -> "ParameterDict":
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other: "ParameterDict") -> "ParameterDict":
        self.update(other)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_value_line(k, p, True) for k, p in self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")
