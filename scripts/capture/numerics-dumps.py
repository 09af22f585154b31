#!/usr/bin/env python3
"""Dumps for `gapscope numerics` on a GPU (docs/NUMERICS.md, issue 38): one random-weight
Llama-style model (seeded), teacher-forced on seeded tokens, dumped as

  hf-f32.safetensors         float32, eager attention: the reference
  hf-f32-rerun.safetensors   the same again: the identity pair
  hf-bf16-eager.safetensors  bfloat16, eager attention
  hf-bf16-sdpa.safetensors   bfloat16, SDPA attention
  hf-f32-fault.safetensors   float32 with layer FAULT's MLP down-projection scaled by 1.01
  small/                     passage 0 from position PL-1 on: HF float32 and bfloat16, and
                             gapscope-engine (engine and hf-bf16 numerics) on the same weights

with the residual stream after every decoder layer (forward hooks) in the HF dumps.

--hidden-only writes small/ alone, every dump with hidden states: HF float32 and bfloat16,
and gapscope-engine `logits --hidden` on CUDA and on the CPU reference, each in both numerics
(engine-{cuda,cpu}-{engine,hf-bf16}.safetensors): the engine's residual stream after each
layer against HF's (issue 38).

    python3 scripts/capture/numerics-dumps.py --out DIR [--engine .device/numerics/gapscope-engine] [--hidden-only]
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "gsnumerics", os.path.join(HERE, "..", "..", "python", "gapscope", "numerics.py")
)
gsn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gsn)

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--engine")
ap.add_argument("--passages", type=int, default=4)
ap.add_argument("--tokens", type=int, default=64)
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--fault", type=int, default=5)
ap.add_argument("--prompt", type=int, default=8)
ap.add_argument("--hidden-only", action="store_true")
a = ap.parse_args()
os.makedirs(os.path.join(a.out, "small"), exist_ok=True)

cfg = transformers.LlamaConfig(
    vocab_size=4096,
    hidden_size=512,
    intermediate_size=1408,
    num_hidden_layers=a.layers,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=64,
    max_position_embeddings=1024,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    initializer_range=0.05,
)
torch.manual_seed(0)
base = transformers.LlamaForCausalLM(cfg).eval()
wdir = os.path.join(a.out, "model")
base.save_pretrained(wdir, safe_serialization=True)
g = torch.Generator().manual_seed(1)
tokens = torch.randint(0, cfg.vocab_size, (a.passages, a.tokens), generator=g)


def model(dtype, attn):
    m = transformers.LlamaForCausalLM.from_pretrained(wdir, torch_dtype=dtype, attn_implementation=attn)
    return m.cuda().eval()


t0 = time.time()
p0 = tokens[0]
if a.hidden_only:
    f32 = model(torch.float32, "eager")
    gsn.dump_hf(f32, p0, os.path.join(a.out, "small", "hf-f32-p0.safetensors"), engine="hf float32 eager", first_position=a.prompt - 1)
    del f32
    bf = model(torch.bfloat16, "eager")
    gsn.dump_hf(bf, p0, os.path.join(a.out, "small", "hf-bf16-p0.safetensors"), engine="hf bfloat16 eager", first_position=a.prompt - 1)
    del bf
else:
    f32 = model(torch.float32, "eager")
    gsn.dump_hf(f32, tokens, os.path.join(a.out, "hf-f32.safetensors"), engine="hf float32 eager")
    gsn.dump_hf(f32, tokens, os.path.join(a.out, "hf-f32-rerun.safetensors"), engine="hf float32 eager (rerun)")
    gsn.dump_hf(f32, p0, os.path.join(a.out, "small", "hf-f32-p0.safetensors"), engine="hf float32 eager", first_position=a.prompt - 1)
    with torch.no_grad():
        f32.model.layers[a.fault].mlp.down_proj.weight.mul_(1.01)
    gsn.dump_hf(f32, tokens, os.path.join(a.out, "hf-f32-fault.safetensors"), engine=f"hf float32 eager, layer {a.fault} down_proj x1.01")
    del f32
    bf = model(torch.bfloat16, "eager")
    gsn.dump_hf(bf, tokens, os.path.join(a.out, "hf-bf16-eager.safetensors"), engine="hf bfloat16 eager")
    gsn.dump_hf(bf, p0, os.path.join(a.out, "small", "hf-bf16-p0.safetensors"), engine="hf bfloat16 eager", first_position=a.prompt - 1)
    del bf
    sd = model(torch.bfloat16, "sdpa")
    gsn.dump_hf(sd, tokens, os.path.join(a.out, "hf-bf16-sdpa.safetensors"), engine="hf bfloat16 sdpa")
    del sd
print(f"HF dumps: {time.time() - t0:.1f} s")

if a.engine:
    tf = os.path.join(a.out, "small", "tokens.json")
    json.dump({"prompt_len": a.prompt, "tokens": p0.tolist()}, open(tf, "w"))
    runs = [("cuda", n) for n in ("engine", "hf-bf16")]
    if a.hidden_only:
        runs += [("cpu", n) for n in ("engine", "hf-bf16")]
    for backend, numerics in runs:
        name = f"engine-{backend}-{numerics}" if a.hidden_only else f"engine-{numerics}"
        out = os.path.join(a.out, "small", f"{name}.safetensors")
        cmd = [a.engine, "logits", "--model", wdir, "--weights", "bf16", "--numerics", numerics,
               "--backend", backend, "--tokens", tf, "--out", out]
        t1 = time.time()
        r = subprocess.run(cmd + (["--hidden"] if a.hidden_only else []), capture_output=True, text=True)
        print(f"gapscope-engine logits --backend {backend} --numerics {numerics}: rc={r.returncode} "
              f"{time.time() - t1:.1f} s {r.stdout.strip()} {r.stderr.strip()[-400:]}")
print("device:", torch.cuda.get_device_name(0), "torch", torch.__version__, "transformers", transformers.__version__)
