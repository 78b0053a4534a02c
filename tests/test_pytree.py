"""One pytree module for lg.compile, the tracer and the transforms: insertion order,
dataclasses, registered node types."""
from __future__ import annotations

from collections import OrderedDict, defaultdict, namedtuple
from dataclasses import dataclass, field

import numpy as np
import pytest

import llgrad as lg
from llgrad import pytree


@dataclass
class Params:
    w: object
    b: object
    name: str = "layer"
    calls: int = field(default=0, init=False)      # not a constructor field: not a child


@dataclass(frozen=True)
class WB:
    w: object
    b: object


class Pair:
    """A user container registered as a node."""

    def __init__(self, first, second, tag):
        self.first, self.second, self.tag = first, second, tag


pytree.register_pytree_node(Pair, lambda p: ([p.first, p.second], p.tag),
                            lambda kids, tag: Pair(kids[0], kids[1], tag))
Point = namedtuple("Point", "x y")


def test_flatten_round_trips_every_node_kind():
    tree = {"z": [1, (2, None)], "a": Params(3, 4), "p": Pair(5, 6, "t"),
            "o": OrderedDict(b=7, a=8), "d": defaultdict(list, k=9), "n": Point(10, 11)}
    leaves, d = pytree.flatten(tree)
    assert leaves == [1, 2, 3, 4, "layer", 5, 6, 8 - 1, 8, 9, 10, 11]
    back = pytree.unflatten(d, leaves)
    assert list(back) == ["z", "a", "p", "o", "d", "n"]              # insertion order
    assert isinstance(back["a"], Params) and back["a"].b == 4
    assert isinstance(back["p"], Pair) and back["p"].tag == "t" and back["p"].second == 6
    assert type(back["o"]) is OrderedDict and list(back["o"]) == ["b", "a"]
    assert type(back["d"]) is defaultdict and back["d"].default_factory is list
    assert back["n"] == Point(10, 11) and back["z"] == [1, (2, None)]
    assert "Params(w=*, b=*, name=*)" in repr(d) and "Pair['t']" in repr(d)
    with pytest.raises(ValueError, match="already a pytree node"):
        pytree.register_pytree_node(Pair, lambda p: ([], None), lambda k, c: None)


def test_dict_order_is_part_of_the_structure():
    _, d1 = pytree.flatten({"a": 1, "b": 2})
    _, d2 = pytree.flatten({"b": 2, "a": 1})
    assert d1 != d2


def test_compile_takes_and_returns_dataclasses_and_registered_nodes():
    def f(p: Params, pair: Pair):
        return Pair(p.w * pair.first, {"s": (p.b + pair.second).sum(), "k": p.name}, "out")

    cf = lg.compile(f)
    p = Params(lg.ones(3) * 2, lg.arange(3.0), name="L")
    pair = Pair(lg.arange(3.0), lg.ones(3), "in")
    for _ in range(2):                            # the second call takes the fast path
        out = cf(p, pair)
        assert isinstance(out, Pair) and out.tag == "out"
        np.testing.assert_allclose(out.first.numpy(), [0.0, 2.0, 4.0])
        assert out.second["k"] == "L" and out.second["s"].item() == 6.0
    assert len(cf._entries) == 1
    cf(Params(p.w, p.b, name="other"), pair)     # a static field is part of the key
    assert len(cf._entries) == 2


def test_compile_keys_on_dict_order():
    cf = lg.compile(lambda d: d["a"] * 2 - d["b"])
    a, b = lg.ones(2), lg.zeros(2)
    np.testing.assert_allclose(cf({"a": a, "b": b}).numpy(), [2.0, 2.0])
    np.testing.assert_allclose(cf({"b": b, "a": a}).numpy(), [2.0, 2.0])   # not mixed up
    assert len(cf._entries) == 2


def test_transforms_take_dataclasses_and_keep_insertion_order():
    params = {"w2": lg.tensor([3.0]), "w1": lg.tensor([2.0])}
    grads = lg.func.grad(lambda ps: (ps["w1"] * ps["w2"]).sum())(params)
    assert list(grads) == ["w2", "w1"]
    np.testing.assert_allclose(grads["w2"].numpy(), [2.0])

    g = lg.func.grad(lambda p: (p.w * p.b).sum())(WB(lg.tensor([2.0]), lg.tensor([5.0])))
    assert isinstance(g, WB) and g.w.item() == 5.0 and g.b.item() == 2.0
    out = lg.func.vmap(lambda pair: pair.first * pair.second)(
        Pair(lg.arange(3.0), lg.ones(3) * 2, "v"))
    np.testing.assert_allclose(out.numpy(), [0.0, 2.0, 4.0])
