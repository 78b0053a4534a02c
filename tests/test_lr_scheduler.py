"""`lg.optim.lr_scheduler` against torch's: the same learning rates, bit for bit, step by
step; state dicts; and compiled training steps that follow a scheduler without retracing."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from conftest import needs_torch, torch


def _schedule(lib, make, steps=25, opt="SGD", metric=None):
    p = lib.nn.Parameter(lib.ones(2))
    q = lib.nn.Parameter(lib.ones(1))
    kw = {"momentum": 0.9} if opt in ("SGD", "RMSprop") else {}
    o = getattr(lib.optim, opt)([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1, **kw)
    s = make(lib.optim.lr_scheduler, o)
    out = [tuple(s.get_last_lr()) if hasattr(s, "get_last_lr") else ()]
    for i in range(steps):
        o.step()
        s.step(metric(i)) if metric else s.step()
        g = o.param_groups[0]
        out.append(tuple(s.get_last_lr()) + (g.get("momentum"), g.get("betas")))
    return out


SCHEDULES = {
    "step": dict(make=lambda S, o: S.StepLR(o, 3, gamma=0.5)),
    "multistep": dict(make=lambda S, o: S.MultiStepLR(o, [2, 5, 5, 9], gamma=0.3)),
    "exponential": dict(make=lambda S, o: S.ExponentialLR(o, 0.9)),
    "cosine": dict(make=lambda S, o: S.CosineAnnealingLR(o, 7, eta_min=0.01), steps=30),
    "lambda": dict(make=lambda S, o: S.LambdaLR(o, lambda e: 0.95 ** e)),
    "lambda-per-group": dict(make=lambda S, o: S.LambdaLR(o, [lambda e: 1 / (e + 1),
                                                               lambda e: e])),
    "onecycle-sgd": dict(make=lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 2.0],
                                                        total_steps=25)),
    "onecycle-adam-3phase": dict(make=lambda S, o: S.OneCycleLR(
        o, max_lr=1.0, epochs=5, steps_per_epoch=5, anneal_strategy="linear",
        three_phase=True), opt="Adam"),
    "onecycle-rmsprop": dict(make=lambda S, o: S.OneCycleLR(o, max_lr=0.3, total_steps=30,
                                                            pct_start=0.5), opt="RMSprop",
                             steps=30),
    "plateau": dict(make=lambda S, o: S.ReduceLROnPlateau(o, patience=2, cooldown=1,
                                                          factor=0.5, min_lr=[0.001, 0.2]),
                    metric=lambda i: [5, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3][i % 12]),
    "plateau-max-abs": dict(make=lambda S, o: S.ReduceLROnPlateau(
        o, mode="max", threshold_mode="abs", threshold=0.5, patience=1),
        metric=lambda i: i % 4),
}


@needs_torch
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedules_match_torch_exactly(name):
    case = SCHEDULES[name]
    assert _schedule(lg, **case) == _schedule(torch, **case)


@needs_torch
def test_chained_schedulers_match_torch():
    def run(lib):
        o = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        a = lib.optim.lr_scheduler.ExponentialLR(o, 0.9)
        b = lib.optim.lr_scheduler.StepLR(o, 4, 0.1)
        out = []
        for _ in range(12):
            o.step()
            a.step()
            b.step()
            out.append((a.get_last_lr()[0], b.get_last_lr()[0], o.param_groups[0]["lr"]))
        return out
    assert run(lg) == run(torch)


@needs_torch
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step")
@pytest.mark.parametrize("name,epochs", [("StepLR", (7, 2, 11)), ("MultiStepLR", (4, 9, 1)),
                                         ("ExponentialLR", (3, 0, 5)),
                                         ("CosineAnnealingLR", (2, 13, 6))])
def test_step_with_epoch_uses_the_closed_form(name, epochs):
    args = {"StepLR": (3,), "MultiStepLR": ([2, 5],), "ExponentialLR": (0.8,),
            "CosineAnnealingLR": (10,)}[name]

    def run(lib):
        o = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        s = getattr(lib.optim.lr_scheduler, name)(o, *args)
        out = []
        for e in epochs:
            with pytest.warns(UserWarning, match="epoch parameter"):
                s.step(e)
            out.append(s.get_last_lr()[0])
        return out
    assert run(lg) == run(torch)


def test_state_dict_round_trip_and_initial_lr():
    o = lg.optim.SGD([lg.nn.Parameter(lg.ones(1))], lr=1.0)
    s = lg.optim.lr_scheduler.StepLR(o, 2, gamma=0.5)
    assert o.param_groups[0]["initial_lr"] == 1.0
    for _ in range(5):
        s.step()
    state = s.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 5
    o2 = lg.optim.SGD([lg.nn.Parameter(lg.ones(1))], lr=1.0)
    s2 = lg.optim.lr_scheduler.StepLR(o2, 2, gamma=0.5)
    s2.load_state_dict(state)
    o2.param_groups[0]["lr"] = o.param_groups[0]["lr"]
    s.step()
    s2.step()
    assert s2.get_last_lr() == s.get_last_lr() == [0.125]


def test_scheduler_errors():
    o = lg.optim.SGD([lg.nn.Parameter(lg.ones(1))], lr=1.0)
    S = lg.optim.lr_scheduler
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.StepLR(object(), 2)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        S.ReduceLROnPlateau(o, factor=1.5)
    with pytest.raises(ValueError, match="total_steps OR"):
        S.OneCycleLR(o, max_lr=1.0)
    s = S.OneCycleLR(o, max_lr=1.0, total_steps=2)
    s.step()
    s.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        s.step()
    with pytest.raises(ValueError, match="optimizer must support momentum"):
        S.OneCycleLR(lg.optim.Adagrad([lg.nn.Parameter(lg.ones(1))]), max_lr=1.0,
                     total_steps=3)


# --------------------------------------------------------------------------------------
# compiled training steps follow the schedule
# --------------------------------------------------------------------------------------

def _step(model, opt, x, y):
    opt.zero_grad()
    loss = lg.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("opt_name,kw,sched", [
    ("SGD", dict(lr=0.1, momentum=0.9), lambda S, o: S.OneCycleLR(o, 0.5, total_steps=8)),
    ("Adam", dict(lr=0.01), lambda S, o: S.OneCycleLR(o, 0.05, total_steps=8)),
    ("RMSprop", dict(lr=0.01, momentum=0.5), lambda S, o: S.CosineAnnealingLR(o, 3)),
    ("Adagrad", dict(lr=0.1), lambda S, o: S.ExponentialLR(o, 0.7)),
    ("AdamW", dict(lr=0.01), lambda S, o: S.StepLR(o, 2, 0.1)),
])
def test_compiled_step_follows_scheduler_without_retracing(opt_name, kw, sched):
    def make():
        lg.manual_seed(0)
        m = lg.nn.Sequential(lg.nn.Linear(3, 5), lg.nn.Tanh(), lg.nn.Linear(5, 2))
        o = getattr(lg.optim, opt_name)(m.parameters(), **kw)
        return m, o, sched(lg.optim.lr_scheduler, o)
    model, opt, s = make()
    ref, ref_opt, ref_s = make()
    x, y = lg.randn(8, 3), lg.randn(8, 2)
    cstep = lg.compile(_step)
    entries = []
    for _ in range(8):
        got, want = cstep(model, opt, x, y), _step(ref, ref_opt, x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        s.step()
        ref_s.step()
        entries.append(next(iter(cstep._entries.values()), None))
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    (entry,) = cstep._entries.values()
    assert entry.graph_break is None and entry.before_call     # lr/momentum as inputs
    assert all(e is entry for e in entries[1:])                # compiled once, no retrace


def test_compiled_step_retraces_when_a_baked_hyperparameter_changes():
    """weight_decay is read as a Python number: changing it retraces (never stale)."""
    def make():
        lg.manual_seed(0)
        m = lg.nn.Linear(3, 2)
        return m, lg.optim.SGD(m.parameters(), lr=0.1, weight_decay=0.0)
    model, opt = make()
    ref, ref_opt = make()
    x, y = lg.randn(8, 3), lg.randn(8, 2)
    cstep = lg.compile(_step)
    for i in range(4):
        if i == 2:
            opt.param_groups[0]["weight_decay"] = 0.5
            ref_opt.param_groups[0]["weight_decay"] = 0.5
        np.testing.assert_allclose(cstep(model, opt, x, y).item(),
                                   _step(ref, ref_opt, x, y).item(), rtol=1e-5)
    (entry,) = cstep._entries.values()
    assert "weight_decay" in " ".join(entry.guards)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5)


def test_compiled_step_sees_optimizer_state_loaded_later():
    """load_state_dict replaces the state tensors the graph captured: it retraces."""
    def make():
        lg.manual_seed(0)
        m = lg.nn.Linear(3, 2)
        return m, lg.optim.Adam(m.parameters(), lr=0.05)
    model, opt = make()
    ref, ref_opt = make()
    x, y = lg.randn(8, 3), lg.randn(8, 2)
    cstep = lg.compile(_step)
    for _ in range(3):
        cstep(model, opt, x, y)
        _step(ref, ref_opt, x, y)
    saved = opt.state_dict()
    cstep(model, opt, x, y)
    _step(ref, ref_opt, x, y)
    opt.load_state_dict(saved)
    ref_opt.load_state_dict(saved)
    for _ in range(2):
        np.testing.assert_allclose(cstep(model, opt, x, y).item(),
                                   _step(ref, ref_opt, x, y).item(), rtol=1e-5)
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5)
