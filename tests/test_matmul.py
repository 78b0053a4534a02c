"""Tests for the matmul primitive, its kernels (BLAS and generated loops) and eager matmul.

NumPy is the oracle: results are compared with `numpy.matmul` computed in float64 from the
exact input values, with an error bound proportional to `k * eps * (|A| @ |B|)` for floats,
and exactly for integers and bool (integer products wrap as in NumPy).
"""
from __future__ import annotations

import os

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llgrad.codegen.matmul import build
from llgrad.schedule.matmul import MatmulKernel, uses_blas
from llgrad.eager import linalg, views
from llgrad.eager.linalg import bmm, gemm_layout, matmul, mm
from llgrad.ir import dtypes as dt
from llgrad.ir import registry
from llgrad.ir.registry import Group
from llgrad.ir.types import TensorType
from llgrad.runtime import blas
from llgrad.tensor import Tensor

FLOATS = [dt.float32, dt.float64, dt.float16, dt.bfloat16]
ALL = FLOATS + [dt.int32, dt.int64, dt.bool_]
EPS = {"float32": 2.0**-24, "float64": 2.0**-53, "float16": 2.0**-11, "bfloat16": 2.0**-8}


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (test data has no NaN)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def random_values(rng: np.random.Generator, shape: tuple[int, ...], d: dt.DType) -> np.ndarray:
    """Values exactly representable in `d`, as an array of d's NumPy storage type
    (bfloat16: float32 values that are exact bfloat16 numbers)."""
    if d is dt.bool_:
        return rng.random(shape) < 0.5
    if d.is_integer:
        return rng.integers(-50, 50, size=shape).astype(d.np)
    x = rng.standard_normal(shape).astype(np.float32 if d is dt.bfloat16 else d.np)
    if d is dt.bfloat16:
        x = (_bf16_bits(x).astype(np.uint32) << 16).view(np.float32)
    return x


def tensor(x: np.ndarray, d: dt.DType) -> Tensor:
    """A fresh llgrad tensor holding `x` (values exactly representable in `d`)."""
    if d is dt.bfloat16:
        return Tensor._from_numpy(_bf16_bits(x).reshape(x.shape), dtype=dt.bfloat16)
    return Tensor._from_numpy(np.array(x, dtype=d.np))


def check(result: Tensor, a: np.ndarray, b: np.ndarray, d: dt.DType) -> None:
    """`result` equals `a @ b` (exactly, or within the floating-point error bound)."""
    expected_shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
    assert result.shape == expected_shape, (result.shape, expected_shape)
    assert result.dtype is d
    got = result._values()
    if d is dt.bool_:
        np.testing.assert_array_equal(got, np.matmul(a, b))
        return
    if d.is_integer:
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, np.matmul(a.astype(d.np), b.astype(d.np)))
        return
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = np.matmul(a64, b64)
    scale = np.matmul(np.abs(a64), np.abs(b64))
    k = a.shape[-1]
    accumulate = EPS["float64" if d is dt.float64 else "float32"]
    bound = (2 * k + 2) * accumulate * scale + EPS[d.name] * np.abs(exact) + 1e-300
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= bound), f"max error {err.max()} vs bound {bound[err > bound].min()}"


def run_case(rng: np.random.Generator, sa: tuple[int, ...], sb: tuple[int, ...],
             d: dt.DType) -> None:
    a, b = random_values(rng, sa, d), random_values(rng, sb, d)
    check(matmul(tensor(a, d), tensor(b, d)), a, b, d)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# --------------------------------------------------------------------------------------
# the registry entry
# --------------------------------------------------------------------------------------

def test_registry_entry() -> None:
    op = registry.get("matmul")
    assert op.group is Group.LINALG and op.nin == 2
    assert op.backward_name == "MmBackward0"
    t = op.infer((TensorType(dt.float32, (5, 1, 2, 3)), TensorType(dt.float32, (4, 3, 7))))
    assert t == TensorType(dt.float32, (5, 4, 2, 7))
    a = np.arange(6, dtype=np.float16).reshape(2, 3)
    ref = op.reference(a, a.T)
    assert ref.dtype == np.float16
    np.testing.assert_array_equal(ref, (a.astype(np.float32) @ a.T.astype(np.float32)))


def test_registry_errors() -> None:
    op = registry.get("matmul")
    f32 = dt.float32
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                           r"\(2x3 and 4x5\)"):
        op.infer((TensorType(f32, (2, 3)), TensorType(f32, (4, 5))))
    with pytest.raises(RuntimeError, match=r"\[5, 2, 3\] and \[4, 3, 2\]"):
        op.infer((TensorType(f32, (5, 2, 3)), TensorType(f32, (4, 3, 2))))
    with pytest.raises(TypeError, match="one dtype"):
        op.infer((TensorType(f32, (2, 3)), TensorType(dt.float64, (3, 2))))
    # complex runs on cgemm/zgemm (tests/test_complex.py)
    assert op.infer((TensorType(dt.complex64, (2, 3)),
                     TensorType(dt.complex64, (3, 2)))).dtype is dt.complex64
    with pytest.raises(RuntimeError, match="rank >= 2"):
        op.infer((TensorType(f32, (3,)), TensorType(f32, (3, 2))))


# --------------------------------------------------------------------------------------
# dtypes and rank cases
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
def test_dtypes_2d(rng: np.random.Generator, d: dt.DType) -> None:
    for sa, sb in [((7, 13), (13, 5)), ((1, 1), (1, 1)), ((3, 300), (300, 301))]:
        run_case(rng, sa, sb, d)


RANK_CASES = [
    ((5,), (5,)),                       # dot -> 0-d
    ((5,), (5, 3)),                     # vector @ matrix
    ((4, 5), (5,)),                     # matrix @ vector
    ((4, 5), (5, 3)),
    ((2, 4, 5), (5,)),                  # batch @ vector
    ((5,), (2, 5, 3)),                  # vector @ batch
    ((2, 4, 5), (5, 3)),                # batch @ matrix (folded into one gemm)
    ((4, 5), (2, 5, 3)),                # matrix @ batch
    ((2, 4, 5), (2, 5, 3)),
    ((3, 1, 4, 5), (2, 5, 3)),          # broadcast batch
    ((1, 2, 4, 5), (3, 1, 5, 3)),
    ((2, 1, 3, 4, 5), (5, 2)),
]


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.int64, dt.float16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("sa,sb", RANK_CASES, ids=str)
def test_rank_cases(rng: np.random.Generator, sa: tuple, sb: tuple, d: dt.DType) -> None:
    run_case(rng, sa, sb, d)


def test_dot_is_zero_dim(rng: np.random.Generator) -> None:
    a, b = random_values(rng, (9,), dt.float64), random_values(rng, (9,), dt.float64)
    r = matmul(tensor(a, dt.float64), tensor(b, dt.float64))
    assert r.shape == () and abs(r.item() - float(a @ b)) < 1e-12


@pytest.mark.parametrize("d", [dt.int32, dt.int64], ids=lambda d: d.name)
def test_integer_wraparound(d: dt.DType) -> None:
    big = np.iinfo(d.np).max // 2 + 7
    a = np.full((2, 3), big, dtype=d.np)
    b = np.full((3, 2), 3, dtype=d.np)
    check(matmul(tensor(a, d), tensor(b, d)), a, b, d)


def test_nan_and_inf_propagate() -> None:
    for d in (dt.float32, dt.float16):
        a = np.ones((3, 4), dtype=d.np)
        a[1, 2] = np.nan
        b = np.ones((4, 5), dtype=d.np)
        b[0, 4] = np.inf
        got = matmul(tensor(a, d), tensor(b, d))._values()
        assert np.isnan(got[1]).all()
        assert np.isposinf(got[[0, 2], 4]).all()
        assert (got[[0, 2], :4] == 4).all()


# --------------------------------------------------------------------------------------
# promotion
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("da,db,expected", [
    (dt.int32, dt.float32, dt.float32), (dt.float16, dt.float32, dt.float32),
    (dt.int32, dt.int64, dt.int64), (dt.bool_, dt.int32, dt.int32),
    (dt.float16, dt.bfloat16, dt.float32), (dt.float32, dt.float64, dt.float64),
], ids=str)
def test_promotion(rng: np.random.Generator, da: dt.DType, db: dt.DType,
                   expected: dt.DType) -> None:
    a, b = random_values(rng, (2, 3, 4), da), random_values(rng, (4, 5), db)
    r = matmul(tensor(a, da), tensor(b, db))
    assert r.dtype is expected
    ca = a.astype(np.float64) if expected.is_floating_point else a.astype(expected.np)
    cb = b.astype(np.float64) if expected.is_floating_point else b.astype(expected.np)
    check(r, ca, cb, expected)


# --------------------------------------------------------------------------------------
# layouts: transposed, sliced, expanded
# --------------------------------------------------------------------------------------

def _layout(t: Tensor, kind: str) -> Tensor:
    """A view of `t`'s values (same shape) with another memory layout.

    contig: as is; T: stored transposed (strides (1, ld)); block: a window of a bigger
    matrix (row stride > columns); step: every other column (no unit stride: copied).
    """
    if kind == "contig":
        return t
    x = t._values() if t.dtype is not dt.bfloat16 else t._numpy_view()
    r, c = x.shape[-2:]
    if kind == "T":
        store = np.swapaxes(x, -1, -2).copy()         # never a view of t's memory
        perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
        return views.permute(Tensor._from_numpy(store, dtype=t.dtype), perm)
    if kind == "block":
        big = np.zeros(x.shape[:-2] + (r + 3, c + 5), dtype=x.dtype)
        big[..., 2:2 + r, 1:1 + c] = x
        bt = Tensor._from_numpy(big, dtype=t.dtype)
        lead = (0,) * (x.ndim - 2)
        return views.slice_dims(bt, lead + (2, 1), x.shape[:-2] + (2 + r, 1 + c),
                                (1,) * x.ndim)
    if kind == "step":
        big = np.zeros(x.shape[:-1] + (2 * c,), dtype=x.dtype)
        big[..., ::2] = x
        bt = Tensor._from_numpy(big, dtype=t.dtype)
        return views.slice_dims(bt, (0,) * x.ndim, big.shape, (1,) * (x.ndim - 1) + (2,))
    raise AssertionError(kind)


LAYOUTS = ["contig", "T", "block", "step"]


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.int32, dt.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("la", LAYOUTS)
@pytest.mark.parametrize("lb", LAYOUTS)
def test_layouts(rng: np.random.Generator, d: dt.DType, la: str, lb: str) -> None:
    a, b = random_values(rng, (2, 6, 9), d), random_values(rng, (2, 9, 4), d)
    ta, tb = _layout(tensor(a, d), la), _layout(tensor(b, d), lb)
    assert ta.shape == a.shape and tb.shape == b.shape
    check(matmul(ta, tb), a, b, d)


def test_transposed_operands_are_not_copied(rng: np.random.Generator) -> None:
    """BLAS reads (1, ld)-strided operands with 'T' in place; only 'step' needs a copy."""
    a, b = random_values(rng, (6, 9), dt.float32), random_values(rng, (9, 4), dt.float32)
    for la, lb in [("T", "T"), ("T", "contig"), ("block", "T")]:
        plan = linalg._plan(_layout(tensor(a, dt.float32), la),
                            _layout(tensor(b, dt.float32), lb))
        assert not plan.copy_a and not plan.copy_b
        flags = plan.template[-5:-3]
        assert flags == [int(la == "T"), int(lb == "T")]
    plan = linalg._plan(_layout(tensor(a, dt.float32), "step"), tensor(b, dt.float32))
    assert plan.copy_a and not plan.copy_b


def test_gemm_layout_rules() -> None:
    assert gemm_layout(3, 4, 4, 1) == (False, 4)
    assert gemm_layout(3, 4, 1, 3) == (True, 3)
    assert gemm_layout(3, 4, 10, 1) == (False, 10)
    assert gemm_layout(3, 4, 4, 2) is None            # no unit stride
    assert gemm_layout(3, 4, 0, 1) is None            # broadcast rows: BLAS needs ld >= 4
    assert gemm_layout(1, 4, 0, 1) == (False, 4)      # a single row: its stride is free
    assert gemm_layout(3, 1, 7, 7) == (False, 7)      # a single column
    assert gemm_layout(3, 4, 2**31, 1) is None        # ld beyond 32 bits


@pytest.mark.parametrize("d", [dt.float32, dt.float16], ids=lambda d: d.name)
def test_expanded_batches(rng: np.random.Generator, d: dt.DType) -> None:
    a, b = random_values(rng, (1, 5, 7), d), random_values(rng, (3, 7, 4), d)
    ta = views.expand(tensor(a, d), (3, 5, 7))           # zero-stride batch
    assert ta.stride(0) == 0
    check(matmul(ta, tensor(b, d)), np.broadcast_to(a, (3, 5, 7)), b, d)
    tb = views.expand(tensor(b[:1], d), (4, 3, 7, 4))    # zero-stride batch dims, B shared
    check(matmul(tensor(a, d), tb), a, np.broadcast_to(b[:1], (4, 3, 7, 4)), d)
    # zero strides inside the matrices: copied (BLAS would reject ld = 0)
    col = random_values(rng, (5, 1), d)
    te = views.expand(tensor(col, d), (5, 7))
    check(matmul(te, tensor(b, d)), np.broadcast_to(col, (5, 7)), b, d)


def test_permuted_batch_dims(rng: np.random.Generator) -> None:
    x = random_values(rng, (4, 3, 5, 6), dt.float32)
    t = views.permute(tensor(x, dt.float32), (1, 0, 2, 3))      # (3, 4, 5, 6)
    y = random_values(rng, (6, 2), dt.float32)
    check(matmul(t, tensor(y, dt.float32)), np.transpose(x, (1, 0, 2, 3)), y, dt.float32)


def test_batch_folds_into_one_gemm(rng: np.random.Generator) -> None:
    a, b = random_values(rng, (4, 3, 5, 6), dt.float32), random_values(rng, (6, 2), dt.float32)
    plan = linalg._plan(tensor(a, dt.float32), tensor(b, dt.float32))
    assert plan.template[1] == 1 and plan.template[2] == 60      # one gemm of 60 rows
    check(matmul(tensor(a, dt.float32), tensor(b, dt.float32)), a, b, dt.float32)


def test_inputs_unchanged(rng: np.random.Generator) -> None:
    a, b = random_values(rng, (5, 6), dt.float32), random_values(rng, (6, 3), dt.float32)
    ta = _layout(tensor(a, dt.float32), "step")
    tb = tensor(b, dt.float32)
    matmul(ta, tb)
    np.testing.assert_array_equal(ta._values(), a)
    np.testing.assert_array_equal(tb._values(), b)


# --------------------------------------------------------------------------------------
# empty sizes
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.float16, dt.int32, dt.bool_],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("sa,sb", [
    ((3, 0), (0, 4)), ((0, 5), (5, 4)), ((3, 5), (5, 0)), ((0, 3, 5), (5, 4)),
    ((2, 3, 0), (2, 0, 4)), ((0,), (0,)), ((0,), (0, 3)), ((4, 0), (0,)),
], ids=str)
def test_empty(rng: np.random.Generator, d: dt.DType, sa: tuple, sb: tuple) -> None:
    a, b = random_values(rng, sa, d), random_values(rng, sb, d)
    r = matmul(tensor(a, d), tensor(b, d))
    expected = np.matmul(a, b)
    assert r.shape == expected.shape
    np.testing.assert_array_equal(r._values(), np.zeros(expected.shape, dtype=bool)
                                  if d is dt.bool_ else np.zeros(expected.shape))


# --------------------------------------------------------------------------------------
# large sizes and threads
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int64],
                         ids=lambda d: d.name)
def test_large(rng: np.random.Generator, d: dt.DType) -> None:
    run_case(rng, (512, 512), (512, 512), d)


@pytest.mark.parametrize("d", [dt.float16, dt.int32, dt.bool_], ids=lambda d: d.name)
@pytest.mark.parametrize("la", ["contig", "T"])
def test_matrix_vector_loops(rng: np.random.Generator, d: dt.DType, la: str) -> None:
    """m == 1 runs the dot-product branch of the loop kernel (vectorized over k)."""
    a, v = random_values(rng, (3, 300, 517), d), random_values(rng, (517,), d)
    check(matmul(_layout(tensor(a, d), la), tensor(v, d)), a, v, d)
    col = random_values(rng, (517, 1), d)
    check(matmul(_layout(tensor(a, d), la), _layout(tensor(col, d), "block")), a, col, d)


def test_split_batches(rng: np.random.Generator) -> None:
    """Small matrices in a big batch split across threads (OpenBLAS stays on one)."""
    a, b = random_values(rng, (300, 24, 40), dt.float32), random_values(rng, (300, 40, 24),
                                                                         dt.float32)
    plan = linalg._plan(tensor(a, dt.float32), tensor(b, dt.float32))
    assert blas.runs_single_threaded(24, 24, 40)
    assert plan.work > 0 or linalg.launch.num_threads() == 1
    check(matmul(tensor(a, dt.float32), tensor(b, dt.float32)), a, b, dt.float32)
    # big matrices: OpenBLAS threads each call, so llgrad runs the batch on one thread;
    # sequential MKL and llgrad's own gemm run each on one core, so llgrad splits the batch
    big = linalg._plan(Tensor._empty((2, 128, 128), dt.float32),
                       Tensor._empty((2, 128, 128), dt.float32))
    if blas.backend(dt.float32) in ("mkl", "llgrad"):
        assert big.work > 0 or linalg.launch.num_threads() == 1
    else:
        assert big.work == 0 and not blas.runs_single_threaded(128, 128, 128) or \
            blas.threads() == 1


def test_openblas_threads_are_known() -> None:
    n = blas.threads()
    assert n is not None and n >= 1
    assert blas.runs_single_threaded(64, 64, 64)
    assert blas.runs_single_threaded(2, 2, 2)


def test_sizes_beyond_32_bits_raise() -> None:
    """BLAS takes 32-bit sizes; this is refused before anything is copied or allocated."""
    one = Tensor._from_numpy(np.ones((1, 1), dtype=np.float32))
    k = 2**31 + 5
    a, b = views.expand(one, (1, k)), views.expand(one, (k, 1))
    with pytest.raises(RuntimeError, match=r"32-bit; k=2147483653"):
        matmul(a, b)


def test_kernel_specs() -> None:
    assert uses_blas(dt.float32) and uses_blas(dt.float64)
    assert not uses_blas(dt.float16) and not uses_blas(dt.int32)
    text = str(build(MatmulKernel(dt.float32, 2), "k"))
    assert "call void" in text and 'i8 84' in text and 'i8 78' in text   # 'T', 'N'
    loops = str(build(MatmulKernel(dt.float16, 1), "k"))
    assert "call" not in loops                     # the fallback calls nothing


# --------------------------------------------------------------------------------------
# errors and mm / bmm
# --------------------------------------------------------------------------------------

def _t(*shape: int, d: dt.DType = dt.float32) -> Tensor:
    return Tensor._empty(shape, d)


def test_matmul_errors() -> None:
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                           r"\(2x3 and 4x5\)"):
        matmul(_t(2, 3), _t(4, 5))
    with pytest.raises(RuntimeError, match=r"\(1x3 and 4x5\)"):
        matmul(_t(3), _t(4, 5))
    with pytest.raises(RuntimeError, match=r"\(2x3 and 4x1\).*\[2, 3\] and \[4\]"):
        matmul(_t(2, 3), _t(4))
    with pytest.raises(RuntimeError, match="dot product: 1-D tensors of 3 and 4 elements"):
        matmul(_t(3), _t(4))
    with pytest.raises(RuntimeError, match="at least 1D, but they are 0D and 1D"):
        matmul(_t(), _t(3))
    with pytest.raises(RuntimeError, match="at least 1D, but they are 2D and 0D"):
        matmul(_t(2, 3), _t())
    with pytest.raises(RuntimeError, match=r"batch dimensions \[5\] and \[4\]"):
        matmul(_t(5, 2, 3), _t(4, 3, 2))
    # complex operands run on cgemm/zgemm; a real operand is promoted (tests/test_complex.py)
    assert matmul(_t(2, 2, d=dt.complex64), _t(2, 2)).dtype is dt.complex64
    with pytest.raises(TypeError, match="expected Tensor operands"):
        matmul(_t(2, 2), 3)       # type: ignore[arg-type]


def test_mm(rng: np.random.Generator) -> None:
    a, b = random_values(rng, (4, 6), dt.float64), random_values(rng, (6, 3), dt.float64)
    check(mm(tensor(a, dt.float64), tensor(b, dt.float64)), a, b, dt.float64)
    with pytest.raises(RuntimeError, match="mm: self must be a matrix.*3-D"):
        mm(_t(2, 3, 4), _t(4, 5))
    with pytest.raises(RuntimeError, match="mm: self must be a matrix.*1-D"):
        mm(_t(3), _t(3, 4))
    with pytest.raises(RuntimeError, match="mm: mat2 must be a matrix"):
        mm(_t(2, 3), _t(3))
    with pytest.raises(RuntimeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied "
                                           r"\(2x3 and 4x5\)"):
        mm(_t(2, 3), _t(4, 5))


def test_bmm(rng: np.random.Generator) -> None:
    a, b = random_values(rng, (3, 4, 6), dt.int32), random_values(rng, (3, 6, 2), dt.int32)
    check(bmm(tensor(a, dt.int32), tensor(b, dt.int32)), a, b, dt.int32)
    with pytest.raises(RuntimeError, match="bmm: batch2 must be a 3D tensor"):
        bmm(_t(2, 3, 4), _t(4, 5))
    with pytest.raises(RuntimeError, match="bmm: batch1 must be a 3D tensor"):
        bmm(_t(1, 2, 3, 4), _t(1, 4, 5))
    with pytest.raises(RuntimeError, match=r"same batch size.*\[2, 3, 4\] and \[3, 4, 5\]"):
        bmm(_t(2, 3, 4), _t(3, 4, 5))
    with pytest.raises(RuntimeError, match="same batch size"):
        bmm(_t(1, 3, 4), _t(3, 4, 5))          # bmm does not broadcast
    with pytest.raises(RuntimeError, match=r"bmm: mat1 and mat2 .* \(3x4 and 5x5\)"):
        bmm(_t(2, 3, 4), _t(2, 5, 5))


# --------------------------------------------------------------------------------------
# property test
# --------------------------------------------------------------------------------------

@st.composite
def matmul_problem(draw: st.DrawFn) -> tuple:
    n, k, m = (draw(st.integers(0, 9)) for _ in range(3))
    ra, rb = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = [draw(st.integers(0, 3)) for _ in range(max(ra, rb) - 2)] if max(ra, rb) > 2 \
        else []

    def batch_of(rank: int) -> tuple[int, ...]:
        dims = batch[len(batch) - (rank - 2):] if rank > 2 else []
        return tuple(s if draw(st.booleans()) else 1 for s in dims)

    sa = (k,) if ra == 1 else batch_of(ra) + (n, k)
    sb = (k,) if rb == 1 else batch_of(rb) + (k, m)
    d = draw(st.sampled_from([dt.float32, dt.float64, dt.int32, dt.float16]))
    la = draw(st.sampled_from(LAYOUTS)) if ra >= 2 else "contig"
    lb = draw(st.sampled_from(LAYOUTS)) if rb >= 2 else "contig"
    return sa, sb, d, la, lb, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(matmul_problem())
def test_random_shapes(problem: tuple) -> None:
    sa, sb, d, la, lb, seed = problem
    rng = np.random.default_rng(seed)
    a, b = random_values(rng, sa, d), random_values(rng, sb, d)
    ta, tb = _layout(tensor(a, d), la), _layout(tensor(b, d), lb)
    r = matmul(ta, tb)
    if a.size == 0 or b.size == 0 or 0 in r.shape:
        expected = np.matmul(np.zeros(sa), np.zeros(sb))
        assert r.shape == expected.shape
        np.testing.assert_array_equal(r._values(), 0)
        return
    check(r, a, b, d)


# --------------------------------------------------------------------------------------
# throughput (printed, not asserted)
# --------------------------------------------------------------------------------------

def test_report_gflops(capsys: pytest.CaptureFixture) -> None:
    n = 2048
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ta, tb = Tensor._from_numpy(a), Tensor._from_numpy(b)

    def best(fn) -> float:
        fn()
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    t_llgrad = best(lambda: matmul(ta, tb))
    t_numpy = best(lambda: a @ b)
    flops = 2 * n**3
    with capsys.disabled():
        print(f"\n[matmul] float32 {n}x{n}: llgrad {flops / t_llgrad / 1e9:.1f} GFLOP/s, "
              f"numpy {flops / t_numpy / 1e9:.1f} GFLOP/s "
              f"(OpenBLAS threads: {blas.threads()})")
    r = matmul(ta, tb)._values()
    np.testing.assert_allclose(r[:4, :4], (a[:4].astype(np.float64) @ b[:, :4]), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("backend", ["openblas", "mkl"])
def test_both_blas_backends_agree_with_numpy(backend: str) -> None:
    """Each backend in its own process (the choice is made once per process): eager and
    compiled products, one big gemm split into panels, transposed operands, float64."""
    import subprocess
    import sys
    if backend == "mkl" and blas._find_mkl() is None:
        pytest.skip("MKL is the optional llgrad[mkl] extra")
    script = """
import numpy as np, llgrad as lg
from llgrad.runtime import blas
assert blas.backend() == BACKEND, blas.backend()
rng = np.random.default_rng(0)
for dtype, tol in ((np.float32, 1e-3), (np.float64, 1e-10)):
    a = rng.standard_normal((300, 256)).astype(dtype)
    b = rng.standard_normal((300, 512)).astype(dtype)
    ref = a.T.astype(np.float64) @ b
    for f in (lambda a, b: a.t() @ b, lg.compile(lambda a, b: a.t() @ b)):
        got = f(lg.tensor(a), lg.tensor(b)).numpy()
        assert np.abs(got - ref).max() <= tol * np.abs(ref).max(), dtype
print("ok")
""".replace("BACKEND", repr(backend))
    env = dict(os.environ, LLGRAD_BLAS=backend)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_mkl_is_initialized_on_a_helper_thread():
    """Loading MKL starts its one-time initialization (a 2x2 sgemm) on a helper thread;
    the thread finishes and later gemms are unaffected."""
    import ctypes
    from llgrad.runtime import blas
    lib = blas._mkl()
    if lib is None:
        path = blas._find_mkl()
        if path is None:
            pytest.skip("MKL is the optional llgrad[mkl] extra")
        lib = ctypes.CDLL(path)       # installed, but not the backend on this CPU
    thread = blas._initialize_in_background(lib)
    thread.join(30)
    assert not thread.is_alive()
    a, b = np.random.rand(64, 48).astype(np.float32), np.random.rand(48, 32).astype(np.float32)
    import llgrad as lg
    np.testing.assert_allclose((lg.tensor(a) @ lg.tensor(b)).numpy(), a @ b, rtol=1e-5)


# --------------------------------------------------------------------------------------
# Matrix-vector products call gemv
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [dt.float32, dt.float64, dt.complex64, dt.complex128])
@pytest.mark.parametrize("kind", ["contig", "T", "block"])
@pytest.mark.parametrize("shape", [((7, 300), (300, 1)), ((1, 300), (300, 9)),
                                   ((1, 300), (300, 1)), ((5, 1, 40), (5, 40, 6))])
def test_matrix_vector_products_through_gemv(rng: np.random.Generator, dtype, kind,
                                             shape) -> None:
    """One row or one column (vector @ matrix, matrix @ vector, a dot, a batch of row
    vectors): the kernel calls gemv with each operand's layout, eager and compiled."""
    import llgrad as lg
    (sa, sb) = shape
    a = random_values(rng, sa, dtype)
    b = random_values(rng, sb, dtype)
    ta = _layout(tensor(a, dtype), kind) if len(sa) == 2 else tensor(a, dtype)
    tb = _layout(tensor(b, dtype), kind) if len(sb) == 2 else tensor(b, dtype)
    want = a.astype(np.complex128 if dtype.is_complex else np.float64) @ b
    tol = 2e-4 if dtype in (dt.float32, dt.complex64) else 1e-10
    np.testing.assert_allclose(matmul(ta, tb)._values(), want, rtol=tol, atol=tol)
    plan = linalg._plan(ta, tb)
    assert plan.template[-2] == blas.gemv_address(dtype)
    if not dtype.is_complex:
        got = lg.compile(lambda x, y: x @ y)(ta, tb)
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


def test_strided_vectors_reach_gemv_with_their_increment(rng: np.random.Generator) -> None:
    import llgrad as lg
    m = random_values(rng, (64, 50), dt.float64)
    v = random_values(rng, (100,), dt.float64)
    tm, tv = tensor(m, dt.float64), tensor(v, dt.float64)
    x = tv[::2]                                       # stride 2
    np.testing.assert_allclose((tm @ x).numpy(), m @ v[::2], rtol=1e-12)
    np.testing.assert_allclose((x @ tm.t()).numpy(), v[::2] @ m.T, rtol=1e-12)
    np.testing.assert_allclose(lg.mv(tm, x).numpy(), m @ v[::2], rtol=1e-12)
    np.testing.assert_allclose(lg.compile(lambda a, b: a @ b)(tm, x).numpy(), m @ v[::2],
                               rtol=1e-12)


def test_openblas_is_opened_without_importing_scipy_linalg():
    """SciPy's bundled OpenBLAS is opened directly (importing `scipy.linalg.cython_blas`
    took 150 ms of a warm start): a matmul on OpenBLAS leaves `scipy.linalg` unimported
    and calls the library's `scipy_sgemm_`."""
    import subprocess
    import sys
    script = """
import sys, ctypes, numpy as np, llgrad as lg
from llgrad.runtime import blas
from llgrad.ir import dtypes as dt
lib = blas._scipy_openblas()
if lib is None:
    print("no bundled openblas"); sys.exit(0)
a, b = np.random.rand(64, 48).astype(np.float32), np.random.rand(48, 32).astype(np.float32)
np.testing.assert_allclose((lg.tensor(a) @ lg.tensor(b)).numpy(), a @ b, rtol=1e-5)
assert blas.gemm_address(dt.float32) == ctypes.cast(lib.scipy_sgemm_, ctypes.c_void_p).value
assert blas.threads() is not None
assert "scipy.linalg" not in sys.modules, "scipy.linalg was imported"
print("ok")
"""
    env = dict(os.environ, LLGRAD_BLAS="openblas")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() in ("ok", "no bundled openblas"), out.stdout


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "float32", "float64"])
@pytest.mark.parametrize("shapes", [((3, 5), (5, 4)), ((3, 5), (5,)), ((5,), (5, 4)),
                                    ((5,), (5,)), ((2, 3, 5), (2, 5, 4)), ((1, 5), (5, 1))])
def test_compiled_products_of_every_blas_dtype_equal_numpy(dtype, shapes):
    """The compiled matmul kernel asked for the gemm/gemv of its dtype: complex products
    called dgemm on complex data and returned zeros (eager was right); every BLAS dtype
    and every gemm/gemv shape class, compiled against NumPy."""
    rng = np.random.default_rng(0)

    def draw(shape):
        a = rng.standard_normal(shape)
        if dtype.startswith("complex"):
            a = a + 1j * rng.standard_normal(shape)
        return a.astype(dtype)
    a, b = draw(shapes[0]), draw(shapes[1])
    import llgrad as lg
    got = lg.compile(lambda x, y: x @ y)(lg.tensor(a), lg.tensor(b)).numpy()
    tol = 1e-5 if dtype in ("complex64", "float32") else 1e-12
    np.testing.assert_allclose(got, a @ b, rtol=tol, atol=tol)
