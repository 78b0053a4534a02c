"""The eager elementwise launches' source (`eager.elementwise`): a one-thread plan's call
(its argument template with the operands' pointers and numbers in place, then the foreign
call) written out, from the plan `elementwise.launch_plan` runs."""

from __future__ import annotations

from typing import Sequence


def launch_source(
    template: Sequence[int],
    ptr_slots: Sequence[int],
    tensor: Sequence[bool],
    formats: Sequence[str | None],
    direct: bool,
    bind_numbers: bool,
    make: Sequence[str],
) -> str | None:
    """The source of `go(out, ops)` (`direct` False: `out` given; returns True, or False
    having done nothing) or of `direct(*operands)` (allocates the output with the lines
    `make`, which bind `out` and `ptr`; returns it, or None having done nothing), for a
    plan whose argument `template` takes the output's, then each operand's, pointer at
    `ptr_slots` (operand i a tensor where `tensor[i]`, else a number packed with the
    struct format `formats[i]`). With `bind_numbers` the numbers are constants `a<i>` and
    `direct` takes the tensors only. None when a number has no inline format. The code
    reads `recording`, `scratch`, `spack`, `struct`, `block`, `pack`, `fn`, `OP` and
    `NO_MEMORY`."""
    names = ["out"] + [f"a{i}" for i in range(len(tensor))]
    params = [n for n, t in zip(names[1:], tensor) if not bind_numbers or t]
    values = [str(v) for v in template]
    scalars = []
    k = 0
    for i, (slot, name) in enumerate(zip(ptr_slots, names)):
        if i == 0 or tensor[i - 1]:
            values[slot] = "ptr" if i == 0 and direct else f"{name}._ptr"
            continue
        fmt = formats[i - 1]
        if fmt is None:
            return None
        scalars.append(f"        spack({fmt!r}, sbuf, {8 * k}, {name})\n")
        values[slot] = f"saddr + {8 * k}"
        k += 1
    fail, done = ("None", "out") if direct else ("False", "True")
    if direct:
        head = f"def direct({', '.join(params)}):\n"
    else:
        head = "def go(out, ops):\n" + (f"    {', '.join(names[1:])}, = ops\n" if tensor else "")
    numbers = ""
    if scalars:
        numbers = (
            f"    sbuf, saddr = scratch()\n"
            f"    try:\n{''.join(scalars)}"
            f"    except (struct.error, TypeError, OverflowError):\n"
            f"        return {fail}\n"
        )
    overflow = (
        "        return None\n"
        if direct
        else "        raise RuntimeError(OP + ': ' + NO_MEMORY) from None\n"
    )
    allocation = "".join(f"    {l}\n" for l in make)
    return (
        f"{head}"
        f"    if recording:\n"
        f"        return {fail}\n"
        f"{numbers}"
        f"{allocation}"
        f"    buf, addr = block()\n"
        f"    try:\n"
        f"        pack(buf, 0, {', '.join(values)})\n"
        f"    except struct.error:\n"
        f"{overflow}"
        f"    fn(addr)\n"
        f"    return {done}\n"
    )
