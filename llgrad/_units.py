"""`human_bytes`: a byte count as people read it (error messages, `llgrad cache info`)."""

from __future__ import annotations


def human_bytes(nbytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.1f} {unit}" if unit != "bytes" else f"{int(nbytes)} bytes"
        nbytes /= 1024
    raise AssertionError
