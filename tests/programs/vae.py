"""A variational autoencoder on binary vectors: an MLP encoder giving mean and log-variance,
the reparameterization trick with noise drawn from NumPy, a Bernoulli decoder trained with
binary_cross_entropy_with_logits (reduction="sum"), the KL term from
torch.distributions (Normal posterior against a Normal prior, kl_divergence) checked against
its closed form, Adam and gradient-norm clipping; then the ELBO of held-out data, the
decoder's Bernoulli log_prob and a decoded latent walk."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Bernoulli, Normal, kl_divergence

rng = np.random.default_rng(12)
prototypes = rng.uniform(size=(3, 12)) > 0.5
data = prototypes[rng.integers(0, 3, 48)] ^ (rng.uniform(size=(48, 12)) < 0.1)
train = torch.tensor(data[:40], dtype=torch.float32)
held_out = torch.tensor(data[40:], dtype=torch.float32)
eps = torch.tensor(rng.standard_normal((5, 40, 2)).astype(np.float32))


class VAE(nn.Module):
    def __init__(self, n=12, hidden=16, latent=2):
        super().__init__()
        self.enc = nn.Linear(n, hidden)
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.Softplus(), nn.Linear(hidden, n))

    def encode(self, x):
        h = torch.relu(self.enc(x))
        return self.mu(h), self.logvar(h)

    def forward(self, x, noise):
        mu, logvar = self.encode(x)
        z = mu + torch.exp(0.5 * logvar) * noise
        return self.dec(z), mu, logvar


def loss_terms(logits, x, mu, logvar):
    recon = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.shape[0]
    posterior = Normal(mu, torch.exp(0.5 * logvar))
    prior = Normal(torch.zeros_like(mu), torch.ones_like(mu))
    kl = kl_divergence(posterior, prior).sum() / x.shape[0]
    return recon, kl


model = VAE()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
opt = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(5):
    opt.zero_grad()
    logits, mu, logvar = model(train, eps[step])
    recon, kl = loss_terms(logits, train, mu, logvar)
    loss = recon + kl
    loss.backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    print(f"step {step} recon {recon.item():.4f} kl {kl.item():.4f} grad-norm {norm.item():.4f}")

model.eval()
with torch.no_grad():
    mu, logvar = model.encode(held_out)
    logits = model.dec(mu)
    recon, kl = loss_terms(logits, held_out, mu, logvar)
    print(f"held-out elbo {-(recon + kl).item():.4f}")
    closed = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / held_out.shape[0]
    print("kl matches closed form", abs(kl.item() - closed.item()) < 1e-5)
    log_lik = Bernoulli(logits=logits).log_prob(held_out).sum(1).mean()
    print("bernoulli log_prob", round(log_lik.item(), 4))
    walk = torch.stack([torch.linspace(-2, 2, 4), torch.zeros(4)], 1)
    probs = torch.sigmoid(model.dec(walk))
    print("walk", [round(v, 4) for v in probs[:, 0].tolist()])
    print("posterior std", [round(v, 4) for v in torch.exp(0.5 * logvar[0]).tolist()])
