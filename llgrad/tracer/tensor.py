"""`TracerTensor`: a tensor that stands for an IR value while a function is traced.

It has a shape and a dtype but no storage. Every llgrad function reaches
`llgrad.dispatch.apply.apply`, which hands ops on tracers to the trace context, so user code
runs unchanged and builds IR. Asking a tracer for data (`bool()`, `item()`, `numpy()`, ...)
cannot be answered while tracing: it raises `GraphBreak`, which names the user's line.
"""

from __future__ import annotations

from typing import Any

from ..schedule.layout import contiguous_strides
from ..ir.graph import Node
from ..tensor import SymbolicTensor
from .state import current, user_location


class GraphBreak(Exception):
    """Data-dependent Python on a traced value: the function cannot be one graph."""

    def __init__(
        self, what: str, loc: str | None, *, retry: bool = False, advice: str | None = None
    ):
        self.what = what
        self.loc = loc
        self.retry = retry  # transient: the next call of this signature traces again
        where = f" at {loc}" if loc else ""
        if advice is not None:
            Exception.__init__(self, f"{what}{where}: {advice}")
            return
        super().__init__(
            f"{what} on a traced tensor{where} depends on tensor values, which "
            f"are unknown while tracing. Compute it outside the compiled "
            f"function, make it a tensor operation (e.g. lg.where instead of "
            f"`if`), or pass the value as a Python argument."
        )


def tracing() -> bool:
    """Whether a trace is running on this thread (code that must not leak state checks it)."""
    return current() is not None


def state_not_ready(what: str) -> None:
    """Raise the retryable break for lazily created state (the first optimizer step)."""
    raise GraphBreak(
        what,
        user_location(),
        retry=True,
        advice="this call runs eagerly to create it, the next call compiles",
    )


class TracerTensor(SymbolicTensor):
    __slots__ = ("_node", "_ctx", "_group")

    @classmethod
    def of(cls, node: Node, ctx: Any) -> "TracerTensor":
        t = object.__new__(cls)
        t._storage = None
        t._offset = 0
        t._shape = node.type.shape
        t._strides = contiguous_strides(node.type.shape)
        t._dtype = node.type.dtype
        t._ptr = None  # packing it into a kernel's argument block fails: never launched
        t._lkey = None
        t._init_state()
        t._node = node
        t._ctx = ctx
        t._group = None  # tensors sharing its memory (TraceContext.share)
        return t

    def _alias(self) -> "TracerTensor":
        alias = TracerTensor.of(self._node, self._ctx)
        self._ctx.share(self, alias)
        return alias

    def detach(self) -> "TracerTensor":
        """Without history, as eager's; in a user trace a value that requires grad goes
        through a `stop_gradient` node, so the compiled gradient stops there too."""
        if self._requires_grad and self._ctx.cuts_gradients:
            return self._ctx.stop_gradient(self)
        return self._alias()

    def detach_(self) -> "TracerTensor":
        if self._requires_grad and self._ctx.cuts_gradients:
            self._cut_in_place("detach_()")
        return super().detach_()

    def requires_grad_(self, requires_grad: bool = True) -> "TracerTensor":
        if (
            not requires_grad
            and self._requires_grad
            and self._ctx.cuts_gradients
            and self.grad_fn is None
        ):
            self._cut_in_place("requires_grad_(False)")
        return super().requires_grad_(requires_grad)

    def _cut_in_place(self, what: str) -> None:
        raise GraphBreak(
            what,
            user_location(),
            advice="turning off gradients of a traced value in place is not "
            "traced (use x = x.detach()); this signature runs eagerly",
        )

    def _no_data(self, what: str) -> Any:
        raise GraphBreak(what, user_location())

    def __repr__(self) -> str:
        return f"TracerTensor({self._node.type}, %{self._ctx.name_of(self._node)})"

    __str__ = __repr__
