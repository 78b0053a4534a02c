"""`llgrad.profiler`: torch.profiler's API over eager llgrad (events, nesting, self times,
tables, Chrome traces), and that profiling changes nothing but the clock."""
from __future__ import annotations

import inspect
import json
import sys
import time

import numpy as np
import pytest

import llgrad as lg
import llgrad.functions as F
from llgrad import profiler
from llgrad.tape import engine
from llgrad.profiler import ProfilerActivity, profile, record_function


def _rows(prof, **kw):
    return {r.key: r for r in prof.key_averages(**kw)}


def _originals():
    return {
        "lg.add": lg.add, "F.add": F.add, "F.mul": F.mul, "Tensor.__add__": lg.Tensor.__add__,
        "Tensor.__matmul__": lg.Tensor.__matmul__, "Tensor.add": lg.Tensor.add,
        "Tensor.__getitem__": lg.Tensor.__getitem__, "relu": lg.nn.functional.relu,
        "linear": lg.nn.functional.linear, "linalg.inv": lg.linalg.inv,
        "Module.__call__": lg.nn.Module.__call__, "SGD.step": lg.optim.SGD.step,
        "SGD.zero_grad": lg.optim.Optimizer.zero_grad,
        "autograd.backward": lg.autograd.backward, "hook": engine.PROFILE_HOOK,
    }


def _assert_restored(before):
    after = _originals()
    for k, v in before.items():
        assert after[k] is v, k
    assert engine.PROFILE_HOOK is None
    assert profiler._SESSION is None


# -- what is recorded -------------------------------------------------------------------
def test_op_counts_and_names():
    a, b = lg.ones(2, 3), lg.full((2, 3), 2.0)
    with profile() as prof:
        for _ in range(3):
            lg.add(a, b)
        a + b                                   # the operator is the same op
        lg.mm(a, b.t())
        a.relu()
        lg.nn.functional.relu(a)
        a[0]
    rows = _rows(prof)
    assert rows["aten::add"].count == 4
    assert rows["aten::mm"].count == 1
    assert rows["aten::t"].count == 1
    assert rows["aten::relu"].count == 2
    assert rows["aten::getitem"].count == 1
    assert rows["aten::ones"].count == 0 if "aten::ones" in rows else True
    # every top-level event is one the program made (nothing recorded twice)
    tops = [e.name for e in prof.events() if e.depth == 0]
    assert tops == ["aten::add"] * 4 + ["aten::t", "aten::mm", "aten::relu", "aten::relu",
                                         "aten::getitem"]


def test_self_time_excludes_children_and_times_are_real():
    x = lg.ones(4)
    with profile() as prof, record_function("outer"):
        time.sleep(0.01)
        with record_function("inner"):
            time.sleep(0.005)
            lg.add(x, x)
            lg.mul(x, x)
    evs = {e.name: e for e in prof.events()}
    outer, inner = evs["outer"], evs["inner"]
    assert inner.cpu_parent is outer and outer.cpu_parent is None
    assert evs["aten::add"].cpu_parent is inner and evs["aten::mul"].cpu_parent is inner
    assert [e.name for e in inner.cpu_children] == ["aten::add", "aten::mul"]
    assert (outer.depth, inner.depth, evs["aten::add"].depth) == (0, 1, 2)
    assert outer.cpu_time_total >= 15000 and outer.self_cpu_time_total >= 10000
    assert inner.cpu_time_total >= 5000
    assert outer.cpu_time_total >= inner.cpu_time_total + 0 >= sum(
        c.cpu_time_total for c in inner.cpu_children)
    for e in prof.events():
        kids = sum(c.cpu_time_total for c in e.cpu_children)
        assert e.self_cpu_time_total == pytest.approx(e.cpu_time_total - kids, abs=1e-3)
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total
        assert e.start_us >= 0 and e.end_us >= e.start_us
        assert e.duration_us == e.cpu_time_total == pytest.approx(e.end_us - e.start_us)
    for r in prof.key_averages():
        assert r.self_cpu_time_total <= r.cpu_time_total + 1e-9
        assert r.cpu_time == pytest.approx(r.cpu_time_total / r.count)
    # the total self time is the time inside outermost events
    assert prof.self_cpu_time_total == pytest.approx(outer.cpu_time_total, rel=1e-9)


def test_backward_nodes_modules_and_optimizer_steps():
    lg.manual_seed(0)
    model = lg.nn.Sequential(lg.nn.Linear(5, 7), lg.nn.ReLU(), lg.nn.Linear(7, 3))
    opt = lg.optim.SGD(model.parameters(), lr=0.1)
    x = lg.randn(4, 5)
    with profile() as prof:
        for _ in range(2):
            opt.zero_grad()
            loss = (model(x) * 2.0).sum()
            loss.backward()
            opt.step()
            prof.step()
    assert prof.step_num == 2
    rows = _rows(prof)
    for name in ("MulBackward0", "AddmmBackward0", "ReluBackward0", "SumBackward0"):
        assert name in rows, name
    assert rows["AddmmBackward0"].count == 4
    assert rows["autograd::backward"].count == 2
    assert rows["nn.Module: Sequential"].count == 2
    assert rows["nn.Module: Linear"].count == 4
    assert rows["nn.Module: ReLU"].count == 2
    assert rows["Optimizer.step#SGD.step"].count == 2
    assert rows["Optimizer.zero_grad#SGD.zero_grad"].count == 2
    evs = prof.events()
    for e in evs:
        if e.kind == "backward":
            assert e.cpu_parent is not None and e.cpu_parent.name == "autograd::backward"
        if e.name == "nn.Module: Linear":
            assert e.cpu_parent.name == "nn.Module: Sequential"
            assert [c.name for c in e.cpu_children] == ["aten::linear"]
    # the update's ops are nested in the step
    step = next(e for e in evs if e.name == "Optimizer.step#SGD.step")
    assert step.cpu_children and all(c.name.startswith("aten::") for c in step.cpu_children)


def test_a_derivative_rules_ops_nest_in_its_node():
    w = lg.ones(3, 4, requires_grad=True)
    with profile() as prof:
        lg.mm(lg.ones(2, 3), w).sum().backward()
    node = next(e for e in prof.events() if e.name == "MmBackward0")
    assert "aten::matmul" in {c.name for c in node.cpu_children}
    assert node.self_cpu_time_total < node.cpu_time_total


def test_autograd_grad_and_compiled_functions():
    @lg.compile
    def f(x, w):
        return (lg.tanh(x * w) + x).sum()

    x = lg.ones(8, requires_grad=True)
    w = lg.full((8,), 0.5, requires_grad=True)
    f(x, w).backward()                       # compiled outside the profile
    with profile() as prof:
        f(x, w).backward()
        gx, _ = lg.autograd.grad(f(x, w), [x, w])
    rows = _rows(prof)
    assert rows["CompiledFunction: f"].count == 2
    assert rows["autograd::backward"].count == 1 and rows["autograd::grad"].count == 1
    assert rows["CompiledBackward"].count == 2
    np.testing.assert_allclose(gx.numpy(), 0.5 * (1 - np.tanh(0.5) ** 2) + 1, rtol=1e-6)


# -- key_averages, tables, traces -----------------------------------------------------------
def test_record_shapes_groups_by_input_shape():
    a, b = lg.ones(2, 3), lg.ones(4)
    with profile(record_shapes=True) as prof:
        lg.add(a, a)
        lg.add(a, a)
        lg.add(b, 1.0)
    groups = prof.key_averages(group_by_input_shape=True)
    adds = {str(r.input_shapes): r.count for r in groups if r.key == "aten::add"}
    assert adds == {"[[2, 3], [2, 3]]": 2, "[[4], []]": 1}
    assert _rows(prof)["aten::add"].count == 3
    table = groups.table(sort_by="count")
    assert "Input Shapes" in table and "[[2, 3], [2, 3]]" in table
    with profile() as prof:
        lg.add(a, a)
    assert prof.events()[0].input_shapes == []
    assert "Input Shapes" not in prof.key_averages().table()


def test_with_stack_names_the_callers_line():
    with profile(with_stack=True) as prof:
        lg.add(lg.ones(2), 1.0)
    add = next(e for e in prof.events() if e.name == "aten::add")
    assert add.stack and __file__ in add.stack[0] and "test_with_stack" in add.stack[0]
    table = prof.key_averages(group_by_stack_n=1).table()
    assert "Source Location" in table


def test_table_layout_sorting_and_limits():
    a = lg.ones(3)
    with profile() as prof:
        for _ in range(3):
            lg.add(a, a)
        lg.mul(a, a)
        with record_function("slow"):
            time.sleep(0.05)  # far above the adds even on a loaded machine
    avgs = prof.key_averages()
    table = avgs.table(sort_by="self_cpu_time_total", row_limit=10)
    lines = table.splitlines()
    assert lines[0].startswith("---") and lines[2].startswith("---")
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls"):
        assert col in lines[1]
    assert lines[3].split()[0] == "slow"            # the largest self time first
    assert lines[-1].startswith("Self CPU time total: ")
    assert lines[-1].endswith(("us", "ms", "s"))
    add_line = next(ln for ln in lines if ln.split() and ln.split()[0] == "aten::add")
    assert add_line.split()[-1] == "3" and add_line.split()[1].endswith("%")
    by_count = avgs.table(sort_by="count").splitlines()
    assert by_count[3].split()[0] == "aten::add"
    assert len(avgs.table(row_limit=1).splitlines()) == 6      # 3 header + 1 row + 2 footer
    for key in ("cpu_time_total", "cpu_time", "cuda_time_total", None):
        avgs.table(sort_by=key)
    with pytest.raises(ValueError, match="sort_by"):
        avgs.table(sort_by="nope")
    assert profiler._format_time(12.3456) == "12.346us"
    assert profiler._format_time(1500.0) == "1.500ms"
    assert profiler._format_time(2_500_000.0) == "2.500s"
    long = "x" * 80
    with profile() as prof, record_function(long):
        pass
    row = prof.key_averages().table().splitlines()[3]
    assert "x" * 52 + "..." in row and long not in row


def test_chrome_trace(tmp_path):
    a = lg.ones(2, 2)
    with profile(record_shapes=True) as prof, record_function("block"):
        lg.matmul(a, a)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in xs} >= {"block", "aten::matmul"}
    for e in xs:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0 and {"pid", "tid", "cat"} <= set(e)
    block = next(e for e in xs if e["name"] == "block")
    mm = next(e for e in xs if e["name"] == "aten::matmul")
    assert block["ts"] <= mm["ts"] and mm["ts"] + mm["dur"] <= block["ts"] + block["dur"]
    assert mm["args"]["Input Dims"] == [[2, 2], [2, 2]]


# -- the patching: restored, transparent ----------------------------------------------------
def test_attributes_are_wrapped_while_active_and_restored_after():
    before = _originals()
    with profile():
        during = _originals()
        assert during["lg.add"] is not before["lg.add"]
        assert during["Tensor.__add__"] is not before["Tensor.__add__"]
        assert during["relu"] is not before["relu"]
        assert during["Module.__call__"] is not before["Module.__call__"]
        assert during["hook"] is not None
        # one object under several names stays one object
        assert lg.Tensor.add is F.add and lg.Tensor.__matmul__ is F.matmul
        # wrappers look like what they wrap
        assert lg.add.__name__ == before["lg.add"].__name__
        assert lg.add.__doc__ == before["lg.add"].__doc__
        assert lg.add.__wrapped__ is before["lg.add"]
        assert inspect.signature(lg.add) == inspect.signature(before["lg.add"])
        kept = lg.mul
    _assert_restored(before)
    # a wrapper kept past the profile still works, and records nothing
    np.testing.assert_array_equal(kept(lg.ones(2), 3.0).numpy(), [3.0, 3.0])
    with profile() as prof:
        pass
    assert len(prof.events()) == 0


def test_restored_after_an_exception_inside_the_block():
    before = _originals()
    with pytest.raises(ValueError, match="boom"), profile() as prof:
        lg.add(lg.ones(2), 1.0)
        raise ValueError("boom")
    _assert_restored(before)
    assert [e.name for e in prof.events()][-1] == "aten::add"


def test_op_errors_pass_through_unchanged():
    a, b = lg.ones(2, 3), lg.ones(2, 3)
    with pytest.raises(RuntimeError) as plain:
        lg.mm(a, b)
    with profile() as prof, pytest.raises(RuntimeError) as profiled:
        lg.mm(a, b)
    assert str(profiled.value) == str(plain.value)
    assert _rows(prof)["aten::mm"].count == 1        # a failed call is an event too


def test_modules_imported_during_a_profile_get_the_originals_back(tmp_path, monkeypatch):
    (tmp_path / "_prof_late_module.py").write_text("from llgrad import add as my_add\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    original = lg.add
    with profile():
        import _prof_late_module as late
        assert late.my_add is not original
    assert late.my_add is original
    del sys.modules["_prof_late_module"]


def _train(model, make_opt, x, y, steps, prof):
    opt = make_opt(model.parameters())
    ctx = profile(record_shapes=True, with_stack=True) if prof else None
    if ctx is not None:
        ctx.start()
    try:
        for _ in range(steps):
            opt.zero_grad()
            loss = lg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    finally:
        if ctx is not None:
            ctx.stop()
    return [p.detach().numpy().copy() for p in model.parameters()] + \
        [loss.detach().numpy()], ctx


@pytest.mark.parametrize("kind", ["mlp", "conv"])
def test_training_is_bit_identical_with_and_without_profiling(kind):
    def make():
        lg.manual_seed(0)
        if kind == "mlp":
            return lg.nn.Sequential(lg.nn.Linear(6, 16), lg.nn.Tanh(), lg.nn.Linear(16, 3))
        return lg.nn.Sequential(lg.nn.Conv2d(2, 3, 3, padding=1), lg.nn.ReLU(),
                                lg.nn.Flatten(), lg.nn.Linear(3 * 4 * 4, 3))
    lg.manual_seed(1)
    x = lg.randn(5, 6) if kind == "mlp" else lg.randn(5, 2, 4, 4)
    y = lg.tensor([0, 1, 2, 1, 0])

    def sgd(ps):
        return lg.optim.SGD(ps, lr=0.1, momentum=0.9)
    plain, _ = _train(make(), sgd, x, y, 3, False)
    profiled, prof = _train(make(), sgd, x, y, 3, True)
    assert len(plain) == len(profiled)
    for u, v in zip(plain, profiled):
        np.testing.assert_array_equal(u, v)
    assert _rows(prof)["Optimizer.step#SGD.step"].count == 3


# -- the API's edges ------------------------------------------------------------------------
def test_nested_profiles_are_refused():
    with profile() as outer:
        with pytest.raises(RuntimeError, match="already active"), profile():
            pass
        lg.add(lg.ones(1), 1.0)
    assert [e.name for e in outer.events()] == ["aten::ones", "aten::add"]
    with profile():                  # usable again once the first one stopped
        pass


def test_options_and_activities():
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 profile_memory=True, with_flops=True, with_modules=True) as prof:
        lg.add(lg.ones(1), 1.0)
    assert "aten::add" in _rows(prof)
    with pytest.raises(ValueError, match="schedule"):
        profile(schedule=lambda step: None)
    with pytest.raises(TypeError, match="activities"):
        profile(activities=["CPU"])
    seen = []
    with profile(on_trace_ready=seen.append) as prof:
        pass
    assert seen == [prof]
    assert profiler.supported_activities() == {ProfilerActivity.CPU}
    assert lg.profiler is profiler


def test_start_stop_and_one_use():
    prof = profile()
    prof.start()
    lg.add(lg.ones(1), 1.0)
    prof.stop()
    prof.stop()                           # a second stop does nothing
    assert [e.name for e in prof.events()] == ["aten::ones", "aten::add"]
    with pytest.raises(RuntimeError, match="already ran"):
        prof.start()
    assert profiler._SESSION is None


def test_record_function_as_decorator_and_outside_a_profile():
    @record_function("helper")
    def helper(t):
        return t * 2

    with record_function("idle"):                 # no profile: nothing, no error
        out = helper(lg.ones(2))
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0])
    assert helper.__name__ == "helper"
    with profile() as prof, record_function("outer") as rf:
        assert isinstance(rf, record_function)
        helper(lg.ones(2))
        helper(lg.ones(2))
    evs = prof.events()
    helpers = [e for e in evs if e.name == "helper"]
    assert len(helpers) == 2 and all(h.cpu_parent.name == "outer" for h in helpers)
    assert all([c.name for c in h.cpu_children] == ["aten::mul"] for h in helpers)
    assert all(e.is_user_annotation for e in evs if e.kind == "user")
