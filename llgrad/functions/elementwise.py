"""Elementwise functions: `lg.exp`, `lg.add`, ... and the operators behind `+ - * / **`."""

from __future__ import annotations

import builtins
from typing import Any

from ..tape import forward as _forward_ad
from ..dispatch.apply import apply, composite_function, interpreters as _interpreters
from ..dispatch.grad_mode import _state as _grad_state, no_grad
from ..eager import elementwise as ew
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak
from . import fastpath, shape as _shape  # noqa: E402  (imports this module's siblings only)
from ._errors import names_op
from .numpy_interop import plain_numbers
from .shape import reinterpret

Number = bool | int | float


def _forward(op: str, operands: Any, attrs: dict[str, Any] | None) -> Tensor:
    return ew.run(op, operands, attrs)


def _check(op: str, *operands: Any) -> None:
    for o in operands:
        if isinstance(o, Tensor):
            return
    raise TypeError(
        f"{op}: expected at least one Tensor argument, got "
        f"{', '.join(type(o).__name__ for o in operands)}"
    )


_PLAIN = frozenset({Tensor, bool, int, float, complex})


def elementwise(op: str, *operands: Any, name: str | None = None, **attrs: Any) -> Tensor:
    """Run registry op `op` elementwise on tensors and numbers (attributes `attrs`),
    recorded by autograd under `name` (default: the op's own node name); a call like one
    made before takes the direct path of `fastpath.elementwise`."""
    return fastpath.elementwise(op, operands, attrs, name, _general)


def _general(op: str, operands: tuple, attrs: dict[str, Any], name: str | None) -> Tensor:
    for o in operands:
        if o.__class__ not in _PLAIN:  # NumPy scalars are Python numbers here
            operands = plain_numbers(operands)
            break
    _check(op, *operands)
    return apply(op, operands, attrs or None, _forward, name)


def _unary(op: str, rounding: bool = False):
    """`lg.<op>(x)`. `rounding` (floor, ceil, round, trunc): integers are whole already and
    come back as a copy, as in PyTorch; bools are refused."""

    def fn(input: Tensor) -> Tensor:
        if (
            rounding
            and isinstance(input, Tensor)
            and not input._dtype.is_floating_point
            and not input._dtype.is_complex
        ):
            if input._dtype is dt.bool_:
                raise TypeError(f"{op}: not defined for bool (input bool{list(input.shape)})")
            return input.clone()
        return elementwise(op, input)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"Elementwise `{op}` (differentiable; see the op registry for its rule)."
    # (rounding: an integer input never runs the op's kernel, so only float inputs learn
    # a direct launch)
    return fastpath.unary(op, fn)


exp = _unary("exp")
exp2 = _unary("exp2")
expm1 = _unary("expm1")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
erfc = _unary("erfc")
neg = _unary("neg")
negative = neg
abs = _unary("abs")
absolute = abs
sign = _unary("sign")
reciprocal = _unary("reciprocal")
_square = _unary("square")


def square(input: Tensor) -> Tensor:
    """input * input; a bool tensor squares as int64, as in PyTorch."""
    if isinstance(input, Tensor) and input._dtype is dt.bool_:
        input = input.to(dt.int64)
    return _square(input)


floor = _unary("floor", rounding=True)
ceil = _unary("ceil", rounding=True)
trunc = _unary("trunc", rounding=True)
_round_half_even = _unary("round", rounding=True)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round half to even; with `decimals`, to that many decimal places (negative: to
    tens, hundreds, ...), computed as PyTorch does: round(x * 10**d) / 10**d (or
    round(x / 10**-d) * 10**-d). Integer tensors refuse `decimals` != 0, as PyTorch.
    The gradient is zero."""
    if decimals == 0:
        return _round_half_even(input)
    if isinstance(input, Tensor) and not input._dtype.is_floating_point:
        raise NotImplementedError(
            f'"round_cpu" not implemented for '
            f"'{input._dtype.name}' (round with decimals takes "
            f"floating-point tensors)"
        )
    if not isinstance(decimals, int):
        raise TypeError(f"round(): argument 'decimals' must be int, not {type(decimals).__name__}")
    # one op (RoundBackward1, zero gradient): rint(x * 10^d) / 10^d, or for d < 0
    # rint(x / 10^-d) * 10^-d, in the input's dtype
    return fastpath.elementwise(
        "round_decimals", (input,), {"decimals": decimals}, None, _general_elementwise
    )


def _general_elementwise(
    op: str, operands: tuple, attrs: dict[str, Any], name: str | None
) -> Tensor:
    return elementwise(op, *operands, name=name, **attrs)


relu = _unary("relu")
silu = _unary("silu")
isnan = _unary("isnan")
logical_not = _unary("logical_not")
bitwise_not = _unary("bitwise_not")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return elementwise("gelu", input, approximate=approximate)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return elementwise("softplus", input, beta=beta, threshold=threshold)


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return elementwise("leaky_relu", input, negative_slope=float(negative_slope))


def elu(input: Tensor, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Tensor:
    """`scale * x` above zero, `scale * alpha * expm1(input_scale * x)` at or below it."""
    return elementwise(
        "elu", input, alpha=float(alpha), scale=float(scale), input_scale=float(input_scale)
    )


def _scaled(op: str, input: Any, other: Any, alpha: Any) -> Any:
    """`other * alpha` for add/sub (a Python number stays one)."""
    if alpha == 1 or not _numbers_or_tensors(input, other):
        return other  # (a bad operand is named by the op itself)
    if isinstance(alpha, float) and ew.promote([input, other]).kind in "iub":
        raise RuntimeError(
            f"{op}: for integral input tensors, argument alpha must not be a "
            f"floating point number (alpha={alpha})"
        )
    if isinstance(other, Tensor) and other._dtype is dt.bool_ and isinstance(alpha, int):
        alpha = bool(alpha)  # bool arithmetic stays bool, as in PyTorch
    return mul(other, alpha) if isinstance(other, Tensor) else other * alpha


def no_bool_subtraction(op: str, input: Any, other: Any) -> None:
    if any(
        isinstance(o, Tensor) and o._dtype is dt.bool_ or isinstance(o, bool)
        for o in (input, other)
    ):
        raise RuntimeError(
            f"{op}: subtraction, the `-` operator, with a bool tensor is not "
            f"supported. If you are trying to invert a mask, use the `~` or "
            f"`logical_not()` operator instead."
        )


def _scaled_operands(input: Any, other: Any, alpha: Any) -> tuple[Any, Any, Any]:
    """add/sub's operands with NumPy scalars as Python numbers (a class check first: the
    common tensor-and-number call pays nothing more)."""
    if other.__class__ not in _PLAIN or input.__class__ not in _PLAIN or alpha != 1:
        return plain_numbers((input, other, alpha))
    return input, other, alpha


def _add(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """input + alpha * other (broadcast, promoted). Two bool operands (tensors or Python
    bools) give a bool logical or, as in PyTorch."""
    _check("add", input, other)
    input, other, alpha = _scaled_operands(input, other, alpha)
    other = _scaled("add", input, other, alpha)
    if _numbers_or_tensors(input, other) and ew.promote([input, other]) is dt.bool_:
        return logical_or(input, other)
    return elementwise("add", input, other)


def _sub(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    _check("sub", input, other)
    input, other, alpha = _scaled_operands(input, other, alpha)
    no_bool_subtraction("sub", input, other)
    other = _scaled("sub", input, other, alpha)
    name = "RsubBackward1" if not isinstance(input, Tensor) else None  # `2 - x`
    return elementwise("sub", input, other, name=name)


def mul(input: Any, other: Any) -> Tensor:
    return elementwise("mul", input, other)


_mul_operator = fastpath.binary("mul", mul)
mul = fastpath.binary("mul", mul, keywords=True)
multiply = mul
_add_operator = fastpath.binary("add", _add)
_sub_operator = fastpath.binary("sub", _sub)


def _plain_floats(input: Any, other: Any, alpha: Any) -> bool:
    """Two plain real floating-point tensors and a Python float or int `alpha`: the
    operands for which add/sub with `alpha` are exactly `input +/- other * alpha` of
    the direct operators (no bool, integer or NumPy rule applies)."""
    return (
        input.__class__ is Tensor
        and other.__class__ is Tensor
        and (alpha.__class__ is float or alpha.__class__ is int)
        and input._dtype.is_floating_point
        and other._dtype.is_floating_point
    )


def add(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """input + alpha * other (broadcast, promoted). Two bool operands (tensors or Python
    bools) give a bool logical or, as in PyTorch."""
    if alpha.__class__ is int and alpha == 1:
        return _add_operator(input, other)
    if _plain_floats(input, other, alpha):
        return _add_operator(input, _mul_operator(other, alpha))
    return _add(input, other, alpha=alpha)


def sub(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """input - alpha * other (broadcast, promoted); bool operands are refused."""
    if alpha.__class__ is int and alpha == 1:
        return _sub_operator(input, other)
    if _plain_floats(input, other, alpha):
        return _sub_operator(input, _mul_operator(other, alpha))
    return _sub(input, other, alpha=alpha)


subtract = sub


def _no_grad() -> Any:
    return no_grad()


def _numbers_or_tensors(*operands: Any) -> bool:
    return all(isinstance(o, (Tensor, bool, int, float, builtins.complex)) for o in operands)


def _integer_divisor(op: str, input: Any, other: Any) -> None:
    """Integer division by zero raises, as in PyTorch (the kernels would give 0). A divisor
    only known when the traced function runs breaks the graph, so eager code checks it."""
    if not (isinstance(input, Tensor) or isinstance(other, Tensor)):
        return  # the op itself refuses it
    for o in (input, other):  # any float or complex operand: a float division
        if isinstance(o, Tensor):
            if o._dtype.kind not in "iub":
                return
        elif not isinstance(o, (bool, int)):
            return  # (a non-number: the op itself names it)
    if not isinstance(other, Tensor):
        if other == 0:
            raise RuntimeError(f"{op}: ZeroDivisionError (integer division by zero)")
        return
    if getattr(other, "_ctx", None) is not None:
        raise GraphBreak(
            f"{op} of integers by a tensor (a zero divisor must raise)", user_location()
        )
    from .reduction import any as any_  # circle: functions.reduction -> here

    with _no_grad():
        if other.numel() and bool(any_(eq(other, 0)).item()):
            raise RuntimeError(
                f"{op}: ZeroDivisionError (integer division by zero; divisor "
                f"shape {list(other.shape)}, dtype {other._dtype.name})"
            )


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        return elementwise("div", input, other)
    return _div_rounded(input, other, rounding_mode)


@names_op("div")
def _div_rounded(input: Any, other: Any, rounding_mode: str) -> Tensor:
    if rounding_mode not in ("floor", "trunc"):
        raise ValueError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
            f"but found {rounding_mode!r}"
        )
    _integer_divisor("div", input, other)
    if rounding_mode == "floor":
        return elementwise("floor_divide", input, other, name="DivBackward2")
    if not ew.promote([input, other]).is_floating_point:
        # exact in integers: (a - fmod(a, b)) / b divides evenly
        exact = elementwise("sub", input, elementwise("fmod", input, other))
        return elementwise("floor_divide", exact, other, name="DivBackward2")
    # trunc(a / b), infinities included (3 / -inf is -0.0, -inf / 2 is -inf), with
    # PyTorch's zero gradients (a trunc of the quotient would pass 0 * inf = NaN back
    # where b is 0)
    return elementwise("trunc_divide", input, other, name="DivBackward2")


_div_operator = fastpath.binary("div", div)
# div with rounding_mode of a real floating-point tensor by anything: no integer divisor
# check applies, so the direct launch of `floor_divide` or `trunc_divide` is the call
_floor_div_direct = fastpath.binary(
    "floor_divide", lambda a, b: _div_rounded(a, b, "floor"), records=False
)
_trunc_div_direct = fastpath.binary(
    "trunc_divide", lambda a, b: _div_rounded(a, b, "trunc"), records=False
)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """input / other (broadcast, promoted to floating point); `rounding_mode` "trunc"
    rounds the quotient toward zero, "floor" down."""
    if rounding_mode is None:
        return _div_operator(input, other)
    if input.__class__ is Tensor and input._dtype.is_floating_point:
        if rounding_mode == "floor":
            return _floor_div_direct(input, other)
        if rounding_mode == "trunc":
            return _trunc_div_direct(input, other)
    return _div_rounded(input, other, rounding_mode)


divide = div
true_divide = div


def floor_divide(input: Any, other: Any) -> Tensor:
    _integer_divisor("floor_divide", input, other)
    return elementwise("floor_divide", input, other, name="DivBackward2")


@names_op("remainder")
def remainder(input: Any, other: Any) -> Tensor:
    _integer_divisor("remainder", input, other)
    name = "RemainderBackward1" if isinstance(other, Tensor) else None
    return elementwise("remainder", input, other, name=name)


@names_op("fmod")
def fmod(input: Any, other: Any) -> Tensor:
    _integer_divisor("fmod", input, other)
    name = "FmodBackward1" if isinstance(other, Tensor) else "FmodBackward0"
    return elementwise("fmod", input, other, name=name)


def pow(input: Any, exponent: Any) -> Tensor:
    if isinstance(exponent, Tensor) and not isinstance(input, Tensor):
        name = "PowBackward2"
    elif isinstance(exponent, Tensor):
        name = "PowBackward1"
    else:
        name = "PowBackward0"
        if (
            isinstance(input, Tensor)
            and not input._dtype.is_floating_point
            and isinstance(exponent, int)
            and exponent < 0
        ):
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    return elementwise("pow", input, exponent, name=name)


# (a recorded call takes the general path: its node's name follows the operand kinds)
pow = fastpath.binary("pow", pow, keywords=True, records=False)


def atan2(input: Any, other: Any) -> Tensor:
    return elementwise("atan2", input, other)


def maximum(input: Tensor, other: Tensor) -> Tensor:
    return elementwise("maximum", input, other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    return elementwise("minimum", input, other)


atan2 = fastpath.binary("atan2", atan2, keywords=True)
maximum = fastpath.binary("maximum", maximum, keywords=True)
minimum = fastpath.binary("minimum", minimum, keywords=True)


def where(condition: Tensor, input: Any = None, other: Any = None) -> Tensor:
    if input is None and other is None:
        from .indexing import nonzero  # indexing builds on this module's ops

        return tuple(nonzero(condition).unbind(1))  # type: ignore[return-value]
    return elementwise("where", condition, input, other)


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """input limited to [min, max] (numbers or tensors, broadcast; either may be None):
    a bound is taken where it is crossed, a NaN bound gives NaN."""
    if (
        input.__class__ is Tensor
        and (min.__class__ is Tensor or max.__class__ is Tensor)
        and (min is None or min.__class__ is Tensor)
        and (max is None or max.__class__ is Tensor)
    ):
        return _clamp_chain(input, min, max)
    min, max = plain_numbers((min, max))
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensors(input, min, max)
    if not input._dtype.is_floating_point and any(
        isinstance(v, float) for v in (min, max) if v is not None
    ):
        d = ew.promote([input] + [v for v in (min, max) if v is not None])
        input = input.to(d)
    return elementwise("clamp", input, min=min, max=max)


clip = clamp


def _clamp_tensors(input: Tensor, min: Any, max: Any) -> Tensor:
    """clamp with tensor bounds as PyTorch's ClampBackward0: a bound is taken only where
    it is crossed (a tie keeps x and x's gradient), a NaN bound gives NaN; built from
    `where`, so every derivative order follows."""
    out = input
    for bound, crossed in ((min, lt), (max, gt)):
        if bound is None:
            continue
        if not isinstance(bound, Tensor):
            out = clamp(out, **({"min": bound} if crossed is lt else {"max": bound}))
            continue
        take = crossed(out, bound)
        if bound._dtype.is_floating_point:
            take = logical_or(take, isnan(bound))
        last = bound is max or max is None
        out = elementwise("where", take, bound, out, name="ClampBackward0" if last else None)
    return out


def _clamp_steps(input: Tensor, min: Tensor | None, max: Tensor | None) -> list:
    """`_clamp_tensors`'s ops on tensor bounds as `chain_plan` steps (operands: input,
    then the bounds given)."""
    steps: list[tuple[str, tuple[int, ...]]] = []
    n = 1 + (min is not None) + (max is not None)
    cur, k = 0, 1
    for bound, crossed in ((min, "lt"), (max, "gt")):
        if bound is None:
            continue
        steps.append((crossed, (cur, k)))
        take = n + len(steps) - 1
        if bound._dtype.is_floating_point:
            steps.append(("isnan", (k,)))
            steps.append(("logical_or", (take, n + len(steps) - 1)))
            take = n + len(steps) - 1
        steps.append(("where", (take, k, cur)))
        cur, k = n + len(steps) - 1, k + 1
    return steps


# clamp by tensor bounds: the ops of `_clamp_tensors` as one kernel (all exact)
_clamp_chain = fastpath.chain("clamp", _clamp_tensors, _clamp_steps)


def _compare(op: str):
    def fn(input: Any, other: Any) -> Tensor:
        return elementwise(op, input, other)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"Elementwise `{op}` of two tensors, or a tensor and a number (broadcast)."
    return fastpath.binary(op, fn, keywords=True)


eq = _compare("eq")
ne = _compare("ne")
lt = _compare("lt")
le = _compare("le")
gt = _compare("gt")
ge = _compare("ge")
less, less_equal, greater, greater_equal, not_equal = lt, le, gt, ge, ne
logical_and = _compare("logical_and")
logical_or = _compare("logical_or")
logical_xor = _compare("logical_xor")
bitwise_and = _compare("bitwise_and")
bitwise_or = _compare("bitwise_or")
bitwise_xor = _compare("bitwise_xor")


# (weight, end, input layout keys) -> the direct launch of `weight * (end - input)` in one
# kernel (`eager.elementwise.chain_plan`; False: none), for `_lerp_direct`
_LERP_PRODUCTS = fastpath._table("lerp product")
_SUB_DIRECT = fastpath._table("sub")
_MUL_DIRECT = fastpath._table("mul")
_ADD_ELEMENTWISE = fastpath._ew_table


def _lerp_direct(input: Any, end: Any, weight: Any) -> Tensor | None:
    """`lerp`'s kernels (end - input, weight * that, input + that) through the direct
    launches their general calls learned (`functions.fastpath`), for plain tensors (a
    tensor or Python float/int weight) that autograd does not record; None when one is
    missing (the general path runs and learns it). A tensor weight's product of the
    difference then runs as one kernel (`_LERP_PRODUCTS`). Values as the general path's:
    each launch computes what its ops' kernels do (a number weight multiplies from the
    right: IEEE multiplication commutes)."""
    if (
        input.__class__ is not Tensor
        or end.__class__ is not Tensor
        or end._dtype is not input._dtype
        or _interpreters
        or _forward_ad._level[0]
    ):
        return None
    c = weight.__class__
    if c is Tensor:
        if _grad_state.enabled and (
            input._requires_grad or end._requires_grad or weight._requires_grad
        ):
            return None
        prod = _lerp_tensor_product(input, end, weight)
    elif c is float or c is int:
        if _grad_state.enabled and (input._requires_grad or end._requires_grad):
            return None
        prod = _lerp_product(input, end, weight)
    else:
        return None
    if prod is None:
        return None
    entry = _ADD_ELEMENTWISE.get(("add", None, input._lkey, prod._lkey))
    if entry is None or entry is fastpath._NO_DIRECT:
        return None
    return entry[0](input, prod)


def _lerp_tensor_product(input: Any, end: Any, weight: Any) -> Tensor | None:
    """`weight * (end - input)` for a tensor `weight` in one kernel, once the direct
    launches of these layouts' sub and mul exist (their general calls accepted the
    operands; until then, and when the launch declines, those launches), or None."""
    key = (weight._lkey, end._lkey, input._lkey)
    launch = _LERP_PRODUCTS.get(key)
    prod = launch(weight, end, input) if launch else None
    if prod is not None:
        return prod
    prod = _lerp_product(input, end, weight)
    if prod is not None and launch is None and len(_LERP_PRODUCTS) < 256:
        plan = ew.chain_plan((("sub", (1, 2)), ("mul", (0, 3))), (weight, end, input))
        _LERP_PRODUCTS[key] = (
            plan is not None and ew.direct_launch("lerp", plan, (weight, end, input))
        ) or False
    return prod


def _lerp_product(input: Any, end: Any, weight: Any) -> Tensor | None:
    """`weight * (end - input)` by the direct launches of sub and mul, or None when one
    is missing."""
    entry = _SUB_DIRECT.get((end._lkey, input._lkey))
    diff = entry[0](end, input) if entry is not None else None
    if diff is None:
        return None
    c = weight.__class__
    if c is Tensor:
        entry = _MUL_DIRECT.get((weight._lkey, diff._lkey))
        return entry[0](weight, diff) if entry is not None else None
    entry = _MUL_DIRECT.get((diff._lkey, c))
    return entry[0](diff, weight) if entry is not None else None


@names_op("lerp")
def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    out = _lerp_direct(input, end, weight)
    if out is not None:
        return out
    if isinstance(end, Tensor) and isinstance(input, Tensor) and end._dtype is not input._dtype:
        raise RuntimeError(
            f"lerp: expected dtype {input._dtype.name} for `end` but got dtype {end._dtype.name}"
        )
    name = "LerpBackward1" if isinstance(weight, Tensor) else "LerpBackward0"
    if weight.__class__ in (float, int) and isinstance(input, Tensor):
        # (`weight * diff` as `diff * weight`: one direct table for `_lerp_direct`)
        return elementwise("add", input, mul(sub(end, input), weight), name=name)
    return elementwise("add", input, mul(weight, sub(end, input)), name=name)


@composite_function
def xlogy(input: Any, other: Any) -> Tensor:
    if not isinstance(input, Tensor):
        from .creation import full  # circle: functions.creation -> here

        name = "XlogyBackward1"
        input = full((), input, dtype=ew.promote([input, other]))
    else:
        name = "XlogyBackward0" if isinstance(other, Tensor) else "XlogyBackward2"
    # PyTorch's convention: 0 where input == 0 unless other is NaN. input * log(other) is
    # linear in input, so the gradient w.r.t. input is log(other), masked to 0 (as
    # PyTorch's) where input == 0 and other <= 0: the log is replaced by 0 there, which
    # gives the value 0 and no 0 * log(0) = NaN in either gradient's masked positions.
    import math

    if isinstance(other, Tensor):
        log_other: Any = elementwise(
            "where", logical_and(eq(input, 0), le(other, 0)), 0.0, log(other)
        )
        at_inf = logical_and(eq(input, 0), eq(other, math.inf))
    else:  # a Python number: its log, with log's 0 and negative cases
        log_other = math.log(other) if other > 0 else -math.inf if other == 0 else math.nan
        if other <= 0:
            log_other = elementwise("where", eq(input, 0), 0.0, log_other)
        at_inf = eq(input, 0) if other == math.inf else eq(input, math.nan)
    return elementwise("where", at_inf, mul(input, 0.0), mul(input, log_other), name=name)


# --------------------------------------------------------------------------------------
# Complex numbers
# --------------------------------------------------------------------------------------

_PYTHON_COMPLEX = builtins.complex


def conj(input: Any) -> Any:
    """The complex conjugate, as a new tensor (llgrad has no lazy conjugate bit).

    Real tensors and real Python numbers come back unchanged, as in PyTorch, so derivative
    rules conjugate unconditionally and stay exact for real inputs.
    """
    if isinstance(input, _PYTHON_COMPLEX):
        return input.conjugate()
    if isinstance(input, (bool, int, float)):
        return input
    _check("conj", input)
    if not input._dtype.is_complex:
        return input
    return elementwise("conj", input)


conj_physical = conj


def resolve_conj(input: Tensor) -> Tensor:
    """Conjugation is never lazy in llgrad: nothing to resolve."""
    return input


def is_conj(input: Tensor) -> bool:
    return False


def _part_forward(op: str, operands: Any, attrs: Any) -> Tensor:
    """`.real` / `.imag` as views: every other float of the interleaved storage."""
    x = operands[0]
    return reinterpret(
        x,
        x._dtype.to_real(),
        2 * x._offset + (op == "imag"),
        x._shape,
        tuple(2 * s for s in x._strides),
    )


def real(input: Any) -> Any:
    """The real part: a view for complex tensors, the tensor itself for real ones."""
    if isinstance(input, (bool, int, float, _PYTHON_COMPLEX)):
        return input.real
    out = _shape.reinterpreted_view("real", input)
    if out is not None:
        return out
    _check("real", input)
    if not input._dtype.is_complex:
        return input
    out = apply("real", (input,), None, _part_forward, None)
    return _shape.learn_reinterpreted("real", input, out) if _shape._unrecorded(input) else out


def imag(input: Any) -> Any:
    """The imaginary part: a view; real tensors have none (PyTorch raises too)."""
    if isinstance(input, (bool, int, float, _PYTHON_COMPLEX)):
        return input.imag
    out = _shape.reinterpreted_view("imag", input)
    if out is not None:
        return out
    _check("imag", input)
    if not input._dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    out = apply("imag", (input,), None, _part_forward, None)
    return _shape.learn_reinterpreted("imag", input, out) if _shape._unrecorded(input) else out


angle = _unary("angle")


def _check_parts(op: str, a: Any, b: Any) -> None:
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(
            f"{op}: expected two Tensors, got {type(a).__name__} and {type(b).__name__}"
        )


def complex(real: Tensor, imag: Tensor) -> Tensor:
    """`real + i imag` from two float32 or two float64 tensors (broadcast)."""
    _check_parts("complex", real, imag)
    return elementwise("complex", real, imag)


# (only calls on two tensors pass `_check_parts`, so only those learn a direct launch)
complex = fastpath.binary("complex", complex, keywords=True)


def polar(abs: Tensor, angle: Tensor) -> Tensor:
    """`abs * (cos(angle) + i sin(angle))` from two float32 or two float64 tensors."""
    _check_parts("polar", abs, angle)
    return elementwise("polar", abs, angle)
