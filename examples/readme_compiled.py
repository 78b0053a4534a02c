"""The README's compiled training step: zero_grad, forward, backward and step as one graph.

Run: python examples/readme_compiled.py
"""

import llgrad as lg
from llgrad import nn
from llgrad.utils.data import DataLoader, TensorDataset

lg.manual_seed(0)
x = lg.randn(1024, 20)
y = (x[:, :5].sum(1) > 0).long()
loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, drop_last=True)

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
opt = lg.optim.AdamW(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()


@lg.compile
def train_step(xb, yb):
    opt.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    opt.step()
    return loss


for epoch in range(5):
    for xb, yb in loader:
        loss = train_step(xb, yb)  # first call creates AdamW's state eagerly, then one graph
    print(f"epoch {epoch}: loss {loss.item():.4f}")

report = train_step.inspect(xb, yb)  # every stage: traced IR, passes, schedule, LLVM IR, asm
print(str(report.schedule).splitlines()[0])
print(
    {k: report.stats[k] for k in ("traced nodes", "kernels")},
    "graph breaks:",
    train_step.graph_breaks,
)
