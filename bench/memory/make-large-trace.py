#!/usr/bin/env python3
"""Writes a decode-like trace of N events, for the peak-memory benchmark (issue 31, class 10).

Kineto JSON (gzipped): per step one `decode_step` user annotation and its GPU copy, then
kernels of 40 distinct names, each with its `cudaLaunchKernel` on the host, correlated;
times advance like a 5 ms decode step. `--native DIR` converts it with `gapscope import`
afterwards (give the binary with `--gapscope`). stdlib only; written streaming.

Usage: make-large-trace.py OUT.json.gz --events N
"""

import argparse
import gzip

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--events", type=int, required=True)
    a = ap.parse_args()
    with gzip.open(a.out, "wt", compresslevel=3) as f:
        f.write('{"traceEvents":[')
        first = True
        for e in events(a.events):
            if not first:
                f.write(",")
            f.write(e)
            first = False
        f.write("]}")


if __name__ == "__main__":
    main()
