"""The LAPACK batch loop: one native call making a routine's calls for every matrix of
a batch (`runtime.lapack`'s batched callers).

The eager LAPACK ops (`llgrad.linalg`) call a routine once per matrix of a batch; from
Python each call is a ctypes call that converts every argument. A `LapackLoop` kernel
makes all of a batch's calls in one foreign call: for i in [0, count) it calls the
routine (address in the argument block) with `nargs` pointer arguments, argument j at
base_j + i * step_j (step 0: the same address every time: a size, a character, a
workspace). Argument block: [count, routine, (base_j, step_j) for each argument].
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .loops import I64, PTR, Callee, for_range, new_kernel


@dataclass(frozen=True)
class LapackLoop:
    """What identifies a compiled LAPACK batch loop (the kernel-cache key): the number of
    pointer arguments of the routine it calls."""

    nargs: int

    @property
    def n_slots(self) -> int:
        """The argument block's length."""
        return 2 + 2 * self.nargs


def build_lapack_loop(spec: LapackLoop, name: str) -> ir.Module:
    """The kernel of `spec`: the batch loop calling the routine in slot 1 (module docstring)."""
    module = ir.Module(name=name)
    _, b, block = new_kernel(module, name)
    count = block.int(0, "count")
    routine = Callee(block.ptr(1, "routine"), ir.FunctionType(ir.VoidType(), [PTR] * spec.nargs))
    bases = [block.int(2 + 2 * j, f"base{j}") for j in range(spec.nargs)]
    steps = [block.int(3 + 2 * j, f"step{j}") for j in range(spec.nargs)]
    with for_range(b, I64(0), count) as i:
        pointers = [
            b.inttoptr(b.add(base, b.mul(i, step)), PTR) for base, step in zip(bases, steps)
        ]
        b.call(routine, pointers)
    b.ret_void()
    return module
