"""The Markdown summary of `benchmarks/gpu_bench.py` records.

    python -m benchmarks.gpu_report gpu_out/gpu_bench.jsonl [more.jsonl ...] [--out PATH]

Reads the JSON lines (one record per line; a line that is not JSON is skipped with a
warning), keeps the last record of each (library, workload), and prints one table per
(size, device) found: rows are the workloads, columns the libraries, each cell the median
ms of one step (the fastest in bold), the last column llgrad's median over the fastest of
torch.compile and jax.jit (below 1: llgrad is ahead), and a row under B1 with each
library's B1 memory traffic in GB/s (16 bytes per element at least) and its share of the
card's copy bandwidth (the `copy` record). A cell reads "error" when the process failed or
timed out and "wrong" when an output missed the float64 reference; neither is bold or
counted in a ratio, and "skipped" when gpu_check.sh ran out of time before it; the notes
under the table say why. Below the table: steps issued back
to back, first-call (trace + compile) times, and each cell's largest relative error.
The text is printed and written to `--out` (default: gpu_report.md beside the first input).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

LIBS = ("llgrad", "torch", "torch.compile", "jax.jit")
PEERS = ("torch.compile", "jax.jit")
WORKLOADS = ("B1", "B2", "B6", "B8")
B1_BYTES_PER_ELEMENT = 16


def read_records(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every JSON object of the files, in order (bad lines skipped with a warning)."""
    out = []
    for path in paths:
        for k, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                print(f"gpu_report: {path}:{k}: not JSON, skipped", file=sys.stderr)
                continue
            if isinstance(rec, dict) and "library" in rec:
                out.append(rec)
    return out


def group(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[tuple[str, str], dict]]:
    """{(size, device): {(library, workload): last record}}; a record without size or device
    (a timeout the shell wrote) joins the group most records belong to."""
    keys = Counter(
        (r.get("size"), r.get("device")) for r in records if r.get("size") and r.get("device")
    )
    default: tuple[str, str] = (
        (str(keys.most_common(1)[0][0][0]), str(keys.most_common(1)[0][0][1]))
        if keys
        else ("?", "?")
    )
    groups: dict[tuple[str, str], dict[tuple[str, str], dict]] = {}
    for r in records:
        size, device = r.get("size"), r.get("device")
        key = (str(size), str(device)) if size and device else default
        groups.setdefault(key, {})[(r["library"], r.get("workload", "copy"))] = r
    return groups


def fmt_ms(v: float) -> str:
    """A positive number (ms, GB/s) to about three significant figures, never in exponent
    form above 1."""
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def valid(r: dict[str, Any] | None) -> bool:
    """A record with a time that did not fail its check."""
    if not r:
        return False
    return "error" not in r and "skipped" not in r and r.get("ok") is not False and "median_ms" in r


def _cell(r: dict[str, Any] | None, key: str = "median_ms") -> str:
    if r is None:
        return "–"
    if "skipped" in r:
        return "skipped"
    if "error" in r:
        return "error"
    if r.get("ok") is False:
        return "wrong"
    v = r.get(key)
    if v is None:
        return "–"
    return fmt_ms(v) + ("" if r.get("ok") else " (unchecked)")


def _bandwidth_row(cells: dict[tuple[str, str], dict], libs: list[str]) -> str | None:
    copy = cells.get(("copy", "copy"))
    copy_gb = copy.get("gb_s") if copy and "error" not in copy else None
    row, any_value = [], False
    for lib in libs:
        r = cells.get((lib, "B1"))
        if r is None or not valid(r):
            row.append("–")
            continue
        moved = r.get("bytes_moved") or B1_BYTES_PER_ELEMENT * r.get("sizes", {}).get("n", 0)
        if not moved:
            row.append("–")
            continue
        gb = moved / (r["median_ms"] / 1e3) / 1e9
        any_value = True
        row.append(f"{fmt_ms(gb)} GB/s" + (f" ({100 * gb / copy_gb:.0f}%)" if copy_gb else ""))
    if not any_value:
        return None
    return "| B1 GB/s (% of copy) | | " + " | ".join(row) + " | |"


def _sizes_text(r: dict[str, Any] | None, workload: str, size: str) -> str:
    """The sizes a record names, else those gpu_bench uses for `size`."""
    sizes = r.get("sizes") if r else None
    if not sizes:
        from benchmarks.gpu_bench import SIZES, workload_sizes

        sizes = workload_sizes(workload, size) if size in SIZES else {}
    return " ".join(f"{k} {v}" for k, v in sizes.items() if k != "layers")


def render_group(size: str, device: str, cells: dict[tuple[str, str], dict]) -> str:
    """The Markdown of one (size, device) group."""
    libs = list(LIBS)  # every column, "–" where a library has no record
    workloads = [w for w in WORKLOADS if any(wl == w for _, wl in cells)]
    names = sorted({r["device_name"] for r in cells.values() if r.get("device_name")})
    dates = sorted(r["date"] for r in cells.values() if r.get("date"))
    lines = [
        f"## {', '.join(names) or 'unknown device'} ({device}, {size} sizes)",
        "",
        (f"{dates[0]} to {dates[-1]}. " if dates else "")
        + "Median ms per step (each call timed alone, up to a device synchronization; "
        "`benchmarks/gpu_bench.py`), **bold** the fastest; ratio: llgrad over the "
        "fastest of torch.compile and jax.jit (below 1: llgrad ahead).",
        "",
        "| workload | sizes | " + " | ".join(libs) + " | ratio |",
        "|---|---|" + "---|" * len(libs) + "---|",
    ]
    notes: list[str] = []
    skipped: list[str] = []
    for w in workloads:
        row = {lib: cells.get((lib, w)) for lib in libs}
        ok = {lib: r["median_ms"] for lib, r in row.items() if r is not None and valid(r)}
        best = min(ok.values()) if ok else None
        texts = []
        for lib in libs:
            t = _cell(row[lib])
            if best is not None and lib in ok and ok[lib] == best:
                t = f"**{t}**"
            texts.append(t)
        peers = [ok[p] for p in PEERS if p in ok]
        ratio = f"{ok['llgrad'] / min(peers):.2f}" if "llgrad" in ok and peers else "–"
        sample = next((r for r in row.values() if r and r.get("sizes")), None)
        lines.append(
            f"| {w} | {_sizes_text(sample, w, size)} | " + " | ".join(texts) + f" | {ratio} |"
        )
        if w == "B1":
            bw = _bandwidth_row(cells, libs)
            if bw:
                lines.append(bw)
        for lib in libs:
            r = row[lib]
            if r and "skipped" in r:
                skipped.append(f"{w} {lib}")
            elif r and "error" in r:
                notes.append(f"- {w} {lib}: error: {r['error']}")
            elif r and r.get("ok") is False:
                notes.append(
                    f"- {w} {lib}: wrong: max relative error {r.get('max_rel_err')} "
                    f"(tolerance {r.get('tolerance')}); {fmt_ms(r['median_ms'])} ms"
                    if "median_ms" in r
                    else f"- {w} {lib}: wrong"
                )
            elif (
                r
                and device == "cuda"
                and any("cpu" in d.lower() for d in r.get("output_devices", []))
            ):
                notes.append(
                    f"- {w} {lib}: outputs on {', '.join(r['output_devices'])}, not the GPU"
                )
            elif r and r.get("ok") is None and "median_ms" in r:
                notes.append(f"- {w} {lib}: unchecked ({r.get('reference', 'no reference')})")
    if skipped:
        reasons = sorted({r["skipped"] for r in cells.values() if "skipped" in r})
        notes.append(f"- skipped ({'; '.join(reasons)}): {', '.join(skipped)}")
    copy = cells.get(("copy", "copy"))
    if copy:
        if "error" in copy:
            notes.append(f"- copy bandwidth: error: {copy['error']}")
        elif "gb_s" in copy:
            ev = (
                f", {fmt_ms(copy['gb_s_events'])} GB/s timed with CUDA events over back-to-back "
                f"copies"
                if copy.get("gb_s_events")
                else ""
            )
            lines += [
                "",
                (
                    f"Copy bandwidth: {fmt_ms(copy['gb_s'])} GB/s "
                    f"({copy.get('how', 'copy')}, timed as the steps are{ev})."
                ),
            ]
    if notes:
        lines += ["", "Failures:", "", *notes]
    lines += _side_table(
        cells,
        libs,
        workloads,
        "pipelined_ms",
        "Steps issued back to back (one synchronization per group), ms per step:",
    )
    lines += _side_table(
        cells,
        libs,
        workloads,
        "first_call_s",
        "First call (trace and compile included), s:",
        seconds=True,
    )
    lines += [
        "",
        (
            "Largest relative error against the float64 reference (loss and every "
            "gradient; B2: loss and updated parameters):"
        ),
        "",
        "| workload | " + " | ".join(libs) + " |",
        "|---|" + "---|" * len(libs),
    ]
    for w in workloads:
        errs = []
        for lib in libs:
            r = cells.get((lib, w))
            e = r.get("max_rel_err") if r else None
            errs.append("–" if e is None else (f"{e:.2g}" if isinstance(e, float) else str(e)))
        lines.append(f"| {w} | " + " | ".join(errs) + " |")
    return "\n".join(lines) + "\n"


def _side_table(
    cells: dict[tuple[str, str], dict],
    libs: list[str],
    workloads: list[str],
    key: str,
    title: str,
    seconds: bool = False,
) -> list[str]:
    rows = []
    for w in workloads:
        vals = []
        for lib in libs:
            r = cells.get((lib, w))
            v = r.get(key) if r and "error" not in r else None
            vals.append("–" if v is None else (f"{v:.3g}" if seconds else fmt_ms(v)))
        if any(v != "–" for v in vals):
            rows.append(f"| {w} | " + " | ".join(vals) + " |")
    if not rows:
        return []
    return [
        "",
        title,
        "",
        "| workload | " + " | ".join(libs) + " |",
        "|---|" + "---|" * len(libs),
        *rows,
    ]


def render(records: list[dict[str, Any]]) -> str:
    """The whole report: a title and one section per (size, device)."""
    groups = group(records)
    if not groups:
        return "# llgrad GPU benchmark\n\nNo records.\n"
    parts = ["# llgrad GPU benchmark", ""]
    for (size, device), cells in groups.items():
        parts.append(render_group(size, device, cells))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Read the records, print the report and write it to --out."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", type=Path, help="JSON-lines files of gpu_bench records")
    p.add_argument("--out", type=Path, default=None, help="Markdown file to write")
    args = p.parse_args(argv)
    missing = [str(x) for x in args.inputs if not x.exists()]
    if missing:
        print(f"gpu_report: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    text = render(read_records(args.inputs))
    out = args.out or args.inputs[0].with_name("gpu_report.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
