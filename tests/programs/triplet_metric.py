"""Metric learning with a triplet loss: an MLP embedding network with L2-normalized
outputs, anchors/positives/negatives mined from labels (hardest positive and negative by
torch.cdist), nn.TripletMarginLoss and F.triplet_margin_with_distance_loss with a cosine
distance, RMSprop; then nearest-neighbour retrieval accuracy and pairwise distances."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(21)
centers = rng.standard_normal((3, 5)) * 2
labels_np = np.repeat(np.arange(3), 8)
points = torch.tensor(centers[labels_np] + rng.standard_normal((24, 5)), dtype=torch.float64)
labels = torch.tensor(labels_np)

net = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 4)).double()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.4))


def embed(x):
    return F.normalize(net(x), dim=1)


def mine(emb):
    d = torch.cdist(emb, emb)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    pos = torch.where(same & ~eye, d, torch.full_like(d, -1.0)).argmax(1)
    neg = torch.where(~same, d, torch.full_like(d, 1e9)).argmin(1)
    return pos, neg


triplet = nn.TripletMarginLoss(margin=0.5, p=2)
opt = torch.optim.RMSprop(net.parameters(), lr=0.01, alpha=0.9)
for step in range(6):
    with torch.no_grad():
        pos, neg = mine(embed(points))
    opt.zero_grad()
    emb = embed(points)
    loss = triplet(emb, emb[pos], emb[neg])
    cos = F.triplet_margin_with_distance_loss(
        emb, emb[pos], emb[neg], margin=0.2,
        distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b))
    (loss + cos).backward()
    opt.step()
    print(f"step {step} triplet {loss.item():.7f} cosine {cos.item():.7f}")

with torch.no_grad():
    emb = embed(points)
    d = torch.cdist(emb, emb) + torch.eye(24) * 1e9
    nearest = d.argmin(1)
    print("retrieval accuracy", round((labels[nearest] == labels).double().mean().item(), 6))
    print("pairwise", [round(v, 5) for v in F.pairwise_distance(emb[:3], emb[8:11]).tolist()])
    per_triplet = nn.TripletMarginLoss(margin=3.0, reduction="none")(emb[:3], emb[8:11],
                                                                     emb[1:4])
    print("unreduced", [round(v, 5) for v in per_triplet.tolist()])
