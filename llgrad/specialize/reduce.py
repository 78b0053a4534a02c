"""The eager whole-reduction direct call's source (`eager.reduce.direct_launch`): a plan's
one-stage, one-thread kernel call written out, from the stage `reduce.Plan.execute`
launches."""

from __future__ import annotations

from typing import Sequence


def direct_source(template: Sequence[int], in_slot: int, out_slot: int) -> str:
    """`direct(a0)`: a new output (`make_output()`), the stage's argument `template` packed
    with a0's pointer at `in_slot` and the output's at `out_slot`, the foreign call; None
    having done nothing while kernels are recorded or when a pointer does not pack. The
    code reads `recording`, `make_output`, `block`, `pack`, `struct` and `fn`."""
    values = [str(v) for v in template]
    values[in_slot], values[out_slot] = "a0._ptr", "out._ptr"
    return (
        "def direct(a0):\n"
        "    if recording:\n"
        "        return None\n"
        "    out = make_output()\n"
        "    buf, addr = block()\n"
        "    try:\n"
        f"        pack(buf, 0, {', '.join(values)})\n"
        "    except struct.error:\n"
        "        return None\n"
        "    fn(addr)\n"
        "    return out\n"
    )
