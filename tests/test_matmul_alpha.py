"""A scalar factor of a product's operand folds into gemm's alpha (`fusion.fold_scale`):
`(x * s) @ w` runs as one BLAS call reading x, never writing the scaled copy. Values equal
eager; anything the fold cannot express keeps its own kernel."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg


def _launches(cf, *args):
    return [str(l.body) if hasattr(l, "body") else str(l) for l in
            cf.inspect(*args).schedule.launches]


def _inputs(dtype, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [lg.tensor(rng.standard_normal(s), dtype=dtype) for s in shapes]


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64])
@pytest.mark.parametrize("case", ["mul_left", "mul_right", "div_pow2", "both", "batched"])
def test_scaled_operands_fold_into_alpha(dtype, case):
    fns = {
        "mul_left": (lambda x, w: (x * 0.5) @ w, (24, 16), (16, 8), "0.5 * "),
        "mul_right": (lambda x, w: x @ (3.0 * w), (24, 16), (16, 8), "3.0 * "),
        "div_pow2": (lambda x, w: (x / 8.0) @ w.t(), (24, 16), (8, 16), "0.125 * "),
        "both": (lambda x, w: (x * 2.0) @ (w * 0.25), (24, 16), (16, 8), "0.5 * "),
        "batched": (lambda x, w: (x * 0.5) @ w, (3, 24, 16), (3, 16, 8), "0.5 * "),
    }
    f, sa, sb, scale = fns[case]
    x, w = _inputs(dtype, sa, sb)
    cf = lg.compile(f)
    got = cf(x, w)
    tol = 1e-5 if dtype is lg.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), f(x, w).numpy(), rtol=tol, atol=tol)
    bodies = _launches(cf, x, w)
    assert len(bodies) == 1 and scale in bodies[0], bodies


def test_a_scaled_value_read_by_two_products_folds_into_both():
    q, k = _inputs(lg.float64, (16, 8), (16, 8))
    q.requires_grad_()
    k.requires_grad_()

    def f(q, k):
        s = q * 0.125
        return ((s @ k.t()) * (s.t() @ k).sum()).sum()
    cf = lg.compile(lg.value_and_grad(f, argnums=(0, 1)))
    value, (gq, gk) = cf(q.detach(), k.detach())
    want = f(q, k)
    wq, wk = lg.autograd.grad(want, [q, k])
    np.testing.assert_allclose(value.item(), want.item(), rtol=1e-12)
    np.testing.assert_allclose(gq.numpy(), wq.numpy(), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(gk.numpy(), wk.numpy(), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("case", ["also_returned", "also_elementwise", "div_not_pow2",
                                  "transposed_y", "integer", "tensor_factor"])
def test_what_cannot_fold_keeps_its_kernel(case):
    x, w = _inputs(lg.float64, (12, 10), (10, 6))
    xt = lg.tensor(np.random.default_rng(3).standard_normal((10, 12)))
    f = {
        "also_returned": lambda x, w: ((x * 0.5) @ w, x * 0.5),
        "also_elementwise": lambda x, w: ((x * 0.5) @ w).sum() + (x * 0.5).sum(),
        "div_not_pow2": lambda x, w: (x / 3.0) @ w,
        "transposed_y": lambda x, w: (xt.t() * 2.0) @ w,
        "integer": lambda x, w: (x.long() * 2) @ w.long(),
        "tensor_factor": lambda x, w: (x * w[0, 0]) @ w,
    }[case]
    cf = lg.compile(f)
    got, want = cf(x, w), f(x, w)
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    assert not any(" * A[" in b for b in _launches(cf, x, w))
