"""Index-space bookkeeping shared by eager kernels: broadcasting strides and collapsing.

Eager kernels are generic over sizes; what selects one is the rank after collapsing and
each operand's innermost stride. Collapsing merges adjacent dimensions that every operand
walks contiguously, so a contiguous tensor of any shape runs as one flat loop.
"""
from __future__ import annotations


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def broadcast_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                      out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides that walk `shape` over `out_shape`: zeros where it is broadcast."""
    lead = len(out_shape) - len(shape)
    result = [0] * lead
    for n, s, o in zip(shape, strides, out_shape[lead:]):
        result.append(0 if n == 1 and o != 1 else s)
    return tuple(result)


def collapse(shape: tuple[int, ...], strides: list[tuple[int, ...]]
             ) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Drop size-1 dimensions and merge dimensions every operand walks contiguously.

    Always returns at least one dimension (a 0-d loop is a loop of one).
    """
    dims = [d for d, n in enumerate(shape) if n != 1]
    if not dims:
        return (1,), [(0,) for _ in strides]
    new_shape = [shape[dims[0]]]
    new_strides = [[st[dims[0]]] for st in strides]
    for d in dims[1:]:
        n = shape[d]
        if all(ns[-1] == st[d] * n for ns, st in zip(new_strides, strides)):
            new_shape[-1] *= n
            for ns, st in zip(new_strides, strides):
                ns[-1] = st[d]
        else:
            new_shape.append(n)
            for ns, st in zip(new_strides, strides):
                ns.append(st[d])
    return tuple(new_shape), [tuple(ns) for ns in new_strides]


def is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True
