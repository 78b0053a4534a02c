"""Random sampling: multinomial, bernoulli, poisson, binomial, the normal overloads, the
in-place random fills (`random_ exponential_ geometric_ cauchy_ log_normal_ bernoulli_`),
`randint_like` and the generator state (`get_rng_state`, `set_rng_state`).

Every function takes `generator=` (an `lg.Generator`; the default generator otherwise) and is
reproducible with `lg.manual_seed`. llgrad's streams are its own (a counter-based hash, see
`Generator`), so the numbers differ from PyTorch's; distributions, shapes, dtypes and errors
are PyTorch's.

How they are made: `bernoulli`, `normal`, `exponential_`, `geometric_`, `cauchy_` and
`log_normal_` transform llgrad's uniform/normal draws with llgrad ops (so they also compile
into an `lg.compile` graph, where each call draws fresh numbers). `multinomial`, `poisson`,
`binomial` and `random_` need rejection or integer sampling: they take a block of the
generator's stream as the key of a NumPy Philox generator and sample on the host (inside
`lg.compile` they are graph breaks: that part runs eagerly). Sampled values carry no
gradient: `bernoulli` and `poisson` of a tensor that requires grad give a zero gradient
(`BernoulliBackward0`, `PoissonBackward0`), `binomial`'s backward raises, as PyTorch.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..dispatch.apply import needs_grad
from ..tape.node import Node, edge, node_class
from ..ir import dtypes as dt
from ..ir.dtypes import DType
from ..ir.types import broadcast_shapes
from ..tensor import Tensor
from ..tracer.context import current, user_location
from ..tracer.tensor import GraphBreak
from . import elementwise as E
from ._errors import names_op
from ._out import store
from .creation import (
    Generator,
    _finish,
    _kw,
    default_generator,
    rand,
    randint,
    randn,
    tensor,
    zeros,
)
from .shape import size_arg
from .tensor_extras import _pin_memory

__all__: list[str] = [
    "multinomial",
    "bernoulli",
    "poisson",
    "binomial",
    "normal",
    "randint_like",
    "get_rng_state",
    "set_rng_state",
]

_M64 = (1 << 64) - 1


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _generator(generator: Any, op: str) -> Generator:
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(
            f"{op}(): generator must be an llgrad.Generator, got {type(generator).__name__}"
        )
    return generator


def _no_trace(op: str, *tensors: Any) -> None:
    """Inside `lg.compile`, a host-sampled op is a graph break (it runs eagerly)."""
    if current() is not None or any(getattr(t, "_ctx", None) is not None for t in tensors):
        raise GraphBreak(f"{op}() (sampled on the host)", user_location())


def _host_rng(op: str, generator: Any, n: int) -> np.random.Generator:
    """A NumPy generator keyed by the next `n` positions of llgrad's stream (so seeding,
    `get_state`/`set_state` and `fork_rng` govern it, and later draws are fresh)."""
    gen = _generator(generator, op)
    key, counter = gen.take(max(int(n), 1))
    return np.random.Generator(np.random.Philox(key=((key & _M64) << 64) | (counter & _M64)))


def _floating(t: Tensor, op: str, what: str = "input") -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}(): argument '{what}' must be Tensor, not {type(t).__name__}")
    if not t._dtype.is_floating_point:
        raise RuntimeError(
            f"{op}: only floating-point dtypes are supported for {what}, got {t._dtype.name}"
        )


class _SampleNode(Node):
    """Backward of a sample: a zero gradient for each input (the sample does not vary
    smoothly with its parameters), or, for `binomial`, an error."""

    __slots__ = ("metas", "message")

    def __init__(self, inputs: Sequence[Tensor], message: str | None = None):
        super().__init__(tuple(edge(t) for t in inputs))
        self.metas = [(t._shape, t._dtype) for t in inputs]
        self.message = message

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        if self.message is not None:
            raise RuntimeError(self.message)

        return tuple(zeros(shape, dtype=d) for shape, d in self.metas)


def _record(out: Tensor, name: str, inputs: Sequence[Any], message: str | None = None) -> Tensor:
    """Attach a `_SampleNode` called `name` when an input requires grad."""
    tensors = [t for t in inputs if isinstance(t, Tensor)]
    if tensors and needs_grad(tensors) and getattr(out, "_ctx", None) is None:
        out._requires_grad = True
        out.grad_fn = node_class(name, _SampleNode)(tensors, message)
    return out


def _host_values(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach()._values(), dtype=np.float64)


# --------------------------------------------------------------------------------------
# multinomial
# --------------------------------------------------------------------------------------


@names_op("multinomial")
def multinomial(
    input: Tensor,
    num_samples: int,
    replacement: bool = False,
    *,
    generator: Generator | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """Indices drawn from the categorical distributions in the rows of `input` (weights,
    not necessarily normalized): `num_samples` per row, int64, shape (num_samples,) or
    (rows, num_samples).

    Without replacement each index appears at most once per row (drawn one after another
    in proportion to the remaining weights; zero-weight categories come last, as PyTorch
    picks them only once the others are used up). Raises as PyTorch for a negative, inf or
    NaN weight, a row summing to zero, `num_samples <= 0`, and `num_samples` above the
    number of categories without replacement."""
    _floating(input, "multinomial")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(
            f"multinomial(): num_samples must be an int, got {type(num_samples).__name__}"
        )
    n = int(num_samples)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim} dims")
    k = input._shape[-1]
    if not replacement and n > k:
        raise RuntimeError(
            f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
            f"without replacement (n_sample={n}, categories={k})"
        )
    if n <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (got {n})")
    if out is not None and (not isinstance(out, Tensor) or out._dtype is not dt.int64):
        got = out._dtype.name if isinstance(out, Tensor) else type(out).__name__
        raise RuntimeError(f"multinomial expects Long tensor out, got: {got}")
    _no_trace("multinomial", input)
    p = _host_values(input).reshape(-1, k)
    rows = p.shape[0]
    if rows and k:
        if not np.all(np.isfinite(p)) or np.any(p < 0):
            raise RuntimeError(
                "multinomial: probability tensor contains either `inf`, `nan` or element < 0"
            )
    totals = p.sum(axis=1) if k else np.zeros(rows)
    if rows and np.any(totals <= 0):
        raise RuntimeError(
            "multinomial: invalid multinomial distribution (sum of probabilities <= 0)"
        )
    rng = _host_rng("multinomial", generator, rows * n)
    result = np.empty((rows, n), dtype=np.int64)
    if replacement:
        cdf = np.cumsum(p, axis=1)
        u = rng.random((rows, n)) * totals[:, None]
        last = k - 1 - np.argmax(p[:, ::-1] > 0, axis=1)  # the last positive weight
        for r in range(rows):
            idx = np.searchsorted(cdf[r], u[r], side="right")
            result[r] = np.minimum(idx, last[r])
    elif rows:
        # exponential races: category i finishes at E_i / p_i; the first n to finish are
        # a draw without replacement (zero weights never finish before positive ones)
        with np.errstate(divide="ignore"):
            finish = rng.standard_exponential((rows, k)) / p
        result[...] = np.argsort(finish, axis=1, kind="stable")[:, :n]
    shape = (n,) if input.ndim == 1 else (rows, n)
    res = Tensor._from_numpy(result.reshape(shape))
    if out is not None:
        return store("multinomial", res, out)
    return res


def _multinomial_method(
    self: Tensor, num_samples: int, replacement: bool = False, *, generator: Generator | None = None
) -> Tensor:
    """`t.multinomial(num_samples, replacement=False)`: see `lg.multinomial`."""
    return multinomial(self, num_samples, replacement, generator=generator)


# --------------------------------------------------------------------------------------
# bernoulli
# --------------------------------------------------------------------------------------


def _check_p(p: Any, op: str) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.number)):
        raise TypeError(f"{op}(): p must be a float or a Tensor, got {type(p).__name__}")
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"{op} expects p to be in [0, 1], but got p={p:g}")
    return p


def _check_probabilities(p: Tensor, op: str) -> None:
    if getattr(p, "_ctx", None) is not None or p.numel() == 0:
        return  # traced: the values are not known (not checked)
    v = _host_values(p)
    if not np.all((v >= 0) & (v <= 1)):
        raise RuntimeError(
            f"{op}: expected all probabilities in [0, 1] (p_in >= 0 && "
            f"p_in <= 1), got values outside it"
        )


def _draw_below(p: Any, shape: tuple[int, ...], generator: Any) -> Tensor:
    """A bool tensor of `shape`: True with probability p (a number or a tensor that
    broadcasts to `shape`)."""
    d = p._dtype.compute if isinstance(p, Tensor) and p._dtype.is_floating_point else dt.float64
    u = rand(shape, dtype=d, generator=_generator(generator, "bernoulli"))
    return E.lt(u, p.detach() if isinstance(p, Tensor) else p)


@names_op("bernoulli")
def bernoulli(input: Tensor, p: Any = None, *, generator: Generator | None = None) -> Tensor:
    """0/1 samples: `bernoulli(input)` draws 1 with probability input[i] (floating input,
    every value in [0, 1]); `bernoulli(input, p)` draws 1 with probability `p` (a float) in
    a tensor shaped and typed like `input` (any dtype). The result has input's dtype; a
    gradient through it is zero (PyTorch's BernoulliBackward)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"bernoulli(): argument 'input' must be Tensor, not {type(input).__name__}")
    if p is None:
        if not input._dtype.is_floating_point:
            raise RuntimeError(
                f"bernoulli: probabilities must be floating point, got "
                f"{input._dtype.name} (use bernoulli(input, p) for a "
                f"constant p)"
            )
        _check_probabilities(input, "bernoulli")
        out = _draw_below(input, input._shape, generator).to(input._dtype)
        return _record(out, "BernoulliBackward0", [input])
    if isinstance(p, Tensor):
        raise TypeError(
            "bernoulli(): p must be a float (use bernoulli(p_tensor) for tensor probabilities)"
        )
    p = _check_p(p, "bernoulli_")
    out = _draw_below(p, input._shape, generator).to(input._dtype)
    return _record(out, "BernoulliBackward1", [input])


def _bernoulli_method(self: Tensor, p: Any = None, *, generator: Generator | None = None) -> Tensor:
    """`t.bernoulli()` (t holds the probabilities) or `t.bernoulli(p)` (a float p, a
    tensor shaped and typed like t)."""
    return bernoulli(self, p, generator=generator)


def _random_write(self: Tensor, sample: Tensor) -> Tensor:
    """Write a fresh sample into `self` as `copy_` writes (a leaf that requires grad
    refuses; a recorded tensor's old history gets a zero gradient)."""
    return self.copy_(sample)


@names_op("bernoulli_")
def _bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill with 0/1 samples, 1 with probability `p` (a float, or a floating tensor that
    broadcasts to self's shape), in self's dtype (any dtype)."""
    if isinstance(p, Tensor):
        if not p._dtype.is_floating_point:
            raise RuntimeError(
                f"bernoulli_: probabilities must be floating point, got {p._dtype.name}"
            )
        if p.ndim > self.ndim or any(
            a not in (1, b) for a, b in zip(reversed(p._shape), reversed(self._shape))
        ):
            raise RuntimeError(
                f"bernoulli_: the probabilities of shape {list(p._shape)} "
                f"cannot be expanded to the tensor's shape "
                f"{list(self._shape)}"
            )
        _check_probabilities(p, "bernoulli_")
    else:
        p = _check_p(p, "bernoulli_")
    return _random_write(self, _draw_below(p, self._shape, generator))


# --------------------------------------------------------------------------------------
# poisson, binomial
# --------------------------------------------------------------------------------------


@names_op("poisson")
def poisson(input: Tensor, generator: Generator | None = None) -> Tensor:
    """Counts drawn from Poisson distributions with rates `input` (floating, every rate
    >= 0 and finite), in input's dtype. Where llgrad differs: an infinite rate raises
    (PyTorch returns a meaningless number)."""
    _floating(input, "poisson")
    _no_trace("poisson", input)
    rates = _host_values(input)
    if rates.size and not np.all(rates >= 0):
        raise RuntimeError("poisson: invalid Poisson rate, expected rate to be non-negative")
    if rates.size and not np.all(np.isfinite(rates)) or rates.size and rates.max() > 1e18:
        raise RuntimeError("poisson: invalid Poisson rate, expected a finite rate (at most 1e18)")
    rng = _host_rng("poisson", generator, rates.size)
    counts = np.asarray(rng.poisson(rates), dtype=np.float64) if rates.size else rates

    out = tensor(np.asarray(counts).reshape(input._shape), dtype=input._dtype)
    return _record(out, "PoissonBackward0", [input])


@names_op("binomial")
def binomial(count: Tensor, prob: Tensor, generator: Generator | None = None) -> Tensor:
    """Successes in `count` trials of probability `prob` (floating tensors of one dtype,
    broadcast together). As PyTorch: a count is truncated to an integer and a negative one
    gives 0; a probability is clipped into [0, 1]; NaN in either gives NaN."""
    if not isinstance(count, Tensor) or not isinstance(prob, Tensor):
        raise TypeError("binomial(): count and prob must be Tensors")
    if not count._dtype.is_floating_point:
        raise ValueError(
            f"binomial only supports floating-point dtypes for count, got: {count._dtype.name}"
        )
    if not prob._dtype.is_floating_point:
        raise ValueError(
            f"binomial only supports floating-point dtypes for prob, got: {prob._dtype.name}"
        )
    if prob._dtype is not count._dtype:
        raise RuntimeError(
            f"binomial: Found dtype {prob._dtype.name} but expected {count._dtype.name}"
        )
    _no_trace("binomial", count, prob)

    shape = broadcast_shapes(count._shape, prob._shape, op="binomial")
    n = np.broadcast_to(_host_values(count), shape)
    p = np.broadcast_to(_host_values(prob), shape)
    nan = np.isnan(n) | np.isnan(p)
    trials = np.where(nan | (n < 0), 0, np.trunc(np.nan_to_num(n, posinf=0.0)))
    if np.any(np.isinf(n) & (n > 0)):
        raise RuntimeError("binomial: count must be finite")
    q = np.clip(np.nan_to_num(p), 0.0, 1.0)
    rng = _host_rng("binomial", generator, int(np.prod(shape)))
    draws = rng.binomial(trials.astype(np.int64), q).astype(np.float64)
    draws[nan] = np.nan

    out = tensor(draws.reshape(shape), dtype=count._dtype)
    return _record(
        out,
        "NotImplemented",
        [count, prob],
        message="the derivative for 'binomial' is not implemented.",
    )


# --------------------------------------------------------------------------------------
# normal
# --------------------------------------------------------------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool)


@names_op("normal")
def normal(
    mean: Any,
    std: Any = 1.0,
    size: Sequence[int] | None = None,
    *,
    generator: Generator | None = None,
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
) -> Tensor:
    """Samples of N(mean, std**2), PyTorch's four overloads:
    - `normal(mean: Tensor, std: Tensor)`: the two broadcast (promoted floating dtype);
    - `normal(mean: Tensor, std: float = 1.0)` and `normal(mean: float, std: Tensor)`:
      shaped and typed like the tensor;
    - `normal(mean: float, std: float, size)`: of `size` (dtype: `dtype` or the default).
    Computed as `mean + std * z` (z standard normal). Gradients as PyTorch's
    NormalBackward1/2/3: zero for a tensor `mean` and `std` (the sample is not
    reparameterized; write `mean + std * lg.randn_like(mean)` for that). std must be >= 0
    (checked eagerly, not inside `lg.compile`)."""
    t_mean, t_std = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not t_mean and not _is_number(mean):
        raise TypeError(f"normal(): mean must be a Tensor or a number, got {type(mean).__name__}")
    if not t_std and not _is_number(std):
        raise TypeError(f"normal(): std must be a Tensor or a number, got {type(std).__name__}")
    gen = _generator(generator, "normal")
    if not t_mean and not t_std:
        if size is None:
            raise TypeError(
                "normal(): with a float mean and std, the size is required "
                "(normal(mean, std, size))"
            )
        shape = size_arg((size,), "normal")
        d, rg = _kw(
            {"dtype": dtype, "layout": layout, "device": device, "requires_grad": requires_grad},
            "normal",
        )
        d = d or dt.get_default_dtype()
        if not d.is_floating_point:
            raise RuntimeError(f"normal: expected a floating point dtype, got {d.name}")
        if float(std) < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {float(std):g}")
        z = randn(shape, dtype=d, generator=gen)
        return _finish(E.add(E.mul(z, float(std)), float(mean)), rg)
    if size is not None:
        raise TypeError("normal(): size is only taken with a float mean and std")
    if requires_grad:
        raise TypeError("normal(): requires_grad is only taken with a float mean and std")
    for name, v in (("mean", mean), ("std", std)):
        if isinstance(v, Tensor) and not v._dtype.is_floating_point:
            raise RuntimeError(f"normal: expected a floating point {name}, got {v._dtype.name}")
    if t_std:
        if (
            getattr(std, "_ctx", None) is None
            and std.numel()
            and not np.all(_host_values(std) >= 0)
        ):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif float(std) < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {float(std):g}")
    if t_mean and t_std:
        shape = broadcast_shapes(mean._shape, std._shape, op="normal")
        d = dt.promote_types(mean._dtype, std._dtype)
    else:
        ref = mean if t_mean else std
        shape, d = ref._shape, ref._dtype
    z = randn(shape, dtype=d, generator=gen)
    values = [v.detach() if isinstance(v, Tensor) else v for v in (mean, std)]
    out = E.add(E.mul(z, values[1]), values[0])
    name = (
        "NormalBackward3"
        if t_mean and t_std
        else "NormalBackward1"
        if t_mean
        else "NormalBackward2"
    )
    return _record(out, name, [mean, std])


# --------------------------------------------------------------------------------------
# in-place fills
# --------------------------------------------------------------------------------------


def _continuous(self: Tensor, op: str, family: str) -> None:
    if not self._dtype.is_floating_point:
        raise RuntimeError(
            f"{op}: {family} distribution is a continuous probability "
            f"distribution. dtype must be a floating point but you specified "
            f"{self._dtype.name}"
        )


def _uniform_open(self: Tensor, generator: Any) -> Tensor:
    """Uniform float64 draws in [0, 1), shaped like self."""
    return rand(self._shape, dtype=dt.float64, generator=_generator(generator, "random"))


@names_op("exponential_")
def _exponential_(
    self: Tensor, lambd: float = 1.0, *, generator: Generator | None = None
) -> Tensor:
    """Fill with samples of the exponential distribution of rate `lambd` (> 0)."""
    _continuous(self, "exponential_", "Exponential")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    u = _uniform_open(self, generator)
    return _random_write(self, E.div(E.neg(E.log1p(E.neg(u))), float(lambd)))


@names_op("geometric_")
def _geometric_(self: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:
    """Fill with samples of the geometric distribution: the number of Bernoulli(p) trials
    up to and including the first success (1, 2, ...); any dtype, 0 < p < 1."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    v = E.sub(1.0, _uniform_open(self, generator))  # (0, 1]
    k = E.add(E.floor(E.div(E.log(v), math.log1p(-p))), 1.0)
    return _random_write(self, k)


@names_op("cauchy_")
def _cauchy_(
    self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: Generator | None = None
) -> Tensor:
    """Fill with samples of the Cauchy distribution (location `median`, scale `sigma` > 0)."""
    _continuous(self, "cauchy_", "Cauchy")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    u = _uniform_open(self, generator)
    x = E.tan(E.mul(E.sub(u, 0.5), math.pi))
    return _random_write(self, E.add(E.mul(x, float(sigma)), float(median)))


@names_op("log_normal_")
def _log_normal_(
    self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: Generator | None = None
) -> Tensor:
    """Fill with exp(N(mean, std**2)) samples (std > 0)."""
    if not self._dtype.is_floating_point:
        raise RuntimeError(f"log_normal_: expected a floating point tensor, got {self._dtype.name}")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    z = randn(self._shape, dtype=dt.float64, generator=_generator(generator, "log_normal_"))
    return _random_write(self, E.exp(E.add(E.mul(z, float(std)), float(mean))))


def _float_digits(d: DType) -> int:
    return {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[d.name]


def _dtype_range(d: DType) -> tuple[int, int]:
    """The integers a dtype holds: exactly for integers, (-max, max) for floats."""
    if d is dt.bool_:
        return 0, 1
    if d.is_integer:
        info = np.iinfo(d.np)
        return int(info.min), int(info.max)
    big = {"float16": 65504, "bfloat16": int(3.3895313892515355e38)}.get(d.name)
    if big is None:
        big = int(np.finfo(d.np).max)
    return -big, big


@names_op("random_")
def _random_(
    self: Tensor, from_: int | None, to: int | None, generator: Generator | None
) -> Tensor:
    """Fill with integers drawn uniformly from [from_, to) (`from_` None: the default
    range, [0, the dtype's largest value], for floats [0, 2**mantissa digits], where every
    integer is representable; `to` None: up to that largest value, inclusive). Bounds
    outside the dtype raise; float bounds beyond 2**digits warn, as PyTorch."""
    if self._dtype.is_complex:
        raise RuntimeError("random_: complex tensors are not supported")
    d = self._dtype
    low_limit, high_limit = _dtype_range(d)
    default_high = 2 ** _float_digits(d) if d.is_floating_point else high_limit
    if from_ is None:
        low, high = 0, default_high  # inclusive
    else:
        low = _int_bound(from_, "from")
        if to is None:
            high = default_high
        else:
            to = _int_bound(to, "to")
            if low >= to:
                raise RuntimeError(
                    f"random_ expects 'from' to be less than 'to', but got from={low} >= to={to}"
                )
            high = to - 1
        if not low_limit <= low <= high_limit:
            raise RuntimeError(f"random_: from is out of bounds for {d.name}")
        if not low_limit <= high <= high_limit:
            raise RuntimeError(f"random_: to - 1 is out of bounds for {d.name}")
        digits = _float_digits(d) if d.is_floating_point else 0
        if d.is_floating_point and (high > 2**digits or low < -(2**digits)):
            warnings.warn(
                f"random_: to - 1 is out of bounds [-(2^{digits}), 2^{digits}]. "
                f"Due to precision limitations {d.name} can support discrete "
                f"uniform distribution only within this range.",
                UserWarning,
                stacklevel=4,
            )
    _no_trace("random_", self)
    n = self.numel()
    rng = _host_rng("random_", generator, n)
    values = (
        rng.integers(low, high, size=self._shape, dtype=np.int64, endpoint=True)
        if n
        else np.zeros(self._shape, dtype=np.int64)
    )
    return _random_write(self, Tensor._from_numpy(np.require(values, requirements="C")))


def _int_bound(v: Any, what: str) -> int:
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"random_(): '{what}' must be an int, got {type(v).__name__}")
    return int(v)


def _random_method(
    self: Tensor, *args: Any, generator: Generator | None = None, **kwargs: Any
) -> Tensor:
    """`t.random_()`, `t.random_(to)`, `t.random_(from, to)` (`to` may be None: up to the
    dtype's largest value); PyTorch's keywords `from` and `to` are taken too."""
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    unknown = set(kwargs) - {"from", "to"}
    if unknown:
        raise TypeError(f"random_() got unexpected keyword arguments {sorted(unknown)}")
    if len(args) == 1 and not kwargs:
        if args[0] is None:
            raise TypeError("random_(): to must be an int, not None")
        return _random_(self, 0, args[0], generator)  # random_(to)
    named = dict(zip(("from", "to"), args))
    if set(named) & set(kwargs):
        raise TypeError("random_() got an argument both by position and by keyword")
    named.update(kwargs)
    if not named:
        return _random_(self, None, None, generator)
    if "from" not in named:
        named["from"] = 0
    return _random_(self, named["from"], named.get("to"), generator)


# --------------------------------------------------------------------------------------
# randint_like, generator state
# --------------------------------------------------------------------------------------


@names_op("randint_like")
def randint_like(
    input: Tensor,
    low: int = 0,
    high: int | None = None,
    *,
    generator: Generator | None = None,
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
    pin_memory: bool = False,
) -> Tensor:
    """Integers drawn uniformly from [low, high), shaped like `input`, in input's dtype
    unless `dtype=`. `randint_like(input, high)` draws from [0, high). `pin_memory=True`
    raises, as PyTorch without an accelerator."""
    if pin_memory:
        _pin_memory(input)
    if not isinstance(input, Tensor):
        raise TypeError(
            f"randint_like(): argument 'input' must be Tensor, not {type(input).__name__}"
        )
    if high is None:
        low, high = 0, low
    if device is None and input.is_cuda:
        device = "cuda"  # (the input's device, as PyTorch)
    return randint(
        low,
        high,
        input._shape,
        generator=generator,
        dtype=dtype or input._dtype,
        layout=layout,
        device=device,
        requires_grad=requires_grad,
    )


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 tensor (see `Generator.get_state`)."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from `get_rng_state()`."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(
    devices: Any = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str | None = None,
) -> Iterator[None]:
    """A context in which the default generator may be used freely: its state is restored
    on exit (llgrad has only the CPU generator; `devices` must name no accelerator)."""
    if devices:
        raise RuntimeError(
            f"{_caller}: llgrad has no accelerator generators to fork "
            f"(got {_devices_kw}={devices!r})"
        )
    if device_type not in (None, "cpu"):
        raise RuntimeError(f"{_caller}: device_type {device_type!r} is not available")
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {
    "multinomial": _multinomial_method,
    "bernoulli": _bernoulli_method,
    "bernoulli_": _bernoulli_,
    "exponential_": _exponential_,
    "geometric_": _geometric_,
    "cauchy_": _cauchy_,
    "log_normal_": _log_normal_,
    "random_": _random_method,
}
