"""Containers: `Sequential`, `ModuleList`, `ModuleDict`."""
from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from .module import Module


def _index(idx: Any, n: int, what: str) -> int:
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(f"index {idx} is out of range for {what} of length {n}")
    return i % n


class Sequential(Module):
    """Calls its modules in order, each on the previous one's output.

    `Sequential(m0, m1, ...)` names them "0", "1", ...; `Sequential(OrderedDict(...))`
    keeps the given names.
    """

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
        chosen = keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(keys),
                                                                        "Sequential")]]
        for k in chosen:
            del self._modules[k]
        if all(k.isdigit() for k in self._modules):      # keep "0", "1", ... contiguous
            items = list(self._modules.values())
            self._modules.clear()
            for i, m in enumerate(items):
                self._modules[str(i)] = m

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type Module, got {type(module).__name__}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered (named "0", "1", ...)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

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
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList(list(self) + list(other))

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got "
                            f"{type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("ModuleList is a container and has no forward(); call its modules")


class ModuleDict(Module):
    """A dict of modules whose parameters are registered under their keys."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None
                 = None) -> None:
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
        self._modules.clear()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def update(self, modules: Any) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for i, pair in enumerate(pairs):
            if isinstance(modules, Mapping):
                key, module = pair
            else:
                if len(pair) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{i} has length "
                                     f"{len(pair)}; 2 is required")
                key, module = pair
            self[key] = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("ModuleDict is a container and has no forward(); call its modules")
