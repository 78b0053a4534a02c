"""`llgrad.random`: the default generator's seeding and state, as `torch.random`.

`manual_seed`, `seed`, `initial_seed`, `get_rng_state`, `set_rng_state`, `fork_rng` and
`default_generator` (also at the top level: `lg.manual_seed`, ...). llgrad's generator is
counter-based, so its streams differ from PyTorch's (see `lg.Generator`).
"""

from __future__ import annotations

from .functions.creation import Generator, default_generator, initial_seed, manual_seed, seed
from .functions.sampling import fork_rng, get_rng_state, set_rng_state

__all__ = [
    "Generator",
    "default_generator",
    "fork_rng",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "seed",
    "set_rng_state",
]
