"""In-place ops: `add_`, `mul_`, `copy_`, `x[i] = v`, ... with PyTorch's autograd rules.

- In-place on a leaf that requires grad raises at once (in grad mode).
- Every in-place write bumps the storage's version, so a saved tensor modified later makes
  backward raise (the check lives in `SavedTensor`).
- Without autograd the kernel writes straight into the tensor. With autograd the op runs
  out of place and is recorded, the values are copied in, and the tensor's history is
  rebased onto the new node. When the tensor is a view, its base's history is rebased too
  (`CopySlices`): the gradient of the base is split into the written window, which flows
  to the new values, and the rest, which flows to the base's old history.
"""

from __future__ import annotations

from typing import Any, Callable

from ..tape import forward as forward_ad
from ..dispatch.apply import needs_grad
from ..tape.node import Node, edge, node_class
from ..dispatch.grad_mode import (
    _state as _grad_state,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
)
from ..eager import elementwise as ew, indexing
from ..ir import dtypes as dt
from ..runtime.storage import allocate
from ..schedule.layout import contiguous_strides
from ..tensor import DENSE_CLASSES, Tensor
from ..tracer.context import current, user_location, current as _trace_context
from ..tracer.tensor import GraphBreak
from . import creation as _creation, elementwise as E
from ._errors import DEVICE_CLASSES, names_op
from .creation import _float_max, checked_scalar, iota, rand, randn, zeros
from .elementwise import no_bool_subtraction, where
from .indexing import (
    getitem,
    index_backward,
    index_put_linear,
    masked_fill,
    python_index,
    scatter,
    scatter_add,
)
from .numpy_interop import plain_number
from .reduction import sum_to_size
from .shape import expand, reshape, view_as_complex
from ..runtime import overlap

_overlaps: dict[tuple, bool] = {}


def overlaps_itself(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether two elements of a tensor with these sizes and strides share memory: walking
    the dimensions by increasing stride, each stride must step past everything the
    smaller ones reach (an expanded tensor, stride 0, always overlaps)."""
    key = (shape, strides)
    hit = _overlaps.get(key)
    if hit is None:
        hit = _overlaps_itself(shape, strides)
        if len(_overlaps) < 4096:
            _overlaps[key] = hit
    return hit


def _overlaps_itself(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    reach = 0
    dims = sorted(((abs(st), n) for n, st in zip(shape, strides) if n > 1))
    for stride, size in dims:
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def check_inplace(t: Tensor, same_value: bool = False) -> None:
    """Refuse an in-place write PyTorch refuses. `same_value`: every element gets one value
    (fill_, zero_), which is well defined even when elements share memory."""
    if not same_value and overlaps_itself(t._shape, t._strides):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to "
            "tensor refers to a single memory location. Please clone() the "
            "tensor before performing the operation."
        )
    if is_grad_enabled() and t._requires_grad and t.grad_fn is None:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )
    if t._inference and not is_inference_mode_enabled():
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not "
            "allowed. You can make a clone to get a normal tensor before doing "
            "inplace update."
        )
    base = t._base
    if base is not None and is_grad_enabled() and base._requires_grad and base.grad_fn is None:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place operation."
        )


def check_reinterpreted(t: Tensor, recorded: bool) -> None:
    """A view with another dtype than its base (`x.real`, `view_as_real(x)`) cannot carry
    an in-place write into its base's history: CopySlices addresses the base's elements."""
    base = t._base
    if recorded and base is not None and base._dtype is not t._dtype:
        raise RuntimeError(
            f"in-place write to a {t._dtype.name} view of a {base._dtype.name} "
            f"tensor (x.real, x.imag, view_as_real, view_as_complex) while "
            f"autograd records it is not supported in llgrad; write to a clone "
            f"or build the new values out of place (e.g. lg.complex(re, im))"
        )


def bump(t: Tensor) -> None:
    t._storage.version += 1


def run_inplace(
    t: Tensor,
    functional: Callable[..., Tensor],
    args: tuple[Any, ...],
    direct: Callable[[], Any],
    clone_self: bool,
    same_value: bool = False,
    operands: tuple[Any, ...] | None = None,
    alias_ok: bool = True,
) -> Tensor:
    """`direct()` writes without autograd; `functional(t, *args)` is the recorded form.
    `operands` (default: `args`): every tensor the op reads besides `t`, checked against
    `t` for memory overlap (`runtime.overlap`; `alias_ok` False: an exact alias is refused
    too, as for scatters)."""
    if t.__class__ in DEVICE_CLASSES and _trace_context() is None:
        # device memory: no CPU kernel may write it; the op runs out of place (on the
        # GPU) and a copy kernel writes the result, after every operand was read
        direct = _out_of_place(t, functional, args)
    elif _shares_memory(t, args if operands is None else operands, alias_ok):
        direct = _out_of_place(t, functional, args)
    if (
        not _grad_state.enabled
        and t.__class__ in DENSE_CLASSES
        and not forward_ad._level[0]
        and _trace_context() is None
    ):
        # what the steps below come to for a plain tensor without grad mode, a trace or
        # forward mode (an optimizer's update), decided up front
        check_inplace(t, same_value)
        direct()
        bump(t)
        return t
    if getattr(t, "_ctx", None) is not None and t._requires_grad and t._node.op == "param":
        # an argument of a compiled function that requires grad: eager decides (a leaf
        # raises; a non-leaf records the write in its history, which a call cannot)
        raise GraphBreak(
            "an in-place write to an argument that requires grad",
            user_location(),
            advice="this signature runs eagerly",
        )
    check_inplace(t, same_value)
    if getattr(t, "_ctx", None) is not None:
        return _inplace_traced(t, functional(t, *args))
    ctx = _trace_context()
    if ctx is not None:  # a captured concrete tensor written in a trace
        ctx.write(t, functional(t, *args))
        return t
    dual = _dual(t, args)
    check_reinterpreted(t, needs_grad((t,) + tuple(args)) or _view_of_grad_base(t) or dual)
    if not needs_grad((t,) + tuple(args)) and not _view_of_grad_base(t) and not dual:
        direct()
        bump(t)
        return t
    operand = t.clone() if clone_self else t
    result = functional(operand, *args)
    if result._shape != t._shape:
        raise RuntimeError(
            f"output with shape {list(t._shape)} doesn't match the broadcast "
            f"shape {list(result._shape)}"
        )
    with no_grad():
        ew.copy_into(t, result.detach())
    bump(t)
    rebase(t, result)
    if dual:
        write_tangent(t, result)
    return t


def _shares_memory(t: Tensor, operands: Any, alias_ok: bool) -> bool:
    """`runtime.overlap.check` of `t` against `operands`, after a quick look for an
    operand on `t`'s storage (the common case has none)."""
    st = t._storage
    if st is None:
        return False
    for a in operands:
        if a.__class__ in (tuple, list) or getattr(a, "_storage", None) is st:
            return overlap.check(t, overlap.tensors_in(operands), alias_ok)
    return False


def _out_of_place(
    t: Tensor, functional: Callable[..., Tensor], args: tuple[Any, ...]
) -> Callable[[], None]:
    """A `direct` that computes the new values out of place before writing them: an
    operand shares memory with `t` in a way a kernel writing `t` could read back."""

    def direct() -> None:
        with no_grad():
            result = functional(t, *args)
            if result._shape != t._shape:
                raise RuntimeError(
                    f"output with shape {list(t._shape)} doesn't match the "
                    f"broadcast shape {list(result._shape)}"
                )
            ew.copy_into(t, result)

    return direct


def _dual(t: Tensor, args: tuple[Any, ...]) -> bool:
    """Forward mode is on and a tangent is involved (`t`'s, its base's or an operand's)."""
    if not forward_ad._level[0]:
        return False
    return any(forward_ad.tangent_of(a) is not None for a in (t, t._base) + tuple(args))


def write_tangent(t: Tensor, result: Tensor) -> None:
    """Forward mode: `t` now holds `result`'s values, so it takes `result`'s tangent (zero
    if it has none). A view writes it into its base's tangent (zero if the base had none),
    and takes the window of that, so base and view agree as their values do."""
    new = forward_ad.tangent_of(result)
    with no_grad():
        if new is None:
            new = zeros(t._shape, dtype=t._dtype)
        base = t._base
        if base is None:
            forward_ad.set_tangent(t, new.clone())
            return
        bt = forward_ad.tangent_of(base)
        bt = zeros(base._shape, dtype=base._dtype) if bt is None else bt.contiguous().clone()
        window = _Window(base, t)
        window.write(bt, new)
        forward_ad.set_tangent(base, bt)
        forward_ad.set_tangent(t, window.view_of(bt))


def _inplace_traced(t: Tensor, result: Tensor) -> Tensor:
    """In a trace, an in-place op rebinds the tracer to the op's result (functional IR).

    A tracer that shares its memory with another (a view, its base, an alias) cannot be
    rebound alone: the other would keep the old values. That write breaks the graph (the
    call runs eagerly, with eager's semantics)."""
    t._ctx.check_unshared(t, "an in-place write")
    if result._shape != t._shape:
        raise RuntimeError(
            f"output with shape {list(t._shape)} doesn't match the broadcast "
            f"shape {list(result._shape)}"
        )
    if result._dtype is not t._dtype:
        if not ew.can_cast(result._dtype, t._dtype):
            raise RuntimeError(
                f"result type {result._dtype.name} can't be cast to the desired "
                f"output type {t._dtype.name}"
            )
        result = result.to(t._dtype)
    t._node = result._node
    if result._requires_grad:
        t.grad_fn, t._output_nr, t._requires_grad = result.grad_fn, result._output_nr, True
    return t


def _view_of_grad_base(t: Tensor) -> bool:
    return is_grad_enabled() and t._base is not None and t._base._requires_grad


def rebase(t: Tensor, result: Tensor) -> None:
    """Make `t`'s history end in `result`'s node (and its base's, if `t` is a view)."""
    base = t._base
    if base is not None and is_grad_enabled() and (base._requires_grad or result._requires_grad):
        _rebase_view(base, t, result)
        return
    if not result._requires_grad:
        if t.grad_fn is not None and is_grad_enabled():
            # overwritten by values that do not depend on it (copy_ of a constant, a random
            # fill): its old history gets a zero gradient, as PyTorch's CopyBackwards gives
            t.grad_fn = node_class("CopyBackwards", _Overwritten)(t)
            t._output_nr = 0
        return
    t.grad_fn = result.grad_fn
    t._output_nr = result._output_nr
    t._requires_grad = True


class _Overwritten(Node):
    """Backward of an in-place write whose new values do not depend on the old ones: a
    zero gradient for the old history."""

    __slots__ = ("shape", "dtype")

    def __init__(self, t: Tensor):
        super().__init__((edge(t),))
        self.shape, self.dtype = t._shape, t._dtype

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        return (zeros(self.shape, dtype=self.dtype),)


def _rebase_view(base: Tensor, t: Tensor, result: Tensor) -> None:
    node = node_class("CopySlices", CopySlices)(base, t, result)
    base.grad_fn = node
    base._output_nr = 0
    base._requires_grad = True
    view_node = node_class("AsStridedBackward0", ViewFromBase)(base, t)
    t.grad_fn = view_node
    t._output_nr = 0
    t._requires_grad = True


class _Window:
    """Where a view sits inside its base, as logical (base-shaped) coordinates."""

    __slots__ = ("base_shape", "offset", "shape", "strides", "linear")

    def __init__(self, base: Tensor, view: Tensor):
        self.base_shape = base._shape
        self.shape = view._shape

        if base.is_contiguous():
            self.offset = view._offset - base._offset
            self.strides = view._strides
            self.linear = None
        else:
            # map storage positions to logical indices through an index image of the base
            image_storage = allocate(base._storage.nbytes // base._dtype.itemsize * 8 + 8)
            image = Tensor._make(image_storage, base._offset, base._shape, base._strides, dt.int64)
            ew.copy_into(image, iota(base.numel(), dt.int64).reshape(base._shape))
            self.linear = Tensor._make(
                image_storage, view._offset, view._shape, view._strides, dt.int64
            ).clone()
            self.offset = 0
            self.strides = contiguous_strides(view._shape)

    def view_of(self, g: Tensor) -> Tensor:
        """The window of a contiguous, base-shaped tensor `g`."""
        if self.linear is None:
            return Tensor._make(
                g._storage, g._offset + self.offset, self.shape, self.strides, g._dtype
            )
        return g.reshape(-1)[self.linear]

    def write(self, g: Tensor, values: Tensor) -> None:
        """Copy `values` into the window of a contiguous, base-shaped tensor `g`."""
        if self.linear is None:
            ew.copy_into(self.view_of(g), values)
        else:
            flat = g.reshape(-1)
            flat[self.linear] = values

    def linear_index(self) -> Tensor:
        """The window's positions in the base's row-major order (int64, the view's shape):
        what differentiable (recorded) gathers and scatters of the window use."""
        if self.linear is not None:
            return self.linear

        n = 1
        for size in self.base_shape:
            n *= size
        image = iota(n, dt.int64)
        return Tensor._make(
            image._storage, image._offset + self.offset, self.shape, self.strides, dt.int64
        ).clone()

    def mask(self) -> Tensor:
        """A bool tensor of the base's shape, True inside the window."""
        return written_mask(self.base_shape, (self.linear_index(),), flat=True)

    def zero_window(self, g: Tensor) -> Tensor:
        out = g.contiguous().clone() if g.is_contiguous() else g.contiguous()
        if self.linear is None:
            ew.copy_into(self.view_of(out), 0)
            return out
        flat = out.reshape(-1)
        flat[self.linear] = 0
        return out


class CopySlices(Node):
    """The base's new history after an in-place write through one of its views."""

    __slots__ = ("window",)

    def __init__(self, base: Tensor, view: Tensor, result: Tensor):
        super().__init__((edge(base), edge(result)))
        self.window = _Window(base, view)

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = grads[0]
        if is_grad_enabled() and g._requires_grad:  # create_graph: stay differentiable
            window = getitem(g.reshape(-1), self.window.linear_index())
            return (where(self.window.mask(), 0.0, g), window)
        g = g.contiguous()
        with no_grad():
            window = self.window.view_of(g).clone()
            rest = self.window.zero_window(g)
        return (rest, window)


class ViewFromBase(Node):
    """A view's history after an in-place write: its gradient lands in the base's window."""

    __slots__ = ("window", "dtype")

    def __init__(self, base: Tensor, view: Tensor):
        super().__init__((edge(base),))
        self.window = _Window(base, view)
        self.dtype = view._dtype

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = grads[0]
        if is_grad_enabled() and g._requires_grad:  # create_graph: stay differentiable
            shape = self.window.base_shape
            n = 1
            for size in shape:
                n *= size
            flat = index_backward(g, (n,), (self.window.linear_index(),))
            return (flat.reshape(shape),)
        out = zeros(self.window.base_shape, dtype=g._dtype)
        with no_grad():
            if self.window.linear is None:
                ew.copy_into(self.window.view_of(out), g)
            else:
                out.reshape(-1)[self.window.linear] = g
        return (out,)


# --------------------------------------------------------------------------------------
# The in-place methods
# --------------------------------------------------------------------------------------


def _binary_inplace(op: str, functional: Callable[..., Tensor], clone_self: bool):
    def method(self: Tensor, other: Any, **kwargs: Any) -> Tensor:
        alpha = plain_number(kwargs.pop("alpha", 1))
        if kwargs:
            raise TypeError(f"{op}_() got unexpected keyword arguments {sorted(kwargs)}")
        other = plain_number(other)
        read = (other,)  # what the overlap check sees (before `* alpha`)
        if op == "sub":
            no_bool_subtraction("sub_", self, other)
        if (
            alpha != 1
            and op in ("add", "sub")
            and isinstance(other, Tensor)
            and other._dtype is self._dtype
            and self._dtype in (dt.float32, dt.float64)
            and other._shape == self._shape
            and alpha.__class__ in (int, float)
        ):
            # `p.add_(g, alpha=-lr)`: one pass, no `g * alpha` temporary
            scale = alpha if op == "add" else -alpha
            return run_inplace(
                self,
                lambda t, o: functional(t, o, alpha=alpha),
                (other,),
                lambda: ew.scaled_add_into(self, other, scale),
                clone_self,
            )
        if alpha != 1:
            other = other * alpha
        return run_inplace(
            self,
            functional,
            (other,),
            lambda: ew.run(op, [self, other], None, out=self),
            clone_self,
            operands=read,
        )

    method.__name__ = method.__qualname__ = f"{op}_"
    return method


def make_inplace_methods() -> dict[str, Callable[..., Any]]:
    methods = {
        "add_": _binary_inplace("add", E.add, False),
        "sub_": _binary_inplace("sub", E.sub, False),
        "mul_": _binary_inplace("mul", E.mul, True),
        "div_": _binary_inplace("div", E.div, True),
        "pow_": _binary_inplace("pow", E.pow, True),
    }

    def unary_inplace(name: str, fn: Callable[[Tensor], Tensor]):
        def method(self: Tensor) -> Tensor:
            if name == "abs" and self._dtype.is_complex:  # |z| is real (PyTorch too)
                raise RuntimeError("In-place abs is not supported for complex tensors.")
            if name in ("floor", "ceil", "round", "trunc") and self._dtype.kind in "iu":
                check_inplace(self)
                return self  # integers are whole already
            return run_inplace(self, fn, (), lambda: ew.run(name, [self], None, out=self), True)

        method.__name__ = method.__qualname__ = f"{name}_"
        return method

    for name in (
        "exp",
        "log",
        "sqrt",
        "sin",
        "cos",
        "tanh",
        "sigmoid",
        "relu",
        "neg",
        "abs",
        "floor",
        "ceil",
        "round",
        "trunc",
        "reciprocal",
        "log1p",
        "expm1",
    ):
        methods[f"{name}_"] = unary_inplace(name, getattr(E, name))

    def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
        if min is None and max is None:
            raise RuntimeError("clamp_: at least one of 'min' or 'max' must not be None")
        if not (self._dtype.is_floating_point or self._dtype.is_complex) and any(
            isinstance(v, float) for v in (min, max)
        ):
            raise RuntimeError(
                f"clamp_: result type float can't be cast to the desired "
                f"output type {self._dtype.name}"
            )
        if isinstance(min, Tensor) or isinstance(max, Tensor):  # tensor bounds

            def direct() -> None:
                ew.copy_into(self, E.clamp(self, min, max))

            return run_inplace(self, lambda x, lo, hi: E.clamp(x, lo, hi), (min, max), direct, True)
        return run_inplace(
            self,
            lambda x: E.clamp(x, min, max),
            (),
            lambda: ew.run("clamp", [self], {"min": min, "max": max}, out=self),
            True,
            operands=(min, max),
        )

    def fill_unrecorded(self: Tensor, value: Any) -> bool:
        """Write the checked number `value` into `self` when there is nothing to record
        (`run_inplace`'s unrecorded write, decided up front); False, having written
        nothing, otherwise."""
        if (
            self.__class__ is Tensor
            and not self._requires_grad
            and not forward_ad._level[0]
            and (self._base is None or not self._base._requires_grad)
            and _trace_context() is None
        ):
            check_inplace(self, True)
            _creation.fill_dense(self, value)
            bump(self)
            return True
        return False

    def zero_(self: Tensor) -> Tensor:
        # (0 is stored as zero bytes in every dtype: `fill_`'s conversion check passes)
        if fill_unrecorded(self, 0):
            return self
        return fill_(self, 0)

    def fill_(self: Tensor, value: Any) -> Tensor:
        if isinstance(value, Tensor):
            if value.ndim:
                raise RuntimeError(
                    f"fill_ only supports 0-dimension value tensor but got "
                    f"tensor with {value.ndim} dimensions."
                )
            if value._requires_grad:
                return copy_(self, value.expand(self._shape))
            value = value.to(self._dtype).item()  # a tensor's value converts as a cast
        value = _creation.checked_scalar(plain_number(value), self._dtype, "fill_")
        if fill_unrecorded(self, value):
            return self

        def functional(x: Tensor) -> Tensor:
            # `where` keeps x in the graph with a zero gradient (x * 0 would turn NaN into NaN)
            return E.where(
                _creation.ones_like(x, dtype=dt.bool_), _creation.full((), value, dtype=x._dtype), x
            )

        return run_inplace(
            self, functional, (), lambda: ew.copy_into(self, value), False, same_value=True
        )

    def copy_(self: Tensor, other: Any, non_blocking: bool = False) -> Tensor:
        """Write `other`'s values (broadcast, converted to this dtype) into this tensor."""
        src = other
        if isinstance(src, Tensor):

            def functional(x: Tensor, s: Tensor) -> Tensor:
                y = expand(s, x._shape) if s._shape != x._shape else s
                return y.to(x._dtype) if y._dtype is not x._dtype else y.clone()

            return run_inplace(self, functional, (src,), lambda: ew.copy_into(self, src), False)
        return fill_(self, src)

    methods.update(clamp_=clamp_, clip_=clamp_, zero_=zero_, fill_=fill_, copy_=copy_)
    methods.update(_rewrites())

    return {name: names_op(name)(method) for name, method in methods.items()}


# in-place ops that write where an index says: an operand may not even be an exact alias
# of the written tensor (PyTorch's rule); and ops whose 0-d value operand is a number
NO_ALIAS = frozenset(
    {
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "index_add",
        "index_copy",
        "index_fill",
        "index_put",
        "index_reduce",
        "put",
    }
)
SCALAR_VALUE = frozenset({"masked_fill", "index_fill"})
# in-place ops whose operands PyTorch reads whole before writing (products, composites):
# no overlap is refused; llgrad computes them out of place first anyway
READ_FIRST = frozenset({"addmm", "addmv", "addbmm", "baddbmm", "ldexp", "masked_scatter", "renorm"})


def _rewrite_inplace(name: str, fn: Callable[..., Tensor]) -> Callable[..., Any]:
    """`t.name_(*args)`: `t` overwritten with `fn(t, *args)`, recorded like any in-place
    op (the out-of-place function is the recorded form; plain tensors are written
    directly)."""
    alias_ok = name not in NO_ALIAS
    scalar_value = name in SCALAR_VALUE
    read_first = name in READ_FIRST

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        def functional(x: Tensor, *a: Any) -> Tensor:
            return fn(x, *a, **kwargs)

        def direct() -> None:
            with no_grad():
                ew.copy_into(self, fn(self, *args, **kwargs))

        operands = () if read_first else args + tuple(kwargs.values())
        if scalar_value:  # a 0-d value is read once, as a number (PyTorch too)
            operands = tuple(a for a in operands if getattr(a, "ndim", 1) != 0)
        return run_inplace(
            self, functional, args, direct, True, operands=operands, alias_ok=alias_ok
        )

    method.__name__ = method.__qualname__ = f"{name}_"
    return method


def _random_fill(name: str, draw: Callable[..., Tensor]) -> Callable[..., Any]:
    """`t.uniform_(a, b)` / `t.normal_(mean, std)`: fresh values, written as `copy_` writes
    (so a leaf that requires grad refuses, as in PyTorch)."""
    keywords = {"uniform": ("from", "to"), "normal": ("mean", "std")}[name]

    def method(self: Tensor, *args: Any, generator: Any = None, **kwargs: Any) -> Tensor:
        if not (self._dtype.is_floating_point or self._dtype.is_complex):
            raise TypeError(
                f"{name}_: expected a floating point tensor, got "
                f"{self._dtype.name} (shape {list(self.shape)})"
            )
        if kwargs:  # PyTorch's keywords: uniform_(from=, to=), normal_(mean=, std=)
            unknown = set(kwargs) - set(keywords)
            if unknown or len(args) + len(kwargs) > 2:
                raise TypeError(f"{name}_() got unexpected arguments {sorted(kwargs)}")
            defaults = {"uniform": (0.0, 1.0), "normal": (0.0, 1.0)}[name]
            values = list(args) + list(defaults[len(args) :])
            for i, key in enumerate(keywords):
                if key in kwargs:
                    if i < len(args):
                        raise TypeError(f"{name}_() got multiple values for '{key}'")
                    values[i] = kwargs[key]
            args = tuple(values)
        return self.copy_(draw(self, *args, generator=generator))

    method.__name__ = method.__qualname__ = f"{name}_"
    return method


def _uniform(t: Tensor, low: float = 0.0, high: float = 1.0, *, generator: Any = None) -> Tensor:
    if low > high:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={low} > to={high}"
        )
    if t._dtype.is_complex:  # real and imaginary parts each uniform, as torch
        u = rand(tuple(t.shape) + (2,), dtype=t._dtype.to_real(), generator=generator)
        return view_as_complex(E.add(E.mul(u, high - low), low))
    u = rand(tuple(t.shape), dtype=t._dtype.compute, generator=generator)
    return E.add(E.mul(u, high - low), low)


def _normal(t: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if t._dtype.is_complex:  # each part N(mean, std^2 / 2), as torch
        z = randn(tuple(t.shape) + (2,), dtype=t._dtype.to_real(), generator=generator)
        return view_as_complex(E.add(E.mul(z, std / 2**0.5), mean))
    z = randn(tuple(t.shape), dtype=t._dtype.compute, generator=generator)
    return E.add(E.mul(z, std), mean)


def _rewrites() -> dict[str, Callable[..., Any]]:
    return {
        "masked_fill_": _rewrite_inplace("masked_fill", masked_fill),
        "scatter_": _rewrite_inplace("scatter", scatter),
        "scatter_add_": _rewrite_inplace("scatter_add", scatter_add),
        "uniform_": _random_fill("uniform", _uniform),
        "normal_": _random_fill("normal", _normal),
    }


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """`t[index] = value`, differentiable in `t`'s history and in `value`."""
    check_inplace(t)
    index = python_index(index)
    if not isinstance(value, Tensor):
        value = _setitem_scalar(t, plain_number(value))

    ctx = current()
    if ctx is not None:
        _setitem_traced(ctx, t, index, value)
        return
    basic = _is_basic(index)
    recorded = needs_grad((t, value)) or _view_of_grad_base(t) or _dual(t, (value,))
    check_reinterpreted(t, recorded)
    if not basic:  # an index_put: no operand may even be an exact alias
        read = (value,) + (index if isinstance(index, tuple) else (index,))
        if _shares_memory(t, read, False) and isinstance(value, Tensor):
            value = value.clone()
    if basic:
        view = getitem(t, index) if recorded else indexing.getitem(t, index)
        if view._storage is not t._storage:
            raise AssertionError("basic indexing must produce a view")
        if not recorded:
            if isinstance(value, Tensor) and _shares_memory(view, (value,), True):
                value = value.clone()
            ew.copy_into(view, value)
            bump(t)
            return
        methods = make_inplace_methods()
        methods["copy_"](view, value) if isinstance(value, Tensor) else methods["fill_"](
            view, value
        )
        return
    if not recorded:
        indexing.setitem(t, index, value)
        return
    new = index_put(t, index, value)
    with no_grad():
        ew.copy_into(t, new.detach())
    bump(t)
    rebase(t, new)
    if _dual(t, (value,)):
        write_tangent(t, new)


def _setitem_scalar(t: Tensor, value: Any) -> Any:
    """A number written by `t[index] = value`, checked as PyTorch checks it (`full`'s
    overflow rule; float16/bfloat16 take a too large float as infinity, as PyTorch)."""
    if not isinstance(value, (bool, int, float, complex)):
        return value
    if (
        t._dtype in (dt.float16, dt.bfloat16)
        and isinstance(value, float)
        and abs(value) > _float_max(t._dtype)
        and value == value
    ):
        return value * float("inf")
    return checked_scalar(value, t._dtype, "setitem")


def _setitem_traced(ctx: Any, t: Tensor, index: Any, value: Any) -> None:
    """`t[index] = value` in a trace: an index_put at the positions `t[index]` reads."""
    positions = getitem(reshape(ctx.iota(t.numel()), t._shape), index)
    if not isinstance(value, Tensor):
        value = ctx.constant(value, t._dtype, ())
    v = value.to(t._dtype) if value._dtype is not t._dtype else value
    if v._shape != positions._shape:
        while v.ndim > positions.ndim and v._shape[0] == 1:  # leading 1s, as PyTorch
            v = reshape(v, v._shape[1:])
        v = expand(v, positions._shape)
    new = index_put_linear(t, positions, v)
    if getattr(t, "_ctx", None) is not None:
        _inplace_traced(t, new)
    else:
        ctx.write(t, new)


def _is_basic(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(
        i is None or i is Ellipsis or isinstance(i, (int, slice)) and not isinstance(i, bool)
        for i in items
    )


class IndexPutNode(Node):
    """Backward of `index_put(x, index, v)`: x's gradient with the window zeroed; v's is
    the window, summed over broadcasting (by the engine's rule, applied here)."""

    __slots__ = ("index", "value_shape", "value_dtype")

    def __init__(self, x: Tensor, index: Any, value: Any):
        super().__init__((edge(x), edge(value) if isinstance(value, Tensor) else (None, 0)))
        self.index = index
        self.value_shape = value._shape if isinstance(value, Tensor) else None
        self.value_dtype = value._dtype if isinstance(value, Tensor) else None

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = grads[0]
        gx = where(written_mask(g._shape, self.index), 0.0, g)  # differentiable in g
        gv = None
        if self.value_shape is not None:
            gv = getitem(g, self.index)
            extra = len(self.value_shape) - gv.ndim
            if extra > 0:  # setitem drops a value's leading size-1 dims
                gv = gv.reshape((1,) * extra + gv._shape)
            if gv._shape != self.value_shape:
                gv = sum_to_size(gv, self.value_shape)
            if gv._dtype is not self.value_dtype:
                gv = gv.to(self.value_dtype)
        return (gx, gv)


def index_put(x: Tensor, index: Any, value: Any) -> Tensor:
    """Out-of-place `x[index] = value` for advanced indices, recorded for autograd (and
    for forward mode: the tangent is `index_put` of the tangents)."""
    out = x.detach().clone()
    indexing.setitem(out, index, value.detach() if isinstance(value, Tensor) else value)
    if needs_grad((x, value)):
        out._requires_grad = True
        out.grad_fn = node_class("IndexPutBackward0", IndexPutNode)(x, index, value)
    if forward_ad._level[0]:
        tx, tv = forward_ad.tangent_of(x), forward_ad.tangent_of(value)
        if tx is not None or tv is not None:
            tx = tx if tx is not None else zeros(x._shape, dtype=x._dtype)
            forward_ad.set_tangent(out, index_put(tx, index, tv if tv is not None else 0.0))
    return out


def written_mask(shape: tuple[int, ...], index: Any, flat: bool = False) -> Tensor:
    """A bool tensor of `shape`, True where `x[index] = v` writes (`flat`: `index` addresses
    the row-major elements, `x.reshape(-1)[index]`)."""
    n = 1
    for size in shape:
        n *= size
    mask = zeros((n,) if flat else shape, dtype=dt.bool_)
    indexing.setitem(mask, index, True)
    return mask.reshape(shape) if flat else mask
