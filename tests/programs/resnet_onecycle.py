"""A ResNet-style network: residual basic blocks (3x3 conv, BatchNorm2d, ReLU) with an
identity or 1x1-conv downsampling shortcut, global average pooling, SGD with momentum,
weight decay and a OneCycleLR schedule stepped per batch; batches from a DataLoader; then
evaluation, running statistics and a state_dict round trip."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(19)
images = rng.standard_normal((24, 2, 8, 8))
labels = (images[:, 0, :4].mean((1, 2)) > images[:, 1, 4:].mean((1, 2))).astype(np.int64)
loader = DataLoader(TensorDataset(torch.tensor(images), torch.tensor(labels)), batch_size=8)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4),
                                  nn.ReLU(inplace=True))
        self.layer1 = BasicBlock(4, 4, 1)
        self.layer2 = BasicBlock(4, 8, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


model = ResNet().double()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, epochs=3,
                                            steps_per_epoch=len(loader))
for epoch in range(3):
    model.train()
    total = 0.0
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        total += loss.item()
    print(f"epoch {epoch} loss {total / len(loader):.6f} lr {sched.get_last_lr()[0]:.6f} "
          f"momentum {opt.param_groups[0]['momentum']:.4f}")

model.eval()
with torch.no_grad():
    logits = model(torch.tensor(images))
acc = (logits.argmax(1) == torch.tensor(labels)).double().mean()
print("accuracy", round(acc.item(), 6))
print("bn running var", [round(v, 5) for v in model.layer2.bn2.running_var[:4].tolist()])
keys = list(model.state_dict().keys())
print("state keys", len(keys), keys[:4])
clone = ResNet().double()
clone.load_state_dict(model.state_dict())
clone.eval()
with torch.no_grad():
    print("reloaded equal", torch.allclose(clone(torch.tensor(images)), logits))
