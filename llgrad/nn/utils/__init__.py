"""`llgrad.nn.utils`: gradient clipping, parameters as one vector, stateless calls."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .stateless import functional_call
from . import stateless

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "functional_call", "stateless"]
