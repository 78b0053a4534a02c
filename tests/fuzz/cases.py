"""What a fuzz case is, how it is built in torch and in llgrad, and how two outcomes compare.

A case is plain data (`Case`): an op from `ops.OPS`, its Python arguments, and one or two
sets of tensor specs (`TSpec`: dtype, shape, layout, fill, requires_grad, seed). The same
case is materialized in torch and in llgrad with the same values and the same layout
(views, strides, overlapping memory), called through the same API, and the two outcomes
are compared: values, dtypes and shapes, gradients, and the tensors an in-place op wrote.
`repr(case)` is the reproducer printed when something goes wrong.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPES = ("float32", "float64", "int64", "int32", "bool", "float16", "bfloat16")
FLOATS = ("float32", "float64", "float16", "bfloat16")
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded", "numpy_overlap")
FILLS = ("normal", "special", "small_int", "zeros")


@dataclass(frozen=True)
class TSpec:
    dtype: str
    shape: tuple[int, ...]
    layout: str = "contiguous"
    fill: str = "normal"
    requires_grad: bool = False
    seed: int = 0

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in (("layout", self.layout), ("fill", self.fill))
                        if v not in ("contiguous", "normal"))
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"T({self.dtype}, {list(self.shape)}{extra}{grad}, seed={self.seed})"


@dataclass(frozen=True)
class DT:
    """A dtype argument, resolved per library."""
    name: str

    def __repr__(self) -> str:
        return f"dtype.{self.name}"


@dataclass(frozen=True)
class Key:
    """An index expression for getitem/setitem: ints, slices, None, Ellipsis, and
    ("t", i) for the i-th tensor argument."""
    items: tuple

    def build(self, tensors: list) -> Any:
        out = []
        for it in self.items:
            if isinstance(it, tuple) and it and it[0] == "t":
                out.append(tensors[it[1]])
            elif isinstance(it, tuple) and it and it[0] == "s":
                out.append(slice(*it[1:]))
            elif it == "...":
                out.append(Ellipsis)
            else:
                out.append(it)
        return out[0] if len(out) == 1 else tuple(out)

    def __repr__(self) -> str:
        return f"Key{self.items!r}"


@dataclass(frozen=True)
class Case:
    op: str
    tensors: tuple
    pos: tuple = ()
    kw: tuple = ()                     # sorted (name, value) pairs
    second: tuple | None = None        # a second set of tensors, for recompiles
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __repr__(self) -> str:
        args = [repr(t) for t in self.tensors] + [repr(p) for p in self.pos] + \
            [f"{k}={v!r}" for k, v in self.kw]
        text = f"{self.op}({', '.join(args)})"
        if self.second is not None:
            text += f" then ({', '.join(repr(t) for t in self.second)})"
        return text


# --------------------------------------------------------------------------------------
# Building the same tensor in both libraries
# --------------------------------------------------------------------------------------

def values(spec: TSpec, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(spec.seed)
    n = int(np.prod(shape)) if shape else 1
    if spec.dtype == "bool":
        return rng.random(shape) < 0.5
    ints = spec.dtype in ("int64", "int32")
    if spec.fill == "zeros":
        a = np.zeros(shape)
    elif spec.fill == "small_int" or ints:
        a = rng.integers(-4, 5, size=shape).astype(np.float64)
    elif spec.fill == "special":
        pool = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e-30, 1.0, -2.5, 0.5])
        a = pool[rng.integers(0, len(pool), size=shape)] if n else np.zeros(shape)
    else:
        a = rng.standard_normal(shape)
    return np.asarray(a).reshape(shape)


def dtype_of(lib: Any, name: str) -> Any:
    return getattr(lib, name)


def make(lib: Any, spec: Any) -> tuple[Any, Any]:
    """`spec` in library `lib` (torch or llgrad) and the leaf that requires grad behind it
    (or None); a value that is not a TSpec passes through."""
    if not isinstance(spec, TSpec):
        return spec, None
    shape, layout = spec.shape, spec.layout
    nd = len(shape)
    if layout == "transposed" and nd >= 2:
        base_shape = tuple(reversed(shape))
    elif layout == "strided" and nd >= 1:
        base_shape = shape[:-1] + (2 * shape[-1],)
    elif layout == "offset" and nd >= 1:
        base_shape = (shape[0] + 1,) + shape[1:]
    elif layout in ("expanded", "numpy_overlap") and nd >= 1 and shape[0] > 1:
        base_shape = (1,) + shape[1:]
    else:
        layout, base_shape = "contiguous", shape
    a = values(spec, base_shape)
    dt = dtype_of(lib, spec.dtype)
    if layout == "numpy_overlap":
        np_dtype = {"float32": np.float32, "float64": np.float64, "int64": np.int64,
                    "int32": np.int32, "bool": np.bool_, "float16": np.float16,
                    "bfloat16": np.float32}[spec.dtype]
        src = np.ascontiguousarray(a, dtype=np_dtype)
        view = np.lib.stride_tricks.as_strided(src, shape, (0,) + src.strides[1:])
        t = lib.from_numpy(view)
        return (t.to(dt) if spec.dtype == "bfloat16" else t), None
    grad = spec.requires_grad and spec.dtype in FLOATS
    if spec.dtype in FLOATS:
        leaf = lib.tensor(a.astype(np.float32 if spec.dtype != "float64" else np.float64),
                          dtype=dt, requires_grad=grad)
    else:
        leaf = lib.tensor(a.astype({"int64": np.int64, "int32": np.int32, "bool": np.bool_}
                                   [spec.dtype]), dtype=dt)
    t = leaf
    if layout == "transposed":
        t = leaf.permute(tuple(reversed(range(nd))))
    elif layout == "strided":
        t = leaf[..., ::2]
    elif layout == "offset":
        t = leaf[1:]
    elif layout == "expanded":
        t = leaf.expand(shape)
    return t, (leaf if grad else None)


def resolve(lib: Any, value: Any) -> Any:
    if isinstance(value, DT):
        return dtype_of(lib, value.name)
    if isinstance(value, tuple) and value and isinstance(value[0], DT):
        return tuple(resolve(lib, v) for v in value)
    return value


# --------------------------------------------------------------------------------------
# Comparing outcomes
# --------------------------------------------------------------------------------------

def to_numpy(x: Any) -> Any:
    """A comparable form of a result: arrays (with a dtype name), tuples, plain values."""
    mod = type(x).__module__
    if mod.startswith("torch") and hasattr(x, "detach") and hasattr(x, "numpy"):
        d = str(x.dtype).split(".")[-1]
        x = x.detach()
        if d in ("bfloat16", "float16"):
            x = x.float()
        return ("array", d, x.numpy().copy())
    if mod.startswith("llgrad") and hasattr(x, "detach") and hasattr(x, "numpy"):
        d = str(x.dtype).split(".")[-1]
        x = x.detach()
        if d in ("bfloat16", "float16"):
            x = x.float()
        return ("array", d, np.array(x.numpy(), copy=True))
    if isinstance(x, (tuple, list)):
        return tuple(to_numpy(v) for v in x)
    if isinstance(x, (bool, int, float, np.generic)) or x is None:
        return x
    return ("other", type(x).__name__)


def _real(dtype: str) -> str:
    return {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)


def tolerance(dtype: str) -> tuple[float, float]:
    dtype = _real(dtype)
    return {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2),
            "float32": (2e-5, 1e-5)}.get(dtype, (1e-9, 1e-12))


def differ(want: Any, got: Any, values_matter: bool = True, path: str = "out",
           tol: str | None = None) -> str | None:
    """Why `got` (llgrad) is not `want` (torch), or None when they agree. `tol`: compare
    with this dtype's tolerance (a float64 gradient of a float32 computation)."""
    if isinstance(want, tuple) and want and want[0] == "array":
        if not (isinstance(got, tuple) and got and got[0] == "array"):
            return f"{path}: torch gives a tensor, llgrad {type(got).__name__}"
        _, dw, aw = want
        _, dg, ag = got
        if dw != dg:
            return f"{path}: dtype {dg} where torch gives {dw}"
        if aw.shape != ag.shape:
            return f"{path}: shape {list(ag.shape)} where torch gives {list(aw.shape)}"
        if not values_matter or aw.size == 0:
            return None
        if aw.dtype.kind in "fc":
            rtol, atol = tolerance(tol or dw)
            fin = np.isfinite(aw)
            if not np.array_equal(np.isnan(aw), np.isnan(ag)):
                return f"{path}: NaN where torch has none or the other way ({ag} vs {aw})"
            same_inf = np.array_equal(aw[np.isinf(aw)], ag[np.isinf(aw)])
            if not same_inf:
                return f"{path}: infinities differ ({ag} vs {aw})"
            a, g = aw[fin], ag[fin]
            if not np.all(np.abs(a - g) <= atol + rtol * np.abs(a)):
                if not _close_in_ulps(a, g, tol or dw):
                    return f"{path}: values differ: llgrad {ag} torch {aw}"
            return None
        if not np.array_equal(aw, ag):
            return f"{path}: values differ: llgrad {ag} torch {aw}"
        return None
    if isinstance(want, tuple) and want and want[0] == "other":
        return None if want == got else f"{path}: {got} vs torch {want}"
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return f"{path}: {len(want)} results from torch, llgrad gives {got!r:.80}"
        for i, (w, g) in enumerate(zip(want, got)):
            why = differ(w, g, values_matter, f"{path}[{i}]", tol)
            if why:
                return why
        return None
    if isinstance(want, float) and isinstance(got, (int, float, np.generic)):
        if math.isnan(want) and math.isnan(got):
            return None
        return None if math.isclose(want, got, rel_tol=1e-5, abs_tol=1e-6) else \
            f"{path}: {got} vs torch {want}"
    if want != got and not (isinstance(got, tuple) and tuple(want) == got
                            if isinstance(want, (list, tuple)) else False):
        return f"{path}: {got!r} vs torch {want!r}"
    return None


def _close_in_ulps(a: np.ndarray, g: np.ndarray, dtype: str) -> bool:
    """Accept results within a few units in the last place of the torch value: both
    libraries round transcendental functions differently near large magnitudes."""
    eps = {"float64": 2.2e-16, "float32": 1.2e-7, "float16": 9.8e-4,
           "bfloat16": 7.8e-3}[_real(dtype)]
    return bool(np.all(np.abs(a - g) <= 64 * eps * np.maximum(np.abs(a), np.abs(g))))
