"""Activations, losses, distances, misc layers (functional and modules) against torch:
values, dtypes, shapes, input and parameter gradients in float64, reprs, state dicts,
errors, gradcheck and a few compiled-vs-eager checks."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn.functional as LF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

RNG = np.random.default_rng(1)


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [z for y in o for z in _flat(y)]
    return [] if o is None else [o]


def _to(lib, a, grad):
    if isinstance(a, np.ndarray):
        return lib.tensor(a, requires_grad=grad and a.dtype == np.float64)
    return a


def both(fn, arrays, tol=1e-10, grad=True):
    """fn(lib, F, *tensors) on llgrad and torch: outputs and gradients of float64 inputs."""
    res = {}
    for lib, F in ((lg, LF), (torch, TF)):
        xs = [_to(lib, a, grad) for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = _flat(fn(lib, F, *xs))
        diff = [o for o in outs if o.requires_grad]
        if diff:
            sum((o * (k + 1.5)).sum() for k, o in enumerate(diff)).backward()
        res[lib] = ([o.detach().numpy() for o in outs],
                    [x.grad.numpy() if x.grad is not None else None for x in xs
                     if getattr(x, "requires_grad", False)])
    for a, b in zip(*(res[lib][0] for lib in (lg, torch))):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    assert len(res[lg][1]) == len(res[torch][1])
    for a, b in zip(*(res[lib][1] for lib in (lg, torch))):
        if b is None:
            assert a is None or not np.any(a)
            continue
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


X = RNG.standard_normal((3, 4, 5))
KINKS = np.array([-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 2.5, -0.7, 0.3])

ACTIVATIONS = [
    ("hardswish", {}), ("hardsigmoid", {}), ("hardshrink", {}), ("hardshrink", dict(lambd=1.0)),
    ("softshrink", {}), ("softshrink", dict(lambd=1.0)), ("tanhshrink", {}),
    ("threshold", dict(threshold=0.5, value=-2.0)), ("softmin", dict(dim=-1)),
    ("relu6", {}), ("hardtanh", dict(min_val=-0.5, max_val=1.0)), ("celu", dict(alpha=0.5)),
    ("selu", {}), ("silu", {}), ("mish", {}), ("logsigmoid", {}), ("softsign", {}),
    ("softplus", dict(beta=2.0, threshold=3.0)), ("elu", dict(alpha=0.7)),
    ("leaky_relu", dict(negative_slope=0.2)), ("gelu", dict(approximate="tanh")),
    ("gelu", {}), ("rrelu", dict(training=False)), ("rrelu", dict(lower=0.1, upper=0.5)),
    ("glu", {}), ("glu", dict(dim=0)), ("relu", {}),
]


@pytest.mark.parametrize("name,kw", ACTIVATIONS, ids=lambda v: str(v))
@pytest.mark.parametrize("x", [X, KINKS], ids=["random", "kinks"])
def test_functional_activations_match_torch(name, kw, x):
    if name == "glu" and x.shape[kw.get("dim", -1)] % 2:
        x = x[..., :4] if x.ndim == 3 else x[:12]
        if kw.get("dim") == 0:
            x = X[:2]
    # torch's hardsigmoid backward multiplies by 1/6 rounded to float32
    both(lambda L, F, a: getattr(F, name)(a, **kw), [x], tol=1e-7 if name == "hardsigmoid"
         else 1e-10)


INPLACE = [("relu_", {}), ("elu_", dict(alpha=0.5)), ("leaky_relu_", dict(negative_slope=0.3)),
           ("hardtanh_", {}), ("threshold_", dict(threshold=0.1, value=5.0)),
           ("celu_", {}), ("selu_", {}), ("rrelu_", {})]


@pytest.mark.parametrize("name,kw", INPLACE, ids=str)
def test_inplace_functional_forms(name, kw):
    def fn(L, F, a):
        b = a * 1.0
        out = getattr(F, name)(b, **kw)
        assert out is b
        return b
    both(fn, [X])


@pytest.mark.parametrize("name,kw", [("hardswish", {}), ("hardsigmoid", {}), ("silu", {}),
                                     ("threshold", dict(threshold=0.0, value=1.0)),
                                     ("mish", {}), ("relu6", {})], ids=str)
def test_inplace_argument(name, kw):
    def fn(L, F, a):
        b = a * 2.0
        out = getattr(F, name)(b, inplace=True, **kw)
        assert out is b
        return b
    both(fn, [X], tol=1e-7 if name == "hardsigmoid" else 1e-10)


@pytest.mark.parametrize("wshape,xshape", [((1,), (3, 4, 5)), ((4,), (3, 4, 5)), ((1,), (4,)), ((4,), (2, 4)),
                                           ((1,), ())])
def test_prelu_matches_torch(wshape, xshape):
    x = RNG.standard_normal(xshape)
    w = RNG.standard_normal(wshape)
    both(lambda L, F, a, b: F.prelu(a, b), [x, w])


def test_rrelu_training_draws_slopes_in_range():
    lg.manual_seed(0)
    x = lg.tensor(-np.abs(RNG.standard_normal(1000)) - 0.1, requires_grad=True)
    y = LF.rrelu(x, 0.1, 0.3, training=True)
    ratio = (y / x).detach().numpy()
    assert ratio.min() >= 0.1 - 1e-12 and ratio.max() <= 0.3 + 1e-12 and ratio.std() > 0.01
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ratio)
    pos = lg.tensor(np.abs(RNG.standard_normal(10)))
    np.testing.assert_array_equal(LF.rrelu(pos, training=True).numpy(), pos.numpy())


# --------------------------------------------------------------------------------------
# activation modules
# --------------------------------------------------------------------------------------

MODULES = [
    ("PReLU", (), {}), ("PReLU", (4,), dict(init=0.1)), ("GLU", (), {}), ("Hardswish", (), {}),
    ("Hardsigmoid", (), {}), ("Hardshrink", (), dict(lambd=0.3)), ("Softshrink", (0.2,), {}),
    ("Tanhshrink", (), {}), ("Threshold", (0.1, 20.0), {}), ("Softmin", (), dict(dim=1)),
    ("Softmax2d", (), {}), ("LogSoftmax", (), dict(dim=1)), ("Softmax", (), dict(dim=-1)),
    ("RReLU", (0.1, 0.2), {}), ("CELU", (), dict(alpha=2.0)), ("SELU", (), {}), ("SiLU", (), {}),
    ("Mish", (), {}), ("ReLU6", (), {}), ("Hardtanh", (-2.0, 2.0), {}), ("LogSigmoid", (), {}),
    ("Softsign", (), {}), ("Softplus", (), dict(beta=2)), ("ELU", (), dict(alpha=0.5)),
    ("LeakyReLU", (0.1,), {}), ("GELU", (), dict(approximate="tanh")), ("Sigmoid", (), {}),
    ("Tanh", (), {}), ("ReLU", (), dict(inplace=True)), ("Identity", (3,), dict(a=1)),
]


@pytest.mark.parametrize("name,args,kw", MODULES, ids=lambda v: str(v))
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_activation_modules_match_torch(name, args, kw, mode):
    ml, mt = getattr(lg.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ml) == repr(mt)
    getattr(ml, mode)()
    getattr(mt, mode)()
    sl, st = ml.state_dict(), mt.state_dict()
    assert list(sl) == list(st)
    for k in sl:
        np.testing.assert_array_equal(sl[k].numpy(), st[k].numpy())
    ml.double()
    mt.double()
    if name == "RReLU" and mode == "train":
        return                                 # random slopes: test_rrelu_training_...
    x = RNG.standard_normal((3, 4, 6, 2))
    res = {}
    for lib, m in ((lg, ml), (torch, mt)):
        a = lib.tensor(x, requires_grad=True)
        out = m(a * 1.0)
        (out * lib.tensor(np.arange(out.numel()).reshape(out.shape) % 7)).sum().backward()
        res[lib] = [out.detach().numpy(), a.grad.numpy()] + \
            [p.grad.numpy() for p in m.parameters()]
    tol = 1e-7 if name == "Hardsigmoid" else 1e-10     # torch's float32 1/6
    for a, b in zip(res[lg], res[torch]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_activation_errors():
    x = lg.randn(3, 5)
    with pytest.raises(RuntimeError, match="glu"):
        LF.glu(x)
    with pytest.raises(ValueError, match="Softmax2d"):
        lg.nn.Softmax2d()(lg.randn(5))
    with pytest.raises(RuntimeError, match="prelu"):
        LF.prelu(x, lg.ones(4))
    with pytest.raises(RuntimeError, match="channel size = 1"):
        LF.prelu(lg.randn(4), lg.ones(4))
    with pytest.raises(RuntimeError, match="rrelu"):
        LF.rrelu(x, 0.5, 0.1)
    with pytest.raises(TypeError, match="softshrink"):
        LF.softshrink(np.zeros(3))


# --------------------------------------------------------------------------------------
# losses (functional)
# --------------------------------------------------------------------------------------

A = RNG.standard_normal((4, 5))
B = RNG.standard_normal((4, 5))
P = RNG.uniform(0.05, 0.95, (4, 5))
SIGN = np.where(RNG.standard_normal(4) > 0, 1.0, -1.0)
SIGN45 = np.where(RNG.standard_normal((4, 5)) > 0, 1.0, -1.0)
CLS = np.array([1, 0, 4, 2])
ML = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 0, 0], [4, 4, -1, 0, 0]])
VAR = RNG.uniform(0.1, 1.0, (4, 5))
REDS = ["none", "mean", "sum"]

LOSSES = [
    ("huber_loss", [A, B], dict(delta=0.5)),
    ("huber_loss", [A, B], dict(delta=2.0, weight=lg.tensor(P), _tw=torch.tensor(P))),
    ("smooth_l1_loss", [A, B], dict(beta=0.7)),
    ("smooth_l1_loss", [A, B], dict(beta=0.0)),
    ("kl_div", [np.log(P), P], {}),
    ("kl_div", [np.log(P), np.log(P[::-1].copy())], dict(log_target=True)),
    ("poisson_nll_loss", [A, np.abs(B) * 3], {}),
    ("poisson_nll_loss", [P, np.abs(B) * 3], dict(log_input=False, full=True)),
    ("gaussian_nll_loss", [A, B, VAR], {}),
    ("gaussian_nll_loss", [A, B, VAR[:, 0].copy()], dict(full=True)),
    ("gaussian_nll_loss", [A, B, VAR[:, :1].copy()], dict(eps=0.5)),
    ("margin_ranking_loss", [A[:, 0].copy(), B[:, 0].copy(), SIGN], dict(margin=0.3)),
    ("hinge_embedding_loss", [A, SIGN45], dict(margin=0.5)),
    ("soft_margin_loss", [A, SIGN45], {}),
    ("cosine_embedding_loss", [A, B, SIGN], dict(margin=0.2)),
    ("cosine_embedding_loss", [A[0].copy(), B[0].copy(), np.array(-1.0)], {}),
    ("multi_margin_loss", [A, CLS], {}),
    ("multi_margin_loss", [A, CLS], dict(p=2, margin=0.5, weight=lg.tensor(P[0]),
                                         _tw=torch.tensor(P[0]))),
    ("multi_margin_loss", [A[0].copy(), np.array([3])], {}),
    ("multilabel_margin_loss", [A, ML], {}),
    ("multilabel_margin_loss", [A[0].copy(), ML[0].copy()], {}),
    ("multilabel_soft_margin_loss", [A, (P > 0.5).astype(np.float64)], {}),
    ("multilabel_soft_margin_loss", [A, P, P[0].copy()], {}),
    ("triplet_margin_loss", [A, B, P], {}),
    ("triplet_margin_loss", [A, B, P], dict(p=1, swap=True, margin=2.0)),
    ("l1_loss", [A, B], {}), ("mse_loss", [A, B], {}),
    ("binary_cross_entropy", [P, P[::-1].copy()], {}),
    ("binary_cross_entropy_with_logits", [A, P], dict(pos_weight=lg.tensor(P[0]),
                                                      _tpw=torch.tensor(P[0]))),
    ("nll_loss", [np.log(P), CLS], {}),
    ("cross_entropy", [A, CLS], dict(label_smoothing=0.2)),
    ("cross_entropy", [A, P], dict(label_smoothing=0.1)),
    ("cross_entropy", [RNG.standard_normal((2, 3, 4, 2)), RNG.integers(0, 3, (2, 4, 2))],
     dict(ignore_index=1)),
]


def _loss_kw(lib, kw):
    out = {}
    for k, v in kw.items():
        if k in ("_tw", "_tpw"):
            continue
        out[k] = v
    if lib is torch:
        if "_tw" in kw:
            out["weight"] = kw["_tw"]
        if "_tpw" in kw:
            out["pos_weight"] = kw["_tpw"]
    return out


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("name,arrays,kw", LOSSES, ids=lambda v: str(v)[:30])
def test_functional_losses_match_torch(name, arrays, kw, reduction):
    def fn(L, F, *xs):
        if name == "soft_margin_loss":       # torch: no derivative for its target
            xs = (xs[0], xs[1].detach())
        return getattr(F, name)(*xs, reduction=reduction, **_loss_kw(L, kw))
    both(fn, arrays)


def test_kl_div_batchmean_and_legacy_flags():
    both(lambda L, F, a, b: F.kl_div(a, b, reduction="batchmean"), [np.log(P), P])
    both(lambda L, F, a, b: F.smooth_l1_loss(a, b, size_average=False), [A, B])
    with pytest.warns(UserWarning, match="batchmean"):
        LF.kl_div(lg.tensor(A), lg.tensor(P))


@pytest.mark.parametrize("fn,kw", [("cosine_similarity", {}), ("cosine_similarity", dict(dim=0)),
                                   ("pairwise_distance", {}),
                                   ("pairwise_distance", dict(p=1.0, keepdim=True)),
                                   ("pairwise_distance", dict(p=3.0, eps=0.1))], ids=str)
def test_distances_match_torch(fn, kw):
    both(lambda L, F, a, b: getattr(F, fn)(a, b, **kw), [A, B])
    both(lambda L, F, a, b: getattr(F, fn)(a, b, **kw), [A, B[:1].copy()])


def test_cosine_similarity_of_a_zero_vector():
    both(lambda L, F, a, b: F.cosine_similarity(a, b), [np.zeros((2, 3)), A[:2, :3].copy()])


@pytest.mark.parametrize("p", [2, 1, 3.0])
def test_pdist_matches_torch(p):
    both(lambda L, F, a: F.pdist(a, p), [A])


def test_torch_level_forms():
    from llgrad.nn._losses import TORCH_LEVEL
    a, b = lg.tensor(np.log(P)), lg.tensor(P)
    np.testing.assert_allclose(TORCH_LEVEL["kl_div"](a, b, 2).numpy(),
                               torch.kl_div(torch.tensor(np.log(P)), torch.tensor(P), 2).numpy(),
                               atol=1e-12)
    got = TORCH_LEVEL["poisson_nll_loss"](lg.tensor(A), lg.tensor(P), True, False, 1e-8, 0)
    np.testing.assert_allclose(got.numpy(), torch.poisson_nll_loss(
        torch.tensor(A), torch.tensor(P), True, False, 1e-8, 0).numpy())


def _ctc_inputs(t=12, n=3, c=5, s=4, seed=0):
    r = np.random.default_rng(seed)
    logits = r.standard_normal((t, n, c))
    targets = r.integers(1, c, (n, s))
    in_lens = np.array([t, t - 2, t - 3])[:n]
    tgt_lens = np.minimum(np.array([s, 2, 3]), s)[:n]
    return logits, targets, in_lens, tgt_lens


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("layout", ["padded", "concatenated", "unbatched", "logits"])
def test_ctc_loss_matches_torch(reduction, layout):
    logits, targets, in_lens, tgt_lens = _ctc_inputs()
    lp = torch.log_softmax(torch.tensor(logits), -1).numpy()
    if layout == "concatenated":
        flat = np.concatenate([targets[i, :tgt_lens[i]] for i in range(3)])
        both(lambda L, F, x, tg: F.ctc_loss(x, tg, L.tensor(in_lens), L.tensor(tgt_lens),
                                             reduction=reduction), [lp, flat])
    elif layout == "unbatched":
        both(lambda L, F, x, tg: F.ctc_loss(x, tg, L.tensor(12), L.tensor(3),
                                             reduction=reduction),
             [lp[:, 0].copy(), targets[0, :3].copy()])
    elif layout == "logits":
        both(lambda L, F, x, tg: F.ctc_loss(F.log_softmax(x, -1), tg, tuple(in_lens),
                                             tuple(tgt_lens), reduction=reduction),
             [logits, targets])
    else:
        both(lambda L, F, x, tg: F.ctc_loss(x, tg, L.tensor(in_lens), L.tensor(tgt_lens),
                                             reduction=reduction, blank=0), [lp, targets])


def test_ctc_loss_impossible_alignment_and_zero_infinity():
    # 3 repeated labels need at least 5 frames; 3 frames cannot align
    lp = torch.log_softmax(torch.tensor(RNG.standard_normal((3, 1, 4))), -1).numpy()
    tg = np.array([[2, 2, 2]])
    for zi in (False, True):
        both(lambda L, F, x, t: F.ctc_loss(x, t, [3], [3], reduction="sum", zero_infinity=zi),
             [lp, tg], grad=zi)


def test_ctc_loss_gradcheck_through_log_softmax_and_errors():
    logits, targets, in_lens, tgt_lens = _ctc_inputs(t=6, c=4, s=2)
    x = lg.tensor(logits, requires_grad=True)
    tg, il, tl = lg.tensor(targets), lg.tensor(in_lens), lg.tensor(tgt_lens)
    assert lg.autograd.gradcheck(
        lambda z: LF.ctc_loss(LF.log_softmax(z, -1), tg, il, tl), (x,))
    out = LF.ctc_loss(LF.log_softmax(x, -1), tg, il, tl, reduction="none")
    assert type(out.grad_fn).__name__ == "CtcLossBackward0"
    with pytest.raises(RuntimeError, match="input_lengths"):
        LF.ctc_loss(LF.log_softmax(x, -1), tg, lg.tensor([7, 6, 6]), tl)
    with pytest.raises(RuntimeError, match="blank"):
        LF.ctc_loss(LF.log_softmax(x, -1), tg, il, tl, blank=9)


def test_ctc_loss_rejects_bad_lengths_and_targets():
    lp = LF.log_softmax(lg.tensor(RNG.standard_normal((6, 3, 4))), -1)
    targets = np.array([[1, 2, 3], [3, 1, -1], [2, 2, 9]])  # past each length: padding
    in_lens, tgt_lens = [6, 5, 6], [3, 2, 2]
    want = TF.ctc_loss(torch.tensor(lp.numpy()), torch.tensor(np.where(targets < 0, 1, targets)),
                       in_lens, tgt_lens, reduction="none")
    got = LF.ctc_loss(lp, lg.tensor(targets), in_lens, tgt_lens, reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="input_lengths to have value at least 0, but got "
                                           "value -1"):
        LF.ctc_loss(lp, lg.tensor(targets), [6, -1, 6], tgt_lens)
    with pytest.raises(RuntimeError, match="target_lengths to have value at least 0, but got "
                                           "value -2"):
        LF.ctc_loss(lp, lg.tensor(targets), in_lens, [3, -2, 2])
    with pytest.raises(RuntimeError, match="targets to have 3 rows"):
        LF.ctc_loss(lp, lg.tensor(targets[:2]), in_lens, tgt_lens)
    with pytest.raises(IndexError, match="target 9 of sequence 2 is out of range for 4"):
        LF.ctc_loss(lp, lg.tensor(targets), in_lens, [3, 2, 3])
    with pytest.raises(IndexError, match="target -1 of sequence 1"):
        LF.ctc_loss(lp, lg.tensor(np.array([1, 2, 3, -1, 2])), in_lens, [3, 1, 1])
    # the lengths are checked before blank, as before any target value
    with pytest.raises(RuntimeError, match="at most 6"):
        LF.ctc_loss(lp, lg.tensor(targets), [7, 5, 6], [3, 2, 3], blank=4)


def test_ctc_loss_nan_beyond_the_reachable_cells_propagates():
    """A NaN log-probability in a cell no alignment reaches at its step (the 9th label at
    step 1) spreads into the reachable cells of later steps, as the full recursion does
    (and PyTorch's): the pruned and cheap cells of the kernel must keep it."""
    x = RNG.standard_normal((30, 2, 12))
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    targets = np.array([np.arange(1, 11), np.arange(10, 0, -1)])
    lp[1, 0, targets[0, 8]] = np.nan
    for grad in (False, True):
        t = lg.tensor(lp, requires_grad=grad)
        got = LF.ctc_loss(t, lg.tensor(targets), [30, 30], [10, 10], reduction="none")
        want = TF.ctc_loss(torch.tensor(lp), torch.tensor(targets), [30, 30], [10, 10],
                           reduction="none")
        assert np.isnan(want[0].item()) and np.isfinite(want[1].item())
        np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-12)
    # one in a cell that reaches no alignment's end (the first label, a step before the
    # last): the loss stays finite, the beta recursion carries it to earlier steps
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    lp[28, 0, targets[0, 0]] = np.nan
    t, tt = lg.tensor(lp, requires_grad=True), torch.tensor(lp, requires_grad=True)
    got = LF.ctc_loss(t, lg.tensor(targets), [30, 30], [10, 10], reduction="sum")
    want = TF.ctc_loss(tt, torch.tensor(targets), [30, 30], [10, 10], reduction="sum")
    got.backward()
    want.backward()
    # (the steps before the NaN's: after it, PyTorch's gradient keeps some classes finite)
    g, w = t.grad.numpy()[:28], tt.grad.numpy()[:28]
    assert np.isfinite(want.item()) and np.isnan(w[:, 0]).any()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,arrays,kw", [
    ("huber_loss", [A, B], {}), ("multi_margin_loss", [A, CLS], {}),
    ("multilabel_margin_loss", [A, ML], {}), ("cosine_embedding_loss", [A, B, SIGN], {}),
    ("triplet_margin_loss", [A, B, P], {}), ("gaussian_nll_loss", [A, B, VAR], {}),
    ("kl_div", [np.log(P), P], dict(reduction="batchmean"))], ids=lambda v: str(v)[:20])
def test_losses_gradcheck(name, arrays, kw):
    xs = [lg.tensor(a, requires_grad=a.dtype == np.float64) for a in arrays]
    diff = [x for x in xs if x.requires_grad]

    def f(*d):
        it = iter(d)
        args = [next(it) if x.requires_grad else x for x in xs]
        return getattr(LF, name)(*args, **kw)
    assert lg.autograd.gradcheck(f, tuple(diff))


def test_losses_compile_equal_eager():
    a, b = lg.tensor(A), lg.tensor(B)
    t = lg.tensor(SIGN)

    def f(x, y, s):
        return LF.huber_loss(x, y, delta=0.5) + LF.cosine_embedding_loss(x, y, s) + \
            LF.smooth_l1_loss(x, y) + LF.hardswish(x).sum() + LF.soft_margin_loss(x, y)
    np.testing.assert_allclose(lg.compile(f)(a, b, t).numpy(), f(a, b, t).numpy(), rtol=1e-12)


def test_loss_errors():
    a = lg.tensor(A)
    with pytest.raises(ValueError, match="var has negative"):
        LF.gaussian_nll_loss(a, a, lg.full((4, 5), -1.0))
    with pytest.raises(ValueError, match="incorrect size"):
        LF.gaussian_nll_loss(a, a, lg.ones(3))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        LF.multi_margin_loss(a, lg.tensor(CLS), p=3)
    with pytest.raises(IndexError, match="out of bounds"):
        LF.multi_margin_loss(a, lg.tensor([0, 1, 2, 7]))
    with pytest.raises(ValueError, match="not a valid value"):
        LF.huber_loss(a, a, reduction="avg")
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        LF.triplet_margin_with_distance_loss(a, a, a, margin=0)
    with pytest.raises(RuntimeError, match="same dimension"):
        LF.margin_ranking_loss(a, a, lg.tensor(SIGN))
    with pytest.raises(RuntimeError, match="2D"):
        LF.pdist(lg.tensor(A[0]))


# --- kl_div with zero / negative targets, broadcasting, aliasing (xlogy's gradient) ------

T0 = np.array([[0.0, 0.3, 0.0, 1.2, 0.5], [0.7, 0.0, 2.0, 0.0, 0.1],
               [0.0, 0.0, 0.4, 0.9, 0.0], [1.0, 0.2, 0.0, 0.0, 3.0]])
TNEG = T0 - 0.5 * (T0 == 0.3)                         # a negative entry, and zeros
IN = RNG.standard_normal((4, 5))


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 5), (1, 5)), ((1, 5), (4, 5)),
                                    ((4, 1), (4, 5)), ((), ())], ids=str)
def test_kl_div_zero_targets_and_broadcasting_match_torch(shapes, reduction, log_target):
    si, st = shapes
    x = IN[:si[0], :si[1]].copy() if si else np.array(0.37)
    for t in (T0, TNEG):
        t = t[:st[0], :st[1]].copy() if st else np.array(0.0)
        both(lambda L, F, a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
             [x, t])
        both(lambda L, F, a, b: getattr(L.nn, "KLDivLoss")(reduction=reduction,
                                                          log_target=log_target)(a, b), [x, t])


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
def test_kl_div_same_tensor_as_input_and_target(reduction, log_target):
    """torch's ModuleInfo passes one tensor as both: its gradient sums both uses."""
    for v in (np.array(0.6), np.array([[0.0, 0.4], [1.5, 0.0]])):
        both(lambda L, F, a: L.nn.KLDivLoss(reduction=reduction, log_target=log_target)(a, a),
             [v])


def test_kl_div_gradcheck_float64():
    x = lg.tensor(IN, requires_grad=True)
    for lt in (False, True):
        for red in ("none", "sum", "batchmean"):
            assert lg.autograd.gradcheck(
                lambda a: LF.kl_div(a, lg.tensor(T0), reduction=red, log_target=lt), (x,))
    t = lg.tensor(T0 + 0.1, requires_grad=True)          # target gradient where t > 0
    assert lg.autograd.gradcheck(lambda a, b: LF.kl_div(a, b, reduction="sum"), (x, t))


def test_xlogy_gradient_at_zero_matches_torch():
    vals = [0.0, -0.0, 1.0, -1.0, 2.5, np.nan]
    a = np.array([p for p in vals for _ in vals])
    b = np.array([q for _ in vals for q in vals])
    both(lambda L, F, x, y: L.xlogy(x, y), [a, b])
    for s in (0.0, -1.0, 2.0):
        both(lambda L, F, x: L.xlogy(x, s), [a])
        both(lambda L, F, y: L.xlogy(s, y), [b])


def test_soft_margin_loss_refuses_a_target_that_requires_grad():
    x, t = lg.tensor(A, requires_grad=True), lg.tensor(np.sign(B), requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument"):
        LF.soft_margin_loss(x, t)
    with lg.no_grad():
        LF.soft_margin_loss(x, t)
    both(lambda L, F, a, b: F.soft_margin_loss(a, b.detach()), [A, np.sign(B)])


@pytest.mark.parametrize("a,b,kw", [(2.0, -3.0, {"dim": 0}), (0.5, 4.0, {"dim": -1}),
                                    ([1.0, -2.0, 0.5], [0.3, 0.1, -1.0], {"dim": 0, "eps": 0.5})])
def test_cosine_similarity_0d_and_1d_like_torch(a, b, kw):
    got = LF.cosine_similarity(lg.tensor(a, dtype=lg.float64), lg.tensor(b, dtype=lg.float64),
                               **kw)
    want = TF.cosine_similarity(torch.tensor(a, dtype=torch.float64),
                                torch.tensor(b, dtype=torch.float64), **kw)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_cosine_similarity_0d_dim_out_of_range():
    with pytest.raises(IndexError, match="Dimension out of range"):
        LF.cosine_similarity(lg.tensor(1.0), lg.tensor(2.0), dim=1)
