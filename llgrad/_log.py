"""`LLGRAD_LOG=graph,passes,fusion,llvm,cache,recompiles,graph_breaks`: stage logging.

`LLGRAD_LOG=all` turns every channel on. Messages go to stderr with the channel name.
"""
from __future__ import annotations

import os
import sys

CHANNELS = ("graph", "passes", "fusion", "llvm", "cache", "recompiles", "graph_breaks",
            "kernels")


def _parse(value: str) -> frozenset[str]:
    names = {v.strip() for v in value.split(",") if v.strip()}
    if "all" in names:
        return frozenset(CHANNELS)
    return frozenset(names)


_enabled: frozenset[str] = _parse(os.environ.get("LLGRAD_LOG", ""))


def enabled(channel: str) -> bool:
    return channel in _enabled


def set_channels(value: str) -> None:
    """Change the enabled channels at run time (same syntax as the variable)."""
    global _enabled
    _enabled = _parse(value)


def log(channel: str, message: str) -> None:
    if channel in _enabled:
        print(f"[llgrad:{channel}] {message}", file=sys.stderr)
