"""`lg.func` against `torch.func`: functional_call, the transforms with torch.func's
argument conventions, per-sample gradients, model ensembling, vmap's randomness."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn.functional as F
from conftest import needs_torch, torch


def _mlp(lib, seed=0):
    m = lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.Tanh(), lib.nn.Linear(6, 3))
    r = np.random.default_rng(seed)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(r.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
    return m


def _data(lib):
    r = np.random.default_rng(7)
    return (lib.tensor(r.standard_normal((5, 4)).astype(np.float32)),
            lib.tensor(np.array([0, 2, 1, 1, 0])))


# --------------------------------------------------------------------------------------
# functional_call
# --------------------------------------------------------------------------------------

@needs_torch
def test_functional_call_matches_torch_and_restores_the_module():
    ours, theirs = _mlp(lg), _mlp(torch)
    x, _ = _data(lg)
    xt, _ = _data(torch)
    new = {"0.weight": np.full((6, 4), 0.1, np.float32), "2.bias": np.arange(3.0,
                                                                             dtype=np.float32)}
    got = lg.func.functional_call(ours, {k: lg.tensor(v) for k, v in new.items()}, (x,))
    want = torch.func.functional_call(theirs, {k: torch.tensor(v) for k, v in new.items()},
                                      (xt,))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    assert isinstance(ours[0].weight, lg.nn.Parameter)          # restored
    np.testing.assert_allclose(ours(x).detach().numpy(), theirs(xt).detach().numpy(),
                               rtol=1e-6)
    # one positional argument need not be a tuple; a tuple of dicts is merged
    split = ({"0.weight": lg.tensor(new["0.weight"])}, {"2.bias": lg.tensor(new["2.bias"])})
    again = lg.func.functional_call(ours, split, x)
    np.testing.assert_array_equal(again.detach().numpy(), got.detach().numpy())


def test_functional_call_errors_and_restores_on_failure():
    m = _mlp(lg)
    x, _ = _data(lg)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        lg.func.functional_call(m, ({"0.bias": lg.ones(6)}, {"0.bias": lg.ones(6)}), x)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): '0.bias', '2.weight'"):
        lg.func.functional_call(m, {"0.weight": lg.ones(6, 4), "2.bias": lg.ones(3)}, x,
                                strict=True)
    with pytest.raises(TypeError, match="is not an instance of llgrad.Tensor"):
        lg.func.functional_call(m, {"0.bias": 1.0}, x)
    before = m[0].weight
    with pytest.raises(RuntimeError):
        lg.func.functional_call(m, {"0.weight": lg.ones(6, 5)}, x)      # shape error
    assert m[0].weight is before


def test_functional_call_buffers_tied_weights_and_extra_names():
    class Tied(lg.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lg.nn.Linear(2, 2, bias=False)
            self.b = lg.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("shift", lg.zeros(2))

        def forward(self, x):
            return self.b(self.a(x)) + self.shift + getattr(self, "extra", 0.0)
    m = Tied()
    x = lg.ones(1, 2)
    two = lg.eye(2) * 2
    out = lg.func.functional_call(m, {"a.weight": two, "shift": lg.ones(2)}, (x,))
    np.testing.assert_allclose(out.numpy(), [[5.0, 5.0]])                 # tied: 2*2 + 1
    untied = lg.func.functional_call(m, {"a.weight": two}, (x,), tie_weights=False)
    want = (x @ two.T) @ m.a.weight.T
    np.testing.assert_allclose(untied.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    extra = lg.func.functional_call(m, {"extra": lg.full((2,), 100.0)}, (x,))
    assert extra.detach().numpy().min() > 90 and not hasattr(m, "extra")


# --------------------------------------------------------------------------------------
# transforms with torch.func's conventions
# --------------------------------------------------------------------------------------

def test_grad_and_value_order_and_aux():
    f = lambda x: ((x ** 2).sum(), x.mean())                         # noqa: E731
    x = lg.tensor([1.0, 2.0, 3.0])
    g, v = lg.func.grad_and_value(lambda x: (x ** 2).sum())(x)
    assert v.item() == 14.0 and g.tolist() == [2.0, 4.0, 6.0]
    g, (v, aux) = lg.func.grad_and_value(f, has_aux=True)(x)
    assert v.item() == 14.0 and aux.item() == 2.0 and g.tolist() == [2.0, 4.0, 6.0]
    g, aux = lg.func.grad(f, has_aux=True)(x)
    assert g.tolist() == [2.0, 4.0, 6.0] and aux.item() == 2.0


def test_gradient_dicts_keep_insertion_order():
    """`zip(grads.values(), params.values())` must pair each gradient with its tensor."""
    params = {"w": lg.ones(3, 2), "b": lg.zeros(3), "a": lg.ones(1)}
    grads = lg.func.grad(lambda p: (p["w"].sum() * 2 + p["b"].sum() * 3 + p["a"].sum()))(
        params)
    assert list(grads) == ["w", "b", "a"]
    for g, p in zip(grads.values(), params.values()):
        assert g.shape == p.shape
    batched = lg.func.vmap(lambda p: p, in_dims=({"w": 0, "b": 0, "a": None},))(
        {"w": lg.ones(2, 3), "b": lg.ones(2), "a": lg.ones(1)})
    assert list(batched) == ["w", "b", "a"]


def test_vmap_passes_keyword_arguments_unmapped():
    def f(x, *, scale):
        return x * scale
    out = lg.func.vmap(f)(lg.ones(3, 2), scale=lg.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(out.numpy(), [[1.0, 2.0]] * 3)
    with pytest.raises(ValueError, match="chunk_size"):
        lg.func.vmap(f, chunk_size=0)


def test_vmap_randomness_modes():
    x = lg.ones(4, 6)
    drop = lambda t: F.dropout(t, 0.5)                                  # noqa: E731
    with pytest.raises(RuntimeError, match="randomness error mode"):
        lg.func.vmap(drop)(x)
    same = lg.func.vmap(drop, randomness="same")(x).numpy()
    assert all((row == same[0]).all() for row in same)
    different = lg.func.vmap(drop, randomness="different")(x).numpy()
    assert len({row.tobytes() for row in different}) > 1
    assert set(np.unique(different)) <= {0.0, 2.0}
    nested = lg.func.vmap(lg.func.vmap(lambda t: t + lg.rand(()), randomness="different"),
                          randomness="different")(lg.zeros(3, 5)).numpy()
    assert len(set(nested.ravel().tolist())) == 15
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        lg.func.vmap(drop, randomness="sometimes")


@needs_torch
def test_per_sample_gradients_match_torch():
    """The torch.func tutorial: vmap(grad(loss)) over samples with functional_call."""
    results = []
    for lib in (lg, torch):
        model = _mlp(lib)
        x, y = _data(lib)
        params = {k: v.detach() for k, v in model.named_parameters()}
        buffers = {k: v.detach() for k, v in model.named_buffers()}

        def loss(p, b, sample, target, lib=lib, model=model):
            out = lib.func.functional_call(model, (p, b), (sample.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, target.unsqueeze(0))
        grads = lib.func.vmap(lib.func.grad(loss), in_dims=(None, None, 0, 0))(
            params, buffers, x, y)
        results.append({k: v.detach().numpy() for k, v in grads.items()})
        # the same as one backward per sample
        for i in range(x.shape[0]):
            model.zero_grad()
            lib.nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
            for (name, p), g in zip(model.named_parameters(), grads.values()):
                np.testing.assert_allclose(g[i].detach().numpy(), p.grad.numpy(), rtol=1e-5,
                                           atol=1e-7, err_msg=name)
    ours, theirs = results
    assert list(ours) == list(theirs)
    for k in ours:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-7)


@needs_torch
def test_ensembling_with_stack_module_state_matches_torch():
    outs = []
    for lib in (lg, torch):
        models = [_mlp(lib, seed=s) for s in range(3)]
        params, buffers = lib.func.stack_module_state(models)
        assert list(params) == ["0.weight", "0.bias", "2.weight", "2.bias"]
        assert params["0.weight"].shape == (3, 6, 4) and params["0.weight"].is_leaf
        assert params["0.weight"].requires_grad
        x, _ = _data(lib)

        def f(p, b, x, base=models[0], lib=lib):
            return lib.func.functional_call(base, (p, b), (x,))
        outs.append(lib.func.vmap(f, in_dims=(0, 0, None))(params, buffers, x).detach()
                    .numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-7)
    with pytest.raises(RuntimeError, match="same class"):
        lg.func.stack_module_state([_mlp(lg), lg.nn.Linear(4, 3)])


@needs_torch
@pytest.mark.parametrize("which", ["jacrev", "jacfwd", "hessian"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacobians_match_torch(which, argnums):
    def f(lib):
        if which == "hessian":
            return lambda a, b: (lib.sin(a) * b.sum() + a ** 3 * b[1:]).sum()
        return lambda a, b: lib.tanh(a) * b[:3] + a.sum() * b[1:]
    a = np.array([0.3, -1.2, 0.7])
    b = np.array([1.5, 0.2, -0.4, 2.0])
    got = getattr(lg.func, which)(f(lg), argnums)(lg.tensor(a, dtype=lg.float64),
                                                   lg.tensor(b, dtype=lg.float64))
    want = getattr(torch.func, which)(f(torch), argnums)(torch.tensor(a), torch.tensor(b))
    flat = lambda r: [r] if not isinstance(r, tuple) else [  # noqa: E731
        z for y in r for z in (y if isinstance(y, tuple) else (y,))]
    for g, w in zip(flat(got), flat(want)):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12,
                                   atol=1e-14)


@needs_torch
@pytest.mark.parametrize("case", ["jacfwd2", "jacfwd3", "jvp_of_jvp", "grad_of_jacfwd2",
                                  "vmap_jacfwd2", "requires_grad_input"])
def test_nested_forward_mode_matches_torch(case):
    """Forward mode inside forward mode (the inner one by reverse mode over the outer's
    tangents) gives torch.func's values, and results carry no autograd history unless an
    input that requires grad reaches them."""
    a = np.array([0.3, -1.2, 2.0])
    cube = lambda lib: lambda y: (y ** 3).sum() * lib.sin(y)            # noqa: E731
    if case == "jacfwd2":
        run = lambda lib: lambda x: lib.func.jacfwd(lib.func.jacfwd(cube(lib)))(x)  # noqa
    elif case == "jacfwd3":
        run = lambda lib: lambda x: lib.func.jacfwd(lib.func.jacfwd(lib.func.jacfwd(  # noqa
            lambda y: (lib.exp(y) * y).sum())))(x)
    elif case == "jvp_of_jvp":
        def run(lib):
            inner = lambda x: lib.func.jvp(lambda y: lib.tanh(y) * y, (x,),  # noqa: E731
                                           (lib.ones_like(x),))[1]
            return lambda x: lib.func.jvp(inner, (x,), (lib.ones_like(x) * 0.5,))[1]
    elif case == "grad_of_jacfwd2":
        run = lambda lib: lib.func.grad(lambda x: lib.func.jacfwd(lib.func.jacfwd(  # noqa
            lambda y: (y ** 4 * lib.cos(y)).sum()))(x).sum())
    elif case == "vmap_jacfwd2":
        a = np.linspace(-1, 1, 12).reshape(4, 3)
        run = lambda lib: lib.func.vmap(lib.func.jacfwd(lib.func.jacfwd(  # noqa: E731
            lambda y: (lib.sin(y) * y).sum())))
    else:
        def run(lib):
            def f(x):
                x = x.clone().requires_grad_()
                h = lib.func.jacfwd(lib.func.jacfwd(lambda y: (y ** 3 * y.sum()).sum()))(x)
                assert h.requires_grad
                (g,) = lib.autograd.grad(h.sum(), x)
                return g
            return f
    got = run(lg)(lg.tensor(a, dtype=lg.float64))
    want = run(torch)(torch.tensor(a))
    assert not got.requires_grad
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


@needs_torch
def test_vjp_and_jvp_match_torch():
    a = np.array([0.3, -1.2, 0.7])
    f_l = lambda x, y: (lg.exp(x) * y, x.sum())                        # noqa: E731
    f_t = lambda x, y: (torch.exp(x) * y, x.sum())                     # noqa: E731
    xl, yl = lg.tensor(a, dtype=lg.float64), lg.tensor(a[::-1].copy(), dtype=lg.float64)
    xt, yt = torch.tensor(a), torch.tensor(a[::-1].copy())
    (ol, vl), (ot, vt) = lg.func.vjp(f_l, xl, yl), torch.func.vjp(f_t, xt, yt)
    for o, w in zip(ol, ot):
        np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-14)
    ctl = (lg.ones(3, dtype=lg.float64), lg.tensor(2.0, dtype=lg.float64))
    ctt = (torch.ones(3, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64))
    for g, w in zip(vl(ctl), vt(ctt)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-14)
    (pl, tl), (pt, tt) = (lg.func.jvp(f_l, (xl, yl), (yl, xl)),
                          torch.func.jvp(f_t, (xt, yt), (yt, xt)))
    for g, w in zip(tl, tt):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-14)
    for o, w in zip(pl, pt):
        np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-14)
