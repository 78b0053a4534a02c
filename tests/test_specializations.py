"""Every generated fast path against the general path it stands in for.

The fast paths written as Python source (`llgrad._source.define`) are each made from the
same plan object as a general path that does the same work step by step. These property
tests run both on seeded random inputs (shapes, dtypes, broadcasts, non-contiguous and
offset layouts, numbers, requires_grad mixes) and assert identical results bit for bit,
identical tensors (dtype, shape, strides, offset, base, autograd fields), identical nodes
(class, edges, metadata, scalars) and identical saved tensors:

| generated path (where it is defined)                  | general path (the switch)     |
|-------------------------------------------------------|-------------------------------|
| direct call's recorder (`dispatch.apply`)             | `apply.record`                |
| output maker (`Tensor._empty_maker`)                  | `Tensor._empty`               |
| eager elementwise launch (`eager.elementwise`)        | `plan.launch = False`         |
| eager elementwise direct call (`eager.elementwise`)   | `elementwise.launch_plan`     |
| eager whole-reduction direct call (`eager.reduce`)    | `reduce.Plan.execute`         |
| selection kernel caller (`eager.selection._caller`)   | another thread: `launch.call` |
| LAPACK outputs maker (`linalg._decomp`)               | `Tensor._empty`, `view_of`    |
| compiled graph runner (`compiler.executable`)         | `CompiledGraph._call`         |
| compiled function's call (`compiler.callpath`)        | `CompiledFunction._call`      |
| speculative differentiable call (`compiler.function`) | `DiffCall.__call__`           |
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

import llgrad as lg
from llgrad.dispatch import apply as autograd_apply
from llgrad.tape.node import SavedTensor
from llgrad.compiler.callpath import MISS
from llgrad.eager import elementwise as ew
from llgrad.eager import reduce as eager_reduce
from llgrad.eager import selection
from llgrad.eager import views
from llgrad.functions import fastpath
from llgrad.ir import dtypes as dt
from llgrad.linalg import _decomp
from llgrad.runtime import storage
from llgrad.schedule.layout import contiguous_strides
from llgrad.tensor import Tensor

# --------------------------------------------------------------------------------------
# random operands and exact comparisons
# --------------------------------------------------------------------------------------

FLOATS = (dt.float32, dt.float64)
NUMERIC = (dt.float32, dt.float64, dt.int32, dt.int64, dt.bool_, dt.complex64, dt.bfloat16)
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded")


def _shape(rng: np.random.Generator, ndim: int | None = None, high: int = 5) -> tuple:
    if ndim is None:
        ndim = int(rng.integers(0, 4))
    return tuple(int(s) for s in rng.integers(1, high, size=ndim))


def _values(rng: np.random.Generator, shape: tuple, dtype: dt.DType) -> np.ndarray:
    if dtype is dt.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-5, 6, size=shape).astype(dtype.np)
    if dtype.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype.np)
    a = rng.standard_normal(shape) * 2
    if a.size and rng.random() < 0.3:  # a few special values
        a.flat[int(rng.integers(a.size))] = rng.choice([0.0, -0.0, np.inf, np.nan])
    return a.astype(np.float32 if dtype is dt.bfloat16 else dtype.np)


def _tensor(rng: np.random.Generator, shape: tuple, dtype: dt.DType, layout: str) -> Tensor:
    """A tensor of `shape` and `dtype` with random values, held in `layout`."""
    a = _values(rng, shape, dtype)
    if layout == "contiguous" or not shape:
        return lg.tensor(a, dtype=dtype)
    if layout == "transposed":
        perm = tuple(rng.permutation(len(shape)))
        held = lg.tensor(np.ascontiguousarray(a.transpose(perm)), dtype=dtype)
        return held.permute(tuple(int(i) for i in np.argsort(perm)))
    if layout == "strided":
        big = np.zeros(shape[:-1] + (2 * shape[-1],), a.dtype)
        big[..., ::2] = a
        return lg.tensor(big, dtype=dtype)[..., ::2]
    if layout == "offset":
        big = np.zeros((shape[0] + 1,) + shape[1:], a.dtype)
        big[1:] = a
        return lg.tensor(big, dtype=dtype)[1:]
    # expanded: a dimension of stride 0
    d = int(rng.integers(len(shape)))
    small = lg.tensor(np.ascontiguousarray(a[(slice(None),) * d + (slice(0, 1),)]), dtype=dtype)
    return small.expand(*shape)


def _random_tensor(
    rng: np.random.Generator, shape: tuple, dtype: dt.DType, contiguous: float = 0.4
) -> Tensor:
    layout = "contiguous" if rng.random() < contiguous else str(rng.choice(LAYOUTS[1:]))
    return _tensor(rng, shape, dtype, layout)


def _raw(t: Tensor) -> bytes:
    """`t`'s values as bytes, row-major (NaNs and signed zeros compared exactly)."""
    return np.ascontiguousarray(t.detach()._numpy_view()).tobytes()


def _fields(t: Tensor) -> dict:
    """A tensor's observable fields, except its memory's identity."""
    return {
        "class": t.__class__,
        "dtype": t._dtype,
        "shape": t._shape,
        "strides": t._strides,
        "offset": t._offset,
        "lkey": t._lkey,
        "requires_grad": t._requires_grad,
        "grad": t._grad,
        "grad_fn": type(t.grad_fn),
        "output_nr": t._output_nr,
        "retains_grad": t._retains_grad,
        "hooks": t._hooks,
        "inference": t._inference,
        "nbytes": t._storage.nbytes,
        "version": t._storage.version,
        "storage_inference": t._storage.inference,
        "aligned": t._ptr % 64 == 0 if t._storage.nbytes > storage.SLAB_MAX else True,
    }


def _same_tensor(fast: Tensor, general: Tensor) -> None:
    assert _fields(fast) == _fields(general)
    assert _raw(fast) == _raw(general)


def _edges(node) -> list:
    return [(fn, nr) for fn, nr in node.next_functions]


# --------------------------------------------------------------------------------------
# dispatch.apply.direct_recorder  vs  dispatch.apply.record
# --------------------------------------------------------------------------------------

# (op, arity, dtypes the operands may have): every save plan of the elementwise ops
# (nothing, inputs, the output, both, one input, `save_for` both ways), keeps_layout
# (matmul) and non-differentiable outputs (comparisons)
RECORDED = (
    ("add", 2, FLOATS),
    ("sub", 2, FLOATS),
    ("mul", 2, FLOATS + (dt.complex64,)),
    ("div", 2, FLOATS),
    ("remainder", 2, FLOATS),
    ("atan2", 2, FLOATS),
    ("maximum", 2, FLOATS),
    ("copysign", 2, FLOATS),
    ("pow", 2, FLOATS),
    ("exp", 1, FLOATS + (dt.complex64,)),
    ("tanh", 1, FLOATS),
    ("sin", 1, FLOATS),
    ("abs", 1, FLOATS),
    ("neg", 1, FLOATS),
    ("floor", 1, FLOATS),
    ("sigmoid", 1, FLOATS),
    ("special_i1", 1, FLOATS),
    ("where", 3, FLOATS),
    ("lt", 2, FLOATS),
    ("matmul", 2, FLOATS),
)


# the ops that take a Python number as a later operand (as torch's do)
NUMBERS = ("add", "sub", "mul", "div", "remainder", "copysign", "pow", "lt")


def _recorded_operands(rng: np.random.Generator, op: str, arity: int, dtypes: tuple) -> list:
    d = dtypes[int(rng.integers(len(dtypes)))]
    if op == "matmul":
        m, k, n = (int(s) for s in rng.integers(1, 5, size=3))
        shapes = [(m, k), (k, n)]
    else:
        shape = _shape(rng)
        shapes = [shape[int(rng.integers(len(shape) + 1)) :] for _ in range(arity)]
    operands: list = []
    for i, s in enumerate(shapes):
        if op == "where" and i == 0:
            operands.append(_random_tensor(rng, s, dt.bool_))
            continue
        if op in NUMBERS and i and rng.random() < 0.3:  # a Python number
            operands.append(float(rng.standard_normal()) if rng.random() < 0.7 else 2)
            continue
        t = _random_tensor(rng, s, d)
        kind = rng.random()
        if kind < 0.35:  # a leaf that requires grad
            t = t.detach().requires_grad_()
        elif kind < 0.6:  # a tensor with history (output 0 or a later one of its node)
            w = t.detach().requires_grad_()
            t = (w * 1.0) if rng.random() < 0.5 else lg.stack([w, w]).unbind(0)[1]
        operands.append(t)
    if not any(isinstance(o, Tensor) and o._requires_grad for o in operands):
        k = 1 if op == "where" else 0
        operands[k] = operands[k].detach().requires_grad_()
    return operands


def _saved_fields(s: SavedTensor | None, out: Tensor) -> tuple | None:
    if s is None:
        return None
    layout = s._layout
    if layout is not None:
        st, offset, shape, strides, dtype, base = layout
        layout = (st is out._storage, offset, shape, strides, dtype, base)
    source = None if s.source is None else s.source() is out
    data = s._data
    return (s.is_output, s.requires_grad, s.version, layout, source,
            data if data is None or not s.is_output else _fields(data))


def _same_node(fast, general, out_fast: Tensor, out_general: Tensor) -> None:
    assert type(fast) is type(general)
    assert fast.op == general.op and fast.attrs == general.attrs
    assert _edges(fast) == _edges(general)  # the very same nodes and output numbers
    assert fast.needs_input_grad == general.needs_input_grad
    assert fast._meta == general._meta and fast._layouts == general._layouts
    assert tuple(fast._scalars or ()) == tuple(general._scalars or ())
    assert (fast._hooks, fast._prehooks, fast._metadata, fast._trace) == (None,) * 4
    assert (general._hooks, general._prehooks, general._metadata, general._trace) == (None,) * 4
    assert fast._released is general._released is False
    assert fast._seq < general._seq  # (made first)
    assert [_saved_fields(s, out_fast) for s in fast._saved] == [
        _saved_fields(s, out_general) for s in general._saved
    ]
    for s in fast._saved:  # inputs are saved by reference, as the general path saves them
        if s is not None and not s.is_output:
            assert any(s._data is g._data for g in general._saved if g is not None)


def _general_output(op: str, operands: list) -> Tensor:
    with lg.no_grad():
        if op == "matmul":
            return lg.matmul(*operands)
        return ew.run(op, operands)


def _gradients(out: Tensor, operands: list) -> list:
    leaves = [o for o in operands if isinstance(o, Tensor) and o._requires_grad]
    seed = lg.full(out.shape, 0.5, dtype=out.dtype)
    return lg.autograd.grad([out], leaves, [seed], retain_graph=True, allow_unused=True)


@pytest.mark.parametrize("seed", range(4))
def test_direct_recorder_records_the_general_node(seed):
    rng = np.random.default_rng(100 + seed)
    exercised = 0
    for _ in range(30):
        op, arity, dtypes = RECORDED[int(rng.integers(len(RECORDED)))]
        operands = _recorded_operands(rng, op, arity, dtypes)
        try:
            outs = [_general_output(op, operands) for _ in range(4)]
        except (RuntimeError, TypeError, ValueError):
            continue
        rec = autograd_apply.direct_recorder(op, operands, outs[0])
        fast = rec(*operands, outs[0])
        general = autograd_apply.record(op, operands, {}, outs[1])
        assert fast is outs[0] and general is outs[1]
        _same_tensor(fast, general)
        if not fast._dtype.differentiable:
            assert fast.grad_fn is None and general.grad_fn is None
            continue
        exercised += 1
        _same_node(fast.grad_fn, general.grad_fn, fast, general)
        # the recorder again, with other numbers (its last numbers' tuple is not reused)
        again = [o + 1.0 if isinstance(o, float) else o for o in operands]
        fast2 = rec(*again, outs[2])
        general2 = autograd_apply.record(op, again, {}, outs[3])
        _same_node(fast2.grad_fn, general2.grad_fn, fast2, general2)
        for a, b in zip(_gradients(fast, operands), _gradients(general, operands)):
            assert (a is None) == (b is None)
            if a is not None:
                _same_tensor(a, b)
    assert exercised >= 15


def test_non_differentiable_recorder_returns_the_output_as_record_does():
    x = lg.randn(3).requires_grad_()
    outs = [_general_output("lt", [x, 0.0]) for _ in range(2)]
    rec = autograd_apply.direct_recorder("lt", [x, 0.0], outs[0])
    assert rec(x, 0.0, outs[0]) is outs[0] and outs[0].grad_fn is None
    assert autograd_apply.record("lt", [x, 0.0], {}, outs[1]) is outs[1]
    _same_tensor(outs[0], outs[1])


# --------------------------------------------------------------------------------------
# Tensor._empty_maker  vs  Tensor._empty
# --------------------------------------------------------------------------------------

def _storage_fields(t: Tensor) -> tuple:
    s = t._storage
    raw = s.raw if s.raw is None or isinstance(s.raw, (bool, int)) else type(s.raw)
    return (s.nbytes, s.version, raw, s.inference, s._buffer is None, type(s.owner))


@pytest.mark.parametrize("inference", [False, True])
def test_output_maker_makes_what_empty_makes(inference):
    rng = np.random.default_rng(7)
    sizes = [0, 1, 5, storage.SLAB_MAX, storage.SLAB_MAX + 1, 4000, storage.BLOCK_MAX,
             storage.BLOCK_MAX + 8]
    for _ in range(40):
        d = NUMERIC[int(rng.integers(len(NUMERIC)))]
        if rng.random() < 0.5:
            shape = _shape(rng, high=7)
        else:  # around the allocation classes' limits
            n = max(int(sizes[int(rng.integers(len(sizes)))]) // d.itemsize, 0)
            shape = (n,) if rng.random() < 0.5 else (1, n, 1)
        strides = contiguous_strides(shape)
        make = Tensor._empty_maker(shape, d, strides)
        with lg.inference_mode(inference):
            fast, general = make(), Tensor._empty(shape, d, strides)
            again = make()
        assert _fields(fast) == _fields(general) == _fields(again)
        assert _storage_fields(fast) == _storage_fields(general)
        assert fast._base is general._base is None and fast._ptr == fast._storage.ptr
        assert fast._storage is not again._storage
        n = fast._storage.nbytes
        if n:  # each its own memory
            fast._numpy_view()[...] = 1
            again._numpy_view()[...] = 0
            assert fast._numpy_view().all() and not again._numpy_view().any()


def test_host_output_array_is_the_new_tensor_s_memory():
    """`host_empty`'s NumPy array (`Storage.array`, made without the storage's 1-d view
    where it has none) covers exactly the new tensor's memory, for every allocation class
    and for tensors made by `Tensor._empty` and by `recurring_maker`'s maker alike."""
    from llgrad.functions._host import host_empty
    from llgrad.tensor import _MAKER_AFTER

    rng = np.random.default_rng(8)
    sizes = [1, 5, storage.SLAB_MAX, storage.SLAB_MAX + 1, 4000, storage.BLOCK_MAX + 8,
             storage.POOL_MIN_BYTES + 64]
    for n in sizes:
        for d in (dt.float32, dt.float64, dt.int32, dt.bool_, dt.complex64, dt.bfloat16):
            shape = (2, max(n // d.itemsize // 2, 1))
            for _ in range(_MAKER_AFTER + 2):  # (the later ones from the maker)
                out, arr = host_empty(shape, d)
                assert _fields(out) == _fields(Tensor._empty(shape, d))
                assert arr.shape == shape and arr.dtype == d.np and arr.flags.c_contiguous
                bits = rng.integers(0, 256, out._storage.nbytes, dtype=np.uint8)
                arr.view(np.uint8).reshape(-1)[...] = bits
                assert ctypes.string_at(out._ptr, out._storage.nbytes) == bits.tobytes()
                np.testing.assert_array_equal(out._numpy_view().view(np.uint8).reshape(-1),
                                              bits)


# --------------------------------------------------------------------------------------
# eager elementwise: generated launch and direct call  vs  the plan's template loop
# --------------------------------------------------------------------------------------

ELEMENTWISE = (
    ("add", 2), ("sub", 2), ("mul", 2), ("div", 2), ("maximum", 2), ("atan2", 2),
    ("eq", 2), ("lt", 2), ("bitwise_and", 2), ("exp", 1), ("neg", 1), ("abs", 1),
    ("sqrt", 1), ("logical_not", 1), ("sigmoid", 1), ("where", 3), ("nextafter", 2),
    ("fmod", 2),
)


def _elementwise_case(rng: np.random.Generator) -> tuple[str, list, Tensor | None]:
    op, arity = ELEMENTWISE[int(rng.integers(len(ELEMENTWISE)))]
    d = NUMERIC[int(rng.integers(len(NUMERIC)))]
    shape = _shape(rng)
    operands: list = []
    for i in range(arity):
        s = shape[int(rng.integers(len(shape) + 1)) :] if rng.random() < 0.5 else shape
        if op == "where" and i == 0:
            operands.append(_random_tensor(rng, s, dt.bool_))
        elif i and rng.random() < 0.3:  # a number: float, int, or one that does not fit
            operands.append(float(rng.standard_normal()) if rng.random() < 0.6
                            else int(rng.integers(-3, 4)) if rng.random() < 0.8 else 1e300)
        else:
            operands.append(_random_tensor(rng, s, d))
    out = None
    if rng.random() < 0.2 and isinstance(operands[0], Tensor):
        out = lg.empty(shape, dtype=operands[0].dtype)
        if out._dtype is not operands[0]._dtype:
            out = None
    return op, operands, out


def _run_or_error(fn, *args):
    try:
        return fn(*args), None
    except (RuntimeError, TypeError, ValueError, OverflowError) as e:
        return None, (type(e), str(e))


@pytest.mark.parametrize("seed", range(4))
def test_elementwise_launches_equal_the_template_loop(seed):
    rng = np.random.default_rng(200 + seed)
    launched = direct = 0
    for _ in range(40):
        op, operands, out = _elementwise_case(rng)
        try:
            plan = ew._plan(op, operands, None, out)
        except (RuntimeError, TypeError, ValueError):
            continue
        general_out = None if out is None else lg.empty_like(out)
        plan.launch = False  # the template loop
        general, general_error = _run_or_error(ew.launch_plan, op, plan, operands, general_out)
        plan.launch = None  # made on this call: `_tensor_launch`
        fast, fast_error = _run_or_error(ew.launch_plan, op, plan, operands, out)
        assert fast_error == general_error
        if plan.launch:
            launched += 1
        if general is not None:
            _same_tensor(fast, general)
        if out is not None or plan.kernel is None:
            continue
        made = ew.direct_launch(op, plan, operands)
        if not plan.serial:
            assert made is None
            continue
        if made is None:  # (a number slot the launch does not pack inline)
            continue
        direct += 1
        result = made(*operands)
        assert (result is None) == (general is None)
        if general is not None:
            _same_tensor(result, general)
            bound = ew.direct_launch(op, plan, operands, bind_numbers=True)
            _same_tensor(bound(*[o for o in operands if isinstance(o, Tensor)]), general)
    assert launched >= 10 and direct >= 10


@pytest.mark.parametrize("seed", range(2))
def test_direct_calls_give_the_general_function_s_results_and_nodes(seed):
    """End to end (`functions.fastpath`): the third call of an operator or function takes
    the direct launch and recorder; `__wrapped__` is the general function."""
    rng = np.random.default_rng(300 + seed)
    calls = [
        ("add", lambda a, b: a + b, 2), ("mul", lambda a, b: a * b, 2),
        ("sub", lambda a, b: a - b, 2), ("div", lambda a, b: a / b, 2),
        ("exp", lg.exp, 1), ("tanh", lg.tanh, 1), ("sigmoid", lg.sigmoid, 1),
    ]
    general_of = {
        "add": Tensor.__add__.__wrapped__, "mul": Tensor.__mul__.__wrapped__,
        "sub": Tensor.__sub__.__wrapped__, "div": Tensor.__truediv__.__wrapped__,
        "exp": lg.exp.__wrapped__, "tanh": lg.tanh.__wrapped__,
        "sigmoid": lg.sigmoid.__wrapped__,
    }
    for _ in range(25):
        fastpath.clear()
        name, f, arity = calls[int(rng.integers(len(calls)))]
        op, operands, _ = _recorded_case(rng, name, arity)
        for _ in range(2):  # the first call learns the launch, the second the recorder
            f(*operands)
        fast = f(*operands)
        general = general_of[name](*operands)
        _same_tensor(fast, general)
        if fast.grad_fn is not None:
            assert fast.grad_fn._plan is not None  # the direct recorder made it
            _same_node(fast.grad_fn, general.grad_fn, fast, general)
            for a, b in zip(_gradients(fast, operands), _gradients(general, operands)):
                assert (a is None) == (b is None)
                if a is not None:
                    _same_tensor(a, b)


def _recorded_case(rng: np.random.Generator, name: str, arity: int) -> tuple:
    operands = _recorded_operands(rng, name, arity, FLOATS)
    if rng.random() < 0.3:
        operands = [o.detach() if isinstance(o, Tensor) else o for o in operands]
    return name, operands, None


# --------------------------------------------------------------------------------------
# eager.reduce.direct_launch  vs  the reduction plan's execute
# --------------------------------------------------------------------------------------

REDUCTIONS = ("sum", "prod", "amax", "amin", "argmax", "argmin")


@pytest.mark.parametrize("seed", range(3))
def test_reduction_direct_launch_equals_the_plan(seed):
    rng = np.random.default_rng(400 + seed)
    direct = 0
    for _ in range(30):
        op = REDUCTIONS[int(rng.integers(len(REDUCTIONS)))]
        d = NUMERIC[int(rng.integers(len(NUMERIC)))]
        x = _random_tensor(rng, _shape(rng, high=6), d)
        axes: tuple = ()
        if x.ndim and rng.random() < 0.6:
            k = int(rng.integers(1, x.ndim + 1))
            axes = tuple(int(a) - (x.ndim if rng.random() < 0.3 else 0)
                         for a in rng.choice(x.ndim, k, replace=False))
        keepdim = bool(rng.random() < 0.5)
        try:
            eager_reduce.run(op, x, axes, keepdim)
        except (RuntimeError, TypeError, ValueError):
            continue
        plan = eager_reduce._plans[(op, x._dtype, x._shape, x._strides, axes, keepdim)]
        made = eager_reduce.direct_launch(op, x, axes, keepdim)
        if made is None:
            assert plan.kind != "one" or plan.stages[0].split
            continue
        direct += 1
        for _ in range(2):
            _same_tensor(made(x), plan.execute(x))
    assert direct >= 10


# --------------------------------------------------------------------------------------
# eager.selection._caller: its own block on the thread that made it  vs  launch.call
# --------------------------------------------------------------------------------------

def _on_another_thread(fn, *args):
    result = []
    worker = threading.Thread(target=lambda: result.append(fn(*args)))
    worker.start()
    worker.join()
    return result[0]


def _selection_case(rng: np.random.Generator) -> tuple:
    kind = ("sort", "search", "unravel", "one_hot", "unique", "row_put", "masked_scatter")[
        int(rng.integers(7))]
    d = (dt.float32, dt.float64, dt.int32, dt.int64)[int(rng.integers(4))]
    shape = _shape(rng, int(rng.integers(1, 4)), high=7 if rng.random() < 0.8 else 40)
    x = _random_tensor(rng, shape, d)
    dim = int(rng.integers(x.ndim))
    if kind == "sort":
        return kind, selection.sort_rows, (x, dim, bool(rng.random() < 0.5)), ()
    if kind == "search":
        seq = lg.sort(_random_tensor(rng, shape, d), -1)[0]
        if rng.random() < 0.5:
            seq = seq.reshape(-1)[: shape[-1]]
        values = _random_tensor(rng, shape, d)
        return kind, selection.search, (seq, values, bool(rng.random() < 0.5), None,
                                        (dt.int64, dt.int32)[int(rng.integers(2))]), ()
    if kind == "unravel":
        dims = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 4))))
        total = int(np.prod(dims))
        idx = lg.tensor(rng.integers(-total, total, size=shape).astype(d.np)
                        if d.kind == "i" else rng.integers(0, total, size=shape))
        return kind, selection.unravel, (idx, dims, total), ()
    if kind == "one_hot":
        idx = lg.tensor(rng.integers(0, 4, size=shape).astype(np.int64))
        return kind, selection.one_hot, (idx, int(rng.choice([-1, 4, 6]))), ()
    if kind == "unique":
        x = _random_tensor(rng, shape, d) if d.kind == "f" else lg.tensor(
            rng.integers(0, 3, size=shape).astype(d.np))
        return kind, selection.unique_slices, (x, dim, bool(rng.random() < 0.5),
                                               bool(rng.random() < 0.5)), ()
    if kind == "row_put":
        if rng.random() < 0.5:
            index = lg.tensor(rng.integers(0, shape[0], size=int(rng.integers(1, 4))))
            vshape = (index.shape[0],) + shape[1:]
        else:
            index = lg.tensor(rng.random(shape[:1]) < 0.5)
            vshape = (int(index.sum().item()),) + shape[1:]
        values = _random_tensor(rng, vshape, d)
        return kind, selection.row_put, (x, index, values, bool(rng.random() < 0.5)), (0,)
    mask = _random_tensor(rng, shape[int(rng.integers(len(shape))) :], dt.bool_)
    source = _random_tensor(rng, (int(np.prod(shape)) + 1,), d)
    return kind, selection.masked_scatter, (x, mask, source), ()


def _flat(result) -> list:
    if isinstance(result, Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _flat(r)]
    return [result]


@pytest.mark.parametrize("seed", range(3))
def test_selection_callers_fast_branch_equals_launch_call(seed):
    rng = np.random.default_rng(500 + seed)
    main = threading.get_ident()
    held = 0
    for _ in range(25):
        kind, fn, args, written = _selection_case(rng)
        copies = [[a.clone() if i in written else a for i, a in enumerate(args)]
                  for _ in range(2)]
        selection._plans.clear()
        fast = fn(*copies[0])  # makes the plan (and its callers) on this thread
        callers = [c for plan in selection._plans.values() if isinstance(plan, tuple)
                   for c in plan if callable(c) and hasattr(c, "__source__")]
        held += any(c.__globals__.get("THREAD") == main and "ident()" in c.__source__
                    for c in callers)
        general = _on_another_thread(fn, *copies[1])
        assert (fast is None) == (general is None), kind
        if fast is None:
            continue
        for a, b in zip(_flat(fast), _flat(general)):
            if isinstance(a, Tensor):
                _same_tensor(a, b)
            else:
                assert a == b
        for i in written:
            _same_tensor(copies[0][i], copies[1][i])
    assert held


# --------------------------------------------------------------------------------------
# linalg._decomp._outputs_maker  vs  Tensor._empty (zeroed) and the transposed view
# --------------------------------------------------------------------------------------

def test_linalg_outputs_maker_makes_what_empty_and_view_of_make():
    rng = np.random.default_rng(600)
    for inference in (False, True) * 15:
        specs: list = []
        for i in range(int(rng.integers(1, 5))):
            if i and rng.random() < 0.3:
                # (the view of the output made just before: the maker's one use, and what
                # its code assumes: the view's storage and address are the last made)
                j = i - 1
                if specs[j][0] != "mT" and len(specs[j][0]) >= 2:
                    specs.append(("mT", j))
                    continue
            d = (dt.float32, dt.float64, dt.complex64, dt.complex128, dt.int32)[
                int(rng.integers(5))]
            shape = _shape(rng, int(rng.integers(0, 4)), high=6 if rng.random() < 0.8 else 40)
            specs.append((shape, d, bool(rng.random() < 0.5)))
        make = _decomp._outputs_maker(specs)
        with lg.inference_mode(inference):
            fast = make()
            general: list = []
            for spec in specs:
                if spec[0] == "mT":
                    t = general[spec[1]]
                    s, st = t._shape, t._strides
                    general.append(views.view_of(t, 0, s[:-2] + (s[-1], s[-2]),
                                                 st[:-2] + (st[-1], st[-2])))
                    continue
                shape, d, zero = spec
                t = Tensor._empty(shape, d)
                if zero:
                    ctypes.memset(t._ptr, 0, t._storage.nbytes)
                general.append(t)
        assert isinstance(fast, tuple) and len(fast) == len(general)
        for a, b, spec in zip(fast, general, specs):
            assert _fields(a) == _fields(b)
            assert _storage_fields(a) == _storage_fields(b)
            if spec[0] == "mT":
                assert a._base is fast[spec[1]] and b._base is general[spec[1]]
                assert a._storage is fast[spec[1]]._storage
            else:
                assert a._base is b._base is None
                if spec[2]:
                    assert _raw(a) == _raw(b)


# --------------------------------------------------------------------------------------
# compiled code: the graph runner, the per-signature call, the speculative call
# --------------------------------------------------------------------------------------

def _f_chain(x, y):
    return (x * y).tanh() + y.sin()


def _f_loss(x, y):
    return ((x * y).tanh() + y.sin()).sum()


def _f_two(x, y):
    return x.sum(-1) * 2.0, (x - y).exp()


def _f_matmul(x, y):
    return (x @ y.transpose(-1, -2)).relu().sum()


def _f_write(x, y):
    y.add_(x * 0.5)
    return x.mean()


FUNCTIONS = (_f_chain, _f_loss, _f_two, _f_matmul, _f_write)


def _compiled_case(rng: np.random.Generator, f, dtype: dt.DType, grad: bool) -> tuple:
    shape = _shape(rng, int(rng.integers(1, 3)), high=6)
    if f is _f_matmul:
        shape = shape if len(shape) == 2 else shape + (3,)
    x = _random_tensor(rng, shape, dtype)
    y = _random_tensor(rng, shape, dtype).contiguous()
    if grad and f is not _f_write:
        x = x.detach().requires_grad_(bool(rng.random() < 0.7))
        y = y.detach().requires_grad_(not x._requires_grad or bool(rng.random() < 0.5))
    return x, y


def _outputs(result) -> list:
    return _flat(result)


@pytest.mark.parametrize("seed", range(2))
def test_graph_runner_equals_the_general_call(seed):
    rng = np.random.default_rng(700 + seed)
    for f in FUNCTIONS:
        d = FLOATS[int(rng.integers(2))]
        x, y = _compiled_case(rng, f, d, False)
        cf = lg.compile(f)
        cf(x, y.clone())
        ex = next(iter(cf._entries.values())).function.plain().executable
        for _ in range(6):
            args = [_random_tensor(rng, p.shape, p.dtype) for p in ex._params]
            if rng.random() < 0.3:  # an argument as a NumPy array
                args[0] = args[0].numpy().copy()
            for verified in (0, len(args)):
                if verified and not all(isinstance(a, Tensor) for a in args):
                    continue
                fast_args = [a.clone() if isinstance(a, Tensor) else a.copy() for a in args]
                general_args = [a.clone() if isinstance(a, Tensor) else a.copy() for a in args]
                if verified:
                    fast_args = [a.contiguous() for a in fast_args]
                    general_args = [a.contiguous() for a in general_args]
                fast = ex.runner(verified)(*fast_args)
                general = ex._call(*general_args)
                assert len(fast) == len(general)
                for k, (a, b) in enumerate(zip(fast, general)):
                    _same_tensor(a, b)
                    # an output written in place is the same argument on both paths
                    assert [a is t for t in fast_args] == [b is t for t in general_args], k
                for a, b in zip(fast_args, general_args):
                    if isinstance(a, Tensor):
                        _same_tensor(a, b)


def _node_view(t: Tensor) -> tuple:
    fn = t.grad_fn
    return (t._requires_grad, type(fn), None if fn is None else _edges(fn), t._output_nr)


@pytest.mark.parametrize("seed", range(2))
def test_specialized_call_equals_the_general_call(seed):
    rng = np.random.default_rng(800 + seed)
    for f in FUNCTIONS:
        for grad in (False, True):
            d = FLOATS[int(rng.integers(2))]
            x, y = _compiled_case(rng, f, d, grad)
            cf = lg.compile(f)
            cf(x, y.clone() if f is _f_write else y)
            assert cf._fast is not None
            for _ in range(3):
                xs = [x.detach().clone().requires_grad_(x._requires_grad),
                      y.detach().clone().requires_grad_(y._requires_grad)]
                gs = [t.detach().clone().requires_grad_(t._requires_grad) for t in xs]
                fast = cf._fast(tuple(xs))
                assert fast is not MISS
                general = cf._call(tuple(gs), {})
                fo, go = _outputs(fast), _outputs(general)
                assert len(fo) == len(go)
                for a, b in zip(fo, go):
                    _same_tensor(a, b)
                    assert _node_view(a)[:2] == _node_view(b)[:2]
                    assert _node_view(a)[3] == _node_view(b)[3]
                    if a.grad_fn is not None:
                        fa, fb = a.grad_fn, b.grad_fn
                        assert [e[1] for e in _edges(fa)] == [e[1] for e in _edges(fb)]
                        assert [type(e[0]) for e in _edges(fa)] == [type(e[0]) for e in _edges(fb)]
                for a, b in zip(xs, gs):
                    _same_tensor(a, b)
                diff = [k for k, o in enumerate(fo) if o._requires_grad]
                if diff:
                    k = diff[0]
                    ga = lg.autograd.grad(fo[k].sum(), [t for t in xs if t._requires_grad])
                    gb = lg.autograd.grad(go[k].sum(), [t for t in gs if t._requires_grad])
                    for a, b in zip(ga, gb):
                        _same_tensor(a, b)
                y = _random_tensor(rng, y.shape, y.dtype).requires_grad_(y._requires_grad)


def _backward_fields(node) -> dict:
    return {
        "class": type(node),
        "function": node.function,
        "wrt": node.wrt,
        "versions": node.versions,
        "residuals": node.residuals,
        "spec": node.spec,
        "precomputed": [(_fields(t), _raw(t)) for t in node.precomputed],
        "output_meta": [tuple(m) for m in node.output_meta],
        "diff": node.diff,
        "hooks": (node._hooks, node._prehooks, node._metadata, node._trace),
    }


@pytest.mark.parametrize("seed", range(2))
def test_speculative_call_equals_the_diff_call(seed):
    rng = np.random.default_rng(900 + seed)
    for f in (_f_loss, _f_matmul):
        d = FLOATS[int(rng.integers(2))]
        x, y = _compiled_case(rng, f, d, True)
        x, y = x.contiguous().detach().requires_grad_(), y.detach()
        cf = lg.compile(f)
        cf(x, y)
        function = next(iter(cf._entries.values())).function
        wrt = function.wrt_of([x, y])
        call = function.diff_call(wrt)
        assert call.fast is not call  # the speculation is on: generated
        for _ in range(4):
            a = [_random_tensor(rng, t.shape, t.dtype).contiguous().requires_grad_(
                t._requires_grad) for t in (x, y)]
            pending = call.spec.pending
            fast = call.fast(*a)
            assert call.spec.pending == pending + 1
            general = call(*a)
            assert call.spec.pending == pending + 2
            assert len(fast) == len(general)
            for r, s in zip(fast, general):
                _same_tensor(r, s)
            fn, gn = fast[0].grad_fn, general[0].grad_fn
            assert _edges(fn) == _edges(gn) and fn.inputs == gn.inputs
            assert fn.inputs[0] is a[0] and fn._seq < gn._seq
            assert _backward_fields(fn) == _backward_fields(gn)
            for r, s in zip(lg.autograd.grad(fast[0], [a[0]]), lg.autograd.grad(general[0], [a[0]])):
                _same_tensor(r, s)
