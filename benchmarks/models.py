"""Real-model workloads B9-B12 of `llgrad bench` (`benchmarks/peers.py` runs them).

- **B9** CNN training step: batch 64 of 3x32x32 through Conv-BN-ReLU, Conv-BN-ReLU-MaxPool,
  Conv-BN-ReLU-MaxPool, AdaptiveAvgPool, Linear(64, 10); cross-entropy; SGD (lr 0.05,
  momentum 0.9, weight decay 5e-4); train mode, so BatchNorm's running statistics update.
- **B10** transformer LM training step: vocabulary 1000, batch 4, sequence 128, d_model 256,
  4 heads, feed-forward 1024 with GELU, two pre-LN blocks with causal
  `F.scaled_dot_product_attention`, a learned position embedding, a final LayerNorm, the
  token embedding tied to the output projection, cross-entropy over every token; AdamW
  (lr 3e-4, weight decay 0.1).
- **B11** LSTM regression step: `nn.LSTM(64, 256, num_layers=2, batch_first=True)` over
  batch 32, sequence 50, `nn.Linear(256, 1)` on the last step, MSE; Adam (defaults).
- **B12** the optimizer step alone: AdamW (defaults but weight decay, lr 1e-3) over the 62
  parameter shapes of torchvision's resnet18 (11.7 M elements) with gradients given.
  Eager libraries call `opt.step()` with torch's default `foreach` (None, which on the CPU
  means the per-tensor loop); `B12/foreach` passes `foreach=True` (eager libraries only);
  the compiled libraries compile a function whose body is `opt.step()`.

torch and llgrad run the same module and optimizer code, written once over a namespace
(`nn`, `F`, `optim`, ...) of either library; jax.jit runs the same math written
functionally in jax.numpy with the update rules written out (no optax). Every library
starts from the same parameters, drawn with NumPy from a seed and copied in by name.

Checking: a compiled training step may run its first call differently from the later
ones (llgrad's `lg.compile` runs the call that creates the optimizer's state eagerly and
compiles the steady-state step on the second), so every library is checked over
`CHECK_STEPS` steps: the loss of each step, the parameters and BatchNorm's running
statistics after the last, against torch eager in float64.
"""

from __future__ import annotations

import math
from typing import Any, Callable

WORKLOADS = ("B9", "B10", "B11", "B12", "B12/foreach")
CHECK_STEPS = 2


def _resnet18_shapes() -> list[tuple[str, tuple[int, ...]]]:
    """torchvision's resnet18 parameters in `named_parameters()` order (62 tensors,
    11,689,512 elements): the stem, four stages of two BasicBlocks (the first block of
    stages 2-4 with a 1x1 downsampling convolution and its BatchNorm), the classifier."""
    out: list[tuple[str, tuple[int, ...]]] = [
        ("conv1.weight", (64, 3, 7, 7)),
        ("bn1.weight", (64,)),
        ("bn1.bias", (64,)),
    ]
    cin = 64
    for stage, c in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            pre = f"layer{stage}.{block}."
            first_in = cin if block == 0 else c
            out += [
                (pre + "conv1.weight", (c, first_in, 3, 3)),
                (pre + "bn1.weight", (c,)),
                (pre + "bn1.bias", (c,)),
                (pre + "conv2.weight", (c, c, 3, 3)),
                (pre + "bn2.weight", (c,)),
                (pre + "bn2.bias", (c,)),
            ]
            if block == 0 and first_in != c:
                out += [
                    (pre + "downsample.0.weight", (c, first_in, 1, 1)),
                    (pre + "downsample.1.weight", (c,)),
                    (pre + "downsample.1.bias", (c,)),
                ]
        cin = c
    out += [("fc.weight", (1000, 512)), ("fc.bias", (1000,))]
    return out


RESNET18_SHAPES: list[tuple[str, tuple[int, ...]]] = _resnet18_shapes()


def config(workload: str, quick: bool) -> dict[str, Any]:
    """The workload's sizes (`quick`: tiny ones that only check the code runs)."""
    w = workload.split("/")[0]
    if w == "B9":
        return {"batch": 4, "hw": 8} if quick else {"batch": 64, "hw": 32}
    if w == "B10":
        return (
            {"vocab": 50, "batch": 2, "seq": 16, "d": 32, "heads": 4, "ff": 64}
            if quick
            else {"vocab": 1000, "batch": 4, "seq": 128, "d": 256, "heads": 4, "ff": 1024}
        )
    if w == "B11":
        return (
            {"inp": 8, "hidden": 16, "batch": 4, "seq": 6}
            if quick
            else {"inp": 64, "hidden": 256, "batch": 32, "seq": 50}
        )
    if w == "B12":
        return {"scale": 8 if quick else 1}
    raise KeyError(workload)


def param_shapes(workload: str, quick: bool) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every parameter, named as the module's `named_parameters()`."""
    w, c = workload.split("/")[0], config(workload, quick)
    if w == "B9":
        return [
            ("0.weight", (32, 3, 3, 3)),
            ("0.bias", (32,)),
            ("1.weight", (32,)),
            ("1.bias", (32,)),
            ("3.weight", (32, 32, 3, 3)),
            ("3.bias", (32,)),
            ("4.weight", (32,)),
            ("4.bias", (32,)),
            ("7.weight", (64, 32, 3, 3)),
            ("7.bias", (64,)),
            ("8.weight", (64,)),
            ("8.bias", (64,)),
            ("13.weight", (10, 64)),
            ("13.bias", (10,)),
        ]
    if w == "B10":
        d, ff = c["d"], c["ff"]
        out = [("emb.weight", (c["vocab"], d)), ("pos", (c["seq"], d))]
        for i in range(2):
            p = f"blocks.{i}."
            out += [
                (p + "ln1.weight", (d,)),
                (p + "ln1.bias", (d,)),
                (p + "qkv.weight", (3 * d, d)),
                (p + "qkv.bias", (3 * d,)),
                (p + "proj.weight", (d, d)),
                (p + "proj.bias", (d,)),
                (p + "ln2.weight", (d,)),
                (p + "ln2.bias", (d,)),
                (p + "fc1.weight", (ff, d)),
                (p + "fc1.bias", (ff,)),
                (p + "fc2.weight", (d, ff)),
                (p + "fc2.bias", (d,)),
            ]
        return out + [("lnf.weight", (d,)), ("lnf.bias", (d,))]
    if w == "B11":
        h, out = c["hidden"], []
        for layer in range(2):
            inp = c["inp"] if layer == 0 else h
            out += [
                (f"lstm.weight_ih_l{layer}", (4 * h, inp)),
                (f"lstm.weight_hh_l{layer}", (4 * h, h)),
                (f"lstm.bias_ih_l{layer}", (4 * h,)),
                (f"lstm.bias_hh_l{layer}", (4 * h,)),
            ]
        return out + [("head.weight", (1, h)), ("head.bias", (1,))]
    if w == "B12":
        s = c["scale"]
        small = {64: 64 // s, 128: 128 // s, 256: 256 // s, 512: 512 // s, 1000: 1000 // s}
        return [
            (n, tuple(small.get(d, d) if s > 1 else d for d in shape))
            for n, shape in RESNET18_SHAPES
        ]
    raise KeyError(workload)


def buffer_names(workload: str) -> list[str]:
    """The buffers compared after the steps (BatchNorm's running statistics)."""
    if workload == "B9":
        return [f"{i}.{k}" for i in (1, 4, 8) for k in ("running_mean", "running_var")]
    return []


def inputs(workload: str, quick: bool) -> dict[str, Any]:
    """Float32 data and parameters of the workload, the same in every process (seeded):
    parameters under their names, the data under `x`, `y` (B12: gradients under `grad:`)."""
    import numpy as np

    rng = np.random.default_rng(9)
    f32 = np.float32
    out: dict[str, Any] = {}
    for name, shape in param_shapes(workload, quick):
        if len(shape) >= 2:
            bound = 1.0 / math.sqrt(float(np.prod(shape[1:])))
            out[name] = rng.uniform(-bound, bound, shape).astype(f32)
        elif name.endswith("weight") and "head" not in name:
            out[name] = (1.0 + rng.uniform(-0.1, 0.1, shape)).astype(f32)  # norm scales
        else:
            out[name] = rng.uniform(-0.1, 0.1, shape).astype(f32)
    w, c = workload.split("/")[0], config(workload, quick)
    if w == "B9":
        out["x"] = rng.standard_normal((c["batch"], 3, c["hw"], c["hw"])).astype(f32)
        out["y"] = rng.integers(0, 10, c["batch"]).astype(np.int64)
    elif w == "B10":
        tok = rng.integers(0, c["vocab"], (c["batch"], c["seq"] + 1)).astype(np.int64)
        out["x"], out["y"] = tok[:, :-1].copy(), tok[:, 1:].copy()
    elif w == "B11":
        out["x"] = rng.standard_normal((c["batch"], c["seq"], c["inp"])).astype(f32)
        out["y"] = rng.standard_normal((c["batch"], 1)).astype(f32)
    else:
        for name, shape in param_shapes(workload, quick):
            out["grad:" + name] = (0.01 * rng.standard_normal(shape)).astype(f32)
    return out


# --------------------------------------------------------------------------------------
# torch and llgrad: one module and optimizer definition over either library
# --------------------------------------------------------------------------------------


def make_model(workload: str, t: Any, quick: bool) -> Any:
    """The workload's `nn.Module` built from library `t` (torch or llgrad): its `nn`,
    `nn.functional` and `Parameter`, nothing else."""
    nn, F = t.nn, t.nn.functional
    w, c = workload.split("/")[0], config(workload, quick)
    if w == "B9":
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 10),
        )
    if w == "B10":
        d, heads = c["d"], c["heads"]

        class Block(nn.Module):
            """A pre-LN transformer block: causal self-attention, then a GELU MLP."""

            def __init__(self) -> None:
                super().__init__()
                self.ln1, self.qkv = nn.LayerNorm(d), nn.Linear(d, 3 * d)
                self.proj, self.ln2 = nn.Linear(d, d), nn.LayerNorm(d)
                self.fc1, self.fc2 = nn.Linear(d, c["ff"]), nn.Linear(c["ff"], d)

            def forward(self, x: Any) -> Any:
                b, s, _ = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
                q, k, v = (z.reshape(b, s, heads, d // heads).transpose(1, 2) for z in (q, k, v))
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
                return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

        class LM(nn.Module):
            """Token and position embeddings, two blocks, a final LayerNorm, and the
            token embedding as the output projection."""

            def __init__(self) -> None:
                super().__init__()
                self.emb = nn.Embedding(c["vocab"], d)
                self.pos = nn.Parameter(t.zeros(c["seq"], d))
                self.blocks = nn.ModuleList([Block(), Block()])
                self.lnf = nn.LayerNorm(d)

            def forward(self, tok: Any) -> Any:
                x = self.emb(tok) + self.pos
                for blk in self.blocks:
                    x = blk(x)
                return F.linear(self.lnf(x), self.emb.weight)

        return LM()
    if w == "B11":

        class Regressor(nn.Module):
            """A 2-layer LSTM and a linear head on its last step."""

            def __init__(self) -> None:
                super().__init__()
                self.lstm = nn.LSTM(c["inp"], c["hidden"], num_layers=2, batch_first=True)
                self.head = nn.Linear(c["hidden"], 1)

            def forward(self, x: Any) -> Any:
                out, _ = self.lstm(x)
                return self.head(out[:, -1])

        return Regressor()
    raise KeyError(workload)


def make_optimizer(workload: str, t: Any, params: list[Any]) -> Any:
    """The workload's optimizer from library `t`."""
    optim = t.optim
    if workload == "B9":
        return optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4)
    if workload == "B10":
        return optim.AdamW(params, lr=3e-4, weight_decay=0.1)
    if workload == "B11":
        return optim.Adam(params)
    if workload == "B12":
        return optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    if workload == "B12/foreach":
        return optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=True)
    raise KeyError(workload)


def loss_of(workload: str, t: Any) -> Callable[[Any, Any], Any]:
    """The training loss on (model output, target)."""
    F = t.nn.functional
    if workload == "B9":
        return F.cross_entropy
    if workload == "B10":
        return lambda logits, y: F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
        )
    return F.mse_loss


def build_module_step(
    lib: str, workload: str, arrays: dict[str, Any], quick: bool
) -> Callable[[], list[Any]]:
    """torch, torch.compile, llgrad eager or llgrad (compiled): a zero-argument step that
    runs one training step (B12: one optimizer step) and returns
    [loss, *parameters, *running statistics] (B12: the parameters)."""
    if lib.startswith("llgrad"):
        import llgrad as t

        tensor = t.tensor
    else:
        import torch as t

        tensor = lambda a: t.from_numpy(a.copy())  # noqa: E731
    shapes = param_shapes(workload, quick)
    names = [n for n, _ in shapes]
    if workload.startswith("B12"):
        params = [t.nn.Parameter(tensor(arrays[n])) for n in names]
        for p, n in zip(params, names):
            p.grad = tensor(arrays["grad:" + n])
        opt = make_optimizer(workload, t, params)

        def update() -> None:
            opt.step()

        fn = update
        if lib in ("llgrad", "torch.compile"):
            fn = t.compile(update)

        def opt_step() -> list[Any]:
            fn()
            return list(params)

        opt_step.compiled = fn  # type: ignore[attr-defined]
        return opt_step
    model = make_model(workload, t, quick)
    model.train()
    named = dict(model.named_parameters())
    got = [(n, tuple(p.shape)) for n, p in named.items()]
    if sorted(got) != sorted(shapes):
        raise RuntimeError(f"{lib} {workload}: parameters {got}, expected {shapes}")
    with t.no_grad():
        for n in names:
            named[n].copy_(tensor(arrays[n]))
    params = [named[n] for n in names]
    bufs = dict(model.named_buffers())
    buffers = [bufs[n] for n in buffer_names(workload)]
    opt = make_optimizer(workload, t, list(model.parameters()))
    criterion = loss_of(workload, t)
    x, y = tensor(arrays["x"]), tensor(arrays["y"])

    def train_step(model: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = train_step
    if lib in ("llgrad", "torch.compile"):
        fn = t.compile(train_step)

    def step() -> list[Any]:
        loss = fn(model, opt, x, y)
        return [loss.item(), *params, *buffers]  # .item(): the step has finished

    step.compiled = fn  # type: ignore[attr-defined]
    return step


# --------------------------------------------------------------------------------------
# jax.jit: the same math, functionally
# --------------------------------------------------------------------------------------


def _jax_sgd(jnp: Any, params: dict, grads: dict, bufs: dict) -> tuple[dict, dict]:
    """SGD, lr 0.05, momentum 0.9 (no dampening), weight decay 5e-4 (torch's rule; a
    zero buffer on the first step gives torch's `buf = g`)."""
    new_p, new_b = {}, {}
    for k, p in params.items():
        g = grads[k] + 5e-4 * p
        b = 0.9 * bufs[k] + g
        new_p[k], new_b[k] = p - 0.05 * b, b
    return new_p, new_b


def _jax_adam(
    jnp: Any, params: dict, grads: dict, state: dict, lr: float, wd: float, decoupled: bool
) -> tuple[dict, dict]:
    """Adam (betas 0.9, 0.999, eps 1e-8), torch's rules: AdamW decays the parameter by
    lr * wd before the update; Adam with wd adds wd * p to the gradient."""
    step = state["step"] + 1.0
    bc1 = 1.0 - 0.9**step
    bc2 = 1.0 - 0.999**step
    new_p, new_m, new_v = {}, {}, {}
    for k, p in params.items():
        g = grads[k]
        if decoupled:
            p = p * (1.0 - lr * wd)
        elif wd:
            g = g + wd * p
        m = 0.9 * state["m"][k] + 0.1 * g
        v = 0.999 * state["v"][k] + 0.001 * g * g
        denom = jnp.sqrt(v) / jnp.sqrt(bc2) + 1e-8
        new_p[k] = p - (lr / bc1) * m / denom
        new_m[k], new_v[k] = m, v
    return new_p, {"step": step, "m": new_m, "v": new_v}


def build_jax_step(workload: str, arrays: dict[str, Any], quick: bool) -> Callable[[], list[Any]]:
    """jax.jit: one jitted function per step (value_and_grad and the update), parameters
    and optimizer state donated; returns the same outputs as `build_module_step`."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    c = config(workload, quick)
    names = [n for n, _ in param_shapes(workload, quick)]
    params = {n: jnp.asarray(arrays[n]) for n in names}
    zeros = {n: jnp.zeros_like(p) for n, p in params.items()}
    adam_state = {
        "step": jnp.zeros((), jnp.float32),
        "m": zeros,
        "v": {n: jnp.zeros_like(p) for n, p in params.items()},
    }

    def cross_entropy(logits: Any, y: Any) -> Any:
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1))

    def layer_norm(x: Any, w: Any, b: Any) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * w + b

    if workload.startswith("B12"):
        grads = {n: jnp.asarray(arrays["grad:" + n]) for n in names}

        def adamw(params: dict, state: dict, grads: dict) -> tuple[dict, dict]:
            return _jax_adam(jnp, params, grads, state, 1e-3, 0.01, True)

        update = jax.jit(adamw, donate_argnums=(0, 1))
        st = {"params": params, "opt": adam_state}

        def opt_step() -> list[Any]:
            st["params"], st["opt"] = update(st["params"], st["opt"], grads)
            jax.block_until_ready(st["params"])
            return [st["params"][n] for n in names]

        return opt_step

    x, y = jnp.asarray(arrays["x"]), jnp.asarray(arrays["y"])
    if workload == "B9":
        bufs = {}
        for n in buffer_names(workload):
            ch = arrays[n.split(".")[0] + ".weight"].shape[0]
            bufs[n] = jnp.zeros(ch, jnp.float32) if "mean" in n else jnp.ones(ch, jnp.float32)

        def loss_fn(p: dict, bufs: dict, x: Any, y: Any) -> tuple[Any, dict]:
            h, new = x, {}
            for conv, bn, pool in (("0", "1", False), ("3", "4", True), ("7", "8", True)):
                h = lax.conv_general_dilated(
                    h,
                    p[conv + ".weight"],
                    (1, 1),
                    ((1, 1), (1, 1)),
                    dimension_numbers=("NCHW", "OIHW", "NCHW"),
                )
                h = h + p[conv + ".bias"][None, :, None, None]
                mean = h.mean((0, 2, 3))
                var = ((h - mean[None, :, None, None]) ** 2).mean((0, 2, 3))
                n = h.size // h.shape[1]
                h = (h - mean[None, :, None, None]) / jnp.sqrt(var + 1e-5)[None, :, None, None] * p[
                    bn + ".weight"
                ][None, :, None, None] + p[bn + ".bias"][None, :, None, None]
                new[bn + ".running_mean"] = 0.9 * bufs[bn + ".running_mean"] + 0.1 * mean
                new[bn + ".running_var"] = 0.9 * bufs[bn + ".running_var"] + 0.1 * var * (
                    n / (n - 1)
                )
                h = jax.nn.relu(h)
                if pool:
                    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            h = h.mean((2, 3))
            logits = h @ p["13.weight"].T + p["13.bias"]
            return cross_entropy(logits, y), jax.lax.stop_gradient(new)

        def train(p: dict, opt: dict, bufs: dict, x: Any, y: Any) -> tuple:
            (loss, new_bufs), g = jax.value_and_grad(loss_fn, has_aux=True)(p, bufs, x, y)
            p, opt = _jax_sgd(jnp, p, g, opt)
            return loss, p, opt, new_bufs

        state = {"p": params, "opt": zeros, "bufs": bufs}
    elif workload == "B10":
        d, heads, s = c["d"], c["heads"], c["seq"]
        hd = d // heads
        mask = jnp.tril(jnp.ones((s, s), bool))

        def forward(p: dict, tok: Any) -> Any:
            b = tok.shape[0]
            h = p["emb.weight"][tok] + p["pos"]
            for i in range(2):
                q = f"blocks.{i}."
                z = layer_norm(h, p[q + "ln1.weight"], p[q + "ln1.bias"])
                qkv = z @ p[q + "qkv.weight"].T + p[q + "qkv.bias"]
                qq, kk, vv = (
                    qkv[..., j * d : (j + 1) * d].reshape(b, s, heads, hd).transpose(0, 2, 1, 3)
                    for j in range(3)
                )
                sc = qq @ kk.transpose(0, 1, 3, 2) / math.sqrt(hd)
                a = jax.nn.softmax(jnp.where(mask, sc, -jnp.inf), -1) @ vv
                a = a.transpose(0, 2, 1, 3).reshape(b, s, d)
                h = h + a @ p[q + "proj.weight"].T + p[q + "proj.bias"]
                z = layer_norm(h, p[q + "ln2.weight"], p[q + "ln2.bias"])
                z = jax.nn.gelu(z @ p[q + "fc1.weight"].T + p[q + "fc1.bias"], approximate=False)
                h = h + z @ p[q + "fc2.weight"].T + p[q + "fc2.bias"]
            h = layer_norm(h, p["lnf.weight"], p["lnf.bias"])
            return h @ p["emb.weight"].T

        def train(p: dict, opt: dict, bufs: dict, x: Any, y: Any) -> tuple:
            def loss_fn(p: dict) -> Any:
                logits = forward(p, x)
                return cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

            loss, g = jax.value_and_grad(loss_fn)(p)
            p, opt = _jax_adam(jnp, p, g, opt, 3e-4, 0.1, True)
            return loss, p, opt, bufs

        state = {"p": params, "opt": adam_state, "bufs": {}}
    elif workload == "B11":
        hidden = c["hidden"]

        def forward(p: dict, x: Any) -> Any:
            seq = x.transpose(1, 0, 2)  # (time, batch, features)
            for layer in range(2):
                sfx = f"_l{layer}"
                xw = seq @ p["lstm.weight_ih" + sfx].T + p["lstm.bias_ih" + sfx]
                whh, bhh = p["lstm.weight_hh" + sfx], p["lstm.bias_hh" + sfx]

                def cell(carry: tuple, xt: Any, whh: Any = whh, bhh: Any = bhh) -> tuple:
                    h, cc = carry
                    gates = xt + h @ whh.T + bhh
                    i, f, gg, o = (gates[:, k * hidden : (k + 1) * hidden] for k in range(4))
                    cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(gg)
                    h = jax.nn.sigmoid(o) * jnp.tanh(cc)
                    return (h, cc), h

                z = jnp.zeros((x.shape[0], hidden), x.dtype)
                _, seq = lax.scan(cell, (z, z), xw)
            return seq[-1] @ p["head.weight"].T + p["head.bias"]

        def train(p: dict, opt: dict, bufs: dict, x: Any, y: Any) -> tuple:
            loss, g = jax.value_and_grad(lambda p: jnp.mean((forward(p, x) - y) ** 2))(p)
            p, opt = _jax_adam(jnp, p, g, opt, 1e-3, 0.0, False)
            return loss, p, opt, bufs

        state = {"p": params, "opt": adam_state, "bufs": {}}
    else:
        raise KeyError(workload)
    jtrain = jax.jit(train, donate_argnums=(0, 1, 2))
    bnames = buffer_names(workload)

    def step() -> list[Any]:
        loss, state["p"], state["opt"], state["bufs"] = jtrain(
            state["p"], state["opt"], state["bufs"], x, y
        )
        jax.block_until_ready(state["p"])
        return [float(loss), *[state["p"][n] for n in names], *[state["bufs"][n] for n in bnames]]

    return step


def build(
    lib: str, workload: str, quick: bool, arrays: dict[str, Any] | None = None
) -> Callable[[], list[Any]]:
    """The zero-argument step of `lib` on `workload` (a B9-B12 name)."""
    arrays = inputs(workload, quick) if arrays is None else arrays
    if lib == "jax.jit":
        return build_jax_step(workload, arrays, quick)
    return build_module_step(lib, workload, arrays, quick)


def run_checked(
    step: Callable[[], list[Any]], to_numpy: Callable[[list[Any]], list[Any]]
) -> tuple[list[Any], list[float]]:
    """`CHECK_STEPS` calls of `step`: (each step's loss and the last step's other outputs,
    as NumPy arrays; the seconds each call took). Outputs are copied out right after each
    call (parameters are updated in place by the next)."""
    import time

    losses: list[Any] = []
    last: list[Any] = []
    times = []
    for _ in range(CHECK_STEPS):
        t0 = time.perf_counter()
        out = step()
        times.append(time.perf_counter() - t0)
        arrs = to_numpy(out)
        if arrs and arrs[0].ndim == 0:  # a loss (parameters are never 0-d)
            losses.append(arrs[0])
            arrs = arrs[1:]
        last = arrs
    return losses + last, times


def check_updates(workload: str, quick: bool, got: list[Any], want: list[Any]) -> str | None:
    """None if the parameters' and buffers' changes over the checked steps agree with the
    reference's: the norm of the difference within 1e-2 of the norm of the reference's
    change over all of them, and within 1e-1 per tensor. (Values alone, compared within
    1e-3 of their magnitude, would pass a step that did nothing: an AdamW step moves a
    parameter by about lr. Elementwise changes cannot be compared tightly either: where a
    gradient is rounding noise, as for the key bias of attention or a convolution's bias
    before BatchNorm, Adam's update is +-lr with the noise's sign. torch eager in float32
    against float64: 5e-4 overall, 6e-3 on the worst tensor.)"""
    import numpy as np

    arrays = inputs(workload, quick)
    init = [arrays[n] for n, _ in param_shapes(workload, quick)]
    init += [
        np.zeros_like(arrays[b.split(".")[0] + ".weight"])
        if "mean" in b
        else np.ones_like(arrays[b.split(".")[0] + ".weight"])
        for b in buffer_names(workload)
    ]
    k = len(want) - len(init)
    num = den = 0.0
    for i, a in enumerate(init):
        g, w = np.asarray(got[k + i], np.float64), np.asarray(want[k + i], np.float64)
        err, change = float(np.sum((g - w) ** 2)), float(np.sum((w - a) ** 2))
        num, den = num + err, den + change
        if change > 0 and err > 1e-2 * change:
            return f"output {k + i}: change off by {math.sqrt(err / change):.3g} of its norm"
    if den > 0 and num > 1e-4 * den:
        return f"parameter changes off by {math.sqrt(num / den):.3g} of their norm"
    return None


def reference(workload: str, quick: bool, to_numpy: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """torch eager in float64 over `CHECK_STEPS` steps (the outputs `run_checked` gives)."""
    import numpy as np
    import torch

    arrays = {
        k: (v.astype(np.float64) if v.dtype == np.float32 else v)
        for k, v in inputs(workload, quick).items()
    }
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return run_checked(build_module_step("torch", workload, arrays, quick), to_numpy)[0]
    finally:
        torch.set_default_dtype(before)
