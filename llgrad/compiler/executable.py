"""`CompiledGraph`: a graph with static shapes compiled into one native entry point.

Compiling runs the pipeline's native stages once (`compiler.pipeline.build_native`:
fusion, lower to the schedule, memory plan, emit one LLVM module, compile). A call then

1. checks every argument against its parameter (a Tensor or NumPy array of the param's
   dtype and shape; errors name the parameter), before any native code runs; an argument
   that is not contiguous is copied (the kernels address params as dense buffers);
2. allocates the outputs (`Tensor._empty`, one per graph output, never shared);
3. packs `[inputs, outputs, arena, extras]` into a per-thread block and makes one foreign
   call of `entry` (ctypes releases the GIL during it); launches big enough to split across
   cores run on the native thread pool (`runtime.pool`) from inside that call;
4. raises `IndexError` if an index kernel recorded an out-of-range index (the kernels
   never touch memory outside a buffer; they skip the bad element and record it).

The arena is allocated once per thread and reused by every call, so concurrent calls from
different threads are safe.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

import numpy as np

from .. import _log
from .._source import define
from ..codegen.target import get_target
from ..eager.views import contiguous
from ..ir import dtypes as dt
from ..ir.dtypes import DType, bfloat16
from ..ir.graph import Graph, Node
from ..ir.printer import format_type, param_name
from ..runtime import blas, launch, mpi, pool
from ..runtime.storage import allocate
from ..schedule.layout import contiguous_strides, is_contiguous
from ..schedule.matmul import MatmulKernel
from ..schedule.program import PARALLEL_FOR, can_write_in_place, traffic
from ..specialize.compiled import runner_source
from ..tensor import DENSE_CLASSES, Tensor
from .pipeline import build_native

__all__ = ["CompiledGraph"]

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Param:
    __slots__ = ("name", "dtype", "shape", "strides", "np_dtype", "node")

    def __init__(self, node: Node):
        self.node = node
        self.name = param_name(node)
        self.dtype = node.dtype
        self.shape = node.shape
        self.strides = contiguous_strides(node.shape)
        self.np_dtype = None if node.dtype is bfloat16 else node.dtype.np


class CompiledGraph:
    """A compiled graph: `cg(*arrays_or_tensors) -> list[Tensor]` (one per graph output).

    Inspection: `kernels` (the fusion groups, each naming the IR nodes it computes),
    `llvm_ir` (the module's text), `asm()` (its optimized assembly), `plan` (the memory
    plan with the arena's peak size), `stats` (counts and compile seconds per stage).
    `inline` chooses whether kernels are inlined into their launch wrappers, where every
    size and stride is a constant: "always" (the default; fastest to compile and to run,
    see `codegen.graph`), "auto" (LLVM decides) or "never". `threads` caps the threads a
    call may use (at most `runtime.launch`'s pool); a graph whose launches are all small
    runs in one foreign call of `entry`.
    """

    def __init__(
        self,
        graph: Graph,
        *,
        inline: str = "always",
        threads: int | None = None,
        check: bool = True,
    ):
        if not isinstance(graph, Graph):
            raise TypeError(f"CompiledGraph expects an llgrad.ir Graph, got {type(graph).__name__}")
        self.graph = graph
        # llgrad's own gemm (compiled once per process) builds while this graph does
        for d in {n.dtype for n in graph.nodes if n.op == "matmul"}:
            blas.prepare(d)
        # at most the threads of runtime.launch's pool, which runs the pieces
        cap = launch._THREADS
        self.threads = max(1, min(cap, threads if threads is not None else cap))
        build = build_native(graph, inline=inline, threads=self.threads, check=check)
        self.fusion, self.program, self.plan = build.fusion, build.program, build.plan
        self.llvm_ir, self.compiled = build.llvm_ir, build.module
        seconds, stages = build.seconds, build.emitted
        self._entry = _ENTRY(self.compiled.addresses["entry"])
        # gemms split across our threads: BLAS is held at one thread during the call
        self._hold_blas = any(
            l.parallel(self.threads)
            and isinstance(l.spec, MatmulKernel)
            and "BLAS" in l.what
            and blas.holds_library(l.spec.dtype)
            for l in self.program.launches
        )
        self._in_place: list[tuple[int, int]] = []
        self._run: Any = None  # see `runner`
        self._runners: dict[int, Any] = {}
        self._params = [_Param(p) for p in graph.params]
        self._outs = [
            (o.shape, o.dtype, contiguous_strides(o.shape), o.dtype.itemsize * _numel(o.shape))
            for o in graph.outputs
        ]
        self._extras = [_extra_address(name, self.threads) for name in self.program.extras]
        n_slots = len(self._params) + len(self._outs) + 1 + len(self._extras)
        self._struct = struct.Struct(f"{n_slots}q")
        self._pack = self._struct.pack_into
        errors = self.program.error_buffer
        self._errors = [(l.err.byte_offset, l) for l in self.program.errors]
        self._err_span = (errors.offset, errors.offset + errors.nbytes) if errors else None
        self._tls = threading.local()
        self.stats = {
            "nodes": len(graph.nodes),
            "kernels": len(self.fusion.groups),
            "launches": len(self.program.launches),
            "functions": len({l.spec for l in self.program.launches}),
            "stages": len(stages),
            "arena_bytes": self.plan.arena_bytes,
            "intermediate_bytes": self.plan.total_bytes,
            "from_cache": self.compiled.from_cache,
            "seconds": seconds,
        }
        moved = traffic(self.program)
        self.stats.update(
            {
                k: moved[k]
                for k in (
                    "bytes read",
                    "bytes written",
                    "bytes moved",
                    "minimum bytes",
                    "traffic ratio",
                )
            }
        )
        if _log.enabled("fusion"):
            _log.log("fusion", f"{self.fusion}\n{self.plan}")
        if _log.enabled("llvm"):
            _log.log("llvm", f"graph @{graph.name}: {self.stats}")

    # -- inspection ---------------------------------------------------------------------
    @property
    def kernels(self) -> list[Any]:
        return list(self.fusion.groups)

    @property
    def schedule(self):
        """The schedule IR this graph runs (`schedule.program.Program`; prints readably)."""
        return self.program

    def asm(self) -> str:
        """The optimized module as assembly text (the entry with its kernels inlined)."""
        return get_target().assembly(self.llvm_ir)

    def optimized_ir(self) -> str:
        return get_target().optimized_ir(self.llvm_ir)

    def __repr__(self) -> str:
        return (
            f"<CompiledGraph @{self.graph.name}: {self.stats['nodes']} nodes, "
            f"{self.stats['kernels']} kernels, arena {self.stats['arena_bytes']} B>"
        )

    def write_in_place(self, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Let output `j` be written into input `i`'s memory for each `(j, i)` the schedule
        allows (`schedule.program.can_write_in_place`); returns the pairs accepted. A call
        then returns input `i`'s own tensor as output `j` when that argument is used as
        passed (a dense tensor of the parameter's type sharing memory with no other
        argument); otherwise output `j` is a new tensor as usual."""
        self._in_place = [(j, i) for j, i in pairs if can_write_in_place(self.program, j, i)]
        self._run = None  # made again with the in-place outputs
        self._runners.clear()
        return list(self._in_place)

    # -- calling ------------------------------------------------------------------------
    def _scratch(self) -> tuple[ctypes.Array, int, int, Any]:
        """This thread's argument block, arena address and error records (made once)."""
        try:
            return self._tls.state
        except AttributeError:
            block = (ctypes.c_int64 * max(1, self._struct.size // 8))()
            arena = allocate(max(self.plan.arena_bytes, 64))
            err = None
            if self._err_span is not None:
                lo, hi = self._err_span
                err = (ctypes.c_int64 * ((hi - lo) // 8)).from_address(arena.ptr + lo)
                err._arena = arena  # the records live in the arena
                ctypes.memset(arena.ptr + lo, 0, hi - lo)  # kept zero between calls
            self._tls.arena = arena  # keeps the arena alive with the thread
            self._tls.state = (block, ctypes.addressof(block), arena.ptr, err)
            return self._tls.state

    def __call__(self, *args: Any) -> list[Tensor]:
        if len(args) != len(self._params):
            return self._call(*args)  # raises, naming the parameters
        run = self._run
        if run is None:
            run = self.runner()
        return run(*args)

    def runner(self, verified: int = 0) -> Any:
        """This graph's call specialized to its signature: generated Python source that
        checks each argument with a few identity and tuple comparisons, allocates the
        outputs, packs the argument block and makes the foreign call, with every constant
        (shapes, strides, extras' addresses) in the code. Anything unusual (a NumPy array,
        a non-contiguous or wrong argument, outputs written in place) goes to `_call`,
        the general path. Made on the first call; its text is `runner().__source__`.
        `verified`: the caller has already checked that its first `verified` arguments
        are Tensors of their parameters' dtypes and shapes (only strides are left)."""
        if verified:
            run = self._runners.get(verified)
            if run is None:
                run = self._runners[verified] = _generate_runner(self, verified)
            return run
        if self._run is None:
            self._run = _generate_runner(self)
        return self._run

    def _call(self, *args: Any) -> list[Tensor]:
        """The general call: validation with clear errors, conversions, in-place outputs."""
        params = self._params
        if len(args) != len(params):
            expected = ", ".join(f"{p.name}: {format_type(p.node.type)}" for p in params)
            raise TypeError(
                f"graph @{self.graph.name} takes {len(params)} inputs ({expected}), got {len(args)}"
            )
        ptrs: list[int] = []
        keep: list[Tensor] | None = None
        for p, x in zip(params, args):
            if (
                x.__class__ in DENSE_CLASSES
                and x._dtype is p.dtype
                and x._shape == p.shape
                and x._strides == p.strides
            ):
                ptrs.append(x._ptr)
            else:  # validation errors, conversions, copies
                x = self._convert(p, x)
                keep = [x] if keep is None else keep + [x]
                ptrs.append(x._ptr)
        outs = [_new_output(shape, d, st, nbytes) for shape, d, st, nbytes in self._outs]
        for j, i in self._in_place:
            x = args[i]
            if (
                isinstance(x, Tensor)
                and ptrs[i] == x._ptr
                and not any(
                    k != i and isinstance(y, Tensor) and y._storage is x._storage
                    for k, y in enumerate(args)
                )
            ):
                outs[j] = x
        for o in outs:
            ptrs.append(o._ptr)
        try:
            block, addr, arena, err = self._tls.state
        except AttributeError:
            block, addr, arena, err = self._scratch()
        self._pack(block, 0, *ptrs, arena, *self._extras)
        if self._hold_blas:
            blas.hold_single_threaded()
            try:
                self._entry(addr)
            finally:
                blas.release_single_threaded()
        else:
            self._entry(addr)
        if err is not None:
            self._check_errors(err)
        return outs

    def _convert(self, p: _Param, x: Any) -> Tensor:
        """Validate one argument; return it as a contiguous Tensor (copied if needed)."""
        where = f"graph @{self.graph.name}: input %{p.name} ({format_type(p.node.type)})"
        if isinstance(x, np.ndarray):
            if p.np_dtype is None:
                raise TypeError(
                    f"{where} is bfloat16, which NumPy cannot hold; pass an llgrad Tensor"
                )
            if x.dtype != p.np_dtype:
                raise TypeError(f"{where} expects a {p.dtype.name} array, got {x.dtype}")
            if x.shape != p.shape:
                raise ValueError(f"{where} expects shape {list(p.shape)}, got {list(x.shape)}")
            x = Tensor._from_numpy(
                np.ascontiguousarray(x) if x.flags.writeable else np.array(x, order="C"), p.dtype
            )
        elif not isinstance(x, Tensor):
            raise TypeError(f"{where} expects a Tensor or a NumPy array, got {type(x).__name__}")
        if x._dtype is not p.dtype:
            raise TypeError(f"{where} expects dtype {p.dtype.name}, got {x._dtype.name}")
        if x._shape != p.shape:
            raise ValueError(f"{where} expects shape {list(p.shape)}, got {list(x._shape)}")
        if not is_contiguous(x._shape, x._strides):
            x = contiguous(x)
        return x

    def _check_errors(self, err: ctypes.Array) -> None:
        """Raise the error a kernel recorded in this call, if any. The records are zero
        between calls (zeroed when the arena is made and here, once read), so a call does
        not clear them first: a kernel writes its record only when it fails."""
        if not any(err):
            return
        values = list(err)
        ctypes.memset(ctypes.addressof(err), 0, ctypes.sizeof(err))
        err = values  # type: ignore[assignment]
        for offset, l in self._errors:
            k = offset // 8
            if err[k] and l.node.op == "all_reduce":
                raise mpi.DistError(
                    f"all_reduce: MPI error {err[k + 1]}: {mpi.error_string(err[k + 1])} "
                    f"({self.fusion.names.get(l.node, 'all_reduce')} in graph "
                    f"@{self.graph.name}{f' at {l.node.loc}' if l.node.loc else ''})"
                )
            if err[k]:
                node = l.node
                name = self.fusion.names.get(node, node.op)
                numel = 1
                for s in node.inputs[0].shape:
                    numel *= s
                loc = f" at {node.loc}" if node.loc else ""
                # (an indexing expression gathers from the flattened tensor; an index
                # outside its own dimension shows as a position past the end)
                error = IndexError(
                    f"{node.op}: index {err[k + 1]} is out of bounds for "
                    f"dimension 0 with size {numel} ({name} = {node.op} in "
                    f"graph @{self.graph.name}{loc}; for x[i, ...] this is "
                    f"the flattened position: some index is outside its "
                    f"dimension)"
                )
                # `lg.compile` reruns the call eagerly for eager's message (the op, the
                # index as written, its dimension and size): see CompiledFunction
                error.compiled_index = True  # type: ignore[attr-defined]
                raise error


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _new_output(shape: tuple[int, ...], d: DType, strides: tuple[int, ...], nbytes: int) -> Tensor:
    """A graph output (`Tensor._empty`; tiny ones come from a slab, see runtime.storage)."""
    return Tensor._empty(shape, d, strides)


def _extra_address(name: str, threads: int) -> int:
    if name == PARALLEL_FOR:
        return pool.address(threads)
    if name.startswith("mpi:"):  # MPI functions and handles (runtime.mpi)
        return mpi.extra(name[4:])

    dtype = {"s": dt.float32, "d": dt.float64, "c": dt.complex64, "z": dt.complex128}[name[0]]
    if name.endswith("gemm_ex"):
        return blas.gemm_ex_address(dtype)
    return blas.gemv_address(dtype) if name.endswith("gemv") else blas.gemm_address(dtype)


def _generate_runner(g: CompiledGraph, verified: int = 0) -> Any:
    """The source of `g.runner()` (see there), compiled."""
    consts: dict[str, Any] = {
        "DENSE": DENSE_CLASSES,
        "general": g._call,
        "tls": g._tls,
        "scratch": g._scratch,
        "pack": g._pack,
        "entry": g._entry,
    }
    for i, p in enumerate(g._params):
        if i >= verified:
            consts[f"D{i}"] = p.dtype
    in_place = dict(g._in_place)
    makes: dict[int, list[str]] = {}
    for k, (shape, d, strides, _) in enumerate(g._outs):
        if k not in in_place:  # `Tensor._empty` written out, one tag per output
            makes[k], names = Tensor._empty_source(shape, d, strides, f"o{k}", tag=f"_{k}")
            consts.update(names)
    if g._err_span is not None:
        consts.update(check=g._check_errors)
    if g._hold_blas:
        consts.update(hold=blas.hold_single_threaded, release=blas.release_single_threaded)
    source = runner_source(
        [(p.shape, p.strides) for p in g._params],
        verified,
        in_place,
        len(g._outs),
        makes,
        g._extras,
        None if g._err_span is None else [offset // 8 for offset, _ in g._errors],
        g._hold_blas,
    )
    return define(source, f"<llgrad runner @{g.graph.name}>", consts, "run")
