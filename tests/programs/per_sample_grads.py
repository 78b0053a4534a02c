"""Per-sample gradients with torch.func: functional_call, vmap over grad, and a Jacobian,
checked against a loop."""
import numpy as np
import torch
import torch.nn as nn
from torch.func import functional_call, grad, jacrev, vmap

rng = np.random.default_rng(3)
model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))
params = {k: v.detach() for k, v in model.named_parameters()}
x = torch.tensor(rng.standard_normal((6, 4)).astype(np.float32))
t = torch.tensor(rng.standard_normal((6, 2)).astype(np.float32))


def loss_fn(p, xi, ti):
    out = functional_call(model, p, (xi.unsqueeze(0),))
    return ((out.squeeze(0) - ti) ** 2).sum()


per_sample = vmap(grad(loss_fn), in_dims=(None, 0, 0))(params, x, t)
for name, g in per_sample.items():
    print(name, tuple(g.shape), [round(v, 5) for v in g.flatten()[:3].tolist()])
loop = [grad(loss_fn)(params, x[i], t[i]) for i in range(6)]
diff = max((per_sample[k][i] - loop[i][k]).abs().max().item() for i in range(6) for k in params)
print("vmap equals loop", diff < 1e-5)
jac = jacrev(lambda xi: functional_call(model, params, (xi,)))(x[0])
print("jacobian", tuple(jac.shape), round(jac.abs().sum().item(), 5))
