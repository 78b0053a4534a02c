"""`llgrad.fft`: PyTorch's `torch.fft` (discrete Fourier transforms with gradients).

Every transform is one of three primitives, each computed on the host by SciPy's
pocketfft (`scipy.fft`, the library PyTorch's CPU build uses too), in the input's
precision (complex64 stays complex64):

- C2C (`FftC2CBackward0`): complex to complex over some dims, forward or inverse sign;
- R2C (`FftR2CBackward0`): real to complex, the one-sided half along the last dim
  (`rfft`, `ihfft`) or the full spectrum (`fft`/`ifft` of a real input);
- C2R (`FftC2RBackward0`): a one-sided Hermitian half to a real signal (`irfft`, `hfft`).

`n`/`s` pad (with zeros) or trim the input first, with llgrad's `pad`/slice ops, so
their gradients are those ops' rules. The primitives' gradients are written with the
primitives themselves (the adjoint of a DFT is the DFT of the other sign with the dual
normalization; R2C's adjoint pads the gradient to the full length and takes the real part
of the inverse C2C; C2R's adjoint is R2C with the bins that stand for two conjugate bins
doubled), so second and higher derivatives, forward mode (each primitive is linear: a
tangent takes the same transform) and `vmap` work.

dtypes are PyTorch's: real inputs give complex64/complex128 (integers and bool are taken
as the default float dtype first); float16 and bfloat16 raise `Unsupported dtype` as
PyTorch's CPU transforms do.

Inside `lg.compile` a transform is a graph break: the function is split there and the
transform runs eagerly (its line is recorded in `cf.graph_breaks`; `fullgraph=True`
raises). `fftfreq`, `rfftfreq`, `fftshift` and `ifftshift` are made of creation and
shape ops and compile into the graph.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..tape import forward as forward_ad
from ..dispatch.apply import composite_function, interpreters, needs_grad
from ..dispatch.grad_mode import _state as _grad_state
from ..tape.node import Node, edge, node_class
from ..ir import dtypes as dt
from ..ir.types import normalize_axis
from ..runtime.storage import Storage, _address
from ..tensor import Tensor
from ..functions._errors import serve_on_devices
from ..functions.creation import arange, tensor
from ..functions.elementwise import mul, real, sub, where
from ..functions.shape import cat, pad_dims, slice_dim
from ..functions.statistics import write_out
from ..tracer.context import user_location
from ..tracer.tensor import GraphBreak, tracing
from ..transforms.batching import levels, lift, unlift

__all__ = [
    "fft",
    "ifft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "hfft2",
    "ihfft2",
    "hfftn",
    "ihfftn",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]

_NORMS = ("backward", "forward", "ortho")
_TORCH_NAMES = {
    "float16": "Half",
    "bfloat16": "BFloat16",
    "float32": "Float",
    "float64": "Double",
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
}


def _torch_name(d: dt.DType) -> str:
    return _TORCH_NAMES.get(d.name, d.name)


# --------------------------------------------------------------------------------------
# The three host primitives and their nodes
# --------------------------------------------------------------------------------------


class _FftNode(Node):
    """The backward of one transform: `rule(grad)`, written with llgrad functions."""

    __slots__ = ("rule", "meta_in")

    def __init__(self, x: Tensor, rule: Callable[[Tensor], Tensor]):
        super().__init__((edge(x),))
        self.rule = rule
        self.meta_in = (x._shape, x._dtype)

    def apply(self, grads: list[Tensor | None]) -> tuple[Tensor | None, ...]:
        g = grads[0]
        if g is None:
            return (None,)
        return (self.rule(g),)


def _dual(norm: str) -> str:
    """The normalization of a transform's adjoint (the scale stays, the sign flips)."""
    return {"backward": "forward", "forward": "backward"}.get(norm, norm)


def _host(
    name: str,
    x: Tensor,
    dims: tuple[int, ...],
    compute: Callable[..., np.ndarray],
    rule: Callable[[Tensor], Tensor],
    again: Callable[[Tensor], Tensor],
) -> Tensor:
    """Run `compute(array, axes)` on `x`'s values; record `rule` as the backward and
    `again` (the same linear map) for forward-mode tangents. Batched (vmap) inputs are
    transformed with their batch dimensions leading."""
    if tracing() or getattr(x, "_ctx", None) is not None:
        kind = {
            "FftC2CBackward0": "complex-to-complex",
            "FftR2CBackward0": "real-to-complex",
            "FftC2RBackward0": "complex-to-real",
        }[name]
        raise GraphBreak(
            f"an lg.fft {kind} transform (it runs on the host: pocketfft)", user_location()
        )
    lv = levels(x)
    if lv:
        plain = lift(x, lv)
        k = len(lv)
        return unlift(_host(name, plain, tuple(d + k for d in dims), compute, rule, again), lv)
    arr = x.detach()._values()
    res = compute(arr, dims)
    out = Tensor._from_numpy(np.require(res, requirements="C"))
    if needs_grad([x]):
        out._requires_grad = True
        out.grad_fn = node_class(name, _FftNode)(x, rule)
    if forward_ad._level[0]:
        tangent = forward_ad.tangent_of(x)
        if tangent is not None:
            forward_ad.set_tangent(out, again(tangent))
    return out


def _c2c(x: Tensor, dims: tuple[int, ...], forward: bool, norm: str) -> Tensor:
    """Complex-to-complex DFT of `x` over `dims` (forward: exp(-i...), else exp(+i...))."""
    import scipy.fft as sf

    def compute(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if not axes:
            return a.copy()
        return (sf.fftn if forward else sf.ifftn)(a, axes=axes, norm=norm)

    def rule(g: Tensor) -> Tensor:
        return _c2c(
            g.to(x._dtype) if not g._dtype.is_complex else g, dims, not forward, _dual(norm)
        )

    return _host("FftC2CBackward0", x, dims, compute, rule, lambda t: _c2c(t, dims, forward, norm))


def _r2c(x: Tensor, dims: tuple[int, ...], forward: bool, norm: str, onesided: bool) -> Tensor:
    """Real-to-complex DFT of `x` over `dims`; `onesided`: only the first n//2+1 bins of
    the last dim (the others are their conjugates)."""
    import scipy.fft as sf

    full = x._shape[dims[-1]] if dims else 0

    def compute(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if onesided:
            return (sf.rfftn if forward else sf.ihfftn)(a, axes=axes, norm=norm)
        return (sf.fftn if forward else sf.ifftn)(a, axes=axes, norm=norm)

    def rule(g: Tensor) -> Tensor:
        if not g._dtype.is_complex:
            g = g.to(x._dtype.to_complex())
        if onesided:
            last = dims[-1]
            highs = [0] * g.ndim
            highs[last] = full - g._shape[last]
            if highs[last]:
                g = pad_dims(g, [0] * g.ndim, highs)
        return real(_c2c(g, dims, not forward, _dual(norm)))

    return _host(
        "FftR2CBackward0", x, dims, compute, rule, lambda t: _r2c(t, dims, forward, norm, onesided)
    )


def _c2r(x: Tensor, dims: tuple[int, ...], n_last: int, forward: bool, norm: str) -> Tensor:
    """One-sided Hermitian half (last dim of size n_last//2+1) to a real signal of n_last
    along the last dim (complex-to-complex over the other dims first)."""
    import scipy.fft as sf

    sizes = [x._shape[d] for d in dims[:-1]] + [n_last]

    def compute(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return (sf.hfftn if forward else sf.irfftn)(a, s=sizes, axes=axes, norm=norm)

    def rule(g: Tensor) -> Tensor:
        gi = _r2c(g, dims, not forward, _dual(norm), True)
        half = gi._shape[dims[-1]]
        double = n_last - half  # bins 1..double stand for two conjugate bins
        if double > 0:
            w = np.ones(half, dtype=x._dtype.to_real().np)
            w[1 : 1 + double] = 2
            shape = [1] * gi.ndim
            shape[dims[-1]] = half
            gi = mul(gi, tensor(w).reshape(shape))
        return gi

    return _host(
        "FftC2RBackward0", x, dims, compute, rule, lambda t: _c2r(t, dims, n_last, forward, norm)
    )


# --------------------------------------------------------------------------------------
# Argument handling shared by the public functions
# --------------------------------------------------------------------------------------


def _norm_arg(op: str, norm: Any) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(
            f"{op}: Invalid normalization mode: {norm!r} (expected one of "
            f"'backward', 'forward', 'ortho' or None)"
        )
    return norm


def _check_input(op: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if x._dtype in (dt.float16, dt.bfloat16):
        raise RuntimeError(
            f"{op}: Unsupported dtype {_torch_name(x._dtype)} (llgrad's and "
            f"PyTorch's CPU transforms need float32/float64 or complex)"
        )
    return x


def _floating(x: Tensor) -> Tensor:
    """Integers and bool as the default float dtype (PyTorch's promotion for transforms)."""
    if x._dtype.is_floating_point or x._dtype.is_complex:
        return x
    return x.to(dt.get_default_dtype())


def _as_complex(x: Tensor) -> Tensor:
    x = _floating(x)
    return x if x._dtype.is_complex else x.to(x._dtype.to_complex())


def _as_real(op: str, x: Tensor) -> Tensor:
    if x._dtype.is_complex:
        raise RuntimeError(f"{op} expects a real input tensor, but got {_torch_name(x._dtype)}")
    return _floating(x)


def _check_n(op: str, n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"{op}: n must be an int, got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")
    return n


def _one_dim(op: str, x: Tensor, dim: int) -> int:
    if x.ndim == 0:
        raise IndexError(f"{op}: Dimension specified as {dim} but tensor has no dimensions")
    return normalize_axis(dim, x.ndim, op)


def _dims_and_sizes(
    op: str, x: Tensor, s: Any, dim: Any, default: Sequence[int] | None
) -> tuple[tuple[int, ...], list[int | None]]:
    """The transformed dims and their requested sizes (None: keep) as torch.fft.fftn
    reads `s` and `dim`: with `dim` None, the last len(s) dims (or `default`, or all)."""
    if s is not None and not isinstance(s, (list, tuple)):
        s = (s,) if isinstance(s, int) else tuple(s)
    if dim is not None and isinstance(dim, int):
        dim = (dim,)
    if dim is None and s is None and default is not None:
        dim = tuple(default)
    if dim is None:
        if s is not None:
            if len(s) > x.ndim:
                raise RuntimeError(
                    f"{op}: Got shape with {len(s)} values but input tensor "
                    f"only has {x.ndim} dimensions."
                )
            dims = tuple(range(x.ndim - len(s), x.ndim))
        else:
            dims = tuple(range(x.ndim))
    else:
        if x.ndim == 0 and len(dim):
            raise IndexError(f"{op}: Dimension specified as {dim[0]} but tensor has no dimensions")
        dims = tuple(normalize_axis(d, x.ndim, op) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{op}: FFT dims must be unique (got {list(dim)})")
        if s is not None and len(s) != len(dims):
            raise RuntimeError(
                f"{op}: When given, dim and shape arguments must have the "
                f"same length (s {list(s)}, dim {list(dim)})"
            )
    sizes: list[int | None] = [None] * len(dims)
    if s is not None:
        for i, n in enumerate(s):
            if n != -1:
                sizes[i] = _check_n(op, n)
    for i, d in enumerate(dims):
        if sizes[i] is None and x._shape[d] == 0:
            raise RuntimeError(f"{op}: Invalid number of data points (0) specified")
    return dims, sizes


def _resize(x: Tensor, dims: Sequence[int], sizes: Sequence[int | None]) -> Tensor:
    """Zero-pad or trim `x` along `dims` to `sizes` (None: unchanged)."""
    highs = [0] * x.ndim
    for d, n in zip(dims, sizes):
        if n is None or n == x._shape[d]:
            continue
        if n < x._shape[d]:
            x = slice_dim(x, d, 0, n)
        else:
            highs[d] = n - x._shape[d]
    if any(highs):
        x = pad_dims(x, [0] * x.ndim, highs)
    return x


def _finish(op: str, result: Tensor, out: Any) -> Tensor:
    if out is None:
        return result

    if out is not None and isinstance(out, Tensor):
        if result._dtype.is_complex and not out._dtype.is_complex:
            raise RuntimeError(
                f"{op} expects a complex output tensor, but got {_torch_name(out._dtype)}"
            )
        if not result._dtype.is_complex and out._dtype.category < 2:
            raise RuntimeError(
                f"{op} expects a floating point output tensor, but got {_torch_name(out._dtype)}"
            )
    return write_out(op, out, result)


# --------------------------------------------------------------------------------------
# The direct path: a plain call (no autograd record, no transform, no out=) runs a cached
# plan straight on pocketfft
# --------------------------------------------------------------------------------------
#
# The general path above checks the arguments, resizes and casts with llgrad ops, reads
# the values through NumPy, calls `scipy.fft`'s Python layer and wraps the result: ~100-200
# us on a small signal, of which pocketfft takes a few. A call that autograd does not
# record (grad mode off or no input requiring grad), with no interpreter (vmap, tracing)
# and no forward-mode level, no `out=`, a plain float32/float64/complex64/complex128
# input, int (or None) `n`/`s`/`dim` and a str (or None) `norm` looks up a plan by (op,
# the input's layout key, n/s, dim, norm). A plan is made the first time such a call's
# arguments pass the general path's own checks (an argument they reject never gets a
# plan, so the general path raises): it holds the transform's dims, the zero-pad/trim and real-to-complex cast the
# general path would do (done here with NumPy on the host: the same values), and the
# pypocketfft routine with the arguments `scipy.fft` would pass it, so the result is the
# same bits as the general path's. The output wraps pocketfft's fresh array.

_plans: dict[tuple, tuple] = {}
_PLAN_DTYPES = frozenset({"float32", "float64", "complex64", "complex128"})
_pocket: Any = None  # scipy's pypocketfft extension (None: not loaded / missing)
_pocket_config: Any = None  # scipy.fft's thread-local config (its default `workers`)
_INORM = {"backward": 0, "ortho": 1, "forward": 2}


def _load_pocket() -> bool:
    """Load the pypocketfft extension `scipy.fft` calls (False where it is missing)."""
    global _pocket, _pocket_config
    if _pocket is None:
        try:
            from scipy.fft._pocketfft import helper, pypocketfft
        except ImportError:
            return False
        _pocket_config = helper._config
        _pocket = pypocketfft
    return True


def _hashable_ints(v: Any) -> Any:
    """`v` (None, an int, or a tuple/list of ints) as part of a plan key, else raise
    KeyError (floats and bools must not match an int's key: the general path rejects
    them)."""
    if v is None or v.__class__ is int:
        return v
    if v.__class__ is tuple or v.__class__ is list:
        for e in v:
            if e.__class__ is not int:
                raise KeyError(v)
        return tuple(v)
    raise KeyError(v)


def _direct(op: str, x: Any, s: Any, dim: Any, norm: Any, out: Any) -> Tensor | None:
    """The direct path of public transform `op`: its plan's result (the plan is made
    here the first time a call's arguments pass the general path's checks), or None when
    the call must take the general path."""
    if (
        out is not None
        or x.__class__ is not Tensor
        or interpreters
        or forward_ad._level[0]
        or (x._requires_grad and _grad_state.enabled)
        or (norm is not None and norm.__class__ is not str)
    ):
        return None
    try:
        key = (op, x._lkey, _hashable_ints(s), _hashable_ints(dim), norm)
    except KeyError:
        return None
    plan = _plans.get(key)
    if plan is None:
        if len(_plans) >= 1024 or not _load_pocket():
            return None
        plan = _make_plan(op, x, s, dim, norm)
        if plan is None:
            return None
        _plans[key] = plan
    return _run_plan(plan, x)


def _run_plan(plan: tuple, x: Tensor) -> Tensor:
    """Run a plan on `x` (its layout is the plan's): view, resize/cast, transform, wrap."""
    npd, bstrides, resize, kind, args, out_layout = plan
    a = np.ndarray(x._shape, npd, x._storage.buffer, x._offset * npd.itemsize, bstrides)
    if resize is not None:
        shape, rdtype, src = resize
        b = np.zeros(shape, rdtype)
        b[src] = a[src]
        a = b
    workers = getattr(_pocket_config, "default_workers", 1)
    if kind == 0:
        r = _pocket.c2c(a, args[0], args[1], args[2], None, workers)
    elif kind == 1:
        r = _pocket.r2c(a, args[0], args[1], args[2], None, workers)
    else:
        r = _pocket.c2r(a, args[0], args[1], args[2], args[3], None, workers)
    if not r.flags.c_contiguous:  # (pocketfft's results are; kept general)
        r = np.ascontiguousarray(r)
    return Tensor._make(Storage(r.reshape(-1).view(np.uint8), _address(r)), 0, *out_layout)


# public op -> (family, forward sign, default dims, one-dimensional signature)
_OPS: dict[str, tuple[str, bool, tuple[int, ...] | None, bool]] = {
    "fft": ("c1", True, None, True),
    "ifft": ("c1", False, None, True),
    "fftn": ("cn", True, None, False),
    "ifftn": ("cn", False, None, False),
    "fft2": ("cn", True, (-2, -1), False),
    "ifft2": ("cn", False, (-2, -1), False),
    "rfft": ("r2c", True, None, True),
    "ihfft": ("r2c", False, None, True),
    "rfftn": ("r2c", True, None, False),
    "ihfftn": ("r2c", False, None, False),
    "rfft2": ("r2c", True, (-2, -1), False),
    "ihfft2": ("r2c", False, (-2, -1), False),
    "irfft": ("c2r", False, None, True),
    "hfft": ("c2r", True, None, True),
    "irfftn": ("c2r", False, None, False),
    "hfftn": ("c2r", True, None, False),
    "irfft2": ("c2r", False, (-2, -1), False),
    "hfft2": ("c2r", True, (-2, -1), False),
}


def _make_plan(op: str, x: Tensor, s: Any, dim: Any, norm: Any) -> tuple | None:
    """The plan of a call, or None when the general path must run it (it then raises
    whatever the arguments are wrong about). Mirrors `_fft1`, `_fftn`, `_r2c_public`
    and `_c2r_public` and what `scipy.fft` passes pocketfft."""
    family, forward, default, one = _OPS[op]
    if x._dtype.name not in _PLAN_DTYPES or 0 in x._shape:
        return None
    try:
        mode = _norm_arg(op, norm)
        if one:
            d = _one_dim(op, x, dim)
            dims: tuple[int, ...] = (d,)
            sizes: list[int | None] = [_check_n(op, s) if s is not None else None]
        else:
            dims, sizes = _dims_and_sizes(op, x, s, dim, default)
    except Exception:  # noqa: BLE001 - the general path raises it
        return None
    if not dims:
        return None
    complex_in = x._dtype.is_complex
    real_np = x._dtype.to_real().np
    complex_np = x._dtype.to_complex().np if not complex_in else x._dtype.np
    shape = list(x._shape)
    work_np = x._dtype.np
    if family == "c2r":
        last = dims[-1]
        n_last = sizes[-1] if sizes[-1] is not None else 2 * (shape[last] - 1)
        if n_last < 1:
            return None
        sizes = list(sizes[:-1]) + [n_last // 2 + 1]
        work_np = complex_np
    elif family == "cn":
        work_np = complex_np
    elif family == "r2c":
        if complex_in:
            return None
    for d, n in zip(dims, sizes):
        if n is not None:
            shape[d] = n
    if 0 in shape:
        return None
    # the fresh array the general path's pad/trim/cast would give (None: the input as is)
    resize = None
    if tuple(shape) != x._shape or np.dtype(work_np) != np.dtype(x._dtype.np):
        src = tuple(slice(0, min(a, b)) for a, b in zip(x._shape, shape))
        resize = (tuple(shape), np.dtype(work_np), src)
    inorm = _INORM[mode] if forward else 2 - _INORM[mode]
    if family in ("c1", "cn"):
        kind, args, out_np = 0, (dims, forward, inorm), complex_np
    elif family == "r2c":
        kind, args, out_np = 1, (dims, forward, inorm), complex_np
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    else:
        kind, args, out_np = 2, (dims, n_last, forward, inorm), real_np
        shape[dims[-1]] = n_last
    out_shape = tuple(shape)
    out_dtype = dt.from_numpy(np.dtype(out_np))
    strides, step = [], 1
    for n in reversed(out_shape):
        strides.append(step)
        step *= n
    item = x._dtype.itemsize
    return (
        np.dtype(x._dtype.np),
        tuple(v * item for v in x._strides),
        resize,
        kind,
        args,
        (out_shape, tuple(reversed(strides)), out_dtype),
    )


# --------------------------------------------------------------------------------------
# Complex-to-complex transforms (and real inputs to the full spectrum)
# --------------------------------------------------------------------------------------


def _fft1(
    op: str, input: Tensor, n: int | None, dim: int, norm: str | None, forward: bool, out: Any
) -> Tensor:
    x = _floating(_check_input(op, input))
    mode = _norm_arg(op, norm)
    d = _one_dim(op, x, dim)
    size = _check_n(op, n) if n is not None else None
    if size is None and x._shape[d] == 0:
        raise RuntimeError(f"{op}: Invalid number of data points (0) specified")
    x = _resize(x, (d,), (size,))
    if x._dtype.is_complex:
        y = _c2c(x, (d,), forward, mode)
    else:
        y = _r2c(x, (d,), forward, mode, onesided=False)
    return _finish(op, y, out)


def _fftn(
    op: str,
    input: Tensor,
    s: Any,
    dim: Any,
    norm: str | None,
    forward: bool,
    default: Sequence[int] | None,
    out: Any,
) -> Tensor:
    x = _check_input(op, input)
    mode = _norm_arg(op, norm)
    dims, sizes = _dims_and_sizes(op, x, s, dim, default)
    x = _resize(_as_complex(x), dims, sizes)
    return _finish(op, _c2c(x, dims, forward, mode), out)


def fft(
    input: Tensor,
    n: int | None = None,
    dim: int = -1,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """One-dimensional discrete Fourier transform of `input` along `dim`.

    Args: `n` pads (zeros) or trims the signal to that length first; `norm` is
    "backward" (no scaling, the default), "forward" (1/n) or "ortho" (1/sqrt(n));
    `out` receives the result. Real inputs give the full complex spectrum.
    """
    y = _direct("fft", input, n, dim, norm, out)
    if y is not None:
        return y
    return _fft1("fft", input, n, dim, norm, True, out)


def ifft(
    input: Tensor,
    n: int | None = None,
    dim: int = -1,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """One-dimensional inverse DFT along `dim` (`norm="backward"` scales by 1/n).

    Args as `fft`.
    """
    y = _direct("ifft", input, n, dim, norm, out)
    if y is not None:
        return y
    return _fft1("ifft", input, n, dim, norm, False, out)


def fftn(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = None,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """N-dimensional DFT over `dim` (default: all dims, or the last len(s)).

    Args: `s` the signal size per transformed dim (-1 keeps a dim's size); `norm` as
    `fft` (over the product of the sizes); `out` receives the result.
    """
    y = _direct("fftn", input, s, dim, norm, out)
    if y is not None:
        return y
    return _fftn("fftn", input, s, dim, norm, True, None, out)


def ifftn(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = None,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """N-dimensional inverse DFT over `dim`; args as `fftn`."""
    y = _direct("ifftn", input, s, dim, norm, out)
    if y is not None:
        return y
    return _fftn("ifftn", input, s, dim, norm, False, None, out)


def fft2(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = (-2, -1),
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """Two-dimensional DFT over `dim` (default the last two); args as `fftn`."""
    y = _direct("fft2", input, s, dim, norm, out)
    if y is not None:
        return y
    return _fftn("fft2", input, s, dim, norm, True, (-2, -1), out)


def ifft2(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = (-2, -1),
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """Two-dimensional inverse DFT over `dim` (default the last two); args as `fftn`."""
    y = _direct("ifft2", input, s, dim, norm, out)
    if y is not None:
        return y
    return _fftn("ifft2", input, s, dim, norm, False, (-2, -1), out)


# --------------------------------------------------------------------------------------
# Real-to-complex (one-sided) and complex-to-real transforms
# --------------------------------------------------------------------------------------


def _r2c_public(
    op: str,
    input: Tensor,
    s: Any,
    dim: Any,
    norm: str | None,
    forward: bool,
    default: Sequence[int] | None,
    out: Any,
    one: bool = False,
) -> Tensor:
    x = _as_real(op, _check_input(op, input))
    mode = _norm_arg(op, norm)
    if one:
        d = _one_dim(op, x, dim)
        dims: tuple[int, ...] = (d,)
        sizes: list[int | None] = [_check_n(op, s) if s is not None else None]
        if sizes[0] is None and x._shape[d] == 0:
            raise RuntimeError(f"{op}: Invalid number of data points (0) specified")
    else:
        dims, sizes = _dims_and_sizes(op, x, s, dim, default)
        if not dims:
            raise RuntimeError(f"{op} must transform at least one axis")
    x = _resize(x, dims, sizes)
    return _finish(op, _r2c(x, dims, forward, mode, onesided=True), out)


def _c2r_public(
    op: str,
    input: Tensor,
    s: Any,
    dim: Any,
    norm: str | None,
    forward: bool,
    default: Sequence[int] | None,
    out: Any,
    one: bool = False,
) -> Tensor:
    x = _as_complex(_check_input(op, input))
    mode = _norm_arg(op, norm)
    if one:
        d = _one_dim(op, x, dim)
        dims: tuple[int, ...] = (d,)
        sizes: list[int | None] = [_check_n(op, s) if s is not None else None]
    else:
        dims, sizes = _dims_and_sizes(op, x, s, dim, default)
        if not dims:
            raise RuntimeError(f"{op} must transform at least one axis")
    last = dims[-1]
    n_last = sizes[-1] if sizes[-1] is not None else 2 * (x._shape[last] - 1)
    if n_last < 1:
        raise RuntimeError(f"{op}: Invalid number of data points ({n_last}) specified")
    x = _resize(x, dims, list(sizes[:-1]) + [n_last // 2 + 1])
    return _finish(op, _c2r(x, dims, n_last, forward, mode), out)


def rfft(
    input: Tensor,
    n: int | None = None,
    dim: int = -1,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """DFT of a real signal along `dim`: the n//2+1 non-negative frequency bins.

    Args as `fft`; a complex input raises.
    """
    y = _direct("rfft", input, n, dim, norm, out)
    if y is not None:
        return y
    return _r2c_public("rfft", input, n, dim, norm, True, None, out, one=True)


def irfft(
    input: Tensor,
    n: int | None = None,
    dim: int = -1,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """Inverse of `rfft`: a real signal of length `n` (default 2*(m-1)) from m bins.

    Args as `fft`; the imaginary parts of the zero (and Nyquist) bins are ignored.
    """
    y = _direct("irfft", input, n, dim, norm, out)
    if y is not None:
        return y
    return _c2r_public("irfft", input, n, dim, norm, False, None, out, one=True)


def rfftn(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = None,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """N-dimensional DFT of a real input, one-sided along the last transformed dim."""
    y = _direct("rfftn", input, s, dim, norm, out)
    if y is not None:
        return y
    return _r2c_public("rfftn", input, s, dim, norm, True, None, out)


def irfftn(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = None,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """Inverse of `rfftn`; `s[-1]` is the real output length of the last dim (default
    2*(m-1))."""
    y = _direct("irfftn", input, s, dim, norm, out)
    if y is not None:
        return y
    return _c2r_public("irfftn", input, s, dim, norm, False, None, out)


def rfft2(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = (-2, -1),
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """`rfftn` over two dims (default the last two)."""
    y = _direct("rfft2", input, s, dim, norm, out)
    if y is not None:
        return y
    return _r2c_public("rfft2", input, s, dim, norm, True, (-2, -1), out)


def irfft2(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = (-2, -1),
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """`irfftn` over two dims (default the last two)."""
    y = _direct("irfft2", input, s, dim, norm, out)
    if y is not None:
        return y
    return _c2r_public("irfft2", input, s, dim, norm, False, (-2, -1), out)


def hfft(
    input: Tensor,
    n: int | None = None,
    dim: int = -1,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """DFT of a Hermitian-symmetric signal given by its one-sided half: a real result of
    length `n` (default 2*(m-1)). Args as `fft`."""
    y = _direct("hfft", input, n, dim, norm, out)
    if y is not None:
        return y
    return _c2r_public("hfft", input, n, dim, norm, True, None, out, one=True)


def ihfft(
    input: Tensor,
    n: int | None = None,
    dim: int = -1,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """Inverse of `hfft`: the one-sided inverse DFT of a real signal. Args as `fft`."""
    y = _direct("ihfft", input, n, dim, norm, out)
    if y is not None:
        return y
    return _r2c_public("ihfft", input, n, dim, norm, False, None, out, one=True)


def hfftn(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = None,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """N-dimensional `hfft` (one-sided along the last transformed dim)."""
    y = _direct("hfftn", input, s, dim, norm, out)
    if y is not None:
        return y
    return _c2r_public("hfftn", input, s, dim, norm, True, None, out)


def ihfftn(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = None,
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """N-dimensional `ihfft` (one-sided along the last transformed dim)."""
    y = _direct("ihfftn", input, s, dim, norm, out)
    if y is not None:
        return y
    return _r2c_public("ihfftn", input, s, dim, norm, False, None, out)


def hfft2(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = (-2, -1),
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """`hfftn` over two dims (default the last two)."""
    y = _direct("hfft2", input, s, dim, norm, out)
    if y is not None:
        return y
    return _c2r_public("hfft2", input, s, dim, norm, True, (-2, -1), out)


def ihfft2(
    input: Tensor,
    s: Sequence[int] | None = None,
    dim: Any = (-2, -1),
    norm: str | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """`ihfftn` over two dims (default the last two)."""
    y = _direct("ihfft2", input, s, dim, norm, out)
    if y is not None:
        return y
    return _r2c_public("ihfft2", input, s, dim, norm, False, (-2, -1), out)


# --------------------------------------------------------------------------------------
# Frequencies and shifts (creation and shape ops: they compile)
# --------------------------------------------------------------------------------------


def _freq_dtype(op: str, dtype: dt.DType | None) -> dt.DType:
    d = dtype if dtype is not None else dt.get_default_dtype()
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError(f"{op}: expected a floating point or complex dtype, got {d.name}")
    return d


def _reciprocal(v: float) -> float:
    """1/v with IEEE division by zero (PyTorch's `rfftfreq(0)` is [nan]: 0 * inf)."""
    return 1.0 / v if v != 0 else float("inf")


def fftfreq(
    n: int,
    d: float = 1.0,
    *,
    out: Tensor | None = None,
    dtype: dt.DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The sample frequencies of an `fft` of length `n` with sample spacing `d`:
    `[0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d*n)`.

    Args: `dtype` (default: the default float dtype), `requires_grad`, `out`.
    """
    n = _check_n("fftfreq", n) if n != 0 else 0
    kind = _freq_dtype("fftfreq", dtype)
    i = arange(n, dtype=kind)
    if n:
        i = where(i < (n + 1) // 2, i, sub(i, n))
    res = mul(i, _reciprocal(n * d)).detach()
    if requires_grad:
        res.requires_grad_(True)
    return _finish("fftfreq", res, out)


def rfftfreq(
    n: int,
    d: float = 1.0,
    *,
    out: Tensor | None = None,
    dtype: dt.DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The n//2+1 non-negative sample frequencies of an `rfft` of length `n`:
    `[0, 1, ..., n//2] / (d*n)`. Args as `fftfreq`."""
    n = _check_n("rfftfreq", n) if n != 0 else 0
    kind = _freq_dtype("rfftfreq", dtype)
    i = arange(n // 2 + 1, dtype=kind)
    res = mul(i, _reciprocal(n * d)).detach()
    if requires_grad:
        res.requires_grad_(True)
    return _finish("rfftfreq", res, out)


def _roll(x: Tensor, dims: Sequence[int], shifts: Sequence[int]) -> Tensor:
    """`x` rolled by `shifts` along `dims` (a cat of two slices per dim)."""
    for d, k in zip(dims, shifts):
        n = x._shape[d]
        if n == 0:
            continue
        k %= n
        if k:
            x = cat([slice_dim(x, d, n - k, n), slice_dim(x, d, 0, n - k)], d)
    return x


def _shift(op: str, input: Tensor, dim: Any, inverse: bool) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if dim is None:
        dims = tuple(range(input.ndim))
    else:
        raw = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(normalize_axis(d, input.ndim, op) for d in raw)
    shifts = [((input._shape[d] + 1) // 2 if inverse else input._shape[d] // 2) for d in dims]
    out = _roll(input, dims, shifts)
    return out if out is not input else input.clone()


@composite_function
def fftshift(input: Tensor, dim: Any = None) -> Tensor:
    """Move the zero-frequency bin to the center: roll each of `dim` (default all) by n//2."""
    return _shift("fftshift", input, dim, False)


@composite_function
def ifftshift(input: Tensor, dim: Any = None) -> Tensor:
    """The inverse of `fftshift`: roll each of `dim` (default all) by (n+1)//2."""
    return _shift("ifftshift", input, dim, True)


def _served_on_devices() -> None:
    """Every public function here also serves CUDA tensors where its eager code cannot."""
    serve_on_devices(globals())


_served_on_devices()
