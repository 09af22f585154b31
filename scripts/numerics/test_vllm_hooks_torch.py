"""vllm_hooks.Recorder and capture_in_process on a small torch model built the way vLLM's and
SGLang's Llama is (decoder layers returning (hidden_states, residual), the residual add fused
into the next RMSNorm and done IN PLACE, as their CUDA kernels do). This checks the hook
logic, not vLLM or SGLang (neither is installed here). Skipped without torch."""
import json
import os
import struct
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_hooks  # noqa: E402

H, V, L, EPS = 32, 50, 3, 1e-6


def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w


class FusedRMSNorm(nn.Module):
    """RMSNorm.forward(x, residual): like vLLM's fused_add_rms_norm, overwrites x with
    norm(x + residual) and residual with x + residual, and returns them."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(H))
        self.variance_epsilon = EPS

    def forward(self, x, residual=None):
        if residual is None:
            return rms(x, self.weight)
        s = (x.float() + residual.float()).to(x.dtype)
        residual.copy_(s)
        x.copy_(rms(s, self.weight))
        return x, residual


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = FusedRMSNorm()
        self.post_attention_layernorm = FusedRMSNorm()
        self.o = nn.Linear(H, H, bias=False)
        self.up = nn.Linear(H, 2 * H, bias=False)
        self.down = nn.Linear(2 * H, H, bias=False)

    def attn(self, x):  # causal: each position mixes the ones before it
        n = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1)
        return self.o(torch.cumsum(x, 0) / n)

    def mlp(self, x):
        return self.down(torch.nn.functional.silu(self.up(x)))

    def forward(self, positions, hidden_states, residual):  # vLLM's LlamaDecoderLayer.forward
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.attn(hidden_states)
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, H)
        self.layers = nn.ModuleList([Layer() for _ in range(L)])
        self.norm = FusedRMSNorm()

    def forward(self, ids):  # vLLM's LlamaModel.forward
        hidden_states, residual = self.embed_tokens(ids), None
        for layer in self.layers:
            hidden_states, residual = layer(None, hidden_states, residual)
        hidden_states, _ = self.norm(hidden_states, residual)
        return hidden_states


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()
        self.lm_head = nn.Linear(H, V, bias=False)

    def forward(self, ids):
        return self.model(ids)


def reference(m, ids):
    """The unfused Llama: h += attn(norm(h)); h += mlp(norm(h)); per-layer h; logits."""
    h = m.model.embed_tokens(ids)
    out = []
    for layer in m.model.layers:
        h = h + layer.attn(rms(h, layer.input_layernorm.weight))
        h = h + layer.mlp(rms(h, layer.post_attention_layernorm.weight))
        out.append(h)
    return out, rms(h, m.model.norm.weight) @ m.lm_head.weight.T


def read_dump(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        body = f.read()
    meta = header.pop("__metadata__")
    t = {"F32": "<f4", "I64": "<i8"}
    return meta, {k: np.frombuffer(body[e["data_offsets"][0]:e["data_offsets"][1]], t[e["dtype"]]).reshape(e["shape"])
                  for k, e in header.items()}


@torch.no_grad()
def test_recorder_rejoins_the_residual_stream(tmp_path):
    torch.manual_seed(0)
    m = Model()
    ids = torch.randint(0, V, (2, 12))
    out = tmp_path / "mock.safetensors"
    s = vllm_hooks.capture_in_process(m, lambda x: m(torch.tensor(x)), ids, str(out), engine="mock vllm")
    assert s["passages"] == 2 and s["layers"] == L and s["rejoin_check_max"] < 1e-5
    meta, d = read_dump(out)
    assert meta["engine"] == "mock vllm" and d["logits"].shape == (2, 12, V)
    for p in range(2):
        hs, logits = reference(m, ids[p])
        for n in range(L):
            np.testing.assert_allclose(d[f"hidden.{n}"][p], hs[n].numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(d["logits"][p], logits.numpy(), rtol=1e-5, atol=1e-5)
    assert m.model.norm._forward_hooks == {}  # hooks removed


@torch.no_grad()
def test_keeping_references_reads_the_next_layers_values():
    """Why the hook forms the sum at once: the fused norm overwrites both tensors."""
    torch.manual_seed(0)
    m = Model()
    kept = []
    h = m.model.layers[0].register_forward_hook(lambda _m, _i, o: kept.append(o))
    ids = torch.randint(0, V, (12,))
    m(ids)
    h.remove()
    hs, _ = reference(m, ids)
    late = kept[0][0] + kept[0][1]
    assert not torch.allclose(late, hs[0], atol=1e-3)
