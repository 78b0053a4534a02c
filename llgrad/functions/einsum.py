"""`einsum`: Einstein summation, lowered to permutes, reshapes, sums and batched matmuls.

The operands are contracted left to right. Before each contraction an operand's labels
that appear nowhere else (not in the output, not in another operand) are summed away; a
label repeated within one operand (`'ii->i'`) takes the diagonal. A pair of operands then
becomes one batched matmul: labels both share and still need are the batch, labels both
share and no one needs later are contracted (the matmul's inner dimension), the rest are
the rows and columns. `...` stands for broadcast dimensions (aligned from the right, size
1 broadcasting as in PyTorch). Every step is a differentiable function, so gradients,
vmap and compiled code come from matmul, sum and the view ops.
"""

from __future__ import annotations

import string
from typing import Any, Sequence

from ..dispatch.apply import composite_function
from ..ir.dtypes import promote_types
from ..tensor import Tensor
from . import linalg, reduction, shape
from ._errors import names_op
from .creation import arange
from .indexing import gather

_LETTERS = set(string.ascii_letters)


def _parse(equation: str, operands: Sequence[Tensor]) -> tuple[list[list[str]], list[str]]:
    """Per-operand label lists and the output labels; `...` becomes labels '0', '1', ..."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->")
        explicit = True
    else:
        lhs, rhs, explicit = eq, "", False
    terms = lhs.split(",")
    if len(terms) != len(operands):
        which = "more" if len(operands) > len(terms) else "fewer"
        raise ValueError(
            f"einsum(): {which} operands were provided than specified in the "
            f"equation ({equation!r} names {len(terms)}, got {len(operands)})"
        )
    ell = 0
    for k, (term, op) in enumerate(zip(terms, operands)):
        if term.count("...") > 1:
            raise ValueError(f"einsum(): more than one '...' in {term!r}")
        named = len(term.replace("...", ""))
        if "..." in term:
            ell = max(ell, op.ndim - named)
        elif named != op.ndim:
            raise ValueError(
                f"einsum(): the number of subscripts in the equation ({named}) "
                f"does not match the number of dimensions ({op.ndim}) for "
                f"operand {k} and no ellipsis was given"
            )
    ell_labels = [str(i) for i in range(ell)]

    def labels(term: str, ndim: int | None) -> list[str]:
        for ch in term.replace("...", ""):
            if ch not in _LETTERS:
                raise ValueError(
                    f"einsum(): invalid subscript given at index "
                    f"{equation.index(ch)} in the equation string, subscripts "
                    f"must be in [a-zA-Z]"
                )
        if "..." not in term:
            return list(term)
        left, right = term.split("...")
        n = (ndim - len(left) - len(right)) if ndim is not None else ell
        if n < 0:
            raise ValueError(
                f"einsum(): operand has {ndim} dimensions, fewer than the "
                f"{len(left) + len(right)} subscripts of {term!r}"
            )
        return list(left) + ell_labels[ell - n :] + list(right)

    ins = [labels(t, op.ndim) for t, op in zip(terms, operands)]
    if explicit:
        out = labels(rhs, None)
        if len(set(out)) != len(out):
            raise ValueError(f"einsum(): output subscript appears more than once in {rhs!r}")
        seen = {c for term in ins for c in term}
        for c in out:
            if c not in seen:
                raise ValueError(
                    f"einsum(): output subscript {c} does not appear in the "
                    f"equation for any input operand"
                )
    else:
        counts: dict[str, int] = {}
        for term in ins:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        out = ell_labels + sorted(c for c, k in counts.items() if k == 1 and c in _LETTERS)
    return ins, out


def _diagonals(t: Tensor, labels: list[str]) -> tuple[Tensor, list[str]]:
    """Take the diagonal over each label repeated within one operand."""
    while len(set(labels)) != len(labels):
        c = next(x for x in labels if labels.count(x) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        if t.shape[i] != t.shape[j]:
            raise RuntimeError(
                f"einsum(): subscript {c} is repeated for operand but the "
                f"sizes don't match, {t.shape[i]} != {t.shape[j]}"
            )
        t = _diagonal(t, i, j)  # diagonal goes last
        labels = [x for k, x in enumerate(labels) if k not in (i, j)] + [c]
    return t, labels


def _diagonal(t: Tensor, i: int, j: int) -> Tensor:
    """The diagonal over dims i < j of equal size, as the last dim (a gather of positions
    (k, k), which vmap batches)."""
    n = t.shape[i]
    rest = [d for d in range(t.ndim) if d not in (i, j)]
    moved = shape.permute(t, tuple(rest) + (i, j))  # (..., n, n)
    lead = tuple(moved.shape[:-2])
    rows = shape.expand(shape.reshape(arange(n), (1,) * len(lead) + (n, 1)), lead + (n, 1))
    picked = gather(moved, -1, rows)  # (..., n, 1): [.., i, i]
    return shape.squeeze(picked, -1)


def _sum_labels(t: Tensor, labels: list[str], keep: set[str]) -> tuple[Tensor, list[str]]:
    drop = [k for k, c in enumerate(labels) if c not in keep]
    if not drop:
        return t, labels
    return reduction.sum(t, tuple(drop)), [c for c in labels if c in keep]


def _squeeze_label(t: Tensor, labels: list[str], c: str) -> tuple[Tensor, list[str]]:
    """Drop label `c`, a dimension of size 1."""
    return shape.squeeze(t, labels.index(c)), [x for x in labels if x != c]


def _size(sizes: dict[str, int], c: str, n: int) -> None:
    if sizes.get(c, 1) != 1 and n != 1 and sizes[c] != n:
        raise RuntimeError(
            f"einsum(): operands do not broadcast with remapped shapes "
            f"(subscript {c!r} has sizes {sizes[c]} and {n})"
        )
    if c not in sizes or sizes[c] == 1:  # a size-1 dimension broadcasts (0 does not)
        sizes[c] = n


def _contract(
    a: Tensor, la: list[str], b: Tensor, lb: list[str], needed: set[str]
) -> tuple[Tensor, list[str]]:
    # a contracted label of size 1 in one operand only broadcasts: as PyTorch does, the
    # other operand is summed over it first (so an integer operand's sum is int64, as
    # torch's, and float results round as torch's do)
    same_dtype = a.dtype is b.dtype  # (mixed operand dtypes raise in matmul, as torch)
    for c in [c for c in la if c in lb and c not in needed]:
        na, nb = a.shape[la.index(c)], b.shape[lb.index(c)]
        if na == 1 and nb != 1:
            (a, la), (b, lb) = _squeeze_label(a, la, c), _sum_labels(b, lb, set(lb) - {c})
        elif nb == 1 and na != 1:
            (a, la), (b, lb) = _sum_labels(a, la, set(la) - {c}), _squeeze_label(b, lb, c)
    if same_dtype and a.dtype is not b.dtype:  # an integer sum above is int64
        d = promote_types(a.dtype, b.dtype)
        a, b = a.to(d), b.to(d)
    sizes: dict[str, int] = {}
    for t, ls in ((a, la), (b, lb)):
        for c, n in zip(ls, t.shape):
            _size(sizes, c, n)
    batch = [c for c in la if c in lb and c in needed]
    inner = [c for c in la if c in lb and c not in needed]
    rows = [c for c in la if c not in lb]
    cols = [c for c in lb if c not in la]

    def arrange(t: Tensor, ls: list[str], order: list[str], groups: list[list[str]]) -> Tensor:
        t = shape.permute(t, tuple(ls.index(c) for c in order))
        full = tuple(
            sizes[c] if c in batch or c in inner else t.shape[k] for k, c in enumerate(order)
        )
        if tuple(t.shape) != full:
            t = shape.expand(t, full)  # size-1 batch/inner dims broadcast
        dims = []
        for g in groups:
            n = 1
            for c in g:
                n *= sizes[c] if c in batch or c in inner else t.shape[order.index(c)]
            dims.append(n)
        return shape.reshape(t, tuple(dims))

    am = arrange(a, la, batch + rows + inner, [batch, rows, inner])
    bm = arrange(b, lb, batch + inner + cols, [batch, inner, cols])
    prod = linalg.matmul(am, bm)
    out_shape = (
        tuple(sizes[c] for c in batch)
        + tuple(a.shape[la.index(c)] for c in rows)
        + tuple(b.shape[lb.index(c)] for c in cols)
    )
    return shape.reshape(prod, out_shape), batch + rows + cols


@names_op("einsum")
def _sublist_labels(sub: Any) -> str:
    """A sublist (`[0, 1]`, `[..., 0]`) as equation letters: 0-25 are a-z, 26-51 A-Z."""
    if not isinstance(sub, (list, tuple)):
        raise TypeError(
            f"einsum(): expected a sublist (a list of ints and Ellipsis), got {type(sub).__name__}"
        )
    out = []
    for v in sub:
        if v is Ellipsis:
            out.append("...")
        elif isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 52:
            out.append(chr(ord("a") + v) if v < 26 else chr(ord("A") + v - 26))
        else:
            raise ValueError(
                f"einsum(): subscript in subscript list is not within the valid "
                f"range [0, 52), got {v!r}"
            )
    return "".join(out)


def _from_sublists(args: tuple) -> tuple[str, tuple]:
    """The equation and operands of the sublist form `einsum(a, [0, 1], b, [1, 2], [0, 2])`."""
    pairs, rest = args[: len(args) // 2 * 2], args[len(args) // 2 * 2 :]
    operands = pairs[0::2]
    equation = ",".join(_sublist_labels(sub) for sub in pairs[1::2])
    if rest:
        equation += "->" + _sublist_labels(rest[0])
    return equation, tuple(operands)


def einsum(equation: Any, *operands: Any) -> Tensor:
    """`lg.einsum('bij,bjk->bik', a, b)`; operands may also be passed as one list; or the
    sublist form `lg.einsum(a, [0, 1], b, [1, 2], [0, 2])` (ints 0-51 as labels, `...`
    as Ellipsis, the output sublist optional)."""
    if isinstance(equation, Tensor):
        equation, operands = _from_sublists((equation,) + operands)
    if not isinstance(equation, str):
        raise TypeError(
            f"einsum(): the equation must be a string (or the first operand of "
            f"the sublist form), got {type(equation).__name__}"
        )
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for k, op in enumerate(operands):
        if not isinstance(op, Tensor):
            raise TypeError(f"einsum(): operand {k} must be a Tensor, got {type(op).__name__}")
    if not operands:
        raise ValueError("einsum(): must provide at least one operand")
    return _einsum(equation, *operands)


@composite_function
def _einsum(equation: str, *operands: Tensor) -> Tensor:
    """`einsum` of checked arguments: in eager mode each (equation, operand layouts)
    compiles, on its first call, into one graph (a result that is a view of the single
    operand stays eager)."""
    ins, out = _parse(equation, operands)
    terms = []
    for k, (t, ls) in enumerate(zip(operands, ins)):
        t, ls = _diagonals(t, list(ls))
        later = set(out).union(*[set(x) for x in ins[:k] + ins[k + 1 :]])
        terms.append(_sum_labels(t, ls, later))
    acc, la = terms[0]
    for k in range(1, len(terms)):
        b, lb = terms[k]
        needed = set(out).union(*[set(x) for _, x in terms[k + 1 :]])
        acc, la = _contract(acc, la, b, lb, needed)
        acc, la = _sum_labels(acc, la, needed)
    acc, la = _sum_labels(acc, la, set(out))
    if la != out:
        acc = shape.permute(acc, tuple(la.index(c) for c in out))
    return acc if len(operands) > 1 or acc is not operands[0] else shape.clone(acc)
