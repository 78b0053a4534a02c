"""The legacy 'Autograd: automatic differentiation' tutorial, ported with `import llgrad as lg`.

Every statement of the tutorial runs; the comments show the outputs the tutorial prints.
"""

import llgrad as lg

lg.manual_seed(0)

x = lg.ones(2, 2, requires_grad=True)
print(x)
# tensor([[1., 1.],
#         [1., 1.]], requires_grad=True)
print(x.grad_fn)  # we've created x ourselves: None

y = x + 2
print(y)
print(y.grad_fn)  # <AddBackward0 object at 0x...>

z = y * y * 3
out = z.mean()
print(z, out)  # 27s and tensor(27., grad_fn=<MeanBackward0>)

a = lg.randn(2, 2)
a = (a * 3) / (a - 1)
print(a.requires_grad)  # False
a.requires_grad_(True)
print(a.requires_grad)  # True
b = (a * a).sum()
print(b.grad_fn)  # <SumBackward0 object at 0x...>

out.backward()
print(x.grad)  # 4.5 everywhere

x = lg.randn(3, requires_grad=True)
y = x * 2
while y.data.norm() < 1000:
    y = y * 2
print(y)

gradients = lg.tensor([0.1, 1.0, 0.0001], dtype=lg.float)
y.backward(gradients)
print(x.grad)  # gradients * 2**k for the k doublings above

print(x.requires_grad)
print((x**2).requires_grad)
with lg.no_grad():
    print((x**2).requires_grad)

# The second half of the older text: backward twice through part of a graph.
x = lg.ones(2, 2, requires_grad=True)
y = x + 2
y.backward(lg.ones(2, 2), retain_graph=True)
# the retain_graph flag prevents the internal buffers from being freed
z = y * y
gradient = lg.randn(2, 2)
z.backward(gradient)
print(x.grad)  # 1 + 2 * y * gradient
print((x**2).requires_grad)
with lg.no_grad():
    print((x**2).requires_grad)
