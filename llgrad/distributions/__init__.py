"""Probability distributions with sampling, reparameterized sampling, log densities,
moments, entropies and KL divergences (as `torch.distributions`).

Everything is written with llgrad ops, so log_prob, entropy, kl_divergence and rsample are
differentiable (gradients, vmap, `lg.compile`). Where sampling needs the host (Gamma's
rejection sampler and its implicit-reparameterization gradient, Poisson, Binomial,
multinomial draws, von Mises), it is a graph break inside `lg.compile`. llgrad's random
streams differ from torch's (see README), so samples differ; distributions, shapes, dtypes,
errors and gradients follow torch.
"""
from . import constraints, transforms  # noqa: F401
from .constraint_registry import biject_to, transform_to
from .continuous import (Beta, Cauchy, Chi2, ContinuousBernoulli, Dirichlet, Exponential,
                         FisherSnedecor, Gamma, GeneralizedPareto, Laplace, Normal, StudentT,
                         Uniform, VonMises)
from .discrete import (Bernoulli, Binomial, Categorical, Geometric, Multinomial,
                       NegativeBinomial, OneHotCategorical, OneHotCategoricalStraightThrough,
                       Poisson)
from .distribution import Distribution, ExponentialFamily
from .kl import kl_divergence, register_kl
from .multivariate import LKJCholesky, LowRankMultivariateNormal, MultivariateNormal, Wishart
from .transformed import (Gumbel, HalfCauchy, HalfNormal, Independent, InverseGamma,
                          Kumaraswamy, LogisticNormal, LogNormal, MixtureSameFamily, Pareto,
                          RelaxedBernoulli, RelaxedOneHotCategorical, TransformedDistribution,
                          Weibull)
from .transforms import (AbsTransform, AffineTransform, CatTransform, ComposeTransform,
                         CorrCholeskyTransform, CumulativeDistributionTransform, ExpTransform,
                         IndependentTransform, LowerCholeskyTransform,
                         PositiveDefiniteTransform, PowerTransform, ReshapeTransform,
                         SigmoidTransform, SoftmaxTransform, SoftplusTransform,
                         StackTransform, StickBreakingTransform, TanhTransform, Transform,
                         identity_transform)

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli",
    "Dirichlet", "Distribution", "Exponential", "ExponentialFamily", "FisherSnedecor",
    "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal",
    "Independent", "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal",
    "LogisticNormal", "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial",
    "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Pareto", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "StudentT", "Poisson", "Uniform", "VonMises", "Weibull",
    "Wishart", "TransformedDistribution", "biject_to", "kl_divergence", "register_kl",
    "transform_to", "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform",
    "TanhTransform", "SoftmaxTransform", "StackTransform", "StickBreakingTransform",
    "Transform", "identity_transform",
]
