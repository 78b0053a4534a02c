"""lg.fft, window functions, stft/istft against torch: values, dtypes, gradients
(torch's autograd and gradcheck/gradgradcheck in float64), errors, lg.compile."""
import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(1234)


def _data(shape, complex_=False, dtype=np.float64):
    a = RNG.standard_normal(shape)
    if complex_:
        a = a + 1j * RNG.standard_normal(shape)
        return a.astype(np.complex128 if dtype == np.float64 else np.complex64)
    return a.astype(dtype)


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().numpy()
    return t.detach().numpy()


def _close(a, b, tol):
    assert tuple(a.shape) == tuple(b.shape)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


REAL_IN = ["fft", "ifft", "rfft", "ihfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2",
           "rfftn", "ihfft2", "ihfftn", "irfft", "hfft", "irfftn", "hfftn"]
COMPLEX_IN = ["fft", "ifft", "irfft", "hfft", "fft2", "ifft2", "fftn", "ifftn", "irfft2",
              "irfftn", "hfft2", "hfftn"]
ONE_D = {"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"}


def _kwargs(name, variant):
    one = name in ONE_D
    return [{}, {"norm": "ortho"}, {"norm": "forward"},
            {"n": 5, "dim": 0} if one else {"s": (3, 5)},
            {"n": 9} if one else {"s": (7,), "dim": (0,), "norm": "ortho"},
            {"dim": 1} if one else {"dim": (2, 0)}][variant]


DTYPE_VARIANTS = [(np.float64, v) for v in range(6)] + [(np.float32, 0), (np.float32, 3)]


@pytest.mark.parametrize("dtype,variant", DTYPE_VARIANTS)
@pytest.mark.parametrize("name", REAL_IN)
def test_real_input_values(name, dtype, variant):
    a = _data((4, 6, 3), dtype=dtype)
    kw = _kwargs(name, variant)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    _close(getattr(lg.fft, name)(lg.tensor(a), **kw), getattr(torch.fft, name)(
        torch.tensor(a), **kw), tol)


@pytest.mark.parametrize("dtype,variant", DTYPE_VARIANTS)
@pytest.mark.parametrize("name", COMPLEX_IN)
def test_complex_input_values(name, dtype, variant):
    a = _data((4, 6, 3), True, dtype)
    kw = _kwargs(name, variant)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    _close(getattr(lg.fft, name)(lg.tensor(a), **kw), getattr(torch.fft, name)(
        torch.tensor(a), **kw), tol)


def test_non_contiguous_and_integer_inputs():
    a = _data((6, 8))
    x, t = lg.tensor(a).t(), torch.tensor(a).t()
    _close(lg.fft.fft(x), torch.fft.fft(t), 1e-10)
    _close(lg.fft.rfft2(x[::2]), torch.fft.rfft2(t[::2]), 1e-10)
    c = _data((5, 6), True)
    _close(lg.fft.ifftn(lg.tensor(c)[:, 1::2]), torch.fft.ifftn(torch.tensor(c)[:, 1::2]),
           1e-10)
    i = np.arange(10).reshape(2, 5)
    _close(lg.fft.fft(lg.tensor(i)), torch.fft.fft(torch.tensor(i)), 1e-5)
    _close(lg.fft.rfft(lg.tensor(i > 3)), torch.fft.rfft(torch.tensor(i > 3)), 1e-5)


GRAD_CASES = [("fft", {}, False), ("fft", {"n": 7}, True), ("fft", {"n": 3, "norm": "ortho"},
                                                               False),
              ("ifft", {"norm": "forward"}, True), ("rfft", {}, False), ("rfft", {"n": 5}, False),
              ("irfft", {}, True), ("irfft", {"n": 7}, False), ("irfft", {"n": 8, "norm": "ortho"},
                                                                 True),
              ("hfft", {}, True), ("hfft", {"n": 7}, False), ("ihfft", {}, False),
              ("ihfft", {"n": 5, "norm": "forward"}, False), ("fft2", {}, True),
              ("rfft2", {}, False), ("irfft2", {}, True), ("irfftn", {"s": (3, 7)}, True),
              ("hfftn", {}, True), ("ihfftn", {}, False), ("hfft2", {"s": (4, 5)}, False),
              ("ifftn", {"s": (2, 9), "norm": "ortho"}, True)]


@pytest.mark.parametrize("name,kw,cplx", GRAD_CASES)
def test_gradients_match_torch_and_gradcheck(name, kw, cplx):
    a = _data((3, 6), cplx)
    x = lg.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    y, ty = getattr(lg.fft, name)(x, **kw), getattr(torch.fft, name)(t, **kw)
    g = _data(tuple(ty.shape), ty.is_complex())
    gx, = lg.autograd.grad(y, x, lg.tensor(g))
    gt, = torch.autograd.grad(ty, t, torch.tensor(g))
    _close(gx, gt, 1e-10)
    assert y.grad_fn.name() in ("FftC2CBackward0", "FftR2CBackward0", "FftC2RBackward0")

    def f(z):
        out = getattr(lg.fft, name)(lg.view_as_complex(z) if cplx else z, **kw)
        return lg.view_as_real(out) if out.is_complex() else out
    inp = lg.view_as_real(x.detach()).clone().requires_grad_() if cplx else x
    assert gradcheck(f, (inp,))
    assert gradgradcheck(f, (inp,))


def test_double_backward_matches_torch():
    a = _data((8,))
    x, t = lg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y = (lg.fft.rfft(x).abs() ** 2).sum()
    ty = (torch.fft.rfft(t).abs() ** 2).sum()
    gx, = lg.autograd.grad(y, x, create_graph=True)
    gt, = torch.autograd.grad(ty, t, create_graph=True)
    _close(gx, gt, 1e-10)
    _close(lg.autograd.grad((gx * gx).sum(), x)[0], torch.autograd.grad((gt * gt).sum(), t)[0],
           1e-9)


def test_forward_mode_and_vmap():
    a = _data((3, 5))
    import llgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        dual = fwAD.make_dual(lg.tensor(a), lg.tensor(a * 2))
        tangent = fwAD.unpack_dual(lg.fft.rfft(dual)).tangent
    _close(tangent, torch.fft.rfft(torch.tensor(a * 2)), 1e-10)
    _close(lg.vmap(lambda v: lg.fft.fft(v, n=7))(lg.tensor(a)),
           torch.fft.fft(torch.tensor(a), n=7), 1e-10)


def test_freq_and_shift():
    for n, d in [(1, 1.0), (5, 0.3), (6, 2.0), (0, 1.0)]:
        _close(lg.fft.fftfreq(n, d), torch.fft.fftfreq(n, d), 1e-7)
        _close(lg.fft.rfftfreq(n, d, dtype=lg.float64),
               torch.fft.rfftfreq(n, d, dtype=torch.float64), 1e-12)
    a = np.arange(30.0).reshape(5, 6)
    for dim in [None, 0, (1,), (-1, 0)]:
        _close(lg.fft.fftshift(lg.tensor(a), dim), torch.fft.fftshift(torch.tensor(a), dim), 0)
        _close(lg.fft.ifftshift(lg.tensor(a), dim), torch.fft.ifftshift(torch.tensor(a), dim), 0)
    assert lg.fft.fftfreq(4, requires_grad=True).requires_grad


def test_out_argument():
    a = _data((4,), dtype=np.float32)
    out = lg.empty(0, dtype=lg.complex64)
    res = lg.fft.fft(lg.tensor(a), out=out)
    assert res is out
    _close(out, torch.fft.fft(torch.tensor(a)), 1e-5)
    wide = lg.empty(4, dtype=lg.complex128)
    lg.fft.fft(lg.tensor(a), out=wide)
    assert wide.dtype == lg.complex128
    with pytest.warns(UserWarning, match="resized"):
        lg.fft.rfft(lg.tensor(a), out=lg.empty(7, dtype=lg.complex64))
    with pytest.raises(RuntimeError, match="complex output"):
        lg.fft.fft(lg.tensor(a), out=lg.empty(4))
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        lg.fft.fft(lg.tensor(a, requires_grad=True), out=lg.empty(4, dtype=lg.complex64))


@pytest.mark.parametrize("call,error,match", [
    (lambda: lg.fft.fft(lg.ones(4, dtype=lg.float16)), RuntimeError, "Unsupported dtype Half"),
    (lambda: lg.fft.rfft(lg.ones(4, dtype=lg.bfloat16)), RuntimeError, "BFloat16"),
    (lambda: lg.fft.rfft(lg.ones(4, dtype=lg.complex64)), RuntimeError, "real input"),
    (lambda: lg.fft.fft(lg.ones(4), n=0), RuntimeError, "Invalid number of data points"),
    (lambda: lg.fft.irfft(lg.ones(1)), RuntimeError, "Invalid number of data points"),
    (lambda: lg.fft.fft(lg.ones(4), norm="bad"), ValueError, "normalization"),
    (lambda: lg.fft.fft(lg.ones(())), IndexError, "no dimensions"),
    (lambda: lg.fft.fft(lg.ones(3), dim=2), IndexError, "out of range"),
    (lambda: lg.fft.fftn(lg.ones(3, 3), dim=(0, 0)), RuntimeError, "unique"),
    (lambda: lg.fft.fftn(lg.ones(2, 3), s=(2,), dim=(0, 1)), RuntimeError, "same length"),
    (lambda: lg.fft.fft(lg.ones(0)), RuntimeError, "Invalid number of data points"),
    (lambda: lg.hann_window(4, dtype=lg.int64), RuntimeError, "floating point"),
    (lambda: lg.hann_window(-1), RuntimeError, "non-negative"),
    (lambda: lg.stft(lg.ones(20), 8), RuntimeError, "return_complex"),
    (lambda: lg.stft(lg.ones(20), 30, center=False, return_complex=True), RuntimeError, "n_fft"),
    (lambda: lg.istft(lg.ones(5, 3), 8), RuntimeError, "complex"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_compile_graph_break_and_shifts_compile():
    a = _data((4, 6), dtype=np.float32)
    x = lg.tensor(a)

    def f(x):
        return lg.fft.rfft(x * 2).abs().sum(-1)
    cf = lg.compile(f)
    _close(cf(x), f(x), 1e-6)
    assert any("lg.fft" in b for b in cf.graph_breaks)
    with pytest.raises(Exception, match="lg.fft"):
        lg.compile(f, fullgraph=True)(x)

    def g(x):
        return lg.fft.fftshift(x) * 2 + lg.fft.ifftshift(x, dim=0) + lg.fft.fftfreq(6, 0.5)
    cg = lg.compile(g)
    _close(cg(x), g(x), 1e-6)
    assert not cg.graph_breaks


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
def test_windows(name):
    for n in [0, 1, 2, 5, 8]:
        for periodic in [True, False]:
            _close(getattr(lg, name)(n, periodic), getattr(torch, name)(n, periodic), 1e-6)
            _close(getattr(lg, name)(n, periodic, dtype=lg.float64),
                   getattr(torch, name)(n, periodic, dtype=torch.float64), 1e-12)
    _close(lg.hamming_window(7, True, 0.6, 0.3), torch.hamming_window(7, True, 0.6, 0.3), 1e-6)
    _close(lg.kaiser_window(9, beta=5.0), torch.kaiser_window(9, True, 5.0), 1e-6)


STFT_CASES = [dict(n_fft=8), dict(n_fft=8, hop_length=3, win_length=6, window=True),
              dict(n_fft=16, center=False, normalized=True, window=True),
              dict(n_fft=8, pad_mode="constant"), dict(n_fft=8, pad_mode="replicate"),
              dict(n_fft=8, pad_mode="circular", onesided=False)]


@pytest.mark.filterwarnings("ignore:A window was not provided")
@pytest.mark.parametrize("kw", STFT_CASES)
@pytest.mark.parametrize("batched", [False, True])
def test_stft_istft(kw, batched):
    sig = _data((2, 40) if batched else (40,))
    kl, kt = dict(kw), dict(kw)
    if kw.get("window"):
        wl = kw.get("win_length", kw["n_fft"])
        kl["window"] = lg.hann_window(wl, dtype=lg.float64)
        kt["window"] = torch.hann_window(wl, dtype=torch.float64)
    a = lg.stft(lg.tensor(sig), return_complex=True, **kl)
    b = torch.stft(torch.tensor(sig), return_complex=True, **kt)
    _close(a, b, 1e-10)
    if kw.get("pad_mode", "reflect") == "reflect" and kw.get("center", True):
        ki = {k: v for k, v in kl.items() if k != "pad_mode"}
        kti = {k: v for k, v in kt.items() if k != "pad_mode"}
        for length in [None, 37]:
            _close(lg.istft(a, length=length, **ki), torch.istft(b, length=length, **kti),
                   1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(lg.stft(lg.tensor(sig), return_complex=False, **kl),
               torch.stft(torch.tensor(sig), return_complex=False, **kt), 1e-10)


def test_stft_istft_gradients():
    sig = _data((2, 30))
    x, t = lg.tensor(sig, requires_grad=True), torch.tensor(sig, requires_grad=True)
    wl = lg.hann_window(8, dtype=lg.float64, requires_grad=True)
    wt = torch.hann_window(8, dtype=torch.float64, requires_grad=True)
    y = lg.stft(x, 8, hop_length=3, window=wl, return_complex=True)
    ty = torch.stft(t, 8, hop_length=3, window=wt, return_complex=True)
    g = _data(tuple(ty.shape), True)
    for u, v in zip(lg.autograd.grad(y, (x, wl), lg.tensor(g)),
                    torch.autograd.grad(ty, (t, wt), torch.tensor(g))):
        _close(u, v, 1e-10)
    Y = lg.tensor(_np(ty), requires_grad=True)
    TY = torch.tensor(_np(ty), requires_grad=True)
    r = lg.istft(Y, 8, hop_length=3, window=wl.detach())
    tr = torch.istft(TY, 8, hop_length=3, window=wt.detach())
    g2 = _data(tuple(tr.shape))
    _close(lg.autograd.grad(r, Y, lg.tensor(g2))[0], torch.autograd.grad(tr, TY,
                                                                          torch.tensor(g2))[0],
           1e-10)
    w = lg.hann_window(8, dtype=lg.float64)
    assert gradcheck(lambda s: lg.view_as_real(lg.stft(s, 8, hop_length=4, window=w,
                                                       return_complex=True)),
                     (lg.tensor(_data((20,)), requires_grad=True),))


@pytest.mark.parametrize("kw", [{"n_fft": 10}, {"n_fft": 6, "onesided": False},
                                {"n_fft": 10, "center": False}])
def test_istft_real_result_of_a_full_spectrum(kw):
    rng = np.random.default_rng(3)
    n = kw["n_fft"]
    spec = rng.standard_normal((2, n, 6)) + 1j * rng.standard_normal((2, n, 6))
    _close(lg.istft(lg.tensor(spec), **kw), torch.istft(torch.tensor(spec), **kw), 1e-10)
