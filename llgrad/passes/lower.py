"""Lowering: fusion groups -> the schedule IR (`schedule.program.Program`).

`lower(fusion)` turns each kernel group into *launches*: a kernel spec (`schedule.*`) plus
its argument block, in which every size and stride is a constant (shapes are static) and
every pointer is a `Ptr`: a buffer plus a constant byte offset. Some groups take several
launches (a scatter copies its base first; a large full reduction runs per-chunk
partials, then combines them; a matmul operand that BLAS cannot read in place is copied
first; cat copies each input into its slice of the result). Every buffer a launch touches
records the step, which gives the memory planner its liveness intervals.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..ir import dtypes as dt
from ..ir import registry
from ..ir.dtypes import DType
from ..ir.graph import Node
from ..ir.interpret import to_bfloat16_bits
from ..ir.printer import format_type
from ..ops.reduction import ARG_REDUCTIONS, normalize_axes
from ..schedule import collective as co
from ..schedule import elementwise as ew
from ..schedule import index as gx
from ..schedule import matmul as mm
from ..schedule import reduce as rd
from ..schedule import row as rw
from ..schedule.layout import Layout, Read, broadcast_strides, collapse, contiguous_strides
from ..schedule.program import PARALLEL_FOR, PARALLEL_MIN_WORK, Access, Buffer, Launch, Program, Ptr
from .fusion import FusionPlan, KernelGroup

SPLIT_MIN_MACS = 1 << 21  # matmul multiply-adds below which one core wins
INT32_MAX = 2**31 - 1
_MPI_MAX_COUNT = 1 << 30  # elements per MPI call (its counts are C ints)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def encode(values: np.ndarray, d: DType) -> bytes:
    """Values (NumPy) as the bytes dtype `d` stores them."""
    if d is dt.bfloat16:
        return to_bfloat16_bits(values).tobytes()
    if d is dt.bool_:
        return np.asarray(values).astype(np.bool_).astype(np.uint8).tobytes()
    with np.errstate(all="ignore"):
        return np.asarray(values).astype(d.np).tobytes()


def _scalar_bytes(value: Any, d: DType) -> bytes:
    if d.kind in "iu" and isinstance(value, float):
        value = int(value)
    return encode(np.array(value), d)


class _Lowering:
    def __init__(
        self,
        fusion: FusionPlan,
        threads: int,
        gemm_single_threaded: Callable[[int, int, int, DType], bool],
        mpi_handle_bits: Callable[[], int] | None = None,
        tile_epilogues: Callable[[DType], bool] = lambda d: False,
        min_work: int = PARALLEL_MIN_WORK,
    ):
        self.min_work = min_work
        self.gemm_single_threaded = gemm_single_threaded
        self.tile_epilogues = tile_epilogues
        self.mpi_handle_bits = mpi_handle_bits
        # collectives posted and not yet waited for: their send and receive buffers ->
        # the function that adds the wait (run before any launch touches either)
        self.in_flight: dict[Buffer, Callable[[], None]] = {}
        self.fusion = fusion
        self.g = fusion.graph
        self.threads = threads
        self.names = fusion.names
        self.launches: list[Launch] = []
        self.buffers: list[Buffer] = []
        self.extras: list[str] = []
        self.errors: list[Launch] = []
        self.inputs = [
            self.buffer(f"in{i}", p.dtype.itemsize * _numel(p.shape), "input", node=p, slot=i)
            for i, p in enumerate(self.g.params)
        ]
        self.outputs = [
            self.buffer(f"out{k}", o.dtype.itemsize * _numel(o.shape), "output", node=o, slot=k)
            for k, o in enumerate(self.g.outputs)
        ]
        self.node_buffers: dict[Node, Buffer] = dict(zip(self.g.params, self.inputs))
        for k, o in fusion.direct_outputs.items():
            self.node_buffers[o] = self.outputs[k]
        self.scalars: dict[tuple[bytes, str], Buffer] = {}
        self.error_buffer: Buffer | None = None

    # -- buffers ------------------------------------------------------------------------
    def buffer(self, name: str, nbytes: int, kind: str, **kw: Any) -> Buffer:
        b = Buffer(name, nbytes, kind, **kw)
        self.buffers.append(b)
        return b

    def buffer_of(self, n: Node) -> Buffer:
        b = self.node_buffers.get(n)
        if b is not None:
            return b
        name = self.names.get(n, n.op).lstrip("%")
        if n.op == "const":
            value = n.attr("value")
            ref = registry.get("const").reference
            if isinstance(value, tuple):
                payload = encode(ref(value=value, dtype=n.dtype, shape=n.shape), n.dtype)
            else:
                payload = encode(ref(value=value, dtype=n.dtype, shape=()), n.dtype)
            b = self.buffer(f"c{name}", len(payload), "const", node=n, payload=payload)
        else:
            b = self.buffer(f"t{name}", n.dtype.itemsize * _numel(n.shape), "temp", node=n)
        self.node_buffers[n] = b
        return b

    def scalar(self, value: Any, d: DType) -> Buffer:
        """A module constant holding one value of dtype `d` (fills, identities)."""
        payload = _scalar_bytes(value, d)
        key = (payload, d.name)
        if key not in self.scalars:
            self.scalars[key] = self.buffer(
                f"k{len(self.scalars)}_{d.short}", len(payload), "const", payload=payload
            )
        return self.scalars[key]

    def scratch(self, name: str, nbytes: int, kind: str = "scratch") -> Buffer:
        return self.buffer(f"s{len(self.buffers)}_{name}", nbytes, kind)

    def read_ptr(self, r: Read) -> Ptr:
        return Ptr(self.buffer_of(r.base), r.layout.offset * r.base.dtype.itemsize)

    def out_buffer(self, grp: KernelGroup) -> Buffer:
        if grp.output_slot >= 0:
            return self.outputs[grp.output_slot]
        return self.buffer_of(grp.outputs[0])

    def add(self, launch: Launch) -> None:
        if self.in_flight:
            for v in launch.block:
                if isinstance(v, Ptr) and v.buffer in self.in_flight:
                    self.in_flight[v.buffer]()
        step = len(self.launches)
        for v in launch.block:
            if isinstance(v, Ptr) and v.buffer is not None:
                v.buffer.touch(step)
        self.launches.append(launch)

    def extra(self, name: str) -> Ptr:
        if name not in self.extras:
            self.extras.append(name)
        return Ptr(None, 0, name)

    # -- generic copy -------------------------------------------------------------------
    def copy(
        self,
        grp: KernelGroup,
        src: Ptr,
        src_dtype: DType,
        src_strides: tuple[int, ...],
        dst: Ptr,
        dst_dtype: DType,
        dst_strides: tuple[int, ...],
        shape: tuple[int, ...],
        what: str,
    ) -> None:
        """dst[i] = src[i] over `shape` (with a cast when the dtypes differ)."""
        n = _numel(shape)
        if n == 0:
            return
        nodes = (
            () if src_dtype is dst_dtype else (ew.ExprNode("cast", (0,), (("dtype", dst_dtype),)),)
        )
        expr = ew.Expr((src_dtype,), nodes, (1 if nodes else 0,))
        self.elementwise_launch(grp, expr, shape, [(dst, dst_strides)], [(src, src_strides)], what)

    def elementwise_launch(
        self,
        grp: KernelGroup,
        expr: ew.Expr,
        shape: tuple[int, ...],
        outs: list[tuple[Ptr, tuple[int, ...]]],
        ins: list[tuple[Ptr, tuple[int, ...]]],
        what: str,
    ) -> None:
        n = _numel(shape)
        if n == 0:
            return
        cshape, cstrides = collapse(tuple(shape), [st for _, st in outs + ins])
        inner = tuple(st[-1] if st[-1] in (0, 1) else None for st in cstrides)
        spec = ew.ElementwiseKernel(expr, len(cshape), inner)
        block: list[Any] = [0, cshape[0], *cshape[1:]]
        for (p, _), st in zip(outs + ins, cstrides):
            block += [p, *st]
        out_dtypes = ew.out_dtypes(expr)
        accesses = [
            Access(p, d, cshape, st, "store") for (p, _), st, d in zip(outs, cstrides, out_dtypes)
        ]
        accesses += [
            Access(p, d, cshape, st, "load")
            for (p, _), st, d in zip(ins, cstrides[len(outs) :], expr.in_dtypes)
        ]
        self.add(
            Launch(
                grp,
                spec,
                block,
                what,
                extent=cshape[0],
                split=True,
                work=n * expr.cost(),
                node=grp.root,
                loops=_loops(cshape, ()),
                accesses=tuple(accesses),
                body=expr.text(),
            )
        )

    def fill(
        self,
        grp: KernelGroup,
        value: Any,
        d: DType,
        dst: Ptr,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        what: str,
    ) -> None:
        src = Ptr(self.scalar(value, d))
        self.copy(grp, src, d, (0,) * len(shape), dst, d, strides, shape, what)

    # -- groups -------------------------------------------------------------------------
    def run(self) -> Program:
        for grp in self.fusion.groups:
            getattr(self, f"lower_{grp.kind.value}")(grp)
        for wait in list(self.in_flight.values()):
            wait()
        if self.error_buffer is not None:  # zeroed before and read after every call
            self.error_buffer.touch(0)
            self.error_buffer.touch(len(self.launches))
        if any(launch.parallel(self.threads) for launch in self.launches):
            self.extra(PARALLEL_FOR)  # the native pool's dispatcher (runtime.pool)
        return Program(
            self.g,
            self.fusion,
            self.launches,
            self.buffers,
            self.inputs,
            self.outputs,
            self.extras,
            self.node_buffers,
            self.errors,
            self.threads,
            self.error_buffer,
        )

    def lower_elementwise(self, grp: KernelGroup) -> None:
        space = grp.space
        dense = contiguous_strides(space)
        outs = [(Ptr(self.buffer_of(o)), dense) for o in grp.outputs]
        ins = [(self.read_ptr(r), r.layout.strides) for r in grp.inputs]
        self.elementwise_launch(
            grp, grp.expr, space, outs, ins, f"{len(grp.nodes)} elementwise ops"
        )

    def lower_row(self, grp: KernelGroup) -> None:
        """One row kernel: rows split across threads, each row's passes in L1; column
        sums accumulate per piece of rows into float64 partials, then one small
        reduction adds the pieces into the output."""
        region = grp.region
        rows, cols = region.rows, region.cols
        work = rows * cols
        pieces = (
            min(self.threads, rows)
            if (self.threads > 1 and work >= self.min_work and rows >= 2)
            else 1
        )
        step = -(-rows // pieces)  # as the executor cuts a parallel range
        pieces = -(-rows // step)
        block: list[Any] = [0, rows, cols, step]
        inner: list[int | None] = []
        columns: list[tuple[Node, Buffer]] = []
        kinds: list[str] = []
        for o in grp.outputs:
            if region.is_column(o):
                partial = self.scratch("column_partials", pieces * cols * 8)
                columns.append((o, partial))
                block += [Ptr(partial), cols, 1]
                inner.append(1)
                kinds.append("column")
                continue
            full = o.shape == region.space
            block += [Ptr(self.buffer_of(o)), cols if full else 1, 1 if full else 0]
            inner.append(1 if full else 0)
            kinds.append("full" if full else "row")
        for r in grp.inputs:
            sr, sc = r.layout.strides
            block += [self.read_ptr(r), sr, sc]
            inner.append(sc if sc in (0, 1) else None)
        row_inputs = tuple(r.layout.strides[1] == 0 for r in grp.inputs)
        spec = rw.RowKernel(grp.expr, row_inputs, tuple(inner), cols)
        space = (rows, cols)
        pl = rw.plan(spec)
        out_dtypes = [pl.dtypes[o] for o in grp.expr.outputs]
        accesses = []
        for k, (d, kind) in enumerate(zip(out_dtypes, kinds)):
            ptr, rs, cs = block[4 + 3 * k : 7 + 3 * k]
            if kind == "column":
                accesses.append(Access(ptr, dt.float64, (pieces, cols), (cols, 1), "update"))
            else:
                accesses.append(Access(ptr, d, space, (rs, cs), "store"))
        accesses += [
            Access(self.read_ptr(r), r.base.dtype, space, r.layout.strides, "load")
            for r in grp.inputs
        ]
        passes = pl.passes
        self.add(
            Launch(
                grp,
                spec,
                block,
                f"row kernel of {len(grp.nodes)} ops, "
                f"{passes} pass{'es' if passes > 1 else ''} per row",
                extent=rows,
                split=True,
                work=work,
                node=grp.root,
                loops=((rows, "par"), (cols, "red")),
                accesses=tuple(accesses),
                body=grp.expr.text(),
            )
        )
        for o, partial in columns:
            self.add_pieces(grp, o, partial, pieces, cols)

    def add_pieces(
        self, grp: KernelGroup, o: Node, partial: Buffer, pieces: int, cols: int
    ) -> None:
        """out[c] = sum over pieces of partial[piece, c] (float64 -> the output dtype)."""
        loops = rd.order_loops((pieces, cols), (cols, 1), (0, 1), (0, 0), (True, False))
        spec = rd.make_spec("sum", dt.float64, o.dtype, loops)
        out = Ptr(self.buffer_of(o))
        block = self.reduce_block(
            spec, loops, [Ptr(partial)], out, col_width=loops.column_width(1, False)
        )
        self.add(
            Launch(
                grp,
                spec,
                block,
                "column sum of the pieces",
                extent=block[1],
                split=False,
                work=pieces * cols,
                node=o,
                loops=((pieces, "red"), (cols, "seq")),
                accesses=(
                    Access(Ptr(partial), dt.float64, (pieces, cols), (cols, 1), "load"),
                    Access(out, o.dtype, (cols,), (1,), "store"),
                ),
            )
        )

    def lower_copy(self, grp: KernelGroup) -> None:
        (r,) = grp.inputs
        shape = r.layout.shape
        dst = Ptr(self.out_buffer(grp))
        self.copy(
            grp,
            self.read_ptr(r),
            r.base.dtype,
            r.layout.strides,
            dst,
            r.base.dtype,
            contiguous_strides(shape),
            shape,
            "copy",
        )

    def lower_flip(self, grp: KernelGroup) -> None:
        (r,) = grp.inputs
        n = grp.root
        lay = r.layout.flip(n.attr("axes"))
        src = Read(r.base, lay)
        self.copy(
            grp,
            self.read_ptr(src),
            n.dtype,
            lay.strides,
            Ptr(self.out_buffer(grp)),
            n.dtype,
            contiguous_strides(n.shape),
            n.shape,
            "flip",
        )

    def lower_cat(self, grp: KernelGroup) -> None:
        n = grp.root
        axis = n.attr("axis") % n.type.ndim
        dense = contiguous_strides(n.shape)
        out = self.out_buffer(grp)
        pos = 0
        for x, r in zip(n.inputs, grp.inputs):
            off = pos * dense[axis] * n.dtype.itemsize
            self.copy(
                grp,
                self.read_ptr(r),
                n.dtype,
                r.layout.strides,
                Ptr(out, off),
                n.dtype,
                dense,
                x.shape,
                f"cat part at {pos}",
            )
            pos += x.shape[axis]

    def lower_pad(self, grp: KernelGroup) -> None:
        n = grp.root
        (r,) = grp.inputs
        lows, highs, interior = n.attr("lows"), n.attr("highs"), n.attr("interior")
        if any(v < 0 for v in lows + highs + interior):
            raise ValueError(
                f"pad: compiled graphs take non-negative padding, got lows "
                f"{list(lows)}, highs {list(highs)}, interior {list(interior)} "
                f"({self.names.get(n)}: {format_type(n.type)})"
            )
        dense = contiguous_strides(n.shape)
        out = self.out_buffer(grp)
        if any(lows) or any(highs) or (any(interior) and r.layout.numel > 1):
            self.fill(grp, n.attr("value"), n.dtype, Ptr(out), n.shape, dense, "pad fill")
        off = sum(lo * st for lo, st in zip(lows, dense)) * n.dtype.itemsize
        strides = tuple(st * (it + 1) for st, it in zip(dense, interior))
        self.copy(
            grp,
            self.read_ptr(r),
            n.dtype,
            r.layout.strides,
            Ptr(out, off),
            n.dtype,
            strides,
            r.layout.shape,
            "pad interior",
        )

    def lower_reduce(self, grp: KernelGroup) -> None:
        r = grp.root
        op = r.op
        x_shape = grp.space
        axes = r.attr("axes")

        norm = normalize_axes(op, axes, x_shape)
        n_in, n_out = _numel(x_shape), _numel(r.shape)
        out = self.out_buffer(grp)
        if n_out == 0:
            return
        if n_in == 0:
            self.fill(
                grp,
                1 if op == "prod" else 0,
                r.dtype,
                Ptr(out),
                r.shape,
                contiguous_strides(r.shape),
                f"{op} of nothing",
            )
            return
        reduced = tuple(d in norm for d in range(len(x_shape)))
        out_strides = contiguous_strides(tuple(1 if red else n for red, n in zip(reduced, x_shape)))
        if op in ARG_REDUCTIONS:
            index = contiguous_strides(x_shape) if not axes else tuple(1 for _ in x_shape)
        else:
            index = tuple(0 for _ in x_shape)
        reads = grp.inputs
        side = [(Ptr(self.buffer_of(o)), o.dtype) for o in grp.outputs[1:]]
        dense = contiguous_strides(x_shape)  # side outputs: dense over the input space
        extra = tuple(rd_.layout.strides for rd_ in reads[1:]) + (dense,) * len(side)
        loops = rd.order_loops(x_shape, reads[0].layout.strides, out_strides, index, reduced, extra)
        in_dtype = r.inputs[0].dtype
        prologue = grp.expr
        red = [i for i, flag in enumerate(loops.reduced) if flag]
        chunk = max(red, key=lambda i: loops.sizes[i])
        width = loops.column_width(self.threads, split_columns=loops.reduced[0])
        two_stage = (
            self.threads > 1
            and n_in >= self.min_work
            and loops.split_extent(width) < self.threads
            and loops.sizes[chunk] >= 2
            and n_out * self.threads * 4 <= n_in
        )
        what = f"{op}{' with prologue' if prologue is not None else ''}"
        if side:
            what += f" and {len(side)} side output{'s' if len(side) > 1 else ''}"
        ptrs = [self.read_ptr(x) for x in reads] + [p for p, _ in side]
        if not two_stage:
            spec = rd.make_spec(op, in_dtype, r.dtype, loops, prologue=prologue)
            block = self.reduce_block(spec, loops, ptrs, Ptr(out), col_width=width)
            self.add(
                Launch(
                    grp,
                    spec,
                    block,
                    what,
                    extent=block[1],
                    split=True,
                    work=n_in,
                    node=r,
                    **_reduce_view(loops, reads, ptrs, Ptr(out), r.dtype, op, prologue),
                )
            )
            return
        n = loops.sizes[chunk]
        step = -(-n // min(self.threads, n))
        chunks = -(-n // step)
        wide = rd.wide_dtype(op, in_dtype)
        is_arg = op in ARG_REDUCTIONS
        partial = self.scratch("partial", chunks * n_out * wide.itemsize)
        index_buf = self.scratch("partial_index", chunks * n_out * 8) if is_arg else None
        spec1 = rd.make_spec(op, in_dtype, wide, loops, "partial", chunk, prologue=prologue)
        block1 = self.reduce_block(
            spec1,
            loops,
            ptrs,
            Ptr(partial),
            chunk_step=step,
            chunk_stride=n_out,
            hi=chunks,
            col_width=loops.column_width(self.threads, False),
        )
        sl1 = rd.Slots(spec1)
        if index_buf is not None:
            block1[sl1.out_index_ptr] = Ptr(index_buf)
        self.add(
            Launch(
                grp,
                spec1,
                block1,
                what + " (partials)",
                extent=chunks,
                split=True,
                work=n_in,
                node=r,
                **_reduce_view(
                    loops, reads, ptrs, Ptr(partial), wide, op, prologue, chunks=chunks, n_out=n_out
                ),
            )
        )
        loops2 = rd.order_loops((chunks, n_out), (n_out, 1), (0, 1), (0, 0), (True, False))
        spec2 = rd.make_spec(op, wide, r.dtype, loops2, "combine" if is_arg else "full")
        block2 = self.reduce_block(
            spec2,
            loops2,
            [Ptr(partial)],
            Ptr(out),
            col_width=loops2.column_width(self.threads, False),
        )
        if index_buf is not None:
            block2[rd.Slots(spec2).in_index_ptr] = Ptr(index_buf)
        self.add(
            Launch(
                grp,
                spec2,
                block2,
                f"{op} (combine)",
                extent=block2[1],
                split=False,
                work=chunks * n_out,
                node=r,
                loops=((chunks, "red"), (n_out, "seq")),
                accesses=(
                    Access(Ptr(partial), wide, (chunks * n_out,), (1,), "load"),
                    Access(Ptr(out), r.dtype, (n_out,), (1,), "store"),
                ),
            )
        )

    @staticmethod
    def reduce_block(
        spec: rd.ReduceKernel, loops: rd.Loops, ins: list[Ptr], out: Ptr, **kw: Any
    ) -> list[Any]:
        block: list[Any] = rd.pack(spec, loops, 0, 0, extra_in_ptrs=(0,) * (len(ins) - 1), **kw)
        sl = rd.Slots(spec)
        block[sl.in_ptr] = ins[0]
        block[sl.out_ptr] = out
        for j, p in enumerate(ins[1:]):
            block[sl.extra_inputs + j * (1 + spec.rank)] = p
        return block

    def lower_matmul(self, grp: KernelGroup) -> None:
        n_ = grp.root
        a_read, b_read, *epi_reads = grp.inputs
        d = n_.dtype
        epilogue = None
        if grp.expr is not None:  # C is a buffer of its own only when read elsewhere
            out = (
                self.buffer_of(n_)
                if n_ in grp.outputs
                else self.scratch("product", d.itemsize * _numel(n_.shape))
            )
            epilogue = (
                grp.expr,
                [Ptr(self.buffer_of(o)) for o in grp.outputs if o is not n_],
                epi_reads,
            )
        else:
            out = self.out_buffer(grp)
        n, k = a_read.layout.shape[-2:]
        m = b_read.layout.shape[-1]
        use_blas = mm.uses_blas(d)
        if use_blas and max(n, m, k) > INT32_MAX:
            raise RuntimeError(
                f"matmul: {d.name} runs on BLAS, whose sizes are 32-bit; "
                f"n, m, k = {n}, {m}, {k} ({self.names.get(n_)})"
            )
        if 0 in n_.shape:
            return
        if k == 0:
            self.fill(
                grp, 0, d, Ptr(out), n_.shape, contiguous_strides(n_.shape), "matmul with k = 0"
            )
            return
        a_ptr, a_lay = self.matmul_operand(grp, a_read, n, k, use_blas, is_b=False)
        b_ptr, b_lay = self.matmul_operand(grp, b_read, k, m, use_blas, is_b=True)
        self.matmul_launch(
            grp, n_, out, a_ptr, a_lay, b_ptr, b_lay, n, m, k, use_blas, epilogue, grp.alpha
        )

    def matmul_operand(
        self, grp: KernelGroup, r: Read, rows: int, cols: int, use_blas: bool, is_b: bool
    ) -> tuple[Ptr, Layout]:
        """The operand as the kernel can read it: in place, or a dense copy."""
        lay = r.layout
        rs, cs = lay.strides[-2:]
        if use_blas:
            ok = mm.gemm_layout(rows, cols, rs, cs) is not None
        else:
            ok = not is_b or cols <= 1 or cs == 1
        if ok:
            return self.read_ptr(r), lay
        tmp = self.scratch("operand", r.base.dtype.itemsize * lay.numel)
        dense = contiguous_strides(lay.shape)
        self.copy(
            grp,
            self.read_ptr(r),
            r.base.dtype,
            lay.strides,
            Ptr(tmp),
            r.base.dtype,
            dense,
            lay.shape,
            "matmul operand copy",
        )
        return Ptr(tmp), Layout(lay.shape, dense, 0)

    def matmul_launch(
        self,
        grp: KernelGroup,
        node: Node,
        out: Buffer,
        a_ptr: Ptr,
        a: Layout,
        b_ptr: Ptr,
        b: Layout,
        n: int,
        m: int,
        k: int,
        use_blas: bool,
        epilogue: tuple[ew.Expr, list[Ptr], list[Read]] | None = None,
        alpha: float = 1.0,
    ) -> None:
        """The batch loop around gemm (or the generated loops); as eager's `_plan`.

        `epilogue` (2-D BLAS products only, see `fusion.merge_epilogues`): the expression,
        its output buffers (dense in C's shape) and its other reads; each panel of C is
        passed through it right after its gemm call."""
        shape = node.shape
        batch = shape[:-2]
        c_strides = contiguous_strides(shape)
        strides = {
            "c": c_strides[:-2],
            "a": broadcast_strides(a.shape[:-2], a.strides[:-2], batch),
            "b": broadcast_strides(b.shape[:-2], b.strides[:-2], batch),
        }
        # epilogue operands: outputs, then reads, each (ptr, dtype, row stride, col stride)
        epi: list[tuple[Ptr, DType, int, int]] = []
        if epilogue is not None:
            assert not batch and use_blas, "epilogues are fused into 2-D BLAS products only"
            expr, out_ptrs, reads = epilogue
            epi = [(p, d_, m, 1) for p, d_ in zip(out_ptrs, ew.out_dtypes(expr))]
            epi += [(self.read_ptr(r), r.base.dtype, *r.layout.strides) for r in reads]
        strides = {
            x: tuple(0 if size == 1 else s for size, s in zip(batch, st))
            for x, st in strides.items()
        }
        rows = {"c": c_strides[-2], "a": a.strides[-2], "b": b.strides[-2]}
        cols = {"c": 1, "a": a.strides[-1], "b": b.strides[-1]}
        folded = mm.fold_rows(batch, n, strides, rows)
        if folded is not None and (
            not use_blas
            or (folded[0] <= INT32_MAX and mm.gemm_layout(folded[0], k, folded[1], cols["a"]))
        ):
            n, rows["a"] = folded
            batch, strides = (), {"c": (), "a": (), "b": ()}
        epi_batch: list[tuple[int, ...]] = [() for _ in epi]
        if (
            use_blas
            and not batch
            and self.threads > 1
            and n * m * k >= SPLIT_MIN_MACS
            and self.gemm_single_threaded(n, m, k, node.dtype)
        ):
            n0 = n
            batch, strides, n, m = mm.panels(self.threads, n, m, rows, cols)
            if batch:  # a panel of rows (or of columns) of every epilogue operand
                epi_batch = [((n * rs) if n != n0 else (m * cs),) for _, _, rs, cs in epi]
        sizes, (cs, as_, bs, *es) = collapse(
            batch, [strides["c"], strides["a"], strides["b"]] + epi_batch
        )
        flags = [0, 0]
        if use_blas:
            for x, (label, r_, c_) in enumerate((("a", n, k), ("b", k, m))):
                lay = mm.gemm_layout(r_, c_, rows[label], cols[label])
                assert lay is not None, "operand layouts were fixed above"
                flags[x] = int(lay[0])
                rows[label], cols[label] = (1, lay[1]) if lay[0] else (lay[1], 1)
            rows["c"] = max(1, rows["c"])
        else:
            cols["b"] = 1
        total = _numel(sizes)
        extent = total if use_blas else total * n
        block: list[Any] = [0, extent, n, m, k, *sizes]
        for label, ptr, bstrides in (("c", Ptr(out), cs), ("a", a_ptr, as_), ("b", b_ptr, bs)):
            block += [ptr, *bstrides, rows[label], cols[label]]
        prefix = (
            {dt.float32: "s", dt.float64: "d", dt.complex64: "c", dt.complex128: "z"}[node.dtype]
            if use_blas
            else ""
        )
        tile = epilogue is not None and self.tile_epilogues(node.dtype)
        gemm = self.extra(prefix + ("gemm_ex" if tile else "gemm")) if use_blas else 0
        # (gemv only for a vector: otherwise the kernel never calls it, and asking for
        # its address would load a library whose threads then spin for nothing)
        gemv = self.extra(prefix + "gemv") if use_blas and 1 in (n, m) else 0
        block += [*flags, gemm, gemv, mm.alpha_bits(alpha)]
        for (p, _, rs, cs_), bstrides in zip(epi, es):
            block += [p, *bstrides, rs, cs_]
        spec = mm.MatmulKernel(
            node.dtype,
            len(sizes),
            epilogue[0] if epilogue is not None else None,
            tuple(c if c in (0, 1) else None for _, _, _, c in epi),
            tile,
        )
        macs = total * n * m * k
        split = macs >= SPLIT_MIN_MACS and (
            not use_blas or self.gemm_single_threaded(n, m, k, node.dtype)
        )
        nb = _numel(sizes)
        accesses = (
            Access(a_ptr, a_lay_dtype(node, 0), (nb, n * k), (1 if any(as_) else 0, 1), "load"),
            Access(b_ptr, a_lay_dtype(node, 1), (nb, k * m), (1 if any(bs) else 0, 1), "load"),
            Access(Ptr(out), node.dtype, (nb, n * m), (1, 1), "store"),
        )
        what = "matmul" + (" (BLAS)" if use_blas else "")
        scale = "" if alpha == 1.0 else f"{alpha!r} * "
        body = f"C[{n}x{m}] = {scale}A[{n}x{k}] @ B[{k}x{m}]"
        if epilogue is not None:
            n_out = len(epilogue[1])
            accesses += tuple(
                Access(p, d_, shape, (rs, cs_), "store" if j < n_out else "load")
                for j, (p, d_, rs, cs_) in enumerate(epi)
            )
            what += f" with epilogue of {len(epilogue[0].nodes)} ops"
            body += f"; epilogue {epilogue[0].text()}"
        self.add(
            Launch(
                grp,
                spec,
                block,
                what,
                extent=extent,
                split=split,
                work=PARALLEL_MIN_WORK if split else macs,
                node=node,
                loops=tuple(
                    (s_, "par" if split and j == 0 else "seq") for j, s_ in enumerate(sizes)
                )
                + ((n, "seq"), (m, "seq"), (k, "red")),
                accesses=accesses,
                body=body,
            )
        )

    def lower_gather(self, grp: KernelGroup) -> None:
        node = grp.root
        x_read, idx_read = grp.inputs
        shape = node.shape
        out = self.out_buffer(grp)
        if _numel(shape) == 0:
            return
        x_ptr = self.dense_operand(grp, x_read)
        self.index_launch(
            grp,
            node,
            "gather",
            shape,
            Ptr(out),
            contiguous_strides(shape),
            x_ptr,
            _numel(node.inputs[0].shape),
            idx_read,
            split=True,
        )

    def lower_scatter(self, grp: KernelGroup) -> None:
        node = grp.root
        base_read, idx_read, src_read = grp.inputs
        out = self.out_buffer(grp)
        dense = contiguous_strides(node.shape)
        self.copy(
            grp,
            self.read_ptr(base_read),
            node.dtype,
            base_read.layout.strides,
            Ptr(out),
            node.dtype,
            dense,
            node.shape,
            f"{node.op} base copy",
        )
        shape = idx_read.layout.shape
        if _numel(shape) == 0:
            return
        src = src_read.layout.broadcast_to(shape)
        mode = "scatter_add" if node.op == "scatter_add" else "put"
        self.index_launch(
            grp,
            node,
            mode,
            shape,
            self.read_ptr(Read(src_read.base, src)),
            src.strides,
            Ptr(out),
            _numel(node.shape),
            idx_read,
            split=False,
        )

    def dense_operand(self, grp: KernelGroup, r: Read) -> Ptr:
        """A pointer to `r`'s elements in row-major order (copied when the view is not)."""
        if r.layout.is_dense():
            return self.read_ptr(r)
        tmp = self.scratch("dense", r.base.dtype.itemsize * r.layout.numel)
        self.copy(
            grp,
            self.read_ptr(r),
            r.base.dtype,
            r.layout.strides,
            Ptr(tmp),
            r.base.dtype,
            contiguous_strides(r.layout.shape),
            r.layout.shape,
            "dense copy",
        )
        return Ptr(tmp)

    def index_launch(
        self,
        grp: KernelGroup,
        node: Node,
        mode: str,
        shape: tuple[int, ...],
        data: Ptr,
        data_strides: tuple[int, ...],
        x: Ptr,
        x_numel: int,
        idx: Read,
        split: bool,
    ) -> None:
        x_strides = (0,) * len(shape)
        cshape, (cd, cx, ci) = collapse(
            tuple(shape), [tuple(data_strides), x_strides, idx.layout.strides]
        )
        baked = lambda s: s if s in (0, 1) else None  # noqa: E731
        keys = dict(
            rank=len(cshape),
            index_dtypes=(dt.int64,),
            hoist=ci[-1] == 0,
            x_inner=baked(cx[-1]),
            data_inner=baked(cd[-1]),
        )
        if mode == "scatter_add":
            spec = gx.IndexKernel(mode, dtype=node.dtype, src_dtype=node.dtype, **keys)
        else:
            spec = gx.IndexKernel(mode, width=node.dtype.itemsize, **keys)
        err = self.error_record()
        block: list[Any] = [
            0,
            cshape[0],
            *cshape[1:],
            err,
            x,
            *cx,
            data,
            *cd,
            self.read_ptr(idx),
            x_numel,
            1,
            *ci,
        ]
        d = node.dtype
        moved = {"gather": ("load", "store"), "offset": (None, "store"), "check": (None, None)}.get(
            mode, ("update", "load")
        )
        accesses = [Access(idx_ptr := self.read_ptr(idx), idx.base.dtype, cshape, ci, "load")]
        if moved[0] is not None:
            accesses.append(Access(x, d, cshape, (1,) * len(cshape), moved[0]))
        if moved[1] is not None:
            accesses.append(Access(data, d, cshape, cd, moved[1]))
        del idx_ptr
        launch = Launch(
            grp,
            spec,
            block,
            mode,
            extent=cshape[0],
            split=split,
            work=_numel(shape),
            err=err,
            node=node,
            loops=_loops(cshape, ()) if split else tuple((s_, "seq") for s_ in cshape),
            accesses=tuple(accesses),
        )
        self.add(launch)
        self.errors.append(launch)

    def error_record(self) -> Ptr:
        """A new 32-byte error record, zeroed before and read after every call."""
        if self.error_buffer is None:
            self.error_buffer = self.scratch("errors", 0, kind="error")
        err = Ptr(self.error_buffer, self.error_buffer.nbytes)
        self.error_buffer.nbytes += 32
        return err

    def lower_collective(self, grp: KernelGroup) -> None:
        """all_reduce: post MPI_Iallreduce now; the wait goes before the first later launch
        that touches its send or receive buffer (`add`), or at the end."""
        n = grp.root
        (r,) = grp.inputs
        d = n.dtype
        if self.mpi_handle_bits is None:
            raise RuntimeError(
                f"all_reduce: this graph calls MPI but the runtime lowering it "
                f"provides no MPI ({self.names.get(n)} at {n.loc})"
            )
        bits = self.mpi_handle_bits()
        count = _numel(n.shape)
        if count == 0:
            return
        out = self.out_buffer(grp)
        if r.layout.offset == 0 and r.layout.is_dense() and r.layout.numel == count:
            send = self.read_ptr(r)
        else:  # MPI reads one dense run
            tmp = self.scratch("send", d.itemsize * count)
            self.copy(
                grp,
                self.read_ptr(r),
                d,
                r.layout.strides,
                Ptr(tmp),
                d,
                contiguous_strides(n.shape),
                n.shape,
                "all_reduce operand",
            )
            send = Ptr(tmp)
        reduce = n.attr("reduce")
        handles = [
            self.extra(f"mpi:type:{d.name}"),
            self.extra(f"mpi:op:{reduce}:{d.name}"),
            self.extra("mpi:comm:world"),
        ]
        for at in range(0, count, _MPI_MAX_COUNT):
            part = min(_MPI_MAX_COUNT, count - at)
            off = at * d.itemsize
            s, o = Ptr(send.buffer, send.byte_offset + off), Ptr(out, off)
            request = Ptr(self.scratch("request", co.REQUEST_BYTES))
            err = self.error_record()
            accesses = (Access(s, d, (part,), (1,), "load"), Access(o, d, (part,), (1,), "store"))
            start = Launch(
                grp,
                co.CollectiveKernel("start", bits),
                [s, o, part, self.extra("mpi:fn:MPI_Iallreduce"), *handles, request, err],
                f"all_reduce {reduce} start",
                ranged=False,
                err=err,
                node=n,
                loops=((part, "seq"),),
                accesses=accesses,
            )
            self.add(start)
            self.errors.append(start)
            # (MPI_Status is 20 bytes in MPICH, 24 in Open MPI; 64 leaves room for others)
            status = Ptr(self.scratch("status", 64))

            def wait(
                s: Ptr = s, o: Ptr = o, request: Ptr = request, status: Ptr = status, err: Ptr = err
            ) -> None:
                self.in_flight.pop(s.buffer, None)
                self.in_flight.pop(o.buffer, None)
                self.add(
                    Launch(
                        grp,
                        co.CollectiveKernel("wait", bits),
                        [self.extra("mpi:fn:MPI_Wait"), request, status, err, s, o],
                        f"all_reduce {reduce} wait",
                        ranged=False,
                        node=n,
                    )
                )

            if s.buffer in self.in_flight:  # an earlier chunk's wait goes first
                self.in_flight[s.buffer]()
            self.in_flight[s.buffer] = self.in_flight[o.buffer] = wait

    def lower_nonzero(self, grp: KernelGroup) -> None:
        node = grp.root
        (r,) = grp.inputs
        rank = len(r.layout.shape)
        spec = gx.NonzeroKernel("fill", node.inputs[0].dtype, rank)
        block: list[Any] = [
            *r.layout.shape,
            self.read_ptr(r),
            *r.layout.strides,
            Ptr(self.out_buffer(grp)),
            node.shape[0],
        ]
        self.add(
            Launch(
                grp,
                spec,
                block,
                "nonzero",
                ranged=False,
                node=node,
                loops=tuple((s_, "seq") for s_ in r.layout.shape),
                accesses=(
                    Access(
                        self.read_ptr(r), r.base.dtype, r.layout.shape, r.layout.strides, "load"
                    ),
                    Access(
                        Ptr(self.out_buffer(grp)),
                        node.dtype,
                        node.shape,
                        contiguous_strides(node.shape),
                        "store",
                    ),
                ),
            )
        )


def lower(
    fusion: FusionPlan,
    threads: int = 1,
    gemm_single_threaded: Callable[[int, int, int, DType], bool] = lambda n, m, k, d: False,
    mpi_handle_bits: Callable[[], int] | None = None,
    tile_epilogues: Callable[[DType], bool] = lambda d: False,
    min_work: int = PARALLEL_MIN_WORK,
) -> Program:
    """Launches and buffers for `fusion` (see the module docstring).

    `gemm_single_threaded(n, m, k, dtype)`: whether one BLAS call of that size uses one core
    only, so that a batch of them may be split across threads (the runtime knows its
    BLAS; by default no gemm launch is split, which never oversubscribes).
    `mpi_handle_bits()`: the width of the MPI library's handles, for graphs that hold
    collectives (the runtime knows its MPI). `tile_epilogues(dtype)`: whether a matmul's
    epilogue runs per tile inside the runtime's gemm (its `gemm_ex` extra). `min_work`:
    the elements below which a row kernel or a reduction is not cut into pieces (a GPU,
    whose pieces are blocks, cuts much smaller work than a CPU's threads)."""
    return _Lowering(
        fusion, threads, gemm_single_threaded, mpi_handle_bits, tile_epilogues, min_work
    ).run()


def _loops(shape: tuple[int, ...], reduced: tuple[bool, ...]) -> tuple[tuple[int, str], ...]:
    """A launch's loop nest: the outermost loop splits across threads."""
    return tuple(
        (n, "red" if (reduced and reduced[d]) else ("par" if d == 0 else "seq"))
        for d, n in enumerate(shape)
    )


def a_lay_dtype(node: Node, j: int) -> DType:
    return node.inputs[j].dtype


def _reduce_view(
    loops: rd.Loops,
    reads: list[Read],
    ptrs: list[Ptr],
    out: Ptr,
    out_dtype: DType,
    op: str,
    prologue: ew.Expr | None,
    chunks: int = 0,
    n_out: int = 0,
) -> dict[str, Any]:
    """The loop nest, operands and body of a reduction launch (for printing and traffic)."""
    sizes = loops.sizes
    in_strides = [loops.in_strides] + [tuple(s) for s in loops.extra_in_strides]
    dtypes = [r.base.dtype for r in reads] if prologue is not None else [reads[0].base.dtype]
    side = ew.out_dtypes(prologue)[1:] if prologue is not None else ()
    accesses = [
        Access(p, d, sizes, st, "load" if k < len(dtypes) else "store")
        for k, (p, d, st) in enumerate(zip(ptrs, dtypes + list(side), in_strides))
    ]
    if chunks:
        accesses.append(Access(out, out_dtype, (chunks * n_out,), (1,), "store"))
    else:
        accesses.append(Access(out, out_dtype, sizes, loops.out_strides, "store"))
    body = f"acc = {op}(" + (prologue.text() if prologue is not None else "x") + ")"
    return {"loops": _loops(sizes, loops.reduced), "accesses": tuple(accesses), "body": body}
