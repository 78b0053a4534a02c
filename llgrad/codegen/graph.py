"""Code generation of a whole graph: the schedule IR (`schedule.program`) -> one LLVM module,
one entry point.

`emit(program)` writes the module:

* one function per distinct kernel spec, built by its generator, made `internal` (and
  `alwaysinline` by default) so LLVM specializes it on the constant block;
* one `noinline` wrapper per distinct launch, `launch<i>(ptr noalias ..., [lo, hi])`,
  which stores the block's constants and its pointer arguments into an `alloca` and calls
  the kernel (see `_Emitter.wrapper` for why the pointers arrive as noalias arguments);
* `void entry(int64_t *args)` with `args = [input pointers..., output pointers..., arena
  pointer, extra pointers...]` (extras: BLAS `sgemm`/`dgemm` addresses, passed at run time
  so the cached object holds no process address). For each launch the entry computes the
  pointers (the base pointer plus a constant offset, by GEP; no integer-to-pointer casts)
  and calls the launch's wrapper. Constants of the graph are private globals.
* When a launch is big enough to use several cores, the launches are also cut into
  *stages*: `void stage<i>(int64_t *args, int64_t lo, int64_t hi)`. A parallel stage holds
  one launch whose split loop runs over `[lo, hi)`; a serial stage runs its launches whole.
  `entry` calls the serial stages and hands each parallel one to the native thread pool's
  `parallel_for(stage, args, 0, extent, pieces)` (`codegen.pool`; its address is the extra
  `parallel_for`), so a call is one foreign call whatever it runs on how many cores.

Inlining (`inline=`): kernels inlined into their wrappers with every size and stride a
constant compile fastest and run fastest on small shapes ("auto" lets LLVM decide and
compiles slower; "never" keeps run-time trip counts, which stop a short loop from
vectorizing well); on large memory-bound shapes the three are level. "always" is the
default.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from llvmlite import ir

from ..schedule import collective as sco
from ..schedule import elementwise as sew
from ..schedule import index as sgx
from ..schedule import matmul as smm
from ..schedule import reduce as srd
from ..schedule import row as srw
from ..schedule.program import PARALLEL_FOR, Buffer, Launch, Program, Ptr, Stage
from . import collective as co
from . import elementwise as ew
from . import gather as gx
from . import matmul as mm
from . import reduce as rd
from . import rowwise as rw
from .loops import I64, PTR, ArgBlock
from . import diskcache
from .target import PART_MARKER

__all__ = ["emit", "describe", "stage_layout"]

_BUILDERS = {
    sew.ElementwiseKernel: ew.build,
    srd.ReduceKernel: rd.build,
    sgx.IndexKernel: gx.build_index,
    sgx.NonzeroKernel: gx.build_nonzero,
    smm.MatmulKernel: mm.build,
    srw.RowKernel: rw.build,
    sco.CollectiveKernel: co.build,
}


# --------------------------------------------------------------------------------------
# Emission: one module
# --------------------------------------------------------------------------------------

INLINE_MODES = ("always", "auto", "never")


_PLACEHOLDER = "llgrad.kernel.placeholder"
SPLIT_BYTES = 48_000  # kernel text above which a graph's launches go into two modules


def parts_for(program: Program, inline: str) -> int:
    """Two modules for a graph whose kernels' text exceeds SPLIT_BYTES and that has two
    threads (each module is optimized by its own compile worker), else one."""
    specs = {launch.spec for launch in program.launches}
    if program.threads < 2 or len(specs) < 2:
        return 1
    size = sum(len(_kernel_template(spec, inline)) for spec in specs)
    return 2 if size > SPLIT_BYTES else 1


_kernel_texts: dict[tuple[Any, str], str] = {}


def _kernel_text(spec: Any, name: str, inline: str) -> str:
    """A kernel's module text under `name` (built once per process per spec); a helper
    function named after the kernel (`<placeholder>_tile`) is renamed with it."""
    return _kernel_template(spec, inline).replace(f'@"{_PLACEHOLDER}', f'@"{name}')


def _kernel_template(spec: Any, inline: str) -> str:
    """A kernel's module text with its function named `_PLACEHOLDER` (cached)."""
    text = _kernel_texts.get((spec, inline))
    if text is None:
        module = _BUILDERS[type(spec)](spec, _PLACEHOLDER)
        fn = module.get_global(_PLACEHOLDER)
        fn.linkage = "internal"
        if inline == "always":
            fn.attributes.add("alwaysinline")
        elif inline == "never":
            fn.attributes.add("noinline")
        text = _kernel_texts[(spec, inline)] = str(module)
    return text


def stage_layout(program: Program) -> tuple[list[Stage], list[str]]:
    """The stages and exported symbols of `program`'s module (see the module docstring)."""
    stages = program.stages()
    if not any(s.parallel for s in stages):
        return ([Stage(list(program.launches), False, "entry")] if program.launches else []), [
            "entry"
        ]
    for i, st in enumerate(stages):
        st.symbol = f"stage{i}"
    return stages, ["entry"]


class _Emitter:
    def __init__(self, program: Program, inline: str, parts: int = 1):
        if inline not in INLINE_MODES:
            raise ValueError(f"emit: inline must be one of {INLINE_MODES}, got {inline!r}")
        self.p = program
        self.inline = inline
        self.module = ir.Module(name=program.graph.name)
        # part 0 is `module` (entry, stages, constants); launches' wrappers are spread over
        # the parts by the size of their kernels' text, so the parts optimize in parallel
        self.modules = [self.module] + [
            ir.Module(name=f"{program.graph.name}.{i}") for i in range(1, parts)
        ]
        self.part_bytes = [0] * parts
        self.part_kernels: list[set[str]] = [set() for _ in range(parts)]
        self.kernel_names: dict[Any, str] = {}
        self.kernel_fns: dict[tuple[int, str], ir.Function] = {}
        self.globals: dict[Buffer, ir.GlobalVariable] = {}
        self.n_in = len(program.inputs)
        self.n_out = len(program.outputs)
        self.n_wrappers = 0
        self.wrappers: dict[Any, ir.Function] = {}

    def kernel(self, spec: Any, part: int = 0) -> ir.Function:
        name = self.kernel_names.get(spec)
        if name is None:
            name = self.kernel_names[spec] = (
                f"k{len(self.kernel_names)}_{type(spec).__name__.lower()}"
            )
        fn = self.kernel_fns.get((part, name))
        if fn is None:
            fn = self.kernel_fns[part, name] = ir.Function(
                self.modules[part], ir.FunctionType(ir.VoidType(), [PTR]), name=name
            )
            self.part_kernels[part].add(name)
        return fn

    def _part_for(self, spec: Any) -> int:
        """The part a new wrapper goes to: the lightest so far, counting its kernel's text
        only where that part does not already hold the kernel."""
        if len(self.modules) == 1:
            return 0
        size = len(_kernel_template(spec, self.inline))
        name = self.kernel_names.get(spec)
        cost = [0 if name in held else size for held in self.part_kernels]
        part = min(range(len(self.modules)), key=lambda i: self.part_bytes[i] + cost[i])
        self.part_bytes[part] += cost[part] + 200  # a wrapper's own text, roughly
        return part

    def global_of(self, b: Buffer) -> ir.GlobalVariable:
        gv = self.globals.get(b)
        if gv is None:
            data = bytearray(b.payload or b"\0")
            t = ir.ArrayType(ir.IntType(8), len(data))
            gv = ir.GlobalVariable(self.module, t, f"const.{len(self.globals)}")
            gv.global_constant = True
            gv.linkage = "private"
            gv.unnamed_addr = True
            gv.align = 64
            gv.initializer = ir.Constant(t, data)
            self.globals[b] = gv
        return gv

    # -- function bodies ----------------------------------------------------------------
    def body(
        self, fn: ir.Function, launches: list[Launch], lo: ir.Value | None, hi: ir.Value | None
    ) -> None:
        """Compute every launch's pointers and call its wrapper (see `wrapper`)."""
        entry = fn.append_basic_block("entry")
        b = ir.IRBuilder(entry)
        args = fn.args[0]
        bases: dict[Any, ir.Value] = {}

        def base(slot: int) -> ir.Value:
            if slot not in bases:
                at = b.gep(args, [I64(slot)], inbounds=True, source_etype=I64)
                bases[slot] = b.load(at, typ=PTR, name=f"arg{slot}")
            return bases[slot]

        for launch in launches:
            ranged = launch.ranged and lo is not None
            ptrs = [self.pointer(b, v, base) for v in launch.block if isinstance(v, Ptr)]
            b.call(self.wrapper(launch, ranged), ptrs + ([lo, hi] if ranged else []))
        b.ret_void()

    def wrapper(self, launch: Launch, ranged: bool) -> ir.Function:
        """`void L<i>(ptr noalias p0, ..., [i64 lo, i64 hi])`: fills the launch's block
        (constants and the pointer arguments) in an alloca and calls the kernel.

        The wrapper's pointer arguments are `noalias`: the buffers one launch touches are
        distinct (the memory plan never lets a launch read bytes it writes), and saying so
        lets LLVM vectorize loops that read one arena buffer and write another without
        run-time overlap checks (both pointers derive from the arena, so it could not
        prove them disjoint on its own). The wrapper is `noinline`: inlined into the entry,
        its arguments' noalias facts were lost (a softmax's exp loop then stayed scalar).

        Launches that differ only in their pointers share one wrapper, so a repeated
        structure (the layers of a model) is optimized and compiled once.
        """
        key = (
            launch.spec,
            ranged,
            tuple(("p", v.extra) if isinstance(v, Ptr) else v for v in launch.block),
        )
        fn = self.wrappers.get(key)
        if fn is not None:
            return fn
        slots = [j for j, v in enumerate(launch.block) if isinstance(v, Ptr)]
        params: list[ir.Type] = [PTR] * len(slots) + ([I64, I64] if ranged else [])
        part = self._part_for(launch.spec)
        fnty = ir.FunctionType(ir.VoidType(), params)
        name = f"launch{self.n_wrappers}"
        fn = ir.Function(self.modules[part], fnty, name=name)
        self.n_wrappers += 1
        if part == 0:
            fn.linkage = "internal"
        else:  # defined in another part: called by its name (the
            declared = ir.Function(self.module, fnty, name=name)  # parts share one dylib)
            for j, a in zip(slots, declared.args):
                if not launch.block[j].extra:
                    a.add_attribute("noalias")
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")
        for j, a in zip(slots, fn.args):
            if not launch.block[j].extra:
                a.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        blk = b.alloca(I64, size=I64(len(launch.block)), name="blk")
        blk.type = PTR  # print `ptr`, not llvmlite's typed `i64*`
        ptr_args = dict(zip(slots, fn.args))
        for j, v in enumerate(launch.block):
            if j < 2 and ranged:
                value: ir.Value = fn.args[len(slots) + j]
            elif j in ptr_args:
                value = ptr_args[j]
            else:
                value = I64(int(v))
            slot = b.gep(blk, [I64(j)], inbounds=True, source_etype=I64)
            slot.type = PTR  # an opaque pointer: the slot holds an i64 or a ptr
            b.store(value, slot)
        b.call(self.kernel(launch.spec, part), [blk])
        b.ret_void()
        result = fn if part == 0 else declared
        self.wrappers[key] = result
        return result

    def pointer(self, b: ir.IRBuilder, p: Ptr, base) -> ir.Value:
        if p.extra:
            return base(self.n_in + self.n_out + 1 + self.p.extras.index(p.extra))
        buf = p.buffer
        assert buf is not None
        if buf.kind == "input":
            root = base(buf.slot)
        elif buf.kind == "output":
            root = base(self.n_in + buf.slot)
        elif buf.kind == "const":
            root = self.global_of(buf)
        else:
            root = base(self.n_in + self.n_out)
        offset = p.byte_offset + (buf.offset if buf.in_arena else 0)
        if offset == 0:
            return root
        return b.gep(root, [I64(offset)], inbounds=True, source_etype=ir.IntType(8))

    def run(self) -> tuple[str, list[str], list[Stage]]:
        stages, symbols = stage_layout(self.p)
        entry_t = ir.FunctionType(ir.VoidType(), [PTR])
        entry = ir.Function(self.module, entry_t, name="entry")
        entry.args[0].add_attribute("noalias")
        entry.attributes.add("nounwind")
        if not any(s.parallel for s in stages):
            self.body(entry, self.p.launches, None, None)
        else:
            stage_t = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])
            fns = []
            for st in stages:
                fn = ir.Function(self.module, stage_t, name=st.symbol)
                fn.args[0].add_attribute("noalias")
                fn.attributes.add("nounwind")
                fn.attributes.add("noinline")
                fn.linkage = "internal"
                lo, hi = fn.args[1], fn.args[2]
                self.body(fn, st.launches, lo if st.parallel else None, hi if st.parallel else None)
                fns.append(fn)
            b = ir.IRBuilder(entry.append_basic_block("entry"))
            slot = self.n_in + self.n_out + 1 + self.p.extras.index(PARALLEL_FOR)
            pfor_t = ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64, I64])
            pfor = ArgBlock(b, entry.args[0]).function(slot, pfor_t)
            for st, fn in zip(stages, fns):
                if st.parallel:
                    pieces = min(self.p.threads, st.extent)
                    b.call(pfor, [fn, entry.args[0], I64(0), I64(st.extent), I64(pieces)])
                else:
                    b.call(fn, [entry.args[0], I64(0), I64(0)])
            b.ret_void()
        return self.link(), symbols, stages

    def link(self) -> str:
        """Each part's text with its kernels' definitions spliced in, the parts joined
        by PART_MARKER."""
        return PART_MARKER.join(self._link_part(i) for i in range(len(self.modules)))

    def _link_part(self, part: int) -> str:
        defined = self.part_kernels[part]
        declares: dict[str, str] = {}
        body: list[str] = []
        for line in str(self.modules[part]).splitlines():
            if line.startswith("declare"):
                name = _declared_name(line)
                if name in defined:
                    continue
                declares.setdefault(name, line)
                continue
            body.append(line)
        for spec, name in self.kernel_names.items():
            if name not in defined:
                continue
            for line in _kernel_text(spec, name, self.inline).splitlines():
                if line.startswith(("; ModuleID", "target triple", "target datalayout")):
                    continue
                if line.startswith("declare"):
                    declares.setdefault(_declared_name(line), line)
                    continue
                body.append(line)
        return "\n".join(body + [""] + list(declares.values())) + "\n"


def _declared_name(line: str) -> str:
    at = line.index("@")
    end = line.index("(", at)
    return line[at + 1 : end].strip('"')


def emit(
    program: Program, inline: str = "always", cache: bool = True
) -> tuple[str, list[str], list[Stage]]:
    """The module's text, its exported symbols (`entry`, stages), and the stages.

    Building the text is mostly Python (llvmlite's IR builder), so it is cached on disk
    next to the compiled objects, keyed by everything the text depends on: the program's
    description (`describe`) and the source of the code that generates IR (so an edited
    generator never reuses an old text).
    """
    key = None
    if cache:
        key = (
            "ir-"
            + hashlib.sha256(
                (_source_fingerprint() + inline + "|" + describe(program)).encode()
            ).hexdigest()
        )
        blob = diskcache.get(key)
        if blob is not None:
            stages, symbols = stage_layout(program)
            return blob.decode(), symbols, stages
    text, symbols, stages = _Emitter(program, inline, parts_for(program, inline)).run()
    if key is not None:
        diskcache.put(key, text.encode())
    return text, symbols, stages


def describe(program: Program) -> str:
    """A deterministic description of everything the emitted module depends on."""
    parts = [
        program.graph.name,
        str(len(program.inputs)),
        str(len(program.outputs)),
        ",".join(program.extras),
        str(program.threads),
    ]

    def value(v: Any) -> str:
        if isinstance(v, Ptr):
            if v.extra:
                return f"x:{v.extra}"
            b = v.buffer
            if b.kind == "const":
                return f"c:{b.payload.hex()}+{v.byte_offset}"
            if b.kind in ("input", "output"):
                return f"{b.kind[0]}{b.slot}+{v.byte_offset}"
            return f"a+{b.offset + v.byte_offset}"
        return str(v)

    for launch in program.launches:
        parts.append(
            f"{launch.spec!r}|{launch.ranged}{launch.split}{launch.work}|"
            f"{launch.extent}|{' '.join(value(v) for v in launch.block)}"
        )
    return "\n".join(parts)


@functools.cache
def _source_fingerprint() -> str:
    """A hash of the sources that shape generated IR (codegen, op rules, the IR)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for folder in ("codegen", "ops", "ir"):
        for path in sorted((root / folder).glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]
