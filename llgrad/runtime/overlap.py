"""Memory overlap between the tensor an op writes and the tensors it reads.

Every in-place write (`foo_` methods, `copy_`, `t[i] = v`) asks this module about each of
its operands, so the rule lives in one place (`functions/inplace.py`'s `run_inplace` and
`setitem`); an `out=` argument receives a result computed out of place first
(`functions/_out.py`), so it may overlap the inputs in any way:

- *full* overlap, an exact alias (same memory, same layout: `a.add_(a)`): allowed for
  elementwise ops, where every element is read before it is written; refused for ops that
  scatter to positions an index chooses (`scatter_`, `index_add_`, `put_`, advanced
  `t[idx] = v`), as PyTorch refuses them;
- *partial* overlap, both tensors dense (a permutation of a contiguous layout, as PyTorch
  requires to decide) and sharing some bytes without being an exact alias
  (`a[1:].copy_(a[:-1])`, `a.copy_(a.T)`): `RuntimeError` with PyTorch's message;
- anything else that shares bytes (a strided or expanded operand, a flipped view, which is
  a view in llgrad and a copy in PyTorch): PyTorch cannot decide and writes anyway; llgrad
  computes the new values out of place first and then writes them, so the result is the
  one the operand's old values give (`may_share` tells the caller to do that).
"""

from __future__ import annotations

from typing import Any, Iterable

FULL, PARTIAL, NONE, UNDECIDED = "full", "partial", "none", "undecided"

OVERLAP_MESSAGE = (
    "unsupported operation: some elements of the input tensor and the "
    "written-to tensor refer to a single memory location. Please clone() the "
    "tensor before performing the operation."
)


def _concrete(t: Any) -> bool:
    return getattr(t, "_storage", None) is not None and hasattr(t, "_strides")


def byte_range(t: Any) -> tuple[int, int]:
    """[first, last) bytes of `t`'s storage that its elements touch (empty: (0, 0))."""
    lo = hi = t._offset
    for n, st in zip(t._shape, t._strides):
        if n == 0:
            return (0, 0)
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    item = t._dtype.itemsize
    return (lo * item, (hi + 1) * item)


def dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Non-overlapping and dense: the elements fill a contiguous block exactly once
    (a permutation of a contiguous layout; size-1 dimensions do not count)."""
    expected = 1
    for stride, size in sorted((st, n) for n, st in zip(shape, strides) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def status(dst: Any, src: Any) -> str:
    """How `src`'s memory relates to `dst`'s: FULL, PARTIAL, NONE or UNDECIDED (sharing
    bytes, not both dense: see the module docstring)."""
    if src is dst:
        return FULL
    if not (_concrete(dst) and _concrete(src)) or dst._storage is not src._storage:
        return NONE
    a0, a1 = byte_range(dst)
    b0, b1 = byte_range(src)
    if a0 == a1 or b0 == b1 or a1 <= b0 or b1 <= a0:
        return NONE
    same = (
        a0 == b0
        and a1 == b1
        and dst._shape == src._shape
        and dst._strides == src._strides
        and dst._dtype.itemsize == src._dtype.itemsize
    )
    if not (dense(dst._shape, dst._strides) and dense(src._shape, src._strides)):
        return FULL if same else UNDECIDED
    return FULL if same else PARTIAL


def check(dst: Any, operands: Iterable[Any], alias_ok: bool = True) -> bool:
    """Refuse what PyTorch refuses (partial overlap; with `alias_ok` False an exact alias
    too); return whether some operand still shares memory with `dst` (UNDECIDED, or a
    FULL alias the caller must read before writing): then compute out of place first."""
    shared = False
    if not _concrete(dst):
        return False
    for src in operands:
        if not _concrete(src):
            continue
        s = status(dst, src)
        if s == NONE:
            continue
        if s == PARTIAL or (s == FULL and not alias_ok):
            raise RuntimeError(OVERLAP_MESSAGE)
        if s == UNDECIDED:
            shared = True
    return shared


def tensors_in(values: Iterable[Any]) -> list[Any]:
    """The tensors among `values`, looking one level into tuples and lists (index
    tuples, lists of tensors)."""
    out = []
    for v in values:
        if isinstance(v, (tuple, list)):
            out.extend(x for x in v if _concrete(x))
        elif _concrete(v):
            out.append(v)
    return out
