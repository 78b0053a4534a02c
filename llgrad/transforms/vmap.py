"""`vmap(f, in_dims=0, out_dims=0)`: JAX's vectorizing map, by batching rules.

`vmap` moves each mapped input's `in_dims` axis to the front, wraps it in a
`BatchedTensor` owned by a fresh `VmapInterpreter` pushed on the interpreter stack of
`llgrad.dispatch.apply`, calls `f` once, and moves the batch of each output to its
`out_dims` axis. Ops on batched tensors never loop over the batch: `apply` hands them to
the interpreter, which rewrites them with the rules of `llgrad.transforms.batching` into
one op on the whole batch. Nested vmaps push one interpreter each (levels).

Autograd and forward mode stay on plain tensors: a rule runs `apply` on the values, so
the tape records the batched computation itself (`grad` of a function that uses vmap
just works), and `grad`/`jvp` called *inside* vmap differentiate the values with the
batch made explicit (see `llgrad.transforms.grad`).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Sequence

from .. import functions as F
from ..tape import forward as forward_ad
from ..dispatch.apply import Interpreter, interpreters
from ..ir import registry
from ..ir.registry import ELEMENTWISE
from ..pytree import broadcast_prefix, flatten, unflatten
from ..tensor import Tensor
from . import batching
from .batching import BatchedTensor, BatchingError
from .grad import transposed_jvp

__all__ = ["vmap", "VmapInterpreter"]

_levels = itertools.count(1)


class VmapInterpreter(Interpreter):
    """One vmap call: its batch size and its level (inner vmaps have higher levels)."""

    def __init__(self, size: int, randomness: str = "same"):
        self.size = size
        self.level = next(_levels)
        self.active = False
        self.randomness = randomness  # read by random draws (functions/creation.py)

    def __repr__(self) -> str:
        return f"VmapInterpreter(level={self.level}, size={self.size})"

    # -- which tensors are ours -------------------------------------------------------
    def handles(self, operands: Sequence[Any]) -> bool:
        for o in operands:
            if type(o) is BatchedTensor and o._interpreter is self:
                return True
        return False

    def mine(self, o: Any) -> bool:
        return type(o) is BatchedTensor and o._interpreter is self

    def wrap(self, value: Tensor) -> BatchedTensor:
        return BatchedTensor._wrap(value, self)

    def aligned(self, o: BatchedTensor, rank: int) -> Tensor:
        """`o`'s value with ones after the batch up to logical `rank` (for broadcasting)."""
        v = o._value
        if o.ndim < rank:
            v = F.reshape(v, (self.size,) + (1,) * (rank - o.ndim) + tuple(o._shape))
        return v

    def batched(self, o: Tensor) -> Tensor:
        """`o` with this level's batch in front, broadcast when `o` is not batched here."""
        return batching.to_value(o, self)

    # -- the interpreter protocol ------------------------------------------------------
    def process(
        self,
        op: str,
        operands: Sequence[Any],
        attrs: dict[str, Any] | None,
        forward: Callable[..., Tensor],
        name: str | None,
    ) -> Tensor:
        self._check_no_dual(op, operands)
        return batching.rule_for(op)(self, op, operands, attrs, forward, name)

    def process_composite(
        self, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
    ) -> Tensor:
        self._check_no_dual(op, operands)
        rule = batching.COMPOSITE_RULES.get(op)
        if rule is not None:
            return rule(self, op, operands, attrs, name)
        return self.decompose(op, operands, attrs)

    def decompose(self, op: str, operands: Sequence[Any], attrs: dict[str, Any]) -> Tensor:
        """A composite op as its parts (each part meets its own rule)."""
        return registry.get(op).decompose(F, *operands, **attrs)

    def process_function(
        self, fn_name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if fn_name == "getitem":
            return batching.rule_getitem(self, *args)
        if fn_name == "view_as_complex":  # the batch leads; the pair dim trails
            return self.wrap(fn(self.batched(args[0])))
        raise BatchingError(f"vmap: no batching rule for `{fn_name}`")

    def process_tangent(
        self, op: str, operands: Sequence[Any], attrs: dict[str, Any], out: Tensor
    ) -> None:
        """Tangents batched here (jacfwd's basis). Rules that are ordinary tensor code
        (an op's jvp, elementwise vjp-derived jvps) run as usual under the batching rules;
        the fallback of forward mode, transposing the vjp with one backward pass, would
        differentiate a batched scalar, so it is done here per batch element with `grad`
        (inside this vmap, which keeps the batch elements apart)."""
        opdef = registry.get(op)
        if opdef.jvp is not None or opdef.group in ELEMENTWISE or opdef.vjp is None:
            forward_ad.propagate(op, operands, attrs, out)
            return
        if not (out._dtype.is_floating_point or out._dtype.is_complex):
            return

        tangent = transposed_jvp(opdef, operands, attrs, out)
        if tangent is not None:
            forward_ad.set_tangent(out, tangent.to(out._dtype))

    def _check_no_dual(self, op: str, operands: Sequence[Any]) -> None:
        if forward_ad._level[0]:
            for o in operands:
                if type(o) is BatchedTensor and "_fw_tangent" in o.__dict__:
                    raise BatchingError(
                        f"{op}: a batched tensor carries a forward-mode "
                        f"tangent (make_dual inside vmap); use "
                        f"llgrad.transforms.jvp, which batches tangents"
                    )


# --------------------------------------------------------------------------------------
# the transform
# --------------------------------------------------------------------------------------


def _is_dims_spec(spec: Any) -> bool:
    if spec is None or (isinstance(spec, int) and not isinstance(spec, bool)):
        return True
    if isinstance(spec, (tuple, list)):
        return all(_is_dims_spec(s) for s in spec)
    if isinstance(spec, dict):
        return all(_is_dims_spec(s) for s in spec.values())
    return False


def _spec_leaf(s: Any) -> bool:
    return s is None or (isinstance(s, int) and not isinstance(s, bool))


def _batch_size(leaves: list[Any], dims: list[Any], names: list[str]) -> int:
    sizes: list[tuple[int, str]] = []
    for x, d, name in zip(leaves, dims, names):
        if d is None:
            continue
        ndim = x.ndim if isinstance(x, Tensor) else 0
        if not isinstance(x, Tensor) or not -ndim <= d < ndim:
            shape = (
                f" (its shape is {tuple(x._shape)})"
                if isinstance(x, Tensor)
                else f" (it is a {type(x).__name__})"
            )
            raise ValueError(
                f"vmap was requested to map its argument along axis {d}, which "
                f"implies that its rank should be at least "
                f"{d + 1 if d >= 0 else -d}, but is only {ndim}{shape} ({name})"
            )
        sizes.append((x._shape[d % ndim], f"axis {d} of {name}"))
    if not sizes:
        raise ValueError("vmap must have at least one non-None value in in_dims")
    distinct = {s for s, _ in sizes}
    if len(distinct) > 1:
        lines = "\n".join(f"  * {where} has size {s}" for s, where in sizes)
        raise ValueError(f"vmap got inconsistent sizes for array axes to be mapped:\n{lines}")
    return sizes[0][0]


def _arg_names(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """How the size errors name each leaf: `argument 1 of type float32[3, 4]`."""

    def describe(where: str, x: Any) -> str:
        kind = f"{x._dtype.name}{list(x._shape)}" if isinstance(x, Tensor) else type(x).__name__
        return f"{where} of type {kind}"

    names: list[str] = []
    for i, a in enumerate(args):
        leaves = flatten(a)[0]
        names += [
            describe(f"argument {i}" if len(leaves) == 1 else f"argument {i} (leaf {k})", x)
            for k, x in enumerate(leaves)
        ]
    for key in kwargs:
        leaves = flatten(kwargs[key])[0]
        names += [
            describe(
                f"keyword argument {key!r}"
                if len(leaves) == 1
                else f"keyword argument {key!r} (leaf {k})",
                x,
            )
            for k, x in enumerate(leaves)
        ]
    return names


def _unbatch(o: Any, d: Any, interp: VmapInterpreter) -> Any:
    if d is None:
        if isinstance(o, Tensor) and interp in batching.levels(o):
            raise ValueError(
                f"vmap has mapped output but out_dims is None (an output of "
                f"logical shape {list(o._shape)} depends on the mapped inputs)"
            )
        return o
    if not isinstance(o, Tensor):
        if isinstance(o, (bool, int, float)):
            o = F.tensor(o)
        else:
            raise TypeError(
                f"vmap: an output of type {type(o).__name__} cannot be batched; "
                f"outputs must be tensors, numbers or containers of them"
            )
    v = batching.to_value(o, interp)
    nd = v.ndim
    if not -nd <= d < nd:
        raise ValueError(
            f"vmap: out_dims {d} is out of range for an output of logical "
            f"shape {list(o._shape)} (expected -{nd} <= out_dims < {nd})"
        )
    d %= nd
    return F.movedim(v, 0, d) if d else v


RANDOMNESS = ("error", "same", "different")


def vmap(
    func: Callable[..., Any], in_dims: Any = 0, out_dims: Any = 0, randomness: str = "same"
) -> Callable[..., Any]:
    """Vectorize `func` over the `in_dims` axes of its positional arguments (JAX's vmap).

    `in_dims`: an int or None for every positional argument, or a tuple with one entry per
    positional argument, each an int, None or a pytree prefix of that argument (None =
    not mapped). Keyword arguments are mapped over axis 0, as in JAX. `out_dims` is an int,
    None or a pytree prefix of the output; an output that does not depend on the mapped
    inputs is broadcast along the new axis (None keeps it unbatched).

    `randomness` (PyTorch's option) says what random draws inside `func` do: "same" (one
    draw shared by the batch; the default here), "different" (one draw per batch element)
    or "error" (raise; torch.func.vmap's default).
    """
    if not callable(func):
        raise TypeError(f"vmap: expected a callable, got {type(func).__name__}")
    if randomness not in RANDOMNESS:
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or "
            f"'same'. Got {randomness}"
        )
    if isinstance(in_dims, list):
        raise TypeError(
            f"vmap in_dims must be an int, None, or a tuple of entries "
            f"corresponding to the positional arguments passed to the function, "
            f"but got {in_dims!r}"
        )
    for what, spec in (("in_dims", in_dims), ("out_dims", out_dims)):
        if not _is_dims_spec(spec):
            raise TypeError(
                f"vmap: {what} must be an int, None, or a (nested) tuple/list/"
                f"dict of them, got {spec!r}"
            )

    @functools.wraps(func)
    def batched(*args: Any, **kwargs: Any) -> Any:
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(
                f"vmap in_dims specification must be a tree prefix of the "
                f"positional arguments: got {len(in_dims)} entries "
                f"{in_dims!r} for {len(args)} positional arguments"
            )
        dims = broadcast_prefix(in_dims, args, "vmap in_dims", _spec_leaf)
        leaves, tree = flatten(args)
        kw_leaves, kw_tree = flatten(kwargs)
        kw_dims = [0 if isinstance(x, Tensor) else None for x in kw_leaves]
        all_leaves, all_dims = leaves + kw_leaves, dims + kw_dims
        size = _batch_size(all_leaves, all_dims, _arg_names(args, kwargs))
        interp = VmapInterpreter(size, randomness)
        interpreters.append(interp)
        interp.active = True
        try:
            wrapped = []
            for x, d in zip(all_leaves, all_dims):
                if d is None:
                    wrapped.append(x)
                else:
                    moved = F.movedim(x, d % x.ndim, 0) if d % x.ndim else x
                    wrapped.append(batching.from_value(moved, interp))
            new_args = unflatten(tree, wrapped[: len(leaves)])
            new_kwargs = unflatten(kw_tree, wrapped[len(leaves) :])
            out = func(*new_args, **new_kwargs)
            out_leaves, out_tree = flatten(out)
            odims = broadcast_prefix(out_dims, out, "vmap out_dims", _spec_leaf)
            results = [_unbatch(o, d, interp) for o, d in zip(out_leaves, odims)]
        finally:
            interp.active = False
            interpreters.remove(interp)
        return unflatten(out_tree, results)

    return batched
