"""Log channels on Python's logging, the LLGRAD_LOG shortcut, the recompile limit and
`cf.explain`."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import llgrad as lg
from llgrad import _log
from llgrad.compiler import api

ROOT = Path(__file__).resolve().parent.parent


def test_channels_are_loggers_caplog_sees(caplog):
    caplog.set_level(logging.INFO, logger="llgrad.recompiles")
    f = lg.compile(lambda x: x * 2)
    f(lg.ones(3))
    f(lg.ones(4))
    records = [r for r in caplog.records if r.name == "llgrad.recompiles"]
    assert len(records) == 1 and records[0].levelno == logging.INFO
    assert "shape (3,) -> (4,)" in records[0].getMessage()


def test_graph_break_channel(caplog):
    caplog.set_level(logging.INFO, logger="llgrad.graph_breaks")

    def f(x):
        if x.sum() > 0:
            return x * 2
        return x
    lg.compile(f)(lg.ones(3))
    (rec,) = [r for r in caplog.records if r.name == "llgrad.graph_breaks"]
    assert "test_logging.py:" in rec.getMessage() and "bool()" in rec.getMessage()


def test_silent_unless_asked(capfd):
    f = lg.compile(lambda x: x + 1)
    f(lg.ones(2))
    f(lg.ones(5))
    assert "llgrad" not in capfd.readouterr().err


def test_shortcut_prints_and_unknown_channels_warn():
    code = ("import llgrad as lg\nf = lg.compile(lambda x: x * 2)\nf(lg.ones(3))\n"
            "f(lg.ones(4))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT),
                                LLGRAD_LOG="recompiles,recompile"), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[llgrad:recompiles] <lambda>: recompiling because tensor argument 0" in r.stderr
    assert "unknown channel 'recompile'" in r.stderr and "graph_breaks" in r.stderr


def test_set_channels_turns_channels_on_and_off(capsys):
    try:
        _log.set_channels("cache,recompiles")
        assert _log.enabled("cache") and _log.enabled("recompiles")
        _log.set_channels("cache")
        assert _log.enabled("cache") and not _log.enabled("recompiles")
        with pytest.warns(RuntimeWarning, match="unknown channel 'nope'"):
            _log.set_channels("nope")
    finally:
        _log.set_channels("")
    assert not any(_log.enabled(c) for c in _log.CHANNELS)


def test_recompile_limit_warns_once_and_suggests_dynamic():
    f = lg.compile(lambda x: x.sum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, api.RECOMPILE_WARNING + 4):
            f(lg.ones(n))
    mine = [w for w in caught if "different signatures" in str(w.message)]
    assert len(mine) == 1
    assert "dynamic=True" in str(mine[0].message)
    assert mine[0].filename == __file__                   # points at the user's call
    assert len(f.recompiles) == api.RECOMPILE_WARNING + 2


def test_recompile_limit_for_other_changes_points_at_explain():
    f = lg.compile(lambda x, flag: x * 2 if flag else x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(api.RECOMPILE_WARNING + 1):
            f(lg.ones(2, dtype=[lg.float32, lg.float64][n % 2]), n)
    (w,) = [w for w in caught if "different signatures" in str(w.message)]
    assert "cf.explain" in str(w.message)


def test_explain_reports_signature_breaks_and_recompiles():
    def f(x, y):
        z = x * y
        if z.sum() > 0:        # a graph break
            return z
        return -z
    cf = lg.compile(f)
    cf(lg.ones(2), lg.ones(2))
    e = cf.explain(lg.ones(3), lg.ones(3, requires_grad=True))
    assert not e.compiles and not e.compiled_before
    assert "float32[3]!" in e.signature and "float32[3]," in e.signature
    assert len(e.graph_breaks) == 1 and "test_logging.py:" in e.graph_breaks[0]
    assert e.recompiles and "shape (2,) -> (3,)" in e.recompiles[0]
    text = str(e)
    assert "graph break" in text and "recompiled:" in text

    g = lg.compile(lambda x: (x * 2).exp().sum())
    e = g.explain(lg.ones(4))
    assert e.compiles and e.nodes >= 3 and not e.compiled_before and e.signatures == 1
    assert g.explain(lg.ones(4)).compiled_before
    assert "one graph of" in str(e)


def test_graph_breaks_listed_once():
    def f(x):
        if x.sum() > 0:
            return x
        return -x
    cf = lg.compile(f)
    for n in range(2, 6):
        cf(lg.ones(n))
    assert len(cf.graph_breaks) == 1
