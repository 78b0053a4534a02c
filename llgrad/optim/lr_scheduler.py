"""Learning-rate schedulers with PyTorch's formulas and bookkeeping.

A scheduler writes `group["lr"]` of its optimizer's parameter groups: once when it is
made (step 0) and at every `step()`. The formulas are PyTorch's *recursive* ones (each
step rescales the current rate), evaluated in the same order, so the rates agree with
PyTorch's to the last bit, and two schedulers can be chained on one optimizer.
`step(epoch)` (deprecated in PyTorch, still accepted) uses the closed forms.

Compiled training steps read `lr` (and `momentum`, `betas`) as graph inputs, so a
scheduler's new values are used by the next compiled call without recompiling.
"""

from __future__ import annotations

import functools
import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "SequentialLR",
    "CosineAnnealingLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
    "CyclicLR",
    "CosineAnnealingWarmRestarts",
    "OneCycleLR",
    "PolynomialLR",
]

_EPOCH_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available."
)


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _values(optimizer: Optimizer, key: str) -> list[Any]:
    return [
        g[key].clone() if isinstance(g[key], Tensor) else g[key] for g in optimizer.param_groups
    ]


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(value)} values, param_groups has "
                f"{len(optimizer.param_groups)}."
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


def _set(group: dict[str, Any], key: str, value: Any) -> None:
    """Write a group's value: a tensor `lr` is filled in place (PyTorch's rule)."""
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


_STEP_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
    "In PyTorch 1.1.0 and later, you should call them in the opposite "
    "order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do "
    "this will result in PyTorch skipping the first value of the learning "
    "rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate"
)


def _track_optimizer_step(optimizer: Optimizer) -> None:
    """Make `optimizer.step` record that it ran (`_opt_called`), so the first scheduler
    step can warn when it comes before the first optimizer step, as PyTorch does."""
    step = optimizer.step
    if getattr(step, "_wrapped_by_lr_sched", False):
        return
    func = step.__func__
    opt_ref = weakref.ref(optimizer)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opt = opt_ref()
        opt._opt_called = True  # type: ignore[union-attr]
        return func.__get__(opt, type(opt))(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    optimizer.step = wrapper  # type: ignore[method-assign]


class LRScheduler:
    """Base class: `step()`, `get_last_lr()`, `state_dict()`, `load_state_dict()`.

    Subclasses define `get_lr()` (the rates for `self.last_epoch`, usually from the
    current ones) and may define `_get_closed_form_lr()` (the rates from `base_lrs`, used
    by the deprecated `step(epoch)`)."""

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] "
                        f"when resuming scheduler with last_epoch >= 0."
                    )
        self.base_lrs: list[Any] = _values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_step(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        """The step a new scheduler makes (epoch 0): sets the starting rates."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[Any]:
        """The rates for `self.last_epoch` (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define get_lr()")

    def get_last_lr(self) -> list[Any]:
        """The rates the last `step()` set, one per parameter group."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or, deprecated, jump to `epoch` with the closed form) and
        write the new rates into the optimizer's groups."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            if getattr(self.optimizer.step, "_wrapped_by_lr_sched", False):
                warnings.warn(_STEP_ORDER_WARNING, UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _set(group, "lr", lr)
        self._last_lr = _values(self.optimizer, "lr")

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (save the optimizer's own state dict too)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what `state_dict()` returned."""
        self.__dict__.update(state_dict)

    def _current(self) -> list[Any]:
        return _values(self.optimizer, "lr")


class LambdaLR(LRScheduler):
    """`lr = base_lr * lr_lambda(epoch)` (one function, or one per group)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(
                    f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}"
                )
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The rates for `self.last_epoch`."""
        _warn_get_lr(self)
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """Lambdas and plain functions cannot be saved: their slots hold None (callable
        objects keep their attributes), as in PyTorch."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        out["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
            for fn in self.lr_lambdas
        ]
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                fn.__dict__.update(attrs)


class StepLR(LRScheduler):
    """Multiply the rate by `gamma` every `step_size` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The rates for `self.last_epoch`."""
        _warn_get_lr(self)
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[Any]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by `gamma` at each epoch listed in `milestones`."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The rates for `self.last_epoch`."""
        _warn_get_lr(self)
        if self.last_epoch not in self.milestones:
            return self._current()
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[Any]:
        marks = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(marks, self.last_epoch) for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the rate by `gamma` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The rates for `self.last_epoch`."""
        _warn_get_lr(self)
        if self._is_initial:
            return self._current()
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[Any]:
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """`eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`, applied
    recursively (so it composes with other changes to the rate), continuing as a cosine
    wave after `T_max`."""

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The rates for `self.last_epoch`."""
        _warn_get_lr(self)
        groups = self.optimizer.param_groups
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / t)) / 2 for b in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [
                g["lr"] + (b - lo) * (1 - math.cos(math.pi / t)) / 2
                for b, g in zip(self.base_lrs, groups)
            ]
        return [
            (1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t)) * (g["lr"] - lo)
            + lo
            for g in groups
        ]

    def _get_closed_form_lr(self) -> list[Any]:
        lo = self.eta_min
        return [
            lo + (b - lo) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
            for b in self.base_lrs
        ]


_PHASE_KEYS = ("end_step", "start_lr", "end_lr", "start_momentum", "end_momentum")


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the rate climbs from `max_lr / div_factor` to `max_lr` over the
    first `pct_start` of `total_steps`, then anneals to `initial_lr / final_div_factor`
    (three phases with `three_phase`); momentum (or Adam's beta1) cycles inversely between
    `max_momentum` and `base_momentum`. Step it after every batch."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.85,
        max_momentum: float | Sequence[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._anneal_func_type = anneal_strategy
        n = self.total_steps
        rise = float(pct_start * n) - 1
        if three_phase:
            # (last step of the phase, start and end of lr, start and end of momentum)
            phases = [
                (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (
                    float(2 * pct_start * n) - 2,
                    "max_lr",
                    "initial_lr",
                    "base_momentum",
                    "max_momentum",
                ),
                (n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            phases = [
                (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        # PyTorch's state-dict layout: a list of dicts named as its phases are
        self._schedule_phases = [dict(zip(_PHASE_KEYS, phase)) for phase in phases]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            highs = _per_group("max_momentum", optimizer, max_momentum)
            lows = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for high, low, group in zip(highs, lows, optimizer.param_groups):
                    self._set_momentum(group, high)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[Any]:
        """The rates for `self.last_epoch`."""
        _warn_get_lr(self)
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"Tried to step {step} times. The specified number of total steps "
                f"is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end, lr0, lr1, m0, m1 = (phase[k] for k in _PHASE_KEYS)
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by `factor` when `step(metric)` has not improved for more than
    `patience` epochs (then wait `cooldown` epochs); never below `min_lr`."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        _check_optimizer(optimizer)
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}"
                )
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.last_epoch = 0
        self._last_lr = _values(optimizer, "lr")
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            if self.threshold_mode == "rel":
                return a < best * (1.0 - self.threshold)
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def step(self, metrics: Any, epoch: int | None = None) -> None:  # type: ignore[override]
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _values(self.optimizer, "lr")

    def _reduce(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` "
                    f"({len(groups)}) differs from when `ReduceLROnPlateau` "
                    f"was initialized ({len(self.min_lrs)}); set `min_lrs` to "
                    f"match"
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                if isinstance(group["lr"], Tensor):
                    group["lr"].fill_(new)
                else:
                    group["lr"] = new


def _lambdas(optimizer: Optimizer, lr_lambda: Any) -> list[Callable[[int], float]]:
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != len(optimizer.param_groups):
            raise ValueError(
                f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}"
            )
        fns = list(lr_lambda)
    else:
        fns = [lr_lambda] * len(optimizer.param_groups)
    for fn in fns:
        if not callable(fn):
            raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
    return fns


def _lambda_state(sched: Any) -> dict[str, Any]:
    """A state dict whose lambdas are saved as PyTorch saves them: None for plain
    functions and lambdas, the attribute dict of callable objects."""
    out = {k: v for k, v in sched.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
    out["lr_lambdas"] = [
        None if isinstance(fn, types.FunctionType) else dict(fn.__dict__) for fn in sched.lr_lambdas
    ]
    return out


def _load_lambda_state(sched: Any, state_dict: dict[str, Any]) -> None:
    state = dict(state_dict)
    saved = state.pop("lr_lambdas")
    sched.__dict__.update(state)
    for fn, attrs in zip(sched.lr_lambdas, saved):
        if attrs is not None:
            fn.__dict__.update(attrs)


class MultiplicativeLR(LRScheduler):
    """Multiply each group's rate by `lr_lambda(epoch)` every epoch (one function, or one
    per group)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The current rates times each group's factor (unchanged at construction)."""
        _warn_get_lr(self)
        if self._is_initial:
            return self._current()
        return [
            g["lr"] * fn(self.last_epoch)
            for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)
        ]

    def state_dict(self) -> dict[str, Any]:
        """As `LambdaLR.state_dict`: functions are saved as None."""
        return _lambda_state(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state; callable objects get their saved attributes back."""
        _load_lambda_state(self, state_dict)


class ConstantLR(LRScheduler):
    """Scale the rate by `factor` for the first `total_iters` epochs, then restore it."""

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """`lr * factor` at epoch 0, `lr / factor` at `total_iters`, else unchanged."""
        _warn_get_lr(self)
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return self._current()
        return [g["lr"] * (1.0 / self.factor) for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[Any]:
        return [
            b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
            for b in self.base_lrs
        ]


class LinearLR(LRScheduler):
    """Scale the rate linearly from `start_factor` to `end_factor` over `total_iters`
    epochs (applied recursively, as PyTorch does)."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 "
                "and less or equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The current rates times the ratio of this epoch's factor to the last one's."""
        _warn_get_lr(self)
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [g["lr"] * ratio for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[Any]:
        span = self.end_factor - self.start_factor
        return [
            b
            * (self.start_factor + span * min(self.total_iters, self.last_epoch) / self.total_iters)
            for b in self.base_lrs
        ]


class PolynomialLR(LRScheduler):
    """Decay the rate as `(1 - epoch / total_iters) ** power` until `total_iters`."""

    def __init__(
        self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """The current rates times this epoch's decay ratio."""
        _warn_get_lr(self)
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        factor = (
            (1.0 - self.last_epoch / self.total_iters)
            / (1.0 - (self.last_epoch - 1) / self.total_iters)
        ) ** self.power
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[Any]:
        return [
            b * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
            for b in self.base_lrs
        ]


def _check_children(kind: str, optimizer: Any, schedulers: Sequence[Any]) -> None:
    for i, sched in enumerate(schedulers):
        if not hasattr(sched, "optimizer"):
            raise TypeError(f"{kind} at index {i} should have `optimizer` as its attribute.")
        if isinstance(sched, ReduceLROnPlateau):
            raise ValueError(
                f"{kind} does not support `ReduceLROnPlateau` scheduler as it "
                f"requires additional kwargs to be specified when calling "
                f"`step`, but got one at index {i} in the given schedulers "
                f"sequence."
            )
        if optimizer != sched.optimizer:
            raise ValueError(
                f"{kind} expects all schedulers to belong to the same optimizer, "
                f"but got scheduler {type(sched).__name__} at index {i} has "
                f"{sched.optimizer}, which is different from "
                f"{type(optimizer).__name__}."
            )


def _nested_state(sched: Any) -> dict[str, Any]:
    out = {k: v for k, v in sched.__dict__.items() if k not in ("optimizer", "_schedulers")}
    out["_schedulers"] = [s.state_dict() for s in sched._schedulers]
    return out


def _load_nested_state(sched: Any, state_dict: dict[str, Any]) -> None:
    state = dict(state_dict)
    children = state.pop("_schedulers")
    sched.__dict__.update(state)
    for s, saved in zip(sched._schedulers, children):
        s.load_state_dict(saved)


class SequentialLR(LRScheduler):
    """Run `schedulers` one after another, switching at each of `milestones` (the next
    scheduler starts from epoch 0 with its closed form)."""

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: list[LRScheduler],
        milestones: list[int],
        last_epoch: int = -1,
    ) -> None:
        kind = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{kind} expects at least one scheduler, but got no scheduler.")
        _check_children(kind, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"Sequential Schedulers expects number of schedulers provided to "
                f"be one more than the number of milestone points, but got "
                f"number of schedulers {len(schedulers)} and the number of "
                f"milestones to be equal to {len(milestones)}"
            )
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            _set(group, "lr", group["initial_lr"])
        self.recursive_undo()
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched: Any = None) -> None:
        """Take back the initial step every child (and grandchild) made when built."""
        target = self if sched is None else sched
        if hasattr(target, "_schedulers"):
            for s in target._schedulers:
                self.recursive_undo(s)
        elif hasattr(target, "last_epoch"):
            target.last_epoch -= 1

    def step(self) -> None:  # type: ignore[override]
        """Step the scheduler whose span holds the next epoch."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        """The state with each child's own state dict under `_schedulers`."""
        return _nested_state(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state and each child's."""
        _load_nested_state(self, state_dict)


class ChainedScheduler(LRScheduler):
    """Step every scheduler of `schedulers` at each `step()` (their factors compose)."""

    def __init__(
        self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None
    ) -> None:
        kind = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(
                f"{kind} expects at least one scheduler to be chained, but got no scheduler."
            )
        optimizer = optimizer or schedulers[0].optimizer
        _check_children(kind, optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _values(self._schedulers[-1].optimizer, "lr")

    def step(self) -> None:  # type: ignore[override]
        """Step each scheduler in order."""
        for sched in self._schedulers:
            sched.step()
        self._last_lr = _values(self._schedulers[-1].optimizer, "lr")

    def state_dict(self) -> dict[str, Any]:
        """The state with each child's own state dict under `_schedulers`."""
        return _nested_state(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state and each child's."""
        _load_nested_state(self, state_dict)


class CyclicLR(LRScheduler):
    """Cycle the rate between `base_lr` and `max_lr` (Smith 2017): up over
    `step_size_up` iterations, down over `step_size_down`; the amplitude is scaled by
    `mode` ("triangular": constant, "triangular2": halved each cycle, "exp_range":
    `gamma ** iteration`) or by `scale_fn` (of the cycle or the iteration, `scale_mode`).
    With `cycle_momentum`, momentum (or Adam's beta1) cycles inversely between
    `max_momentum` and `base_momentum`. Step it after every batch."""

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float = 0.8,
        max_momentum: float = 0.9,
        last_epoch: int = -1,
    ) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = [
            v.clone() if isinstance(v, Tensor) else v
            for v in _per_group("base_lr", optimizer, base_lr)
        ]
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set(group, "lr", lr)
        self.max_lrs = [
            v.clone() if isinstance(v, Tensor) else v
            for v in _per_group("max_lr", optimizer, max_lr)
        ]
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(
                    self.max_momentums, self.base_momentums, optimizer.param_groups
                ):
                    self._set_momentum(group, high)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode in ("triangular", "triangular2"):
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle (or iteration) `x`."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self) -> list[Any]:
        """This iteration's rates (and, with cycle_momentum, it sets the momenta)."""
        _warn_get_lr(self)
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale = x / self.step_ratio
        else:
            scale = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [
            lo + (hi - lo) * scale * self.scale_fn(at)
            for lo, hi in zip(self.base_lrs, self.max_lrs)
        ]
        if self.cycle_momentum:
            for lo, hi, group in zip(
                self.base_momentums, self.max_momentums, self.optimizer.param_groups
            ):
                self._set_momentum(group, hi - (hi - lo) * scale * self.scale_fn(at))
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The state; a custom `scale_fn` is saved as PyTorch saves it (None for
        functions, the attribute dict of callable objects)."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = dict(fn.__dict__)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the state (a custom `scale_fn` object gets its attributes back)."""
        state = dict(state_dict)
        fn = state.pop("_scale_fn_custom", None)
        custom = self._scale_fn_custom
        super().load_state_dict(state)
        self._scale_fn_custom = custom
        if fn is not None and custom is not None:
            custom.__dict__.update(fn)
        self._init_scale_fn()


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the base rate to `eta_min` over `T_0` epochs, then restart;
    each period is `T_mult` times longer than the last (SGDR, Loshchilov & Hutter).
    `step(epoch)` accepts fractional epochs (call it per batch with `epoch + i / iters`)."""

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}"
            )
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        """`eta_min + (base - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2`."""
        _warn_get_lr(self)
        return [
            self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
            for b in self.base_lrs
        ]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to (possibly fractional) `epoch`."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _set(group, "lr", lr)
        self._last_lr = _values(self.optimizer, "lr")


def _warn_get_lr(sched: LRScheduler) -> None:
    """PyTorch's warning for `get_lr()` called by a user (the rates of the last step are
    `get_last_lr()`)."""
    if not sched._get_lr_called_within_step:
        warnings.warn(
            "To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
            UserWarning,
            stacklevel=3,
        )


_LRScheduler = LRScheduler  # the older name PyTorch still exports
