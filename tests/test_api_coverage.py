"""The PyTorch API coverage measure (llgrad/_api_coverage.py) and its floor.

`tests/api_coverage_floor.json` holds, per namespace, how many of torch's names llgrad
covered when it was last written (`python tools/api_coverage.py --write-floor
tests/api_coverage_floor.json`); a change that loses a covered name fails here.
"""
from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest

from llgrad import _api_coverage as cov

torch = pytest.importorskip("torch")

FLOOR = Path(__file__).with_name("api_coverage_floor.json")


@pytest.fixture(scope="module")
def reports() -> dict[str, cov.Report]:
    return {r.label: r for r in cov.measure_all()}


def test_coverage_does_not_drop(reports: dict[str, cov.Report]) -> None:
    floor = json.loads(FLOOR.read_text())
    assert set(floor) == {label for label, _, _ in cov.NAMESPACES}
    dropped = {label: (len(reports[label].covered), n) for label, n in floor.items()
               if len(reports[label].covered) < n}
    assert not dropped, f"covered names dropped below the floor (now, floor): {dropped}"


def test_every_exclusion_has_a_reason_and_matches() -> None:
    rules = cov.load_rules()
    labels = {label for label, _, _ in cov.NAMESPACES}
    stale = []
    for rule in rules:
        assert rule.namespace in labels, rule
        assert len(rule.reason) > 8, rule
        names = cov.public_names(cov._resolve(dict((l, t) for l, t, _ in cov.NAMESPACES)
                                              [rule.namespace]))
        if not any(fnmatch.fnmatchcase(n, rule.pattern) for n in names):
            stale.append(rule)
    assert not stale, f"exclusion rules that match no torch name: {stale}"


def test_a_refused_keyword_is_not_covered() -> None:
    def mine(input, other):  # noqa: ANN001,ANN202  (refuses torch's `alpha`)
        return input

    assert cov.refused(mine, [("input", "named"), ("other", "named"), ("alpha", "named")],
                       False) == ["alpha"]
    assert cov._docstring_params("add", "add(input, other, *, alpha=1, out=None) -> Tensor\n"
                                 "\nadd(input, other) -> Tensor") == [
        ("input", "named"), ("other", "named"), ("alpha", "named"), ("out", "named")]


def test_excluded_names_are_not_counted(reports: dict[str, cov.Report]) -> None:
    r = reports["torch"]
    assert "cudnn_convolution" in r.excluded and "cudnn_convolution" not in r.missing
    assert r.considered == len(r.covered) + len(r.differs) + len(r.missing)
