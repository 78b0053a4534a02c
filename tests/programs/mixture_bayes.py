"""Probabilistic models with torch.distributions: a 1-D Gaussian mixture fitted by maximum
likelihood (MixtureSameFamily of a Categorical and Normals, log_prob, Adam), and a Bayesian
linear regression by variational inference (a Normal posterior over the weights with
rsample-free reparameterized noise from NumPy, a Normal likelihood's log_prob, and
kl_divergence to the Normal prior); then posterior summaries, entropies and a Laplace
and Independent distribution's log_prob."""
import numpy as np
import torch
from torch.distributions import (Categorical, Independent, Laplace, MixtureSameFamily, Normal,
                                 kl_divergence)

rng = np.random.default_rng(17)
data = torch.tensor(np.concatenate([rng.normal(-2, 0.5, 30), rng.normal(1.5, 0.8, 50)]))

logits = torch.zeros(2, dtype=torch.float64, requires_grad=True)
locs = torch.tensor([-1.0, 1.0], dtype=torch.float64, requires_grad=True)
log_scales = torch.zeros(2, dtype=torch.float64, requires_grad=True)
opt = torch.optim.Adam([logits, locs, log_scales], lr=0.1)
for step in range(6):
    opt.zero_grad()
    mixture = MixtureSameFamily(Categorical(logits=logits), Normal(locs, log_scales.exp()))
    nll = -mixture.log_prob(data).mean()
    nll.backward()
    opt.step()
    print(f"mixture step {step} nll {nll.item():.7f}")
with torch.no_grad():
    mix = MixtureSameFamily(Categorical(logits=logits), Normal(locs, log_scales.exp()))
    print("weights", [round(v, 5) for v in mix.mixture_distribution.probs.tolist()])
    print("mean", round(mix.mean.item(), 5), "variance", round(mix.variance.item(), 5))
    resp = Categorical(logits=logits).logits + Normal(locs, log_scales.exp()).log_prob(
        data[:3, None])
    print("responsibilities", [[round(v, 4) for v in row] for row in resp.softmax(-1).tolist()])

# Bayesian linear regression, y = X w + noise, by variational inference
X = torch.tensor(rng.standard_normal((30, 2)))
w_true = torch.tensor([0.7, -1.2], dtype=torch.float64)
y = X @ w_true + 0.3 * torch.tensor(rng.standard_normal(30))
eps = torch.tensor(rng.standard_normal((8, 4, 2)))
mu = torch.zeros(2, dtype=torch.float64, requires_grad=True)
rho = torch.full((2,), -1.0, dtype=torch.float64, requires_grad=True)
prior = Normal(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
opt = torch.optim.Adam([mu, rho], lr=0.1)
for step in range(8):
    opt.zero_grad()
    q = Normal(mu, torch.nn.functional.softplus(rho))
    w = mu + q.scale * eps[step]                          # 4 samples of the weights
    log_lik = Normal(X @ w.T, 0.3).log_prob(y[:, None]).sum(0).mean()
    loss = -(log_lik - kl_divergence(q, prior).sum())
    loss.backward()
    opt.step()
    print(f"vi step {step} neg-elbo {loss.item():.6f}")
with torch.no_grad():
    q = Normal(mu, torch.nn.functional.softplus(rho))
    print("posterior mean", [round(v, 5) for v in q.mean.tolist()],
          "std", [round(v, 5) for v in q.stddev.tolist()])
    print("entropy", round(q.entropy().sum().item(), 6))
    joint = Independent(Normal(mu, q.scale), 1)
    print("independent log_prob", round(joint.log_prob(w_true).item(), 6))
    print("laplace log_prob", round(Laplace(0.5, 2.0).log_prob(torch.tensor(1.5)).item(), 6))
    print("batch shape", tuple(q.batch_shape), "event shape", tuple(joint.event_shape))
