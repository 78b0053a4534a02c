"""Direct eager calls (`functions/fastpath.py`): after one general call, `x + y`,
`x * 2.0`, `lg.exp(x)`, `x.sum()` of the same layouts skip the layers, and everything the
layers do for other calls (autograd, forward mode, vmap, tracing, inference mode, kernel
recording, errors, NumPy scalars) still happens."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import llgrad as lg
from llgrad.eager import elementwise as ew
from llgrad.eager import reduce
from llgrad.runtime import launch
from llgrad.runtime.storage import BLOCK_MAX, allocate, allocate_small
from llgrad.tensor import Tensor

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")

CALLS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul_number": lambda x, y: x * 2.0,
    "div": lambda x, y: x / y,
    "exp": lambda x, y: lg.exp(x),
    "tanh_method": lambda x, y: x.tanh(),
    "sum": lambda x, y: x.sum(),
    "amax": lambda x, y: x.amax(),
}


def _count_general(monkeypatch):
    """Count calls reaching the eager elementwise and reduction runners."""
    seen = []
    run_ew, run_red = ew.run, reduce.run
    monkeypatch.setattr(ew, "run", lambda *a, **k: seen.append("ew") or run_ew(*a, **k))
    monkeypatch.setattr(reduce, "run", lambda *a, **k: seen.append("red") or run_red(*a, **k))
    return seen


@pytest.mark.parametrize("name", sorted(CALLS))
def test_second_call_is_direct_and_equal(monkeypatch, name):
    f = CALLS[name]
    rng = np.random.default_rng(0)
    x = lg.tensor(rng.standard_normal(5).astype(np.float32))
    y = lg.tensor(rng.uniform(1, 2, 5).astype(np.float32))
    first = f(x, y)
    seen = _count_general(monkeypatch)
    again = f(x, y)
    assert seen == [], f"{name} took the general path again"
    assert again is not first and again._storage is not first._storage
    np.testing.assert_array_equal(again.numpy(), first.numpy())
    assert (again.dtype, again.shape, again.requires_grad, again.grad_fn) == \
        (first.dtype, first.shape, False, None)


def test_operands_that_need_autograd_or_forward_mode_take_the_general_path():
    x, y = lg.ones(3), lg.full((3,), 2.0)
    x * y
    w = lg.ones(3, requires_grad=True)
    out = w * y
    assert out.grad_fn is not None and out.grad_fn.name() == "MulBackward0"
    (g,) = lg.autograd.grad(out.sum(), [w])
    assert g.tolist() == [2.0, 2.0, 2.0]
    with lg.no_grad():
        assert (w * y).grad_fn is None
    import llgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        d = fwAD.make_dual(x, lg.full((3,), 0.5))
        _, tangent = fwAD.unpack_dual(d * y)
        assert tangent.tolist() == [1.0, 1.0, 1.0]


def test_vmap_tracing_and_inference_mode():
    x, y = lg.ones(2, 3), lg.arange(3, dtype=lg.float32)
    x + y
    batched = lg.vmap(lambda a: a + y)(lg.ones(4, 3))
    assert batched.shape == (4, 3) and batched[1].tolist() == [1.0, 2.0, 3.0]
    cf = lg.compile(lambda a: a + y)
    assert cf(x).tolist() == (x + y).tolist() and not cf.graph_breaks
    with lg.inference_mode():
        z = x + y
    assert z.is_inference()
    assert not (x + y).is_inference()


def test_kernels_are_recorded_while_recording():
    x, y = lg.ones(4), lg.ones(4)
    x + y
    x.sum()
    with launch.record_kernels() as kernels:
        x + y
        x.sum()
    assert len(kernels) == 2


def test_errors_and_numpy_scalars_still_go_through_the_checks():
    a, b = lg.tensor([True, False]), lg.tensor([True, True])
    a & b
    with pytest.raises(RuntimeError, match="subtraction"):
        a - b
    x = lg.ones(2)
    x * 2.0
    half = x * np.float16(2)                 # a NumPy scalar: the general path
    assert half.dtype == lg.float32 and half.tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x + lg.ones(3)
    p = lg.nn.Parameter(lg.ones(2))
    assert (p * 2.0).grad_fn is not None     # a Parameter is not a plain tensor


def test_a_number_follows_the_default_dtype_after_it_changes():
    x = lg.ones(3, dtype=lg.int64)
    cf = lg.compile(lambda t: t * 2.5)
    for _ in range(2):
        assert (x * 2.5).dtype == lg.float32 and cf(x).dtype == lg.float32
    lg.set_default_dtype(lg.float64)
    try:
        assert (x * 2.5).dtype == lg.float64 and cf(x).dtype == lg.float64
        assert lg.exp(x).dtype == lg.float64
        assert x.sum().dtype == lg.int64
        assert "default dtype" in cf.recompiles[-1]
    finally:
        lg.set_default_dtype(lg.float32)
    assert (x * 2.5).dtype == lg.float32 and cf(x).dtype == lg.float32


def test_output_maker_builds_what_empty_builds():
    shape, strides = (2, 3), (3, 1)
    make = Tensor._empty_maker(shape, lg.float32, strides)
    a, b = make(), Tensor._empty(shape, lg.float32, strides)
    for k in Tensor.__slots__:
        if k.startswith("__") or k in ("_storage", "_ptr"):
            continue
        assert getattr(a, k) == getattr(b, k), k
    s, ref = a._storage, allocate_small(24)
    for k in ("_buffer", "nbytes", "version", "raw", "inference"):
        assert getattr(s, k) == getattr(ref, k), k
    assert s.owner is ref.owner and a._ptr == s.ptr and a._ptr % 64 == 0
    a.numpy()[:] = 7.0                       # the memory is the tensor's own
    assert a.tolist() == [[7.0] * 3] * 2
    with lg.inference_mode():
        assert make().is_inference() and make()._storage.inference
    big = Tensor._empty_maker((1000,), lg.float64, (1,))()
    assert big.shape == (1000,) and big._storage.nbytes == 8000
    # a block of its own (below BLOCK_MAX): the same storage as `allocate` makes
    ref = allocate(8000)
    s = big._storage
    for k in ("_buffer", "nbytes", "version", "raw", "inference"):
        assert getattr(s, k) == getattr(ref, k), k
    assert type(s.owner) is type(ref.owner) and s.ptr % 64 == 0
    assert 0 <= s.ptr - ctypes.addressof(s.owner) < 64
    big.numpy()[:] = np.arange(1000.0)
    assert big.tolist() == list(np.arange(1000.0)) and big.numpy().ctypes.data == s.ptr
    huge = Tensor._empty_maker((BLOCK_MAX + 1,), lg.uint8, (1,))()    # NumPy's block
    assert huge._storage.owner.__class__ is np.ndarray and huge._ptr % 64 == 0
