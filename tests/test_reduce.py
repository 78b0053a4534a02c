"""Reductions: registry entries, the kernel generator and eager dispatch, against NumPy.

Tables: every op x dtype x shape x axes (incl. negative axes and keepdim), layouts that are
not contiguous (transposed, strided, expanded, negative strides), NaN/Inf, argmax ties,
the multi-threaded paths (column splits and two-stage partials), `sum_to_shape`, error
cases, a hypothesis property test, and the accuracy of a 10M-element float32 sum.
"""
from __future__ import annotations

import itertools
import time
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llgrad  # noqa: F401  (fills the op registry)
from llgrad.schedule import reduce as codegen
from llgrad.codegen.target import get_target
from llgrad.eager import reduce as R
from llgrad.eager import views
from llgrad.ir import dtypes as dt
from llgrad.ir import registry
from llgrad.ir.graph import Builder
from llgrad.ir.registry import Group
from llgrad.ir.types import TensorType
from llgrad.runtime import cache, launch
from llgrad.tensor import Tensor

OPS = ("sum", "prod", "amax", "amin", "argmax", "argmin")
DTYPES = (dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.bool_)
SHAPES = ((), (7,), (3, 5), (2, 3, 4), (2, 3, 1, 5), (0,), (3, 0), (2, 0, 3), (1, 1))


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (what a bfloat16 tensor stores)."""
    bits = np.array(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(a), np.uint16(0x7FC0), r).astype(np.uint16)


def make(a: np.ndarray, d: dt.DType) -> tuple[Tensor, np.ndarray]:
    """A tensor of dtype `d` holding `a`'s values, and the values it really holds."""
    if d is dt.bfloat16:
        t = Tensor._from_numpy(bf16_bits(a), dtype=dt.bfloat16)
    else:
        t = Tensor._from_numpy(np.array(a, dtype=d.np))
    return t, np.array(t._values())


def sample(shape: tuple[int, ...], d: dt.DType, op: str, rng: np.random.Generator
           ) -> np.ndarray:
    """Values that suit the op: products stay near 1, integers small, ties likely in ints."""
    if d is dt.bool_:
        return rng.random(shape) < 0.5
    if d.is_integer:
        lo, hi = (-2, 3) if op == "prod" else (-50, 50)
        return rng.integers(lo, hi, size=shape)
    if op == "prod":
        return rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape)
    return rng.standard_normal(shape) * 4


def reference(op: str, x: np.ndarray, axes: tuple[int, ...], keepdim: bool) -> np.ndarray:
    """The registry's NumPy reference; float16/bfloat16 sums/prods come from float64."""
    return np.asarray(registry.get(op).reference(x, axes=axes, keepdim=keepdim))


UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}


def check(op: str, d: dt.DType, got: Tensor, x: np.ndarray, axes: tuple[int, ...],
          keepdim: bool) -> None:
    """Exact for max/min/arg ops and integers; floats within a rounding-error bound."""
    out_t = registry.get(op).infer((TensorType(d, x.shape),), axes=axes, keepdim=keepdim)
    assert got.shape == out_t.shape, (op, x.shape, axes, keepdim)
    assert got.dtype is out_t.dtype
    g = np.array(got._values()).astype(np.float64 if d.is_floating_point else None)
    msg = f"{op} {d.name} {x.shape} axes={axes} keepdim={keepdim}"
    if op in ("amax", "amin", "argmax", "argmin") or not d.is_floating_point:
        np.testing.assert_array_equal(g, reference(op, x, axes, keepdim), err_msg=msg)
        return
    x64 = x.astype(np.float64)
    exact = reference(op, x64, axes, keepdim)
    n = x.size // max(exact.size, 1)                 # elements per output
    u_out, u_acc = UNIT[d.name], UNIT[d.compute.name]
    if op == "prod":
        tiny = float(np.finfo(np.float32 if d is dt.bfloat16 else d.np).smallest_subnormal)
        bound = (2 * u_out + 4 * u_acc * n) * np.abs(exact) + tiny
    else:
        lanes = 32 + (n / 16 if d is dt.float64 else 0)
        bound = 2 * u_out * np.abs(exact) + lanes * u_acc * reference("sum", np.abs(x64),
                                                                       axes, keepdim)
    err = np.abs(g - exact)
    finite = np.isfinite(exact)
    assert np.array_equal(np.isnan(g), np.isnan(exact)), msg
    assert np.all(g[~finite & ~np.isnan(exact)] == exact[~finite & ~np.isnan(exact)]), msg
    assert np.all(err[finite] <= bound[finite] + 1e-300), \
        f"{msg}: max error {err[finite].max()}, bound {bound[finite].min()}"


def axes_cases(ndim: int, arg: bool) -> list[tuple[int, ...]]:
    """Every subset of axes (positive and a negative spelling); arg ops: () or one axis."""
    if arg:
        return [()] + [(a,) for a in range(ndim)] + [(-1,)] * (ndim > 0)
    cases: list[tuple[int, ...]] = [()]
    for k in range(1, ndim + 1):
        for combo in itertools.combinations(range(ndim), k):
            cases.append(combo)
            cases.append(tuple(a - ndim for a in combo))
    return cases


def valid(op: str, d: dt.DType, shape: tuple[int, ...], axes: tuple[int, ...]) -> bool:
    """False where the op must raise (empty max, argmax of bool): tested separately."""
    if op in ("argmax", "argmin") and d is dt.bool_:
        return False
    if op in ("sum", "prod"):
        return True
    norm = {a % max(len(shape), 1) for a in axes} if axes else set(range(len(shape)))
    return all(shape[a] for a in norm if a < len(shape))


# --------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------

BACKWARD = {"sum": ("SumBackward1", "SumBackward0"), "prod": ("ProdBackward1", "ProdBackward0"),
            "amax": ("AmaxBackward0", "AmaxBackward0"), "amin": ("AminBackward0", "AminBackward0"),
            "argmax": (None, None), "argmin": (None, None)}


@pytest.mark.parametrize("op", OPS)
def test_registry_entry(op: str) -> None:
    from llgrad.ops.reduction import backward_name
    o = registry.get(op)
    assert o.group is Group.REDUCE and o.nin == 1
    assert [a.name for a in o.attrs] == ["axes", "keepdim"]
    assert o.normalize_attrs({}) == (("axes", ()), ("keepdim", False))
    assert o.reference is not None and o.infer is not None
    assert (backward_name(op, (0,)), backward_name(op, ())) == BACKWARD[op]


@pytest.mark.parametrize("op,d,expected", [
    ("sum", dt.float16, dt.float16), ("sum", dt.bfloat16, dt.bfloat16),
    ("sum", dt.int32, dt.int64), ("sum", dt.bool_, dt.int64), ("sum", dt.uint8, dt.int64),
    ("prod", dt.int8, dt.int64), ("prod", dt.float64, dt.float64),
    ("amax", dt.int32, dt.int32), ("amin", dt.bool_, dt.bool_),
    ("argmax", dt.float16, dt.int64), ("argmin", dt.int8, dt.int64),
])
def test_result_dtypes(op: str, d: dt.DType, expected: dt.DType) -> None:
    assert registry.get(op).infer((TensorType(d, (2, 3)),), axes=(1,), keepdim=False).dtype \
        is expected


@pytest.mark.parametrize("op,shape,axes,keepdim,expected", [
    ("sum", (2, 3, 4), (), False, ()), ("sum", (2, 3, 4), (), True, (1, 1, 1)),
    ("sum", (2, 3, 4), (1,), False, (2, 4)), ("sum", (2, 3, 4), (-1, 0), True, (1, 3, 1)),
    ("sum", (), (), True, ()), ("sum", (), (0,), False, ()), ("sum", (), (-1,), True, ()),
    ("amax", (0, 3), (1,), False, (0,)), ("prod", (0, 3), (0,), True, (1, 3)),
    ("argmax", (2, 3), (), False, ()), ("argmax", (2, 3), (), True, (1, 1)),
    ("argmin", (2, 3), (-1,), True, (2, 1)), ("argmax", (), (0,), False, ()),
])
def test_shape_rule(op: str, shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool,
                    expected: tuple[int, ...]) -> None:
    b = Builder()
    x = b.param(TensorType(dt.float32, shape))
    node = b.op(op, x, axes=axes, keepdim=keepdim)
    assert node.shape == expected


# --------------------------------------------------------------------------------------
# values: op x dtype x shape x axes x keepdim
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", OPS)
def test_table(op: str, d: dt.DType) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{op}-{d.name}".encode()))
    arg = op in ("argmax", "argmin")
    checked = refused = 0
    for shape in SHAPES:
        t, x = make(sample(shape, d, op, rng), d)
        for axes in axes_cases(len(shape), arg):
            for keepdim in (False, True):
                if not valid(op, d, shape, axes):
                    with pytest.raises((IndexError, RuntimeError, TypeError), match=op):
                        R.run(op, t, axes, keepdim)
                    refused += 1
                    continue
                check(op, d, R.run(op, t, axes, keepdim), x, axes, keepdim)
                checked += 1
    if arg and d is dt.bool_:
        assert checked == 0 and refused > 20          # argmax of bool is refused (PyTorch)
    else:
        assert checked > (20 if arg else 80)


# --------------------------------------------------------------------------------------
# layouts that are not contiguous
# --------------------------------------------------------------------------------------

def layouts(base: np.ndarray, d: dt.DType) -> list[tuple[str, Tensor, np.ndarray]]:
    t, x = make(base, d)
    out = [("transposed", views.permute(t, (2, 0, 1)), np.transpose(x, (2, 0, 1))),
           ("reversed", views.permute(t, (2, 1, 0)), np.transpose(x, (2, 1, 0))),
           ("stepped", views.slice_dims(t, (0, 1, 0), (4, 5, 6), (2, 2, 3)),
            x[0:4:2, 1:5:2, 0:6:3]),
           ("offset", views.slice_dims(t, (1, 0, 2), (4, 5, 6), (1, 1, 1)), x[1:4, :, 2:6])]
    small, xs = make(base[:, :1, :], d)
    out.append(("expanded", views.expand(small, (4, 5, 6)), np.broadcast_to(xs, (4, 5, 6))))
    row, xr = make(base[0, 0], d)
    out.append(("expanded-lead", views.expand(row, (3, 4, 6)), np.broadcast_to(xr, (3, 4, 6))))
    # a negative stride (what flip writes through): walk the last axis backwards
    neg = Tensor._make(t._storage, t._offset + 5, (4, 5, 6), (30, 6, -1), t._dtype)
    out.append(("negative", neg, x[:, :, ::-1]))
    return out


NONCONTIGUOUS = ([(op, dt.float32) for op in OPS] + [(op, dt.int32) for op in OPS]
                 + [("sum", dt.float16), ("amax", dt.bool_), ("argmin", dt.bfloat16)])


@pytest.mark.parametrize("op,d", NONCONTIGUOUS, ids=lambda v: getattr(v, "name", v))
def test_noncontiguous(op: str, d: dt.DType) -> None:
    rng = np.random.default_rng(7)
    base = sample((4, 5, 6), d, op, rng)
    arg = op in ("argmax", "argmin")
    for name, t, x in layouts(base, d):
        for axes in axes_cases(3, arg):
            if valid(op, d, x.shape, axes):
                check(op, d, R.run(op, t, axes, False), np.array(x), axes, False)


def test_layout_does_not_change_results_of_argmax_ties() -> None:
    """The flat index of the first maximum is in logical order, whatever the strides."""
    x = np.zeros((4, 5), dtype=np.float32)
    x[1, 3] = x[3, 1] = x[2, 0] = 9          # logical order: (1,3) first
    t, _ = make(np.ascontiguousarray(x.T), dt.float32)
    tt = views.permute(t, (1, 0))             # logical x, memory in column order
    assert R.run("argmax", tt, (), False).item() == 8
    assert R.run("argmax", tt, (1,), False).tolist() == [0, 3, 0, 1]
    assert R.run("argmax", tt, (0,), False).tolist() == [2, 3, 0, 1, 0]


# --------------------------------------------------------------------------------------
# NaN, Inf, ties
# --------------------------------------------------------------------------------------

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("d", dt.FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("op,values,expected", [
    ("amax", [1, NAN, 3], NAN), ("amin", [1, NAN, -3], NAN), ("amax", [-INF, -INF], -INF),
    ("amin", [INF, 2], 2), ("amax", [NAN, INF], NAN),
    ("sum", [INF, 1], INF), ("sum", [INF, -INF], NAN), ("sum", [NAN, 1], NAN),
    ("prod", [INF, 0], NAN), ("prod", [-INF, 2], -INF),
    ("argmax", [1, NAN, 5, NAN], 1), ("argmin", [1, NAN, -5, NAN], 1),
    ("argmax", [3, 7, 7, 1], 1), ("argmin", [3, 1, 7, 1], 1),
    ("argmax", [-INF, -INF], 0), ("argmin", [INF, INF, INF], 0),
    ("argmax", [0.0, -0.0, 0.0], 0), ("argmax", [-INF, 2, INF, INF], 2),
])
def test_special_values(op: str, values: list[float], expected: float, d: dt.DType) -> None:
    t, _ = make(np.array(values, dtype=np.float32), d)
    got = R.run(op, t, (), False).item()
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == expected


def test_nan_rows_and_columns() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    x[0, 2] = x[2, 1] = x[2, 3] = np.nan
    t, _ = make(x, dt.float32)
    for op in OPS:
        for axes in ((0,), (1,), ()):
            check(op, dt.float32, R.run(op, t, axes, False), x, axes, False)


@pytest.mark.parametrize("d", (dt.float32, dt.int64, dt.float16), ids=lambda d: d.name)
@pytest.mark.parametrize("op", ("argmax", "argmin"))
def test_argmax_ties_return_first(op: str, d: dt.DType) -> None:
    x = np.array([[2, 5, 5, 1], [5, 5, 5, 5], [1, 1, 0, 0]])
    t, _ = make(x, d)
    ref = np.argmax if op == "argmax" else np.argmin
    assert R.run(op, t, (1,), False).tolist() == ref(x, axis=1).tolist()
    assert R.run(op, t, (0,), False).tolist() == ref(x, axis=0).tolist()
    assert R.run(op, t, (), False).item() == ref(x)


def test_integer_extremes_and_wraparound() -> None:
    i64 = np.iinfo(np.int64)
    t, _ = make(np.array([i64.max, 1, i64.min], dtype=np.int64), dt.int64)
    assert R.run("amax", t, (), False).item() == i64.max
    assert R.run("amin", t, (), False).item() == i64.min
    assert R.run("argmin", t, (), False).item() == 2
    assert R.run("sum", t, (), False).item() == 0          # wraps, as in PyTorch and NumPy
    u, _ = make(np.array([200, 100, 255], dtype=np.uint8), dt.uint8)
    assert R.run("sum", u, (), False).item() == 555        # uint8 sums in int64
    assert R.run("amax", u, (), False).item() == 255
    assert R.run("argmin", u, (), False).item() == 1


def test_empty_reductions_give_identity() -> None:
    for d, expected in ((dt.float32, 0.0), (dt.int32, 0), (dt.bool_, 0), (dt.bfloat16, 0.0)):
        t, _ = make(np.zeros((0, 3)), d)
        assert R.run("sum", t, (), False).item() == expected
        assert R.run("prod", t, (), False).item() == 1
        assert R.run("sum", t, (0,), True).tolist() == [[expected] * 3]
        assert R.run("prod", t, (0,), False).tolist() == [1] * 3
        assert R.run("amax", t, (1,), False).shape == (0,)


# --------------------------------------------------------------------------------------
# large inputs: both cores, two stages, accuracy
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axes", [
    ((1_000_000,), ()), ((250_000, 4), (0,)), ((3, 200_000), (1,)), ((500, 1000), (0,)),
    ((1000, 500), (1,)), ((40, 50, 200), (0, 2)), ((200, 3, 700), (0,)),
    ((3, 100_000), ()), ((600, 700), ()), ((200_000, 5), (1,)), ((30_000, 4, 6), (2,)),
    ((6, 30_000, 4), (0, 2)),
])
@pytest.mark.parametrize("op", OPS)
def test_large(op: str, shape: tuple[int, ...], axes: tuple[int, ...]) -> None:
    if op in ("argmax", "argmin") and len(axes) > 1:
        return
    rng = np.random.default_rng(1)
    d = dt.float32 if op != "prod" else dt.float64
    base = sample(shape, d, op, rng)
    if op == "prod":
        base = 1 + (base - np.sign(base)) * 1e-3       # keep a million factors finite
    if op in ("argmax", "argmin"):
        base = np.round(base)                          # many ties, some across chunks
    t, x = make(base, d)
    check(op, d, R.run(op, t, axes, False), x, axes, False)


def test_large_ties_and_nan_across_chunks() -> None:
    n = 1_000_000
    x = np.zeros(n, dtype=np.float32)
    t, _ = make(x, dt.float32)
    assert R.run("argmax", t, (), False).item() == 0
    x[[300_000, 700_000, 999_999]] = 5
    t, _ = make(x, dt.float32)
    assert R.run("argmax", t, (), False).item() == 300_000
    x[[800_000, 600_000]] = np.nan
    t, _ = make(x, dt.float32)
    assert R.run("argmax", t, (), False).item() == 600_000
    assert R.run("argmin", t, (), False).item() == 600_000
    assert np.isnan(R.run("amax", t, (), False).item())
    m = np.zeros((n // 4, 4), dtype=np.float32)
    m[[10, 200_000], 2] = 1
    m[150_000, 3] = np.nan
    t, _ = make(m, dt.float32)
    assert R.run("argmax", t, (0,), False).tolist() == [0, 0, 10, 150_000]


@pytest.mark.skipif(launch.num_threads() < 2, reason="needs two threads")
def test_plans_use_every_core() -> None:
    """A full reduction is two stages; a wide column sum splits its column blocks."""
    t, _ = make(np.ones(1_000_000, dtype=np.float32), dt.float32)
    assert R._plan("sum", t, (), False).kind == "two"
    assert R._plan("argmax", t, (), False).kind == "two"
    tall, _ = make(np.ones((500_000, 3), dtype=np.float32), dt.float32)
    assert R._plan("sum", tall, (0,), False).kind == "two"
    wide, _ = make(np.ones((300, 4000), dtype=np.float32), dt.float32)
    plan = R._plan("sum", wide, (0,), False)
    assert plan.kind == "one" and plan.stages[0].template[1] >= 2    # column blocks
    rows, _ = make(np.ones((4000, 300), dtype=np.float32), dt.float32)
    plan = R._plan("sum", rows, (1,), False)
    assert plan.kind == "one" and plan.stages[0].template[1] == 4000  # rows split
    assert not plan.stages[0].kernel.spec.is_column
    short, _ = make(np.ones((400_000, 3), dtype=np.float32), dt.float32)
    plan = R._plan("sum", short, (1,), False)
    assert plan.kind == "one" and plan.stages[0].kernel.spec.is_column  # across rows
    assert plan.stages[0].template[1] >= 2


def test_row_sum_kernel_is_vectorized() -> None:
    spec = codegen.ReduceKernel("sum", dt.float32, dt.float32, (True,), 1)
    optimized = get_target().optimized_ir(cache.get(spec).llvm_ir)
    assert "fadd reassoc contract <16 x float>" in optimized or \
        "fadd reassoc contract <8 x float>" in optimized
    spec = codegen.ReduceKernel("amax", dt.float32, dt.float32, (True,), 1)
    assert "@llvm.maximum.v" in get_target().optimized_ir(cache.get(spec).llvm_ir)


def test_sum_10m_float32_accuracy_and_timing() -> None:
    rng = np.random.default_rng(3)
    for name, x in (("uniform", rng.random(10_000_000, dtype=np.float32)),
                    ("shifted normal", (rng.standard_normal(10_000_000) + 3).astype(np.float32))):
        t, _ = make(x, dt.float32)
        truth = np.sum(x, dtype=np.float64)
        ours = R.run("sum", t, (), False).item()
        numpy_err = abs(float(np.sum(x)) - truth) / abs(truth)
        naive_err = abs(float(np.cumsum(x, dtype=np.float32)[-1]) - truth) / abs(truth)
        err = abs(ours - truth) / abs(truth)
        bound = max(2 * numpy_err, 2 ** -23)          # NumPy's pairwise error or one ulp
        print(f"\n10M float32 sum ({name}): relative error llgrad {err:.2e}, "
              f"numpy {numpy_err:.2e}, sequential float32 {naive_err:.2e}")
        assert err <= bound
        assert naive_err > 10 * bound                  # the bound separates naive summation

    def best(fn: Any, n: int = 20) -> float:
        fn()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times) * 1e3

    x = rng.random(10_000_000, dtype=np.float32)
    t, _ = make(x, dt.float32)
    ours, theirs = best(lambda: R.run("sum", t, (), False)), best(lambda: np.sum(x))
    print(f"10M float32 sum: llgrad {ours:.3f} ms ({launch.num_threads()} threads), "
          f"np.sum {theirs:.3f} ms")


# --------------------------------------------------------------------------------------
# sum_to_shape
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("src,target", [
    ((2, 3, 4), (3, 4)), ((2, 3, 4), (1, 4)), ((2, 3, 4), (3, 1)), ((2, 3, 4), (1, 1, 1)),
    ((2, 3, 4), ()), ((2, 3, 4), (4,)), ((2, 3, 4), (2, 1, 4)), ((5,), (1,)), ((5,), ()),
    ((1, 5), (5,)), ((4, 1, 3), (1, 1)), ((3, 4), (3, 4)),
])
def test_sum_to_shape(src: tuple[int, ...], target: tuple[int, ...]) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal(src).astype(np.float32)
    t, _ = make(x, dt.float32)
    got = R.sum_to_shape(t, target)
    assert got.shape == target
    lead = len(src) - len(target)
    expected = x.sum(axis=tuple(range(lead))) if lead else x
    expected = expected.sum(axis=tuple(i for i, n in enumerate(target) if n == 1),
                            keepdims=True).reshape(target)
    np.testing.assert_allclose(got._values(), expected, rtol=1e-6, atol=1e-6)
    if src == target:
        assert got is t


def test_sum_to_shape_of_expanded_gradient() -> None:
    g, _ = make(np.ones(6, dtype=np.float32), dt.float32)
    expanded = views.expand(views.reshape(g, (1, 6)), (4, 6))
    assert R.sum_to_shape(expanded, (6,)).tolist() == [4.0] * 6


@pytest.mark.parametrize("src,target", [((2, 3), (4,)), ((3,), (2, 3)), ((2, 3), (2, 1, 3))])
def test_sum_to_shape_errors(src: tuple[int, ...], target: tuple[int, ...]) -> None:
    t, _ = make(np.zeros(src, dtype=np.float32), dt.float32)
    with pytest.raises(RuntimeError, match="sum_to_shape.*not expandable"):
        R.sum_to_shape(t, target)


# --------------------------------------------------------------------------------------
# errors: raised before any native code runs
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,shape,axes,exc,pattern", [
    ("sum", (2, 3), (2,), IndexError, r"sum: dimension out of range.*\[-2, 1\].*got 2"),
    ("amax", (2, 3), (-3,), IndexError, r"amax: dimension out of range"),
    ("prod", (), (1,), IndexError, r"prod: dimension out of range"),
    ("sum", (2, 3), (0, -2), RuntimeError, r"sum: dim 0 appears multiple times.*\[2, 3\]"),
    ("amin", (2, 3), (1, 1), RuntimeError, r"amin: dim 1 appears multiple times"),
    ("amax", (0, 3), (0,), IndexError, r"amax\(\): Expected reduction dim 0 .*non-zero.*\[0, 3\]"),
    ("amin", (2, 0), (), RuntimeError, r"amin\(\): Expected reduction dim to be spec.*\[2, 0\]"),
    ("argmax", (0,), (), RuntimeError, r"argmax\(\).*numel\(\) == 0.*\[0\]"),
    ("argmin", (3, 0), (1,), IndexError, r"argmin\(\): Expected reduction dim 1"),
    ("argmax", (2, 3), (0, 1), RuntimeError, r"argmax: expected at most one dim"),
])
def test_errors(op: str, shape: tuple[int, ...], axes: tuple[int, ...], exc: type,
                pattern: str) -> None:
    t, _ = make(np.zeros(shape, dtype=np.float32), dt.float32)
    with pytest.raises(exc, match=pattern):
        R.run(op, t, axes, False)


def test_type_errors() -> None:
    t, _ = make(np.zeros(3, dtype=bool), dt.bool_)
    with pytest.raises(TypeError, match=r"argmax\(\): does not support bool"):
        R.run("argmax", t, (), False)
    f, _ = make(np.zeros(3, dtype=np.float32), dt.float32)
    with pytest.raises(TypeError, match="sum: attribute 'axes' expects ints"):
        R.run("sum", f, (0.5,), False)
    with pytest.raises(TypeError, match="sum: attribute 'keepdim' expects bool"):
        R.run("sum", f, (0,), 1)
    with pytest.raises(ValueError, match="'add' is not a reduction"):
        R.run("add", f, (0,), False)
    with pytest.raises(TypeError, match="complex64"):      # sum/prod take complex; max not
        registry.get("amax").infer((TensorType(dt.complex64, (2,)),), axes=(), keepdim=False)


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="kept\\* reduced\\+"):
        codegen.ReduceKernel("sum", dt.float32, dt.float32, (True, False, True))
    with pytest.raises(ValueError, match="combine mode"):
        codegen.ReduceKernel("sum", dt.float32, dt.float32, (True,), mode="combine")
    with pytest.raises(ValueError, match="chunk"):
        codegen.ReduceKernel("sum", dt.float32, dt.float32, (False, True), mode="partial",
                             chunk=0)


# --------------------------------------------------------------------------------------
# property test: random shape, axes and strides against NumPy
# --------------------------------------------------------------------------------------

@st.composite
def reduction_case(draw: Any) -> tuple:
    op = draw(st.sampled_from(OPS))
    d = draw(st.sampled_from((dt.float32, dt.float64, dt.int32, dt.float16, dt.bfloat16,
                              dt.int64, dt.uint8, dt.bool_)))
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    perm = tuple(draw(st.permutations(range(ndim))))
    steps = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    if op in ("argmax", "argmin"):
        axes = tuple(draw(st.lists(st.integers(-ndim, ndim - 1), max_size=1))) if ndim else ()
    else:
        axes = tuple(draw(st.lists(st.integers(-ndim, ndim - 1), max_size=ndim,
                                   unique_by=lambda a: a % ndim))) if ndim else ()
    keepdim = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return op, d, shape, perm, steps, axes, keepdim, seed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reduction_case())
def test_property_random_layouts(case: tuple) -> None:
    op, d, shape, perm, steps, axes, keepdim, seed = case
    rng = np.random.default_rng(seed)
    # a buffer big enough for the steps, permuted, then sliced: arbitrary strides
    big_shape = tuple(max(n * s, 1) for n, s in zip(shape, steps))
    base = sample(tuple(big_shape[p] for p in perm), d, op, rng)
    t, xb = make(base, d)
    inv = tuple(int(i) for i in np.argsort(perm))
    t = views.permute(t, inv)
    xb = np.transpose(xb, inv)
    t = views.slice_dims(t, (0,) * len(shape), tuple(n * s for n, s in zip(shape, steps)), steps)
    x = np.array(xb[tuple(slice(0, n * s, s) for n, s in zip(shape, steps))])
    assert t.shape == x.shape
    if not valid(op, d, shape, axes):
        with pytest.raises((IndexError, RuntimeError, TypeError), match=op):
            R.run(op, t, axes, keepdim)
        return
    check(op, d, R.run(op, t, axes, keepdim), x, axes, keepdim)


def test_interpreter_runs_the_references() -> None:
    """A graph of reductions interprets (NumPy references) to what eager kernels compute."""
    from llgrad.ir.interpret import interpret
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = Builder()
    p = b.param(TensorType(dt.float32, x.shape))
    cases = [("sum", (0, 2), True), ("prod", (1,), False), ("amax", (), False),
             ("amin", (-1,), True), ("argmax", (1,), False), ("argmin", (), True)]
    graph = b.build(*(b.op(op, p, axes=axes, keepdim=keep) for op, axes, keep in cases))
    t, _ = make(x, dt.float32)
    for (op, axes, keep), want in zip(cases, interpret(graph, [x])):
        got = R.run(op, t, axes, keep)
        assert got.shape == want.shape
        np.testing.assert_allclose(got._values(), want, rtol=1e-5, atol=1e-6)
