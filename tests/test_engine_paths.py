"""The fast paths of eager autograd give what the general paths give: nodes recorded by a
direct call's generated recorder (`dispatch.apply.direct_recorder`), their plan-cached
fused rules (`tape.fused`), and the engine's shortcut when every sink is asked for."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.dispatch.apply import record
from llgrad.functions import fastpath


@pytest.fixture(autouse=True)
def _fresh_tables():
    """Start from empty direct tables (a full table files no new launch)."""
    fastpath.clear()
    yield


def _direct(f, *xs):
    """`f(*xs)` after two calls, so the third runs the direct launch and its recorder."""
    f(*xs)
    f(*xs)
    return f(*xs)


CALLS = {
    "mul_number": lambda x, y: x * 1.5,
    "mul_tensors": lambda x, y: x * y,
    "sub_number": lambda x, y: x - 0.25,
    "add_tensors": lambda x, y: x + y,
    "div_tensors": lambda x, y: x / y,
    "tanh": lambda x, y: lg.tanh(x),
    "sin": lambda x, y: lg.sin(x),
    "exp": lambda x, y: lg.exp(x),
}


def _general(name, x, y):
    """The same node through `record` (the general path's recording)."""
    with lg.no_grad():
        out = CALLS[name](x, y)
    op = {"mul_number": "mul", "mul_tensors": "mul", "sub_number": "sub",
          "add_tensors": "add", "div_tensors": "div"}.get(name, name)
    operands = {"mul_number": (x, 1.5), "sub_number": (x, 0.25)}.get(
        name, (x, y) if op in ("mul", "add", "div") else (x,))
    return record(op, operands, {}, out)


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("y_grad", [False, True])
def test_recorded_node_is_the_general_node(name, y_grad):
    x = lg.randn(7, requires_grad=True)
    y = (lg.rand(7) + 0.5).requires_grad_(y_grad)
    fast = _direct(CALLS[name], x, y).grad_fn
    slow = _general(name, x, y).grad_fn
    assert fast._plan is not None and slow._plan is None
    assert type(fast) is type(slow) and fast.op == slow.op
    assert fast._meta == slow._meta and fast._layouts == slow._layouts
    assert [None if e[0] is None else (type(e[0]), e[1]) for e in fast.next_functions] == \
        [None if e[0] is None else (type(e[0]), e[1]) for e in slow.next_functions]
    assert [s is None for s in fast._saved] == [s is None for s in slow._saved]
    assert tuple(fast._scalars or ()) == tuple(slow._scalars or ())
    assert fast.needs_input_grad == slow.needs_input_grad


@pytest.mark.parametrize("name", sorted(CALLS))
def test_direct_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    xs = np.linspace(-1.0, 1.0, 9)
    ys = np.linspace(0.5, 2.0, 9)
    x = lg.tensor(xs, dtype=lg.float64, requires_grad=True)
    y = lg.tensor(ys, dtype=lg.float64, requires_grad=True)
    f = CALLS[name]
    for _ in range(3):                      # the third call and backward take the fast paths
        gx, gy = lg.autograd.grad(f(x, y).sum(), [x, y], allow_unused=True)
    tx = torch.tensor(xs, requires_grad=True)
    ty = torch.tensor(ys, requires_grad=True)
    tf = {"tanh": lambda a, b: torch.tanh(a), "sin": lambda a, b: torch.sin(a),
          "exp": lambda a, b: torch.exp(a)}.get(name, f)
    wx, wy = torch.autograd.grad(tf(tx, ty).sum(), [tx, ty], allow_unused=True)
    np.testing.assert_allclose(gx.numpy(), wx.numpy(), rtol=1e-12, atol=1e-12)
    assert (gy is None) == (wy is None)
    if gy is not None:
        np.testing.assert_allclose(gy.numpy(), wy.numpy(), rtol=1e-12, atol=1e-12)


def test_in_place_change_of_a_saved_tensor_is_caught_on_the_fast_path():
    x = lg.randn(5, requires_grad=True)
    for _ in range(2):
        _direct(lambda a: lg.sin(a), x.detach()).sum()      # warm the plan's fused rule
        y = lg.sin(x * 1.0)
        y.sum().backward()
    a = x * 1.0
    y = lg.sin(a)
    assert y.grad_fn._plan is not None
    with lg.no_grad():
        a.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    t = x * 1.0
    z = lg.tanh(t)                          # saves its output
    with lg.no_grad():
        z.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_saved_tensor_whose_data_was_swapped_takes_the_full_lookup():
    x = lg.randn(6, requires_grad=True)
    for _ in range(3):
        a = x * 1.0
        lg.sin(a).sum().backward()
    a = x * 1.0
    y = lg.sin(a)                           # saves `a` (its layout: 6 contiguous floats)
    a.data = lg.zeros(12)[::2]              # another layout under the same tensor object
    x.grad = None
    y.sum().backward()
    # the rule reads the swapped values (as the general path does): cos(0) = 1
    np.testing.assert_allclose(x.grad.numpy(), np.ones(6), atol=0)


def test_grad_of_some_leaves_runs_only_the_nodes_leading_to_them():
    x = lg.randn(4, requires_grad=True)
    w = lg.randn(4, requires_grad=True)
    ran = []
    h = lg.sin(w) * 2.0
    h.grad_fn.register_prehook(lambda g: ran.append("w branch"))
    loss = (lg.tanh(x) * 3.0 + h).sum()
    (gx,) = lg.autograd.grad(loss, [x])
    assert ran == []                        # the branch to w is not needed for x
    np.testing.assert_allclose(gx.numpy(), 3 * (1 - np.tanh(x.detach().numpy()) ** 2),
                               rtol=1e-5)
    gx, gw = lg.autograd.grad((lg.tanh(x) * 3.0 + h).sum(), [x, w])    # every sink asked
    assert ran == ["w branch"]
    np.testing.assert_allclose(gw.numpy(), 2 * np.cos(w.detach().numpy()), rtol=1e-5)


def test_grad_of_an_intermediate_stops_there():
    x = lg.randn(4, requires_grad=True)
    mid = lg.sin(x) * 2.0
    ran = []
    mid.grad_fn.register_hook(lambda gi, go: ran.append("mid"))
    mid.grad_fn.register_prehook(lambda go: ran.append("mid pre"))
    loss = (mid * mid).sum()
    (g,) = lg.autograd.grad(loss, [mid])
    assert ran == []                        # mid's own node is beyond what is asked (torch's)
    np.testing.assert_allclose(g.numpy(), 2 * mid.detach().numpy(), rtol=1e-6)
    (g,) = lg.autograd.grad(loss * 1.0, [loss])       # the root itself: captured, not run
    assert g.item() == 1.0 and ran == []
    # a tensor hook on the captured tensor still applies (it is on the way to the capture)
    mid.register_hook(lambda g: g * 10.0)
    (g,) = lg.autograd.grad((mid * mid).sum(), [mid])
    np.testing.assert_allclose(g.numpy(), 20 * mid.detach().numpy(), rtol=1e-6)
    # asked together with x, mid's node runs (it leads to x)
    gm, gx = lg.autograd.grad((mid * mid).sum(), [mid, x])
    assert ran == ["mid pre", "mid"]


def test_tables_are_cleared_with_the_direct_launches():
    x = lg.randn(3, requires_grad=True)
    _direct(lambda a: a * 2.0, x)
    assert any(entry[1] is not None for entry in fastpath._tables["mul"].values())
    fastpath.clear()
    assert not any(t for t in fastpath._tables.values())
    assert (x * 2.0).grad_fn is not None


def test_saved_tensor_source_lines_build_what_saved_tensor_builds():
    from llgrad.tape.node import SavedTensor
    import weakref
    t = lg.randn(4) * 1.0
    for is_output in (False, True):
        ns = {"new": object.__new__, "Saved": SavedTensor, "ref": weakref.ref, "t": t}
        exec("\n".join(SavedTensor.source_lines("s", "t", is_output)), ns)
        made, want = ns["s"], SavedTensor(t, is_output)
        for k in SavedTensor.__slots__:
            a, b = getattr(made, k), getattr(want, k)
            if k == "source" and a is not None:
                a, b = a(), b()
            assert a is b or (not isinstance(a, lg.Tensor) and a == b), k


def _leaf_hook_program(T):
    """Gradients of leaves with `register_hook` hooks, through `autograd.grad` and
    `backward` (PyTorch runs a leaf's hooks before the gradient is captured or
    accumulated, once)."""
    out = []
    b = T.tensor([1.0, 2.0, 3.0], dtype=T.float64, requires_grad=True)
    b.register_hook(lambda g: g * 3.0)
    out.append(T.autograd.grad((b * b).sum(), [b])[0].tolist())
    (b * b).sum().backward()
    out.append(b.grad.tolist())
    c = T.tensor([0.5, -1.0], dtype=T.float64, requires_grad=True)
    c.register_hook(lambda g: g + 1.0)
    c.register_hook(lambda g: g * 2.0)
    y = c * 4.0
    gc, gy = T.autograd.grad((y * c).sum(), [c, y])
    out += [gc.tolist(), gy.tolist()]
    y = c * 4.0
    (y * c).sum().backward(inputs=[c])
    out.append(c.grad.tolist())
    return out


def test_leaf_hooks_run_before_grad_captures_as_in_torch():
    torch = pytest.importorskip("torch")
    assert _leaf_hook_program(lg) == _leaf_hook_program(torch)
    assert _leaf_hook_program(lg)[0] == [6.0, 12.0, 18.0]
