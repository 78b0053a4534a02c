"""Run torch's ModuleInfo and OptimizerInfo databases through llgrad (tests/module_harness.py).

    python tools/moduleinfo_sweep.py            # every input of every row
    python tools/moduleinfo_sweep.py --only nn.Conv2d,Adam --no-write

Writes tests/moduleinfo_status.json (what tests/test_module_db.py holds llgrad to) and
docs/moduleinfo.md (counts, and every row that does not pass with its first failure).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
warnings.filterwarnings("ignore")

import module_harness as M  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--only", help="comma-separated ModuleInfo/OptimizerInfo names")
    p.add_argument("--no-write", action="store_true")
    ns = p.parse_args()
    from torch.testing._internal.common_modules import module_db
    from torch.testing._internal.common_optimizers import optim_db

    only = set(ns.only.split(",")) if ns.only else None
    results = {"modules": [], "optimizers": []}
    for info in module_db:
        if only and info.name not in only:
            continue
        r = M.run_module(info)
        results["modules"].append(r)
        print(f"{r.key}: {r.status} {r.passed}/{r.cases} {r.reason[:150]}", flush=True)
    for info in optim_db:
        if only and info.optim_cls.__name__ not in only:
            continue
        r = M.run_optimizer(info)
        results["optimizers"].append(r)
        print(f"{r.key}: {r.status} {r.passed}/{r.cases} {r.reason[:200]}", flush=True)
    counts = {
        kind: {s: sum(r.status == s for r in rs) for s in ("pass", "fail", "missing")}
        | {
            "rows": len(rs),
            "cases": sum(r.cases for r in rs),
            "cases passed": sum(r.passed for r in rs),
        }
        for kind, rs in results.items()
    }
    print(json.dumps(counts, indent=1))
    if ns.no_write or only:
        return 0
    status = {
        r.key: {"status": r.status, "reason": r.reason} for rs in results.values() for r in rs
    }
    (ROOT / "tests" / "moduleinfo_status.json").write_text(
        json.dumps(status, indent=0, sort_keys=True) + "\n"
    )
    lines = [
        "# torch's ModuleInfo and OptimizerInfo databases run through llgrad",
        "",
        "Written by `python tools/moduleinfo_sweep.py` (tests/module_harness.py says "
        "what is compared: outputs, input and parameter gradients and state in train "
        "and eval mode for modules; parameters and state after five steps for "
        "optimizers, for every option combination torch's table lists).",
        "",
    ]
    for kind, c in counts.items():
        lines += [
            f"- {kind}: {c['pass']} of {c['rows']} rows pass ({c['cases passed']} of "
            f"{c['cases']} cases); {c['fail']} fail, {c['missing']} missing"
        ]
    lines += ["", "| row | status | first failure |", "|---|---|---|"]
    for rs in results.values():
        lines += [
            f"| `{r.key}` | {r.status} | {r.reason.replace('|', '/')} |"
            for r in rs
            if r.status != "pass"
        ]
    (ROOT / "docs" / "moduleinfo.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LLGRAD_COMPILE_WORKER", "0")
    sys.exit(main())
