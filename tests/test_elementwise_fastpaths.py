"""Direct (unrecorded) paths of elementwise, special, view and creation functions against
their general paths, NumPy/SciPy and torch: values, dtypes, shapes, strides and bases of
views, errors, and what autograd records.

Covered: the SciPy Bessel/Airy functions and gcd/lcm writing into the result's NumPy view
(`Tensor._numpy_view`'s positional construction), float32 erfinv's narrow Newton step,
the reinterpreting views (`view_as_complex`, `view_as_real`, `real`, `imag`) and the
multi-tensor views (`broadcast_tensors`, `meshgrid`) made from kept geometries, `lerp`
through the learned direct launches, `clone`'s copy, and `fill`/`fill_`'s host writes.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.functions import creation as C
from llgrad.functions import residual as R
from llgrad.functions import shape as S

torch = pytest.importorskip("torch")
sc = pytest.importorskip("scipy.special")

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")


def _layouts(dtype: lg.dtype) -> list[lg.Tensor]:
    """Contiguous, transposed, offset, strided, 0-d and empty tensors of `dtype`."""
    g = lg.Generator().manual_seed(0)
    base = lg.randn(6, 8, generator=g, dtype=dtype) * 3
    return [base, base.t(), base[1:, 2:], base[::2, ::3], base[2, 3], lg.zeros(0, 4, dtype=dtype)]


def _same_view(a: lg.Tensor, b: lg.Tensor) -> bool:
    return (a._storage is b._storage and a._offset == b._offset and a._shape == b._shape and
            a._strides == b._strides and a._dtype is b._dtype and a._base is b._base and
            a.requires_grad == b.requires_grad and a.grad_fn is None and b.grad_fn is None)


# -- host functions --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [lg.float32, lg.float64])
@pytest.mark.parametrize("name,ref", [("bessel_j0", sc.j0), ("bessel_j1", sc.j1)])
def test_host_special_direct(name, ref, dtype):
    fn = getattr(lg.special, name)
    for x in _layouts(dtype):
        r = fn(x)
        want = ref(x.numpy().astype(np.float64)).astype(x.numpy().dtype)
        assert r.dtype == dtype and tuple(r.shape) == tuple(x.shape) and r.is_contiguous()
        np.testing.assert_array_equal(r.numpy(), want)
        # the general path (an input that requires grad: the result never does)
        g = fn(x.detach().requires_grad_())
        assert not g.requires_grad and g.grad_fn is None
        np.testing.assert_array_equal(g.numpy(), r.numpy())
    big = lg.linspace(-20, 5, 3000, dtype=dtype)
    np.testing.assert_array_equal(
        fn(big).numpy(), ref(big.numpy().astype(np.float64)).astype(big.numpy().dtype))
    assert fn(lg.arange(4)).dtype == lg.get_default_dtype()   # integers: the general path


@pytest.mark.parametrize("dtype", [lg.int16, lg.int32, lg.int64, lg.uint8])
def test_gcd_lcm_direct(dtype):
    g = lg.Generator().manual_seed(1)
    a = lg.randint(-90, 90, (6, 5), generator=g).to(dtype)
    for x, y in [(a, lg.tensor(6).to(dtype)), (a.t(), a.t().contiguous()), (a[1:, ::2], lg.tensor(4).to(dtype)),
                 (lg.zeros(0, dtype=dtype), lg.tensor(3).to(dtype))]:
        for fn, ref in ((lg.gcd, np.gcd), (lg.lcm, np.lcm)):
            r = fn(x, y)
            want = ref(x.numpy(), y.numpy())
            assert r.dtype == dtype and r.numpy().dtype == want.dtype
            np.testing.assert_array_equal(r.numpy(), want)
            t = getattr(torch, fn.__name__)(torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy()))
            np.testing.assert_array_equal(r.numpy(), t.numpy())


def test_numpy_view_layouts():
    for d in (lg.float32, lg.int16, lg.complex64, lg.bool):
        for t in _layouts(lg.float64) + [lg.arange(20.)[3:9:2]]:
            t = t.to(d) if t.numel() else t.to(d)
            v = t._numpy_view()
            item = d.itemsize
            assert v.shape == tuple(t.shape)
            if t.numel():
                assert v.strides == tuple(s * item for s in t._strides)
                assert v.__array_interface__["data"][0] == t._ptr
                np.testing.assert_array_equal(v, t.numpy())


def test_erfinv_float32_is_float64_rounded():
    rng = np.random.default_rng(2)
    y = np.concatenate([rng.uniform(-1, 1, 200_000), 1 - rng.uniform(0, 1e-6, 20_000),
                        rng.uniform(-1e-3, 1e-3, 20_000), [0.5, -0.5, 0.4999, 0.5001]])
    y32 = y.astype(np.float32)
    r32 = lg.erfinv(lg.tensor(y32)).numpy()
    r64 = lg.erfinv(lg.tensor(y32.astype(np.float64))).numpy().astype(np.float32)
    np.testing.assert_array_equal(r32, r64)
    special = np.array([0.0, -0.0, 1.0, -1.0, 1.5, -2.0, np.nan, np.inf, 1e-45, -1e-45,
                        np.nextafter(np.float32(1), np.float32(0))], np.float32)
    r = lg.erfinv(lg.tensor(special)).numpy()
    t = torch.erfinv(torch.from_numpy(special)).numpy()
    np.testing.assert_array_equal(np.signbit(r[:2]), [False, True])
    np.testing.assert_allclose(r, t, rtol=2e-7, equal_nan=True)


# -- reinterpreting and multi-tensor views -------------------------------------------------

def test_reinterpreted_views_direct():
    for x in (lg.randn(5, 2), lg.randn(3, 4, 2, dtype=lg.float64)[1:], lg.randn(6, 2)[::2],
              lg.randn(2), lg.randn(8)[2:].reshape(3, 2)):
        a, b = lg.view_as_complex(x), lg.view_as_complex(x)
        root = x._base if x._base is not None else x
        assert _same_view(a, b) and a._base is root
        np.testing.assert_array_equal(a.numpy(), x.numpy()[..., 0] + 1j * x.numpy()[..., 1])
        for fn in (lg.real, lg.imag, lg.view_as_real):
            first, again = fn(a), fn(a)
            assert _same_view(first, again) and again._base is root
        np.testing.assert_array_equal(lg.imag(a).numpy(), x.numpy()[..., 1])
    odd = lg.randn(11)[1:].reshape(5, 2)
    lg.view_as_complex(lg.randn(12)[2:].reshape(5, 2))          # the layout learned
    with pytest.raises(RuntimeError, match="storage_offset divisible by 2"):
        lg.view_as_complex(odd)
    with pytest.raises(RuntimeError, match="non-complex"):
        lg.imag(lg.randn(3))
    assert lg.real(lg.randn(3)).dtype == lg.float32
    leaf = lg.randn(5, 2, requires_grad=True)
    lg.view_as_complex(leaf.detach())
    c = lg.view_as_complex(leaf)
    assert type(c.grad_fn).__name__ == "ViewAsComplexBackward0"
    lg.imag(c).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), np.tile([0.0, 1.0], (5, 1)))
    with lg.no_grad():
        assert not lg.view_as_complex(leaf).requires_grad


def _check_many(fn, args, kwargs, expect):
    first, again = fn(*args, **kwargs), fn(*args, **kwargs)
    assert type(again) is tuple and len(again) == len(first)
    for a, b, e in zip(first, again, expect):
        assert _same_view(a, b) or a is b
        np.testing.assert_array_equal(b.numpy(), e)


def test_broadcast_tensors_and_meshgrid_direct():
    a, b, c, d = lg.randn(3), lg.randn(1, 2, 1), lg.randn(1, 1), lg.randn(5, 1, 1)
    _check_many(lg.broadcast_tensors, (a, b, c, d), {},
                np.broadcast_arrays(a.numpy(), b.numpy(), c.numpy(), d.numpy()))
    sl = lg.randn(10)[2:8:2]
    _check_many(lg.broadcast_tensors, (sl, b), {}, np.broadcast_arrays(sl.numpy(), b.numpy()))
    _check_many(lg.broadcast_tensors, (a, a), {}, [a.numpy(), a.numpy()])   # shared memory
    for args, kw in [((a, lg.tensor(1.0)), {"indexing": "ij"}), (([a, lg.tensor(1.0)],), {"indexing": "ij"}),
                     ((a, sl, lg.randn(2)), {"indexing": "xy"}), ((a,), {}), ((a, sl), {})]:
        flat = args[0] if isinstance(args[0], list) else args
        want = np.meshgrid(*[t.numpy().reshape(-1) for t in flat], indexing=kw.get("indexing", "ij"))
        _check_many(lg.meshgrid, args, kw, want)
    # same layouts, other memory and offsets
    x1, x2 = lg.randn(20)[3:6], lg.randn(20)[5:8]
    y = lg.randn(2)
    lg.meshgrid(x1, y)
    r = lg.meshgrid(x2, y)
    np.testing.assert_array_equal(r[0].numpy(), np.meshgrid(x2.numpy(), y.numpy(), indexing="ij")[0])
    assert r[0]._base is x2._base
    leaf = lg.randn(3, requires_grad=True)
    out = lg.broadcast_tensors(leaf, lg.randn(2, 1))
    assert type(out[0].grad_fn).__name__ == "ExpandBackward0"
    with lg.no_grad():
        assert not lg.broadcast_tensors(leaf, lg.randn(2, 1))[0].requires_grad
    with pytest.raises(RuntimeError, match="same dtype"):
        lg.meshgrid(lg.randn(3), lg.randn(2, dtype=lg.float64))


# -- lerp, clone, fill ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.complex64])
def test_lerp_direct(dtype):
    g = lg.Generator().manual_seed(3)
    cases = [(lg.randn(5, 1, generator=g, dtype=dtype), lg.randn(5, 5, generator=g, dtype=dtype),
              lg.randn(5, 1, generator=g, dtype=dtype)),
             (lg.randn(4, 3, generator=g, dtype=dtype).t(), lg.randn(3, 4, generator=g, dtype=dtype), 0.3),
             (lg.randn(4, generator=g, dtype=dtype), lg.randn(4, generator=g, dtype=dtype), 2),
             (lg.randn((), generator=g, dtype=dtype), lg.randn(3, generator=g, dtype=dtype),
              lg.randn(3, generator=g, dtype=dtype))]
    for a, b, w in cases:
        ops = a + (w * (b - a) if isinstance(w, lg.Tensor) else (b - a) * w)
        first, direct = lg.lerp(a, b, w), lg.lerp(a, b, w)
        for r in (first, direct):
            assert r.dtype == ops.dtype and r.shape == ops.shape
            np.testing.assert_array_equal(r.numpy(), ops.numpy())
        tw = torch.from_numpy(w.numpy()) if isinstance(w, lg.Tensor) else w
        t = torch.lerp(torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy()), tw)
        np.testing.assert_allclose(direct.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
    a = lg.randn(5, 1, requires_grad=True)
    b, w = lg.randn(5, 5), lg.rand(5, 1)
    lg.lerp(a.detach(), b, w)
    r = lg.lerp(a, b, w)
    assert type(r.grad_fn).__name__ == "LerpBackward1"
    r.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), (1 - w.numpy()) * 5, rtol=1e-6)
    assert type(lg.lerp(a, b, 0.5).grad_fn).__name__ == "LerpBackward0"
    with pytest.raises(RuntimeError, match="expected dtype float32"):
        lg.lerp(lg.randn(3), lg.randn(3, dtype=lg.float64), 0.5)


def test_clone_direct():
    for x in _layouts(lg.float32) + [lg.randn(4, dtype=lg.complex64)]:
        c = x.clone()
        assert c._storage is not x._storage and c.is_contiguous() and c.dtype == x.dtype
        np.testing.assert_array_equal(c.numpy(), x.numpy())
    p = lg.nn.Parameter(lg.randn(3))
    assert type(p.clone().grad_fn).__name__ == "CloneBackward0"
    with lg.no_grad():
        c = p.clone()
    assert type(c) is lg.Tensor and not c.requires_grad
    with lg.inference_mode():
        assert lg.randn(3).clone().is_inference()


VALUES = (0, 1, 2.5, -1, True, False, 0.0, -0.0, float("nan"), float("inf"), 300, 1e300)
DTYPES = (lg.float32, lg.float64, lg.int64, lg.int8, lg.uint8, lg.bool, lg.float16,
          lg.bfloat16, lg.complex64)


def test_fill_and_fill_dense_direct():
    for d in DTYPES:
        for v in VALUES:
            for shape in ((5,), (), (0,), (3, 4), (200, 200)):
                t = lg.empty(shape, dtype=d)
                ref = lg.empty(shape, dtype=d)
                try:
                    want = C.checked_scalar(v, d, "fill_")
                except (RuntimeError, OverflowError):
                    with pytest.raises((RuntimeError, OverflowError)):
                        t.fill_(v)
                    with pytest.raises((RuntimeError, OverflowError)):
                        lg.fill(t, v)
                    continue
                C.ew.copy_into(ref, want)          # the copy kernel's bytes
                t.fill_(v)
                t.fill_(v)                         # (kept element)
                assert t._numpy_view().tobytes() == ref._numpy_view().tobytes(), (d, v, shape)
                f = lg.fill(lg.zeros(shape, dtype=d), v)
                assert f.dtype == d and f.is_contiguous()
                assert f._numpy_view().tobytes() == ref._numpy_view().tobytes(), (d, v, shape)
    x = lg.zeros(4, 6).t()
    x.fill_(3)
    assert (x.numpy() == 3).all()
    x = lg.zeros(10)
    x[::2].fill_(1.0)
    np.testing.assert_array_equal(x.numpy(), [1, 0] * 5)
    assert np.signbit(lg.fill(lg.zeros(3), -0.0).numpy()).all()
    assert not np.signbit(lg.fill(lg.zeros(3), 0.0).numpy()).any()
    leaf = lg.randn(3, requires_grad=True)
    assert lg.fill(leaf, 2.0).grad_fn is not None
    np.testing.assert_array_equal(lg.fill(lg.randn(3), lg.tensor(2.0)).numpy(), [2.0] * 3)


def test_checked_scalar_bool():
    for d in DTYPES + (lg.complex128, lg.int16):
        for v in (True, False):
            a, b = C.checked_scalar(v, d, "x"), C.checked_scalar(np.bool_(v), d, "x")
            assert a == b and type(a) is type(b)


def test_fill_general_path_unchanged():
    """`residual._fill` is the general path `fill` falls back to (values that are not
    numbers, recorded calls)."""
    x = lg.randn(4)
    np.testing.assert_array_equal(R._fill(x, 1.5).numpy(), lg.fill(x, 1.5).numpy())
    assert S._unrecorded(x)
