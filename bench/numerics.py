#!/usr/bin/env python3
"""Benchmark `gapscope numerics` (docs/BENCHMARKS.md#numerics): a float32 pair of
V-vocabulary, T-token dumps (default 128k x 4k: 2.1 GB each, 4.2 GB together), written once
with numpy, then compared REPEATS times from the page cache; wall time, logits throughput
and peak RSS (GNU time) per run, median and spread. Side by side, in the same loop: the
per-position KL, top-1 and next-token log-probabilities in numpy (float64, 64-row chunks
from a memory map: scripts/numerics-check.py's computation), the way these comparisons were
scripted before.

    python3 bench/numerics.py --dir /var/tmp/gs-numerics-bench [--vocab 131072 --tokens 4096]
"""
import argparse
import json
import os
import statistics
import subprocess
import struct
import sys
import time

import numpy as np


def write(path, tokens, rows, seed, vocab):
    rng = np.random.default_rng(seed)
    header = {
        "__metadata__": {"engine": f"bench seed {seed}", "model": "random", "dtype": "float32"},
        "tokens": {"dtype": "I64", "shape": [len(tokens)], "data_offsets": [0, 8 * len(tokens)]},
        "logits": {
            "dtype": "F32",
            "shape": [len(tokens), vocab],
            "data_offsets": [8 * len(tokens), 8 * len(tokens) + 4 * vocab * len(tokens)],
        },
    }
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(np.asarray(tokens, dtype="<i8").tobytes())
        for start in range(0, len(tokens), 64):
            n = min(64, len(tokens) - start)
            base = np.random.default_rng(start).standard_normal((n, vocab), dtype=np.float32) * 3
            f.write((base + rng.standard_normal((n, vocab), dtype=np.float32) * 0.05).astype("<f4").tobytes())


# The same per-position figures in numpy (float64), 64 rows at a time from a memory map.
NUMPY = r"""
import json, struct, sys
import numpy as np
def load(p):
    f = open(p, 'rb'); n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n))
    mm = np.memmap(p, dtype=np.uint8, mode='r')
    def t(name):
        e = h[name]; a, b = e['data_offsets']; raw = mm[8 + n + a: 8 + n + b]
        return raw.view('<f4' if e['dtype'] == 'F32' else '<i8').reshape(e['shape'])
    return t('tokens'), t('logits')
(tok, r_all), (_, o_all) = load(sys.argv[1]), load(sys.argv[2])
kl = 0.0
for s in range(0, r_all.shape[0], 64):
    r = r_all[s:s + 64].astype(np.float64); o = o_all[s:s + 64].astype(np.float64)
    r -= r.max(1, keepdims=True); o -= o.max(1, keepdims=True)
    r -= np.log(np.exp(r).sum(1, keepdims=True)); o -= np.log(np.exp(o).sum(1, keepdims=True))
    kl += (np.exp(r) * (r - o)).sum()
    top = (r.argmax(1) == o.argmax(1)).sum()
print(kl)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--vocab", type=int, default=131072)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--bin", default=os.environ.get("GAPSCOPE_BIN", "gapscope"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    tokens = np.random.default_rng(7).integers(0, a.vocab, a.tokens)
    paths = [os.path.join(a.dir, f"{n}.safetensors") for n in ("a", "b")]
    for seed, p in enumerate(paths):
        if not os.path.exists(p):
            write(p, tokens, a.tokens, seed + 1, a.vocab)
    size = sum(os.path.getsize(p) for p in paths)
    for p in paths:  # into the page cache
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    walls, rss, nwalls, nrss = [], [], [], []
    numpy_cmd = [sys.executable, "-c", NUMPY, *paths]
    for _ in range(a.repeats):
        for cmd, w, r in (
            ([a.bin, "numerics", *paths, "--json"], walls, rss),
            (numpy_cmd, nwalls, nrss),
        ):
            t0 = time.perf_counter()
            out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
            w.append(time.perf_counter() - t0)
            if out.returncode != 0:
                sys.exit(out.stderr)
            r.append(int(out.stderr.strip().splitlines()[-1]) / 1024)

    def line(name, w, r):
        med = statistics.median(w)
        return (
            f"{name}: wall {med:.2f} s (min {min(w):.2f}, max {max(w):.2f}), {size / med / 1e9:.2f} GB/s; "
            f"peak RSS {statistics.median(r):.0f} MiB (max {max(r):.0f})"
        )

    print(f"numerics {a.vocab} x {a.tokens} float32 pair ({size / 1e9:.2f} GB), {os.cpu_count()} cores, n={a.repeats}")
    print(line("gapscope numerics", walls, rss))
    print(line("numpy float64    ", nwalls, nrss))


if __name__ == "__main__":
    main()
