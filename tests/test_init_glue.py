"""nn.init in full, the autograd namespace's legacy and switch names, gradcheck's torch
keywords (forward mode, complex), lg.backends and lg.jit, against torch."""
from __future__ import annotations

import importlib.util
import io
import math
import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad.nn import init

torch = pytest.importorskip("torch")
tinit = torch.nn.init


# -- nn.init: deterministic initializers are exact ------------------------------------------

@pytest.mark.parametrize("name,shape,args", [
    ("constant_", (3, 4), (0.25,)), ("ones_", (2, 5), ()), ("zeros_", (4,), ()),
    ("eye_", (3, 5), ()), ("eye_", (4, 2), ()),
    ("dirac_", (4, 2, 3), ()), ("dirac_", (6, 3, 3, 4), (2,)), ("dirac_", (2, 2, 3, 3, 3), ()),
])
def test_deterministic_initializers_exact(name, shape, args):
    t = lg.empty(*shape, dtype=lg.float64)
    w = torch.empty(*shape, dtype=torch.float64)
    out = getattr(init, name)(t, *args)
    getattr(tinit, name)(w, *args)
    assert out is t
    np.testing.assert_array_equal(t.numpy(), w.numpy())


@pytest.mark.parametrize("nl,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                      ("tanh", None), ("relu", None), ("leaky_relu", None),
                                      ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None)])
def test_calculate_gain(nl, param):
    assert init.calculate_gain(nl, param) == pytest.approx(tinit.calculate_gain(nl, param),
                                                           rel=1e-15)


# -- nn.init: random initializers, statistics with seeds -------------------------------------

def _stats(t):
    v = t.detach().numpy().astype(np.float64).ravel()
    return v.mean(), v.std(), v.min(), v.max()


@pytest.mark.parametrize("name,shape,kw,bound,std", [
    ("uniform_", (200, 300), dict(a=-2.0, b=3.0), (-2.0, 3.0), 5 / math.sqrt(12)),
    ("normal_", (200, 300), dict(mean=1.0, std=0.5), None, 0.5),
    ("xavier_uniform_", (300, 200), dict(gain=2.0), None, 2 * math.sqrt(2 / 500)),
    ("xavier_normal_", (300, 200), dict(), None, math.sqrt(2 / 500)),
    ("kaiming_uniform_", (300, 50, 2, 2), dict(a=0.1), None,
     math.sqrt(2 / 1.01) / math.sqrt(200)),
    ("kaiming_normal_", (300, 200), dict(mode="fan_out", nonlinearity="relu"), None,
     math.sqrt(2 / 300)),
    ("trunc_normal_", (300, 200), dict(std=1.0, a=-1.0, b=1.5), (-1.0, 1.5), None),
    ("trunc_normal_", (300, 200), dict(mean=0.2, std=3.0, a=-0.5, b=0.5), (-0.5, 0.5),
     None),
])
def test_random_initializers_statistics(name, shape, kw, bound, std):
    lg.manual_seed(0)
    t = getattr(init, name)(lg.empty(*shape), **kw)
    torch.manual_seed(0)
    w = getattr(tinit, name)(torch.empty(*shape), **kw)
    mine, theirs = _stats(t), _stats(lg.tensor(w.numpy()))
    assert mine[0] == pytest.approx(theirs[0], abs=0.01 + 0.01 * abs(theirs[1]))
    assert mine[1] == pytest.approx(theirs[1], rel=0.02)
    if std is not None:
        assert mine[1] == pytest.approx(std, rel=0.02)
    if bound is not None:
        assert bound[0] <= mine[2] and mine[3] <= bound[1]
    lg.manual_seed(0)
    again = getattr(init, name)(lg.empty(*shape), **kw)
    np.testing.assert_array_equal(again.numpy(), t.numpy())       # reproducible


def test_generator_argument_is_used():
    for name, kw in (("uniform_", {}), ("normal_", {}), ("trunc_normal_", {}),
                     ("xavier_uniform_", {}), ("kaiming_normal_", {}), ("orthogonal_", {}),
                     ("sparse_", dict(sparsity=0.3))):
        a = getattr(init, name)(lg.empty(6, 5), generator=lg.Generator().manual_seed(3), **kw)
        b = getattr(init, name)(lg.empty(6, 5), generator=lg.Generator().manual_seed(3), **kw)
        c = getattr(init, name)(lg.empty(6, 5), generator=lg.Generator().manual_seed(4), **kw)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert not np.array_equal(a.numpy(), c.numpy()), name


@pytest.mark.parametrize("shape,gain", [((5, 8), 1.0), ((8, 5), 2.0), ((6, 2, 3), 0.5)])
def test_orthogonal(shape, gain):
    lg.manual_seed(1)
    t = init.orthogonal_(lg.empty(*shape, dtype=lg.float64), gain=gain)
    m = t.numpy().reshape(shape[0], -1)
    small = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(small, gain ** 2 * np.eye(small.shape[0]), atol=1e-12)


def test_sparse_zeros_per_column():
    lg.manual_seed(2)
    t = init.sparse_(lg.empty(10, 7), sparsity=0.25, std=0.1)
    zeros = (t.numpy() == 0).sum(0)
    assert (zeros == math.ceil(0.25 * 10)).all()
    assert 0.05 < np.abs(t.numpy()[t.numpy() != 0]).mean() < 0.15


def test_trunc_normal_warns_as_torch():
    with pytest.warns(UserWarning, match="mean is more than 2 std"):
        init.trunc_normal_(lg.empty(3), mean=5.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("old", ["uniform", "normal", "constant", "eye", "dirac",
                                 "xavier_uniform", "xavier_normal", "kaiming_uniform",
                                 "kaiming_normal", "orthogonal", "sparse"])
def test_deprecated_aliases_warn(old):
    args = {"constant": (0.5,), "sparse": (0.1,)}.get(old, ())
    t = lg.empty(*((2, 3, 3) if old == "dirac" else (3, 4)))
    with pytest.warns(FutureWarning, match=f"nn.init.{old}` is now deprecated"):
        out = getattr(init, old)(t, *args)
    assert out is t
    assert getattr(init, old).__name__ == old


@pytest.mark.parametrize("call,err", [
    (lambda m: m.eye_(m_empty(m, 3)), ValueError),
    (lambda m: m.dirac_(m_empty(m, 3, 3)), ValueError),
    (lambda m: m.dirac_(m_empty(m, 3, 2, 3), groups=2), ValueError),
    (lambda m: m.orthogonal_(m_empty(m, 3)), ValueError),
    (lambda m: m.sparse_(m_empty(m, 3, 2, 2), 0.1), ValueError),
    (lambda m: m.xavier_uniform_(m_empty(m, 3)), ValueError),
    (lambda m: m.kaiming_normal_(m_empty(m, 3, 3), mode="fan_x"), ValueError),
    (lambda m: m.calculate_gain("nope"), ValueError),
    (lambda m: m.calculate_gain("leaky_relu", "x"), ValueError),
])
def test_errors_as_torch(call, err):
    with pytest.raises(err):
        call(init)
    with pytest.raises(err):
        call(tinit)


def m_empty(m, *shape):
    return lg.empty(*shape) if m is init else torch.empty(*shape)


def test_initializers_leave_autograd_alone():
    p = lg.nn.Parameter(lg.empty(4, 4))
    for fn in (init.orthogonal_, init.trunc_normal_, init.eye_, init.kaiming_uniform_):
        assert fn(p) is p
        assert p.requires_grad and p.grad_fn is None


# -- autograd namespace ---------------------------------------------------------------------

def test_variable_as_torch():
    for lib in (lg, torch):
        t = lib.ones(2)
        v = lib.autograd.Variable(t, requires_grad=True)
        assert v is not t and v.requires_grad and v.is_leaf and not t.requires_grad
        with lib.no_grad():
            v.add_(1)
        assert float(t.sum()) == 4.0                          # shares t's memory
        w = (v * 3).sum()
        u = lib.autograd.Variable(w)
        assert u.grad_fn is None and not u.requires_grad      # detached
        assert isinstance(t, lib.autograd.Variable)
        assert tuple(lib.autograd.Variable().shape) == (0,)
        with pytest.raises(TypeError, match="Variable data has to be a tensor"):
            lib.autograd.Variable([1, 2])
        with pytest.warns(UserWarning, match="volatile"):
            lib.autograd.Variable(t, volatile=True)


def test_multithreading_switch_as_torch():
    for lib in (lg, torch):
        assert lib.autograd.is_multithreading_enabled()
        with lib.autograd.set_multithreading_enabled(False):
            assert not lib.autograd.is_multithreading_enabled()
        assert lib.autograd.is_multithreading_enabled()


def _pairs():
    x = np.random.default_rng(0).standard_normal((3, 2))
    return x


@pytest.mark.parametrize("kw", [dict(check_forward_ad=True),
                                dict(check_forward_ad=True, check_backward_ad=False),
                                dict(check_forward_ad=True, check_batched_forward_grad=True),
                                dict(fast_mode=True, check_forward_ad=True),
                                dict(masked=False)])
def test_gradcheck_torch_keywords(kw):
    x = _pairs()

    def f(lib):
        return lambda a, b: (lib.sin(a) * b, (a * a).sum(1))
    for lib in (lg, torch):
        a = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        b = lib.tensor(x[::-1].copy(), dtype=lib.float64, requires_grad=True)
        assert lib.autograd.gradcheck(f(lib), (a, b), **kw)


def test_gradgradcheck_torch_keywords():
    x = _pairs()
    for lib in (lg, torch):
        a = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        assert lib.autograd.gradgradcheck(lambda a: (a ** 3).tanh(), (a,),
                                          check_fwd_over_rev=True)
        assert lib.autograd.gradgradcheck(lambda a: a.exp() * a, (a,),
                                          check_rev_over_rev=False, check_fwd_over_rev=True,
                                          check_undefined_grad=False, masked=False)
        with pytest.raises(AssertionError, match="check_rev_over_rev"):
            lib.autograd.gradgradcheck(lambda a: a * a, (a,), check_rev_over_rev=False)
        with pytest.raises(AssertionError, match="check_forward_ad"):
            lib.autograd.gradcheck(lambda a: a * a, (a,), check_batched_forward_grad=True)


@pytest.mark.parametrize("fn", [lambda L, z: z * z, lambda L, z: L.abs(z),
                                lambda L, z: z.conj() * z + L.exp(z),
                                lambda L, z: (z * z).real, lambda L, z: L.view_as_real(z)])
def test_gradcheck_complex_inputs_and_outputs(fn):
    z = np.array([1 + 2j, -0.5 + 0.3j, 2 - 1j])
    for lib in (lg, torch):
        t = lib.tensor(z, dtype=lib.complex128, requires_grad=True)
        assert lib.autograd.gradcheck(lambda t: fn(lib, t), (t,))
        assert lib.autograd.gradgradcheck(lambda t: fn(lib, t), (t,))


def test_gradcheck_complex_catches_wrong_convention():
    class Wrong(lg.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            return z * (2 + 1j)

        @staticmethod
        def backward(ctx, g):                 # missing the conjugate
            return g * (2 + 1j)

    z = lg.tensor([1 + 2j, 3 - 1j], dtype=lg.complex128, requires_grad=True)
    assert not lg.autograd.gradcheck(Wrong.apply, (z,), raise_exception=False)
    with pytest.raises(lg.autograd.GradcheckError):
        lg.autograd.gradcheck(Wrong.apply, (z,))


def test_forward_ad_check_catches_wrong_jvp():
    """A Function computed on the host (NumPy) carries no tangent: its backward is right,
    its forward-mode derivative is missing, which check_forward_ad reports."""
    class HostSquare(lg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return lg.tensor(x.detach().numpy() ** 2)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = lg.tensor([0.5, 1.5], dtype=lg.float64, requires_grad=True)
    assert lg.autograd.gradcheck(HostSquare.apply, (x,))
    with pytest.raises(lg.autograd.GradcheckError, match="forward mode"):
        lg.autograd.gradcheck(HostSquare.apply, (x,), check_forward_ad=True)


# -- backends --------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["cudnn.enabled", "cudnn.benchmark", "cudnn.deterministic",
                                  "cudnn.allow_tf32", "cudnn.benchmark_limit",
                                  "mkldnn.enabled", "mkldnn.deterministic",
                                  "cuda.matmul.allow_tf32",
                                  "cuda.matmul.allow_fp16_reduced_precision_reduction",
                                  "fp32_precision", "opt_einsum.enabled",
                                  "opt_einsum.strategy"])
def test_backend_flags_read_as_cpu_torch_and_write(path):
    def get(root):
        obj = root
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj
    if path.startswith("opt_einsum") and importlib.util.find_spec("opt_einsum") is not None:
        # torch's answer follows whether the optional opt_einsum package is installed (jax
        # brings it); llgrad never uses it, so it reads as torch without the package
        assert get(lg.backends) == {"opt_einsum.enabled": False,
                                    "opt_einsum.strategy": None}[path]
    else:
        assert get(lg.backends) == get(torch.backends)
    head, _, last = path.rpartition(".")
    owner = lg.backends
    for part in head.split(".") if head else []:
        owner = getattr(owner, part)
    old = getattr(owner, last)
    try:
        setattr(owner, last, "x")
        assert get(lg.backends) == "x"
    finally:
        setattr(owner, last, old)


def test_backend_availability_and_scopes():
    import llgrad.backends.cudnn as cudnn
    import llgrad.backends.mps as mps
    assert cudnn is lg.backends.cudnn and mps is lg.backends.mps
    assert not cudnn.is_available() and cudnn.version() is None
    assert not mps.is_available() and not mps.is_built()
    assert not lg.backends.cuda.is_built() and not lg.backends.mkldnn.is_available()
    assert isinstance(lg.backends.mkl.is_available(), bool)
    assert not lg.backends.openmp.is_available()
    assert lg.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
    with cudnn.flags(enabled=False, deterministic=True):
        assert not cudnn.enabled and cudnn.deterministic
    assert cudnn.enabled and not cudnn.deterministic
    assert lg.backends.cuda.flash_sdp_enabled() == torch.backends.cuda.flash_sdp_enabled()
    lg.backends.cuda.enable_math_sdp(False)
    assert not lg.backends.cuda.math_sdp_enabled()
    lg.backends.cuda.enable_math_sdp(True)
    assert lg.backends.mha.get_fastpath_enabled() == torch.backends.mha.get_fastpath_enabled()


# -- jit -------------------------------------------------------------------------------------

def test_jit_returns_objects_unchanged_with_one_notice():
    m = lg.nn.Linear(3, 2)
    f = lambda x: x * 2                                         # noqa: E731
    lg.jit._noticed.clear()
    with pytest.warns(UserWarning, match="no TorchScript"):
        assert lg.jit.script(m) is m
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lg.jit.script(f) is f                           # once per entry point
    with pytest.warns(UserWarning):
        assert lg.jit.trace(f, (lg.ones(2),)) is f
    with pytest.warns(UserWarning):
        assert lg.jit.trace_module(m, {"forward": lg.ones(1, 3)}) is m
    assert lg.jit.ignore(f) is f and lg.jit.ignore(drop=True)(f) is f
    assert lg.jit.unused(f) is f and lg.jit.export(f) is f
    assert lg.jit.annotate(list, [1]) == [1]
    assert not lg.jit.is_scripting() and not lg.jit.is_tracing()
    assert lg.jit.wait(lg.jit.fork(f, 3)) == 6
    assert lg.jit.freeze(m) is m and lg.jit.optimize_for_inference(m) is m
    seen = []
    lg.compile(lambda x: seen.append(lg.jit.is_tracing()) or x + 1)(lg.ones(1))
    assert seen and seen[0] is True


def test_jit_save_load_round_trip():
    lg.manual_seed(0)
    m = lg.nn.Sequential(lg.nn.Linear(3, 4), lg.nn.ReLU(), lg.nn.Linear(4, 1))
    buf = io.BytesIO()
    lg.jit.save(m, buf, _extra_files={"meta.txt": b"hello"})
    buf.seek(0)
    extra = {"meta.txt": ""}
    back = lg.jit.load(buf, _extra_files=extra)
    x = lg.randn(5, 3)
    np.testing.assert_array_equal(back(x).detach().numpy(), m(x).detach().numpy())
    assert extra["meta.txt"] == b"hello"
    bad = io.BytesIO()
    lg.save({"a": 1}, bad)
    bad.seek(0)
    with pytest.raises(RuntimeError, match="jit.save"):
        lg.jit.load(bad)
