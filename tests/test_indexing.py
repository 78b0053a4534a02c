"""Indexing: getitem / setitem / getitem_backward and the gather primitives vs NumPy.

NumPy is the oracle. Where PyTorch and NumPy differ (an int next to an advanced index is a
basic `select` in PyTorch), `ref_getitem` applies ints first, which is PyTorch's reading;
a few rows also check against torch directly.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llgrad  # noqa: F401  (fills the registry)
from llgrad.eager import indexing as I
from llgrad.eager import views
from llgrad.ir import dtypes as dt
from llgrad.ir import registry
from llgrad.ir.registry import Group
from llgrad.ir.types import TensorType
from llgrad.tensor import Tensor

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "int64": np.int64, "bool": np.bool_}


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

def make(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) > 0.5)
    if dtype == "int64":
        return np.asarray(rng.integers(-50, 50, shape), dtype=np.int64)
    return np.asarray(rng.standard_normal(shape) * 4, dtype=DTYPES[dtype])


def T(a: np.ndarray) -> Tensor:
    """A tensor over a copy of `a`."""
    return Tensor._from_numpy(np.array(a))


def share(a: np.ndarray) -> Tensor:
    """A tensor over `a`'s own memory."""
    return Tensor._from_numpy(a)


def to_llgrad(index):
    """np.ndarray items -> llgrad tensors (lists stay lists)."""
    items = index if isinstance(index, tuple) else (index,)
    out = tuple(T(i) if isinstance(i, np.ndarray) else i for i in items)
    return out if isinstance(index, tuple) else out[0]


def _consumes(i) -> int:
    if i is None or isinstance(i, (bool, np.bool_)):
        return 0
    if isinstance(i, np.ndarray) and i.dtype == np.bool_:
        return i.ndim
    if isinstance(i, list) and np.asarray(i).dtype == np.bool_:
        return np.asarray(i).ndim
    return 1


def _is_int(i) -> bool:
    """Ints, and 0-d integer arrays/tensors, which PyTorch also reads as a `select`."""
    if isinstance(i, np.ndarray):
        return i.ndim == 0 and i.dtype.kind in "iu"
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def torch_reading(a: np.ndarray, index):
    """(view of `a` with the int indices applied, the remaining index) — PyTorch's order."""
    items = list(index if isinstance(index, tuple) else (index,))
    if Ellipsis in [i if i is Ellipsis else None for i in items]:
        e = next(k for k, i in enumerate(items) if i is Ellipsis)
        used = sum(_consumes(i) for i in items if i is not Ellipsis)
        items = items[:e] + [slice(None)] * (a.ndim - used) + items[e + 1:]
    rest, p = [], 0
    for i in items:
        if _is_int(i):
            a = a[(slice(None),) * p + (int(i), Ellipsis)]   # a view, even when 0-d
        else:
            rest.append(i)
            p += _consumes(i)
    return a, tuple(rest)


def ref_getitem(a: np.ndarray, index) -> np.ndarray:
    view, rest = torch_reading(a, index)
    return view[rest]


def check_get(a: np.ndarray, index, t: Tensor | None = None) -> Tensor:
    t = T(a) if t is None else t
    got = I.getitem(t, to_llgrad(index))
    want = ref_getitem(a, index)
    assert tuple(got.shape) == want.shape, (index, got.shape, want.shape)
    assert got.dtype is dt.from_numpy(a.dtype)
    np.testing.assert_array_equal(got._values(), want)
    return got


# --------------------------------------------------------------------------------------
# getitem: the table
# --------------------------------------------------------------------------------------

def _idx(*v):
    return np.array(v, dtype=np.int64)


INDEX_TABLE = [
    # (shape, index)
    ((5,), 2), ((5,), -1), ((5,), slice(1, 4)), ((5,), slice(None, None, 2)),
    ((5,), slice(-100, 100, 3)), ((5,), slice(4, 1)), ((5,), ...), ((5,), None),
    ((5,), ()), ((5,), [0, 4, -1, 2]), ((5,), _idx(3, 3, 0)), ((5,), []),
    ((5,), True), ((5,), False), ((5,), np.array([True, False, True, True, False])),
    ((5,), [True, False, False, False, True]), ((5,), (None, slice(1, None), None)),
    ((4, 6), (1, 2)), ((4, 6), (-1, slice(None, None, 2))), ((4, 6), (slice(1, 3), -2)),
    ((4, 6), (Ellipsis, 3)), ((4, 6), (None, Ellipsis, None)), ((4, 6), _idx(3, 0)),
    ((4, 6), (slice(None), _idx(5, 0, 5))), ((4, 6), (_idx(0, 1), _idx(2, 3))),
    ((4, 6), (_idx(0, 1)[:, None], _idx(2, 3, 4))), ((4, 6), (1, [0, 2])),
    ((4, 6), ([[0, 1], [2, 3]], slice(1, 5, 2))), ((4, 6), np.eye(4, 6, dtype=bool)),
    ((4, 6), (np.array([True, False, True, True]), slice(None, 3))),
    ((4, 6), (slice(None), np.array([True, False, True, True, False, True]))),
    ((4, 6), (_idx(1, 2), True)), ((4, 6), (None, _idx(1), None, _idx(0, 5))),
    ((4, 6), (np.array(2), slice(None))), ((4, 6), (True, 1)),
    ((3, 4, 5), (1, slice(None), [0, 4])), ((3, 4, 5), ([0, 2], slice(None), 1)),
    ((3, 4, 5), (_idx(0, 2), slice(1, 3), _idx(4, 0))), ((3, 4, 5), (Ellipsis, _idx(1, 1))),
    ((3, 4, 5), (slice(None), _idx(0, 3), _idx(4, 2))), ((3, 4, 5), (np.array(1), slice(None),
                                                                    _idx(2, 3))),
    ((3, 4, 5), (None, _idx(2), None, slice(None), _idx(0, 1, 2))),
    ((3, 4, 5), np.arange(60).reshape(3, 4, 5) % 7 == 0),
    ((3, 4, 5), (slice(None), np.arange(20).reshape(4, 5) % 3 == 0)),
    ((3, 4, 5), (_idx(2, 0), slice(None), np.array([True, False, False, True, False]))),
    ((2, 3, 4, 5), (1, slice(None), _idx(0, 3), slice(None, None, 2))),
    ((2, 3, 4, 5), (_idx(1, 0), slice(None), _idx(2, 3), _idx(4, 1))),
    ((2, 3, 4, 5), (Ellipsis, None, _idx(0, -1))), ((2, 3, 4, 5), (0, 1, 2, 3)),
    ((2, 3, 4, 5), (slice(None), 2, None, _idx(0, 0, 3), slice(1, 4))),
    ((2, 3, 4, 5), (_idx(-1), _idx(-3), _idx(-4), _idx(-5))),
    ((3, 0, 4), (slice(None), slice(None), _idx(1, 2))), ((3, 0, 4), _idx(2, 0)),
    ((), ()), ((), None), ((), ...), ((), True), ((), np.array(True)),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape,index", INDEX_TABLE,
                         ids=[f"{s}-{i!r:.40}" for s, i in INDEX_TABLE])
def test_getitem_table(dtype: str, shape, index) -> None:
    check_get(make(shape, dtype), index)


def test_advanced_positions_match_torch() -> None:
    torch = pytest.importorskip("torch")
    a = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    cases = [(0, slice(None), [0, 1]), ([0, 1], slice(None), 0), (slice(None), 1, [0, 2]),
             ([1], 0, slice(None), [2, 3]), (None, [0, 1], None, [1, 2]),
             (True, [0, 1]), (slice(None), [0, 2], 1, [3, 4])]
    for index in cases:
        want = torch.from_numpy(a)[index].numpy()
        got = I.getitem(T(a), index)
        assert tuple(got.shape) == want.shape, index
        np.testing.assert_array_equal(got._values(), want)
    # a 0-d integer tensor is an int (a select, so a view), unlike NumPy's 0-d arrays
    index_t = (torch.tensor(1), slice(None), torch.tensor([0, 2]))
    want = torch.from_numpy(a)[index_t].numpy()
    t = T(a)
    got = I.getitem(t, (T(np.array(1)), slice(None), T(np.array([0, 2]))))
    np.testing.assert_array_equal(got._values(), want)
    assert I.getitem(t, (slice(None), T(np.array(2))))._storage is t._storage


def test_int32_index_tensors() -> None:
    a = make((4, 5, 6), "float32")
    i32 = np.array([[3, -1], [0, 2]], dtype=np.int32)
    for index in [(i32,), (slice(None), i32[0], i32[1] + 1), (i32, slice(1, 3), i32)]:
        check_get(a, index)
        out_shape = ref_getitem(a, index).shape
        grad = make(out_shape, "float32", seed=3)
        got = I.getitem_backward(a.shape, dt.float32, to_llgrad(index), T(grad))
        np.testing.assert_array_equal(got._values(),
                                      ref_backward(a.shape, np.float32, index, grad))
    ref, t = a.copy(), T(a)
    ref[i32[0], 1] = -1.0
    I.setitem(t, (T(i32[0]), 1), -1.0)
    np.testing.assert_array_equal(t._values(), ref)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0"):
        I.getitem(T(a), T(np.array([4], np.int32)))


def test_numpy_array_index() -> None:
    a = make((4, 5), "float64")
    got = I.getitem(T(a), np.array([3, 1]))
    np.testing.assert_array_equal(got._values(), a[[3, 1]])
    got = I.getitem(T(a), (slice(None), np.array([[True, False, True, True, False]])[0]))
    np.testing.assert_array_equal(got._values(), a[:, [0, 2, 3]])


@pytest.mark.parametrize("npdtype", [np.complex64, np.complex128, np.int8, np.uint8,
                                     np.int16, np.int32])
def test_gather_and_put_move_any_dtype(npdtype) -> None:
    """Gather and same-dtype put move raw bits, so every element width works."""
    rng = np.random.default_rng(1)
    a = (rng.integers(0, 100, (4, 5)) + (1j * rng.integers(0, 9, (4, 5))
                                         if np.dtype(npdtype).kind == "c" else 0))
    a = np.asarray(a).astype(npdtype)
    for index in [([3, 0, 3],), (slice(None), [4, 1]), ([0, 2], [1, 1])]:
        check_get(a, index)
    ref, t = a.copy(), T(a)
    ref[[1, 3], 2:4] = a[0, :2]
    I.setitem(t, ([1, 3], slice(2, 4)), T(a[0, :2]))
    np.testing.assert_array_equal(t._values(), ref)


def test_bfloat16_gather_and_scatter() -> None:
    bits = np.array([0x3F80, 0x4000, 0x4040, 0xC080], np.uint16)        # 1, 2, 3, -4
    t = Tensor._from_numpy(bits.copy(), dt.bfloat16)
    got = I.getitem(t, [3, 0, 0])
    assert got.dtype is dt.bfloat16
    np.testing.assert_array_equal(got._values(), [-4.0, 1.0, 1.0])
    back = I.getitem_backward((4,), dt.bfloat16, [1, 1, 3], T(np.ones(3, np.float32)))
    np.testing.assert_array_equal(back._values(), [0, 2, 0, 1])


# --------------------------------------------------------------------------------------
# non-contiguous sources, views
# --------------------------------------------------------------------------------------

def _noncontig_sources():
    base = make((4, 6, 5), "float32", seed=3)
    t = T(base)
    yield views.permute(t, (2, 0, 1)), np.transpose(base, (2, 0, 1))
    yield views.slice_dims(t, (1, 0, 1), (4, 6, 5), (2, 3, 2)), base[1::2, ::3, 1::2]
    e = T(base[:, :1, :])
    yield views.expand(e, (4, 3, 5)), np.broadcast_to(base[:, :1, :], (4, 3, 5))
    yield views.select(t, 2, 3), base[:, :, 3]


@pytest.mark.parametrize("index", [
    (1,), (slice(None), 1), ([1, 0, 1],), (slice(None), [2, 0], slice(1, None)),
    ([0, 1], slice(None), [1, 0]), (Ellipsis, [-1]), (None, 0, [1, 1]),
], ids=repr)
def test_noncontiguous_sources(index) -> None:
    for t, a in _noncontig_sources():
        try:
            ref_getitem(a, index)
        except IndexError:                       # out of range for this source too
            with pytest.raises(IndexError):
                I.getitem(t, index)
            continue
        check_get(np.ascontiguousarray(a), index, t=t)


def test_noncontiguous_mask_and_index_tensors() -> None:
    a = make((5, 6), "float32")
    mask_base = make((6, 5), "bool", seed=9)
    mask = views.permute(T(mask_base), (1, 0))                     # strided mask
    got = I.getitem(T(a), mask)
    np.testing.assert_array_equal(got._values(), a[mask_base.T])
    idx_base = np.array([[0, 4], [1, 3], [2, 2]], dtype=np.int64)
    idx = views.permute(T(idx_base), (1, 0))                        # strided index
    got = I.getitem(T(a), (idx, slice(2, 5)))
    np.testing.assert_array_equal(got._values(), a[idx_base.T, 2:5])


def test_basic_getitem_is_a_view() -> None:
    a = make((4, 5, 6), "float32")
    t = share(a)
    for index in [(1,), (slice(1, 3), None, 2), (Ellipsis, slice(None, None, 2)), (),
                  (None,)]:
        v = I.getitem(t, index)
        assert v._storage is t._storage and v is not t
        I.setitem(v, (), 123.0) if v.ndim == 0 else I.setitem(v, ..., 123.0)
        assert np.all(ref_getitem(a, index) == 123.0)
        a[...] = 0.0
    # writes to the source show through the view, too
    v = I.getitem(t, (slice(None), 2))
    a[:, 2] = 7.0
    assert np.all(v._values() == 7.0)


def test_advanced_getitem_copies() -> None:
    a = make((4, 5), "float32")
    t = share(a)
    got = I.getitem(t, [0, 1])
    assert got._storage is not t._storage
    a[0, 0] = 99.0
    assert got._values()[0, 0] != 99.0


# --------------------------------------------------------------------------------------
# setitem
# --------------------------------------------------------------------------------------

SET_TABLE = [
    ((5,), 2, 7), ((5,), slice(1, 4), np.array([1, 2, 3])), ((5,), [0, 3], 2.5),
    ((5,), np.array([True, False, True, False, True]), np.array([9, 8, 7])),
    ((4, 6), (1,), np.arange(6)), ((4, 6), (slice(None), 2), np.arange(4)[:, None][:, 0]),
    ((4, 6), (slice(1, 3), slice(None, None, 2)), np.array([[1], [2]])),
    ((4, 6), (_idx(0, 3), slice(None)), np.arange(6)), ((4, 6), (_idx(0, 3), _idx(5, 0)), 1),
    ((4, 6), (slice(None), [1, 4]), np.array([[1, 2]])),
    ((4, 6), np.arange(24).reshape(4, 6) % 5 == 0, -3.75),
    ((4, 6), (None, 1), np.ones((1, 1, 6))),
    ((3, 4, 5), (1, slice(None), [0, 4]), np.array([5.5, 6.5])),
    ((3, 4, 5), ([0, 2], slice(None), [1, 3]), np.arange(4)),
    ((3, 4, 5), (Ellipsis, _idx(2)), np.zeros((3, 4, 1))),
    ((2, 3, 4, 5), (_idx(1, 0), 1, slice(None), _idx(4, 2)), np.arange(8).reshape(2, 4)),
    ((2, 3, 4, 5), (slice(None), True, 0), 3),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "bool"])
@pytest.mark.parametrize("shape,index,value", SET_TABLE,
                         ids=[f"{s}-{i!r:.30}" for s, i, _ in SET_TABLE])
def test_setitem_table(dtype: str, shape, index, value) -> None:
    a = make(shape, dtype)
    ref = a.copy()
    view, rest = torch_reading(ref, index)
    vnp = np.asarray(value)
    view[rest] = vnp.astype(ref.dtype) if vnp.dtype.kind == "f" and ref.dtype.kind in "iu" \
        else vnp
    t = T(a)
    v0 = t._version
    val = T(vnp) if isinstance(value, np.ndarray) else value
    I.setitem(t, to_llgrad(index), val)
    np.testing.assert_array_equal(t._values(), ref)
    assert t._version == v0 + 1


def test_setitem_casts_value_dtype() -> None:
    for src, dst in [("float64", "float16"), ("int64", "float32"), ("float32", "int64"),
                     ("bool", "float32"), ("float32", "bool")]:
        a = make((6, 4), dst)
        v = make((3, 4), src, seed=5)
        if src.startswith("float") and dst == "int64":
            v = np.trunc(v)
        ref = a.copy()
        ref[[0, 2, 5]] = v
        t = T(a)
        I.setitem(t, [0, 2, 5], T(v))
        np.testing.assert_array_equal(t._values(), ref, err_msg=f"{src}->{dst}")
        ref[1:3] = v[:2]
        I.setitem(t, slice(1, 3), T(v[:2]))
        np.testing.assert_array_equal(t._values(), ref, err_msg=f"{src}->{dst} basic")


def test_setitem_noncontiguous_destination_and_aliasing_value() -> None:
    base = make((6, 5), "float32")
    t = share(base)
    tv = views.permute(t, (1, 0))                        # (5, 6), strided
    ref = base.copy()
    ref.T[[0, 4], 1:4] = 11.0
    I.setitem(tv, ([0, 4], slice(1, 4)), 11.0)
    np.testing.assert_array_equal(base, ref)
    # value read from the tensor being written: a reversed copy of row 0
    ref[[0, 1, 2]] = ref[[2, 1, 0]].copy()
    I.setitem(t, [0, 1, 2], I.getitem(t, [2, 1, 0]))
    np.testing.assert_array_equal(base, ref)
    ref[1:4] = ref[0:3].copy()
    I.setitem(t, slice(1, 4), I.getitem(t, slice(0, 3)))   # overlapping views
    np.testing.assert_array_equal(base, ref)


def test_setitem_index_read_from_the_destination() -> None:
    a = np.array([2, 0, 1, 3], np.int64)
    t = share(a)
    I.setitem(t, I.getitem(t, slice(0, 3)), 7)       # the index is a view of t itself
    np.testing.assert_array_equal(a, [7, 7, 7, 3])
    b = np.array([3, 0, 1, 2, 9], np.int64)
    t = share(b)
    I.setitem(t, I.getitem(t, slice(0, 4)), T(np.array([10, 11, 12, 13])))
    np.testing.assert_array_equal(b, [11, 12, 13, 10, 9])


def test_setitem_duplicate_indices_last_write_wins() -> None:
    a = np.zeros(4, np.float32)
    t = share(a)
    I.setitem(t, [1, 1, 3, 1], T(np.array([1.0, 2.0, 3.0, 4.0], np.float32)))
    np.testing.assert_array_equal(a, [0, 4, 0, 3])


def test_setitem_errors() -> None:
    a = make((3, 4), "float32")
    t = T(a)
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[3\]"):
        I.setitem(t, [0, 1], T(np.ones(3, np.float32)))
    with pytest.raises(RuntimeError, match=r"\[5\]"):
        I.setitem(t, (slice(None), 0), T(np.ones(5, np.float32)))
    with pytest.raises(TypeError, match="setitem: can only assign"):
        I.setitem(t, 0, "x")
    v = t._version
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        I.setitem(t, [0, 3], 1.0)
    assert t._version == v + 1            # a failed put still counts as a write


# --------------------------------------------------------------------------------------
# gradients: getitem_backward vs np.add.at
# --------------------------------------------------------------------------------------

def ref_backward(shape, dtype, index, grad: np.ndarray) -> np.ndarray:
    """Scatter-add `grad` through the positions ref_getitem reads (np.add.at)."""
    n = int(np.prod(shape))
    positions = ref_getitem(np.arange(n).reshape(shape), index)
    out = np.zeros(n, dtype=grad.dtype)
    np.add.at(out, positions.reshape(-1), grad.reshape(-1))
    return out.reshape(shape).astype(dtype)


BACKWARD_TABLE = [
    ((5,), [1, 1, 1, 4]), ((5,), slice(1, None, 2)), ((5,), np.array([2, -3, 2])),
    ((4, 6), (slice(None), [0, 0, 5])), ((4, 6), ([[1, 1], [2, 1]], slice(2, 4))),
    ((4, 6), np.arange(24).reshape(4, 6) % 4 == 1), ((4, 6), (1, [2, 2, 2])),
    ((3, 4, 5), (_idx(0, 0, 2), slice(None), _idx(1, 1, 1))), ((3, 4, 5), (None, 1, True)),
    ((2, 3, 4, 5), (Ellipsis, _idx(3, 3), None)), ((2, 3, 4, 5), (1, 2)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape,index", BACKWARD_TABLE,
                         ids=[f"{s}-{i!r:.30}" for s, i in BACKWARD_TABLE])
def test_getitem_backward(dtype: str, shape, index) -> None:
    out_shape = ref_getitem(np.zeros(shape), index).shape
    grad = make(out_shape, dtype, seed=11)
    got = I.getitem_backward(shape, dt.from_name(dtype), to_llgrad(index), T(grad))
    want = ref_backward(shape, DTYPES[dtype], index, grad)
    assert got.dtype is dt.from_name(dtype) and tuple(got.shape) == shape
    np.testing.assert_array_equal(got._values(), want)


def test_getitem_backward_grad_shape_checked_and_cast() -> None:
    with pytest.raises(RuntimeError, match=r"grad of shape \[3\] does not match"):
        I.getitem_backward((4,), dt.float32, [0, 1], T(np.ones(3, np.float32)))
    got = I.getitem_backward((4,), dt.float16, [0, 0], T(np.ones(2, np.float64)))
    np.testing.assert_array_equal(got._values(), np.array([2, 0, 0, 0], np.float16))


def test_linear_index_and_gather_reproduce_getitem() -> None:
    a = make((3, 4, 5), "float32")
    for index in [(1, slice(None), [0, 4]), (slice(None, None, 2), slice(1, 3), 2),
                  ([0, 2], slice(None), [1, 3]), (a > 1.0,), (None, Ellipsis, _idx(-1))]:
        lin = I.linear_index(a.shape, to_llgrad(index))
        assert lin.dtype is dt.int64
        want = ref_getitem(np.arange(a.size).reshape(a.shape), index)
        np.testing.assert_array_equal(lin._values(), want)
        np.testing.assert_array_equal(I.gather(T(a), lin)._values(), ref_getitem(a, index))
        grad = make(want.shape, "float32", seed=2)
        via_linear = I.index_add_linear(a.shape, dt.float32, lin, T(grad))
        via_index = I.getitem_backward(a.shape, dt.float32, to_llgrad(index), T(grad))
        np.testing.assert_array_equal(via_linear._values(), via_index._values())


# --------------------------------------------------------------------------------------
# the linear primitives and their registry entries
# --------------------------------------------------------------------------------------

def test_registry_entries() -> None:
    names = {"gather": "IndexBackward0", "scatter_add": "IndexPutBackward0",
             "index_put": "IndexPutBackward0", "nonzero": None}
    for name, bw in names.items():
        op = registry.get(name)
        assert op.group is Group.INDEX and op.backward_name == bw
        assert (op.vjp is None) == (name == "nonzero")      # the linear ops are differentiable
    f32, i64 = TensorType(dt.float32, (4, 5)), TensorType(dt.int64, (2, 3))
    assert registry.get("gather").infer((f32, i64)) == TensorType(dt.float32, (2, 3))
    src = TensorType(dt.float32, (3,))
    assert registry.get("scatter_add").infer((f32, i64, src)) == f32
    with pytest.raises(TypeError, match="int64"):
        registry.get("gather").infer((f32, TensorType(dt.int32, (2,))))
    with pytest.raises(TypeError, match="share one dtype"):
        registry.get("index_put").infer((f32, i64, TensorType(dt.float64, (2, 3))))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        registry.get("scatter_add").infer((f32, i64, TensorType(dt.float32, (4,))))
    with pytest.raises(ValueError, match="size="):
        registry.get("nonzero").infer((f32,), size=None)
    assert registry.get("nonzero").infer((f32,), size=7) == TensorType(dt.int64, (7, 2))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_linear_primitives_vs_reference(dtype: str) -> None:
    x = make((3, 5), dtype)
    index = np.array([[0, 14, -1], [7, 7, 3]], dtype=np.int64)
    ops = {name: registry.get(name).reference for name in ("gather", "scatter_add",
                                                             "index_put")}
    np.testing.assert_array_equal(I.gather(T(x), T(index))._values(), ops["gather"](x, index))
    src = make(index.shape, dtype, seed=4)
    if dtype != "bool":
        got = I.scatter_add(T(x), T(index), T(src))
        np.testing.assert_array_equal(got._values(), ops["scatter_add"](x, index, src))
    index_unique = np.array([[0, 14, -2], [7, 8, 3]], dtype=np.int64)
    got = I.index_put(T(x), T(index_unique), T(src))
    np.testing.assert_array_equal(got._values(), ops["index_put"](x, index_unique, src))
    # a non-contiguous x is addressed in row-major order
    xt = views.permute(T(x), (1, 0))
    np.testing.assert_array_equal(I.gather(xt, T(index))._values(),
                                  ops["gather"](x.T, index))


def test_scatter_add_duplicates_accumulate() -> None:
    base = np.zeros(5, np.float32)
    index = np.array([1, 1, 1, 4, 1, 0], dtype=np.int64)
    src = np.arange(1, 7, dtype=np.float32)
    got = I.scatter_add(T(base), T(index), T(src))
    np.testing.assert_array_equal(got._values(), [6, 1 + 2 + 3 + 5, 0, 0, 4])
    assert np.all(base == 0)                       # functional: base is untouched
    # float16 rounds after every step, exactly like np.add.at in float16
    h = np.full(300, 0.1, np.float16)
    got = I.scatter_add(T(np.zeros(1, np.float16)), T(np.zeros(300, np.int64)), T(h))
    want = np.zeros(1, np.float16)
    np.add.at(want, np.zeros(300, np.int64), h)
    np.testing.assert_array_equal(got._values(), want)
    # a broadcast src
    got = I.scatter_add(T(np.zeros(3, np.int64)), T(np.array([2, 2, 0])), T(np.array(5)))
    np.testing.assert_array_equal(got._values(), [5, 0, 10])


def test_linear_primitive_errors() -> None:
    x = T(np.arange(6.0))
    with pytest.raises(TypeError, match="int64"):
        I.gather(x, T(np.array([0], np.int32)))
    with pytest.raises(TypeError, match="must be an int64 Tensor"):
        I.gather(x, [0, 1])
    with pytest.raises(IndexError, match="gather: index 6 is out of bounds for dimension 0 "
                                         "with size 6"):
        I.gather(x, T(np.array([0, 6])))
    with pytest.raises(IndexError, match="scatter_add: index -7 is out of bounds"):
        I.scatter_add(x, T(np.array([-7])), T(np.array([1.0])))
    with pytest.raises(IndexError, match="index_put: index 100"):
        I.index_put(x, T(np.array([100])), T(np.array([1.0])))
    with pytest.raises(TypeError, match="share one dtype"):
        I.scatter_add(x, T(np.array([0])), T(np.array([1], np.float32)))


# --------------------------------------------------------------------------------------
# nonzero
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 4), (2, 0, 3)])
def test_nonzero(dtype: str, shape) -> None:
    a = make(shape, dtype)
    if dtype != "bool" and a.size:
        a.reshape(-1)[::3] = 0
    got = I.nonzero(T(a))
    want = np.argwhere(a)
    assert got.dtype is dt.int64 and tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got._values(), want)


def test_nonzero_nan_negative_zero_strided_and_size() -> None:
    a = np.array([[0.0, -0.0, np.nan], [1.0, 0.0, -np.inf]], np.float32)
    np.testing.assert_array_equal(I.nonzero(T(a))._values(), np.argwhere(a))
    at = views.permute(T(a), (1, 0))
    np.testing.assert_array_equal(I.nonzero(at)._values(), np.argwhere(a.T))
    ref = registry.get("nonzero").reference
    for size in (0, 2, 3, 6):
        got = I.nonzero(T(a), size=size)
        np.testing.assert_array_equal(got._values(), ref(a, size))
    with pytest.raises(TypeError, match="nonzero: expected a Tensor"):
        I.nonzero(a)


# --------------------------------------------------------------------------------------
# errors: wrong index types, bounds (never a crash)
# --------------------------------------------------------------------------------------

def test_index_type_errors() -> None:
    t = T(make((2, 3), "float32"))
    cases = [("a", IndexError, r"got str 'a'.*shape \[2, 3\]"),
             (1.5, IndexError, r"got float 1.5"),
             (T(np.array([1.0])), IndexError, r"long, int or bool tensors.*float64 tensor of "
                                               r"shape \[1\].*\[2, 3\]"),
             (T(np.array([1], np.int16)), IndexError, r"int16"),
             ([0.5, 1.0], IndexError, r"got list"),
             ([[0, 1], [1]], IndexError, r"rectangular"),
             ({"a": 1}, IndexError, r"got dict"),
             ((0, 0, 0), IndexError, r"^too many indices for tensor of dimension 2"),
             ((..., 0, ...), IndexError, r"single ellipsis"),
             ((np.ones((2, 3, 1), bool),), IndexError, r"too many indices"),
             (slice(None, None, -1), ValueError, r"step must be greater than zero$"),
             (slice(None, None, 0), ValueError, r"step cannot be zero"),
             (np.array([True, False, True]), IndexError,
              r"shape of the mask \[3\] at index 0 does not match the shape of the indexed "
              r"tensor \[2, 3\] at index 0"),
             ((slice(None), np.array([True, False])), IndexError,
              r"mask \[2\] at index 1 .* tensor \[2, 3\] at index 1"),
             (([0, 1], [0, 1, 2]), IndexError, r"shapes \[2\], \[3\]")]
    for index, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            I.getitem(t, index)


@pytest.mark.parametrize("index,dim,bad,size", [
    (5, 0, 5, 4), (-5, 0, -5, 4), ((0, 6), 1, 6, 6), ((slice(None), -7), 1, -7, 6),
    ([0, 4], 0, 4, 4), ((slice(None), [1, 2, 6]), 1, 6, 6), ((0, slice(None), [0, 9]), 2, 9, 5),
    (([0, 1], slice(None), [0, -6]), 2, -6, 5), ((None, [2], None, [-7]), 1, -7, 6),
    ((_idx(1, 2), _idx(9, 1)), 1, 9, 6),
])
def test_out_of_bounds(index, dim, bad, size) -> None:
    t = T(make((4, 6, 5), "float32"))
    msg = f"index {bad} is out of bounds for dimension {dim} with size {size}"
    with pytest.raises(IndexError, match=msg):
        I.getitem(t, to_llgrad(index))
    with pytest.raises(IndexError, match=msg):
        I.setitem(t, to_llgrad(index), 0.0)
    with pytest.raises(IndexError, match=msg):
        I.linear_index((4, 6, 5), to_llgrad(index))


def test_out_of_bounds_huge_and_empty_results() -> None:
    t = T(make((4, 6), "float32"))
    big = np.array([0, 2**62, -2**62, 2**63 - 1, -2**63], dtype=np.int64)
    with pytest.raises(IndexError, match=f"index {2**62} is out of bounds"):
        I.getitem(t, big)
    with pytest.raises(IndexError, match="out of bounds"):
        I.getitem_backward((4, 6), dt.float32, T(big), T(np.ones((5, 6), np.float32)))
    # the result is empty but the index is still checked (as NumPy does)
    empty_rows = T(np.zeros((5, 0), np.float32))
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 5"):
        I.getitem(empty_rows, [7])
    assert tuple(I.getitem(empty_rows, [4, -5]).shape) == (2, 0)
    with pytest.raises(IndexError, match="index 0 is out of bounds for dimension 0 with size 0"):
        I.getitem(T(np.zeros((0, 3), np.float32)), [0])


def test_large_gather_runs_in_parallel_and_checks_bounds() -> None:
    n = 1 << 18
    a = np.arange(n, dtype=np.float32)
    rng = np.random.default_rng(0)
    idx = rng.integers(-n, n, 2 * n)
    np.testing.assert_array_equal(I.getitem(T(a), idx)._values(), a[idx])
    idx[-3] = n + 5
    with pytest.raises(IndexError, match=f"index {n + 5} is out of bounds"):
        I.getitem(T(a), idx)
    # row gathers check each row's index once (the hoisted kernel), also when split
    rows = a.reshape(512, 512)
    ridx = rng.integers(-512, 512, 700)
    np.testing.assert_array_equal(I.getitem(T(rows), ridx)._values(), rows[ridx])
    np.testing.assert_array_equal(I.getitem(T(rows), (ridx[:300], slice(7, 400)))._values(),
                                  rows[ridx[:300], 7:400])
    ridx[650] = -513
    with pytest.raises(IndexError, match="index -513 is out of bounds for dimension 0 with "
                                         "size 512"):
        I.getitem(T(rows), ridx)


# --------------------------------------------------------------------------------------
# hypothesis: random index expressions on random shapes vs NumPy
# --------------------------------------------------------------------------------------

@st.composite
def index_expressions(draw):
    """A random shape and a random valid-rank index expression for it.

    Items after an `...` land on dimensions that depend on what follows, so they use the
    smallest dimension size as their bound and never are masks.
    """
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    smallest = min(shape, default=1)
    items: list = []
    dim, after_ellipsis = 0, False
    for _ in range(draw(st.integers(0, 5))):
        choices = ["none", "bool"]
        if dim < ndim:
            choices += ["int", "slice", "array", "list"] + ([] if after_ellipsis else ["mask"])
        if not after_ellipsis:
            choices.append("ellipsis")
        kind = draw(st.sampled_from(choices))
        n = smallest if after_ellipsis else (shape[dim] if dim < ndim else 1)
        if kind == "none":
            items.append(None)
        elif kind == "bool":
            items.append(draw(st.booleans()))
        elif kind == "ellipsis":
            items.append(Ellipsis)
            after_ellipsis = True
        elif kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-n - 1, n + 1))
            stop = draw(st.none() | st.integers(-n - 1, n + 1))
            items.append(slice(start, stop, draw(st.none() | st.integers(1, 3))))
        elif kind in ("array", "list"):
            ishape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
            count = int(np.prod(ishape))
            vals = draw(st.lists(st.integers(-n, n - 1), min_size=count, max_size=count))
            arr = np.array(vals, dtype=np.int64).reshape(ishape)
            items.append(arr if kind == "array" else arr.tolist())
        else:
            m = draw(st.integers(1, ndim - dim))
            count = int(np.prod(shape[dim:dim + m]))
            bits = draw(st.lists(st.booleans(), min_size=count, max_size=count))
            items.append(np.array(bits, dtype=bool).reshape(shape[dim:dim + m]))
            dim += m - 1
        if kind in ("int", "slice", "array", "list", "mask"):
            dim += 1
    return shape, tuple(items)


def _broadcastable(shape, index) -> bool:
    """Keep expressions whose advanced indices broadcast (the rest is an error test)."""
    try:
        ref_getitem(np.zeros(shape), index)
        return True
    except IndexError:
        return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=index_expressions(), dtype=st.sampled_from(["float32", "int64", "bool"]),
       seed=st.integers(0, 3))
def test_hypothesis_getitem_setitem_backward(case, dtype, seed) -> None:
    shape, index = case
    a = make(shape, dtype, seed)
    if not _broadcastable(shape, index):
        with pytest.raises(IndexError):
            I.getitem(T(a), to_llgrad(index))
        return
    got = check_get(a, index)
    # setitem writes exactly where getitem reads
    values = make(tuple(got.shape), dtype, seed + 1)
    ref = a.copy()
    view, rest = torch_reading(ref, index)
    view[rest] = values
    t = T(a)
    I.setitem(t, to_llgrad(index), T(values))
    np.testing.assert_array_equal(t._values(), ref)
    if dtype == "float32":
        grad = make(tuple(got.shape), "float32", seed + 2)
        back = I.getitem_backward(shape, dt.float32, to_llgrad(index), T(grad))
        np.testing.assert_array_equal(back._values(),
                                      ref_backward(shape, np.float32, index, grad))
