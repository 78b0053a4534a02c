"""split, chunk and unbind record one node for all their pieces, as PyTorch does.

Every piece's grad_fn is the same SplitBackward0 / SplitWithSizesBackward0 /
UnbindBackward0 object, `output_nr` is the piece's position, and the backward is one cat
(stack) of the pieces' gradients with zeros for pieces that got none. Checked against
torch: names, output numbers, gradients (unused pieces, any dim, non-contiguous inputs,
double backward), and the recurrent layers that hand each time step its row this way.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import llgrad as lg

CASES = [
    ("split-int", lambda m, x: m.split(x, 2, 1)),
    ("split-uneven", lambda m, x: m.split(x, 4, 1)),
    ("split-sizes", lambda m, x: m.split(x, [1, 0, 4], 1)),
    ("chunk", lambda m, x: m.chunk(x, 3, 1)),
    ("chunk-fewer", lambda m, x: m.chunk(x, 4, 1)),
    ("chunk-dim0", lambda m, x: m.chunk(x, 2, 0)),
    ("unbind", lambda m, x: m.unbind(x, 1)),
    ("unbind-neg", lambda m, x: m.unbind(x, -2)),
    ("method-split", lambda m, x: x.split(3, dim=-1)),
]


def _pair(transposed: bool) -> tuple[torch.Tensor, lg.Tensor]:
    a = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float64)
    if transposed:
        a = np.ascontiguousarray(a.T).T          # same values, column-major layout
    t = torch.tensor(a).requires_grad_()
    x = lg.tensor(np.array(a), dtype=lg.float64)
    if transposed:
        x = lg.tensor(np.ascontiguousarray(a.T), dtype=lg.float64).t()
    return t, x.requires_grad_()


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_pieces_share_one_node_named_as_torch(name, fn):
    t, x = _pair(False)
    tp, xp = fn(torch, t), fn(lg, x)
    assert len(tp) == len(xp)
    nodes = {id(p.grad_fn) for p in xp}
    assert len(nodes) == 1
    assert type(xp[0].grad_fn).__name__ == type(tp[0].grad_fn).__name__
    assert [p.output_nr for p in xp] == [p.output_nr for p in tp]
    assert [tuple(p.shape) for p in xp] == [tuple(p.shape) for p in tp]
    # the pieces are views of the input's memory
    assert all(p._storage is x._storage for p in xp)


@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_torch_with_unused_pieces(name, fn, transposed):
    t, x = _pair(transposed)
    tp, xp = fn(torch, t), fn(lg, x)
    # every other piece is used, with its own weight: the rest get no gradient
    used = range(0, len(tp), 2)
    torch.stack([(tp[i] * (i + 1)).sin().sum() for i in used]).sum().backward()
    lg.stack([(xp[i] * (i + 1)).sin().sum() for i in used]).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_double_backward_matches_torch(name, fn):
    t, x = _pair(False)
    tp, xp = fn(torch, t), fn(lg, x)
    (gt,) = torch.autograd.grad((tp[0] ** 3).sum() + (tp[-1] ** 2).sum(), t, create_graph=True)
    (gx,) = lg.autograd.grad((xp[0] ** 3).sum() + (xp[-1] ** 2).sum(), x, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    (ggt,) = torch.autograd.grad(gt.sum(), t)
    (ggx,) = lg.autograd.grad(gx.sum(), x)
    np.testing.assert_allclose(ggx.numpy(), ggt.numpy(), rtol=1e-12)


def test_gradcheck_of_every_piece():
    x = lg.randn(3, 7, dtype=lg.float64, requires_grad=True)
    assert lg.autograd.gradcheck(lambda x: tuple(p * 2 for p in x.split([2, 5], 1)), (x,))
    assert lg.autograd.gradcheck(lambda x: x.unbind(0), (x,))


def test_in_place_write_to_a_piece_keeps_gradients_right():
    """torch refuses in-place writes to the outputs of multi-view functions; llgrad allows
    them (as before the pieces shared a node) and its gradients stay right: the written
    piece's history goes through the base's CopySlices, the others through the shared
    node, whose gradient for the rewritten piece is zero."""
    x = lg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x * 1
    a, b = y.split(2)
    a.mul_(2)
    (a.sum() + 3 * b.sum()).backward()
    assert x.grad.tolist() == [2.0, 2.0, 3.0, 3.0]


def test_hooks_and_retain_grad_on_pieces():
    x = lg.randn(2, 4, requires_grad=True)
    a, b = x.chunk(2, 1)
    seen = []
    b.register_hook(lambda g: seen.append(g.shape) or g * 10)
    a.retain_grad()
    (a.sum() + b.sum()).backward()
    assert seen == [lg.Size([2, 2])]
    assert a.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert x.grad.tolist() == [[1.0, 1.0, 10.0, 10.0], [1.0, 1.0, 10.0, 10.0]]


def test_unrecorded_and_transformed_calls_keep_their_paths():
    x = lg.randn(3, 4)
    assert all(p.grad_fn is None for p in x.chunk(2, 1))
    with lg.no_grad():
        w = lg.randn(3, 4, requires_grad=True)
        assert all(p.grad_fn is None for p in w.unbind(0))
    # vmap and forward mode take the per-piece path; values agree with the plain call
    out = lg.func.vmap(lambda r: r.split(2)[1] * 2)(x)
    np.testing.assert_allclose(out.numpy(), x.numpy()[:, 2:] * 2)
    import llgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        d = fwAD.make_dual(x, lg.ones(3, 4))
        p = d.unbind(0)[1]
        assert fwAD.unpack_dual(p).tangent.tolist() == [1.0] * 4


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_recurrent_layers_match_torch_and_run_one_node_per_step(mode, monkeypatch):
    """Each time step of an eager recurrent layer runs as one compiled composite (one
    node forward, one backward), and each step's row of the input projection comes from
    one UnbindBackward0 node."""
    from llgrad.compiler import composites
    # a process compiles at most `composites.LIMIT` keys; earlier tests may have used them
    monkeypatch.setattr(composites, "_compiled", {})
    monkeypatch.setattr(composites, "_families", {})
    torch.manual_seed(0)
    tm = getattr(torch.nn, mode)(3, 5, num_layers=2).double()
    lm = getattr(lg.nn, mode)(3, 5, num_layers=2).double()
    lm.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    xa = np.random.default_rng(1).standard_normal((6, 2, 3))
    xt = torch.tensor(xa, requires_grad=True)
    xl = lg.tensor(xa, dtype=lg.float64, requires_grad=True)
    ot, lt = tm(xt)[0], lm(xl)[0]
    np.testing.assert_allclose(lt.detach().numpy(), ot.detach().numpy(), rtol=1e-10, atol=1e-12)
    (ot ** 2).sum().backward()
    # the last step's output: one node for the whole step (a compiled composite's)
    step_node = lt[-1].grad_fn
    while type(step_node).__name__ in ("SelectBackward0", "StackBackward0",
                                       "ViewBackward0", "UnsqueezeBackward0",
                                       "SliceBackward0"):
        step_node = step_node.next_functions[0][0]
    assert hasattr(step_node, "function"), type(step_node).__name__
    (lt ** 2).sum().backward()
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (name, pt), (_, pl) in zip(tm.named_parameters(), lm.named_parameters()):
        np.testing.assert_allclose(pl.grad.numpy(), pt.grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)
