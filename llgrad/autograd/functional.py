"""Higher-level derivatives: `jacobian`, `hessian`, `vjp`, `jvp`, `hvp`, `vhp`.

All are built from `autograd.grad`, as PyTorch's `torch.autograd.functional` is:
- `jvp` and `hvp` use the double-backward trick (the vjp is linear in its grad_output,
  so differentiating it w.r.t. a dummy grad_output gives the Jacobian-vector product);
- `jacobian` takes one vjp per output element, or one batched vjp (`vectorize=True`,
  through `is_grads_batched`); with `strategy="forward-mode"` it takes one jvp per input
  element instead (llgrad has no forward-mode AD, so the jvp is the double-vjp one).
Return structures match PyTorch: a Tensor for a Tensor input/output, tuples otherwise;
`jacobian(...)[i][j]` has shape `outputs[i].shape + inputs[j].shape`.
"""

from __future__ import annotations

from typing import Any, Callable

from ..dispatch.grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from ..tensor import Tensor
from .api import grad
from .gradcheck import _one_hot
from ..functions.creation import zeros_like, eye, zeros
from ..functions.shape import stack

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


# ------------------------------------------------------------------------------------------
# helpers (PyTorch's private helpers, same behaviour and messages)
# ------------------------------------------------------------------------------------------


def _as_tuple(inp: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple[Tensor, ...]]:
    is_tuple = isinstance(inp, tuple)
    tup = inp if is_tuple else (inp,)
    for i, el in enumerate(tup):
        if not isinstance(el, Tensor):
            if is_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or "
                    f"a tuple of Tensors but the value at index {i} has type "
                    f"{type(el)}."
                )
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                f"tuple of Tensors but the given {arg_name} has type {type(el)}."
            )
    return is_tuple, tup


def _tuple_postprocess(res: Any, to_unpack: bool | tuple[bool, bool]) -> Any:
    """Undo `_as_tuple` (one level, or two for nested results such as Jacobians)."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(
    inputs: tuple[Tensor, ...], create_graph: bool, need_graph: bool
) -> tuple[Tensor, ...]:
    """Fresh tensor objects: differentiable views under create_graph, else detached leaves."""
    res = []
    for inp in inputs:
        if create_graph and inp._requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs: Any, create_graph: bool) -> Any:
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v: tuple[Tensor, ...], other: tuple[Tensor, ...], is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v._shape != el_other._shape:
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {el_other.size()} but got {el_v.size()}."
            )


def _check_requires_grad(inputs: tuple[Tensor | None, ...], input_type: str, strict: bool) -> None:
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of "
                f"input {i}. This is not allowed in strict mode."
            )
        if inp._requires_grad:
            continue
        if input_type == "hessian":
            raise RuntimeError(
                f"The hessian of the user-provided function with respect to "
                f"input {i} is independent of the input. This is not allowed in "
                f"strict mode. You should ensure that your function is thrice "
                f"differentiable and that the hessian depends on the inputs."
            )
        if input_type == "jacobian":
            raise RuntimeError(
                f"While computing the hessian, found that the jacobian of the "
                f"user-provided function with respect to input {i} is "
                f"independent of the input. This is not allowed in strict mode. "
                f"You should ensure that your function is twice differentiable "
                f"and that the jacobian depends on the inputs (this would be "
                f"violated by a linear function for example)."
            )
        if input_type == "grad_inputs":
            raise RuntimeError(
                f"The gradient with respect to input {i} is independent of the "
                f"inputs of the user-provided function. This is not allowed in "
                f"strict mode."
            )
        raise RuntimeError(
            f"Output {i} of the user-provided function does not require "
            f"gradients. The outputs must be computed in a differentiable "
            f"manner from the input when running in strict mode."
        )


def _autograd_grad(
    outputs: tuple[Tensor | None, ...],
    inputs: tuple[Tensor, ...],
    grad_outputs: tuple[Tensor | None, ...] | None = None,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    is_grads_batched: bool = False,
) -> tuple[Tensor | None, ...]:
    """`autograd.grad` that skips outputs without a graph and allows unused inputs."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs = []
    new_grad_outputs = []
    for out, g in zip(outputs, grad_outputs):
        if out is not None and out._requires_grad:
            new_outputs.append(out)
            new_grad_outputs.append(g)
    if not new_outputs:
        return (None,) * len(inputs)
    return grad(
        new_outputs,
        inputs,
        new_grad_outputs,
        allow_unused=True,
        create_graph=create_graph,
        retain_graph=retain_graph,
        is_grads_batched=is_grads_batched,
    )


_FILL_MESSAGES = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
    "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
    "grad_outputs when using the double backward trick to compute forward mode "
    "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
    "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
    "{i} in the grad_jacobian. This is not allowed in strict mode as it "
    "prevents from using the double backward trick to replace forward "
    "mode AD.",
}


def _fill_in_zeros(
    grads: tuple[Tensor | None, ...],
    refs: tuple[Tensor, ...],
    strict: bool,
    create_graph: bool,
    stage: str,
) -> tuple[Tensor, ...]:
    """Replace missing gradients by zeros (or raise, in strict mode)."""

    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_FILL_MESSAGES[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g._requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of "
                f"input {i}. This is not allowed in strict mode when "
                f"create_graph=True."
            )
        res.append(g)
    return tuple(res)


# ------------------------------------------------------------------------------------------
# vjp / jvp / vhp / hvp
# ------------------------------------------------------------------------------------------


def vjp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """`(func(inputs), v^T J)`."""
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = _grad_preprocess(ins, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(
            func(*ins), "outputs of the user-provided function", "vjp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, vs = _as_tuple(v, "v", "vjp")
            vs = _grad_preprocess(vs, create_graph=create_graph, need_graph=False)
            _validate_v(vs, outputs, is_outputs_tuple)
        else:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError(
                    "The vector v can only be None if the user-provided function "
                    "returns a single Tensor with a single element."
                )
            vs = None
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(outputs, ins, vs, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, ins, strict, create_graph, "back")
    return _finish(outputs, result, create_graph, is_outputs_tuple, is_inputs_tuple)


def jvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """`(func(inputs), J v)` by the double-backward trick."""

    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jvp")
        ins = _grad_preprocess(ins, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, vs = _as_tuple(v, "v", "jvp")
            vs = _grad_preprocess(vs, create_graph=create_graph, need_graph=False)
            _validate_v(vs, ins, is_inputs_tuple)
        else:
            if len(ins) != 1 or ins[0].numel() != 1:
                raise RuntimeError(
                    "The vector v can only be None if the input to the "
                    "user-provided function is a single Tensor with a single "
                    "element."
                )
            vs = None
        is_outputs_tuple, outputs = _as_tuple(
            func(*ins), "outputs of the user-provided function", "jvp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The vjp is linear in grad_outputs, so their value never enters the result; zeros
        # avoid inf/nan.
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, ins, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, vs, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return (
        _tuple_postprocess(outputs, is_outputs_tuple),
        _tuple_postprocess(result, is_outputs_tuple),
    )


def _scalar_output(
    func: Callable[..., Any], ins: tuple[Tensor, ...], name: str, strict: bool
) -> tuple[bool, tuple[Tensor, ...]]:
    is_outputs_tuple, outputs = _as_tuple(func(*ins), "outputs of the user-provided function", name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single element"
        )
    return is_outputs_tuple, outputs


def _vector_for_inputs(
    v: Any, ins: tuple[Tensor, ...], is_inputs_tuple: bool, name: str, create_graph: bool
) -> tuple[Tensor, ...] | None:
    if v is not None:
        _, vs = _as_tuple(v, "v", name)
        vs = _grad_preprocess(vs, create_graph=create_graph, need_graph=False)
        _validate_v(vs, ins, is_inputs_tuple)
        return vs
    if len(ins) != 1 or ins[0].numel() != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided "
            "function is a single Tensor with a single element."
        )
    return None


def _first_derivative(
    func: Callable[..., Any], inputs: Any, v: Any, name: str, create_graph: bool, strict: bool
) -> tuple:
    """What vhp and hvp start from (under enable_grad): the inputs, the vector, the scalar
    output and its gradient, built with a graph so it can be differentiated again."""
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", name)
    ins = _grad_preprocess(ins, create_graph=create_graph, need_graph=True)
    vs = _vector_for_inputs(v, ins, is_inputs_tuple, name, create_graph)
    is_outputs_tuple, outputs = _scalar_output(func, ins, name, strict)
    jac = _autograd_grad(outputs, ins, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, ins, vs, is_outputs_tuple, outputs, jac


def _finish(
    outputs: Any, result: Any, create_graph: bool, is_outputs_tuple: bool, is_inputs_tuple: bool
) -> tuple[Any, Any]:
    """Detach unless create_graph, and unwrap one-element tuples as the user passed them."""
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return (
        _tuple_postprocess(outputs, is_outputs_tuple),
        _tuple_postprocess(result, is_inputs_tuple),
    )


def vhp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """`(func(inputs), v^T H)` for a scalar function."""
    with enable_grad():
        is_inputs_tuple, ins, vs, is_outputs_tuple, outputs, jac = _first_derivative(
            func, inputs, v, "vhp", create_graph, strict
        )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(jac, ins, vs, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, ins, strict, create_graph, "double_back")
    return _finish(outputs, result, create_graph, is_outputs_tuple, is_inputs_tuple)


def hvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> tuple[Any, Any]:
    """`(func(inputs), H v)` for a scalar function, by the double-backward trick."""

    with enable_grad():
        is_inputs_tuple, ins, vs, is_outputs_tuple, outputs, jac = _first_derivative(
            func, inputs, v, "hvp", create_graph, strict
        )
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in ins)
        double_back = _autograd_grad(jac, ins, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, vs, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, ins, strict, create_graph, "double_back_trick")
    return _finish(outputs, result, create_graph, is_outputs_tuple, is_inputs_tuple)


# ------------------------------------------------------------------------------------------
# jacobian / hessian
# ------------------------------------------------------------------------------------------


def _basis(numels: tuple[int, ...], like: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Rows of the identity of size sum(numels), split per tensor: (total, numel_k) each."""

    total = sum(numels)
    out = []
    start = 0
    for n, t in zip(numels, like):
        out.append(eye(total, dtype=t._dtype)[:, start : start + n].contiguous())
        start += n
    return tuple(out)


def _jacobian_rows(
    outputs: tuple[Tensor, ...], ins: tuple[Tensor, ...], create_graph: bool, strict: bool
) -> tuple[tuple[Tensor, ...], ...]:
    """One vjp per output element; result[i][j]: outputs[i].shape + ins[j].shape."""

    jacobian = []
    for i, out in enumerate(outputs):
        rows: list[list[Tensor]] = [[] for _ in ins]
        flat = out.reshape(-1)
        for j in range(out.numel()):
            vj = _autograd_grad((flat[j],), ins, retain_graph=True, create_graph=create_graph)
            for el_idx, (vj_el, inp) in enumerate(zip(vj, ins)):
                if vj_el is not None:
                    if strict and create_graph and not vj_el._requires_grad:
                        raise RuntimeError(
                            f"The jacobian of the user-provided function is "
                            f"independent of input {i}. This is not allowed in "
                            f"strict mode when create_graph=True."
                        )
                    rows[el_idx].append(vj_el)
                else:
                    if strict:
                        raise RuntimeError(
                            f"Output {i} of the user-provided function is "
                            f"independent of input {el_idx}. This is not "
                            f"allowed in strict mode."
                        )
                    rows[el_idx].append(zeros_like(inp))
        jacobian.append(tuple(_stack_rows(r, out, inp, stack) for r, inp in zip(rows, ins)))
    return tuple(jacobian)


def _stack_rows(
    rows: list[Tensor], out: Tensor, inp: Tensor, stack: Callable[..., Tensor]
) -> Tensor:
    shape = tuple(out._shape) + tuple(inp._shape)
    if not rows:
        return zeros(shape, dtype=inp._dtype)
    return stack(rows, 0).reshape(shape)


def _jacobian_vectorized(
    outputs: tuple[Tensor, ...], ins: tuple[Tensor, ...], create_graph: bool
) -> tuple[tuple[Tensor, ...], ...]:
    """All vjps at once with `is_grads_batched`."""

    numels = tuple(o.numel() for o in outputs)
    total = sum(numels)
    flat_outputs = tuple(o.reshape(-1) for o in outputs)
    grad_outputs = _basis(numels, outputs)
    vj = list(
        _autograd_grad(
            flat_outputs, ins, grad_outputs, create_graph=create_graph, is_grads_batched=True
        )
    )
    for k, v in enumerate(vj):
        if v is None:
            vj[k] = zeros((total,) + tuple(ins[k]._shape), dtype=ins[k]._dtype)
    per_input = []
    for jac_in, inp in zip(vj, ins):
        pieces = []
        start = 0
        for n, out in zip(numels, outputs):
            pieces.append(jac_in[start : start + n].reshape(tuple(out._shape) + tuple(inp._shape)))
            start += n
        per_input.append(pieces)
    return tuple(zip(*per_input))


def _jacobian_forward(
    ins: tuple[Tensor, ...], outputs: tuple[Tensor, ...], create_graph: bool
) -> tuple[tuple[Tensor, ...], ...]:
    """One jvp (double-backward trick) per input element; same layout as reverse mode."""

    grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
    grad_inputs = _autograd_grad(outputs, ins, grad_outputs, create_graph=True)
    columns: list[list[list[Tensor]]] = [[[] for _ in ins] for _ in outputs]
    for j, inp in enumerate(ins):
        for e in range(inp.numel()):
            v = tuple(_one_hot(inp, e) if k == j else zeros_like(x) for k, x in enumerate(ins))
            jv = _autograd_grad(
                grad_inputs, grad_outputs, v, retain_graph=True, create_graph=create_graph
            )
            for i, out in enumerate(outputs):
                columns[i][j].append(jv[i] if jv[i] is not None else zeros_like(out))
    result = []
    for i, out in enumerate(outputs):
        row = []
        for j, inp in enumerate(ins):
            cols = columns[i][j]
            shape_in = tuple(inp._shape)
            if cols:
                m = stack([c.reshape(-1) for c in cols], -1)  # (out_numel, in_numel)
                row.append(m.reshape(tuple(out._shape) + shape_in))
            else:
                row.append(zeros(tuple(out._shape) + shape_in, dtype=inp._dtype))
        result.append(tuple(row))
    return tuple(result)


def jacobian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of `func` at `inputs` (one block per output/input pair)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". '
            "Hint: If your function has more outputs than inputs, "
            '"forward-mode" tends to be more performant. Otherwise, prefer to use '
            '"reverse-mode".'
        )
    if strict and vectorize:
        raise RuntimeError(
            "llgrad.autograd.functional.jacobian: `strict=True` and "
            "`vectorize=True` are not supported together. Please either set "
            "`strict=False` or `vectorize=False`."
        )
    if strategy == "forward-mode" and strict:
        raise RuntimeError(
            "llgrad.autograd.functional.jacobian: `strict=True` and "
            '`strategy="forward-mode"` are not supported together. Please set '
            "`strict=False`."
        )
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
        ins = _grad_preprocess(ins, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(
            func(*ins), "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        if strategy == "forward-mode":
            jac = _jacobian_forward(ins, outputs, create_graph)
        elif vectorize:
            jac = _jacobian_vectorized(outputs, ins, create_graph)
        else:
            jac = _jacobian_rows(outputs, ins, create_graph, strict)
        jac = _grad_postprocess(jac, create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of a scalar function: `hessian(...)[i][j]` is inputs[i].shape +
    inputs[j].shape."""
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp: Tensor) -> Tensor:
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should "
                "contain a single element"
            )
        return out.reshape(())

    def jac_func(*inp: Tensor) -> Any:
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac if isinstance(jac, tuple) else (jac,), "jacobian", strict=strict)
        return jac

    res = jacobian(
        jac_func,
        ins,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))
