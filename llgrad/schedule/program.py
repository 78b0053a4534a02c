"""The schedule IR: what a compiled graph runs, kernel by kernel, and over which buffers.

A `Program` is a list of `Launch`es in execution order. Each launch is one call of a
kernel: its `spec` (an `ElementwiseKernel`, `ReduceKernel`, `RowKernel`, `IndexKernel`,
`NonzeroKernel` or `MatmulKernel`: the loop nest, what it loads and stores and
accumulates) and its argument block, in which every size and stride is a constant and
every pointer a `Ptr` into a `Buffer` (graph inputs and outputs, module constants, and
arena intermediates whose offsets the memory planner assigns). The fusion and lowering
passes produce it (`passes.fusion`, `passes.lower`, `passes.memory`); codegen lowers it
to one LLVM module (`codegen.graph`). Neither side owns it, so passes never build LLVM
objects and codegen never imports a pass.

`str(program)` prints it: one block per launch with its loop nest over the index space
(outermost first; `n||` a loop split across threads, `n+` a reduced loop carrying
accumulators), the loads and stores with their buffers, element strides over that space
(0: broadcast) and bytes, and the scalar body (`v8=amax(0)`: value 8 is the reduction of
input 0 over the reduced loop); `traffic(program)` counts the bytes read and written per
launch and in total, beside the minimum (each input read once, each output written once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.dtypes import DType
from ..ir.graph import Graph, Node
from .elementwise import ElementwiseKernel
from .matmul import MatmulKernel

ARENA_KINDS = ("temp", "scratch", "error")
KINDS = ("input", "output", "const") + ARENA_KINDS
PARALLEL_MIN_WORK = 1 << 17  # elements below which one core is faster (launch.py)
PARALLEL_FOR = "parallel_for"  # the extra naming the thread pool's dispatcher


@dataclass(eq=False)
class Buffer:
    """A region the compiled code addresses.

    `kind`: "input"/"output" (slot `slot` of the entry's argument block), "const" (bytes
    `payload` in the module), "temp" (a materialized intermediate value), "scratch" (kernel
    working space that is no IR value) or "error" (an index kernel's error record); the
    last three live in the arena at `offset`. `first`/`last` are the launch steps that
    touch it (-1: never touched).
    """

    name: str
    nbytes: int
    kind: str
    node: Node | None = None
    slot: int = -1
    payload: bytes | None = None
    first: int = -1
    last: int = -1
    offset: int = -1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Buffer {self.name}: unknown kind {self.kind!r}")

    @property
    def in_arena(self) -> bool:
        return self.kind in ARENA_KINDS

    def touch(self, step: int) -> None:
        self.first = step if self.first < 0 else min(self.first, step)
        self.last = max(self.last, step)

    def __repr__(self) -> str:
        return f"<Buffer {self.name} {self.kind} {self.nbytes}B>"


@dataclass(frozen=True)
class Ptr:
    """A pointer slot of an argument block: `buffer` + `byte_offset`, or an extra address."""

    buffer: Buffer | None
    byte_offset: int = 0
    extra: str = ""


@dataclass(frozen=True)
class Access:
    """One operand of a launch: `buffer` (via `ptr`) walked over the index space `shape`
    with element `strides` (0: broadcast), loaded, stored, or both (`update`)."""

    ptr: Ptr
    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    mode: str  # "load" | "store" | "update"

    @property
    def elements(self) -> int:
        """Distinct elements touched (broadcast dimensions count once)."""
        n = 1
        for size, st in zip(self.shape, self.strides):
            if st != 0:
                n *= size
        return n

    @property
    def nbytes(self) -> int:
        return self.elements * self.dtype.itemsize

    def bytes_read(self) -> int:
        return self.nbytes if self.mode in ("load", "update") else 0

    def bytes_written(self) -> int:
        return self.nbytes if self.mode in ("store", "update") else 0

    def describe(self) -> str:
        b = self.ptr.buffer
        name = self.ptr.extra if b is None else b.name
        at = f"+{self.ptr.byte_offset}B" if self.ptr.byte_offset else ""
        return (
            f"{self.mode:<6} {name}{at:<6} {self.dtype.short:>4}[{_dims(self.shape)}] "
            f"strides ({_dims(self.strides)})  {_size(self.nbytes)}"
        )


@dataclass(eq=False)
class Launch:
    """One kernel call: its spec, its argument block, and how its range may be split.

    `block[0:2]` is `[lo, hi)` of the kernel's outermost loop when `ranged`; `extent` is
    the whole range. `split`: the pieces of the range may run on different threads, which
    pays when `work` (elements touched, times the per-element op cost for elementwise
    launches) reaches PARALLEL_MIN_WORK.
    """

    group: Any  # the fusion group it computes (inspection)
    spec: Any
    block: list[Any]
    what: str
    extent: int = 0
    ranged: bool = True
    split: bool = False
    work: int = 0
    err: Ptr | None = None  # index kernels: their 32-byte error record
    node: Node | None = None
    # the loop nest (outermost first: size, and "par" (split across threads), "seq" or
    # "red" (reduced, carrying accumulators)), the operands, and the scalar body
    loops: tuple[tuple[int, str], ...] = ()
    accesses: tuple[Access, ...] = ()
    body: str = ""

    def parallel(self, threads: int) -> bool:
        return (
            self.ranged
            and self.split
            and threads > 1
            and self.work >= PARALLEL_MIN_WORK
            and self.extent >= 2
        )

    def bytes_read(self) -> int:
        return sum(a.bytes_read() for a in self.accesses)

    def bytes_written(self) -> int:
        return sum(a.bytes_written() for a in self.accesses)

    def describe(self, index: int, threads: int = 1) -> str:
        kind = type(self.spec).__name__.replace("Kernel", "").lower()
        nest = (
            " ".join(
                f"{n}{_LOOP_MARK[k] if k != 'par' or self.parallel(threads) else ''}"
                for n, k in self.loops
            )
            or "-"
        )
        lines = [
            f"L{index} {kind} [{nest}] {self.what}: reads {_size(self.bytes_read())}, "
            f"writes {_size(self.bytes_written())}"
        ]
        lines += [f"    {a.describe()}" for a in self.accesses]
        if self.body:
            lines.append(f"    body: {self.body}")
        return "\n".join(lines)


_LOOP_MARK = {"par": "||", "seq": "", "red": "+"}


def _dims(xs: tuple[int, ...]) -> str:
    return ",".join(map(str, xs))


def _size(n: int) -> str:
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


@dataclass
class Stage:
    """Launches run by one function of the module; a parallel stage holds exactly one,
    whose range the entry hands to the thread pool (`PARALLEL_FOR`)."""

    launches: list[Launch]
    parallel: bool
    symbol: str = ""

    @property
    def extent(self) -> int:
        return self.launches[0].extent if self.parallel else 0


@dataclass
class Program:
    """A lowered graph: launches in order and every buffer they touch."""

    graph: Graph
    fusion: Any  # the fusion plan it lowers (inspection)
    launches: list[Launch]
    buffers: list[Buffer]
    inputs: list[Buffer]
    outputs: list[Buffer]
    extras: list[str]
    node_buffers: dict[Node, Buffer]
    errors: list[Launch] = field(default_factory=list)
    threads: int = 1
    error_buffer: Buffer | None = None  # every index launch's error record, in order

    def __str__(self) -> str:
        t = traffic(self)
        head = (
            f"schedule of @{self.graph.name}: {len(self.launches)} launches, "
            f"{len(self.buffers)} buffers; moves {_size(t['bytes moved'])} "
            f"(minimum {_size(t['minimum bytes'])})"
        )
        return "\n".join(
            [head] + [launch.describe(i, self.threads) for i, launch in enumerate(self.launches)]
        )

    def stages(self) -> list[Stage]:
        out: list[Stage] = []
        for launch in self.launches:
            if launch.parallel(self.threads):
                out.append(Stage([launch], True))
            elif out and not out[-1].parallel:
                out[-1].launches.append(launch)
            else:
                out.append(Stage([launch], False))
        return out


def traffic(program: Program) -> dict[str, Any]:
    """Bytes each launch reads and writes, the totals, and the least a graph needs: every
    input it reads once and every output written once."""
    per_launch = [
        (launch.what, launch.bytes_read(), launch.bytes_written()) for launch in program.launches
    ]
    read = sum(r for _, r, _ in per_launch)
    written = sum(w for _, _, w in per_launch)
    used = {
        a.ptr.buffer
        for launch in program.launches
        for a in launch.accesses
        if a.ptr.buffer is not None
    }
    minimum = sum(b.nbytes for b in program.inputs if b in used) + sum(
        b.nbytes for b in program.outputs
    )
    return {
        "bytes read": read,
        "bytes written": written,
        "bytes moved": read + written,
        "minimum bytes": minimum,
        "traffic ratio": round((read + written) / minimum, 3) if minimum else 1.0,
        "per launch": per_launch,
    }


def can_write_in_place(program: Program, out_slot: int, in_slot: int) -> bool:
    """Whether output `out_slot` may be written into input `in_slot`'s memory.

    True when exactly one launch touches the output, it is an elementwise launch (or a
    matmul's epilogue) that reads the input at the same elements (same shape and strides)
    it stores the output (so each element is read before it is overwritten, by the same
    iteration), and no later launch reads the input. A training step's parameter update
    `w - lr * g` then writes the new `w` where the old one was, instead of into a new
    buffer that is copied back afterwards. (A gemm operand has an access of another shape,
    so a matmul whose A or B is the input never qualifies.)
    """
    out_buf = program.outputs[out_slot]
    in_buf = program.inputs[in_slot]
    if out_buf.nbytes != in_buf.nbytes:
        return False

    def touches(launch: Launch, buf: Buffer) -> bool:
        return any(isinstance(v, Ptr) and v.buffer is buf for v in launch.block)

    writers = [k for k, l in enumerate(program.launches) if touches(l, out_buf)]
    if len(writers) != 1:
        return False
    at = writers[0]
    launch = program.launches[at]
    if not isinstance(launch.spec, ElementwiseKernel) and not (
        isinstance(launch.spec, MatmulKernel) and launch.spec.epilogue is not None
    ):
        return False
    if any(touches(l, in_buf) for l in program.launches[at + 1 :]):
        return False
    stores = [a for a in launch.accesses if a.ptr.buffer is out_buf]
    loads = [a for a in launch.accesses if a.ptr.buffer is in_buf]
    if len(stores) != 1 or stores[0].mode != "store" or stores[0].ptr.byte_offset != 0:
        return False
    s = stores[0]
    return all(
        a.mode == "load"
        and a.ptr.byte_offset == 0
        and a.dtype == s.dtype
        and a.shape == s.shape
        and a.strides == s.strides
        for a in loads
    )
