#!/usr/bin/env python3
"""Feeds gapscope-record --from-spool mutated copies of a real spool (flipped bytes, cuts,
inserted garbage) and fails if any run panics or exits with anything but 0 or 2.

  python3 scripts/record/mutate-spool.py [--n 300] [--seed 7] [--bin target/release/gapscope-record]
"""
import argparse
import random
import subprocess
import sys
import tempfile
import os

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--n", type=int, default=300)
p.add_argument("--seed", type=int, default=7)
p.add_argument("--bin", default="target/release/gapscope-record")
p.add_argument("--spool", default="profiler/tests/data/plain-cuda13.0.spool")
a = p.parse_args()
src = open(a.spool, "rb").read()
rng = random.Random(a.seed)
bad = 0
with tempfile.TemporaryDirectory() as d:
    sp, out = os.path.join(d, "m.spool"), os.path.join(d, "m.gst")
    for i in range(a.n):
        b = bytearray(src)
        for _ in range(rng.randint(1, 20)):
            if len(b) <= 9:
                break
            op = rng.random()
            if op < 0.6:
                b[rng.randrange(8, len(b))] = rng.randrange(256)
            elif op < 0.7:
                del b[rng.randrange(8, len(b)):]
            else:
                j = rng.randrange(8, len(b))
                b[j:j] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        open(sp, "wb").write(b)
        subprocess.run(["rm", "-rf", out])
        r = subprocess.run([a.bin, "-q", "--from-spool", sp, "-o", out], capture_output=True, text=True)
        if r.returncode not in (0, 2) or "panicked" in r.stderr:
            bad += 1
            print(f"case {i}: exit {r.returncode}: {r.stderr[:300]}")
print(f"{a.n} mutated spools, {bad} bad exits")
sys.exit(1 if bad else 0)
