"""`backward`, `grad` and the tensor-level autograd methods' engine calls."""

from __future__ import annotations

from typing import Any

from ..dispatch.grad_mode import no_grad
from ..tensor import Tensor
from ..tape import engine
from ..tape.engine import as_list, execute
from .. import functions as F


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    grad_variables: Any = None,
    inputs: Any = None,
) -> None:
    if (
        tensors.__class__ is Tensor
        and grad_tensors is None
        and grad_variables is None
        and not create_graph
        and inputs is None
    ):
        # a loss whose node can accumulate its gradients alone (`Node.direct_grads`)
        node = tensors.grad_fn
        if (
            node is not None
            and node.direct_grads is not None
            and node.direct_grads(tensors, None, bool(retain_graph)) is not None
        ):
            return
    roots = as_list(tensors, "backward")
    grads = as_list(grad_tensors if grad_tensors is not None else grad_variables, "backward") or [
        None
    ] * len(roots)
    if len(grads) != len(roots):
        raise RuntimeError(
            f"grad_tensors should have the same length as tensors: got "
            f"{len(grads)} and {len(roots)}"
        )
    if retain_graph is None:
        retain_graph = create_graph
    wanted = as_list(inputs, "backward") if inputs is not None else None
    if wanted is not None and not wanted:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    captured = execute(
        roots,
        grads,
        retain_graph=retain_graph,
        create_graph=create_graph,
        capture=wanted,
        accumulate=True,
    )
    if wanted is not None:
        for t, g in zip(wanted, captured):
            if g is not None and t.grad_fn is not None:  # non-leaf inputs get .grad too
                t._grad = g if t._grad is None else t._grad + g


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    if (
        outputs.__class__ is Tensor
        and grad_outputs is None
        and not create_graph
        and not is_grads_batched
        and not materialize_grads
        and inputs.__class__ in (list, tuple)
        and inputs
    ):
        # one output, default arguments: a graph of one compiled call over leaves runs
        # without the engine's walk (its node's `direct_grads`, then
        # `engine._run_direct`; each None when the graph is not theirs)
        node = outputs.grad_fn
        if node is not None and node.direct_grads is not None:
            direct = node.direct_grads(outputs, inputs, bool(retain_graph))
            if direct is not None:
                return direct
        direct = engine._run_direct(outputs, None, bool(retain_graph), inputs, False)
        if direct is not None:
            return _results(list(inputs), direct, allow_unused, materialize_grads)
    outs = as_list(outputs, "grad")
    ins = as_list(inputs, "grad")
    if not ins:
        raise RuntimeError("grad requires non-empty inputs.")
    gouts = as_list(grad_outputs, "grad") if grad_outputs is not None else [None] * len(outs)
    if len(gouts) != len(outs):
        raise RuntimeError(
            f"grad_outputs should have the same length as outputs: got {len(gouts)} and {len(outs)}"
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True"
        )
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        return _batched(
            outs, ins, gouts, retain_graph, create_graph, allow_unused, materialize_grads
        )
    captured = execute(
        outs,
        gouts,
        retain_graph=retain_graph,
        create_graph=create_graph,
        capture=ins,
        accumulate=False,
    )
    return _results(ins, captured, allow_unused, materialize_grads)


def _results(
    ins: list[Tensor],
    captured: list[Tensor | None],
    allow_unused: bool | None,
    materialize_grads: bool,
) -> tuple[Tensor | None, ...]:
    """`grad`'s answer: the captured gradients, with its rules for unused inputs."""
    if allow_unused is None:
        allow_unused = materialize_grads
    result: list[Tensor | None] = []
    for t, g in zip(ins, captured):
        if g is None:
            if not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been "
                    "used in the graph. Set allow_unused=True if this is the "
                    "desired behavior."
                )
            if materialize_grads:
                g = F.zeros_like(t)
        result.append(g)
    return tuple(result)


def _batched(
    outs: list[Tensor],
    ins: list[Tensor],
    gouts: list[Any],
    retain_graph: bool,
    create_graph: bool,
    allow_unused: bool,
    materialize: bool,
) -> tuple[Tensor | None, ...]:
    """`is_grads_batched`: one backward per leading slice of grad_outputs, stacked."""

    if any(g is None for g in gouts):
        raise RuntimeError("is_grads_batched=True requires grad_outputs for every output")
    batch = gouts[0]._shape[0]
    per_input: list[list[Tensor | None]] = [[] for _ in ins]
    for b in range(batch):
        gs = grad(
            outs,
            ins,
            [g[b] for g in gouts],
            retain_graph=True if b < batch - 1 else retain_graph,
            create_graph=create_graph,
            allow_unused=allow_unused,
            materialize_grads=materialize,
        )
        for k, g in enumerate(gs):
            per_input[k].append(g)
    out: list[Tensor | None] = []
    for k, gs in enumerate(per_input):
        if all(g is None for g in gs):
            out.append(None)
        else:
            out.append(F.stack([g if g is not None else F.zeros_like(ins[k]) for g in gs]))
    return tuple(out)


def zero_grads(params: Any, set_to_none: bool = True) -> None:
    """Reset `.grad` of each parameter: to None, or zeroed in place (detached first), the
    rule of `Module.zero_grad` and `Optimizer.zero_grad`."""
    for p in params:
        g = p._grad
        if g is None:
            continue
        if set_to_none:
            p._grad = None
            continue
        if g.grad_fn is not None:
            g.detach_()
        else:
            g.requires_grad_(False)
        with no_grad():
            g.zero_()
