"""PyTorch's everyday surface: devices, legacy types, `randint`'s signatures, loss dtype
promotion, which tensors a backward node keeps, inference tensors, matmul's dtype rule.
Each behaviour is checked against torch (the oracle) where torch is installed."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn.functional as F
from conftest import needs_torch, torch

# --------------------------------------------------------------------------------------
# devices
# --------------------------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:1", "mps", "cpu:0"])
def test_device_objects_match_torch(spec):
    d, t = lg.device(spec), torch.device(spec)
    assert (repr(d), str(d), d.type, d.index) == (repr(t), str(t), t.type, t.index)
    assert d == lg.device(spec) and hash(d) == hash(lg.device(spec))
    assert (d == spec) == (t == spec)          # a device never equals a string (PyTorch)
    assert lg.device(d) == d and pickle.loads(pickle.dumps(d)) == d


def test_device_parsing_errors():
    with pytest.raises(RuntimeError, match="device type at start of device string: gpu"):
        lg.device("gpu")
    with pytest.raises(RuntimeError, match="Invalid device string"):
        lg.device("cuda:x")
    with pytest.raises(RuntimeError, match="index was passed explicitly"):
        lg.device("cuda:0", 1)
    assert lg.device("cuda", 2) == lg.device("cuda:2")


def test_tensors_are_on_the_cpu():
    x = lg.ones(2)
    assert x.device == lg.device("cpu") and repr(x.device) == "device(type='cpu')"
    assert x.device.type == "cpu" and x.device.index is None
    assert x.is_cpu and not x.is_cuda and x.get_device() == -1
    assert x.cpu() is x and x.to("cpu") is x and x.to(lg.device("cpu")) is x
    assert x.to("cpu", lg.float64).dtype is lg.float64
    assert x.to(device="cpu", dtype=lg.float64).dtype is lg.float64
    assert lg.get_default_device() == lg.device("cpu")
    lg.set_default_device("cpu")
    assert not lg.cuda.is_available() and lg.cuda.device_count() == 0
    assert not lg.accelerator.is_available() and lg.accelerator.current_accelerator() is None
    assert not lg.backends.mps.is_available()
    lg.cuda.manual_seed_all(0)                   # accepted (PyTorch does nothing, too)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "mps", lg.device("cuda")])
@pytest.mark.parametrize("make", [
    lambda d: lg.ones(2, device=d), lambda d: lg.zeros(2, 3, device=d),
    lambda d: lg.tensor([1.0], device=d), lambda d: lg.arange(3, device=d),
    lambda d: lg.rand(2, device=d), lambda d: lg.randn(2, device=d),
    lambda d: lg.full((2,), 1.0, device=d), lambda d: lg.eye(2, device=d),
    lambda d: lg.empty(2, device=d), lambda d: lg.linspace(0, 1, 3, device=d),
    lambda d: lg.zeros_like(lg.ones(2), device=d), lambda d: lg.randint(3, (2,), device=d),
    lambda d: lg.ones(2).to(d), lambda d: lg.ones(2).to(device=d),
    lambda d: lg.ones(2).new_zeros(3, device=d), lambda d: lg.nn.Linear(2, 2).to(d),
    lambda d: lg.set_default_device(d), lambda d: lg.Tensor([1.0], device=d),
    lambda d: lg.Generator(device=d),
], ids=lambda f: "")
def test_other_devices_raise_naming_the_device(make, device):
    with pytest.raises(RuntimeError, match=f"device '{lg.device(device)}' is not available"):
        make(device)


def test_cuda_methods_raise():
    with pytest.raises(RuntimeError, match="device 'cuda'"):
        lg.ones(2).cuda()
    with pytest.raises(RuntimeError, match="device 'cuda:1'"):
        lg.nn.Linear(2, 2).cuda(1)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        lg.cuda.synchronize()


# --------------------------------------------------------------------------------------
# legacy constructors and type()
# --------------------------------------------------------------------------------------

LEGACY_CALLS = [
    ("Tensor", ([1, 2],)), ("Tensor", ([[1, 2], [3, 4]],)), ("Tensor", ((2, 3),)),
    ("FloatTensor", ([1.5],)), ("DoubleTensor", ([1, 2],)), ("LongTensor", ([1.7, -2.2],)),
    ("IntTensor", ([3],)), ("BoolTensor", ([1, 0],)), ("ByteTensor", ([7],)),
]


@needs_torch
@pytest.mark.parametrize("name,args", LEGACY_CALLS)
def test_legacy_constructors_with_data(name, args):
    got, want = getattr(lg, name)(*args), getattr(torch, name)(*args)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.type() == want.type()


@needs_torch
@pytest.mark.parametrize("args", [(2, 3), (0,), (), (lg.Size([4, 1]),)])
def test_legacy_constructors_with_sizes(args):
    targs = tuple(torch.Size(a) if isinstance(a, lg.Size) else a for a in args)
    assert tuple(lg.Tensor(*args).shape) == tuple(torch.Tensor(*targs).shape)
    assert lg.LongTensor(*args).dtype is lg.int64


def test_legacy_types_and_isinstance():
    x = lg.ones(2)
    assert isinstance(x, lg.FloatTensor) and not isinstance(x, lg.DoubleTensor)
    assert isinstance(x, lg.Tensor) and lg.Tensor(x) is x
    with pytest.raises(TypeError, match="data must be a sequence"):
        lg.Tensor(3.5)
    with pytest.raises(TypeError, match="expected a float32 tensor"):
        lg.FloatTensor(lg.ones(2, dtype=lg.int64))


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64",
                                   "int32", "int16", "int8", "uint8", "bool", "complex64",
                                   "complex128"])
def test_type_strings_match_torch(dtype):
    got = lg.ones(2, dtype=getattr(lg, dtype)).type()
    assert got == torch.ones(2, dtype=getattr(torch, dtype)).type()


def test_type_conversions():
    x = lg.tensor([1.5, 2.5])
    assert x.type(lg.float32) is x and x.type("torch.FloatTensor") is x
    assert x.type(lg.LongTensor).dtype is lg.int64
    assert x.type("torch.DoubleTensor").dtype is lg.float64
    assert x.type("llgrad.IntTensor").dtype is lg.int32
    assert x.type(lg.float64).dtype is lg.float64
    with pytest.raises(ValueError, match="invalid type: 'float'"):
        x.type("float")
    with pytest.raises(RuntimeError, match="device 'cuda'"):
        x.type("torch.cuda.FloatTensor")
    m = lg.nn.Linear(2, 2).type(lg.DoubleTensor)
    assert m.weight.dtype is lg.float64


# --------------------------------------------------------------------------------------
# randint
# --------------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("args,kwargs", [
    ((10, (3,)), {}), ((3, 10, (2, 2)), {}), ((0, 10), {"size": (3,)}),
    ((10,), {"size": (4,)}), ((), {"high": 5, "size": (2,)}),
    ((), {"low": 2, "high": 5, "size": (2, 3)}), ((5, (2,)), {"dtype": "int32"}),
    ((-3, 3, (50,)), {}),
])
def test_randint_signatures_as_torch(args, kwargs):
    lk = {k: getattr(lg, v) if k == "dtype" else v for k, v in kwargs.items()}
    tk = {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}
    got, want = lg.randint(*args, **lk), torch.randint(*args, **tk)
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    ints = [a for a in args if isinstance(a, int)]
    low = kwargs.get("low", ints[0] if len(ints) == 2 else 0)
    high = kwargs.get("high", ints[-1] if ints else None)
    v = got.numpy()
    assert v.min() >= low and v.max() < high


def test_randint_bounds_and_generator():
    v = lg.randint(-3, 3, (4000,)).numpy()
    assert set(v.tolist()) == set(range(-3, 3))
    a = lg.randint(100, (8,), generator=lg.Generator().manual_seed(5))
    b = lg.randint(100, (8,), generator=lg.Generator().manual_seed(5))
    assert lg.equal(a, b)
    with pytest.raises(TypeError, match="missing required argument 'size'"):
        lg.randint(3)
    with pytest.raises(RuntimeError, match="from=5 >= to=1"):
        lg.randint(5, 1, (2,))


# --------------------------------------------------------------------------------------
# losses with integer targets
# --------------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("target_dtype", ["int64", "int32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_promote_targets_as_torch(loss, target_dtype, reduction):
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    y = np.array([1, 2, -3])
    xl = lg.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    got = getattr(F, loss)(xl, lg.tensor(y, dtype=getattr(lg, target_dtype)),
                           reduction=reduction)
    want = getattr(torch.nn.functional, loss)(
        xt, torch.tensor(y, dtype=getattr(torch, target_dtype)), reduction=reduction)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_mse_of_two_integer_tensors_raises():
    with pytest.raises(TypeError, match="mse_loss: expected floating point"):
        F.mse_loss(lg.tensor([1, 2]), lg.tensor([1, 3]))


# --------------------------------------------------------------------------------------
# what a backward node saves: products with numbers keep nothing of the tensor
# --------------------------------------------------------------------------------------

SAVE_CASES = {
    "x*4": lambda m, v: v * 4, "4*x": lambda m, v: 4 * v, "x/4": lambda m, v: v / 4,
    "4/x": lambda m, v: 4 / v, "x+4": lambda m, v: v + 4, "4-x": lambda m, v: 4 - v,
    "x**2": lambda m, v: v ** 2, "2**x": lambda m, v: 2 ** v, "x%3": lambda m, v: v % 3,
    "x*y": lambda m, v: v * m.ones(2), "x/y": lambda m, v: v / m.ones(2),
    "y/x": lambda m, v: m.ones(2) / v, "x@W": lambda m, v: v @ m.ones(2, 2),
    "W@x": lambda m, v: m.ones(2, 2) @ v, "mul(x,4)": lambda m, v: m.mul(v, 4),
    "x*x": lambda m, v: v * v, "maximum": lambda m, v: m.maximum(v, m.ones(2)),
    "where": lambda m, v: m.where(v > 0, v, 0.0), "relu": lambda m, v: v.relu(),
}


@needs_torch
@pytest.mark.parametrize("name", list(SAVE_CASES))
def test_inplace_write_after_use_raises_exactly_where_torch_does(name):
    """`z = f(a[1:3]); a.add_(1); z.backward()` raises in llgrad iff it raises in torch."""
    def run(m):
        x = m.ones(4, requires_grad=True)
        a = x * 1.5
        z = SAVE_CASES[name](m, a[1:3])
        a.add_(1)
        try:
            z.sum().backward()
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e)
            return "raises", None
        return "runs", x.grad.numpy().copy()

    (got, g1), (want, g2) = run(lg), run(torch)
    assert got == want
    if g1 is not None:
        np.testing.assert_allclose(g1, g2, rtol=1e-6)


def test_product_with_number_still_differentiates_both_ways():
    w = lg.tensor([1.0, 2.0], requires_grad=True)
    x = lg.tensor([3.0, 4.0], requires_grad=True)
    (w * x).sum().backward()
    assert w.grad.tolist() == [3.0, 4.0] and x.grad.tolist() == [1.0, 2.0]
    assert lg.autograd.gradgradcheck(lambda a, b: a * b / 3.0,
                                     (lg.tensor([1.5, 2.0], dtype=lg.float64,
                                                requires_grad=True),
                                      lg.tensor([0.5, -1.0], dtype=lg.float64,
                                                requires_grad=True)))


# --------------------------------------------------------------------------------------
# inference tensors
# --------------------------------------------------------------------------------------

def test_inference_tensors_cannot_require_grad_later():
    with lg.inference_mode():
        made = lg.ones(3)
        computed = made * 2
        view = computed[1:]
        computed.detach().requires_grad_()       # inside the mode it is allowed
    msg = "Setting requires_grad=True on inference tensor outside InferenceMode"
    for t in (made, computed, view, computed.detach()):
        with pytest.raises(RuntimeError, match=msg):
            t.requires_grad_()
        with pytest.raises(RuntimeError, match=msg):
            t.requires_grad = True
    fresh = computed.clone()                     # a clone outside the mode is normal
    assert fresh.requires_grad_().requires_grad


# --------------------------------------------------------------------------------------
# matmul needs one dtype
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,shapes", [
    (lg.matmul, ((2, 2), (2, 2))), (lg.matmul, ((2,), (2,))), (lg.matmul, ((3, 2), (2,))),
    (lg.mm, ((2, 2), (2, 2))), (lg.bmm, ((1, 2, 2), (1, 2, 2))), (lg.dot, ((2,), (2,))),
])
def test_matmul_of_mixed_dtypes_raises_like_torch(fn, shapes):
    a, b = lg.ones(*shapes[0]), lg.ones(*shapes[1], dtype=lg.float64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        fn(a, b)
    assert fn(a.double(), b).dtype is lg.float64
