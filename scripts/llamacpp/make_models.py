#!/usr/bin/env python3
"""Writes GGUF models with seeded random weights of real shapes, for recording llama.cpp
decode without downloading a model. Uses llama.cpp's own gguf-py (pure Python + numpy) from
the trimmed source tree that fetch.sh prepares.

Quantized weights are written as random blocks directly (an f16 scale per 32 weights plus
random 8-bit or 4-bit codes), so an 8B model takes seconds, not the minutes a float
quantization pass would. Weights are never zero: the scales put each weight around 0.02,
as in a trained model; norms are close to 1.

usage: make_models.py --gguf-py SRC/gguf-py --out DIR [--model llama3-8b] [--types q8_0,q4_0,bf16]

The vocabulary is synthetic (SentencePiece-style: <unk>, <s>, </s>, the 256 byte tokens, then
`▁tN`) but of the real size, so the embedding gather and the LM head keep their real shapes.
llama-batched-bench feeds random token ids and never needs real text.
"""
import argparse
import os
import sys
import time

import numpy as np

# Hugging Face shapes (config.json of each model).
MODELS = {
    "llama3-8b": dict(arch="llama", hidden=4096, ffn=14336, layers=32, heads=32, kv_heads=8,
                      head_dim=128, vocab=128256, ctx=8192, rope_theta=500000.0, eps=1e-5),
    # For checking this script quickly (not recorded).
    "tiny": dict(arch="llama", hidden=256, ffn=512, layers=2, heads=4, kv_heads=2,
                 head_dim=64, vocab=512, ctx=512, rope_theta=10000.0, eps=1e-5),
}


def f16_bytes(x):
    return np.asarray(x, dtype=np.float16).view(np.uint8)


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


def write_dense(gguf, path, m, qtype_name, seed):
    Q = gguf.GGMLQuantizationType
    qtype = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "bf16": Q.BF16}[qtype_name]
    ftype = {"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
             "bf16": gguf.LlamaFileType.MOSTLY_BF16}[qtype_name]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, m["arch"])
    w.add_name(f"random {qtype_name}")
    w.add_context_length(m["ctx"])
    w.add_embedding_length(m["hidden"])
    w.add_block_count(m["layers"])
    w.add_feed_forward_length(m["ffn"])
    w.add_head_count(m["heads"])
    w.add_head_count_kv(m["kv_heads"])
    w.add_rope_dimension_count(m["head_dim"])
    w.add_rope_freq_base(m["rope_theta"])
    w.add_layer_norm_rms_eps(m["eps"])
    w.add_vocab_size(m["vocab"])
    w.add_file_type(ftype)
    add_vocab(w, gguf, m["vocab"])
    h, f, hd = m["hidden"], m["ffn"], m["head_dim"]
    q_out, kv_out = m["heads"] * hd, m["kv_heads"] * hd

    def add(name, rows, cols):
        w.add_tensor(name, weight(rng, gguf, rows, cols, qtype), raw_dtype=qtype)

    add("token_embd.weight", m["vocab"], h)
    for i in range(m["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(rng, h))
        add(p + "attn_q.weight", q_out, h)
        add(p + "attn_k.weight", kv_out, h)
        add(p + "attn_v.weight", kv_out, h)
        add(p + "attn_output.weight", h, q_out)
        w.add_tensor(p + "ffn_norm.weight", norm(rng, h))
        add(p + "ffn_gate.weight", f, h)
        add(p + "ffn_up.weight", f, h)
        add(p + "ffn_down.weight", h, f)
    w.add_tensor("output_norm.weight", norm(rng, h))
    add("output.weight", m["vocab"], h)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="llama3-8b", choices=sorted(MODELS))
    ap.add_argument("--types", default="q8_0", help="comma-separated: q8_0, q4_0, bf16")
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    try:
        import yaml  # noqa: F401  (gguf-py imports it for model cards, which are not written here)
    except ImportError:
        import types
        sys.modules["yaml"] = types.ModuleType("yaml")
    import gguf  # noqa: E402  (llama.cpp's own, from the trimmed tree)
    os.makedirs(a.out, exist_ok=True)
    for t in a.types.split(","):
        path = os.path.join(a.out, f"{a.model}-{t}.gguf")
        t0 = time.time()
        write_dense(gguf, path, MODELS[a.model], t, a.seed)
        print(f"make_models: {path} {os.path.getsize(path) / 2**30:.2f} GiB in {time.time() - t0:.1f} s",
              flush=True)


if __name__ == "__main__":
    main()
