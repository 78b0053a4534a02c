"""A character-level language-model step: Embedding, a 2-layer LSTM, a GRU cell, a Linear
decoder; RMSprop with gradient-value clipping and an exponential schedule."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(2)
vocab, hidden = 11, 12
tokens = torch.tensor(rng.integers(0, vocab, (3, 7)))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.lstm = nn.LSTM(8, hidden, num_layers=2, batch_first=True)
        self.cell = nn.GRUCell(hidden, hidden)
        self.decode = nn.Linear(hidden, vocab)

    def forward(self, tok):
        out, (h, c) = self.lstm(self.embed(tok))
        refined = self.cell(out[:, -1], h[-1])
        return self.decode(out), self.decode(refined)


model = LM()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.tensor(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
for step in range(4):
    opt.zero_grad()
    seq_logits, last_logits = model(tokens[:, :-1])
    loss = F.cross_entropy(seq_logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
    loss = loss + 0.5 * F.cross_entropy(last_logits, tokens[:, -1])
    loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), 0.05)
    opt.step()
    sched.step()
    print(f"step {step} loss {loss.item():.5f}")
print("lstm weight sum", round(model.lstm.weight_hh_l1.sum().item(), 4))
print("state keys", list(model.state_dict().keys())[:6])
