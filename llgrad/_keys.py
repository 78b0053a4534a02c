"""Cache keys for Python numbers that keep apart what `==` conflates.

`0.0 == -0.0` and the two hash alike, so a cache keyed by the plain value hands the code
specialized for one to a call with the other (`x + c`, `fill(c)`, `pad(value=c)` then give
+0.0 where -0.0 was asked for). NaN is the opposite case: it equals nothing, so a key
holding it never hits and each call would specialize again. `number_key` gives the
signed zeros different keys and every NaN one key; both keep `True` apart from `1`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["number_key", "attrs_key"]


def number_key(v: Any) -> Any:
    """A hashable key for the Python value `v` (any type): `(type, value)`, with `repr`
    in place of the value for a float zero or NaN, and per part for complex numbers."""
    c = v.__class__
    if c is float:
        if v == 0.0 or v != v:
            return (c, repr(v))  # '0.0' / '-0.0' / 'nan'
        return (c, v)
    if c is complex:
        return (c, number_key(v.real), number_key(v.imag))
    if c is tuple or c is list:
        return (c, tuple(number_key(x) for x in v))
    return (c, v)


def attrs_key(attrs: dict[str, Any] | tuple[tuple[str, Any], ...]) -> tuple:
    """`tuple(attrs.items())` (for a dict, or the items tuple itself) as a cache key: the
    plain items (followed by the names of bool values, when there are any) unless a value
    is a float zero or NaN, a complex number, a list, or a tuple holding anything but ints
    (axes, sizes: kept as they are), whose values then go through `number_key`."""
    items = tuple(attrs.items()) if attrs.__class__ is dict else tuple(attrs)
    flags: tuple[Any, ...] | None = None
    for k, v in items:
        c = v.__class__
        if c is tuple:
            for x in v:
                if x.__class__ is not int:
                    return tuple((k, number_key(x)) for k, x in items)
        elif c is float and (v == 0.0 or v != v) or c is complex or c is list:
            return tuple((k, number_key(x)) for k, x in items)
        elif c is bool:
            flags = (k,) if flags is None else flags + (k,)
    # `True == 1` and the two hash alike: the names holding bools keep a bool attribute's
    # key apart from an int's (a cached call must not accept `keepdim=1` where the first
    # call of that key would reject it)
    return items if flags is None else items + (("<bools>", flags),)
