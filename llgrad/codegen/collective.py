"""Collective kernels: calls into the MPI library (see `schedule/collective.py`)."""

from __future__ import annotations

from llvmlite import ir

from ..schedule.collective import CollectiveKernel
from .loops import I64, PTR, new_kernel

I32 = ir.IntType(32)


def build(spec: CollectiveKernel, name: str) -> ir.Module:
    module = ir.Module(name=name)
    fn, b, args = new_kernel(module, name)
    handle = I32 if spec.handle_bits == 32 else PTR

    def load_handle(k: int, what: str) -> ir.Value:
        v = args.int(k, what)
        return b.trunc(v, I32) if handle is I32 else args.ptr(k, what)

    done = None
    if spec.phase == "start":
        fn_t = ir.FunctionType(I32, [PTR, PTR, I32, handle, handle, handle, PTR])
        count = b.trunc(args.int(2, "count"), I32)
        rc = b.call(
            args.function(3, fn_t, "MPI_Iallreduce"),
            [
                args.ptr(0, "send"),
                args.ptr(1, "recv"),
                count,
                load_handle(4, "datatype"),
                load_handle(5, "op"),
                load_handle(6, "comm"),
                args.ptr(7, "request"),
            ],
            name="rc",
        )
        err = args.ptr(8, "err")
    else:
        fn_t = ir.FunctionType(I32, [PTR, PTR])
        err = args.ptr(3, "err")
        failed = b.load(err, typ=I64, name="failed")  # the start failed: no request
        done = fn.append_basic_block("done")
        call = fn.append_basic_block("call")
        b.cbranch(b.icmp_signed("!=", failed, I64(0)), done, call)
        b.position_at_end(call)
        rc = b.call(
            args.function(0, fn_t, "MPI_Wait"),
            [args.ptr(1, "request"), args.ptr(2, "status")],
            name="rc",
        )
    bad = fn.append_basic_block("bad")
    ok = fn.append_basic_block("ok")
    b.cbranch(b.icmp_signed("!=", rc, I32(0)), bad, ok)
    b.position_at_end(bad)
    b.store(I64(1), err)
    b.store(b.sext(rc, I64), b.gep(err, [I64(1)], inbounds=True, source_etype=I64))
    b.branch(ok)
    b.position_at_end(ok)
    if done is not None:
        b.branch(done)
        b.position_at_end(done)
    b.ret_void()
    return module
