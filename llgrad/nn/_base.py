"""What `llgrad.nn.functional` and its submodules share: argument checks, the composite
call with its cache of accepted signatures, the legacy reduction flags, in-place
activations, and the host-side reading of index tensors for error messages.

The submodules (`_activations`, `_losses`, `_conv`, ...) import these from here and
`functional` imports the submodules, so the imports between them run one way.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from .._keys import attrs_key
from ..dispatch import apply as _apply
from ..dispatch.apply import apply_composite
from ..ir import registry
from ..ir.types import TensorType
from ..ops import nn as nnops
from ..functions.inplace import _rewrite_inplace
from ..tensor import SymbolicTensor, Tensor
from ..tracer.tensor import tracing
from ..transforms.batching import bottom


def _tensor(op: str, name: str, v: Any) -> Tensor:
    if not isinstance(v, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be a Tensor, not {type(v).__name__}")
    return v


# (op, attrs, their classes, the operands' layout keys) -> (normalized attrs, node name,
# the compiled forward's key, or None): calls whose attributes and operand types the op's rules
# accepted before (the rules read only those, so they would accept them again)
_checked: dict[tuple, tuple[dict[str, Any], str | None, tuple | None]] = {}


def _composite(op: str, operands: Sequence[Tensor], attrs: dict[str, Any]) -> Tensor:
    """Validate `attrs` and the operands' types with the op's own rules, then run it as one
    recorded node (so errors come from the same place in eager and compiled code). A call
    of plain tensors whose (op, attributes, operand dtypes/shapes) passed before skips the
    validation."""
    key = None
    try:
        key = (
            op,
            attrs_key(attrs),
            tuple([v.__class__ for v in attrs.values()]),
            tuple([t._lkey if t.__class__ is Tensor else None for t in operands]),
        )
        done = _checked.get(key)
    except (TypeError, AttributeError):  # an unhashable attribute: no cache
        done = None
    if done is not None:
        return apply_composite(op, tuple(operands), done[0], done[1], done[2])
    opdef = registry.get(op)
    norm = dict(opdef.normalize_attrs(attrs))
    opdef.infer(tuple(TensorType(t._dtype, t._shape) for t in operands), **norm)
    if key is not None and None not in key[3] and len(_checked) < 4096:
        # (apply_composite never edits `norm`)
        cc = _apply.compiled_composites  # (set once llgrad.compiler is imported)
        fkey = cc.forward_key(op, norm, operands) if cc is not None else None
        _checked[key] = (norm, opdef.backward_name, fkey)
    return apply_composite(op, tuple(operands), norm, opdef.backward_name)


def _reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """PyTorch's legacy `size_average`/`reduce` flags, translated to `reduction`."""
    if size_average is None and reduce is None:
        nnops._check_reduction("loss", reduction)
        return reduction
    warnings.warn(
        "size_average and reduce args will be deprecated, please use "
        "reduction='mean', 'sum' or 'none' instead.",
        UserWarning,
        stacklevel=3,
    )
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _maybe_inplace(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    return input.copy_(out) if inplace else out


def _act(name: str, fn: Any, input: Tensor, inplace: bool, *args: Any) -> Tensor:
    """`fn(input, *args)`, or with `inplace` written into `input` and recorded as torch's
    in-place op (the node saves what it needs before the write; versions are checked)."""
    if not inplace:
        return fn(input, *args)
    return _rewrite_inplace(name, fn)(input, *args)


def _softmax_dim(op: str, ndim: int, dim: int | None) -> int:
    if dim is not None:
        return dim
    warnings.warn(
        f"Implicit dimension choice for {op} has been deprecated. Change the call "
        f"to include dim=X as an argument.",
        UserWarning,
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _host_indices(t: Tensor) -> Any:
    """The values of index tensor `t` on the host (every batch element's under vmap), or
    None where they are not known (tracing, symbolic tensors, no elements)."""
    if t.numel() == 0:
        return None
    if tracing():  # compiled code: the gather kernels check indices at run time
        return None
    t = bottom(t)
    if isinstance(t, SymbolicTensor):
        return None
    return t._values()


def _check_targets(op: str, target: Tensor, classes: int, ignore_index: int) -> None:
    """Raise IndexError naming the first target (row-major) outside [0, classes) that is
    not `ignore_index`."""
    v = _host_indices(target)
    if v is None or (v.min() >= 0 and v.max() < classes):
        return
    bad = (v != ignore_index) & ((v < 0) | (v >= classes))
    if bad.any():
        first = int(v[bad][0])
        raise IndexError(
            f"{op}: Target {first} is out of bounds (expected class indices "
            f"in [0, {classes}) or ignore_index={ignore_index}; target shape "
            f"{list(target.shape)})"
        )
