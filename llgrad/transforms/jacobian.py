"""`jacrev`, `jacfwd`, `hessian` with JAX's conventions.

A Jacobian is a batch of vector products over a basis: `jacrev` maps the vjp over the
standard basis of the output space (one backward pass, batched by `vmap`); `jacfwd` maps
the jvp over the standard basis of the input space (one forward pass). The result for an
output leaf of shape `so` and an input leaf of shape `si` has shape `so + si`; with a
tuple `argnums` each output leaf holds a tuple (one entry per argument), with pytree
arguments the input structure, and a pytree output gives that structure on the outside.

When the function uses something vmap has no batching rule for (`BatchingError`: a
function that reads memory behind `apply`'s back, an op without a rule), the same basis
is swept with a Python loop instead (one vjp/jvp per basis vector, then stacked): slower,
same result.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from .. import functions as F
from ..tensor import Tensor
from .batching import BatchingError
from .grad import Linearized, _argnums, _check_inputs, _partial, jvp
from ..pytree import flatten, unflatten
from .vmap import vmap

__all__ = ["jacrev", "jacfwd", "hessian"]


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _basis(leaves: Sequence[Tensor]) -> list[Tensor]:
    """The standard basis of the flattened space of `leaves`: for each leaf, a
    `(total, *leaf.shape)` tensor whose rows are its part of the identity."""
    sizes = [_numel(t._shape) for t in leaves]
    total = sum(sizes)
    out, offset = [], 0
    for t, size in zip(leaves, sizes):
        eye = F.eye(total, dtype=t._dtype)
        part = F.slice_dim(eye, 1, offset, offset + size) if size != total else eye
        out.append(F.reshape(part, (total,) + tuple(t._shape)))
        offset += size
    return out


def _sweep(fn: Callable[..., tuple[Tensor, ...]], basis: list[Tensor]) -> tuple[Tensor, ...]:
    """`fn` mapped over the rows of `basis`: vmap, or a loop when vmap cannot batch it."""
    try:
        return tuple(vmap(fn)(*basis))
    except BatchingError:
        rows = [fn(*(b[i] for b in basis)) for i in range(basis[0]._shape[0])]
        return tuple(F.stack([r[k] for r in rows]) for k in range(len(rows[0])))


def _assemble(blocks: list[list[Tensor]], out_tree: Any, in_tree: Any, single: bool) -> Any:
    """blocks[i][j] is d out_i / d in_j; nest as JAX: output structure outside."""
    per_out = []
    for row in blocks:
        inner = unflatten(in_tree, row)
        per_out.append(inner[0] if single else inner)
    return unflatten(out_tree, per_out)


def jacrev(fun: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The Jacobian of `fun` by reverse mode (one batched vjp over the output basis)."""
    if not callable(fun):
        raise TypeError(f"jacrev: expected a callable, got {type(fun).__name__}")

    @functools.wraps(fun)
    def jac(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "jacrev")
        diff = tuple(args[i] for i in nums)
        lin = Linearized("jacrev", _partial(fun, args, kwargs, nums), diff, (args, kwargs), has_aux)
        outs = lin.out_leaves
        for o in outs:
            if not o._dtype.is_floating_point:
                raise TypeError(
                    f"jacrev requires real-valued outputs (a floating point "
                    f"dtype), but got {o._dtype.name}"
                )
        in_leaves = flatten(diff)[0]

        def pull(*cts: Tensor) -> tuple[Tensor, ...]:
            return tuple(flatten(lin.pullback(unflatten(lin.out_tree, list(cts))))[0])

        rows = _sweep(pull, _basis(outs))  # per input leaf: (M, *in_shape)
        blocks, offset = [], 0
        for o in outs:
            size = _numel(o._shape)
            row = []
            for x, r in zip(in_leaves, rows):
                part = F.slice_dim(r, 0, offset, offset + size) if size != r._shape[0] else r
                row.append(F.reshape(part, tuple(o._shape) + tuple(x._shape)))
            blocks.append(row)
            offset += size
        result = _assemble(blocks, lin.out_tree, flatten(diff)[1], single)
        return (result, lin.aux_outputs()) if has_aux else result

    return jac


def jacfwd(fun: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The Jacobian of `fun` by forward mode (one batched jvp over the input basis)."""
    if not callable(fun):
        raise TypeError(f"jacfwd: expected a callable, got {type(fun).__name__}")

    @functools.wraps(fun)
    def jac(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "jacfwd")
        diff = tuple(args[i] for i in nums)
        in_leaves, in_tree = flatten(diff)
        _check_inputs("jacfwd", in_leaves)
        g = _partial(fun, args, kwargs, nums)
        structure: dict[str, Any] = {}

        def push(*ts: Tensor) -> tuple[Tensor, ...]:
            res = jvp(g, diff, unflatten(in_tree, list(ts)), has_aux=has_aux)
            leaves, tree = flatten(res[1])
            structure["out"] = tree
            structure["primal"] = flatten(res[0])[0]
            if has_aux:
                structure["aux"] = res[2]
            return tuple(leaves)

        cols = _sweep(push, _basis(in_leaves))  # per output leaf: (N, *out_shape)
        blocks = []
        for o, c in zip(structure["primal"], cols):
            row, offset = [], 0
            for x in in_leaves:
                size = _numel(x._shape)
                part = F.slice_dim(c, 0, offset, offset + size) if size != c._shape[0] else c
                part = F.movedim(part, 0, -1) if c.ndim > 1 else part
                row.append(F.reshape(part, tuple(o._shape) + tuple(x._shape)))
                offset += size
            blocks.append(row)
        result = _assemble(blocks, structure["out"], in_tree, single)
        # aux and the primal outputs do not depend on the tangent: they are computed
        # once, unbatched, inside the sweep
        return (result, structure["aux"]) if has_aux else result

    return jac


def hessian(fun: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The Hessian of a scalar `fun`, `jacrev(jacrev(fun))` (shape `x.shape + x.shape`).

    JAX uses forward-over-reverse (`jacfwd(jacrev)`); llgrad's forward mode does not yet
    carry tangents through every backward formula (a saved output unpacked by a backward
    node, the scatter behind indexing's backward), so reverse-over-reverse, which only
    needs `create_graph`, is the dependable composition here. The outer Jacobian is still
    one batched backward pass over the basis (vmap)."""
    return jacrev(jacrev(fun, argnums, has_aux=has_aux), argnums, has_aux=has_aux)
