"""L-BFGS with PyTorch's algorithm (two-loop recursion, optional strong-Wolfe line search).

The whole step runs eagerly: its loop and line search branch on values. Inside
`lg.compile` a step is a graph break (that call runs eagerly)."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .. import functions as lg
from ..dispatch.grad_mode import enable_grad, no_grad
from ..tensor import Tensor
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak, tracing
from .optimizer import Optimizer, check_lr, scalar


def _cubic_minimum(
    x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any, bounds: tuple[Any, Any] | None = None
) -> Any:
    """The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to
    `bounds` (default: the interval between x1 and x2); the midpoint when the cubic has no
    minimum."""
    if bounds is None:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    else:
        lo, hi = bounds
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square.sqrt() if isinstance(d2_square, Tensor) else d2_square**0.5
        if x1 <= x2:
            pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(
    evaluate: Callable[[Any, Any, Tensor], tuple[float, Tensor]],
    x: Any,
    t: Any,
    d: Tensor,
    f: float,
    g: Tensor,
    gtd: Any,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> tuple[float, Tensor, Any, int]:
    """A line search along `d` satisfying the strong Wolfe conditions (bracketing, then
    zooming with cubic interpolation): returns (loss, flat gradient, step, evaluations)."""
    d_norm = lg.max(lg.abs(d))
    g = g.clone()
    f_new, g_new = evaluate(x, t, d)
    evals = 1
    gtd_new = lg.dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    it = 0
    bracket: list[Any] = []
    bracket_f: list[Any] = []
    bracket_g: list[Any] = []
    bracket_gtd: list[Any] = []
    while it < max_ls:
        if f_new > (f + c1 * t * gtd) or (it > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        previous = t
        t = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = previous, f_new, g_new.clone(), gtd_new
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = lg.dot(g_new, d)
        it += 1
    if it == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
    insufficient = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(
            bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]
        )
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = lg.dot(g_new, d)
        it += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.clone(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.clone(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS over all parameters flattened into one vector (one parameter group only).

    `step(closure)` runs up to `max_iter` iterations (and `max_eval` evaluations of the
    closure): the direction from the two-loop recursion over the last `history_size`
    curvature pairs, a step of `lr` (the first iteration scales it by
    min(1, 1/|g|_1)) or a strong-Wolfe line search (`line_search_fn="strong_wolfe"`);
    it stops when the gradient's largest entry is below `tolerance_grad` or the step or
    the loss change is below `tolerance_change`. The state (`d`, `t`, `old_dirs`,
    `old_stps`, `ro`, `H_diag`, `prev_flat_grad`, `prev_loss`, `n_iter`, `func_evals`,
    `al`) is PyTorch's, kept under the first parameter.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(
            params,
            dict(
                lr=lr,
                max_iter=max_iter,
                max_eval=max_eval,
                tolerance_grad=tolerance_grad,
                tolerance_change=tolerance_change,
                history_size=history_size,
                line_search_fn=line_search_fn,
            ),
        )
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache: int | None = None

    def _numel(self) -> int:
        if self._numel_cache is None:
            self._numel_cache = sum(
                2 * p.numel() if p.is_complex() else p.numel() for p in self._params
            )
        return self._numel_cache

    def _flat_grad(self) -> Tensor:
        views = []
        for p in self._params:
            if p._grad is None:
                view = lg.zeros(p.numel(), dtype=p.dtype)
            else:
                view = p._grad.reshape(-1)
            if view.is_complex():
                view = lg.view_as_real(view).reshape(-1)
            views.append(view)
        return lg.cat(views, 0)

    def _add_grad(self, step_size: Any, update: Tensor) -> None:
        offset = 0
        for p in self._params:
            target = lg.view_as_real(p) if p.is_complex() else p
            n = target.numel()
            piece = update[offset : offset + n].reshape(target.shape)
            if isinstance(step_size, Tensor):
                target.add_(lg.mul(piece, step_size))
            else:
                target.add_(piece, alpha=step_size)
            offset += n
        if offset != self._numel():
            raise AssertionError(f"Expected offset {offset} to equal {self._numel()}")

    def _clone_params(self) -> list[Tensor]:
        return [p.clone() for p in self._params]

    def _set_params(self, values: list[Tensor]) -> None:
        for p, v in zip(self._params, values):
            p.copy_(v)

    def _directional_evaluate(
        self, closure: Callable[[], Any], x: list[Tensor], t: Any, d: Tensor
    ) -> tuple[float, Tensor]:
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._flat_grad()
        self._set_params(x)
        return loss, flat_grad

    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """One L-BFGS step; `closure` clears the gradients, computes the loss, calls
        `backward()` and returns the loss (it is required). Returns the first loss."""
        if tracing():
            raise GraphBreak("LBFGS.step (its iterations branch on values)", user_location())
        if closure is None:
            raise TypeError("LBFGS.step() requires a closure that re-evaluates the loss")

        def evaluate() -> Any:
            with enable_grad():
                return closure()

        with no_grad():
            return self._step(evaluate)

    def _step(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr = scalar(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if lg.max(lg.abs(flat_grad)) <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps = state.get("old_dirs"), state.get("old_stps")
        ro, H_diag = state.get("ro"), state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = lg.neg(flat_grad)
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = lg.sub(flat_grad, prev_flat_grad)
                s = lg.mul(d, t)
                ys = lg.dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / lg.dot(y, y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = lg.neg(flat_grad)
                for i in range(num_old - 1, -1, -1):
                    al[i] = lg.dot(old_stps[i], q) * ro[i]
                    q = lg.sub(q, lg.mul(old_dirs[i], al[i]))
                r = lg.mul(q, H_diag)
                for i in range(num_old):
                    be_i = lg.dot(old_dirs[i], r) * ro[i]
                    r = lg.add(r, lg.mul(old_stps[i], al[i] - be_i))
                d = r
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / lg.sum(lg.abs(flat_grad))) * lr
            else:
                t = lr
            gtd = lg.dot(flat_grad, d)
            if gtd > -tolerance_change:
                break
            evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_params()

                def obj(x: list[Tensor], step: Any, direction: Tensor) -> tuple[float, Tensor]:
                    return self._directional_evaluate(closure, x, step, direction)

                loss, flat_grad, t, evals = _strong_wolfe(
                    obj, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self._add_grad(t, d)
                opt_cond = lg.max(lg.abs(flat_grad)) <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = lg.max(lg.abs(flat_grad)) <= tolerance_grad
                    evals = 1
            current_evals += evals
            state["func_evals"] += evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if lg.max(lg.abs(lg.mul(d, t))) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update(
            d=d,
            t=t,
            old_dirs=old_dirs,
            old_stps=old_stps,
            ro=ro,
            H_diag=H_diag,
            prev_flat_grad=prev_flat_grad,
            prev_loss=prev_loss,
        )
        return orig_loss
