"""Activation functions of `llgrad.nn.functional` beyond the basic ones: prelu, glu,
hardswish, hardsigmoid, hardshrink, softshrink, tanhshrink, threshold, softmin, rrelu and
the in-place forms (`threshold_`, `rrelu_`, `celu_`, `selu_`).

Each is a composition of differentiable functions chosen so that the gradient at the kinks
equals PyTorch's (e.g. hardswish's derivative at x = -3 is -0.5, hardsigmoid's at +-3 is
0). In-place forms compute the value and copy it into the input, which autograd records
as an in-place write (`CopyBackwards`) where PyTorch records the op's own node.
They are re-exported by `llgrad.nn.functional`.
"""

from __future__ import annotations

from typing import Any

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..dispatch.grad_mode import no_grad
from ..ir import dtypes as dt
from ..tensor import Tensor
from ._base import _act, _softmax_dim, _tensor

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    _tensor("selu", "input", input)
    return _act("selu", lg.elu, input, inplace, SELU_ALPHA, SELU_SCALE)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)): elu with input scale 1/alpha."""
    _tensor("celu", "input", input)
    if alpha == 0:
        raise ValueError("celu: ZeroDivisionError, alpha cannot be 0")
    return _act("celu", lg.elu, input, inplace, alpha, 1.0, 1.0 / alpha)


def _float_input(op: str, input: Any) -> Tensor:
    _tensor(op, "input", input)
    if not (input._dtype.is_floating_point or input._dtype.is_complex):
        raise RuntimeError(
            f"{op}: expected a floating point input, got {input._dtype.name} "
            f"(shape {list(input.shape)})"
        )
    return input


@composite_function
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """max(0, x) + weight * min(0, x), `weight` one value or one per channel (dim 1).

    Args: input: (N, C, ...); a 0-d or 1-D input has one channel (PyTorch's rule);
    weight: 1 or C elements."""
    op = "prelu"
    _tensor(op, "input", input)
    _tensor(op, "weight", weight)
    n = weight.numel()
    if weight.ndim > 1:
        raise RuntimeError(f"{op}: weight must be 0-D or 1-D, got shape {list(weight.shape)}")
    w = lg.reshape(weight, ()) if n == 1 else weight
    if n != 1:
        if input.ndim == 0:
            raise RuntimeError(f"{op}: Not allow zero-dim input tensor with {n} weights")
        channels = input.shape[1] if input.ndim >= 2 else 1
        if channels != n:
            raise RuntimeError(
                f"{op}: Mismatch of parameter numbers and input channel size. "
                f"Found parameter numbers = {n} and channel size = "
                f"{channels}."
            )
        shape = [1] * input.ndim
        shape[1] = n
        w = lg.reshape(weight, tuple(shape))
    return lg.where(lg.gt(input, 0), input, lg.mul(w, input))


@composite_function
def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b), where a and b are the two halves of `input` along `dim`."""
    op = "glu"
    _tensor(op, "input", input)
    if input.ndim == 0:
        raise RuntimeError(f"{op} does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(
            f"{op}: Halving dimension must be even, but dimension {dim % input.ndim} is size {size}"
        )
    a, b = lg.chunk(input, 2, dim)
    return lg.mul(a, lg.sigmoid(b))


@composite_function
def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6; derivative (2x + 3) / 6 on (-3, 3), 0 at and below -3, 1 at
    and above 3: PyTorch's at the kinks."""
    _float_input("hardswish", input)

    def fn(x: Tensor) -> Tensor:
        mid = lg.div(lg.mul(x, lg.add(x, 3.0)), 6.0)
        return lg.where(lg.le(x, -3.0), lg.zeros_like(x), lg.where(lg.lt(x, 3.0), mid, x))

    return _act("hardswish", fn, input, inplace)


@composite_function
def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6; derivative 1/6 strictly inside (-3, 3), else 0 (PyTorch's)."""
    _float_input("hardsigmoid", input)

    def fn(x: Tensor) -> Tensor:
        return lg.where(
            lg.le(x, -3.0),
            lg.zeros_like(x),
            lg.where(lg.ge(x, 3.0), lg.ones_like(x), lg.add(lg.div(x, 6.0), 0.5)),
        )

    return _act("hardsigmoid", fn, input, inplace)


@composite_function
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    _tensor("hardshrink", "input", input)
    keep = lg.logical_or(lg.gt(input, lambd), lg.lt(input, -lambd))
    return lg.where(keep, input, lg.zeros_like(input))


@composite_function
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _tensor("softshrink", "input", input)
    if lambd < 0:
        raise RuntimeError(
            f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}."
        )
    zero = lg.zeros_like(input)
    return lg.where(
        lg.gt(input, lambd),
        lg.sub(input, lambd),
        lg.where(lg.lt(input, -lambd), lg.add(input, lambd), zero),
    )


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    _tensor("tanhshrink", "input", input)
    return lg.sub(input, lg.tanh(input))


@composite_function
def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else `value` (the gradient flows where x > threshold)."""
    _tensor("threshold", "input", input)

    def fn(x: Tensor) -> Tensor:
        return lg.where(lg.gt(x, threshold), x, lg.full_like(x, value))

    return _act("threshold", fn, input, inplace)


_threshold = threshold


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place `threshold`."""
    return _threshold(input, threshold, value, inplace=True)


@composite_function
def softmin(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: dt.DType | None = None
) -> Tensor:
    """softmax(-x) along `dim` (the legacy implicit dim when None, with its warning)."""
    _tensor("softmin", "input", input)
    d = _softmax_dim("softmin", input.ndim, dim)
    x = input if dtype is None else input.to(dtype)
    return lg.softmax(lg.neg(x), d)


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
    *,
    generator: Any = None,
) -> Tensor:
    """Randomized leaky ReLU: in training each element x <= 0 is multiplied by a slope drawn
    from U(lower, upper) (from `lg.rand`: seeded by `lg.manual_seed`, other streams than
    PyTorch's); in evaluation the slope is (lower + upper) / 2."""
    op = "rrelu"
    _float_input(op, input)
    if lower > upper:
        raise RuntimeError(
            f"{op}: Lower bound should be less than or equal to the upper "
            f"bound (lower={lower}, upper={upper})"
        )
    if not training:
        return _act("rrelu", lg.leaky_relu, input, inplace, (lower + upper) / 2)
    slopes = lg.add(
        lg.mul(lg.rand(input.shape, dtype=input._dtype, generator=generator), upper - lower), lower
    )
    with no_grad():
        noise = lg.where(lg.le(input, 0), slopes, lg.ones_like(input))
    return _act("rrelu", lg.mul, input, inplace, noise)


def rrelu_(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """In-place `rrelu`; `generator` draws the slopes in training."""
    return rrelu(input, lower, upper, training, inplace=True, generator=generator)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place `celu`."""
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    """In-place `selu`."""
    return selu(input, inplace=True)


def softmax2d_check(input: Tensor) -> None:
    """`Softmax2d`'s rule: a 3-D (C, H, W) or 4-D (N, C, H, W) input."""
    if input.ndim not in (3, 4):
        raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
