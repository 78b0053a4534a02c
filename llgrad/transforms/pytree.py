"""Pytrees: nested tuples, lists, dicts and None around leaves (tensors, numbers).

The transforms take and return arbitrary structures of tensors, as JAX's do; they work on
the flat list of leaves and rebuild the structure afterwards. Conventions follow JAX:
`None` is a node without children, namedtuples keep their type. `broadcast_prefix` matches an axis specification (`in_dims`) that is a
*prefix* of a tree, where an int or None stands for a whole subtree.

Dict children keep their insertion order (PyTorch's pytree convention, where JAX sorts):
`grads = grad(f)(params)` then pairs with `params.values()` one to one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["TreeDef", "flatten", "unflatten", "tree_map", "broadcast_prefix", "leaves"]


@dataclass(frozen=True)
class TreeDef:
    """The shape of a pytree without its leaves."""

    kind: str                      # leaf | none | tuple | list | dict | namedtuple
    meta: Any                      # dict keys (insertion order) or the namedtuple class
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
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.meta, self.children)) \
                + "}"
        return f"{self.meta.__name__}({inner})"


_LEAF = TreeDef("leaf", None, (), 1)
_NONE = TreeDef("none", None, (), 0)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(x: Any) -> tuple[str, Any, list[Any]] | None:
    """(kind, meta, children) of a container node, or None for a leaf."""
    if x is None:
        return ("none", None, [])
    if _is_namedtuple(x):
        return ("namedtuple", type(x), list(x))
    if isinstance(x, tuple):
        return ("tuple", None, list(x))
    if isinstance(x, list):
        return ("list", None, list(x))
    if isinstance(x, dict):
        keys = tuple(x)
        return ("dict", keys, [x[k] for k in keys])
    return None


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None
            ) -> tuple[list[Any], TreeDef]:
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
        raise ValueError(f"pytree: structure {treedef!r} has {treedef.num_leaves} leaves, "
                         f"got {len(values)} values")
    it = iter(values)
    return _build(treedef, it)


def _build(d: TreeDef, it: Any) -> Any:
    if d.kind == "leaf":
        return next(it)
    if d.kind == "none":
        return None
    kids = [_build(c, it) for c in d.children]
    if d.kind == "tuple":
        return tuple(kids)
    if d.kind == "list":
        return kids
    if d.kind == "dict":
        return dict(zip(d.meta, kids))
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


def broadcast_prefix(prefix: Any, tree: Any, what: str = "in_dims",
                     is_spec_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """One entry of `prefix` per leaf of `tree`: a prefix leaf covers a whole subtree.

    A spec leaf is anything `is_spec_leaf` accepts (by default None and ints, as for JAX's
    in_axes/out_axes); any other structure must match `tree` node by node.
    """
    spec_leaf = is_spec_leaf or (lambda s: s is None or isinstance(s, int))
    out: list[Any] = []
    _broadcast(prefix, tree, out, spec_leaf, what, prefix, tree)
    return out


def _broadcast(p: Any, x: Any, out: list[Any], spec_leaf: Callable[[Any], bool], what: str,
               whole_p: Any, whole_x: Any) -> None:
    if spec_leaf(p):
        out.extend([p] * flatten(x)[1].num_leaves)
        return
    pn, xn = _children(p), _children(x)
    if pn is not None and xn is not None and pn[0] == xn[0] == "dict" and \
            set(pn[1]) == set(xn[1]):            # dict specs match by key, in x's order
        pn = ("dict", xn[1], [p[k] for k in xn[1]])
    mismatch = pn is None or xn is None or pn[0] != xn[0] or pn[1] != xn[1] or \
        len(pn[2]) != len(xn[2])
    if mismatch:
        raise ValueError(f"{what} specification must be a tree prefix of the corresponding "
                         f"value, got specification {whole_p!r} for value tree "
                         f"{flatten(whole_x)[1]!r}")
    for pc, xc in zip(pn[2], xn[2]):
        _broadcast(pc, xc, out, spec_leaf, what, whole_p, whole_x)
