#!/usr/bin/env python3
"""Capture a PyTorch profiler (Kineto) trace of speculative decoding with Hugging Face
transformers, and the truth of every forward, recorded by hooks (not by gapscope).

Modes (`--mode`):
  assisted  `generate(assistant_model=draft)`: a separate draft model proposes `--k` tokens per
            step (constant schedule, no confidence cut-off), the target verifies them in one
            forward.
  lookup    `generate(prompt_lookup_num_tokens=k)`: n-gram prompt lookup proposes up to k
            tokens from the text so far; no draft model.
  plain     greedy `generate()` without speculation (the baseline; its output must equal the
            speculative modes' under greedy acceptance, which the truth file records).

The target is a random-weight Llama built from `--target-layers` and the shape flags. The
draft (assisted mode) is a second LlamaForCausalLM instance with `--draft-layers` layers whose
weights, embedding, final norm and head are copies of the target's first layers. To make the
draft agree with the target often (as a trained draft does), the target's layers after the
draft's have their output projections scaled by `--damp` (0 < damp <= 1; smaller means
more agreement). The prompt is a random block repeated `--repeats` times (so n-gram lookup
finds matches).

Truth (`--truth FILE`, JSON): every forward of every model in call order, from forward
pre-hooks: the model's role (target or draft), the tokens it feeds (`new`), the cached length
before it (`past`), and for target forwards after the prefill the tokens that step produced
(the next target forward's `past` minus this one's; the last from the output length), the
candidates it verified (`new - 1`) and how many of them were accepted. Also the output token
ids' md5, the tokens per second untraced, and the profiler settings.

Needs a CUDA GPU (or `--device cpu` for a dry run), torch and transformers 5.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time


def log(msg: str) -> None:
    print(f"[hf-spec] {msg}", file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("assisted", "lookup", "plain"), required=True)
    p.add_argument("--out", help="trace to write (.json.gz); omit for a truth-only run")
    p.add_argument("--truth", required=True, help="truth JSON to write")
    p.add_argument("--k", type=int, default=4, help="draft tokens per step (assisted) or lookup tokens")
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--prompt-block", type=int, default=16, help="random prompt block length")
    p.add_argument("--repeats", type=int, default=4, help="prompt = the block repeated this often")
    p.add_argument("--target-layers", type=int, default=8)
    p.add_argument("--draft-layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--damp", type=float, default=0.1)
    p.add_argument("--ngram", type=int, default=2, help="lookup: largest n-gram matched")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=1, help="untraced generate() calls first")
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-record-shapes", action="store_true")
    p.add_argument("--no-stack", action="store_true", help="no with_stack (no nn.Module scopes)")
    return p.parse_args(argv)


def llama_config(a: argparse.Namespace, layers: int):
    from transformers import LlamaConfig

    cfg = LlamaConfig(
        hidden_size=a.hidden,
        num_hidden_layers=layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.kv_heads,
        head_dim=a.hidden // a.heads,
        intermediate_size=a.intermediate,
        vocab_size=a.vocab,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
        rms_norm_eps=1e-5,
        max_position_embeddings=4096,
        hidden_act="silu",
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=0,
    )
    cfg.use_cache = True
    cfg._attn_implementation = "sdpa"
    return cfg


def build(a: argparse.Namespace, dtype):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(a.seed)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(a.device):
            target = LlamaForCausalLM(llama_config(a, a.target_layers))
            draft = None
            if a.mode == "assisted":
                draft = LlamaForCausalLM(llama_config(a, a.draft_layers))
    finally:
        torch.set_default_dtype(prev)
    with torch.no_grad():
        for i, layer in enumerate(target.model.layers):
            if i >= a.draft_layers:
                layer.self_attn.o_proj.weight.mul_(a.damp)
                layer.mlp.down_proj.weight.mul_(a.damp)
        if draft is not None:
            draft.model.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
            draft.model.norm.weight.copy_(target.model.norm.weight)
            draft.lm_head.weight.copy_(target.lm_head.weight)
            for i in range(a.draft_layers):
                draft.model.layers[i].load_state_dict(target.model.layers[i].state_dict())
    target.eval()
    if draft is not None:
        draft.eval()
    return target, draft


class Recorder:
    """Forward pre-hooks on each model: one row per call, in call order."""

    def __init__(self):
        self.calls: list[dict] = []
        self.on = False

    def hook(self, role: str):
        def pre(_module, args, kwargs):
            if not self.on:
                return
            ids = kwargs.get("input_ids")
            if ids is None and args:
                ids = args[0]
            emb = kwargs.get("inputs_embeds")
            if ids is not None:
                batch, new = int(ids.shape[0]), int(ids.shape[1])
            elif emb is not None:
                batch, new = int(emb.shape[0]), int(emb.shape[1])
            else:
                batch, new = 0, 0
            cache = kwargs.get("past_key_values")
            past = 0
            if cache is not None:
                try:
                    past = int(cache.get_seq_length())
                except Exception:  # noqa: BLE001 - a cache type without it
                    past = -1
            self.calls.append({"role": role, "batch": batch, "new": new, "past": past})

        return pre


def truth_steps(calls: list[dict], out_len: int, prompt_len: int) -> dict:
    """Steps from the hooked calls: each target forward is a step (the first, with an empty
    cache, the prefill); the draft forwards since the previous target forward belong to it.

    A target forward takes `new` tokens: the context it has not cached yet (the pending token,
    or the whole prompt for the first) and the candidates. After it the cache holds the
    context and the accepted candidates, and the target's own next token is the next
    forward's pending one, so tokens produced = accepted + 1 = the next forward's `past`
    minus this one's `past + context - 1` (the last: the output length minus the same).
    Acceptance counts decode steps only: HF's assisted prefill also verifies candidates, and
    a trace shows its candidates only through the prompt length."""
    targets = [i for i, c in enumerate(calls) if c["role"] == "target"]
    steps = []
    for n, i in enumerate(targets):
        c = calls[i]
        prev = targets[n - 1] if n > 0 else -1
        drafts = [calls[j] for j in range(prev + 1, i) if calls[j]["role"] == "draft"]
        context = prompt_len if n == 0 else 1
        after = calls[targets[n + 1]]["past"] if n + 1 < len(targets) else out_len - 1
        produced = after - (c["past"] + context - 1)
        steps.append({
            "target_call": i,
            "prefill": n == 0,
            "new": c["new"],
            "past": c["past"],
            "draft_forwards": len(drafts),
            "candidates": c["new"] - context,
            "tokens": produced,
            "accepted": produced - 1,
        })
    decode = [s for s in steps if not s["prefill"]]
    k_max = max((s["candidates"] for s in decode), default=0)
    per_pos = []
    for j in range(1, k_max + 1):
        have = [s for s in decode if s["candidates"] >= j]
        acc = [s for s in have if s["accepted"] >= j]
        per_pos.append({"position": j, "steps": len(have), "accepted": len(acc),
                        "rate": round(len(acc) / len(have), 4) if have else None})
    proposed = sum(s["candidates"] for s in decode)
    accepted = sum(s["accepted"] for s in decode)
    return {
        "steps": steps,
        "target_forwards": len(targets),
        "draft_forwards": sum(1 for c in calls if c["role"] == "draft"),
        "decode_steps": len(decode),
        "tokens_total": sum(s["tokens"] for s in steps),
        "decode_tokens": sum(s["tokens"] for s in decode),
        "tokens_per_step": round(sum(s["tokens"] for s in decode) / len(decode), 4) if decode else None,
        "acceptance_rate": round(accepted / proposed, 4) if proposed else None,
        "mean_accepted_per_step": round(accepted / len(decode), 4) if decode else None,
        "acceptance_per_position": per_pos,
    }


def generate(a, target, draft, prompt):
    kw = dict(max_new_tokens=a.new_tokens, do_sample=False,
              pad_token_id=0, eos_token_id=None)
    if a.mode == "assisted":
        kw.update(assistant_model=draft, num_assistant_tokens=a.k,
                  num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)
    elif a.mode == "lookup":
        kw.update(prompt_lookup_num_tokens=a.k, max_matching_ngram_size=a.ngram)
    return target.generate(prompt, **kw)


def main(argv=None) -> int:
    a = parse_args(argv)
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile

    cuda = a.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    target, draft = build(a, dtype)
    if draft is not None:
        gc = draft.generation_config
        gc.num_assistant_tokens = a.k
        gc.num_assistant_tokens_schedule = "constant"
        gc.assistant_confidence_threshold = 0.0
    rec = Recorder()
    target.register_forward_pre_hook(rec.hook("target"), with_kwargs=True)
    if draft is not None:
        draft.register_forward_pre_hook(rec.hook("draft"), with_kwargs=True)

    g = torch.Generator(device=a.device)
    g.manual_seed(a.seed + 1)
    block = torch.randint(1, a.vocab, (1, a.prompt_block), device=a.device, generator=g)
    prompt = block.repeat(1, a.repeats)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    with torch.inference_mode():
        for _ in range(a.warmup):
            generate(a, target, draft, prompt)
        sync()
        t0 = time.perf_counter()
        out = generate(a, target, draft, prompt)
        sync()
        untraced_s = time.perf_counter() - t0

        rec.on = True
        prof = None
        if a.out:
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            prof = profile(activities=acts, record_shapes=not a.no_record_shapes,
                           with_stack=not a.no_stack, with_modules=not a.no_stack)
            with prof:
                out2 = generate(a, target, draft, prompt)
                sync()
        else:
            out2 = generate(a, target, draft, prompt)
            sync()
        rec.on = False

    out_ids = out2[0].tolist()
    if out_ids != out[0].tolist():
        log("the traced generate() gave other tokens than the untraced one")
    truth = truth_steps(rec.calls, len(out_ids), int(prompt.shape[1]))
    truth.update({
        "tool": "gapscope scripts/capture/hf-spec-trace.py",
        "mode": a.mode,
        "k": a.k,
        "args": vars(a),
        "prompt_len": int(prompt.shape[1]),
        "output_len": len(out_ids),
        "new_tokens": len(out_ids) - int(prompt.shape[1]),
        "output_md5": hashlib.md5(json.dumps(out_ids[prompt.shape[1]:]).encode()).hexdigest(),
        "untraced_s": round(untraced_s, 4),
        "untraced_tok_s": round((len(out_ids) - prompt.shape[1]) / untraced_s, 2),
        "calls": rec.calls,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    })
    with open(a.truth, "w") as f:
        json.dump(truth, f, indent=1)
    log(f"{a.mode}: {truth['target_forwards']} target forwards, {truth['draft_forwards']} draft forwards, "
        f"{truth['decode_steps']} decode steps, {truth['tokens_per_step']} tokens/step, acceptance "
        f"{truth['acceptance_rate']}, md5 {truth['output_md5']}, {truth['untraced_tok_s']} tok/s untraced")

    if prof is not None:
        tmp = tempfile.mkdtemp(prefix="hf_spec_")
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        out_path = a.out if a.out.endswith(".gz") else a.out + ".gz"
        with open(path, "rb") as fi, gzip.GzipFile(out_path, "wb", compresslevel=9, mtime=0) as fo:
            shutil.copyfileobj(fi, fo, length=1 << 22)
        shutil.rmtree(tmp, ignore_errors=True)
        log(f"wrote {out_path}: {os.path.getsize(out_path) / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
