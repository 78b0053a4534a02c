"""Custom differentiable functions: `autograd.Function`, as PyTorch defines them.

A subclass supplies static `forward` and `backward`; `MyFn.apply(*args)` runs the forward
without recording and gives its outputs ONE node, an instance of `MyFnBackward` (made per
class by the metaclass, as PyTorch names it). That node is also the `ctx` the user's
methods see, so `y.grad_fn.saved_tensors`, `ctx.needs_input_grad`, and arbitrary
attributes set in forward are all the same object's state.

Why the node checks what it checks: the engine trusts a node to return one gradient per
edge with the input's shape and dtype. A user's backward is arbitrary code, so its result
is validated here (count, None for non-tensor inputs, broadcastable shape, dtype) with
PyTorch's messages before it reaches the engine.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

from ..dispatch.grad_mode import is_grad_enabled, no_grad
from ..ir import dtypes as dt
from ..tensor import Tensor
from .node import FREED, Node, SavedTensor, edge
from ..dispatch import ops

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "InplaceFunction", "once_differentiable"]


def _differentiable_dtype(d: dt.DType) -> bool:
    return d.is_floating_point or d.is_complex


class FunctionCtx:
    """What `forward`/`setup_context` may call on `ctx` to prepare the backward."""

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep tensors for backward; they are version-checked when read back."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} "
                    f"is of type {type(t).__name__}"
                )
        self.to_save = tensors

    def mark_dirty(self, *args: Tensor) -> None:
        """Declare inputs that forward modified in place (their history is rebased)."""
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args: Tensor) -> None:
        """Declare outputs that never get gradients (indices, masks, ...)."""
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        """With True (the default) a missing output gradient arrives as zeros, else None."""
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The node (and ctx) of one call of a custom Function.

    `_saved` holds `SavedTensor`s (the same objects OpNodes use), so the checkpoint code
    and memory accounting treat both kinds of node alike.
    """

    _forward_cls: type = None  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__(())
        self.to_save: tuple[Tensor | None, ...] = ()
        self.dirty_tensors: tuple[Tensor, ...] = ()
        self.non_differentiable: tuple[Tensor, ...] = ()
        self.materialize_grads = True
        self.needs_input_grad: tuple[bool, ...] = ()
        self._saved: list[SavedTensor | None] = []
        self._released = False
        self._is_tensor_input: tuple[bool, ...] = ()
        self._input_meta: list[tuple[tuple[int, ...], dt.DType]] = []
        self._output_meta: list[tuple[tuple[int, ...], dt.DType] | None] = []

    # -- node interface -------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        return len(self._output_meta)

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        if self._released:
            raise RuntimeError(FREED)
        return tuple(
            None if s is None else s.unpack(self, self.name(), i) for i, s in enumerate(self._saved)
        )

    def release(self) -> None:
        self._released = True
        self._saved = []

    def _user_fn(self) -> Callable[..., Any]:
        cls = self._forward_cls
        has_backward = cls.backward is not Function.backward
        has_vjp = cls.vjp is not Function.vjp
        if has_backward and has_vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function "
                "is not allowed. You should only implement one of them."
            )
        return cls.vjp if has_vjp else cls.backward

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        grads = list(grads)
        if self.materialize_grads:
            grads = self._materialize(grads)
        result = self._user_fn()(self, *grads)
        return self._check_grads(result)

    def _materialize(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        F = ops.F

        out: list[Tensor | None] = []
        for g, meta in zip(grads, self._output_meta):
            if g is None and meta is not None:
                g = F.zeros(meta[0], dtype=meta[1])
            out.append(g)
        return out

    def _check_grads(self, result: Any) -> tuple[Tensor | None, ...]:
        """One gradient per tensor input, shaped and typed like it (PyTorch's checks)."""
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self._is_tensor_input)
        if len(result) > n and all(r is None for r in result[n:]):
            result = result[:n]
        if len(result) != n:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of "
                f"gradients (expected {n}, got {len(result)})"
            )
        out: list[Tensor | None] = []
        k = 0
        for pos, (g, is_tensor) in enumerate(zip(result, self._is_tensor_input)):
            if not is_tensor:
                if g is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different "
                        f"than None at position {pos + 1}, but the corresponding "
                        f"forward input was not a Variable"
                    )
                continue
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(
                    f"function {self.name()}: expected Variable or None (got "
                    f"{type(g).__name__}) as the gradient at position {pos + 1}"
                )
            if g is not None and self.next_functions[k][0] is not None:
                g = self._fit(k, g)
            else:
                g = None
            out.append(g)
            k += 1
        return tuple(out)

    def _fit(self, k: int, g: Tensor) -> Tensor:
        F = ops.F

        shape, dtype = self._input_meta[k]
        if g._shape != shape:
            if not _expandable(shape, g._shape):
                raise RuntimeError(
                    f"Function {self.name()} returned an invalid gradient at "
                    f"index {k} - got {list(g._shape)} but expected shape "
                    f"compatible with {list(shape)}"
                )
            g = F.sum_to_size(g, shape)
        if g._dtype is not dtype:
            g = g.to(dtype)
        return g


def _expandable(shape: Sequence[int], to: Sequence[int]) -> bool:
    """Whether `shape` broadcasts to `to` (so a gradient of shape `to` sums back to it)."""
    if len(shape) > len(to):
        return False
    for a, b in zip(reversed(shape), reversed(to)):
        if a != b and a != 1:
            return False
    return True


class FunctionMeta(type):
    """Gives every Function subclass its node class, named `<ClassName>Backward`."""

    def __init__(cls, name: str, bases: tuple[type, ...], attrs: dict[str, Any]):
        cls._backward_cls = type(
            name + "Backward",
            (BackwardCFunction,),
            {"_forward_cls": cls, "__module__": cls.__module__},
        )
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Base of custom differentiable operations; use via `MyFn.apply(...)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is "
            "deprecated. Please use new-style autograd function with static "
            "forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        # An abstract method: PyTorch raises NotImplementedError when a subclass omits it.
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for "
            "your custom autograd.Function to use it with backward "
            "mode AD."
        )

    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        setup_style = cls.setup_context is not Function.setup_context
        args, kwargs = _bind(cls, setup_style, args, kwargs)
        node = cls._backward_cls()
        tensor_mask = tuple(isinstance(a, Tensor) for a in args)
        node._is_tensor_input = tensor_mask
        node.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        executable = is_grad_enabled() and any(node.needs_input_grad)
        tensors = [a for a in args if isinstance(a, Tensor)]
        # Edges are taken before forward: a dirty input's gradient must reach its OLD history.
        node.next_functions = tuple(edge(t) for t in tensors)
        node._input_meta = [(t._shape, t._dtype) for t in tensors]
        with no_grad():
            if setup_style:
                raw = cls.forward(*args, **kwargs)
                cls.setup_context(node, args, raw)
            else:
                raw = cls.forward(node, *args, **kwargs)
        return _wrap_outputs(node, args, raw, executable)


def _bind(
    cls: type, setup_style: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Bind keyword arguments to forward's positional parameters (as PyTorch 2.x does)."""
    if not kwargs and not setup_style:
        return args, {}
    try:
        sig = inspect.signature(cls.forward)
    except (TypeError, ValueError):
        return args, kwargs
    try:
        bound = sig.bind(*args, **kwargs) if setup_style else sig.bind(None, *args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{cls.__name__}.apply: {e}") from None
    if setup_style:
        bound.apply_defaults()
        return tuple(bound.args), dict(bound.kwargs)
    return tuple(bound.args[1:]), dict(bound.kwargs)


def _alias(t: Tensor) -> Tensor:
    """A new tensor object over `t`'s memory (a view of it), without history."""
    return Tensor._make(
        t._storage,
        t._offset,
        t._shape,
        t._strides,
        t._dtype,
        base=t._base if t._base is not None else t,
    )


def _wrap_outputs(
    node: BackwardCFunction, args: tuple[Any, ...], raw: Any, executable: bool
) -> Any:
    is_tuple = isinstance(raw, tuple)
    outputs = raw if is_tuple else (raw,)
    input_ids = {id(a) for a in args if isinstance(a, Tensor)}
    dirty = {id(t) for t in (node.dirty_tensors or ())}
    nondiff = {id(t) for t in (node.non_differentiable or ())}
    returned = {id(o) for o in outputs if isinstance(o, Tensor)}
    if dirty - returned:
        raise RuntimeError(
            "Some elements marked as dirty during the forward method were not "
            "returned as output. The inputs that are modified inplace must all "
            "be outputs of the Function."
        )
    results: list[Any] = []
    meta: list[tuple[tuple[int, ...], dt.DType] | None] = []
    for nr, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            results.append(o)
            meta.append(None)
            continue
        differentiable = executable and id(o) not in nondiff and _differentiable_dtype(o._dtype)
        if id(o) in dirty:
            o._storage.version += 1
            if differentiable:
                _rebase_dirty(node, o, nr)
            out = o
        elif id(o) in input_ids or o._requires_grad:
            # An input (or any tensor with history of its own) returned as-is: the output
            # is a new view of it, so the original keeps its history.
            out = _alias(o)
            if differentiable:
                _attach(out, node, nr)
        else:
            out = o
            if differentiable:
                _attach(out, node, nr)
        results.append(out)
        meta.append((o._shape, o._dtype))
    node._output_meta = meta
    if executable:
        _pack_saved(node, results)
    else:
        node._saved = []
    node.to_save = ()
    return tuple(results) if is_tuple else results[0]


def _attach(t: Tensor, node: Node, nr: int) -> None:
    t.grad_fn = node
    t._output_nr = nr
    t._requires_grad = True


def _rebase_dirty(node: BackwardCFunction, t: Tensor, nr: int) -> None:
    """An input modified in place by forward now ends in this node (or its base does)."""
    if t._requires_grad and t.grad_fn is None:
        raise RuntimeError(
            "a leaf Variable that requires grad has been used in an in-place operation."
        )
    base = t._base
    if base is not None and base._requires_grad and base.grad_fn is None:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place operation."
        )
    rebase = ops.F.inplace.rebase

    proxy = Tensor._make(t._storage, t._offset, t._shape, t._strides, t._dtype)
    _attach(proxy, node, nr)
    t._grad = None
    rebase(t, proxy)


class _SavedOutput(SavedTensor):
    """A saved output of a multi-output node: unpacks with its own output number."""

    __slots__ = ("output_nr",)

    def __init__(self, t: Tensor):
        super().__init__(t, is_output=True)
        self.output_nr = t._output_nr

    def unpack(self, node: Node, op_name: str, index: int) -> Tensor:
        out = super().unpack(node, op_name, index)
        if out.grad_fn is node:
            out._output_nr = self.output_nr
        return out


def _pack_saved(node: BackwardCFunction, outputs: list[Any]) -> None:
    """Turn `ctx.to_save` into SavedTensors; outputs are saved without a cycle to the node."""
    saved: list[SavedTensor | None] = []
    for t in node.to_save or ():
        if t is None:
            saved.append(None)
        elif t.grad_fn is node:
            saved.append(_SavedOutput(t))
        else:
            saved.append(SavedTensor(t))
    node._saved = saved


# ------------------------------------------------------------------------------------------
# once_differentiable
# ------------------------------------------------------------------------------------------


class Error(Node):
    """Stands where a once-differentiable backward's result would need differentiating
    (PyTorch's DelayedError node, whose class is named `Error`)."""

    def __init__(self, msg: str, num_outputs: int):
        super().__init__(())
        self.msg = msg
        self._n = num_outputs

    @property
    def num_outputs(self) -> int:
        return self._n

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        raise RuntimeError(self.msg)


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a backward without recording; differentiating its result raises (PyTorch's rule)."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            outputs = fn(ctx, *args)
        if not is_grad_enabled():
            return outputs
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return outputs
        is_tuple = isinstance(outputs, tuple)
        outs = outputs if is_tuple else (outputs,)
        err = Error(
            "trying to differentiate twice a function that was marked with @once_differentiable",
            len(outs),
        )
        wrapped = []
        for nr, o in enumerate(outs):
            if isinstance(o, Tensor) and _differentiable_dtype(o._dtype):
                o = Tensor._make(o._storage, o._offset, o._shape, o._strides, o._dtype)
                _attach(o, err, nr)
            wrapped.append(o)
        return tuple(wrapped) if is_tuple else wrapped[0]

    return wrapper


class InplaceFunction(Function):
    """A Function that may run in place (`inplace=True`), as PyTorch's helper base."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace
