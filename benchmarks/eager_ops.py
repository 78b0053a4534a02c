"""The eager suite: per-op overhead on tiny tensors and throughput on big ones.

Each measurement runs the same expression, written the same way, in llgrad eager, NumPy and
PyTorch eager (when installed) on the same data. Peers that lack an op get no number
(`None`, shown as "–"), never a substitute that does different work, with one exception
documented in the README: NumPy has no sigmoid, so SciPy's `expit` ufunc stands in (one
pass over memory, like the others).
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import numpy as np

import llgrad as lg
from .common import Stats, time_calls, time_per_op

LIBS = ("llgrad", "numpy", "torch")


@dataclass(frozen=True)
class EagerSizes:
    """Sizes and repeat counts of the eager suite (the --quick mode shrinks them)."""

    elements: int  # throughput vectors
    side: int  # throughput matrix side
    ops_per_block: int  # overhead: ops timed together
    blocks: int  # overhead: timed blocks (median over these)
    min_repeats: int  # throughput: calls timed at least
    max_repeats: int  # throughput: calls timed at most
    budget_s: float  # throughput: stop after this long once min_repeats are done


FULL = EagerSizes(
    elements=10_000_000,
    side=3162,
    ops_per_block=1000,
    blocks=20,
    min_repeats=15,
    max_repeats=200,
    budget_s=1.0,
)
QUICK = EagerSizes(
    elements=1 << 14,
    side=128,
    ops_per_block=20,
    blocks=3,
    min_repeats=3,
    max_repeats=3,
    budget_s=0.0,
)


def _error(exc: BaseException) -> dict[str, str]:
    """A failed cell: kept in the results (the table shows "fails") instead of aborting."""
    where = "".join(traceback.format_exception(exc, limit=-3)).strip()
    return {"error": f"{type(exc).__name__}: {exc}", "where": where}


def _progress(msg: str) -> None:
    """A line on stderr per step, so a three-minute run shows where it is."""
    print(f"[eager] {msg}", file=sys.stderr, flush=True)


# -- per-op overhead ----------------------------------------------------------------------


@dataclass(frozen=True)
class OverheadOp:
    """One tiny op: `stmt` is run verbatim in each library's namespace."""

    name: str
    stmt: str
    numpy: bool = True  # False: NumPy has no equivalent (autograd)


OVERHEAD_OPS = (
    OverheadOp("add", "x + y"),
    OverheadOp("mul by Python scalar", "x * 2.0"),
    OverheadOp("exp", "exp(x)"),
    OverheadOp("sum", "x.sum()"),
    OverheadOp("matmul 4x4", "a @ b"),
    OverheadOp("reshape (view)", "x.reshape(2, 2)"),
    OverheadOp("index x[1:]", "x[1:]"),
    OverheadOp("grad-recording x * 2", "g * 2", numpy=False),
)


def _tiny_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "x": rng.standard_normal(4, dtype=np.float32),
        "y": rng.standard_normal(4, dtype=np.float32),
        "a": rng.standard_normal((4, 4), dtype=np.float32),
        "b": rng.standard_normal((4, 4), dtype=np.float32),
    }


def _overhead_namespaces(torch: ModuleType | None) -> dict[str, dict[str, Any] | None]:
    """Per library: the names the overhead statements use, bound to that library."""
    data = _tiny_inputs()
    spaces: dict[str, dict[str, Any] | None] = {}
    ns: dict[str, Any] = {k: lg.from_numpy(v.copy()) for k, v in data.items()}
    ns["exp"] = lg.exp
    ns["g"] = lg.from_numpy(data["x"].copy()).requires_grad_(True)
    spaces["llgrad"] = ns
    ns = {k: v.copy() for k, v in data.items()}
    ns["exp"] = np.exp
    spaces["numpy"] = ns
    if torch is None:
        spaces["torch"] = None
    else:
        ns = {k: torch.from_numpy(v.copy()) for k, v in data.items()}
        ns["exp"] = torch.exp
        ns["g"] = torch.from_numpy(data["x"].copy()).requires_grad_(True)
        spaces["torch"] = ns
    return spaces


def _cell(result: Stats | BaseException) -> dict[str, Any]:
    if isinstance(result, BaseException):
        return _error(result)
    return {"time": result.to_json()}


def run_overhead(sizes: EagerSizes, torch: ModuleType | None) -> list[dict[str, Any]]:
    """Microseconds per tiny op, median/min/max over blocks, for each library."""
    spaces = _overhead_namespaces(torch)
    rows = []
    for op in OVERHEAD_OPS:
        _progress(f"overhead: {op.name}")
        stmts = {
            lib: (op.stmt, ns)
            for lib, ns in spaces.items()
            if ns is not None and (lib != "numpy" or op.numpy)
        }
        timed = time_per_op(stmts, number=sizes.ops_per_block, repeats=sizes.blocks)
        results: dict[str, Any] = {lib: _cell(timed[lib]) if lib in timed else None for lib in LIBS}
        rows.append(
            {
                "op": op.name,
                "stmt": op.stmt,
                "results": results,
                "ratio_numpy": _ratio(results, "numpy"),
                "ratio_torch": _ratio(results, "torch"),
            }
        )
    return rows


# -- throughput ---------------------------------------------------------------------------

Fn = Callable[[], Any]


@dataclass(frozen=True)
class Workload:
    """A big op. `make(lib, inputs, module)` returns the zero-argument call to time;
    `bytes_moved(n, s)` is what it must read plus write, given the vector length n and the
    matrix side s; `reference(data)` computes the same result in float64 with NumPy, and a
    library's result counts as the same work when its largest error over the largest
    reference magnitude is at most `rtol` (a sanity check that every column did the same
    job, not an accuracy test)."""

    name: str
    bytes_moved: Callable[[int, int], int]
    make: Callable[[str, dict[str, Any], Any], Fn]
    reference: Callable[[dict[str, np.ndarray]], np.ndarray]
    rtol: float


def _unary(fn_name: str, source: str = "x") -> Callable[[str, dict[str, Any], Any], Fn]:
    """`fn(x)` with the library's own function of that name (`expit` for NumPy sigmoid)."""

    def make(lib: str, inp: dict[str, Any], mod: Any) -> Fn:
        x = inp[source]
        if lib == "numpy" and fn_name == "sigmoid":
            from scipy.special import expit

            return lambda: expit(x)
        f = getattr(mod, fn_name)
        return lambda: f(x)

    return make


def _fma(lib: str, inp: dict[str, Any], mod: Any) -> Fn:
    x, y, z = inp["x"], inp["y"], inp["z"]
    return lambda: x * y + z


def _sum_all(lib: str, inp: dict[str, Any], mod: Any) -> Fn:
    x = inp["x"]
    return lambda: x.sum()


def _sum_rows(lib: str, inp: dict[str, Any], mod: Any) -> Fn:
    m = inp["m"]
    return lambda: m.sum(0)


def _transpose_copy(lib: str, inp: dict[str, Any], mod: Any) -> Fn:
    m = inp["m"]
    if lib == "numpy":
        return lambda: np.ascontiguousarray(m.T)
    return lambda: m.T.contiguous()


def _f64(name: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    return lambda d: d[name].astype(np.float64)


F32 = 4
ELEMENTWISE_RTOL = 1e-5  # a few float32 ulps of the largest value
REDUCTION_RTOL = 1e-3  # float32 accumulation in any order
WORKLOADS = (
    Workload(
        "exp(x)",
        lambda n, s: 2 * F32 * n,
        _unary("exp"),
        lambda d: np.exp(_f64("x")(d)),
        ELEMENTWISE_RTOL,
    ),
    Workload(
        "tanh(x)",
        lambda n, s: 2 * F32 * n,
        _unary("tanh"),
        lambda d: np.tanh(_f64("x")(d)),
        ELEMENTWISE_RTOL,
    ),
    # two ops as written: x*y reads 2 writes 1, (+ z) reads 2 writes 1
    Workload(
        "x * y + z",
        lambda n, s: 6 * F32 * n,
        _fma,
        lambda d: _f64("x")(d) * _f64("y")(d) + _f64("z")(d),
        ELEMENTWISE_RTOL,
    ),
    Workload(
        "sum(x)",
        lambda n, s: F32 * n + F32,
        _sum_all,
        lambda d: np.asarray(_f64("x")(d).sum()),
        REDUCTION_RTOL,
    ),
    Workload(
        "sigmoid(x)",
        lambda n, s: 2 * F32 * n,
        _unary("sigmoid"),
        lambda d: 1.0 / (1.0 + np.exp(-_f64("x")(d))),
        ELEMENTWISE_RTOL,
    ),
    Workload(
        "log(x), x > 0",
        lambda n, s: 2 * F32 * n,
        _unary("log", source="p"),
        lambda d: np.log(_f64("p")(d)),
        ELEMENTWISE_RTOL,
    ),
    Workload(
        "x.sum(0), matrix",
        lambda n, s: F32 * s * s + F32 * s,
        _sum_rows,
        lambda d: _f64("m")(d).sum(0),
        REDUCTION_RTOL,
    ),
    Workload(
        "x.T.contiguous(), matrix",
        lambda n, s: 2 * F32 * s * s,
        _transpose_copy,
        lambda d: np.ascontiguousarray(_f64("m")(d).T),
        0.0,
    ),
)


def _to_numpy(result: Any) -> np.ndarray:
    """Any library's result as a NumPy array (llgrad and torch tensors have `.numpy()`)."""
    return np.asarray(result.numpy() if hasattr(result, "numpy") else result)


def _check(w: Workload, fn: Fn, ref: np.ndarray) -> dict[str, Any]:
    """Run `fn` once more and compare its result with the float64 reference."""
    got = _to_numpy(fn())
    if got.shape != ref.shape:
        return {"ok": False, "detail": f"shape {got.shape}, expected {ref.shape}"}
    err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 1.0
    rel = err / scale if scale > 0 else err
    ok = rel <= w.rtol
    return {
        "ok": ok,
        "max_rel_err": rel,
        "detail": "" if ok else f"max error {rel:.3g} of the largest value > {w.rtol}",
    }


def _big_inputs(sizes: EagerSizes) -> dict[str, np.ndarray]:
    """The same data for every library, from a fixed seed."""
    rng = np.random.default_rng(0)
    n, s = sizes.elements, sizes.side
    return {
        "x": rng.standard_normal(n, dtype=np.float32),
        "y": rng.standard_normal(n, dtype=np.float32),
        "z": rng.standard_normal(n, dtype=np.float32),
        "p": rng.uniform(0.01, 10.0, n).astype(np.float32),
        "m": rng.standard_normal((s, s), dtype=np.float32),
    }


def _as_lib(lib: str, data: dict[str, np.ndarray], torch: ModuleType | None) -> dict[str, Any]:
    """Each library gets its own copy, in memory it allocated itself."""
    if lib == "llgrad":
        return {k: lg.from_numpy(v).clone() for k, v in data.items()}
    if lib == "numpy":
        return {k: v.copy() for k, v in data.items()}
    assert torch is not None
    return {k: torch.from_numpy(v).clone() for k, v in data.items()}


def _ratio(results: dict[str, Any], peer: str) -> float | None:
    """llgrad's median time over the peer's (above 1: llgrad is slower)."""
    mine, theirs = results.get("llgrad"), results.get(peer)
    if not mine or not theirs or "time" not in mine or "time" not in theirs:
        return None
    return mine["time"]["median_s"] / theirs["time"]["median_s"]


def run_throughput(
    sizes: EagerSizes, torch: ModuleType | None, copy_gbps: float
) -> list[dict[str, Any]]:
    """Median ms, effective GB/s and fraction of copy bandwidth per workload and library."""
    data = _big_inputs(sizes)
    modules: dict[str, Any] = {"llgrad": lg, "numpy": np, "torch": torch}
    inputs = {lib: _as_lib(lib, data, torch) for lib in LIBS if modules[lib] is not None}
    rows: list[dict[str, Any]] = []
    for w in WORKLOADS:
        _progress(f"throughput: {w.name}")
        nbytes = w.bytes_moved(sizes.elements, sizes.side)
        results: dict[str, Any] = {lib: None for lib in LIBS}
        fns: dict[str, Fn] = {}
        for lib, inp in inputs.items():
            try:
                fns[lib] = w.make(lib, inp, modules[lib])
            except Exception as exc:  # noqa: BLE001
                results[lib] = _error(exc)
        timed = time_calls(
            fns,
            warmup=2,
            min_repeats=sizes.min_repeats,
            max_repeats=sizes.max_repeats,
            budget_s=sizes.budget_s,
        )
        ref = w.reference(data)
        for lib, res in timed.items():
            results[lib] = cell = _cell(res)
            if "time" in cell:
                cell["gbps"] = nbytes / res.median / 1e9
                cell["copy_fraction"] = cell["gbps"] / copy_gbps
                try:
                    cell["check"] = _check(w, fns[lib], ref)
                except Exception as exc:  # noqa: BLE001
                    cell["check"] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
        del ref
        rows.append(
            {
                "workload": w.name,
                "bytes": nbytes,
                "results": results,
                "ratio_numpy": _ratio(results, "numpy"),
                "ratio_torch": _ratio(results, "torch"),
            }
        )
    return rows


def run(sizes: EagerSizes, torch: ModuleType | None, limits: dict[str, Any]) -> dict[str, Any]:
    """The whole eager suite; throughput fractions refer to the NumPy copy bandwidth."""
    copy_gbps = limits["copy_numpy"]["gbps_median"]
    return {
        "sizes": sizes.__dict__,
        "overhead": run_overhead(sizes, torch),
        "throughput": run_throughput(sizes, torch, copy_gbps),
    }


# -- Markdown -----------------------------------------------------------------------------

DASH = "–"


def _num(v: float) -> str:
    """Three significant digits, without scientific notation for the usual ranges."""
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _time_cell(cell: dict[str, Any] | None, scale: float) -> str:
    if cell is None:
        return DASH
    if "error" in cell:
        return "fails"
    t = cell["time"]
    return f"{_num(t['median_s'] * scale)} ({_num(t['min_s'] * scale)}–{_num(t['max_s'] * scale)})"


def _bw_cell(cell: dict[str, Any] | None) -> str:
    if cell is None or "error" in cell:
        return DASH
    return f"{_num(cell['gbps'])} ({cell['copy_fraction'] * 100:.0f}%)"


def _ratio_cell(r: float | None) -> str:
    return DASH if r is None else f"{_num(r)}×"


def render(result: dict[str, Any]) -> str:
    """The suite's two Markdown tables."""
    s = result["sizes"]
    lines = [
        "## Eager per-op overhead",
        "",
        f"µs per op on tiny float32 tensors (x, y of shape (4,); a, b of (4, 4)): median "
        f"(min–max) over {s['blocks']} blocks of {s['ops_per_block']} ops. "
        "Ratios are llgrad / peer (above 1: llgrad slower).",
        "",
        "| op | statement | llgrad µs | NumPy µs | torch µs | llgrad/NumPy | llgrad/torch |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["overhead"]:
        r = row["results"]
        lines.append(
            f"| {row['op']} | `{row['stmt']}` | {_time_cell(r['llgrad'], 1e6)} | "
            f"{_time_cell(r['numpy'], 1e6)} | {_time_cell(r['torch'], 1e6)} | "
            f"{_ratio_cell(row['ratio_numpy'])} | "
            f"{_ratio_cell(row['ratio_torch'])} |"
        )
    lines += [
        "",
        "## Eager throughput",
        "",
        f"float32, vectors of {s['elements']:,} elements, matrix {s['side']}×{s['side']}, "
        "inputs from a fixed seed. ms: median (min–max) of single calls, result included. "
        "GB/s: bytes read + written (MB column) over the median time; % of the measured "
        "`np.copyto` bandwidth. Ratios are llgrad / peer time (above 1: llgrad slower).",
        "",
        "| workload | MB moved | llgrad ms | llgrad GB/s | NumPy ms | NumPy GB/s | "
        "torch ms | torch GB/s | llgrad/NumPy | llgrad/torch |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["throughput"]:
        r = row["results"]
        lines.append(
            f"| {row['workload']} | {_num(row['bytes'] / 1e6)} | "
            f"{_time_cell(r['llgrad'], 1e3)} | {_bw_cell(r['llgrad'])} | "
            f"{_time_cell(r['numpy'], 1e3)} | {_bw_cell(r['numpy'])} | "
            f"{_time_cell(r['torch'], 1e3)} | {_bw_cell(r['torch'])} | "
            f"{_ratio_cell(row['ratio_numpy'])} | {_ratio_cell(row['ratio_torch'])} |"
        )
    failures = [
        (row.get("op") or row.get("workload"), lib, cell["error"])
        for row in result["overhead"] + result["throughput"]
        for lib, cell in row["results"].items()
        if cell and "error" in cell
    ]
    failures += [
        (
            row["workload"],
            lib,
            "result differs from the float64 reference: " + cell["check"]["detail"],
        )
        for row in result["throughput"]
        for lib, cell in row["results"].items()
        if cell and "check" in cell and not cell["check"]["ok"]
    ]
    if failures:
        lines += ["", "Failures:", ""]
        lines += [f"- {name}, {lib}: {err}" for name, lib, err in failures]
    else:
        lines += [
            "",
            "Every throughput result matched a float64 NumPy reference "
            "(elementwise: error ≤ 1e-5 of the largest value; reductions: ≤ 1e-3).",
        ]
    return "\n".join(lines) + "\n"
