"""`lg.backends`: the backend flags PyTorch programs read or set, as on a CPU build of
PyTorch (`cpu`, `cuda`, `cudnn`, `mkl`, `mkldnn`, `mps`, `nnpack`, `openmp`, `opt_einsum`,
`mha`, `fp32_precision`).

The switches (`cudnn.enabled`, `benchmark`, `deterministic`, `allow_tf32`, TF32 and SDP
flags, ...) start at a CPU build's values, can be read, set and scoped with
`flags(...)`/`set_flags(...)`, and change nothing: no cuDNN, CUDA, oneDNN or NNPACK code
runs in llgrad. `is_available()` tells the truth about llgrad: False for cuda, cudnn, mps,
mkldnn, nnpack, openmp (llgrad's kernels use its own thread pool) and opt_einsum; `mkl`
answers whether MKL's library (the `llgrad[mkl]` extra, used for gemm) is installed.
`cpu.get_cpu_capability()` names the host's vector extension as PyTorch does ("AVX512",
"AVX2", "DEFAULT"). Each submodule is importable (`import llgrad.backends.cudnn`).
"""

from __future__ import annotations

import contextlib
import sys
import types
from types import SimpleNamespace
from typing import Any, Iterator
from ..runtime.blas import _find_mkl

__all__ = [
    "mps",
    "cudnn",
    "cuda",
    "cpu",
    "mkl",
    "mkldnn",
    "nnpack",
    "openmp",
    "opt_einsum",
    "mha",
    "fp32_precision",
]

fp32_precision = "none"


def _false() -> bool:
    return False


class _FlagModule(types.ModuleType):
    """A backend's namespace: its switches are module attributes; `flags(**kw)` sets some
    for a `with` block, `set_flags(**kw)` sets them and returns the old values."""

    _FLAGS: tuple[str, ...] = ()

    def __init__(self, name: str, doc: str, flags: dict[str, Any], **functions: Any) -> None:
        super().__init__(f"{__name__}.{name}", doc)
        self._FLAGS = tuple(flags)
        self.__dict__.update(flags)
        self.__dict__.update(functions)
        sys.modules[self.__name__] = self

    def set_flags(self, **values: Any) -> tuple[Any, ...]:
        """Set the given switches (None leaves one unchanged); return all previous values
        in declaration order."""
        old = tuple(getattr(self, k) for k in self._FLAGS)
        for k, v in values.items():
            if k not in self._FLAGS:
                raise TypeError(f"set_flags() got an unexpected keyword argument {k!r}")
            if v is not None:
                setattr(self, k, v)
        return old

    @contextlib.contextmanager
    def flags(self, **values: Any) -> Iterator[None]:
        """Set the given switches inside a `with` block, restoring them on exit."""
        old = self.set_flags(**values)
        try:
            yield
        finally:
            for k, v in zip(self._FLAGS, old):
                setattr(self, k, v)


def _cpu_capability() -> str:
    """PyTorch's name for the host's widest vector extension."""
    try:
        import llvmlite.binding as llvm

        features = set(llvm.get_host_cpu_features().flatten().split(","))
    except Exception:  # noqa: BLE001  (no feature map: the portable answer)
        return "DEFAULT"
    if {"+avx512f", "+avx512bw", "+avx512vl", "+avx512dq"} <= features:
        return "AVX512"
    if {"+avx2", "+fma"} <= features:
        return "AVX2"
    return "DEFAULT"


def _mkl_installed() -> bool:
    return _find_mkl() is not None


def _none() -> None:
    return None


_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _sdp_switches() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in _sdp:

        def enabled(kind: str = kind) -> bool:
            return _sdp[kind]

        def enable(value: bool, kind: str = kind) -> None:
            _sdp[kind] = bool(value)

        enabled.__doc__ = f"Whether the {kind} SDP kernel may be used (a flag: no CUDA)."
        enable.__doc__ = f"Allow or forbid the {kind} SDP kernel (a flag: no CUDA)."
        out[f"{kind}_sdp_enabled"] = enabled
        out[f"enable_{kind}_sdp"] = enable
    return out


mps = _FlagModule(
    "mps",
    "Apple's Metal backend (never available in llgrad).",
    {},
    is_available=_false,
    is_built=_false,
    is_macos13_or_newer=_false,
    is_macos_or_newer=lambda major, minor: False,
)
cudnn = _FlagModule(
    "cudnn",
    "cuDNN switches (no cuDNN code runs in llgrad).",
    dict(
        enabled=True,
        benchmark=False,
        benchmark_limit=None,
        deterministic=False,
        allow_tf32=True,
        fp32_precision="none",
    ),
    is_available=_false,
    version=_none,
    is_acceptable=lambda tensor: False,
)
mkldnn = _FlagModule(
    "mkldnn",
    "oneDNN switches (llgrad does not use oneDNN).",
    dict(enabled=True, deterministic=False, allow_tf32=True, fp32_precision="none"),
    is_available=_false,
    is_acl_available=_false,
)
mkl = _FlagModule(
    "mkl", "Intel MKL (llgrad's optional gemm library).", {}, is_available=_mkl_installed
)
openmp = _FlagModule(
    "openmp", "OpenMP (llgrad runs its kernels on its own thread pool).", {}, is_available=_false
)
nnpack = _FlagModule(
    "nnpack", "NNPACK switches (not used by llgrad).", dict(enabled=True), is_available=_false
)
opt_einsum = _FlagModule(
    "opt_einsum",
    "opt_einsum's contraction-order search, as on a PyTorch build without the opt_einsum package.",
    dict(enabled=False, strategy=None),
    is_available=_false,
    get_opt_einsum=_none,
)
cpu = _FlagModule("cpu", "The CPU backend.", {}, get_cpu_capability=_cpu_capability)
_fastpath = {"on": True}
mha = _FlagModule(
    "mha",
    "MultiheadAttention's fast path switch (a flag in llgrad).",
    {},
    get_fastpath_enabled=lambda: _fastpath["on"],
    set_fastpath_enabled=lambda value: _fastpath.__setitem__("on", bool(value)),
)
cuda = _FlagModule(
    "cuda",
    "CUDA switches (llgrad has no CUDA backend).",
    {},
    is_built=_false,
    matmul=SimpleNamespace(
        allow_tf32=False,
        allow_fp16_reduced_precision_reduction=True,
        allow_bf16_reduced_precision_reduction=True,
        fp32_precision="none",
    ),
    **_sdp_switches(),
)
