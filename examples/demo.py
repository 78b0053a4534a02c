"""llgrad in one screen: eager tensors on generated native kernels, and autograd.

Run: python examples/demo.py
"""

import re
import time

import numpy as np

import llgrad as lg
from llgrad.runtime.launch import record_kernels

lg.manual_seed(0)

print("== Eager tensors, PyTorch style ==")
x = lg.randn(3, 4)
print(x)
print("x.T @ x ->", (x.T @ x).shape, "| x.sum(dim=1) ->", x.sum(dim=1))
print(
    "dtypes promote as in PyTorch:",
    (lg.ones(2, dtype=lg.int32) * 2.5).dtype,
    (lg.ones(2, dtype=lg.float16) + lg.ones(2, dtype=lg.float32)).dtype,
)

print("\n== What an eager op runs on ==")
a, b, c = (lg.randn(1_000_000) for _ in range(3))
with record_kernels() as kernels:
    r = lg.exp(a) * b + c
print(f"exp(a) * b + c launched {len(kernels)} kernels: {[k.name for k in kernels]}")
asm = kernels[0].asm()
vector = [line.strip() for line in asm.splitlines() if re.search(r"v\w+\s.*%[yz]mm", line)]
print(
    f"the exp kernel: {len(vector)} AVX instructions, "
    f"{sum(' call' in line for line in asm.splitlines())} calls; e.g."
)
for line in vector[8:14]:
    print("   ", line)

n = 10_000_000
xs = lg.rand(n) + 0.5
xn = xs.numpy()
for name, lg_fn, np_fn in [
    ("exp", lg.exp, np.exp),
    ("tanh", lg.tanh, np.tanh),
    ("sum", lg.sum, np.sum),
]:
    lg_fn(xs)
    t0 = time.perf_counter()
    for _ in range(5):
        lg_fn(xs)
    t1 = time.perf_counter()
    for _ in range(5):
        np_fn(xn)
    t2 = time.perf_counter()
    print(
        f"{name:>5} on 10M float32: llgrad {(t1 - t0) / 5 * 1e3:6.2f} ms, "
        f"NumPy {(t2 - t1) / 5 * 1e3:6.2f} ms"
    )

print("\n== Autograd (the seeds' first example) ==")
x = lg.ones(2, 2, requires_grad=True)
y = x + 2
z = y * y * 3
out = z.mean()
print(z, out)
out.backward()
print("d(out)/dx =", x.grad)
print("grad_fn chain:", out.grad_fn, "->", out.grad_fn.next_functions)

print("\n== lg.compile: one function, every stage ==")


def loss_fn(x, w, b):
    return (lg.tanh(x @ w + b) * lg.sigmoid(x).sum(1, keepdim=True)).sum()


compiled = lg.compile(loss_fn)
x = lg.randn(8, 4, requires_grad=True)
w = lg.randn(4, 3, requires_grad=True)
b = lg.randn(3, requires_grad=True)
report = compiled.inspect(x, w, b)
print("-- traced IR --")
print(report.graph)
if report.backward_graph is not None:
    print("-- backward graph (from the same derivative rules eager autograd uses) --")
    print(report.backward_graph)
else:  # a scalar loss: one graph computes the loss and its gradients
    print(
        "-- loss and gradients in one graph (from the same derivative rules eager autograd uses) --"
    )
    print(report.joint_graph)
print(f"-- {len(report.kernels)} fused kernels; the first: --")
print(report.kernels[0])
vector_lines = [ln for ln in report.asm.splitlines() if "%ymm" in ln or "%zmm" in ln]
print(f"-- {len(vector_lines)} AVX instructions in the module's assembly --")
for key in (
    "traced nodes",
    "forward nodes after passes",
    "backward nodes",
    "residuals",
    "kernels",
    "gradients",
):
    if key in report.stats:  # a scalar loss computes its gradients in the forward
        print(f"   {key}: {report.stats[key]}")

loss = compiled(x, w, b)
loss.backward()
x2, w2, b2 = (t.detach().clone().requires_grad_() for t in (x, w, b))
loss_fn(x2, w2, b2).backward()
print("compiled loss", round(loss.item(), 5), "== eager loss", round(loss_fn(x2, w2, b2).item(), 5))
print(
    "max |grad difference| vs eager:",
    max(float((p.grad - q.grad).abs().max()) for p, q in ((x, x2), (w, w2), (b, b2))),
)
