"""Tensor's Python protocols, the Tensor API completions, index objects of every Python type,
torch-level utilities and `lg.testing`, each against torch."""
import copy
import math
import pickle
import warnings

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")


def outcome(T, expr):
    """What `expr` (Python source using `T` for the module and `np`) gives: a comparable
    value, or ("err", exception type)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = eval(expr, {"T": T, "np": np, "math": math})
    except Exception as e:                                        # noqa: BLE001
        return ("err", RuntimeError if isinstance(e, RuntimeError) else type(e))
    if isinstance(r, (torch.Tensor, lg.Tensor)):
        vals = r.float().tolist() if str(r.dtype).endswith("bfloat16") else r.tolist()
        return ("tensor", str(r.dtype).split(".")[-1], tuple(r.shape), tuple(r.stride()), vals)
    if isinstance(r, (torch.dtype, lg.dtype)):
        return ("dtype", str(r).split(".")[-1])
    if isinstance(r, (torch.Size, lg.Size)):
        return ("size", tuple(r))
    if isinstance(r, str):
        return ("str", r.replace("torch.", "llgrad."))
    return ("value", r)


def check(expr):
    t, l = outcome(torch, expr), outcome(lg, expr)
    if t[0] == "value" and isinstance(t[1], float) and math.isnan(t[1]):
        assert l[0] == "value" and math.isnan(l[1]), (expr, t, l)
        return
    assert t == l, (expr, t, l)


PROTOCOLS = """
bool(T.tensor([1., 2.]))
bool(T.tensor([]))
bool(T.tensor([0.]))
bool(T.tensor([[3]]))
bool(T.tensor(float('nan')))
int(T.tensor([1., 2.]))
int(T.tensor([2.7]))
int(T.tensor([-2.7]))
int(T.tensor(1+2j))
int(T.tensor(3+0j))
float(T.tensor([[3]]))
float(T.tensor([1, 2]))
float(T.tensor(1+2j))
float(T.tensor(True))
complex(T.tensor(2.5))
complex(T.tensor([1+2j]))
complex(T.tensor([1, 2]))
complex(T.tensor(3))
T.tensor(3).__index__()
T.tensor([3]).__index__()
T.tensor(3.0).__index__()
T.tensor(True).__index__()
T.tensor([1,2]).__index__()
[10,20,30][T.tensor(1)]
[10,20,30][T.tensor([1])]
range(10)[T.tensor(3)]
format(T.tensor(3.14159), '.2f')
format(T.tensor(3), '05d')
format(T.tensor([1.5]), '.2f')
format(T.tensor(2.5), '')
f'{T.tensor(2.5)}'
'{:>8}'.format(T.tensor(7))
format(T.tensor(True), '')
format(T.tensor(1+2j), '.1f')
format(T.tensor(2.5, requires_grad=True), '.3f')
len(T.tensor(3))
len(T.zeros(4, 2))
list(T.tensor(3))
[x.tolist() for x in T.arange(6).reshape(3,2)]
len(list(reversed(T.arange(4))))
reversed(T.arange(4))
reversed(T.tensor(5))
reversed(T.arange(6).reshape(3,2))
3 in T.arange(5)
7 in T.arange(5)
T.tensor([[0, 1]]) in T.arange(6).reshape(3, 2)
2.0 in T.arange(5)
'a' in T.arange(5)
None in T.arange(5)
True in T.tensor([0, 1])
T.tensor([1, 2]).__array_priority__
np.asarray(T.tensor([1, 2], dtype=T.int32)).dtype.name
np.asarray(T.tensor([1., 2.]), dtype=np.float64).tolist()
np.array(T.tensor([[1.5]])).tolist()
""".strip().splitlines()


@pytest.mark.parametrize("expr", PROTOCOLS)
def test_protocols_match_torch(expr):
    check(expr)


def test_iter_gives_unbind_views():
    for T in (torch, lg):
        x = T.arange(6.0).reshape(3, 2).requires_grad_()
        rows = list(x)
        assert type(rows[0].grad_fn).__name__ == "UnbindBackward0"
        (rows[0] * 1 + rows[2] * 2).sum().backward()
        assert x.grad.tolist() == [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]


def test_deepcopy_as_torch():
    for T in (torch, lg):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        (x * 2).sum().backward()
        x.note = {"k": [1]}
        y = copy.deepcopy(x)
        assert y.requires_grad and y.is_leaf and y.grad.tolist() == [2.0, 2.0]
        assert y.grad is not x.grad and y.note == x.note and y.note is not x.note
        y.detach()[0] = 5.0
        assert x.tolist() == [1.0, 2.0]
        with pytest.raises(RuntimeError, match="graph leaves"):
            copy.deepcopy(x * 2)
        # views copied together keep sharing memory
        v = T.arange(4.0)
        w = v[1:]
        c, d = copy.deepcopy([v, w])
        d[0] = 100.0
        assert c.tolist() == [0.0, 100.0, 2.0, 3.0] and v.tolist() == [0.0, 1.0, 2.0, 3.0]
        assert d.stride() == w.stride() and d.storage_offset() == w.storage_offset()
    p = lg.nn.Parameter(lg.ones(2))
    q = copy.deepcopy(p)
    assert isinstance(q, lg.nn.Parameter) and q.requires_grad


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int64", "uint8", "bool",
                                   "complex64", "float16"])
def test_pickle_round_trip(dtype):
    d = getattr(lg, dtype)
    x = lg.arange(6).reshape(2, 3).to(d)[:, ::2]
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype is d and y.shape == x.shape and lg.equal(y, x)
    if dtype in ("float32", "float64"):
        z = lg.tensor([1.0, 2.0], dtype=d, requires_grad=True)
        z.tag = "w"
        (z * 2).sum().backward()
        r = pickle.loads(pickle.dumps(z))
        assert r.requires_grad and r.is_leaf and r.grad is None and r.tag == "w"
        t = pickle.loads(pickle.dumps(torch.tensor([1.0], requires_grad=True)))
        assert t.requires_grad and t.grad is None
    p = pickle.loads(pickle.dumps(lg.nn.Parameter(lg.ones(2))))
    assert isinstance(p, lg.nn.Parameter)


def test_array_wrap_and_priority():
    x = lg.tensor([1.0, 2.0])
    w = x.__array_wrap__(np.array([3.0, 4.0]))
    assert isinstance(w, lg.Tensor) and w.tolist() == [3.0, 4.0]
    assert x.__array_wrap__(np.array([True]), None, True) == np.True_
    assert type(np.float64(2.0) * x) is lg.Tensor      # the tensor's operator wins


# --------------------------------------------------------------------------------------
# Tensor API completions
# --------------------------------------------------------------------------------------

TENSOR_API = """
T.zeros(3).itemsize
T.zeros(3, dtype=T.float64).nbytes
T.zeros(4)[1:].nbytes
T.zeros(2,3).ndimension()
T.zeros(2,dtype=T.uint8).is_signed()
T.zeros(2,dtype=T.bool).is_signed()
T.zeros(2,dtype=T.int8).is_signed()
T.zeros(2,dtype=T.complex64).is_signed()
T.zeros(2).is_neg()
T.tensor([0.]).is_nonzero()
T.tensor([1,2]).is_nonzero()
T.zeros(2,3).is_same_size(T.zeros(2,3,dtype=T.int64))
T.zeros(2,3).is_same_size(T.zeros(3,2))
T.zeros(2).is_shared()
T.zeros(2).is_pinned()
T.zeros(2).is_sparse
T.zeros(2).is_quantized
T.zeros(2).is_mkldnn
T.zeros(2).is_nested
T.zeros(2).is_meta
T.zeros(2).is_cuda
T.zeros(2).is_cpu
T.zeros(2).output_nr
T.zeros(2).name
str(T.zeros(2).layout)
T.zeros(2).element_size()
T.zeros(2,3).new_empty((2,)).dtype
T.zeros(2,3).new_empty(2,3).shape
T.zeros(2,dtype=T.int32).new_empty(2,3).dtype
T.zeros(2).new_full((2,), 3)
T.zeros(2).new_full(2, 3)
T.zeros(2,dtype=T.int64).new_full((2,),2.5)
T.zeros(2,dtype=T.int64).new_full((2,),2.5, dtype=T.float64)
T.zeros(2).new_empty_strided((2,3),(1,2)).stride()
T.zeros(2).new_empty((2,), requires_grad=True).requires_grad
T.zeros(2, dtype=T.int64).new_full((2,), 1, requires_grad=True)
T.arange(3).apply_(lambda v: v*2.7)
T.zeros(2,dtype=T.uint8).apply_(lambda v: 300)
T.zeros(3, requires_grad=True).apply_(lambda v: v)
T.zeros(3).map_(T.tensor([1.,2,3]), lambda a,b: a+b)
T.zeros(3).map_(T.tensor([1.]), lambda a,b: a+b+1)
T.zeros(3).map_(T.tensor([1.,2]), lambda a,b: a+b)
T.zeros(3).map_(T.tensor([1,2,3]), lambda a,b: a+b)
T.ones(3).map2_(T.tensor([1.]), T.ones(3), lambda a,b,c: a+b+c)
T.arange(6.).resize_(2,2)
T.arange(4.).resize_(3,3).shape
T.arange(4.).resize_(3,3)[:1].tolist()
T.arange(4.).resize_as_(T.zeros(2,1))
T.zeros(3,requires_grad=True).resize_(2)
(T.zeros(3,requires_grad=True) * 2).resize_(3)
T.zeros(4,3)[:, 1].resize_(2)
T.arange(6.).resize_(2,3).is_contiguous()
T.tensor([True, False]).where(T.tensor([True, False]), T.tensor([False, True]))
T.arange(3.).where(T.tensor([True, False, True]), 7.)
T.zeros(3).is_set_to(T.zeros(3))
T.zeros(2,3).t().dim_order()
T.zeros(2,3,4,5).contiguous(memory_format=T.channels_last).dim_order()
T.zeros(2,1,3).dim_order()
T.zeros(2,1,3).dim_order(ambiguity_check=True)
T.zeros(3,4).expand(2,3,4).dim_order()
T.zeros(2,3)[:, ::2].dim_order()
T.zeros(2,3,4,5).contiguous(memory_format=T.channels_last).stride()
T.zeros(2,3,4).contiguous(memory_format=T.channels_last)
T.zeros(2,3,4,5).to(memory_format=T.channels_last).stride()
T.zeros(2,3,4,5).to(T.float64, memory_format=T.channels_last).stride()
T.zeros(2,3,4,5).is_contiguous(memory_format=T.channels_last)
T.zeros(2,3,4,5).contiguous(memory_format=T.channels_last).is_contiguous(memory_format=T.channels_last)
T.zeros(2,3,4,5).contiguous(memory_format=T.channels_last).is_contiguous()
T.zeros(2,3,4,5).contiguous(memory_format=T.preserve_format)
T.zeros(2,3).t().contiguous(memory_format=T.preserve_format).stride()
T.zeros(4,3)[:, ::2].contiguous(memory_format=T.preserve_format).stride()
T.zeros(2,3,4,5).permute(0,2,3,1).clone(memory_format=T.preserve_format).stride()
T.zeros(4,3)[:, ::2].clone(memory_format=T.preserve_format).stride()
T.zeros(2,3,4,5,6).contiguous(memory_format=T.channels_last_3d).stride()
T.zeros(2,3,4,5).clone(memory_format=T.channels_last).stride()
T.zeros(2,3).t().clone(memory_format=T.preserve_format).stride()
T.zeros(2,3).t().clone(memory_format=T.contiguous_format).stride()
T.zeros(2,3).t().contiguous().stride()
T.zeros(2, layout=T.strided)
T.zeros_like(T.zeros(2,3), memory_format=T.contiguous_format).stride()
T.tensor([1,2],dtype=T.uint8).untyped_storage().tolist()
T.tensor([1,2],dtype=T.int16).untyped_storage().tolist()
len(T.tensor([1,2],dtype=T.int16).untyped_storage())
T.tensor([1,2],dtype=T.int16).untyped_storage()[1]
T.tensor([1,2],dtype=T.int16).untyped_storage().element_size()
T.tensor([1,2],dtype=T.int16).untyped_storage().nbytes()
T.zeros(4)[1:].untyped_storage().nbytes()
T.zeros(4)[1:].untyped_storage().data_ptr() == T.zeros(4).untyped_storage().data_ptr()
T.tensor([1,2],dtype=T.int16).storage().tolist()
T.tensor([1.5,2],dtype=T.float32).storage()[0]
T.tensor([1.5,2],dtype=T.float32).storage().size()
""".strip().splitlines()


@pytest.mark.parametrize("expr", TENSOR_API)
def test_tensor_api_matches_torch(expr):
    check(expr)


def test_storage_is_shared_with_views_and_data_ptr():
    for T in (torch, lg):
        x = T.arange(6.0)
        v = x[2:]
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert v.data_ptr() == x.data_ptr() + 2 * x.element_size()
        s = x.untyped_storage()
        s[0] = 0x3F                       # a byte write shows in the tensor
        assert x[0].item() != 0.0
        assert T.is_storage(s) and not T.is_storage(x)


def test_resize_grows_and_keeps_values():
    for T in (torch, lg):
        x = T.arange(4.0)
        x.resize_(2, 4)
        assert x.shape == (2, 4) and x.flatten()[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert x.is_contiguous()
        x.resize_(0)
        assert x.shape == (0,)


def test_channels_last_copies_keep_values_and_gradients():
    for T in (torch, lg):
        x = T.arange(120.0).reshape(2, 3, 4, 5).requires_grad_()
        y = x.contiguous(memory_format=T.channels_last)
        assert y.stride() == (60, 1, 15, 3) and T.equal(y.detach(), x.detach())
        (y * T.arange(120.0).reshape(2, 3, 4, 5)).sum().backward()
        assert x.grad.flatten().tolist() == list(map(float, range(120)))


# --------------------------------------------------------------------------------------
# index objects of every Python type, in reads and writes
# --------------------------------------------------------------------------------------

class Tn:
    """An index tensor of one of the modules, made when the module is known."""

    def __init__(self, v, d):
        self.v, self.d = v, d

    def __repr__(self):
        return f"Tn({self.v!r}, {self.d})"


def _index(T, i):
    if isinstance(i, tuple):
        return tuple(_index(T, v) for v in i)
    if isinstance(i, list):
        return [_index(T, v) for v in i]
    if isinstance(i, Tn):
        return T.tensor(i.v, dtype=getattr(T, i.d))
    if isinstance(i, slice) and isinstance(i.start, Tn):
        return slice(_index(T, i.start), i.stop, i.step)
    return i


INDICES = [range(2), range(0, 3, 2), [0, 1], [[0, 1], [1, 0]], (0, slice(None), [1, 2]),
           (Ellipsis, 1), (None, 0), (0, None, [1, 2], None), np.array([1, 0]),
           np.array([True, False]), (slice(None), np.array([True, False, True])), np.int64(1),
           (np.int32(1), np.int64(2)), Tn(1, "int64"), Tn([1, 0], "int64"),
           Tn([True, False], "bool"), Tn(True, "bool"), Tn(False, "bool"),
           (Tn(1, "int64"), slice(1, 3)), ([0, 1], [1, 2]), ([0, 1], slice(None), [1, 2]),
           (slice(None), [0, 2], [1, 3]), [True, False], (0, [True, False, True]), True, False,
           None, Ellipsis, (Ellipsis, None), ([[0], [1]], [0, 2]), np.array([[0, 1]]),
           (1, -1, -2), [-1], (range(1, 2), 0),
           (Tn([[True, False, True], [False, True, True]], "bool"),), Tn(1, "int32"),
           Tn([0, 1], "int32"), (np.array(1),), [0, [1]], (0, 1, 2), (slice(None, None, 2), 1),
           Tn([1], "uint8"), [np.int64(1), np.int64(0)], (Tn(0, "int64"), Tn(2, "int64")),
           (slice(Tn(1, "int64"), None),), (0, range(3), Tn([1], "int64"))]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_index_types_read_and_write(index):
    results = []
    for T in (torch, lg):
        x = T.arange(24).reshape(2, 3, 4)
        try:
            read = ("ok", x[_index(T, index)].tolist())
        except Exception as e:                                   # noqa: BLE001
            read = ("err", type(e))
        y = x.clone()
        try:
            y[_index(T, index)] = -1
            write = ("ok", y.tolist())
        except Exception as e:                                   # noqa: BLE001
            write = ("err", type(e))
        results.append((read, write))
    assert results[0] == results[1], results


def test_index_types_gradients():
    for index in ([[0, 1], [1, 0]], range(0, 2), (0, range(0, 6, 2)), [0, [1]],
                  (np.array([1, 0]),), True):
        grads = []
        for T in (torch, lg):
            x = T.arange(12.0).reshape(2, 6).requires_grad_()
            (x[index] * 3).sum().backward()
            grads.append(x.grad.tolist())
        assert grads[0] == grads[1], index


# --------------------------------------------------------------------------------------
# torch-level utilities
# --------------------------------------------------------------------------------------

UTILITIES = """
T.empty_strided((2,3),(1,2)).stride()
T.empty_strided((2,3),(3,))
T.empty_strided((2,3),(3,-1))
T.empty_strided((2,0),(5,1)).shape
T.empty_strided((2,3),(0,1)).stride()
T.empty_permuted((2,3,4),(0,2,1)).stride()
T.empty_permuted((2,3,4),(0,2))
T.scalar_tensor(3)
T.scalar_tensor(3.5, dtype=T.int64)
T.scalar_tensor(True)
T.scalar_tensor(1+2j)
T.scalar_tensor(2, dtype=T.float64, requires_grad=True).requires_grad
T.logspace(0, 2, 3)
T.logspace(0, 2, 3, base=2)
T.logspace(0, 2, 3, dtype=T.int64)
T.logspace(0, 2, 0)
T.logspace(0, 2, 1)
T.logspace(-1, 1, 5, base=3., dtype=T.float64)
T.logspace(0, 3, 4, dtype=T.float16)
T.logspace(0, 2, -1)
T.range(1, 4)
T.range(1, 4, 0.5)
T.range(1, 4, dtype=T.int64)
T.range(4, 1)
T.range(1, 4, 0)
T.range(0, 1, 0.25)
T.promote_types(T.uint8, T.int8)
T.promote_types(T.bfloat16, T.float16)
T.promote_types(T.int32, T.float16)
T.promote_types(T.bool, T.bool)
T.promote_types(T.complex64, T.float64)
T.promote_types(T.float32, int)
T.result_type(T.tensor([1]), 1.0)
T.result_type(1, 1.0)
T.result_type(T.tensor(1.,dtype=T.float64), T.tensor([1],dtype=T.int32))
T.result_type(2, T.tensor([1], dtype=T.uint8))
T.result_type(True, 2)
T.result_type(T.tensor([1.],dtype=T.float32), 1j)
T.result_type(T.tensor(1j), T.tensor([1.],dtype=T.float64))
T.result_type(T.tensor([1], dtype=T.int8), T.tensor(1000))
T.can_cast(T.float32, T.int32)
T.can_cast(T.int32, T.float32)
T.can_cast(T.bool, T.uint8)
T.can_cast(T.int8, T.bool)
T.can_cast(T.complex64, T.float64)
T.broadcast_shapes((2,1),(3,))
T.broadcast_shapes((2,1),(3,2))
T.broadcast_shapes()
T.broadcast_shapes(3, (2,1))
T.broadcast_shapes(T.Size([2,1]), [4])
T.broadcast_shapes((-1,),(2,))
T.broadcast_shapes((0,1),(3,))
T.broadcast_shapes((1,),(0,))
T.is_nonzero(T.tensor([0.]))
T.is_nonzero(T.tensor([1.5]))
T.is_nonzero(T.tensor([1,2]))
T.is_nonzero(T.tensor([]))
T.is_nonzero(T.tensor(float('nan')))
T.is_nonzero(T.tensor(0j))
T.is_same_size(T.zeros(2,3), T.ones(2,3,dtype=T.int64))
T.is_signed(T.zeros(2, dtype=T.uint8))
T.is_signed(T.zeros(2))
T.typename(T.zeros(2))
T.typename(T.zeros(2,dtype=T.int64))
T.typename(T.zeros(2,dtype=T.complex64))
T.typename(T.zeros(2,dtype=T.bfloat16))
T.typename(T.zeros(2,dtype=T.bool))
T.typename(3)
T.typename([1])
T.is_storage(T.zeros(2).untyped_storage())
T.is_storage(T.zeros(2))
T.is_inference(T.zeros(2))
T.is_inference(3)
T.newaxis
T.e
T.pi
T.inf
T.nan
str(T.contiguous_format)
str(T.channels_last)
str(T.preserve_format)
str(T.strided)
T.compiled_with_cxx11_abi()
T.get_float32_matmul_precision()
T.set_flush_denormal(False)
T.is_warn_always_enabled()
T.get_deterministic_debug_mode()
T.set_deterministic_debug_mode('x')
T.set_deterministic_debug_mode(3)
T.are_deterministic_algorithms_enabled()
T.is_deterministic_algorithms_warn_only_enabled()
T.is_anomaly_enabled()
T.is_anomaly_check_nan_enabled()
T.asarray([1,2])
T.asarray(np.arange(3.))
T.asarray(T.arange(3), dtype=T.float32)
T.asarray(3.5)
T.asarray(np.float32(2.5))
T.asarray(np.arange(3.), dtype=T.float32)
T.asarray(np.arange(3.), copy=False, dtype=T.float32)
T.asarray(T.arange(3), copy=False, dtype=T.float32)
T.asarray([[1, 2]], dtype=T.float64)
T.frombuffer(bytearray(8), dtype=T.int32, count=1, offset=4)
T.frombuffer(bytearray(7), dtype=T.int32)
T.frombuffer(b'abcd', dtype=T.uint8)
T.frombuffer(bytearray(0), dtype=T.uint8)
T.frombuffer(bytearray(8), dtype=T.int32, count=3)
T.frombuffer(bytearray(8), dtype=T.int32, offset=9)
T.frombuffer(bytearray(b'\\x01\\x00\\x02\\x00'), dtype=T.int16)
""".strip().splitlines()


@pytest.mark.parametrize("expr", UTILITIES)
def test_utilities_match_torch(expr):
    check(expr)


def test_range_warns_and_frombuffer_shares():
    for T in (torch, lg):
        with pytest.warns(UserWarning, match="deprecated"):
            T.range(0, 2)
        buf = bytearray(8)
        t = T.frombuffer(buf, dtype=T.int32)
        buf[0] = 7
        assert t[0].item() == 7
        t[1] = 9
        assert buf[4] == 9
        a = np.arange(3.0)
        assert T.asarray(a).data_ptr() == a.ctypes.data      # shared
        assert T.asarray(a, copy=True).data_ptr() != a.ctypes.data
        x = T.arange(3.0)
        assert T.asarray(x) is x or T.asarray(x).data_ptr() == x.data_ptr()


def test_switches_round_trip():
    try:
        for T in (torch, lg):
            T.use_deterministic_algorithms(True, warn_only=True)
            assert T.are_deterministic_algorithms_enabled()
            assert T.is_deterministic_algorithms_warn_only_enabled()
            assert T.get_deterministic_debug_mode() == 1
            T.set_deterministic_debug_mode("error")
            assert T.get_deterministic_debug_mode() == 2
            assert not T.is_deterministic_algorithms_warn_only_enabled()
            # deterministic mode fills uninitialized memory, as torch
            assert T.empty(3).isnan().all()
            assert T.empty(2, dtype=T.int32).tolist() == [2 ** 31 - 1] * 2
            assert T.empty_like(T.zeros(2, dtype=T.int64)).tolist() == [2 ** 63 - 1] * 2
            T.set_deterministic_debug_mode(0)
            assert not T.are_deterministic_algorithms_enabled()
            T.set_float32_matmul_precision("high")
            assert T.get_float32_matmul_precision() == "high"
            with pytest.warns(UserWarning):
                T.set_float32_matmul_precision("foo")
            assert T.get_float32_matmul_precision() == "high"
            T.set_warn_always(True)
            assert T.is_warn_always_enabled()
            T.set_anomaly_enabled(True, check_nan=False)
            assert T.is_anomaly_enabled() and not T.is_anomaly_check_nan_enabled()
            T.set_anomaly_enabled(False)
            assert not T.is_anomaly_enabled() and T.is_anomaly_check_nan_enabled()
            assert isinstance(T.get_num_interop_threads(), int)
            T.init_num_threads()
    finally:
        for T in (torch, lg):
            T.use_deterministic_algorithms(False)
            T.set_float32_matmul_precision("highest")
            T.set_warn_always(False)
            T.set_anomaly_enabled(False)


def test_inference_and_layout_kwargs():
    with lg.inference_mode():
        x = lg.zeros(2)
    assert lg.is_inference(x) and not lg.is_inference(lg.zeros(2))
    with pytest.raises(RuntimeError, match="strided"):
        lg.zeros(2, layout="sparse")


# --------------------------------------------------------------------------------------
# lg.testing
# --------------------------------------------------------------------------------------

def _message(T, a, b, **kw):
    try:
        T.testing.assert_close(a, b, **kw)
    except (AssertionError, TypeError, ValueError) as e:
        return type(e), str(e).replace("torch.", "llgrad.")
    return None


CLOSE_CASES = [
    ("tensor([1.,2,3])", "tensor([1.,2.5,3])", {}),
    ("tensor([[1.,2],[3,4]])", "tensor([[1.,2],[3,5]])", {}),
    ("tensor([1.,2])", "tensor([1.,2,3])", {}),
    ("tensor([1.,2])", "tensor([1.,2],dtype=T.float64)", {}),
    ("tensor([1.,2])", "tensor([1.,2],dtype=T.float64)", {"check_dtype": False}),
    ("tensor([1.,2])", "tensor([1.,2.000001])", {}),
    ("tensor([1.,2],dtype=T.float64)", "tensor([1.,2.000001],dtype=T.float64)", {}),
    ("tensor([1.],dtype=T.float16)", "tensor([1.0009765625],dtype=T.float16)", {}),
    ("tensor([float('nan')])", "tensor([float('nan')])", {}),
    ("tensor([float('nan')])", "tensor([float('nan')])", {"equal_nan": True}),
    ("tensor([1.])", "tensor([1.1])", {"rtol": 0.2}),
    ("tensor([1.])", "tensor([1.1])", {"rtol": 0.2, "atol": 0}),
    ("tensor([1.])", "tensor([2.])", {"msg": "custom"}),
    ("tensor([1,2])", "tensor([1,3])", {}),
    ("tensor([1,2])", "tensor([1,2])", {}),
    ("tensor([True])", "tensor([False])", {}),
    ("tensor([1+1j])", "tensor([1+2j])", {}),
    ("tensor([1.,math.inf])", "tensor([1.,math.inf])", {}),
    ("tensor([1.,math.inf])", "tensor([1.,-math.inf])", {}),
    ("tensor([])", "tensor([])", {}),
    ("zeros(2,3).t()", "zeros(3,2)", {"check_stride": True}),
    ("tensor([1.],requires_grad=True)", "tensor([1.])", {}),
    ("tensor([0.])", "tensor([1e-6])", {}),
    ("tensor([1.,2,3,4])", "tensor([1.5,2,3,4.1])", {}),
]


@pytest.mark.parametrize("a,b,kw", CLOSE_CASES)
def test_assert_close_matches_torch(a, b, kw):
    res = []
    for T in (torch, lg):
        res.append(_message(T, eval("T." + a, {"T": T, "math": math}),
                            eval("T." + b, {"T": T, "math": math}), **kw))
    t, l = res
    if t is None or l is None:
        assert t == l, res
        return
    assert t[0] is l[0], res
    lines_t, lines_l = t[1].splitlines(), l[1].splitlines()
    assert lines_t[0] == lines_l[0], res                      # the headline
    for key in ("Mismatched elements", "allowed", "at index"):
        assert (key in t[1]) == (key in l[1]), res
    for lt_, ll_ in zip(lines_t, lines_l):
        if lt_.startswith("Mismatched") or lt_.startswith("Greatest absolute"):
            assert lt_.split(" (up to")[0] == ll_.split(" (up to")[0], res


def test_assert_close_containers_and_numbers():
    for T in (torch, lg):
        T.testing.assert_close([T.tensor(1.0), 2.0], [T.tensor(1.0), 2.0])
        T.testing.assert_close({"a": T.ones(2)}, {"a": T.ones(2)})
        with pytest.raises(AssertionError, match=r"item \[1\]"):
            T.testing.assert_close([T.tensor(1.0), 2.0], [T.tensor(1.0), 2.5])
        with pytest.raises(AssertionError, match="keys of the mappings"):
            T.testing.assert_close({"a": T.ones(1)}, {"b": T.ones(1)})
        with pytest.raises(AssertionError, match="length of the sequences"):
            T.testing.assert_close([1, 2], [1, 2, 3])
        with pytest.raises(AssertionError, match="Scalars are not close"):
            T.testing.assert_close(1.0, 1.5)
        with pytest.raises(AssertionError, match="Scalars are not equal"):
            T.testing.assert_close(1, 2)
        with pytest.raises(TypeError):
            T.testing.assert_close(T.tensor(1.0), 1.0)
        with pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
            T.testing.assert_close(T.ones(1), T.ones(1), rtol=0.1)
        with pytest.raises(AssertionError, match="^Xcus"):
            T.testing.assert_close(T.ones(1), T.zeros(1), msg=lambda m: "Xcus" + m)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64",
                                   "int8", "uint8", "bool", "complex64"])
def test_make_tensor(dtype):
    d = getattr(lg, dtype)
    lg.manual_seed(0)
    a = lg.testing.make_tensor(40, 50, dtype=d)
    lg.manual_seed(0)
    assert lg.equal(a, lg.testing.make_tensor((40, 50), dtype=d))
    assert a.shape == (40, 50) and a.dtype is d
    if dtype == "bool":
        assert 0.4 < a.double().mean().item() < 0.6
        return
    v = a.to(lg.complex128 if d.is_complex else lg.float64).numpy()
    parts = [v.real, v.imag] if d.is_complex else [v]
    lo = 0 if dtype == "uint8" else -9
    for p in parts:
        assert p.min() >= lo and p.max() <= 9 + (not d.is_floating_point)
        assert p.max() - p.min() > (7 if dtype == "uint8" else 12)
    b = lg.testing.make_tensor(3, 4, dtype=d, low=2, high=4, noncontiguous=True,
                               exclude_zero=True)
    assert not b.is_contiguous() and b.shape == (3, 4)
    w = b.to(lg.complex128 if d.is_complex else lg.float64).numpy()
    assert np.all(np.real(w) >= 2) and np.all(np.real(w) <= 4)
    t = torch.testing.make_tensor(3, 4, dtype=getattr(torch, dtype), device="cpu",
                                  noncontiguous=True)
    assert not t.is_contiguous()
    if d.is_floating_point:
        g = lg.testing.make_tensor(2, dtype=d, requires_grad=True)
        assert g.requires_grad and g.is_leaf
