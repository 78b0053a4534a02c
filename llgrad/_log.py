"""llgrad's log channels, on Python's `logging`.

Every channel is a logger under `llgrad`: `llgrad.graph`, `llgrad.passes`,
`llgrad.fusion`, `llgrad.llvm`, `llgrad.cache`, `llgrad.recompiles`,
`llgrad.graph_breaks`, `llgrad.kernels`, `llgrad.stages` (every compiler stage's artifact
as it is made, in pipeline order: `compiler.pipeline`). Messages are INFO records and the `llgrad`
logger's level is WARNING (set at import unless the application set one before), so
`logging.basicConfig(level=logging.INFO)` does not print llgrad's IR listings; nothing is
printed unless the application asks for a channel (the recompile limit also warns through
`warnings`), as PyTorch's loggers behave:

    logging.basicConfig()
    logging.getLogger("llgrad.recompiles").setLevel(logging.INFO)

Channels propagate to the application's handlers (so pytest's caplog sees them) once
their level lets records through. `LLGRAD_LOG=recompiles,graph_breaks` (or `all`) is a
shortcut that turns the named channels on with llgrad's own handler, printing
`[llgrad:channel] message` lines to stderr, and stops them propagating (no line is
printed twice under a root handler); `set_channels` does the same at run time. A name
that is not a channel warns, listing the channels.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

CHANNELS = (
    "graph",
    "passes",
    "fusion",
    "llvm",
    "cache",
    "recompiles",
    "graph_breaks",
    "kernels",
    "stages",
)

_root = logging.getLogger("llgrad")
if _root.level == logging.NOTSET:  # the application's own setting wins
    _root.setLevel(logging.WARNING)
_loggers = {c: logging.getLogger(f"llgrad.{c}") for c in CHANNELS}
_handler: logging.Handler | None = None
_shortcut: frozenset[str] = frozenset()  # channels LLGRAD_LOG/set_channels turned on


class _Stderr(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record comes (test capture, redirection)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(_Format())

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"[{record.name.replace('.', ':', 1)}] {record.getMessage()}"


def _parse(value: str) -> frozenset[str]:
    names = {v.strip() for v in value.split(",") if v.strip()}
    if "all" in names:
        return frozenset(CHANNELS)
    unknown = sorted(names - set(CHANNELS))
    if unknown:
        warnings.warn(
            f"LLGRAD_LOG: unknown channel{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} (channels: {', '.join(CHANNELS)}, "
            f"or all)",
            RuntimeWarning,
            stacklevel=3,
        )
    return frozenset(names & set(CHANNELS))


def set_channels(value: str) -> None:
    """Turn the named channels on (same syntax as LLGRAD_LOG) and the others that this
    shortcut turned on before off; loggers the application configured itself are left
    alone."""
    global _handler, _shortcut
    wanted = _parse(value)
    if _handler is None:
        _handler = _Stderr()
    for c in _shortcut - wanted:
        _loggers[c].setLevel(logging.NOTSET)
        _loggers[c].removeHandler(_handler)
        _loggers[c].propagate = True
    for c in wanted:
        _loggers[c].setLevel(logging.INFO)
        _loggers[c].propagate = False
        if _handler not in _loggers[c].handlers:
            _loggers[c].addHandler(_handler)
    _shortcut = wanted


def enabled(channel: str) -> bool:
    """Whether a message on `channel` would be emitted (build costly messages only then)."""
    return _loggers[channel].isEnabledFor(logging.INFO)


def log(channel: str, message: str) -> None:
    logger = _loggers[channel]
    if logger.isEnabledFor(logging.INFO):
        logger.info(message)


if os.environ.get("LLGRAD_LOG"):
    set_channels(os.environ["LLGRAD_LOG"])
