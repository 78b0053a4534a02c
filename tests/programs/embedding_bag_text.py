"""A bag-of-words text classifier in the style of the AG_NEWS tutorial: a toy vocabulary,
token ids flattened with per-document offsets, nn.EmbeddingBag(mode="mean") and a
per_sample_weights sum bag, a Linear head, cross-entropy, SGD with a
CosineAnnealingWarmRestarts schedule, and gradient clipping; then predictions on new
sentences."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

docs = [("great fun film loved it", 0), ("boring slow film hated it", 1),
        ("loved the acting great story", 0), ("terrible plot boring acting", 1),
        ("fun and great", 0), ("slow terrible and boring", 1),
        ("story was great fun", 0), ("hated the slow plot", 1)]
vocab = {w: i for i, w in enumerate(sorted({w for d, _ in docs for w in d.split()}))}
rng = np.random.default_rng(20)


def batch(texts):
    ids = [torch.tensor([vocab[w] for w in t.split() if w in vocab]) for t in texts]
    offsets = torch.tensor([0] + [len(i) for i in ids[:-1]]).cumsum(dim=0)
    return torch.cat(ids), offsets


class BagClassifier(nn.Module):
    def __init__(self, n, dim=8, classes=2):
        super().__init__()
        self.bag = nn.EmbeddingBag(n, dim, mode="mean")
        self.weighted = nn.EmbeddingBag(n, 4, mode="sum")
        self.fc = nn.Linear(dim + 4, classes)

    def forward(self, text, offsets, weights):
        a = self.bag(text, offsets)
        b = self.weighted(text, offsets, per_sample_weights=weights)
        return self.fc(torch.cat([a, b], dim=1))


model = BagClassifier(len(vocab))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))
text, offsets = batch([d for d, _ in docs])
weights = torch.tensor(rng.uniform(0.5, 1.5, len(text)).astype(np.float32))
labels = torch.tensor([y for _, y in docs])
opt = torch.optim.SGD(model.parameters(), lr=0.5)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2,
                                                             eta_min=0.05)
print("vocab", len(vocab), "tokens", len(text), "offsets", offsets.tolist())
for epoch in range(8):
    opt.zero_grad()
    loss = F.cross_entropy(model(text, offsets, weights), labels)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 2.0)
    opt.step()
    sched.step()
    print(f"epoch {epoch} loss {loss.item():.6f} lr {sched.get_last_lr()[0]:.5f}")

model.eval()
with torch.no_grad():
    new_text, new_offsets = batch(["great story", "boring and slow plot"])
    ones = torch.ones(len(new_text))
    probs = F.softmax(model(new_text, new_offsets, ones), dim=1)
print("predictions", probs.argmax(1).tolist(), [round(v, 5) for v in probs[:, 0].tolist()])
print("bag weight shape", tuple(model.bag.weight.shape), "mode", model.bag.mode)
