"""An MLP classifier trained with a DataLoader, BatchNorm1d, LeakyReLU, SGD with momentum,
a StepLR schedule and gradient clipping; then evaluated in eval mode."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
X = rng.standard_normal((96, 6)).astype(np.float32)
y = (X[:, 0] + 2 * X[:, 1] * X[:, 2] > 0).astype(np.int64) + (X[:, 3] > 1).astype(np.int64)
loader = DataLoader(TensorDataset(torch.tensor(X), torch.tensor(y)), batch_size=16,
                    shuffle=False, drop_last=True)

model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.1),
                      nn.Linear(16, 16), nn.ELU(), nn.Linear(16, 3))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

for epoch in range(4):
    total = 0.0
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        total += loss.item()
    sched.step()
    print(f"epoch {epoch} loss {total / len(loader):.5f} grad-norm {norm.item():.5f} "
          f"lr {sched.get_last_lr()[0]:.4f}")

model.eval()
with torch.no_grad():
    logits = model(torch.tensor(X))
    acc = (logits.argmax(dim=1) == torch.tensor(y)).float().mean()
print(f"accuracy {acc.item():.4f}")
print("running mean", [round(v, 4) for v in model[1].running_mean[:4].tolist()])
print("batches tracked", int(model[1].num_batches_tracked))
