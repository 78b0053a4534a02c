"""New tensors written out: the fields `Tensor._empty` (and `Tensor._make` for a view over
a new tensor's memory) sets, as source lines for generated code with the layout as
constants. Used by `Tensor._empty_source` and `_empty_maker`, the eager launches, the
compiled graphs' runners and the LAPACK output makers (`linalg._decomp`)."""

from __future__ import annotations

from typing import Any, Sequence


def maker_source(lines: Sequence[str], result: str) -> str:
    """`make()`: `lines`, then `return <result>`."""
    return "def make():\n" + "".join(f"    {l}\n" for l in [*lines, f"return {result}"])


def empty_lines(t: str, tag: str, state: Sequence[tuple[str, Any]]) -> list[str]:
    """Lines binding `t` to a new `Tensor` over the storage `st` at address `ptr` (bound by
    the allocation's lines before them) with the layout constants `SHAPE<tag>`,
    `STRIDES<tag>`, `DTYPE<tag>` and `LKEY<tag>`, the other fields as `state` gives them
    (a fresh tensor's, as `_init_state` sets them), and the inference flags as
    `Tensor._empty` sets them. The lines read `new`, `Tensor` and `grad_state`."""
    body = [
        f"{t} = new(Tensor)",
        f"{t}._storage = st",
        f"{t}._offset = 0",
        f"{t}._shape = SHAPE{tag}",
        f"{t}._strides = STRIDES{tag}",
        f"{t}._dtype = DTYPE{tag}",
        f"{t}._ptr = ptr",
        f"{t}._lkey = LKEY{tag}",
    ]
    body += [f"{t}.{k} = {v!r}" for k, v in state]
    return body + [
        "if grad_state.inference:",
        "    st.inference = True",
        f"    {t}._inference = True",
    ]


def view_lines(name: str, base: str, tag: str, state: Sequence[tuple[str, Any]]) -> list[str]:
    """Lines binding `name` to `Tensor._make(st, 0, SHAPE<tag>, STRIDES<tag>, DTYPE<tag>,
    base=<base>)` written out: a view over the storage `st` at address `ptr` of the new
    tensor `base` made by the lines before; `state` gives its other fields (a fresh
    tensor's, but `_base` and `_inference`, which follow `base` and the storage)."""
    lines = [
        f"{name} = new(Tensor)",
        f"{name}._storage = st",
        f"{name}._offset = 0",
        f"{name}._shape = SHAPE{tag}",
        f"{name}._strides = STRIDES{tag}",
        f"{name}._dtype = DTYPE{tag}",
        f"{name}._ptr = ptr",
        f"{name}._lkey = LKEY{tag}",
    ]
    for k, v in state:
        if k == "_base":
            lines.append(f"{name}._base = {base}")
        elif k == "_inference":
            lines.append(f"{name}._inference = st.inference")
        else:
            lines.append(f"{name}.{k} = {v!r}")
    return lines


def zero_lines(tag: str, nbytes: int, inline: bool) -> list[str]:
    """Lines setting the `nbytes` bytes at `ptr` to zero: at once through the ctypes window
    type `ZWIN<tag>` from the bytes `ZERO<tag>` (`inline`), else by `memset`."""
    if inline:
        return [f"ZWIN{tag}.from_address(ptr).raw = ZERO{tag}"]
    return [f"memset(ptr, 0, {nbytes})"]
