"""`Dropout`, channel dropout (`Dropout1d/2d/3d`), `AlphaDropout`, `FeatureAlphaDropout`."""

from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from .module import Module


class Dropout(Module):
    """Zeroes elements with probability `p` in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _DropoutNd(Dropout):
    _fn = "dropout"

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs in training mode."""

    _fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) inputs in training mode."""

    _fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs in training mode."""

    _fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    """Alpha dropout (keeps SELU activations' mean and variance) in training mode."""

    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels in training mode."""

    _fn = "feature_alpha_dropout"
