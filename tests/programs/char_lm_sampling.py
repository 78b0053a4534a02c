"""A character-level language model in the style of the classic min-char-rnn examples: a
vocabulary built from a text, Embedding -> 1-layer GRU -> Linear, truncated
backpropagation through time with the hidden state detached between chunks, Adam and
clip_grad_norm_; then temperature sampling with torch.multinomial from a seeded
torch.Generator. Sampled characters depend on the library's random stream, so only what the
data decides is printed: losses, the sample's length and that it uses the vocabulary."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

text = "the quick brown fox jumps over the lazy dog. " * 3
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text])
V, H, CHUNK = len(chars), 24, 16
rng = np.random.default_rng(18)


class CharRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 12)
        self.rnn = nn.GRU(12, H, batch_first=True)
        self.out = nn.Linear(H, V)

    def forward(self, idx, h=None):
        y, h = self.rnn(self.embed(idx), h)
        return self.out(y), h


model = CharRNN()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
opt = torch.optim.Adam(model.parameters(), lr=0.02)
print("vocab", V, "text length", len(text))
for epoch in range(2):
    h = None
    total = 0.0
    n = 0
    for start in range(0, len(text) - CHUNK - 1, CHUNK):
        x = data[start:start + CHUNK][None]
        y = data[start + 1:start + CHUNK + 1][None]
        logits, h = model(x, h)
        h = h.detach()
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        total += loss.item()
        n += 1
    print(f"epoch {epoch} mean loss {total / n:.5f} chunks {n}")

model.eval()
with torch.no_grad():
    logits, _ = model(data[:CHUNK][None])
    ppl = torch.exp(F.cross_entropy(logits[0], data[1:CHUNK + 1]))
    print(f"perplexity {ppl.item():.4f}")
    gen = torch.Generator().manual_seed(0)
    idx = torch.tensor([[stoi["t"]]])
    h = None
    out = []
    for _ in range(20):
        logits, h = model(idx, h)
        probs = F.softmax(logits[0, -1] / 0.8, dim=-1)
        idx = torch.multinomial(probs, 1, generator=gen)[None]
        out.append(chars[idx.item()])
    print("sampled", len(out), "characters, all in vocabulary:", all(c in stoi for c in out))
    print("probs sum to one", abs(probs.sum().item() - 1) < 1e-5)
