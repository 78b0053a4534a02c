"""Optimizing and emitting objects in a helper process.

Each optimization through llvmlite leaves about 100 KB behind in the process for good (its
pass builder allocates instrumentation callbacks that nothing frees), so a long-lived
program that compiles many throwaway functions grows without bound. The parent therefore
sends each module's IR text to a child process that parses, verifies, optimizes it and
emits the object file; the parent only links the object into its JIT. The child is
replaced after `RECYCLE` compiles, which returns what it leaked.

The child runs this file as a script (not as part of the llgrad package, whose import would
pull in NumPy and the rest): it imports llvmlite only and builds the same target machine
as the parent from the parent's settings, so the objects are the ones the parent would
have made. Until the child has started, and whenever it cannot start or fails, the parent
compiles in-process as before (same object, same errors). `LLGRAD_COMPILE_WORKER=0` turns
the child off.

Protocol (binary pipes): the parent writes the settings once, then per request a 4-byte
length and the IR text; the child answers with a 1-byte status (0: object follows, 1: an
error message follows), a 4-byte length and the payload. The child writes one byte when
ready and exits at end of input.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
from typing import Any

RECYCLE = 256  # compiles per child before it is replaced
_LEN = struct.Struct("<I")


# --------------------------------------------------------------------------------------
# the child
# --------------------------------------------------------------------------------------


def _read_exact(f: Any, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def target_machine(triple: str, cpu: str, features: str) -> Any:
    """The target machine llgrad compiles for (here and in the parent alike)."""
    import llvmlite.binding as llvm

    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="pic", codemodel="default"
    )


# The first line of a module whose loops are vectorized by hand (`codegen/gemm.py`): it
# gets O2 without the vectorizers and unrolling, which would only spend compile time
# (several times more, for the same code).
HAND_VECTORIZED = "; llgrad: hand-vectorized\n"
# an elementwise kernel whose every input is constant along the innermost loop (broadcast
# with stride 0): its body is loop-invariant, so vectorizing the loop gains nothing, and
# LLVM's loop vectorizer can spend tens of seconds on a long math body (pow, lgamma) there
INVARIANT_BODY = "; llgrad: loop-invariant body\n"
LIGHT_MARKERS = (HAND_VECTORIZED, INVARIANT_BODY)


def optimize(machine: Any, mod: Any, light: bool = False) -> None:
    """llgrad's LLVM pipeline (O3 with loop and SLP vectorization and unrolling; O2
    without them when `light`), run on `mod` for `machine`: here and in the parent's
    in-process path alike."""
    import llvmlite.binding as llvm

    pto = llvm.create_pipeline_tuning_options(speed_level=2 if light else 3)
    pto.loop_vectorization = not light
    pto.slp_vectorization = not light
    pto.loop_unrolling = not light
    pb = llvm.create_pass_builder(machine, pto)
    pb.getModulePassManager().run(mod, pb)


def _child() -> None:
    import llvmlite.binding as llvm

    inp, out = sys.stdin.buffer, sys.stdout.buffer
    head = _read_exact(inp, _LEN.size)
    if head is None:
        return
    cfg = json.loads(_read_exact(inp, _LEN.unpack(head)[0]) or b"{}")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = target_machine(cfg["triple"], cfg["cpu"], cfg["features"])
    out.write(b"R")
    out.flush()
    while True:
        head = _read_exact(inp, _LEN.size)
        if head is None:
            return
        text = (_read_exact(inp, _LEN.unpack(head)[0]) or b"").decode()
        try:
            mod = llvm.parse_assembly(text)
            mod.triple = cfg["triple"]
            mod.data_layout = cfg["data_layout"]
            mod.verify()
            optimize(machine, mod, light=text.startswith(LIGHT_MARKERS))
            status, payload = b"\0", machine.emit_object(mod)
        except Exception as e:  # the parent redoes it in-process for the real error
            status, payload = b"\1", f"{type(e).__name__}: {e}".encode()
        out.write(status + _LEN.pack(len(payload)) + payload)
        out.flush()


# --------------------------------------------------------------------------------------
# the parent's side
# --------------------------------------------------------------------------------------


class CompileWorker:
    """One child process at a time; `compile` returns an object file or None (then the
    caller compiles in-process)."""

    def __init__(self, settings: dict[str, str]):
        self.settings = settings
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._ready = threading.Event()
        self._count = 0
        self.failed = False
        self.compiled = 0  # objects this process got from children
        self._restart_here = False
        self._started = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """In a forked process: the pipes belong to the parent's child; use a new one."""
        self._lock = threading.Lock()
        self._proc, self._ready = None, threading.Event()
        self._restart_here = not self.failed

    def start_once(self) -> None:
        """Start the first child (later ones are started by recycling and restarts)."""
        if not self._started:
            self._started = True
            self.start()

    def start(self) -> None:
        """Start a child without waiting for it (its first byte sets `_ready`)."""
        try:
            proc = subprocess.Popen(
                [sys.executable, "-S", os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=_child_env(),
            )
            blob = json.dumps(self.settings).encode()
            assert proc.stdin is not None
            proc.stdin.write(_LEN.pack(len(blob)) + blob)
            proc.stdin.flush()
        except (OSError, ValueError):
            self.failed = True
            return
        ready = threading.Event()
        self._proc, self._ready, self._count = proc, ready, 0

        def wait() -> None:  # a thread, so no platform needs a pollable pipe
            try:
                assert proc.stdout is not None
                if proc.stdout.read(1) == b"R":
                    ready.set()
            except (OSError, ValueError):
                pass

        threading.Thread(target=wait, daemon=True, name="llgrad-compile-worker").start()

    def compile(self, ir_text: str) -> bytes | None:
        return compile_many([self], [ir_text])[0]

    def _usable(self) -> bool:
        """Whether a request can go to the child now (call with `_lock` held)."""
        if self.failed:
            return False
        if self._restart_here:  # first compile after a fork
            self._restart_here = False
            self.start()
        return self._proc is not None and self._ready.is_set()

    def _send(self, ir_text: str) -> bool:
        proc = self._proc
        try:
            data = ir_text.encode()
            assert proc is not None and proc.stdin is not None
            proc.stdin.write(_LEN.pack(len(data)) + data)
            proc.stdin.flush()
            return True
        except (OSError, ValueError):
            self._restart()
            return False

    def _receive(self) -> bytes | None:
        proc = self._proc
        try:
            assert proc is not None and proc.stdout is not None
            head = _read_exact(proc.stdout, 1 + _LEN.size)
            payload = None if head is None else _read_exact(proc.stdout, _LEN.unpack(head[1:])[0])
            if head is None or payload is None:
                raise OSError("the compile worker exited")
        except (OSError, ValueError):
            self._restart()  # a fresh child for the next request
            return None
        self._count += 1
        if self._count >= RECYCLE:  # give back what the child leaked
            self._restart()
        if head[:1] != b"\0":
            return None
        self.compiled += 1
        return payload

    def _restart(self) -> None:
        """Replace the child and wait for the new one (once per RECYCLE compiles):
        compiling in-process meanwhile would leave this process's first in-process
        optimization's one-time allocations (tens of MB) behind."""
        self._stop()
        self.start()
        if not self.failed and not self._ready.wait(10):
            self.failed = True  # a child that does not come up: compile here

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()

    def close(self) -> None:
        with self._lock:
            self._stop()


def compile_many(workers: list[CompileWorker], texts: list[str]) -> list[bytes | None]:
    """Objects for `texts`; None where a text must be compiled in-process (its worker is
    not ready, or failed on it).

    Each worker takes the next text as soon as it is free, so a module compiling in the
    background on one of them (the gemm's) holds up only what the other worker cannot
    take over. A worker has one request in flight at a time (a second request queued
    behind an answer nobody reads could deadlock the pipes).
    """
    out: list[bytes | None] = [None] * len(texts)
    if not texts:
        return out
    pending = list(range(len(texts)))
    state = threading.Condition()
    left = [len(texts)]

    def take() -> int | None:
        with state:
            return pending.pop(0) if pending else None

    def finished() -> None:
        with state:
            left[0] -= 1
            state.notify_all()

    def serve(w: CompileWorker) -> None:
        with w._lock:
            while (i := take()) is not None:
                if w._usable() and w._send(texts[i]):
                    out[i] = w._receive()
                finished()

    wanted = workers[: len(texts)]
    if not wanted:
        return out
    if len(wanted) == 1 and not wanted[0]._lock.locked():
        serve(wanted[0])  # the common case, without a thread
        return out
    for w in wanted:
        threading.Thread(target=serve, args=(w,), daemon=True, name="llgrad-compile").start()
    with state:
        state.wait_for(lambda: left[0] == 0)
    return out


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    import llvmlite  # the child finds the same llvmlite as this process

    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(llvmlite.__file__))]
        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    return env


def enabled() -> bool:
    return os.environ.get("LLGRAD_COMPILE_WORKER", "1") not in ("0", "", "false", "no")


if __name__ == "__main__":
    _child()
