"""complex64 / complex128 end to end: kernels against NumPy, promotion and gradients
against PyTorch (the oracle), views, reductions, matmul and printing."""
from __future__ import annotations

import itertools
import warnings
from typing import Any, Callable

import numpy as np
import pytest

import llgrad as lg
from llgrad.eager import views
from llgrad.ir import dtypes as dt

torch = pytest.importorskip("torch")

CDTYPES = ("complex64", "complex128")
RTOL = {"complex64": 2e-6, "complex128": 1e-14, "float32": 2e-6, "float64": 1e-14}
INF, NAN = np.inf, np.nan


def cplx(shape: tuple[int, ...], dtype: str, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return (z * scale).astype(dtype)


def close(got: Any, want: Any, dtype: str, factor: float = 1.0) -> None:
    """|got - want| <= rtol |want| elementwise (complex error against the modulus), with
    NaN where NumPy has NaN and infinities equal."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    g = got.astype(np.complex128).reshape(-1)
    w = want.astype(np.complex128).reshape(-1)
    for part in (np.real, np.imag):
        np.testing.assert_array_equal(np.isnan(part(g)), np.isnan(part(w)))
        inf = np.isinf(part(w))
        np.testing.assert_array_equal(part(g)[inf], part(w)[inf])
    fin = np.isfinite(w)
    err = np.abs(g[fin] - w[fin])
    tol = RTOL[dtype] * factor * np.maximum(np.abs(w[fin]), 1e-30)
    bad = err > tol
    assert not bad.any(), f"max error {np.max(err / np.maximum(np.abs(w[fin]), 1e-300))}" \
                          f" at {g[fin][bad][:3]} vs {w[fin][bad][:3]}"


def lay(t: lg.Tensor, layout: str) -> lg.Tensor:
    """The same values as `t` in another memory layout (a view)."""
    if layout == "contiguous":
        return t
    if layout == "transposed":
        perm = tuple(reversed(range(t.ndim)))
        return views.permute(t.permute(perm).contiguous(), perm)
    raise ValueError(layout)


# --------------------------------------------------------------------------------------
# elementwise kernels against NumPy
# --------------------------------------------------------------------------------------

def _np_sigmoid(z: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return (1 / (1 + np.exp(-z.astype(np.complex128)))).astype(z.dtype)


UNARY: dict[str, tuple[Callable, Callable, float]] = {
    # name: (llgrad fn, NumPy fn computed in complex128, tolerance factor)
    "exp": (lg.exp, np.exp, 2), "exp2": (lg.exp2, np.exp2, 4), "log": (lg.log, np.log, 2),
    "log2": (lg.log2, np.log2, 2), "log10": (lg.log10, np.log10, 2),
    "sqrt": (lg.sqrt, np.sqrt, 2), "rsqrt": (lg.rsqrt, lambda z: 1 / np.sqrt(z), 4),
    "sin": (lg.sin, np.sin, 4), "cos": (lg.cos, np.cos, 4), "tan": (lg.tan, np.tan, 8),
    "tanh": (lg.tanh, np.tanh, 8), "sigmoid": (lg.sigmoid, _np_sigmoid, 8),
    "reciprocal": (lg.reciprocal, lambda z: 1 / z, 2), "square": (lg.square, np.square, 2),
    "neg": (lg.neg, np.negative, 1), "conj": (lg.conj, np.conj, 1),
    "expm1": (lg.expm1, np.expm1, 8), "log1p": (lg.log1p, np.log1p, 8),
}


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_numpy(name: str, dtype: str) -> None:
    fn, ref, factor = UNARY[name]
    a = cplx((6, 7), dtype, seed=1, scale=1.5)
    want = ref(a.astype(np.complex128))
    for layout in ("contiguous", "transposed"):
        got = fn(lay(lg.tensor(a), layout))
        assert got.dtype is getattr(lg, dtype)
        close(got._values(), want, dtype, factor)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_parts_abs_and_angle(dtype: str) -> None:
    a = cplx((5, 3), dtype, seed=2)
    a[0, 0] = 0
    x = lg.tensor(a)
    real = {"complex64": lg.float32, "complex128": lg.float64}[dtype]
    for got, want in [(x.abs(), np.abs(a)), (abs(x), np.abs(a)), (x.angle(), np.angle(a)),
                      (lg.real(x), a.real), (lg.imag(x), a.imag), (x.real, a.real),
                      (x.imag, a.imag)]:
        assert got.dtype is real
        close(got._values(), want, dtype)


def test_abs_is_accurate_and_does_not_overflow() -> None:
    a = np.array([3e38 + 3e38j, 2e38 + 1e38j, 1e-40 + 1e-40j, 3 + 4j, -0.0 + 0j], np.complex64)
    with np.errstate(over="ignore"):
        want = np.abs(a.astype(np.complex128)).astype(np.float32)     # inf, then finite
    close(lg.tensor(a).abs()._values(), want, "complex64")
    b = np.array([1e308 + 1e308j, 1e-310 + 1e-310j, 5e-324 + 0j], np.complex128)
    close(lg.tensor(b).abs()._values(), np.abs(b), "complex128", 2)


def test_small_arguments_of_expm1_and_log1p_keep_their_digits() -> None:
    z = cplx((50,), "complex128", seed=3, scale=1e-7)
    # e^z - 1 and log(1 + z) by their Taylor series (NumPy rounds 1 + z first)
    close(lg.expm1(lg.tensor(z))._values(), z + z**2 / 2 + z**3 / 6 + z**4 / 24,
          "complex128", 4)
    close(lg.log1p(lg.tensor(z))._values(), z - z**2 / 2 + z**3 / 3 - z**4 / 4,
          "complex128", 4)


def test_log_near_the_unit_circle() -> None:
    t = np.linspace(0.1, 3.0, 40)
    z = np.exp(1j * t) * (1 + 1e-9)
    close(lg.log(lg.tensor(z))._values(), np.log(z), "complex128", 2)
    z32 = z.astype(np.complex64)
    want = np.log(z32.astype(np.complex128))
    close(lg.log(lg.tensor(z32))._values(), want, "complex64", 2)


def test_large_arguments_do_not_overflow_early() -> None:
    z = np.array([710 + 1e-300j, 1e-310 + 800j, 1e-300 + 750j, 800 + 1.5707963267948966j])
    with np.errstate(all="ignore"):
        close(lg.exp(lg.tensor(z))._values(), np.exp(z), "complex128", 4)
        close(lg.sin(lg.tensor(z[1:3]))._values(), np.sin(z[1:3]), "complex128", 4)
        close(lg.cos(lg.tensor(z[1:3]))._values(), np.cos(z[1:3]), "complex128", 4)
    w = np.array([1e300 + 1e300j, 1e-320 + 0j, -1e300 + 1e-300j, 3e-320 - 3e-320j])
    close(lg.sqrt(lg.tensor(w))._values(), np.sqrt(w), "complex128", 4)


BINARY: dict[str, tuple[Callable, Callable, float]] = {
    "add": (lg.add, np.add, 1), "sub": (lg.sub, np.subtract, 1),
    "mul": (lg.mul, np.multiply, 2), "div": (lg.div, np.divide, 4),
    "pow": (lg.pow, np.power, 64),
}


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_against_numpy(name: str, dtype: str) -> None:
    fn, ref, factor = BINARY[name]
    a = cplx((4, 5), dtype, seed=4)
    b = cplx((4, 5), dtype, seed=5)
    row = cplx((5,), dtype, seed=6)
    wide = np.complex128
    for layout in ("contiguous", "transposed"):
        got = fn(lay(lg.tensor(a), layout), lay(lg.tensor(b), layout))
        close(got._values(), ref(a.astype(wide), b.astype(wide)), dtype, factor)
    close(fn(lg.tensor(a), lg.tensor(row))._values(), ref(a.astype(wide), row.astype(wide)),
          dtype, factor)                                                  # broadcast
    close(fn(lg.tensor(a), 0.5 - 2j)._values(), ref(a.astype(wide), 0.5 - 2j), dtype, factor)
    close(fn(1.5j, lg.tensor(a))._values(), ref(1.5j, a.astype(wide)), dtype, factor)


def test_comparisons() -> None:
    a = np.array([1 + 2j, 3 + 0j, NAN + 0j, 0j, -0.0 + 0j])
    b = np.array([1 + 2j, 3 + 1j, NAN + 0j, -0.0 + 0j, 0j])
    x, y = lg.tensor(a), lg.tensor(b)
    np.testing.assert_array_equal((x == y)._values(), a == b)
    np.testing.assert_array_equal((x != y)._values(), a != b)
    np.testing.assert_array_equal((x == 3)._values(), a == 3)
    np.testing.assert_array_equal(lg.isnan(x)._values(), np.isnan(a))
    for fn in (lg.lt, lg.le, lg.gt, lg.ge, lg.maximum, lg.minimum):
        with pytest.raises(TypeError, match="complex128"):
            fn(x, y)
    with pytest.raises(TypeError, match="complex128"):
        lg.sign(x)
    with pytest.raises(TypeError, match="complex128"):
        lg.clamp(x, 0, 1)


def test_where_and_select_of_complex() -> None:
    a, b = cplx((3, 4), "complex64", 7), cplx((3, 4), "complex64", 8)
    c = a.real > 0
    got = lg.where(lg.tensor(c), lg.tensor(a), lg.tensor(b))
    np.testing.assert_array_equal(got._values(), np.where(c, a, b))
    got = lg.where(lg.tensor(c), lg.tensor(a), 2.0)
    np.testing.assert_array_equal(got._values(), np.where(c, a, np.complex64(2)))


# --------------------------------------------------------------------------------------
# special values (inf and NaN components) against NumPy
# --------------------------------------------------------------------------------------

_SPECIAL = [0.0, -0.0, 1.0, -2.0, 1e-310, 800.0, INF, -INF, NAN]


def _special_grid(dtype: str) -> np.ndarray:
    return np.array([complex(a, b) for a in _SPECIAL for b in _SPECIAL], dtype=dtype)


def _same_values(got: np.ndarray, want: np.ndarray) -> None:
    """Equal parts, NaN where NumPy has NaN (the sign of a zero is not compared)."""
    got, want = np.asarray(got), np.asarray(want)
    parts = (np.real, np.imag) if np.iscomplexobj(want) else (np.real,)
    for part in parts:
        g, w = part(got), part(want)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        both = ~np.isnan(w)         # atol: log1p(1e-310) is 1e-310, NumPy's log(1 + z) 0
        np.testing.assert_allclose(g[both], w[both], rtol=1e-5, atol=1e-300)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tanh", "tan", "abs",
                                  "sigmoid", "log1p", "neg", "conj", "isnan", "angle"])
def test_special_values_of_functions(name: str, dtype: str) -> None:
    z = _special_grid(dtype)
    with np.errstate(all="ignore"):
        want = ({"sigmoid": _np_sigmoid, "neg": np.negative, "isnan": np.isnan}.get(name)
                or getattr(np, name))(z)
    got = getattr(lg, name)(lg.tensor(z))._values()
    _same_values(got, want)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "eq", "ne"])
def test_special_values_of_arithmetic(name: str, dtype: str) -> None:
    z = _special_grid(dtype)
    a, b = (np.array(p, dtype=dtype) for p in zip(*itertools.product(z[::3], z[1::2])))
    with np.errstate(all="ignore"):
        want = {"sub": np.subtract, "mul": np.multiply, "div": np.divide,
                "eq": np.equal, "ne": np.not_equal}.get(name, np.add)(a, b)
    got = getattr(lg, name)(lg.tensor(a), lg.tensor(b))._values()
    _same_values(got, want)


def test_division_by_zero_and_reciprocal_follow_numpy_division() -> None:
    a = np.array([1 + 1j, 1 + 0j, 0j, NAN + 0j, -2 - 0j])
    with np.errstate(all="ignore"):
        _same_values((lg.tensor(a) / 0)._values(), a / np.complex128(0))
        _same_values(lg.reciprocal(lg.tensor(a))._values(), np.divide(1, a))


# --------------------------------------------------------------------------------------
# casts
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
def test_casts(dtype: str) -> None:
    z = np.array([1.5 - 2j, -3.7 + 0.5j, 0j, NAN + 1j, 0 + 1j, 300.9 + 1j], dtype=dtype)
    x = lg.tensor(z)
    with np.errstate(all="ignore"):
        for target, want in [(lg.float32, z.real.astype(np.float32)),
                             (lg.float64, z.real.astype(np.float64)),
                             (lg.float16, z.real.astype(np.float16)),
                             (lg.int32, np.trunc(z.real[[0, 1, 2, 4, 5]]).astype(np.int32)),
                             (lg.uint8, np.trunc(z.real[[0, 2, 4, 5]]).astype(np.uint8)),
                             (lg.bool, z != 0), (lg.complex64, z.astype(np.complex64)),
                             (lg.complex128, z.astype(np.complex128))]:
            src = x
            if target in (lg.int32, lg.uint8):    # NaN to int is unspecified
                keep = [0, 1, 2, 4, 5] if target is lg.int32 else [0, 2, 4, 5]
                src = lg.tensor(z[keep])
            got = src.to(target)
            assert got.dtype is target
            np.testing.assert_array_equal(got._values(), want)
    r = np.array([1.5, -0.0, INF, NAN], np.float32)
    for target in (lg.complex64, lg.complex128):
        got = lg.tensor(r).to(target)._values()
        np.testing.assert_array_equal(got.real, r)
        np.testing.assert_array_equal(got.imag, 0)
    got = lg.tensor([True, False]).to(lg.complex64)._values()
    np.testing.assert_array_equal(got, np.array([1, 0], np.complex64))
    assert lg.tensor(z).cdouble().dtype is lg.complex128
    assert lg.tensor([1.0]).cfloat().dtype is lg.complex64


# --------------------------------------------------------------------------------------
# promotion and Python scalars against PyTorch
# --------------------------------------------------------------------------------------

PROMO = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
         "float32", "float64", "complex64", "complex128"]


def test_promote_types_matches_torch() -> None:
    for a, b in itertools.product(PROMO, PROMO):
        got = dt.promote_types(dt.from_name(a), dt.from_name(b)).name
        want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[1]
        assert got == want, (a, b, got, want)


def _torch_result(a: Any, b: Any) -> str:
    return str(torch.result_type(a, b)).split(".")[1]


def test_result_type_with_complex_matches_torch() -> None:
    """Tensors, 0-d tensors and Python scalars; float16/bfloat16 with a complex scalar give
    complex32 in PyTorch, which llgrad does not have (complex64 instead)."""
    names = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64",
             "complex64", "complex128"]
    from llgrad.eager.elementwise import promote
    for a, b in itertools.product(names, names):
        for a_shape, b_shape in [((2,), (2,)), ((2,), ()), ((), (2,)), ((), ())]:
            ta = torch.zeros(a_shape, dtype=getattr(torch, a))
            tb = torch.zeros(b_shape, dtype=getattr(torch, b))
            want = _torch_result(ta, tb).replace("complex32", "complex64")
            got = promote([lg.zeros(a_shape, dtype=dt.from_name(a)),
                           lg.zeros(b_shape, dtype=dt.from_name(b))]).name
            assert got == want, (a, a_shape, b, b_shape)
    for a in names:
        for s in (1j, 2.5 + 0j, 2.0, 3, True):
            want = _torch_result(torch.zeros(2, dtype=getattr(torch, a)), s)
            if want == "complex32":
                want = "complex64"
            got = promote([lg.zeros(2, dtype=dt.from_name(a)), s]).name
            assert got == want, (a, s)


def test_python_complex_scalars_in_ops() -> None:
    for d in ("int64", "float32", "float64", "complex64", "complex128"):
        x = lg.tensor([1, 2, 3], dtype=dt.from_name(d))
        t = torch.tensor([1, 2, 3], dtype=getattr(torch, d))
        for got, want in [(x * (1 + 2j), t * (1 + 2j)), (x + 1j, t + 1j),
                          ((2 - 1j) / x, (2 - 1j) / t), (x - 0.5j, t - 0.5j),
                          (x == 1 + 0j, t == 1 + 0j)]:
            assert got.dtype.name == str(want.dtype).split(".")[1]
            close(got._values(), want.numpy(), "complex128" if got.dtype.is_complex else
                  "float64", 1e7 if got.dtype in (lg.complex64,) else 1)
    full = lg.full((2,), 1 - 1j)
    assert full.dtype is lg.complex64
    np.testing.assert_array_equal(full._values(), np.array([1 - 1j] * 2, np.complex64))
    with pytest.raises(RuntimeError, match="cannot be converted to type float32"):
        lg.zeros(2).fill_(1j)


def test_tensor_creation() -> None:
    for data in [1j, [1, 2j], [[1.5, 2 + 1j]], np.complex128(1j), np.complex64(2),
                 np.array([1j, 2], np.complex64), np.array([[1j]])]:
        x, t = lg.tensor(data), torch.tensor(data)
        assert x.dtype.name == str(t.dtype).split(".")[1], data
        np.testing.assert_array_equal(x._values(), t.numpy())
    x = lg.tensor([1, 2], dtype=lg.complex128, requires_grad=True)
    assert x.dtype is lg.complex128 and x.requires_grad and x.is_complex()
    assert lg.tensor(1 + 2j).item() == 1 + 2j
    assert lg.zeros(2, dtype=lg.cfloat).dtype is lg.complex64 and lg.cdouble is lg.complex128
    z = lg.tensor(np.array([1 + 1j]))
    assert lg.from_numpy(np.array([3 - 4j])).abs().item() == 5.0
    np.testing.assert_array_equal(z.numpy(), np.array([1 + 1j]))
    assert z.tolist() == [1 + 1j]
    # complex data into a real dtype keeps the real part (bool: either part non-zero)
    np.testing.assert_array_equal(lg.tensor([1 + 2j, 0.5j], dtype=lg.float32)._values(),
                                  np.array([1, 0], np.float32))
    np.testing.assert_array_equal(lg.tensor(np.array([2.7 - 1j]), dtype=lg.int32)._values(),
                                  np.array([2], np.int32))
    np.testing.assert_array_equal(lg.tensor([0.5j, 0j], dtype=lg.bool)._values(),
                                  np.array([True, False]))


def test_registry_entries_and_ir() -> None:
    """Shape rules (real results for abs/angle/real/imag), NumPy references through the
    interpreter, and the text form of a graph with the complex ops."""
    from llgrad.ir import registry
    from llgrad.ir.graph import Builder
    from llgrad.ir.interpret import interpret
    from llgrad.ir.parser import parse
    from llgrad.ir.printer import print_graph
    from llgrad.ir.types import TensorType
    c64, f32 = TensorType(dt.complex64, (2, 3)), TensorType(dt.float32, (2, 3))
    for name, bw in [("abs", "AbsBackward0"), ("angle", "AngleBackward0"),
                     ("real", "SelectBackward0"), ("imag", "SelectBackward0")]:
        assert registry.get(name).infer((c64,)) == f32
        assert registry.get(name).backward_name == bw
    assert registry.get("conj").infer((c64,)) == c64
    assert registry.get("complex").infer((f32, TensorType(dt.float32, (3,)))) == c64
    assert registry.get("view_as_real").infer((c64,)) == TensorType(dt.float32, (2, 3, 2))
    with pytest.raises(TypeError, match="complex32"):
        registry.get("polar").infer((TensorType(dt.float16, (2,)),) * 2)
    with pytest.raises(TypeError, match="real"):
        registry.get("real").infer((f32,))
    b = Builder("cx")
    x = b.param(c64, "x")
    r = b.param(f32, "r")
    z = b.op("mul", b.op("exp", x), b.op("complex", r, b.op("angle", x)))
    out = b.op("add", b.op("abs", z), b.op("real", b.op("conj", z)))
    g = b.build(out, b.op("view_as_real", b.op("sqrt", x)))
    assert parse(print_graph(g)) == g
    a = cplx((2, 3), "complex64", 40)
    rr = np.random.default_rng(41).standard_normal((2, 3)).astype(np.float32)
    got = interpret(g, [a, rr])
    xe, re = lg.tensor(a), lg.tensor(rr)
    ze = lg.exp(xe) * lg.complex(re, xe.angle())
    close(got[0], (ze.abs() + ze.conj().real)._values(), "complex64", 8)
    close(got[1], lg.view_as_real(lg.sqrt(xe))._values(), "complex64", 4)


# --------------------------------------------------------------------------------------
# views: .real, .imag, view_as_real, view_as_complex
# --------------------------------------------------------------------------------------

def test_real_and_imag_are_views() -> None:
    a = cplx((3, 4), "complex64", 9)
    x = lg.tensor(a)
    re, im = x.real, x.imag
    assert re._storage is x._storage and im._storage is x._storage
    assert re.stride() == (8, 2) and im.storage_offset() == 1
    re.mul_(2)
    im[0] = 7.0
    want = a.copy()
    want.real *= 2
    want.imag[0] = 7
    np.testing.assert_array_equal(x._values(), want)
    x.real = lg.zeros(3, 4)
    x.imag = 1.5
    np.testing.assert_array_equal(x._values(), np.full((3, 4), 1.5j, np.complex64))
    xt = x.T.real                       # of a transposed view
    np.testing.assert_array_equal(xt._values(), np.zeros((4, 3), np.float32))
    r = lg.tensor([1.0, 2.0])
    assert lg.real(r) is r and r.real is r and r.conj() is r and lg.conj(r) is r
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with "
                                           "non-complex dtypes"):
        r.imag
    assert lg.conj(2 + 1j) == 2 - 1j and lg.conj(3.0) == 3.0
    assert not x.is_conj() and x.resolve_conj() is x


def test_view_as_real_and_view_as_complex() -> None:
    a = cplx((2, 3), "complex128", 10)
    x = lg.tensor(a)
    r = lg.view_as_real(x)
    assert r.shape == (2, 3, 2) and r.stride() == (6, 2, 1) and r.dtype is lg.float64
    np.testing.assert_array_equal(r._values(), np.stack([a.real, a.imag], -1))
    r[0, 0, 1] = 5.0
    assert x[0, 0].item() == complex(a[0, 0].real, 5.0)
    c = lg.view_as_complex(r)
    assert c._storage is x._storage
    np.testing.assert_array_equal(c._values(), x._values())
    t = lg.view_as_real(x.T)                       # strides of a transposed view
    np.testing.assert_array_equal(t._values(), np.stack([x._values().T.real,
                                                         x._values().T.imag], -1))
    f = lg.zeros(4, 2)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        lg.view_as_complex(lg.zeros(4, 3))
    with pytest.raises(RuntimeError, match="last dimension with stride 1"):
        lg.view_as_complex(f.T.contiguous().T)
    with pytest.raises(RuntimeError, match="storage_offset divisible by 2"):
        lg.view_as_complex(lg.zeros(5)[1:3])
    with pytest.raises(RuntimeError, match="stride divisible by 2"):
        lg.view_as_complex(lg.zeros(3, 3)[:, :2])
    with pytest.raises(RuntimeError, match="float32 and float64"):
        lg.view_as_complex(lg.zeros(2, 2, dtype=lg.float16))
    with pytest.raises(RuntimeError, match="only supported for complex"):
        lg.view_as_real(f)


def test_complex_and_polar() -> None:
    re, im = np.array([1.0, -2.0, INF]), np.array([[0.5], [INF]])
    got = lg.complex(lg.tensor(re), lg.tensor(im))
    want = torch.complex(torch.tensor(re), torch.tensor(im))
    assert got.dtype is lg.complex128
    np.testing.assert_array_equal(got._values(), want.numpy())
    r, th = np.array([1.0, 2.0, 0.5], np.float32), np.array([0.3, -2.0, 4.0], np.float32)
    got = lg.polar(lg.tensor(r), lg.tensor(th))
    close(got._values(), torch.polar(torch.tensor(r), torch.tensor(th)).numpy(), "complex64", 4)
    with pytest.raises(TypeError, match="float32 or float64"):
        lg.complex(lg.tensor([1.0]), lg.tensor([1.0], dtype=lg.float64))
    with pytest.raises(TypeError, match="float32 or float64"):
        lg.complex(lg.tensor([1]), lg.tensor([1]))
    with pytest.raises(TypeError, match="expected two Tensors"):
        lg.polar(lg.tensor([1.0]), 2.0)


def test_angle_of_real_tensors_is_pytorchs() -> None:
    a = np.array([1.0, -2.0, 0.0, -0.0, NAN, -INF], np.float32)
    got = lg.tensor(a).angle()
    np.testing.assert_array_equal(got._values(), torch.tensor(a).angle().numpy())
    assert lg.tensor([1, -1]).angle().dtype is lg.float32


def test_isinf_isfinite_and_allclose() -> None:
    a = np.array([1 + 1j, complex(1, INF), complex(NAN, 0), complex(-INF, NAN)])
    np.testing.assert_array_equal(lg.isinf(lg.tensor(a))._values(),
                                  torch.isinf(torch.tensor(a)).numpy())
    np.testing.assert_array_equal(lg.isfinite(lg.tensor(a))._values(),
                                  torch.isfinite(torch.tensor(a)).numpy())
    x = lg.tensor(cplx((5,), "complex128", 11))
    assert lg.allclose(x, x + 1e-12j) and not lg.allclose(x, x + 1e-3j)


# --------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("shape,dim", [((5, 7), None), ((5, 7), 0), ((5, 7), 1),
                                       ((3, 4, 5), (0, 2)), ((40, 3), 1), ((3, 4), -1),
                                       ((), None)])
def test_sum_prod_mean(dtype: str, shape: tuple[int, ...], dim: Any) -> None:
    a = cplx(shape, dtype, 12)
    wide = a.astype(np.complex128)
    for layout in ("contiguous", "transposed"):
        x = lay(lg.tensor(a), layout)
        for name, factor in (("sum", 4), ("mean", 4), ("prod", 64)):
            got = getattr(lg, name)(x, dim) if name != "prod" or not isinstance(dim, tuple) \
                else None
            if got is None:
                continue
            want = getattr(np, name)(wide, axis=dim)
            assert got.dtype is getattr(lg, dtype)
            close(got._values(), want, dtype, factor)
    close(lg.tensor(a).sum(dim, keepdim=True)._values() if shape else lg.tensor(a).sum()._values(),
          np.sum(wide, axis=dim, keepdims=bool(shape)), dtype, 4)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_large_reductions(dtype: str) -> None:
    """Two-stage (partials on every core) and column kernels."""
    a = cplx((600_000,), dtype, 13)
    close(lg.tensor(a).sum()._values(), np.sum(a.astype(np.complex128)), dtype, 8)
    b = cplx((300, 1000), dtype, 14)
    close(lg.tensor(b).sum(0)._values(), np.sum(b.astype(np.complex128), 0), dtype, 8)
    close(lg.tensor(b).mean(1)._values(), np.mean(b.astype(np.complex128), 1), dtype, 8)
    c = (cplx((200_000,), dtype, 15) * 0.001 + 1).astype(dtype)
    close(lg.tensor(c).prod()._values(), np.prod(c.astype(np.complex128)), dtype, 1e4)


def test_empty_reductions_and_errors() -> None:
    x = lg.zeros(0, 3, dtype=lg.complex64)
    np.testing.assert_array_equal(x.sum(0)._values(), np.zeros(3, np.complex64))
    np.testing.assert_array_equal(x.prod(0)._values(), np.ones(3, np.complex64))
    y = lg.tensor([1 + 1j, 2j])
    for fn in (lg.amax, lg.amin, lg.argmax, lg.argmin):
        with pytest.raises(TypeError, match="complex64"):
            fn(y)
    with pytest.raises(TypeError, match="complex64"):
        y.max()
    with pytest.raises(TypeError, match="complex64"):
        lg.softmax(y, 0)


def test_var_std_norm_are_real() -> None:
    a = cplx((4, 5), "complex128", 16)
    x, t = lg.tensor(a), torch.tensor(a)
    for got, want in [(x.var(), t.var()), (x.var(0), t.var(0)), (x.std(1), t.std(1)),
                      (x.norm(), t.norm()), (x.norm(p=1), t.norm(p=1)),
                      (x.norm(p=3.0), torch.linalg.vector_norm(t, 3.0)),
                      (x.norm(p=float("inf")), t.norm(p=float("inf")))]:
        assert got.dtype is lg.float64
        close(got._values(), want.numpy(), "float64", 8)


# --------------------------------------------------------------------------------------
# matmul (c/zgemm)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4,)),
                                   ((3, 4), (4,)), ((4,), (4, 2)), ((5, 3, 4), (5, 4, 2)),
                                   ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_against_numpy(dtype: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = cplx(sa, dtype, 17), cplx(sb, dtype, 18)
    want = np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    got = lg.tensor(a) @ lg.tensor(b)
    assert got.dtype is getattr(lg, dtype)
    close(got._values(), want, dtype, 64)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_matmul_layouts_and_promotion(dtype: str) -> None:
    a, b = cplx((5, 4), dtype, 19), cplx((6, 5), dtype, 20)
    want = a.T.astype(np.complex128) @ b.T.astype(np.complex128)
    close((lg.tensor(a).T @ lg.tensor(b).T)._values(), want, dtype, 64)     # BLAS 'T'
    close((lg.tensor(a).T @ lay(lg.tensor(b.T), "transposed"))._values(), want, dtype, 64)
    s = lg.tensor(np.arange(24.0).reshape(4, 6), dtype=lg.tensor(a).dtype)[:, ::2]  # copied
    close((lg.tensor(a) @ s)._values(), a.astype(np.complex128) @ s._values(), dtype, 64)
    r = np.ones((4, 3))
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        lg.tensor(a) @ lg.tensor(r)                                       # as PyTorch
    got = lg.tensor(a).to(lg.complex128) @ lg.tensor(r).to(lg.complex128)
    close(got._values(), a.astype(np.complex128) @ r, "complex128", 1e8)
    big = cplx((64, 96), dtype, 21)
    close(lg.mm(lg.tensor(big), lg.tensor(big.T.copy()))._values(),
          big.astype(np.complex128) @ big.T.astype(np.complex128), dtype, 512)
    assert (lg.zeros(2, 0, dtype=lg.complex64) @ lg.zeros(0, 3, dtype=lg.complex64)
            ).abs().sum().item() == 0


# --------------------------------------------------------------------------------------
# gradients against torch.autograd.grad (PyTorch's conjugate Wirtinger convention)
# --------------------------------------------------------------------------------------

def _grads(fl: Callable, ft: Callable, arrays: list[np.ndarray], seed: int = 0) -> None:
    xs = [lg.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_l, out_t = fl(*xs), ft(*ts)
    assert out_l.dtype.name == str(out_t.dtype).split(".")[1]
    assert type(out_l.grad_fn).__name__ == type(out_t.grad_fn).__name__
    rng = np.random.default_rng(seed)
    go = rng.standard_normal(tuple(out_t.shape))
    if out_t.is_complex():
        go = go + 1j * rng.standard_normal(tuple(out_t.shape))
    go = go.astype(str(out_t.dtype).split(".")[1])
    gl = lg.autograd.grad(out_l, xs, lg.tensor(go))
    gt = torch.autograd.grad(out_t, ts, torch.tensor(go))
    for a, b, arr in zip(gl, gt, arrays):
        assert a.dtype.name == str(b.dtype).split(".")[1]
        name = "complex128" if arr.dtype.kind == "c" else "float64"
        close(a._values(), b.resolve_conj().numpy(), name, 1e3)


GRAD_UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin",
              "cos", "tan", "tanh", "sigmoid", "reciprocal", "square", "neg", "abs", "angle",
              "conj"]


@pytest.mark.parametrize("name", GRAD_UNARY)
def test_unary_gradients(name: str) -> None:
    a = cplx((3, 4), "complex128", 22)
    _grads(getattr(lg, name), getattr(torch, name), [a])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow"])
def test_binary_gradients(name: str) -> None:
    a, b = cplx((3, 4), "complex128", 23), cplx((3, 4), "complex128", 24)
    r = np.random.default_rng(25).standard_normal((3, 4)) + 2.0
    fl, ft = getattr(lg, name), getattr(torch, name)
    _grads(fl, ft, [a, b])
    _grads(fl, ft, [a, r])                  # a real operand gets the real part
    _grads(fl, ft, [r, a])
    _grads(fl, ft, [a, cplx((4,), "complex128", 26)])      # broadcast
    _grads(lambda x: fl(x, 0.5 - 1.5j), lambda x: ft(x, 0.5 - 1.5j), [a])
    op = {"add": "__radd__", "sub": "__rsub__", "mul": "__rmul__", "div": "__rtruediv__",
          "pow": "__rpow__"}[name]                       # `2 + 1j - x`: RsubBackward1
    _grads(lambda x: getattr(x, op)(2 + 1j), lambda x: getattr(x, op)(2 + 1j), [a])
    _grads(lambda x: fl(x, 2.0), lambda x: ft(x, 2.0), [a])


@pytest.mark.parametrize("case", ["real", "imag", "complex", "polar", "view_as_real",
                                  "view_as_complex", "to_real", "to_complex", "sum", "mean",
                                  "prod", "matmul", "matmul_real", "H", "abs_loss", "where",
                                  "var", "norm", "getitem", "cat"])
def test_other_gradients(case: str) -> None:
    a = cplx((3, 4), "complex128", 27)
    b = cplx((4, 2), "complex128", 28)
    r = np.random.default_rng(29).standard_normal((3, 4))
    r2 = np.random.default_rng(30).standard_normal((3, 2))
    cases: dict[str, tuple[Callable, Callable, list[np.ndarray]]] = {
        "real": (lambda x: x.real, lambda x: x.real, [a]),
        "imag": (lambda x: x.imag, lambda x: x.imag, [a]),
        "complex": (lg.complex, torch.complex, [r, r + 1]),
        "polar": (lg.polar, torch.polar, [np.abs(r), r]),
        "view_as_real": (lg.view_as_real, torch.view_as_real, [a]),
        "view_as_complex": (lg.view_as_complex, torch.view_as_complex, [r2]),
        "to_real": (lambda x: x.to(lg.float64), lambda x: x.to(torch.float64), [a]),
        "to_complex": (lambda x: x.to(lg.complex128), lambda x: x.to(torch.complex128), [r]),
        "sum": (lambda x: x.sum(0), lambda x: x.sum(0), [a]),
        "mean": (lambda x: x.mean(), lambda x: x.mean(), [a]),
        "prod": (lambda x: x.prod(1), lambda x: x.prod(1), [a]),
        "matmul": (lg.matmul, torch.matmul, [a, b]),
        "matmul_real": (lambda x, y: x @ y.to(x.dtype), lambda x, y: x @ y.to(x.dtype),
                        [a, b.real.copy()]),
        "H": (lambda x: x.H, lambda x: x.H, [a]),
        "abs_loss": (lambda x: (x * x.conj()).real.sum(), lambda x: (x * x.conj()).real.sum(),
                     [a]),
        "where": (lambda x, y: lg.where(x.real > 0, x, y),
                  lambda x, y: torch.where(x.real > 0, x, y), [a, a[::-1].copy()]),
        "var": (lambda x: x.var(0), lambda x: x.var(0), [a]),
        "norm": (lambda x: x.norm(), lambda x: x.norm(), [a]),
        "getitem": (lambda x: x[1:, ::2], lambda x: x[1:, ::2], [a]),
        "cat": (lambda x: lg.cat([x, x * 2]), lambda x: torch.cat([x, x * 2]), [a]),
    }
    fl, ft, arrays = cases[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # torch: "casting complex to real discards"
        _grads(fl, ft, arrays)


def test_complex64_gradients() -> None:
    a, b = cplx((3, 4), "complex64", 31), cplx((3, 4), "complex64", 32)
    xs = [lg.tensor(v, requires_grad=True) for v in (a, b)]
    ts = [torch.tensor(v, requires_grad=True) for v in (a, b)]
    lg.abs(lg.exp(xs[0]) * xs[1] / (xs[0] + 2)).sum().backward()
    torch.abs(torch.exp(ts[0]) * ts[1] / (ts[0] + 2)).sum().backward()
    for x, t in zip(xs, ts):
        assert x.grad.dtype is lg.complex64
        close(x.grad._values(), t.grad.numpy(), "complex64", 20)


def test_zero_points_of_abs_and_angle() -> None:
    a = np.array([0j, 1 + 1j])
    _grads(lg.abs, torch.abs, [a])
    _grads(lg.angle, torch.angle, [a])


def test_backward_of_complex_outputs_needs_a_gradient() -> None:
    x = lg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="implicitly created only for real scalar outputs "
                                           "but got llgrad.complex64"):
        (x * x).sum().backward()
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        (x * x).backward()
    (x * x).sum().backward(lg.tensor(1 + 0j))
    np.testing.assert_allclose(x.grad._values(), 2 * np.conj(x._values()))
    y = lg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    y.abs().sum().backward()                         # a real loss needs nothing
    np.testing.assert_allclose(y.grad._values(), y._values() / np.abs(y._values()),
                               rtol=1e-6)


def test_real_gradients_are_unchanged_by_conj() -> None:
    """`conj` is the identity on real tensors: real rules record no extra node."""
    x = lg.tensor([1.0, -2.0], requires_grad=True)
    y = lg.tensor([0.5, 3.0], requires_grad=True)
    out = x * y
    assert lg.conj(out) is out
    (gx, gy) = lg.autograd.grad((x * y).sum(), [x, y], create_graph=True)
    assert type(gx.grad_fn).__name__ == "MulBackward0"
    np.testing.assert_array_equal(gx._values(), y._values())


def test_inplace_through_a_part_view_under_autograd_is_refused() -> None:
    x = lg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    z = x * 1
    with pytest.raises(RuntimeError, match="view of a complex64 tensor"):
        z.real.mul_(2)
    w = lg.tensor([1.0, 2.0], requires_grad=True)
    v = lg.tensor([1 + 2j, 3 - 1j])
    with pytest.raises(RuntimeError, match="view of a complex64 tensor"):
        v.imag.add_(w)
    v.imag.add_(w.detach())                          # no autograd: a plain write
    np.testing.assert_array_equal(v._values(), np.array([1 + 3j, 3 + 1j], np.complex64))


# --------------------------------------------------------------------------------------
# printing (PyTorch's format with torch. -> llgrad.)
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", CDTYPES)
def test_printing_of_results(dtype: str) -> None:
    samples = [np.array([1 + 2j, 3 - 4j]), cplx((3, 4), dtype, 33),
               np.array([complex(NAN, 1), complex(1, INF), complex(0, -0.0), 1e10 + 1j]),
               np.array(1 - 2.5j), np.array([1e-6 + 1e6j, 2 + 0j])]
    for a in samples:
        x = lg.tensor(a, dtype=getattr(lg, dtype))
        t = torch.tensor(a, dtype=getattr(torch, dtype))
        assert repr(x) == repr(t).replace("torch.", "llgrad.")
        assert repr(x * (1 - 1j)) == repr(t * (1 - 1j)).replace("torch.", "llgrad.")
    x = lg.tensor([1 + 1j, 2j], requires_grad=True)
    t = torch.tensor([1 + 1j, 2j], requires_grad=True)
    for fl, ft in [(lambda v: v * 2, lambda v: v * 2), (lambda v: v.abs(), lambda v: v.abs()),
                   (lambda v: v.conj(), lambda v: v.conj()), (lg.exp, torch.exp),
                   (lambda v: v.real, lambda v: v.real), (lambda v: v.angle(),
                                                          lambda v: v.angle()),
                   (lambda v: v.sum(), lambda v: v.sum()),
                   (lg.view_as_real, torch.view_as_real)]:
        assert repr(fl(x)) == repr(ft(t)).replace("torch.", "llgrad.")


def test_inplace_ops_on_complex_tensors() -> None:
    x = lg.tensor([1 + 1j, -2j])
    x.mul_(1 - 1j).add_(0.5j)
    np.testing.assert_array_equal(x._values(), np.array([2 + 0.5j, -2 - 1.5j], np.complex64))
    x.exp_()
    close(x._values(), np.exp(np.array([2 + 0.5j, -2 - 1.5j])), "complex64", 4)
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex"):
        x.abs_()
    with pytest.raises(RuntimeError, match="complex64 can't be cast to the desired output "
                                           "type float32"):
        lg.zeros(2).add_(1j)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_kernels_vectorize_and_call_nothing(dtype: str) -> None:
    import re
    from llgrad.runtime.launch import record_kernels
    x = lg.tensor(cplx((4096,), dtype, 42))
    packed = r"\bv\w+p[sd]\s+%(zmm|ymm)"
    for fn in (lambda: x * x, lambda: x / (x + 1), lambda: lg.exp(x), lambda: x.abs(),
               lambda: x.sum()):
        with record_kernels() as kernels:
            fn()
        asm = kernels[-1].asm()
        assert re.search(packed, asm), kernels[-1].name
        assert "call" not in asm


def test_advanced_indexing_backward_and_setitem_on_complex():
    x = lg.randn(5, dtype=lg.complex64, requires_grad=True)
    g = lg.tensor(np.array([1 + 2j, 3 - 1j, 0.5j], dtype=np.complex64))
    x[lg.tensor([0, 2, 2])].backward(g)
    want = np.zeros(5, np.complex64)
    np.add.at(want, [0, 2, 2], g.numpy())
    np.testing.assert_allclose(x.grad.numpy(), want)
    z = lg.zeros(4, dtype=lg.complex128)
    z[lg.tensor([1, 3])] = lg.tensor([1 + 1j, 2j])
    np.testing.assert_array_equal(z.numpy(), [0, 1 + 1j, 0, 2j])


# --------------------------------------------------------------------------------------
# functions torch defines on complex inputs that llgrad composes (OpInfo gaps): values and
# gradients against torch (grad_fn names differ: these are compositions)
# --------------------------------------------------------------------------------------

def _values_and_grads(fl: Callable, ft: Callable, arrays: list[np.ndarray]) -> None:
    xs = [lg.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_l, out_t = fl(*xs), ft(*ts)
    assert out_l.dtype.name == str(out_t.dtype).split(".")[1]
    close(out_l.detach()._values(), out_t.detach().numpy(), "complex128", 10)
    rng = np.random.default_rng(5)
    go = rng.standard_normal(tuple(out_t.shape)) + 1j * rng.standard_normal(tuple(out_t.shape))
    gl = lg.autograd.grad(out_l, xs, lg.tensor(go))
    gt = torch.autograd.grad(out_t, ts, torch.tensor(go))
    for a, b in zip(gl, gt):
        close(a._values(), b.resolve_conj().numpy(), "complex128", 1e3)


_ZA = cplx((3, 4), "complex128", 41)
_ZB = cplx((3, 4), "complex128", 42)
COMPOSED_COMPLEX = {
    "sinh": (lg.sinh, torch.sinh, [_ZA * 3]),
    "cosh": (lg.cosh, torch.cosh, [_ZA * 3]),
    "sinh small": (lg.sinh, torch.sinh, [_ZA * 1e-9]),
    "sinc": (lg.sinc, torch.sinc, [_ZA]),
    "logaddexp": (lg.logaddexp, torch.logaddexp, [_ZA * 4, _ZB * 4]),
    # (non-negative integer exponents: torch's gradient for a negative one is 0, its
    # derivative taking 2 ** e in integers)
    "ldexp": (lambda x: lg.ldexp(x, lg.tensor([1, 2, 3, 0])),
              lambda x: torch.ldexp(x, torch.tensor([1, 2, 3, 0])), [_ZA]),
    "logsumexp": (lambda x: lg.logsumexp(x * 30, 1), lambda x: torch.logsumexp(x * 30, 1),
                  [_ZA]),
    "logsumexp keepdim": (lambda x: lg.logsumexp(x, (0, 1), True),
                          lambda x: torch.logsumexp(x, (0, 1), True), [_ZA]),
    "logcumsumexp": (lambda x: lg.logcumsumexp(x * 5, 1),
                     lambda x: torch.logcumsumexp(x * 5, 1), [_ZA]),
    "renorm": (lambda x: lg.renorm(x, 2, 0, 1.5), lambda x: torch.renorm(x, 2, 0, 1.5), [_ZA]),
}


@pytest.mark.parametrize("case", sorted(COMPOSED_COMPLEX))
def test_composed_complex_functions_match_torch(case: str) -> None:
    fl, ft, arrays = COMPOSED_COMPLEX[case]
    _values_and_grads(fl, ft, arrays)


def test_nonzero_argwhere_and_softmax_with_real_dtype_of_complex() -> None:
    z = np.array([[0, 1j, 2], [0, 0, 1 + 1j]], dtype=np.complex64)
    for fl, ft in ((lg.nonzero, torch.nonzero), (lg.argwhere, torch.argwhere)):
        np.testing.assert_array_equal(fl(lg.tensor(z)).numpy(), ft(torch.tensor(z)).numpy())
    a = cplx((3, 4), "complex64", 43)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # torch: "casting complex to real discards"
        for fl, ft in ((lg.softmax, torch.softmax), (lg.log_softmax, torch.log_softmax)):
            got = fl(lg.tensor(a), 1, dtype=lg.float64)
            want = ft(torch.tensor(a), 1, dtype=torch.float64)
            assert got.dtype is lg.float64
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(TypeError, match="softmax"):
        lg.softmax(lg.tensor(a), 1)


_CUT_VALUES = [0.0, -0.0, 0.3, -0.3, 1.0, -1.0, 1.5, -1.5, 3.0, -3.0, 1e-8, -1e-8, 20.0, -20.0,
               1e5]
_CUT_GRID = np.array([complex(a, b) for a in _CUT_VALUES for b in _CUT_VALUES])


@pytest.mark.parametrize("name", ["asin", "acos", "atan", "asinh", "acosh", "atanh"])
@pytest.mark.parametrize("dtype", CDTYPES)
def test_inverse_trig_principal_branches_match_torch(name: str, dtype: str) -> None:
    """On and beside the branch cuts (signed zeros pick the side), tiny and huge values."""
    z = _CUT_GRID.astype(dtype)
    got = getattr(lg, name)(lg.tensor(z))
    want = getattr(torch, name)(torch.tensor(z))
    assert got.dtype.name == dtype
    close(got._values(), want.numpy(), dtype, 1e3 if dtype == "complex128" else 4)


@pytest.mark.parametrize("name", ["asin", "acos", "atan", "asinh", "acosh", "atanh"])
def test_inverse_trig_complex_gradients(name: str) -> None:
    _values_and_grads(getattr(lg, name), getattr(torch, name), [_ZA * 2])
