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
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from .. import _log

VERSION = "0.1.0"


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
        target = llvm.Target.from_triple(self.triple)
        self.machine = target.create_target_machine(cpu=self.cpu, features=self.features,
                                                    opt=3, reloc="pic", codemodel="default")
        self.data_layout = str(self.machine.target_data)
        self.jit = llvm.create_lljit_compiler(self.machine)
        self._lock = threading.Lock()
        self._count = 0
        self._symbols: dict[str, int] = {}
        self.vector_width = vector_width(self.features)
        self._width_attribute = f'\\1 "prefer-vector-width"="{self.vector_width}" {{'
        self.fingerprint = hashlib.sha256(
            f"{VERSION}|{llvmlite.__version__}|{llvm.llvm_version_info}|{self.triple}|"
            f"{self.cpu}|{self.features}|{self.vector_width}".encode()).hexdigest()[:16]

    # -- symbols the generated code may call (BLAS pointers, runtime helpers) ----------
    def add_symbol(self, name: str, address: int) -> None:
        llvm.add_symbol(name, address)
        self._symbols[name] = address

    # -- pipeline -----------------------------------------------------------------------
    def optimize(self, mod: llvm.ModuleRef) -> None:
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(self.machine, pto)
        pb.getModulePassManager().run(mod, pb)

    def parse(self, ir_text: str) -> llvm.ModuleRef:
        if self.vector_width:
            ir_text = _DEFINE.sub(self._width_attribute, ir_text)
        mod = llvm.parse_assembly(ir_text)
        mod.triple = self.triple
        mod.data_layout = self.data_layout
        mod.verify()       # an invalid module can crash the optimizer instead of raising
        return mod

    def assembly(self, ir_text: str) -> str:
        mod = self.parse(ir_text)
        self.optimize(mod)
        return self.machine.emit_assembly(mod)

    def optimized_ir(self, ir_text: str) -> str:
        mod = self.parse(ir_text)
        self.optimize(mod)
        return str(mod)

    def compile(self, ir_text: str, symbols: list[str], name: str = "kernel") -> Compiled:
        """Optimize, emit an object (or take it from the cache), link it, return addresses."""
        key = hashlib.sha256((self.fingerprint + ir_text).encode()).hexdigest()
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        obj = disk_cache_get(key)
        from_cache = obj is not None
        if obj is None:
            mod = self.parse(ir_text)
            t1 = time.perf_counter()
            self.optimize(mod)
            t2 = time.perf_counter()
            obj = self.machine.emit_object(mod)
            t3 = time.perf_counter()
            seconds = {"parse": t1 - t0, "optimize": t2 - t1, "codegen": t3 - t2}
            disk_cache_put(key, obj)
        t4 = time.perf_counter()
        with self._lock:
            self._count += 1
            lib = f"llgrad_{self._count}_{name}"
            builder = llvm.JITLibraryBuilder().add_object_img(obj).add_current_process()
            for sym, address in self._symbols.items():
                builder.import_symbol(sym, address)   # add_symbol alone is not seen by ORC
            for s in symbols:
                builder.export_symbol(s)
            tracker = builder.link(self.jit, lib)
        seconds["link"] = time.perf_counter() - t4
        _log.log("llvm", f"compiled {name} ({'disk cache' if from_cache else 'built'}) "
                         f"in {1e3 * (time.perf_counter() - t0):.1f} ms")
        return Compiled(name, {s: tracker[s] for s in symbols}, ir_text, tracker,
                        from_cache=from_cache, seconds=seconds)


_DEFINE = re.compile(r"^(define [^\n]*?)\s*\{$", re.M)
VECTOR_WIDTHS = (128, 256, 512)


def vector_width(features: str) -> int | None:
    """The vector width (bits) kernels are compiled for: `LLGRAD_VECTOR_WIDTH` if set, else
    512 where the CPU has AVX-512 (LLVM's own default there is 256), else LLVM's choice.

    Measured on this machine (an AVX-512 Xeon, 2 threads): B1 (tanh, sigmoid, exp on 4M
    floats, loss and grads) 8.6 -> 6.0 ms, B7 (2000 sin/tanh ops on 1024 floats) 2.43 ->
    1.77 ms; bandwidth-bound work (B2, B6, B8) unchanged.
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


# --------------------------------------------------------------------------------------
# The on-disk object cache
# --------------------------------------------------------------------------------------

def cache_dir() -> Path | None:
    """`LLGRAD_CACHE_DIR`, else the user's cache directory; `LLGRAD_CACHE_DIR=` disables."""
    env = os.environ.get("LLGRAD_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llgrad"


_MAGIC = b"LLGRADOBJ1"
_refused: dict[str, str] = {}        # directory -> why its entries are not loaded


def untrusted(path: Path, directory: bool) -> str | None:
    """Why native code from `path` must not be loaded (None when it may be).

    Loading an object file runs its code in this process, so every entry and the folders
    that hold it must be this user's and writable by nobody else; a symlink is refused
    (it could point anywhere). Platforms without POSIX owners (Windows) rely on the
    folder's ACL and are not checked here.
    """
    if not hasattr(os, "getuid"):
        return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot stat {path}: {e}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if directory != stat.S_ISDIR(st.st_mode):
        return f"{path} is not a {'directory' if directory else 'regular file'}"
    if st.st_uid != os.getuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & 0o022:
        who = "others" if st.st_mode & 0o002 else "its group"
        return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _folders_trusted(d: Path, sub: Path) -> bool:
    """Whether the cache root and an entry's folder may be used; warns once per folder."""
    for folder in (d, sub):
        key = str(folder)
        if key in _refused:
            return False
        why = untrusted(folder, directory=True)
        if why is not None:
            _refuse(key, why)
            return False
    return True


def _refuse(key: str, why: str) -> None:
    import warnings
    _refused[key] = why
    message = (f"llgrad: not using the compiled-code cache at {key}: {why}. Compiled code "
               f"is built in this process instead; fix the permissions (chmod go-w, chown) "
               f"or set LLGRAD_CACHE_DIR to a private directory.")
    _log.log("cache", message)
    import sys
    package = os.path.dirname(os.path.dirname(__file__))
    frame, level = sys._getframe(1), 2       # point the warning at the user's line
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, RuntimeWarning, stacklevel=level)


def disk_cache_get(key: str) -> bytes | None:
    d = cache_dir()
    if d is None:
        return None
    path = d / key[:2] / key
    if not _folders_trusted(d, path.parent):
        return None
    why = untrusted(path, directory=False)
    if why is not None:
        _refuse(str(path), why)
        return None
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 32
    if len(blob) < head or not blob.startswith(_MAGIC):
        _log.log("cache", f"corrupt entry {path.name}: bad header; rebuilding")
        return None
    digest, body = blob[len(_MAGIC):head], blob[head:]
    if hashlib.sha256(body).digest() != digest:
        _log.log("cache", f"corrupt entry {path.name}: checksum mismatch; rebuilding")
        return None
    _log.log("cache", f"hit {path.name}")
    return body


def disk_cache_put(key: str, obj: bytes) -> None:
    """Write an entry atomically (a private temporary file renamed over the entry), so a
    reader in another process sees either no entry or a whole one."""
    d = cache_dir()
    if d is None:
        return
    path = d / key[:2] / key
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        if not _folders_trusted(d, path.parent):
            return
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(obj).digest() + obj)
        os.replace(tmp, path)         # atomic: readers never see half an entry
    except OSError as e:
        _log.log("cache", f"could not write {path}: {e}")
