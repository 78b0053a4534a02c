"""`llgrad.onnx`: export a module or function to an ONNX model, as `torch.onnx.export` does.

The model is traced with llgrad's tracer (the graph `lg.make_ir` shows) and each IR op is
translated to ONNX operators with the `onnx` package's helper API. `onnx` (and
`onnxruntime`, to run the result) are an optional extra, `pip install 'llgrad[onnx]'`:
importing `llgrad` never imports them; `export` does, when it is called.

Where llgrad differs from torch (`dynamo=False`, the TorchScript exporter):
- the graph is llgrad's traced IR, so the exported ops are llgrad's decompositions (an
  average pool is slices and adds, an adaptive average pool a matmul with a constant
  matrix, an N-d convolution a 2-d one between reshapes); the numbers are the same;
- the IR is static-shaped: with `dynamic_axes` the model is traced twice, at the given
  sizes and at sizes one larger along the named axes, and every shape-carrying attribute
  that differs between the two traces is exported in a form that follows the input
  (a `-1` in a reshape target, a `1` in an expand target where the input carries the
  size, an open-ended slice). Where a size is baked in some other way (a constant of the
  batch shape, two sizes of one reshape target depending on it) `export` raises
  `OnnxExporterError` naming the op and line, instead of writing a model that only runs
  at the traced size;
- default input names are the parameter names of the function (or `forward`), the
  default output names `output` (one output) or `output_0, output_1, ...`;
- with `f=None` the `onnx.ModelProto` is returned instead of torch's `ONNXProgram`;
- `dynamo`, `verbose` and `optimize` are accepted for compatibility; llgrad has one
  exporter.
"""

from __future__ import annotations

import enum
import os
from typing import IO, Any, Mapping, Sequence

__all__ = [
    "export",
    "is_in_onnx_export",
    "OnnxExporterError",
    "UnsupportedOperatorError",
    "TrainingMode",
    "producer_name",
    "producer_version",
    "SUPPORTED_OPS",
]

producer_name = "llgrad"
try:
    from .._version import __version__ as producer_version
except ImportError:  # pragma: no cover - a source tree without the version file
    producer_version = "0"

_IN_EXPORT = [False]


class OnnxExporterError(RuntimeError):
    """An error of the ONNX exporter (as `torch.onnx.OnnxExporterError`)."""


class UnsupportedOperatorError(OnnxExporterError):
    """An IR op that has no ONNX translation; the message names the op and the user's
    source line that produced it.

    Args:
        name: the IR op's name (e.g. ``"lgamma"``).
        location: ``file.py:line`` of the user's code that traced it, or None.
        reason: why it cannot be translated.
    """

    def __init__(self, name: str, location: str | None = None, reason: str = "") -> None:
        self.name, self.location, self.reason = name, location, reason
        where = f" (at {location})" if location else ""
        why = f": {reason}" if reason else ""
        super().__init__(f"Exporting the operator '{name}'{where} to ONNX is not supported{why}")


class TrainingMode(enum.IntEnum):
    """Which mode a module is exported in (as `torch.onnx.TrainingMode`)."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


def is_in_onnx_export() -> bool:
    """True while `llgrad.onnx.export` is tracing a model."""
    return _IN_EXPORT[0]


def _supported() -> frozenset[str]:
    from ._translate import supported_ops  # circle: onnx._translate -> here

    return supported_ops()


def __getattr__(name: str) -> Any:
    if name == "SUPPORTED_OPS":
        return _supported()
    raise AttributeError(f"module 'llgrad.onnx' has no attribute {name!r}")


def export(
    model: Any,
    args: Any = (),
    f: str | os.PathLike | IO[bytes] | None = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    verbose: bool | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = 17,
    dynamo: bool = True,
    dynamic_axes: Mapping[str, Any] | None = None,
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    training: TrainingMode = TrainingMode.EVAL,
    do_constant_folding: bool = True,
    optimize: bool = True,
) -> Any:
    """Export `model` (an `nn.Module` or a function of tensors) run on `args` to ONNX.

    Args:
        model: an `llgrad.nn.Module` or a Python function of llgrad tensors.
        args: the positional arguments (a tuple, or one tensor); nested lists, tuples and
            dicts of tensors are flattened into graph inputs in order. Python numbers are
            traced as constants.
        f: a path or a binary file object the model is written to; None returns the
            `onnx.ModelProto` instead (torch returns an ``ONNXProgram`` there).
        kwargs: keyword arguments for the call (their tensors follow those of `args`).
        input_names, output_names: names of the graph inputs and outputs, in order;
            missing ones get the defaults (see the module's docstring).
        opset_version: the default-domain opset to target (13 to the installed onnx's
            newest; 17 by default, as torch; None means 17).
        dynamic_axes: ``{name: {axis: "symbol"}}`` or ``{name: [axis, ...]}`` for inputs
            and outputs whose sizes vary (see the module's docstring for how far the
            exported graph follows them).
        export_params: True stores a module's parameters and buffers as initializers named
            by their `state_dict` keys; False makes them graph inputs after the user's.
        keep_initializers_as_inputs: also list the initializers as graph inputs.
        training: `TrainingMode.EVAL` (default) exports a module in eval mode and restores
            its modes afterwards; `PRESERVE` keeps them; `TRAINING` exports in train mode
            (dropout then traces to random ops, which do not export).
        do_constant_folding: evaluate subgraphs that depend only on constants (masks,
            index arithmetic, constant matrices) at export time; parameters are never
            folded, so they keep their names.
        verbose, dynamo, optimize: accepted for torch compatibility; no effect.

    Returns:
        None when `f` is given (as torch), else the `onnx.ModelProto`.

    Raises:
        UnsupportedOperatorError: an IR op without an ONNX translation (named with the
            source line that produced it).
        OnnxExporterError: dynamic axes that the traced graph bakes into a shape.
        ImportError: the `onnx` package is not installed.
    """
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "llgrad.onnx.export needs the 'onnx' package: pip install "
            "'llgrad[onnx]' (or pip install onnx onnxruntime)"
        ) from e
    from ._translate import build_model  # circle: onnx._translate -> here

    if opset_version is None:
        opset_version = 17
    _IN_EXPORT[0] = True
    try:
        proto = build_model(
            model,
            args,
            kwargs=dict(kwargs or {}),
            input_names=list(input_names or []),
            output_names=list(output_names or []),
            opset=int(opset_version),
            dynamic_axes=dict(dynamic_axes or {}),
            export_params=export_params,
            keep_initializers_as_inputs=keep_initializers_as_inputs,
            training=TrainingMode(training),
            constant_folding=do_constant_folding,
        )
    finally:
        _IN_EXPORT[0] = False
    if f is None:
        return proto
    data = proto.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)
    return None
