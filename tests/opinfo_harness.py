"""torch's OpInfo database as llgrad's oracle: convert each sample, run both, compare.

`torch.testing._internal.common_methods_invocations.op_db` lists, for every op of torch's
test suite, sample inputs (shapes, dtypes, broadcasting, non-contiguous and empty cases,
keyword arguments), error inputs and whether the op supports autograd. This module runs
an OpInfo's samples through llgrad and through torch and compares:
- values: shapes, dtypes and values of every tensor output (random ops: shapes and dtypes);
- gradients: for float64 samples of ops torch differentiates, the vector-Jacobian product of
  every output with a fixed cotangent, against torch's;
- compiled: the first sample under `lg.compile` against llgrad's eager result;
- errors: each error input raises an exception of torch's type (or a subclass of it).

Used by tests/test_opinfo.py (a sample of every OpInfo in CI, the full sweep under the
slow mark) and tools/opinfo_sweep.py (writes tests/opinfo_status.json and docs/opinfo.md).
"""
from __future__ import annotations

import dataclasses
import math
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import llgrad as lg

import torch

# namespaces of op_db outside the coverage table (prototype or other packages)
OUTSIDE = {"masked": "torch.masked (prototype masked reductions)",
           "sparse": "torch.sparse (sparse layouts)",
           "signal": "torch.signal.windows (not in the coverage table)"}

TOL = {"float64": (1e-7, 1e-7), "float32": (1e-4, 1e-5), "complex128": (1e-7, 1e-7),
       "complex64": (1e-4, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}


# sampling ops whose OpInfo hides the seed inside a torch-only wrapper
RANDOM_OPS = {"randn", "rand", "randint", "randn_like", "rand_like", "randint_like",
              "bernoulli", "multinomial", "normal", "poisson", "nn.functional.rrelu",
              "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
              "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
              "cauchy", "exponential", "geometric", "log_normal", "uniform", "randperm"}


class Unsupported(Exception):
    """A sample holds something llgrad has no counterpart of (a layout, a device)."""


@dataclass
class OpResult:
    """What one OpInfo did: counts per check and the first failure of each kind."""
    key: str
    status: str = "pass"            # pass | fail | missing | outside
    reason: str = ""
    samples: int = 0
    passed: int = 0
    grad_samples: int = 0
    grad_passed: int = 0
    compiled: str = ""              # pass | fail | "" (not run)
    errors: int = 0                 # error inputs tried (their failures are listed, but
                                    # the status counts values, gradients and compiled)
    errors_passed: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        if self.status == "pass":
            self.status, self.reason = "fail", what


def key_of(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def lg_dtype(d: torch.dtype) -> Any:
    name = str(d).split(".")[1]
    if name == "bool":
        return lg.bool
    got = getattr(lg, name, None)
    if got is None:
        raise Unsupported(f"dtype {name}")
    return got


def to_lg(x: Any, requires_grad: bool | None = None) -> Any:
    """A torch value (tensors anywhere in lists, tuples, dicts) as llgrad's."""
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided or x.is_quantized:
            raise Unsupported(f"layout {x.layout}")
        if x.dim() > 32:
            raise Unsupported(f"{x.dim()} dimensions (NumPy holds at most 64)")
        if x._is_zerotensor():
            x = torch.zeros(x.shape, dtype=x.dtype)
        t = x.detach()
        d = lg_dtype(t.dtype)
        if t.dtype in (torch.bfloat16, torch.float16):
            out = lg.tensor(t.float().numpy()).to(d)
        else:
            out = lg.tensor(t.resolve_conj().resolve_neg().numpy().copy(), dtype=d)
        if not t.is_contiguous() and t.dim() >= 2 and hasattr(lg, "as_strided") and t.numel():
            out = _strided_like(t, out)
        if (x.requires_grad if requires_grad is None else requires_grad):
            out.requires_grad_(True)
        return out
    if isinstance(x, torch.dtype):
        return lg_dtype(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, torch.device):
        return lg.device(str(x))
    if isinstance(x, torch.memory_format):
        got = getattr(lg, str(x).split(".")[1], None)
        if got is None:
            raise Unsupported(f"memory format {x}")
        return got
    if isinstance(x, torch.Generator):
        raise Unsupported("torch.Generator argument")
    if isinstance(x, torch.layout):
        if x != torch.strided:
            raise Unsupported(f"layout {x}")
        return lg.strided
    if isinstance(x, torch.nn.Module):
        return _lg_module(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and \
            type(x).__module__.startswith("torch"):
        # an options object (nn.LinearCrossEntropyOptions): llgrad's of the same name
        ours = getattr(lg.nn, type(x).__name__, None)
        if ours is None:
            raise Unsupported(f"torch options argument {type(x).__name__}")
        return ours(**{f.name: to_lg(getattr(x, f.name)) for f in dataclasses.fields(x)})
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(to_lg(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(to_lg(v) for v in x)
    if isinstance(x, dict):
        return {k: to_lg(v) for k, v in x.items()}
    if callable(x) and (getattr(x, "__module__", None) or "").startswith("torch"):
        return _lg_callable(x)
    return x


def _lg_module(m: Any) -> Any:
    """llgrad's module of the same class for a torch module without parameters or buffers
    passed as an argument (`distance_function=nn.PairwiseDistance()`), with its public
    attributes."""
    cls = getattr(lg.nn, type(m).__name__, None)
    if cls is None or list(m.parameters()) or list(m.buffers()):
        raise Unsupported(f"torch module argument {type(m).__name__}")
    ours = cls.__new__(cls)
    lg.nn.Module.__init__(ours)
    for k, v in vars(m).items():
        if not k.startswith("_"):
            setattr(ours, k, to_lg(v))
    return ours


def _lg_callable(fn: Any) -> Any:
    """llgrad's function for a torch function passed as an argument (a loss's
    `distance_function=torch.nn.functional.pairwise_distance`), found by name in the
    namespace of the same path; Unsupported when llgrad has none."""
    name = getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None) or ""
    spaces = [lg.nn.functional] if module.startswith("torch.nn") else []
    spaces += [lg.linalg] if "linalg" in module else []
    spaces += [lg.special] if "special" in module else []
    spaces += [lg, lg.nn.functional]
    for ns in spaces:
        got = getattr(ns, name, None) if name else None
        if callable(got):
            return got
    raise Unsupported(f"torch callable argument {fn} (llgrad has no {name})")


def _strided_like(t: torch.Tensor, dense: Any) -> Any:
    """`dense`'s values laid out with `t`'s strides (a non-contiguous llgrad tensor)."""
    order = sorted(range(t.dim()), key=lambda i: -t.stride(i))
    perm = dense.permute(order).contiguous()
    inverse = [order.index(i) for i in range(t.dim())]
    return perm.permute(inverse)


def to_np(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        t = x.detach().resolve_conj().resolve_neg()
        if t._is_zerotensor():
            t = torch.zeros(t.shape, dtype=t.dtype)
        if t.dtype in (torch.bfloat16, torch.float16):
            return t.float().numpy(), str(t.dtype).split(".")[1]
        return t.numpy(), str(t.dtype).split(".")[1]
    if isinstance(x, lg.Tensor):
        t = x.detach()
        name = t.dtype.name if hasattr(t.dtype, "name") else str(t.dtype)
        name = {"bool_": "bool"}.get(name, name)
        if name in ("bfloat16", "float16"):
            return t.float().numpy(), name
        return t.numpy(), name
    raise TypeError(type(x))


def flatten(x: Any) -> list[Any]:
    if isinstance(x, (torch.Tensor, lg.Tensor)):
        return [x]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in flatten(item)]
    return [x]


# ops whose index outputs are unspecified among equal values (torch's CPU kernels do not
# keep ties in order; llgrad's sort is stable): their indices are checked by what they
# select, not by value
TIE_OPS = {"sort", "argsort", "topk", "kthvalue", "mode", "msort", "median", "nanmedian",
           "max.reduction_with_dim", "min.reduction_with_dim", "cummax", "cummin"}


def compare_ties(op: Any, sample: Any, mine: Any, theirs: Any) -> str | None:
    """`compare` for TIE_OPS: values outputs exactly; index outputs exactly when the input
    has no repeated value, else by shape and dtype only (which of equal values is chosen is
    unspecified in torch)."""
    x = sample.input.detach() if isinstance(sample.input, torch.Tensor) else None
    ties = x is not None and x.numel() and torch.unique(x.reshape(-1)).numel() < x.numel()
    a, b = flatten(mine), flatten(theirs)
    if len(a) != len(b):
        return f"{len(a)} outputs, torch {len(b)}"
    for i, (m, t) in enumerate(zip(a, b)):
        if isinstance(t, torch.Tensor) and t.dtype == torch.int64 and ties:
            diff = compare(m, t, random=True)
        else:
            diff = compare(m, t)
        if diff:
            return diff.replace("output 0", f"output {i}")
    return None


# eigenvector outputs (output 1) are defined up to a unit phase per column (a sign when
# real): compared after aligning each column's phase to torch's, as torch's own tests do
EIG_OPS = {"linalg.eig", "linalg.eigh"}


def compare_eig(mine: Any, theirs: Any) -> str | None:
    """`compare` for EIG_OPS: eigenvalues exactly as `compare`; each eigenvector column
    times the unit phase conj(m) . w / |conj(m) . w| against torch's."""
    a, b = flatten(mine), flatten(theirs)
    if len(a) != len(b) or len(b) != 2:
        return compare(mine, theirs)
    diff = compare(a[0], b[0])
    if diff:
        return diff
    m, t = a[1], b[1]
    if not isinstance(m, lg.Tensor):
        return f"output 1: {type(m).__name__}, torch a Tensor"
    mv, md = to_np(m)
    tv, td = to_np(t)
    if md != td or mv.shape != tv.shape:
        return f"output 1: {md}{list(mv.shape)}, torch {td}{list(tv.shape)}"
    if not mv.size:
        return None
    dot = np.sum(np.conj(mv) * tv, axis=-2, keepdims=True)
    size = np.abs(dot)
    phase = np.where(size > 0, dot / np.where(size > 0, size, 1), 1)
    aligned = mv * phase
    rtol, atol = TOL.get(td, (0, 0))
    if not np.allclose(aligned, tv, rtol=rtol, atol=atol, equal_nan=True):
        err = np.nanmax(np.abs(aligned - tv))
        return f"output 1: eigenvectors differ beyond a phase (max abs err {err:.3g})"
    return None


# singular vector outputs: column j of U (and of V) is defined up to a unit phase (a sign
# when real), the same one for u_j and v_j; with full_matrices=True (some=False) the columns
# past min(m, n) are any orthonormal basis of the complement. Compared as torch's own tests
# do: S exactly, the first min(m, n) columns after aligning each pair's phase to torch's,
# the rest by being unitary; the gradient check runs on the sample's gauge-invariant view
# (its output_process_fn_grad: |U|, S, |Vh|, U @ Vh)
SVD_OPS = {"svd", "linalg.svd"}


def compare_svd(key: str, mine: Any, theirs: Any) -> str | None:
    """`compare` for SVD_OPS: (U, S, Vh) of linalg.svd, (U, S, V) of torch.svd."""
    a, b = flatten(mine), flatten(theirs)
    if len(a) != len(b) or len(b) != 3:
        return compare(mine, theirs)
    for i in range(3):
        if not isinstance(a[i], lg.Tensor):
            return f"output {i}: {type(a[i]).__name__}, torch a Tensor"
    (uv, ud), (sv, sd), (vv, vd) = (to_np(x) for x in a)
    (tu, tud), (ts, tsd), (tv, tvd) = (to_np(x) for x in b)
    for i, (mv, md, wv, wd) in enumerate(((uv, ud, tu, tud), (sv, sd, ts, tsd),
                                          (vv, vd, tv, tvd))):
        if md != wd or mv.shape != wv.shape:
            return f"output {i}: {md}{list(mv.shape)}, torch {wd}{list(wv.shape)}"
    diff = compare(a[1], b[1])
    if diff:
        return diff.replace("output 0", "output 1")
    if key == "linalg.svd":           # Vh: V's columns are Vh's conjugated rows
        vv, tv = np.conj(np.swapaxes(vv, -1, -2)), np.conj(np.swapaxes(tv, -1, -2))
    if not uv.size and not vv.size:
        return None
    if not np.any(tu) and not np.any(tv):     # torch.svd(compute_uv=False): zeros
        return compare(mine, theirs)
    k = sv.shape[-1]
    rtol, atol = TOL.get(tud, (0, 0))
    mu, wu, mvv, wvv = uv[..., :k], tu[..., :k], vv[..., :k], tv[..., :k]
    dot = (np.sum(np.conj(mu) * wu, axis=-2, keepdims=True) +
           np.sum(np.conj(mvv) * wvv, axis=-2, keepdims=True))
    size = np.abs(dot)
    phase = np.where(size > 0, dot / np.where(size > 0, size, 1), 1)
    for i, (m, w) in ((0, (mu, wu)), (2, (mvv, wvv))):
        aligned = m * phase
        if aligned.size and not np.allclose(aligned, w, rtol=rtol, atol=atol, equal_nan=True):
            err = np.nanmax(np.abs(aligned - w))
            return f"output {i}: singular vectors differ beyond a phase (max abs err {err:.3g})"
    for i, m in ((0, uv), (2, vv)):
        if m.shape[-1] > k and m.size:
            gram = np.conj(np.swapaxes(m, -1, -2)) @ m
            if not np.allclose(gram, np.eye(m.shape[-1]), rtol=rtol, atol=10 * atol):
                return f"output {i}: not unitary (full_matrices columns)"
    return None


def compare(mine: Any, theirs: Any, random: bool = False) -> str | None:
    """None when llgrad's output equals torch's, else what differs."""
    a, b = flatten(mine), flatten(theirs)
    if len(a) != len(b):
        return f"{len(a)} outputs, torch {len(b)}"
    for i, (m, t) in enumerate(zip(a, b)):
        if isinstance(t, torch.Tensor):
            if not isinstance(m, lg.Tensor):
                return f"output {i}: {type(m).__name__}, torch a Tensor"
            mv, md = to_np(m)
            tv, td = to_np(t)
            if md != td:
                return f"output {i}: dtype {md}, torch {td}"
            if mv.shape != tv.shape:
                return f"output {i}: shape {list(mv.shape)}, torch {list(tv.shape)}"
            if random or not mv.size:
                continue
            rtol, atol = TOL.get(td, (0, 0))
            if td in ("bool",) or td.startswith(("int", "uint")):
                ok = np.array_equal(mv, tv)
            else:
                ok = np.allclose(mv, tv, rtol=rtol, atol=atol, equal_nan=True)
            if not ok:
                with np.errstate(all="ignore"):
                    err = np.nanmax(np.abs(mv.astype(np.complex128) - tv))
                return f"output {i}: values differ (max abs err {err:.3g})"
        elif isinstance(t, (bool, int, float, complex)) and not isinstance(t, bool) and \
                isinstance(m, (int, float, complex)):
            if not (m == t or (isinstance(t, float) and math.isnan(t) and math.isnan(m))) \
                    and not math.isclose(complex(m).real, complex(t).real, rel_tol=1e-5):
                return f"output {i}: {m!r}, torch {t!r}"
        elif type(t) is torch.Size:
            if tuple(m) != tuple(t):
                return f"output {i}: {m!r}, torch {t!r}"
        elif t is not None and not isinstance(t, (torch.Tensor,)) and m != t:
            return f"output {i}: {m!r}, torch {t!r}"
    return None


_RULES: list[Any] = []


def outside_reason(op: Any) -> str | None:
    """Why an OpInfo lies outside llgrad's table, or None: a prototype namespace, a private
    op (`_foo`, `torch.ops.*`, `torch._*`), CUDA's jiterator, or a name that
    llgrad/api_exclusions.txt excludes (its reason)."""
    import fnmatch
    name = op.name
    head = name.split(".")[0]
    if head in OUTSIDE:
        return OUTSIDE[head]
    if name.startswith(("_", "torch.ops.", "torch._")):
        return "a private op (not public API)"
    if name.startswith("jiterator_"):
        return "jiterator: CUDA-only runtime-compiled kernels"
    if not _RULES:
        from llgrad._api_coverage import load_rules
        _RULES.extend(load_rules())
    for prefix, label in (("nn.functional.", "nn.functional"), ("linalg.", "linalg"),
                          ("special.", "special"), ("fft.", "fft")):
        if name.startswith(prefix):
            spaces, short = (label,), name[len(prefix):]
            break
    else:
        spaces, short = ("torch", "Tensor"), name
    for space in spaces:
        for rule in _RULES:
            if rule.namespace == space and fnmatch.fnmatchcase(short, rule.pattern):
                return f"excluded ({space}): {rule.reason}"
    return None


def _wrapper_set_seed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    lg.manual_seed(42)
    return fn(*args, **kwargs)


def _ported_lambda(op: Any) -> Callable[..., Any] | None:
    """An OpInfo whose op is a lambda over torch (`lambda a, b: torch.linalg.pinv(a @
    b.mT)`, argument orders swapped, outputs sliced) run as the same lambda over llgrad:
    its code with `torch` bound to llgrad (and torch's seeding wrapper to llgrad's). None
    when the lambda reads other globals."""
    import types
    fn = op.op
    if getattr(fn, "__name__", "") != "<lambda>" or fn.__closure__:
        return None
    used = {n for n in fn.__code__.co_names if n in fn.__globals__}
    if not used <= {"torch", "wrapper_set_seed"}:
        return None
    g = dict(fn.__globals__)
    g["torch"] = lg
    g["wrapper_set_seed"] = _wrapper_set_seed
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__)


def resolve(op: Any) -> tuple[Callable[..., Any] | None, str]:
    """llgrad's callable for an OpInfo: ('function' path, or a method call), or None."""
    fn, how = _resolve_by_name(op)
    if how == "outside":
        return fn, how
    name = op.name
    if fn is None and hasattr(torch.Tensor, name + "_") and hasattr(lg.Tensor, name + "_"):
        how = "method"           # a random fill (`cauchy`): its OpInfo calls `cauchy_`
        fn = (lambda x, *a, **k: getattr(x.clone(), name + "_")(*a, **k))
    if fn is not None:
        ported = _ported_lambda(op)
        if ported is not None:
            return ported, how
    return fn, how


def _resolve_by_name(op: Any) -> tuple[Callable[..., Any] | None, str]:
    name = op.name
    if outside_reason(op) is not None:
        return None, "outside"
    target: Any = lg
    tobj: Any = torch
    for part in name.split("."):
        target = getattr(target, part, None) if target is not None else None
        tobj = getattr(tobj, part, None) if tobj is not None else None
    if tobj is not None and callable(tobj) and (op.op is tobj or "." in name
                                                or getattr(op.op, "__name__", "") == name):
        return (target, "function") if target is not None else (None, "missing")
    if hasattr(torch.Tensor, name):
        if not hasattr(lg.Tensor, name):
            return None, "missing"
        if isinstance(getattr(torch.Tensor, name), property) or \
                type(getattr(torch.Tensor, name)).__name__ == "getset_descriptor":
            return (lambda x: getattr(x, name)), "attribute"
        if name.endswith("_") and not name.endswith("__"):
            # torch's OpInfos of in-place methods write into a clone of the sample
            return (lambda x, *a, **k: getattr(x.clone(), name)(*a, **k)), "method"
        return (lambda x, *a, **k: getattr(x, name)(*a, **k)), "method"
    if tobj is not None and callable(tobj):
        return (target, "function") if target is not None else (None, "missing")
    return None, "missing"


def _torch_call(op: Any, sample: Any) -> Any:
    return op.op(sample.input, *sample.args, **sample.kwargs)


def is_random(op: Any, sample: Any) -> bool:
    """Whether torch's result is random or uninitialized memory (a sampling op, `empty`):
    torch's own result changes with the seed, or its OpInfo fixes the seed itself."""
    code = getattr(op.op, "__code__", None)
    if code is not None and "wrapper_set_seed" in code.co_names or "empty" in op.name \
            or op.name in RANDOM_OPS:
        return True
    try:
        torch.manual_seed(0)
        a = _torch_call(op, sample)
        torch.manual_seed(1)
        b = _torch_call(op, sample)
    except Exception:
        return False
    fa, fb = flatten(a), flatten(b)
    return any(isinstance(x, torch.Tensor) and x.numel() and x.shape == y.shape and
               not torch.equal(x.detach(), y.detach()) for x, y in zip(fa, fb))


def _describe(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:160] if lines else ''}"


def run_values(op: Any, fn: Callable[..., Any], sample: Any, res: OpResult) -> Any:
    res.samples += 1
    try:
        want = _torch_call(op, sample)
    except Exception:
        res.samples -= 1          # torch itself refuses this sample on the CPU
        return None
    try:
        args = (to_lg(sample.input), to_lg(sample.args), to_lg(sample.kwargs))
    except Unsupported:
        res.samples -= 1
        return None
    try:
        got = fn(args[0], *args[1], **args[2])
    except Exception as e:
        res.fail(f"values: raised {_describe(e)}")
        return None
    if key_of(op) in TIE_OPS or op.name in TIE_OPS:
        diff = compare_ties(op, sample, got, want)
    elif key_of(op) in EIG_OPS:
        diff = compare_eig(got, want)
    elif key_of(op) in SVD_OPS:
        diff = compare_svd(key_of(op), got, want)
    else:
        diff = compare(got, want, random=is_random(op, sample))
    if diff:
        res.fail(f"values: {diff}")
        return None
    res.passed += 1
    return args


def torch_grad_known_wrong(op: Any) -> bool:
    """Whether torch's own OpInfo marks its backward gradient test (TestBwdGradients.
    test_fn_grad) an expected failure: torch's gradient is then no oracle (as_strided_scatter
    passes the gradient to the wrong elements)."""
    for d in getattr(op, "decorators", ()) or ():
        if getattr(d, "cls_name", None) == "TestBwdGradients" and \
                getattr(d, "test_name", None) == "test_fn_grad" and \
                getattr(d, "device_type", None) in (None, "cpu") and \
                getattr(d, "active_if", True) and \
                (getattr(d, "dtypes", None) is None or torch.float64 in d.dtypes) and \
                any(getattr(f, "__name__", "") == "expectedFailure"
                    for f in getattr(d, "decorators", ())):
            return True
    return False


def run_grad(op: Any, fn: Callable[..., Any], sample: Any, res: OpResult) -> None:
    """The VJP of every differentiable output with a fixed cotangent, against torch's
    (not for random ops, whose gradients depend on the draws, nor where torch's OpInfo
    marks its own gradient wrong: `torch_grad_known_wrong`)."""
    if is_random(op, sample) or torch_grad_known_wrong(op):
        return
    leaves_t = [t for t in flatten([sample.input, list(sample.args),
                                    list(sample.kwargs.values())])
                if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves_t:
        return
    try:
        out_t = _torch_call(op, sample)
        if key_of(op) in EIG_OPS | SVD_OPS:  # the sample's gauge-invariant view (|vectors|)
            out_t = sample.output_process_fn_grad(out_t)
    except Exception:
        return
    outs_t = [o for o in flatten(out_t) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs_t:
        return
    gen = np.random.default_rng(0)
    cots = [torch.tensor(gen.standard_normal(o.shape), dtype=o.dtype) if not o.is_complex()
            else torch.tensor(gen.standard_normal(o.shape) + 1j * gen.standard_normal(o.shape),
                              dtype=o.dtype) for o in outs_t]
    try:
        want = torch.autograd.grad(outs_t, leaves_t, cots, allow_unused=True)
    except Exception:
        return
    res.grad_samples += 1
    try:
        conv = {}
        def conv_tensor(t: Any) -> Any:
            if isinstance(t, torch.Tensor):
                if id(t) not in conv:
                    conv[id(t)] = to_lg(t)
                return conv[id(t)]
            if isinstance(t, (list, tuple)) and not hasattr(t, "_fields"):
                return type(t)(conv_tensor(v) for v in t)
            if isinstance(t, dict):
                return {k: conv_tensor(v) for k, v in t.items()}
            return to_lg(t)
        x = conv_tensor(sample.input)
        a = conv_tensor(sample.args)
        k = conv_tensor(sample.kwargs)
        leaves = [conv[id(t)] for t in leaves_t]
    except Unsupported:
        res.grad_samples -= 1
        return
    try:
        out = fn(x, *a, **k)
        if key_of(op) in EIG_OPS | SVD_OPS:
            out = sample.output_process_fn_grad(tuple(out))
        outs = [o for o in flatten(out) if isinstance(o, lg.Tensor) and o.requires_grad]
        if len(outs) != len(outs_t):
            res.fail(f"grad: {len(outs)} outputs require grad, torch {len(outs_t)}")
            return
        got = lg.autograd.grad(outs, leaves, [to_lg(c) for c in cots], allow_unused=True)
    except Exception as e:
        res.fail(f"grad: raised {_describe(e)}")
        return
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None:
            continue
        if g is None:
            g = lg.zeros(*w.shape, dtype=lg_dtype(w.dtype))
        mv, _ = to_np(g)
        wv, wd = to_np(w)
        rtol, atol = TOL.get(wd, (1e-6, 1e-6))
        if mv.shape != wv.shape or not np.allclose(mv, wv, rtol=max(rtol, 1e-6),
                                                   atol=max(atol, 1e-6), equal_nan=True):
            res.fail(f"grad: input {i} gradient differs")
            return
    res.grad_passed += 1


def run_compiled(fn: Callable[..., Any], args: Any, res: OpResult, random: bool = False
                 ) -> None:
    """The first sample under lg.compile against eager llgrad (shapes and dtypes only for
    random ops)."""
    x, a, k = args
    tensors = [t for t in flatten([x, list(a), list(k.values())]) if isinstance(t, lg.Tensor)]
    if not tensors:
        return
    try:
        eager = fn(x, *a, **k)
    except Exception:
        return

    def call(*ts: Any) -> Any:
        it = iter(ts)
        swap = {id(t): next(it) for t in tensors}

        def sub(v: Any) -> Any:
            if isinstance(v, lg.Tensor):
                return swap.get(id(v), v)
            if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
                return type(v)(sub(u) for u in v)
            if isinstance(v, dict):
                return {kk: sub(u) for kk, u in v.items()}
            return v
        return fn(sub(x), *sub(a), **sub(k))

    import warnings
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = lg.compile(call)(*tensors)
    except Exception as e:
        res.compiled = "fail"
        res.fail(f"compiled: raised {_describe(e)}")
        return
    fallback = [w for w in caught if "could not compile" in str(w.message)]
    if fallback:           # an internal compile failure hidden by the eager fallback
        res.compiled = "fail"
        res.fail(f"compiled: fell back to eager: {str(fallback[0].message)[:150]}")
        return
    a_, b_ = flatten(got), flatten(eager)
    for m, e in zip(a_, b_):
        if isinstance(e, lg.Tensor):
            mv, md = to_np(m)
            ev, ed = to_np(e)
            rtol, atol = TOL.get(ed, (0, 0))
            if md != ed or mv.shape != ev.shape or (mv.size and not random and not (
                    np.array_equal(mv, ev) if ed == "bool" or ed.startswith(("int", "uint"))
                    else np.allclose(mv, ev, rtol=rtol * 10, atol=atol * 10, equal_nan=True))):
                res.compiled = "fail"
                res.fail("compiled: differs from eager")
                return
    res.compiled = "pass"


def run_errors(op: Any, fn: Callable[..., Any], res: OpResult, limit: int | None) -> None:
    try:
        errors = list(op.error_inputs("cpu"))
    except Exception:
        return
    for e in errors[:limit]:
        s = e.sample_input
        try:
            args = (to_lg(s.input), to_lg(s.args), to_lg(s.kwargs))
        except Unsupported:
            continue
        res.errors += 1
        try:
            fn(args[0], *args[1], **args[2])
        except e.error_type:
            res.errors_passed += 1
        except Exception as got:
            res.failures.append(f"error input: raised {type(got).__name__}, torch "
                                f"{e.error_type.__name__} ({e.error_regex[:60]!r})")
        else:
            res.failures.append(f"error input: no error, torch raises "
                                f"{e.error_type.__name__} ({e.error_regex[:60]!r})")


def has_empty_tensor(sample: Any) -> bool:
    """Whether a sample's input or arguments hold a tensor with no elements."""
    found = False

    def visit(x: Any) -> None:
        nonlocal found
        if isinstance(x, torch.Tensor):
            found = found or x.numel() == 0
        elif isinstance(x, (list, tuple)):
            for v in x:
                visit(v)
        elif isinstance(x, dict):
            for v in x.values():
                visit(v)

    visit((sample.input, sample.args, sample.kwargs))
    return found


def _capped(samples: list, cap: int | None, extra: Callable[[Any], bool] | None,
            extra_cap: int) -> list:
    """The first `cap` samples, then up to `extra_cap` of the rest that `extra` selects."""
    head = samples[:cap]
    if extra is None or cap is None:
        return head
    return head + [s for s in samples[cap:] if extra(s)][:extra_cap]


def run_op(op: Any, max_samples: int | None = None, grad_samples: int | None = None,
           compiled: bool = True, errors: int | None = None,
           dtypes: tuple[torch.dtype, ...] = (torch.float32,),
           extra: Callable[[Any], bool] | None = None, extra_cap: int = 2) -> OpResult:
    """Run one OpInfo; `max_samples`/`grad_samples`/`errors` cap the samples per check.
    `extra` selects further samples beyond the caps (up to `extra_cap` per dtype and for
    gradients): the CI sample adds those with empty tensors (`has_empty_tensor`), the
    inputs whose defects a cap of the first few samples hides."""
    res = OpResult(key_of(op))
    fn, how = resolve(op)
    if fn is None:
        res.status = how
        res.reason = outside_reason(op) or "llgrad has no such function"
        return res
    supported = op.supported_dtypes("cpu")
    first_args = None
    first_sample = None
    # the first converted sample of each dtype: compiled against eager below (a compiled
    # kernel may take another path per dtype: complex products call other BLAS routines)
    firsts: list[tuple[Any, Any]] = []
    for d in dtypes:
        if d not in supported:
            continue
        torch.manual_seed(0)
        try:
            samples = list(op.sample_inputs("cpu", d))
        except Exception:
            continue
        first_of_dtype = True
        for s in _capped(samples, max_samples, extra, extra_cap):
            try:
                args = run_values(op, fn, s, res)
            except Exception as e:       # a defect of the harness must not pass silently
                res.fail(f"harness: {_describe(e)} {traceback.format_exc(limit=-1)[-200:]}")
                args = None
            if args is not None and first_args is None:
                first_args, first_sample = args, s
            if args is not None and first_of_dtype:
                firsts.append((args, s))
                first_of_dtype = False
    if not any(d in supported for d in dtypes):
        d = next(iter(sorted(supported, key=str)), None)
        if d is not None:
            try:
                for s in list(op.sample_inputs("cpu", d))[:max_samples]:
                    args = run_values(op, fn, s, res)
                    if args is not None and first_args is None:
                        first_args, first_sample = args, s
            except Exception as e:
                res.fail(f"harness: {_describe(e)}")
    if op.supports_autograd and torch.float64 in supported:
        torch.manual_seed(0)
        try:
            gsamples = list(op.sample_inputs("cpu", torch.float64, requires_grad=True))
        except Exception:
            gsamples = []
        for s in _capped(gsamples, grad_samples, extra, extra_cap):
            try:
                run_grad(op, fn, s, res)
            except Exception as e:
                res.fail(f"harness: {_describe(e)}")
    if compiled and first_args is not None and res.status == "pass":
        for args, sample in firsts or [(first_args, first_sample)]:
            run_compiled(fn, args, res, random=is_random(op, sample))
    if errors != 0:
        run_errors(op, fn, res, errors)
    if res.samples == 0 and res.status == "pass":
        res.status, res.reason = "fail", "no sample could be converted"
    return res


def cpu_ops() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if op.supported_dtypes("cpu")]
