"""Bad input that used to pass silently: out-of-range indices under lg.compile and
negative sizes in creation functions."""
from __future__ import annotations

import numpy as np

import llgrad as lg


def test_compiled_indexing_rejects_out_of_range_negative_indices_like_eager():
    import pytest
    a = lg.arange(5.0)
    f = lg.compile(lambda a, i: a[i])
    for bad in ([-9], [-6], [5]):
        with pytest.raises(IndexError):
            a[lg.tensor(bad)]
        with pytest.raises(IndexError, match="out of bounds"):
            f(a, lg.tensor(bad))
    np.testing.assert_allclose(f(a, lg.tensor([-5, -1, 4])).numpy(), [0, 4, 4])
    m = lg.arange(15.0).reshape(3, 5)
    g = lg.compile(lambda m, i, j: m[i, j])
    with pytest.raises(IndexError):               # 7 is past dimension 1, though 0*5+7 < 15
        g(m, lg.tensor([0]), lg.tensor([7]))
    np.testing.assert_allclose(g(m, lg.tensor([1, -1]), lg.tensor([-1, 0])).numpy(), [9, 10])


def test_creation_functions_refuse_negative_sizes():
    import pytest
    for make in (lambda: lg.empty(-1), lambda: lg.full((-3,), 1.0), lambda: lg.randn(-4),
                 lambda: lg.rand(2, -1), lambda: lg.zeros(-3), lambda: lg.randint(0, 3, (-1,)),
                 lambda: lg.ones(2).new_zeros(-1)):
        with pytest.raises(RuntimeError, match="negative dimension"):
            make()
    assert lg.empty(0).shape == (0,)
