"""Ops that generate values from the element index: `iota` and random numbers.

Random numbers come from a counter-based generator (splitmix64 of seed and element counter).

Element i of a draw is a pure function of (seed, counter + i), so kernels vectorize and
split across threads freely, and the NumPy reference reproduces the exact bits. The seed
and counter are operands (int64 scalars passed by value), so a new draw never compiles a
new kernel. Streams differ from PyTorch's: same distributions, different numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import dtypes as dt
from ..ir.registry import Attr, AttrKind, Group, OpDef, register
from ..ir.types import TensorType

GOLDEN = 0x9E3779B97F4A7C15
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
MASK = (1 << 64) - 1


def _infer(types: tuple[TensorType, ...], dtype: dt.DType, shape: tuple[int, ...]) -> TensorType:
    if not dtype.is_floating_point:
        raise TypeError(f"random: expected a floating point dtype, got {dtype.name}")
    return TensorType(dtype, shape)


def _ref_bits(seed: int, counter: int, n: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        key = np.uint64(seed & MASK)
        z = key + (np.uint64(counter & MASK) + np.arange(n, dtype=np.uint64)) * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(M2)
        return z ^ (z >> np.uint64(31))


def _ref_uniform(seed: Any, counter: Any, dtype: dt.DType, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    z = _ref_bits(int(seed), int(counter), n)
    if dtype is dt.float64:
        u = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    else:
        u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)
    return u.reshape(shape)


def _ref_normal(seed: Any, counter: Any, dtype: dt.DType, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    z = _ref_bits(int(seed), int(counter), n)
    u1 = ((z >> np.uint64(40)).astype(np.float64) + 1.0) * 2.0**-24
    u2 = (z & np.uint64(0xFFFFFF)).astype(np.float64) * 2.0**-24
    r = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    return r.astype(np.float64 if dtype is dt.float64 else np.float32).reshape(shape)


def _bits(s: Any, seed: Any, counter: Any) -> Any:
    i64 = dt.int64
    z = s.add(seed, s.mul(s.add(counter, s.index()), s.const(GOLDEN - (1 << 64), i64)))
    z = s.mul(s.bitwise("xor", z, s.shr(z, 30)), s.const(M1 - (1 << 64), i64))
    z = s.mul(s.bitwise("xor", z, s.shr(z, 27)), s.const(M2 - (1 << 64), i64))
    return s.bitwise("xor", z, s.shr(z, 31))


def _scalar_uniform(s: Any, seed: Any, counter: Any, dtype: dt.DType, shape: Any) -> Any:
    z = _bits(s, seed, counter)
    if dtype is dt.float64:
        return s.mul(s.cast(s.shr(z, 11), dt.float64), s.const(2.0**-53, dt.float64))
    u = s.mul(s.cast(s.shr(z, 40), dt.float32), s.const(2.0**-24, dt.float32))
    return s.cast(u, dtype)


def _scalar_normal(s: Any, seed: Any, counter: Any, dtype: dt.DType, shape: Any) -> Any:
    z = _bits(s, seed, counter)
    f = dt.float64 if dtype is dt.float64 else dt.float32
    scale = s.const(2.0**-24, f)
    u1 = s.mul(s.add(s.cast(s.shr(z, 40), f), s.const(1.0, f)), scale)
    u2 = s.mul(s.cast(s.bitwise("and", z, s.const(0xFFFFFF, dt.int64)), f), scale)
    r = s.math("sqrt", s.mul(s.const(-2.0, f), s.math("log", u1)))
    return s.cast(s.mul(r, s.math("cos", s.mul(s.const(2.0 * np.pi, f), u2))), dtype)


_ATTRS = (Attr("dtype", AttrKind.DTYPE, required=True), Attr("shape", AttrKind.INTS, required=True))
register(
    OpDef(
        "uniform",
        Group.RANDOM,
        2,
        attrs=_ATTRS,
        infer=_infer,
        reference=_ref_uniform,
        scalar=_scalar_uniform,
        promotion="none",
        saves="",
    )
)
register(
    OpDef(
        "normal",
        Group.RANDOM,
        2,
        attrs=_ATTRS,
        infer=_infer,
        reference=_ref_normal,
        scalar=_scalar_normal,
        promotion="none",
        saves="",
    )
)


def _infer_iota(
    types: tuple[TensorType, ...], dtype: dt.DType, shape: tuple[int, ...]
) -> TensorType:
    return TensorType(dtype, shape)


register(
    OpDef(
        "iota",
        Group.RANDOM,
        0,
        attrs=_ATTRS,
        infer=_infer_iota,
        reference=lambda dtype, shape: (
            np.arange(int(np.prod(shape, dtype=np.int64)))
            .reshape(shape)
            .astype(np.float32 if dtype is dt.bfloat16 else dtype.np)
        ),
        scalar=lambda s, dtype, shape: s.cast(s.index(), dtype),
        promotion="none",
        saves="",
        doc="0, 1, 2, ... in row-major order",
    )
)
