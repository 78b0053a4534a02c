"""PyTorch-compatible text formatting of tensors.

This module turns plain data (a numpy array plus a dtype name and a few
autograd flags) into exactly the text PyTorch 2.13 produces for
``repr(tensor)`` / ``str(tensor)``, with the module name ``llgrad`` in place
of ``torch`` (``dtype=llgrad.float64``).  It deliberately depends on nothing
else in llgrad so that the tensor class can call it from ``__repr__``.

Public API
----------
:func:`format_tensor`
    Format one tensor.
:func:`set_printoptions`, :func:`get_printoptions`, :func:`printoptions`
    Module-level print options mirroring ``torch.set_printoptions``,
    ``torch.get_printoptions`` and ``torch.printoptions``.

Formatting rules (the same as PyTorch's)
----------------------------------------
* Integer and bool tensors print each element with ``str()`` and right-align
  every element to the widest one.
* Floating tensors look at their non-zero finite values only:

  - *int mode* — every such value is integral: print ``4.`` style (``nan`` /
    ``inf`` get no trailing dot);
  - *scientific mode* — chosen automatically when ``max/min > 1000``,
    ``max > 1e8`` or ``min < 1e-4`` (``min``/``max`` of the absolute values),
    unless forced with ``set_printoptions(sci_mode=...)``; prints
    ``{:.{precision}e}``;
  - otherwise fixed point ``{:.{precision}f}``.

  All elements are right-aligned to one common width.  Values that do not
  take part in the width computation (zeros, ``nan``, ``inf``) may be wider
  than that width, in which case they are simply not padded — just as in
  PyTorch.
* Complex tensors format the real and imaginary parts with two independent
  formatters; the imaginary part is stripped of padding and joined with an
  explicit sign and a trailing ``j``.
* When the tensor has more than ``threshold`` elements it is summarized:
  each dimension longer than ``2 * edgeitems`` shows only its first and last
  ``edgeitems`` entries around ``...``; only the shown values influence the
  column width.
* Rows are wrapped so that no line exceeds ``linewidth`` (given the current
  indentation); slices of an n-d tensor are separated by ``n - 1``
  newlines.
* Suffixes (``size=``, ``dtype=``, ``grad_fn=``/``requires_grad=``) are
  appended with ``", "`` or, when the last line would become too long, on a
  new line indented to the opening parenthesis.  That decision measures the
  ``dtype=`` suffix as PyTorch spells it (``dtype=torch.float64``), so the
  output always equals ``repr(t).replace("torch.", "llgrad.")`` for the
  equivalent torch tensor ``t`` (see ``_LAYOUT_MODULE_NAME``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "format_tensor",
    "get_printoptions",
    "printoptions",
    "set_printoptions",
]

#: Name used in ``dtype=<module>.<dtype>`` suffixes.
_MODULE_NAME = "llgrad"
#: Name whose length is used when deciding where suffixes wrap.  Using
#: PyTorch's name keeps every line break where PyTorch puts it, so the output
#: is exactly ``repr(torch_tensor).replace("torch.", "llgrad.")`` (at the cost
#: of such a line being one character longer than ``linewidth`` allows).
_LAYOUT_MODULE_NAME = "torch"


# --------------------------------------------------------------------------
# Print options
# --------------------------------------------------------------------------


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTIONS = _PrintOptions()

_PROFILES: dict[str, dict[str, Any]] = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """Set the options used by :func:`format_tensor` (like ``torch.set_printoptions``).

    Args:
        precision: digits after the decimal point for floating output (default 4).
        threshold: number of elements above which output is summarized
            (default 1000).
        edgeitems: items shown at the beginning and end of each summarized
            dimension (default 3).
        linewidth: characters per line used for wrapping (default 80).
        profile: ``"default"``, ``"short"`` or ``"full"``; applied first, the
            explicit arguments then override it.  An unknown name is ignored,
            as in PyTorch.
        sci_mode: ``True``/``False`` to force or forbid scientific notation,
            ``None`` for automatic.  As in PyTorch this option is *always*
            assigned, so any call that omits it resets it to automatic.
    """
    if profile is not None and profile in _PROFILES:
        for key, value in _PROFILES[profile].items():
            setattr(_OPTIONS, key, value)
    if precision is not None:
        _OPTIONS.precision = precision
    if threshold is not None:
        _OPTIONS.threshold = threshold
    if edgeitems is not None:
        _OPTIONS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTIONS.linewidth = linewidth
    _OPTIONS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """Return the current print options as a dict accepted by :func:`set_printoptions`."""
    return dataclasses.asdict(_OPTIONS)


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Context manager that temporarily applies :func:`set_printoptions` arguments."""
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**saved)


# --------------------------------------------------------------------------
# Dtypes
# --------------------------------------------------------------------------

#: numpy dtype used to hold the values of each supported dtype name.
_NUMPY_DTYPES: dict[str, np.dtype[Any]] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.float32),  # values held in float32, see _round_to_bfloat16
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}


def _round_to_bfloat16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), kept as float32.

    Idempotent, so values the caller already rounded are returned unchanged.
    """
    flat = np.array(values, dtype=np.float32).reshape(-1)  # 1-d copy: array (not scalar) math
    bits = flat.view(np.uint32)
    rounding_bias = ((bits >> 16) & np.uint32(1)) + np.uint32(0x7FFF)
    rounded = ((bits + rounding_bias) & np.uint32(0xFFFF0000)).view(np.float32)
    # NaN payloads could carry into the exponent or wrap around; keep NaNs as they are.
    result = np.where(np.isnan(flat), flat, rounded)
    return result.reshape(np.shape(values))


def _coerce_values(values: Any, dtype_name: str) -> np.ndarray:
    """Return ``values`` as a numpy array of the dtype that holds ``dtype_name``."""
    try:
        np_dtype = _NUMPY_DTYPES[dtype_name]
    except KeyError:
        supported = ", ".join(sorted(_NUMPY_DTYPES))
        raise ValueError(
            f"unsupported dtype_name {dtype_name!r}; expected one of: {supported}"
        ) from None
    array = np.asarray(values)
    if array.dtype != np_dtype:
        array = array.astype(np_dtype)
    if dtype_name == "bfloat16":
        array = _round_to_bfloat16(array)
    return array


def _has_default_dtype(dtype_name: str, default_float_dtype: str) -> bool:
    """Whether a non-empty tensor of ``dtype_name`` omits its ``dtype=`` suffix."""
    default_complex = "complex128" if default_float_dtype == "float64" else "complex64"
    return dtype_name in (default_float_dtype, default_complex, "int64", "bool")


# --------------------------------------------------------------------------
# Element formatting
# --------------------------------------------------------------------------


class _Formatter:
    """Formats the elements of one real-valued tensor to a common width.

    Built from the (possibly summarized) values that will actually be shown.
    """

    def __init__(self, sample: np.ndarray, floating: bool, precision: int) -> None:
        self.floating = floating
        self.precision = precision
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1

        flat = sample.reshape(-1)
        if not floating:
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(str(value)))
            return

        shown = flat[np.isfinite(flat) & (flat != 0)]
        if shown.size == 0:
            return  # only zeros / nan / inf: keep the defaults

        magnitudes = np.abs(shown).astype(np.float64)
        smallest = float(magnitudes.min())
        largest = float(magnitudes.max())
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        if _OPTIONS.sci_mode is None:
            self.sci_mode = largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4
        else:
            self.sci_mode = bool(_OPTIONS.sci_mode)

        numbers: list[float] = shown.tolist()
        if self.sci_mode:
            width = max(len(f"{v:.{precision}e}") for v in numbers)
        elif self.int_mode:
            width = max(len(f"{v:.0f}") for v in numbers) + 1  # +1 for the trailing "."
        else:
            width = max(len(f"{v:.{precision}f}") for v in numbers)
        self.max_width = max(self.max_width, width)

    def format(self, value: float | int | bool) -> str:
        """Format one Python scalar, right-aligned to the common width."""
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{self.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                text += "."
        else:
            text = f"{value:.{self.precision}f}"
        return text.rjust(self.max_width)


class _ElementPrinter:
    """Formats elements of a real or complex tensor (one or two :class:`_Formatter`)."""

    def __init__(self, real: _Formatter, imag: _Formatter | None = None) -> None:
        self.real = real
        self.imag = imag

    @property
    def element_width(self) -> int:
        """Width of one element including the ``", "`` separator."""
        width = self.real.max_width + 2
        if self.imag is not None:
            width += self.imag.max_width + 1  # +1 for the "j"
        return width

    def __call__(self, value: Any) -> str:
        if self.imag is None:
            return self.real.format(value)
        real_text = self.real.format(value.real)
        imag_text = (self.imag.format(value.imag) + "j").lstrip()
        if imag_text[0] in "+-":
            return real_text + imag_text
        return real_text + "+" + imag_text


# --------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------


def _summarized_values(array: np.ndarray, edgeitems: int) -> np.ndarray:
    """Flat array of the values that a summarized print actually shows."""
    if array.ndim == 0:
        return array.reshape(-1)
    if array.ndim == 1:
        if array.shape[0] > 2 * edgeitems:
            # Note: with edgeitems == 0, array[-0:] is the whole array (as in PyTorch).
            return np.concatenate((array[:edgeitems], array[-edgeitems:]))
        return array
    if not edgeitems:
        return array.reshape(-1)[:0]
    length = array.shape[0]
    if length > 2 * edgeitems:
        indices = [*range(edgeitems), *range(length - edgeitems, length)]
    else:
        indices = list(range(length))
    return np.concatenate([_summarized_values(array[i], edgeitems) for i in indices])


def _vector_str(vector: np.ndarray, indent: int, summarize: bool, printer: _ElementPrinter) -> str:
    edgeitems = _OPTIONS.edgeitems
    per_line = max(1, math.floor((_OPTIONS.linewidth - indent) / printer.element_width))

    if summarize and not edgeitems:
        items = ["..."]
    elif summarize and vector.shape[0] > 2 * edgeitems:
        items = (
            [printer(v) for v in vector[:edgeitems].tolist()]
            + [" ..."]
            + [printer(v) for v in vector[-edgeitems:].tolist()]
        )
    else:
        items = [printer(v) for v in vector.tolist()]

    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(array: np.ndarray, indent: int, summarize: bool, printer: _ElementPrinter) -> str:
    if array.ndim == 0:
        return printer(array.item())
    if array.ndim == 1:
        return _vector_str(array, indent, summarize, printer)

    edgeitems = _OPTIONS.edgeitems
    length = array.shape[0]
    if summarize and length > 2 * edgeitems:
        slices = (
            [_array_str(array[i], indent + 1, summarize, printer) for i in range(edgeitems)]
            + ["..."]
            + [
                _array_str(array[i], indent + 1, summarize, printer)
                for i in range(length - edgeitems, length)
            ]
        )
    else:
        slices = [_array_str(array[i], indent + 1, summarize, printer) for i in range(length)]

    separator = "," + "\n" * (array.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(slices) + "]"


def _body_str(array: np.ndarray, indent: int) -> str:
    """Bracketed element text of a non-empty tensor."""
    summarize = array.size > _OPTIONS.threshold
    sample = _summarized_values(array, _OPTIONS.edgeitems) if summarize else array
    precision = _OPTIONS.precision
    if np.iscomplexobj(array):
        printer = _ElementPrinter(
            _Formatter(sample.real, True, precision), _Formatter(sample.imag, True, precision)
        )
    else:
        floating = bool(np.issubdtype(array.dtype, np.floating))
        printer = _ElementPrinter(_Formatter(sample, floating, precision))
    return _array_str(array, indent, summarize, printer)


def _add_plain(suffixes: list[tuple[str, int]], suffix: str) -> None:
    """Append a suffix whose layout length is its own length."""
    suffixes.append((suffix, len(suffix)))


def _append_suffixes(text: str, suffixes: list[tuple[str, int]], indent: int) -> str:
    """Append ``suffixes`` (text, layout length) and the closing parenthesis.

    A suffix goes on a new line, indented by ``indent``, when the current
    line would otherwise grow past ``linewidth``.
    """
    parts = [text]
    # PyTorch's measure of the last line (one more than its real length when
    # there is a newline, two more when there is none); kept for exactness.
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix, suffix_len in suffixes:
        if last_line_len + suffix_len + 2 > _OPTIONS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + suffix_len
        else:
            parts.append(", " + suffix)
            last_line_len += suffix_len + 2
    parts.append(")")
    return "".join(parts)


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def format_tensor(
    values: Any,
    *,
    dtype_name: str,
    requires_grad: bool = False,
    grad_fn_name: str | None = None,
    prefix: str = "tensor(",
    default_float_dtype: str = "float32",
    device: str | None = None,
) -> str:
    """Format a tensor exactly like PyTorch's ``repr``, with ``llgrad`` for ``torch``.

    Args:
        values: the tensor's values as a numpy array (or anything
            ``numpy.asarray`` accepts) of the tensor's shape.  It is converted
            to the numpy dtype that holds ``dtype_name``: float16 values as
            float16, bfloat16 values as float32 (they are rounded to bfloat16
            here, which is a no-op for values already rounded), complex as
            complex64/complex128, integers and bool as themselves.
        dtype_name: dtype name without module prefix: ``float16``,
            ``bfloat16``, ``float32``, ``float64``, ``complex64``,
            ``complex128``, ``int8``, ``int16``, ``int32``, ``int64``,
            ``uint8``, ``uint16``, ``uint32``, ``uint64`` or ``bool``.
        requires_grad: adds ``requires_grad=True`` when no ``grad_fn_name``
            is given.
        grad_fn_name: class name of the tensor's backward node; adds
            ``grad_fn=<name>`` (and suppresses ``requires_grad=True``).
        prefix: text before the values; its length is the continuation
            indent (``"tensor("`` for plain tensors).
        default_float_dtype: the current default floating dtype (PyTorch's
            ``torch.get_default_dtype()``).  It decides whether the
            ``dtype=`` suffix is shown: non-empty tensors omit it for this
            dtype, its complex counterpart (complex128 for float64, otherwise
            complex64), int64 and bool; empty tensors omit it only for this
            dtype.

    Returns:
        The text, e.g. ``"tensor([1.5000, 2.0000], dtype=llgrad.float64)"``.

    Raises:
        ValueError: for an unsupported ``dtype_name``.
    """
    array = _coerce_values(values, dtype_name)
    indent = len(prefix)
    suffixes: list[tuple[str, int]] = []  # (text, length used for line wrapping)
    if device is not None:  # a tensor off the CPU names its device first
        _add_plain(suffixes, f"device='{device}'")
    dtype_suffix = (
        f"dtype={_MODULE_NAME}.{dtype_name}",
        len(f"dtype={_LAYOUT_MODULE_NAME}.{dtype_name}"),
    )

    if array.size == 0:
        # Explicit shape unless it is (0,), like NumPy; there are no elements
        # to infer an integer dtype from, so only the default float dtype is
        # left implicit.
        if array.ndim != 1:
            _add_plain(suffixes, f"size={tuple(array.shape)}")
        if dtype_name != default_float_dtype:
            suffixes.append(dtype_suffix)
        body = "[]"
    else:
        if not _OPTIONS.edgeitems:
            _add_plain(suffixes, f"size={tuple(array.shape)}")
        if not _has_default_dtype(dtype_name, default_float_dtype):
            suffixes.append(dtype_suffix)
        body = _body_str(array, indent)

    if grad_fn_name is not None:
        _add_plain(suffixes, f"grad_fn=<{grad_fn_name}>")
    elif requires_grad:
        _add_plain(suffixes, "requires_grad=True")

    return _append_suffixes(prefix + body, suffixes, indent)
