"""The fuzzed surface: op families, how each op is called, and hypothesis strategies that
draw cases for them — mostly valid calls on awkward tensors (0-d, empty, NaN/Inf,
non-contiguous, overlapping, mixed dtypes), and a steady fraction of bad ones (wrong
shapes, dtypes and Python types, out-of-range dims and indices, negative and huge sizes)."""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .cases import DT, DTYPES, FILLS, FLOATS, LAYOUTS, Case, Key, TSpec

UNARY = ("abs neg exp log sqrt rsqrt sin cos tan tanh sigmoid relu floor ceil round trunc sign "
         "reciprocal square log1p expm1 log2 log10 exp2 erf erfc isnan isinf isfinite "
         "logical_not").split()
BINARY = ("add sub mul div true_divide floor_divide pow maximum minimum fmod remainder atan2 "
          "eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or "
          "lerp").split()
REDUCE = ("sum mean prod amax amin max min argmax argmin std var logsumexp all any norm "
          "softmax log_softmax cumsum cumprod count_nonzero").split()
SHAPE = ("reshape view permute transpose expand squeeze unsqueeze flatten narrow flip repeat "
         "t movedim split chunk unbind tril triu broadcast_to swapaxes select contiguous "
         "clone cat stack concat").split()
INDEX = "getitem setitem gather index_select masked_fill scatter scatter_add nonzero".split()
CREATE = ("zeros ones empty full arange linspace eye zeros_like ones_like full_like tensor "
          "randn rand randint empty_like").split()
MATMUL = "matmul mm bmm mv dot outer einsum".split()
INPLACE = ("add_ sub_ mul_ div_ clamp_ zero_ fill_ copy_ masked_fill_ exp_ relu_ sqrt_ neg_ "
           "abs_ pow_ sigmoid_ tanh_ floor_ scatter_ scatter_add_").split()
SORT = "sort argsort topk".split()

FAMILIES = {"unary": UNARY, "binary": BINARY, "reduce": REDUCE, "shape": SHAPE,
            "index": INDEX, "create": CREATE, "matmul": MATMUL, "inplace": INPLACE,
            "sort": SORT}

# results whose values are unspecified (uninitialized memory, random draws): only the
# shape and dtype are compared
SHAPE_ONLY = {"empty", "empty_like", "randn", "rand", "randint"}

# values of the wrong Python type, drawn now and then wherever a tensor or number goes
WRONG_TYPES = ("text", None, [1, 2], 1.5j, object())


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------

small_dim = st.one_of(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.just(0))
shapes = st.lists(small_dim, min_size=0, max_size=3).map(tuple)
seeds = st.integers(0, 2 ** 16)


def dtypes(floats_mostly: bool = True) -> st.SearchStrategy[str]:
    if floats_mostly:
        return st.one_of(st.sampled_from(("float32", "float64")), st.sampled_from(DTYPES))
    return st.sampled_from(DTYPES)


@st.composite
def tspec(draw, shape=None, dtype=None, grad: bool = True) -> TSpec:
    shape = draw(shapes) if shape is None else shape
    dtype = draw(dtypes()) if dtype is None else dtype
    layout = draw(st.one_of(st.just("contiguous"), st.sampled_from(LAYOUTS)))
    fill = draw(st.one_of(st.just("normal"), st.sampled_from(FILLS)))
    rg = grad and dtype in FLOATS and draw(st.integers(0, 2)) == 0
    return TSpec(dtype, tuple(shape), layout, fill, rg, draw(seeds))


@st.composite
def related_shape(draw, shape: tuple) -> tuple:
    """A shape that broadcasts with `shape` most of the time."""
    kind = draw(st.integers(0, 9))
    if kind <= 3:
        return shape
    if kind <= 5:
        return tuple(1 if draw(st.booleans()) else d for d in shape)
    if kind <= 7:
        return shape[draw(st.integers(0, len(shape))):]
    return draw(shapes)


def dim_for(ndim: int) -> st.SearchStrategy[int]:
    """A dimension index: in range most of the time, out of range sometimes."""
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    return st.one_of(st.integers(lo, hi), st.integers(lo, hi), st.integers(lo, hi),
                     st.integers(-6, 6))


def maybe_wrong(value_strategy: st.SearchStrategy) -> st.SearchStrategy:
    """`value_strategy`, or now and then a value of the wrong Python type."""
    return st.one_of(value_strategy, value_strategy, value_strategy, value_strategy,
                     value_strategy, value_strategy, value_strategy,
                     st.sampled_from(WRONG_TYPES[:3]))


def kwargs(**items: Any) -> tuple:
    return tuple(sorted((k, v) for k, v in items.items() if v is not _MISSING))


_MISSING = object()


def second_set(draw, make) -> tuple | None:
    """For compiled runs: a second set of tensors with new shapes (a recompile)."""
    if not draw(st.booleans()):
        return None
    return make(draw)


# --------------------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------------------

@st.composite
def unary_case(draw) -> Case:
    op = draw(st.sampled_from(UNARY))

    def tensors(draw):
        return (draw(tspec()),)
    first = tensors(draw)
    arg = draw(maybe_wrong(st.just(_MISSING)))
    pos = () if arg is _MISSING else (arg,)
    return Case(op, first, pos, (), second_set(draw, tensors))


@st.composite
def binary_case(draw) -> Case:
    op = draw(st.sampled_from(BINARY))

    def tensors(draw):
        a = draw(tspec())
        kind = draw(st.integers(0, 9))
        if kind == 0:                               # a Python number on the right
            return (a, draw(st.sampled_from((2, -1, 0, 0.5, 2.5, True, float("inf")))))
        if kind == 1:                               # the wrong Python type
            return (a, draw(st.sampled_from(WRONG_TYPES)))
        if kind == 2:                               # a Python number on the left
            return (draw(st.sampled_from((3, 0.25, -2))), a)
        b = draw(tspec(shape=draw(related_shape(a.shape)),
                       dtype=a.dtype if draw(st.booleans()) else None))
        return (a, b)
    first = tensors(draw)
    kw: dict = {}
    if op in ("add", "sub") and draw(st.integers(0, 3)) == 0:
        kw["alpha"] = draw(st.sampled_from((2, 0.5, -1)))
    if op == "div" and draw(st.integers(0, 3)) == 0:
        kw["rounding_mode"] = draw(st.sampled_from(("trunc", "floor", None, "bad")))
    pos: tuple = ()
    if op == "lerp":
        pos = (draw(st.sampled_from((0.25, 0.5, 2.0))),)
    return Case(op, first, pos, kwargs(**kw), second_set(draw, tensors))


@st.composite
def reduce_case(draw) -> Case:
    op = draw(st.sampled_from(REDUCE))
    a = draw(tspec())
    nd = len(a.shape)
    kw: dict = {}
    pos: tuple = ()
    needs_dim = op in ("softmax", "log_softmax", "cumsum", "cumprod", "logsumexp")
    if needs_dim or draw(st.booleans()):
        d = draw(st.one_of(dim_for(nd), dim_for(nd),
                           st.lists(dim_for(nd), min_size=1, max_size=2).map(tuple)))
        if op in ("softmax", "log_softmax", "cumsum", "cumprod", "argmax", "argmin", "max",
                  "min") and isinstance(d, tuple):
            d = d[0]
        kw["dim"] = d
        if op not in ("softmax", "log_softmax", "cumsum", "cumprod", "count_nonzero") \
                and draw(st.booleans()):
            kw["keepdim"] = draw(st.booleans())
    if op in ("std", "var") and draw(st.booleans()):
        kw["correction"] = draw(st.sampled_from((0, 1, 2)))
    if op in ("sum", "mean", "softmax", "log_softmax", "cumsum", "prod") and \
            draw(st.integers(0, 3)) == 0:
        kw["dtype"] = DT(draw(st.sampled_from(("float64", "float32", "int64"))))
    if op == "norm" and draw(st.booleans()):
        pos = (draw(st.sampled_from((1, 2, float("inf"), 3))),)
    method = draw(st.booleans())
    second = second_set(draw, lambda d: (d(tspec(shape=d(shapes), dtype=a.dtype)),))
    return Case(("." if method else "") + op, (a,), pos, kwargs(**kw), second)


@st.composite
def shape_case(draw) -> Case:
    op = draw(st.sampled_from(SHAPE))
    a = draw(tspec())
    s, nd = a.shape, len(a.shape)
    pos: tuple = ()
    kw: dict = {}
    tensors: tuple = (a,)
    numel = 1
    for d in s:
        numel *= d
    if op in ("reshape", "view"):
        choices = [(numel,), (-1,), s[::-1], (1,) + s, (-1, 1), (numel, -1), (2, -1),
                   (-1, -1), (-2, numel), (numel + 1,)]
        pos = draw(st.sampled_from(choices))
    elif op == "permute":
        pos = draw(st.permutations(range(nd)).map(tuple) | st.lists(dim_for(nd), max_size=3)
                   .map(tuple))
    elif op in ("transpose", "swapaxes", "movedim"):
        pos = (draw(dim_for(nd)), draw(dim_for(nd)))
    elif op in ("expand", "broadcast_to"):
        target = tuple(draw(st.sampled_from((d, 3, -1, 0))) if d == 1 else
                       draw(st.sampled_from((d, d, d, -1, d + 1))) for d in s)
        target = draw(st.sampled_from(((2,), (), (-2,)))) + target
        pos = (target,) if op == "broadcast_to" else target
    elif op in ("squeeze", "unsqueeze", "flip", "select", "narrow", "tril", "triu"):
        d = draw(dim_for(nd + (op == "unsqueeze")))
        if op == "flip":
            pos = (draw(st.lists(dim_for(nd), max_size=2).map(tuple)),)
        elif op == "select":
            pos = (d, draw(st.integers(-5, 5)))
        elif op == "narrow":
            pos = (d, draw(st.integers(-4, 4)), draw(st.integers(-1, 4)))
        elif op in ("tril", "triu"):
            pos = (draw(st.integers(-3, 3)),)
        elif op == "squeeze" and draw(st.booleans()):
            pos = ()
        else:
            pos = (d,)
    elif op == "flatten":
        pos = (draw(dim_for(nd)), draw(dim_for(nd)))
    elif op == "repeat":
        pos = tuple(draw(st.lists(st.integers(-1, 3), min_size=max(nd - 1, 0),
                                  max_size=nd + 1)))
    elif op in ("split", "chunk"):
        pos = (draw(st.integers(-1, 4)), draw(dim_for(nd)))
        if op == "split" and draw(st.integers(0, 3)) == 0:
            pos = (draw(st.lists(st.integers(0, 3), min_size=1, max_size=3)), pos[1])
    elif op == "unbind":
        pos = (draw(dim_for(nd)),)
    elif op in ("cat", "stack", "concat"):
        n = draw(st.integers(1, 3))
        others = tuple(draw(tspec(shape=draw(st.sampled_from((s, s, s[:-1] + (2,) if s else s,
                                                                s[1:]))),
                                  dtype=a.dtype if draw(st.booleans()) else None))
                       for _ in range(n - 1))
        tensors = (a,) + others
        kw["dim"] = draw(dim_for(nd + (op == "stack")))
        return Case(op, tensors, (), kwargs(**kw), None, {"list": True})
    method = op not in ("broadcast_to",) and (op in ("view", "repeat", "expand", "contiguous",
                                                      "clone", "t") or draw(st.booleans()))
    return Case(("." if method else "") + op, tensors, pos, kwargs(**kw))


def _index_tensor(draw, size: int, n: int | None = None) -> TSpec:
    shape = (draw(st.integers(0, 4)) if n is None else n,)
    return TSpec(draw(st.sampled_from(("int64", "int64", "int64", "int32", "float32", "bool"))),
                 shape, "contiguous", "small_int", False, draw(seeds))


@st.composite
def index_case(draw) -> Case:
    op = draw(st.sampled_from(INDEX))
    a = draw(tspec())
    s, nd = a.shape, len(a.shape)
    if op in ("getitem", "setitem"):
        items = []
        tensors = [a]
        for _ in range(draw(st.integers(1, min(nd, 3) if nd else 1))):
            kind = draw(st.integers(0, 7))
            if kind <= 1:
                items.append(draw(st.integers(-5, 5)))
            elif kind <= 3:
                items.append(("s", draw(st.one_of(st.none(), st.integers(-5, 5))),
                              draw(st.one_of(st.none(), st.integers(-5, 5))),
                              draw(st.sampled_from((None, None, 1, 2, 3, 0, -1)))))
            elif kind == 4:
                items.append(draw(st.sampled_from((None, "..."))))
            elif kind == 5 and nd:
                mask = TSpec("bool", s[:1], "contiguous", "normal", False, draw(seeds))
                tensors.append(mask)
                items.append(("t", len(tensors) - 1))
            else:
                tensors.append(_index_tensor(draw, s[0] if s else 1))
                items.append(("t", len(tensors) - 1))
        key = Key(tuple(items))
        if op == "setitem":
            value = draw(st.one_of(st.sampled_from((1.5, 0, -2)),
                                   tspec(shape=draw(st.sampled_from(((), (1,), s[-1:]))),
                                         grad=False)))
            tensors.append(value)
        return Case(op, tuple(tensors), (key,))
    d = draw(dim_for(nd))
    if op in ("gather", "scatter", "scatter_add"):
        idx_shape = tuple(draw(st.integers(0, x)) for x in s) if draw(st.integers(0, 4)) \
            else draw(shapes)
        idx = TSpec(draw(st.sampled_from(("int64",) * 5 + ("int32", "float32"))), idx_shape,
                    "contiguous", "small_int", False, draw(seeds))
        if op == "gather":
            return Case(op, (a, idx), (d,), (), None, {"dim_first": True})
        src = draw(st.one_of(tspec(shape=idx_shape, dtype=a.dtype, grad=False),
                             st.sampled_from((2.0, -1))))
        if op == "scatter_add" and not isinstance(src, TSpec):
            src = TSpec(a.dtype, idx_shape, "contiguous", "normal", False, 0)
        return Case(op, (a, idx, src), (d,), (), None, {"dim_first": True})
    if op == "index_select":
        return Case(op, (a, _index_tensor(draw, s[d] if s and -nd <= d < nd else 1)), (d,), (),
                    None, {"dim_first": True})
    if op == "masked_fill":
        m = TSpec("bool" if draw(st.integers(0, 5)) else "int64",
                  draw(related_shape(s)), "contiguous", "normal", False, draw(seeds))
        val = draw(st.one_of(st.sampled_from((0.0, -1e9, float("nan"), 3)),
                             tspec(shape=(), dtype=a.dtype, grad=False)))
        return Case(op, (a, m, val), ())
    return Case(".nonzero", (a,), (), kwargs(as_tuple=draw(st.booleans())))


SIZES = st.one_of(st.lists(st.integers(0, 4), max_size=3).map(tuple),
                  st.lists(st.integers(0, 4), max_size=3).map(tuple),
                  st.lists(st.integers(-3, 4), max_size=3).map(tuple),
                  st.sampled_from(((2 ** 40,), (2 ** 62, 4), (1 << 20, 1 << 20), (3.5,),
                                   ("2",), ((2, 3),))))


@st.composite
def create_case(draw) -> Case:
    op = draw(st.sampled_from(CREATE))
    kw: dict = {}
    if draw(st.booleans()):
        kw["dtype"] = DT(draw(st.sampled_from(DTYPES)))
    if op in ("zeros", "ones", "empty", "randn", "rand"):
        size = draw(SIZES)
        pos = (size,) if draw(st.booleans()) else size
        return Case(op, (), pos, kwargs(**kw))
    if op == "full":
        return Case(op, (), (draw(SIZES), draw(st.sampled_from((1.5, 2, True, -0.0,
                                                                  float("nan"), "x")))),
                    kwargs(**kw))
    if op == "randint":
        kw.pop("dtype", None)
        return Case(op, (), (draw(st.integers(-2, 5)), draw(st.integers(-2, 8)),
                             draw(SIZES)), kwargs(**kw))
    if op == "arange":
        args = tuple(draw(st.lists(st.sampled_from((0, 1, 5, -3, 2.5, 0.5, -1, 10)),
                                   min_size=1, max_size=3)))
        return Case(op, (), args, kwargs(**kw))
    if op == "linspace":
        return Case(op, (), (draw(st.sampled_from((0, -1.5, 2))), draw(st.sampled_from((1, 4))),
                             draw(st.integers(-2, 6))), kwargs(**kw))
    if op == "eye":
        args = tuple(draw(st.lists(st.integers(-1, 4), min_size=1, max_size=2)))
        return Case(op, (), args, kwargs(**kw))
    if op == "tensor":
        data = draw(st.sampled_from(([1, 2, 3], [[1.5, 2], [3, 4]], [[1, 2], [3]], [], 3.5,
                                     [True, False], [[]], [1, 2.5, True], "abc",
                                     [[1, 2], [3, 4], [5, 6]], [float("nan"), 1e300])))
        return Case(op, (), (data,), kwargs(**kw))
    a = draw(tspec(grad=False))
    pos = (draw(st.sampled_from((2.5, -1, 0))),) if op == "full_like" else ()
    return Case(op, (a,), pos, kwargs(**kw))


@st.composite
def matmul_case(draw) -> Case:
    op = draw(st.sampled_from(MATMUL))
    n, k, m, b = (draw(st.integers(0, 4)) for _ in range(4))
    want = {"mm": [(n, k), (k, m)], "bmm": [(b, n, k), (b, k, m)], "mv": [(n, k), (k,)],
            "dot": [(k,), (k,)], "outer": [(n,), (m,)], "einsum": [(n, k), (k, m)],
            "matmul": draw(st.sampled_from([[(n, k), (k, m)], [(k,), (k, m)], [(n, k), (k,)],
                                            [(b, n, k), (k, m)], [(k,), (k,)],
                                            [(b, 1, n, k), (b, k, m)]]))}[op]
    if draw(st.integers(0, 5)) == 0:                    # shapes that do not fit
        want = [draw(shapes), draw(shapes)]
    dt = draw(dtypes())
    tensors = tuple(draw(tspec(shape=s, dtype=dt if draw(st.integers(0, 5)) else None))
                    for s in want)
    if op == "einsum":
        eq = draw(st.sampled_from(("ij,jk->ik", "ij,jk", "ij,kj->ik", "ii,jk->j", "ij,jk->ki")))
        return Case(op, tensors, (), (), None, {"equation": eq})
    return Case(("." if draw(st.booleans()) else "") + op, tensors)


@st.composite
def inplace_case(draw) -> Case:
    op = draw(st.sampled_from(INPLACE))
    a = draw(tspec())
    s = a.shape
    if op in ("add_", "sub_", "mul_", "div_", "copy_", "pow_"):
        other = draw(st.one_of(tspec(shape=draw(related_shape(s)), grad=False),
                               st.sampled_from((2, 0.5, -1.0, True))))
        if op == "copy_" and not isinstance(other, TSpec):
            other = TSpec(a.dtype, s, "contiguous", "normal", False, 1)
        return Case("." + op, (a, other))
    if op == "clamp_":
        kw = kwargs(min=draw(st.sampled_from((None, -0.5, 0))),
                    max=draw(st.sampled_from((None, 0.5, 2))))
        return Case("." + op, (a,), (), kw)
    if op == "fill_":
        return Case("." + op, (a, draw(st.sampled_from((1.5, 0, -3, True)))))
    if op == "masked_fill_":
        m = TSpec("bool", draw(related_shape(s)), "contiguous", "normal", False, draw(seeds))
        return Case("." + op, (a, m, draw(st.sampled_from((0.0, -2.5)))))
    if op in ("scatter_", "scatter_add_"):
        nd = len(s)
        idx_shape = tuple(draw(st.integers(0, x)) for x in s)
        idx = TSpec("int64", idx_shape, "contiguous", "small_int", False, draw(seeds))
        src = TSpec(a.dtype, idx_shape, "contiguous", "normal", False, draw(seeds))
        return Case("." + op, (a, idx, src), (draw(dim_for(nd)),), (), None,
                    {"dim_first": True})
    return Case("." + op, (a,))


@st.composite
def sort_case(draw) -> Case:
    op = draw(st.sampled_from(SORT))
    a = draw(tspec())
    nd = len(a.shape)
    kw: dict = {"dim": draw(dim_for(nd))}
    if op == "topk":
        kw["k"] = draw(st.integers(-1, 5))
    else:
        kw["stable"] = True
    if draw(st.booleans()):
        kw["descending" if op != "topk" else "largest"] = draw(st.booleans())
    return Case(op, (a,), (), kwargs(**kw))


STRATEGIES = {"unary": unary_case, "binary": binary_case, "reduce": reduce_case,
              "shape": shape_case, "index": index_case, "create": create_case,
              "matmul": matmul_case, "inplace": inplace_case, "sort": sort_case}
