"""Loop-nest helpers for the IR builder, and the kernel argument block.

Every generated kernel has the C signature `void kernel(int64_t *args)`: one foreign call,
one pointer. `ArgBlock` reads slot k of that block as an integer or as a pointer (a typed
load of the same memory, so no inttoptr is needed).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from llvmlite import ir

I1, I64 = ir.IntType(1), ir.IntType(64)
PTR = ir.PointerType()


class ArgBlock:
    def __init__(self, builder: ir.IRBuilder, pointer: ir.Value):
        self.b = builder
        self.pointer = pointer

    def _slot(self, k: int) -> ir.Value:
        return self.b.gep(self.pointer, [I64(k)], inbounds=True, source_etype=I64)

    def int(self, k: int, name: str = "") -> ir.Value:
        return self.b.load(self._slot(k), typ=I64, name=name)

    def ptr(self, k: int, name: str = "") -> ir.Value:
        return self.b.load(self._slot(k), typ=PTR, name=name)

    def function(self, k: int, fn_t: ir.FunctionType, name: str = "") -> ir.Value:
        """Slot k as a pointer to a function of type `fn_t` (callable with `b.call`)."""
        return self.b.load(self._slot(k), typ=fn_t.as_pointer(), name=name)


class Callee:
    """A function pointer loaded at run time, as a call target.

    llvmlite's `call` asks its callee for `function_type`; opaque pointers carry none, and
    a typed pointer would print the pre-opaque syntax LLVM 22 rejects. llvmlite's own
    `InlineAsm` is a callee of the same shape.
    """

    def __init__(self, pointer: ir.Value, function_type: ir.FunctionType):
        self.pointer = pointer
        self.function_type = function_type
        self.type = PTR

    def get_reference(self) -> str:
        return self.pointer.get_reference()


def new_kernel(module: ir.Module, name: str) -> tuple[ir.Function, ir.IRBuilder, ArgBlock]:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=name)
    fn.args[0].name = "args"
    fn.args[0].add_attribute("noalias")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, builder, ArgBlock(builder, fn.args[0])


@contextlib.contextmanager
def for_range(
    b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, name: str = "i", step: ir.Value | None = None
) -> Iterator[ir.Value]:
    """`for (i = lo; i < hi; i += step)` (step 1 by default): yields the induction
    variable; body goes in the block."""
    fn = b.function
    pre = b.block
    header = fn.append_basic_block(f"{name}.header")
    body = fn.append_basic_block(f"{name}.body")
    exit_ = fn.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name=name)
    i.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", i, hi), body, exit_)
    b.position_at_end(body)
    yield i
    nxt = b.add(i, I64(1) if step is None else step, name=f"{name}.next", flags=("nsw",))
    i.add_incoming(nxt, b.block)
    b.branch(header)
    b.position_at_end(exit_)


@contextlib.contextmanager
def accumulate(
    b: ir.IRBuilder,
    lo: ir.Value,
    hi: ir.Value,
    init: list[ir.Value],
    name: str = "r",
    step: ir.Value | None = None,
) -> Iterator[tuple[ir.Value, list[ir.Value], list[ir.Value]]]:
    """A loop carrying values in registers (reduction accumulators), `i += step` (1).

    Yields `(i, current, updated)`: the body reads `current` and fills `updated` in place
    (same length); after the block, `updated` holds the final values (the phis at exit).
    """
    fn = b.function
    pre = b.block
    header = fn.append_basic_block(f"{name}.header")
    body = fn.append_basic_block(f"{name}.body")
    exit_ = fn.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name=name)
    i.add_incoming(lo, pre)
    phis = []
    for k, v in enumerate(init):
        p = b.phi(v.type, name=f"{name}.acc{k}")
        p.add_incoming(v, pre)
        phis.append(p)
    b.cbranch(b.icmp_signed("<", i, hi), body, exit_)
    b.position_at_end(body)
    updated: list[ir.Value] = []
    yield i, list(phis), updated
    assert len(updated) == len(phis), "accumulate: body must fill `updated`"
    end = b.block
    i.add_incoming(b.add(i, I64(1) if step is None else step, flags=("nsw",)), end)
    for p, v in zip(phis, updated):
        p.add_incoming(v, end)
    b.branch(header)
    b.position_at_end(exit_)
    updated[:] = phis
