"""llgrad.distributions against torch.distributions: densities, cdf/icdf, entropies,
moments, gradients, samples, KL divergences, transforms, constraints and validation."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributions as TD  # noqa: E402

import llgrad as lg  # noqa: E402
import llgrad.distributions as LD  # noqa: E402

RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _torch_float64():
    """float64 by default in both libraries (torch's own code makes default-dtype
    constants, e.g. GeneralizedPareto's isclose, that refuse float64 parameters)."""
    old, old_lg = torch.get_default_dtype(), lg.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    lg.set_default_dtype(lg.float64)
    yield
    torch.set_default_dtype(old)
    lg.set_default_dtype(old_lg)


def pos(*shape, lo=0.5, hi=2.5):
    return RNG.uniform(lo, hi, size=shape)


def real(*shape):
    return RNG.normal(size=shape)


def unit(*shape):
    return RNG.uniform(0.1, 0.9, size=shape)


def simplex(*shape):
    x = RNG.uniform(0.2, 1.0, size=shape)
    return x / x.sum(-1, keepdims=True)


def spd(*batch, n=3):
    a = RNG.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def tril(*batch, n=3):
    a = np.tril(RNG.normal(size=batch + (n, n)) * 0.3)
    idx = np.arange(n)
    a[..., idx, idx] = RNG.uniform(0.5, 1.5, size=batch + (n,))
    return a


def to_t(v, requires_grad=False):
    if isinstance(v, np.ndarray):
        t = torch.tensor(v, dtype=torch.float64)
        return t.requires_grad_(requires_grad)
    return v


def to_l(v, requires_grad=False):
    if isinstance(v, np.ndarray):
        t = lg.tensor(v, dtype=lg.float64)
        return t.requires_grad_(requires_grad)
    return v


def close(a, b, rtol=1e-6, atol=1e-8, what=""):
    a = np.asarray(a.detach().numpy() if hasattr(a, "detach") else a, dtype=np.float64)
    b = np.asarray(b.detach().numpy() if hasattr(b, "detach") else b, dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


# name, params, extra construction kwargs (not tensors), what to compare
CASES = [
    ("Normal", dict(loc=real(3, 1), scale=pos(4)), {}),
    ("Normal", dict(loc=0.5, scale=2.0), {}),
    ("Uniform", dict(low=real(2, 3) - 2, high=real(2, 3) + 2.5), {}),
    ("Laplace", dict(loc=real(4), scale=pos(2, 4)), {}),
    ("Cauchy", dict(loc=real(3), scale=pos(3)), {}),
    ("Exponential", dict(rate=pos(2, 3)), {}),
    ("Gamma", dict(concentration=pos(3, 1, lo=0.3, hi=4), rate=pos(2, lo=0.5, hi=3)), {}),
    ("Chi2", dict(df=pos(4, lo=1, hi=6)), {}),
    ("Beta", dict(concentration1=pos(2, 3, lo=0.6, hi=3), concentration0=pos(3, lo=0.6,
                                                                              hi=3)), {}),
    ("Dirichlet", dict(concentration=pos(2, 4, lo=0.6, hi=3)), {}),
    ("StudentT", dict(df=pos(3, lo=2.5, hi=6), loc=real(3), scale=pos(3)), {}),
    ("FisherSnedecor", dict(df1=pos(3, lo=3, hi=8), df2=pos(3, lo=5, hi=9)), {}),
    ("VonMises", dict(loc=real(3), concentration=pos(3, lo=0.5, hi=4)), {}),
    ("GeneralizedPareto", dict(loc=real(3), scale=pos(3), concentration=np.array([0.2, -0.2,
                                                                                 0.3])), {}),
    ("ContinuousBernoulli", dict(probs=np.array([0.2, 0.4995, 0.7, 0.9])), {}),
    ("ContinuousBernoulli", dict(logits=real(2, 3)), {}),
    ("Bernoulli", dict(probs=unit(2, 3)), {}),
    ("Bernoulli", dict(logits=real(4)), {}),
    ("Binomial", dict(total_count=np.array([5.0, 5.0, 5.0]), probs=unit(2, 3)), {}),
    ("Categorical", dict(probs=simplex(2, 5)), {}),
    ("Categorical", dict(logits=real(3, 4)), {}),
    ("OneHotCategorical", dict(probs=simplex(3, 4)), {}),
    ("Geometric", dict(probs=unit(4)), {}),
    ("Poisson", dict(rate=pos(2, 3, lo=0.5, hi=6)), {}),
    ("NegativeBinomial", dict(total_count=pos(3, lo=1, hi=5), probs=unit(3)), {}),
    ("Multinomial", dict(probs=simplex(2, 4)), {"total_count": 6}),
    ("MultivariateNormal", dict(loc=real(2, 3), covariance_matrix=spd(n=3)), {}),
    ("MultivariateNormal", dict(loc=real(3), scale_tril=tril(2, n=3)), {}),
    ("MultivariateNormal", dict(loc=real(3), precision_matrix=spd(2, n=3)), {}),
    ("LowRankMultivariateNormal", dict(loc=real(2, 3), cov_factor=real(3, 2) * 0.5,
                                       cov_diag=pos(3)), {}),
    ("LogNormal", dict(loc=real(3), scale=pos(3)), {}),
    ("HalfNormal", dict(scale=pos(2, 3)), {}),
    ("HalfCauchy", dict(scale=pos(3)), {}),
    ("Gumbel", dict(loc=real(3), scale=pos(3)), {}),
    ("Pareto", dict(scale=pos(3), alpha=pos(3, lo=2.5, hi=5)), {}),
    ("Weibull", dict(scale=pos(3), concentration=pos(3, lo=1.2, hi=3)), {}),
    ("Kumaraswamy", dict(concentration1=pos(3, lo=1.2, hi=3), concentration0=pos(3, lo=1.2,
                                                                                 hi=3)), {}),
    ("InverseGamma", dict(concentration=pos(3, lo=2.5, hi=5), rate=pos(3)), {}),
    ("LogisticNormal", dict(loc=real(2, 3), scale=pos(2, 3)), {}),
    ("RelaxedBernoulli", dict(temperature=np.array(0.7), probs=unit(3)), {}),
    ("RelaxedOneHotCategorical", dict(temperature=np.array(0.8), probs=simplex(2, 4)), {}),
    ("Wishart", dict(df=np.array([4.5, 6.0]), covariance_matrix=spd(n=3)), {}),
    ("LKJCholesky", dict(concentration=pos(2, lo=0.8, hi=3)), {"dim": 3}),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def build(case, lib, requires_grad=False):
    name, params, kw = case
    mod = LD if lib == "lg" else TD
    conv = to_l if lib == "lg" else to_t
    ps = {k: conv(v, requires_grad) for k, v in params.items()}
    return getattr(mod, name)(**kw, **ps), ps


def values_for(case):
    """Points in the support: torch samples with a fixed seed, shape (2,) + batch + event."""
    torch.manual_seed(0)
    d, _ = build(case, "torch")
    with torch.no_grad():
        v = d.sample((2,))
    if case[0] in ("Geometric", "Poisson", "NegativeBinomial"):
        v = v.clamp(max=20)
    return v.numpy().astype(np.float64)


def _attr(d, name):
    try:
        return getattr(d, name)() if name in ("entropy",) else getattr(d, name)
    except NotImplementedError:
        return NotImplementedError


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_shapes_and_moments(case):
    dl, _ = build(case, "lg")
    dt, _ = build(case, "torch")
    assert tuple(dl.batch_shape) == tuple(dt.batch_shape)
    assert tuple(dl.event_shape) == tuple(dt.event_shape)
    assert dl.has_rsample == dt.has_rsample
    assert dl.has_enumerate_support == dt.has_enumerate_support
    for name in ("mean", "variance", "stddev", "mode", "entropy"):
        a, b = _attr(dl, name), _attr(dt, name)
        if b is NotImplementedError:
            assert a is NotImplementedError, name
            continue
        close(a, b, rtol=1e-6, atol=1e-9, what=f"{case[0]}.{name}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_log_prob_cdf_icdf(case):
    dl, _ = build(case, "lg")
    dt, _ = build(case, "torch")
    v = values_for(case)
    close(dl.log_prob(lg.tensor(v)), dt.log_prob(torch.tensor(v)), rtol=1e-6, atol=1e-8,
          what=f"{case[0]}.log_prob")
    try:
        c_t = dt.cdf(torch.tensor(v))
    except NotImplementedError:
        c_t = None
    if c_t is not None:
        close(dl.cdf(lg.tensor(v)), c_t, rtol=1e-6, atol=1e-9, what=f"{case[0]}.cdf")
    q = np.broadcast_to(np.array([0.1, 0.35, 0.6, 0.9]).reshape((4,) + (1,) * len(
        dt.batch_shape)), (4,) + tuple(dt.batch_shape)).copy()
    try:
        i_t = dt.icdf(torch.tensor(q))
    except NotImplementedError:
        i_t = None
    if i_t is not None and not dt.event_shape:
        close(dl.icdf(lg.tensor(q)), i_t, rtol=1e-6, atol=1e-9, what=f"{case[0]}.icdf")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_of_log_prob_and_entropy(case):
    dl, pl = build(case, "lg", requires_grad=True)
    dt, pt = build(case, "torch", requires_grad=True)
    v = values_for(case)
    out_l = dl.log_prob(lg.tensor(v)).sum()
    out_t = dt.log_prob(torch.tensor(v)).sum()
    try:
        out_t = out_t + dt.entropy().sum()
        out_l = out_l + dl.entropy().sum()
    except NotImplementedError:
        pass
    names = [k for k, t in pt.items() if isinstance(t, torch.Tensor) and t.requires_grad]
    if not names:
        return
    gt = torch.autograd.grad(out_t, [pt[k] for k in names], allow_unused=True)
    gl = lg.autograd.grad(out_l, [pl[k] for k in names], allow_unused=True)
    for k, a, b in zip(names, gl, gt):
        if b is None:
            continue
        close(a if a is not None else np.zeros(tuple(b.shape)), b, rtol=1e-5, atol=1e-8,
              what=f"{case[0]} d/d{k}")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_sample_shapes_dtypes_and_support(case):
    lg.manual_seed(3)
    dl, _ = build(case, "lg")
    dt, _ = build(case, "torch")
    for shape in ((), (5,), (2, 3)):
        s = dl.sample(shape)
        ts = dt.sample(shape)
        assert tuple(s.shape) == tuple(ts.shape)
        assert str(s.dtype).split(".")[-1] == str(ts.dtype).split(".")[-1]
        assert bool(dl.support.check(s).all())
        assert not s.requires_grad
        if dl.has_rsample:
            assert tuple(dl.rsample(shape).shape) == tuple(ts.shape)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("Bernoulli", "Binomial",
                                                             "Categorical",
                                                             "OneHotCategorical")],
                         ids=lambda c: c[0])
def test_enumerate_support(case):
    dl, _ = build(case, "lg")
    dt, _ = build(case, "torch")
    for expand in (True, False):
        a, b = dl.enumerate_support(expand), dt.enumerate_support(expand)
        close(a, b, what="enumerate_support")
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in (
    "Normal", "Exponential", "Gamma", "Beta", "Laplace", "Dirichlet", "Poisson", "Bernoulli",
    "MultivariateNormal", "Categorical", "StudentT", "Uniform", "Binomial", "Geometric",
    "LogNormal", "Gumbel", "Weibull", "VonMises", "NegativeBinomial", "InverseGamma",
    "Kumaraswamy", "LowRankMultivariateNormal")], ids=lambda c: c[0])
def test_sample_moments(case):
    lg.manual_seed(11)
    dl, _ = build(case, "lg")
    n = 40000
    s = dl.sample((n,)).numpy().astype(np.float64)
    if case[0] == "VonMises":               # circular mean
        m = np.arctan2(np.sin(s).mean(0), np.cos(s).mean(0))
        close(m, dl.mean, atol=0.05, rtol=0, what="circular mean")
        return
    if case[0] == "Categorical":
        counts = np.stack([(s == k).mean(0) for k in range(dl.probs.shape[-1])], -1)
        close(counts, dl.probs, atol=0.015, rtol=0, what="frequencies")
        return
    mean = dl.mean.detach().numpy()
    var = dl.variance.detach().numpy()
    sem = np.sqrt(var / n)
    assert np.all(np.abs(s.mean(0) - mean) < 6 * sem + 1e-12), (s.mean(0), mean)
    if case[0] not in ("LogNormal", "InverseGamma"):      # heavy tails: no 4th moment
        np.testing.assert_allclose(s.var(0), var, rtol=0.08, atol=1e-3)


def test_location_scale_rsample_gradients_exact():
    """With the noise fixed by the seed, rsample is loc + scale * eps: gradients are exact."""
    loc = lg.tensor([0.5, -1.0], dtype=lg.float64, requires_grad=True)
    scale = lg.tensor([2.0, 0.5], dtype=lg.float64, requires_grad=True)
    lg.manual_seed(5)
    x = LD.Normal(loc, scale).rsample((3,))
    lg.manual_seed(5)
    eps = lg.randn((3, 2), dtype=lg.float64)
    close(x, loc.detach() + scale.detach() * eps, what="rsample value")
    gl, gs = lg.autograd.grad(x.sum(), [loc, scale])
    close(gl, np.full(2, 3.0), what="dloc")
    close(gs, eps.sum(0), what="dscale")
    # the same for MultivariateNormal through scale_tril
    L0 = tril(n=3)
    Lt = lg.tensor(L0, requires_grad=True)
    lg.manual_seed(6)
    y = LD.MultivariateNormal(lg.zeros(3, dtype=lg.float64), scale_tril=Lt).rsample((4,))
    lg.manual_seed(6)
    e = lg.randn((4, 3), dtype=lg.float64).numpy()
    close(y, e @ L0.T, what="mvn rsample")
    (g,) = lg.autograd.grad((y * y).sum(), [Lt])
    expected = 2 * (e @ L0.T).T @ e           # the whole matrix enters the product
    close(g, expected, what="mvn d/dscale_tril")


@pytest.mark.parametrize("alpha", [0.05, 0.3, 1.0, 2.5, 10.0, 150.0, 3000.0])
def test_gamma_implicit_gradient_per_sample(alpha):
    """dX/dalpha of a standard gamma sample against the finite difference of the quantile
    function at fixed u (scipy) and against torch's _standard_gamma_grad."""
    from scipy import special as sp
    a = lg.full((400,), alpha, dtype=lg.float64, requires_grad=True)
    lg.manual_seed(2)
    x = LD.Gamma(a, 1.0).rsample()
    (g,) = lg.autograd.grad(x.sum(), [a])
    xv, gv = x.detach().numpy(), g.numpy()
    u = sp.gammainc(alpha, xv)
    ok = (u > 1e-10) & (u < 1 - 1e-10)
    h = 1e-5 * alpha
    fd = (sp.gammaincinv(alpha + h, u) - sp.gammaincinv(alpha - h, u)) / (2 * h)
    np.testing.assert_allclose(gv[ok], fd[ok], rtol=2e-5, atol=1e-12)
    tg = torch._standard_gamma_grad(torch.full((400,), alpha, dtype=torch.float64),
                                    torch.tensor(xv)).numpy()
    np.testing.assert_allclose(gv, tg, rtol=5e-3, atol=1e-10)


@pytest.mark.parametrize("name,make,stat", [
    # d/dparam E[f(X)] estimated from rsample gradients vs the analytic derivative
    ("Gamma", lambda a: LD.Gamma(a, 2.0), lambda a: a / 2.0),
    ("Beta", lambda a: LD.Beta(a, 1.5), lambda a: a / (a + 1.5)),
    ("Dirichlet", lambda a: LD.Dirichlet(lg.stack([a, a * 0 + 2.0, a * 0 + 1.0])),
     lambda a: a / (a + 3.0)),
    ("StudentT", lambda a: LD.StudentT(a, 0.0, 1.0), None),
    ("Chi2", lambda a: LD.Chi2(a), lambda a: a),
])
def test_rsample_gradient_statistical(name, make, stat):
    lg.manual_seed(21)
    n = 30000
    a = lg.tensor(2.5, dtype=lg.float64, requires_grad=True)
    d = make(a)
    x = d.rsample((n,))
    if name == "Dirichlet":
        x = x[..., 0]
    if name == "StudentT":
        # E[X^2] = df / (df - 2): d/ddf = -2 / (df - 2)^2, at df = 10 (finite 4th moment)
        b = lg.tensor(10.0, dtype=lg.float64, requires_grad=True)
        x = LD.StudentT(b, 0.0, 1.0).rsample((n,))
        (g,) = lg.autograd.grad((x * x).mean(), [b])
        expected = -2 / (10.0 - 2) ** 2
        assert abs(g.item() - expected) < 0.3 * abs(expected), (g.item(), expected)
        return
    (g,) = lg.autograd.grad(x.mean(), [a])
    eps = 1e-6
    expected = (stat(2.5 + eps) - stat(2.5 - eps)) / (2 * eps)
    assert abs(g.item() - expected) < 0.03 * abs(expected) + 0.005, (g.item(), expected)


KL_PAIRS = [
    ("Normal", dict(loc=real(3), scale=pos(3)), "Normal", dict(loc=real(3), scale=pos(3))),
    ("Bernoulli", dict(probs=unit(3)), "Bernoulli", dict(probs=unit(3))),
    ("Categorical", dict(logits=real(2, 4)), "Categorical", dict(probs=simplex(2, 4))),
    ("OneHotCategorical", dict(probs=simplex(3)), "OneHotCategorical", dict(probs=simplex(3))),
    ("Beta", dict(concentration1=pos(3), concentration0=pos(3)), "Beta",
     dict(concentration1=pos(3), concentration0=pos(3))),
    ("Gamma", dict(concentration=pos(3), rate=pos(3)), "Gamma",
     dict(concentration=pos(3), rate=pos(3))),
    ("Dirichlet", dict(concentration=pos(2, 3)), "Dirichlet", dict(concentration=pos(2, 3))),
    ("Exponential", dict(rate=pos(3)), "Exponential", dict(rate=pos(3))),
    ("Laplace", dict(loc=real(3), scale=pos(3)), "Laplace", dict(loc=real(3), scale=pos(3))),
    ("Poisson", dict(rate=pos(3)), "Poisson", dict(rate=pos(3))),
    ("Uniform", dict(low=np.array([0.0, 0.2]), high=np.array([1.0, 0.5])), "Uniform",
     dict(low=np.array([-1.0, 0.3]), high=np.array([2.0, 1.0]))),
    ("MultivariateNormal", dict(loc=real(2, 3), covariance_matrix=spd(2)),
     "MultivariateNormal", dict(loc=real(3), scale_tril=tril())),
    ("LowRankMultivariateNormal", dict(loc=real(3), cov_factor=real(3, 2), cov_diag=pos(3)),
     "LowRankMultivariateNormal", dict(loc=real(3), cov_factor=real(3, 1), cov_diag=pos(3))),
    ("MultivariateNormal", dict(loc=real(3), covariance_matrix=spd()),
     "LowRankMultivariateNormal", dict(loc=real(3), cov_factor=real(3, 2), cov_diag=pos(3))),
    ("LowRankMultivariateNormal", dict(loc=real(3), cov_factor=real(3, 2), cov_diag=pos(3)),
     "MultivariateNormal", dict(loc=real(3), covariance_matrix=spd())),
    ("Binomial", dict(total_count=np.array([5.0, 6.0]), probs=unit(2)), "Binomial",
     dict(total_count=np.array([5.0, 5.0]), probs=unit(2))),
    ("Geometric", dict(probs=unit(3)), "Geometric", dict(probs=unit(3))),
    ("Gumbel", dict(loc=real(3), scale=pos(3)), "Gumbel", dict(loc=real(3), scale=pos(3))),
    ("HalfNormal", dict(scale=pos(3)), "HalfNormal", dict(scale=pos(3))),
    ("Pareto", dict(scale=pos(3), alpha=pos(3)), "Pareto", dict(scale=pos(3), alpha=pos(3))),
    ("Cauchy", dict(loc=real(3), scale=pos(3)), "Cauchy", dict(loc=real(3), scale=pos(3))),
    ("ContinuousBernoulli", dict(probs=unit(3)), "ContinuousBernoulli", dict(probs=unit(3))),
    ("LogNormal", dict(loc=real(3), scale=pos(3)), "LogNormal", dict(loc=real(3),
                                                                    scale=pos(3))),
    ("Beta", dict(concentration1=pos(3), concentration0=pos(3)), "Normal",
     dict(loc=real(3), scale=pos(3))),
    ("Gamma", dict(concentration=pos(3), rate=pos(3)), "Normal", dict(loc=real(3),
                                                                     scale=pos(3))),
    ("Exponential", dict(rate=pos(3)), "Gamma", dict(concentration=pos(3), rate=pos(3))),
    ("Uniform", dict(low=unit(3) * 0.3, high=unit(3) * 0.3 + 0.5), "Beta",
     dict(concentration1=pos(3), concentration0=pos(3))),
    ("Normal", dict(loc=real(3), scale=pos(3)), "Laplace", dict(loc=real(3), scale=pos(3))),
    ("Normal", dict(loc=real(3), scale=pos(3)), "Gumbel", dict(loc=real(3), scale=pos(3))),
    ("Pareto", dict(scale=pos(3), alpha=pos(3, lo=2.5, hi=4)), "Normal",
     dict(loc=real(3), scale=pos(3))),
    ("Uniform", dict(low=unit(3), high=unit(3) + 1), "Gumbel", dict(loc=real(3),
                                                                   scale=pos(3))),
    ("Normal", dict(loc=real(3), scale=pos(3)), "Uniform", dict(low=real(3) - 3,
                                                               high=real(3) + 3)),
    ("Bernoulli", dict(probs=unit(3)), "Poisson", dict(rate=pos(3))),
    ("Gamma", dict(concentration=pos(3), rate=pos(3)), "Gumbel", dict(loc=real(3),
                                                                     scale=pos(3))),
    ("Uniform", dict(low=unit(3), high=unit(3) + 1), "Pareto",
     dict(scale=np.array([0.05, 0.05, 0.05]), alpha=pos(3))),
]


@pytest.mark.parametrize("pair", KL_PAIRS, ids=[f"{p[0]}-{p[2]}-{i}" for i, p in
                                                 enumerate(KL_PAIRS)])
def test_kl_divergence_values_and_gradients(pair):
    pn, pp, qn, qp = pair
    pl, pl_params = build((pn, pp, {}), "lg", requires_grad=True)
    ql, ql_params = build((qn, qp, {}), "lg", requires_grad=True)
    pt, pt_params = build((pn, pp, {}), "torch", requires_grad=True)
    qt, qt_params = build((qn, qp, {}), "torch", requires_grad=True)
    kl_l = LD.kl_divergence(pl, ql)
    kl_t = TD.kl_divergence(pt, qt)
    close(kl_l, kl_t, rtol=1e-6, atol=1e-9, what="kl")
    finite = np.isfinite(kl_t.detach().numpy())
    if not finite.any():
        return
    ps_t = [t for t in list(pt_params.values()) + list(qt_params.values())
            if isinstance(t, torch.Tensor)]
    ps_l = [t for t in list(pl_params.values()) + list(ql_params.values())
            if isinstance(t, lg.Tensor)]
    mask = torch.tensor(finite)
    gt = torch.autograd.grad(kl_t[mask].sum(), ps_t, allow_unused=True)
    gl = lg.autograd.grad(kl_l[lg.tensor(finite)].sum(), ps_l, allow_unused=True)
    for a, b in zip(gl, gt):
        if b is None:
            continue
        close(a if a is not None else np.zeros(b.shape), b, rtol=1e-5, atol=1e-8,
              what="kl grad")


def test_kl_transformed_independent_and_errors():
    a = LD.Independent(LD.Normal(lg.zeros(2, 3, dtype=lg.float64), lg.ones(2, 3,
                                                                          dtype=lg.float64)), 1)
    b = LD.Independent(LD.Normal(lg.ones(2, 3, dtype=lg.float64), 2 * lg.ones(2, 3,
                                                                            dtype=lg.float64)), 1)
    ta = TD.Independent(TD.Normal(torch.zeros(2, 3, dtype=torch.float64),
                                  torch.ones(2, 3, dtype=torch.float64)), 1)
    tb = TD.Independent(TD.Normal(torch.ones(2, 3, dtype=torch.float64),
                                  2 * torch.ones(2, 3, dtype=torch.float64)), 1)
    close(LD.kl_divergence(a, b), TD.kl_divergence(ta, tb), what="independent kl")
    t = [LD.ExpTransform()]
    close(LD.kl_divergence(LD.TransformedDistribution(LD.Normal(0.0, 1.0), t),
                           LD.TransformedDistribution(LD.Normal(1.0, 2.0), t)),
          TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)), rtol=1e-6,
          what="transformed kl")
    with pytest.raises(NotImplementedError, match="No KL"):
        LD.kl_divergence(LD.VonMises(0.0, 1.0), LD.Normal(0.0, 1.0))

    class MyNormal(LD.Normal):
        pass

    @LD.register_kl(MyNormal, LD.Normal)
    def _kl_mine(p, q):
        return lg.tensor(42.0)

    assert LD.kl_divergence(MyNormal(0.0, 1.0), LD.Normal(0.0, 1.0)).item() == 42.0
    assert LD.kl_divergence(LD.Normal(0.0, 1.0), MyNormal(0.0, 2.0)).item() != 42.0
    # exponential-family Bregman divergence (the generic ExponentialFamily pair)
    cov = spd()
    wl = [LD.Wishart(lg.tensor(5.0, dtype=lg.float64), covariance_matrix=lg.tensor(cov)),
          LD.Wishart(lg.tensor(6.0, dtype=lg.float64),
                     covariance_matrix=lg.eye(3, dtype=lg.float64))]
    wt = [TD.Wishart(torch.tensor(5.0, dtype=torch.float64),
                     covariance_matrix=torch.tensor(cov)),
          TD.Wishart(torch.tensor(6.0, dtype=torch.float64),
                     covariance_matrix=torch.eye(3, dtype=torch.float64))]
    close(LD.kl_divergence(*wl), TD.kl_divergence(*wt), rtol=1e-6, what="wishart kl")
    with pytest.raises(NotImplementedError, match="cross KL"):
        from llgrad.distributions.kl import _kl_expfamily_expfamily
        _kl_expfamily_expfamily(LD.Normal(0.0, 1.0), LD.Poisson(1.0))


# ---- expand -------------------------------------------------------------------------

@pytest.mark.parametrize("case", [c for c in CASES if c[0] not in ("Wishart",)],
                         ids=[i for c, i in zip(CASES, IDS) if c[0] not in ("Wishart",)])
def test_expand(case):
    dl, _ = build(case, "lg")
    dt, _ = build(case, "torch")
    shape = (2,) + tuple(dt.batch_shape)
    el, et = dl.expand(shape), dt.expand(shape)
    assert type(el).__name__ == type(et).__name__
    assert tuple(el.batch_shape) == tuple(et.batch_shape)
    assert tuple(el.event_shape) == tuple(et.event_shape)
    v = values_for(case)[:1]
    close(el.log_prob(lg.tensor(v)), et.log_prob(torch.tensor(v)), rtol=1e-6, atol=1e-8,
          what="expanded log_prob")
    assert tuple(el.sample().shape) == tuple(et.sample().shape)


# ---- validation ---------------------------------------------------------------------

def _msg(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("make", [
    lambda M, T: M.Normal(T.tensor(0.0), T.tensor(-1.0)),
    lambda M, T: M.Normal(0.0, -1.0),
    lambda M, T: M.Gamma(T.tensor([1.0, -2.0]), T.tensor(1.0)),
    lambda M, T: M.Bernoulli(probs=T.tensor([0.5, 1.5])),
    lambda M, T: M.Categorical(probs=T.tensor([[0.5, -0.5]])),
    lambda M, T: M.Dirichlet(T.tensor([1.0, 0.0])),
    lambda M, T: M.Uniform(T.tensor(1.0), T.tensor(0.0)),
    lambda M, T: M.Bernoulli(),
    lambda M, T: M.Bernoulli(probs=T.tensor(0.5), logits=T.tensor(0.0)),
    lambda M, T: M.Categorical(probs=T.tensor(0.5)),
    lambda M, T: M.Dirichlet(T.tensor(0.5)),
    lambda M, T: M.MultivariateNormal(T.zeros(2)),
    lambda M, T: M.MultivariateNormal(T.zeros(2), covariance_matrix=T.eye(2),
                                      scale_tril=T.eye(2)),
    lambda M, T: M.MultivariateNormal(T.tensor(0.0), covariance_matrix=T.eye(2)),
    lambda M, T: M.MultivariateNormal(T.zeros(2), covariance_matrix=T.ones(2)),
    lambda M, T: M.Independent(M.Normal(T.zeros(2), T.ones(2)), 2),
    lambda M, T: M.TransformedDistribution(M.Normal(0.0, 1.0), "exp"),
    lambda M, T: M.Exponential(T.tensor(1.0)).log_prob(T.tensor(-1.0)),
    lambda M, T: M.Exponential(T.tensor(1.0)).log_prob(1.0),
    lambda M, T: M.Bernoulli(T.tensor(0.3)).log_prob(T.tensor(0.5)),
    lambda M, T: M.MultivariateNormal(T.zeros(3), T.eye(3)).log_prob(T.zeros(2)),
    lambda M, T: M.Normal(T.zeros(3), T.ones(3)).log_prob(T.zeros(2)),
    lambda M, T: M.Multinomial(2.5, probs=T.tensor([0.5, 0.5])),
    lambda M, T: M.LKJCholesky(1),
    lambda M, T: M.LowRankMultivariateNormal(T.zeros(3), T.ones(2, 1), T.ones(3)),
    lambda M, T: M.MixtureSameFamily(M.Categorical(T.ones(3)), M.Normal(T.zeros(2),
                                                                        T.ones(2))),
    lambda M, T: M.Distribution.set_default_validate_args(3),
])
def test_validation_errors_match_torch(make):
    torch.set_default_dtype(torch.float32)      # (printing: float64 shows its dtype in
    lg.set_default_dtype(lg.float32)            # llgrad whatever the default)
    et, mt = _msg(lambda: make(TD, torch))
    el, ml = _msg(lambda: make(LD, lg))
    assert el is et, (el, et, ml, mt)
    assert ml.replace("llgrad", "torch") == mt, (ml, mt)


def test_validate_args_switches():
    LD.Normal(0.0, -1.0, validate_args=False)           # no check
    LD.Exponential(lg.tensor(1.0), validate_args=False).log_prob(lg.tensor(-1.0))
    try:
        LD.Distribution.set_default_validate_args(False)
        d = LD.Normal(lg.tensor(0.0), lg.tensor(-1.0))
        assert d._validate_args is False
        with pytest.raises(ValueError):
            LD.Normal(0.0, -1.0, validate_args=True)
    finally:
        LD.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        LD.Normal(0.0, -1.0)
    with pytest.warns(FutureWarning, match="sample_n"):
        assert tuple(LD.Normal(lg.zeros(2), lg.ones(2)).sample_n(3).shape) == (3, 2)
    assert repr(LD.Normal(lg.zeros(2), lg.ones(2))).replace("llgrad", "torch") == \
        repr(TD.Normal(torch.zeros(2), torch.ones(2)))
    assert repr(LD.Normal(0.0, 1.0)) == repr(TD.Normal(0.0, 1.0))


# ---- transforms, constraints, biject_to / transform_to ------------------------------

TRANSFORMS = [
    ("ExpTransform", (), real(2, 3)),
    ("PowerTransform", (np.array(2.5),), pos(4)),
    ("SigmoidTransform", (), real(3)),
    ("SoftplusTransform", (), real(3)),
    ("TanhTransform", (), real(3) * 0.5),
    ("AbsTransform", (), real(3)),
    ("AffineTransform", (real(3), pos(3)), real(2, 3)),
    ("AffineTransform", (1.5, -2.0), real(2, 3)),
    ("SoftmaxTransform", (), real(2, 4)),
    ("StickBreakingTransform", (), real(2, 3)),
    ("LowerCholeskyTransform", (), real(2, 3, 3)),
    ("PositiveDefiniteTransform", (), real(3, 3)),
    ("CorrCholeskyTransform", (), real(2, 6) * 0.5),
    ("ReshapeTransform", ((2, 3), (6,)), real(4, 2, 3)),
]


def _make_transform(mod, name, args):
    conv = to_l if mod is LD else to_t
    return getattr(mod, name)(*[conv(a) for a in args])


@pytest.mark.parametrize("spec", TRANSFORMS, ids=[f"{t[0]}-{i}" for i, t in
                                                  enumerate(TRANSFORMS)])
def test_transforms(spec):
    name, args, x = spec
    tl, tt = _make_transform(LD, name, args), _make_transform(TD, name, args)
    xl, xt = lg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yl, yt = tl(xl), tt(xt)
    close(yl, yt, what=f"{name} forward")
    if tt.bijective or name in ("AbsTransform", "SoftmaxTransform"):
        close(tl.inv(yl.detach()), tt.inv(yt.detach()), rtol=1e-6, atol=1e-8,
              what=f"{name} inverse")
    try:
        jt = tt.log_abs_det_jacobian(xt, yt)
    except NotImplementedError:
        jt = None
    if jt is not None:
        jl = tl.log_abs_det_jacobian(xl, yl)
        close(jl, jt, rtol=1e-6, atol=1e-8, what=f"{name} log_abs_det_jacobian")
        (gl,) = lg.autograd.grad(jl.sum() + yl.sum(), [xl])
        (gt,) = torch.autograd.grad(jt.sum() + yt.sum(), [xt])
        close(gl, gt, rtol=1e-6, atol=1e-8, what=f"{name} gradient")
    assert tuple(tl.forward_shape(x.shape)) == tuple(tt.forward_shape(torch.Size(x.shape)))
    assert tuple(tl.inverse_shape(tuple(yt.shape))) == tuple(tt.inverse_shape(yt.shape))
    assert tl.domain.event_dim == tt.domain.event_dim
    assert tl.codomain.event_dim == tt.codomain.event_dim
    assert tl.bijective == tt.bijective
    assert repr(tl.domain) == repr(tt.domain).replace("torch", "llgrad") or \
        type(tl.domain).__name__ == type(tt.domain).__name__


def test_transform_composition_cache_and_equality():
    t = LD.ComposeTransform([LD.AffineTransform(1.0, 2.0), LD.ExpTransform()], cache_size=1)
    x = lg.tensor(real(3))
    y = t(x)
    assert t.inv(y) is x                          # cached
    assert t.inv.inv is t
    assert LD.ExpTransform() == LD.ExpTransform() and LD.ExpTransform() != LD.TanhTransform()
    assert LD.AffineTransform(1.0, 2.0) == LD.AffineTransform(1.0, 2.0)
    assert LD.identity_transform(x) is x
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        LD.ExpTransform(cache_size=2)
    tt = TD.ComposeTransform([TD.AffineTransform(1.0, 2.0), TD.ExpTransform()])
    close(t.log_abs_det_jacobian(x, y), tt.log_abs_det_jacobian(torch.tensor(x.numpy()),
                                                                torch.tensor(y.numpy())),
          what="compose ladj")
    # independent, cat, stack
    xi = real(2, 3)
    for tl, tt in [
        (LD.IndependentTransform(LD.ExpTransform(), 1), TD.IndependentTransform(
            TD.ExpTransform(), 1)),
        (LD.CatTransform([LD.ExpTransform(), LD.identity_transform], 1, [1, 2]),
         TD.CatTransform([TD.ExpTransform(), TD.identity_transform], 1, [1, 2])),
        (LD.StackTransform([LD.ExpTransform(), LD.SigmoidTransform(), LD.TanhTransform()], 1),
         TD.StackTransform([TD.ExpTransform(), TD.SigmoidTransform(), TD.TanhTransform()], 1)),
    ]:
        yl, yt = tl(lg.tensor(xi)), tt(torch.tensor(xi))
        close(yl, yt, what=type(tl).__name__)
        close(tl.inv(yl), tt.inv(yt), what=type(tl).__name__ + " inv")
        close(tl.log_abs_det_jacobian(lg.tensor(xi), yl), tt.log_abs_det_jacobian(
            torch.tensor(xi), yt), what=type(tl).__name__ + " ladj")
    # cumulative distribution transform
    tl = LD.CumulativeDistributionTransform(LD.Normal(0.0, 1.0))
    tt = TD.CumulativeDistributionTransform(TD.Normal(0.0, 1.0))
    close(tl(lg.tensor(xi)), tt(torch.tensor(xi)), what="cdf transform")
    close(tl.log_abs_det_jacobian(lg.tensor(xi), None), tt.log_abs_det_jacobian(
        torch.tensor(xi), None), what="cdf transform ladj")


CONSTRAINTS = ["real", "positive", "nonnegative", "unit_interval", "simplex", "boolean",
               "nonnegative_integer", "positive_integer", "lower_cholesky", "lower_triangular",
               "corr_cholesky", "positive_definite", "positive_semidefinite", "symmetric",
               "square", "real_vector", "one_hot"]


@pytest.mark.parametrize("name", CONSTRAINTS)
def test_constraint_checks(name):
    cands = [real(2, 3, 3), np.abs(real(2, 3, 3)), np.round(np.abs(real(2, 3, 3)) * 2),
             simplex(2, 3), np.eye(3)[None].repeat(2, 0), tril(2), spd(2),
             np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]), np.full((2, 3), 0.5)]
    cl, ct = getattr(LD.constraints, name), getattr(TD.constraints, name)
    assert cl.event_dim == ct.event_dim and cl.is_discrete == ct.is_discrete
    assert repr(cl) == repr(ct)
    for c in cands:
        if c.ndim < cl.event_dim:
            continue
        close(cl.check(lg.tensor(c)).to(lg.float64), ct.check(torch.tensor(c)).double(),
              what=f"{name}.check")


@pytest.mark.parametrize("name", ["real", "positive", "unit_interval", "simplex",
                                  "corr_cholesky", "lower_cholesky", "positive_definite",
                                  "real_vector"])
@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
def test_biject_to_transform_to(name, registry):
    cl, ct = getattr(LD.constraints, name), getattr(TD.constraints, name)
    try:
        tt = getattr(TD, registry)(ct)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            getattr(LD, registry)(cl)
        return
    tl = getattr(LD, registry)(cl)
    assert type(tl).__name__ == type(tt).__name__
    n = {"simplex": (2, 3), "corr_cholesky": (2, 3), "lower_cholesky": (2, 3, 3),
         "positive_definite": (3, 3)}.get(name, (2, 3))
    x = real(*n)
    y = tl(lg.tensor(x))
    close(y, tt(torch.tensor(x)), rtol=1e-6, atol=1e-8, what=f"{registry}({name})")
    assert bool(cl.check(y).all())
    for c, lo, hi in ((LD.constraints.interval(-1.0, 3.0), -1, 3),
                      (LD.constraints.greater_than(2.0), 2, np.inf),
                      (LD.constraints.less_than(-1.0), -np.inf, -1)):
        v = getattr(LD, registry)(c)(lg.tensor(x)).numpy()
        assert np.all((v > lo) & (v < hi))


# ---- composite distributions -------------------------------------------------------

def test_mixture_same_family():
    logits, locs, scales = real(2, 3), real(2, 3), pos(2, 3)
    ml = LD.MixtureSameFamily(LD.Categorical(logits=lg.tensor(logits, requires_grad=True)),
                              LD.Normal(lg.tensor(locs), lg.tensor(scales)))
    mt = TD.MixtureSameFamily(TD.Categorical(logits=torch.tensor(logits)),
                              TD.Normal(torch.tensor(locs), torch.tensor(scales)))
    x = real(4, 2)
    close(ml.log_prob(lg.tensor(x)), mt.log_prob(torch.tensor(x)), what="mixture log_prob")
    close(ml.cdf(lg.tensor(x)), mt.cdf(torch.tensor(x)), what="mixture cdf")
    close(ml.mean, mt.mean, what="mixture mean")
    close(ml.variance, mt.variance, what="mixture variance")
    assert tuple(ml.sample((5,)).shape) == tuple(mt.sample((5,)).shape) == (5, 2)
    # mixture of multivariate components
    mvl = LD.MixtureSameFamily(LD.Categorical(lg.ones(2, dtype=lg.float64)),
                               LD.Independent(LD.Normal(lg.tensor(real(2, 3)),
                                                        lg.tensor(pos(2, 3))), 1))
    assert tuple(mvl.sample((4,)).shape) == (4, 3)
    assert tuple(mvl.log_prob(lg.zeros(4, 3, dtype=lg.float64)).shape) == (4,)


def test_transformed_distribution_cdf_icdf_and_support():
    loc, scale = real(3), pos(3)
    base_l = LD.Normal(lg.tensor(loc), lg.tensor(scale))
    base_t = TD.Normal(torch.tensor(loc), torch.tensor(scale))
    tl = LD.TransformedDistribution(base_l, [LD.AffineTransform(1.0, -2.0), LD.ExpTransform()])
    tt = TD.TransformedDistribution(base_t, [TD.AffineTransform(1.0, -2.0), TD.ExpTransform()])
    x = pos(4, 3)
    close(tl.log_prob(lg.tensor(x)), tt.log_prob(torch.tensor(x)), what="td log_prob")
    close(tl.cdf(lg.tensor(x)), tt.cdf(torch.tensor(x)), what="td cdf")
    q = unit(4, 3)
    close(tl.icdf(lg.tensor(q)), tt.icdf(torch.tensor(q)), what="td icdf")
    assert repr(tl.support) == repr(tt.support)


# ---- lg.compile ----------------------------------------------------------------------

def test_normal_log_prob_loss_compiles():
    def loss(mu, log_sigma, x):
        return -LD.Normal(mu, log_sigma.exp()).log_prob(x).mean()

    cf = lg.compile(loss)
    mu = lg.tensor(real(5), requires_grad=True)
    ls = lg.tensor(real(5) * 0.1, requires_grad=True)
    x = lg.tensor(real(8, 5))
    eager = loss(mu, ls, x)
    compiled = cf(mu, ls, x)
    close(compiled, eager, rtol=1e-12, what="compiled loss")
    g_e = lg.autograd.grad(loss(mu, ls, x), [mu, ls])
    g_c = lg.autograd.grad(cf(mu, ls, x), [mu, ls])
    for a, b in zip(g_c, g_e):
        close(a, b, rtol=1e-10, what="compiled grad")
    assert not cf.graph_breaks

    def elbo(mu, log_sigma):
        q = LD.Normal(mu, log_sigma.exp())
        z = q.rsample((4,))
        return (q.log_prob(z) - LD.Normal(0.0, 1.0).log_prob(z)).mean()

    ce = lg.compile(elbo)
    lg.manual_seed(9)
    a = elbo(mu, ls)
    lg.manual_seed(9)
    b = ce(mu, ls)
    close(b, a, rtol=1e-10, what="compiled elbo")
    # the reparameterized gradient traced into one graph (lg.grad inside lg.compile)
    cg = lg.compile(lg.grad(elbo, argnums=(0, 1)))
    lg.manual_seed(4)
    ge = lg.grad(elbo, argnums=(0, 1))(mu, ls)
    lg.manual_seed(4)
    gc = cg(mu, ls)
    for x, y in zip(gc, ge):
        close(x, y, rtol=1e-10, what="compiled elbo grad")
