"""`llgrad.nn.utils`: gradient clipping, parameters as one vector, stateless calls, packed
sequences, weight/spectral normalization, parametrizations, pruning."""

from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .stateless import functional_call
from . import stateless
from . import rnn
from .rnn import PackedSequence
from . import parametrizations, parametrize, prune
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "get_total_norm",
    "parameters_to_vector",
    "vector_to_parameters",
    "functional_call",
    "stateless",
    "rnn",
    "PackedSequence",
    "parametrizations",
    "parametrize",
    "prune",
    "spectral_norm",
    "remove_spectral_norm",
    "weight_norm",
    "remove_weight_norm",
]
