"""Elementwise math and `lg.special` against PyTorch: values (float32, float64, integer
inputs), broadcasting, non-contiguous, 0-d and empty inputs, gradients (against torch's
autograd and by gradcheck in float64), double backward, forward mode, `lg.compile`
against eager, in-place forms, errors; and the float64 accuracy of the new mathlib
special functions against mpmath (the bounds docs/mathlib.md lists)."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad as lg  # noqa: E402
from llgrad.functions import pointwise  # noqa: E402

TORCH_DTYPE = {lg.float32: torch.float32, lg.float64: torch.float64}
NP_DTYPE = {lg.float32: np.float32, lg.float64: np.float64}


def _sample(lo: float, hi: float, shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _close(got: lg.Tensor, want: torch.Tensor, dtype: lg.dtype | None = None,
           rtol: float | None = None, atol: float | None = None) -> None:
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], \
        (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    f64 = want.dtype == torch.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(force=True),
                               rtol=rtol or (1e-9 if f64 else 2e-5),
                               atol=atol or (1e-12 if f64 else 1e-6), equal_nan=True)


def _t(f):
    """torch.special.name or torch.name."""
    return f


# name, llgrad function, torch function, input range, torch has a derivative
UNARY = [
    ("asin", lg.asin, torch.asin, (-0.95, 0.95), True),
    ("acos", lg.acos, torch.acos, (-0.95, 0.95), True),
    ("atan", lg.atan, torch.atan, (-5, 5), True),
    ("arcsin", lg.arcsin, torch.arcsin, (-0.95, 0.95), True),
    ("arctanh", lg.arctanh, torch.arctanh, (-0.9, 0.9), True),
    ("sinh", lg.sinh, torch.sinh, (-5, 5), True),
    ("cosh", lg.cosh, torch.cosh, (-5, 5), True),
    ("asinh", lg.asinh, torch.asinh, (-5, 5), True),
    ("acosh", lg.acosh, torch.acosh, (1.1, 6), True),
    ("atanh", lg.atanh, torch.atanh, (-0.9, 0.9), True),
    ("erfinv", lg.erfinv, torch.erfinv, (-0.99, 0.99), True),
    ("lgamma", lg.lgamma, torch.lgamma, (-4.9, 9), True),
    ("digamma", lg.digamma, torch.digamma, (0.1, 9), True),
    ("i0", lg.i0, torch.i0, (-12, 12), True),
    ("special.i0e", lg.special.i0e, torch.special.i0e, (-12, 12), True),
    ("special.i1", lg.special.i1, torch.special.i1, (-12, 12), True),
    ("special.i1e", lg.special.i1e, torch.special.i1e, (-12, 12), True),
    ("special.ndtri", lg.special.ndtri, torch.special.ndtri, (0.01, 0.99), True),
    ("special.log_ndtr", lg.special.log_ndtr, torch.special.log_ndtr, (-8, 5), True),
    ("special.erfcx", lg.special.erfcx, torch.special.erfcx, (-3, 8), True),
    ("special.ndtr", lg.special.ndtr, torch.special.ndtr, (-5, 5), True),
    ("special.entr", lg.special.entr, torch.special.entr, (0.05, 3), True),
    ("special.expit", lg.special.expit, torch.special.expit, (-5, 5), True),
    ("special.psi", lg.special.psi, torch.special.psi, (0.2, 6), True),
    ("special.gammaln", lg.special.gammaln, torch.special.gammaln, (0.2, 6), True),
    ("polygamma1", lambda x: lg.polygamma(1, x), lambda x: torch.polygamma(1, x), (0.3, 6), True),
    ("polygamma3", lambda x: lg.polygamma(3, x), lambda x: torch.polygamma(3, x), (0.3, 6), True),
    ("mvlgamma", lambda x: lg.mvlgamma(x, 3), lambda x: torch.mvlgamma(x, 3), (1.2, 6), True),
    ("sinc", lg.sinc, torch.sinc, (-3, 3), True),
    ("logit", lg.logit, torch.logit, (0.05, 0.95), True),
    ("logit_eps", lambda x: lg.logit(x, eps=0.2), lambda x: torch.logit(x, eps=0.2),
     (0.05, 0.95), True),
    ("deg2rad", lg.deg2rad, torch.deg2rad, (-360, 360), True),
    ("rad2deg", lg.rad2deg, torch.rad2deg, (-4, 4), True),
    ("frac", lg.frac, torch.frac, (-5, 5), True),
    ("fix", lg.fix, torch.fix, (-5, 5), True),
    ("sgn", lg.sgn, torch.sgn, (-5, 5), True),
    ("nan_to_num", lg.nan_to_num, torch.nan_to_num, (-5, 5), True),
    ("selu", lg.selu, torch.selu, (-3, 3), True),
    ("celu", lambda x: lg.celu(x, 1.5), lambda x: torch.celu(x, 1.5), (-3, 3), True),
    ("hardshrink", lambda x: lg.hardshrink(x, 0.7),
     lambda x: torch.nn.functional.hardshrink(x, 0.7), (-3, 3), True),
    ("threshold", lambda x: lg.threshold(x, 0.3, -2.0), lambda x: torch.threshold(x, 0.3, -2.0),
     (-3, 3), True),
    ("rrelu_eval", lg.rrelu, torch.rrelu, (-3, 3), True),
    ("clamp_min", lambda x: lg.clamp_min(x, 0.3), lambda x: torch.clamp_min(x, 0.3), (-3, 3),
     True),
    ("clamp_max", lambda x: lg.clamp_max(x, 0.3), lambda x: torch.clamp_max(x, 0.3), (-3, 3),
     True),
    ("positive", lg.positive, torch.positive, (-3, 3), True),
    ("frexp_mantissa", lambda x: lg.frexp(x)[0], lambda x: torch.frexp(x)[0], (-50, 50), True),
    ("special.round", lambda x: lg.special.round(x, decimals=1),
     lambda x: torch.special.round(x, decimals=1), (-3, 3), True),
    ("special.sinc", lg.special.sinc, torch.special.sinc, (-3, 3), True),
]
# functions whose integer inputs PyTorch promotes to the default float
INT_PROMOTES = {"asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfinv",
                "lgamma", "digamma", "i0", "special.i0e", "special.i1", "special.i1e",
                "special.ndtri", "special.log_ndtr", "special.erfcx", "sinc", "logit",
                "deg2rad", "rad2deg", "polygamma1", "special.ndtr", "special.entr"}
# torch's node names for the functions composed in llgrad may differ (README: composed ops
# name their last node); these match
SAME_NAME = {"asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfinv",
             "lgamma", "digamma", "i0", "special.i0e", "special.i1", "special.i1e",
             "special.ndtri", "special.log_ndtr", "special.erfcx", "polygamma1", "polygamma3",
             "sinc", "logit", "deg2rad", "rad2deg", "frac", "nan_to_num", "mvlgamma",
             "special.entr", "hardshrink", "threshold", "clamp_min", "clamp_max", "celu"}


def _ids(table):
    return [row[0] for row in table]


# float32 value sweeps of the costliest kernels run with the slow tests (their float32
# results are also checked against float64 by test_float32_is_double_rounded_once)
SLOW_F32 = {"polygamma1", "polygamma3", "erfinv", "special.ndtri", "special.log_ndtr",
            "special.entr", "lgamma", "special.erfcx", "mvlgamma"}


@pytest.mark.parametrize("row,dtype", [
    (r, d) if not (d is lg.float32 and r[0] in SLOW_F32) else
    pytest.param(r, d, marks=pytest.mark.slow)
    for d in (lg.float32, lg.float64) for r in UNARY],
    ids=[f"{'f32' if d is lg.float32 else 'f64'}-{r[0]}" for d in (lg.float32, lg.float64)
         for r in UNARY])
def test_unary_values(row, dtype) -> None:
    name, f, tf, (lo, hi), _ = row
    x = _sample(lo, hi, (4, 5), hash(name) % 1000).astype(NP_DTYPE[dtype])
    _close(f(lg.tensor(x)), tf(torch.tensor(x)))
    # non-contiguous, 0-d, empty
    _close(f(lg.tensor(x).t()), tf(torch.tensor(x).t()))
    _close(f(lg.tensor(x)[1, 2]), tf(torch.tensor(x)[1, 2]))
    _close(f(lg.tensor(x[:0])), tf(torch.tensor(x[:0])))


@pytest.mark.parametrize("row", [r for r in UNARY if r[0] in INT_PROMOTES],
                         ids=[r[0] for r in UNARY if r[0] in INT_PROMOTES])
def test_integer_inputs_promote(row) -> None:
    name, f, tf, (lo, hi), _ = row
    vals = np.arange(math.ceil(lo), math.floor(hi) + 1)
    if name in ("logit", "special.ndtri", "erfinv", "asin", "acos", "atanh"):
        vals = np.array([0, 1])
    if name in ("lgamma", "digamma", "polygamma1"):
        vals = vals[vals > 0]
    x = vals.astype(np.int64)
    got = f(lg.tensor(x))
    assert got.dtype == lg.float32
    _close(got, tf(torch.tensor(x)))


@pytest.mark.parametrize("row", [r for r in UNARY if r[4]], ids=[r[0] for r in UNARY if r[4]])
def test_unary_gradients(row) -> None:
    name, f, tf, (lo, hi), _ = row
    x = _sample(lo, hi, (3, 4), hash(name) % 997 + 1)
    if name in ("frac", "fix", "hardshrink", "threshold", "clamp_min", "clamp_max",
                "logit_eps", "special.round"):
        x = x[np.abs(x - np.round(x)) > 0.05].reshape(-1)[:6]     # away from the kinks
    lx = lg.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    y, ty = f(lx), tf(tx)
    w = np.random.default_rng(1).normal(size=ty.shape)
    (g,) = lg.autograd.grad((y * lg.tensor(w)).sum(), lx)
    (tg,) = torch.autograd.grad((ty * torch.tensor(w)).sum(), tx)
    _close(g, tg, rtol=1e-8, atol=1e-10)
    if name in SAME_NAME:
        assert y.grad_fn.name() == ty.grad_fn.name()
    if name not in ("special.round", "fix", "frac"):
        assert lg.autograd.gradcheck(f, (lg.tensor(x[:4].reshape(-1), requires_grad=True),))


SECOND_ORDER = ["asin", "acosh", "sinh", "erfinv", "lgamma", "digamma", "i0", "special.i1",
                "special.i1e", "special.i0e", "special.ndtri", "special.log_ndtr",
                "special.erfcx", "polygamma1", "logit", "sinc"]


FAST_SECOND_ORDER = {"asin", "lgamma", "special.ndtri", "special.i1"}


@pytest.mark.parametrize("name", [n if n in FAST_SECOND_ORDER else
                                  pytest.param(n, marks=pytest.mark.slow)
                                  for n in SECOND_ORDER])
def test_double_backward_and_forward_mode(name) -> None:
    row = next(r for r in UNARY if r[0] == name)
    _, f, tf, (lo, hi), _ = row
    x = _sample(lo, hi, (5,), 7)
    lx = lg.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    (g,) = lg.autograd.grad(f(lx).sum(), lx, create_graph=True)
    (gg,) = lg.autograd.grad(g.sum(), lx)
    (tg,) = torch.autograd.grad(tf(tx).sum(), tx, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    _close(gg, tgg, rtol=1e-7, atol=1e-9)
    # forward mode: jvp equals the gradient times the tangent (diagonal Jacobian)
    t = np.linspace(0.5, 1.5, 5)
    _, jv = lg.func.jvp(f, (lg.tensor(x),), (lg.tensor(t),))
    np.testing.assert_allclose(jv.numpy(), tg.detach().numpy() * t, rtol=1e-8, atol=1e-10)


# name, llgrad, torch, ranges of the two operands, differentiable (in the operands torch has)
BINARY = [
    ("hypot", lg.hypot, torch.hypot, (-3, 3), (-3, 3), (True, True)),
    ("copysign", lg.copysign, torch.copysign, (-3, 3), (-3, 3), (True, True)),
    ("nextafter", lg.nextafter, torch.nextafter, (-3, 3), (-3, 3), (False, False)),
    ("fmax", lg.fmax, torch.fmax, (-3, 3), (-3, 3), (True, True)),
    ("fmin", lg.fmin, torch.fmin, (-3, 3), (-3, 3), (True, True)),
    ("ldexp", lg.ldexp, torch.ldexp, (-3, 3), (-4, 4), (True, False)),
    ("logaddexp", lg.logaddexp, torch.logaddexp, (-3, 3), (-3, 3), (True, True)),
    ("logaddexp2", lg.logaddexp2, torch.logaddexp2, (-3, 3), (-3, 3), (True, True)),
    ("float_power", lg.float_power, torch.float_power, (0.5, 3), (-2, 2), (True, True)),
    ("arctan2", lg.arctan2, torch.arctan2, (-3, 3), (-3, 3), (True, True)),
    ("zeta", lg.special.zeta, torch.special.zeta, (1.5, 6), (0.3, 5), (False, True)),
    ("igamma", lg.igamma, torch.igamma, (0.5, 4), (0.1, 5), (False, True)),
    ("igammac", lg.igammac, torch.igammac, (0.5, 4), (0.1, 5), (False, True)),
    ("gammainc", lg.special.gammainc, torch.special.gammainc, (0.5, 4), (0.1, 5),
     (False, True)),
    ("xlog1py", lg.special.xlog1py, torch.special.xlog1py, (-3, 3), (-0.5, 3), (True, True)),
    ("xlogy", lg.special.xlogy, torch.special.xlogy, (-3, 3), (0.1, 3), (True, True)),
    ("heaviside", lg.heaviside, torch.heaviside, (-3, 3), (-3, 3), (False, False)),
]


@pytest.mark.parametrize("row", BINARY, ids=_ids(BINARY))
@pytest.mark.parametrize("dtype", [lg.float32, lg.float64], ids=["f32", "f64"])
def test_binary_values_broadcast(row, dtype) -> None:
    name, f, tf, ra, rb, _ = row
    a = _sample(*ra, (3, 1), 3).astype(NP_DTYPE[dtype])
    b = _sample(*rb, (4,), 4).astype(NP_DTYPE[dtype])
    if name in ("fmax", "fmin", "hypot"):
        a[0, 0], b[1] = np.nan, np.nan
    if name == "heaviside":
        a[1, 0] = 0
    if name == "ldexp":
        b = np.round(b)
    _close(f(lg.tensor(a), lg.tensor(b)), tf(torch.tensor(a), torch.tensor(b)), rtol=1e-6
           if dtype is lg.float32 else 1e-9)
    # non-contiguous and empty
    at = _sample(*ra, (4, 3), 5).astype(NP_DTYPE[dtype])
    bt = _sample(*rb, (3, 4), 6).astype(NP_DTYPE[dtype])
    if name == "ldexp":
        bt = np.round(bt)
    _close(f(lg.tensor(at).t(), lg.tensor(bt)), tf(torch.tensor(at).t(), torch.tensor(bt)),
           rtol=1e-6 if dtype is lg.float32 else 1e-9)
    _close(f(lg.tensor(at[:0]), lg.tensor(bt[0, :3])),
           tf(torch.tensor(at[:0]), torch.tensor(bt[0, :3])))


@pytest.mark.parametrize("row", [r for r in BINARY if any(r[5])],
                         ids=[r[0] for r in BINARY if any(r[5])])
def test_binary_gradients(row) -> None:
    name, f, tf, ra, rb, diff = row
    a = _sample(*ra, (3, 1), 8)
    b = _sample(*rb, (4,), 9)
    la, lb = lg.tensor(a, requires_grad=diff[0]), lg.tensor(b, requires_grad=diff[1])
    ta, tb = torch.tensor(a, requires_grad=diff[0]), torch.tensor(b, requires_grad=diff[1])
    wanted = [t for t, d in zip((la, lb), diff) if d]
    twanted = [t for t, d in zip((ta, tb), diff) if d]
    got = lg.autograd.grad(f(la, lb).sum(), wanted)
    want = torch.autograd.grad(tf(ta, tb).sum(), twanted)
    for g, tg in zip(got, want):
        _close(g, tg, rtol=1e-7, atol=1e-10)
    if name not in ("igamma", "igammac", "gammainc"):      # host values: no gradcheck eps path
        assert lg.autograd.gradcheck(lambda *xs: f(*xs), (la, lb))


def test_derivatives_torch_does_not_have() -> None:
    s = lg.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="zeta"):
        lg.special.zeta(s, 1.5).sum().backward()
    a = lg.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="igamma"):
        lg.igamma(a, lg.tensor([1.0, 2.0])).sum().backward()
    x = lg.tensor([1.0, -2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="heaviside"):
        lg.heaviside(x, lg.tensor([0.5, 0.5])).sum().backward()
    for fn in ("bessel_j0", "bessel_y1", "modified_bessel_k0", "airy_ai", "spherical_bessel_j0"):
        assert not getattr(lg.special, fn)(lg.tensor([0.5, 2.0], requires_grad=True)).requires_grad


def _ulp_steps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Steps between representable values of a and b (0 where both are NaN)."""
    it = np.int64 if a.dtype == np.float64 else np.int32

    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, np.int64(np.iinfo(it).min) - i, i)

    d = np.abs(ordered(a) - ordered(b))
    return np.where(np.isnan(a) & np.isnan(b), 0, d)


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64])
def test_airy_ai_like_torch(dtype) -> None:
    """airy_ai follows torch's CPU algorithm in the element type: within 3 (float32) / 4
    (float64) ULP of torch's values on branch boundaries, special and random inputs
    (docs/mathlib.md), eager, on views and inside lg.compile; no derivative."""
    npd = NP_DTYPE[dtype]
    b = 2.09
    edges = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e-30, -1e-30, 1e-8, -1e-8, b, -b,
             np.nextafter(b, 0), np.nextafter(-b, 0), np.nextafter(b, 9), np.nextafter(-b, -9),
             8.3203353, 8.32034, 26.0, 26.5, 103.892, np.nextafter(103.892, 0),
             np.nextafter(103.892, 200), 103.9, 1e3, 1e300, -2.338107410459767, -1e3, -1e5,
             -1e8, -1e10, math.inf, -math.inf, math.nan]
    rng = np.random.default_rng(7)
    with np.errstate(over="ignore"):
        parts = [np.array(edges).astype(npd)] + [
            rng.uniform(lo, hi, 4000).astype(npd)
            for lo, hi in [(-2.2, 2.2), (-30, -2), (2, 110), (-1e4, -30), (-1e9, -1e4)]]
    x = np.concatenate(parts)
    got = lg.special.airy_ai(lg.tensor(x)).numpy()
    want = torch.special.airy_ai(torch.from_numpy(x)).numpy()
    assert got.dtype == want.dtype
    assert (np.isnan(got) == np.isnan(want)).all()
    assert _ulp_steps(got, want).max() <= (3 if dtype is lg.float32 else 4)
    exact = ~np.isfinite(want) | (want == 0)            # NaN at +-inf, 0 above 103.892
    np.testing.assert_array_equal(got[exact], want[exact])
    grid = lg.tensor(x[: 40 * 50].reshape(40, 50))
    for view in (grid.t(), grid[::3, 1::2], grid[5]):
        np.testing.assert_array_equal(lg.special.airy_ai(view).numpy(),
                                      lg.special.airy_ai(view.contiguous()).numpy())
    compiled = lg.compile(lambda v: lg.special.airy_ai(v) * 2.0)
    np.testing.assert_array_equal(compiled(grid).numpy(), (lg.special.airy_ai(grid) * 2.0).numpy())
    out = lg.empty(grid.shape, dtype=dtype)
    assert lg.special.airy_ai(grid, out=out) is out
    np.testing.assert_array_equal(out.numpy(), lg.special.airy_ai(grid).numpy())
    r = lg.special.airy_ai(grid.detach().requires_grad_())
    assert not r.requires_grad and r.grad_fn is None
    assert lg.special.airy_ai(lg.tensor([1, 2])).dtype == lg.get_default_dtype()


def test_special_values_like_torch() -> None:
    inf, nan = math.inf, math.nan
    cases = {
        "lgamma": [0.0, -0.0, -1.0, -2.5, inf, -inf, nan, 1e-300, 1.0, 2.0, 1e306],
        "digamma": [0.0, -0.0, -1.0, -2.5, inf, nan, 1e-300, 1e300],
        "erfinv": [1.0, -1.0, 0.0, -0.0, 2.0, nan, 1 - 2 ** -53, -1e-310],
        "i0": [0.0, nan, 700.0, 720.0],           # i0(+-inf): inf here, NaN in torch
        "special.i0e": [0.0, inf, -inf, nan, 1e300],
        "special.i1": [0.0, nan, -700.0],          # i1(+-inf), i1(-0): +-inf, -0 here
        "special.i1e": [0.0, nan, 5.0, -5.0, 1e300],
        "special.ndtri": [0.0, 1.0, 0.5, -0.1, 1.1, nan, 1e-300, 5e-324],
        "special.log_ndtr": [inf, -inf, nan, 0.0, -40.0, -1e10, 40.0],
        "special.erfcx": [inf, -inf, nan, 0.0, -27.0, 1e300, -1e-300],
        "asinh": [inf, -inf, -0.0], "acosh": [1.0, 0.5, inf], "atanh": [1.0, -1.0, 2.0],
    }
    for name, vals in cases.items():
        row = next(r for r in UNARY if r[0] == name)
        x = np.array(vals, np.float64)
        _close(row[1](lg.tensor(x)), row[2](torch.tensor(x)), rtol=1e-13, atol=0)
        got = row[1](lg.tensor(x)).numpy()
        want = row[2](torch.tensor(x)).numpy()
        zero = (want == 0) & ~np.isnan(want)
        assert (np.signbit(got[zero]) == np.signbit(want[zero])).all(), name
    z = lg.special.zeta(lg.tensor([1.0, 0.5, 2.0, 2.0, 2.5, 3.0]),
                        lg.tensor([1.0, 1.0, -2.0, -1.5, -1.5, -2.25]))
    tz = torch.special.zeta(torch.tensor([1.0, 0.5, 2.0, 2.0, 2.5, 3.0], dtype=torch.float64),
                            torch.tensor([1.0, 1.0, -2.0, -1.5, -1.5, -2.25],
                                         dtype=torch.float64))
    np.testing.assert_allclose(z.numpy(), tz.numpy().astype(np.float32), rtol=1e-5)
    assert lg.special.zeta(lg.tensor([2.0]), math.inf).item() == 0.0     # torch: NaN
    m, e = lg.frexp(lg.tensor([0.0, -0.0, inf, 1e-40, 8.0, -3.0]))
    tm, te = torch.frexp(torch.tensor([0.0, -0.0, inf, 1e-40, 8.0, -3.0]))
    np.testing.assert_array_equal(m.numpy(), tm.numpy())
    np.testing.assert_array_equal(e.numpy(), te.numpy())
    assert e.dtype == lg.int32
    n = lg.nextafter(lg.tensor([0.0, -0.0, 1.0, 1.0]), lg.tensor([-0.0, 1.0, math.inf, 1.0]))
    tn = torch.nextafter(torch.tensor([0.0, -0.0, 1.0, 1.0]), torch.tensor([-0.0, 1.0, math.inf, 1.0]))
    np.testing.assert_array_equal(n.numpy(), tn.numpy())
    assert np.signbit(n.numpy()[0])
    sb = lg.signbit(lg.tensor([-0.0, 0.0, -math.nan, 1.0, -2.0]))
    assert sb.tolist() == torch.signbit(torch.tensor([-0.0, 0.0, -math.nan, 1.0, -2.0])).tolist()
    x = lg.tensor([1.0, -math.inf, math.inf, math.nan])
    assert lg.isposinf(x).tolist() == [False, False, True, False]
    assert lg.isneginf(x).tolist() == [False, True, False, False]
    assert lg.isreal(lg.tensor([1 + 0j, 1j])).tolist() == [True, False]
    assert lg.isreal(lg.tensor([1, 2])).tolist() == [True, True]
    nt = lg.nan_to_num(lg.tensor([math.nan, math.inf, -math.inf, 1.0]), nan=1.0, posinf=2.0)
    assert nt.tolist() == [1.0, 2.0, float(np.finfo(np.float32).min), 1.0]


@pytest.mark.parametrize("dtype", [lg.int64, lg.int32, lg.uint8])
def test_integer_functions(dtype) -> None:
    tdt = {lg.int64: torch.int64, lg.int32: torch.int32, lg.uint8: torch.uint8}[dtype]
    rng = np.random.default_rng(0)
    lo = 0 if dtype is lg.uint8 else -60
    a = rng.integers(lo, 60, (3, 4))
    b = rng.integers(lo, 60, (4,))
    a[0, 0], b[0] = 0, 0
    for f, tf in ((lg.gcd, torch.gcd), (lg.lcm, torch.lcm)):
        got = f(lg.tensor(a, dtype=dtype), lg.tensor(b, dtype=dtype))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), tf(torch.tensor(a, dtype=tdt),
                                                      torch.tensor(b, dtype=tdt)).numpy())
    bits = 8 * np.dtype(NP_DTYPE.get(dtype, np.int64) if dtype in NP_DTYPE else
                        {lg.int64: np.int64, lg.int32: np.int32, lg.uint8: np.uint8}[dtype]).itemsize
    s = np.array([0, 1, 3, bits - 1, bits, bits + 5] + ([] if dtype is lg.uint8 else [-1]))
    v = rng.integers(lo, 100, (s.size,))
    for f, tf in ((lg.bitwise_left_shift, torch.bitwise_left_shift),
                  (lg.bitwise_right_shift, torch.bitwise_right_shift)):
        got = f(lg.tensor(v, dtype=dtype), lg.tensor(s, dtype=dtype))
        want = tf(torch.tensor(v, dtype=tdt), torch.tensor(s, dtype=tdt))
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f.__name__)
    got = lg.heaviside(lg.tensor(a, dtype=dtype), lg.tensor(b, dtype=dtype))
    np.testing.assert_array_equal(got.numpy(), torch.heaviside(torch.tensor(a, dtype=tdt),
                                                               torch.tensor(b, dtype=tdt)).numpy())
    assert lg.fmax(lg.tensor(a, dtype=dtype), lg.tensor(b, dtype=dtype)).dtype == dtype


def test_polynomials_and_host_functions() -> None:
    x = np.array([[-0.9, -0.3, 0.0, 0.4, 0.8, 1.0]]).T
    n = np.array([-1, 0, 1, 2, 5, 9])
    for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                 "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
                 "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
                 "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                 "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"):
        got = getattr(lg.special, name)(lg.tensor(x), lg.tensor(n))
        want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n))
        _close(got, want, rtol=1e-10, atol=1e-10)
        got = getattr(lg.special, name)(lg.tensor(x, dtype=lg.float32), 3)
        want = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float32), 3)
        _close(got, want)
    xs = np.array([0.0, 0.3, 2.0, 9.0, 30.0, -1.0, -4.0])
    for name in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
                 "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
                 "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai",
                 "spherical_bessel_j0"):
        for d in (lg.float32, lg.float64):
            got = getattr(lg.special, name)(lg.tensor(xs, dtype=d))
            want = getattr(torch.special, name)(torch.tensor(xs, dtype=TORCH_DTYPE[d]))
            # (SciPy's J0, Y0 are closer to the true values than torch's: 1e-8 apart)
            _close(got, want, rtol=1e-5 if d is lg.float32 else 1e-7, atol=1e-30)


def test_special_namespace_covers_torch_special() -> None:
    names = [n for n in dir(torch.special) if not n.startswith("_") and
             callable(getattr(torch.special, n))]
    missing = [n for n in names if not hasattr(lg.special, n)]
    assert not missing, missing
    x = lg.tensor([[0.5, 1.0, 2.0]])
    _close(lg.special.softmax(x, 1), torch.special.softmax(torch.tensor([[0.5, 1.0, 2.0]]), 1))
    _close(lg.special.log_softmax(x, 1, dtype=lg.float64),
           torch.special.log_softmax(torch.tensor([[0.5, 1.0, 2.0]]), 1, dtype=torch.float64))
    _close(lg.special.logsumexp(x, 1), torch.special.logsumexp(torch.tensor([[0.5, 1.0, 2.0]]), 1))
    _close(lg.special.multigammaln(x + 1, 2),
           torch.special.multigammaln(torch.tensor([[0.5, 1.0, 2.0]]) + 1, 2))


# ---------------------------------------------------------------------------------------
# In-place forms
# ---------------------------------------------------------------------------------------

# method -> (arguments after self, input range)
INPLACE = {
    "absolute_": ((), (-3, 3)), "acos_": ((), (-0.9, 0.9)), "acosh_": ((), (1.1, 3)),
    "arccos_": ((), (-0.9, 0.9)), "arccosh_": ((), (1.1, 3)), "arcsin_": ((), (-0.9, 0.9)),
    "arcsinh_": ((), (-3, 3)), "arctan_": ((), (-3, 3)), "arctanh_": ((), (-0.9, 0.9)),
    "asin_": ((), (-0.9, 0.9)), "asinh_": ((), (-3, 3)), "atan_": ((), (-3, 3)),
    "atanh_": ((), (-0.9, 0.9)), "cosh_": ((), (-3, 3)), "sinh_": ((), (-3, 3)),
    "sign_": ((), (-3, 3)), "sgn_": ((), (-3, 3)), "sinc_": ((), (-3, 3)),
    "tan_": ((), (-1, 1)), "square_": ((), (-3, 3)), "rsqrt_": ((), (0.1, 3)),
    "exp2_": ((), (-3, 3)), "erf_": ((), (-3, 3)), "erfc_": ((), (-3, 3)),
    "erfinv_": ((), (-0.9, 0.9)), "lgamma_": ((), (0.1, 5)), "digamma_": ((), (0.1, 5)),
    "polygamma_": ((2,), (0.3, 5)), "mvlgamma_": ((2,), (1.0, 5)), "i0_": ((), (-3, 3)),
    "log10_": ((), (0.1, 3)), "log2_": ((), (0.1, 3)), "frac_": ((), (-3, 3)),
    "fix_": ((), (-3, 3)), "deg2rad_": ((), (-90, 90)), "rad2deg_": ((), (-3, 3)),
    "nan_to_num_": ((), (-3, 3)), "logit_": ((0.1,), (0.05, 0.95)),
    "clamp_min_": ((0.2,), (-3, 3)), "clamp_max_": ((0.2,), (-3, 3)),
    "negative_": ((), (-3, 3)), "cos_": ((), (-3, 3)),
    "hypot_": (("T",), (-3, 3)), "copysign_": (("T",), (-3, 3)),
    "nextafter_": (("T",), (-3, 3)), "atan2_": (("T",), (-3, 3)),
    "arctan2_": (("T",), (-3, 3)), "xlogy_": (("P",), (-3, 3)), "fmod_": (("P",), (-3, 3)),
    "remainder_": (("P",), (-3, 3)), "floor_divide_": (("P",), (-3, 3)),
    "true_divide_": (("P",), (-3, 3)), "divide_": (("P",), (-3, 3)),
    "multiply_": (("T",), (-3, 3)), "subtract_": (("T",), (-3, 3)),
    "lerp_": (("T", 0.3), (-3, 3)), "igamma_": (("P",), (0.5, 3)),
    "igammac_": (("P",), (0.5, 3)), "heaviside_": (("T",), (-3, 3)),
    "eq_": (("T",), (-3, 3)), "ne_": (("T",), (-3, 3)), "lt_": (("T",), (-3, 3)),
    "le_": (("T",), (-3, 3)), "gt_": (("T",), (-3, 3)), "ge_": (("T",), (-3, 3)),
    "greater_": (("T",), (-3, 3)), "greater_equal_": (("T",), (-3, 3)),
    "less_": (("T",), (-3, 3)), "less_equal_": (("T",), (-3, 3)),
    "not_equal_": (("T",), (-3, 3)), "float_power_": ((2.0,), (0.5, 3)),
    "ldexp_": (("I",), (-3, 3)),
}
INT_INPLACE = {
    "gcd_": ("T",), "lcm_": ("T",), "bitwise_and_": ("T",), "bitwise_or_": ("T",),
    "bitwise_xor_": ("T",), "bitwise_not_": (), "bitwise_left_shift_": ("S",),
    "bitwise_right_shift_": ("S",), "logical_not_": (), "logical_and_": ("T",),
    "logical_or_": ("T",), "logical_xor_": ("T",),
}


def _args(spec, shape, seed, lib, dtype):
    rng = np.random.default_rng(seed)
    out = []
    for a in spec:
        if a == "T":
            v = rng.uniform(-3, 3, shape)
        elif a == "P":
            v = rng.uniform(0.5, 3, shape)
        elif a == "I":
            v = rng.integers(-3, 4, shape).astype(np.float64)
        else:
            out.append(a)
            continue
        out.append(lib.tensor(v.astype(dtype)))
    return out


@pytest.mark.parametrize("method", sorted(INPLACE))
def test_inplace_methods(method) -> None:
    spec, (lo, hi) = INPLACE[method]
    np_dtype = np.float64
    x = _sample(lo, hi, (3, 4), 11)
    lx, tx = lg.tensor(x), torch.tensor(x)
    r = getattr(lx, method)(*_args(spec, (3, 4), 12, lg, np_dtype))
    getattr(tx, method)(*_args(spec, (3, 4), 12, torch, np_dtype))
    assert r is lx
    _close(lx, tx)
    # recorded: a non-leaf that requires grad, gradients against torch
    # (torch has no derivative for the in-place inverse hyperbolic functions)
    if method in ("nextafter_", "heaviside_", "igamma_", "igammac_", "fix_", "frac_", "acosh_",
                  "arccosh_", "asinh_", "arcsinh_", "atanh_", "arctanh_") or \
            method.rstrip("_") in ("eq", "ne", "lt", "le", "gt", "ge", "greater", "less",
                                   "greater_equal", "less_equal", "not_equal", "floor_divide",
                                   "sign", "sgn"):
        return
    la = lg.tensor(x, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    ly, ty = la * 1.0, ta * 1.0
    getattr(ly, method)(*_args(spec, (3, 4), 12, lg, np_dtype))
    getattr(ty, method)(*_args(spec, (3, 4), 12, torch, np_dtype))
    (g,) = lg.autograd.grad(ly.sum(), la)
    (tg,) = torch.autograd.grad(ty.sum(), ta)
    _close(g, tg, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("method", sorted(INT_INPLACE))
def test_integer_inplace_methods(method) -> None:
    logical = method.startswith("logical")
    rng = np.random.default_rng(2)
    x = rng.integers(0, 40, (2, 5))
    dt, tdt = (lg.bool, torch.bool) if logical else (lg.int64, torch.int64)
    args_l, args_t = [], []
    for a in INT_INPLACE[method]:
        v = rng.integers(0, 6 if a == "S" else 40, (2, 5))
        args_l.append(lg.tensor(v, dtype=dt))
        args_t.append(torch.tensor(v, dtype=tdt))
    lx, tx = lg.tensor(x, dtype=dt), torch.tensor(x, dtype=tdt)
    getattr(lx, method)(*args_l)
    getattr(tx, method)(*args_t)
    np.testing.assert_array_equal(lx.numpy(), tx.numpy())


TORCH_LEVEL_INPLACE = [
    ("abs_", ()), ("acos_", ()), ("acosh_", ()), ("arcsin_", ()), ("asinh_", ()),
    ("atan_", ()), ("atanh_", ()), ("ceil_", ()), ("clamp_", (0.2, 0.6)), ("clamp_max_", (0.4,)),
    ("clamp_min_", (0.4,)), ("cos_", ()), ("cosh_", ()), ("deg2rad_", ()), ("erf_", ()),
    ("erfc_", ()), ("exp_", ()), ("exp2_", ()), ("expm1_", ()), ("fix_", ()), ("floor_", ()),
    ("frac_", ()), ("i0_", ()), ("log_", ()), ("log10_", ()), ("log1p_", ()), ("log2_", ()),
    ("logit_", ()), ("nan_to_num_", ()), ("neg_", ()), ("negative_", ()), ("rad2deg_", ()),
    ("reciprocal_", ()), ("relu_", ()), ("round_", ()), ("rsqrt_", ()), ("sigmoid_", ()),
    ("sin_", ()), ("sinc_", ()), ("sinh_", ()), ("sqrt_", ()), ("square_", ()), ("tan_", ()),
    ("tanh_", ()), ("trunc_", ()), ("selu_", ()), ("celu_", ()), ("threshold_", (0.5, -1.0)),
    ("rrelu_", ()),
]


@pytest.mark.parametrize("name,args", TORCH_LEVEL_INPLACE, ids=[n for n, _ in TORCH_LEVEL_INPLACE])
def test_torch_level_inplace(name, args) -> None:
    x = _sample(0.1, 0.9, (2, 3), 21)
    if name in ("acosh_",):
        x = x + 1.0
    lx, tx = lg.tensor(x), torch.tensor(x)
    r = getattr(lg, name)(lx, *args)
    getattr(torch, name)(tx, *args)
    assert r is lx
    _close(lx, tx)


def test_inplace_errors_and_method_coverage() -> None:
    with pytest.raises(RuntimeError, match="can't be cast"):
        lg.tensor([1, 2]).asin_()
    with pytest.raises(RuntimeError, match="float_power_"):
        lg.tensor([1.0, 2.0]).float_power_(2)
    leaf = lg.tensor([0.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.asin_()
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        lg.tensor([1.0]).hypot_(lg.tensor([1.0, 2.0]))
    mine = set(pointwise.METHODS) | {"polygamma", "mvlgamma"}
    torch_methods = set(dir(torch.Tensor))
    for name in mine:
        assert name in torch_methods, name
        assert hasattr(lg.Tensor, name), name
    wanted = {"absolute_", "acos", "acos_", "acosh", "acosh_", "arccos", "arccos_", "arccosh",
              "arccosh_", "arcsin", "arcsin_", "arcsinh", "arcsinh_", "arctan", "arctan2",
              "arctan2_", "arctan_", "arctanh", "arctanh_", "asin", "asin_", "asinh", "asinh_",
              "atan", "atan2_", "atan_", "atanh", "atanh_", "bitwise_and_",
              "bitwise_left_shift", "bitwise_left_shift_", "bitwise_not_", "bitwise_or_",
              "bitwise_right_shift", "bitwise_right_shift_", "bitwise_xor_", "clamp_max",
              "clamp_max_", "clamp_min", "clamp_min_", "copysign", "copysign_", "cosh",
              "cosh_", "deg2rad", "deg2rad_", "digamma", "digamma_", "divide_", "eq_", "erf_",
              "erfc_", "erfinv", "erfinv_", "exp2_", "fix", "fix_", "float_power",
              "float_power_", "floor_divide_", "fmax", "fmin", "fmod_", "frac", "frac_",
              "frexp", "gcd", "gcd_", "ge_", "greater_", "greater_equal_", "gt_", "heaviside",
              "heaviside_", "hypot", "hypot_", "i0", "i0_", "igamma", "igamma_", "igammac",
              "igammac_", "isneginf", "isposinf", "isreal", "lcm", "lcm_", "ldexp", "ldexp_",
              "le_", "lerp_", "less_", "less_equal_", "lgamma", "lgamma_", "log10_", "log2_",
              "logaddexp", "logaddexp2", "logical_and_", "logical_not_", "logical_or_",
              "logical_xor_", "logit", "logit_", "lt_", "multiply_", "mvlgamma", "mvlgamma_",
              "nan_to_num", "nan_to_num_", "ne_", "negative_", "nextafter", "nextafter_",
              "not_equal_", "polygamma", "polygamma_", "positive", "rad2deg", "rad2deg_",
              "remainder_", "rsqrt_", "sgn", "sgn_", "sign_", "signbit", "sinc", "sinc_",
              "sinh", "sinh_", "square_", "subtract_", "tan_", "true_divide_", "xlogy_"}
    assert not [n for n in wanted if not hasattr(lg.Tensor, n)]
    torch_fns = {n for n in dir(torch) if n.endswith("_") and not n.startswith("_")}
    for name, _ in TORCH_LEVEL_INPLACE:
        assert name in torch_fns


def test_errors() -> None:
    with pytest.raises(RuntimeError, match="negative n"):
        lg.polygamma(-1, lg.tensor([1.0]))
    with pytest.raises(RuntimeError, match=r"\(p-1\)/2"):
        lg.mvlgamma(lg.tensor([0.5, 3.0]), 3)
    with pytest.raises(RuntimeError, match="p has to be"):
        lg.mvlgamma(lg.tensor([3.0]), 0)
    # complex inputs are accepted now, as torch (tests/test_complex.py checks the branches)
    np.testing.assert_allclose(lg.asin(lg.tensor([1j])).numpy(),
                               torch.asin(torch.tensor([1j])).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="different dtypes"):
        lg.heaviside(lg.tensor([1.0]), lg.tensor([1.0], dtype=lg.float64))
    with pytest.raises(TypeError, match="frac"):
        lg.frac(lg.tensor([1, 2]))
    with pytest.raises(TypeError, match="gcd"):
        lg.gcd(lg.tensor([1.0]), lg.tensor([2.0]))
    with pytest.raises(TypeError, match="bitwise_left_shift"):
        lg.bitwise_left_shift(lg.tensor([1.0]), 1)
    with pytest.raises(TypeError, match="nextafter"):
        lg.nextafter(lg.tensor([1]), lg.tensor([2]))
    with pytest.raises(TypeError, match="hypot"):
        lg.hypot(lg.tensor([1]), lg.tensor([2]))
    with pytest.raises(RuntimeError, match="bool"):
        lg.positive(lg.tensor([True]))


# ---------------------------------------------------------------------------------------
# lg.compile against eager for the new primitive ops
# ---------------------------------------------------------------------------------------

COMPILED = [("asin", (-0.9, 0.9)), ("acos", (-0.9, 0.9)), ("atan", (-3, 3)), ("sinh", (-3, 3)),
            ("cosh", (-3, 3)), ("asinh", (-3, 3)), ("acosh", (1.1, 4)), ("atanh", (-0.9, 0.9)),
            ("erfinv", (-0.9, 0.9)), ("lgamma", (0.2, 6)), ("digamma", (0.2, 6)),
            ("i0", (-5, 5)), ("special.i0e", (-5, 5)), ("special.i1", (-5, 5)),
            ("special.i1e", (-5, 5)), ("special.ndtri", (0.05, 0.95)),
            ("special.log_ndtr", (-5, 5)), ("special.erfcx", (-2, 5)),
            ("polygamma1", (0.3, 5)), ("copysign", (-3, 3)), ("frexp_mantissa", (-9, 9))]


FAST_COMPILED = {"asin", "acosh", "lgamma", "erfinv", "special.i1e", "copysign"}


@pytest.mark.parametrize("name,rng", [c if c[0] in FAST_COMPILED else
                                      pytest.param(*c, marks=pytest.mark.slow)
                                      for c in COMPILED], ids=[c[0] for c in COMPILED])
def test_compiled_matches_eager(name, rng) -> None:
    row = next((r for r in UNARY if r[0] == name), None)
    f = row[1] if row else (lambda x: lg.copysign(x, -x))

    def step(x):
        y = f(x)
        return (y * y).sum(), y

    x = lg.tensor(_sample(*rng, (64,), 31), requires_grad=True)
    compiled = lg.compile(step)
    loss_c, y_c = compiled(x)
    loss_e, y_e = step(x)
    np.testing.assert_allclose(y_c.detach().numpy(), y_e.detach().numpy(), rtol=1e-6, atol=1e-7)
    (gc,) = lg.autograd.grad(loss_c, x)
    (ge,) = lg.autograd.grad(loss_e, x)
    np.testing.assert_allclose(gc.numpy(), ge.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_compiled_zeta_and_graph_breaks() -> None:
    s = lg.tensor(_sample(1.5, 5, (16,), 1))
    q = lg.tensor(_sample(0.5, 4, (16,), 2), requires_grad=True)
    f = lg.compile(lambda s, q: lg.special.zeta(s, q).sum())
    np.testing.assert_allclose(f(s, q).item(), lg.special.zeta(s, q).sum().item(), rtol=1e-6)
    # host computations run eagerly inside a compiled function (a graph break)
    g = lg.compile(lambda a, x: lg.igamma(a, x) * 2 + lg.gcd(lg.tensor([4]), lg.tensor([6])))
    a, x = lg.tensor([1.0, 2.0]), lg.tensor([0.5, 3.0])
    np.testing.assert_allclose(g(a, x).numpy(), (lg.igamma(a, x) * 2 + 2).numpy(), rtol=1e-6)


# ---------------------------------------------------------------------------------------
# Float64 accuracy of the new mathlib functions against mpmath (docs/mathlib.md)
# ---------------------------------------------------------------------------------------

mp = pytest.importorskip("mpmath")

# function, llgrad, mpmath reference, inputs, asserted bound in ULP (f64)
ACCURACY = {
    "lgamma": (lg.lgamma, lambda v: mp.loggamma(v).real,
               [(0.0, 10.0), (0.9, 2.1)], 8),
    "lgamma_large": (lg.lgamma, lambda v: mp.loggamma(v).real, [("log", 2, 600)], 2),
    "digamma": (lg.digamma, mp.digamma, [(0.0, 12.0), (1.0, 2.0)], 16),
    "digamma_large": (lg.digamma, mp.digamma, [("log", 2, 600)], 3),
    "erfinv": (lg.erfinv, mp.erfinv, [(-1.0, 1.0), ("1-log", -36, 0)], 4),
    "ndtri": (lg.special.ndtri, lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1),
              [(0.0, 1.0), ("log", -30, 0)], 4),
    "erfcx": (lg.special.erfcx, lambda v: mp.exp(v * v) * mp.erfc(v),
              [(-26.0, 30.0), ("log", -20, 300)], 3),
    "log_ndtr": (lg.special.log_ndtr,
                 lambda v: mp.log(mp.ncdf(v)) if v < 0 else mp.log1p(-mp.ncdf(-v)),
                 [(-40.0, 12.0), ("-log", 0, 300)], 5),
    "i0": (lg.i0, lambda v: mp.besseli(0, v), [(-30.0, 30.0), ("log", -20, 6.5)], 6),
    "i1": (lg.special.i1, lambda v: mp.besseli(1, v), [(-30.0, 30.0), ("log", -20, 6.5)], 6),
    "i0e": (lg.special.i0e, lambda v: mp.besseli(0, v) * mp.exp(-abs(v)), [(-30.0, 30.0)], 4),
    "i1e": (lg.special.i1e, lambda v: mp.besseli(1, v) * mp.exp(-abs(v)), [(-30.0, 30.0)], 4),
}


def _inputs(spec, n, rng):
    if spec[0] == "log":
        return np.exp(rng.uniform(spec[1], spec[2], n))
    if spec[0] == "-log":
        return -np.exp(rng.uniform(spec[1], spec[2], n))
    if spec[0] == "1-log":
        return 1 - np.exp(rng.uniform(spec[1], spec[2], n))
    return rng.uniform(spec[0], spec[1], n)


def _ulps(got: np.ndarray, ref: list) -> np.ndarray:
    out = []
    for g, r in zip(got, ref):
        if r == 0 or not mp.isfinite(r):
            out.append(0.0 if (g == float(r) or (math.isnan(g) and mp.isnan(r))) else math.inf)
            continue
        out.append(float(abs(mp.mpf(float(g)) - r)) / np.spacing(abs(float(r))))
    return np.array(out)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ACCURACY))
def test_float64_accuracy_against_mpmath(name) -> None:
    f, ref, specs, bound = ACCURACY[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    with mp.workdps(40):
        for spec in specs:
            x = _inputs(spec, 300, rng)
            got = f(lg.tensor(x)).numpy()
            err = _ulps(got, [ref(mp.mpf(float(v))) for v in x])
            i = int(np.argmax(err))
            assert err[i] <= bound, f"{name}({x[i]!r}) = {got[i]!r}: {err[i]:.1f} ULP > {bound}"


@pytest.mark.slow
def test_zeta_accuracy_against_mpmath() -> None:
    rng = np.random.default_rng(5)
    s = rng.uniform(1.01, 20, 200)
    q = np.exp(rng.uniform(-5, 5, 200))
    got = lg.special.zeta(lg.tensor(s), lg.tensor(q)).numpy()
    with mp.workdps(90):              # mpmath's zeta needs the digits for large s and q
        err = _ulps(got, [mp.zeta(mp.mpf(a), mp.mpf(b)) for a, b in zip(s, q)])
    assert err.max() <= 12, err.max()


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv", "i0", "special.i1e",
                                  "special.ndtri", "special.log_ndtr", "special.erfcx"])
def test_float32_is_double_rounded_once(name) -> None:
    """float32 is evaluated in double and rounded once: it equals float64's result rounded
    (up to the double result's own rounding at a float32 tie)."""
    row = next(r for r in UNARY if r[0] == name)
    x = _sample(*row[3], (2000,), 3).astype(np.float32)
    a = row[1](lg.tensor(x)).numpy()
    b = row[1](lg.tensor(x.astype(np.float64))).numpy().astype(np.float32)
    assert np.sum(a != b) <= 1


# bool and integer dtypes where torch defines them (OpInfo gaps): name, fn(lib, a, b)
_BA = np.array([True, False, True, False])
_BB = np.array([True, True, False, False])
BOOL_CASES = [
    ("add bool", lambda M, a, b: M.add(a, b)),
    ("add bool alpha", lambda M, a, b: M.add(a, b, alpha=0)),
    ("add bool number", lambda M, a, b: a + True),
    ("add bool int promotes", lambda M, a, b: a + 2),
    ("square bool", lambda M, a, b: M.square(a)),
    ("heaviside bool", lambda M, a, b: M.heaviside(a, b)),
    ("isclose bool", lambda M, a, b: M.isclose(a, b)),
]


@pytest.mark.parametrize("name,fn", BOOL_CASES, ids=[c[0] for c in BOOL_CASES])
def test_bool_inputs_like_torch(name, fn) -> None:
    got = fn(lg, lg.tensor(_BA), lg.tensor(_BB))
    want = fn(torch, torch.tensor(_BA), torch.tensor(_BB))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
