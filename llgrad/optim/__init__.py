"""`llgrad.optim`: optimizers with PyTorch's update rules and state dicts."""
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
