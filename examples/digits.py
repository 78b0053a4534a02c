"""Train an MLP and a small CNN on scikit-learn's handwritten digits, eagerly and compiled.

    pip install -e '.[examples]' && python examples/digits.py [--epochs 15] [--out digits_out]

The data set (1,797 8x8 images of the digits 0-9) ships inside scikit-learn, so nothing is
downloaded. For each model the same training runs twice from the same initial weights:
eagerly, and with the whole training step (forward, backward, Adam update) compiled into
one graph by `lg.compile`. It prints the test accuracy of both, checks they trained to the
same weights, reports the median time of one training step in each mode, and saves the
loss and accuracy curves as a PNG. `--steps N` stops each run after N steps (a smoke test).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

import llgrad as lg
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.utils.data import DataLoader, TensorDataset


def load(seed: int) -> tuple[lg.Tensor, lg.Tensor, lg.Tensor, lg.Tensor]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # N x 1 x 8 x 8
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, digits.target, test_size=0.2, random_state=seed, stratify=digits.target
    )
    mean, std = x_tr.mean(), x_tr.std()
    return (
        lg.tensor((x_tr - mean) / std),
        lg.tensor(y_tr),
        lg.tensor((x_te - mean) / std),
        lg.tensor(y_te),
    )


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 10),
    )


def train_step(model: nn.Module, opt: lg.optim.Optimizer, x: lg.Tensor, y: lg.Tensor) -> lg.Tensor:
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def accuracy(model: nn.Module, x: lg.Tensor, y: lg.Tensor) -> float:
    with lg.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def run(
    make: type,
    data: tuple,
    compiled: bool,
    epochs: int,
    steps: int | None,
    seed: int,
    progress: bool,
) -> dict:
    x_tr, y_tr, x_te, y_te = data
    lg.manual_seed(seed)
    model = make()
    opt = lg.optim.Adam(model.parameters(), lr=3e-3)
    step = lg.compile(train_step) if compiled else train_step
    loader = DataLoader(
        TensorDataset(x_tr, y_tr),
        batch_size=64,
        shuffle=True,
        drop_last=True,
        generator=lg.Generator().manual_seed(seed),
    )
    losses, accs, times, done = [], [], [], 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(
            total=steps or epochs * len(loader),
            leave=False,
            desc=f"{make.__name__} {'compiled' if compiled else 'eager'}",
        )
    for _ in range(epochs):
        total = 0.0
        for xb, yb in loader:
            t0 = time.perf_counter()
            loss = step(model, opt, xb, yb).item()
            times.append(time.perf_counter() - t0)
            total += loss
            done += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}")
            if steps is not None and done >= steps:
                break
        losses.append(total / max(1, len(loader)))
        accs.append(accuracy(model, x_te, y_te))
        if steps is not None and done >= steps:
            break
    if bar is not None:
        bar.close()
    warm = times[2:] or times  # the first calls trace and compile
    return {
        "model": model,
        "losses": losses,
        "accs": accs,
        "step_ms": 1e3 * statistics.median(warm),
        "first_ms": 1e3 * max(times[:3]),
    }


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for (name, mode), r in results.items():
        style = "-" if mode == "compiled" else "--"
        a.plot(range(1, len(r["losses"]) + 1), r["losses"], style, label=f"{name} {mode}")
        b.plot(range(1, len(r["accs"]) + 1), r["accs"], style, label=f"{name} {mode}")
    a.set(xlabel="epoch", ylabel="training loss", title="loss")
    b.set(xlabel="epoch", ylabel="test accuracy", title="accuracy")
    a.legend()
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--steps", type=int, default=None, help="stop each run after N steps")
    p.add_argument("--out", default="digits_out", help="folder for the PNG")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    ns = p.parse_args(argv)
    data = load(ns.seed)
    print(f"digits: {len(data[0])} training and {len(data[2])} test images")
    results = {}
    for make in (mlp, cnn):
        for compiled in (False, True):
            mode = "compiled" if compiled else "eager"
            results[make.__name__, mode] = r = run(
                make, data, compiled, ns.epochs, ns.steps, ns.seed, not ns.no_progress
            )
            print(
                f"{make.__name__:>4} {mode:>8}: test accuracy {r['accs'][-1]:.3f}, "
                f"step {r['step_ms']:.2f} ms (slowest of the first three {r['first_ms']:.0f} "
                f"ms: tracing and compiling)"
            )
        eager, comp = results[make.__name__, "eager"], results[make.__name__, "compiled"]
        gap = max(
            float(np.abs(a.detach().numpy() - b.detach().numpy()).max())
            for a, b in zip(eager["model"].parameters(), comp["model"].parameters())
        )
        print(
            f"{make.__name__:>4}: compiled step {eager['step_ms'] / comp['step_ms']:.1f}x "
            f"the eager one; largest weight difference after training {gap:.2g}"
        )
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    plot(results, out / "digits_curves.png")
    print(f"curves: {out / 'digits_curves.png'}")
    return results


if __name__ == "__main__":
    main()
