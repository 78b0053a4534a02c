"""Algebraic simplification: identities that hold bit for bit, as rules for `rewrite`.

Every rule here is exact under the interpreter's semantics, including NaN, infinities and
signed zeros, because the compiler never sets the fast-math flags that would allow
otherwise (no nnan, ninf, nsz). That is why:

- `x * 0 -> 0` only for integer and bool dtypes (`nan * 0` is nan, `-1.0 * 0` is `-0.0`);
- `x + 0 -> x` on floats only for a `-0.0` constant (`-0.0 + 0.0` is `+0.0`), and
  `x - 0 -> x` only for `+0.0` (`-0.0 - +0.0` is `-0.0`, `x - -0.0` is `x + 0.0`),
  unless a cheap check proves `x` is never `-0.0` (abs, relu, exp, casts from integers);
- `sum` over size-1 axes is left alone for floats (a kernel accumulating from `0.0`
  turns `-0.0` into `+0.0`), while `prod`, `amax` and `amin` over them are reshapes;
- complex dtypes get only the structural rules (`x * (1+0j)` is not `x` when `x` has an
  infinite part).

A rule whose constant operand broadcast `x` to a larger shape replaces the node by
`expand(x)`, a view, so the graph keeps every value's type. Remember that `axes=()` on a
reduction means *all* axes in this registry, not none.
"""

from __future__ import annotations

import functools

from typing import Any, Callable

import numpy as np

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..ir.graph import Graph, Node
from ..ir.types import normalize_axis
from ..ops.reduction import normalize_axes
from .rewrite import Match, Pat, Rule, const_pat, pat, rewrite, uniform_value, var

__all__ = ["simplify", "SIMPLIFY_RULES", "lossless_cast"]


# --------------------------------------------------------------------------------------
# Tests on constant values (a 0-d array in the interpreter's representation)
# --------------------------------------------------------------------------------------


def _real(d: DType) -> bool:
    return not d.is_complex


def add_identity(v: np.ndarray, d: DType) -> bool:
    """`x + v == x` for every x: integer 0, or float -0.0."""
    if not _real(d) or v != 0:
        return False
    return bool(np.signbit(v)) if d.is_floating_point else True


def sub_identity(v: np.ndarray, d: DType) -> bool:
    """`x - v == x` for every x: integer 0, or float +0.0."""
    if not _real(d) or v != 0:
        return False
    return not bool(np.signbit(v)) if d.is_floating_point else True


# Ops whose float results are never -0.0 (so `y + 0.0` and `y - -0.0` are `y`).
_NO_NEGATIVE_ZERO = frozenset({"abs", "relu", "exp", "exp2", "sigmoid", "iota", "uniform"})


# Ops that move elements without changing them (never -0.0 when their inputs are not)
_MOVES = frozenset({"reshape", "permute", "expand", "slice", "flip", "cat"})


@functools.lru_cache(maxsize=4096)  # (as rewrite's _uniform_value)
def never_negative_zero(n: Node) -> bool:
    """A cheap, conservative proof that no element of `n` is -0.0."""
    if n.dtype.kind != "f":
        return n.dtype.kind in "biu"
    if n.op in _NO_NEGATIVE_ZERO:
        return True
    if n.op == "cast":
        return n.inputs[0].dtype.kind in "biu"
    if n.op == "const":
        v = uniform_value(n)
        return v is not None and not (v == 0 and np.signbit(v))
    if n.op == "add":  # x + (+0.0) is never -0.0 (-0.0 + 0.0 is +0.0)
        return any(_is_positive_zero(i) for i in n.inputs)
    if n.op in _MOVES:
        return all(never_negative_zero(i) for i in n.inputs)
    if n.op == "pad":
        value = n.attr("value")
        return not (value == 0 and np.signbit(float(value))) and never_negative_zero(n.inputs[0])
    return False


def _is_positive_zero(n: Node) -> bool:
    v = uniform_value(n)
    return v is not None and n.dtype.is_floating_point and bool(v == 0) and not np.signbit(v)


def _is_float_zero(n: Node) -> bool:
    v = uniform_value(n)
    return v is not None and n.dtype.is_floating_point and bool(v == 0)


def _zero_add_keeps(x: Node, zero: Node) -> bool:
    """`x + zero` is `x` for a float zero of either sign when x is never -0.0."""
    return _is_float_zero(zero) and never_negative_zero(x)


def is_one(v: np.ndarray, d: DType) -> bool:
    return _real(d) and bool(v == 1)


def is_zero(v: np.ndarray, d: DType) -> bool:
    return _real(d) and bool(v == 0)


def is_two(v: np.ndarray, d: DType) -> bool:
    return _real(d) and bool(v == 2)


def exact_zero(v: np.ndarray, d: DType) -> bool:
    """A zero that annihilates every x: only where x cannot be NaN, inf or signed."""
    return d.kind in "biu" and bool(v == 0)


def _integral(n: Node) -> bool:
    return n.dtype.kind in "biu"


# --------------------------------------------------------------------------------------
# Casts
# --------------------------------------------------------------------------------------

# Integers each float dtype holds exactly: 2 ** (significand bits).
_EXACT_INT_BITS = {
    dt.float16: 11,
    dt.bfloat16: 8,
    dt.float32: 24,
    dt.float64: 53,
    dt.complex64: 24,
    dt.complex128: 53,
}
_FLOAT_WIDENING = {
    dt.float16: (dt.float32, dt.float64, dt.complex64, dt.complex128),
    dt.bfloat16: (dt.float32, dt.float64, dt.complex64, dt.complex128),
    dt.float32: (dt.float64, dt.complex64, dt.complex128),
    dt.float64: (dt.complex128,),
    dt.complex64: (dt.complex128,),
}


def lossless_cast(src: DType, dst: DType) -> bool:
    """Every value of `src` is exactly a value of `dst` (so a later cast sees the same
    number whether or not it went through `dst`)."""
    if src is dst or src is dt.bool_:
        return True
    if src.is_integer:
        lo, hi = (int(np.iinfo(src.np).min), int(np.iinfo(src.np).max))
        if dst.is_integer:
            info = np.iinfo(dst.np)
            return int(info.min) <= lo and hi <= int(info.max)
        bits = _EXACT_INT_BITS.get(dst)
        return bits is not None and max(hi, -lo) <= 2**bits
    return dst in _FLOAT_WIDENING.get(src, ())


def _cast_to_same(n: Node) -> bool:
    return n.attr("dtype") is n.inputs[0].dtype


def _lossless(n: Node) -> bool:
    """On a cast node: it keeps every value of its input exactly."""
    return lossless_cast(n.inputs[0].dtype, n.dtype)


def _cast_of_cast(m: Match) -> Node:
    return m.make("cast", m["x"], dtype=m.node.dtype)


# --------------------------------------------------------------------------------------
# Replacements
# --------------------------------------------------------------------------------------


def keep(name: str) -> Callable[[Match], Node | None]:
    """Replace the root by the captured node (expanded if the root broadcast it)."""

    def replace(m: Match) -> Node | None:
        return m.fit(m[name])

    replace.__name__ = f"keep_{name}"
    return replace


def zeros(m: Match) -> Node:
    return m.const(False if m.node.dtype is dt.bool_ else 0)


def ones(m: Match) -> Node:
    d = m.node.dtype
    return m.const(True if d is dt.bool_ else 1.0 if d.kind in "fc" else 1)


def square(m: Match) -> Node | None:
    x = m["x"]
    return m.fit(m.make("mul", x, x))


def abs_of(m: Match) -> Node:
    return m.make("abs", m["x"])


# --------------------------------------------------------------------------------------
# Movement
# --------------------------------------------------------------------------------------


def _same_shape(n: Node) -> bool:
    return n.shape == n.inputs[0].shape


def _norm_perm(perm: tuple[int, ...]) -> tuple[int, ...]:
    n = len(perm)
    return tuple(p % n for p in perm) if n else ()


def _identity_perm(n: Node) -> bool:
    return _norm_perm(n.attr("perm")) == tuple(range(len(n.attr("perm"))))


def _compose_permutes(m: Match) -> Node:
    inner = _norm_perm(m["inner"].attr("perm"))
    outer = _norm_perm(m.node.attr("perm"))
    return m.make("permute", m["x"], perm=tuple(inner[i] for i in outer))


def _reshape_of_reshape(m: Match) -> Node:
    return m.make("reshape", m["x"], shape=m.node.shape)


def _expand_of_expand(m: Match) -> Node:
    return m.make("expand", m["x"], shape=m.node.shape)


def _whole_slice(n: Node) -> bool:
    return n.shape == n.inputs[0].shape and all(a == 0 for a in n.attr("starts"))


def _compose_slices(m: Match) -> Node:
    """x[a1::s1][a2::s2] is x[a1 + a2*s1 :: s1*s2]; the stop is the last element + 1."""
    inner, outer = m["inner"], m.node
    starts, stops, steps = [], [], []
    for a1, s1, a2, s2, length in zip(
        inner.attr("starts"),
        inner.attr("steps"),
        outer.attr("starts"),
        outer.attr("steps"),
        outer.shape,
    ):
        start, step = a1 + a2 * s1, s1 * s2
        starts.append(start)
        steps.append(step)
        stops.append(start + (length - 1) * step + 1 if length else start)
    return m.make("slice", m["x"], starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))


def _flip_axes(n: Node) -> frozenset[int]:
    """The flipped axes in [0, ndim); a 0-d flip (axis 0 or -1) flips nothing."""
    ndim = n.inputs[0].type.ndim
    if ndim == 0:
        return frozenset()
    return frozenset(normalize_axis(a, ndim, "flip") for a in n.attr("axes"))


def _trivial_flip(n: Node) -> bool:
    return all(n.shape[a] <= 1 for a in _flip_axes(n))


def _compose_flips(m: Match) -> Node:
    axes = _flip_axes(m["inner"]) ^ _flip_axes(m.node)
    return m.make("flip", m["x"], axes=tuple(sorted(axes)))


def _no_padding(n: Node) -> bool:
    return not any(n.attr("lows")) and not any(n.attr("highs")) and not any(n.attr("interior"))


# --------------------------------------------------------------------------------------
# Reductions over axes of size one
# --------------------------------------------------------------------------------------


def _reduces_single_elements(n: Node) -> bool:
    """Every reduced axis has size 1 (or the input is 0-d), and the result is exact:
    float `sum` is excluded (an accumulator starting at 0.0 turns -0.0 into +0.0)."""
    x = n.inputs[0]
    if n.op == "sum" and x.dtype.kind not in "biu":
        return False
    axes = normalize_axes(n.op, n.attr("axes"), x.shape)
    return all(x.shape[a] == 1 for a in axes)


def _reduce_to_reshape(m: Match) -> Node:
    x, n = m["x"], m.node
    y = x if x.shape == n.shape else m.make("reshape", x, shape=n.shape)
    return y if y.dtype is n.dtype else m.make("cast", y, dtype=n.dtype)


# --------------------------------------------------------------------------------------
# The rule list
# --------------------------------------------------------------------------------------


def _window(n: Node) -> tuple[int, int, int] | None:
    """(axis, start, stop) of a zero-padding along one axis (no interior padding), the
    window where the input lies; None for any other pad."""
    value = n.attr("value")
    if n.op != "pad" or value != 0 or np.signbit(float(value)) or any(n.attr("interior")):
        return None
    lows, highs = n.attr("lows"), n.attr("highs")
    axes = [d for d, (lo, hi) in enumerate(zip(lows, highs)) if lo or hi]
    if len(axes) != 1 or any(v < 0 for v in lows + highs):
        return None
    d = axes[0]
    return d, lows[d], n.shape[d] - highs[d]


def _pads_on_one_axis(n: Node) -> bool:
    """add(pad(x), pad(y)) of one type, zero-padding the same axis in disjoint windows."""
    a, b = n.inputs
    if a.type != n.type or b.type != n.type or n.dtype.kind not in "fiu":
        return False
    wa, wb = _window(a), _window(b)
    return (
        wa is not None and wb is not None and wa[0] == wb[0] and (wa[2] <= wb[1] or wb[2] <= wa[1])
    )


def _merge_pads(m: Match) -> Node:
    """add(pad(x), pad(y)) -> pad(cat(x + 0.0, [zeros of the gap], y + 0.0)): each
    window held its input plus the other's padding (+0.0), which turns -0.0 into +0.0,
    so a part that may hold -0.0 gets that + 0.0 (an exact no-op on anything else)."""
    first, second = sorted(m.node.inputs, key=lambda p: _window(p)[1])
    d, start, stop = _window(first)
    _, start2, stop2 = _window(second)
    dtype = m.node.dtype

    def part(x: Node) -> Node:
        if never_negative_zero(x):
            return x
        return m.make("add", x, m.const(0.0 if dtype.kind == "f" else 0, shape=x.shape))

    parts = [part(first.inputs[0])]
    if start2 > stop:
        gap = list(m.node.shape)
        gap[d] = start2 - stop
        parts.append(m.const(0.0 if dtype.kind == "f" else 0, shape=tuple(gap)))
    parts.append(part(second.inputs[0]))
    body = m.make("cat", *parts, axis=d)
    lows = [0] * len(m.node.shape)
    highs = [0] * len(m.node.shape)
    lows[d], highs[d] = start, m.node.shape[d] - stop2
    return m.make(
        "pad",
        body,
        lows=tuple(lows),
        highs=tuple(highs),
        interior=(0,) * len(lows),
        value=first.attr("value"),
    )


def _has_inner_cat(n: Node) -> bool:
    axis = n.attr("axis") % len(n.shape)
    return any(i.op == "cat" and i.attr("axis") % len(i.shape) == axis for i in n.inputs)


def _flatten_cats(m: Match) -> Node:
    axis = m.node.attr("axis")
    d = axis % len(m.node.shape)
    parts: list[Node] = []
    for i in m.node.inputs:
        if i.op == "cat" and i.attr("axis") % len(i.shape) == d:
            parts.extend(i.inputs)
        else:
            parts.append(i)
    return m.make("cat", *parts, axis=axis)


def _rule(name: str, pattern: Any, replace: Callable[[Match], Node | None], doc: str) -> Rule:
    return Rule(name, pattern, replace, doc)


def _dtype_is(test: Callable[[DType], bool]) -> Callable[[Node], bool]:
    return lambda n: test(n.dtype)


SIMPLIFY_RULES: tuple[Rule, ...] = (
    # arithmetic identities
    _rule(
        "add-zero",
        pat("add", var("x"), const_pat(add_identity)),
        keep("x"),
        "x + 0 -> x (integers; -0.0 for floats)",
    ),
    _rule(
        "zero-add",
        pat("add", const_pat(add_identity), var("x")),
        keep("x"),
        "0 + x -> x (integers; -0.0 for floats)",
    ),
    _rule(
        "sub-zero",
        pat("sub", var("x"), const_pat(sub_identity)),
        keep("x"),
        "x - 0 -> x (integers; +0.0 for floats)",
    ),
    _rule(
        "add-zero-nonneg",
        pat("add", var("x"), var("z"), where=lambda n: _zero_add_keeps(*n.inputs)),
        keep("x"),
        "x + 0.0 -> x when x is never -0.0 (abs, relu, exp, int casts, ...)",
    ),
    _rule(
        "zero-add-nonneg",
        pat("add", var("z"), var("x"), where=lambda n: _zero_add_keeps(n.inputs[1], n.inputs[0])),
        keep("x"),
        "0.0 + x -> x when x is never -0.0",
    ),
    _rule(
        "sub-zero-nonneg",
        pat("sub", var("x"), var("z"), where=lambda n: _zero_add_keeps(*n.inputs)),
        keep("x"),
        "x - (-0.0) -> x when x is never -0.0",
    ),
    _rule("mul-one", pat("mul", var("x"), const_pat(is_one)), keep("x"), "x * 1 -> x"),
    _rule("one-mul", pat("mul", const_pat(is_one), var("x")), keep("x"), "1 * x -> x"),
    _rule("div-one", pat("div", var("x"), const_pat(is_one)), keep("x"), "x / 1 -> x"),
    _rule(
        "mul-zero",
        pat("mul", var("x"), const_pat(exact_zero)),
        zeros,
        "x * 0 -> 0 for integer and bool dtypes only",
    ),
    _rule(
        "zero-mul",
        pat("mul", const_pat(exact_zero), var("x")),
        zeros,
        "0 * x -> 0 for integer and bool dtypes only",
    ),
    _rule(
        "sub-self",
        pat("sub", var("x"), var("x"), where=_integral),
        zeros,
        "x - x -> 0 for integer dtypes only",
    ),
    _rule("neg-neg", pat("neg", pat("neg", var("x"))), keep("x"), "-(-x) -> x"),
    _rule(
        "pow-two",
        pat("pow", var("x"), const_pat(is_two)),
        square,
        "x ** 2 -> x * x (exact: NumPy squares, the kernel multiplies)",
    ),
    _rule("pow-one", pat("pow", var("x"), const_pat(is_one)), keep("x"), "x ** 1 -> x"),
    _rule(
        "pow-zero",
        pat("pow", var("x"), const_pat(is_zero)),
        ones,
        "x ** 0 -> 1 (also for nan, as in IEEE pow)",
    ),
    _rule(
        "abs-abs",
        pat("abs", pat("abs", var("x"), name="inner")),
        keep("inner"),
        "abs(abs(x)) -> abs(x)",
    ),
    _rule(
        "abs-neg",
        pat("abs", pat("neg", var("x")), where=_dtype_is(lambda d: d.kind in "if")),
        abs_of,
        "abs(-x) -> abs(x) (not for unsigned, where -x wraps)",
    ),
    _rule(
        "not-not", pat("logical_not", pat("logical_not", var("x"))), keep("x"), "not(not x) -> x"
    ),
    _rule("bitnot-bitnot", pat("bitwise_not", pat("bitwise_not", var("x"))), keep("x"), "~~x -> x"),
    _rule(
        "stop-gradient",
        pat("stop_gradient", var("x")),
        keep("x"),
        "stop_gradient(x) -> x (autodiff, which reads it, has run)",
    ),
    _rule(
        "clamp-none",
        pat("clamp", var("x"), min=None, max=None),
        keep("x"),
        "clamp without bounds -> x",
    ),
    # select
    _rule(
        "where-same", pat("where", var("c"), var("x"), var("x")), keep("x"), "where(c, x, x) -> x"
    ),
    _rule(
        "where-true",
        pat("where", const_pat(lambda v, d: bool(v)), var("x"), var("y")),
        keep("x"),
        "where(true, x, y) -> x",
    ),
    _rule(
        "where-false",
        pat("where", const_pat(lambda v, d: not bool(v)), var("x"), var("y")),
        keep("y"),
        "where(false, x, y) -> y",
    ),
    # casts
    _rule("cast-same", pat("cast", var("x"), where=_cast_to_same), keep("x"), "cast(x: T, T) -> x"),
    _rule(
        "cast-cast",
        pat("cast", pat("cast", var("x"), where=_lossless)),
        _cast_of_cast,
        "cast(cast(x, A), B) -> cast(x, B) when A holds every value of x",
    ),
    # movement
    _rule(
        "reshape-same",
        pat("reshape", var("x"), where=_same_shape),
        keep("x"),
        "reshape to x's own shape -> x",
    ),
    _rule(
        "reshape-reshape",
        pat("reshape", pat("reshape", var("x"))),
        _reshape_of_reshape,
        "reshape(reshape(x)) -> reshape(x)",
    ),
    _rule(
        "permute-identity",
        pat("permute", var("x"), where=_identity_perm),
        keep("x"),
        "permute by the identity -> x",
    ),
    _rule(
        "permute-permute",
        pat("permute", pat("permute", var("x"), name="inner")),
        _compose_permutes,
        "permute(permute(x, p), q) -> permute(x, p[q])",
    ),
    _rule(
        "expand-same",
        pat("expand", var("x"), where=_same_shape),
        keep("x"),
        "expand to x's own shape -> x",
    ),
    _rule(
        "expand-expand",
        pat("expand", pat("expand", var("x"))),
        _expand_of_expand,
        "expand(expand(x)) -> expand(x)",
    ),
    _rule(
        "slice-whole",
        pat("slice", var("x"), where=_whole_slice),
        keep("x"),
        "a slice that keeps every element -> x",
    ),
    _rule(
        "slice-slice",
        pat("slice", pat("slice", var("x"), name="inner")),
        _compose_slices,
        "slice(slice(x)) -> one slice",
    ),
    _rule(
        "flip-trivial",
        pat("flip", var("x"), where=_trivial_flip),
        keep("x"),
        "flip over no axes or axes of size <= 1 -> x",
    ),
    _rule(
        "flip-flip",
        pat("flip", pat("flip", var("x"), name="inner")),
        _compose_flips,
        "flip(flip(x, a), b) -> flip(x, a xor b)",
    ),
    _rule("pad-none", pat("pad", var("x"), where=_no_padding), keep("x"), "pad by nothing -> x"),
    _rule("cat-one", pat("cat", var("x")), keep("x"), "cat of one tensor -> x"),
    _rule(
        "cat-cat",
        Pat(op="cat", where=_has_inner_cat),
        _flatten_cats,
        "cat(a, cat(b, c), d) along one axis -> cat(a, b, c, d)",
    ),
    _rule(
        "pad-add-pad",
        pat("add", pat("pad", var("x")), pat("pad", var("y")), where=_pads_on_one_axis),
        _merge_pads,
        "pad(x) + pad(y) zero-padding one axis in disjoint windows -> pad(cat(x, y)) "
        "(the gradient of the pieces of split/unbind; -0.0 made +0.0 as the add did)",
    ),
    # reductions
    _rule(
        "reduce-single",
        pat(("sum", "prod", "amax", "amin"), var("x"), where=_reduces_single_elements),
        _reduce_to_reshape,
        "a reduction over axes of size 1 -> reshape (and cast to "
        "int64 for integer sum/prod); not float sum",
    ),
)


def simplify(g: Graph) -> Graph:
    """Algebraic identities (SIMPLIFY_RULES) applied bottom-up to a fixpoint; each is
    exact for NaN, infinities and signed zeros, so results do not change by a bit."""
    return rewrite(g, SIMPLIFY_RULES)
