"""`DistributedDataParallel`: the same model on every rank, gradients averaged.

At wrap time rank 0's parameters and buffers are broadcast to every rank. During
backward, each parameter's post-accumulate-grad hook marks it ready; when every parameter
of a bucket is ready (buckets hold parameters in reverse registration order, the order
backward usually produces their gradients, up to `bucket_cap_mb` each), the bucket's
gradients are flattened into one buffer and its all-reduce is *posted* (nonblocking) while
backward goes on computing the next gradients. At the end of backward (an engine
callback) the buckets are waited for, divided by the world size and copied back into
`.grad`, so the gradients are averaged before `optimizer.step()`.

`no_sync()` skips the reduction (gradients accumulate locally), the next backward outside
it reduces the accumulated sum, as in torch. A parameter that received no gradient in a
synchronized backward raises torch's error, unless `find_unused_parameters=True`, with
which its share of the bucket is zeros and its `.grad` is left as it was.

Inside `lg.compile` the same hooks run on the traced gradients, and each gradient becomes
one `all_reduce` op of the graph (no buckets: compiled code has no per-call overhead to
amortize, and a bucket would cost a copy in and out). The compiled code posts each
MPI_Iallreduce as soon as its gradient exists and waits for it only where the update
reads it (`passes.lower`), so communication overlaps the rest of backward there too.

Buckets hold up to `bucket_cap_mb` (25 MB), the first one 1 MB (torch's sizes): the first
gradients backward produces then start their all-reduce early.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ... import distributed as dist, functions as F
from ...tape import engine
from ...dispatch.grad_mode import no_grad
from ...functions._collective import all_reduce
from ...tensor import Tensor
from ..modules.module import Module

FIRST_BUCKET_BYTES = 1 << 20  # torch's: the first gradients ready start a small bucket


class _Bucket:
    __slots__ = ("params", "ready", "flat", "work", "numels", "traced")

    def __init__(self, params: list[Any]):
        self.params = params
        self.numels = [p.numel() for p in params]
        self.ready: set[int] = set()
        self.reset()

    def reset(self) -> None:
        """Ready for the next synchronized backward."""
        self.ready.clear()
        self.flat: Tensor | None = None
        self.work: Any = None
        self.traced = False


class DistributedDataParallel(Module):
    def __init__(
        self,
        module: Module,
        device_ids: Any = None,
        output_device: Any = None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        process_group: Any = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        **kwargs: Any,
    ):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(
                f"DistributedDataParallel: expected an nn.Module, got {type(module).__name__}"
            )
        if device_ids not in (None, [], ["cpu"]) or output_device not in (None, "cpu"):
            raise ValueError("DistributedDataParallel: llgrad runs on CPUs; pass device_ids=None")
        self._group = dist._check_group(process_group, "DistributedDataParallel")
        self.module = module
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        if self.bucket_bytes_cap <= 0:
            raise ValueError(
                f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}"
            )
        params = [p for p in module.parameters() if p.requires_grad]  # (deduplicated)
        self._params = params
        self._sync_module_states()
        self._buckets = self._make_buckets(params)
        self._bucket_of = {id(p): (b, k) for b in self._buckets for k, p in enumerate(b.params)}
        self._pending = False
        self._hooks = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in params]

    # -- setup ----------------------------------------------------------------------------
    def _sync_module_states(self) -> None:
        """Rank 0's parameters and buffers on every rank."""
        with no_grad():
            for t in list(self.module.parameters()) + list(self.module.buffers()):
                dist.broadcast(t.detach(), 0)

    def _make_buckets(self, params: list[Any]) -> list[_Bucket]:
        buckets: list[_Bucket] = []
        current: list[Any] = []
        size = 0
        for p in reversed(params):
            nbytes = p.numel() * p.element_size()
            cap = (
                min(self.bucket_bytes_cap, FIRST_BUCKET_BYTES)
                if not buckets
                else self.bucket_bytes_cap
            )
            if current and (size + nbytes > cap or p.dtype is not current[0].dtype):
                buckets.append(_Bucket(current))
                current, size = [], 0
            current.append(p)
            size += nbytes
        if current:
            buckets.append(_Bucket(current))
        return buckets

    # -- forward --------------------------------------------------------------------------
    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers and self._group.size() > 1:
            with no_grad():
                for b in self.module.buffers():
                    dist.broadcast(b, 0)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside skip the all-reduce; gradients accumulate locally."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -- backward -------------------------------------------------------------------------
    def _grad_ready(self, p: Any) -> None:
        if not self.require_backward_grad_sync:
            return
        if not self._pending:
            self._pending = True
            engine.queue_callback(self._finish)
        bucket, k = self._bucket_of[id(p)]
        bucket.ready.add(k)
        if getattr(p.grad, "_ctx", None) is not None:
            # traced: one all_reduce op per gradient, averaged where the update reads it;
            # compiled code pays no per-call overhead that buckets would amortize, and
            # each reduction starts as soon as its gradient exists
            with no_grad():
                p.grad = all_reduce(p.grad, "sum") / self._group.size()
            bucket.traced = True
            return
        if len(bucket.ready) == len(bucket.params) and bucket.work is None:
            self._launch(bucket)

    def _launch(self, bucket: _Bucket) -> None:
        with no_grad():
            parts = []
            for p, n in zip(bucket.params, bucket.numels):
                g = p.grad
                parts.append(F.zeros(n, dtype=p.dtype) if g is None else g.reshape(-1))
            flat = F.cat(parts) if len(parts) > 1 else parts[0].clone()
        bucket.flat = flat
        bucket.work = dist.all_reduce(flat, async_op=True)

    def _finish(self) -> None:
        self._pending = False
        missing = [
            b
            for b in self._buckets
            if b.work is None and not (b.traced and len(b.ready) == len(b.params))
        ]
        if missing and not self.find_unused_parameters:
            names = {id(p): n for n, p in self.module.named_parameters()}
            unused = [
                names.get(id(b.params[k]), "?")
                for b in missing
                for k in range(len(b.params))
                if k not in b.ready
            ]
            for b in self._buckets:
                b.reset()
            raise RuntimeError(
                "DistributedDataParallel: expected every parameter to receive a gradient in "
                "backward, but these did not: " + ", ".join(unused) + ". Pass "
                "find_unused_parameters=True if the model does not use all its parameters "
                "in every step (each rank must then still call backward)."
            )
        for b in missing:
            self._launch(b)
        size = self._group.size()
        with no_grad():
            for b in self._buckets:
                if b.work is None:  # reduced per gradient in the trace
                    b.reset()
                    continue
                b.work.wait()
                flat = b.flat
                at = 0
                for k, (p, n) in enumerate(zip(b.params, b.numels)):
                    if k in b.ready:
                        p.grad.copy_(flat[at : at + n].reshape(p.shape) / size)
                    at += n
                b.reset()

    def __repr__(self) -> str:
        return f"DistributedDataParallel(\n  (module): {self.module!r}\n)"
