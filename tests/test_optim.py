"""llgrad.optim against torch.optim: the same model, weights, data and loss give the same
parameters after every step; plus state dicts, param groups, closures and errors."""
from __future__ import annotations

import copy
import io
from typing import Any, Callable

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn as nn
import llgrad.nn.functional as F
import llgrad.optim as optim
import llgrad.serialization as ser
from llgrad.ir import registry

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = None
    TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the test oracle) is not "
                                 "installed")
TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-10, atol=1e-12)}


# Workaround while reductions/matmul finish their derivative rules (see tests/test_nn.py):
# install minimal ones only where the registry has none.
def _vjp_sum(ctx: Any, g: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    shape = ctx.input_meta[0][0]
    if not keepdim and shape:
        g = ctx.F.reshape(g, tuple(1 if (not axes or i in axes) else n
                                   for i, n in enumerate(shape)))
    return ctx.F.expand(g, shape)


def _vjp_matmul(ctx: Any, g: Any) -> Any:
    a, b = ctx.inputs
    return (ctx.F.matmul(g, ctx.F.transpose(b, -1, -2)) if ctx.needs_input_grad[0] else None,
            ctx.F.matmul(ctx.F.transpose(a, -1, -2), g) if ctx.needs_input_grad[1] else None)


if registry.get("sum").vjp is None:
    registry.get("sum").vjp = _vjp_sum
    registry.get("sum").saves = ""
if registry.get("matmul").vjp is None:
    registry.get("matmul").vjp = _vjp_matmul


def values(t: Any) -> np.ndarray:
    if isinstance(t, lg.Tensor):
        return np.asarray(t.detach()._values())
    return t.detach().numpy()


def models(dtype: str, seed: int = 0) -> tuple[nn.Module, Any]:
    """A small MLP in both libraries with identical weights (torch's, copied across)."""
    torch.manual_seed(seed)
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    theirs = theirs.double() if dtype == "float64" else theirs
    ours = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    ours = ours.double() if dtype == "float64" else ours
    ours.load_state_dict({k: lg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def data(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(1)
    return r.standard_normal((16, 4)).astype(dtype), r.integers(0, 3, 16)


def compare_training(make_ours: Callable[[Any], Any], make_theirs: Callable[[Any], Any],
                     dtype: str, steps: int = 5) -> None:
    ours, theirs = models(dtype)
    opt_l, opt_t = make_ours(ours.parameters()), make_theirs(theirs.parameters())
    x, t = data(dtype)
    xl, tl, xt, tt = lg.tensor(x), lg.tensor(t), torch.tensor(x), torch.tensor(t)
    for step in range(steps):
        opt_l.zero_grad()
        opt_t.zero_grad()
        loss_l = F.cross_entropy(ours(xl), tl)
        loss_t = TF.cross_entropy(theirs(xt), tt)
        np.testing.assert_allclose(loss_l.item(), loss_t.item(), **TOL[dtype])
        loss_l.backward()
        loss_t.backward()
        opt_l.step()
        opt_t.step()
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            np.testing.assert_allclose(values(p), values(q), **TOL[dtype],
                                       err_msg=f"{name} after step {step + 1}")


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
    dict(lr=0.1, momentum=0.5, maximize=True),
]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", range(len(SGD_CASES)))
def test_sgd_matches_torch(dtype: str, case: int) -> None:
    kw = SGD_CASES[case]
    compare_training(lambda p: optim.SGD(p, **kw), lambda p: torch.optim.SGD(p, **kw), dtype)


ADAM_CASES = [
    dict(lr=0.01),
    dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, maximize=True, weight_decay=0.05, amsgrad=True),
]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", range(len(ADAM_CASES)))
@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
def test_adam_matches_torch(dtype: str, case: int, kind: str) -> None:
    kw = ADAM_CASES[case]
    compare_training(lambda p: getattr(optim, kind)(p, **kw),
                     lambda p: getattr(torch.optim, kind)(p, **kw), dtype)


RMSPROP_CASES = [
    dict(),
    dict(lr=0.01, alpha=0.9, eps=1e-6),
    dict(lr=0.005, momentum=0.9),
    dict(lr=0.005, centered=True),
    dict(lr=0.002, momentum=0.5, centered=True, weight_decay=0.1),
    dict(lr=0.01, maximize=True, weight_decay=0.01),
]

ADAGRAD_CASES = [
    dict(),
    dict(lr=0.1, lr_decay=0.05),
    dict(lr=0.05, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-6),
    dict(lr=0.05, maximize=True, lr_decay=0.01),
]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind,kw", [("RMSprop", kw) for kw in RMSPROP_CASES] +
                         [("Adagrad", kw) for kw in ADAGRAD_CASES],
                         ids=[f"RMSprop{i}" for i in range(len(RMSPROP_CASES))] +
                         [f"Adagrad{i}" for i in range(len(ADAGRAD_CASES))])
def test_rmsprop_adagrad_match_torch(dtype: str, kind: str, kw: dict) -> None:
    compare_training(lambda p: getattr(optim, kind)(p, **kw),
                     lambda p: getattr(torch.optim, kind)(p, **kw), dtype, steps=6)


@needs_torch
@pytest.mark.parametrize("kind,kw", [("RMSprop", dict(momentum=0.9, centered=True)),
                                     ("Adagrad", dict(lr_decay=0.1))])
def test_rmsprop_adagrad_state_dicts_as_torch(kind: str, kw: dict) -> None:
    ours, theirs = models("float64")
    opt_l = getattr(optim, kind)(ours.parameters(), **kw)
    opt_t = getattr(torch.optim, kind)(theirs.parameters(), **kw)
    x, t = data("float64")
    for opt, model, lib, F_ in ((opt_l, ours, lg, F), (opt_t, theirs, torch, TF)):
        for _ in range(2):
            opt.zero_grad()
            F_.cross_entropy(model(lib.tensor(x)), lib.tensor(t)).backward()
            opt.step()
    sl, st = opt_l.state_dict(), opt_t.state_dict()
    assert sorted(sl["state"][0]) == sorted(st["state"][0])
    for k, v in st["state"][0].items():
        np.testing.assert_allclose(values(sl["state"][0][k]), values(v), rtol=1e-10)
    clone = getattr(optim, kind)(ours.parameters(), **kw)
    clone.load_state_dict(sl)
    assert clone.state_dict()["param_groups"] == sl["param_groups"]


def test_rmsprop_adagrad_reject_bad_hyperparameters() -> None:
    p = [nn.Parameter(lg.ones(2))]
    with pytest.raises(ValueError, match="Invalid alpha value"):
        optim.RMSprop(p, alpha=-0.1)
    with pytest.raises(ValueError, match="Invalid lr_decay value"):
        optim.Adagrad(p, lr_decay=-1.0)
    with pytest.raises(TypeError, match="complex parameters"):
        q = nn.Parameter(lg.ones(2, dtype=lg.complex64))
        q.grad = lg.ones(2, dtype=lg.complex64)
        optim.RMSprop([q]).step()


@needs_torch
def test_adamw_default_weight_decay_matches_torch() -> None:
    compare_training(lambda p: optim.AdamW(p), lambda p: torch.optim.AdamW(p), "float64")


@needs_torch
def test_param_groups_with_their_own_hyperparameters() -> None:
    def groups(m: Any, lib: Any) -> Any:
        return lib.SGD([{"params": m[0].parameters()},
                        {"params": m[2].parameters(), "lr": 0.5, "momentum": 0.9}],
                       lr=0.1, momentum=0.0)
    ours, theirs = models("float64")
    opt_l, opt_t = groups(ours, optim), groups(theirs, torch.optim)
    x, t = data("float64")
    for _ in range(3):
        for opt, model, loss_fn, X, T in ((opt_l, ours, F.cross_entropy, lg.tensor(x),
                                           lg.tensor(t)),
                                          (opt_t, theirs, TF.cross_entropy, torch.tensor(x),
                                           torch.tensor(t))):
            opt.zero_grad()
            loss_fn(model(X), T).backward()
            opt.step()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(values(p), values(q), **TOL["float64"])
    assert [g["lr"] for g in opt_l.param_groups] == [0.1, 0.5]


@needs_torch
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_state_dict_layout_matches_torch(kind: str) -> None:
    ours, theirs = models("float64")
    kw = dict(lr=0.1, momentum=0.9) if kind == "SGD" else dict(lr=0.01, amsgrad=True)
    opt_l = getattr(optim, kind)(ours.parameters(), **kw)
    opt_t = getattr(torch.optim, kind)(theirs.parameters(), **kw)
    x, t = data("float64")
    F.cross_entropy(ours(lg.tensor(x)), lg.tensor(t)).backward()
    TF.cross_entropy(theirs(torch.tensor(x)), torch.tensor(t)).backward()
    opt_l.step()
    opt_t.step()
    sl, st = opt_l.state_dict(), opt_t.state_dict()
    assert list(sl["state"]) == list(st["state"])
    for k in st["state"]:
        assert set(sl["state"][k]) == set(st["state"][k])
        for name, v in st["state"][k].items():
            np.testing.assert_allclose(values(sl["state"][k][name]), values(v),
                                       **TOL["float64"])
    assert [g["params"] for g in sl["param_groups"]] == [g["params"] for g in st["param_groups"]]
    for g_l, g_t in zip(sl["param_groups"], st["param_groups"]):
        for key, v in g_l.items():
            assert g_t[key] == v, key


@pytest.mark.parametrize("kind", ["SGD", "Adam", "AdamW"])
def test_state_dict_resume_equals_uninterrupted_training(kind: str) -> None:
    """Train 3 steps, save model and optimizer, load into fresh objects, train 2 more: the
    result equals 5 uninterrupted steps."""
    kw = dict(lr=0.1, momentum=0.9, nesterov=True) if kind == "SGD" else \
        dict(lr=0.01, amsgrad=True)
    x, t = data("float64")
    X, T = lg.tensor(x), lg.tensor(t)

    def make() -> tuple[nn.Module, Any]:
        lg.manual_seed(4)
        m = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)).double()
        return m, getattr(optim, kind)(m.parameters(), **kw)

    def train(m: nn.Module, opt: Any, steps: int) -> None:
        for _ in range(steps):
            opt.zero_grad()
            F.cross_entropy(m(X), T).backward()
            opt.step()

    ref_model, ref_opt = make()
    train(ref_model, ref_opt, 5)
    model, opt = make()
    train(model, opt, 3)
    buf = io.BytesIO()
    ser.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    saved = ser.load(buf)
    model2, opt2 = make()
    model2.load_state_dict(saved["model"])
    opt2.load_state_dict(saved["opt"])
    train(model2, opt2, 2)
    for p, q in zip(model2.parameters(), ref_model.parameters()):
        np.testing.assert_array_equal(values(p), values(q))
    before = values(next(iter(opt.state.values()))[
        "momentum_buffer" if kind == "SGD" else "exp_avg"]).copy()
    opt2.step()                                   # loaded state is a copy, not an alias
    np.testing.assert_array_equal(
        values(next(iter(opt.state.values()))["momentum_buffer" if kind == "SGD"
                                              else "exp_avg"]), before)


def test_load_state_dict_errors() -> None:
    a = nn.Linear(2, 2)
    opt = optim.SGD(a.parameters(), lr=0.1)
    other = optim.SGD([{"params": [a.weight]}, {"params": [a.bias]}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(other.state_dict())
    small = optim.SGD([a.weight], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(small.state_dict())
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})


def test_zero_grad_closure_and_no_grad_updates() -> None:
    lg.manual_seed(0)
    m = nn.Linear(3, 1)
    opt = optim.SGD(m.parameters(), lr=0.1)
    x = lg.randn(5, 3)
    calls = []

    def closure() -> lg.Tensor:
        calls.append(lg.is_grad_enabled())
        opt.zero_grad()
        loss = m(x).pow(2).mean()
        loss.backward()
        return loss

    with lg.no_grad():
        loss = opt.step(closure)
    assert calls == [True] and isinstance(loss, lg.Tensor)
    assert m.weight.grad_fn is None and m.weight.is_leaf and m.weight.requires_grad
    opt.zero_grad(set_to_none=False)
    assert m.weight.grad is not None and not values(m.weight.grad).any()
    opt.zero_grad()
    assert m.weight.grad is None
    before = values(m.weight).copy()
    opt.step()                                       # no gradients: nothing changes
    np.testing.assert_array_equal(values(m.weight), before)


def test_add_param_group_and_validation() -> None:
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    opt = optim.Adam(a.parameters(), lr=0.01)
    opt.add_param_group({"params": b.parameters(), "lr": 0.1})
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.1]
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a.weight]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.SGD(a.parameters(), lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        optim.SGD(a.parameters(), lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.Adam(a.parameters(), betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {a.weight}}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a.weight * 2], lr=0.1)
    with pytest.raises(TypeError, match="only optimize Tensors"):
        optim.SGD([1.0], lr=0.1)
    text = repr(opt)
    assert text.startswith("Adam (\nParameter Group 0\n") and "lr: 0.1" in text


def test_optimizer_updates_with_tensor_ops_only() -> None:
    """The update never leaves llgrad: parameters keep their storage (in-place) and bf16
    parameters stay bf16."""
    p = nn.Parameter(lg.tensor([1.0, -2.0, 3.0]).to(lg.bfloat16))
    storage = p._storage
    opt = optim.AdamW([p], lr=0.1)
    (p.float() * p.float()).sum().backward()
    opt.step()
    assert p._storage is storage and p.dtype is lg.bfloat16
    assert np.all(np.abs(values(p)) < np.array([1.0, 2.0, 3.0]))
    assert opt.state[p]["exp_avg"].dtype is lg.bfloat16
    assert opt.state[p]["step"].item() == 1.0
    assert copy.deepcopy(opt.state_dict())["state"][0]["step"].item() == 1.0
