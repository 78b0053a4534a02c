"""torch's ModuleInfo and OptimizerInfo databases as llgrad's oracle.

ModuleInfos (`torch.testing._internal.common_modules.module_db`): each row gives constructor
arguments and forward inputs for one `nn` module. Both libraries build the module, llgrad's
takes torch's `state_dict` (so the check also proves the keys and shapes agree), and in train
and in eval mode the outputs, the input gradients and the parameter gradients (a fixed
cotangent, float64) are compared. Modules that draw random numbers (dropout-like, RReLU,
fractional pooling) are compared on shapes and dtypes.

OptimizerInfos (`common_optimizers.optim_db`): each row gives the option combinations torch
tests (`foreach`, `maximize`, `amsgrad`, weight decay, ...). Both libraries start from the
same parameters, run five steps with a closure on the same quadratic-plus-tanh loss, and
compare the parameters and the optimizer state (torch's `state_dict()` layout).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import llgrad as lg

import torch

from opinfo_harness import Unsupported, flatten, lg_dtype, to_lg, to_np  # noqa: F401

RANDOM_MODULES = {"FractionalMaxPool2d", "FractionalMaxPool3d", "RReLU", "Dropout",
                  "AlphaDropout", "FeatureAlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d"}


@dataclass
class Result:
    """What one ModuleInfo or OptimizerInfo did."""
    key: str
    status: str = "pass"            # pass | fail | missing
    reason: str = ""
    cases: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        if self.status == "pass":
            self.status, self.reason = "fail", what


def _close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-7) -> str | None:
    av, ad = to_np(a)
    bv, bd = to_np(b)
    if ad != bd:
        return f"dtype {ad}, torch {bd}"
    if av.shape != bv.shape:
        return f"shape {list(av.shape)}, torch {list(bv.shape)}"
    if av.size and not np.allclose(av, bv, rtol=rtol, atol=atol, equal_nan=True):
        with np.errstate(all="ignore"):
            return f"values differ (max abs err {np.nanmax(np.abs(av - bv)):.3g})"
    return None


def _describe(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:150] if lines else ''}"


def run_module(info: Any, max_inputs: int | None = None) -> Result:
    name = info.module_cls.__name__
    res = Result(info.name)
    mine_cls = getattr(lg.nn, name, None)
    if mine_cls is None:
        res.status, res.reason = "missing", f"llgrad.nn has no {name}"
        return res
    random = name in RANDOM_MODULES
    for training in (True, False):
        torch.manual_seed(0)
        try:
            inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float64,
                                             requires_grad=True, training=training)
        except Exception:
            continue
        for mi in inputs[:max_inputs]:
            try:
                _one_module(info, mine_cls, mi, training, random, res)
            except Unsupported:
                continue
            except Exception as e:       # noqa: BLE001  (a harness defect must show)
                res.fail(f"harness: {_describe(e)}")
    if res.cases == 0 and res.status == "pass":
        res.status, res.reason = "fail", "no input could be converted"
    return res


def _to_lg_shared(x: Any, memo: dict[int, Any]) -> Any:
    """`to_lg` that keeps aliasing: a torch tensor passed twice (KLDivLoss's scalar sample
    gives the same tensor as input and target) becomes one llgrad tensor, so that its
    gradient sums both uses as torch's does."""
    if isinstance(x, torch.Tensor):
        if id(x) not in memo:
            memo[id(x)] = to_lg(x)
        return memo[id(x)]
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_to_lg_shared(v, memo) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(_to_lg_shared(v, memo) for v in x)
    if isinstance(x, dict):
        return {k: _to_lg_shared(v, memo) for k, v in x.items()}
    if isinstance(x, torch.nn.Module) and type(x).__name__ in _REBUILD:
        return _rebuild_module(x)
    return to_lg(x)


def _layer_kwargs(m: Any) -> dict[str, Any]:
    """The constructor arguments of a torch Transformer(En|De)coderLayer, read back."""
    act = m.activation
    return dict(d_model=m.self_attn.embed_dim, nhead=m.self_attn.num_heads,
                dim_feedforward=m.linear1.out_features, dropout=m.dropout.p,
                activation=to_lg(act) if not isinstance(act, torch.nn.Module)
                else _rebuild_module(act) if type(act).__name__ in _REBUILD
                else to_lg(act),
                layer_norm_eps=m.norm1.eps, batch_first=m.self_attn.batch_first,
                norm_first=m.norm_first, bias=m.linear1.bias is not None)


# torch modules with parameters passed as constructor arguments (TransformerEncoder's
# `encoder_layer`, a `norm`): llgrad's module of the same class with the same arguments,
# holding torch's state
_REBUILD: dict[str, Any] = {
    "TransformerEncoderLayer": _layer_kwargs,
    "TransformerDecoderLayer": _layer_kwargs,
    "LayerNorm": lambda m: dict(normalized_shape=tuple(m.normalized_shape), eps=m.eps,
                                elementwise_affine=m.elementwise_affine,
                                bias=m.bias is not None),
    "Linear": lambda m: dict(in_features=m.in_features, out_features=m.out_features,
                             bias=m.bias is not None),
}


def _rebuild_module(m: Any) -> Any:
    name = type(m).__name__
    p = next(iter(m.parameters()), None)
    ours = getattr(lg.nn, name)(**_REBUILD[name](m))
    if p is not None:
        ours = ours.to(lg_dtype(p.dtype))
    ours.load_state_dict({k: to_lg(v.detach()) for k, v in m.state_dict().items()})
    ours.train(m.training)
    return ours


def _one_module(info: Any, mine_cls: Any, mi: Any, training: bool, random: bool,
                res: Result) -> None:
    cargs, ckw = mi.constructor_input.args, mi.constructor_input.kwargs
    fargs, fkw = mi.forward_input.args, mi.forward_input.kwargs
    torch.manual_seed(0)
    theirs = info.module_cls(*cargs, **ckw).to(torch.float64)
    theirs.train(training)
    memo: dict[int, Any] = {}
    largs, lkw = _to_lg_shared(cargs, memo), _to_lg_shared(ckw, memo)
    lfargs, lfkw = _to_lg_shared(fargs, memo), _to_lg_shared(fkw, memo)
    res.cases += 1
    try:
        mine = mine_cls(*largs, **lkw).to(lg.float64)
        mine.train(training)
        if info.is_lazy:                  # materialize both before the state moves across
            theirs(*fargs, **fkw)
            mine(*lfargs, **lfkw)
        state = {k: to_lg(v.detach()) for k, v in theirs.state_dict().items()}
        mine.load_state_dict(state)
    except Exception as e:
        res.fail(f"construct/load_state_dict: {_describe(e)}")
        return
    try:
        want = theirs(*fargs, **fkw)
    except Exception:
        res.cases -= 1
        return
    try:
        got = mine(*lfargs, **lfkw)
    except Exception as e:
        res.fail(f"forward ({'train' if training else 'eval'}): {_describe(e)}")
        return
    outs_t = [o for o in flatten(want) if isinstance(o, torch.Tensor)]
    outs_l = [o for o in flatten(got) if isinstance(o, lg.Tensor)]
    if len(outs_t) != len(outs_l):
        res.fail(f"forward: {len(outs_l)} tensor outputs, torch {len(outs_t)}")
        return
    for i, (m, t) in enumerate(zip(outs_l, outs_t)):
        diff = _close(m, t) if not random else (
            None if tuple(m.shape) == tuple(t.shape) else f"shape {list(m.shape)}")
        if diff:
            res.fail(f"forward ({'train' if training else 'eval'}) output {i}: {diff}")
            return
    if not random:
        diff = _module_grads(theirs, mine, fargs, fkw, lfargs, lfkw, outs_t, outs_l)
        if diff:
            res.fail(f"grad ({'train' if training else 'eval'}): {diff}")
            return
        for k, v in theirs.state_dict().items():      # running statistics after forward
            mv = mine.state_dict().get(k)
            if mv is None:
                res.fail(f"state_dict: llgrad has no {k!r}")
                return
            if isinstance(v, torch.Tensor) and v.dtype.is_floating_point:
                diff = _close(mv, v)
                if diff:
                    res.fail(f"state after forward: {k}: {diff}")
                    return
    res.passed += 1


def _module_grads(theirs: Any, mine: Any, fargs: Any, fkw: Any, lfargs: Any, lfkw: Any,
                  outs_t: list[Any], outs_l: list[Any]) -> str | None:
    """VJPs of the outputs w.r.t. the inputs that require grad and the parameters."""
    ins_t = [t for t in flatten([list(fargs), list(fkw.values())])
             if isinstance(t, torch.Tensor) and t.requires_grad]
    ins_l = [t for t in flatten([list(lfargs), list(lfkw.values())])
             if isinstance(t, lg.Tensor) and t.requires_grad]
    params_t = dict(theirs.named_parameters())
    params_l = dict(mine.named_parameters())
    if set(params_t) != set(params_l):
        return f"parameters {sorted(params_l)}, torch {sorted(params_t)}"
    names = sorted(params_t)
    diff_t = [o for o in outs_t if o.requires_grad]
    diff_l = [o for o in outs_l if o.requires_grad]
    if not diff_t:
        return None
    if len(diff_t) != len(diff_l):
        return f"{len(diff_l)} outputs require grad, torch {len(diff_t)}"
    gen = np.random.default_rng(0)
    cots = [torch.tensor(gen.standard_normal(o.shape), dtype=o.dtype) for o in diff_t]
    leaves_t = ins_t + [params_t[n] for n in names]
    leaves_l = ins_l + [params_l[n] for n in names]
    want = torch.autograd.grad(diff_t, leaves_t, cots, allow_unused=True)
    got = lg.autograd.grad(diff_l, leaves_l, [to_lg(c) for c in cots], allow_unused=True)
    labels = [f"input {i}" for i in range(len(ins_t))] + names
    for label, g, w in zip(labels, got, want):
        if w is None:
            continue
        if g is None:
            g = lg.zeros(*w.shape, dtype=lg.float64)
        diff = _close(g, w, rtol=1e-5, atol=1e-6)
        if diff:
            return f"{label}: {diff}"
    return None


# -- optimizers -----------------------------------------------------------------------------

def _problem(lib: Any) -> tuple[list[Any], Any]:
    gen = np.random.default_rng(1)
    w0 = gen.standard_normal((3, 4))
    b0 = gen.standard_normal(4)
    x = gen.standard_normal((5, 3))
    params = [lib.tensor(w0, requires_grad=True), lib.tensor(b0, requires_grad=True)]
    xt = lib.tensor(x)

    def loss() -> Any:
        y = lib.tanh(xt @ params[0] + params[1])
        return (y * y).sum() + (params[0] * params[0]).sum() * 0.1
    return params, loss


def run_optimizer(info: Any, steps: int = 5, max_inputs: int | None = None) -> Result:
    name = info.optim_cls.__name__
    res = Result(name)
    mine_cls = getattr(lg.optim, name, None)
    if mine_cls is None:
        res.status, res.reason = "missing", f"llgrad.optim has no {name}"
        return res
    try:
        inputs = info.optim_inputs_func(device="cpu")
    except Exception as e:
        res.fail(f"harness: {_describe(e)}")
        return res
    for oi in inputs[:max_inputs]:
        kwargs = dict(oi.kwargs)
        if kwargs.get("fused") or kwargs.get("capturable"):
            continue                  # CUDA-only paths of torch
        res.cases += 1
        try:
            diff = _one_optimizer(info.optim_cls, mine_cls, kwargs, steps)
        except Unsupported:
            res.cases -= 1
            continue
        except Exception as e:       # noqa: BLE001
            diff = f"harness: {_describe(e)}"
        if diff:
            res.fail(f"{oi.desc} {kwargs}: {diff}"[:300])
        else:
            res.passed += 1
    return res


def _one_optimizer(theirs_cls: Any, mine_cls: Any, kwargs: dict[str, Any],
                   steps: int) -> str | None:
    pt, loss_t = _problem(torch)
    pl, loss_l = _problem(lg)
    if theirs_cls.__name__ == "Muon":     # Muon optimizes 2-D parameters only (torch's rule)
        pt, pl = pt[:1], pl[:1]
    opt_t = theirs_cls(pt, **kwargs)
    try:
        opt_l = mine_cls(pl, **to_lg(kwargs))
    except Exception as e:
        return f"construct: {_describe(e)}"

    def closure_t() -> Any:
        opt_t.zero_grad()
        value = loss_t()
        value.backward()
        return value

    def closure_l() -> Any:
        opt_l.zero_grad()
        value = loss_l()
        value.backward()
        return value

    for step in range(steps):
        opt_t.step(closure_t)
        try:
            opt_l.step(closure_l)
        except Exception as e:
            return f"step {step}: {_describe(e)}"
    for i, (a, b) in enumerate(zip(pl, pt)):
        diff = _close(a.detach(), b.detach(), rtol=1e-6, atol=1e-8)
        if diff:
            return f"parameter {i} after {steps} steps: {diff}"
    st, sl = opt_t.state_dict()["state"], opt_l.state_dict()["state"]
    for idx, entry in st.items():
        mine = sl.get(idx)
        if mine is None:
            return f"state_dict has no state for parameter {idx}"
        for k, v in entry.items():
            if k not in mine:
                return f"state_dict state[{idx}] has no {k!r} (torch's keys {sorted(entry)})"
            if isinstance(v, torch.Tensor):
                m = mine[k]
                if not isinstance(m, lg.Tensor):
                    m = lg.tensor(m, dtype=lg.float64 if v.dtype == torch.float64
                                  else lg.float32)
                if v.dtype.is_floating_point and v.numel():
                    diff = _close(m.detach().to(lg.float64), v.detach().double(),
                                  rtol=1e-6, atol=1e-8)
                    if diff:
                        return f"state[{idx}][{k!r}]: {diff}"
    return None
