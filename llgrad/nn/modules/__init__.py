"""The module classes of `llgrad.nn`."""

from .activation import (
    CELU,
    ELU,
    GELU,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    ReLU,
    ReLU6,
    SELU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Softsign,
    Tanh,
)
from .activation import (
    GLU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    PReLU,
    RReLU,  # noqa: E501
    Softmax2d,
    Softmin,
    Softshrink,
    Tanhshrink,
    Threshold,
)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    MaxPool1d,
    MaxPool2d,
)
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .channelshuffle import ChannelShuffle
from .distance import CosineSimilarity, PairwiseDistance
from .linear import Bilinear, Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .loss import (
    CosineEmbeddingLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,  # noqa
    HuberLoss,
    KLDivLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding, EmbeddingBag
from .lazy import (
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,  # noqa: E501
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyLinear,
    LazyModuleMixin,
    UninitializedBuffer,
    UninitializedParameter,
)
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "Module",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "Linear",
    "Identity",
    "ReLU",
    "GELU",
    "Tanh",
    "Sigmoid",
    "SiLU",
    "Softmax",
    "LogSoftmax",
    "LeakyReLU",
    "ELU",
    "CELU",
    "SELU",
    "Softplus",
    "Hardtanh",
    "ReLU6",
    "LogSigmoid",
    "Mish",
    "Softsign",
    "LayerNorm",
    "Dropout",
    "Embedding",
    "Conv2d",
    "MaxPool2d",
    "Conv1d",
    "MaxPool1d",
    "AvgPool1d",
    "AvgPool2d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "MultiheadAttention",
    "RNNCellBase",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "Flatten",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "BCELoss",
    "BCEWithLogitsLoss",
]
__all__ += [
    "GLU",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "PReLU",
    "RReLU",
    "Softmax2d",
    "Softmin",
    "Softshrink",
    "Tanhshrink",
    "Threshold",
]
__all__ += [
    "CosineEmbeddingLoss",
    "CTCLoss",
    "GaussianNLLLoss",
    "HingeEmbeddingLoss",
    "HuberLoss",
    "KLDivLoss",
    "MarginRankingLoss",
    "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "PoissonNLLLoss",
    "SmoothL1Loss",
    "SoftMarginLoss",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
]
__all__ += [
    "ChannelShuffle",
    "CosineSimilarity",
    "PairwiseDistance",
    "Bilinear",
    "EmbeddingBag",
    "Unflatten",
]

# Convolution, pooling, normalization, padding, resampling, channel dropout (conv/pool files).
from .conv import Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: E402
from .dropout import (  # noqa: E402
    AlphaDropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,  # noqa: E402
    FeatureAlphaDropout,
)
from .fold import Fold, Unfold  # noqa: E402
from .normalization import (  # noqa: E402
    BatchNorm3d,
    CrossMapLRN2d,
    GroupNorm,  # noqa: E402
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LocalResponseNorm,
    RMSNorm,
    SyncBatchNorm,
)
from .padding import (  # noqa: E402
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,  # noqa: E402
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: E402
from .pooling import (  # noqa: E402
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,  # noqa: E402
    AdaptiveMaxPool3d,
    AvgPool3d,
    FractionalMaxPool2d,
    FractionalMaxPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: E402

__all__ += [
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "AlphaDropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "FeatureAlphaDropout",
    "Fold",
    "Unfold",
    "BatchNorm3d",
    "CrossMapLRN2d",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LocalResponseNorm",
    "RMSNorm",
    "SyncBatchNorm",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "PixelShuffle",
    "PixelUnshuffle",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool3d",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
]
__all__ += ["ParameterDict", "ParameterList"]
__all__ += [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]
__all__ += [
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyLinear",
    "LazyModuleMixin",
    "UninitializedBuffer",
    "UninitializedParameter",
]

# NLLLoss2d, LinearCrossEntropyLoss, AdaptiveLogSoftmaxWithLoss, lazy norms (nn/_residual.py).
from .._residual import LinearCrossEntropyOptions, MODULES as _RESIDUAL  # noqa: E402
from .._residual import _make_modules  # noqa: E402

globals().update(_make_modules())
__all__ += list(_RESIDUAL) + ["LinearCrossEntropyOptions"]
