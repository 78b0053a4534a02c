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


def test_in_place_on_a_tensor_whose_elements_share_memory_raises_as_torch_does():
    import pytest
    overlapping = [lg.zeros(3).expand(2, 3),
                   lg.from_numpy(np.lib.stride_tricks.as_strided(
                       np.zeros(5, np.float32), (3, 3), (4, 4)))]
    for t in overlapping:
        for write in (lambda: t.add_(1), lambda: t.mul_(2), lambda: t.copy_(lg.ones(t.shape))):
            with pytest.raises(RuntimeError, match="more than one element of the written-to"):
                write()
        t.fill_(2.0)                # one value for every element: defined, as in PyTorch
        assert (t == 2.0).all().item()
        t.zero_()
        assert (t == 0.0).all().item()
    b = lg.zeros(4, 5)                       # views without overlap stay writable
    b.t().add_(1)
    b[:, 1:3].mul_(2)
    b[::2].add_(1)
    assert b.sum().item() == 38.0
