"""The index family (functions/selection.py, take_along_dim) against torch: values, dtypes,
gradients (torch autograd and gradcheck in float64), errors, and lg.compile against eager."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.filterwarnings("ignore:index_reduce:UserWarning"),
              pytest.mark.filterwarnings("ignore:The reduce argument:UserWarning")]

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 5))
SRC = rng.standard_normal((3, 4))
IDX = np.array([[0, 0, 1, 4], [2, 2, 2, 2], [1, 3, 3, 0]])


def both(v):
    """The same values as an llgrad and a torch tensor."""
    return lg.tensor(v), torch.tensor(v)


def values(t):
    return np.asarray(t._values())


def check_same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert tuple(x.shape) == tuple(y.shape)
        assert x.dtype.name == str(y.dtype).replace("torch.", "")
        np.testing.assert_allclose(values(x), y.detach().numpy(), rtol=1e-6, atol=1e-12)


def run_both(fn, arrays, ints=(), requires_grad=False):
    lt = [lg.tensor(a, requires_grad=requires_grad) for a in arrays]
    tt = [torch.tensor(a, requires_grad=requires_grad) for a in arrays]
    li = [lg.tensor(i) for i in ints]
    ti = [torch.tensor(i) for i in ints]
    return fn(lg, *lt, *li), fn(torch, *tt, *ti), lt, tt, li


# --------------------------------------------------------------------------------------
# values (table)
# --------------------------------------------------------------------------------------

x2 = np.arange(10.).reshape(2, 5)
VALUE_CASES = [
    ("take_along_dim broadcast index", lambda M, x, i: M.take_along_dim(x, i, 1),
     [x2], [np.array([[2, 3]])]),
    ("take_along_dim broadcast input", lambda M, x, i: M.take_along_dim(x, i, 1),
     [x2[:1]], [np.array([[1], [2], [3]])]),
    ("take_along_dim both", lambda M, x, i: M.take_along_dim(x, i, 2),
     [np.arange(12.).reshape(1, 3, 4)], [np.array([[[0, 3]], [[1, 1]]])]),
    ("take_along_dim flat", lambda M, x, i: M.take_along_dim(x, i),
     [x2], [np.array([[2, 3]])]),
    ("take_along_dim negative", lambda M, x, i: M.take_along_dim(x, i, 1),
     [x2], [np.array([[-1], [-5]])]),
    ("take_along_dim dim0", lambda M, x, i: M.take_along_dim(x, i, 0),
     [x2], [np.array([[1, 0, 1, 0, 1]])]),
    ("take", lambda M, x, i: M.take(x, i), [X], [np.array([[-1, 3], [14, 0]])]),
    ("take 0-d", lambda M, x, i: M.take(x, i), [np.array(2.5)], [np.array([0, 0])]),
    ("put", lambda M, x, s, i: M.put(x, i, s), [X, np.array([1., 2.])], [np.array([-1, 3])]),
    ("put accumulate", lambda M, x, s, i: M.put(x, i, s, accumulate=True),
     [X, np.array([1., 2.])], [np.array([3, 3])]),
    ("index_add alpha", lambda M, x, s, i: M.index_add(x, 1, i, s, alpha=2),
     [X, SRC[:, :2]], [np.array([4, 4])]),
    ("index_add int", lambda M, x, s, i: M.index_add(x, 0, i, s),
     [np.arange(6).reshape(3, 2), np.ones((2, 2), np.int64)], [np.array([2, 0])]),
    ("index_add 0-d", lambda M, x, s, i: M.index_add(x, 0, i, s),
     [np.array(1.), np.array(3.)], [np.array([0])]),
    ("index_copy", lambda M, x, s, i: M.index_copy(x, 1, i, s),
     [X, SRC[:, :2]], [np.array([4, 0])]),
    ("index_fill", lambda M, x, i: M.index_fill(x, 1, i, 7.), [X], [np.array([-1, 0])]),
    ("index_fill 0-d", lambda M, x, i: M.index_fill(x, 0, i, 3.), [np.array(1.)],
     [np.array([0])]),
    ("index_put", lambda M, x, v, i, j: M.index_put(x, (i, j), v),
     [X, np.array([2., 3.])], [np.array([1, 0]), np.array([2, -2])]),
    ("index_put accumulate", lambda M, x, v, i, j: M.index_put(x, (i, j), v, accumulate=True),
     [X, np.array([2., 3.])], [np.array([1, 1]), np.array([2, 2])]),
    ("index_put mask", lambda M, x, v, m: M.index_put(x, (m,), v), [X, np.array(5.)],
     [X > 0]),
    ("scatter multiply", lambda M, x, s, i: M.scatter(x, 1, i, s, reduce="multiply"),
     [X, SRC], [IDX]),
    ("scatter add", lambda M, x, s, i: M.scatter(x, 1, i, s, reduce="add"), [X, SRC], [IDX]),
    ("masked_select broadcast", lambda M, x, m: M.masked_select(x, m), [np.array([1., 2.])],
     [np.array([[True, False], [True, True]])]),
    ("masked_scatter broadcast", lambda M, x, s, m: M.masked_scatter(x, m, s),
     [np.array([0., 0.]), np.arange(1., 5.)], [np.array([[True, False], [True, True]])]),
    ("unique", lambda M, x: M.unique(x), [np.array([3, 1, 2, 3, 1])], []),
    ("unique inverse counts", lambda M, x: M.unique(x, return_inverse=True,
                                                    return_counts=True),
     [np.array([[3, 1], [2, 3]])], []),
    ("unique sorted=False", lambda M, x: M.unique(x, sorted=False, return_counts=True),
     [np.array([3., 1, 2, 3, 1])], []),
    ("unique dim 0", lambda M, x: M.unique(x, dim=0, return_inverse=True, return_counts=True),
     [np.array([[1, 2], [1, 2], [0, 5]])], []),
    ("unique dim 1", lambda M, x: M.unique(x, dim=1, return_inverse=True, return_counts=True),
     [np.array([[1, 2, 1], [1, 2, 1], [0, 5, 0]])], []),
    ("unique empty", lambda M, x: M.unique(x, return_inverse=True, return_counts=True),
     [np.zeros(0, np.int64)], []),
    ("unique nan", lambda M, x: M.unique(x), [np.array([1., np.nan, np.nan, 1.])], []),
    ("unique_consecutive", lambda M, x: M.unique_consecutive(x, return_inverse=True,
                                                             return_counts=True),
     [np.array([1, 1, 2, 2, 3, 1, 1, 2])], []),
    ("unique_consecutive dim", lambda M, x: M.unique_consecutive(x, dim=0,
                                                                 return_counts=True),
     [np.array([[1, 2], [1, 2], [0, 5]])], []),
    ("searchsorted", lambda M, s, v: M.searchsorted(s, v), [np.array([1., 2, 3]),
                                                            np.array([2., 0, 5, 2.5])], []),
    ("searchsorted nan", lambda M, s, v: M.searchsorted(s, v),
     [np.array([1., 2, np.nan]), np.array([2., 5., np.nan])], []),
    ("searchsorted right batched", lambda M, s, v: M.searchsorted(s, v, right=True),
     [np.array([[1., 2, 3], [2, 4, 6]]), np.array([[2.], [5.]])], []),
    ("searchsorted side", lambda M, s, v: M.searchsorted(s, v, side="right"),
     [np.array([1., 2, 2, 3]), np.array([2.])], []),
    ("searchsorted sorter", lambda M, s, v, o: M.searchsorted(s, v, sorter=o),
     [np.array([3., 1, 2]), np.array([2.5, 0.])], [np.array([1, 2, 0])]),
    ("searchsorted int32", lambda M, s, v: M.searchsorted(s, v, out_int32=True),
     [np.array([1, 2, 3]), np.array([2, 9])], []),
    ("searchsorted scalar", lambda M, s: M.searchsorted(s, 2.5), [np.array([1., 2, 3])], []),
    ("bucketize", lambda M, v, s: M.bucketize(v, s), [np.array([[2., 0.5, 3.5]]),
                                                      np.array([1., 2, 3])], []),
    ("bucketize right", lambda M, v, s: M.bucketize(v, s, right=True),
     [np.array([[2., 0.5, 3.]]), np.array([1., 2, 3])], []),
    ("isin", lambda M, e, t: M.isin(e, t), [np.array([1, 2, 3]), np.array([2, 5])], []),
    ("isin invert scalar", lambda M, e: M.isin(e, 2, invert=True), [np.array([1, 2, 3])], []),
    ("isin scalar elements", lambda M, t: M.isin(2, t), [np.array([1, 2, 3])], []),
    ("nonzero_static pad", lambda M, x: M.nonzero_static(x, size=3),
     [np.array([0, 1, 0, 2])], []),
    ("nonzero_static truncate", lambda M, x: M.nonzero_static(x, size=1, fill_value=9),
     [np.array([[0, 1], [0, 2]])], []),
    ("tril_indices", lambda M: M.tril_indices(3, 4, 1), [], []),
    ("triu_indices", lambda M: M.triu_indices(4, 3, -1), [], []),
    ("tril_indices empty", lambda M: M.tril_indices(0, 3), [], []),
    ("unravel_index", lambda M, i: M.unravel_index(i, (2, 3)), [], [np.array([-1, 5, 0])]),
    ("unravel_index 0-d", lambda M, i: M.unravel_index(i, (2, 3)), [], [np.array(4)]),
    # OpInfo gaps: int32 and empty indices of any dtype, 0-d inputs, bool max/min with dim
    ("gather int32 index", lambda M, x, i: M.gather(x, 0, i), [X],
     [np.array([[2, 0, 1, 1, 0]], dtype=np.int32)]),
    ("gather empty uint8 index", lambda M, x, i: M.gather(x, 0, i), [X[0]],
     [np.zeros((2, 0), dtype=np.uint8)]),
    ("gather 0-d input 1-d index", lambda M, x, i: M.gather(x, 0, i), [np.array(2.5)],
     [np.array([0, 0])]),
    ("max dim bool", lambda M, x: M.max(x, 1), [np.array([[0, 1, 1], [0, 0, 0]]) > 0], []),
    ("min dim bool keepdim", lambda M, x: M.min(x, 0, keepdim=True),
     [np.array([[1, 1, 0], [1, 0, 0]]) > 0], []),
    ("sum_to_size bool 0-d", lambda M, x: x.sum_to_size(()), [np.array(True)], []),
    ("sum_to_size bool", lambda M, x: x.sum_to_size(1, 3),
     [np.array([[1, 1, 0], [1, 0, 0]]) > 0], []),
    ("sum_to_size bool same size", lambda M, x: x.sum_to_size(2, 3),
     [np.array([[1, 1, 0], [1, 0, 0]]) > 0], []),
]

for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        VALUE_CASES.append((f"scatter_reduce {red} include_self={inc}",
                            lambda M, x, s, i, red=red, inc=inc:
                            M.scatter_reduce(x, 1, i, s, red, include_self=inc),
                            [X, SRC], [IDX]))
        VALUE_CASES.append((f"scatter_reduce int {red} include_self={inc}",
                            lambda M, x, s, i, red=red, inc=inc:
                            M.scatter_reduce(x, 0, i, s, red, include_self=inc),
                            [np.array([1, 2, 3, 4]), np.array([-5, 2, 7])],
                            [np.array([0, 0, 1])]))
for red in ("prod", "mean", "amax", "amin"):
    for inc in (True, False):
        VALUE_CASES.append((f"index_reduce {red} include_self={inc}",
                            lambda M, x, s, i, red=red, inc=inc:
                            M.index_reduce(x, 1, i, s, red, include_self=inc),
                            [X, SRC[:, :3]], [np.array([4, 4, 0])]))


@pytest.mark.parametrize("name,fn,arrays,ints", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_match_torch(name, fn, arrays, ints):
    got, want, *_ = run_both(fn, arrays, ints)
    check_same(got, want)


def test_take_along_dim_reported_case():
    out = lg.take_along_dim(lg.arange(10.).reshape(2, 5), lg.tensor([[2, 3]]), 1)
    assert out.tolist() == [[2., 3.], [7., 8.]]
    f = lg.compile(lambda a, i: lg.take_along_dim(a, i, 1))
    assert f(lg.arange(10.).reshape(2, 5), lg.tensor([[2, 3]])).tolist() == \
        [[2., 3.], [7., 8.]]


def test_non_contiguous_inputs():
    base = lg.tensor(X).t()                      # (5, 3), transposed strides
    tb = torch.tensor(X).t()
    i = np.array([[0, 2, 1]])
    check_same(lg.take_along_dim(base, lg.tensor(i), 0),
               torch.take_along_dim(tb, torch.tensor(i), 0))
    check_same(lg.index_add(base, 0, lg.tensor([4, 4]), lg.ones(2, 3, dtype=lg.float64)),
               torch.index_add(tb, 0, torch.tensor([4, 4]), torch.ones(2, 3, dtype=torch.float64)))
    check_same(lg.scatter_reduce(base, 0, lg.tensor([[1, 1, 0]]), lg.tensor(X[:1, :3]), "amax"),
               torch.scatter_reduce(tb, 0, torch.tensor([[1, 1, 0]]), torch.tensor(X[:1, :3]),
                                    "amax"))
    check_same(lg.take(base, lg.tensor([1, 5])), torch.take(tb, torch.tensor([1, 5])))


def test_inplace_methods():
    for name, args in [("put_", ([-1, 0], [1., 2.])), ("index_add_", (1, [0, 0], SRC[:, :2])),
                       ("index_copy_", (1, [3, 1], SRC[:, :2])),
                       ("index_fill_", (1, [0, -1], 2.)),
                       ("index_reduce_", (1, [0, 0], SRC[:, :2], "amax")),
                       ("scatter_reduce_", (1, IDX, SRC, "mean")),
                       ("masked_scatter_", (X > 0, np.arange(15.)))]:
        a, b = lg.tensor(X), torch.tensor(X)

        def conv(M, v):
            if isinstance(v, (list, np.ndarray)):
                return M.tensor(np.asarray(v))
            return v
        ra = getattr(a, name)(*[conv(lg, v) for v in args])
        rb = getattr(b, name)(*[conv(torch, v) for v in args])
        assert ra is a and rb is b
        check_same(a, b)
    a, b = lg.tensor(X), torch.tensor(X)
    a.index_put_((lg.tensor([0, 2]),), lg.tensor(1., dtype=lg.float64), accumulate=True)
    b.index_put_((torch.tensor([0, 2]),), torch.tensor(1., dtype=torch.float64), accumulate=True)
    check_same(a, b)


def test_inplace_records_and_checks_leaves():
    leaf = lg.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.index_fill_(1, lg.tensor([0]), 1.)
    y = leaf * 1
    y.index_add_(1, lg.tensor([0, 0]), lg.tensor(SRC[:, :2]))
    y.sum().backward()
    np.testing.assert_allclose(values(leaf.grad), np.ones((3, 5)))


# --------------------------------------------------------------------------------------
# gradients
# --------------------------------------------------------------------------------------

GRAD_CASES = [
    ("take", lambda M, x, i: M.take(x, i), [X], [np.array([[-1, 3], [3, 0]])]),
    ("put", lambda M, x, s, i: M.put(x, i, s), [X, np.array([1., 2.])], [np.array([-1, 3])]),
    ("put accumulate", lambda M, x, s, i: M.put(x, i, s, accumulate=True),
     [X, np.array([1., 2.])], [np.array([3, 3])]),
    ("index_add", lambda M, x, s, i: M.index_add(x, 1, i, s, alpha=3), [X, SRC[:, :2]],
     [np.array([4, 4])]),
    ("index_copy", lambda M, x, s, i: M.index_copy(x, 1, i, s), [X, SRC[:, :2]],
     [np.array([4, 0])]),
    ("index_fill tensor value", lambda M, x, v, i: M.index_fill(x, 1, i, v),
     [X, np.array(2.)], [np.array([4, 0])]),
    ("index_put", lambda M, x, v, i, j: M.index_put(x, (i, j), v), [X, np.array([2., 3.])],
     [np.array([1, 0]), np.array([2, 2])]),
    ("index_put accumulate", lambda M, x, v, i, j: M.index_put(x, (i, j), v, accumulate=True),
     [X, np.array([2., 3.])], [np.array([1, 1]), np.array([2, 2])]),
    ("masked_select", lambda M, x, m: M.masked_select(x, m), [X], [X > 0]),
    ("masked_scatter", lambda M, x, s, m: M.masked_scatter(x, m, s),
     [X, rng.standard_normal(20)], [X > 0]),
    ("take_along_dim broadcast", lambda M, x, i: M.take_along_dim(x, i, 1), [X[:1]],
     [np.array([[1], [2], [-1]])]),
    ("take_along_dim flat", lambda M, x, i: M.take_along_dim(x, i), [X],
     [np.array([[1, 1], [7, 14]])]),
]
SRC_ZEROS = SRC.copy()
SRC_ZEROS[0, 1] = SRC_ZEROS[2, 1] = SRC_ZEROS[2, 2] = 0.
X_ZERO = X.copy()
X_ZERO[0, 0] = 0.
for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        GRAD_CASES.append((f"scatter_reduce {red} {inc}",
                           lambda M, x, s, i, red=red, inc=inc:
                           M.scatter_reduce(x, 1, i, s, red, include_self=inc), [X, SRC], [IDX]))
GRAD_CASES.append(("scatter_reduce prod zeros", lambda M, x, s, i:
                   M.scatter_reduce(x, 1, i, s, "prod"), [X_ZERO, SRC_ZEROS], [IDX]))
GRAD_CASES.append(("scatter_reduce amax ties (torch splits evenly)", lambda M, x, s, i:
                   M.scatter_reduce(x, 1, i, s, "amax"),
                   [np.ones((3, 5)), np.array([[1., 1, 2, 2], [0, 0, 0, 0], [1, 1, 1, 1]])],
                   [IDX]))
for red in ("prod", "mean", "amax", "amin"):
    GRAD_CASES.append((f"index_reduce {red}", lambda M, x, s, i, red=red:
                       M.index_reduce(x, 1, i, s, red, include_self=False),
                       [X, SRC[:, :2]], [np.array([4, 4])]))


@pytest.mark.parametrize("name,fn,arrays,ints", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_match_torch(name, fn, arrays, ints):
    got, want, lt, tt, li = run_both(fn, arrays, ints, requires_grad=True)
    check_same(got, want)
    w = rng.standard_normal(tuple(want.shape))
    (got * lg.tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for a, b in zip(lt, tt):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            np.testing.assert_allclose(values(a.grad), b.grad.numpy(), rtol=1e-6, atol=1e-12)
    if "ties" not in name:                  # a tie is a kink: no derivative to check
        assert lg.autograd.gradcheck(lambda *xs: fn(lg, *xs, *li),
                                     [lg.tensor(a, requires_grad=True) for a in arrays])


def test_double_backward_through_index_add():
    x = lg.tensor(X, requires_grad=True)
    s = lg.tensor(SRC[:, :2], requires_grad=True)
    assert lg.autograd.gradgradcheck(lambda x, s: lg.index_add(x, 1, lg.tensor([1, 1]), s) ** 2,
                                     [x, s])


def test_grad_fn_names():
    x = lg.tensor(X, requires_grad=True)
    assert type(lg.take(x, lg.tensor([1])).grad_fn).__name__ == "TakeBackward0"
    assert type(lg.scatter_reduce(x, 1, lg.tensor(IDX), lg.tensor(SRC), "amax")
                .grad_fn).__name__ == "ScatterReduceBackward0"
    assert type(lg.masked_select(x, lg.tensor(X > 0)).grad_fn).__name__ == \
        "MaskedSelectBackward0"
    assert type(lg.index_fill(x, 0, lg.tensor([0]), 1.).grad_fn).__name__ == \
        "IndexFillBackward0"


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------

ERROR_CASES = [
    ("take_along_dim rank", lambda M: M.take_along_dim(M.zeros(2, 5), M.tensor([2, 3]), 1),
     RuntimeError, "take_along_dim"),
    ("take_along_dim dtype", lambda M: M.take_along_dim(M.zeros(2, 5), M.tensor([[2]],
                                                                                dtype=M.int32), 1),
     RuntimeError, "take_along_dim"),
    ("take_along_dim bad broadcast", lambda M: M.take_along_dim(M.zeros(2, 5),
                                                               M.tensor([[1], [2], [3]]), 1),
     RuntimeError, ""),
    ("take out of range", lambda M: M.take(M.zeros(2, 5), M.tensor([10])), IndexError,
     "out of range"),
    ("put sizes", lambda M: M.put(M.zeros(2, 2), M.tensor([0, 1]), M.tensor([1., 2, 3])),
     IndexError, "same number of elements"),
    ("index_add range", lambda M: M.index_add(M.zeros(2, 5), 1, M.tensor([5]), M.ones(2, 1)),
     RuntimeError, "out of bounds for dimension 1 with size 5"),
    ("index_add negative", lambda M: M.index_add(M.zeros(2, 5), 1, M.tensor([-1]),
                                                 M.ones(2, 1)),
     RuntimeError, "index -1 is out of bounds"),
    ("index_add source size", lambda M: M.index_add(M.zeros(2, 5), 1, M.tensor([0]),
                                                    M.ones(2, 2)),
     RuntimeError, "Number of indices"),
    ("index_copy range", lambda M: M.index_copy(M.zeros(2, 5), 1, M.tensor([-1]),
                                                M.ones(2, 1)),
     IndexError, "out of bounds"),
    ("index_fill range", lambda M: M.index_fill(M.zeros(2, 5), 1, M.tensor([5]), 1.),
     IndexError, "out of bounds"),
    ("index_fill value rank", lambda M: M.index_fill(M.zeros(2, 5), 1, M.tensor([0]),
                                                     M.tensor([1.])),
     RuntimeError, "0-dimensional"),
    ("index_put dtype", lambda M: M.index_put(M.zeros(3), (M.tensor([0]),),
                                              M.tensor([2], dtype=M.int64)),
     RuntimeError, "dtypes match"),
    ("index_reduce sum", lambda M: M.index_reduce(M.zeros(3), 0, M.tensor([0]),
                                                  M.tensor([1.]), "sum"),
     RuntimeError, "prod, mean, amax or amin"),
    ("scatter_reduce reduce", lambda M: M.scatter_reduce(M.zeros(3), 0, M.tensor([0]),
                                                         M.tensor([1.]), "foo"),
     RuntimeError, "sum, prod, mean, amax or amin"),
    ("scatter_reduce range", lambda M: M.scatter_reduce(M.zeros(3), 0, M.tensor([3]),
                                                        M.tensor([1.]), "amax"),
     RuntimeError, "out of bounds"),
    ("scatter reduce max", lambda M: M.scatter(M.zeros(3), 0, M.tensor([0]), M.tensor([1.]),
                                               reduce="max"),
     RuntimeError, "add or multiply"),
    ("masked_select mask dtype", lambda M: M.masked_select(M.zeros(2), M.tensor([1, 0])),
     RuntimeError, "BoolTensor"),
    ("masked_scatter short source", lambda M: M.masked_scatter(M.zeros(2, 2),
                                                               M.tensor([True, False]),
                                                               M.ones(1)),
     RuntimeError, "Number of elements of source"),
    ("searchsorted side", lambda M: M.searchsorted(M.tensor([1., 2]), M.tensor([1.]),
                                                   side="left", right=True),
     RuntimeError, "opposites"),
    ("searchsorted shapes", lambda M: M.searchsorted(M.tensor([[1, 2, 3]]), M.tensor([2.5])),
     RuntimeError, "boundaries tensor"),
    ("bucketize 2-d", lambda M: M.bucketize(M.tensor([2.5]), M.tensor([[1., 2, 3]])),
     RuntimeError, "boundaries tensor must be 1 dimension"),
    ("unravel_index float", lambda M: M.unravel_index(M.tensor([1.]), (2, 3)), TypeError,
     "integer dtype"),
    ("unravel_index shape", lambda M: M.unravel_index(M.tensor([1]), (2, -3)), ValueError,
     "negative"),
]


@pytest.mark.parametrize("name,fn,error,text", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_torch(name, fn, error, text):
    with pytest.raises(error) as torch_err:
        fn(torch)
    with pytest.raises(error) as lg_err:
        fn(lg)
    assert text in str(lg_err.value)
    assert text in str(torch_err.value)


def test_errors_name_the_op():
    with pytest.raises(RuntimeError, match=r"^index_add"):
        lg.index_add(lg.zeros(2, 5), 1, lg.tensor([5]), lg.ones(2, 1))
    with pytest.raises(IndexError, match=r"^take"):
        lg.take(lg.zeros(3), lg.tensor([-4]))
    with pytest.raises(RuntimeError, match=r"^take_along_dim.*index 9.*dimension 1 with size 5"):
        lg.take_along_dim(lg.zeros(2, 5), lg.tensor([[9]]), 1)


# --------------------------------------------------------------------------------------
# lg.compile
# --------------------------------------------------------------------------------------

_V = lg.tensor([0, 4])
_I = lg.tensor(IDX)
COMPILE_CASES = {
    "take_along_dim": lambda x, s: lg.take_along_dim(x, lg.tensor([[1, -2]]), 1),
    "take_along_dim flat": lambda x, s: lg.take_along_dim(x, lg.tensor([[1, -2]])),
    "take": lambda x, s: lg.take(x, lg.tensor([[-1, 3], [3, 0]])),
    "put": lambda x, s: lg.put(x, lg.tensor([1, -1]), s[0, :2], accumulate=True),
    "index_add": lambda x, s: lg.index_add(x, 1, _V, s[:, :2], alpha=2),
    "index_copy": lambda x, s: lg.index_copy(x, 1, _V, s[:, :2]),
    "index_fill": lambda x, s: lg.index_fill(x, 1, _V, s[0, 0]),
    "index_put": lambda x, s: lg.index_put(x, (lg.tensor([1, 1]), lg.tensor([2, 2])), s[0, :2],
                                           accumulate=True),
    "scatter_reduce sum": lambda x, s: lg.scatter_reduce(x, 1, _I, s, "sum",
                                                         include_self=False),
    "scatter_reduce mean": lambda x, s: lg.scatter_reduce(x, 1, _I, s, "mean"),
    "scatter_reduce amax": lambda x, s: lg.scatter_reduce(x, 1, _I, s, "amax"),
    "scatter_reduce amin": lambda x, s: lg.scatter_reduce(x, 1, _I, s, "amin",
                                                          include_self=False),
    "scatter_reduce prod": lambda x, s: lg.scatter_reduce(x, 1, _I, s, "prod"),
    "index_reduce amax": lambda x, s: lg.index_reduce(x, 1, _V, s[:, :2], "amax",
                                                      include_self=False),
    "searchsorted": lambda x, s: lg.searchsorted(lg.tensor([-1., 0., 1.]), x, right=True),
    "bucketize": lambda x, s: lg.bucketize(x, lg.tensor([-1., 0., 1.])),
    "isin": lambda x, s: lg.isin(lg.round(x), lg.tensor([0., 1.])),
    "nonzero_static": lambda x, s: lg.nonzero_static(lg.gt(x, 0), size=20),
    "unravel_index": lambda x, s: lg.unravel_index(lg.argmax(x), (3, 5))[1],
}


@pytest.mark.parametrize("name", list(COMPILE_CASES))
def test_compiled_equals_eager(name):
    fn = COMPILE_CASES[name]
    x, s = lg.tensor(X), lg.tensor(SRC)
    want = fn(x, s)
    cf = lg.compile(fn)
    got = cf(x, s)
    assert cf.graph_breaks == []
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(values(got), values(want), rtol=1e-6)


def test_compiled_gradient_of_scatter_reduce_amax():
    def loss(x, s):
        return (lg.scatter_reduce(x, 1, _I, s, "amax") ** 2).sum()
    x = lg.tensor(X, requires_grad=True)
    s = lg.tensor(SRC, requires_grad=True)
    loss(x, s).backward()
    gx, gs = values(x.grad), values(s.grad)
    x.grad = s.grad = None
    lg.compile(loss)(x, s).backward()
    np.testing.assert_allclose(values(x.grad), gx, rtol=1e-6)
    np.testing.assert_allclose(values(s.grad), gs, rtol=1e-6)


@pytest.mark.parametrize("fn", [lambda x: lg.masked_select(x, x > 0),
                                lambda x: lg.unique(lg.round(x)),
                                lambda x: lg.masked_scatter(x, x > 0, x.reshape(-1))])
def test_data_dependent_sizes_are_graph_breaks(fn):
    x = lg.tensor(X)
    cf = lg.compile(fn)
    np.testing.assert_allclose(values(cf(x)), values(fn(x)))
    assert len(cf.graph_breaks) == 1


def test_forward_mode_of_host_scatter_reduce():
    import llgrad.autograd.forward_ad as fwAD
    x, s = lg.tensor(X), lg.tensor(SRC)
    tx, ts = lg.tensor(rng.standard_normal(X.shape)), lg.tensor(rng.standard_normal(SRC.shape))
    for red in ("amax", "prod"):
        def f(a, b):
            return lg.scatter_reduce(a, 1, _I, b, red)
        with fwAD.dual_level():
            out = f(fwAD.make_dual(x, tx), fwAD.make_dual(s, ts))
            tangent = fwAD.unpack_dual(out).tangent
        eps = 1e-6
        numeric = (f(x + eps * tx, s + eps * ts) - f(x - eps * tx, s - eps * ts)) / (2 * eps)
        np.testing.assert_allclose(values(tangent), values(numeric), atol=1e-6)
