"""The direct recorder's source: `dispatch.apply.record`'s node written out for one call's
operand kinds, from the op's save plan (`tape.node._save_plan`)."""

from __future__ import annotations

from typing import Any, Sequence


def saved_tensor_lines(var: str, t: str, is_output: bool) -> list[str]:
    """`var = SavedTensor(<t>, is_output)` written out for generated code where `<t>` is a
    plain `Tensor` with a storage; the lines read the names `new`, `Saved` and `ref`
    (`object.__new__`, `tape.node.SavedTensor`, `weakref.ref`)."""
    lines = [
        f"{var} = new(Saved)",
        f"{var}.is_output = {is_output}",
        f"{var}.requires_grad = {t}._requires_grad",
        f"{var}.version = {t}._storage.version",
    ]
    if not is_output:
        return lines + [f"{var}._layout = None", f"{var}._data = {t}", f"{var}.source = None"]
    return lines + [
        f"{var}._data = None",
        f"{var}._layout = ({t}._storage, {t}._offset, {t}._shape, "
        f"{t}._strides, {t}._dtype, {t}._base)",
        f"{var}.source = ref({t})",
    ]


def trivial_recorder_source(n: int) -> str:
    """`rec(a0, ..., out)` returning `out`: the recorder of a non-differentiable output."""
    args = [f"a{i}" for i in range(n)] + ["out"]
    return f"def rec({', '.join(args)}):\n    return out\n"


def recorder_source(tensor: Sequence[bool], plan: tuple[Any, ...]) -> str:
    """`rec(a0, ..., out)`: `OpNode.__init__` and `record` written out for operands that are
    tensors (or numbers) where `tensor` says, under `plan`, the op's save plan (save every
    input, inputs saved by number, `save_for`, keeps_layout, save the output). The code
    reads the names `new`, `CLS`, `Saved`, `edge`, `NO_EDGE`, `sequence`, `OP`, `META`,
    `LAYOUTS`, `PLAN`, `ref`, `LAST` and `NOTHING_SAVED` (see `direct_recorder`)."""
    save_all, digits, save_for, _, save_out = plan
    n = len(tensor)
    args = [f"a{i}" for i in range(n)] + ["out"]
    lines = ["node = new(CLS)"]
    for i in range(n):
        if tensor[i]:
            lines += [
                f"fn = a{i}.grad_fn",
                f"e{i} = (fn, a{i}._output_nr) if fn is not None else edge(a{i}) "
                f"if a{i}._requires_grad else NO_EDGE",
            ]
    edges = [f"e{i}" if tensor[i] else "NO_EDGE" for i in range(n)]
    lines += [
        f"node.next_functions = ({', '.join(edges)},)",
        "node._hooks = node._prehooks = node._metadata = node._trace = None",
        "node._seq = next(sequence)",
        "node.op = OP",
        "node.attrs = {}",
        "node._meta = META",
        "node._layouts = LAYOUTS",
        "node._plan = PLAN",
        "node._released = False",
    ]
    if all(tensor):
        lines.append("node._scalars = None")
    else:
        # the numbers, as a tuple shared while the same number objects come (a literal in
        # a loop: one object), so most calls make no new tuple
        same = " and ".join(f"last[{i}] is a{i}" for i in range(n) if not tensor[i])
        lines += [
            "last = LAST[0]",
            f"if {same}:",
            "    node._scalars = last",
            "else:",
            "    node._scalars = LAST[0] = ("
            + "".join(f"a{i}, " if not tensor[i] else "None, " for i in range(n))
            + ")",
        ]
    saved = []
    for i in range(n):
        if not tensor[i] or not (save_all or i in digits):
            saved.append("None")
            continue
        readers = [r for r in save_for.get(i, ()) if tensor[r]]
        if i in save_for and not readers:
            saved.append("None")  # only numbers read it: nothing needs it
            continue
        cond = " or ".join(f"e{r}[0] is not None" for r in readers) if i in save_for else ""
        body = saved_tensor_lines(f"s{i}", f"a{i}", False)
        if cond:
            lines += [f"if {cond}:"] + ["    " + b for b in body] + ["else:", f"    s{i} = None"]
        else:
            lines += body
        saved.append(f"s{i}")
    if save_out:  # (`out` requires grad before it is saved, as `record` orders it)
        lines += ["out._requires_grad = True"] + saved_tensor_lines("so", "out", True)
    saved.append("so" if save_out else "None")
    # (a node that saves nothing shares one tuple of Nones: `_saved` is only ever read or
    # rebound, and checkpoint replaces saved tensors only)
    lines += [
        f"node._saved = [{', '.join(saved)}]"
        if any(x != "None" for x in saved)
        else "node._saved = NOTHING_SAVED",
        "out._requires_grad = True",
        "out.grad_fn = node",
        "out._output_nr = 0",
        "return out",
    ]
    return f"def rec({', '.join(args)}):\n" + "".join(f"    {l}\n" for l in lines)
