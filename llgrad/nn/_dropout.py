"""Channel dropout (`dropout1d/2d/3d`, `feature_alpha_dropout`) and `alpha_dropout`.

Masks are drawn with `lg.rand` (so `lg.manual_seed` makes them reproducible; the streams
differ from PyTorch's). A channel mask has the input's (N, C) sizes and 1 elsewhere, so a
whole feature map is kept or zeroed. Alpha dropout keeps the self-normalizing property of
SELU networks: dropped elements take SELU's negative saturation value and the result is
scaled and shifted back to zero mean and unit variance, with PyTorch's constants.
"""

from __future__ import annotations

import math
import warnings

from .. import functions as lg
from ..tensor import Tensor
from ._base import _tensor

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_ALPHA = 1.7580993408473766  # SELU's scale * alpha: -min(selu)


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _noise(op: str, input: Tensor, p: float, feature: bool, alpha: bool, inplace: bool) -> Tensor:
    """PyTorch's dropout recipe: keep with probability 1 - p, as elements or as whole
    channels (dims 0 and 1), then scale (and shift, for alpha dropout)."""
    if not (input._dtype.is_floating_point or input._dtype.is_complex):
        raise TypeError(f"{op}: expected a floating point input, got {input._dtype.name}")
    if p == 1.0:
        zero = lg.zeros((), dtype=input._dtype)
        return input.mul_(zero) if inplace else lg.mul(input, zero)
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else tuple(input.shape)
    keep = lg.lt(lg.rand(shape, dtype=input._dtype), 1.0 - p).to(input._dtype)
    if not alpha:
        mask = lg.div(keep, 1.0 - p)
        return input.mul_(mask) if inplace else lg.mul(input, mask)
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
    shift = lg.add(lg.mul(lg.sub(keep, 1.0), _ALPHA * a), _ALPHA * a * p)
    scale = lg.mul(keep, a)
    if inplace:
        return input.mul_(scale).add_(shift)
    return lg.add(lg.mul(input, scale), shift)


def _feature_dropout(
    op: str,
    input: Tensor,
    p: float,
    training: bool,
    inplace: bool,
    batched_ndim: int,
    alpha: bool = False,
) -> Tensor:
    """Channel dropout of a batched (ndim == batched_ndim) or unbatched input."""
    _tensor(op, "input", input)
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if input.ndim == batched_ndim - 1:
        x = lg.unsqueeze(input, 0)
        out = _noise(op, x, p, True, alpha, False)
        out = lg.squeeze(out, 0)
        return input.copy_(out) if inplace else out
    return _noise(op, input, p, True, alpha, inplace)


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input with probability `p` and scale the
    rest by 1 / (1 - p)."""
    if isinstance(input, Tensor) and input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
            f"input. Note that dropout1d exists to provide channel-wise dropout "
            f"on inputs with 1 spatial dimension, a channel dimension, and an "
            f"optional batch dimension (i.e. 2D or 3D inputs)."
        )
    return _feature_dropout("dropout1d", input, p, training, inplace, 3)


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of an (N, C, H, W) input with probability `p`; a 3-D input is
    treated as (N, C, L) with a warning, as PyTorch."""
    _tensor("dropout2d", "input", input)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
            f"deprecated and will result in an error in a future release. To retain "
            f"the behavior and silence this warning, please use dropout instead. "
            f"Note that dropout2d exists to provide channel-wise dropout on inputs "
            f"with 2 spatial dimensions, a channel dimension, and an optional batch "
            f"dimension (i.e. 3D or 4D inputs).",
            stacklevel=2,
        )
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that "
            "channel-wise 1D dropout behavior is desired - input is interpreted as "
            "shape (N, C, L), where C is the channel dim. This behavior will change "
            "in a future release to interpret the input as one without a batch "
            "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise "
            "dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _feature_dropout("dropout2d", input, p, training, inplace, input.ndim)


def dropout3d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability
    `p`."""
    _tensor("dropout3d", "input", input)
    if input.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
            f"deprecated and will result in an error in a future release. To retain "
            f"the behavior and silence this warning, please use dropout instead. "
            f"Note that dropout3d exists to provide channel-wise dropout on inputs "
            f"with 3 spatial dimensions, a channel dimension, and an optional batch "
            f"dimension (i.e. 4D or 5D inputs).",
            stacklevel=2,
        )
    return _feature_dropout(
        "dropout3d", input, p, training, inplace, 5 if input.ndim == 4 else input.ndim
    )


def alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Alpha dropout (for SELU networks): each element is dropped with probability `p` to
    SELU's saturation value, then an affine map restores zero mean and unit variance.
    Identity unless `training` (False by default, as PyTorch)."""
    _tensor("alpha_dropout", "input", input)
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    return _noise("alpha_dropout", input, p, False, True, inplace)


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Alpha dropout of whole channels (dims 0 and 1 of the input)."""
    _tensor("feature_alpha_dropout", "input", input)
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    return _noise("feature_alpha_dropout", input, p, True, True, inplace)
