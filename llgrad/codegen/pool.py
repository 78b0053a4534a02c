"""The native thread pool's code: one small LLVM module, compiled once per process.

A parallel launch used to be cut into pieces in Python and handed to a
`ThreadPoolExecutor` (tens of microseconds per launch, and one foreign call per stage).
The pool's workers and its dispatcher are native code instead, so a compiled graph runs
in ONE foreign call whatever its parallel launches, and a split costs about a microsecond.

    void llgrad_parallel_for(fn, int64_t *args, int64_t lo, int64_t hi, int64_t parts)

runs `fn(args, a, b)` over the `parts` pieces of `[lo, hi)` cut as
`step = ceil((hi - lo) / parts)` (the cut `passes.lower` assumes when it lays out
per-piece partial results), and returns when every piece is done. Every piece runs, an
empty one too (`a >= b`), so a kernel that writes per-piece partials always writes all. Pieces are *claimed*:
the caller and the workers take piece numbers from one 64-bit ticket (generation << 32 |
next piece) by compare-and-swap, so any number of workers (none, after a fork; fewer
than pieces, when `set_num_threads` lowered them) gives the same result, and a worker that
wakes late cannot run a piece of a job that has ended (its generation no longer matches).
A second caller while a job runs (two Python threads calling compiled code) does not
wait: it runs its own pieces inline.

    void llgrad_pool_worker(int64_t id)

is a worker's loop, entered from a Python thread through ctypes (which releases the GIL)
and left when `llgrad_pool_stop` is called. An idle worker spins for about `spin_cycles`
TSC cycles (so back-to-back launches find it awake; after the first few microseconds it
calls `sched_yield` on each turn, so a runnable thread such as one of BLAS's workers gets
the core first), then sleeps: on Linux in a futex on
the pool's epoch word, elsewhere in 100 us naps. Spinning is kept short because a worker
that spins long takes a core from whatever runs next (other libraries, other processes).

    void llgrad_block_piece(int64_t *ctx, int64_t lo, int64_t hi)

adapts eager kernels, whose one argument is a block with `[lo, hi)` in its first two
slots: `ctx = [kernel address, n, block[0..n)]`; each piece copies the block to its
stack, sets its range and calls the kernel.
"""

from __future__ import annotations

from llvmlite import ir

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType(I8)
VOID = ir.VoidType()
PIECE_T = ir.FunctionType(VOID, [PTR, I64, I64])
MAX_BLOCK = 1024  # eager argument blocks (runtime.launch._SLOTS)
YIELD_AFTER = 20_000  # cycles of pure spinning before a spinner yields

# The state lives in one global of 64-byte lines (no false sharing between the
# fields the caller writes and the counters everyone updates).
_FIELDS = (
    "ticket",
    "done",
    "epoch",
    "sleepers",
    "busy",
    "stop",
    "fn",
    "args",
    "lo",
    "step",
    "hi",
    "parts",
)
_LINE = {name: i for i, name in enumerate(_FIELDS)}


def _futex_syscall(triple: str) -> int | None:
    """The futex syscall number for `triple`, or None where workers nap instead."""
    if "linux" not in triple:
        return None
    if triple.startswith(("x86_64", "amd64")):
        return 202
    if triple.startswith(("aarch64", "arm64")):
        return 98
    return None


class _Pool:
    def __init__(self, triple: str, spin_cycles: int):
        self.m = ir.Module(name="llgrad_pool")
        self.triple = triple
        self.spin_cycles = spin_cycles
        lines = ir.ArrayType(ir.ArrayType(I64, 8), len(_FIELDS))
        self.state = ir.GlobalVariable(self.m, lines, "llgrad_pool_state")
        self.state.initializer = ir.Constant(lines, None)
        self.state.align = 64
        self.state.linkage = "internal"
        self.cycles = ir.Function(self.m, ir.FunctionType(I64, []), "llvm.readcyclecounter")
        self.sched_yield = ir.Function(self.m, ir.FunctionType(I32, []), "sched_yield")
        self.futex = _futex_syscall(triple)
        if self.futex is not None:
            self.syscall = ir.Function(self.m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        else:
            self.usleep = ir.Function(self.m, ir.FunctionType(I32, [I32]), "usleep")
        if triple.startswith(("x86_64", "amd64", "i686", "i386")):
            self.pause = ir.Function(self.m, ir.FunctionType(VOID, []), "llvm.x86.sse2.pause")
        elif triple.startswith(("aarch64", "arm64")):
            self.pause = ir.Function(self.m, ir.FunctionType(VOID, [I32]), "llvm.aarch64.hint")
        else:
            self.pause = None

    # -- helpers ------------------------------------------------------------------------
    def field(self, b: ir.IRBuilder, name: str, ty: ir.Type = I64) -> ir.Value:
        p = b.gep(self.state, [I32(0), I32(_LINE[name]), I32(0)], inbounds=True)
        return p if ty is I64 else b.bitcast(p, ir.PointerType(ty))

    def load(self, b: ir.IRBuilder, name: str, ty: ir.Type = I64) -> ir.Value:
        return b.load_atomic(self.field(b, name, ty), "acquire", 8 if ty is I64 else 4)

    def store(self, b: ir.IRBuilder, name: str, value: ir.Value, ty: ir.Type = I64) -> None:
        b.store_atomic(value, self.field(b, name, ty), "release", 8 if ty is I64 else 4)

    def relax(self, b: ir.IRBuilder) -> None:
        if self.pause is None:
            return
        if self.pause.name == "llvm.aarch64.hint":
            b.call(self.pause, [I32(1)])  # YIELD
        else:
            b.call(self.pause, [])

    def wake_all(self, b: ir.IRBuilder) -> None:
        """Bump the epoch; wake sleepers (Linux: FUTEX_WAKE_PRIVATE on the epoch)."""
        b.atomic_rmw("add", self.field(b, "epoch", I32), I32(1), "seq_cst")
        if self.futex is None:
            return
        sleeping = b.icmp_signed(
            ">", b.load_atomic(self.field(b, "sleepers"), "seq_cst", 8), I64(0)
        )
        with b.if_then(sleeping):
            b.call(
                self.syscall,
                [
                    I64(self.futex),
                    b.ptrtoint(self.field(b, "epoch", I32), I64),
                    I32(1 | 128),
                    I32(2**31 - 1),
                ],
            )

    def claim_loop(self, fn: ir.Function, b: ir.IRBuilder, gen: ir.Value) -> ir.IRBuilder:
        """Claim and run pieces of job `gen` until none are left; returns the builder at
        the block after the loop."""
        head = fn.append_basic_block("claim")
        run = fn.append_basic_block("run")
        out = fn.append_basic_block("claimed_all")
        b.branch(head)
        b.position_at_end(head)
        t = self.load(b, "ticket")
        same = b.icmp_unsigned("==", b.lshr(t, I64(32)), gen)
        piece = b.and_(t, I64(0xFFFFFFFF))
        more = b.icmp_signed("<", piece, self.load(b, "parts"))
        try_it = fn.append_basic_block("try")
        b.cbranch(b.and_(same, more), try_it, out)
        b.position_at_end(try_it)
        pair = b.cmpxchg(self.field(b, "ticket"), t, b.add(t, I64(1)), "acq_rel", "acquire")
        b.cbranch(b.extract_value(pair, 1), run, head)
        b.position_at_end(run)
        step = self.load(b, "step")
        hi = self.load(b, "hi")
        a = b.add(self.load(b, "lo"), b.mul(piece, step))
        e = b.add(a, step)
        e = b.select(b.icmp_signed("<", e, hi), e, hi)
        target = b.inttoptr(self.load(b, "fn"), PIECE_T.as_pointer())
        args = b.inttoptr(self.load(b, "args"), PTR)
        b.call(target, [args, a, e])
        b.atomic_rmw("add", self.field(b, "done"), I64(1), "acq_rel")
        b.branch(head)
        b.position_at_end(out)
        return b

    # -- functions ----------------------------------------------------------------------
    def parallel_for(self) -> None:
        fn = ir.Function(
            self.m,
            ir.FunctionType(VOID, [PIECE_T.as_pointer(), PTR, I64, I64, I64]),
            "llgrad_parallel_for",
        )
        target, args, lo, hi, parts = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n = b.sub(hi, lo)
        step = b.sdiv(b.add(n, b.sub(parts, I64(1))), parts)
        serial = fn.append_basic_block("serial")
        try_lock = fn.append_basic_block("lock")
        small = b.or_(b.icmp_signed("<=", parts, I64(1)), b.icmp_signed("<=", n, I64(1)))
        b.cbranch(small, serial, try_lock)

        # contention or a single piece: run the pieces here, in order
        b.position_at_end(serial)
        i = b.alloca(I64)
        b.store(I64(0), i)
        loop = fn.append_basic_block("serial_loop")
        body = fn.append_basic_block("serial_body")
        done = fn.append_basic_block("return")
        b.branch(loop)
        b.position_at_end(loop)
        k = b.load(i)
        b.cbranch(b.icmp_signed("<", k, parts), body, done)
        b.position_at_end(body)
        a = b.add(lo, b.mul(k, step))
        e = b.add(a, step)
        e = b.select(b.icmp_signed("<", e, hi), e, hi)
        b.call(target, [args, a, e])
        b.store(b.add(k, I64(1)), i)
        b.branch(loop)
        b.position_at_end(done)
        b.ret_void()

        b.position_at_end(try_lock)
        got = b.cmpxchg(self.field(b, "busy"), I64(0), I64(1), "acquire", "monotonic")
        owner = fn.append_basic_block("owner")
        b.cbranch(b.extract_value(got, 1), owner, serial)
        b.position_at_end(owner)
        for name, value in (
            ("fn", b.ptrtoint(target, I64)),
            ("args", b.ptrtoint(args, I64)),
            ("lo", lo),
            ("step", step),
            ("hi", hi),
            ("parts", parts),
            ("done", I64(0)),
        ):
            b.store_atomic(value, self.field(b, name), "monotonic", 8)
        gen = b.add(b.lshr(self.load(b, "ticket"), I64(32)), I64(1))
        gen = b.and_(gen, I64(0xFFFFFFFF))
        b.store_atomic(b.shl(gen, I64(32)), self.field(b, "ticket"), "seq_cst", 8)  # publish
        self.wake_all(b)
        b = self.claim_loop(fn, b, gen)
        wait = fn.append_basic_block("wait")
        spin = fn.append_basic_block("wait_spin")
        finish = fn.append_basic_block("finish")
        b.branch(wait)
        b.position_at_end(wait)
        all_done = b.icmp_signed(">=", self.load(b, "done"), parts)
        b.cbranch(all_done, finish, spin)
        b.position_at_end(spin)
        self.relax(b)
        b.branch(wait)
        b.position_at_end(finish)
        self.store(b, "busy", I64(0))
        b.ret_void()

    def worker(self) -> None:
        fn = ir.Function(self.m, ir.FunctionType(VOID, [I64]), "llgrad_pool_worker")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        seen = b.alloca(I32)
        b.store(self.load(b, "epoch", I32), seen)
        wait = fn.append_basic_block("wait")
        b.branch(wait)

        # wait for a new epoch: spin for spin_cycles, then sleep
        b.position_at_end(wait)
        start = b.call(self.cycles, [])
        spin = fn.append_basic_block("spin")
        sleep = fn.append_basic_block("sleep")
        work = fn.append_basic_block("work")
        b.branch(spin)
        b.position_at_end(spin)
        now = self.load(b, "epoch", I32)
        changed = b.icmp_unsigned("!=", now, b.load(seen))
        keep = fn.append_basic_block("keep_spinning")
        b.cbranch(changed, work, keep)
        b.position_at_end(keep)
        self.relax(b)
        elapsed = b.sub(b.call(self.cycles, []), start)
        with b.if_then(b.icmp_unsigned(">", elapsed, I64(YIELD_AFTER))):
            b.call(self.sched_yield, [])  # a runnable thread (BLAS's) goes first
        b.cbranch(b.icmp_unsigned("<", elapsed, I64(self.spin_cycles)), spin, sleep)

        b.position_at_end(sleep)
        if self.futex is not None:
            b.atomic_rmw("add", self.field(b, "sleepers"), I64(1), "seq_cst")
            cur = b.load_atomic(self.field(b, "epoch", I32), "seq_cst", 4)
            with b.if_then(b.icmp_unsigned("==", cur, b.load(seen))):
                b.call(
                    self.syscall,
                    [
                        I64(self.futex),
                        b.ptrtoint(self.field(b, "epoch", I32), I64),
                        I32(0 | 128),
                        b.load(seen),
                        I64(0),
                    ],
                )  # FUTEX_WAIT
            b.atomic_rmw("sub", self.field(b, "sleepers"), I64(1), "seq_cst")
        else:
            b.call(self.usleep, [I32(100)])
        now = self.load(b, "epoch", I32)
        b.cbranch(b.icmp_unsigned("!=", now, b.load(seen)), work, sleep)

        b.position_at_end(work)
        b.store(self.load(b, "epoch", I32), seen)
        stop = fn.append_basic_block("stop")
        jobs = fn.append_basic_block("jobs")
        b.cbranch(b.icmp_unsigned("!=", self.load(b, "stop"), I64(0)), stop, jobs)
        b.position_at_end(stop)
        b.ret_void()
        b.position_at_end(jobs)
        gen = b.lshr(self.load(b, "ticket"), I64(32))
        b = self.claim_loop(fn, b, gen)
        b.branch(wait)

    def stop(self) -> None:
        fn = ir.Function(self.m, ir.FunctionType(VOID, []), "llgrad_pool_stop")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.store(b, "stop", I64(1))
        self.wake_all(b)
        b.ret_void()

    def reset(self) -> None:
        """After a fork: no workers, no job, nobody holding the pool."""
        fn = ir.Function(self.m, ir.FunctionType(VOID, []), "llgrad_pool_reset")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        for name in ("busy", "stop", "sleepers", "done"):
            self.store(b, name, I64(0))
        b.ret_void()

    def block_piece(self) -> None:
        fn = ir.Function(self.m, PIECE_T, "llgrad_block_piece")
        ctx, lo, hi = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        words = b.bitcast(ctx, I64.as_pointer())
        kernel = b.inttoptr(b.load(words), ir.FunctionType(VOID, [PTR]).as_pointer())
        n = b.load(b.gep(words, [I64(1)]))
        first = b.alloca(I64, size=n)  # the block's own copy, on this stack
        src = b.bitcast(b.gep(words, [I64(2)]), PTR)
        memcpy = self.m.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
        b.call(
            memcpy, [b.bitcast(first, PTR), src, b.mul(n, I64(8)), ir.Constant(ir.IntType(1), 0)]
        )
        b.store(lo, first)
        b.store(hi, b.gep(first, [I64(1)]))
        b.call(kernel, [b.bitcast(first, PTR)])
        b.ret_void()


SYMBOLS = [
    "llgrad_parallel_for",
    "llgrad_pool_worker",
    "llgrad_pool_stop",
    "llgrad_pool_reset",
    "llgrad_block_piece",
]


def build(triple: str, spin_cycles: int) -> str:
    """The pool module's text for `triple` (see the module docstring)."""
    p = _Pool(triple, spin_cycles)
    p.parallel_for()
    p.worker()
    p.stop()
    p.reset()
    p.block_piece()
    return str(p.m)
