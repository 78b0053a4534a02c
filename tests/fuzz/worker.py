"""Runs one batch of fuzz cases in this process and writes a JSON report.

    python -m tests.fuzz.worker --family binary --mode compiled --seed 7 --examples 200 \\
        --out report.json --current current.txt

Before each case its reproducer is written to `--current`, so when the process dies (a
crash in native code) or hangs, the parent names the case that did it. Each case is run in
torch (the oracle) and in llgrad, eagerly or under `lg.compile` (then again with a second
set of tensors of new shapes, a recompile), and the outcomes are compared.
"""
from __future__ import annotations

import argparse
import math
import json
import os
import time
import warnings
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

from .cases import FLOATS, Case, TSpec, differ, make, resolve, to_numpy
from .ops import SHAPE_ONLY, STRATEGIES

# exception types that mean "llgrad refused the call"; anything else (AttributeError,
# KeyError, AssertionError, NotImplementedError, ...) is an internal error
REFUSALS = (RuntimeError, ValueError, TypeError, IndexError, MemoryError, OverflowError)
INTERNAL = (NotImplementedError, RecursionError)


def op_name(case: Case) -> str:
    return case.op.lstrip(".")


def call(lib: Any, case: Case, args: list) -> Any:
    name = op_name(case)
    pos = tuple(resolve(lib, p) for p in case.pos)
    kw = {k: resolve(lib, v) for k, v in case.kw}
    if name == "getitem":
        return args[0][case.pos[0].build(args)]
    if name == "setitem":
        args[0][case.pos[0].build(args)] = args[-1]
        return args[0]
    if name == "einsum":
        return lib.einsum(case.extra["equation"], *args)
    if case.extra.get("list"):
        return getattr(lib, name)(list(args), *pos, **kw)
    if case.extra.get("dim_first"):
        first, rest = args[0], args[1:]
        if case.op.startswith("."):
            return getattr(first, name)(*pos, *rest, **kw)
        return getattr(lib, name)(first, *pos, *rest, **kw)
    if case.op.startswith("."):
        return getattr(args[0], name)(*args[1:], *pos, **kw)
    return getattr(lib, name)(*args, *pos, **kw)


def _float_tensors(x: Any, lib: Any) -> list:
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _float_tensors(v, lib)]
    if isinstance(x, lib.Tensor) and x.requires_grad and x.dtype.is_floating_point:
        return [x]
    return []


def outcome(lib: Any, case: Case, specs: tuple, compiled: Any = None) -> dict:
    """Run `case` with tensors `specs` in `lib`; the result as comparable data."""
    made = [make(lib, s) for s in specs]
    args = [m[0] for m in made]
    leaves = [m[1] for m in made]
    res: dict = {}
    try:
        out = compiled(*args) if compiled is not None else call(lib, case, args)
        res["out"] = to_numpy(out)
        res["inputs"] = [to_numpy(a) for a in args]
    except Exception as e:           # noqa: BLE001 - the outcome being compared
        res["error"] = e
        return res
    grads_of = [t for t in leaves if t is not None]
    outs = _float_tensors(out, lib)
    if grads_of and outs:
        try:
            loss = 0
            for o in outs:
                w = lib.arange(o.numel(), dtype=lib.float64).reshape(o.shape) * 0.25 + 1
                loss = loss + (o.double() * w).sum()
            loss.backward()
            res["grads"] = [to_numpy(t.grad) if t.grad is not None else None
                            for t in grads_of]
        except Exception as e:       # noqa: BLE001
            res["grad_error"] = e
    return res


def names_for(case: Case) -> tuple[str, ...]:
    name = op_name(case)
    base = name.rstrip("_")
    extra = {"getitem": ("index", "gather"), "index_select": ("gather",), "setitem": ("index", "setitem", "index_put", "copy"),
             "concat": ("cat",), "view": ("reshape",), "norm": ("amax", "amin"), "scatter": ("index_put",),
             "scatter_add": ("index_put", "scatter_add"), "swapaxes": ("transpose",), "true_divide": ("div",),
             "broadcast_to": ("expand",), "t": ("transpose", "t"),
             "argsort": ("sort",), "empty_like": ("empty",), "full_like": ("full",),
             "ones_like": ("ones", "full"), "zeros_like": ("zeros", "full")}.get(base, ())
    return (name, base) + extra


def _empty(out: Any) -> bool:
    """Whether a result holds no elements at all (so no values were computed)."""
    if isinstance(out, tuple) and out and out[0] == "array":
        return out[2].size == 0
    if isinstance(out, tuple):
        return all(_empty(o) for o in out)
    return False


def allowed(case: Case, specs: tuple, want: dict, got: dict) -> str | None:
    """The documented differences from torch (README, "Differences from PyTorch"), each a
    case where llgrad is more permissive or stricter without a wrong value; None when the
    difference is not one of them."""
    terr, lerr = want.get("error"), got.get("error")
    numbers = any(isinstance(t, (bool, int, float, complex)) for t in specs)
    if terr is not None and lerr is None:
        if isinstance(terr, TypeError) and numbers:
            return "Python numbers are accepted wherever a tensor operand is"
        if isinstance(terr, NotImplementedError):
            return "kernels exist for dtypes torch has none for (bool abs, int softmax, ...)"
        if "Autograd not support dtype" in str(terr):
            return "an integer result of a differentiable input has no gradient"
        if isinstance(terr, TypeError) and not case.op.startswith(".") and \
                op_name(case) in ("reshape", "permute", "expand", "flip", "repeat"):
            return "function forms accept the sizes as the methods do (reshape(x, 2, 3))"
        if "without overflow" in str(terr) and op_name(case) in ("masked_fill", "full"):
            return "a fill value out of a float type's range rounds to infinity"
        if "Index put requires the source and destination dtypes match" in str(terr):
            return "setitem converts the value to the destination's dtype"
    if terr is None and lerr is not None:
        if "out" in want and (_empty(want["out"]) or any(_empty(i) for i in want["inputs"])):
            return "dtypes, ranks and overlap are checked even when a tensor is empty"
        if "not defined for bool" in str(lerr) or "does not support bool" in str(lerr) or \
                "cannot be stored as bool" in str(lerr):
            return "arithmetic other than mul and logic refuses bool tensors (convert first)"
        if "same number of dimensions" in str(lerr) and op_name(case) in (
                "gather", "scatter", "scatter_add", "scatter_", "scatter_add_"):
            return "index and input have the same rank (torch also takes a 0-d index)"
        if "cannot be broadcast to destination shape" in str(lerr) and op_name(case) == \
                "setitem":
            return "setitem does not drop a value's extra leading size-1 dimensions"
        if "more than one element of the written-to" in str(lerr) and \
                op_name(case) in ("masked_fill_", "setitem"):
            return "masked_fill_ refuses overlapping memory even when one value is written"
    if op_name(case) == "arange" and any(isinstance(p, float) for p in case.pos) and \
            any(k == "dtype" and v.name in ("int32", "int64", "bool") for k, v in case.kw):
        return "torch sizes integer ranges with float bounds inconsistently"
    if terr is None and lerr is None and isinstance(got.get("out"), tuple) and \
            got["out"] and got["out"][0] == "array" and got["out"][1] in ("int32", "int64") \
            and any(isinstance(t, TSpec) and t.fill == "special" and t.dtype in FLOATS
                    for t in specs):
        return "NaN, inf and out-of-range floats converted to integers are undefined (C)"
    if terr is None and lerr is None and "out" in want and _empty(want["out"]) and \
            differ(want["out"], got["out"], False) is not None:
        return "an empty result may differ in dtype where torch skips the kernel"
    special = any(isinstance(t, TSpec) and t.fill == "special" or
                  isinstance(t, float) and not math.isfinite(t) for t in specs)
    if special and op_name(case) in ("softmax", "log_softmax", "logsumexp") and terr is None:
        return "softmax of rows holding inf: NaN only where inf - inf arises"
    if special and op_name(case) in ("sin", "cos", "tan"):
        return "sin/cos/tan of |x| > 2^24 (f32) or 2^50 (f64) are NaN (docs/mathlib.md)"
    if op_name(case) == "einsum" and lerr is not None and "same dtype" in str(lerr):
        return "einsum operands have one dtype (torch promotes only on some paths)"
    if op_name(case) in ("cat", "concat") and any(
            isinstance(t, TSpec) and t.shape == (0,) for t in specs):
        return "cat does not skip legacy empty 1-d tensors"
    if special and terr is None and lerr is None and (
            "grads" in want or op_name(case) in ("floor_divide", "remainder", "fmod")):
        return "gradients at NaN/inf inputs, and floor division by inf, follow IEEE rules"
    if isinstance(terr, TypeError) and ("must be int, not tuple" in str(terr) or
                                        "dim=tuple" in str(terr)):
        return "reductions accept a tuple of dims"
    correction = dict(case.kw).get("correction")
    if op_name(case) in ("var", "std") and correction is not None and "grads" in want:
        return "var/std gradients where correction >= the sample count are unspecified"
    if op_name(case) == "linspace" and any(
            k == "dtype" and v.name in ("int32", "int64") for k, v in case.kw):
        return "integer linspace truncates the float values (torch rounds some inward)"
    tg = want.get("grad_error")
    if tg is not None and "on a bool tensor is not supported" in str(tg):
        return "a bool operand does not stop the gradient of the others"
    if tg is not None and "derivative for" in str(tg) and "not implemented" in str(tg):
        return "ops torch has no derivative for get one (zero where piecewise constant)"
    return None


def compare(case: Case, specs: tuple, want: dict, got: dict) -> str | None:
    """What is wrong with llgrad's outcome `got` given torch's `want` (None: nothing)."""
    terr, lerr = want.get("error"), got.get("error")
    if lerr is not None and (isinstance(lerr, INTERNAL) or not isinstance(lerr, REFUSALS)):
        return f"internal error {type(lerr).__name__}: {lerr}"
    if allowed(case, specs, want, got):
        return None
    if terr is None and lerr is not None:
        return f"llgrad raised {type(lerr).__name__}: {lerr} where torch ran"
    if terr is not None and lerr is None:
        return f"llgrad ran where torch raised {type(terr).__name__}: {str(terr)[:200]}"
    if terr is not None:
        msg = str(lerr)
        if isinstance(lerr, MemoryError):     # raised where memory is allocated: the size
            return None if "bytes" in msg else f"MemoryError without the size: {msg}"
        if not any(n in msg for n in names_for(case)):
            return f"error does not name the op: {type(lerr).__name__}: {msg}"
        return None
    values_matter = op_name(case) not in SHAPE_ONLY
    if op_name(case) == "topk":               # the order of tied elements is unspecified
        why = differ(want["out"][0], got["out"][0], True, "values") or \
            differ(want["out"][1], got["out"][1], False, "indices")
        return why
    why = differ(want["out"], got["out"], values_matter)
    if why:
        return why
    why = differ(tuple(want["inputs"]), tuple(got["inputs"]), values_matter, "input")
    if why:
        return f"after the call, {why}"
    tg, lg_ = want.get("grad_error"), got.get("grad_error")
    if (tg is None) != (lg_ is None):
        return f"backward: torch {tg!r:.200}, llgrad {lg_!r:.200}"
    if "grads" in want:
        if "grads" not in got:
            return "backward: llgrad computed no gradients"
        loosest = [t.dtype for t in specs if isinstance(t, TSpec) and t.dtype in FLOATS] + \
            [v.name for k, v in case.kw if k == "dtype" and v.name in FLOATS]
        tol = "bfloat16" if any(d in ("float16", "bfloat16") for d in loosest) else \
            "float32" if any(d != "float64" for d in loosest) else None
        return differ(tuple(want["grads"]), tuple(got["grads"]), True, "grad", tol)
    return None


def run_case(case: Case, mode: str, torch: Any, lg: Any) -> list[str]:
    problems = []
    sets = [case.tensors] + ([case.second] if case.second is not None else [])
    compiled = None
    if mode == "compiled":
        positions = [i for i, s in enumerate(case.tensors) if isinstance(s, TSpec)]

        def fn(*ts: Any, _case=case, _positions=positions) -> Any:
            args = list(_case.tensors)
            for i, t in zip(_positions, ts):
                args[i] = t
            return call(lg, _case, args)
        compiled = lg.compile(fn)
    for specs in sets:
        if compiled is not None and any(
                isinstance(s, TSpec) != isinstance(f, TSpec) or
                (not isinstance(s, TSpec) and s is not f and s != f)
                for s, f in zip(specs, case.tensors)):
            continue                    # the compiled function closes over the first values
        want = outcome(torch, case, specs)
        if compiled is not None:
            positions = [i for i, s in enumerate(specs) if isinstance(s, TSpec)]

            def runner(*args: Any, _positions=positions) -> Any:
                return compiled(*[args[i] for i in _positions])
            got = outcome(lg, case, specs, runner)
        else:
            got = outcome(lg, case, specs)
        why = compare(case, specs, want, got)
        if why:
            problems.append(why)
    return problems


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--family", required=True)
    p.add_argument("--mode", choices=("eager", "compiled"), default="eager")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", type=int, default=100)
    p.add_argument("--out", required=True)
    p.add_argument("--current", required=True)
    a = p.parse_args()
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(1)
    import llgrad as lg

    fd = os.open(a.current, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    report: dict = {"family": a.family, "mode": a.mode, "seed": a.seed, "cases": 0,
                    "problems": []}
    seen: set[str] = set()
    t0 = time.perf_counter()

    @settings(max_examples=a.examples, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @seed(a.seed)
    @given(case=STRATEGIES[a.family]())
    def body(case: Case) -> None:
        text = repr(case).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
        report["cases"] += 1
        for why in run_case(case, a.mode, torch, lg):
            short = why.split(":")[0] + op_name(case)
            if short in seen and len(report["problems"]) > 50:
                continue
            seen.add(short)
            report["problems"].append({"case": repr(case), "problem": why[:600]})

    body()
    report["seconds"] = time.perf_counter() - t0
    os.ftruncate(fd, 0)
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()

