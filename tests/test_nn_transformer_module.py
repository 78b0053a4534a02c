"""Transformer layers and the Module API against torch: same state dicts give the same
outputs and gradients (train with dropout 0, and eval), masks, key padding, batch_first,
norm_first, activations; hooks, state-dict loading, containers, lazy modules."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import llgrad as lg

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
E, H, FF = 8, 2, 12


def _copy_state(ml, mt):
    """torch's state dict into the llgrad module (float64 both)."""
    mt.double()
    ml.double()
    ml.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})


def _run(module, lib, inputs, kwargs):
    xs = [lib.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) and
          a.dtype == np.float64 else a for a in inputs]
    kw = {k: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    out = module(*xs, **kw)
    weights = lib.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)))
    (out * weights).sum().backward()
    grads = [x.grad.numpy() for x in xs if hasattr(x, "grad")]
    pgrads = {n: p.grad.numpy() for n, p in module.named_parameters() if p.grad is not None}
    return out.detach().numpy(), grads, pgrads


def _compare(ml, mt, inputs, kwargs, tol=1e-9):
    ol, gl, pl = _run(ml, lg, inputs, kwargs)
    ot, gt, pt = _run(mt, torch, inputs, kwargs)
    np.testing.assert_allclose(ol, ot, rtol=tol, atol=tol)
    for a, b in zip(gl, gt):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    assert set(pl) == set(pt)
    for k in pl:
        np.testing.assert_allclose(pl[k], pt[k], rtol=tol, atol=tol, err_msg=k)


CAUSAL = np.triu(np.full((5, 5), -np.inf), 1)
PAD = np.array([[False, False, False, True, True], [False] * 5, [False, False, False, False,
                                                                 True]])

ENCODER_CASES = [
    (dict(), {}, False),
    (dict(norm_first=True, activation="gelu"), {}, False),
    (dict(batch_first=True), dict(src_key_padding_mask=PAD), False),
    (dict(), dict(src_mask=CAUSAL, is_causal=True), False),
    (dict(activation="gelu"), dict(src_mask=CAUSAL != 0), False),
    (dict(bias=False), dict(src_key_padding_mask=PAD), False),
    (dict(), {}, True),
]


@pytest.mark.parametrize("kw,fkw,unbatched", ENCODER_CASES, ids=str)
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_encoder_layer_matches_torch(kw, fkw, unbatched, mode):
    torch.manual_seed(0)
    mt = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, **kw)
    ml = lg.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, **kw)
    assert list(ml.state_dict()) == list(mt.state_dict())
    _copy_state(ml, mt)
    getattr(ml, mode)()
    getattr(mt, mode)()
    shape = (5, E) if unbatched else ((3, 5, E) if kw.get("batch_first") else (5, 3, E))
    _compare(ml, mt, [RNG.standard_normal(shape)], fkw)


DECODER_CASES = [
    (dict(), {}),
    (dict(norm_first=True), dict(tgt_mask=CAUSAL[:4, :4], tgt_is_causal=True)),
    (dict(batch_first=True), dict(tgt_key_padding_mask=PAD[:, :4],
                                  memory_key_padding_mask=PAD)),
    (dict(activation="gelu"), dict(memory_mask=RNG.standard_normal((4, 5)))),
]


@pytest.mark.parametrize("kw,fkw", DECODER_CASES, ids=str)
def test_decoder_layer_matches_torch(kw, fkw):
    torch.manual_seed(1)
    mt = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, **kw)
    ml = lg.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, **kw)
    assert list(ml.state_dict()) == list(mt.state_dict())
    _copy_state(ml, mt)
    bf = kw.get("batch_first")
    tgt = RNG.standard_normal((3, 4, E) if bf else (4, 3, E))
    mem = RNG.standard_normal((3, 5, E) if bf else (5, 3, E))
    _compare(ml, mt, [tgt, mem], fkw)


@pytest.mark.parametrize("kw", [dict(), dict(batch_first=True, norm_first=True)], ids=str)
def test_transformer_matches_torch(kw):
    torch.manual_seed(2)
    mt = torch.nn.Transformer(E, H, 2, 2, FF, dropout=0.0, **kw)
    ml = lg.nn.Transformer(E, H, 2, 2, FF, dropout=0.0, **kw)
    assert list(ml.state_dict()) == list(mt.state_dict())
    _copy_state(ml, mt)
    bf = kw.get("batch_first")
    src = RNG.standard_normal((3, 5, E) if bf else (5, 3, E))
    tgt = RNG.standard_normal((3, 4, E) if bf else (4, 3, E))
    mask = lg.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(mask.numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    _compare(ml, mt, [src, tgt], dict(tgt_mask=mask.numpy().astype(np.float64)))


def test_encoder_stack_with_module_activation_and_padding():
    torch.manual_seed(3)
    layer_t = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0,
                                               activation=torch.nn.GELU())
    mt = torch.nn.TransformerEncoder(layer_t, 2, norm=torch.nn.LayerNorm(E),
                                     enable_nested_tensor=False)
    ml = lg.nn.TransformerEncoder(lg.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0,
                                                                activation=lg.nn.GELU()),
                                  2, norm=lg.nn.LayerNorm(E), enable_nested_tensor=False)
    assert list(ml.state_dict()) == list(mt.state_dict())
    assert repr(ml).replace("llgrad", "torch") == \
        repr(mt).replace("NonDynamicallyQuantizableLinear", "Linear")
    _copy_state(ml, mt)
    mt.eval()
    ml.eval()
    _compare(ml, mt, [RNG.standard_normal((5, 3, E))], dict(src_key_padding_mask=PAD,
                                                            mask=CAUSAL))


def test_transformer_dropout_and_errors():
    m = lg.nn.Transformer(E, H, 1, 1, FF, dropout=0.5)
    src, tgt = lg.randn(5, 3, E), lg.randn(4, 3, E)
    m.train()
    a, b = m(src, tgt), m(src, tgt)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    m.eval()
    np.testing.assert_array_equal(m(src, tgt).detach().numpy(), m(src, tgt).detach().numpy())
    with pytest.raises(RuntimeError, match="batch number"):
        m(src, lg.randn(4, 2, E))
    with pytest.raises(RuntimeError, match="d_model"):
        m(lg.randn(5, 3, 4), lg.randn(4, 3, 4))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        lg.nn.TransformerEncoderLayer(E, H, activation="tanh")


def test_transformer_parameters_initialized_as_torch():
    m = lg.nn.Transformer(E, H, 1, 1, FF)
    w = m.encoder.layers[0].linear1.weight.detach().numpy()
    bound = math.sqrt(6.0 / (E + FF))                     # xavier_uniform_
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound
    assert m.encoder.layers[0].self_attn.in_proj_bias.abs().sum().item() == 0


# --------------------------------------------------------------------------------------
# Module API
# --------------------------------------------------------------------------------------

class _Net(lg.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = lg.nn.Linear(3, 4)
        self.block = lg.nn.Sequential(lg.nn.Linear(4, 4), lg.nn.ReLU())
        self.register_buffer("steps", lg.zeros(()))
        self.register_buffer("scratch", lg.ones(2), persistent=False)

    def forward(self, x, scale=1.0):
        return self.block(self.fc(x)) * scale


class _TNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        self.register_buffer("steps", torch.zeros(()))
        self.register_buffer("scratch", torch.ones(2), persistent=False)

    def forward(self, x, scale=1.0):
        return self.block(self.fc(x)) * scale


def test_traversal_names_and_state_dict_match_torch():
    ml, mt = _Net(), _TNet()
    for meth, kw in [("named_modules", {}), ("named_children", {}),
                     ("named_parameters", {}), ("named_parameters", dict(prefix="p")),
                     ("named_parameters", dict(recurse=False)), ("named_buffers", {}),
                     ("named_buffers", dict(prefix="m", recurse=True))]:
        assert [n for n, _ in getattr(ml, meth)(**kw)] == [n for n, _ in getattr(mt, meth)(**kw)]
    assert list(ml.state_dict()) == list(mt.state_dict())
    assert list(ml.state_dict(prefix="x.")) == list(mt.state_dict(prefix="x."))
    assert ml.state_dict()._metadata == mt.state_dict()._metadata
    assert ml.state_dict(keep_vars=True)["fc.weight"] is ml.fc.weight
    assert ml.state_dict()["fc.weight"] is not ml.fc.weight
    assert repr(ml).replace("llgrad", "torch") == repr(mt).replace("_TNet", "_Net")
    assert ml.get_submodule("block.0") is ml.block[0]
    assert ml.get_parameter("block.0.bias") is ml.block[0].bias
    assert ml.get_buffer("steps") is ml.steps
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        ml.get_submodule("block.nope")
    with pytest.raises(AttributeError, match="not a buffer"):
        ml.get_buffer("fc.weight")
    with pytest.raises(AttributeError, match="not an nn.Parameter"):
        ml.get_parameter("steps")
    assert "fc" in dir(ml) and "steps" in dir(ml) and "0" not in dir(ml.block)


def test_shared_parameters_and_remove_duplicate():
    lin = lg.nn.Linear(2, 2)
    seq = lg.nn.Sequential(lin, lin)
    tl = torch.nn.Linear(2, 2)
    tseq = torch.nn.Sequential(tl, tl)
    for kw in [{}, dict(remove_duplicate=False)]:
        assert [n for n, _ in seq.named_parameters(**kw)] == \
            [n for n, _ in tseq.named_parameters(**kw)]
        assert [n for n, _ in seq.named_modules(**kw)] == [n for n, _ in tseq.named_modules(**kw)]


def test_load_state_dict_strict_assign_and_messages():
    ml, mt = _Net(), _TNet()
    sd = {k: lg.tensor(v.numpy()) for k, v in mt.state_dict().items()}
    res = ml.load_state_dict(sd)
    assert repr(res) == repr(mt.load_state_dict(mt.state_dict())) == \
        "<All keys matched successfully>"
    np.testing.assert_array_equal(ml.fc.weight.detach().numpy(), mt.fc.weight.detach().numpy())
    bad = dict(sd)
    del bad["fc.bias"]
    bad["extra.w"] = lg.zeros(1)
    bad["fc.weight"] = lg.zeros(3, 3)
    tbad = {k: torch.tensor(v.numpy()) for k, v in bad.items()}
    with pytest.raises(RuntimeError) as el:
        ml.load_state_dict(bad)
    with pytest.raises(RuntimeError) as et:
        mt.load_state_dict(tbad)
    assert str(el.value).replace("llgrad", "torch") == str(et.value).replace("_TNet", "_Net")
    del bad["fc.weight"]
    del tbad["fc.weight"]
    rl, rt = ml.load_state_dict(bad, strict=False), mt.load_state_dict(tbad, strict=False)
    assert rl == rt and repr(rl) == repr(rt)
    w = ml.fc.weight
    new = lg.randn(4, 3)
    ml.load_state_dict({"fc.weight": new}, strict=False, assign=True)
    assert ml.fc.weight is not w and isinstance(ml.fc.weight, lg.nn.Parameter)
    np.testing.assert_array_equal(ml.fc.weight.detach().numpy(), new.numpy())


def test_state_dict_and_load_hooks():
    m = lg.nn.Linear(2, 2)
    seen = []
    m.register_state_dict_pre_hook(lambda mod, prefix, keep: seen.append(("pre", prefix)))
    m.register_state_dict_post_hook(lambda mod, sd, prefix, meta:
                                    [sd.pop(prefix + "bias"), None][1])
    assert list(m.state_dict()) == ["weight"] and seen == [("pre", "")]
    m.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear())
    assert m.load_state_dict({"weight": lg.zeros(2, 2)}).missing_keys == []


class _Extra(lg.nn.Module):
    def __init__(self):
        super().__init__()
        self.value = 3

    def get_extra_state(self):
        return {"value": self.value}

    def set_extra_state(self, state):
        self.value = state["value"]


def test_extra_state_round_trips():
    a, b = _Extra(), _Extra()
    a.value = 7
    sd = a.state_dict()
    assert list(sd) == ["_extra_state"]
    b.load_state_dict(sd)
    assert b.value == 7


def test_forward_hooks_with_kwargs_prepend_always_call():
    ml = _Net()
    calls = []
    h1 = ml.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 2,))
    h2 = ml.register_forward_pre_hook(
        lambda m, args, kwargs: calls.append("pre_kw") or (args, {"scale": 0.5}),
        with_kwargs=True, prepend=True)
    h3 = ml.register_forward_hook(lambda m, args, kwargs, out: calls.append(("post", kwargs))
                                  or out + 1, with_kwargs=True)
    x = lg.randn(2, 3)
    out = ml(x)
    expect = ml.forward(x * 2, scale=0.5) + 1
    np.testing.assert_allclose(out.detach().numpy(), expect.detach().numpy(), rtol=1e-6)
    assert calls == ["pre_kw", "pre", ("post", {"scale": 0.5})]
    for h in (h1, h2, h3):
        h.remove()
    calls.clear()
    ml(x)
    assert calls == []

    class Boom(lg.nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    b = Boom()
    b.register_forward_hook(lambda m, a, o: calls.append("always"), always_call=True)
    b.register_forward_hook(lambda m, a, o: calls.append("normal"))
    with pytest.raises(ValueError, match="boom"):
        b(x)
    assert calls == ["always"]


def test_full_backward_hooks_match_torch():
    rec = {}
    for lib in (torch, lg):
        torch.manual_seed(0)
        lin = lib.nn.Linear(3, 2).double()
        if lib is lg:
            lin.load_state_dict({k: lg.tensor(v.numpy()) for k, v in rec["sd"].items()})
        else:
            rec["sd"] = lin.state_dict()
        got = []

        def pre(m, gout, got=got):
            got.append(("pre", [g.numpy().copy() for g in gout]))
            return (gout[0] * 2,)

        def post(m, gin, gout, got=got):
            got.append(("post", [None if g is None else g.numpy().copy() for g in gin],
                        [g.numpy().copy() for g in gout]))
            return (gin[0] * 3,)
        lin.register_full_backward_pre_hook(pre)
        lin.register_full_backward_hook(post)
        rec.setdefault("x", RNG.standard_normal((4, 3)))
        x = lib.tensor(rec["x"], requires_grad=True)
        lin(x).sum().backward()
        rec[lib] = (got, x.grad.numpy(), lin.weight.grad.numpy())
    gl, gt = rec[lg], rec[torch]
    assert [g[0] for g in gl[0]] == [g[0] for g in gt[0]] == ["pre", "post"]
    for a, b in zip(gl[0][0][1] + gl[0][1][1] + gl[0][1][2],
                    gt[0][0][1] + gt[0][1][1] + gt[0][1][2]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(gl[1], gt[1], rtol=1e-12)
    np.testing.assert_allclose(gl[2], gt[2], rtol=1e-12)


def test_backward_hook_when_no_input_requires_grad():
    lin = lg.nn.Linear(3, 2)
    got = []
    lin.register_full_backward_hook(lambda m, gin, gout: got.append((gin, len(gout))))
    lin(lg.randn(4, 3)).sum().backward()
    assert got == [((None,), 1)]


def test_setattr_delattr_dtype_conversion_and_modes():
    m = _Net()
    with pytest.raises(TypeError, match="cannot assign"):
        m.fc = 3
    with pytest.raises(TypeError, match="as parameter"):
        m.fc.weight = lg.zeros(4, 3)
    m.fc.bias = None
    assert m.fc.bias is None and "bias" in m.fc._parameters
    m.steps = lg.ones(())
    assert "steps" in m._buffers
    del m.steps
    assert "steps" not in m._buffers and not hasattr(m, "steps")
    w = m.fc.weight
    m.double()
    assert m.fc.weight is w and m.fc.weight.dtype is lg.float64
    m.half().float()
    assert m.block[0].weight.dtype is lg.float32
    m.eval()
    assert not m.training and not m.block[1].training
    m.train()
    assert all(x.training for x in m.modules())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.register_module("extra", lg.nn.Tanh())
    assert m.extra.__class__.__name__ == "Tanh"
    with pytest.raises(KeyError, match="attribute 'fc' already exists"):
        m.register_buffer("fc", lg.zeros(1))
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "_Net" and seen[0] == "Linear"
    assert m.share_memory() is m
    m.set_submodule("block.1", lg.nn.GELU())
    assert isinstance(m.block[1], lg.nn.GELU)


def test_zero_grad_set_to_none():
    m = lg.nn.Linear(2, 2)
    m(lg.randn(3, 2)).sum().backward()
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is not None and m.weight.grad.abs().sum().item() == 0
    m.zero_grad()
    assert m.weight.grad is None


# --------------------------------------------------------------------------------------
# containers
# --------------------------------------------------------------------------------------

def test_sequential_operations_match_torch():
    def build(lib):
        return lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU(), lib.nn.Tanh())
    sl, st = build(lg), build(torch)
    for s, lib in ((sl, lg), (st, torch)):
        s.append(lib.nn.Sigmoid())
        s.insert(1, lib.nn.GELU())
        s.extend([lib.nn.Identity()])
        s.pop(0)
        del s[1]
        s += lib.nn.Sequential(lib.nn.ReLU6())
    assert repr(sl).replace("llgrad", "torch") == repr(st)
    assert repr(sl[1:3]) == repr(st[1:3])
    assert repr(sl * 2) == repr(st * 2)
    assert repr(sl + sl[:1]) == repr(st + st[:1])
    with pytest.raises(IndexError):
        sl[10]
    with pytest.raises(ValueError, match="Non-positive"):
        sl * 0


def test_modulelist_moduledict_repr_and_ops():
    ll = lg.nn.ModuleList([lg.nn.Linear(2, 2) for _ in range(3)] + [lg.nn.ReLU()])
    tl = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU()])
    assert repr(ll) == repr(tl)
    ll.insert(0, lg.nn.Tanh())
    tl.insert(0, torch.nn.Tanh())
    assert repr(ll) == repr(tl)
    assert isinstance(ll.pop(1), lg.nn.Linear) and len(ll) == 4
    ll.extend([lg.nn.ReLU()])
    assert len(ll) == 5 and isinstance(ll[-1], lg.nn.ReLU)
    d = lg.nn.ModuleDict({"a": lg.nn.ReLU()})
    d.update([("b", lg.nn.Tanh())])
    assert list(d.keys()) == ["a", "b"] and isinstance(d.pop("a"), lg.nn.ReLU)
    with pytest.raises(ValueError, match="length 3"):
        d.update([("x", 1, 2)])


def test_parameter_list_and_dict_match_torch():
    pl = lg.nn.ParameterList([lg.nn.Parameter(lg.randn(2, 3)), lg.randn(4)])
    tp = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(2, 3)), torch.randn(4)])
    assert repr(pl).replace("llgrad", "torch") == repr(tp)
    pl.append(lg.randn(1))
    tp.append(torch.randn(1))
    assert [n for n, _ in pl.named_parameters()] == [n for n, _ in tp.named_parameters()]
    assert isinstance(pl[1], lg.nn.Parameter) and len(pl[1:]) == 2
    pd = lg.nn.ParameterDict({"b": lg.randn(2), "a": lg.randn(3)})
    td = torch.nn.ParameterDict({"b": torch.randn(2), "a": torch.randn(3)})
    assert list(pd.state_dict()) == list(td.state_dict())
    assert repr(pd).replace("llgrad", "torch") == repr(td)
    pd["c"] = lg.nn.Parameter(lg.zeros(1))
    assert "c" in pd and pd.pop("c").shape == (1,) and "c" not in pd
    assert list((pd | lg.nn.ParameterDict({"z": lg.zeros(1)})).keys()) == ["a", "b", "z"]
    assert pd.get("nope", 5) == 5 and pd.setdefault("q", lg.ones(1)).shape == (1,)


# --------------------------------------------------------------------------------------
# misc layers
# --------------------------------------------------------------------------------------

def _module_pair(name, *args, **kw):
    mt = getattr(torch.nn, name)(*args, **kw)
    ml = getattr(lg.nn, name)(*args, **kw)
    assert repr(ml) == repr(mt)
    assert list(ml.state_dict()) == list(mt.state_dict())
    mt.double()
    ml.double()
    ml.load_state_dict({k: lg.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    return ml, mt


def _both_module(ml, mt, arrays, kwargs_l=None, kwargs_t=None, tol=1e-10):
    outs = {}
    for lib, m, kw in ((lg, ml, kwargs_l or {}), (torch, mt, kwargs_t or {})):
        xs = [lib.tensor(a, requires_grad=a.dtype == np.float64) for a in arrays]
        out = m(*xs, **kw)
        (out * lib.tensor(np.sin(np.arange(out.numel())).reshape(tuple(out.shape)))
         ).sum().backward()
        outs[lib] = [out.detach().numpy()] + [x.grad.numpy() for x in xs if x.requires_grad] + \
            [p.grad.numpy() for p in m.parameters() if p.grad is not None]
    assert len(outs[lg]) == len(outs[torch])
    for a, b in zip(outs[lg], outs[torch]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_bilinear_matches_torch():
    ml, mt = _module_pair("Bilinear", 3, 4, 5)
    _both_module(ml, mt, [RNG.standard_normal((2, 6, 3)), RNG.standard_normal((2, 6, 4))])
    ml, mt = _module_pair("Bilinear", 3, 4, 5, bias=False)
    _both_module(ml, mt, [RNG.standard_normal((6, 3)), RNG.standard_normal((6, 4))])


BAGS = [
    dict(mode="sum"), dict(mode="mean"), dict(mode="max"),
    dict(mode="mean", padding_idx=2), dict(mode="max", padding_idx=0),
    dict(mode="sum", include_last_offset=True),
]


def test_embedding_bag_scale_grad_by_freq_divides_by_each_index_count():
    # torch 2.13's embedding_bag misplaces the counts (an index used once gets 1/2 when
    # its neighbour is used twice); llgrad divides by each index's own count, as
    # F.embedding does
    w = lg.ones(4, 2, requires_grad=True)
    lg.nn.functional.embedding_bag(lg.tensor([0, 0, 1, 3]), w, lg.tensor([0]), mode="sum",
                                   scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[1, 1], [1, 1], [0, 0], [1, 1]])


@pytest.mark.parametrize("kw", BAGS, ids=str)
def test_embedding_bag_matches_torch(kw):
    ml, mt = _module_pair("EmbeddingBag", 10, 3, **kw)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
    off = np.array([0, 2, 2, 6, 10]) if kw.get("include_last_offset") else np.array([0, 2, 2, 6])
    outs = {}
    for lib, m in ((lg, ml), (torch, mt)):
        out = m(lib.tensor(idx), lib.tensor(off))
        (out * lib.tensor(np.arange(out.numel()).reshape(tuple(out.shape)) % 5)).sum().backward()
        outs[lib] = (out.detach().numpy(), m.weight.grad.numpy())
    for a, b in zip(outs[lg], outs[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_embedding_bag_2d_per_sample_weights_and_errors():
    w = RNG.standard_normal((6, 4))
    idx = np.array([[0, 2, 5], [1, 1, 3]])
    psw = RNG.standard_normal((2, 3))
    res = {}
    for lib, F in ((lg, lg.nn.functional), (torch, torch.nn.functional)):
        wt, pt = lib.tensor(w, requires_grad=True), lib.tensor(psw, requires_grad=True)
        out = F.embedding_bag(lib.tensor(idx), wt, mode="sum", per_sample_weights=pt)
        (out * out).sum().backward()
        res[lib] = (out.detach().numpy(), wt.grad.numpy(), pt.grad.numpy())
    for a, b in zip(res[lg], res[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    F = lg.nn.functional
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        F.embedding_bag(lg.tensor(idx), lg.tensor(w), mode="mean",
                        per_sample_weights=lg.tensor(psw))
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(lg.tensor(idx), lg.tensor(w), lg.tensor([0]))
    with pytest.raises(RuntimeError, match="offsets\\[0\\]"):
        F.embedding_bag(lg.tensor([1, 2]), lg.tensor(w), lg.tensor([1]))


def test_embedding_options_match_torch():
    w = RNG.standard_normal((6, 3))
    for kw in [dict(padding_idx=1), dict(max_norm=1.0), dict(scale_grad_by_freq=True)]:
        res = {}
        for lib in (lg, torch):
            e = lib.nn.Embedding.from_pretrained(lib.tensor(w.copy()), freeze=False, **kw)
            out = e(lib.tensor([[1, 2, 2], [4, 1, 0]]))
            (out * out).sum().backward()
            res[lib] = (out.detach().numpy(), e.weight.grad.numpy(), e.weight.detach().numpy())
            assert repr(e).replace("llgrad", "torch") == repr(e) or lib is torch
        for a, b in zip(res[lg], res[torch]):
            np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("name,args,shapes", [
    ("CosineSimilarity", (), [(4, 5), (4, 5)]), ("CosineSimilarity", (0,), [(4, 5), (1, 5)]),
    ("PairwiseDistance", (), [(4, 5), (4, 5)]), ("PairwiseDistance", (1.0, 1e-3, True),
                                                 [(4, 5), (4, 5)]),
    ("Unflatten", (1, (2, 3)), [(4, 6, 2)]), ("Unflatten", (-1, (2, -1)), [(4, 6)]),
    ("Flatten", (0, 1), [(2, 3, 4)]), ("ChannelShuffle", (2,), [(2, 4, 3, 3)]),
    ("Identity", (), [(3,)])], ids=str)
def test_misc_modules_match_torch(name, args, shapes):
    ml, mt = _module_pair(name, *args)
    _both_module(ml, mt, [RNG.standard_normal(s) for s in shapes])


# --------------------------------------------------------------------------------------
# lazy modules
# --------------------------------------------------------------------------------------

def test_lazy_linear_materializes_on_first_forward():
    m = lg.nn.LazyLinear(5)
    assert m.has_uninitialized_params()
    out = m(lg.randn(2, 7))
    assert out.shape == (2, 5) and m.weight.shape == (5, 7) and m.in_features == 7
    assert type(m) is lg.nn.Linear and not m.has_uninitialized_params() \
        if hasattr(m, "has_uninitialized_params") else type(m) is lg.nn.Linear
    opt = lg.optim.SGD(m.parameters(), lr=0.1)
    m(lg.randn(2, 7)).sum().backward()
    opt.step()


def test_lazy_linear_loads_state_dict_of_its_shape():
    src = lg.nn.Linear(4, 3)
    m = lg.nn.LazyLinear(3)
    m.load_state_dict(src.state_dict())
    np.testing.assert_array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())
    x = lg.randn(2, 4)
    np.testing.assert_allclose(m(x).detach().numpy(), src(x).detach().numpy())


def test_deepcopy_of_module_with_hooks_keeps_tables():
    m = lg.nn.Linear(2, 2)
    m.register_forward_hook(lambda mod, a, o: o * 0)
    c = copy.deepcopy(m)
    assert c(lg.ones(1, 2)).abs().sum().item() == 0


# --- MultiheadAttention add_bias_kv / add_zero_attn ------------------------------------

def _mha_pair(**kw):
    mt = torch.nn.MultiheadAttention(E, H, **kw).double()
    ml = lg.nn.MultiheadAttention(E, H, **kw).to(lg.float64)
    ml.load_state_dict({k: lg.tensor(v.detach().numpy()) for k, v in mt.state_dict().items()})
    return ml, mt


def _mha_both(ml, mt, arrays, fkw):
    """Outputs, weights and the gradients of inputs and parameters of both modules."""
    res = {}
    for lib, m in ((lg, ml), (torch, mt)):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        kw = {k: (lib.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in fkw.items()}
        out, w = m(*xs, **kw)
        outs = [out] + ([w] if w is not None else [])
        cots = [lib.tensor(np.sin(np.arange(o.numel()) * 0.7).reshape(tuple(o.shape)))
                for o in outs]
        leaves = xs + [p for _, p in m.named_parameters()]
        grads = lib.autograd.grad(outs, leaves, cots)
        res[lib] = [o.detach().numpy() for o in outs] + [g.numpy() for g in grads]
    assert len(res[lg]) == len(res[torch])
    for a, b in zip(res[lg], res[torch]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


L_, S_, N_ = 4, 5, 3
BOOL_2D = np.triu(np.ones((L_, S_), dtype=bool), 2)
FLOAT_2D = np.where(BOOL_2D, -np.inf, 0.0) + RNG.standard_normal((L_, S_)) * 0.1
BOOL_3D = RNG.random((N_ * H, L_, S_)) < 0.3
BOOL_3D[..., 0] = False
PAD = np.array([[False] * 5, [False, False, False, True, True], [False, True] * 2 + [True]])
PAD_FLOAT = np.where(PAD, -np.inf, 0.0)

MHA_MASKS = [
    {},
    dict(attn_mask=BOOL_2D),
    dict(attn_mask=FLOAT_2D),
    dict(attn_mask=BOOL_3D),
    dict(key_padding_mask=PAD),
    dict(key_padding_mask=PAD_FLOAT),
    dict(attn_mask=BOOL_2D, key_padding_mask=PAD),
    dict(need_weights=True, average_attn_weights=False, key_padding_mask=PAD),
    dict(need_weights=False),
]


@pytest.mark.parametrize("fkw", MHA_MASKS, ids=lambda d: ",".join(sorted(d)) or "none")
@pytest.mark.parametrize("kw", [dict(add_bias_kv=True), dict(add_zero_attn=True),
                                dict(add_bias_kv=True, add_zero_attn=True),
                                dict(add_bias_kv=True, add_zero_attn=True, bias=False)],
                         ids=str)
def test_mha_bias_kv_zero_attn_match_torch(kw, fkw):
    ml, mt = _mha_pair(**kw)
    arrays = [RNG.standard_normal((L_, N_, E)), RNG.standard_normal((S_, N_, E)),
              RNG.standard_normal((S_, N_, E))]
    _mha_both(ml, mt, arrays, fkw)


@pytest.mark.parametrize("kw", [dict(add_bias_kv=True, add_zero_attn=True, batch_first=True),
                                dict(add_bias_kv=True, kdim=3, vdim=6),
                                dict(add_zero_attn=True, kdim=3, vdim=6, batch_first=True)],
                         ids=str)
def test_mha_bias_kv_zero_attn_layouts_match_torch(kw):
    ml, mt = _mha_pair(**kw)
    kd, vd = kw.get("kdim", E), kw.get("vdim", E)
    bf = kw.get("batch_first", False)
    shape = (lambda s, d: (N_, s, d)) if bf else (lambda s, d: (s, N_, d))
    arrays = [RNG.standard_normal(shape(L_, E)), RNG.standard_normal(shape(S_, kd)),
              RNG.standard_normal(shape(S_, vd))]
    _mha_both(ml, mt, arrays, dict(key_padding_mask=PAD))
    # unbatched (L, E) inputs
    arrays = [RNG.standard_normal((L_, E)), RNG.standard_normal((S_, kd)),
              RNG.standard_normal((S_, vd))]
    _mha_both(ml, mt, arrays, dict(key_padding_mask=PAD[1], attn_mask=BOOL_2D))


def test_mha_bias_kv_parameters_as_torch():
    ml, mt = _mha_pair(add_bias_kv=True, add_zero_attn=True)
    assert list(ml.state_dict()) == list(mt.state_dict())
    assert [n for n, _ in ml.named_parameters()] == [n for n, _ in mt.named_parameters()]
    assert tuple(ml.bias_k.shape) == tuple(ml.bias_v.shape) == (1, 1, E)
    assert ml.add_zero_attn is True
    plain = lg.nn.MultiheadAttention(E, H)
    assert plain.bias_k is None and plain.bias_v is None and plain.add_zero_attn is False
    assert "bias_k" not in plain.state_dict()
    # xavier_normal_ on (1, 1, E): std sqrt(2 / (E + E))
    big = lg.nn.MultiheadAttention(4096, 4, add_bias_kv=True)
    for p in (big.bias_k, big.bias_v):
        std = float(p.detach().numpy().std())
        assert abs(std - (1 / 4096) ** 0.5) < 0.1 * (1 / 4096) ** 0.5


def test_mha_bias_kv_in_encoder_layer_compiles():
    ml, mt = _mha_pair(add_bias_kv=True, add_zero_attn=True)
    x = lg.tensor(RNG.standard_normal((L_, N_, E)))

    def f(x):
        out, w = ml(x, x, x, key_padding_mask=lg.tensor(PAD[:, :L_]))
        return out.sum() + w.sum()

    np.testing.assert_allclose(lg.compile(f)(x).item(), f(x).item(), rtol=1e-9)


def test_encoder_stack_built_from_a_layer_matches_torch():
    """TransformerEncoder(layer, n) copies `layer` (as torch's ModuleInfo sample builds it)."""
    for kw in (dict(), dict(batch_first=True, norm_first=True, bias=False)):
        layer_t = torch.nn.TransformerEncoderLayer(E, H, FF, 0.0, **kw)
        layer_l = lg.nn.TransformerEncoderLayer(E, H, FF, 0.0, **kw)
        mt = torch.nn.TransformerEncoder(layer_t, 2)
        ml = lg.nn.TransformerEncoder(layer_l, 2)
        _copy_state(ml, mt)
        x = RNG.standard_normal((3, 4, E))
        pad = np.array([[False, False, True, True]] * 3) if kw else \
            np.array([[False, False, False], [False, True, True], [False] * 3, [False] * 3])
        _compare(ml, mt, [x], dict(mask=np.triu(np.ones((x.shape[1 if kw else 0],) * 2,
                                                        dtype=bool), 1),
                                   src_key_padding_mask=pad))
