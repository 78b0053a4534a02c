"""Single GPU kernels the device tensors need outside compiled graphs: strided copies.

`CopyKernel(dst_dtype, src_dtype, shape, dst_strides, src_strides)` is one elementwise
launch (the GPU elementwise generator over a hand-made argument block) that writes
`dst[i] = cast(src[i])` for every index of `shape`, with any strides (0: broadcast).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...codegen.gpu import elementwise as gpu_elementwise
from ...codegen.gpu import program as gp
from ...ir.dtypes import DType
from ...schedule.elementwise import ElementwiseKernel, Expr, ExprNode
from ...schedule.program import Buffer, Launch, Ptr
from . import driver
from .graph import load_kernels

_count = [0]


class CopyKernel:
    """`dst[...] = src` over `shape` with element strides; `k(dst_ptr, src_ptr)`."""

    def __init__(
        self,
        dst: DType,
        src: DType,
        shape: tuple[int, ...],
        dst_strides: tuple[int, ...],
        src_strides: tuple[int, ...],
    ):
        nodes = () if dst is src else (ExprNode("cast", (0,), (("dtype", dst),)),)
        expr = Expr((src,), nodes, (1 if nodes else 0,))
        rank = len(shape)
        spec = ElementwiseKernel(expr, rank, (None, None))
        out_buf = Buffer("dst", 0, "output", slot=0)
        in_buf = Buffer("src", 0, "input", slot=0)
        block: list[Any] = [
            0,
            shape[0],
            *shape[1:],
            Ptr(out_buf),
            *dst_strides,
            Ptr(in_buf),
            *src_strides,
        ]
        launch = Launch(None, spec, block, "copy")
        be = driver.get()
        _count[0] += 1
        symbol = f"copy{_count[0]}"
        module = ir.Module(name=symbol)
        self.launch = gp.kernel_launch(
            module, launch, gpu_elementwise, symbol, "host" if be.emulated else "ptx"
        )
        functions, _, self._keep = load_kernels(be, str(module), [symbol], symbol)
        self.fn = functions[symbol]
        self.backend = be
        g = self.launch.geometry
        self.grid, self.block = (g.blocks, 1, 1), (g.threads, 1, 1)

    def __call__(self, dst: int, src: int) -> None:
        self.backend.launch(self.fn, self.grid, self.block, 0, [dst, src])
