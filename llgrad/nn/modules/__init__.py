"""The module classes of `llgrad.nn`."""
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv2d, MaxPool2d
from .dropout import Dropout
from .flatten import Flatten
from .linear import Identity, Linear
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import LayerNorm
from .sparse import Embedding

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "Linear", "Identity", "ReLU",
           "GELU", "Tanh", "Sigmoid", "SiLU", "Softmax", "LogSoftmax", "LayerNorm", "Dropout",
           "Embedding", "Conv2d", "MaxPool2d", "Flatten", "CrossEntropyLoss", "NLLLoss",
           "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss"]
