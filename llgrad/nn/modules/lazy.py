"""Lazy modules: parameters whose shapes are inferred from the first input.

`UninitializedParameter` / `UninitializedBuffer` hold no data until `materialize(shape)`,
which turns them in place into a `Parameter` / plain tensor (the same object, so an
optimizer built before the first forward keeps working, as in PyTorch).
`LazyModuleMixin` runs `initialize_parameters(*args)` before the first forward (or lets
`load_state_dict` materialize from the checkpoint's shapes) and then changes the module's
class to `cls_to_become` (`LazyLinear` becomes `Linear`).
"""

from __future__ import annotations

from typing import Any

from ... import functions as lg
from ...device import check_device
from ...dispatch.grad_mode import no_grad
from ...ir.dtypes import DType
from ...tensor import Tensor
from ..parameter import Parameter
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .module import Module


class UninitializedParameter(Parameter):
    """A parameter without data yet; `materialize(shape)` makes it a `Parameter` of that
    shape (in place)."""

    _lazy_uninitialized = True

    def __new__(
        cls, requires_grad: bool = True, device: Any = None, dtype: DType | None = None
    ) -> "UninitializedParameter":
        check_device(device, "UninitializedParameter")
        data = lg.empty((0,), dtype=dtype) if dtype is not None else lg.empty((0,))
        return super().__new__(cls, data, requires_grad)

    def __init__(
        self, requires_grad: bool = True, device: Any = None, dtype: DType | None = None
    ) -> None:
        """All the work is done in `__new__`."""

    def materialize(
        self, shape: tuple[int, ...], device: Any = None, dtype: DType | None = None
    ) -> None:
        """Give this parameter uninitialized memory of `shape` and make it a Parameter."""
        with no_grad():
            self.data = lg.empty(tuple(shape), dtype=dtype or self._dtype)
        self.__class__ = Parameter

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict[int, Any]) -> "UninitializedParameter":
        if id(self) not in memo:
            memo[id(self)] = UninitializedParameter(self._requires_grad, dtype=self._dtype)
        return memo[id(self)]


class UninitializedBuffer(Tensor):
    """A buffer without data yet; `materialize(shape)` makes it a plain tensor."""

    _lazy_uninitialized = True

    def __new__(
        cls, requires_grad: bool = False, device: Any = None, dtype: DType | None = None
    ) -> "UninitializedBuffer":
        data = lg.empty((0,), dtype=dtype) if dtype is not None else lg.empty((0,))
        t = cls._make(data._storage, data._offset, data._shape, data._strides, data._dtype)
        return t

    def __init__(
        self, requires_grad: bool = False, device: Any = None, dtype: DType | None = None
    ) -> None:
        """All the work is done in `__new__`."""

    def materialize(
        self, shape: tuple[int, ...], device: Any = None, dtype: DType | None = None
    ) -> None:
        """Give this buffer uninitialized memory of `shape` and make it a plain tensor."""
        self.data = lg.empty(tuple(shape), dtype=dtype or self._dtype)
        self.__class__ = Tensor

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"


def _uninitialized(t: Any) -> bool:
    return isinstance(t, (UninitializedParameter, UninitializedBuffer))


class LazyModuleMixin:
    """Mixed into a module whose parameters are `Uninitialized*` until the first forward,
    where `initialize_parameters(*args, **kwargs)` materializes them; then the module
    becomes `cls_to_become`. Mix it in before the module class."""

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self._initialize_hook = self.register_forward_pre_hook(  # type: ignore[attr-defined]
            LazyModuleMixin._infer_parameters, with_kwargs=True
        )

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module is still uninitialized."""
        d = self.__dict__
        return any(
            _uninitialized(t)
            for t in list(d["_parameters"].values()) + list(d["_buffers"].values())
        )

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Materialize the parameters from the first input (each lazy class defines it)."""
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}"
        )

    @staticmethod
    def _infer_parameters(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._finish_lazy()

    def _finish_lazy(self) -> None:
        hook = self.__dict__.pop("_initialize_hook", None)
        if hook is not None:
            hook.remove()
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """A `Linear` whose in_features is the last size of the first input."""

    cls_to_become = Linear

    def __init__(
        self, out_features: int, bias: bool = True, device: Any = None, dtype: DType | None = None
    ) -> None:
        super().__init__(0, 0, False, device, dtype)
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """in_features from `input.shape[-1]`; PyTorch's initialization."""
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    """in_channels from the first input's channel dimension (dim 1, or 0 unbatched)."""

    _dims: int
    _transposed: bool
    groups: int
    in_channels: int
    out_channels: int
    kernel_size: tuple[int, ...]

    def _lazy_setup(self, out_channels: int, bias: bool, dtype: DType | None) -> None:
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()  # type: ignore[misc]

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """Shapes from `input`; PyTorch's initialization."""
        if not self.has_uninitialized_params():
            return
        self.in_channels = input.shape[1] if input.ndim == self._dims + 2 else input.shape[0]
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        if self._transposed:
            shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        self.weight.materialize(shape)  # type: ignore[attr-defined]
        if self.bias is not None:  # type: ignore[attr-defined]
            self.bias.materialize((self.out_channels,))  # type: ignore[attr-defined]
        self.reset_parameters()


def _lazy_conv(base: type, transposed: bool) -> type:
    if transposed:

        def __init__(
            self: Any,
            out_channels: int,
            kernel_size: Any,
            stride: Any = 1,
            padding: Any = 0,
            output_padding: Any = 0,
            groups: int = 1,
            bias: bool = True,
            dilation: Any = 1,
            padding_mode: str = "zeros",
            device: Any = None,
            dtype: DType | None = None,
        ) -> None:
            base.__init__(
                self,
                0,
                0,
                kernel_size,
                stride,
                padding,
                output_padding,
                groups,
                False,
                dilation,
                padding_mode,
                device,
                dtype,
            )
            self._lazy_setup(out_channels, bias, dtype)
            self._initialize_hook = self.register_forward_pre_hook(
                LazyModuleMixin._infer_parameters, with_kwargs=True
            )
    else:

        def __init__(
            self: Any,
            out_channels: int,
            kernel_size: Any,
            stride: Any = 1,
            padding: Any = 0,
            dilation: Any = 1,
            groups: int = 1,
            bias: bool = True,
            padding_mode: str = "zeros",
            device: Any = None,
            dtype: DType | None = None,
        ) -> None:
            base.__init__(
                self,
                0,
                0,
                kernel_size,
                stride,
                padding,
                dilation,
                groups,
                False,
                padding_mode,
                device,
                dtype,
            )
            self._lazy_setup(out_channels, bias, dtype)
            self._initialize_hook = self.register_forward_pre_hook(
                LazyModuleMixin._infer_parameters, with_kwargs=True
            )

    name = "Lazy" + base.__name__
    __init__.__doc__ = f"A `{base.__name__}` whose in_channels comes from the first input."
    return type(
        name,
        (_LazyConvMixin, base),
        {
            "__init__": __init__,
            "cls_to_become": base,
            "__module__": __name__,
            "__doc__": f"A `{base.__name__}` whose in_channels is inferred from the first input "
            f"(dim 1, or 0 for an unbatched input).",
        },
    )


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)

__all__ = [
    "UninitializedParameter",
    "UninitializedBuffer",
    "LazyModuleMixin",
    "LazyLinear",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
]
_ = Module
