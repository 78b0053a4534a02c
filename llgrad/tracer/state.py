"""The trace stack (the innermost trace context of each thread) and the user's source
location an op is attributed to; below both the trace context and the tracer tensors."""

from __future__ import annotations

import functools
import os
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

    from .context import TraceContext

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Stack(threading.local):
    def __init__(self) -> None:
        self.stack: list["TraceContext"] = []  # innermost last; one per thread
        # the location nodes get instead of the user's frame (None: the frame): the
        # autodiff pass replays a graph and gives each node its op's own line
        self.location: str | None = None


_tls = _Stack()


def current() -> "TraceContext | None":
    stack = _tls.stack
    return stack[-1] if stack else None


@functools.lru_cache(maxsize=4096)
def _user_file(path: str) -> str | None:
    """The name a location shows for a code object's file; None inside llgrad."""
    if os.path.abspath(path).startswith(_PACKAGE_DIR) or "<frozen" in path:
        return None
    return os.path.basename(path)


def user_location() -> str | None:
    """`file.py:line` of the innermost frame outside the llgrad package (or the location
    a replay set, `_tls.location`)."""
    if _tls.location is not None:
        return _tls.location
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = _user_file(frame.f_code.co_filename)
        if name is not None:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return None
