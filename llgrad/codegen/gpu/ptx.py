"""LLVM's NVPTX target through llvmlite: a module's IR to PTX text, and `ptxas` checks.

`to_ptx(ir_text, arch)` optimizes the module for `nvptx64-nvidia-cuda` at `arch`
("sm_80", "sm_90", ...) and returns the PTX the CUDA driver JIT-compiles
(`cuModuleLoadData`). llgrad's math library is LLVM IR over basic intrinsics (fma, fabs,
floor, sqrt, ...), which NVPTX lowers to single instructions, so no libdevice is linked.

`ptxas(ptx, arch)` runs NVIDIA's assembler on the PTX when one is installed (the
`nvidia-cuda-nvcc` wheel's, or a CUDA toolkit's on PATH) and returns its resource report
(registers, shared and local bytes per kernel); `find_ptxas()` says where it is.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import llvmlite.binding as llvm

from .libdevice import link

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
DEFAULT_ARCH = "sm_80"
_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _machine(arch: str) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, opt=3, features="+ptx78")


def to_ptx(ir_text: str, arch: str = DEFAULT_ARCH) -> str:
    """The PTX of a module's IR (optimized at -O3 for `arch`)."""
    machine = _machine(arch)
    with _lock:
        module = llvm.parse_assembly(ir_text)
        module.triple = TRIPLE
        module.data_layout = str(machine.target_data)
        if "__nv_" in ir_text:
            link(module)
        module.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(machine, pto)
        pm = pb.getModulePassManager()
        pm.run(module, pb)
        return machine.emit_assembly(module)


def find_ptxas() -> str | None:
    """The `ptxas` to check PTX with: $LLGRAD_PTXAS, the nvidia-cuda-nvcc wheel's, or PATH's."""
    env = os.environ.get("LLGRAD_PTXAS")
    if env:
        return env if os.path.exists(env) else None
    for root in sys.path:
        for pattern in ("nvidia/cuda_nvcc/bin/ptxas", "nvidia/cu*/bin/ptxas"):
            for hit in glob.glob(os.path.join(root, pattern)):
                if os.access(hit, os.X_OK):
                    return hit
    return shutil.which("ptxas")


def ptxas(ptx: str, arch: str = DEFAULT_ARCH) -> dict[str, dict[str, int]]:
    """Assemble `ptx` for `arch` with ptxas -v; per kernel: registers and shared bytes.

    Raises RuntimeError with ptxas's message when the PTX does not assemble, and
    FileNotFoundError when no ptxas is installed."""
    exe = find_ptxas()
    if exe is None:
        raise FileNotFoundError(
            "ptxas not found: pip install nvidia-cuda-nvcc, or put a CUDA "
            "toolkit's bin on PATH, or set LLGRAD_PTXAS"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        done = subprocess.run(
            [exe, "-v", f"--gpu-name={arch}", path, "-o", os.path.join(tmp, "k.cubin")],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise RuntimeError(f"ptxas --gpu-name={arch} rejected the PTX:\n{done.stderr[-4000:]}")
    report: dict[str, dict[str, int]] = {}
    current = None
    for line in done.stderr.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = report.setdefault(m.group(1), {"registers": 0, "shared_bytes": 0})
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            current["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            if s:
                current["shared_bytes"] = int(s.group(1))
    return report
