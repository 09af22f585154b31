#!/usr/bin/env python3
"""Writes GGUF models with seeded random weights of real shapes, for recording llama.cpp
decode without downloading a model. Uses llama.cpp's own gguf-py (pure Python + numpy) from
the trimmed source tree that fetch.sh prepares.

The shapes come from a Hugging Face `config.json` (the same files `gapscope roofline --model`
reads, under models/). Two families:
  - `llama`: Llama-3 style dense decoders (arch `llama`);
  - `qwen3_5_text`: Qwen3.5-style dense hybrids (arch `qwen35`): gated-DeltaNet linear
    attention with one full-attention layer in `full_attention_interval`, the full-attention
    query projection doubled for the output gate, a post-attention norm.

Quantized weights are written as random blocks directly (an f16 scale per 32 weights plus
random 8-bit or 4-bit codes), so an 8B model takes seconds, not the minutes a float
quantization pass would. Weights are never zero: the scales put each weight around 0.02,
as in a trained model; norms are close to 1. As llama.cpp's quantizer does, 1-D tensors and
the short conv kernel stay f32.

usage: make-models.py --gguf-py SRC/gguf-py --out DIR --config models/llama-3-8b.json
                      [--types q8_0,q4_0,bf16] [--draft-layers N [--deep-scale S]]
Writes DIR/<config name>-<type>.gguf (models/qwen3.5-9b.json, q4_0: qwen3.5-9b-q4_0.gguf).
scripts/llamacpp/tiny/ holds two small configs for checking this script on a CPU build.

The vocabulary is synthetic (SentencePiece-style: <unk>, <s>, </s>, the 256 byte tokens, then
`\u2581tN`) but of the real size, so the embedding gather and the LM head keep their real shapes.
llama-batched-bench feeds random token ids and never needs real text.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

def weight(rng, gguf, rows, cols, qtype):
    """Random weight of logical shape (rows, cols) as raw bytes of type `qtype`."""
    Q = gguf.GGMLQuantizationType
    if qtype == Q.BF16:
        v = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
        return (v.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, cols * 2)
    nb = cols // 32
    if qtype == Q.Q8_0:
        # d * q with q uniform in [-127, 127] (std ~73): d ~ 0.02 / 73.
        blocks = np.frombuffer(rng.bytes(rows * nb * 34), dtype=np.uint8).reshape(rows, nb, 34).copy()
        d = (2.7e-4 * (0.5 + rng.random((rows, nb), dtype=np.float32))).astype(np.float16)
        blocks[:, :, 0:2] = d.view(np.uint8).reshape(rows, nb, 2)
        return blocks.reshape(rows, nb * 34)
    if qtype == Q.Q4_0:
        # d * (q - 8) with q uniform in [0, 15] (std ~4.6): d ~ 0.02 / 4.6.
        blocks = np.frombuffer(rng.bytes(rows * nb * 18), dtype=np.uint8).reshape(rows, nb, 18).copy()
        d = (4.3e-3 * (0.5 + rng.random((rows, nb), dtype=np.float32))).astype(np.float16)
        blocks[:, :, 0:2] = d.view(np.uint8).reshape(rows, nb, 2)
        return blocks.reshape(rows, nb * 18)
    raise ValueError(qtype)


def norm(rng, n):
    return (1.0 + 0.01 * rng.standard_normal(n)).astype(np.float32)


def add_vocab(w, gguf, n):
    specials = ["<unk>", "<s>", "</s>"]
    toks = specials + [f"<0x{b:02X}>" for b in range(256)]
    toks += [f"\u2581t{i}" for i in range(n - len(toks))]
    T = gguf.TokenType
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL] + [T.BYTE] * 256 + [T.NORMAL] * (n - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([-float(i) for i in range(n)])
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


QTYPES = ("q8_0", "q4_0", "bf16")


class Shapes:
    """The fields of a Hugging Face config.json that the writers need."""

    def __init__(self, cfg):
        self.family = cfg["model_type"]
        self.hidden = cfg["hidden_size"]
        self.ffn = cfg["intermediate_size"]
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.head_dim = cfg.get("head_dim", self.hidden // self.heads)
        self.vocab = cfg["vocab_size"]
        self.ctx = min(cfg.get("max_position_embeddings", 8192), 262144)
        self.rope_theta = cfg.get("rope_theta", 10000.0)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.rotary = cfg.get("partial_rotary_factor", 1.0)
        if self.family in ("qwen3_5_text", "qwen3_5"):
            self.interval = cfg.get("full_attention_interval", 4)
            types = cfg.get("layer_types")
            self.linear = ([t == "linear_attention" for t in types] if types else
                           [(i + 1) % self.interval != 0 for i in range(self.layers)])
            self.k_heads = cfg["linear_num_key_heads"]
            self.v_heads = cfg["linear_num_value_heads"]
            self.k_dim = cfg["linear_key_head_dim"]
            self.v_dim = cfg["linear_value_head_dim"]
            self.conv = cfg.get("linear_conv_kernel_dim", 4)
            if self.k_dim != self.v_dim:
                sys.exit("make_models: llama.cpp's qwen35 needs linear_key_head_dim == linear_value_head_dim")
            if self.v_heads % self.k_heads:
                sys.exit("make_models: linear_num_value_heads must be a multiple of linear_num_key_heads")
        elif self.family != "llama":
            sys.exit(f"make_models: model_type {self.family!r}: only llama and qwen3_5_text are written")


def begin(gguf, path, arch, m, qtype_name):
    """A writer with the keys every decoder has, and the synthetic vocabulary."""
    ftype = {"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
             "bf16": gguf.LlamaFileType.MOSTLY_BF16}[qtype_name]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"random {qtype_name}")
    w.add_context_length(m.ctx)
    w.add_embedding_length(m.hidden)
    w.add_block_count(m.layers)
    w.add_feed_forward_length(m.ffn)
    w.add_head_count(m.heads)
    w.add_head_count_kv(m.kv_heads)
    w.add_key_length(m.head_dim)
    w.add_value_length(m.head_dim)
    w.add_rope_dimension_count(int(m.head_dim * m.rotary))
    w.add_rope_freq_base(m.rope_theta)
    w.add_layer_norm_rms_eps(m.eps)
    w.add_vocab_size(m.vocab)
    w.add_file_type(ftype)
    add_vocab(w, gguf, m.vocab)
    return w


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def scaled(raw, qtype, gguf, s):
    """A weight's raw bytes with every value multiplied by s (the block scales, or the bf16
    values)."""
    Q = gguf.GGMLQuantizationType
    raw = raw.copy()
    if qtype == Q.BF16:
        v = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32) * np.float32(s)
        return (v.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(raw.shape)
    size = {Q.Q8_0: 34, Q.Q4_0: 18}[qtype]
    rows = raw.shape[0]
    b = raw.reshape(rows, -1, size)
    d = b[:, :, 0:2].copy().view(np.float16) * np.float16(s)
    b[:, :, 0:2] = d.view(np.uint8)
    return b.reshape(raw.shape)


class Tensors:
    """A model's tensors in write order (name, array, raw dtype or None for f32)."""

    def __init__(self):
        self.items = []

    def write(self, w, keep=lambda name: True):
        for name, arr, raw in self.items:
            if keep(name):
                if raw is None:
                    w.add_tensor(name, arr)
                else:
                    w.add_tensor(name, arr, raw_dtype=raw)


def write_model(gguf, path, m, qtype_name, seed, draft_layers=0, deep_scale=1.0):
    """The model at `path`; with `draft_layers` N, also a draft at `path` with `-draft{N}`
    before `.gguf`: the very same tensors of the first N layers, the embedding, the output
    norm and the LM head. `deep_scale` multiplies the output projections (attn_output,
    ffn_down) of layers N.. so that they move the residual stream little and the draft's
    greedy token is often the target's."""
    Q = gguf.GGMLQuantizationType
    qtype = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "bf16": Q.BF16}[qtype_name]
    rng = np.random.default_rng(seed)
    hybrid = m.family != "llama"
    if draft_layers and (hybrid or not 0 < draft_layers < m.layers):
        sys.exit(f"make_models: a draft of {draft_layers} layers needs a llama-family model of more layers")
    w = begin(gguf, path, "qwen35" if hybrid else "llama", m, qtype_name)
    h, f, hd = m.hidden, m.ffn, m.head_dim
    q_out, kv_out = m.heads * hd, m.kv_heads * hd
    tensors = Tensors()

    def deep(name):
        if not draft_layers or not name.startswith("blk."):
            return False
        layer = int(name.split(".")[1])
        return layer >= draft_layers and name.endswith(("attn_output.weight", "ffn_down.weight"))

    def add(name, rows, cols):
        raw = weight(rng, gguf, rows, cols, qtype)
        if deep(name) and deep_scale != 1.0:
            raw = scaled(raw, qtype, gguf, deep_scale)
        tensors.items.append((name, raw, qtype))

    def vec(name, v):
        tensors.items.append((name, np.asarray(v, dtype=np.float32), None))

    if hybrid:
        w.add_rope_dimension_sections([11, 11, 10, 0])
        w.add_full_attention_interval(m.interval)
        w.add_ssm_conv_kernel(m.conv)
        w.add_ssm_state_size(m.k_dim)
        w.add_ssm_group_count(m.k_heads)
        w.add_ssm_time_step_rank(m.v_heads)
        w.add_ssm_inner_size(m.v_dim * m.v_heads)
        key_dim, value_dim = m.k_heads * m.k_dim, m.v_heads * m.v_dim
        conv_dim = 2 * key_dim + value_dim

    add("token_embd.weight", m.vocab, h)
    for i in range(m.layers):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", norm(rng, h))
        if hybrid and m.linear[i]:
            # Gated DeltaNet: fused q|k|v, the output gate z, per-head beta and alpha (the decay's
            # input), the conv kernel, A = -exp(A_log) per value head, dt bias, the gated norm.
            add(p + "attn_qkv.weight", conv_dim, h)
            add(p + "attn_gate.weight", value_dim, h)
            add(p + "ssm_beta.weight", m.v_heads, h)
            add(p + "ssm_alpha.weight", m.v_heads, h)
            vec(p + "ssm_conv1d.weight", 0.3 * rng.standard_normal((conv_dim, m.conv)))
            vec(p + "ssm_a", -np.exp(np.log(rng.uniform(1.0, 16.0, m.v_heads))))
            vec(p + "ssm_dt.bias", 0.1 * rng.standard_normal(m.v_heads))
            vec(p + "ssm_norm.weight", norm(rng, m.v_dim))
            add(p + "ssm_out.weight", h, value_dim)
        else:
            # Full attention; the hybrid's query projection also yields the output gate.
            add(p + "attn_q.weight", q_out * (2 if hybrid else 1), h)
            add(p + "attn_k.weight", kv_out, h)
            add(p + "attn_v.weight", kv_out, h)
            add(p + "attn_output.weight", h, q_out)
            if hybrid:
                vec(p + "attn_q_norm.weight", norm(rng, hd))
                vec(p + "attn_k_norm.weight", norm(rng, hd))
        vec(p + ("post_attention_norm.weight" if hybrid else "ffn_norm.weight"), norm(rng, h))
        add(p + "ffn_gate.weight", f, h)
        add(p + "ffn_up.weight", f, h)
        add(p + "ffn_down.weight", h, f)
    vec("output_norm.weight", norm(rng, h))
    add("output.weight", m.vocab, h)
    tensors.write(w)
    finish(w)
    if draft_layers:
        import copy
        dm = copy.copy(m)
        dm.layers = draft_layers
        dpath = draft_path(path, draft_layers)
        dw = begin(gguf, dpath, "llama", dm, qtype_name)
        tensors.write(dw, lambda n: not n.startswith("blk.") or int(n.split(".")[1]) < draft_layers)
        finish(dw)
        return dpath
    return None


def draft_path(path, layers):
    return path[: -len(".gguf")] + f"-draft{layers}.gguf"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", required=True, help="a Hugging Face config.json (models/*.json)")
    ap.add_argument("--types", default="q8_0", help="comma-separated: q8_0, q4_0, bf16")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--draft-layers", type=int, default=0,
                    help="also write a draft of the model's first N layers (same tensors)")
    ap.add_argument("--deep-scale", type=float, default=1.0,
                    help="scale attn_output and ffn_down of layers from --draft-layers on")
    a = ap.parse_args()
    types = a.types.split(",")
    for t in types:
        if t not in QTYPES:
            sys.exit(f"make_models: unknown type {t!r} (one of {', '.join(QTYPES)})")
    with open(a.config) as fh:
        shapes = Shapes(json.load(fh))
    sys.path.insert(0, a.gguf_py)
    try:
        import yaml  # noqa: F401  (gguf-py imports it for model cards, which are not written here)
    except ImportError:
        import types as pytypes
        sys.modules["yaml"] = pytypes.ModuleType("yaml")
    import gguf  # noqa: E402  (llama.cpp's own, from the trimmed tree)
    os.makedirs(a.out, exist_ok=True)
    name = os.path.splitext(os.path.basename(a.config))[0]
    for t in types:
        path = os.path.join(a.out, f"{name}-{t}.gguf")
        t0 = time.time()
        dpath = write_model(gguf, path, shapes, t, a.seed, a.draft_layers, a.deep_scale)
        print(f"make_models: {path} {os.path.getsize(path) / 2**30:.2f} GiB in {time.time() - t0:.1f} s",
              flush=True)
        if dpath:
            print(f"make_models: {dpath} {os.path.getsize(dpath) / 2**30:.2f} GiB (draft: the first "
                  f"{a.draft_layers} layers; deep scale {a.deep_scale})", flush=True)


if __name__ == "__main__":
    main()
