"""`llgrad.optim`: optimizers with PyTorch's update rules and state dicts, and
`llgrad.optim.lr_scheduler`."""

from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam, RAdam
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from . import lr_scheduler

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "RAdam",
    "Adadelta",
    "Adagrad",
    "RMSprop",
    "Rprop",
    "ASGD",
    "LBFGS",
    "Adafactor",
    "Muon",
    "lr_scheduler",
]
