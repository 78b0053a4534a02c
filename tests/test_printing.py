"""Tests for llgrad._printing: PyTorch-identical tensor formatting.

Most tests are differential: they build a torch tensor, format its values with
``format_tensor`` and compare with ``repr(tensor)`` (``torch.`` replaced by
``llgrad.``).  They skip when torch is not installed; a handful of literal
tests at the top run without torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from llgrad._printing import (
    format_tensor,
    get_printoptions,
    printoptions,
    set_printoptions,
)

DEFAULT_OPTIONS = {
    "precision": 4,
    "threshold": 1000,
    "edgeitems": 3,
    "linewidth": 80,
    "sci_mode": None,
}


@pytest.fixture(autouse=True)
def _restore_printoptions() -> Iterator[None]:
    """Restore llgrad's (and, when present, torch's) print options after each test."""
    saved = get_printoptions()
    try:
        import torch
    except ImportError:  # pragma: no cover - torch-free environment
        torch = None
    torch_saved = torch._tensor_str.get_printoptions() if torch is not None else None
    torch_default = torch.get_default_dtype() if torch is not None else None
    yield
    set_printoptions(**saved)
    if torch is not None:
        torch.set_printoptions(**torch_saved)
        torch.set_default_dtype(torch_default)


# ---------------------------------------------------------------------------
# Torch-free tests with literal expectations
# ---------------------------------------------------------------------------


def test_literal_grad_fn_2d() -> None:
    got = format_tensor(
        np.full((2, 2), 4.5, dtype=np.float32), dtype_name="float32", grad_fn_name="MulBackward0"
    )
    assert got == "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]], grad_fn=<MulBackward0>)"


def test_literal_scalars() -> None:
    assert format_tensor(np.array(3.0, np.float32), dtype_name="float32") == "tensor(3.)"
    assert format_tensor(np.array(7), dtype_name="int64") == "tensor(7)"
    assert format_tensor(np.array(True), dtype_name="bool") == "tensor(True)"
    assert (
        format_tensor(np.array(0.5), dtype_name="float64") == "tensor(0.5000, dtype=llgrad.float64)"
    )


def test_literal_vectors() -> None:
    assert format_tensor(np.array([1, 2, 3], np.int32), dtype_name="int32") == (
        "tensor([1, 2, 3], dtype=llgrad.int32)"
    )
    assert format_tensor(np.array([1.0, -2.5, np.nan, np.inf]), dtype_name="float32") == (
        "tensor([ 1.0000, -2.5000,     nan,     inf])"
    )
    assert format_tensor(np.array([0.0, -0.0, 2.0]), dtype_name="float32") == (
        "tensor([0., -0., 2.])"
    )
    assert format_tensor(np.array([1e-5, 1.0]), dtype_name="float32") == (
        "tensor([1.0000e-05, 1.0000e+00])"
    )
    assert format_tensor(np.array([True, False]), dtype_name="bool") == "tensor([ True, False])"
    assert format_tensor(np.array([1 + 2j, 3 - 4j]), dtype_name="complex64") == (
        "tensor([1.+2.j, 3.-4.j])"
    )


def test_literal_requires_grad_and_empty() -> None:
    assert format_tensor(np.ones(2, np.float32), dtype_name="float32", requires_grad=True) == (
        "tensor([1., 1.], requires_grad=True)"
    )
    # grad_fn wins over requires_grad
    assert format_tensor(
        np.ones(1, np.float32), dtype_name="float32", requires_grad=True, grad_fn_name="AddBackward0"
    ) == ("tensor([1.], grad_fn=<AddBackward0>)")
    assert format_tensor(np.zeros(0, np.float32), dtype_name="float32") == "tensor([])"
    assert format_tensor(np.zeros((0, 3), np.float32), dtype_name="float32") == (
        "tensor([], size=(0, 3))"
    )
    assert format_tensor(np.zeros(0, np.int64), dtype_name="int64") == (
        "tensor([], dtype=llgrad.int64)"
    )


def test_literal_summarized_and_3d() -> None:
    assert format_tensor(np.arange(2000), dtype_name="int64") == (
        "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
    )
    assert format_tensor(np.arange(8).reshape(2, 2, 2), dtype_name="int64") == (
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"
    )


def test_literal_custom_prefix() -> None:
    got = format_tensor(np.eye(2, dtype=np.float32), dtype_name="float32", prefix="Tensor(")
    assert got == "Tensor([[1., 0.],\n        [0., 1.]])"


def test_bfloat16_values_are_rounded() -> None:
    # 1.00390625 is not representable in bfloat16 (8 mantissa bits); it rounds to 1.0.
    assert format_tensor(np.array([1.00390625, 2.0], np.float32), dtype_name="bfloat16") == (
        "tensor([1., 2.], dtype=llgrad.bfloat16)"
    )


def test_default_float_dtype_parameter() -> None:
    values = np.array([1.5])
    assert format_tensor(values, dtype_name="float64", default_float_dtype="float64") == (
        "tensor([1.5000])"
    )
    assert format_tensor(values, dtype_name="float32", default_float_dtype="float64") == (
        "tensor([1.5000], dtype=llgrad.float32)"
    )
    assert format_tensor(
        np.array([1j]), dtype_name="complex128", default_float_dtype="float64"
    ) == ("tensor([0.+1.j])")


def test_unknown_dtype_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported dtype_name"):
        format_tensor(np.zeros(1), dtype_name="float8")


def test_printoptions_api() -> None:
    assert get_printoptions() == DEFAULT_OPTIONS
    set_printoptions(precision=2, sci_mode=True)
    assert get_printoptions()["precision"] == 2
    assert get_printoptions()["sci_mode"] is True
    # Like torch, any call resets sci_mode unless it is passed again.
    set_printoptions(linewidth=100)
    assert get_printoptions()["sci_mode"] is None
    set_printoptions(profile="full")
    assert get_printoptions()["threshold"] == math.inf
    assert get_printoptions()["linewidth"] == 80  # profiles reset linewidth
    set_printoptions(profile="short")
    assert get_printoptions() == {**DEFAULT_OPTIONS, "precision": 2, "edgeitems": 2}
    set_printoptions(profile="default")
    assert get_printoptions() == DEFAULT_OPTIONS
    with printoptions(precision=1):
        assert format_tensor(np.array([1.25]), dtype_name="float32") == "tensor([1.2])"
    assert format_tensor(np.array([1.25]), dtype_name="float32") == "tensor([1.2500])"


# ---------------------------------------------------------------------------
# Differential tests against torch
# ---------------------------------------------------------------------------


def _torch() -> Any:
    return pytest.importorskip("torch")


def _expected(t: Any) -> str:
    return repr(t).replace("torch.", "llgrad.")


def _ours(t: Any) -> str:
    torch = _torch()
    detached = t.detach()
    if detached.dtype == torch.bfloat16:
        values, dtype_name = detached.float().numpy(), "bfloat16"
    else:
        values, dtype_name = detached.resolve_conj().numpy(), str(detached.dtype).removeprefix("torch.")
    return format_tensor(
        values,
        dtype_name=dtype_name,
        requires_grad=t.requires_grad,
        grad_fn_name=type(t.grad_fn).__name__ if t.grad_fn is not None else None,
        default_float_dtype=str(torch.get_default_dtype()).removeprefix("torch."),
    )


def _check(t: Any) -> None:
    assert _ours(t) == _expected(t)


def _seeded(seed: int = 0) -> Any:
    torch = _torch()
    return torch.Generator().manual_seed(seed)


def _randn(*shape: int, dtype: str = "float32", scale: float = 1.0, seed: int = 0) -> Any:
    torch = _torch()
    return torch.randn(*shape, generator=_seeded(seed), dtype=getattr(torch, dtype)) * scale


def _ints(*shape: int, low: int = -50, high: int = 50, dtype: str = "int64", seed: int = 0) -> Any:
    torch = _torch()
    return torch.randint(low, high, shape, generator=_seeded(seed), dtype=getattr(torch, dtype))


def _t(data: Any, dtype: str | None = None, requires_grad: bool = False) -> Any:
    torch = _torch()
    return torch.tensor(
        data, dtype=getattr(torch, dtype) if dtype else None, requires_grad=requires_grad
    )


def _with_grad_fn(kind: str) -> Any:
    torch = _torch()
    x = torch.full((2, 2), 1.5, requires_grad=True)
    if kind == "mul":
        return x * 3
    if kind == "sum":
        return (x * 2).sum()
    if kind == "add":
        return x + torch.ones(2, 2)
    if kind == "matmul":
        return x @ x
    if kind == "view":
        return x.view(4)
    if kind == "exp":
        return x.exp()
    raise ValueError(kind)


NAN, INF = math.nan, math.inf

# (case id, builder) — builders run lazily so collection works without torch.
CASES: list[tuple[str, Callable[[], Any]]] = [
    # 0-d
    ("0d_float", lambda: _t(3.14159)),
    ("0d_intvalued_float", lambda: _t(2.0)),
    ("0d_negzero", lambda: _t(-0.0)),
    ("0d_zero", lambda: _t(0.0)),
    ("0d_nan", lambda: _t(NAN)),
    ("0d_neg_inf", lambda: _t(-INF)),
    ("0d_large", lambda: _t(1.5e10)),
    ("0d_tiny", lambda: _t(1e-7)),
    ("0d_int64", lambda: _t(-42)),
    ("0d_int32", lambda: _t(7, "int32")),
    ("0d_bool", lambda: _t(False)),
    ("0d_float64", lambda: _t(2.5, "float64")),
    ("0d_float16", lambda: _t(0.1, "float16")),
    ("0d_bfloat16", lambda: _t(0.1, "bfloat16")),
    ("0d_complex64", lambda: _t(1 - 2.5j)),
    ("0d_complex128", lambda: _t(-0.0 + 0j, "complex128")),
    ("0d_requires_grad", lambda: _t(1.0, requires_grad=True)),
    # 1-d floats
    ("1d_float", lambda: _randn(7)),
    ("1d_intvalued", lambda: _t([1.0, -2.0, 300.0])),
    ("1d_intvalued_with_nonfinite", lambda: _t([1.0, NAN, -INF, INF, 0.0])),
    ("1d_only_nonfinite", lambda: _t([NAN, INF, -INF])),
    ("1d_zeros", lambda: _t([0.0, 0.0, -0.0])),
    ("1d_negzero_fraction", lambda: _t([-0.0, 0.5, 1.25])),
    ("1d_mixed_nan_inf", lambda: _t([0.1, NAN, -1.5, INF, -INF])),
    ("1d_sci_ratio", lambda: _t([1.0, 1001.0, 0.5])),
    ("1d_sci_large", lambda: _t([2e8, 3e8])),
    ("1d_sci_tiny", lambda: _t([1e-5, 2e-5])),
    ("1d_sci_with_nan", lambda: _t([1e-8, NAN, -INF, 0.0, 3e6])),
    ("1d_sci_intvalued", lambda: _t([1.0, 1e9])),
    ("1d_not_sci_boundary", lambda: _t([0.1, 100.0])),
    ("1d_big_integers", lambda: _t([1e7, 2.0])),
    ("1d_float64_huge_exponent", lambda: _t([1e200, -1e-200], "float64")),
    ("1d_rounding_carry", lambda: _t([9.99996, 0.5])),
    ("1d_float16", lambda: _randn(9, dtype="float16")),
    ("1d_float16_extremes", lambda: _t([65504.0, 6e-8, -1.0], "float16")),
    ("1d_bfloat16", lambda: _randn(9, dtype="bfloat16", scale=100)),
    ("1d_float64", lambda: _randn(6, dtype="float64")),
    # 1-d ints / bools
    ("1d_int64", lambda: _ints(12)),
    ("1d_int32", lambda: _ints(5, dtype="int32")),
    ("1d_int16", lambda: _ints(5, dtype="int16")),
    ("1d_int8", lambda: _ints(5, dtype="int8")),
    ("1d_uint8", lambda: _ints(5, low=0, high=255, dtype="uint8")),
    ("1d_int64_extremes", lambda: _t([-(2**63), 2**63 - 1, 0])),
    ("1d_bool", lambda: _t([True, False, True])),
    ("1d_all_true", lambda: _t([True, True])),
    # 1-d complex
    ("1d_complex64", lambda: _randn(5, dtype="complex64")),
    ("1d_complex128", lambda: _randn(5, dtype="complex128")),
    ("1d_complex_intvalued", lambda: _t([1 + 2j, -3 - 4j, 5j])),
    ("1d_complex_sci", lambda: _t([1e-6 + 1e6j, 2 + 0j])),
    ("1d_complex_nonfinite", lambda: _t([complex(NAN, 1), complex(1, INF), complex(0, -0.0)])),
    # wrapping of long rows
    ("wrap_1d_float", lambda: _randn(30)),
    ("wrap_1d_int", lambda: _ints(60, low=-1000, high=1000)),
    ("wrap_1d_sci", lambda: _randn(25, scale=1e9)),
    ("wrap_1d_complex", lambda: _randn(20, dtype="complex64")),
    ("wrap_2d_rows", lambda: _randn(3, 20)),
    ("wrap_3d_rows", lambda: _randn(2, 2, 15, dtype="float64")),
    ("wrap_bool", lambda: _t([True, False] * 20)),
    # 2-d
    ("2d_float", lambda: _randn(3, 4)),
    ("2d_ints", lambda: _ints(4, 3, low=-1000, high=1000)),
    ("2d_intvalued_float", lambda: _t([[1.0, 2.0], [3.0, 40.0]])),
    ("2d_bool", lambda: _t([[True, False], [False, True]])),
    ("2d_single_column", lambda: _randn(4, 1)),
    ("2d_single_row", lambda: _randn(1, 4)),
    ("2d_sci", lambda: _randn(3, 3, scale=1e-6)),
    ("2d_complex", lambda: _randn(2, 3, dtype="complex128")),
    ("2d_float16", lambda: _randn(3, 3, dtype="float16")),
    ("2d_bfloat16", lambda: _randn(3, 3, dtype="bfloat16")),
    ("2d_requires_grad", lambda: _randn(2, 3).requires_grad_()),
    ("2d_float64_requires_grad", lambda: _randn(2, 3, dtype="float64").requires_grad_()),
    # 3-d / 4-d
    ("3d_float", lambda: _randn(2, 3, 4)),
    ("3d_int32", lambda: _ints(3, 2, 2, dtype="int32")),
    ("3d_bool", lambda: _ints(2, 2, 3, low=0, high=2) > 0),
    ("3d_complex64", lambda: _randn(2, 2, 2, dtype="complex64")),
    ("4d_float", lambda: _randn(2, 2, 2, 3)),
    ("4d_int", lambda: _ints(2, 3, 2, 2)),
    ("5d_float", lambda: _randn(1, 2, 1, 2, 2)),
    # grad_fn suffixes
    ("grad_fn_mul", lambda: _with_grad_fn("mul")),
    ("grad_fn_sum_0d", lambda: _with_grad_fn("sum")),
    ("grad_fn_add", lambda: _with_grad_fn("add")),
    ("grad_fn_matmul", lambda: _with_grad_fn("matmul")),
    ("grad_fn_view", lambda: _with_grad_fn("view")),
    ("grad_fn_exp", lambda: _with_grad_fn("exp")),
    ("grad_fn_float64", lambda: _randn(3, dtype="float64").requires_grad_() * 2),
    ("grad_fn_long_row_suffix_wraps", lambda: _randn(9).requires_grad_() * 2),
    ("dtype_suffix_wraps", lambda: _randn(9, dtype="float64")),
    ("dtype_suffix_wraps_2d", lambda: _randn(2, 9, dtype="float64")),
    ("two_suffixes_wrap", lambda: _randn(8, dtype="float64").requires_grad_() * 2),
    # summarization
    ("sum_1d_float", lambda: _randn(1500)),
    ("sum_1d_int", lambda: _t(list(range(1001)))),
    ("sum_2d", lambda: _randn(40, 40)),
    ("sum_2d_wide_narrow", lambda: _randn(500, 3)),
    ("sum_2d_narrow_wide", lambda: _randn(3, 500)),
    ("sum_3d", lambda: _randn(10, 10, 12)),
    ("sum_4d", lambda: _ints(7, 7, 7, 7)),
    ("sum_complex", lambda: _randn(33, 33, dtype="complex64")),
    ("sum_bool", lambda: _ints(1200, low=0, high=2) > 0),
    ("sum_width_from_edges_only", lambda: _t([1.5] * 3 + [123456.0] * 1000 + [2.5] * 3)),
    ("sum_sci_from_edges_only", lambda: _t([1.0] * 3 + [1e-9] * 1000 + [2.0] * 3)),
    ("sum_requires_grad", lambda: _randn(1001).requires_grad_()),
    # empty
    ("empty_1d", lambda: _t([])),
    ("empty_0x3", lambda: _torch().zeros(0, 3)),
    ("empty_2x0x4", lambda: _torch().zeros(2, 0, 4)),
    ("empty_int64", lambda: _torch().zeros(0, dtype=_torch().int64)),
    ("empty_bool_2d", lambda: _torch().zeros(3, 0, dtype=_torch().bool)),
    ("empty_float64", lambda: _torch().zeros(0, dtype=_torch().float64)),
    ("empty_complex64", lambda: _torch().zeros(0, dtype=_torch().complex64)),
    ("empty_bfloat16", lambda: _torch().zeros(0, 2, dtype=_torch().bfloat16)),
    ("empty_requires_grad", lambda: _torch().zeros(0, 3, requires_grad=True)),
]


@pytest.mark.parametrize("build", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_torch(build: Callable[[], Any]) -> None:
    _torch()
    _check(build())


# Print-option variations: (case id, options, builder).
OPTION_CASES: list[tuple[str, dict[str, Any], Callable[[], Any]]] = [
    ("precision_2", {"precision": 2}, lambda: _randn(3, 3)),
    ("precision_0", {"precision": 0}, lambda: _t([0.4, 1.6, -2.5])),
    ("precision_0_sci", {"precision": 0}, lambda: _t([1e-6, 3.0])),
    ("precision_8_float64", {"precision": 8}, lambda: _randn(4, dtype="float64")),
    ("precision_10_complex", {"precision": 10}, lambda: _randn(3, dtype="complex128")),
    ("threshold_small", {"threshold": 5}, lambda: _t(list(range(10)))),
    ("threshold_small_2d", {"threshold": 5}, lambda: _randn(8, 9)),
    ("threshold_not_reached", {"threshold": 10}, lambda: _t(list(range(10)))),
    ("threshold_inf", {"threshold": math.inf}, lambda: _t(list(range(1200)))),
    ("edgeitems_1", {"threshold": 5, "edgeitems": 1}, lambda: _randn(4, 5, 6)),
    ("edgeitems_2_short_dims", {"threshold": 5, "edgeitems": 2}, lambda: _randn(4, 3)),
    ("edgeitems_0_1d", {"threshold": 5, "edgeitems": 0}, lambda: _randn(10)),
    ("edgeitems_0_2d", {"threshold": 5, "edgeitems": 0}, lambda: _randn(4, 5)),
    ("edgeitems_0_not_summarized", {"edgeitems": 0}, lambda: _randn(4)),
    ("edgeitems_0_0d", {"edgeitems": 0, "threshold": 0}, lambda: _t(2.5)),
    ("edgeitems_0_grad", {"threshold": 5, "edgeitems": 0}, lambda: _randn(4, 5).requires_grad_()),
    # The suffix fits on the line with "torch." but not with "llgrad."; wrapping
    # follows torch so the texts agree after the name substitution.
    ("suffix_wrap_boundary", {"linewidth": 78}, lambda: _t([0.5] * 6, "float64")),
    ("suffix_wrap_boundary_2d", {"linewidth": 56}, lambda: _t([[0.5] * 3] * 2, "float64")),
    ("linewidth_40", {"linewidth": 40}, lambda: _randn(20)),
    ("linewidth_40_2d_suffix", {"linewidth": 40}, lambda: _randn(2, 4, dtype="float64")),
    ("linewidth_tiny", {"linewidth": 5}, lambda: _randn(3, 2)),
    ("linewidth_200", {"linewidth": 200}, lambda: _randn(30, dtype="float64")),
    ("sci_forced_on", {"sci_mode": True}, lambda: _randn(2, 3)),
    ("sci_forced_on_intvalued", {"sci_mode": True}, lambda: _t([1.0, 2.0])),
    ("sci_forced_off", {"sci_mode": False}, lambda: _t([1e-8, 1e8])),
    ("sci_forced_off_tiny", {"sci_mode": False}, lambda: _t([1e-7, 1.0])),
    ("sci_forced_on_ints_unaffected", {"sci_mode": True}, lambda: _ints(4)),
    ("sci_forced_on_complex", {"sci_mode": True}, lambda: _randn(2, dtype="complex64")),
    ("profile_short", {"profile": "short"}, lambda: _randn(10, 10)),
    ("profile_full", {"profile": "full"}, lambda: _ints(1100)),
    ("profile_default_after_change", {"profile": "default"}, lambda: _randn(3)),
]


@pytest.mark.parametrize(
    "options,build",
    [(c[1], c[2]) for c in OPTION_CASES],
    ids=[c[0] for c in OPTION_CASES],
)
def test_matches_torch_with_printoptions(options: dict[str, Any], build: Callable[[], Any]) -> None:
    torch = _torch()
    torch.set_printoptions(**options)
    set_printoptions(**options)
    _check(build())


def test_printoptions_mirror_torch() -> None:
    torch = _torch()
    assert get_printoptions() == torch._tensor_str.get_printoptions()
    for kwargs in (
        {"precision": 6, "sci_mode": False},
        {"profile": "short"},
        {"profile": "full", "linewidth": 120},
        {"threshold": 3, "edgeitems": 1, "sci_mode": True},
        {"profile": "default"},
    ):
        torch.set_printoptions(**kwargs)
        set_printoptions(**kwargs)
        assert get_printoptions() == torch._tensor_str.get_printoptions()


@pytest.mark.parametrize(
    "build",
    [
        lambda: _randn(3, dtype="float64"),
        lambda: _randn(3, dtype="float32"),
        lambda: _randn(3, dtype="complex128"),
        lambda: _randn(3, dtype="complex64"),
        lambda: _ints(3),
        lambda: _torch().zeros(0, dtype=_torch().float64),
        lambda: _torch().zeros(0, dtype=_torch().float32),
    ],
    ids=["float64", "float32", "complex128", "complex64", "int64", "empty_f64", "empty_f32"],
)
def test_matches_torch_with_float64_default(build: Callable[[], Any]) -> None:
    torch = _torch()
    torch.set_default_dtype(torch.float64)
    _check(build())


def test_prefix_indentation_matches_torch() -> None:
    torch = _torch()

    class Special(torch.Tensor):  # torch uses "<ClassName>(" as the prefix for subclasses
        pass

    t = _randn(3, 20).as_subclass(Special)
    values = t.detach().as_subclass(torch.Tensor).numpy()
    got = format_tensor(values, dtype_name="float32", prefix="Special(")
    assert got == _expected(t)


# ---------------------------------------------------------------------------
# Property-based differential tests
# ---------------------------------------------------------------------------

_FLOAT_DTYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


@st.composite
def _float_arrays(draw: st.DrawFn) -> tuple[np.ndarray, str]:
    dtype_name = draw(st.sampled_from(sorted(_FLOAT_DTYPES)))
    np_dtype = np.dtype(_FLOAT_DTYPES[dtype_name])
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
    width = np_dtype.itemsize * 8
    elements = st.one_of(
        st.floats(allow_nan=True, allow_infinity=True, width=width),
        st.sampled_from([0.0, -0.0, 1.0, -2.0, 0.5, 1e-5, 1e9, 123.0]),
        st.integers(-(10**4), 10**4).map(float),
    )
    count = math.prod(shape)
    items = draw(st.lists(elements, min_size=count, max_size=count))
    with np.errstate(over="ignore"):
        values = np.array(items, dtype=np.float64).astype(np_dtype).reshape(shape)
    return values, dtype_name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_float_arrays(), requires_grad=st.booleans())
def test_hypothesis_floats_match_torch(data: tuple[np.ndarray, str], requires_grad: bool) -> None:
    torch = _torch()
    values, dtype_name = data
    t = torch.from_numpy(values.copy())
    if requires_grad:
        t.requires_grad_()
    got = format_tensor(values, dtype_name=dtype_name, requires_grad=requires_grad)
    assert got == _expected(t)


@st.composite
def _any_arrays(draw: st.DrawFn) -> tuple[np.ndarray, str]:
    kind = draw(st.sampled_from(["complex64", "complex128", "int64", "int32", "int8", "bool"]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    if kind.startswith("complex"):
        part = st.floats(allow_nan=True, allow_infinity=True, width=32 if kind == "complex64" else 64)
        elements: st.SearchStrategy[Any] = st.builds(complex, part, part)
    elif kind == "bool":
        elements = st.booleans()
    else:
        elements = None  # hypothesis' default full-range integers
    values = draw(hnp.arrays(np.dtype(kind), shape, elements=elements))
    return values, kind


@settings(max_examples=200, deadline=None)
@given(data=_any_arrays())
def test_hypothesis_other_dtypes_match_torch(data: tuple[np.ndarray, str]) -> None:
    torch = _torch()
    values, dtype_name = data
    got = format_tensor(values, dtype_name=dtype_name)
    assert got == _expected(torch.from_numpy(values.copy()))


@settings(max_examples=150, deadline=None)
@given(
    data=_float_arrays(),
    precision=st.integers(0, 8),
    threshold=st.integers(0, 40),
    edgeitems=st.integers(0, 4),
    linewidth=st.integers(10, 120),
    sci_mode=st.sampled_from([None, True, False]),
)
def test_hypothesis_printoptions_match_torch(
    data: tuple[np.ndarray, str],
    precision: int,
    threshold: int,
    edgeitems: int,
    linewidth: int,
    sci_mode: bool | None,
) -> None:
    torch = _torch()
    options = {
        "precision": precision,
        "threshold": threshold,
        "edgeitems": edgeitems,
        "linewidth": linewidth,
        "sci_mode": sci_mode,
    }
    torch.set_printoptions(**options)
    set_printoptions(**options)
    try:
        values, dtype_name = data
        got = format_tensor(values, dtype_name=dtype_name)
        assert got == _expected(torch.from_numpy(values.copy()))
    finally:
        torch.set_printoptions(profile="default")
        set_printoptions(profile="default")
