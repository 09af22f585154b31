#!/usr/bin/env python3
"""llama-batched-bench-like throughput benchmark of HF transformers eager decode.

The baseline the engine is measured against: a random-weight model built from an HF
config.json (e.g. models/llama-3-8b.json) with AutoModelForCausalLM.from_config, in
bfloat16, directly on the GPU, attn_implementation="eager".

For each npl (number of parallel sequences) in --npl, and each repetition:
  1. random prompt ids [npl, npp];
  2. prefill: one forward over the prompts with use_cache=True (logits of the last
     position only, as llama-batched-bench asks for);
  3. ntg decode steps, each feeding the argmax tokens [npl, 1] with past_key_values.
Prefill and the decode loop are timed separately (torch.cuda.synchronize() around each,
time.perf_counter). --warmup untimed repetitions come first, then --reps timed ones.

Reported per npl (median over reps, with min and max):
  S_PP = npl*npp / t_prefill   prompt tokens/s
  S_TG = npl*ntg / t_decode    generated tokens/s (plus its CV = stdev/mean over reps)
  TTFT = t_prefill             ms
  TPOT = t_decode / ntg        ms per decode step (all npl sequences advance one token)

An npl that runs out of GPU memory is recorded as {"npl": N, "error": "OOM"} and the
next one runs. The cache is freed (torch.cuda.empty_cache()) between npl values.

Usage:
  python3 scripts/engine/hf-bench.py --config models/llama-3-8b.json \\
      --npl 1,8,16,32,64,128 --npp 128 --ntg 128 --reps 3 [--warmup 1] [--json OUT]

Weights: the model's own (slow, CPU-side for 8B) init is skipped where transformers
offers no_init_weights; every parameter is then filled on the GPU from a seeded generator:
RMSNorm weights (and any 1-D "*norm*" weight) = 1, biases = 0, everything else
normal(0, 0.02). Values do not affect timing but are never zero or NaN.

Needs torch, transformers (written for torch 2.11 and transformers 5.x; 4.x handled) and a
CUDA GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time


def log(msg: str) -> None:
    print(f"[hf_bench] {msg}", flush=True)


def die(msg: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
    print(f"hf-bench.py: error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def parse_npl(text: str) -> list:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--npl must be comma-separated integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"--npl values must be >= 1, got {text!r}")
    return vals


def read_config_json(path: str) -> dict:
    if not os.path.isfile(path):
        die(f"--config {path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except ValueError as e:
        die(f"--config {path}: not valid JSON ({e})")
    if not isinstance(d, dict) or "model_type" not in d:
        die(f"--config {path}: expected an HF config.json object with a 'model_type'")
    return d


def build_config(d: dict):
    """An HF config from a config.json dict (legacy keys such as rope_theta/torch_dtype are
    standardised by transformers itself, as when loading a checkpoint)."""
    from transformers import AutoConfig

    d = dict(d)
    model_type = d.pop("model_type")
    try:
        cfg = AutoConfig.for_model(model_type, **d)
    except (KeyError, ValueError) as e:
        die(f"transformers does not know model_type {model_type!r}: {e}")
    cfg.use_cache = True
    return cfg


def no_init_context():
    """transformers' no_init_weights context (skips the model's own init), if available."""
    for mod in ("transformers.modeling_utils", "transformers.initialization"):
        try:
            m = __import__(mod, fromlist=["no_init_weights"])
            fn = getattr(m, "no_init_weights", None)
            if fn is not None:
                return fn(), f"{mod}.no_init_weights"
        except Exception:
            continue
    return contextlib.nullcontext(), "none (model's own init runs)"


def build_model(cfg, seed: int):
    import torch
    from transformers import AutoModelForCausalLM

    ctx, ctx_name = no_init_context()
    kw = dict(attn_implementation="eager")
    t0 = time.perf_counter()
    with ctx, torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, **kw)
        except TypeError as e:
            if "dtype" not in str(e):
                raise
            log(f"from_config(dtype=...) refused ({e}); using torch_dtype=")
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16, **kw)
    model = model.to(device="cuda", dtype=torch.bfloat16)
    model.eval()
    torch.cuda.synchronize()
    t_build = time.perf_counter() - t0

    # Fill every parameter on the GPU from one seeded generator (the no-init weights are
    # whatever the allocator held).
    t0 = time.perf_counter()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    norm_like = set()
    for mname, mod in model.named_modules():
        if "norm" in type(mod).__name__.lower():
            for pname, _ in mod.named_parameters(recurse=False):
                norm_like.add(f"{mname}.{pname}" if mname else pname)
    seen = set()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if id(p) in seen:  # tied weights
                continue
            seen.add(id(p))
            if name.endswith(".bias"):
                p.zero_()
            elif name in norm_like or (p.dim() == 1 and "norm" in name):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=gen)
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if t.is_floating_point() and not torch.isfinite(t).all():
                die(f"non-finite values in {name} after initialisation")
    torch.cuda.synchronize()
    t_fill = time.perf_counter() - t0
    return model, {"init_skip": ctx_name, "build_s": round(t_build, 2), "fill_s": round(t_fill, 2)}


def is_oom(e: BaseException) -> bool:
    import torch

    oom_t = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_t is not None and isinstance(e, oom_t):
        return True
    return isinstance(e, RuntimeError) and "out of memory" in str(e).lower()


def one_rep(model, npl: int, npp: int, ntg: int, vocab: int, gen) -> tuple:
    """(t_prefill_s, t_decode_s) for one prefill + ntg decode steps."""
    import torch

    prompt = torch.randint(0, vocab, (npl, npp), device="cuda", generator=gen)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model(input_ids=prompt, use_cache=True, logits_to_keep=1)
    tok = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
    cache = out.past_key_values
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    for _ in range(ntg):
        out = model(input_ids=tok, past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        tok = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    del out, cache, tok, prompt
    return t1 - t0, t2 - t1


def check_logits_to_keep(model) -> None:
    """Fail early, with a clear message, if this transformers has no logits_to_keep."""
    import torch

    with torch.inference_mode():
        ids = torch.zeros((1, 2), dtype=torch.long, device="cuda")
        try:
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        except TypeError as e:
            die(f"model forward does not take logits_to_keep= (transformers too old?): {e}")
        if out.logits.shape[1] != 1:
            die(f"logits_to_keep=1 gave logits of shape {tuple(out.logits.shape)}")


def stats(xs: list) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def cv(xs: list) -> float:
    if len(xs) < 2:
        return 0.0
    m = statistics.mean(xs)
    return statistics.stdev(xs) / m if m else 0.0


def bench_npl(model, npl: int, args, vocab: int) -> dict:
    import torch

    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed + npl)
    t_pp, t_tg = [], []
    with torch.inference_mode():
        for i in range(args.warmup + args.reps):
            tp, tt = one_rep(model, npl, args.npp, args.ntg, vocab, gen)
            timed = i >= args.warmup
            if timed:
                t_pp.append(tp)
                t_tg.append(tt)
            log(f"npl {npl:4d} {'rep ' + str(i - args.warmup + 1) if timed else 'warmup'}: "
                f"prefill {tp * 1e3:9.2f} ms, decode {tt * 1e3:9.2f} ms "
                f"({tt / args.ntg * 1e3:.3f} ms/step, {npl * args.ntg / tt:.1f} tok/s)")
    s_pp = [npl * args.npp / t for t in t_pp]
    s_tg = [npl * args.ntg / t for t in t_tg]
    ttft = [t * 1e3 for t in t_pp]
    tpot = [t / args.ntg * 1e3 for t in t_tg]
    a, b, c, d = stats(s_pp), stats(s_tg), stats(ttft), stats(tpot)
    return {
        "npl": npl,
        "s_pp_median": a["median"], "s_pp_min": a["min"], "s_pp_max": a["max"],
        "s_tg_median": b["median"], "s_tg_min": b["min"], "s_tg_max": b["max"],
        "s_tg_cv": cv(s_tg),
        "ttft_ms_median": c["median"], "ttft_ms_min": c["min"], "ttft_ms_max": c["max"],
        "tpot_ms_median": d["median"], "tpot_ms_min": d["min"], "tpot_ms_max": d["max"],
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
    }


def free_cuda() -> None:
    import torch

    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def table(results: list, npp: int, ntg: int) -> str:
    hdr = (f"{'npl':>5} {'PP':>5} {'TG':>5} {'S_PP t/s':>11} {'S_TG t/s':>11} {'S_TG min':>10} "
           f"{'S_TG max':>10} {'CV':>6} {'TTFT ms':>9} {'TPOT ms':>9} {'TPOT min':>9} {'TPOT max':>9}")
    lines = [hdr, "-" * len(hdr)]
    for r in results:
        if "error" in r:
            lines.append(f"{r['npl']:>5} {npp:>5} {ntg:>5}  {r['error']}")
            continue
        lines.append(
            f"{r['npl']:>5} {npp:>5} {ntg:>5} {r['s_pp_median']:>11.1f} {r['s_tg_median']:>11.1f} "
            f"{r['s_tg_min']:>10.1f} {r['s_tg_max']:>10.1f} {r['s_tg_cv'] * 100:>5.1f}% "
            f"{r['ttft_ms_median']:>9.2f} {r['tpot_ms_median']:>9.3f} {r['tpot_ms_min']:>9.3f} "
            f"{r['tpot_ms_max']:>9.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="hf-bench.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, metavar="CONFIG_JSON",
                   help="HF config.json (e.g. models/llama-3-8b.json, models/llama-3.2-1b.json, "
                        "models/qwen3-0.6b.json)")
    p.add_argument("--npl", type=parse_npl, default=parse_npl("1,8,16,32,64,128"),
                   help="comma-separated numbers of parallel sequences (default 1,8,16,32,64,128)")
    p.add_argument("--npp", type=int, default=128, help="prompt tokens per sequence (default 128)")
    p.add_argument("--ntg", type=int, default=128, help="decode steps / generated tokens per sequence (default 128)")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions per npl (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed repetitions per npl first (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and prompts (default 0)")
    p.add_argument("--json", metavar="OUT", help="write the results as JSON to OUT")
    args = p.parse_args(argv)
    if args.npp < 1 or args.ntg < 1:
        die("--npp and --ntg must be >= 1")
    if args.reps < 1 or args.warmup < 0:
        die("--reps must be >= 1 and --warmup >= 0")

    cfg_dict = read_config_json(args.config)
    try:
        import torch
        import transformers
    except ImportError as e:
        die(f"needs torch and transformers: {e}")
    if not torch.cuda.is_available():
        die("CUDA is not available; hf-bench.py needs a GPU")
    max_pos = cfg_dict.get("max_position_embeddings")
    if isinstance(max_pos, int) and args.npp + args.ntg > max_pos:
        die(f"--npp + --ntg = {args.npp + args.ntg} exceeds max_position_embeddings {max_pos}")

    dev = torch.cuda.get_device_name()
    log(f"torch {torch.__version__} (cuda {torch.version.cuda}), transformers {transformers.__version__}, "
        f"device {dev}")
    cfg = build_config(cfg_dict)
    model, build_info = build_model(cfg, args.seed)
    n_params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    attn = getattr(model.config, "_attn_implementation", None)
    log(f"built {type(model).__name__} from {args.config}: {n_params / 1e9:.3f} B params, attn {attn}, "
        f"init skip: {build_info['init_skip']}, build {build_info['build_s']} s, fill {build_info['fill_s']} s, "
        f"weights {torch.cuda.memory_allocated() / 2**30:.2f} GiB")
    log(f"rope: {getattr(cfg, 'rope_parameters', None) or {'rope_theta': getattr(cfg, 'rope_theta', None), 'rope_scaling': getattr(cfg, 'rope_scaling', None)}}")
    if attn != "eager":
        log(f"WARNING: attention implementation is {attn!r}, not 'eager'")
    check_logits_to_keep(model)
    vocab = cfg.vocab_size

    results = []
    for npl in args.npl:
        free_cuda()
        try:
            results.append(bench_npl(model, npl, args, vocab))
        except Exception as e:  # noqa: BLE001
            if not is_oom(e):
                raise
            log(f"npl {npl}: out of GPU memory ({str(e).splitlines()[0][:160]})")
            results.append({"npl": npl, "error": "OOM"})
            e = None  # drop the traceback's references to the cache before freeing
        free_cuda()

    print()
    print(f"HF transformers eager decode, {os.path.basename(args.config)}, {dev}, "
          f"npp {args.npp}, ntg {args.ntg}, {args.reps} reps (+{args.warmup} warmup), medians:")
    print(table(results, args.npp, args.ntg), flush=True)

    if args.json:
        doc = {
            "device": dev,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "config": args.config,
            "model_type": cfg_dict.get("model_type"),
            "params": n_params,
            "attn_implementation": attn,
            "dtype": "bfloat16",
            "npp": args.npp,
            "ntg": args.ntg,
            "reps": args.reps,
            "warmup": args.warmup,
            "seed": args.seed,
            "build": build_info,
            "results": results,
        }
        d = os.path.dirname(os.path.abspath(args.json))
        os.makedirs(d, exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
