"""Variable-length sequence classification with packed sequences: pad_sequence,
pack_padded_sequence (enforce_sorted=False) through a bidirectional GRU and an LSTM,
pad_packed_sequence back, masked mean pooling, cross-entropy, SGD with Nesterov momentum."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

rng = np.random.default_rng(13)
lengths = [5, 2, 4, 3, 1, 4]
seqs = [torch.tensor(rng.standard_normal((n, 3)), dtype=torch.float64) for n in lengths]
labels = torch.tensor([int(s[:, 0].sum() > 0) for s in seqs])
padded = pad_sequence(seqs, batch_first=True)
print("padded", tuple(padded.shape), "labels", labels.tolist())


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 4, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(8, 5, batch_first=True)
        self.head = nn.Linear(5 + 8, 2)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, h = self.gru(packed)
        out2, (h2, c2) = self.lstm(out)
        seq, out_lengths = pad_packed_sequence(out2, batch_first=True)
        mask = (torch.arange(seq.shape[1])[None, :] < out_lengths[:, None]).unsqueeze(-1)
        pooled = (seq * mask).sum(1) / out_lengths[:, None].to(seq.dtype)
        last = torch.cat([h[0], h[1]], dim=1)
        return self.head(torch.cat([pooled, last], dim=1)), out_lengths, h2


model = Classifier().double()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape))))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
for step in range(4):
    opt.zero_grad()
    logits, out_lengths, h2 = model(padded, torch.tensor(lengths))
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.7f}")
print("lengths back", out_lengths.tolist())
print("final lstm state", [round(v, 5) for v in h2[0, :, 0].tolist()])
packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
print("batch sizes", packed.batch_sizes.tolist(), "sorted", packed.sorted_indices.tolist())
print("data rows", tuple(packed.data.shape))
