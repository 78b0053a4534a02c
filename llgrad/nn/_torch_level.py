"""The `nn` operations PyTorch also exports at top level (`torch.conv2d`, `torch.batch_norm`,
`torch.kl_div`, ...), with the top-level signatures, which are ATen's and not always
`torch.nn.functional`'s: the normalizations take the statistics positionally and a trailing
`cudnn_enabled` flag (accepted, no effect), the losses take `reduction` as ATen's integer
(0 none, 1 mean, 2 sum), `embedding` takes the weight first, and `adaptive_max_pool1d` and
`max_pool1d_with_indices` always return (values, indices). Each calls the
`llgrad.nn.functional` implementation, so values, gradients and compilation are its.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from ..tensor import Tensor
from . import functional as F

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_pool1d_with_indices",
    "avg_pool1d",
    "adaptive_avg_pool1d",
    "adaptive_max_pool1d",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "rms_norm",
    "dropout",
    "dropout_",
    "alpha_dropout",
    "alpha_dropout_",
    "feature_dropout",
    "feature_dropout_",
    "feature_alpha_dropout",
    "feature_alpha_dropout_",
    "binary_cross_entropy_with_logits",
    "cosine_embedding_loss",
    "hinge_embedding_loss",
    "kl_div",
    "margin_ranking_loss",
    "poisson_nll_loss",
    "triplet_margin_loss",
    "ctc_loss",
    "cosine_similarity",
    "pairwise_distance",
    "bilinear",
    "embedding",
    "prelu",
]

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(op: str, reduction: int | str) -> str:
    """ATen's integer reduction as nn.functional's string (strings pass through)."""
    if isinstance(reduction, str):
        return reduction
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction!r}"
        )
    return _REDUCTIONS[reduction]


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """`torch.conv1d`: F.conv1d."""
    return F.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """`torch.conv2d`: F.conv2d."""
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """`torch.conv3d`: F.conv3d."""
    return F.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """`torch.conv_tbc`: F.conv_tbc (time, batch, channel layout)."""
    return F.conv_tbc(input, weight, bias, pad)


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """`torch.conv_transpose1d`: F.conv_transpose1d."""
    return F.conv_transpose1d(
        input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """`torch.conv_transpose2d`: F.conv_transpose2d."""
    return F.conv_transpose2d(
        input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """`torch.conv_transpose3d`: F.conv_transpose3d."""
    return F.conv_transpose3d(
        input, weight, bias, stride, padding, output_padding, groups, dilation
    )


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """`torch.max_pool1d` (ATen's empty `stride` means the kernel size)."""
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """`torch.max_pool2d` (ATen's empty `stride` means the kernel size)."""
    return F.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """`torch.max_pool3d` (ATen's empty `stride` means the kernel size)."""
    return F.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> tuple[Tensor, Tensor]:
    """`torch.max_pool1d_with_indices`: the pooled values and their flat positions."""
    return F.max_pool1d(
        input, kernel_size, stride or None, padding, dilation, ceil_mode, return_indices=True
    )


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """`torch.avg_pool1d`: F.avg_pool1d."""
    return F.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """`torch.adaptive_avg_pool1d`: F.adaptive_avg_pool1d."""
    return F.adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple[Tensor, Tensor]:
    """`torch.adaptive_max_pool1d`: always (values, indices), as ATen's."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = True,
) -> Tensor:
    """`torch.batch_norm` (ATen's argument order; `cudnn_enabled` has no effect)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> Tensor:
    """`torch.group_norm` (`cudnn_enabled` has no effect)."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = True,
) -> Tensor:
    """`torch.instance_norm` (ATen's argument order; `cudnn_enabled` has no effect)."""
    return F.instance_norm(
        input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
    )


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int] | int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Tensor:
    """`torch.layer_norm` (`cudnn_enable` has no effect)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    return F.layer_norm(input, tuple(shape), weight, bias, eps)


def rms_norm(
    input: Tensor,
    normalized_shape: Sequence[int] | int,
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """`torch.rms_norm`: F.rms_norm."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    return F.rms_norm(input, tuple(shape), weight, eps)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.dropout(input, p, train)`."""
    return F.dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.dropout_`: dropout written into `input`."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.alpha_dropout(input, p, train)`."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.alpha_dropout_`: alpha dropout written into `input`."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.feature_dropout`: whole channels (dim 1) dropped, as dropout2d/3d."""
    return _feature(F.dropout1d, F.dropout2d, F.dropout3d, input, p, train, False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.feature_dropout_`: feature dropout written into `input`."""
    return _feature(F.dropout1d, F.dropout2d, F.dropout3d, input, p, train, True)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.feature_alpha_dropout(input, p, train)`."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.feature_alpha_dropout_`: written into `input`."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def _feature(
    d1: Any, d2: Any, d3: Any, input: Tensor, p: float, train: bool, inplace: bool
) -> Tensor:
    fn = {2: d1, 3: d1, 4: d2, 5: d3}.get(input.ndim)
    if fn is None:
        raise RuntimeError(
            f"feature_dropout: expected a 2-D to 5-D input, got shape {list(input.shape)}"
        )
    return fn(input, p, train, inplace)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    pos_weight: Tensor | None = None,
    reduction: int | str = 1,
) -> Tensor:
    """`torch.binary_cross_entropy_with_logits` (integer `reduction`)."""
    return F.binary_cross_entropy_with_logits(
        input,
        target,
        weight,
        reduction=_reduction("binary_cross_entropy_with_logits", reduction),
        pos_weight=pos_weight,
    )


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int | str = 1
) -> Tensor:
    """`torch.cosine_embedding_loss` (integer `reduction`)."""
    return F.cosine_embedding_loss(
        input1, input2, target, margin, reduction=_reduction("cosine_embedding_loss", reduction)
    )


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: int | str = 1
) -> Tensor:
    """`torch.hinge_embedding_loss` (integer `reduction`)."""
    return F.hinge_embedding_loss(
        input, target, margin, reduction=_reduction("hinge_embedding_loss", reduction)
    )


def kl_div(
    input: Tensor, target: Tensor, reduction: int | str = 1, log_target: bool = False
) -> Tensor:
    """`torch.kl_div` (integer `reduction`; 1 is the element mean, as ATen's, without
    nn.functional's advice to use 'batchmean')."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return F.kl_div(
            input, target, reduction=_reduction("kl_div", reduction), log_target=log_target
        )


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int | str = 1
) -> Tensor:
    """`torch.margin_ranking_loss` (integer `reduction`)."""
    return F.margin_ranking_loss(
        input1, input2, target, margin, reduction=_reduction("margin_ranking_loss", reduction)
    )


def poisson_nll_loss(
    input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float, reduction: int | str
) -> Tensor:
    """`torch.poisson_nll_loss` (every argument positional, integer `reduction`)."""
    return F.poisson_nll_loss(
        input, target, log_input, full, eps=eps, reduction=_reduction("poisson_nll_loss", reduction)
    )


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: int | str = 1,
) -> Tensor:
    """`torch.triplet_margin_loss` (integer `reduction`)."""
    return F.triplet_margin_loss(
        anchor,
        positive,
        negative,
        margin,
        p,
        eps,
        swap,
        reduction=_reduction("triplet_margin_loss", reduction),
    )


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: int | str = 1,
    zero_infinity: bool = False,
) -> Tensor:
    """`torch.ctc_loss` (integer `reduction`)."""
    return F.ctc_loss(
        log_probs,
        targets,
        input_lengths,
        target_lengths,
        blank,
        _reduction("ctc_loss", reduction),
        zero_infinity,
    )


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """`torch.cosine_similarity`: F.cosine_similarity."""
    return F.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """`torch.pairwise_distance`: F.pairwise_distance."""
    return F.pairwise_distance(x1, x2, p, eps, keepdim)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`torch.bilinear`: F.bilinear."""
    return F.bilinear(input1, input2, weight, bias)


def embedding(
    weight: Tensor,
    indices: Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """`torch.embedding(weight, indices, ...)`: the weight first, as ATen's; `padding_idx=-1`
    means none (ATen's convention)."""
    return F.embedding(
        indices,
        weight,
        None if padding_idx == -1 else padding_idx,
        scale_grad_by_freq=scale_grad_by_freq,
        sparse=sparse,
    )


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """`torch.prelu`: F.prelu."""
    return F.prelu(input, weight)
