"""NVIDIA's libdevice as the GPU's math library.

Where libdevice is found, PTX-mode kernels call its `__nv_*` functions for the
transcendentals it has (they use the GPU's special-function unit for their core, within
1-2 ulp), and `to_ptx` links the bitcode in, internalized so that unused functions are
dropped; elsewhere, or with `LLGRAD_GPU_MATH=llgrad`, they use llgrad's own math library
(the CPU's polynomials: LLVM IR over fma, floor, sqrt, ...); libdevice is the faster of
the two on B1 (benchmarks/gpu_results.md has both figures). The host build (the grid emulator) always uses llgrad's math, so
emulated transcendentals can differ from the GPU's in their last bits.

The bitcode is found at $LLGRAD_LIBDEVICE, in a CUDA toolkit ($CUDA_HOME,
/usr/local/cuda), or in the `nvidia-nvvm`/`nvidia-cuda-nvcc` or Triton wheels.
"""

from __future__ import annotations

import functools
import glob
import os
import sys

from llvmlite import ir

ENV = "LLGRAD_GPU_MATH"
# llgrad math function -> libdevice's (float, double) names
FUNCTIONS = {
    "exp": ("__nv_expf", "__nv_exp"),
    "exp2": ("__nv_exp2f", "__nv_exp2"),
    "expm1": ("__nv_expm1f", "__nv_expm1"),
    "log": ("__nv_logf", "__nv_log"),
    "log2": ("__nv_log2f", "__nv_log2"),
    "log10": ("__nv_log10f", "__nv_log10"),
    "log1p": ("__nv_log1pf", "__nv_log1p"),
    "sin": ("__nv_sinf", "__nv_sin"),
    "cos": ("__nv_cosf", "__nv_cos"),
    "tan": ("__nv_tanf", "__nv_tan"),
    "tanh": ("__nv_tanhf", "__nv_tanh"),
    "erf": ("__nv_erff", "__nv_erf"),
    "erfc": ("__nv_erfcf", "__nv_erfc"),
    "atan": ("__nv_atanf", "__nv_atan"),
    "asin": ("__nv_asinf", "__nv_asin"),
    "acos": ("__nv_acosf", "__nv_acos"),
    "sinh": ("__nv_sinhf", "__nv_sinh"),
    "cosh": ("__nv_coshf", "__nv_cosh"),
    "asinh": ("__nv_asinhf", "__nv_asinh"),
    "acosh": ("__nv_acoshf", "__nv_acosh"),
    "atanh": ("__nv_atanhf", "__nv_atanh"),
    "lgamma": ("__nv_lgammaf", "__nv_lgamma"),
    "pow": ("__nv_powf", "__nv_pow"),
    "atan2": ("__nv_atan2f", "__nv_atan2"),
}


def enabled() -> bool:
    """Whether PTX kernels call libdevice: when it is found, unless `LLGRAD_GPU_MATH=llgrad`."""
    return os.environ.get(ENV, "libdevice") != "llgrad" and find() is not None


@functools.lru_cache(maxsize=None)
def find() -> str | None:
    """The path of libdevice.10.bc, or None."""
    env = os.environ.get("LLGRAD_LIBDEVICE")
    if env:
        return env if os.path.exists(env) else None
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    patterns = [os.path.join(r, "nvvm/libdevice/libdevice*.bc") for r in roots if r]
    for site in sys.path:
        patterns += [
            os.path.join(site, "nvidia/*/nvvm/libdevice/libdevice*.bc"),
            os.path.join(site, "triton/backends/nvidia/lib/libdevice*.bc"),
        ]
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    return None


def emit(builder: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value | None:
    """A call of libdevice's `name` (declared in the builder's module), or None when
    libdevice has no such function (the caller emits llgrad's)."""
    names = FUNCTIONS.get(name)
    if names is None:
        return None
    ty = args[0].type
    symbol = names[0] if isinstance(ty, ir.FloatType) else names[1]
    module = builder.module
    fn = module.globals.get(symbol)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ty, [ty] * len(args)), name=symbol)
    return builder.call(fn, args)


def link(module: object) -> None:
    """Link libdevice into a parsed module (`llvmlite.binding.ModuleRef`) that calls it,
    every libdevice function internal (the optimizer then drops the unused ones)."""
    import llvmlite.binding as llvm

    path = find()
    if path is None:
        raise FileNotFoundError("libdevice.10.bc not found (set LLGRAD_LIBDEVICE)")
    with open(path, "rb") as f:
        lib = llvm.parse_bitcode(f.read())
    lib.triple = module.triple  # (libdevice says nvptx64-nvidia-gpulibs)
    lib.data_layout = module.data_layout
    module.link_in(lib)
    for fn in module.functions:
        if fn.name.startswith("__nv_") and not fn.is_declaration:
            fn.linkage = "internal"
