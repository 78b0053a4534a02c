"""The residual names and keywords of PyTorch's API, against torch (values, dtypes, shapes,
gradients, errors) — see llgrad/functions/residual.py and llgrad/nn/_residual.py."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")


def T(x):
    """A torch tensor as llgrad's (same dtype, values)."""
    x = x.detach()
    if x.dtype in (torch.float16, torch.bfloat16):
        return lg.tensor(x.float().numpy()).to(getattr(lg, str(x.dtype).split(".")[1]))
    return lg.tensor(x.numpy().copy(), dtype=lg.bool if x.dtype == torch.bool
                     else getattr(lg, str(x.dtype).split(".")[1]))


def same(a, b, tol=1e-6):
    """llgrad result `a` equals torch result `b`: dtype, shape, values."""
    if isinstance(b, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y, tol)
        return
    assert isinstance(a, lg.Tensor), type(a)
    assert a.dtype.name.replace("bool_", "bool") == str(b.dtype).split(".")[1]
    assert tuple(a.shape) == tuple(b.shape)
    av = a.detach().float().numpy() if a.dtype in (lg.float16, lg.bfloat16) else \
        a.detach().numpy()
    bv = b.detach().float().numpy() if b.dtype in (torch.float16, torch.bfloat16) else \
        b.detach().resolve_conj().numpy()
    np.testing.assert_allclose(av, bv, rtol=tol, atol=tol)


torch.manual_seed(0)
X = torch.randn(3, 4, dtype=torch.float64)
Y = torch.randn(3, 4, dtype=torch.float64)
Z = torch.rand(3, 4, dtype=torch.float64) + 0.5
A = torch.randn(4, 4, dtype=torch.float64)

# (name, torch call, llgrad call): each on torch and llgrad tensors
CASES = [
    ("addcmul", lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), (X, Y, Z)),
    ("addcdiv", lambda m, a, b, c: m.addcdiv(a, b, c, value=-2), (X, Y, Z)),
    ("addcmul broadcast", lambda m, a, b, c: m.addcmul(a, b[0], c[:, :1]), (X, Y, Z)),
    ("addcmul method", lambda m, a, b, c: a.addcmul(b, c, value=3), (X, Y, Z)),
    ("addcdiv_ method", lambda m, a, b, c: a.clone().addcdiv_(b, c, value=0.25), (X, Y, Z)),
    ("addcmul_ method", lambda m, a, b, c: a.clone().addcmul_(b, c), (X, Y, Z)),
    ("adjoint", lambda m, a: m.adjoint(a), (X,)),
    ("adjoint method", lambda m, a: a.adjoint(), (X,)),
    ("fill", lambda m, a: m.fill(a, 2.5), (X,)),
    ("fill_", lambda m, a: m.fill_(a.clone(), 1), (X,)),
    ("zero_", lambda m, a: m.zero_(a.clone()), (X,)),
    ("detach", lambda m, a: m.detach(a), (X,)),
    ("vander", lambda m, a: m.vander(a[0]), (X,)),
    ("vander N increasing", lambda m, a: m.vander(a[0], N=2, increasing=True), (X,)),
    ("round decimals", lambda m, a: m.round(a * 100, decimals=1), (X,)),
    ("round negative decimals", lambda m, a: m.round(a * 1000, decimals=-2), (X,)),
    ("round method", lambda m, a: (a * 10).round(decimals=2), (X,)),
    ("round_ method", lambda m, a: (a * 10).round_(decimals=1), (X,)),
    ("permute dims=", lambda m, a: m.permute(a, dims=(1, 0)), (X,)),
    ("Tensor.permute dims=", lambda m, a: a.permute(dims=(1, 0)), (X,)),
    ("reshape shape=", lambda m, a: m.reshape(a, shape=(4, 3)), (X,)),
    ("Tensor.reshape shape=", lambda m, a: a.reshape(shape=(2, 6)), (X,)),
    ("broadcast_to size=", lambda m, a: m.broadcast_to(a, size=(2, 3, 4)), (X,)),
    ("swapaxes axis0=", lambda m, a: m.swapaxes(a, axis0=0, axis1=1), (X,)),
    ("gather sparse_grad", lambda m, a: m.gather(a, 1, m.tensor([[0], [2], [1]]),
                                                 sparse_grad=False), (X,)),
    ("dot tensor=", lambda m, a: m.dot(a[0], tensor=a[1]), (X,)),
    ("clone memory_format", lambda m, a: m.clone(a, memory_format=m.contiguous_format), (X,)),
    ("rsub alpha", lambda m, a, b: m.rsub(a, b, alpha=2), (X, Y)),
    ("rsub number alpha", lambda m, a: m.rsub(a, 3.0, alpha=0.5), (X,)),
    ("tensor_split sections=", lambda m, a: m.tensor_split(a, sections=3, dim=1), (X,)),
    ("tensor_split indices=", lambda m, a: m.tensor_split(a, indices=[1, 3], dim=1), (X,)),
    ("tensor_split positional", lambda m, a: m.tensor_split(a, [1], 1), (X,)),
    ("hsplit sections=", lambda m, a: m.hsplit(a, sections=2), (X,)),
    ("vsplit indices=", lambda m, a: m.vsplit(a, indices=[1]), (X,)),
    ("isin test_element=", lambda m, a: m.isin(m.round(a), test_element=0.0), (X,)),
    ("einsum sublist", lambda m, a: m.einsum(a, [0, 1], a, [1, 2], [0, 2]), (A,)),
    ("einsum sublist implicit", lambda m, a, b: m.einsum(a, [0, 1], b, [0, 1]), (X, Y)),
    ("einsum sublist ellipsis", lambda m, a: m.einsum(a, [..., 0], [...]), (X,)),
    ("Tensor.expand size=", lambda m, a: a[:1].expand(size=(3, 4)), (X,)),
    ("Tensor.repeat repeats=", lambda m, a: a.repeat(repeats=(2, 1)), (X,)),
    ("Tensor.view size=", lambda m, a: a.view(size=(4, 3)), (X,)),
    ("Tensor.sum_to_size size=", lambda m, a: a.sum_to_size(size=(1, 4)), (X,)),
    ("Tensor.split split_size=", lambda m, a: a.split(split_size=2), (X,)),
    ("Tensor.flip dims=", lambda m, a: a.flip(dims=(0,)), (X,)),
    ("Tensor.where other=", lambda m, a: a.where(a > 0, other=0.5), (X,)),
    ("Tensor.copy_ other=", lambda m, a, b: a.clone().copy_(other=b), (X, Y)),
    ("cholesky_solve input2=", lambda m, a: m.cholesky_solve(
        a[:, :2], input2=m.linalg.cholesky(a @ a.mT + m.eye(4, dtype=a.dtype))), (A,)),
    ("linalg.tensorsolve other=", lambda m, a, b: m.linalg.tensorsolve(a, other=b[0]), (A, Y)),
    ("linalg.lstsq b=", lambda m, a, b: tuple(m.linalg.lstsq(a[:, :3], b=b.mT,
                                                             driver="gelsd")[:2]), (A, X)),
    ("linalg.pinv positional", lambda m, a: m.linalg.pinv(a @ a.mT, 1e-10, True), (A,)),
    ("F.l1_loss weight", lambda m, a, b, c: m.nn.functional.l1_loss(a, b, weight=c), (X, Y, Z)),
    ("F.mse_loss weight sum", lambda m, a, b, c: m.nn.functional.mse_loss(
        a, b, weight=c, reduction="sum"), (X, Y, Z)),
    ("F.mse_loss weight none", lambda m, a, b, c: m.nn.functional.mse_loss(
        a, b, weight=c, reduction="none"), (X, Y, Z)),
    ("F.elu_ scale", lambda m, a: m.nn.functional.elu_(a.clone(), 0.5, scale=2.0,
                                                       input_scale=0.5), (X,)),
    ("F.linear_cross_entropy", lambda m, a, w: m.nn.functional.linear_cross_entropy(
        a, w, m.tensor([0, 3, 1])), (X, A)),
    ("F.linear_cross_entropy bias weight mean", lambda m, a, w: m.nn.functional
     .linear_cross_entropy(a, w, m.tensor([0, 3, -100]), linear_bias=w[0],
                           weight=w[1].abs(), label_smoothing=0.0), (X, A)),
    ("F.linear_cross_entropy K-dim", lambda m, a, w: m.nn.functional.linear_cross_entropy(
        a, w.reshape(2, 2, 4), m.tensor([[0, 1], [1, 1], [0, 0]]), reduction="none"),
     (X, A)),
    ("F.linear_cross_entropy probabilities", lambda m, a, w: m.nn.functional
     .linear_cross_entropy(a, w, m.softmax(a, 1), label_smoothing=0.1), (X, A)),
]

CHUNKED = [("mean", None), ("sum", None), ("none", None), ("mean", "weight")]


@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_values_against_torch(name, fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(torch, *args)
        got = fn(lg, *[T(a) for a in args])
    same(got, want)


GRAD_CASES = [c for c in CASES if c[0] in (
    "addcmul", "addcdiv", "addcmul broadcast", "adjoint", "fill", "einsum sublist",
    "rsub alpha", "F.l1_loss weight", "F.mse_loss weight sum", "F.linear_cross_entropy",
    "F.linear_cross_entropy K-dim",
    "tensor_split sections=", "linalg.lstsq b=")]


@pytest.mark.parametrize("name,fn,args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_against_torch(name, fn, args):
    tin = [a.clone().requires_grad_(True) for a in args]
    lin = [T(a).requires_grad_(True) for a in args]
    tout = fn(torch, *tin)
    lout = fn(lg, *lin)
    touts = tout if isinstance(tout, (tuple, list)) else [tout]
    louts = lout if isinstance(lout, (tuple, list)) else [lout]
    gen = np.random.default_rng(1)
    cots = [gen.standard_normal(tuple(o.shape)) for o in touts]
    tg = torch.autograd.grad(touts, tin, [torch.tensor(c) for c in cots], allow_unused=True)
    lgr = lg.autograd.grad(louts, lin, [lg.tensor(c) for c in cots], allow_unused=True)
    for a, b in zip(lgr, tg):
        if b is None:
            assert a is None or not np.any(a.numpy())
        else:
            same(a, b, 1e-6)


@pytest.mark.parametrize("reduction,weight", CHUNKED)
def test_linear_cross_entropy_chunked_equals_reference(reduction, weight):
    x = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 4, 2, -100, 1, 3, 3])
    cw = torch.rand(5, dtype=torch.float64) + 0.5 if weight else None
    want = torch.nn.functional.linear_cross_entropy(x, w, t, weight=cw, reduction=reduction)
    lx, lw = T(x).requires_grad_(True), T(w).requires_grad_(True)
    opts = lg.nn.LinearCrossEntropyOptions(batch_chunk_size=3)
    got = lg.nn.functional.linear_cross_entropy(lx, lw, T(t), weight=None if cw is None
                                                else T(cw), reduction=reduction,
                                                options=opts)
    same(got, want)
    cot = np.random.default_rng(0).standard_normal(tuple(want.shape))
    tg = torch.autograd.grad(want, (x, w), torch.tensor(cot))
    lgr = lg.autograd.grad(got, (lx, lw), lg.tensor(cot))
    same(lgr, tg)


def test_linear_cross_entropy_options_validation():
    with pytest.raises(ValueError):
        lg.nn.LinearCrossEntropyOptions(acc_policy="fast")
    with pytest.raises(ValueError):
        lg.nn.LinearCrossEntropyOptions(chunking_method="aspect_ratio:0")
    with pytest.raises(ValueError):
        lg.nn.LinearCrossEntropyOptions(batch_chunk_size=0)
    o = lg.nn.LinearCrossEntropyOptions()
    to = torch.nn.LinearCrossEntropyOptions()
    assert (o.allow_retain_graph, o.batch_chunk_size, o.chunking_method, o.acc_policy) == \
        (to.allow_retain_graph, to.batch_chunk_size, to.chunking_method, to.acc_policy)
    with pytest.raises(RuntimeError, match="ignore_index"):
        lg.nn.functional.linear_cross_entropy(lg.ones(2, 3), lg.ones(4, 3),
                                              lg.ones(2, 4), ignore_index=0)


def test_linear_cross_entropy_loss_module_state_dict_loads_from_torch():
    tm = torch.nn.LinearCrossEntropyLoss(4, 3, out_features=(2,), bias=True).double()
    m = lg.nn.LinearCrossEntropyLoss(4, 3, out_features=(2,), bias=True, dtype=lg.float64)
    assert set(m.state_dict()) == set(tm.state_dict())
    m.load_state_dict({k: T(v) for k, v in tm.state_dict().items()})
    x = torch.randn(5, 4, dtype=torch.float64)
    t = torch.randint(0, 3, (5, 2))
    same(m(T(x), T(t)), tm(x, t))


def test_addc_errors_and_dtypes():
    i = torch.ones(2, dtype=torch.int64)
    li = lg.ones(2, dtype=lg.int64)
    same(lg.addcmul(li, li, li, value=0.5), torch.addcmul(i, i, i, value=0.5))
    same(lg.addcmul(li, li, li.double(), value=2), torch.addcmul(i, i, i.double(), value=2))
    with pytest.raises(RuntimeError, match="Integer division"):
        lg.addcdiv(li, li, li)
    with pytest.raises(RuntimeError, match="size"):
        lg.addcdiv(lg.ones(2), lg.ones(2), lg.ones(3))
    with pytest.raises(RuntimeError, match="overflow"):
        lg.addcmul(lg.ones(2), lg.ones(2), lg.ones(2), value=1 + 1j)


def test_round_decimals_int_refused_and_grad_zero():
    with pytest.raises(NotImplementedError):
        lg.round(lg.tensor([1, 2]), decimals=1)
    x = lg.tensor([1.26, 2.5], requires_grad=True)
    lg.round(x, decimals=1).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("src,dst,shape,strided", [
    ("float32", "int32", (2, 3), False), ("float32", "float16", (2, 3), False),
    ("float32", "uint8", (2, 3), False), ("float64", "float32", (3, 2), False),
    ("int16", "float32", (2, 4), False), ("uint8", "int32", (2, 8), False),
    ("float32", "int32", (3, 4), True),
])
def test_view_dtype_reinterprets_bytes(src, dst, shape, strided):
    t = (torch.randn(*shape) * 100).to(getattr(torch, src))
    if strided:
        t = t.t()
    x = T(t.contiguous())
    if strided:
        x = T(t.t().contiguous()).t()
    want = t.view(getattr(torch, dst))
    got = x.view(getattr(lg, dst))
    assert tuple(got.shape) == tuple(want.shape) and tuple(got.stride()) == want.stride()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    same(x.view(dtype=getattr(lg, dst)), want)


@pytest.mark.parametrize("fn,pattern", [
    (lambda m: m.zeros(2, 4).t().view(m.float16), "stride"),
    (lambda m: m.zeros(()).view(m.float16), "dim"),
    (lambda m: m.zeros(9, dtype=m.uint8)[1:5].view(m.float32), "storage_offset"),
    (lambda m: m.zeros(3, dtype=m.uint8).view(m.float32), "size"),
])
def test_view_dtype_errors_as_torch(fn, pattern):
    with pytest.raises(RuntimeError, match=pattern):
        fn(torch)
    with pytest.raises(RuntimeError, match=pattern):
        fn(lg)


def test_out_dtype_matmuls():
    a = torch.randn(3, 4).half()
    b = torch.randn(4, 2).half()
    want = a.float() @ b.float()
    same(lg.mm(T(a), T(b), out_dtype=lg.float32), want, 1e-5)
    same(lg.addmm(T(want), T(a), T(b), out_dtype=lg.float32), want + want, 1e-5)
    same(lg.bmm(T(a)[None], T(b)[None], out_dtype=lg.float32), want[None], 1e-5)
    same(lg.baddbmm(T(want)[None], T(a)[None], T(b)[None], out_dtype=lg.float32),
         2 * want[None], 1e-5)
    assert lg.mm(T(a), T(b), out_dtype=lg.float16).dtype == lg.float16
    with pytest.raises(RuntimeError, match="out_dtype"):
        lg.mm(lg.ones(2, 2), lg.ones(2, 2), out_dtype=lg.float16)


def test_stft_align_to_window():
    x = torch.randn(2, 50, dtype=torch.float64)
    for win in (8, 7, 16):
        w = torch.hann_window(win, dtype=torch.float64)
        for align in (True, False):
            want = torch.stft(x, 16, hop_length=4, win_length=win, window=w, center=False,
                              return_complex=True, align_to_window=align)
            got = lg.stft(T(x), 16, hop_length=4, win_length=win, window=T(w), center=False,
                          return_complex=True, align_to_window=align)
            same(got, want, 1e-9)
    with pytest.raises(RuntimeError, match="align_to_window"):
        lg.stft(T(x), 16, return_complex=True, align_to_window=True)


def test_result_type_and_isin_keywords():
    i64 = torch.ones(1, dtype=torch.int64)
    assert lg.result_type(scalar=1.0, tensor=T(i64)).name == \
        str(torch.result_type(scalar=1.0, tensor=i64)).split(".")[1]
    assert lg.result_type(scalar1=1, scalar2=2.0).name == \
        str(torch.result_type(scalar1=1, scalar2=2.0)).split(".")[1]
    assert lg.result_type(tensor=T(i64), other=lg.ones(2)).name == "float32"
    same(lg.isin(element=1.0, test_elements=lg.ones(3)),
         torch.isin(element=1.0, test_elements=torch.ones(3)))


def test_type_kwargs_and_pin_memory():
    x = lg.ones(2)
    assert x.type(dtype=lg.float64).dtype == lg.float64
    assert x.type(lg.int32, **{"async": False}).dtype == lg.int32
    with pytest.raises(TypeError):
        x.type(lg.float64, foo=1)
    same(lg.logspace(0, 1, 3, pin_memory=False), torch.logspace(0, 1, 3, pin_memory=False))
    with pytest.raises(RuntimeError):
        lg.logspace(0, 1, 3, pin_memory=True)
    assert lg.randint_like(x, 5, pin_memory=False).shape == (2,)


def test_small_names_and_flags():
    assert lg.is_distributed(lg.ones(1)) is torch.is_distributed(torch.ones(1))
    assert lg.ones(1).is_distributed() is False
    assert isinstance(lg.has_lapack, bool) and lg.has_lapack and lg.has_spectral
    assert lg.has_openmp is False and isinstance(lg.has_mkl, bool)
    assert issubclass(lg.FatalError, Exception)
    cap = lg.to_dlpack(lg.arange(3.0))
    np.testing.assert_array_equal(np.from_dlpack(_Capsule(cap)), [0.0, 1.0, 2.0])
    y = lg.ones(3, requires_grad=True) * 2
    assert lg.detach_(y) is y and not y.requires_grad
    with pytest.raises(RuntimeError, match="matrices"):
        lg.adjoint(lg.ones(3))
    with pytest.raises(RuntimeError, match="one-dimensional"):
        lg.vander(lg.ones(2, 2))
    same(lg.vander(lg.tensor([1, 2, 3], dtype=lg.int32)),
         torch.vander(torch.tensor([1, 2, 3], dtype=torch.int32)))


class _Capsule:
    """A DLPack producer over a capsule (np.from_dlpack asks an object for one)."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, *a, **k):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                        ((3, 7), True), ((3, 3, 3), False)])
def test_fill_diagonal_(shape, wrap):
    t = torch.zeros(shape)
    t.fill_diagonal_(5, wrap=wrap)
    x = lg.zeros(*shape)
    assert x.fill_diagonal_(5, wrap=wrap) is x
    same(x, t)


def test_fill_diagonal_errors_and_grad():
    for fn, pat in [(lambda m: m.zeros(3).fill_diagonal_(1), "larger than 1"),
                    (lambda m: m.zeros(3, 3, 4).fill_diagonal_(1), "equal length")]:
        with pytest.raises(RuntimeError, match=pat):
            fn(torch)
        with pytest.raises(RuntimeError, match=pat):
            fn(lg)
    same(lg.zeros(2, 2, dtype=lg.int32).fill_diagonal_(1.5),
         torch.zeros(2, 2, dtype=torch.int32).fill_diagonal_(1.5))
    x = lg.ones(2, 2, requires_grad=True)
    y = x * 3
    y.fill_diagonal_(0)
    y.sum().backward()
    assert x.grad.tolist() == [[0.0, 3.0], [3.0, 0.0]]


def test_legacy_new_resize_and_resize_as():
    x = lg.ones(2, 3, dtype=lg.float64)
    t = torch.ones(2, 3, dtype=torch.float64)
    assert x.new().shape == t.new().shape and x.new().dtype == lg.float64
    assert x.new(4, 5).shape == t.new(4, 5).shape
    same(x.new([1, 2]), t.new([1, 2]))
    with pytest.raises(TypeError):
        x.new(lg.ones(2))                  # a float32 tensor into a float64 constructor
    with pytest.warns(UserWarning, match="deprecated"):
        r = x.resize(3, 2)
    same(r, t.resize(3, 2))
    with pytest.warns(UserWarning):
        same(x.resize_as(lg.ones(6)), t.resize_as(torch.ones(6)))
    with pytest.raises(RuntimeError, match="resize"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x.resize(4)
    z = lg.zeros(3)
    z.resize_(size=(2,))
    z.resize_as_(the_template=lg.ones(2, 2))
    assert z.shape == (2, 2)


def test_as_strided_and_conj_physical_in_place():
    x = lg.arange(6.0)
    assert lg.as_strided_(x, (2, 2), (1, 2)) is x
    same(x, torch.as_strided_(torch.arange(6.0), (2, 2), (1, 2)))
    leaf = lg.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.as_strided_((2,), (1,))
    base = lg.arange(4.0, requires_grad=True)
    v = base * 1
    v.as_strided_((2,), (2,), 1)
    v.sum().backward()
    assert base.grad.tolist() == [0.0, 1.0, 0.0, 1.0]
    c = torch.tensor([1 + 2j, 3 - 1j])
    lc = T(c)
    assert lg.conj_physical_(lc) is lc
    same(lc, torch.conj_physical_(c.clone()))
    r = lg.ones(2)
    same(r.conj_physical_(), torch.ones(2))


def test_share_memory_moves_storage_with_views():
    x = lg.arange(6.0)
    v = x[2:]
    assert not x.is_shared()
    assert x.share_memory_() is x
    assert x.is_shared() and v.is_shared()
    v[0] = 100.0
    assert x[2].item() == 100.0
    assert x.tolist() == [0.0, 1.0, 100.0, 3.0, 4.0, 5.0]
    assert (x + 1).tolist() == [1.0, 2.0, 101.0, 4.0, 5.0, 6.0]


def test_hardshrink_prelu_methods():
    t = torch.randn(2, 3, 4)
    w = torch.rand(3)
    same(T(t).hardshrink(0.3), t.hardshrink(0.3))
    same(T(t).prelu(T(w)), t.prelu(w))


def test_gumbel_softmax():
    lg.manual_seed(0)
    logits = lg.randn(4, 5, requires_grad=True)
    y = lg.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(y.sum(-1).detach().numpy(), 1.0, rtol=1e-6)
    h = lg.nn.functional.gumbel_softmax(logits, hard=True, dim=0)
    assert sorted(set(h.detach().numpy().ravel().tolist())) == [0.0, 1.0]
    assert h.sum(0).tolist() == [1.0] * 5
    (h * lg.arange(20.0).reshape(4, 5)).sum().backward()
    assert logits.grad is not None and np.isfinite(logits.grad.numpy()).all()
    with pytest.warns(UserWarning, match="eps"):
        lg.nn.functional.gumbel_softmax(logits, eps=1e-5)


@pytest.mark.parametrize("name,shape", [
    ("LazyBatchNorm1d", (4, 3)), ("LazyBatchNorm2d", (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (2, 3, 2, 2, 2)), ("LazyInstanceNorm1d", (2, 3, 5)),
    ("LazyInstanceNorm2d", (2, 3, 4, 4)), ("LazyInstanceNorm3d", (2, 3, 2, 2, 3))])
def test_lazy_norms_like_torch(name, shape):
    tm = getattr(torch.nn, name)().double()
    m = getattr(lg.nn, name)(dtype=lg.float64)
    assert m.has_uninitialized_params()
    x = torch.randn(*shape, dtype=torch.float64)
    same(m(T(x)), tm(x))
    assert type(m).__name__ == type(tm).__name__
    assert m.num_features == tm.num_features
    for k, v in tm.state_dict().items():
        same(m.state_dict()[k], v)
    nb = getattr(lg.nn, name)(affine=True, bias=False)
    nb(lg.randn(*shape))
    assert nb.bias is None and nb.weight.shape == (shape[1],)


def test_nll_loss_2d_and_rnn_cell_base():
    assert issubclass(lg.nn.NLLLoss2d, lg.nn.NLLLoss)
    x = torch.randn(2, 3, 4, 4).log_softmax(1)
    t = torch.randint(0, 3, (2, 4, 4))
    same(lg.nn.NLLLoss2d()(T(x), T(t)), torch.nn.NLLLoss2d()(x, t))
    c = lg.nn.RNNCellBase(3, 4, True, num_chunks=2)
    assert c.weight_ih.shape == torch.nn.RNNCellBase(3, 4, True, num_chunks=2).weight_ih.shape


def test_adaptive_log_softmax_against_torch():
    torch.manual_seed(0)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0,
                                             head_bias=True).double()
    m = lg.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True,
                                         dtype=lg.float64)
    m.load_state_dict({k: T(v) for k, v in tm.state_dict().items()})
    x = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 4, 7, 9, 2, 5])
    want = tm(x, t)
    lx = T(x).requires_grad_(True)
    got = m(lx, T(t))
    same(got.output, want.output)
    same(got.loss, want.loss)
    want.loss.backward()
    got.loss.backward()
    same(lx.grad, x.grad)
    same(m.log_prob(T(x)), tm.log_prob(x))
    same(m.predict(T(x)), tm.predict(x))
    same(m(T(x[0]), T(t[0])).output, tm(x[0], t[0]).output)
    with pytest.raises(RuntimeError, match="Target values"):
        m(T(x), lg.tensor([0, 1, 2, 3, 4, 10]))
    with pytest.raises(ValueError):
        lg.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [6, 3])


def test_stack_dataset_and_weighted_sampler():
    from llgrad.utils.data import StackDataset, TensorDataset, WeightedRandomSampler
    d = StackDataset(TensorDataset(lg.arange(4)), [10, 11, 12, 13])
    assert len(d) == 4 and d[1][1] == 11 and d.__getitems__([0, 2])[1][1] == 12
    assert StackDataset(a=[1, 2], b=[3, 4])[1] == {"a": 2, "b": 4}
    with pytest.raises(ValueError):
        StackDataset([1], [1, 2])
    with pytest.raises(ValueError):
        StackDataset([1], b=[1])
    s = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 50)
    drawn = list(s)
    assert len(drawn) == len(s) == 50 and set(drawn) <= {1, 3}
    assert sorted(WeightedRandomSampler([1, 1, 1], 3, replacement=False)) == [0, 1, 2]
    with pytest.raises(ValueError):
        WeightedRandomSampler([1.0], 0)


def test_compile_keeps_new_keywords_and_breaks_on_one_hot():
    f = lg.compile(lambda x: lg.round(x, decimals=1) + x.permute(dims=(1, 0)).sum())
    x = lg.tensor([[1.26, 2.5], [0.04, 3.33]])
    np.testing.assert_allclose(f(x).numpy(), (lg.round(x, decimals=1) +
                                              x.permute(1, 0).sum()).numpy())
    g = lg.compile(lambda x: lg.nn.functional.one_hot(x) * 2)
    assert g(lg.tensor([0, 2])).tolist() == [[2, 0, 0], [0, 0, 2]]
    assert any("one_hot" in b for b in g.graph_breaks)
    h = lg.compile(lambda a, b, c: lg.addcmul(a, b, c, value=2))
    a, b, c = (lg.randn(3) for _ in range(3))
    np.testing.assert_allclose(h(a, b, c).numpy(), (a + 2 * b * c).numpy(), rtol=1e-6)


def test_gradcheck_addcdiv_vander():
    a, b, c = (lg.tensor(v.numpy(), requires_grad=True) for v in (X, Y, Z))
    assert lg.autograd.gradcheck(lambda a, b, c: lg.addcdiv(a, b, c, value=0.7), (a, b, c))
    v = lg.tensor([0.5, -1.0, 2.0], dtype=lg.float64, requires_grad=True)
    assert lg.autograd.gradcheck(lambda v: lg.vander(v, N=4), (v,))


def test_opinfo_residuals_fixed():
    """silu of complex, gradient with spacing=None, matrix_power(A, 0) requiring grad,
    tile with an empty tuple, lstsq's residuals requiring grad, pinv's positional form."""
    z = torch.tensor([1 + 1j, -0.5 + 2j], dtype=torch.complex128)
    same(lg.nn.functional.silu(T(z)), torch.nn.functional.silu(z))
    v = torch.tensor([1.0, 4.0, 9.0, 16.0])
    same(lg.gradient(T(v), spacing=None)[0], torch.gradient(v, spacing=None)[0])
    a = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    la = T(a).requires_grad_(True)
    r, lr = torch.linalg.matrix_power(a, 0), lg.linalg.matrix_power(la, 0)
    assert lr.requires_grad == r.requires_grad
    same(lr, r)
    lr.sum().backward()
    assert not np.any(la.grad.numpy())
    same(lg.tile(lg.tensor(3.0), ()), torch.tile(torch.tensor(3.0), ()))
    res = lg.linalg.lstsq(la, T(a.detach()[:, :2]))
    tres = torch.linalg.lstsq(a, a.detach()[:, :2])
    assert [t.requires_grad for t in res] == [t.requires_grad for t in tres]
