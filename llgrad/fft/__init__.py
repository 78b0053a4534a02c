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

from ..autograd import forward_ad
from ..autograd.apply import composite_function, needs_grad
from ..autograd.node import Node, edge, node_class
from ..ir import dtypes as dt
from ..ir.types import normalize_axis
from ..tensor import Tensor

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
           "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn",
           "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "forward", "ortho")
_TORCH_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                "float64": "Double", "complex64": "ComplexFloat",
                "complex128": "ComplexDouble"}


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


def _host(name: str, x: Tensor, dims: tuple[int, ...], compute: Callable[..., np.ndarray],
          rule: Callable[[Tensor], Tensor], again: Callable[[Tensor], Tensor]) -> Tensor:
    """Run `compute(array, axes)` on `x`'s values; record `rule` as the backward and
    `again` (the same linear map) for forward-mode tangents. Batched (vmap) inputs are
    transformed with their batch dimensions leading."""
    from ..tracer.context import user_location
    from ..tracer.tensor import GraphBreak, tracing
    from ..transforms.batching import levels, lift, unlift
    if tracing() or getattr(x, "_ctx", None) is not None:
        kind = {"FftC2CBackward0": "complex-to-complex", "FftR2CBackward0": "real-to-complex",
                "FftC2RBackward0": "complex-to-real"}[name]
        raise GraphBreak(f"an lg.fft {kind} transform (it runs on the host: pocketfft)",
                         user_location())
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
        return _c2c(g.to(x._dtype) if not g._dtype.is_complex else g, dims, not forward,
                    _dual(norm))
    return _host("FftC2CBackward0", x, dims, compute, rule,
                 lambda t: _c2c(t, dims, forward, norm))


def _r2c(x: Tensor, dims: tuple[int, ...], forward: bool, norm: str, onesided: bool
         ) -> Tensor:
    """Real-to-complex DFT of `x` over `dims`; `onesided`: only the first n//2+1 bins of
    the last dim (the others are their conjugates)."""
    import scipy.fft as sf
    full = x._shape[dims[-1]] if dims else 0

    def compute(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if onesided:
            return (sf.rfftn if forward else sf.ihfftn)(a, axes=axes, norm=norm)
        return (sf.fftn if forward else sf.ifftn)(a, axes=axes, norm=norm)

    def rule(g: Tensor) -> Tensor:
        from ..functions.elementwise import real
        from ..functions.shape import pad_dims
        if not g._dtype.is_complex:
            g = g.to(x._dtype.to_complex())
        if onesided:
            last = dims[-1]
            highs = [0] * g.ndim
            highs[last] = full - g._shape[last]
            if highs[last]:
                g = pad_dims(g, [0] * g.ndim, highs)
        return real(_c2c(g, dims, not forward, _dual(norm)))
    return _host("FftR2CBackward0", x, dims, compute, rule,
                 lambda t: _r2c(t, dims, forward, norm, onesided))


def _c2r(x: Tensor, dims: tuple[int, ...], n_last: int, forward: bool, norm: str) -> Tensor:
    """One-sided Hermitian half (last dim of size n_last//2+1) to a real signal of n_last
    along the last dim (complex-to-complex over the other dims first)."""
    import scipy.fft as sf
    sizes = [x._shape[d] for d in dims[:-1]] + [n_last]

    def compute(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return (sf.hfftn if forward else sf.irfftn)(a, s=sizes, axes=axes, norm=norm)

    def rule(g: Tensor) -> Tensor:
        from ..functions.creation import tensor
        from ..functions.elementwise import mul
        gi = _r2c(g, dims, not forward, _dual(norm), True)
        half = gi._shape[dims[-1]]
        double = n_last - half           # bins 1..double stand for two conjugate bins
        if double > 0:
            w = np.ones(half, dtype=x._dtype.to_real().np)
            w[1:1 + double] = 2
            shape = [1] * gi.ndim
            shape[dims[-1]] = half
            gi = mul(gi, tensor(w).reshape(shape))
        return gi
    return _host("FftC2RBackward0", x, dims, compute, rule,
                 lambda t: _c2r(t, dims, n_last, forward, norm))


# --------------------------------------------------------------------------------------
# Argument handling shared by the public functions
# --------------------------------------------------------------------------------------

def _norm_arg(op: str, norm: Any) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"{op}: Invalid normalization mode: {norm!r} (expected one of "
                         f"'backward', 'forward', 'ortho' or None)")
    return norm


def _check_input(op: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if x._dtype in (dt.float16, dt.bfloat16):
        raise RuntimeError(f"{op}: Unsupported dtype {_torch_name(x._dtype)} (llgrad's and "
                           f"PyTorch's CPU transforms need float32/float64 or complex)")
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
        raise RuntimeError(f"{op} expects a real input tensor, but got "
                           f"{_torch_name(x._dtype)}")
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


def _dims_and_sizes(op: str, x: Tensor, s: Any, dim: Any, default: Sequence[int] | None
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
                raise RuntimeError(f"{op}: Got shape with {len(s)} values but input tensor "
                                   f"only has {x.ndim} dimensions.")
            dims = tuple(range(x.ndim - len(s), x.ndim))
        else:
            dims = tuple(range(x.ndim))
    else:
        if x.ndim == 0 and len(dim):
            raise IndexError(f"{op}: Dimension specified as {dim[0]} but tensor has no "
                             f"dimensions")
        dims = tuple(normalize_axis(d, x.ndim, op) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{op}: FFT dims must be unique (got {list(dim)})")
        if s is not None and len(s) != len(dims):
            raise RuntimeError(f"{op}: When given, dim and shape arguments must have the "
                               f"same length (s {list(s)}, dim {list(dim)})")
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
    from ..functions.shape import pad_dims, slice_dim
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
    from ..functions.statistics import write_out
    if out is not None and isinstance(out, Tensor):
        if result._dtype.is_complex and not out._dtype.is_complex:
            raise RuntimeError(f"{op} expects a complex output tensor, but got "
                               f"{_torch_name(out._dtype)}")
        if not result._dtype.is_complex and out._dtype.category < 2:
            raise RuntimeError(f"{op} expects a floating point output tensor, but got "
                               f"{_torch_name(out._dtype)}")
    return write_out(op, out, result)


# --------------------------------------------------------------------------------------
# Complex-to-complex transforms (and real inputs to the full spectrum)
# --------------------------------------------------------------------------------------

def _fft1(op: str, input: Tensor, n: int | None, dim: int, norm: str | None, forward: bool,
          out: Any) -> Tensor:
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


def _fftn(op: str, input: Tensor, s: Any, dim: Any, norm: str | None, forward: bool,
          default: Sequence[int] | None, out: Any) -> Tensor:
    x = _check_input(op, input)
    mode = _norm_arg(op, norm)
    dims, sizes = _dims_and_sizes(op, x, s, dim, default)
    x = _resize(_as_complex(x), dims, sizes)
    return _finish(op, _c2c(x, dims, forward, mode), out)


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: Tensor | None = None) -> Tensor:
    """One-dimensional discrete Fourier transform of `input` along `dim`.

    Args: `n` pads (zeros) or trims the signal to that length first; `norm` is
    "backward" (no scaling, the default), "forward" (1/n) or "ortho" (1/sqrt(n));
    `out` receives the result. Real inputs give the full complex spectrum.
    """
    return _fft1("fft", input, n, dim, norm, True, out)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """One-dimensional inverse DFT along `dim` (`norm="backward"` scales by 1/n).

    Args as `fft`.
    """
    return _fft1("ifft", input, n, dim, norm, False, out)


def fftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
         norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional DFT over `dim` (default: all dims, or the last len(s)).

    Args: `s` the signal size per transformed dim (-1 keeps a dim's size); `norm` as
    `fft` (over the product of the sizes); `out` receives the result.
    """
    return _fftn("fftn", input, s, dim, norm, True, None, out)


def ifftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional inverse DFT over `dim`; args as `fftn`."""
    return _fftn("ifftn", input, s, dim, norm, False, None, out)


def fft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
         norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Two-dimensional DFT over `dim` (default the last two); args as `fftn`."""
    return _fftn("fft2", input, s, dim, norm, True, (-2, -1), out)


def ifft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Two-dimensional inverse DFT over `dim` (default the last two); args as `fftn`."""
    return _fftn("ifft2", input, s, dim, norm, False, (-2, -1), out)


# --------------------------------------------------------------------------------------
# Real-to-complex (one-sided) and complex-to-real transforms
# --------------------------------------------------------------------------------------

def _r2c_public(op: str, input: Tensor, s: Any, dim: Any, norm: str | None, forward: bool,
                default: Sequence[int] | None, out: Any, one: bool = False) -> Tensor:
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


def _c2r_public(op: str, input: Tensor, s: Any, dim: Any, norm: str | None, forward: bool,
                default: Sequence[int] | None, out: Any, one: bool = False) -> Tensor:
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


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """DFT of a real signal along `dim`: the n//2+1 non-negative frequency bins.

    Args as `fft`; a complex input raises.
    """
    return _r2c_public("rfft", input, n, dim, norm, True, None, out, one=True)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """Inverse of `rfft`: a real signal of length `n` (default 2*(m-1)) from m bins.

    Args as `fft`; the imaginary parts of the zero (and Nyquist) bins are ignored.
    """
    return _c2r_public("irfft", input, n, dim, norm, False, None, out, one=True)


def rfftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional DFT of a real input, one-sided along the last transformed dim."""
    return _r2c_public("rfftn", input, s, dim, norm, True, None, out)


def irfftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """Inverse of `rfftn`; `s[-1]` is the real output length of the last dim (default
    2*(m-1))."""
    return _c2r_public("irfftn", input, s, dim, norm, False, None, out)


def rfft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """`rfftn` over two dims (default the last two)."""
    return _r2c_public("rfft2", input, s, dim, norm, True, (-2, -1), out)


def irfft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """`irfftn` over two dims (default the last two)."""
    return _c2r_public("irfft2", input, s, dim, norm, False, (-2, -1), out)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """DFT of a Hermitian-symmetric signal given by its one-sided half: a real result of
    length `n` (default 2*(m-1)). Args as `fft`."""
    return _c2r_public("hfft", input, n, dim, norm, True, None, out, one=True)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """Inverse of `hfft`: the one-sided inverse DFT of a real signal. Args as `fft`."""
    return _r2c_public("ihfft", input, n, dim, norm, False, None, out, one=True)


def hfftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional `hfft` (one-sided along the last transformed dim)."""
    return _c2r_public("hfftn", input, s, dim, norm, True, None, out)


def ihfftn(input: Tensor, s: Sequence[int] | None = None, dim: Any = None,
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """N-dimensional `ihfft` (one-sided along the last transformed dim)."""
    return _r2c_public("ihfftn", input, s, dim, norm, False, None, out)


def hfft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
          norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """`hfftn` over two dims (default the last two)."""
    return _c2r_public("hfft2", input, s, dim, norm, True, (-2, -1), out)


def ihfft2(input: Tensor, s: Sequence[int] | None = None, dim: Any = (-2, -1),
           norm: str | None = None, *, out: Tensor | None = None) -> Tensor:
    """`ihfftn` over two dims (default the last two)."""
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


def fftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None,
            dtype: dt.DType | None = None, layout: Any = None, device: Any = None,
            requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an `fft` of length `n` with sample spacing `d`:
    `[0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d*n)`.

    Args: `dtype` (default: the default float dtype), `requires_grad`, `out`.
    """
    from ..functions.creation import arange
    from ..functions.elementwise import mul, sub, where
    n = _check_n("fftfreq", n) if n != 0 else 0
    kind = _freq_dtype("fftfreq", dtype)
    i = arange(n, dtype=kind)
    if n:
        i = where(i < (n + 1) // 2, i, sub(i, n))
    res = mul(i, _reciprocal(n * d)).detach()
    if requires_grad:
        res.requires_grad_(True)
    return _finish("fftfreq", res, out)


def rfftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None,
             dtype: dt.DType | None = None, layout: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """The n//2+1 non-negative sample frequencies of an `rfft` of length `n`:
    `[0, 1, ..., n//2] / (d*n)`. Args as `fftfreq`."""
    from ..functions.creation import arange
    from ..functions.elementwise import mul
    n = _check_n("rfftfreq", n) if n != 0 else 0
    kind = _freq_dtype("rfftfreq", dtype)
    i = arange(n // 2 + 1, dtype=kind)
    res = mul(i, _reciprocal(n * d)).detach()
    if requires_grad:
        res.requires_grad_(True)
    return _finish("rfftfreq", res, out)


def _roll(x: Tensor, dims: Sequence[int], shifts: Sequence[int]) -> Tensor:
    """`x` rolled by `shifts` along `dims` (a cat of two slices per dim)."""
    from ..functions.shape import cat, slice_dim
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
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
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
