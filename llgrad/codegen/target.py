"""The host target: LLVM set-up, the optimization pipeline, and the JIT.

One `Target` per process. `compile` takes an LLVM module (llvmlite IR text), optimizes it
for the host CPU, turns it into an object, and links the object into an ORC JIT. Objects
are cached on disk, keyed by the IR text, the llgrad, llvmlite and LLVM versions and the
CPU; a cache entry carries a checksum and is rebuilt when it does not match.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import llvmlite
import llvmlite.binding as llvm

from .. import _log
from .._system import usable_cpus
from . import diskcache
from .worker import (
    LIGHT_MARKERS,
    CompileWorker,
    compile_many,
    enabled as worker_enabled,
    optimize,
    target_machine,
)

VERSION = diskcache.VERSION
# Between the module texts of one graph emitted as several modules (codegen.graph.emit)
PART_MARKER = "; ---- llgrad: next module of this graph ----\n"


def split_parts(text: str) -> list[str]:
    """The module texts `emit` joined (one for a graph emitted as one module)."""
    return text.split(PART_MARKER)


@dataclass
class Compiled:
    """A linked module: symbol addresses plus what inspection needs."""

    name: str
    addresses: dict[str, int]
    source_ir: str
    tracker: object = field(repr=False)
    optimized_ir: str | None = None
    from_cache: bool = False
    seconds: dict[str, float] = field(default_factory=dict)

    def asm(self) -> str:
        return get_target().assembly(self.source_ir)


class Target:
    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.triple = llvm.get_process_triple()
        self.cpu = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        self.machine = target_machine(self.triple, self.cpu, self.features)
        self.data_layout = str(self.machine.target_data)
        self.jit = llvm.create_lljit_compiler(self.machine)
        self._lock = threading.Lock()
        self._llvm_lock = threading.RLock()
        self._count = 0
        self._symbols: dict[str, int] = {}
        self.vector_width = vector_width(self.features)
        self._width_attribute = f'\\1 "prefer-vector-width"="{self.vector_width}" {{'
        self.fingerprint = hashlib.sha256(
            f"{VERSION}|{llvmlite.__version__}|{llvm.llvm_version_info}|{self.triple}|"
            f"{self.cpu}|{self.features}|{self.vector_width}".encode()
        ).hexdigest()[:16]
        # optimization and code generation run in helper processes (see codegen.worker):
        # one per core up to two, so the two modules of a big graph build at once
        self.workers: list[CompileWorker] = []
        if worker_enabled():
            settings = {
                "triple": self.triple,
                "cpu": self.cpu,
                "features": self.features,
                "data_layout": self.data_layout,
            }
            # started at the first compile the disk cache cannot answer (a warm start
            # never needs them)
            self.workers = [CompileWorker(settings) for _ in range(min(2, usable_cpus()))]

    # -- symbols the generated code may call (BLAS pointers, runtime helpers) ----------
    def add_symbol(self, name: str, address: int) -> None:
        llvm.add_symbol(name, address)
        self._symbols[name] = address

    # -- pipeline -----------------------------------------------------------------------
    def optimize(self, mod: llvm.ModuleRef, text: str = "") -> None:
        """The pipeline for `mod`, whose IR is `text` (light for a hand-vectorized one)."""
        optimize(self.machine, mod, light=text.startswith(LIGHT_MARKERS))

    def _widen(self, ir_text: str) -> str:
        """The text with the preferred vector width on every definition."""
        return _DEFINE.sub(self._width_attribute, ir_text) if self.vector_width else ir_text

    def parse(self, ir_text: str) -> llvm.ModuleRef:
        mod = llvm.parse_assembly(self._widen(ir_text))
        mod.triple = self.triple
        mod.data_layout = self.data_layout
        mod.verify()  # an invalid module can crash the optimizer instead of raising
        return mod

    def assembly(self, ir_text: str) -> str:
        out = []
        for part in split_parts(ir_text):
            with self._llvm_lock:
                mod = self.parse(part)
                self.optimize(mod, part)
                out.append(self.machine.emit_assembly(mod))
        return PART_MARKER.join(out)

    def optimized_ir(self, ir_text: str) -> str:
        out = []
        for part in split_parts(ir_text):
            with self._llvm_lock:
                mod = self.parse(part)
                self.optimize(mod, part)
                out.append(str(mod))
        return PART_MARKER.join(out)

    def compile(self, ir_text: str, symbols: list[str], name: str = "kernel") -> Compiled:
        """Optimize, emit an object (or take it from the cache), link it, return addresses."""
        parts = split_parts(ir_text)  # a big graph comes as modules to build at once
        t0 = time.perf_counter()
        objs, from_cache, seconds = self._objects(parts, self.workers)
        return self._link(objs, symbols, name, ir_text, from_cache, seconds, t0)

    def compile_generated(
        self, source_key: str, make_text: Callable[[], str], symbols: list[str], name: str
    ) -> Compiled:
        """`compile` for a module that a generator makes and `source_key` identifies (a
        hash of the generator's source and settings): a disk-cache hit skips making the
        text (the gemm module's takes 20-30 ms of Python). Built on the last compile
        worker, so a graph compiling meanwhile keeps the first."""
        t0 = time.perf_counter()
        key = hashlib.sha256(f"{self.fingerprint}|generated|{source_key}".encode()).hexdigest()
        obj = diskcache.get(key)
        if obj is not None:
            return self._link([obj], symbols, name, "", True, {}, t0)
        text = make_text()
        objs, from_cache, seconds = self._objects([text], self.workers[-1:])
        diskcache.put(key, objs[0])
        return self._link(objs, symbols, name, text, from_cache, seconds, t0)

    def _objects(
        self, parts: list[str], workers: list[CompileWorker]
    ) -> tuple[list[bytes], bool, dict[str, float]]:
        """Objects of the module texts `parts` (from the disk cache, the compile workers,
        or built here), whether all came from the cache, and the seconds spent."""
        keys = [hashlib.sha256((self.fingerprint + p).encode()).hexdigest() for p in parts]
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        objs = [diskcache.get(k) for k in keys]
        from_cache = all(o is not None for o in objs)
        todo = [i for i, o in enumerate(objs) if o is None]
        if todo and workers:
            for w in workers:
                w.start_once()
            built = compile_many(workers, [self._widen(parts[i]) for i in todo])
            for i, obj in zip(todo, built):
                if obj is not None:
                    objs[i] = obj
                    diskcache.put(keys[i], obj)
            if any(objs[i] is not None for i in todo):
                seconds["worker"] = time.perf_counter() - t0
        for i, part in enumerate(parts):
            if objs[i] is None:
                # one in-process compile at a time: LLVM's target machine is not safe to
                # share between threads (a background gemm build may run beside a graph's)
                with self._llvm_lock:
                    t1 = time.perf_counter()
                    mod = self.parse(part)
                    t2 = time.perf_counter()
                    self.optimize(mod, part)
                    t3 = time.perf_counter()
                    objs[i] = obj = self.machine.emit_object(mod)
                    t4 = time.perf_counter()
                for k, v in (("parse", t2 - t1), ("optimize", t3 - t2), ("codegen", t4 - t3)):
                    seconds[k] = seconds.get(k, 0.0) + v
                diskcache.put(keys[i], obj)
        return objs, from_cache, seconds  # type: ignore[return-value]

    def _link(
        self,
        objs: list[bytes],
        symbols: list[str],
        name: str,
        ir_text: str,
        from_cache: bool,
        seconds: dict[str, float],
        t0: float,
    ) -> Compiled:
        t4 = time.perf_counter()
        with self._lock:
            self._count += 1
            lib = f"llgrad_{self._count}_{name}"
            builder = llvm.JITLibraryBuilder()
            for obj in objs:
                builder.add_object_img(obj)
            builder.add_current_process()
            for sym, address in self._symbols.items():
                builder.import_symbol(sym, address)  # add_symbol alone is not seen by ORC
            for s in symbols:
                builder.export_symbol(s)
            tracker = builder.link(self.jit, lib)
        seconds["link"] = time.perf_counter() - t4
        _log.log(
            "llvm",
            f"compiled {name} ({'disk cache' if from_cache else 'built'}) "
            f"in {1e3 * (time.perf_counter() - t0):.1f} ms",
        )
        return Compiled(
            name,
            {s: tracker[s] for s in symbols},
            ir_text,
            tracker,
            from_cache=from_cache,
            seconds=seconds,
        )


_DEFINE = re.compile(r"^(define [^\n]*?)\s*\{$", re.M)
VECTOR_WIDTHS = (128, 256, 512)


def vector_width(features: str) -> int | None:
    """The vector width (bits) kernels are compiled for: `LLGRAD_VECTOR_WIDTH` if set, else
    512 where the CPU has AVX-512 (LLVM's own default there is 256), else LLVM's choice.

    The wider vectors pay where kernels compute (transcendental chains such as B1's and
    B7's); bandwidth-bound work (B2, B6, B8) does not change.
    """
    env = os.environ.get("LLGRAD_VECTOR_WIDTH")
    if env:
        try:
            width = int(env)
        except ValueError:
            width = 0
        if width not in VECTOR_WIDTHS:
            raise ValueError(f"LLGRAD_VECTOR_WIDTH must be one of {VECTOR_WIDTHS}, got {env!r}")
        return width
    return 512 if "+avx512f" in features.split(",") else None


@functools.cache
def get_target() -> Target:
    return Target()
