"""Direct eager calls: `x + y`, `x * 2.0`, `lg.exp(x)` on small tensors without the layers.

The general path of an elementwise op (`add` -> `elementwise` -> `dispatch.apply` ->
`eager.elementwise.run`) checks and converts its operands, looks its plan up by a key
built from them, allocates the output, launches, and records autograd and forward-mode
history: about ten Python calls around a foreign call. Once a call has gone through it
successfully, `learn` files that call's generated launch (`eager.elementwise.direct_launch`:
allocate, pack, call) under the operands' layout keys; the next call with the same
(dtype, shape, strides) operands runs it directly when nothing else is due: no transform
interpreter (vmap, tracing) is active, no forward-mode level is open, anomaly mode is off
when the call is recorded, and the operands are plain tensors and Python floats or ints.
A call that autograd records (grad mode on, an operand requires grad) runs directly too
and records its node through the entry's recorder (`dispatch.apply.direct_recorder`,
generated on the entry's first recorded call): the same node the general path records.
Whole reductions run directly only when not recorded. Anything else, and any call the
direct launch declines (kernels being recorded, a number that does not pack), takes the
general path, which also raises every error.

Only ops whose function is exactly `elementwise(op, *operands)`, and whole reductions
(`x.sum()`: `eager.reduce.direct_launch`), get a direct path (the tables are filled after
their general call returned, so the function accepted the operands); the eager plan caches
are cleared together with these when the default dtype changes (a number's dtype follows
it).
"""

from __future__ import annotations

from typing import Any, Callable

from .._keys import attrs_key
from ..tape import anomaly, forward as forward_ad
from ..dispatch.apply import direct_recorder, interpreters, record
from ..dispatch.grad_mode import _state as grad_state
from ..eager import elementwise as ew, reduce
from ..ir import dtypes as dt
from ..tensor import Tensor

_NUMBERS = (float, int)
_tables: dict[Any, dict] = {}  # every direct table (cleared with the eager plans)


def _learn(table: dict, key: Any, make: Callable[[], Any]) -> None:
    """File `make()` (the direct launch of the call that just succeeded, or None) as the
    entry `[launch, recorder]` (the recorder, `dispatch.apply.direct_recorder`, is made
    by the first recorded call of the entry)."""
    if interpreters or forward_ad._level[0] or len(table) >= 256:
        return
    direct = make()
    if direct is not None:
        table[key] = [direct, None]


def _elementwise_launch(op: str, operands: tuple) -> Callable[[], Any]:
    def make() -> Any:
        plan = ew._plans.get(ew._key(op, operands, None, None))
        return None if plan is None else ew.direct_launch(op, plan, operands)

    return make


def _table(op: str) -> dict:
    """The direct table of `op` (shared by its function and its operator)."""
    t = _tables.get(op)
    if t is None:
        t = _tables[op] = {}
    return t


def binary(
    op: str, general: Callable[..., Tensor], keywords: bool = False, records: bool = True
) -> Callable[..., Tensor]:
    """`general(a, b)` (an operator such as `Tensor.__add__`, or with `keywords` a
    function such as `lg.mul` whose keyword arguments always take `general`) with a
    direct path. Without `records` (a function whose node is not `op`'s default one,
    such as `pow`'s `PowBackward0`), calls that autograd records take `general`."""
    table = _table(op)

    def method(a: Any, b: Any) -> Tensor:
        if a.__class__ is not Tensor:
            return general(a, b)
        c = b.__class__
        if c is Tensor:
            key = (a._lkey, b._lkey)
            recorded = grad_state.enabled and (a._requires_grad or b._requires_grad)
        elif c in _NUMBERS:
            key = (a._lkey, c)
            recorded = grad_state.enabled and a._requires_grad
        else:
            return general(a, b)
        entry = table.get(key)
        if (
            entry is not None
            and not interpreters
            and not forward_ad._level[0]
            and not (recorded and (anomaly._state.enabled or not records))
        ):
            out = entry[0](a, b)
            if out is not None:
                if not recorded:
                    return out
                rec = entry[1]
                if rec is None:
                    rec = entry[1] = direct_recorder(op, (a, b), out)
                return rec(a, b, out)
        out = general(a, b)
        if key not in table:
            _learn(table, key, _elementwise_launch(op, (a, b)))
        return out

    if not keywords:
        return _like(method, general, op)

    def function(*args: Any, **kwargs: Any) -> Tensor:
        if kwargs or len(args) != 2:
            return general(*args, **kwargs)
        return method(*args)

    return _like(function, general, op)


def unary(op: str, general: Callable[[Any], Tensor]) -> Callable[[Any], Tensor]:
    """`general(x)` (such as `lg.exp`) with a direct path."""
    call = _one_operand(
        _table(("unary", op)), general, lambda x: _elementwise_launch(op, (x,)), op, True
    )

    def fn(input: Any) -> Tensor:
        return call(input) if input.__class__ is Tensor else general(input)

    return _like(fn, general, op)


def reduction(
    op: str,
    general: Callable[..., Tensor],
    attrs_of: Callable[[Any, bool, int], tuple] | None = None,
) -> Callable[..., Tensor]:
    """`general(x, dim=None, keepdim=False, ...)` (such as `lg.sum`) with a direct path
    for the whole reduction `general(x)` and, given `attrs_of(dim, keepdim, ndim)` (the
    `(axes, keepdim)` the general path runs `eager.reduce.run` with), for
    `general(x, dim, keepdim)` with `dim` None, an int or a tuple of ints, positional or
    by keyword; other arguments take `general`. Calls that autograd records take
    `general` (its node's name depends on the arguments)."""
    whole = whole_reduction(op, general)
    if attrs_of is None:

        def fn(input: Any, *args: Any, **kwargs: Any) -> Tensor:
            if input.__class__ is Tensor and not args and not kwargs:
                return whole(input)
            return general(input, *args, **kwargs)

        return _like(fn, general, op)
    table = _table(("reduction_dims", op))

    def with_dims(
        input: Any, dim: Any = _MISSING, keepdim: Any = False, *rest: Any, **kwargs: Any
    ) -> Tensor:
        if input.__class__ is not Tensor or kwargs or rest:
            if rest:
                return general(input, dim, keepdim, *rest, **kwargs)
            return general(
                input,
                *(() if dim is _MISSING else (dim,)),
                **({} if keepdim is False else {"keepdim": keepdim}),
                **kwargs,
            )
        if dim is _MISSING:
            if keepdim is False:
                return whole(input)
            return general(input, keepdim=keepdim)
        c = dim.__class__
        if (
            not (c is int or dim is None or c is tuple and _ints(dim))
            or keepdim.__class__ is not bool
        ):
            return general(input, dim, keepdim)
        key = (input._lkey, dim, keepdim)
        entry = table.get(key)
        if (
            entry is not None
            and not interpreters
            and not forward_ad._level[0]
            and not (grad_state.enabled and input._requires_grad)
        ):
            out = entry(input)
            if out is not None:
                return out
        out = general(input, dim, keepdim)
        if key not in table and not interpreters and not forward_ad._level[0] and len(table) < 256:
            axes, kept = attrs_of(dim, keepdim, len(input._shape))
            direct = reduce.direct_launch(op, input, axes, kept)
            if direct is not None:
                table[key] = direct
        return out

    return _like(with_dims, general, op)


_MISSING: Any = object()  # an argument not given


def _ints(dims: tuple) -> bool:
    for d in dims:
        if d.__class__ is not int:
            return False
    return True


def whole_reduction(op: str, general: Callable[[Any], Tensor]) -> Callable[[Tensor], Tensor]:
    """`general(x)`, a reduction of a plain tensor `x` over every axis that runs
    `eager.reduce.run(op, x)` (`lg.sum(x)`, `lg.max(x)`), with a direct path for the calls
    autograd does not record; the functions of one `op` share its table."""
    return _one_operand(
        _table(("reduction", op)),
        general,
        lambda x: lambda: reduce.direct_launch(op, x, (), False),
        op,
        False,
    )


def chain(
    name: str, general: Callable[..., Tensor], steps_of: Callable[..., Any]
) -> Callable[..., Tensor]:
    """`general(*operands)` (plain tensors, or None for an absent operand), a function
    whose value is a chain of exact elementwise ops (`eager.elementwise.chain_plan`;
    `steps_of(*operands)` gives the steps, over the tensors present), with a direct path
    that runs the chain as one kernel when autograd does not record the call (the
    general path records the nodes of the separate ops)."""
    table = _table(("chain", name))

    def fn(*operands: Any) -> Tensor:
        key = []
        tensors = []
        recorded = False
        for o in operands:
            if o is None:
                key.append(None)
            else:
                key.append(o._lkey)
                tensors.append(o)
                if o._requires_grad:
                    recorded = True
        key = tuple(key)
        entry = table.get(key)
        if (
            entry
            and not interpreters
            and not forward_ad._level[0]
            and not (recorded and grad_state.enabled)
        ):
            out = entry(*tensors)
            if out is not None:
                return out
        out = general(*operands)
        if key not in table and not interpreters and not forward_ad._level[0] and len(table) < 256:
            plan = ew.chain_plan(steps_of(*operands), tensors)
            table[key] = (plan is not None and ew.direct_launch(name, plan, tensors)) or False
        return out

    return _like(fn, general, name)


_ew_table: dict[tuple, Any] = {}
_tables["elementwise"] = _ew_table
_NO_DIRECT: Any = [None, None]  # an entry whose call has no direct launch


def elementwise(
    op: str,
    operands: tuple,
    attrs: dict[str, Any],
    name: str | None,
    general: Callable[[str, tuple, dict, str | None], Tensor],
) -> Tensor:
    """`general(op, operands, attrs, name)`, the general call of `functions.elementwise`
    (checks, then `dispatch.apply` of `eager.elementwise.run` under node name `name`),
    with a direct path when the operands are plain tensors and Python floats and ints:
    keyed by (op, attributes, the operands' layouts or number classes), the launch the
    general call ran, and the node `record` makes (through a `direct_recorder` when
    `name` and the attributes are the default)."""
    if interpreters or forward_ad._level[0]:
        return general(op, operands, attrs, name)
    parts: list[Any] = [op, attrs_key(attrs) if attrs else None]
    recorded = False
    for o in operands:
        c = o.__class__
        if c is Tensor:
            parts.append(o._lkey)
            if o._requires_grad:
                recorded = True
        elif c is float or c is int:
            parts.append(c)
        else:
            return general(op, operands, attrs, name)
    key = tuple(parts)
    recorded = recorded and grad_state.enabled
    try:
        entry = _ew_table.get(key)
    except TypeError:  # an unhashable attribute
        return general(op, operands, attrs, name)
    if entry is None:
        out = general(op, operands, attrs, name)
        if not interpreters and not forward_ad._level[0] and len(_ew_table) < 4096:
            plan = ew._plans.get(ew._key(op, operands, attrs or None, None))
            direct = None if plan is None else ew.direct_launch(op, plan, operands)
            _ew_table[key] = _NO_DIRECT if direct is None else [direct, None]
        return out
    if entry is _NO_DIRECT or recorded and anomaly._state.enabled:
        return general(op, operands, attrs, name)
    out = entry[0](*operands)
    if out is None:
        return general(op, operands, attrs, name)
    if not recorded:
        return out
    if name is None and not attrs:
        rec = entry[1]
        if rec is None:
            rec = entry[1] = direct_recorder(op, operands, out)
        return rec(*operands, out)
    return record(op, operands, attrs, out, name)


def _one_operand(
    table: dict,
    general: Callable[[Any], Tensor],
    launch_of: Callable[[Tensor], Callable[[], Any]],
    op: str,
    records: bool,
) -> Callable[[Tensor], Tensor]:
    """The direct-or-general call of a one-tensor op on a plain tensor; with `records`,
    a call that autograd records runs directly too, recording `op`'s node as the general
    path does (`apply` with no attributes)."""

    def call(input: Tensor) -> Tensor:
        key = input._lkey
        recorded = grad_state.enabled and input._requires_grad
        entry = table.get(key)
        if (
            entry is not None
            and not interpreters
            and not forward_ad._level[0]
            and not (recorded and (anomaly._state.enabled or not records))
        ):
            out = entry[0](input)
            if out is not None:
                if not recorded:
                    return out
                rec = entry[1]
                if rec is None:
                    rec = entry[1] = direct_recorder(op, (input,), out)
                return rec(input, out)
        out = general(input)
        if key not in table:
            _learn(table, key, launch_of(input))
        return out

    return call


def _like(fn: Any, general: Any, op: str) -> Any:
    """`fn` named, documented and placed (module) as `general`, which it wraps."""
    fn.__name__ = fn.__qualname__ = getattr(general, "__name__", op)
    fn.__doc__, fn.__module__ = general.__doc__, general.__module__
    fn.__wrapped__ = general
    return fn


def clear() -> None:
    """Forget every direct launch (with the eager plans they were made from)."""
    for t in _tables.values():
        t.clear()


dt.on_default_dtype_change(clear)
