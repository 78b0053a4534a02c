"""The machinery every LAPACK-backed op of `lg.linalg` shares.

`host_op` runs a computation on NumPy arrays (LAPACK through NumPy and SciPy) and records
ONE autograd node for it, named as PyTorch names it (`LinalgDetBackward0`). The node's
backward is a Python function written with llgrad's own functions, so the gradient is
recorded again under `create_graph=True` (double backward). Forward mode comes from the
same backward: the vjp is linear in the cotangents, so `J t = d<vjp(u), t>/du` (one
extra backward through the rule), unless the op gives its own jvp rule.

Interpreters: a traced value (inside `lg.compile`) raises `GraphBreak` with the user's
line, so that signature runs eagerly; under `vmap` the batch moves in front of the
operands (every primitive here batches over leading dimensions) and the results are
wrapped back.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

import numpy as np

from .. import functions
from ..tape import forward as forward_ad
from ..autograd.api import grad
from ..dispatch.apply import _interpreter_for, interpreters
from ..tape.node import FREED, Node, SavedTensor, edge, node_class
from ..dispatch.grad_mode import _state as _grad_state, enable_grad
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak
from ..transforms.batching import bottom


class LinAlgError(RuntimeError):
    """A linear-algebra failure that depends on the values (a singular matrix, a matrix
    that is not positive-definite, an iteration that did not converge), as
    `torch.linalg.LinAlgError`; a subclass of RuntimeError."""


LinAlgError.__module__ = "llgrad.linalg"


# --------------------------------------------------------------------------------------
# Checks shared by the ops
# --------------------------------------------------------------------------------------


def check_tensor(op: str, x: Any, what: str = "A") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected {what} to be a Tensor, got {type(x).__name__}")
    return x


def check_float(op: str, x: Tensor, what: str = "input") -> None:
    """Floating point or complex, single or double precision (torch's LAPACK dtypes)."""
    d = x._dtype
    if d in (dt.float16, dt.bfloat16):
        raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {_torch_name(d)}")
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError(
            f"{op}: Expected a floating point or complex tensor as {what}. Got {_torch_name(d)}"
        )


def _torch_name(d: dt.DType) -> str:
    return {
        "float16": "Half",
        "bfloat16": "BFloat16",
        "float32": "Float",
        "float64": "Double",
        "complex64": "ComplexFloat",
        "complex128": "ComplexDouble",
        "int64": "Long",
        "int32": "Int",
        "int16": "Short",
        "int8": "Char",
        "uint8": "Byte",
        "bool": "Bool",
    }.get(d.name, d.name)


def check_matrix(op: str, x: Tensor, what: str = "A") -> None:
    if x.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {what} must have at least 2 dimensions.")


def check_square(op: str, x: Tensor, what: str = "A") -> None:
    check_matrix(op, x, what)
    if x._shape[-1] != x._shape[-2]:
        raise RuntimeError(
            f"{op}: {what} must be batches of square matrices, but they are "
            f"{x._shape[-2]} by {x._shape[-1]} matrices"
        )


def square_float(op: str, x: Any, what: str = "A") -> Tensor:
    check_tensor(op, x, what)
    check_square(op, x, what)
    check_float(op, x)
    return x


def same_dtype(op: str, a: Tensor, b: Tensor, an: str = "A", bn: str = "B") -> None:
    if a._dtype is not b._dtype:
        raise RuntimeError(
            f"{op}: Expected {an} and {bn} to have the same dtype, but found "
            f"{an} of type {_torch_name(a._dtype)} and {bn} of type "
            f"{_torch_name(b._dtype)} instead."
        )


def batch_prefix(index: tuple[int, ...], nbatch: int) -> str:
    return (
        f"(Batch element {int(np.ravel_multi_index(index, nbatch))}): "
        if isinstance(nbatch, tuple) and len(nbatch)
        else ""
    )


def first_bad(info: np.ndarray) -> tuple[str, int] | None:
    """(`(Batch element k): ` or "", the info value) of the first nonzero `info`."""
    info = np.asarray(info)
    if not info.any():
        return None
    if info.ndim == 0:
        return ("", int(info)) if int(info) != 0 else None
    flat = info.reshape(-1)
    nz = np.flatnonzero(flat)
    if not len(nz):
        return None
    k = int(nz[0])
    return f"(Batch element {k}): ", int(flat[k])


# --------------------------------------------------------------------------------------
# Small differentiable helpers (llgrad functions only)
# --------------------------------------------------------------------------------------

_F: list[Any] = []  # llgrad.functions, imported on first use (import order)


def _functions() -> Any:
    if not _F:
        _F.append(functions)
    return _F[0]


def mH(x: Tensor) -> Tensor:
    """The conjugate transpose of the last two dimensions."""
    F = _functions()
    t = F.transpose(x, -2, -1)
    return F.conj(t) if t._dtype.is_complex else t


def mT(x: Tensor) -> Tensor:
    F = _functions()
    return F.transpose(x, -2, -1)


def diagonal(x: Tensor, offset: int = 0) -> Tensor:
    """The diagonal of the last two dimensions, as a differentiable gather (a copy)."""
    F = _functions()
    m, n = x._shape[-2], x._shape[-1]
    lead = x._shape[:-2]
    if offset >= 0:
        k = max(0, min(m, n - offset))
        start = offset
    else:
        k = max(0, min(m + offset, n))
        start = -offset * n
    if k == 0:
        return F.zeros(lead + (0,), dtype=x._dtype)
    flat = F.reshape(x, lead + (m * n,))
    stop = start + (k - 1) * (n + 1) + 1
    return flat[(Ellipsis, slice(start, stop, n + 1))]


def diag_embed(v: Tensor, m: int | None = None, n: int | None = None) -> Tensor:
    """Matrices with `v` (..., k) on the diagonal (m x n, default k x k)."""
    F = _functions()
    k = v._shape[-1]
    m = k if m is None else m
    n = k if n is None else n
    eye = F.eye(m, n, dtype=v._dtype)
    if k == min(m, n):
        ext = v
    else:
        ext = v[..., : min(m, n)]
    if n > min(m, n):
        ext = F.cat([ext, F.zeros(ext._shape[:-1] + (n - min(m, n),), dtype=v._dtype)], -1)
    return F.mul(F.unsqueeze(ext, -2), eye)


def eye_like(x: Tensor) -> Tensor:
    F = _functions()
    return F.eye(x._shape[-1], dtype=x._dtype)


def sum_to(g: Tensor, shape: tuple[int, ...], dtype: dt.DType) -> Tensor:
    """A gradient fitted to an input: broadcast dimensions summed, a complex gradient of a
    real input reduced to its real part."""
    F = _functions()
    if g._dtype.is_complex and not dtype.is_complex:
        g = F.real(g)
    if tuple(g._shape) != tuple(shape):
        g = F.sum_to_size(g, shape)
    if g._dtype is not dtype:
        g = g.to(dtype)
    return g


# --------------------------------------------------------------------------------------
# NumPy in and out
# --------------------------------------------------------------------------------------


def values(t: Tensor) -> np.ndarray:
    """The values of `t` for a check on the host (under vmap: every batch element's)."""
    if t.__class__ is Tensor:
        return t._numpy_view()

    return bottom(t)._numpy_view()


def to_numpy(t: Tensor) -> np.ndarray:
    """The values of a plain tensor as a NumPy array (a view where possible)."""
    return t._numpy_view()


_memmove = ctypes.memmove
_addressof = ctypes.addressof
_from_buffer = ctypes.c_char.from_buffer


def from_numpy(a: Any, dtype: dt.DType | None = None) -> Tensor:
    """A new llgrad tensor holding a copy of `a` (contiguous)."""
    if a.__class__ is not np.ndarray:
        a = np.asarray(a)
    if dtype is None:
        dtype = dt.from_numpy(a.dtype)
    elif a.dtype != dtype.np:
        a = a.astype(dtype.np)
    out = Tensor._empty(a.shape, dtype)
    n = a.nbytes
    if n:
        if a.flags.c_contiguous:
            try:  # the bytes as they are: no NumPy view of the new tensor needed
                _memmove(out._ptr, _addressof(_from_buffer(a)), n)
                return out
            except (TypeError, ValueError, BufferError):  # a read-only array
                pass
        np.copyto(out._numpy_view(), a)
    return out


# --------------------------------------------------------------------------------------
# The node
# --------------------------------------------------------------------------------------


class _Ctx:
    """What a backward rule reads: the saved inputs and outputs (unpacked, version
    checked), which inputs need a gradient, and the op's attributes."""

    __slots__ = ("inputs", "outputs", "needs", "attrs", "meta")

    def __init__(
        self,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
        needs: tuple[bool, ...],
        attrs: dict[str, Any],
        meta: Sequence[tuple[tuple[int, ...], dt.DType]],
    ):
        self.inputs, self.outputs, self.needs, self.attrs, self.meta = (
            tuple(inputs),
            tuple(outputs),
            needs,
            attrs,
            tuple(meta),
        )


class _SavedOut(SavedTensor):
    """A saved output of a multi-output node (unpacks with its output number)."""

    __slots__ = ("output_nr",)

    def __init__(self, t: Tensor):
        super().__init__(t, is_output=True)
        self.output_nr = t._output_nr

    def unpack(self, node: Node, op_name: str, index: int) -> Tensor:
        out = super().unpack(node, op_name, index)
        if out.grad_fn is node:
            out._output_nr = self.output_nr
        return out


class LinalgNode(Node):
    """The grad_fn of one LAPACK-backed call: saved inputs and outputs and the rule."""

    __slots__ = ("_saved_in", "_saved_out", "_released", "_rule", "_nout", "_attrs", "_in_meta")

    @property
    def num_outputs(self) -> int:  # type: ignore[override]
        return self._nout

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        return tuple(n is not None for n, _ in self.next_functions)

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        if self._released:
            raise RuntimeError(FREED)
        return tuple(
            s.unpack(self, self.name(), i)
            for i, s in enumerate(self._saved_in + self._saved_out)
            if s is not None
        )

    def release(self) -> None:
        self._released = True
        self._saved_in = self._saved_out = ()

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        if self._released:
            raise RuntimeError(FREED)
        name = self.name()
        ins = [None if s is None else s.unpack(self, name, i) for i, s in enumerate(self._saved_in)]
        outs = [
            None if s is None else s.unpack(self, name, i) for i, s in enumerate(self._saved_out)
        ]
        ctx = _Ctx(ins, outs, self.needs_input_grad, self._attrs, self._in_meta)
        result = self._rule(ctx, list(grads))
        fitted: list[Tensor | None] = []
        for g, (shape, dtype), (fn, _) in zip(result, self._in_meta, self.next_functions):
            fitted.append(None if g is None or fn is None else sum_to(g, shape, dtype))
        return tuple(fitted)


def _traced(xs: Sequence[Any]) -> bool:
    return any(getattr(x, "_ctx", None) is not None for x in xs)


def graph_break(op: str) -> None:
    raise GraphBreak(f"{op} (LAPACK on the host: a documented graph break)", user_location())


def host_op(
    op: str,
    name: str | None,
    inputs: Sequence[Tensor],
    compute: Callable[..., Sequence[Any]],
    rule: Callable[..., Sequence[Any]] | None,
    *,
    out_dtypes: Sequence[dt.DType],
    differentiable: Sequence[bool] | None = None,
    save_inputs: Sequence[bool] | bool = True,
    save_outputs: Sequence[bool] | bool = True,
    attrs: dict[str, Any] | None = None,
    jvp: Callable[..., Sequence[Any]] | None = None,
) -> tuple[Tensor, ...]:
    """Run `compute(*arrays)` (NumPy arrays of the inputs' values; it returns one array
    per output) and record one node `name` whose backward is `rule(ctx, grads)`.

    `out_dtypes` gives each output's dtype; `differentiable` which outputs carry
    gradients (default: the floating point and complex ones). `save_inputs` and
    `save_outputs` say what the rule reads. `rule` None: the op has no derivative (its
    outputs do not require grad, as torch's non-differentiable ops)."""
    attrs = attrs or {}
    inputs = tuple(inputs)
    if _traced(inputs):
        graph_break(op)
    if interpreters:
        interp = _interpreter_for(inputs)
        if interp is not None and hasattr(interp, "batched"):
            values = [interp.batched(x) for x in inputs]
            outs = host_op(
                op,
                name,
                values,
                compute,
                rule,
                out_dtypes=out_dtypes,
                differentiable=differentiable,
                save_inputs=save_inputs,
                save_outputs=save_outputs,
                attrs=attrs,
                jvp=jvp,
            )
            return tuple(interp.wrap(o) for o in outs)
    arrays = [x._numpy_view() for x in inputs]
    with np.errstate(all="ignore"):
        raw = compute(*arrays)
    outs = tuple([from_numpy(a, d) for a, d in zip(raw, out_dtypes)])
    if rule is None:
        return outs
    if differentiable is None:
        differentiable = [o._dtype.is_floating_point or o._dtype.is_complex for o in outs]
    if _grad_state.enabled and any(x._requires_grad for x in inputs):
        cls = node_class(name or f"{op}Backward0", LinalgNode)
        node = Node.__new__(cls)
        Node.__init__(node, tuple(edge(x) for x in inputs))
        node._nout = len(outs)
        node._rule = rule
        node._attrs = attrs
        node._in_meta = tuple((x._shape, x._dtype) for x in inputs)
        node._released = False
        for i, (o, d) in enumerate(zip(outs, differentiable)):
            if d:
                o._requires_grad = True
                o.grad_fn = node
                o._output_nr = i
        si = [save_inputs] * len(inputs) if isinstance(save_inputs, bool) else save_inputs
        so = [save_outputs] * len(outs) if isinstance(save_outputs, bool) else save_outputs
        node._saved_in = tuple(SavedTensor(x) if s else None for x, s in zip(inputs, si))
        node._saved_out = tuple(
            (_SavedOut(o) if o.grad_fn is node else SavedTensor(o)) if s else None
            for o, s in zip(outs, so)
        )
    if forward_ad._level[0]:
        tangents = [forward_ad.tangent_of(x) for x in inputs]
        if any(t is not None for t in tangents):
            _forward_mode(inputs, outs, differentiable, tangents, rule, attrs, jvp)
    return outs


def _forward_mode(
    inputs: Sequence[Tensor],
    outs: Sequence[Tensor],
    diff: Sequence[bool],
    tangents: list[Tensor | None],
    rule: Callable[..., Any],
    attrs: dict[str, Any],
    jvp: Callable[..., Any] | None,
) -> None:
    """Tangents of the outputs: the op's jvp rule, or the transposed vjp."""
    F = _functions()

    primals = [forward_ad.unpack_dual(x).primal for x in inputs]
    outvals = [o.detach() for o in outs]
    interp = _interpreter_for(tangents) if interpreters else None
    if jvp is not None:
        result = jvp(primals, outvals, tangents, attrs)
    elif interp is not None and hasattr(interp, "batched"):
        # batched tangents (jacfwd's basis): the transposed vjp pairs one tangent at a
        # time, so it runs per batch element and the results are stacked
        full = [None if t is None else interp.batched(t) for t in tangents]
        per: list[list[Tensor | None]] = []
        for b in range(interp.size):
            per.append(
                _transposed(
                    primals, outvals, diff, [None if t is None else t[b] for t in full], rule, attrs
                )
            )
        result = [
            None if per[0][k] is None else interp.wrap(F.stack([p[k] for p in per]))
            for k in range(len(outs))
        ]
    else:
        result = _transposed(primals, outvals, diff, tangents, rule, attrs)
    for o, r, d in zip(outs, result, diff):
        if d and r is not None:
            forward_ad.set_tangent(o, r.detach().to(o._dtype) if r._dtype is not o._dtype else r)


def _transposed(
    primals: Sequence[Tensor],
    outs: Sequence[Tensor],
    diff: Sequence[bool],
    tangents: list[Tensor | None],
    rule: Callable[..., Any],
    attrs: dict[str, Any],
) -> list[Tensor | None]:
    """`J t` from the vjp rule (linear in the cotangents u): d<vjp(u), t>/du."""
    F = _functions()

    inputs, outvals = primals, outs
    with enable_grad():
        us = [
            F.zeros(o._shape, dtype=o._dtype, requires_grad=True) if d else None
            for o, d in zip(outvals, diff)
        ]
        ctx = _Ctx(
            primals,
            outvals,
            tuple(t is not None for t in tangents),
            attrs,
            [(x._shape, x._dtype) for x in inputs],
        )
        parts = rule(ctx, list(us))
        total = None
        for p, t, x in zip(parts, tangents, inputs):
            if p is None or t is None:
                continue
            p = sum_to(p, x._shape, x._dtype)
            term = (
                F.sum(F.real(F.mul(F.conj(p), t.to(p._dtype))))
                if p._dtype.is_complex
                else F.sum(F.mul(p, t.to(p._dtype)))
            )
            total = term if total is None else F.add(total, term)
        live = [u for u in us if u is not None]
        if total is None or not total._requires_grad:
            result = [None] * len(outvals)
        else:
            got = grad(total, live, allow_unused=True, materialize_grads=True)
            it = iter(got)
            result = [next(it) if u is not None else None for u in us]
    return result


def zeros_if_none(g: Tensor | None, like: Tensor) -> Tensor:
    F = _functions()
    return F.zeros(like._shape, dtype=like._dtype) if g is None else g


def batched_loop(fn: Callable[..., Any], *arrays: np.ndarray, nmat: int | None = None) -> list[Any]:
    """Call `fn(*mats)` for every matrix of the (common) leading batch; results per element
    in row-major batch order."""
    nmat = len(arrays) if nmat is None else nmat
    batch = arrays[0].shape[:-2]
    out = []
    for idx in np.ndindex(*batch):
        out.append(fn(*(a[idx] for a in arrays[:nmat])))
    return out


__all__ = ["LinAlgError"]
