"""Data-parallel training with DistributedDataParallel on MPI.

    python examples/ddp_train.py                                   # one process
    python -m llgrad.distributed.run -n 2 examples/ddp_train.py    # two ranks
    python -m llgrad.distributed.run -n 2 examples/ddp_train.py --compile

Every rank reads its share of each global batch (DistributedSampler), DDP averages the
gradients, and rank 0 prints the global batch's mean loss: the same numbers whatever the
number of ranks (up to float32 rounding), because the ranks together see exactly the
batch one process would. `--compile` compiles the whole step (forward, backward, the
all-reduce of the gradients, the optimizer update) into one graph.
"""

from __future__ import annotations

import argparse

import llgrad as lg
import llgrad.distributed as dist
import llgrad.nn as nn
import llgrad.nn.functional as F
from llgrad.nn.parallel import DistributedDataParallel as DDP
from llgrad.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_data(n: int = 1024, d: int = 20, classes: int = 4) -> TensorDataset:
    g = lg.Generator().manual_seed(0)
    centers = lg.randn(classes, d, generator=g) * 0.4
    y = lg.randint(0, classes, (n,), generator=g)
    x = centers[y] + lg.randn(n, d, generator=g)
    return TensorDataset(x, y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64, help="global batch size")
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"the global batch {args.batch} must divide among {world} ranks")

    lg.manual_seed(rank)  # each rank starts differently; DDP broadcasts rank 0's
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = lg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = make_data()
    sampler = DistributedSampler(data, shuffle=True, seed=1)
    loader = DataLoader(data, batch_size=args.batch // world, sampler=sampler)

    def step(x: lg.Tensor, y: lg.Tensor) -> lg.Tensor:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    if args.compile:
        step = lg.compile(step)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = lg.zeros(())
        for x, y in loader:
            total += step(x, y)
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {total.item() / len(loader):.6f}")
    if rank == 0:
        print(f"ranks {world}, first weights {model.module[0].weight[0, :3].tolist()}")


if __name__ == "__main__":
    main()
