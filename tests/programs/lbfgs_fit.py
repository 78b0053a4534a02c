"""Second-order optimization: a logistic-regression model with an L2 penalty and a small
nonlinear curve fit, each minimized by optim.LBFGS with a closure (the strong-Wolfe line
search and the plain fixed-step variant), float64 throughout; the closure's evaluation
count, the final losses and parameters are printed."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(16)
X = torch.tensor(rng.standard_normal((40, 3)))
w_true = torch.tensor([1.5, -2.0, 0.5], dtype=torch.float64)
y = (torch.sigmoid(X @ w_true) > torch.tensor(rng.uniform(size=40))).double()

model = nn.Linear(3, 1).double()
with torch.no_grad():
    model.weight.zero_()
    model.bias.zero_()
opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=20, history_size=5,
                        line_search_fn="strong_wolfe")
calls = [0]


def closure():
    opt.zero_grad()
    logits = model(X).squeeze(1)
    loss = F.binary_cross_entropy_with_logits(logits, y) + 1e-2 * model.weight.pow(2).sum()
    loss.backward()
    calls[0] += 1
    return loss


for outer in range(3):
    loss = opt.step(closure)
    print(f"outer {outer} loss {loss.item():.8f}")
print("weights", [round(v, 5) for v in model.weight.flatten().tolist()],
      "bias", round(model.bias.item(), 5))
print("closure calls", calls[0] > 3)
print("lbfgs iterations", opt.state_dict()["state"][0]["n_iter"])

# a curve fit: a * exp(-b t) + c with the fixed-step variant
t = torch.linspace(0, 3, 25, dtype=torch.float64)
target = 2.0 * torch.exp(-1.3 * t) + 0.5 + 0.01 * torch.tensor(rng.standard_normal(25))
params = torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64, requires_grad=True)
opt2 = torch.optim.LBFGS([params], lr=0.5, max_iter=15, tolerance_grad=1e-9,
                         tolerance_change=1e-12)


def closure2():
    opt2.zero_grad()
    a, b, c = params
    loss = ((a * torch.exp(-b * t) + c - target) ** 2).mean()
    loss.backward()
    return loss


for outer in range(4):
    loss = opt2.step(closure2)
    print(f"fit {outer} loss {loss.item():.8f}")
print("fitted", [round(v, 4) for v in params.tolist()])
