"""The module classes of `llgrad.nn`."""
from .activation import (CELU, ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish,
                         ReLU, ReLU6, SELU, Sigmoid, SiLU, Softmax, Softplus, Softsign, Tanh)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .conv import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, Conv1d, Conv2d,
                   MaxPool1d, MaxPool2d)
from .dropout import Dropout
from .flatten import Flatten
from .linear import Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "Linear", "Identity", "ReLU",
           "GELU", "Tanh", "Sigmoid", "SiLU", "Softmax", "LogSoftmax", "LeakyReLU", "ELU",
           "CELU", "SELU", "Softplus", "Hardtanh", "ReLU6", "LogSigmoid", "Mish", "Softsign", "LayerNorm", "Dropout",
           "Embedding", "Conv2d", "MaxPool2d", "Conv1d", "MaxPool1d", "AvgPool1d", "AvgPool2d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "RNNBase",
           "RNN", "LSTM", "GRU", "MultiheadAttention", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "Flatten", "CrossEntropyLoss", "NLLLoss",
           "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss"]
