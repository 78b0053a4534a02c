"""The eager fast paths of the convolutions and of max unpooling, against PyTorch.

Convolutions of every rank (and the transposed ones) cache each call's checked arguments
by the operands' layouts and run their decomposition as one compiled graph per signature
(`dispatch.apply.composite_function`); transposed convolutions sum the columns of one
matmul by output phase (`nn._conv.col2im_nd`). These tests compare values and gradients
with torch over strides, padding, dilation, groups, output_padding, batched and unbatched
and non-contiguous inputs, the compiled path with the function as written on the same
inputs, float64 gradcheck, and that the cached checks still raise torch's errors.
Max unpooling's host path (cached checks, one scatter on NumPy views) is compared too.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import llgrad as lg
from llgrad.nn import _conv

torch = pytest.importorskip("torch")
F = lg.nn.functional
TF = torch.nn.functional

CONV = {1: "conv1d", 2: "conv2d", 3: "conv3d"}
TRANSPOSED = {1: "conv_transpose1d", 2: "conv_transpose2d", 3: "conv_transpose3d"}
SIZES = {1: (7,), 2: (6, 5), 3: (5, 4, 4)}


def _compare(fn_name, x, w, b, kwargs, grads=True, tol=1e-9, non_contiguous=False):
    """Run F.<fn_name> in llgrad and torch on float64 copies of x, w, b: values, shapes,
    and the gradients of a random weighted sum for every operand."""
    res = {}
    for lib in (lg, torch):
        ops = []
        for a in (x, w, b):
            if a is None:
                ops.append(None)
                continue
            if non_contiguous and a.ndim >= 2:
                # the same values through a transposed copy: a non-contiguous view
                t = lib.tensor(np.ascontiguousarray(np.swapaxes(a, 0, 1)))
                t = t.transpose(0, 1)
                if grads:
                    t = t.detach().requires_grad_()
            else:
                t = lib.tensor(a, requires_grad=grads)
            ops.append(t)
        fn = getattr(F if lib is lg else TF, fn_name)
        out = fn(ops[0], ops[1], ops[2], **kwargs)
        got = [out.detach().numpy()]
        if grads:
            r = np.random.default_rng(3)
            (out * lib.tensor(r.standard_normal(tuple(out.shape)))).sum().backward()
            got += [t.grad.numpy() for t in ops if t is not None]
        res[lib] = got
    for a, e in zip(res[lg], res[torch]):
        assert a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


def _operands(rng, n, cin, cout, groups, k, batched, bias, transposed):
    size = SIZES[n]
    x = rng.standard_normal(((2,) if batched else ()) + (cin,) + size)
    if transposed:
        w = rng.standard_normal((cin, cout // groups) + (k,) * n)
    else:
        w = rng.standard_normal((cout, cin // groups) + (k,) * n)
    b = rng.standard_normal(cout) if bias else None
    return x, w, b


@pytest.mark.parametrize("n", [1, 2, 3])
def test_convolutions_against_torch(n):
    rng = np.random.default_rng(n)
    cases = list(itertools.product((1, 2), (0, 1), (1, 2), (1, 2), (True, False)))[::2]
    for i, (stride, padding, dilation, groups, batched) in enumerate(cases):
        x, w, b = _operands(rng, n, 4, 6, groups, 3 if n < 3 else 2, batched, i % 2 == 0,
                            False)
        _compare(CONV[n], x, w, b, dict(stride=stride, padding=padding, dilation=dilation,
                                        groups=groups), grads=i % 3 == 0)
    # 'same' padding with an odd total (extra zeros after) and per-dimension arguments
    x, w, b = _operands(rng, n, 2, 4, 1, 2, True, True, False)
    _compare(CONV[n], x, w, b, dict(padding="same", dilation=(1, 2, 1)[:n]))
    _compare(CONV[n], x, w, b, dict(stride=(2, 1, 3)[:n], padding=(1, 0, 1)[:n]))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_transposed_convolutions_against_torch(n):
    rng = np.random.default_rng(10 + n)
    count = 0
    for stride, padding, dilation, groups, k in itertools.product(
            (1, 2, 3), (0, 2), (1, 2), (1, 2), (1, 3)):
        for output_padding in range(max(stride, dilation)):
            x, w, b = _operands(rng, n, 4, 6, groups, k, count % 2 == 0, count % 3 != 0,
                                True)
            kwargs = dict(stride=stride, padding=padding, output_padding=output_padding,
                          groups=groups, dilation=dilation)
            try:
                TF.__dict__[TRANSPOSED[n]](torch.tensor(x), torch.tensor(w), None, **kwargs)
            except RuntimeError:                   # an output size torch refuses
                with pytest.raises(RuntimeError):
                    getattr(F, TRANSPOSED[n])(lg.tensor(x), lg.tensor(w), None, **kwargs)
                continue
            _compare(TRANSPOSED[n], x, w, b, kwargs, grads=count % 4 == 0)
            count += 1
    assert count > 30
    # per-dimension strides, paddings, dilations and output paddings
    x, w, b = _operands(rng, n, 2, 2, 1, 3, True, True, True)
    _compare(TRANSPOSED[n], x, w, b, dict(stride=(1, 2, 3)[:n], padding=(0, 1, 2)[:n],
                                          output_padding=(0, 1, 2)[:n],
                                          dilation=(2, 1, 1)[:n]))


@pytest.mark.parametrize("name", ["conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                  "conv_transpose2d", "conv_transpose3d"])
def test_non_contiguous_operands(name):
    n = int(name[-2])
    transposed = "transpose" in name
    rng = np.random.default_rng(5)
    x, w, b = _operands(rng, n, 4, 4, 2, 2, True, True, transposed)
    kwargs = dict(stride=2, padding=1, groups=2)
    _compare(name, x, w, b, kwargs, non_contiguous=True)


def test_compiled_path_matches_the_function_as_written():
    """The compiled graph of a signature and the function it was traced from (run as
    written, through `__wrapped__`) give the same values on the same random inputs."""
    rng = np.random.default_rng(0)
    x = lg.tensor(rng.standard_normal((2, 4, 5, 6, 5)))
    w = lg.tensor(rng.standard_normal((4, 3, 3, 2, 3)))
    b = lg.tensor(rng.standard_normal(6))
    size = _conv.transposed_output_size((5, 6, 5), (3, 2, 3), (2, 1, 2), (1, 0, 2), (1, 2, 1),
                                        (1, 0, 1))
    args = (x, w, b, 3, (2, 1, 2), (1, 0, 2), (1, 2, 1), 2, size, False)
    fast = [_conv._conv_transpose_run(*args) for _ in range(3)]     # compiled from the 1st
    plain = _conv._conv_transpose_run.__wrapped__(*args)
    for f in fast:
        assert f.shape == plain.shape and f.dtype == plain.dtype
        np.testing.assert_allclose(f.numpy(), plain.numpy(), rtol=1e-12, atol=1e-12)
    ref = TF.conv_transpose3d(torch.tensor(x.numpy()), torch.tensor(w.numpy()),
                              torch.tensor(b.numpy()), stride=(2, 1, 2), padding=(1, 0, 2),
                              output_padding=(1, 0, 1), groups=2, dilation=(1, 2, 1))
    np.testing.assert_allclose(plain.numpy(), ref.numpy(), rtol=1e-10, atol=1e-10)
    args = (x, lg.tensor(rng.standard_normal((6, 2, 2, 3, 2))), b, 3, (1, 2, 1), (1, 1, 0),
            (0, 0, 0), (2, 1, 1), 2, False)
    fast = [_conv._conv_run(*args) for _ in range(3)]
    plain = _conv._conv_run.__wrapped__(*args)
    for f in fast:
        np.testing.assert_allclose(f.numpy(), plain.numpy(), rtol=1e-12, atol=1e-12)


def test_float32_values_and_dtypes():
    rng = np.random.default_rng(2)
    for name, wshape in (("conv1d", (3, 2, 3)), ("conv3d", (3, 2, 2, 2, 2)),
                         ("conv_transpose2d", (2, 3, 3, 3))):
        n = int(name[-2])
        x = rng.standard_normal((2, 2) + SIZES[n]).astype(np.float32)
        w = rng.standard_normal(wshape).astype(np.float32)
        kw = dict(stride=2, padding=1)
        got = getattr(F, name)(lg.tensor(x), lg.tensor(w), **kw)
        ref = getattr(TF, name)(torch.tensor(x), torch.tensor(w), **kw)
        assert got.dtype is lg.float32
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_gradcheck_float64():
    rng = np.random.default_rng(4)

    def t(*shape):
        return lg.tensor(rng.standard_normal(shape), requires_grad=True)
    assert lg.autograd.gradcheck(
        lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=1, output_padding=1),
        (t(1, 2, 2, 3, 2), t(2, 2, 2, 2, 2), t(2)))
    assert lg.autograd.gradcheck(
        lambda x, w: F.conv_transpose1d(x, w, stride=3, dilation=2, groups=2),
        (t(2, 4, 3), t(4, 1, 3)))
    assert lg.autograd.gradcheck(
        lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2), (t(5, 9), t(3, 5, 3),
                                                                             t(3)))
    assert lg.autograd.gradgradcheck(
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1), (t(1, 2, 3, 3),
                                                                     t(2, 1, 3, 3)))
    assert lg.autograd.gradgradcheck(lambda x, w: F.conv3d(x, w, stride=(1, 2, 1)),
                                     (t(1, 2, 3, 4, 3), t(2, 2, 2, 2, 2)))


def test_cached_checks_still_raise():
    """A layout seen before with valid arguments does not skip the checks of different
    arguments (the plan cache keys on every argument, by class and value)."""
    x, w = lg.randn(1, 4, 6, 6), lg.randn(4, 2, 3, 3)
    F.conv_transpose2d(x, w, stride=2)
    F.conv2d(x, lg.randn(2, 4, 3, 3), stride=2)
    with pytest.raises(RuntimeError, match="non-positive stride"):
        F.conv_transpose2d(x, w, stride=0)
    with pytest.raises(RuntimeError, match="output padding must be smaller"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(TypeError):
        F.conv_transpose2d(x, w, stride=2.0)
    with pytest.raises(TypeError):
        F.conv2d(x, lg.randn(2, 4, 3, 3), stride=True)
    with pytest.raises(RuntimeError, match="groups"):
        F.conv2d(x, lg.randn(2, 4, 3, 3), stride=2, groups=3)
    with pytest.raises(ValueError, match="strided"):
        F.conv1d(lg.randn(1, 4, 6), lg.randn(2, 4, 3), stride=2, padding="same")
    with pytest.raises(TypeError, match="weight type"):
        F.conv1d(lg.randn(1, 4, 6), lg.randn(2, 4, 3, dtype=lg.float64))
    # the same arguments as lists and tuples agree
    a = F.conv_transpose2d(x, w, stride=[2, 1], padding=[1, 0])
    b = F.conv_transpose2d(x, w, stride=(2, 1), padding=(1, 0))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_integer_and_grad_names():
    x = lg.tensor(np.arange(24).reshape(1, 2, 12))
    w = lg.tensor(np.ones((2, 3, 2), dtype=np.int64))
    got = F.conv_transpose1d(x, w, stride=2)
    ref = TF.conv_transpose1d(torch.tensor(x.numpy()).double(), torch.tensor(w.numpy()).double(),
                              stride=2)
    assert got.dtype is lg.int64
    np.testing.assert_array_equal(got.numpy(), ref.numpy().astype(np.int64))
    x = lg.randn(1, 2, 5, requires_grad=True)
    y = F.conv1d(x, lg.randn(3, 2, 2))
    assert y.grad_fn is not None and y.requires_grad
    y.sum().backward()
    assert x.grad.shape == (1, 2, 5)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_host_path(n):
    shape = {1: (2, 3, 8), 2: (2, 3, 6, 8), 3: (1, 2, 4, 4, 6)}[n]
    x = torch.randn(*shape)
    values, idx = getattr(TF, f"max_pool{n}d")(x, 2, return_indices=True)
    unpool = getattr(F, f"max_unpool{n}d")
    ref = getattr(TF, f"max_unpool{n}d")(values, idx, 2)
    lv, li = lg.tensor(values.numpy()), lg.tensor(idx.numpy())
    for _ in range(2):                                # the second call takes the cached plan
        np.testing.assert_array_equal(unpool(lv, li, 2).numpy(), ref.numpy())
    np.testing.assert_array_equal(unpool(lv[0], li[0], 2).numpy(), ref[0].numpy())
    # non-contiguous values and indices
    vt = lg.tensor(values.transpose(0, 1).contiguous().numpy()).transpose(0, 1)
    it = lg.tensor(idx.transpose(0, 1).contiguous().numpy()).transpose(0, 1)
    np.testing.assert_array_equal(unpool(vt, it, 2).numpy(), ref.numpy())
    # the general path (recorded) agrees, with the gradient torch gives
    lr = lg.tensor(values.numpy(), requires_grad=True)
    out = unpool(lr, li, 2)
    np.testing.assert_array_equal(out.detach().numpy(), ref.numpy())
    g = np.random.default_rng(0).standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(lg.tensor(g))
    tv = values.clone().requires_grad_()
    getattr(TF, f"max_unpool{n}d")(tv, idx, 2).backward(torch.tensor(g))
    np.testing.assert_array_equal(lr.grad.numpy(), tv.grad.numpy())
    # out-of-range indices raise, after the plan was cached too
    for bad in (-1, 10_000):
        b = idx.clone()
        b.view(-1)[0] = bad
        with pytest.raises(RuntimeError, match="invalid max index"):
            unpool(lv, lg.tensor(b.numpy()), 2)
    with pytest.raises(RuntimeError, match="int64"):
        unpool(lv, li.to(lg.int32), 2)


@pytest.mark.parametrize("shape,groups", [((2, 8, 5, 5), 4), ((2, 8, 5, 5), 1),
                                          ((2, 8, 5, 5), 8), ((1, 6, 3), 3),
                                          ((2, 12, 2, 3, 2), 3)])
def test_channel_shuffle_direct_path(shape, groups):
    """The first call files the direct path's plan; later calls (plain and non-contiguous
    inputs, and a recorded one) give torch's values as new contiguous tensors."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ref = TF.channel_shuffle(torch.tensor(x), groups).numpy()
    for _ in range(3):
        y = F.channel_shuffle(lg.tensor(x), groups)
        np.testing.assert_array_equal(y.numpy(), ref)
        assert y.is_contiguous() and y.shape == shape
    xt = lg.tensor(np.ascontiguousarray(np.swapaxes(x, 0, 1))).transpose(0, 1)
    for _ in range(2):
        np.testing.assert_array_equal(F.channel_shuffle(xt, groups).numpy(), ref)
    xg = lg.tensor(x, requires_grad=True)
    y = F.channel_shuffle(xg, groups)
    g = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    y.backward(lg.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    TF.channel_shuffle(tx, groups).backward(torch.tensor(g))
    np.testing.assert_array_equal(xg.grad.numpy(), tx.grad.numpy())
    with pytest.raises(RuntimeError, match="divisible"):
        F.channel_shuffle(lg.tensor(x), 5)
