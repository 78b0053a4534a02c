"""Convolutions (1-3 d, transposed, groups, dilation, 'same', padding modes), pooling (max
with indices, unpooling, average, adaptive average/max, LP, fractional) and `F.pad`'s modes
against PyTorch: values, input and parameter gradients in float64, module state dicts,
gradcheck and gradgradcheck on small cases, compiled code against eager, and errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")
F = lg.nn.functional
TF = torch.nn.functional
RNG = np.random.default_rng(7)


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [z for y in o for z in _flat(y)]
    return [] if o is None else [o]


def both(fn, arrays, tol=1e-10):
    """fn(lib, *tensors) on llgrad and torch: outputs (values, shapes, dtypes) and the
    gradients of a random weighted sum of the float outputs for every float input."""
    res = {}
    for lib in (lg, torch):
        xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        outs = _flat(fn(lib, *xs))
        diff = [o for o in outs if o.dtype in (lg.float64, torch.float64) and o.requires_grad]
        if diff:
            r = np.random.default_rng(1)
            sum((o * lib.tensor(r.standard_normal(tuple(o.shape)))).sum()
                for o in diff).backward()
        res[lib] = ([o.detach().numpy() for o in outs],
                    [x.grad.numpy() for x in xs if getattr(x, "grad", None) is not None])
    assert len(res[lg][0]) == len(res[torch][0])
    for a, b in zip(res[lg][0], res[torch][0]):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    assert len(res[lg][1]) == len(res[torch][1])
    for a, b in zip(res[lg][1], res[torch][1]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def both_modules(make, x, *, modes=("train", "eval"), tol=1e-10, call=None):
    """The same module built in llgrad and torch (torch's initialized state loaded into
    llgrad's): state_dict keys and shapes, outputs, input and parameter gradients."""
    tm = make(torch)
    lm = make(lg)
    tsd = tm.state_dict()
    assert list(lm.state_dict().keys()) == list(tsd.keys())
    for k, v in lm.state_dict().items():
        assert tuple(v.shape) == tuple(tsd[k].shape), k
    lm.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in tsd.items()})
    for mode in modes:
        getattr(tm, mode)()
        getattr(lm, mode)()
        tm.zero_grad()
        lm.zero_grad()
        xt = torch.tensor(x, requires_grad=True)
        xl = lg.tensor(x, requires_grad=True)
        ot = call(tm, xt) if call else tm(xt)
        ol = call(lm, xl) if call else lm(xl)
        np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=tol, atol=tol)
        g = np.random.default_rng(2).standard_normal(tuple(ot.shape))
        (ot * torch.tensor(g)).sum().backward()
        (ol * lg.tensor(g)).sum().backward()
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)
        for (name, pl), (_, pt) in zip(lm.named_parameters(), tm.named_parameters()):
            np.testing.assert_allclose(pl.grad.numpy(), pt.grad.numpy(), rtol=tol, atol=tol,
                                       err_msg=name)
        for (name, bl), (_, bt) in zip(lm.named_buffers(), tm.named_buffers()):
            np.testing.assert_allclose(bl.numpy(), bt.numpy(), rtol=tol, atol=tol,
                                       err_msg=name)
    return lm, tm


def rn(*shape):
    return RNG.standard_normal(shape)


# --------------------------------------------------------------------------------------
# Convolutions
# --------------------------------------------------------------------------------------

CONVS = [
    ("conv1d", (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    ("conv1d", (4, 9), (3, 4, 2), dict(padding="same", dilation=3)),
    ("conv1d", (2, 4, 9), (3, 4, 4), dict(padding="valid", dilation=2)),
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 2),
                                                dilation=(1, 2))),
    ("conv2d", (3, 6, 5), (2, 3, 4, 3), dict(padding="same")),
    ("conv3d", (2, 4, 5, 6, 7), (6, 2, 3, 2, 3), dict(stride=(2, 1, 2), padding=(1, 0, 1),
                                                      dilation=(1, 2, 1), groups=2)),
    ("conv3d", (2, 3, 4, 5, 4), (2, 3, 2, 3, 2), dict(padding="same")),
    ("conv3d", (3, 4, 4, 5), (2, 3, 2, 2, 3), dict(stride=2)),
]


@pytest.mark.parametrize("name,xs,ws,kw", CONVS, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_matches_torch(name, xs, ws, kw, bias):
    arrays = [rn(*xs), rn(*ws)] + ([rn(ws[0])] if bias else [])
    both(lambda L, x, w, *b: getattr(L.nn.functional, name)(x, w, *b, **kw), arrays)


TRANSPOSED = [
    ("conv_transpose1d", (2, 4, 7), (4, 3, 3), dict(stride=3, padding=1, output_padding=2)),
    ("conv_transpose1d", (4, 5), (4, 1, 2), dict(groups=2, dilation=3, output_padding=1)),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 3, 2), dict(stride=(2, 3), padding=(1, 2),
                                                          output_padding=(1, 0), groups=2,
                                                          dilation=(1, 2))),
    ("conv_transpose2d", (3, 4, 4), (3, 2, 2, 2), dict(stride=2)),
    ("conv_transpose3d", (1, 2, 3, 4, 3), (2, 2, 2, 3, 2), dict(stride=2, padding=1,
                                                                output_padding=1)),
    ("conv_transpose3d", (2, 4, 2, 3, 2), (4, 1, 2, 2, 2), dict(groups=4, dilation=2)),
]


@pytest.mark.parametrize("name,xs,ws,kw", TRANSPOSED, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose_matches_torch(name, xs, ws, kw, bias):
    groups = kw.get("groups", 1)
    arrays = [rn(*xs), rn(*ws)] + ([rn(ws[1] * groups)] if bias else [])
    both(lambda L, x, w, *b: getattr(L.nn.functional, name)(x, w, *b, **kw), arrays)


@pytest.mark.parametrize("cls,args,kw,shape", [
    ("Conv1d", (4, 6, 3), dict(stride=2, padding=1, groups=2), (2, 4, 9)),
    ("Conv1d", (3, 2, 4), dict(padding="same", padding_mode="reflect"), (2, 3, 8)),
    ("Conv2d", (3, 4, (3, 2)), dict(padding=(1, 2), padding_mode="circular"), (2, 3, 6, 5)),
    ("Conv2d", (2, 4, 3), dict(padding=1, padding_mode="replicate", bias=False), (2, 6, 5)),
    ("Conv3d", (2, 4, 2), dict(stride=(1, 2, 1), padding=1, dilation=2), (2, 2, 5, 6, 5)),
    ("Conv3d", (2, 2, 3), dict(padding="same", padding_mode="reflect"), (1, 2, 4, 4, 5)),
    ("ConvTranspose1d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, groups=2),
     (2, 4, 7)),
    ("ConvTranspose2d", (3, 2, (3, 2)), dict(stride=2, dilation=(1, 2), bias=False),
     (2, 3, 4, 5)),
    ("ConvTranspose3d", (2, 4, 2), dict(stride=(2, 1, 2), padding=(0, 1, 0)),
     (1, 2, 3, 3, 2)),
], ids=lambda v: str(v)[:40])
def test_conv_modules_match_torch(cls, args, kw, shape):
    lm, tm = both_modules(lambda L: getattr(L.nn, cls)(*args, **kw, dtype=L.float64),
                          rn(*shape), modes=("train",))
    assert repr(lm).replace("llgrad.", "") == repr(tm).replace("torch.", "")


def test_conv_modules_float64_state_and_init():
    """Parameter shapes and initialization bounds are PyTorch's (kaiming_uniform with
    a=sqrt(5), bias U(-1/sqrt(fan_in), ...) with fan_in from the weight's dims 1 and up)."""
    lg.manual_seed(0)
    m = lg.nn.ConvTranspose2d(6, 4, 3, groups=2)
    assert tuple(m.weight.shape) == (6, 2, 3, 3) and tuple(m.bias.shape) == (4,)
    bound = 1 / np.sqrt(2 * 9)
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    assert np.abs(m.weight.detach().numpy()).max() <= bound     # gain sqrt(1/3) * sqrt(3)
    m3 = lg.nn.Conv3d(4, 8, (1, 2, 3), groups=4, dtype=lg.float64)
    assert tuple(m3.weight.shape) == (8, 1, 1, 2, 3) and m3.weight.dtype == lg.float64


def test_conv_transpose_output_size_argument():
    x = rn(1, 3, 5, 4)
    tm = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    lm = lg.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    lm.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    for size in [(9, 7), (10, 8), (1, 2, 10, 7)]:
        ot = tm(torch.tensor(x, dtype=torch.float32), output_size=size)
        ol = lm(lg.tensor(x, dtype=lg.float32), output_size=size)
        assert tuple(ol.shape) == tuple(ot.shape)
        np.testing.assert_allclose(ol.detach().numpy(), ot.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    with pytest.raises(ValueError, match="requested an output size"):
        lm(lg.tensor(x, dtype=lg.float32), output_size=(12, 7))


@pytest.mark.slow
def test_conv_gradcheck_and_double_backward():
    x = lg.tensor(rn(1, 2, 3, 3, 2), requires_grad=True)
    w = lg.tensor(rn(2, 1, 2, 2, 1), requires_grad=True)
    b = lg.tensor(rn(2), requires_grad=True)
    assert lg.autograd.gradcheck(lambda x, w, b: F.conv3d(x, w, b, padding=1, groups=2),
                                 (x, w, b))
    assert lg.autograd.gradgradcheck(lambda x, w: F.conv3d(x, w, stride=2, groups=2), (x, w))
    xt = lg.tensor(rn(1, 2, 3, 2), requires_grad=True)
    wt = lg.tensor(rn(2, 2, 2, 2), requires_grad=True)
    assert lg.autograd.gradcheck(
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        (xt, wt, b))
    assert lg.autograd.gradgradcheck(lambda x, w: F.conv_transpose2d(x, w, stride=2),
                                     (xt, wt))
    x1 = lg.tensor(rn(2, 3, 5), requires_grad=True)
    w1 = lg.tensor(rn(3, 1, 3), requires_grad=True)
    assert lg.autograd.gradgradcheck(lambda x, w: F.conv_transpose1d(x, w, groups=3), (x1, w1))


def test_conv_double_backward_matches_torch():
    arrays = [rn(1, 2, 3, 4, 3), rn(3, 2, 2, 2, 2)]
    out = {}
    for lib in (lg, torch):
        x, w = (lib.tensor(a, requires_grad=True) for a in arrays)
        y = lib.nn.functional.conv3d(x, w, padding=1)
        gx, gw = lib.autograd.grad((y * y).sum(), (x, w), create_graph=True)
        hx, hw = lib.autograd.grad((gx * gx).sum() + gw.sum(), (x, w))
        out[lib] = [t.detach().numpy() for t in (gx, gw, hx, hw)]
    for a, b in zip(out[lg], out[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_conv_compiled_matches_eager():
    x, w, b = lg.randn(2, 2, 4, 5, 4), lg.randn(4, 1, 2, 3, 2), lg.randn(4)
    xt, wt = lg.randn(2, 3, 4, 3), lg.randn(3, 2, 3, 3)

    def f(x, w, b, xt, wt):
        a = F.conv3d(x, w, b, padding=(1, 0, 1), groups=2)
        c = F.conv_transpose2d(xt, wt, stride=2, padding=1, output_padding=1)
        return a.square().mean() + c.sin().sum()
    ins = [t.requires_grad_() for t in (x, w, b, xt, wt)]
    eager = f(*ins)
    ge = lg.autograd.grad(eager, ins)
    cf = lg.compile(f)
    comp = cf(*ins)
    gc = lg.autograd.grad(comp, ins)
    assert cf.graph_breaks == []
    np.testing.assert_allclose(comp.item(), eager.item(), rtol=1e-5)
    for a, b_ in zip(gc, ge):
        np.testing.assert_allclose(a.numpy(), b_.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.conv3d(lg.zeros(1, 3, 4, 4, 4), lg.zeros(2, 2, 2, 2, 2)), RuntimeError,
     r"expected input\[1, 3, 4, 4, 4\] to have 2 channels"),
    (lambda: F.conv3d(lg.zeros(1, 1, 2, 4, 4), lg.zeros(1, 1, 3, 2, 2)), RuntimeError,
     "Kernel size can't be greater"),
    (lambda: F.conv3d(lg.zeros(1, 4, 4), lg.zeros(1, 1, 2, 2, 2)), RuntimeError,
     "Expected 4D"),
    (lambda: F.conv1d(lg.zeros(1, 2, 5), lg.zeros(2, 2, 3), stride=2, padding="same"),
     ValueError, "strided"),
    (lambda: F.conv2d(lg.zeros(1, 2, 5, 5), lg.zeros(2, 2, 3, 3), padding="full"),
     ValueError, "Invalid padding string"),
    (lambda: F.conv_transpose2d(lg.zeros(1, 2, 3, 3), lg.zeros(2, 2, 3, 3), stride=2,
                                output_padding=2), RuntimeError, "output padding must be"),
    (lambda: F.conv_transpose1d(lg.zeros(1, 3, 4), lg.zeros(2, 2, 3)), RuntimeError,
     "to have 2 channels"),
    (lambda: F.conv_transpose1d(lg.zeros(1, 2, 1), lg.zeros(2, 2, 1), padding=1),
     RuntimeError, "too small"),
    (lambda: lg.nn.Conv2d(2, 2, 3, padding_mode="mirror"), ValueError, "padding_mode"),
    (lambda: lg.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"), ValueError,
     "zeros"),
    (lambda: lg.nn.Conv3d(3, 2, 3, groups=2), ValueError, "divisible by groups"),
])
def test_conv_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --------------------------------------------------------------------------------------
# Padding
# --------------------------------------------------------------------------------------

PADS = [
    ((2, 3, 5), (2, 3), "reflect"), ((3, 5), (4, 2), "replicate"),
    ((2, 3, 5, 4), (1, 2, 3, 0), "replicate"), ((2, 3, 5, 4), (1, 2, 3, 4), "circular"),
    ((3, 4, 5, 4), (1, 2, -1, 2, 2, 1), "reflect"), ((2, 3, 4, 5, 4), (1, -2, 3, 0, 2, 2),
                                                     "circular"),
    ((1, 2, 5), (1, -2), "circular"), ((1, 2, 5), (-1, 3), "reflect"),
    ((2, 3, 4), (1, 2), "constant"), ((2, 3, 4, 2, 3), (1, 1, 1, 1, 1, 1), "replicate"),
]


@pytest.mark.parametrize("shape,amounts,mode", PADS, ids=str)
def test_pad_modes_match_torch(shape, amounts, mode):
    both(lambda L, x: L.nn.functional.pad(x, amounts, mode=mode), [rn(*shape)])


@pytest.mark.parametrize("cls,arg,shape", [
    ("ReflectionPad1d", (2, 1), (2, 3, 5)), ("ReflectionPad2d", 2, (3, 4, 5)),
    ("ReflectionPad3d", (1, 0, 2, 1, 1, 1), (1, 2, 3, 4, 3)),
    ("ReplicationPad1d", 3, (3, 4)), ("ReplicationPad2d", (1, 2, 0, 3), (2, 2, 3, 3)),
    ("ReplicationPad3d", 1, (2, 2, 2, 3)), ("ZeroPad1d", (1, 2), (2, 3)),
    ("ZeroPad2d", (1, -1, 2, 0), (1, 2, 3, 3)), ("ZeroPad3d", 1, (1, 2, 2, 2)),
    ("CircularPad1d", (2, 3), (2, 2, 4)), ("CircularPad2d", 1, (1, 3, 3)),
    ("CircularPad3d", (1, 1, 0, 2, 1, 0), (1, 1, 2, 3, 2)),
], ids=lambda v: str(v)[:30])
def test_padding_modules_match_torch(cls, arg, shape):
    lm, tm = both_modules(lambda L: getattr(L.nn, cls)(arg), rn(*shape), modes=("train",))
    assert repr(lm) == repr(tm)
    both_modules(lambda L: L.nn.ConstantPad2d((1, 2, 0, 1), 3.5), rn(2, 3, 3),
                 modes=("train",))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.pad(lg.zeros(1, 3, 4), (4, 1), mode="reflect"), RuntimeError,
     "less than the corresponding input dimension"),
    (lambda: F.pad(lg.zeros(1, 3, 4), (5, 1), mode="circular"), RuntimeError,
     "wrapping around more than once"),
    (lambda: F.pad(lg.zeros(2, 2, 3, 4), (1, 1), mode="reflect"), NotImplementedError,
     "Padding size 2 is not supported for 4D"),
    (lambda: F.pad(lg.zeros(1, 3, 4), (1, 1), mode="mirror"), NotImplementedError,
     "Unrecognised padding mode"),
    (lambda: F.pad(lg.zeros(1, 3, 4), (1, 1), mode="reflect", value=2.0), RuntimeError,
     "doesn't take in value"),
])
def test_pad_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------

X1, X2, X3 = rn(2, 3, 9), rn(2, 3, 7, 6), rn(2, 3, 5, 6, 7)

POOLS = [
    ("max_pool1d", X1, (3,), dict(stride=2, padding=1, ceil_mode=True, return_indices=True)),
    ("max_pool1d", X1[0], (2,), dict(dilation=2, return_indices=True)),
    ("max_pool2d", X2, (3,), dict(stride=2, padding=1, return_indices=True)),
    ("max_pool2d", X2[0], ((2, 3),), dict(stride=(1, 2), dilation=(2, 1))),
    ("max_pool3d", X3, (2,), dict()),
    ("max_pool3d", X3, ((2, 3, 2),), dict(stride=(1, 2, 2), padding=(1, 1, 0),
                                          dilation=(2, 1, 1), ceil_mode=True,
                                          return_indices=True)),
    ("max_pool3d", X3[0], (3,), dict(stride=2, padding=1, return_indices=True)),
    ("max_pool2d_with_indices", X2, (2,), dict(ceil_mode=True)),
    ("max_pool3d_with_indices", X3, (2,), dict(stride=1)),
    ("avg_pool1d", X1, (3,), dict(stride=2, padding=1, ceil_mode=True,
                                  count_include_pad=False)),
    ("avg_pool2d", X2, (3,), dict(stride=2, padding=1, ceil_mode=True)),
    ("avg_pool2d", X2[0], ((2, 3),), dict(stride=(1, 2), divisor_override=5)),
    ("avg_pool3d", X3, ((2, 3, 2),), dict(stride=(1, 2, 2), padding=(1, 1, 0), ceil_mode=True,
                                          count_include_pad=False)),
    ("avg_pool3d", X3, (3,), dict(stride=2, padding=1, ceil_mode=True, divisor_override=5)),
    ("avg_pool3d", X3[0], (2,), dict()),
    ("adaptive_avg_pool1d", X1, (4,), dict()),
    ("adaptive_avg_pool2d", X2, ((3, None),), dict()),
    ("adaptive_avg_pool3d", X3, ((2, 4, 3),), dict()),
    ("adaptive_avg_pool3d", X3[0], ((None, 4, 9),), dict()),
    ("adaptive_max_pool1d", X1, (4,), dict(return_indices=True)),
    ("adaptive_max_pool2d", X2, ((3, 4),), dict(return_indices=True)),
    ("adaptive_max_pool2d", X2, ((9, 13),), dict(return_indices=True)),
    ("adaptive_max_pool3d", X3, ((2, 4, 3),), dict(return_indices=True)),
    ("adaptive_max_pool3d", X3[0], (2,), dict()),
    ("adaptive_max_pool2d_with_indices", X2[0], (3,), dict()),
    ("lp_pool1d", np.abs(X1) + .1, (3.0, 2), dict(ceil_mode=True)),
    ("lp_pool2d", np.abs(X2) + .1, (2, 3), dict(stride=2)),
    ("lp_pool3d", np.abs(X3) + .1, (1.5, 2), dict()),
]


@pytest.mark.parametrize("name,x,args,kw", POOLS, ids=lambda v: str(v)[:30])
def test_pooling_matches_torch(name, x, args, kw):
    both(lambda L, a: getattr(L.nn.functional, name)(a, *args, **kw), [x])


def test_max_pool_ties_and_nan_follow_torch():
    x = np.zeros((1, 1, 2, 4, 4))
    x[0, 0, 1, 2, 2] = np.nan
    both(lambda L, a: L.nn.functional.max_pool3d(a, 2, return_indices=True), [x])
    both(lambda L, a: L.nn.functional.adaptive_max_pool3d(a, 3, return_indices=True),
         [np.ones((1, 2, 3, 4, 5))])


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_inverts_max_pool(n):
    x = [X1, X2, X3][n - 1]
    both(lambda L, a: getattr(L.nn.functional, f"max_unpool{n}d")(
        *getattr(L.nn.functional, f"max_pool{n}d")(a, 2, stride=2, return_indices=True), 2,
        stride=2, output_size=a.shape[2:]), [x])
    both(lambda L, a: getattr(L.nn.functional, f"max_unpool{n}d")(
        *getattr(L.nn.functional, f"max_pool{n}d")(a[0], 3, stride=2, padding=1,
                                                   return_indices=True), 3, 2, 1,
        output_size=a.shape[-n:]), [x])


@pytest.mark.parametrize("n,k,out", [(2, 2, (4, 3)), (2, (3, 2), (5, 4)), (3, 2, (3, 4, 5)),
                                     (3, (2, 1, 3), (2, 5, 2))])
def test_fractional_max_pool_with_samples_matches_torch(n, k, out):
    x = [X2, X3][n - 2]
    u = RNG.uniform(size=(2, 3, n))
    both(lambda L, a, s: getattr(L.nn.functional, f"fractional_max_pool{n}d")(
        a, k, output_size=out, _random_samples=s.detach(), return_indices=True),
        [x, u])
    ratio = lg.nn.functional.fractional_max_pool2d(lg.tensor(X2), 2, output_ratio=0.5)
    assert tuple(ratio.shape) == (2, 3, 3, 3)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("rows", [1, 2, 3, 5])
def test_fractional_max_pool_samples_shape_rules_match_torch(n, batched, rows):
    """_random_samples is (at least N, C, n): N = 1 for an unbatched input, and rows past
    the batch are not used (torch's ModuleInfo gives (2, C, 3) for a (C, D, H, W) input)."""
    x = RNG.standard_normal(((3,) if batched else ()) + (4,) + (8,) * n)
    for sshape in [(rows, 4, n), (rows, 4, 5 - n), (rows, 3, n), (4, n)]:
        u = RNG.uniform(size=sshape)
        fn = f"fractional_max_pool{n}d"
        try:
            want = getattr(torch.nn.functional, fn)(torch.tensor(x), 2, output_size=3,
                                                     _random_samples=torch.tensor(u),
                                                     return_indices=True)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=str(e).split(" ")[0].split(".")[0]):
                getattr(lg.nn.functional, fn)(lg.tensor(x), 2, output_size=3,
                                              _random_samples=lg.tensor(u))
            continue
        got = getattr(lg.nn.functional, fn)(lg.tensor(x), 2, output_size=3,
                                            _random_samples=lg.tensor(u), return_indices=True)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    mod = getattr(lg.nn, f"FractionalMaxPool{n}d")(2, output_size=3,
                                                   _random_samples=lg.tensor(
                                                       RNG.uniform(size=(5, 4, n))))
    assert tuple(mod(lg.tensor(x)).shape) == x.shape[:-n] + (3,) * n


POOL_MODULES = [
    ("MaxPool1d", (3,), dict(stride=2, padding=1, ceil_mode=True), X1),
    ("MaxPool2d", (2,), dict(dilation=2), X2),
    ("MaxPool3d", ((2, 1, 2),), dict(stride=1, padding=(1, 0, 0)), X3),
    ("AvgPool1d", (3,), dict(stride=2, padding=1, count_include_pad=False), X1),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True), X2),
    ("AvgPool3d", (2,), dict(divisor_override=3), X3),
    ("AdaptiveAvgPool1d", (5,), dict(), X1),
    ("AdaptiveAvgPool2d", ((3, 2),), dict(), X2),
    ("AdaptiveAvgPool3d", (2,), dict(), X3),
    ("AdaptiveMaxPool1d", (4,), dict(), X1),
    ("AdaptiveMaxPool2d", ((None, 4),), dict(), X2),
    ("AdaptiveMaxPool3d", ((2, 3, 4),), dict(), X3),
    ("LPPool1d", (2, 3), dict(stride=2), np.abs(X1)),
    ("LPPool2d", (1.5, (2, 3)), dict(), np.abs(X2)),
    ("LPPool3d", (2, 2), dict(ceil_mode=True), np.abs(X3)),
]


@pytest.mark.parametrize("cls,args,kw,x", POOL_MODULES, ids=lambda v: str(v)[:30])
def test_pooling_modules_match_torch(cls, args, kw, x):
    lm, tm = both_modules(lambda L: getattr(L.nn, cls)(*args, **kw), x)
    assert repr(lm) == repr(tm)


def test_unpool_and_return_indices_modules():
    pool_l = lg.nn.MaxPool2d(2, return_indices=True)
    pool_t = torch.nn.MaxPool2d(2, return_indices=True)
    unpool_l, unpool_t = lg.nn.MaxUnpool2d(2), torch.nn.MaxUnpool2d(2)
    assert repr(unpool_l) == repr(unpool_t)
    ol = unpool_l(*pool_l(lg.tensor(X2)), output_size=(7, 6))
    ot = unpool_t(*pool_t(torch.tensor(X2)), output_size=(7, 6))
    np.testing.assert_array_equal(ol.numpy(), ot.numpy())
    fl = lg.nn.FractionalMaxPool2d(2, output_size=3, return_indices=True)
    vals, idx = fl(lg.tensor(X2))
    assert tuple(vals.shape) == tuple(idx.shape) == (2, 3, 3, 3)
    flat = X2.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), 2),
                                  vals.numpy().reshape(2, 3, -1))
    with pytest.raises(ValueError, match="output_ratio"):
        lg.nn.FractionalMaxPool3d(2, output_ratio=1.5)


@pytest.mark.slow
def test_pool_gradcheck():
    x = lg.tensor(RNG.permutation(60).reshape(1, 2, 3, 5, 2) / 7.0, requires_grad=True)
    assert lg.autograd.gradcheck(lambda a: F.max_pool3d(a, 2, 1, padding=1), (x,))
    assert lg.autograd.gradcheck(lambda a: F.avg_pool3d(a, 2, 1, padding=1,
                                                        count_include_pad=False), (x,))
    assert lg.autograd.gradcheck(lambda a: F.adaptive_max_pool3d(a, (2, 3, 2)), (x,))
    assert lg.autograd.gradgradcheck(lambda a: F.adaptive_avg_pool3d(a, (2, 2, 1)), (x,))
    assert lg.autograd.gradcheck(lambda a: F.lp_pool2d(a.abs() + 1, 2, 2), (x[0],))


def test_pool_compiled_matches_eager():
    def f(x):
        a = F.max_pool3d(x, 2, stride=1, padding=1)
        b = F.avg_pool3d(x, (1, 2, 2), ceil_mode=True)
        c = F.adaptive_max_pool2d(x[:, :, 0], (2, 3))
        d = F.pad(x[:, 0], (1, 2, 2, 1), mode="reflect")
        return a.sum() + (b * b).sum() + c.exp().sum() + d.square().sum()
    x = lg.randn(2, 3, 3, 4, 5, requires_grad=True)
    eager = f(x)
    (ge,) = lg.autograd.grad(eager, [x])
    cf = lg.compile(f)
    comp = cf(x)
    (gc,) = lg.autograd.grad(comp, [x])
    assert cf.graph_breaks == []
    np.testing.assert_allclose(comp.item(), eager.item(), rtol=1e-5)
    np.testing.assert_allclose(gc.numpy(), ge.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.max_pool3d(lg.zeros(1, 4, 4), 2), RuntimeError, "Expected 4D or 5D"),
    (lambda: F.max_pool3d(lg.zeros(1, 1, 4, 4, 4), 2, padding=2), RuntimeError,
     "pad should be at most half"),
    (lambda: F.avg_pool3d(lg.zeros(1, 1, 1, 4, 4), 2), RuntimeError, "too small"),
    (lambda: F.max_unpool2d(lg.zeros(1, 1, 2, 2), lg.tensor([[[[0, 1], [2, 99]]]]), 2),
     RuntimeError, "invalid max index"),
    (lambda: F.max_unpool1d(lg.zeros(1, 1, 2), lg.zeros(1, 1, 2, dtype=lg.int64), 2,
                            output_size=(9,)), ValueError, "output_size"),
    (lambda: F.fractional_max_pool2d(lg.zeros(1, 1, 4, 4), 2), ValueError,
     "output_size or an output_ratio"),
    (lambda: F.fractional_max_pool2d(lg.zeros(1, 1, 4, 4), 3, output_size=3), RuntimeError,
     "too large"),
])
def test_pool_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("name,xs,args", [
    ("conv3d", (0, 2, 3, 3, 3), ((4, 2, 2, 2, 2),)),
    ("conv_transpose2d", (0, 2, 3, 3), ((2, 3, 2, 2),)),
    ("max_pool3d", (0, 2, 3, 3, 3), (2,)),
    ("adaptive_max_pool2d", (0, 2, 5, 5), (3,)),
    ("avg_pool1d", (0, 2, 5), (2,)),
])
def test_empty_batch_shapes_match_torch(name, xs, args):
    outs = []
    for lib in (lg, torch):
        fn = getattr(lib.nn.functional, name)
        a = [lib.zeros(*v) if isinstance(v, tuple) else v for v in args]
        outs.append(tuple(fn(lib.zeros(*xs), *a).shape))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_conv_tbc_matches_torch(pad):
    """F.conv_tbc / lg.conv_tbc: (time, batch, channels) convolution, values and
    gradients of all three operands as torch's, and its shape errors."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(pad)
    x, w, b = rng.standard_normal((6, 2, 3)), rng.standard_normal((3, 3, 4)), \
        rng.standard_normal(4)
    outs = {}
    for m in (torch, lg):
        ts = [m.tensor(v, requires_grad=True) for v in (x, w, b)]
        fn = m.nn.functional.conv_tbc if m is torch else lg.conv_tbc
        y = fn(*ts, pad)
        g = m.tensor(np.random.default_rng(9).standard_normal(tuple(y.shape)))
        (y * g).sum().backward()
        outs[m] = [y.detach().numpy()] + [t.grad.numpy() for t in ts]
    for got, want in zip(outs[lg], outs[torch]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    F = lg.nn.functional
    with pytest.raises(RuntimeError, match="input channels"):
        F.conv_tbc(lg.tensor(x), lg.tensor(w[:, :2]), lg.tensor(b))
    with pytest.raises(RuntimeError, match="3 dims"):
        F.conv_tbc(lg.tensor(x[0]), lg.tensor(w), lg.tensor(b))
    with pytest.raises(RuntimeError, match="Bias size"):
        F.conv_tbc(lg.tensor(x), lg.tensor(w), lg.tensor(b[:2]))


# integer (exact integer arithmetic; avg_pool divides rounding toward zero) and complex
# inputs, as torch's CPU kernels (OpInfo gaps)
_IX = RNG.integers(-9, 10, (2, 4, 7))
_IW = RNG.integers(-4, 5, (6, 2, 3))
_IB = RNG.integers(-9, 10, (6,))
_CX = RNG.standard_normal((2, 4, 7)) + 1j * RNG.standard_normal((2, 4, 7))
_CW = RNG.standard_normal((6, 2, 3)) + 1j * RNG.standard_normal((6, 2, 3))
INT_NN_CASES = [
    ("conv1d int groups", lambda L, x, w, b: L.nn.functional.conv1d(
        x, w, b, stride=2, padding=1, groups=2), [_IX, _IW, _IB]),
    ("conv2d int dilation", lambda L, x, w, b: L.nn.functional.conv2d(
        x.reshape(1, 4, 2, 7), w.reshape(3, 4, 1, 3), b[:3], dilation=(1, 2), padding=1),
     [_IX, _IW, _IB]),
    ("conv3d int", lambda L, x, w, b: L.nn.functional.conv3d(
        x.reshape(1, 1, 2, 4, 7), w[:2].reshape(1, 1, 2, 2, 3)), [_IX, _IW, _IB]),
    ("conv_transpose1d int", lambda L, x, w, b: L.nn.functional.conv_transpose1d(
        x, w.reshape(4, 3, 3), b[:6], stride=2, groups=2), [_IX, _IW, _IB]),
    ("conv1d complex", lambda L, x, w: L.nn.functional.conv1d(x, w, groups=2, padding=2),
     [_CX, _CW]),
    ("avg_pool1d int", lambda L, x: L.nn.functional.avg_pool1d(x, 3, 2, 1), [_IX]),
    ("avg_pool1d int no pad count", lambda L, x: L.nn.functional.avg_pool1d(
        x, 3, 1, 1, count_include_pad=False), [_IX]),
    ("avg_pool2d int divisor", lambda L, x: L.nn.functional.avg_pool2d(
        x, 2, ceil_mode=True, divisor_override=3), [_IX]),
    ("avg_pool3d int", lambda L, x: L.nn.functional.avg_pool3d(x[None], (1, 2, 3)), [_IX]),
    ("linear int", lambda L, x, w, b: L.nn.functional.linear(x, w, b),
     [_IX, RNG.integers(-5, 6, (3, 7)), _IB[:3]]),
    ("linear complex", lambda L, x, w, b: L.nn.functional.linear(x, w, b),
     [_CX, _CW.reshape(6, 6)[:3, :1] * np.ones((1, 7)), _CW[0, 0]]),
]


@pytest.mark.parametrize("name,fn,arrays", INT_NN_CASES, ids=[c[0] for c in INT_NN_CASES])
def test_integer_and_complex_inputs_match_torch(name, fn, arrays):
    both(fn, arrays)
