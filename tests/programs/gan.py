"""A small GAN on 2-D points: an MLP generator and discriminator, two Adam optimizers with
betas=(0.5, 0.999), BCEWithLogitsLoss with real/fake labels, detach() for the
discriminator step, and label smoothing on the real targets."""
import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(10)
angles = rng.uniform(0, 2 * np.pi, 64)
points = np.stack([np.cos(angles), np.sin(angles)], 1) + 0.05 * rng.standard_normal((64, 2))
real = torch.tensor(points, dtype=torch.float64)
noise = torch.tensor(rng.standard_normal((4, 64, 3)), dtype=torch.float64)

G = nn.Sequential(nn.Linear(3, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16), nn.Tanh(),
                  nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Dropout(0.0), nn.Linear(16, 1))
for net in (G, D):
    net.double()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.4))

criterion = nn.BCEWithLogitsLoss()
opt_g = torch.optim.Adam(G.parameters(), lr=0.01, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=0.01, betas=(0.5, 0.999))
ones = torch.full((64, 1), 0.9, dtype=torch.float64)
zeros = torch.zeros(64, 1, dtype=torch.float64)

for step in range(4):
    fake = G(noise[step])
    opt_d.zero_grad()
    loss_d = criterion(D(real), ones) + criterion(D(fake.detach()), zeros)
    loss_d.backward()
    opt_d.step()

    opt_g.zero_grad()
    loss_g = criterion(D(fake), torch.ones(64, 1, dtype=torch.float64))
    loss_g.backward()
    opt_g.step()
    d_real = torch.sigmoid(D(real)).mean().item()
    print(f"step {step} loss_d {loss_d.item():.6f} loss_g {loss_g.item():.6f} "
          f"D(real) {d_real:.6f}")

with torch.no_grad():
    sample = G(noise[0][:3])
print("samples", [[round(v, 5) for v in row] for row in sample.tolist()])
g_norm = sum(p.grad.norm() ** 2 for p in G.parameters()).sqrt()
print("generator grad norm", round(g_norm.item(), 6))
print("discriminator has grads", all(p.grad is not None for p in D.parameters()))
