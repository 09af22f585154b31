#!/usr/bin/env python3
"""Write a tiny random-weight Llama GGUF (float32) for testing the llama.cpp route.

    python make_tiny_gguf.py --gguf-py LLAMA_CPP/gguf-py OUT.gguf [--layers 2] [--seed 0] [--f16]

Vocabulary: <unk>, <s>, </s> and the 256 SentencePiece byte tokens <0x00>..<0xFF>
(259 tokens; llama.cpp's SPM tokenizer falls back to the byte tokens for any text).
Needs numpy and pyyaml (gguf-py imports yaml). Random weights: the model says nothing;
it only exercises the engine and the converter.
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--f16", action="store_true", help="store the weight matrices as float16 (same random values)")
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf
    import numpy as np

    rng = np.random.default_rng(a.seed)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [
        gguf.TokenType.BYTE
    ] * 256
    V, E, hd = len(tokens), a.embd, a.embd // a.heads

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("gapscope tiny random llama")
    w.add_context_length(a.ctx)
    w.add_embedding_length(E)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(hd)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if a.f16 else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * V)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def t(name, *shape, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
        x = (rng.standard_normal(shape) * s).astype(np.float32)
        w.add_tensor(name, x.astype(np.float16) if a.f16 else x)

    t("token_embd.weight", V, E, scale=1.0)
    for i in range(a.layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        t(f"blk.{i}.attn_q.weight", E, E)
        t(f"blk.{i}.attn_k.weight", a.kv_heads * hd, E)
        t(f"blk.{i}.attn_v.weight", a.kv_heads * hd, E)
        t(f"blk.{i}.attn_output.weight", E, E)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", (1 + 0.1 * rng.standard_normal(E)).astype(np.float32))
        t(f"blk.{i}.ffn_gate.weight", a.ff, E)
        t(f"blk.{i}.ffn_up.weight", a.ff, E)
        t(f"blk.{i}.ffn_down.weight", E, a.ff)
    w.add_tensor("output_norm.weight", np.ones(E, dtype=np.float32))
    t("output.weight", V, E, scale=4.0 / np.sqrt(E))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
