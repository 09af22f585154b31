#!/usr/bin/env python3
"""Writes a decode-like trace of N events, for the peak-memory benchmark (issue 31, class 10).

Kineto JSON (gzipped): per step one `decode_step` user annotation and its GPU copy, then
kernels of 40 distinct names, each with its `cudaLaunchKernel` on the host, correlated;
times advance like a 5 ms decode step. `--native DIR` converts it with `gapscope import`
afterwards (give the binary with `--gapscope`). stdlib only; written streaming.

Usage: make-large-trace.py OUT.json.gz --events N [--like REAL.json.gz]

`--like` repeats a real Kineto trace's events (shifted in time, copy after copy) up to N
events instead: the host scopes, launches and kernels of a real capture, in its proportions.
"""

import argparse
import gzip
import json

NAMES = [
    "void gemv_kernel<%d>(float const*, float*, int)" % i for i in range(20)
] + ["void at::native::elementwise_kernel<128, 4, op%d>(int)" % i for i in range(20)]


def events(n):
    per_step = 2 + 2 * 250
    steps = max(1, n // per_step)
    corr = 1
    t = 1_000_000.0
    for s in range(steps):
        start = t
        yield '{"ph":"X","cat":"user_annotation","name":"decode_step","pid":1,"tid":1,"ts":%.3f,"dur":4900}' % start
        yield '{"ph":"X","cat":"gpu_user_annotation","name":"decode_step","pid":0,"tid":7,"ts":%.3f,"dur":4900,"args":{"device":0,"stream":7}}' % (start + 5)
        for k in range(250):
            name = NAMES[k % len(NAMES)]
            ht = start + k * 19.0
            yield '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%.3f,"dur":4,"args":{"correlation":%d}}' % (ht, corr)
            yield '{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":%.3f,"dur":15,"args":{"device":0,"stream":7,"correlation":%d,"grid":[132,1,1],"block":[128,1,1]}}' % (name, ht + 10, corr)
            corr += 1
        t += 5000.0


KEPT = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
        "user_annotation", "gpu_user_annotation", "cpu_op", "python_function"}


def like(path, n):
    """The events of a real trace, repeated with their times shifted past the last copy."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    evs = [e for e in doc["traceEvents"] if e.get("cat") in KEPT and "ts" in e]
    t0 = min(float(e["ts"]) for e in evs)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in evs) - t0 + 1000.0
    written = 0
    copy = 0
    while written < n:
        for e in evs:
            if written >= n:
                return
            e2 = dict(e)
            e2["ts"] = float(e["ts"]) + copy * span
            # Each copy its own launches: correlation ids never repeat.
            if isinstance(e.get("args"), dict):
                a = dict(e["args"])
                for k in ("correlation", "External id"):
                    if isinstance(a.get(k), int):
                        a[k] += copy * 100_000_000
                e2["args"] = a
            yield json.dumps(e2, separators=(",", ":"))
            written += 1
        copy += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--events", type=int, required=True)
    ap.add_argument("--like")
    a = ap.parse_args()
    gen = like(a.like, a.events) if a.like else events(a.events)
    with gzip.open(a.out, "wt", compresslevel=3) as f:
        f.write('{"traceEvents":[')
        first = True
        for e in gen:
            if not first:
                f.write(",")
            f.write(e)
            first = False
        f.write("]}")


if __name__ == "__main__":
    main()
