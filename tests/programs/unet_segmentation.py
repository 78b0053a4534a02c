"""A small U-Net-style segmentation net: two conv stages with GroupNorm and ReLU, max-pool
down, bilinear F.interpolate and nn.Upsample(nearest) up, skip connections by concatenation,
a 1x1 conv head; per-pixel cross-entropy with class weights, Adam with a
CosineAnnealingLR schedule; then pixel accuracy and a Dice score."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(15)
yy, xx = np.mgrid[0:8, 0:8]
images, masks = [], []
for _ in range(6):
    cy, cx, r = rng.uniform(2, 6), rng.uniform(2, 6), rng.uniform(1.5, 3)
    m = ((yy - cy) ** 2 + (xx - cx) ** 2 < r ** 2).astype(np.int64)
    images.append(np.stack([m + 0.3 * rng.standard_normal((8, 8)), xx / 8.0]))
    masks.append(m)
x = torch.tensor(np.stack(images), dtype=torch.float64)
y = torch.tensor(np.stack(masks))


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout), nn.ReLU())


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1 = block(2, 4)
        self.down2 = block(4, 8)
        self.bottom = block(8, 8)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec2 = block(16, 4)
        self.dec1 = block(8, 4)
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        s1 = self.down1(x)                       # 8x8
        s2 = self.down2(F.max_pool2d(s1, 2))     # 4x4
        b = self.bottom(F.max_pool2d(s2, 2))     # 2x2
        d2 = self.dec2(torch.cat([F.interpolate(b, scale_factor=2, mode="bilinear",
                                                align_corners=False), s2], dim=1))
        d1 = self.dec1(torch.cat([self.up(d2), s1], dim=1))
        return self.head(d1)


model = UNet().double()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
weights = torch.tensor([0.4, 0.6], dtype=torch.float64)
opt = torch.optim.Adam(model.parameters(), lr=0.02)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=0.002)
for step in range(6):
    opt.zero_grad()
    logits = model(x)
    loss = F.cross_entropy(logits, y, weight=weights)
    loss.backward()
    opt.step()
    sched.step()
    print(f"step {step} loss {loss.item():.7f} lr {sched.get_last_lr()[0]:.6f}")

with torch.no_grad():
    logits = model(x)
    pred = logits.argmax(1)
    probs = logits.softmax(1)[:, 1]
print("pixel accuracy", round((pred == y).double().mean().item(), 6))
inter = (probs * y).sum()
print("dice", round((2 * inter / (probs.sum() + y.sum())).item(), 6))
print("align_corners", [round(v, 5) for v in F.interpolate(
    x[:1, :1, :2, :2], size=(3, 3), mode="bilinear", align_corners=True)[0, 0, 1].tolist()])
