"""The functions namespace for the layers below it.

The tape, the dispatch layer and the tracer run ops while they work (the engine sums and
reduces gradients, forward mode reshapes tangents, a rule's `ctx.F`, a composite's
decomposition), yet they sit below `llgrad.functions`, which records into them. Rather
than import it, they read `F` here: `llgrad.functions` hands itself over (`provide`) at the
end of its own import, before any op can run.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

F: Any = None  # `llgrad.functions`, once it has loaded


def provide(namespace: ModuleType) -> None:
    """Make `namespace` (the loaded `llgrad.functions`) the `F` of the lower layers."""
    global F
    F = namespace
