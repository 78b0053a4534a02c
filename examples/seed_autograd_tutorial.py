"""'Automatic differentiation with torch.autograd' (Learn the Basics), with `import llgrad as lg`."""

import llgrad as lg

lg.manual_seed(0)

x = lg.ones(5)  # input tensor
y = lg.zeros(3)  # expected output
w = lg.randn(5, 3, requires_grad=True)
b = lg.randn(3, requires_grad=True)
z = lg.matmul(x, w) + b
loss = lg.nn.functional.binary_cross_entropy_with_logits(z, y)

print(f"Gradient function for z = {z.grad_fn}")
print(f"Gradient function for loss = {loss.grad_fn}")

loss.backward()
print(w.grad)
print(b.grad)

z = lg.matmul(x, w) + b
print(z.requires_grad)

with lg.no_grad():
    z = lg.matmul(x, w) + b
print(z.requires_grad)

z = lg.matmul(x, w) + b
z_det = z.detach()
print(z_det.requires_grad)

inp = lg.eye(5, requires_grad=True)
out = (inp + 1).pow(2)
out.backward(lg.ones_like(inp), retain_graph=True)
print(f"First call\n{inp.grad}")
out.backward(lg.ones_like(inp), retain_graph=True)
print(f"\nSecond call\n{inp.grad}")
inp.grad.zero_()
out.backward(lg.ones_like(inp), retain_graph=True)
print(f"\nCall after zeroing gradients\n{inp.grad}")
