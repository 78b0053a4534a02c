"""Spectral helpers at the `lg.*` level: window functions, stft and istft.

Windows are creation functions: their values are computed in float64 on the host and
rounded once to the requested dtype (PyTorch computes in that dtype, so float32 values
may differ in the last bit). `stft` frames the signal with an index (a gather: its
gradient scatters back), multiplies by the window and transforms with `lg.fft`; `istft`
inverts with `lg.fft` and overlap-adds with `scatter_add`. Both differentiate with
respect to the signal and the window. The transforms run on the host, so inside
`lg.compile` they are graph breaks (see `llgrad.fft`).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from ..ir import dtypes as dt
from ..tensor import Tensor

__all__: list[str] = ["stft", "istft", "hann_window", "hamming_window", "blackman_window",
                      "bartlett_window", "kaiser_window"]

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}


# --------------------------------------------------------------------------------------
# Windows
# --------------------------------------------------------------------------------------

def _window(op: str, length: int, periodic: bool, dtype: dt.DType | None,
            requires_grad: bool, values: Callable[[np.ndarray, int], np.ndarray]) -> Tensor:
    from .creation import tensor
    d = dtype if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{op} expects floating point dtypes, got: {d.name}")
    if not isinstance(length, int) or isinstance(length, bool):
        raise TypeError(f"{op}(): argument 'window_length' must be int, not "
                        f"{type(length).__name__}")
    if length < 0:
        raise RuntimeError(f"{op} requires non-negative window_length, got "
                           f"window_length={length}")
    if length == 0:
        w = np.zeros(0)
    elif length == 1:
        w = np.ones(1)
    else:
        n = length + 1 if periodic else length
        w = values(np.arange(n, dtype=np.float64), n)[:length]
    out = tensor(w, dtype=d)
    if requires_grad:
        out.requires_grad_(True)
    return out


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype: dt.DType | None = None, layout: Any = None,
                   device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Hamming window `alpha - beta cos(2 pi n / (N - 1))`.

    Args: `periodic` (default) computes N+1 points and drops the last, for spectral
    analysis; `alpha`/`beta` the coefficients; `dtype` a floating dtype.
    """
    return _window("hamming_window", window_length, periodic, dtype, requires_grad,
                   lambda i, n: alpha - beta * np.cos(2 * math.pi * i / (n - 1)))


def hann_window(window_length: int, periodic: bool = True, *, dtype: dt.DType | None = None,
                layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Hann window `0.5 - 0.5 cos(2 pi n / (N - 1))`; args as `hamming_window`."""
    return _window("hann_window", window_length, periodic, dtype, requires_grad,
                   lambda i, n: 0.5 - 0.5 * np.cos(2 * math.pi * i / (n - 1)))


def blackman_window(window_length: int, periodic: bool = True, *,
                    dtype: dt.DType | None = None, layout: Any = None, device: Any = None,
                    requires_grad: bool = False) -> Tensor:
    """The Blackman window `0.42 - 0.5 cos(2 pi n/(N-1)) + 0.08 cos(4 pi n/(N-1))`."""
    return _window("blackman_window", window_length, periodic, dtype, requires_grad,
                   lambda i, n: 0.42 - 0.5 * np.cos(2 * math.pi * i / (n - 1))
                   + 0.08 * np.cos(4 * math.pi * i / (n - 1)))


def bartlett_window(window_length: int, periodic: bool = True, *,
                    dtype: dt.DType | None = None, layout: Any = None, device: Any = None,
                    requires_grad: bool = False) -> Tensor:
    """The triangular Bartlett window `1 - |2n/(N-1) - 1|`."""
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad,
                   lambda i, n: 1 - np.abs(2 * i / (n - 1) - 1))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype: dt.DType | None = None, layout: Any = None, device: Any = None,
                  requires_grad: bool = False) -> Tensor:
    """The Kaiser window `I0(beta sqrt(1 - ((n - a)/a)^2)) / I0(beta)`, `a = (N-1)/2`."""
    def values(i: np.ndarray, n: int) -> np.ndarray:
        a = (n - 1) / 2.0
        return np.i0(beta * np.sqrt(np.clip(1 - ((i - a) / a) ** 2, 0, None))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, values)


# --------------------------------------------------------------------------------------
# stft / istft
# --------------------------------------------------------------------------------------

def _pad_signal(x: Tensor, pad: int, mode: str) -> Tensor:
    """`x` padded by `pad` on both ends of its last dim: reflect, replicate, circular (an
    index gather, differentiable) or constant (zeros)."""
    from .creation import tensor
    from .shape import pad_dims
    n = x._shape[-1]
    if mode == "constant":
        return pad_dims(x, [0] * (x.ndim - 1) + [pad], [0] * (x.ndim - 1) + [pad])
    i = np.arange(-pad, n + pad)
    if mode == "reflect":
        if pad >= n:
            raise RuntimeError(f"stft: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({pad}, {pad}) at dimension "
                               f"{x.ndim - 1} of input {list(x.shape)}")
        period = 2 * (n - 1) if n > 1 else 1
        i = np.abs(i) % period
        i = np.where(i >= n, period - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    elif mode == "circular":
        if pad > n:
            raise RuntimeError(f"stft: Padding value causes wrapping around more than once "
                               f"(pad {pad}, size {n})")
        i = i % n
    else:
        raise RuntimeError(f"stft: unsupported pad_mode {mode!r} (expected 'reflect', "
                           f"'constant', 'replicate' or 'circular')")
    return x[..., tensor(i.astype(np.int64))]


def _full_window(op: str, window: Tensor | None, win_length: int, n_fft: int,
                 like: Tensor) -> Tensor:
    """The window (default rectangular) zero-padded on both sides to `n_fft`."""
    from .creation import ones
    from .shape import pad_dims
    if window is None:
        w = ones(win_length, dtype=like._dtype.to_real() if like._dtype.is_complex else
                 like._dtype)
    else:
        if not isinstance(window, Tensor):
            raise TypeError(f"{op}(): argument 'window' must be a Tensor")
        if window.ndim != 1 or window._shape[0] != win_length:
            raise RuntimeError(f"{op}: expected a 1D window tensor of size equal to "
                               f"win_length={win_length}, but got window with size "
                               f"{list(window.shape)}")
        w = window
    left = (n_fft - win_length) // 2
    if left or n_fft - win_length - left:
        w = pad_dims(w, [left], [n_fft - win_length - left])
    return w


def _lengths(op: str, n_fft: Any, hop_length: Any, win_length: Any) -> tuple[int, int, int]:
    if not isinstance(n_fft, int) or n_fft <= 0:
        raise RuntimeError(f"{op}: expected n_fft > 0, but got n_fft={n_fft}")
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if hop <= 0:
        raise RuntimeError(f"{op}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win}")
    return n_fft, hop, win


def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None) -> Tensor:
    """The short-time Fourier transform of a 1-D signal or a batch of them `(B, L)`:
    `(B?, n_freq, n_frames)`, complex.

    Args: `hop_length` (default n_fft//4) between frames; `win_length` (default n_fft) the
    window's length, zero-padded to n_fft in the middle; `window` (default rectangular);
    `center` pads the signal by n_fft//2 on both sides with `pad_mode`; `normalized`
    scales by n_fft**-0.5; `onesided` (default for real signal and window) keeps
    n_fft//2+1 bins; `return_complex` must be given for real inputs (False returns
    `view_as_real` of the result, deprecated as in PyTorch); `align_to_window` (only with
    center=False): frames start where the window starts, so there are
    1 + (L - win_length) // hop of them (by default a frame of n_fft starts there and the
    window sits in its middle).
    """
    from .. import fft as _fft
    from .creation import tensor
    from .shape import transpose, view_as_real
    from . import elementwise as E
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
    x = input
    complex_in = x._dtype.is_complex or (window is not None and window._dtype.is_complex)
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True in "
                               "a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch "
                      "release, stft will return complex tensors for all inputs, and "
                      "return_complex=False will raise an error.", UserWarning, stacklevel=2)
    if x.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {x.ndim}D (shape "
                           f"{list(x.shape)})")
    if not (x._dtype.is_floating_point or x._dtype.is_complex):
        x = x.to(dt.get_default_dtype())
    n_fft, hop, win = _lengths("stft", n_fft, hop_length, win_length)
    batched = x.ndim == 2
    if not batched:
        x = x.unsqueeze(0)
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if center:
        x = _pad_signal(x, n_fft // 2, pad_mode)
    elif align_to_window and win < n_fft:
        # the window's samples start at each frame start: shift the n_fft frames left by
        # the window's offset inside them (zeros outside the signal meet zero weights)
        from ..nn import functional as NF
        left = (n_fft - win) // 2
        x = NF.pad(x, (left, n_fft - win - left))
    length = x._shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    w = _full_window("stft", window, win, n_fft, x)
    frames_n = 1 + (length - n_fft) // hop
    idx = (np.arange(frames_n)[:, None] * hop + np.arange(n_fft)[None, :]).astype(np.int64)
    frames = E.mul(x[:, tensor(idx)], w)                     # (B, frames, n_fft)
    side = (not complex_in) if onesided is None else onesided
    if side and complex_in:
        raise RuntimeError("stft: Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=-1, norm=norm) if side else \
        _fft.fft(frames, dim=-1, norm=norm)
    out = transpose(spec, 1, 2)                              # (B, n_freq, frames)
    if not batched:
        out = out.squeeze(0)
    return out if return_complex else view_as_real(out.contiguous())


def istft(input: Tensor, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """The inverse of `stft` by windowed overlap-add: `(B?, L)` from `(B?, n_freq,
    n_frames)` complex.

    Args as `stft`; `length` trims or zero-pads the result; `onesided` defaults to
    `n_freq != n_fft`; `return_complex` keeps a complex signal (then `onesided` must be
    False; a real result from a full spectrum reads only its first n_fft // 2 + 1 bins,
    as torch). The window's squared overlap must be nonzero over the result (checked
    eagerly, as PyTorch's NOLA condition).
    """
    from .. import fft as _fft
    from .creation import tensor, zeros
    from .indexing import scatter_add
    from .shape import pad_dims, slice_dim, transpose
    from . import elementwise as E
    if not isinstance(input, Tensor):
        raise TypeError(f"istft(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
    if not input._dtype.is_complex:
        raise RuntimeError(f"istft requires a complex-valued input tensor, got "
                           f"{input._dtype.name}")
    X = input
    if X.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                           f"values, but got shape {list(X.shape)}")
    n_fft, hop, win = _lengths("istft", n_fft, hop_length, win_length)
    batched = X.ndim == 3
    if not batched:
        X = X.unsqueeze(0)
    n_freq, frames_n = X._shape[1], X._shape[2]
    side = n_freq != n_fft if onesided is None else onesided
    if side:
        if n_freq != n_fft // 2 + 1:
            raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of "
                               f"the input tensor to match n_fft / 2 + 1 when onesided=True, "
                               f"but got {n_freq}")
        if return_complex:
            raise RuntimeError("istft: cannot have onesided output if window or input is "
                               "complex")
    elif n_freq != n_fft:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft when onesided=False, but got {n_freq}")
    if frames_n == 0:
        raise RuntimeError("istft: input tensor cannot be empty (no frames)")
    real_dtype = X._dtype.to_real()
    w = _full_window("istft", window, win, n_fft, tensor([0.0], dtype=real_dtype))
    if window is not None and window._dtype.is_complex and not return_complex:
        raise RuntimeError("istft: complex windows need return_complex=True")
    norm = "ortho" if normalized else "backward"
    spec = transpose(X, 1, 2)                                # (B, frames, n_freq)
    if side:
        frames = _fft.irfft(spec, n=n_fft, dim=-1, norm=norm)
    elif not return_complex:
        # a real signal from a full spectrum: its first n_fft // 2 + 1 bins, as torch (the
        # rest is taken as their Hermitian mirror, whatever the input holds)
        frames = _fft.irfft(spec[..., :n_fft // 2 + 1], n=n_fft, dim=-1, norm=norm)
    else:
        frames = _fft.ifft(spec, n=n_fft, dim=-1, norm=norm)
    frames = E.mul(frames, w)
    total = n_fft + hop * (frames_n - 1)
    idx = (np.arange(frames_n)[:, None] * hop + np.arange(n_fft)[None, :]).reshape(-1)
    B = X._shape[0]
    index = tensor(np.broadcast_to(idx, (B, idx.size)).astype(np.int64))
    y = scatter_add(zeros((B, total), dtype=frames._dtype), 1, index, frames.reshape(B, -1))
    wsq = E.mul(w, w)
    env = scatter_add(zeros((1, total), dtype=wsq._dtype), 1, index[:1],
                      wsq.reshape(1, n_fft).expand(frames_n, n_fft).reshape(1, -1))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + length
    end = min(end, total)
    y = slice_dim(y, 1, start, end)
    env = slice_dim(env, 1, start, end)
    from ..tracer.tensor import tracing
    if not tracing() and getattr(env, "_ctx", None) is None and env.numel():
        from ..autograd.grad_mode import no_grad
        with no_grad():
            low = float(E.abs(env).min().item())
        if low < 1e-11:
            raise RuntimeError(f"istft: window overlap add min: {low:.3g} (the window's "
                               f"squared overlap must be nonzero: NOLA condition)")
    y = E.div(y, env)
    if length is not None and y._shape[1] < length:
        y = pad_dims(y, [0, 0], [0, length - y._shape[1]])
    return y if batched else y.squeeze(0)


METHODS.update({"stft": stft, "istft": istft})


def _served_on_devices() -> None:
    from ._errors import serve_on_devices
    serve_on_devices(globals())


_served_on_devices()
