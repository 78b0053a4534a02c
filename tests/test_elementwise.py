"""Every elementwise op against its NumPy reference: dtypes, broadcasting, layouts, edges."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import llgrad as lg
from llgrad.ir import dtypes as dt
from llgrad.ir import registry

from conftest import LAYOUTS, bf16_round, in_layout, to_lg, values

FLOATS = [dt.float32, dt.float64, dt.float16, dt.bfloat16]

# op -> (sample domain (lo, hi), relative tolerance for float32)
UNARY = {
    "exp": ((-20, 20), 4e-7), "exp2": ((-20, 20), 4e-7), "expm1": ((-5, 5), 4e-7),
    "log": ((1e-3, 1e3), 4e-7), "log2": ((1e-3, 1e3), 4e-7), "log10": ((1e-3, 1e3), 4e-7),
    "log1p": ((-0.9, 10), 4e-7), "sqrt": ((0, 100), 2e-7), "rsqrt": ((0.01, 100), 4e-7),
    "sin": ((-10, 10), 4e-7), "cos": ((-10, 10), 4e-7), "tan": ((-1.4, 1.4), 8e-7),
    "tanh": ((-8, 8), 4e-7), "sigmoid": ((-20, 20), 4e-7), "erf": ((-4, 4), 4e-7),
    "erfc": ((-2, 4), 2e-6), "neg": ((-5, 5), 0), "abs": ((-5, 5), 0), "sign": ((-5, 5), 0),
    "reciprocal": ((0.1, 5), 2e-7), "square": ((-5, 5), 2e-7), "floor": ((-5, 5), 0),
    "ceil": ((-5, 5), 0), "round": ((-5, 5), 0), "trunc": ((-5, 5), 0),
    "relu": ((-5, 5), 0), "silu": ((-8, 8), 4e-7), "gelu": ((-6, 6), 4e-7),
    "softplus": ((-30, 30), 4e-7),
}


def _sample(lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.uniform(lo, hi, size=shape)


def _tolerance(d: dt.DType, base: float) -> tuple[float, float]:
    eps = {dt.float16: 2 ** -10, dt.bfloat16: 2 ** -7, dt.float32: 2 ** -23,
           dt.float64: 2 ** -52}[d]
    rtol = max(base * eps / 2 ** -23, 2 * eps) if base else 2 * eps
    return rtol, rtol


def _reference(op: str, arrays: list[np.ndarray], d: dt.DType, **attrs) -> np.ndarray:
    """The registry's NumPy reference, in float64, rounded to the result dtype."""
    opdef = registry.get(op)
    full_attrs = dict(opdef.normalize_attrs(attrs))
    out = np.asarray(opdef.reference(*[a.astype(np.float64) for a in arrays], **full_attrs))
    if d is dt.bfloat16:
        return bf16_round(out)
    with np.errstate(over="ignore"):
        return out.astype(d.np)


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("d", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_unary_matches_reference(op, d, layout):
    (lo, hi), base = UNARY[op]
    a = _sample(lo, hi, (6, 7))
    x = to_lg(a, d)
    xv = values(x).astype(np.float64)            # the values after rounding to d
    got = values(getattr(lg, op)(in_layout(x, layout)))
    want = _reference(op, [xv], d)
    rtol, atol = _tolerance(d, base)
    finite = np.abs(want[np.isfinite(want)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol * scale)


@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "sin", "relu",
                                "abs", "gelu", "softplus", "floor", "silu"])
def test_unary_special_values(op):
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.0, -88.0,
                         1e30, -1e30], dtype=np.float32)
    got = values(getattr(lg, op)(lg.tensor(specials)))
    with np.errstate(all="ignore"):
        want = _reference(op, [specials], dt.float32)
    if op in ("sin", "cos", "tan"):
        # documented (docs/mathlib.md): no full-range reduction; |x| > 2**24 gives NaN
        want = np.where(np.abs(specials) > 2.0 ** 24, np.float32(np.nan), want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{op} NaN pattern")
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=1e-37)


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 0, 2), (1, 1, 1)])
def test_unary_zero_dim_and_empty(shape):
    a = np.random.uniform(-1, 1, size=shape).astype(np.float32)
    got = lg.exp(lg.tensor(a))
    assert got.shape == shape
    np.testing.assert_allclose(values(got), np.exp(a), rtol=1e-6)


def test_integer_input_promotes_to_float():
    x = lg.tensor([1, 2, 3])
    y = lg.exp(x)
    assert y.dtype is dt.float32
    np.testing.assert_allclose(values(y), np.exp([1, 2, 3]), rtol=1e-6)


# --------------------------------------------------------------------------------------
# Binary ops
# --------------------------------------------------------------------------------------

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "atan2": np.arctan2,
    "remainder": np.remainder, "floor_divide": np.floor_divide,
}
BROADCASTS = [((5,), (5,)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((), (3,)), ((2, 1, 3), (2, 3)),
              ((0, 3), (3,))]


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("d", [dt.float32, dt.float64], ids=lambda d: d.name)
def test_binary_float_broadcast(op, shapes, d):
    a = np.random.uniform(0.5, 3, size=shapes[0])
    b = np.random.uniform(0.5, 3, size=shapes[1])
    if op in ("sub", "maximum", "eq", "ne", "lt", "le", "gt", "ge"):
        b = np.where(np.random.rand(*shapes[1]) < 0.3, 1.0, b) if b.ndim else b
    x, y = to_lg(a, d), to_lg(b, d)
    got = values(getattr(lg, op)(x, y))
    with np.errstate(all="ignore"):
        want = BINARY[op](values(x).astype(np.float64), values(y).astype(np.float64))
    if want.dtype != bool:
        want = want.astype(d.np)
    rtol = 1e-6 if d is dt.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("op", ["add", "mul", "sub", "maximum", "lt", "floor_divide",
                                "remainder", "pow"])
@pytest.mark.parametrize("d", [dt.int32, dt.int64, dt.uint8, dt.int8], ids=lambda d: d.name)
def test_binary_integers(op, d):
    lo = 0 if d is dt.uint8 else -9
    a = np.random.randint(lo, 10, size=(4, 5)).astype(d.np)
    b = np.random.randint(1, 6, size=(5,)).astype(d.np)
    if op in ("floor_divide", "remainder") and d is not dt.uint8:
        b = np.array([-3, -1, 1, 2, 5], dtype=d.np)
    got = values(getattr(lg, op)(lg.tensor(a), lg.tensor(b)))
    with np.errstate(all="ignore"):
        want = BINARY[op](a, b)
    np.testing.assert_array_equal(got, want)


def test_integer_division_by_zero_raises_as_torch_does():
    a = lg.tensor([5, -5, 0], dtype=lg.int32)
    b = lg.tensor([1, 0, 2], dtype=lg.int32)
    for divide in (lg.floor_divide, lg.remainder, lg.fmod,
                   lambda a, b: lg.div(a, b, rounding_mode="trunc")):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            divide(a, b)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            divide(a, 0)
    f = lg.compile(lambda a, b: lg.remainder(a, b) + 1)   # runs eagerly, so it checks too
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(a, b)
    assert values(f(a, lg.tensor([3, 3, 3], dtype=lg.int32))).tolist() == [3, 2, 1]
    m = lg.tensor([-2 ** 31], dtype=lg.int32)
    assert values(lg.floor_divide(m, lg.tensor([-1], dtype=lg.int32))).tolist() == [-2 ** 31]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_binary_noncontiguous(layout):
    a = np.random.randn(4, 6).astype(np.float32)
    b = np.random.randn(4, 6).astype(np.float32)
    x = in_layout(lg.tensor(a), layout)
    y = in_layout(lg.tensor(b), "transposed")
    np.testing.assert_allclose(values(x * y + x), a * b + a, rtol=1e-6)


def test_expanded_input_zero_stride():
    a = lg.tensor([1.0, 2.0, 3.0]).expand(4, 3)
    assert a.stride() == (0, 1)
    np.testing.assert_allclose(values(a + 1), np.tile([2.0, 3.0, 4.0], (4, 1)))


def test_special_values_binary():
    a = lg.tensor([np.nan, 1.0, np.inf, -np.inf, 0.0])
    b = lg.tensor([1.0, np.nan, np.inf, 1.0, 0.0])
    got = values(lg.maximum(a, b))
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == np.inf and got[3] == 1.0
    got = values(a / b)
    assert np.isnan(got[0]) and np.isnan(got[4]) and got[3] == -np.inf


# --------------------------------------------------------------------------------------
# Promotion, scalars and casts
# --------------------------------------------------------------------------------------

PROMOTION_CASES = [
    (dt.int32, dt.float32), (dt.int64, dt.float64), (dt.bool_, dt.int32), (dt.float16, dt.float32),
    (dt.bfloat16, dt.float16), (dt.uint8, dt.int8), (dt.int32, dt.int64), (dt.bool_, dt.bool_),
]


@pytest.mark.parametrize("pair", PROMOTION_CASES, ids=lambda p: f"{p[0].name}-{p[1].name}")
def test_promotion_matches_torch(pair):
    torch = pytest.importorskip("torch")
    a, b = pair
    x = lg.ones(2, dtype=a)
    y = lg.ones(2, dtype=b)
    got = (x * y).dtype
    want = torch.promote_types(getattr(torch, a.name), getattr(torch, b.name))
    assert got.name == str(want).replace("torch.", "")


@pytest.mark.parametrize("d", [dt.int32, dt.int64, dt.float16, dt.bfloat16, dt.float64, dt.bool_],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("scalar", [2, 2.5, True])
def test_scalar_promotion_matches_torch(d, scalar):
    torch = pytest.importorskip("torch")
    got = (lg.ones(3, dtype=d) + scalar).dtype if d is not dt.bool_ or scalar is not True \
        else (lg.ones(3, dtype=d) * scalar).dtype
    t = torch.ones(3, dtype=getattr(torch, d.name if d is not dt.bool_ else "bool"))
    want = (t + scalar).dtype if d is not dt.bool_ or scalar is not True else (t * scalar).dtype
    assert got.name == str(want).replace("torch.", "")


def test_zero_dim_tensor_does_not_widen():
    x = lg.ones(3, dtype=lg.float16)
    y = lg.tensor(2.0, dtype=lg.float64)
    assert (x * y).dtype is dt.float16
    i = lg.ones(3, dtype=lg.int32)
    assert (i * lg.tensor(2.0, dtype=lg.float64)).dtype is dt.float64


@pytest.mark.parametrize("src", [dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32,
                                 dt.int64, dt.bool_, dt.uint8], ids=lambda d: d.name)
@pytest.mark.parametrize("dst", [dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32,
                                 dt.int64, dt.bool_, dt.uint8], ids=lambda d: d.name)
def test_casts(src, dst):
    a = np.array([0.0, 1.0, -2.0, 3.75, 100.0, -0.5])
    if src.kind in "iub":
        a = np.trunc(a)
    if src is dt.uint8:
        a = np.abs(a)
    x = to_lg(a.astype(np.float32).astype(src.np if src is not dt.bfloat16 else np.float32), src)
    got = values(x.to(dst)).astype(np.float64)
    xv = values(x).astype(np.float64)
    if dst is dt.bool_:
        want = xv != 0
    elif dst.kind in "iu":
        want = np.trunc(xv)
        if dst is dt.uint8:
            want = np.mod(want, 256)
    elif dst is dt.bfloat16:
        want = bf16_round(xv)
    else:
        want = xv.astype(dst.np)
    np.testing.assert_allclose(got, np.asarray(want, dtype=np.float64))


def test_nan_to_int_cast_is_defined():
    x = lg.tensor([np.nan, np.inf, -np.inf, 1e20])
    got = values(x.to(lg.int32))
    assert got[0] == 0 and got[1] == 2 ** 31 - 1 and got[2] == -2 ** 31


def test_where_and_clamp():
    a = np.random.randn(3, 4).astype(np.float32)
    x = lg.tensor(a)
    np.testing.assert_array_equal(values(lg.where(x > 0, x, 0.0)), np.where(a > 0, a, 0))
    np.testing.assert_array_equal(values(x.clamp(-0.5, 0.5)), np.clip(a, -0.5, 0.5))
    n = lg.tensor([np.nan, 2.0])
    assert np.isnan(values(n.clamp(0, 1))[0])


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------

def test_broadcast_error_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"add: shapes \[2, 3\], \[4\] cannot be broadcast"):
        lg.ones(2, 3) + lg.ones(4)


def test_bad_operand_type():
    with pytest.raises(TypeError, match="mul: expected Tensor or number operands, got str"):
        lg.ones(2) * "a"


def test_inplace_result_type_error():
    x = lg.ones(2, dtype=lg.int64)
    with pytest.raises(RuntimeError, match="result type float32 can't be cast"):
        x.add_(1.5)


def test_scalar_overflow_error():
    with pytest.raises(RuntimeError, match="can't|cannot be converted to type int32"):
        lg.ones(2, dtype=lg.int32) + 2 ** 40


# --------------------------------------------------------------------------------------
# Property test: random expressions against NumPy
# --------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple),
       ops=st.lists(st.sampled_from(["add", "mul", "sub", "maximum", "tanh", "exp_neg",
                                     "sigmoid"]), min_size=1, max_size=5),
       seed=st.integers(0, 1000))
def test_random_expressions(shape, ops, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    b = rng.standard_normal(shape[-1:] if shape else ())
    x, y = lg.tensor(a), lg.tensor(b)
    for op in ops:
        if op == "tanh":
            x, a = lg.tanh(x), np.tanh(a)
        elif op == "sigmoid":
            x, a = lg.sigmoid(x), 1 / (1 + np.exp(-a))
        elif op == "exp_neg":
            x, a = lg.exp(-x * x), np.exp(-a * a)
        else:
            x = getattr(lg, op)(x, y)
            a = {"add": np.add, "mul": np.multiply, "sub": np.subtract,
                 "maximum": np.maximum}[op](a, b)
    np.testing.assert_allclose(values(x), a, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# In-place writes read the written operand through the output's pointer
# --------------------------------------------------------------------------------------

def _in_place_plan(op, operands, out):
    from llgrad.eager import elementwise as ew
    return ew._plans[ew._key(op, operands, None, out)]


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_in_place_kernels_read_through_the_output(layout):
    """`p.add_(g)`, `p.mul_(s)`, `p.add_(g, alpha=)` compile kernels whose written operand
    is the output itself (`ElementwiseKernel.in_place`), with the values NumPy gives, for
    contiguous and transposed `p` and a broadcast `g`."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((37, 53)).astype(np.float32)
    g_np = rng.standard_normal(53 if layout == "contiguous" else 37).astype(np.float32)
    p = lg.tensor(base) if layout == "contiguous" else lg.tensor(base.T.copy()).t()
    ref = base.copy()
    g = lg.tensor(g_np)
    gb = g_np if layout == "contiguous" else g_np[:, None]
    if layout == "transposed":
        g = g.reshape(37, 1)
    p.add_(g)
    ref = ref + gb
    assert _in_place_plan("add", (p, g), p).kernel.spec.in_place == (0,)
    p.mul_(0.5)
    ref = ref * np.float32(0.5)
    p.add_(g, alpha=-2.0)
    ref = ref - 2 * gb
    np.testing.assert_allclose(p.numpy(), ref, rtol=1e-6, atol=1e-6)


def test_an_integer_in_place_write_and_a_view_of_the_output():
    """An int64 in-place op, and an operand that is another view of the written memory
    (not the output object itself: the general kernel with its overlap check)."""
    a = lg.arange(10)
    a.add_(3)
    np.testing.assert_array_equal(a.numpy(), np.arange(10) + 3)
    x = lg.arange(6, dtype=lg.float32)
    v = x[:]
    x.add_(v)
    np.testing.assert_array_equal(x.numpy(), 2 * np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("d", [np.float32, np.float64, np.float16])
def test_float_floor_division_is_pythons(d):
    """`a // b` on floats is Python's (and NumPy's and PyTorch's) floor division, not
    `floor(a / b)`: -2.5 // inf is -1, 1 // 0.1 is 9, a zero quotient keeps the sign of
    a / b, a zero divisor gives a / b. Eager, compiled and `div(rounding_mode='floor')`.
    Found by the slow fuzz run (llgrad gave -0.0 for -2.5 // inf)."""
    pairs = [(-2.5, math.inf), (2.5, -math.inf), (-0.0, math.inf), (1.0, 0.1), (-1.0, 0.1),
             (5.0, 0.0), (-5.0, 0.0), (0.0, 0.0), (math.nan, 2.0), (math.inf, 2.0),
             (7.0, -2.0), (-7.0, 2.0), (0.0, -3.0), (3.0, 1.5), (math.inf, math.inf),
             (-3.0, math.nan), (0.1257, -1.0)]
    a = np.array([p[0] for p in pairs], dtype=d)
    b = np.array([p[1] for p in pairs], dtype=d)
    with np.errstate(all="ignore"):
        want = np.floor_divide(a, b)
    compiled = lg.compile(lambda x, y: x // y)
    for got in (lg.tensor(a) // lg.tensor(b),
                lg.div(lg.tensor(a), lg.tensor(b), rounding_mode="floor"),
                compiled(lg.tensor(a), lg.tensor(b))):
        g = got.numpy()
        np.testing.assert_array_equal(g, want)
        finite = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(g[finite]), np.signbit(want[finite]))


@pytest.mark.parametrize("d", [np.float32, np.float64])
def test_float_trunc_division_at_infinities(d):
    """`div(..., rounding_mode='trunc')` is trunc(a / b) also at infinities (3 / -inf is
    -0.0, -inf / 2 is -inf), eager and compiled, with PyTorch's zero gradients. Found by
    the slow fuzz run after floor division became Python's."""
    pairs = [(3.0, -math.inf), (-math.inf, 2.0), (7.0, -2.0), (-7.0, 2.0), (5.0, 0.0),
             (0.0, 0.0), (math.nan, 1.0), (2.5, math.inf), (-0.0, 3.0), (1.0, 0.1)]
    a = np.array([p[0] for p in pairs], dtype=d)
    b = np.array([p[1] for p in pairs], dtype=d)
    with np.errstate(all="ignore"):
        want = np.trunc(a / b)
    compiled = lg.compile(lambda x, y: lg.div(x, y, rounding_mode="trunc"))
    for got in (lg.div(lg.tensor(a), lg.tensor(b), rounding_mode="trunc"),
                compiled(lg.tensor(a), lg.tensor(b))):
        g = got.numpy()
        np.testing.assert_array_equal(g, want)
        finite = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(g[finite]), np.signbit(want[finite]))
    x = lg.tensor(a, requires_grad=True)
    y = lg.tensor(b, requires_grad=True)
    z = lg.div(x, y, rounding_mode="trunc")
    assert z.grad_fn.name() == "DivBackward2"
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)
    np.testing.assert_array_equal(y.grad.numpy(), 0)
