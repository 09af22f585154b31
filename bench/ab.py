#!/usr/bin/env python3
"""Time two gapscope binaries side by side on one trace: `report -q` runs alternate A, B,
A, B, ... so both see the same machine state; prints each one's median, min and max wall
time and the ratio of medians, and a JSON line (prefix `RESULT `).

  python3 bench/ab.py OLD_BIN NEW_BIN TRACE [--repeats 15] [--warmup 2] [-- extra report args]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time


def run(binary, trace, extra):
    t0 = time.perf_counter()
    subprocess.run([binary, "report", "-q", trace, *extra], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("trace")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("extra", nargs="*")
    args = p.parse_args()
    for _ in range(args.warmup):
        run(args.a, args.trace, args.extra)
        run(args.b, args.trace, args.extra)
    ta, tb = [], []
    for _ in range(args.repeats):
        ta.append(run(args.a, args.trace, args.extra))
        tb.append(run(args.b, args.trace, args.extra))
    out = {}
    for name, v in (("a", ta), ("b", tb)):
        out[name] = {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "n": len(v)}
        print(f"{name}: {getattr(args, name)}: median {statistics.median(v):.4f} s "
              f"(min {min(v):.4f}, max {max(v):.4f}, n={len(v)})")
    ratio = out["b"]["median_s"] / out["a"]["median_s"]
    print(f"b / a (medians): {ratio:.3f}")
    print("RESULT " + json.dumps({"trace": args.trace, **out, "ratio_b_over_a": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
