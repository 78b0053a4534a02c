"""One GPU kernel, written once, emitted for the GPU (NVPTX) or for the host grid emulator.

A kernel body is written against `GpuKernel` in *block-uniform* code with *thread phases*:

- code outside `with k.threads():` is uniform: every thread of the block computes the same
  values (sizes, loop bounds over rows a block owns, the results of `block_reduce`);
- code inside `with k.threads():` runs once per thread and may read `k.tid`; values that
  one phase computes and a later phase reads live in `k.private(...)` slots;
- `k.barrier()` separates phases (`__syncthreads`); shared memory (`k.shared`) is written in
  one phase and read in a later one; `k.block_reduce` combines a private value of every
  thread into one uniform value (warp shuffles, then one value per warp through shared
  memory); `with k.single():` runs uniform code that writes memory once per block.

Two lowerings of the same calls:

- **ptx**: a `ptx_kernel` function whose parameters are 64-bit values (pointers and
  integers); `tid`/`ctaid`/`ntid`/`nctaid` read the special registers; a phase is just
  code; `barrier` is `bar.sync 0`; privates are registers; shared buffers are address
  space 3 globals; `block_reduce` uses `shfl.sync.down` and one shared slot per warp.
- **host** (the grid emulator): `void f(int64_t *params, int64_t *dims)` with
  `dims = [gx, gy, gz, bx, by, bz, shared]`; the body runs inside a loop over every block,
  each thread phase becomes a loop over the block's threads, a private is a stack array
  with one element per thread, shared memory is a stack array per block, and
  `block_reduce` folds the threads' values in thread order. Barriers are the phase
  boundaries themselves, so a kernel whose phases race (a missing barrier) computes the
  wrong result in the emulator too: each phase sees only what earlier phases wrote.

Blocks are one-dimensional (`ntid.x` threads, a multiple of 32 up to `MAX_THREADS`); the
grid is one-dimensional too (`nctaid.x` blocks, at most 2^31 - 1).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Sequence

from llvmlite import ir

from ..loops import I64, for_range
from . import libdevice

I1, I8, I32 = ir.IntType(1), ir.IntType(8), ir.IntType(32)
F32, F64 = ir.FloatType(), ir.DoubleType()
MAX_THREADS = 1024
WARP = 32
GLOBAL, SHARED = 1, 3  # NVPTX address spaces
MODES = ("ptx", "host")
# The grid emulator's device addresses are host addresses plus this offset (2^47: past
# the end of x86-64 user space), so host code that reads a device pointer as if it were
# host memory faults at once, as it would with a real GPU, instead of working by accident;
# host-mode kernels and the emulator's copies take the offset off.
EMULATED_DEVICE_OFFSET = 1 << 47

Combine = Callable[[list[ir.Value], list[ir.Value]], list[ir.Value]]


class Private:
    """A per-thread value that lives across thread phases (`GpuKernel.private`)."""

    def __init__(self, kernel: "GpuKernel", typ: ir.Type, name: str):
        self.k = kernel
        self.type = typ
        if kernel.mode == "ptx":
            self._slot = kernel._entry_alloca(typ, 1, name)
        else:
            self._slot = kernel._entry_alloca(typ, MAX_THREADS, name)

    def _address(self, tid: ir.Value | None = None) -> ir.Value:
        if self.k.mode == "ptx":
            return self._slot
        t = self.k.tid if tid is None else tid
        return self.k.b.gep(self._slot, [t], inbounds=True, source_etype=self.type)

    def get(self) -> ir.Value:
        """This thread's value (inside a thread phase)."""
        return self.k.b.load(self._address(), typ=self.type)

    def set(self, value: ir.Value) -> None:
        """Set this thread's value (inside a thread phase)."""
        self.k.b.store(value, self._address())


class GpuKernel:
    """The builder of one kernel; `mode` is "ptx" or "host" (see the module docstring).

    `params`: how many 64-bit parameters the kernel takes (read with `param`/`pointer`).
    """

    def __init__(self, module: ir.Module, name: str, params: int, mode: str):
        if mode not in MODES:
            raise ValueError(f"GpuKernel: mode must be one of {MODES}, got {mode!r}")
        self.module, self.name, self.mode, self.n_params = module, name, mode, params
        self._shared_count = 0
        self._in_threads = False
        self._tid: ir.Value | None = None
        if mode == "ptx":
            if libdevice.enabled():
                module.gpu_math = libdevice.emit  # (read by codegen.mathlib.emit)
            fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * params), name=name)
            fn.calling_convention = "ptx_kernel"
            for i, a in enumerate(fn.args):
                a.name = f"p{i}"
            self.fn = fn
            self._entry = fn.append_basic_block("entry")
            self.b = ir.IRBuilder(self._entry)
            self._params = list(fn.args)
            self._tid = self._sreg("tid.x")
            self._ntid = self._sreg("ntid.x")
            self._ctaid = self._sreg("ctaid.x")
            self._nctaid = self._sreg("nctaid.x")
        else:
            ptr = ir.PointerType()
            fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr]), name=name)
            fn.args[0].name, fn.args[1].name = "params", "dims"
            fn.attributes.add("nounwind")
            self.fn = fn
            self._entry = fn.append_basic_block("entry")
            self.b = ir.IRBuilder(self._entry)
            self._params = [self._load_slot(fn.args[0], i, f"p{i}") for i in range(params)]
            self._nctaid = self._load_slot(fn.args[1], 0, "gx")
            self._ntid = self._load_slot(fn.args[1], 3, "bx")
            # the body runs inside `for ctaid in [0, gx)`; the loop's end is in `finish`
            self._body_start = fn.append_basic_block("blocks")
            self.b.branch(self._body_start)
            self.b.position_at_end(self._body_start)
            self._block_loop = for_range(self.b, I64(0), self._nctaid, name="ctaid")
            self._ctaid = self._block_loop.__enter__()

    # -- parameters and indices ----------------------------------------------------------

    def _load_slot(self, base: ir.Value, k: int, name: str) -> ir.Value:
        at = self.b.gep(base, [I64(k)], inbounds=True, source_etype=I64)
        return self.b.load(at, typ=I64, name=name)

    def _sreg(self, reg: str) -> ir.Value:
        fn = _intrinsic(self.module, f"llvm.nvvm.read.ptx.sreg.{reg}", I32, [])
        return self.b.zext(self.b.call(fn, []), I64, name=reg.replace(".", "_"))

    def param(self, i: int) -> ir.Value:
        """Parameter i as an int64."""
        return self._params[i]

    def pointer(self, i: int) -> ir.Value:
        """Parameter i as a pointer to global memory."""
        if self.mode == "ptx":
            return self.b.inttoptr(self._params[i], ir.PointerType(addrspace=GLOBAL))
        host = self.b.sub(self._params[i], I64(EMULATED_DEVICE_OFFSET))
        return self.b.inttoptr(host, ir.PointerType())

    @property
    def tid(self) -> ir.Value:
        """This thread's index in its block (inside a thread phase)."""
        if self._tid is None:
            raise AssertionError(f"{self.name}: tid read outside a thread phase")
        return self._tid

    @property
    def ntid(self) -> ir.Value:
        """Threads per block."""
        return self._ntid

    @property
    def ctaid(self) -> ir.Value:
        """This block's index in the grid."""
        return self._ctaid

    @property
    def nctaid(self) -> ir.Value:
        """Blocks in the grid."""
        return self._nctaid

    # -- phases ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def threads(self) -> Iterator[ir.Value]:
        """A thread phase: the block runs once per thread; yields `tid`."""
        if self._in_threads:
            raise AssertionError(f"{self.name}: thread phases do not nest")
        self._in_threads = True
        try:
            if self.mode == "ptx":
                yield self.tid
            else:
                with for_range(self.b, I64(0), self._ntid, name="tid") as t:
                    self._tid = t
                    yield t
                self._tid = None
        finally:
            self._in_threads = False

    def barrier(self) -> None:
        """All of the block's threads reach this point before any goes on (`bar.sync 0`).
        In the emulator the phase boundary is the barrier: nothing to emit."""
        if self._in_threads and self.mode == "host":
            raise AssertionError(f"{self.name}: a barrier inside a thread phase")
        if self.mode == "ptx":
            fn = _intrinsic(
                self.module, "llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32]
            )
            self.b.call(fn, [I32(0)])

    @contextlib.contextmanager
    def single(self) -> Iterator[None]:
        """Uniform code that writes memory: thread 0 runs it (once per block)."""
        if self.mode == "host":
            yield
            return
        with self.b.if_then(self.b.icmp_unsigned("==", self.tid, I64(0))):
            yield

    # -- memory ----------------------------------------------------------------------------

    def _entry_alloca(self, typ: ir.Type, count: int, name: str) -> ir.Value:
        with self.b.goto_block(self._entry):
            self.b.position_at_start(self._entry)
            return self.b.alloca(typ, size=count if count > 1 else None, name=name)

    def private(self, typ: ir.Type, name: str = "priv") -> Private:
        """A per-thread slot that keeps a value from one thread phase to the next."""
        return Private(self, typ, name)

    def shared(self, typ: ir.Type, count: int, name: str = "smem") -> ir.Value:
        """A block's shared buffer of `count` elements of `typ` (a pointer to element 0)."""
        self._shared_count += 1
        label = f"{self.name}.{name}{self._shared_count}"
        if self.mode == "ptx":
            g = ir.GlobalVariable(self.module, ir.ArrayType(typ, count), label, addrspace=SHARED)
            g.linkage = "internal"
            g.initializer = ir.Constant(ir.ArrayType(typ, count), ir.Undefined)
            g.align = 16
            first = self.b.gep(
                g, [I64(0), I64(0)], inbounds=True, source_etype=ir.ArrayType(typ, count)
            )
            first.type = ir.PointerType(addrspace=SHARED)  # an opaque pointer
            return first
        return self._entry_alloca(typ, count, label)

    # -- reductions across the block --------------------------------------------------------

    def block_reduce(
        self, values: Sequence[Private], combine: Combine, identity: Sequence[ir.Value]
    ) -> list[ir.Value]:
        """Combine every thread's private `values` into uniform results (outside phases).

        `combine(a, b)` merges two tuples of values (it must be associative; the order in
        which partial results meet differs between the GPU's tree and the emulator's thread
        order, so float sums may differ in their last bits). `identity` is combine's
        neutral tuple (what a missing warp contributes).
        """
        if self._in_threads:
            raise AssertionError(f"{self.name}: block_reduce inside a thread phase")
        if self.mode == "host":
            return self._host_reduce(values, combine, identity)
        return self._ptx_reduce(values, combine, identity)

    def _host_reduce(
        self, values: Sequence[Private], combine: Combine, identity: Sequence[ir.Value]
    ) -> list[ir.Value]:
        acc = [self._entry_alloca(v.type, 1, "acc") for v in values]
        for slot, init in zip(acc, identity):
            self.b.store(init, slot)
        with for_range(self.b, I64(0), self._ntid, name="fold") as t:
            current = [self.b.load(slot, typ=v.type) for slot, v in zip(acc, values)]
            mine = [self.b.load(v._address(t), typ=v.type) for v in values]
            for slot, value in zip(acc, combine(current, mine)):
                self.b.store(value, slot)
        return [self.b.load(slot, typ=v.type) for slot, v in zip(acc, values)]

    def _ptx_reduce(
        self, values: Sequence[Private], combine: Combine, identity: Sequence[ir.Value]
    ) -> list[ir.Value]:
        b = self.b
        lane = b.and_(self.tid, I64(WARP - 1))
        warp = b.lshr(self.tid, I64(5))
        warps = b.lshr(b.add(self._ntid, I64(WARP - 1)), I64(5))
        slots = [self.shared(v.type, WARP, "warp") for v in values]
        vals = [v.get() for v in values]
        vals = self._warp_tree(vals, combine)
        with b.if_then(b.icmp_unsigned("==", lane, I64(0))):
            for s, v in zip(slots, vals):
                b.store(v, b.gep(s, [warp], inbounds=True, source_etype=v.type))
        self.barrier()
        with b.if_then(b.icmp_unsigned("==", warp, I64(0))):
            present = b.icmp_unsigned("<", lane, warps)
            mine = [
                b.select(
                    present,
                    b.load(
                        b.gep(
                            s, [b.select(present, lane, I64(0))], inbounds=True, source_etype=v.type
                        ),
                        typ=v.type,
                    ),
                    init,
                )
                for s, v, init in zip(slots, vals, identity)
            ]
            total = self._warp_tree(mine, combine)
            with b.if_then(b.icmp_unsigned("==", lane, I64(0))):
                for s, v in zip(slots, total):
                    b.store(v, s)
        self.barrier()
        out = [b.load(s, typ=v.type) for s, v in zip(slots, vals)]
        self.barrier()  # every thread has read slot 0 before the slots are reused
        return out

    def _warp_tree(self, vals: list[ir.Value], combine: Combine) -> list[ir.Value]:
        for delta in (16, 8, 4, 2, 1):
            vals = combine(vals, [self._shfl_down(v, delta) for v in vals])
        return vals

    def _shfl_down(self, v: ir.Value, delta: int) -> ir.Value:
        """Lane `lane + delta`'s value (a lane past the warp's end reads its own)."""
        b = self.b
        fn = _intrinsic(self.module, "llvm.nvvm.shfl.sync.down.i32", I32, [I32, I32, I32, I32])
        mask, clamp = I32(0xFFFFFFFF), I32(0x1F)
        t = v.type
        if t == I32:
            return b.call(fn, [mask, v, I32(delta), clamp])
        if t == F32:
            x = b.call(fn, [mask, b.bitcast(v, I32), I32(delta), clamp])
            return b.bitcast(x, F32)
        if t in (I1, I8) or (isinstance(t, ir.IntType) and t.width < 32):
            x = b.call(fn, [mask, b.zext(v, I32), I32(delta), clamp])
            return b.trunc(x, t)
        if t in (I64, F64):
            bits = b.bitcast(v, I64) if t == F64 else v
            lo = b.call(fn, [mask, b.trunc(bits, I32), I32(delta), clamp])
            hi = b.call(fn, [mask, b.trunc(b.lshr(bits, I64(32)), I32), I32(delta), clamp])
            both = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), I64(32)))
            return b.bitcast(both, F64) if t == F64 else both
        raise TypeError(f"{self.name}: no warp shuffle for {t}")

    # -- end ---------------------------------------------------------------------------------

    def finish(self) -> ir.Function:
        """Close the kernel (the emulator's block loop, the return)."""
        if self.mode == "host":
            self._block_loop.__exit__(None, None, None)
        self.b.ret_void()
        return self.fn


def _intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name=name)


def grid_stride(k: GpuKernel, total: ir.Value, body: Callable[[ir.Value], None]) -> None:
    """Inside a thread phase: `for i in range(ctaid*ntid + tid, total, nctaid*ntid)`."""
    b = k.b
    start = b.add(b.mul(k.ctaid, k.ntid), k.tid)
    with for_range(b, start, total, "gs", step=b.mul(k.nctaid, k.ntid)) as i:
        body(i)
