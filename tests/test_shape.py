"""Shape functions against NumPy: views share memory, copies happen only when needed."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

from conftest import values


def arr(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


@pytest.mark.parametrize("shape,new", [((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((24,), (2, -1, 3)),
                                       ((), (1, 1)), ((0, 3), (3, 0)), ((1,), ())])
def test_reshape_and_view(shape, new):
    a = arr(*shape)
    x = lg.tensor(a)
    np.testing.assert_array_equal(values(x.reshape(new)), a.reshape(new))
    v = x.view(new)
    assert v.data_ptr() == x.data_ptr() or x.numel() == 0


def test_view_of_transposed_raises_but_reshape_copies():
    x = lg.tensor(arr(3, 4)).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.view(12)
    np.testing.assert_array_equal(values(x.reshape(12)), arr(3, 4).T.reshape(12))


def test_view_splits_and_merges_within_contiguous_groups():
    x = lg.tensor(arr(4, 6))[:, :4]             # non-contiguous rows
    y = x.view(4, 2, 2)
    assert y.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(values(y), arr(4, 6)[:, :4].reshape(4, 2, 2))


def test_reshape_errors():
    with pytest.raises(RuntimeError, match=r"shape \[5\] is invalid for input of size 6"):
        lg.ones(2, 3).reshape(5)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        lg.ones(2, 3).reshape(-1, -1)


def test_permute_transpose_t():
    a = arr(2, 3, 4)
    x = lg.tensor(a)
    np.testing.assert_array_equal(values(x.permute(2, 0, 1)), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(values(x.transpose(0, 2)), a.swapaxes(0, 2))
    np.testing.assert_array_equal(values(lg.tensor(arr(2, 3)).t()), arr(2, 3).T)
    np.testing.assert_array_equal(values(x.mT), a.swapaxes(-1, -2))
    with pytest.raises(RuntimeError, match="repeated dim"):
        x.permute(0, 0, 1)
    with pytest.raises(IndexError, match="Dimension out of range|dimension out of range"):
        x.transpose(0, 3)


def test_squeeze_unsqueeze_flatten():
    a = arr(1, 3, 1, 2)
    x = lg.tensor(a)
    assert x.squeeze().shape == (3, 2)
    assert x.squeeze(0).shape == (3, 1, 2)
    assert x.squeeze(1).shape == (1, 3, 1, 2)
    assert x.unsqueeze(-1).shape == (1, 3, 1, 2, 1)
    assert x.flatten().shape == (6,)
    assert x.flatten(1, 2).shape == (1, 3, 2)
    assert lg.tensor(5.0).flatten().shape == (1,)


def test_expand_and_broadcast_to():
    x = lg.tensor([[1.0], [2.0]])
    y = x.expand(2, 3)
    assert y.stride() == (1, 0)
    np.testing.assert_array_equal(values(y), [[1, 1, 1], [2, 2, 2]])
    assert lg.broadcast_to(x, (4, 2, 3)).shape == (4, 2, 3)
    assert x.expand(-1, 5).shape == (2, 5)
    with pytest.raises(RuntimeError, match="must match the existing size"):
        x.expand(3, 3)


def test_cat_stack_split_chunk():
    a, b = arr(2, 3), arr(4, 3) + 100
    x, y = lg.tensor(a), lg.tensor(b)
    np.testing.assert_array_equal(values(lg.cat([x, y])), np.concatenate([a, b]))
    np.testing.assert_array_equal(values(lg.cat([x.t(), y.t()], dim=1)),
                                  np.concatenate([a.T, b.T], axis=1))
    np.testing.assert_array_equal(values(lg.stack([x, x + 1], dim=1)),
                                  np.stack([a, a + 1], axis=1))
    parts = lg.split(y, [1, 3])
    assert [p.shape for p in parts] == [(1, 3), (3, 3)]
    parts = y.split(3)
    assert [p.shape[0] for p in parts] == [3, 1]
    assert [c.shape[0] for c in lg.chunk(lg.ones(10), 3)] == [4, 4, 2]
    with pytest.raises(RuntimeError, match="Sizes of tensors must match|sizes of tensors must match"):
        lg.cat([x, lg.ones(2, 4)])


def test_cat_promotes_dtypes():
    out = lg.cat([lg.ones(2, dtype=lg.int32), lg.ones(2, dtype=lg.float64)])
    assert out.dtype is lg.float64


def test_flip_narrow_select_unbind():
    a = arr(3, 4)
    x = lg.tensor(a)
    np.testing.assert_array_equal(values(x.flip(0)), a[::-1])
    np.testing.assert_array_equal(values(x.flip([0, 1])), a[::-1, ::-1])
    np.testing.assert_array_equal(values(x.narrow(1, 1, 2)), a[:, 1:3])
    np.testing.assert_array_equal(values(x.select(1, -1)), a[:, -1])
    assert [values(u).tolist() for u in x.unbind(0)] == a.tolist()


def test_contiguous_and_clone():
    x = lg.tensor(arr(3, 4)).t()
    assert not x.is_contiguous()
    c = x.contiguous()
    assert c.is_contiguous() and c.stride() == (3, 1)
    d = c.clone()
    d.fill_(0)
    assert values(c).sum() > 0


def test_repeat():
    a = arr(2, 3)
    np.testing.assert_array_equal(values(lg.tensor(a).repeat(2, 1, 2)), np.tile(a, (2, 1, 2)))


@pytest.mark.parametrize("shape", [(2, 3), (4,), (2, 1, 3)])
def test_shape_gradients_match_numpy_adjoint(shape):
    """Backward of a view chain scatters the gradient back to the input's layout."""
    x = lg.tensor(arr(*shape), requires_grad=True)
    y = x.reshape(-1).flip(0)[1:].unsqueeze(0).expand(3, -1)
    w = lg.tensor(np.random.randn(*y.shape).astype(np.float32))
    (y * w).sum().backward()
    want = np.zeros(int(np.prod(shape)), dtype=np.float32)
    wsum = values(w).sum(0)
    want[::-1][1:] += wsum
    np.testing.assert_allclose(values(x.grad), want.reshape(shape), rtol=1e-6)


def test_cat_split_gradients():
    a = lg.tensor(arr(2, 3), requires_grad=True)
    b = lg.tensor(arr(1, 3), requires_grad=True)
    c = lg.cat([a, b])
    (c * lg.tensor(arr(3, 3))).sum().backward()
    np.testing.assert_array_equal(values(a.grad), arr(3, 3)[:2])
    np.testing.assert_array_equal(values(b.grad), arr(3, 3)[2:])


def test_narrow_start_as_0d_tensor() -> None:
    torch = pytest.importorskip("torch")
    x = np.arange(20.).reshape(4, 5)
    lx = lg.tensor(x, requires_grad=True)
    y = lg.narrow(lx, 1, lg.tensor(-3), 2)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.narrow(tx, 1, torch.tensor(-3), 2)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    (g,) = lg.autograd.grad([y], [lx], [lg.ones(4, 2, dtype=lg.float64)])
    (tg,) = torch.autograd.grad(ty, [tx], torch.ones(4, 2, dtype=torch.float64))
    np.testing.assert_array_equal(g.numpy(), tg.numpy())
    for bad in (lg.tensor(1.0), lg.tensor([1])):
        with pytest.raises(RuntimeError, match="0-dim integral"):
            lg.narrow(lx, 1, bad, 2)
