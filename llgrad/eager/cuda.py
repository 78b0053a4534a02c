"""Tensors on `device="cuda"`: device memory, copies, and eager ops as GPU kernels.

A `CudaTensor` is a tensor whose storage is a block of device memory (`CudaStorage`,
from the runtime's caching allocator); its metadata (shape, strides, dtype, autograd
fields) is a tensor's. Its values are reached only by copying: `.cpu()`, `.item()`,
`.tolist()` and printing copy to the host (and wait for the device); `.numpy()` raises
as PyTorch's does.

Eager ops. The first CUDA tensor puts the CUDA interpreter at the bottom of the
interpreter stack (`dispatch.apply.interpreters`), so every op that meets a CUDA tensor
comes here: the op is traced into a one-op graph on its operands' types (the tracer needs
only dtypes and shapes), compiled once per (op, attributes, operand types) into GPU
kernels (`runtime.cuda.graph.CudaGraph`: the same fusion, lowering and kernels as a
compiled function), and run on the device; autograd records the op's node as on the CPU,
so `backward()` runs the derivative rules as more CUDA ops. Ops whose graph cannot run
on the GPU yet (a kernel family without a GPU generator, random draws, data-dependent
shapes) run on the host on copies of their operands and the result is copied back; such
a fallback is logged once per op on the `graph_breaks` channel.

Differences from PyTorch: view ops (`reshape`, `transpose`, slicing, ...) on CUDA tensors
return new tensors rather than views (writing into the result does not change the
source); one device (`cuda:0`); everything runs on the current stream in order.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .. import _log, pytree
from .._keys import attrs_key
from .._printing import format_tensor
from ..tape import engine
from ..dispatch.apply import Interpreter, apply, apply_composite, interpreters, needs_grad, record
from ..tape.engine import IN_BACKWARD
from ..tape.node import Node, edge
from ..compiler.decompose import decompose
from ..device import device, device_type
from ..dispatch.grad_mode import no_grad
from ..functions import _errors
from ..functions.creation import tensor as make_tensor
from ..ir.dtypes import DType
from ..ir.registry import VIEW_OPS
from ..ir.types import broadcast_shapes
from ..nn.parameter import Parameter
from ..runtime.cuda import driver
from ..schedule.layout import contiguous_strides
from ..schedule.program import can_write_in_place
from ..tensor import _DEVICE_STORAGE, SymbolicTensor, Tensor, _row_major_strides
from ..tracer.make_ir import _unflatten, trace
from ..compiler.api import CompileError, compile as lg_compile
from ..compiler.pipeline import optimize

CUDA_DEVICE_NAME = "cuda:0"


class CudaStorage:
    """A block of device memory holding a tensor's elements."""

    __slots__ = ("block", "ptr", "nbytes", "version", "owner", "raw", "inference", "__weakref__")

    def __init__(self, block: Any):
        self.block = block
        self.ptr = block.ptr
        self.nbytes = block.nbytes
        self.version = 0
        self.owner = None
        self.raw = None
        self.inference = False

    @property
    def buffer(self) -> np.ndarray:
        """Device memory has no host view: copy with `.cpu()` first."""
        raise RuntimeError(
            "this tensor's memory is on the CUDA device; copy it to the host with .cpu() first"
        )

    def __repr__(self) -> str:
        return f"<CudaStorage {self.nbytes} bytes at {self.ptr:#x}>"


class CudaTensor(SymbolicTensor):
    """A tensor in CUDA device memory (see the module docstring)."""

    __slots__ = ()

    # -- device ------------------------------------------------------------------------
    @property
    def device(self) -> Any:
        """`device(type='cuda', index=0)`."""
        return device("cuda", 0)

    @property
    def is_cpu(self) -> bool:
        return False

    @property
    def is_cuda(self) -> bool:
        return True

    def get_device(self) -> int:
        """The CUDA device's index (0)."""
        return 0

    def cpu(self, memory_format: Any = None) -> Tensor:
        """A copy in host memory (waits for the device); differentiable, as PyTorch's."""
        return to_host(self)

    def cuda(self, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> "CudaTensor":
        """This tensor (it is on the device already)."""
        return self

    def data_ptr(self) -> int:
        """The device address of the first element."""
        return address(self)

    def _alias(self) -> "CudaTensor":
        """Another CUDA tensor over the same device memory, without history."""
        return CudaTensor._make(
            self._storage, self._offset, self._shape, self._strides, self._dtype, base=self._base
        )

    # -- reading values (copies to the host) -----------------------------------------------
    def _host(self) -> Tensor:
        with no_grad():
            return download(self)

    def item(self) -> Any:
        return self._host().item()

    def tolist(self) -> Any:
        return self._host().tolist()

    def __bool__(self) -> bool:
        return bool(self._host())

    def __float__(self) -> float:
        return float(self._host())

    def __int__(self) -> int:
        return int(self._host())

    def __index__(self) -> int:
        return self._host().__index__()

    def _no_data(self, what: str) -> Any:
        raise TypeError(
            f"can't convert {CUDA_DEVICE_NAME} device type tensor to numpy. Use "
            f"Tensor.cpu() to copy the tensor to host memory first."
        )

    def __repr__(self) -> str:
        grad_fn = None if self.grad_fn is None else type(self.grad_fn).__name__
        return format_tensor(
            self._host()._values(),
            dtype_name=self._dtype.name,
            requires_grad=self._requires_grad,
            grad_fn_name=grad_fn,
            device=CUDA_DEVICE_NAME,
        )

    __str__ = __repr__

    def __reduce__(self):
        return (_rebuild_cuda, (self._host().__reduce__(),))


class CudaParameter(CudaTensor, Parameter):
    """An `nn.Parameter` whose memory is on the CUDA device (`module.cuda()` moves a
    parameter by switching its class, so the module and optimizers keep the object)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Parameter containing:\n" + CudaTensor.__repr__(self)

    __str__ = __repr__


CUDA_CLASSES = frozenset((CudaTensor, CudaParameter))
_HOST_CLASS = {CudaTensor: Tensor, CudaParameter: Parameter}
_DEVICE_CLASS = {Tensor: CudaTensor, Parameter: CudaParameter}


def moved_class(cls: type, to_device: bool) -> type:
    """The class a tensor of class `cls` takes when its memory moves to the device (or
    back): Tensor <-> CudaTensor, Parameter <-> CudaParameter."""
    table = _DEVICE_CLASS if to_device else _HOST_CLASS
    return table.get(cls, cls)


def _rebuild_cuda(host: Any) -> CudaTensor:
    fn, args = host
    return upload(fn(*args))


# ------------------------------------------------------------------------------------------
# memory and copies
# ------------------------------------------------------------------------------------------


def address(t: Tensor) -> int:
    """The device address of a CUDA tensor's first element. (Its `_ptr`, the host address
    every CPU kernel reads, is None, as a tracer's is: a CPU kernel handed a CUDA tensor
    fails to pack its arguments instead of reading device memory.)"""
    return t._storage.ptr + t._offset * t._dtype.itemsize


_BACKEND: list[Any] = [None]


def _backend() -> Any:
    """The CUDA runtime's backend (made on first use, when the interpreter goes on the
    stack too: no CUDA tensor exists before it)."""
    be = _BACKEND[0]
    if be is None:
        be = _BACKEND[0] = driver.get()
        _install()
    return be


def empty(shape: tuple[int, ...], dtype: DType) -> CudaTensor:
    """A new dense CUDA tensor (uninitialized)."""
    n = dtype.itemsize
    for s in shape:
        n *= s
    block = (_BACKEND[0] or _backend()).alloc(n)
    shape = tuple(shape)
    return CudaTensor._make(CudaStorage(block), 0, shape, _row_major_strides(shape), dtype)


def upload(t: Tensor, non_blocking: bool = False) -> CudaTensor:
    """A CUDA copy of host tensor `t` (dense, same dtype); records `ToCopyBackward0`."""
    if t._storage is None or t._ptr is None:
        raise RuntimeError(
            f"cuda: cannot copy a {type(t).__name__} (a tensor without values) to the device"
        )
    src = t if t.is_contiguous() else t.contiguous()
    out = empty(src._shape, src._dtype)
    if out._storage.nbytes:
        _backend().copy_htod(address(out), src._ptr, out._storage.nbytes, non_blocking=non_blocking)
    if needs_grad((t,)):
        _record_copy(t, out, True)
    return out


def download(t: CudaTensor) -> Tensor:
    """A host copy of CUDA tensor `t` (waits until the device has written it)."""
    src = t if _dense(t) else contiguous(t)
    out = Tensor._empty(src._shape, src._dtype)
    if src._storage.nbytes and out.numel():
        _backend().copy_dtoh(out._ptr, address(src), out.numel() * out._dtype.itemsize)
    return out


def to_host(t: CudaTensor) -> Tensor:
    """`t.cpu()`: `download`, recorded for autograd."""
    out = download(t)
    if needs_grad((t,)):
        _record_copy(t, out, False)
    return out


def _dense(t: Tensor) -> bool:
    return t._strides == contiguous_strides(t._shape)


def contiguous(t: CudaTensor) -> CudaTensor:
    """A dense copy of a strided CUDA tensor, by a copy kernel."""
    out = empty(t._shape, t._dtype)
    copy_into(out, t)
    return out


def copy_into(dst: CudaTensor, src: Any) -> CudaTensor:
    """`dst[...] = src` on the device: broadcasting and dtype conversion, any strides."""
    if not isinstance(src, Tensor):
        src = make_tensor(src, dtype=dst._dtype)
    if src.__class__ not in CUDA_CLASSES:
        src = upload(src.detach())

    if (
        src._shape != dst._shape
        and broadcast_shapes(src._shape, dst._shape, op="copy_") != dst._shape
    ):
        raise RuntimeError(
            f"copy_: source of shape {list(src._shape)} cannot be broadcast "
            f"to destination shape {list(dst._shape)}"
        )
    if dst.numel() == 0:
        return dst
    _copy_kernel(dst, src)
    return dst


_copies: dict[tuple, Any] = {}


def _copy_kernel(dst: CudaTensor, src: CudaTensor) -> None:
    """One elementwise launch from `src` (broadcast to dst's shape) into `dst`."""
    from ..runtime.cuda.kernels import CopyKernel  # loaded on first use (runtime.cuda.kernels)

    rank = max(1, len(dst._shape))
    pad = rank - len(src._shape)
    shape = dst._shape or (1,)
    s_strides = [0] * pad + [
        0 if (n == 1 and m != 1) else st for n, m, st in zip(src._shape, shape[pad:], src._strides)
    ]
    d_strides = list(dst._strides) or [0]
    key = (dst._dtype, src._dtype, tuple(shape), tuple(d_strides), tuple(s_strides or [0]))
    k = _copies.get(key)
    if k is None:
        k = _copies[key] = CopyKernel(
            dst._dtype, src._dtype, tuple(shape), tuple(d_strides), tuple(s_strides or [0])
        )
    k(address(dst), address(src))


# ------------------------------------------------------------------------------------------
# autograd of the device copies
# ------------------------------------------------------------------------------------------


class ToCopyBackward0(Node):
    """The node of a host<->device copy: the gradient is copied back the other way."""

    __slots__ = ("to_device",)

    def __init__(self, source: Tensor, to_device: bool):
        super().__init__((edge(source),))
        self.to_device = to_device

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = grads[0]
        if g is None:
            return (None,)
        on_device = g.__class__ in CUDA_CLASSES
        if self.to_device:  # the source is on the host
            return (to_host(g) if on_device else g,)
        return (g if on_device else upload(g),)


def _record_copy(source: Tensor, out: Tensor, to_device: bool) -> None:
    out._requires_grad = True
    out.grad_fn = ToCopyBackward0(source, to_device)
    out._output_nr = 0


# ------------------------------------------------------------------------------------------
# eager ops: one-op graphs on the GPU
# ------------------------------------------------------------------------------------------

_graphs: dict[tuple, Any] = {}
_HOST = object()  # a key that runs on the host
_logged: set[str] = set()


class _Compiled:
    """A traced function's GPU executable and its output structure."""

    def __init__(self, fn: Callable[..., Any], examples: list[CudaTensor], name: str):
        from ..runtime.cuda.graph import CudaGraph  # loaded on first use (runtime.cuda.graph)

        with no_grad():
            graph, ctx, structure = trace(fn, tuple(examples), {})
        if ctx.effects or ctx.guards or ctx.captured:
            raise RuntimeError("the op's trace has side effects, guards or captured tensors")
        optimized, _, _ = optimize(decompose(graph))
        self.graph = optimized
        self.structure = structure
        self.exe = CudaGraph(optimized, _symbol(name))

    def __call__(self, tensors: Sequence[CudaTensor]) -> Any:
        return _unflatten(self.structure, run_graph(self.exe, tensors))


def _symbol(name: str) -> str:
    clean = "".join(c if c.isalnum() else "_" for c in name)
    return f"op_{clean}_{len(_graphs)}"


def run_graph(exe: Any, inputs: Sequence[CudaTensor]) -> list[CudaTensor]:
    """Run a `CudaGraph` on CUDA tensors (made dense first); new output tensors."""
    dense = [t if _dense(t) else contiguous(t) for t in inputs]
    outs = [empty(o.shape, o.dtype) for o in exe.graph.outputs]
    exe.run([address(t) for t in dense], [address(o) for o in outs])
    return outs


def _flatten_operands(operands: Sequence[Any]) -> tuple[list[Tensor], Callable[[list], list]]:
    """The tensors among `operands` (also inside lists, as cat's) and a function that
    puts replacements back in their places."""
    flat, treedef = pytree.flatten(list(operands))
    at = [k for k, x in enumerate(flat) if isinstance(x, Tensor)]

    def rebuild(values: list) -> list:
        filled = list(flat)
        for k, v in zip(at, values):
            filled[k] = v
        return pytree.unflatten(treedef, filled)

    return [flat[k] for k in at], rebuild


def _on_device(tensors: list[Tensor], op: str) -> list[CudaTensor]:
    """Every operand as a CUDA tensor; a CPU tensor of one element is a number (as
    PyTorch allows), and so is a helper tensor a derivative rule made on the host during
    a backward pass; any other CPU tensor is a device mix-up."""
    out = []
    for t in tensors:
        if t.__class__ in CUDA_CLASSES:
            out.append(t)
        elif t.dim() == 0 or IN_BACKWARD[0]:
            out.append(upload(t.detach()))
        else:
            raise RuntimeError(
                f"{op}: Expected all tensors to be on the same device, but "
                f"found at least two devices, {CUDA_DEVICE_NAME} and cpu!"
            )
    return out


def _key_of(kind: str, op: str, attrs: Any, operands: Sequence[Any]) -> tuple | None:
    parts: list[Any] = [kind, op]
    try:
        parts.append(tuple(sorted(attrs_key(attrs))) if isinstance(attrs, dict) else attrs)
        for o in operands:
            if isinstance(o, Tensor):
                parts.append(("T", o._dtype, o._shape))
            elif isinstance(o, (list, tuple)):
                parts.append(
                    tuple(
                        ("T", x._dtype, x._shape) if isinstance(x, Tensor) else (type(x), x)
                        for x in o
                    )
                )
            else:
                parts.append((type(o), o))
        key = tuple(parts)
        hash(key)
        return key
    except TypeError:
        return None


def run_op(
    kind: str, op: str, operands: Sequence[Any], attrs: Any, call: Callable[[list[Any]], Any]
) -> Any:
    """`call(operands)` on the GPU as a one-op graph (compiled once per key), or on the
    host on copies when that graph cannot run on the GPU."""
    tensors, rebuild = _flatten_operands(operands)
    device_tensors = _on_device(tensors, op)
    key = _key_of(kind, op, attrs, operands)
    compiled = _graphs.get(key) if key is not None else None
    if compiled is None:
        compiled = _HOST
        if key is not None:
            try:
                compiled = _Compiled(lambda *ts: call(rebuild(list(ts))), device_tensors, op)
            except Exception as e:  # noqa: BLE001 -- any failure runs on the host
                _note_host(op, e)
            _graphs[key] = compiled
    if compiled is not _HOST:
        return compiled(device_tensors)
    with no_grad():
        host = [download(t) for t in device_tensors]
        result = call(rebuild(host))
    return _device_tree(result)


def _note_host(op: str, error: BaseException) -> None:
    if op not in _logged:
        _logged.add(op)
        _log.log("graph_breaks", f"cuda: {op} runs on the host ({type(error).__name__}: {error})")


def _view(
    op: str, operands: Sequence[Any], attrs: dict[str, Any], forward: Callable[..., Tensor]
) -> Tensor | None:
    """A view op's result as a view of the same device memory (the eager forward only
    computes the new layout), or None when the op must copy (a reshape of a layout that
    no view expresses): then it runs as a GPU graph."""
    if forward is None or not operands or operands[0].__class__ not in CUDA_CLASSES:
        return None
    try:
        out = forward(op, operands, attrs)
    except (TypeError, RuntimeError):
        return None
    return out if out._storage is operands[0]._storage else None


class CudaInterpreter(Interpreter):
    """Runs every op that meets a CUDA tensor on the GPU (see the module docstring)."""

    def handles(self, operands: Sequence[Any]) -> bool:
        for o in operands:
            if o.__class__ in CUDA_CLASSES:
                return True
            if o.__class__ in (list, tuple):
                for x in o:
                    if x.__class__ in CUDA_CLASSES:
                        return True
        return False

    def process(
        self,
        op: str,
        operands: Sequence[Any],
        attrs: dict[str, Any] | None,
        forward: Callable[..., Tensor],
        name: str | None,
    ) -> Tensor:
        attrs = attrs or {}
        out = _view(op, operands, attrs, forward) if op in VIEW_OPS else None
        if out is None:
            out = run_op("op", op, operands, attrs, lambda xs: apply(op, xs, attrs, forward, name))
        if needs_grad(operands):
            record(op, operands, attrs, out, name)
        return out

    def process_composite(
        self, op: str, operands: Sequence[Any], attrs: dict[str, Any], name: str | None
    ) -> Tensor:
        out = run_op(
            "composite", op, operands, attrs, lambda xs: apply_composite(op, xs, attrs, name)
        )
        if needs_grad(operands):
            record(op, operands, attrs, out, name)
        return out


_INTERPRETER = CudaInterpreter()


def _install() -> None:
    """Put the CUDA interpreter at the bottom of the stack (once), and have functions'
    host-made results follow their CUDA arguments (`functions._errors.DEVICE_OUTPUTS`)."""
    if _INTERPRETER not in interpreters:
        interpreters.insert(0, _INTERPRETER)

    _errors.DEVICE_OUTPUTS[0] = _outputs_on_device


def _outputs_on_device(result: Any, args: tuple, kwargs: dict) -> Any:
    """`result` with its host tensors copied to the device when the call had CUDA
    arguments and no host ones (what PyTorch's op would return)."""
    if not any(
        isinstance(t, Tensor) and t.__class__ not in CUDA_CLASSES and t._storage is not None
        for t in pytree.leaves(result)
    ):
        return result
    leaves = _tensor_leaves((args, kwargs))
    if not any(t.__class__ in CUDA_CLASSES for t in leaves) or any(
        t.__class__ not in CUDA_CLASSES and t.dim() for t in leaves
    ):
        return result  # no CUDA arguments, or host ones too
    return _device_tree(result)


def is_cuda_tensor(x: Any) -> bool:
    """Whether `x` is a tensor in CUDA device memory."""
    return x.__class__ in CUDA_CLASSES


# ------------------------------------------------------------------------------------------
# creation functions with device=
# ------------------------------------------------------------------------------------------


def make_on_device(fn: Callable[..., Tensor], like: bool, args: tuple, kwargs: dict) -> Tensor:
    """Run the creation function `fn` for a call that names a device (or, for a `*_like`
    function, whose input is a CUDA tensor): made on the host, then copied to the device
    (requires_grad set on the device tensor, which is the leaf). The call's path from
    `functions._errors.device_aware`, which serves host calls itself."""
    dev = kwargs.get("device")
    source = args[0] if like and args else kwargs.get("input")
    if dev is None and like and source.__class__ in CUDA_CLASSES:
        dev = "cuda"
    elif dev is None or (dev.__class__ is str and dev == "cpu"):
        return fn(*args, **kwargs)
    if device_type(dev, fn.__name__) == "cpu":
        kwargs.pop("device", None)
        if like and source.__class__ in CUDA_CLASSES:
            args = (Tensor._empty(source._shape, source._dtype),) + tuple(args[1:])
        return fn(*args, **kwargs)
    kwargs = dict(kwargs)
    kwargs.pop("device", None)
    requires_grad = kwargs.pop("requires_grad", False)
    if like and source.__class__ in CUDA_CLASSES:
        placeholder = Tensor._empty(source._shape, source._dtype)
        if args:
            args = (placeholder,) + tuple(args[1:])
        else:
            kwargs["input"] = placeholder
    with no_grad():
        out = upload(fn(*args, **kwargs))
    if requires_grad:
        out.requires_grad_(True)
    return out


# ------------------------------------------------------------------------------------------
# compiled functions on CUDA tensors
# ------------------------------------------------------------------------------------------


class CudaExecutable:
    """A compiled function's graph on the GPU: `exe(*tensors) -> list[CudaTensor]`.

    Arguments are checked against the graph's parameters (dtype and shape); host tensors
    (the function's captured constants: the compiled function's device check has refused
    host arguments already) are copied to the device; strided CUDA tensors are made dense
    first.
    """

    def __init__(self, graph: Any):
        from ..runtime.cuda.graph import CudaGraph  # loaded on first use (runtime.cuda.graph)

        self.graph = graph
        self.exe = CudaGraph(graph, _symbol(f"graph_{graph.name}"))
        self._in_place: list[tuple[int, int]] = []
        self.stats = {
            "launches": len(self.exe.lowered.module.steps),
            "arena_bytes": self.exe.lowered.plan.arena_bytes,
            "seconds": self.exe.seconds,
        }

    @property
    def schedule(self) -> Any:
        """The schedule the kernels were generated from."""
        return self.exe.lowered.program

    def __call__(self, *inputs: Tensor) -> list[CudaTensor]:
        params = self.graph.params
        if len(inputs) != len(params):
            raise TypeError(
                f"compiled graph @{self.graph.name} takes {len(params)} tensors, got {len(inputs)}"
            )
        device_inputs = [
            t if t.__class__ in CUDA_CLASSES else upload(t.detach()) for t in inputs
        ]  # (host tensors: captured constants)
        for t, p in zip(device_inputs, params):
            if t._dtype is not p.dtype or tuple(t._shape) != tuple(p.shape):
                raise TypeError(
                    f"compiled graph @{self.graph.name}: argument of "
                    f"{t._dtype.name}{list(t._shape)} where "
                    f"{p.dtype.name}{list(p.shape)} was compiled"
                )
        if not self._in_place:
            return run_graph(self.exe, device_inputs)
        dense = [t if _dense(t) else contiguous(t) for t in device_inputs]
        outs: list[Any] = [None] * len(self.graph.outputs)
        for j, i in self._in_place:
            x = inputs[i]
            if dense[i] is x and not any(
                k != i and y._storage is x._storage for k, y in enumerate(dense)
            ):
                outs[j] = x  # the graph writes output j over input i
        outs = [
            o if o is not None else empty(g.shape, g.dtype)
            for o, g in zip(outs, self.graph.outputs)
        ]
        self.exe.run([address(t) for t in dense], [address(o) for o in outs])
        return outs

    def write_in_place(self, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Let output `j` be written into input `i`'s memory where the schedule allows it
        (`schedule.program.can_write_in_place`, as `CompiledGraph.write_in_place`): a
        training step's parameter updates then need no copy back."""
        program = self.exe.lowered.program
        self._in_place = [(j, i) for j, i in pairs if can_write_in_place(program, j, i)]
        return list(self._in_place)


def reset() -> None:
    """Forget every compiled kernel and take the CUDA interpreter off the stack (the
    backend is being replaced: tests switching the emulator on and off)."""
    _graphs.clear()
    _copies.clear()
    _logged.clear()
    _BACKEND[0] = None

    _errors.DEVICE_OUTPUTS[0] = None
    if _INTERPRETER in interpreters:
        interpreters.remove(_INTERPRETER)


# ------------------------------------------------------------------------------------------
# functions outside the op registry
# ------------------------------------------------------------------------------------------

_DEVICE_FAILURES = (
    "can't convert cuda:0 device type tensor to numpy",
    "Expected all tensors to be on the same device",
    "an argument is not a plain integer",
    "this tensor's memory is on the CUDA device",
)
_rerunning: list[int] = [0]
_functions: dict[Any, Any] = {}


def _tensor_leaves(tree: Any) -> list[Tensor]:
    """The tensors in a call's (nested) arguments."""
    return [x for x in pytree.leaves(tree) if isinstance(x, Tensor)]


def _cuda_leaves(tree: Any) -> list[Tensor]:
    return [t for t in _tensor_leaves(tree) if t.__class__ in CUDA_CLASSES]


def device_failure(error: BaseException, args: tuple, kwargs: dict) -> bool:
    """Whether `error` is a function's eager code failing on CUDA tensors (reading host
    memory, making a helper tensor on the CPU), which `rerun` can serve."""
    if _rerunning[0] or not interpreters or _INTERPRETER not in interpreters:
        return False
    text = str(error)
    return any(f in text for f in _DEVICE_FAILURES) and bool(_cuda_leaves((args, kwargs)))


def rerun(fn: Callable[..., Any], op: str, args: tuple, kwargs: dict) -> Any:
    """Run `fn` on CUDA tensors as one compiled GPU graph (`lg.compile(fn, fullgraph=True)`,
    made once per function): the tracer sees through its host-side details. A function
    that does not trace into one graph (data-dependent sizes, host computations) runs on
    the host on copies, and its tensors are copied back to the device; the copies are
    recorded (`ToCopyBackward0`), so gradients flow through the host computation."""
    compiled = _functions.get(fn)
    if compiled is None:
        compiled = _functions[fn] = lg_compile(fn, fullgraph=True)
    _rerunning[0] += 1
    try:
        try:
            return compiled(*args, **kwargs)
        except CompileError as e:
            _note_host(op, e)
        # on the host: the copies record their own nodes (ToCopyBackward0), so autograd
        # runs through the host computation and back to the CUDA arguments
        host_args, host_kwargs = _host_tree((args, kwargs))
        return _device_tree(fn(*host_args, **host_kwargs))
    finally:
        _rerunning[0] -= 1


def _device_tree(result: Any) -> Any:
    """Host results of a function on the device, as `upload` records them."""
    return pytree.tree_map(
        lambda x: upload(x) if isinstance(x, Tensor) and x.__class__ not in CUDA_CLASSES else x,
        result,
    )


def _host_tree(tree: Any) -> Any:
    """A call's arguments with their CUDA tensors copied to the host (recorded)."""
    return pytree.tree_map(lambda x: to_host(x) if x.__class__ in CUDA_CLASSES else x, tree)


def _register() -> None:
    """Tell the layers below about CUDA tensors: the tensor class (device storage makes
    CUDA tensors), the engine (seeds and backward's helper tensors), the functions'
    rerun and creation hooks and their CUDA classes."""
    engine._CUDA[0] = CudaTensor
    _DEVICE_STORAGE[:] = [CudaStorage, dict(_DEVICE_CLASS)]
    _errors.DEVICE_RERUN[:] = [device_failure, rerun]
    _errors.DEVICE_CREATE[0] = make_on_device
    _errors.DEVICE_CLASSES.update(CUDA_CLASSES)


_register()
