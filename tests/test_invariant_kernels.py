"""Elementwise kernels whose every input is broadcast along the innermost loop (stride 0):
their body is loop-invariant, so they skip LLVM's loop vectorizer, which spent tens of
seconds on a long math body there (`x.expand(4).pow(2)` took 28 s to compile)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.codegen.elementwise import build_text
from llgrad.codegen.worker import INVARIANT_BODY
from llgrad.ir import dtypes as dt
from llgrad.schedule.elementwise import ElementwiseKernel, Expr, ExprNode


def _spec(inner: tuple) -> ElementwiseKernel:
    expr = Expr(in_dtypes=(dt.float64, dt.float64),
                nodes=(ExprNode(op="pow", args=(0, 1), attrs=()),), outputs=(2,))
    return ElementwiseKernel(expr=expr, rank=1, inner=inner, in_place=())


def test_all_broadcast_inputs_take_the_light_pipeline() -> None:
    assert build_text(_spec((1, 0, 0)), "k0").startswith(INVARIANT_BODY)
    assert not build_text(_spec((1, 1, 0)), "k1").startswith(INVARIANT_BODY)
    assert not build_text(_spec((1, None, 0)), "k2").startswith(INVARIANT_BODY)


@pytest.mark.parametrize("name", ["lgamma", "digamma", "exp", "erfinv", "sqrt"])
def test_broadcast_values(name: str) -> None:
    x = lg.tensor(0.37, dtype=lg.float64).expand(3, 5)
    got = getattr(lg, name)(x)
    want = getattr(lg, name)(lg.full((3, 5), 0.37, dtype=lg.float64))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert (x ** 2).tolist() == [[0.37 ** 2] * 5] * 3
