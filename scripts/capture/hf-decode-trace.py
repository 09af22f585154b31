#!/usr/bin/env python3
# Long on purpose: one self-contained capture script for the GPU machine (model presets, the
# hand-written decode loop, the profiler schedule and the checks of what it wrote).
"""Capture a PyTorch profiler (Kineto) Chrome trace of batched greedy LLM decode.

The model is a random-weight Hugging Face transformers model (LlamaForCausalLM,
Qwen3ForCausalLM or the hybrid Qwen3NextForCausalLM: gated-DeltaNet linear attention, one
full-attention layer in four, MoE MLP) built from a preset or a JSON config, in bf16, directly
on the GPU. Decode is done by hand:

  1. prefill: `--npp` random prompt token ids for each of `--npl` sequences, filling a
     DynamicCache;
  2. `--warmup` untraced greedy decode steps;
  3. `--bench-steps` untraced, timed decode steps (gives the untraced tok/s);
  4. `--steps` traced decode steps under torch.profiler.profile, each wrapped in
     record_function("decode_step").

The Chrome trace is exported and gzipped to `--out`. The script prints tok/s and the
number of kernel events in the trace, and a final JSON line (prefix `RESULT `) with the
figures, for logs.

`--no-profiler` runs the same steps without torch.profiler, for recording the script under
another tool (gapscope-record, nsys): the traced steps then sit between
torch.cuda.profiler.start() and stop() (cudaProfilerStart/Stop, for
`--capture-range cudaProfilerApi`), each inside an NVTX range `decode_step` (`--nvtx steps`,
the default there); `--nvtx modules` adds one NVTX range per nn.Module call, named as
torch.profiler names modules (`nn.Module: Qwen3NextGatedDeltaNet_0`). No trace is written.

`--sdpa-backend` pins torch's scaled_dot_product_attention to one backend for the whole run
(prefill and decode), through torch.nn.attention.sdpa_kernel; `default` leaves torch's choice.

Examples:
  python3 hf-decode-trace.py --preset qwen3-0.6b --npl 1 --npp 64 --warmup 4 --steps 16 \
      --out hf-qwen3-0.6b-npl1.json.gz
  python3 hf-decode-trace.py --preset llama3-8b --record-shapes --out t.json.gz
  python3 hf-decode-trace.py --config '{"arch": "llama", "hidden_size": 512, ...}' ...
  python3 hf-decode-trace.py --config @my_config.json ...
  python3 hf-decode-trace.py --preset llama3.2-1b --cpu-only --steps 4 --out cpu.json.gz
  python3 hf-decode-trace.py --preset llama3.2-1b --npl 8 --with-stack --with-modules \
      --sdpa-backend math --out math.json.gz
  python3 hf-decode-trace.py --preset qwen3-next-small --npl 1 --npp 32 --steps 16 \
      --with-stack --with-modules --out qwen3next.json.gz
  gapscope-record --capture-range cudaProfilerApi -o rec.gst -- \
      python3 hf-decode-trace.py --preset qwen3-next-small --no-profiler --nvtx modules
  python3 hf-decode-trace.py --preset qwen3-next-small --print-config   # no torch needed

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
    # Qwen3-Next-80B-A3B's per-layer shapes (hidden 2048, 16 query / 2 KV heads of 256 with
    # gated output, gated DeltaNet with 16 key / 32 value heads of 128 and a 4-tap conv,
    # partial rotary 0.25), cut to 8 layers (layers 3 and 7 full attention, the rest
    # DeltaNet) and 32 experts (top 4) of 512 plus a shared expert of 512, so that it fits
    # any GPU and a traced step stays small.
    "qwen3-next-small": {
        "arch": "qwen3_next",
        "hidden_size": 2048,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "intermediate_size": 5120,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "decoder_sparse_step": 1,
        "num_experts": 32,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "norm_topk_prob": True,
        "full_attention_interval": 4,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "rope_theta": 10000000.0,
        "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 262144,
        "hidden_act": "silu",
    },
}

ARCHES = ("llama", "qwen3", "qwen3_next")
# HF model_type -> arch (a --config taken from a checkpoint's config.json names model_type).
MODEL_TYPES = {"llama": "llama", "qwen3": "qwen3", "qwen3_next": "qwen3_next"}
SDPA_BACKENDS = ("default", "math", "cudnn", "flash", "efficient")
NVTX_MODES = ("auto", "none", "steps", "modules")
EXPERTS_IMPLS = ("default", "eager", "grouped_mm", "batched_mm")


def log(msg: str) -> None:
    print(f"[hf-decode-trace] {msg}", flush=True)


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
        arch = MODEL_TYPES.get(mt, "llama")
        spec["arch"] = arch
    if spec["arch"] not in ARCHES:
        raise SystemExit(f"arch must be one of {ARCHES}, got {spec['arch']!r}")
    return name, spec


def config_class(arch: str):
    """The transformers config and model classes of an arch (imports transformers)."""
    if arch == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        return LlamaConfig, LlamaForCausalLM
    if arch == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM

        return Qwen3Config, Qwen3ForCausalLM
    if arch == "qwen3_next":
        from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

        return Qwen3NextConfig, Qwen3NextForCausalLM
    raise SystemExit(f"arch must be one of {ARCHES}, got {arch!r}")


def config_kwargs(spec: dict, experts_impl: str = "default") -> dict:
    """Keyword arguments for the arch's config class (no transformers import)."""
    kw = {k: v for k, v in spec.items() if k not in ("arch", "model_type")}
    # transformers 5 keeps rope_theta (and the partial rotary factor) inside rope_parameters;
    # pass them that way (older versions accept the plain keywords instead).
    theta = kw.pop("rope_theta", None)
    partial = kw.pop("partial_rotary_factor", None)
    if theta is not None and "rope_parameters" not in kw:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": float(theta)}
        if partial is not None:
            kw["rope_parameters"]["partial_rotary_factor"] = float(partial)
    elif partial is not None:
        kw["partial_rotary_factor"] = float(partial)
    if experts_impl != "default":
        kw["experts_implementation"] = experts_impl
    return kw


def build_hf_config(spec: dict, experts_impl: str = "default"):
    cls, _ = config_class(spec["arch"])
    kw = config_kwargs(spec, experts_impl)
    try:
        cfg = cls(**kw)
    except TypeError:
        # Older transformers without rope_parameters.
        rp = kw.pop("rope_parameters", None)
        if rp is not None:
            kw["rope_theta"] = rp.get("rope_theta")
            if "partial_rotary_factor" in rp:
                kw["partial_rotary_factor"] = rp["partial_rotary_factor"]
        cfg = cls(**kw)
    cfg.use_cache = True
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:  # pragma: no cover - very old transformers
        cfg.attn_implementation = "sdpa"
    return cfg


def config_summary(cfg) -> dict:
    """The fields of a built HF config that decide the trace's shape (JSON-able)."""
    keys = (
        "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
        "tie_word_embeddings", "rope_parameters", "layer_types", "linear_num_key_heads",
        "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
        "linear_conv_kernel_dim", "num_experts", "num_experts_per_tok",
        "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step",
        "mlp_only_layers",
    )
    out = {}
    for k in keys:
        if hasattr(cfg, k):
            v = getattr(cfg, k)
            try:
                json.dumps(v)
            except TypeError:
                v = repr(v)
            out[k] = v
    for k in ("_attn_implementation", "_experts_implementation"):
        try:
            out[k] = getattr(cfg, k)
        except Exception:  # noqa: BLE001 - a property may raise on old versions
            pass
    return out


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))


def build_model(spec: dict, dtype, experts_impl: str = "default"):
    import torch

    cfg = build_hf_config(spec, experts_impl)
    _, cls = config_class(spec["arch"])
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


def sdpa_context(backend: str):
    """A context manager pinning torch SDPA to `backend` (a no-op for "default")."""
    import contextlib

    if backend == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {
        "math": SDPBackend.MATH,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }[backend]
    return sdpa_kernel(which)


def _closure_vars(fn) -> dict:
    """Closure variables of a (possibly wrapped) function, {} when there are none."""
    import inspect

    try:
        return dict(inspect.getclosurevars(fn).nonlocals)
    except (TypeError, ValueError):
        return {}


def linear_attn_paths(model) -> dict:
    """Which implementation the gated-DeltaNet layers of a Qwen3-Next model call.

    transformers 5.17 resolves each of `torch_recurrent_gated_delta_rule` (decode),
    `torch_chunk_gated_delta_rule` (prefill), `causal_conv1d_update` and `causal_conv1d_fn` at
    import: the flash-linear-attention / causal-conv1d package's kernel when it imports, else
    the PyTorch reference function (the "fallback"). Older versions keep the choice as
    attributes of each layer. Returns {function: "module.qualname (pytorch fallback|package)"}
    plus which optional packages import.
    """
    import importlib
    import importlib.util

    out: dict = {}
    for pkg in ("fla", "causal_conv1d", "kernels"):
        try:
            out[f"package_{pkg}"] = importlib.util.find_spec(pkg) is not None
        except (ImportError, ValueError):
            out[f"package_{pkg}"] = False
    mod = None
    for _, m in model.named_modules():
        if type(m).__name__.endswith("GatedDeltaNet"):
            mod = m
            break
    if mod is None:
        out["gated_deltanet_layers"] = 0
        return out
    out["gated_deltanet_layers"] = sum(
        1 for _, m in model.named_modules() if type(m).__name__.endswith("GatedDeltaNet")
    )
    module = importlib.import_module(type(mod).__module__)
    if hasattr(module, "is_fast_path_available"):
        out["is_fast_path_available"] = bool(module.is_fast_path_available)
    names = ("torch_recurrent_gated_delta_rule", "torch_chunk_gated_delta_rule",
             "causal_conv1d_update", "causal_conv1d_fn")
    attr_names = ("recurrent_gated_delta_rule", "chunk_gated_delta_rule",
                  "causal_conv1d_update", "causal_conv1d_fn")
    for name, attr in zip(names, attr_names):
        fn = getattr(mod, attr, None)  # older transformers: chosen per layer
        if fn is None:
            fn = getattr(module, name, None)
        if fn is None:
            out[name] = "absent"
            continue
        impl = fn
        cv: dict = {}
        f = fn
        for _ in range(4):  # the fallback wrapper may sit under other decorators
            cv = _closure_vars(f)
            if "implementation" in cv or not hasattr(f, "__wrapped__"):
                break
            f = f.__wrapped__
        if "implementation" in cv:  # use_kernel_func_from_hub_with_fallback's wrapper
            impl = cv["implementation"]
        qual = f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', repr(impl))}"
        is_torch = getattr(impl, "__module__", "") == module.__name__
        if "is_new_implementation" in cv:
            is_torch = not cv["is_new_implementation"]
        out[name] = f"{qual} ({'pytorch fallback' if is_torch else 'package kernel'})"
    return out


def install_nvtx_module_ranges(model) -> int:
    """Push an NVTX range around every nn.Module call of `model`, named as torch.profiler
    names modules ("nn.Module: <Class>_<k>", k counting that class's instances in
    named_modules() order). Returns the number of modules hooked."""
    import torch

    per_class: collections.Counter = collections.Counter()
    n = 0
    for _, m in model.named_modules():
        cls = type(m).__name__
        label = f"nn.Module: {cls}_{per_class[cls]}"
        per_class[cls] += 1

        def pre(_mod, _args, _label=label):
            torch.cuda.nvtx.range_push(_label)

        def post(_mod, _args, _out):
            torch.cuda.nvtx.range_pop()

        m.register_forward_pre_hook(pre)
        m.register_forward_hook(post)
        n += 1
    return n


def new_cache(cfg):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=cfg)
    except TypeError:
        return DynamicCache()


def _step_gaps(ev: list) -> dict:
    """Per traced step (gpu_user_annotation decode_step): GPU busy share and the largest
    GPU-idle gap between the step's kernels/memops, medians over the steps, in ms."""
    import statistics

    steps = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in ev
        if e.get("cat") == "gpu_user_annotation" and e.get("name") == "decode_step" and "ts" in e
    )
    work = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "ts" in e
    )
    if not steps or not work:
        return {}
    busy_pct, max_gap_ms, span_ms = [], [], []
    i = 0
    for s0, s1 in steps:
        while i < len(work) and work[i][0] < s0:
            i += 1
        j = i
        busy = 0.0
        gap = 0.0
        cur_end = None
        while j < len(work) and work[j][0] < s1:
            a, b = work[j]
            if cur_end is None:
                busy += b - a
                cur_end = b
            elif a > cur_end:
                gap = max(gap, a - cur_end)
                busy += b - a
                cur_end = b
            elif b > cur_end:
                busy += b - cur_end
                cur_end = b
            j += 1
        span = s1 - s0
        if span > 0:
            busy_pct.append(100.0 * busy / span)
            max_gap_ms.append(gap / 1e3)
            span_ms.append(span / 1e3)
    if not span_ms:
        return {}
    return {
        "gpu_step_ms_median": round(statistics.median(span_ms), 3),
        "gpu_busy_pct_median": round(statistics.median(busy_pct), 2),
        "max_gap_ms_median": round(statistics.median(max_gap_ms), 3),
        "max_gap_ms_min": round(min(max_gap_ms), 3),
        "max_gap_ms_max": round(max(max_gap_ms), 3),
    }


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
    sdpa_ops = collections.Counter(
        e.get("name")
        for e in ev
        if e.get("cat") == "cpu_op"
        and any(k in str(e.get("name")) for k in ("scaled_dot_product", "_attention_forward", "_attention_math"))
    )
    py = [str(e.get("name")) for e in ev if e.get("cat") == "python_function"]
    deltanet_py = collections.Counter(
        n for n in py if any(k in n for k in ("gated_delta_rule", "causal_conv1d", "GatedDeltaNet", "l2norm"))
    )
    nn_modules = collections.Counter(
        n.split(": ", 1)[1].rsplit("_", 1)[0] for n in py if n.startswith("nn.Module: ")
    )
    return {
        "events": len(ev),
        "kernels": by.get(("X", "kernel"), 0),
        "cuda_runtime": by.get(("X", "cuda_runtime"), 0),
        "cpu_op": by.get(("X", "cpu_op"), 0),
        "python_function": len(py),
        "decode_step_cpu": steps_cpu,
        "decode_step_gpu": steps_gpu,
        "displayTimeUnit": d.get("displayTimeUnit"),
        "sdpa_ops": dict(sdpa_ops.most_common(8)),
        "deltanet_python_functions": dict(deltanet_py.most_common(12)),
        "nn_module_classes": dict(nn_modules.most_common(24)),
        "step_gaps": _step_gaps(ev),
        "by_ph_cat": {f"{k[0]}/{k[1]}": v for k, v in sorted(by.items(), key=lambda kv: -kv[1])},
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), help="model shape preset")
    p.add_argument("--config", help="HF config as a JSON object (or @file.json); overrides preset fields; "
                   "may hold \"arch\": \"llama\"|\"qwen3\"|\"qwen3_next\", \"rope_theta\" and "
                   "\"partial_rotary_factor\"")
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
    p.add_argument("--with-stack", action="store_true",
                   help="torch.profiler with_stack=True (python_function events: the Python call stack)")
    p.add_argument("--with-modules", action="store_true",
                   help="torch.profiler with_modules=True (nn.Module scopes in the trace)")
    p.add_argument("--sdpa-backend", choices=SDPA_BACKENDS, default="default",
                   help="pin scaled_dot_product_attention to one backend for the whole run "
                   "(torch.nn.attention.sdpa_kernel); default: torch's own choice")
    p.add_argument("--experts-impl", choices=EXPERTS_IMPLS, default="default",
                   help="transformers' MoE experts implementation (experts_implementation); "
                   "default: transformers' choice (grouped_mm where torch supports it)")
    p.add_argument("--no-profiler", action="store_true",
                   help="no torch.profiler and no trace: the traced steps run between "
                   "torch.cuda.profiler.start()/stop() with NVTX ranges, for gapscope-record or nsys")
    p.add_argument("--nvtx", choices=NVTX_MODES, default="auto",
                   help="NVTX ranges around the traced steps: steps (one 'decode_step' range per "
                   "step), modules (steps plus one range per nn.Module call), none; auto: steps "
                   "with --no-profiler, none otherwise")
    p.add_argument("--no-step-sync", action="store_true",
                   help="do not torch.cuda.synchronize() at the end of each decode step "
                   "(default: sync inside each step, as HF generate's stop check does)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="output path; .gz is added if missing (required unless "
                   "--no-profiler or --print-config)")
    p.add_argument("--keep-json", action="store_true", help="also keep the uncompressed JSON")
    p.add_argument("--gzip-level", type=int, default=6, choices=range(0, 10), metavar="0-9")
    p.add_argument("--print-config", action="store_true",
                   help="build the HF config, print it as JSON and exit (needs transformers, not "
                   "torch or a GPU)")
    args = p.parse_args(argv)
    for name in ("npl", "npp", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("warmup", "bench_steps"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must not be negative")
    if args.no_profiler and (args.cpu_only or args.record_shapes or args.with_stack
                             or args.with_modules or args.keep_json):
        p.error("--no-profiler writes no trace: --cpu-only, --record-shapes, --with-stack, "
                "--with-modules and --keep-json do not apply")
    if not args.no_profiler and not args.print_config and not args.out:
        p.error("--out is required (unless --no-profiler or --print-config)")
    if args.nvtx == "auto":
        args.nvtx = "steps" if args.no_profiler else "none"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    name, spec = load_config_spec(args)

    if args.print_config:
        cfg = build_hf_config(spec, args.experts_impl)
        print(json.dumps({"model": name, "arch": spec["arch"], "config": config_summary(cfg)},
                         sort_keys=True))
        return 0

    out = None
    if not args.no_profiler:
        out = args.out if args.out.endswith(".gz") else args.out + ".gz"

    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile, record_function

    if not torch.cuda.is_available():
        raise SystemExit("CUDA is not available")
    dev_name = torch.cuda.get_device_name(0)
    log(f"torch {torch.__version__} (cuda {torch.version.cuda}, cudnn {torch.backends.cudnn.version()}), "
        f"transformers {transformers.__version__}, device {dev_name}")
    log(f"model {name}: {json.dumps(spec, sort_keys=True)}")
    log(f"sdpa backend: {args.sdpa_backend}; nvtx: {args.nvtx}; "
        f"profiler: {'off' if args.no_profiler else 'torch.profiler'}")

    seed_everything(args.seed)
    t0 = time.perf_counter()
    model, cfg, n_params, dtypes, devs = build_model(spec, torch.bfloat16, args.experts_impl)
    torch.cuda.synchronize()
    cfg = getattr(model, "config", cfg)
    summary = config_summary(cfg)
    log(f"built {type(model).__name__} with {n_params / 1e9:.3f} B params in {time.perf_counter() - t0:.1f} s; "
        f"dtypes {dtypes}, devices {devs}, attn {summary.get('_attn_implementation')}, "
        f"experts {summary.get('_experts_implementation')}")
    log(f"hf config: {json.dumps(summary, sort_keys=True)}")
    paths = linear_attn_paths(model)
    if paths.get("gated_deltanet_layers"):
        log(f"gated DeltaNet paths: {json.dumps(paths, sort_keys=True)}")
    n_hooked = install_nvtx_module_ranges(model) if args.nvtx == "modules" else 0
    if n_hooked:
        log(f"nvtx: a range around each of {n_hooked} modules' calls")

    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    prompt = torch.randint(0, cfg.vocab_size, (args.npl, args.npp), device="cuda", generator=gen)

    def step(tok, cache):
        out_ = model(input_ids=tok, past_key_values=cache, use_cache=True, logits_to_keep=1)
        nxt = out_.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        return nxt, out_.past_key_values

    nvtx_steps = args.nvtx in ("steps", "modules")
    prof = None
    with sdpa_context(args.sdpa_backend), torch.inference_mode():
        cache = new_cache(cfg)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tok, cache = step(prompt, cache)
        torch.cuda.synchronize()
        t_prefill = time.perf_counter() - t0
        log(f"prefill {args.npl}x{args.npp} tokens: {t_prefill * 1e3:.1f} ms; cache {type(cache).__name__}")

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
            "tool": "gapscope scripts/capture/hf-decode-trace.py",
            "model": name,
            "config": spec,
            "npl": args.npl,
            "npp": args.npp,
            "warmup": args.warmup,
            "bench_steps": args.bench_steps,
            "steps": args.steps,
            "cpu_only": args.cpu_only,
            "record_shapes": args.record_shapes,
            "with_stack": args.with_stack,
            "with_modules": args.with_modules,
            "sdpa_backend": args.sdpa_backend,
            "experts_impl": summary.get("_experts_implementation"),
            "profiler": "none" if args.no_profiler else "torch.profiler",
            "nvtx": args.nvtx,
            "step_sync": not args.no_step_sync,
            "seed": args.seed,
            "device": dev_name,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        if paths.get("gated_deltanet_layers"):
            meta["linear_attn_paths"] = paths

        def traced_steps():
            nonlocal tok, cache
            for _ in range(args.steps):
                if nvtx_steps:
                    torch.cuda.nvtx.range_push("decode_step")
                with record_function("decode_step"):
                    tok, cache = step(tok, cache)
                    if not args.no_step_sync:
                        torch.cuda.synchronize()
                if nvtx_steps:
                    torch.cuda.nvtx.range_pop()

        torch.cuda.synchronize()
        if args.no_profiler:
            torch.cuda.profiler.start()
            t0 = time.perf_counter()
            traced_steps()
            torch.cuda.synchronize()
            dt_traced = time.perf_counter() - t0
            torch.cuda.profiler.stop()
        else:
            activities = [ProfilerActivity.CPU]
            if not args.cpu_only:
                activities.append(ProfilerActivity.CUDA)
            prof = profile(activities=activities, record_shapes=args.record_shapes,
                           with_stack=args.with_stack, with_modules=args.with_modules)
            with prof:
                try:  # optional: top-level "gapscope_capture" field in the trace
                    prof.add_metadata_json("gapscope_capture", json.dumps(meta))
                except Exception as e:
                    log(f"add_metadata_json failed (ignored): {e!r}")
                t0 = time.perf_counter()
                traced_steps()
                torch.cuda.synchronize()
                dt_traced = time.perf_counter() - t0
    n_decoded = args.steps * args.npl
    traced_tps = n_decoded / dt_traced
    what = "recorded by the outer tool, if any" if args.no_profiler else "with profiler overhead"
    log(f"traced decode: {args.steps} steps, {dt_traced / args.steps * 1e3:.2f} ms/step, "
        f"{traced_tps:.1f} tok/s ({what})")

    result = dict(meta)
    result.update({
        "params": n_params,
        "prefill_ms": round(t_prefill * 1e3, 3),
        "untraced_step_ms": None if untraced_step_ms is None else round(untraced_step_ms, 3),
        "untraced_tok_s": None if untraced_tps is None else round(untraced_tps, 2),
        "traced_step_ms": round(dt_traced / args.steps * 1e3, 3),
        "traced_tok_s": round(traced_tps, 2),
    })
    if prof is None:
        print(f"tok/s untraced: {untraced_tps if untraced_tps is None else round(untraced_tps, 1)}  "
              f"measured: {traced_tps:.1f}")
        print("RESULT " + json.dumps(result), flush=True)
        return 0

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
    with open(json_path, "rb") as fi, gzip.GzipFile(out, "wb", compresslevel=args.gzip_level, mtime=0) as fo:
        shutil.copyfileobj(fi, fo, length=1 << 22)
    t_gzip = time.perf_counter() - t0
    if args.keep_json:
        shutil.copy(json_path, out[: -len(".gz")])
    shutil.rmtree(tmpdir, ignore_errors=True)
    gz_bytes = os.path.getsize(out)

    log(f"trace: {counts['events']} events, {counts['kernels']} kernel events, "
        f"{counts['cuda_runtime']} cuda_runtime, {counts['cpu_op']} cpu_op, "
        f"{counts['python_function']} python_function, "
        f"decode_step cpu/gpu {counts['decode_step_cpu']}/{counts['decode_step_gpu']}")
    log(f"sdpa ops: {json.dumps(counts['sdpa_ops'])}")
    if counts["deltanet_python_functions"]:
        log(f"DeltaNet python functions in the trace: {json.dumps(counts['deltanet_python_functions'])}")
    log(f"per step (GPU): {json.dumps(counts['step_gaps'])}")
    log(f"wrote {out}: json {json_bytes / 2**20:.1f} MiB, gz {gz_bytes / 2**20:.2f} MiB "
        f"(export {t_export:.1f} s, gzip {t_gzip:.1f} s)")
    print(f"tok/s untraced: {untraced_tps if untraced_tps is None else round(untraced_tps, 1)}  "
          f"traced: {traced_tps:.1f}")
    print(f"kernel events: {counts['kernels']}")
    result.update({
        "out": out,
        "json_bytes": json_bytes,
        "gz_bytes": gz_bytes,
        "export_s": round(t_export, 1),
        **counts,
    })
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
