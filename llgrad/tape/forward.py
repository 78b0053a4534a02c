"""Forward-mode AD: dual tensors (`make_dual`, `unpack_dual`, `dual_level`), as PyTorch.

A tangent rides on a tensor; each op whose operands carry tangents computes its output's
tangent with the op's Jacobian-vector rule. The rule comes from the registry, without a
second copy of any derivative:
1. the op's own `jvp` when it has one (linear ops apply themselves to the tangent; matmul
   is bilinear);
2. for real elementwise ops, the vjp rule: the Jacobian is diagonal, so `vjp(g=t_i)` for
   input i is exactly `J_i t_i`;
3. otherwise the vjp's transpose: the vjp is linear in g, so `J t = d<vjp(u), t>/du`
   (one extra backward through the vjp rule, recorded with create_graph). With complex
   values the vjp is the transpose of the Jacobian of the real and imaginary parts (a
   complex gradient packs d/dre + i d/dim), not the Jacobian itself, so complex
   elementwise ops come here too, with the real inner product <a, b> = re(conj(a) b).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Sequence

from ..dispatch.grad_mode import enable_grad
from ..ir import registry
from ..ir.registry import ELEMENTWISE
from ..tensor import Tensor
from ..dispatch import ops

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_level = [0]


def active() -> bool:
    return _level[0] > 0


class dual_level:
    """Context manager: tangents made inside are dropped on exit."""

    def __enter__(self) -> int:
        _level[0] += 1
        self._made: list[Tensor] = []
        _stack.append(self._made)
        return _level[0] - 1

    def __exit__(self, *exc: object) -> None:
        for t in _stack.pop():
            t.__dict__.pop("_fw_tangent", None)
        _level[0] -= 1


_stack: list[list[Tensor]] = []


def enter_dual_level() -> int:
    lvl = dual_level()
    _levels.append(lvl)
    return lvl.__enter__()


def exit_dual_level(*, level: int | None = None) -> None:
    _levels.pop().__exit__(None, None, None)


_levels: list[dual_level] = []


def tangent_of(t: Any) -> Tensor | None:
    if isinstance(t, Tensor):
        return t.__dict__.get("_fw_tangent")
    return None


def set_tangent(t: Tensor, tangent: Tensor) -> None:
    t.__dict__["_fw_tangent"] = tangent
    if _stack:
        _stack[-1].append(t)


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    if not active():
        raise RuntimeError("make_dual: no dual level is active; use `with dual_level():`")
    if tangent._shape != tensor._shape:
        raise RuntimeError(
            f"make_dual: expected tangent to have the same shape as primal "
            f"({list(tensor._shape)}), got {list(tangent._shape)}"
        )
    if not (tensor._dtype.is_floating_point or tensor._dtype.is_complex):
        raise ValueError(f"make_dual: expected a floating point primal, got {tensor._dtype.name}")
    reshape = ops.F.shape.reshape

    # a recorded alias, so reverse-mode gradients of the dual still reach `tensor`
    dual = reshape(tensor, tensor._shape, name="AliasBackward0")
    if dual is tensor or tangent_of(dual) is not None:
        dual = Tensor._make(
            tensor._storage,
            tensor._offset,
            tensor._shape,
            tensor._strides,
            tensor._dtype,
            base=tensor._base or tensor,
        )
    set_tangent(dual, tangent.to(tensor._dtype))
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    t = tangent_of(tensor)
    if t is None:
        return UnpackedDualTensor(tensor, None)
    primal = Tensor._make(
        tensor._storage,
        tensor._offset,
        tensor._shape,
        tensor._strides,
        tensor._dtype,
        base=tensor._base,
    )
    primal._requires_grad = tensor._requires_grad
    primal.grad_fn = tensor.grad_fn
    return UnpackedDualTensor(primal, t)


# --------------------------------------------------------------------------------------
# Propagation
# --------------------------------------------------------------------------------------


class _JvpContext:
    """What a rule reads (the same names a vjp rule reads from its node)."""

    def __init__(self, operands: Sequence[Any], output: Tensor, wanted: tuple[bool, ...]):
        self.inputs = tuple(_primal(o) for o in operands)
        self.output = _primal(output)
        self.needs_input_grad = wanted
        self.input_meta = tuple(
            (o._shape, o._dtype) if isinstance(o, Tensor) else None for o in operands
        )
        functions = ops.F

        self.F = functions


def _primal(x: Any) -> Any:
    if isinstance(x, Tensor) and "_fw_tangent" in x.__dict__:
        return unpack_dual(x).primal
    return x


def propagate(op: str, operands: Sequence[Any], attrs: dict[str, Any], out: Tensor) -> None:
    """Attach `out`'s tangent when some operand carries one."""
    if not (out._dtype.is_floating_point or out._dtype.is_complex):
        return  # comparisons, argmax: no tangent
    tangents = [tangent_of(o) for o in operands]
    if all(t is None for t in tangents):
        return
    opdef = registry.get(op)
    if opdef.jvp is not None:
        ctx = _JvpContext(operands, out, tuple(t is not None for t in tangents))
        tangent = opdef.jvp(ctx, tuple(tangents), **attrs)
    elif opdef.group in ELEMENTWISE and opdef.vjp is not None and not _complex(operands, out):
        tangent = _elementwise_jvp(opdef, operands, attrs, out, tangents)
    elif opdef.vjp is not None:
        tangent = _transposed_vjp(opdef, operands, attrs, out, tangents)
    else:
        raise RuntimeError(f"forward-mode AD: '{op}' has no derivative rule")
    if tangent is not None:
        if tangent._dtype is not out._dtype:
            tangent = tangent.to(out._dtype)
        set_tangent(out, tangent)


def _complex(operands: Sequence[Any], out: Tensor) -> bool:
    return out._dtype.is_complex or any(
        isinstance(o, Tensor) and o._dtype.is_complex for o in operands
    )


def _elementwise_jvp(
    opdef: registry.OpDef,
    operands: Sequence[Any],
    attrs: dict[str, Any],
    out: Tensor,
    tangents: list[Tensor | None],
) -> Tensor | None:
    F = ops.F

    total = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        wanted = tuple(k == i for k in range(len(operands)))
        ctx = _JvpContext(operands, out, wanted)
        g = F.expand(t.to(out._dtype), out._shape) if t._shape != out._shape else t.to(out._dtype)
        part = opdef.vjp(ctx, g, **attrs)
        part = part[i] if isinstance(part, tuple) else part
        if part is None:
            continue
        total = part if total is None else F.add(total, part)
    return total


def _transposed_vjp(
    opdef: registry.OpDef,
    operands: Sequence[Any],
    attrs: dict[str, Any],
    out: Tensor,
    tangents: list[Tensor | None],
) -> Tensor | None:
    """`J t` from the vjp (linear in g): differentiate <vjp(u), t> with respect to u."""
    F = ops.F
    from ..autograd.api import grad  # circle: autograd -> autograd.forward_ad -> here

    with enable_grad():
        u = F.zeros(out._shape, dtype=out._dtype, requires_grad=True)
        wanted = tuple(t is not None for t in tangents)
        ctx = _JvpContext(operands, out, wanted)
        parts = opdef.vjp(ctx, u, **attrs)
        parts = parts if isinstance(parts, tuple) else (parts,)
        total = None
        for i, (p, t) in enumerate(zip(parts, tangents)):
            if p is None or t is None:
                continue
            shape = ctx.input_meta[i][0]
            if p._shape != shape:
                p = F.sum_to_size(p, shape)
            term = F.sum(F.real(F.mul(F.conj(p), t.to(p._dtype))))  # re<p, t>
            total = term if total is None else F.add(total, term)
        if total is None or not total._requires_grad:
            return F.zeros(out._shape, dtype=out._dtype)
        (jt,) = grad(total, u, allow_unused=True, materialize_grads=True)
    return jt.detach()
