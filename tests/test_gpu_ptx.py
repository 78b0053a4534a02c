"""The PTX of B1-B8's compiled graphs (the kernels a CUDA call of each would run) is
built from CPU arguments on any machine and assembles with ptxas for sm_80 and sm_90."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.codegen.gpu import ptx as ptx_target

ARCHS = ("sm_80", "sm_90")


def _grad_workload(name):
    from benchmarks import peers
    arrays = peers.inputs(name, True)
    f, wrt, const = peers.loss_fn(name, peers._llgrad_ops(lg), True)
    step = lg.compile(lg.value_and_grad(f, argnums=tuple(range(len(wrt)))))
    return step, [lg.tensor(arrays[k]) for k in wrt + const]


def _b2():
    from benchmarks import peers
    arrays = peers.inputs("B2", True)
    nn = lg.nn
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = lg.optim.SGD(model.parameters(), lr=0.01)

    @lg.compile
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    args = [lg.tensor(arrays["x"]), lg.tensor(arrays["y"])]
    step(*args)
    return step, args


def _b5():
    def rosenbrock(x):
        return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
    step = lg.compile(lg.func.hessian(rosenbrock))
    return step, [lg.tensor(np.linspace(-1, 1, 64))]


WORKLOADS = {
    "B1": lambda: _grad_workload("B1"), "B2": _b2, "B3": lambda: _grad_workload("B3"),
    "B5": _b5, "B6": lambda: _grad_workload("B6"), "B7": lambda: _grad_workload("B7"),
    "B8": lambda: _grad_workload("B8"),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_ptx_assembles(name):
    step, args = WORKLOADS[name]()
    report = step.inspect(*args, target="cuda")
    assert report.ptx.count(".entry") >= 1 or any("cuBLAS" in str(k) for k in report.kernels)
    if ptx_target.find_ptxas() is None:
        pytest.skip("no ptxas (pip install nvidia-cuda-nvcc): the PTX was built, not assembled")
    for arch in ARCHS:
        text = ptx_target.to_ptx(report.llvm_ir, arch)
        resources = ptx_target.ptxas(text, arch)
        entries = text.count(".entry")
        assert len(resources) == entries, (arch, sorted(resources))


def test_libdevice_math_links_and_assembles(monkeypatch):
    from llgrad.codegen.gpu import libdevice
    if libdevice.find() is None:
        pytest.skip("no libdevice.10.bc (a CUDA toolkit, nvidia-nvvm or triton)")
    monkeypatch.setenv(libdevice.ENV, "libdevice")
    step, args = _grad_workload("B1")
    report = step.inspect(*args, target="cuda")
    assert "__nv_tanhf" in report.llvm_ir            # the kernels call libdevice ...
    assert ".extern" not in report.ptx                # ... linked in, nothing left to resolve
    if ptx_target.find_ptxas() is not None:
        for arch in ARCHS:
            ptx_target.ptxas(ptx_target.to_ptx(report.llvm_ir, arch), arch)
