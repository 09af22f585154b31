#!/usr/bin/env python3
"""HF transformers eager decode with random weights, for gapscope-record's acceptance run.

Builds the model of an HF config.json (Llama shapes by default) in bf16 on the GPU with
seeded random weights (scripts/engine/hf-bench.py's builder), prefills a random prompt, runs
--warmup decode steps, then --steps measured decode steps bracketed by
cudaProfilerStart/Stop (torch.cuda.profiler.start/stop), so `gapscope-record
--capture-range cudaProfilerApi` records exactly those steps.

Modes:
  plain      no profiler (run it under gapscope-record, or alone for the baseline)
  torchprof  the measured steps under torch.profiler (CUDA activities); writes the Kineto
             trace to --trace and counts its kernel events

Prints one JSON line: mode, steps, decode seconds and tokens/s of the measured steps, and
for torchprof the kernel count.

  python3 scripts/record/hf-decode.py --config models/llama-3.2-1b.json --mode plain
  gapscope-record --capture-range cudaProfilerApi -o hf.gst -- python3 scripts/record/hf-decode.py --mode plain
  python3 scripts/record/hf-decode.py --mode torchprof --trace hf_prof.json
"""
import argparse
import gzip
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="models/llama-3.2-1b.json")
    p.add_argument(
        "--mode",
        choices=("plain", "torchprof", "torchprof-early"),
        default="plain",
        help="torchprof-early: torch.profiler attaches before the model is built (its warm-up "
        "phase spans build, prefill and warm-up steps, whose records it discards), so CUDA "
        "modules load while CUPTI is on, as under gapscope-record",
    )
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", default="hf_prof.json", help="torchprof: where to write the Kineto trace")
    a = p.parse_args()

    import torch
    import hf_bench

    early = None
    if a.mode == "torchprof-early":
        from torch.profiler import ProfilerActivity, profile, schedule

        def export(prof):
            prof.export_chrome_trace(a.trace)

        early = profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=0, warmup=1 + a.warmup, active=a.steps, repeat=1),
            on_trace_ready=export,
        )
        early.start()
    cfg = hf_bench.build_config(hf_bench.read_config_json(a.config))
    model, _ = hf_bench.build_model(cfg, a.seed)
    gen = torch.Generator(device="cuda").manual_seed(a.seed)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device="cuda", generator=gen)

    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        past = out.past_key_values
        tok = out.logits[:, -1:].argmax(-1)

        def step():
            nonlocal past, tok
            o = model(input_ids=tok, past_key_values=past, use_cache=True)
            past = o.past_key_values
            tok = o.logits[:, -1:].argmax(-1)

        if early is not None:
            torch.cuda.synchronize()
            early.step()  # build + prefill: one warm-up step of the schedule
        for _ in range(a.warmup):
            step()
            if early is not None:
                torch.cuda.synchronize()
                early.step()
        torch.cuda.synchronize()
        res = {"mode": a.mode, "steps": a.steps, "batch": a.batch, "config": a.config}
        if early is not None:
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
                torch.cuda.synchronize()  # the last step's kernels complete inside the window
                early.step()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            early.stop()
        if a.mode.startswith("torchprof"):
            from torch.profiler import ProfilerActivity, profile

            if early is None:
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    t0 = time.perf_counter()
                    for _ in range(a.steps):
                        step()
                    torch.cuda.synchronize()
                    dt = time.perf_counter() - t0
                prof.export_chrome_trace(a.trace)
            with open(a.trace) as f:
                ev = json.load(f).get("traceEvents", [])
            res["kernels"] = sum(1 for e in ev if e.get("cat") == "kernel")
            res["memops"] = sum(1 for e in ev if e.get("cat") in ("gpu_memcpy", "gpu_memset"))
            with open(a.trace, "rb") as f, gzip.open(a.trace + ".gz", "wb") as g:
                g.write(f.read())
            os.remove(a.trace)
        else:
            torch.cuda.profiler.start()
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            torch.cuda.profiler.stop()
        res["decode_s"] = dt
        res["tok_per_s"] = a.batch * a.steps / dt
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
