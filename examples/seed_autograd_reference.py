"""The torch.autograd reference page's examples, with `import llgrad as lg`."""

import llgrad as lg
from llgrad.autograd import Function, gradcheck, gradgradcheck
from llgrad.autograd.functional import hessian, jacobian
from llgrad.utils.checkpoint import checkpoint

lg.manual_seed(0)

# backward
x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x.sum()
lg.autograd.backward(y)
print(x.grad)  # tensor([1., 1., 1.])

# grad
x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x**2
z = y.sum()
grads = lg.autograd.grad(z, x)
print(grads[0])  # tensor([2., 4., 6.])

# no_grad, as a context manager and as a decorator
x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
with lg.no_grad():
    y = x**2
    print(y.requires_grad)  # False


@lg.no_grad()
def inference(model, data):
    return model(data)


print(inference(lambda d: d * 2, x).requires_grad)  # False

# enable_grad inside no_grad
with lg.no_grad():
    with lg.enable_grad():
        y = x**2
        print(y.requires_grad)  # True


# set_grad_enabled
def forward(x, training=True):
    with lg.set_grad_enabled(training):
        y = x**2
        return y


y = forward(x, training=False)
print(y.requires_grad)  # False

# inference_mode
model = lg.nn.Linear(3, 2)
with lg.inference_mode():
    y = model(x)
print(y.requires_grad)  # False


# gradcheck and gradgradcheck
def my_func(x):
    return x**2


x = lg.randn(3, 4, dtype=lg.double, requires_grad=True)
test = gradcheck(my_func, x, eps=1e-6, atol=1e-4)
print(f"Gradcheck passed: {test}")


def my_func3(x):
    return (x**3).sum()


x = lg.randn(3, 4, dtype=lg.double, requires_grad=True)
test = gradgradcheck(my_func3, x)
print(f"Gradgradcheck passed: {test}")

# anomaly detection
x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
with lg.autograd.detect_anomaly():
    y = x**2
    z = y.sum()
    z.backward()
lg.autograd.set_detect_anomaly(True)
lg.autograd.set_detect_anomaly(False)


# custom Function
class MySquare(Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input**2

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        grad_input = 2 * input * grad_output
        return grad_input


x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = MySquare.apply(x)
y.sum().backward()
print(x.grad)  # tensor([2., 4., 6.])

# gradients accumulate
x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x.sum()
y.backward()
print(x.grad)  # tensor([1., 1., 1.])
y = x.sum()
y.backward()
print(x.grad)  # tensor([2., 2., 2.])
x.grad.zero_()
x.grad = None

# gradients of gradients
x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x**3
grad_x = lg.autograd.grad(outputs=y, inputs=x, grad_outputs=lg.ones_like(y), create_graph=True)[0]
grad_grad_x = lg.autograd.grad(outputs=grad_x, inputs=x, grad_outputs=lg.ones_like(grad_x))[0]
print(grad_x)  # tensor([3., 12., 27.], grad_fn=...)
print(grad_grad_x)  # tensor([6., 12., 18.])


# checkpointing
def custom_forward(x, y):
    z = x * y
    z = z**2
    return z


x = lg.randn(100, 100, requires_grad=True)
y = lg.randn(100, 100, requires_grad=True)
z = custom_forward(x, y)
z = checkpoint(custom_forward, x, y)
z.sum().backward()


# jacobian and hessian
def f(x):
    return x**2


x = lg.tensor([1.0, 2.0, 3.0])
jac = jacobian(f, x)
print(jac)  # diag([2., 4., 6.])
hess = hessian(lambda x: f(x).sum(), x)
print(hess)  # diag([2., 2., 2.])

# performance tips
model.zero_grad(set_to_none=True)

# in-place operations can cause errors
x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x**2
y += 1
y = y + 1

# detach when mixing autograd and NumPy
x = lg.randn(3, requires_grad=True)
y = x.detach().numpy()
print(type(y).__name__)  # ndarray
