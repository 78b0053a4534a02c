"""An encoder-decoder transformer (nn.Transformer, batch_first) learning to reverse short
token sequences: token embeddings plus sinusoidal positions, a causal target mask from
generate_square_subsequent_mask (as bool), key-padding masks for source and target,
label-smoothed cross-entropy with ignore_index, Adam with a LambdaLR warm-up; then greedy
decoding."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(14)
PAD, BOS, VOCAB, D = 0, 1, 8, 16
src_np = rng.integers(2, VOCAB, (6, 5))
src_np[4, 3:] = PAD
src_np[5, 4:] = PAD
tgt_np = np.full((6, 6), PAD)
tgt_np[:, 0] = BOS
for i, row in enumerate(src_np):
    toks = row[row != PAD][::-1]
    tgt_np[i, 1:1 + len(toks)] = toks
src = torch.tensor(src_np)
tgt = torch.tensor(tgt_np)


def positions(n, d):
    pos = np.arange(n)[:, None]
    div = np.exp(np.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(pos * div), np.cos(pos * div)
    return torch.tensor(pe, dtype=torch.float32)


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D, padding_idx=PAD)
        self.register_buffer("pe", positions(16, D))
        self.transformer = nn.Transformer(d_model=D, nhead=2, num_encoder_layers=1,
                                          num_decoder_layers=1, dim_feedforward=32,
                                          dropout=0.0, batch_first=True)
        self.out = nn.Linear(D, VOCAB)

    def forward(self, src, tgt_in):
        s = self.embed(src) * math.sqrt(D) + self.pe[:src.shape[1]]
        t = self.embed(tgt_in) * math.sqrt(D) + self.pe[:tgt_in.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1]).isinf()
        h = self.transformer(s, t, tgt_mask=mask, src_key_padding_mask=src == PAD,
                             tgt_key_padding_mask=tgt_in == PAD,
                             memory_key_padding_mask=src == PAD)
        return self.out(h)


model = Seq2Seq()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.2))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
for step in range(5):
    opt.zero_grad()
    logits = model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1),
                           ignore_index=PAD, label_smoothing=0.1)
    loss.backward()
    opt.step()
    sched.step()
    print(f"step {step} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.5f}")

model.eval()
with torch.no_grad():
    logits = model(src, tgt[:, :-1])
    print("teacher-forced logit sum", round(logits.sum().item(), 3))
    out = torch.full((6, 1), BOS)
    for _ in range(3):
        nxt = model(src, out)[:, -1].argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
print("decoded", out[:2].tolist())
print("mask row", nn.Transformer.generate_square_subsequent_mask(4)[1].tolist())
