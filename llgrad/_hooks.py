"""Handles that remove a registered hook (`torch.utils.hooks.RemovableHandle`'s role).

Tensors, nodes, modules and optimizers keep their hooks in dicts keyed by a handle's id;
`handle.remove()` (or leaving a `with handle:` block) takes the hook out again.
"""

from __future__ import annotations

import itertools
from typing import Callable


class RemovableHandle:
    """Removes the hook stored under its `id` from `store` (a dict of hooks)."""

    _ids = itertools.count()

    def __init__(self, store: dict[int, Callable]):
        self.id = next(RemovableHandle._ids)
        self._store = store

    def remove(self) -> None:
        """Take the hook out (again: nothing)."""
        self._store.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        """The handle itself; the hook is removed when the block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Remove the hook."""
        self.remove()
