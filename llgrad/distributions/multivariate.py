"""Multivariate distributions over vectors and matrices: MultivariateNormal,
LowRankMultivariateNormal, Wishart, LKJCholesky."""

from __future__ import annotations

import math
import warnings
from numbers import Number
from typing import Any, Sequence

from ..tensor import Size, Tensor
from . import constraints
from ._common import lg
from .continuous import Beta, Chi2
from .distribution import Distribution, ExponentialFamily
from .utils import _is_traced, _standard_normal, broadcast_all, lazy_property

__all__ = ["MultivariateNormal", "LowRankMultivariateNormal", "Wishart", "LKJCholesky"]

_LOG_2PI = math.log(2 * math.pi)
_LOG_2 = math.log(2)


def _batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """Matrix-vector products over broadcast batch dims."""
    return lg().matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL: Tensor, bx: Tensor) -> Tensor:
    """x^T (L L^T)^-1 x for lower-triangular L, broadcasting batch dims."""
    L = lg()
    sol = L.linalg.solve_triangular(bL, bx.unsqueeze(-1), upper=False).squeeze(-1)
    return sol.square().sum(-1)


def _precision_to_scale_tril(P: Tensor) -> Tensor:
    """The lower Cholesky factor of P^-1, from a Cholesky factorization of P with rows
    and columns reversed (no explicit inverse)."""
    L = lg()
    Lf = L.linalg.cholesky(L.flip(P, (-2, -1)))
    L_inv = L.transpose(L.flip(Lf, (-2, -1)), -2, -1)
    Id = L.eye(P.shape[-1], dtype=P.dtype)
    return L.linalg.solve_triangular(L_inv, Id, upper=False)


class MultivariateNormal(Distribution):
    """The multivariate normal N(loc, Σ), with Σ given by exactly one of
    `covariance_matrix`, `precision_matrix` or `scale_tril` (its lower Cholesky factor);
    batch dims of loc and the matrix broadcast."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        L = lg()
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (
            precision_matrix is not None
        ) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or "
                "scale_tril may be specified."
            )
        for name, m in (
            ("scale_tril", scale_tril),
            ("covariance_matrix", covariance_matrix),
            ("precision_matrix", precision_matrix),
        ):
            if m is not None:
                if m.dim() < 2:
                    what = "scale_tril matrix" if name == "scale_tril" else name
                    raise ValueError(
                        f"{what} must be at least two-dimensional, with "
                        f"optional leading batch dimensions"
                    )
                batch_shape = tuple(L.broadcast_shapes(tuple(m.shape[:-2]), tuple(loc.shape[:-1])))
                setattr(self, name, m.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        event_shape = self.loc.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = L.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "MultivariateNormal":
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(tuple(batch_shape))
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the covariance."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """Σ."""
        Lt = self._unbroadcasted_scale_tril
        return (Lt @ Lt.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """Σ^-1."""
        return lg().cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return (
            self._unbroadcasted_scale_tril.square()
            .sum(-1)
            .expand(tuple(self._batch_shape) + tuple(self._event_shape))
        )

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        eps = _standard_normal(shape, self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * _LOG_2PI + M) - half_log_det

    def entropy(self) -> Tensor:
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + _LOG_2PI) + half_log_det
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))


def _batch_capacitance_tril(W: Tensor, D: Tensor) -> Tensor:
    """The Cholesky factor of I + W^T D^-1 W."""
    L = lg()
    m = W.size(-1)
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    K = L.matmul(Wt_Dinv, W) + L.eye(m, dtype=W.dtype)
    return L.linalg.cholesky(K)


def _batch_lowrank_logdet(W: Tensor, D: Tensor, capacitance_tril: Tensor) -> Tensor:
    """log det(W W^T + D) by the matrix determinant lemma."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W: Tensor, D: Tensor, x: Tensor, capacitance_tril: Tensor) -> Tensor:
    """x^T (W W^T + D)^-1 x by the Woodbury identity."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    term1 = (x.square() / D).sum(-1)
    term2 = _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)
    return term1 - term2


class LowRankMultivariateNormal(Distribution):
    """A multivariate normal whose covariance is cov_factor @ cov_factor^T +
    diag(cov_diag) (cov_factor: (..., n, m), cov_diag: (..., n) > 0); log_prob and
    entropy use the Woodbury identity and the determinant lemma (O(n m²))."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self, loc: Tensor, cov_factor: Tensor, cov_diag: Tensor, validate_args: bool | None = None
    ) -> None:
        L = lg()
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError(
                "cov_factor must be at least two-dimensional, with optional "
                "leading batch dimensions"
            )
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(
                f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m"
            )
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {Size(event_shape)}")
        loc_ = loc.unsqueeze(-1)
        cov_diag_ = cov_diag.unsqueeze(-1)
        try:
            loc_, self.cov_factor, cov_diag_ = L.broadcast_tensors(loc_, cov_factor, cov_diag_)
        except RuntimeError as e:
            raise ValueError(
                f"Incompatible batch shapes: loc {loc.shape}, cov_factor "
                f"{cov_factor.shape}, cov_diag {cov_diag.shape}"
            ) from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = self.loc.shape[:-1]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(
        self, batch_shape: Sequence[int], _instance: Any = None
    ) -> "LowRankMultivariateNormal":
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = Size(tuple(batch_shape))
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:  # type: ignore[override]
        return (
            self._unbroadcasted_cov_factor.square().sum(-1) + self._unbroadcasted_cov_diag
        ).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the covariance: D^1/2 chol(I + D^-1/2 W W^T
        D^-1/2)."""
        L = lg()
        n = self._event_shape[0]
        sqrt_d = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / sqrt_d
        K = L.matmul(Dinvsqrt_W, Dinvsqrt_W.mT) + L.eye(n, dtype=sqrt_d.dtype)
        return (sqrt_d * L.linalg.cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """W W^T + diag(D)."""
        L = lg()
        W = self._unbroadcasted_cov_factor
        return (L.matmul(W, W.mT) + L.diag_embed(self._unbroadcasted_cov_diag)).expand(
            self._matrix_shape()
        )

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """(W W^T + D)^-1 by the Woodbury identity."""
        L = lg()
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = L.linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        return (L.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - L.matmul(A.mT, A)).expand(
            self._matrix_shape()
        )

    def rsample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(w_shape, self.loc.dtype)
        eps_D = _standard_normal(shape, self.loc.dtype)
        return (
            self.loc
            + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
            + self._unbroadcasted_cov_diag.sqrt() * eps_D
        )

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_lowrank_mahalanobis(
            self._unbroadcasted_cov_factor,
            self._unbroadcasted_cov_diag,
            diff,
            self._capacitance_tril,
        )
        log_det = _batch_lowrank_logdet(
            self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril
        )
        return -0.5 * (self._event_shape[0] * _LOG_2PI + log_det + M)

    def entropy(self) -> Tensor:
        log_det = _batch_lowrank_logdet(
            self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril
        )
        H = 0.5 * (self._event_shape[0] * (1.0 + _LOG_2PI) + log_det)
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma Σ_i ψ(x - i/2), i < p."""
    L = lg()
    if not _is_traced(x) and not bool(x.gt((p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    offs = L.arange(p, dtype=x.dtype) / 2
    return L.digamma(x.unsqueeze(-1) - offs.expand(tuple(x.shape) + (p,))).sum(-1)


class Wishart(ExponentialFamily):
    """The Wishart distribution over p x p positive definite matrices: `df` > p - 1
    degrees of freedom and a scale given by exactly one of `covariance_matrix`,
    `precision_matrix`, `scale_tril`. rsample uses the Bartlett decomposition
    (reparameterized through the chi-squared diagonal); a singular draw is redrawn up to
    `max_try_correction` times, with torch's warning."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:  # type: ignore[override]
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(
        self,
        df: Any,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        L = lg()
        if (covariance_matrix is not None) + (scale_tril is not None) + (
            precision_matrix is not None
        ) != 1:
            raise AssertionError(
                "Exactly one of covariance_matrix or precision_matrix or "
                "scale_tril may be specified."
            )
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.dim() < 2:
            raise ValueError(
                "scale_tril must be at least two-dimensional, with optional "
                "leading batch dimensions"
            )
        if isinstance(df, Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = L.tensor(float(df), dtype=param.dtype)
        else:
            batch_shape = tuple(L.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(batch_shape)
        event_shape = tuple(param.shape[-2:])
        if not _is_traced(self.df) and bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(
                f"Value of df={df} expected to be greater than ndim - 1 = {event_shape[-1] - 1}."
            )
        if scale_tril is not None:
            self.scale_tril = param.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(batch_shape + (-1, -1))
        else:
            self.precision_matrix = param.expand(batch_shape + (-1, -1))
        if not _is_traced(self.df) and bool(self.df.lt(event_shape[-1]).any()):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to "
                "occur for ndim - 1 < df < ndim.",
                stacklevel=2,
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = L.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(batch_shape)

    def _chi2(self, batch_shape: Sequence[int]) -> Chi2:
        L = lg()
        p = self._event_shape[-1]
        offs = L.arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        return Chi2(df=self.df.unsqueeze(-1) - offs.expand(tuple(batch_shape) + (p,)))

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "Wishart":
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(tuple(batch_shape))
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(tuple(batch_shape))
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2(batch_shape)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the scale matrix."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """The scale matrix V."""
        Lt = self._unbroadcasted_scale_tril
        return (Lt @ Lt.transpose(-2, -1)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """V^-1."""
        L = lg()
        identity = L.eye(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype)
        return L.cholesky_solve(identity, self._unbroadcasted_scale_tril).expand(
            self._matrix_shape()
        )

    @property
    def mean(self) -> Tensor:
        return self.df.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        L = lg()
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = L.where(factor <= 0, L.full_like(factor, float("nan")), factor)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self.df.reshape(tuple(self._batch_shape) + (1, 1)) * (
            V.square() + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2)
        )

    def _bartlett_sampling(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        p = self._event_shape[-1]
        diag = self._dist_chi2.rsample(sample_shape).sqrt()
        diag = diag.clamp(min=L.finfo(diag.dtype).eps)
        shape = tuple(sample_shape) + tuple(self._batch_shape) + (p, p)
        noise = L.randn(shape, dtype=diag.dtype).tril(-1) + L.diag_embed(diag)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.transpose(-2, -1)

    def rsample(
        self, sample_shape: Sequence[int] = Size(), max_try_correction: int | None = None
    ) -> Tensor:
        L = lg()
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(tuple(sample_shape))
        sample = self._bartlett_sampling(sample_shape)
        if _is_traced(sample):
            return sample
        singular = ~self.support.check(sample.detach())
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                fresh = self._bartlett_sampling(sample_shape)
                mask = singular.reshape(tuple(singular.shape) + (1, 1))
                sample = L.where(mask, fresh, sample)
                singular = ~self.support.check(sample.detach())
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        half_logdet_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (
            -nu * (p * _LOG_2 / 2 + half_logdet_scale)
            - L.mvlgamma(nu / 2, p=p)
            + (nu - p - 1) / 2 * L.linalg.slogdet(value).logabsdet
            - L.cholesky_solve(value, self._unbroadcasted_scale_tril)
            .diagonal(dim1=-2, dim2=-1)
            .sum(dim=-1)
            / 2
        )

    def entropy(self) -> Tensor:
        L = lg()
        nu = self.df
        p = self._event_shape[-1]
        half_logdet_scale = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (
            (p + 1) * (p * _LOG_2 / 2 + half_logdet_scale)
            + L.mvlgamma(nu / 2, p=p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p=p)
            + nu * p / 2
        )

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        nu = self.df
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        L = lg()
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-L.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) + L.mvlgamma(
            y + (p + 1) / 2, p=p
        )


class LKJCholesky(Distribution):
    """The LKJ distribution over Cholesky factors of dim x dim correlation matrices, with
    `concentration` > 0 (density ∝ det(L L^T)^(concentration - 1)); sampled by the onion
    method (Beta-distributed squared row norms, uniform directions)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(
        self, dim: int, concentration: Any = 1.0, validate_args: bool | None = None
    ) -> None:
        L = lg()
        if dim < 2:
            raise ValueError(
                f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}."
            )
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = Size((dim, dim))
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = L.arange(self.dim - 1, dtype=self.concentration.dtype)
        offset = L.cat([L.zeros((1,), dtype=offset.dtype), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape: Sequence[int], _instance: Any = None) -> "LKJCholesky":
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.dim = self.dim
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Sequence[int] = Size()) -> Tensor:
        L = lg()
        with L.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = L.randn(tuple(self._extended_shape(sample_shape)), dtype=y.dtype).tril(-1)
            u_hypersphere = u_normal / u_normal.norm(dim=-1, keepdim=True)
            first_row = L.arange(self.dim).reshape(-1, 1) == 0
            u_hypersphere = L.where(first_row, L.zeros_like(u_hypersphere), u_hypersphere)
            w = L.sqrt(y) * u_hypersphere
            eps = L.finfo(w.dtype).tiny
            diag_elems = L.clamp(1 - L.sum(w.square(), dim=-1), min=eps).sqrt()
            return w + L.diag_embed(diag_elems)

    def log_prob(self, value: Tensor) -> Tensor:
        L = lg()
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = L.arange(2, self.dim + 1, dtype=self.concentration.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = L.sum(order * diag_elems.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = L.lgamma(alpha) * dm1
        numerator = L.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
