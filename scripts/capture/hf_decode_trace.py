#!/usr/bin/env python3
"""Capture a PyTorch profiler (Kineto) Chrome trace of batched greedy LLM decode.

The model is a random-weight Hugging Face transformers model (LlamaForCausalLM or
Qwen3ForCausalLM) built from a preset or a JSON config, in bf16, directly on the GPU.
Decode is done by hand:

  1. prefill: `--npp` random prompt token ids for each of `--npl` sequences, filling a
     DynamicCache;
  2. `--warmup` untraced greedy decode steps;
  3. `--bench-steps` untraced, timed decode steps (gives the untraced tok/s);
  4. `--steps` traced decode steps under torch.profiler.profile, each wrapped in
     record_function("decode_step").

The Chrome trace is exported and gzipped to `--out`. The script prints tok/s and the
number of kernel events in the trace, and a final JSON line (prefix `RESULT `) with the
figures, for logs.

Examples:
  python3 hf_decode_trace.py --preset qwen3-0.6b --npl 1 --npp 64 --warmup 4 --steps 16 \
      --out hf-qwen3-0.6b-npl1.json.gz
  python3 hf_decode_trace.py --preset llama3-8b --record-shapes --out t.json.gz
  python3 hf_decode_trace.py --config '{"arch": "llama", "hidden_size": 512, ...}' ...
  python3 hf_decode_trace.py --config @my_config.json ...
  python3 hf_decode_trace.py --preset llama3.2-1b --cpu-only --steps 4 --out cpu.json.gz

Needs a CUDA GPU, torch and transformers (written against torch 2.11 and transformers 5.17).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import random
import shutil
import sys
import tempfile
import time

# Presets: HF config fields (plus "arch"). rope_theta is turned into rope_parameters.
PRESETS: dict[str, dict] = {
    "llama3.2-1b": {
        "arch": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 131072,
        "hidden_act": "silu",
    },
    "llama3-8b": {
        "arch": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
    },
    "qwen3-0.6b": {
        "arch": "qwen3",
        "hidden_size": 1024,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 3072,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 40960,
        "hidden_act": "silu",
        "use_sliding_window": False,
    },
}

ARCHES = ("llama", "qwen3")


def log(msg: str) -> None:
    print(f"[hf_decode_trace] {msg}", flush=True)


def load_config_spec(args: argparse.Namespace) -> tuple[str, dict]:
    """Return (name, config dict with 'arch') from --preset and/or --config."""
    spec: dict = {}
    name = "custom"
    if args.preset:
        if args.preset not in PRESETS:
            raise SystemExit(f"unknown preset {args.preset!r}; known: {', '.join(PRESETS)}")
        spec.update(PRESETS[args.preset])
        name = args.preset
    if args.config:
        text = args.config
        if text.startswith("@"):
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        extra = json.loads(text)
        if not isinstance(extra, dict):
            raise SystemExit("--config must be a JSON object")
        spec.update(extra)  # overrides the preset's fields
        if not args.preset:
            name = extra.get("name", "custom")
    if not spec:
        raise SystemExit("give --preset or --config")
    spec.pop("name", None)
    if args.arch:
        spec["arch"] = args.arch
    arch = spec.get("arch")
    if arch is None:
        mt = spec.get("model_type")
        arch = {"llama": "llama", "qwen3": "qwen3"}.get(mt, "llama")
        spec["arch"] = arch
    if spec["arch"] not in ARCHES:
        raise SystemExit(f"arch must be one of {ARCHES}, got {spec['arch']!r}")
    return name, spec


def build_hf_config(spec: dict):
    from transformers import LlamaConfig, Qwen3Config

    kw = {k: v for k, v in spec.items() if k not in ("arch", "model_type")}
    # transformers 5 keeps rope_theta inside rope_parameters; pass it that way (older
    # versions accept the plain rope_theta keyword instead).
    theta = kw.pop("rope_theta", None)
    if theta is not None and "rope_parameters" not in kw:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": float(theta)}
    cls = LlamaConfig if spec["arch"] == "llama" else Qwen3Config
    try:
        cfg = cls(**kw)
    except TypeError:
        # Older transformers without rope_parameters.
        rp = kw.pop("rope_parameters", None)
        if rp is not None:
            kw["rope_theta"] = rp.get("rope_theta", theta)
        cfg = cls(**kw)
    cfg.use_cache = True
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:  # pragma: no cover - very old transformers
        cfg.attn_implementation = "sdpa"
    return cfg


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))


def build_model(spec: dict, dtype):
    import torch
    from transformers import LlamaForCausalLM, Qwen3ForCausalLM

    cfg = build_hf_config(spec)
    cls = LlamaForCausalLM if spec["arch"] == "llama" else Qwen3ForCausalLM
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda"):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(prev)
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    dtypes = collections.Counter(str(p.dtype) for p in model.parameters())
    devs = collections.Counter(str(p.device) for p in model.parameters())
    return model, cfg, n_params, dict(dtypes), dict(devs)


def new_cache(cfg):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=cfg)
    except TypeError:
        return DynamicCache()


def count_trace(path_json: str) -> dict:
    with open(path_json, "rb") as f:
        d = json.load(f)
    ev = d.get("traceEvents", [])
    by = collections.Counter((e.get("ph"), e.get("cat")) for e in ev)
    steps_cpu = sum(
        1 for e in ev if e.get("cat") == "user_annotation" and e.get("name") == "decode_step"
    )
    steps_gpu = sum(
        1 for e in ev if e.get("cat") == "gpu_user_annotation" and e.get("name") == "decode_step"
    )
    return {
        "events": len(ev),
        "kernels": by.get(("X", "kernel"), 0),
        "cuda_runtime": by.get(("X", "cuda_runtime"), 0),
        "cpu_op": by.get(("X", "cpu_op"), 0),
        "decode_step_cpu": steps_cpu,
        "decode_step_gpu": steps_gpu,
        "displayTimeUnit": d.get("displayTimeUnit"),
        "by_ph_cat": {f"{k[0]}/{k[1]}": v for k, v in sorted(by.items(), key=lambda kv: -kv[1])},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), help="model shape preset")
    p.add_argument("--config", help="HF config as a JSON object (or @file.json); overrides preset fields; "
                   "may hold \"arch\": \"llama\"|\"qwen3\" and \"rope_theta\"")
    p.add_argument("--arch", choices=ARCHES, help="override the architecture")
    p.add_argument("--npl", type=int, default=1, help="parallel sequences (batch size)")
    p.add_argument("--npp", type=int, default=128, help="prompt tokens per sequence")
    p.add_argument("--warmup", type=int, default=4, help="untraced warm-up decode steps")
    p.add_argument("--bench-steps", type=int, default=8,
                   help="untraced timed decode steps after warm-up (for the untraced tok/s); 0 to skip")
    p.add_argument("--steps", type=int, default=32, help="traced decode steps")
    p.add_argument("--cpu-only", action="store_true",
                   help="profile CPU activities only (the trace then holds no GPU events)")
    p.add_argument("--record-shapes", action="store_true", help="torch.profiler record_shapes=True")
    p.add_argument("--no-step-sync", action="store_true",
                   help="do not torch.cuda.synchronize() at the end of each decode step "
                   "(default: sync inside each step, as HF generate's stop check does)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="output path; .gz is added if missing")
    p.add_argument("--keep-json", action="store_true", help="also keep the uncompressed JSON")
    p.add_argument("--gzip-level", type=int, default=6)
    args = p.parse_args(argv)

    name, spec = load_config_spec(args)
    out = args.out if args.out.endswith(".gz") else args.out + ".gz"

    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile, record_function

    if not torch.cuda.is_available():
        raise SystemExit("CUDA is not available")
    dev_name = torch.cuda.get_device_name(0)
    log(f"torch {torch.__version__} (cuda {torch.version.cuda}), transformers {transformers.__version__}, "
        f"device {dev_name}")
    log(f"model {name}: {json.dumps(spec, sort_keys=True)}")

    seed_everything(args.seed)
    t0 = time.perf_counter()
    model, cfg, n_params, dtypes, devs = build_model(spec, torch.bfloat16)
    torch.cuda.synchronize()
    log(f"built {type(model).__name__} with {n_params / 1e9:.3f} B params in {time.perf_counter() - t0:.1f} s; "
        f"dtypes {dtypes}, devices {devs}, attn {getattr(cfg, '_attn_implementation', None)}")

    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    prompt = torch.randint(0, cfg.vocab_size, (args.npl, args.npp), device="cuda", generator=gen)

    def step(tok, cache):
        out_ = model(input_ids=tok, past_key_values=cache, use_cache=True, logits_to_keep=1)
        nxt = out_.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        return nxt, out_.past_key_values

    n_decoded = 0
    with torch.inference_mode():
        cache = new_cache(cfg)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tok, cache = step(prompt, cache)
        torch.cuda.synchronize()
        t_prefill = time.perf_counter() - t0
        log(f"prefill {args.npl}x{args.npp} tokens: {t_prefill * 1e3:.1f} ms")

        for _ in range(args.warmup):
            tok, cache = step(tok, cache)
            if not args.no_step_sync:
                torch.cuda.synchronize()
        torch.cuda.synchronize()

        untraced_tps = None
        untraced_step_ms = None
        if args.bench_steps > 0:
            t0 = time.perf_counter()
            for _ in range(args.bench_steps):
                tok, cache = step(tok, cache)
                if not args.no_step_sync:
                    torch.cuda.synchronize()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            untraced_tps = args.bench_steps * args.npl / dt
            untraced_step_ms = dt / args.bench_steps * 1e3
            log(f"untraced decode: {args.bench_steps} steps, {untraced_step_ms:.2f} ms/step, "
                f"{untraced_tps:.1f} tok/s")

        meta = {
            "tool": "gapscope scripts/capture/hf_decode_trace.py",
            "model": name,
            "config": spec,
            "npl": args.npl,
            "npp": args.npp,
            "warmup": args.warmup,
            "bench_steps": args.bench_steps,
            "steps": args.steps,
            "cpu_only": args.cpu_only,
            "record_shapes": args.record_shapes,
            "step_sync": not args.no_step_sync,
            "seed": args.seed,
            "device": dev_name,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        activities = [ProfilerActivity.CPU]
        if not args.cpu_only:
            activities.append(ProfilerActivity.CUDA)
        prof = profile(activities=activities, record_shapes=args.record_shapes)
        torch.cuda.synchronize()
        with prof:
            try:  # optional: top-level "gapscope_capture" field in the trace
                prof.add_metadata_json("gapscope_capture", json.dumps(meta))
            except Exception as e:
                log(f"add_metadata_json failed (ignored): {e!r}")
            t0 = time.perf_counter()
            for _ in range(args.steps):
                with record_function("decode_step"):
                    tok, cache = step(tok, cache)
                    if not args.no_step_sync:
                        torch.cuda.synchronize()
            torch.cuda.synchronize()
            dt_traced = time.perf_counter() - t0
        n_decoded = args.steps * args.npl
    traced_tps = n_decoded / dt_traced
    log(f"traced decode: {args.steps} steps, {dt_traced / args.steps * 1e3:.2f} ms/step, "
        f"{traced_tps:.1f} tok/s (with profiler overhead)")

    tmpdir = tempfile.mkdtemp(prefix="hf_trace_")
    json_path = os.path.join(tmpdir, os.path.basename(out)[: -len(".gz")] or "trace.json")
    if not json_path.endswith(".json"):
        json_path += ".json"
    t0 = time.perf_counter()
    prof.export_chrome_trace(json_path)
    t_export = time.perf_counter() - t0
    json_bytes = os.path.getsize(json_path)
    counts = count_trace(json_path)
    t0 = time.perf_counter()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(json_path, "rb") as fi, gzip.open(out, "wb", compresslevel=args.gzip_level) as fo:
        shutil.copyfileobj(fi, fo, length=1 << 22)
    t_gzip = time.perf_counter() - t0
    if args.keep_json:
        shutil.copy(json_path, out[: -len(".gz")])
    shutil.rmtree(tmpdir, ignore_errors=True)
    gz_bytes = os.path.getsize(out)

    log(f"trace: {counts['events']} events, {counts['kernels']} kernel events, "
        f"{counts['cuda_runtime']} cuda_runtime, {counts['cpu_op']} cpu_op, "
        f"decode_step cpu/gpu {counts['decode_step_cpu']}/{counts['decode_step_gpu']}")
    log(f"wrote {out}: json {json_bytes / 2**20:.1f} MiB, gz {gz_bytes / 2**20:.2f} MiB "
        f"(export {t_export:.1f} s, gzip {t_gzip:.1f} s)")
    print(f"tok/s untraced: {untraced_tps if untraced_tps is None else round(untraced_tps, 1)}  "
          f"traced: {traced_tps:.1f}")
    print(f"kernel events: {counts['kernels']}")
    result = dict(meta)
    result.update({
        "out": out,
        "params": n_params,
        "prefill_ms": round(t_prefill * 1e3, 3),
        "untraced_step_ms": None if untraced_step_ms is None else round(untraced_step_ms, 3),
        "untraced_tok_s": None if untraced_tps is None else round(untraced_tps, 2),
        "traced_step_ms": round(dt_traced / args.steps * 1e3, 3),
        "traced_tok_s": round(traced_tps, 2),
        "json_bytes": json_bytes,
        "gz_bytes": gz_bytes,
        **counts,
    })
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
