"""The README's training loop: a PyTorch program with its import pointed at llgrad.

Run: python examples/readme_train.py
"""

import llgrad as torch  # was: import torch
from llgrad import nn
from llgrad.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(1024, 20)
y = (x[:, :5].sum(1) > 0).long()  # a 2-class problem the model can learn
loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x):
        return self.net(x)


model = MLP()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()

for epoch in range(5):
    for xb, yb in loader:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    print(f"epoch {epoch}: loss {loss.item():.4f}, accuracy {acc:.3f}")
