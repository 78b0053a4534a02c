"""The compiled code's call paths: a compiled graph's runner (`CompiledGraph.runner`,
from the graph's parameters, outputs and argument block as `CompiledGraph._call` uses
them) and a differentiable compiled call whose gradients come with the forward
(`compiler.function.DiffCall.fast`, the node `record_speculative` makes written out)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def runner_source(
    params: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
    verified: int,
    in_place: Mapping[int, int],
    n_outs: int,
    makes: Mapping[int, Sequence[str]],
    extras: Sequence[Any],
    error_words: Sequence[int] | None,
    hold_blas: bool,
) -> str:
    """`run(a0, ...)`: the graph called on arguments that match `params` ((shape, strides)
    of each; dtype `D<i>`; the first `verified` are known to be tensors of their dtype and
    shape, only their strides are checked), else `general(...)`. Output k is argument
    `in_place[k]` (written in place; only when no two arguments share a storage) or the
    new tensor `o<k>` that the lines `makes[k]` bind; then the argument block (arguments',
    outputs' pointers, the arena, `extras`) is packed and the entry called (between
    `hold()` and `release()` with `hold_blas`); a nonzero error word of `err` at
    `error_words` calls `check(err)`. The code reads `DENSE`, `general`, `tls`,
    `scratch`, `pack` and `entry`."""
    n = len(params)
    args = [f"a{i}" for i in range(n)]
    checks = []
    for i, (shape, strides) in enumerate(params):
        if i < verified:
            checks.append(f"a{i}._strides != {strides!r}")
            continue
        checks.append(
            f"a{i}.__class__ not in DENSE or a{i}._dtype is not D{i} or "
            f"a{i}._shape != {shape!r} or a{i}._strides != {strides!r}"
        )
    if in_place and n > 1:
        # an output written into an input's memory: only when no other argument shares
        # that memory (as `_call` decides; arguments sharing any storage go there)
        checks.append(f"len({{{', '.join(f'{a}._storage' for a in args)}}}) != {n}")
    outs = [f"a{in_place[k]}" if k in in_place else f"o{k}" for k in range(n_outs)]
    lines = [f"def run({', '.join(args)}):"]
    if checks:
        lines.append("    if (" + " or\n            ".join(checks) + "):")
        lines.append(f"        return general({', '.join(args)})")
    for k in range(n_outs):
        if k not in in_place:
            lines += [f"    {line}" for line in makes[k]]
    lines += [
        "    try:",
        "        block, addr, arena, err = tls.state",
        "    except AttributeError:",
        "        block, addr, arena, err = scratch()",
    ]
    ptrs = [f"{a}._ptr" for a in args + outs] + ["arena"] + [str(x) for x in extras]
    lines.append(f"    pack(block, 0, {', '.join(ptrs)})")
    if hold_blas:
        lines += [
            "    hold()",
            "    try:",
            "        entry(addr)",
            "    finally:",
            "        release()",
        ]
    else:
        lines.append("    entry(addr)")
    if error_words is not None:  # (records are zero unless a kernel failed)
        lines.append("    if " + " or ".join(f"err[{k}]" for k in error_words) + ":")
        lines.append("        check(err)")
    lines.append(f"    return [{', '.join(outs)}]")
    return "\n".join(lines) + "\n"


def speculative_source(n_in: int, wrt: Sequence[int], carries: Sequence[bool]) -> str:
    """`call(a0, ...)`: while the speculation is on and anomaly mode off, the forward's
    `run`, then the `Backward` node (`CompiledBackward.__init__` for a speculative call,
    its fields written out: edges to the inputs `wrt`, the inputs' versions, the
    precomputed gradients `outs[N:]`, the outputs' `META`) attached to the results that
    `carries` marks; else `slow(...)`. The code reads `spec`, `slow`, `anomaly`, `run`,
    `new`, `Backward`, `edge`, `sequence`, `function`, `WRT`, `META` and `N`."""
    args = ", ".join(f"a{i}" for i in range(n_in))
    lines = [
        f"def call({args}):",
        "    if not spec.on or anomaly.enabled:",
        f"        return slow({args})",
        f"    outs = run({args})",
        "    node = new(Backward)",
        f"    node.next_functions = ({''.join(f'edge(a{i}), ' for i in wrt)})",
        "    node._hooks = None",
        "    node._prehooks = None",
        "    node._seq = next(sequence)",
        "    node._metadata = None",
        "    node._trace = None",
        "    node.function = function",
        "    node.wrt = WRT",
        f"    node.inputs = ({args}{',' if n_in == 1 else ''})",
        f"    node.versions = [{', '.join(f'a{i}._storage.version' for i in range(n_in))}]",
        "    node.residuals = []",
        "    node.spec = spec",
        "    node.precomputed = outs[N:]",
        "    node.output_meta = META",
        "    node.diff = None",
        "    spec.made()",
    ]
    for k, carry in enumerate(carries):
        if carry:
            lines += [
                f"    r = outs[{k}]",
                "    r._requires_grad = True",
                "    r.grad_fn = node",
                f"    r._output_nr = {k}",
            ]
    lines.append("    return outs[:N]")
    return "\n".join(lines) + "\n"
