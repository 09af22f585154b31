#!/usr/bin/env python3
"""How exactly can an engine reproduce HF transformers' bf16 eager logits? Two measurements on
a tiny model written by hf-tiny-models.py (one uncached forward over its prompt and generated
tokens, on the GPU, as that script runs it):

1. Per op, the share of HF's bf16 outputs that the engine's rounding model of that op
   (`--numerics hf-bf16`, kernels/cuda/hf_numerics.cu) reproduces bit for bit when fed HF's own
   inputs to the op, so no earlier difference carries in:
     rms_norm      bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))
     rope          bf16(bf16(q*cos) +- bf16(rot(q)*sin)), cos/sin = bf16 of the f32 angle's
                   cos/sin, the angle from the engine's inv_freq (config.rs) and from HF's
     attention     scores bf16(bf16(q.k) * scale), probs bf16(softmax_f32), out bf16(p.v),
                   the dot products summed exactly (f64) and rounded to f32, as an engine
                   whose summation order differs from cuBLAS's would see them at best
     swiglu        bf16(bf16(silu(g)) * u)
     linear_f32    bf16 of the exact (f64) product: how often a summation order other than
                   cuBLAS's changes a linear's bf16 output
     residual      bf16(x + bf16(y))
2. Sensitivity: the same forward with ONE hidden-state element moved by one bf16 step (after
   the embedding at --perturbations seeded sites, and once before the last layer): the share of
   logits that stay bit-identical, and HF's top-1 agreement with its own unperturbed run over
   the compared rows. A single rounding flip anywhere spreads through every later layer; that
   self-agreement is the floor for any engine whose summation order is not cuBLAS's.

Usage (GPU machine):
  python3 scripts/engine/hf-op-fidelity.py DIR/tiny-llama [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from collections import defaultdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--perturbations", type=int, default=8,
                    help="seeded single-element perturbations after the embedding (default 8)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = args.device
    with open(f"{args.model_dir}/tokens.json") as f:
        tok = json.load(f)
    with open(f"{args.model_dir}/config.json") as f:
        cfg = json.load(f)
    model = AutoModelForCausalLM.from_pretrained(
        args.model_dir, dtype=torch.bfloat16, attn_implementation="eager").to(dev).eval()
    mod = importlib.import_module(type(model).__module__)
    P = tok["prompt_len"]
    ids = torch.tensor(tok["tokens"][:-1], dtype=torch.long, device=dev).unsqueeze(0)

    def r(x):
        return x.float().to(torch.bfloat16).float()

    stats = defaultdict(lambda: [0, 0])

    def tally(name, hf_out, model_out):
        a = hf_out.float()
        b = model_out.float()
        stats[name][0] += int((a == b).sum())
        stats[name][1] += a.numel()

    hooks = []

    def norm_hook(name, eps):
        def h(m, inp, out):
            x = inp[0].float()
            scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
            tally(name, out, r(m.weight.float() * r(x * scale)))
        return h

    eps = cfg.get("rms_norm_eps", 1e-6)
    for layer in model.model.layers:
        hooks.append(layer.input_layernorm.register_forward_hook(norm_hook("rms_norm", eps)))
        hooks.append(layer.post_attention_layernorm.register_forward_hook(norm_hook("rms_norm", eps)))
        for qk in ("q_norm", "k_norm"):
            if hasattr(layer.self_attn, qk):
                hooks.append(getattr(layer.self_attn, qk).register_forward_hook(norm_hook("head_norm", eps)))
        lins = [layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj]

        def lin_hook(m, inp, out):
            exact = inp[0].double() @ m.weight.double().T
            if m.bias is not None:
                exact = exact + m.bias.double()
            tally("linear_f32_order", out, r(exact.float()))
        for lin in lins:
            hooks.append(lin.register_forward_hook(lin_hook))
        mlp_in = {}

        def gate_hook(m, inp, out, mlp_in=mlp_in):
            mlp_in["g"] = out

        def up_hook(m, inp, out, mlp_in=mlp_in):
            mlp_in["u"] = out

        def down_pre(m, inp, mlp_in=mlp_in):
            g, u = mlp_in["g"].float(), mlp_in["u"].float()
            silu = g / (1.0 + torch.exp(-g))
            tally("swiglu", inp[0], r(r(silu) * u))
        hooks.append(layer.mlp.gate_proj.register_forward_hook(gate_hook))
        hooks.append(layer.mlp.up_proj.register_forward_hook(up_hook))
        hooks.append(layer.mlp.down_proj.register_forward_pre_hook(down_pre))

        res = {}

        def layer_pre(m, a, kw, res=res):
            res["x"] = (a[0] if a else kw["hidden_states"])

        def attn_out(m, inp, out, res=res):
            res["attn"] = out[0] if isinstance(out, tuple) else out

        def post_pre(m, inp, res=res):
            # input to post_attention_layernorm is residual + attention output
            tally("residual_add", inp[0], r(res["x"].float() + r(res["attn"].float())))
        hooks.append(layer.register_forward_pre_hook(layer_pre, with_kwargs=True))
        hooks.append(layer.self_attn.register_forward_hook(attn_out))
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(post_pre))

    # The engine's inv_freq (engine/src/config.rs: f64, rounded to f32) next to HF's.
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    theta = cfg.get("rope_theta", 10000.0)
    sc = cfg.get("rope_scaling")
    inv = []
    for i in range(hd // 2):
        base = float(torch.tensor(1.0 / theta ** ((2 * i) / hd), dtype=torch.float32))
        f = base
        if sc and sc.get("rope_type") == "llama3":
            lo = sc["original_max_position_embeddings"] / sc["low_freq_factor"]
            hi = sc["original_max_position_embeddings"] / sc["high_freq_factor"]
            wl = 2 * math.pi / base
            if wl > lo:
                f = base / sc["factor"]
            elif wl < hi:
                f = base
            else:
                s = (sc["original_max_position_embeddings"] / wl - sc["low_freq_factor"]) / (
                    sc["high_freq_factor"] - sc["low_freq_factor"])
                f = (1 - s) * base / sc["factor"] + s * base
        inv.append(f)
    eng_inv = torch.tensor(inv, dtype=torch.float32, device=dev)
    hf_inv = model.model.rotary_emb.inv_freq.float()
    inv_same = int((eng_inv == hf_inv).sum())

    orig_rope = mod.apply_rotary_pos_emb

    def rope_patch(q, k, cos, sin, *a, **kw):
        qo, ko = orig_rope(q, k, cos, sin, *a, **kw)
        pos = torch.arange(q.shape[-2], device=dev, dtype=torch.float32)
        for name, inv_freq in (("rope_engine_inv_freq", eng_inv), ("rope_hf_inv_freq", hf_inv)):
            ang = pos[:, None] * inv_freq[None, :]
            ang = torch.cat([ang, ang], dim=-1)
            c, s = r(torch.cos(ang)), r(torch.sin(ang))
            for x, xo in ((q, qo), (k, ko)):
                xf = x.float()
                half = xf.shape[-1] // 2
                rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
                tally(name, xo, r(r(xf * c) + r(rot * s)))
        tally("rope_cos_sin_hf_vs_engine", cos, r(torch.cos(torch.cat([pos[:, None] * eng_inv] * 2, -1))))
        return qo, ko
    mod.apply_rotary_pos_emb = rope_patch

    orig_attn = mod.eager_attention_forward

    def attn_patch(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
        out, w = orig_attn(module, query, key, value, attention_mask, scaling, dropout=dropout, **kw)
        g = query.shape[1] // key.shape[1]
        k = key.repeat_interleave(g, dim=1).double()
        v = value.repeat_interleave(g, dim=1).double()
        s = r(r((query.double() @ k.transpose(-1, -2)).float()) * scaling)
        if attention_mask is not None:
            m = attention_mask[..., : k.shape[-2]]
            s = s.masked_fill(m < -1, float("-inf")) if m.dtype != torch.bool else s.masked_fill(~m, float("-inf"))
        p = r(torch.softmax(s, dim=-1, dtype=torch.float32))
        tally("attention_probs", w, p)
        o = r((p.double() @ v).float()).transpose(1, 2)
        tally("attention_out", out, o)
        return out, w
    mod.eager_attention_forward = attn_patch

    with torch.no_grad():
        base = model(input_ids=ids, use_cache=False).logits[0].float()
    for h in hooks:
        h.remove()
    mod.apply_rotary_pos_emb = orig_rope
    mod.eager_attention_forward = orig_attn

    # Sensitivity: one element of a hidden state moved by one bf16 step, at --perturbations
    # seeded sites (a prompt position and a hidden dimension) after the embedding, and at one
    # site before the last decoder layer. HF's own top-1 over the compared rows is the floor
    # that no reimplementation with another summation order can get under.
    rows = slice(P - 1, None)
    gen = torch.Generator().manual_seed(args.seed)
    hidden = model.config.hidden_size

    def perturbed(where, pos, dim):
        def bump(o):
            # The next bf16 value away from zero: one step of the 16-bit pattern.
            o = o.clone()
            cell = o[0, pos, dim:dim + 1]
            o[0, pos, dim:dim + 1] = (cell.view(torch.int16) + 1).view(torch.bfloat16)
            return o

        def hook(m, inp, out):
            if isinstance(out, tuple):
                return (bump(out[0]),) + tuple(out[1:])
            return bump(out)
        target = model.model.embed_tokens if where == "embedding" else model.model.layers[-2]
        h = target.register_forward_hook(hook)
        with torch.no_grad():
            pert = model(input_ids=ids, use_cache=False).logits[0].float()
        h.remove()
        return {
            "where": where, "position": pos, "dim": dim,
            "identical_logits": float((pert[rows] == base[rows]).float().mean()),
            "top1_agreement": float((pert[rows].argmax(-1) == base[rows].argmax(-1)).float().mean()),
        }
    sens = []
    for _ in range(args.perturbations):
        pos = int(torch.randint(0, P, (1,), generator=gen))
        dim = int(torch.randint(0, hidden, (1,), generator=gen))
        sens.append(perturbed("embedding", pos, dim))
    sens.append(perturbed("last_layer_input", P // 2, 7))

    out = {
        "model_dir": args.model_dir,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else dev,
        "ops": {k: {"identical": v[0] / v[1], "n": v[1]} for k, v in sorted(stats.items())},
        "inv_freq_identical": f"{inv_same}/{hd // 2}",
        "one_bf16_step_perturbation": sens,
        "hf_self_top1_after_one_step": {
            "min": min(x["top1_agreement"] for x in sens),
            "median": sorted(x["top1_agreement"] for x in sens)[len(sens) // 2],
            "max": max(x["top1_agreement"] for x in sens),
            "n": len(sens),
        },
    }
    name = cfg.get("model_type", "?")
    for k, v in out["ops"].items():
        print(f"{name} {k:30s} {100 * v['identical']:8.4f}% bit-identical (n={v['n']})")
    print(f"{name} inv_freq engine vs HF identical: {out['inv_freq_identical']}")
    for v in sens:
        print(f"{name} one bf16 step at the {v['where']} (position {v['position']}, dim {v['dim']}): "
              f"{100 * v['identical_logits']:.2f}% of logits bit-identical, HF top-1 agreement with itself "
              f"{100 * v['top1_agreement']:.1f}%")
    t = out["hf_self_top1_after_one_step"]
    print(f"{name} HF's own top-1 after one bf16 step: {100 * t['min']:.1f}% min, {100 * t['median']:.1f}% median, "
          f"{100 * t['max']:.1f}% max over {t['n']} perturbations")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
