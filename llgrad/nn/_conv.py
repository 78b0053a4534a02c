"""Convolutions and transposed convolutions over 1, 2 and 3 spatial dimensions.

`conv2d` runs the registered `conv2d` composite op (one `ConvolutionBackward0` node whose
rule is written with llgrad functions, so double backward works); `conv1d` is that op over
a height-1 plane and `conv3d` sums one `conv2d` per kernel depth tap over the matching
depth slices (folded into the batch). The transposed convolutions multiply the input by the
weight matrix (one matmul per group) and add every kernel tap's columns where its window
reads (`col2im_nd`: per output phase, a sum of shifted slices of the once-padded columns,
the adjoint of a convolution's window reads), then crop `padding`; their gradients,
forward-mode rules and compiled code come from those ops. Semantics (output sizes, 'same'
padding with an odd total, groups, dilation, output_padding, unbatched inputs) are
PyTorch's.

Eager calls: a call's checks depend only on its operands' layouts and its arguments, so
their result is cached by those (`_plans`); every form but the batched conv2d (already one
compiled node) then runs as a `composite_function`, one compiled graph per signature, so
an eager convolution of any rank is one native call after its first.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .. import functions as lg
from ..dispatch.apply import composite_function
from ..ops.nn import im2col
from ..tensor import DENSE_CLASSES, Tensor
from ._base import _composite, _tensor
from ._layers import _ints

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "conv_tbc",
]

_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def _unbatched(op: str, x: Tensor, n: int) -> bool:
    """Check an (N, C, *spatial) or unbatched (C, *spatial) input; True when unbatched."""
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"{op}: Expected {n + 1}D (unbatched) or {n + 2}D (batched) input "
            f"(C, {_SPATIAL[n]}) or (N, C, {_SPATIAL[n]}), but got input of "
            f"size: {list(x.shape)}"
        )
    return x.ndim == n + 1


def _check_operands(op: str, x: Tensor, w: Tensor, b: Tensor | None, n: int) -> None:
    if w.ndim != n + 2:
        raise RuntimeError(f"{op}: expected a {n + 2}-D weight, got weight of size {list(w.shape)}")
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and t._dtype is not x._dtype:
            raise TypeError(
                f"{op}: Input type ({x._dtype.name}) and {name} type "
                f"({t._dtype.name}) should be the same"
            )
    if not (x._dtype.is_floating_point or x._dtype.kind in "iuc"):
        raise TypeError(
            f"{op}: expected a floating point, complex or integer input, got "
            f"{x._dtype.name} (shape {list(x.shape)})"
        )


def same_padding(
    kernel: Sequence[int], dilation: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """'same' padding per dimension as (before, after): the total d (k - 1) split with the
    odd element after, as PyTorch."""
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return tuple(t // 2 for t in totals), tuple(t - t // 2 for t in totals)


def _conv_padding(
    op: str,
    padding: Any,
    n: int,
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(symmetric padding, extra padding after) for an int/tuple/'same'/'valid' padding."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * n, (0,) * n
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(
                    f"{op}: padding='same' is not supported for strided "
                    f"convolutions (stride {list(stride)})"
                )
            lo, hi = same_padding(kernel, dilation)
            return lo, tuple(h - l for l, h in zip(lo, hi))
        raise ValueError(
            f"{op}: Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}"
        )
    p = _ints(op, "padding", padding, n)
    if any(v < 0 for v in p):
        raise RuntimeError(f"{op}: negative padding is not supported, got {list(p)}")
    return p, (0,) * n


def _arg_key(v: Any) -> Any:
    """`v` (an int, None, a string or a flat tuple/list of ints) as part of a plan key, with
    its classes (True, 1 and 1.0 are equal keys otherwise); None when it cannot be one."""
    c = v.__class__
    if c is int or c is str or v is None:
        return (c, v)
    if c is tuple or c is list:
        if not all(x.__class__ is int for x in v):
            return None
        return (c, tuple(v))
    return None


def _plan_key(op: str, tensors: Sequence[Any], args: Sequence[Any]) -> tuple | None:
    """The key of a call's validated plan: the op, the tensors' layouts (dtype, shape,
    strides; plain tensors and parameters only) and the other arguments by class and value;
    None when a value cannot be part of one (the call is validated as it comes)."""
    layouts = []
    for t in tensors:
        if t is None:
            layouts.append(None)
        elif t.__class__ in DENSE_CLASSES:
            layouts.append(t._lkey)
        else:
            return None
    keys = []
    for a in args:
        k = _arg_key(a)
        if k is None:
            return None
        keys.append(k)
    return (op, tuple(layouts), tuple(keys))


# validated calls: plan key -> the normalized arguments (the checks do not depend on
# values, so a key that passed once passes again)
_plans: dict[tuple, tuple] = {}
_PLAN_LIMIT = 4096


def _remember(key: tuple | None, plan: tuple) -> tuple:
    if key is not None and len(_plans) < _PLAN_LIMIT:
        _plans[key] = plan
    return plan


def _conv_plan(
    op: str,
    n: int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> tuple[bool, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Check a convolution's operands and arguments (PyTorch's errors): (unbatched, stride,
    symmetric padding, extra padding after, dilation)."""
    _tensor(op, "input", input)
    _tensor(op, "weight", weight)
    if bias is not None:
        _tensor(op, "bias", bias)
    unbatched = _unbatched(op, input, n)
    _check_operands(op, input, weight, bias, n)
    xshape = (1,) + tuple(input.shape) if unbatched else tuple(input.shape)
    s = _ints(op, "stride", stride, n)
    d = _ints(op, "dilation", dilation, n)
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}: non-positive stride is not supported, got {list(s)}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}: dilation should be greater than zero, got {list(d)}")
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got {groups}")
    k = tuple(weight.shape[2:])
    p, extra = _conv_padding(op, padding, n, k, s, d)
    c, oc = xshape[1], weight.shape[0]
    if c != weight.shape[1] * groups:
        raise RuntimeError(
            f"{op}: Given groups={groups}, weight of size {list(weight.shape)}, "
            f"expected input{list(xshape)} to have {weight.shape[1] * groups} "
            f"channels, but got {c} channels instead"
        )
    if oc % groups:
        raise RuntimeError(
            f"{op}: Given groups={groups}, expected weight to be divisible by "
            f"{groups} at dimension 0, but got weight of size "
            f"{list(weight.shape)} instead"
        )
    if bias is not None and tuple(bias.shape) != (oc,):
        raise RuntimeError(
            f"{op}: Given weight of size {list(weight.shape)}, expected bias to "
            f"be 1-dimensional with {oc} elements, but got bias of size "
            f"{list(bias.shape)} instead"
        )
    padded = [xshape[2 + i] + 2 * p[i] + extra[i] for i in range(n)]
    eff = [d[i] * (k[i] - 1) + 1 for i in range(n)]
    if any(e > q for e, q in zip(eff, padded)):
        raise RuntimeError(
            f"{op}: Calculated padded input size per channel: "
            f"({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, eff))}). Kernel size can't be greater than "
            f"actual input size; output size is too small"
        )
    return unbatched, s, p, extra, d


def _convnd(
    op: str,
    n: int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> Tensor:
    key = _plan_key(op, (input, weight, bias), (stride, padding, dilation, groups))
    plan = _plans.get(key) if key is not None else None
    if plan is None:
        plan = _remember(
            key, _conv_plan(op, n, input, weight, bias, stride, padding, dilation, groups)
        )
    unbatched, s, p, extra, d = plan
    if n == 2 and not unbatched and not any(extra):
        return _conv2d_op(input, weight, bias, s, p, d, groups)  # one compiled node
    return _conv_run(input, weight, bias, n, s, p, extra, d, groups, unbatched)


@composite_function
def _conv_run(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    n: int,
    s: tuple[int, ...],
    p: tuple[int, ...],
    extra: tuple[int, ...],
    d: tuple[int, ...],
    groups: int,
    unbatched: bool,
) -> Tensor:
    """A checked convolution of any rank (batched or not, 'same' padding's extra zeros):
    eagerly its parts run compiled as one graph per signature (its views and the depth
    taps of a 3-D convolution included), so a call is one native call."""
    x = lg.unsqueeze(input, 0) if unbatched else input
    if any(extra):
        x = lg.pad_dims(x, (0,) * (n + 2), (0, 0) + tuple(extra))
    if n == 2:
        out = _conv2d_op(x, weight, bias, s, p, d, groups)
    elif n == 1:
        out = lg.squeeze(
            _conv2d_op(
                lg.unsqueeze(x, 2),
                lg.unsqueeze(weight, 2),
                bias,
                (1, s[0]),
                (0, p[0]),
                (1, d[0]),
                groups,
            ),
            2,
        )
    else:
        out = _conv3d_by_depth(x, weight, bias, s, p, d, groups)
    return lg.squeeze(out, 0) if unbatched else out


def _conv2d_op(
    x: Tensor,
    w: Tensor,
    b: Tensor | None,
    s: Sequence[int],
    p: Sequence[int],
    d: Sequence[int],
    groups: int,
) -> Tensor:
    if x._dtype.kind in "iuc":
        return _conv2d_by_matmul(x, w, b, s, p, d, groups)
    operands = [x, w] if b is None else [x, w, b]
    return _composite(
        "conv2d",
        operands,
        {
            "stride": tuple(s),
            "padding": tuple(p),
            "dilation": tuple(d),
            "groups": groups,
            "has_bias": b is not None,
        },
    )


def _conv2d_by_matmul(
    x: Tensor,
    w: Tensor,
    b: Tensor | None,
    s: Sequence[int],
    p: Sequence[int],
    d: Sequence[int],
    groups: int,
) -> Tensor:
    """conv2d of integer tensors (exact integer arithmetic, wrapping on overflow as torch's
    integer kernels) and of complex ones: every window tap as a strided slice (im2col),
    then one batched matmul over the groups; differentiable by composition."""
    nb, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    xp = lg.pad_dims(x, (0, 0, p[0], p[1]), (0, 0, p[0], p[1])) if any(p) else x
    cols = im2col(lg, xp, (kh, kw), tuple(s), tuple(d), (oh, ow))  # (N, C, KH*KW, OH, OW)
    cols = lg.reshape(cols, (nb, groups, cg * kh * kw, oh * ow))
    wm = lg.reshape(w, (1, groups, oc // groups, cg * kh * kw))
    out = lg.reshape(lg.matmul(wm, cols), (nb, oc, oh, ow))
    if b is not None:
        out = lg.add(out, lg.reshape(b, (1, oc, 1, 1)))
    return out


def _conv3d_by_depth(
    x: Tensor,
    w: Tensor,
    b: Tensor | None,
    s: Sequence[int],
    p: Sequence[int],
    d: Sequence[int],
    groups: int,
) -> Tensor:
    """sum over kernel depth taps kd of conv2d(x[:, :, kd d + od s], w[:, :, kd]), with the
    output depths od folded into the batch."""
    n, c, depth = x.shape[:3]
    kd = w.shape[2]
    od = (depth + 2 * p[0] - d[0] * (kd - 1) - 1) // s[0] + 1
    xp = x if p[0] == 0 else lg.pad_dims(x, (0, 0, p[0], 0, 0), (0, 0, p[0], 0, 0))
    xp = lg.permute(xp, (0, 2, 1, 3, 4))  # (N, Dp, C, H, W)
    total = None
    for t in range(kd):
        start = t * d[0]
        rows = lg.slice_dim(xp, 1, start, start + s[0] * (od - 1) + 1, s[0])
        rows = lg.reshape(rows, (n * od, c) + tuple(x.shape[3:]))
        part = _conv2d_op(rows, lg.select(w, 2, t), None, s[1:], p[1:], d[1:], groups)
        total = part if total is None else lg.add(total, part)
    assert total is not None
    out = lg.permute(lg.reshape(total, (n, od) + tuple(total.shape[1:])), (0, 2, 1, 3, 4))
    if b is not None:
        out = lg.add(out, lg.reshape(b, (1, -1, 1, 1, 1)))
    return out


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation of an (N, C, L) or (C, L) input with an (out, C/groups, k)
    weight. `padding`: an int, a 1-tuple, 'valid' or 'same' (stride 1)."""
    return _convnd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-D convolution over a (time, batch, in_channels) sequence with a (kernel width,
    in_channels, out_channels) weight and an (out_channels,) bias, `pad` steps of zeros at
    both ends of time: a (time', batch, out_channels) result, as torch's conv_tbc (the
    layout of fairseq's convolutions). Computed as `conv1d` on the permuted operands, so
    gradients (and double backward) are conv1d's."""
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        _tensor("conv_tbc", name, t)
    if input.ndim != 3:
        raise RuntimeError(
            f"conv_tbc: Input must have 3 dims: time, batch, in_channel (got {list(input.shape)})"
        )
    if weight.ndim != 3:
        raise RuntimeError(
            "conv_tbc: Weight tensor must have 3 dims: kernel_width, "
            f"in_channels, out_channels (got {list(weight.shape)})"
        )
    if bias.ndim != 1:
        raise RuntimeError(f"conv_tbc: Bias must be 1-D (got {list(bias.shape)})")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError(
            f"conv_tbc: Input dim 2 (input channels) is not == dim 1 in the "
            f"weight tensor (input {list(input.shape)}, weight "
            f"{list(weight.shape)})"
        )
    if weight.shape[2] != bias.shape[0]:
        raise RuntimeError(
            "conv_tbc: Bias size must equal dim 2 in the weight tensor "
            f"(output channels): bias {list(bias.shape)}, weight "
            f"{list(weight.shape)}"
        )
    out = conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation of an (N, C, H, W) or (C, H, W) input with an
    (out, C/groups, kH, kW) weight; recorded as one `ConvolutionBackward0` node."""
    return _convnd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-D cross-correlation of an (N, C, D, H, W) or (C, D, H, W) input with an
    (out, C/groups, kD, kH, kW) weight. Built from one 2-D convolution per kernel depth tap
    (PyTorch's grad_fn: ConvolutionBackward0; here the node of the composite's last op)."""
    return _convnd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


# --------------------------------------------------------------------------------------
# Transposed convolutions
# --------------------------------------------------------------------------------------


def transposed_output_size(
    size: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    output_padding: Sequence[int],
) -> tuple[int, ...]:
    """(I - 1) s - 2 p + d (k - 1) + output_padding + 1 per spatial dimension."""
    return tuple(
        (i - 1) * s - 2 * p + d * (k - 1) + op + 1
        for i, k, s, p, d, op in zip(size, kernel, stride, padding, dilation, output_padding)
    )


def _transposed_plan(
    op: str,
    n: int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
) -> tuple[bool, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Check a transposed convolution's operands and arguments (PyTorch's errors):
    (unbatched, stride, padding, dilation, output size)."""
    _tensor(op, "input", input)
    _tensor(op, "weight", weight)
    if bias is not None:
        _tensor(op, "bias", bias)
    unbatched = _unbatched(op, input, n)
    _check_operands(op, input, weight, bias, n)
    xshape = (1,) + tuple(input.shape) if unbatched else tuple(input.shape)
    if isinstance(padding, str):
        raise ValueError(
            f"{op}: padding must be an int or a tuple of ints (no 'same'/'valid' "
            f"for transposed convolutions), got {padding!r}"
        )
    s = _ints(op, "stride", stride, n)
    p = _ints(op, "padding", padding, n)
    op_ = _ints(op, "output_padding", output_padding, n)
    d = _ints(op, "dilation", dilation, n)
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}: non-positive stride is not supported, got {list(s)}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}: dilation should be greater than zero, got {list(d)}")
    if any(v < 0 for v in p + op_):
        raise RuntimeError(
            f"{op}: negative padding is not supported, got padding {list(p)}, "
            f"output_padding {list(op_)}"
        )
    if any(o >= max(a, b) for o, a, b in zip(op_, s, d)):
        raise RuntimeError(
            f"{op}: output padding must be smaller than either stride or "
            f"dilation, but got output_padding={list(op_)}, stride={list(s)}, "
            f"dilation={list(d)}"
        )
    if not isinstance(groups, int) or groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got {groups}")
    cin, cout_g = weight.shape[:2]
    k = tuple(weight.shape[2:])
    if xshape[1] != cin:
        raise RuntimeError(
            f"{op}: Given transposed=1, weight of size {list(weight.shape)}, "
            f"expected input{list(xshape)} to have {cin} channels, but got "
            f"{xshape[1]} channels instead"
        )
    if cin % groups:
        raise RuntimeError(
            f"{op}: Given groups={groups}, expected weight to be divisible by "
            f"{groups} at dimension 0, but got weight of size "
            f"{list(weight.shape)} instead"
        )
    cout = cout_g * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise RuntimeError(
            f"{op}: Given transposed=1, weight of size {list(weight.shape)}, "
            f"expected bias to be 1-dimensional with {cout} elements, but got "
            f"bias of size {list(bias.shape)} instead"
        )
    size = xshape[2:]
    out_size = transposed_output_size(size, k, s, p, d, op_)
    if any(o <= 0 for o in out_size):
        raise RuntimeError(
            f"{op}: Given input size per channel: ({' x '.join(map(str, size))})"
            f". Calculated output size per channel: "
            f"({' x '.join(map(str, out_size))}). Output size is too small"
        )
    return unbatched, s, p, d, out_size


def _conv_transposend(
    op: str,
    n: int,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
) -> Tensor:
    key = _plan_key(op, (input, weight, bias), (stride, padding, output_padding, groups, dilation))
    plan = _plans.get(key) if key is not None else None
    if plan is None:
        plan = _remember(
            key,
            _transposed_plan(
                op, n, input, weight, bias, stride, padding, output_padding, groups, dilation
            ),
        )
    unbatched, s, p, d, out_size = plan
    return _conv_transpose_run(input, weight, bias, n, s, p, d, groups, out_size, unbatched)


@composite_function
def _conv_transpose_run(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    n: int,
    s: tuple[int, ...],
    p: tuple[int, ...],
    d: tuple[int, ...],
    groups: int,
    out_size: tuple[int, ...],
    unbatched: bool,
) -> Tensor:
    """A checked transposed convolution: one matmul of the weight matrix by the input, then
    every kernel tap's values added where its window reads them (col2im, the adjoint of a
    convolution's window reads), cropped by `padding`. Eagerly its parts run compiled as
    one graph per signature."""
    x = lg.unsqueeze(input, 0) if unbatched else input
    cin, cout_g = weight.shape[:2]
    k = tuple(weight.shape[2:])
    cout = cout_g * groups
    size = tuple(x.shape[2:])
    nb = x.shape[0]
    taps = math.prod(k)
    spatial = math.prod(size)
    # cols[n, o, tap, i] = sum_c x[n, c, i] w[c, o, tap] within each group
    xm = lg.reshape(x, (nb, groups, cin // groups, spatial))
    wm = lg.transpose(lg.reshape(weight, (groups, cin // groups, cout_g * taps)), 1, 2)
    cols = lg.reshape(lg.matmul(wm, xm), (nb, cout, taps) + size)
    out = col2im_nd(cols, tuple(q + o for q, o in zip(p, out_size)), k, s, d)
    if any(p) or tuple(out.shape[2:]) != out_size:  # crop `padding` and the rounding
        out = lg.slice_all(
            out,
            (0, 0) + tuple(p),
            (nb, cout) + tuple(q + o for q, o in zip(p, out_size)),
            (1,) * (n + 2),
        )
    if bias is not None:
        out = lg.add(out, lg.reshape(bias, (1, cout) + (1,) * n))
    return lg.squeeze(out, 0) if unbatched else out


def col2im_nd(
    cols: Tensor,
    size: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> Tensor:
    """The adjoint of a convolution's window reads over any number of spatial dimensions:
    (N, C, taps, *windows) columns summed into an (N, C, *size') tensor whose first `size`
    positions hold, at each position, the sum of the window taps that read it (size' is
    `size` rounded up to whole strides; the caller crops).

    Position f = i s + t d (window i, tap t) per dimension. The output is split by phase
    r = f mod s: within one phase, the taps with t d = r (mod s) each add the columns
    shifted by (t d - r) / s windows, so a phase is a sum of same-shape slices of the
    columns, padded once with zeros (no interior gaps, no per-tap buffers of the full
    size); the phases are then interleaved. With stride 1 there is one phase."""
    nb, c, _ = cols.shape[:3]
    windows = tuple(cols.shape[3:])
    n = len(windows)
    # per dimension: phase length q (whole strides covering `size`), and for each tap its
    # phase and its shift in windows
    q = tuple(-(-sz // st) for sz, st in zip(size, stride))
    shifts = [[(t * dl) // st for t in range(kk)] for kk, st, dl in zip(kernel, stride, dilation)]
    phases_of = [[(t * dl) % st for t in range(kk)] for kk, st, dl in zip(kernel, stride, dilation)]
    most = tuple(max(m) for m in shifts)
    # zero columns before (the largest shift) and after (up to the phase length)
    lows = tuple(most)
    highs = tuple(max(0, qq - w) for qq, w in zip(q, windows))
    padded = (
        lg.pad_dims(cols, (0, 0, 0) + lows, (0, 0, 0) + highs) if any(lows) or any(highs) else cols
    )
    sums: dict[tuple[int, ...], Tensor] = {}
    for t in range(math.prod(kernel)):
        tap = _unravel(t, kernel)
        phase = tuple(phases_of[j][tap[j]] for j in range(n))
        starts = tuple(most[j] - shifts[j][tap[j]] for j in range(n))
        piece = lg.slice_all(
            padded,
            (0, 0, t) + starts,
            (nb, c, t + 1) + tuple(a + qq for a, qq in zip(starts, q)),
            (1,) * (n + 3),
        )
        sums[phase] = piece if phase not in sums else lg.add(sums[phase], piece)
    if all(st == 1 for st in stride):
        return lg.reshape(sums[(0,) * n], (nb, c) + q)
    parts = []
    zero = None
    for flat in range(math.prod(stride)):
        phase = _unravel(flat, stride)
        part = sums.get(phase)
        if part is None:  # no tap lands on this phase
            if zero is None:
                zero = lg.zeros((nb, c, 1) + q, dtype=cols.dtype)
            part = zero
        parts.append(part)
    # (N, C, s0 * s1 ..., q0, q1, ...) -> (N, C, q0, s0, q1, s1, ...) -> (N, C, q0 s0, ...)
    stacked = lg.reshape(lg.cat(parts, 2), (nb, c) + tuple(stride) + q)
    order = (0, 1) + tuple(v for j in range(n) for v in (2 + n + j, 2 + j))
    return lg.reshape(
        lg.permute(stacked, order), (nb, c) + tuple(qq * st for qq, st in zip(q, stride))
    )


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """1-D transposed convolution (the gradient of conv1d with respect to its input) of an
    (N, C_in, L) or (C_in, L) input with a (C_in, C_out/groups, k) weight."""
    return _conv_transposend(
        "conv_transpose1d",
        1,
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """2-D transposed convolution of an (N, C_in, H, W) or (C_in, H, W) input with a
    (C_in, C_out/groups, kH, kW) weight. Built from a matmul and the sum of its columns
    (`col2im_nd`); PyTorch's grad_fn is ConvolutionBackward0, here the last op's node."""
    return _conv_transposend(
        "conv_transpose2d",
        2,
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """3-D transposed convolution of an (N, C_in, D, H, W) or (C_in, D, H, W) input with a
    (C_in, C_out/groups, kD, kH, kW) weight."""
    return _conv_transposend(
        "conv_transpose3d",
        3,
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )
