#!/usr/bin/env python3
"""Tensor-parallel decode (TP=N) with torch.distributed, traced per rank by torch.profiler,
with the truth of every step recorded by the script's own instrumentation (not by gapscope).

Run with torchrun, one process per GPU:
  torchrun --nproc_per_node 2 scripts/capture/tp-decode.py --mode balanced --out DIR

A Llama-style decoder with seeded random bf16 weights, sharded Megatron-style: q/k/v and
gate/up split by heads and columns, o and down by rows, one all-reduce after attention and
one after the MLP in every layer (2 x layers collectives per step). Batch 1, a KV cache of
`--prompt` + `--steps` positions (the prompt's filled with random keys and values), greedy
argmax; the LM head is replicated, so every rank computes the same token (no extra
collective).

Modes (`--mode`), each a planted straggler of known size on `--late-rank`:
  balanced  nothing planted;
  host      the late rank sleeps `--stall-ms` per step on the host inside
            `record_function("planted_host_stall")`, before the step's first layer;
  kernel    the late rank runs a GPU spin kernel (`torch.cuda._sleep`) of about `--stall-ms`
            per step inside `record_function("planted_gpu_stall")`, before the first layer.

Truth (`DIR/truth-MODE.json`, written by rank 0 after gathering every rank's records): per
rank and step, the host time the step started and ended (CLOCK_REALTIME ns, shared by the
processes of one host), the planted stall measured where it happened (the host sleep by the
host clock; the GPU spin by CUDA events around it), and per step the GPU time of the whole
step on each rank (CUDA events). The expected wait of the others is the planted stall.

Traces: `DIR/MODE-rank{r}.json.gz` (torch.profiler, Kineto JSON with `distributedInfo`).
Without a GPU, `--device cpu` runs the same on gloo (a dry run; no spin kernel).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["balanced", "host", "kernel"], default="balanced")
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=14336)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--stall-ms", type=float, default=20.0)
    ap.add_argument("--late-rank", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-profile", action="store_true", help="no torch.profiler (recorder runs)")
    ap.add_argument("--backend", choices=["nccl", "gloo"], default=None,
                    help="torch.distributed backend (default: nccl on CUDA, gloo on CPU); gloo "
                    "with --same-gpu runs every rank on GPU 0 (a one-GPU machine)")
    ap.add_argument("--same-gpu", action="store_true", help="every rank on cuda:0")
    ap.add_argument("--graph", action="store_true",
                    help="replay each step as one CUDA graph (fixed shapes, masked attention), so "
                    "the ranks' GPUs are not paced by their hosts' launches")
    return ap.parse_args()


class Shard:
    """One rank's weights: its heads and FFN columns; norms, embedding and head replicated."""

    def __init__(self, a, rank, world, dev, dtype):
        g = torch.Generator(device="cpu").manual_seed(1234 + rank)
        hd = a.hidden // a.heads
        self.hd = hd
        self.h = a.heads // world
        self.kvh = a.kv_heads // world
        self.f = a.ffn // world

        def w(*shape, scale=0.02):
            return (torch.randn(*shape, generator=g) * scale).to(dev, dtype)

        gr = torch.Generator(device="cpu").manual_seed(99)  # replicated parts: same on all
        self.embed = (torch.randn(a.vocab, a.hidden, generator=gr) * 0.02).to(dev, dtype)
        self.head = (torch.randn(a.vocab, a.hidden, generator=gr) * 0.02).to(dev, dtype)
        self.layers = []
        for _ in range(a.layers):
            self.layers.append({
                "qkv": w((self.h + 2 * self.kvh) * hd, a.hidden),
                "o": w(a.hidden, self.h * hd),
                "gu": w(2 * self.f, a.hidden),
                "down": w(a.hidden, self.f),
            })


def rms(x, eps=1e-5):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)


def step(s: Shard, tok, pos, caches, world):
    x = s.embed[tok].view(1, 1, -1)
    for L, c in zip(s.layers, caches):
        y = F.linear(rms(x), L["qkv"])
        q, k, v = y.split([s.h * s.hd, s.kvh * s.hd, s.kvh * s.hd], dim=-1)
        c[0][:, :, pos] = k.view(1, s.kvh, s.hd)
        c[1][:, :, pos] = v.view(1, s.kvh, s.hd)
        q = q.view(1, 1, s.h, s.hd).transpose(1, 2)
        kk = c[0][:, :, : pos + 1].repeat_interleave(s.h // s.kvh, dim=1)
        vv = c[1][:, :, : pos + 1].repeat_interleave(s.h // s.kvh, dim=1)
        # Attention by hand: SDPA's cuDNN path rebuilt its plan on the host every step (the KV
        # length grows), about 40 ms of host time per step, which buried the planted stalls.
        att = torch.softmax((q @ kk.transpose(-1, -2)).float() / s.hd**0.5, dim=-1).to(q.dtype)
        o = (att @ vv).transpose(1, 2).reshape(1, 1, -1)
        o = F.linear(o, L["o"])
        if world > 1:
            dist.all_reduce(o)
        x = x + o
        g, u = F.linear(rms(x), L["gu"]).chunk(2, dim=-1)
        m = F.linear(F.silu(g) * u, L["down"])
        if world > 1:
            dist.all_reduce(m)
        x = x + m
    return torch.argmax(F.linear(rms(x), s.head)[0, -1])


def step_static(s: Shard, tok, pos, caches, world, ctx):
    """The same step with fixed shapes (a device `pos`, attention over the whole cache with
    the future masked), so that it can be captured once as a CUDA graph."""
    x = s.embed.index_select(0, tok.view(1)).view(1, 1, -1)
    idx = torch.arange(ctx, device=tok.device)
    mask = torch.where(idx <= pos, 0.0, float("-inf")).view(1, 1, 1, ctx)
    for L, c in zip(s.layers, caches):
        y = F.linear(rms(x), L["qkv"])
        q, k, v = y.split([s.h * s.hd, s.kvh * s.hd, s.kvh * s.hd], dim=-1)
        c[0].index_copy_(2, pos.view(1), k.view(1, s.kvh, 1, s.hd))
        c[1].index_copy_(2, pos.view(1), v.view(1, s.kvh, 1, s.hd))
        q = q.view(1, 1, s.h, s.hd).transpose(1, 2)
        kk = c[0].repeat_interleave(s.h // s.kvh, dim=1)
        vv = c[1].repeat_interleave(s.h // s.kvh, dim=1)
        sc = (q @ kk.transpose(-1, -2)).float() / s.hd**0.5 + mask
        att = torch.softmax(sc, dim=-1).to(q.dtype)
        o = (att @ vv).transpose(1, 2).reshape(1, 1, -1)
        o = F.linear(o, L["o"])
        if world > 1:
            dist.all_reduce(o)
        x = x + o
        g, u = F.linear(rms(x), L["gu"]).chunk(2, dim=-1)
        m = F.linear(F.silu(g) * u, L["down"])
        if world > 1:
            dist.all_reduce(m)
        x = x + m
    return torch.argmax(F.linear(rms(x), s.head)[0, -1])


def allreduce_floor_us(a, dev, world, n=64, reps=5):
    """The all-reduce of one step's message with every rank arriving together: `n` of them
    back to back in one CUDA graph after a barrier, timed by CUDA events (median of `reps`)."""
    t = torch.randn(1, 1, a.hidden, device=dev, dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            dist.all_reduce(t)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            dist.all_reduce(t)
    out = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        out.append(e0.elapsed_time(e1) * 1e3 / n)
    out.sort()
    return out[len(out) // 2]


def main():
    a = args()
    cuda = a.device == "cuda"
    dist.init_process_group(a.backend or ("nccl" if cuda else "gloo"))
    rank, world = dist.get_rank(), dist.get_world_size()
    local = 0 if a.same_gpu else int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device(f"cuda:{local}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dtype = torch.bfloat16
    s = Shard(a, rank, world, dev, dtype)
    ctx = a.prompt + a.warmup + a.steps + 1
    caches = [(torch.zeros(1, s.kvh, ctx, s.hd, device=dev, dtype=dtype),
               torch.zeros(1, s.kvh, ctx, s.hd, device=dev, dtype=dtype)) for _ in s.layers]
    # The prompt's cache is filled with seeded random keys and values (decode is what is
    # measured), so that runs are repeatable.
    torch.manual_seed(4321 + rank)
    for c in caches:
        c[0][:, :, : a.prompt].normal_()
        c[1][:, :, : a.prompt].normal_()
    late = rank == a.late_rank and a.mode != "balanced"
    spin_cycles = None
    if late and a.mode == "kernel" and cuda:
        # Calibrate torch.cuda._sleep's cycles per ms on this GPU.
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.cuda._sleep(10_000_000)
        e1.record()
        torch.cuda.synchronize()
        spin_cycles = int(10_000_000 * a.stall_ms / e0.elapsed_time(e1))
    ev = (lambda: torch.cuda.Event(enable_timing=True)) if cuda else None

    def nvtx(name):
        return torch.cuda.nvtx.range(name) if cuda else contextlib.nullcontext()

    records = []
    tok = torch.tensor(7, device=dev)
    pos = a.prompt
    graph = None
    if a.graph:
        # Static inputs, warmed up on a side stream, then one step captured as a graph whose
        # replay also advances `pos_t` and feeds its token back.
        tok_t = torch.tensor(7, device=dev, dtype=torch.long)
        pos_t = torch.tensor(a.prompt, device=dev, dtype=torch.long)
        if cuda:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    step_static(s, tok_t, pos_t, caches, world, ctx)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                nxt = step_static(s, tok_t, pos_t, caches, world, ctx)
                tok_t.copy_(nxt)
                pos_t.add_(1)
            pos_t.fill_(a.prompt)
            tok_t.fill_(7)

    def one(i, measured):
        nonlocal tok, pos
        rec = {"step": i, "host_start_ns": time.time_ns()}
        if ev:
            s0, s1 = ev(), ev()
            s0.record()
        if late and a.mode == "host":
            # record_function for torch.profiler, an NVTX range for gapscope-record.
            with torch.profiler.record_function("planted_host_stall"), nvtx("planted_host_stall"):
                t0 = time.perf_counter_ns()
                time.sleep(a.stall_ms / 1e3)
                rec["planted_host_ns"] = time.perf_counter_ns() - t0
        if late and a.mode == "kernel" and spin_cycles:
            with torch.profiler.record_function("planted_gpu_stall"), nvtx("planted_gpu_stall"):
                k0, k1 = ev(), ev()
                k0.record()
                torch.cuda._sleep(spin_cycles)
                k1.record()
            rec["_k"] = (k0, k1)
        with torch.profiler.record_function(f"decode_step_{i}"), nvtx(f"decode_step_{i}"):
            if graph is not None:
                graph.replay()
            elif a.graph:  # no GPU: the same fixed-shape step, eagerly
                tok_t.copy_(step_static(s, tok_t, pos_t, caches, world, ctx))
                pos_t.add_(1)
            else:
                tok = step(s, tok, pos, caches, world)
        pos += 1
        if a.graph:
            rec["_tok"] = tok_t.clone()
        else:
            rec["_tok"] = tok.clone()
        if ev:
            s1.record()
            rec["_s"] = (s0, s1)
        if cuda:
            torch.cuda.synchronize()
        rec["host_end_ns"] = time.time_ns()
        if measured:
            records.append(rec)

    for i in range(a.warmup):
        one(-1 - i, False)
    dist.barrier()
    prof = None
    if not a.no_profile:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts, record_shapes=False)
        prof.__enter__()
    t0 = time.time_ns()
    for i in range(a.steps):
        one(i, True)
    wall = time.time_ns() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
    # CUDA event times (every step synchronized, so every event has completed).
    for r in records:
        if "_s" in r:
            s0, s1 = r.pop("_s")
            r["gpu_step_ms"] = s0.elapsed_time(s1)
        if "_k" in r:
            k0, k1 = r.pop("_k")
            r["planted_gpu_ms"] = k0.elapsed_time(k1)
    out = {"rank": rank, "world": world, "device": torch.cuda.get_device_name(dev) if cuda else "cpu",
           "wall_ns": wall, "steps": []}
    for r in records:
        r["token"] = int(r.pop("_tok"))
    if cuda and world > 1 and dist.get_backend() == "nccl":
        out["allreduce_floor_us"] = allreduce_floor_us(a, dev, world)
    for r in records:
        row = {k: v for k, v in r.items() if not k.startswith("_")}
        out["steps"].append(row)
    os.makedirs(a.out, exist_ok=True)
    if prof is not None:
        path = os.path.join(a.out, f"{a.mode}-rank{rank}.json")
        prof.export_chrome_trace(path)
        with open(path, "rb") as fi, gzip.open(path + ".gz", "wb") as fo:
            shutil.copyfileobj(fi, fo)
        os.remove(path)
    gathered = [None] * world
    dist.all_gather_object(gathered, out)
    if rank == 0:
        truth = {"mode": a.mode, "late_rank": a.late_rank if a.mode != "balanced" else None,
                 "stall_ms_asked": a.stall_ms if a.mode != "balanced" else 0.0,
                 "collectives_per_step": 2 * a.layers, "layers": a.layers, "hidden": a.hidden,
                 "world": world, "profiled": prof is not None, "graph": a.graph,
                 "ranks": gathered}
        name = f"truth-{a.mode}{'-rec' if a.no_profile else ''}.json"
        with open(os.path.join(a.out, name), "w") as f:
            json.dump(truth, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
