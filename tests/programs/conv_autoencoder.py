"""A convolutional autoencoder: strided Conv2d encoder, ConvTranspose2d decoder (stride 2,
output_padding), BatchNorm2d, ReLU and Sigmoid, trained with MSE on 8x8 images by AdamW
with a LinearLR warm-up... of a StepLR; the bottleneck codes are compared afterwards."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(11)
xs = np.linspace(-1, 1, 8)
blobs = []
for i in range(10):
    cx, cy, s = rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), rng.uniform(0.2, 0.5)
    blobs.append(np.exp(-((xs[None, :] - cx) ** 2 + (xs[:, None] - cy) ** 2) / s))
images = torch.tensor(np.stack(blobs)[:, None], dtype=torch.float64)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
            nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
            nn.ConvTranspose2d(4, 1, 4, stride=2, padding=1), nn.Sigmoid())

    def forward(self, x):
        code = self.encoder(x)
        return self.decoder(code), code


model = AutoEncoder().double()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.3))
opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
for step in range(6):
    opt.zero_grad()
    recon, code = model(images)
    loss = F.mse_loss(recon, images)
    loss.backward()
    opt.step()
    sched.step()
    print(f"step {step} loss {loss.item():.7f} lr {sched.get_last_lr()[0]:.4f}")

model.eval()
with torch.no_grad():
    recon, code = model(images)
print("code shape", tuple(code.shape), "recon shape", tuple(recon.shape))
print("code[0]", [round(v, 5) for v in code[0].flatten()[:6].tolist()])
print("eval error", round(F.mse_loss(recon, images).item(), 7))
print("decoder weight shape", tuple(model.decoder[0].weight.shape))
