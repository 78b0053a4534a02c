"""`lg.autograd.grad_mode`, PyTorch's public path of the grad modes; they live in
`llgrad.dispatch.grad_mode`, below the tensor class that reads them on every op."""

from ..dispatch.grad_mode import (  # noqa: F401
    _state,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
