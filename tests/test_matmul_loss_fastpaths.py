"""The unrecorded fast paths of the matmul family, cosine_similarity, ctc_loss and
stft/istft against their general (recorded) paths and torch.

Each fast path runs only when nothing records the call; the same inputs with
`requires_grad` take the general path. Both must give the same values, dtypes, shapes and
strides, and torch's values; gradients go through the general path and are compared with
torch's.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(1234)


def _np(shape, dtype=np.float64):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-4, 5, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _same(fast: lg.Tensor, general: lg.Tensor, exact: bool = True) -> None:
    assert fast.shape == general.shape
    assert fast.dtype == general.dtype
    f, g = fast.detach().numpy(), general.detach().numpy()
    if exact:
        np.testing.assert_array_equal(f, g)
    else:
        np.testing.assert_allclose(f, g, rtol=1e-6, atol=1e-6)


def _close_torch(out: lg.Tensor, ref: "torch.Tensor", rtol: float = 1e-5,
                 atol: float = 1e-5) -> None:
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=rtol,
                               atol=atol)


def _pair(fn_lg, fn_t, arrays, *, grad=True, exact=False, transpose=()):
    """Run `fn_lg` on plain tensors twice (general first call, then the fast path), on
    tensors requiring grad (general path), and `fn_t` in torch; compare all of them and
    the gradients. `transpose`: indices of 2-D arrays passed as transposed views (same
    shape and values, column-major memory)."""
    def make(lib, a, i, req):
        t = lib.tensor(np.ascontiguousarray(a.T) if i in transpose else a)
        if i in transpose:
            t = t.t() if lib is torch else lg.transpose(t, 0, 1)
        if req and a.dtype.kind == "f":
            t = t.detach().requires_grad_()
        return t
    plain = [make(lg, a, i, False) for i, a in enumerate(arrays)]
    fast1 = fn_lg(*plain)
    fast2 = fn_lg(*plain)
    rec = [make(lg, a, i, grad) for i, a in enumerate(arrays)]
    general = fn_lg(*rec)
    tt = [make(torch, a, i, grad) for i, a in enumerate(arrays)]
    ref = fn_t(*tt)
    _same(fast2, fast1)
    _same(fast1, general, exact=exact)
    _close_torch(fast1, ref)
    if grad and any(a.dtype.kind == "f" for a in arrays) and general.requires_grad:
        g = RNG.standard_normal(tuple(general.shape))
        general.backward(lg.tensor(g, dtype=general.dtype))
        ref.backward(torch.tensor(g, dtype=ref.dtype))
        for a, b in zip(rec, tt):
            if a.requires_grad:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5,
                                           atol=1e-5)


# --------------------------------------------------------------------------------------
# the matmul family
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("case", [
    ((2, 2, 1), (2, 1, 2), ([0, 1], [2, 0])),
    ((3, 4, 5), (4, 5, 2), 2),
    ((3, 4), (4, 6), 1),
    ((3, 4), (5, 6), 0),
    ((2, 3, 4), (4, 3, 2), ([1, 2], [1, 0])),
    ((0, 3), (3, 4), ([1], [0])),
    ((3, 1), (4, 2), ([1], [1])),           # a size-1 dimension broadcasts
])
def test_tensordot(dtype, case):
    sa, sb, dims = case
    _pair(lambda a, b: lg.tensordot(a, b, dims=dims),
          lambda a, b: torch.tensordot(a, b, dims=dims), [_np(sa, dtype), _np(sb, dtype)],
          exact=dtype is np.int64)


def test_tensordot_transposed_and_out():
    a, b = _np((4, 3)), _np((4, 5))
    _pair(lambda x, y: lg.tensordot(x, y, dims=([0], [0])),
          lambda x, y: torch.tensordot(x, y, dims=([0], [0])), [a, b], transpose=(0,))
    out = lg.empty((3, 5), dtype=lg.float64)
    r = lg.tensordot(lg.tensor(a), lg.tensor(b), dims=([0], [0]), out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), a.T @ b, rtol=1e-12)
    r2 = lg.tensordot(lg.tensor(a), lg.tensor(b), dims=lg.tensor([[0], [0]]))
    np.testing.assert_allclose(r2.numpy(), a.T @ b, rtol=1e-12)


def test_tensordot_errors():
    a, b = lg.randn(2, 3), lg.randn(4, 5)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
            lg.tensordot(a, b, dims=([1], [0]))
        with pytest.raises(RuntimeError, match="same dtype"):
            lg.tensordot(a, lg.randn(3, 2, dtype=lg.float64), dims=1)
        with pytest.raises(RuntimeError, match="dims >= 0"):
            lg.tensordot(a, b, dims=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addr_addmv(dtype, beta, alpha):
    if dtype is np.int64 and isinstance(beta, float):
        beta, alpha = 2, 3
    kw = dict(beta=beta, alpha=alpha)
    for inp in [(5, 10), (10,), ()]:
        _pair(lambda i, a, b: lg.addr(i, a, b, **kw), lambda i, a, b: torch.addr(i, a, b, **kw),
              [_np(inp, dtype), _np((5,), dtype), _np((10,), dtype)], exact=True)
    for inp in [(5,), ()]:
        _pair(lambda i, m, v: lg.addmv(i, m, v, **kw),
              lambda i, m, v: torch.addmv(i, m, v, **kw),
              [_np(inp, dtype), _np((5, 10), dtype), _np((10,), dtype)],
              exact=dtype is np.int64)
    _pair(lambda i, m, v: lg.addmv(i, m, v, **kw), lambda i, m, v: torch.addmv(i, m, v, **kw),
          [_np((5,), dtype), _np((5, 10), dtype), _np((10,), dtype)], transpose=(1,),
          exact=dtype is np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.6, 0.2), (0, 1)])
def test_addbmm_baddbmm(dtype, beta, alpha):
    kw = dict(beta=beta, alpha=alpha)
    b1, b2 = _np((5, 5, 5), dtype), _np((5, 5, 10), dtype)
    for inp in [(), (5, 10), (1, 10)]:
        _pair(lambda i, x, y: lg.addbmm(i, x, y, **kw),
              lambda i, x, y: torch.addbmm(i, x, y, **kw), [_np(inp, dtype), b1, b2])
    for inp in [(), (5, 5, 10), (5, 1, 10)]:
        _pair(lambda i, x, y: lg.baddbmm(i, x, y, **kw),
              lambda i, x, y: torch.baddbmm(i, x, y, **kw), [_np(inp, dtype), b1, b2])
    e = np.zeros((0, 5, 5), dtype)
    _pair(lambda i, x, y: lg.baddbmm(i, x, y, **kw),
          lambda i, x, y: torch.baddbmm(i, x, y, **kw), [_np((0, 5, 5), dtype), e, e],
          grad=False)


def test_product_errors_each_call():
    for _ in range(2):
        with pytest.raises(RuntimeError):
            lg.addr(lg.randn(3, 3), lg.randn(3), lg.randn(3, 1))
        with pytest.raises(RuntimeError):
            lg.addmv(lg.randn(3), lg.randn(3, 4), lg.randn(5))
        with pytest.raises(RuntimeError):
            lg.baddbmm(lg.randn(2, 3, 3), lg.randn(2, 3, 4), lg.randn(2, 5, 3))
        with pytest.raises(RuntimeError):
            lg.addr(lg.ones(3, 3, dtype=lg.int64), lg.ones(3, dtype=lg.int64),
                    lg.ones(3, dtype=lg.int64), beta=0.5)


def test_inplace_products():
    i, a, b = _np((5, 10)), _np((5,)), _np((10,))
    x = lg.tensor(i)
    r = x.addr_(lg.tensor(a), lg.tensor(b), beta=0.5, alpha=2.0)
    assert r is x
    np.testing.assert_allclose(x.numpy(), 0.5 * i + 2.0 * np.outer(a, b), rtol=1e-12)


# --------------------------------------------------------------------------------------
# cosine_similarity
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes,dim", [(((2, 3), (2, 1, 3)), -1), (((4, 5), (4, 5)), 1),
                                        (((3,), (3,)), 0), (((), ()), 0),
                                        (((0, 3), (0, 3)), 1)])
def test_cosine_similarity(dtype, shapes, dim):
    import torch.nn.functional as TF
    a, b = _np(shapes[0], dtype), _np(shapes[1], dtype)
    _pair(lambda x, y: lg.nn.functional.cosine_similarity(x, y, dim=dim),
          lambda x, y: TF.cosine_similarity(x, y, dim=dim), [a, b])


def test_cosine_similarity_eps_and_transposed():
    import torch.nn.functional as TF
    a, b = np.zeros((3, 4)), _np((3, 4))
    _pair(lambda x, y: lg.nn.functional.cosine_similarity(x, y, dim=0),
          lambda x, y: TF.cosine_similarity(x, y, dim=0), [a, b], transpose=(1,))
    with pytest.raises(IndexError):
        lg.nn.functional.cosine_similarity(lg.tensor(1.0), lg.tensor(2.0), dim=3)


# --------------------------------------------------------------------------------------
# ctc_loss: the native recursions against the NumPy form they replace, and torch
# --------------------------------------------------------------------------------------

def _ctc_case(T, N, C, S, seed, repeats=False):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((T, N, C))
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    targets = rng.integers(1, C, (N, max(S, 1)))
    if repeats:
        targets[:, 1:] = targets[:, :1]
    tl = rng.integers(0, S + 1, N)
    il = rng.integers(0, T + 1, N)
    return lp, targets, il, tl


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_against_torch(seed, reduction, zero_infinity):
    import torch.nn.functional as TF
    lp, targets, il, tl = _ctc_case(12 + seed, 3 + seed % 3, 5, 6, seed, repeats=seed % 2)
    kw = dict(reduction=reduction, zero_infinity=zero_infinity)
    x = lg.tensor(lp)
    fast = lg.nn.functional.ctc_loss(x, lg.tensor(targets), lg.tensor(il), lg.tensor(tl),
                                     **kw)
    xr = lg.tensor(lp, requires_grad=True)
    general = lg.nn.functional.ctc_loss(xr, lg.tensor(targets), lg.tensor(il),
                                        lg.tensor(tl), **kw)
    xt = torch.tensor(lp, requires_grad=True)
    ref = TF.ctc_loss(xt, torch.tensor(targets), torch.tensor(il), torch.tensor(tl), **kw)
    _same(fast, general)
    np.testing.assert_allclose(fast.numpy(), ref.detach().numpy(), rtol=1e-9, atol=1e-9)
    g = RNG.standard_normal(tuple(general.shape))
    general.backward(lg.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_ctc_native_matches_numpy_recursion():
    """The native alpha/beta recursions against the per-step NumPy recursion they
    replaced (written out here), on batches with every edge: empty targets and inputs,
    repeated labels, NaN and -inf log probabilities."""
    from llgrad.nn import _losses

    def reference(lp, targets, in_lens, tgt_lens, blank):
        t_max, n, c = lp.shape
        ninf = -np.inf
        ext_lens = 2 * tgt_lens + 1
        L = int(ext_lens.max())
        ext = np.full((n, L), blank, dtype=np.int64)
        for i in range(n):
            ext[i, 1 : 2 * tgt_lens[i] : 2] = targets[i, : tgt_lens[i]]
        valid = np.arange(L)[None, :] < ext_lens[:, None]
        skip = np.zeros((n, L), dtype=bool)
        if L > 2:
            skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2]) & valid[:, 2:]
        rows = np.arange(n)
        lpe = lp[:, rows[:, None], ext]
        alpha = np.full((t_max, n, L), ninf)
        alpha[0, :, 0] = lpe[0, :, 0]
        if L > 1:
            alpha[0, :, 1] = np.where(ext_lens > 1, lpe[0, :, 1], ninf)
        with np.errstate(all="ignore"):
            for t in range(1, t_max):
                terms = np.full((3, n, L), ninf)
                terms[0] = alpha[t - 1]
                terms[1, :, 1:] = alpha[t - 1, :, :-1]
                terms[2, :, 2:] = np.where(skip[:, 2:], alpha[t - 1, :, :-2], ninf)
                alpha[t] = _losses._logsumexp_np(*terms) + lpe[t]
        return alpha, ext_lens, valid

    rng = np.random.default_rng(7)
    for trial in range(30):
        T, N, C = int(rng.integers(1, 20)), int(rng.integers(1, 5)), int(rng.integers(2, 7))
        lp, targets, il, tl = _ctc_case(T, N, C, int(rng.integers(0, 8)), trial,
                                        repeats=trial % 3 == 0)
        if trial % 5 == 0:
            lp[min(1, T - 1), 0, 1] = np.nan
        if trial % 7 == 0:
            lp[0, -1, 0] = -np.inf
        want, ext_lens, valid = reference(lp, targets, il, tl, 0)
        fast, _ = _losses._ctc_forward(lp, targets, il, tl, 0, False, with_grad=False)
        # the per-sequence losses from the reference alphas
        last = np.clip(il - 1, 0, None)
        rows = np.arange(N)
        fin = want[last, rows]
        pen = np.where(ext_lens > 1, ext_lens - 2, 0)
        with np.errstate(all="ignore"):
            nll = -_losses._logsumexp_np(fin[rows, ext_lens - 1],
                                         np.where(ext_lens > 1, fin[rows, pen], -np.inf))
        nll = np.where(il == 0, np.where(ext_lens == 1, 0.0, np.inf), nll)
        np.testing.assert_allclose(fast, nll, rtol=1e-13, atol=1e-13, equal_nan=True)


def test_ctc_loss_float32_and_unbatched():
    import torch.nn.functional as TF
    lp, targets, il, tl = _ctc_case(50, 16, 20, 30, 3)
    tl = np.maximum(tl, 1)
    il = np.full(16, 50)
    out = lg.nn.functional.ctc_loss(lg.tensor(lp, dtype=lg.float32), lg.tensor(targets),
                                    lg.tensor(il), lg.tensor(tl), zero_infinity=True)
    ref = TF.ctc_loss(torch.tensor(lp, dtype=torch.float32), torch.tensor(targets),
                      torch.tensor(il), torch.tensor(tl), zero_infinity=True)
    assert out.dtype == lg.float32
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5)
    one = lg.nn.functional.ctc_loss(lg.tensor(lp[:, 0]), lg.tensor(targets[0, :tl[0]]),
                                    [50], [int(tl[0])], reduction="none")
    ref1 = TF.ctc_loss(torch.tensor(lp[:, 0]), torch.tensor(targets[0, :tl[0]]), [50],
                       [int(tl[0])], reduction="none")
    assert one.shape == ()
    np.testing.assert_allclose(one.numpy(), ref1.numpy(), rtol=1e-9)


# --------------------------------------------------------------------------------------
# stft / istft
# --------------------------------------------------------------------------------------

def _spec_same(fast: lg.Tensor, general: lg.Tensor) -> None:
    assert fast.shape == general.shape and fast.dtype == general.dtype
    assert fast.stride() == general.stride()
    np.testing.assert_array_equal(fast.numpy(), general.detach().numpy())


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64])
@pytest.mark.parametrize("shape", [(100,), (3, 64)])
def test_stft_istft_fast_equals_general(dtype, shape):
    modes = ("reflect", "constant", "replicate", "circular")
    for n_fft, hop, win, center, mode, normalized, use_w in itertools.product(
            (8, 16), (None, 3), (None, 6), (True, False), modes, (False, True),
            (False, True)):
        x = lg.tensor(RNG.standard_normal(shape), dtype=dtype)
        w = lg.tensor(RNG.random(win or n_fft) + 0.5, dtype=dtype) if use_w else None
        kw = dict(n_fft=n_fft, hop_length=hop, win_length=win, window=w, center=center,
                  pad_mode=mode, normalized=normalized, return_complex=True)
        general = lg.stft(x.clone().requires_grad_(), **kw)
        first, second = lg.stft(x, **kw), lg.stft(x, **kw)
        _spec_same(first, general)
        _spec_same(second, general)
        if not center or mode != "reflect":
            continue
        ikw = dict(n_fft=n_fft, hop_length=hop, win_length=win, window=w, center=center,
                   normalized=normalized)
        for length in (None, 5, shape[-1], shape[-1] + 7):
            try:
                want = lg.istft(second.detach().clone().requires_grad_(), length=length,
                                **ikw)
            except RuntimeError:
                for _ in range(2):              # the NOLA error, from the general form
                    with pytest.raises(RuntimeError, match="NOLA"):
                        lg.istft(second, length=length, **ikw)
                continue
            for _ in range(2):
                _spec_same(lg.istft(second, length=length, **ikw), want)


def test_stft_istft_against_torch():
    x = RNG.standard_normal((2, 100)).astype(np.float32)
    w = np.hanning(16).astype(np.float32) + 0.1
    out = lg.stft(lg.tensor(x), 16, window=lg.tensor(w), return_complex=True)
    out = lg.stft(lg.tensor(x), 16, window=lg.tensor(w), return_complex=True)
    ref = torch.stft(torch.tensor(x), 16, window=torch.tensor(w), return_complex=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)
    X = RNG.standard_normal((10, 5, 6)) + 1j * RNG.standard_normal((10, 5, 6))
    wi = np.hanning(8) + 0.1
    for _ in range(2):
        y = lg.istft(lg.tensor(X), 8, window=lg.tensor(wi), center=True)
    yr = torch.istft(torch.tensor(X), 8, window=torch.tensor(wi), center=True)
    np.testing.assert_allclose(y.numpy(), yr.numpy(), rtol=1e-9, atol=1e-9)


def test_stft_gradients_take_general_path():
    x = RNG.standard_normal((2, 40))
    xl = lg.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    a = lg.stft(xl, 8, return_complex=True)
    b = torch.stft(xt, 8, return_complex=True)
    a.abs().sum().backward()
    b.abs().sum().backward()
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-9)
    with lg.no_grad():
        c = lg.stft(xl, 8, return_complex=True)
    assert not c.requires_grad
    np.testing.assert_array_equal(c.numpy(), a.detach().numpy())
