#!/usr/bin/env python3
"""Scale benchmark: `gapscope report` on a synthetic native trace of N kernels.

Generates the trace with the `synth_trace` example when it is missing, then runs
`gapscope report -q` REPEATS times, reading wall time and the child's peak RSS
(os.wait4), and prints the median with min-max spread.

usage: scale.py [--kernels 10000000] [--repeats 5] [--dir /tmp] [--gapscope target/release/gapscope]
                [--synth target/release/examples/synth_trace] [--keep]
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
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return wall, ru.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--gapscope", default="target/release/gapscope")
    ap.add_argument("--synth", default="target/release/examples/synth_trace")
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    a = ap.parse_args()
    path = os.path.join(a.dir, f"gapscope-synth-{a.kernels}.gst")
    if not os.path.isdir(path):
        wall, _ = timed([a.synth, str(a.kernels), path])
        print(f"generated {path} in {wall:.1f} s", file=sys.stderr)
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    runs = []
    for i in range(a.repeats):
        # Past the default event limit on purpose: --max-events 0 lifts it.
        wall, rss = timed([a.gapscope, "report", "-q", "--max-events", "0", path])
        runs.append({"wall_s": wall, "peak_rss_mib": rss})
        print(json.dumps({"repeat": i, **runs[-1]}), flush=True)
    w = [r["wall_s"] for r in runs]
    m = [r["peak_rss_mib"] for r in runs]
    print(json.dumps({"summary": {
        "kernels": a.kernels, "trace_bytes": size,
        "wall_s": {"median": statistics.median(w), "min": min(w), "max": max(w), "n": len(w)},
        "peak_rss_mib": {"median": statistics.median(m), "min": min(m), "max": max(m)},
    }}))
    print(f"{a.kernels:,} kernels ({size / 2**30:.2f} GiB): report {statistics.median(w):.2f} s "
          f"(min {min(w):.2f}, max {max(w):.2f}, n={len(w)}), peak RSS {statistics.median(m):.0f} MiB")
    if not a.keep:
        shutil.rmtree(path)


if __name__ == "__main__":
    main()
