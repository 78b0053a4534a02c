"""torch's ModuleInfo and OptimizerInfo databases as the oracle of `nn` and `optim`
(tests/module_harness.py).

tests/moduleinfo_status.json records each row's status from the last full sweep
(`python tools/moduleinfo_sweep.py`, which also writes docs/moduleinfo.md). Each row runs
here on its first two inputs (modules) or every option combination (optimizers): a row that
passed must still pass; one that did not is an expected failure with its recorded reason.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")

import module_harness as M  # noqa: E402

STATUS = json.loads(Path(__file__).with_name("moduleinfo_status.json").read_text())

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from torch.testing._internal.common_modules import module_db
    from torch.testing._internal.common_optimizers import optim_db

MODULES = {info.name: info for info in module_db}
OPTIMIZERS = {info.optim_cls.__name__: info for info in optim_db}


def _check(key: str, r: M.Result) -> None:
    want = STATUS.get(key, {"status": "pass", "reason": ""})
    if want["status"] == "missing" and r.status == "missing":
        pytest.skip(want["reason"])
    if want["status"] != "pass" and r.status != "pass":
        pytest.xfail(want["reason"])
    assert r.status == "pass", r.reason


@pytest.mark.parametrize("key", sorted(MODULES))
def test_module_info(key: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(key, M.run_module(MODULES[key], max_inputs=2))


@pytest.mark.parametrize("key", sorted(OPTIMIZERS))
def test_optimizer_info(key: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(key, M.run_optimizer(OPTIMIZERS[key]))


def test_the_harness_catches_a_wrong_update() -> None:
    class Halved(__import__("llgrad").optim.SGD):
        def step(self, closure=None):  # noqa: ANN001,ANN202
            loss = closure() if closure else None
            for g in self.param_groups:
                for p in g["params"]:
                    p.data.add_(p.grad, alpha=-g["lr"] / 2)
            return loss

    diff = M._one_optimizer(torch.optim.SGD, Halved, {"lr": 0.1}, steps=2)
    assert diff is not None and "parameter" in diff
