"""Functional transforms (grad, value_and_grad, vjp, jvp, jacrev, jacfwd, hessian, vmap).

JAX's documented examples ported to llgrad, Jacobians against
`lg.autograd.functional`, Hessians against analytic ones, every vmap rule family against
a Python loop + `lg.stack`, and the compositions (per-example gradients, Hessians,
nested vmap). JAX itself is used only if it is importable.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn.functional as NF
from llgrad.dispatch.apply import apply_composite, interpreters
from llgrad.autograd.functional import hessian as AH
from llgrad.autograd.functional import jacobian as AJ
from llgrad.transforms import (BatchedTensor, BatchingError, grad, hessian, jacfwd, jacrev,
                               jvp, pytree, value_and_grad, vjp, vmap)
from llgrad.transforms import batching

RNG = np.random.default_rng(1234)


def t64(*shape, scale=1.0):
    return lg.tensor(RNG.standard_normal(shape) * scale, dtype=lg.float64)


def vals(t):
    return np.asarray(t.detach()._values())


def assert_close(got, want, atol=1e-10, rtol=1e-7):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, type(want)) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, atol, rtol)
        return
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want)
        for k in want:
            assert_close(got[k], want[k], atol, rtol)
        return
    w = vals(want) if isinstance(want, lg.Tensor) else np.asarray(want)
    assert isinstance(got, lg.Tensor), type(got)
    assert tuple(got.shape) == w.shape, (tuple(got.shape), w.shape)
    np.testing.assert_allclose(vals(got).astype(np.float64), w.astype(np.float64),
                               atol=atol, rtol=rtol)


def loop(f, args, in_dims=0, out_dims=0):
    """What vmap must equal: f on each slice, stacked along out_dims."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    n = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    outs = [f(*[a if d is None else a.select(d, i) for a, d in zip(args, dims)])
            for i in range(n)]
    if isinstance(outs[0], tuple):
        ods = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(outs[0])
        return tuple(lg.stack([o[k] for o in outs], ods[k]) for k in range(len(outs[0])))
    return lg.stack(outs, out_dims)


@pytest.fixture(autouse=True)
def _no_leftover_interpreters():
    yield
    assert not interpreters, "a transform left an interpreter on the stack"


# ======================================================================================
# pytrees
# ======================================================================================

def test_pytree_roundtrip_and_order():
    P = namedtuple("P", "a b")
    tree = {"z": [1, (2, None)], "a": P(3, {"k": 4})}
    leaves, d = pytree.flatten(tree)
    assert leaves == [1, 2, 3, 4]      # dict keys in insertion order, None has no leaf
    back = pytree.unflatten(d, leaves)
    assert back == tree and isinstance(back["a"], P) and list(back) == ["z", "a"]
    assert pytree.tree_map(lambda x: x * 10, tree)["z"] == [10, (20, None)]
    with pytest.raises(ValueError, match="4 leaves, got 3"):
        pytree.unflatten(d, [1, 2, 3])


def test_pytree_broadcast_prefix():
    args = ({"w": 1, "b": 2}, [3, 4])
    assert pytree.broadcast_prefix((None, 0), args) == [None, None, 0, 0]
    assert pytree.broadcast_prefix(({"w": 0, "b": None}, 1), args) == [0, None, 1, 1]
    # a dict spec matches by key, in the value's (insertion) order
    assert pytree.broadcast_prefix(({"b": None, "w": 0}, 1), args) == [0, None, 1, 1]
    with pytest.raises(ValueError, match="tree prefix"):
        pytree.broadcast_prefix(({"w": 0}, 1), args)


# ======================================================================================
# grad / value_and_grad (JAX's autodiff cookbook and quickstart examples)
# ======================================================================================

def test_grad_of_tanh_and_higher_orders():
    x = lg.tensor(2.0, dtype=lg.float64)
    t = math.tanh(2.0)
    d1 = 1 - t * t
    d2 = -2 * t * d1
    d3 = -2 * d1 * d1 + 4 * t * t * d1
    assert_close(grad(lg.tanh)(x), d1)                       # 0.070650816
    assert abs(d1 - 0.070650816) < 1e-8
    assert_close(grad(grad(lg.tanh))(x), d2)
    assert_close(grad(grad(grad(lg.tanh)))(x), d3)


def _logistic_data():
    inputs = lg.tensor([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30],
                        [0.74, -2.49, 1.39]], dtype=lg.float64)
    targets = lg.tensor([True, True, False, True]).to(lg.float64)
    return inputs, targets


def _logistic_loss(W, b, inputs, targets):
    preds = lg.sigmoid(inputs @ W + b)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -lg.log(label_probs).sum()


def test_grad_logistic_regression_argnums():
    inputs, targets = _logistic_data()
    W, b = t64(3), lg.tensor(0.3, dtype=lg.float64)
    p = vals(lg.sigmoid(inputs @ W + b))
    resid = p - vals(targets)
    dW = vals(inputs).T @ resid
    db = resid.sum()
    assert_close(grad(_logistic_loss)(W, b, inputs, targets), dW)
    gW, gb = grad(_logistic_loss, argnums=(0, 1))(W, b, inputs, targets)
    assert_close(gW, dW)
    assert_close(gb, db)
    assert_close(grad(_logistic_loss, argnums=1)(W, b, inputs, targets), db)
    assert_close(grad(lambda *a: _logistic_loss(*a), argnums=-3)(W, b, inputs, targets), db)
    value, (gW2, gb2) = value_and_grad(_logistic_loss, (0, 1))(W, b, inputs, targets)
    assert_close(value, _logistic_loss(W, b, inputs, targets))
    assert_close(gW2, dW)


def test_grad_pytree_params_and_kwargs():
    params = {"w": t64(3, 2), "b": t64(2), "extra": [t64(2), None]}
    x = t64(5, 3)

    def loss(p, x, scale=1.0):
        h = lg.tanh(x @ p["w"] + p["b"]) * p["extra"][0]
        return (h ** 2).sum() * scale

    g = grad(loss)(params, x, scale=2.0)
    assert sorted(g) == ["b", "extra", "w"] and g["extra"][1] is None
    ref_in = {k: v for k, v in params.items()}
    w = params["w"].detach().requires_grad_()
    b = params["b"].detach().requires_grad_()
    e = params["extra"][0].detach().requires_grad_()
    lg.autograd.backward(loss({"w": w, "b": b, "extra": [e, None]}, x, scale=2.0))
    assert_close(g["w"], w.grad)
    assert_close(g["b"], b.grad)
    assert_close(g["extra"][0], e.grad)
    assert ref_in["w"].grad is None


def test_grad_leaves_user_tensors_alone():
    x = lg.tensor([0.3, -0.7, 1.1], dtype=lg.float64)
    g = grad(lambda x: (x ** 3).sum())(x)
    assert not x.requires_grad and x.grad is None
    assert not g.requires_grad and g.grad_fn is None          # JAX-like: plain values
    assert_close(g, 3 * vals(x) ** 2)
    with lg.no_grad():                                       # the transform works anyway
        assert_close(grad(lambda x: (x ** 3).sum())(x), 3 * vals(x) ** 2)


def test_grad_composes_with_the_tape():
    """A tensor that requires grad stays connected: the user's backward sees through."""
    x = lg.tensor([0.3, -0.7, 1.1], dtype=lg.float64, requires_grad=True)
    g = grad(lambda x: (x ** 3).sum())(x)
    assert g.requires_grad and x.grad is None
    g.sum().backward()
    assert_close(x.grad, 6 * vals(x))


def test_grad_has_aux_and_unused_inputs():
    x = t64(4)
    g, aux = grad(lambda x: ((x * x).sum(), {"double": x * 2}), has_aux=True)(x)
    assert_close(g, 2 * vals(x))
    assert_close(aux["double"], 2 * vals(x))
    assert not aux["double"].requires_grad
    (v, aux2), g2 = value_and_grad(lambda x: ((x * x).sum(), 7), has_aux=True)(x)
    assert aux2 == 7 and float(v) == pytest.approx(float((vals(x) ** 2).sum()))
    assert_close(grad(lambda x, y: (y * 2).sum())(x, t64(3)), np.zeros(4))


def test_grad_errors():
    x = t64(3)
    with pytest.raises(TypeError, match=r"scalar-output functions. Output had shape: \(3,\)"):
        grad(lambda x: x * 2)(x)
    with pytest.raises(TypeError, match="scalar-output"):
        grad(lambda x: (x.sum(), x.sum()))(x)
    with pytest.raises(TypeError, match="real- or complex-valued inputs.*int64"):
        grad(lambda x: x.sum())(lg.tensor([1, 2]))
    with pytest.raises(TypeError, match="real-valued outputs"):
        grad(lambda x: (x > 0).sum())(x)
    with pytest.raises(ValueError, match="argnums=2 requires at least 3 positional"):
        grad(lambda x: x.sum(), argnums=2)(x)
    with pytest.raises(TypeError, match="argnums must be an int"):
        grad(lambda x: x.sum(), argnums="0")(x)
    with pytest.raises(TypeError, match="has_aux=True requires"):
        grad(lambda x: x.sum(), has_aux=True)(x)
    with pytest.raises(TypeError, match="not a valid input"):
        grad(lambda x: x * 1.0)(2.0)


# ======================================================================================
# vjp / jvp
# ======================================================================================

def test_vjp_multiple_calls_tuple_primals_and_aux():
    x, y = t64(3), t64(3)
    f = lambda a, b: (lg.sin(a) * b, a.sum())
    out, f_vjp = vjp(f, x, y)
    assert_close(out[0], np.sin(vals(x)) * vals(y))
    for ct0 in (t64(3), t64(3)):                 # the pullback may be called many times
        ct1 = lg.tensor(2.0, dtype=lg.float64)
        gx, gy = f_vjp((ct0, ct1))
        assert_close(gx, np.cos(vals(x)) * vals(y) * vals(ct0) + 2.0)
        assert_close(gy, np.sin(vals(x)) * vals(ct0))
    out, f_vjp, aux = vjp(lambda a: (a * 3, "aux"), x, has_aux=True)
    assert aux == "aux" and not out.requires_grad
    (g,) = f_vjp(lg.ones_like(x))
    assert_close(g, np.full(3, 3.0))
    with pytest.raises(ValueError, match="cotangent input to vjp pullback"):
        f_vjp(lg.ones(4, dtype=lg.float64))
    with pytest.raises(ValueError, match="structure"):
        f_vjp((x, x))


def _nonlinear(x, y):
    return lg.stack([x[0] * lg.sin(y[1]) + x[1] ** 2, lg.exp(x[2]) * y[0] - y[1] * x[0]])


def test_jvp_matches_jacobian_times_tangent():
    x, y, tx, ty = t64(3), t64(2), t64(3), t64(2)
    out, tan = jvp(_nonlinear, (x, y), (tx, ty))
    jx, jy = AJ(_nonlinear, (x, y))
    assert_close(out, _nonlinear(x, y))
    assert_close(tan, vals(jx) @ vals(tx) + vals(jy) @ vals(ty))
    assert not tan.requires_grad
    # pytrees, lists and aux
    out, tan, aux = jvp(lambda p: ({"s": p["a"] * p["b"]}, 5), [{"a": x, "b": x}],
                        [{"a": tx, "b": lg.zeros_like(tx)}], has_aux=True)
    assert aux == 5
    assert_close(tan["s"], vals(tx) * vals(x))
    # an output that does not depend on the input has a zero tangent
    _, tan = jvp(lambda a: a * 0 + y.sum(), (x,), (tx,))
    assert_close(tan, np.zeros(3))


def test_jvp_errors():
    x = t64(3)
    with pytest.raises(TypeError, match="must be tuples or lists"):
        jvp(lg.sin, x, x)
    with pytest.raises(ValueError, match="different primal and tangent shapes"):
        jvp(lg.sin, (x,), (t64(4),))
    with pytest.raises(TypeError, match="dtypes must be equal"):
        jvp(lg.sin, (x,), (lg.ones(3),))
    with pytest.raises(TypeError, match="same tree structure"):
        jvp(lambda a, b: a, (x, x), (x,))


# ======================================================================================
# Jacobians and Hessians
# ======================================================================================

def test_jacrev_jacfwd_against_autograd_functional():
    x, y = t64(3), t64(2)
    jx, jy = AJ(_nonlinear, (x, y))
    for jac in (jacrev, jacfwd):
        assert_close(jac(_nonlinear)(x, y), jx)
        got = jac(_nonlinear, argnums=(0, 1))(x, y)
        assert isinstance(got, tuple)
        assert_close(got, (jx, jy))
        assert_close(jac(_nonlinear, argnums=1)(x, y), jy)


def test_jacobian_shapes_and_structures():
    m = t64(2, 3)
    f = lambda m: (lg.tanh(m @ m.t()), m.sum(0))
    for jac in (jacrev, jacfwd):
        j = jac(f)(m)
        assert isinstance(j, tuple)
        assert tuple(j[0].shape) == (2, 2, 2, 3) and tuple(j[1].shape) == (3, 2, 3)
        assert_close(j[0], AJ(lambda m: f(m)[0], m))
        assert_close(j[1], AJ(lambda m: f(m)[1], m))
        jd = jac(lambda p: p["a"] * p["b"].sum())({"a": t64(2), "b": t64(3)})
        assert sorted(jd) == ["a", "b"] and tuple(jd["b"].shape) == (2, 3)
    j, aux = jacrev(lambda x: (x * 2, "hi"), has_aux=True)(t64(3))
    assert aux == "hi"
    assert_close(j, 2 * np.eye(3))
    j, aux = jacfwd(lambda x: (x * 2, x.sum()), has_aux=True)(t64(3))
    assert_close(j, 2 * np.eye(3))
    assert tuple(aux.shape) == ()


def _rosenbrock(x):
    return ((1 - x[:-1]) ** 2).sum() + (100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


def _rosenbrock_views(x):
    n = x.shape[0]
    a, b = x.narrow(0, 0, n - 1), x.narrow(0, 1, n - 1)
    return ((1 - a) ** 2).sum() + (100 * (b - a ** 2) ** 2).sum()


def _rosenbrock_hessian(x):
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 2 - 400 * (x[i + 1] - x[i] ** 2) + 800 * x[i] ** 2
        h[i, i + 1] -= 400 * x[i]
        h[i + 1, i] -= 400 * x[i]
        h[i + 1, i + 1] += 200
    return h


def test_hessian_of_rosenbrock_float64():
    xv = np.array([0.5, -0.3, 1.2, 0.8, -1.1])
    x = lg.tensor(xv, dtype=lg.float64)
    want = _rosenbrock_hessian(xv)
    h = hessian(_rosenbrock)(x)
    assert h.dtype == lg.float64 and tuple(h.shape) == (5, 5) and not h.requires_grad
    assert_close(h, want, atol=1e-9)
    # the mixed compositions agree (written with narrow: see the report on indexing)
    assert_close(jacrev(jacfwd(_rosenbrock_views))(x), want, atol=1e-9)
    assert_close(jacfwd(jacrev(_rosenbrock_views))(x), want, atol=1e-9)


# Forward mode under reverse mode through indexing and saved outputs (these were gaps in
# llgrad's core once; they guard the fixes in functions/indexing.py and tape/node.py).
CORE_GAPS = {
    "getitem keeps the tangent when it also records for backward":
        lambda x: jacrev(jacfwd(_rosenbrock))(x),
    "index_backward (the scatter of x[...]'s vjp) carries a tangent":
        lambda x: jacfwd(jacrev(_rosenbrock))(x),
}


@pytest.mark.parametrize("gap", sorted(CORE_GAPS))
def test_forward_mode_through_indexing(gap):
    xv = np.array([0.5, -0.3, 1.2, 0.8, -1.1])
    assert_close(CORE_GAPS[gap](lg.tensor(xv, dtype=lg.float64)), _rosenbrock_hessian(xv),
                 atol=1e-9)


def test_forward_over_reverse_through_saved_outputs():
    """tanh's backward reads its output: the saved output must carry the tangent."""
    x = t64(3)
    f = lambda x: (lg.tanh(x) ** 2).sum()
    assert_close(jacfwd(jacrev(f))(x), AH(f, x), atol=1e-9)


def test_mixed_mode_through_composites():
    """Reverse-over-forward through composite ops (norm, softmax, logsumexp)."""
    x = t64(4)
    f = lambda x: x.norm() * (lg.softmax(x, 0) * x).sum() + lg.logsumexp(x * x, 0)
    want = AH(f, x)
    assert_close(hessian(f)(x), want, atol=1e-9)
    assert_close(jacrev(jacfwd(f))(x), want, atol=1e-9)


def test_jacfwd_batched_tangents_through_vjp_only_ops():
    """Ops known only by a vjp (amax, prod) get batched tangents per basis vector."""
    x = t64(5)
    f = lambda x: lg.softmax(x, 0) * x.prod() + x.amax()
    basis = lg.eye(5, dtype=lg.float64)
    cols = vmap(lambda t: jvp(f, (x,), (t,))[1])(basis)       # the vmap path itself
    assert_close(cols.t(), AJ(f, x))
    assert_close(jacfwd(f)(x), AJ(f, x))


def test_jacfwd_falls_back_to_a_loop():
    """Forward mode through indexing reads a batched tangent's memory: jacfwd sweeps the
    basis with a loop then, with the same result."""
    x = t64(4)
    f = lambda x: x[lg.tensor([2, 0, 2])] * lg.sin(x[1])
    assert_close(jacfwd(f)(x), AJ(f, x))
    assert_close(jacrev(f)(x), AJ(f, x))


# ======================================================================================
# vmap: one rule family at a time, against a loop
# ======================================================================================

X = t64(4, 3, 5)
V5 = t64(5)
W52 = t64(5, 2)
IDX = lg.tensor([2, 0, 2])
PAIRS = lg.tensor([[0, 2], [1, 1], [2, 0], [0, 1]])

CASES = {
    # elementwise (unbatched operands of lower and higher rank, scalars, dtypes)
    "unary": (lambda x: lg.exp(lg.tanh(x)), (X,), 0),
    "binary_lower_rank": (lambda x: x * V5 - 1.5, (X,), 0),
    "binary_higher_rank": (lambda x: x[0] + X[0:2, :1], (X,), 0),
    "binary_in_dims": (lambda a, b: lg.maximum(a, b), (X, t64(3, 4, 5)), (0, 1)),
    "scalar_lhs": (lambda x: 2.0 ** x / (1 + x * x), (X,), 0),
    "where": (lambda x: lg.where(x > 0, x, V5), (X,), 0),
    "cast_compare": (lambda x: (x > 0).to(lg.float64) + x.to(lg.float32).to(lg.float64), (X,), 0),
    "clamp": (lambda x: x.clamp(-0.5, 0.5), (X,), 0),
    # reductions
    "sum_all": (lambda x: x.sum(), (X,), 0),
    "sum_dims_keepdim": (lambda x: x.sum((0, 1), keepdim=True), (X,), 0),
    "amax_neg": (lambda x: x.amax(-1), (X,), 0),
    "prod": (lambda x: x.prod(0), (X,), 0),
    "scalar_reduce": (lambda x: x.sum() + x.amax(), (t64(4),), 0),
    "argmax": (lambda x: x.argmax(1, keepdim=True), (X,), 0),
    "argmax_flat": (lambda x: x.argmax(), (X,), 0),
    # composites with axes
    "mean_var_std": (lambda x: x.mean() + x.var(1) + x.std(0, keepdim=True).sum(), (X,), 0),
    "logsumexp_norm": (lambda x: lg.logsumexp(x, -1) + x.norm(dim=1), (X,), 0),
    "softmax": (lambda x: lg.softmax(x, -1) + lg.log_softmax(x, 0), (X,), 0),
    "softmax_0d": (lambda x: lg.softmax(x, 0), (t64(4),), 0),
    # movement
    "reshape_view": (lambda x: x.reshape(5, -1).view(15).flatten(), (X,), 0),
    "squeeze_unsqueeze": (lambda x: x.unsqueeze(1).unsqueeze(-1).squeeze(), (X,), 0),
    "permute_t": (lambda x: x.permute(1, 0).t().T, (X,), 0),
    "expand": (lambda x: x[:1].expand(2, 3, 5) + x[0].expand(2, 1, 5), (X,), 0),
    "narrow_select": (lambda x: x.narrow(1, 1, 3).select(0, 2), (X,), 0),
    "split_chunk_cat": (lambda x: lg.cat(list(x.chunk(2, 1))[::-1] + list(x.split(2, 1)), 1),
                        (X,), 0),
    "cat_unbatched": (lambda x: lg.cat([x, X[0], x * 2], 0), (X,), 0),
    "stack": (lambda x: lg.stack([x, x * 2], -1), (X,), 0),
    "pad": (lambda x: lg.pad_dims(x, (1, 0), (0, 2), (0, 1), 0.5), (X,), 0),
    "flip": (lambda x: x.flip(1), (X,), 0),
    # matmul
    "matmul_weight": (lambda x: x @ W52, (X,), 0),
    "matmul_left_unbatched": (lambda x: W52.t() @ x.t(), (X,), 0),
    "matmul_both": (lambda a, b: a @ b, (X, t64(4, 5, 2)), 0),
    "matmul_vec": (lambda a: a @ V5, (X,), 0),
    "matmul_dot": (lambda a, b: a @ b, (t64(4, 5), t64(5, 4)), (0, 1)),
    "matmul_batch_dims": (lambda a: a @ W52.unsqueeze(0), (t64(4, 2, 3, 5),), 0),
    # indexing: batched x, batched index tensors, both
    "index_basic": (lambda x: lg.cat([x[1:, ::2].flatten(), x[None, ..., 1:3].flatten()]),
                    (X,), 0),
    "index_int": (lambda x: x[1], (X,), 0),
    "index_adv": (lambda x: x[IDX][:, :3] + x[:, lg.tensor([0, 4, 1])].t(), (X,), 0),
    "index_adv_nonadjacent": (lambda x: x[IDX, :, lg.tensor([0, 1, 4])], (t64(4, 3, 2, 5),), 0),
    "index_mask": (lambda x: x[:, lg.tensor([True, False, True, False, True])], (X,), 0),
    "index_batched_idx": (lambda x, i: x[i] * 1.0, (X, PAIRS), 0),
    "index_batched_0d": (lambda x, i: x[:, i], (X, lg.tensor([0, 2, 1, 4])), 0),
    "index_batched_nonadjacent": (lambda x, i: x[i, :, lg.tensor([0, 1])],
                                  (t64(4, 3, 2, 5), PAIRS.clamp(0, 2)), 0),
    "index_batched_after_slice": (lambda x, i: x[None, :, i],
                                  (t64(4, 3, 2, 5), PAIRS.clamp(0, 1)), 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_rules_match_a_loop(name):
    f, args, in_dims = CASES[name]
    got = vmap(f, in_dims)(*args)
    want = loop(f, args, in_dims)
    assert got.dtype == want.dtype
    assert_close(got, want, atol=1e-9)


def test_vmap_batched_index_into_unbatched_tensor():
    """`table[i]` with a batched `i`: the rule behind `batching.getitem` (the hook for
    functions.indexing.getitem)."""
    table = t64(6, 3)
    idx = lg.tensor([[0, 5], [2, 2], [1, 0]])
    got = vmap(lambda i: batching.getitem(table, i))(idx)
    assert_close(got, loop(lambda i: table[i], (idx,)))


def _nll(x, t, w=None, reduction="mean"):
    ops = (x, t) if w is None else (x, t, w)
    return apply_composite("nll_loss", ops, {"reduction": reduction, "ignore_index": -100,
                                             "has_weight": w is not None}, "NllLossBackward0")


def _emb(w, i, padding_idx=None):
    return apply_composite("embedding", (w, i), {"padding_idx": padding_idx,
                                                 "scale_grad_by_freq": False},
                           "EmbeddingBackward0")


IMG = t64(3, 2, 2, 6, 6)
WL = t64(3, 5)
WC = t64(4, 2, 3, 3)
BC = t64(4)
LOGP = lg.log_softmax(t64(4, 6, 5), -1)
TGT = lg.tensor(np.where(RNG.random((4, 6)) < 0.3, -100, RNG.integers(0, 5, (4, 6))))
CLASSW = lg.tensor(RNG.random(5) + 0.5, dtype=lg.float64)
EMB_IDX = lg.tensor(RNG.integers(0, 7, (4, 5)))

NN_CASES = {
    "linear": (lambda x: NF.linear(x, WL, BC[:3]) + NF.linear(x[0], WL), (X,), 0),
    "linear_batched_weight": (lambda x, w: NF.linear(x, w, BC[:3]), (X, t64(4, 3, 5)), 0),
    "mse_bce": (lambda a, b: NF.mse_loss(a, b) + NF.binary_cross_entropy_with_logits(
        a, lg.sigmoid(b), reduction="sum"), (X, t64(4, 3, 5)), 0),
    "layer_norm": (lambda x, g: NF.layer_norm(x, (5,), g, V5) + NF.layer_norm(x, (3, 5)),
                   (X, t64(4, 5)), (0, 0)),
    "conv2d": (lambda x: NF.conv2d(x, WC, BC, padding=1), (IMG,), 0),
    "conv2d_3d_input": (lambda x: NF.conv2d(x, WC, BC, stride=2), (t64(3, 2, 6, 6),), 0),
    "conv2d_batched_weight": (lambda x, w, b: NF.conv2d(x, w, b),
                              (IMG, t64(3, 4, 2, 3, 3), t64(3, 4)), 0),
    "conv2d_batched_weight_groups": (lambda x, w: NF.conv2d(x, w, None, groups=2),
                                     (t64(3, 2, 4, 5, 5), t64(3, 6, 2, 3, 3)), 0),
    "max_pool2d": (lambda x: NF.max_pool2d(x, 3, stride=2, padding=1), (IMG,), 0),
    "nll_mean_weight_ignore": (lambda x, t: _nll(x, t, CLASSW), (LOGP, TGT), 0),
    "nll_sum_none": (lambda x, t: _nll(x, t, reduction="sum") + _nll(x, t, reduction="none"),
                     (LOGP, lg.tensor(RNG.integers(0, 5, (4, 6)))), 0),
    "nll_1d": (lambda x, t: _nll(x, t, CLASSW), (LOGP[:, 0], TGT[:, 0].clamp(0, 4)), 0),
    "nll_unbatched_input": (lambda t: _nll(LOGP[0], t), (TGT.clamp(0, 4),), 0),
    "embedding_batched_idx": (lambda i: _emb(W52, i), (EMB_IDX.clamp(0, 4),), 0),
    "embedding_batched_weight": (lambda w, i: _emb(w, i, padding_idx=2),
                                 (t64(4, 7, 3), EMB_IDX), 0),
}


@pytest.mark.parametrize("name", sorted(NN_CASES))
def test_vmap_nn_composites_match_a_loop(name):
    f, args, in_dims = NN_CASES[name]
    assert_close(vmap(f, in_dims)(*args), loop(f, args, in_dims), atol=1e-9)


def test_vmap_is_batched_not_a_loop():
    """The traced IR of a vmapped function has one matmul for the whole batch."""
    from llgrad.tracer import make_ir
    w = t64(3, 2)
    g = make_ir(vmap(lambda x: lg.tanh(x @ w).sum()))(t64(7, 3))
    ops = [n.op for n in g.nodes]
    assert ops.count("matmul") == 1 and ops.count("sum") == 1
    assert tuple(g.outputs[0].type.shape) == (7,)


# ======================================================================================
# vmap: in_dims / out_dims, nesting, errors
# ======================================================================================

def test_vmap_in_dims_variants():
    a, b = t64(3, 4), t64(4, 3)
    assert_close(vmap(lambda x: x * 2, 1)(a), loop(lambda x: x * 2, (a,), 1))
    assert_close(vmap(lambda x: x * 2, -1)(a), (vals(a) * 2).T)
    assert_close(vmap(lambda x, y: x + y, (0, 1))(a, b), vals(a) + vals(b).T)
    assert_close(vmap(lambda x, y: x + y, (None, 0))(a[0], b.t()), vals(a)[0] + vals(b).T)
    p = {"w": t64(2, 5), "b": t64(5)}
    got = vmap(lambda p, x: x @ p["w"] + p["b"], ({"w": None, "b": 0}, 0))(
        {"w": p["w"], "b": t64(3, 5)}, t64(3, 2))
    assert tuple(got.shape) == (3, 5)
    got = vmap(lambda x, *, scale: x * scale)(a, scale=t64(3, 1))      # kwargs: axis 0
    assert tuple(got.shape) == (3, 4)
    assert_close(vmap(lambda t: t[0] * t[1], (0,))((a, a)), vals(a) ** 2)


def test_vmap_out_dims_variants():
    a = t64(3, 4)
    f = lambda x: (x * 2, x.sum(), a[0] * 1.0)
    o1, o2, o3 = vmap(f, 0, (1, 0, None))(a)
    assert_close(o1, (vals(a) * 2).T)
    assert_close(o2, vals(a).sum(1))
    assert_close(o3, vals(a)[0])                   # unbatched output kept with None
    o = vmap(lambda x: a[0] * 1.0)(a)              # unbatched output broadcast along 0
    assert_close(o, np.broadcast_to(vals(a)[0], (3, 4)))
    assert_close(vmap(lambda x: x, out_dims=-1)(a), vals(a).T)
    assert vmap(lambda x: 5, out_dims=None)(a) == 5
    assert_close(vmap(lambda x: 5)(a), np.full(3, 5))
    d = vmap(lambda x: {"s": x.sum(), "p": [x * 1]})(a)
    assert_close(d["s"], vals(a).sum(1))
    assert_close(d["p"][0], vals(a))


def test_nested_vmap():
    a, b = t64(3), t64(4)
    outer = vmap(vmap(lambda x, y: x * y, (None, 0)), (0, None))(a, b)
    assert_close(outer, np.outer(vals(a), vals(b)))
    m = t64(2, 3, 4)
    got = vmap(lambda mm: vmap(lambda c: c.sum() * mm.sum(), 1)(mm))(m)
    assert_close(got, loop(lambda mm: mm.sum(0) * mm.sum(), (m,)))
    # batched matmul of a batch of batches, inner batch on a different axis
    x, w = t64(2, 5, 3), t64(2, 3, 4)
    got = vmap(lambda xi, wi: vmap(lambda r: r @ wi, 1, 1)(xi.t()))(x, w)
    assert_close(got, np.einsum("bnk,bkm->bmn", vals(x), vals(w)))


def test_vmap_errors():
    ones = lg.ones
    with pytest.raises(ValueError, match="(?s)inconsistent sizes.*argument 0 of type float32"):
        vmap(lambda a, b: a + b)(ones(3), ones(4))
    with pytest.raises(ValueError, match="axis 2, which implies that its rank should be at "
                                         "least 3, but is only 2"):
        vmap(lambda a: a, 2)(ones(3, 4))
    with pytest.raises(ValueError, match="rank should be at least 1, but is only 0"):
        vmap(lambda a: a)(lg.tensor(1.0))
    with pytest.raises(ValueError, match="tree prefix"):
        vmap(lambda a: a, (0, 0))(ones(3))
    with pytest.raises(TypeError, match="in_dims must be an int, None, or a tuple"):
        vmap(lambda a: a, [0])(ones(3))
    with pytest.raises(TypeError, match="in_dims must be an int"):
        vmap(lambda a: a, 1.5)(ones(3))
    with pytest.raises(ValueError, match="at least one non-None"):
        vmap(lambda a: a, None)(ones(3))
    with pytest.raises(ValueError, match="mapped output but out_dims is None"):
        vmap(lambda a: a, out_dims=None)(ones(3))
    with pytest.raises(ValueError, match="out_dims 3 is out of range"):
        vmap(lambda a: a, out_dims=3)(ones(3, 2))
    with pytest.raises(ValueError, match="cannot be broadcast"):        # logical shapes
        vmap(lambda a: a + ones(4))(ones(2, 3))
    with pytest.raises(TypeError, match="expected a callable"):
        vmap(3)


def test_vmap_unsupported_operations_raise_clearly():
    x = t64(3, 4)
    with pytest.raises(BatchingError, match=r"item\(\) of a batched tensor"):
        vmap(lambda a: a.sum().item())(x)
    with pytest.raises(BatchingError, match="bool"):
        vmap(lambda a: a if a.sum() > 0 else -a)(x)
    with pytest.raises(BatchingError, match="reads the memory of a batched tensor"):
        vmap(lambda a: a.add_(1))(x)
    with pytest.raises(BatchingError, match="x\\[...\\] = v"):
        vmap(lambda a: a.__setitem__(0, 1.0))(x)
    with pytest.raises(BatchingError, match="requires_grad_"):
        vmap(lambda a: a.requires_grad_())(x)
    with pytest.raises(BatchingError, match="no batching rule for op 'uniform'"):
        batching.rule_for("uniform")
    leaked = []
    vmap(lambda a: leaked.append(a) or a)(x)
    assert isinstance(leaked[0], BatchedTensor) and "BatchedTensor(level=" in repr(leaked[0])
    with pytest.raises(BatchingError, match="escaped its vmap"):
        leaked[0] + 1
    with pytest.raises(ZeroDivisionError):          # the stack unwinds on user errors
        vmap(lambda a: 1 / 0)(x)


# ======================================================================================
# compositions
# ======================================================================================

def test_per_example_gradients_linear_model():
    """JAX's per-example gradients: vmap(grad(loss), in_axes=(None, None, 0, 0))."""
    inputs, targets = _logistic_data()
    W, b = t64(3), lg.tensor(0.1, dtype=lg.float64)
    loss = lambda W, b, x, y: _logistic_loss(W, b, x.unsqueeze(0), y.unsqueeze(0))
    gW, gb = vmap(grad(loss, argnums=(0, 1)), in_dims=(None, None, 0, 0))(W, b, inputs,
                                                                         targets)
    resid = vals(lg.sigmoid(inputs @ W + b)) - vals(targets)
    assert_close(gW, vals(inputs) * resid[:, None])
    assert_close(gb, resid)
    assert W.grad is None and not gW.requires_grad


def test_per_example_gradients_pytree_and_conv():
    params = {"w": t64(3, 2), "b": t64(2)}
    mlp = lambda p, x, y: ((lg.tanh(x @ p["w"] + p["b"]) - y) ** 2).sum()
    xs, ys = t64(6, 3), t64(6, 2)
    pe = vmap(grad(mlp), (None, 0, 0))(params, xs, ys)
    ref = [grad(mlp)(params, xs[i], ys[i]) for i in range(6)]
    assert_close(pe, {k: lg.stack([r[k] for r in ref]) for k in params})

    wc, img, tg = t64(3, 2, 3, 3), t64(5, 2, 6, 6), lg.tensor(RNG.integers(0, 3, (5,)))

    def cnn_loss(w, x, t):
        o = NF.max_pool2d(NF.conv2d(x.unsqueeze(0), w, padding=1), 2).mean((2, 3))
        return _nll(lg.log_softmax(o, -1), t.unsqueeze(0))

    got = vmap(grad(cnn_loss), (None, 0, 0))(wc, img, tg)
    assert_close(got, lg.stack([grad(cnn_loss)(wc, img[i], tg[i]) for i in range(5)]))


def test_grad_inside_vmap_with_batched_closure():
    a, w0 = t64(4, 3), t64(3)
    got = vmap(lambda ai: grad(lambda w: lg.sin(ai * w).sum())(w0))(a)
    assert_close(got, np.cos(vals(a) * vals(w0)) * vals(a))
    got = vmap(lambda ai: jacfwd(lambda w: lg.sin(ai * w))(w0))(a)
    assert_close(got, lg.stack([AJ(lambda w: lg.sin(a[i] * w), w0) for i in range(4)]))


def test_vmap_of_jacobians_and_hessians():
    xs = t64(4, 3)
    f = lambda x: lg.sin(x) * x.sum() + lg.softmax(x, 0) * 3
    h = lambda x: (lg.tanh(x) ** 2).sum() * x.norm()
    jref = lg.stack([AJ(f, xs[i]) for i in range(4)])
    assert_close(vmap(jacfwd(f))(xs), jref)
    assert_close(vmap(jacrev(f))(xs), jref)
    assert_close(vmap(hessian(h))(xs), lg.stack([AH(h, xs[i]) for i in range(4)]), atol=1e-9)
    ts = t64(4, 3)
    got = vmap(lambda x, t: jvp(f, (x,), (t,))[1])(xs, ts)
    assert_close(got, np.einsum("bij,bj->bi", vals(jref), vals(ts)))
    got = vmap(lambda t: jvp(f, (xs[1],), (t,))[1])(ts)                # batched tangent only
    assert_close(got, vals(ts) @ vals(AJ(f, xs[1])).T)


def test_grad_of_vmap_and_back():
    x = t64(4, 3)
    assert_close(grad(lambda x: vmap(lambda r: (r ** 3).sum())(x).sum())(x), 3 * vals(x) ** 2)
    assert_close(grad(lambda x: vmap(grad(lambda r: (r ** 3).sum()))(x).sum())(x), 6 * vals(x))
    # the tape sees through vmap too
    xr = x.detach().requires_grad_()
    vmap(lambda r: lg.exp(r).sum())(xr).sum().backward()
    assert_close(xr.grad, np.exp(vals(x)))


def test_against_jax_if_available():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    xv = np.array([0.5, -0.3, 1.2, 0.8])
    jf = lambda x: jnp.sum((1 - x[:-1]) ** 2) + jnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2)
    x = lg.tensor(xv, dtype=lg.float64)
    assert_close(hessian(_rosenbrock)(x), np.asarray(jax.hessian(jf)(xv)), atol=1e-9)
    xs = RNG.standard_normal((3, 4))
    assert_close(vmap(grad(_rosenbrock))(lg.tensor(xs, dtype=lg.float64)),
                 np.asarray(jax.vmap(jax.grad(jf))(xs)), atol=1e-9)
