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

from ..tape import forward as forward_ad
from ..dispatch.apply import interpreters
from ..dispatch.grad_mode import _state as grad_state, no_grad
from ..eager import views
from ..ir import dtypes as dt
from ..runtime.storage import Storage, _address
from ..tensor import Tensor
from ..tracer.tensor import tracing
from . import elementwise as E
from ._errors import serve_on_devices
from .creation import ones, tensor, zeros
from .indexing import scatter_add
from .shape import pad_dims, slice_dim, transpose, view_as_real

__all__: list[str] = [
    "stft",
    "istft",
    "hann_window",
    "hamming_window",
    "blackman_window",
    "bartlett_window",
    "kaiser_window",
]

# Tensor methods this module defines: name -> function (bound by methods.bind()).
METHODS: dict[str, Callable[..., Any]] = {}


# --------------------------------------------------------------------------------------
# Windows
# --------------------------------------------------------------------------------------


def _window(
    op: str,
    length: int,
    periodic: bool,
    dtype: dt.DType | None,
    requires_grad: bool,
    values: Callable[[np.ndarray, int], np.ndarray],
) -> Tensor:
    d = dtype if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{op} expects floating point dtypes, got: {d.name}")
    if not isinstance(length, int) or isinstance(length, bool):
        raise TypeError(
            f"{op}(): argument 'window_length' must be int, not {type(length).__name__}"
        )
    if length < 0:
        raise RuntimeError(f"{op} requires non-negative window_length, got window_length={length}")
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


def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype: dt.DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Hamming window `alpha - beta cos(2 pi n / (N - 1))`.

    Args: `periodic` (default) computes N+1 points and drops the last, for spectral
    analysis; `alpha`/`beta` the coefficients; `dtype` a floating dtype.
    """
    return _window(
        "hamming_window",
        window_length,
        periodic,
        dtype,
        requires_grad,
        lambda i, n: alpha - beta * np.cos(2 * math.pi * i / (n - 1)),
    )


def hann_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: dt.DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Hann window `0.5 - 0.5 cos(2 pi n / (N - 1))`; args as `hamming_window`."""
    return _window(
        "hann_window",
        window_length,
        periodic,
        dtype,
        requires_grad,
        lambda i, n: 0.5 - 0.5 * np.cos(2 * math.pi * i / (n - 1)),
    )


def blackman_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: dt.DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Blackman window `0.42 - 0.5 cos(2 pi n/(N-1)) + 0.08 cos(4 pi n/(N-1))`."""
    return _window(
        "blackman_window",
        window_length,
        periodic,
        dtype,
        requires_grad,
        lambda i, n: (
            0.42
            - 0.5 * np.cos(2 * math.pi * i / (n - 1))
            + 0.08 * np.cos(4 * math.pi * i / (n - 1))
        ),
    )


def bartlett_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: dt.DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The triangular Bartlett window `1 - |2n/(N-1) - 1|`."""
    return _window(
        "bartlett_window",
        window_length,
        periodic,
        dtype,
        requires_grad,
        lambda i, n: 1 - np.abs(2 * i / (n - 1) - 1),
    )


def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype: dt.DType | None = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Kaiser window `I0(beta sqrt(1 - ((n - a)/a)^2)) / I0(beta)`, `a = (N-1)/2`."""

    def values(i: np.ndarray, n: int) -> np.ndarray:
        a = (n - 1) / 2.0
        return np.i0(beta * np.sqrt(np.clip(1 - ((i - a) / a) ** 2, 0, None))) / np.i0(beta)

    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, values)


# --------------------------------------------------------------------------------------
# stft / istft
# --------------------------------------------------------------------------------------


def _pad_index(n: int, pad: int, mode: str, shape: list[int]) -> np.ndarray | None:
    """The positions of a signal of `n` samples padded by `pad` on both ends with `mode`
    (reflect, replicate, circular), or None for constant (zero) padding; raises for an
    unknown mode or a pad the mode cannot make (`shape`: the signal's, for messages)."""
    if mode == "constant":
        return None
    i = np.arange(-pad, n + pad)
    if mode == "reflect":
        if pad >= n:
            raise RuntimeError(
                f"stft: Padding size should be less than the corresponding "
                f"input dimension, but got: padding ({pad}, {pad}) at dimension "
                f"{len(shape) - 1} of input {shape}"
            )
        period = 2 * (n - 1) if n > 1 else 1
        i = np.abs(i) % period
        i = np.where(i >= n, period - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    elif mode == "circular":
        if pad > n:
            raise RuntimeError(
                f"stft: Padding value causes wrapping around more than once (pad {pad}, size {n})"
            )
        i = i % n
    else:
        raise RuntimeError(
            f"stft: unsupported pad_mode {mode!r} (expected 'reflect', "
            f"'constant', 'replicate' or 'circular')"
        )
    return i.astype(np.int64)


def _pad_signal(x: Tensor, pad: int, mode: str) -> Tensor:
    """`x` padded by `pad` on both ends of its last dim: reflect, replicate, circular (an
    index gather, differentiable) or constant (zeros)."""
    i = _pad_index(x._shape[-1], pad, mode, list(x.shape))
    if i is None:
        return pad_dims(x, [0] * (x.ndim - 1) + [pad], [0] * (x.ndim - 1) + [pad])
    return x[..., tensor(i)]


def _full_window(
    op: str, window: Tensor | None, win_length: int, n_fft: int, like: Tensor
) -> Tensor:
    """The window (default rectangular) zero-padded on both sides to `n_fft`."""
    if window is None:
        w = ones(win_length, dtype=like._dtype.to_real() if like._dtype.is_complex else like._dtype)
    else:
        if not isinstance(window, Tensor):
            raise TypeError(f"{op}(): argument 'window' must be a Tensor")
        if window.ndim != 1 or window._shape[0] != win_length:
            raise RuntimeError(
                f"{op}: expected a 1D window tensor of size equal to "
                f"win_length={win_length}, but got window with size "
                f"{list(window.shape)}"
            )
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
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got win_length={win}")
    return n_fft, hop, win


def stft(
    input: Tensor,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    pad_mode: str = "reflect",
    normalized: bool = False,
    onesided: bool | None = None,
    return_complex: bool | None = None,
    align_to_window: bool | None = None,
) -> Tensor:
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
    key = _direct_key(
        input,
        window,
        (
            n_fft,
            hop_length,
            win_length,
            center,
            pad_mode,
            normalized,
            onesided,
            return_complex,
            align_to_window,
        ),
    )
    if key is not None:
        plan = _stft_plans.get(key)
        if plan is not None:
            return _stft_direct(plan, input, window)
    out = _stft_general(
        input,
        n_fft,
        hop_length,
        win_length,
        window,
        center,
        pad_mode,
        normalized,
        onesided,
        return_complex,
        align_to_window,
    )
    if key is not None and len(_stft_plans) < _PLAN_LIMIT:
        plan = _stft_plan(
            input,
            window,
            n_fft,
            hop_length,
            win_length,
            center,
            pad_mode,
            normalized,
            onesided,
            return_complex,
            align_to_window,
        )
        if plan is not None:
            _stft_plans[key] = plan
    return out


def _stft_general(
    input: Tensor,
    n_fft: int,
    hop_length: int | None,
    win_length: int | None,
    window: Tensor | None,
    center: bool,
    pad_mode: str,
    normalized: bool,
    onesided: bool | None,
    return_complex: bool | None,
    align_to_window: bool | None,
) -> Tensor:
    """`stft` made of llgrad ops (differentiable; every check and error)."""
    from .. import fft as _fft  # circle: fft -> functions -> here

    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' must be a Tensor, not {type(input).__name__}")
    x = input
    complex_in = x._dtype.is_complex or (window is not None and window._dtype.is_complex)
    if return_complex is None:
        if not complex_in:
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real "
                "inputs, and will further require that return_complex=True in "
                "a future PyTorch release."
            )
        return_complex = True
    if not return_complex:
        warnings.warn(
            "stft with return_complex=False is deprecated. In a future pytorch "
            "release, stft will return complex tensors for all inputs, and "
            "return_complex=False will raise an error.",
            UserWarning,
            stacklevel=2,
        )
    if x.ndim not in (1, 2):
        raise RuntimeError(
            f"stft: expected a 1D or 2D tensor, but got {x.ndim}D (shape {list(x.shape)})"
        )
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
        from ..nn import functional as NF  # circle: nn.functional -> functions -> here

        left = (n_fft - win) // 2
        x = NF.pad(x, (left, n_fft - win - left))
    length = x._shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    w = _full_window("stft", window, win, n_fft, x)
    frames_n = 1 + (length - n_fft) // hop
    idx = (np.arange(frames_n)[:, None] * hop + np.arange(n_fft)[None, :]).astype(np.int64)
    frames = E.mul(x[:, tensor(idx)], w)  # (B, frames, n_fft)
    side = (not complex_in) if onesided is None else onesided
    if side and complex_in:
        raise RuntimeError("stft: Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=-1, norm=norm) if side else _fft.fft(frames, dim=-1, norm=norm)
    out = transpose(spec, 1, 2)  # (B, n_freq, frames)
    if not batched:
        out = out.squeeze(0)
    return out if return_complex else view_as_real(out.contiguous())


def istft(
    input: Tensor,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    normalized: bool = False,
    onesided: bool | None = None,
    length: int | None = None,
    return_complex: bool = False,
) -> Tensor:
    """The inverse of `stft` by windowed overlap-add: `(B?, L)` from `(B?, n_freq,
    n_frames)` complex.

    Args as `stft`; `length` trims or zero-pads the result; `onesided` defaults to
    `n_freq != n_fft`; `return_complex` keeps a complex signal (then `onesided` must be
    False; a real result from a full spectrum reads only its first n_fft // 2 + 1 bins,
    as torch). The window's squared overlap must be nonzero over the result (checked
    eagerly, as PyTorch's NOLA condition).
    """
    key = _direct_key(
        input,
        window,
        (n_fft, hop_length, win_length, center, normalized, onesided, length, return_complex),
    )
    if key is not None:
        plan = _istft_plans.get(key)
        if plan is not None:
            out = _istft_direct(plan, input, window)
            if out is not None:
                return out
    out = _istft_general(
        input,
        n_fft,
        hop_length,
        win_length,
        window,
        center,
        normalized,
        onesided,
        length,
        return_complex,
    )
    if key is not None and len(_istft_plans) < _PLAN_LIMIT:
        plan = _istft_plan(
            input,
            window,
            n_fft,
            hop_length,
            win_length,
            center,
            normalized,
            onesided,
            length,
            return_complex,
        )
        if plan is not None:
            _istft_plans[key] = plan
    return out


def _istft_general(
    input: Tensor,
    n_fft: int,
    hop_length: int | None,
    win_length: int | None,
    window: Tensor | None,
    center: bool,
    normalized: bool,
    onesided: bool | None,
    length: int | None,
    return_complex: bool,
) -> Tensor:
    """`istft` made of llgrad ops (differentiable; every check and error)."""
    from .. import fft as _fft  # circle: fft -> functions -> here

    if not isinstance(input, Tensor):
        raise TypeError(f"istft(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if not input._dtype.is_complex:
        raise RuntimeError(f"istft requires a complex-valued input tensor, got {input._dtype.name}")
    X = input
    if X.ndim not in (2, 3):
        raise RuntimeError(
            f"istft: expected a tensor with 2 or 3 dimensions of complex "
            f"values, but got shape {list(X.shape)}"
        )
    n_fft, hop, win = _lengths("istft", n_fft, hop_length, win_length)
    batched = X.ndim == 3
    if not batched:
        X = X.unsqueeze(0)
    n_freq, frames_n = X._shape[1], X._shape[2]
    side = n_freq != n_fft if onesided is None else onesided
    if side:
        if n_freq != n_fft // 2 + 1:
            raise RuntimeError(
                f"istft: expected the frequency dimension (3rd to the last) of "
                f"the input tensor to match n_fft / 2 + 1 when onesided=True, "
                f"but got {n_freq}"
            )
        if return_complex:
            raise RuntimeError("istft: cannot have onesided output if window or input is complex")
    elif n_freq != n_fft:
        raise RuntimeError(
            f"istft: expected the frequency dimension (3rd to the last) of the "
            f"input tensor to match n_fft when onesided=False, but got {n_freq}"
        )
    if frames_n == 0:
        raise RuntimeError("istft: input tensor cannot be empty (no frames)")
    real_dtype = X._dtype.to_real()
    w = _full_window("istft", window, win, n_fft, tensor([0.0], dtype=real_dtype))
    if window is not None and window._dtype.is_complex and not return_complex:
        raise RuntimeError("istft: complex windows need return_complex=True")
    norm = "ortho" if normalized else "backward"
    spec = transpose(X, 1, 2)  # (B, frames, n_freq)
    if side:
        frames = _fft.irfft(spec, n=n_fft, dim=-1, norm=norm)
    elif not return_complex:
        # a real signal from a full spectrum: its first n_fft // 2 + 1 bins, as torch (the
        # rest is taken as their Hermitian mirror, whatever the input holds)
        frames = _fft.irfft(spec[..., : n_fft // 2 + 1], n=n_fft, dim=-1, norm=norm)
    else:
        frames = _fft.ifft(spec, n=n_fft, dim=-1, norm=norm)
    frames = E.mul(frames, w)
    total = n_fft + hop * (frames_n - 1)
    idx = (np.arange(frames_n)[:, None] * hop + np.arange(n_fft)[None, :]).reshape(-1)
    B = X._shape[0]
    index = tensor(np.broadcast_to(idx, (B, idx.size)).astype(np.int64))
    y = scatter_add(zeros((B, total), dtype=frames._dtype), 1, index, frames.reshape(B, -1))
    wsq = E.mul(w, w)
    env = scatter_add(
        zeros((1, total), dtype=wsq._dtype),
        1,
        index[:1],
        wsq.reshape(1, n_fft).expand(frames_n, n_fft).reshape(1, -1),
    )
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + length
    end = min(end, total)
    y = slice_dim(y, 1, start, end)
    env = slice_dim(env, 1, start, end)

    if not tracing() and getattr(env, "_ctx", None) is None and env.numel():
        with no_grad():
            low = float(E.abs(env).min().item())
        if low < 1e-11:
            raise RuntimeError(
                f"istft: window overlap add min: {low:.3g} (the window's "
                f"squared overlap must be nonzero: NOLA condition)"
            )
    y = E.div(y, env)
    if length is not None and y._shape[1] < length:
        y = pad_dims(y, [0, 0], [0, length - y._shape[1]])
    return y if batched else y.squeeze(0)


# --------------------------------------------------------------------------------------
# The direct paths: a call that nothing records runs on the host in NumPy and pocketfft
# --------------------------------------------------------------------------------------
#
# The general forms above run a dozen llgrad ops (a gather, a window product, the
# transform, overlap-adds by scatter, the NOLA check): each a few microseconds of
# dispatch on a small signal. When no autograd, transform (vmap, tracing) or forward
# mode is involved, a call whose arguments passed the general form once (so they are
# valid) runs a plan made then, keyed by the input's and window's layouts and the other
# arguments: the same element operations on NumPy views in the same dtype and order (the
# framing gather, the window product, pocketfft's routine as `lg.fft` calls it, and the
# overlap-adds in frame order), so the values are the general form's bits. Mixed input
# and window dtypes and complex istft results keep the general form.

_PLAN_LIMIT = 1024
_stft_plans: dict[tuple, tuple] = {}
_istft_plans: dict[tuple, tuple] = {}
_SIMPLE = frozenset({int, bool, float, str, type(None)})


def _direct_key(x: Any, window: Any, args: tuple) -> tuple | None:
    """The plan key of a call that may take the direct path, else None."""
    if x.__class__ is not Tensor or interpreters or forward_ad._level[0]:
        return None
    if window is not None and window.__class__ is not Tensor:
        return None
    if grad_state.enabled and (x._requires_grad or (window is not None and window._requires_grad)):
        return None
    for a in args:
        if a.__class__ not in _SIMPLE:
            return None
    return (
        x._lkey,
        None if window is None else window._lkey,
        tuple((a.__class__, a) for a in args),
    )


def _window_values(window: Tensor | None, win: int, n_fft: int, np_dtype: Any) -> np.ndarray:
    """The window (ones when None) zero-padded to n_fft in the middle (`_full_window`)."""
    left = (n_fft - win) // 2
    if window is None and left == 0 and win == n_fft:
        return np.ones(n_fft, np_dtype)
    w = np.zeros(n_fft, np_dtype)
    w[left : left + win] = 1 if window is None else window._numpy_view()
    return w


def _plain_dtypes(x: Tensor, window: Tensor | None, real: Any) -> bool:
    return x._dtype.name in ("float32", "float64", "complex64", "complex128") and (
        window is None or window._dtype is real
    )


def _wrap(r: np.ndarray) -> Tensor:
    """A tensor owning the fresh array `r` (made C-contiguous)."""
    r = np.require(r, requirements="C")
    return Tensor._make(
        Storage(r.reshape(-1).view(np.uint8), _address(r)),
        0,
        tuple(r.shape),
        tuple(v // r.itemsize for v in r.strides),
        dt.from_numpy(r.dtype),
    )


def _stft_plan(
    x: Tensor,
    window: Tensor | None,
    n_fft: int,
    hop_length: int | None,
    win_length: int | None,
    center: bool,
    pad_mode: str,
    normalized: bool,
    onesided: bool | None,
    return_complex: bool | None,
    align_to_window: bool | None,
) -> tuple | None:
    """The direct plan of a valid stft call (None: it keeps the general form)."""
    from .. import fft as _fft  # circle: fft -> functions -> here

    # a complex signal keeps the general form (its window product is complex times real)
    if (
        x._dtype.is_complex
        or not _plain_dtypes(x, window, x._dtype)
        or not return_complex
        or not _fft._load_pocket()
        or x.ndim not in (1, 2)
    ):
        return None
    if onesided is not None and not onesided:
        return None
    n_fft, hop, win = _lengths("stft", n_fft, hop_length, win_length)
    n = x._shape[-1]
    pos = np.arange(n, dtype=np.int64)
    if center:
        pad = n_fft // 2
        i = _pad_index(n, pad, pad_mode, list(x.shape))
        if i is None:
            return None
        pos = i
    elif align_to_window and win < n_fft:
        return None
    length = pos.shape[0]
    frames_n = 1 + (length - n_fft) // hop
    idx = pos[np.arange(frames_n)[:, None] * hop + np.arange(n_fft)[None, :]]
    return (idx, win, n_fft, 1 if normalized else 0, x.ndim == 2)


def _stft_direct(plan: tuple, x: Tensor, window: Tensor | None) -> Tensor:
    from .. import fft as _fft  # circle: fft -> functions -> here

    idx, win, n_fft, inorm, batched = plan
    a = x._numpy_view()
    if not batched:
        a = a[None]
    w = _window_values(window, win, n_fft, a.dtype)
    frames = a[:, idx]  # (B, frames, n_fft)
    frames *= w
    workers = getattr(_fft._pocket_config, "default_workers", 1)
    spec = _fft._pocket.r2c(frames, (2,), True, inorm, None, workers)
    t = _wrap(spec)  # (B, frames, n_freq)
    b_, f_, q_ = t._shape
    s0, s1, s2 = t._strides
    if batched:
        return views.view_of(t, 0, (b_, q_, f_), (s0, s2, s1))
    return views.view_of(t, 0, (q_, f_), (s2, s1))


def _istft_plan(
    X: Tensor,
    window: Tensor | None,
    n_fft: int,
    hop_length: int | None,
    win_length: int | None,
    center: bool,
    normalized: bool,
    onesided: bool | None,
    length: int | None,
    return_complex: bool,
) -> tuple | None:
    """The direct plan of a valid istft call (None: it keeps the general form)."""
    from .. import fft as _fft  # circle: fft -> functions -> here

    if (
        not X._dtype.is_complex
        or return_complex
        or X.ndim not in (2, 3)
        or not _plain_dtypes(X, window, X._dtype.to_real())
        or not _fft._load_pocket()
    ):
        return None
    n_fft, hop, win = _lengths("istft", n_fft, hop_length, win_length)
    n_freq, frames_n = X._shape[-2], X._shape[-1]
    side = n_freq != n_fft if onesided is None else onesided
    total = n_fft + hop * (frames_n - 1)
    idx = (np.arange(frames_n)[:, None] * hop + np.arange(n_fft)[None, :]).reshape(-1)
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + length
    end = min(end, total)
    keep = n_fft // 2 + 1 if not side else n_freq  # a full spectrum: its first half
    return (idx, win, n_fft, total, start, end, length, keep, 1 if normalized else 0, X.ndim == 3)


def _istft_direct(plan: tuple, X: Tensor, window: Tensor | None) -> Tensor | None:
    """The direct istft, or None when the window fails the NOLA check (the general form
    raises it)."""
    from .. import fft as _fft  # circle: fft -> functions -> here

    idx, win, n_fft, total, start, end, length, keep, inorm, batched = plan
    a = X._numpy_view()
    if not batched:
        a = a[None]
    spec = np.swapaxes(a, 1, 2)[..., :keep]  # (B, frames, n_freq)
    real_np = a.real.dtype
    w = _window_values(window, win, n_fft, real_np)
    workers = getattr(_fft._pocket_config, "default_workers", 1)
    frames = _fft._pocket.c2r(spec, (2,), n_fft, False, 2 - inorm, None, workers)
    frames *= w
    B = a.shape[0]
    # overlap-add in frame order (as the general form's scatter_add)
    y = np.zeros((B, total), real_np)
    np.add.at(y, (slice(None), idx), frames.reshape(B, -1))
    env = np.zeros(total, real_np)
    np.add.at(env, idx, np.tile(w * w, frames.shape[1]))
    y, env = y[:, start:end], env[start:end]
    if env.size and float(np.abs(env).min()) < 1e-11:
        return None
    y = y / env
    if length is not None and y.shape[1] < length:
        y = np.concatenate([y, np.zeros((B, length - y.shape[1]), real_np)], axis=1)
    return _wrap(y if batched else y[0])


METHODS.update({"stft": stft, "istft": istft})


def _served_on_devices() -> None:
    serve_on_devices(globals())


_served_on_devices()
