"""`out=` on the `lg.*` functions that take it (llgrad/functions/_out.py), against torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad.functions._out import OUT_FUNCTIONS, accepts_out

torch = pytest.importorskip("torch")

UNARY = ["abs", "exp", "log1p", "sqrt", "sin", "tanh", "sigmoid", "neg", "floor", "reciprocal"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "atan2", "fmod", "remainder"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_out_matches_torch(name: str) -> None:
    a = np.linspace(0.1, 2.0, 6, dtype=np.float32).reshape(2, 3)
    out = lg.empty(2, 3)
    got = getattr(lg, name)(lg.tensor(a), out=out)
    assert got is out
    tout = torch.empty(2, 3)
    getattr(torch, name)(torch.tensor(a), out=tout)
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", BINARY)
def test_binary_out_broadcasts_like_torch(name: str) -> None:
    a = np.arange(1, 7, dtype=np.float64).reshape(2, 3)
    b = np.array([1.5, 2.0, 4.0])
    out = lg.empty(2, 3, dtype=lg.float64)
    getattr(lg, name)(lg.tensor(a), lg.tensor(b), out=out)
    tout = torch.empty(2, 3, dtype=torch.float64)
    getattr(torch, name)(torch.tensor(a), torch.tensor(b), out=tout)
    np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-12)


def test_out_of_another_shape_is_resized_with_torch_warning() -> None:
    out = lg.empty(5)
    with pytest.warns(UserWarning, match="resized"):
        lg.add(lg.ones(2, 2), 1, out=out)
    assert out.shape == (2, 2) and out.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    empty = lg.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no elements: resized silently, as torch
        lg.exp(lg.zeros(3), out=empty)
    assert empty.tolist() == [1.0, 1.0, 1.0]


def test_out_refuses_a_lower_category_and_grad() -> None:
    with pytest.raises(RuntimeError, match="can't be cast"):
        lg.add(lg.ones(3), 0.5, out=lg.empty(3, dtype=lg.int64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.add(torch.ones(3), 0.5, out=torch.empty(3, dtype=torch.int64))
    x = lg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        lg.exp(x, out=lg.empty(3))
    with lg.no_grad():
        assert lg.exp(x, out=lg.empty(3)).tolist() == pytest.approx([np.e] * 3)


def test_out_widens_within_a_category_and_creation_takes_its_dtype() -> None:
    out = lg.empty(3, dtype=lg.float64)
    lg.mul(lg.tensor([1, 2, 3]), 2, out=out)
    assert out.dtype == lg.float64 and out.tolist() == [2.0, 4.0, 6.0]
    z = lg.empty(4, dtype=lg.int64)
    assert lg.arange(4, out=z) is z and z.tolist() == [0, 1, 2, 3]
    t = torch.empty(4, dtype=torch.int64)
    assert torch.arange(4, out=t).tolist() == z.tolist()


def test_tuple_out_for_several_results() -> None:
    v, i = lg.empty(3), lg.empty(3, dtype=lg.int64)
    r = lg.sort(lg.tensor([3.0, 1.0, 2.0]), out=(v, i))
    assert r.values is v and r.indices is i
    assert v.tolist() == [1.0, 2.0, 3.0] and i.tolist() == [1, 2, 0]
    with pytest.raises(TypeError, match="tuple of 2 Tensors"):
        lg.sort(lg.tensor([3.0, 1.0]), out=v)


def test_every_listed_function_that_llgrad_has_takes_out() -> None:
    missing = [n for n in sorted(OUT_FUNCTIONS)
               if callable(getattr(lg, n, None)) and not accepts_out(getattr(lg, n))]
    assert not missing, missing
