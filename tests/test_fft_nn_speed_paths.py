"""The direct (per-call overhead) paths of lg.fft and nn.functional against the general
paths they skip: the same values (bit for bit), dtypes, shapes, views, grad_fn names and
errors, and the calls that must take the general path (autograd records, out=, vmap,
forward mode). No timing assertions."""
import math

import numpy as np
import pytest

import llgrad as lg
import llgrad.fft as lfft
import llgrad.nn.functional as F
from llgrad.eager import views
from llgrad.functions import layout as L
from llgrad.nn import _losses as losses
from llgrad.nn import _base as functional_mod

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def _data(shape, dtype):
    a = RNG.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


def _same(a, b):
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


# --------------------------------------------------------------------------------------
# lg.fft: cached pocketfft plans
# --------------------------------------------------------------------------------------

def _general(monkeypatch, fn, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(lfft, "_direct", lambda *a: None)
        return fn(*args, **kwargs)


ARGS_1D = [{}, {"n": 3}, {"n": 9}, {"dim": 0}, {"n": 7, "dim": 0}, {"norm": "ortho"},
           {"norm": "forward", "n": 4}]
ARGS_ND = [{}, {"s": (8,)}, {"s": (2, 9)}, {"dim": (0,)}, {"s": [6, 8]}, {"dim": [-1, 0]},
           {"norm": "ortho", "s": (3, 4)}, {"norm": "backward"}]


@pytest.mark.parametrize("op", sorted(lfft._OPS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_fft_direct_matches_general(monkeypatch, op, dtype):
    fn = getattr(lfft, op)
    one = lfft._OPS[op][3]
    lfft._plans.clear()
    ran = False
    for shape in [(5, 6, 7), (4, 6), (3, 1, 4)]:
        base = lg.tensor(_data(shape, dtype))
        for x in (base, base.transpose(0, 1), base[..., 1:]):
            for kw in (ARGS_1D if one else ARGS_ND):
                try:
                    ref = _general(monkeypatch, fn, x, **kw)
                except Exception as e:                       # noqa: BLE001
                    with pytest.raises(type(e)):
                        fn(x, **kw)
                    continue
                for _ in range(2):                            # plan made, then used
                    _same(fn(x, **kw), ref)
                ran = True
    assert any(k[0] == op for k in lfft._plans) == ran


def test_fft_direct_plan_is_used_and_keys_exact():
    x = lg.tensor(_data((5, 6, 7), "float32"))
    lfft._plans.clear()
    lfft.fftn(x, s=(8,))
    assert ("fftn", x._lkey, (8,), None, None) in lfft._plans
    # floats and bools are not ints: the general path rejects them (no plan matches)
    with pytest.raises(TypeError):
        lfft.fftn(x, s=(8.0,))
    with pytest.raises(TypeError):
        lfft.fft(x, n=True)
    with pytest.raises(ValueError):
        lfft.fft(x, norm="bogus")
    with pytest.raises(RuntimeError):
        lfft.rfft(lg.tensor(_data((4,), "complex64")))
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        lfft.fft(lg.randn(4).to(lg.float16))
    # integers take the general path (cast to the default dtype)
    ints = lg.tensor(np.arange(6))
    _same(lfft.fft(ints), lfft.fft(ints.to(lg.float32)))


@pytest.mark.parametrize("op,name", [("fft", "FftR2CBackward0"), ("fftn", "FftC2CBackward0"),
                                     ("rfft2", "FftR2CBackward0"),
                                     ("irfft", "FftC2RBackward0")])
def test_fft_recorded_calls_take_the_general_path(op, name):
    x = lg.tensor(_data((4, 6), "float64"))
    fn = getattr(lfft, op)
    plain = fn(x)
    assert plain.grad_fn is None and not plain.requires_grad
    xr = x.detach().requires_grad_(True)
    y = fn(xr)
    assert y.grad_fn is not None and y.grad_fn.name() == name
    _same(y, plain)
    with lg.no_grad():                       # nothing records: the direct path
        z = fn(xr)
    assert z.grad_fn is None and not z.requires_grad
    _same(z, plain)
    (g,) = lg.autograd.grad(y.abs().sum() if y.dtype.is_complex else y.sum(), (xr,))
    t = torch.tensor(x.numpy(), requires_grad=True)
    ty = getattr(torch.fft, op)(t)
    (ty.abs().sum() if ty.is_complex() else ty.sum()).backward()
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_fft_out_vmap_forward_mode_fall_back():
    a = _data((3, 8), "float64")
    x = lg.tensor(a)
    out = lg.empty((3, 8), dtype=lg.complex128)
    r = lfft.fft(x, out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), np.fft.fft(a), rtol=1e-12, atol=1e-12)
    v = lg.vmap(lambda row: lfft.fft(row, n=5))(x)
    np.testing.assert_allclose(v.numpy(), np.fft.fft(a, n=5), rtol=1e-12, atol=1e-12)
    import llgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, lg.tensor(a * 2))
        tangent = fwAD.unpack_dual(lfft.rfft(dual)).tangent
    np.testing.assert_allclose(tangent.numpy(), np.fft.rfft(a * 2), rtol=1e-12, atol=1e-12)


def test_fft_direct_against_torch():
    for op, kw in [("fftn", {"s": (8,)}), ("ifftn", {"s": (8,)}), ("ifft2", {"s": (6, 8)}),
                   ("rfft2", {"s": (6, 8)}), ("irfft", {"n": 7}), ("irfft2", {"s": (6, 8)}),
                   ("irfftn", {"s": (8,)})]:
        a = _data((5, 6, 7), "float32")
        got = getattr(lfft, op)(lg.tensor(a), **kw)
        want = getattr(torch.fft, op)(torch.tensor(a), **kw)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-4, atol=2e-4)


# --------------------------------------------------------------------------------------
# ctc_loss: batched recursions
# --------------------------------------------------------------------------------------

def _lse(*arrays):
    stacked = np.stack(arrays)
    m = np.max(stacked, axis=0)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(stacked - safe), axis=0)) + safe


def _ctc_one_reference(lp, labels, blank):
    """One sequence at a time (the per-sequence loop the batched code replaced)."""
    t_len, c = lp.shape
    ext = np.full(2 * len(labels) + 1, blank, dtype=np.int64)
    ext[1::2] = labels
    n = ext.shape[0]
    skip = np.zeros(n, dtype=bool)
    if n > 2:
        skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    alpha = np.full((t_len, n), -np.inf)
    beta = np.full((t_len, n), -np.inf)
    if t_len == 0:
        return (0.0 if n == 1 else math.inf), np.full((0, c), -np.inf)
    alpha[0, 0] = lp[0, blank]
    if n > 1:
        alpha[0, 1] = lp[0, ext[1]]
    for t in range(1, t_len):
        prev = alpha[t - 1]
        a1 = np.concatenate(([-np.inf], prev[:-1]))
        a2 = np.where(skip, np.concatenate(([-np.inf, -np.inf], prev[:-2]))[:n], -np.inf)
        alpha[t] = _lse(prev, a1, a2) + lp[t, ext]
    beta[-1, n - 1] = lp[-1, blank]
    if n > 1:
        beta[-1, n - 2] = lp[-1, ext[n - 2]]
    skip_next = np.zeros(n, dtype=bool)
    skip_next[:-2] = skip[2:]
    for t in range(t_len - 2, -1, -1):
        nxt = beta[t + 1]
        b1 = np.concatenate((nxt[1:], [-np.inf]))
        b2 = np.where(skip_next, np.concatenate((nxt[2:], [-np.inf, -np.inf]))[:n], -np.inf)
        beta[t] = _lse(nxt, b1, b2) + lp[t, ext]
    ends = [alpha[-1, n - 1]] + ([alpha[-1, n - 2]] if n > 1 else [])
    nll = -float(_lse(*[np.asarray(e) for e in ends]))
    ab = alpha + beta
    lcab = np.full((t_len, c), -np.inf)
    for s in range(n):
        lcab[:, ext[s]] = _lse(lcab[:, ext[s]], ab[:, s])
    return nll, lcab


def _ctc_reference(lp, targets, in_lens, tgt_lens, blank, zero_infinity):
    t_max, n, c = lp.shape
    out = np.zeros(n)
    grad = np.zeros_like(lp)
    offset = 0
    for b in range(n):
        if targets.ndim == 2:
            labels = targets[b, :tgt_lens[b]]
        else:
            labels = targets[offset:offset + tgt_lens[b]]
            offset += tgt_lens[b]
        seq = lp[:in_lens[b], b]
        nll, lcab = _ctc_one_reference(seq, labels, blank)
        if zero_infinity and math.isinf(nll):
            continue
        out[b] = nll
        with np.errstate(invalid="ignore", over="ignore"):
            grad[:in_lens[b], b] = np.exp(seq) - np.exp(lcab + nll - seq)
    return out, grad


def test_ctc_batched_recursions_equal_per_sequence():
    rng = np.random.default_rng(3)
    for trial in range(150):
        t_max = int(rng.integers(0, 10))
        n = int(rng.integers(1, 5))
        c = int(rng.integers(2, 6))
        blank = int(rng.integers(0, c))
        x = rng.standard_normal((t_max, n, c))
        lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
        if trial % 7 == 0 and t_max:
            lp[rng.integers(0, t_max), 0, :] = -np.inf      # an impossible step
        in_lens = rng.integers(0, t_max + 1, n)
        tl = rng.integers(0, 5, n)
        labels = [k for k in range(c) if k != blank]
        if trial % 2:
            tg = rng.choice(labels, size=(n, int(tl.max()) + int(rng.integers(0, 2))))
            if trial % 5 == 0:
                tg[:, :] = labels[0]                         # repeats: no skips
        else:
            tg = rng.choice(labels, size=int(tl.sum()) + int(rng.integers(0, 2)))
        for zi in (False, True):
            # the recursions run natively (llgrad's exp/log, not NumPy's): the same
            # values to rounding, and the same infinities
            want_l, want_g = _ctc_reference(lp, tg, in_lens, tl, blank, zi)
            got_l, got_g = losses._ctc_forward(lp, tg, in_lens, tl, blank, zi)
            np.testing.assert_allclose(got_l, want_l, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(got_g, want_g, rtol=1e-12, atol=1e-13)
            only, none = losses._ctc_forward(lp, tg, in_lens, tl, blank, zi, with_grad=False)
            assert none is None
            np.testing.assert_array_equal(only, got_l)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_unrecorded_and_recorded_calls_agree(reduction):
    rng = np.random.default_rng(5)
    t_max, n, c, s = 20, 4, 6, 7
    x = rng.standard_normal((t_max, n, c)).astype(np.float32)
    lp = lg.log_softmax(lg.tensor(x), -1)
    tg = lg.tensor(rng.integers(1, c, (n, s)))
    il = lg.tensor(rng.integers(t_max // 2, t_max + 1, n))
    tl = lg.tensor(rng.integers(1, s + 1, n))
    plain = F.ctc_loss(lp, tg, il, tl, reduction=reduction, zero_infinity=True)
    assert plain.grad_fn is None
    lr = lp.detach().requires_grad_(True)
    rec = F.ctc_loss(lr, tg, il, tl, reduction=reduction, zero_infinity=True)
    assert rec.grad_fn is not None
    _same(plain, rec.detach())
    node = rec.grad_fn
    while node.name() != "CtcLossBackward0":
        node = node.next_functions[0][0]
    want = torch.nn.functional.ctc_loss(torch.tensor(lp.numpy()), torch.tensor(tg.numpy()),
                                        torch.tensor(il.numpy()), torch.tensor(tl.numpy()),
                                        reduction=reduction, zero_infinity=True)
    np.testing.assert_allclose(plain.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------
# nn.functional: registry composites' checks, value checks, composites, shuffles
# --------------------------------------------------------------------------------------

def test_composite_check_cache_keeps_results_and_errors():
    x = lg.rand(5, 5)
    t = lg.rand(5, 5)
    functional_mod._checked.clear()
    first = F.binary_cross_entropy(x, t, reduction="sum")
    assert functional_mod._checked
    _same(F.binary_cross_entropy(x, t, reduction="sum"), first)
    with pytest.raises(ValueError):
        F.binary_cross_entropy(x, t, reduction="bogus")
    with pytest.warns(UserWarning), pytest.raises(Exception):   # a shape the rule rejects
        F.mse_loss(lg.rand(5, 5), lg.rand(4, 5))
    # the same attributes with another dtype are checked again
    with pytest.raises(Exception):
        F.binary_cross_entropy_with_logits(x, lg.ones(5, 5, dtype=lg.int64), reduction="sum")
    w = lg.rand(5)
    a = F.binary_cross_entropy_with_logits(x, t, weight=w)
    b = F.binary_cross_entropy_with_logits(x, t, weight=w)
    _same(a, b)
    xr = x.detach().requires_grad_(True)
    y = F.binary_cross_entropy(xr, t)
    assert y.grad_fn.name() == "BinaryCrossEntropyBackward0"
    want = torch.nn.functional.binary_cross_entropy(torch.tensor(x.numpy()),
                                                    torch.tensor(t.numpy()))
    np.testing.assert_allclose(y.item(), want.item(), rtol=1e-5)


def test_bce_range_check_on_values():
    t = lg.rand(3)
    for bad in ([0.5, 1.5, 0.2], [-0.1, 0.5, 0.5], [float("nan"), 0.5, 0.5]):
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            F.binary_cross_entropy(lg.tensor(bad), t)
    F.binary_cross_entropy(lg.tensor([0.0, 1.0, -0.0]), t)        # the bounds are inside
    F.binary_cross_entropy(lg.zeros(0), lg.zeros(0))
    with pytest.raises(RuntimeError, match="between 0 and 1"):     # under vmap too
        lg.vmap(lambda a, b: F.binary_cross_entropy(a, b))(
            lg.tensor([[0.5, 2.0]]), lg.tensor([[0.5, 0.5]]))
    ok = lg.vmap(lambda a, b: F.binary_cross_entropy(a, b))(lg.rand(2, 3), lg.rand(2, 3))
    assert tuple(ok.shape) == (2,)


@pytest.mark.parametrize("name", ["logsigmoid", "mish"])
def test_elementwise_composites_equal_their_eager_body(name):
    fn = getattr(F, name)
    for dtype in ("float32", "float64"):
        for shape in [(), (7,), (3, 5)]:
            x = lg.tensor((np.asarray(RNG.standard_normal(shape)) * 10).astype(dtype))
            for _ in range(2):
                _same(fn(x), fn.__wrapped__(x))
            xr = x.detach().requires_grad_(True)
            y = fn(xr)
            y = fn(xr)
            y0 = fn.__wrapped__(xr)
            assert y.grad_fn.name() == y0.grad_fn.name()
            (g,) = lg.autograd.grad(y.sum(), (xr,))
            (g0,) = lg.autograd.grad(y0.sum(), (xr,))
            _same(g, g0)
            want = getattr(torch.nn.functional, name)(torch.tensor(x.numpy()))
            np.testing.assert_allclose(y.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    x = lg.randn(4)
    want = F.mish(x)
    v = x._version if hasattr(x, "_version") else None
    out = F.mish(x, inplace=True)
    assert out is x
    _same(x, want)
    if v is not None:
        assert x._version != v


def _shuffle_cases():
    base = lg.randn(2, 8, 4, 6)
    return [(base, 2), (base, 1), (base.transpose(2, 3), 2), (lg.randn(1, 1, 1, 0), 1),
            (lg.randn(3, 4, 2, 2)[1:], 2), (lg.randn(8, 2, 4), 2)]


@pytest.mark.parametrize("fn", [F.pixel_shuffle, lg.pixel_shuffle])
def test_pixel_shuffle_direct_matches_general(fn):
    unshuffle = F.pixel_unshuffle if fn is F.pixel_shuffle else lg.pixel_unshuffle
    for x, r in _shuffle_cases():
        for f in (fn, unshuffle):
            L._shuffles.clear()
            try:
                general = f(x, r)
            except RuntimeError:
                continue
            for _ in range(3):  # (the second call records the copy, the third replays it)
                got = f(x, r)
                assert got is not general
                _same(got, general)
                assert got._strides == general._strides
                assert (got._storage is x._storage) == (general._storage is x._storage)
                assert (got._base is None) == (general._base is None)
                if got._storage is x._storage:
                    assert got._base is (x._base if x._base is not None else x)
                    assert got._offset == general._offset
            assert L._shuffles
            (plan,) = L._shuffles.values()
            copies = general._storage is not x._storage
            assert plan[-1] is False if not copies else isinstance(plan[-1], views._CopyReplay)


def test_pixel_shuffle_fall_backs_and_errors():
    x = lg.randn(1, 8, 3, 3)
    F.pixel_shuffle(x, 2)
    xr = x.detach().requires_grad_(True)
    y = F.pixel_shuffle(xr, 2)
    assert y.requires_grad and y.grad_fn is not None
    t = torch.tensor(x.numpy())
    np.testing.assert_array_equal(y.detach().numpy(),
                                  torch.nn.functional.pixel_shuffle(t, 2).numpy())
    v = lg.vmap(lambda a: F.pixel_shuffle(a, 2))(lg.randn(3, 1, 8, 3, 3))
    assert tuple(v.shape) == (3, 1, 2, 6, 6)
    with pytest.raises(RuntimeError, match="divisible"):
        F.pixel_shuffle(lg.randn(1, 7, 3, 3), 2)
    with pytest.raises(RuntimeError, match="divisible"):
        F.pixel_unshuffle(lg.randn(1, 1, 3, 3), 2)
    # a float factor is not filed (F's version accepts it through int())
    _same(F.pixel_shuffle(x, 2.0), F.pixel_shuffle(x, 2))


def test_log_softmax_with_dtype_cast():
    x = lg.randn(5, 5)
    got = lg.log_softmax(x, 0, dtype=lg.float64)
    assert got.dtype == lg.float64
    _same(got, lg.log_softmax(x.to(lg.float64), 0))
    xr = x.detach().requires_grad_(True)
    y = lg.log_softmax(xr, 0, dtype=lg.float64)
    assert y.grad_fn.name() == "LogSoftmaxBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "ToCopyBackward0"
    _same(F.softmax(x, 1, dtype=lg.float64), lg.softmax(x.to(lg.float64), 1))
    with pytest.raises(TypeError):
        lg.log_softmax(x, 0, dtype=lg.complex64)


def test_gaussian_nll_value_check():
    x, t = lg.randn(5, 5), lg.randn(5, 5)
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(x, t, lg.tensor([1.0, -1.0, 1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(x, t, -1.0)
    var = lg.rand(5) + 0.1
    got = F.gaussian_nll_loss(x, t, var, reduction="none")
    want = torch.nn.functional.gaussian_nll_loss(torch.tensor(x.numpy()),
                                                 torch.tensor(t.numpy()),
                                                 torch.tensor(var.numpy()), reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    F.gaussian_nll_loss(x, t, lg.tensor([float("nan")] * 5))      # NaN is not negative
