"""Eager elementwise dispatch: promotion (`ir.promotion`), broadcasting, one kernel launch.

A call builds (once per op, dtypes and attributes) a scalar DAG with the promotion casts
folded in, picks the kernel for the collapsed rank and stride pattern, and makes one
foreign call. Python scalars travel by value in a small per-thread scratch area (stride
0), so `x * 1.01` neither allocates a tensor nor compiles a kernel per constant.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Sequence

from .._keys import attrs_key
from .._source import define
from ..codegen.elementwise import build_text
from ..ir import dtypes as dt
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.promotion import Operand, can_cast, compute_dtype, promote  # noqa: F401
from ..ir.types import broadcast_shapes
from ..runtime import cache, launch
from ..schedule.elementwise import ElementwiseKernel, Expr, ExprNode, out_dtypes
from ..schedule.layout import broadcast_strides, collapse, contiguous_strides
from ..specialize.elementwise import launch_source
from ..tensor import _DEVICE_STORAGE, Tensor

cache.register_builder(ElementwiseKernel, build_text)

Scalar = bool | int | float | complex


def is_scalar(x: object) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, Tensor)


# --------------------------------------------------------------------------------------
# expressions
# --------------------------------------------------------------------------------------

_exprs: dict[tuple, tuple[Expr, DType]] = {}


def expression(
    op: str,
    stored: tuple[DType, ...],
    computed: tuple[DType, ...],
    attrs: tuple[tuple[str, Any], ...],
) -> tuple[Expr, DType]:
    key = (op, stored, computed, attrs_key(attrs) if attrs else ())
    hit = _exprs.get(key)
    if hit is not None:
        return hit
    n = len(stored)
    nodes: list[ExprNode] = []
    refs = []
    for i, (s, c) in enumerate(zip(stored, computed)):
        if s is c:
            refs.append(i)
        else:
            nodes.append(ExprNode("cast", (i,), (("dtype", c),)))
            refs.append(n + len(nodes) - 1)
    nodes.append(ExprNode(op, tuple(refs), attrs))
    expr = Expr(stored, tuple(nodes), (n + len(nodes) - 1,))
    result = (expr, out_dtypes(expr)[0])
    _exprs[key] = result
    return result


# --------------------------------------------------------------------------------------
# scalars by value
# --------------------------------------------------------------------------------------

_FORMAT = {
    "bool": "?",
    "uint8": "B",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
    "complex64": "ff",
    "complex128": "dd",
}
_tls = threading.local()


def _scratch() -> tuple[ctypes.Array, int]:
    try:
        return _tls.scratch
    except AttributeError:
        buf = (ctypes.c_int64 * 16)()
        _tls.scratch = (buf, ctypes.addressof(buf))
        return _tls.scratch


def _pack_scalar(op: str, value: Scalar, d: DType, slot: int) -> int:
    buf, addr = _scratch()
    if isinstance(value, complex) and not d.is_complex:
        if value.imag != 0 and d is not dt.bool_:
            raise RuntimeError(
                f"{op}: value cannot be converted to type {d.name} without overflow: {value!r}"
            )
        value = value.real if d is not dt.bool_ else value != 0
    try:
        if d is dt.bfloat16:
            bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            struct.pack_into("H", buf, 8 * slot, bits & 0xFFFF)
        elif d.kind in "iu":
            if isinstance(value, float):
                value = int(value)
            struct.pack_into(_FORMAT[d.name], buf, 8 * slot, value)
        elif d.is_complex:
            z = complex(value)
            struct.pack_into(_FORMAT[d.name], buf, 8 * slot, z.real, z.imag)
        else:
            struct.pack_into(_FORMAT[d.name], buf, 8 * slot, value)
    except (struct.error, OverflowError):
        raise RuntimeError(
            f"{op}: value cannot be converted to type {d.name} without overflow: {value!r}"
        ) from None
    return addr + 8 * slot


# --------------------------------------------------------------------------------------
# launch
# --------------------------------------------------------------------------------------


class Plan:
    """Everything about a call that depends only on dtypes, shapes and strides."""

    __slots__ = (
        "kernel",
        "out_shape",
        "out_dtype",
        "template",
        "ptr_slots",
        "scalar_dtypes",
        "work",
        "out_strides",
        "packer",
        "serial",
        "launch",
    )

    def __init__(
        self,
        kernel: cache.Kernel,
        out_shape: tuple[int, ...],
        out_dtype: DType,
        template: list[int],
        ptr_slots: list[int],
        scalar_dtypes: list[DType],
        work: int,
    ):
        self.kernel = kernel
        self.out_shape = out_shape
        self.out_dtype = out_dtype
        self.template = template
        self.ptr_slots = ptr_slots  # where operand pointers go (output first)
        self.scalar_dtypes = scalar_dtypes  # per operand: the dtype a scalar is packed as
        self.work = work

        self.out_strides = contiguous_strides(out_shape)
        self.packer = launch.packer(len(template))
        self.serial = work < launch.PARALLEL_MIN_WORK  # one thread, no splitting
        self.launch: Any = None  # see `_tensor_launch` (False: not made for this plan)


_plans: dict[tuple, Plan] = {}
# a number's dtype, and so a plan, can follow the default dtype
dt.on_default_dtype_change(_plans.clear)
_PLAN_LIMIT = 8192


def _key(
    op: str, operands: Sequence[Any], attrs: dict[str, Any] | None, out: Tensor | None
) -> tuple:
    parts: list[Any] = [
        op,
        attrs_key(attrs) if attrs else None,
        out._lkey if out is not None else None,
    ]
    for o in operands:
        parts.append(o._lkey if isinstance(o, Tensor) else type(o))
    if out is not None:
        parts.append(_in_place(operands, out))
    return tuple(parts)


def _in_place(operands: Sequence[Any], out: Tensor | None) -> tuple[int, ...]:
    """The operands that are `out` itself (see `ElementwiseKernel.in_place`)."""
    return () if out is None else tuple(i for i, o in enumerate(operands) if o is out)


def run(
    op: str, operands: Sequence[Any], attrs: dict[str, Any] | None = None, out: Tensor | None = None
) -> Tensor:
    """Run elementwise `op` on tensors and Python scalars; returns (or fills) `out`."""
    try:
        key = _key(op, operands, attrs, out)
        plan = _plans.get(key)
    except TypeError:  # an unhashable attribute: let the slow path explain
        key, plan = None, None
    if plan is None:
        plan = _plan(op, operands, attrs, out)
        if key is not None:
            if len(_plans) >= _PLAN_LIMIT:
                _plans.clear()
            _plans[key] = plan
    return launch_plan(op, plan, operands, out)


def launch_plan(op: str, plan: Plan, operands: Sequence[Any], out: Tensor | None = None) -> Tensor:
    """Run `plan` (made for operands of these layouts) on `operands`: into `out`, or a new
    tensor; `op` names the call in errors."""
    if out is None:
        out = Tensor._empty(plan.out_shape, plan.out_dtype, plan.out_strides)
    if plan.kernel is None:
        return out
    go = plan.launch
    if go is None:
        go = plan.launch = _tensor_launch(op, plan, operands)
    if go and go(out, operands):
        return out
    args = plan.template.copy()
    slots = plan.ptr_slots
    args[slots[0]] = out._ptr
    k = 0
    for i, o in enumerate(operands):
        if isinstance(o, Tensor):
            args[slots[i + 1]] = o._ptr
        else:
            d = plan.scalar_dtypes[i]
            args[slots[i + 1]] = _pack_scalar(op, o, d, k)
            k += 2 if d is dt.complex128 else 1  # slots are 8 bytes
    if plan.serial and not launch.recording():
        buf, addr = launch.block()
        try:
            plan.packer.pack_into(buf, 0, *args)
        except struct.error:
            raise RuntimeError(f"{op}: {_NO_MEMORY}") from None
        plan.kernel.fn(addr)
    else:
        launch.call_split(plan.kernel, args, plan.work)
    return out


_NO_MEMORY = "an operand has no memory (a traced tensor reached eager execution)"


_SCALAR_FORMATS = {d: _FORMAT[d] for d in ("float32", "float64")}  # packed inline


def _tensor_launch(op: str, plan: Plan, operands: Sequence[Any]) -> Any:
    """For a one-thread plan (the key fixes which operands are tensors and which are
    numbers, so every call of the plan has the same pattern): generated source that packs
    the plan's constant argument template with the pointers in place, and a float32 or
    float64 number into this thread's scalar slots, and makes the foreign call, instead
    of copying the template and looping over the operands. It returns False, having done
    nothing, while kernels are being recorded or when a number does not pack (the general
    path then raises its error). False (no launch) for other plans, e.g. with an integer
    or complex scalar slot."""
    return _generate_launch(op, plan, operands, direct=False)


def direct_launch(op: str, plan: Plan, operands: Sequence[Any], bind_numbers: bool = False) -> Any:
    """`_tensor_launch`'s code as a whole call: `direct(*operands)` allocates the output,
    packs, calls and returns the output, or returns None having done nothing (kernels
    being recorded, a number that does not pack). None when the plan has no such launch.
    For `functions.fastpath`, which decides when a call may skip the general path. With
    `bind_numbers`, the numbers among `operands` are constants of the function, which
    takes the tensors only (`tape.fused`: a rule's numbers belong to its key)."""
    if plan.kernel is None:
        return None
    return _generate_launch(op, plan, operands, direct=True, bind_numbers=bind_numbers) or None


def _generate_launch(
    op: str, plan: Plan, operands: Sequence[Any], direct: bool, bind_numbers: bool = False
) -> Any:
    if not plan.serial:
        return False
    tensor = [isinstance(o, Tensor) for o in operands]
    formats = [
        None if t else _SCALAR_FORMATS.get(d.name) for t, d in zip(tensor, plan.scalar_dtypes)
    ]
    if any(not t and f is None for t, f in zip(tensor, formats)):
        return False  # (a number the launch does not pack inline)
    consts: dict[str, Any] = {}
    make: list[str] = []
    if direct:  # the output's allocation and fields, written out here
        make, consts = Tensor._empty_source(plan.out_shape, plan.out_dtype, plan.out_strides, "out")
    source = launch_source(
        plan.template, plan.ptr_slots, tensor, formats, direct, bind_numbers, make
    )
    if source is None:
        return False
    if bind_numbers:
        consts.update({f"a{i}": o for i, o in enumerate(operands) if not tensor[i]})
    consts.update(
        {
            "recording": launch._recording,
            "block": launch.block,
            "struct": struct,
            "pack": plan.packer.pack_into,
            "fn": plan.kernel.fn,
            "NO_MEMORY": _NO_MEMORY,
            "OP": op,
            "scratch": _scratch,
            "spack": struct.pack_into,
        }
    )
    kind = "direct" if direct else "launch"
    return define(source, f"<llgrad eager {kind} {op}>", consts, "direct" if direct else "go")


def _plan(
    op: str, operands: Sequence[Any], attrs: dict[str, Any] | None, out: Tensor | None
) -> Plan:
    opdef = registry.get(op)
    norm = opdef.normalize_attrs(attrs or {})
    for o in operands:
        if not isinstance(o, Tensor) and not is_scalar(o):
            raise TypeError(f"{op}: expected Tensor or number operands, got {type(o).__name__}")
    computed = compute_dtype(opdef, operands)
    stored = tuple(o._dtype if isinstance(o, Tensor) else c for o, c in zip(operands, computed))
    expr, result = expression(op, stored, tuple(computed), norm)
    shapes = [o._shape for o in operands if isinstance(o, Tensor)]
    out_shape = broadcast_shapes(*shapes, op=op) if shapes else ()
    if not shapes and out is not None:
        out_shape = out._shape  # all-scalar operands fill the whole output
    out_strides = None
    if out is not None:
        if out._shape != out_shape:
            raise RuntimeError(
                f"{op}: output with shape {list(out._shape)} doesn't match the "
                f"broadcast shape {list(out_shape)}"
            )
        if not can_cast(result, out._dtype):
            raise RuntimeError(
                f"{op}: result type {result.name} can't be cast to the "
                f"desired output type {out._dtype.name}"
            )
        if result is not out._dtype:
            last = len(expr.in_dtypes) + len(expr.nodes) - 1
            expr = Expr(
                expr.in_dtypes,
                expr.nodes + (ExprNode("cast", (last,), (("dtype", out._dtype),)),),
                (last + 1,),
            )
            result = out._dtype
        out_strides = out._strides
    return make_plan(
        expr, out_shape, result, out_strides, operands, computed, _in_place(operands, out)
    )


def make_plan(
    expr: Expr,
    shape: tuple[int, ...],
    out_dtype: DType,
    out_strides: tuple[int, ...] | None,
    operands: Sequence[Any],
    scalar_dtypes: Sequence[DType],
    in_place: tuple[int, ...] = (),
) -> Plan:
    """`in_place`: the operands that are the output itself (`ElementwiseKernel.in_place`)."""
    n = 1
    for s in shape:
        n *= s
    strides = [out_strides if out_strides is not None else contiguous_strides(shape)]
    for o in operands:
        if isinstance(o, Tensor):
            strides.append(broadcast_strides(o._shape, o._strides, shape))
        else:
            strides.append((0,) * len(shape))
    if n == 0:
        return Plan(None, shape, out_dtype, [], [], list(scalar_dtypes), 0)
    cshape, cstrides = collapse(shape, strides)
    rank = len(cshape)
    inner = tuple(st[-1] if st[-1] in (0, 1) else None for st in cstrides)
    kernel = cache.get(ElementwiseKernel(expr, rank, inner, in_place))
    template = [0, cshape[0], *cshape[1:]]
    ptr_slots = []
    for st in cstrides:
        ptr_slots.append(len(template))
        template.append(0)
        template.extend(st)
    return Plan(kernel, shape, out_dtype, template, ptr_slots, list(scalar_dtypes), n)


# ops whose value is exact (no rounding): a chain of them in one kernel gives the bits
# of the separate kernels
EXACT_OPS = frozenset(
    {
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "logical_and",
        "logical_or",
        "logical_not",
        "where",
    }
)


# chains of rounding ops whose one kernel still gives the separate kernels' bits: a
# product of a difference, `(a - b) * c` (each op rounds at its result, as alone: LLVM
# contracts a multiply into a following add or subtract only, and the reassociation flag
# alone does not distribute the product)
ROUNDING_CHAINS = frozenset({("sub", "mul")})


def chain_plan(
    steps: Sequence[tuple[str, tuple[int, ...]]], operands: Sequence[Tensor]
) -> Plan | None:
    """One plan for a chain of exact elementwise ops on tensors (or one of
    `ROUNDING_CHAINS`), each step `(op, args)` reading operands (`args` 0..n-1) and earlier
    steps (n, n+1, ...), with the promotion casts each op adds when run alone
    (`expression`); the last step is the result. The same values as the ops run one by
    one (each is exact, or rounds as it does alone). None when a step is not in
    `EXACT_OPS` (outside `ROUNDING_CHAINS`) or the result is empty."""
    exact = tuple(op for op, _ in steps) not in ROUNDING_CHAINS
    n = len(operands)
    values: list[tuple[DType, tuple[int, ...], int]] = [
        (o._dtype, o._shape, i) for i, o in enumerate(operands)
    ]
    nodes: list[ExprNode] = []
    for op, args in steps:
        if exact and op not in EXACT_OPS:
            return None
        ins = [values[a] for a in args]
        computed = compute_dtype(registry.get(op), [Operand(d, sh) for d, sh, _ in ins])
        sub, result = expression(op, tuple(d for d, _, _ in ins), tuple(computed), ())
        local = [ref for _, _, ref in ins]
        for node in sub.nodes:
            nodes.append(ExprNode(node.op, tuple(local[x] for x in node.args), node.attrs))
            local.append(n + len(nodes) - 1)
        shape = broadcast_shapes(*(sh for _, sh, _ in ins), op=op)
        values.append((result, shape, local[sub.outputs[0]]))
    out_dtype, out_shape, ref = values[-1]
    if any(s == 0 for s in out_shape):
        return None
    expr = Expr(tuple(o._dtype for o in operands), tuple(nodes), (ref,))
    return make_plan(expr, out_shape, out_dtype, None, operands, [o._dtype for o in operands])


def scaled_add_into(dst: Tensor, y: Tensor, alpha: float) -> Tensor:
    """`dst += alpha * y` in one kernel (an optimizer's `p.add_(g, alpha=-lr)`), for
    float32/float64 `dst` and a `y` of its dtype and shape; `alpha` is packed in that
    dtype, as `y * alpha` would pack it."""
    d = dst._dtype
    key = ("scaled_add", dst._lkey, y._lkey)
    plan = _plans.get(key)
    if plan is None:
        expr = Expr((d, d, d), (ExprNode("mul", (1, 2)), ExprNode("add", (0, 3))), (4,))
        plan = make_plan(expr, dst._shape, d, dst._strides, [dst, y, alpha], [d, d, d], (0,))
        if len(_plans) >= _PLAN_LIMIT:
            _plans.clear()
        _plans[key] = plan
    if plan.kernel is not None:
        args = plan.template.copy()
        slots = plan.ptr_slots
        args[slots[0]], args[slots[1]], args[slots[2]] = dst._ptr, dst._ptr, y._ptr
        args[slots[3]] = _pack_scalar("add_", alpha, d, 0)
        launch.call_split(plan.kernel, args, plan.work)
    return dst


def copy_into(dst: Tensor, src: Tensor | Scalar) -> Tensor:
    """`dst[...] = src` with broadcasting and dtype conversion, in one kernel (a GPU
    kernel when `dst` is in CUDA device memory)."""
    if dst._storage.__class__ is _DEVICE_STORAGE[0]:
        from .cuda import copy_into as device_copy  # circle: eager.cuda -> compiler.api -> here

        return device_copy(dst, src)
    if isinstance(src, Tensor) and src._storage.__class__ is _DEVICE_STORAGE[0]:
        from .cuda import download  # circle: eager.cuda -> compiler.api -> here

        src = download(src)
    d = src._dtype if isinstance(src, Tensor) else dst._dtype
    if (
        isinstance(src, Tensor)
        and src._shape != dst._shape
        and broadcast_shapes(src._shape, dst._shape, op="copy_") != dst._shape
    ):
        raise RuntimeError(
            f"copy_: source of shape {list(src._shape)} cannot be "
            f"broadcast to destination shape {list(dst._shape)}"
        )
    key = ("copy_", dst._lkey, src._lkey if isinstance(src, Tensor) else (type(src), d))
    plan = _plans.get(key)
    if plan is None:
        nodes = () if d is dst._dtype else (ExprNode("cast", (0,), (("dtype", dst._dtype),)),)
        expr = Expr((d,), nodes, (1 if nodes else 0,))
        plan = make_plan(expr, dst._shape, dst._dtype, dst._strides, [src], [d])
        if len(_plans) >= _PLAN_LIMIT:
            _plans.clear()
        _plans[key] = plan
    if plan.kernel is not None:
        args = plan.template.copy()
        args[plan.ptr_slots[0]] = dst._ptr
        args[plan.ptr_slots[1]] = (
            src._ptr if isinstance(src, Tensor) else _pack_scalar("copy_", src, d, 0)
        )
        launch.call_split(plan.kernel, args, plan.work)
    if copy_log is not None:
        copy_log.append((dst, src, plan))
    return dst


# while a forward is recorded for replay (`eager.views.copy_replay`): every `copy_into`
# call as (dst, src, plan)
copy_log: list[tuple[Tensor, Any, Plan]] | None = None
