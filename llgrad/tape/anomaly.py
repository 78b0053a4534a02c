"""Anomaly detection: forward tracebacks on nodes and NaN checks in backward."""

from __future__ import annotations

import threading
import warnings


class _State(threading.local):
    enabled = False  # every thread starts here (read on each recorded node)
    check_nan = True


_state = _State()


def is_anomaly_enabled() -> bool:
    return _state.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection raises on NaN gradients."""
    return _state.check_nan


class set_detect_anomaly:
    """Turn anomaly detection on or off; usable as a function call or a context manager."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (is_anomaly_enabled(), is_anomaly_check_nan_enabled())
        _state.enabled = bool(mode)
        _state.check_nan = bool(check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        _state.enabled, _state.check_nan = self.prev


class detect_anomaly:
    """Context manager: record forward tracebacks; a NaN in backward raises."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime "
            "and should only be enabled for debugging.",
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self.prev = (is_anomaly_enabled(), is_anomaly_check_nan_enabled())
        _state.enabled = True
        _state.check_nan = self.check_nan

    def __exit__(self, *exc: object) -> None:
        _state.enabled, _state.check_nan = self.prev


def warn_forward_trace(node) -> None:
    """Show where the failing node was created (PyTorch warns with the same content)."""
    trace = getattr(node, "_trace", None)
    if not trace:
        return
    warnings.warn(
        f"Error detected in {node.name()}. Traceback of forward call that caused the "
        f"error:\n{''.join(trace)}",
        RuntimeWarning,
        stacklevel=3,
    )
