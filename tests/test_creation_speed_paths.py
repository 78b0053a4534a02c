"""The lean creation path (functions/creation.py) and the direct paths of casts, clone,
repeat, fill_/zero_, resize_, isreal and tril/triu_indices: each is checked against the
general path it stands in for (forced by switching the host path off) and against torch,
including the calls that must take the general path (requires_grad, non-contiguous,
out=, vmap, tracing, kernels being recorded, copies being recorded for replay)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import llgrad as lg
from llgrad.eager import elementwise as ew
from llgrad.eager import views
from llgrad.functions import creation
from llgrad.runtime import launch

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool", "complex64", "complex128"]


def bits(t: lg.Tensor) -> tuple:
    """Everything a result is compared by: dtype, shape, strides and the exact bytes."""
    t = t.detach()
    arr = t.float().numpy() if t.dtype is lg.bfloat16 else t.numpy()
    return t.dtype.name, tuple(t.shape), tuple(t.stride()), arr.tobytes()


def to_torch(t: lg.Tensor):
    t = t.detach()
    if t.dtype is lg.bfloat16:
        return torch.from_numpy(t.float().numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(t.numpy().copy())


def same_as_torch(mine: lg.Tensor, theirs, close: bool = False) -> None:
    """Same dtype, shape and values (`close`: up to rounding, where torch's formula
    rounds differently, as arange/linspace's do)."""
    assert str(theirs.dtype).split(".")[1] == mine.dtype.name.rstrip("_")
    assert tuple(theirs.shape) == tuple(mine.shape)
    theirs = theirs.detach()
    if theirs.dtype is torch.bfloat16:
        theirs = theirs.float()
    mine = mine.detach()
    a = (mine.float() if mine.dtype is lg.bfloat16 else mine).numpy()
    b = theirs.numpy()
    if close and a.dtype.kind in "fc":
        assert np.allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True), (a, b)
    else:
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), (a, b)


@pytest.fixture
def general(monkeypatch):
    """Switch every host path off: fills, values and copies go through the kernels."""
    def off() -> None:
        monkeypatch.setattr(creation, "_HOST_BYTES", -1)
        monkeypatch.setattr(creation, "_HOST_VALUES", 0)
        monkeypatch.setattr(views, "_HOST_COPY_BYTES", -1)
        monkeypatch.setattr(creation, "_images", {})
        monkeypatch.setattr(creation, "_IMAGE_BYTES", -1)
    return off


# -- fills: zeros, ones, full, *_like, new_*, scalar_tensor, empty ------------------------

VALUES = [0, 1, -1, 2.5, -0.0, 1e10, 255, -128, True, 1 + 2j, math.nan, math.inf, 70000.0]


@pytest.mark.parametrize("name", DTYPES)
def test_fills_match_the_kernel_fill_and_torch(name, general):
    d, td = getattr(lg, name), getattr(torch, name)
    calls = []
    for v in VALUES:
        calls.append((f"full {v}", lambda v=v: lg.full((3, 2), v, dtype=d),
                      lambda v=v: torch.full((3, 2), v, dtype=td)))
        calls.append((f"full_like {v}", lambda v=v: lg.full_like(lg.zeros(5), v, dtype=d),
                      lambda v=v: torch.full_like(torch.zeros(5), v, dtype=td)))
        calls.append((f"scalar_tensor {v}", lambda v=v: lg.scalar_tensor(v, dtype=d),
                      lambda v=v: torch.scalar_tensor(v, dtype=td)))
        calls.append((f"fill_ {v}", lambda v=v: lg.zeros(2, 3, dtype=d).fill_(v),
                      lambda v=v: torch.zeros(2, 3, dtype=td).fill_(v)))
        calls.append((f"fill_ t {v}", lambda v=v: lg.zeros(2, 3, dtype=d).t().fill_(v),
                      lambda v=v: torch.zeros(2, 3, dtype=td).t().fill_(v)))
    calls += [
        ("zeros", lambda: lg.zeros(2, 3, dtype=d), lambda: torch.zeros(2, 3, dtype=td)),
        ("ones", lambda: lg.ones((4,), dtype=d), lambda: torch.ones((4,), dtype=td)),
        ("ones 0-d", lambda: lg.ones((), dtype=d), lambda: torch.ones((), dtype=td)),
        ("ones empty", lambda: lg.ones(0, 3, dtype=d), lambda: torch.ones(0, 3, dtype=td)),
        ("ones big", lambda: lg.ones(300, 70, dtype=d), lambda: torch.ones(300, 70, dtype=td)),
        ("zeros_like", lambda: lg.zeros_like(lg.ones(3, 2).t(), dtype=d),
         lambda: torch.zeros_like(torch.ones(3, 2).t(), dtype=td).contiguous()),
        ("ones_like", lambda: lg.ones_like(lg.zeros(4, dtype=d)),
         lambda: torch.ones_like(torch.zeros(4, dtype=td))),
        ("new_zeros", lambda: lg.zeros(4, dtype=d).new_zeros((3, 2)),
         lambda: torch.zeros(4, dtype=td).new_zeros((3, 2))),
        ("new_ones", lambda: lg.zeros(4, dtype=d).new_ones(3, 2),
         lambda: torch.zeros(4, dtype=td).new_ones(3, 2)),
        ("new_full", lambda: lg.zeros(4, dtype=d).new_full((2,), 3),
         lambda: torch.zeros(4, dtype=td).new_full((2,), 3)),
        ("zero_", lambda: lg.ones(5, dtype=d).zero_(), lambda: torch.ones(5, dtype=td).zero_()),
    ]
    def outcome(call):
        try:
            return call()
        except Exception as e:              # noqa: BLE001
            return e

    fast = []
    for what, mine, theirs in calls:
        got, expected = outcome(mine), outcome(theirs)
        if isinstance(expected, Exception):
            assert isinstance(got, Exception), what
        elif not isinstance(got, Exception):
            same_as_torch(got, expected)
        fast.append(repr(got) if isinstance(got, Exception) else bits(got))
    general()
    for (what, mine, _), before in zip(calls, fast):
        got = outcome(mine)
        assert (repr(got) if isinstance(got, Exception) else bits(got)) == before, what


def test_creation_keywords_and_errors_are_torchs():
    for make in (lg.zeros, lg.ones, lg.empty):
        t = make(2, 3, dtype=lg.float64, device="cpu", layout=lg.strided, pin_memory=False,
                 requires_grad=True)
        assert t.requires_grad and t.is_leaf and t.dtype is lg.float64 and t.grad_fn is None
        assert make([2, 3]).shape == make(lg.Size([2, 3])).shape == make((2, 3)).shape
        assert make(np.int64(3)).shape == (3,)
        assert make(2, device=lg.device("cpu")).shape == (2,)
        for bad, error in [((-1,), RuntimeError), ((2, 3.0), TypeError), ((True,), TypeError),
                           ((), TypeError)]:
            with pytest.raises(error):
                make(*bad)
        with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
            make(2, dtype=lg.int64, requires_grad=True)
        with pytest.raises(RuntimeError, match="not available"):
            make(2, device="cuda")
        with pytest.raises(TypeError, match="unexpected keyword"):
            make(2, foo=1)
    # a size seen as ints is remembered; one with a bool in it still raises
    lg.zeros(1, 2)
    with pytest.raises(TypeError):
        lg.zeros(True, 2)
    with pytest.raises(TypeError):
        lg.zeros()
    with pytest.raises(RuntimeError, match="without overflow"):
        lg.full((2,), 300, dtype=lg.uint8)
    with pytest.raises(RuntimeError, match="without overflow"):
        lg.full((2,), 1e39)
    with pytest.raises(TypeError, match="scalar_tensor: fill_value must be a number"):
        lg.scalar_tensor("a")
    with pytest.raises(RuntimeError, match="^fill_: value cannot be converted"):
        lg.zeros(2, dtype=lg.int8).fill_(200)
    with pytest.raises(OverflowError):
        lg.full((2,), 2 ** 70)


def test_creation_out_inference_and_deterministic_modes():
    out = lg.empty(2, 3, dtype=lg.int64)
    assert lg.zeros(2, 3, out=out) is out and out.sum().item() == 0
    out = lg.empty(2)
    lg.full((2,), 1.5, out=out)
    assert out.tolist() == [1.5, 1.5]
    with pytest.raises(RuntimeError, match="requires grad"):
        lg.ones(2, requires_grad=True, out=lg.empty(2))
    out = lg.empty(3, dtype=lg.float64)
    assert lg.arange(3, out=out) is out and out.tolist() == [0.0, 1.0, 2.0]
    with lg.inference_mode():
        for t in (lg.zeros(3), lg.ones_like(lg.zeros(2)), lg.full((1,), 2.0), lg.eye(2),
                  lg.arange(3), lg.linspace(0, 1, 3), lg.scalar_tensor(1), lg.ones(3).int()):
            assert t.is_inference()
    assert not lg.zeros(3).is_inference()
    lg.use_deterministic_algorithms(True)
    try:
        assert lg.empty(3).isnan().all() and lg.empty_like(lg.zeros(2)).isnan().all()
        assert (lg.empty(2, dtype=lg.int32) == 2 ** 31 - 1).all()
    finally:
        lg.use_deterministic_algorithms(False)


def test_fills_inside_recorded_forwards_use_the_kernel():
    # recording kernels does not change what runs: a small fill is the host's, no kernel
    with launch.record_kernels() as kernels:
        t = lg.full((3,), 2.0)
    assert not kernels and t.tolist() == [2.0] * 3
    # a forward whose copies are replayed (copy_replay) sees the fill's copy
    log: list = []
    ew.copy_log = log
    try:
        t = lg.zeros(4)
    finally:
        ew.copy_log = None
    assert len(log) == 1 and t.tolist() == [0.0] * 4
    # pad builds its output from a fill and copies: replayed calls agree with torch
    x = lg.arange(6.0).reshape(2, 3)
    for _ in range(3):
        got = lg.nn.functional.pad(x, (1, 1), value=7.0)
    assert got.tolist() == torch.nn.functional.pad(torch.arange(6.0).reshape(2, 3), (1, 1),
                                                   value=7.0).tolist()


def test_fill_in_place_keeps_autograd_rules():
    leaf = lg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.zero_()
    y = leaf * 2
    y.zero_()                               # recorded: the old history gets a zero gradient
    assert y.grad_fn is not None and y.tolist() == [0.0] * 3
    y.sum().backward()
    assert leaf.grad.tolist() == [0.0] * 3
    base = lg.ones(4, requires_grad=True) * 1
    view = base[1:3]
    view.fill_(5.0)                         # a view of a tensor that requires grad: recorded
    assert type(base.grad_fn).__name__ == "CopySlices"
    plain = lg.ones(4)
    v0 = plain._version
    plain[1:3].fill_(2)                     # a plain view: written directly, version bumped
    assert plain.tolist() == [1.0, 2.0, 2.0, 1.0] and plain._version == v0 + 1
    with lg.inference_mode():
        inf = lg.ones(2)
    with pytest.raises(RuntimeError, match="inference tensor"):
        inf.zero_()


# -- values computed on the host: arange, linspace, logspace, eye, tril/triu_indices -------

RANGES = [(5,), (1.0, 5.0, 2.0), (0, 10, 3), (-3, 3, 0.7), (10, 0, -1), (0.1, 1.0, 0.1),
          (0, 300), (0, 1000, 7), (2 ** 40, 2 ** 40 + 5), (250, 260), (-130, -120),
          (0, 2 ** 62, 2 ** 61), (1e20, 1e20 + 1e5, 1e4), (3, 7, 2.5), (0, 1, 10 ** 20)]
SPACES = [(0, 1, 5), (-3, 1, 4), (4.3, -3, 7), (0, 1e10, 9), (1, 2, 300), (0.1, 0.9, 11),
          (-3, 0, 2), (2, 2, 1), (0, 1, 0), (1, 100, 64), (0, -0.0, 3)]


@pytest.mark.parametrize("name", DTYPES)
def test_host_values_match_the_kernels(name, general):
    d = getattr(lg, name)
    calls = [lambda a=a: lg.arange(*a, dtype=d) for a in RANGES]
    calls += [lambda a=a: lg.linspace(*a, dtype=d) for a in SPACES]
    calls += [lambda a=a: lg.logspace(*a, dtype=d) for a in SPACES]
    calls += [lambda a=a: lg.logspace(*a, base=2.0, dtype=d) for a in SPACES]
    calls += [lambda n=n: lg.eye(*n, dtype=d) for n in [(3,), (3, 4), (5, 2), (0, 2), (1,)]]

    def run() -> list:
        out = []
        for call in calls:
            try:
                out.append(bits(call()))
            except Exception as e:          # noqa: BLE001
                out.append((type(e).__name__, str(e)))
        return out
    fast, again = run(), run()              # (the second run reads remembered images)
    general()
    assert fast == again == run()


def test_host_values_against_torch():
    for a in RANGES[:12]:
        for name in ("float32", "float64", "int64", "int32"):
            try:                            # (where both compute a range)
                expected = torch.arange(*a, dtype=getattr(torch, name))
                got = lg.arange(*a, dtype=getattr(lg, name))
            except (RuntimeError, ValueError):
                continue
            same_as_torch(got, expected, close=True)
    same_as_torch(lg.arange(5), torch.arange(5))
    same_as_torch(lg.arange(0.5, 3), torch.arange(0.5, 3), close=True)
    for a in [(0, 1, 5), (-1, 1, 5), (0, 10, 11), (2, 2, 1)]:
        same_as_torch(lg.linspace(*a, dtype=lg.float64),
                      torch.linspace(*a, dtype=torch.float64), close=True)
        same_as_torch(lg.logspace(*a), torch.logspace(*a), close=True)
    for n in [(3,), (3, 4), (5, 2), (0, 2)]:
        for name in ("float32", "int64", "bool", "complex64", "bfloat16"):
            same_as_torch(lg.eye(*n, dtype=getattr(lg, name)),
                          torch.eye(*n, dtype=getattr(torch, name)))
    # tensor arguments, base and errors as before
    same_as_torch(lg.logspace(2, lg.tensor(4), 4, 5.0),
                  torch.logspace(2, torch.tensor(4), 4, 5.0), close=True)
    same_as_torch(lg.linspace(lg.tensor(-3), 0, 4), torch.linspace(torch.tensor(-3), 0, 4),
                  close=True)
    same_as_torch(lg.arange(lg.tensor(1.5), 4), torch.arange(torch.tensor(1.5), 4),
                  close=True)
    got = lg.logspace(0, 2, 3, base=1j, dtype=lg.complex64)
    assert got.dtype is lg.complex64 and np.allclose(got.numpy(), [1, 1j, -1], atol=1e-6)
    for bad in (lambda m: m.arange(0, 5, 0), lambda m: m.arange(0, math.inf),
                lambda m: m.arange(5, 0), lambda m: m.linspace(0, 1, -1),
                lambda m: m.eye(-1), lambda m: m.tril_indices(3, 3, dtype=m.float32)):
        with pytest.raises(RuntimeError):
            bad(lg)
        with pytest.raises(RuntimeError):
            bad(torch)


@pytest.mark.parametrize("upper", [False, True])
def test_tri_indices(upper):
    fn, tfn = (lg.triu_indices, torch.triu_indices) if upper else \
        (lg.tril_indices, torch.tril_indices)
    for args in [(0, 0), (1, 1), (3, 3), (4, 3, 1), (3, 5, -1), (20, 21, 0), (5, 4, 10),
                 (5, 4, -10), (200, 100, 3)]:
        for name in ("int64", "int32"):
            for _ in range(2):              # the second call copies the remembered image
                got = fn(*args, dtype=getattr(lg, name), device="cpu")
                same_as_torch(got, tfn(*args, dtype=getattr(torch, name)))
            got.add_(1)                     # a fresh tensor: the image is not shared
            assert fn(*args, dtype=getattr(lg, name)).sum().item() == \
                tfn(*args, dtype=getattr(torch, name)).sum().item()
    out = lg.empty(0, dtype=lg.int64)
    assert fn(4, 5, 1, out=out) is out
    same_as_torch(out, tfn(4, 5, 1))
    with pytest.raises(RuntimeError):
        fn(-1, 3)
    with pytest.raises(RuntimeError, match="not available"):
        fn(3, 3, device="cuda")


def test_creation_inside_compile_and_vmap():
    @lg.compile
    def f(x):
        return x + lg.arange(3) + lg.ones(3) + lg.eye(3)[0] + lg.linspace(0, 1, 3) + \
            lg.full((3,), 2.0) + lg.zeros_like(x) + lg.tril_indices(2, 2)[0, :1]

    x = lg.arange(3.0)
    expected = (torch.arange(3.0) + torch.arange(3) + 1 + torch.eye(3)[0] +
                torch.linspace(0, 1, 3) + 2 + torch.tril_indices(2, 2)[0, :1])
    for _ in range(2):
        assert np.allclose(f(x).numpy(), expected.numpy())
    g = lg.func.vmap(lambda r: r + lg.ones_like(r) + lg.zeros(2) + r.int().float() +
                     r.clone() + r.repeat(2)[:2] + lg.isreal(r).float())
    xs = lg.arange(6.0).reshape(3, 2)
    t = torch.arange(6.0).reshape(3, 2)
    assert np.allclose(g(xs).numpy(), (3 * t + 2 + t.int().float()).numpy())


# -- casts, clone, repeat, resize_, isreal ------------------------------------------------

CAST_METHODS = ["int", "long", "short", "byte", "char", "bool", "half", "bfloat16", "float",
                "double", "cfloat", "cdouble"]


@pytest.mark.parametrize("method", CAST_METHODS)
def test_cast_methods_direct_and_recorded(method):
    data = [[1.5, -2.7, 0.0], [300.2, -1e10, 7.0]]
    x = lg.tensor(data)
    first, second = getattr(x, method)(), getattr(x, method)()   # general, then direct
    assert bits(first) == bits(second)
    expected = getattr(torch.tensor(data), method)()
    if method not in ("int", "long", "short", "byte", "char"):   # float -> int out of range
        same_as_torch(second, expected)
    if method != "float":                   # (float of float32 is the tensor itself)
        assert bits(getattr(x.t(), method)()) == bits(getattr(x.t().contiguous(), method)())
        assert getattr(x, method)() is not x
    assert x.float() is x and x.to(lg.float32) is x
    xg = lg.tensor(data, requires_grad=True)
    y = getattr(xg, method)()
    d = y.dtype
    if d.is_floating_point or d.is_complex:
        if d is lg.float32:
            assert y is xg
        else:
            assert type(y.grad_fn).__name__ == "ToCopyBackward0" and y.requires_grad
    else:
        assert not y.requires_grad and y.grad_fn is None
    with lg.no_grad():
        z = getattr(xg, method)()
    assert z.grad_fn is None and (not z.requires_grad or z is xg)
    assert bits(x.to(getattr(lg, {"int": "int32", "long": "int64", "short": "int16",
                                  "byte": "uint8", "char": "int8", "bool": "bool",
                                  "half": "float16", "bfloat16": "bfloat16",
                                  "float": "float32", "double": "float64",
                                  "cfloat": "complex64",
                                  "cdouble": "complex128"}[method]))) == bits(second)
    stride = getattr(lg.ones(1, 3, 2, 2), method)(memory_format=lg.channels_last).stride()
    assert stride == torch.ones(1, 3, 2, 2).float().to(
        memory_format=torch.channels_last).stride()


def test_cast_forward_mode_and_kernel_recording():
    from llgrad.autograd import forward_ad as fwAD
    x = lg.tensor([1.0, 2.0])
    x.double(), x.double()
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, lg.tensor([1.0, 1.0]))
        out = dual.double()
        assert fwAD.unpack_dual(out).tangent.tolist() == [1.0, 1.0]
    with launch.record_kernels() as kernels:
        assert x.double().tolist() == [1.0, 2.0]
    assert kernels


def test_clone_host_copy_and_kernel(general):
    for name in DTYPES:
        x = lg.arange(12).to(getattr(lg, name)).reshape(3, 4)
        for t in (x, x.t(), x[1:], x[:, 1:], x.reshape(3, 1, 4).expand(3, 2, 4)):
            c = t.clone()
            assert c._storage is not t._storage and c.is_contiguous()
            same_as_torch(c, to_torch(t).clone())
    xg = lg.ones(2, 3, requires_grad=True)
    c = xg.clone()
    assert type(c.grad_fn).__name__ == "CloneBackward0"
    c.sum().backward()
    assert xg.grad.tolist() == [[1.0] * 3] * 2
    with launch.record_kernels() as kernels:
        lg.ones(3).clone()
    assert kernels
    x = lg.arange(6.0).reshape(2, 3)
    fast = bits(lg.clone(x))
    general()
    assert bits(lg.clone(x)) == fast


def test_repeat_copies_and_records():
    for shape, reps in [((2, 3), (2, 1, 3)), ((), (0, 2)), ((3,), (2,)), ((2, 1), (1, 4)),
                        ((2, 3), (1, 1))]:
        x = lg.arange(6.0)[:int(np.prod(shape))].reshape(shape)
        got = x.repeat(*reps)
        same_as_torch(got, to_torch(x).repeat(*reps))
        assert got.is_contiguous()
        if got.numel():
            assert got._storage is not x._storage
    xt = lg.arange(6.0).reshape(2, 3).t()
    same_as_torch(xt.repeat(2, 2), torch.arange(6.0).reshape(2, 3).t().repeat(2, 2))
    xg = lg.ones(2, 3, requires_grad=True)
    y = xg.repeat(2, 2)
    assert type(y.grad_fn).__name__ == "RepeatBackward0"
    y.sum().backward()
    assert xg.grad.tolist() == [[4.0] * 3] * 2
    with pytest.raises(RuntimeError, match="Number of dimensions"):
        lg.ones(2, 3).repeat(2)
    with pytest.raises(RuntimeError):
        lg.ones(2).repeat(-1)


def test_resize_and_isreal():
    t = lg.ones(2, 3)
    assert t.resize_(3, 2).shape == (3, 2) and t.stride() == (2, 1)
    assert t.resize_((5, 5)).shape == (5, 5)
    assert t.resize_(size=(2,)).shape == (2,)
    assert lg.ones(2).resize_as_(lg.ones(2, 1)).shape == (2, 1)
    with pytest.raises(RuntimeError, match="require grad"):
        lg.ones(2, requires_grad=True).resize_(3)
    with pytest.raises(TypeError):
        lg.ones(2).resize_(3, size=(3,))
    for name in DTYPES:
        x = lg.tensor([1.0, math.nan, math.inf]).to(getattr(lg, name))
        same_as_torch(lg.isreal(x), torch.isreal(to_torch(x)))
    z = lg.tensor([1 + 1j, 2 + 0j])
    same_as_torch(lg.isreal(z), torch.isreal(torch.tensor([1 + 1j, 2 + 0j])))


def test_empty_writes_the_fields_make_writes():
    """`Tensor._empty` writes a new tensor's fields itself: the same as `_make` gives."""
    from llgrad.tensor import Tensor
    for shape, strides in [((2, 3), None), ((), None), ((4,), (1,)), ((0, 2), None)]:
        a = Tensor._empty(shape, lg.float32, strides)
        b = Tensor._make(a._storage, 0, a._shape, a._strides, lg.float32)
        fields = [k for k in Tensor.__slots__ if not k.startswith("__")]
        assert {k: getattr(a, k) for k in fields if hasattr(a, k)} == \
            {k: getattr(b, k) for k in fields if hasattr(b, k)}
        assert a.__dict__ == b.__dict__ == {}
    with lg.inference_mode():
        t = Tensor._empty((2,), lg.float32)
    assert t.is_inference() and t._storage.inference
