"""Run torch's OpInfo database through llgrad (tests/opinfo_harness.py) and record the result.

    python tools/opinfo_sweep.py --samples 8       # every CPU OpInfo, up to 8 samples per dtype
    python tools/opinfo_sweep.py --quick           # the CI sample: 2 samples, 1 grad sample
    python tools/opinfo_sweep.py --only add,linalg.solve
    python tools/opinfo_sweep.py --samples 100000 --start 234 --no-write   # resume a long run

Writes tests/opinfo_status.json (the per-OpInfo status tests/test_opinfo.py holds llgrad to)
and docs/opinfo.md (counts and every OpInfo that does not pass, with its first failure).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import opinfo_harness as H  # noqa: E402


class Timeout(BaseException):
    """Raised by the alarm; a BaseException so that the harness's handlers let it through."""


def _alarm(signum: int, frame: object) -> None:
    raise Timeout()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="the CI sample only")
    p.add_argument("--only", help="comma-separated OpInfo keys")
    p.add_argument("--timeout", type=int, default=60, help="seconds per OpInfo")
    p.add_argument(
        "--samples",
        type=int,
        default=24,
        help="samples per dtype in the full sweep (gradient samples: half)",
    )
    p.add_argument("--no-write", action="store_true")
    p.add_argument(
        "--start",
        type=int,
        default=1,
        help="begin at this OpInfo (1-based position in the database order)",
    )
    ns = p.parse_args()
    ops = H.cpu_ops()
    if ns.only:
        want = set(ns.only.split(","))
        ops = [o for o in ops if H.key_of(o) in want or o.name in want]
    first = max(ns.start, 1) - 1
    ops = ops[first:]
    signal.signal(signal.SIGALRM, _alarm)
    results = []
    t0 = time.time()
    for i, op in enumerate(ops):
        signal.alarm(ns.timeout)
        try:
            if ns.quick:
                r = H.run_op(op, max_samples=2, grad_samples=1, errors=3, extra=H.has_empty_tensor)
            else:
                r = H.run_op(
                    op,
                    max_samples=ns.samples,
                    grad_samples=ns.samples // 2,
                    dtypes=(
                        H.torch.float32,
                        H.torch.float64,
                        H.torch.int64,
                        H.torch.bool,
                        H.torch.complex64,
                    ),
                )
        except Timeout:
            r = H.OpResult(H.key_of(op), status="fail", reason=f"timeout ({ns.timeout} s)")
        except Exception as e:  # noqa: BLE001
            r = H.OpResult(H.key_of(op), status="fail", reason=f"harness: {e!r}"[:200])
        finally:
            signal.alarm(0)
        results.append(r)
        print(
            f"[{first + i + 1}/{first + len(ops)} {time.time() - t0:.0f}s] {r.key}: {r.status} "
            f"{r.passed}/{r.samples} grad {r.grad_passed}/{r.grad_samples} "
            f"{r.compiled} {r.reason[:100]}",
            flush=True,
        )
    counts = summarize(results)
    print(json.dumps(counts, indent=1))
    if not ns.no_write and not ns.only and not first:
        status = {r.key: {"status": r.status, "reason": r.reason} for r in results}
        (ROOT / "tests" / "opinfo_status.json").write_text(
            json.dumps(status, indent=0, sort_keys=True) + "\n"
        )
        write_markdown(results, counts, ns.quick)
    return 0


def summarize(results: list[H.OpResult]) -> dict[str, int]:
    inside = [r for r in results if r.status != "outside"]
    return {
        "opinfos": len(results),
        "outside the table": len(results) - len(inside),
        "considered": len(inside),
        "pass": sum(r.status == "pass" for r in inside),
        "fail": sum(r.status == "fail" for r in inside),
        "missing": sum(r.status == "missing" for r in inside),
        "samples": sum(r.samples for r in inside),
        "samples passed": sum(r.passed for r in inside),
        "grad samples": sum(r.grad_samples for r in inside),
        "grad samples passed": sum(r.grad_passed for r in inside),
        "compiled pass": sum(r.compiled == "pass" for r in inside),
        "compiled fail": sum(r.compiled == "fail" for r in inside),
        "error inputs": sum(r.errors for r in inside),
        "error inputs passed": sum(r.errors_passed for r in inside),
    }


def write_markdown(results: list[H.OpResult], counts: dict[str, int], quick: bool) -> None:
    lines = [
        "# torch's OpInfo database run through llgrad",
        "",
        "Written by `python tools/opinfo_sweep.py"
        + (" --quick" if quick else "")
        + "` (tests/opinfo_harness.py says what is compared). An OpInfo passes when every "
        "sample it was given matches torch in values, dtypes and shapes, every float64 "
        "gradient sample matches torch's vector-Jacobian product, and its first sample "
        "compiled equals eager. Error inputs are counted apart.",
        "",
        "| | count |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {v} |" for k, v in counts.items()]
    considered = counts["considered"] or 1
    lines += [
        "",
        f"Passing: {counts['pass']} of {counts['considered']} OpInfos "
        f"({100 * counts['pass'] / considered:.1f}%).",
        "",
        "## OpInfos that do not pass",
        "",
        "| OpInfo | status | first failure |",
        "|---|---|---|",
    ]
    for r in results:
        if r.status in ("fail", "missing"):
            lines.append(f"| `{r.key}` | {r.status} | {r.reason.replace('|', '/')} |")
    lines += ["", "## OpInfos outside the coverage table", ""]
    lines += [", ".join(f"`{r.key}`" for r in results if r.status == "outside")]
    (ROOT / "docs" / "opinfo.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("LLGRAD_COMPILE_WORKER", "0")
    sys.exit(main())
