"""Process-wide switches of the tensor functions (`use_deterministic_algorithms`,
`set_float32_matmul_precision`, ...): a module of its own, read by `creation` and set by
`tensor_extras`."""

from __future__ import annotations


class _Switches:
    """The switches' current values (one instance, `_switches`)."""

    deterministic = False
    warn_only = False
    matmul_precision = "highest"
    interop_threads: int | None = None
    warn_always = False


_switches = _Switches()
