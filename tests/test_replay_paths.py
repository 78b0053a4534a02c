"""The cached eager paths of movement ops against their general paths.

`eager.views.copy_replay` replays a copy-only forward (cat, stack, flip, pad) by pointer
after its first call per layout; `functions.shape._view_function` makes a view op's result
from the geometry its first call per (layout, arguments) computed. Each case here runs the
op once to fill the cache and again on fresh tensors of the same layout (other values,
another offset into a larger buffer), and compares the second result with the general path
(the caches cleared) and with NumPy: values, dtype, shape, strides, storage sharing, and
that errors and autograd recording are those of the general path.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.eager import views
from llgrad.functions import shape as S


def _clear() -> None:
    views._replays.clear()
    S._view_geometries.clear()
    views._reshapes.clear()


def _layouts(rng: np.random.Generator, shape: tuple[int, ...], dtype: lg.dtype
             ) -> list[lg.Tensor]:
    """Tensors of `shape`: contiguous, a transposed copy's view, a window at an offset
    into a larger buffer (so two calls see other pointers and offsets)."""
    n = int(np.prod(shape))
    base = rng.standard_normal(n + 7) * 4
    out = [lg.tensor(base[:n].reshape(shape)).to(dtype)]
    big = lg.tensor(base).to(dtype)
    out.append(big[3:3 + n].view(shape))
    if len(shape) >= 2:
        t = lg.tensor(base[:n].reshape(shape[::-1])).to(dtype)
        out.append(t.permute(*range(len(shape) - 1, -1, -1)))
    return out


def _same(a: lg.Tensor, b: lg.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.numpy(), b.numpy())


COPY_CASES = [
    ("cat0", lambda x, y: lg.cat([x, y]), lambda a, b: np.concatenate([a, b])),
    ("cat1", lambda x, y: lg.cat([x, y], 1), lambda a, b: np.concatenate([a, b], 1)),
    ("cat-1 three", lambda x, y: lg.cat([y, x, y], -1),
     lambda a, b: np.concatenate([b, a, b], -1)),
    ("stack", lambda x, y: lg.stack([x, y]), lambda a, b: np.stack([a, b])),
    ("stack2", lambda x, y: lg.stack([x, y], 2), lambda a, b: np.stack([a, b], 2)),
    ("flip0", lambda x, y: x.flip(0), lambda a, b: a[::-1]),
    ("flip01", lambda x, y: lg.flip(y, (0, 1)), lambda a, b: b[::-1, ::-1]),
    ("pad", lambda x, y: lg.nn.functional.pad(x, (1, 2, 0, 1), value=1.5),
     lambda a, b: np.pad(a, ((0, 1), (1, 2)), constant_values=1.5)),
    ("pad other value", lambda x, y: lg.nn.functional.pad(x, (1, 2, 0, 1), value=-3.0),
     lambda a, b: np.pad(a, ((0, 1), (1, 2)), constant_values=-3.0)),
]


@pytest.mark.parametrize("dtype", [lg.float32, lg.float64, lg.int64])
@pytest.mark.parametrize("name,fn,ref", COPY_CASES, ids=[c[0] for c in COPY_CASES])
def test_copy_replay_matches_general_path(name, fn, ref, dtype):
    rng = np.random.default_rng(0)
    for x in _layouts(rng, (3, 4), dtype):
        for y in _layouts(rng, (3, 4), dtype):
            _clear()
            general = fn(x, y)
            fn(x, y)                                        # fills the caches
            x2, y2 = (lg.tensor(rng.standard_normal((3, 4)) * 4).to(dtype) for _ in "ab")
            x2 = (x2.t().contiguous().t() if not x.is_contiguous() else x2)
            replayed = fn(x2, y2) if x2._lkey == x._lkey and y2._lkey == y._lkey else None
            _same(general, lg.tensor(ref(x.numpy(), y.numpy())).to(dtype))
            _same(fn(x, y), general)                         # replayed, same operands
            if replayed is not None:
                _same(replayed, lg.tensor(ref(x2.numpy(), y2.numpy())).to(dtype))


def test_copy_replay_mixed_dtypes_and_numbers_between():
    x = lg.arange(6.).view(2, 3)
    i = lg.arange(6).view(2, 3)
    for _ in range(3):
        out = lg.cat([x, i])                                # promotes int64 to float32
        assert out.dtype == lg.float32
        np.testing.assert_array_equal(out.numpy(), np.concatenate([x.numpy(), x.numpy()]))
        # other ops pack numbers into the same scratch memory in between
        lg.full((2, 2), 7.0) + 1.0
        p = lg.nn.functional.pad(x, (1, 1), value=2.5)
        np.testing.assert_array_equal(p.numpy()[:, 0], [2.5, 2.5])


def test_copy_replay_records_autograd_and_shares_nothing():
    x = lg.randn(2, 3, requires_grad=True)
    y = lg.randn(2, 3)
    for _ in range(2):
        out = lg.cat([x, y])
        assert type(out.grad_fn).__name__ == "CatBackward0"
        out.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))
        x.grad = None
    a = lg.randn(2, 3)
    lg.cat([a, a])                                          # operands share memory: the
    b = lg.randn(2, 3)                                      # first key's copies are not
    c = lg.cat([b, a])                                      # tied to operand identity
    np.testing.assert_array_equal(c.numpy(), np.concatenate([b.numpy(), a.numpy()]))
    out = lg.flip(a, (0,))
    assert out._storage is not a._storage


VIEW_CASES = [
    ("reshape", lambda x: x.reshape(4, 3)),
    ("reshape -1", lambda x: x.reshape(-1)),
    ("view", lambda x: x.view(2, 6)),
    ("flatten", lambda x: x.flatten()),
    ("squeeze", lambda x: x.unsqueeze(0).squeeze()),
    ("squeeze dim", lambda x: x.unsqueeze(1).squeeze(1)),
    ("unsqueeze", lambda x: x.unsqueeze(-1)),
    ("permute", lambda x: x.permute(1, 0)),
    ("permute list", lambda x: x.permute([1, 0])),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("t", lambda x: x.t()),
    ("mT", lambda x: x.mT),
    ("movedim", lambda x: lg.movedim(x, 0, 1)),
    ("movedim seq", lambda x: lg.movedim(x.unsqueeze(0), (0, 1), (2, 0))),
    ("expand", lambda x: x[:1].expand(5, 4)),
    ("narrow", lambda x: x.narrow(1, 1, 2)),
    ("select", lambda x: x.select(1, -1)),
    ("split", lambda x: x.split(2, 1)),
    ("split sizes", lambda x: x.split([1, 3], 1)),
    ("chunk", lambda x: x.chunk(2)),
    ("unbind", lambda x: x.unbind(1)),
    ("tensor_split", lambda x: lg.tensor_split(x, 3, 1)),
    ("tensor_split indices", lambda x: lg.tensor_split(x, [1, -1, 10], 1)),
    ("hsplit", lambda x: lg.hsplit(x, 2)),
    ("vsplit", lambda x: lg.vsplit(x, [1])),
    ("unflatten", lambda x: x.unflatten(1, (2, -1))),
    ("diagonal", lambda x: x.diagonal(1)),
    ("unfold", lambda x: x.unfold(1, 2, 1)),
    ("ravel", lambda x: x.ravel()),
]


def _geometry(v):
    if isinstance(v, tuple):
        return [_geometry(t) for t in v]
    return (v.shape, v.stride(), v.storage_offset(), v.dtype, v.numpy().tolist())


@pytest.mark.parametrize("name,fn", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_view_function_matches_general_path(name, fn):
    rng = np.random.default_rng(1)
    for x in _layouts(rng, (3, 4), lg.float32):
        _clear()
        try:
            general = fn(x)
        except RuntimeError as e:                           # (view of a transposed input)
            with pytest.raises(type(e)):
                fn(x)
            continue
        cached = fn(x)
        assert _geometry(cached) == _geometry(general)
        for a, b in zip(cached if isinstance(cached, tuple) else (cached,),
                        general if isinstance(general, tuple) else (general,)):
            if b._storage is x._storage:                  # a view: the same view
                assert a._base is b._base and a._storage is b._storage
            else:                                           # a copy: a fresh one
                assert a._storage is not b._storage
        # the same layout elsewhere in memory: the views follow that tensor
        big = lg.tensor(rng.standard_normal(40).astype(np.float32))
        other = big[5:5 + 12].view(3, 4) if x.is_contiguous() else None
        if other is not None and other._lkey == x._lkey:
            _clear()
            want = _geometry(fn(other))
            fn(x)
            _clear()
            fn(x)
            assert _geometry(fn(other)) == want


def test_view_function_errors_and_recording_stay_general():
    x = lg.randn(3, 4)
    x.unsqueeze(1)
    with pytest.raises(IndexError):
        x.unsqueeze(5)
    with pytest.raises(IndexError):
        x.unsqueeze(5)                   # an error is never cached
    w = lg.randn(3, 4, requires_grad=True)
    x.t()
    assert type(w.t().grad_fn).__name__ == "TBackward0"
    parts = w.split(2, 1)
    assert all(type(p.grad_fn).__name__ == "SplitBackward0" for p in parts)
    with lg.no_grad():
        assert w.t().grad_fn is None
    # a non-viewable reshape is a copy: never cached, always fresh memory
    xt = x.t()
    a, b = xt.reshape(12), xt.reshape(12)
    assert a._storage is not xt._storage and b._storage is not a._storage
    np.testing.assert_array_equal(b.numpy(), xt.numpy().reshape(12))


def test_view_function_keys_separate_bool_from_int():
    x = lg.randn(2, 3)
    general = [type(e) for e in _errors(lambda: x.unsqueeze(True))]
    x.unsqueeze(1)
    assert [type(e) for e in _errors(lambda: x.unsqueeze(True))] == general


def _errors(call):
    try:
        out = call()
    except Exception as e:          # noqa: BLE001
        return [e]
    return [out.shape]


COPY_VARIANTS = [
    ("t_copy", lambda x: lg.t_copy(x), lambda a: a.T),
    ("transpose_copy", lambda x: lg.transpose_copy(x, 0, 1), lambda a: a.T),
    ("permute_copy", lambda x: lg.permute_copy(x, (1, 0)), lambda a: a.T),
    ("unsqueeze_copy", lambda x: lg.unsqueeze_copy(x, 1), lambda a: a[:, None]),
    ("view_copy", lambda x: lg.view_copy(x, (4, 3)), lambda a: a.reshape(4, 3)),
    ("expand_copy", lambda x: lg.expand_copy(x[:1], (2, 4)), lambda a: np.broadcast_to(a[:1], (2, 4))),
    ("narrow_copy", lambda x: lg.narrow_copy(x, 1, 1, 2), lambda a: a[:, 1:3]),
    ("diagonal_copy", lambda x: lg.diagonal_copy(x, 1), lambda a: np.diagonal(a, 1)),
    ("select_copy", lambda x: lg.select_copy(x, 0, -1), lambda a: a[-1]),
    ("alias_copy", lambda x: lg.alias_copy(x), lambda a: a),
]


@pytest.mark.parametrize("name,fn,ref", COPY_VARIANTS, ids=[c[0] for c in COPY_VARIANTS])
def test_copy_variants_replay(name, fn, ref):
    rng = np.random.default_rng(2)
    for x in _layouts(rng, (3, 4), lg.float32):
        if name == "view_copy" and not x.is_contiguous():
            continue
        for k in range(3):                       # general, then replayed twice
            out = fn(x)
            assert out.is_contiguous() and out._storage is not x._storage
            np.testing.assert_array_equal(out.numpy(), ref(x.numpy()))
        # another tensor of the same layout: the replay reads that tensor
        y = lg.tensor(rng.standard_normal(x.shape).astype(np.float32))
        if y._lkey == x._lkey:
            np.testing.assert_array_equal(fn(y).numpy(), ref(y.numpy()))
    w = lg.randn(3, 4, requires_grad=True)
    out = fn(w)
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()
    assert w.grad is not None


def test_copy_variants_errors_stay_general():
    x = lg.randn(3, 4)
    lg.narrow_copy(x, 1, 1, 2)
    with pytest.raises(RuntimeError, match="narrow"):
        lg.narrow_copy(x, 1, 3, 2)
    with pytest.raises(IndexError):
        lg.select_copy(x, 0, 7)
