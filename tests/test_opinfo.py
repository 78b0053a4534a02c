"""torch's OpInfo database as the oracle of every op (tests/opinfo_harness.py).

tests/opinfo_status.json records, for every CPU OpInfo of the installed torch, whether llgrad
passed its full sweep (`python tools/opinfo_sweep.py`, which also writes docs/opinfo.md with
the reason of every OpInfo that does not pass). Here each OpInfo runs its CI sample (two
samples for values, one float64 gradient sample, the first sample compiled): one that passed
the sweep must still pass; one that did not is an expected failure with its recorded reason
(and shows as XPASS once fixed). The slow mark runs the sweep's samples (up to 24 per dtype) of every passing OpInfo.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")

import opinfo_harness as H  # noqa: E402

STATUS = json.loads((Path(__file__).with_name("opinfo_status.json")).read_text())

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    OPS = {H.key_of(op): op for op in H.cpu_ops()}


def _expect(key: str) -> dict[str, str]:
    op = OPS.get(key)
    if op is None:
        pytest.skip("not in this torch's OpInfo database")
    want = STATUS[key]
    if want["status"] in ("missing", "outside"):
        pytest.skip(f"{want['status']}: {want['reason']}")
    return want


@pytest.mark.parametrize("key", sorted(STATUS))
def test_opinfo_sample(key: str) -> None:
    want = _expect(key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = H.run_op(OPS[key], max_samples=2, grad_samples=1, errors=0,
                     extra=H.has_empty_tensor)
    if want["status"] == "fail" and r.status != "pass":
        pytest.xfail(want["reason"])
    assert r.status == "pass", r.reason


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(k for k, v in STATUS.items() if v["status"] == "pass"))
def test_opinfo_full(key: str) -> None:
    _expect(key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = H.run_op(OPS[key], max_samples=24, grad_samples=12,
                     dtypes=(torch.float32, torch.float64, torch.int64, torch.bool,
                             torch.complex64))
    assert r.status == "pass", r.reason


def test_every_cpu_opinfo_has_a_status() -> None:
    assert set(OPS) <= set(STATUS), sorted(set(OPS) - set(STATUS))[:20]


def test_the_harness_catches_a_wrong_value() -> None:
    op = OPS["exp"]
    r = H.OpResult("exp")
    sample = next(iter(op.sample_inputs("cpu", torch.float32)))
    H.run_values(op, lambda x: x + 1, sample, r)
    assert r.status == "fail" and "values differ" in r.reason
    r = H.OpResult("exp")
    gsample = next(iter(op.sample_inputs("cpu", torch.float64, requires_grad=True)))
    H.run_grad(op, lambda x: x.exp() * 2, gsample, r)
    assert r.status == "fail"
