"""Every optimizer of torch.optim against torch: steps, options, state dicts (both ways),
hooks, param groups, compiled training steps, errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")


def _problem(lib, dtype="float64", two_d_only=False):
    gen = np.random.default_rng(3)
    w0, b0 = gen.standard_normal((4, 3)), gen.standard_normal(3)
    x = gen.standard_normal((6, 4))
    dt = getattr(lib, dtype)
    params = [lib.tensor(w0, dtype=dt, requires_grad=True),
              lib.tensor(b0, dtype=dt, requires_grad=True)]
    xt = lib.tensor(x, dtype=dt)

    def loss():
        y = lib.tanh(xt @ params[0] + params[1])
        return (y * y).sum() + (params[0] ** 2).sum() * 0.05 + params[1].sum() * 0.3
    return (params[:1] if two_d_only else params), loss


def _to_lg(v):
    if isinstance(v, torch.Tensor):
        return lg.tensor(v.detach().numpy().copy())
    if isinstance(v, dict):
        return {k: _to_lg(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_to_lg(x) for x in v)
    return v


def _torch_kwargs(kwargs):
    # torch's capturable=True is for CUDA graphs (it refuses CPU tensors) and its
    # differentiable=True refuses leaf parameters; llgrad accepts both, same update
    return {k: v for k, v in kwargs.items() if k not in ("capturable", "differentiable")}


def _close(a, b, rtol=1e-6, atol=1e-9):
    av = a.detach().numpy() if isinstance(a, lg.Tensor) else np.asarray(a)
    bv = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    np.testing.assert_allclose(av, bv, rtol=rtol, atol=atol)


# (name, kwargs): options beyond torch's OptimizerInfo table (which tools/moduleinfo_sweep.py
# runs); foreach/capturable/differentiable/fused flags must give the same math
CASES = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, foreach=True)),
    ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.2, maximize=True, fused=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, foreach=False, capturable=True)),
    ("Adam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1, fused=True)),
    ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True, differentiable=True)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, maximize=True, foreach=True)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01, decoupled_weight_decay=True,
                   weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, betas=(0.5, 0.6), weight_decay=0.1)),       # rho_t > 5 early
    ("RAdam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1, maximize=True)),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, capturable=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5, maximize=True)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
    ("Rprop", dict(lr=0.01, etas=(0.3, 1.7), step_sizes=(1e-4, 0.05), maximize=True)),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1)),
    ("LBFGS", dict(lr=0.5, history_size=3, max_iter=7)),
    ("LBFGS", dict(lr=1, line_search_fn="strong_wolfe", tolerance_change=1e-12)),
    ("Adafactor", dict(lr=0.05, eps=(1e-20, 1e-3), d=1.2, weight_decay=0.05)),
    ("Adafactor", dict(lr=0.05, beta2_decay=-0.5, maximize=True)),
    ("Muon", dict(lr=0.02, nesterov=False, adjust_lr_fn="match_rms_adamw")),
]


def _run(name, kwargs, steps=6, dtype="float64", opts=None):
    two_d = name == "Muon"
    pt, loss_t = _problem(torch, dtype, two_d)
    pl, loss_l = _problem(lg, dtype, two_d)
    opt_t = getattr(torch.optim, name)(pt, **_torch_kwargs(kwargs))
    opt_l = getattr(lg.optim, name)(pl, **_to_lg(kwargs))
    for opt, loss in ((opt_t, loss_t), (opt_l, loss_l)):
        def closure(opt=opt, loss=loss):
            opt.zero_grad()
            v = loss()
            v.backward()
            return v
        for _ in range(steps):
            out = opt.step(closure)
        assert out is not None
    return pt, pl, opt_t, opt_l


def _compare_state(opt_t, opt_l, rtol=1e-6, atol=1e-9):
    st, sl = opt_t.state_dict(), opt_l.state_dict()
    assert sorted(st["state"]) == sorted(sl["state"])
    for idx, entry in st["state"].items():
        mine = sl["state"][idx]
        assert sorted(mine) == sorted(entry), (idx, sorted(mine), sorted(entry))
        for k, v in entry.items():
            if isinstance(v, torch.Tensor):
                m = mine[k]
                assert isinstance(m, lg.Tensor), k
                assert str(m.dtype).split(".")[-1] == str(v.dtype).split(".")[-1], k
                assert tuple(m.shape) == tuple(v.shape), k
                if v.dtype.is_floating_point:
                    _close(m.to(lg.float64), v.double(), rtol, atol)
    for gt, gl in zip(st["param_groups"], sl["param_groups"]):
        assert gl["params"] == gt["params"]
        assert set(gt) <= set(gl), set(gt) - set(gl)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in
                                                    enumerate(CASES)])
def test_matches_torch(name, kwargs):
    # L-BFGS amplifies rounding differences ~1e5-fold per step on this problem (torch
    # against itself with a 1e-14 perturbation does too): two steps
    pt, pl, opt_t, opt_l = _run(name, kwargs, steps=2 if name == "LBFGS" else 6)
    for a, b in zip(pl, pt):
        _close(a, b, rtol=1e-6, atol=1e-9)
    _compare_state(opt_t, opt_l)


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam", "Adadelta", "Rprop", "ASGD",
                                  "Adafactor", "Adam", "SGD"])
def test_float32_parameters_and_state_dtypes(name):
    kwargs = {"SGD": dict(lr=0.1, momentum=0.9)}.get(name, {})
    pt, pl, opt_t, opt_l = _run(name, kwargs, steps=4, dtype="float32")
    for a, b in zip(pl, pt):
        assert a.dtype == lg.float32
        _close(a, b, rtol=1e-5, atol=1e-6)
    _compare_state(opt_t, opt_l, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [c for c in CASES if c[0] != "LBFGS"][::2] +
                         [("LBFGS", dict(lr=0.5, history_size=3, max_iter=7))],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_torch_state_dict_loads_and_continues(name, kwargs):
    """Three steps in torch, its state dict (as llgrad tensors) loaded into llgrad, three
    more steps in both: same parameters and state as torch's six."""
    two_d = name == "Muon"
    pt, loss_t = _problem(torch, "float64", two_d)
    pl, loss_l = _problem(lg, "float64", two_d)
    opt_t = getattr(torch.optim, name)(pt, **_torch_kwargs(kwargs))
    opt_l = getattr(lg.optim, name)(pl, **_to_lg(kwargs))

    def closure_t():
        opt_t.zero_grad()
        v = loss_t()
        v.backward()
        return v

    def closure_l():
        opt_l.zero_grad()
        v = loss_l()
        v.backward()
        return v
    n = 1 if name == "LBFGS" else 3          # L-BFGS amplifies rounding differences
    for _ in range(n):
        opt_t.step(closure_t)
    with lg.no_grad():
        for a, b in zip(pl, pt):
            a.copy_(lg.tensor(b.detach().numpy()))
    opt_l.load_state_dict(_to_lg(opt_t.state_dict()))
    # torch's own load casts floating state (but `step`) to the parameter's dtype, e.g.
    # NAdam's float32 mu_product to float64: reload torch's too so both follow that rule
    opt_t.load_state_dict(opt_t.state_dict())
    for _ in range(n):
        opt_t.step(closure_t)
        opt_l.step(closure_l)
    for a, b in zip(pl, pt):
        _close(a, b)
    _compare_state(opt_t, opt_l)


def test_llgrad_state_dict_loads_into_torch():
    """llgrad's state dict (as torch tensors) loads into torch, which then continues as
    llgrad does."""
    pl, loss_l = _problem(lg)
    opt_l = lg.optim.NAdam(pl, lr=0.01)

    def closure_l():
        opt_l.zero_grad()
        v = loss_l()
        v.backward()
        return v
    for _ in range(3):
        opt_l.step(closure_l)
    sd = opt_l.state_dict()
    conv = {"state": {k: {n: torch.tensor(v.numpy()) if isinstance(v, lg.Tensor) else v
                          for n, v in st.items()} for k, st in sd["state"].items()},
            "param_groups": sd["param_groups"]}
    pt, loss_t = _problem(torch)
    with torch.no_grad():
        for a, b in zip(pt, pl):
            a.copy_(torch.tensor(b.detach().numpy()))
    opt_t = torch.optim.NAdam(pt, lr=0.01)
    opt_t.load_state_dict(conv)
    opt_l.load_state_dict(opt_l.state_dict())     # the same casting rule on both sides
    assert opt_t.state_dict()["state"][0]["mu_product"].dtype == torch.float64
    assert opt_l.state_dict()["state"][0]["mu_product"].dtype == lg.float64

    def closure_t():
        opt_t.zero_grad()
        v = loss_t()
        v.backward()
        return v
    for _ in range(2):
        opt_t.step(closure_t)
        opt_l.step(closure_l)
    for a, b in zip(pl, pt):
        _close(a, b)
    _compare_state(opt_t, opt_l)


def test_load_state_dict_casts_as_torch():
    p = lg.zeros(3, dtype=lg.float32, requires_grad=True)
    opt = lg.optim.ASGD([p])
    opt.load_state_dict({"state": {0: {"step": lg.tensor(2.0), "eta": lg.tensor(0.1),
                                       "mu": lg.tensor(1.0),
                                       "ax": lg.zeros(3, dtype=lg.float64)}},
                         "param_groups": [dict(opt.param_groups[0], params=[0])]})
    st = opt.state[p]
    assert st["step"].dtype == lg.float32 and st["ax"].dtype == lg.float32
    assert st["eta"].dtype == lg.float32         # floating state takes the param's dtype
    q = lg.zeros(2, dtype=lg.float64, requires_grad=True)
    opt = lg.optim.LBFGS([q])
    opt.load_state_dict({"state": {0: {"old_dirs": [lg.ones(2, dtype=lg.float32)],
                                       "n_iter": 3}},
                         "param_groups": [dict(opt.param_groups[0], params=[0])]})
    assert opt.state[q]["old_dirs"][0].dtype == lg.float64 and opt.state[q]["n_iter"] == 3


def test_tensor_lr_and_param_groups_and_add_param_group():
    pt, loss_t = _problem(torch)
    pl, loss_l = _problem(lg)
    opt_t = torch.optim.RAdam([{"params": [pt[0]]}, {"params": [], "lr": 0.1}],
                              lr=torch.tensor(0.01))
    opt_l = lg.optim.RAdam([{"params": [pl[0]]}, {"params": [], "lr": 0.1}],
                           lr=lg.tensor(0.01))
    opt_t.add_param_group({"params": [pt[1]], "lr": 0.02, "betas": (0.8, 0.9)})
    opt_l.add_param_group({"params": [pl[1]], "lr": 0.02, "betas": (0.8, 0.9)})
    for opt, loss in ((opt_t, loss_t), (opt_l, loss_l)):
        for _ in range(4):
            opt.zero_grad()
            loss().backward()
            opt.step()
    for a, b in zip(pl, pt):
        _close(a, b)
    assert opt_l.state_dict()["param_groups"][2]["params"] == [1]


def test_named_parameters():
    m = lg.nn.Linear(2, 2)
    opt = lg.optim.Adamax(m.named_parameters())
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    assert torch.optim.Adamax(torch.nn.Linear(2, 2).named_parameters()).state_dict()[
        "param_groups"][0]["param_names"] == ["weight", "bias"]


def test_hooks_zero_grad_and_repr():
    p = lg.ones(3, requires_grad=True)
    opt = lg.optim.Rprop([p])
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", a, k)))
    h2 = opt.register_step_post_hook(lambda o, a, k: calls.append(("post",)))
    sd_calls = []
    opt.register_state_dict_pre_hook(lambda o: sd_calls.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: dict(sd, extra=1))
    opt.register_load_state_dict_pre_hook(lambda o, sd: sd_calls.append("load-pre"))
    opt.register_load_state_dict_post_hook(lambda o: sd_calls.append("load-post"))
    (p * p).sum().backward()
    opt.step()
    assert [c[0] for c in calls] == ["pre", "post"]
    h1.remove()
    h2.remove()
    opt.step()
    assert len(calls) == 2
    sd = opt.state_dict()
    assert sd["extra"] == 1 and sd_calls == ["pre"]
    opt.load_state_dict(sd)
    assert sd_calls == ["pre", "load-pre", "load-post"]
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and float(p.grad.abs().sum()) == 0.0
    opt.zero_grad()
    assert p.grad is None
    assert "Rprop" in repr(opt) and "etas" in repr(opt)


@pytest.mark.parametrize("name,kwargs,err", [
    ("Adamax", dict(lr=-1.0), ValueError), ("Adamax", dict(betas=(1.0, 0.9)), ValueError),
    ("NAdam", dict(momentum_decay=-1.0), ValueError), ("RAdam", dict(eps=-1.0), ValueError),
    ("Adadelta", dict(rho=1.5), ValueError), ("Rprop", dict(etas=(1.2, 0.5)), ValueError),
    ("ASGD", dict(weight_decay=-1.0), ValueError), ("LBFGS", dict(lr=-1.0), ValueError),
    ("Adafactor", dict(beta2_decay=0.5), ValueError), ("Adafactor", dict(d=0.5), ValueError),
    ("Muon", dict(adjust_lr_fn="nope"), ValueError), ("SGD", dict(fused=True, foreach=True),
                                                      RuntimeError),
    ("Adam", dict(lr=lg.ones(2)), ValueError),
])
def test_bad_hyperparameters_raise_as_torch(name, kwargs, err):
    p = lg.ones(2, 2, requires_grad=True)
    with pytest.raises(err):
        getattr(lg.optim, name)([p], **kwargs)
    tp = torch.ones(2, 2, requires_grad=True)
    tkw = {k: (torch.ones(2) if isinstance(v, lg.Tensor) else v) for k, v in kwargs.items()}
    with pytest.raises(err):
        getattr(torch.optim, name)([tp], **tkw)


def test_muon_rejects_non_matrices_and_lbfgs_groups():
    with pytest.raises(ValueError, match="2D"):
        lg.optim.Muon([lg.ones(3, requires_grad=True)])
    with pytest.raises(ValueError, match="parameter groups"):
        lg.optim.LBFGS([{"params": [lg.ones(2, requires_grad=True)]},
                        {"params": [lg.ones(2, requires_grad=True)]}])


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = lg.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("name,kwargs", [
    ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01)), ("Adadelta", dict(lr=0.5)), ("Rprop", dict(lr=0.01)),
    ("ASGD", dict(lr=0.05, t0=2)), ("Adafactor", dict(lr=0.05)),
])
def test_compiled_training_step_matches_eager(name, kwargs):
    """The first call creates the state eagerly; later calls compile the whole step."""
    def make():
        lg.manual_seed(0)
        m = lg.nn.Sequential(lg.nn.Linear(5, 8), lg.nn.Tanh(), lg.nn.Linear(8, 3))
        return m, getattr(lg.optim, name)(m.parameters(), **kwargs)
    model, opt = make()
    ref, ref_opt = make()
    x, y = lg.randn(16, 5), lg.randint(0, 3, (16,))
    cstep = lg.compile(train_step)
    for _ in range(5):
        got, want = cstep(model, opt, x, y), train_step(ref, ref_opt, x, y)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    assert any(e.graph_break is None for e in cstep._entries.values())
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)


def test_lbfgs_in_compiled_function_runs_eagerly():
    p = lg.tensor([1.5, -0.5], requires_grad=True)
    opt = lg.optim.LBFGS([p], lr=1)

    def closure():
        opt.zero_grad()
        v = ((p - 1.0) ** 2).sum()
        v.backward()
        return v

    step = lg.compile(lambda: opt.step(closure))
    step()
    np.testing.assert_allclose(p.detach().numpy(), [1.0, 1.0], atol=1e-5)
