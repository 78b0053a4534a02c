"""`Optimizer`: parameter groups, per-parameter state, zero_grad and state dicts.

The layout of `state_dict()` is PyTorch's: `{"state": {index: {...}}, "param_groups":
[{..., "params": [index, ...]}]}`, parameters numbered in group order, so a state dict can
be saved with `llgrad.save` and loaded into an optimizer over the same parameters.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections import OrderedDict, defaultdict
from typing import Any, Callable, Iterable

from .. import functions as lg
from ..autograd.api import zero_grads
from ..tape.node import RemovableHandle
from ..dispatch.grad_mode import enable_grad, no_grad
from ..eager.elementwise import copy_into
from ..ir import dtypes as dt
from ..tensor import Tensor
from ..tracer.context import current
from ..tracer.tensor import state_not_ready, tracing

_STEP_WRAPPED = "__llgrad_step_hooks__"


def _with_step_hooks(step: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a subclass's `step` so the registered pre/post hooks run around it (no hook:
    one dict check, nothing else)."""

    @functools.wraps(step)
    def wrapper(self: "Optimizer", *args: Any, **kwargs: Any) -> Any:
        pre = self.__dict__.get("_step_pre_hooks")
        post = self.__dict__.get("_step_post_hooks")
        if (not pre and not post) or self.__dict__.get("_in_hooked_step"):
            return step(self, *args, **kwargs)
        for hook in list((pre or {}).values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"optimizer step pre-hook must return None or a tuple "
                        f"of (new_args, new_kwargs), but got {result}."
                    )
                args, kwargs = result
        self.__dict__["_in_hooked_step"] = True
        try:
            out = step(self, *args, **kwargs)
        finally:
            self.__dict__["_in_hooked_step"] = False
        for hook in list((post or {}).values()):
            hook(self, args, kwargs)
        return out

    setattr(wrapper, _STEP_WRAPPED, True)
    return wrapper


class _Required:
    """Marks a hyperparameter that has no default (e.g. a subclass's mandatory `lr`)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class of the optimizers: parameter groups, per-parameter `state`, `zero_grad`,
    `state_dict`/`load_state_dict` in PyTorch's layout, and PyTorch's hooks (step
    pre/post, state-dict and load-state-dict pre/post).

    Subclasses define `_update(p, group)` (one parameter's update, used by `step`) or
    override `step` itself."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, _STEP_WRAPPED, False):
            cls.step = _with_step_hooks(step)

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError(
                f"params argument given to the optimizer should be an iterable of "
                f"Tensors or dicts, but got {type(params).__name__}"
            )
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, "
                "but the ordering of tensors in sets will change between runs. "
                "Please use a list instead."
            )
        else:
            params = list(params)
        if params and all(
            isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in params
        ):
            # named parameters (`model.named_parameters()`): the names go in "param_names"
            param_group = dict(param_group, param_names=[n for n, _ in params])
            params = [t for _, t in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is "
                    f"{type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(
                    f"parameter group didn't specify a value of required "
                    f"optimization parameter {name}"
                )
            group.setdefault(name, default)
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in "
                "future, this will cause an error",
                UserWarning,
                stacklevel=3,
            )
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & set(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    # -- hooks ----------------------------------------------------------------------------
    def _hooks(self, name: str) -> "OrderedDict[int, Callable[..., Any]]":
        table = self.__dict__.get(name)
        if table is None:
            table = self.__dict__[name] = OrderedDict()
        return table

    def _register(
        self, name: str, hook: Callable[..., Any], prepend: bool = False
    ) -> RemovableHandle:
        table = self._hooks(name)
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_step_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call `hook(optimizer, args, kwargs)` before every `step`; it may return new
        `(args, kwargs)`. Returns a handle whose `remove()` unregisters it."""
        return self._register("_step_pre_hooks", hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call `hook(optimizer, args, kwargs)` after every `step`."""
        return self._register("_step_post_hooks", hook)

    def register_state_dict_pre_hook(
        self, hook: Callable[..., Any], prepend: bool = False
    ) -> RemovableHandle:
        """Call `hook(optimizer)` before `state_dict()` builds its dict."""
        return self._register("_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(
        self, hook: Callable[..., Any], prepend: bool = False
    ) -> RemovableHandle:
        """Call `hook(optimizer, state_dict)` after `state_dict()`; a returned dict replaces
        it."""
        return self._register("_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(
        self, hook: Callable[..., Any], prepend: bool = False
    ) -> RemovableHandle:
        """Call `hook(optimizer, state_dict)` before `load_state_dict`; a returned dict is
        loaded instead."""
        return self._register("_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(
        self, hook: Callable[..., Any], prepend: bool = False
    ) -> RemovableHandle:
        """Call `hook(optimizer)` after `load_state_dict`."""
        return self._register("_load_state_dict_post_hooks", hook, prepend)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's `.grad`: to None (default), or zero it in place."""
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Re-evaluate the loss with `closure` if given, then update every parameter that
        has a gradient with the subclass's `_update(p, group)` (in place, without grad).

        Inside a compiled function the groups are read through `_TracedGroup`: the
        values schedulers change (lr, momentum, betas) become graph inputs refreshed
        before every call, every other hyperparameter read is guarded (a change
        retraces), and so is the identity of each state tensor."""
        loss = self._closure_loss(closure)
        ctx = current()
        if ctx is not None:
            for group in self.param_groups:
                for p in group["params"]:
                    ctx.check_not_argument(p)
        with no_grad():
            for i, group in enumerate(self.param_groups):
                view = group if ctx is None else _TracedGroup(self, i, ctx)
                for p in group["params"]:
                    if p._grad is not None:
                        self._update(p, view)
            if ctx is not None:
                self._guard_state(ctx)
        return loss

    def _guard_state(self, ctx: Any) -> None:
        """The traced step captured these state tensors: a new one (load_state_dict)
        must retrace rather than update the old."""
        for k, (p, state) in enumerate(list(self.state.items())):
            for name, value in state.items():
                if isinstance(value, Tensor):
                    ctx.guard(
                        f"{type(self).__name__}.state[{k}][{name!r}]",
                        lambda p=p, name=name: id(self.state[p][name]),
                        id(value),
                    )

    def _update(self, p: Tensor, group: dict[str, Any]) -> None:
        raise TypeError(
            f"{type(self).__name__} has no update rule: an Optimizer subclass "
            f"defines _update(p, group) (or overrides step())"
        )

    def _closure_loss(self, closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # -- state dicts ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """`{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}`,
        parameters numbered in group order (PyTorch's layout). The state's tensors are the
        optimizer's own (not copies), as in PyTorch."""
        for hook in list(self._hooks("_state_dict_pre_hooks").values()):
            hook(self)
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {
            index[id(p)]: s
            for p, s in self.state.items()
            if isinstance(p, Tensor) and id(p) in index
        }
        out = {"state": state, "param_groups": groups}
        for hook in list(self._hooks("_state_dict_post_hooks").values()):
            result = hook(self, out)
            if result is not None:
                out = result
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and state; tensors are copied (the dict is not aliased)
        and floating state takes its parameter's dtype (except `step`), inside lists and
        dicts too, as PyTorch casts it."""
        for hook in list(self._hooks("_load_state_dict_pre_hooks").values()):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        if (
            not isinstance(state_dict, dict)
            or "param_groups" not in state_dict
            or "state" not in state_dict
        ):
            raise ValueError(
                "optimizer state dict must be a dict with 'state' and 'param_groups' entries"
            )
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has a different number of parameter groups "
                f"({len(saved_groups)} vs the optimizer's "
                f"{len(self.param_groups)})"
            )
        for i, (g, s) in enumerate(zip(self.param_groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group that doesn't "
                    f"match the size of optimizer's group (group {i}: "
                    f"{len(s['params'])} vs {len(g['params'])} parameters)"
                )
        by_index = {}
        for g, s in zip(self.param_groups, saved_groups):
            for p, k in zip(g["params"], s["params"]):
                by_index[k] = p
        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in by_index:
                p = by_index[k]
                state[p] = {name: _cast_state(p, name, value) for name, value in v.items()}
            else:
                state[k] = copy.deepcopy(v)
        self.state = state
        new_groups = []
        for g, s in zip(self.param_groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        self.param_groups = new_groups
        setstate = getattr(self, "_fill_group_defaults", None)
        if setstate is not None:
            setstate()
        for hook in list(self._hooks("_load_state_dict_post_hooks").values()):
            hook(self)

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def _fill_group_defaults(self) -> None:
        """Give every group the defaults a state dict saved by an older version (or by
        PyTorch with fewer options) lacks."""
        for group in self.param_groups:
            for name, default in self.defaults.items():
                if default is not required:
                    group.setdefault(name, default)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"


Optimizer.step = _with_step_hooks(Optimizer.step)  # type: ignore[method-assign]


class _TracedGroup:
    """A parameter group as a traced optimizer step reads it (see `Optimizer.step`).

    `group[key]` returns the Python value and guards it (the graph bakes it in: a change
    retraces). Update rules read the values schedulers change every step through
    `hyper(group, key)`, which here returns graph inputs (0-d float64 tensors written from
    the group before every call: no retrace), and test switches with `is_set(group, key)`,
    which guards only whether the value is non-zero."""

    def __init__(self, opt: Optimizer, index: int, ctx: Any):
        self.opt, self.index, self.ctx = opt, index, ctx

    def _live(self, key: str) -> Any:
        return self.opt.param_groups[self.index][key]

    def _name(self, key: str) -> str:
        return f"{type(self.opt).__name__}.param_groups[{self.index}][{key!r}]"

    def __getitem__(self, key: str) -> Any:
        value = self._live(key)
        if key != "params":
            self.ctx.guard(self._name(key), lambda: self._live(key), value)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __contains__(self, key: str) -> bool:
        return key in self.opt.param_groups[self.index]

    def is_set(self, key: str) -> bool:
        value = bool(self._live(key))
        self.ctx.guard(self._name(key) + " != 0", lambda: bool(self._live(key)), value)
        return value

    def hyper(self, key: str) -> Any:
        value = self._live(key)
        if isinstance(value, tuple):
            return tuple(self._input(key, k) for k in range(len(value)))
        return self._input(key, None)

    def _input(self, key: str, k: int | None) -> Any:
        """A 0-d float64 tensor mirroring `group[key]` (or its k-th entry)."""

        def read() -> Any:
            v = self._live(key)
            return v if k is None else v[k]

        value = read()
        if (
            isinstance(value, Tensor)
            or not isinstance(value, (int, float))
            or isinstance(value, bool)
        ):
            return self[key] if k is None else self[key][k]
        name = self._name(key) + ("" if k is None else f"[{k}]")
        holders = self.opt.__dict__.setdefault("_graph_inputs", {})
        t = holders.get((self.index, key, k))
        if t is None:
            t = holders[(self.index, key, k)] = Tensor._empty((), dt.float64)
        copy_into(t, float(value))
        self.ctx.before_call[f"{id(self.opt)}:{name}"] = lambda: copy_into(t, float(read()))
        # the value must stay a number (a tensor or a new tuple length retraces)
        self.ctx.guard(name + " is a number", lambda: isinstance(read(), (int, float)), True)
        return t


def hyper(group: Any, key: str) -> Any:
    """A hyperparameter for arithmetic: the group's number (eager), or a graph input in a
    compiled step, so schedulers can change it between calls without a retrace."""
    return group.hyper(key) if isinstance(group, _TracedGroup) else group[key]


def is_set(group: Any, key: str) -> bool:
    """Whether a hyperparameter is non-zero (a switch such as `momentum != 0`)."""
    return group.is_set(key) if isinstance(group, _TracedGroup) else bool(group[key])


def add_scaled(p: Tensor, g: Tensor, scale: Any) -> None:
    """`p += scale * g` in place, for a number `scale` or a 0-d tensor (a graph input)."""
    if isinstance(scale, Tensor):
        p.add_(lg.mul(g, scale))
    else:
        p.add_(g, alpha=scale)


def plus_scaled(a: Tensor, b: Tensor, scale: Any) -> Tensor:
    """`a + scale * b`, for a number `scale` or a 0-d tensor."""
    if isinstance(scale, Tensor):
        return lg.add(a, lg.mul(b, scale))
    return lg.add(a, b, alpha=scale)


def _cast_state(param: Tensor, name: Any, value: Any) -> Any:
    """PyTorch's rule for loaded state: floating tensors take the parameter's dtype, except
    under the key `step`; lists, tuples and dicts are cast element by element."""
    if isinstance(value, dict):
        return {k: _cast_state(param, k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, name, v) for v in value)
    if not isinstance(value, Tensor):
        return copy.deepcopy(value)
    with no_grad():
        if (
            name != "step"
            and param._dtype.is_floating_point
            and value._dtype.is_floating_point
            and value._dtype is not param._dtype
        ):
            return value.to(param._dtype)
        return value.detach().clone()


def scalar(value: Any) -> Any:
    """A hyperparameter as a Python number in eager code (a 1-element tensor `lr` is read
    with `.item()`, the value PyTorch's arithmetic sees), left a tensor while tracing."""
    if isinstance(value, Tensor):
        if not tracing() and value.numel() == 1:
            return value.item()
    return value


def check_lr(lr: Any) -> None:
    """PyTorch's checks of `lr`: a tensor must have one element; the value must be >= 0."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= float(lr):
        raise ValueError(f"Invalid learning rate: {lr}")


def check_fused(name: str, fused: Any, foreach: Any, differentiable: bool) -> None:
    """PyTorch's rules for `fused=True`: not with `foreach` or `differentiable`."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def lazy_state(opt: Optimizer, p: Tensor) -> dict[str, Any]:
    """`opt.state[p]`; inside a trace an empty state (the first step) makes the call run
    eagerly once (a retryable graph break) so the state is created outside the graph."""
    state = opt.state[p]
    if not state:
        if tracing():
            state_not_ready(f"{type(opt).__name__}'s state does not exist yet")
    return state


def step_count(step_t: Tensor) -> Any:
    """The step counter as PyTorch's single-tensor code reads it: a Python float in eager
    code, a float64 0-d tensor of the graph while tracing."""
    return step_t.to(dt.float64) if tracing() else step_t.item()


def new_step() -> Tensor:
    """A fresh `step` state entry: a float32 0-d tensor holding 0, as PyTorch keeps it."""
    return lg.tensor(0.0, dtype=dt.float32)


def no_complex(opt: Optimizer, p: Tensor) -> None:
    """Refuse complex parameters (llgrad's optimizers update real tensors only)."""
    if p.is_complex():
        raise TypeError(
            f"{type(opt).__name__}: complex parameters are not supported "
            f"(parameter of shape {list(p.shape)}, dtype {p.dtype.name})"
        )


def maximum(a: Any, b: Any) -> Any:
    """`max(a, b)` for numbers, elementwise for tensors (a traced step)."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return max(a, b)

    return lg.maximum(_as_tensor(a), _as_tensor(b))


def minimum(a: Any, b: Any) -> Any:
    """`min(a, b)` for numbers, elementwise for tensors (a traced step)."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return min(a, b)

    return lg.minimum(_as_tensor(a), _as_tensor(b))


def _as_tensor(v: Any) -> Tensor:
    return v if isinstance(v, Tensor) else lg.tensor(float(v), dtype=dt.float64)
