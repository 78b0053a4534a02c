"""In-place writes whose operands share memory with the written tensor, against torch.

Every `foo_` method llgrad has is run on a view of a base tensor with each of its tensor
operands in turn replaced by another view of the same base: the exact alias (the same
window), a partial overlap (the window shifted by one element), a disjoint window, and for
square matrices the transpose. torch refuses partial overlaps ("unsupported operation:
some elements of the input tensor and the written-to tensor refer to a single memory
location") and, for ops that write where an index says, even the exact alias; llgrad must
refuse the same calls and give torch's values for the others (the whole base is compared,
so a write outside the window shows too). The argument patterns of each op are found by
asking torch which one it takes with fresh operands.

`-m slow` adds the compiled runs of every case (`lg.compile`, the base cloned inside).
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

OVERLAP = "unsupported operation"

# methods that are not writes of values computed from operands (shape, metadata, random)
NOT_VALUE_WRITES = {"apply_", "map_", "map2_", "detach_", "requires_grad_", "resize_",
                    "resize_as_", "squeeze_", "unsqueeze_", "swapaxes_", "swapdims_", "t_",
                    "transpose_", "is_floating_point_", "normal_", "uniform_", "bernoulli_",
                    "cauchy_", "exponential_", "geometric_", "log_normal_", "random_"}

# argument patterns: strings name operands (see `_operand`), other values pass as they are
PATTERNS: list[tuple] = [
    ("o",), (), (0,), ("o", "p"), ("o", 0.25), (0.5,), ("o", "p", 0.5),
    (0, "idx", "rows"), (0, "idx", 0.5), (0, "idx", "rows", "prod"), (0, "idx2", "o"),
    (0, "idx2", "o", "sum"), ("mask", 0.5), ("mask", "o"), ("flat_idx", "flat"),
    (("idx",), "rows"), ("col", "row"), ("vec", "vec2"), ("mat", "vec"), ("batch", "batch2"),
    (2, 0, 1.0), ("v0",), ("mask", "v0"), (0, "idx", "v0"),
]
TENSOR_NAMES = {"o", "p", "rows", "flat", "col", "row", "vec", "vec2", "mat", "batch",
                "batch2", "v0"}


def _ops() -> list[str]:
    return sorted(m for m in dir(lg.Tensor) if m.endswith("_") and not m.startswith("_")
                  and m not in NOT_VALUE_WRITES and hasattr(torch.Tensor, m))


class Case:
    """One library's base tensor and the views a case reads and writes."""

    def __init__(self, m, values: np.ndarray):
        self.m = m
        self.base = m.tensor(values.copy())

    def window(self, start: int, shape: tuple[int, ...]):
        n = int(np.prod(shape)) if shape else 1
        return self.base[start:start + n].reshape(shape) if shape else self.base[start]


def _shape_of(name: str, dst: tuple[int, ...]) -> tuple[int, ...]:
    rows = (2,) + dst[1:]
    n = dst[0] if dst else 1
    return {"o": dst, "p": dst, "rows": rows, "flat": (3,), "col": (n,),
            "row": dst[1:2] or (1,), "vec": (n,), "vec2": dst[1:2] or (n,),
            "mat": (n, n), "batch": (2,) + dst, "batch2": (2,) + dst[1:] + dst[1:],
            "v0": ()}[name]


def _operand(m, name: str, dst: tuple[int, ...], dtype: str, seed: int):
    """A fresh operand (no memory shared with the base) or an index tensor."""
    rng = np.random.default_rng(seed)
    if name == "idx":
        return m.tensor([dst[0] - 1, 0])
    if name == "idx2":
        return m.tensor(rng.permutation(np.indices(dst)[0].reshape(-1)).reshape(dst)
                        % dst[0])
    if name == "mask":
        return m.tensor(rng.random(dst) > 0.5)
    if name == "flat_idx":
        return m.tensor([1, 0, 3])
    values = 0.5 + rng.random(_shape_of(name, dst))
    if dtype == "int64":
        values = (values * 4).astype(np.int64)
    return m.tensor(values)


def _args(m, pattern: tuple, dst: tuple[int, ...], dtype: str, case: Case,
          replace: tuple[int, int] | None, clone: bool = False) -> list:
    """The pattern's arguments; `replace = (slot, start)` makes the tensor in `slot` a
    window of the base starting at element `start` (or, start -1, the transpose of the
    destination window); `clone`: a copy of that window's values instead."""
    args = []
    for k, a in enumerate(pattern):
        if isinstance(a, tuple):
            args.append(tuple(_operand(m, x, dst, dtype, 7) for x in a))
        elif isinstance(a, str) and a in TENSOR_NAMES | {"idx", "idx2", "mask", "flat_idx"}:
            if replace is not None and replace[0] == k:
                slot, start = replace
                if start == -1:
                    args.append(case.window(DST_START, dst).t())
                else:
                    args.append(case.window(start, _shape_of(a, dst)))
                if clone:
                    args[-1] = args[-1].clone()
            else:
                args.append(_operand(m, a, dst, dtype, 11 + k))
        else:
            args.append(a)
    return args


DST_START = 4
BASE = 80


def _base(dtype: str) -> np.ndarray:
    v = 0.5 + np.arange(BASE) / BASE
    return (np.arange(BASE) % 7 + 1).astype(np.int64) if dtype == "int64" else v


def _run(m, op: str, pattern: tuple, dst: tuple[int, ...], dtype: str,
         replace: tuple[int, int] | None, clone: bool = False):
    case = Case(m, _base(dtype))
    target = case.window(DST_START, dst)
    args = _args(m, pattern, dst, dtype, case, replace, clone)
    try:
        getattr(target, op)(*args)
    except Exception as e:                       # noqa: BLE001 - compared below
        return e
    return np.array(case.base.tolist(), dtype=np.float64)


def _pattern(op: str) -> tuple[tuple, tuple[int, ...], str] | None:
    """The first (pattern, destination shape, dtype) torch takes with fresh operands."""
    for dtype in ("float64", "int64"):
        for dst in ((4, 4), (8,)):
            for pattern in PATTERNS:
                if not isinstance(_run(torch, op, pattern, dst, dtype, None), Exception):
                    return pattern, dst, dtype
    return None


def _scenarios(pattern: tuple, dst: tuple[int, ...]) -> list[tuple[str, tuple[int, int]]]:
    out = [("no tensor operand" if not any(isinstance(a, str) and a in TENSOR_NAMES
                                           for a in pattern) else "fresh operands", None)]
    for k, a in enumerate(pattern):
        if not (isinstance(a, str) and a in TENSOR_NAMES):
            continue
        shape = _shape_of(a, dst)
        n, m = int(np.prod(shape)), int(np.prod(dst))
        for what, start in (("disjoint", DST_START + m + 4), ("partial", DST_START + 1),
                            ("starts inside", DST_START + m - 1)):
            if start + n <= BASE:
                out.append((f"arg{k} {what}", (k, start)))
        if shape == dst:
            out.append((f"arg{k} alias", (k, DST_START)))
            if len(dst) == 2 and dst[0] == dst[1]:
                out.append((f"arg{k} transposed", (k, -1)))
    return out


def reference(op: str, pattern: tuple, dst: tuple[int, ...], dtype: str,
              replace: tuple[int, int] | None):
    """torch's outcome; for the ops torch computes into the destination while reading an
    overlapping operand (products: `addmm_`, `addmv_`, `addbmm_`; `masked_scatter_`),
    torch's values are those of its loop order, so the reference reads a clone: llgrad
    reads every operand before writing (see llgrad.runtime.overlap)."""
    from llgrad.functions.inplace import READ_FIRST
    return _run(torch, op, pattern, dst, dtype, replace,
                clone=op[:-1] in READ_FIRST and replace is not None)


def _compare(want, got, what: str) -> None:
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"{what}: torch raised {want!r}, llgrad ran"
        if isinstance(want, RuntimeError) and OVERLAP in str(want):
            assert isinstance(got, RuntimeError) and OVERLAP in str(got), \
                f"{what}: torch refuses the overlap, llgrad raised {got!r}"
        return
    assert not isinstance(got, Exception), f"{what}: torch ran, llgrad raised {got!r}"
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True,
                               err_msg=what)


def _cases() -> list[tuple[str, tuple, tuple[int, ...], str, str, tuple[int, int]]]:
    cases = []
    for op in _ops():
        found = _pattern(op)
        if found is None:
            continue
        pattern, dst, dtype = found
        for name, replace in _scenarios(pattern, dst):
            cases.append((op, pattern, dst, dtype, name, replace))
    return cases


_CASES: list | None = None


def all_cases() -> list:
    global _CASES
    if _CASES is None:
        _CASES = _cases()
    return _CASES


def test_every_in_place_op_with_overlapping_operands_matches_torch():
    """The fuzz: every in-place op, every tensor operand, every overlap kind."""
    cases = all_cases()
    ops = {c[0] for c in cases}
    refused = 0
    for op, pattern, dst, dtype, name, replace in cases:
        want = reference(op, pattern, dst, dtype, replace)
        got = _run(lg, op, pattern, dst, dtype, replace)
        _compare(want, got, f"{op}{pattern} on {dtype}{list(dst)}, {name}")
        refused += isinstance(want, RuntimeError) and OVERLAP in str(want)
    print(f"OVERLAP FUZZ: {len(cases)} cases over {len(ops)} in-place ops, torch refused "
          f"{refused} overlaps and llgrad refused the same")
    assert len(ops) >= 40 and refused >= 40


@pytest.mark.slow
def test_every_overlap_case_compiled_matches_torch():
    """The same cases inside `lg.compile` (a function of the base that clones it first)."""
    for op, pattern, dst, dtype, name, replace in all_cases():
        want = reference(op, pattern, dst, dtype, replace)

        def f(b):
            case = Case(lg, np.zeros(1))
            case.base = b.clone()
            target = case.window(DST_START, dst)
            getattr(target, op)(*_args(lg, pattern, dst, dtype, case, replace))
            return case.base
        try:
            got = np.array(lg.compile(f)(lg.tensor(_base(dtype))).tolist(), np.float64)
        except Exception as e:                   # noqa: BLE001
            got = e
        _compare(want, got, f"compiled {op}{pattern} on {dtype}{list(dst)}, {name}")


# --------------------------------------------------------------------------------------
# The reported cases, eager and compiled
# --------------------------------------------------------------------------------------

def _copy_shifted(a):
    a[1:].copy_(a[:-1])
    return a


def _add_shifted(a):
    a[1:].add_(a[:-1])
    return a


def _copy_transposed(a):
    a.copy_(a.T)
    return a


def _setitem_shifted(a):
    a[1:] = a[:-1]
    return a


def _index_put_overlap(a):
    a[lg.tensor([0, 1]) if isinstance(a, lg.Tensor) else torch.tensor([0, 1])] = a[1:3]
    return a


@pytest.mark.parametrize("fn, shape", [(_copy_shifted, (10,)), (_add_shifted, (10,)),
                                       (_copy_transposed, (3, 3)), (_setitem_shifted, (10,)),
                                       (_index_put_overlap, (10,))])
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_reported_partial_overlaps_raise_as_torch(fn, shape, mode):
    with pytest.raises(RuntimeError, match=OVERLAP):
        fn(torch.arange(float(np.prod(shape))).reshape(shape))
    a = lg.arange(float(np.prod(shape))).reshape(shape)
    run = fn if mode == "eager" else lg.compile(lambda x: fn(x.clone()))
    with pytest.raises(RuntimeError, match=OVERLAP):
        run(a)
    np.testing.assert_array_equal(a.numpy(), np.arange(float(np.prod(shape))).reshape(shape))


def test_exact_aliases_and_disjoint_windows_are_allowed():
    a, t = lg.arange(10.0), torch.arange(10.0)
    for x in (a, t):
        x.add_(x)
        x[:5].copy_(x[5:])
        x.mul_(x[:])
        x[:] = x
    np.testing.assert_array_equal(a.numpy(), t.numpy())


def test_strided_operands_that_share_memory_read_their_old_values():
    """Overlaps torch cannot decide (a strided or expanded operand) run in torch; llgrad
    reads every operand before writing, so the result is the clone()d one."""
    a = lg.arange(10.0)
    a[1:6].add_(a[:10:2])                     # strided, sharing a[2], a[4]
    want = np.arange(10.0)
    want[1:6] += np.arange(10.0)[:10:2]
    np.testing.assert_array_equal(a.numpy(), want)
    b = lg.arange(10.0)
    b[1:].add_(b[:1].expand(9))               # an expanded view of b[0] = 0
    np.testing.assert_array_equal(b.numpy(), np.arange(10.0))
    c = lg.arange(6.0)
    c.copy_(c.flip(0))                        # a view in llgrad, a copy in torch
    np.testing.assert_array_equal(c.numpy(), np.arange(6.0)[::-1])


def test_out_arguments_receive_a_result_computed_first():
    # (torch refuses a partial overlap of out= with an input; llgrad computes the result
    # out of place and then writes it, so any overlap gives the old values' result)
    a = lg.arange(10.0)
    lg.add(a[:5], 1, out=a[2:7])
    want = np.arange(10.0)
    want[2:7] = np.arange(5.0) + 1
    np.testing.assert_array_equal(a.numpy(), want)
    b = lg.arange(10.0)
    lg.add(b, 1, out=b)                                   # an exact alias
    np.testing.assert_array_equal(b.numpy(), np.arange(10.0) + 1)
