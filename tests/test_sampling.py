"""Random sampling, creation overflow checks and generator state, against torch.

llgrad's random streams differ from torch's, so distributions are tested statistically with
fixed seeds and tolerant bounds (deterministic: the same seed gives the same numbers every
run), and the exact semantics (shapes, dtypes, errors, grad_fn, reproducibility) against
torch directly.
"""
import math
import pickle

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128"]


def both(fn):
    """(torch result or exception type, llgrad result or exception type)."""
    out = []
    for T in (torch, lg):
        try:
            r = fn(T)
            out.append(("ok", str(r.dtype).split(".")[-1], tuple(r.shape),
                        r.float().tolist() if r.dtype in (T.bfloat16,) else r.tolist())
                       if isinstance(r, (torch.Tensor, lg.Tensor)) else ("ok", _plain(r)))
        except Exception as e:                                   # noqa: BLE001
            out.append(("err", RuntimeError if isinstance(e, RuntimeError) else type(e)))
    return out


def _plain(r):
    """torch/llgrad objects that are not tensors as comparable values."""
    if isinstance(r, (torch.dtype, lg.dtype)):
        return str(r).split(".")[-1]
    if isinstance(r, tuple):
        return tuple(r)
    return r


def same(fn):
    t, l = both(fn)
    assert t == l, (t, l)


# --------------------------------------------------------------------------------------
# 1a: integer overflow on creation is an error, never a wrapped value
# --------------------------------------------------------------------------------------

OVERFLOW_CASES = [
    lambda T: T.tensor([2 ** 63]),
    lambda T: T.tensor(2 ** 63),
    lambda T: T.tensor([2 ** 64]),
    lambda T: T.tensor([-2 ** 63 - 1]),
    lambda T: T.tensor([[1, 2], [3, 2 ** 63]]),
    lambda T: T.tensor([True, 2 ** 63]),
    lambda T: T.tensor([300], dtype=T.uint8),
    lambda T: T.tensor(300, dtype=T.uint8),
    lambda T: T.tensor([-256], dtype=T.uint8),
    lambda T: T.tensor([128], dtype=T.int8),
    lambda T: T.tensor([2 ** 40], dtype=T.int32),
    lambda T: T.tensor([2 ** 15], dtype=T.int16),
    lambda T: T.tensor([300.0], dtype=T.uint8),
    lambda T: T.tensor([255.9], dtype=T.uint8),
    lambda T: T.tensor([-1.0], dtype=T.uint8),
    lambda T: T.tensor([float("nan")], dtype=T.int32),
    lambda T: T.tensor([float("inf")], dtype=T.int64),
    lambda T: T.as_tensor([300], dtype=T.uint8),
    lambda T: T.as_tensor([2 ** 63]),
    lambda T: T.full((2,), 2 ** 63, dtype=T.int64),
    lambda T: T.full((2,), 2 ** 63),
    lambda T: T.full((2,), 2 ** 64),
    lambda T: T.full((2,), 300, dtype=T.uint8),
    lambda T: T.full((2,), -256, dtype=T.uint8),
    lambda T: T.full((2,), 255, dtype=T.int8),
    lambda T: T.full((2,), -129, dtype=T.int8),
    lambda T: T.full((2,), 2 ** 31, dtype=T.int32),
    lambda T: T.full((2,), -1.0, dtype=T.uint8),
    lambda T: T.full((2,), 300.0, dtype=T.uint8),
    lambda T: T.full((2,), float("nan"), dtype=T.int32),
    lambda T: T.full((2,), 70000.0, dtype=T.float16),
    lambda T: T.full((2,), 1e39, dtype=T.bfloat16),
    lambda T: T.full((2,), 1e40, dtype=T.float32),
    lambda T: T.full((2,), 1 + 2j, dtype=T.int32),
    lambda T: T.full((2,), 1 + 2j, dtype=T.float32),
    lambda T: T.zeros(2, dtype=T.uint8).fill_(300),
    lambda T: T.zeros(2, dtype=T.int8).fill_(200),
    lambda T: T.zeros(2, dtype=T.int64).fill_(2 ** 63),
    lambda T: T.zeros(2, dtype=T.float16).fill_(1e10),
    lambda T: T.zeros(2, dtype=T.float32).fill_(1e40),
    lambda T: T.zeros(2, dtype=T.uint8)[0].fill_(300),
    lambda T: T.zeros(2, dtype=T.uint8).new_full((2,), 300),
    lambda T: T.zeros(2, dtype=T.uint8).new_tensor([300]),
    lambda T: T.zeros(2, dtype=T.uint8).new_tensor(300),
    lambda T: T.full_like(T.zeros(2, dtype=T.uint8), 300),
    lambda T: T.full_like(T.zeros(2, dtype=T.int64), 2 ** 63),
    lambda T: T.scalar_tensor(300, dtype=T.uint8),
    lambda T: T.scalar_tensor(1 + 2j),
    lambda T: T.zeros(2, dtype=T.uint8).masked_fill(T.tensor([True, False]), 300),
    lambda T: T.zeros(2, dtype=T.uint8).masked_fill(T.tensor([True, False]), T.tensor(300)),
    lambda T: T.zeros(3, dtype=T.uint8).__setitem__(0, 300),
    lambda T: T.zeros(3, dtype=T.uint8).__setitem__([0, 1], 300),
    lambda T: T.zeros(3, dtype=T.int32).__setitem__(slice(0, 2), 2 ** 40),
    lambda T: T.zeros(3, dtype=T.int32).__setitem__(0, float("nan")),
    lambda T: T.zeros(3, dtype=T.float32).__setitem__(0, 1e40),
]


@pytest.mark.parametrize("case", range(len(OVERFLOW_CASES)))
def test_overflow_raises_as_torch(case):
    t, l = both(OVERFLOW_CASES[case])
    assert t[0] == "err", t
    assert l[0] == "err", l                         # never a silently wrapped value
    assert t == l or {t[1], l[1]} <= {RuntimeError, ValueError, OverflowError}, (t, l)


IN_RANGE_CASES = [
    lambda T: T.tensor([-1], dtype=T.uint8),       # two's complement, as torch
    lambda T: T.tensor([-255, 255], dtype=T.uint8),
    lambda T: T.tensor([2 ** 63 - 1, -2 ** 63]),
    lambda T: T.tensor([2 ** 63], dtype=T.float32),
    lambda T: T.tensor([2 ** 64], dtype=T.float64),
    lambda T: T.tensor([1.5, 2 ** 63]),
    lambda T: T.tensor([1e300], dtype=T.float32),
    lambda T: T.tensor([1e10], dtype=T.float16),
    lambda T: T.tensor([300], dtype=T.bool),
    lambda T: T.tensor([127, -128], dtype=T.int8),
    lambda T: T.tensor([3.9, -3.9], dtype=T.int32),
    lambda T: T.tensor(np.array([300]), dtype=T.uint8),     # an array converts as a cast
    lambda T: T.full((2,), -1, dtype=T.uint8),
    lambda T: T.full((2,), -255, dtype=T.uint8),
    lambda T: T.full((2,), 3.5, dtype=T.uint8),
    lambda T: T.full((2,), float("inf"), dtype=T.float16),
    lambda T: T.full((2,), 65504.0, dtype=T.float16),
    lambda T: T.full((2,), 300, dtype=T.bool),
    lambda T: T.full((2,), 2 ** 63, dtype=T.float32),
    lambda T: T.full((2,), 1 + 0j, dtype=T.int64),
    lambda T: T.full((2,), True),
    lambda T: T.full((2,), 7),
    lambda T: T.full((2,), 2.5, dtype=T.int64),
    lambda T: T.zeros(2, dtype=T.uint8).fill_(-1),
    lambda T: T.zeros(2, dtype=T.uint8).fill_(T.tensor(300)),        # a tensor casts
    lambda T: T.zeros(2, dtype=T.int32).fill_(-2.7),
    lambda T: T.zeros(2, dtype=T.bool).fill_(5),
    lambda T: T.zeros(2, dtype=T.float32).fill_(1 + 0j),
    lambda T: T.zeros(2, dtype=T.int64).new_full((2,), 2.5),
    lambda T: T.full_like(T.zeros(2, dtype=T.uint8), -3),
    lambda T: T.zeros(2, dtype=T.uint8).masked_fill(T.tensor([True, False]), -1),
    lambda T: T.scalar_tensor(3.5, dtype=T.int64),
]


@pytest.mark.parametrize("case", range(len(IN_RANGE_CASES)))
def test_in_range_values_match_torch(case):
    same(IN_RANGE_CASES[case])


@pytest.mark.parametrize("name", DTYPES)
def test_full_and_fill_every_dtype_at_the_limits(name):
    """Every dtype: the largest/smallest value torch accepts is kept exactly by full,
    fill_, full_like, new_full and tensor; one past it raises in both."""
    td, ld = getattr(torch, name), getattr(lg, name)
    if name in ("bool",):
        return
    if td.is_floating_point or td.is_complex:
        fi = torch.finfo(td)
        good, bad = [fi.max, fi.min, float("inf")], [float(fi.max) * 4]
        bad = [v for v in bad if math.isfinite(v)]      # float64: nothing finite is beyond
    else:
        ii = torch.iinfo(td)
        good, bad = [ii.max, ii.min], [ii.max + 1]
        if name != "uint8":
            bad.append(ii.min - 1)
    makers = [lambda T, d, v: T.full((2,), v, dtype=d),
              lambda T, d, v: T.zeros(2, dtype=d).fill_(v),
              lambda T, d, v: T.full_like(T.zeros(2, dtype=d), v),
              lambda T, d, v: T.zeros(1, dtype=d).new_full((2,), v)]
    if not (td.is_floating_point or td.is_complex):
        makers.append(lambda T, d, v: T.tensor([v, v], dtype=d))
    for make in makers:
        for v in good:
            r = make(lg, ld, v)
            ref = make(torch, td, v)
            assert r.dtype is ld
            if td is torch.bfloat16:
                assert r.float().tolist() == ref.float().tolist()
            else:
                assert r.tolist() == ref.tolist()
        for v in bad:
            with pytest.raises((RuntimeError, OverflowError, ValueError)):
                make(torch, td, v)
            with pytest.raises((RuntimeError, OverflowError, ValueError),
                               match="without overflow|too big|unpacking long long"):
                make(lg, ld, v)


def test_overflow_error_message_names_op_and_type():
    with pytest.raises(RuntimeError, match=r"full: value cannot be converted to type int64 "
                                           r"without overflow"):
        lg.full((2,), 2 ** 63, dtype=lg.int64)
    with pytest.raises(RuntimeError, match=r"tensor: value cannot be converted to type uint8"):
        lg.tensor([300], dtype=lg.uint8)
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        lg.tensor([2 ** 63])


# --------------------------------------------------------------------------------------
# 1b: NumPy views of tensors that require grad; as_tensor / from_numpy share memory
# --------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # torch's own __array__
def test_array_protocol_refuses_requires_grad():
    tt = torch.tensor([1.0, 2.0], requires_grad=True)
    lt = lg.tensor([1.0, 2.0], requires_grad=True)
    for f in (np.asarray, np.array, lambda t: np.add.reduce(np.asarray(t))):
        with pytest.raises(RuntimeError, match="requires grad"):
            f(tt)
        with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires "
                                               r"grad"):
            f(lt)
    a = np.asarray(lt.detach())
    a[0] = 7.0                                            # the detached view shares memory
    assert lt.tolist() == [7.0, 2.0]
    # ufuncs still run the llgrad op (and keep the gradient)
    y = np.exp(lt)
    assert isinstance(y, lg.Tensor) and y.grad_fn is not None


@pytest.mark.parametrize("np_dtype", ["float32", "float64", "int64", "int32", "uint8", "bool",
                                      "complex64", "int16"])
def test_as_tensor_and_from_numpy_share_memory(np_dtype):
    for T in (torch, lg):
        a = np.arange(6).reshape(2, 3).astype(np_dtype)
        for make in (T.as_tensor, T.from_numpy, lambda x: T.asarray(x)):
            t = make(a)
            a[0, 0] = 1
            assert bool(t[0, 0] == 1), (T.__name__, make)
            t[1, 2] = 0
            assert a[1, 2] == 0
            a[0, 0] = 0
    a = np.arange(6.0)[::2]                                 # strided: still shared
    t = lg.as_tensor(a)
    a[1] = 100.0
    assert t.tolist() == [0.0, 100.0, 4.0]


def test_as_tensor_copies_when_it_must():
    a = np.arange(3.0)
    for T in (torch, lg):
        t = T.as_tensor(a, dtype=T.float32)             # a conversion: a copy
        a[0] = 9.0
        assert t.tolist() == [0.0, 1.0, 2.0]
        a[0] = 0.0
        src = T.arange(3.0)
        assert T.as_tensor(src) is src
        assert T.as_tensor(src, dtype=T.float64).dtype == T.float64
        lst = [1, 2]
        assert T.as_tensor(lst).tolist() == lst


# --------------------------------------------------------------------------------------
# Generators
# --------------------------------------------------------------------------------------

def test_generator_api():
    g = lg.Generator()
    assert g.initial_seed() == torch.Generator().initial_seed() == 67280421310721
    assert g.device == lg.device("cpu")
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    assert g.manual_seed(-1).initial_seed() == torch.Generator().manual_seed(-1).initial_seed()
    for bad, exc in ((2 ** 64, ValueError), (1.5, RuntimeError), ("a", RuntimeError)):
        with pytest.raises(exc):
            torch.Generator().manual_seed(bad)
        with pytest.raises(exc):
            g.manual_seed(bad)
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s
    s0 = lg.seed()
    assert lg.initial_seed() == s0


def test_generator_state_round_trip():
    g = lg.Generator().manual_seed(3)
    g_state = g.get_state()
    assert g_state.dtype is lg.uint8 and g_state.ndim == 1
    a = lg.rand(5, generator=g)
    g.set_state(g_state)
    assert lg.equal(a, lg.rand(5, generator=g))
    # the state is a snapshot, not a view
    g_state2 = g.get_state()
    lg.rand(3, generator=g)
    assert not lg.equal(g_state2, g.get_state())
    # clone_state: the same continuation, independent afterwards
    c = g.clone_state()
    assert lg.equal(lg.rand(4, generator=c), lg.rand(4, generator=g))
    assert g.get_offset() == c.get_offset()
    # pickling keeps the state
    p = pickle.loads(pickle.dumps(g))
    assert lg.equal(lg.rand(3, generator=p), lg.rand(3, generator=g))
    # errors, as torch
    tg = torch.Generator()
    for bad, exc in (([1, 2], TypeError), (lg.zeros(16), TypeError),
                     (lg.zeros(10, dtype=lg.uint8), RuntimeError)):
        with pytest.raises(exc):
            g.set_state(bad)
    with pytest.raises(TypeError):
        tg.set_state(torch.zeros(10))
    with pytest.raises(RuntimeError):
        tg.set_state(torch.zeros(10, dtype=torch.uint8))


def test_global_rng_state_and_fork_rng():
    lg.manual_seed(11)
    state = lg.get_rng_state()
    assert state.dtype is lg.uint8
    a = lg.randn(4)
    lg.set_rng_state(state)
    assert lg.equal(a, lg.randn(4))
    assert lg.random.get_rng_state is lg.get_rng_state
    lg.manual_seed(11)
    before = lg.get_rng_state()
    with lg.random.fork_rng():
        lg.rand(10)
    assert lg.equal(before, lg.get_rng_state())
    with pytest.raises(RuntimeError):
        lg.set_rng_state(lg.zeros(3, dtype=lg.uint8))
    assert lg.random.manual_seed(2) is lg.default_generator
    assert lg.random.initial_seed() == 2


SAMPLERS = {
    "multinomial": lambda T, g: T.multinomial(T.tensor([0.2, 0.3, 0.5]), 4, True, generator=g),
    "bernoulli": lambda T, g: T.bernoulli(T.full((6,), 0.5), generator=g),
    "bernoulli_p": lambda T, g: T.bernoulli(T.zeros(6), 0.5, generator=g),
    "poisson": lambda T, g: T.poisson(T.full((6,), 3.0), generator=g),
    "binomial": lambda T, g: T.binomial(T.full((6,), 10.0), T.full((6,), 0.3), generator=g),
    "normal": lambda T, g: T.normal(0.0, 1.0, (6,), generator=g),
    "normal_tt": lambda T, g: T.normal(T.zeros(6), T.ones(6), generator=g),
    "random_": lambda T, g: T.zeros(6).random_(0, 100, generator=g),
    "exponential_": lambda T, g: T.zeros(6).exponential_(generator=g),
    "geometric_": lambda T, g: T.zeros(6).geometric_(0.2, generator=g),
    "cauchy_": lambda T, g: T.zeros(6).cauchy_(generator=g),
    "log_normal_": lambda T, g: T.zeros(6).log_normal_(generator=g),
    "bernoulli_": lambda T, g: T.zeros(6).bernoulli_(0.5, generator=g),
    "randint_like": lambda T, g: T.randint_like(T.zeros(6), 100, generator=g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_reproducible_with_seed_and_generator(name):
    fn = SAMPLERS[name]
    lg.manual_seed(123)
    a = fn(lg, None)
    lg.manual_seed(123)
    b = fn(lg, None)
    assert lg.equal(a, b)
    g1, g2 = lg.Generator().manual_seed(7), lg.Generator().manual_seed(7)
    assert lg.equal(fn(lg, g1), fn(lg, g2))
    # a generator's draws leave the default generator alone, and advance the generator
    lg.manual_seed(5)
    before = lg.get_rng_state()
    c = fn(lg, g1)
    assert lg.equal(before, lg.get_rng_state())
    if name not in ("multinomial",):
        draws = [fn(lg, g1) for _ in range(4)]
        assert not all(lg.equal(c, d) for d in draws)
    # torch accepts the same call (shape and dtype agree)
    r = fn(torch, torch.Generator().manual_seed(7))
    assert tuple(r.shape) == tuple(c.shape) and str(r.dtype)[6:] == c.dtype.name


# --------------------------------------------------------------------------------------
# multinomial
# --------------------------------------------------------------------------------------

def test_multinomial_with_replacement_frequencies():
    g = lg.Generator().manual_seed(0)
    p = lg.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 2.0, 0.0]])
    s = lg.multinomial(p, 20000, replacement=True, generator=g)
    assert s.shape == (2, 20000) and s.dtype is lg.int64
    for row, probs in zip(s.numpy(), p.numpy()):
        freq = np.bincount(row, minlength=4) / row.size
        expect = probs / probs.sum()
        assert np.all(np.abs(freq - expect) < 0.015), (freq, expect)
        assert freq[probs == 0].sum() == 0                    # never a zero weight


def test_multinomial_without_replacement():
    g = lg.Generator().manual_seed(1)
    p = lg.tensor([5.0, 1.0, 0.0, 3.0, 1.0])
    firsts = []
    for _ in range(3000):
        s = lg.multinomial(p, 4, generator=g).tolist()
        assert len(set(s)) == 4 and 2 not in s                   # distinct, zero weight last
        firsts.append(s[0])
    freq = np.bincount(firsts, minlength=5) / len(firsts)
    assert np.all(np.abs(freq - p.numpy() / 10.0) < 0.03), freq
    # all categories: a permutation, the zero weight last
    s = lg.multinomial(p, 5, generator=g).tolist()
    assert sorted(s) == [0, 1, 2, 3, 4] and s[-1] == 2
    # probability-weighted second draws: "remaining weight" rule (P(second=3 | first=0)=3/5)
    g.manual_seed(2)
    pairs = [tuple(lg.multinomial(p, 2, generator=g).tolist()) for _ in range(4000)]
    after0 = [b for a, b in pairs if a == 0]
    assert abs(sum(b == 3 for b in after0) / len(after0) - 0.6) < 0.05


MULTINOMIAL_ERRORS = [
    lambda T: T.multinomial(T.tensor([1.0, 0, 0]), 4),
    lambda T: T.multinomial(T.tensor([1.0, -1, 0]), 1),
    lambda T: T.multinomial(T.tensor([1.0, math.inf, 0]), 1),
    lambda T: T.multinomial(T.tensor([1.0, math.nan, 0]), 1),
    lambda T: T.multinomial(T.tensor([0.0, 0, 0]), 1),
    lambda T: T.multinomial(T.tensor([[1.0, 2], [0, 0]]), 1),
    lambda T: T.multinomial(T.tensor([1.0, 2]), 0),
    lambda T: T.multinomial(T.tensor([1.0, 2]), -1),
    lambda T: T.multinomial(T.tensor(1.0), 1),
    lambda T: T.multinomial(T.ones(2, 2, 2), 1),
    lambda T: T.multinomial(T.ones(2, 0), 1),
    lambda T: T.multinomial(T.tensor([1, 2]), 1),
    lambda T: T.multinomial(T.tensor([1.0, 2]), 1, out=T.empty(3, dtype=T.int32)),
]


@pytest.mark.parametrize("case", range(len(MULTINOMIAL_ERRORS)))
def test_multinomial_errors(case):
    t, l = both(MULTINOMIAL_ERRORS[case])
    assert t[0] == "err" and l == t, (t, l)


def test_multinomial_shapes_and_out():
    same(lambda T: T.multinomial(T.ones(0, 3), 2).shape)
    same(lambda T: T.multinomial(T.tensor([1.0, 0, 0]), 4, True))
    same(lambda T: T.multinomial(T.tensor([0.0, 0, 3]), 1))
    same(lambda T: T.multinomial(T.tensor([1.0, 0, 0]), 3)[0])
    same(lambda T: T.multinomial(T.tensor([1.0, 2], dtype=T.float16), 1).dtype)
    same(lambda T: T.multinomial(T.tensor([1.0, 2], dtype=T.float64), 3, True).shape)
    out = lg.empty(3, dtype=lg.int64)
    r = lg.multinomial(lg.tensor([1.0, 2]), 1, out=out)
    assert r is out and out.shape == (1,)
    x = lg.tensor([[1.0, 2.0]], requires_grad=True)
    assert not x.multinomial(2).requires_grad


# --------------------------------------------------------------------------------------
# bernoulli, poisson, binomial
# --------------------------------------------------------------------------------------

def test_bernoulli_statistics_and_semantics():
    g = lg.Generator().manual_seed(3)
    p = lg.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).expand(20000, 5)
    s = lg.bernoulli(p, generator=g)
    assert s.dtype is lg.float32 and s.shape == (20000, 5)
    m = s.mean(0).numpy()
    assert m[0] == 0.0 and m[4] == 1.0
    assert np.all(np.abs(m - np.array([0, 0.1, 0.5, 0.9, 1.0])) < 0.012)
    s2 = lg.bernoulli(lg.zeros(20000, dtype=lg.int64), 0.25, generator=g)
    assert s2.dtype is lg.int64 and abs(s2.double().mean().item() - 0.25) < 0.012
    b = lg.zeros(20000, dtype=lg.bool).bernoulli_(0.75, generator=g)
    assert b.dtype is lg.bool and abs(b.double().mean().item() - 0.75) < 0.012
    t = lg.zeros(4, 3).bernoulli_(lg.tensor([0.0, 1.0, 0.0]), generator=g)
    assert t.tolist() == [[0.0, 1.0, 0.0]] * 4
    assert lg.zeros(3).bernoulli(1.0).tolist() == [1.0, 1.0, 1.0]


BERNOULLI_ERRORS = [
    lambda T: T.bernoulli(T.tensor([0.0, 1, 2])),
    lambda T: T.bernoulli(T.tensor([0.0, 1, -1])),
    lambda T: T.bernoulli(T.tensor([0.0, 1, math.nan])),
    lambda T: T.bernoulli(T.tensor([0, 1])),
    lambda T: T.bernoulli(T.tensor([0.0, 1]), p=1.5),
    lambda T: T.zeros(3).bernoulli_(T.tensor([0.0, 1])),
    lambda T: T.zeros(3).bernoulli_(T.tensor([[0.0, 1, 1]])),
    lambda T: T.zeros(3).bernoulli_(2.0),
    lambda T: T.zeros(3).bernoulli_(T.tensor([0, 1, 1])),
    lambda T: T.zeros(3).bernoulli(T.tensor([0.0, 1, 1])),
    lambda T: T.zeros(3, requires_grad=True).bernoulli_(0.5),
]


@pytest.mark.parametrize("case", range(len(BERNOULLI_ERRORS)))
def test_bernoulli_errors(case):
    t, l = both(BERNOULLI_ERRORS[case])
    assert t[0] == "err" and l[0] == "err", (t, l)
    assert l[1] is t[1] or {t[1], l[1]} <= {RuntimeError, NotImplementedError}, (t, l)


def test_sample_gradients_are_zero_as_torch():
    for T in (torch, lg):
        x = T.tensor([0.5, 0.2], requires_grad=True)
        b = T.bernoulli(x)
        p = T.poisson(x)
        assert type(b.grad_fn).__name__ == "BernoulliBackward0"
        assert type(p.grad_fn).__name__ == "PoissonBackward0"
        (b * 3 + p).sum().backward()
        assert x.grad.tolist() == [0.0, 0.0]
        y = T.binomial(x, x)
        assert y.requires_grad
        with pytest.raises(RuntimeError, match="not implemented"):
            y.sum().backward()


def test_poisson_statistics_and_errors():
    g = lg.Generator().manual_seed(4)
    rates = lg.tensor([0.0, 0.5, 4.0, 100.0]).expand(20000, 4).double()
    s = lg.poisson(rates, generator=g)
    assert s.dtype is lg.float64 and s.shape == rates.shape
    v = s.numpy()
    assert np.all(v == np.floor(v)) and np.all(v[:, 0] == 0)
    assert np.allclose(v.mean(0), [0, 0.5, 4.0, 100.0], rtol=0.03, atol=0.02)
    assert np.allclose(v.var(0), [0, 0.5, 4.0, 100.0], rtol=0.06, atol=0.02)
    for bad in (lambda T: T.poisson(T.tensor([0.0, -1, 2])),
                lambda T: T.poisson(T.tensor([0.0, 1, math.nan])),
                lambda T: T.poisson(T.tensor([0, 1, 2]))):
        t, l = both(bad)
        assert t[0] == l[0] == "err"
    assert lg.poisson(lg.zeros(0, 3)).shape == (0, 3)
    assert lg.poisson(lg.tensor(2.0, dtype=lg.float16)).dtype is lg.float16


def test_binomial_statistics_and_semantics():
    g = lg.Generator().manual_seed(5)
    n = lg.tensor([0.0, 1.0, 10.0, 50.0]).expand(20000, 4)
    q = lg.tensor([0.5, 0.3, 0.5, 0.9])
    s = lg.binomial(n, q, generator=g)
    assert s.shape == (20000, 4) and s.dtype is lg.float32
    v = s.numpy()
    assert np.allclose(v.mean(0), [0, 0.3, 5.0, 45.0], rtol=0.03, atol=0.02)
    # clipping and truncation as torch (deterministic corner cases)
    same(lambda T: T.binomial(T.tensor([5.0, 10.0, -1.0]), T.tensor([0.0, 1.5, 0.5])))
    same(lambda T: T.binomial(T.tensor([10.0]), T.tensor([1.0])))
    for bad in (lambda T: T.binomial(T.tensor([5, 10]), T.tensor([0.5, 1.0])),
                lambda T: T.binomial(T.tensor([5.0, 10]), T.tensor([0.5, 1.0],
                                                                   dtype=T.float64))):
        t, l = both(bad)
        assert t[0] == l[0] == "err" and t[1] is l[1], (t, l)


# --------------------------------------------------------------------------------------
# normal overloads
# --------------------------------------------------------------------------------------

NORMAL_SHAPES = [
    lambda T: T.normal(T.zeros(2, 3), T.ones(3)),
    lambda T: T.normal(T.zeros(2, 3, dtype=T.float64), T.ones(3)),
    lambda T: T.normal(T.zeros(2, 3), 2.0),
    lambda T: T.normal(mean=T.zeros(2, 3)),
    lambda T: T.normal(0.0, T.ones(2, dtype=T.float64)),
    lambda T: T.normal(1.0, 2.0, (2, 3)),
    lambda T: T.normal(1.0, 2.0, size=(2, 3), dtype=T.float64),
    lambda T: T.normal(1, 2, (4,)),
    lambda T: T.normal(1.0, 2.0, (2,), requires_grad=True).requires_grad,
    lambda T: T.normal(T.zeros(2, 3), 1.0, out=T.empty(2, 3)),
    lambda T: T.normal(1.0, 1.0, (2,), out=T.empty(2, dtype=T.float64)),
]


@pytest.mark.parametrize("case", range(len(NORMAL_SHAPES)))
def test_normal_overload_shapes_and_dtypes(case):
    t, l = both(NORMAL_SHAPES[case])
    if t[0] == "ok" and len(t) == 4:
        t, l = t[:3], l[:3]
    assert t == l, (t, l)


NORMAL_ERRORS = [
    lambda T: T.normal(1.0, 2.0),
    lambda T: T.normal(T.zeros(2, 3), T.ones(2)),
    lambda T: T.normal(T.zeros(2, 3), -1.0),
    lambda T: T.normal(T.zeros(2, 3), T.tensor([-1.0, 1, 1])),
    lambda T: T.normal(T.zeros(2, 3, dtype=T.int64), 1.0),
    lambda T: T.normal(1.0, -2.0, (3,)),
]


@pytest.mark.parametrize("case", range(len(NORMAL_ERRORS)))
def test_normal_errors(case):
    t, l = both(NORMAL_ERRORS[case])
    assert t[0] == "err" and l[0] == "err", (t, l)
    assert t[1] is l[1] or {t[1], l[1]} <= {RuntimeError, NotImplementedError, ValueError}


def test_normal_statistics_and_gradients():
    g = lg.Generator().manual_seed(6)
    mean = lg.tensor([-3.0, 0.0, 10.0], dtype=lg.float64)
    std = lg.tensor([0.5, 1.0, 4.0], dtype=lg.float64)
    s = lg.normal(mean.expand(40000, 3), std, generator=g).numpy()
    assert np.allclose(s.mean(0), mean.numpy(), atol=0.05)
    assert np.allclose(s.std(0), std.numpy(), rtol=0.02)
    # gradients as torch's NormalBackward1/2/3: zero for mean and std (not reparameterized)
    for make in (lambda T, m, s: T.normal(m, s), lambda T, m, s: T.normal(m, 2.0),
                 lambda T, m, s: T.normal(1.0, s),
                 lambda T, m, s: T.normal(m[:1], s)):
        grads, names = [], []
        for T in (torch, lg):
            m = T.tensor([1.0, 2.0], dtype=T.float64, requires_grad=True)
            sd = T.tensor([0.5, 3.0], dtype=T.float32, requires_grad=True)
            y = make(T, m, sd)
            names.append(type(y.grad_fn).__name__)
            (y * T.tensor([2.0, 3.0], dtype=y.dtype)).sum().backward()
            grads.append([None if v.grad is None else v.grad.tolist() for v in (m, sd)])
        assert grads[0] == grads[1] and names[0] == names[1], (grads, names)
    m2 = lg.zeros(3, requires_grad=True)
    lg.normal(m2, 2.0).sum().backward()
    assert m2.grad.tolist() == [0.0, 0.0, 0.0]


# --------------------------------------------------------------------------------------
# in-place fills
# --------------------------------------------------------------------------------------

def test_random_fill_distributions():
    g = lg.Generator().manual_seed(8)
    n = 40000
    e = lg.zeros(n, dtype=lg.float64).exponential_(2.0, generator=g).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.01 and abs(e.std() - 0.5) < 0.015
    k = lg.zeros(n, dtype=lg.int64).geometric_(0.25, generator=g).numpy()
    assert k.min() >= 1 and abs(k.mean() - 4.0) < 0.1                  # mean 1/p
    assert abs((k == 1).mean() - 0.25) < 0.01
    c = lg.zeros(n, dtype=lg.float64).cauchy_(1.0, 2.0, generator=g).numpy()
    assert abs(np.median(c) - 1.0) < 0.06
    assert abs(np.percentile(c, 75) - 3.0) < 0.12                       # median + sigma
    ln = lg.zeros(n, dtype=lg.float64).log_normal_(0.5, 0.25, generator=g).numpy()
    assert ln.min() > 0 and abs(np.log(ln).mean() - 0.5) < 0.01
    assert abs(np.log(ln).std() - 0.25) < 0.01
    r = lg.zeros(n, dtype=lg.int64).random_(3, 10, generator=g).numpy()
    assert r.min() == 3 and r.max() == 9
    assert np.all(np.abs(np.bincount(r)[3:] / n - 1 / 7) < 0.01)
    f = lg.zeros(n).random_(generator=g).numpy()
    assert f.min() >= 0 and f.max() <= 2 ** 24 and np.all(f == np.floor(f))
    assert f.max() > 2 ** 23
    u8 = lg.zeros(n, dtype=lg.uint8).random_(generator=g).numpy()
    assert u8.min() == 0 and u8.max() == 255
    i64 = lg.zeros(n, dtype=lg.int64).random_(generator=g).numpy()
    assert i64.min() >= 0 and i64.max() > 2 ** 62
    b = lg.zeros(n, dtype=lg.bool).random_(generator=g).numpy()
    assert 0.48 < b.mean() < 0.52
    big = lg.zeros(n, dtype=lg.int64).random_(-2 ** 63, 2 ** 63 - 1, generator=g).numpy()
    assert big.min() < -2 ** 62 and big.max() > 2 ** 62


RANDOM_FILL_CASES = [
    lambda T: T.zeros(3).random_(5, 2),
    lambda T: T.zeros(3).random_(5, 5),
    lambda T: T.zeros(3, dtype=T.uint8).random_(300),
    lambda T: T.zeros(3, dtype=T.uint8).random_(-1, 3),
    lambda T: T.zeros(3, dtype=T.bool).random_(3),
    lambda T: T.zeros(3, dtype=T.float16).random_(0, 2 ** 20),
    lambda T: T.zeros(3).exponential_(-1.0),
    lambda T: T.zeros(3).exponential_(0.0),
    lambda T: T.zeros(3, dtype=T.int64).exponential_(),
    lambda T: T.zeros(3).geometric_(0.0),
    lambda T: T.zeros(3).geometric_(1.0),
    lambda T: T.zeros(3).cauchy_(1.0, -1.0),
    lambda T: T.zeros(3, dtype=T.int32).cauchy_(),
    lambda T: T.zeros(3).log_normal_(1.0, 0.0),
    lambda T: T.zeros(3, dtype=T.int64).log_normal_(),
    lambda T: T.zeros(3, requires_grad=True).random_(),
    lambda T: T.zeros(3, requires_grad=True).exponential_(),
    lambda T: T.zeros(3, requires_grad=True).geometric_(0.5),
    lambda T: T.randint_like(T.zeros(3), 5, 2),
]


@pytest.mark.parametrize("case", range(len(RANDOM_FILL_CASES)))
def test_random_fill_errors(case):
    t, l = both(RANDOM_FILL_CASES[case])
    assert t[0] == "err" and l[0] == "err", (t, l)


RANDOM_FILL_OK = [
    lambda T: T.zeros(3, dtype=T.uint8).random_(0, 256),
    lambda T: T.zeros(3, dtype=T.int8).random_(0, 128),
    lambda T: T.zeros(3, dtype=T.bool).random_(2),
    lambda T: T.zeros(3).random_(2, None),
    lambda T: T.zeros(3).random_(to=5),
    lambda T: T.zeros(3, dtype=T.int64).geometric_(0.5),
    lambda T: T.zeros(2, 3, dtype=T.float64).exponential_(),
    lambda T: T.zeros(2, 3, dtype=T.float16).cauchy_(),
    lambda T: T.zeros(2, 3, dtype=T.bfloat16).log_normal_(),
    lambda T: T.randint_like(T.zeros(3), 5),
    lambda T: T.randint_like(T.zeros(3, dtype=T.int32), 2, 5),
    lambda T: T.randint_like(T.zeros(3), 2, 5, dtype=T.int64),
    lambda T: T.randint_like(T.zeros(3), low=2, high=5),
    lambda T: T.randint_like(T.zeros(3), high=5),
]


@pytest.mark.parametrize("case", range(len(RANDOM_FILL_OK)))
def test_random_fill_shapes_and_dtypes(case):
    t, l = both(RANDOM_FILL_OK[case])
    assert t[0] == l[0] == "ok" and t[1:3] == l[1:3], (t, l)


def test_random_fill_bounds_are_respected():
    for lo, hi in ((2, 5), (-3, 0), (0, 1)):
        r = lg.zeros(2000, dtype=lg.int32).random_(lo, hi)
        assert r.min().item() == lo and r.max().item() == hi - 1
    r = lg.zeros(500).random_(2, None)
    assert r.min().item() >= 2
    with pytest.warns(UserWarning, match="out of bounds"):
        lg.zeros(3).random_(0, 2 ** 25)
    assert lg.randint_like(lg.zeros(2000), 2, 5).unique().tolist() == [2.0, 3.0, 4.0] \
        if hasattr(lg, "unique") else True


def test_random_fill_inplace_autograd():
    """A non-leaf overwritten by a random fill: its old history gets a zero gradient."""
    for T in (torch, lg):
        x = T.ones(3, requires_grad=True)
        y = x * 2
        y.exponential_()
        (y * 1).sum().backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0]
        v = T.zeros(3)
        assert v.bernoulli_(0.5)._version == 1


def test_random_in_compile_draws_fresh_numbers():
    @lg.compile
    def f(x):
        return x + lg.zeros_like(x).exponential_() + lg.bernoulli(lg.full_like(x, 0.5))

    x = lg.zeros(64)
    a, b = f(x), f(x)
    assert a.shape == (64,) and not lg.equal(a, b)
    assert a.min().item() >= 0

    @lg.compile
    def h(p):
        return lg.multinomial(p, 3) + lg.poisson(p).sum().long()

    p = lg.tensor([1.0, 2.0, 3.0])
    r = h(p)
    assert sorted(set(r.tolist())) == sorted(set(r.tolist())) and r.shape == (3,)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_rand_randn_and_full_like(dtype, compiled):
    """torch's complex draws: rand's real and imaginary parts uniform in [0, 1), randn's
    normal with variance 1/2 each; both and a complex fill value trace too (randn's
    complex parts were scaled by eager kernels, which a trace cannot run)."""
    d = getattr(lg, dtype)
    x = lg.zeros(400, 300, dtype=d)

    def f(x):
        return lg.rand_like(x), lg.randn_like(x), lg.full_like(x, 2 - 3j)
    u, n, c = (lg.compile(f) if compiled else f)(x)
    assert u.dtype == n.dtype == c.dtype == d
    for part in (u.real, u.imag):
        p = part.numpy()
        assert p.min() >= 0 and p.max() < 1 and abs(p.mean() - 0.5) < 0.01
    for part in (n.real, n.imag):
        p = part.numpy()
        assert abs(p.mean()) < 0.01 and abs(p.var() - 0.5) < 0.01
    assert not np.array_equal(u.real.numpy(), u.imag.numpy())
    assert np.all(c.numpy() == 2 - 3j)


@pytest.mark.parametrize("reduce", ["sum", "prod"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "bool", "float32"])
def test_sum_prod_with_dtype_give_that_dtype(reduce, dtype):
    """sum/prod(dtype=) return `dtype` (an integer reduction accumulated in int64 and
    cast: the same bits as torch's narrow accumulation), eager and compiled."""
    torch = pytest.importorskip("torch")
    a = np.array([[100, 120, 7], [2 ** 30, 2 ** 30, 3]], dtype=np.int64)
    want = getattr(torch, reduce)(torch.tensor(a), 1, dtype=getattr(torch, dtype)).numpy()
    x = lg.tensor(a)
    for got in (getattr(lg, reduce)(x, 1, dtype=getattr(lg, dtype)),
                lg.compile(lambda x: getattr(lg, reduce)(x, 1, dtype=getattr(lg, dtype)))(x)):
        assert got.dtype == getattr(lg, dtype)
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype", [lg.complex64, lg.complex128])
def test_normal_and_uniform_fill_complex_parts_like_torch(dtype):
    """torch fills the real and imaginary parts: uniform_ each in [from, to), normal_ each
    N(mean, std^2 / 2) (so |z - mean| has variance std^2)."""
    lg.manual_seed(3)
    z = lg.empty(40000, dtype=dtype).normal_(2.0, 3.0)
    assert z.dtype is dtype
    for part in (z.real, z.imag):
        assert abs(part.mean().item() - 2.0) < 0.05
        assert abs(part.std().item() - 3.0 / 2 ** 0.5) < 0.05
    u = lg.empty(40000, dtype=dtype).uniform_(-1.0, 3.0)
    for part in (u.real, u.imag):
        assert part.min().item() >= -1.0 and part.max().item() < 3.0
        assert abs(part.mean().item() - 1.0) < 0.05
    with pytest.raises(TypeError, match="floating point"):
        lg.empty(3, dtype=lg.int64).normal_()
