"""Devices with PyTorch's API, and the rule that llgrad computes on the CPU only.

`lg.device("cpu")` behaves as `torch.device`: it has `.type` and `.index`, prints as
`device(type='cpu')`, hashes and compares with other devices (a device never equals a
string, as in PyTorch). Describing another device is allowed (`lg.device("cuda")` is just
a value), but *using* one (`lg.ones(2, device="cuda")`, `x.to("cuda")`, `x.cuda()`,
`lg.set_default_device("mps")`) raises a RuntimeError that names it: llgrad's kernels run
on the host CPU, and a silent fallback would hide where the program expected its tensors.

`lg.cuda`, `lg.accelerator` and `lg.backends` answer the availability questions PyTorch
programs ask before choosing a device (no CUDA, no MPS, no accelerator).
"""

from __future__ import annotations

from typing import Any

from .runtime.cuda import driver

__all__ = ["device", "check_device", "set_default_device", "get_default_device"]

# PyTorch's device types, in the order its error message lists them
DEVICE_TYPES = (
    "cpu",
    "cuda",
    "ipu",
    "xpu",
    "mkldnn",
    "opengl",
    "opencl",
    "ideep",
    "hip",
    "ve",
    "fpga",
    "maia",
    "xla",
    "lazy",
    "vulkan",
    "mps",
    "meta",
    "hpu",
    "mtia",
    "privateuseone",
)


class device:
    """`device(type)`, `device("type:index")`, `device(type, index)` or `device(other)`."""

    __slots__ = ("_type", "_index")

    def __init__(self, type: Any, index: int | None = None):  # noqa: A002 (PyTorch's name)
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device object")
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            raise RuntimeError(
                f"device({type}): an integer names an accelerator device "
                f"(cuda:{type}), and llgrad has none; use device('cpu')"
            )
        if not isinstance(type, str):
            raise TypeError(
                f"device() expects a string such as 'cpu' or 'cuda:0', got "
                f"{type!r} ({builtin_type(type).__name__})"
            )
        name, sep, rest = type.partition(":")
        if name not in DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(DEVICE_TYPES)} device type at start "
                f"of device string: {type}"
            )
        if sep:
            if index is not None:
                raise RuntimeError(
                    f"type (string) must not include an index because index was "
                    f"passed explicitly: {type}"
                )
            if not rest.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(rest)
        if index is not None and (
            not isinstance(index, int) or isinstance(index, bool) or index < 0
        ):
            raise RuntimeError(
                f"Device index must not be negative (or must be an int), got {index!r}"
            )
        self._type, self._index = name, index

    @property
    def type(self) -> str:  # noqa: A003
        return self._type

    @property
    def index(self) -> int | None:
        return self._index

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __hash__(self) -> int:
        return hash((self._type, self._index))

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self) -> str:
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __reduce__(self) -> tuple:
        return (device, (self._type, self._index))

    # `with lg.device("cpu"):` sets the default device inside the block, as in PyTorch
    def __enter__(self) -> "device":
        check_device(self, "with device(...)")
        return self

    def __exit__(self, *exc: object) -> None:
        pass


builtin_type = type
CPU = device("cpu")


def check_device(dev: Any, op: str) -> None:
    """Raise unless `dev` (None, a string or a device) is the CPU."""
    if dev is None:
        return
    d = dev if isinstance(dev, device) else device(dev)
    if d._type != "cpu":
        raise RuntimeError(
            f"{op}: device '{d}' is not available: llgrad runs on the CPU only "
            f"(there is no CUDA, MPS or other accelerator backend). Use "
            f"device='cpu', or choose the device with "
            f"`'cuda' if llgrad.cuda.is_available() else 'cpu'`."
        )


def device_type(dev: Any, op: str) -> str:
    """ "cpu" or "cuda" for a device a tensor may be made on; raises for any other device,
    and for CUDA when neither a GPU nor the grid emulator (`LLGRAD_CUDA_EMULATE=1`) is
    available. One CUDA device: `cuda` and `cuda:0`."""
    if dev is None:
        return "cpu"
    d = dev if isinstance(dev, device) else device(dev)
    if d._type == "cpu":
        return "cpu"
    if d._type == "cuda" and d._index in (None, 0):
        if driver.available():
            return "cuda"
    if d._type == "cuda" and d._index not in (None, 0):
        if driver.available():
            raise RuntimeError(
                f"{op}: CUDA error: invalid device ordinal (device '{d}'; "
                f"llgrad uses one GPU, cuda:0)"
            )
    check_device(d, op)
    return "cpu"


def is_device(x: Any) -> bool:
    """Whether `x` names a device (a device object or a string that parses as one)."""
    if isinstance(x, device):
        return True
    if not isinstance(x, str):
        return False
    try:
        device(x)
    except RuntimeError:
        return False
    return True


def set_default_device(dev: Any) -> None:
    """Only the CPU can be the default device; anything else raises at once (PyTorch raises
    later, at the first tensor made there)."""
    check_device(dev, "set_default_device")


def get_default_device() -> device:
    return CPU
