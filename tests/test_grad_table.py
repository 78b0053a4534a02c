"""Table-driven gradient tests (issue 3): one row per differentiable op of the registry.

Every op of `llgrad.ir.registry.OPS` that has a `vjp`, and every COMPOSITE op, must appear
in some row (`test_every_differentiable_op_has_a_row`), so a new op without a row fails.
Further rows cover the user-facing functions that compose ops (`lg.max(x, dim)`, norms,
indexing, setitem, `cross_entropy`, ...). For each row:

1. `gradcheck` in float64 against central differences;
2. `gradgradcheck` in float64 (every op here has a second derivative, possibly zero);
3. forward mode: the JVP of `forward_ad` equals J·v with J from the reverse-mode
   `autograd.functional.jacobian`;
4. PyTorch as an oracle (skipped without torch): same outputs, same gradients for random
   grad_outputs in float32 and float64, and the same `grad_fn` class name.

A row samples its inputs from a domain that keeps away from non-differentiable points
(|x| > 0.2 for abs, positive for log, distinct values for amax, ...). Rows that test a
subgradient convention on purpose (ties of max/amax, the kink of relu) skip the finite
difference checks and keep the PyTorch comparison, which pins the convention.

Engine-level tests at the end: broadcast reduction of gradients, dtype mixing, fan-out
accumulation, non-contiguous leaves, 0-d and empty tensors.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import llgrad as lg
import llgrad.autograd.forward_ad as fwAD
from llgrad.autograd.functional import jacobian
from llgrad.eager import views
from llgrad.ir.registry import OPS, Group

try:
    import torch
except ImportError:              # the oracle is optional
    torch = None


# --------------------------------------------------------------------------------------
# Sampling domains: (rng, shape) -> float64 array
# --------------------------------------------------------------------------------------

Domain = Callable[[np.random.Generator, tuple], np.ndarray]


def normal(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return rng.standard_normal(shape)


def band(lo: float, hi: float) -> Domain:
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def away(points: tuple[float, ...], margin: float = 0.15, scale: float = 1.5) -> Domain:
    """Uniform in [-scale, scale], resampled while closer than `margin` to a point."""
    def sample(rng: np.random.Generator, shape: tuple) -> np.ndarray:
        x = rng.uniform(-scale, scale, shape)
        for _ in range(1000):
            bad = np.zeros(x.shape, dtype=bool)
            for p in points:
                bad |= np.abs(x - p) < margin
            if not bad.any():
                return x
            x = np.where(bad, rng.uniform(-scale, scale, shape), x)
        raise AssertionError("domain sampler did not converge")
    return sample


AWAY0 = away((0.0,), 0.2)
POS = band(0.5, 2.0)
PROB = band(0.1, 0.9)


def distinct(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Values at least 0.2 apart (no ties for max/amax/maximum), in random order."""
    n = int(np.prod(shape, dtype=np.int64))
    return (rng.permutation(n) * 0.3 - 0.15 * n + rng.uniform(0, 0.1, n)).reshape(shape)


def fractional(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """k + u, u in [0.15, 0.35], k in [-2, 2]: away from integers, halves and zero."""
    k = rng.integers(-2, 2, shape)
    u = rng.uniform(0.15, 0.35, shape)
    return np.where(k >= 0, k + u, k + 1 - u)


# --------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Arg:
    """A differentiable floating point input."""
    shape: tuple
    domain: Domain = normal


@dataclass(frozen=True)
class Const:
    """A fixed input (an index, a mask, a target): `value(rng)` gives a NumPy array; float
    arrays follow the dtype under test, others keep theirs."""
    value: Callable[[np.random.Generator], Any]


def const(arr: Any) -> Const:
    a = np.asarray(arr)
    return Const(lambda rng: a)


@dataclass(frozen=True)
class Row:
    """One table row: a function of tensors, its inputs and domains, what it covers and
    which checks apply (all four unless a flag says why not)."""
    name: str
    fn: Callable[..., Any]                     # fn(module, *inputs); module is lg or torch
    args: tuple
    ops: tuple[str, ...] = ()                  # registry ops this row exercises
    torch_fn: Callable[..., Any] | None = None  # when torch spells it differently
    torch: bool = True                         # compare with PyTorch at all
    torch_nograd: tuple[int, ...] = ()         # Args torch cannot differentiate (weights)
    grad_fn: bool = True                       # compare grad_fn class names
    smooth: bool = True                        # finite-difference checks apply
    forward: bool = True                       # forward mode agrees with reverse mode
    atol: float = 1e-5
    rtol: float = 1e-3
    eps: float = 1e-6
    sample: Callable[[np.random.Generator], list] | None = None   # joint sampling of Args
    rtol32: float = 1e-5
    rtol64: float = 1e-10
    atol64: float = 1e-12
    atol32: float = 1e-6

    def arrays(self) -> list[Any]:
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        if self.sample is not None:
            drawn = iter(self.sample(rng))
        out = []
        for a in self.args:
            if isinstance(a, Arg):
                v = next(drawn) if self.sample is not None else a.domain(rng, a.shape)
                out.append(np.asarray(v, dtype=np.float64).reshape(a.shape))
            else:
                out.append(np.asarray(a.value(rng)))
        return out


ROWS: list[Row] = []


def row(name: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> None:
    ROWS.append(Row(name, fn, tuple(args), **kw))


def F(m: Any) -> Any:
    return m.nn.functional


# -- unary math --------------------------------------------------------------------------
for _op, _dom in [("exp", normal), ("exp2", normal), ("expm1", normal), ("log", POS),
                  ("log2", POS), ("log10", POS), ("log1p", band(-0.5, 2.0)), ("sqrt", POS),
                  ("rsqrt", POS), ("sin", normal), ("cos", normal), ("tan", band(-1.2, 1.2)),
                  ("tanh", normal), ("sigmoid", normal), ("erf", normal), ("erfc", normal),
                  ("neg", normal), ("abs", AWAY0), ("sign", AWAY0), ("reciprocal", AWAY0),
                  ("square", normal), ("floor", fractional), ("ceil", fractional),
                  ("round", fractional), ("trunc", fractional), ("relu", AWAY0)]:
    row(_op, (lambda o: lambda m, x: getattr(m, o)(x))(_op), Arg((2, 3), _dom), ops=(_op,))

# inverse trigonometric and hyperbolic functions, special functions (mathlib rules)
for _op, _dom in [("asin", band(-0.9, 0.9)), ("acos", band(-0.9, 0.9)), ("atan", normal),
                  ("sinh", normal), ("cosh", normal), ("asinh", normal),
                  ("acosh", band(1.2, 3.0)), ("atanh", band(-0.9, 0.9)),
                  ("erfinv", band(-0.9, 0.9)), ("lgamma", band(0.3, 4.0)),
                  ("i0", normal)]:
    row(_op, (lambda o: lambda m, x: getattr(m, o)(x))(_op), Arg((2, 3), _dom), ops=(_op,))
# torch's trigamma (digamma's derivative, polygamma(1)) is off by up to 5e-10 relative in
# float64 (against mpmath); llgrad's is within a few ULP, so these two compare at 2e-9
row("digamma", lambda m, x: m.digamma(x), Arg((2, 3), band(0.3, 4.0)), ops=("digamma",),
    rtol64=2e-9)
for _op, _dom in [("erfcx", band(-1.0, 3.0)), ("i0e", normal), ("i1", normal),
                  ("i1e", normal), ("log_ndtr", normal), ("ndtri", band(0.05, 0.95))]:
    row(f"special.{_op}", (lambda o: lambda m, x: getattr(m.special, o)(x))(_op),
        Arg((2, 3), _dom), ops=(f"special_{_op}",), grad_fn=False)
row("special.zeta", lambda m, q: m.special.zeta(3.0, q), Arg((2, 3), band(0.5, 3.0)),
    ops=("special_zeta",), grad_fn=False)
row("polygamma", lambda m, x: m.polygamma(1, x), Arg((2, 3), band(0.3, 4.0)),
    ops=("polygamma",), rtol64=2e-9)
row("copysign", lambda m, a, b: m.copysign(a, b), Arg((2, 3), AWAY0), Arg((2, 3), AWAY0),
    ops=("copysign",))
row("nextafter", lambda m, a, b: m.nextafter(a, b), Arg((2, 3)), Arg((2, 3)),
    ops=("nextafter",), torch=False)
row("frexp", lambda m, x: m.frexp(x).mantissa * 1.0, Arg((2, 3), band(0.55, 0.95)),
    ops=("frexp_mantissa",), grad_fn=False)
row("frac", lambda m, x: m.frac(x), Arg((2, 3), fractional), ops=("frac",))
row("round-decimals", lambda m, x: m.round(x, decimals=2) + x, Arg((2, 3), fractional),
    ops=("round_decimals",))
row("mvlgamma", lambda m, x: m.mvlgamma(x, 3), Arg((2, 3), band(1.5, 4.0)),
    ops=("mvlgamma",))
row("silu", lambda m, x: F(m).silu(x), Arg((2, 3)), ops=("silu",))
row("gelu", lambda m, x: F(m).gelu(x), Arg((2, 3)), ops=("gelu",))
row("gelu-tanh", lambda m, x: F(m).gelu(x, approximate="tanh"), Arg((2, 3)), ops=("gelu",))
row("softplus", lambda m, x: m.softplus(x), Arg((2, 3)), ops=("softplus",),
    torch_fn=lambda m, x: F(m).softplus(x))
row("softplus-beta-threshold", lambda m, x: m.softplus(x, beta=2.0, threshold=1.0),
    Arg((2, 4), away((0.5,), 0.15)), ops=("softplus",),
    torch_fn=lambda m, x: F(m).softplus(x, beta=2.0, threshold=1.0))
row("clamp", lambda m, x: m.clamp(x, -0.5, 0.5), Arg((2, 4), away((-0.5, 0.5))),
    ops=("clamp",))
row("clamp-min", lambda m, x: m.clamp(x, min=-0.5), Arg((2, 3), away((-0.5,))),
    ops=("clamp",))
row("clamp-max", lambda m, x: x.clamp(max=0.25), Arg((2, 3), away((0.25,))), ops=("clamp",))
row("relu-at-zero", lambda m, x: m.relu(x), Arg((3,)),
    sample=lambda rng: [np.array([0.0, 1.0, -1.0])], smooth=False)

# -- binary arithmetic, with broadcasting pairs and Python scalars ------------------------
row("add", lambda m, a, b: a + b, Arg((2, 1)), Arg((1, 3)), ops=("add",))
row("add-scalar", lambda m, a: a + 2.5, Arg((2, 3)), ops=("add",))
row("add-alpha", lambda m, a, b: m.add(a, b, alpha=2), Arg((2, 3)), Arg((3,)),
    ops=("add", "mul"))
row("sub", lambda m, a, b: a - b, Arg((3,)), Arg((2, 3)), ops=("sub",))
row("rsub-scalar", lambda m, a: 2 - a, Arg((2, 3)), ops=("sub",))
row("mul", lambda m, a, b: a * b, Arg((2, 1)), Arg((3,)), ops=("mul",))
row("mul-scalar", lambda m, a: a * 3.0, Arg((2, 3)), ops=("mul",))
row("div", lambda m, a, b: a / b, Arg((2, 3)), Arg((2, 1), AWAY0), ops=("div",))
row("div-scalar", lambda m, a: a / 4.0, Arg((2, 3)), ops=("div",))
row("rdiv-scalar", lambda m, a: 2.0 / a, Arg((2, 3), AWAY0), ops=("reciprocal", "mul"))
row("pow", lambda m, a, b: a ** b, Arg((2, 3), POS), Arg((3,)), ops=("pow",))
row("pow-scalar-exponent", lambda m, a: a ** 3, Arg((2, 3)), ops=("pow",))
row("pow-fractional-exponent", lambda m, a: m.pow(a, 2.5), Arg((2, 3), POS), ops=("pow",))
row("pow-scalar-base", lambda m, b: 2.0 ** b, Arg((2, 3)), ops=("pow",))
row("maximum", lambda m, a, b: m.maximum(a, b), Arg((2, 3)), Arg((3,)),
    sample=lambda rng: (lambda d: [d[:6].reshape(2, 3), d[6:]])(distinct(rng, (9,))),
    ops=("maximum",))
row("minimum", lambda m, a, b: m.minimum(a, b), Arg((2, 3)), Arg((2, 1)),
    sample=lambda rng: (lambda d: [d[:6].reshape(2, 3), d[6:]])(distinct(rng, (8,))),
    ops=("minimum",))
row("maximum-ties", lambda m, a, b: m.maximum(a, b), const([1.0, 2.0, 3.0]),
    Arg((3,)), sample=lambda rng: [np.array([1.0, 0.5, 3.0])], smooth=False)
row("maximum-ties-both", lambda m, a, b: m.maximum(a, b) * m.arange(1, 4),
    Arg((3,)), Arg((3,)), sample=lambda rng: [np.array([1.0, 0.5, 3.0]),
                                                np.array([1.0, 2.0, 3.0])], smooth=False)


def _remainder_inputs(rng: np.random.Generator) -> list:
    b = rng.uniform(0.5, 1.5, (3,)) * rng.choice([-1.0, 1.0], (3,))
    q = rng.integers(-3, 3, (2, 3)) + rng.uniform(0.2, 0.8, (2, 3))
    return [q * b, b]


row("remainder", lambda m, a, b: m.remainder(a, b), Arg((2, 3)), Arg((3,)),
    sample=_remainder_inputs, ops=("remainder",))
row("remainder-scalar", lambda m, a: a % 0.7, Arg((2, 3)),
    sample=lambda rng: [(rng.integers(-3, 3, (2, 3)) + rng.uniform(0.2, 0.8, (2, 3))) * 0.7],
    ops=("remainder",))
row("atan2", lambda m, a, b: m.atan2(a, b), Arg((2, 3)), Arg((2, 3), AWAY0), ops=("atan2",))
row("where", lambda m, c, a, b: m.where(c, a, b), const([[True, False, True]]),
    Arg((2, 1)), Arg((2, 3)), ops=("where",))
row("where-scalar", lambda m, c, a: m.where(c, a, 0.0),
    const([[True, False], [False, True]]), Arg((2, 2)), ops=("where",))
row("cast", lambda m, x: x.to(m.float32).to(m.float64) * 2, Arg((2, 3)), ops=("cast",),
    eps=1e-3, atol=1e-4, rtol32=1e-6)
row("clone", lambda m, x: m.clone(x) * 1.5, Arg((2, 3)), ops=("cast",))

# -- movement ----------------------------------------------------------------------------
row("reshape", lambda m, x: x.reshape(3, 2) * m.arange(2), Arg((2, 3)), ops=("reshape",))
row("view", lambda m, x: x.view(-1), Arg((2, 3)), ops=("reshape",))
row("permute", lambda m, x: x.permute(2, 0, 1), Arg((2, 3, 2)), ops=("permute",))
row("transpose", lambda m, x: x.transpose(0, 1), Arg((2, 3)), ops=("permute",))
row("t", lambda m, x: x.t(), Arg((2, 3)), ops=("permute",))
row("expand", lambda m, x: x.expand(2, 3, 2), Arg((3, 1)), ops=("expand",))
row("slice", lambda m, x: x.narrow(1, 1, 2), Arg((2, 4)), ops=("slice",))
row("pad", lambda m, x: m.pad_dims(x, (1, 0), (0, 2)), Arg((2, 3)), ops=("pad",),
    torch_fn=lambda m, x: F(m).pad(x, (0, 2, 1, 0)))
row("pad-interior", lambda m, x: m.pad_dims(x, (0, 1), (1, 0), (1, 2), 0.5), Arg((2, 3)),
    ops=("pad",), torch=False)
row("cat", lambda m, a, b: m.cat([a, b], 1), Arg((2, 2)), Arg((2, 3)), ops=("cat",))
row("stack", lambda m, a, b: m.stack([a, b], 1), Arg((2, 3)), Arg((2, 3)), ops=("cat",))
row("flip", lambda m, x: m.flip(x, (0, 1)), Arg((2, 3)), ops=("flip",))
row("squeeze-unsqueeze", lambda m, x: x.unsqueeze(0).squeeze(2), Arg((3, 1)),
    ops=("reshape",))
# (recorded, the pieces share one SplitBackward0 / UnbindBackward0 node whose backward
# is one cat / stack; under transforms and forward mode each piece is a slice)
row("split", lambda m, x: m.split(x, [1, 2], 1), Arg((2, 3)))
row("split-int", lambda m, x: m.split(x, 2, 1), Arg((2, 3)))
row("chunk", lambda m, x: m.chunk(x, 2, 0), Arg((3, 2)))
row("unbind", lambda m, x: x.unbind(1), Arg((2, 3)))
row("movedim", lambda m, x: m.movedim(x, 0, 2), Arg((2, 3, 2)), ops=("permute",))
row("repeat", lambda m, x: x.repeat(2, 1, 2), Arg((2, 2)), ops=("expand",))

# -- linear algebra -----------------------------------------------------------------------
row("matmul", lambda m, a, b: a @ b, Arg((2, 3)), Arg((3, 2)), ops=("matmul",))
row("matmul-batched", lambda m, a, b: m.matmul(a, b), Arg((2, 2, 3)), Arg((2, 3, 2)),
    ops=("matmul",))
row("matmul-broadcast", lambda m, a, b: m.matmul(a, b), Arg((2, 2, 3)), Arg((3, 2)),
    ops=("matmul",))
row("mv", lambda m, a, b: m.mv(a, b), Arg((2, 3)), Arg((3,)), ops=("matmul",))
row("dot", lambda m, a, b: m.dot(a, b), Arg((3,)), Arg((3,)), ops=("matmul",))
row("matmul-1d-1d", lambda m, a, b: a @ b, Arg((3,)), Arg((3,)), ops=("matmul",))
row("matmul-2d-1d", lambda m, a, b: a @ b, Arg((2, 3)), Arg((3,)), ops=("matmul",))
row("matmul-1d-2d", lambda m, a, b: a @ b, Arg((3,)), Arg((3, 2)), ops=("matmul",))
row("matmul-3d-1d", lambda m, a, b: a @ b, Arg((2, 2, 3)), Arg((3,)), ops=("matmul",))
row("outer", lambda m, a, b: m.outer(a, b), Arg((3,)), Arg((2,)), ops=("mul",))
row("bmm", lambda m, a, b: m.bmm(a, b), Arg((2, 1, 3)), Arg((2, 3, 2)), ops=("matmul",))

# -- reductions ---------------------------------------------------------------------------
row("sum", lambda m, x: x.sum(), Arg((2, 3)), ops=("sum",))
row("sum-dim", lambda m, x: x.sum(1), Arg((2, 3)), ops=("sum",))
row("sum-dims-keepdim", lambda m, x: m.sum(x, (0, 2), keepdim=True), Arg((2, 3, 2)),
    ops=("sum",))
row("prod", lambda m, x: x.prod(), Arg((2, 3), band(0.5, 1.5)), ops=("prod",))
row("prod-dim", lambda m, x: x.prod(1), Arg((2, 3)), ops=("prod",))
row("prod-one-zero", lambda m, x: x.prod(1), Arg((2, 3)),
    sample=lambda rng: [np.array([[0.0, 1.5, -0.7], [0.8, 1.2, 2.0]])], ops=("prod",))
row("prod-two-zeros", lambda m, x: x.prod(), Arg((2, 2)),
    sample=lambda rng: [np.array([[0.0, 1.5], [0.0, 2.0]])], ops=("prod",))
row("amax", lambda m, x: m.amax(x, 1), Arg((2, 3), distinct), ops=("amax",))
row("amax-all", lambda m, x: x.amax(), Arg((2, 3), distinct), ops=("amax",))
row("amax-dims", lambda m, x: m.amax(x, (0, 2), keepdim=True), Arg((2, 2, 2), distinct),
    ops=("amax",))
row("amin", lambda m, x: m.amin(x, 0), Arg((2, 3), distinct), ops=("amin",))
row("amax-ties", lambda m, x: m.amax(x, 1), Arg((2, 3)),
    sample=lambda rng: [np.array([[1.0, 2.0, 2.0], [0.5, 0.5, 0.5]])], smooth=False)
row("max", lambda m, x: m.max(x), Arg((2, 3), distinct), ops=("amax",))
row("min", lambda m, x: x.min(), Arg((2, 3), distinct), ops=("amin",))
row("max-ties", lambda m, x: m.max(x), Arg((2, 2)),
    sample=lambda rng: [np.array([[1.0, 3.0], [3.0, 0.0]])], smooth=False)
row("max-dim", lambda m, x: m.max(x, 1).values, Arg((2, 3), distinct))
row("max-dim-keepdim", lambda m, x: m.max(x, 0, keepdim=True)[0], Arg((2, 3), distinct))
row("min-dim", lambda m, x: x.min(dim=1).values, Arg((2, 3), distinct))
row("max-dim-ties", lambda m, x: m.max(x, 1).values, Arg((2, 3)),
    sample=lambda rng: [np.array([[1.0, 2.0, 2.0], [0.5, 0.5, 0.5]])], smooth=False)
row("mean", lambda m, x: x.mean(), Arg((2, 3)), ops=("mean",))
row("mean-dim", lambda m, x: m.mean(x, (0, 2), keepdim=True), Arg((2, 3, 2)), ops=("mean",))
row("var", lambda m, x: x.var(1), Arg((2, 3)), ops=("var",))
row("var-all-biased", lambda m, x: m.var(x, correction=0), Arg((2, 3)), ops=("var",))
row("std", lambda m, x: x.std(0), Arg((3, 2)), ops=("std",))
row("std-all", lambda m, x: m.std(x), Arg((2, 3)), ops=("std",))
row("var_mean", lambda m, x: m.var_mean(x, 1), Arg((2, 3)), ops=("var", "mean"))
row("std_mean", lambda m, x: m.std_mean(x), Arg((2, 3)), ops=("std", "mean"))
row("logsumexp", lambda m, x: m.logsumexp(x, 1), Arg((2, 3)), ops=("logsumexp",))
row("logsumexp-dims", lambda m, x: m.logsumexp(x, (0, 1), keepdim=True), Arg((2, 3)),
    ops=("logsumexp",))
row("norm", lambda m, x: m.norm(x), Arg((2, 3)), ops=("norm",))
row("norm-dim", lambda m, x: m.norm(x, dim=1), Arg((2, 3)), ops=("norm",))
row("norm-p1", lambda m, x: m.norm(x, p=1, dim=0), Arg((2, 3), AWAY0), ops=("norm",))
row("norm-p3", lambda m, x: m.norm(x, p=3), Arg((2, 3), AWAY0), ops=("norm",))
row("norm-inf", lambda m, x: m.norm(x, p=math.inf, dim=1), Arg((2, 3)),
    sample=lambda rng: [np.array([[0.3, -1.5, 0.9], [2.0, -0.4, 1.1]])], ops=("norm",))
row("norm-minus-inf", lambda m, x: m.norm(x, p=-math.inf), Arg((2, 3)),
    sample=lambda rng: [np.array([[0.3, -1.5, 0.9], [2.0, -0.4, 1.1]])], ops=("norm",))
row("norm-p0", lambda m, x: m.norm(x, p=0, dim=1) + x.sum(), Arg((2, 3), AWAY0),
    ops=("norm",))
row("norm-fro-keepdim", lambda m, x: m.norm(x, "fro", (0, 1), keepdim=True), Arg((2, 3)),
    ops=("norm",))
row("softmax", lambda m, x: m.softmax(x, 1), Arg((2, 3)), ops=("softmax",))
row("softmax-dim0", lambda m, x: F(m).softmax(x, dim=0), Arg((3, 2)), ops=("softmax",))
row("log_softmax", lambda m, x: m.log_softmax(x, -1), Arg((2, 3)), ops=("log_softmax",))

# -- indexing -------------------------------------------------------------------------------
row("index-int", lambda m, x: x[1], Arg((3, 2)))
row("index-basic", lambda m, x: x[None, ..., 1:, 0], Arg((2, 3, 2)))
row("index-slice", lambda m, x: x[:, 1:3], Arg((2, 4)))
row("index-slice-step", lambda m, x: x[1::2, ::3], Arg((4, 4)))
row("index-tensor", lambda m, x, i: x[i], Arg((4, 2)), const([0, 2, 2, -1]))
row("index-list", lambda m, x: x[[1, 0, 1]], Arg((3, 2)))
row("index-two-tensors", lambda m, x, i, j: x[i, j], Arg((3, 3)), const([0, 2, 2]),
    const([1, 1, 0]))
row("index-slice-tensor", lambda m, x, i: x[:, i], Arg((2, 3)), const([[2, 0], [0, 0]]))
row("index-mask", lambda m, x, k: x[k], Arg((2, 3)),
    const([[True, False, True], [False, False, True]]))
row("gather", lambda m, x, i: m.gather(x, 1, i), Arg((2, 3)), const([[0, 2, 2], [1, 0, 1]]))
row("index_select", lambda m, x, i: m.index_select(x, 0, i), Arg((3, 2)), const([2, 0, 2]))
row("take_along_dim", lambda m, x, i: m.take_along_dim(x, i, 1), Arg((2, 3)),
    const([[2], [0]]))
row("masked_fill", lambda m, x, k: x.masked_fill(k, 0.5), Arg((2, 3)),
    const([[True, False, True], [False, False, True]]), ops=("where",))
row("masked_fill-tensor", lambda m, x, k, v: x.masked_fill(k, v), Arg((2, 3)),
    const([[True, False, True], [False, False, True]]), Arg(()), ops=("where",))


# the linear-index primitives (traced indexing and its gradients are made of them)
row("gather_linear", lambda m, x, i: m.gather_linear(x, i), Arg((2, 3)),
    const([[5, 0], [0, -1]]), ops=("gather",),
    torch_fn=lambda m, x, i: x.reshape(-1)[i])
row("scatter_add_linear", lambda m, b, i, v: m.scatter_add_linear(b, i, v), Arg((2, 3)),
    const([4, 0, 4]), Arg((3,)), ops=("scatter_add",), grad_fn=False,
    torch_fn=lambda m, b, i, v: b.reshape(-1).index_put((i,), v, accumulate=True).view(2, 3))
row("index_put_linear", lambda m, b, i, v: m.index_put_linear(b, i, v), Arg((2, 3)),
    const([4, 0, -1]), Arg((1,)), ops=("index_put",), grad_fn=False,
    torch_fn=lambda m, b, i, v: b.reshape(-1).index_put((i,), v).view(2, 3))


def _setitem_basic(m: Any, x: Any, v: Any) -> Any:
    y = x * 1.0
    y[1, 1:] = v
    return y


def _setitem_advanced(m: Any, x: Any, v: Any, i: Any) -> Any:
    y = x * 1.0
    y[i] = v
    return y


def _setitem_mask(m: Any, x: Any, v: Any, k: Any) -> Any:
    y = x * 1.0
    y[k] = v
    return y


row("setitem-basic", _setitem_basic, Arg((2, 3)), Arg((2,)))
row("setitem-advanced", _setitem_advanced, Arg((3, 2)), Arg((1, 2)), const([2, 0]))
row("setitem-mask", _setitem_mask, Arg((2, 3)), Arg((3,)),
    const([[True, False, True], [False, False, True]]))
row("setitem-scalar-then-use", lambda m, x: _setitem_basic(m, x, 0.0).exp().sum(0),
    Arg((2, 3)))

# -- composed elementwise functions --------------------------------------------------------
row("clamp-tensor-bounds", lambda m, x, lo, hi: m.clamp(x, lo, hi), Arg((2, 3)), Arg((3,)),
    Arg((2, 1)),
    sample=lambda rng: [np.array([[-1.0, 0.2, 1.5], [0.1, -0.3, 0.6]]),
                        np.array([-0.5, 0.0, -0.1]), np.array([[0.8], [0.4]])],
    ops=("where",))
row("lerp", lambda m, a, b: m.lerp(a, b, 0.3), Arg((2, 3)), Arg((3,)), ops=("add", "mul"))
row("lerp-tensor-weight", lambda m, a, b, w: m.lerp(a, b, w), Arg((2, 3)), Arg((3,)),
    Arg((2, 1)), ops=("add", "mul"))
row("xlogy", lambda m, a, b: m.xlogy(a, b), Arg((2, 3)), Arg((2, 3), POS), ops=("log",))
row("xlogy-scalar-other", lambda m, a: m.xlogy(a, 2.5), Arg((2, 3)), ops=("where",),
    torch_fn=lambda m, a: m.xlogy(a, 2.5))
row("xlogy-scalar-input", lambda m, b: m.xlogy(2.5, b), Arg((2, 3), POS), ops=("log",))
row("fmod", lambda m, a, b: m.fmod(a, b), Arg((2, 3)), Arg((3,)), sample=_remainder_inputs,
    ops=("fmod",))
row("fmod-scalar", lambda m, a: m.fmod(a, 0.7), Arg((2, 3)),
    sample=lambda rng: [(rng.integers(-3, 3, (2, 3)) + rng.uniform(0.2, 0.8, (2, 3))) * 0.7],
    ops=("fmod",))
row("div-floor", lambda m, a, b: m.div(a, b, rounding_mode="floor") * a,
    Arg((2, 3)), Arg((3,)), sample=_remainder_inputs, ops=("floor_divide",))
row("div-trunc", lambda m, a, b: m.div(a, b, rounding_mode="trunc") * a, Arg((2, 3)),
    Arg((3,)), sample=_remainder_inputs, ops=("trunc_divide",))
row("clamp-tensor-min", lambda m, x, lo: m.clamp(x, min=lo), Arg((2, 3)), Arg((3,)),
    sample=lambda rng: [np.array([[-1.0, 0.2, 1.5], [0.1, -0.3, 0.6]]),
                        np.array([-0.5, 0.0, -0.1])], ops=("where",))
row("clamp-tensor-ties", lambda m, x, lo, hi: m.clamp(x, lo, hi), Arg((2, 3)), Arg((3,)),
    Arg((2, 1)), sample=lambda rng: [np.array([[-0.5, 0.8, 1.5], [0.4, -0.3, 0.4]]),
                                     np.array([-0.5, 0.0, 0.9]), np.array([[0.8], [0.4]])],
    smooth=False)
row("triu", lambda m, x: m.triu(x, 1), Arg((3, 3)), ops=("where",))
row("tril", lambda m, x: m.tril(x, -1), Arg((3, 2)), ops=("where",))
row("trace", lambda m, x: m.trace(x), Arg((3, 3)))

# -- complex intermediates between real inputs and outputs --------------------------------
row("complex", lambda m, a, b: m.view_as_real(m.complex(a, b)), Arg((2, 3)), Arg((3,)),
    ops=("complex", "view_as_real"))
row("view_as_complex", lambda m, x, y: m.view_as_real(m.view_as_complex(x) *
                                                        m.view_as_complex(y)),
    Arg((3, 2)), Arg((3, 2)), ops=("view_as_complex", "mul", "view_as_real"))
row("real-imag", lambda m, a, b, c: m.real(m.complex(a, b) * c) - m.imag(m.complex(a, b)) * 2,
    Arg((2, 3)), Arg((2, 3)), Arg((3,)), ops=("complex", "real", "imag"))
row("conj", lambda m, a, b, c, d: m.real(m.conj(m.complex(a, b)) * m.complex(c, d)),
    Arg((2, 2)), Arg((2, 2)), Arg((2, 2)), Arg((2, 2)), ops=("conj", "complex", "real"))
row("angle", lambda m, a, b: m.angle(m.complex(a, b)), Arg((2, 3), AWAY0), Arg((2, 3), AWAY0),
    ops=("angle", "complex"))
row("angle-real", lambda m, x: m.angle(x) + x, Arg((2, 3), AWAY0), ops=("angle",))
row("polar", lambda m, r, t: m.view_as_real(m.polar(r, t)), Arg((2, 3), POS), Arg((3,)),
    ops=("polar", "view_as_real"))

# -- nn.functional ---------------------------------------------------------------------------
for _r in ("mean", "sum", "none"):
    row(f"mse_loss-{_r}", (lambda r: lambda m, x, y: F(m).mse_loss(x, y, reduction=r))(_r),
        Arg((2, 3)), Arg((2, 3)), ops=("mse_loss",))
row("l1_loss", lambda m, x, y: F(m).l1_loss(x, y), Arg((2, 3)), Arg((2, 3)),
    sample=lambda rng: (lambda a: [a, a + away((0.0,), 0.2)(rng, (2, 3))])(
        rng.standard_normal((2, 3))), ops=("abs", "mean"))
row("bce_with_logits", lambda m, x, y: F(m).binary_cross_entropy_with_logits(x, y),
    Arg((2, 3)), Arg((2, 3), PROB), ops=("binary_cross_entropy_with_logits",))
row("bce_with_logits-weights",
    lambda m, x, y, w, pw: F(m).binary_cross_entropy_with_logits(
        x, y, weight=w, pos_weight=pw, reduction="sum"),
    Arg((2, 3)), Arg((2, 3), PROB), Arg((3,), POS), Arg((3,), POS),
    ops=("binary_cross_entropy_with_logits",), torch_nograd=(2, 3))
row("bce_with_logits-none", lambda m, x, y, pw: F(m).binary_cross_entropy_with_logits(
    x, y, pos_weight=pw, reduction="none"), Arg((2, 3)), Arg((2, 3), PROB), Arg((2, 3), POS),
    ops=("binary_cross_entropy_with_logits",), torch_nograd=(2,))
row("bce", lambda m, x, y: F(m).binary_cross_entropy(x, y), Arg((2, 3), PROB),
    Arg((2, 3), PROB), ops=("binary_cross_entropy",))
row("bce-weight", lambda m, x, y, w: F(m).binary_cross_entropy(x, y, w, reduction="none"),
    Arg((2, 3), PROB), Arg((2, 3), PROB), Arg((2, 3), POS), ops=("binary_cross_entropy",),
    torch_nograd=(2,))
row("nll_loss", lambda m, x, t: F(m).nll_loss(x, t), Arg((3, 4)), const([0, 3, 1]),
    ops=("nll_loss",))
row("nll_loss-weight-ignore", lambda m, x, t, w: F(m).nll_loss(x, t, w, ignore_index=1),
    Arg((3, 4)), const([0, 1, 2]), Const(lambda rng: rng.uniform(0.5, 2.0, 4)),
    ops=("nll_loss",))
# PyTorch runs K-d nll_loss through nll_loss2d and views back: its node is ViewBackward0
row("nll_loss-none-spatial", lambda m, x, t: F(m).nll_loss(x, t, reduction="none"),
    Arg((2, 3, 2)), const([[0, 2], [1, 1]]), ops=("nll_loss",), grad_fn=False)
row("cross_entropy", lambda m, x, t: F(m).cross_entropy(x, t), Arg((3, 4)),
    const([0, 3, 1]), ops=("log_softmax", "nll_loss"))
row("cross_entropy-smoothing-weight",
    lambda m, x, t, w: F(m).cross_entropy(x, t, w, label_smoothing=0.2),
    Arg((3, 4)), const([0, 3, 1]), Const(lambda rng: rng.uniform(0.5, 2.0, 4)),
    ops=("log_softmax", "nll_loss"))
# PyTorch's last node is its C++ division by a number, DivBackward1; ours, DivBackward0
row("cross_entropy-probs", lambda m, x, p: F(m).cross_entropy(x, p), Arg((2, 3)),
    Const(lambda rng: (lambda a: a / a.sum(1, keepdims=True))(rng.uniform(0.1, 1, (2, 3)))),
    ops=("log_softmax",), grad_fn=False)
row("layer_norm", lambda m, x: F(m).layer_norm(x, (3,)), Arg((2, 3)), ops=("layer_norm",))
row("layer_norm-affine", lambda m, x, w, b: F(m).layer_norm(x, (2, 2), w, b),
    Arg((2, 2, 2)), Arg((2, 2)), Arg((2, 2)), ops=("layer_norm",))
row("embedding", lambda m, i, w: F(m).embedding(i, w), const([[0, 2], [2, 1]]), Arg((3, 2)),
    ops=("embedding",))
# padding_idx: the gradient of the padding row is zero by convention (not the derivative),
# so only PyTorch can check it; forward mode gives the true derivative, as PyTorch's does
row("embedding-padding", lambda m, i, w: F(m).embedding(i, w, padding_idx=0),
    const([0, 2, 2]), Arg((3, 2)), ops=("embedding",), smooth=False, forward=False)
row("linear", lambda m, x, w, b: F(m).linear(x, w, b), Arg((2, 3)), Arg((2, 3)), Arg((2,)),
    ops=("addmm",))
row("linear-3d", lambda m, x, w, b: F(m).linear(x, w, b), Arg((2, 1, 3)), Arg((2, 3)),
    Arg((2,)), ops=("addmm",))
row("linear-nobias", lambda m, x, w: F(m).linear(x, w), Arg((2, 3)), Arg((2, 3)),
    ops=("matmul",))
row("conv2d", lambda m, x, w, b: F(m).conv2d(x, w, b), Arg((1, 1, 3, 3)), Arg((2, 1, 2, 2)),
    Arg((2,)), ops=("conv2d",))
row("conv2d-stride-pad-groups", lambda m, x, w: F(m).conv2d(x, w, stride=2, padding=1,
                                                           groups=2),
    Arg((1, 2, 3, 3)), Arg((2, 1, 2, 2)), ops=("conv2d",))
row("conv2d-dilation", lambda m, x, w: F(m).conv2d(x, w, dilation=2), Arg((1, 1, 3, 4)),
    Arg((1, 1, 2, 2)), ops=("conv2d",))
row("max_pool2d", lambda m, x: F(m).max_pool2d(x, 2), Arg((1, 1, 2, 4), distinct),
    ops=("max_pool2d",))
row("max_pool2d-pad-ceil", lambda m, x: F(m).max_pool2d(x, 2, 2, padding=1, ceil_mode=True),
    Arg((1, 2, 3, 2), distinct), ops=("max_pool2d",))

# -- activations, layers and ops of the PyTorch surface (compositions unless `ops=`) --------
row("leaky_relu", lambda m, x: F(m).leaky_relu(x, 0.2), Arg((2, 3), AWAY0), ops=("leaky_relu",))
row("elu", lambda m, x: F(m).elu(x, 1.3), Arg((2, 3), AWAY0), ops=("elu",))
row("selu", lambda m, x: F(m).selu(x), Arg((2, 3), AWAY0), ops=("elu",), grad_fn=False)
row("celu", lambda m, x: F(m).celu(x, 0.7), Arg((2, 3), AWAY0), ops=("elu",), grad_fn=False,
    rtol64=1e-7)
row("softplus-beta", lambda m, x: F(m).softplus(x, 2.0, 3.0), Arg((2, 3), away((1.5,))),
    ops=("softplus",))
row("hardtanh", lambda m, x: F(m).hardtanh(x, -0.5, 0.8), Arg((2, 3), away((-0.5, 0.8))),
    grad_fn=False)
row("logsigmoid", lambda m, x: F(m).logsigmoid(x), Arg((2, 3)), grad_fn=False)
row("mish", lambda m, x: F(m).mish(x), Arg((2, 3)), grad_fn=False)
row("softsign", lambda m, x: F(m).softsign(x), Arg((2, 3), AWAY0), grad_fn=False)
row("cumsum", lambda m, x: m.cumsum(x, 1), Arg((2, 5)), ops=("cumsum",))
row("cumsum-dim0", lambda m, x: m.cumsum(x, 0), Arg((3, 2)), ops=("cumsum",))
row("cumprod", lambda m, x: m.cumprod(x, 1), Arg((2, 5)), grad_fn=False)
row("sort", lambda m, x: m.sort(x, 1, True).values, Arg((2, 5), distinct), grad_fn=False)
row("topk", lambda m, x: m.topk(x, 3, 0).values, Arg((4, 2), distinct), grad_fn=False)
row("einsum", lambda m, a, b: m.einsum("bij,bjk->bik", a, b), Arg((2, 2, 3)), Arg((2, 3, 2)),
    grad_fn=False)
row("einsum-diag-ellipsis", lambda m, a, b: m.einsum("...ii,...i->...", a, b), Arg((2, 3, 3)),
    Arg((2, 3)), grad_fn=False)
row("scatter", lambda m, x, s: m.scatter(x, 1, m.tensor([[2, 0], [1, 3]]), s), Arg((2, 4)),
    Arg((2, 2)), grad_fn=False)
row("scatter_add", lambda m, x, s: m.scatter_add(x, 0, m.tensor([[1, 0, 1], [1, 1, 0]]), s),
    Arg((2, 3)), Arg((2, 3)), grad_fn=False)
row("conv1d", lambda m, x, w, b: F(m).conv1d(x, w, b, stride=2, padding=1), Arg((2, 2, 5)),
    Arg((3, 2, 3)), Arg((3,)), grad_fn=False)
row("avg_pool2d", lambda m, x: F(m).avg_pool2d(x, 3, 2, padding=1, ceil_mode=True,
                                                count_include_pad=False),
    Arg((1, 2, 5, 4)), grad_fn=False)
row("adaptive_avg_pool2d", lambda m, x: F(m).adaptive_avg_pool2d(x, (2, 3)), Arg((1, 2, 5, 4)),
    grad_fn=False)
row("max_pool1d", lambda m, x: F(m).max_pool1d(x, 2), Arg((1, 2, 4), distinct), grad_fn=False)
row("batch_norm-train", lambda m, x, w, b: F(m).batch_norm(x, None, None, w, b, training=True),
    Arg((3, 2, 2)), Arg((2,)), Arg((2,)), grad_fn=False)
row("pad-crop", lambda m, x: F(m).pad(x, (1, -1, 2, 0), value=0.5), Arg((2, 3)), grad_fn=False)
row("sdpa-causal", lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, is_causal=True),
    Arg((2, 3, 2)), Arg((2, 3, 2)), Arg((2, 3, 2)), grad_fn=False)


# --------------------------------------------------------------------------------------
# Running a row
# --------------------------------------------------------------------------------------

def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _lg_inputs(r: Row, dtype: Any = lg.float64) -> list[Any]:
    out = []
    for a, arr in zip(r.args, r.arrays()):
        if isinstance(a, Arg):
            out.append(lg.tensor(arr, dtype=dtype, requires_grad=True))
        elif arr.dtype.kind == "f":
            out.append(lg.tensor(arr, dtype=dtype))
        else:
            out.append(lg.tensor(arr))
    return out


def _diff(r: Row, inputs: list[Any]) -> list[Any]:
    return [x for a, x in zip(r.args, inputs) if isinstance(a, Arg)]


def _bind(r: Row, inputs: list[Any]) -> Callable[..., tuple]:
    """The row as a function of its differentiable inputs only (constants closed over)."""
    def f(*xs: Any) -> tuple:
        it = iter(xs)
        full = [next(it) if isinstance(a, Arg) else x for a, x in zip(r.args, inputs)]
        return _as_tuple(r.fn(lg, *full))
    return f


def _np(t: Any) -> np.ndarray:
    return np.array(t.detach()._values())


def _ops_in_graph(outputs: tuple) -> set[str]:
    """Registry ops recorded in the backward graph of `outputs`."""
    seen: set[int] = set()
    ops: set[str] = set()
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "op", None):
            ops.add(node.op)
        function = getattr(node, "function", None)     # a compiled composite's one node:
        if function is not None:                        # the ops of the graph it differentiates
            ops.update(n.op for n in function.graph.nodes)
        stack.extend(n for n, _ in node.next_functions)
    return ops


ROW_IDS = [r.name for r in ROWS]
SMOOTH = [r for r in ROWS if r.smooth]


def test_row_names_are_unique():
    assert len(set(ROW_IDS)) == len(ROW_IDS)


def test_every_differentiable_op_has_a_row():
    """A new op with a vjp (or a new composite) must come with a row in this table.
    Collectives need several MPI processes: their gradients are checked across ranks in
    tests/test_distributed.py."""
    covered = {op for r in ROWS for op in r.ops}
    needed = {name for name, op in OPS.items()
              if (op.vjp is not None or op.group is Group.COMPOSITE)
              and op.group is not Group.COLLECTIVE}
    missing = sorted(needed - covered)
    assert not missing, f"ops without a row in tests/test_grad_table.py: {missing}"
    unknown = sorted(covered - set(OPS))
    assert not unknown, f"rows name ops that are not in the registry: {unknown}"


@pytest.mark.parametrize("r", ROWS, ids=ROW_IDS)
def test_rows_exercise_their_ops(r: Row):
    """Each op a row claims is really recorded in its graph (a row cannot cover by name)."""
    inputs = _lg_inputs(r)
    outs = _bind(r, inputs)(*_diff(r, inputs))
    missing = set(r.ops) - _ops_in_graph(outs)
    assert not missing, f"{r.name}: ops {sorted(missing)} do not appear in its graph"


@pytest.mark.parametrize("r", SMOOTH, ids=[r.name for r in SMOOTH])
def test_gradcheck(r: Row):
    inputs = _lg_inputs(r)
    assert lg.autograd.gradcheck(_bind(r, inputs), tuple(_diff(r, inputs)), eps=r.eps,
                                 atol=r.atol, rtol=r.rtol)


@pytest.mark.parametrize("r", SMOOTH, ids=[r.name for r in SMOOTH])
def test_gradgradcheck(r: Row):
    """Every op here has a second derivative (zero for floor, sign, relu, ...)."""
    inputs = _lg_inputs(r)
    assert lg.autograd.gradgradcheck(_bind(r, inputs), tuple(_diff(r, inputs)), eps=r.eps,
                                     atol=r.atol, rtol=r.rtol)


FORWARD = [r for r in ROWS if r.forward]


@pytest.mark.parametrize("r", FORWARD, ids=[r.name for r in FORWARD])
def test_forward_mode_matches_reverse_jacobian(r: Row):
    """JVP through dual tensors == J v, J from reverse mode (`functional.jacobian`)."""
    inputs = _lg_inputs(r)
    diff = _diff(r, inputs)
    f = _bind(r, inputs)
    rng = np.random.default_rng(7)
    # tangents exact in float32, so rows that cast to float32 and back lose nothing
    vs = [rng.standard_normal(x.shape).astype(np.float32).astype(np.float64) for x in diff]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x.detach(), lg.tensor(v, dtype=lg.float64))
                 for x, v in zip(diff, vs)]
        outs = f(*duals)
        tangents = [fwAD.unpack_dual(o).tangent for o in outs]
        primals = [_np(fwAD.unpack_dual(o).primal) for o in outs]
    jac = jacobian(f, tuple(diff))              # jac[i][j]: out_i.shape + in_j.shape
    for i, o in enumerate(outs):
        expected = np.zeros(o.shape)
        for j, v in enumerate(vs):
            expected += np.tensordot(_np(jac[i][j]), v, axes=v.ndim)
        got = np.zeros(o.shape) if tangents[i] is None else _np(tangents[i])
        assert tangents[i] is None or tuple(tangents[i].shape) == tuple(o.shape)
        np.testing.assert_allclose(primals[i], _np(f(*diff)[i]), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10,
                                   err_msg=f"{r.name}: JVP of output {i}")


# --------------------------------------------------------------------------------------
# PyTorch as the oracle
# --------------------------------------------------------------------------------------

TORCH_ROWS = [r for r in ROWS if r.torch]
DTYPES = {"float32": (lg.float32, "float32"), "float64": (lg.float64, "float64")}


def _torch_inputs(r: Row, tdtype: Any) -> list[Any]:
    out = []
    for k, (a, arr) in enumerate(zip(r.args, r.arrays())):
        if isinstance(a, Arg):
            out.append(torch.tensor(arr, dtype=tdtype, requires_grad=k not in r.torch_nograd))
        elif arr.dtype.kind == "f":
            out.append(torch.tensor(arr, dtype=tdtype))
        else:
            out.append(torch.tensor(arr))
    return out


def _torch_np(t: Any) -> np.ndarray:
    return t.detach().resolve_conj().resolve_neg().numpy()


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("r", TORCH_ROWS, ids=[r.name for r in TORCH_ROWS])
def test_matches_torch(r: Row, dtype: str):
    if torch is None:
        pytest.skip("torch is not installed")
    ldt, name = DTYPES[dtype]
    tdt = getattr(torch, name)
    rtol, atol = (r.rtol32, r.atol32) if dtype == "float32" else (r.rtol64, r.atol64)
    li = _lg_inputs(r, ldt)
    ti = _torch_inputs(r, tdt)
    louts = _as_tuple(r.fn(lg, *li))
    touts = _as_tuple((r.torch_fn or r.fn)(torch, *ti))
    assert len(louts) == len(touts)
    for k, (lo, to) in enumerate(zip(louts, touts)):
        assert tuple(lo.shape) == tuple(to.shape), f"output {k}"
        assert lo.dtype.name == str(to.dtype).replace("torch.", ""), f"output {k}"
        np.testing.assert_allclose(_np(lo), _torch_np(to), rtol=rtol, atol=atol,
                                   err_msg=f"{r.name}: output {k}")
    rng = np.random.default_rng(11)
    gos = [rng.uniform(-1, 1, tuple(o.shape)) for o in touts]
    compared = [k for k, a in enumerate(r.args) if isinstance(a, Arg)
                and k not in r.torch_nograd]
    ldiff = [li[k] for k in compared]
    tdiff = [ti[k] for k in compared]
    lgrads = lg.autograd.grad(list(louts), ldiff, [lg.tensor(g, dtype=ldt) for g in gos],
                              allow_unused=True)
    tgrads = torch.autograd.grad(list(touts), tdiff, [torch.tensor(g, dtype=tdt) for g in gos],
                                 allow_unused=True)
    for j, (lgr, tgr, x) in enumerate(zip(lgrads, tgrads, tdiff)):
        want = np.zeros(tuple(x.shape)) if tgr is None else _torch_np(tgr)
        got = np.zeros(tuple(x.shape)) if lgr is None else _np(lgr)
        if lgr is not None:
            assert lgr.dtype.name == name and tuple(lgr.shape) == tuple(x.shape), f"grad {j}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   err_msg=f"{r.name}: gradient of input {j}")
    if r.grad_fn:                  # last, so a name mismatch never hides a value mismatch
        names = [(type(lo.grad_fn).__name__, type(to.grad_fn).__name__)
                 for lo, to in zip(louts, touts)]
        assert all(a == b for a, b in names), f"{r.name}: grad_fn (llgrad, torch) {names}"


# --------------------------------------------------------------------------------------
# Engine-level rows: what every op relies on
# --------------------------------------------------------------------------------------

def _leaf(a: Any, dtype: Any = lg.float64) -> Any:
    return lg.tensor(np.asarray(a, dtype=np.float64), dtype=dtype, requires_grad=True)


def test_broadcast_gradients_are_reduced_to_input_shapes():
    """(3,1) * (1,4): each input's gradient is summed over the dimensions it was broadcast
    along, by the engine, with keepdim shape; a 1-D operand loses the leading dims."""
    rng = np.random.default_rng(0)
    a_np, b_np, c_np = rng.standard_normal((3, 1)), rng.standard_normal((1, 4)), \
        rng.standard_normal(4)
    go = rng.standard_normal((3, 4))
    a, b, c = _leaf(a_np), _leaf(b_np), _leaf(c_np)
    out = a * b + c
    ga, gb, gc = lg.autograd.grad(out, (a, b, c), lg.tensor(go))
    assert (ga.shape, gb.shape, gc.shape) == ((3, 1), (1, 4), (4,))
    np.testing.assert_allclose(_np(ga), (go * b_np).sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(_np(gb), (go * a_np).sum(0, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(_np(gc), go.sum(0), rtol=1e-12)
    assert lg.autograd.gradcheck(lambda a, b, c: a * b + c, (a, b, c))
    assert lg.autograd.gradgradcheck(lambda a, b: (a * b).exp(), (a, b))


def test_mixed_dtypes_give_each_leaf_its_own_dtype():
    """float32 leaf * float64 tensor: the product is float64, the float32 leaf's gradient
    is float32 (cast once, by the engine), as in PyTorch."""
    x32 = _leaf([1.5, -2.0, 0.25], lg.float32)
    y64 = _leaf([0.5, 3.0, -1.0])
    out = x32 * y64
    assert out.dtype is lg.float64
    out.sum().backward()
    assert x32.grad.dtype is lg.float32 and y64.grad.dtype is lg.float64
    np.testing.assert_array_equal(_np(x32.grad), np.float32([0.5, 3.0, -1.0]))
    np.testing.assert_array_equal(_np(y64.grad), np.float32([1.5, -2.0, 0.25]))
    if torch is not None:
        tx = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float32, requires_grad=True)
        ty = torch.tensor([0.5, 3.0, -1.0], dtype=torch.float64, requires_grad=True)
        (tx * ty).sum().backward()
        assert str(tx.grad.dtype) == "torch.float32" and str(ty.grad.dtype) == "torch.float64"
        assert type((tx * ty).grad_fn).__name__ == type(out.grad_fn).__name__


def test_one_input_used_many_times_accumulates():
    """Fan-out: every use of x sends a gradient back, and they add up (also through views
    and across two backward calls into .grad)."""
    x_np = np.array([0.3, -1.2, 2.0])
    x = _leaf(x_np)
    y = x * x + lg.sin(x) + x + x[0] + x.sum()
    y.sum().backward(retain_graph=True)
    # x[0] and x.sum() are broadcast over the 3 elements of y: 3 uses each
    expected = 2 * x_np + np.cos(x_np) + 1 + np.array([3.0, 0, 0]) + 3
    np.testing.assert_allclose(_np(x.grad), expected, rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), 2 * expected, rtol=1e-12)
    assert lg.autograd.gradcheck(lambda x: x * x + lg.sin(x) + x + x[0], (_leaf(x_np),))
    assert lg.autograd.gradgradcheck(lambda x: x * x * x + x[1] * x, (_leaf(x_np),))


def _transposed_leaf(a: np.ndarray) -> Any:
    holder = lg.tensor(np.ascontiguousarray(a.T))
    leaf = views.permute(holder, (1, 0))
    assert not leaf.is_contiguous()
    return leaf.requires_grad_()


def _strided_leaf(a: np.ndarray) -> Any:
    big = lg.zeros(a.shape[0], 2 * a.shape[1], dtype=lg.float64)
    leaf = views.slice_dims(big, (0, 0), big.shape, (1, 2))
    from llgrad.eager.elementwise import copy_into
    copy_into(leaf, lg.tensor(a))
    assert not leaf.is_contiguous()
    return leaf.requires_grad_()


def test_non_contiguous_leaves():
    """Transposed and strided leaves: gradients have the leaves' shapes and the right values,
    and gradcheck (which perturbs the leaves through their own strides) agrees."""
    rng = np.random.default_rng(1)
    a_np, b_np = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    a, b = _transposed_leaf(a_np), _strided_leaf(b_np)
    np.testing.assert_array_equal(_np(a), a_np)
    np.testing.assert_array_equal(_np(b), b_np)
    go = rng.standard_normal((2, 2))
    ga, gb = lg.autograd.grad(a @ b, (a, b), lg.tensor(go))
    np.testing.assert_allclose(_np(ga), go @ b_np.T, rtol=1e-12)
    np.testing.assert_allclose(_np(gb), a_np.T @ go, rtol=1e-12)
    f = lambda a, b: (a @ b).exp() + a.sum(1, keepdim=True)   # noqa: E731
    assert lg.autograd.gradcheck(f, (a, b))
    assert lg.autograd.gradgradcheck(f, (a, b))
    c = _transposed_leaf(rng.standard_normal((3, 2)))
    (c * c).sum().backward()
    np.testing.assert_allclose(_np(c.grad), 2 * _np(c), rtol=1e-12)


def test_zero_dim_tensors():
    """0-d leaves: gradients are 0-d, also when broadcast against a vector."""
    x, v = _leaf(1.3), _leaf([0.5, -2.0, 4.0])
    out = (lg.exp(x) * v).sum() + x.reshape(1).sum() + x.amax()
    (gx, gv) = lg.autograd.grad(out, (x, v))
    assert gx.shape == () and gv.shape == (3,)
    np.testing.assert_allclose(_np(gx), math.exp(1.3) * 2.5 + 2, rtol=1e-12)
    np.testing.assert_allclose(_np(gv), np.full(3, math.exp(1.3)), rtol=1e-12)
    f = lambda x, v: (lg.exp(x) * v + x.reshape(1) * x).sum() + x.amax()   # noqa: E731
    assert lg.autograd.gradcheck(f, (x, v))
    assert lg.autograd.gradgradcheck(f, (x, v))


def test_empty_tensors():
    """Gradients of empty tensors are empty tensors of the right shape, never errors."""
    x = lg.zeros(0, 3, dtype=lg.float64, requires_grad=True)
    w = _leaf(np.ones((3, 2)))
    s = (x * 2).sum() + x.sum(0).sum() + (x @ w).sum() + lg.exp(x).mean(0).sum()
    gx, gw = lg.autograd.grad(s, (x, w), allow_unused=True)
    assert gx.shape == (0, 3) and gx.dtype is lg.float64
    assert gw.shape == (3, 2)
    np.testing.assert_array_equal(_np(gw), np.zeros((3, 2)))
    g0 = lg.autograd.grad(x.sum(1), x, lg.zeros(0, dtype=lg.float64))[0]
    assert g0.shape == (0, 3)
    assert lg.autograd.gradcheck(lambda x, w: (x @ w).sum(0), (x, w))
    if torch is not None:
        tx = torch.zeros(0, 3, dtype=torch.float64, requires_grad=True)
        tw = torch.ones(3, 2, dtype=torch.float64, requires_grad=True)
        ts = (tx * 2).sum() + tx.sum(0).sum() + (tx @ tw).sum() + torch.exp(tx).mean(0).sum()
        tgx, tgw = torch.autograd.grad(ts, (tx, tw), allow_unused=True)
        assert tuple(tgx.shape) == tuple(gx.shape)
        np.testing.assert_array_equal(_np(gw), tgw.numpy())
        np.testing.assert_array_equal(_np(s), ts.detach().numpy())
