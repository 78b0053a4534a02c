"""The one-kernel special functions and the direct call paths of `lg.special` and
`functions/pointwise.py`, against torch and against their own general paths.

The orthogonal polynomials and polygamma are single elementwise ops (a polynomial's
scalar rule loops over its degree); frac, round(decimals=), mvlgamma, signbit, frexp's
exponent and spherical_bessel_j0 became ops of their own; later calls with plain tensors
of a layout seen before take the direct launch (`fastpath.elementwise`), and the SciPy
Bessel/Airy functions and gcd/lcm write into the result without conversions. Every
path must give what the general path and torch give: values, dtypes, grad_fn names,
requires_grad, errors, and the same inside `lg.compile` and `vmap`.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad as lg  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")

POLYNOMIALS = (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p")
TDT = {lg.float32: torch.float32, lg.float64: torch.float64}
NDT = {lg.float32: np.float32, lg.float64: np.float64}


def _name(d) -> str:
    return str(d).split(".")[-1]


def _grid(d: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.uniform(-1.5, 1.5, 24), [-1, 1, 0, 0.5, -0.5, 2, -2, 0.999,
                                                       np.inf, -np.inf, 30.0]])
    ns = np.array([-3, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 20, 2.7, -0.5, np.nan,
                   np.inf, -np.inf, 1e30, 129, 600])
    x, n = np.meshgrid(xs, ns)
    return x.astype(d), n.astype(d)


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("dtype", [lg.float32, lg.float64])
def test_polynomial_values_like_torch(name, dtype) -> None:
    x, n = _grid(NDT[dtype])
    want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
    fn = getattr(lg.special, name)
    first = fn(lg.tensor(x), lg.tensor(n))              # the general path
    again = fn(lg.tensor(x), lg.tensor(n))              # the direct launch
    assert first.dtype == dtype and again.dtype == dtype
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    # closed forms at large degree in float32 differ from torch's by torch's own
    # rounding of n * acos(x) (a few ULP of the angle times n)
    big = (n > 100) & (np.abs(x) < 1) if dtype is lg.float32 else np.zeros(x.shape, bool)
    tol = dict(rtol=3e-5, atol=1e-5) if dtype is lg.float32 else dict(rtol=1e-10, atol=1e-12)
    ok = np.isclose(first.numpy(), want, equal_nan=True, **tol) | big
    assert ok.all(), [(x[i], n[i], first.numpy()[i], want[i]) for i in zip(*np.where(~ok))][:5]


def test_polynomial_nan_degrees_and_hermite_limits() -> None:
    """n NaN/inf/beyond int64 gives 0 (a negative degree after PyTorch's cast); Hermite is
    NaN above degree 128 (float32) or 512 (float64); a NaN x gives NaN (torch reads an
    uninitialized value there)."""
    x = lg.tensor([0.5, 0.5, 0.5, 0.5])
    n = lg.tensor([math.nan, math.inf, -math.inf, 1e30])
    for name in POLYNOMIALS:
        assert getattr(lg.special, name)(x, n).tolist() == [0.0] * 4
        assert math.isnan(getattr(lg.special, name)(lg.tensor([math.nan]), 5).item())
    h = lg.special.hermite_polynomial_h
    assert math.isnan(h(lg.tensor([0.5]), 129).item())
    assert math.isfinite(h(lg.tensor([0.5], dtype=lg.float64), 129).item())
    assert math.isnan(h(lg.tensor([0.5], dtype=lg.float64), 513).item())


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_operands_dtypes_and_no_grad(name) -> None:
    fn, tfn = getattr(lg.special, name), getattr(torch.special, name)
    xv = np.array([[0.3, -0.7, 1.2]])
    nv = np.array([[2], [5], [9]])
    cases = [
        (lambda M: M.tensor(xv, dtype=M.float32), lambda M: M.tensor(nv)),
        (lambda M: M.tensor(xv), lambda M: 4),
        (lambda M: M.tensor(xv, dtype=M.float32), lambda M: 3.7),
        (lambda M: 0.4, lambda M: M.tensor(nv)),
        (lambda M: M.tensor([[1, 2, 3]]), lambda M: M.tensor(nv)),
        (lambda M: M.tensor(xv, dtype=M.float32), lambda M: M.tensor(nv, dtype=M.float64)),
    ]
    for mx, mn in cases:
        got = fn(mx(lg), mn(lg))
        want = tfn(mx(torch), mn(torch))
        assert _name(got.dtype) == _name(want.dtype) and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    # no derivative: the result never requires grad (torch's behaviour)
    x = lg.tensor(xv, requires_grad=True)
    for _ in range(2):
        y = fn(x, 3)
        assert not y.requires_grad and y.grad_fn is None
    assert not tfn(torch.tensor(xv, requires_grad=True), 3).requires_grad
    with pytest.raises(TypeError):
        fn(lg.tensor([1 + 1j]), 2)
    with pytest.raises(TypeError):
        fn(0.5, 2)


def test_polynomial_layouts_out_vmap_and_forward_mode() -> None:
    fn = lg.special.chebyshev_polynomial_u
    base = np.random.default_rng(1).uniform(-1.2, 1.2, (6, 4)).astype(np.float32)
    x = lg.tensor(base)
    want = fn(lg.tensor(np.ascontiguousarray(base.T)), 7).numpy()
    for _ in range(2):              # a transposed view: general, then direct
        np.testing.assert_array_equal(fn(x.t(), 7).numpy(), want)
    out = lg.empty(4, 6)
    r = fn(x.t(), 7, out=out)
    assert r is out
    np.testing.assert_array_equal(out.numpy(), want)
    batched = lg.func.vmap(lambda v: fn(v, 7))(x.t())
    np.testing.assert_array_equal(batched.numpy(), want)
    import llgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        dual = fwAD.make_dual(x.t(), lg.ones(4, 6))
        y = fn(dual, 7)
        assert fwAD.unpack_dual(y).tangent is None
        np.testing.assert_array_equal(fwAD.unpack_dual(y).primal.numpy(), want)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "shifted_chebyshev_polynomial_w",
                                  "hermite_polynomial_h", "laguerre_polynomial_l",
                                  "legendre_polynomial_p"])
def test_polynomials_compile_without_graph_break(name) -> None:
    fn = getattr(lg.special, name)
    x = lg.tensor(np.linspace(-1.3, 1.3, 12), dtype=lg.float32, requires_grad=True)
    n = lg.tensor([1.0, 3.0, 8.0, 11.0] * 3)
    f = lg.compile(lambda a, b: (fn(a, b) * 2 + a).sum())
    got = f(x, n)
    np.testing.assert_allclose(got.item(), (fn(x, n) * 2 + x).sum().item(), rtol=1e-5)
    assert f.graph_breaks == []
    got.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(12, np.float32))


def test_polygamma_one_kernel_negative_inputs() -> None:
    import scipy.special as sc
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-12, 12, 400), [-3.5, -0.5, 0.5, 1e-8, 40.0]])
    x = x[np.abs(x - np.round(x)) > 1e-3]
    for n in range(5):
        got = lg.polygamma(n, lg.tensor(x)).numpy()
        np.testing.assert_allclose(got, sc.polygamma(n, x), rtol=1e-9)
        want = torch.polygamma(n, torch.tensor(x.astype(np.float32))).numpy()
        np.testing.assert_allclose(lg.polygamma(n, lg.tensor(x.astype(np.float32))).numpy(),
                                   want, rtol=2e-4, atol=1e-5)
    # poles and infinities as before (SciPy's conventions): sign (-1)^(n+1)
    special = lg.tensor([0.0, -0.0, -2.0, -math.inf, math.inf, math.nan])
    assert lg.polygamma(1, special).tolist()[:4] == [math.inf] * 4
    assert lg.polygamma(2, special).tolist()[:4] == [-math.inf] * 4
    assert lg.polygamma(2, special).tolist()[4] == 0.0
    assert math.isnan(lg.polygamma(3, special).tolist()[5])


def test_polygamma_paths_grad_and_errors() -> None:
    x = lg.tensor([-2.5, 0.7, 3.0], dtype=lg.float64, requires_grad=True)
    for n in (1, 2, 9):
        a = x.polygamma(n)
        b = lg.polygamma(n, x)             # the direct launch with a recorder
        assert a.grad_fn.name() == b.grad_fn.name() == "PolygammaBackward0"
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        (g,) = lg.autograd.grad(b.sum(), x)
        np.testing.assert_allclose(g.numpy(), lg.polygamma(n + 1, x.detach()).numpy())
    assert lg.autograd.gradcheck(lambda v: lg.polygamma(2, v), (x,))
    assert lg.polygamma(1, lg.tensor([1, 2])).dtype == lg.float32
    with pytest.raises(RuntimeError):
        lg.polygamma(-1, lg.tensor([1.0]))
    with pytest.raises(TypeError):
        lg.polygamma(1.5, lg.tensor([1.0]))
    f = lg.compile(lambda v: lg.polygamma(3, v).sum())
    np.testing.assert_allclose(f(x.detach()).item(), lg.polygamma(3, x.detach()).sum().item(),
                               rtol=1e-12)
    assert f.graph_breaks == []


def _both(fn_lg, fn_t, xv, dtype=lg.float32, **kw):
    got = fn_lg(lg.tensor(xv, dtype=dtype), **kw)
    again = fn_lg(lg.tensor(xv, dtype=dtype), **kw)
    want = fn_t(torch.tensor(xv, dtype=TDT[dtype]), **kw)
    return got, again, want


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64])
def test_frac_round_signbit_frexp_like_torch(dtype) -> None:
    v = np.array([0.0, -0.0, 2.5, -2.5, 1.2345678, -987.654, 1e-40, math.inf, -math.inf,
                  math.nan, 12345.5])
    for f_lg, f_t, kw in [(lg.frac, torch.frac, {}), (lg.round, torch.round, {"decimals": 3}),
                          (lg.round, torch.round, {"decimals": -2}),
                          (lg.special.round, torch.special.round, {"decimals": 1}),
                          (lg.signbit, torch.signbit, {})]:
        got, again, want = _both(f_lg, f_t, v, dtype, **kw)
        assert _name(got.dtype) == _name(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(again.numpy(), want.numpy())
    for _ in range(2):
        m, e = lg.frexp(lg.tensor(v, dtype=dtype))
        tm, te = torch.frexp(torch.tensor(v, dtype=TDT[dtype]))
        assert e.dtype == lg.int32 and m.dtype == dtype
        np.testing.assert_array_equal(m.numpy(), tm.numpy())
        np.testing.assert_array_equal(e.numpy(), te.numpy())
        assert lg.frexp(lg.tensor(v, dtype=dtype)).exponent.dtype == lg.int32


def test_new_ops_grad_names_and_fallbacks() -> None:
    x = lg.tensor([0.25, -1.75, 3.5], requires_grad=True)
    for _ in range(2):
        assert lg.frac(x).grad_fn.name() == "FracBackward0"
        assert lg.round(x, decimals=2).grad_fn.name() == "RoundBackward1"
        assert lg.rad2deg(x).grad_fn.name() == "Rad2DegBackward0"
        assert lg.deg2rad(x).grad_fn.name() == "Deg2RadBackward0"
        assert lg.copysign(x, -1.0).grad_fn.name() == "CopysignBackward0"
        m, e = lg.frexp(x)
        assert m.grad_fn.name() == "FrexpBackward0" and not e.requires_grad
        assert not lg.signbit(x).requires_grad
        assert not lg.special.spherical_bessel_j0(x).requires_grad
    (g,) = lg.autograd.grad(lg.frac(x).sum() + lg.round(x, decimals=1).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 1.0])
    # integers: the errors and promotions of the general path
    with pytest.raises(TypeError):
        lg.frac(lg.tensor([1, 2]))
    with pytest.raises(NotImplementedError):
        lg.round(lg.tensor([1, 2]), decimals=1)
    with pytest.raises(TypeError):
        lg.round(x, decimals=1.5)
    assert lg.rad2deg(lg.tensor([1, 2])).dtype == lg.float32
    assert lg.signbit(lg.tensor([-1, 2])).tolist() == [True, False]
    assert lg.copysign(lg.tensor([1, 2]), -1).tolist() == [-1.0, -2.0]
    with pytest.raises(TypeError):
        lg.frexp(lg.tensor([1, 2]))
    # vmap and forward mode take the general path
    xs = lg.tensor([[0.5, -1.5], [2.25, -0.0]])
    np.testing.assert_array_equal(lg.func.vmap(lg.frac)(xs).numpy(), lg.frac(xs).numpy())
    np.testing.assert_array_equal(lg.func.vmap(lg.signbit)(xs).numpy(),
                                  lg.signbit(xs).numpy())
    import llgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        y = lg.frac(fwAD.make_dual(lg.tensor([0.5, 1.5]), lg.tensor([2.0, 3.0])))
        np.testing.assert_array_equal(fwAD.unpack_dual(y).tangent.numpy(), [2.0, 3.0])


def test_new_ops_compile() -> None:
    x = lg.tensor(np.linspace(-4, 4, 10), dtype=lg.float32, requires_grad=True)
    fns = [lambda v: lg.frac(v) * 2, lambda v: lg.round(v, decimals=1) + v,
           lambda v: lg.mvlgamma(v.abs() + 3, 3), lambda v: lg.where(lg.signbit(v), v, -v),
           lambda v: lg.frexp(v)[0] + lg.frexp(v)[1],
           lambda v: lg.special.spherical_bessel_j0(v) + v]
    for fn in fns:
        f = lg.compile(lambda v: fn(v).sum())
        got = f(x)
        np.testing.assert_allclose(got.item(), fn(x).sum().item(), rtol=1e-5)
        assert f.graph_breaks == []
        (gc,) = lg.autograd.grad(got, x)
        (ge,) = lg.autograd.grad(fn(x).sum(), x)
        np.testing.assert_allclose(gc.numpy(), ge.numpy(), rtol=1e-5, atol=1e-6)


def test_mvlgamma_one_op() -> None:
    import scipy.special as sc
    v = np.random.default_rng(2).uniform(2.1, 9, (4, 5))
    for p in (1, 3, 5, 20):
        xs = v + p / 2
        x = lg.tensor(xs, requires_grad=True)
        y = lg.mvlgamma(x, p)
        y2 = x.mvlgamma(p)
        assert y.grad_fn.name() == "MvlgammaBackward0"
        np.testing.assert_allclose(y.detach().numpy(), sc.multigammaln(xs, p), rtol=1e-6)
        np.testing.assert_array_equal(y.detach().numpy(), y2.detach().numpy())
        want = torch.mvlgamma(torch.tensor(xs, requires_grad=True), p)
        (g,) = lg.autograd.grad(y.sum(), x)
        tx = torch.tensor(xs, requires_grad=True)
        (tg,) = torch.autograd.grad(torch.mvlgamma(tx, p).sum(), tx)
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5)
        np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    assert lg.autograd.gradcheck(lambda t: lg.mvlgamma(t, 3),
                                 (lg.tensor([2.5, 4.0], dtype=lg.float64, requires_grad=True),))
    with pytest.raises(RuntimeError, match="greater than"):
        lg.mvlgamma(lg.tensor([0.2, 3.0]), 2)
    with pytest.raises(RuntimeError, match="greater than"):
        lg.mvlgamma(lg.tensor([math.nan]), 1)


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64])
def test_host_functions_direct_and_general(dtype) -> None:
    v = np.array([[0.0, 0.3, 2.0, 9.0], [30.0, -1.0, -4.0, 1e-30]])
    for name in ("airy_ai", "bessel_j0", "bessel_j1"):
        fn, tfn = getattr(lg.special, name), getattr(torch.special, name)
        direct = fn(lg.tensor(v, dtype=dtype))
        strided = fn(lg.tensor(v.T.copy(), dtype=dtype).t())       # a view: direct too
        general = fn(lg.tensor(v, dtype=lg.float16)).to(dtype)      # the general path
        want = tfn(torch.tensor(v, dtype=TDT[dtype])).numpy()
        assert direct.dtype == dtype and direct.shape == (2, 4)
        np.testing.assert_array_equal(direct.numpy(), strided.numpy())
        np.testing.assert_allclose(direct.numpy(), want, rtol=1e-5 if dtype is lg.float32
                                   else 1e-7, atol=1e-30)
        np.testing.assert_allclose(general.numpy(), want, rtol=1e-2, atol=1e-3)
        assert not fn(lg.tensor(v, dtype=dtype, requires_grad=True)).requires_grad
        assert fn(lg.tensor([1, 2])).dtype == lg.float32


@pytest.mark.parametrize("dtype", [lg.int16, lg.int64, lg.uint8])
def test_gcd_lcm_direct_and_general(dtype) -> None:
    a = np.array([[0, 5, 12, 100], [7, 9, 81, 3]])
    b = np.array([[0, 0, 18, 75], [21, 6, 27, 3]])
    tdt = getattr(torch, _name(dtype))
    for op in ("gcd", "lcm"):
        f, tf = getattr(lg, op), getattr(torch, op)
        for x, y in [(a, b), (a, np.array(6)), (a, b[:1]), (np.array(6), a)]:
            got = f(lg.tensor(x, dtype=dtype), lg.tensor(y, dtype=dtype))
            want = tf(torch.tensor(x, dtype=tdt), torch.tensor(y, dtype=tdt))
            assert got.dtype == dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        got = f(lg.tensor(a, dtype=dtype), lg.tensor(b, dtype=lg.int32))    # promotes
        assert _name(got.dtype) == _name(tf(torch.tensor(a, dtype=tdt),
                                            torch.tensor(b, dtype=torch.int32)).dtype)
        with pytest.raises(TypeError):
            f(lg.tensor([1.0]), lg.tensor([2.0]))


def test_copysign_nextafter_direct_paths() -> None:
    a = np.array([1.5, -0.0, 0.0, math.inf, 3.0], dtype=np.float32)
    b = np.array([-1.0, 1.0, -0.0, -2.0, math.nan], dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(
            lg.copysign(lg.tensor(a), lg.tensor(b)).numpy(),
            torch.copysign(torch.tensor(a), torch.tensor(b)).numpy())
        np.testing.assert_array_equal(
            lg.nextafter(lg.tensor(a), lg.tensor(b)).numpy(),
            torch.nextafter(torch.tensor(a), torch.tensor(b)).numpy())
        np.testing.assert_array_equal(lg.copysign(lg.tensor(a), -2).numpy(),
                                      torch.copysign(torch.tensor(a), -2).numpy())
    assert lg.copysign(lg.tensor(a), lg.tensor(b, dtype=lg.float64)).dtype == lg.float64
    assert lg.nextafter(lg.tensor(a), lg.tensor(b.astype(np.float64))).dtype == lg.float64
    with pytest.raises(TypeError):
        lg.nextafter(lg.tensor([1, 2]), lg.tensor([1, 3]))


def test_spherical_bessel_j0_like_torch() -> None:
    v = np.array([0.0, -0.0, 1e-20, 0.3, -0.45, 0.5, 2.0, -17.0, 100.0, math.inf, -math.inf,
                  math.nan])
    for dtype in (lg.float32, lg.float64):
        got, again, want = _both(lg.special.spherical_bessel_j0,
                                 torch.special.spherical_bessel_j0, v, dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=0,
                                   equal_nan=True)
        np.testing.assert_array_equal(got.numpy(), again.numpy())
    assert lg.special.spherical_bessel_j0(lg.tensor([0, 1])).dtype == lg.float32
