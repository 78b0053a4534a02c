"""The selection and sorting kernels' callers' source (`eager.selection._caller`): one
call of a kernel with its argument template, the per-call values in their slots."""

from __future__ import annotations

from typing import Sequence


def caller_source(slots: Sequence[int], held: bool) -> str:
    """`run(v0, v1, ...)`: the kernel called with the template's arguments and `v<k>` at
    `slots[k]`: a copy of `template` filled and passed to `launch_call(kernel, args)`, as
    `launch.call` takes them. With `held` (a small call), on the thread `THREAD` the values
    are written into the argument `block` made once and the kernel is called at once
    (`fn(ADDRESS)`, without releasing the GIL). The code reads `template`, `launch_call`,
    `kernel`, and with `held` `ident`, `THREAD`, `block`, `fn` and `ADDRESS`."""
    names = [f"v{k}" for k in range(len(slots))]
    fill = "; ".join(f"args[{slot}] = {v}" for slot, v in zip(slots, names)) or "pass"
    lines = [f"def run({', '.join(names)}):"]
    if held:
        put = "; ".join(f"block[{slot}] = {v}" for slot, v in zip(slots, names)) or "pass"
        lines += [
            "    if ident() == THREAD:",
            f"        {put}",
            "        fn(ADDRESS)",
            "        return",
        ]
    lines += ["    args = template.copy()", f"    {fill}", "    launch_call(kernel, args)"]
    return "\n".join(lines) + "\n"
