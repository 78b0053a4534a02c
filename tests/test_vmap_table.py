"""Every row of the gradient table under `vmap` (batching rules for every op with a
derivative rule): mapping a row over a batch of 3 inputs equals running it on each.

Each differentiable input of a row in turn is batched (the others stay unbatched and
broadcast), in float64; the per-element results are the row's own eager outputs.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from test_grad_table import ROWS, Arg, Row, _as_tuple, _lg_inputs

# Rows vmap refuses by design, each with a clear BatchingError (tested in
# test_transforms.py): a data-dependent output size, and `x[...] = v` on a batched tensor
# (the transforms treat values as immutable, as JAX).
VALUE_DEPENDENT = {"nonzero", "setitem"}
# zeta's, polygamma's and mvlgamma's eager argument checks read a value with item(), which
# vmap refuses (a known limitation: the checks should become where-masks)
VALUE_CHECKED = {"special.zeta", "polygamma", "mvlgamma"}


def _batchable(r: Row) -> list[int]:
    return [k for k, a in enumerate(r.args) if isinstance(a, Arg)]


@pytest.mark.parametrize("r", [r for r in ROWS if _batchable(r)
                               and not any(v in r.name for v in VALUE_DEPENDENT)
                               and r.name not in VALUE_CHECKED],
                         ids=lambda r: r.name)
def test_row_under_vmap_equals_a_loop(r: Row):
    for k in _batchable(r):
        inputs = [x.detach() if isinstance(x, lg.Tensor) else x for x in _lg_inputs(r)]
        rng = np.random.default_rng(k)
        base = inputs[k].numpy()
        batch = [base] + [base + rng.uniform(-0.05, 0.05, base.shape) for _ in range(2)]
        stacked = lg.tensor(np.stack(batch))

        def one(xk, k=k):
            args = list(inputs)
            args[k] = xk
            return _as_tuple(r.fn(lg, *args))
        got = lg.vmap(one)(stacked)
        for b, arr in enumerate(batch):
            want = one(lg.tensor(arr))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g[b].detach().numpy(), w.detach().numpy(),
                                           rtol=1e-9, atol=1e-11, err_msg=f"{r.name} arg {k}")
