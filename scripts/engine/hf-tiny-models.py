#!/usr/bin/env python3
"""Build four tiny random-weight HF models and their reference greedy logits.

For the engine's correctness tests: each model is small enough to run anywhere in
milliseconds, but exercises the same code paths as the real ones (GQA, RoPE incl. Llama-3
scaling, RMSNorm weights, Qwen3's q_norm/k_norm, Qwen2's q/k/v biases, tied and untied
embeddings).

Models (bfloat16, built on the GPU, attn_implementation="eager"):

  tiny-llama  LlamaForCausalLM: hidden 512, 4 layers, 8 heads / 2 KV heads, head_dim 64,
              FFN 1024, vocab 4096, rope_theta 5e5 with "llama3" scaling (factor 32,
              low/high freq factor 1/4, original max pos 8192), untied lm_head
  tiny-qwen3  Qwen3ForCausalLM: hidden 512, 4 layers, 8 heads / 4 KV heads, head_dim 64,
              FFN 1024, vocab 4096, rope_theta 1e6, tied embeddings, q_norm/k_norm
  tiny-qwen2  Qwen2ForCausalLM: hidden 512, 4 layers, 8 heads / 2 KV heads (head_dim 64),
              FFN 1024, vocab 4096, rope_theta 1e6, untied lm_head, q/k/v biases
  tiny-qwen35 Qwen3_5ForCausalLM (the hybrid): hidden 512, 4 layers (3 gated DeltaNet, then
              1 full attention), 4 heads / 2 KV heads of 256 with a quarter rotated and the
              output gated, DeltaNet 4 key / 8 value heads of 64, conv of 4 taps, FFN 1024,
              vocab 4096, rope_theta 1e7, untied lm_head

Weights: torch.manual_seed(seed), the model's own init (normal, std initializer_range),
then every RMSNorm weight := 1 + 0.1*randn and every bias := 0.02*randn, so norms and
biases matter.

For each model, under DIR/<model>/:

  config.json, model.safetensors   save_pretrained(..., safe_serialization=True); config.json
                                   also gets top-level "rope_theta" (and "rope_scaling" for
                                   tiny-llama) when transformers 5 only wrote
                                   "rope_parameters", so both spellings are present
  tokens.json      {"prompt_len": P, "tokens": [P prompt ids + gen generated ids],
                    "model": "<name>", "dtype": "bfloat16"}
  hf_logits.f32    raw little-endian float32 [gen, vocab], row-major: logits of ONE
                   uncached forward over prompt + first gen-1 generated tokens, at
                   positions P-1 .. P+gen-2 (row i predicts tokens[P+i])
  hf_logits_f32.f32  with --f32-reference: the same full forward with the model cast to
                   float32 (the bf16 weights exactly), a reference without HF's bf16
                   activation roundings, for engines that keep f32 activations
  hf_meta.json     versions, seed, and HF's own consistency figures: greedy (cached loop)
                   tokens vs argmax of the full-forward logits, cached-step logits vs
                   full-forward logits (max/mean relative error, same definition as
                   compare-logits.py), and the top-1 vs top-2 logit margins (small margins
                   mean near-ties that bf16 noise may flip)

The prompt is `--prompt-len` ids drawn with a CPU torch.Generator seeded with --seed; the
generated tokens come from a manual greedy loop with the KV cache (prefill the prompt with
use_cache=True, then feed one token at a time; argmax of the last logits).

Usage:
  python3 scripts/engine/hf-tiny-models.py --out DIR [--seed 0] [--prompt-len 16] [--gen 64]
  python3 scripts/engine/hf-tiny-models.py --out DIR --only tiny-qwen3

Then (see scripts/engine/README.md):
  gapscope-engine logits --model DIR/tiny-llama --tokens DIR/tiny-llama/tokens.json --out e.f32
  python3 scripts/engine/compare-logits.py DIR/tiny-llama --engine e.f32

Needs torch and transformers (written for torch 2.11, transformers 5.x; 4.x also handled)
and, by default, a CUDA GPU.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import sys
import time

MODEL_NAMES = ("tiny-llama", "tiny-qwen3", "tiny-qwen2", "tiny-qwen35")

COMMON = dict(
    hidden_size=512,
    intermediate_size=1024,
    num_hidden_layers=4,
    num_attention_heads=8,
    vocab_size=4096,
    max_position_embeddings=2048,
    hidden_act="silu",
    initializer_range=0.02,
)

# name -> (config class name, model class name, config kwargs, rope_theta, rope scaling or None)
SPECS = {
    "tiny-llama": (
        "LlamaConfig", "LlamaForCausalLM",
        dict(COMMON, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-5, tie_word_embeddings=False,
             attention_bias=False, mlp_bias=False),
        500000.0,
        {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192},
    ),
    "tiny-qwen3": (
        "Qwen3Config", "Qwen3ForCausalLM",
        dict(COMMON, num_key_value_heads=4, head_dim=64, rms_norm_eps=1e-6, tie_word_embeddings=True,
             use_sliding_window=False),
        1000000.0,
        None,
    ),
    "tiny-qwen2": (
        "Qwen2Config", "Qwen2ForCausalLM",
        dict(COMMON, num_key_value_heads=2, rms_norm_eps=1e-6, tie_word_embeddings=False,
             use_sliding_window=False),
        1000000.0,
        None,
    ),
    "tiny-qwen35": (
        "Qwen3_5TextConfig", "Qwen3_5ForCausalLM",
        dict(COMMON, num_attention_heads=4, num_key_value_heads=2, head_dim=256, rms_norm_eps=1e-6,
             tie_word_embeddings=False, full_attention_interval=4, linear_num_key_heads=4,
             linear_num_value_heads=8, linear_key_head_dim=64, linear_value_head_dim=64,
             linear_conv_kernel_dim=4, attn_output_gate=True),
        10000000.0,
        None,
    ),
}

# RoPE settings beside theta and scaling, in the config's rope_parameters (and top level).
EXTRA_ROPE = {
    "tiny-qwen35": {"partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10], "mrope_interleaved": True},
}


def log(msg: str) -> None:
    print(f"[hf_tiny_models] {msg}", flush=True)


def die(msg: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
    print(f"hf-tiny-models.py: error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(2)


# --------------------------------------------------------------------------------------
# transformers 4.x / 5.x compatibility
# --------------------------------------------------------------------------------------


def tf_major() -> int:
    import transformers

    try:
        return int(transformers.__version__.split(".")[0])
    except ValueError:
        return 5


def build_config(name: str):
    """The HF config for one tiny model, with its RoPE set in the version's own spelling."""
    import transformers

    cfg_cls_name, _, kw, theta, scaling = SPECS[name]
    cfg_cls = getattr(transformers, cfg_cls_name)
    kw = dict(kw)
    if tf_major() >= 5:
        # transformers 5 keeps RoPE settings (theta included) in one `rope_parameters` dict.
        rp = {"rope_type": "default"}
        if scaling:
            rp.update(scaling)
        rp.update(EXTRA_ROPE.get(name, {}))
        rp["rope_theta"] = theta
        try:
            cfg = cfg_cls(rope_parameters=rp, **kw)
        except TypeError as e:
            log(f"{cfg_cls_name}(rope_parameters=...) refused ({e}); trying rope_theta/rope_scaling")
            cfg = cfg_cls(rope_theta=theta, rope_scaling=dict(scaling) if scaling else None, **kw)
    else:
        cfg = cfg_cls(rope_theta=theta, rope_scaling=dict(scaling) if scaling else None, **kw)
    cfg.use_cache = True
    check_rope(cfg, name, theta, scaling, "built config")
    return cfg


def effective_rope(cfg_or_dict) -> tuple:
    """(rope_theta, rope_type, scaling dict) from a config object or a config.json dict."""
    get = (cfg_or_dict.get if isinstance(cfg_or_dict, dict)
           else lambda k, d=None: getattr(cfg_or_dict, k, d))
    rp = get("rope_parameters", None)
    rs = get("rope_scaling", None)
    theta = get("rope_theta", None)
    src = {}
    if isinstance(rs, dict):
        src.update(rs)
    if isinstance(rp, dict):
        src.update(rp)
    if theta is None:
        theta = src.get("rope_theta")
    rtype = src.get("rope_type", src.get("type", "default"))
    scaling = {k: v for k, v in src.items() if k not in ("rope_type", "type", "rope_theta")}
    return theta, rtype, scaling


def check_rope(cfg_or_dict, name: str, theta: float, scaling, where: str) -> None:
    got_theta, got_type, got_scaling = effective_rope(cfg_or_dict)
    problems = []
    if got_theta is None or abs(float(got_theta) - theta) > 1e-6 * theta:
        problems.append(f"rope_theta {got_theta!r} != {theta}")
    want_type = scaling["rope_type"] if scaling else "default"
    if got_type != want_type:
        problems.append(f"rope_type {got_type!r} != {want_type!r}")
    for k, v in (scaling or {}).items():
        if k == "rope_type":
            continue
        if k not in got_scaling or float(got_scaling[k]) != float(v):
            problems.append(f"{k} {got_scaling.get(k)!r} != {v}")
    if problems:
        die(f"{name}: RoPE settings lost in the {where}: " + "; ".join(problems)
            + f" (rope_parameters={getattr(cfg_or_dict, 'rope_parameters', None) if not isinstance(cfg_or_dict, dict) else cfg_or_dict.get('rope_parameters')!r})")


def model_from_config(cfg, dtype, device):
    """AutoModelForCausalLM.from_config with dtype= (transformers 5) or torch_dtype= (4.x)."""
    import torch
    from transformers import AutoModelForCausalLM

    kw = dict(attn_implementation="eager")
    with torch.device(device):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, **kw)
        except TypeError as e:
            if "dtype" not in str(e):
                raise
            log(f"from_config(dtype=...) refused ({e}); using torch_dtype=")
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype, **kw)
    return model.to(device=device, dtype=dtype)


def save_model(model, path: str) -> None:
    try:
        model.save_pretrained(path, safe_serialization=True)
    except TypeError as e:
        if "safe_serialization" not in str(e):
            raise
        # transformers versions that only write safetensors dropped the argument
        model.save_pretrained(path)
    if not any(f.endswith(".safetensors") for f in os.listdir(path)):
        die(f"save_pretrained wrote no .safetensors file in {path}: {sorted(os.listdir(path))}")


def patch_saved_config(path: str, name: str, theta: float, scaling) -> list:
    """Make config.json carry top-level rope_theta (and rope_scaling) as well.

    transformers 5 writes only "rope_parameters"; most engines' loaders (and HF checkpoints
    of Llama 3.1) read "rope_theta" and "rope_scaling". Both spellings carry the same values,
    and transformers reads such a file back to the same settings (checked by the caller).
    """
    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path, encoding="utf-8") as f:
        d = json.load(f)
    added = []
    if "rope_theta" not in d:
        d["rope_theta"] = theta
        added.append("rope_theta")
    if scaling and not isinstance(d.get("rope_scaling"), dict):
        d["rope_scaling"] = dict(scaling)
        added.append("rope_scaling")
    for k, v in EXTRA_ROPE.get(name, {}).items():
        if k == "partial_rotary_factor" and k not in d:
            d[k] = v
            added.append(k)
    if added:
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(d, f, indent=2, sort_keys=True)
            f.write("\n")
    check_rope(d, name, theta, scaling, "saved config.json")
    return added


# --------------------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------------------


def perturb_weights(model) -> dict:
    """RMSNorm weights := 1 + 0.1*randn, biases := 0.02*randn (global RNG, seeded)."""
    import torch

    n_norm = n_bias = 0
    with torch.no_grad():
        for mod in model.modules():
            w = getattr(mod, "weight", None)
            if type(mod).__name__.endswith("RMSNorm") and isinstance(w, torch.nn.Parameter):
                w.copy_(1.0 + 0.1 * torch.randn(w.shape, device=w.device, dtype=torch.float32))
                n_norm += 1
        for pname, p in model.named_parameters():
            if pname.endswith(".bias"):
                p.copy_(0.02 * torch.randn(p.shape, device=p.device, dtype=torch.float32))
                n_bias += 1
        for pname, p in list(model.named_parameters()) + list(model.named_buffers()):
            if p.is_floating_point() and not torch.isfinite(p).all():
                die(f"non-finite values in {pname} after initialisation")
    return {"rmsnorm_weights": n_norm, "biases": n_bias}


# --------------------------------------------------------------------------------------
# Decode and logits
# --------------------------------------------------------------------------------------


def rel_err_rows(a, b):
    """Per row: max|a-b| / max|a| (a is the reference), as in compare-logits.py."""
    import torch

    diff = (a - b).abs().amax(dim=1)
    ref = a.abs().amax(dim=1)
    return torch.where(ref > 0, diff / ref.clamp_min(1e-30), diff)


def f32_bytes(t) -> bytes:
    """Raw little-endian float32 bytes of a tensor (numpy when present, else array)."""
    import torch

    t = t.detach().to(device="cpu", dtype=torch.float32).contiguous()
    try:
        import numpy  # noqa: F401

        return t.numpy().astype("<f4", copy=False).tobytes()
    except ImportError:
        a = array.array("f", t.flatten().tolist())  # float32 -> double -> float32 is exact
        if sys.byteorder == "big":
            a.byteswap()
        return a.tobytes()


def run_model(name: str, args, device: str) -> dict:
    import torch
    import transformers

    _, model_cls_name, kw, theta, scaling = SPECS[name]
    out_dir = os.path.join(args.out, name)
    os.makedirs(out_dir, exist_ok=True)

    torch.manual_seed(args.seed)
    cfg = build_config(name)
    t0 = time.perf_counter()
    model = model_from_config(cfg, torch.bfloat16, device)
    model.eval()
    if type(model).__name__ != model_cls_name:
        die(f"{name}: expected {model_cls_name}, from_config built {type(model).__name__}")
    counts = perturb_weights(model)
    attn = getattr(model.config, "_attn_implementation", None)
    n_params = sum(p.numel() for p in model.parameters())
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    devs = sorted({str(p.device) for p in model.parameters()})
    log(f"{name}: {type(model).__name__}, {n_params / 1e6:.2f} M params, dtypes {dtypes}, devices {devs}, "
        f"attn {attn}, {counts['rmsnorm_weights']} RMSNorm weights and {counts['biases']} biases perturbed "
        f"({time.perf_counter() - t0:.1f} s)")
    if name == "tiny-qwen2" and counts["biases"] != 3 * kw["num_hidden_layers"]:
        die(f"{name}: expected {3 * kw['num_hidden_layers']} q/k/v biases, found {counts['biases']}")
    if name == "tiny-qwen3" and counts["rmsnorm_weights"] != 4 * kw["num_hidden_layers"] + 1:
        die(f"{name}: expected {4 * kw['num_hidden_layers'] + 1} RMSNorms (incl. q_norm/k_norm), "
            f"found {counts['rmsnorm_weights']}")

    save_model(model, out_dir)
    added = patch_saved_config(out_dir, name, theta, scaling)
    # The saved directory must load back with the same RoPE settings.
    re_cfg = transformers.AutoConfig.from_pretrained(out_dir)
    check_rope(re_cfg, name, theta, scaling, "config reloaded by AutoConfig")
    with open(os.path.join(out_dir, "config.json"), encoding="utf-8") as f:
        saved_cfg_text = f.read()
    print(f"----- {out_dir}/config.json"
          + (f" (added top-level {', '.join(added)})" if added else "") + " -----")
    print(saved_cfg_text.rstrip())
    print("-----")

    vocab = cfg.vocab_size
    P, G = args.prompt_len, args.gen
    gen_cpu = torch.Generator(device="cpu")
    gen_cpu.manual_seed(args.seed)
    prompt = torch.randint(0, vocab, (P,), generator=gen_cpu, dtype=torch.long)

    with torch.inference_mode():
        # Greedy decode with the KV cache, by hand.
        ids = prompt.to(device).unsqueeze(0)
        out = model(input_ids=ids, use_cache=True)
        cache = out.past_key_values
        step_logits = [out.logits[0, -1].float()]
        tok = step_logits[-1].argmax()
        generated = [int(tok)]
        for _ in range(G - 1):
            out = model(input_ids=tok.view(1, 1), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            step_logits.append(out.logits[0, -1].float())
            tok = step_logits[-1].argmax()
            generated.append(int(tok))
        cached = torch.stack(step_logits)  # [G, vocab]
        del cache, out

        # One uncached forward over prompt + first G-1 generated tokens.
        tokens = prompt.tolist() + generated
        full_in = torch.tensor(tokens[: P + G - 1], dtype=torch.long, device=device).unsqueeze(0)
        full = model(input_ids=full_in, use_cache=False).logits[0].float()
        if full.shape != (P + G - 1, vocab):
            die(f"{name}: full forward gave logits {tuple(full.shape)}, expected {(P + G - 1, vocab)}")
        rows = full[P - 1: P + G - 1].contiguous()  # [G, vocab]; row i predicts tokens[P + i]
        assert rows.shape == (G, vocab)
        if not torch.isfinite(rows).all():
            die(f"{name}: non-finite HF logits")

        full_arg = rows.argmax(dim=1).cpu()
        agree = float((full_arg == torch.tensor(generated)).float().mean())
        rel = rel_err_rows(rows, cached)
        top2 = rows.topk(2, dim=1).values
        margin = (top2[:, 0] - top2[:, 1]).cpu()

    with open(os.path.join(out_dir, "hf_logits.f32"), "wb") as f:
        f.write(f32_bytes(rows))
    f32_vs_bf16 = None
    if args.f32_reference:
        with torch.inference_mode():
            model = model.float()
            full32 = model(input_ids=full_in, use_cache=False).logits[0].float()
            rows32 = full32[P - 1: P + G - 1].contiguous()
            f32_vs_bf16 = float(rel_err_rows(rows32, rows).max())
            # How far the logits move without each token mixer's output (its out projection
            # zeroed): a wrong mixer in an engine should show far above the bf16 noise.
            ablated = {}
            for tag, suffix in (("linear_attn", "linear_attn.out_proj.weight"),
                                ("self_attn", "self_attn.o_proj.weight")):
                params = [p for n, p in model.named_parameters() if n.endswith(suffix)]
                if not params:
                    continue
                saved = [p.detach().clone() for p in params]
                for p in params:
                    p.zero_()
                abl = model(input_ids=full_in, use_cache=False).logits[0].float()[P - 1: P + G - 1]
                ablated[f"f32_without_{tag}_max_rel_err"] = float(rel_err_rows(rows32, abl).max())
                for p, v in zip(params, saved):
                    p.copy_(v)
        with open(os.path.join(out_dir, "hf_logits_f32.f32"), "wb") as f:
            f.write(f32_bytes(rows32))
    with open(os.path.join(out_dir, "tokens.json"), "w", encoding="utf-8") as f:
        json.dump({"prompt_len": P, "tokens": tokens, "model": name, "dtype": "bfloat16"}, f)
        f.write("\n")
    meta = {
        "model": name,
        "architecture": model_cls_name,
        "seed": args.seed,
        "prompt_len": P,
        "gen": G,
        "vocab": vocab,
        "params": n_params,
        "attn_implementation": attn,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else device,
        "greedy_vs_full_top1_agreement": agree,
        "cached_vs_full_max_rel_err": float(rel.max()),
        "cached_vs_full_mean_rel_err": float(rel.mean()),
        "top1_margin_min": float(margin.min()),
        "top1_margin_median": float(margin.median()),
        "rows_with_exact_top1_tie": int((margin == 0).sum()),
        "rows_with_top1_margin_below_0.02": int((margin < 0.02).sum()),
        "hf_logits_abs_max": float(rows.abs().max()),
        "rope": {"rope_theta": theta, "scaling": scaling},
        "config_added_keys": added,
        "perturbed": counts,
        "f32_reference_vs_bf16_max_rel_err": f32_vs_bf16,
        **(ablated if args.f32_reference else {}),
    }
    with open(os.path.join(out_dir, "hf_meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    print(f"{name}: {n_params / 1e6:.2f}M params, P={P} gen={G} vocab={vocab}; greedy(cached) vs "
          f"full-forward argmax agreement {agree:.4f}; cached vs full logits max rel err "
          f"{meta['cached_vs_full_max_rel_err']:.3e} (mean {meta['cached_vs_full_mean_rel_err']:.3e}); "
          f"top1 margin min {meta['top1_margin_min']:.3e} median {meta['top1_margin_median']:.3e}, "
          f"{meta['rows_with_exact_top1_tie']} exact ties, {meta['rows_with_top1_margin_below_0.02']} rows < 0.02 "
          f"-> {out_dir}", flush=True)
    return meta


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="hf-tiny-models.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and prompt (default 0)")
    p.add_argument("--prompt-len", type=int, default=16, help="prompt tokens P (default 16)")
    p.add_argument("--gen", type=int, default=64, help="generated tokens = logits rows (default 64)")
    p.add_argument("--only", metavar="NAMES", default=",".join(MODEL_NAMES),
                   help=f"comma-separated subset of {','.join(MODEL_NAMES)} (default: all)")
    p.add_argument("--device", default="cuda", help="torch device (default cuda; 'cpu' only for debugging)")
    p.add_argument("--f32-reference", action="store_true",
                   help="also write hf_logits_f32.f32: the full forward with the model in float32")
    args = p.parse_args(argv)

    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SPECS]
    if unknown or not names:
        die(f"--only: unknown model(s) {unknown}; known: {', '.join(MODEL_NAMES)}")
    if args.prompt_len < 1:
        die("--prompt-len must be >= 1")
    if args.gen < 1:
        die("--gen must be >= 1")
    if args.prompt_len + args.gen > COMMON["max_position_embeddings"]:
        die(f"--prompt-len + --gen must be <= {COMMON['max_position_embeddings']}")

    try:
        import torch
        import transformers
    except ImportError as e:
        die(f"needs torch and transformers: {e}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        die("CUDA is not available (use a GPU machine, or --device cpu to debug)")
    log(f"torch {torch.__version__} (cuda {torch.version.cuda}), transformers {transformers.__version__}, "
        f"device {torch.cuda.get_device_name() if args.device.startswith('cuda') else args.device}")
    os.makedirs(args.out, exist_ok=True)
    for n in names:
        run_model(n, args, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
