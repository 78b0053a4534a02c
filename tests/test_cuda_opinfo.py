"""torch's OpInfo samples on CUDA tensors (grid emulator) against llgrad's CPU path.

`tools/cuda_opinfo_sweep.py` runs every OpInfo the opinfo harness covers on CPU tensors and
on their `.cuda()` copies and compares outputs (and gradients of float samples). Here:

- `test_cuda_matches_cpu`: a representative subset (elementwise, reductions, softmax,
  norms, matmuls, convolution, pooling, indexing, joins and splits, selection, scans,
  sorting, losses) in this process, on the first float32 sample (and, for the ops in
  `GRAD`, the gradients too; for `ALL_DTYPES` also one float64 and one int64 sample);
- `test_full_sweep_has_no_crash_or_mismatch` (slow): the whole sweep in subprocesses;
  errors are allowed (and printed with their counts), crashes and mismatches are not.

The emulator is switched on for this module only (the fixture), as in
tests/test_cuda_emulated.py.
"""
from __future__ import annotations

import importlib.util
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")


ROOT = Path(__file__).resolve().parent.parent


def _load_sweep() -> Any:
    """tools/cuda_opinfo_sweep.py as a module (tools/ is not a package)."""
    name = "cuda_opinfo_sweep"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / "cuda_opinfo_sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


S = _load_sweep()

# ~60 OpInfos across the op families
SUBSET = [
    # elementwise unary
    "abs", "neg", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "erf",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "clamp",
    # elementwise binary
    "add", "mul", "div.no_rounding_mode", "pow", "maximum", "atan2", "remainder", "eq",
    # reductions
    "sum", "mean", "amax", "argmax", "prod", "var", "std", "logsumexp",
    # softmax and norms
    "softmax", "log_softmax", "nn.functional.layer_norm", "nn.functional.group_norm",
    # matmuls
    "matmul", "mm", "bmm", "addmm", "nn.functional.linear",
    # convolution and pooling
    "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d",
    # indexing
    "gather", "scatter", "scatter_add", "index_select", "index_add", "take_along_dim",
    "nn.functional.embedding",
    # joins, splits, layout
    "cat", "stack", "split", "chunk", "transpose", "flip", "tril",
    # selection
    "where", "masked_fill",
    # scans, sorting
    "cumsum", "sort", "topk", "argsort",
    # losses
    "nn.functional.cross_entropy", "nn.functional.nll_loss", "nn.functional.mse_loss",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.smooth_l1_loss",
]

# gradients through the CUDA ops against the CPU's
GRAD = {"exp", "tanh", "mul", "div.no_rounding_mode", "sum", "amax", "softmax",
        "log_softmax", "nn.functional.layer_norm", "matmul", "nn.functional.linear",
        "nn.functional.conv2d", "gather", "cat", "where", "cumsum",
        "nn.functional.cross_entropy", "nn.functional.mse_loss"}

# also a float64 and an int64 sample
ALL_DTYPES = {"add", "mul", "sum", "cumsum", "gather", "where", "cat"}

# OpInfos of SUBSET whose CUDA run is known to raise (an xfail with the reason; a pass
# shows as XPASS once fixed). Ops whose backward runs on the host without autograd
# raise only in grad mode: their values are checked under no_grad here.
KNOWN: dict[str, str] = {}


pytestmark = pytest.mark.usefixtures("cuda_emulator")


@pytest.fixture(scope="module")
def ops() -> dict[str, Any]:
    return {S.H.key_of(op): op for op in S.covered_ops(set(SUBSET))}


@pytest.fixture(scope="module")
def watch() -> Any:
    with S.HostWatch() as w:
        yield w


def _first_samples(op: Any, key: str, grad: bool) -> list[tuple[str, Any]]:
    plan = [torch.float32] + ([torch.float64, torch.int64] if key in ALL_DTYPES else [])
    out = []
    for d in plan:
        if d not in op.supported_dtypes("cpu"):
            continue
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sample = next(iter(op.sample_inputs("cpu", d,
                                                requires_grad=grad and d.is_floating_point)))
        out.append((str(d).split(".")[1], sample))
    return out


@pytest.mark.parametrize("key", SUBSET)
def test_cuda_matches_cpu(key: str, ops: dict[str, Any], watch: Any) -> None:
    op = ops.get(key)
    if op is None:
        pytest.skip("not in this torch's OpInfo database")
    fn, _ = S.H.resolve(op)
    res = S.CudaOpResult(key)
    grad = key in GRAD and op.supports_autograd
    watch.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype, sample in _first_samples(op, key, grad):
            S.check_sample(op, fn, dtype, sample, res, watch, grad=grad)
    if key in KNOWN and res.cls == "error":
        pytest.xfail(KNOWN[key])
    assert res.cls not in ("mismatch", "error"), res.message
    assert res.samples >= 1, f"no sample ran: {res.message}"
    if grad:
        assert res.grad_samples >= 1, "no gradient was compared"


def test_sweep_classifies_a_wrong_cuda_value(ops: dict[str, Any], watch: Any) -> None:
    """The comparison catches a CUDA result that differs from the CPU's, and a CUDA op
    that returns a host tensor."""
    op = ops["exp"]
    sample = _first_samples(op, "exp", False)[0][1]

    def wrong(x: Any) -> Any:
        return x.exp() + (1 if S.lg_cuda.is_cuda_tensor(x) else 0)

    def on_host(x: Any) -> Any:
        return x.exp().cpu() if S.lg_cuda.is_cuda_tensor(x) else x.exp()

    for fn, words in ((wrong, "values differ"), (on_host, "not a CUDA tensor")):
        res = S.CudaOpResult("exp")
        S.check_sample(op, fn, "float32", sample, res, watch, grad=False)
        assert res.cls == "mismatch" and words in res.message, res.message


@pytest.mark.slow
def test_full_sweep_has_no_crash_or_mismatch(tmp_path: Path) -> None:
    keys = [S.H.key_of(op) for op in S.covered_ops()]
    results = S.sweep(keys, max_samples=3, timeout=120, jobs=2, batch=20, log=lambda _: None)
    S.write_reports(results, tmp_path / "cuda_opinfo.json", tmp_path / "cuda_opinfo.md",
                    {"command": "pytest", "ops": len(keys), "samples": 3,
                     "torch": torch.__version__, "seconds": 0.0})
    counts = S.summarize(results)
    errors = Counter(S._group(r["message"]) for r in results.values() if r["cls"] == "error")
    print(counts)
    for message, n in errors.most_common(10):
        print(f"{n:4d}  {message}")
    bad = {k: f"{r['cls']}: {r['message']}" for k, r in results.items()
           if r["cls"] in ("crash", "mismatch")}
    assert not bad, "\n".join(f"{k}: {v}" for k, v in sorted(bad.items()))
    assert len(results) == len(keys)
