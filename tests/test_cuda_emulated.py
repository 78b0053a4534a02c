"""CUDA tensors end to end on the grid emulator (`LLGRAD_CUDA_EMULATE=1`): every GPU
kernel these programs need runs on the host through the same code path a GPU call takes
(device memory, copies, one-op graphs for eager ops, compiled graphs), and results are
compared with the CPU path and with torch."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

F = lg.nn.functional


pytestmark = pytest.mark.usefixtures("cuda_emulator")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_device_tensor_basics():
    x = lg.tensor(rand(3, 4), device="cuda")
    assert x.is_cuda and not x.is_cpu and x.device == lg.device("cuda", 0)
    assert x.get_device() == 0
    assert str(x.device) == "cuda:0"
    np.testing.assert_array_equal(x.cpu().numpy(), rand(3, 4))
    assert "device='cuda:0'" in repr(x)
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        x.numpy()
    assert lg.tensor(2.5, device="cuda").item() == 2.5
    assert lg.zeros(2, 3, device="cuda").is_cuda
    assert lg.ones_like(x).is_cuda and lg.ones_like(x).shape == (3, 4)
    y = lg.tensor(rand(3, 4)).to("cuda")
    assert y.is_cuda and y.to("cpu").__class__ is lg.Tensor
    assert x.to(lg.float64).dtype is lg.float64 and x.to(lg.float64).is_cuda


def test_mixing_devices_raises_torchs_error():
    x = lg.tensor(rand(3, 4), device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + lg.tensor(rand(3, 4))
    # a one-element CPU tensor is a number, as in PyTorch
    np.testing.assert_allclose((x * lg.tensor(2.0)).cpu().numpy(), rand(3, 4) * 2)


@pytest.mark.parametrize("fn", [
    lambda x: lg.sin(x) * 2 + 1,
    lambda x: lg.exp(x).sum(-1),
    lambda x: x.amax(0),
    lambda x: lg.softmax(x, -1),
    lambda x: F.layer_norm(x, (x.shape[-1],)),
    lambda x: x.t() @ x,
    lambda x: (x[:, 1:3] * 2).sum(),
    lambda x: x.reshape(-1).cumsum(0) if False else x.reshape(2, -1).mean(1),
])
def test_eager_ops_match_cpu(fn):
    a = rand(6, 10)
    got = fn(lg.tensor(a, device="cuda"))
    want = fn(lg.tensor(a))
    assert got.is_cuda
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_autograd_through_cuda_ops_matches_torch():
    torch = pytest.importorskip("torch")
    X, Wn = rand(6, 9), rand(9, 4, seed=1)
    labels = np.array([0, 1, 2, 3, 0, 1])
    x = lg.tensor(X, device="cuda", requires_grad=True)
    w = lg.tensor(Wn, device="cuda", requires_grad=True)
    loss = F.cross_entropy(F.layer_norm(lg.tanh(x) @ w, (4,)),
                           lg.tensor(labels, device="cuda"))
    loss.backward()
    tx = torch.tensor(X, requires_grad=True)
    tw = torch.tensor(Wn, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(
        torch.nn.functional.layer_norm(torch.tanh(tx) @ tw, (4,)), torch.tensor(labels))
    tl.backward()
    assert abs(loss.item() - tl.item()) < 1e-5
    assert x.grad.is_cuda and w.grad.is_cuda
    np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w.grad.cpu().numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_gradient_flows_through_device_copies():
    a = lg.tensor(rand(5), requires_grad=True)
    (a.cuda() * 3).sum().backward()
    assert a.grad.__class__ is lg.Tensor
    np.testing.assert_allclose(a.grad.numpy(), np.full(5, 3.0))


def test_in_place_ops_on_cuda_tensors():
    x = lg.tensor(rand(4, 5), device="cuda")
    version = x._version
    x.add_(1).mul_(2)
    assert x._version > version
    np.testing.assert_allclose(x.cpu().numpy(), (rand(4, 5) + 1) * 2, rtol=1e-6)
    w = lg.tensor(rand(4, 5), device="cuda", requires_grad=True)
    with lg.no_grad():
        w -= 0.5 * lg.ones_like(w)
    np.testing.assert_allclose(w.detach().cpu().numpy(), rand(4, 5) - 0.5, rtol=1e-6)


@pytest.mark.parametrize("workload", ["B1", "B6", "B8"])
def test_compiled_value_and_grad_matches_cpu(workload):
    from benchmarks import peers
    arrays = peers.inputs(workload, True)
    f, wrt, const = peers.loss_fn(workload, peers._llgrad_ops(lg), True)
    vg = lg.compile(lg.value_and_grad(f, argnums=tuple(range(len(wrt)))))
    host = [lg.tensor(arrays[k]) for k in wrt + const]
    dev = [t.cuda() for t in host]
    v, grads = vg(*dev)
    v_ref, grads_ref = vg(*host)
    assert v.is_cuda and all(g.is_cuda for g in grads)
    np.testing.assert_allclose(v.item(), v_ref.item(), rtol=1e-4)
    for g, r in zip(grads, grads_ref):
        np.testing.assert_allclose(g.cpu().numpy(), r.numpy(), rtol=1e-4, atol=1e-5)


def test_module_cuda_training_matches_cpu():
    nn = lg.nn
    lg.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    ref = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    ref.load_state_dict(model.state_dict())
    weight = model[0].weight
    model.cuda()
    assert model[0].weight is weight                 # the Parameter object is kept
    assert isinstance(weight, nn.Parameter) and weight.is_cuda
    opt = lg.optim.Adam(model.parameters(), lr=1e-2)
    opt_ref = lg.optim.Adam(ref.parameters(), lr=1e-2)
    X, y = rand(16, 20), np.arange(16) % 5
    for _ in range(3):
        for m, o, dev in ((model, opt, "cuda"), (ref, opt_ref, "cpu")):
            o.zero_grad()
            loss = F.cross_entropy(m(lg.tensor(X, device=dev)), lg.tensor(y, device=dev))
            loss.backward()
            o.step()
    np.testing.assert_allclose(model[2].weight.detach().cpu().numpy(),
                               ref[2].weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    model.cpu()
    assert model[0].weight.__class__ is nn.Parameter and model[0].weight is weight


def test_inspect_target_cuda_gives_ptx_without_a_gpu():
    f = lg.compile(lambda x, w: (lg.tanh(x @ w)).sum())
    r = f.inspect(lg.randn(64, 128), lg.randn(128, 32), target="cuda")
    assert r.target == "cuda" and ".entry" in r.ptx and ".target sm_80" in r.ptx
    assert any("cuBLAS" in str(k) for k in r.kernels)
    assert "GPU launches" in str(r)


def test_compiled_training_step_with_cuda_module_matches_cpu():
    """A compiled step (zero_grad, backward, SGD step inside) on a module moved to the
    device: the updates are written back into the CUDA parameters."""
    nn = lg.nn
    results = []
    for dev in ("cuda", "cpu"):
        lg.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)
        opt = lg.optim.SGD(model.parameters(), lr=0.1)

        @lg.compile
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        x = lg.tensor(rand(8, 12), device=dev)
        y = lg.tensor(np.arange(8) % 3, device=dev)
        losses = [step(x, y).item() for _ in range(3)]
        assert step.graph_breaks == []
        results.append((losses, model[2].weight.detach().cpu().numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)


def test_views_share_device_memory_and_index_gradients():
    x = lg.tensor(rand(4, 6), device="cuda")
    for view in (x.t(), x.reshape(24), x.unsqueeze(0).expand(2, 4, 6), x[:, 1:3], x[2]):
        assert view.is_cuda and view._storage is x._storage
    x[:, 1:3].zero_()                                # a write through a view
    expect = rand(4, 6)
    expect[:, 1:3] = 0
    np.testing.assert_allclose(x.cpu().numpy(), expect)
    picked = x[lg.tensor([0, 2], device="cuda")]     # advanced index: a kernel, a copy
    assert picked._storage is not x._storage
    np.testing.assert_allclose(picked.cpu().numpy(), expect[[0, 2]])
    a = lg.tensor(rand(5, 3), device="cuda", requires_grad=True)
    (a[1:4] * 3).sum().backward()
    np.testing.assert_allclose(a.grad.cpu().numpy()[:, 0], [0, 3, 3, 3, 0])
    b = lg.tensor(rand(5, 3), device="cuda", requires_grad=True)
    (b[lg.tensor([0, 0, 4], device="cuda")] * 2).sum().backward()
    np.testing.assert_allclose(b.grad.cpu().numpy()[:, 0], [4, 0, 0, 0, 2])


@pytest.mark.parametrize("fn", [
    lambda x: x.sort(1)[0], lambda x: x.topk(2, 1)[0],
    lambda x: F.avg_pool2d(x.reshape(1, 1, 6, 10), 2),
    lambda x: F.scaled_dot_product_attention(x.reshape(2, 3, 10), x.reshape(2, 3, 10),
                                             x.reshape(2, 3, 10), is_causal=True),
    lambda x: F.max_pool2d(x.reshape(1, 1, 6, 10), 2),
    lambda x: F.conv2d(x.reshape(1, 1, 6, 10), x[:1, :9].reshape(1, 1, 3, 3)),
])
def test_functions_beside_the_registry_on_cuda_match_cpu(fn):
    a = rand(6, 10)
    got = fn(lg.tensor(a, device="cuda"))
    want = fn(lg.tensor(a))
    assert got.is_cuda
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
