"""`gradcheck` and `gradgradcheck`: analytical gradients against finite differences.

The numerical Jacobian perturbs each input element in place (through an alias that
shares memory but not the version counter, so graphs that saved the input stay valid),
evaluates the function on both sides and takes the central difference with llgrad ops.
The analytical Jacobian is built row by row from `autograd.grad` with one-hot
`grad_outputs`, twice, so a backward that is not deterministic ("not reentrant") is
caught too. Layouts and messages follow PyTorch: `jacobian[input][output]` has shape
(input.numel(), output.numel()).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ..dispatch.grad_mode import no_grad
from ..eager import elementwise as ew
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tape import forward as fwAD
from .api import grad
from ..tape.node import Node, edge
from ..functions.creation import from_values, zeros, zeros_like, Generator, rand
from ..functions.misc import allclose
from ..functions.shape import stack, permute
from ..functions import view_as_complex, view_as_real

__all__ = [
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
    "get_numerical_jacobian",
    "get_analytical_jacobian",
]


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when a check fails."""


FAILED_NONDET_MSG = (
    "\n\nNOTE: If your op relies on non-deterministic operations (atomic accumulation, "
    "randomness), this failure might be expected: call gradcheck/gradgradcheck with "
    "`nondet_tol=<tol>` as a keyword argument.\n"
)

FAST_FAIL_SLOW_OK_MSG = (
    "\nFast gradcheck failed but element-wise differences are small. This means that the\n"
    "test might've passed in slow_mode!\n\nIf you are adding a new operator, please file "
    "an issue and then use one of the\nworkarounds: call gradcheck/gradgradcheck with "
    "`fast_mode=False` as a keyword argument.\n"
)


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _as_tuple(x: Any) -> tuple[Any, ...]:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_float(t: Any) -> bool:
    return isinstance(t, Tensor) and (t._dtype.is_floating_point or t._dtype.is_complex)


def _diff_inputs(inputs: Sequence[Any]) -> list[tuple[int, Tensor]]:
    return [(i, t) for i, t in enumerate(inputs) if isinstance(t, Tensor) and t._requires_grad]


def _differentiable_outputs(outputs: Sequence[Any]) -> tuple[Tensor, ...]:
    return tuple(o for o in outputs if isinstance(o, Tensor) and o._requires_grad)


def _raw(t: Tensor) -> Tensor:
    """An alias over `t`'s memory with no autograd state (writes don't bump versions)."""
    return Tensor._make(t._storage, t._offset, t._shape, t._strides, t._dtype)


def _element(t: Tensor, flat: int) -> Tensor:
    """A 0-d alias of the element at row-major position `flat` of `t`."""
    offset = t._offset
    for size, stride in zip(reversed(t._shape), reversed(t._strides)):
        flat, i = divmod(flat, size)
        offset += i * stride
    return Tensor._make(t._storage, offset, (), (), t._dtype)


def _matrix(rows: np.ndarray, dtype: dt.DType) -> Tensor:
    return from_values(rows, dtype)


def _np_dtype(d: dt.DType) -> Any:
    return np.float32 if d is dt.bfloat16 else d.np


def _check_inputs(inputs: tuple[Any, ...]) -> None:
    if not any(isinstance(t, Tensor) and t._requires_grad for t in inputs):
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, "
            "but none of the them have requires_grad=True."
        )
    for idx, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t._requires_grad):
            continue
        if t._dtype is not dt.float64 and t._dtype is not dt.complex128:
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision "
                f"floating point or complex. This check will likely fail if all the "
                f"inputs are not of double precision floating point or complex. ",
                UserWarning,
                stacklevel=3,
            )
        if any(st == 0 and sz > 1 for st, sz in zip(t._strides, t._shape)):
            raise RuntimeError(
                f"The {idx}th input has a dimension with stride 0. gradcheck "
                f"only supports inputs that are non-overlapping to be able to "
                f"compute the numerical gradients correctly. You should call "
                f".contiguous on the input before passing it to gradcheck."
            )


def _evaluate(func: Callable[..., Any], inputs: tuple[Any, ...]) -> list[Tensor | None]:
    """func's float outputs as independent copies (None for the others)."""
    outs = _as_tuple(func(*inputs))
    with no_grad():
        return [o.detach().clone() if _is_float(o) else None for o in outs]


# ------------------------------------------------------------------------------------------
# numerical Jacobian
# ------------------------------------------------------------------------------------------


def _perturbed_outputs(
    func: Callable[..., Any],
    inputs: tuple[Any, ...],
    target: Tensor,
    minus: Tensor | float,
    plus: Tensor | float,
) -> tuple[list[Tensor | None], list[Tensor | None]]:
    """Evaluate with `target` set to `minus`, then `plus`; restore its values."""
    with no_grad():
        orig = target.clone()
    try:
        with no_grad():
            ew.copy_into(target, minus)
        outa = _evaluate(func, inputs)
        with no_grad():
            ew.copy_into(target, plus)
        outb = _evaluate(func, inputs)
    finally:
        with no_grad():
            ew.copy_into(target, orig)
    return outa, outb


def _central_difference(outa: Tensor | None, outb: Tensor | None, eps: float) -> Tensor | None:
    if outa is None or outb is None:
        return None
    if outa._shape != outb._shape or outa._dtype is not outb._dtype:
        raise GradcheckError(
            f"Expected all outputs of the function to have the same shape "
            f"and dtype when its input is perturbed by eps={eps}, got "
            f"{list(outa._shape)} {outa._dtype.name} and {list(outb._shape)} "
            f"{outb._dtype.name}"
        )
    with no_grad():
        return (outb - outa) / (2 * eps)


def get_numerical_jacobian(
    func: Callable[..., Any], inputs: Any, eps: float = 1e-6
) -> list[list[Tensor | None]]:
    """`result[i][k]`: d output k / d (i-th input that requires grad), (in_numel, out_numel).

    Entries for outputs that are not floating point are None.
    """
    tupled = _as_tuple(inputs)
    reference = _evaluate(func, tupled)
    result: list[list[Tensor | None]] = []
    for _, x in _diff_inputs(tupled):
        n_in = x.numel()
        rows = [
            None if o is None else np.zeros((n_in, o.numel()), _np_dtype(o._dtype))
            for o in reference
        ]
        raw = _raw(x)
        for j in range(n_in):
            elem = _element(raw, j)
            v = elem.item()
            outa, outb = _perturbed_outputs(func, tupled, elem, v - eps, v + eps)
            for k, (a, b) in enumerate(zip(outa, outb)):
                d = _central_difference(a, b, eps)
                if d is not None and rows[k] is not None:
                    if d.numel() != rows[k].shape[1]:
                        raise GradcheckError(
                            "Expected all outputs of the function to keep "
                            "their number of elements under perturbation"
                        )
                    rows[k][j, :] = d.reshape(-1)._values()
        result.append(
            [None if r is None else _matrix(r, o._dtype) for r, o in zip(rows, reference)]
        )
    return result


# ------------------------------------------------------------------------------------------
# analytical Jacobian
# ------------------------------------------------------------------------------------------


def _one_hot(like: Tensor, flat: int) -> Tensor:
    g = zeros(like._shape, dtype=like._dtype)
    if g.numel():
        ew.copy_into(_element(g, flat), 1)
    return g


def _vjp(
    output: Tensor, diff_inputs: list[Tensor], grad_output: Tensor
) -> tuple[Tensor | None, ...]:
    return grad(output, diff_inputs, grad_output, retain_graph=True, allow_unused=True)


def _stack_columns(
    columns: list[tuple[Tensor | None, ...]], diff_inputs: list[Tensor], n_cols: int
) -> tuple[list[Tensor], bool, bool]:
    """Jacobians (in_numel, n_cols) from per-column gradients; also (sizes_ok, types_ok)."""
    sizes_ok = types_ok = True
    mats = [np.zeros((x.numel(), n_cols), _np_dtype(x._dtype)) for x in diff_inputs]
    for j, grads in enumerate(columns):
        for i, (g, x) in enumerate(zip(grads, diff_inputs)):
            if g is None:
                continue
            if g._shape != x._shape:
                sizes_ok = False
            elif g._dtype is not x._dtype:
                types_ok = False
            if g.numel() == x.numel():
                mats[i][:, j] = g.detach().reshape(-1)._values()
    return [_matrix(m, x._dtype) for m, x in zip(mats, diff_inputs)], sizes_ok, types_ok


def _max_abs_diff(a: Tensor, b: Tensor) -> float:
    if a.numel() == 0:
        return 0.0
    with no_grad():
        return float((a.to(dt.float64) - b.to(dt.float64)).abs().max().item())


def _analytical_jacobian(
    inputs: tuple[Any, ...],
    output: Tensor,
    nondet_tol: float,
    check_grad_dtypes: bool,
    grad_outputs: list[Tensor] | None = None,
) -> list[Tensor]:
    """Rows of d output / d inputs, computed twice to detect non-reentrant backwards."""
    diff = [t for _, t in _diff_inputs(inputs)]
    if grad_outputs is None:
        grad_outputs = [_one_hot(output, j) for j in range(output.numel())]
    cols1 = [_vjp(output, diff, g) for g in grad_outputs]
    cols2 = [_vjp(output, diff, g) for g in grad_outputs]
    jac1, sizes_ok, types_ok = _stack_columns(cols1, diff, len(grad_outputs))
    jac2, _, _ = _stack_columns(cols2, diff, len(grad_outputs))
    reentrant = all(_max_abs_diff(a, b) <= nondet_tol for a, b in zip(jac1, jac2))
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same "
            "input and grad_output multiple times gives different values, "
            "although analytical gradient matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG
        )
    return jac1


def get_analytical_jacobian(inputs: Any, output: Tensor, nondet_tol: float = 0.0) -> list[Tensor]:
    """`result[i]`: d output / d (i-th input that requires grad), (in_numel, out_numel)."""
    return _analytical_jacobian(_as_tuple(inputs), output, nondet_tol, False)


def _allclose(a: Tensor, n: Tensor, rtol: float, atol: float) -> bool:
    with no_grad():
        return allclose(a.to(dt.float64), n.to(dt.float64), rtol, atol)


def _notallclose_msg(a: Tensor, n: Tensor, out_idx: int, in_idx: int) -> str:
    return (
        f"Jacobian mismatch for output {out_idx:d} with respect to input {in_idx:d},\n"
        f"numerical:{n}\nanalytical:{a}\n"
    )


# ------------------------------------------------------------------------------------------
# extra checks
# ------------------------------------------------------------------------------------------


def _check_no_differentiable_outputs(
    func: Callable[..., Any], inputs: tuple[Any, ...], eps: float
) -> None:
    for per_input in get_numerical_jacobian(func, inputs, eps):
        for n in per_input:
            if n is None:
                continue
            if _max_abs_diff(n, n * 0) > 0:
                raise GradcheckError("Numerical gradient for function expected to be zero")


class UndefinedGradBackward(Node):
    """Passes an undefined (None) gradient on, whatever it receives (PyTorch's UndefinedGrad)."""

    def __init__(self, t: Tensor):
        super().__init__((edge(t),))

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (None,)


def _undefined_grad(t: Tensor) -> Tensor:
    out = _raw(t)
    out.grad_fn = UndefinedGradBackward(t)
    out._requires_grad = True
    out._output_nr = 0
    return out


def _test_undefined_backward(func: Callable[..., Any], inputs: tuple[Any, ...]) -> None:
    """Backward must cope with undefined output gradients (all at once, or one at a time)."""

    diff = [t for _, t in _diff_inputs(inputs)]

    def check(outputs: list[Tensor]) -> None:
        try:
            gin = grad(outputs, diff, [zeros_like(o) for o in outputs], allow_unused=True)
        except RuntimeError as e:
            raise GradcheckError(
                f"Expected backward function to handle undefined output grads. It raised: {e}"
            ) from e
        for g in gin:
            if g is not None and _max_abs_diff(g, g * 0) > 0:
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when "
                    "all output grads are undefined or zero."
                )

    first = _differentiable_outputs(_as_tuple(func(*inputs)))
    check([_undefined_grad(o) for o in first])
    if len(first) > 1:
        for k in range(len(first)):
            outs = _differentiable_outputs(_as_tuple(func(*inputs)))
            check([_undefined_grad(o) if i == k else o for i, o in enumerate(outs)])


def _test_backward_mul_by_grad_output(outputs: tuple[Tensor, ...], inputs: tuple[Any, ...]) -> None:
    diff = [t for _, t in _diff_inputs(inputs)]
    gin = grad(
        outputs, diff, [zeros_like(o) for o in outputs], retain_graph=True, allow_unused=True
    )
    for g, x in zip(gin, diff):
        if g is None:
            continue
        if _max_abs_diff(g, g * 0) > 0:
            raise GradcheckError("backward not multiplied by grad_output")
        if g._dtype is not x._dtype:
            raise GradcheckError("grad is incorrect type")
        if g._shape != x._shape:
            raise GradcheckError("grad is incorrect size")


def _test_batched_grad(
    inputs: tuple[Any, ...], output: Tensor, out_idx: int, rtol: float, atol: float
) -> None:
    """`is_grads_batched=True` must equal one backward per grad_output."""

    diff = [t for _, t in _diff_inputs(inputs)]
    gen = Generator(4321 + out_idx)  # private: the user's RNG stream is left alone
    with no_grad():
        gos = [rand(output._shape, dtype=output._dtype, generator=gen) for _ in range(2)]
        batched_go = stack(gos)
    expected = [grad(output, diff, g, retain_graph=True, allow_unused=True) for g in gos]
    got = grad(
        output, diff, batched_go, retain_graph=True, allow_unused=True, is_grads_batched=True
    )
    for i, g in enumerate(got):
        for b in range(2):
            e = expected[b][i]
            if e is None and g is None:
                continue
            gb = g[b] if g is not None else None
            if e is None or gb is None or not _allclose(gb, e, rtol, atol):
                raise GradcheckError(
                    f"While computing batched gradients, got: {g}\n\n"
                    f"Expected: the per-sample gradients {e} (output "
                    f"{out_idx}, input {i}, sample {b})"
                )


# ------------------------------------------------------------------------------------------
# slow and fast mode
# ------------------------------------------------------------------------------------------


def _slow_gradcheck(
    func: Callable[..., Any],
    inputs: tuple[Any, ...],
    func_out: tuple[Any, ...],
    outputs: tuple[Tensor, ...],
    eps: float,
    rtol: float,
    atol: float,
    check_grad_dtypes: bool,
    nondet_tol: float,
) -> None:
    if not outputs:
        _check_no_differentiable_outputs(func, inputs, eps)
        return
    numerical = get_numerical_jacobian(func, inputs, eps)  # [input][output]
    diff_positions = [
        k for k, o in enumerate(func_out) if isinstance(o, Tensor) and o._requires_grad
    ]
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobian(inputs, o, nondet_tol, check_grad_dtypes)
        for j, a in enumerate(analytical):
            n = numerical[j][diff_positions[i]]
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_notallclose_msg(a, n, i, j))


def _random_unit(n: int, dtype: dt.DType, generator: Any) -> Tensor:
    with no_grad():
        v = rand(max(n, 1), generator=generator, dtype=dt.float64)[:n]
        if n:
            v = v / v.norm()
        return v.to(dtype)


def _fast_gradcheck(
    func: Callable[..., Any],
    inputs: tuple[Any, ...],
    func_out: tuple[Any, ...],
    outputs: tuple[Tensor, ...],
    eps: float,
    rtol: float,
    atol: float,
    check_grad_dtypes: bool,
    nondet_tol: float,
) -> None:
    """Compare v^T (J u) by finite differences with (v^T J) u by backward, for random u, v."""

    gen = Generator(0)
    diff = _diff_inputs(inputs)
    all_u = [_random_unit(x.numel(), x._dtype, gen) for _, x in diff]
    all_v = [_random_unit(o.numel(), o._dtype, gen) for o in outputs]
    if not outputs:
        _check_no_differentiable_outputs(func, inputs, eps)
        return
    diff_positions = [
        k for k, o in enumerate(func_out) if isinstance(o, Tensor) and o._requires_grad
    ]
    # numerical: J u for each input, then v . (J u) for each output
    numerical: list[list[Tensor]] = []
    for (_, x), u in zip(diff, all_u):
        raw = _raw(x)
        with no_grad():
            step = (u * eps).reshape(x._shape)
            orig = raw.clone()
            minus, plus = orig - step, orig + step
        outa, outb = _perturbed_outputs(func, inputs, raw, minus, plus)
        row = []
        for k, v in zip(diff_positions, all_v):
            ju = _central_difference(outa[k], outb[k], eps)
            with no_grad():
                row.append((ju.reshape(-1).to(dt.float64) * v.to(dt.float64)).sum())
        numerical.append(row)
    for j_out, (o, v) in enumerate(zip(outputs, all_v)):
        vjs = _analytical_jacobian(
            inputs, o, nondet_tol, check_grad_dtypes, grad_outputs=[v.reshape(o._shape)]
        )
        for i_in, (vj, u) in enumerate(zip(vjs, all_u)):
            with no_grad():
                a = (vj.reshape(-1).to(dt.float64) * u.to(dt.float64)).sum()
                sum_u = float(u.sum().item()) if u.numel() else 0.0
                sum_v = float(v.sum().item()) if v.numel() else 0.0
            n = numerical[i_in][j_out]
            if not _allclose(a, n, rtol, atol * sum_u * sum_v):
                detail = _slow_mode_detail(
                    func, inputs, o, i_in, diff_positions[j_out], rtol, atol, eps
                )
                raise GradcheckError(_notallclose_msg(a, n, j_out, i_in) + detail)


def _slow_mode_detail(
    func: Callable[..., Any],
    inputs: tuple[Any, ...],
    output: Tensor,
    in_idx: int,
    out_pos: int,
    rtol: float,
    atol: float,
    eps: float,
) -> str:
    slow_n = get_numerical_jacobian(func, inputs, eps)[in_idx][out_pos]
    slow_a = _analytical_jacobian(inputs, output, float("inf"), False)[in_idx]
    msg = (
        "\nThe above quantities relating the numerical and analytical jacobians are "
        "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for "
        "more background \nabout fast mode. Below, we recompute numerical and analytical "
        "jacobians in slow mode:\n\n"
        f"Numerical:\n {slow_n}\nAnalytical:\n{slow_a}\n\n"
        f"The max per-element difference (slow mode) is: {_max_abs_diff(slow_n, slow_a)}.\n"
    )
    if _allclose(slow_a, slow_n, rtol, atol):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Check `func`'s gradients w.r.t. inputs with requires_grad against finite differences.

    `check_backward_ad`: reverse-mode Jacobians (default); `check_forward_ad`: forward-mode
    Jacobians (`autograd.forward_ad`, one JVP per input element) against the same finite
    differences; `check_batched_forward_grad`: JVPs of two tangents under `func.vmap` equal
    one JVP each. Complex inputs and outputs are checked as their real and imaginary parts
    (`view_as_real`), which checks PyTorch's convention for complex gradients (conjugate
    Wirtinger). `masked` is accepted and ignored (llgrad has no sparse tensors). Returns
    True, or raises GradcheckError (returns False with raise_exception=False).
    """
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True"
        )
    try:
        return _gradcheck(
            func,
            inputs,
            eps=eps,
            atol=atol,
            rtol=rtol,
            nondet_tol=nondet_tol,
            check_undefined_grad=check_undefined_grad,
            check_grad_dtypes=check_grad_dtypes,
            check_batched_grad=check_batched_grad,
            check_backward_ad=check_backward_ad,
            fast_mode=fast_mode,
            check_forward_ad=check_forward_ad,
            check_batched_forward_grad=check_batched_forward_grad,
        )
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float,
    atol: float,
    rtol: float,
    nondet_tol: float,
    check_undefined_grad: bool,
    check_grad_dtypes: bool,
    check_batched_grad: bool,
    check_backward_ad: bool,
    fast_mode: bool,
    check_forward_ad: bool = False,
    check_batched_forward_grad: bool = False,
) -> bool:
    tupled = _as_tuple(inputs)
    _check_inputs(tupled)
    func_out = _as_tuple(func(*tupled))
    if _has_complex(tupled, func_out):
        func, tupled = _realified(func, tupled)
        func_out = _as_tuple(func(*tupled))
    if check_forward_ad:
        _check_forward_ad(func, tupled, eps, rtol, atol)
    if check_batched_forward_grad:
        _check_batched_forward_grad(func, tupled, rtol, atol)
    outputs = _differentiable_outputs(func_out)
    if check_backward_ad:
        checker = _fast_gradcheck if fast_mode else _slow_gradcheck
        checker(func, tupled, func_out, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    if check_batched_grad:
        for k, o in enumerate(outputs):
            _test_batched_grad(tupled, o, k, rtol, atol)
    if check_backward_ad and outputs:
        _test_backward_mul_by_grad_output(outputs, tupled)
        if check_undefined_grad:
            _test_undefined_backward(func, tupled)
    return True


def gradgradcheck(
    func: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """gradcheck of `(inputs, grad_outputs) -> autograd.grad(func(inputs), inputs,
    grad_outputs, create_graph=True)`: second derivatives against finite differences,
    by reverse mode over the backward (`check_rev_over_rev`, default) and/or forward mode
    over it (`check_fwd_over_rev`). `masked` is accepted and ignored (no sparse tensors)."""
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_undefined_grad=True requires check_rev_over_rev to be True"
        )
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outs = _differentiable_outputs(_as_tuple(func(*tupled_inputs)))
        tupled_grad_outputs = tuple(
            _random_grad_output(o, k, gen_non_contig_grad_outputs) for k, o in enumerate(outs)
        )
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_idx = {
        i for i, x in enumerate(tupled_inputs) if isinstance(x, Tensor) and x._requires_grad
    }
    diff_go_idx = {
        i for i, x in enumerate(tupled_grad_outputs) if isinstance(x, Tensor) and x._requires_grad
    }

    def new_func(*args: Any) -> tuple[Tensor, ...]:
        input_args = tuple(
            x.requires_grad_() if i in diff_input_idx else x
            for i, x in enumerate(args[: len(args) - num_outputs])
        )
        outputs = _differentiable_outputs(_as_tuple(func(*input_args)))
        gos = tuple(
            x.requires_grad_() if i in diff_go_idx else x
            for i, x in enumerate(args[len(args) - num_outputs :])
        )
        diff_args = tuple(x for i, x in enumerate(input_args) if i in diff_input_idx)
        grad_inputs = grad(outputs, diff_args, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grad_inputs if g is not None)

    ok = True
    if check_fwd_over_rev:
        ok = gradcheck(
            new_func,
            tupled_inputs + tupled_grad_outputs,
            eps=eps,
            atol=atol,
            rtol=rtol,
            raise_exception=raise_exception,
            nondet_tol=nondet_tol,
            check_undefined_grad=False,
            check_grad_dtypes=check_grad_dtypes,
            check_forward_ad=True,
            check_backward_ad=False,
            fast_mode=fast_mode,
        )
    if check_rev_over_rev:
        ok = ok and gradcheck(
            new_func,
            tupled_inputs + tupled_grad_outputs,
            eps=eps,
            atol=atol,
            rtol=rtol,
            raise_exception=raise_exception,
            nondet_tol=nondet_tol,
            check_undefined_grad=check_undefined_grad,
            check_grad_dtypes=check_grad_dtypes,
            check_batched_grad=check_batched_grad,
            fast_mode=fast_mode,
        )
    return ok


def _random_grad_output(o: Tensor, k: int, noncontiguous: bool) -> Tensor:
    """Uniform in [-1, 1), like PyTorch's make_tensor, from a fixed private generator."""

    gen = Generator(1234 + k)
    d = o._dtype if _is_float(o) else dt.float64
    if d.is_complex:
        part = dt.float64 if d is dt.complex128 else dt.float32
        with no_grad():
            pairs = stack([rand(o._shape, generator=gen, dtype=part) * 2 - 1 for _ in range(2)], -1)
            t = view_as_complex(pairs)
        return t.requires_grad_(True)
    with no_grad():
        if noncontiguous and o.ndim >= 2:
            shape = tuple(reversed(o._shape))
            t = rand(shape, generator=gen, dtype=d) * 2 - 1
            t = permute(t, tuple(reversed(range(o.ndim))))
        else:
            t = rand(o._shape, generator=gen, dtype=d) * 2 - 1
    return t.requires_grad_(True)


# ------------------------------------------------------------------------------------------
# complex inputs and outputs; forward mode
# ------------------------------------------------------------------------------------------


def _has_complex(inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> bool:
    return any(
        isinstance(t, Tensor) and t._requires_grad and t._dtype.is_complex for t in inputs
    ) or any(isinstance(o, Tensor) and o._dtype.is_complex for o in outputs)


def _realified(
    func: Callable[..., Any], inputs: tuple[Any, ...]
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """`func` over real tensors: each complex input that requires grad becomes a real leaf
    (..., 2) read through `view_as_complex`, and complex outputs are returned through
    `view_as_real`. Its real Jacobian is checked in place of the complex one."""

    positions = {
        i
        for i, t in enumerate(inputs)
        if isinstance(t, Tensor) and t._requires_grad and t._dtype.is_complex
    }
    with no_grad():
        real_inputs = tuple(
            view_as_real(t.detach()).clone().requires_grad_(True) if i in positions else t
            for i, t in enumerate(inputs)
        )

    def real_func(*args: Any) -> tuple[Any, ...]:
        args = tuple(view_as_complex(a) if i in positions else a for i, a in enumerate(args))
        outs = _as_tuple(func(*args))
        return tuple(
            view_as_real(o) if isinstance(o, Tensor) and o._dtype.is_complex else o for o in outs
        )

    return real_func, real_inputs


def _forward_columns(
    func: Callable[..., Any], inputs: tuple[Any, ...], index: int, tangent: Tensor
) -> list[Tensor | None]:
    """The output tangents of `func` for `tangent` on input `index` (forward mode)."""

    with fwAD.dual_level():
        args = list(inputs)
        args[index] = fwAD.make_dual(inputs[index].detach(), tangent)
        outs = _as_tuple(func(*args))
        result: list[Tensor | None] = []
        for o in outs:
            if not _is_float(o):
                result.append(None)
                continue
            t = fwAD.unpack_dual(o).tangent
            with no_grad():
                result.append(zeros_like(o).detach() if t is None else t.detach().clone())
    return result


def _check_forward_ad(
    func: Callable[..., Any], inputs: tuple[Any, ...], eps: float, rtol: float, atol: float
) -> None:
    """Forward-mode Jacobians (one JVP per input element) against finite differences."""
    numerical = get_numerical_jacobian(func, inputs, eps)  # [input][output]
    for j, (i, x) in enumerate(_diff_inputs(inputs)):
        n_in = x.numel()
        rows: list[np.ndarray | None] | None = None
        for e in range(n_in):
            cols = _forward_columns(func, inputs, i, _one_hot(x, e))
            if rows is None:
                rows = [
                    None if c is None else np.zeros((n_in, c.numel()), _np_dtype(c._dtype))
                    for c in cols
                ]
            for k, c in enumerate(cols):
                if c is not None and rows[k] is not None:
                    rows[k][e, :] = c.reshape(-1)._values()
        for k, n in enumerate(numerical[j]):
            if n is None or rows is None or rows[k] is None:
                continue
            a = _matrix(rows[k], n._dtype)
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(
                    f"Jacobian computed with forward mode mismatch for output "
                    f"{k:d} with respect to input {j:d},\n"
                    f"numerical:{n}\nanalytical:{a}\n"
                )


def _check_batched_forward_grad(
    func: Callable[..., Any], inputs: tuple[Any, ...], rtol: float, atol: float
) -> None:
    """JVPs of a batch of two tangents under `vmap` equal one JVP per tangent."""
    from ..transforms import jvp, vmap  # circle: transforms -> autograd -> here

    for i, x in _diff_inputs(inputs):
        gen = Generator(2468 + i)
        with no_grad():
            tangents = [rand(x._shape, dtype=x._dtype, generator=gen) for _ in range(2)]
        primal = x.detach()

        def along(t: Tensor, i: int = i, primal: Tensor = primal) -> tuple[Any, ...]:
            def f(v: Tensor) -> tuple[Any, ...]:
                args = list(inputs)
                args[i] = v
                return tuple(o for o in _as_tuple(func(*args)) if _is_float(o))

            return jvp(f, (primal,), (t,))[1]

        try:
            batched = vmap(along)(stack(tangents))
        except Exception as e:  # noqa: BLE001  (reported as the check's failure)
            raise GradcheckError(
                f"While computing batched forward gradients for input {i}, "
                f"vmap raised {type(e).__name__}: {e}"
            ) from e
        for b, t in enumerate(tangents):
            single = along(t)
            for k, (got, want) in enumerate(zip(_as_tuple(batched), single)):
                if not _allclose(got[b], want, rtol, atol):
                    raise GradcheckError(
                        f"While computing batched forward gradients, got: "
                        f"{got[b]}\n\nExpected: {want} (output {k}, input "
                        f"{i}, sample {b})"
                    )
