"""`llgrad.onnx.export`: models traced by llgrad, written as ONNX, run in onnxruntime.

Every exported model is checked by `onnx.checker` (inside `export`) and run by onnxruntime on
the inputs llgrad ran; outputs must equal llgrad's to float32 tolerance.
"""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import llgrad as lg
import llgrad.nn as nn
import llgrad.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

RTOL, ATOL = 1e-5, 1e-5


def _param_init(model: nn.Module, seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    with lg.no_grad():
        for p in model.parameters():
            p.copy_(lg.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    return model


def export_bytes(model, args, **kw) -> bytes:
    buf = io.BytesIO()
    assert lg.onnx.export(model, args, buf, **kw) is None
    return buf.getvalue()


def run_ort(data: bytes, feeds: list[np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, feeds)))


def check_round_trip(model, args, **kw) -> onnx.ModelProto:
    data = export_bytes(model, args, **kw)
    want = model(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = run_ort(data, [a.numpy() for a in args])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.detach().numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    return onnx.load_from_string(data)


# ------------------------------------------------------------------------------------------
# models
# ------------------------------------------------------------------------------------------

class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.avg = nn.AvgPool2d(2)
        self.adapt = nn.AdaptiveAvgPool2d((1, 1))
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.adapt(self.avg(x)).flatten(1)
        return F.log_softmax(self.fc(self.drop(x)), dim=-1), F.softmax(self.fc(x), dim=1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 16)
        self.l2 = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.l3 = nn.Linear(16, 3)

    def forward(self, x):
        h = F.gelu(self.l1(x))
        h = self.norm(h + lg.tanh(self.l2(h)) * lg.sigmoid(h))
        return self.l3(h)


class Block(nn.Module):
    """A pre-LN transformer block: causal multi-head attention, GELU feed-forward."""

    def __init__(self, vocab=20, d=16, heads=4, ctx=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                                nn.Dropout(0.1))
        self.heads = heads
        self.register_buffer("mask", lg.tril(lg.ones(ctx, ctx)).bool())

    def forward(self, idx):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(lg.arange(t))
        c = x.shape[-1]
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = [z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        y2 = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y + y2.transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        x = x + self.ff(self.ln2(x))
        return x


def test_cnn_round_trip():
    model = _param_init(CNN(), 0).eval()
    model.bn1.running_mean.copy_(lg.linspace(-0.5, 0.5, 8))
    model.bn1.running_var.copy_(lg.linspace(0.5, 2.0, 8))
    x = lg.tensor(np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32))
    proto = check_round_trip(model, (x,))
    ops = {n.op_type for n in proto.graph.node}
    assert {"Conv", "MaxPool", "Gemm", "LogSoftmax", "Softmax"} <= ops
    inits = {t.name for t in proto.graph.initializer}
    assert {"conv1.weight", "conv1.bias", "bn1.running_mean", "bn1.running_var",
            "fc.weight", "fc.bias"} <= inits
    assert "bn1.num_batches_tracked" not in inits       # not read by the eval graph
    assert model.training is False


def test_mlp_round_trip_and_dynamic_batch():
    model = _param_init(MLP(), 2)
    x = lg.tensor(np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32))
    data = export_bytes(model, (x,), input_names=["features"], output_names=["logits"],
                        dynamic_axes={"features": {0: "batch"}, "logits": {0: "batch"}})
    proto = onnx.load_from_string(data)
    assert proto.graph.input[0].name == "features"
    assert proto.graph.output[0].name == "logits"
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert {"LayerNormalization", "Erf", "Tanh", "Sigmoid", "Gemm"} <= \
        {n.op_type for n in proto.graph.node}
    for batch in (1, 4, 9):
        xb = lg.tensor(np.random.default_rng(batch).standard_normal((batch, 6))
                       .astype(np.float32))
        (got,) = run_ort(data, [xb.numpy()])
        np.testing.assert_allclose(got, model(xb).detach().numpy(), rtol=RTOL, atol=ATOL)


def test_transformer_block_round_trip():
    model = _param_init(Block(), 4).eval()
    idx = lg.tensor(np.random.default_rng(5).integers(0, 20, (2, 6)))
    proto = check_round_trip(model, (idx,))
    ops = {n.op_type for n in proto.graph.node}
    assert {"Gather", "LayerNormalization", "Softmax", "MatMul", "Where", "Transpose"} <= ops
    assert "Dropout" not in ops and "RandomUniformLike" not in ops


def test_transformer_block_dynamic_batch():
    model = _param_init(Block(), 6).eval()
    idx = lg.tensor(np.random.default_rng(7).integers(0, 20, (2, 6)))
    data = export_bytes(model, (idx,), input_names=["idx"], dynamic_axes={"idx": [0]})
    for b in (1, 3):
        xb = lg.tensor(np.random.default_rng(b).integers(0, 20, (b, 6)))
        (got,) = run_ort(data, [xb.numpy()])
        np.testing.assert_allclose(got, model(xb).detach().numpy(), rtol=RTOL, atol=ATOL)


def test_library_layers_round_trip():
    """nn.TransformerEncoderLayer (norm_first, batch_first), MultiheadAttention with a mask,
    Conv1d/BatchNorm1d/pooling, a transposed convolution with GroupNorm and upsampling."""
    rng = np.random.default_rng(8)
    cases = [
        (nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=True,
                                    activation="gelu"), (2, 5, 16)),
        (nn.Sequential(nn.Conv1d(3, 4, 3, padding=1), nn.BatchNorm1d(4), nn.MaxPool1d(2),
                       nn.AvgPool1d(2), nn.Flatten(), nn.Linear(8, 2)), (2, 3, 8)),
        (nn.Sequential(nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1),
                       nn.GroupNorm(1, 2), nn.Upsample(scale_factor=2), nn.SiLU()),
         (1, 3, 4, 4)),
        (nn.Sequential(nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), nn.ELU(),
                       nn.LeakyReLU(0.2), nn.Softplus(beta=2.0), nn.Hardtanh()),
         (1, 2, 6, 7)),
    ]
    for model, shape in cases:
        _param_init(model, 9).eval()
        x = lg.tensor(rng.standard_normal(shape).astype(np.float32))
        check_round_trip(model, (x,))


def test_attention_module_with_mask():
    mha = _param_init(nn.MultiheadAttention(16, 4, batch_first=True), 10).eval()
    mask = lg.triu(lg.ones(5, 5, dtype=lg.bool), diagonal=1)

    def attend(x):
        return mha(x, x, x, attn_mask=mask)

    x = lg.tensor(np.random.default_rng(11).standard_normal((2, 5, 16)).astype(np.float32))
    check_round_trip(attend, (x,))


def test_function_export_names_and_ops():
    w = lg.tensor(np.random.default_rng(12).standard_normal((4, 3)).astype(np.float32))

    def fn(a, b):
        h = lg.where(a > 0, a, a * 0.1) @ w
        c = lg.cat([h, b[:, 1:]], dim=1)
        return c.sum(1, keepdim=True), lg.clamp(c, -0.5, 0.5).amax(0), c.argmax(1), \
            lg.cumsum(c, 1) / (c.abs() + 1).sqrt(), c.flip(0).permute(1, 0)

    rng = np.random.default_rng(13)
    a = lg.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    b = lg.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    proto = check_round_trip(fn, (a, b), output_names=["total", "peak"])
    assert [i.name for i in proto.graph.input] == ["a", "b"]
    assert [o.name for o in proto.graph.output] == ["total", "peak", "output_2", "output_3",
                                                     "output_4"]
    proto = onnx.load_from_string(export_bytes(fn, (a, b), input_names=["left"]))
    assert [i.name for i in proto.graph.input] == ["left", "b"]


@pytest.mark.parametrize("opset", [13, 17, 18])
def test_opsets(opset):
    def fn(x):
        return (x.mean(dim=(0, 2)), x.amax(-1), F.layer_norm(x, (4,)), x.prod(1),
                lg.logsumexp(x, 1), x.norm(dim=1))

    x = lg.tensor(np.random.default_rng(14).standard_normal((2, 3, 4)).astype(np.float32))
    proto = check_round_trip(fn, (x,), opset_version=opset)
    assert proto.opset_import[0].version == opset


def test_elementwise_table():
    rng = np.random.default_rng(15)
    x = lg.tensor(rng.uniform(-2, 2, (3, 4)).astype(np.float32))
    y = lg.tensor(rng.uniform(0.5, 2, (3, 4)).astype(np.float32))
    n = lg.tensor(rng.integers(-7, 8, (3, 4)))
    m = lg.tensor(rng.integers(1, 4, (3, 4)))

    def fn(x, y, n, m):
        return (lg.rsqrt(y), lg.expm1(x), lg.log1p(y), lg.log2(y), x.square(), lg.trunc(x * 3),
                lg.remainder(x, y), lg.fmod(x, y), lg.floor_divide(x, y), n // 3, n % 3, n.fmod(3),
                lg.atan2(x, y - 1), lg.copysign(y, x), lg.exp2(x), lg.erfc(x), F.silu(x),
                F.gelu(x, approximate="tanh"), F.elu(x), F.selu(x), F.celu(x, 0.5),
                (x > 0) & (y > 1), (x > 0) | (y < 1), ~(x > 0), x != y, lg.maximum(x, y),
                lg.sign(x), lg.round(x * 2), x.to(lg.int32), n.float() / m, lg.heaviside(x, y))

    check_round_trip(fn, (x, y, n, m))


def test_indexing_and_padding():
    rng = np.random.default_rng(16)
    x = lg.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    idx = lg.tensor(np.array([3, 0, 2, 2]))

    def fn(x, idx):
        y = x[idx]                                    # gather
        z = x.index_add(0, idx, lg.ones(4, 5))        # scatter-add
        p = F.pad(x, (1, 2, 0, 1), value=-1.0)
        return y, z, p, x[:, ::2], x[1:3, -2:]

    check_round_trip(fn, (x, idx))


def test_file_path_and_model_proto(tmp_path):
    model = _param_init(MLP(), 17)
    x = lg.ones(2, 6)
    path = tmp_path / "mlp.onnx"
    assert lg.onnx.export(model, x, str(path)) is None
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    assert {"l1.weight", "l3.bias", "norm.weight"} <= {t.name for t in proto.graph.initializer}
    again = lg.onnx.export(model, (x,), None)
    assert isinstance(again, onnx.ModelProto)
    assert again.graph == proto.graph


def test_export_params_false_makes_weights_inputs():
    model = _param_init(nn.Linear(3, 2), 18)
    proto = lg.onnx.export(model, (lg.ones(4, 3),), None, export_params=False)
    assert [i.name for i in proto.graph.input] == ["input", "weight", "bias"]
    assert not proto.graph.initializer
    x = np.random.default_rng(19).standard_normal((4, 3)).astype(np.float32)
    (got,) = run_ort(proto.SerializeToString(),
                     [x, model.weight.detach().numpy(), model.bias.detach().numpy()])
    np.testing.assert_allclose(got, model(lg.tensor(x)).detach().numpy(), rtol=RTOL,
                               atol=ATOL)


def test_training_mode_restored_and_dropout_in_training_fails():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    model.train()
    lg.onnx.export(model, (lg.ones(2, 3),), None)
    assert model.training and model[1].training
    with pytest.raises(lg.onnx.UnsupportedOperatorError, match="uniform|normal|bernoulli"):
        lg.onnx.export(model, (lg.ones(2, 3),), None, training=lg.onnx.TrainingMode.TRAINING)


def test_unsupported_op_names_op_and_line():
    def fn(x):
        return lg.lgamma(x) + 1           # the line the error must name

    line = fn.__code__.co_firstlineno + 1
    with pytest.raises(lg.onnx.UnsupportedOperatorError) as info:
        lg.onnx.export(fn, (lg.ones(3),), io.BytesIO())
    msg = str(info.value)
    assert "'lgamma'" in msg and f"test_onnx.py:{line}" in msg
    assert info.value.name == "lgamma"
    assert isinstance(info.value, lg.onnx.OnnxExporterError)
    assert isinstance(info.value, RuntimeError)


def test_dynamic_axis_baked_into_a_shape_is_an_error():
    def fn(x):
        t = x.shape[1]
        mask = lg.tril(lg.ones(t, t))                 # a constant of the traced size
        return x @ mask

    with pytest.raises(lg.onnx.OnnxExporterError, match="dynamic axis"):
        lg.onnx.export(fn, (lg.ones(2, 3, 3),), None, input_names=["x"],
                       dynamic_axes={"x": {1: "n", 2: "n2"}})
    with pytest.raises(ValueError, match="neither"):
        lg.onnx.export(fn, (lg.ones(2, 3, 3),), None, dynamic_axes={"nope": [0]})


def test_onnx_not_imported_with_llgrad():
    import subprocess
    code = ("import sys, llgrad; assert 'onnx' not in sys.modules and "
            "'onnxruntime' not in sys.modules; print(llgrad.onnx.is_in_onnx_export())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"LLGRAD_COMPILE_WORKER": "0", **__import__("os").environ})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_is_in_onnx_export_during_trace():
    seen = []

    def fn(x):
        seen.append(lg.onnx.is_in_onnx_export())
        return x * 2

    lg.onnx.export(fn, (lg.ones(2),), None)
    assert seen == [True] and not lg.onnx.is_in_onnx_export()


def test_composites_exported_by_decomposition():
    """Losses and statistics without a one-op ONNX form export as their decomposition."""
    rng = np.random.default_rng(20)
    logits = lg.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    target = lg.tensor(rng.integers(0, 4, 6))
    probs = lg.tensor(rng.uniform(0.1, 0.9, (6, 4)).astype(np.float32))
    big = lg.tensor((rng.standard_normal((3, 5)) * 1000).astype(np.float32))

    def fn(logits, target, probs, big):
        return (F.cross_entropy(logits, target), F.mse_loss(logits, probs),
                F.binary_cross_entropy_with_logits(logits, probs),
                F.binary_cross_entropy(probs, probs.flip(0)), logits.var(0), logits.std(1),
                logits.norm(p=3, dim=1), lg.logsumexp(big, 1), F.log_softmax(big, 1))

    check_round_trip(fn, (logits, target, probs, big))
