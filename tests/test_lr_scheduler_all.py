"""Every scheduler of torch.optim.lr_scheduler against torch, side by side over many
steps: rates, momenta, get_last_lr, state dicts, closed forms, errors and warnings."""
from __future__ import annotations

import math
import warnings

import pytest

import llgrad as lg

torch = pytest.importorskip("torch")


def _opt(lib, kind="SGD", groups=2):
    params = [lib.zeros(2, requires_grad=True) for _ in range(groups)]
    spec = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)]
    if kind == "SGD":
        return getattr(lib.optim, kind)(spec, lr=0.1, momentum=0.9)
    return getattr(lib.optim, kind)(spec, lr=0.1)


def _mk(lib, name, opt, kw):
    mod = lib.optim.lr_scheduler
    if name == "SequentialLR":
        return mod.SequentialLR(opt, [mod.LinearLR(opt, 0.2, total_iters=4),
                                      mod.ExponentialLR(opt, 0.9),
                                      mod.StepLR(opt, 3, 0.5)], milestones=[4, 9])
    if name == "ChainedScheduler":
        return mod.ChainedScheduler([mod.ConstantLR(opt, 0.5, total_iters=3),
                                     mod.ExponentialLR(opt, 0.95),
                                     mod.CosineAnnealingLR(opt, T_max=7)])
    if name in ("LambdaLR", "MultiplicativeLR"):
        return getattr(mod, name)(opt, kw["fn"])
    return getattr(mod, name)(opt, **kw)


CASES = [
    ("LambdaLR", dict(fn=lambda e: 0.95 ** e + 0.01 * e), "SGD"),
    ("MultiplicativeLR", dict(fn=lambda e: 0.9 if e % 2 else 1.05), "SGD"),
    ("StepLR", dict(step_size=3, gamma=0.5), "SGD"),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3), "SGD"),
    ("ConstantLR", dict(factor=0.25, total_iters=4), "SGD"),
    ("LinearLR", dict(start_factor=0.1, end_factor=0.8, total_iters=6), "SGD"),
    ("ExponentialLR", dict(gamma=0.93), "SGD"),
    ("PolynomialLR", dict(total_iters=8, power=2.0), "SGD"),
    ("CosineAnnealingLR", dict(T_max=6, eta_min=0.001), "SGD"),
    ("SequentialLR", {}, "SGD"),
    ("ChainedScheduler", {}, "SGD"),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3), "SGD"),
    ("CyclicLR", dict(base_lr=[0.01, 0.02], max_lr=0.2, step_size_up=2, step_size_down=4,
                      mode="triangular2"), "SGD"),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range",
                      gamma=0.9, base_momentum=0.7, max_momentum=0.95), "Adam"),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=4,
                      scale_fn=lambda x: 1 / (x + 1), scale_mode="iterations",
                      cycle_momentum=False), "RMSprop"),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=30, three_phase=True), "SGD"),
    ("OneCycleLR", dict(max_lr=[0.5, 0.3], epochs=3, steps_per_epoch=10,
                        anneal_strategy="linear"), "Adam"),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.01), "SGD"),
    ("CosineAnnealingWarmRestarts", dict(T_0=4), "Adam"),
]


def _snapshot(opt):
    out = []
    for g in opt.param_groups:
        out.append(float(g["lr"]))
        if "momentum" in g:
            out.append(float(g["momentum"]))
        if "betas" in g:
            out.append(float(g["betas"][0]))
    return out


@pytest.mark.parametrize("name,kw,kind", CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                       enumerate(CASES)])
def test_rates_match_torch_over_many_steps(name, kw, kind):
    opt_t, opt_l = _opt(torch, kind), _opt(lg, kind)
    sched_t, sched_l = _mk(torch, name, opt_t, kw), _mk(lg, name, opt_l, kw)
    assert _snapshot(opt_l) == pytest.approx(_snapshot(opt_t), rel=1e-13, abs=1e-15)
    steps = 29 if name == "OneCycleLR" else 25
    for _ in range(steps):
        opt_t.step()
        opt_l.step()
        sched_t.step()
        sched_l.step()
        assert _snapshot(opt_l) == pytest.approx(_snapshot(opt_t), rel=1e-13, abs=1e-15)
        assert sched_l.get_last_lr() == pytest.approx(sched_t.get_last_lr(), rel=1e-13,
                                                      abs=1e-15)
    assert getattr(sched_l, "last_epoch", None) == getattr(sched_t, "last_epoch", None)


@pytest.mark.parametrize("name,kw,kind", [c for c in CASES if c[0] not in
                                          ("LambdaLR", "MultiplicativeLR") and
                                          "scale_fn" not in c[1]][::2])
def test_state_dict_resume_matches_torch(name, kw, kind):
    """Five steps, then a new optimizer and scheduler load both state dicts and go on."""
    opt_t, opt_l = _opt(torch, kind), _opt(lg, kind)
    sched_t, sched_l = _mk(torch, name, opt_t, kw), _mk(lg, name, opt_l, kw)
    for _ in range(5):
        opt_t.step(), opt_l.step(), sched_t.step(), sched_l.step()
    sd_l = sched_l.state_dict()
    assert "optimizer" not in sd_l
    assert set(sched_t.state_dict()) <= set(sd_l) | {"_scale_fn_ref"}
    opt2 = _opt(lg, kind)                   # PyTorch's order: build, then load both
    sched2 = _mk(lg, name, opt2, kw)
    opt2.load_state_dict(opt_l.state_dict())
    sched2.load_state_dict(sd_l)
    for _ in range(8):
        opt_t.step(), opt2.step(), sched_t.step(), sched2.step()
        assert _snapshot(opt2) == pytest.approx(_snapshot(opt_t), rel=1e-13, abs=1e-15)


@pytest.mark.parametrize("name,kw", [("StepLR", dict(step_size=3, gamma=0.5)),
                                     ("MultiStepLR", dict(milestones=[2, 5], gamma=0.3)),
                                     ("ConstantLR", dict(factor=0.5, total_iters=4)),
                                     ("LinearLR", dict(start_factor=0.2, total_iters=5)),
                                     ("ExponentialLR", dict(gamma=0.9)),
                                     ("PolynomialLR", dict(total_iters=6, power=1.5)),
                                     ("CosineAnnealingLR", dict(T_max=5))])
def test_step_with_epoch_uses_closed_form_and_warns(name, kw):
    opt_t, opt_l = _opt(torch), _opt(lg)
    sched_t, sched_l = _mk(torch, name, opt_t, kw), _mk(lg, name, opt_l, kw)
    for epoch in (3, 7, 1, 4, 10):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            sched_l.step(epoch)
        assert any("epoch parameter" in str(w.message) for w in got)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched_t.step(epoch)
        assert sched_l.get_last_lr() == pytest.approx(sched_t.get_last_lr(), rel=1e-13)


def test_warm_restarts_fractional_epochs():
    opt_t, opt_l = _opt(torch), _opt(lg)
    kw = dict(T_0=2, T_mult=3, eta_min=0.005)
    sched_t = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt_t, **kw)
    sched_l = lg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt_l, **kw)
    for i in range(40):
        epoch = i * 0.37
        sched_t.step(epoch)
        sched_l.step(epoch)
        assert sched_l.get_last_lr() == pytest.approx(sched_t.get_last_lr(), rel=1e-13)
        assert (sched_l.T_i, sched_l.last_epoch) == (sched_t.T_i, sched_t.last_epoch)
    with pytest.raises(ValueError, match="non-negative"):
        sched_l.step(-1)


def test_reduce_on_plateau_matches_torch():
    for kw in (dict(), dict(mode="max", factor=0.5, patience=2, threshold_mode="abs",
                            threshold=0.1, cooldown=2, min_lr=[0.01, 0.02])):
        opt_t, opt_l = _opt(torch), _opt(lg)
        sched_t = torch.optim.lr_scheduler.ReduceLROnPlateau(opt_t, **kw)
        sched_l = lg.optim.lr_scheduler.ReduceLROnPlateau(opt_l, **kw)
        for i in range(60):
            metric = 1.0 / (1 + i % 7) + 0.001 * i
            sched_t.step(metric)
            sched_l.step(lg.tensor(metric))
            assert _snapshot(opt_l) == pytest.approx(_snapshot(opt_t), rel=1e-13)
            assert sched_l.get_last_lr() == pytest.approx(sched_t.get_last_lr())


def test_tensor_lr_is_filled_in_place():
    p = lg.zeros(2, requires_grad=True)
    lr = lg.tensor(0.1)
    opt = lg.optim.SGD([p], lr=lr)
    sched = lg.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    assert opt.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(0.05)
    opt.step()
    sched.step()
    assert float(lr) == pytest.approx(0.075)


def test_warnings_as_torch():
    opt = _opt(lg)
    sched = lg.optim.lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    opt = _opt(lg)
    sched = lg.optim.lr_scheduler.StepLR(opt, 2)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()


def test_errors_as_torch():
    mod_l, mod_t = lg.optim.lr_scheduler, torch.optim.lr_scheduler
    cases = [
        ("ConstantLR", dict(factor=1.5), ValueError),
        ("LinearLR", dict(start_factor=0.0), ValueError),
        ("LinearLR", dict(end_factor=2.0), ValueError),
        ("CosineAnnealingWarmRestarts", dict(T_0=0), ValueError),
        ("CosineAnnealingWarmRestarts", dict(T_0=2, T_mult=0), ValueError),
        ("CyclicLR", dict(base_lr=0.1, max_lr=1.0, mode="nope"), ValueError),
        ("OneCycleLR", dict(max_lr=0.1), ValueError),
        ("ReduceLROnPlateau", dict(factor=2.0), ValueError),
    ]
    for name, kw, err in cases:
        with pytest.raises(err):
            getattr(mod_l, name)(_opt(lg), **kw)
        with pytest.raises(err):
            getattr(mod_t, name)(_opt(torch), **kw)
    opt = _opt(lg)
    with pytest.raises(ValueError, match="milestone"):
        mod_l.SequentialLR(opt, [mod_l.StepLR(opt, 2)], milestones=[3])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        mod_l.ChainedScheduler([mod_l.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="same optimizer"):
        mod_l.SequentialLR(opt, [mod_l.StepLR(opt, 2), mod_l.StepLR(_opt(lg), 2)], [3])
    with pytest.raises(TypeError):
        mod_l.MultiplicativeLR(opt, 3)
    with pytest.raises(ValueError, match="momentum"):
        mod_l.CyclicLR(lg.optim.Adagrad([lg.zeros(1, requires_grad=True)]), 0.1, 1.0)
    with pytest.raises(KeyError, match="initial_lr"):
        mod_l.StepLR(_opt(lg), 2, last_epoch=3)


def test_compiled_step_reads_scheduled_rate():
    """A compiled training step sees each new rate without recompiling."""
    lg.manual_seed(0)
    w = lg.randn(3, requires_grad=True)
    opt = lg.optim.NAdam([w], lr=0.1)
    sched = lg.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=2)
    ref = w.detach().clone().requires_grad_(True)
    ropt = lg.optim.NAdam([ref], lr=0.1)
    rsched = lg.optim.lr_scheduler.CyclicLR(ropt, 0.01, 0.1, step_size_up=2)

    def make(p, o):
        def step():
            o.zero_grad()
            loss = (lg.sin(p) * p).sum()
            loss.backward()
            o.step()
            return loss
        return step
    cstep, estep = lg.compile(make(w, opt)), make(ref, ropt)
    for _ in range(6):
        cstep()
        estep()
        sched.step()
        rsched.step()
    assert lg.allclose(w, ref, rtol=1e-5, atol=1e-6)
    assert math.isclose(opt.param_groups[0]["lr"], ropt.param_groups[0]["lr"])
