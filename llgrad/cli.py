"""The `llgrad` command (also `python -m llgrad`).

    llgrad inspect FILE:FUNCTION --args "f32[128,784] i64[128]" [--stage NAME] [--dot]
    llgrad cache info | clear | prune [--size 500M]
    llgrad bench [--quick] [--only B1,B3] [--libs llgrad,jax.jit] [--chart out.png]
    llgrad env

`inspect` compiles FUNCTION from FILE for random arguments of the given types and prints
every stage (`--stage` picks one: traced, joint, backward, optimized, kernels, schedule,
llvm, asm, stats; `--dot` prints the traced graph in Graphviz's language). An argument
type is `DTYPE[SHAPE]` with the dtype in NumPy's short form (f16, bf16, f32, f64, i8, i16,
i32, i64, u8, b8 or bool, c64, c128), a trailing `!` asks for gradients
(`f32[64,10]!`), and `[]` is a 0-d tensor; a plain number is passed as a Python number.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any, Sequence

from ._api_coverage import main as coverage
from ._units import human_bytes
from ._version import __version__
from .codegen import diskcache
from .codegen.target import get_target
from .compiler.api import CompiledFunction
from .ir.export import to_dot
from .runtime import blas
from ._system import usable_cpus
from .runtime.launch import num_threads
import llgrad as lg
import llgrad

__all__ = ["main", "parse_arg_spec"]

_DTYPES = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "b8": "bool",
    "bool": "bool",
    "c64": "complex64",
    "c128": "complex128",
}
STAGES = ("traced", "joint", "backward", "optimized", "kernels", "schedule", "llvm", "asm", "stats")


def parse_arg_spec(spec: str) -> Any:
    """One `--args` item: a random tensor of that type, or a Python number."""

    m = re.fullmatch(r"([a-z0-9]+)\[([\d,\s]*)\](!?)", spec.strip())
    if m is None:
        try:
            return int(spec) if re.fullmatch(r"[+-]?\d+", spec) else float(spec)
        except ValueError:
            raise SystemExit(
                f"llgrad inspect: cannot read argument type {spec!r}; write "
                f"DTYPE[SHAPE] such as f32[128,784] (dtypes: "
                f"{', '.join(_DTYPES)}) or a number"
            ) from None
    code, dims, grad = m.groups()
    if code not in _DTYPES:
        raise SystemExit(
            f"llgrad inspect: unknown dtype {code!r} in {spec!r} (known: {', '.join(_DTYPES)})"
        )
    shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
    dtype = getattr(lg, _DTYPES[code])
    if dtype.is_floating_point or dtype.is_complex:
        t = lg.randn(*shape, dtype=dtype)
    elif dtype is lg.bool:
        t = lg.randint(0, 2, shape).to(lg.bool)
    else:
        t = lg.randint(0, 10, shape, dtype=dtype)
    if grad:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise SystemExit(
                f"llgrad inspect: {spec!r}: only floating point and complex "
                f"tensors can require gradients"
            )
        t.requires_grad_()
    return t


def _load_function(target: str) -> Any:
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit(f"llgrad inspect: expected FILE:FUNCTION, got {target!r}")
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"llgrad inspect: no such file {path!r}")
    spec = importlib.util.spec_from_file_location(f"_llgrad_inspect_{file.stem}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise SystemExit(f"llgrad inspect: {path} has no {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise SystemExit(f"llgrad inspect: {path}:{name} is not callable")
    return obj


def _stage(report: Any, stage: str) -> str:
    pieces = {
        "traced": report.graph,
        "joint": report.joint_graph,
        "backward": report.backward_graph,
        "optimized": report.optimized,
        "kernels": "\n".join(str(k) for k in report.kernels),
        "schedule": report.schedule,
        "llvm": report.llvm_ir,
        "asm": report.asm,
        "stats": "\n".join(f"{k}: {v}" for k, v in report.stats.items()),
    }
    got = pieces[stage]
    if got is None and stage == "backward" and "gradients" in report.stats:
        return f"(no backward stage: the gradients are {report.stats['gradients']})"
    if got is None:
        return f"(no {stage} stage for these arguments: nothing requires gradients)"
    return str(got)


def _inspect(ns: argparse.Namespace) -> int:
    fn = _load_function(ns.target)
    cf = fn if isinstance(fn, CompiledFunction) else lg.compile(fn)
    args = [parse_arg_spec(s) for s in ns.args.split()] if ns.args else []
    report = cf.inspect(*args)
    if ns.dot:
        print(to_dot(report.graph))
    elif ns.stage:
        print(_stage(report, ns.stage))
    else:
        print(report)
    return 0


def _cache(ns: argparse.Namespace) -> int:
    if ns.size:
        os.environ["LLGRAD_CACHE_SIZE"] = ns.size
        diskcache.size_limit()  # a bad size is refused here, clearly
    if ns.action == "info":
        print(diskcache.info())
        return 0
    if diskcache.root() is None:
        print("compiled-code cache: off (LLGRAD_CACHE_DIR is empty); nothing to do")
        return 0

    n, nbytes = diskcache.clear() if ns.action == "clear" else diskcache.prune()
    print(f"removed {n} entries ({human_bytes(nbytes)}) from {diskcache.root()}")
    return 0


def environment() -> dict[str, Any]:
    """What `llgrad env` prints: CPU, threads, BLAS, versions, cache."""
    from importlib.metadata import PackageNotFoundError, version

    import llvmlite
    import llvmlite.binding as llvm
    import numpy

    t = get_target()
    features = [f[1:] for f in t.features.split(",") if f.startswith("+")]
    wanted = ("sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "neon", "sve")
    info: dict[str, Any] = {
        "llgrad": llgrad.__version__,
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "platform": platform.platform(),
        "cpu": f"{t.cpu} ({t.triple})",
        "cpu features": " ".join(f for f in wanted if f in features) or "(none of note)",
        "vector width": f"{t.vector_width} bits" if t.vector_width else "LLVM's default",
        "logical cpus": os.cpu_count(),
        "usable cpus": usable_cpus(),
        "llgrad threads": f"{num_threads()} (LLGRAD_NUM_THREADS)",
        "blas": f"gemm float32/float64: {blas.backend()}; complex, gemv: OpenBLAS "
        f"(threads: {blas.threads()})"
        if blas.backend() == "llgrad"
        else f"{blas.backend()} (threads: {blas.threads()})",
        "numpy": numpy.__version__,
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm.llvm_version_info)),
    }
    for name in ("scipy", "networkx", "torch", "jax", "mpi4py", "safetensors"):
        try:
            info[name] = version(name)
        except PackageNotFoundError:
            info[name] = "not installed"
    for var in (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "LLGRAD_LOG",
        "LLGRAD_CACHE_DIR",
        "LLGRAD_DISABLE_COMPILE",
    ):
        if var in os.environ:
            info[var] = os.environ[var]
    c = diskcache.info()
    info["cache"] = (
        "off"
        if c.root is None
        else f"{c.root} ({c.entries} entries, {human_bytes(c.bytes)} of {human_bytes(c.limit)})"
    )
    return info


def _env(ns: argparse.Namespace) -> int:
    if ns.coverage:
        return coverage([])
    info = environment()
    width = max(map(len, info))
    for k, v in info.items():
        print(f"{k:<{width}}  {v}")
    return 0


def _bench(ns: argparse.Namespace, rest: Sequence[str]) -> int:
    try:
        from benchmarks import peers
    except ImportError:
        here = Path(__file__).resolve().parent.parent
        if not (here / "benchmarks" / "peers.py").is_file():
            raise SystemExit(
                "llgrad bench: the benchmark runner lives in the source "
                "checkout's benchmarks/ folder (clone the repository and run "
                "this command from an editable install)"
            ) from None
        sys.path.insert(0, str(here))
        from benchmarks import peers
    return peers.main(list(rest))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; a reader that closes the pipe early (`llgrad inspect ... | head`)
    ends it quietly with status 141 (128 + SIGPIPE, as Unix tools end), no traceback."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # later writes (and the interpreter's final flush) must not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141


def _version() -> str:
    try:
        import llvmlite
        import llvmlite.binding as llvm

        tools = (
            f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"
        )
    except ImportError:  # pragma: no cover - a broken install
        tools = "llvmlite not importable"
    return f"llgrad {__version__} ({tools}, Python {platform.python_version()})"


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="llgrad", description="llgrad's command line tools.")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True)
    pi = sub.add_parser("inspect", help="print every compile stage of a function")
    pi.add_argument("target", help="FILE:FUNCTION (FUNCTION may be dotted: Model.step)")
    pi.add_argument("--args", default="", help='argument types, e.g. "f32[128,784]! i64[128] 0.5"')
    pi.add_argument("--stage", choices=STAGES, help="print one stage only")
    pi.add_argument("--dot", action="store_true", help="the traced graph as Graphviz dot")
    pc = sub.add_parser("cache", help="the compiled-code cache on disk")
    pc.add_argument("action", choices=("info", "clear", "prune"))
    pc.add_argument("--size", help="cap for this command, e.g. 500M (LLGRAD_CACHE_SIZE)")
    sub.add_parser(
        "bench", help="the benchmark runner (options: llgrad bench --help)", add_help=False
    )
    pe = sub.add_parser("env", help="CPU, threads, BLAS, versions, cache")
    pe.add_argument(
        "--coverage",
        action="store_true",
        help="PyTorch API coverage per namespace (needs torch installed)",
    )
    if argv[:1] == ["bench"]:
        return _bench(p.parse_args(argv[:1]), argv[1:])
    ns = p.parse_args(argv)
    return {"inspect": _inspect, "cache": _cache, "env": _env}[ns.command](ns)


if __name__ == "__main__":
    sys.exit(main())
