"""Python numbers in cache keys: a call with -0.0 after one with 0.0 (and the reverse) must
not reuse what the first specialized (`llgrad._keys.number_key`).

Every cache that keys by a Python number is reached here through a public function that
takes one: direct eager tables, compiled composite functions, `lg.compile`'s signature and
its guards on globals. Each case runs with 0.0, -0.0, 0.0 again, -0.0 again, and the sign
bits of every result are compared with torch's for the same calls.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad._keys import number_key

torch = pytest.importorskip("torch")


def _cases(m):
    F = m.nn.functional
    nz = lambda: m.tensor([-0.0, -0.0, 1.5])          # noqa: E731
    return {
        "add": lambda c: nz() + c,
        "sub": lambda c: nz() - (-c if c else c),
        "add_method": lambda c: nz().add(c),
        "mul": lambda c: m.tensor([1.0, 2.0, -3.0]) * c,
        "full": lambda c: m.full((3,), c),
        "fill_": lambda c: m.zeros(3).fill_(c),
        "new_full": lambda c: m.ones(3).new_full((3,), c),
        "full_like": lambda c: m.full_like(m.ones(3), c),
        "where": lambda c: m.where(m.tensor([True, False, False]), nz(), c),
        "pad": lambda c: F.pad(m.ones(2), (2, 1), value=c),
        "clamp_min": lambda c: m.clamp(nz(), min=c),
        "clamp_max": lambda c: m.clamp(m.tensor([0.0, 1.0, 2.0]), max=c),
        "masked_fill": lambda c: m.ones(3).masked_fill(m.tensor([True, True, False]), c),
        "index_fill": lambda c: m.ones(3).index_fill(0, m.tensor([0, 2]), c),
        "hardtanh": lambda c: F.hardtanh(nz(), min_val=-1.0, max_val=c),
        "threshold": lambda c: F.threshold(m.tensor([-1.0, -2.0, 3.0]), 0.5, c),
        "addcmul": lambda c: m.addcmul(nz(), m.ones(3), m.ones(3), value=c),
        "addcdiv": lambda c: m.addcdiv(nz(), m.ones(3), m.ones(3), value=c),
        "lerp": lambda c: m.lerp(nz(), nz(), c),
        "nan_to_num": lambda c: m.nan_to_num(m.tensor([float("nan")] * 3), nan=c),
        "constant_pad_2d": lambda c: F.pad(m.ones(1, 1, 2, 2), (1, 1, 1, 1), value=c),
    }


NAMES = sorted(_cases(lg))
SEQUENCE = (0.0, -0.0, 0.0, -0.0)


def _signs(t) -> list[bool]:
    a = t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)
    return np.signbit(np.asarray(a, dtype=np.float64)).ravel().tolist()


@pytest.mark.parametrize("name", NAMES)
def test_signed_zero_arguments_match_torch(name: str) -> None:
    ours, theirs = _cases(lg)[name], _cases(torch)[name]
    for c in SEQUENCE:
        assert _signs(ours(c)) == _signs(theirs(c)), (name, c)


def test_compiled_function_argument_and_global() -> None:
    f = lg.compile(lambda x, c: x + c)
    x = lg.tensor([-0.0, 2.0])
    for c in SEQUENCE:
        assert _signs(f(x, c)) == _signs(torch.tensor([-0.0, 2.0]) + c), c

    g = lg.compile(lambda x: x + SHIFT)
    global SHIFT
    for c in SEQUENCE:
        SHIFT = c
        assert _signs(g(x)) == _signs(torch.tensor([-0.0, 2.0]) + c), c


SHIFT = 0.0


def test_number_key() -> None:
    assert number_key(0.0) != number_key(-0.0)
    assert number_key(float("nan")) == number_key(float("nan"))
    assert number_key(complex(0.0, -0.0)) != number_key(complex(0.0, 0.0))
    assert number_key(1.5) == number_key(1.5) and number_key(1) != number_key(1.0)
    assert number_key(True) != number_key(1)
    assert len({number_key(v) for v in (0.0, -0.0, float("nan"), float("nan"))}) == 3
