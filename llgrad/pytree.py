"""Pytrees: nested containers around leaves (tensors, numbers), in one place.

Everything that takes or returns structures of tensors uses this module: `lg.compile`
(arguments, outputs and the signature key), the tracer, and the transforms (`grad`,
`vmap`, `jacrev`, ...), which work on the flat list of leaves and rebuild the structure
afterwards, as JAX's do.

Nodes: tuples (a subclass that is not a namedtuple comes back as its own type, built
from the tuple of its children), lists, dicts (any dict subclass comes back as its own type, e.g.
OrderedDict), namedtuples (keep their type), dataclass instances (their `init` fields,
rebuilt through the constructor), None (a node without children), and any type given to
`register_pytree_node`. Everything else is a leaf.

Dict children keep their insertion order (PyTorch's convention, where JAX sorts keys):
`grads = grad(f)(params)` then pairs with `params.values()` one to one, and two dicts
with the same keys in another order are different structures.

`broadcast_prefix` matches an axis specification (`in_dims`) that is a *prefix* of a
tree, where an int or None stands for a whole subtree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "TreeDef",
    "flatten",
    "unflatten",
    "tree_map",
    "broadcast_prefix",
    "leaves",
    "register_pytree_node",
]

# type -> (flatten: x -> (children, context), unflatten: (children, context) -> x)
_REGISTRY: dict[type, tuple[Callable[[Any], tuple[Any, Any]], Callable[[list[Any], Any], Any]]] = {}


def register_pytree_node(
    cls: type,
    flatten_fn: Callable[[Any], tuple[Any, Any]],
    unflatten_fn: Callable[[list[Any], Any], Any],
) -> None:
    """Make instances of `cls` pytree nodes: `flatten_fn(x)` returns `(children, context)`
    and `unflatten_fn(children, context)` rebuilds an instance (torch.utils._pytree's
    convention). The context is part of the structure, so it should be hashable and
    comparable (it becomes part of `lg.compile`'s signature key)."""
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree_node: expected a class, got {cls!r}")
    if cls in _REGISTRY or cls in (tuple, list, dict, type(None)):
        raise ValueError(f"register_pytree_node: {cls.__name__} is already a pytree node")
    _REGISTRY[cls] = (flatten_fn, unflatten_fn)


@dataclass(frozen=True)
class TreeDef:
    """The shape of a pytree without its leaves."""

    kind: str  # leaf | none | tuple | list | dict | namedtuple | dataclass | custom
    meta: Any  # dict: (type, keys, default_factory); namedtuple: its class; dataclass: (class,
    # field names); custom: (class, context)
    children: tuple["TreeDef", ...]
    num_leaves: int

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind == "tuple":
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "dict":
            return (
                "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.meta[1], self.children)) + "}"
            )
        if self.kind == "dataclass":
            return (
                f"{self.meta[0].__name__}("
                + ", ".join(f"{k}={c!r}" for k, c in zip(self.meta[1], self.children))
                + ")"
            )
        if self.kind == "custom":
            return f"{self.meta[0].__name__}[{self.meta[1]!r}]({inner})"
        return f"{self.meta.__name__}({inner})"


_LEAF = TreeDef("leaf", None, (), 1)
_NONE = TreeDef("none", None, (), 0)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(x: Any) -> tuple[str, Any, list[Any]] | None:
    """(kind, meta, children) of a container node, or None for a leaf."""
    if x is None:
        return ("none", None, [])
    custom = _REGISTRY.get(type(x))
    if custom is not None:
        kids, context = custom[0](x)
        return ("custom", (type(x), context), list(kids))
    if _is_namedtuple(x):
        return ("namedtuple", type(x), list(x))
    if isinstance(x, tuple):  # a tuple subclass (`frexp`'s result) keeps its type
        return ("tuple", None if type(x) is tuple else type(x), list(x))
    if isinstance(x, list):
        return ("list", None, list(x))
    if isinstance(x, dict):
        keys = tuple(x)
        factory = getattr(x, "default_factory", None)  # a defaultdict's
        return ("dict", (type(x), keys, factory), [x[k] for k in keys])
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        names = tuple(f.name for f in dataclasses.fields(x) if f.init)
        return ("dataclass", (type(x), names), [getattr(x, n) for n in names])
    return None


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], TreeDef]:
    """The leaves of `tree` in order, and its structure."""
    out: list[Any] = []
    return out, _flatten(tree, out, is_leaf)


def _flatten(x: Any, out: list[Any], is_leaf: Callable[[Any], bool] | None) -> TreeDef:
    if is_leaf is not None and is_leaf(x):
        out.append(x)
        return _LEAF
    node = _children(x)
    if node is None:
        out.append(x)
        return _LEAF
    kind, meta, kids = node
    if kind == "none":
        return _NONE
    defs = tuple(_flatten(k, out, is_leaf) for k in kids)
    return TreeDef(kind, meta, defs, sum(d.num_leaves for d in defs))


def leaves(tree: Any) -> list[Any]:
    return flatten(tree)[0]


def unflatten(treedef: TreeDef, values: Any) -> Any:
    """Rebuild the structure `treedef` with `values` as its leaves."""
    values = list(values)
    if len(values) != treedef.num_leaves:
        raise ValueError(
            f"pytree: structure {treedef!r} has {treedef.num_leaves} leaves, "
            f"got {len(values)} values"
        )
    it = iter(values)
    return _build(treedef, it)


def _build(d: TreeDef, it: Any) -> Any:
    if d.kind == "leaf":
        return next(it)
    if d.kind == "none":
        return None
    kids = [_build(c, it) for c in d.children]
    if d.kind == "tuple":
        return tuple(kids) if d.meta is None else d.meta(kids)
    if d.kind == "list":
        return kids
    if d.kind == "dict":
        cls, keys, factory = d.meta
        if cls is dict:
            return dict(zip(keys, kids))
        from collections import defaultdict

        if issubclass(cls, defaultdict):
            return cls(factory, zip(keys, kids))
        return cls(zip(keys, kids))
    if d.kind == "dataclass":
        cls, names = d.meta
        return cls(**dict(zip(names, kids)))
    if d.kind == "custom":
        cls, context = d.meta
        return _REGISTRY[cls][1](kids, context)
    return d.meta(*kids)


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """`fn` applied leafwise; `rest` must have `tree`'s structure."""
    flat, d = flatten(tree)
    others = []
    for r in rest:
        rf, rd = flatten(r)
        if rd != d:
            raise ValueError(f"tree_map: structures differ: {d!r} and {rd!r}")
        others.append(rf)
    return unflatten(d, [fn(*xs) for xs in zip(flat, *others)])


def broadcast_prefix(
    prefix: Any, tree: Any, what: str = "in_dims", is_spec_leaf: Callable[[Any], bool] | None = None
) -> list[Any]:
    """One entry of `prefix` per leaf of `tree`: a prefix leaf covers a whole subtree.

    A spec leaf is anything `is_spec_leaf` accepts (by default None and ints, as for JAX's
    in_axes/out_axes); any other structure must match `tree` node by node.
    """
    spec_leaf = is_spec_leaf or (lambda s: s is None or isinstance(s, int))
    out: list[Any] = []
    _broadcast(prefix, tree, out, spec_leaf, what, prefix, tree)
    return out


def _broadcast(
    p: Any,
    x: Any,
    out: list[Any],
    spec_leaf: Callable[[Any], bool],
    what: str,
    whole_p: Any,
    whole_x: Any,
) -> None:
    if spec_leaf(p):
        out.extend([p] * flatten(x)[1].num_leaves)
        return
    pn, xn = _children(p), _children(x)
    if (
        pn is not None
        and xn is not None
        and pn[0] == xn[0] == "dict"
        and set(pn[1][1]) == set(xn[1][1])
    ):  # dict specs match by key, in x's order
        pn = ("dict", xn[1], [p[k] for k in xn[1][1]])
    mismatch = (
        pn is None or xn is None or pn[0] != xn[0] or pn[1] != xn[1] or len(pn[2]) != len(xn[2])
    )
    if mismatch:
        raise ValueError(
            f"{what} specification must be a tree prefix of the corresponding "
            f"value, got specification {whole_p!r} for value tree "
            f"{flatten(whole_x)[1]!r}"
        )
    for pc, xc in zip(pn[2], xn[2]):
        _broadcast(pc, xc, out, spec_leaf, what, whole_p, whole_x)
