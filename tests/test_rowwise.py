"""Row-wise (persistent) fusion: a reduction and the elementwise work around it in one
kernel (`passes/rows.py`, `codegen/rowwise.py`). Values and gradients equal eager."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn.functional as F


def _kinds(cf, *args):
    return [k.kind.value for k in cf.inspect(*args).kernels]


def _check(f, shapes, dtype=np.float64, rtol=1e-9, atol=1e-11, grad=True, seed=0):
    rng = np.random.default_rng(seed)
    args = [lg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=grad)
            for s in shapes]
    cf = lg.compile(f)
    out = cf(*args)
    eargs = [a.detach().requires_grad_(grad) for a in args]
    ref = f(*eargs)
    np.testing.assert_allclose(out.detach().numpy().astype(np.float64),
                               ref.detach().numpy().astype(np.float64), rtol=rtol, atol=atol)
    if grad:
        got = lg.autograd.grad(out.sum(), args)
        want = lg.autograd.grad(ref.sum(), eargs)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy().astype(np.float64),
                                       b.numpy().astype(np.float64), rtol=rtol, atol=atol)
    return cf, args


PROGRAMS = {
    "softmax": (lambda x: lg.softmax(x, -1), [(5, 8)]),
    "log_softmax": (lambda x: lg.log_softmax(x, -1), [(7, 9)]),
    "logsumexp": (lambda x: lg.logsumexp(x, -1), [(7, 9)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (16,), w, b, eps=1e-5),
                   [(6, 16), (16,), (16,)]),
    "softmax_then_layer_norm": (
        lambda x, g, b, t: (F.layer_norm(lg.softmax(x, -1) * g + b, (16,), eps=1e-5) * t),
        [(6, 16), (16,), (16,), (6, 16)]),
    "rank3_two_reduced_axes": (lambda x: x - x.amax((1, 2), keepdim=True).exp(),
                               [(3, 4, 5)]),
    "rank3_last_axis": (lambda x: lg.softmax(x * 2.0, -1) + x, [(2, 3, 33)]),
    "mean_and_var_share_a_pass": (lambda x: (x - x.mean(-1, keepdim=True)) /
                                  (x.var(-1, keepdim=True) + 1.0).sqrt(), [(9, 40)]),
    "broadcast_row_input": (lambda x, r: lg.softmax(x + r, -1), [(6, 10), (6, 1)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, lg.tensor([1, 0, 3, 2, 4])),
                      [(5, 6)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_row_programs_equal_eager_f64(name):
    f, shapes = PROGRAMS[name]
    _check(f, shapes)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "softmax_then_layer_norm"])
def test_row_programs_equal_eager_f32(name):
    f, shapes = PROGRAMS[name]
    _check(f, shapes, np.float32, rtol=1e-4, atol=1e-5)


def test_softmax_is_one_row_kernel_and_long_rows_block_their_sums():
    f = lambda x: lg.softmax(x, -1)          # noqa: E731
    cf, args = _check(f, [(4, 5000)], np.float32, rtol=1e-4, atol=1e-7, grad=False)
    assert _kinds(cf, *args) == ["row"]


def test_row_kernel_on_a_non_contiguous_input():
    rng = np.random.default_rng(1)
    base = lg.tensor(rng.standard_normal((12, 10)))
    x = base.t()                                    # (10, 12), strides (1, 10)
    cf = lg.compile(lambda x: lg.softmax(x, -1))
    np.testing.assert_allclose(cf(x).numpy(), lg.softmax(x, -1).numpy(), rtol=1e-12)


def test_nan_and_inf_propagate_like_eager():
    x = lg.tensor([[1.0, float("nan"), 2.0], [float("inf"), 0.0, 1.0],
                   [-float("inf"), -float("inf"), -float("inf")]], dtype=lg.float64)
    f = lambda x: lg.softmax(x, -1)          # noqa: E731
    np.testing.assert_array_equal(np.isnan(lg.compile(f)(x).numpy()), np.isnan(f(x).numpy()))
    np.testing.assert_allclose(lg.compile(f)(x).numpy(), f(x).numpy(), equal_nan=True)


def test_half_precision_rows():
    rng = np.random.default_rng(2)
    for dtype in (lg.float16, lg.bfloat16):
        x = lg.tensor(rng.standard_normal((8, 32)), dtype=dtype)
        f = lambda x: lg.softmax(x, -1)      # noqa: E731
        np.testing.assert_allclose(lg.compile(f)(x).float().numpy(), f(x).float().numpy(),
                                   rtol=1e-2, atol=1e-3)


def test_region_that_would_form_a_cycle_is_cut():
    """A member reading a value computed outside from the region's own outputs cannot
    be in the region: the kernel would have to run before and after that value."""
    def f(x, w):
        s = lg.softmax(x, -1)
        m = s @ w                                   # outside the region, reads it
        return lg.softmax(m, -1) * s.sum(-1, keepdim=True)
    _check(f, [(6, 6), (6, 6)])


def test_merging_a_node_that_reads_the_row_group_into_a_group_that_feeds_it():
    """The loss and gradient of a weighted, smoothed cross-entropy in one graph: the
    weight sum feeds the region's gradient member, and the gathered target log-probs
    (read from the region) were once merged into the weight sum's group, closing a cycle
    through groups that no graph path has."""
    t = lg.tensor([0, 3, 1])
    w = lg.tensor([0.5, 1.5, 1.0, 2.0], dtype=lg.float64)

    def f(x):
        return F.cross_entropy(x, t, w, label_smoothing=0.2)
    x = lg.tensor(np.random.default_rng(0).standard_normal((3, 4)))
    value, grad = lg.compile(lg.value_and_grad(f))(x)
    xe = x.detach().requires_grad_()
    ref = f(xe)
    (ref_grad,) = lg.autograd.grad(ref, [xe])
    np.testing.assert_allclose(value.item(), ref.item(), rtol=1e-12)
    np.testing.assert_allclose(grad.numpy(), ref_grad.numpy(), rtol=1e-10, atol=1e-12)


def test_structure_of_fused_programs():
    """softmax + layer_norm: one row kernel for the forward (its loss a small reduction
    of per-row partials), one for the backward's row work."""
    rng = np.random.default_rng(3)
    x = lg.tensor(rng.standard_normal((64, 32)), requires_grad=True)
    cf = lg.compile(lambda x: (lg.softmax(x, -1) - x.mean(-1, keepdim=True)).exp())
    assert _kinds(cf, x) == ["row"]
    cf = lg.compile(lambda x: (x - x.mean(-1, keepdim=True)) /
                    (x.var(-1, keepdim=True) + 1.0).sqrt())
    assert _kinds(cf, x).count("row") == 1


def test_column_sums_join_the_row_kernel_across_threads():
    """layer_norm's weight and bias gradients (sums over the rows) accumulate inside the
    backward's row kernel, in per-thread partial rows; big enough to split the rows."""
    f, _ = PROGRAMS["layer_norm"]
    g = lambda x, w, b: F.layer_norm(x, (256,), w, b, eps=1e-5)   # noqa: E731
    cf, args = _check(g, [(600, 256), (256,), (256,)], np.float32, rtol=2e-4, atol=2e-4)
    d = next(iter(cf._entries.values())).function.differentiated((0, 1, 2))
    launches = d.backward.executable.schedule.launches
    assert [type(l.spec).__name__ for l in launches].count("RowKernel") == 1
    assert sum(1 for l in launches if l.what == "column sum of the pieces") == 2
