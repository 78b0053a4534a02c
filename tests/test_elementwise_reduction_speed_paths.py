"""The direct paths of `functions/fastpath.py` for elementwise calls with keywords, numbers
or 0-d operands, comparisons, clamp by tensors (one chained kernel), and reductions over
dims: after a first general call they skip the layers, and give the general path's
values, dtypes, nodes and errors; calls they must not serve (recorded with a node of
another name, non-contiguous operands of other layouts, out=, vmap, forward mode, NumPy
scalars, bool dims) still take the general path."""
from __future__ import annotations

import math

import numpy as np
import pytest

import llgrad as lg
from llgrad.eager import elementwise as ew
from llgrad.eager import reduce
from llgrad.functions import elementwise as E
from llgrad.functions import fastpath
from llgrad.functions import reduction as R

pytestmark = pytest.mark.usefixtures("fresh_direct_tables")


def _count_general(monkeypatch):
    """Count the calls reaching the eager elementwise and reduction runners."""
    seen = []
    run_ew, run_red = ew.run, reduce.run
    monkeypatch.setattr(ew, "run", lambda *a, **k: seen.append("ew") or run_ew(*a, **k))
    monkeypatch.setattr(reduce, "run", lambda *a, **k: seen.append("red") or run_red(*a, **k))
    return seen


def _same(a, b):
    """Equal values (NaN where NaN, signs of zeros), dtype, shape and autograd state."""
    assert a.dtype == b.dtype and a.shape == b.shape
    an, bn = a.detach().numpy(), b.detach().numpy()
    np.testing.assert_array_equal(an, bn)
    if an.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(an), np.signbit(bn))
    assert a.requires_grad == b.requires_grad
    assert (a.grad_fn is None) == (b.grad_fn is None)
    if a.grad_fn is not None:
        assert a.grad_fn.name() == b.grad_fn.name()


def _data(*shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return lg.tensor(rng.standard_normal(shape).astype(dtype))


x = _data(10, 5)
x0 = lg.tensor(0.25)                 # a 0-d operand
y = _data(10, 5, seed=1)
ints = lg.tensor(np.arange(-6, 6).reshape(3, 4))

# name -> (call, general call: the same computation without any direct path)
CALLS = {
    "le_0d": (lambda: lg.le(x, x0), lambda: E._general("le", (x, x0), {}, None)),
    "ne_0d": (lambda: lg.ne(x, x0), lambda: E._general("ne", (x, x0), {}, None)),
    "eq_operator": (lambda: x == 0.5, lambda: E._general("eq", (x, 0.5), {}, None)),
    "logical_or": (lambda: lg.logical_or(x, x0),
                   lambda: E._general("logical_or", (x, x0), {}, None)),
    "maximum": (lambda: lg.max(x, x0), lambda: E._general("maximum", (x, x0), {}, None)),
    "minimum": (lambda: lg.min(x, x0), lambda: E._general("minimum", (x, x0), {}, None)),
    "pow": (lambda: lg.pow(x, x0), lambda: E._general("pow", (x, x0), {}, "PowBackward1")),
    "pow_number": (lambda: x ** 2, lambda: E._general("pow", (x, 2), {}, "PowBackward0")),
    "complex": (lambda: lg.complex(x, x0), lambda: E._general("complex", (x, x0), {}, None)),
    "sub_alpha": (lambda: lg.sub(x, y, alpha=-3.125), lambda: E._sub(x, y, alpha=-3.125)),
    "add_alpha": (lambda: lg.add(x, y, alpha=2), lambda: E._add(x, y, alpha=2)),
    "rsub_alpha": (lambda: lg.rsub(x, y, alpha=0.5), lambda: E._sub(y, x, alpha=0.5)),
    "div_floor": (lambda: lg.div(x, x0, rounding_mode="floor"),
                  lambda: E._div_rounded(x, x0, "floor")),
    "div_trunc": (lambda: lg.div(x, x0, rounding_mode="trunc"),
                  lambda: E._div_rounded(x, x0, "trunc")),
    "ceil": (lambda: lg.ceil(x), lambda: E._general("ceil", (x,), {}, None)),
    "clamp_numbers": (lambda: lg.clamp(x, -0.5, 0.5),
                      lambda: E._general("clamp", (x,), {"min": -0.5, "max": 0.5}, None)),
    "clamp_tensor": (lambda: lg.clamp(x, y), lambda: E._clamp_tensors(x, y, None)),
    "clamp_max_0d": (lambda: lg.clamp_max(x, x0), lambda: E._clamp_tensors(x, None, x0)),
    "clamp_both": (lambda: lg.clamp(x, y, x0), lambda: E._clamp_tensors(x, y, x0)),
    "where": (lambda: lg.where(x > 0, x, y), lambda: E._general("where", (x > 0, x, y), {},
                                                                 None)),
    "sum_dim": (lambda: lg.sum(x, dim=-1, keepdim=False),
                lambda: R._reduce("sum", x, -1, False)),
    "sum_tuple_keepdim": (lambda: x.sum((0, 1), True), lambda: R._reduce("sum", x, (0, 1),
                                                                          True)),
    "prod_dim": (lambda: lg.prod(x, 0), lambda: R._reduce("prod", x, 0, False)),
    "amax_dim": (lambda: lg.amax(x, dim=-1), lambda: R._reduce("amax", x, -1, False)),
    "amin_dim": (lambda: lg.amin(x, 1, True), lambda: R._reduce("amin", x, 1, True)),
    "max_all": (lambda: lg.max(x), lambda: R._reduce("amax", x, None, False)),
    "min_all": (lambda: x.min(), lambda: R._reduce("amin", x, None, False)),
    "argmax_all": (lambda: lg.argmax(x), lambda: R.apply(
        "argmax", (x,), {"axes": (), "keepdim": False}, R._forward)),
    "argmax_dim": (lambda: x.argmax(1, True), lambda: R.apply(
        "argmax", (x,), {"axes": (1,), "keepdim": True}, R._forward)),
    "mean_dim": (lambda: lg.mean(x, -1), lambda: lg.div(R._reduce("sum", x, (1,), False),
                                                         5)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_second_call_is_direct_and_equal_to_the_general_path(monkeypatch, name):
    call, general = CALLS[name]
    first = call()
    seen = _count_general(monkeypatch)
    again = call()
    assert seen == [], f"{name} took the general path again: {seen}"
    monkeypatch.undo()
    ref = general()
    _same(again, first)
    _same(again, ref)


def test_clamp_by_tensors_keeps_nan_and_signed_zero_rules():
    a = lg.tensor([math.nan, 1.0, -1.0, 0.0, -0.0, 0.0, 3.0])
    lo = lg.tensor([0.0, math.nan, 0.0, -0.0, 0.0, 0.0, -math.inf])
    hi = lg.tensor(2.0, dtype=lg.float64)          # a 0-d bound of another dtype
    for _ in range(3):
        for args in ((lo, None), (None, hi), (lo, hi), (None, lg.tensor(1))):
            _same(lg.clamp(a, *args), E._clamp_tensors(a, *args))
    wide = lg.clamp(a, lo.double())                 # a dimensioned float64 bound promotes
    assert wide.dtype == lg.float64
    _same(lg.clamp(a, lo.double()), E._clamp_tensors(a, lo.double(), None))


def _recorded_run():
    w = _data(10, 5).requires_grad_()
    b = lg.tensor(0.1, requires_grad=True)
    outs = [lg.le(w, b), lg.max(w, b), lg.pow(w, b), w ** 2, lg.sub(w, y, alpha=2.0),
            lg.div(w, b, rounding_mode="floor"), lg.clamp(w, -0.5, 0.5), lg.clamp(w, y),
            lg.clamp(w, None, b), lg.where(w > 0, w, 0.0), lg.sum(w, 1), lg.max(w),
            lg.amax(w, -1), lg.mean(w, -1), lg.mean(w)]
    names = [None if o.grad_fn is None else o.grad_fn.name() for o in outs]
    total = sum((o.float().sum() for o in outs[1:]), lg.tensor(0.0))
    return names, outs, lg.autograd.grad(total, [w, b])


def test_recorded_calls_keep_their_nodes_and_gradients():
    fastpath.clear()
    names, outs, grads = _recorded_run()           # the general path (and learning)
    names2, outs2, grads2 = _recorded_run()        # direct where a path records
    assert names == names2 == [
        None, "MaximumBackward0", "PowBackward1", "PowBackward0", "SubBackward0",
        "DivBackward2", "ClampBackward1", "ClampBackward0", "ClampBackward0",
        "WhereBackward0", "SumBackward1", "MaxBackward1", "AmaxBackward0",
        "MeanBackward1", "MeanBackward0"]
    for a, b in zip(outs + list(grads), outs2 + list(grads2)):
        _same(a, b)


def test_errors_still_come_from_the_general_path():
    for _ in range(2):
        lg.sum(x, 1)
        with pytest.raises(IndexError):
            lg.sum(x, 2)
        with pytest.raises(TypeError):
            lg.sum(x, (True,))            # a bool is not a dim, even after (1,) ran
        lg.sum(x, (1,))
        with pytest.raises(ValueError, match="rounding_mode"):
            lg.div(x, x0, rounding_mode="round")
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            lg.div(ints, 0, rounding_mode="floor")     # integers: the divisor is checked
        lg.div(ints, 2, rounding_mode="floor")
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            lg.div(ints, lg.zeros(4, dtype=lg.int64), rounding_mode="trunc")
        with pytest.raises(RuntimeError, match="subtraction"):
            lg.sub(lg.tensor([True]), lg.tensor([False]), alpha=2)
        with pytest.raises(RuntimeError, match="alpha"):
            lg.sub(ints, ints, alpha=0.5)
        with pytest.raises(TypeError):
            lg.complex(x, 0.5)
        with pytest.raises(TypeError):
            lg.ceil(lg.tensor([True]))
        with pytest.raises(ValueError, match="broadcast"):
            lg.clamp(x, lg.ones(3))                    # shapes do not broadcast
    assert lg.ceil(ints).tolist() == ints.tolist()       # integers: a copy
    with pytest.raises(TypeError, match="keepdim"):
        lg.sum(x, (1,), keepdim=1)                       # not a bool: the general check


def test_keywords_positions_out_and_numpy_scalars():
    ref = R._reduce("sum", x, 1, True)
    for _ in range(2):
        _same(lg.sum(x, 1, True), ref)
        _same(lg.sum(x, keepdim=True, dim=1), ref)
        _same(lg.sum(input=x, dim=1, keepdim=True), ref)
        _same(lg.sum(x, [1], True), ref)               # a list: the general path
        assert lg.sum(x, 1, dtype=lg.float64).dtype == lg.float64
        assert lg.sum(ints, 1).dtype == lg.int64
        o = lg.empty(10)
        assert lg.sum(x, 1, out=o) is o
        np.testing.assert_array_equal(o.numpy(), R._reduce("sum", x, 1, False).numpy())
        assert lg.amax(x, ()).shape == () and lg.amax(x, None).shape == ()
        assert lg.argmax(x, keepdim=True).shape == ()   # no dim: keepdim is ignored
        half = lg.le(x, np.float16(0.5))              # a NumPy scalar: the general path
        _same(half, E._general("le", (x, 0.5), {}, None))
        assert lg.eq(input=x, other=x).all().item()
        assert lg.pow(x, exponent=2).dtype == lg.float32
        assert lg.complex(real=x, imag=y).dtype == lg.complex64
        assert lg.sub(x, y, alpha=True).tolist() == (x - y).tolist()


def test_non_contiguous_and_broadcast_operands_get_their_own_entries():
    t = x.t()
    for _ in range(2):
        _same(lg.sum(t, 0), R._reduce("sum", t, 0, False))
        _same(lg.clamp(t, y.t()), E._clamp_tensors(t, y.t(), None))
        _same(lg.le(t, x0), E._general("le", (t, x0), {}, None))
        _same(lg.sub(t, y.t(), alpha=3.0), E._sub(t, y.t(), alpha=3.0))
        _same(lg.mean(t, 1), lg.div(R._reduce("sum", t, (1,), False), 10))


def test_vmap_forward_mode_and_tracing_take_the_general_path():
    for _ in range(2):
        lg.sum(x, 1)
        lg.clamp(x, y)
        lg.le(x, x0)
    batched = lg.vmap(lambda a: lg.sum(a, 0))(lg.ones(4, 3, 2))
    assert batched.shape == (4, 2) and batched.tolist() == [[3.0, 3.0]] * 4
    clamped = lg.vmap(lambda a: lg.clamp(a, lg.zeros(3)))(lg.full((2, 3), -1.0))
    assert clamped.tolist() == [[0.0] * 3] * 2
    import llgrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        d = fwAD.make_dual(x, lg.ones(10, 5))
        _, tangent = fwAD.unpack_dual(lg.sum(d, 1))
        assert tangent.tolist() == [5.0] * 10
        _, tangent = fwAD.unpack_dual(lg.sub(d, y, alpha=2.0))
        assert tangent.tolist() == lg.ones(10, 5).tolist()
        _, tangent = fwAD.unpack_dual(lg.mean(d, 1))
        assert np.allclose(tangent.numpy(), 1.0)
    cf = lg.compile(lambda a, b: lg.clamp(a, b) + lg.sum(a, 1, True) + lg.le(a, 0))
    assert np.allclose(cf(x, y).numpy(), (lg.clamp(x, y) + lg.sum(x, 1, True) +
                                          lg.le(x, 0)).numpy())
    assert not cf.graph_breaks


def test_direct_tables_are_cleared_with_the_default_dtype():
    i = lg.ones(3, dtype=lg.int64)
    for _ in range(2):
        assert lg.clamp(i, 0.5, 2.5).dtype == lg.float32
        assert lg.le(i, 0.5).dtype == lg.bool
    lg.set_default_dtype(lg.float64)
    try:
        assert lg.clamp(i, 0.5, 2.5).dtype == lg.float64
    finally:
        lg.set_default_dtype(lg.float32)
    assert lg.clamp(i, 0.5, 2.5).dtype == lg.float32
    assert any(fastpath._tables.values())
