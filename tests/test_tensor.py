"""Tensor creation, conversions, dtypes, printing, DLPack and views' version counters."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.ir import dtypes as dt

from conftest import values


def test_tensor_infers_dtypes_like_torch():
    assert lg.tensor([1, 2]).dtype is dt.int64
    assert lg.tensor([1.0, 2]).dtype is dt.float32
    assert lg.tensor([True]).dtype is dt.bool_
    assert lg.tensor(np.ones(2, dtype=np.float64)).dtype is dt.float64
    assert lg.tensor(np.ones(2, dtype=np.int32)).dtype is dt.int32
    assert lg.tensor(3.5).shape == ()


def test_creation_functions():
    np.testing.assert_array_equal(values(lg.zeros(2, 3)), np.zeros((2, 3)))
    np.testing.assert_array_equal(values(lg.ones((2, 3), dtype=lg.int32)), np.ones((2, 3)))
    np.testing.assert_array_equal(values(lg.full((2,), 7)), [7, 7])
    assert lg.full((2,), 7).dtype is dt.int64
    assert lg.full((2,), 7.0).dtype is dt.float32
    np.testing.assert_array_equal(values(lg.eye(3, 4)), np.eye(3, 4))
    np.testing.assert_array_equal(values(lg.arange(5)), np.arange(5))
    np.testing.assert_allclose(values(lg.arange(0, 1, 0.25)), np.arange(0, 1, 0.25))
    np.testing.assert_allclose(values(lg.arange(10, 0, -3)), np.arange(10, 0, -3))
    np.testing.assert_allclose(values(lg.linspace(0, 1, 5)), np.linspace(0, 1, 5), rtol=1e-6)
    x = lg.ones(2, 3, dtype=lg.float64)
    assert lg.zeros_like(x).dtype is dt.float64 and lg.ones_like(x).shape == (2, 3)
    assert lg.empty(4).shape == (4,)
    assert lg.full_like(x, 2).dtype is dt.float64


def test_random_is_seeded_and_distributed():
    lg.manual_seed(42)
    a = values(lg.rand(100000))
    lg.manual_seed(42)
    b = values(lg.rand(100000))
    np.testing.assert_array_equal(a, b)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.01
    n = values(lg.randn(200000))
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    assert lg.randn(3, dtype=lg.float64).dtype is dt.float64
    c = values(lg.rand(1000))
    assert not np.array_equal(c, a[:1000])         # the counter moves on
    r = values(lg.randint(3, 7, (1000,)))
    assert r.min() == 3 and r.max() == 6


def test_random_matches_its_numpy_reference():
    from llgrad.ir import registry
    gen = lg.Generator(7)
    key, counter = gen.take(0)
    lg.default_generator.set_state(gen.get_state())
    got = values(lg.randn(1000))
    want = registry.get("normal").reference(key, counter, dt.float32, (1000,))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_numpy_item_tolist():
    x = lg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert lg.tensor(2.5).item() == 2.5
    n = x.numpy()
    n[0, 0] = 10
    assert x[0, 0].item() == 10                      # numpy() shares memory
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        x.item()
    with pytest.raises(RuntimeError, match="requires grad"):
        lg.ones(2, requires_grad=True).numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16",
                                   "int8", "uint8", "bool", "complex64", "bfloat16"])
def test_item_is_numpys_value_of_the_element(dtype):
    """`item()` reads the element by address: the Python number NumPy gives for its bits
    (every bit pattern of the small dtypes, extremes, NaN and signed zeros of the wide
    ones), from a view at an offset too."""
    rng = np.random.default_rng(3)
    d = getattr(lg, dtype)
    if dtype == "bfloat16":
        bits = rng.integers(0, 1 << 16, 64, dtype=np.uint16)
        t = lg.zeros(64, dtype=d)
        t._numpy_view()[...] = bits
        want = (bits.astype(np.uint32) << 16).view(np.float32).tolist()
    else:
        npd = np.dtype(dtype)
        if npd.itemsize <= 2 and npd.kind != "b":
            raw = np.arange(1 << (8 * npd.itemsize), dtype=np.uint64).astype(f"u{npd.itemsize}")
        else:
            raw = rng.integers(0, 256, 64 * npd.itemsize, dtype=np.uint8)
            if npd.kind == "b":
                raw = raw % 2
        a = raw.view(npd).copy()
        if npd.kind in "fc":
            a[:4] = np.array([np.nan, -0.0, np.inf, np.finfo(npd).max]).astype(npd)
        elif npd.kind in "iu":
            a[:2] = [np.iinfo(npd).min, np.iinfo(npd).max]
        t = lg.tensor(a)
        want = a.tolist()
    for i in range(len(want)):
        got = t[i].item()
        assert type(got) is type(want[i])
        assert repr(got) == repr(want[i]) and (got == want[i] or got != got)


def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = lg.from_numpy(a)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    s = lg.from_numpy(a[:, ::2])
    assert s.stride() == (3, 2)
    np.testing.assert_array_equal(values(s), a[:, ::2])


def test_dlpack_round_trips_without_copy():
    x = lg.arange(6, dtype=lg.float32).reshape(2, 3)
    n = np.from_dlpack(x)
    assert n.__array_interface__["data"][0] == x.data_ptr()
    y = lg.from_dlpack(n)
    assert y.data_ptr() == x.data_ptr()
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(x)
    assert t.data_ptr() == x.data_ptr()
    z = lg.from_dlpack(torch.arange(4.0))
    np.testing.assert_array_equal(values(z), [0, 1, 2, 3])


def test_array_protocol():
    x = lg.tensor([1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])
    assert np.asarray(x, dtype=np.float64).dtype == np.float64


def test_repr_matches_torch_examples():
    x = lg.ones(2, 2, requires_grad=True)
    assert repr(x) == "tensor([[1., 1.],\n        [1., 1.]], requires_grad=True)"
    assert repr(lg.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(lg.tensor([1.5], dtype=lg.float64)) == "tensor([1.5000], dtype=llgrad.float64)"
    assert repr(lg.ones(2).shape) == "llgrad.Size([2])"


def test_bfloat16_and_float16_storage():
    x = lg.tensor([1.0, 1.00390625, 3.14159], dtype=lg.bfloat16)
    assert x.element_size() == 2
    np.testing.assert_allclose(values(x), [1.0, 1.0, 3.140625])
    h = lg.tensor([1.0, 2.0], dtype=lg.float16)
    assert h.numpy().dtype == np.float16
    with pytest.raises(TypeError, match="BFloat16"):
        x.numpy()
    assert x.float().dtype is dt.float32


def test_version_counter_shared_by_views():
    x = lg.zeros(4)
    v = x[1:3]
    assert x._version == v._version == 0
    v.add_(1)
    assert x._version == 1 and v._version == 1
    x[0] = 5
    assert v._version == 2
    np.testing.assert_array_equal(values(x), [5, 1, 1, 0])


def test_size_and_dims():
    x = lg.ones(2, 3, 4)
    assert x.size() == (2, 3, 4) and x.size(-1) == 4 and x.dim() == 3 and x.numel() == 24
    assert x.stride() == (12, 4, 1)
    with pytest.raises(IndexError):
        x.size(3)


def test_bad_creation_arguments():
    with pytest.raises(TypeError, match="zeros\\(\\) got unexpected keyword"):
        lg.zeros(2, color="red")
    with pytest.raises(TypeError, match="sizes must be integers"):
        lg.ones(2.5)
    with pytest.raises(RuntimeError, match="negative dimension"):
        lg.zeros(-1)


def test_pickle_round_trip():
    import pickle
    x = lg.tensor([[1.0, 2.0]], dtype=lg.bfloat16)
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype is dt.bfloat16 and y.tolist() == x.tolist()


def test_array_protocol_honours_copy():
    """NumPy 2: copy=True copies (it used to share memory), copy=None shares when it can,
    copy=False refuses a conversion that needs a copy."""
    import pytest
    t = lg.ones(3)
    a = np.array(t, copy=True)
    a[0] = 5
    assert t.tolist() == [1.0, 1.0, 1.0]
    b = np.asarray(t)
    b[1] = 7
    assert t.tolist() == [1.0, 7.0, 1.0]
    assert np.shares_memory(np.array(t, copy=False), b)
    assert np.array(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="avoid copy"):
        np.array(t, dtype=np.float64, copy=False)
    with pytest.raises(ValueError, match="avoid copy"):
        np.array(lg.ones(2, dtype=lg.bfloat16), copy=False)
