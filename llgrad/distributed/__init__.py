"""`llgrad.distributed`: data-parallel training across processes and machines on MPI.

torch.distributed's names and semantics where they exist: `init_process_group`,
`get_rank`, `get_world_size`, `barrier`, `all_reduce`, `broadcast`, `all_gather`,
`all_gather_into_tensor`, `reduce_scatter`, `reduce_scatter_tensor`, each with
`async_op=True` returning a waitable `Work`. The transport is MPI through mpi4py
(`runtime.mpi`); collectives hand MPI the tensors' own memory, without copies, where the
tensors are contiguous (torch requires that too).

Choices:
- Backends: "mpi"; "gloo" (torch's CPU backend, in scripts being ported) is accepted and
  runs on MPI too. Rank and world size come from MPI (`mpiexec` or
  `python -m llgrad.distributed.run`); `rank`/`world_size` arguments must agree.
- Every wait has a deadline (`timeout`, 30 minutes by default as in torch): a rank that
  died or never reached the collective ends the wait with `DistTimeoutError` naming the
  operation. An uncaught exception on any rank aborts the whole job (MPI_Abort) after
  printing it, so the others do not wait for the deadline.
- float16 and bfloat16 reduce in float32, rounded once; bool reduces logically (sum and
  max are "or", product and min "and"); avg is sum / world size (floating types only).
- Inside `lg.compile`, `all_reduce` becomes the IR op `all_reduce` (the compiled code calls
  MPI itself); `broadcast` becomes an all_reduce of the source rank's values and zeros.
  The other collectives run eagerly (a graph break).
- One group, the world (`group=None` or `group.WORLD`).
- Every eager collective first checks that all ranks called the same collective with the
  same dtype and shape (and root, reduction): one all-gather of a 16-number signature,
  a few microseconds on one host. A mismatch raises `DistError` on every rank, naming each
  rank's call, before any tensor memory is handed to MPI (whose buffers are sized by each
  rank's own tensor: different counts would give each rank different garbage, or let a
  reduction read and write past the smaller ranks' buffers). `LLGRAD_DISTRIBUTED_DEBUG`
  (PyTorch's `TORCH_DISTRIBUTED_DEBUG` levels) chooses: `INFO` or `DETAIL` check; unset or
  `OFF` skip it (the check all-gathers before the collective starts, so it would make an
  `async_op` call wait for the slowest rank and a `wait(timeout=)` could not time out;
  debug runs turn it on). Compiled
  `all_reduce` calls are not checked (their shapes are fixed when the graph is traced, the
  same program on every rank).
"""

from __future__ import annotations

import datetime
import enum
from typing import Any, Sequence

import numpy as np

from ..runtime import mpi as _mpi
from ..runtime.mpi import DistError, DistTimeoutError
from ..tensor import Tensor
from ..dispatch.grad_mode import no_grad
from ..ir import dtypes as dt, registry
from ..tracer.context import current, user_location
from ..tracer.tensor import GraphBreak
from .. import functions as _F
from ..functions._collective import all_reduce as _functional_all_reduce

__all__ = [
    "init_process_group",
    "destroy_process_group",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "get_rank",
    "get_world_size",
    "get_backend",
    "barrier",
    "all_reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "ReduceOp",
    "Work",
    "group",
    "GroupMember",
    "ProcessGroup",
    "DistError",
    "DistTimeoutError",
    "Backend",
]

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name}>"


class Backend(str):
    MPI = "mpi"
    GLOO = "gloo"


class ProcessGroup:
    """The MPI world: its communicator, rank, size and timeout (seconds)."""

    def __init__(self, comm: Any, timeout: float, backend: str):
        self.comm = comm
        self.timeout = timeout
        self.backend = backend
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"<ProcessGroup {self.backend} rank {self._rank} of {self._size}>"


class GroupMember:
    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


class _GroupNamespace:
    @property
    def WORLD(self) -> ProcessGroup | None:
        return GroupMember.WORLD


group = _GroupNamespace()


def is_available() -> bool:
    return True


def is_mpi_available() -> bool:
    return _mpi.available()


def is_initialized() -> bool:
    return GroupMember.WORLD is not None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Join the MPI world (see the module docstring for the backends accepted)."""
    if GroupMember.WORLD is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    name = "mpi" if backend is None else str(backend).lower()
    if name not in ("mpi", "gloo", "cpu:gloo", "cpu:mpi"):
        raise ValueError(
            f"init_process_group: backend {backend!r} is not available in "
            f"llgrad; it runs on CPUs over MPI (backend='mpi'; 'gloo' is "
            f"accepted and also runs on MPI)"
        )
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    comm = _mpi.comm()
    if world_size not in (-1, comm.Get_size()):
        raise ValueError(
            f"init_process_group: world_size={world_size} but MPI started "
            f"{comm.Get_size()} processes"
        )
    if rank not in (-1, comm.Get_rank()):
        raise ValueError(
            f"init_process_group: rank={rank} but MPI says this process is rank {comm.Get_rank()}"
        )
    GroupMember.WORLD = ProcessGroup(comm, seconds, "mpi")

    registry.get("all_reduce").extra["transport"] = _reference_all_reduce
    _mpi.abort_on_uncaught_exception()


def destroy_process_group(group: Any = None) -> None:
    _check_group(group, "destroy_process_group")
    GroupMember.WORLD = None

    registry.get("all_reduce").extra.pop("transport", None)


def _world(what: str) -> ProcessGroup:
    g = GroupMember.WORLD
    if g is None:
        raise RuntimeError(
            f"{what}: Default process group has not been initialized, please "
            f"make sure to call init_process_group."
        )
    return g


def _check_group(g: Any, what: str) -> ProcessGroup:
    world = _world(what)
    if g is not None and g is not world:
        raise ValueError(
            f"{what}: llgrad has one process group, the world (group=None or "
            f"group.WORLD); got {g!r}"
        )
    return world


def get_rank(group: Any = None) -> int:
    return _check_group(group, "get_rank").rank()


def get_world_size(group: Any = None) -> int:
    return _check_group(group, "get_world_size").size()


def get_backend(group: Any = None) -> str:
    return _check_group(group, "get_backend").backend


def _reference_all_reduce(x: np.ndarray, reduce: str) -> np.ndarray:
    """The interpreter's all_reduce (`ops.collective`): MPI on NumPy arrays."""
    g = _world("all_reduce")
    out = np.empty_like(x)
    _mpi.all_reduce_into(g.comm, x, out, dt.from_numpy(x.dtype), reduce, g.timeout)
    return out


# --------------------------------------------------------------------------------------
# Work handles
# --------------------------------------------------------------------------------------


class Work:
    """A collective in flight (`async_op=True`): `wait()` blocks until it completed (with
    the group's timeout, or `timeout`), `is_completed()` polls."""

    def __init__(self, pending: _mpi.Pending | None, group: ProcessGroup, result: Any = None):
        self._pending = pending
        self._group = group
        self._result = result

    def wait(self, timeout: datetime.timedelta | float | None = None) -> bool:
        if self._pending is not None:
            seconds = (
                self._group.timeout
                if timeout is None
                else (
                    timeout.total_seconds()
                    if isinstance(timeout, datetime.timedelta)
                    else float(timeout)
                )
            )
            self._pending.wait(seconds)
        return True

    def is_completed(self) -> bool:
        return self._pending is None or self._pending.test()

    def is_success(self) -> bool:
        return self.is_completed()

    def result(self) -> Any:
        self.wait()
        return self._result

    def __repr__(self) -> str:
        state = "completed" if self.is_completed() else "pending"
        what = self._pending.what if self._pending is not None else "collective"
        return f"<Work {what} {state}>"


def _finish(
    pending: _mpi.Pending | None, g: ProcessGroup, async_op: bool, result: Any = None
) -> Work | None:
    if async_op:
        return Work(pending, g, result)
    if pending is not None:
        pending.wait(g.timeout)
    return None


# --------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------


def _op_name(op: Any, what: str) -> str:
    if isinstance(op, ReduceOp):
        return op.value
    if isinstance(op, str) and op.lower() in {o.value for o in ReduceOp}:
        return op.lower()
    raise ValueError(
        f"{what}: op must be a ReduceOp (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR), got {op!r}"
    )


def _tensor(t: Any, what: str, name: str = "tensor") -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be a Tensor, got {type(t).__name__}")
    return t


def _contiguous(t: Tensor, what: str) -> None:
    if not t.is_contiguous():
        raise ValueError(
            f"{what}: Tensors must be contiguous (got shape {list(t.shape)}, "
            f"strides {list(t.stride())})"
        )


def _traced(*ts: Tensor) -> bool:
    return current() is not None or any(getattr(t, "_ctx", None) is not None for t in ts)


def _check_avg(op: str, t: Tensor, what: str) -> None:
    if op == "avg" and not (t._dtype.is_floating_point or t._dtype.is_complex):
        raise TypeError(
            f"{what}: ReduceOp.AVG takes floating-point or complex tensors, got {t._dtype.name}"
        )


def _bump(t: Tensor) -> None:
    t._storage.version += 1


_CALLS = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor", "barrier")
_REDUCTIONS = ("", "sum", "avg", "product", "min", "max", "band", "bor", "bxor")
_SIG_DIMS = 10  # dims carried in a signature (more: folded into the last)


def _checking() -> bool:
    import os

    return os.environ.get("LLGRAD_DISTRIBUTED_DEBUG", "").strip().upper() in ("INFO", "DETAIL")


def _signature(what: str, t: Tensor | None, reduce: str, root: int) -> np.ndarray:
    sig = np.full(6 + _SIG_DIMS, -1, np.int64)
    sig[0] = _CALLS.index(what)
    sig[1] = _REDUCTIONS.index(reduce)
    sig[2] = root
    if t is not None:
        sig[3] = dt.ALL.index(t._dtype)
        sig[4] = t.ndim
        sig[5] = t.numel()
        dims = list(t._shape)
        if len(dims) > _SIG_DIMS:
            folded = 1
            for s in dims[_SIG_DIMS - 1 :]:
                folded *= s
            dims = dims[: _SIG_DIMS - 1] + [folded]
        sig[6 : 6 + len(dims)] = dims
    return sig


def _describe(sig: np.ndarray) -> str:
    what = _CALLS[sig[0]] if 0 <= sig[0] < len(_CALLS) else "?"
    if sig[4] < 0:
        return what
    shape = [int(s) for s in sig[6 : 6 + min(int(sig[4]), _SIG_DIMS)]]
    dtype = dt.ALL[sig[3]].name if 0 <= sig[3] < len(dt.ALL) else "?"
    extra = f", op {_REDUCTIONS[sig[1]].upper()}" if sig[1] > 0 else ""
    extra += f", src {sig[2]}" if sig[2] >= 0 else ""
    return f"{what} of {dtype}{shape}{extra}"


def _agree(g: ProcessGroup, what: str, t: Tensor | None, reduce: str = "", root: int = -1) -> None:
    """Check that every rank called `what` on a tensor of the same dtype and shape (and
    reduction, root): one all-gather of a signature. A mismatch raises `DistError` on
    every rank (each sees every signature) before any tensor memory reaches MPI."""
    if g.size() == 1 or not _checking():
        return
    mine = _signature(what, t, reduce, root)
    every = np.empty((g.size(), mine.size), np.int64)
    BYTE = _mpi.mpi().BYTE
    req = _mpi.call(what, g.comm.Iallgather, [mine, mine.nbytes, BYTE], [every, mine.nbytes, BYTE])
    _mpi.Pending(req, (mine, every), None, f"{what} (signature check)").wait(g.timeout)
    if (every == every[0]).all():
        return
    calls = "; ".join(f"rank {r}: {_describe(every[r])}" for r in range(g.size()))
    raise DistError(
        f"{what}: the ranks' calls do not match ({calls}); every rank must call "
        f"the same collectives in the same order with tensors of one dtype and "
        f"shape (this check runs with LLGRAD_DISTRIBUTED_DEBUG=INFO or DETAIL)"
    )


# --------------------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------------------


def all_reduce(
    tensor: Tensor, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Work | None:
    """Reduce `tensor` across ranks, in place (every rank gets the result)."""
    what = "all_reduce"
    t = _tensor(tensor, what)
    g = _check_group(group, what)
    name = _op_name(op, what)
    _check_avg(name, t, what)
    reduce = "sum" if name == "avg" else name
    _mpi.check_reduction(reduce, t._dtype, what)
    if _traced(t):
        with no_grad():
            r = _functional_all_reduce(t, reduce)
            if name == "avg":
                r = r / g.size()
            t.copy_(r)
        return _finish(None, g, async_op, [t])
    _contiguous(t, what)
    _agree(g, what, t, name)
    wide = _mpi.WIDENED.get(t._dtype)
    if wide is not None:  # reduce a float32 copy, round back once
        with no_grad():
            w = t.to(wide)
        pending = _post_all_reduce(w, reduce, g)

        def back() -> None:
            with no_grad():
                r = w / g.size() if name == "avg" else w
                t.detach().copy_(r)

        return _finish(_chain(pending, back), g, async_op, [t])
    pending = _post_all_reduce(t, reduce, g)
    if name == "avg":

        def divide() -> None:
            a = t._numpy_view()
            a /= g.size()

        pending = _chain(pending, divide)
    _bump(t)
    return _finish(pending, g, async_op, [t])


def _post_all_reduce(t: Tensor, reduce: str, g: ProcessGroup) -> _mpi.Pending | None:
    if t.numel() == 0:
        return None
    d = t._dtype
    a = t._numpy_view()
    req = _mpi.call(
        "all_reduce",
        g.comm.Iallreduce,
        _mpi.mpi().IN_PLACE,
        _mpi.buffer(a, d),
        _mpi.mpi_op(reduce, d),
    )
    return _mpi.Pending(req, (t,), None, "all_reduce")


def _chain(pending: _mpi.Pending | None, then: Any) -> _mpi.Pending | None:
    if pending is None:
        then()
        return None
    pending.then = then
    return pending


def broadcast(
    tensor: Tensor,
    src: int = 0,
    group: Any = None,
    async_op: bool = False,
    group_src: int | None = None,
) -> Work | None:
    """Rank `src`'s `tensor` into every rank's `tensor` (in place)."""
    what = "broadcast"
    t = _tensor(tensor, what)
    g = _check_group(group, what)
    if group_src is not None:
        src = group_src
    if not isinstance(src, int) or not 0 <= src < g.size():
        raise ValueError(f"{what}: src must be a rank in [0, {g.size()}), got {src!r}")
    if _traced(t):
        with no_grad():
            mine = t if g.rank() == src else _F.zeros_like(t)
            op = "bor" if t._dtype.name == "bool" else "sum"
            t.copy_(_functional_all_reduce(mine, op))
        return _finish(None, g, async_op, [t])
    _contiguous(t, what)
    _agree(g, what, t, "", src)
    pending = None
    if t.numel():
        a = t._numpy_view()
        req = _mpi.call(what, g.comm.Ibcast, [a, a.nbytes, _mpi.mpi().BYTE], src)
        pending = _mpi.Pending(req, (t,), None, what)
    if g.rank() != src:
        _bump(t)
    return _finish(pending, g, async_op, [t])


def _eager_only(what: str, *ts: Tensor) -> None:
    if _traced(*ts):
        raise GraphBreak(
            f"llgrad.distributed.{what} inside a compiled function",
            user_location(),
            advice="only all_reduce and broadcast compile; this call runs eagerly",
        )


def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: Any = None, async_op: bool = False
) -> Work | None:
    """Every rank's `input_tensor`, concatenated along dim 0 (rank order) into
    `output_tensor` (or stacked, when `output_tensor` has one more dimension)."""
    what = "all_gather_into_tensor"
    out, x = (
        _tensor(output_tensor, what, "output_tensor"),
        _tensor(input_tensor, what, "input_tensor"),
    )
    g = _check_group(group, what)
    _eager_only(what, out, x)
    _same_dtype(out, x, what)
    if out.numel() != x.numel() * g.size():
        raise ValueError(
            f"{what}: output_tensor has {out.numel()} elements, expected "
            f"input_tensor's {x.numel()} times the world size {g.size()} "
            f"(shapes {list(out.shape)} and {list(x.shape)})"
        )
    _contiguous(out, what)
    _agree(g, what, x)
    x = x.contiguous()
    pending = None
    if x.numel():
        a, o = x._numpy_view(), out._numpy_view()
        BYTE = _mpi.mpi().BYTE
        req = _mpi.call(what, g.comm.Iallgather, [a, a.nbytes, BYTE], [o, a.nbytes, BYTE])
        pending = _mpi.Pending(req, (x, out), None, what)
    _bump(out)
    return _finish(pending, g, async_op, out)


def all_gather(
    tensor_list: list[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False
) -> Work | None:
    """`tensor_list[r]` = rank r's `tensor` on every rank."""
    what = "all_gather"
    x = _tensor(tensor, what)
    g = _check_group(group, what)
    _list(tensor_list, g, x, what, "tensor_list")
    _eager_only(what, x, *tensor_list)

    flat = _F.empty((g.size(),) + tuple(x.shape), dtype=x.dtype)
    pending = _pending_of(all_gather_into_tensor(flat, x.detach(), async_op=True))

    def scatter_back() -> None:
        with no_grad():
            for r, dst in enumerate(tensor_list):
                dst.copy_(flat[r])

    return _finish(_chain(pending, scatter_back), g, async_op, tensor_list)


def reduce_scatter_tensor(
    output: Tensor, input: Tensor, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Work | None:
    """`input` (world size x output's elements, rank-major) reduced across ranks; rank r
    keeps block r in `output`."""
    what = "reduce_scatter_tensor"
    out, x = _tensor(output, what, "output"), _tensor(input, what, "input")
    g = _check_group(group, what)
    _eager_only(what, out, x)
    _same_dtype(out, x, what)
    name = _op_name(op, what)
    _check_avg(name, out, what)
    reduce = "sum" if name == "avg" else name
    _mpi.check_reduction(reduce, out._dtype, what)
    if x.numel() != out.numel() * g.size():
        raise ValueError(
            f"{what}: input has {x.numel()} elements, expected output's "
            f"{out.numel()} times the world size {g.size()} (shapes "
            f"{list(x.shape)} and {list(out.shape)})"
        )
    _contiguous(out, what)
    _agree(g, what, x, name)
    wide = _mpi.WIDENED.get(out._dtype)

    with no_grad():
        send = x.to(wide) if wide is not None else x.contiguous()
        recv = out if wide is None else out.to(wide)
    pending = None
    if out.numel():
        d = send._dtype
        req = _mpi.call(
            what,
            g.comm.Ireduce_scatter_block,
            [send._numpy_view(), _mpi.mpi_type(d)],
            [recv._numpy_view(), _mpi.mpi_type(d)],
            _mpi.mpi_op(reduce, d),
        )
        pending = _mpi.Pending(req, (send, recv), None, what)

    def finish() -> None:
        with no_grad():
            if name == "avg":
                recv.div_(g.size())
            if recv is not out:
                out.detach().copy_(recv)

    _bump(out)
    return _finish(_chain(pending, finish), g, async_op, out)


def reduce_scatter(
    output: Tensor,
    input_list: list[Tensor],
    op: Any = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
) -> Work | None:
    """Rank r's `output` = the reduction over ranks of their `input_list[r]`."""
    what = "reduce_scatter"
    out = _tensor(output, what, "output")
    g = _check_group(group, what)
    _list(input_list, g, out, what, "input_list")
    _eager_only(what, out, *input_list)

    with no_grad():
        flat = _F.stack([t.detach() for t in input_list])
    return reduce_scatter_tensor(out, flat, op, group, async_op)


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Wait until every rank reached the barrier (with the group's timeout)."""
    g = _check_group(group, "barrier")
    _agree(g, "barrier", None)
    req = _mpi.call("barrier", g.comm.Ibarrier)
    return _finish(_mpi.Pending(req, (), None, "barrier"), g, async_op)


def _pending_of(work: Work | None) -> _mpi.Pending | None:
    return None if work is None else work._pending


def _same_dtype(a: Tensor, b: Tensor, what: str) -> None:
    if a._dtype is not b._dtype:
        raise TypeError(
            f"{what}: the tensors must share one dtype, got {a._dtype.name} and {b._dtype.name}"
        )


def _list(ts: Sequence[Tensor], g: ProcessGroup, like: Tensor, what: str, name: str) -> None:
    if not isinstance(ts, (list, tuple)) or len(ts) != g.size():
        n = len(ts) if isinstance(ts, (list, tuple)) else type(ts).__name__
        raise ValueError(
            f"{what}: {name} must be a list of world size ({g.size()}) tensors, got {n}"
        )
    for k, t in enumerate(ts):
        _tensor(t, what, f"{name}[{k}]")
        if t._dtype is not like._dtype or t._shape != like._shape:
            raise ValueError(
                f"{what}: {name}[{k}] is {t._dtype.name}{list(t.shape)}, "
                f"expected {like._dtype.name}{list(like.shape)}"
            )
