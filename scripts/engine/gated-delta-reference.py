#!/usr/bin/env python3
"""PyTorch reference of gated DeltaNet decode steps, for the engine's CPU reference
(engine/src/cpu/gated_delta.rs) to be checked against.

Writes a JSON fixture: seeded random inputs of a small layer (2 key heads, 4 value heads,
dk 8, dv 6, conv kernel 4) for T decode steps, and the outputs of a plain-PyTorch
implementation written from the published equations (float64). When transformers has the
Qwen3-Next module, its PyTorch recurrence (torch_recurrent_gated_delta_rule, with its own
q/k L2 norm and scale) and its gated norm (Qwen3NextRMSNormGated) run on the same conv outputs
as a second reference, and the largest difference between the two is recorded.

    python3 scripts/engine/gated-delta-reference.py --out engine/tests/data/gated-delta.json

Needs torch (CPU is enough); transformers is optional.
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

KH, VH, DK, DV, KW = 2, 4, 8, 6, 4
C = 2 * KH * DK + VH * DV
EPS_L2 = 1e-6
EPS_NORM = 1e-6


def inputs(seed, steps):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, scale=1.0: torch.randn(*s, generator=g, dtype=torch.float64) * scale
    return {
        "x": r(steps, C),
        "conv_w": r(C, KW, scale=0.5),
        "a": r(steps, VH),
        "b": r(steps, VH),
        "a_log": r(VH, scale=0.5),
        "dt_bias": r(VH, scale=0.5),
        "z": r(steps, VH, DV),
        "norm_w": 1.0 + r(DV, scale=0.1),
    }


def l2norm(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + EPS_L2)


def gated_norm(o, z, w):
    var = o.pow(2).mean(-1, keepdim=True)
    return o * torch.rsqrt(var + EPS_NORM) * w * F.silu(z)


def conv_step(conv_state, x_t, w):
    """One depthwise causal conv1d step with SiLU: (output, the rolled state)."""
    window = torch.cat([conv_state, x_t[:, None]], dim=1)
    return F.silu((window * w).sum(-1)), window[:, 1:]


def qkv_and_gates(y, inp, t):
    """The conv output split into q, k (repeated to the value heads) and v, and the step's
    log decay g and update gate beta."""
    q, k, v = split(y)
    rep = VH // KH
    g = -inp["a_log"].exp() * F.softplus(inp["a"][t] + inp["dt_bias"])
    beta = torch.sigmoid(inp["b"][t])
    return q.repeat_interleave(rep, 0), k.repeat_interleave(rep, 0), v, g, beta


def split(y):
    q = y[: KH * DK].view(KH, DK)
    k = y[KH * DK : 2 * KH * DK].view(KH, DK)
    v = y[2 * KH * DK :].view(VH, DV)
    return q, k, v


def plain(inp, steps):
    """The equations, one step at a time, float64."""
    conv_state = torch.zeros(C, KW - 1, dtype=torch.float64)
    state = torch.zeros(VH, DK, DV, dtype=torch.float64)
    outs = []
    for t in range(steps):
        y, conv_state = conv_step(conv_state, inp["x"][t], inp["conv_w"])
        q, k, v, g, beta = qkv_and_gates(y, inp, t)
        q, k = l2norm(q) / math.sqrt(DK), l2norm(k)
        state = state * g.exp()[:, None, None]
        kv = (state * k[:, :, None]).sum(1)
        delta = (v - kv) * beta[:, None]
        state = state + k[:, :, None] * delta[:, None, :]
        o = (state * q[:, :, None]).sum(1)
        outs.append(gated_norm(o, inp["z"][t], inp["norm_w"]))
    return torch.stack(outs), state


def with_transformers(inp, steps):
    """transformers' Qwen3-Next PyTorch fallbacks on the same inputs; None when unavailable."""
    try:
        from transformers.models.qwen3_next import modeling_qwen3_next as m
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return None, f"transformers has no Qwen3-Next module: {e}"
    try:
        return _run_transformers(m, inp, steps), None
    except Exception as e:  # noqa: BLE001 - an API change is reported, not fatal
        return None, f"transformers' Qwen3-Next fallbacks failed: {type(e).__name__}: {e}"


def _run_transformers(m, inp, steps):
    conv_state = torch.zeros(C, KW - 1, dtype=torch.float64)
    state = None
    norm = m.Qwen3NextRMSNormGated(DV, eps=EPS_NORM).to(torch.float64)
    with torch.no_grad():
        norm.weight.copy_(inp["norm_w"])
    outs = []
    for t in range(steps):
        # The conv1d is the plain one: transformers 5 routes causal_conv1d_update to a CUDA
        # kernel when one is installed, and the CPU fallback is no longer a module function.
        y, conv_state = conv_step(conv_state, inp["x"][t], inp["conv_w"])
        q, k, v, g, beta = qkv_and_gates(y, inp, t)
        o, state = m.torch_recurrent_gated_delta_rule(
            q[None, None], k[None, None], v[None, None], g[None, None], beta[None, None],
            initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True,
        )
        with torch.no_grad():
            outs.append(norm(o[0, 0], inp["z"][t]))
    return torch.stack(outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    inp = inputs(a.seed, a.steps)
    out, state = plain(inp, a.steps)
    hf, why = with_transformers(inp, a.steps)
    fixture = {
        "shape": {"k_heads": KH, "v_heads": VH, "dk": DK, "dv": DV, "kernel": KW,
                  "eps_l2": EPS_L2, "eps_norm": EPS_NORM, "steps": a.steps, "seed": a.seed},
        "inputs": {k: v.flatten().tolist() for k, v in inp.items()},
        "out": out.flatten().tolist(),
        "final_state": state.flatten().tolist(),
        "torch": torch.__version__,
    }
    if hf is not None:
        import transformers
        fixture["transformers"] = transformers.__version__
        fixture["transformers_max_abs_diff"] = float((hf - out).abs().max())
    else:
        fixture["transformers"] = why
    with open(a.out, "w") as f:
        json.dump(fixture, f)
    print(f"gated-delta-reference: {a.steps} steps; transformers: "
          f"{fixture.get('transformers_max_abs_diff', fixture['transformers'])}", file=sys.stderr)


if __name__ == "__main__":
    main()
