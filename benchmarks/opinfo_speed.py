"""Every covered op against torch eager on its median OpInfo sample (one library per process).

    python -m benchmarks.opinfo_speed                 # every OpInfo that passes (status file)
    python -m benchmarks.opinfo_speed --only add,exp --budget 0.2

For each OpInfo that tests/opinfo_status.json marks as passing, the torch process takes the
float32 sample of median size (by elements; float64, then any dtype, when float32 has none),
times torch's op on it and writes the sample as NumPy arrays; a second process, which never
imports torch, loads the samples and times llgrad's op. Both pin every thread pool to 2
threads, warm up 3 calls and take the median of calls for `--budget` seconds (so an eager
composite's one-time compile, on its first call, is not timed; the llgrad process lifts the
process-wide cap on compiled composite keys, since each OpInfo stands for a program of its
own). The pair of processes runs `--rounds` times, alternating, and each library keeps its
smallest median over the rounds, so a burst of load from elsewhere on the machine during one
round does not decide a row. The ratio is llgrad's time over torch's; the table lists the
worst first. A correctness check is not
repeated here: the OpInfo suite compares values.
"""

from __future__ import annotations

import argparse
import json
import marshal
import types
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
THREADS = 2


def pin_threads() -> None:
    for var in (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "LLGRAD_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
    ):
        os.environ[var] = str(THREADS)
    try:
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:THREADS]))
    except (AttributeError, OSError):
        pass


def median_time(call: Callable[[], Any], budget: float) -> float:
    for _ in range(3):
        call()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 2000):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


# -- the torch process ---------------------------------------------------------------------


def _neutral(x: Any, torch: Any) -> Any:
    """A torch value as NumPy arrays and Python values (tagged tuples)."""
    if isinstance(x, torch.Tensor):
        t = x.detach().resolve_conj().resolve_neg()
        name = str(t.dtype).split(".")[1]
        arr = t.float().numpy() if name in ("bfloat16", "float16") else t.numpy()
        return ("tensor", arr.copy(), name)
    if isinstance(x, torch.dtype):
        return ("dtype", str(x).split(".")[1])
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_neutral(v, torch) for v in x)
    if isinstance(x, dict):
        return {k: _neutral(v, torch) for k, v in x.items()}
    if isinstance(x, (bool, int, float, complex, str, type(None))):
        return x
    raise TypeError(type(x).__name__)


def torch_side(path: str, only: set[str] | None, budget: float) -> None:
    pin_threads()
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(THREADS)
    sys.path.insert(0, str(ROOT / "tests"))
    import opinfo_harness as H

    status_file = ROOT / "tests" / "opinfo_status.json"
    status = json.loads(status_file.read_text()) if status_file.exists() else {}
    out: dict[str, Any] = {}
    for op in H.cpu_ops():
        key = H.key_of(op)
        if (only and key not in only and op.name not in only) or (
            not only and status.get(key, {}).get("status") != "pass"
        ):
            continue
        _, how = H.resolve(op)
        if H.is_random(op, next(iter(op.sample_inputs("cpu", torch.float32)), None)):
            continue
        supported = op.supported_dtypes("cpu")
        dtype = next(
            (d for d in (torch.float32, torch.float64) if d in supported),
            next(iter(sorted(supported, key=str)), None),
        )
        torch.manual_seed(0)
        try:
            samples = list(op.sample_inputs("cpu", dtype))
            samples.sort(
                key=lambda s: sum(
                    t.numel()
                    for t in H.flatten([s.input, list(s.args), list(s.kwargs.values())])
                    if isinstance(t, torch.Tensor)
                )
            )
            s = samples[len(samples) // 2]
            neutral = (_neutral(s.input, torch), _neutral(s.args, torch), _neutral(s.kwargs, torch))
            t = median_time(lambda: op.op(s.input, *s.args, **s.kwargs), budget)
        except Exception as e:  # noqa: BLE001
            print(f"torch {key}: skipped ({type(e).__name__}: {e})"[:160], file=sys.stderr)
            continue
        out[key] = {"name": op.name, "how": how, "sample": neutral, "torch_s": t}
        if H._ported_lambda(op) is not None:  # the OpInfo's own lambda, run over llgrad
            out[key]["code"] = marshal.dumps(op.op.__code__)
        print(f"torch {key}: {t * 1e6:.1f} us", file=sys.stderr, flush=True)
    with open(path, "wb") as f:
        pickle.dump(out, f)


# -- the llgrad process (torch is never imported here) ------------------------------------------


def llgrad_side(path: str, result: str, budget: float) -> None:
    pin_threads()
    # each OpInfo stands for a program of its own: the process-wide cap on eager compiled
    # keys (256, meant for one program's shapes) would leave the later ops uncompiled
    os.environ.setdefault("LLGRAD_EAGER_COMPILE_LIMIT", "100000")
    import warnings

    warnings.filterwarnings("ignore")
    import llgrad as lg

    assert "torch" not in sys.modules
    with open(path, "rb") as f:
        cases = pickle.load(f)

    def to_lg(x: Any) -> Any:
        if isinstance(x, tuple) and x and x[0] == "tensor" and len(x) == 3:
            _, arr, name = x
            d = lg.bool if name == "bool" else getattr(lg, name)
            return (
                lg.tensor(arr).to(d) if name in ("bfloat16", "float16") else lg.tensor(arr, dtype=d)
            )
        if isinstance(x, tuple) and len(x) == 2 and x[0] == "dtype":
            return lg.bool if x[1] == "bool" else getattr(lg, x[1])
        if isinstance(x, (list, tuple)):
            return type(x)(to_lg(v) for v in x)
        if isinstance(x, dict):
            return {k: to_lg(v) for k, v in x.items()}
        return x

    def seeded(fn: Callable[..., Any], *a: Any, **k: Any) -> Any:
        lg.manual_seed(42)
        return fn(*a, **k)

    times: dict[str, float] = {}
    for key, case in cases.items():
        name, how = case["name"], case["how"]
        x, args, kwargs = (to_lg(v) for v in case["sample"])
        if "code" in case:
            glob = {"torch": lg, "wrapper_set_seed": seeded}
            fn = types.FunctionType(marshal.loads(case["code"]), glob)
            call = lambda: fn(x, *args, **kwargs)  # noqa: E731
        elif how == "function":
            fn: Any = lg
            for part in name.split("."):
                fn = getattr(fn, part)
            call = lambda: fn(x, *args, **kwargs)  # noqa: E731
        elif how == "attribute":
            call = lambda: getattr(x, name)  # noqa: E731
        elif name.endswith("_"):
            call = lambda: getattr(x.clone(), name)(*args, **kwargs)  # noqa: E731
        else:
            call = lambda: getattr(x, name)(*args, **kwargs)  # noqa: E731
        try:
            times[key] = median_time(call, budget)
        except Exception as e:  # noqa: BLE001
            print(f"llgrad {key}: failed ({type(e).__name__}: {e})"[:160], file=sys.stderr)
            continue
        print(f"llgrad {key}: {times[key] * 1e6:.1f} us", file=sys.stderr, flush=True)
    Path(result).write_text(json.dumps(times))


# -- the parent ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", help="comma-separated OpInfo keys or op names")
    p.add_argument("--budget", type=float, default=0.05, help="seconds of timed calls per op")
    p.add_argument("--rounds", type=int, default=3, help="alternating runs of both processes")
    p.add_argument("--out", help="write the markdown table here")
    p.add_argument("--torch-side", nargs=1, help=argparse.SUPPRESS)
    p.add_argument("--llgrad-side", nargs=2, help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    only = set(ns.only.split(",")) if ns.only else None
    if ns.torch_side:
        torch_side(ns.torch_side[0], only, ns.budget)
        return 0
    if ns.llgrad_side:
        llgrad_side(*ns.llgrad_side, ns.budget)
        return 0
    cases: dict[str, Any] = {}
    mine: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="llgrad-opspeed-") as tmp:
        samples, result = f"{tmp}/samples.pkl", f"{tmp}/llgrad.json"
        base = [sys.executable, "-m", "benchmarks.opinfo_speed", "--budget", str(ns.budget)]
        for _ in range(max(1, ns.rounds)):
            subprocess.run(
                base + (["--only", ns.only] if ns.only else []) + ["--torch-side", samples],
                check=True,
                cwd=ROOT,
            )
            subprocess.run(base + ["--llgrad-side", samples, result], check=True, cwd=ROOT)
            with open(samples, "rb") as f:
                for k, c in pickle.load(f).items():
                    if k not in cases or c["torch_s"] < cases[k]["torch_s"]:
                        cases[k] = c
            for k, t in json.loads(Path(result).read_text()).items():
                mine[k] = min(t, mine.get(k, t))
    rows = sorted(
        ((mine[k] / c["torch_s"], k, mine[k], c["torch_s"]) for k, c in cases.items() if k in mine),
        reverse=True,
    )
    over = sum(r[0] > 2 for r in rows)
    lines = [
        f"# Every covered op against torch eager ({time.strftime('%Y-%m-%d')})",
        "",
        f"`python -m benchmarks.opinfo_speed`: {len(rows)} OpInfos timed, median sample, "
        f"one library per process, {THREADS} threads, best of {max(1, ns.rounds)} alternating "
        f"rounds; {over} over 2x torch's time.",
        "",
        "| OpInfo | llgrad (us) | torch (us) | ratio |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| `{k}` | {m * 1e6:.1f} | {t * 1e6:.1f} | {r:.2f} |" for r, k, m, t in rows]
    text = "\n".join(lines) + "\n"
    print("\n".join(lines[:16]))
    if ns.out:
        Path(ns.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
