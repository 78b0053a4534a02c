"""`functional_call`: run a module with other tensors in place of its parameters/buffers.

This is what makes a module a function of its weights, the way `torch.func` uses it:
`grad(lambda p, x: loss(functional_call(model, p, (x,))))(params, x)`. The module's own
tables are swapped for the duration of the call and restored afterwards (also when the
call raises), so the given tensors (tracers, vmap batches, tensors that require grad) are
what `forward` reads. Weights tied under several names (one Parameter registered twice)
are replaced together unless `tie_weights=False`; names the module does not have are set
as plain attributes for the call (as PyTorch does) unless `strict=True`.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...tensor import Tensor


def _slots(module: Any) -> dict[str, tuple[Any, str, str, Any]]:
    """Every parameter and buffer by dotted name, tied ones under each of their names:
    name -> (owning module, table, attribute, tensor)."""
    out: dict[str, tuple[Any, str, str, Any]] = {}
    for prefix, mod in module.named_modules(remove_duplicate=False):
        for table in ("_parameters", "_buffers"):
            for attr, t in mod.__dict__[table].items():
                if t is not None:
                    out[f"{prefix}.{attr}" if prefix else attr] = (mod, table, attr, t)
    return out


def _merge(dicts: Any) -> dict[str, Any]:
    if isinstance(dicts, Mapping):
        return dict(dicts)
    if not isinstance(dicts, (tuple, list)):
        raise TypeError(
            f"functional_call: parameters_and_buffers must be a dict or a tuple of "
            f"dicts, got {type(dicts).__name__}"
        )
    merged: dict[str, Any] = {}
    repeated = []
    for d in dicts:
        for k, v in d.items():
            if k in merged:
                repeated.append(k)
            merged[k] = v
    if repeated:
        raise ValueError(
            f"{sorted(set(repeated))} appeared in multiple dictionaries; behavior "
            f"of functional call is ambiguous"
        )
    return merged


def functional_call(
    module: Any,
    parameters_and_buffers: Any,
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """`module(*args, **kwargs)` computed with the tensors of `parameters_and_buffers` (a
    dict by dotted name, or a tuple of dicts) in place of the module's own."""
    given = _merge(parameters_and_buffers)
    for name, v in given.items():
        if not isinstance(v, Tensor):
            raise TypeError(f"functional_call: {name!r}: {v!r} is not an instance of llgrad.Tensor")
    slots = _slots(module)
    by_tensor: dict[int, list[str]] = {}
    for name, (_, _, _, t) in slots.items():
        by_tensor.setdefault(id(t), []).append(name)
    targets: dict[str, Tensor] = {}
    for name, v in given.items():
        if name in slots and tie_weights:
            for tied in by_tensor[id(slots[name][3])]:
                if tied in given and given[tied] is not v:
                    raise ValueError(
                        f"functional_call got multiple values for keys "
                        f"{sorted(by_tensor[id(slots[name][3])])}, which are tied. "
                        f"Consider using tie_weights=False"
                    )
                targets[tied] = v
        else:
            targets[name] = v
    if strict:
        missing = [n for n in slots if n not in targets]
        unexpected = [n for n in given if n not in slots]
        if missing or unexpected:
            lines = []
            if unexpected:
                lines.append("Unexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected) + ".")
            if missing:
                lines.append("Missing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
            raise RuntimeError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(lines)
            )
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    restore: list[tuple[Any, str, str, Any]] = []
    try:
        for name, v in targets.items():
            if name in slots:
                mod, table, attr, old = slots[name]
                mod.__dict__[table][attr] = v
                restore.append((mod, table, attr, old))
            else:
                path, _, attr = name.rpartition(".")
                mod = module.get_submodule(path)
                restore.append((mod, "", attr, mod.__dict__.get(attr, _ABSENT)))
                mod.__dict__[attr] = v
        return module(*args, **(kwargs or {}))
    finally:
        for mod, table, attr, old in reversed(restore):
            if table:
                mod.__dict__[table][attr] = old
            elif old is _ABSENT:
                mod.__dict__.pop(attr, None)
            else:
                mod.__dict__[attr] = old


_ABSENT = object()
