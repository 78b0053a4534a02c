"""The old torch.autograd Variable page's example: a gradient hook, with `import llgrad as lg`."""

import llgrad as lg

v = lg.tensor([0.0, 0.0, 0.0], requires_grad=True)
h = v.register_hook(lambda grad: grad * 2)  # double the gradient
v.backward(lg.tensor([1.0, 1.0, 1.0]))
print(v.grad.data)  # tensor([2., 2., 2.])
h.remove()  # removes the hook
