#!/usr/bin/env python3
"""Multi-rank benchmarks (issue 34), each measured in one run on this machine.

1. Two ranks of one real trace against the trace alone: `gapscope report -q --ranks A B`
   (two copies of TRACE, read as ranks 0 and 1) alternating with `gapscope report -q TRACE`,
   REPEATS times each; the ratio of the medians.
2. W synthetic ranks of N kernels each (`synth_trace N OUT --rank R --world W`: an all-reduce
   after every attention and MLP): `gapscope report -q --max-events 0 DIR` on the directory
   of ranks, wall time and the child's peak RSS (os.wait4).

usage: ranks.py TRACE [--repeats 5] [--world 8] [--kernels 10000000] [--dir /tmp]
                [--gapscope target/release/gapscope] [--synth target/release/examples/synth_trace]
                [--keep]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return wall, ru.ru_maxrss / 1024


def spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--kernels", type=int, default=10_000_000)
    ap.add_argument("--synth-repeats", type=int, default=1)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--gapscope", default="target/release/gapscope")
    ap.add_argument("--synth", default="target/release/examples/synth_trace")
    ap.add_argument("--keep", action="store_true", help="keep the generated ranks")
    a = ap.parse_args()
    # 1. Two ranks of a real trace against one.
    pair = os.path.join(a.dir, "gapscope-ranks-pair")
    os.makedirs(pair, exist_ok=True)
    ext = ".json.gz" if a.trace.endswith(".gz") else os.path.splitext(a.trace)[1]
    copies = [os.path.join(pair, f"rank{r}{ext}") for r in (0, 1)]
    for c in copies:
        shutil.copyfile(a.trace, c)
    one, two = [], []
    for i in range(a.repeats):
        w1, r1 = timed([a.gapscope, "report", "-q", a.trace])
        w2, r2 = timed([a.gapscope, "report", "-q", "--ranks", *copies])
        one.append((w1, r1))
        two.append((w2, r2))
        print(json.dumps({"repeat": i, "one_s": w1, "two_s": w2, "one_mib": r1, "two_mib": r2}),
              flush=True)
    m1 = statistics.median(w for w, _ in one)
    m2 = statistics.median(w for w, _ in two)
    print(json.dumps({"pair": {"trace": a.trace, "one_s": spread([w for w, _ in one]),
                               "two_s": spread([w for w, _ in two]), "ratio": m2 / m1,
                               "one_mib": spread([r for _, r in one]),
                               "two_mib": spread([r for _, r in two])}}))
    print(f"one rank {m1:.3f} s ({min(w for w, _ in one):.3f}-{max(w for w, _ in one):.3f}), "
          f"two ranks {m2:.3f} s ({min(w for w, _ in two):.3f}-{max(w for w, _ in two):.3f}), "
          f"ratio {m2 / m1:.2f}, n={a.repeats}")
    shutil.rmtree(pair)
    # 2. W synthetic ranks of N kernels.
    if a.world <= 0:
        return
    d = os.path.join(a.dir, f"gapscope-ranks-{a.world}x{a.kernels}")
    os.makedirs(d, exist_ok=True)
    for r in range(a.world):
        p = os.path.join(d, f"rank{r}.gst")
        if not os.path.isdir(p):
            timed([a.synth, str(a.kernels), p, "--rank", str(r), "--world", str(a.world)])
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(d) for f in fs)
    runs = [timed([a.gapscope, "report", "-q", "--max-events", "0", d])
            for _ in range(a.synth_repeats)]
    w = [x for x, _ in runs]
    m = [x for _, x in runs]
    print(json.dumps({"ranks": {"world": a.world, "kernels_per_rank": a.kernels,
                                "bytes": size, "wall_s": spread(w), "peak_rss_mib": spread(m)}}))
    print(f"{a.world} ranks x {a.kernels:,} kernels ({size / 2**30:.2f} GiB): report "
          f"{statistics.median(w):.2f} s, peak RSS {statistics.median(m):.0f} MiB, "
          f"n={len(w)}")
    if not a.keep:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
