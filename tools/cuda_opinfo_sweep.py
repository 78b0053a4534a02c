"""Every OpInfo the opinfo harness covers, run on CUDA tensors (grid emulator) against CPU.

    python tools/cuda_opinfo_sweep.py OUT.json OUT.md                 # the full sweep
    python tools/cuda_opinfo_sweep.py OUT.json OUT.md --limit 20      # the first 20 OpInfos
    python tools/cuda_opinfo_sweep.py OUT.json OUT.md --ops add,sort,nn.functional.conv2d

For each OpInfo that tests/opinfo_harness.py resolves to an llgrad callable, the first few
float32 samples of torch's OpInfo (`--samples`, default 3), one float64 sample and one
int64 sample (where the op supports those dtypes; an op with none of the three takes the
first samples of its first supported dtype) are converted to llgrad CPU tensors
(`opinfo_harness.to_lg`), copied to the device with `.cuda()`, and the op is run on both.
Outputs are compared after `.cpu()`: shapes, dtypes and values with the harness's
tolerances (`opinfo_harness.TOL`), and the device (an output of a CUDA op should be a
CUDA tensor). For float samples of ops with autograd, the vector-Jacobian product of every
output with a fixed cotangent is compared too (backward through the CUDA op against the
CPU op's).

Each OpInfo gets one class:

- `ok-gpu`: every sample ran and matched, and no part ran on the host;
- `ok-host`: matched, but some op fell back to the host (`llgrad.eager.cuda._logged`, and
  every call that took the host path, including one-op graphs already cached as host);
- `mismatch`: a value, dtype, shape, device or gradient differs;
- `error`: the CUDA run raised where the CPU run did not (type and first message line),
  or timed out;
- `crash`: the process died (a CUDA tensor's device address is outside host memory on the
  emulator, so host code reading device memory faults);
- `skip`: no sample ran on the CPU (the CPU op raised, or the sample cannot be converted).

OpInfos run in batches, each in a subprocess (`python -X faulthandler`, two at a time by
`--jobs`); a batch whose process dies is rerun one OpInfo per process to find the one that
crashes (`LLGRAD_SWEEP_CRASH_ON=key,...` makes a worker segfault at those OpInfos: a
check of that path). The JSON (`counts`, then per OpInfo its class, message and details) and the
markdown summary go to the two paths given.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterator, Sequence
from typing import Any

if __name__ == "__main__":
    # before llgrad is imported (through the harness): the emulator backend
    os.environ["LLGRAD_CUDA_EMULATE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
for _p in (str(ROOT), str(ROOT / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import opinfo_harness as H  # noqa: E402

import numpy as np  # noqa: E402

import llgrad as lg  # noqa: E402
from llgrad.eager import cuda as lg_cuda  # noqa: E402

torch = H.torch

CLASSES = ("ok-gpu", "ok-host", "mismatch", "error", "crash", "skip")
SEVERITY = {c: i for i, c in enumerate(("skip", "ok-gpu", "ok-host", "error", "mismatch", "crash"))}


class Timeout(BaseException):
    """Raised by the per-OpInfo alarm (a BaseException: the checks' handlers let it by)."""


@dataclass
class CudaOpResult:
    """What one OpInfo did on CUDA tensors against the CPU."""

    key: str
    cls: str = "skip"
    message: str = ""
    where: str = ""  # the innermost llgrad frame of an error
    samples: int = 0  # samples compared (values)
    grad_samples: int = 0  # samples whose gradients were compared
    skipped: int = 0  # samples the CPU run could not take
    host_ops: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_status: str = ""  # the harness's CPU-vs-torch status of the OpInfo
    notes: list[str] = field(default_factory=list)

    def set(self, cls: str, message: str = "", where: str = "") -> None:
        """Raise the class to `cls` when it is more severe (the first message of a class
        is kept)."""
        if SEVERITY[cls] > SEVERITY[self.cls]:
            self.cls, self.message, self.where = cls, message, where


# ------------------------------------------------------------------------------------------
# host fallbacks
# ------------------------------------------------------------------------------------------


class HostWatch:
    """Records every op that runs on the host while it is active.

    `llgrad.eager.cuda._logged` holds the ops logged once per process; a one-op graph that
    was found unable to run on the GPU is cached as a host key and later calls do not log
    again. So besides clearing `_logged`, this wraps the module's `run_op` (noting a call
    whose key is, or is now, a host key) and `_note_host` (the host path of `rerun`)."""

    def __init__(self) -> None:
        self.ops: set[str] = set()
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> HostWatch:
        real_run_op = lg_cuda.run_op
        real_note = lg_cuda._note_host
        watch = self

        def run_op(
            kind: str,
            op: str,
            operands: Sequence[Any],
            attrs: Any,
            call: Callable[[list[Any]], Any],
        ) -> Any:
            key = lg_cuda._key_of(kind, op, attrs, operands)
            try:
                return real_run_op(kind, op, operands, attrs, call)
            finally:
                if key is None or lg_cuda._graphs.get(key) is lg_cuda._HOST:
                    watch.ops.add(op)

        def note_host(op: str, error: BaseException) -> None:
            watch.ops.add(op)
            real_note(op, error)

        self._saved = {"run_op": real_run_op, "_note_host": real_note}
        lg_cuda.run_op = run_op
        lg_cuda._note_host = note_host
        return self

    def __exit__(self, *exc: object) -> None:
        for name, fn in self._saved.items():
            setattr(lg_cuda, name, fn)

    def clear(self) -> None:
        """Forget what was seen (and `llgrad.eager.cuda._logged`)."""
        self.ops.clear()
        lg_cuda._logged.clear()

    def seen(self) -> set[str]:
        """The host ops seen since `clear` (this watch's and `_logged`)."""
        return self.ops | set(lg_cuda._logged)


# ------------------------------------------------------------------------------------------
# one OpInfo
# ------------------------------------------------------------------------------------------


def _describe(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:200] if lines else ''}"


def _where(e: BaseException, depth: int = 3) -> str:
    """The innermost `depth` frames of `e`'s traceback inside llgrad (`file:line function`,
    innermost first, joined by " < ")."""
    found = []
    for f in reversed(traceback.extract_tb(e.__traceback__)):
        path = f.filename.replace("\\", "/")
        if "/llgrad/" in path:
            found.append(f"llgrad/{path.split('/llgrad/', 1)[1]}:{f.lineno} {f.name}")
            if len(found) == depth:
                break
    return " < ".join(found)


def to_cuda(tree: Any, memo: dict[int, Any]) -> Any:
    """`tree` (llgrad CPU tensors in lists, tuples, dicts) with every tensor copied to the
    device; a leaf that requires grad becomes a CUDA leaf that requires grad. `memo` maps
    each CPU tensor's id to its copy (the same tensor twice stays one tensor)."""
    if isinstance(tree, lg.Tensor):
        if id(tree) not in memo:
            dev = tree.detach().cuda()
            if tree.requires_grad:
                dev.requires_grad_(True)
            memo[id(tree)] = dev
        return memo[id(tree)]
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(to_cuda(v, memo) for v in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_cuda(v, memo) for v in tree)
    if isinstance(tree, dict):
        return {k: to_cuda(v, memo) for k, v in tree.items()}
    return tree


def _flat(x: Any) -> list[Any]:
    if isinstance(x, lg.Tensor):
        return [x]
    if isinstance(x, dict):
        return [v for item in x.values() for v in _flat(item)]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [x]


def _host_array(t: Any) -> tuple[np.ndarray, str]:
    t = t.detach()
    if lg_cuda.is_cuda_tensor(t):
        t = t.cpu()
    return H.to_np(t)


def _differs(
    got: np.ndarray, want: np.ndarray, dtype: str, tol: tuple[float, float] | None = None
) -> str | None:
    """None when `got` equals `want` (exactly for integer and bool dtypes, within the
    harness's tolerance of `dtype` for floats), else the largest error."""
    if not want.size:
        return None
    if dtype == "bool" or dtype.startswith(("int", "uint")):
        if np.array_equal(got, want):
            return None
        return f"{int(np.sum(got != want))} of {want.size} elements differ"
    rtol, atol = tol or H.TOL.get(dtype, (0, 0))
    if np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        return None
    with np.errstate(all="ignore"):
        err = np.nanmax(np.abs(got.astype(np.complex128) - want))
    return f"max abs err {err:.3g} (rtol {rtol:g}, atol {atol:g})"


def compare_outputs(
    got: Any, want: Any, *, random: bool = False, ties: bool = False, expect_cuda: bool = True
) -> str | None:
    """None when the CUDA run's outputs `got` equal the CPU run's `want`, else what differs.
    `random`: shapes and dtypes only; `ties`: int64 outputs (indices among equal values,
    unspecified) by shape and dtype only; `expect_cuda`: tensor outputs must be CUDA
    tensors."""
    a, b = _flat(got), _flat(want)
    if len(a) != len(b):
        return f"{len(a)} outputs, CPU {len(b)}"
    for i, (m, w) in enumerate(zip(a, b)):
        if isinstance(w, lg.Tensor):
            if not isinstance(m, lg.Tensor):
                return f"output {i}: {type(m).__name__}, CPU a Tensor"
            if expect_cuda and not lg_cuda.is_cuda_tensor(m) and not lg_cuda.is_cuda_tensor(w):
                return f"output {i}: on the CPU, not a CUDA tensor"
            mv, md = _host_array(m)
            wv, wd = _host_array(w)
            if md != wd:
                return f"output {i}: dtype {md}, CPU {wd}"
            if mv.shape != wv.shape:
                return f"output {i}: shape {list(mv.shape)}, CPU {list(wv.shape)}"
            if random or (ties and wd == "int64"):
                continue
            diff = _differs(mv, wv, wd)
            if diff:
                return f"output {i}: values differ ({diff})"
        elif isinstance(w, float) and isinstance(m, float):
            if not (
                m == w
                or (math.isnan(m) and math.isnan(w))
                or math.isclose(m, w, rel_tol=1e-5, abs_tol=1e-8)
            ):
                return f"output {i}: {m!r}, CPU {w!r}"
        else:
            try:
                same = bool(m == w)
            except Exception:  # noqa: BLE001 -- incomparable objects: by type
                same = type(m) is type(w)
            if not same:
                return f"output {i}: {m!r:.80}, CPU {w!r:.80}"
    return None


def _has_ties(sample: Any) -> bool:
    x = sample.input
    if not isinstance(x, torch.Tensor) or not x.numel():
        return False
    x = x.detach()
    return torch.unique(x.reshape(-1)).numel() < x.numel()


def _cotangents(outs: list[Any], seed: int = 0) -> list[np.ndarray]:
    gen = np.random.default_rng(seed)
    cots = []
    for o in outs:
        shape = tuple(o.shape)
        name = o.dtype.name if hasattr(o.dtype, "name") else str(o.dtype)
        if "complex" in name:
            c = gen.standard_normal(shape) + 1j * gen.standard_normal(shape)
        else:
            c = gen.standard_normal(shape)
        cots.append(c)
    return cots


def _grad_tol(dtype: str) -> tuple[float, float]:
    rtol, atol = H.TOL.get(dtype, (1e-6, 1e-6))
    return max(rtol, 1e-6), max(atol, 1e-6)


def _samples_of(op: Any, max_samples: int, grad: bool) -> Iterator[tuple[str, Any]]:
    """(dtype name, sample): the first `max_samples` float32 samples, one float64 and one
    int64 sample where the op supports them; else the first samples of its first dtype.
    Float samples require grad when `grad`."""
    supported = op.supported_dtypes("cpu")
    plan = [(torch.float32, max_samples), (torch.float64, 1), (torch.int64, 1)]
    plan = [(d, n) for d, n in plan if d in supported]
    if not plan:
        first = next(iter(sorted(supported, key=str)), None)
        plan = [(first, max_samples)] if first is not None else []
    for d, n in plan:
        torch.manual_seed(0)
        try:
            rg = grad and d.is_floating_point
            it = iter(op.sample_inputs("cpu", d, requires_grad=rg))
            for _ in range(n):
                s = next(it, None)
                if s is None:
                    break
                yield str(d).split(".")[1], s
        except Timeout:
            raise
        except Exception:  # noqa: BLE001 -- torch's sample generator refuses
            continue


def _grads(
    fn: Callable[..., Any], args: Any, leaves: list[Any], cots: list[np.ndarray], out: Any
) -> list[Any]:
    outs = [o for o in _flat(out) if isinstance(o, lg.Tensor) and o.requires_grad]
    device = lg_cuda.is_cuda_tensor(leaves[0]) if leaves else False
    cot_tensors = []
    for o, c in zip(outs, cots):
        t = lg.tensor(c, dtype=o.dtype)
        cot_tensors.append(t.cuda() if device else t)
    return list(lg.autograd.grad(outs, leaves, cot_tensors, allow_unused=True))


def _values_without_grad(
    fn: Callable[..., Any], dx: Any, da: Any, dk: Any, want: Any, random: bool
) -> str:
    """After the CUDA call raised on inputs that require grad: the same call under
    `lg.no_grad()` and what its values did (so a backward-only gap shows as such)."""
    try:
        with lg.no_grad():
            lg.manual_seed(0)
            got = fn(dx, *da, **dk)
        diff = compare_outputs(got, want, random=random)
    except Timeout:
        raise
    except Exception as e:  # noqa: BLE001
        return f"under no_grad also raises {type(e).__name__}"
    return (
        "under no_grad the values match"
        if diff is None
        else f"under no_grad the values differ: {diff}"
    )


def check_sample(
    op: Any,
    fn: Callable[..., Any],
    dtype: str,
    sample: Any,
    res: CudaOpResult,
    watch: HostWatch,
    grad: bool = True,
) -> None:
    """Run one sample on the CPU and on CUDA tensors; compare values (and gradients)."""
    try:
        x, a, k = H.to_lg(sample.input), H.to_lg(sample.args), H.to_lg(sample.kwargs)
    except H.Unsupported:
        res.skipped += 1
        return
    random = H.is_random(op, sample)
    key = H.key_of(op)
    ties = key in H.TIE_OPS or op.name in H.TIE_OPS
    try:
        lg.manual_seed(0)
        want = fn(x, *a, **k)
    except Timeout:
        raise
    except Exception:  # noqa: BLE001 -- the CPU path refuses: not CUDA's
        res.skipped += 1
        return
    memo: dict[int, Any] = {}
    try:
        dx, da, dk = to_cuda(x, memo), to_cuda(a, memo), to_cuda(k, memo)
    except Timeout:
        raise
    except Exception as e:  # noqa: BLE001
        res.set("error", f"copy to cuda: {_describe(e)}", _where(e))
        return
    try:
        lg.manual_seed(0)
        got = fn(dx, *da, **dk)
    except Timeout:
        raise
    except Exception as e:  # noqa: BLE001
        message = f"{dtype}: {_describe(e)}"
        if any(t.requires_grad for t in memo.values()):
            message += f" [{_values_without_grad(fn, dx, da, dk, want, random)}]"
        res.set("error", message, _where(e))
        return
    device_kw = any(
        isinstance(v, lg.device) or (isinstance(v, str) and v in ("cpu", "cuda"))
        for v in _flat([a, k])
    )
    try:
        diff = compare_outputs(
            got, want, random=random, ties=ties and _has_ties(sample), expect_cuda=not device_kw
        )
    except Timeout:
        raise
    except Exception as e:  # noqa: BLE001 -- e.g. reading a CUDA output fails
        res.set("error", f"{dtype} reading outputs: {_describe(e)}", _where(e))
        return
    res.samples += 1
    if diff:
        res.set("mismatch", f"{dtype} sample {res.samples}: {diff}")
        return
    if not grad or random or not op.supports_autograd or dtype not in ("float32", "float64"):
        return
    cpu_leaves = [t for t in _flat([x, a, k]) if isinstance(t, lg.Tensor) and t.requires_grad]
    cpu_leaves = list({id(t): t for t in cpu_leaves}.values())
    if not cpu_leaves:
        return
    cpu_outs = [o for o in _flat(want) if isinstance(o, lg.Tensor) and o.requires_grad]
    if not cpu_outs:
        return
    cots = _cotangents(cpu_outs)
    try:
        want_g = _grads(fn, (x, a, k), cpu_leaves, cots, want)
    except Timeout:
        raise
    except Exception:  # noqa: BLE001 -- no CPU gradient to compare with
        return
    dev_leaves = [memo[id(t)] for t in cpu_leaves]
    try:
        dev_outs = [o for o in _flat(got) if isinstance(o, lg.Tensor) and o.requires_grad]
        if len(dev_outs) != len(cpu_outs):
            res.set(
                "mismatch",
                f"{dtype} grad: {len(dev_outs)} outputs require grad, CPU {len(cpu_outs)}",
            )
            return
        got_g = _grads(fn, (dx, da, dk), dev_leaves, cots, got)
    except Timeout:
        raise
    except Exception as e:  # noqa: BLE001
        res.set("error", f"{dtype} grad: {_describe(e)}", _where(e))
        return
    res.grad_samples += 1
    for i, (g, w) in enumerate(zip(got_g, want_g)):
        if w is None and g is None:
            continue
        try:
            if g is None:
                g_v, _ = np.zeros(tuple(w.shape)), None
            else:
                if not lg_cuda.is_cuda_tensor(g):
                    res.set("mismatch", f"{dtype} grad: input {i} gradient on the CPU")
                    return
                g_v, _ = _host_array(g)
            if w is None:
                w_v, wd = np.zeros(g_v.shape), dtype
            else:
                w_v, wd = _host_array(w)
        except Timeout:
            raise
        except Exception as e:  # noqa: BLE001
            res.set("error", f"{dtype} grad reading: {_describe(e)}", _where(e))
            return
        if g_v.shape != w_v.shape:
            res.set(
                "mismatch",
                f"{dtype} grad: input {i} gradient shape {list(g_v.shape)}, CPU {list(w_v.shape)}",
            )
            return
        diff = _differs(g_v, w_v, wd, _grad_tol(wd))
        if diff:
            res.set("mismatch", f"{dtype} grad: input {i} gradient differs ({diff})")
            return


def _check_samples(
    op: Any,
    fn: Callable[..., Any],
    max_samples: int,
    grad: bool,
    res: CudaOpResult,
    watch: HostWatch,
) -> None:
    host: set[str] = set(res.host_ops)
    try:
        for dtype, sample in _samples_of(op, max_samples, grad):
            watch.clear()
            try:
                check_sample(op, fn, dtype, sample, res, watch, grad)
            finally:
                host.update(f"{h} ({dtype})" for h in watch.seen())
            if res.cls == "mismatch":
                break
    finally:
        res.host_ops = sorted(host)


def check_op(
    op: Any, max_samples: int = 3, grad: bool = True, watch: HostWatch | None = None
) -> CudaOpResult:
    """Classify one OpInfo (see the module docstring). `watch` records host fallbacks
    (one is made, and removed afterwards, when not given)."""
    res = CudaOpResult(H.key_of(op))
    t0 = time.time()
    fn, how = H.resolve(op)
    if fn is None:
        res.message = f"not covered by the harness ({how})"
        return res
    own = watch is None
    if own:
        watch = HostWatch().__enter__()
    assert watch is not None
    watch.clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check_samples(op, fn, max_samples, grad, res, watch)
    except Timeout:
        res.set("error", "Timeout: the OpInfo's samples ran past the time limit")
    finally:
        if own:
            watch.__exit__(None, None, None)
    if res.cls == "skip" and res.samples:
        res.cls = "ok-host" if res.host_ops else "ok-gpu"
    elif res.cls == "skip":
        res.message = f"no sample ran on the CPU ({res.skipped} refused or not convertible)"
    res.seconds = round(time.time() - t0, 2)
    return res


def covered_ops(names: Sequence[str] | None = None) -> list[Any]:
    """The OpInfos the opinfo harness resolves to an llgrad callable (one per key), in
    op_db order; only those named (key or op name) when `names` is given."""
    seen: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ops = H.cpu_ops()
    for op in ops:
        key = H.key_of(op)
        if key in seen or H.resolve(op)[0] is None:
            continue
        if names is not None and key not in names and op.name not in names:
            continue
        seen[key] = op
    return list(seen.values())


def _cpu_status() -> dict[str, str]:
    path = ROOT / "tests" / "opinfo_status.json"
    try:
        return {k: v["status"] for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, KeyError):
        return {}


# ------------------------------------------------------------------------------------------
# worker: one batch in this process
# ------------------------------------------------------------------------------------------


def _alarm(signum: int, frame: Any) -> None:
    raise Timeout()


def worker(keys: list[str], out_path: str, max_samples: int, timeout: int) -> int:
    """Run the named OpInfos here, appending `{"start": key}` before and `{"result": ...}`
    after each to `out_path` (so a crash shows which OpInfo was running)."""
    from llgrad.runtime.cuda import driver

    assert driver.emulating(), "LLGRAD_CUDA_EMULATE=1 must be set before llgrad is imported"
    ops = {H.key_of(o): o for o in covered_ops(set(keys))}
    status = _cpu_status()
    signal.signal(signal.SIGALRM, _alarm)
    with open(out_path, "a") as f, HostWatch() as watch:
        for key in keys:
            f.write(json.dumps({"start": key}) + "\n")
            f.flush()
            if key in os.environ.get("LLGRAD_SWEEP_CRASH_ON", "").split(","):
                import faulthandler

                faulthandler._sigsegv()  # a check of the sweep's crash handling
            op = ops.get(key)
            if op is None:
                r = CudaOpResult(key, "skip", "no such OpInfo covered by the harness")
            else:
                signal.alarm(timeout)
                try:
                    r = check_op(op, max_samples, watch=watch)
                except Timeout:
                    r = CudaOpResult(key, "error", "Timeout: the OpInfo ran past the limit")
                except Exception as e:  # noqa: BLE001 -- a defect of the sweep
                    r = CudaOpResult(key, "error", f"sweep: {_describe(e)}", _where(e))
                finally:
                    signal.alarm(0)
            r.cpu_status = status.get(key, "")
            f.write(json.dumps({"result": asdict(r)}) + "\n")
            f.flush()
    return 0


# ------------------------------------------------------------------------------------------
# driver: batches in subprocesses
# ------------------------------------------------------------------------------------------


@dataclass
class BatchRun:
    """A finished subprocess: its results, the OpInfo it was running when it ended, how
    it ended."""

    results: dict[str, dict[str, Any]]
    running: str | None
    returncode: int | None  # None: killed at the time limit
    stderr_tail: str


def run_batch(keys: list[str], max_samples: int, timeout: int) -> BatchRun:
    """Run `keys` in one subprocess (`python -X faulthandler ... --worker`)."""
    env = dict(os.environ)
    env["LLGRAD_CUDA_EMULATE"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="cuda_sweep_") as tmp:
        out = Path(tmp) / "results.jsonl"
        err = Path(tmp) / "stderr.txt"
        cmd = [
            sys.executable,
            "-X",
            "faulthandler",
            str(Path(__file__).resolve()),
            "--worker",
            str(out),
            "--ops",
            ",".join(keys),
            "--samples",
            str(max_samples),
            "--timeout",
            str(timeout),
        ]
        limit = 60 + (timeout + 15) * len(keys)
        with open(err, "w") as ef:
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.DEVNULL,
                stderr=ef,
                env=env,
                cwd=str(ROOT),
                start_new_session=True,
            )
            try:
                rc: int | None = proc.wait(limit)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = None
        results: dict[str, dict[str, Any]] = {}
        running = None
        if out.exists():
            for line in out.read_text().splitlines():
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                if "start" in item:
                    running = item["start"]
                else:
                    results[item["result"]["key"]] = item["result"]
                    running = None
        tail = err.read_text(errors="replace")[-6000:] if err.exists() else ""
    return BatchRun(results, running, rc, tail)


def _crash_message(run: BatchRun) -> str:
    """The signal and faulthandler's first lines (error and innermost frames)."""
    rc = run.returncode
    sig = ""
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
    lines = run.stderr_tail.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("Fatal Python error")), None)
    if start is None:
        detail = " | ".join(l.strip() for l in lines[-4:] if l.strip())
    else:
        picked = [lines[start].strip()]
        picked += [
            l.strip() for l in lines[start + 1 : start + 12] if l.strip().startswith("File")
        ][:5]
        detail = " | ".join(picked)
    return f"process died ({sig or f'exit {rc}'}): {detail}"[:900]


def sweep(
    keys: list[str],
    max_samples: int,
    timeout: int,
    jobs: int,
    batch: int,
    log: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every key's result, batches in subprocesses; a batch that dies is rerun one OpInfo
    per process for the OpInfos it had not finished."""
    if log is None:

        def log(line: str) -> None:
            print(line, flush=True)

    batches = [keys[i : i + batch] for i in range(0, len(keys), batch)]
    results: dict[str, dict[str, Any]] = {}
    t0 = time.time()

    def one_batch(b: list[str]) -> None:
        run = run_batch(b, max_samples, timeout)
        results.update(run.results)
        left = [k for k in b if k not in run.results]
        log(
            f"[{time.time() - t0:.0f}s] batch {b[0]}..{b[-1]}: {len(run.results)}/{len(b)} "
            f"done, rc {run.returncode}" + (f", rerunning {len(left)} alone" if left else "")
        )
        if not left:
            return
        for k in left:
            single = run_batch([k], max_samples, timeout)
            if k in single.results:
                r = single.results[k]
                if k == run.running:
                    # died in the batch but not alone: still a crash, with both stories
                    note = (
                        f"the batch died while running it ({_crash_message(run)}); "
                        f"alone it was {r['cls']}"
                    )
                    r["notes"] = r.get("notes", []) + [note]
                    if run.returncode is not None:
                        r["cls"], r["message"] = "crash", note[:900]
                results[k] = r
            elif single.returncode is None:
                results[k] = asdict(
                    CudaOpResult(k, "error", "Timeout: the process ran past its limit")
                )
            else:
                results[k] = asdict(CudaOpResult(k, "crash", _crash_message(single)))
            log(f"    {k}: {results[k]['cls']} {results[k]['message'][:120]}")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one_batch, batches))
    return {k: results[k] for k in keys if k in results}


# ------------------------------------------------------------------------------------------
# reports
# ------------------------------------------------------------------------------------------


def _group(message: str) -> str:
    """A message without its numbers and sample positions (for grouping similar ones)."""
    import re

    m = re.sub(
        r"^(float|int|uint|bool|complex)\d*( grad reading| grad| reading outputs| "
        r"sample \d+)?: ",
        "",
        message,
    )
    m = re.sub(r"^(\w+): [\w.]+: on CUDA tensors", r"\1: OP: on CUDA tensors", m)
    m = re.sub(r"(kernel)_[0-9a-f]{6,}", r"\1_HASH", m)
    m = re.sub(r"0x[0-9a-f]+", "ADDR", m)
    m = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", m)
    return m[:200]


def summarize(results: dict[str, dict[str, Any]]) -> dict[str, int]:
    counts = Counter(r["cls"] for r in results.values())
    return {c: counts.get(c, 0) for c in CLASSES}


def write_reports(
    results: dict[str, dict[str, Any]], json_path: Path, md_path: Path, meta: dict[str, Any]
) -> None:
    """The JSON (meta, counts, per-OpInfo results) and the markdown summary."""
    counts = summarize(results)
    json_path.write_text(
        json.dumps({"meta": meta, "counts": counts, "ops": results}, indent=1, sort_keys=True)
        + "\n"
    )
    lines = [
        "# llgrad CUDA backend (grid emulator) against the CPU, every OpInfo",
        "",
        (
            f"`{meta['command']}`: {meta['ops']} OpInfos, up to {meta['samples']} float32 "
            f"samples, one float64 and one int64 each; torch {meta['torch']}; "
            f"{meta['seconds']:.0f} s."
        ),
        "",
        "| class | OpInfos |",
        "|---|---|",
    ]
    lines += [f"| {c} | {n} |" for c, n in counts.items()]
    host = Counter(h for r in results.values() if r["cls"] == "ok-host" for h in r["host_ops"])
    for cls in ("crash", "mismatch", "error", "skip"):
        bad = sorted((k, r) for k, r in results.items() if r["cls"] == cls)
        if not bad:
            continue
        lines += ["", f"## {cls} ({len(bad)})", "", "| OpInfo | message | where |", "|---|---|---|"]
        for k, r in bad:
            msg = r["message"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{k}` | {msg} | {r.get('where', '')} |")
    for cls in ("crash", "mismatch", "error"):
        groups = Counter(_group(r["message"]) for r in results.values() if r["cls"] == cls)
        if not groups:
            continue
        lines += [
            "",
            f"## Most common {cls} messages",
            "",
            "| OpInfos | message (numbers as N, op names as OP) |",
            "|---|---|",
        ]
        lines += [f"| {n} | {m.replace('|', chr(92) + '|')} |" for m, n in groups.most_common(25)]
    if host:
        lines += [
            "",
            "## Ops that ran on the host (in ok-host OpInfos)",
            "",
            ", ".join(f"`{h}` ({n})" for h, n in host.most_common()),
        ]
    md_path.write_text("\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("json_out", nargs="?", help="the JSON results")
    p.add_argument("md_out", nargs="?", help="the markdown summary")
    p.add_argument("--limit", type=int, help="only the first N OpInfos")
    p.add_argument("--ops", help="comma-separated OpInfo keys or op names")
    p.add_argument("--timeout", type=int, default=120, help="seconds per OpInfo")
    p.add_argument("--samples", type=int, default=3, help="float32 samples per OpInfo")
    p.add_argument("--jobs", type=int, default=2, help="subprocesses at a time")
    p.add_argument("--batch", type=int, default=20, help="OpInfos per subprocess")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    if ns.worker:
        return worker(ns.ops.split(","), ns.worker, ns.samples, ns.timeout)
    if not ns.json_out or not ns.md_out:
        p.error("give the JSON and markdown output paths")
    names = set(ns.ops.split(",")) if ns.ops else None
    keys = [H.key_of(o) for o in covered_ops(names)]
    if ns.limit is not None:
        keys = keys[: ns.limit]
    t0 = time.time()
    results = sweep(keys, ns.samples, ns.timeout, ns.jobs, ns.batch)
    meta = {
        "command": "python tools/cuda_opinfo_sweep.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "ops": len(keys),
        "samples": ns.samples,
        "torch": torch.__version__,
        "seconds": time.time() - t0,
    }
    write_reports(results, Path(ns.json_out), Path(ns.md_out), meta)
    counts = summarize(results)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
