"""NumPy interop: NumPy scalars as numbers, ufuncs and array functions dispatching to
llgrad (gradients flow) or refusing clearly, DLPack read-only memory and bfloat16."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")


# -- NumPy scalars are Python numbers ----------------------------------------------------

SCALARS = [np.float32(2.5), np.float64(2.5), np.float16(2.5), np.int64(3), np.int32(-2),
           np.uint8(7), np.bool_(True)]


@pytest.mark.parametrize("s", SCALARS, ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16"])
@pytest.mark.parametrize("op", ["add", "mul", "sub", "rsub", "rmul", "radd", "div", "eq"])
def test_numpy_scalars_act_as_python_numbers_like_torch(s, dtype, op):
    """Against torch given the Python number (torch itself reads np.bool_ as a float)."""
    x = lg.arange(6).reshape(2, 3).to(getattr(lg, dtype))
    tx = torch.arange(6).reshape(2, 3).to(getattr(torch, dtype))
    fn = {"add": lambda a, v: a + v, "mul": lambda a, v: a * v, "sub": lambda a, v: a - v,
          "rsub": lambda a, v: v - a, "rmul": lambda a, v: v * a, "radd": lambda a, v: v + a,
          "div": lambda a, v: a / v, "eq": lambda a, v: a == v}[op]
    try:
        want = fn(tx, s.item())
    except (TypeError, RuntimeError):           # torch refuses: so does llgrad
        with pytest.raises((TypeError, RuntimeError)):
            fn(x, s)
        return
    got = fn(x, s)
    assert isinstance(got, lg.Tensor)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2)


def test_numpy_scalars_keep_gradients_and_work_in_place():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = (np.float64(3) * x + x * np.float32(2)).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 5.0])
    z = lg.ones(3)
    z += np.float32(2)
    z.mul_(np.int64(2))
    z.add_(lg.ones(3), alpha=np.float64(0.5))
    np.testing.assert_allclose(z.numpy(), [6.5] * 3)
    assert lg.clamp(lg.arange(5.0), np.float32(1), np.int64(3)).tolist() == [1, 1, 2, 3, 3]


def test_numpy_scalars_inside_compiled_functions():
    f = lg.compile(lambda x: x * np.float32(3) + np.int64(1))
    np.testing.assert_allclose(f(lg.ones(4)).numpy(), [4.0] * 4)


# -- ufuncs ----------------------------------------------------------------------------

UNARY = ["exp", "log", "sqrt", "sin", "cos", "tanh", "negative", "absolute", "square",
         "expm1", "log1p", "floor", "ceil", "reciprocal", "log2", "exp2"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_ufuncs_run_llgrad_and_differentiate(name):
    a = np.random.default_rng(0).uniform(0.5, 2.0, (3, 4))
    x = lg.tensor(a, requires_grad=True)
    out = getattr(np, name)(x)
    assert isinstance(out, lg.Tensor)
    np.testing.assert_allclose(out.detach().numpy(), getattr(np, name)(a), rtol=1e-12)
    if name not in ("floor", "ceil"):
        tx = torch.tensor(a, requires_grad=True)
        tfn = {"negative": torch.neg, "absolute": torch.abs}.get(
            name, getattr(torch, name, None))
        out.sum().backward()
        tfn(tx).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power",
                                  "maximum", "minimum", "greater", "less_equal", "arctan2"])
def test_binary_ufuncs_with_arrays_scalars_and_tensors(name):
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.5, 2, (2, 3)), rng.uniform(0.5, 2, (3,))
    ufunc = getattr(np, name)
    for left, right in [(lg.tensor(a), lg.tensor(b)), (a, lg.tensor(b)),
                        (lg.tensor(a), b), (np.float64(1.5), lg.tensor(b))]:
        got = ufunc(left, right)
        assert isinstance(got, lg.Tensor), (name, type(left), type(right))
        want = ufunc(np.asarray(left), np.asarray(right))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_array_times_tensor_is_a_tensor_with_gradient():
    x = lg.ones(3, requires_grad=True)
    y = np.array([1.0, 2.0, 3.0]) * x           # ndarray on the left: NumPy defers
    assert isinstance(y, lg.Tensor) and y.dtype is lg.float64
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0, 3.0])


def test_ufunc_reduce_and_unsupported_forms():
    t = lg.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(np.add.reduce(t, axis=1).numpy(), [3.0, 12.0])
    np.testing.assert_allclose(np.maximum.reduce(t, axis=0).numpy(), [3.0, 4.0, 5.0])
    np.testing.assert_allclose(np.multiply.reduce(t + 1, axis=None).numpy(), 720.0)
    g = lg.ones(3, requires_grad=True)
    with pytest.raises(TypeError, match=r"np\.sinc: llgrad has no equivalent.*detach"):
        np.sinc(g)
    with pytest.raises(TypeError, match=r"np\.add\.accumulate"):
        np.add.accumulate(g)
    with pytest.raises(TypeError, match=r"np\.exp: llgrad does not run out="):
        np.exp(g, out=np.empty(3))
    # without gradients NumPy computes them, as for any array-like
    np.testing.assert_allclose(np.sinc(lg.zeros(2)), [1.0, 1.0])
    np.testing.assert_allclose(np.add.accumulate(lg.ones(3)), [1.0, 2.0, 3.0])
    out = np.empty(3)
    np.exp(lg.zeros(3), out=out)
    np.testing.assert_allclose(out, 1.0)


# -- array functions ----------------------------------------------------------------------

def test_array_functions_dispatch_with_gradients():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4))
    x = lg.tensor(a, requires_grad=True)
    cases = [
        (lambda m: np.sum(m, axis=1, keepdims=True), lambda m: m.sum(1, keepdims=True)),
        (lambda m: np.mean(m), lambda m: m.mean()),
        (lambda m: np.max(m, axis=0), lambda m: m.max(0)),
        (lambda m: np.concatenate([m, m * 2], axis=1), lambda m: np.concatenate([m, m * 2], 1)),
        (lambda m: np.stack([m, m]), lambda m: np.stack([m, m])),
        (lambda m: np.transpose(m), lambda m: m.T),
        (lambda m: np.reshape(m, (4, 3)), lambda m: m.reshape(4, 3)),
        (lambda m: np.where(m > 0, m, 0.0), lambda m: np.where(m > 0, m, 0.0)),
        (lambda m: np.clip(m, -0.5, 0.5), lambda m: np.clip(m, -0.5, 0.5)),
        (lambda m: np.dot(m, np.ones(4)), lambda m: m @ np.ones(4)),
        (lambda m: np.var(m, axis=1), lambda m: m.var(1)),
        (lambda m: np.cumsum(m, axis=1), lambda m: m.cumsum(1)),
        (lambda m: np.einsum("ij,ij->i", m, m), lambda m: (m * m).sum(1)),
    ]
    for f, ref in cases:
        got = f(x)
        assert isinstance(got, lg.Tensor)
        np.testing.assert_allclose(got.detach().numpy(), ref(a), rtol=1e-10, atol=1e-12)
        got.sum().backward()                   # differentiable
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()
    assert np.shape(x) == (3, 4) and np.ndim(x) == 2 and np.size(x) == 12


def test_array_functions_without_an_equivalent():
    g = lg.ones(4, requires_grad=True)
    with pytest.raises(TypeError, match=r"np\.median: llgrad has no equivalent"):
        np.median(g)
    assert np.median(lg.arange(5.0)) == 2.0     # no gradient: NumPy's answer
    with pytest.raises(TypeError, match=r"np\.sum: llgrad does not take these arguments"):
        np.sum(g, where=np.array([True, False, True, True]))


def test_numpy_conversion_still_shares_memory():
    t = lg.ones(3)
    a = np.asarray(t)
    a[0] = 5
    assert t[0].item() == 5


# -- DLPack ---------------------------------------------------------------------------------

def test_dlpack_read_only_memory_is_never_written():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = lg.from_dlpack(a)
    t.add_(1)
    np.testing.assert_allclose(a, [0, 1, 2, 3])
    np.testing.assert_allclose(t.numpy(), [1, 2, 3, 4])
    b = np.arange(4.0)                           # writable memory is still shared
    lg.from_dlpack(b).add_(1)
    np.testing.assert_allclose(b, [1, 2, 3, 4])


def test_dlpack_bfloat16_both_ways_without_copies():
    tb = torch.tensor([[1.5, -2.25, 3.0], [0.5, 8.0, -0.125]], dtype=torch.bfloat16)
    lb = lg.from_dlpack(tb)
    assert lb.dtype is lg.bfloat16 and lb.shape == (2, 3)
    np.testing.assert_array_equal(lb.float().numpy(), tb.float().numpy())
    lb.mul_(2)                                   # same memory
    np.testing.assert_array_equal(tb.float().numpy(), lb.float().numpy())
    tt = torch.randn(4, 3).to(torch.bfloat16).t()          # strided
    np.testing.assert_array_equal(lg.from_dlpack(tt).float().numpy(), tt.float().numpy())
    x = lg.tensor([0.5, 1.0, -3.0], dtype=lg.bfloat16)
    y = torch.from_dlpack(x)
    assert y.dtype == torch.bfloat16
    y.add_(1)
    np.testing.assert_array_equal(x.float().numpy(), [1.5, 2.0, -2.0])


def test_numpy_arguments_llgrad_does_not_take_are_never_ignored():
    """`out=`, `dtype=` and other arguments an llgrad equivalent does not take send the
    call to NumPy (no gradient at stake) or refuse it, instead of being dropped."""
    t = lg.arange(6.0).reshape(2, 3)
    out = np.zeros((2, 3))
    np.clip(t, 1, 4, out=out)
    np.testing.assert_array_equal(out, np.clip(np.arange(6.0).reshape(2, 3), 1, 4))
    assert isinstance(np.sum(t, dtype=np.float64), np.floating)
    with pytest.raises(TypeError, match=r"np\.dot: llgrad does not take these arguments"):
        np.dot(lg.ones(2, requires_grad=True), lg.ones(2), out=np.zeros(()))
