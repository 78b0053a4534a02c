"""A small CNN (Conv2d, BatchNorm2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Conv1d head)
trained with Adam and a cosine schedule."""
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

rng = np.random.default_rng(1)
images = torch.tensor(rng.standard_normal((12, 1, 10, 10)), dtype=torch.float64)
labels = torch.tensor(rng.integers(0, 4, 12))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.avg = nn.AvgPool2d(2, ceil_mode=True)
        self.adapt = nn.AdaptiveAvgPool2d((2, 2))
        self.head = nn.Conv1d(6, 4, 4)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.silu(self.avg(self.conv2(x)))
        x = self.adapt(x).flatten(2)            # (N, 6, 4)
        return self.head(x).squeeze(-1)          # (N, 4)


net = Net().double()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.4))
opt = torch.optim.Adam(net.parameters(), lr=0.02)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
for step in range(5):
    opt.zero_grad()
    loss = F.cross_entropy(net(images), labels)
    loss.backward()
    opt.step()
    sched.step()
    print(f"step {step} loss {loss.item():.6f} lr {sched.get_last_lr()[0]:.6f}")
net.eval()
out = net(images)
print("eval logits", [round(v, 5) for v in out[0].tolist()])
print("predictions", out.argmax(1).tolist())
