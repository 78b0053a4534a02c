"""A self-attention block (MultiheadAttention, LayerNorm, GELU) trained for a few steps with
ReduceLROnPlateau, then tensor ops the same scripts use: topk, sort, cumsum, einsum,
scatter_add, masked_fill, finfo."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(4)
seq = torch.tensor(rng.standard_normal((2, 5, 8)).astype(np.float32))
target = torch.tensor(rng.standard_normal((2, 5, 8)).astype(np.float32))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
        a, w = self.attn(x, x, x, attn_mask=mask)
        x = self.norm(x + a)
        return x + self.ff(x), w


block = Block()
with torch.no_grad():
    for p in block.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
opt = torch.optim.Adagrad(block.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
for step in range(4):
    opt.zero_grad()
    out, weights = block(seq)
    loss = F.mse_loss(out, target)
    loss.backward()
    opt.step()
    sched.step(loss.item() + (1.0 if step == 2 else 0.0))
    print(f"step {step} loss {loss.item():.5f} lr {opt.param_groups[0]['lr']:.4f}")
print("weights row", [round(v, 4) for v in weights[0, 2].tolist()])

scores = out.detach()[0, :, 0]
vals, idx = torch.topk(scores, 3)
print("topk", [round(v, 4) for v in vals.tolist()], idx.tolist())
s, order = torch.sort(scores, descending=True)
print("sort", order.tolist(), "cumsum", [round(v, 4) for v in torch.cumsum(s, 0).tolist()])
print("einsum", round(torch.einsum("bld,bmd->blm", seq, seq).sum().item(), 3))
hist = torch.zeros(4).scatter_add(0, torch.tensor([0, 3, 3, 1, 0, 3]), torch.ones(6))
print("scatter_add", hist.tolist())
print("masked_fill", seq[0, 0].masked_fill(seq[0, 0] < 0, 0.0).sum().item() > 0)
print("eps", torch.finfo(torch.float32).eps, "int max", torch.iinfo(torch.int32).max)
