"""Normalization (group, instance, RMS, layer, batch 1-3 d, local response, cross-map LRN,
normalize), resampling (interpolate's modes, upsample modules, grid_sample, affine_grid,
pixel shuffle, fold/unfold) and channel/alpha dropout against PyTorch: values, input and
parameter gradients and running statistics in float64, train and eval modes, gradcheck,
compiled code against eager, and errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad as lg
from test_nn_conv_pool import both, both_modules

torch = pytest.importorskip("torch")
F = lg.nn.functional
RNG = np.random.default_rng(11)


def rn(*shape):
    return RNG.standard_normal(shape)


X4 = rn(3, 6, 4, 5)

# --------------------------------------------------------------------------------------
# Normalization
# --------------------------------------------------------------------------------------

NORMS = [
    ("group_norm", [X4, rn(6), rn(6)], lambda L, x, w, b: L.nn.functional.group_norm(x, 3, w, b)),
    ("group_norm-2d", [rn(4, 6)], lambda L, x: L.nn.functional.group_norm(x, 2, eps=1e-3)),
    ("group_norm-5d", [rn(2, 4, 2, 3, 2), rn(4)],
     lambda L, x, w: L.nn.functional.group_norm(x, 4, w)),
    ("instance_norm", [X4, rn(6), rn(6)],
     lambda L, x, w, b: L.nn.functional.instance_norm(x, weight=w, bias=b)),
    ("instance_norm-1d", [rn(2, 3, 5)], lambda L, x: L.nn.functional.instance_norm(x)),
    ("rms_norm", [X4, rn(4, 5)], lambda L, x, w: L.nn.functional.rms_norm(x, (4, 5), w)),
    ("rms_norm-eps", [X4], lambda L, x: L.nn.functional.rms_norm(x, [5], eps=0.1)),
    ("rms_norm-default-eps", [rn(3, 4) * 1e-9], lambda L, x: L.nn.functional.rms_norm(x, [4])),
    ("layer_norm-nobias", [X4, rn(5)],
     lambda L, x, w: L.nn.functional.layer_norm(x, (5,), w, None)),
    ("local_response_norm", [X4],
     lambda L, x: L.nn.functional.local_response_norm(x, 3, alpha=0.1, beta=0.6, k=2.0)),
    ("local_response_norm-3d", [rn(3, 6, 5)],
     lambda L, x: L.nn.functional.local_response_norm(x, 4)),
    ("local_response_norm-5d", [rn(2, 5, 3, 2, 2)],
     lambda L, x: L.nn.functional.local_response_norm(x, 2, alpha=1.0)),
    ("normalize", [X4], lambda L, x: L.nn.functional.normalize(x)),
    ("normalize-p", [X4], lambda L, x: L.nn.functional.normalize(x, 3.0, -1)),
    ("normalize-zero", [np.zeros((2, 3))], lambda L, x: L.nn.functional.normalize(x, 1, 0)),
]


@pytest.mark.parametrize("name,arrays,fn", NORMS, ids=lambda v: str(v)[:25])
def test_norm_functionals_match_torch(name, arrays, fn):
    both(fn, arrays)


def test_instance_norm_running_statistics():
    rm, rv = rn(6), RNG.uniform(1, 2, 6)
    stats = {}
    for lib in (lg, torch):
        m, v = lib.tensor(rm), lib.tensor(rv)
        x = lib.tensor(X4, requires_grad=True)
        out = lib.nn.functional.instance_norm(x, m, v, momentum=0.3)
        ev = lib.nn.functional.instance_norm(x, m, v, use_input_stats=False)
        stats[lib] = [t.detach().numpy() for t in (out, ev, m, v)]
    for a, b in zip(stats[lg], stats[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_cross_map_lrn2d_forward_matches_torch_and_gradient_is_exact():
    for size in (1, 3, 4, 5):
        x = rn(2, 7, 3, 3)
        ol = lg.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.7, k=1.5)(lg.tensor(x))
        ot = torch.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.7, k=1.5)(torch.tensor(x))
        np.testing.assert_allclose(ol.numpy(), ot.numpy(), rtol=1e-12, atol=1e-12)
    x = lg.tensor(rn(1, 4, 2, 2), requires_grad=True)
    assert lg.autograd.gradcheck(lambda a: lg.nn.CrossMapLRN2d(3, 0.5, 0.7, 1.5)(a), (x,))


NORM_MODULES = [
    ("GroupNorm", (3, 6), dict(), X4),
    ("GroupNorm", (2, 6), dict(affine=False), X4),
    ("GroupNorm", (1, 6), dict(bias=False, eps=1e-3), X4),
    ("InstanceNorm1d", (3,), dict(affine=True), rn(4, 3, 5)),
    ("InstanceNorm1d", (3,), dict(track_running_stats=True), rn(3, 7)),
    ("InstanceNorm2d", (6,), dict(affine=True, track_running_stats=True, momentum=0.3), X4),
    ("InstanceNorm2d", (6,), dict(), X4[0]),
    ("InstanceNorm3d", (2,), dict(affine=True, track_running_stats=True), rn(2, 2, 3, 2, 3)),
    ("LayerNorm", ((4, 5),), dict(bias=False), X4),
    ("LayerNorm", (5,), dict(elementwise_affine=False), X4),
    ("RMSNorm", ((4, 5),), dict(), X4),
    ("RMSNorm", (5,), dict(eps=1e-3, elementwise_affine=False), X4),
    ("BatchNorm1d", (6,), dict(), rn(5, 6)),
    ("BatchNorm1d", (6,), dict(momentum=None, bias=False), rn(5, 6, 3)),
    ("BatchNorm2d", (6,), dict(affine=False), X4),
    ("BatchNorm3d", (3,), dict(momentum=0.2), rn(2, 3, 2, 3, 2)),
    ("BatchNorm3d", (3,), dict(track_running_stats=False), rn(2, 3, 2, 3, 2)),
    ("SyncBatchNorm", (6,), dict(), X4),
    ("LocalResponseNorm", (3,), dict(alpha=0.1, beta=0.5, k=1.5), X4),
]


@pytest.mark.parametrize("cls,args,kw,x", NORM_MODULES, ids=lambda v: str(v)[:30])
def test_norm_modules_match_torch(cls, args, kw, x):
    lm, tm = both_modules(lambda L: getattr(L.nn, cls)(*args, **kw, **(
        {"dtype": L.float64} if cls != "LocalResponseNorm" else {})), x)
    # a second training step moves the running statistics again, as torch
    both_modules(lambda L: getattr(L.nn, cls)(*args, **kw, **(
        {"dtype": L.float64} if cls != "LocalResponseNorm" else {})), x,
        modes=("train", "train", "eval"))
    assert repr(lm).replace("llgrad.", "") == repr(tm).replace("torch.", "")


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (0, 5)), ("BatchNorm1d", (0, 5, 7)),
                                       ("BatchNorm2d", (0, 5, 2, 3)),
                                       ("BatchNorm3d", (0, 5, 2, 1, 2))], ids=str)
@pytest.mark.parametrize("kw", [dict(), dict(momentum=None), dict(eps=1e-3, momentum=0.3,
                                                                  affine=False)], ids=str)
def test_batch_norm_empty_batch_keeps_running_stats(cls, shape, kw):
    """torch's ModuleInfo `zero_batch` sample: an empty batch in training leaves the
    running statistics as they are (only num_batches_tracked counts it)."""
    lm, tm = both_modules(lambda L: getattr(L.nn, cls)(5, dtype=L.float64, **kw),
                          np.zeros(shape), modes=("train", "train", "eval"))
    assert int(lm.num_batches_tracked.item()) == int(tm.num_batches_tracked.item()) == 2
    np.testing.assert_array_equal(lm.running_mean.numpy(), np.zeros(5))
    np.testing.assert_array_equal(lm.running_var.numpy(), np.ones(5))
    # and a real batch afterwards updates them as torch (momentum=None: the average of 3)
    both_modules(lambda L: getattr(L.nn, cls)(5, dtype=L.float64, **kw),
                 rn(*((3,) + shape[1:])), modes=("train", "train"))


def test_batch_norm_one_value_per_channel_raises_as_torch():
    for lib in (lg, torch):
        m = lib.nn.BatchNorm1d(4)
        with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
            m(lib.zeros(1, 4))
        m.eval()
        assert tuple(m(lib.zeros(1, 4)).shape) == (1, 4)


def test_sync_batch_norm_convert_and_any_rank():
    net = lg.nn.Sequential(lg.nn.Conv2d(2, 4, 3), lg.nn.BatchNorm2d(4))
    conv = lg.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert isinstance(conv[1], lg.nn.SyncBatchNorm) and conv[1].weight is net[1].weight
    assert conv[1].running_mean is net[1].running_mean
    x = rn(2, 3, 2, 2, 2, 2)
    both_modules(lambda L: L.nn.SyncBatchNorm(3, dtype=L.float64), x)
    with pytest.raises(ValueError, match="at least 2D"):
        lg.nn.SyncBatchNorm(3)(lg.zeros(3))


def test_norm_gradcheck_and_compiled():
    x = lg.tensor(rn(2, 4, 3), requires_grad=True)
    w = lg.tensor(rn(4), requires_grad=True)
    b = lg.tensor(rn(4), requires_grad=True)
    assert lg.autograd.gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), (x, w, b))
    assert lg.autograd.gradgradcheck(lambda x, w: F.group_norm(x, 2, w), (x, w))
    assert lg.autograd.gradcheck(lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                                 (x, w, b))
    w3 = lg.tensor(rn(3), requires_grad=True)
    assert lg.autograd.gradcheck(lambda x, w: F.rms_norm(x, 3, w), (x, w3))
    assert lg.autograd.gradcheck(lambda x: F.local_response_norm(x, 3, 0.5), (x,))

    def f(x, w, b, w3):
        return (F.group_norm(x, 2, w, b).square().sum() + F.rms_norm(x, 3, w3).sum() +
                F.instance_norm(x, weight=w).exp().sum())
    ins = (x, w, b, w3)
    eager = f(*ins)
    ge = lg.autograd.grad(eager, ins)
    cf = lg.compile(f)
    comp = cf(*ins)
    gc = lg.autograd.grad(comp, ins)
    assert cf.graph_breaks == []
    np.testing.assert_allclose(comp.item(), eager.item(), rtol=1e-10)
    for a, c in zip(gc, ge):
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.group_norm(lg.zeros(2, 6, 3), 4), RuntimeError, "divisible by num_groups"),
    (lambda: lg.nn.GroupNorm(4, 6), ValueError, "must be divisible by num_groups"),
    (lambda: F.rms_norm(lg.zeros(2, 3), (4,)), RuntimeError, "normalized_shape"),
    (lambda: lg.nn.InstanceNorm2d(3, affine=True)(lg.zeros(2, 4, 3, 3)), ValueError,
     "match num_features"),
    (lambda: lg.nn.InstanceNorm1d(3)(lg.zeros(2, 3, 4, 4)), ValueError, "expected 2D or 3D"),
    (lambda: F.instance_norm(lg.zeros(2, 3, 1)), ValueError, "more than 1 spatial"),
    (lambda: lg.nn.BatchNorm3d(3)(lg.zeros(2, 3, 4)), ValueError, "expected 5D"),
    (lambda: F.local_response_norm(lg.zeros(2, 3), 2), ValueError, "3D or higher"),
])
def test_norm_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_instance_norm_warns_on_channel_mismatch_without_affine():
    with pytest.warns(UserWarning, match="does not match num_features"):
        lg.nn.InstanceNorm1d(4)(lg.randn(2, 3, 5))


# --------------------------------------------------------------------------------------
# Resampling
# --------------------------------------------------------------------------------------

R1, R2, R3 = rn(2, 3, 6), rn(2, 3, 5, 7), rn(1, 2, 3, 4, 5)

INTERPOLATE = [
    (R1, dict(size=10)), (R1, dict(scale_factor=1.7)), (R1, dict(scale_factor=0.6,
                                                                 mode="nearest-exact")),
    (R1, dict(size=11, mode="linear")), (R1, dict(size=4, mode="linear", align_corners=True)),
    (R1, dict(scale_factor=2.3, mode="linear", recompute_scale_factor=True)),
    (R1, dict(size=3, mode="area")),
    (R2, dict(size=(9, 4), mode="bilinear")),
    (R2, dict(scale_factor=(1.5, 0.7), mode="bilinear", align_corners=True)),
    (R2, dict(size=(8, 11), mode="bicubic")),
    (R2, dict(scale_factor=1.3, mode="bicubic", align_corners=True)),
    (R2, dict(scale_factor=0.45, mode="bicubic")),
    (R2, dict(size=(3, 3), mode="area")), (R2, dict(scale_factor=2)),
    (R2, dict(size=(4, 10), mode="nearest-exact")),
    (R3, dict(size=(4, 6, 3), mode="trilinear")), (R3, dict(scale_factor=1.5)),
    (R3, dict(size=(2, 2, 2), mode="area")),
    (R3, dict(scale_factor=0.5, mode="trilinear", align_corners=True)),
    (R3, dict(scale_factor=(2.0, 1.0, 0.8), mode="trilinear")),
]


@pytest.mark.parametrize("x,kw", INTERPOLATE, ids=lambda v: str(v)[:40])
def test_interpolate_matches_torch(x, kw):
    both(lambda L, a: L.nn.functional.interpolate(a, **kw), [x])


def test_interpolate_float32_and_upsample_aliases():
    x = rn(1, 2, 5, 6).astype(np.float32)
    for kw in (dict(size=(7, 9), mode="bilinear"), dict(scale_factor=1.5, mode="bicubic"),
               dict(scale_factor=3)):
        ol = F.interpolate(lg.tensor(x), **kw)
        ot = torch.nn.functional.interpolate(torch.tensor(x), **kw)
        assert ol.dtype == lg.float32
        np.testing.assert_allclose(ol.numpy(), ot.numpy(), rtol=1e-5, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, kw in (("upsample", dict(scale_factor=2, mode="bilinear")),
                         ("upsample_nearest", dict(size=(3, 9))),
                         ("upsample_bilinear", dict(scale_factor=1.5))):
            both(lambda L, a: getattr(L.nn.functional, name)(a, **kw), [R2])


@pytest.mark.parametrize("cls,args,kw", [
    ("Upsample", (), dict(scale_factor=2, mode="bilinear")),
    ("Upsample", ((7, 9),), dict(mode="bicubic", align_corners=True)),
    ("Upsample", (), dict(scale_factor=(1.5, 2.0))),
    ("UpsamplingNearest2d", (), dict(scale_factor=2)),
    ("UpsamplingBilinear2d", ((4, 11),), dict()),
    ("PixelShuffle", (2,), dict()), ("PixelUnshuffle", (1,), dict()),
], ids=lambda v: str(v)[:30])
def test_resample_modules_match_torch(cls, args, kw):
    x = rn(2, 4, 5, 7)
    lm, tm = both_modules(lambda L: getattr(L.nn, cls)(*args, **kw), x)
    assert repr(lm) == repr(tm)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d_matches_torch(mode, padding_mode, align_corners):
    grid = RNG.uniform(-1.3, 1.3, (2, 4, 3, 2))
    both(lambda L, x, g: L.nn.functional.grid_sample(x, g, mode, padding_mode, align_corners),
         [R2, grid])


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_3d_matches_torch(mode, padding_mode):
    grid = RNG.uniform(-1.3, 1.3, (1, 2, 3, 2, 3))
    both(lambda L, x, g: L.nn.functional.grid_sample(x, g, mode, padding_mode, True),
         [R3, grid])


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch_and_round_trips(align_corners):
    both(lambda L, t: L.nn.functional.affine_grid(t, (2, 3, 4, 5), align_corners),
         [rn(2, 2, 3)])
    both(lambda L, t: L.nn.functional.affine_grid(t, (2, 3, 4, 5, 1), align_corners),
         [rn(2, 3, 4)])
    # the identity transform samples the input back exactly
    eye = lg.tensor(np.tile(np.eye(2, 3), (2, 1, 1)))
    grid = F.affine_grid(eye, (2, 3, 5, 7), align_corners)
    out = F.grid_sample(lg.tensor(R2), grid, align_corners=align_corners)
    np.testing.assert_allclose(out.numpy(), R2, atol=1e-12)


def test_pixel_shuffle_fold_unfold_match_torch():
    both(lambda L, x: L.nn.functional.pixel_shuffle(x, 2), [rn(2, 8, 3, 4)])
    both(lambda L, x: L.nn.functional.pixel_shuffle(x, 3), [rn(2, 1, 9, 2, 2)])
    both(lambda L, x: L.nn.functional.pixel_unshuffle(x, 2), [rn(3, 4, 6)])
    both(lambda L, x: L.nn.functional.unfold(x, (2, 3), dilation=(1, 2), padding=1,
                                             stride=(2, 1)), [R2])
    both(lambda L, x: L.nn.functional.unfold(x, 2), [R2[0]])
    both(lambda L, x: L.nn.functional.fold(x, (5, 7), (2, 3), dilation=(1, 2), padding=1,
                                           stride=(2, 1)), [rn(2, 18, 15)])
    both(lambda L, x: L.nn.functional.fold(x, (4, 5), 2), [rn(12, 12)])
    lm, tm = both_modules(lambda L: L.nn.Unfold(2, padding=1), R2)
    assert repr(lm) == repr(tm)
    lm, tm = both_modules(lambda L: L.nn.Fold((4, 5), 2, stride=2), rn(2, 8, 4))
    assert repr(lm) == repr(tm)


@pytest.mark.slow
def test_resample_gradcheck():
    x = lg.tensor(rn(1, 2, 3, 4), requires_grad=True)
    g = lg.tensor(RNG.uniform(-1.1, 1.1, (1, 2, 3, 2)), requires_grad=True)
    assert lg.autograd.gradcheck(lambda a: F.interpolate(a, (5, 3), mode="bicubic"), (x,))
    assert lg.autograd.gradcheck(lambda a, b: F.grid_sample(a, b, align_corners=False),
                                 (x, g))
    assert lg.autograd.gradcheck(lambda a, b: F.grid_sample(a, b, "bicubic", "reflection",
                                                            True), (x, g))


def test_resample_compiled_matches_eager():
    x = lg.tensor(rn(1, 2, 3, 4), requires_grad=True)
    g = lg.tensor(RNG.uniform(-1.1, 1.1, (1, 2, 3, 2)), requires_grad=True)

    def f(x, g):
        a = F.interpolate(x, scale_factor=2, mode="bilinear")
        b = F.grid_sample(x, g, padding_mode="border", align_corners=True)
        c = F.fold(F.unfold(x, 2), (3, 4), 2)
        return a.square().sum() + b.sin().sum() + F.pixel_unshuffle(c, 1).sum()
    eager = f(x, g)
    ge = lg.autograd.grad(eager, (x, g))
    cf = lg.compile(f)
    comp = cf(x, g)
    gc = lg.autograd.grad(comp, (x, g))
    assert cf.graph_breaks == []
    np.testing.assert_allclose(comp.item(), eager.item(), rtol=1e-10)
    for a, c in zip(gc, ge):
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.interpolate(lg.zeros(1, 1, 4), size=3, scale_factor=2), ValueError,
     "only one of size or scale_factor"),
    (lambda: F.interpolate(lg.zeros(1, 1, 4)), ValueError, "either size or scale_factor"),
    (lambda: F.interpolate(lg.zeros(1, 1, 4), size=3, mode="bilinear"), NotImplementedError,
     "bilinear mode needs 4D"),
    (lambda: F.interpolate(lg.zeros(1, 1, 4), size=3, align_corners=True), ValueError,
     "align_corners option"),
    (lambda: F.interpolate(lg.zeros(1, 1, 4, 4), size=(3, 3, 3)), ValueError,
     "same number of spatial"),
    (lambda: F.interpolate(lg.zeros(1, 1, 4, 4), size=2, mode="bilinear", antialias=True),
     ValueError, "antialias"),
    (lambda: F.grid_sample(lg.zeros(1, 1, 4, 4), lg.zeros(1, 2, 2, 2), mode="cubic",
                           align_corners=False), ValueError, "expected mode"),
    (lambda: F.grid_sample(lg.zeros(1, 1, 2, 4, 4), lg.zeros(1, 2, 2, 2, 3), mode="bicubic",
                           align_corners=False), RuntimeError, "bicubic"),
    (lambda: F.affine_grid(lg.zeros(1, 3, 3), (1, 1, 4, 4), False), ValueError, "Nx2x3"),
    (lambda: F.pixel_shuffle(lg.zeros(1, 3, 2, 2), 2), RuntimeError, "divisible"),
    (lambda: F.fold(lg.zeros(1, 8, 5), (4, 5), 2), RuntimeError, "sliding blocks"),
    (lambda: F.unfold(lg.zeros(2, 2), 2), NotImplementedError, "3D or 4D"),
])
def test_resample_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_grid_sample_warns_without_align_corners():
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(lg.zeros(1, 1, 3, 3), lg.zeros(1, 2, 2, 2))


# --------------------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,shape,per", [
    ("dropout1d", (8, 16, 5), (8, 16, 1)), ("dropout1d", (16, 5), (16, 1)),
    ("dropout2d", (8, 16, 3, 4), (8, 16, 1, 1)), ("dropout3d", (8, 16, 2, 3, 2),
                                                  (8, 16, 1, 1, 1)),
    ("dropout3d", (16, 2, 3, 2), (16, 1, 1, 1)),
])
def test_channel_dropout_zeroes_whole_channels(name, shape, per):
    lg.manual_seed(0)
    x = lg.ones(*shape, dtype=lg.float64, requires_grad=True)
    out = getattr(F, name)(x, 0.25)
    v = out.detach().numpy()
    scale = v.reshape(per + (-1,))
    assert np.all(scale == scale[..., :1])                         # one value per channel
    assert set(np.unique(v)) <= {0.0, 1 / 0.75}
    frac = (scale[..., 0] == 0).mean()
    assert 0.1 < frac < 0.4
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), v)              # the mask is the gradient
    assert getattr(F, name)(x, 0.25, training=False) is x
    np.testing.assert_array_equal(getattr(F, name)(x, 1.0).detach().numpy(), 0 * v)


def test_dropout2d_3d_input_warns_and_is_channelwise():
    with pytest.warns(UserWarning, match="channel-wise 1D dropout"):
        out = F.dropout2d(lg.ones(4, 6, 5), 0.5)
    v = out.numpy()
    assert np.all(v == v[..., :1])


@pytest.mark.parametrize("name,feature", [("alpha_dropout", False),
                                          ("feature_alpha_dropout", True)])
def test_alpha_dropout_keeps_mean_and_variance(name, feature):
    lg.manual_seed(1)
    x = lg.randn(64, 32, 16, dtype=lg.float64)
    out = getattr(F, name)(x, 0.2, training=True).numpy()
    assert abs(out.mean()) < 0.05 and abs(out.std() - 1) < 0.05
    alpha = 1.7580993408473766
    a = 1 / np.sqrt((alpha ** 2 * 0.2 + 1) * 0.8)
    dropped = np.isclose(out, -alpha * a + alpha * a * 0.2)
    assert 0.15 < dropped.mean() < 0.25
    if feature:
        assert np.all(dropped == dropped[..., :1])
    assert getattr(F, name)(x, 0.2) is x                          # training=False by default


@pytest.mark.parametrize("cls", ["Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                                 "FeatureAlphaDropout"])
def test_dropout_modules(cls):
    ml, mt = getattr(lg.nn, cls)(0.3), getattr(torch.nn, cls)(0.3)
    assert repr(ml) == repr(mt)
    ml.eval()
    x = lg.randn(2, 3, 4) if cls == "Dropout1d" else lg.randn(2, 3, 4, 5)
    assert ml(x) is x
    ml.train()
    assert tuple(ml(x).shape) == tuple(x.shape)
    with pytest.raises(ValueError, match="between 0 and 1"):
        getattr(lg.nn, cls)(1.5)
    with pytest.raises(RuntimeError, match="Expected 2D or 3D"):
        F.dropout1d(lg.ones(2, 2, 2, 2))


def test_batch_norm_empty_1d_input_like_torch():
    for training in (True, False):
        got = lg.nn.functional.batch_norm(lg.zeros(0), lg.zeros(0), lg.zeros(0),
                                          training=training)
        want = torch.nn.functional.batch_norm(torch.zeros(0), torch.zeros(0), torch.zeros(0),
                                              training=training)
        assert tuple(got.shape) == tuple(want.shape) == (0,) and got.dtype is lg.float32
